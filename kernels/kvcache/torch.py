"""The torch path of ``attention_with_kvcache`` (CPU, and the readable form of the Triton kernel).

Per request it does what the kernel does, in the same order: gather the candidate keys
[lo, L) (through the page table when paged), cut them into ``call.num_splits`` splits with
``plan.split_range``, attend each split with the query heads of one KV head packed together
(rows r = g·Nq + i), and merge the partial (out, lse) pairs with ``merge_partials`` — the
summary merge rule in float32 (float64 for float64 inputs).
"""
from __future__ import annotations

import torch

from . import plan
from .api import _lo

__all__ = ["forward", "merge_partials", "gather", "split_attention", "TORCH_BLOCK"]

#: The tile size the torch path aligns its splits to (the Triton kernel uses its own BLOCK_N).
TORCH_BLOCK = 16


def gather(cache: torch.Tensor, b: int, lo: int, hi: int, page_size: int, table) -> torch.Tensor:
    """Positions lo..hi−1 of request b → (Hkv, hi − lo, D). Contiguous cache (B, Hkv, Nmax, D) or
    paged (num_pages, page_size, Hkv, D) with ``table`` (B, max_pages); only the pages that hold
    those positions are touched."""
    if not page_size:
        return cache[b, :, lo:hi]
    first, last = lo // page_size, -(-hi // page_size)
    pages = table[b, first:last].long()                                        # (P,)
    rows = cache[pages].reshape(-1, cache.shape[2], cache.shape[3])           # (P·page_size, Hkv, D)
    return rows[lo - first * page_size:hi - first * page_size].transpose(0, 1)  # (Hkv, hi − lo, D)


def split_attention(q, k, v, allowed, scale):
    """One split: q (Hkv, M, D) packed rows, k (Hkv, n, D), v (Hkv, n, Dv), allowed (M, n) →
    out (Hkv, M, Dv) normalised over the split, lse (Hkv, M); a row with no allowed key gets 0, −inf."""
    s = (q @ k.transpose(-1, -2)) * scale                                     # (Hkv, M, n)
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(dim=-1, keepdim=True) if s.shape[-1] else s.new_full((*s.shape[:-1], 1), float("-inf"))
    m_ref = torch.where(torch.isneginf(m), torch.zeros_like(m), m)             # never (−∞) − (−∞)
    p = torch.exp(s - m_ref)                                                  # masked keys: 0
    l = p.sum(dim=-1, keepdim=True)                                           # (Hkv, M, 1)
    out = torch.where(l > 0, (p @ v) / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(l))
    lse = torch.where(l > 0, m_ref + torch.log(l), torch.full_like(l, float("-inf")))
    return out, lse.squeeze(-1)


def merge_partials(outs: torch.Tensor, lses: torch.Tensor):
    """The merge rule over S disjoint splits: lse = log Σ_s e^{lse_s}, out = Σ_s e^{lse_s − lse} out_s,
    computed with the largest lse as the rescale reference; an empty split (lse −∞) has weight 0 and
    a row empty in every split gets out 0, lse −∞. outs (S, …, Dv), lses (S, …) → (…, Dv), (…)."""
    m = lses.amax(dim=0)                                                      # (…)
    m_ref = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    w = torch.exp(lses - m_ref)                                               # (S, …), 0 for empty splits
    den = w.sum(dim=0)
    num = (w.unsqueeze(-1) * outs).sum(dim=0)
    safe = torch.where(den > 0, den, torch.ones_like(den))
    out = torch.where(den.unsqueeze(-1) > 0, num / safe.unsqueeze(-1), torch.zeros_like(num))
    lse = torch.where(den > 0, m_ref + torch.log(safe), torch.full_like(den, float("-inf")))
    return out, lse


def forward(q, k_cache, v_cache, call):
    """q (B, Hq, Nq, D) → out (B, Hq, Nq, Dv) in q's dtype, lse (B, Hq, Nq) float32 (float64 for
    float64 inputs)."""
    B, Hq, Nq, D = q.shape
    Dv, G = v_cache.shape[-1], call.groups
    Hkv = Hq // G
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    out = torch.zeros(B, Hq, Nq, Dv, dtype=acc, device=q.device)
    lse = torch.full((B, Hq, Nq), float("-inf"), dtype=acc, device=q.device)
    rows = torch.arange(G * Nq, device=q.device) % Nq                         # packed row r = g·Nq + i → i
    for b, L in enumerate(call.lengths):
        lo = _lo(L, Nq, call.left)
        n = L - lo
        if n <= 0:
            continue
        k = gather(k_cache, b, lo, L, call.page_size, call.block_table).to(acc)   # (Hkv, n, D)
        v = gather(v_cache, b, lo, L, call.page_size, call.block_table).to(acc)   # (Hkv, n, Dv)
        qb = q[b].to(acc).reshape(Hkv, G * Nq, D)                                 # (Hkv, G·Nq, D) packed
        pos = lo + torch.arange(n, device=q.device)                               # cache positions
        diag = (L - Nq + rows)[:, None]                                           # each row's own position
        allowed = torch.ones(G * Nq, n, dtype=torch.bool, device=q.device)
        if call.right is not None:
            allowed &= pos[None, :] <= diag + call.right
        if call.left is not None:
            allowed &= pos[None, :] >= diag - call.left
        parts = [split_attention(qb, k[:, r], v[:, r], allowed[:, r], call.scale)
                 for r in plan.split_ranges(n, call.num_splits, TORCH_BLOCK)]
        o, s = merge_partials(torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]))
        out[b] = o.reshape(Hq, Nq, Dv)
        lse[b] = s.reshape(Hq, Nq)
    return out.to(q.dtype), lse
