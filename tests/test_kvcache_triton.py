"""The Triton kernels of attention_with_kvcache (the CPU runs them under TRITON_INTERPRET=1, set by
conftest) against the oracle, by the tolerance rule, on the shared case table: ragged lengths,
Nq 1…16, contiguous and paged caches (permuted tables), poison past the lengths, GQA ratios 1–8,
windows, and forced split counts (partial (out, lse) pairs merged by the merge kernel), in
float32 and float16. The first autotune config runs (``tuning="first"``): the interpreter cannot
time configurations."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from support.kvcache_problems import CASES, failures, make, reference, run, verdicts  # noqa: E402

#: the first config's BLOCK_N is 64: lengths above 64·s give s non-empty splits; the case table's
#: lengths (≤ 70) mostly leave the later splits empty, so the long cases below cover full splits
LONG = [("long/ragged-splits-full", dict(lengths=[0, 1, 130, 300], heads_q=4, heads_kv=2, n_q=3)),
        ("long/paged16-Nq5-G4", dict(lengths=[200, 257], heads_q=8, heads_kv=2, n_q=5, page_size=16)),
        ("long/window-left70-paged32", dict(lengths=[90, 333], n_q=4, window=(70, None), page_size=32)),
        # pages of 64 ≥ the first config's BLOCK_N: one table entry per tile (the hoisted read), with the
        # window's left edge rounded down to a tile
        ("long/paged64-Nq5-G4", dict(lengths=[1, 129, 200], heads_q=8, heads_kv=2, n_q=5, page_size=64)),
        ("long/paged64-window-left70", dict(lengths=[0, 150, 300], n_q=3, window=(70, None), page_size=64))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES + [(n, p, {}) for n, p in LONG], ids=[c[0] for c in CASES] + [n for n, _ in LONG])
def test_triton_path_matches_oracle(case, dtype):
    _, problem, call = case
    p = make(dtype=dtype, **problem)
    ref = reference(p)
    bad = []
    for splits in (None, 1, 3, 5):
        got = run(p, backend="triton", tuning="first", num_splits=splits, **call)
        assert got.out.dtype == dtype and got.lse.dtype == torch.float32
        bad.append(failures(verdicts(p, got, ref), f"num_splits={splits}: "))
    assert not any(bad), " | ".join(b for b in bad if b)


def test_triton_and_torch_paths_agree_on_empty_rows():
    """Rows with no readable key are exactly 0 with lse −inf on both paths (length 0; L < Nq)."""
    p = make(lengths=[0, 1, 2], n_q=4, page_size=16)
    for backend in ("torch", "triton"):
        got = run(p, backend=backend, num_splits=2, **({"tuning": "first"} if backend == "triton" else {}))
        assert torch.all(got.out[0] == 0) and torch.all(torch.isneginf(got.lse[0]))
        assert torch.all(got.out[1, :, :3] == 0) and torch.all(torch.isneginf(got.lse[1, :, :3]))
        assert torch.isfinite(got.lse[1, :, 3]).all() and torch.isfinite(got.out).all()


def _bad_call(paged, page=16):
    """Four requests, two of them bad: contiguous — lengths 41 (> Nmax = 40) and −2; paged — a length
    past max_pages · page_size and a needed table entry that is no page (plus an entry past request 0's
    length holding −1, which is never read)."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(4, 4, 2, 16, generator=gen)
    if paged:                                 # lengths in units of page / 16
        u = page // 16
        k = torch.randn(12, page, 2, 16, generator=gen)
        table = torch.randperm(12, generator=gen).to(torch.int32).reshape(4, 3)
        table[0, 2] = -1                      # request 0 (length 20u) needs entries 0 and 1 only
        table[2, 1] = 12                      # request 2 (length 30u) needs entry 1: not a page
        lens = torch.tensor([20 * u, 33 * u, 30 * u, 48 * u + 1], dtype=torch.int32)
        return q, k, k.clone(), lens, table, [2, 3]
    k = torch.randn(4, 2, 40, 16, generator=gen)
    return q, k, k.clone(), torch.tensor([5, 41, 40, -2], dtype=torch.int32), None, [1, 3]


@pytest.mark.parametrize("paged,page", [(False, 0), (True, 16), (True, 64)], ids=["contiguous", "paged16", "paged64"])
def test_bad_lengths_and_pages_are_flagged_on_the_device(paged, page):
    """No host read: a bad request's out and lse rows are all NaN, the others equal a call without
    the bad requests bitwise (same split count); ``check=True`` raises instead. Pages of 16 read one
    table entry per key (BLOCK_N = 64), pages of 64 one per tile."""
    from flashproof.kernels.kvcache import attention_with_kvcache

    q, k, v, lens, table, bad = _bad_call(paged, page)
    good = [b for b in range(4) if b not in bad]
    for splits in (1, 3):
        got = attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table, backend="triton",
                                     tuning="first", num_splits=splits, return_lse=True)
        assert torch.isnan(got.out[bad]).all() and torch.isnan(got.lse[bad]).all()
        sub = attention_with_kvcache(q[good], k if paged else k[good], v if paged else v[good],
                                     cache_seqlens=lens[good], block_table=table[good] if paged else None,
                                     backend="triton", tuning="first", num_splits=splits, return_lse=True)
        assert torch.isfinite(sub.out).all()
        assert torch.equal(got.out[good], sub.out) and torch.equal(got.lse[good], sub.lse)
    with pytest.raises(ValueError, match="cache_seqlens|block_table"):
        attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table, backend="triton", tuning="first",
                               check=True)


@pytest.mark.parametrize("fused", [True, False], ids=["fused-merge", "merge-kernel"])
def test_both_merges_match_the_oracle_and_leave_the_tickets_zero(fused):
    """Splits merged in the last program of each tile (``fused_merge``, one launch) or by the merge
    kernel: both against the oracle, on long ragged requests whose splits are all non-empty, with a bad
    request (NaN rows) among them; after the fused calls every ticket is back at zero, so the next call
    (another shape) merges correctly too. Every load, store and atomic (the tickets) bounds-checked."""
    from flashproof.fuzz.interpreter_shim import bounds_checked
    from flashproof.kernels.kvcache import KVCacheOut, api
    from flashproof.kernels.kvcache import triton as kv_triton

    with bounds_checked():
        for problem in (dict(lengths=[0, 1, 130, 300], heads_q=4, heads_kv=2, n_q=3),
                        dict(lengths=[200, 257], heads_q=8, heads_kv=2, n_q=5, page_size=16)):
            p = make(dtype=torch.float32, **problem)
            ref = reference(p)
            for splits in (2, 5):
                call = api.validate(p.q, p.k_cache, p.v_cache, cache_seqlens=p.cache_seqlens, block_table=p.block_table,
                                    causal=p.causal, window=p.window, scale=p.scale, num_splits=splits, backend="triton")
                out, lse = kv_triton.forward(p.q, p.k_cache, p.v_cache, call, tuning="first", fused_merge=fused)
                assert not failures(verdicts(p, KVCacheOut(out, lse), ref), f"num_splits={splits}: ")
                if fused:
                    assert kv_triton._TICKETS and all(int(t.abs().sum()) == 0 for t in kv_triton._TICKETS.values())
        q, k, v, lens, table, bad = _bad_call(False)
        call = api.validate(q, k, v, cache_seqlens=lens, block_table=table, causal=True, window=None, scale=None,
                            num_splits=3, backend="triton")
        out, lse = kv_triton.forward(q, k, v, call, tuning="first", fused_merge=fused)
        assert torch.isnan(out[bad]).all() and torch.isnan(lse[bad]).all()
        assert torch.isfinite(out[[0, 2]]).all()

