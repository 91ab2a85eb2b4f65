"""A kernel that "faults on the device" when Nk >= 3: it raises the exception torch raises for
CUDA errors, so the CPU tests can follow a device fault through the campaign, including the
shrinking in fresh processes (tests/test_fuzz_faults.py). Otherwise a plain correct attention."""
import torch

FAULT = getattr(torch, "AcceleratorError", RuntimeError)


def attention(q, k, v, *, scale=None, causal=False):
    if k.shape[2] >= 3:
        raise FAULT("CUDA error: an illegal memory access was encountered")
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(nk - nq)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v
