"""The fuzzer drives attention_with_kvcache (flashproof/fuzz/kvcache.py): the adapter turns dense
problems into ragged, paged, poisoned cache calls; short campaigns of both paths pass; and a wrapper
that reads one position past each length (onto the NaN the adapter plants there) is caught."""
from __future__ import annotations

import pytest
import torch

from flashproof.fuzz import kvcache, targets
from flashproof.fuzz.campaign import run_campaign


def _case(seqlens, causal=True, window=None):
    nq, nk = sum(a for a, _ in seqlens), sum(b for _, b in seqlens)
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(1, 4, nq, 8, generator=g), torch.randn(1, 2, nk, 8, generator=g), torch.randn(1, 2, nk, 8, generator=g)
    cu = lambda xs: torch.tensor([0] + xs, dtype=torch.int32).cumsum(0).to(torch.int32)  # noqa: E731
    return targets.Case(q, k, v, torch.ones(1, 4, nq, nk, dtype=torch.bool), 0.3, causal, window,
                        cu([a for a, _ in seqlens]), cu([b for _, b in seqlens]), True)


def test_varlen_case_becomes_ragged_requests_with_poison_past_each_length():
    c = _case(((2, 0), (1, 1), (3, 40), (0, 5)))
    q, k, v, kw, nq = kvcache.to_kvcache_call(c)
    assert kw["cache_seqlens"].tolist() == [0, 1, 40, 5] and nq == [2, 1, 3, 0] and q.shape[2] == 3
    if "block_table" in kw:                      # (num_pages, page, Hkv, D): unused slots and pages NaN
        assert torch.isnan(k).any() and kw["block_table"][0].eq(-1).all()
    else:
        assert torch.isnan(k[2, :, 40:]).all() and torch.isnan(k[0]).all()
    out = targets.get("kvcache-torch").run(c, True)
    assert out.out.shape == (1, 4, 6, 8) and torch.isfinite(out.out).all()


def test_paged_calls_come_in_both_layouts_and_agree():
    """The adapter's paged calls are stored slots first (NHD) or heads first (kv_layout="HND"); over these
    shapes both occur, and an HND call gives what the same pages in NHD give."""
    seen = set()
    for n in range(2, 24):
        c = _case(((1, n), (2, 3 * n)))
        q, k, v, kw, nq = kvcache.to_kvcache_call(c)
        if "block_table" not in kw:
            continue
        layout = kw.get("kv_layout", "NHD")
        seen.add(layout)
        if layout == "HND":
            from flashproof.kernels.kvcache import attention_with_kvcache
            assert k.shape[1] == 2 and k.shape[2] == kvcache.PAGE_SIZE
            got = attention_with_kvcache(q, k, v, backend="torch", **kw)
            nhd = {**kw, "kv_layout": "NHD"}
            same = attention_with_kvcache(q, k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous(),
                                          backend="torch", **nhd)
            assert torch.equal(got.out, same.out) and torch.equal(got.lse, same.lse)
    assert seen == {"NHD", "HND"}, seen


@pytest.mark.parametrize("name", ["kvcache-torch", "kvcache-triton"])
def test_short_campaign_passes(name):
    s = run_campaign(name, device="cpu", dtypes=("fp32",), budget=6 if name.endswith("triton") else 12, seed=2,
                     rounds=1)
    assert s["available"], s
    assert s["passed"], s["deviations"]


def test_a_read_past_the_length_is_caught():
    """Negative control: the same adapter with every length one longer reads the NaN planted there."""
    base = kvcache.run("torch")

    def reads_past(c, det):
        real = kvcache.to_kvcache_call

        def longer(case):
            q, k, v, kw, nq = real(case)
            kw = dict(kw, cache_seqlens=kw["cache_seqlens"] + 1)
            return q, k, v, kw, nq
        kvcache.to_kvcache_call = longer
        try:
            return base(c, det)
        finally:
            kvcache.to_kvcache_call = real
    t = targets.get("kvcache-torch")
    targets.register(t._replace(name="kvcache-reads-past", run=reads_past))
    s = run_campaign("kvcache-reads-past", device="cpu", dtypes=("fp32",), budget=12, seed=2, rounds=1,
                     shrink_seconds=5)
    assert not s["passed"] and s["deviations"], s
