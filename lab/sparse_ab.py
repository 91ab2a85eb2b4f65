"""Block-sparse A/B on a CUDA GPU: the default route (on an H200 the Gluon block-sparse kernels) against
backend="triton" (the Triton walk), 10 % of 128x128 tiles, N = 8k, forward + ``autograd.grad``, against the
dense default call. Per row: the eager step's wall-clock (do_bench), one captured CUDA graph's replay (and
whether it is bitwise the eager call), the profiler's GPU time (total and per kernel), the forward alone,
and the host's enqueue time; the two routes' gradients compared (max |diff| / max |value|, a sanity
check: correctness is gpu_check's), and a cProfile of the default sparse step's host side. On a GPU:

    python lab/sparse_ab.py OUT.json          # also writes OUT_profile.txt

(BENCHMARKS.md, 2026-12-02 21:26 and 21:51 UTC: this script, run as .gpu/sparse_ab.py; it replaced
lab/sparse_graph.py, whose eager-vs-graph rows it includes.)"""
import cProfile, io, json, pstats, sys
import torch
from triton.testing import do_bench
from flashproof.bench.attention import gpu_ms, host_us, sparse_problem
from flashproof.kernels import attention
from flashproof.kernels.attention import dispatch
from flashproof.kernels.attention.api import validate

out_path = sys.argv[1]
rows = []

SHAPES = ((128, 8192, False), (128, 8192, True), (64, 8192, False), (64, 8192, True))
for d, n, causal in SHAPES:
    q, k, v, bm, go = sparse_problem(d, n)
    t = bm.tiles
    grads = {}
    for label, mask, backend in (("dense", None, "auto"), ("sparse-gluon", bm, "auto"), ("sparse-triton", bm, "triton")):
        route = dispatch.plan(validate(q, k, v, causal=causal, mask=mask, backend=backend), dispatch.device_of(q))
        def step(mask=mask, backend=backend):
            out = attention(q, k, v, causal=causal, mask=mask, backend=backend)
            return torch.autograd.grad(out, (q, k, v), go)
        row = {"d": d, "n": n, "causal": causal, "variant": label, "route": f"{route.forward}/{route.backward}",
               "tiles": t.float().mean().item()}
        try:
            grads[label] = step()
            row["step_ms"] = do_bench(step, warmup=10, rep=50, return_mode="median")
            kern = gpu_ms(step)
            row["gpu_ms"] = sum(kern.values())
            row["kernels"] = {k_[:60]: round(v_, 4) for k_, v_ in sorted(kern.items(), key=lambda x: -x[1])[:10]}
            with torch.no_grad():
                fwd = lambda: attention(q, k, v, causal=causal, mask=mask, backend=backend)
                row["fwd_ms"] = do_bench(fwd, warmup=10, rep=50, return_mode="median")
                row["fwd_gpu_ms"] = sum(gpu_ms(fwd).values())
            row["host_ms"] = host_us(step, reps=20, warmup=3) / 1e3
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                gg = step()
            graph.replay(); torch.cuda.synchronize()
            row["graph_bitwise_eager"] = all(torch.equal(a, b) for a, b in zip(gg, step()))
            row["graph_ms"] = do_bench(graph.replay, warmup=10, rep=50, return_mode="median")
            del graph, gg
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    dense = rows[-3]
    for r in rows[-2:]:
        for key in ("step_ms", "gpu_ms", "graph_ms", "fwd_gpu_ms"):
            if key in r and key in dense:
                r[key.replace("_ms", "_ratio")] = r[key] / dense[key]
    if "sparse-gluon" in grads and "sparse-triton" in grads:
        diffs = [((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30)).item()
                 for a, b in zip(grads["sparse-gluon"], grads["sparse-triton"])]
        rows[-2]["rel_maxdiff_vs_triton_dq_dk_dv"] = diffs
    print(json.dumps(rows[-2]), json.dumps(rows[-1]), flush=True)
    if d == 128 and not causal:
        pr = cProfile.Profile()
        def step(): 
            out = attention(q, k, v, causal=causal, mask=bm)
            return torch.autograd.grad(out, (q, k, v), go)
        for _ in range(3): step()
        torch.cuda.synchronize()
        pr.enable()
        for _ in range(20): step()
        pr.disable()
        torch.cuda.synchronize()
        sio = io.StringIO(); pstats.Stats(pr, stream=sio).sort_stats("cumulative").print_stats(45)
        open(out_path.replace(".json", "_profile.txt"), "w").write(sio.getvalue())
    del q, k, v, go, grads
    torch.cuda.empty_cache()
json.dump(rows, open(out_path, "w"), indent=1)
for r in rows:
    print(r["d"], r["causal"], r["variant"], "fwd gpu", r.get("fwd_gpu_ms"), r.get("kernels"))
print("| d | causal | variant | route | step ms | ratio | graph ms | ratio | GPU ms | ratio | host ms |")
for r in rows:
    f = lambda k, fmt=".3f": format(r[k], fmt) if k in r else "-"
    print(f"| {r['d']} | {r['causal']} | {r['variant']} | {r['route']} | {f('step_ms')} | {f('step_ratio')} | {f('graph_ms')} | {f('graph_ratio')} | {f('gpu_ms')} | {f('gpu_ratio')} | {f('host_ms')} |")
