"""Sampler test problems and the coupled checker (used by tests/sampler/): the same injected uniforms must
give bit-identical tokens from ``flashproof.kernels.rejection_sample`` and the verified reference
``verify``; plus the well-formed inputs the validation tables mutate.

``sampler_problems`` draws batches with the adversarial families of DESIGN.md behind flags the
shrinker can switch off: u = 0.0 and u = 1 − 2⁻²⁴, p_draft(x) = 0 at the drafted token, p_target =
p_draft bitwise, disjoint supports, a bonus-only sentinel, 0-draft rows, one-hot drafts, greedy rows.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from hypothesis import strategies as st

from flashproof.kernels.sampler.api import SamplerUniforms, rejection_sample, row_sum_tol
from flashproof.verified.speculative import CycleUniforms, verify

U_MAX32 = 1 - 2.0 ** -24


class SamplerCase(NamedTuple):
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
          one_hot=False, u_edges=False, greedy=False, ragged=True, dtype=torch.float32) -> SamplerCase:
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
    return SamplerCase(ids, None if one_hot else pd, pt, pb, k_b, u, g)


@st.composite
def sampler_problems(draw, *, vocab=st.sampled_from([1, 2, 3, 5, 8, 17, 8191, 8192, 8193]), max_batch=4, max_k=4):
    """Problems that shrink toward B = 1, K = 0, the smallest vocabulary and no adversarial family."""
    V = draw(vocab)
    flags = {f: draw(st.booleans()) for f in ("draft_zero", "equal", "disjoint", "sentinel", "one_hot",
                                              "u_edges", "greedy")}
    return build(draw(st.integers(0, 2 ** 31)), draw(st.integers(1, max_batch)), draw(st.integers(0, max_k)), V,
                 zeros=draw(st.sampled_from([0.0, 0.3, 0.8])), **flags)


def reference(pr: SamplerCase, b: int):
    k = int(pr.num_draft_tokens[b])
    rows_t = pr.p_target[b, :k].tolist() + [pr.p_bonus[b].tolist()]
    rows_d = None if pr.p_draft is None else pr.p_draft[b, :k].tolist()
    uni = CycleUniforms(pr.uniforms.accept[b, :k].tolist(), float(pr.uniforms.residual[b]), float(pr.uniforms.bonus[b]))
    return verify(pr.draft_token_ids[b, :k].tolist(), rows_t, rows_d, uni, greedy=bool(pr.greedy[b]),
                  sum_tol=row_sum_tol(pr.p_target.dtype))


def check_coupled(pr: SamplerCase, device="cpu", backend="torch", **kw) -> None:
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


def smallest_residual_problem(dtype, eps: float, u_residual: float) -> SamplerCase:
    """V = 2, one draft (token 0, p_draft one-hot on it), p_target = [1 − 2^-24, eps]: the draft is
    rejected at u = 1 − 2^-24 and the residual is [0, eps]. eps = 2^-40 is the smallest nonempty
    residual (W = [0, 1]); eps = 2^-41 gives W = [0, 0], i.e. the empty-residual fallback to p_target."""
    pt = torch.tensor([[[1 - 2.0 ** -24, eps]]], dtype=torch.float64).to(dtype)
    pd = torch.tensor([[[1.0, 0.0]]], dtype=dtype)
    u = SamplerUniforms(torch.tensor([[U_MAX32]], dtype=torch.float64), torch.tensor([u_residual], dtype=torch.float64),
                        torch.zeros(1, dtype=torch.float64))
    return SamplerCase(torch.zeros(1, 1, dtype=torch.int64), pd, pt, pt[:, 0].clone(), torch.ones(1, dtype=torch.int64), u,
                   torch.zeros(1, dtype=torch.bool))




# ----------------------------------------------------------------- well-formed inputs for the validation tables
B, K, V = 3, 2, 6  # the validation tables' shapes


def good():
    g = torch.Generator().manual_seed(0)
    pt = torch.softmax(torch.randn(B, K, V, generator=g), -1)
    pd = torch.softmax(torch.randn(B, K, V, generator=g), -1)
    pb = torch.softmax(torch.randn(B, V, generator=g), -1)
    ids = torch.randint(0, V, (B, K), generator=g)
    return dict(draft_token_ids=ids, p_draft=pd, p_target=pt, p_bonus=pb)


def _set(name, idx, val):
    def f(a):
        a[name] = a[name].clone()
        a[name][idx] = val
        return a
    return f


def _renorm_bad(name, idx, scale):
    def f(a):
        a[name] = a[name].clone()
        a[name][idx] = a[name][idx] * scale
        return a
    return f


BAD_INPUTS = [
    ("nan-target", _set("p_target", (1, 0, 2), float("nan")), {}, ValueError, "NaN"),
    ("nan-draft", _set("p_draft", (0, 1, 0), float("nan")), {}, ValueError, "NaN"),
    ("nan-bonus-row", lambda a: {**a, "p_bonus": torch.full((B, V), float("nan"))}, {}, ValueError, "NaN"),
    ("negative-prob", _set("p_target", (2, 1, 3), -0.1), {}, ValueError, "negative"),
    ("negative-sums-to-one", _set("p_draft", (2, 1), torch.tensor([0.625, 0.5, -0.125, 0.0, 0.0, 0.0])), {},
     ValueError, "negative"),
    ("negative-target-sums-to-one", _set("p_target", (0, 0), torch.tensor([0.0, 0.25, 1.0, -0.25, 0.0, 0.0])), {},
     ValueError, "negative"),
    ("row-not-normalised", _renorm_bad("p_target", (0, 0), 1.01), {}, ValueError, "sums to"),
    ("bonus-not-normalised", _renorm_bad("p_bonus", (1,), 0.5), {}, ValueError, "sums to"),
    ("inf-prob", _set("p_draft", (0, 0, 0), float("inf")), {}, ValueError, "sums to"),
    ("token-too-large", _set("draft_token_ids", (1, 1), V), {}, ValueError, "not a token id"),
    ("token-negative", _set("draft_token_ids", (0, 0), -1), {}, ValueError, "not a token id"),
    ("ids-float", lambda a: {**a, "draft_token_ids": a["draft_token_ids"].float()}, {}, TypeError, "integer"),
    ("target-2d", lambda a: {**a, "p_target": a["p_target"][:, 0]}, {}, ValueError, "(B, K, V)"),
    ("draft-shape", lambda a: {**a, "p_draft": a["p_draft"][:, :, :-1]}, {}, ValueError, "p_draft must be"),
    ("bonus-shape", lambda a: {**a, "p_bonus": a["p_bonus"][:-1]}, {}, ValueError, "p_bonus must be"),
    ("ids-shape", lambda a: {**a, "draft_token_ids": a["draft_token_ids"][:, :1]}, {}, ValueError, "draft_token_ids must be"),
    ("dtype-mismatch", lambda a: {**a, "p_draft": a["p_draft"].double()}, {}, TypeError, "dtype"),
    ("int-probs", lambda a: {**a, "p_target": a["p_target"].long()}, {}, TypeError, "floating"),
    ("num-drafts-too-big", lambda a: a, {"num_draft_tokens": torch.tensor([0, 3, 1])}, ValueError, "num_draft_tokens[1]"),
    ("num-drafts-float", lambda a: a, {"num_draft_tokens": torch.tensor([0.0, 1.0, 1.0])}, ValueError, "integers"),
    ("uniform-one", lambda a: a, {"uniforms": SamplerUniforms(torch.ones(B, K), torch.zeros(B), torch.zeros(B))},
     ValueError, "[0, 1)"),
    ("uniform-nan", lambda a: a, {"uniforms": SamplerUniforms(torch.zeros(B, K), torch.full((B,), math.nan),
                                                              torch.zeros(B))}, ValueError, "uniforms.residual"),
    ("uniform-residual-one", lambda a: a, {"uniforms": SamplerUniforms(torch.zeros(B, K), torch.ones(B), torch.zeros(B))},
     ValueError, "uniforms.residual[0] = 1.0 is not in [0, 1)"),
    ("uniform-bonus-one", lambda a: a, {"uniforms": SamplerUniforms(torch.zeros(B, K), torch.zeros(B), torch.ones(B))},
     ValueError, "uniforms.bonus[0] = 1.0 is not in [0, 1)"),
    ("uniform-bonus-negative", lambda a: a, {"uniforms": SamplerUniforms(torch.zeros(B, K), torch.zeros(B),
                                                                         torch.full((B,), -2.0 ** -30))},
     ValueError, "uniforms.bonus[0]"),
    ("uniform-shape", lambda a: a, {"uniforms": SamplerUniforms(torch.zeros(B, K + 1), torch.zeros(B), torch.zeros(B))},
     ValueError, "uniforms.accept"),
    ("greedy-shape", lambda a: a, {"greedy": torch.zeros(B + 1, dtype=torch.bool)}, ValueError, "greedy"),
    ("check-mode", lambda a: a, {"check": "none"}, ValueError, "check"),
]


