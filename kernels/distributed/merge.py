"""The merge of partial results over disjoint key sets: the page's ⋆, with one normalisation at the end.

A partial (out, lse) of a key set S is the normalised summary of S: m = lse, ℓ = 1, z = out (it
represents S because e^lse = Σ_S e^s and out = Σ_S e^{s − lse} v). The accumulator is a summary
(m, ℓ, z) of everything merged so far; ``merge`` is ⋆ of the accumulator and a normalised partial
(items DEF-SUMMARY, EXT-ANY-ORDER), ``finish`` the final normalisation:

    m' = max(m, lse_b);  α = e^{m − m'};  β = e^{lse_b − m'};  ℓ' = α ℓ + β;  z' = α z + β out_b
    finish:  out = z / ℓ,  lse = m + log ℓ

Normalising only once keeps lse's rounding to one log, like the single-device kernel: re-normalising
after every merge (lse = m' + log ℓ' each time) adds one rounding of |lse| per merged block. ⊥ (the
empty set) is (m −∞, ℓ 0, z 0): it has weight 0, and when both sides are ⊥ no (−∞) − (−∞) is formed.
The caller keeps the accumulator in float32 (float64 for float64 inputs).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["Acc", "bottom", "merge", "finish"]


class Acc(NamedTuple):
    """A summary of the key set merged so far: m, ℓ (B, H, n) and z (B, H, n, Dv)."""

    m: torch.Tensor
    l: torch.Tensor
    z: torch.Tensor


def bottom(shape, dv: int, dtype: torch.dtype, device) -> Acc:
    """⊥ for rows of ``shape`` (B, H, n): m −inf, ℓ 0, z (B, H, n, dv) zeros."""
    return Acc(torch.full(tuple(shape), float("-inf"), dtype=dtype, device=device),
               torch.zeros(tuple(shape), dtype=dtype, device=device),
               torch.zeros(*shape, dv, dtype=dtype, device=device))


def merge(acc: Acc, out_b: torch.Tensor, lse_b: torch.Tensor) -> Acc:
    """acc ⋆ (out_b, lse_b), in the accumulator's dtype. out_b (B, H, n, Dv), lse_b (B, H, n)."""
    out_b, lse_b = out_b.to(acc.z.dtype), lse_b.to(acc.z.dtype)
    m = torch.maximum(acc.m, lse_b)                                   # (B, H, n)
    ref = torch.where(torch.isfinite(m), m, torch.zeros_like(m))      # both ⊥: shift by 0, weights stay 0
    alpha, beta = torch.exp(acc.m - ref), torch.exp(lse_b - ref)      # ≤ 1; e^{−∞} = 0 for a ⊥ side
    return Acc(m, alpha * acc.l + beta, alpha.unsqueeze(-1) * acc.z + beta.unsqueeze(-1) * out_b)


def finish(acc: Acc) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse): z / ℓ and m + log ℓ; a row that is still ⊥ gets out 0 and lse −inf."""
    nonempty = acc.l > 0
    safe = torch.where(nonempty, acc.l, torch.ones_like(acc.l))
    lse = torch.where(nonempty, acc.m + torch.log(safe), torch.full_like(safe, float("-inf")))
    return acc.z / safe.unsqueeze(-1), lse
