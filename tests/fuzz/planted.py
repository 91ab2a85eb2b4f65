"""Kernel bugs planted for the fuzzer's tests (each must be caught by the default campaign).

Two are wrappers of our correct torch kernel; the third edits one line of the Triton forward's
tile classification under the interpreter (TRITON_INTERPRET=1 resolves the kernel's call to
``key_range`` through the module at run time, so a patched copy takes its place)."""
from __future__ import annotations

import contextlib
import inspect
import textwrap

import torch

from flashproof.fuzz import targets


class _NegateGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -g


def _lse_sign(c, det):
    r = targets.get("torch").run(c, det)
    return targets.KernelOut(r.out, _NegateGrad.apply(r.lse))


def _fp64_in_fp32(c, det):
    if c.q.dtype != torch.float64:
        return targets.get("torch").run(c, det)
    lo = lambda t: None if t is None else t.float()  # noqa: E731
    r = targets.get("torch").run(c._replace(q=lo(c.q), k=lo(c.k), v=lo(c.v)), det)
    return targets.KernelOut(r.out.double(), r.lse.double())


def lse_sign_target():
    """Backward through the returned LSE with the wrong sign."""
    return targets.get("torch")._replace(name="planted:lse-backward-sign", run=_lse_sign,
                                         doc="the LSE's gradient enters the backward with the wrong sign")


def fp64_in_fp32_target():
    """float64 inputs computed in float32."""
    return targets.get("torch")._replace(name="planted:fp64-in-fp32", run=_fp64_in_fp32,
                                         doc="float64 inputs are computed in float32")


@contextlib.contextmanager
def window_edge_one_key_early():
    """The Triton forward's unmasked interior starts one key early at a left window edge
    (``full_lo = p_hi − left − 1``): a tile holding a masked pair runs without the predicate."""
    import triton

    from flashproof.kernels.attention.triton import fwd

    real = fwd.key_range
    src = textwrap.dedent(inspect.getsource(real.fn))
    line = "full_lo = tl.maximum(p_hi - left, 0)"
    assert line in src, "the planted line moved: update tests/fuzz/planted.py"
    body = src.replace(line, "full_lo = tl.maximum(p_hi - left - 1, 0)").split("\n", 1)[1]  # drop @triton.jit
    scope = dict(vars(fwd))
    exec(compile(body, "<planted key_range>", "exec"), scope)
    fwd.key_range = triton.jit(scope["key_range"])
    try:
        yield
    finally:
        fwd.key_range = real
