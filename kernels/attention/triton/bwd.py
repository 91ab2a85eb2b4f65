"""Triton backward kernels (FlashAttention-2 schedule). Launched by the host (``host.backward``):

* ``attn_bwd_delta``: δ_i = rowsum(dO ∘ O)_i − dlse_i (dlse only on rows with finite lse). 
* ``attn_bwd_dkdv``: one program per (key block, kv head); it walks every query head of its GQA
  group and the query blocks that may read its keys, recomputing P = 2^(s₂ − lse₂) from the saved
  lse, and accumulates dV += Pᵀ dO, dK += dSᵀ Q with dS = P ∘ (dP − δ), dP = dO Vᵀ (4 products);
* ``attn_bwd_dq``: one program per (query block, query head), walking key blocks like the
  forward: S and dP again, dQ += dS K (3 products).

Every program writes only its own tiles, in a fixed order: no atomics, bitwise identical run to
run, 7 N²d products. (The dispatcher sends deterministic=False calls that the Gluon backward takes
there; every other Triton backward is this one.)

Dropout (DROPOUT): the forward's keep bits are regenerated (``fwd.dropout_keep``, same seed and
positions; nothing was saved) and replayed: dV += (r ∘ P)ᵀ dO and dP = r ∘ (dO Vᵀ) with
r = keep / (1 − p); δ = rowsum(dO ∘ O) is unchanged (O is the dropped-out output).

Additive bias (HAS_BIAS): the recomputed scores add the forward's bias tile (``fwd.add_bias``; its −inf
entries are masked pairs), and every step runs the predicate. WRITE_DS (the bias requires grad): the
dK/dV kernel, which visits every allowed pair once, also stores dS = P ∘ (dP − δ) (the gradient of the
scaled scores, hence of the bias) into a zeroed (B, Hq, Nq, Nk) fp32 buffer; the op sums it over the
bias's broadcast dims.

Masked pairs have P = dS = 0 by ``where`` (not by 0 · x), and rows/keys that no allowed pair
reads are zeroed before a product, so planted NaN/inf cannot leak.

Block-sparse masks (HAS_TILES): each program walks the present tiles of its row/column of the
tile grid in two flat loops over (tile, sub-block) pairs — the partial tiles (predicate on) and
then the full ones (no predicate; see ``plan.py``) — with no data-dependent
branch inside, so Triton can software-pipeline them (num_stages). Tiles that the window excludes
entirely are not listed. A sub-block of a partial tile may still lie outside the window: its
pairs are all masked, so it adds exact zeros (wasted work, never a wrong value).
"""
from __future__ import annotations

import triton
import triton.language as tl

from .fwd import (DROPOUT_RUNTIME, add_bias, allowed_pairs, allowed_tile, dropout_keep, key_range, load_kv,
                  seq_bounds)


@triton.jit
def attn_bwd_delta(O, DO, LSE, DLSE, DELTA, sob, soh, son, sod, sdb, sdh, sdn, sdd, Hq, N, DV,
                   BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr, HAS_DLSE: tl.constexpr):
    """Grid (cdiv(N, BLOCK_M), B·Hq). O, DO (B, Hq, N, DV) -> DELTA (B, Hq, N) fp32."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // Hq).to(tl.int64)
    h = (pid_bh % Hq).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV).to(tl.int64)
    io = (offs_m[:, None] < N) & (offs_dv[None, :] < DV)
    o = tl.load(O + b * sob + h * soh + offs_m[:, None].to(tl.int64) * son + offs_dv[None, :] * sod, mask=io, other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + offs_m[:, None].to(tl.int64) * sdn + offs_dv[None, :] * sdd, mask=io, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    row = (b * Hq + h) * N + offs_m
    if HAS_DLSE:
        lse = tl.load(LSE + row, mask=offs_m < N, other=0.0)
        dlse = tl.load(DLSE + row, mask=offs_m < N, other=0.0)
        delta = delta - tl.where(lse == float("-inf"), 0.0, dlse)
    tl.store(DELTA + row, delta, mask=offs_m < N)


@triton.jit
def query_range(n0, q_len, k_len, left, right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, ALL_MASKED: tl.constexpr):
    """Query stages for keys n0 .. n0+BLOCK_N−1: masked [a, b), unmasked [b, c), masked [c, hi).
    Key j is read by query i iff j − right ≤ i + diag ≤ j + left."""
    diag = k_len - q_len
    n_hi = tl.minimum(n0 + BLOCK_N, k_len) - 1
    zero = n0 * 0
    lo = zero
    hi = q_len + zero
    full_lo = zero
    full_hi = q_len + zero
    if HAS_RIGHT:
        lo = tl.maximum(n0 - right - diag, 0)
        full_lo = tl.maximum(n_hi - right - diag, 0)
    if HAS_LEFT:
        hi = tl.minimum(n_hi + left - diag + 1, q_len)
        full_hi = tl.minimum(n0 + left - diag + 1, q_len)
    hi = tl.maximum(hi, 0)
    lo = tl.minimum(lo, hi)
    a = (lo // BLOCK_M) * BLOCK_M
    b = ((full_lo + BLOCK_M - 1) // BLOCK_M) * BLOCK_M
    c = (tl.maximum(full_hi, 0) // BLOCK_M) * BLOCK_M
    if ALL_MASKED:
        b = hi
        c = hi
    if c <= b:
        b = hi
        c = hi
    return a, b, c, hi


@triton.jit
def _dkdv_step(dk, dv, k, v, q_base, do_base, lse_base, delta_base, sqn, sqd, sdn, sdd,
               start_m, offs_n, offs_d, offs_dv, q_len, k_len, diag, left, right, mask_base, smi, smj, q_start, D, DV,
               qk_scale, desc_b, desc_h, BLOCK_M: tl.constexpr, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr,
               HAS_RIGHT: tl.constexpr, HAS_MASK: tl.constexpr, DOT_PREC: tl.constexpr, USE_DESC: tl.constexpr,
               seed, drop_t, drop_scale, drop_row, n0, Nk, DROPOUT: tl.constexpr, bias_base, sbi, sbj,
               HAS_BIAS: tl.constexpr, ds_base, WRITE_DS: tl.constexpr):
    """Key-major (transposed) form, as in Triton's fused-attention tutorial: for fp16/bf16 every
    dot's first operand is computed or loaded here, never a transposed register tile. For fp32
    (``ieee``) S is computed as the forward computes it, Q Kᵀ, and then transposed: P = 2^(S − lse)
    is exact at a one-hot row only if S is bitwise the forward's S, and K Qᵀ sums in another order
    (at |s| ~ 1e3 a few ulps of S made dV 3–6× the naive-fp32 bound; tests/kernels/test_kernel_correctness.py::test_fp32_huge_logits).
    In fp16/bf16 P is rounded to 8–11 bits before its products, which hides that difference."""
    SAME_ORDER: tl.constexpr = DOT_PREC == "ieee"
    offs_m = start_m + tl.arange(0, BLOCK_M)
    rows = offs_m < q_len
    if USE_DESC:  # q_base, do_base: (B, Hq, Nq, D|DV) tensor descriptors; TMA zero-fills rows >= Nq, cols >= D
        q = q_base.load([desc_b, desc_h, start_m, 0]).reshape([BLOCK_M, offs_d.shape[0]])  # (BM, BD)
        do = do_base.load([desc_b, desc_h, start_m, 0]).reshape([BLOCK_M, offs_dv.shape[0]])  # (BM, BDV)
        qT = tl.trans(q)
        if SAME_ORDER:
            sT = tl.trans(tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale)  # (BN, BM)
        else:
            sT = tl.dot(k, qT, input_precision=DOT_PREC) * qk_scale  # (BN, BM)
    else:
        if SAME_ORDER:  # fp32: S = Q Kᵀ exactly as the forward computes it, then transposed
            q = tl.load(q_base + offs_m[:, None].to(tl.int64) * sqn + offs_d[None, :] * sqd,
                        mask=rows[:, None] & (offs_d[None, :] < D), other=0.0)  # (BM, BD)
            sT = tl.trans(tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale)  # (BN, BM)
            qT = tl.trans(q)
        else:
            qT = tl.load(q_base + offs_m[None, :].to(tl.int64) * sqn + offs_d[:, None] * sqd,
                         mask=rows[None, :] & (offs_d[:, None] < D), other=0.0)  # (BD, BM)
            sT = tl.dot(k, qT, input_precision=DOT_PREC) * qk_scale  # (BN, BM)
        do = tl.load(do_base + offs_m[:, None].to(tl.int64) * sdn + offs_dv[None, :] * sdd,
                     mask=rows[:, None] & (offs_dv[None, :] < DV), other=0.0)  # (BM, BDV)
    lse = tl.load(lse_base + offs_m, mask=rows, other=0.0)
    delta = tl.load(delta_base + offs_m, mask=rows, other=0.0)
    lse2 = tl.where(lse == float("-inf"), 0.0, lse * 1.4426950408889634)  # natural -> exp2 domain
    if MASKED:
        okT = allowed_pairs(offs_m[None, :], offs_n[:, None], q_len, k_len, diag, left, right, mask_base, smi, smj,
                            q_start, HAS_LEFT, HAS_RIGHT, HAS_MASK)  # (BN, BM)
        sT, okT = add_bias(sT, okT, bias_base, offs_m[None, :], offs_n[:, None], sbi, sbj, HAS_BIAS)
    pT = tl.math.exp2(sT - lse2[None, :])
    if MASKED:
        pT = tl.where(okT, pT, 0.0)
        live = tl.max(okT.to(tl.int32), axis=0) > 0  # query rows some key of this block reads
        qT = tl.where(live[None, :], qT, 0.0)
        do = tl.where(live[:, None], do, 0.0)
    if DROPOUT:  # the forward's bits, replayed
        keepT = tl.trans(dropout_keep(seed, drop_t, drop_row, offs_m, n0, Nk, offs_n.shape[0]))  # (BN, BM)
        dv = tl.dot(tl.where(keepT, pT * drop_scale, 0.0).to(do.dtype), do, dv, input_precision=DOT_PREC)
    else:
        dv = tl.dot(pT.to(do.dtype), do, dv, input_precision=DOT_PREC)
    dpT = tl.dot(v, tl.trans(do), input_precision=DOT_PREC)  # (BN, BM)
    if DROPOUT:
        dpT = tl.where(keepT, dpT * drop_scale, 0.0)
    dsT = pT * (dpT - delta[None, :])
    if MASKED:
        dsT = tl.where(okT, dsT, 0.0)
    if WRITE_DS:  # the bias's gradient: dS of pair (i, j) at ds_base + i · Nk + j (0 on masked pairs)
        tl.store(ds_base + offs_m[None, :].to(tl.int64) * Nk + offs_n[:, None].to(tl.int64), dsT,
                 mask=(offs_m[None, :] < q_len) & (offs_n[:, None] < k_len))
    dk = tl.dot(dsT.to(qT.dtype), tl.trans(qT), dk, input_precision=DOT_PREC)
    return dk, dv


@triton.jit(do_not_specialize=DROPOUT_RUNTIME)
def attn_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, CU_Q, CU_K, MASK, Q_NUM, Q_IDX,
                  sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sdb, sdh, sdn, sdd,
                  sdkb, sdkh, sdkn, sdkd, sdvb, sdvh, sdvn, sdvd, smb, smh, smi, smj,
                  Hq, Hkv, GROUPS, Nq, Nk, TQ, TK, D, DV_DIM, qk_scale, sm_scale, left, right, K_BUCKET,
                  seed, drop_t, drop_scale, BIAS, sbb, sbh, sbi, sbj, DS, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, IS_VARLEN: tl.constexpr,
                  HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                  HAS_MASK: tl.constexpr, HAS_TILES: tl.constexpr, TILE_Q: tl.constexpr, TILE_K: tl.constexpr,
                  DOT_PREC: tl.constexpr, GQA_MAP: tl.constexpr, USE_DESC: tl.constexpr, DROPOUT: tl.constexpr,
                  HAS_BIAS: tl.constexpr, WRITE_DS: tl.constexpr):
    """Grid (cdiv(max Nk, BLOCK_N), B·Hkv) -> DK (B, Hkv, Nk, D), DV (B, Hkv, Nk, DV) in the input
    dtype. USE_DESC: Q and DO are 4-D tensor descriptors (blocks [1, 1, BLOCK_M, BLOCK_D|BLOCK_DV])
    streamed by TMA; the host checked TMA's layout rules (not varlen). HAS_BIAS: as the forward's (every step
    runs the predicate, PRED). WRITE_DS: also store dS (fp32) into DS, a contiguous (B, Hq, Nq, Nk) buffer
    that the host zeroed (pairs no program visits stay 0), from which the host sums the bias's gradient."""
    tl.static_assert(BLOCK_N % 16 == 0 and BLOCK_M % 16 == 0, "tl.dot needs tiles of at least 16")
    if HAS_TILES:
        tl.static_assert(TILE_Q % BLOCK_M == 0 and TILE_K % BLOCK_N == 0, "kernel tiles must nest in mask tiles")
    PRED: tl.constexpr = HAS_MASK or HAS_BIAS  # every step needs the per-pair predicate
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // Hkv
    hk = pid_bh % Hkv
    q_start, q_len, k_start, k_len, bb = seq_bounds(CU_Q, CU_K, b, Nq, Nk, IS_VARLEN)
    n0 = pid_n * BLOCK_N
    if n0 >= k_len:
        return
    bb = bb.to(tl.int64)
    desc_b = bb.to(tl.int32)  # descriptor coordinates are int32
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D).to(tl.int64)  # head-dim offsets x last-dim stride: int64 (KER-BOUNDS)
    offs_dv = tl.arange(0, BLOCK_DV).to(tl.int64)
    in_k = offs_n < k_len
    k_row = k_start.to(tl.int64) + offs_n.to(tl.int64)
    k_off = k_row[:, None]
    k_ptr = K + bb * skb + hk.to(tl.int64) * skh
    k = tl.load(k_ptr + k_off * skn + offs_d[None, :] * skd,
                mask=in_k[:, None] & (offs_d[None, :] < D), other=0.0)  # (BN, BD)
    v = tl.load(V + bb * svb + hk.to(tl.int64) * svh + k_off * svn + offs_dv[None, :] * svd,
                mask=in_k[:, None] & (offs_dv[None, :] < DV_DIM), other=0.0)  # (BN, BDV)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
    diag = k_len - q_len
    a, c1, c2, hi = query_range(n0, q_len, k_len, left, right, BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT, PRED)
    for g in range(0, GROUPS):
        if GQA_MAP:
            h = (hk + g * Hkv).to(tl.int64)
        else:
            h = (hk * GROUPS + g).to(tl.int64)
        if USE_DESC:
            q_base = Q
            do_base = DO
        else:
            q_base = Q + bb * sqb + h * sqh + q_start.to(tl.int64) * sqn
            do_base = DO + bb * sdb + h * sdh + q_start.to(tl.int64) * sdn
        desc_h = h.to(tl.int32)
        row_base = (bb * Hq + h) * Nq + q_start
        drop_row = row_base  # the dropout row of this query head's query 0
        mask_base = MASK + bb * smb + h * smh + k_start.to(tl.int64) * smj
        bias_base = BIAS + bb * sbb + h * sbh + q_start.to(tl.int64) * sbi + k_start.to(tl.int64) * sbj
        ds_base = DS + row_base * Nk + k_start  # pair (0, 0) of this query head and sequence
        if HAS_TILES:
            SUBS: tl.constexpr = TILE_Q // BLOCK_M
            t_off = (bb * Hq + h) * TK + n0 // TILE_K
            idx = Q_IDX + t_off * TQ
            for grp in tl.static_range(2):  # grp = 0: partial tiles (predicate on); grp = 1: full tiles
                n_g = tl.load(Q_NUM + 2 * t_off + grp)
                for it in range(0, n_g * SUBS):  # one flat loop, no branch (pipelinable)
                    start_m = tl.load(idx + it // SUBS) * TILE_Q + (it % SUBS) * BLOCK_M
                    dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, LSE + row_base, DELTA + row_base,
                                        sqn, sqd, sdn, sdd, start_m, offs_n, offs_d, offs_dv, q_len, k_len,
                                        diag, left, right, mask_base, smi, smj, q_start, D, DV_DIM, qk_scale,
                                        desc_b, desc_h, BLOCK_M, grp == 0 or PRED, HAS_LEFT, HAS_RIGHT, HAS_MASK,
                                        DOT_PREC, USE_DESC, seed, drop_t, drop_scale, drop_row, n0, Nk, DROPOUT,
                                        bias_base, sbi, sbj, HAS_BIAS, ds_base, WRITE_DS)
                idx += n_g
        else:
            for start_m in range(a, c1, BLOCK_M):
                dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, LSE + row_base, DELTA + row_base,
                                    sqn, sqd, sdn, sdd, start_m, offs_n, offs_d, offs_dv, q_len, k_len,
                                    diag, left, right, mask_base, smi, smj, q_start, D, DV_DIM, qk_scale,
                                    desc_b, desc_h, BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_MASK, DOT_PREC, USE_DESC,
                                    seed, drop_t, drop_scale, drop_row, n0, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS,
                                    ds_base, WRITE_DS)
            for start_m in range(c1, c2, BLOCK_M):
                dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, LSE + row_base, DELTA + row_base,
                                    sqn, sqd, sdn, sdd, start_m, offs_n, offs_d, offs_dv, q_len, k_len,
                                    diag, left, right, mask_base, smi, smj, q_start, D, DV_DIM, qk_scale,
                                    desc_b, desc_h, BLOCK_M, False, HAS_LEFT, HAS_RIGHT, HAS_MASK, DOT_PREC, USE_DESC,
                                    seed, drop_t, drop_scale, drop_row, n0, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS,
                                    ds_base, WRITE_DS)
            for start_m in range(c2, hi, BLOCK_M):
                dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, LSE + row_base, DELTA + row_base,
                                    sqn, sqd, sdn, sdd, start_m, offs_n, offs_d, offs_dv, q_len, k_len,
                                    diag, left, right, mask_base, smi, smj, q_start, D, DV_DIM, qk_scale,
                                    desc_b, desc_h, BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_MASK, DOT_PREC, USE_DESC,
                                    seed, drop_t, drop_scale, drop_row, n0, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS,
                                    ds_base, WRITE_DS)
    dk = dk * sm_scale
    tl.store(DK + bb * sdkb + hk.to(tl.int64) * sdkh + k_off * sdkn + offs_d[None, :] * sdkd,
             dk.to(DK.dtype.element_ty), mask=in_k[:, None] & (offs_d[None, :] < D))
    tl.store(DV + bb * sdvb + hk.to(tl.int64) * sdvh + k_off * sdvn + offs_dv[None, :] * sdvd,
             dv.to(DV.dtype.element_ty), mask=in_k[:, None] & (offs_dv[None, :] < DV_DIM))


@triton.jit
def _dq_step(dq, q, do, lse2, delta, k_base, v_base, skn, skd, svn, svd, start_n, offs_m, offs_d, offs_dv,
             q_len, k_len, diag, left, right, mask_base, smi, smj, q_start, D, DV, qk_scale, desc_b, desc_h,
             BLOCK_N: tl.constexpr, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
             HAS_MASK: tl.constexpr, DOT_PREC: tl.constexpr, USE_DESC: tl.constexpr,
             seed, drop_t, drop_scale, drop_row, Nk, DROPOUT: tl.constexpr, bias_base, sbi, sbj,
             HAS_BIAS: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k, v = load_kv(k_base, v_base, skn, skd, svn, svd, start_n, offs_n, offs_d, offs_dv, k_len, D, DV, desc_b, desc_h,
                   BLOCK_N, USE_DESC)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale
    if MASKED:
        ok = allowed_tile(offs_m, offs_n, q_len, k_len, diag, left, right, mask_base, smi, smj, q_start,
                          HAS_LEFT, HAS_RIGHT, HAS_MASK)
        s, ok = add_bias(s, ok, bias_base, offs_m[:, None], offs_n[None, :], sbi, sbj, HAS_BIAS)
    p = tl.math.exp2(s - lse2[:, None])
    if MASKED:
        p = tl.where(ok, p, 0.0)
        live = tl.max(ok.to(tl.int32), axis=0) > 0
        k = tl.where(live[:, None], k, 0.0)
    dp = tl.dot(do, tl.trans(v), input_precision=DOT_PREC)
    if DROPOUT:  # the forward's bits, replayed: dP = r ∘ (dO Vᵀ)
        dp = tl.where(dropout_keep(seed, drop_t, drop_row, offs_m, start_n, Nk, BLOCK_N), dp * drop_scale, 0.0)
    ds = p * (dp - delta[:, None])
    if MASKED:
        ds = tl.where(ok, ds, 0.0)
    dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PREC)
    return dq


@triton.jit(do_not_specialize=DROPOUT_RUNTIME)
def attn_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, CU_Q, CU_K, MASK, KV_NUM, KV_IDX,
                sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sdb, sdh, sdn, sdd,
                sdqb, sdqh, sdqn, sdqd, smb, smh, smi, smj,
                Hq, Hkv, GROUPS, Nq, Nk, TQ, TK, D, DV, qk_scale, sm_scale, left, right, Q_BUCKET,
                seed, drop_t, drop_scale, BIAS, sbb, sbh, sbi, sbj, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr,
                HAS_RIGHT: tl.constexpr,
                HAS_MASK: tl.constexpr, HAS_TILES: tl.constexpr, TILE_Q: tl.constexpr, TILE_K: tl.constexpr,
                DOT_PREC: tl.constexpr, GQA_MAP: tl.constexpr, USE_DESC: tl.constexpr, DROPOUT: tl.constexpr,
                HAS_BIAS: tl.constexpr):
    """Grid (cdiv(max Nq, BLOCK_M), B·Hq) -> DQ (B, Hq, Nq, D) in the input dtype.
    USE_DESC: K and V are 4-D tensor descriptors (blocks [1, 1, BLOCK_N, BLOCK_D|BLOCK_DV]) streamed
    by TMA; the host checked TMA's layout rules (not varlen). HAS_BIAS: as the forward's (PRED)."""
    tl.static_assert(BLOCK_N % 16 == 0 and BLOCK_M % 16 == 0, "tl.dot needs tiles of at least 16")
    if HAS_TILES:
        tl.static_assert(TILE_Q % BLOCK_M == 0 and TILE_K % BLOCK_N == 0, "kernel tiles must nest in mask tiles")
    PRED: tl.constexpr = HAS_MASK or HAS_BIAS  # every step needs the per-pair predicate
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // Hq
    h = pid_bh % Hq
    if GQA_MAP:
        hk = h % Hkv
    else:
        hk = h // GROUPS
    q_start, q_len, k_start, k_len, bb = seq_bounds(CU_Q, CU_K, b, Nq, Nk, IS_VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= q_len:
        return
    bb = bb.to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D).to(tl.int64)  # head-dim offsets x last-dim stride: int64 (KER-BOUNDS)
    offs_dv = tl.arange(0, BLOCK_DV).to(tl.int64)
    rows = offs_m < q_len
    q_off = q_start.to(tl.int64) + offs_m[:, None].to(tl.int64)
    q = tl.load(Q + bb * sqb + h.to(tl.int64) * sqh + q_off * sqn + offs_d[None, :] * sqd,
                mask=rows[:, None] & (offs_d[None, :] < D), other=0.0)
    do = tl.load(DO + bb * sdb + h.to(tl.int64) * sdh + q_off * sdn + offs_dv[None, :] * sdd,
                 mask=rows[:, None] & (offs_dv[None, :] < DV), other=0.0)
    row_base = (bb * Hq + h) * Nq + q_start
    drop_row = row_base  # the dropout row of this query head's query 0
    lse = tl.load(LSE + row_base + offs_m, mask=rows, other=0.0)
    delta = tl.load(DELTA + row_base + offs_m, mask=rows, other=0.0)
    lse2 = tl.where(lse == float("-inf"), 0.0, lse * 1.4426950408889634)
    if USE_DESC:
        k_base = K
        v_base = V
    else:
        k_base = K + bb * skb + hk.to(tl.int64) * skh + k_start.to(tl.int64) * skn
        v_base = V + bb * svb + hk.to(tl.int64) * svh + k_start.to(tl.int64) * svn
    desc_b = bb.to(tl.int32)  # descriptor coordinates are int32
    desc_h = hk.to(tl.int32)
    mask_base = MASK + bb * smb + h.to(tl.int64) * smh + k_start.to(tl.int64) * smj
    bias_base = BIAS + bb * sbb + h.to(tl.int64) * sbh + q_start.to(tl.int64) * sbi + k_start.to(tl.int64) * sbj
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    diag = k_len - q_len
    a, c1, c2, hi = key_range(m0, q_len, k_len, left, right, BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT, PRED)
    if HAS_TILES:
        t_off = (bb * Hq + h) * TQ + m0 // TILE_Q
        idx = KV_IDX + t_off * TK
        SUBS: tl.constexpr = TILE_K // BLOCK_N
        for grp in tl.static_range(2):  # grp = 0: partial tiles (predicate on); grp = 1: full tiles
            n_g = tl.load(KV_NUM + 2 * t_off + grp)
            for it in range(0, n_g * SUBS):  # one flat loop, no branch (pipelinable)
                start_n = tl.load(idx + it // SUBS) * TILE_K + (it % SUBS) * BLOCK_N
                dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, skn, skd, svn, svd, start_n, offs_m, offs_d,
                              offs_dv, q_len, k_len, diag, left, right, mask_base, smi, smj, q_start, D, DV,
                              qk_scale, desc_b, desc_h, BLOCK_N, grp == 0 or PRED, HAS_LEFT, HAS_RIGHT, HAS_MASK,
                              DOT_PREC, USE_DESC, seed, drop_t, drop_scale, drop_row, Nk, DROPOUT,
                              bias_base, sbi, sbj, HAS_BIAS)
            idx += n_g
    else:
        for start_n in range(a, c1, BLOCK_N):
            dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, skn, skd, svn, svd, start_n, offs_m, offs_d, offs_dv,
                          q_len, k_len, diag, left, right, mask_base, smi, smj, q_start, D, DV, qk_scale, desc_b, desc_h, BLOCK_N,
                          True, HAS_LEFT, HAS_RIGHT, HAS_MASK, DOT_PREC, USE_DESC,
                          seed, drop_t, drop_scale, drop_row, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS)
        for start_n in range(c1, c2, BLOCK_N):
            dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, skn, skd, svn, svd, start_n, offs_m, offs_d, offs_dv,
                          q_len, k_len, diag, left, right, mask_base, smi, smj, q_start, D, DV, qk_scale, desc_b, desc_h, BLOCK_N,
                          False, HAS_LEFT, HAS_RIGHT, HAS_MASK, DOT_PREC, USE_DESC,
                          seed, drop_t, drop_scale, drop_row, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS)
        for start_n in range(c2, hi, BLOCK_N):
            dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, skn, skd, svn, svd, start_n, offs_m, offs_d, offs_dv,
                          q_len, k_len, diag, left, right, mask_base, smi, smj, q_start, D, DV, qk_scale, desc_b, desc_h, BLOCK_N,
                          True, HAS_LEFT, HAS_RIGHT, HAS_MASK, DOT_PREC, USE_DESC,
                          seed, drop_t, drop_scale, drop_row, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS)
    dq = dq * sm_scale
    tl.store(DQ + bb * sdqb + h.to(tl.int64) * sdqh + q_off * sdqn + offs_d[None, :] * sdqd,
             dq.to(DQ.dtype.element_ty), mask=rows[:, None] & (offs_d[None, :] < D))
