"""attention_with_kvcache(kv_layout="HND"): a paged cache stored (num_pages, Hkv, page_size, ·) — the same
pages as the NHD layout, heads before slots — on the torch path and on the Triton path (under
TRITON_INTERPRET=1 on the CPU), against the oracle by the tolerance rule and bitwise equal to the NHD call
on the same pages, with permuted page tables and poison pages."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from support.kvcache_problems import failures, make, reference, run, verdicts

HND = [dict(lengths=[0, 1, 17, 40], heads_q=4, heads_kv=2, n_q=3, page_size=16),
       dict(lengths=[33, 70], heads_q=8, heads_kv=1, n_q=5, page_size=32, window=(20, None)),
       dict(lengths=[5, 64], heads_q=2, heads_kv=2, n_q=1, page_size=16, causal=False, poison=float("inf"))]
BACKENDS = [("torch", {}), pytest.param("triton", {"tuning": "first"}, marks=pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton is not installed"))]


@pytest.mark.parametrize("backend,extra", BACKENDS, ids=["torch", "triton"])
@pytest.mark.parametrize("problem", HND, ids=["ragged-G2", "window-G8", "noncausal-inf-poison"])
def test_paged_hnd_layout_matches_the_oracle_and_nhd(problem, backend, extra):
    hnd, nhd = make(kv_layout="HND", **problem), make(**problem)
    assert hnd.k_cache.shape[1] == problem["heads_kv"] and hnd.k_cache.is_contiguous()
    ref = reference(hnd)
    for splits in (None, 1, 3):
        got = run(hnd, backend=backend, num_splits=splits, **extra)
        msg = failures(verdicts(hnd, got, ref), f"num_splits={splits}: ")
        assert not msg, msg
        same = run(nhd, backend=backend, num_splits=splits, **extra)
        assert torch.equal(got.out, same.out) and torch.equal(got.lse, same.lse)
