"""Mutants of the floating-point error bound (EXT-FP-ERROR): a formula, an error model and a
reference step, each wrong in one place."""
from __future__ import annotations

from flashproof.verified import fp_bound
from flashproof.verified.attention import Summary
from flashproof.verified.numbers import resolve

_terms = fp_bound.terms


def terms_without_nk(n_k, d, block, fmt, *, mq, mk, scale):
    """the bound's relative errors forget the n_k growth: as if every row had one block of b keys."""
    return _terms(min(n_k, block), d, block, fmt, mq=mq, mk=mk, scale=scale)


#: the error model's unit roundoffs halved (u/2 instead of u): fl(x) = x(1+δ), |δ| ≤ 2^-p−1
HALF_UNITS = {fmt: (e, s, 2.0 ** -(s + 1)) for fmt, (e, s, _) in (("fp32", (8, 24, 0)), ("bf16", (8, 8, 0)),
                                                                   ("fp16", (5, 11, 0)))}


def summarize_no_max(scores, values, num=None, *, allowed=None):
    """summarize exponentiates the raw scores (no subtraction of the block maximum; m reported as 0)."""
    num = resolve(num)
    flags = [num.true()] * len(scores) if allowed is None else list(allowed)
    v = len(values[0])
    neg_inf = num.score_neg_inf()
    zero = num.score_zero()
    l, z = num.zero(), [num.zero() for _ in range(v)]
    for s, vj, f in zip(scores, values, flags):
        p = num.exp(num.where(f, num.score_sub(s, zero), neg_inf))
        l = num.add(l, p)
        z = [num.where(f, num.add(za, num.mul(p, va)), za) for za, va in zip(z, vj)]
    return Summary(zero, l, z, num.any_(flags))
