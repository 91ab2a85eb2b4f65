"""The backward problem the lab/bwd_*.py diagnostics time, as ``flashproof bench`` builds it (bf16, B·N = 16k
tokens, H·d = 2048; ``bench.attention._tensor`` and ``_provider``): ``problem(d, n, causal, heads)`` -> (q, k, v,
dO, cudnn, Hq, Hkv), q, k, v requiring grad, drawn in that order from one generator seeded n + d, ``cudnn(q, k,
v)`` SDPA on its cuDNN backend (``enable_gqa`` when Hq != Hkv); ``heads`` (Hq, Hkv) or None for H = 2048 / d.
``backward_step(o, q, k, v, dO)``: one timed backward of the output ``o`` (gradients reset, graph retained)."""
import torch

from flashproof.bench.attention import _provider, _tensor


def problem(d, n, causal, heads=None):
    B = 16384 // n
    Hq, Hkv = heads or (2048 // d, 2048 // d)
    g = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v = (_tensor(B, h, n, d, "bhnd", g).requires_grad_() for h in (Hq, Hkv, Hkv))
    do = _tensor(B, Hq, n, d, "bhnd", g)
    return q, k, v, do, _provider("sdpa-cudnn", causal, n, gqa=Hq != Hkv), Hq, Hkv


def backward_step(o, q, k, v, do):
    def step():
        q.grad = k.grad = v.grad = None
        o.backward(do, retain_graph=True)
    return step
