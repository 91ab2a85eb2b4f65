"""KV-cache attention on one GPU: check bf16 correctness, then time ours against SDPA (one command).

    python3 bench/kvcache.py --out out/kvcache.json          # ~3 min on an H200

1. Check (bf16, before any timing): ``attention_with_kvcache`` — contiguous and paged (permuted
   page tables), ragged lengths with 0 and 1, NaN planted past every request's length, Nq = 1 and
   5, GQA 4 and 8, a window, num_splits forced and chosen — against the dense formula in float64
   (``flashproof.fuzz.oracle.masked_attention``), judged by the one tolerance rule
   (``flashproof.fuzz.tolerance.judge``, baseline: the same formula in bf16). Also the timed shapes.
2. Time (CUDA events, warm-up, median of reps): ours contiguous (the whole call; no host sync: lengths
   are checked on the device), ours-kernels (the same launches, validated once outside the timing), ours
   paged (page 64, permuted table), SDPA cuDNN and SDPA FA2 on the contiguous cache (enable_gqa; if a backend refuses it,
   K/V expanded to Hq heads before timing — the note says so). Decode Nq = 1 and verify Nq = 5 at
   B = 64, Hq/Hkv = 32/8, Nk = 32768 and B = 8, 64/8, Nk = 131072, and a B sweep 1…256 at 32/8,
   Nk = 16384. TB/s = bytes of K and V read (B·Hkv·Nk·(D + Dv)·2) / time.
   SDPA runs without the causal corner for Nq = 5 (its is_causal is top-left aligned); at Nq = 1
   bottom-right causal is no mask at all.

3. ours-S1 … ours-S64: ours-kernels at every forced split count, B ≤ 8 (to retune the split heuristic).
4. examples/spec_e2e.py at its GPU size (speculation end to end; ``--skip-e2e`` leaves it out).

Also checks the device-side validation (NaN rows for bad lengths/pages; the rest bitwise unchanged).
Prints tables; writes JSON (checks, rows, environment, e2e) to ``--out``. Exit code 1 if a check or
the e2e run failed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time


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
    for d in ("kernels", "verified", "spec", "proofs"):
        os.symlink(os.path.join(root, d), os.path.join(ns, d))
    sys.path.insert(0, os.path.dirname(ns))
    import flashproof.kernels.kvcache  # noqa: F401


_import_flashproof()

import torch  # noqa: E402

from flashproof.fuzz.oracle import masked_attention  # noqa: E402
from flashproof.fuzz.tolerance import judge, magnitudes, naive  # noqa: E402
from flashproof.kernels.kvcache import attention_with_kvcache  # noqa: E402

DEV = "cuda"
DT = torch.bfloat16
D = 128
PAGE = 64


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
        mags = m if mags is None else {x: max(mags[x], m[x]) for x in m}
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
                for splits in (None, 1, 3, 16):
                    cases.append(dict(name=f"ragged/{'paged' if paged else 'contig'}/Nq{Nq}/G{G}/S{splits}", B=len(ragged),
                                      Hq=8 * G, Hkv=8, Nq=Nq, lengths=ragged, n_max=n_max, paged=paged, num_splits=splits,
                                      tuning="first"))
        cases.append(dict(name=f"window/{'paged' if paged else 'contig'}", B=len(ragged), Hq=32, Hkv=8, Nq=5,
                          lengths=ragged, n_max=n_max, paged=paged, window=(700, None), num_splits=4,
                          tuning="first"))
    out = []
    for i, c in enumerate(cases):
        out.append(check_case(seed=i, **c))
        torch.cuda.empty_cache()
    out.append(check_device_validation())
    return out


# ------------------------------------------------------------------------------------- time

def time_ms(fn, *, warmup=3, reps=15):
    """Median over ``reps`` of CUDA-event times of ``fn()`` (after ``warmup`` calls)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


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


def time_shape(B, Hq, Hkv, Nq, Nk, providers, *, seed):
    k, v = make_cache(B, Hkv, Nk, [Nk] * B, seed=seed, poison=None)
    q = torch.randn(B, Hq, Nq, D, device=DEV, dtype=DT)
    lens = torch.full((B,), Nk, dtype=torch.int32, device=DEV)
    gbytes = B * Hkv * Nk * 2 * D * 2 / 1e9
    rows = []

    def add(provider, fn, note=""):
        if fn is None:
            rows.append(dict(B=B, Hq=Hq, Hkv=Hkv, Nq=Nq, Nk=Nk, provider=provider, ms=None, tbps=None, note=note))
            return
        ms = time_ms(fn)
        rows.append(dict(B=B, Hq=Hq, Hkv=Hkv, Nq=Nq, Nk=Nk, provider=provider, ms=ms, tbps=gbytes / ms, note=note))

    from flashproof.kernels.kvcache import plan
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    note = f"num_splits={plan.choose_num_splits(B, Hkv, Nk, sms).num_splits}"
    if "ours" in providers:
        add("ours", lambda: attention_with_kvcache(q, k, v, cache_seqlens=lens), note)
    if "ours-kernels" in providers:  # the same launches with the validation done once, untimed
        from flashproof.kernels.kvcache import api
        from flashproof.kernels.kvcache import triton as kv_triton
        call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                            num_splits=None, backend="triton")
        add("ours-kernels", lambda: kv_triton.forward(q, k, v, call, tuning="autotune"), note + ", validated once")
    if "ours-splits" in providers and B <= 8:  # the split heuristic's inputs: every forced split count
        from flashproof.kernels.kvcache import api
        from flashproof.kernels.kvcache import triton as kv_triton
        for S in (1, 2, 4, 8, 16, 32, 64):
            call = api.validate(q, k, v, cache_seqlens=lens, block_table=None, causal=True, window=None, scale=None,
                                num_splits=S, backend="triton")
            add(f"ours-S{S}", lambda call=call: kv_triton.forward(q, k, v, call, tuning="autotune"), "validated once")
    if "ours-paged" in providers:
        kp, table = to_paged(k, PAGE, seed=seed)
        vp, _ = to_paged(v, PAGE, seed=seed)
        add("ours-paged", lambda: attention_with_kvcache(q, kp, vp, cache_seqlens=lens, block_table=table),
            note + f", page {PAGE}")
        del kp, vp
    for name in ("sdpa-cudnn", "sdpa-flash"):
        if name in providers:
            fn, why = sdpa_runner(name, q, k, v)
            add(name, fn, why)
    del k, v
    torch.cuda.empty_cache()
    return rows


def run_e2e(out_path):
    """examples/spec_e2e.py at its GPU size (speculation end to end); its result dict, or the error."""
    import importlib.util
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("spec_e2e", os.path.join(root, "examples", "spec_e2e.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    print("\n# speculation end to end (examples/spec_e2e.py)", flush=True)
    return mod.main(["--device", DEV, "--out", out_path])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/kvcache.json", help="path of the JSON result")
    p.add_argument("--skip-check", action="store_true", help="time only (the check normally runs first)")
    p.add_argument("--skip-e2e", action="store_true", help="leave out examples/spec_e2e.py")
    p.add_argument("--providers", default="ours,ours-kernels,ours-paged,sdpa-cudnn,sdpa-flash,ours-splits",
                   help="ours-splits: ours-kernels at every forced split count 1..64 (B <= 8 only)")
    args = p.parse_args(argv)
    providers = args.providers.split(",")
    main_cols = [x for x in providers if x != "ours-splits"]
    t0 = time.time()
    checks = [] if args.skip_check else run_checks()
    t_check = time.time() - t0
    shapes = [(64, 32, 8, nq, 32768) for nq in (1, 5)] + [(8, 64, 8, nq, 131072) for nq in (1, 5)]
    shapes += [(b, 32, 8, nq, 16384) for nq in (1, 5) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    rows = []
    for i, s in enumerate(shapes):
        r = time_shape(*s, providers, seed=100 + i)
        rows += r
        print(f"B={s[0]:>3} Hq/Hkv={s[1]}/{s[2]} Nq={s[3]} Nk={s[4]:>6}  " + "  ".join(
            f"{x['provider']}: {x['ms']:.3f} ms {x['tbps']:.2f} TB/s" if x["ms"] is not None else f"{x['provider']}: -"
            for x in r), flush=True)

    def cell(s, prov):
        x = next((r for r in rows if (r["B"], r["Hq"], r["Hkv"], r["Nq"], r["Nk"]) == s and r["provider"] == prov), None)
        return f"{x['ms']:.3f} ms ({x['tbps']:.2f} TB/s)" if x and x["ms"] is not None else "-"
    print()
    print(f"| B | Hq/Hkv | Nq | Nk | {' | '.join(main_cols)} |")
    print("|---|---|---|---|" + "---|" * len(main_cols))
    for s in shapes:
        print(f"| {s[0]} | {s[1]}/{s[2]} | {s[3]} | {s[4]} | " + " | ".join(cell(s, p_) for p_ in main_cols) + " |")
    if "ours-splits" in providers:
        split_cols = [f"ours-S{n}" for n in (1, 2, 4, 8, 16, 32, 64)]
        print("\nforced split counts (launches only; the heuristic's choice is in each row's note):")
        print(f"| B | Nq | {' | '.join(split_cols)} |")
        print("|---|---|" + "---|" * len(split_cols))
        for s in shapes:
            if s[0] <= 8 and s[4] == 16384:
                print(f"| {s[0]} | {s[3]} | " + " | ".join(cell(s, c).split(" (")[0] for c in split_cols) + " |")
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
               gpu=torch.cuda.get_device_name(0), check_s=round(t_check, 1), total_s=round(time.time() - t0, 1))
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"env": env, "checks": checks, "failed_checks": failed, "rows": rows, "e2e": e2e}, f, indent=1,
                  default=str)
    e2e_failed = isinstance(e2e, dict) and "error" in e2e
    print(f"\nchecks: {len(checks) - len(failed)} of {len(checks)} passed"
          + (f"; FAILED: {', '.join(failed)}" if failed else "") + ("; e2e FAILED" if e2e_failed else "")
          + f"; total {env['total_s']} s; wrote {args.out}")
    return 1 if failed or e2e_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
