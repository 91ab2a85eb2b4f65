"""Triton backend of the speculative sampler: a whole batch verified in two launches, one host sync.

Same rule and fixed-point draw as ``kernels/sampler/api.py`` and ``torch.py`` (bit-identical tokens):
    accept x at i  iff  u_i·p_draft(x) < p_target(x)                 (float64)
    w_y = max(0, p_y − q_y), W_y = ⌊w_y·2^40⌋; empty residual (Σ W = 0) → W_y = ⌊p_y·2^40⌋
    token = #{y : C_y ≤ ⌊U·T/2^31⌋}, C the inclusive integer cumsum of W, T = C_{V−1}, U = ⌊u·2^31⌋.

Launch 1 ``_partials_kernel``, grid (B, P), P = ⌈V / CHUNK⌉ programs per request, each computing its
request's accept chain once, then streaming its span [s·CHUNK, (s+1)·CHUNK) of the rows it needs once,
BLOCK entries per step, in one software-pipelined loop:
  check="full": every row that could be read — p_target and p_draft rows i < k_b as two (KP, BLOCK) tiles
                (KP = K rounded up to a power of two; rows i ≥ k_b are masked, never loaded) and p_bonus;
                per element only an fp32 add into its row's lane accumulator and an fp32 min. The drawn
                row pair (p_target[b, n], p_draft[b, n] at the first rejection n, or p_bonus[b]) is
                selected from the tiles already in registers (in-thread: Triton does not split the KP axis
                over threads when BLOCK ≥ 128·num_warps), so it is not read twice;
  check="read": the drawn row pair only (its pointer selected from the chain's result).
The float64/int64 work — W = ⌊max(p − q, 0)·2^40⌋, three 64-bit conversions per vocabulary position —
is done for the drawn pair only, once per position. Integer totals Σ W are kept per cell of CELL entries
(128 for fp32: one warp's contiguous share of a step, so the sum is warp shuffles only); per program one
float sum per row and one min over every checked entry (a NaN entry makes its row sum NaN; a negative
entry makes the min negative): w (B, S) int64 with S = ⌈V / CELL⌉, stats (B, 2K+2, P) fp64. Nothing
(B, V)-sized.
Launch 2 ``_finish_kernel``, grid (B,): cell totals -> T and the threshold; the cell j holding the crossing
is the first whose running total exceeds the threshold (totals are non-decreasing, so the cells at or below
it are a prefix), searched FB cells at a time (NFB steps, a constexpr); only cell j (CELL entries of the
pair) is read again for the in-cell scan: token = j·CELL + count. An empty residual (T = 0: the stated
policy draws from p_target) is drawn here, from W = ⌊p·2^40⌋ in two passes over the row, so launch 1 never
computes those weights. It also reduces the row stats and the small checks (k_b range, uniforms in [0, 1),
draft ids, gathered entries) to flag bits per request, and writes tokens (B, K+1), num_accepted (B,) and
flags (B,) into one int64 buffer.
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

# flag bits written per request by the finish kernel (decoded by kernels/sampler/api.py on the error path)
FLAG_NAMES = {1: "num_draft_tokens", 2: "uniforms.accept", 4: "uniforms.residual", 8: "uniforms.bonus",
              16: "draft_token_ids", 32: "rows", 64: "gathered entries"}
FALLBACK_BLOCK = 2048  # entries per step of the finish kernel's empty-residual draw (two passes over a row)
MAX_CHUNK_BLOCKS = 1 << 16  # chunk / block: a bound on the per-program loop, not a tuning choice


class TritonConfig(NamedTuple):
    """chunk: vocabulary entries per program of launch 1 (power of two; P = ⌈V / chunk⌉ programs per
    request); block: entries per step of its loop (power of two ≤ chunk); num_warps: warps per program of
    launch 1; num_stages: software-pipelining depth of launch 1's loop (cp.async prefetch of the next
    steps; 1 = none). Full mode keeps the KP tile rows in one thread only when block ≥ num_warps·32·(16 /
    element size), i.e. 128·num_warps for fp32 (otherwise correct, but the drawn-row selection crosses warps).
    Both chunk and block are clipped to the power of two ≥ V. The cell (the finish kernel's re-read) is
    fixed by the dtype, not configured: 32 lanes × one 16-byte vector (128 fp32 entries), or the block."""

    chunk: int = 16384
    block: int = 1024
    num_warps: int = 8
    num_stages: int = 3


DEFAULT_CONFIG = TritonConfig()


class TritonResult(NamedTuple):
    """tokens (B, K+1) int64 padded with −1; num_accepted (B,) int64; flags (B,) int64 (bits: FLAG_NAMES)."""

    tokens: torch.Tensor
    num_accepted: torch.Tensor
    flags: torch.Tensor


def available() -> bool:
    return triton is not None


if triton is not None:
    from ..interpreter import interpreter_fixes
    interpreter_fixes()   # under TRITON_INTERPRET=1: the interpreter computes what the GPU does

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
    def _cell_totals(p_sel, q_sel, w_ptr, b, c0, S, CELLS: tl.constexpr, CELL: tl.constexpr):
        """Σ W over each of the CELLS cells (CELL consecutive entries each) of one block of the drawn pair, from
        values in registers: W = ⌊max(p − q, 0)·2^40⌋ (W ≥ 0: ⌊·⌋ is the truncating conversion). With a
        cell = one warp's contiguous slice of the block, the reduction is warp shuffles only (no shared
        memory, no barrier). c0: the block's first cell; cells at or past S (beyond V) are not stored."""
        r = tl.maximum(p_sel.to(tl.float64) - q_sel.to(tl.float64), 0.0)
        wr = tl.sum(tl.reshape((r * 1099511627776.0).to(tl.int64), (CELLS, CELL)), 1)  # 2^40
        ci = c0 + tl.arange(0, CELLS)
        tl.store(w_ptr + b * S + ci, wr, mask=ci < S)

    @triton.jit
    def _partials_kernel(pt_ptr, pd_ptr, pb_ptr, ids_ptr, kb_ptr, ua_ptr, g_ptr, am_ptr, w_ptr, st_ptr,
                         s_tb, s_tk, s_db, s_dk, s_bb, s_ib, s_ik, V, S, P,
                         K: tl.constexpr, KP: tl.constexpr, HAS_Q: tl.constexpr, HAS_KB: tl.constexpr,
                         GREEDY: tl.constexpr, FULL: tl.constexpr, IS_F64: tl.constexpr, CHUNK: tl.constexpr,
                         BLOCK: tl.constexpr, CELLS: tl.constexpr, STAGES: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        s = tl.program_id(1).to(tl.int64)
        CELL: tl.constexpr = BLOCK // CELLS
        R: tl.constexpr = 2 * K + 1  # stats rows: p_target 0..K-1, p_draft K..2K-1, p_bonus 2K; row R: the min
        n, kb, x, bits = _chain(b, pt_ptr, pd_ptr, ids_ptr, kb_ptr, ua_ptr, g_ptr, am_ptr, s_tb, s_tk, s_db, s_dk,
                                s_ib, s_ik, V, K, HAS_Q, HAS_KB, GREEDY)
        rej = n < kb
        base = s * CHUNK  # the last program's span may end past V: masked (no bytes), its cells not stored
        offs = tl.arange(0, BLOCK)
        pb_row = pb_ptr + b * s_bb
        st_row = st_ptr + (b * (R + 1)) * P + s
        if IS_F64:
            zero = tl.zeros((BLOCK,), tl.float64)
        else:
            zero = tl.zeros((BLOCK,), tl.float32)  # fp16/bf16/fp32 rows: fp32 lanes
        mn = zero  # min over every checked entry (masked entries count as 0, which never fails >= 0)
        if FULL:
            rows = tl.arange(0, KP)
            rv = rows < kb  # rows i >= k_b may hold anything: never loaded
            sel = (rows == n)[:, None]  # the drawn row of the tiles (used where rej)
            t_off = b * s_tb + rows.to(tl.int64) * s_tk
            d_off = b * s_db + rows.to(tl.int64) * s_dk
            acc_t = tl.zeros((KP, BLOCK), zero.dtype)
            acc_d = tl.zeros((KP, BLOCK), zero.dtype)
            acc_b = zero
            for start in tl.range(0, CHUNK, BLOCK, num_stages=STAGES):
                idx = base + start + offs
                m = idx < V
                pb_v = tl.load(pb_row + idx, mask=m, other=0.0, eviction_policy="evict_first").to(zero.dtype)
                acc_b += pb_v
                mn = tl.minimum(mn, pb_v)
                p_sel = pb_v
                q_sel = zero
                if K > 0:
                    tm = rv[:, None] & m[None, :]
                    pt_v = tl.load(pt_ptr + t_off[:, None] + idx[None, :], mask=tm, other=0.0,
                                   eviction_policy="evict_first").to(zero.dtype)
                    acc_t += pt_v
                    mn = tl.minimum(mn, tl.min(pt_v, 0))
                    # x + 0 = x: the sum over the KP axis of the masked tile IS the drawn entry (in-thread)
                    p_sel = tl.where(rej, tl.sum(tl.where(sel, pt_v, 0.0), 0), pb_v)
                    if HAS_Q:
                        pd_v = tl.load(pd_ptr + d_off[:, None] + idx[None, :], mask=tm, other=0.0,
                                       eviction_policy="evict_first").to(zero.dtype)
                        acc_d += pd_v
                        mn = tl.minimum(mn, tl.min(pd_v, 0))
                        q_sel = tl.where(rej, tl.sum(tl.where(sel, pd_v, 0.0), 0), zero)
                    else:
                        q_sel = tl.where(rej & (idx == x), 1.0, zero)
                _cell_totals(p_sel, q_sel, w_ptr, b, (base + start) // CELL, S, CELLS, CELL)
            if K > 0:
                tl.store(st_row + rows * P, tl.sum(acc_t, 1), mask=rows < K)
                if HAS_Q:
                    tl.store(st_row + (K + rows) * P, tl.sum(acc_d, 1), mask=rows < K)
            tl.store(st_row + (2 * K) * P, tl.sum(acc_b, 0))
        else:
            p_row = tl.where(rej, pt_ptr + b * s_tb + n * s_tk, pb_row)  # the drawn row: residual or bonus
            q_row = pd_ptr + b * s_db + n * s_dk
            acc_p = zero
            acc_q = zero
            for start in tl.range(0, CHUNK, BLOCK, num_stages=STAGES):
                idx = base + start + offs
                m = idx < V
                p_v = tl.load(p_row + idx, mask=m, other=0.0, eviction_policy="evict_first").to(zero.dtype)
                acc_p += p_v
                mn = tl.minimum(mn, p_v)
                if HAS_Q:
                    q_v = tl.load(q_row + idx, mask=m & rej, other=0.0, eviction_policy="evict_first").to(zero.dtype)
                    acc_q += q_v
                    mn = tl.minimum(mn, q_v)
                else:
                    q_v = tl.where(rej & (idx == x), 1.0, zero)
                _cell_totals(p_v, q_v, w_ptr, b, (base + start) // CELL, S, CELLS, CELL)
            tl.store(st_row + tl.where(rej, n, 2 * K) * P, tl.sum(acc_p, 0))
            if HAS_Q:
                if rej:
                    tl.store(st_row + (K + n) * P, tl.sum(acc_q, 0))
        tl.store(st_row + R * P, tl.min(mn, 0))

    @triton.jit
    def _scan(p_row, q_row, x, use_q, base, carry, thr, V, HAS_Q: tl.constexpr, CELL: tl.constexpr):
        """#{y in [base, base + CELL) : carry + (inclusive in-cell cumsum of W)_y ≤ thr}, W the residual weights."""
        idx = base + tl.arange(0, CELL)
        m = idx < V
        p = tl.load(p_row + idx, mask=m, other=0.0).to(tl.float64)
        if HAS_Q:
            q = tl.load(q_row + idx, mask=m & use_q, other=0.0).to(tl.float64)
        else:
            q = tl.where(idx == x, 1.0, 0.0).to(tl.float64)
        W = (tl.maximum(p - tl.where(use_q, q, 0.0), 0.0) * 1099511627776.0).to(tl.int64)  # ⌊·⌋ of a value ≥ 0
        return tl.sum(((carry + tl.cumsum(W, 0) <= thr) & m).to(tl.int64), 0)

    @triton.jit
    def _fallback_draw(p_row, U, V, FBLK: tl.constexpr):
        """The empty-residual policy: the draw from W = ⌊p·2^40⌋ over the whole row, in two passes of the finish
        kernel's program (the total, then the count up to the crossing). Only requests whose residual is empty
        (every W_res = 0, e.g. p_target = p_draft) come here, so launch 1 never computes these weights."""
        offs = tl.arange(0, FBLK)
        T = tl.zeros((), tl.int64)
        start = tl.zeros((), tl.int64)
        while start < V:
            idx = start + offs
            p = tl.load(p_row + idx, mask=idx < V, other=0.0).to(tl.float64)
            T += tl.sum((p * 1099511627776.0).to(tl.int64), 0)
            start += FBLK
        thr = U * (T >> 31) + ((U * (T & 2147483647)) >> 31)  # ⌊U·T/2^31⌋ without overflow
        count = tl.zeros((), tl.int64)
        carry = tl.zeros((), tl.int64)
        start = tl.zeros((), tl.int64)
        while (start < V) & (carry <= thr):  # past the crossing no entry counts (C_y ≥ carry > thr)
            idx = start + offs
            m = idx < V
            W = (tl.load(p_row + idx, mask=m, other=0.0).to(tl.float64) * 1099511627776.0).to(tl.int64)
            count += tl.sum(((carry + tl.cumsum(W, 0) <= thr) & m).to(tl.int64), 0)
            carry += tl.sum(W, 0)
            start += FBLK
        return count

    @triton.jit
    def _finish_kernel(pt_ptr, pd_ptr, pb_ptr, ids_ptr, kb_ptr, ua_ptr, ur_ptr, ubo_ptr, g_ptr, am_ptr, w_ptr,
                       st_ptr, out_ptr, tol, s_tb, s_tk, s_db, s_dk, s_bb, s_ib, s_ik, V, S, P,
                       K: tl.constexpr, HAS_Q: tl.constexpr, HAS_KB: tl.constexpr, GREEDY: tl.constexpr,
                       FULL: tl.constexpr, CELL: tl.constexpr, FB: tl.constexpr, NFB: tl.constexpr,
                       FBLK: tl.constexpr, RP: tl.constexpr, PP: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        R: tl.constexpr = 2 * K + 1
        # first the loads that do not depend on the accept chain (their latency overlaps the chain's):
        # the row stats of every program (RP ≥ R + 1 rows × PP ≥ P programs), the uniforms, the cell totals
        ri = tl.arange(0, RP)
        pi = tl.arange(0, PP)
        stats = tl.load(st_ptr + (b * (R + 1) + ri[:, None]) * P + pi[None, :],
                        mask=(ri[:, None] < R + 1) & (pi[None, :] < P), other=0.0)
        ur = tl.load(ur_ptr + b).to(tl.float64)
        ub = tl.load(ubo_ptr + b).to(tl.float64)
        ci = tl.arange(0, FB)
        w_row = w_ptr + b * S
        parts0 = tl.load(w_row + ci, mask=ci < S, other=0)  # the first FB cells (all of them when NFB = 1)
        n, kb, x, bits = _chain(b, pt_ptr, pd_ptr, ids_ptr, kb_ptr, ua_ptr, g_ptr, am_ptr, s_tb, s_tk, s_db, s_dk,
                                s_ib, s_ik, V, K, HAS_Q, HAS_KB, GREEDY)
        rej = n < kb
        ok_r = (ur >= 0.0) & (ur < 1.0)
        ok_b = (ub >= 0.0) & (ub < 1.0)
        bits = bits | tl.where(ok_r, 0, 4) | tl.where(ok_b, 0, 8)
        u = tl.where(rej, tl.where(ok_r, ur, 0.0), tl.where(ok_b, ub, 0.0))
        U = tl.floor(u * 2147483648.0).to(tl.int64)  # 2^31
        p_row = tl.where(rej, pt_ptr + b * s_tb + n * s_tk, pb_ptr + b * s_bb)  # the drawn row
        # cell totals -> T -> threshold -> the crossing cell j (FB cells per step, NFB steps)
        T = tl.sum(parts0, 0)
        for c0 in range(FB, NFB * FB, FB):
            T += tl.sum(tl.load(w_row + c0 + ci, mask=c0 + ci < S, other=0), 0)
        if T == 0:  # empty residual: draw from p_target (stated policy)
            token = _fallback_draw(p_row, U, V, FBLK)
        else:
            thr = U * (T >> 31) + ((U * (T & 2147483647)) >> 31)  # ⌊U·T/2^31⌋ without overflow
            le = (tl.cumsum(parts0, 0) <= thr) & (ci < S)  # cells wholly at or below thr: a prefix
            j = tl.sum(le.to(tl.int64), 0)
            carry = tl.sum(tl.where(le, parts0, 0), 0)
            run = tl.sum(parts0, 0)
            for c0 in range(FB, NFB * FB, FB):
                cm = c0 + ci < S
                parts = tl.load(w_row + c0 + ci, mask=cm, other=0)
                le = ((run + tl.cumsum(parts, 0)) <= thr) & cm
                j += tl.sum(le.to(tl.int64), 0)
                carry += tl.sum(tl.where(le, parts, 0), 0)
                run += tl.sum(parts, 0)
            base = j * CELL
            count = _scan(p_row, pd_ptr + b * s_db + n * s_dk, x, rej, base, carry, thr, V, HAS_Q, CELL)
            token = tl.minimum(base, V) + count
        if GREEDY != 0:
            if GREEDY == 2:
                g = tl.load(g_ptr + b) != 0
            else:
                g = tl.full((), True, tl.int1)
            token = tl.where(g, tl.load(am_ptr + b * (K + 1) + tl.where(rej, n, K)), token)
        # row checks: a row read by this call fails when |Σ − 1| > tol (a NaN entry makes Σ NaN: fails too);
        # row R holds each program's min over every checked entry (< 0: a negative entry)
        fails = ~(tl.abs(tl.sum(stats, 1) - 1.0) <= tol)  # (RP,): stats rows never written are never checked
        if FULL:
            checked = ((ri < K) & (ri < kb)) | (ri == 2 * K)
            if HAS_Q:
                checked = checked | ((ri >= K) & (ri < 2 * K) & (ri - K < kb))
            bits = bits & ~64  # full mode validates whole rows instead of the gathered entries
        else:
            checked = tl.where(rej, ri == n, ri == 2 * K)
            if HAS_Q:
                checked = checked | (rej & (ri == K + n))
        mn = tl.min(tl.min(tl.where(ri[:, None] == R, stats, 0.0), 1), 0)
        rowbad = (tl.sum((checked & fails).to(tl.int32), 0) > 0) | ~(mn >= 0.0)
        bits = bits | tl.where(rowbad, 32, 0)
        # out: tokens (B, K+1), then num_accepted (B,), then flags (B,), all int64
        B = tl.num_programs(0).to(tl.int64)
        for i in range(0, K + 1):
            if i < K:
                d = tl.load(ids_ptr + b * s_ib + i * s_ik).to(tl.int64)
            else:
                d = tl.full((), -1, tl.int64)
            tl.store(out_ptr + b * (K + 1) + i, tl.where(i < n, d, tl.where(i == n, token, -1)))
        tl.store(out_ptr + B * (K + 1) + b, n)
        tl.store(out_ptr + B * (K + 2) + b, bits.to(tl.int64))


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _checked(cfg: TritonConfig) -> None:
    # not cached: a cache matches by equality, so TritonConfig(1024, 256, 8, 3.0) (== (…, 3)) or a bool
    # for an int would pass once the int config had been checked; the check is a few comparisons
    chunk, block = cfg.chunk, cfg.block
    if (not all(isinstance(v, int) and not isinstance(v, bool) for v in cfg) or chunk < 1 or block < 1
            or chunk != _pow2(chunk) or block != _pow2(block) or block > chunk
            or chunk // block > MAX_CHUNK_BLOCKS or cfg.num_warps not in (1, 2, 4, 8, 16) or cfg.num_stages < 1):
        raise ValueError(f"TritonConfig needs powers of two with block <= chunk (chunk/block <= {MAX_CHUNK_BLOCKS}), "
                         f"num_warps in 1..16 (a power of two) and num_stages >= 1, received {tuple(cfg)}")


def _even(n: int) -> int:
    return n + (n & 1)  # segment lengths in 8-byte words: keep every segment 16-byte aligned


def sample(draft_token_ids: torch.Tensor, p_draft: torch.Tensor | None, p_target: torch.Tensor,
           p_bonus: torch.Tensor, num_draft_tokens: torch.Tensor | None, u_accept: torch.Tensor,
           u_residual: torch.Tensor, u_bonus: torch.Tensor, greedy, *, full: bool, tol: float,
           config: TritonConfig | None = None) -> TritonResult:
    """The whole sampler in two launches. Shapes/dtypes/devices are the caller's to check
    (``kernels/sampler/api.py`` and ``torch.py`` does): draft_token_ids (B, K) ints; p_draft (B, K, V) or None (one-hot
    drafts); p_target (B, K, V); p_bonus (B, V); num_draft_tokens (B,) ints or None (= K); u_accept
    (B, K), u_residual (B,), u_bonus (B,) float32/float64; greedy: bool, or a (B,) bool tensor.
    Data checks are NOT raised here: they come back as ``flags`` (no host sync in this function)."""
    if triton is None:
        raise RuntimeError("the Triton sampler backend needs triton; use backend='torch'")
    cfg = DEFAULT_CONFIG if config is None else config
    if not isinstance(cfg, TritonConfig):
        raise TypeError(f"triton_config must be a flashproof.kernels.sampler.triton.TritonConfig, received {type(cfg).__name__}")
    _checked(cfg)
    B, K, V = p_target.shape
    # clipped to the power of two ≥ V (a small vocabulary runs no fully masked steps); otherwise not adapted
    # to V: one compiled variant per K, flags and configuration
    vp = _pow2(V)
    chunk, block = min(cfg.chunk, vp), min(cfg.block, vp)
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
    P = -(-V // chunk)  # (triton.cdiv is a JIT function: slow to call from Python)
    if P > 65535:
        raise ValueError(f"V = {V} needs {P} programs of {chunk} entries per request; at most 65535 (grid "
                         f"limit): use a larger chunk")
    # cells per block: one per 32 threads × one 16-byte vector each, the span a warp loads contiguously, so
    # that the cell sums are warp shuffles only (correct for any power of two; this one is the cheap one)
    cells = max(1, block // (32 * max(1, 16 // p_target.element_size())))
    cell = block // cells
    S = -(-V // cell)
    R = 2 * K + 1
    # one allocation: out (tokens, num_accepted, flags), cell totals w (B, S), stats (B, R+1, P) fp64
    n_out, n_w, n_st = B * (K + 3), B * S, B * (R + 1) * P
    buf = torch.empty(_even(n_out) + _even(n_w) + n_st, dtype=torch.int64, device=dev)
    out = buf[:n_out]
    tokens, nacc, flags = out[:B * (K + 1)].view(B, K + 1), out[B * (K + 1):B * (K + 2)], out[B * (K + 2):]
    if B == 0:
        return TritonResult(tokens, nacc, flags)
    w = buf[_even(n_out):_even(n_out) + n_w]
    st = buf[_even(n_out) + _even(n_w):].view(torch.float64)
    strides = (pt.stride(0), pt.stride(1) if K > 0 else 0, pd.stride(0), pd.stride(1) if K > 0 else 0,
               pb.stride(0), ids.stride(0), ids.stride(1) if K > 0 else 0)
    meta = dict(K=K, HAS_Q=p_draft is not None, HAS_KB=num_draft_tokens is not None, GREEDY=mode, FULL=bool(full))
    _partials_kernel[(B, P)](pt, pd, pb, ids, kb, ua, g, am, w, st, *strides, V, S, P, KP=_pow2(max(K, 1)),
                             IS_F64=p_target.dtype == torch.float64, CHUNK=chunk, BLOCK=block, CELLS=cells,
                             STAGES=cfg.num_stages, num_warps=cfg.num_warps, **meta)
    fb = min(1024, max(16, _pow2(S)))  # cells per step of the finish kernel's search (NFB steps)
    _finish_kernel[(B,)](pt, pd, pb, ids, kb, ua, u_residual.contiguous(), u_bonus.contiguous(), g, am, w, st, out,
                         float(tol), *strides, V, S, P, CELL=cell, FB=fb, NFB=-(-S // fb), FBLK=FALLBACK_BLOCK,
                         RP=_pow2(R + 1), PP=max(16, _pow2(P)), num_warps=4, **meta)
    return TritonResult(tokens, nacc, flags)
