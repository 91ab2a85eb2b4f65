"""Symbolic inputs for the obligations: z3 exp-domain summaries, states and comparisons.

Everything here builds *inputs* and *claims*; the algorithm itself is always the reference
(``flashproof.verified``) run on ``Z3ExpNum``. In the exp domain a score is its weight w = e^s ≥ 0
(assumption A-EXP-ISO), so a summary of a nonempty set is (A, ℓ, z) with A = e^m > 0.
"""
from __future__ import annotations

import z3

from flashproof.verified.attention import Summary
from flashproof.verified.expdomain import Z3ExpNum

__all__ = ["num", "summary", "summary_eq", "reals", "And", "Represents"]


def num() -> Z3ExpNum:
    return Z3ExpNum()


def reals(prefix: str, k: int) -> list:
    """k fresh z3 reals ``prefix0 … prefix{k-1}``."""
    return [z3.Real(f"{prefix}{i}") for i in range(k)]


def summary(name: str, v: int, *, flag=True) -> tuple[Summary, list]:
    """A symbolic summary (A, ℓ, z) of width v for a nonempty set and its well-formedness
    hypotheses A > 0, ℓ > 0. ``flag`` may be a z3 Bool (then the hypotheses hold when it does)."""
    A, l = z3.Real(f"{name}_A"), z3.Real(f"{name}_l")
    z = reals(f"{name}_z", v)
    s = Summary(A, l, z, flag)
    hyp = [A > 0, l > 0]
    if not isinstance(flag, bool):
        hyp = [z3.Implies(flag, z3.And(*hyp))]
    return s, hyp


def summary_eq(a: Summary, b: Summary):
    """Coordinatewise equality of two summaries (m, ℓ, every z)."""
    parts = [a.m == b.m, a.l == b.l] + [x == y for x, y in zip(a.z, b.z)]
    return z3.And(*parts)


def And(*xs):
    xs = [x for x in xs if x is not True]
    return z3.And(*xs) if xs else z3.BoolVal(True)


class Represents:
    """The summary invariant over block sums, independent of n and b.

    A state (A, ℓ, z, flag) *represents* a key set with weight total P = Σ w, weighted value totals
    R = Σ w·v and maximum weight Mx when: flag ⇒ (A = Mx > 0, P ≥ Mx, A·ℓ = P, A·z = R) and ¬flag ⇒
    (P = 0, R = 0, Mx = 0). A·ℓ = P is m + log ℓ = log Σ e^s read in the exp domain; P ≥ Mx says the
    maximum is one of the summed weights (so ℓ ≥ 1)."""

    @staticmethod
    def holds(s: Summary, P, R: list, Mx):
        flag = s.nonempty
        ne = z3.And(s.m == Mx, Mx > 0, P >= Mx, s.m * s.l == P, *[s.m * za == r for za, r in zip(s.z, R)])
        em = z3.And(P == 0, Mx == 0, *[r == 0 for r in R])
        if isinstance(flag, bool):
            return ne if flag else em
        return z3.If(flag, ne, em)
