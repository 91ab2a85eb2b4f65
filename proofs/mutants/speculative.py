"""Planted bugs for the speculative obligations: each is ``verify``'s ``Rules`` with ONE field
replaced. The replacing function's one-line docstring names the bug (the class of a known
production bug); ``bonus_after_rejection`` flips a flag, named by its ``#:`` comment.

Below ``MUTANTS``: replacements for one function of the reference outside ``Rules`` (greedy's
argmax, the fixed-point draw), patched in by their controls like the attention mutants."""
from __future__ import annotations

import math
from fractions import Fraction

from flashproof.verified import speculative as sp

__all__ = ["MUTANTS", "always_accept", "residual_is_target", "residual_softmax", "ratio_inverted",
           "bonus_after_rejection", "uniform_reused", "one_hot_first_draft", "first_argmax_last_on_ties",
           "quantize_rounded", "threshold_rounded"]


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


def _one_hot_first_draft(num, draft_tokens, p_draft_rows, i, V):
    """With p_draft=None, every position's one-hot draft row is built at draft 0's token."""
    if p_draft_rows is None:
        return [num.one() if y == draft_tokens[0] else num.zero() for y in range(V)]
    return [num.const(v) for v in p_draft_rows[i]]


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
one_hot_first_draft = sp.RULES._replace(draft_row=_one_hot_first_draft)

MUTANTS = {
    "always-accept": always_accept,
    "residual-is-target": residual_is_target,
    "residual-softmax": residual_softmax,
    "ratio-inverted": ratio_inverted,
    "bonus-after-rejection": bonus_after_rejection,
    "uniform-reused": uniform_reused,
    "one-hot-first-draft": one_hot_first_draft,
}


def first_argmax_last_on_ties(num, row):
    """Greedy's argmax returns the last index of a tied maximum instead of the first."""
    best, best_v = 0, row[0]
    for y in range(1, len(row)):
        better = num.ge(row[y], best_v)
        best, best_v = num.where(better, y, best), num.where(better, row[y], best_v)
    return best


def quantize_rounded(num, w):
    """The fixed-point draw rounds each weight to the nearest integer W = round(w·2^40) instead of flooring."""
    return round(w * 2.0 ** sp.WEIGHT_BITS)


def threshold_rounded(num, u, total):
    """The fixed-point draw rounds the uniform, U = round(u·2^31), instead of flooring it."""
    return (round(u * 2.0 ** sp.UNIFORM_BITS) * total) >> sp.UNIFORM_BITS
