"""The theorem's right-hand side, written once for the obligations that compare the reference with it.

``dense_row(w, vals, flags)`` is one query row in the exp domain (w = e^s > 0) with v = 1:
(Σ_{j∈A} w_j·v_j, Σ_{j∈A} w_j) as z3 terms, A the keys whose flag holds (a flag may be a z3 Bool
or a Python bool); the dense output is the first over the second.
"""
from __future__ import annotations

import z3

__all__ = ["dense_row"]


def _masked(x, f):
    if isinstance(f, bool):
        return x if f else z3.RealVal(0)
    return z3.If(f, x, 0)


def dense_row(w, vals, flags):
    """(Σ_A w·v, Σ_A w) for one row: w, vals, flags of equal length k ≥ 1."""
    den = z3.Sum([_masked(x, f) for x, f in zip(w, flags)])
    num = z3.Sum([_masked(x * y, f) for x, y, f in zip(w, vals, flags)])
    return num, den
