"""A float64 dense torch formula for the kernel tests (not the verified oracle: the fuzzer uses that),
plus random-problem helpers, and a check of the formula against SDPA's math backend."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def allowed_matrix(B, Hq, Nq, Nk, *, causal=False, window=None, mask=None, tiles=None,
                   cu_seqlens_q=None, cu_seqlens_k=None):
    """bool (B, Hq, Nq, Nk): the pairs the API's conventions allow (written independently of the kernel)."""
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    a = torch.zeros(B, Hq, Nq, Nk, dtype=torch.bool)
    spans = [(0, Nq, 0, Nk)] if cu_seqlens_q is None else list(
        zip(cu_seqlens_q.tolist(), cu_seqlens_q.tolist()[1:], cu_seqlens_k.tolist(), cu_seqlens_k.tolist()[1:]))
    for q0, q1, k0, k1 in spans:
        for i in range(q0, q1):
            p = (i - q0) + (k1 - k0) - (q1 - q0)
            lo = 0 if left is None else max(0, p - left)
            hi = (k1 - k0) if right is None else min(k1 - k0, p + right + 1)
            if hi > lo:
                a[:, :, i, k0 + lo:k0 + hi] = True
    if mask is not None:
        a &= mask.cpu().expand(B, Hq, Nq, Nk)
    if tiles is not None:
        t = tiles.tiles.cpu()
        for i in range(Nq):
            for j in range(Nk):
                a[:, :, i, j] &= t[:, :, i // tiles.block_q, j // tiles.block_k]
        if tiles.dense is not None:
            a &= tiles.dense.cpu().expand(B, Hq, Nq, Nk)
    return a


def dense_reference(q, k, v, allowed, scale=None):
    """float64 (out (B, Hq, Nq, Dv), lse (B, Hq, Nq)); differentiable; empty rows give 0 / −inf.
    Masked entries are replaced before any product so planted NaN cannot reach it either."""
    G = q.shape[1] // k.shape[1]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    allowed = allowed.to(q.device)
    qd = q.double()
    kd, vd = k.double().repeat_interleave(G, 1), v.double().repeat_interleave(G, 1)
    qd = torch.where(allowed.any(-1, keepdim=True), qd, 0)
    kd = torch.where(allowed.any(-2)[..., None], kd, 0)
    vd = torch.where(allowed.any(-2)[..., None], vd, 0)
    s = torch.where(allowed, qd @ kd.transpose(-1, -2) * scale, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.where(allowed, torch.exp(s - torch.where(lse.isfinite(), lse, 0)[..., None]), 0)
    return p @ vd, lse


def rand_qkv(B, Hq, Hkv, Nq, Nk, D, Dv, dtype=torch.float32, device="cpu", seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dtype).requires_grad_(grad)  # noqa: E731
    return mk(B, Hq, Nq, D), mk(B, Hkv, Nk, D), mk(B, Hkv, Nk, Dv)


def grads(out, lse, q, k, v, seed=1):
    """(dq, dk, dv) of Σ out·G + Σ_finite lse·g for fixed random G, g (exercises dlse too)."""
    gen = torch.Generator().manual_seed(seed)
    G = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.device)
    g = torch.randn(lse.shape, generator=gen, dtype=torch.float64).to(out.device)
    loss = (out.double() * G).sum() + torch.where(lse.isfinite(), lse.double() * g, 0).sum()
    return torch.autograd.grad(loss, (q, k, v))


def test_dense_reference_matches_sdpa_math():
    q, k, v = rand_qkv(2, 4, 2, 9, 13, 8, 8, dtype=torch.float64)
    a = allowed_matrix(2, 4, 9, 13, causal=True)
    out, _ = dense_reference(q, k, v, a)
    want = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=a)
    assert torch.allclose(out, want, atol=1e-12)
