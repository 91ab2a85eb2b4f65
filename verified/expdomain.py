"""The exp domain: scores represented by their weights w = e^s ≥ 0.

Under the substitution φ(s) = e^s (assumption ``A-EXP-ISO``: φ is an order isomorphism from
(ℝ ∪ {−∞}, +, ≤) onto (ℝ≥0, ·, ≤)) every score operation of the reference becomes rational:

====================  =====================
log domain            exp domain
====================  =====================
s − m                 w / W
m + log ℓ             W · ℓ
max(s, t)             max(w, u)
exp(s)                w
log(ℓ)                ℓ (as a weight)
−∞, 0                 0, 1
====================  =====================

Linear values (V, ℓ, z, Y) are unchanged. The reference's scores therefore have to be *given*
(as weights) rather than computed from Q and K: use the ``*_from_scores`` entry points.

Two bases: ``fraction`` (exact rationals, for exhaustive enumeration) and ``z3`` (real terms, for
proofs; conditions become z3 formulas and ``where`` becomes ``If``).
"""
from __future__ import annotations

import math
from fractions import Fraction

from .numbers import NumberSystem, register


class _ExpDomainScores:
    """Score operations in the exp domain, shared by both bases."""

    def to_score(self, x):
        raise TypeError(f"the {self.name} number system takes scores as weights w = e^s; it cannot "
                        "read a linear value as a score. Call the *_from_scores functions.")

    def score_const(self, x):
        if x == float("-inf"):
            return self.const(0)
        if x == 0:
            return self.const(1)
        raise ValueError(f"the exp domain can only name the scores -inf and 0 exactly, got {x!r}")

    def score_sub(self, a, b):
        return self.div(a, b)

    def score_add(self, a, b):
        return self.mul(a, b)

    def score_ge(self, a, b):
        return self.ge(a, b)

    def exp(self, s):
        return s

    def log(self, x):
        return x


class FractionExpNum(_ExpDomainScores, NumberSystem):
    """Exact rationals in the exp domain."""

    name = "fraction"

    def const(self, x):
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"Fraction has no {x!r}")
        return Fraction(x)


class Z3ExpNum(_ExpDomainScores, NumberSystem):
    """z3 real terms in the exp domain. Conditions are z3 ``BoolRef``s; Python bools are accepted
    and folded eagerly, so a concrete mask produces no ``If`` at all."""

    name = "z3"
    symbolic = True

    def __init__(self):
        import z3

        self.z3 = z3

    def const(self, x):
        if isinstance(x, float):
            if not math.isfinite(x):
                raise ValueError(f"z3 reals have no {x!r}")
            x = Fraction(x)
        if isinstance(x, Fraction):
            return self.z3.RealVal(f"{x.numerator}/{x.denominator}")
        if isinstance(x, int):
            return self.z3.RealVal(x)
        return x  # already a term

    def _is_bool(self, c):
        return isinstance(c, bool)

    def true(self):
        return True

    def false(self):
        return False

    def and_(self, a, b):
        if self._is_bool(a):
            return b if a else False
        if self._is_bool(b):
            return a if b else False
        return self.z3.And(a, b)

    def or_(self, a, b):
        if self._is_bool(a):
            return True if a else b
        if self._is_bool(b):
            return True if b else a
        return self.z3.Or(a, b)

    def not_(self, a):
        return (not a) if self._is_bool(a) else self.z3.Not(a)

    def where(self, cond, a, b):
        if self._is_bool(cond):
            return a if cond else b
        return self.z3.If(cond, a, b)


register("fraction", FractionExpNum)
register("z3", Z3ExpNum)
