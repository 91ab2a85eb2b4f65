"""The backward eager against captured (torch.cuda.make_graphed_callables), ours against SDPA cuDNN, on a CUDA
GPU: do_bench medians and the mean of 300 back-to-back steps (no synchronisation inside), 3 interleaved rounds;
d = 128 4k causal and not, GQA 32/8 8k causal, d = 64 4k. Equal eager and graphed times mean the host stays ahead
of the GPU in the bench's loop (its launches cost nothing there). On a GPU:

    python lab/bwd_graphed.py OUT.json

(BENCHMARKS.md, 2026-12-04 20:05 UTC, session 25 call 3: run as .gpu/graphed.py.)"""
import json, sys, torch
from triton.testing import do_bench
from bwd_problem import backward_step, problem
from flashproof.bench.attention import _provider

def sustained(step, n=300):
    for _ in range(10): step()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n): step()
    b.record(); torch.cuda.synchronize()
    return a.elapsed_time(b) / n

out = {}
for d, n, causal, heads in [(128, 4096, False, None), (128, 4096, True, None), (128, 8192, True, (32, 8)), (64, 4096, False, None)]:
    q, k, v, do, cud, Hq, Hkv = problem(d, n, causal, heads)
    ours = _provider("ours", causal, n)
    units = {}
    for name, fn in (("ours", ours), ("cudnn", cud)):
        units[name] = fn
        units[name + "-graphed"] = torch.cuda.make_graphed_callables(fn, (q, k, v))
    key = f"d{d} n{n} {'causal' if causal else 'full'} {Hq}/{Hkv}"
    res = {u: {"bench": [], "sustained": []} for u in units}
    for rnd in range(3):
        order = list(units) if rnd % 2 == 0 else list(units)[::-1]
        for u in order:
            o = units[u](q, k, v)
            step = backward_step(o, q, k, v, do)
            res[u]["bench"].append(do_bench(step, warmup=25, rep=100, return_mode="median"))
            res[u]["sustained"].append(sustained(step))
            del o
    out[key] = res
    print("##", key)
    for u, r in res.items():
        print(f"  {u:15s} do_bench {[round(x, 3) for x in r['bench']]}  sustained {[round(x, 3) for x in r['sustained']]}")
    sys.stdout.flush()
json.dump(out, open(sys.argv[1], "w"), indent=1)
