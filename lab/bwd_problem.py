"""The backward problem the lab/bwd_*.py diagnostics time (the bench's family: bf16, B·N = 16k tokens, H·d =
2048): ``problem(d, n, causal, heads)`` -> (q, k, v, dO, cudnn, Hq, Hkv), q, k, v requiring grad, the
tensors drawn in that order from one generator seeded n + d, ``cudnn(q, k, v)`` SDPA on its cuDNN backend
(``enable_gqa`` when Hq != Hkv); ``heads`` (Hq, Hkv) or None for H = 2048 / d query and KV heads."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def problem(d, n, causal, heads=None):
    B = 16384 // n
    Hq, Hkv = heads or (2048 // d, 2048 // d)
    g = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v, do = (torch.randn(B, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g) for h in (Hq, Hkv, Hkv, Hq))
    q, k, v = (t.requires_grad_() for t in (q, k, v))

    def cudnn(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=Hq != Hkv)
    return q, k, v, do, cudnn, Hq, Hkv
