"""The torch backend against the float64 dense formula: every feature case, float64 and float32,
plus poison, determinism, strides and the mutant switches."""
from __future__ import annotations

import math

import pytest
import torch

from flashproof.kernels import attention
from flashproof.fuzz.kernel_mutants import MUTANTS
from test_kernel_cases import CASES, check_case, ids, poison_case
from test_kernel_reference import allowed_matrix, dense_reference, rand_qkv


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_torch_backend_matches_dense(case, dtype):
    check_case(case, dtype, "torch")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["f32", "f16", "bf16"])
def test_torch_backend_poison_does_not_leak(dtype):
    poison_case(dtype, "torch")


def test_output_dtype_and_named_result():
    q, k, v = rand_qkv(1, 2, 2, 5, 5, 8, 8, dtype=torch.bfloat16, grad=False)
    out = attention(q, k, v)
    res = attention(q, k, v, return_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 2, 5, 8)
    assert res._fields == ("out", "lse") and res.lse.dtype == torch.float32 and res.lse.shape == (1, 2, 5)
    assert torch.equal(res.out, out)


def test_non_contiguous_strides():
    base = torch.randn(2, 19, 3, 24, dtype=torch.float64)  # (B, N, H, D) -> permuted views
    q = base[..., :16].transpose(1, 2)
    k = torch.randn(2, 3, 40, 16, dtype=torch.float64).transpose(2, 3).contiguous().transpose(2, 3)
    v = torch.randn(2, 40, 3, 16, dtype=torch.float64).transpose(1, 2)
    out = attention(q, k, v, causal=True)
    want, _ = dense_reference(q, k, v, allowed_matrix(2, 3, 19, 40, causal=True))
    assert not q.is_contiguous() and (out - want).abs().max() < 1e-12


@pytest.mark.parametrize("deterministic", [False, True])
def test_gradients_bitwise_repeatable(deterministic):
    q, k, v = rand_qkv(1, 4, 2, 50, 70, 16, 16)
    runs = []
    for _ in range(2):
        out = attention(q, k, v, causal=True, deterministic=deterministic)
        runs.append(torch.autograd.grad(out.square().sum(), (q, k, v)))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_split_keys_and_merge_partial_results():
    """Two key partitions' (out, lse) merged by the lse rule equal the whole call."""
    q, k, v = rand_qkv(1, 2, 2, 30, 90, 16, 16, dtype=torch.float64, grad=False)
    whole = attention(q, k, v, return_lse=True)
    a = attention(q, k[:, :, :37], v[:, :, :37], return_lse=True)
    b = attention(q, k[:, :, 37:], v[:, :, 37:], return_lse=True)
    lse = torch.logaddexp(a.lse, b.lse)
    out = a.out * torch.exp(a.lse - lse)[..., None] + b.out * torch.exp(b.lse - lse)[..., None]
    assert (out - whole.out).abs().max() < 1e-12 and (lse - whole.lse).abs().max() < 1e-12


def _mutant_input(bug):
    """An input on which the bug is visible (the fuzzer must find these by itself)."""
    q, k, v = rand_qkv(1, 4, 2, 70, 130, 16, 16, dtype=torch.float32, grad=False)
    kw = {"causal": True}
    if bug == "no_max":
        q = q * 40  # logits far above 88: e^s overflows float32
    if bug == "unguarded_inf":
        # row i may read keys >= 2 i: later rows start after fully masked tiles
        kw = {"mask": (torch.arange(130)[None] >= 2 * torch.arange(70)[:, None]).expand(1, 1, 70, 130)}
    if bug == "no_alpha":
        k[:, :, 64:] += 3 * q[:, ::2].mean(2, keepdim=True)  # the max grows in a later tile
    return q, k, v, kw


@pytest.mark.parametrize("bug", sorted(MUTANTS))
def test_each_mutant_switch_changes_the_result(bug):
    q, k, v, kw = _mutant_input(bug)
    good = attention(q, k, v, **kw)
    bad = MUTANTS[bug](q, k, v, **kw)
    assert MUTANTS[bug].__doc__ and MUTANTS[bug].__name__ == f"attention_{bug}"
    differs = (bad - good).abs().nan_to_num(math.inf).max()
    assert differs > 1e-3, f"mutant {bug} is indistinguishable here"
