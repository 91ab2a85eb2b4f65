"""Dropout on the attention probabilities, with the realised mask as an input.

The theorem page's reverse procedure ends with a remark: the base algorithm has no dropout, and
any dropout extension must replay the same realised mask in its reverse pass. This module is
that extension's data. The dropped-out map is

    P_ij = e^{s_ij} / Σ_{k∈A_i} e^{s_ik}          (the undropped softmax: m, ℓ, lse are its statistics)
    r_ij = M_ij / (1 − p)                          (keep bit M_ij ∈ {0, 1}, keep probability 1 − p)
    Y_i  = Σ_{j∈A_i} r_ij P_ij V_j

and its exact reverse pass reuses the SAME r_ij: dV_j += r_ij P_ij G_i, dP_ij = r_ij ⟨G_i, V_j⟩, and
γ_ij = P_ij (dP_ij − δ_i) with δ_i = Σ_j P_ij dP_ij = ⟨G_i, Y_i⟩ (still the row sum of G ∘ Y, now with
the dropped-out Y). The mask is a value the caller owns; where its bits come from (a counter-based
generator, in the kernels) is not this module's concern.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, NamedTuple, Sequence

from . import validate

__all__ = ["Dropout", "factors"]


class Dropout(NamedTuple):
    """keep: (n_q, n_k) keep bits M_ij (1 kept, 0 dropped; a number-system value may stand for a bit,
    e.g. a symbol in a proof); p: the drop probability, 0 ≤ p < 1 when it is a concrete number (a
    symbol is taken as is). Kept entries are scaled by 1/(1 − p)."""

    keep: Sequence
    p: Any


def _concrete(x: Any) -> bool:
    return isinstance(x, (int, float, Fraction))  # bool is an int


def check(dropout: Any, n_q: int, n_k: int) -> None:
    """ValueError unless ``dropout`` is a ``Dropout`` with an (n_q, n_k) keep matrix whose concrete
    entries are 0 or 1 and a concrete p (if concrete) in [0, 1)."""
    if not isinstance(dropout, Dropout):
        raise ValueError(f"dropout must be None or a Dropout(keep, p), received {type(dropout).__name__}")
    validate.matrix("dropout.keep", dropout.keep, rows=n_q, cols=n_k)
    for i, row in enumerate(dropout.keep):
        for j, bit in enumerate(row):
            if _concrete(bit) and bit not in (0, 1):
                raise ValueError(f"dropout.keep[{i}][{j}] = {bit!r}; keep bits must be 0 (dropped) or 1 (kept)")
    p = dropout.p
    if isinstance(p, bool):
        raise ValueError(f"dropout.p must be a number in [0, 1), received {p!r}")
    if _concrete(p) and not 0 <= p < 1:
        raise ValueError(f"dropout.p must lie in [0, 1) (1/(1 − p) scales the kept entries), received {p!r}")


def factors(dropout: Dropout, num, n_q: int, n_k: int) -> Callable[[int, int], Any]:
    """r(i, j) = M_ij · 1/(1 − p) in the number system ``num`` (the multiplier of P_ij)."""
    check(dropout, n_q, n_k)
    inv_keep = num.div(num.one(), num.sub(num.one(), num.const(dropout.p)))
    bits = [[num.const(x) for x in row] for row in dropout.keep]
    return lambda i, j: num.mul(bits[i][j], inv_keep)
