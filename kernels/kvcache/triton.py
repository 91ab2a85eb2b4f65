"""The Triton path of ``attention_with_kvcache``: a split-KV decode kernel and a merge kernel.

``kvcache_fwd`` — one program per (request b, KV head, M-tile of packed rows, split s). The rows
of a tile are the query heads of one KV head's group times the Nq new queries (row r = g·Nq + i,
query head hkv·G + g, query i), so a KV head's cache is streamed from HBM once for its whole
group (decode is memory-bound: the bytes of K/V read are the cost). Split s walks its keys
[lo + start, lo + stop) (``_split_range``, the arithmetic of ``plan.split_range``) in tiles of
BLOCK_N keys with the online softmax (m_i, l_i, acc, rescale α), reading each key's row either
at (b, position) of a contiguous cache or through ``block_table`` at (page, slot) of a paged one.
It stores the split's normalised output and its lse: straight into the result when there is one
split, else into float32 partial buffers combined by the merge rule (lse = log Σ e^{lse_s},
out = Σ e^{lse_s − lse} out_s, the largest lse as rescale reference): by the last of a tile's
programs to finish (``_merge_tile``, an acq_rel ticket per tile) up to ``config.FUSED_MAX_SPLITS``
splits, by the merge kernel ``kvcache_merge`` (a second launch) above (``config.fuse_merge``).

Keys at positions ≥ the split's stop (so ≥ L) are masked at the load (other = 0): no poison past a
request's length, nor a page-table entry past its last page, is ever read.

Paged reads: a tile of BLOCK_N ≤ page_size keys starts at a multiple of BLOCK_N (the window's left
edge is rounded down to a tile; the keys it adds are masked by the window), so it lies in one page:
one table entry per tile, read as a scalar. A tile longer than a page reads one entry per key. Either
way the entries are loaded one tile ahead, so the K/V loads never wait on a load of their own iteration.

Values checked on the device (``api`` module docstring): a length outside 0..CAPACITY or a table
entry outside 0..NUM_PAGES − 1 that a tile needs is clamped before any address is formed, and the
program writes NaN to its out and lse rows; the merge passes a NaN partial lse on as NaN.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.runtime import driver

from ..interpreter import interpreter_fixes, interpreting
from .config import CONFIGS, MAX_BLOCK_M, KernelConfig, candidates, fuse_merge, load_class, next_pow2, tile_shape
from .config import TileShape as LaunchShape

__all__ = ["forward", "kvcache_fwd", "kvcache_merge", "CONFIGS", "launch_shape", "LaunchShape", "Launch",
           "launch_plan", "call_plan", "MAX_BLOCK_M", "config_kwargs", "merge_stages", "tickets"]

LOG2E = 1.4426950408889634   # 1 / ln 2: exp(x) = exp2(x · log2 e)


interpreter_fixes()   # under TRITON_INTERPRET=1: the interpreter computes what the GPU does


@triton.jit
def _split_range(s, n, NUM_SPLITS, BLOCK: tl.constexpr):
    """plan.split_range: c = ⌈⌈n / BLOCK⌉ / NUM_SPLITS⌉ · BLOCK; split s is [s·c, min(s·c + c, n))."""
    tiles = (n + BLOCK - 1) // BLOCK
    c = (tiles + NUM_SPLITS - 1) // NUM_SPLITS * BLOCK
    start = s * c
    return start, tl.minimum(start + c, n)


@triton.jit
def kvcache_fwd(Q, K, V, O, LSE, SEQLENS, TABLE, FO, FLSE, SEM,
                sq_b, sq_h, sq_n, sq_d,
                sk_0, sk_1, sk_h, sk_d,            # key row (outer, position-or-slot), head, dim strides
                sv_0, sv_1, sv_h, sv_d,
                so_s, so_b, so_h, so_n, so_d,      # out: split (0 when direct), b, h, i, d
                sl_s, sl_b, sl_h, sl_n,
                st_b,
                qk_scale, Hkv, Nq, LEFT, RIGHT, NUM_SPLITS, M_TILES, CAPACITY, NUM_PAGES,
                D: tl.constexpr, DV: tl.constexpr, GROUPS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_DV: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, HAS_LEFT: tl.constexpr,
                HAS_RIGHT: tl.constexpr, DOT_PREC: tl.constexpr, FUSED: tl.constexpr, MERGE_STAGES: tl.constexpr):
    tl.static_assert(BLOCK_M >= 16 and BLOCK_N >= 16 and BLOCK_D >= 16 and BLOCK_DV >= 16)  # tl.dot minimum
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // (Hkv * M_TILES)
    hkv = (pid // M_TILES) % Hkv
    mt = pid % M_TILES
    b64 = b.to(tl.int64)

    offs_m = mt * BLOCK_M + tl.arange(0, BLOCK_M)       # packed rows r = g·Nq + i
    g = offs_m // Nq
    i = offs_m % Nq
    row_ok = offs_m < GROUPS * Nq
    h = hkv * GROUPS + g                                # query head of each row
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    d_ok = offs_d < D
    dv_ok = offs_dv < DV

    q = tl.load(Q + b64 * sq_b + h[:, None] * sq_h + i[:, None] * sq_n + offs_d[None, :] * sq_d,
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)            # (BLOCK_M, BLOCK_D)

    L_given = tl.load(SEQLENS + b)
    bad = ((L_given < 0) | (L_given > CAPACITY)).to(tl.int32)   # 1: this request's rows become NaN
    L = tl.minimum(tl.maximum(L_given, 0), CAPACITY)            # what is read stays inside the cache
    lo = 0
    if HAS_LEFT:
        # no query reads a key left of L − Nq − LEFT; rounded down to a tile so tiles stay page-aligned
        lo = tl.maximum(L - Nq - LEFT, 0) // BLOCK_N * BLOCK_N
    start, stop = _split_range(split, L - lo, NUM_SPLITS, BLOCK_N)
    start += lo
    stop += lo
    diag = L - Nq + i                                   # each row's own cache position

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max of the scaled scores (log2 units)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    # Paged: the table entries of a tile are loaded one tile ahead (carried in page_next), so the K/V
    # loads' addresses do not wait on a load of the same iteration and the software pipeline keeps as
    # many K/V tiles in flight as on a contiguous cache (with the entry loaded in the iteration itself,
    # sm_90 cubins held one tile fewer: 38 KiB of shared memory instead of 70 at (64, 4, 3)). Only the
    # entries of keys below the split's stop are read.
    page_next = 0
    if PAGED:
        if BLOCK_N <= PAGE_SIZE:   # a tile lies in one page (kb is a multiple of BLOCK_N): one entry per tile
            page_next = tl.load(TABLE + b64 * st_b + start // PAGE_SIZE, mask=start < stop, other=0)
        else:                      # BLOCK_N / PAGE_SIZE pages per tile: one entry per key
            first = start + tl.arange(0, BLOCK_N)
            page_next = tl.load(TABLE + b64 * st_b + first // PAGE_SIZE, mask=first < stop, other=0)
    for kb in tl.range(start, stop, BLOCK_N):
        offs_n = kb + tl.arange(0, BLOCK_N)
        key_ok = offs_n < stop
        if PAGED:
            page = page_next
            if BLOCK_N <= PAGE_SIZE:
                page_next = tl.load(TABLE + b64 * st_b + (kb + BLOCK_N) // PAGE_SIZE, mask=kb + BLOCK_N < stop,
                                    other=0)
                page_bad = (page < 0) | (page >= NUM_PAGES)
                bad = bad | page_bad.to(tl.int32)
                page = tl.where(page_bad, 0, page).to(tl.int64)
                slot = kb % PAGE_SIZE + tl.arange(0, BLOCK_N)
            else:
                nxt = offs_n + BLOCK_N
                page_next = tl.load(TABLE + b64 * st_b + nxt // PAGE_SIZE, mask=nxt < stop, other=0)
                page_bad = ((page < 0) | (page >= NUM_PAGES)) & key_ok
                bad = bad | tl.max(page_bad.to(tl.int32), 0)
                page = tl.where(page_bad, 0, page).to(tl.int64)
                slot = offs_n % PAGE_SIZE
            k_row = page * sk_0 + slot * sk_1
            v_row = page * sv_0 + slot * sv_1
        else:
            k_row = b64 * sk_0 + offs_n.to(tl.int64) * sk_1
            v_row = b64 * sv_0 + offs_n.to(tl.int64) * sv_1
        kt = tl.load(K + k_row[None, :] + hkv * sk_h + offs_d[:, None] * sk_d,
                     mask=key_ok[None, :] & d_ok[:, None], other=0.0)       # (BLOCK_D, BLOCK_N)
        s = tl.dot(q, kt, input_precision=DOT_PREC) * qk_scale              # (BLOCK_M, BLOCK_N), log2 units
        ok = key_ok[None, :] & row_ok[:, None]
        if HAS_RIGHT:
            ok &= offs_n[None, :] <= diag[:, None] + RIGHT
        if HAS_LEFT:
            ok &= offs_n[None, :] >= diag[:, None] - LEFT
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing yet: never (−∞) − (−∞)
        alpha = tl.exp2(m_i - m_ref)
        p = tl.exp2(s - m_ref[:, None])                      # masked keys: exactly 0
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = tl.load(V + v_row[:, None] + hkv * sv_h + offs_dv[None, :] * sv_d,
                     mask=key_ok[:, None] & dv_ok[None, :], other=0.0)      # (BLOCK_N, BLOCK_DV)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt, input_precision=DOT_PREC)
        m_i = m_new

    nonempty = l_i > 0
    l_safe = tl.where(nonempty, l_i, 1.0)
    out = tl.where(nonempty[:, None], acc / l_safe[:, None], 0.0)
    lse = tl.where(nonempty, (m_i + tl.log2(l_safe)) / 1.4426950408889634, float("-inf"))  # ÷ log2 e: natural log
    out = tl.where(bad != 0, float("nan"), out)
    lse = tl.where(bad != 0, float("nan"), lse)
    o_off = b64 * so_b + h[:, None] * so_h + i[:, None] * so_n + offs_dv[None, :] * so_d     # (BLOCK_M, BLOCK_DV)
    l_off = b64 * sl_b + h * sl_h + i * sl_n                                                 # (BLOCK_M,)
    o_ok = row_ok[:, None] & dv_ok[None, :]
    tl.store(O + split * so_s + o_off, out.to(O.dtype.element_ty), mask=o_ok)
    tl.store(LSE + split * sl_s + l_off, lse, mask=row_ok)
    if FUSED:
        # The last of the tile's NUM_SPLITS programs to finish merges every split's partial. The barrier
        # orders all threads' partial stores before the release of the (one-thread) ticket; the acquire
        # of the last ticket orders the loads after every other program's stores; the loads bypass L1.
        tl.debug_barrier()
        ticket = tl.atomic_add(SEM + pid, 1, sem="acq_rel", scope="gpu")
        if ticket == NUM_SPLITS - 1:
            _merge_tile(O, LSE, FO, FLSE, o_off, l_off, o_ok, row_ok, so_s, sl_s, NUM_SPLITS, BLOCK_M, BLOCK_DV,
                        MERGE_STAGES)
            tl.atomic_xchg(SEM + pid, 0, sem="relaxed", scope="gpu")   # the counter is zero again for the next call


@triton.jit
def _merge_tile(OP, LP, FO, FLSE, o_off, l_off, o_ok, row_ok, so_s, sl_s, NUM_SPLITS,
                BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr, MERGE_STAGES: tl.constexpr):
    """The merge rule over the NUM_SPLITS float32 partials of one tile's rows, folded one split at a
    time with the running largest lse as the rescale reference (an empty split weighs 0; a NaN partial,
    a bad request's, makes the row NaN): FO[o_off] = Σ_s e^{lse_s − lse} out_s, FLSE[l_off] = lse."""
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    den = tl.zeros([BLOCK_M], tl.float32)
    num = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    poisoned = tl.zeros([BLOCK_M], tl.int32)
    for t in tl.range(0, NUM_SPLITS, num_stages=MERGE_STAGES):   # pipelined: later splits' loads in flight
        lse_t = tl.load(LP + t * sl_s + l_off, mask=row_ok, other=float("-inf"), cache_modifier=".cg")
        poisoned = poisoned | (lse_t != lse_t).to(tl.int32)
        lse_t = tl.where(lse_t != lse_t, float("-inf"), lse_t)
        m_new = tl.maximum(m, lse_t)
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)       # nothing yet: never (−∞) − (−∞)
        alpha = tl.exp(m - m_ref)
        w = tl.exp(lse_t - m_ref)                                   # an empty split: 0
        o_t = tl.load(OP + t * so_s + o_off, mask=o_ok, other=0.0, cache_modifier=".cg")
        num = num * alpha[:, None] + w[:, None] * o_t
        den = den * alpha + w
        m = m_new
    den_safe = tl.where(den > 0, den, 1.0)
    out = tl.where(den[:, None] > 0, num / den_safe[:, None], 0.0)
    lse = tl.where(den > 0, m + tl.log(den_safe), float("-inf"))
    out = tl.where(poisoned[:, None] != 0, float("nan"), out)
    lse = tl.where(poisoned != 0, float("nan"), lse)
    tl.store(FO + o_off, out.to(FO.dtype.element_ty), mask=o_ok)
    tl.store(FLSE + l_off, lse, mask=row_ok)


@triton.jit
def kvcache_merge(OP, LP, O, LSE, R, Hq, Nq, DV, NUM_SPLITS,
                  so_b, so_h, so_n, so_d, sl_b, sl_h, sl_n,
                  BLOCK_S: tl.constexpr, BLOCK_DV: tl.constexpr):
    """One output row r = (b·Hq + h)·Nq + i from the float32 partials OP (S, R, DV), LP (S, R)."""
    r = tl.program_id(0)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_DV)
    s_ok = offs_s < NUM_SPLITS
    d_ok = offs_d < DV
    lse_s = tl.load(LP + offs_s * R + r, mask=s_ok, other=float("-inf"))          # (BLOCK_S,)
    poisoned = tl.sum((lse_s != lse_s).to(tl.int32), 0) > 0                       # a NaN partial: a bad request
    lse_s = tl.where(lse_s != lse_s, float("-inf"), lse_s)
    m = tl.max(lse_s, 0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp(lse_s - m_ref)                                                     # empty split: 0
    den = tl.sum(w, 0)
    o_s = tl.load(OP + (offs_s[:, None] * R + r).to(tl.int64) * DV + offs_d[None, :],
                  mask=s_ok[:, None] & d_ok[None, :], other=0.0)                  # (BLOCK_S, BLOCK_DV)
    num = tl.sum(w[:, None] * o_s, 0)
    den_safe = tl.where(den > 0, den, 1.0)
    out = tl.where(den > 0, num / den_safe, 0.0)
    lse = tl.where(den > 0, m_ref + tl.log(den_safe), float("-inf"))
    out = tl.where(poisoned, float("nan"), out)
    lse = tl.where(poisoned, float("nan"), lse)
    b = r // (Hq * Nq)
    h = (r // Nq) % Hq
    i = r % Nq
    tl.store(O + b.to(tl.int64) * so_b + h * so_h + i * so_n + offs_d * so_d, out.to(O.dtype.element_ty), mask=d_ok)
    tl.store(LSE + b.to(tl.int64) * sl_b + h * sl_h + i * sl_n, lse)


#: the autotuner's key: every compile-time constant of a launch (not the split count: one tuning per tile
#: shape and load class; the load class by keeping one autotuner per candidate list and class, ``_tuner``)
_TUNE_KEY = ["D", "DV", "GROUPS", "BLOCK_M", "BLOCK_D", "BLOCK_DV", "PAGED", "PAGE_SIZE", "HAS_LEFT", "HAS_RIGHT",
             "FUSED"]


@functools.lru_cache(maxsize=None)
def _tuner(load: str, configs: tuple):
    """Triton's autotuner over ``configs`` for launches of one load class (its own cache of choices)."""
    del load   # part of the cache key only: a class never reuses another class's timing
    return triton.autotune(configs=[triton.Config({"BLOCK_N": c.block_n}, num_warps=c.num_warps,
                                                  num_stages=c.num_stages) for c in configs],
                           key=_TUNE_KEY)(kvcache_fwd)


def launch_shape(groups: int, n_q: int, d: int, dv: int) -> LaunchShape:
    """``config.tile_shape`` (kept under its old name for the tests and the bench)."""
    return tile_shape(groups, n_q, d, dv)


class Launch(NamedTuple):
    """Everything of a launch that depends on the call's shape only (cached per shape by ``launch_plan``):
    the tile shape, the forward's grid, its compile-time constants (as the autotuner's key orders
    them), the merge's grid and tile (None with one split), the load class and the candidate configs
    (``config.candidates``), the key under which the autotuned choice is kept (q's dtype, split or not,
    the load class, the constants: as the autotuner's key, which holds O's dtype, and the partials are
    float32), the keywords of ``tuning="first"``'s launch, and the one float32 buffer of the partials
    (with splits): its size, where the lses start, the strides of the outs and the lses."""

    shape: LaunchShape
    grid: tuple
    consts: dict
    merge_grid: tuple | None
    block_s: int
    load: str
    configs: tuple
    tune_key: tuple
    first_kwargs: dict
    part_numel: int
    lse_offset: int
    part_strides: tuple


def config_kwargs(consts: dict, c: KernelConfig) -> dict:
    """The launch keywords of constants ``consts`` run with configuration ``c``."""
    return {**consts, "BLOCK_N": c.block_n, "num_warps": c.num_warps, "num_stages": c.num_stages}


def merge_stages(block_m: int, block_dv: int) -> int:
    """Pipeline stages of the fused merge's loop over splits: as many (≤ 3) as keep its float32 tiles of
    block_m × block_dv within 64 KiB of shared memory (1: not pipelined)."""
    return max(1, min(3, 65536 // (block_m * block_dv * 4)))


@functools.lru_cache(maxsize=1024)
def launch_plan(B: int, Hkv: int, G: int, Nq: int, D: int, Dv: int, S: int, page_size: int, has_left: bool,
                has_right: bool, dtype: torch.dtype, num_sms: int = 1, fused_merge: bool | None = None,
                gpu: bool = False) -> Launch:
    """The launch of a call's shape; ``fused_merge``: None routes by ``config.fuse_merge``, True/False
    force the merge form (the bench's A/B). ``gpu``: compiled for a CUDA device; else interpreted, where
    the only candidate config is the first (the interpreter has no timer to tune by)."""
    shape = launch_shape(G, Nq, D, Dv)
    fused_merge = fuse_merge(S) if fused_merge is None else (S > 1 and fused_merge)
    merge = (B * Hkv * G * Nq,) if S > 1 and not fused_merge else None
    consts = dict(D=D, DV=Dv, GROUPS=G, BLOCK_M=shape.block_m, BLOCK_D=shape.block_d, BLOCK_DV=shape.block_dv,
                  PAGED=bool(page_size), PAGE_SIZE=page_size or 16, HAS_LEFT=has_left, HAS_RIGHT=has_right,
                  DOT_PREC="ieee" if dtype == torch.float32 else "tf32", FUSED=fused_merge,
                  MERGE_STAGES=merge_stages(shape.block_m, shape.block_dv))
    grid = (B * Hkv * shape.m_tiles, S)
    load = load_class(grid[0] * S, num_sms)
    configs = candidates(load, page_size) if gpu else candidates(load, page_size)[:1]   # the interpreter: no timer
    R = B * Hkv * G * Nq                                    # rows of the result
    part_strides = ((R * Dv, Hkv * G * Nq * Dv, Nq * Dv, Dv, 1), (R, Hkv * G * Nq, Nq, 1))   # (S, B, Hq, Nq[, Dv])
    return Launch(shape, grid, consts, merge, max(16, next_pow2(S)), load, configs,
                  (dtype, S > 1, load, *consts.values()), config_kwargs(consts, configs[0]), S * R * (Dv + 1),
                  S * R * Dv, part_strides)


def call_plan(q, v_cache, call, fused_merge: bool | None = None) -> Launch:
    """``launch_plan`` of a validated call (``api.KVCall``) on these tensors: compiled for the GPU when q
    is a CUDA tensor that Triton does not interpret."""
    B, Hq, Nq, D = q.shape
    return launch_plan(B, Hq // call.groups, call.groups, Nq, D, v_cache.shape[-1], call.num_splits, call.page_size,
                       call.left is not None, call.right is not None, q.dtype, call.num_sms, fused_merge,
                       q.is_cuda and not interpreting())


#: ``Launch.tune_key`` -> the launch keywords (constants and the chosen config's) of the configuration
#: the autotuner chose. A later launch with the same key goes straight to the kernel: Triton's
#: ``Autotuner.run`` rebuilds its key from every argument on every call (host time that bounds small
#: decode calls).
_CHOSEN: dict = {}


def _launch_fwd(lp: "Launch", args, tuning: str, config):
    if config is not None:
        kvcache_fwd[lp.grid](*args, **config_kwargs(lp.consts, config))
        return
    if tuning == "first":
        kvcache_fwd[lp.grid](*args, **lp.first_kwargs)
        return
    kwargs = _CHOSEN.get(lp.tune_key)
    if kwargs is None:
        tuner = _tuner(lp.load, lp.configs)
        tuner[lp.grid](*args, **lp.consts)
        _CHOSEN[lp.tune_key] = {**lp.consts, **tuner.best_config.all_kwargs()}
        return
    kvcache_fwd[lp.grid](*args, **kwargs)


#: (device, stream) -> the int32 tickets of the fused merge, one per (request, KV head, M-tile), zero
#: between calls (the last program of a tile resets its own); one buffer per stream, so calls on two
#: streams never share a counter
_TICKETS: dict = {}


def tickets(device: torch.device, n: int) -> torch.Tensor:
    """At least ``n`` zeroed int32 tickets for a fused-merge launch on the current stream. While a CUDA
    graph is being captured, a fresh zeroed buffer (a memset node of the graph): a buffer kept here must
    not come from the graph's private memory pool."""
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return torch.zeros(n, dtype=torch.int32, device=device)
        key = (device, driver.active.get_current_stream(device.index))   # the raw stream, as Triton's launcher reads it
    else:
        key = (device, 0)
    buf = _TICKETS.get(key)
    if buf is None or buf.numel() < n:
        buf = _TICKETS[key] = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
    return buf


def forward(q, k_cache, v_cache, call, *, tuning: str, config: KernelConfig | None = None,
            fused_merge: bool | None = None):
    """q (B, Hq, Nq, D) → out (B, Hq, Nq, Dv) in q's dtype, lse (B, Hq, Nq) float32. ``config``: run this
    ``KernelConfig`` instead of the tuned or first one (the bench's forced-config sweep). With splits,
    the partials are merged in the last program of each tile (one launch) or by ``kvcache_merge`` (a
    second launch): ``fused_merge=None`` routes by ``config.fuse_merge``, True/False force one (the
    bench's A/B)."""
    B, Hq, Nq, D = q.shape
    Dv, G, S = v_cache.shape[-1], call.groups, call.num_splits
    Hkv = Hq // G
    lp = call_plan(q, v_cache, call, fused_merge)
    out = torch.empty(B, Hq, Nq, Dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, Hq, Nq, dtype=torch.float32, device=q.device)
    if S == 1:
        o_buf, l_buf = out, lse
        so, sl = (0, *out.stride()), (0, *lse.stride())
    else:   # one float32 buffer: the partial outs (S, B, Hq, Nq, Dv), then the partial lses (S, B, Hq, Nq),
        # both contiguous, so they share out's and lse's strides with a split stride in front
        part = torch.empty(lp.part_numel, dtype=torch.float32, device=q.device)
        o_buf, l_buf = part, part[lp.lse_offset:]
        so, sl = lp.part_strides
    sem = tickets(q.device, lp.grid[0]) if lp.consts["FUSED"] else call.cache_seqlens   # never read unfused
    ks, vs = k_cache.stride(), v_cache.stride()
    if call.page_size:
        table, st_b = call.block_table, call.block_table.stride(0)
    else:   # (B, Hkv, Nmax, ·): pass (b, position, head, dim) strides
        ks, vs = (ks[0], ks[2], ks[1], ks[3]), (vs[0], vs[2], vs[1], vs[3])
        table, st_b = call.cache_seqlens, 0    # never read
    args = (q, k_cache, v_cache, o_buf, l_buf, call.cache_seqlens, table, out, lse, sem, *q.stride(), *ks, *vs, *so,
            *sl, st_b, call.scale * LOG2E, Hkv, Nq, call.left or 0, call.right or 0, S, lp.shape.m_tiles,
            call.capacity, call.num_pages)
    _launch_fwd(lp, args, tuning, config)
    if lp.merge_grid is not None:
        kvcache_merge[lp.merge_grid](o_buf, l_buf, out, lse, B * Hq * Nq, Hq, Nq, Dv, S, *out.stride(),
                                     *lse.stride(), BLOCK_S=lp.block_s, BLOCK_DV=lp.shape.block_dv)
    return out, lse
