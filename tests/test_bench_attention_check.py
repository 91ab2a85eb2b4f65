"""``flashproof bench``'s check before timing (``bench/attention.py``: ``reference``, ``out_verdict``): a
provider's output on the first (batch, head) slice is judged by the tolerance rule against the oracle's dense
float64 formula — not against another library — on CPU tensors here. A correct bf16 attention passes, causal
and not; the negative controls (the other mask, unscaled scores) fail."""
from __future__ import annotations

import pytest
import torch

from flashproof.bench.attention import out_verdict, reference

F = torch.nn.functional.scaled_dot_product_attention


@pytest.fixture(scope="module")
def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 4, 96, 32, generator=g).to(torch.bfloat16) for _ in range(3))


@pytest.mark.parametrize("causal", [False, True])
def test_a_correct_provider_passes_and_wrong_ones_fail(qkv, causal):
    q, k, v = qkv
    ref = reference(q, k, v, causal)
    assert out_verdict(lambda q, k, v: F(q, k, v, is_causal=causal), q, k, v, ref).ok
    assert not out_verdict(lambda q, k, v: F(q, k, v, is_causal=not causal), q, k, v, ref).ok   # the other mask
    assert not out_verdict(lambda q, k, v: F(q, k, v, is_causal=causal, scale=1.0), q, k, v, ref).ok   # unscaled scores
