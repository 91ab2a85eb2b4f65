"""The floor under a decode call at short caches, on a CUDA GPU: GPU time of a CUDA-graph replay
(``bench.kvcache.graph_ms``, inputs cycled through copies above 4x the L2) of (a) one empty kernel, (b) a read of
the K and V caches alone (``torch.sum`` to fp32 of the (2, B, Hkv, N, D) buffer they are views of: a kernel that
only reads the bytes a decode call must read), (c) our default ``attention_with_kvcache`` call and (d) SDPA
cuDNN's (``enable_gqa``), at Hq/Hkv = 32/8, d = 128, bf16, Nq = 1, B = 1, 2, 4, Nk = 2k-16k. On a GPU:

    python lab/decode_floor.py OUT.json

(BENCHMARKS.md, 2026-12-04 21:01 UTC, session 25 call 8: run as .gpu/readfloor.py.)"""
import json, sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from flashproof.bench.kvcache import graph_ms, input_copies, _l2_bytes
F = torch.nn.functional.scaled_dot_product_attention
from flashproof.kernels import attention_with_kvcache

res = {}
empty = torch.zeros(1, device="cuda")
res["empty_kernel_us"] = graph_ms([lambda: empty.add_(0)], block_ms=20.0).median * 1e3
print("empty kernel us", round(res["empty_kernel_us"], 2)); sys.stdout.flush()
for B in (1, 2, 4):
    for n in (2048, 4096, 8192, 16384):
        kv_bytes = 2 * B * 8 * n * 128 * 2
        copies = input_copies(kv_bytes, _l2_bytes())
        kvs = [torch.randn(2, B, 8, n, 128, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        qs = [torch.randn(B, 32, 1, 128, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        lens = torch.full((B,), n, dtype=torch.int32, device="cuda")
        read1 = graph_ms([lambda i=i: kvs[i].sum(dtype=torch.float32) for i in range(copies)]).median
        ours = graph_ms([lambda i=i: attention_with_kvcache(qs[i], kvs[i][0], kvs[i][1], cache_seqlens=lens)
                         for i in range(copies)]).median
        def cud(i):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F(qs[i], kvs[i][0], kvs[i][1], enable_gqa=True)
        cudnn = graph_ms([lambda i=i: cud(i) for i in range(copies)]).median
        key = f"B{B} n{n}"
        res[key] = dict(kv_mb=kv_bytes / 1e6, read_one_kernel_us=read1 * 1e3, ours_us=ours * 1e3, cudnn_us=cudnn * 1e3,
                        us_at_3_6_tbps=kv_bytes / 3.6e12 * 1e6)
        print(key, {k: round(v, 2) for k, v in res[key].items()}); sys.stdout.flush()
        json.dump(res, open(sys.argv[1], "w"), indent=1)
        del kvs, qs
