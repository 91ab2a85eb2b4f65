"""Poison must not leak, and the Triton kernels read and write only inside their tensors.

* NaN / inf / 1e30 planted where only masked pairs read (tests/support/kernel_cases.poison_case):
  every result is judged against the oracle on the clean inputs.
* Out-of-bounds review under the interpreter: every input is a view into a buffer whose surrounding
  entries (other batches/heads/rows, head-dim padding) hold NaN, and every tensor the Triton host
  allocates (out, lse, δ, dq, dk, dv) sits between guard regions of a sentinel (the host's ``mem``
  argument places them). A read past a mask pulls NaN into the results; a write past one changes a
  sentinel. Shapes: varlen with zero-length sequences on both sides, Nq ≠ Nk both ways, head dims
  that are not powers of two (and < 16), GQA, non-contiguous strides, dense and block-sparse masks."""
from __future__ import annotations

import pytest
import torch
from support.kernel_cases import Case, poison_case, problem_of, verdicts

from flashproof.fuzz.oracle import oracle
from flashproof.kernels import BlockSparseMask
from flashproof.kernels.interpreter import interpreting

needs_interpreter = pytest.mark.skipif(not interpreting(), reason="the Triton kernels on CPU need TRITON_INTERPRET=1")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["f32", "f16", "bf16"])
def test_torch_kernels_poison_does_not_leak(dtype):
    bad = poison_case(dtype, "torch")
    assert not bad, [(v.name, v.reason, v.first) for v in bad]


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
def test_triton_kernels_poison_does_not_leak(dtype):
    pytest.importorskip("triton")
    bad = poison_case(dtype, "triton")
    assert not bad, [(v.name, v.reason, v.first) for v in bad]


G = 64  # guard entries on each side
SENTINEL = {torch.float32: -7.25, torch.float16: -7.25, torch.bfloat16: -7.25, torch.int32: -7777}


class Guarded:
    """``mem`` for the Triton host: empty / empty_like return tensors with the strides torch gives,
    placed between two guard regions of SENTINEL."""

    def __init__(self):
        self.buffers = []

    def _place(self, shape, stride, dtype, device):
        extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
        buf = torch.full((extent + 2 * G,), SENTINEL[dtype], dtype=dtype, device=device)
        self.buffers.append((buf, extent))
        return buf.as_strided(shape, stride, G)

    def empty(self, *shape, dtype=None, device=None):
        t = torch.empty(*shape, dtype=dtype, device=device)
        return self._place(t.shape, t.stride(), t.dtype, t.device)

    def empty_like(self, x, **kw):
        t = torch.empty_like(x, **kw)
        return self._place(t.shape, t.stride(), t.dtype, t.device)

    def guards_intact(self):
        return all((b[:G] == SENTINEL[b.dtype]).all() and (b[G + n:] == SENTINEL[b.dtype]).all()
                   for b, n in self.buffers)


def _inside_nan(x: torch.Tensor, layout: str) -> torch.Tensor:
    """x (B, H, N, D) as a view of a NaN buffer with a margin in every dim; layout "bhnd" or "bnhd"."""
    B, H, N, D = x.shape
    if layout == "bhnd":
        buf = torch.full((B + 2, H + 2, N + 6, D + 5), float("nan"), dtype=x.dtype)
        view = buf[1:B + 1, 1:H + 1, 3:N + 3, 2:D + 2]
    else:
        buf = torch.full((B + 2, N + 6, H + 2, D + 5), float("nan"), dtype=x.dtype)
        view = buf[1:B + 1, 3:N + 3, 1:H + 1, 2:D + 2].transpose(1, 2)
    view.copy_(x)
    return view


def _random_mask(B, Nq, Nk, seed):
    return torch.rand(B, 1, Nq, Nk, generator=torch.Generator().manual_seed(seed)) < 0.6


def _random_tiles(Hq, Nq, Nk, b, seed):
    t = torch.rand(1, Hq, -(-Nq // b), -(-Nk // b), generator=torch.Generator().manual_seed(seed)) < 0.6
    return BlockSparseMask(t, b, b)


BOUNDS = [  # (case, layout)
    (Case("varlen_zero_lengths_gqa", (1, 6, 2, 0, 0, 5, 3), {"causal": True, "lens": ([0, 4, 0, 5, 0], [3, 0, 0, 9, 0])}),
     "bnhd"),
    (Case("nq_gt_nk_window_mask_d17", (2, 2, 1, 37, 5, 17, 1), {"window": (2, 1), "mask": _random_mask(2, 37, 5, 1)}),
     "bhnd"),
    (Case("nq_lt_nk_causal_d33", (1, 3, 3, 3, 70, 33, 20), {"causal": True}), "bnhd"),
    (Case("block_sparse_ragged", (1, 2, 1, 40, 50, 8, 24), {"mask": _random_tiles(2, 40, 50, 16, 2)}), "bhnd"),
    (Case("single_key_single_row", (2, 4, 2, 1, 1, 3, 2), {}), "bnhd"),
]


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("case,layout", BOUNDS, ids=[c.id for c, _ in BOUNDS])
def test_no_read_or_write_outside_the_tensors(case, layout, dtype):
    pytest.importorskip("triton")
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate
    from flashproof.kernels.attention.triton import host
    prob, kw = problem_of(case, dtype)
    q, k, v = (_inside_nan(t.to(dtype), layout) for t in (prob.q, prob.k, prob.v))
    dout = _inside_nan(prob.dout.to(dtype), layout)
    call = validate(q, k, v, backend="triton", tuning="first", **kw)
    route = dispatch.plan(call, dispatch.device_of(q))
    mem = Guarded()
    out, lse = host.forward(q, k, v, call, route, mem=mem)
    grads = host.backward(q, k, v, out, lse, dout, None, call, route, mem=mem)
    assert mem.buffers and mem.guards_intact(), "a kernel wrote outside a tensor it was given"
    bad = [x for x in verdicts(prob, dtype, oracle(prob), out, lse, grads) if not x.ok]
    assert not bad, [(x.name, x.reason, x.first, x.error, x.bound) for x in bad]
