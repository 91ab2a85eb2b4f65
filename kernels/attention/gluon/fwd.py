"""Warp-specialised Hopper forward (sm_90) in Gluon, Triton's lower-level dialect: the forward of
``backend="auto"`` (and ``"gluon"``) for the dense problems it covers (``dispatch.gluon_rule`` says
which; everything else runs the Triton kernels of ``triton/``).

Why: the ``tl.dot`` forward serialises the two matrix products of a key block with its softmax. In
its PTX each iteration waits for S = Q Kᵀ (``wgmma.wait_group 0``) and meets CTA-wide
``bar.sync``s that lock both warpgroups together, so the exponentials (MUFU: 16 a clock per SM)
never overlap tensor-core work: at d = 128 that costs ~1/3 of the time. Gluon exposes the
asynchronous MMA and the barriers, so this kernel can do what FlashAttention-3 does:

- Persistent: one CTA per SM (at most one per work item), each running the work items of its row of a
  host-built schedule (``schedule.py``; an item = 128 query rows of one (batch, head)), in three
  partitions (``gl.warp_specialize``): two consumer warpgroups of 64 rows each (240 registers a thread
  after ``setmaxnreg``) and one producer warp (24 registers) that issues the TMA loads: per item both Q
  tiles into Q buffer i mod 2 (two buffers, so the next item's Q loads while this one runs), then K_j and
  V_j into two rings of NUM_STAGES shared-memory slots whose positions continue across items (the
  entry's ``base``), so the next item's first tiles load during this one's last. Each slot has a *ready*
  mbarrier (completed by the TMA byte count) and an *empty* one (one arrival from each consumer).
- Consumer iteration j (intra-warpgroup pipelining): issue S_j = Q K_jᵀ; issue
  O += P_{j−1} V_{j−1} (P in registers as the A operand); wait until only the P·V product is
  in flight; release K_j; softmax of S_j (row max, 2^(s·c − m), α, l) while P·V runs; wait;
  release V_{j−1}; O ·= α. Only warpgroup-local barriers inside the loop.
- Causal (Nq = Nk, so top-left and bottom-right alignment agree): key blocks above the
  diagonal are never visited, only the diagonal block is masked, and each head's query blocks
  run with the most keys first.
- Item order: a head's query blocks together, the heaviest (causal) first, as the non-persistent grid
  ran them (its query blocks of one head fastest: the CTAs resident at once stream the same K and V,
  which then hit L2 — a head's K and V: 8 MiB at N = 16k, d = 128; the heads fastest, until commit
  93e2611, measured 456 / 512 / 546 / 581 / 538 → 540 / 585 / 603 / 625 / 636 TFLOP/s at N = 2k … 32k,
  BENCHMARKS.md session 20 call 1). Persistent against that grid (one CTA per query block; it lived until
  commit 144c268), H200 2026-12-03 (BENCHMARKS.md, session 23 calls 1–2; bf16, 16k tokens, outputs
  bitwise equal): 1.03–1.12× dense at d = 128, 1.00–1.11× causal, 1.00–1.05× at d = 64, 1.07× GQA 64/8,
  1.09–1.35× block-sparse (10 %, 8k): each CTA's prologue and epilogue (Q and first K loads, the last
  P·V, the O store) overlap the next item's loads instead of standing alone, ~3.5 tile-times a CTA.
- Head dim D = 64 or 128 (``HEAD_DIMS``; the tiles' widths, read from the descriptors). At D = 64 the
  heads-fastest grid measured slower than the Triton forward; with this grid, in the same run (d = 64,
  H = 32, TFLOP/s, Gluon with 2 / 3 / 4 ring slots vs Triton vs cuDNN): 440 / 437 / 432 vs 422 vs 451
  at 4k, 451 / 443 / 445 vs 428 vs 454 at 8k, 452 / 452 / 449 vs 433 vs 451 at 16k, 401 / 395 / 393
  vs 394 vs 425 at 8k causal, so the router sends d = 64 here too, with 2 slots.
- Epilogue: O / l through the dead Q slot and a TMA store, read out before the Q buffer is handed back to
  the producer (``q_empty``); lse = (m + log2 l)·ln 2.
- Block-sparse (``SPARSE``; ``BlockSparseMask`` with 128 × 128 tiles, no dense mask): the CTA walks its
  query tile's walk list (``triton/plan.py``: the partial tiles first, then the full ones) instead of
  every key block; the producer reads entry j before waiting for a free slot. Causal, the only partial
  tile a list can hold is the diagonal, and it comes first, so the prologue's tile is the masked one
  (the mask keeps every pair of a full tile). A query tile with an empty list writes out 0, lse −∞.
  H200 (BENCHMARKS.md, 2026-12-02 21:26 UTC; 10 % of tiles, N = 8k, forward + backward): GPU time
  0.95 / 0.66 / 1.18 ms at d = 128, 128 causal, 64 against 1.28 / 0.84 / 1.34 for the Triton walk.

The math is the Triton forward's (exp2 domain, c = scale·log2 e > 0, so rowmax(s)·c = rowmax(s·c));
no row with a listed tile is empty and no key is read only by masked pairs on this path (dense or
whole tiles, Nq = Nk; every row of a diagonal tile keeps its own key), so the ⊥ guard and the poison
handling of the general kernel are not needed here (``dispatch.gluon_rule``
rules out everything else). Gluon has no interpreter: on CPU the tests compile it for sm_90
(tests/kernels/test_kernel_compile.py) and check the router's plan; the GPU check (lab/gpu_check.py) and
the fuzz campaign run it against the oracle on the H200.
"""
from __future__ import annotations

import torch

from . import layout, schedule
from .common import AVAILABLE, desc_layouts, gl_dtype, jit as _jit, row_descriptor

if AVAILABLE:
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                                  warpgroup_mma, warpgroup_mma_wait)

BLOCK_M = 128  # query rows per work item: two consumer warpgroups of 64
BLOCK_M_WG = 64
BLOCK_N = 128  # keys per block
HEAD_DIMS = (64, 128)  # the head dims this forward takes (D = Dv; dispatch.GLUON_HEAD_DIMS): see the docstring
NUM_STAGES = 2  # K/V ring slots: 2 × 2 × 32 KiB + two Q buffers of 32 KiB = 192 KiB at d = 128 (3 stages measured
#                no faster before the forward was persistent; at d = 64 neither 3 nor 4)
MAXNREG = 168  # launch cap: 12 warps' worth of threads (9 used) × 168 fit in 64 K registers
CONSUMER_REGS = 240  # per consumer thread after setmaxnreg; the producer drops to 24


# ----------------------------------------------------------------------------------------
# A work item: one query block of one (batch, head), the CTA's entry i of the schedule (schedule.py).
# ----------------------------------------------------------------------------------------
@_jit
def _work(CAUSAL: gl.constexpr, SPARSE: gl.constexpr, s_b, s_h, s_m, s_base, i, W, NM, H, kv_num, kv_idx, TK):
    """Entry i of this CTA's list (``schedule.Schedule``): (b, h, m, base, n_kv, walk list): ``base`` the key
    tiles the CTA ran before it (the K/V ring's counter), n_kv the item's key tiles — dense: the blocks up to
    the diagonal (causal: m + 1, BLOCK_M = BLOCK_N) or all NM; block-sparse: the query block's walk list
    (row (b·H + h)·NM + m of kv_num, kv_idx)."""
    e = gl.program_id(0) * W + i
    b = gl.load(s_b + e)
    h = gl.load(s_h + e)
    m = gl.load(s_m + e)
    base = gl.load(s_base + e)
    if SPARSE:
        lrow = (b * H + h) * NM + m
        n_kv = gl.load(kv_num + 2 * lrow) + gl.load(kv_num + 2 * lrow + 1)
        kv_list = kv_idx + lrow.to(gl.int64) * TK
    else:
        if CAUSAL:
            n_kv = m + 1
        else:
            n_kv = NM
        kv_list = kv_idx
    return b, h, m, base, n_kv, kv_list


# ----------------------------------------------------------------------------------------
# Producer partition: 1 warp issuing TMA loads.
# ----------------------------------------------------------------------------------------
@_jit
def _attn_load(CAUSAL: gl.constexpr, SPARSE: gl.constexpr, q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready,
               q_empty, k_ready, v_ready, k_empty, v_empty, s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num,
               kv_idx, TK, q_pb, q_ph, q_ch, k_pb, k_ph, k_ch, v_pb, v_ph, v_ch):
    """Per item: Q's two warpgroup tiles into Q buffer i mod 2 (once the consumers have stored the item two
    before), then key tiles 0 .. n_kv − 1 (dense) or the tiles kv_idx[0 .. n_kv − 1] (block-sparse: the query
    block's walk list) through the K and V rings, whose slots and phases count on from the item's base."""
    BM_WG: gl.constexpr = q_desc.block_type.shape[0]
    NUM_STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    for i in range(n_items):
        b, h, m, base, n_kv, kv_list = _work(CAUSAL, SPARSE, s_b, s_h, s_m, s_base, i, W, NM, H, kv_num, kv_idx, TK)
        hk = h // GROUPS  # GQA: query head h reads kv head h // GROUPS
        q_row, q_col = layout.head_rc(b, h, m * (2 * BM_WG), q_pb, q_ph, q_ch)
        k_row, k_col = layout.head_rc(b, hk, 0, k_pb, k_ph, k_ch)
        v_row, v_col = layout.head_rc(b, hk, 0, v_pb, v_ph, v_ch)
        qb = i % 2
        mbarrier.wait(q_empty.index(qb), ((i // 2) & 1) ^ 1)
        mbarrier.expect(q_ready.index(qb), 2 * q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row, q_col], q_ready.index(qb), q_smem.index(2 * qb))
        tma.async_copy_global_to_shared(q_desc, [q_row + BM_WG, q_col], q_ready.index(qb), q_smem.index(2 * qb + 1))
        for j in range(n_kv):
            if SPARSE:
                kv = gl.load(kv_list + j)  # the j-th key tile of the query block's list (issued before the wait)
            else:
                kv = j
            it = base + j
            slot = it % NUM_STAGES
            phase = (it // NUM_STAGES) & 1
            mbarrier.wait(k_empty.index(slot), phase ^ 1)
            mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(k_desc, [k_row + kv * BLOCK_N, k_col], k_ready.index(slot),
                                            k_smem.index(slot))
            mbarrier.wait(v_empty.index(slot), phase ^ 1)
            mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(v_desc, [v_row + kv * BLOCK_N, v_col], v_ready.index(slot),
                                            v_smem.index(slot))


@_jit
def _attn_load_full(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                    v_empty, s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num, kv_idx, TK, q_pb, q_ph, q_ch,
                    k_pb, k_ph, k_ch, v_pb, v_ph, v_ch):
    _attn_load(False, False, q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
               k_empty, v_empty, s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num, kv_idx, TK, q_pb, q_ph,
               q_ch, k_pb, k_ph, k_ch, v_pb, v_ph, v_ch)


@_jit
def _attn_load_causal(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                      v_empty, s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num, kv_idx, TK, q_pb, q_ph, q_ch,
                      k_pb, k_ph, k_ch, v_pb, v_ph, v_ch):
    _attn_load(True, False, q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
               k_empty, v_empty, s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num, kv_idx, TK, q_pb, q_ph,
               q_ch, k_pb, k_ph, k_ch, v_pb, v_ph, v_ch)


@_jit
def _attn_load_sparse(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                      v_empty, s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num, kv_idx, TK, q_pb, q_ph, q_ch,
                      k_pb, k_ph, k_ch, v_pb, v_ph, v_ch):
    # causal or not: the walk list already holds only the tiles the window reaches
    _attn_load(False, True, q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
               k_empty, v_empty, s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num, kv_idx, TK, q_pb, q_ph,
               q_ch, k_pb, k_ph, k_ch, v_pb, v_ph, v_ch)


# ----------------------------------------------------------------------------------------
# Consumer helpers.
# ----------------------------------------------------------------------------------------
@_jit
def _apply_causal_mask(s, row0, col0, BM: gl.constexpr, BN: gl.constexpr, s_layout: gl.constexpr):
    rows = row0 + gl.arange(0, BM, layout=gl.SliceLayout(1, s_layout))
    cols = col0 + gl.arange(0, BN, layout=gl.SliceLayout(0, s_layout))
    keep = gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1)
    return gl.where(keep, s, gl.full_like(s, float("-inf")))


@_jit
def _attn_iter(j, base, acc, m_i, l_i, p_prev, q_s, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, qk_scale,
               row0, MASK: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, NUM_STAGES: gl.constexpr,
               s_layout: gl.constexpr, p_layout: gl.constexpr):
    """Key tile j of the item (ring position base + j): S_j, the softmax update, and P_{j−1} V_{j−1}."""
    it = base + j
    slot = it % NUM_STAGES
    phase = (it // NUM_STAGES) & 1
    pslot = (it - 1) % NUM_STAGES
    pphase = ((it - 1) // NUM_STAGES) & 1
    k_s = k_smem.index(slot)
    v_s = v_smem.index(pslot)

    # S_j = Q K_j^T (async)
    mbarrier.wait(k_ready.index(slot), phase)
    s_zero = gl.zeros([BM, BN], gl.float32, s_layout)
    s_tok = warpgroup_mma(q_s, k_s.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    # O += P_{j-1} V_{j-1} (async)
    mbarrier.wait(v_ready.index(pslot), pphase)
    o_tok = warpgroup_mma(p_prev, v_s, acc, is_async=True)
    # wait for S_j only; P.V stays in flight during the softmax
    s, q_s, k_s = warpgroup_mma_wait(num_outstanding=1, deps=[s_tok, q_s, k_s])
    mbarrier.arrive(k_empty.index(slot), count=1)

    if MASK:
        s = _apply_causal_mask(s, row0, j * BN, BM, BN, s_layout)
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    l_i = l_i * alpha + gl.sum(p, axis=1)
    p_new = gl.convert_layout(p.to(k_smem.dtype), p_layout)

    acc, p_prev, v_s = warpgroup_mma_wait(num_outstanding=0, deps=[o_tok, p_prev, v_s])
    mbarrier.arrive(v_empty.index(pslot), count=1)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, acc.type.layout)), 1)
    return acc, m_new, l_i, p_new


@_jit
def _attn_store(WG: gl.constexpr, o, lse, q_s, o_desc, lse_ptr, o_row, o_col, lse_row, BM: gl.constexpr,
                s_layout: gl.constexpr):
    """This warpgroup's BM rows of O (fp32, normalised) and lse: lse by pointer stores, O through the dead
    Q tile ``q_s`` (no wgmma reads it any more) and one TMA store, read out of ``q_s`` before this returns
    (every thread of the warpgroup past the wait, so the tile may be handed back)."""
    offs = gl.arange(0, BM, layout=gl.SliceLayout(1, s_layout))
    gl.store(lse_ptr + lse_row + WG * BM + offs, lse)
    q_s.store(o.to(q_s.dtype))
    fence_async_shared()
    # all 4 warps of this warpgroup must have written their rows before the elected thread(s)
    # issue the TMA store (lowers to a warpgroup-local named barrier inside the partition)
    gl.thread_barrier()
    tma.async_copy_shared_to_global(o_desc, [o_row + WG * BM, o_col], q_s)
    tma.store_wait(pendings=0)
    gl.thread_barrier()


@_jit
def _attn_rows(WG: gl.constexpr, CAUSAL: gl.constexpr, SPARSE: gl.constexpr, o_desc, lse_ptr, q_s, k_smem, v_smem,
               k_ready, v_ready, k_empty, v_empty, qk_scale, o_row, o_col, lse_row, row0, base, n_kv, col0,
               BM: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr):
    """The warpgroup's rows over its n_kv ≥ 1 key tiles (ring positions base …), then their store. Causal:
    dense, the last tile (the diagonal) is masked; block-sparse, the first one (col0: the list's first tile —
    its partial tiles come first, and the only partial tile of a causal 128 × 128 list is the diagonal;
    on a full tile the mask keeps every pair)."""
    NUM_STAGES: gl.constexpr = k_smem.type.shape[0]
    BN: gl.constexpr = k_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = k_smem.type.shape[2]
    # ---- prologue: S_0 ----
    fslot = base % NUM_STAGES
    mbarrier.wait(k_ready.index(fslot), (base // NUM_STAGES) & 1)
    k_s = k_smem.index(fslot)
    s_tok = warpgroup_mma(q_s, k_s.permute((1, 0)), gl.zeros([BM, BN], gl.float32, s_layout), use_acc=False,
                          is_async=True)
    s, q_s, k_s = warpgroup_mma_wait(num_outstanding=0, deps=[s_tok, q_s, k_s])
    mbarrier.arrive(k_empty.index(fslot), count=1)
    if CAUSAL:
        # dense: a no-op unless block 0 is the diagonal block (n_kv == 1); block-sparse: the list's first tile
        s = _apply_causal_mask(s, row0, col0, BM, BN, s_layout)
    m_i = gl.max(s, axis=1) * qk_scale
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_i, 1))
    l_i = gl.sum(p, axis=1)
    p_prev = gl.convert_layout(p.to(k_smem.dtype), p_layout)
    acc = gl.zeros([BM, HEAD_DIM], gl.float32, o_layout)

    # ---- main loop (unmasked) ----
    if CAUSAL and not SPARSE:
        n_main = n_kv - 1
    else:
        n_main = n_kv
    for j in range(1, n_main):
        acc, m_i, l_i, p_prev = _attn_iter(j, base, acc, m_i, l_i, p_prev, q_s, k_smem, v_smem, k_ready, v_ready,
                                           k_empty, v_empty, qk_scale, row0, False, BM, BN, NUM_STAGES, s_layout,
                                           p_layout)
    # ---- diagonal block (masked), dense causal only ----
    if CAUSAL and not SPARSE:
        if n_kv > 1:
            acc, m_i, l_i, p_prev = _attn_iter(n_kv - 1, base, acc, m_i, l_i, p_prev, q_s, k_smem, v_smem, k_ready,
                                               v_ready, k_empty, v_empty, qk_scale, row0, True, BM, BN, NUM_STAGES,
                                               s_layout, p_layout)

    # ---- epilogue: last P.V ----
    jl = base + n_kv - 1
    lslot = jl % NUM_STAGES
    lphase = (jl // NUM_STAGES) & 1
    v_s = v_smem.index(lslot)
    mbarrier.wait(v_ready.index(lslot), lphase)
    o_tok = warpgroup_mma(p_prev, v_s, acc, is_async=True)
    acc, p_prev, v_s = warpgroup_mma_wait(num_outstanding=0, deps=[o_tok, p_prev, v_s])
    mbarrier.arrive(v_empty.index(lslot), count=1)

    # ---- normalize + store ----
    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
    o = acc / gl.expand_dims(l_o, 1)
    lse = (m_i + gl.log2(l_i)) * 0.6931471805599453
    _attn_store(WG, o, lse, q_s, o_desc, lse_ptr, o_row, o_col, lse_row, BM, s_layout)


@_jit
def _attn_consumer(WG: gl.constexpr, CAUSAL: gl.constexpr, SPARSE: gl.constexpr, o_desc, lse_ptr, q_smem, k_smem,
                   v_smem, q_ready, q_empty, k_ready, v_ready, k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base,
                   n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK, o_pb, o_ph, o_ch):
    # constexpr parameters are not passed through warp_specialize argument tuples; derive them from types
    BM: gl.constexpr = q_smem.type.shape[1]  # 64 rows per warpgroup
    BN: gl.constexpr = k_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = k_smem.type.shape[2]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BN, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)

    for i in range(n_items):
        b, h, m, base, n_kv, kv_list = _work(CAUSAL, SPARSE, s_b, s_h, s_m, s_base, i, W, NM, H, kv_num, kv_idx, TK)
        row_in_seq = m * (2 * BM)
        o_row, o_col = layout.head_rc(b, h, row_in_seq, o_pb, o_ph, o_ch)
        lse_row = (b * H + h) * N_CTX + row_in_seq  # lse (B, H, N) contiguous
        row0 = row_in_seq + WG * BM  # first query row (within the sequence) of this warpgroup
        qb = i % 2
        q_s = q_smem.index(2 * qb + WG)
        mbarrier.wait(q_ready.index(qb), (i // 2) & 1)
        if SPARSE:
            # the first listed tile's first key (read before the branch: the same reads on both of its sides)
            col0 = gl.load(kv_list, mask=n_kv > 0, other=0) * BN
            if n_kv > 0:
                _attn_rows(WG, CAUSAL, SPARSE, o_desc, lse_ptr, q_s, k_smem, v_smem, k_ready, v_ready, k_empty,
                           v_empty, qk_scale, o_row, o_col, lse_row, row0, base, n_kv, col0, BM, s_layout, o_layout,
                           p_layout)
            else:  # no tile listed: every row allows no key -> out 0, lse -inf
                _attn_store(WG, gl.zeros([BM, HEAD_DIM], gl.float32, o_layout),
                            gl.full([BM], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout)), q_s, o_desc,
                            lse_ptr, o_row, o_col, lse_row, BM, s_layout)
        else:
            _attn_rows(WG, CAUSAL, SPARSE, o_desc, lse_ptr, q_s, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty,
                       qk_scale, o_row, o_col, lse_row, row0, base, n_kv, 0, BM, s_layout, o_layout, p_layout)
        mbarrier.arrive(q_empty.index(qb), count=1)  # O is out of the Q buffer: the producer may refill it


@_jit
def _attn_consumer_wg0_full(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                            v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                            o_pb, o_ph, o_ch):
    _attn_consumer(0, False, False, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_consumer_wg0_causal(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                              v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                              o_pb, o_ph, o_ch):
    _attn_consumer(0, True, False, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_consumer_wg0_sparse(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                              v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                              o_pb, o_ph, o_ch):
    _attn_consumer(0, False, True, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_consumer_wg0_sparse_causal(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                                     k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX,
                                     kv_num, kv_idx, TK, o_pb, o_ph, o_ch):
    _attn_consumer(0, True, True, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_consumer_wg1_full(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                            v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                            o_pb, o_ph, o_ch):
    _attn_consumer(1, False, False, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_consumer_wg1_causal(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                              v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                              o_pb, o_ph, o_ch):
    _attn_consumer(1, True, False, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_consumer_wg1_sparse(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty,
                              v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                              o_pb, o_ph, o_ch):
    _attn_consumer(1, False, True, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_consumer_wg1_sparse_causal(o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                                     k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX,
                                     kv_num, kv_idx, TK, o_pb, o_ph, o_ch):
    _attn_consumer(1, True, True, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready,
                   k_empty, v_empty, qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK,
                   o_pb, o_ph, o_ch)


@_jit
def _attn_fwd_ws(q_desc, k_desc, v_desc, o_desc, lse_ptr, s_b, s_h, s_m, s_base, count, kv_num, kv_idx, sm_scale, N_CTX,
                 NM, W, H, GROUPS, TK,  #
                 q_pb, q_ph, q_ch, k_pb, k_ph, k_ch, v_pb, v_ph, v_ch, o_pb, o_ph, o_ch,  # row views (layout.Coords)
                 HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                 SPARSE: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    """Persistent: CTA c runs the count[c] work items of row c of the schedule (``schedule.Schedule``: s_b,
    s_h, s_m, s_base (grid, W) int32 contiguous; NM = N_CTX / 128 query blocks per head). SPARSE
    (block-sparse, 128 × 128 tiles): the walk lists of ``triton/plan.py``, kv_num (B, H, NM, 2) = (partial,
    full) counts and kv_idx (B, H, NM, TK) = the key tiles, partial first, int32 contiguous; dense: both
    unused."""
    BM_WG: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_M: gl.constexpr = 2 * BM_WG
    gl.static_assert(BLOCK_M == BLOCK_N, "causal block skipping assumes BLOCK_M == BLOCK_N")
    # the schedule keeps base modulo 2^30 (schedule.BASE_PERIOD): slots and phases need 2·NUM_STAGES | 2^30
    gl.static_assert((NUM_STAGES & (NUM_STAGES - 1)) == 0, "NUM_STAGES must be a power of two")

    n_items = gl.load(count + gl.program_id(0))
    qk_scale = sm_scale * 1.4426950408889634

    # Q: two buffers of two warpgroup tiles (item i uses buffer i mod 2, so the next item's Q loads while
    # this one runs); K, V: rings of NUM_STAGES slots, their positions counted across items
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [4] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [NUM_STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [NUM_STAGES] + v_desc.block_type.shape, v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=2)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)
        mbarrier.init(v_empty.index(i), count=2)
    fence_async_shared()

    cons_args = (o_desc, lse_ptr, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty, v_empty,
                 qk_scale, s_b, s_h, s_m, s_base, n_items, W, NM, H, N_CTX, kv_num, kv_idx, TK, o_pb, o_ph, o_ch)
    load_args = (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, k_empty, v_empty,
                 s_b, s_h, s_m, s_base, n_items, W, NM, H, GROUPS, kv_num, kv_idx, TK, q_pb, q_ph, q_ch, k_pb, k_ph,
                 k_ch, v_pb, v_ph, v_ch)
    if SPARSE and CAUSAL:
        gl.warp_specialize([
            (_attn_consumer_wg0_sparse_causal, cons_args),
            (_attn_consumer_wg1_sparse_causal, cons_args),
            (_attn_load_sparse, load_args),
        ], [4, 1], [CONSUMER_REGS, 24])
    elif SPARSE:
        gl.warp_specialize([
            (_attn_consumer_wg0_sparse, cons_args),
            (_attn_consumer_wg1_sparse, cons_args),
            (_attn_load_sparse, load_args),
        ], [4, 1], [CONSUMER_REGS, 24])
    elif CAUSAL:
        gl.warp_specialize([
            (_attn_consumer_wg0_causal, cons_args),
            (_attn_consumer_wg1_causal, cons_args),
            (_attn_load_causal, load_args),
        ], [4, 1], [CONSUMER_REGS, 24])
    else:
        gl.warp_specialize([
            (_attn_consumer_wg0_full, cons_args),
            (_attn_consumer_wg1_full, cons_args),
            (_attn_load_full, load_args),
        ], [4, 1], [CONSUMER_REGS, 24])


def _descs(q, k, v, o):
    """TMA descriptors over the row views of q, k, v, o (``layout.row_view``: (B·H·N, D) or (B·N, H·D),
    each tensor its own) and their (per_batch, per_head, col_per_head), in that order."""
    q_layout, kv_layout = desc_layouts(gl_dtype(q.dtype), q.shape[-1], BLOCK_M_WG, BLOCK_N)
    (qd, qc), (kd, kc), (vd, vc), (od, oc) = (row_descriptor(t, rows, lay) for t, rows, lay in (
        (q, BLOCK_M_WG, q_layout), (k, BLOCK_N, kv_layout), (v, BLOCK_N, kv_layout), (o, BLOCK_M_WG, q_layout)))
    return (qd, kd, vd, od), (*qc, *kc, *vc, *oc)


def forward(q, k, v, prob, route=None):
    """q (B, H, N, D), k, v (B, Hkv, N, D) fp16/bf16, D in HEAD_DIMS, each contiguous or a (B, N, H, D)
    transposed view (``layout.py``) -> (out (B, H, N, D), lse (B, H, N) fp32 contiguous), for a call that
    ``dispatch.gluon_rule`` accepts. out is laid out as ``torch.empty_like(q)`` (q's strides when q is
    dense, e.g. a (B, N, H, D) transposed view; else compact in q's stride order, e.g. (B, N, H, D) for
    a packed QKV slice), what ``op.py`` returns (no copy).
    ``route``: the plan (unused here)."""
    from ..triton.host import tile_lists

    B, H, N, D = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(B, H, N, dtype=torch.float32, device=q.device)
    descs, views = _descs(q, k, v, out)
    sparse = prob.tiles is not None
    causal = prob.window == (None, 0)  # dense: prob.causal; block-sparse: the diagonal tiles masked
    if sparse:  # the per-mask walk lists (built once per mask, shared with the backward and Triton)
        lists = tile_lists(prob, B, H, N, N, ("KV",))
        kv_num, kv_idx = lists["KV_NUM"], lists["KV_IDX"]
        s = schedule.sparse(kv_num)
    else:
        s = schedule.dense(B, H, N // BLOCK_M, causal, q.device)
        kv_num = kv_idx = lse  # unused
    # one CTA per SM (at most one per item), each walking its row of the schedule
    _attn_fwd_ws[(s.count.shape[0],)](*descs, lse, s.b, s.h, s.m, s.base, s.count, kv_num, kv_idx, float(prob.scale),
                                      N, N // BLOCK_M, s.b.shape[1], H, prob.groups, kv_idx.shape[-1] if sparse else 0,
                                      *views, HEAD_DIM=D, BLOCK_N=BLOCK_N, NUM_STAGES=NUM_STAGES, CAUSAL=causal,
                                      SPARSE=sparse, CONSUMER_REGS=CONSUMER_REGS, num_warps=4, maxnreg=MAXNREG)
    return out, lse
