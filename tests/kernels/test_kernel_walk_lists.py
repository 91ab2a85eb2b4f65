"""The block-sparse walk lists (``kernels/attention/triton/plan.py``, under TRITON_INTERPRET=1)
against brute force: every pair of every tile enumerated decides which tiles are visited (some
pair allowed) and which run without a predicate (every pair allowed, nothing ragged); the lists
must hold exactly those, partial ones first, each group ascending. Also: one plan per call."""
from __future__ import annotations

import itertools

import pytest
import torch

from flashproof.kernels.interpreter import interpreting

pytest.importorskip("triton")
if not interpreting():
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels.attention import dispatch  # noqa: E402
from flashproof.kernels.attention.api import BlockSparseMask, validate  # noqa: E402
from flashproof.kernels.attention.triton import host as at  # noqa: E402
from flashproof.kernels.attention.triton import plan  # noqa: E402


def _prob(tiles, Nq, Nk, causal=False, window=None, dense=None, bq=16, bk=16, Hq=None):
    B, Hq = tiles.shape[0], Hq or tiles.shape[1]
    q = torch.zeros(B, Hq, Nq, 8)
    k = torch.zeros(B, Hq, Nk, 8)
    return validate(q, k, k, causal=causal, window=window, mask=BlockSparseMask(tiles, bq, bk, dense),
                    backend="triton", deterministic=True)


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
    _check_lists(at.tile_lists(prob, 1, 1, Nq, Nk), tiles, *_brute(prob, TQ, TK, Nq, Nk, 16, 16), 1, 1)


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
        prob = validate(q, k, k, window=(30, 10), mask=BlockSparseMask(tiles, 16, 16), backend="triton",
                        deterministic=True)
    _check_lists(at.tile_lists(prob, B, Hq, Nq, Nk), tiles, *_brute(prob, TQ, TK, Nq, Nk, 16, 16), B, Hq)


def test_dense_mask_makes_no_tile_full_and_mixed_tile_sizes():
    Nq, Nk = 40, 70
    tiles = torch.rand(1, 1, 3, 3, generator=torch.Generator().manual_seed(2)) < 0.7
    for dense in (None, torch.ones(Nq, Nk, dtype=torch.bool)):
        prob = _prob(tiles, Nq, Nk, causal=True, dense=dense, bq=16, bk=32)
        plan = at.tile_lists(prob, 1, 1, Nq, Nk)
        _check_lists(plan, tiles, *_brute(prob, 3, 3, Nq, Nk, 16, 32), 1, 1)
        if dense is not None:
            assert (plan["KV_NUM"][..., 1] == 0).all() and (plan["Q_NUM"][..., 1] == 0).all()


def test_long_rows_take_several_chunks():
    """More columns than one BLOCK of the list kernel: the running counts carry across chunks."""
    Nq, Nk = 40, 300
    TQ, TK = 3, -(-Nk // 16)
    tiles = torch.rand(1, 2, TQ, TK, generator=torch.Generator().manual_seed(4)) < 0.6
    prob = _prob(tiles, Nq, Nk, window=(200, 5))
    lists = at.tile_lists(prob, 1, 2, Nq, Nk, block=4, cache=plan.WalkListCache())  # fresh: built with block=4
    _check_lists(lists, tiles, *_brute(prob, TQ, TK, Nq, Nk, 16, 16), 1, 2)


def test_one_walk_list_per_direction_per_call():
    """The forward and the backward of one call share their launch data (``prob.cache``): the
    forward builds the per-query-tile lists, the backward reuses them (the same tensors) and adds the
    per-key-tile lists; a forward alone builds one direction."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g) for _ in range(3))
    tiles = torch.tensor([[True, False, True], [True, True, False], [False, True, True]])[None, None]
    call = validate(q, k, v, mask=BlockSparseMask(tiles, 16, 16), backend="triton")
    route = dispatch.plan(call, dispatch.device_of(q))
    plan.WALK_LISTS.clear()
    out, lse = at.forward(q, k, v, call, route)
    common = call.cache["common"]
    placeholder = at._dummies(q.device)[0]
    assert plan.WALK_LISTS.misses == 1 and common["Q_IDX"] is placeholder, "a forward alone builds only its lists"
    kv = common["KV_NUM"], common["KV_IDX"]
    dq, _, _ = at.backward(q, k, v, out, lse, torch.ones_like(out), None, call, route)
    assert call.cache["common"] is common, "the backward recomputed the forward's launch arguments"
    assert common["KV_NUM"] is kv[0] and common["KV_IDX"] is kv[1], "the backward rebuilt the forward's lists"
    assert plan.WALK_LISTS.misses == 2 and common["Q_IDX"] is not placeholder
    assert torch.isfinite(dq).all()
