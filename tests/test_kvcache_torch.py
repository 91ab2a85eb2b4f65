"""The torch path of attention_with_kvcache against the oracle, by the tolerance rule: ragged
lengths (0 and 1 included), Nq 1…16, contiguous and paged caches with permuted page tables, poison
past every request's length, GQA ratios 1–8, windows, and the split count forced to several values
(each split merged by the merge rule), in float32 and float64."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashproof.fuzz.tolerance import agree
from support.kvcache_problems import CASES, SPLITS, failures, make, reference, run, verdicts


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_torch_path_matches_oracle(case, dtype):
    """Each split count (None = the heuristic's) against one oracle run of the problem."""
    _, problem, call = case
    p = make(dtype=dtype, **problem)
    ref = reference(p)
    bad = []
    for splits in (None, *SPLITS):
        got = run(p, backend="torch", num_splits=splits, **call)
        assert got.out.dtype == dtype and got.lse.dtype == dtype
        bad.append(failures(verdicts(p, got, ref), f"num_splits={splits}: "))
    assert not any(bad), " | ".join(b for b in bad if b)


def test_split_counts_agree_in_float64():
    """Merge exactness: every split count gives the same result as one split, to float64 rounding: two
    float64 evaluations of one function, judged by the tolerance module's agreement rule (``agree``);
    the empty rows (lse −∞) must match exactly, as the rule requires of non-finite entries."""
    p = make(lengths=[0, 1, 5, 33, 64, 100], heads_q=4, heads_kv=2, n_q=3, page_size=16, dtype=torch.float64)
    mags = reference(p).mags
    one = run(p, backend="torch", num_splits=1)
    for s in (2, 3, 4, 5, 8, 13, 64):
        many = run(p, backend="torch", num_splits=s)
        for v in (agree("out", many.out, one.out, mags), agree("lse", many.lse, one.lse, mags)):
            assert v.ok, (s, v)


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(0, 48), min_size=1, max_size=4), n_q=st.integers(1, 16),
       group=st.sampled_from([1, 2, 4, 8]), page=st.sampled_from([0, 16, 32]), splits=st.integers(1, 6),
       left=st.one_of(st.none(), st.integers(0, 20)), causal=st.booleans(), seed=st.integers(0, 3))
def test_torch_path_fuzzed(lengths, n_q, group, page, splits, left, causal, seed):
    """Drawn problems (hypothesis shrinks toward one short request, Nq = 1, no window)."""
    window = None if left is None else (left, None)
    p = make(lengths=lengths, heads_q=group, heads_kv=1, n_q=n_q, page_size=page, window=window, causal=causal,
             seed=seed)
    msg = failures(verdicts(p, run(p, backend="torch", num_splits=splits)))
    assert not msg, msg

