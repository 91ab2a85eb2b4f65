"""The block-sparse walk lists of the Triton backend, checked against brute force on small grids:
which tiles are visited (reach), which run without a predicate (full), the order of the lists,
and that one call builds them once (the backward reuses the forward's)."""
from __future__ import annotations

import itertools

import pytest
import torch

from flashproof.kernels import attention_triton as at
from flashproof.kernels.attention import BlockSparseMask, _validate


def _prob(tiles, Nq, Nk, causal=False, window=None, dense=None, bq=16, bk=16):
    B, Hq = tiles.shape[0], tiles.shape[1]
    q = torch.zeros(B, Hq, Nq, 8)
    k = torch.zeros(B, Hq, Nk, 8)
    mask = BlockSparseMask(tiles, bq, bk, dense)
    return _validate(q, k, k, causal=causal, window=window, mask=mask, scale=None, cu_seqlens_q=None,
                     cu_seqlens_k=None, backend="triton", deterministic=True, bugs=(), return_lse=False)


def _brute(prob, TQ, TK, Nq, Nk, bq, bk):
    """(reach, full) by enumerating every pair of every tile."""
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


WINDOWS = [(False, None), (True, None), (False, (5, 3)), (False, (0, 0)), (True, (20, None)),
           (False, (None, 7)), (False, (40, None))]


@pytest.mark.parametrize("Nq,Nk", [(48, 48), (40, 57), (57, 40), (16, 64), (33, 17), (47, 63)])
@pytest.mark.parametrize("causal,window", WINDOWS)
def test_tile_classes_match_brute_force(Nq, Nk, causal, window):
    bq = bk = 16
    TQ, TK = -(-Nq // bq), -(-Nk // bk)
    prob = _prob(torch.ones(1, 1, TQ, TK, dtype=torch.bool), Nq, Nk, causal, window)
    reach, full = at._tile_classes(prob, TQ, TK, Nq, Nk)
    want_reach, want_full = _brute(prob, TQ, TK, Nq, Nk, bq, bk)
    assert torch.equal(reach, want_reach), (reach, want_reach)
    assert torch.equal(full, want_full), (full, want_full)


def test_dense_mask_makes_no_tile_full():
    Nq = Nk = 32
    tiles = torch.ones(1, 1, 2, 2, dtype=torch.bool)
    prob = _prob(tiles, Nq, Nk, dense=torch.ones(Nq, Nk, dtype=torch.bool))
    reach, full = at._tile_classes(prob, 2, 2, Nq, Nk)
    assert reach.all() and not full.any()


def test_plan_lists_partial_then_full_in_order():
    g = torch.Generator().manual_seed(0)
    B, Hq, Nq, Nk = 2, 3, 70, 90
    TQ, TK = -(-Nq // 16), -(-Nk // 16)
    tiles = torch.rand(B, 1, TQ, TK, generator=g) < 0.5
    prob = _prob(tiles, Nq, Nk, window=(30, 10))
    plan = at._tile_plan(prob, B, Hq, Nq, Nk)
    reach, full = at._tile_classes(prob, TQ, TK, Nq, Nk)
    for name, t, r, f in (("KV", tiles, reach, full), ("Q", tiles.transpose(-1, -2), reach.T, full.T)):
        num, idx = plan[f"{name}_NUM"], plan[f"{name}_IDX"]
        assert num.dtype == idx.dtype == torch.int32 and num.is_contiguous() and idx.is_contiguous()
        for b, h, row in itertools.product(range(B), range(Hq), range(t.shape[2])):
            present = t[b, 0, row] & r[row]
            want_part = [j for j in range(t.shape[3]) if present[j] and not f[row, j]]
            want_full = [j for j in range(t.shape[3]) if present[j] and f[row, j]]
            n_part, n_full = num[b, h, row].tolist()
            got = idx[b, h, row].tolist()
            assert got[:n_part] == want_part and got[n_part:n_part + n_full] == want_full


def test_one_plan_per_call(monkeypatch):
    """Forward and backward of one call share the lists: built once, not once per launch."""
    from flashproof.kernels.attention import attention
    calls = []
    real = at._tile_classes
    monkeypatch.setattr(at, "_tile_classes", lambda *a: calls.append(1) or real(*a))
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g, requires_grad=True) for _ in range(3))
    tiles = torch.tensor([[True, False, True], [True, True, False], [False, True, True]])[None, None]
    out = attention(q, k, v, mask=BlockSparseMask(tiles, 16, 16), backend="triton")
    out.sum().backward()
    assert len(calls) == 1
    assert q.grad is not None and torch.isfinite(q.grad).all()
