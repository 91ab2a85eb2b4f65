"""The per-mask cache of block-sparse walk lists (``kernels/attention/triton/plan.py``: ``WalkListCache``,
``WALK_LISTS``) and the backward's reuse of its forward's launch data (``op.py``), under
TRITON_INTERPRET=1: a second step with the same mask builds nothing and gives bitwise the results of
a step that built everything; a mask written in place, a different mask at the same address, a
collected mask, an evicted entry and an inference tensor are rebuilt; the backward runs on the
problem its forward validated, and gives the same gradients as a backward that re-validates."""
from __future__ import annotations

import gc

import pytest
import torch

from flashproof.kernels.interpreter import interpreting

pytest.importorskip("triton")
if not interpreting():
    pytest.skip("needs TRITON_INTERPRET=1 (set by conftest) for CPU runs", allow_module_level=True)

from flashproof.kernels.attention import op  # noqa: E402
from flashproof.kernels.attention.api import BlockSparseMask, attention, validate  # noqa: E402
from flashproof.kernels.attention.triton import host as at  # noqa: E402
from flashproof.kernels.attention.triton import plan  # noqa: E402

N, D, BLOCK = 40, 16, 16
T = -(-N // BLOCK)  # tiles per side


def _tiles(seed, p=0.5):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(1, 2, T, T, generator=g) < p
    t[..., 0, 0] = True  # some tile present whatever the draw
    return t


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v, do = (torch.randn(1, 2, N, D, generator=g) for _ in range(4))
    return q, k, v, do


def _step(tiles, causal=False, seed=0):
    """(out, lse, dq, dk, dv) of one block-sparse forward + backward through ``attention()``."""
    q, k, v, do = _inputs(seed)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out, lse = attention(q, k, v, mask=BlockSparseMask(tiles, BLOCK, BLOCK), causal=causal, backend="triton",
                         tuning="first", return_lse=True)
    grads = torch.autograd.grad(out, (q, k, v), do)
    return (out.detach(), lse.detach(), *grads)


def _assert_bitwise(got, want):
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        assert torch.equal(a, b), f"{name} differs (max |diff| {(a - b).abs().max().item():.3g})"


def _lists(tiles, cache, names=("KV", "Q")):
    q = torch.zeros(1, 2, N, 8)
    prob = validate(q, q, q, mask=BlockSparseMask(tiles, BLOCK, BLOCK), backend="triton")
    return at.tile_lists(prob, 1, 2, N, N, names, cache=cache)


def _fresh(tiles):
    """The lists of ``tiles``' current values, built in a cache of their own."""
    return _lists(tiles.clone(), plan.WalkListCache())


def _same_lists(a, b):
    """Equal where the kernels read: the counts, and each row's first n_partial + n_full columns."""
    for name in ("KV", "Q"):
        num_a, num_b = a[f"{name}_NUM"], b[f"{name}_NUM"]
        if not torch.equal(num_a, num_b):
            return False
        used = torch.arange(a[f"{name}_IDX"].shape[-1]) < num_a.sum(-1, keepdim=True)
        if not torch.equal(torch.where(used, a[f"{name}_IDX"], -1), torch.where(used, b[f"{name}_IDX"], -1)):
            return False
    return True


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_second_step_builds_nothing_and_matches_the_building_step_bitwise(causal):
    plan.WALK_LISTS.clear()
    tiles = _tiles(1)
    first = _step(tiles, causal)  # builds KV (forward) and Q (backward)
    assert (plan.WALK_LISTS.misses, plan.WALK_LISTS.hits) == (2, 1), "the backward should find the forward's KV"
    second = _step(tiles, causal)
    assert plan.WALK_LISTS.misses == 2, "a second step with the same mask rebuilt its lists"
    assert plan.WALK_LISTS.hits >= 3
    _assert_bitwise(second, first)
    plan.WALK_LISTS.clear()
    _assert_bitwise(_step(tiles.clone(), causal), first)  # an uncached mask of the same values


def test_mask_written_in_place_is_rebuilt():
    cache = plan.WalkListCache()
    tiles = _tiles(2)
    before = _lists(tiles, cache)
    tiles[0, 1, 1, 2] = ~tiles[0, 1, 1, 2]  # bumps tiles._version
    after = _lists(tiles, cache)
    assert cache.misses == 4 and cache.hits == 0
    assert _same_lists(after, _fresh(tiles)) and not _same_lists(after, before)
    assert _same_lists(_lists(tiles, cache), after) and cache.hits == 2  # and then cached again


def test_mask_written_in_place_changes_the_attention_results():
    plan.WALK_LISTS.clear()
    tiles = _tiles(3)
    _step(tiles)
    tiles[0, 0, 2, 0] = ~tiles[0, 0, 2, 0]
    got = _step(tiles)
    plan.WALK_LISTS.clear()
    _assert_bitwise(got, _step(tiles.clone()))


def test_a_different_mask_at_the_same_address_is_not_served_the_first_ones_lists():
    cache = plan.WalkListCache()
    tiles = _tiles(4)
    _lists(tiles, cache)
    transposed = tiles.mT  # same data pointer and storage, another mask
    assert transposed.data_ptr() == tiles.data_ptr() and not torch.equal(transposed, tiles)
    assert _same_lists(_lists(transposed, cache), _fresh(transposed))
    # two tensors over one buffer whose bytes change behind autograd's back (no version bump)
    buf = bytearray(tiles.flatten().numpy().tobytes())
    a = torch.frombuffer(buf, dtype=torch.bool).view(1, 2, T, T)
    _lists(a, cache)
    buf[5] ^= 1
    b = torch.frombuffer(buf, dtype=torch.bool).view(1, 2, T, T)
    assert b.data_ptr() == a.data_ptr()
    assert _same_lists(_lists(b, cache), _fresh(b))


def test_collected_mask_drops_its_entry():
    cache = plan.WalkListCache()
    tiles = _tiles(5)
    _lists(tiles, cache)
    assert len(cache) == 1
    del tiles
    gc.collect()
    assert len(cache) == 0, "the entry of a collected mask (and its lists) stayed in the cache"


def test_cache_is_bounded_least_recently_used_first():
    cache = plan.WalkListCache(capacity=2)
    a, b, c = _tiles(6), _tiles(7), _tiles(8)
    _lists(a, cache, ("KV",))
    _lists(b, cache, ("KV",))
    _lists(a, cache, ("KV",))  # a is now the most recently used
    _lists(c, cache, ("KV",))  # evicts b
    assert len(cache) == 2 and (cache.misses, cache.hits) == (3, 1)
    _lists(a, cache, ("KV",))
    assert cache.hits == 2
    _lists(b, cache, ("KV",))
    assert cache.misses == 4
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        plan.WalkListCache(capacity=0)


def test_inference_tensor_mask_is_never_cached():
    cache = plan.WalkListCache()
    with torch.inference_mode():
        tiles = _tiles(9)
    first = _lists(tiles, cache)
    assert _same_lists(_lists(tiles, cache), first)
    assert (cache.misses, cache.hits, len(cache)) == (4, 0, 0)


def test_backward_reuses_the_forwards_problem(monkeypatch):
    """One step validates in the front and in the forward op body; the backward op body runs on the
    forward's problem (whose ``cache`` holds the forward's launch arguments), and its gradients equal
    those of the backward op called directly (which re-validates) bitwise."""
    calls = []
    real = op._problem
    monkeypatch.setattr(op, "_problem", lambda *a: calls.append(a) or real(*a))
    plan.WALK_LISTS.clear()
    tiles = _tiles(10)
    got = _step(tiles)
    assert len(calls) == 1, f"the backward re-validated its call ({len(calls)} validations in the op bodies)"
    q, k, v, do = _inputs()
    out, lse, *_ = got
    again = op.attention_backward_op(q, k, v, out, lse, do, None, None, None, tiles, BLOCK, BLOCK, None, None, None,
                                     None, None, False, False, True, "triton", "first", "", 0.0, None)
    assert len(calls) == 2, "a backward op called outside autograd must validate its own call"
    for name, a, b in zip(("dq", "dk", "dv"), again, got[2:]):
        assert torch.equal(a, b), name


def test_no_stale_hand_over_between_steps():
    """A forward without a backward leaves nothing that a later call could pick up: the next step with
    another mask gives the results of that mask alone."""
    plan.WALK_LISTS.clear()
    q, k, v, _ = _inputs()
    q.requires_grad_()
    attention(q, k, v, mask=BlockSparseMask(_tiles(11), BLOCK, BLOCK), backend="triton", tuning="first")
    got = _step(_tiles(12))
    plan.WALK_LISTS.clear()
    _assert_bitwise(got, _step(_tiles(12)))


def test_host_pow2_is_tritons_next_power_of_2():
    """The host's own power of two (``host._pow2``, which replaced ``triton.next_power_of_2`` on the
    per-launch path) gives Triton's value."""
    import triton
    ns = list(range(1, 5000)) + [2 ** 20 - 1, 2 ** 20, 2 ** 20 + 1, 2 ** 29, 2 ** 29 + 1]
    assert [at._pow2(n) for n in ns] == [triton.next_power_of_2(n) for n in ns]


def _custom_op_only(monkeypatch):
    """Every call through the custom op, as when something traces it (``op.traced`` True)."""
    monkeypatch.setattr(op, "traced", lambda args: True)


def test_eager_call_skips_the_custom_op_and_equals_it_bitwise(monkeypatch):
    """A plain eager call runs the op bodies without the custom op's dispatch (``op.run``), with the
    results of the custom op bitwise; through the op, the backward still runs on the forward's problem
    (handed over by ``setup_context``)."""
    dispatched = []
    real_op = op.attention_op
    monkeypatch.setattr(op, "attention_op", lambda *a: dispatched.append(1) or real_op(*a))
    tiles = _tiles(13)
    eager = _step(tiles, causal=True)
    assert not dispatched, "an eager call went through the custom op's dispatch"
    calls = []
    real = op._problem
    monkeypatch.setattr(op, "_problem", lambda *a: calls.append(a) or real(*a))
    _custom_op_only(monkeypatch)
    _assert_bitwise(_step(tiles, causal=True), eager)
    assert dispatched and len(calls) == 1, f"{len(calls)} validations in the op bodies (want the forward's only)"


def test_traced_calls_take_the_custom_op():
    """Under a dispatch mode (what FakeTensorMode, make_fx and non-strict export push), a tensor subclass
    or a functorch transform, ``traced`` is True; a plain call is not traced."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))
    q, k, v, _ = _inputs()
    args = (q, k, v, None, None, None, 0, 0, None, None, None, None, None, False, False, False, "triton", "first", "",
            0.0, None)
    assert not op.traced(args)
    with Seen() as mode:
        assert op.traced(args)
        attention(q, k, v, backend="triton", tuning="first")
    assert "flashproof.attention.default" in mode.ops
    view = torch.Tensor._make_subclass(type("Sub", (torch.Tensor,), {}), q)
    assert op.traced((view,) + args[1:])
    assert torch.func.vmap(lambda x: torch.tensor(op.traced((x,) + args[1:])))(q[None]).all()
