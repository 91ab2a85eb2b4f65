"""The verified sampler reference: policies, the fixed-point float draw vs the exact draw, greedy,
and the branching backend (the speculative obligations' outcomes are checked in
tests/proofs/test_speculative_obligations.py)."""
from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from flashproof.proofs.support.distribution_tables import PrefixTables
from flashproof.verified import speculative as sp
from flashproof.verified.branching import BranchingNum, canonical, emission_law

U_MAX32 = 1 - 2.0 ** -24


def test_p_target_zero_never_accepted_even_at_u_zero():
    step = sp.rejection_step([0.0, 1.0], [0.5, 0.5], 0, 0.0, 0.0)
    assert step == sp.Step(1, False)


def test_p_draft_zero_accepts_iff_p_target_positive():
    assert sp.rejection_step([0.5, 0.5], [0.0, 1.0], 0, U_MAX32, 0.3).accepted
    assert not sp.rejection_step([0.0, 1.0], [0.0, 1.0], 0, 0.0, 0.3).accepted


def test_equal_rows_never_reject_and_empty_residual_falls_back_to_target():
    row = [0.25, 0.75, 0.0]
    for u in (0.0, 0.5, U_MAX32):
        assert sp.rejection_step(row, row, 1, u, 0.9).accepted
    # drafted token outside both supports: rejected, residual empty -> drawn from p_target
    law = canonical(emission_law(lambda n: sp.rejection_step([Fraction(1, 4), Fraction(3, 4), 0],
                                                             [Fraction(1, 4), Fraction(3, 4), 0], 2,
                                                             n.uniform(), n.uniform(), num=n)))
    assert law == {sp.Step(0, False): Fraction(1, 4), sp.Step(1, False): Fraction(3, 4)}


@given(st.lists(st.integers(0, 64), min_size=1, max_size=12).filter(lambda w: sum(w) > 0),
       st.integers(0, 2 ** 20 - 1))
def test_fixed_point_draw_equals_exact_draw_on_dyadic_inputs(w, ui):
    """Weights k/2^10 and uniforms k/2^20 are exact in the fixed point, so the float draw (integer
    weights, integer threshold) must pick the same token as the exact Fraction draw."""
    t = sum(w)
    weights = [x / 1024 for x in w]
    exact = sp.inverse_cdf(sp.resolve("fraction"), [Fraction(x, 1024) for x in w], Fraction(ui, 2 ** 20))
    assert sp.inverse_cdf(sp.resolve("float"), weights, ui / 2 ** 20) == exact
    assert w[exact] > 0 and t > 0


def test_float_draw_bias_is_within_the_stated_bound():
    """Exact law of the fixed-point draw over a fine uniform grid vs the weights: |Δ| ≤ 2^-31 + V·2^-40."""
    rng = random.Random(0)
    weights = [rng.random() for _ in range(7)]
    total = sum(weights)
    weights = [x / total for x in weights]
    grid = 2 ** 16
    hits = [0] * 7
    for i in range(grid):
        hits[sp.inverse_cdf(sp.resolve("float"), weights, i / grid)] += 1
    for y in range(7):
        assert abs(hits[y] / grid - weights[y]) <= 1 / grid + 2 ** -31 + 7 * 2 ** -40


def test_greedy_is_the_target_argmax_chain():
    rows_t = [[0.1, 0.6, 0.3], [0.5, 0.5, 0.0], [0.2, 0.2, 0.6]]
    out = sp.verify([1, 0], rows_t, None, sp.CycleUniforms([], None, None), greedy=True)
    assert out == sp.SpecStep((1, 0, 2), 2)  # ties go to the first argmax
    out = sp.verify([2, 0], rows_t, None, sp.CycleUniforms([], None, None), greedy=True)
    assert out == sp.SpecStep((1,), 0)


def test_greedy_cycle_equals_greedy_target_decoding():
    tab = PrefixTables(3, 4, shape="random")
    out = sp.speculative_cycle((), 3, tab.p_target, tab.p_draft, sp.CycleUniforms([], None, None), greedy=True)
    seq: tuple = ()
    for _ in range(len(out.tokens)):
        row = tab.p_target(seq)
        seq += (max(range(3), key=lambda y: (row[y], -y)),)
    assert out.tokens == seq


def test_branching_reused_uniform_is_correlated():
    """Two decisions on ONE uniform: P(u < 1/2 and u < 1/3) = 1/3, not 1/6."""
    def run(num):
        u = num.uniform()
        return num.gt(Fraction(1, 2), u), num.gt(Fraction(1, 3), u)

    law = canonical(emission_law(run))
    assert law == {(True, True): Fraction(1, 3), (True, False): Fraction(1, 6), (False, False): Fraction(1, 2)}


def test_branching_rejects_arithmetic_it_cannot_model():
    num = BranchingNum()
    u = num.uniform()
    with pytest.raises(TypeError, match="decision"):
        num.ge(u, Fraction(1, 2))
    with pytest.raises(TypeError, match="scaled once"):
        num.mul(num.mul(u, Fraction(1, 2)), Fraction(1, 3))


def test_symbolic_number_system_is_refused_without_branching():
    with pytest.raises(TypeError, match="branching"):
        sp.inverse_cdf(sp.resolve("z3"), [1, 1], 0.5)
