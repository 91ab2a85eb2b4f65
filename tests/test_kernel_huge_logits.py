"""fp32 with huge scores (|s| ~ 900): the Triton dK/dV kernel must rebuild P from the same S as the
forward. Recomputing S = K Qᵀ (another summation order) moved S by a few ulps, so P = 2^(S − lse)
was off by ~2e-4 where the softmax is one-hot and dV reached 3–6× the naive-fp32 bound (gpu_check's
huge_logits case). Interpreter, CPU; same rule and inputs as gpu_check."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels import gpu_check  # noqa: E402


@pytest.mark.parametrize("n, seed", [(16, 0), (16, 2), (64, 2)])
def test_fp32_huge_logits_gradients_within_the_naive_rule(monkeypatch, n, seed):
    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    (cid, shape, opt), = [c for c in gpu_check.CASES if c[0] == "huge_logits"]
    r = gpu_check.check_case(cid, (shape[0], shape[1], shape[2], n, n, shape[5], shape[6]), opt, "fp32", seed=seed)
    assert r["passed"], r
