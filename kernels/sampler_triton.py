"""Triton backend of the speculative sampler: a whole batch verified in two launches, one host sync.

Same rule and fixed-point draw as ``kernels/sampler.py`` (bit-identical tokens):
    accept x at i  iff  u_i·p_draft(x) < p_target(x)                 (float64)
    w_y = max(0, p_y − q_y), W_y = ⌊w_y·2^40⌋; empty residual (Σ W = 0) → W_y = ⌊p_y·2^40⌋
    token = #{y : C_y ≤ ⌊U·T/2^31⌋}, C the inclusive integer cumsum of W, T = C_{V−1}, U = ⌊u·2^31⌋.

Launch 1 ``_partials_kernel``, grid (B, S), S = ⌈V / CHUNK⌉: each program recomputes its request's
accept chain (2 scalars per draft position), then reads ITS chunk of the rows it needs exactly once:
  check="read": the drawn row pair only (p_target[b, n] and p_draft[b, n] at the first rejection n,
                or p_bonus[b] when all drafts were accepted);
  check="full": every row that could be read (p_target/p_draft rows i < k_b and p_bonus), the draw's
                integer sums taken from the same loads when the row is the drawn one.
It writes per-chunk integer totals Σ W (residual and fallback) and per-row-chunk float sums and
bad-entry counts (NaN or negative): (B, 2, S) and (B, 2K+1, S), nothing (B, V)-sized.
Launch 2 ``_finish_kernel``, grid (B,): chunk totals -> T and the threshold; the chunk j holding the
crossing is the first whose running total exceeds the threshold (totals are non-decreasing), so only
chunk j is read again (CHUNK entries of the pair) for the in-chunk scan: token = j·CHUNK + count.
It also reduces the row checks and the small checks (k_b range, uniforms in [0, 1), draft ids, gathered
entries) to one int32 of flag bits per request, and writes tokens (B, K+1) and num_accepted (B,).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover — the torch path works without Triton
    triton = None

__all__ = ["available", "TritonConfig", "DEFAULT_CONFIG", "TritonResult", "sample", "FLAG_NAMES"]

# flag bits written per request by the finish kernel (decoded by kernels/sampler.py on the error path)
FLAG_NAMES = {1: "num_draft_tokens", 2: "uniforms.accept", 4: "uniforms.residual", 8: "uniforms.bonus",
              16: "draft_token_ids", 32: "rows", 64: "gathered entries"}


class TritonConfig(NamedTuple):
    """chunk: vocabulary entries per program of launch 1 (power of two); block: entries per load
    (power of two ≤ chunk); num_warps: warps per program of launch 1; num_stages: software-pipelining
    depth of launch 1's load loop (cp.async prefetch of the next blocks; 1 = none)."""

    chunk: int = 4096
    block: int = 1024
    num_warps: int = 4
    num_stages: int = 3


DEFAULT_CONFIG = TritonConfig()


class TritonResult(NamedTuple):
    """tokens (B, K+1) int64 padded with −1; num_accepted (B,) int64; flags (B,) int32 (bits: FLAG_NAMES)."""

    tokens: torch.Tensor
    num_accepted: torch.Tensor
    flags: torch.Tensor


def available() -> bool:
    return triton is not None


if triton is not None:

    @triton.jit
    def _chain(b, pt_ptr, pd_ptr, ids_ptr, kb_ptr, ua_ptr, g_ptr, am_ptr, s_tb, s_tk, s_db, s_dk, s_ib, s_ik, V,
               K: tl.constexpr, HAS_Q: tl.constexpr, HAS_KB: tl.constexpr, GREEDY: tl.constexpr):
        """Accept chain of request b -> (n accepted, k_b clamped, rejected draft id, check bits 1|2|16|64)."""
        if HAS_KB:
            kb_raw = tl.load(kb_ptr + b).to(tl.int64)
        else:
            kb_raw = tl.full((), K, tl.int64)
        bits = tl.where((kb_raw < 0) | (kb_raw > K), 1, 0)
        kb = tl.minimum(tl.maximum(kb_raw, 0), K)
        if GREEDY == 2:
            g = tl.load(g_ptr + b) != 0
        else:
            g = tl.full((), GREEDY == 1, tl.int1)
        alive = tl.full((), 1, tl.int32)
        n = tl.zeros((), tl.int64)
        x = tl.zeros((), tl.int64)
        for i in tl.static_range(K):  # unrolled: the 4K scalar loads are issued together
            valid = i < kb
            u = tl.load(ua_ptr + b * K + i).to(tl.float64)
            ok_u = (u >= 0.0) & (u < 1.0)  # NaN fails both
            bits = bits | tl.where(ok_u, 0, 2)
            u = tl.where(ok_u, u, 0.0)
            tid = tl.load(ids_ptr + b * s_ib + i * s_ik).to(tl.int64)
            in_r = (tid >= 0) & (tid < V)
            bits = bits | tl.where(valid & ~in_r, 16, 0)
            t0 = tl.where(valid & in_r, tid, 0)
            ptx = tl.load(pt_ptr + b * s_tb + i * s_tk + t0, mask=valid, other=0.0).to(tl.float64)
            if HAS_Q:
                pdx = tl.load(pd_ptr + b * s_db + i * s_dk + t0, mask=valid, other=0.0).to(tl.float64)
            else:
                pdx = tl.full((), 1.0, tl.float64)
            bits = bits | tl.where(valid & ((ptx < 0.0) | (ptx != ptx) | (pdx < 0.0) | (pdx != pdx)), 64, 0)
            a = ptx > u * pdx
            if GREEDY != 0:
                a = tl.where(g, tid == tl.load(am_ptr + b * (K + 1) + i), a)
            a = a & valid
            x = tl.where((alive != 0) & (~a) & valid, t0, x)  # the first rejected draft
            alive = tl.where(a, alive, 0)
            n += alive.to(tl.int64)
        return n, kb, x, bits

    @triton.jit
    def _chunk(p_row, q_row, x, use_q, do_w, load_q, base, V, HAS_Q: tl.constexpr, IS_F64: tl.constexpr,
               CHUNK: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr):
        """One chunk [base, base + CHUNK) of a row pair: sums and counts of bad entries (NaN or < 0) of p
        and q, and (when do_w) the integer totals of the residual weights W and of the fallback weights
        ⌊p·2^40⌋. Per-lane accumulators, one reduction each at the end (sums: fp32 lanes for fp16/bf16/fp32
        rows, fp64 for fp64 rows). W ≥ 0, so ⌊·⌋ is the truncating conversion. The fallback total only
        matters when the whole residual is empty, so it is computed (a second read of p) only for a chunk
        whose residual total is 0."""
        offs = tl.arange(0, BLOCK)
        if IS_F64:
            sp = tl.zeros((BLOCK,), tl.float64)
            sq = tl.zeros((BLOCK,), tl.float64)
        else:
            sp = tl.zeros((BLOCK,), tl.float32)
            sq = tl.zeros((BLOCK,), tl.float32)
        bp = tl.zeros((BLOCK,), tl.int32)
        bq = tl.zeros((BLOCK,), tl.int32)
        wr = tl.zeros((BLOCK,), tl.int64)
        for start in tl.range(0, CHUNK, BLOCK, num_stages=STAGES):
            idx = base + start + offs
            m = idx < V
            p_in = tl.load(p_row + idx, mask=m, other=0.0)
            if IS_F64:
                sp += p_in
            else:
                sp += p_in.to(tl.float32)
            bp += tl.where(p_in >= 0.0, 0, 1)  # NaN fails p >= 0
            if HAS_Q:
                q_in = tl.load(q_row + idx, mask=m & load_q, other=0.0)
                if IS_F64:
                    sq += q_in
                else:
                    sq += q_in.to(tl.float32)
                bq += tl.where(q_in >= 0.0, 0, 1)
                q = q_in.to(tl.float64)
            else:
                q = tl.where(idx == x, 1.0, 0.0).to(tl.float64)
            if do_w:
                r = tl.maximum(p_in.to(tl.float64) - tl.where(use_q, q, 0.0), 0.0)
                wr += (r * 1099511627776.0).to(tl.int64)  # ⌊r·2^40⌋, r ≥ 0
        wr_t = tl.sum(wr, 0)
        wp_t = tl.zeros((), tl.int64)
        if do_w:
            if wr_t == 0:
                wp = tl.zeros((BLOCK,), tl.int64)
                for start in range(0, CHUNK, BLOCK):
                    idx = base + start + offs
                    p = tl.load(p_row + idx, mask=idx < V, other=0.0).to(tl.float64)
                    wp += (p * 1099511627776.0).to(tl.int64)
                wp_t = tl.sum(wp, 0)
        return (tl.sum(sp, 0).to(tl.float64), tl.sum(bp, 0), tl.sum(sq, 0).to(tl.float64), tl.sum(bq, 0), wr_t,
                wp_t)

    @triton.jit
    def _put_stats(ssum_ptr, sbad_ptr, b, r, s, S, R: tl.constexpr, total, nbad):
        tl.store(ssum_ptr + (b * R + r) * S + s, total)
        tl.store(sbad_ptr + (b * R + r) * S + s, nbad)

    @triton.jit
    def _partials_kernel(pt_ptr, pd_ptr, pb_ptr, ids_ptr, kb_ptr, ua_ptr, g_ptr, am_ptr, w_ptr, ssum_ptr, sbad_ptr,
                         s_tb, s_tk, s_db, s_dk, s_bb, s_ib, s_ik, V, S,
                         K: tl.constexpr, HAS_Q: tl.constexpr, HAS_KB: tl.constexpr, GREEDY: tl.constexpr,
                         FULL: tl.constexpr, IS_F64: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
                         STAGES: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        s = tl.program_id(1).to(tl.int64)
        R: tl.constexpr = 2 * K + 1
        n, kb, x, bits = _chain(b, pt_ptr, pd_ptr, ids_ptr, kb_ptr, ua_ptr, g_ptr, am_ptr, s_tb, s_tk, s_db, s_dk,
                                s_ib, s_ik, V, K, HAS_Q, HAS_KB, GREEDY)
        rej = n < kb
        base = s * CHUNK
        pb_row = pb_ptr + b * s_bb
        if FULL:
            for i in range(0, K):
                if i < kb:
                    sel = rej & (n == i)
                    sp, bp, sq, bq, wr, wp = _chunk(pt_ptr + b * s_tb + i * s_tk, pd_ptr + b * s_db + i * s_dk, x,
                                                    sel, sel, True, base, V, HAS_Q, IS_F64, CHUNK, BLOCK, STAGES)
                    _put_stats(ssum_ptr, sbad_ptr, b, i, s, S, R, sp, bp)
                    if HAS_Q:
                        _put_stats(ssum_ptr, sbad_ptr, b, K + i, s, S, R, sq, bq)
                    if sel:
                        tl.store(w_ptr + (b * 2) * S + s, wr)
                        tl.store(w_ptr + (b * 2 + 1) * S + s, wp)
            sp, bp, sq, bq, wr, wp = _chunk(pb_row, pb_row, x, False, ~rej, False, base, V, HAS_Q, IS_F64, CHUNK,
                                            BLOCK, STAGES)
            _put_stats(ssum_ptr, sbad_ptr, b, 2 * K, s, S, R, sp, bp)
            if n == kb:  # every draft accepted: the bonus row is the drawn one
                tl.store(w_ptr + (b * 2) * S + s, wr)
                tl.store(w_ptr + (b * 2 + 1) * S + s, wp)
        else:
            if rej:
                sp, bp, sq, bq, wr, wp = _chunk(pt_ptr + b * s_tb + n * s_tk, pd_ptr + b * s_db + n * s_dk, x,
                                                True, True, True, base, V, HAS_Q, IS_F64, CHUNK, BLOCK, STAGES)
                _put_stats(ssum_ptr, sbad_ptr, b, n, s, S, R, sp, bp)
                if HAS_Q:
                    _put_stats(ssum_ptr, sbad_ptr, b, K + n, s, S, R, sq, bq)
            else:
                sp, bp, sq, bq, wr, wp = _chunk(pb_row, pb_row, x, False, True, False, base, V, HAS_Q, IS_F64,
                                                CHUNK, BLOCK, STAGES)
                _put_stats(ssum_ptr, sbad_ptr, b, 2 * K, s, S, R, sp, bp)
            tl.store(w_ptr + (b * 2) * S + s, wr)
            tl.store(w_ptr + (b * 2 + 1) * S + s, wp)

    @triton.jit
    def _scan(p_row, q_row, x, use_q, empty, base, carry, thr, V, HAS_Q: tl.constexpr, CHUNK: tl.constexpr,
              BLOCK: tl.constexpr):
        """#{y in [base, base + CHUNK) : carry + (inclusive in-chunk cumsum of W)_y ≤ thr}."""
        offs = tl.arange(0, BLOCK)
        count = tl.zeros((), tl.int64)
        for start in range(0, CHUNK, BLOCK):
            idx = base + start + offs
            m = idx < V
            p = tl.load(p_row + idx, mask=m, other=0.0).to(tl.float64)
            if HAS_Q:
                q = tl.load(q_row + idx, mask=m & use_q, other=0.0).to(tl.float64)
            else:
                q = tl.where(idx == x, 1.0, 0.0).to(tl.float64)
            r = tl.maximum(p - tl.where(use_q, q, 0.0), 0.0)
            W = (tl.where(empty, p, r) * 1099511627776.0).to(tl.int64)  # ⌊·⌋ of a value ≥ 0
            c = carry + tl.cumsum(W, 0)
            count += tl.sum(((c <= thr) & m).to(tl.int64), 0)
            carry += tl.sum(W, 0)
        return count

    @triton.jit
    def _row_bad(ssum_ptr, sbad_ptr, b, r, S, R: tl.constexpr, tol, SP: tl.constexpr):
        """Row r of request b fails: a NaN/negative entry, or |Σ − 1| > tol (NaN sums fail too)."""
        si = tl.arange(0, SP)
        sm = si < S
        total = tl.sum(tl.load(ssum_ptr + (b * R + r) * S + si, mask=sm, other=0.0), 0)
        nbad = tl.sum(tl.load(sbad_ptr + (b * R + r) * S + si, mask=sm, other=0), 0)
        return (nbad > 0) | ~(tl.abs(total - 1.0) <= tol)

    @triton.jit
    def _finish_kernel(pt_ptr, pd_ptr, pb_ptr, ids_ptr, kb_ptr, ua_ptr, ur_ptr, ubo_ptr, g_ptr, am_ptr, w_ptr,
                       ssum_ptr, sbad_ptr, tok_ptr, nacc_ptr, flag_ptr, tol,
                       s_tb, s_tk, s_db, s_dk, s_bb, s_ib, s_ik, V, S,
                       K: tl.constexpr, HAS_Q: tl.constexpr, HAS_KB: tl.constexpr, GREEDY: tl.constexpr,
                       FULL: tl.constexpr, IS_F64: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
                       SP: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        R: tl.constexpr = 2 * K + 1
        n, kb, x, bits = _chain(b, pt_ptr, pd_ptr, ids_ptr, kb_ptr, ua_ptr, g_ptr, am_ptr, s_tb, s_tk, s_db, s_dk,
                                s_ib, s_ik, V, K, HAS_Q, HAS_KB, GREEDY)
        rej = n < kb
        ur = tl.load(ur_ptr + b).to(tl.float64)
        ub = tl.load(ubo_ptr + b).to(tl.float64)
        ok_r = (ur >= 0.0) & (ur < 1.0)
        ok_b = (ub >= 0.0) & (ub < 1.0)
        bits = bits | tl.where(ok_r, 0, 4) | tl.where(ok_b, 0, 8)
        u = tl.where(rej, tl.where(ok_r, ur, 0.0), tl.where(ok_b, ub, 0.0))
        # chunk totals -> threshold -> the crossing chunk j
        si = tl.arange(0, SP)
        sm = si < S
        wres = tl.load(w_ptr + (b * 2) * S + si, mask=sm, other=0)
        wfb = tl.load(w_ptr + (b * 2 + 1) * S + si, mask=sm, other=0)
        empty = tl.sum(wres, 0) == 0  # empty residual: draw from p_target (stated policy)
        parts = tl.where(empty, wfb, wres)
        T = tl.sum(parts, 0)
        U = tl.floor(u * 2147483648.0).to(tl.int64)  # 2^31
        thr = U * (T >> 31) + ((U * (T & 2147483647)) >> 31)  # ⌊U·T/2^31⌋ without overflow
        ends = tl.cumsum(parts, 0)
        j = tl.sum(((ends <= thr) & sm).to(tl.int64), 0)  # chunks wholly at or below thr: a prefix
        carry = tl.sum(tl.where(si < j, parts, 0), 0)
        base = j * CHUNK
        if rej:
            count = _scan(pt_ptr + b * s_tb + n * s_tk, pd_ptr + b * s_db + n * s_dk, x, True, empty, base, carry,
                          thr, V, HAS_Q, CHUNK, BLOCK)
        else:
            count = _scan(pb_ptr + b * s_bb, pb_ptr + b * s_bb, x, False, empty, base, carry, thr, V, HAS_Q, CHUNK,
                          BLOCK)
        token = tl.minimum(base, V) + count
        if GREEDY != 0:
            if GREEDY == 2:
                g = tl.load(g_ptr + b) != 0
            else:
                g = tl.full((), True, tl.int1)
            token = tl.where(g, tl.load(am_ptr + b * (K + 1) + tl.where(rej, n, K)), token)
        # row checks
        rowbad = tl.zeros((), tl.int1)
        if FULL:
            for i in range(0, K):
                if i < kb:
                    rowbad = rowbad | _row_bad(ssum_ptr, sbad_ptr, b, i, S, R, tol, SP)
                    if HAS_Q:
                        rowbad = rowbad | _row_bad(ssum_ptr, sbad_ptr, b, K + i, S, R, tol, SP)
            rowbad = rowbad | _row_bad(ssum_ptr, sbad_ptr, b, 2 * K, S, R, tol, SP)
            bits = bits & ~64  # full mode validates whole rows instead of the gathered entries
        else:
            if rej:
                rowbad = _row_bad(ssum_ptr, sbad_ptr, b, n, S, R, tol, SP)
                if HAS_Q:
                    rowbad = rowbad | _row_bad(ssum_ptr, sbad_ptr, b, K + n, S, R, tol, SP)
            else:
                rowbad = _row_bad(ssum_ptr, sbad_ptr, b, 2 * K, S, R, tol, SP)
        bits = bits | tl.where(rowbad, 32, 0)
        for i in range(0, K + 1):
            if i < K:
                d = tl.load(ids_ptr + b * s_ib + i * s_ik).to(tl.int64)
            else:
                d = tl.full((), -1, tl.int64)
            tl.store(tok_ptr + b * (K + 1) + i, tl.where(i < n, d, tl.where(i == n, token, -1)))
        tl.store(nacc_ptr + b, n)
        tl.store(flag_ptr + b, bits)


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def sample(draft_token_ids: torch.Tensor, p_draft: torch.Tensor | None, p_target: torch.Tensor,
           p_bonus: torch.Tensor, num_draft_tokens: torch.Tensor | None, u_accept: torch.Tensor,
           u_residual: torch.Tensor, u_bonus: torch.Tensor, greedy, *, full: bool, tol: float,
           config: TritonConfig | None = None) -> TritonResult:
    """The whole sampler in two launches. Shapes/dtypes/devices are the caller's to check
    (``kernels/sampler.py`` does): draft_token_ids (B, K) ints; p_draft (B, K, V) or None (one-hot
    drafts); p_target (B, K, V); p_bonus (B, V); num_draft_tokens (B,) ints or None (= K); u_accept
    (B, K), u_residual (B,), u_bonus (B,) float32/float64; greedy: bool, or a (B,) bool tensor.
    Data checks are NOT raised here: they come back as ``flags`` (no host sync in this function)."""
    if triton is None:
        raise RuntimeError("the Triton sampler backend needs triton; use backend='torch'")
    cfg = config or DEFAULT_CONFIG
    B, K, V = p_target.shape
    dev = p_target.device
    unit = lambda t: t if t.stride(-1) == 1 else t.contiguous()  # noqa: E731  (loads index V with stride 1)
    pb = unit(p_bonus)
    pt = unit(p_target) if K > 0 else pb  # an empty (B, 0, V) tensor is never loaded: any pointer will do
    pd = (unit(p_draft) if K > 0 else pb) if p_draft is not None else pt
    ids = draft_token_ids if K > 0 else pb
    ua = u_accept.contiguous() if K > 0 else pb
    kb = num_draft_tokens.contiguous() if num_draft_tokens is not None else pb
    if isinstance(greedy, torch.Tensor):
        mode, g = 2, greedy.to(torch.int8)
    else:
        mode, g = (1 if greedy else 0), pb
    if mode:
        am = torch.cat([p_target.argmax(-1), p_bonus.argmax(-1)[:, None]], 1).contiguous()  # first argmax
    else:
        am = pb
    chunk, block = cfg.chunk, cfg.block  # not adapted to V: one compiled variant per K and flags, not per V
    if chunk != _pow2(chunk) or block != _pow2(block) or block > chunk:
        raise ValueError(f"TritonConfig needs powers of two with block <= chunk, received {tuple(cfg)}")
    S = triton.cdiv(V, chunk)
    if S > 65535:
        raise ValueError(f"V = {V} needs {S} chunks of {chunk}; at most 65535 (grid limit): use a larger chunk")
    R = 2 * K + 1
    w = torch.empty((B, 2, S), dtype=torch.int64, device=dev)
    ssum = torch.empty((B, R, S), dtype=torch.float64, device=dev)
    sbad = torch.empty((B, R, S), dtype=torch.int32, device=dev)
    tokens = torch.empty((B, K + 1), dtype=torch.int64, device=dev)
    nacc = torch.empty((B,), dtype=torch.int64, device=dev)
    flags = torch.empty((B,), dtype=torch.int32, device=dev)
    if B == 0:
        return TritonResult(tokens, nacc, flags)
    strides = (pt.stride(0), pt.stride(1) if K > 0 else 0, pd.stride(0), pd.stride(1) if K > 0 else 0,
               pb.stride(0), ids.stride(0), ids.stride(1) if K > 0 else 0)
    meta = dict(K=K, HAS_Q=p_draft is not None, HAS_KB=num_draft_tokens is not None, GREEDY=mode, FULL=bool(full),
                IS_F64=p_target.dtype == torch.float64, CHUNK=chunk)
    _partials_kernel[(B, S)](pt, pd, pb, ids, kb, ua, g, am, w, ssum, sbad, *strides, V, S, BLOCK=block,
                             STAGES=cfg.num_stages, num_warps=cfg.num_warps, **meta)
    _finish_kernel[(B,)](pt, pd, pb, ids, kb, ua, u_residual.contiguous(), u_bonus.contiguous(), g, am, w, ssum,
                         sbad, tokens, nacc, flags, float(tol), *strides, V, S, BLOCK=min(1024, chunk),
                         SP=max(16, _pow2(S)), num_warps=4, **meta)
    return TritonResult(tokens, nacc, flags)
