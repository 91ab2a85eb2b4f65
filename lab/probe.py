"""Timings behind the kernels' design, one CUDA run: ``python lab/probe.py --out DIR`` (lab code: not
installed; it may reach into the kernels' internals).

Parts (``--parts``): ``fwd`` — the Triton forward against SDPA's cuDNN backend in one process, with its
max error against SDPA's math backend in float32; ``sparse`` — block-sparse (10 % of 128×128 tiles)
broken down: forward alone and forward + backward, dense and sparse, wall time (``do_bench``) next to
the kernels' GPU time (``torch.profiler``), and the walk-list build alone; ``host`` — cProfile of the
block-sparse call's host side; ``launch`` — its enqueue time with and without the direct launch of
known autotuning keys; ``gluon`` — the Gluon forward's wall, GPU and host times, with and without
autograd, next to the Triton forward (``backend="gluon"`` vs ``"triton"``); ``gluon-bwd`` — the
backward paths (the Triton deterministic backward, the Gluon backward with its vector dQ reductions)
next to cuDNN's.

The variants measured slower and deleted (FWD_LAZY, FWD_POLY, BWD_POLY, the atomic-dQ Triton kernel,
the Gluon forward's ping-pong, the Gluon backward's scalar dQ atomics) had their A/B parts here until
commit 62d839a; BENCHMARKS.md keeps the numbers. Prints markdown tables and writes ``probe.json``;
autotuned (``tuning="autotune"``, the default).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time

import torch


def _qkv(d, n, tokens=16384, width=2048, seed=0):
    B, H = max(tokens // n, 1), width // d
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3)], B, H


def _err_vs_oracle(out, q, k, v, causal):
    """|out − the oracle| on the first (batch, head) slice (``bench.attention.out_verdict``: the oracle's dense
    float64 formula, judged by the tolerance rule); a NaN where the rule refuses it."""
    from flashproof.bench.attention import out_verdict, reference
    verdict = out_verdict(lambda *_: out, q, k, v, reference(q, k, v, causal))
    return verdict.error if verdict.ok else float("nan")


def _cudnn(q, k, v, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def forward_triton(shapes, rows):
    """The Triton forward (autotuned) next to SDPA's cuDNN backend, per shape."""
    from triton.testing import do_bench

    from flashproof.kernels.attention.triton import host as at
    from flashproof.kernels import attention
    for d, n, causal in shapes:
        (q, k, v), B, H = _qkv(d, n)
        flops = 4 * B * H * n * n * d * (0.5 if causal else 1.0)
        ms = do_bench(lambda: _cudnn(q, k, v, causal), warmup=25, rep=100, return_mode="median")
        rows.append(dict(part="fwd", d=d, n=n, causal=causal, variant="sdpa-cudnn", tflops=flops / ms * 1e-9, err=None))
        try:
            with torch.no_grad():
                err = _err_vs_oracle(attention(q, k, v, causal=causal, backend=name), q, k, v, causal)
                ms = do_bench(lambda: attention(q, k, v, causal=causal, backend=name), warmup=25, rep=100,
                              return_mode="median")
            rows.append(dict(part="fwd", d=d, n=n, causal=causal, variant="triton", tflops=flops / ms * 1e-9, err=err,
                             config=str(_best(at.TUNERS["autotune"].fwd))))
        except Exception as e:  # noqa: BLE001 - a failure is reported
            rows.append(dict(part="fwd", d=d, n=n, causal=causal, variant="triton", tflops=float("nan"), err=None,
                             note=f"{type(e).__name__}: {str(e)[:160]}"))
        print(rows[-1], flush=True)


def _best(autotuner):
    cfg = getattr(autotuner, "best_config", None)
    return None if cfg is None else (cfg.kwargs.get("BLOCK_M"), cfg.kwargs.get("BLOCK_N"), cfg.num_warps, cfg.num_stages)


def _sparse_problem(frac=0.1, d=128):
    """(q, k, v, mask, dO) of the block-sparse probes: N = 8192, B·N = 16k tokens, H·d = 2048, ``frac``
    of 128×128 tiles (one draw per head, shared by the batch)."""
    from flashproof.kernels.attention.api import BlockSparseMask
    (q, k, v), B, H = _qkv(d, 8192, seed=3)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    t = torch.rand(1, H, 64, 64, device="cuda", generator=torch.Generator(device="cuda").manual_seed(3)) < frac
    return q, k, v, BlockSparseMask(t, 128, 128), torch.randn_like(q)


def _enqueue_ms(step, reps, profiler=None):
    """Mean host time of ``reps`` calls of ``step`` (after 3 warm-up calls), without waiting for the
    GPU inside; ``profiler`` (e.g. a cProfile.Profile) is enabled around the timed calls."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    for _ in range(reps):
        step()
    if profiler is not None:
        profiler.disable()
    ms = (time.perf_counter() - t0) / reps * 1e3
    torch.cuda.synchronize()
    return ms


class _NoLaunch:
    """Stands in for a Triton kernel (``kernel[grid](...)``) and counts the launches it swallowed."""

    def __init__(self):
        self.n = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.n += 1
        return launch


def _host_without_launches(step, reps=20):
    """(host ms of ``step`` with every Triton launch of the attention host (``_launch``, δ, the walk-list
    kernel) replaced by a counter, launches per step): the host time our Python, torch's custom-op
    and autograd machinery take without Triton's launch path. The results of these steps are garbage."""
    from flashproof.kernels.attention.triton import host as at
    from flashproof.kernels.attention.triton import plan as plan_lists
    saved = at._launch, at.attn_bwd_delta, plan_lists.tile_plan
    stub = _NoLaunch()
    try:
        at._launch = lambda tuner, grid, *a, **k: stub[grid](*a, **k)
        at.attn_bwd_delta = plan_lists.tile_plan = stub
        ms = _enqueue_ms(step, reps)
        per_step = stub.n / (reps + 3)
    finally:
        at._launch, at.attn_bwd_delta, plan_lists.tile_plan = saved
    return ms, per_step


def _launch_costs(step, reps=100):
    """Host µs per launch of each autotuned kernel one call of ``step`` launches through
    ``host._launch`` (recorded, then re-launched ``reps`` times with the same arguments), three ways:
    ``ours`` (``_launch``: the chosen configuration, its pre-hook, ``JITFunction.run``), ``jit``
    (``JITFunction.run`` alone: binding, specialisation, cache key, launcher) and ``launcher`` (the
    compiled kernel's launcher alone, with the bound arguments prepared once). -> {kernel: (ours, jit,
    launcher)}, or {kernel: note} where a way fails."""
    from flashproof.bench.attention import host_us
    from flashproof.kernels.attention.triton import host as at
    seen = []
    real = at._launch

    def record(tuner, grid, *args, **kwargs):
        seen.append((tuner, grid, args, kwargs))
        return real(tuner, grid, *args, **kwargs)
    at._launch = record
    try:
        step()
    finally:
        at._launch = real
    torch.cuda.synchronize()

    def per_call_us(fn):
        return host_us(fn, reps, warmup=1)
    costs = {}
    for tuner, grid, args, kwargs in seen:
        jit = tuner.fn
        name = getattr(getattr(jit, "fn", None), "__name__", str(jit))
        try:
            dtype = getattr(args[0], "base", args[0]).dtype
            cfg = at._CHOSEN[(tuner, dtype, *(kwargs[k] for k in tuner.keys if k in kwargs))]
            full = {**kwargs, **cfg.all_kwargs()}
            ours = per_call_us(lambda: real(tuner, grid, *args, **kwargs))
            jit_us = per_call_us(lambda: jit[grid](*args, **full))
            kernel = jit[grid](*args, **full)
            params = jit.signature.parameters
            bound = list(args) + [full[n] if n in full else params[n].default for n in jit.arg_names[len(args):]]
            g = tuple(grid(full)) + (1, 1)
            stream = torch.cuda.current_stream().cuda_stream
            launcher = per_call_us(lambda: kernel.run(g[0], g[1], g[2], stream, kernel.function,
                                                      kernel.packed_metadata, None, None, None, *bound))
            costs[name] = (ours, jit_us, launcher)
        except Exception as e:  # noqa: BLE001 - a way that fails is reported
            costs[name] = f"{type(e).__name__}: {str(e)[:160]}"
    return costs


def _host_through_custom_op(step, reps=20):
    """Host ms of ``step`` with launches stubbed (as ``_host_without_launches``) and every call sent
    through the custom op (``op.traced`` forced True, as under ``torch.compile``), against which the
    eager path that skips torch's custom-op dispatch (``op.run``) is measured."""
    from flashproof.kernels.attention import op
    real = op.traced
    op.traced = lambda args: True
    try:
        return _host_without_launches(step, reps)[0]
    finally:
        op.traced = real


def _torch_ops(step):
    """{aten op: calls} of one call of ``step`` (torch.profiler, CPU events; nested ops counted too)."""
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    torch.cuda.synchronize()
    return {e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")}


def _graphed(step, leaves):
    """``step`` captured in a CUDA graph (after warm-up calls on a side stream: autotuning, compiling and
    the walk lists happen there) -> (graph, the gradients its replay writes)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    for t in leaves:
        t.grad = None
    with torch.cuda.graph(g):
        step(keep_grads=True)
    return g, [t.grad for t in leaves]


def _grads(step, leaves):
    """The gradients one call of ``step`` gives (fresh: the leaves' grads are cleared first)."""
    for t in leaves:
        t.grad = None
    step(keep_grads=True)
    torch.cuda.synchronize()
    out = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    return out


def sparse_breakdown(rows, frac=0.1, dims=(128,), deadline=None):
    """Per head dim in ``dims`` (N = 8192), causal and not, dense and block-sparse (``frac`` of 128×128
    tiles): forward alone and forward + backward wall time (``do_bench``, L2 flushed), the kernels' GPU
    time (profiler), the host time to enqueue one step, the same with Triton's launches stubbed out
    (``_host_without_launches``), and the step captured in a CUDA graph and replayed (the launches
    without host work: what capturing the launches in a harness would give). Sparse steps also: the
    step with the walk-list cache cleared before each call (the per-call build the cache replaced),
    list builds per steady-state step, and bitwise checks: the cached step's gradients against the
    rebuilding step's and the graph replay's against eager. ``deadline``: time.time() after which
    the remaining head dims are skipped (and said so)."""
    from triton.testing import do_bench

    from flashproof.bench.attention import gpu_ms as _gpu_ms

    from flashproof.kernels.attention.triton import host as at
    from flashproof.kernels.attention.triton import plan as plan_lists
    from flashproof.kernels.attention.api import attention, validate
    for d in dims:
        if deadline is not None and time.time() > deadline:
            rows.append(dict(part="sparse", d=d, n=8192, causal=False, variant="skipped", note="time budget spent"))
            print(rows[-1], flush=True)
            continue
        q, k, v, bm, do = _sparse_problem(frac, d)
        B, H, n, _ = q.shape
        leaves = [q, k, v]
        for causal in (False, True):
            dense_wall = dense_graph = dense_gpu = None
            for label, mask in (("dense", None), ("sparse", bm), ("sparse, lists rebuilt", bm)):
                rebuild = label.endswith("rebuilt")

                def fwd():
                    if rebuild:
                        plan_lists.WALK_LISTS.clear()
                    with torch.no_grad():
                        attention(q, k, v, causal=causal, mask=mask, backend="triton")

                def step(keep_grads=False):
                    if rebuild:
                        plan_lists.WALK_LISTS.clear()
                    if not keep_grads:
                        q.grad = k.grad = v.grad = None  # no gradient-accumulation kernel in the profile
                    attention(q, k, v, causal=causal, mask=mask, backend="triton").backward(do)
                row = dict(part="sparse", d=d, n=n, causal=causal, variant=label,
                           present=bm.tiles.float().mean().item() if mask is not None else 1.0)
                try:
                    row["fwd_ms"] = do_bench(fwd, warmup=10, rep=50, return_mode="median")
                    row["step_ms"] = do_bench(step, warmup=10, rep=50, grad_to_none=leaves, return_mode="median")
                    kern = _gpu_ms(step)
                    row["gpu_ms"] = sum(kern.values())
                    row["kernels"] = {k_: round(v_, 4) for k_, v_ in sorted(kern.items(), key=lambda x: -x[1])[:8]}
                    builds0 = plan_lists.WALK_LISTS.misses
                    row["host_ms"] = _enqueue_ms(step, 20)  # time to enqueue (the GPU may still be busy)
                    if not rebuild:  # (clearing the cache resets its counters)
                        row["list_builds_per_step"] = (plan_lists.WALK_LISTS.misses - builds0) / 23
                    row["host_nolaunch_ms"], row["launches"] = _host_without_launches(step)
                    row["host_nolaunch_op_ms"] = _host_through_custom_op(step)
                    eager = _grads(step, leaves)
                    if mask is not None and not rebuild:
                        plan_lists.WALK_LISTS.clear()
                        rebuilt = _grads(step, leaves)  # lists built afresh by this step
                        row["same_as_rebuilt"] = all(torch.equal(a, b) for a, b in zip(eager, rebuilt))
                    if not rebuild:
                        g, graph_grads = _graphed(step, leaves)
                        row["graph_ms"] = do_bench(g.replay, warmup=10, rep=50, return_mode="median")
                        g.replay()
                        torch.cuda.synchronize()
                        row["graph_same_as_eager"] = all(torch.equal(a, b) for a, b in zip(eager, graph_grads))
                        del g, graph_grads
                        for t in leaves:
                            t.grad = None
                except Exception as e:  # noqa: BLE001 - a failure is reported in its row
                    row["note"] = f"{type(e).__name__}: {str(e)[:200]}"
                if label == "dense":
                    dense_wall, dense_graph, dense_gpu = row.get("step_ms"), row.get("graph_ms"), row.get("gpu_ms")
                elif dense_wall:
                    row["wall_ratio"] = row.get("step_ms", float("nan")) / dense_wall
                    row["gpu_ratio"] = row.get("gpu_ms", float("nan")) / dense_gpu
                    if dense_graph and "graph_ms" in row:
                        row["graph_ratio"] = row["graph_ms"] / dense_graph
                rows.append(row)
                print(row, flush=True)

            def plan():
                prob = validate(q, k, v, causal=causal, mask=bm, backend="triton")
                at.tile_lists(prob, B, H, n, n, cache=plan_lists.WalkListCache())  # a fresh cache: built
            rows.append(dict(part="sparse", d=d, n=n, causal=causal, variant="plan-build",
                             step_ms=do_bench(plan, warmup=5, rep=20, return_mode="median")))
            print(rows[-1], flush=True)
        del q, k, v, bm, do, leaves
        torch.cuda.empty_cache()
        print("\n" + sparse_table(rows), flush=True)  # after each head dim: a run cut short keeps a table
    # last (it re-launches kernels by hand: should that go wrong, nothing else is lost): the launch path's
    # cost per kernel and the torch ops of one d = 128 sparse step
    q, k, v, bm, do = _sparse_problem(frac, 128)

    def step():
        q.grad = k.grad = v.grad = None
        attention(q, k, v, mask=bm, backend="triton").backward(do)
    row = dict(part="sparse", d=128, n=q.shape[2], causal=False, variant="diagnostics")
    try:
        row["torch_ops"] = _torch_ops(step)
        row["launch_us"] = _launch_costs(step)
    except Exception as e:  # noqa: BLE001 - reported in the row
        row["note"] = f"{type(e).__name__}: {str(e)[:200]}"
    rows.append(row)
    print(row, flush=True)
    print("\n" + sparse_table(rows), flush=True)


def sparse_table(rows):
    """The block-sparse rows as one markdown table: wall / GPU / host ms and the ratios to dense."""
    def f(r, key, fmt=".3f"):
        return "" if r.get(key) is None else format(r[key], fmt)
    lines = ["| d | causal | variant | step wall ms | GPU ms | host ms | host ms, no launches | "
             "same, through the custom op | launches | graph ms | wall / dense | GPU / dense | graph / dense graph | checks | "
             "note |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["part"] != "sparse" or r["variant"] in ("plan-build", "diagnostics"):
            continue
        checks = []
        if "same_as_rebuilt" in r:
            checks.append(f"cached = rebuilt: {r['same_as_rebuilt']}")
        if "graph_same_as_eager" in r:
            checks.append(f"graph = eager: {r['graph_same_as_eager']}")
        if "list_builds_per_step" in r:
            checks.append(f"list builds/step {r['list_builds_per_step']:.2f}")
        lines.append(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['variant']} | {f(r, 'step_ms')} | "
                     f"{f(r, 'gpu_ms')} | {f(r, 'host_ms')} | {f(r, 'host_nolaunch_ms')} | {f(r, 'host_nolaunch_op_ms')} | "
                     f"{f(r, 'launches', '.1f')} | "
                     f"{f(r, 'graph_ms')} | {f(r, 'wall_ratio')} | {f(r, 'gpu_ratio')} | {f(r, 'graph_ratio')} | "
                     f"{'; '.join(checks)} | {r.get('note', '')} |")
    builds = [r for r in rows if r["part"] == "sparse" and r["variant"] == "plan-build"]
    lines += [""] + [f"walk-list build (both directions, fresh cache), d = {r['d']}, causal = {r['causal']}: "
                     f"{r['step_ms']:.3f} ms" for r in builds]
    for r in rows:
        if r["part"] == "sparse" and r.get("note") and r["variant"] == "diagnostics":
            lines.append(f"diagnostics failed: {r['note']}")
        if r["part"] == "sparse" and "launch_us" in r:
            lines.append(f"host µs per launch, d = {r['d']} sparse step (ours / JITFunction.run / launcher alone): "
                         + "; ".join(f"{k}: " + (" / ".join(f"{x:.0f}" for x in v) if isinstance(v, tuple) else v)
                                     for k, v in r["launch_us"].items()))
        if r["part"] == "sparse" and "torch_ops" in r:
            ops = sorted(r["torch_ops"].items(), key=lambda x: -x[1])
            lines.append(f"torch ops in one d = {r['d']} sparse step (profiler, nested counted): "
                         f"{sum(r['torch_ops'].values())}: " + ", ".join(f"{k} {n}" for k, n in ops[:12]))
    lines.append("(end of the sparse table)")
    return "\n".join(lines)


def host_profile(rows, reps=20):
    """cProfile of the host side of ``reps`` block-sparse forward + backward calls (d = 128, N = 8192,
    10 % of tiles; enqueue only, no synchronisation inside): where the per-call host time goes."""
    import cProfile
    import io
    import pstats

    from flashproof.kernels.attention.api import attention
    q, k, v, bm, do = _sparse_problem()

    def step():
        q.grad = k.grad = v.grad = None
        attention(q, k, v, mask=bm, backend="triton").backward(do)
    prof = cProfile.Profile()
    host = _enqueue_ms(step, reps, prof)
    out = io.StringIO()
    st = pstats.Stats(prof, stream=out)
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats(35)
    print(out.getvalue(), flush=True)
    rows.append(dict(part="host", d=128, n=8192, causal=False, variant="sparse step (cProfile on)", host_ms=host))


def gluon_forward(rows):
    """The Gluon forward (d = 128) split into its parts: the wall time of the default call with and
    without autograd, the kernel's GPU time (profiler), the host time to enqueue one call, and the
    Triton forward (``backend="triton"``) next to cuDNN, per shape."""
    from triton.testing import do_bench

    from flashproof.bench.attention import gpu_ms as _gpu_ms
    from flashproof.kernels import attention
    for d, n, causal in ((128, 4096, False), (128, 8192, False), (128, 16384, False), (128, 8192, True)):
        (q, k, v), B, H = _qkv(d, n)
        flops = 4 * B * H * n * n * d * (0.5 if causal else 1.0)
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        ms = do_bench(lambda: _cudnn(q, k, v, causal), warmup=25, rep=100, return_mode="median")
        rows.append(dict(part="gluon", d=d, n=n, causal=causal, variant="sdpa-cudnn", tflops=flops / ms * 1e-9))
        first = None
        for name in ("gluon", "triton"):
            try:
                with torch.no_grad():
                    o = attention(q, k, v, causal=causal, backend=name)
                    err = _err_vs_oracle(o, q, k, v, causal)
                    same = None if first is None else torch.equal(o, first)
                    first = o if first is None else first
                    ms = do_bench(lambda: attention(q, k, v, causal=causal, backend=name), warmup=25, rep=100,
                                  return_mode="median")
                    gpu = sum(_gpu_ms(lambda: attention(q, k, v, causal=causal, backend=name)).values())
                    host = _enqueue_ms(lambda: attention(q, k, v, causal=causal, backend=name), 30)
                ms_grad = do_bench(lambda: attention(qg, kg, vg, causal=causal, backend=name), warmup=25,
                                   rep=100, return_mode="median")
                graph = torch.cuda.CUDAGraph()  # the call replayed without host work: launch latency out
                with torch.no_grad():
                    attention(q, k, v, causal=causal, backend=name)
                    torch.cuda.synchronize()
                    with torch.cuda.graph(graph):
                        attention(q, k, v, causal=causal, backend=name)
                ms_graph = do_bench(graph.replay, warmup=25, rep=100, return_mode="median")
                rows.append(dict(part="gluon", d=d, n=n, causal=causal, variant=name, tflops=flops / ms * 1e-9,
                                 err=err, fwd_ms=ms, step_ms=ms_grad, gpu_ms=gpu, host_ms=host,
                                 note=f"with autograd {flops / ms_grad * 1e-9:.0f}; GPU-time rate {flops / gpu * 1e-9:.0f}; "
                                      f"CUDA graph (L2 still flushed) {flops / ms_graph * 1e-9:.0f}; "
                                      f"bitwise = gluon: {same} "))
            except Exception as e:  # noqa: BLE001
                rows.append(dict(part="gluon", d=d, n=n, causal=causal, variant=name, tflops=float("nan"),
                                 note=f"{type(e).__name__}: {str(e)[:160]}"))
            print(rows[-1], flush=True)


def gluon_backward(rows):
    """The backward paths at d = 128, each next to cuDNN's backward: the deterministic Triton two-kernel
    backward (``deterministic=True``; the plan: Gluon forward, Triton backward) and the Gluon backward
    (``deterministic=False``, dQ by TMA bulk reduce-add); gradients against the deterministic ones."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    from flashproof.kernels import attention
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate
    for d, n, causal in ((128, 8192, False), (128, 16384, False), (128, 8192, True), (128, 4096, False)):
        (q, k, v), B, H = _qkv(d, n, seed=5)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        do = torch.randn_like(q)
        flops = 2.5 * 4 * B * H * n * n * d * (0.5 if causal else 1.0)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        ms = do_bench(lambda: out.backward(do, retain_graph=True), warmup=25, rep=100, grad_to_none=[q, k, v],
                      return_mode="median")
        rows.append(dict(part="gluon-bwd", d=d, n=n, causal=causal, variant="sdpa-cudnn", tflops=flops / ms * 1e-9))
        base = None
        for name, det in (("triton-det", True), ("gluon", False)):
            row = dict(part="gluon-bwd", d=d, n=n, causal=causal, variant=name)
            route = dispatch.plan(validate(q, k, v, causal=causal, deterministic=det), dispatch.device_of(q))
            g = _backward_row(row, lambda: attention(q, k, v, causal=causal, deterministic=det),
                              do, (q, k, v), flops, base)
            row.setdefault("note", f"plan {route.forward}/{route.backward} ")
            base = g if base is None else base
            rows.append(row)
            print(row, flush=True)


def launch_overhead(rows, reps=30):
    """Host time to enqueue one block-sparse forward + backward (d = 128, N = 8192, 10 % of tiles)
    with the direct launch of known autotuning keys (``attention_triton._launch``) and without it
    (its cache cleared before every call, so each launch goes through ``Autotuner.run``), next to
    the call's wall time."""
    from triton.testing import do_bench

    from flashproof.kernels.attention.triton import host as at
    from flashproof.kernels.attention.api import attention
    q, k, v, bm, do = _sparse_problem()
    for direct in (True, False):
        def step():
            if not direct:
                at._CHOSEN.clear()
            q.grad = k.grad = v.grad = None
            attention(q, k, v, mask=bm, backend="triton").backward(do)
        host = _enqueue_ms(step, reps)
        wall = do_bench(step, warmup=10, rep=50, grad_to_none=[q, k, v], return_mode="median")
        rows.append(dict(part="launch", d=128, n=8192, causal=False, variant=f"direct={direct}", host_ms=host,
                         step_ms=wall))
        print(rows[-1], flush=True)


def _backward_row(row, run, do, leaves, flops, base):
    """Time ``run()``'s output's backward (``do_bench``, median) into ``row`` (TFLOP/s for ``flops``),
    and its gradients' largest relative difference from ``base`` (the first variant's, per tensor)
    as ``row["err"]``; an exception is recorded in the row. Returns the gradients (None on failure)."""
    from triton.testing import do_bench
    g = None
    try:
        out = run()
        ms = do_bench(lambda: out.backward(do, retain_graph=True), warmup=25, rep=100, grad_to_none=list(leaves),
                      return_mode="median")
        out.backward(do, retain_graph=True)
        g = [t.grad.float() for t in leaves]
        row["tflops"] = flops / ms * 1e-9
        if base is not None:
            row["err"] = max(((x - y).abs().max() / y.abs().max()).item() for x, y in zip(g, base))
    except Exception as e:  # noqa: BLE001 - a variant that fails is reported
        row.update(tflops=float("nan"), note=f"{type(e).__name__}: {str(e)[:160]}")
    for x in leaves:
        x.grad = None
    return g


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python lab/probe.py", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/probe")
    p.add_argument("--parts", default="fwd,sparse,launch,gluon,gluon-bwd")
    p.add_argument("--sparse-dims", default="128", help="head dims of the sparse part, comma-separated")
    p.add_argument("--seconds", type=float, default=None,
                   help="time budget: the sparse part skips the head dims it has not started after this")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("probe: needs a CUDA GPU")
        return 2
    import triton
    os.makedirs(args.out, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}
    print(json.dumps(meta), flush=True)
    rows = []
    parts = args.parts.split(",")
    t_start = time.time()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # a time box's kill still writes probe.json
    try:
        if "host" in parts:
            host_profile(rows)
        if "gluon" in parts:
            gluon_forward(rows)
        if "gluon-bwd" in parts:
            gluon_backward(rows)
        if "launch" in parts:
            launch_overhead(rows)
        if "sparse" in parts:
            sparse_breakdown(rows, dims=tuple(int(x) for x in args.sparse_dims.split(",")),
                             deadline=None if args.seconds is None else t_start + args.seconds)
        if "fwd" in parts:
            forward_triton([(128, 8192, False), (128, 8192, True), (64, 8192, False), (128, 4096, False)], rows)
    finally:
        with open(os.path.join(args.out, "probe.json"), "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)
    print("\n| part | d | N | causal | variant | TFLOP/s | fwd ms | step ms | GPU ms | host ms | note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def num(r, key, fmt):
        return "" if r.get(key) is None else format(r[key], fmt)
    for r in rows:
        note = r.get("note", "") + ("" if r.get("err") is None else f"err {r['err']:.3g} ") + \
            (f"same grads: {r['same_grads_as_pointer_path']}" if "same_grads_as_pointer_path" in r else "")
        print(f"| {r['part']} | {r['d']} | {r['n']} | {'yes' if r['causal'] else 'no'} | {r['variant']} | "
              f"{num(r, 'tflops', '.0f')} | {num(r, 'fwd_ms', '.3f')} | {num(r, 'step_ms', '.3f')} | "
              f"{num(r, 'gpu_ms', '.3f')} | {num(r, 'host_ms', '.3f')} | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
