"""Ring attention on W GPUs against attention() on one GPU: TFLOP/s per GPU and scaling efficiency.

    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node W bench/ring.py \\
        [--seqlens 131072 262144 524288] [--heads 32] [--kv-heads 8] [--dim 128] [--batch 1] \\
        [--causal both] [--layouts zigzag contiguous] [--iters 3] [--json out/ring.json]

Every rank holds its shard (B, H, N/W, d) in bf16; the ring's forward and forward+backward are timed
with CUDA events between barriers (the slowest rank's time counts: the call ends when every rank has
its result), the backward as their difference. The one-GPU reference runs ``attention()`` on rank 0
with the whole sequence. TFLOP/s = 4·B·H·N²·d (× ½ causal) / time, backward 2.5 × the forward's count
(DESIGN.md's convention); per GPU = that / W. Efficiency = per-GPU ring TFLOP/s / one-GPU TFLOP/s at the
same N. Before timing, each layout/causal pair is checked once at a small N against the float64 dense
oracle under the tolerance rule (out and lse), and the run stops if it deviates.

NVLink multicast (NVLS) stays off: the script sets NCCL_NVLS_ENABLE=0 when it is unset and refuses
to run with any other value. Prints a table on rank 0 and writes the rows as JSON (``--json``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from flashproof.kernels import attention
from flashproof.kernels.distributed import gather, ring_attention, shard


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seqlens", type=int, nargs="+", default=[131072, 262144, 524288])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--causal", choices=("yes", "no", "both"), default="both")
    p.add_argument("--layouts", nargs="+", choices=("zigzag", "contiguous"), default=["zigzag", "contiguous"])
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--no-single", action="store_true", help="skip the one-GPU reference")
    p.add_argument("--json", default="out/ring.json")
    return p.parse_args(argv)


def _setup():
    nvls = os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if nvls != "0":
        raise SystemExit(f"NCCL_NVLS_ENABLE={nvls!r}: this benchmark runs with NVLink multicast off (0)")
    if not torch.cuda.is_available():
        raise SystemExit("bench/ring.py needs CUDA GPUs (one per rank); run it with torchrun")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist.get_world_size(), dist.get_rank()


def _flops(a, n, causal):
    f = 4 * a.batch * a.heads * n * n * a.dim
    return f / 2 if causal else f


def _timed(fn, iters):
    """Median seconds of ``fn`` over ``iters`` runs after one warm-up, all ranks between barriers."""
    fn()
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _inputs(batch, heads, kv_heads, dim, n, device, seed):
    """q (B, H, n, d), k, v (B, Hkv, n, d): bf16 leaves from a seeded generator."""
    g = torch.Generator(device=device).manual_seed(seed)
    shapes = ((batch, heads, n, dim), (batch, kv_heads, n, dim), (batch, kv_heads, n, dim))
    return [torch.randn(s, generator=g, device=device, dtype=torch.bfloat16).requires_grad_() for s in shapes]


def _check(a, world, rank, layout, causal, device):
    """Forward out/lse at a small N against the float64 oracle under the tolerance rule; raise on deviation."""
    from flashproof.fuzz.oracle import masked_attention
    from flashproof.fuzz.tolerance import judge, magnitudes, naive

    n = 512 * 2 * world
    q, k, v = (t.detach() for t in _inputs(a.batch, 2, 1, a.dim, n, device, seed=1))  # the same on every rank
    allowed = torch.ones(q.shape[0], q.shape[1], n, n, dtype=torch.bool, device=device)
    if causal:
        allowed = allowed.tril()
    scale = q.shape[-1] ** -0.5
    with torch.no_grad():
        ref_out, ref_lse = masked_attention(q.double(), k.double(), v.double(), allowed, scale)
    b_out, b_lse, _ = naive(q, k, v, allowed, scale)
    loc = [shard(t, world=world, rank=rank, layout=layout) for t in (q, k, v)]
    r = ring_attention(*loc, causal=causal, layout=layout, return_lse=True)
    out, lse = gather(r.out, layout=layout), gather(r.lse, layout=layout)
    mags = magnitudes(q.double(), k.double(), v.double(), torch.zeros_like(ref_out), ref_lse, scale)
    bad = [v for v in (judge("out", out, ref_out.cpu(), b_out, torch.bfloat16, mags),
                       judge("lse", lse, ref_lse.cpu(), b_lse, torch.bfloat16, mags)) if not v.ok]
    if bad:
        raise SystemExit(f"ring_attention deviates ({layout}, causal={causal}): {bad}")


def main(argv=None) -> int:
    a = _args(sys.argv[1:] if argv is None else argv)
    world, rank = _setup()
    device = torch.device("cuda", torch.cuda.current_device())
    causals = {"yes": [True], "no": [False], "both": [False, True]}[a.causal]
    rows = []
    for layout in a.layouts:
        for causal in causals:
            _check(a, world, rank, layout, causal, device)
    for n in a.seqlens:
        if n % (2 * world):
            raise SystemExit(f"--seqlens {n}: not a multiple of 2·W = {2 * world}")
        for causal in causals:
            single = None
            if not a.no_single:
                single = _single(a, n, causal, device, rank)
            for layout in a.layouts:
                q, k, v = _inputs(a.batch, a.heads, a.kv_heads, a.dim, n // world, device, seed=100 + rank)
                dout = torch.randn_like(q)
                fwd = _timed(lambda: ring_attention(q, k, v, causal=causal, layout=layout), a.iters)
                both = _timed(lambda: torch.autograd.grad(ring_attention(q, k, v, causal=causal, layout=layout),
                                                          (q, k, v), dout), a.iters)
                f = _flops(a, n, causal)
                row = {"N": n, "causal": causal, "layout": layout, "W": world,
                       "fwd_s": fwd, "bwd_s": both - fwd,
                       "fwd_tflops_per_gpu": f / fwd / world / 1e12,
                       "bwd_tflops_per_gpu": 2.5 * f / (both - fwd) / world / 1e12}
                if single is not None:
                    row.update(single)
                    row["eff_fwd"] = row["fwd_tflops_per_gpu"] / single["single_fwd_tflops"]
                    row["eff_bwd"] = row["bwd_tflops_per_gpu"] / single["single_bwd_tflops"]
                rows.append(row)
                del q, k, v, dout
                torch.cuda.empty_cache()
    if rank == 0:
        _report(a, world, rows)
    dist.destroy_process_group()
    return 0


def _single(a, n, causal, device, rank):
    """attention() on rank 0 over the whole sequence; the other ranks wait at the barriers."""
    out = [None]
    if rank == 0:
        q, k, v = _inputs(a.batch, a.heads, a.kv_heads, a.dim, n, device, seed=7)
        dout = torch.randn_like(q)
        fwd = _timed_local(lambda: attention(q, k, v, causal=causal), a.iters)
        both = _timed_local(lambda: torch.autograd.grad(attention(q, k, v, causal=causal), (q, k, v), dout), a.iters)
        f = _flops(a, n, causal)
        out[0] = {"single_fwd_s": fwd, "single_bwd_s": both - fwd, "single_fwd_tflops": f / fwd / 1e12,
                  "single_bwd_tflops": 2.5 * f / (both - fwd) / 1e12}
        del q, k, v, dout
        torch.cuda.empty_cache()
    dist.broadcast_object_list(out, src=0)
    return out[0]


def _timed_local(fn, iters):
    fn()
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _report(a, world, rows):
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "W": world,
           "nccl": ".".join(map(str, torch.cuda.nccl.version())), "NCCL_NVLS_ENABLE": os.environ["NCCL_NVLS_ENABLE"],
           "batch": a.batch, "heads": a.heads, "kv_heads": a.kv_heads, "dim": a.dim, "dtype": "bf16", "iters": a.iters}
    print(f"ring attention, {env['device']} × {world}, torch {env['torch']}, NCCL {env['nccl']}, "
          f"NCCL_NVLS_ENABLE={env['NCCL_NVLS_ENABLE']}; B={a.batch}, H={a.heads}/{a.kv_heads}, d={a.dim}, bf16")
    head = f"{'N':>8} {'causal':>6} {'layout':>10} | {'fwd/GPU':>8} {'bwd/GPU':>8} | {'1-GPU fwd':>9} {'1-GPU bwd':>9} " \
           f"| {'eff fwd':>7} {'eff bwd':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        s = (f"{r['N']:>8} {'yes' if r['causal'] else 'no':>6} {r['layout']:>10} | {r['fwd_tflops_per_gpu']:8.1f} "
             f"{r['bwd_tflops_per_gpu']:8.1f} | ")
        if "single_fwd_tflops" in r:
            s += (f"{r['single_fwd_tflops']:9.1f} {r['single_bwd_tflops']:9.1f} | {100 * r['eff_fwd']:6.1f}% "
                  f"{100 * r['eff_bwd']:6.1f}%")
        else:
            s += f"{'-':>9} {'-':>9} | {'-':>7} {'-':>7}"
        print(s)
    print("TFLOP/s per GPU; efficiency = per-GPU ring TFLOP/s / one-GPU attention() TFLOP/s at the same N "
          "(target >= 90 %)")
    os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump({"env": env, "rows": rows}, fh, indent=1)
    print(f"wrote {a.json}")


if __name__ == "__main__":
    sys.exit(main())
