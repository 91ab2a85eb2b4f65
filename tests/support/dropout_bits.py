"""A Triton test kernel that writes out the keep bits the attention kernels' score loops draw
(``fwd.dropout_keep``), for tests/kernels/test_dropout_triton.py (interpreter) and
test_dropout_gpu.py (compiled). Imports triton: import it only after ``pytest.importorskip("triton")``."""
from __future__ import annotations

import triton
import triton.language as tl

from flashproof.kernels.attention.triton.fwd import dropout_keep


@triton.jit
def write_keep(OUT, seed, drop_t, Hq, Nq, Nk, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Grid (B·Hq, cdiv(Nq, BLOCK_M), cdiv(Nk, BLOCK_N)): OUT (B, Hq, Nq, Nk) int8 <- the keep bit of
    every pair, drawn by the attention kernels' own ``dropout_keep``."""
    pid_bh = tl.program_id(0)
    b = pid_bh // Hq
    h = pid_bh % Hq
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_base = (b.to(tl.int64) * Hq + h) * Nq
    keep = dropout_keep(seed, drop_t, row_base, offs_m, tl.program_id(2) * BLOCK_N, Nk, BLOCK_N)
    ok = (offs_m[:, None] < Nq) & (offs_n[None, :] < Nk)
    tl.store(OUT + row_base * Nk + offs_m[:, None].to(tl.int64) * Nk + offs_n[None, :], keep.to(tl.int8), mask=ok)
