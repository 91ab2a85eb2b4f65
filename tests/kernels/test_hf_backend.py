"""The Hugging Face backend (``flashproof.kernels.integrations.hf``) on a tiny randomly initialised
Llama built from a config here (2 layers, hidden 64, 4 query heads over 2 kv heads; no weights are
downloaded, HF_HUB_OFFLINE=1). Skipped when transformers is not installed (an optional test
dependency: the ``test`` extra installs it).

Logits are judged by the one tolerance rule (``flashproof.fuzz.tolerance.judge``): the oracle is the
same model in float64 on the ``sdpa`` backend, the naive baseline the float32 model on ``sdpa``, ours
the float32 model on ``flashproof``. The rule's floor is taken at the logits' own magnitude (the
``out`` floor with M = max |logits|); there is no per-pair score term for a whole model (S = 0)."""
from __future__ import annotations

import copy
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from flashproof.fuzz.tolerance import judge  # noqa: E402
from flashproof.kernels.integrations.hf import attention_forward, register  # noqa: E402


@pytest.fixture(scope="module")
def models():
    """{"sdpa": float32 model, "flashproof": the same weights on our backend, "oracle": float64 on sdpa}."""
    name = register()
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="sdpa")
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(cfg).eval()
    ours = copy.deepcopy(base)
    ours.set_attn_implementation(name)
    oracle = copy.deepcopy(base).double()
    assert ours.config._attn_implementation == name and base.config._attn_implementation == "sdpa"
    return {"sdpa": base, "flashproof": ours, "oracle": oracle}


def _batch(padded: bool):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 97, (2, 12), generator=g)
    mask = torch.ones(2, 12, dtype=torch.long)
    if padded:
        mask[1, :5] = 0  # left padding of the second sequence
    return ids, mask


def _logits(model, ids, mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def _verdict(models, ids, mask):
    keep = mask.bool()  # padded positions' logits are read by nobody
    got, base, ref = (_logits(models[n], ids, mask)[keep] for n in ("flashproof", "sdpa", "oracle"))
    mags = {"out": ref.abs().max().item(), "score": 0.0}
    return judge("out", got, ref, base, torch.float32, mags)


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "left_padding"])
def test_logits_meet_the_rule_against_sdpa(models, padded):
    v = _verdict(models, *_batch(padded))
    assert v.ok, v


def test_the_rule_refutes_a_backend_that_drops_the_padding_mask(models):
    """Negative control: the same check fails for a backend that ignores the attention mask."""
    def no_mask(module, q, k, v, attention_mask, **kw):
        return attention_forward(module, q, k, v, None, **kw)

    transformers.AttentionInterface.register("fproof_no_mask", no_mask)
    transformers.masking_utils.AttentionMaskInterface.register("fproof_no_mask",
                                                               transformers.masking_utils.sdpa_mask)
    broken = dict(models, flashproof=copy.deepcopy(models["flashproof"]))
    broken["flashproof"].set_attn_implementation("fproof_no_mask")
    assert not _verdict(broken, *_batch(True)).ok


def test_generate_with_padding_matches_sdpa(models):
    ids, mask = _batch(True)
    kw = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0, output_scores=True,
              return_dict_in_generate=True)
    ours = models["flashproof"].generate(ids, **kw)
    theirs = models["sdpa"].generate(ids, **kw)
    assert ours.sequences.shape == (2, 18)
    assert torch.equal(ours.sequences, theirs.sequences)
