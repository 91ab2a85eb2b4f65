"""``flashproof bench``: TFLOP/s of our kernels (the default call: Gluon on sm_90 where it applies, else
Triton; autotuned) against SDPA's flash, cuDNN and efficient
backends and FlexAttention (compiled), in one run, on one GPU.

Problem family (the anchors of DESIGN.md): bf16, batch·seqlen = 16k tokens, model width 2048, so
B = 16384 / N and H = 2048 / d. Standard rows beside the anchors (issue 17): GQA as current models
use it (Hq / Hkv = 32 / 8 and 64 / 8, d = 128, causal, N = 8k and 16k; B = 16384 / N) and
(B, N, H, D) inputs (q, k, v and dO as transposed views of (B, N, H, D) tensors, what a fused QKV
projection gives; d = 128, N = 8k) next to the same shape contiguous. FLOPs: 4·B·Hq·N²·d, halved
when causal; the backward counts 2.5× the forward. Times: each provider's forward and backward are
timed in ``--rounds`` rounds (``triton.testing.do_bench`` medians), the providers' order rotated from
round to round (``interleaved``), and the row reports the median over the rounds (each round's ms are
kept in the row): one timing per provider in a fixed order had the first-timed provider of a shape read
up to 13 % slow on the H200 (BENCHMARKS.md, 2026-12-02 03:44: one forward kernel timed twice).
Before timing, every provider's forward on the timed inputs is compared with SDPA's math backend in
float32 on the first (batch, head) slice; a provider whose error is > 5× the bf16 SDPA-flash error
is reported as wrong instead of timed.
"""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from typing import NamedTuple

import torch

class Shape(NamedTuple):
    """One bench problem: head dim, length, causal; heads (Hq, Hkv), None for the width rule (Hq = Hkv =
    width / d); layout "bhnd" (contiguous (B, H, N, D)) or "bnhd" (transposed (B, N, H, D) views)."""

    d: int
    n: int
    causal: bool
    heads: tuple | None = None
    layout: str = "bhnd"


#: the anchor rows of issue 7 (d = 128: N = 4k, 8k non-causal, 8k causal; d = 64: 8k) inside the grid
#: the plot needs: N = 4k / 8k / 16k for each (d, causal) drawn
ANCHORS = [Shape(d, n, c) for d, c in ((128, False), (128, True), (64, False)) for n in (4096, 8192, 16384)]
#: issue 17's standard rows: GQA (Hq / Hkv = 4 and 8, causal) and (B, N, H, D) inputs (their contiguous
#: twins are anchors: 128:8192 causal and not)
GQA = [Shape(128, n, True, (hq, 8)) for hq in (32, 64) for n in (8192, 16384)]
STRIDED = [Shape(128, 8192, c, None, "bnhd") for c in (False, True)]
STANDARD = ANCHORS + GQA + STRIDED
LAYOUTS = ("bhnd", "bnhd")
#: "ours": the default call (backend="auto", deterministic=False: on sm_90 the Gluon kernels for the dense
#: d = 64 and 128 shapes, with the backward's dQ by fp32 TMA bulk reduce-adds, 5 N²d products; else Triton);
#: "ours-det": deterministic=True (bitwise reproducible: on sm_90 the Gluon backward with ordered dQ adds,
#: else the Triton two-kernel backward, 7 products)
PROVIDERS = ("ours", "ours-det", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "flex")


class Row(NamedTuple):
    d: int
    n: int
    causal: bool
    provider: str
    fwd_tflops: float
    bwd_tflops: float
    max_err: float
    note: str
    heads: str = ""  # "Hq/Hkv" of a GQA row, "" for the width rule
    layout: str = "bhnd"
    fwd_ms: tuple = ()  # each round's forward ms (fwd_tflops is from their median)
    bwd_ms: tuple = ()


def add_arguments(p):
    p.add_argument("--out", default="out/bench", help="folder for bench.json, bench.md and bench.png")
    p.add_argument("--shapes", default=None,
                   help="d:N:causal[:Hq/Hkv][:bnhd], comma-separated (default: the DESIGN.md anchors, then the "
                        "GQA and (B, N, H, D) rows), e.g. 128:4096:0,128:8192:1:64/8,128:8192:0:bnhd")
    p.add_argument("--providers", default=",".join(PROVIDERS), help=f"subset of {','.join(PROVIDERS)}")
    p.add_argument("--tokens", type=int, default=16384, help="batch x seqlen")
    p.add_argument("--width", type=int, default=2048, help="heads x head dim")
    p.add_argument("--no-bwd", action="store_true", help="time the forward only")
    p.add_argument("--rounds", type=int, default=3,
                   help="timing rounds per shape, the providers' order rotated each round (median reported)")
    p.add_argument("--sparse", type=float, default=0.0,
                   help="also time ours with a BlockSparseMask keeping this fraction of 128x128 tiles "
                        "(e.g. 0.1) against the dense call, for the N = 8192 shapes (issue 7: <= 15%% of dense "
                        "time at 0.1)")


def _shapes(spec):
    if not spec:
        return STANDARD
    out = []
    for item in spec.split(","):
        d, n, c, *extra = item.split(":")
        heads, layout = None, "bhnd"
        for e in extra:
            if e in LAYOUTS:
                layout = e
            elif "/" in e:
                hq, hkv = (int(x) for x in e.split("/"))
                if hkv < 1 or hq % hkv:
                    raise ValueError(f"shape {item!r}: heads Hq/Hkv need Hq a multiple of Hkv >= 1, got {e!r}")
                heads = (hq, hkv)
            else:
                raise ValueError(f"shape {item!r}: expected d:N:causal[:Hq/Hkv][:bhnd|bnhd], got the field {e!r}")
        out.append(Shape(int(d), int(n), c in ("1", "true", "yes", "causal"), heads, layout))
    return out


def _provider(name, causal, n, gqa=False):
    """A callable (q, k, v) -> out, or a reason string when unavailable (``gqa``: Hq > Hkv)."""
    F = torch.nn.functional
    if name in ("ours", "ours-det"):
        from flashproof.kernels import attention
        det = name == "ours-det"
        return lambda q, k, v: attention(q, k, v, causal=causal, deterministic=det)
    if name.startswith("sdpa-"):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
                   "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION}[name]

        def run(q, k, v):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        return run
    if name == "flex":
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        except ImportError as e:
            return f"FlexAttention unavailable: {e}"
        from torch import _dynamo
        from torch._functorch import config as functorch_config
        # The timed backward replays one graph (retain_graph=True), which donated buffers forbid
        # (seen on torch 2.11: the second compiled shape raised).
        functorch_config.donated_buffer = False
        _dynamo.config.recompile_limit = max(64, getattr(_dynamo.config, "recompile_limit", 8))
        _dynamo.config.cache_size_limit = max(64, _dynamo.config.cache_size_limit)
        compiled = torch.compile(flex_attention)
        bm = None
        if causal:
            bm = create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, n, n, device="cuda")
        return lambda q, k, v: compiled(q, k, v, block_mask=bm, enable_gqa=gqa)
    raise ValueError(f"unknown provider {name!r}")


def reference(q, k, v, causal):
    """What the rule judges a provider's output against on the first (batch, head) slice: the oracle's dense
    float64 formula (``flashproof.fuzz.oracle.masked_attention``), the naive evaluation in q's dtype (the rule's
    baseline) and the rule's magnitudes; once per shape."""
    from flashproof.fuzz.oracle import masked_attention
    from flashproof.fuzz.tolerance import magnitudes, naive
    n_q, n_k, d = q.shape[2], k.shape[2], q.shape[3]
    qs, ks, vs = (t[:1, :1].detach() for t in (q, k, v))
    allowed = torch.ones(1, 1, n_q, n_k, dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed.tril(n_k - n_q)
    scale = d ** -0.5
    with torch.no_grad():
        want, lse = masked_attention(qs.double(), ks.double(), vs.double(), allowed, scale)
        base, _, _ = naive(qs, ks, vs, allowed, scale)
        mags = magnitudes(qs.double(), ks.double(), vs.double(), torch.zeros_like(want), lse, scale, allowed=allowed)
    return want, base, mags


def out_verdict(fn, q, k, v, ref):
    """The tolerance rule's verdict (``flashproof.fuzz.tolerance.judge``) on ``fn``'s output for the first
    (batch, head) slice against ``reference(q, k, v, causal)``: the one oracle and rule of every check."""
    from flashproof.fuzz.tolerance import judge
    want, base, mags = ref
    with torch.no_grad():
        out = fn(q, k, v)[:1, :1]
    return judge("out", out, want, base, q.dtype, mags)


def _tensor(B, H, n, d, layout, g):
    """A (B, H, n, d) bf16 tensor: contiguous, or ("bnhd") a transposed view of a (B, n, H, d) one."""
    if layout == "bnhd":
        return torch.randn(B, n, H, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
    return torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16, generator=g)


def _plan_note(q, k, v, causal, deterministic):
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate
    route = dispatch.plan(validate(q, k, v, causal=causal, deterministic=deterministic), dispatch.device_of(q))
    return f"plan {route.forward}/{route.backward} "


def _gqa_or_repeated(fn, q, k, v, group):
    """(fn, "") when the SDPA backend takes enable_gqa for these inputs, else (fn on K/V repeated to Hq
    heads inside the timed call, a note saying so)."""
    try:
        with torch.no_grad():
            fn(q, k, v)
        return fn, ""
    except RuntimeError as e:
        return (lambda q, k, v: fn(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)),
                f"K/V repeated in the call (enable_gqa refused: {str(e)[:60]}) ")


def interleaved(units, rounds, clock):
    """{name: [clock(unit) of each round]} for ``units`` ({name: unit}), timed in ``rounds`` rounds, round r
    starting at the (r mod n)-th name and wrapping, so no name is always timed first."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = list(units)
    out = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names) if names else 0
        for n in names[k:] + names[:k]:
            out[n].append(clock(units[n]))
    return out


def bench_one(shape, providers, tokens, width, do_bwd, rounds=3):
    from triton.testing import do_bench
    d, n, causal, heads, layout = shape
    B = max(tokens // n, 1)
    Hq, Hkv = heads or (width // d, width // d)
    flops = 4 * B * Hq * n * n * d * (0.5 if causal else 1.0)
    g = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v = (_tensor(B, h, n, d, layout, g).requires_grad_() for h in (Hq, Hkv, Hkv))
    do = _tensor(B, Hq, n, d, layout, g)
    tag = dict(heads=f"{Hq}/{Hkv}" if heads else "", layout=layout)
    rows, ready, ref = {}, {}, reference(q, k, v, causal)
    for name in providers:  # each provider's call, judged against the oracle by the rule before any timing
        fn = _provider(name, causal, n, gqa=Hq != Hkv)
        if isinstance(fn, str):
            rows[name] = Row(d, n, causal, name, math.nan, math.nan, math.nan, fn, **tag)
            continue
        pre = ""
        if Hq != Hkv and name.startswith("sdpa-"):
            fn, pre = _gqa_or_repeated(fn, q, k, v, Hq // Hkv)
        if name in ("ours", "ours-det"):  # which kernels ran: the router's plan for this call
            pre = _plan_note(q, k, v, causal, name == "ours-det")
        try:
            verdict = out_verdict(fn, q, k, v, ref)
            note = pre if verdict.ok else (f"WRONG: out {verdict.reason} at {verdict.first}: error {verdict.error:.3g} "
                                           f"> bound {verdict.bound:.3g}; {pre}")
            ready[name] = (fn, fn(q, k, v) if do_bwd else None, verdict.error, note)
        except Exception as e:  # noqa: BLE001 - a third-party provider that cannot run this shape is a note; ours is WRONG
            why = f"{type(e).__name__}: {str(e)[:120]}"
            rows[name] = Row(d, n, causal, name, math.nan, math.nan, math.nan,
                             f"WRONG: raised {why}" if name.startswith("ours") else why, **tag)
        torch.cuda.synchronize()

    def clock(unit):
        fn, out = unit
        try:
            fwd = do_bench(lambda: fn(q, k, v), warmup=25, rep=100, return_mode="median")
            bwd = math.nan
            if out is not None:
                bwd = do_bench(lambda: out.backward(do, retain_graph=True), warmup=25, rep=100,
                               grad_to_none=[q, k, v], return_mode="median")
        except Exception as e:  # noqa: BLE001 - the row says what failed
            fwd = bwd = f"{type(e).__name__}: {str(e)[:120]}"
        torch.cuda.synchronize()
        return fwd, bwd

    times = interleaved({name: r[:2] for name, r in ready.items()}, rounds, clock)
    for name, (_, _, err, note) in ready.items():
        failed = [t for pair in times[name] for t in pair if isinstance(t, str)]
        if failed:
            rows[name] = Row(d, n, causal, name, math.nan, math.nan, math.nan, failed[0], **tag)
            continue
        fwd_ms = tuple(f for f, _ in times[name])
        bwd_ms = tuple(b for _, b in times[name])
        bwd = 2.5 * flops / statistics.median(bwd_ms) * 1e-9 if do_bwd else math.nan
        rows[name] = Row(d, n, causal, name, flops / statistics.median(fwd_ms) * 1e-9, bwd, err, note, **tag,
                         fwd_ms=fwd_ms, bwd_ms=bwd_ms if do_bwd else ())
    del ready
    torch.cuda.synchronize()
    return [rows[name] for name in providers]


def gpu_ms(fn, reps=5):
    """Mean GPU time of the kernels ``fn`` launches, per call, by kernel name (torch.profiler): the
    part of a wall-clock time that is not host overhead."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    by = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0)
        if t:
            by[e.key] = t / 1000 / reps
    return by


def host_us(fn, reps=50, warmup=5):
    """Host time of one call of ``fn`` in µs: ``reps`` calls enqueued back to back after ``warmup`` and a
    synchronisation, timed until the last returns (no synchronisation inside: what the host spends
    issuing the work, as long as the GPU does not fall behind by a full launch queue)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    us = (time.perf_counter() - t0) / reps * 1e6
    torch.cuda.synchronize()
    return us


def sparse_problem(d, n, frac=0.1, tokens=16384, width=2048, seed=3):
    """(q, k, v, mask, dO) of the block-sparse step the bench and the lab scripts time: bf16 (B, H, n, d)
    with B = tokens // n, H = width // d, q, k, v requiring grad, a BlockSparseMask of 128 × 128 tiles
    each present with chance ``frac`` (one draw per head, shared by the batch), dO = ones."""
    from flashproof.kernels import BlockSparseMask
    B, H = max(tokens // n, 1), width // d
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    t = torch.rand(1, H, -(-n // 128), -(-n // 128), device="cuda", generator=g) < frac
    return q, k, v, BlockSparseMask(t, 128, 128), torch.ones_like(q)


def bench_sparse(d, n, causal, frac, tokens, width):
    """Ours, forward + backward, dense and block-sparse (``frac`` of 128×128 tiles): a dict of wall-clock
    medians (``do_bench``) of the eager step (``dense_ms``, ``sparse_ms``), the kernels' GPU time
    (profiler: ``dense_gpu_ms``, ``sparse_gpu_ms``) and the step with its launches captured
    (``dense_graphed_ms``, ``sparse_graphed_ms``: the attention call wrapped by
    ``torch.cuda.make_graphed_callables``, PyTorch's API for captured training steps, forward and backward
    each replayed as one CUDA graph, so no host work of ours is timed), and ``tiles_present``.
    A capture that fails leaves its fields out and says why in ``graphed_error``."""
    from triton.testing import do_bench

    from flashproof.kernels import attention
    q, k, v, bm, ones = sparse_problem(d, n, frac, tokens, width)
    t = bm.tiles

    def stepper(call):
        def step():
            q.grad = k.grad = v.grad = None
            call(q, k, v).backward(ones)
        return step
    res = {"d": d, "n": n, "causal": causal, "tiles_present": t.float().mean().item()}
    for name, m in (("dense", None), ("sparse", bm)):
        step = stepper(lambda q_, k_, v_, m=m: attention(q_, k_, v_, causal=causal, mask=m))
        res[f"{name}_ms"] = do_bench(step, warmup=10, rep=50, grad_to_none=[q, k, v], return_mode="median")
        res[f"{name}_gpu_ms"] = sum(gpu_ms(step).values())
    try:
        for name, m in (("dense", None), ("sparse", bm)):
            graphed = torch.cuda.make_graphed_callables(
                lambda q_, k_, v_, m=m: attention(q_, k_, v_, causal=causal, mask=m), (q, k, v))
            res[f"{name}_graphed_ms"] = do_bench(stepper(graphed), warmup=10, rep=50, grad_to_none=[q, k, v],
                                                 return_mode="median")
            del graphed
    except Exception as e:  # noqa: BLE001 - a capture the harness could not make is reported, not a kernel finding
        res["graphed_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return res


def sparse_table(rows):
    """The block-sparse rows (``bench_sparse`` dicts) as a markdown table: eager and captured wall-clock,
    and GPU time, each as block-sparse over dense."""
    lines = ["| d | N | causal | tiles present | dense ms | block-sparse ms | wall-clock ratio | GPU-time ratio | "
             "dense graphed ms | block-sparse graphed ms | graphed ratio |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        graphed = (f"{r['dense_graphed_ms']:.3f} | {r['sparse_graphed_ms']:.3f} | "
                   f"{r['sparse_graphed_ms'] / r['dense_graphed_ms']:.3f}") if "sparse_graphed_ms" in r else \
            f"- | - | {r.get('graphed_error', '-')}"
        lines.append(f"| {r['d']} | {r['n']} | {'yes' if r['causal'] else 'no'} | {r['tiles_present']:.3f} | "
                     f"{r['dense_ms']:.3f} | {r['sparse_ms']:.3f} | {r['sparse_ms'] / r['dense_ms']:.3f} | "
                     f"{r['sparse_gpu_ms'] / r['dense_gpu_ms']:.3f} | {graphed} |")
    return "\n".join(lines)


def table(rows):
    lines = ["| d | N | causal | Hq/Hkv | layout | provider | fwd TFLOP/s | bwd TFLOP/s | max err vs fp32 | note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.d} | {r.n} | {'yes' if r.causal else 'no'} | {r.heads or '='} | {r.layout} | "
                     f"{r.provider} | {r.fwd_tflops:.0f} | {r.bwd_tflops:.0f} | {r.max_err:.2e} | {r.note} |")
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    rows = [r for r in rows if not r.heads and r.layout == "bhnd"]  # the width-rule grid only
    groups = sorted({(r.d, r.causal) for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    for ax, (d, causal) in zip(axes[0], groups):
        for prov in dict.fromkeys(r.provider for r in rows):
            pts = sorted((r.n, r.fwd_tflops, r.bwd_tflops) for r in rows if (r.d, r.causal, r.provider) == (d, causal, prov))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{prov} fwd")
            ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="x", linestyle="--", label=f"{prov} bwd")
        ax.set(title=f"d={d} causal={causal}", xlabel="N", ylabel="TFLOP/s", xscale="log")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return None


def run(args) -> int:
    if not torch.cuda.is_available():
        print("flashproof bench: needs a CUDA GPU (none found)")
        return 2
    import triton
    os.makedirs(args.out, exist_ok=True)
    providers = [p for p in args.providers.split(",") if p]
    for p in providers:
        if p not in PROVIDERS:
            raise ValueError(f"unknown provider {p!r}: expected some of {PROVIDERS}")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    rows = []
    for shape in _shapes(args.shapes):
        t0 = time.time()
        rows += bench_one(shape, providers, args.tokens, args.width, not args.no_bwd, args.rounds)
        print(f"{shape}: {time.time() - t0:.1f}s", flush=True)
        print(table(rows[-len(providers):]).split("\n", 2)[2], flush=True)
        with open(os.path.join(args.out, "bench.json"), "w") as f:  # written as we go: partial runs survive
            json.dump({"meta": meta, "rows": [r._asdict() for r in rows]}, f, indent=1)
    text = table(rows)
    sparse = []
    if args.sparse > 0:
        plain = [x for x in _shapes(args.shapes) if x.heads is None and x.layout == "bhnd"] or _shapes(args.shapes)[:1]
        for d, n, causal, _, _ in [x for x in plain if x.n == 8192] or plain[:1]:
            sparse.append(bench_sparse(d, n, causal, args.sparse, args.tokens, args.width))
            with open(os.path.join(args.out, "bench.json"), "w") as f:
                json.dump({"meta": meta, "rows": [r._asdict() for r in rows], "sparse": sparse}, f, indent=1)
        text += "\n\n" + sparse_table(sparse)
    print(json.dumps(meta))
    print(text)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"{json.dumps(meta)}\n\n{text}\n")
    msg = plot(rows, os.path.join(args.out, "bench.png"))
    if msg:
        print(msg)
    return 1 if any(r.note.startswith("WRONG") for r in rows if r.provider.startswith("ours")) else 0


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(prog="python -m flashproof.bench.attention", description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
