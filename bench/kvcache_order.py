"""The KV-cache bench's two-level effect, taken apart on one GPU (issue 18): one command.

    python3 bench/kvcache_order.py --out DIR/order.json [--clocks DIR/clocks.csv] [--budget-s 150]

The effect: in the H200 runs of 2026-12-01 17:33 and 17:45, the default row of B = 8, 64/8, Nk = 128k
(the first row timed at that shape, right after its cache was made) read 1.078–1.093 ms in every one
of its 7 blocks, while the same kernel configuration forced in later rows of the same shape read
0.934–0.969, and the first block of every paged row (made right after its own pages) read ~1.09 where
the others read 0.955. The host paths of the two rows launch the same kernels with the same
arguments (``tests/test_kvcache_paths.py``), so this run looks for what differs around them:

1. **Order**, at B = 8, 64/8, 128k, Nq = 1 and 5, the warm-up made explicit (the shape's check against
   the float64 formula on a throwaway cache: the default call's autotuning; the forced call once: its
   compile, its output bitwise equal to the default's), then graph-replay rows
   of the default call (D) and of the forced call of the configuration the default runs (F):
   ``A`` a fresh cache made right after 16 GiB were freed to the driver (as the bench's
   ``empty_cache`` between shapes does), D F D F D; ``B`` the same, F D F D; ``C`` a fresh cache from
   a new allocation with nothing freed before it, D F; ``C2`` a cache made in memory the allocator
   already held (no driver call), D F; ``I`` the same cache after 1 s idle, D F; ``L`` a long trace
   (40 blocks) of D right after a free and a fresh cache, then F.
2. **Eager**: back-to-back eager calls of D and of F (events around 10 calls), no graph.
3. **Bandwidth after a free**: a warm 1 GiB buffer's bf16 sum, one event pair per call, 200 calls back
   to back (each condition after 0.3 s of rest and 40 untimed calls): with nothing freed before, right
   after 16 GiB were freed to the driver, with nothing freed again, and right after 16 GiB were newly
   allocated (untouched); the read rate in the first 5 ms, the next 15, the rest.
4. **The 16k sweep**: B = 1, 2, 4, 8, 16, 32, 64, 128, 256 at 32/8, Nq = 1 and 5: each shape checked
   against the float64 formula by the one tolerance rule (``bench/kvcache.py``'s ``check_case``: also
   its autotuning, outside the timing), then, once the new inputs have settled (``bench/kvcache.py``'s
   ``settle_new_memory``), ours (graph replay), SDPA cuDNN, and ours again.
5. The copy-bandwidth anchor (``bench/kvcache.py``'s ``copy_tbps`` and ``read_tbps``) first.

Clocks: with ``--clocks`` (a CSV of ``nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,
temperature.gpu --format=csv -lms 50``, ``scripts/gpu_kvcache_order.sh`` writes it), each row gets
the median SM and memory clock and power of the samples inside it. Prints the tables; writes every
block of every row to ``--out``. Exit code 1 if a check failed. The default call is the module's
``attention_with_kvcache`` (the CPU test points it at the Triton interpreter).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time
from typing import NamedTuple

import torch

from flashproof.bench import kvcache as kvb
from flashproof.bench.stats import spread
from flashproof.kernels.kvcache import api, attention_with_kvcache
from flashproof.kernels.kvcache import triton as kv_triton

DEV = kvb.DEV
#: GiB freed to the driver before a "fresh after free" cache (the bench frees a shape's K/V, paged
#: copies and SDPA's buffers: 8.6 GB of K/V at B = 64, 32k, as much again paged)
FREE_GIB = 16


def allocate(gib: int):
    """``gib`` GiB of new device memory, untouched."""
    return torch.empty(gib * 2 ** 29, dtype=torch.int16, device=DEV)


def big_free(gib: int = FREE_GIB) -> None:
    """Allocate ``gib`` GiB, write them, free them to the driver (``empty_cache``), as between shapes."""
    x = allocate(gib)
    x.fill_(1)
    torch.cuda.synchronize()
    del x
    torch.cuda.empty_cache()


def fresh_cache(B, Hkv, Nk, seed):
    return kvb.make_cache(B, Hkv, Nk, [Nk] * B, seed=seed, poison=None)


class Providers(NamedTuple):
    """D: the default call; F: the forced call of the configuration the default runs (validated once)."""

    D: list
    F: list


def providers(q, k, v, lens, config) -> Providers:
    call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                        num_splits=None, backend="triton")
    return Providers([lambda: attention_with_kvcache(q, k, v, cache_seqlens=lens)],
                     [lambda: kv_triton.forward(q, k, v, call, tuning="autotune", config=config)])


def graph_row(rows, phase, label, fns, t_ref, *, blocks=7, warmup_ms=0.0, **kw):
    tr = kvb.graph_trace(fns, blocks=blocks, warmup_ms=warmup_ms)
    s = spread(tr.samples)
    row = dict(kw, phase=phase, n=sum(1 for r in rows if r["phase"] == phase and r.get("Nq") == kw.get("Nq")),
               label=label, median=s.median, lo=s.lo, hi=s.hi, first=tr.samples[0], last=tr.samples[-1],
               samples=tr.samples, warmup=tr.warmup, since_cache_ms=1e3 * (tr.start - t_ref),
               wall=(tr.start, tr.ends[-1]))
    rows.append(row)
    print(f"order Nq={kw.get('Nq')} {phase:<3} #{row['n']} {label}: median {s.median:.4f} ({s.lo:.4f}-{s.hi:.4f}) "
          f"first {tr.samples[0]:.4f} last {tr.samples[-1]:.4f}  {row['since_cache_ms']:.0f} ms after the cache"
          + (f"; {len(tr.warmup)} warm-up blocks: first {tr.warmup[0]:.4f}, fastest {min(tr.warmup):.4f}, last "
             f"{tr.warmup[-1]:.4f}" if tr.warmup else ""),
          flush=True)
    return row


def jit_entries() -> dict:
    """Triton's in-memory cache of ``kvcache_fwd`` on the current device: launch key (text) -> the compiled
    kernel's hash, warps, stages and shared memory (a different hash: a different binary); {} where it
    cannot be read (a diagnostic only: the run goes on)."""
    try:
        return _jit_entries()
    except Exception as e:  # noqa: BLE001 - Triton internals; the table then says "no new entry"
        print(f"jit_entries: Triton's kernel cache not readable ({type(e).__name__}: {e})", flush=True)
        return {}


def _jit_entries() -> dict:
    caches = getattr(kv_triton.kvcache_fwd, "device_caches", None)
    if caches is None or not torch.cuda.is_available():
        return {}
    dev = torch.cuda.current_device()
    if dev not in caches:
        return {}
    out = {}
    for key, kern in caches[dev][0].items():
        kern = kern.result() if hasattr(kern, "result") else kern
        md = kern.metadata
        out[str(key)] = dict(hash=str(kern.hash), num_warps=md.num_warps, num_stages=md.num_stages,
                             shared=getattr(md, "shared", None))
    return out


def eager_ms(fn, calls=10) -> float:
    """ms per call of ``calls`` eager calls issued back to back (events around all of them)."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / calls


class Record(NamedTuple):
    """What the run collects: the order rows, the eager times, the compiled kernels of D and F, the checks."""

    rows: list
    eager: list
    binaries: list
    checks: list


def order_experiment(Nq, rec: Record, *, long_trace, shape=(8, 64, 8, 131072)):
    """Parts 1 and 2 of the module docstring at ``shape`` (B, Hq, Hkv, Nk), appended to ``rec``. The warm-up
    is ``bench/kvcache.py``'s ``check_case`` of the shape (the default call, autotuned, against the float64
    formula); then D's output must equal F's bitwise (the same kernel on the same inputs)."""
    B, Hq, Hkv, Nk = shape
    rows = rec.rows
    lens = torch.full((B,), Nk, dtype=torch.int32, device=DEV)
    q = torch.randn(B, Hq, Nq, kvb.D, device=DEV, dtype=kvb.DT)
    before = jit_entries()
    t0 = time.time()
    rec.checks.append(kvb.check_case(f"order/B{B}-{Hq}-{Hkv}-{Nk}/Nq{Nq}", B=B, Hq=Hq, Hkv=Hkv, Nq=Nq,
                                     lengths=[Nk] * B, n_max=Nk, paged=False, seed=Nq))   # the explicit warm-up
    tune_s = time.time() - t0
    kvb.release_memory()
    k, v = fresh_cache(B, Hkv, Nk, seed=1)
    config, load = kvb.chosen_config(q, k, v, lens)
    p = providers(q, k, v, lens, config)
    tuned = jit_entries()
    t0 = time.time()
    f_out = p.F[0]()[0]                                        # the forced call's compile (its kwargs differ)
    torch.cuda.synchronize()
    f_s = time.time() - t0
    same_out = torch.equal(p.D[0](), f_out)
    rec.checks.append(dict(name=f"order/Nq{Nq}/default-equals-forced", ok=same_out))
    print(f"check {rec.checks[-1]['name']:<34} {'ok' if same_out else 'FAILED: the outputs differ'}", flush=True)
    forced = {key: e for key, e in jit_entries().items() if key not in tuned}
    # the binaries the autotuner built for this launch key with F's warps, stages and shared memory (the
    # configs differ in at least one of them): F runs the default's binary iff its hash is among them
    default = [e for key, e in tuned.items() if key not in before and any(
        (e["num_warps"], e["num_stages"], e["shared"]) == (f["num_warps"], f["num_stages"], f["shared"])
        for f in forced.values())]
    same = ({e["hash"] for e in forced.values()} <= {e["hash"] for e in default}) if forced and default else None
    print(f"order Nq={Nq}: warm-up (check, autotune) {tune_s:.1f} s, forced compile {f_s:.1f} s; "
          f"default runs {tuple(config)} ({load}); compiled kernels: default {[e['hash'][:12] for e in default]}, "
          f"forced {[e['hash'][:12] for e in forced.values()] or 'no new entry'}"
          + ("" if same is None else f"; same binary: {same}"), flush=True)
    info = dict(Nq=Nq, config=str(tuple(config)), load=load)
    rec.binaries.append(dict(Nq=Nq, default=default, forced=list(forced.values()), same_binary=same))
    del k, v, p, f_out

    def phase(name, seq, *, free, blocks=7, touch=False, wait_s=0.0, warmup_ms=0.0):
        if free:
            big_free()
        k, v = fresh_cache(B, Hkv, Nk, seed=len(rows) + 10)
        torch.cuda.synchronize()
        t_ref = time.time()
        for _ in range(3 if touch else 0):     # read every byte of the new cache three times
            k.sum(dtype=torch.float32), v.sum(dtype=torch.float32)
        torch.cuda.synchronize()
        time.sleep(wait_s)
        p = providers(q, k, v, lens, config)
        for label in seq:
            graph_row(rows, name, label, getattr(p, label), t_ref, blocks=blocks, warmup_ms=warmup_ms, **info)
        return k, v, p

    # A: as the bench: a free, a fresh cache, the default first
    k, v, p = phase("A", "DFDFD", free=True)
    del k, v, p
    # B: forced first
    k, v, p = phase("B", "FDFD", free=True)
    # C: a fresh allocation (B's cache still held, so new memory from the driver), nothing freed before it
    kc, vc, pc = phase("C", "DF", free=False)
    del kc, vc, pc
    # C2: memory the allocator already holds (C's blocks, no driver call), nothing freed
    kc, vc, pc = phase("C2", "DF", free=False)
    # I: the same cache after 1 s idle
    time.sleep(1.0)
    t_ref = time.time()
    for label in "DF":
        graph_row(rows, "I", label, getattr(pc, label), t_ref, **info)
    for label, fns in (("D", pc.D), ("F", pc.F), ("D", pc.D)):
        rec.eager.append(dict(info, label=label, ms=eager_ms(fns[0])))
        print(f"eager Nq={Nq} {label}: {rec.eager[-1]['ms']:.4f} ms per call", flush=True)
    del k, v, p, kc, vc, pc
    # T: as A, the new cache read three times before the first row; W: as A, 0.2 s of waiting instead
    k, v, p = phase("T", "DF", free=True, touch=True)
    del k, v, p
    k, v, p = phase("W", "DF", free=True, wait_s=0.2)
    del k, v, p
    # S: as A, each row first replaying untimed blocks for 200 ms and until the last 3 agree within 1 % (<= 400 ms)
    k, v, p = phase("S", "DFD", free=True, warmup_ms=200.0)
    del k, v, p
    if long_trace:
        k, v, p = phase("L", "D", free=True, blocks=40)
        graph_row(rows, "L", "F", p.F, time.time(), blocks=10, **info)
        del k, v, p
    kvb.release_memory()


def read_trace(buf, calls=200):
    """(ms since the first call's start, TB/s) of ``calls`` bf16 sums of ``buf`` issued back to back."""
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for a, b in ev:
        a.record()
        buf.sum(dtype=torch.float32)
        b.record()
    torch.cuda.synchronize()
    nbytes = buf.numel() * buf.element_size()
    return [(ev[0][0].elapsed_time(a), nbytes / (a.elapsed_time(b) * 1e-3) / 1e12) for a, b in ev]


def windows(trace) -> dict:
    """Mean TB/s of a ``read_trace`` in its first 5 ms, from 5 to 20 ms, after 20 ms; and its slowest call."""
    def mean(xs):
        return sum(xs) / len(xs) if xs else None
    return dict(first_5ms=mean([r for t, r in trace if t < 5]), ms_5_20=mean([r for t, r in trace if 5 <= t < 20]),
                after_20ms=mean([r for t, r in trace if t >= 20]), slowest=min(r for _, r in trace))


def scrub_probe(numel: int = 2 ** 29) -> list:
    """Part 3 of the module docstring (``numel`` bf16 elements in the read buffer: 1 GiB)."""
    buf = torch.empty(numel, dtype=torch.bfloat16, device=DEV).normal_()
    out = []
    for name in ("nothing freed", f"{FREE_GIB} GiB freed", "nothing freed again", f"{FREE_GIB} GiB allocated"):
        time.sleep(0.3)              # whatever the last condition started has finished
        read_trace(buf, 40)          # the device busy again (clocks up) before the condition
        held = None
        if "GiB freed" in name:
            big_free()
        elif "allocated" in name:
            held = allocate(FREE_GIB)
        torch.cuda.synchronize()
        tr = read_trace(buf)
        w = windows(tr)
        out.append(dict(condition=name, **w, trace=tr))
        print(f"read after {name}: " + "  ".join(f"{n} {x:.2f}" for n, x in w.items()), flush=True)
        del held
        kvb.release_memory()
    del buf
    kvb.release_memory()
    return out


def sweep(copy, deadline, rows, skipped, *, batches=kvb.BATCHES, nqs=(1, 5), Nk=16384):
    """Part 4 of the module docstring: appends the 16k sweep's rows to ``rows``, and to ``skipped`` the
    (B, Nq) of shapes not started by ``deadline`` (epoch seconds)."""
    for B, Nq in ((B, Nq) for B in batches for Nq in nqs):   # by batch: a budget that runs out loses the largest
        if time.time() > deadline:
            skipped.append((B, Nq))
            continue
        chk = kvb.check_case(f"sweep/B{B}/Nq{Nq}", B=B, Hq=32, Hkv=8, Nq=Nq, lengths=[Nk] * B, n_max=Nk,
                             paged=False, seed=B * 10 + Nq)
        kvb.release_memory()
        kv_bytes = B * 8 * Nk * 2 * kvb.D * 2
        lens = torch.full((B,), Nk, dtype=torch.int32, device=DEV)
        sets = []
        for c in range(kvb.input_copies(kv_bytes, kvb._l2_bytes())):
            k, v = fresh_cache(B, 8, Nk, seed=1000 * c + B)
            sets.append((torch.randn(B, 32, Nq, kvb.D, device=DEV, dtype=kvb.DT), k, v))
        kvb.settle_new_memory(len(sets) * kv_bytes)
        ours = [lambda q=q, k=k, v=v: attention_with_kvcache(q, k, v, cache_seqlens=lens) for q, k, v in sets]
        cud = [kvb.sdpa_runner("sdpa-cudnn", q, k, v) for q, k, v in sets]
        first = kvb.graph_ms(ours)
        cudnn = kvb.graph_ms([r[0] for r in cud]) if cud[0][0] is not None else None
        again = kvb.graph_ms(ours)
        config, load = kvb.chosen_config(*sets[0], lens)
        S = api.validate(*sets[0], cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                         num_splits=None, backend="triton").num_splits
        tb = kv_bytes / 1e12 / (again.median * 1e-3)
        row = dict(B=B, Nq=Nq, Nk=Nk, S=S, config=str(tuple(config)), load=load, check=chk["ok"],
                   ours_first=first._asdict(), ours=again._asdict(), cudnn=cudnn._asdict() if cudnn else None,
                   cudnn_note=cud[0][1], tbps=tb, pct_read=100 * tb / copy, copies=len(sets))
        rows.append(row)
        print(f"sweep B={B:>3} Nq={Nq} S={S:>2}: ours {first.median:.4f} then {again.median:.4f}, cuDNN "
              f"{cudnn.median if cudnn else float('nan'):.4f}, check {'ok' if chk['ok'] else 'FAILED'}", flush=True)
        del sets, ours, cud
        kvb.release_memory()


def read_clocks(path):
    """(epoch seconds, SM MHz, memory MHz, W) from an nvidia-smi CSV (header line, then samples); [] if absent."""
    if not path or not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            parts = [x.strip() for x in line.split(",")]
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                out.append((t, *(float(x.split()[0]) for x in parts[1:4])))
            except (ValueError, IndexError):
                continue
    return out


def clocks_in(samples, wall):
    """Median SM MHz, memory MHz and W of the clock samples between wall[0] and wall[1] (or the nearest one)."""
    inside = [s for s in samples if wall[0] <= s[0] <= wall[1]]
    if not inside and samples:
        inside = [min(samples, key=lambda s: abs(s[0] - (wall[0] + wall[1]) / 2))]
    if not inside:
        return None
    return tuple(sorted(s[i] for s in inside)[len(inside) // 2] for i in (1, 2, 3))


def _f(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"


def print_tables(copy_rw, read, rows, binaries, eager, probe, sweep_rows, clocks):
    print(f"\ncopy anchor: 2 GiB device copy {copy_rw:.2f} TB/s (read + write); 2 GiB bf16 sum {read:.2f} TB/s (read); "
          f"the read ceiling: {max(copy_rw, read):.2f} TB/s, 85 %: {0.85 * max(copy_rw, read):.2f}")
    print("\nOrder at B = 8, 64/8, Nk = 131072 (graph replay, 7 blocks of >= 2 ms unless noted; ms per call). "
          "D: default call; F: forced call of the default's config. A: fresh cache after a 16 GiB free, D first; "
          "B: the same, F first; C: fresh allocation, nothing freed; C2: reused memory; I: after 1 s idle; "
          "T: as A, the cache read 3 times first; W: as A, 0.2 s wait first; S: as A, each row warmed up first "
          "(untimed blocks for 200 ms and until 3 agree within 1 %, <= 400 ms; the count in the last column); L: long trace")
    print("| Nq | phase | # | row | median | lo | hi | first block | last block | ms after cache | SM MHz | mem MHz | W "
          "| warm-up blocks (first, last) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = clocks_in(clocks, r["wall"]) if clocks else None
        print(f"| {r['Nq']} | {r['phase']} | {r['n']} | {r['label']} | {_f(r['median'], 4)} | {_f(r['lo'], 4)} | "
              f"{_f(r['hi'], 4)} | {_f(r['first'], 4)} | {_f(r['last'], 4)} | {r['since_cache_ms']:.0f} | "
              + (" | ".join(f"{x:.0f}" for x in c) if c else "- | - | -")
              + (f" | {len(r['warmup'])} ({r['warmup'][0]:.4f}, {r['warmup'][-1]:.4f}) |" if r["warmup"] else " | - |"))
    print("\nD / F in each phase (the median of a D row over that of the F row: the first of each, the last of each)")
    print("| Nq | phase | D rows | F rows | first D / first F | last D / last F |")
    print("|---|---|---|---|---|---|")
    for Nq in sorted({r["Nq"] for r in rows}):
        for ph in dict.fromkeys(r["phase"] for r in rows if r["Nq"] == Nq):
            d = [r["median"] for r in rows if r["Nq"] == Nq and r["phase"] == ph and r["label"] == "D"]
            f = [r["median"] for r in rows if r["Nq"] == Nq and r["phase"] == ph and r["label"] == "F"]
            ratio = (lambda a, b: f"{a / b:.3f}" if a and b else "-")
            print(f"| {Nq} | {ph} | {', '.join(f'{x:.4f}' for x in d)} | {', '.join(f'{x:.4f}' for x in f)} | "
                  f"{ratio(d[0] if d else None, f[0] if f else None)} | {ratio(d[-1] if d else None, f[-1] if f else None)} |")
    for b in binaries:
        print(f"Nq = {b['Nq']}: the default's binary {[e['hash'][:12] for e in b['default']]}, the forced call's "
              f"{[e['hash'][:12] for e in b['forced']] or 'no new entry'}; same binary: {b['same_binary']}")
    if eager:
        print("\nEager calls back to back (ms per call, 10 calls between events; host launches included)")
        print("| Nq | row | ms |")
        print("|---|---|---|")
        for e in eager:
            print(f"| {e['Nq']} | {e['label']} | {e['ms']:.4f} |")
    if probe:
        print("\nRead rate of a warm 1 GiB buffer (bf16 sum, 200 calls back to back; TB/s)")
        print("| right after | first 5 ms | 5-20 ms | after 20 ms | slowest call |")
        print("|---|---|---|---|---|")
        for p in probe:
            print(f"| {p['condition']} | {_f(p['first_5ms'], 2)} | {_f(p['ms_5_20'], 2)} | {_f(p['after_20ms'], 2)} | "
                  f"{_f(p['slowest'], 2)} |")
    if sweep_rows:
        print("\n16k sweep, 32/8 (graph replay, ms; ours timed before and after cuDNN; TB/s and % from the second)")
        print("| B | Nq | S | config | check | ours 1st | ours 2nd | cuDNN | cuDNN/ours | TB/s | % of read |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sweep_rows:
            c = r["cudnn"]["median"] if r["cudnn"] else None
            print(f"| {r['B']} | {r['Nq']} | {r['S']} | {r['config']} {r['load']} | {'ok' if r['check'] else 'FAILED'} | "
                  f"{r['ours_first']['median']:.4f} | {r['ours']['median']:.4f} | {_f(c, 4)} | "
                  f"{_f(c / r['ours']['median'] if c else None, 2)} | {r['tbps']:.2f} | {r['pct_read']:.0f} % |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/kvcache_order.json")
    ap.add_argument("--clocks", default=None, help="nvidia-smi CSV written beside this run (see the docstring)")
    ap.add_argument("--budget-s", type=float, default=150.0, help="start no sweep shape after this many seconds")
    ap.add_argument("--skip-sweep", action="store_true")
    a = ap.parse_args(argv)
    t0 = time.time()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    copy_rw, read = kvb.copy_tbps(), kvb.read_tbps()
    print(f"copy {copy_rw:.2f} TB/s (read + write), read {read:.2f} TB/s", flush=True)
    rec = Record([], [], [], [])
    probe, sweep_rows, skipped = [], [], []

    def stop(signum, frame):   # the time box's SIGTERM: stop, still print the tables of what ran
        raise kvb._Stopped(signum)
    signal.signal(signal.SIGTERM, stop)
    try:
        order_experiment(1, rec, long_trace=True)
        order_experiment(5, rec, long_trace=False)
        probe = scrub_probe()
        if not a.skip_sweep:
            sweep(max(copy_rw, read), t0 + a.budget_s, sweep_rows, skipped)
    except kvb._Stopped:
        print("stopped by SIGTERM (the time box): the tables below hold what ran", flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if skipped:
        print(f"budget of {a.budget_s} s spent: sweep shapes (B, Nq) not timed: {skipped}", flush=True)
    clocks = read_clocks(a.clocks)
    print_tables(copy_rw, read, rec.rows, rec.binaries, rec.eager, probe, sweep_rows, clocks)
    checks = rec.checks + [dict(name=f"sweep/B{r['B']}/Nq{r['Nq']}", ok=r["check"]) for r in sweep_rows]
    failed = [c["name"] for c in checks if not c["ok"]]
    with open(a.out, "w") as f:
        json.dump(dict(copy_tbps=copy_rw, read_tbps=read, order=rec.rows, binaries=rec.binaries, eager=rec.eager,
                       checks=rec.checks, probe=probe, sweep=sweep_rows,
                       skipped=skipped, clocks=clocks,
                       gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
                       seconds=round(time.time() - t0, 1)), f, indent=1, default=str)
    print(f"\nchecks: {len(checks) - len(failed)} of {len(checks)} passed"
          + (f"; FAILED: {', '.join(failed)}" if failed else "") + f"; {time.time() - t0:.0f} s; wrote {a.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
