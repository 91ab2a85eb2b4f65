"""The ops' layout rule (``op.py``: out, dq, dk, dv laid out as ``torch.empty_like`` of q, q, k, v — the
input's strides when it is dense, e.g. a (B, N, H, D) transposed view, else compact in its stride
order), in the real
and the fake implementations, on the CPU routes (torch; Triton in the interpreter). The Gluon kernels
allocate their results by the same rule (``gluon/fwd.py``, ``gluon/bwd.py``); on the GPU
``lab/gpu_check.py`` asserts it for its cases."""
from __future__ import annotations

import pytest
import torch

from flashproof.kernels import attention
from flashproof.kernels.attention.op import attention_backward_op, attention_op


def _bnhd(t):
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def _inputs(layout, B=2, Hq=4, Hkv=2, N=40, D=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, h, N, D, generator=g, dtype=dtype) for h in (Hq, Hkv, Hkv))
    if layout == "bnhd":
        q, k, v = (_bnhd(t) for t in (q, k, v))
    elif layout == "packed":  # slices of one (B, N, 3, H, D) buffer: not dense; results compact (B, N, H, D)
        buf = torch.stack([t.transpose(1, 2) for t in (q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))], 2)
        q, k, v = (buf[:, :, i].transpose(1, 2) for i in range(3))
    return q, k, v


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("layout", ["bnhd", "packed", "mixed"])
def test_results_are_laid_out_like_the_inputs_and_equal_the_contiguous_call(layout, backend):
    if backend == "triton":
        pytest.importorskip("triton")
    q, k, v = _inputs("bnhd" if layout == "mixed" else layout)
    if layout == "mixed":
        k = k.contiguous()
    leaves = tuple(t.detach().requires_grad_() for t in (q, k, v))
    dense = tuple(t.detach().contiguous().requires_grad_() for t in (q, k, v))
    kw = dict(causal=True, backend=backend, tuning="first")
    out, ref = attention(*leaves, **kw), attention(*dense, **kw)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad(out, leaves, dout)
    ref_grads = torch.autograd.grad(ref, dense, dout)
    for name, got, like in zip(("out", "dq", "dk", "dv"), (out, *grads), leaves[:1] + leaves):
        assert got.stride() == torch.empty_like(like).stride(), (name, got.stride(), like.stride())
        if layout != "mixed" or name in ("out", "dq", "dv"):  # (B, N, H, D) inputs: compact (B, N, H, D) results
            assert got.transpose(1, 2).is_contiguous(), (name, got.stride())
    for name, a, b in zip(("out", "dq", "dk", "dv"), (out, *grads), (ref, *ref_grads)):
        assert torch.equal(a, b), name  # the same kernels on the same values: bitwise


def _args(q, k, v):
    return (q, k, v, None, None, None, 0, 0, None, None, None, None, 0, True, False, True, "torch", "first", "",
            0.0, None)


def test_fake_results_have_the_real_layout():
    """The fake implementations give the results the strides the real ones return (a mismatch would
    break torch.compile's assumption about the op's outputs)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    q, k, v = _inputs("bnhd")
    out, lse = attention_op(*_args(q, k, v))
    dq, dk, dv = attention_backward_op(q, k, v, out, lse, torch.ones_like(out), None, *_args(q, k, v)[3:])
    with FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        f_out, f_lse = attention_op(*_args(fq, fk, fv))
        f_grads = attention_backward_op(fq, fk, fv, f_out, f_lse, torch.ones_like(f_out), None, *_args(fq, fk, fv)[3:])
    for real, fake in zip((out, lse, dq, dk, dv), (f_out, f_lse, *f_grads)):
        assert real.shape == fake.shape and real.stride() == fake.stride()
    assert out.stride() == q.stride() and dk.stride() == k.stride()
