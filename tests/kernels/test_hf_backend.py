"""The Hugging Face backend (``flashproof.kernels.integrations.hf``) on a tiny randomly initialised
Llama built from a config here (2 layers, hidden 64, 4 query heads over 2 kv heads; no weights are
downloaded, HF_HUB_OFFLINE=1). Skipped when transformers is not installed (an optional test
dependency: the ``test`` extra installs it).

Each attention call the model makes on our backend is judged by the one tolerance rule, as the kernel
tests judge theirs (tests/support/kernel_cases.py): the q, k, v the model handed the call (float32), the
oracles of ``flashproof.fuzz.oracle.oracles`` (the verified reference and the dense float64 formula) on
them with the causal LM's own mask (key j ≤ query i, padding keys excluded: built here, not taken from
transformers' mask or ours), the naive baseline ``tolerance.naive`` in float32, and the floor from
``tolerance.magnitudes`` of those q, k, v (``oracles`` computes it). Rows with no allowed key (left
padding) must be exactly 0, the documented convention. The whole model is checked end to end by
``generate`` against the ``sdpa`` backend."""
from __future__ import annotations

import contextlib
import copy
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from flashproof.fuzz.oracle import oracles, read_inputs  # noqa: E402
from flashproof.fuzz.problem import Problem, ProblemSpec  # noqa: E402
from flashproof.fuzz.tolerance import judge, naive  # noqa: E402
from flashproof.kernels.integrations.hf import attention_forward, register  # noqa: E402


@pytest.fixture(scope="module")
def models():
    """{"sdpa": float32 model, "flashproof": the same weights on our backend}."""
    name = register()
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="sdpa")
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(cfg).eval()
    ours = copy.deepcopy(base)
    ours.set_attn_implementation(name)
    assert ours.config._attn_implementation == name and base.config._attn_implementation == "sdpa"
    return {"sdpa": base, "flashproof": ours}


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


@contextlib.contextmanager
def _recorded(name: str):
    """The calls of the attention implementation ``name`` made inside the block, as (query, key, value,
    scaling, output (B, Nq, Hq, Dv)); the implementation itself still answers them."""
    fn = transformers.AttentionInterface()[name]
    calls = []

    def record(module, query, key, value, attention_mask, **kw):
        out, weights = fn(module, query, key, value, attention_mask, **kw)
        calls.append((query.detach(), key.detach(), value.detach(), kw.get("scaling"), out.detach()))
        return out, weights

    transformers.AttentionInterface.register(name, record)
    try:
        yield calls
    finally:
        transformers.AttentionInterface.register(name, fn)


def _verdicts(model, ids, mask) -> list:
    """The rule's verdict on the output of every attention call of one forward of ``model``."""
    with _recorded(model.config._attn_implementation) as calls:
        _logits(model, ids, mask)
    verdicts = []
    for q, k, v, scale, got in calls:
        (B, Hq, N, D), Hkv, Nk, Dv = q.shape, k.shape[1], k.shape[2], v.shape[-1]
        scale = D ** -0.5 if scale is None else scale
        causal = torch.arange(Nk)[None, :] <= torch.arange(N)[:, None]
        allowed = (causal[None, None] & mask.bool()[:, None, None, :]).expand(B, Hq, N, Nk).contiguous()
        prob = Problem(ProblemSpec(batch=B, heads_q=Hq, heads_kv=Hkv, n_q=N, n_k=Nk, d=D, dv=Dv),
                       q.double(), k.double(), v.double(), torch.zeros(B, Hq, N, Dv, dtype=torch.float64),
                       allowed, scale, None, None)
        orc = oracles(prob)
        base = naive(*(t.to(q.dtype) for t in read_inputs(prob)), prob.allowed, scale)[0]
        verdicts.append(judge("out", got.transpose(1, 2), orc.expected.out, base, q.dtype, orc.mags,
                              exact_zero=prob.empty_rows[..., None], gold=orc.gold.out))
    return verdicts


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "left_padding"])
def test_attention_calls_meet_the_rule(models, padded):
    verdicts = _verdicts(models["flashproof"], *_batch(padded))
    assert len(verdicts) == models["flashproof"].config.num_hidden_layers  # every layer's call was judged
    bad = [v for v in verdicts if not v.ok]
    assert not bad, bad


def test_the_rule_refutes_a_backend_that_drops_the_padding_mask(models):
    """Negative control: the same check fails for a backend that ignores the attention mask."""
    def no_mask(module, q, k, v, attention_mask, **kw):
        return attention_forward(module, q, k, v, None, **kw)

    transformers.AttentionInterface.register("fproof_no_mask", no_mask)
    transformers.masking_utils.AttentionMaskInterface.register("fproof_no_mask",
                                                               transformers.masking_utils.sdpa_mask)
    broken = copy.deepcopy(models["flashproof"])
    broken.set_attn_implementation("fproof_no_mask")
    verdicts = _verdicts(broken, *_batch(True))
    assert len(verdicts) == broken.config.num_hidden_layers
    assert not all(v.ok for v in verdicts)


def test_generate_with_padding_matches_sdpa(models):
    ids, mask = _batch(True)
    kw = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0, output_scores=True,
              return_dict_in_generate=True)
    ours = models["flashproof"].generate(ids, **kw)
    theirs = models["sdpa"].generate(ids, **kw)
    assert ours.sequences.shape == (2, 18)
    assert torch.equal(ours.sequences, theirs.sequences)
