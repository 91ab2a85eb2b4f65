"""The torch backend's step plan (``kernels/attention/torch.py``): how a call is cut into key-chunk steps.

* Coverage: over the steps of a segment, every allowed pair is computed exactly once and no masked
  pair is left unmasked (the fills), and each row meets its keys in key order — for windows of every
  kind, Nq ≠ Nk both ways, dense masks with holes, and the mutants' one-tile steps.
* Memory: no step holds more than ``SCORE_ELEMS`` scores, at any length.
* Work: a causal call at the issue's shape computes (S + 1) / 2S of the dense score products.
* Op count, the reason for the layout (a CPU op is a parallel region with a barrier, which waits on
  a loaded machine): at B = 1, H = 8, N = 1024, D = 64 the ATen ops of a forward and a backward are
  bounded by a constant per step plus a constant, and ≥ 5× fewer than the tile-row layout's, counted
  with a dispatch mode. The count's order is pinned, not a timing (``flashproof bench-cpu`` times).
"""
from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from flashproof.kernels.attention import api
from flashproof.kernels.attention import torch as tk

# ATen ops per call of the tile-row layout this replaced (one tile-row of 128 queries at a time),
# counted the same way at the shape below with torch 2.13 (main at 55c51ba), (forward, backward): all
# ops, and the ops that are not views (VIEWS; these do not depend on how a torch version decomposes
# indexing into view ops)
TILE_ROW_OPS = {False: (463, 521), True: (985, 1277)}
TILE_ROW_COMPUTE = {False: (266, 168), True: (592, 542)}
VIEWS = {"view", "slice", "select", "unsqueeze", "squeeze", "transpose", "t", "expand", "unflatten", "flatten",
         "_unsafe_view", "alias", "as_strided", "permute", "detach", "lift_fresh"}


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _plan(n, m, window=(None, None), mask=None, bugs=frozenset(), heads=1):
    """The steps of one segment of n queries and m keys, as the kernels take them."""
    q, k = torch.zeros(1, 1, n, 8), torch.zeros(1, 1, m, 8)
    left, right = window
    prob = api.validate(q, k, k, window=(left, right), mask=mask, backend="torch", bugs=bugs)
    seg = next(tk._segments(q, k, prob))
    return list(tk._steps(seg, prob, heads, q.device)), prob


def _allowed(n, m, window, mask):
    i = torch.arange(n)[:, None] + (m - n)
    j = torch.arange(m)[None]
    left, right = window
    a = torch.ones(n, m, dtype=torch.bool)
    if left is not None:
        a &= j >= i - left
    if right is not None:
        a &= j <= i + right
    return a if mask is None else a & mask[0, 0]


CASES = [  # (n, m, window, mask seed or None, bugs)
    (300, 300, (None, None), None, ()),
    (300, 300, (None, 0), None, ()),
    (200, 457, (None, 0), None, ()),
    (457, 200, (None, 0), None, ()),
    (300, 300, (40, 7), None, ()),
    (300, 350, (0, 130), None, ()),
    (130, 700, (200, None), None, ()),
    (300, 300, (None, None), 1, ()),
    (256, 300, (None, 0), 2, ()),
    (300, 300, (33, 33), 3, ()),
    (200, 200, (None, 0), None, ("no_alpha",)),
    (200, 201, (None, None), None, ("tile_floor",)),
]


@pytest.mark.parametrize("n,m,window,seed,bugs", CASES, ids=[f"{c[0]}x{c[1]}-w{c[2]}-mask{c[3]}-{c[4]}" for c in CASES])
def test_steps_cover_each_allowed_pair_once_in_key_order(n, m, window, seed, bugs):
    mask = None
    if seed is not None:  # holes of whole tiles and single pairs, so that trimming and index keys both run
        g = torch.Generator().manual_seed(seed)
        tiles = torch.rand(-(-n // 64), -(-m // 64), generator=g) < 0.5
        mask = (tiles.repeat_interleave(64, 0)[:n].repeat_interleave(64, 1)[:, :m]
                & (torch.rand(n, m, generator=g) < 0.8))[None, None]
    steps, prob = _plan(n, m, window, mask, frozenset(bugs))
    seen = torch.zeros(n, m, dtype=torch.int64)
    last = torch.full((n,), -1)  # the last key each row has met
    for st in steps:
        keys = torch.arange(m)[st.keys] if isinstance(st.keys, slice) else st.keys
        on = torch.ones(st.rows.stop - st.rows.start, keys.numel(), dtype=torch.bool)
        for rows, masked in st.fills:
            on[rows] &= ~masked.reshape(masked.shape[-2:]) if masked.dim() > 2 else ~masked
        r = torch.arange(st.rows.start, st.rows.stop)
        seen[r[:, None], keys[None]] += on.long()
        first = torch.where(on, keys[None], m).amin(1)
        assert bool((first[on.any(1)] > last[r][on.any(1)]).all()), "a row met a key before one it had already met"
        last[r] = torch.where(on.any(1), torch.where(on, keys[None], -1).amax(1), last[r])
    want = _allowed(n, m, window, mask)
    if "tile_floor" in bugs:  # the mutant drops the last partial key tile
        want[:, m // 64 * 64:] = False
    assert torch.equal(seen, want.long()), f"pairs computed ≠ allowed: {int((seen != want.long()).sum())} differ"
    if bugs:  # a mutant's steps are the Triton kernel's tiles: one key tile, whole tile-rows
        assert all((st.keys.stop - st.keys.start) <= tk.BLOCK_N for st in steps), "a mutant's step spans more than one tile"
        assert all(st.rows.start % tk.BLOCK_M == 0 and (st.rows.stop % tk.BLOCK_M == 0 or st.rows.stop == n)
                   for st in steps), "a mutant's step does not take whole tile-rows"


@pytest.mark.parametrize("window", [(None, None), (None, 0), (512, 512)])
def test_no_step_holds_more_than_score_elems(window):
    heads = 32
    steps, _ = _plan(16384, 16384, window, heads=heads)
    sizes = [heads * (st.rows.stop - st.rows.start) * (st.keys.stop - st.keys.start) for st in steps]
    assert max(sizes) <= tk.SCORE_ELEMS, f"a step of {max(sizes)} scores, the bound is {tk.SCORE_ELEMS}"


def test_causal_computes_about_half_of_the_dense_products():
    n = 1024
    steps, _ = _plan(n, n, (None, 0), heads=8)
    work = sum((st.rows.stop - st.rows.start) * (st.keys.stop - st.keys.start) for st in steps) / (n * n)
    s = len(steps)
    assert s == tk.CUT_STEPS and work == pytest.approx((s + 1) / (2 * s)), (s, work)


@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
def test_op_count_is_a_few_ops_per_step(causal):
    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(1, 8, 1024, 64, generator=g) for _ in range(4))
    prob = api.validate(q, k, v, causal=causal, backend="torch", requires_grad=True)
    seg = next(tk._segments(q, k, prob))
    steps = len(list(tk._steps(seg, prob, 8, q.device)))
    with _Count() as fwd:
        out, lse = tk.forward(q, k, v, prob)
    with _Count() as bwd:
        tk.backward(q, k, v, out, lse, do, None, prob)
    counts = [sum(c.ops.values()) for c in (fwd, bwd)]
    compute = [sum(n for op, n in c.ops.items() if op not in VIEWS) for c in (fwd, bwd)]
    assert steps <= tk.CUT_STEPS, steps
    measured_here = torch.__version__.startswith("2.13")
    for i, name in enumerate(("forward", "backward")):
        assert counts[i] <= (45, 50)[i] * steps + 40, (name, counts[i], steps, (fwd, bwd)[i].ops)
        assert compute[i] <= 25 * steps + 25, (name, compute[i], steps)
        assert 5 * compute[i] <= TILE_ROW_COMPUTE[causal][i], \
            f"{name}: {compute[i]} non-view ATen ops, not 5x fewer than the tile-row layout's {TILE_ROW_COMPUTE[causal][i]}"
        if measured_here:  # the all-ops figures of the tile-row layout were counted with this torch
            assert 5 * counts[i] <= TILE_ROW_OPS[causal][i], \
                f"{name}: {counts[i]} ATen ops, not 5x fewer than the tile-row layout's {TILE_ROW_OPS[causal][i]}"
