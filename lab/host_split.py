"""Where the host's time of one attention forward + backward step goes, on a CUDA GPU: perf_counter stamps
inside the step (the forward call, the Gluon forward's host function, autograd's way from ``autograd.grad``
to the eager backward, the eager backward, the Gluon backward's host function, the way back), µs per step
over 60 steps enqueued back to back; d = 128, N = 8k, bf16, dense and block-sparse (10 % of 128 x 128
tiles), causal and not; SDPA cuDNN's whole step for reference. On a GPU:

    python lab/host_split.py OUT.json

(BENCHMARKS.md, 2026-12-03 09:09 UTC: run as .gpu/hostsplit.py, which also A/B'd the shared-memory
layouts built per call, as at commit 52f03a8, against ``gluon/common.shared_layout``'s cache.)"""
import json, sys, time
import torch
import torch.nn.functional as F
from flashproof.bench.attention import host_us, sparse_problem
from flashproof.kernels import attention
from flashproof.kernels.attention import op
from flashproof.kernels.attention.gluon import fwd as gf, bwd as gb

out_path = sys.argv[1]
acc = {}
def add(k, dt):
    acc[k] = acc.get(k, 0.0) + dt
now = time.perf_counter
orig_eb = op._Eager.backward
def eb(ctx, dout, dlse):
    t = now(); add("t_engine_in", t - acc.pop("_t1", t))
    r = orig_eb(ctx, dout, dlse)
    acc["_t3"] = now(); add("t_eager_backward", acc["_t3"] - t)
    return r
op._Eager.backward = staticmethod(eb)
orig_gb, orig_gf = gb.backward, gf.forward
def gbw(*a, **k):
    t = now(); r = orig_gb(*a, **k); add("t_gluon_bwd", now() - t); return r
def gfw(*a, **k):
    t = now(); r = orig_gf(*a, **k); add("t_gluon_fwd", now() - t); return r
gb.backward, gf.forward = gbw, gfw

d, n = 128, 8192
q, k, v, bm, go = sparse_problem(d, n)

def stamps(causal, mask, reps=60):
    def step():
        t0 = now()
        out = attention(q, k, v, causal=causal, mask=mask)
        acc["_t1"] = t1 = now(); add("t_forward_call", t1 - t0)
        gr = torch.autograd.grad(out, (q, k, v), go)
        t4 = now(); add("t_engine_out", t4 - acc.pop("_t3", t4)); add("t_step", t4 - t0)
        return gr
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    acc.clear()
    for _ in range(reps):
        step()
    torch.cuda.synchronize()
    return {k_: round(v_ / reps * 1e6, 1) for k_, v_ in acc.items() if not k_.startswith("_")}

res = {"stamps": {}, "sdpa_cudnn_step_us": {}}
for causal in (True, False):
    for label, mask in (("dense", None), ("sparse", bm)):
        res["stamps"][f"{label}{'-causal' if causal else ''}"] = s = stamps(causal, mask)
        print(label, causal, json.dumps(s), flush=True)

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for causal in (True, False):
        def sstep():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return torch.autograd.grad(out, (q, k, v), go)
        res["sdpa_cudnn_step_us"]["causal" if causal else "plain"] = round(host_us(sstep, 60), 1)
except Exception as e:  # noqa: BLE001
    res["sdpa_cudnn_step_us"]["error"] = f"{type(e).__name__}: {e}"[:300]
print(json.dumps(res["sdpa_cudnn_step_us"]))
json.dump(res, open(out_path, "w"), indent=1)
