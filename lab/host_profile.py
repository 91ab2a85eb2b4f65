"""The host's cost of one attention forward + backward step on a CUDA GPU, by part: the step, the forward
with and without its autograd graph, validation, routing, the Gluon kernels' host functions, their TMA
descriptors, the δ launch, the allocations (µs per call, ``flashproof.bench.attention.host_us``: enqueued
back to back, no synchronisation inside). d = 128, N = 8k, bf16, dense and block-sparse (10 % of 128 x 128
tiles), causal and not; then a cProfile of 30 block-sparse causal steps. On a GPU:

    python lab/host_profile.py OUT.json      # also writes OUT_cprofile.txt

(BENCHMARKS.md, 2026-12-03 08:59 UTC: this script, run as .gpu/hostprof.py.)"""
import cProfile, io, json, pstats, sys
import torch
from flashproof.bench.attention import host_us, sparse_problem
from flashproof.kernels import attention
from flashproof.kernels.attention import api, dispatch
from flashproof.kernels.attention.gluon import fwd as gf, bwd as gb
from flashproof.kernels.attention.triton import host as th

out_path = sys.argv[1]
res = {}

def enq(fn, reps=50):
    return round(host_us(fn, reps), 1)

d, n = 128, 8192
q, k, v, bm, go = sparse_problem(d, n)
B, H = q.shape[:2]
dev = dispatch.device_of(q)
for causal in (True, False):
    for label, mask in (("dense", None), ("sparse", bm)):
        r = {}
        def step():
            out = attention(q, k, v, causal=causal, mask=mask)
            return torch.autograd.grad(out, (q, k, v), go)
        def fwd_grad():
            return attention(q, k, v, causal=causal, mask=mask)
        def fwd_nograd():
            with torch.no_grad():
                return attention(q, k, v, causal=causal, mask=mask)
        try:
            r["step"] = enq(step)
            r["fwd_with_grad_graph"] = enq(fwd_grad)
            r["fwd_no_grad"] = enq(fwd_nograd)
            kw = dict(causal=causal, mask=mask)
            r["validate_structural"] = enq(lambda: api.validate(q, k, v, **kw, check_values=False), 200)
            r["validate_full"] = enq(lambda: api.validate(q, k, v, **kw, requires_grad=True), 200)
            prob = api.validate(q.detach(), k.detach(), v.detach(), **kw, requires_grad=True)
            r["device_of"] = enq(lambda: dispatch.device_of(q), 200)
            r["plan"] = enq(lambda: dispatch.plan(prob, dev), 200)
            qd, kd, vd = q.detach(), k.detach(), v.detach()
            o, lse = gf.forward(qd, kd, vd, prob)
            r["gluon_fwd_host"] = enq(lambda: gf.forward(qd, kd, vd, prob), 100)
            r["gluon_fwd_descs"] = enq(lambda: gf._descs(qd, kd, vd, o), 200)
            r["gluon_bwd_host"] = enq(lambda: gb.backward(qd, kd, vd, o, lse, go, None, prob), 100)
            r["delta"] = enq(lambda: th.delta(o, go, lse, None), 200)
            r["zeros_fp32"] = enq(lambda: torch.zeros(B, H, n, d, dtype=torch.float32, device="cuda"), 200)
            r["empty_like"] = enq(lambda: torch.empty_like(qd), 200)
            if mask is not None:
                r["tile_lists_cached"] = enq(lambda: th.tile_lists(prob, B, H, n, n, ("KV",)), 200)
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        res[f"{label}{'-causal' if causal else ''}"] = r
        print(label, causal, json.dumps(r), flush=True)
pr = cProfile.Profile()
def step():
    out = attention(q, k, v, causal=True, mask=bm)
    return torch.autograd.grad(out, (q, k, v), go)
for _ in range(3):
    step()
torch.cuda.synchronize()
pr.enable()
for _ in range(30):
    step()
pr.disable()
torch.cuda.synchronize()
sio = io.StringIO()
pstats.Stats(pr, stream=sio).sort_stats("tottime").print_stats(60)
pstats.Stats(pr, stream=sio).sort_stats("cumulative").print_stats(60)
open(out_path.replace(".json", "_cprofile.txt"), "w").write(sio.getvalue())
json.dump(res, open(out_path, "w"), indent=1)
