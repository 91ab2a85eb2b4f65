"""The block-sparse walk lists, built on the device by one small Triton kernel per direction.

A BlockSparseMask gives a bool tile grid (B|1, Hq|1, TQ, TK). The attention kernels walk, per
query tile (forward, dQ) or per key tile (dK/dV), the tiles that are present and that the window
lets at least one pair through, in two groups: *partial* tiles, which need the per-pair predicate
(a window edge, a ragged end, a dense mask), then *full* tiles, which run without one.

For tile rows [r0, r1] (r1 clipped to Nq − 1) and keys [k0, k1], diag = Nk − Nq, query i reads
keys [i + diag − left, i + diag + right] (None = unbounded):

* reach: r0 < Nq, k0 < Nk, min(k1, Nk − 1) ≥ r0 + diag − left and k0 ≤ r1 + diag + right (the
  rows' intervals shift by one per row, so their union is [r0 + diag − left, r1 + diag + right]);
* full: reach, r0 + block_q ≤ Nq, k1 ≤ Nk − 1, k0 ≥ r1 + diag − left, k1 ≤ r0 + diag + right (the
  keys every row reads), and no dense mask.

This replaced a chain of ~30 torch operations whose host time (0.7–1.5 ms a call on the H200)
exceeded the sparse kernels' own GPU time. ``tests/kernels/test_kernel_walk_lists.py`` checks the lists
against brute-force enumeration of every pair.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _classes(qi, kj, Nq, Nk, bq, bk, left, right, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
             HAS_DENSE: tl.constexpr):
    """(reach, full) for query tiles qi and key tiles kj (broadcast)."""
    diag = Nk - Nq
    r0 = qi * bq
    r1 = tl.minimum(r0 + bq, Nq) - 1
    k0 = kj * bk
    k1 = k0 + bk - 1
    reach = (r0 < Nq) & (k0 < Nk)
    full = (r0 + bq <= Nq) & (k1 <= Nk - 1)
    if HAS_LEFT:
        reach = reach & (tl.minimum(k1, Nk - 1) >= r0 + diag - left)
        full = full & (k0 >= r1 + diag - left)
    if HAS_RIGHT:
        reach = reach & (k0 <= r1 + diag + right)
        full = full & (k1 <= r0 + diag + right)
    if HAS_DENSE:
        full = full & (reach != reach)
    return reach, full & reach


@triton.jit
def tile_plan(TILES, NUM, IDX, stb, sth, sti, stj, Hq, R, C, Nq, Nk, bq, bk, left, right,
              HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_DENSE: tl.constexpr,
              TRANSPOSED: tl.constexpr, BLOCK: tl.constexpr):
    """Grid (R, B·Hq). Row ``r`` of the (R, C) grid — query tile r against key tiles (TRANSPOSED
    False), or key tile r against query tiles — writes NUM[b, h, r] = (n_partial, n_full) and
    IDX[b, h, r, :n_partial + n_full] = the partial columns ascending, then the full ones.
    TILES: uint8 view of the tile grid with strides (stb, sth, sti, stj), 0 on broadcast dims."""
    r = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    row = bh.to(tl.int64) * R + r
    base = TILES + b.to(tl.int64) * stb + h.to(tl.int64) * sth
    out = IDX + row * C
    n_part = r * 0
    n_full = r * 0
    # two passes: the full tiles' slots start after the last partial one
    for FULL in tl.static_range(2):
        n = r * 0
        for c0 in range(0, C, BLOCK):
            cols = c0 + tl.arange(0, BLOCK)
            inside = cols < C
            if TRANSPOSED:
                qi = cols
                kj = r
                t = tl.load(base + qi.to(tl.int64) * sti + kj.to(tl.int64) * stj, mask=inside, other=0)
            else:
                qi = r
                kj = cols
                t = tl.load(base + qi.to(tl.int64) * sti + kj.to(tl.int64) * stj, mask=inside, other=0)
            reach, full = _classes(qi, kj, Nq, Nk, bq, bk, left, right, HAS_LEFT, HAS_RIGHT, HAS_DENSE)
            take = inside & (t != 0) & reach
            if FULL == 1:
                take = take & full
            else:
                take = take & (full == 0)
            flag = take.to(tl.int32)
            pos = n + tl.cumsum(flag, 0) - flag
            if FULL == 1:
                pos += n_part
            tl.store(out + pos, cols, mask=take)
            n += tl.sum(flag, 0)
        if FULL == 1:
            n_full = n
        else:
            n_part = n
    tl.store(NUM + 2 * row, n_part)
    tl.store(NUM + 2 * row + 1, n_full)
