"""Bad input to the production sampler and to the reference: a clear error naming the problem, never a
plausible token. Table-driven; each case states the fragment the message must contain."""
from __future__ import annotations

import pytest
import torch
from support.sampler_cases import BAD_INPUTS, B, K, V, good

from flashproof.kernels.sampler.api import SamplerUniforms, rejection_sample
from flashproof.verified.speculative import CycleUniforms, rejection_step, verify

@pytest.mark.parametrize("name,mutate,kw,exc,fragment", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
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
