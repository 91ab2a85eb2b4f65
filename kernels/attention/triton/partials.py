"""The GQA backward's dK / dV partial sums, summed and rounded in one pass.

The Gluon backward splits a KV head's query heads over ``S`` CTAs (``gluon/bwd.py``, ``head_splits``); each
stores its fp32 partial dK, dV, and ``sum_partials`` adds the ``S`` partials of each element in the fixed
order s = 0, 1, …, S − 1 in fp32 and rounds the sum once into the gradient's dtype and layout (bitwise
repeatable; for S = 2 bitwise what ``torch.sum`` then ``copy_`` gave, one fp32 add and one rounding). It
replaces that pair (until commit 6a526fd), whose fp32 intermediate was written and read again: H200, session 25
(BENCHMARKS.md, 2026-12-04 20:15 UTC), the backward's passes besides its main kernel 362 → 245 µs at 32/8, 8k
causal (558 → 459 at 64/8), the whole backward 1.01–1.02× at 32/8; 3.5–4.0 TB/s. The loop over S runs at run
time: as fast as the same kernel with S a constexpr and the loads unrolled (within 3 %, S = 2, 4, 8), one
compile for every S, and KER-BOUNDS-PSUM checks its accesses for every S.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...interpreter import interpreting

INTERPRET = interpreting()


@triton.jit
def sum_partials_kernel(P, OUT, S, N, D, Hkv, spb, sph, sps, spn, spd, sob, soh, son, sod,
                        BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grid (cdiv(N, BLOCK_N), B·Hkv). P (B, Hkv, S, N, D) fp32, OUT (B, Hkv, N, D), both strided:
    OUT[b, h, n, d] = round(Σ_{s < S} P[b, h, s, n, d]), the sum in fp32 in the order of s."""
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // Hkv).to(tl.int64)
    h = (bh % Hkv).to(tl.int64)
    rows = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D).to(tl.int64)
    io = (rows[:, None] < N) & (cols[None, :] < D)
    src = P + b * spb + h * sph + rows[:, None] * spn + cols[None, :] * spd
    acc = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    for s in range(0, S):
        acc += tl.load(src + (b * 0 + s) * sps, mask=io, other=0.0)  # b·0 + s: s in int64, so s·sps cannot wrap
    dst = OUT + b * sob + h * soh + rows[:, None] * son + cols[None, :] * sod
    tl.store(dst, acc.to(OUT.dtype.element_ty), mask=io)


def sum_partials(p: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out (B, Hkv, N, D), any strides, ← the sum over dim 2 of the fp32 partials p (B, Hkv, S, N, D), in
    the order of s, rounded once to out's dtype; returns out."""
    B, Hkv, S, N, D = p.shape
    if p.dtype != torch.float32 or out.shape != (B, Hkv, N, D) or p.device != out.device:
        raise ValueError(f"sum_partials: fp32 partials (B, Hkv, S, N, D) and an output (B, Hkv, N, D) on one device "
                         f"expected; got {p.dtype} {tuple(p.shape)} on {p.device}, output {tuple(out.shape)} on "
                         f"{out.device}")
    if out.numel() == 0:
        return out
    bn = 16 if INTERPRET else 32
    bd = triton.next_power_of_2(D)
    sum_partials_kernel[(triton.cdiv(N, bn), B * Hkv)](p, out, S, N, D, Hkv, *p.stride(), *out.stride(),
                                                       BLOCK_N=bn, BLOCK_D=bd, num_warps=4)
    return out
