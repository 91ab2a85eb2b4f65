"""Triton kernel for the sampler's one draw per request (residual or bonus), fused over the vocabulary.

Same fixed-point rule as ``kernels/sampler.py`` (bit-identical tokens): per request b,
    w_y = max(0, p_y − q_y) in float64,  W_y = ⌊w_y·2^40⌋,  empty residual (Σ W = 0) → W_y = ⌊p_y·2^40⌋,
    token = #{y : C_y ≤ ⌊U·T/2^31⌋},  C = inclusive integer cumsum of W, T = C_{V−1}, U = ⌊u·2^31⌋.
One program per request; two sweeps over the row pair (totals, then the scan with a running carry),
so the row pair is read twice and nothing (B, V)-sized is written.
"""
from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover — the torch path works without Triton
    triton = None

__all__ = ["available", "draw_rows"]

WEIGHT_SCALE = 2.0 ** 40  # WEIGHT_BITS of kernels/sampler.py
UNIFORM_SCALE = 2.0 ** 31  # UNIFORM_BITS


def available() -> bool:
    return triton is not None


if triton is not None:

    @triton.jit
    def _weights(p_ptr, q_ptr, row_p, row_q, x, use_q, start, offs, V, HAS_Q: tl.constexpr):
        """(BLOCK,) float64 weights of one tile: max(0, p − q) where the request draws a residual
        (q a row, or one-hot at x when HAS_Q is false), else p. Lanes past V are 0."""
        m = start + offs < V
        p = tl.load(p_ptr + row_p + start + offs, mask=m, other=0.0).to(tl.float64)
        if HAS_Q:
            q = tl.load(q_ptr + row_q + start + offs, mask=m & use_q, other=0.0).to(tl.float64)
        else:
            q = tl.where((start + offs == x) & use_q, 1.0, 0.0).to(tl.float64)
        return tl.where(use_q, tl.maximum(p - q, 0.0), p), m

    @triton.jit
    def _draw_kernel(p_ptr, q_ptr, x_ptr, use_ptr, u_ptr, out_ptr, stride_p, stride_q, V: tl.constexpr,
                     HAS_Q: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        row_p = b.to(tl.int64) * stride_p
        row_q = b.to(tl.int64) * stride_q
        x = tl.load(x_ptr + b)
        use_q = tl.load(use_ptr + b) != 0
        # sweep 1: totals of the residual weights and of the fallback (p_target) weights
        t_res = tl.zeros((), dtype=tl.int64)
        t_p = tl.zeros((), dtype=tl.int64)
        for start in range(0, V, BLOCK):
            w, m = _weights(p_ptr, q_ptr, row_p, row_q, x, use_q, start, offs, V, HAS_Q)
            p = tl.load(p_ptr + row_p + start + offs, mask=m, other=0.0).to(tl.float64)
            t_res += tl.sum(tl.floor(w * 1099511627776.0).to(tl.int64), 0)  # 2^40
            t_p += tl.sum(tl.floor(p * 1099511627776.0).to(tl.int64), 0)
        empty = t_res == 0  # empty residual: draw from p_target (stated policy)
        total = tl.where(empty, t_p, t_res)
        u = tl.load(u_ptr + b)
        U = tl.floor(u * 2147483648.0).to(tl.int64)  # 2^31
        thr = U * (total >> 31) + ((U * (total & 2147483647)) >> 31)  # ⌊U·T/2^31⌋ without overflow
        # sweep 2: count y with C_y ≤ thr, carrying the running sum across tiles
        carry = tl.zeros((), dtype=tl.int64)
        count = tl.zeros((), dtype=tl.int64)
        for start in range(0, V, BLOCK):
            w, m = _weights(p_ptr, q_ptr, row_p, row_q, x, use_q, start, offs, V, HAS_Q)
            p = tl.load(p_ptr + row_p + start + offs, mask=m, other=0.0).to(tl.float64)
            W = tl.floor(tl.where(empty, p, w) * 1099511627776.0).to(tl.int64)
            c = carry + tl.cumsum(W, 0)
            count += tl.sum(((c <= thr) & m).to(tl.int64), 0)
            carry += tl.sum(W, 0)
        tl.store(out_ptr + b, count)


def draw_rows(p_rows: torch.Tensor, q_rows: torch.Tensor | None, draft_x: torch.Tensor, use_q: torch.Tensor,
              u: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """One draw per request. p_rows: (B, V); q_rows: (B, V) or None (one-hot at ``draft_x``);
    draft_x: (B,) int64; use_q: (B,) bool (False: draw from p_rows itself, the bonus case);
    u: (B,) float64 -> (B,) int64 tokens. Rows need unit stride along V."""
    if triton is None:
        raise RuntimeError("the Triton sampler backend needs triton; use backend='torch'")
    B, V = p_rows.shape
    for name, t in (("p_rows", p_rows), ("q_rows", q_rows)):
        if t is not None and t.stride(-1) != 1:
            raise ValueError(f"{name} must have unit stride along the vocabulary, received strides {t.stride()}")
    out = torch.empty(B, dtype=torch.int64, device=p_rows.device)
    q = p_rows if q_rows is None else q_rows
    _draw_kernel[(B,)](p_rows, q, draft_x.to(torch.int64).contiguous(), use_q.to(torch.int32).contiguous(),
                       u.to(torch.float64).contiguous(), out, p_rows.stride(0), q.stride(0), V,
                       HAS_Q=q_rows is not None, BLOCK=block)
    return out
