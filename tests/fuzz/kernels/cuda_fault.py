"""A user kernel with a real, asynchronous device fault, for the GPU run of
scripts/gpu_fuzz_speed.sh: on CUDA tensors with Nk >= 3 it first launches a Triton kernel that
stores far outside any allocation (an illegal address, reported by CUDA at the next wait on the
device, not at the launch), then returns a correct result. The fuzzer must report it as the
kernel's device fault (exit 1, a reproducer script), never as a harness error. On the CPU it is a
plain correct attention."""
import torch

try:
    import triton
    import triton.language as tl

    @triton.jit
    def _store_far(ptr):
        tl.store(ptr + (1 << 42), 1.0)  # 4 Ti elements past the tensor: no allocation is there
except ImportError:  # pragma: no cover
    triton = None


def attention(q, k, v, *, scale=None, causal=False):
    if q.is_cuda and k.shape[2] >= 3 and triton is not None:
        _store_far[(1,)](torch.empty(1, device=q.device))
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(nk - nq)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v
