"""The block-sparse walk lists (``attention_triton_plan.tile_plan``, under TRITON_INTERPRET=1)
against brute force: every pair of every tile enumerated decides which tiles are visited (some
pair allowed) and which run without a predicate (every pair allowed, nothing ragged); the lists
must hold exactly those, partial ones first, each group ascending. Also: one plan per call."""
from __future__ import annotations

import itertools
import os

import pytest
import torch

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels.attention.triton import host as at  # noqa: E402
from flashproof.kernels.attention.api import BlockSparseMask, _validate  # noqa: E402


def _prob(tiles, Nq, Nk, causal=False, window=None, dense=None, bq=16, bk=16, Hq=None):
    B, Hq = tiles.shape[0], Hq or tiles.shape[1]
    q = torch.zeros(B, Hq, Nq, 8)
    k = torch.zeros(B, Hq, Nk, 8)
    return _validate(q, k, k, causal=causal, window=window, mask=BlockSparseMask(tiles, bq, bk, dense), scale=None,
                     cu_seqlens_q=None, cu_seqlens_k=None, backend="triton", deterministic=True, bugs=(),
                     return_lse=False)


def _brute(prob, TQ, TK, Nq, Nk, bq, bk):
    """(reach, full) bool (TQ, TK) by enumerating every pair of every tile."""
    left, right = prob.window
    diag = Nk - Nq
    reach = torch.zeros(TQ, TK, dtype=torch.bool)
    full = torch.zeros(TQ, TK, dtype=torch.bool)
    for a, b in itertools.product(range(TQ), range(TK)):
        oks = []
        for i, j in itertools.product(range(a * bq, (a + 1) * bq), range(b * bk, (b + 1) * bk)):
            ok = i < Nq and j < Nk
            if ok and left is not None:
                ok = j >= i + diag - left
            if ok and right is not None:
                ok = j <= i + diag + right
            oks.append(ok)
        reach[a, b] = any(oks)
        full[a, b] = all(oks) and prob.tiles.dense is None
    return reach, full


def _check_lists(plan, tiles, reach, full, B, Hq):
    for name, t, r, f in (("KV", tiles, reach, full), ("Q", tiles.transpose(-1, -2), reach.T, full.T)):
        num, idx = plan[f"{name}_NUM"], plan[f"{name}_IDX"]
        assert num.dtype == idx.dtype == torch.int32 and num.is_contiguous() and idx.is_contiguous()
        t = t.expand(B, Hq, *t.shape[2:])
        for b, h, row in itertools.product(range(B), range(Hq), range(t.shape[2])):
            present = t[b, h, row] & r[row]
            want_part = [j for j in range(t.shape[3]) if present[j] and not f[row, j]]
            want_full = [j for j in range(t.shape[3]) if present[j] and f[row, j]]
            n_part, n_full = num[b, h, row].tolist()
            got = idx[b, h, row].tolist()
            assert (got[:n_part], got[n_part:n_part + n_full]) == (want_part, want_full), (name, b, h, row)


WINDOWS = [(False, None), (True, None), (False, (5, 3)), (False, (0, 0)), (True, (20, None)),
           (False, (None, 7)), (False, (40, None))]


@pytest.mark.parametrize("Nq,Nk", [(48, 48), (40, 57), (57, 40), (16, 64), (33, 17), (47, 63)])
@pytest.mark.parametrize("causal,window", WINDOWS)
def test_all_tiles_present_lists_match_brute_force(Nq, Nk, causal, window):
    TQ, TK = -(-Nq // 16), -(-Nk // 16)
    tiles = torch.ones(1, 1, TQ, TK, dtype=torch.bool)
    prob = _prob(tiles, Nq, Nk, causal, window)
    _check_lists(at._tile_plan(prob, 1, 1, Nq, Nk), tiles, *_brute(prob, TQ, TK, Nq, Nk, 16, 16), 1, 1)


@pytest.mark.parametrize("shape", [(2, 3), (1, 3), (2, 1)], ids=["per_head", "broadcast_batch", "broadcast_head"])
def test_random_tiles_with_broadcast_dims(shape):
    g = torch.Generator().manual_seed(0)
    B, Hq, Nq, Nk = 2, 3, 70, 90
    TQ, TK = -(-Nq // 16), -(-Nk // 16)
    tiles = torch.rand(*shape, TQ, TK, generator=g) < 0.5
    prob = _prob(tiles, Nq, Nk, window=(30, 10), Hq=Hq) if shape[0] == B else None
    if prob is None:  # B = 1 tiles broadcast over a batch of 2
        q = torch.zeros(B, Hq, Nq, 8)
        k = torch.zeros(B, Hq, Nk, 8)
        prob = _validate(q, k, k, causal=False, window=(30, 10), mask=BlockSparseMask(tiles, 16, 16), scale=None,
                         cu_seqlens_q=None, cu_seqlens_k=None, backend="triton", deterministic=True, bugs=(),
                         return_lse=False)
    _check_lists(at._tile_plan(prob, B, Hq, Nq, Nk), tiles, *_brute(prob, TQ, TK, Nq, Nk, 16, 16), B, Hq)


def test_dense_mask_makes_no_tile_full_and_mixed_tile_sizes():
    Nq, Nk = 40, 70
    tiles = torch.rand(1, 1, 3, 3, generator=torch.Generator().manual_seed(2)) < 0.7
    for dense in (None, torch.ones(Nq, Nk, dtype=torch.bool)):
        prob = _prob(tiles, Nq, Nk, causal=True, dense=dense, bq=16, bk=32)
        plan = at._tile_plan(prob, 1, 1, Nq, Nk)
        _check_lists(plan, tiles, *_brute(prob, 3, 3, Nq, Nk, 16, 32), 1, 1)
        if dense is not None:
            assert (plan["KV_NUM"][..., 1] == 0).all() and (plan["Q_NUM"][..., 1] == 0).all()


def test_long_rows_take_several_chunks(monkeypatch):
    """More columns than one BLOCK of the plan kernel: the running counts carry across chunks."""
    real = at.tile_plan

    class Small:
        def __getitem__(self, grid):
            return lambda *a, **kw: real[grid](*a, **dict(kw, BLOCK=4))
    monkeypatch.setattr(at, "tile_plan", Small())
    Nq, Nk = 40, 300
    TQ, TK = 3, -(-Nk // 16)
    tiles = torch.rand(1, 2, TQ, TK, generator=torch.Generator().manual_seed(4)) < 0.6
    prob = _prob(tiles, Nq, Nk, window=(200, 5))
    _check_lists(at._tile_plan(prob, 1, 2, Nq, Nk), tiles, *_brute(prob, TQ, TK, Nq, Nk, 16, 16), 1, 2)


def test_one_plan_per_call(monkeypatch):
    """Forward and backward of one call share the lists: built once, not once per launch."""
    from flashproof.kernels.attention import attention
    calls = []
    real = at.tile_plan

    class Count:
        def __getitem__(self, grid):
            calls.append(grid)
            return real[grid]
    monkeypatch.setattr(at, "tile_plan", Count())
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g, requires_grad=True) for _ in range(3))
    tiles = torch.tensor([[True, False, True], [True, True, False], [False, True, True]])[None, None]
    out = attention(q, k, v, mask=BlockSparseMask(tiles, 16, 16), backend="triton")
    assert len(calls) == 1  # the forward's lists
    out.sum().backward()
    assert len(calls) == 2  # the backward reuses them and adds the per-key-tile lists
    assert q.grad is not None and torch.isfinite(q.grad).all()
    with torch.no_grad():
        attention(q, k, v, mask=BlockSparseMask(tiles, 16, 16), backend="triton")
    assert len(calls) == 3  # a forward alone builds one direction
