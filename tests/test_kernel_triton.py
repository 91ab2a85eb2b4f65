"""The Triton kernels under TRITON_INTERPRET=1 (CPU, small shapes): every feature case in float32
and a subset in float16, poison, determinism, and the mutant switches as tl.constexpr flags."""
from __future__ import annotations

import math
import os

import pytest
import torch

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels import attention  # noqa: E402
from flashproof.fuzz.kernel_mutants import MUTANTS  # noqa: E402
from test_kernel_cases import CASES, check_case, ids, poison_case  # noqa: E402
from test_kernel_reference import rand_qkv  # noqa: E402
from test_kernel_torch import _mutant_input  # noqa: E402

HALF = [c for c in CASES if c.id in {"causal_nq_lt_nk", "gqa_4_odd_dims", "mask_late_keys", "varlen", "block_sparse"}]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_triton_f32_matches_dense(case):
    check_case(case, torch.float32, "triton")


@pytest.mark.parametrize("case", HALF, ids=ids(HALF))
def test_triton_f16_matches_dense(case):
    check_case(case, torch.float16, "triton")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
def test_triton_poison_does_not_leak(dtype):
    poison_case(dtype, "triton")


def test_triton_agrees_with_torch_backend_and_is_repeatable():
    q, k, v = rand_qkv(1, 4, 2, 40, 53, 24, 16)
    runs = []
    for backend in ("triton", "triton", "torch"):
        out = attention(q, k, v, causal=True, window=(20, None), backend=backend, deterministic=True)
        runs.append((out, *torch.autograd.grad(out.square().sum(), (q, k, v))))
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1])), "deterministic=True: bitwise equal"
    assert all((a - b).abs().max() < 1e-4 for a, b in zip(runs[0], runs[2]))


@pytest.mark.parametrize("bug", sorted(MUTANTS))
def test_triton_mutant_switch_changes_the_result(bug):
    q, k, v, kw = _mutant_input(bug)
    good = attention(q, k, v, backend="triton", **kw)
    bad = MUTANTS[bug](q, k, v, backend="triton", **kw)
    assert (bad - good).abs().nan_to_num(math.inf).max() > 1e-3, f"mutant {bug} is indistinguishable here"
