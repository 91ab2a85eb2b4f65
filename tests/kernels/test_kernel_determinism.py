"""Repeated runs are bitwise equal where determinism is promised: the torch kernels always, the Triton
kernels (whose backward has no atomics) for both values of ``deterministic``."""
from __future__ import annotations

import pytest
import torch
from support.kernel_cases import CASES, leaves, problem_of

from flashproof.kernels import attention
from flashproof.kernels.interpreter import interpreting

needs_interpreter = pytest.mark.skipif(not interpreting(), reason="the Triton kernels on CPU need TRITON_INTERPRET=1")
CASE = next(c for c in CASES if c.id == "window_left_causal")


def _runs(backend, deterministic, n=2):
    prob, kw = problem_of(CASE, torch.float32)
    runs = []
    for _ in range(n):
        q, k, v = leaves(prob, torch.float32)
        res = attention(q, k, v, return_lse=True, backend=backend, deterministic=deterministic, tuning="first", **kw)
        runs.append((res.out, res.lse, *torch.autograd.grad(res.out, (q, k, v), prob.dout.to(torch.float32))))
    return runs


def _bitwise(a, b):
    return all(torch.equal(x.view(torch.int32), y.view(torch.int32)) for x, y in zip(a, b))


@pytest.mark.parametrize("deterministic", [True, False])
def test_torch_kernels_repeat_bitwise(deterministic):
    first, second = _runs("torch", deterministic)
    assert _bitwise(first, second)


@needs_interpreter
def test_triton_kernels_repeat_bitwise_in_both_modes():
    """deterministic=True promises it; on the Triton kernels deterministic=False runs the same
    two-kernel backward (only the Gluon backward, on sm_90, adds dQ with atomics)."""
    pytest.importorskip("triton")
    a, b = _runs("triton", True)
    c, = _runs("triton", False, n=1)
    assert _bitwise(a, b) and _bitwise(a, c)
