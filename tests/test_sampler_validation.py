"""Bad input to the production sampler and to the reference: a clear error naming the problem, never a
plausible token. Table-driven; each case states the fragment the message must contain."""
from __future__ import annotations

import math

import pytest
import torch

from flashproof.kernels.sampler.api import SamplerUniforms, rejection_sample
from flashproof.verified.speculative import CycleUniforms, rejection_step, verify

B, K, V = 3, 2, 6


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


CASES = [
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


@pytest.mark.parametrize("name,mutate,kw,exc,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_an_error(name, mutate, kw, exc, fragment):
    args = mutate(good())
    with pytest.raises(exc) as e:
        rejection_sample(args["draft_token_ids"], args["p_draft"], args["p_target"], args["p_bonus"], **kw)
    assert fragment in str(e.value), str(e.value)


@pytest.mark.parametrize("idx", [(0, 0, 1), (1, 1, 5)])
def test_nan_in_read_row_is_an_error_in_read_mode(idx):
    """check='read': a NaN in a row the sampler draws from (the bonus row here) is still an error."""
    a = good()
    a["p_draft"] = a["p_target"].clone()  # every draft accepted: the bonus rows are read
    a["p_bonus"] = a["p_bonus"].clone()
    a["p_bonus"][idx[0], idx[2]] = float("nan")
    with pytest.raises(ValueError, match="NaN|sums to"):
        rejection_sample(a["draft_token_ids"], a["p_draft"], a["p_target"], a["p_bonus"], check="read",
                         uniforms=SamplerUniforms(torch.zeros(B, K), torch.zeros(B), torch.zeros(B)))


def test_unread_positions_may_hold_anything():
    """Entries beyond num_draft_tokens are never read: NaN and out-of-range ids there are accepted."""
    a = good()
    a["p_target"][0, 1] = float("nan")
    a["draft_token_ids"][0, 1] = 10 ** 6
    out = rejection_sample(a["draft_token_ids"], a["p_draft"], a["p_target"], a["p_bonus"],
                           num_draft_tokens=torch.tensor([1, 2, 2]), generator=torch.Generator().manual_seed(1))
    assert int(out.num_accepted[0]) <= 1 and int(out.tokens[0, 2]) == -1


REF_CASES = [
    ("nan", lambda: rejection_step([0.5, float("nan")], [0.5, 0.5], 0, 0.1, 0.1), "NaN"),
    ("negative", lambda: rejection_step([1.5, -0.5], [0.5, 0.5], 0, 0.1, 0.1), "negative"),
    ("not-normalised", lambda: rejection_step([0.5, 0.4], [0.5, 0.5], 0, 0.1, 0.1), "sums to"),
    ("token", lambda: rejection_step([0.5, 0.5], [0.5, 0.5], 2, 0.1, 0.1), "not a token id"),
    ("uniform-one", lambda: rejection_step([0.5, 0.5], [0.5, 0.5], 0, 1.0, 0.1), "[0, 1)"),
    ("width", lambda: rejection_step([0.5, 0.5], [1.0], 0, 0.1, 0.1), "vocabulary"),
    ("rows-count", lambda: verify([0], [[1.0]], None, CycleUniforms([0.1], 0.1, 0.1)), "k+1"),
    ("uniforms-count", lambda: verify([0, 0], [[1.0]] * 3, None, CycleUniforms([0.1], 0.1, 0.1)), "k = 2"),
]


@pytest.mark.parametrize("name,call,fragment", REF_CASES, ids=[c[0] for c in REF_CASES])
def test_reference_bad_input(name, call, fragment):
    with pytest.raises(ValueError) as e:
        call()
    assert fragment in str(e.value)
