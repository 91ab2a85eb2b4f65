"""Triton forward kernel (FlashAttention-2 schedule) and the masking helpers the backward shares.

One program owns BLOCK_M query rows of one (batch or sequence, query head). It walks the key
blocks that its rows may read in up to three stages: a masked stage (window's left edge, or
everything when a dense/block-sparse mask is given), an unmasked interior where every pair is
allowed (no predicate at all), and a masked stage at the causal/window diagonal and the ragged
end. Scores live in the exp2 domain: s₂ = (q·k) · scale · log2(e), so e^(s − m) = 2^(s₂ − m₂).

Running state per row: m_i (max of s₂ so far), l_i (Σ 2^(s₂ − m_i)), acc (Σ 2^(s₂ − m_i) v).
Empty-state guard: while a row has seen no allowed key, m_i = −inf and the rescale reference
is 0 instead, so (−inf) − (−inf) never occurs. Result: out = acc / l_i (0 if l_i = 0) and
lse = (m_i + log2 l_i) · ln 2 (−inf if l_i = 0).

Dropout (DROPOUT): after l_i has taken the tile's undropped p, the pairs whose keep bit is 0
(``dropout_keep``: one Philox call of the seed and position per 8 keys of a row, ``../dropout.py``)
leave acc alone;
out is scaled by 1/(1 − p) at the end. The backward regenerates the same bits.
"""
from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # 1 / ln 2: e^x = 2^(x · LOG2E)
LN2 = 0.6931471805599453
#: dropout's run-time scalars, not specialised on their values (== 1, divisible by 16), so a new seed or p
#: compiles nothing new (only the int width, i32 or i64, still follows the value)
DROPOUT_RUNTIME = ["seed", "drop_t"]


@triton.jit
def seq_bounds(CU_Q, CU_K, b, Nq, Nk, IS_VARLEN: tl.constexpr):
    """(q_start, q_len, k_start, k_len, batch index into the tensors) of sequence/batch ``b``:
    varlen sequences are row ranges of batch 0 (``cu_seqlens``); otherwise batch ``b`` is whole."""
    if IS_VARLEN:
        q_start = tl.load(CU_Q + b)
        q_len = tl.load(CU_Q + b + 1) - q_start
        k_start = tl.load(CU_K + b)
        k_len = tl.load(CU_K + b + 1) - k_start
        bb = b * 0
    else:
        q_start = b * 0
        q_len = Nq + q_start
        k_start = q_start
        k_len = Nk + q_start
        bb = b
    return q_start, q_len, k_start, k_len, bb


@triton.jit
def allowed_pairs(qi, kj, q_len, k_len, diag, left, right, mask_base, smi, smj, q_start,
                  HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_MASK: tl.constexpr):
    """bool, broadcast of qi and kj: (sequence-local) query qi may read key kj. Query i sits at key
    position i + diag (bottom-right alignment, diag = k_len − q_len)."""
    ok = (qi < q_len) & (kj < k_len)
    pos = qi + diag
    if HAS_LEFT:
        ok = ok & (kj >= pos - left)
    if HAS_RIGHT:
        ok = ok & (kj <= pos + right)
    if HAS_MASK:
        mv = tl.load(mask_base + (q_start + qi).to(tl.int64) * smi + kj.to(tl.int64) * smj, mask=ok, other=0)
        ok = ok & (mv != 0)
    return ok


@triton.jit
def allowed_tile(offs_m, offs_n, q_len, k_len, diag, left, right, mask_base, smi, smj, q_start,
                 HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_MASK: tl.constexpr):
    """bool (BM, BN) for query rows offs_m and keys offs_n."""
    return allowed_pairs(offs_m[:, None], offs_n[None, :], q_len, k_len, diag, left, right, mask_base, smi, smj,
                         q_start, HAS_LEFT, HAS_RIGHT, HAS_MASK)


@triton.jit
def add_bias(s, ok, bias_base, rows, cols, sbi, sbj, HAS_BIAS: tl.constexpr):
    """(s, ok) with the additive float bias of the pairs (rows, cols) (sequence-local, broadcast) added
    to the exp2-domain scores s (bias / ln 2: the bias is in natural-log units, as SDPA's attn_mask);
    a −inf entry makes its pair masked (ok False), so that it is handled like a boolean mask's masked
    pair. bias_base points at pair (0, 0) of this (batch, query head, sequence); broadcast dims have
    stride 0. Loaded only where ok (other pairs are masked anyway). Called on masked steps only: a call
    with a bias runs every step with the predicate (the callers' ALL_MASKED)."""
    if HAS_BIAS:
        bv = tl.load(bias_base + rows.to(tl.int64) * sbi + cols.to(tl.int64) * sbj, mask=ok, other=0.0)
        bv = bv.to(tl.float32)
        ok = ok & (bv != float("-inf"))
        s = s + bv * 1.4426950408889634  # · 1/ln 2: natural-log units to the exp2 domain
    return s, ok


@triton.jit
def dropout_keep(seed, drop_t, row_base, rows, start_n, Nk, BLOCK_N: tl.constexpr):
    """bool (BM, BN) keep bits of query rows ``rows`` (BM,) and the keys start_n + [0, BLOCK_N) of one
    (batch, query head, sequence) (``../dropout.py``): row_base = (b · Hq + h) · Nq + q_start (int64), so
    row_base + rows is the pair's row in q; the key columns count from the sequence's start and
    start_n is a multiple of 8 (every key tile starts at a multiple of BLOCK_N). One Philox call per 8
    keys of a row: its four 32-bit words, read as eight 16-bit halves, are spread over those keys by
    interleaving (key 8g + 2k + e takes half e, 0 the low one, of word k of group g); kept iff the
    half ≥ drop_t. Both halves are compared without extracting them: hi ≥ t ⟺ w ≥ t · 2¹⁶ and
    lo ≥ t ⟺ (w · 2¹⁶ mod 2³²) ≥ t · 2¹⁶ (the other half only adds less than 2¹⁶)."""
    tl.static_assert(BLOCK_N % 8 == 0, "dropout draws the bits of 8 keys per Philox call")
    n_groups = (Nk + 7) // 8  # groups of 8 keys per row: the counter's row stride
    g = start_n // 8 + tl.arange(0, BLOCK_N // 8)  # (BN/8,) the tile's groups
    counter = (row_base + rows.to(tl.int64))[:, None] * n_groups + g[None, :]  # (BM, BN/8) int64
    w0, w1, w2, w3 = tl.randint4x(seed, counter)  # uint32 each
    words = tl.interleave(tl.interleave(w0, w2), tl.interleave(w1, w3))  # (BM, BN/2): [4g + k] = w_k of group g
    t_hi = drop_t.to(tl.uint32) << 16
    return tl.interleave((words << 16) >= t_hi, words >= t_hi)  # (BM, BN): [2m + e] = half e of word m


@triton.jit
def key_range(m0, q_len, k_len, left, right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, ALL_MASKED: tl.constexpr):
    """Key stages for query rows m0 .. m0+BLOCK_M−1: masked [a, b), unmasked [b, c), masked [c, hi)."""
    diag = k_len - q_len
    p_lo = m0 + diag
    p_hi = tl.minimum(m0 + BLOCK_M, q_len) - 1 + diag
    zero = m0 * 0
    lo = zero
    hi = k_len + zero
    full_lo = zero
    full_hi = k_len + zero
    if HAS_LEFT:
        lo = tl.maximum(p_lo - left, 0)
        full_lo = tl.maximum(p_hi - left, 0)
    if HAS_RIGHT:
        hi = tl.minimum(p_hi + right + 1, k_len)
        full_hi = tl.minimum(p_lo + right + 1, k_len)
    hi = tl.maximum(hi, 0)
    lo = tl.minimum(lo, hi)
    a = (lo // BLOCK_N) * BLOCK_N
    b = ((full_lo + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
    c = (tl.maximum(full_hi, 0) // BLOCK_N) * BLOCK_N
    if ALL_MASKED:
        b = hi
        c = hi
    if c <= b:  # no interior: one masked stage covers everything
        b = hi
        c = hi
    return a, b, c, hi


@triton.jit
def load_kv(k_base, v_base, skn, skd, svn, svd, start_n, offs_n, offs_d, offs_dv, k_len, D, DV, desc_b, desc_h,
            BLOCK_N: tl.constexpr, USE_DESC: tl.constexpr):
    """The (BN, BD) K and (BN, BDV) V tiles of keys offs_n = start_n + [0, BLOCK_N), zero past k_len
    and past D / DV: k_base, v_base are (B, Hkv, Nk, ·) tensor descriptors loaded by TMA, whose zero
    fill does the masking (USE_DESC), or pointers to this sequence's rows (predicated loads)."""
    if USE_DESC:
        k = k_base.load([desc_b, desc_h, start_n, 0]).reshape([BLOCK_N, offs_d.shape[0]])
        v = v_base.load([desc_b, desc_h, start_n, 0]).reshape([BLOCK_N, offs_dv.shape[0]])
    else:
        in_k = offs_n < k_len
        k = tl.load(k_base + offs_n[:, None].to(tl.int64) * skn + offs_d[None, :] * skd,
                    mask=in_k[:, None] & (offs_d[None, :] < D), other=0.0)
        v = tl.load(v_base + offs_n[:, None].to(tl.int64) * svn + offs_dv[None, :] * svd,
                    mask=in_k[:, None] & (offs_dv[None, :] < DV), other=0.0)
    return k, v


@triton.jit
def _fwd_step(acc, l_i, m_i, q, k_base, v_base, skn, skd, svn, svd, start_n, offs_m, offs_d, offs_dv,
              q_len, k_len, diag, left, right, mask_base, smi, smj, q_start, D, DV, qk_scale, desc_b, desc_h,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
              HAS_MASK: tl.constexpr, DOT_PREC: tl.constexpr,
              NO_ALPHA: tl.constexpr, NO_MAX: tl.constexpr, UNGUARDED: tl.constexpr, USE_DESC: tl.constexpr,
              FMA: tl.constexpr, seed, drop_t, drop_row, Nk, DROPOUT: tl.constexpr,
              bias_base, sbi, sbj, HAS_BIAS: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k, v = load_kv(k_base, v_base, skn, skd, svn, svd, start_n, offs_n, offs_d, offs_dv, k_len, D, DV, desc_b, desc_h,
                   BLOCK_N, USE_DESC)
    if FMA and not MASKED:
        # interior step, qk_scale > 0 (the dispatcher's rule): rowmax(qk) · c = rowmax(qk · c) exactly
        # (rounding is monotone), so the scale folds into one FMA per score, qk · c − m, instead of a
        # multiply and a subtract
        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PREC)  # (BM, BN), unscaled
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # ⊥ guard
        p = tl.math.exp2(qk * qk_scale - m_ref[:, None])
        alpha = tl.math.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
    else:
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale  # (BM, BN), exp2 domain
        if MASKED:
            ok = allowed_tile(offs_m, offs_n, q_len, k_len, diag, left, right, mask_base, smi, smj, q_start,
                              HAS_LEFT, HAS_RIGHT, HAS_MASK)
            s, ok = add_bias(s, ok, bias_base, offs_m[:, None], offs_n[None, :], sbi, sbj, HAS_BIAS)
            s = tl.where(ok, s, float("-inf"))
            live = tl.max(ok.to(tl.int32), axis=0) > 0  # keys some row reads; others are zeroed
            v = tl.where(live[:, None], v, 0.0)
        if NO_MAX:
            m_new = tl.zeros_like(m_i)
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1))
        if UNGUARDED:
            m_ref = m_new
        else:
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # ⊥ guard: no (−inf) − (−inf)
        p = tl.math.exp2(s - m_ref[:, None])
        if NO_ALPHA:
            alpha = tl.full(m_i.shape, 1.0, tl.float32)
        else:
            alpha = tl.math.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
    if DROPOUT:  # ℓ took the undropped p; a dropped pair only leaves the value sum
        p = tl.where(dropout_keep(seed, drop_t, drop_row, offs_m, start_n, Nk, BLOCK_N), p, 0.0)
    acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PREC)
    return acc, l_i, m_new


@triton.jit(do_not_specialize=DROPOUT_RUNTIME)
def attn_fwd(Q, K, V, O, LSE, CU_Q, CU_K, MASK, KV_NUM, KV_IDX,
             sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, son, sod,
             smb, smh, smi, smj, Hq, Hkv, GROUPS, Nq, Nk, TQ, TK, D, DV, qk_scale, left, right, Q_BUCKET,
             seed, drop_t, drop_scale, BIAS, sbb, sbh, sbi, sbj,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
             IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
             HAS_MASK: tl.constexpr, HAS_TILES: tl.constexpr, TILE_Q: tl.constexpr, TILE_K: tl.constexpr,
             DOT_PREC: tl.constexpr, NO_ALPHA: tl.constexpr, NO_MAX: tl.constexpr, UNGUARDED: tl.constexpr,
             TILE_FLOOR: tl.constexpr, GQA_MAP: tl.constexpr, USE_DESC: tl.constexpr, FMA: tl.constexpr,
             DROPOUT: tl.constexpr, HAS_BIAS: tl.constexpr):
    """Grid (cdiv(max Nq, BLOCK_M), B·Hq). q (B, Hq, Nq, D) -> O (B, Hq, Nq, DV), LSE (B, Hq, Nq) fp32.
    USE_DESC (not varlen; the host checked TMA's alignment rules): Q, K, V are 4-D tensor descriptors
    with blocks [1, 1, BLOCK_M|BLOCK_N, BLOCK_D|BLOCK_DV] (set by the autotuner's pre-hook), loaded by
    TMA with zero fill past the ragged end and the head dim; otherwise they are pointers. DROPOUT:
    keep bits from (seed, position), drop below drop_t, kept scaled by drop_scale = 1/(1 − p).
    HAS_BIAS: BIAS (B|1, Hq|1, Nq, Nk) with strides (sbb, sbh, sbi, sbj), 0 on broadcast dims, is added
    to the scaled scores (``add_bias``)."""
    tl.static_assert(BLOCK_N % 16 == 0 and BLOCK_M % 16 == 0, "tl.dot needs tiles of at least 16")
    tl.static_assert(BLOCK_D >= 16 and BLOCK_DV >= 16, "head dims are padded to >= 16")
    if HAS_TILES:
        tl.static_assert(TILE_Q % BLOCK_M == 0 and TILE_K % BLOCK_N == 0, "kernel tiles must nest in mask tiles")
    pid_m = tl.program_id(0)
    if HAS_RIGHT:  # causal / right window: the last query blocks read the most keys; start them first
        pid_m = tl.num_programs(0) - 1 - pid_m
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
    mask_base = MASK + bb * smb + h.to(tl.int64) * smh + k_start.to(tl.int64) * smj
    desc_b = bb.to(tl.int32)  # descriptor coordinates are int32
    if USE_DESC:
        k_base = K
        v_base = V
        q = Q.load([desc_b, h, m0, 0]).reshape([BLOCK_M, BLOCK_D])
    else:
        q_base = Q + bb * sqb + h.to(tl.int64) * sqh + q_start.to(tl.int64) * sqn
        k_base = K + bb * skb + hk.to(tl.int64) * skh + k_start.to(tl.int64) * skn
        v_base = V + bb * svb + hk.to(tl.int64) * svh + k_start.to(tl.int64) * svn
        q = tl.load(q_base + offs_m[:, None].to(tl.int64) * sqn + offs_d[None, :] * sqd,
                    mask=(offs_m[:, None] < q_len) & (offs_d[None, :] < D), other=0.0)  # (BM, BD)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    diag = k_len - q_len
    drop_row = (bb * Hq + h) * Nq + q_start  # int64: the dropout row of this sequence's query 0
    bias_base = BIAS + bb * sbb + h.to(tl.int64) * sbh + q_start.to(tl.int64) * sbi + k_start.to(tl.int64) * sbj
    ALL_MASKED: tl.constexpr = HAS_BIAS or HAS_MASK or NO_ALPHA or NO_MAX or UNGUARDED or TILE_FLOOR
    a, c1, c2, hi = key_range(m0, q_len, k_len, left, right, BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT, ALL_MASKED)
    if TILE_FLOOR:
        hi = tl.minimum(hi, (k_len // BLOCK_N) * BLOCK_N)
        c1 = tl.minimum(c1, hi)
        c2 = tl.minimum(c2, hi)
    if HAS_TILES:
        # Block-sparse: the host lists, per query tile, the present key tiles that need the predicate
        # (partial: a window edge, the ragged end, a dense mask), then those that do not (full). Each
        # part is walked as ONE flat loop over kernel-sized sub-blocks with no data-dependent branch,
        # so the loads are software-pipelined like the dense loop's (a nested loop with an `if` is not).
        SUBS: tl.constexpr = TILE_K // BLOCK_N
        t_off = (bb * Hq + h) * TQ + m0 // TILE_Q
        idx = KV_IDX + t_off * TK
        for g in tl.static_range(2):  # g = 0: partial tiles (predicate on); g = 1: full tiles
            n_g = tl.load(KV_NUM + 2 * t_off + g)
            for it in range(0, n_g * SUBS):
                start_n = tl.load(idx + it // SUBS) * TILE_K + (it % SUBS) * BLOCK_N
                acc, l_i, m_i = _fwd_step(acc, l_i, m_i, q, k_base, v_base, skn, skd, svn, svd, start_n,
                                          offs_m, offs_d, offs_dv, q_len, k_len, diag, left, right, mask_base,
                                          smi, smj, q_start, D, DV, qk_scale, desc_b, hk, BLOCK_N, g == 0 or ALL_MASKED,
                                          HAS_LEFT, HAS_RIGHT, HAS_MASK, DOT_PREC, NO_ALPHA, NO_MAX, UNGUARDED, USE_DESC,
                                          FMA, seed, drop_t, drop_row, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS)
            idx += n_g
    else:
        for start_n in range(a, c1, BLOCK_N):
            acc, l_i, m_i = _fwd_step(acc, l_i, m_i, q, k_base, v_base, skn, skd, svn, svd, start_n, offs_m,
                                      offs_d, offs_dv, q_len, k_len, diag, left, right, mask_base, smi, smj,
                                      q_start, D, DV, qk_scale, desc_b, hk, BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_MASK,
                                      DOT_PREC, NO_ALPHA, NO_MAX, UNGUARDED, USE_DESC, FMA,
                                      seed, drop_t, drop_row, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS)
        for start_n in range(c1, c2, BLOCK_N):
            acc, l_i, m_i = _fwd_step(acc, l_i, m_i, q, k_base, v_base, skn, skd, svn, svd, start_n, offs_m,
                                      offs_d, offs_dv, q_len, k_len, diag, left, right, mask_base, smi, smj,
                                      q_start, D, DV, qk_scale, desc_b, hk, BLOCK_N, False, HAS_LEFT, HAS_RIGHT, HAS_MASK,
                                      DOT_PREC, NO_ALPHA, NO_MAX, UNGUARDED, USE_DESC, FMA,
                                      seed, drop_t, drop_row, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS)
        for start_n in range(c2, hi, BLOCK_N):
            acc, l_i, m_i = _fwd_step(acc, l_i, m_i, q, k_base, v_base, skn, skd, svn, svd, start_n, offs_m,
                                      offs_d, offs_dv, q_len, k_len, diag, left, right, mask_base, smi, smj,
                                      q_start, D, DV, qk_scale, desc_b, hk, BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_MASK,
                                      DOT_PREC, NO_ALPHA, NO_MAX, UNGUARDED, USE_DESC, FMA,
                                      seed, drop_t, drop_row, Nk, DROPOUT, bias_base, sbi, sbj, HAS_BIAS)
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    out = acc / l_safe[:, None]
    if DROPOUT:
        out = out * drop_scale
    lse = tl.where(empty, float("-inf"), (m_i + tl.math.log2(l_safe)) * 0.6931471805599453)  # · ln 2
    rows = offs_m < q_len
    o_base = O + bb * sob + h.to(tl.int64) * soh + q_start.to(tl.int64) * son
    tl.store(o_base + offs_m[:, None].to(tl.int64) * son + offs_dv[None, :] * sod, out.to(O.dtype.element_ty),
             mask=rows[:, None] & (offs_dv[None, :] < DV))
    lse_base = LSE + (bb * Hq + h) * Nq + q_start
    tl.store(lse_base + offs_m, lse, mask=rows)
