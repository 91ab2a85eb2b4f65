"""The Triton draw (``kernels/sampler_triton.py``) gives the same tokens as the reference: coupled test
under TRITON_INTERPRET=1 on the CPU (small vocabularies: the interpreter is slow), on CUDA when present."""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings, strategies as st

from test_sampler_coupled import build, check_coupled, sampler_problems

from flashproof.kernels import sampler_triton

pytestmark = pytest.mark.skipif(not sampler_triton.available(), reason="needs triton")
INTERP = os.environ.get("TRITON_INTERPRET") == "1"


@pytest.mark.skipif(not INTERP, reason="CPU run needs TRITON_INTERPRET=1")
@settings(max_examples=25)
@given(sampler_problems(vocab=st.sampled_from([1, 2, 3, 17, 1025, 2049])))
def test_triton_coupled_interpreter(pr):
    check_coupled(pr, backend="triton")


@pytest.mark.skipif(not INTERP, reason="CPU run needs TRITON_INTERPRET=1")
@pytest.mark.parametrize("family", ["u_edges", "draft_zero", "equal", "disjoint", "sentinel", "one_hot", "greedy"])
def test_triton_families_interpreter(family):
    check_coupled(build(len(family), 4, 3, 2050, zeros=0.3, **{family: True}), backend="triton")


def test_triton_backend_refuses_to_run_where_it_cannot():
    pr = build(0, 2, 2, 8)
    if INTERP or torch.cuda.is_available():
        pytest.skip("triton can run here")
    with pytest.raises(RuntimeError, match="triton"):
        check_coupled(pr, backend="triton")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@given(sampler_problems(max_batch=8))
def test_triton_coupled_cuda(pr):
    check_coupled(pr, "cuda", backend="triton")
