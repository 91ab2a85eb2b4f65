"""Planted bugs for the speculative obligations: each is ``verify``'s ``Rules`` with ONE field
replaced. The replacing function's one-line docstring names the bug (the class of a known
production bug); ``bonus_after_rejection`` flips a flag, named by its ``#:`` comment."""
from __future__ import annotations

import math
from fractions import Fraction

from flashproof.verified import speculative as sp

__all__ = ["MUTANTS", "always_accept", "residual_is_target", "residual_softmax", "ratio_inverted",
           "bonus_after_rejection", "uniform_reused"]


def _always_accept(num, p_target_x, p_draft_x, u):
    """Every draft is accepted (a stubbed uniform u = 0 with a ≤ test)."""
    return True


def _residual_is_target(num, p_target_row, p_draft_row):
    """On rejection, draw from p_target instead of norm(max(0, p_target − p_draft))."""
    return list(p_target_row)


def _residual_softmax(num, p_target_row, p_draft_row):
    """On rejection, draw from softmax(p_target − p_draft) (exp rounded to a rational; concrete only)."""
    out = []
    for pt, pd in zip(p_target_row, p_draft_row):
        out.append(num.const(Fraction(math.exp(float(pt) - float(pd)))))
    return out


def _ratio_inverted(num, p_target_x, p_draft_x, u):
    """Accept with probability min(1, p_draft/p_target) instead of min(1, p_target/p_draft)."""
    return num.gt(p_draft_x, num.mul(u, p_target_x))


def _uniform_reused(uniforms, i):
    """Position 0's accept uniform is reused at every position (one draw for all k decisions)."""
    return uniforms.accept[0]


always_accept = sp.RULES._replace(accept=_always_accept)
residual_is_target = sp.RULES._replace(residual=_residual_is_target)
residual_softmax = sp.RULES._replace(residual=_residual_softmax)
ratio_inverted = sp.RULES._replace(accept=_ratio_inverted)
#: After a rejection, also emit a "bonus" token from the next target row.
bonus_after_rejection = sp.RULES._replace(bonus_after_rejection=True)
uniform_reused = sp.RULES._replace(accept_uniform=_uniform_reused)

MUTANTS = {
    "always-accept": always_accept,
    "residual-is-target": residual_is_target,
    "residual-softmax": residual_softmax,
    "ratio-inverted": ratio_inverted,
    "bonus-after-rejection": bonus_after_rejection,
    "uniform-reused": uniform_reused,
}
