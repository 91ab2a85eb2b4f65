"""The Gluon forward's routing (``attention_gluon.shape_reason`` / ``reason``) on CPU. The kernel
itself has no interpreter: tests/test_kernel_compile.py compiles it for sm_90 and the GPU check
(kernels/gpu_check.py, cases ``gluon_*``) runs it against the float64 formula and asserts it ran."""
from __future__ import annotations

import pytest
import torch

from flashproof.kernels.attention.gluon import fwd as G
from flashproof.kernels.attention.api import BlockSparseMask, Problem


def _prob(window=(None, None), groups=1, scale=0.088, mask=None, tiles=None, seqlens=None, bugs=frozenset()):
    return Problem(scale, window, mask, tiles, seqlens, groups, False, bugs, {})


def _qkv(B=2, Hq=4, Hkv=4, N=256, D=128, Dv=128, Nk=None, dtype=torch.bfloat16):
    Nk = N if Nk is None else Nk
    return (torch.zeros(B, Hq, N, D, dtype=dtype), torch.zeros(B, Hkv, Nk, D, dtype=dtype),
            torch.zeros(B, Hkv, Nk, Dv, dtype=dtype))


@pytest.mark.parametrize("window,groups,Hkv,dtype", [((None, None), 1, 4, torch.bfloat16), ((None, 0), 1, 4, torch.float16),
                                                     ((None, 0), 2, 2, torch.bfloat16)])
def test_dense_d128_calls_are_taken(window, groups, Hkv, dtype):
    assert G.shape_reason(*_qkv(Hkv=Hkv, dtype=dtype), _prob(window, groups)) is None


def test_everything_else_is_refused_with_its_reason():
    q, k, v = _qkv()
    mask = torch.ones(1, 1, 256, 256, dtype=torch.bool)
    cases = {
        "dtype": (_qkv(dtype=torch.float32), _prob()),
        "head dim": (_qkv(D=64, Dv=64), _prob()),
        "head dim ": (_qkv(Dv=64), _prob()),
        "lengths": (_qkv(Nk=384), _prob()),
        "lengths ": (_qkv(N=200), _prob()),
        "mask": ((q, k, v), _prob(mask=mask)),
        "mask ": ((q, k, v), _prob(tiles=BlockSparseMask(torch.ones(1, 1, 2, 2, dtype=torch.bool), 128, 128))),
        "window": ((q, k, v), _prob(window=(None, 3))),
        "window ": ((q, k, v), _prob(window=(16, 0))),
        "bug injection": ((q, k, v), _prob(bugs=frozenset({"no_alpha"}))),
        "scale": ((q, k, v), _prob(scale=-0.1)),
        "head grouping": (_qkv(Hkv=2), _prob(groups=1)),
        "layout": ((q.transpose(2, 3).contiguous().transpose(2, 3), k, v), _prob()),
    }
    for want, (qkv, prob) in cases.items():
        got = G.shape_reason(*qkv, prob)
        assert got is not None and want.strip() in got, (want, got)


def test_no_gpu_means_the_triton_kernels():
    """On this machine (no sm_90 GPU, or the interpreter) every call goes to the Triton kernels."""
    assert G.reason(*_qkv(), _prob()) is not None
