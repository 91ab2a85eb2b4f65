"""Warp-specialised Hopper backward (sm_90) in Gluon: the backward of the calls the Gluon forward takes,
GQA included (``dispatch.plan`` says which), ``deterministic=True`` too (its dQ adds ordered below),
at head dim 64 and 128 (``dispatch.gluon_rule``).

Head dim: the kernel reads D from its descriptors (D = 64 or 128; ``HEAD_DIMS``). At D = 64 the same
schedule runs with half-width tiles (each warpgroup's dQ half is 64 × 32). H200, 2026-12-02 00:50 UTC
(BENCHMARKS.md, session 17 call 1; bf16, B·N = 16k, H = 32, through ``flashproof bench``): backward
426 / 443 / 452 TFLOP/s at N = 4k / 8k / 16k, 397 / 424 at 8k / 16k causal, against 350 / 356 / 355 /
328 / 339 for the Triton backward and 431 / 451 / 452 / 415 / 433 for cuDNN's.

FlashAttention-3's schedule: one kernel, 5 N²d matrix products per (query block, key block) pair,
dQ added with fp32 reductions (so its last bits depend on the order the CTAs run in). As in FA3 the
consumers never issue them: each writes its 64×64 dQ half into a double-buffered 64×128 fp32 staging
tile in shared memory and arrives on an mbarrier, and a 1-warp dQ writer partition adds the whole tile
to global memory with one TMA bulk tensor reduce-add (``cp.reduce.async.bulk.tensor.2d.global
.shared::cta.add``; Gluon 3.6's Python ``tma`` module lacks it, Triton's op and lowering are reached
through the Gluon builder: ``common.tma_reduce_add``), handing the buffer back once the copy has read
it. One add per dQ element per (query block, key block), as before; only the order of the adds varies.
Measured on the H200 (scripts/gpu_tmadq.sh, 2026-12-01 19:27 UTC, d = 128 bf16, N = 4k / 8k / 16k
non-causal, 8k causal, GQA 64/8 8k causal): 515 / 532 / 547 / 485 / 406 TFLOP/s against 461 / 474 /
490 / 446 / 384 for 16-byte ``red.global.add.v4.f32`` reductions issued by the consumers from
registers (inline PTX), which were deleted (they lived until commit d18a356); one scalar fp32 atomic
per element before those (406 / 428 / 428 / 397 at 4k / 8k / 16k / 8k causal) lived until 62d839a.

Deterministic mode (``prob.deterministic``: the DETERMINISTIC constexpr; ``_bwd_dq_writer_det``): two writer
warps (staging buffer w, iterations it ≡ w mod 2, each) add into each dQ tile in a fixed order of key blocks,
kept by one int32 semaphore per (batch, head, query block) in global memory (``semaphore.py``: acquire spin,
add, wait for the add's completion, release increment), so dQ is bitwise repeatable; dK, dV are per-CTA sums
in registers, repeatable already. Non-causal, ascending key blocks and every CTA walks qb = 0, 1, ... (no
wrap); causal, descending key blocks and the grid runs the key blocks last to first (shortest first), so a
writer only ever waits on CTAs launched before its own (forward progress assumes CTAs start in launch order,
as FA3's deterministic mode does). Only the writer warps wait; the consumers run ahead until both staging
buffers are full. One writer warp (until commit b331ebf, where two were an A/B constexpr) held the consumers
back at d = 64: H200, 2026-12-02 15:06 UTC (BENCHMARKS.md), one → two writers, TFLOP/s: 353 → 367 / 401 → 413
/ 420 → 431 at d = 64, 4k / 8k / 16k; 468 → 485 / 504 → 525 at d = 128, 4k / 8k; causal and GQA within 1 %;
dQ, dK, dV bitwise the same. The router sends deterministic=True calls here. H200, 2026-12-01 19:55 UTC
(scripts/gpu_tmadq.sh): bitwise equal over 20 runs and within the tolerance rule at G = 1 and GQA 4, causal
and not, bf16 and fp16; backward 469 / 522 / 486 / 345 TFLOP/s at 4k, 16k non-causal, 8k causal, GQA 64/8 8k
causal (0.93 / 0.98 / 1.00 / 0.85 of the non-deterministic backward; 0.91 / 0.99 / 0.99 / 0.73 of cuDNN's).
(Called directly then; the router took it after.)

Grid: (N / BLOCK_N, B·Hkv·SPLITS), the key block fastest: the CTAs resident at once are the key blocks of
one or two heads, which all stream the same Q, dO, LSE and δ, so those reads hit L2. (The heads
fastest, which launches every head's heaviest causal block first, read 4-8 % slower non-causal and
no faster causal on the H200: BENCHMARKS.md, 2026-12-01 17:06 UTC; it lived until 2c9d53b.) (A persistent grid, one CTA per SM walking a
host-built schedule as the forward does, measured 1.02–1.04× causal but 0.97–0.98× non-causal at d = 128 and
0.91–0.98× deterministic: BENCHMARKS.md, session 24; it lived in 5090792.)  One CTA = one key block of BLOCK_N = 128 keys of
one (batch, KV head), and G / SPLITS of the G = Hq / Hkv query heads that read it (GQA; G = 1
otherwise), consecutive: K/V stay resident while the CTA walks the query blocks of its heads, so dK,
dV sum over them in registers and are written once, and each head's dQ gets its own reductions. The
grid's second dim is (batch, KV head, split), the split fastest; SPLITS = ``head_splits(G,
deterministic)``: one head per CTA deterministic, two otherwise. With SPLITS > 1 each CTA stores its dK,
dV partial sums into an fp32 (B, Hkv·SPLITS, N, D) buffer (head hk·SPLITS + s: the epilogue's own
decomposition of its program id, with G / SPLITS as the group) and ``triton/partials.py`` sums the SPLITS
partials in a fixed order and rounds once (deterministic). Why: causal, key block 0 walks every query block of each of its
heads, so with the whole group per CTA the longest CTAs ran 2·G·N/64 iterations; the deterministic grid
launches them last (the measurements: ``head_splits``). Iteration it is query
block t = it % n_iter of head g = it // n_iter (the heads outermost): one counter drives the ring
slots and phases and the dS buffers on both sides, so nothing restarts between heads. Heads outermost,
the resident CTAs of one (batch, KV head) add into the dQ of one or two query heads at a time, which
stays in L2; with the heads fastest (until commit 8373e02) they added across all G heads' dQ (32 MB
at Hq / Hkv = 64 / 8, N = 8k) and the reduce-adds missed L2: H200, 2026-12-01 22:30 UTC (BENCHMARKS.md),
GQA 64/8 at 8k 408 → 543 TFLOP/s non-causal, 409 → 471 causal. (Nested loops over heads and query
blocks in the producer and the writers spilled the 24-register warps; a loop over heads with
the per-head schedule inside, masked diagonal iterations unrolled per head, spilled registers in
the consumers: its extra loop state did not fit in 240.)
Partitions (``gl.warp_specialize``):

* 2 consumer warpgroups (default partition + one 4-warp worker, ``CONSUMER_REGS`` registers after
  setmaxnreg).  Warpgroup w owns keys [w·64, w·64+64) of the block: its dK_w, dV_w (64×128 fp32
  each) live in registers for the whole kernel.
* 1 producer warp (24 registers): TMA-loads K and V (128×128, resident in shared memory) once,
  then streams Q_i + lse_i and dO_i + Δ_i (64×128 bf16 tiles, 64-float 1-D tiles) through a
  NUM_STAGES ring; each slot has a ready mbarrier (TMA byte count) and an empty one (one arrival
  per consumer warpgroup).  lse/Δ come through shared memory, not per-thread global loads: the
  pointer registers of those loads were what made the consumers spill.
* 1 dQ writer warp (24 registers), ``_bwd_dq_writer`` (deterministic: two, ``_bwd_dq_writer_det``, one per
  staging buffer): per iteration it waits dq_full[buf] (one
  arrival per consumer warpgroup), issues the reduce-add of staging buffer buf, waits until the copy
  has read it (``tma.store_wait(0)``) and arrives on dq_empty[buf], which the consumers wait on
  (ring-slot phases) before they write that buffer again. Shared memory: 225.6 KiB of the 227 KiB a
  CTA may take.

Key-major ("transposed") formulation, per query block i of 64 rows, consumer warpgroup w:

    Sᵀ  = K_w Qᵢᵀ                    (64 keys × 64 queries, async wgmma, A=K_w smem, B=Qᵀ smem)
    dPᵀ = V_w dOᵢᵀ                   (async; still in flight during the exponentials)
    wait Sᵀ;  Pᵀ = 2^(Sᵀ·scale·log2e − lse·log2e)   [causal: masked on the 2 diagonal query blocks]
    wait dPᵀ; dSᵀ = Pᵀ ∘ (dPᵀ − Δ)
    dV_w += Pᵀ dOᵢ                   (A = Pᵀ bf16 in registers, async)
    dSᵀ → shared memory (double-buffered 128×64 tile, both warpgroups write their 64 rows,
          fence + warpgroup barrier, then arrive on ds_ready[buf], count 2)
    dK_w += dSᵀ Qᵢ                   (A = this warpgroup's dSᵀ rows from shared memory, async)
    wait ds_ready[buf];  dQ_w = dSᵢ K[:, w·64:(w+1)·64]   (64 queries × 64 dims, K=128 keys;
          A = dS = the dSᵀ tile permuted in shared memory, B = a column slice of the K tile)
    wait all wgmmas; release Q/dO slot; wait dq_empty[it % 2]; dQ_w -> columns w·64.. of staging
          buffer it % 2; proxy fence, warpgroup barrier, arrive dq_full (the writer does the rest).

The two warpgroups split the dQ product along the head dimension, so each dQ element gets ONE
fp32 add per (query block, key block) — 64×128 adds per CTA iteration — not two.
Double-buffering dS is enough without an "empty" barrier: a warpgroup writes ds[buf] at
iteration t+2 only after it waited ds_ready[buf^1] of iteration t+1, which the other warpgroup
arrives on after its wait-all of iteration t (which retired its dQ read of ds[buf]).

dS is scaled by sm_scale before it is rounded for the two products that read it, so dK and dQ come
out scaled: dQ accumulates scale · dS K in fp32 and the wrapper's conversion to q's dtype and layout
is one pass (an fp32 multiply of the dQ tile before its reductions spilled registers).  lse is the
natural-log logsumexp; Δ = rowsum(o·do).

Causal (Nq = Nk, top-left = bottom-right): key block j sees query blocks i ≥ 2j (64-row query
blocks); only query blocks 2j, 2j+1 are masked, behind a uniform branch on the block index (one
loop body: two copies of it, masked and not, made the consumers spill).  Non-causal: every CTA
visits all query blocks starting at its own diagonal (2j) and wrapping, so CTAs of one head do not
all hammer the same dQ rows with atomics at the same time.

Block-sparse (``SPARSE``; 128 × 128 tiles, never deterministic): one query head per CTA (SPLITS = G), which
walks its key tile's query-tile list (``triton/plan.py``), two 64-row query blocks per entry, in the producer
and the dQ writer (each reads the entry itself); the consumers need only the partial count: causal, the only
partial tile is the diagonal and it is listed first, so the masked blocks are iterations 0 and 1. An empty
list writes dK = dV = 0.

Layouts: Q, K, V, dO are read in place through TMA descriptors over their row views (``layout.py``:
a (B·H·N, D) or a (B·N, H·D) matrix, each tensor its own); dK, dV are stored through the same kind
of view (laid out as ``torch.empty_like`` of K, V); dQ accumulates in a contiguous fp32 buffer and
is converted into Q's layout by the wrapper.
"""
from __future__ import annotations

import torch

from . import layout
from .common import AVAILABLE, desc_layouts, gl_dtype, jit as _jit, row_descriptor, shared_layout, tma_reduce_add
from .semaphore import acquire_wait, complete_release

if AVAILABLE:
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                                  warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


BLOCK_M = 64  # query rows per iteration
BLOCK_N = 128  # keys per CTA (two consumer warpgroups of 64)
HEAD_DIMS = (64, 128)  # the head dims this backward takes (D = Dv): dispatch.GLUON_HEAD_DIMS
NUM_STAGES = 2  # Q/dO ring slots (at d = 64, 3 and 4 slots measured no faster: BENCHMARKS.md, 2026-12-02)
MAXNREG = 168  # launch cap: 12 warps' worth × 168 fits the 64K register file (9 warps used, 10 deterministic)
CONSUMER_REGS = 240
PRODUCER_REGS = 24
# ----------------------------------------------------------------------------------------
# Producer: 1 warp issuing TMA loads.
# ----------------------------------------------------------------------------------------
@_jit
def _bwd_load(SPARSE: gl.constexpr, q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem, q_smem,
              do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready, lse_smem, delta_smem, qk_scale,
              sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0,
              do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr,
              dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part):
    """Per query head g of the group: Q rows q_row0 + g·q_ph (+ the query block), columns
    q_col0 + g·q_ch (the row view, ``layout.Coords``); dO alike; lse/Δ rows vec_row0 + g·N. The query
    blocks: dense, i0, i0 + 1, ... (mod the block count); block-sparse (one head, G = 1), the two 64-row
    halves of each 128-row query tile of the key block's list q_list, in its order."""
    NUM_STAGES: gl.constexpr = q_smem.type.shape[0]
    BM: gl.constexpr = q_smem.type.shape[1]
    mbarrier.expect(kv_bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [k_row, k_col], kv_bar, k_smem)
    tma.async_copy_global_to_shared(v_desc, [v_row, v_col], kv_bar, v_smem)
    for it in range(G * n_iter):  # the consumers' order: query block t of head g, heads outermost
        g = it // n_iter
        t = it - g * n_iter
        if SPARSE:
            qrow = (2 * gl.load(q_list + t // 2) + t % 2) * BM  # issued before the waits below
        else:
            qrow = ((i0 + t) % n_qblk) * BM
        slot = it % NUM_STAGES
        phase = (it // NUM_STAGES) & 1
        mbarrier.wait(q_empty.index(slot), phase ^ 1)
        mbarrier.expect(q_ready.index(slot), q_desc.block_type.nbytes + lse_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row0 + g * q_ph + qrow, q_col0 + g * q_ch], q_ready.index(slot),
                                        q_smem.index(slot))
        tma.async_copy_global_to_shared(lse_desc, [vec_row0 + g * N_CTX + qrow], q_ready.index(slot),
                                        lse_smem.index(slot))  # lse, Δ: (B, Hq, N) contiguous
        mbarrier.wait(do_empty.index(slot), phase ^ 1)
        mbarrier.expect(do_ready.index(slot), do_desc.block_type.nbytes + delta_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(do_desc, [do_row0 + g * do_ph + qrow, do_col0 + g * do_ch],
                                        do_ready.index(slot), do_smem.index(slot))
        tma.async_copy_global_to_shared(delta_desc, [vec_row0 + g * N_CTX + qrow], do_ready.index(slot),
                                        delta_smem.index(slot))


@_jit
def _bwd_dq_writer(SPARSE: gl.constexpr, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty,
                   ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                   q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col,
                   dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb,
                   dv_ph, dv_ch, dv_rs, q_list, n_part):
    """The dQ writer (1 warp): per iteration (the consumers' order), once both warpgroups have staged their
    halves (dq_full), dQ[rows of (head g, query block qb)] += the BM × D tile by one TMA bulk tensor
    reduce-add (``common.tma_reduce_add``; fp32 adds in global memory, in whatever order the CTAs'
    reductions arrive, as with the vector reductions); it waits until the copy has read the buffer
    (``store_wait(0)``, this thread's bulk groups) and hands it back (dq_empty)."""
    BM: gl.constexpr = dq_smem.type.shape[1]
    for it in range(G * n_iter):
        g = it // n_iter
        t = it - g * n_iter
        if SPARSE:
            qb = 2 * gl.load(q_list + t // 2) + t % 2  # the loader's block
        else:
            qb = (i0 + t) % n_qblk  # causal: i0 + t < n_qblk, the same block as the consumers'
        buf = it % 2
        mbarrier.wait(dq_full.index(buf), (it // 2) & 1)
        tma_reduce_add(dq_desc, [vec_row0 + g * N_CTX + qb * BM, 0], dq_smem.index(buf))
        tma.store_wait(0)
        mbarrier.arrive(dq_empty.index(buf), count=1)


@_jit
def _bwd_dq_writer_det(CAUSAL: gl.constexpr, seq_row0, i0, n_iter, n_qblk, G, N_CTX, vec_row0, dq_desc, dq_smem,
                       dq_full, dq_empty, sem_grp, BN: gl.constexpr, w):
    """The deterministic dQ writer w (two warps, w = 0, 1; writer w takes the iterations it ≡ w mod 2,
    i.e. staging buffer w): as ``_bwd_dq_writer``, but the reduce-adds into each dQ tile (one per key
    block that reads it) come in a fixed order, so the fp32 sums are bitwise repeatable.
    sem_grp[g·n_qblk + qb] (int32, zeroed by the host) counts the adds done into the tile of (head
    h0 + g, query block qb); this key block j waits until it equals its rank, adds, waits for the add
    to COMPLETE and increments it (``semaphore``). Ranks: non-causal, ascending j (rank j; every key
    block walks qb = 0, 1, ... and the grid launches key block j − 1 before j); causal, descending j
    (rank qb // 2 − j among the key blocks 0 .. qb // 2 that reach qb; the grid launches the key
    blocks last to first, shortest first). Either way a writer waits only on key blocks launched
    before its own — the forward-progress argument assumes CTAs start in launch order (key block
    fastest), as FA3's deterministic mode does. Two writers: one add's chain (the acquire spin, the
    reduce-add, its completion, the release) is longer than a consumer iteration at d = 64, so one
    writer held the consumers back; with two, the chains of consecutive tiles overlap (the order of
    the adds into each tile, hence every bit, is the same: BENCHMARKS.md, 2026-12-02 15:06 UTC)."""
    BM: gl.constexpr = dq_smem.type.shape[1]
    j = seq_row0 // BN
    half = n_iter // 2  # n_iter is even (N / 64 query blocks; causal, from the diagonal block 2j)
    for k in range(G * half):  # the consumers' iteration it = 2k + w: query block t of head g
        g = k // half
        t = 2 * (k - g * half) + w
        qb = (i0 + t) % n_qblk
        mbarrier.wait(dq_full.index(w), k & 1)  # buffer w's (it // 2)-th = k-th fill
        if CAUSAL:
            rank = qb // 2 - j
        else:
            rank = j
        sem = sem_grp + g * n_qblk + qb
        acquire_wait(sem, rank)
        tma_reduce_add(dq_desc, [vec_row0 + g * N_CTX + qb * BM, 0], dq_smem.index(w))
        complete_release(sem)
        mbarrier.arrive(dq_empty.index(w), count=1)


@_jit
def _bwd_dq_writer_det_full(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                            ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                            q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row,
                            v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs,
                            dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part, w):
    _bwd_dq_writer_det(False, seq_row0, i0, n_iter, n_qblk, G, N_CTX, vec_row0, dq_desc, dq_smem, dq_full, dq_empty,
                       sem_grp, k_smem.type.shape[0], w)


@_jit
def _bwd_dq_writer_det_causal(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                              ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G,
                              N_CTX, q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col,
                              v_row, v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph,
                              dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part, w):
    _bwd_dq_writer_det(True, seq_row0, i0, n_iter, n_qblk, G, N_CTX, vec_row0, dq_desc, dq_smem, dq_full, dq_empty,
                       sem_grp, k_smem.type.shape[0], w)


# ----------------------------------------------------------------------------------------
# Consumer warpgroup.
# ----------------------------------------------------------------------------------------
@_jit
def _bwd_iter(it, qb, dk, dv, WG: gl.constexpr, MASK: gl.constexpr, k_w, v_w, k_cols, q_smem, do_smem, q_ready,
              do_ready, q_empty, do_empty, ds_smem, ds_ready, dq_smem, dq_full, dq_empty, lse_smem, delta_smem,
              qk_scale, sm_scale, seq_row0, s_layout: gl.constexpr, a_layout: gl.constexpr, dq_layout: gl.constexpr):
    """One (query block qb, this key block) pair of one query head: ``it`` is the pipeline counter
    (ring slot and phase, dS buffer), continuous across the heads of the group."""
    NUM_STAGES: gl.constexpr = q_smem.type.shape[0]
    BM: gl.constexpr = q_smem.type.shape[1]
    D: gl.constexpr = q_smem.type.shape[2]
    BNW: gl.constexpr = k_w.type.shape[0]  # keys of this warpgroup (64)
    DQW: gl.constexpr = k_cols.type.shape[1]  # dQ columns of this warpgroup (64)

    slot = it % NUM_STAGES
    phase = (it // NUM_STAGES) & 1
    buf = it % 2
    bphase = (it // 2) & 1

    q_s = q_smem.index(slot)
    do_s = do_smem.index(slot)
    col_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    zero_s = gl.zeros([BNW, BM], gl.float32, s_layout)
    # S^T = K_w Q^T
    mbarrier.wait(q_ready.index(slot), phase)
    s_tok = warpgroup_mma(k_w, q_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)
    # dP^T = V_w dO^T
    mbarrier.wait(do_ready.index(slot), phase)
    dp_tok = warpgroup_mma(v_w, do_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)

    # P^T = exp2(S^T·scale·log2e − lse·log2e) while dP^T is still in flight
    sT = warpgroup_mma_wait(num_outstanding=1, deps=[s_tok])
    lse2 = lse_smem.index(slot).load(col_layout) * 1.4426950408889634  # log2 e
    pT = gl.exp2(sT * qk_scale - gl.expand_dims(lse2, 0))
    if MASK:
        if qb * BM < seq_row0 + 2 * BNW:  # the block's two diagonal query blocks (a uniform branch)
            keys = seq_row0 + WG * BNW + gl.arange(0, BNW, layout=gl.SliceLayout(1, s_layout))
            qrs = qb * BM + gl.arange(0, BM, layout=col_layout)
            keep = gl.expand_dims(keys, 1) <= gl.expand_dims(qrs, 0)
            pT = gl.where(keep, pT, gl.zeros_like(pT))

    dpT = warpgroup_mma_wait(num_outstanding=0, deps=[dp_tok])
    delta = delta_smem.index(slot).load(col_layout)
    dsT = pT * (dpT - gl.expand_dims(delta, 0)) * sm_scale  # dS·scale: dK = dSᵀQ·scale, dQ = dS K·scale
    pT_op = gl.convert_layout(pT.to(q_smem.dtype), a_layout)
    # dV += P^T dO   (A = P^T from registers)
    dv_tok = warpgroup_mma(pT_op, do_s, dv, is_async=True)

    # dS^T rows of this warpgroup -> shared memory (A operand of dK, and half of dQ's A)
    ds_b = ds_smem.index(buf)
    ds_w = ds_b.slice(WG * BNW, BNW, dim=0)
    ds_w.store(dsT.to(q_smem.dtype))
    fence_async_shared()
    gl.thread_barrier()
    mbarrier.arrive(ds_ready.index(buf), count=1)
    # dK += dS^T Q
    dk_tok = warpgroup_mma(ds_w, q_s, dk, is_async=True)
    mbarrier.wait(ds_ready.index(buf), bphase)
    # dQ_w = dS K[:, cols of w]   (64 queries × 64 dims, reduction over the 128 keys)
    dq_tok = warpgroup_mma(ds_b.permute((1, 0)), k_cols, gl.zeros([BM, DQW], gl.float32, dq_layout),
                           use_acc=False, is_async=True)

    dv, dk, dq, pT_op, q_s, do_s, ds_b = warpgroup_mma_wait(
        num_outstanding=0, deps=[dv_tok, dk_tok, dq_tok, pT_op, q_s, do_s, ds_b])
    mbarrier.arrive(q_empty.index(slot), count=1)
    mbarrier.arrive(do_empty.index(slot), count=1)

    _dq_stage(dq_smem, dq_full, dq_empty, it, WG, dq)  # the dQ writer's TMA reduce-add does the rest
    return dk, dv


@_jit
def _dq_stage(dq_smem, dq_full, dq_empty, it, WG: gl.constexpr, dq):
    """This warpgroup's dQ tile (BM × DQW fp32) -> columns [WG·DQW, (WG+1)·DQW) of staging buffer it % 2
    (BM × D fp32), once the dQ writer has released it (dq_empty, phase as for a ring slot); then the
    proxy fence (the tile goes in through the generic proxy, the TMA reads it through the async one),
    the warpgroup's barrier, and one arrival on dq_full (count 2: both warpgroups)."""
    DQW: gl.constexpr = dq.type.shape[1]
    buf = it % 2
    mbarrier.wait(dq_empty.index(buf), ((it // 2) & 1) ^ 1)
    dq_smem.index(buf).slice(WG * DQW, DQW, dim=1).store(dq)
    fence_async_shared()
    gl.thread_barrier()
    mbarrier.arrive(dq_full.index(buf), count=1)


@_jit
def _bwd_consumer(WG: gl.constexpr, CAUSAL: gl.constexpr, SPARSE: gl.constexpr, k_smem, v_smem, q_smem, do_smem, kv_bar,
                  q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale,
                  seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch,
                  vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb,
                  dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part):
    BM: gl.constexpr = q_smem.type.shape[1]
    D: gl.constexpr = q_smem.type.shape[2]
    BN: gl.constexpr = k_smem.type.shape[0]
    BNW: gl.constexpr = BN // 2
    DQW: gl.constexpr = D // 2
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BM, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, D, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, DQW, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)

    k_w = k_smem.slice(WG * BNW, BNW, dim=0)
    v_w = v_smem.slice(WG * BNW, BNW, dim=0)
    k_cols = k_smem.slice(WG * DQW, DQW, dim=1)
    dk = gl.zeros([BNW, D], gl.float32, acc_layout)
    dv = gl.zeros([BNW, D], gl.float32, acc_layout)
    mbarrier.wait(kv_bar, 0)

    # GQA: iteration it is query block t = it % n_iter of head it // n_iter (heads outermost), so dK, dV
    # sum over the group in registers. Causal: blocks from the diagonal on (no wrap), the first two masked.
    for it in range(0, G * n_iter):
        t = it % n_iter
        if SPARSE:  # qb only decides the mask: the list's partial tile (first, at most one) is the diagonal
            qb = i0 + t + 2 * (t >= 2 * n_part).to(gl.int32)  # i0 = 2j; past it, a block the mask skips
        elif CAUSAL:
            qb = i0 + t
        else:
            qb = (i0 + t) % n_qblk
        dk, dv = _bwd_iter(it, qb, dk, dv, WG, CAUSAL, k_w, v_w, k_cols, q_smem, do_smem, q_ready, do_ready, q_empty,
                           do_empty, ds_smem, ds_ready, dq_smem,
                           dq_full, dq_empty, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, s_layout, a_layout,
                           dq_layout)

    # epilogue: dK, dV -> global (direct stores from the accumulator layout), each through its
    # row view (``layout.Coords``; row strides dk_rs, dv_rs). The block's position is recomputed here
    # from the program ids and the kernel's arguments, not carried through the loop in registers.
    # (``layout.head_rc``'s formula, written out: through the helper the column product moves ahead
    # of the row's 64-bit scaling in the PTX, and ptxas then schedules the causal kernels differently.)
    bk = gl.program_id(1)
    Hkv = Hq // G
    b = bk // Hkv
    hk = bk % Hkv
    dk_blk = dk_ptr + (b * dk_pb + hk * dk_ph + seq_row0).to(gl.int64) * dk_rs + hk * dk_ch
    dv_blk = dv_ptr + (b * dv_pb + hk * dv_ph + seq_row0).to(gl.int64) * dv_rs + hk * dv_ch
    r = gl.arange(0, BNW, layout=gl.SliceLayout(1, acc_layout)) + WG * BNW
    c = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    gl.store(dk_blk + gl.expand_dims(r * dk_rs, 1) + gl.expand_dims(c, 0), dk.to(dk_blk.dtype.element_ty))
    gl.store(dv_blk + gl.expand_dims(r * dv_rs, 1) + gl.expand_dims(c, 0), dv.to(dv_blk.dtype.element_ty))


# constexprs do not pass through the partitions' argument tuples: one wrapper per combination
@_jit
def _bwd_wg0_full(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready,
                  lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph,
                  q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem,
                  dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch,
                  dv_rs, q_list, n_part):
    _bwd_consumer(0, False, False, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty,
                  ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                  q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col,
                  dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb,
                  dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_wg0_causal(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready,
                    lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph,
                    q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                    dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                    dv_ch, dv_rs, q_list, n_part):
    _bwd_consumer(0, True, False, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty,
                  ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                  q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col,
                  dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb,
                  dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_wg0_sparse(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready,
                    lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph,
                    q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                    dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                    dv_ch, dv_rs, q_list, n_part):
    _bwd_consumer(0, False, True, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty,
                  ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                  q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col,
                  dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb,
                  dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_wg0_sparse_causal(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                           ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                           q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row,
                           v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs,
                           dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part):
    _bwd_consumer(0, True, True, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                  ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0,
                  q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                  dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                  dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_wg1_full(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready,
                  lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph,
                  q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem,
                  dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch,
                  dv_rs, q_list, n_part):
    _bwd_consumer(1, False, False, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty,
                  ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                  q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col,
                  dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb,
                  dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_wg1_causal(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready,
                    lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph,
                    q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                    dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                    dv_ch, dv_rs, q_list, n_part):
    _bwd_consumer(1, True, False, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty,
                  ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                  q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col,
                  dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb,
                  dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_wg1_sparse(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready,
                    lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph,
                    q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                    dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                    dv_ch, dv_rs, q_list, n_part):
    _bwd_consumer(1, False, True, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty,
                  ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                  q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col,
                  dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb,
                  dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_wg1_sparse_causal(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                           ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                           q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row,
                           v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs,
                           dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part):
    _bwd_consumer(1, True, True, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                  ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0,
                  q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                  dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                  dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_load_partition(q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem, q_smem, do_smem, kv_bar,
                        q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready, lse_smem, delta_smem, qk_scale,
                        sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph, q_col0, q_ch, do_row0, do_ph,
                        do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem, dq_full, dq_empty,
                        sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list,
                        n_part):
    _bwd_load(False, q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem, q_smem, do_smem, kv_bar,
              q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale,
              seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch,
              vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb,
              dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_load_partition_sparse(q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem, q_smem, do_smem,
                               kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready, lse_smem, delta_smem,
                               qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph, q_col0, q_ch,
                               do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem,
                               dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                               dv_ch, dv_rs, q_list, n_part):
    _bwd_load(True, q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem, q_smem, do_smem, kv_bar,
              q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready, lse_smem, delta_smem, qk_scale, sm_scale,
              seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch,
              vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb,
              dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_dq_writer_dense(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                         ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                         q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row,
                         v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs,
                         dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part):
    _bwd_dq_writer(False, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                   ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0,
                   q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                   dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                   dv_ch, dv_rs, q_list, n_part)


@_jit
def _bwd_dq_writer_sparse(k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                          ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX,
                          q_row0, q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row,
                          v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs,
                          dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part):
    _bwd_dq_writer(True, k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem,
                   ds_ready, lse_smem, delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, G, N_CTX, q_row0,
                   q_ph, q_col0, q_ch, do_row0, do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc,
                   dq_smem, dq_full, dq_empty, sem_grp, Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph,
                   dv_ch, dv_rs, q_list, n_part)


@_jit
def _attn_bwd_ws(q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, dq_desc, sem_ptr, dk_ptr, dv_ptr, q_num, q_idx,
                 sm_scale, N_CTX, Hq, G, SPLITS, TQ, q_pb, q_ph, q_ch, k_pb, k_ph, k_ch, v_pb, v_ph, v_ch, do_pb, do_ph,
                 do_ch, dk_pb, dk_ph, dk_ch, dv_pb, dv_ph, dv_ch, dk_rs, dv_rs, NUM_STAGES: gl.constexpr,
                 CAUSAL: gl.constexpr, SPARSE: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                 DETERMINISTIC: gl.constexpr):
    """Row views (``layout.Coords``, one per tensor): the row of (b, h, n) is b·*_pb + h·*_ph + n, its
    columns start at h·*_ch; dK's and dV's row strides are dk_rs, dv_rs. dQ (fp32) is a contiguous
    (B, Hq, N, D) accumulator. SPARSE (block-sparse, 128 × 128 tiles, one query head per CTA: SPLITS = G):
    the walk lists of ``triton/plan.py`` per key tile, q_num (B, Hq, N / 128, 2) = (partial, full) counts
    and q_idx (B, Hq, N / 128, TQ) = the query tiles, partial first, int32 contiguous; dense: unused."""
    BM: gl.constexpr = q_desc.block_type.shape[0]
    BN: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_D: gl.constexpr = q_desc.block_type.shape[1]
    gl.static_assert(BN == 2 * BM, "the causal schedule assumes BLOCK_N == 2·BLOCK_M")
    gl.static_assert(dq_desc.block_type.shape[0] == BM and dq_desc.block_type.shape[1] == HEAD_D,
                     "dQ's TMA box: BLOCK_M rows × the head dim")
    dt: gl.constexpr = q_desc.dtype

    j = gl.program_id(0)  # key block: the fastest grid dim (the resident CTAs share their Q, dO in L2)
    if DETERMINISTIC and CAUSAL:
        j = gl.num_programs(0) - 1 - j  # shortest first: a writer waits only on earlier-launched key blocks
    bs = gl.program_id(1)  # (batch, KV head, head split), the split fastest
    bk = bs // SPLITS
    Hkv = Hq // G
    b = bk // Hkv
    hk = bk % Hkv
    GS = G // SPLITS  # the query heads of this CTA: GS of the group, from h0
    seq_row0 = j * BN  # first key (within the sequence)
    h0 = hk * G + (bs - bk * SPLITS) * GS  # the CTA's first query head
    k_row, k_col = layout.head_rc(b, hk, seq_row0, k_pb, k_ph, k_ch)  # row views: (b, hk, seq_row0)
    v_row, v_col = layout.head_rc(b, hk, seq_row0, v_pb, v_ph, v_ch)
    q_row0, q_col0 = layout.head_rc(b, h0, 0, q_pb, q_ph, q_ch)  # (b, h0, 0): the CTA's first query head
    do_row0, do_col0 = layout.head_rc(b, h0, 0, do_pb, do_ph, do_ch)
    vec_row0 = (b * Hq + h0) * N_CTX
    n_qblk = N_CTX // BM
    i0 = seq_row0 // BM  # first query block: the diagonal
    if DETERMINISTIC and not CAUSAL:
        i0 = i0 * 0  # every key block walks qb = 0, 1, ...: the order its deterministic writer adds in
    sem_grp = sem_ptr + (b * Hq + h0) * n_qblk  # deterministic dQ: one int32 per (head, query block)
    if SPARSE:  # the key tile's walk list (row (b·Hq + h0)·(N / 128) + j), two 64-row blocks per listed tile
        lrow = (b * Hq + h0) * gl.num_programs(0) + j
        n_part = gl.load(q_num + 2 * lrow)
        n_iter = 2 * (n_part + gl.load(q_num + 2 * lrow + 1))
        q_list = q_idx + lrow.to(gl.int64) * TQ
    else:
        if CAUSAL:
            n_iter = n_qblk - i0
        else:
            n_iter = n_qblk
        n_part = n_iter * 0  # partition arguments are IR values
        q_list = q_idx
    qk_scale = sm_scale * 1.4426950408889634

    k_smem = gl.allocate_shared_memory(dt, k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dt, v_desc.block_type.shape, v_desc.layout)
    q_smem = gl.allocate_shared_memory(dt, [NUM_STAGES] + q_desc.block_type.shape, q_desc.layout)
    do_smem = gl.allocate_shared_memory(dt, [NUM_STAGES] + do_desc.block_type.shape, do_desc.layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, BM], dt)
    ds_smem = gl.allocate_shared_memory(dt, [2, BN, BM], ds_layout)
    lse_smem = gl.allocate_shared_memory(gl.float32, [NUM_STAGES] + lse_desc.block_type.shape, lse_desc.layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [NUM_STAGES] + delta_desc.block_type.shape, delta_desc.layout)
    dq_smem = gl.allocate_shared_memory(gl.float32, [2] + dq_desc.block_type.shape, dq_desc.layout)  # dQ staging

    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    dq_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    dq_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for s in gl.static_range(NUM_STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(do_ready.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=2)
        mbarrier.init(do_empty.index(s), count=2)
    for i in gl.static_range(2):
        mbarrier.init(ds_ready.index(i), count=2)
        mbarrier.init(dq_full.index(i), count=2)
        mbarrier.init(dq_empty.index(i), count=1)
    fence_async_shared()

    args = (k_smem, v_smem, q_smem, do_smem, kv_bar, q_ready, do_ready, q_empty, do_empty, ds_smem, ds_ready, lse_smem,
            delta_smem, qk_scale, sm_scale, seq_row0, i0, n_iter, n_qblk, GS, N_CTX, q_row0, q_ph, q_col0, q_ch, do_row0,
            do_ph, do_col0, do_ch, vec_row0, k_row, k_col, v_row, v_col, dq_desc, dq_smem, dq_full, dq_empty, sem_grp,
            Hq, dk_ptr, dk_pb, dk_ph, dk_ch, dk_rs, dv_ptr, dv_pb, dv_ph, dv_ch, dv_rs, q_list, n_part)
    load_args = (q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc) + args
    regs: gl.constexpr = [CONSUMER_REGS, PRODUCER_REGS, PRODUCER_REGS]
    if DETERMINISTIC:  # two dQ writers (_bwd_dq_writer_det), w = 0 and 1: IR values, not Python ints
        w0 = n_iter * 0
        wregs: gl.constexpr = [CONSUMER_REGS, PRODUCER_REGS, PRODUCER_REGS, PRODUCER_REGS]
        if CAUSAL:
            gl.warp_specialize([(_bwd_wg0_causal, args), (_bwd_wg1_causal, args), (_bwd_load_partition, load_args),
                                (_bwd_dq_writer_det_causal, args + (w0,)),
                                (_bwd_dq_writer_det_causal, args + (w0 + 1,))], [4, 1, 1, 1], wregs)
        else:
            gl.warp_specialize([(_bwd_wg0_full, args), (_bwd_wg1_full, args), (_bwd_load_partition, load_args),
                                (_bwd_dq_writer_det_full, args + (w0,)),
                                (_bwd_dq_writer_det_full, args + (w0 + 1,))], [4, 1, 1, 1], wregs)
    elif SPARSE and CAUSAL:
        gl.warp_specialize([(_bwd_wg0_sparse_causal, args), (_bwd_wg1_sparse_causal, args),
                            (_bwd_load_partition_sparse, load_args), (_bwd_dq_writer_sparse, args)], [4, 1, 1], regs)
    elif SPARSE:
        gl.warp_specialize([(_bwd_wg0_sparse, args), (_bwd_wg1_sparse, args), (_bwd_load_partition_sparse, load_args),
                            (_bwd_dq_writer_sparse, args)], [4, 1, 1], regs)
    elif CAUSAL:
        gl.warp_specialize([(_bwd_wg0_causal, args), (_bwd_wg1_causal, args), (_bwd_load_partition, load_args),
                            (_bwd_dq_writer_dense, args)], [4, 1, 1], regs)
    else:
        gl.warp_specialize([(_bwd_wg0_full, args), (_bwd_wg1_full, args), (_bwd_load_partition, load_args),
                            (_bwd_dq_writer_dense, args)], [4, 1, 1], regs)


# ----------------------------------------------------------------------------------------
# Host side.
# ----------------------------------------------------------------------------------------
def vec_layout():
    """lse / delta tiles: 1-D fp32 blocks of BLOCK_M (unswizzled)."""
    return shared_layout((BLOCK_M,), gl.float32)


def dq_layout(D):
    """The dQ accumulator's TMA box (and staging buffer): BLOCK_M rows × D fp32 columns."""
    return shared_layout((BLOCK_M, D), gl.float32)


def head_splits(G, deterministic):
    """How many CTAs share one (batch, KV head)'s key block (``SPLITS``): each walks G / splits of the
    group's G query heads, consecutive, and writes its dK, dV partial sums (fp32); the host sums them.
    One query head per CTA when deterministic, else two (one when G is odd). H200, 2026-12-02 (session
    18 call 1, BENCHMARKS.md; bf16, d = 128, 16k tokens, causal; TFLOP/s at splits 1 / 2 / 4 / 8):
    deterministic 64/8 8k 383 / 409 / 459 / 462, 16k 403 / 414 / 474 / 490, 32/8 8k 415 / 460 / 457,
    16k 420 / 474 / 491; not deterministic 64/8 8k 462 / 485 / 483 / 483, 16k 479 / 509 / 518 / 508,
    32/8 flat (480 / 479 / 478, 514 / 515 / 517). Fewer heads per CTA shorten the longest CTAs (causal:
    key block 0 walks every query block of each of its heads), which the deterministic grid launches
    last (shortest first); the partial sums cost 2·splits·B·Hkv·N·D fp32 of memory and one pass."""
    per_cta = 1 if deterministic else 2 - G % 2  # 2 when G is even (arithmetic: no branch on G)
    return G // per_cta


def backward(q, k, v, out, lse, dout, dlse, prob, route=None):
    """(dq, dk, dv) shaped like (q, k, v): q (B, Hq, N, D), k, v (B, Hkv, N, D), D in HEAD_DIMS, each in
    its input's layout (contiguous, or a (B, N, H, D) transposed view: ``layout.py``), for a call the
    router sends here (``dispatch.gluon_rule``; deterministic or not; Hq = G·Hkv). δ = rowsum(out · dout) −
    dlse comes from the Triton δ kernel (``triton/host.py``: ``delta``). ``route``: the plan (unused)."""
    from ..triton.host import delta as _delta, tile_lists
    from ..triton.partials import sum_partials

    B, Hq, N, D = q.shape
    Hkv = k.shape[1]
    if layout.tma_kind(dout) is None:
        dout = dout.contiguous()  # autograd may hand an expanded (stride-0) gradient
    lse = lse.contiguous()
    delta = _delta(out, dout, lse, dlse)  # (B, Hq, N) contiguous, like lse
    gdt = gl_dtype(q.dtype)
    q_layout, kv_layout = desc_layouts(gdt, D, BLOCK_M, BLOCK_N)
    (qd, qc), (kd, kc), (vd, vc), (dod, doc) = (row_descriptor(t, rows, lay) for t, rows, lay in (
        (q, BLOCK_M, q_layout), (k, BLOCK_N, kv_layout), (v, BLOCK_N, kv_layout), (dout, BLOCK_M, q_layout)))
    # dK, dV laid out as empty_like gives (the input's strides when it is dense, else compact in its
    # stride order: what op.py returns, no copy), each with its own row view (compact bhnd or bnhd); dQ
    # accumulates in a contiguous fp32 buffer (the writer's TMA reduce-adds go through its (B·Hq·N, D)
    # view), converted into q's layout below
    dq_acc = torch.zeros(B, Hq, N, D, dtype=torch.float32, device=q.device)
    sparse = prob.tiles is not None
    # block-sparse: one query head per CTA (each head has its own list); the router sends no deterministic call
    S = Hq // Hkv if sparse else head_splits(Hq // Hkv, prob.deterministic)
    if S == 1:
        dk, dv = torch.empty_like(k), torch.empty_like(v)
    else:  # each CTA's dK, dV partial sums in fp32: (B, Hkv·S, N, D), head hk·S + s; summed below
        dk, dv = (torch.empty(B, Hkv * S, N, D, dtype=torch.float32, device=q.device) for _ in range(2))
    dkc, dvc = (layout.coords(layout.tma_kind(t), t.shape[1], N, D) for t in (dk, dv))
    descs = (qd, kd, vd, dod, TensorDescriptor.from_tensor(lse.view(-1), [BLOCK_M], vec_layout()),
             TensorDescriptor.from_tensor(delta.view(-1), [BLOCK_M], vec_layout()),
             TensorDescriptor.from_tensor(dq_acc.view(B * Hq * N, D), [BLOCK_M, D], dq_layout(D)))
    # deterministic=True: one int32 per (batch, head, query block) counts the dQ adds done (_bwd_dq_writer_det)
    sem = torch.zeros(B * Hq * (N // BLOCK_M) if prob.deterministic else 1, dtype=torch.int32, device=q.device)
    if sparse:  # the per-mask walk lists per key tile (built once per mask: triton/plan.py)
        lists = tile_lists(prob, B, Hq, N, N, ("Q",))
        q_num, q_idx = lists["Q_NUM"], lists["Q_IDX"]
    else:
        q_num = q_idx = sem  # unused
    causal = prob.window == (None, 0)  # dense: prob.causal; block-sparse: the diagonal tiles masked
    _attn_bwd_ws[(N // BLOCK_N, B * Hkv * S)](*descs, sem, dk, dv, q_num, q_idx, float(prob.scale), N, Hq, Hq // Hkv, S,
                                              q_idx.shape[-1] if sparse else 0, *qc, *kc, *vc, *doc, *dkc, *dvc,
                                              dk.stride(2), dv.stride(2), NUM_STAGES=NUM_STAGES, CAUSAL=causal,
                                              SPARSE=sparse, CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS,
                                              DETERMINISTIC=prob.deterministic, num_warps=4, maxnreg=MAXNREG)
    if S > 1:  # the partials summed in a fixed order and rounded once, into the layout empty_like gives
        dk, dv = (sum_partials(p.view(B, Hkv, S, N, D), torch.empty_like(x)) for x, p in ((k, dk), (v, dv)))
    dq = torch.empty_like(q)
    dq.copy_(dq_acc)  # one conversion pass (the kernel added scale · dS K), written in q's layout
    return dq, dk, dv
