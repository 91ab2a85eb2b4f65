"""The proof-only number systems and enclosures added for issue 15 do what the obligations rely on."""
from __future__ import annotations

import random
from fractions import Fraction

import mpmath
import pytest
import z3

from flashproof.proofs.numbers.fptrace import FPTraceNum
from flashproof.proofs.numbers.ufrational import UFRationalNum
from flashproof.proofs.support.exact_exp import exp_bounds


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 3), Fraction(-1, 10), Fraction(25), Fraction(-700),
                               Fraction(2, 7), Fraction(-1999, 2)])
def test_exp_bounds_enclose_a_150_digit_exp_and_are_tight(x):
    ctx = mpmath.MPContext()
    ctx.dps = 150
    e = ctx.exp(ctx.mpf(x.numerator) / x.denominator)
    lo, hi = exp_bounds(x)
    assert ctx.mpf(lo.numerator) / lo.denominator <= e <= ctx.mpf(hi.numerator) / hi.denominator
    assert (hi - lo) <= lo * Fraction(1, 2**380)


def test_exp_bounds_refuse_arguments_outside_their_range():
    with pytest.raises(ValueError, match="2000"):
        exp_bounds(Fraction(2001))


def test_uf_rational_is_exact_and_maps_minus_infinity_to_zero():
    N = UFRationalNum()
    assert N.exp(N.score_neg_inf()) == 0
    assert N.exp(Fraction(1, 2)) == Fraction(4, 5)
    assert N.const(Fraction(1, 3)) == Fraction(1, 3)
    assert N.log(N.zero()) == float("-inf")


def test_fp_trace_follows_dependence_through_exp_arguments():
    N = FPTraceNum("fp16")
    a, p = N.var("a"), N.var("poison_p")
    through_exp = N.mul(N.exp(N.sub(a, p)), a)
    assert N.depends_on(through_exp, {"poison_p"}) == {"poison_p"}
    clean = N.add(N.exp(a), N.log(a))
    assert N.depends_on(clean, {"poison_p"}) == set()
    symbolic_guard = z3.If(z3.Bool("f"), p, a)  # dependence is syntactic: a symbolic If mentions p
    assert N.depends_on(symbolic_guard, {"poison_p"}) == {"poison_p"}


def test_fp_trace_depends_on_ignores_python_values():
    assert FPTraceNum("fp16").depends_on(random.random(), {"x"}) == set()
