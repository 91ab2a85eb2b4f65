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

import functools
from typing import Any, NamedTuple

__all__ = ["IntOps", "INT_OPS", "chunk_size", "split_range", "split_ranges", "SplitChoice", "choose_num_splits",
           "MAX_SPLITS", "SPLIT_KEYS_PER_SPLIT", "SHORT_SPLITS", "SHORT_SPLIT_KEYS", "PROGRAMS_PER_SM"]

#: Upper bound on the split count (the merge kernel holds all of a row's partial lse values in one tile).
MAX_SPLITS = 64
#: With S splits each split holds at least this many keys times S (S ≤ √(n / 32) for n keys): a split's
#: work shrinks as n / S while the fixed costs (Q load, partial write, the merge's read of every split) grow
#: with S, so the balance point grows as √n. H200, GPU time by graph replay, B = 1, 32/8 (ms at S = 8 / 16 /
#: 32): 8k 0.0272 / 0.0215 / 0.0228, 16k 0.0445 / 0.0326 / 0.0327, 32k 0.0781 / 0.0504 / 0.0500, 64k 0.145 /
#: 0.0847 / 0.0801 (2026-12-03, BENCHMARKS.md session 23 call 4). The rule before it, a fixed 1024 keys a
#: split (from 2026-12-01 17:33: B = 1, 16k, S = 16 0.027 ms, S = 32 0.030), kept S = 8 at 8k: 1.26× the time.
SPLIT_KEYS_PER_SPLIT = 32
#: ... or, up to SHORT_SPLITS splits, at least SHORT_SPLIT_KEYS keys each (one program per SM at B·Hkv = 8 needs
#: S = 16 however short the cache): H200, graph replay, 32/8, B = 1, time / cuDNN's at S = 8 / 16: 2k 1.07 / 0.98,
#: 4k 1.10 / 0.96 (2026-12-03, BENCHMARKS.md session 24 call 2); the √(n / 32) cap alone kept S = 8 there.
SHORT_SPLITS = 16
SHORT_SPLIT_KEYS = 128
#: The most (request, KV head, split) programs per SM the heuristic adds splits up to (the H200 sweep:
#: ``choose_num_splits``).
PROGRAMS_PER_SM = 2


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
    target_programs: int          # PROGRAMS_PER_SM · SMs
    longest: int                  # the longest request's candidate keys
    key_cap: int                  # the most splits S of at least SPLIT_KEYS_PER_SPLIT · S keys, or ≤ SHORT_SPLITS of
    #                               SHORT_SPLIT_KEYS (a power of two, ≤ MAX_SPLITS)


@functools.lru_cache(maxsize=4096)
def choose_num_splits(batch: int, heads_kv: int, longest: int, num_sms: int) -> SplitChoice:
    """The split count S: the largest power of two with B·Hkv·S ≤ PROGRAMS_PER_SM · SMs programs, no
    split shorter than SPLIT_KEYS_PER_SPLIT · S keys (or, for S ≤ SHORT_SPLITS, than SHORT_SPLIT_KEYS), at
    most MAX_SPLITS; S = 1 (no merge) once B·Hkv programs alone exceed half that target.

    Decode is memory-bound: the cost is the bytes of K/V, and each program streams its split of one KV
    head's cache. Where the rule comes from: the forced-split sweep of the H200 run of 2026-12-01
    (132 SMs, bf16, d = 128, Hkv = 8; ``benchmarks/2026-12-01-h200-final-checks.json``, rows
    ``ours-S*``; ms per call, host launch time included):

    ==========================  =====  =====  =====  =====  =====  =====  =====
    B, Hq/Hkv, Nk, Nq           S=1    2      4      8      16     32     64
    ==========================  =====  =====  =====  =====  =====  =====  =====
    8, 64/8, 128k, Nq = 1       1.474  1.049  1.022  1.002  0.999  1.033  1.036
    8, 64/8, 128k, Nq = 5       2.405  1.206  1.019  1.091  1.033  1.079  1.166
    1, 32/8, 16k, Nq = 1        0.278  0.180  0.149  0.151  0.146  0.280  0.157
    2, 32/8, 16k, Nq = 1        0.263  0.190  0.160  0.163  0.167  0.162  0.163
    4, 32/8, 16k, Nq = 1        0.271  0.194  0.175  0.171  0.173  0.178  0.193
    8, 32/8, 16k, Nq = 1        0.272  0.227  0.230  0.236  0.237  0.245  0.270
    1, 32/8, 16k, Nq = 5        0.317  0.223  0.142  0.102  0.092  0.092  0.091
    2, 32/8, 16k, Nq = 5        0.332  0.222  0.143  0.106  0.099  0.106  0.110
    4, 32/8, 16k, Nq = 5        0.369  0.262  0.177  0.157  0.162  0.168  0.173
    8, 32/8, 16k, Nq = 5        0.313  0.233  0.189  0.233  0.233  0.217  0.240
    ==========================  =====  =====  =====  =====  =====  =====  =====

    At ≤ 1 program per SM (B·Hkv·S ≤ 128) bandwidth goes unused: a lone program streams ~46 GB/s
    (B = 8, 128k, S = 1: 64 programs, 2.9 TB/s) and a 132nd of the copy rate is ~33 GB/s, so every SM
    needs one program and the slack of a second. Past that, more splits only add partial writes, merge
    work and shorter loops (S = 64 at 128k, Nq = 5: +14 %), and the old rule's ⌈4·SMs / (B·Hkv)⌉ (9 at
    128k: 1.06 and 1.20 ms, behind both 8 and 16) overshot. With 512-key splits the rule chose S = 32,
    16, 8, 4 for B = 1, 2, 4, 8 at 16k and 4 at 128k, within 5 % of the row's best in 9 of the 10 rows;
    the miss was S = 32 at B = 1, Nq = 1 (0.280 ms between 0.146 at S = 16 and 0.157 at S = 64), which the
    graph-replay sweep below confirmed (S = 16 best): the minimum is now 1024 keys, so S = 16 there. The
    sweep did not cover B ≥ 16 (S = 2 at B = 16, then 1): the bench's sweep now does.

    The first graph-replay sweep (H200, 2026-12-01 17:33, GPU time only, ms) agrees where it ran: B = 8,
    64/8, 128k: S = 1 1.412, 2 0.930, 4 0.933, 8 0.937 (Nq = 1) and 2.369, 1.205, 0.949, 0.959 (Nq = 5):
    S = 4 within 0.3 % of the best; B = 64, 32/8, 32k: S = 1 (chosen) ran 1.851 in the default row, S = 2
    1.865 (the sweep's own S = 1 row, 2.142, its fastest block 1.881, was timed right after the bench had
    released its paged copies: the two-level effect of ``docs/kvcache.md``, since waited out); B = 1, 16k: S = 16
    0.027, 32 0.030, 8 0.031, so splits of at least 1024 keys (S = 16 there). Its successor, 32·S keys a split
    (``SPLIT_KEYS_PER_SPLIT``), keeps S = 16 at 16k and gives S = 16 at 8k (1024 keys: S = 8), where the
    session-23 sweep measured it 1.26× faster at B = 1 and 1.04× at B = 2. Below 8k that cap held S = 8 at
    B = 1 (64 programs for 132 SMs): up to ``SHORT_SPLITS`` splits of ``SHORT_SPLIT_KEYS``
    keys are allowed too, S = 16 at 2k and 4k, 0.98 / 0.96 of cuDNN's time against 1.07 / 1.10 (session 24).

    Cached per argument tuple (a pure function called on every call: its loops cost ~3 µs of host time).
    """
    pairs = max(1, batch * heads_kv)
    target = PROGRAMS_PER_SM * max(1, num_sms)
    cap = 1
    while cap * 2 <= MAX_SPLITS and (longest // (cap * 2) >= SPLIT_KEYS_PER_SPLIT * (cap * 2) or (
            cap * 2 <= SHORT_SPLITS and longest // (cap * 2) >= SHORT_SPLIT_KEYS)):
        cap *= 2
    s = 1
    while s * 2 <= cap and pairs * s * 2 <= target:
        s *= 2
    return SplitChoice(s, pairs, target, longest, cap)

