"""The Gluon backward's host-side choice of dQ reduction (``gluon/bwd.py``: ``backward(dq_reduce=...)``):
an unknown name is refused, naming the choices, before anything is launched. (The kernels themselves
compile for sm_90 in tests/kernels/test_kernel_compile.py and run on the H200 in scripts/gpu_tmadq.sh.)"""
from __future__ import annotations

import pytest

pytest.importorskip("triton.experimental.gluon")

from flashproof.kernels.attention.gluon import bwd  # noqa: E402


def test_unknown_dq_reduction_is_refused():
    with pytest.raises(ValueError, match=r"dq_reduce must be one of \('tma', 'red_v4'\), got 'atomic'"):
        bwd.backward(None, None, None, None, None, None, None, None, dq_reduce="atomic")


def test_the_default_is_a_known_reduction():
    import inspect
    assert inspect.signature(bwd.backward).parameters["dq_reduce"].default in bwd.DQ_REDUCES
