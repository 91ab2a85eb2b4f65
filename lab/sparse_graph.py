"""Block-sparse fwd+bwd at 10 % of tiles: eager wall-clock vs one CUDA graph's replay (the host's share),
against the dense call; or the capture's error (what stops a capture). On a GPU:

    python lab/sparse_graph.py OUT.json

(BENCHMARKS.md, 2026-12-02 15:59 UTC: this script, run as .gpu/graph_sparse.py.)"""
import json, sys, traceback
import torch
from triton.testing import do_bench
from flashproof.kernels import BlockSparseMask, attention

rows = []
for d, n, causal in ((128, 8192, False), (128, 8192, True), (64, 8192, False)):
    B, H = 2, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_() for _ in range(3))
    go = torch.ones(B, H, n, d, device="cuda", dtype=torch.bfloat16)
    t = torch.rand(1, H, n // 128, n // 128, device="cuda", generator=g) < 0.1
    bm = BlockSparseMask(t, 128, 128)

    def step(mask):
        out = attention(q, k, v, causal=causal, mask=mask)
        return torch.autograd.grad(out, (q, k, v), go)
    row = {"d": d, "n": n, "causal": causal, "tiles": t.float().mean().item()}
    row["dense_ms"] = do_bench(lambda: step(None), warmup=10, rep=50, return_mode="median")
    row["sparse_ms"] = do_bench(lambda: step(bm), warmup=10, rep=50, return_mode="median")
    try:
        ref = step(bm)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step(bm)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = step(bm)
        graph.replay()
        torch.cuda.synchronize()
        row["graph_max_abs_vs_eager"] = max((a.float() - b.float()).abs().max().item() for a, b in zip(outs, ref))
        row["graph_ms"] = do_bench(graph.replay, warmup=10, rep=50, return_mode="median")
    except Exception as e:  # noqa: BLE001 - what stops the capture is the finding
        row["graph_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        row["graph_trace"] = traceback.format_exc()[-1500:]
    rows.append(row)
    print(json.dumps({k: v for k, v in row.items() if k != "graph_trace"}), flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
