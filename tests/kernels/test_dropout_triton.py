"""Dropout in the Triton kernels (under TRITON_INTERPRET=1 on CPU, small sizes): the bits the score
loop draws (``fwd.dropout_keep``, written out by a test kernel) are dropout_mask's; forward and
gradients meet the verified reference given those bits (the one tolerance rule); p = 0 is the
undropped call bitwise; same seed replays bitwise; Triton and torch give the same function."""
from __future__ import annotations

import pytest
import torch
from support.dropout_cases import DROP_CASES, failures, run, run_and_judge
from support.kernel_cases import ids, leaves, problem_of

from flashproof.kernels import attention
from flashproof.kernels.attention import dropout_mask
from flashproof.kernels.attention import dropout as D
from flashproof.kernels.interpreter import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="the Triton kernels on CPU need TRITON_INTERPRET=1")
triton = pytest.importorskip("triton")


from support.dropout_bits import write_keep  # noqa: E402 (imports triton)


@pytest.mark.parametrize("seed, p", [(0, 0.5), (12345, 0.1), (2 ** 31 + 7, 0.9), (2 ** 63 - 1, 0.3)])
def test_the_kernels_bits_are_dropout_mask(seed, p):
    B, Hq, Nq, Nk = 2, 3, 20, 37
    out = torch.empty(B, Hq, Nq, Nk, dtype=torch.int8)
    drop = D.make(p, seed)
    write_keep[(B * Hq, triton.cdiv(Nq, 16), triton.cdiv(Nk, 16))](out, drop.seed, drop.t, Hq, Nq, Nk,
                                                                        BLOCK_M=16, BLOCK_N=16)
    assert torch.equal(out.bool(), dropout_mask(seed, p, (B, Hq, Nq, Nk)))


@pytest.mark.parametrize("block_m, block_n", [(16, 32), (32, 64), (64, 16)])
def test_the_kernels_bits_do_not_depend_on_the_tile(block_m, block_n):
    """The forward and the backward kernels use different tiles: every tile shape draws the same bits."""
    B, Hq, Nq, Nk = 1, 2, 40, 75
    out = torch.empty(B, Hq, Nq, Nk, dtype=torch.int8)
    drop = D.make(0.3, 99)
    write_keep[(B * Hq, triton.cdiv(Nq, block_m), triton.cdiv(Nk, block_n))](out, drop.seed, drop.t, Hq, Nq, Nk,
                                                                              BLOCK_M=block_m, BLOCK_N=block_n)
    assert torch.equal(out.bool(), dropout_mask(99, 0.3, (B, Hq, Nq, Nk)))


@pytest.mark.parametrize("case", DROP_CASES, ids=ids(DROP_CASES))
def test_triton_dropout_meets_the_reference_with_the_same_bits(case):
    bad = run_and_judge(case, torch.float32, "triton", 0.3, 1234)
    assert not bad, failures(f"{case.id} triton", bad)


def test_triton_dropout_f16():
    bad = run_and_judge(DROP_CASES[1], torch.float16, "triton", 0.3, 77)
    assert not bad, failures("causal_gqa f16 triton", bad)


def test_triton_p_near_one():
    bad = run_and_judge(DROP_CASES[1], torch.float32, "triton", 0.99, 5)
    assert not bad, failures("p=0.99 triton", bad)


def test_triton_check_rejects_a_fresh_mask():
    assert run_and_judge(DROP_CASES[0], torch.float32, "triton", 0.3, 1234, mask_seed=1235)


def test_triton_p_zero_is_the_undropped_call_bitwise():
    prob, kw = problem_of(DROP_CASES[1], torch.float32)
    q, k, v = leaves(prob, torch.float32)
    res = attention(q, k, v, return_lse=True, backend="triton", tuning="first", **kw)
    grads = torch.autograd.grad(res.out, (q, k, v), prob.dout.to(torch.float32))
    got = run(DROP_CASES[1], torch.float32, "triton", 0.0, 3)[2]
    for name, want in zip(("out", "lse", "dq", "dk", "dv"), (res.out, res.lse, *grads)):
        assert torch.equal(got[name], want), name


def test_triton_same_seed_replays_bitwise():
    a = run(DROP_CASES[0], torch.float32, "triton", 0.5, 42)[2]
    b = run(DROP_CASES[0], torch.float32, "triton", 0.5, 42)[2]
    for name in a:
        assert torch.equal(a[name], b[name]), name
