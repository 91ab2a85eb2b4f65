"""Where a backward's wall time goes besides its kernels, ours against SDPA cuDNN, on a CUDA GPU: the kernel
timeline of do_bench's loop (L2 flush, then the backward; the idle gap before each kernel, torch.profiler with CPU
activity), the SM clock, power and temperature under 2 s of back-to-back steps (nvidia-smi polled every 50 ms;
the loop synchronises every 8 steps), do_bench medians with and without grad_to_none; d = 128 4k causal and
not, 8k. On a GPU:

    python lab/bwd_clocks.py OUT.json

(BENCHMARKS.md, 2026-12-04 20:01 UTC, session 25 call 2: run as .gpu/gaps.py.)"""
import json, subprocess, sys, threading, time, torch
from triton.testing import do_bench
from bwd_problem import backward_step, problem
from flashproof.bench.attention import _provider

cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device="cuda")

def timeline(step, reps=12):
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        for _ in range(reps):
            cache.zero_()
            step()
        torch.cuda.synchronize()
    ks = sorted([(e.time_range.start, e.time_range.end, e.name) for e in p.events()
                 if e.device_type.name == "CUDA"], key=lambda x: x[0])
    gaps = {}
    for (s0, e0, n0), (s1, e1, n1) in zip(ks, ks[1:]):
        gaps.setdefault(n1[:60], []).append(s1 - e0)
    span = ks[-1][1] - ks[0][0]
    busy = sum(e - s for s, e, _ in ks)
    return dict(span_us=span / reps, busy_us=busy / reps,
                gap_before={k: round(sum(v) / reps, 1) for k, v in gaps.items()})

def smi():
    r = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    return [float(x) for x in r.stdout.strip().split(",")]

def sustained(step, seconds=2.0):
    samples, stop = [], threading.Event()
    def poll():
        while not stop.is_set():
            samples.append(smi()); time.sleep(0.05)
    torch.cuda.synchronize()
    th = threading.Thread(target=poll); th.start()
    t0 = time.perf_counter(); n = 0
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record()
    while time.perf_counter() - t0 < seconds:
        step(); n += 1
        if n % 8 == 0:
            torch.cuda.synchronize()
    ev[1].record(); torch.cuda.synchronize()
    stop.set(); th.join()
    tail = samples[len(samples) // 2:] or samples
    return dict(ms_per_step=ev[0].elapsed_time(ev[1]) / n, steps=n,
                clock_mhz=sum(s[0] for s in tail) / len(tail), power_w=sum(s[1] for s in tail) / len(tail),
                temp_c=max(s[2] for s in samples))

out = {}
for d, n, causal in [(128, 4096, False), (128, 4096, True), (128, 8192, False)]:
    q, k, v, do, cud, _, _ = problem(d, n, causal)
    key = f"d{d} n{n} {'causal' if causal else 'full'}"
    out[key] = {}
    for rnd in range(2):
        for name, fn in (("ours", _provider("ours", causal, n)), ("cudnn", cud)):
            o = fn(q, k, v)
            step = backward_step(o, q, k, v, do)
            r = dict(bench_ms=do_bench(step, warmup=25, rep=100, return_mode="median"),
                     nogradnone_ms=do_bench(lambda: o.backward(do, retain_graph=True), warmup=25, rep=100, return_mode="median"),
                     timeline=timeline(step), sustained=sustained(step))
            out[key].setdefault(name, []).append(r)
            print(key, rnd, name, json.dumps(r)); sys.stdout.flush()
            del o
json.dump(out, open(sys.argv[1], "w"), indent=1)
