"""Dropout's cost on a GPU: TFLOP/s of attention() forward and backward with and without dropout, and
SDPA's own dropout beside them, in one run (``python -m flashproof.bench.dropout [--out DIR]``).

Rows (bf16, batch·seqlen = 16k tokens, width 2048, as DESIGN.md's anchors): ours Triton at p = 0 and
p = 0.1 (the cost of drawing the Philox bits in the forward and regenerating them twice in the
backward), ours auto at p = 0 (Gluon on sm_90: the route a call without dropout takes), SDPA at
p = 0.1 (torch's default backend choice). Times: medians of ``triton.testing.do_bench``. FLOPs:
4·B·H·N²·d (halved when causal), backward 2.5× the forward. Correctness is checked by
tests/kernels/test_dropout_gpu.py (run it first), not here. Prints a table; writes dropout.json.
"""
from __future__ import annotations

import argparse
import json
import os

import torch

SHAPES = [(128, 4096, False), (128, 8192, False), (128, 8192, True), (64, 8192, False)]


def _time(fn):
    from triton.testing import do_bench
    return do_bench(fn, warmup=10, rep=50)


def _providers(p):
    import torch.nn.functional as F

    from flashproof.kernels import attention

    return {
        "ours-triton p=0": lambda q, k, v, c: attention(q, k, v, causal=c, backend="triton"),
        f"ours-triton p={p}": lambda q, k, v, c: attention(q, k, v, causal=c, backend="triton", dropout_p=p,
                                                            dropout_seed=1),
        "ours-auto p=0": lambda q, k, v, c: attention(q, k, v, causal=c),
        f"sdpa p={p}": lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c, dropout_p=p),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--p", type=float, default=0.1)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    rows = []
    for d, n, causal in SHAPES:
        B, H = 16384 // n, 2048 // d
        q, k, v, do = (torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        xs = [t.requires_grad_() for t in (q, k, v)]
        flops = 4 * B * H * n * n * d * (0.5 if causal else 1.0)
        for name, fn in _providers(a.p).items():
            try:
                t_f = _time(lambda: fn(*xs, causal))
                out = fn(*xs, causal)
                t_b = _time(lambda: torch.autograd.grad(out, xs, do, retain_graph=True))
                rows.append(dict(d=d, n=n, causal=causal, provider=name, fwd_tflops=flops / t_f * 1e-9,
                                 bwd_tflops=2.5 * flops / t_b * 1e-9, note=""))
            except Exception as e:  # noqa: BLE001 - a provider that cannot run is reported, not fatal
                rows.append(dict(d=d, n=n, causal=causal, provider=name, fwd_tflops=float("nan"),
                                 bwd_tflops=float("nan"), note=f"{type(e).__name__}: {e}"[:120]))
    print(f"{'d':>4} {'N':>6} {'causal':>6}  {'provider':<22} {'fwd TFLOP/s':>11} {'bwd TFLOP/s':>11}  note")
    for r in rows:
        print(f"{r['d']:>4} {r['n']:>6} {str(r['causal']):>6}  {r['provider']:<22} {r['fwd_tflops']:>11.1f} "
              f"{r['bwd_tflops']:>11.1f}  {r['note']}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "dropout.json"), "w") as f:
        json.dump({"p": a.p, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f,
                  indent=1)


if __name__ == "__main__":
    main()
