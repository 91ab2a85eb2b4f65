"""The merge of two partial results over disjoint key sets, in (out, lse) form.

A partial (out, lse) of a key set S is the normalised summary of S: m = lse, ℓ = 1, z = out (it
represents S because e^lse = Σ_S e^s and out = Σ_S e^{s − lse} v). Merging two of them is the page's
⋆ followed by the final normalisation (items DEF-SUMMARY, EXT-ANY-ORDER):

    m' = max(lse_a, lse_b);  ℓ' = e^{lse_a − m'} + e^{lse_b − m'};  z' = e^{lse_a − m'} out_a + e^{lse_b − m'} out_b
    lse = m' + log ℓ';  out = z' / ℓ'

⊥ (the empty set) is (out 0, lse −∞): its weight is 0, and when both sides are ⊥ the result is ⊥ with
no (−∞) − (−∞) evaluated. The caller keeps the accumulator in float32 (float64 for float64 inputs).
"""
from __future__ import annotations

import torch

__all__ = ["bottom", "merge"]


def bottom(shape, dv: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """⊥ for rows of ``shape`` (B, H, n): out (B, H, n, dv) zeros and lse (B, H, n) −inf."""
    return (torch.zeros(*shape, dv, dtype=dtype, device=device),
            torch.full(tuple(shape), float("-inf"), dtype=dtype, device=device))


def merge(out_a, lse_a, out_b, lse_b) -> tuple[torch.Tensor, torch.Tensor]:
    """(out_a, lse_a) ⋆ (out_b, lse_b) in the accumulator's dtype (that of ``out_a``).

    out_* (B, H, n, Dv), lse_* (B, H, n); out_b/lse_b are converted to the accumulator dtype."""
    acc = out_a.dtype
    out_b, lse_b = out_b.to(acc), lse_b.to(acc)
    m = torch.maximum(lse_a, lse_b)                                   # (B, H, n)
    ref = torch.where(torch.isfinite(m), m, torch.zeros_like(m))      # both ⊥: shift by 0, weights stay 0
    wa, wb = torch.exp(lse_a - ref), torch.exp(lse_b - ref)           # ≤ 1, one of them is 1 unless both ⊥
    ell = wa + wb
    nonempty = ell > 0
    safe = torch.where(nonempty, ell, torch.ones_like(ell))
    lse = torch.where(nonempty, ref + torch.log(safe), torch.full_like(ell, float("-inf")))
    out = (wa / safe).unsqueeze(-1) * out_a + (wb / safe).unsqueeze(-1) * out_b
    return out, lse
