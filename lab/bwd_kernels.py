"""Per-kernel GPU time of one backward, ours (default and deterministic=True) against SDPA cuDNN, on a CUDA GPU:
torch.profiler over 6 back-to-back backward calls, next to do_bench medians of the same call, at d = 128 4k / 8k
causal and not, GQA 32/8 8k causal, d = 64 4k (bf16, 16k tokens, H·d = 2048). On a GPU:

    python lab/bwd_kernels.py OUT.json

(BENCHMARKS.md, 2026-12-04 19:58 UTC, session 25 call 1: run as .gpu/prof_bwd.py.)"""
import json, sys, torch
from triton.testing import do_bench
from bwd_problem import backward_step, problem
from flashproof.bench.attention import _provider, gpu_ms


def prof(step, reps=6):
    """µs per call by kernel name (``bench.attention.gpu_ms``)."""
    return {k[:90]: round(ms * 1000, 1) for k, ms in gpu_ms(step, reps).items()}


out = {}
shapes = [(128, 4096, False, None), (128, 4096, True, None), (128, 8192, False, None), (128, 8192, True, None),
          (128, 8192, True, (32, 8)), (64, 4096, False, None)]
for d, n, causal, heads in shapes:
    q, k, v, do, cud, Hq, Hkv = problem(d, n, causal, heads)
    rows = {}
    for name, fn in (("ours", _provider("ours", causal, n)), ("cudnn", cud),
                     ("ours-det", _provider("ours-det", causal, n))):
        o = fn(q, k, v)
        step = backward_step(o, q, k, v, do)
        bwd = [do_bench(step, warmup=25, rep=100, return_mode="median") for _ in range(3)]
        rows[name] = dict(bench_ms=bwd, kernels_us=prof(step))
        del o
    key = f"d{d} n{n} {'causal' if causal else 'full'} {Hq}/{Hkv}"
    out[key] = rows
    print("##", key)
    for name, r in rows.items():
        tot = sum(r["kernels_us"].values())
        print(f"  {name}: bench {[round(x,3) for x in r['bench_ms']]} ms, kernels sum {tot:.0f} us")
        for kname, us in sorted(r["kernels_us"].items(), key=lambda kv: -kv[1]):
            print(f"     {us:9.1f}  {kname}")
    sys.stdout.flush()
json.dump(out, open(sys.argv[1], "w"), indent=1)
