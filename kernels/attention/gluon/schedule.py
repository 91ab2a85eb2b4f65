"""The persistent forward's work list: which query blocks each CTA runs, in which order.

The Gluon forward launches one CTA per SM (at most one per work item); CTA c runs the items
0 … count[c] − 1 of its row in turn. An item is one query block of one (batch, head): entry i of CTA c
is (b, h, m, base)[c, i] — batch, query head, query block, and ``base``, the number of key tiles the CTA
ran before it, so that its K/V ring slots and phases continue where the last item's stopped (the kernel
carries no counter from one item to the next). Four (P, W) int32 tensors, one per field, so that the
kernel divides nothing to decode an entry.

Both ways of dealing take the items in the order the non-persistent grid ran them — head by head, each
head's query blocks with the most key tiles first — so that the CTAs running at once belong to one or two
heads and read the same K and V (L2); work = key tiles + ``OVERHEAD`` an item, an estimate:

* ``rounds``: one round of P items at a time, the round's heaviest item to the CTA with the least work so
  far, the next heaviest to the next, and so on. Torch ops on the tiles' device, no host sync (a CUDA
  graph may capture the first call), T / P rounds for T items.
* ``in_order``: each item to the CTA free first, what the hardware's dispatch did for the grid. A heap on
  the host.

Dense calls (``dense``: the tile counts follow from the shape) build both on the host, keep the one with
the smaller estimated makespan (``makespan``) and copy it to the device once per shape; block-sparse
calls (``sparse``: the counts are on the device) deal in rounds, once per walk list, i.e. per mask
(``plan.WALK_LISTS``). H200, 2026-12-03 (BENCHMARKS.md, session 23 call 2; d = 128, 16k tokens, causal,
TFLOP/s rounds / in order / chosen): 635 / 618 / 634 at 4k, 666 / 659 / 666 at 8k, 684 / 689 / 690 at 16k,
662 / 672 / 669 at 32k, 642 / 632 / 641 at 64k.
"""
from __future__ import annotations

import heapq
import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple

import torch

#: a work item's fixed cost in key tiles (its prologue and epilogue), the balance's estimate
OVERHEAD = 2
#: the schedules kept (dense: per shape; block-sparse: per walk list)
CAPACITY = 64
#: ``base`` is kept modulo this: the kernel's ring slot and phase depend on it only modulo 2·NUM_STAGES (a
#: power of two below it), and base + a tile index then stays far inside int32 for any length
BASE_PERIOD = 2 ** 30
I32_MAX = 2 ** 31 - 1



class Schedule(NamedTuple):
    """Entry i of CTA c: batch b[c, i], query head h[c, i], query block m[c, i] (its rows 128·m …), base[c, i]
    (key tiles the CTA ran before it); count[c] entries per CTA. (P, W) int32 contiguous each, count (P,)."""

    b: torch.Tensor
    h: torch.Tensor
    m: torch.Tensor
    base: torch.Tensor
    count: torch.Tensor


_CACHE: OrderedDict = OrderedDict()
_LOCK = threading.Lock()
_SMS: dict = {}


def num_ctas(device) -> int:
    """The SMs of ``device`` (one resident CTA each); 132 off CUDA (an H100/H200's, for CPU tests)."""
    device = torch.device(device)
    if device.type != "cuda":
        return 132
    i = device.index if device.index is not None else torch.cuda.current_device()
    if i not in _SMS:
        _SMS[i] = torch.cuda.get_device_properties(i).multi_processor_count
    return _SMS[i]


def _checked(tiles, ctas, H):
    if tiles.dim() != 2 or tiles.numel() == 0:
        raise ValueError(f"tiles must be a non-empty (heads, query blocks) grid, got shape {tuple(tiles.shape)}")
    if ctas < 1:
        raise ValueError(f"ctas must be >= 1, got {ctas}")
    BH, NM = tiles.shape
    H = BH if H is None else H
    if H < 1 or BH % H:
        raise ValueError(f"H must be >= 1 and divide the {BH} rows of tiles, got {H}")
    return BH, NM, H, min(ctas, BH * NM)


def _width(P, W):
    """W, once P·W entries are known to be addressable by the kernel's int32 offsets."""
    if P * W > I32_MAX:
        raise ValueError(f"the forward's schedule would hold {P} x {W} entries, more than int32 offsets address")
    return W


def _order(tiles):
    """The run order of the items: head by head, each head's query blocks last to first (the causal grid's
    heaviest first): (head row, query block, key tiles) per item, int64."""
    BH, NM = tiles.shape
    bh = torch.arange(BH, device=tiles.device).repeat_interleave(NM)
    sm = torch.arange(NM - 1, -1, -1, device=tiles.device).repeat(BH)
    return bh, sm, tiles.to(torch.int64)[bh, sm]


def rounds(tiles: torch.Tensor, ctas: int, H: int = None) -> Schedule:
    """``tiles`` (B·H, NM) int: the key tiles of query block m of head b·H + h (dense, or a walk list's counts)
    -> the ``Schedule`` of P = min(ctas, B·H·NM) CTAs dealt in rounds (module docstring), W = ceil(B·H·NM / P)
    entries each at most. Every item appears exactly once; a CTA's ``base`` is the sum of the tile counts of
    its earlier items. ``H``: heads per batch (default: all B·H rows one batch). Runs on ``tiles``' device."""
    BH, NM, H, P = _checked(tiles, ctas, H)
    dev = tiles.device
    T = BH * NM
    W = _width(P, -(-T // P))
    bh, sm, n = _order(tiles)
    cost = n + OVERHEAD
    work = torch.zeros(P, dtype=torch.int64, device=dev)  # estimated work so far
    done = torch.zeros(P, dtype=torch.int64, device=dev)  # key tiles so far (the next item's base)
    sched = torch.zeros(4, P, W, dtype=torch.int32, device=dev)  # b, h, m, base
    for r in range(W):
        lo = r * P
        k = min(P, T - lo)
        items = lo + torch.argsort(cost[lo:lo + k], descending=True, stable=True)
        who = torch.argsort(work, stable=True)[:k]  # the k least loaded CTAs, least first
        sched[:, who, r] = torch.stack([bh[items] // H, bh[items] % H, sm[items], done[who] % BASE_PERIOD]).to(
            torch.int32)
        work[who] += cost[items]
        done[who] += n[items]
    count = torch.full((P,), W, dtype=torch.int32, device=dev)
    if T % P:  # the last round dealt T mod P items: the others' lists stop one short
        last = torch.ones(P, dtype=torch.bool, device=dev)
        last[who] = False
        count[last] = W - 1
    return Schedule(*sched, count)


def in_order(tiles: torch.Tensor, ctas: int, H: int = None) -> Schedule:
    """As ``rounds``, dealt as the hardware dispatches a grid: each item in run order to the CTA that (by
    the estimate) is free first, lowest index on ties. On the host (a heap over the CTAs; ``tiles`` on
    the CPU)."""
    BH, NM, H, P = _checked(tiles, ctas, H)
    bh, sm, n = (x.tolist() for x in _order(tiles.cpu()))
    free = [(0, c) for c in range(P)]
    lists = [[] for _ in range(P)]
    done = [0] * P
    for t in range(BH * NM):
        at, c = heapq.heappop(free)
        lists[c].append((bh[t] // H, bh[t] % H, sm[t], done[c] % BASE_PERIOD))
        done[c] += n[t]
        heapq.heappush(free, (at + n[t] + OVERHEAD, c))
    W = _width(P, max(len(x) for x in lists))
    pad = (0, 0, 0, 0)
    sched = torch.tensor([x + [pad] * (W - len(x)) for x in lists], dtype=torch.int32)  # (P, W, 4): one copy
    return Schedule(*sched.permute(2, 0, 1).contiguous(), torch.tensor([len(x) for x in lists], dtype=torch.int32))


def makespan(s: Schedule, tiles: torch.Tensor, H: int) -> int:
    """The estimated work (key tiles + ``OVERHEAD`` per item) of the busiest CTA of ``s``."""
    used = torch.arange(s.b.shape[1], device=s.b.device) < s.count[:, None]
    n = tiles.to(torch.int64)[(s.b * H + s.h).long(), s.m.long()] + OVERHEAD
    return int((n * used).sum(1).max())


def _cached(key, owner, make):
    """The schedule under ``key``, made by ``make()`` on a miss; ``owner`` (a walk-list tensor or None):
    the entry lives only as long as it does."""
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and (hit[0] is None or hit[0]() is owner):
            _CACHE.move_to_end(key)
            return hit[1]
    value = make()
    ref = None
    if owner is not None:
        def forget(_, key=key):
            with _LOCK:
                _CACHE.pop(key, None)
        ref = weakref.ref(owner, forget)
    with _LOCK:
        _CACHE[key] = (ref, value)
        while len(_CACHE) > CAPACITY:
            _CACHE.popitem(last=False)
    return value


def dense(B: int, H: int, NM: int, causal: bool, device) -> Schedule:
    """The schedule of a dense call: B·H heads of NM query blocks of 128 rows, key tiles NM each, or m + 1
    for query block m causal. A new shape's schedule is built on the host and copied to the device, which a
    CUDA graph capture does not allow (it raises, saying so): capture a shape after one eager call of it (the
    warm-up that ``torch.cuda.make_graphed_callables`` and ``torch.compile``'s cudagraphs run anyway)."""
    device = torch.device(device)
    P = num_ctas(device)

    def make():  # on the host, then one copy to the device
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"the Gluon forward's schedule for B={B}, H={H}, N={128 * NM}, causal={causal} is "
                               "built on the host on its first call, which a CUDA graph capture cannot record: "
                               "run the call once before capturing it")
        m = torch.arange(NM)
        tiles = (m + 1 if causal else torch.full_like(m, NM)).expand(B * H, NM)
        best = min((deal(tiles, P, H) for deal in (rounds, in_order)), key=lambda s: makespan(s, tiles, H))
        return Schedule(*(x.to(device) for x in best))
    return _cached(("dense", B, H, NM, bool(causal), P, device), None, make)


def sparse(kv_num: torch.Tensor) -> Schedule:
    """The schedule of a block-sparse call from its forward walk list's counts ``kv_num`` (B, H, NM, 2):
    (partial, full) key tiles per query block; kept as long as that list is (once per mask)."""
    B, H, NM, _ = kv_num.shape
    P = num_ctas(kv_num.device)
    return _cached(("sparse", id(kv_num), P), kv_num, lambda: rounds(kv_num.sum(-1).view(B * H, NM), P, H))
