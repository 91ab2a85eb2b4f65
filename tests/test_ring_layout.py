"""The host-side pieces of ring attention, in one process: layouts, the concrete plan, the merge's
edge cases and the errors that need no process group."""
from __future__ import annotations

import pytest
import torch

from flashproof.kernels.distributed import LAYOUTS, ring_attention, ring_plan, shard, unshard
from flashproof.kernels.distributed import merge as M
from flashproof.kernels.distributed import schedule as S


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("world", (1, 2, 3, 5))
def test_shard_then_unshard_is_the_identity(world, layout):
    x = torch.arange(2 * 3 * 60 * 2).reshape(2, 3, 60, 2)
    pieces = [shard(x, world=world, rank=r, layout=layout) for r in range(world)]
    assert all(p.shape == (2, 3, 60 // world, 2) for p in pieces)
    assert torch.equal(unshard(pieces, layout=layout), x)


def test_zigzag_rank_holds_chunks_r_and_2w_minus_1_minus_r():
    x = torch.arange(8).reshape(1, 1, 8, 1)  # 2W = 8 chunks of one row each
    got = [shard(x, world=4, rank=r, layout="zigzag").flatten().tolist() for r in range(4)]
    assert got == [[0, 7], [1, 6], [2, 5], [3, 4]]


@pytest.mark.parametrize("world", (1, 2, 3, 4, 8))
def test_zigzag_is_torch_context_parallel_head_tail_order(world):
    """torch's default load balancer for context_parallel (head-tail) lays shards out as zigzag."""
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import _HeadTailLoadBalancer

    n = 6 * 2 * world
    theirs = _HeadTailLoadBalancer(n, world, "cpu")._generate_indices(restore=False)[0]
    pos = torch.arange(n).reshape(1, 1, n, 1)
    ours = torch.cat([shard(pos, world=world, rank=r, layout="zigzag") for r in range(world)], dim=2).flatten()
    assert torch.equal(ours, theirs.to(ours.dtype))


@pytest.mark.parametrize("call, exc, words", [
    (lambda: shard(torch.zeros(1, 1, 10, 1), world=3, rank=0), ValueError, "not a multiple of 3"),
    (lambda: shard(torch.zeros(1, 1, 9, 1), world=3, rank=0, layout="zigzag"), ValueError, "not a multiple of 6"),
    (lambda: shard(torch.zeros(1, 1, 12, 1), world=3, rank=3), ValueError, "rank must be an int in [0, 3)"),
    (lambda: shard(torch.zeros(1, 1, 12, 1), world=0, rank=0), ValueError, "world must be an int >= 1"),
    (lambda: shard(torch.zeros(1, 1, 12, 1), world=2, rank=0, layout="ring"), ValueError, "layout must be one of"),
    (lambda: shard([1, 2], world=1, rank=0), TypeError, "must be a torch.Tensor"),
    (lambda: shard(torch.zeros(4), world=1, rank=0, dim=2), ValueError, "out of range"),
    (lambda: unshard([]), TypeError, "non-empty sequence"),
    (lambda: unshard([torch.zeros(1, 1, 2, 1), torch.zeros(1, 1, 4, 1)]), ValueError, "one shape"),
    (lambda: unshard([torch.zeros(1, 1, 3, 1)] * 2, layout="zigzag"), ValueError, "not a multiple of 2"),
    (lambda: ring_plan(0, 0, "contiguous", False), ValueError, "world >= 1"),
    (lambda: ring_plan(2, 2, "contiguous", False), ValueError, "0 <= rank < world"),
    (lambda: ring_plan(2.0, 0, "contiguous", False), TypeError, "world must be an int"),
], ids=["length", "zigzag-length", "rank", "world", "layout", "type", "dim", "empty", "shapes", "zigzag-shard",
        "plan-world", "plan-rank", "plan-type"])
def test_bad_host_calls(call, exc, words):
    with pytest.raises(exc) as e:
        call()
    assert words in str(e.value)


def test_ring_attention_needs_an_initialised_process_group():
    x = torch.zeros(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match="torch.distributed initialised"):
        ring_attention(x, x, x)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", (False, True))
@pytest.mark.parametrize("world", (1, 2, 3, 4, 7))
def test_plan_calls_each_allowed_block_once(world, layout, causal):
    """The concrete plan (the proof covers every W): per rank, the (query chunk, key chunk) calls are
    exactly the blocks with an allowed pair, each once, causal inside only on the diagonal."""
    C = S.num_chunks(world, layout)
    for rank in range(world):
        calls = [(S.chunk_of(rank, b.q_slot, world, layout), S.chunk_of(st.source, b.k_slot, world, layout),
                  S.local_causal(b.kind)) for st in ring_plan(world, rank, layout, causal) for b in st.blocks]
        mine = [S.chunk_of(rank, a, world, layout) for a in range(S.slots(layout))]
        want = [(qc, kc, causal and kc == qc) for qc in mine for kc in range(C) if not causal or kc <= qc]
        assert sorted(calls) == sorted(want)


def test_zigzag_balances_causal_work():
    """Zigzag: every rank runs the same number of block calls (diagonal ones count half)."""
    work = []
    for rank in range(4):
        plan = ring_plan(4, rank, "zigzag", True)
        work.append(sum(0.5 if S.local_causal(b.kind) else 1.0 for st in plan for b in st.blocks))
    assert len(set(work)) == 1, work


def test_merge_of_bottoms_is_bottom_and_bottom_is_an_identity():
    acc = M.bottom((1, 1, 2), 3, torch.float32, "cpu")
    out, lse = M.finish(M.merge(acc, torch.zeros(1, 1, 2, 3), torch.full((1, 1, 2), float("-inf"))))
    assert torch.equal(out, torch.zeros(1, 1, 2, 3)) and torch.isneginf(lse).all()
    o = torch.randn(1, 1, 2, 3)
    lse_b = torch.tensor([[[0.5, -2.0]]])
    out, lse = M.finish(M.merge(acc, o, lse_b))
    assert torch.equal(out, o) and torch.equal(lse, lse_b)  # e^0 = 1 and z/1 exactly
