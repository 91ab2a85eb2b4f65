"""A user's attention kernel in plain torch, written the way the fuzzer expects (the correct
version of the four planted bugs beside it; docs/fuzz.md, "Fuzz your kernel").

Conventions: q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv); causal aligned bottom-right
(query i sees keys j <= i + Nk - Nq); query head h reads kv head h // (Hq / Hkv); LSE natural log;
a row with no allowed key gives out 0 and LSE -inf.
"""
import math

import torch


def attention(q, k, v, *, causal=False, scale=None, enable_gqa=False, return_lse=False):
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv), and with
    ``return_lse`` also lse (B, Hq, Nq)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if enable_gqa:
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale                      # (B, Hq, Nq, Nk)
    if causal:
        nq, nk = s.shape[-2:]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=s.device).tril(nk - nq)
        s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)    # rows with no allowed key
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    out = (p @ v) / torch.where(l > 0, l, torch.ones_like(l))
    lse = torch.where(l > 0, m + torch.log(torch.where(l > 0, l, torch.ones_like(l))), torch.full_like(l, -math.inf))
    return (out, lse.squeeze(-1)) if return_lse else out
