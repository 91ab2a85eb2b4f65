"""KV-cache attention on one GPU: check bf16 correctness, then time ours against SDPA (one command).

    python3 bench/kvcache.py --out out/kvcache.json          # ~3 min on an H200 (+1–2 min e2e)

1. Check (bf16, before any timing): ``attention_with_kvcache`` — contiguous and paged (permuted
   page tables), ragged lengths with 0 and 1, NaN planted past every request's length, Nq = 1 and
   5, GQA 4 and 8, a window, num_splits forced and chosen — against the dense formula in float64
   (``flashproof.fuzz.oracle.masked_attention``), judged by the one tolerance rule
   (``flashproof.fuzz.tolerance.judge``, baseline: the same formula in bf16). Also the timed shapes.
2. Copy bandwidth: a device-to-device copy of 2 GiB, read + write bytes over time (the ceiling the
   "% of read" column is against, with a read probe: a bf16 sum over 2 GiB; the larger of the two).
3. Time, at decode Nq = 1 and verify Nq = 5: B = 64, Hq/Hkv = 32/8, Nk = 32768; B = 8, 64/8, Nk = 131072;
   and B = 1, 2, 4, 8, 16, 32, 64, 128, 256 at 32/8, Nk = 16384 (d = 128, bf16, every request full).
   Three ways: ``graph`` — GPU time per call, the calls captured in a CUDA graph and replayed back to
   back, K/V in as many copies as exceed 4× L2 so no call finds its cache in L2 (no host work timed);
   ``call`` — one call between CUDA events after a sync (the host's validation and launches included,
   as an eager decode loop sees it); ``host`` — µs of host time per call (and of the validation alone).
   Providers: ours (contiguous, the chosen split count), ours-paged (page 64, permuted table), SDPA
   cuDNN and FA2 on the contiguous cache (enable_gqa; if a backend refuses it, K/V expanded to Hq
   heads before timing — the note says so; SDPA runs without the causal corner at Nq = 5, its is_causal
   being top-left aligned; at Nq = 1 bottom-right causal is no mask at all), and ours at every forced
   split count 1…64 (``ours-S*``, the data ``plan.choose_num_splits`` is fitted to), and at the shapes of
   ``CONFIG_SHAPES`` every kernel config of ``config.CONFIGS`` forced at the chosen split count, contiguous
   (``ours-C*``) and paged (``ours-paged-C*``): the data ``config.candidates`` is ordered by. The host
   time is also split into validation, ``forward`` (buffers and launches) and the buffers alone; with
   splits, ``ours-other-merge`` times the merge form that ``config.fuse_merge`` did not choose (merged in
   the last program of each tile, or by a second launch), with the default's kernel config. TB/s = bytes of K
   and V read (B·Hkv·Nk·(D + Dv)·2) / time.
4. examples/spec_e2e.py at its GPU size (speculation end to end; ``--skip-e2e`` leaves it out;
   ``scripts/gpu_kvcache.sh`` runs it as its own step).

Also checks the device-side validation (NaN rows for bad lengths/pages; the rest bitwise unchanged).
Prints tables (GPU time with % of the read bandwidth and cuDNN/ours; one call with host time; the
split sweep; the issue's targets counted); writes JSON (checks, rows, targets, environment, e2e) to
``--out``. Exit code 1 if a check or the e2e run failed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import time
from typing import NamedTuple


def _import_flashproof():
    """Import the package from this checkout without installing it: the repository's folders are
    flashproof's sub-packages, so link them into a temporary namespace (as scripts/gpu_session.sh)."""
    try:
        import flashproof.kernels.kvcache  # noqa: F401
        return
    except ImportError:  # not installed, or an install without this package: use the checkout
        for name in [m for m in sys.modules if m == "flashproof" or m.startswith("flashproof.")]:
            del sys.modules[name]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ns = os.path.join(tempfile.mkdtemp(prefix="fp_kvcache_"), "flashproof")
    os.makedirs(ns)
    for name in os.listdir(os.path.join(root, "flashproof")):
        os.symlink(os.path.join(root, "flashproof", name), os.path.join(ns, name))
    for d in ("kernels", "verified", "spec", "proofs", "bench"):
        os.symlink(os.path.join(root, d), os.path.join(ns, d))
    sys.path.insert(0, os.path.dirname(ns))
    import flashproof.kernels.kvcache  # noqa: F401


_import_flashproof()

import torch  # noqa: E402

from flashproof.bench.stats import Spread, spread  # noqa: E402
from flashproof.fuzz.oracle import masked_attention  # noqa: E402
from flashproof.fuzz.tolerance import judge, magnitudes, naive  # noqa: E402
from flashproof.kernels.kvcache import attention_with_kvcache  # noqa: E402

DEV = "cuda"
DT = torch.bfloat16
D = 128
PAGE = 64
#: a page at least as long as every BLOCK_N of the autotune list: one table entry per key tile (PAGE = 64
#: is shorter than the 128-key tiles, which then read one entry per key)
BIG_PAGE = 256


# ------------------------------------------------------------------------------------- inputs

def make_cache(B, Hkv, n_max, lengths, *, seed, poison=float("nan")):
    """Contiguous K/V (B, Hkv, n_max, D) bf16 with ``poison`` past each request's length."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    k = torch.randn(B, Hkv, n_max, D, device=DEV, dtype=DT, generator=g)
    v = torch.randn(B, Hkv, n_max, D, device=DEV, dtype=DT, generator=g)
    if poison is not None:
        past = torch.arange(n_max, device=DEV)[None, :] >= torch.tensor(lengths, device=DEV)[:, None]  # (B, n_max)
        k.masked_fill_(past[:, None, :, None], poison)
        v.masked_fill_(past[:, None, :, None], poison)
    return k, v


def to_paged(k, page, *, seed):
    """(B, Hkv, n_max, D) → pages (B·n_max/page, page, Hkv, D) in a random order, and the int32
    block table (B, n_max/page) that maps request b's p-th page to its slot."""
    B, Hkv, n_max, Dh = k.shape
    per = n_max // page
    g = torch.Generator(device=DEV).manual_seed(seed)
    table = torch.randperm(B * per, device=DEV, generator=g).to(torch.int32).reshape(B, per)
    pages = torch.empty(B * per, page, Hkv, Dh, device=DEV, dtype=k.dtype)
    pages[table.flatten().long()] = k.reshape(B, Hkv, per, page, Dh).permute(0, 2, 3, 1, 4).reshape(B * per, page, Hkv, Dh)
    return pages, table


# ------------------------------------------------------------------------------------- check

def _larger(a: dict, b: dict) -> dict:
    """The entrywise larger of two ``tolerance.magnitudes`` results (nested dicts, such as the proved
    rule's ``bound_inputs``, entrywise too: the bound of the request with the larger magnitude)."""
    return {x: _larger(a[x], b[x]) if isinstance(a[x], dict) else max(a[x], b[x]) for x in a}


def reference(q, k, v, lengths, *, causal, window, scale):
    """The dense formula per request, in float64 and (the tolerance rule's baseline) in bf16, on the
    positions each request may read: out (B, Hq, Nq, D), lse (B, Hq, Nq), the magnitudes M_T."""
    B, Hq, Nq, _ = q.shape
    Hkv = k.shape[1]
    G = Hq // Hkv
    res = {n: [] for n in ("out", "lse", "b_out", "b_lse")}
    mags = None
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    for b, L in enumerate(lengths):
        pos = torch.arange(L, device=DEV)
        diag = (L - Nq + torch.arange(G * Nq, device=DEV) % Nq)[:, None]   # packed row r = g·Nq + i
        ok = torch.ones(G * Nq, L, dtype=torch.bool, device=DEV)
        if right is not None:
            ok &= pos[None] <= diag + right
        if left is not None:
            ok &= pos[None] >= diag - left
        allowed = ok.expand(1, Hkv, -1, -1)                                  # (1, Hkv, G·Nq, L)
        qb = q[b].reshape(1, Hkv, G * Nq, -1)                                # a KV head's group as its rows
        kb, vb = k[b:b + 1, :, :L], v[b:b + 1, :, :L]
        o, s = masked_attention(qb.double(), kb.double(), vb.double(), allowed, scale)
        bo, bs, _ = naive(qb, kb, vb, allowed, scale)
        for n, t in (("out", o), ("lse", s), ("b_out", bo), ("b_lse", bs)):
            res[n].append(t.reshape(Hq, Nq, *t.shape[3:]))
        m = magnitudes(qb.double(), kb.double(), vb.double(), torch.zeros(1), s, scale)
        mags = m if mags is None else _larger(mags, m)
    return {n: torch.stack(t).cpu() for n, t in res.items()}, mags


def check_case(name, *, B, Hq, Hkv, Nq, lengths, n_max, paged, num_splits=None, window=None, causal=True, seed=0,
               tuning="autotune"):
    """One call of ours against the float64 reference; returns a JSON-able verdict."""
    k, v = make_cache(B, Hkv, n_max, lengths, seed=seed)
    g = torch.Generator(device=DEV).manual_seed(seed + 1)
    q = torch.randn(B, Hq, Nq, D, device=DEV, dtype=DT, generator=g)
    lens = torch.tensor(lengths, dtype=torch.int32, device=DEV)
    scale = 1.0 / math.sqrt(D)
    if paged:
        kc, table = to_paged(k, PAGE, seed=seed + 2)
        vc, _ = to_paged(v, PAGE, seed=seed + 2)
    else:
        kc, vc, table = k, v, None
    got = attention_with_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table, causal=causal, window=window,
                                 return_lse=True, num_splits=num_splits, tuning=tuning)
    torch.cuda.synchronize()
    ref, mags = reference(q, k, v, lengths, causal=causal, window=window, scale=scale)
    empty = torch.isneginf(ref["lse"])
    verdicts = [judge("out", got.out, ref["out"], ref["b_out"], DT, mags, exact_zero=empty[..., None].cpu()),
                judge("lse", got.lse, ref["lse"], ref["b_lse"], DT, mags)]
    ok = all(x.ok for x in verdicts)
    print(f"check {name:<34} {'ok' if ok else 'FAILED'}  " + "  ".join(
        f"{x.name}: err {x.error:.2e} <= {x.bound:.2e}{'' if x.ok else ' (' + x.reason + f' at {x.first})'}"
        for x in verdicts), flush=True)
    del k, v, kc, vc
    return {"name": name, "ok": ok, "verdicts": [x._asdict() for x in verdicts]}


def check_device_validation():
    """Lengths and page entries are checked on the device (no host read): a request whose length is
    outside 0..capacity, or that needs a table entry outside the pages, gets NaN in every out and lse
    row; the other requests' rows equal a call without the bad ones (same split count: bitwise); and
    check=True raises instead. Returns one JSON-able verdict."""
    Hq, Hkv, Nq, n_max = 32, 8, 2, 512
    lengths = [100, n_max + 1, 300, -3]
    good = [0, 2]
    problems = []
    for paged in (False, True):
        k, v = make_cache(4, Hkv, n_max, [max(0, min(L, n_max)) for L in lengths], seed=11)
        q = torch.randn(4, Hq, Nq, D, device=DEV, dtype=DT)
        lens = torch.tensor(lengths, dtype=torch.int32, device=DEV)
        if paged:
            kc, table = to_paged(k, PAGE, seed=12)
            vc, _ = to_paged(v, PAGE, seed=12)
            table[2, 0] = kc.shape[0]          # request 2 now needs a page that does not exist
            table[0, 5] = -1                   # past request 0's length (100 < 6·64): never read, fine
            lens[1] = 200                      # request 1 in range here; 2 and 3 are the bad ones
            bad_rows, good = [2, 3], [0, 1]
        else:
            kc, vc, table, bad_rows = k, v, None, [1, 3]
        got = attention_with_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table, return_lse=True, num_splits=4)
        sub = attention_with_kvcache(q[good], kc if paged else kc[good], vc if paged else vc[good],
                                     cache_seqlens=lens[good], block_table=table[good] if paged else None,
                                     return_lse=True, num_splits=4)
        name = "paged" if paged else "contig"
        if not (torch.isnan(got.out[bad_rows]).all() and torch.isnan(got.lse[bad_rows]).all()):
            problems.append(f"{name}: a bad request's rows are not all NaN")
        if not (torch.equal(got.out[good], sub.out) and torch.equal(got.lse[good], sub.lse)):
            problems.append(f"{name}: the good requests' rows differ from a call without the bad ones")
        try:
            attention_with_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table, check=True)
            problems.append(f"{name}: check=True did not raise")
        except ValueError:
            pass
    ok = not problems
    print(f"check {'device-validation':<34} {'ok' if ok else 'FAILED: ' + '; '.join(problems)}", flush=True)
    return {"name": "device-validation", "ok": ok, "problems": problems}


def run_checks():
    g = torch.Generator().manual_seed(7)
    ragged = [0, 1, 2, 63, 64, 65] + torch.randint(100, 6000, (4,), generator=g).tolist()
    n_max = 6016  # a multiple of PAGE above every length
    # the timed shapes first, tuned: their calls are the ones the autotuner then keeps for the timing;
    # the semantic cases (ragged, paged, windows, forced splits) run the first config (no tuning compiles)
    cases = []
    for paged in (False, True):
        for Nq in (1, 5):
            cases.append(dict(name=f"timed/B64-32-8-32k/{'paged' if paged else 'contig'}/Nq{Nq}", B=64, Hq=32, Hkv=8,
                              Nq=Nq, lengths=[32768] * 64, n_max=32768, paged=paged))
            cases.append(dict(name=f"timed/B8-64-8-128k/{'paged' if paged else 'contig'}/Nq{Nq}", B=8, Hq=64, Hkv=8,
                              Nq=Nq, lengths=[131072] * 8, n_max=131072, paged=paged))
    for paged in (False, True):
        for Nq in (1, 5):
            for G in (4, 8):
                # each split form on both layouts and both Nq: the chosen count, none, fused (3), merge kernel (16)
                for splits in ((None, 3) if G == 4 else (1, 16)):
                    cases.append(dict(name=f"ragged/{'paged' if paged else 'contig'}/Nq{Nq}/G{G}/S{splits}", B=len(ragged),
                                      Hq=8 * G, Hkv=8, Nq=Nq, lengths=ragged, n_max=n_max, paged=paged, num_splits=splits,
                                      tuning="first"))
        cases.append(dict(name=f"window/{'paged' if paged else 'contig'}", B=len(ragged), Hq=32, Hkv=8, Nq=5,
                          lengths=ragged, n_max=n_max, paged=paged, window=(700, None), num_splits=4,
                          tuning="first"))
    out = []
    for i, c in enumerate(cases):
        out.append(check_case(seed=i, **c))
        release_memory()
    out.append(check_device_validation())
    return out


# ------------------------------------------------------------------------------------- time

#: How fast the driver finishes with device memory handed back to it (``torch.cuda.empty_cache``), the
#: rate ``release_wait_s`` waits by. Measured on the H200 (2026-12-01 19:28, ``bench/kvcache_order.py``):
#: after 16 GiB were handed back, a warm buffer's bf16 sum read 3.59–3.91 TB/s for ~40 ms instead of
#: 4.06–4.14, and the rows timed in the first 25–45 ms read ~1.10 ms where the same kernel read 0.96 — the
#: default row and the forced one alike, whichever came first (16 GiB in 25–45 ms: 0.4–0.7 TB/s of the
#: driver's work); with 0.2 s of waiting between the release and the first row, no row was slow; a new
#: allocation with nothing released before it slowed nothing. This rate is below every measured one.
RELEASE_BYTES_PER_S = 0.15e12


def release_wait_s(freed_bytes: int) -> float:
    """Seconds to wait after handing ``freed_bytes`` of device memory back to the driver before anything is
    timed: ``freed_bytes / RELEASE_BYTES_PER_S`` (8.6 GB, the K/V of B = 64, 32k: 57 ms)."""
    if freed_bytes < 0:
        raise ValueError(f"freed_bytes must be >= 0, got {freed_bytes}")
    return freed_bytes / RELEASE_BYTES_PER_S


def release_memory() -> float:
    """Hand the allocator's cached blocks back to the driver (``torch.cuda.empty_cache``), then wait
    ``release_wait_s`` of the bytes it released, so that no timed row runs beside the driver's work on
    them (the two-level effect of ``docs/kvcache.md``); returns the seconds waited. The bench releases
    memory only through here."""
    if torch.device(DEV).type != "cuda":
        return 0.0
    before = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    wait = release_wait_s(max(0, before - torch.cuda.memory_reserved()))
    time.sleep(wait)
    return wait


#: How long the bench idles after making new inputs (a shape's K/V copies, their paged copy) before the
#: first row times them, per byte: ``settle_s``. The H200 runs of 2026-12-01: a cache made right after a
#: release ran its first 25–55 ms slow (~1.10 ms against 0.96 at B = 8, 64/8, 128k), and the bench's default
#: row there stayed slow (1.085, the one-call row after it too) although ``release_memory`` had waited 57 ms
#: after the release before the cache was made (19:58): the wait has to come after the new memory, too.
#: 0.2 s of idling after making that 4.3 GB cache (after a 16 GiB release) left no row slow, and 1 s of
#: idling slowed nothing (19:28). This rate gives that 4.3 GB its 0.2 s and scales it by the bytes (not
#: measured at other sizes).
SETTLE_BYTES_PER_S = 20e9


def settle_s(new_bytes: int) -> float:
    """Seconds to idle after making ``new_bytes`` of inputs, before the first row times them:
    ``new_bytes / SETTLE_BYTES_PER_S`` (4.3 GB, the K/V of B = 8, 128k: 0.21 s)."""
    if new_bytes < 0:
        raise ValueError(f"new_bytes must be >= 0, got {new_bytes}")
    return new_bytes / SETTLE_BYTES_PER_S


def settle_new_memory(new_bytes: int) -> float:
    """Let the device finish what making ``new_bytes`` of inputs started (synchronise, then idle
    ``settle_s``); returns the seconds idled. Called once a shape's inputs, and again its paged copy, exist."""
    if torch.device(DEV).type != "cuda":
        return 0.0
    torch.cuda.synchronize()
    wait = settle_s(new_bytes)
    time.sleep(wait)
    return wait


class GraphTrace(NamedTuple):
    """Every block of a ``graph_trace``: ms per call in each timed block, the host clock (``time.time()``)
    when the first timed block started and when each ended (synchronised), and ms per call in each
    warm-up block replayed before them (empty unless ``warmup_ms``)."""

    samples: list
    start: float
    ends: list
    warmup: list


#: ``warmed``: the last ``SETTLE_WINDOW`` blocks within ``SETTLE_TOL`` of their fastest
SETTLE_WINDOW = 3
SETTLE_TOL = 0.01


def warmed(samples, elapsed_ms: float, *, min_ms: float, window: int = SETTLE_WINDOW, tol: float = SETTLE_TOL) -> bool:
    """Whether untimed warm-up replays may stop: after ``elapsed_ms`` ≥ 2·``min_ms`` in any case; after
    ``min_ms`` once the last ``window`` blocks (ms per call, in order) lie within ``tol`` (relative) of
    their fastest. (A slow level can hold steady for a whole row of 7 blocks — 1.077–1.082 ms against
    0.935, H200 2026-12-01 17:45 — so agreement alone does not end the warm-up: ``min_ms`` does too.)"""
    if window < 1 or tol < 0 or min_ms < 0:
        raise ValueError(f"warmed needs window >= 1, tol >= 0, min_ms >= 0, got {window}, {tol}, {min_ms}")
    if elapsed_ms >= 2 * min_ms:
        return True
    last = list(samples)[-window:]
    return elapsed_ms >= min_ms and len(last) == window and max(last) <= (1 + tol) * min(last)


def graph_trace(fns, *, blocks=7, block_ms=2.0, warmup_ms=0.0) -> GraphTrace:
    """GPU time per call, block by block. ``fns`` are zero-argument calls, one per copy of the inputs (so
    that calls one after another do not find K/V in L2); each runs once eagerly (compiles, autotuning),
    then all are captured into one CUDA graph, which is replayed back to back: ``blocks`` blocks of
    replays, each at least ``block_ms`` long. With ``warmup_ms``, blocks are first replayed untimed until
    ``warmed`` (at least that long, at most twice). No host work is timed: no validation, no launch cost."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns:
            f()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    torch.cuda.synchronize()
    inner = max(1, math.ceil(block_ms / max(a.elapsed_time(b), 1e-3)))

    def block():
        a.record()
        for _ in range(inner):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) / (inner * len(fns))
    warmup, t_warm = [], time.time()
    while warmup_ms and not warmed(warmup, 1e3 * (time.time() - t_warm), min_ms=warmup_ms):
        warmup.append(block())
    samples, ends, start = [], [], time.time()
    for _ in range(blocks):
        samples.append(block())
        ends.append(time.time())
    del g
    return GraphTrace(samples, start, ends, warmup)


def graph_ms(fns, *, blocks=7, block_ms=2.0) -> Spread:
    """``graph_trace``'s median block and range."""
    return spread(graph_trace(fns, blocks=blocks, block_ms=block_ms).samples)


def call_ms(fn, *, warmup=3, reps=15) -> Spread:
    """One call's latency, host work included: CUDA events around a single call after a sync (the
    device waits for the host's launches), over ``reps`` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        samples.append(a.elapsed_time(b))
    return spread(samples)


def host_us(fn, *, calls=20, blocks=3) -> Spread:
    """Host time of one call in µs: ``calls`` calls issued back to back without a sync, by the host
    clock (the launches only queue; the device may still be running them)."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return spread(samples)


def copy_tbps(nbytes=2 ** 31) -> float:
    """The device's copy bandwidth in TB/s, read + write bytes: a device-to-device copy of an
    ``nbytes`` buffer (several times the L2) into another, timed as ``graph_ms`` times."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=DEV).normal_()
    dst = torch.empty_like(src)
    t = graph_ms([lambda: dst.copy_(src)], block_ms=20.0)
    del src, dst
    release_memory()
    return 2 * nbytes / (t.median * 1e-3) / 1e12


def read_tbps(nbytes=2 ** 31) -> float:
    """The device's read bandwidth in TB/s: a float32 sum over an ``nbytes`` bf16 buffer (several times
    the L2; bytes read over time), timed as ``graph_ms`` times. The ceiling of a kernel that only reads,
    as decode does (the copy's read + write rate came out below what our decode kernel reads: 2.72 vs
    4.64 TB/s on the H200 of 2026-12-01)."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=DEV).normal_()
    t = graph_ms([lambda: src.sum(dtype=torch.float32)], block_ms=20.0)
    del src
    release_memory()
    return nbytes / (t.median * 1e-3) / 1e12


def sdpa_runner(backend_name, q, k, v):
    """A zero-argument SDPA call on one backend, and a note; enable_gqa if the backend takes it,
    else K/V expanded to Hq heads up front (outside the timing)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-flash": SDPBackend.FLASH_ATTENTION}[backend_name]
    F = torch.nn.functional.scaled_dot_product_attention

    def call(kk, vv, gqa):
        with sdpa_kernel([backend]):
            return F(q, kk, vv, is_causal=False, enable_gqa=gqa)
    try:
        call(k, v, True)
        torch.cuda.synchronize()
        return (lambda: call(k, v, True)), "enable_gqa"
    except (RuntimeError, ValueError, NotImplementedError):
        G = q.shape[1] // k.shape[1]
        ke, ve = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
        try:
            call(ke, ve, False)
            torch.cuda.synchronize()
        except (RuntimeError, ValueError, NotImplementedError) as e:
            return None, f"refused: {str(e).splitlines()[0][:80]}"
        return (lambda: call(ke, ve, False)), "K/V expanded to Hq heads"


#: forced split counts of the sweep
SWEEP = (1, 2, 4, 8, 16, 32, 64)
#: the batch sizes of the 16k sweep (Hq/Hkv = 32/8, decode and verify)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: the shapes (B, Hq, Hkv, Nq, Nk) whose kernel configs are forced one by one (``ours-configs``,
#: ``ours-paged-configs``) and that are timed at page 256 too (``ours-paged-big``): each costs compiles
CONFIG_SHAPES = {(b, 32, 8, nq, 16384) for b in (1, 8) for nq in (1, 5)} | {
    (64, 32, 8, nq, 32768) for nq in (1, 5)} | {(8, 64, 8, nq, 131072) for nq in (1, 5)}


def input_copies(kv_bytes: int, l2_bytes: int) -> int:
    """Copies of a shape's inputs one timed graph cycles through: enough that their K/V exceed 4× the L2
    (no call finds its cache there), at most 4 (1 when one copy already does)."""
    return max(1, min(4, math.ceil(4 * l2_bytes / kv_bytes)))


def _l2_bytes() -> int:
    """The device's L2 size in bytes (50 MiB where torch does not say)."""
    if torch.device(DEV).type != "cuda":
        return 50 * 2 ** 20
    return getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2 ** 20)


def chosen_config(q, k, v, lens, table=None):
    """(KernelConfig, load class) the default call runs at this shape (after a call): the autotuner's
    choice for its launch key, or the first candidate when nothing was tuned."""
    from flashproof.kernels.kvcache import api
    from flashproof.kernels.kvcache import config as kv_config
    from flashproof.kernels.kvcache import triton as kv_triton
    call = api.validate(q, k, v, cache_seqlens=lens, block_table=table, causal=True, window=None, scale=None,
                        num_splits=None, backend="triton")
    lp = kv_triton.call_plan(q, v, call)
    kw = kv_triton._CHOSEN.get(lp.tune_key, lp.first_kwargs)
    return kv_config.KernelConfig(kw["BLOCK_N"], kw["num_warps"], kw["num_stages"]), lp.load


def tuned_config(q, k, v, lens, table=None):
    """``chosen_config`` as text: "(BLOCK_N, warps, stages) load"."""
    c, load = chosen_config(q, k, v, lens, table)
    return f"{tuple(c)} {load}"


def allocs(q, S, Dv):
    """The buffers one call allocates: out and lse, and with S > 1 the one float32 buffer of the partials
    (outs and lses) and its lse slice."""
    B, Hq, Nq, _ = q.shape
    bufs = [torch.empty(B, Hq, Nq, Dv, dtype=q.dtype, device=q.device),
            torch.empty(B, Hq, Nq, dtype=torch.float32, device=q.device)]
    if S > 1:
        part = torch.empty(S * B * Hq * Nq * (Dv + 1), dtype=torch.float32, device=q.device)
        bufs += [part, part[S * B * Hq * Nq * Dv:]]
    return bufs


def time_shape(B, Hq, Hkv, Nq, Nk, providers, *, seed, copy, tuning="autotune"):
    """Every provider's timings at one shape: rows of (provider, method) with ms, the range, TB/s of
    K/V read and its percentage of ``copy`` (the measured copy bandwidth, TB/s). ``tuning`` as
    ``attention_with_kvcache``'s (the CPU smoke test runs ``"first"``)."""
    from flashproof.kernels.kvcache import api, plan
    from flashproof.kernels.kvcache import config as kv_config
    from flashproof.kernels.kvcache import triton as kv_triton
    kv_bytes = B * Hkv * Nk * 2 * D * 2
    n_copies = input_copies(kv_bytes, _l2_bytes())
    lens = torch.full((B,), Nk, dtype=torch.int32, device=DEV)
    sets = []
    for c in range(n_copies):
        k, v = make_cache(B, Hkv, Nk, [Nk] * B, seed=seed + 1000 * c, poison=None)
        sets.append((torch.randn(B, Hq, Nq, D, device=DEV, dtype=DT), k, v))
    settle_new_memory(n_copies * kv_bytes)
    rows = []
    chosen = plan.choose_num_splits(B, Hkv, Nk, api._sm_count(torch.device(DEV))).num_splits

    def add(provider, method, t, note=""):
        row = dict(B=B, Hq=Hq, Hkv=Hkv, Nq=Nq, Nk=Nk, provider=provider, method=method, ms=None, lo=None, hi=None,
                   tbps=None, pct_copy=None, note=note, copies=n_copies, chosen_splits=chosen)
        if isinstance(t, Spread):
            row.update(ms=t.median, lo=t.lo, hi=t.hi)
            if method in ("graph", "call"):   # the others are µs of host time
                row.update(tbps=kv_bytes / 1e12 / (t.median * 1e-3), pct_copy=100 * kv_bytes / 1e12 / (t.median * 1e-3) / copy)
        elif t is not None:
            row["note"] = (note + "; " if note else "") + str(t)
        rows.append(row)

    def guarded(fn):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - a provider that cannot be timed this way is a row note
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - the note below says what failed first
                pass
            return f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"

    if "ours" in providers:
        calls = [lambda q=q, k=k, v=v: attention_with_kvcache(q, k, v, cache_seqlens=lens, tuning=tuning)
                 for q, k, v in sets]
        default_calls = calls  # "ours-last" times them again after every other row
        t = guarded(lambda: graph_ms(calls))
        add("ours", "graph", t, f"num_splits={chosen}; config {tuned_config(*sets[0], lens)}")
        add("ours", "call", guarded(lambda: call_ms(calls[0])), f"num_splits={chosen}")
        add("ours", "host", guarded(lambda: host_us(calls[0])), "µs, whole call")
        q0, k0, v0 = sets[0]
        add("ours", "validate", guarded(lambda: host_us(lambda: api.validate(
            q0, k0, v0, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None, num_splits=None,
            backend="triton"))), "µs, validation alone")
        call0 = api.validate(q0, k0, v0, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                             num_splits=None, backend="triton")
        add("ours", "forward", guarded(lambda: host_us(lambda: kv_triton.forward(q0, k0, v0, call0, tuning=tuning))),
            "µs, launches and buffers (validated once)")
        add("ours", "allocs", guarded(lambda: host_us(lambda: allocs(q0, chosen, v0.shape[-1]))),
            "µs, the output and partial buffers alone")
    if "ours-other-merge" in providers and chosen > 1:   # A/B: the merge form the route did not choose
        same = chosen_config(*sets[0], lens)[0]     # the config the default ran (after its rows above)
        other = not kv_config.fuse_merge(chosen)
        fwd = []
        for q, k, v in sets:
            call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                                num_splits=None, backend="triton")
            fwd.append(lambda q=q, k=k, v=v, call=call, c=same: kv_triton.forward(q, k, v, call, tuning=tuning, config=c,
                                                                                  fused_merge=other))
        form = "merged in the last program (1 launch)" if other else "merge kernel (2 launches)"
        add("ours-other-merge", "graph", guarded(lambda: graph_ms(fwd)),
            f"{form}, the default's config {tuple(same)}, validated once")
        add("ours-other-merge", "forward", guarded(lambda: host_us(fwd[0])), f"µs, launches and buffers; {form}")
    if "ours-configs" in providers:   # every kernel config forced, at the chosen split count, GPU time
        for i, c in enumerate(kv_config.CONFIGS):
            fwd = []
            for q, k, v in sets:
                call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None,
                                    scale=None, num_splits=None, backend="triton")
                fwd.append(lambda q=q, k=k, v=v, call=call, c=c: kv_triton.forward(q, k, v, call, tuning=tuning,
                                                                                   config=c))
            add(f"ours-C{i}", "graph", guarded(lambda: graph_ms(fwd)), f"config {tuple(c)} forced")
    for name, page in (("ours-paged", PAGE), ("ours-paged-big", BIG_PAGE)):
        if name not in providers or Nk % page:
            continue
        paged = []
        for q, k, v in sets:
            kp, table = to_paged(k, page, seed=seed)
            vp, _ = to_paged(v, page, seed=seed)
            paged.append((q, kp, vp, table))
        settle_new_memory(n_copies * kv_bytes)
        calls = [lambda q=q, kp=kp, vp=vp, t=t: attention_with_kvcache(q, kp, vp, cache_seqlens=lens, block_table=t,
                                                                       tuning=tuning)
                 for q, kp, vp, t in paged]
        add(name, "graph", guarded(lambda: graph_ms(calls)),
            f"num_splits={chosen}, page {page}; config {tuned_config(*paged[0][:3], lens, paged[0][3])}")
        if name == "ours-paged" and "ours-paged-configs" in providers:
            for i, c in enumerate(kv_config.CONFIGS):
                fwd = []
                for q, kp, vp, t in paged:
                    call = api.validate(q, kp, vp, cache_seqlens=lens, block_table=t, causal=True, window=None,
                                        scale=None, num_splits=None, backend="triton")
                    fwd.append(lambda q=q, kp=kp, vp=vp, call=call, c=c: kv_triton.forward(
                        q, kp, vp, call, tuning=tuning, config=c))
                add(f"ours-paged-C{i}", "graph", guarded(lambda: graph_ms(fwd)), f"config {tuple(c)} forced, page {page}")
        del paged, calls
        release_memory()
    if "ours-splits" in providers:  # the split heuristic's inputs: every forced split count, GPU time
        for S in SWEEP:
            fwd = []
            for q, k, v in sets:
                call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None,
                                    scale=None, num_splits=S, backend="triton")
                fwd.append(lambda q=q, k=k, v=v, call=call: kv_triton.forward(q, k, v, call, tuning=tuning))
            add(f"ours-S{S}", "graph", guarded(lambda: graph_ms(fwd)), "forced split count")
    for name in ("sdpa-cudnn", "sdpa-flash"):
        if name in providers:
            runners = [sdpa_runner(name, q, k, v) for q, k, v in sets]
            if runners[0][0] is None:
                add(name, "graph", None, runners[0][1])
                continue
            fns = [r[0] for r in runners]
            add(name, "graph", guarded(lambda: graph_ms(fns)), runners[0][1])
            if name == "sdpa-cudnn":
                add(name, "call", guarded(lambda: call_ms(fns[0])), runners[0][1])
                add(name, "host", guarded(lambda: host_us(fns[0])), "µs, whole call")
    if "ours" in providers and "ours-last" in providers:  # the default calls again, after every other row
        add("ours-last", "graph", guarded(lambda: graph_ms(default_calls)), "the default call, timed again last")
    del sets
    release_memory()
    return rows


# ------------------------------------------------------------------------------------- tables

def _get(rows, shape, provider, method):
    return next((r for r in rows if (r["B"], r["Hq"], r["Hkv"], r["Nq"], r["Nk"]) == shape
                 and r["provider"] == provider and r["method"] == method), None)


def _ms(r, digits=3):
    return f"{r['ms']:.{digits}f}" if r and r["ms"] is not None else "-"


def _ratio(a, b):
    """a / b of two rows' ms, or '-'."""
    if not (a and b and a["ms"] and b["ms"]):
        return "-"
    return f"{a['ms'] / b['ms']:.2f}"


def print_tables(rows, shapes, copy):
    print(f"\nread bandwidth ceiling (the larger of a 2 GiB bf16 sum's read rate and a 2 GiB copy's read + write "
          f"rate): {copy:.2f} TB/s; 85 % of it: {0.85 * copy:.2f} TB/s")
    print("\nGPU time per call (CUDA graph replay, K/V in enough copies to exceed 4x L2; median of 7 blocks). "
          "cuDNN/ours >= 1: ours at least as fast; paged/contig <= 1.05: the paged target")
    print(f"| B | Hq/Hkv | Nq | Nk | S | ours ms | TB/s | % of read | cuDNN ms | cuDNN/ours | paged ms | paged/contig "
          f"| paged-{BIG_PAGE}/contig | FA2 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in shapes:
        o, c, p, pb, f = (_get(rows, s, n, "graph")
                          for n in ("ours", "sdpa-cudnn", "ours-paged", "ours-paged-big", "sdpa-flash"))
        if o is None:
            continue
        tb = f"{o['tbps']:.2f}" if o["tbps"] else "-"
        pc = f"{o['pct_copy']:.0f} %" if o["pct_copy"] else "-"
        print(f"| {s[0]} | {s[1]}/{s[2]} | {s[3]} | {s[4]} | {o['chosen_splits']} | {_ms(o)} | {tb} | {pc} | {_ms(c)} "
              f"| {_ratio(c, o)} | {_ms(p)} | {_ratio(p, o)} | {_ratio(pb, o)} | {_ms(f)} |")
    if any(r["provider"] == "ours-last" for r in rows):
        print("\nThe default call timed first (the table above) and again after every other row of its shape (GPU time)")
        print("| B | Hq/Hkv | Nq | Nk | ours first ms | ours last ms | last/first | cuDNN ms | cuDNN/ours last |")
        print("|---|---|---|---|---|---|---|---|---|")
        for s in shapes:
            o, last, c = (_get(rows, s, n, "graph") for n in ("ours", "ours-last", "sdpa-cudnn"))
            if o is None or last is None:
                continue
            print(f"| {s[0]} | {s[1]}/{s[2]} | {s[3]} | {s[4]} | {_ms(o)} | {_ms(last)} | {_ratio(last, o)} | {_ms(c)} "
                  f"| {_ratio(c, last)} |")
    print("\nOne call, host work included (CUDA events around a single call after a sync; median of 15), and "
          "the host time of a call (µs; median of 3 blocks of 20 calls issued back to back)")
    print("| B | Hq/Hkv | Nq | Nk | ours ms | ours GPU ms | cuDNN ms | cuDNN/ours | ours host µs | validation µs "
          "| forward µs | of which buffers µs | cuDNN host µs | other merge GPU ms | other merge forward µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in shapes:
        o, c, og = _get(rows, s, "ours", "call"), _get(rows, s, "sdpa-cudnn", "call"), _get(rows, s, "ours", "graph")
        oh, vh, ch = _get(rows, s, "ours", "host"), _get(rows, s, "ours", "validate"), _get(rows, s, "sdpa-cudnn", "host")
        fh, ah = _get(rows, s, "ours", "forward"), _get(rows, s, "ours", "allocs")
        mg, mf = _get(rows, s, "ours-other-merge", "graph"), _get(rows, s, "ours-other-merge", "forward")
        if o is None:
            continue
        print(f"| {s[0]} | {s[1]}/{s[2]} | {s[3]} | {s[4]} | {_ms(o)} | {_ms(og)} | {_ms(c)} | {_ratio(c, o)} "
              f"| {_ms(oh, 1)} | {_ms(vh, 1)} | {_ms(fh, 1)} | {_ms(ah, 1)} | {_ms(ch, 1)} | {_ms(mg)} | {_ms(mf, 1)} |")
    if any(r["provider"].startswith(("ours-C", "ours-paged-C")) for r in rows):
        from flashproof.kernels.kvcache.config import CONFIGS
        cols = [f"C{i}={c.block_n},{c.num_warps},{c.num_stages}" for i, c in enumerate(CONFIGS)]
        print("\nForced kernel configs (BLOCK_N, warps, stages) at the chosen split count (GPU time, graph replay, ms); "
              "default: what the default call ran (autotuned per tile and load class)")
        print(f"| B | Hq/Hkv | Nq | Nk | S | {' | '.join(cols)} | default ms | default config | "
              f"paged-{PAGE} {' | paged '.join(f'C{i}' for i in range(len(CONFIGS)))} |")
        print("|---|---|---|---|---|" + "---|" * (2 * len(cols) + 2))
        for s in shapes:
            got = [_get(rows, s, f"ours-C{i}", "graph") for i in range(len(CONFIGS))]
            pg = [_get(rows, s, f"ours-paged-C{i}", "graph") for i in range(len(CONFIGS))]
            o = _get(rows, s, "ours", "graph")
            if not any(got) and not any(pg):
                continue
            conf = o["note"].split("config ", 1)[-1] if o and "config " in o["note"] else "-"
            print(f"| {s[0]} | {s[1]}/{s[2]} | {s[3]} | {s[4]} | {o['chosen_splits'] if o else '-'} | "
                  + " | ".join(_ms(r) for r in got) + f" | {_ms(o)} | {conf} | " + " | ".join(_ms(r) for r in pg) + " |")
    if any(r["provider"].startswith("ours-S") for r in rows):
        cols = [f"S={n}" for n in SWEEP]
        print("\nForced split counts (GPU time, graph replay, ms); chosen: plan.choose_num_splits")
        print(f"| B | Hq/Hkv | Nq | Nk | {' | '.join(cols)} | best S | chosen S | chosen/best |")
        print("|---|---|---|---|" + "---|" * (len(cols) + 3))
        for s in shapes:
            got = {n: _get(rows, s, f"ours-S{n}", "graph") for n in SWEEP}
            ok = {n: r["ms"] for n, r in got.items() if r and r["ms"] is not None}
            if not ok:
                continue
            best = min(ok, key=ok.get)
            chosen = next(r for r in got.values() if r)["chosen_splits"]
            ratio = f"{ok[chosen] / ok[best]:.2f}" if chosen in ok else "-"
            print(f"| {s[0]} | {s[1]}/{s[2]} | {s[3]} | {s[4]} | " + " | ".join(_ms(got[n]) for n in SWEEP)
                  + f" | {best} | {chosen} | {ratio} |")
    # the targets, as the issue states them
    meet = []
    for s in shapes:
        o, c, p = (_get(rows, s, n, "graph") for n in ("ours", "sdpa-cudnn", "ours-paged"))
        if not (o and o["ms"]):
            continue
        meet.append(dict(shape=s, vs_cudnn=(c["ms"] / o["ms"]) if c and c["ms"] else None,
                         pct_copy=o["pct_copy"], paged=(p["ms"] / o["ms"]) if p and p["ms"] else None))
    n_c = sum(1 for m in meet if m["vs_cudnn"] is not None and m["vs_cudnn"] >= 1)
    long_ = [m for m in meet if m["shape"][4] >= 8192]
    n_bw = sum(1 for m in long_ if m["pct_copy"] is not None and m["pct_copy"] >= 85)
    n_p = sum(1 for m in meet if m["paged"] is not None and m["paged"] <= 1.05)
    print(f"\ntargets (GPU time): ours >= cuDNN at {n_c} of {len(meet)} shapes; >= 85 % of the read bandwidth at "
          f"{n_bw} of {len(long_)} shapes with Nk >= 8k; paged within 5 % of contiguous at {n_p} of {len(meet)}")
    return meet


def run_e2e(out_path):
    """examples/spec_e2e.py at its GPU size (speculation end to end); its result dict, or the error."""
    import importlib.util
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("spec_e2e", os.path.join(root, "examples", "spec_e2e.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    print("\n# speculation end to end (examples/spec_e2e.py)", flush=True)
    return mod.main(["--device", DEV, "--out", out_path])


class _Stopped(BaseException):
    """SIGTERM arrived (``scripts/gpu_kvcache.sh``'s time box) while shapes were being timed (a
    BaseException, so a provider's ``except Exception`` does not take it for that provider's failure)."""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/kvcache.json", help="path of the JSON result")
    p.add_argument("--skip-check", action="store_true", help="time only (the check normally runs first)")
    p.add_argument("--skip-e2e", action="store_true", help="leave out examples/spec_e2e.py")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no new shape once this many seconds have passed (the tables then say which are missing)")
    p.add_argument("--providers", default="ours,ours-paged,sdpa-cudnn,sdpa-flash,ours-splits,"
                   "ours-configs,ours-other-merge",
                   help="ours-paged-big: paged at page 256 (one table entry per key tile; at CONFIG_SHAPES); "
                   "ours-other-merge: with splits, the merge form config.fuse_merge did not choose; "
                   "ours-last: the default call timed again after every other row of its shape; "
                   "ours-splits: ours at every forced split count 1..64; ours-configs / ours-paged-configs: "
                   "every kernel config forced at the chosen split count (GPU time; the configs at the shapes "
                   "of CONFIG_SHAPES only)")
    args = p.parse_args(argv)
    providers = args.providers.split(",")
    t0 = time.time()
    checks = [] if args.skip_check else run_checks()
    t_check = time.time() - t0
    copy_rw = copy_tbps()
    copy = max(read_tbps(), copy_rw)   # the ceiling the "% of read" column is against
    print(f"copy bandwidth: {copy_rw:.2f} TB/s (read + write); read bandwidth ceiling: {copy:.2f} TB/s", flush=True)
    # by importance, so a budget that runs out leaves out the least: decode at the shapes and at
    # B = 1, then verify there, then the other small batches, then the large ones
    first = [(64, 32, 8, 1, 32768), (8, 64, 8, 1, 131072), (1, 32, 8, 1, 16384),
             (64, 32, 8, 5, 32768), (8, 64, 8, 5, 131072), (1, 32, 8, 5, 16384)]
    shapes = first + sorted((s for s in ((b, 32, 8, nq, 16384) for nq in (1, 5) for b in BATCHES) if s not in first),
                            key=lambda s: (s[0] > 8, s[0], s[3]))
    rows = []
    partial = os.path.splitext(args.out)[0] + "-partial.json"   # what a run cut short leaves
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    skipped = []

    def stop(signum, frame):   # a time box's SIGTERM: stop timing, still print the tables of what was timed
        raise _Stopped(signum)
    signal.signal(signal.SIGTERM, stop)
    try:
        for i, s in enumerate(shapes):
            if args.budget_s and time.time() - t0 > args.budget_s:
                skipped.append(s)
                continue
            here = [x for x in providers if s in CONFIG_SHAPES or x not in ("ours-configs", "ours-paged-configs",
                                                                              "ours-paged-big")]
            r = time_shape(*s, here, seed=100 + i, copy=copy)
            rows += r
            with open(partial, "w") as f:
                json.dump({"copy_tbps": copy, "checks": checks, "rows": rows}, f, default=str)
            print(f"B={s[0]:>3} Hq/Hkv={s[1]}/{s[2]} Nq={s[3]} Nk={s[4]:>6}  " + "  ".join(
                f"{x['provider']}/{x['method']}: {x['ms']:.3f}" if x["ms"] is not None else f"{x['provider']}: {x['note']}"
                for x in r), flush=True)
    except _Stopped:
        done = {(r["B"], r["Hq"], r["Hkv"], r["Nq"], r["Nk"]) for r in rows}
        skipped += [s for s in shapes if s not in done and s not in skipped]
        print(f"stopped by SIGTERM (the time box) during timing: the tables below hold the shapes timed so far",
              flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    t_time = time.time() - t0 - t_check
    if skipped:
        print(f"time budget of {args.budget_s} s spent: {len(skipped)} shapes not timed: {skipped}", flush=True)
    targets = print_tables(rows, shapes, copy)
    e2e = None
    if not args.skip_e2e:
        try:
            e2e = run_e2e(os.path.splitext(args.out)[0] + "-e2e.json")
        except Exception as e:  # noqa: BLE001 - reported, and the exit code says so
            import traceback
            traceback.print_exc()
            e2e = {"error": f"{type(e).__name__}: {e}"}
    failed = [c["name"] for c in checks if not c["ok"]]
    env = dict(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
               gpu=torch.cuda.get_device_name(0), sms=torch.cuda.get_device_properties(0).multi_processor_count,
               l2_bytes=_l2_bytes(), copy_tbps=copy_rw, read_ceiling_tbps=copy, check_s=round(t_check, 1), time_s=round(t_time, 1),
               total_s=round(time.time() - t0, 1))
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        pass
    from flashproof.kernels.kvcache import triton as kv_triton
    env["chosen_configs"] = [dict(key=[str(x) for x in key], kwargs={n: str(v) for n, v in kw.items()})
                             for key, kw in kv_triton._CHOSEN.items()]    # what the autotuner picked per launch key
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"env": env, "checks": checks, "failed_checks": failed, "rows": rows, "targets": targets,
                   "skipped_shapes": skipped, "e2e": e2e}, f, indent=1, default=str)
    e2e_failed = isinstance(e2e, dict) and "error" in e2e
    print(f"\nchecks: {len(checks) - len(failed)} of {len(checks)} passed"
          + (f"; FAILED: {', '.join(failed)}" if failed else "") + ("; e2e FAILED" if e2e_failed else "")
          + f"; check {env['check_s']} s, timing {env['time_s']} s, total {env['total_s']} s; wrote {args.out}")
    return 1 if failed or e2e_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
