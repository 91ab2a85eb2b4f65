"""Coupled differential test: the same injected uniforms give bit-identical tokens from
``flashproof.kernels.sampler.rejection_sample`` and the verified reference ``verify``.

``sampler_problems`` draws batches with the adversarial families of DESIGN.md behind flags the
shrinker can switch off: u = 0.0 and u = 1 − 2⁻²⁴, p_draft(x) = 0 at the drafted token, p_target =
p_draft bitwise, disjoint supports, a bonus-only sentinel, 0-draft rows, one-hot drafts, greedy rows.
"""
from __future__ import annotations

from typing import NamedTuple

import pytest
import torch
from hypothesis import given, strategies as st

from flashproof.kernels.sampler.api import SamplerUniforms, rejection_sample, row_sum_tol
from flashproof.verified.speculative import CycleUniforms, verify

U_MAX32 = 1 - 2.0 ** -24


class Problem(NamedTuple):
    draft_token_ids: torch.Tensor  # (B, K)
    p_draft: torch.Tensor | None  # (B, K, V)
    p_target: torch.Tensor  # (B, K, V)
    p_bonus: torch.Tensor  # (B, V)
    num_draft_tokens: torch.Tensor  # (B,)
    uniforms: SamplerUniforms
    greedy: torch.Tensor  # (B,)


def _rows(gen, shape, V, zeros, dtype):
    """Random distributions over the last axis; a ``zeros`` fraction of entries exactly 0."""
    logits = torch.randn(*shape, V, generator=gen, dtype=torch.float64) * 3
    if zeros:
        logits[torch.rand(*shape, V, generator=gen, dtype=torch.float64) < zeros] = float("-inf")
        logits[..., 0] = torch.where(torch.isinf(logits).all(-1), 0.0, logits[..., 0])
    return torch.softmax(logits, -1).to(dtype)


def _renorm(x, fallback: int):
    """Rows scaled to sum 1; an all-zero row becomes a point mass on ``fallback``."""
    s = x.sum(-1, keepdim=True)
    hot = torch.zeros_like(x)
    hot[..., fallback] = 1
    return torch.where(s > 0, x / torch.where(s > 0, s, 1), hot)


def build(seed, B, K, V, *, zeros=0.0, draft_zero=False, equal=False, disjoint=False, sentinel=False,
          one_hot=False, u_edges=False, greedy=False, ragged=True, dtype=torch.float32) -> Problem:
    gen = torch.Generator().manual_seed(seed)
    pt = _rows(gen, (B, K), V, zeros, torch.float64)
    pd = _rows(gen, (B, K), V, zeros, torch.float64)
    pb = _rows(gen, (B,), V, zeros, torch.float64)
    if disjoint and V > 1:
        cut = V // 2
        pt[..., cut:] = 0
        pd[..., :cut] = 0
        pt, pd = _renorm(pt, 0), _renorm(pd, V - 1)
    if equal:
        pd = pt.clone()
    if sentinel and V > 1:  # token V−1: only the bonus row can emit it
        pt[..., V - 1] = 0
        pt = _renorm(pt, 0)
        pd = pt.clone()
        pb = torch.zeros(B, V, dtype=torch.float64)
        pb[:, V - 1] = 1
    ids = torch.multinomial(pd.reshape(-1, V).float(), 1, generator=gen).reshape(B, K)
    if draft_zero and K > 0:  # the drafted token has p_draft(x) = 0
        pd[torch.arange(B)[:, None], torch.arange(K)[None, :], ids] = 0
        pd = _renorm(pd, 0)
    pt, pd, pb = pt.to(dtype), pd.to(dtype), pb.to(dtype)
    k_b = torch.randint(0, K + 1, (B,), generator=gen) if ragged else torch.full((B,), K)
    if ragged and B > 1:
        k_b[0] = 0
    u = SamplerUniforms(torch.rand(B, K, generator=gen, dtype=torch.float64),
                        torch.rand(B, generator=gen, dtype=torch.float64),
                        torch.rand(B, generator=gen, dtype=torch.float64))
    if u_edges:
        pick = torch.rand(B, K, generator=gen)
        acc = torch.where(pick < 0.3, 0.0, torch.where(pick < 0.6, U_MAX32, u.accept))
        u = SamplerUniforms(acc, torch.where(torch.rand(B, generator=gen) < 0.5, 0.0, U_MAX32),
                            torch.where(torch.rand(B, generator=gen) < 0.5, 0.0, U_MAX32))
    g = torch.rand(B, generator=gen) < 0.5 if greedy else torch.zeros(B, dtype=torch.bool)
    return Problem(ids, None if one_hot else pd, pt, pb, k_b, u, g)


@st.composite
def sampler_problems(draw, *, vocab=st.sampled_from([1, 2, 3, 5, 8, 17, 8191, 8192, 8193]), max_batch=4, max_k=4):
    """Problems that shrink toward B = 1, K = 0, the smallest vocabulary and no adversarial family."""
    V = draw(vocab)
    flags = {f: draw(st.booleans()) for f in ("draft_zero", "equal", "disjoint", "sentinel", "one_hot",
                                              "u_edges", "greedy")}
    return build(draw(st.integers(0, 2 ** 31)), draw(st.integers(1, max_batch)), draw(st.integers(0, max_k)), V,
                 zeros=draw(st.sampled_from([0.0, 0.3, 0.8])), **flags)


def reference(pr: Problem, b: int):
    k = int(pr.num_draft_tokens[b])
    rows_t = pr.p_target[b, :k].tolist() + [pr.p_bonus[b].tolist()]
    rows_d = None if pr.p_draft is None else pr.p_draft[b, :k].tolist()
    uni = CycleUniforms(pr.uniforms.accept[b, :k].tolist(), float(pr.uniforms.residual[b]), float(pr.uniforms.bonus[b]))
    return verify(pr.draft_token_ids[b, :k].tolist(), rows_t, rows_d, uni, greedy=bool(pr.greedy[b]),
                  sum_tol=row_sum_tol(pr.p_target.dtype))


def check_coupled(pr: Problem, device="cpu", backend="torch", **kw) -> None:
    """``kw``: further rejection_sample arguments (check, triton_config)."""
    mv = lambda t: None if t is None else t.to(device)  # noqa: E731
    out = rejection_sample(mv(pr.draft_token_ids), mv(pr.p_draft), mv(pr.p_target), mv(pr.p_bonus),
                           num_draft_tokens=mv(pr.num_draft_tokens), greedy=mv(pr.greedy),
                           uniforms=SamplerUniforms(*(mv(t) for t in pr.uniforms)), backend=backend, **kw)
    tokens, n_acc = out.tokens.cpu(), out.num_accepted.cpu()
    B, K = pr.draft_token_ids.shape
    assert tokens.shape == (B, K + 1) and n_acc.shape == (B,)
    for b in range(B):
        ref = reference(pr, b)
        n = int(n_acc[b])
        assert n == ref.n_accepted, (b, n, ref)
        assert tuple(tokens[b, :n + 1].tolist()) == ref.tokens, (b, tokens[b], ref)
        assert (tokens[b, n + 1:] == -1).all()
        last = int(tokens[b, n])  # the replacement/bonus token: never a p = 0 token of the row it came from
        row = pr.p_bonus[b] if n == int(pr.num_draft_tokens[b]) else pr.p_target[b, n]
        assert row[last] > 0 or bool(pr.greedy[b]), (b, last)


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


def smallest_residual_problem(dtype, eps: float, u_residual: float) -> Problem:
    """V = 2, one draft (token 0, p_draft one-hot on it), p_target = [1 − 2^-24, eps]: the draft is
    rejected at u = 1 − 2^-24 and the residual is [0, eps]. eps = 2^-40 is the smallest nonempty
    residual (W = [0, 1]); eps = 2^-41 gives W = [0, 0], i.e. the empty-residual fallback to p_target."""
    pt = torch.tensor([[[1 - 2.0 ** -24, eps]]], dtype=torch.float64).to(dtype)
    pd = torch.tensor([[[1.0, 0.0]]], dtype=dtype)
    u = SamplerUniforms(torch.tensor([[U_MAX32]], dtype=torch.float64), torch.tensor([u_residual], dtype=torch.float64),
                        torch.zeros(1, dtype=torch.float64))
    return Problem(torch.zeros(1, 1, dtype=torch.int64), pd, pt, pt[:, 0].clone(), torch.ones(1, dtype=torch.int64), u,
                   torch.zeros(1, dtype=torch.bool))


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
