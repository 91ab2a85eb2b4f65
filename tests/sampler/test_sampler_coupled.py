"""Coupled differential test: the same injected uniforms give bit-identical tokens from
``flashproof.kernels.sampler.rejection_sample`` and the verified reference ``verify``.

``sampler_problems`` draws batches with the adversarial families of DESIGN.md behind flags the
shrinker can switch off: u = 0.0 and u = 1 − 2⁻²⁴, p_draft(x) = 0 at the drafted token, p_target =
p_draft bitwise, disjoint supports, a bonus-only sentinel, 0-draft rows, one-hot drafts, greedy rows.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from support.sampler_cases import U_MAX32, SamplerCase, build, check_coupled, sampler_problems, smallest_residual_problem

from flashproof.kernels.sampler.api import SamplerUniforms, rejection_sample


@given(sampler_problems())
def test_coupled_bit_identical(pr):
    check_coupled(pr)


@pytest.mark.parametrize("family", ["u_edges", "draft_zero", "equal", "disjoint", "sentinel", "one_hot", "greedy"])
@pytest.mark.parametrize("V", [1, 2, 8191, 8192, 8193])
def test_every_adversarial_family(family, V):
    check_coupled(build(V * 7 + len(family), 5, 4, V, zeros=0.3, **{family: True}))


def test_vocab_151936():
    check_coupled(build(3, 2, 3, 151936, u_edges=True, zeros=0.3))


def test_sentinel_only_on_full_acceptance():
    pr = build(11, 6, 3, 16, sentinel=True, ragged=True)
    out = rejection_sample(pr.draft_token_ids, pr.p_draft, pr.p_target, pr.p_bonus,
                           num_draft_tokens=pr.num_draft_tokens, uniforms=pr.uniforms)
    # p_target = p_draft bitwise at every draft position: every draft is accepted, then the sentinel
    assert torch.equal(out.num_accepted, pr.num_draft_tokens)
    assert (out.tokens[torch.arange(6), out.num_accepted] == 15).all()
    check_coupled(pr)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_residual_weight_2_pow_minus_40_is_not_empty(dtype):
    """The empty-residual boundary, both sides: a residual of max 2^-40 still draws from the residual
    (token 1 even at u = 0); one of max 2^-41 is empty and draws from p_target (token 0 at u = 0.5)."""
    for eps, u_res, want in ((2.0 ** -40, 0.0, 1), (2.0 ** -41, 0.5, 0)):
        pr = smallest_residual_problem(dtype, eps, u_res)
        out = rejection_sample(pr.draft_token_ids, pr.p_draft, pr.p_target, pr.p_bonus, uniforms=pr.uniforms)
        assert out.num_accepted.tolist() == [0] and out.tokens.tolist() == [[want, -1]], (eps, out)
        check_coupled(pr)


def test_disjoint_supports_reject_at_once():
    pr = build(5, 4, 4, 10, disjoint=True, ragged=False)
    out = rejection_sample(pr.draft_token_ids, pr.p_draft, pr.p_target, pr.p_bonus, uniforms=pr.uniforms)
    assert (out.num_accepted == 0).all() and (out.tokens[:, 1:] == -1).all()
    assert (out.tokens[:, 0] < 5).all()  # drawn from the target's half of the vocabulary


def test_fp16_bf16_fp64_rows():
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        pr = build(1, 3, 3, 33, dtype=dtype)
        check_coupled(pr)


def test_generator_is_reproducible_and_zero_drafts():
    pr = build(2, 5, 3, 40)
    runs = [rejection_sample(pr.draft_token_ids, pr.p_draft, pr.p_target, pr.p_bonus,
                             num_draft_tokens=pr.num_draft_tokens, generator=torch.Generator().manual_seed(9))
            for _ in range(2)]
    assert torch.equal(runs[0].tokens, runs[1].tokens)
    assert (runs[0].num_accepted[pr.num_draft_tokens == 0] == 0).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@given(sampler_problems(max_batch=8))
def test_coupled_bit_identical_cuda(pr):
    check_coupled(pr, "cuda")
