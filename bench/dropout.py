"""Dropout's cost on a GPU: attention() with and without dropout beside SDPA's own dropout backends, one
table, after checking our dropout against the reference (``python -m flashproof.bench.dropout [--out DIR]
[--seconds S]``; with the CUDA dropout tests and the rest of issue 16's GPU tests: ``bash scripts/gpu_ecosystem.sh OUTDIR``).

Check, per shape, before any timing: ours-triton with dropout on one (batch, 2 heads) problem of the
shape (bf16, forward and backward) against the float64 dense oracle (``fuzz.oracle.masked_attention``)
given the same keep bits (``dropout_mask``, drawn on the GPU) and the realised keep probability, under
the one tolerance rule (``fuzz.tolerance.judge``; baseline: the dense formula in bf16); plus the kept
fraction of the allowed pairs. A failed check is printed as FAIL with the first offending entry.

Rows, per shape (bf16, batch·seqlen = 16k tokens, width 2048 as DESIGN.md's anchors, N = 4096 so
that SDPA's math backend, which materialises the (B, H, N, N) scores, fits and finishes):

* ours-triton p=0 and p=P: the Triton kernels, forward and backward (the cost of drawing the Philox
  bits in the forward and regenerating them in both backward kernels);
* ours-auto p=0: the route a call without dropout takes (Gluon on sm_90 at d = 128);
* sdpa-flash, sdpa-efficient, sdpa-math at p=P (``torch.nn.attention.sdpa_kernel`` picks each; cuDNN's
  SDPA takes no dropout).

Bounded work: our kernels run with ``tuning="first"`` by default (the first configuration that fits;
``--tuning autotune`` times every configuration of each new key, minutes of compiling on a fresh
machine), each measurement is ``triton.testing.do_bench`` with a short warm-up and repetition window,
and ``--seconds`` (default 100) is the timed rows' budget (the checks run first, outside it): once it is
spent, the remaining rows are printed as skipped, never timed. Each row is printed (flushed) as soon as it is measured, with the
wall time it took (the first row of a shape includes compiling). Times are medians; FLOPs
4·B·H·N²·d (halved when causal), the backward counted as 2.5× the forward. The last table puts ours
(Triton, dropout) beside SDPA's flash backend with the same p, as ratios. Writes dropout.json to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch

#: (head dim, sequence length, causal)
SHAPES = [(128, 4096, False), (128, 4096, True), (64, 4096, False)]
TOKENS, WIDTH = 16384, 2048
HEADER = (f"{'d':>4} {'N':>5} {'causal':>6}  {'provider':<20} {'fwd ms':>8} {'bwd ms':>8} {'fwd TFLOP/s':>11} "
          f"{'bwd TFLOP/s':>11} {'wall s':>6}  note")


def _time(fn):
    from triton.testing import do_bench
    return do_bench(fn, warmup=5, rep=25)


def _sdpa(backend_name, p):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def call(q, k, v, c):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=c, dropout_p=p)
    return call


def providers(p, tuning):
    """{row name: fn(q, k, v, causal) -> out}."""
    from flashproof.kernels import attention

    return {
        "ours-triton p=0": lambda q, k, v, c: attention(q, k, v, causal=c, backend="triton", tuning=tuning),
        f"ours-triton p={p}": lambda q, k, v, c: attention(q, k, v, causal=c, backend="triton", tuning=tuning,
                                                            dropout_p=p, dropout_seed=1),
        "ours-auto p=0": lambda q, k, v, c: attention(q, k, v, causal=c, tuning=tuning),
        f"sdpa-flash p={p}": _sdpa("FLASH_ATTENTION", p),
        f"sdpa-efficient p={p}": _sdpa("EFFICIENT_ATTENTION", p),
        f"sdpa-math p={p}": _sdpa("MATH", p),
    }


def _fmt(r) -> str:
    num = lambda x, w, f: f"{x:>{w}{f}}" if math.isfinite(x) else f"{'-':>{w}}"  # noqa: E731
    return (f"{r['d']:>4} {r['n']:>5} {str(r['causal']):>6}  {r['provider']:<20} {num(r['fwd_ms'], 8, '.3f')} "
            f"{num(r['bwd_ms'], 8, '.3f')} {num(r['fwd_tflops'], 11, '.1f')} {num(r['bwd_tflops'], 11, '.1f')} "
            f"{r['wall_s']:>6.1f}  {r['note']}")


NAMES = ("out", "lse", "dq", "dk", "dv")


def check(d, n, causal, p, tuning, seed=1, device="cuda"):
    """ours-triton with dropout at (1, 2, n, d) bf16 against the float64 dense oracle with the same bits:
    (status "ok" | "FAIL", text). The tolerance rule judges out, lse, dq, dk, dv."""
    from flashproof.fuzz.oracle import masked_attention
    from flashproof.fuzz.tolerance import judge, magnitudes, naive
    from flashproof.kernels import attention
    from flashproof.kernels.attention import dropout_mask
    from flashproof.kernels.attention.dropout import realised_p

    B, H, scale = 1, 2, d ** -0.5
    g = torch.Generator(device=device).manual_seed(seed)
    q, k, v, do = (torch.randn(B, H, n, d, device=device, generator=g).to(torch.bfloat16) for _ in range(4))
    xs = [t.clone().requires_grad_() for t in (q, k, v)]
    res = attention(*xs, causal=causal, return_lse=True, backend="triton", tuning=tuning, dropout_p=p,
                    dropout_seed=seed)
    got = (res.out, res.lse, *torch.autograd.grad(res.out, xs, do))
    allowed = torch.ones(B, H, n, n, dtype=torch.bool, device=device)
    if causal:
        allowed = allowed.tril()  # Nq = Nk: bottom-right and top-left alignment agree
    keep_p = 1.0 - realised_p(p)
    keep = dropout_mask(seed, p, (B, H, n, n), device=device)
    r = keep.to(torch.float64) / keep_p
    x64 = [t.double().requires_grad_() for t in (q, k, v)]
    out64, lse64 = masked_attention(*x64, allowed, scale, r)
    want = (out64, lse64, *torch.autograd.grad(out64, x64, do.double()))
    base = naive(q, k, v, allowed, scale, do, drop=r)
    mags = magnitudes(*(t.double() for t in (q, k, v, do)), lse64, scale, drop=1.0 / keep_p)
    verdicts = [judge(name, a, w.detach().cpu(), b, torch.bfloat16, mags)
                for name, a, w, b in zip(NAMES, got, want, (base[0], base[1], *base[2]))]
    kept = (keep & allowed).sum().item() / allowed.sum().item()
    ok = all(x.ok for x in verdicts)
    text = " ".join(f"{x.name} {x.error:.2g}/{x.bound:.2g}" + ("" if x.ok else f" FAIL({x.reason} at {x.first})")
                    for x in verdicts)
    return ("ok" if ok else "FAIL"), f"error/bound: {text}; kept {kept:.5f} (keep probability {keep_p:.5f})"


def measure(d, n, causal, name, fn):
    """One row: forward and backward medians of ``fn`` at the shape, or NaN with a note."""
    B, H = TOKENS // n, WIDTH // d
    flops = 4 * B * H * n * n * d * (0.5 if causal else 1.0)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    xs = [t.requires_grad_() for t in (q, k, v)]
    row = dict(d=d, n=n, causal=causal, provider=name, B=B, H=H)
    try:
        t_f = _time(lambda: fn(*xs, causal))
        out = fn(*xs, causal)
        t_b = _time(lambda: torch.autograd.grad(out, xs, do, retain_graph=True))
        row.update(fwd_ms=t_f, bwd_ms=t_b, fwd_tflops=flops / t_f * 1e-9, bwd_tflops=2.5 * flops / t_b * 1e-9, note="")
    except Exception as e:  # noqa: BLE001 - a provider that cannot run this shape is reported, not fatal
        row.update(fwd_ms=float("nan"), bwd_ms=float("nan"), fwd_tflops=float("nan"), bwd_tflops=float("nan"),
                   note=f"{type(e).__name__}: {e}".splitlines()[0][:100])
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--p", type=float, default=0.1)
    ap.add_argument("--tuning", choices=("first", "autotune"), default="first")
    ap.add_argument("--seconds", type=float, default=100.0,
                    help="budget of the timed rows, after the checks (rows past it are skipped)")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench.dropout needs a CUDA device")
    if not 0.0 < a.p < 1.0 or a.seconds <= 0:
        raise SystemExit(f"--p must lie in (0, 1) and --seconds be > 0, got {a.p}, {a.seconds}")
    print(f"dropout bench: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, p={a.p}, ours with "
          f"tuning={a.tuning!r}, budget {a.seconds:.0f} s", flush=True)
    checks = []
    for d, n, causal in SHAPES:
        t0 = time.perf_counter()
        try:
            status, text = check(d, n, causal, a.p, a.tuning)
        except Exception as e:  # noqa: BLE001 - a check that cannot run is a harness error, not a kernel finding
            status, text = "HARNESS ERROR", f"{type(e).__name__}: {e}".splitlines()[0][:200]
        checks.append(dict(d=d, n=n, causal=causal, status=status, text=text))
        print(f"check d={d} N={n} causal={causal}: {status}  {text} ({time.perf_counter() - t0:.1f} s)", flush=True)
        torch.cuda.empty_cache()
    t_start = time.perf_counter()  # --seconds budgets the timed rows
    print(HEADER, flush=True)
    rows = []
    for d, n, causal in SHAPES:
        for name, fn in providers(a.p, a.tuning).items():
            t0 = time.perf_counter()
            if t0 - t_start > a.seconds:
                row = dict(d=d, n=n, causal=causal, provider=name, fwd_ms=float("nan"), bwd_ms=float("nan"),
                           fwd_tflops=float("nan"), bwd_tflops=float("nan"), note="skipped: time budget spent")
            else:
                row = measure(d, n, causal, name, fn)
            row["wall_s"] = time.perf_counter() - t0
            rows.append(row)
            print(_fmt(row), flush=True)
            torch.cuda.empty_cache()
    print(f"total {time.perf_counter() - t_start:.1f} s", flush=True)
    print("\n| d | N | causal | provider | fwd TFLOP/s | bwd TFLOP/s | note |\n|---|---|---|---|---|---|---|")
    for r in rows:
        f = lambda x: f"{x:.1f}" if math.isfinite(x) else "–"  # noqa: E731
        print(f"| {r['d']} | {r['n']} | {'yes' if r['causal'] else 'no'} | {r['provider']} | {f(r['fwd_tflops'])} | "
              f"{f(r['bwd_tflops'])} | {r['note']} |")
    print(f"\n| d | N | causal | ours/flash fwd | ours/flash bwd | check |\n|---|---|---|---|---|---|")
    for d, n, causal in SHAPES:
        by = {r["provider"]: r for r in rows if (r["d"], r["n"], r["causal"]) == (d, n, causal)}
        ours, flash = by.get(f"ours-triton p={a.p}"), by.get(f"sdpa-flash p={a.p}")

        def ratio(key):
            x = ours[key] / flash[key] if ours and flash else float("nan")
            return f"{x:.2f}" if math.isfinite(x) else "–"
        status = next(c["status"] for c in checks if (c["d"], c["n"], c["causal"]) == (d, n, causal))
        print(f"| {d} | {n} | {'yes' if causal else 'no'} | {ratio('fwd_tflops')} | {ratio('bwd_tflops')} | {status} |")
    sys.stdout.flush()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "dropout.json"), "w") as f:
        json.dump({"p": a.p, "tuning": a.tuning, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "checks": checks, "rows": rows}, f, indent=1)
    statuses = {c["status"] for c in checks}
    if "FAIL" in statuses:
        raise SystemExit(1)  # the kernel deviated from the reference
    if statuses != {"ok"}:
        raise SystemExit(4)  # a check could not run


if __name__ == "__main__":
    main()
