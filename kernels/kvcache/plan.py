"""The split plan of the KV-cache kernel: how one request's keys are cut into splits, and how many.

A request of ``length`` valid cache positions whose queries can read keys from ``lo`` on (0, or
the left edge of the window of its first query) has n = length − lo candidate keys. With S splits
and a tile of ``block`` keys, split s (0 ≤ s < S) takes the keys

    [lo + s·c, lo + min((s + 1)·c, n)),   c = ⌈⌈n / block⌉ / S⌉ · block   (a whole number of tiles)

so every split but the last few is c keys long and trailing splits may be empty (start ≥ stop); an
empty split contributes the empty summary ⊥ (out 0, lse −∞) and the merge ignores it. The same
arithmetic runs in the Triton kernel (``triton._split_range``), in the torch path (which calls
these functions) and, on z3 integers, in the obligation that proves the splits partition the
keys for every length and split count (``docs/kvcache.md``).

``split_range`` takes an ``ops`` namespace for its two non-ring operations (floor division and
minimum) so the obligation can run it on symbolic integers; ``INT_OPS`` is plain Python.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

__all__ = ["IntOps", "INT_OPS", "chunk_size", "split_range", "split_ranges", "SplitChoice", "choose_num_splits",
           "MAX_SPLITS", "MIN_KEYS_PER_SPLIT", "CTAS_PER_SM"]

#: Upper bound on the split count (the merge kernel holds all of a row's partial lse values in one tile).
MAX_SPLITS = 64
#: A split shorter than this spends more on its fixed cost (Q load, partial write, merge read) than it saves.
MIN_KEYS_PER_SPLIT = 512
#: Programs per SM the heuristic aims at: several resident programs hide the memory latency of each.
CTAS_PER_SM = 4


class IntOps(NamedTuple):
    """The integer operations ``split_range`` needs beyond + and ·: floor division (positive
    divisor) and minimum."""

    floordiv: Any
    minimum: Any


INT_OPS = IntOps(floordiv=lambda a, b: a // b, minimum=min)


def chunk_size(n, num_splits, block, ops: IntOps = INT_OPS):
    """Keys per split: ⌈⌈n / block⌉ / num_splits⌉ · block (n ≥ 0, num_splits ≥ 1, block ≥ 1)."""
    tiles = ops.floordiv(n + block - 1, block)                   # ⌈n / block⌉
    return ops.floordiv(tiles + num_splits - 1, num_splits) * block


def split_range(s, n, num_splits, block, ops: IntOps = INT_OPS):
    """(start, stop) of split ``s`` over the keys 0..n−1 (offsets from ``lo``); empty when start ≥ stop."""
    c = chunk_size(n, num_splits, block, ops)
    start = s * c
    return start, ops.minimum(start + c, n)


def split_ranges(n: int, num_splits: int, block: int) -> list[range]:
    """Every split of n keys as a Python range (empty ranges kept, in split order)."""
    if n < 0 or num_splits < 1 or block < 1:
        raise ValueError(f"split_ranges needs n >= 0, num_splits >= 1, block >= 1; got {n}, {num_splits}, {block}")
    return [range(a, max(a, b)) for a, b in (split_range(s, n, num_splits, block) for s in range(num_splits))]


class SplitChoice(NamedTuple):
    """The heuristic's answer and why: ``num_splits`` and the quantities it came from."""

    num_splits: int
    programs_without_split: int   # B · Hkv
    target_programs: int          # CTAS_PER_SM · SMs
    longest: int                  # the longest request's candidate keys


def choose_num_splits(batch: int, heads_kv: int, longest: int, num_sms: int) -> SplitChoice:
    """How many splits: enough (b, kv head, split) programs to give every SM ``CTAS_PER_SM`` of them,
    but no split shorter than ``MIN_KEYS_PER_SPLIT`` keys and at most ``MAX_SPLITS``.

    Decode is memory-bound: each program streams its split of one KV head's cache once, so the work
    is spread evenly when the programs outnumber the SMs a few times over. B · Hkv programs already
    do that at large batch (S = 1, no merge); at B = 1–8 with long caches the split supplies them."""
    pairs = max(1, batch * heads_kv)
    target = CTAS_PER_SM * max(1, num_sms)
    want = -(-target // pairs)
    cap = max(1, longest // MIN_KEYS_PER_SPLIT)
    return SplitChoice(max(1, min(want, cap, MAX_SPLITS)), pairs, target, longest)


def next_pow2(x: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, x))))
