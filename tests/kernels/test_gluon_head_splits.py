"""The Gluon backward's head split (``gluon.bwd.head_splits``): how many CTAs share one (batch, KV head)'s
key block. The kernel takes G / splits consecutive query heads per CTA, so the count must divide G."""
from __future__ import annotations

import pytest

pytest.importorskip("triton")
from flashproof.kernels.attention.gluon import bwd  # noqa: E402


@pytest.mark.parametrize("G", [1, 2, 3, 4, 5, 6, 8, 16])
@pytest.mark.parametrize("deterministic", [False, True])
def test_the_split_divides_the_group(G, deterministic):
    S = bwd.head_splits(G, deterministic)
    assert 1 <= S <= G and G % S == 0


@pytest.mark.parametrize("G, deterministic, want", [
    (1, False, 1), (1, True, 1),     # Hq = Hkv: one CTA per key block, as before the split
    (2, False, 1), (2, True, 2),
    (4, False, 2), (4, True, 4),     # two heads per CTA; deterministic, one
    (8, False, 4), (8, True, 8),
    (3, False, 3),                   # an odd group: one head per CTA
    (6, False, 3),
])
def test_heads_per_cta(G, deterministic, want):
    assert bwd.head_splits(G, deterministic) == want
