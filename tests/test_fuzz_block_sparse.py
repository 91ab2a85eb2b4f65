"""The fuzzer's block-sparse route (flashproof/fuzz/targets.py ``block_tiles`` / ``mask_arg``,
problem.py ``sparse_route``, the "sparse" family and ``--profile gluon-sparse``): a mask that is
exactly whole tiles with the case's causal / window structure reaches ours as a BlockSparseMask
(so the dispatcher routes it to the Gluon or Triton block-sparse kernels), the same masks keep
reaching the dense-mask path with the family off, and the gluon-sparse profile draws only calls
the Hopper block-sparse kernels take."""
from random import Random

import pytest
import torch
from hypothesis import find, given, settings, strategies as st

from flashproof.fuzz import targets
from flashproof.fuzz.campaign import PROFILES, _plan, _strategy, specimens
from flashproof.fuzz.launches import launch_of
from flashproof.fuzz.problem import ProblemSpec, _structure, build, sparse_route
from flashproof.fuzz.strategies import attention_problems
from flashproof.fuzz.targets import Case, block_tiles, mask_arg
from flashproof.fuzz.oracle import read_inputs
from flashproof.fuzz.tolerance import agree, magnitudes
from flashproof.kernels import BlockSparseMask, attention

SPARSE = PROFILES["gluon-sparse"]


def _expand(tiles, bq, bk, nq, nk):
    return tiles.repeat_interleave(bq, 2)[:, :, :nq].repeat_interleave(bk, 3)[..., :nk]


def _structure_of(nq, nk, causal, window):
    """The causal / window structure as problem.py builds a problem's mask (``problem.structure``, which
    block_tiles tests against too)."""
    return _structure(ProblemSpec(n_q=nq, n_k=nk, causal=causal, window=window), nq, nk)


GEOMETRIES = [(128, 128, 128, 128), (256, 384, 128, 128), (200, 130, 128, 128), (40, 130, 16, 64), (1, 1, 16, 16),
              (33, 17, 16, 32), (130, 40, 64, 16)]


@pytest.mark.parametrize("nq, nk, bq, bk", GEOMETRIES)
def test_exact_tile_masks_are_recognised_with_their_tiles(nq, nk, bq, bk):
    """Random tiles (some query-tile rows and key-tile columns all off, and all tiles off or on),
    partial edge tiles where Nq, Nk are not multiples of the tile: recognised, tiles given back."""
    g = torch.Generator().manual_seed(nq * 1000 + nk)
    tq, tk = -(-nq // bq), -(-nk // bk)
    for density in (0.0, 0.1, 0.6, 1.0):
        tiles = torch.rand(2, 3, tq, tk, generator=g) < density
        tiles[0, 0, 0] = False      # an empty query-tile row
        tiles[1, 2, :, -1] = False  # an empty key-tile column
        allowed = _expand(tiles, bq, bk, nq, nk)
        got = block_tiles(allowed, bq, bk)
        assert got is not None and torch.equal(got, tiles), (nq, nk, bq, bk, density)


@pytest.mark.parametrize("nq, nk, bq, bk", GEOMETRIES)
def test_one_pair_flipped_inside_a_tile_is_not_recognised(nq, nk, bq, bk):
    g = torch.Generator().manual_seed(7)
    tq, tk = -(-nq // bq), -(-nk // bk)
    tiles = torch.rand(1, 2, tq, tk, generator=g) < 0.5
    tiles[0, 0, -1, -1], tiles[0, 1, 0, 0] = True, False
    allowed = _expand(tiles, bq, bk, nq, nk)
    for h, i, j in ((0, nq - 1, nk - 1), (1, 0, 0), (0, (nq - 1) // 2, (nk - 1) // 2)):
        if min(nq - (i // bq) * bq, bq) * min(nk - (j // bk) * bk, bk) == 1:
            continue  # a 1 × 1 edge tile: flipping its only pair flips the whole tile (still exact)
        flipped = allowed.clone()
        flipped[0, h, i, j] = ~flipped[0, h, i, j]
        assert block_tiles(flipped, bq, bk) is None, (h, i, j)


CAUSAL_WINDOW = [(False, None), (True, None), (False, (0, 0)), (False, (130, 5)), (True, (70, None)), (True, (3, 200)),
                 (False, (None, 17)), (True, (None, None))]


@pytest.mark.parametrize("causal, window", CAUSAL_WINDOW)
@pytest.mark.parametrize("nq, nk", [(256, 256), (200, 384), (384, 130), (40, 130)])
def test_tiles_and_the_bottom_right_structure_are_recognised_together(causal, window, nq, nk):
    """allowed = tiles ∧ the causal / window structure (bottom-right aligned, as attention() defines it,
    checked against problem.py's own construction): recognised with that structure only, and the tiles
    given back are those the structure does not exclude entirely."""
    b = 16 if nq == 40 else 128
    g = torch.Generator().manual_seed(nq + nk)
    tiles = torch.rand(1, 2, -(-nq // b), -(-nk // b), generator=g) < 0.6
    ok = _structure_of(nq, nk, causal, None if window is None else tuple(1 << 30 if w is None else w for w in window))
    allowed = _expand(tiles, b, b, nq, nk) & ok
    got = block_tiles(allowed, b, b, causal, window)
    tq, tk = tiles.shape[2:]
    block = lambda t, h, r, c: t[0, h, r * b:(r + 1) * b, c * b:(c + 1) * b]  # noqa: E731
    want = torch.tensor([[[bool(block(allowed, h, r, c).any()) for c in range(tk)] for r in range(tq)] for h in range(2)])
    assert got is not None and torch.equal(got, want[None])
    # a tile the structure cuts (some of its pairs in, some out) that is on: with no structure declared
    # (or the other causal flag) the same pairs are not whole tiles
    okb = ok[None, None].expand(1, 2, nq, nk)
    cut = any(bool(want[h, r, c]) and not bool(block(okb, h, r, c).all()) for h in range(2) for r in range(tq)
              for c in range(tk))
    if cut:
        assert block_tiles(allowed, b, b) is None


def test_the_block_sparse_mask_computes_the_dense_masks_pairs():
    """attention(mask=BlockSparseMask(block_tiles(...))) == attention(mask=allowed) (torch path): causal,
    a window, Nq != Nk with partial edge tiles, empty query tiles (rows out 0, LSE −inf)."""
    for spec in (ProblemSpec(heads_q=2, n_q=40, n_k=130, d=4, dv=4, causal=True, mask_kind="block_sparse", block=16,
                             sparse=True, density=0.3, seed=1),
                 ProblemSpec(n_q=130, n_k=40, d=4, dv=4, window=(20, 3), mask_kind="block_sparse", block=16, sparse=True,
                             density=0.1, seed=2),
                 ProblemSpec(heads_q=2, heads_kv=1, n_q=256, n_k=256, d=4, dv=4, causal=True, mask_kind="late_keys",
                             block=128, sparse=True, seed=3)):
        p = build(spec)
        tiles = block_tiles(p.allowed, spec.block, spec.block, spec.causal, spec.window)
        assert tiles is not None, spec
        kw = dict(causal=spec.causal, window=spec.window, scale=p.scale, backend="torch", return_lse=True)
        dense = attention(p.q, p.k, p.v, mask=p.allowed, **kw)
        sparse = attention(p.q, p.k, p.v, mask=BlockSparseMask(tiles, spec.block, spec.block), **kw)
        qi, ki, vi = read_inputs(p)
        mags = magnitudes(qi, ki, vi, p.dout, dense.lse, p.scale)   # two float64 evaluations: the agreement rule
        for v in (agree("out", sparse.out, dense.out, mags), agree("lse", sparse.lse, dense.lse, mags)):
            assert v.ok, (spec, v)
        assert bool(p.empty_rows.any()) or spec.seed != 3  # late keys, causal: the first query tiles read nothing


def _case(spec):
    p = build(spec)
    structured = spec.mask_kind == "none" and not spec.empty_rows
    return Case(p.q, p.k, p.v, p.allowed, p.scale, spec.causal, spec.window, p.cu_seqlens_q, p.cu_seqlens_k, structured,
                "first", spec.block if sparse_route(spec) else 0)


def test_mask_arg_routes_only_exact_tile_masks_of_the_sparse_route():
    base = dict(n_q=40, n_k=130, d=2, dv=2, block=16, seed=5)
    m = mask_arg(_case(ProblemSpec(mask_kind="block_sparse", sparse=True, causal=True, **base)))
    assert isinstance(m, BlockSparseMask) and (m.block_q, m.block_k) == (16, 16) and m.dense is None
    assert isinstance(mask_arg(_case(ProblemSpec(mask_kind="late_keys", sparse=True, window=(5, 9), **base))),
                      BlockSparseMask)
    # the same mask with the family off goes dense (both routes are fuzzed), and so does every other mask
    for spec in (ProblemSpec(mask_kind="block_sparse", causal=True, **base),
                 ProblemSpec(mask_kind="random", sparse=True, **base),
                 ProblemSpec(mask_kind="block_sparse", sparse=True, empty_rows=True, **base)):
        assert isinstance(mask_arg(_case(spec)), torch.Tensor), spec
    assert mask_arg(_case(ProblemSpec(causal=True, sparse=True, **base))) is None  # structure alone: no mask
    varlen = ProblemSpec(n_q=40, n_k=130, d=2, dv=2, seqlens=((20, 65), (20, 65)), mask_kind="block_sparse",
                         sparse=True, block=16)
    assert not sparse_route(varlen) and isinstance(mask_arg(_case(varlen)), torch.Tensor)
    # a case that claims the route with a mask that is not whole tiles stays dense
    c = _case(ProblemSpec(mask_kind="block_sparse", sparse=True, **base))
    flipped = c.allowed.clone()
    flipped[0, 0, 0, 0] = ~flipped[0, 0, 0, 0]
    assert isinstance(mask_arg(c._replace(allowed=flipped)), torch.Tensor)


@settings(max_examples=60, database=None, deadline=None)
@given(attention_problems(max_nq=70, max_nk=140, max_d=2, blocks=(16, 64, 128), densities=(0.6, 0.1, 0.0, 1.0)))
def test_every_problem_on_the_sparse_route_reaches_ours_as_a_block_sparse_mask(spec):
    """Whatever the structure (causal, window, Nq ≠ Nk, GQA, batch), a drawn problem on the route is
    recognised exactly: the kernel gets its tiles, never a wrong mask."""
    m = mask_arg(_case(spec))
    if sparse_route(spec):
        assert isinstance(m, BlockSparseMask), spec
        p = build(spec)
        ok = _structure_of(spec.n_q, spec.n_k, spec.causal, spec.window)
        assert torch.equal(_expand(m.tiles, spec.block, spec.block, spec.n_q, spec.n_k) & ok, p.allowed)
    else:
        assert not isinstance(m, BlockSparseMask)


def test_the_ci_campaign_draws_both_routes_of_tile_masks():
    strat = _strategy(targets.get("triton"), "cpu", dict(PROFILES["ci"]))
    kw = dict(settings=settings(max_examples=1000, database=None), random=Random(0))
    assert sparse_route(find(strat, lambda s: sparse_route(s) and s.causal and s.n_q != s.n_k, **kw))
    assert find(strat, lambda s: s.mask_kind in ("block_sparse", "late_keys") and not s.sparse, **kw)
    assert not any(l.sparse for l in _plan(targets.get("sdpa-math"), "cpu", dict(PROFILES["gpu"]), 0).launches)
    assert "sparse" not in _plan(targets.get("sdpa-math"), "cpu", dict(PROFILES["ci"]), 0).families


def _gluon_sparse_strategy(seed=0):
    return _strategy(targets.get("triton-atomic"), "cuda", dict(SPARSE), seed)


@settings(max_examples=30, database=None, deadline=None)
@given(_gluon_sparse_strategy())
def test_gluon_sparse_profile_draws_only_calls_the_hopper_block_sparse_kernels_take(spec):
    """Every problem of ``--profile gluon-sparse`` reaches ours as a BlockSparseMask of 128 × 128 tiles
    (no dense part) and, as the campaign hands it over (bf16, (B, N, H, D) views under noncontig),
    plans the Gluon forward and backward on an H200 for the default call (deterministic=False)."""
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate

    assert sparse_route(spec) and spec.block == 128 and spec.n_q == spec.n_k and spec.n_q % 128 == 0
    c = _case(spec)
    m = mask_arg(c)
    assert isinstance(m, BlockSparseMask) and (m.block_q, m.block_k) == (128, 128) and m.dense is None
    q, k, v = (t.to(torch.bfloat16) for t in (c.q, c.k, c.v))
    if spec.noncontig:  # as flashproof/fuzz/checks.py's _leaf builds them
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    prob = validate(q, k, v, causal=c.causal, window=c.window, mask=m, scale=c.scale, requires_grad=True)
    route = dispatch.plan(prob, dispatch.Device("cuda", (9, 0), False, True, True))
    assert (route.forward, route.backward) == ("gluon", "gluon"), (spec, route.reasons)


def test_gluon_sparse_profile_reaches_its_families():
    """Over the first eight seeds: causal and not, d = 64 and 128, GQA, B > 1, (B, N, H, D) views, one
    tile and many, 10 % of tiles, no tile, every tile, late keys, and masks with a whole query-tile
    row off (rows out 0, LSE −inf) and a whole key-tile column off."""
    strat = st.one_of(*(_gluon_sparse_strategy(seed) for seed in range(8)))

    def tile_grid(s):
        return block_tiles(build(s).allowed, 128, 128, s.causal, s.window)

    probes = {"causal": lambda s: s.causal, "not_causal": lambda s: not s.causal, "d64": lambda s: s.d == 64,
              "d128": lambda s: s.d == 128, "gqa": lambda s: s.heads_q > s.heads_kv, "batch": lambda s: s.batch > 1,
              "noncontig": lambda s: s.noncontig, "one_tile": lambda s: s.n_q == 128, "long": lambda s: s.n_q == 1024,
              "density_0.1": lambda s: s.density == 0.1, "density_0": lambda s: s.density == 0 and s.mask_kind == "block_sparse",
              "density_1": lambda s: s.density == 1, "late_keys": lambda s: s.mask_kind == "late_keys",
              "empty_query_tile": lambda s: s.n_q > 128 and bool((~tile_grid(s).any(-1)).any()) and bool(tile_grid(s).any()),
              "empty_key_tile": lambda s: not s.causal and s.n_q > 128 and bool((~tile_grid(s).any(-2)).any())
              and bool(tile_grid(s).any())}
    for fam, pred in probes.items():
        assert pred(find(strat, pred, settings=settings(max_examples=1000, database=None), random=Random(0))), fam


_LAUNCHES_1 = _plan(targets.get("triton-atomic"), "cuda", dict(SPARSE), 1).launches


@settings(max_examples=40, database=None, deadline=None)
@given(_gluon_sparse_strategy(1))
def test_every_gluon_sparse_problem_is_in_one_of_its_launches(spec):
    assert launch_of(spec, True) in _LAUNCHES_1


def test_gluon_sparse_launches_their_specimens_and_explicit_examples():
    t = targets.get("triton-atomic")
    for seed in range(3):
        p = _plan(t, "cuda", dict(SPARSE), seed)
        assert len(p.launches) == SPARSE["launches"] and all(l.sparse and l.sparse[0] == 128 for l in p.launches)
        assert {l.causal for l in p.launches} == {True, False} and {l.d for l in p.launches} == {64, 128}
        for s in specimens(t, "cuda", dict(SPARSE), seed) + list(p.explicit):
            assert sparse_route(s) and launch_of(s, True) in p.launches, s
        assert any(s.density == 0.1 for s in p.explicit)
