"""The block-sparse walk lists, built on the device by one small Triton kernel per direction.

A BlockSparseMask gives a bool tile grid (B|1, Hq|1, TQ, TK). The attention kernels walk, per
query tile (forward, dQ) or per key tile (dK/dV), the tiles that are present and that the window
lets at least one pair through, in two groups: *partial* tiles, which need the per-pair predicate
(a window edge, a ragged end, a dense mask), then *full* tiles, which run without one.

For tile rows [r0, r1] (r1 clipped to Nq − 1) and keys [k0, k1], diag = Nk − Nq, query i reads
keys [i + diag − left, i + diag + right] (None = unbounded):

* reach: r0 < Nq, k0 < Nk, min(k1, Nk − 1) ≥ r0 + diag − left and k0 ≤ r1 + diag + right (the
  rows' intervals shift by one per row, so their union is [r0 + diag − left, r1 + diag + right]);
* full: reach, r0 + block_q ≤ Nq, k1 ≤ Nk − 1, k0 ≥ r1 + diag − left, k1 ≤ r0 + diag + right (the
  keys every row reads), and no dense mask.

This replaced a chain of ~30 torch operations whose host time (0.7–1.5 ms a call on the H200)
exceeded the sparse kernels' own GPU time. ``tests/kernels/test_kernel_walk_lists.py`` checks the lists
against brute-force enumeration of every pair.

The lists depend only on the tile grid's values and the call's geometry, so ``WALK_LISTS`` keeps them
per mask (``walk_lists``): a training loop that passes the same mask every step builds them once, and
the backward finds the lists its forward built. The entry is found by the tiles tensor's identity and
checked against its data pointer and version counter (``Tensor._version``, bumped by every in-place
write through autograd-visible views), so a mask written in place is rebuilt. Writes autograd cannot
see (through ``.data``, or by a kernel writing through the pointer) are not detected: such a mask must
be a new tensor. Inference tensors have no version counter and are never cached.
"""
from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple

import torch
import triton
import triton.language as tl


@triton.jit
def _classes(qi, kj, Nq, Nk, bq, bk, left, right, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
             HAS_DENSE: tl.constexpr):
    """(reach, full) for query tiles qi and key tiles kj (broadcast)."""
    diag = Nk - Nq
    r0 = qi * bq
    r1 = tl.minimum(r0 + bq, Nq) - 1
    k0 = kj * bk
    k1 = k0 + bk - 1
    reach = (r0 < Nq) & (k0 < Nk)
    full = (r0 + bq <= Nq) & (k1 <= Nk - 1)
    if HAS_LEFT:
        reach = reach & (tl.minimum(k1, Nk - 1) >= r0 + diag - left)
        full = full & (k0 >= r1 + diag - left)
    if HAS_RIGHT:
        reach = reach & (k0 <= r1 + diag + right)
        full = full & (k1 <= r0 + diag + right)
    if HAS_DENSE:
        full = full & (reach != reach)
    return reach, full & reach


@triton.jit
def tile_plan(TILES, NUM, IDX, stb, sth, sti, stj, Hq, R, C, Nq, Nk, bq, bk, left, right,
              HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_DENSE: tl.constexpr,
              TRANSPOSED: tl.constexpr, BLOCK: tl.constexpr):
    """Grid (R, B·Hq). Row ``r`` of the (R, C) grid — query tile r against key tiles (TRANSPOSED
    False), or key tile r against query tiles — writes NUM[b, h, r] = (n_partial, n_full) and
    IDX[b, h, r, :n_partial + n_full] = the partial columns ascending, then the full ones.
    TILES: uint8 view of the tile grid with strides (stb, sth, sti, stj), 0 on broadcast dims."""
    r = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    row = bh.to(tl.int64) * R + r
    base = TILES + b.to(tl.int64) * stb + h.to(tl.int64) * sth
    out = IDX + row * C
    n_part = r * 0
    n_full = r * 0
    # two passes: the full tiles' slots start after the last partial one
    for FULL in tl.static_range(2):
        n = r * 0
        for c0 in range(0, C, BLOCK):
            cols = c0 + tl.arange(0, BLOCK)
            inside = cols < C
            if TRANSPOSED:
                qi = cols
                kj = r
                t = tl.load(base + qi.to(tl.int64) * sti + kj.to(tl.int64) * stj, mask=inside, other=0)
            else:
                qi = r
                kj = cols
                t = tl.load(base + qi.to(tl.int64) * sti + kj.to(tl.int64) * stj, mask=inside, other=0)
            reach, full = _classes(qi, kj, Nq, Nk, bq, bk, left, right, HAS_LEFT, HAS_RIGHT, HAS_DENSE)
            take = inside & (t != 0) & reach
            if FULL == 1:
                take = take & full
            else:
                take = take & (full == 0)
            flag = take.to(tl.int32)
            pos = n + tl.cumsum(flag, 0) - flag
            if FULL == 1:
                pos += n_part
            tl.store(out + pos, cols, mask=take)
            n += tl.sum(flag, 0)
        if FULL == 1:
            n_full = n
        else:
            n_part = n
    tl.store(NUM + 2 * row, n_part)
    tl.store(NUM + 2 * row + 1, n_full)


class Geometry(NamedTuple):
    """What the walk lists depend on besides the tile grid's values: the batch and head counts they are
    expanded to, the lengths, the tile sizes, the window (``left``/``right`` as the kernels take them:
    0 for an absent side, see ``has_left``/``has_right``), whether a dense mask rides along (then no
    tile is full), and the tile grid's layout (shape, strides, device)."""

    B: int
    Hq: int
    Nq: int
    Nk: int
    block_q: int
    block_k: int
    left: int
    right: int
    has_left: bool
    has_right: bool
    has_dense: bool
    shape: tuple
    strides: tuple
    device: torch.device


class _Entry(NamedTuple):
    ref: weakref.ref  # the tiles tensor the lists were built from
    ptr: int
    version: int
    lists: dict  # "KV" | "Q" -> {"KV_NUM": ..., "KV_IDX": ...}


class WalkListCache:
    """A bounded LRU of walk lists per (tiles tensor, ``Geometry``). ``get`` returns the lists of one
    direction, building them on a miss; an entry whose tensor was collected is dropped (a weakref
    callback), so a later tensor that reuses the address or the id cannot find it. ``hits``,
    ``misses`` (lists built) and ``len()`` are for tests and probes. Thread-safe: the autograd engine
    runs CUDA backwards on its own thread."""

    def __init__(self, capacity: int = 32):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._entries)

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def get(self, tiles: torch.Tensor, geom: Geometry, name: str, build):
        """The lists ``name`` ("KV" | "Q") of ``tiles`` for ``geom``: cached, or ``build(tiles, geom,
        name)`` -> {f"{name}_NUM": ..., f"{name}_IDX": ...}, kept when ``tiles`` can be tracked."""
        if tiles.is_inference():  # no version counter: an in-place write could not be seen
            self.misses += 1
            return build(tiles, geom, name)
        key = (id(tiles), geom)
        ptr, version = tiles.data_ptr(), tiles._version
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (entry.ref() is not tiles or entry.ptr != ptr or entry.version != version):
                del self._entries[key]  # written in place (or a stale id): rebuild every direction
                entry = None
            if entry is not None and name in entry.lists:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry.lists[name]
        lists = build(tiles, geom, name)
        with self._lock:
            self.misses += 1
            entry = self._entries.get(key)
            if entry is None or entry.ref() is not tiles or entry.ptr != ptr or entry.version != version:
                entry = _Entry(weakref.ref(tiles, self._forget(key)), ptr, version, {})
                self._entries[key] = entry
            entry.lists[name] = lists
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return lists

    def _forget(self, key):
        """The weakref callback of the entry at ``key``: drop it once its tensor is collected (only if
        the entry there is still that tensor's)."""
        def forget(ref):
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry.ref is ref:
                    del self._entries[key]
        return forget


#: the process's walk lists, per mask (``walk_lists``)
WALK_LISTS = WalkListCache()


def build_lists(tiles: torch.Tensor, geom: Geometry, name: str, block: int = 1024) -> dict:
    """One launch of ``tile_plan``: the walk lists ``name`` of ``tiles`` (bool (B|1, Hq|1, TQ, TK)):

    * "KV": KV_NUM (B, Hq, TQ, 2) int32 — per query tile, how many present key tiles need the
      predicate (partial) and how many do not (full) — and KV_IDX (B, Hq, TQ, TK) int32, their
      column indices, the partial ones first, then the full ones, each ascending (entries past those:
      unspecified);
    * "Q": Q_NUM (B, Hq, TK, 2), Q_IDX (B, Hq, TK, TQ), the same per key tile (the dK/dV walk).

    ``block``: columns per step of the list kernel (a test makes it small to take several steps)."""
    TQ, TK = tiles.shape[2], tiles.shape[3]
    u = tiles.expand(geom.B, geom.Hq, TQ, TK).view(torch.uint8)  # broadcast dims keep stride 0
    R, C, transposed = (TQ, TK, False) if name == "KV" else (TK, TQ, True)
    num = torch.empty(geom.B, geom.Hq, R, 2, dtype=torch.int32, device=tiles.device)
    idx = torch.empty(geom.B, geom.Hq, R, C, dtype=torch.int32, device=tiles.device)
    tile_plan[(R, geom.B * geom.Hq)](u, num, idx, *u.stride(), geom.Hq, R, C, geom.Nq, geom.Nk, geom.block_q,
                                     geom.block_k, geom.left, geom.right, HAS_LEFT=geom.has_left,
                                     HAS_RIGHT=geom.has_right, HAS_DENSE=geom.has_dense, TRANSPOSED=transposed,
                                     BLOCK=min(triton.next_power_of_2(C), block))
    return {f"{name}_NUM": num, f"{name}_IDX": idx}


def walk_lists(tiles: torch.Tensor, geom: Geometry, names=("KV", "Q"), cache: WalkListCache = WALK_LISTS,
               block: int = 1024) -> dict:
    """The walk lists ``names`` of ``tiles`` for ``geom`` ({"KV_NUM", "KV_IDX", "Q_NUM", "Q_IDX"} as
    asked), from ``cache``, built there on a miss (``build_lists`` with ``block``)."""
    build = functools.partial(build_lists, block=block)
    out = {}
    for name in names:
        out.update(cache.get(tiles, geom, name, build))
    return out
