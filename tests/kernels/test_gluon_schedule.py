"""The persistent Gluon forward's work list (``kernels/attention/gluon/schedule.py``), on the CPU: both
dealers (``rounds``, ``in_order``) give every item exactly once with the documented shapes, counts and
``base``; ``rounds`` deals its rounds in run order; the balance on dense causal grids against the mean
load and a naive round-robin; ``dense`` picks the smaller makespan and caches per shape; ``sparse``
caches per walk-list tensor, as long as it lives; and the argument and size checks."""
from __future__ import annotations

import gc
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashproof.kernels.attention.gluon import schedule as S

DEALERS = [S.rounds, S.in_order]


@st.composite
def grids(draw):
    """(B, H, NM, ctas, tiles): a random (B·H, NM) grid of key-tile counts 0 … NM."""
    B = draw(st.integers(1, 3))
    H = draw(st.integers(1, 4))
    NM = draw(st.integers(1, 9))
    ctas = draw(st.integers(1, 40))
    rows = draw(st.lists(st.lists(st.integers(0, NM), min_size=NM, max_size=NM), min_size=B * H, max_size=B * H))
    return B, H, NM, ctas, torch.tensor(rows, dtype=torch.int32)


def entries(s):
    """Per CTA, its used entries (b, h, m, base) in order, as Python ints."""
    b, h, m, base, count = (x.tolist() for x in s)
    return [list(zip(b[c], h[c], m[c], base[c]))[:count[c]] for c in range(len(count))]


def run_order(B, H, NM):
    """The items (b, h, m) in run order, derived here: head row by head row, query blocks NM − 1 down to 0."""
    return [(row // H, row % H, m) for row in range(B * H) for m in range(NM - 1, -1, -1)]


def causal(BH, NM):
    """The dense causal grid: query block m has m + 1 key tiles."""
    return (torch.arange(NM, dtype=torch.int64) + 1).expand(BH, NM)


def mean_load(tiles, P):
    """The total estimated work (key tiles + OVERHEAD per item) over P CTAs."""
    return float((tiles.to(torch.int64) + S.OVERHEAD).sum()) / P


def round_robin_makespan(tiles, P, H):
    """The busiest CTA's estimated work if item t of the run order went to CTA t mod P (no balancing)."""
    BH, NM = tiles.shape
    loads = [0] * P
    for t, (b, h, m) in enumerate(run_order(BH // H, H, NM)):
        loads[t % P] += int(tiles[b * H + h, m]) + S.OVERHEAD
    return max(loads)


def same(a, b):
    """Two schedules field for field equal (values, dtypes, shapes)."""
    return all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(a, b))


# ---- 1. both dealers: a partition of the items, shapes, counts, base ---------------------------------


@pytest.mark.parametrize("deal", DEALERS, ids=lambda f: f.__name__)
@settings(max_examples=60, deadline=None)
@given(grid=grids())
def test_every_item_once_with_documented_shapes_counts_and_base(deal, grid):
    """Each item (b < B, h < H, m < NM) is used exactly once, shapes/dtypes/counts as documented, base = prefix tiles."""
    B, H, NM, ctas, tiles = grid
    T = B * H * NM
    s = deal(tiles, ctas, H)
    P = min(ctas, T)
    assert isinstance(s, S.Schedule)
    W = s.b.shape[1]
    for x in s[:4]:
        assert x.shape == (P, W) and x.dtype == torch.int32 and x.is_contiguous()
    assert s.count.shape == (P,) and s.count.dtype == torch.int32 and s.count.is_contiguous()
    assert bool((s.count >= 0).all()) and bool((s.count <= W).all())
    assert int(s.count.sum()) == T
    assert W == int(s.count.max())  # no column unused by every CTA
    if deal is S.rounds:
        assert W == -(-T // P)
    lists = entries(s)
    used = Counter((b, h, m) for lst in lists for b, h, m, _ in lst)
    assert used == Counter(run_order(B, H, NM))
    for lst in lists:
        done = 0
        for b, h, m, base in lst:
            assert base == done % S.BASE_PERIOD
            done += int(tiles[b * H + h, m])


@pytest.mark.parametrize("deal", DEALERS, ids=lambda f: f.__name__)
def test_base_wraps_modulo_base_period(deal):
    """base is the prefix tile count modulo BASE_PERIOD once it passes 2**30 (and stays in int32)."""
    n = 2 ** 29 + 1
    s = deal(torch.full((1, 4), n, dtype=torch.int64), 1, 1)
    assert s.count.tolist() == [4]
    assert s.base[0].tolist() == [0, n, (2 * n) % S.BASE_PERIOD, (3 * n) % S.BASE_PERIOD]
    assert s.base[0, 2] == 2  # wrapped, not 2**30 + 2


@pytest.mark.parametrize("deal", DEALERS, ids=lambda f: f.__name__)
def test_head_and_batch_split_by_H(deal):
    """Head row b·H + h is reported as batch b, head h (not one batch of B·H heads)."""
    B, H, NM = 3, 2, 2
    s = deal(torch.ones(B * H, NM, dtype=torch.int32), 100, H)
    items = sorted((b, h, m) for lst in entries(s) for b, h, m, _ in lst)
    assert items == sorted((b, h, m) for b in range(B) for h in range(H) for m in range(NM))
    default = deal(torch.ones(B * H, NM, dtype=torch.int32), 100)  # H omitted: all rows one batch
    items = sorted((b, h, m) for lst in entries(default) for b, h, m, _ in lst)
    assert items == sorted((0, h, m) for h in range(B * H) for m in range(NM))


# ---- 2. rounds: round r is the slice r·P … r·P + P − 1 of the run order -----------------------------


@settings(max_examples=60, deadline=None)
@given(grid=grids())
def test_rounds_deals_each_round_from_the_run_order(grid):
    """rounds' column r holds exactly items r·P … r·P + P − 1 of the run order (head by head, m descending)."""
    B, H, NM, ctas, tiles = grid
    s = S.rounds(tiles, ctas, H)
    P = s.count.shape[0]
    order = run_order(B, H, NM)
    lists = entries(s)
    for r in range(s.b.shape[1]):
        column = [lst[r][:3] for lst in lists if len(lst) > r]
        assert len(column) == len(set(column))
        assert set(column) == set(order[r * P:(r + 1) * P]), f"round {r}"


def test_rounds_gives_the_heaviest_item_of_a_round_to_the_least_loaded_cta():
    """In round 1 the CTA with the least round-0 work gets that round's heaviest item."""
    tiles = torch.tensor([[5, 1, 3, 0, 7, 2]], dtype=torch.int32)  # run order: m = 5 … 0 -> tiles 2 7 0 3 1 5
    s = S.rounds(tiles, 3, 1)
    lists = entries(s)
    work0 = [int(tiles[0, lst[0][2]]) for lst in lists]
    lightest = min(range(3), key=lambda c: work0[c])
    assert work0[lightest] == 0
    assert int(tiles[0, lists[lightest][1][2]]) == 5  # the heaviest of round 1 (tiles 3 1 5)
    heaviest = max(range(3), key=lambda c: work0[c])
    assert int(tiles[0, lists[heaviest][1][2]]) == 1


def test_in_order_gives_each_item_to_the_cta_free_first():
    """in_order: item t goes to the CTA whose estimated work (tiles + OVERHEAD) ends first, lowest index on ties."""
    zeros = S.in_order(torch.zeros(1, 6, dtype=torch.int32), 3, 1)  # run order m = 5 … 0, all ties on index
    assert [[m for _, _, m, _ in lst] for lst in entries(zeros)] == [[5, 2], [4, 1], [3, 0]]
    weighted = S.in_order(torch.tensor([[2, 0, 0, 5]], dtype=torch.int32), 2, 1)  # run order: tiles 5 0 0 2
    assert [[m for _, _, m, _ in lst] for lst in entries(weighted)] == [[3], [2, 1, 0]]  # CTA 1 free at 2, 4 < 7


# ---- 3. the balance on dense causal grids ------------------------------------------------------------


@pytest.mark.parametrize("deal,B,H,NM,bound", [
    (S.rounds, 2, 16, 64, 1.10),     # ≈ 1.042 of the mean; round-robin 576 > 558
    (S.in_order, 1, 16, 128, 1.01),  # ≈ 1.001 of the mean; round-robin 1600 > 1033
], ids=["rounds", "in_order"])
def test_balance_on_a_dense_causal_grid(deal, B, H, NM, bound):
    """On a dense causal grid over 132 CTAs the makespan is within ``bound`` of the mean load and below a
    round-robin deal's."""
    tiles = causal(B * H, NM)
    got = S.makespan(deal(tiles, 132, H), tiles, H)
    mean = mean_load(tiles, 132)
    assert mean <= got <= bound * mean, (got, mean)
    rr = round_robin_makespan(tiles, 132, H)
    assert got < rr, (got, rr)


def test_makespan_is_the_busiest_ctas_estimated_work():
    """makespan sums key tiles + OVERHEAD over each CTA's used entries only and takes the maximum."""
    tiles = torch.tensor([[4, 1, 0]], dtype=torch.int32)
    one = S.Schedule(*(torch.tensor([[0, 0, 0]], dtype=torch.int32) for _ in range(2)),
                     torch.tensor([[2, 1, 0]], dtype=torch.int32), torch.zeros(1, 3, dtype=torch.int32),
                     torch.tensor([3], dtype=torch.int32))
    assert S.makespan(one, tiles, 1) == 5 + 3 * S.OVERHEAD
    two = S.Schedule(torch.zeros(2, 2, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32),
                     torch.tensor([[0, 2], [1, 2]], dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32),
                     torch.tensor([1, 2], dtype=torch.int32))  # CTA 0's second entry is unused
    assert S.makespan(two, tiles, 1) == 4 + S.OVERHEAD


# ---- 4. dense: the better of the two, cached, on the device ----------------------------------------


@pytest.mark.parametrize("B,H,NM,causal_,winner", [
    (2, 16, 64, True, "rounds"),     # rounds 558 < in_order 565
    (1, 16, 128, True, "in_order"),  # in_order 1033 < rounds 1061
    (1, 16, 64, True, "rounds"),     # rounds 282 < in_order 297
    (1, 2, 8, False, None),          # a tie
])
def test_dense_takes_the_smaller_makespan_and_is_cached(B, H, NM, causal_, winner):
    """dense is the schedule (of rounds / in_order) with the smaller makespan, on "cpu", the same object twice."""
    P = S.num_ctas("cpu")
    m = torch.arange(NM)
    tiles = (m + 1 if causal_ else torch.full_like(m, NM)).expand(B * H, NM)
    mine = {f.__name__: f(tiles, P, H) for f in DEALERS}
    spans = {k: S.makespan(v, tiles, H) for k, v in mine.items()}
    if winner is not None:
        assert spans[winner] < min(v for k, v in spans.items() if k != winner)
    got = S.dense(B, H, NM, causal_, "cpu")
    assert S.makespan(got, tiles, H) == min(spans.values())
    if winner is not None:
        assert same(got, mine[winner])
    assert all(x.device.type == "cpu" for x in got)
    assert S.dense(B, H, NM, causal_, "cpu") is got
    assert S.dense(B, H, NM, causal_, torch.device("cpu")) is got


def test_dense_keys_on_the_shape_and_causality():
    """dense gives different schedules for causal and non-causal, and for another NM."""
    a = S.dense(1, 2, 8, True, "cpu")
    b = S.dense(1, 2, 8, False, "cpu")
    c = S.dense(1, 2, 9, True, "cpu")
    assert a is not b and a is not c
    assert int(a.count.sum()) == 16 and int(c.count.sum()) == 18
    assert S.num_ctas("cpu") == 132


# ---- 5. sparse: cached per walk-list tensor while it lives -----------------------------------------


def _kv_num(B, H, NM, seed=0):
    g = torch.Generator().manual_seed(seed)
    partial = torch.randint(0, 2, (B, H, NM), generator=g)
    full = torch.randint(0, NM, (B, H, NM), generator=g)
    return torch.stack([partial, full], -1).to(torch.int32)


def test_sparse_is_rounds_over_the_summed_counts_and_cached():
    """sparse(kv_num) equals rounds(kv_num.sum(-1) as (B·H, NM), num_ctas, H) and is the same object twice."""
    B, H, NM = 2, 3, 40  # 240 items: more than 132 CTAs, two rounds
    kv = _kv_num(B, H, NM)
    s = S.sparse(kv)
    want = S.rounds(kv.sum(-1).view(B * H, NM), S.num_ctas(kv.device), H)
    assert same(s, want)
    assert S.sparse(kv) is s
    other = kv.clone()  # equal counts, another tensor: another entry
    assert S.sparse(other) is not s and same(S.sparse(other), s)


def test_sparse_entry_is_dropped_when_kv_num_is_collected():
    """Deleting kv_num (and collecting) removes its sparse entry from _CACHE."""
    kv = _kv_num(1, 2, 5, seed=1)
    s = S.sparse(kv)
    key = ("sparse", id(kv), S.num_ctas(kv.device))
    assert key in S._CACHE and S._CACHE[key][1] is s
    size = len(S._CACHE)
    del kv
    gc.collect()
    assert key not in S._CACHE
    assert len(S._CACHE) == size - 1
    assert int(s.count.sum()) == 10  # the schedule itself outlives its cache entry


# ---- 6. errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("deal", DEALERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("tiles,ctas,H,match", [
    (torch.ones(6, dtype=torch.int32), 4, None, r"non-empty \(heads, query blocks\) grid, got shape \(6,\)"),
    (torch.ones(2, 3, 1, dtype=torch.int32), 4, None, r"grid, got shape \(2, 3, 1\)"),
    (torch.ones(0, 4, dtype=torch.int32), 4, None, r"non-empty .*got shape \(0, 4\)"),
    (torch.ones(3, 0, dtype=torch.int32), 4, None, r"non-empty .*got shape \(3, 0\)"),
    (torch.ones(2, 3, dtype=torch.int32), 0, None, r"ctas must be >= 1, got 0"),
    (torch.ones(2, 3, dtype=torch.int32), -1, None, r"ctas must be >= 1, got -1"),
    (torch.ones(4, 3, dtype=torch.int32), 8, 3, r"H must be >= 1 and divide the 4 rows of tiles, got 3"),
    (torch.ones(4, 3, dtype=torch.int32), 8, 0, r"H must be >= 1 .*got 0"),
])
def test_bad_arguments_raise_naming_the_problem(deal, tiles, ctas, H, match):
    """A non-2-D or empty grid, ctas < 1, or H not dividing the rows raises ValueError saying which."""
    with pytest.raises(ValueError, match=match):
        deal(tiles, ctas, H)


def test_width_refuses_more_entries_than_int32_offsets_address():
    """_width passes P·W = 2**31 − 1 and raises ValueError above it, naming P and W."""
    assert S._width(1, S.I32_MAX) == S.I32_MAX
    assert S._width(2 ** 15, 2 ** 16 - 1) == 2 ** 16 - 1
    with pytest.raises(ValueError, match=r"would hold 32768 x 65536 entries, more than int32 offsets address"):
        S._width(2 ** 15, 2 ** 16)
    with pytest.raises(ValueError, match="int32 offsets"):
        S._width(1, S.I32_MAX + 1)


def test_rounds_refuses_a_grid_of_2_31_items(monkeypatch):
    """rounds on a (2**16, 2**15) grid (an expanded view, no memory) raises the int32 ValueError before dealing."""
    tiles = torch.ones(1, 1, dtype=torch.int32).expand(2 ** 16, 2 ** 15)

    def dealt(_):  # reached only past a missing check; it would allocate 2**31-item orders
        raise AssertionError("rounds dealt a grid whose schedule int32 offsets cannot address")
    monkeypatch.setattr(S, "_order", dealt)
    with pytest.raises(ValueError, match=r"132 x 16268816 entries, more than int32 offsets"):
        S.rounds(tiles, 132, 16)


def test_a_new_dense_shape_inside_a_graph_capture_is_a_clear_error(monkeypatch):
    """dense's host build of a shape not seen yet raises, naming the shape and the warm-up, while a CUDA stream
    captures (emulated: the capture query patched); a cached shape is served during capture."""
    monkeypatch.setattr(S, "num_ctas", lambda device: 132)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(RuntimeError, match=r"B=1, H=3, N=640, causal=True .*run the call once before capturing"):
        S.dense(1, 3, 5, True, "cuda")
    cached = ("dense", 1, 3, 6, True, 132, torch.device("cuda"))
    S._CACHE[cached] = (None, "cached")
    try:
        assert S.dense(1, 3, 6, True, "cuda") == "cached"
    finally:
        S._CACHE.pop(cached)
