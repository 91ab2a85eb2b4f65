"""Exact rationals with exp and log replaced by fixed rational functions ("uninterpreted").

For checks about *where* the reference sends its terms (which pair updates which accumulator, the
shapes it allocates), not about what exp is: every arithmetic step is exact (``Fraction``), so two
computations agree exactly when they add the same terms, and exp(s) = 1/(1 + s²), log(x) = x − 1
are cheap stand-ins that keep everything rational. The score −∞ is the float ``-inf`` (exp gives 0).
"""
from __future__ import annotations

import math
from fractions import Fraction

from flashproof.verified.numbers import NumberSystem

__all__ = ["UFRationalNum"]


class UFRationalNum(NumberSystem):
    """Fractions; exp(s) = 1/(1 + s²) (0 at −∞), log(x) = x − 1 (−∞ at 0)."""

    name = "uf-rational"

    def const(self, x):
        if isinstance(x, float) and math.isinf(x):
            return x
        return Fraction(x)

    def score_add(self, a, b):
        return a + b  # −∞ + finite stays the float −∞

    def exp(self, s):
        if s == float("-inf"):
            return Fraction(0)
        return 1 / (1 + Fraction(s) ** 2)

    def log(self, x):
        return float("-inf") if x == 0 else Fraction(x) - 1
