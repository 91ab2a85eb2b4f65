"""The KV-cache kernel's launch configuration as pure functions of the call's shape (no torch, no Triton).

Two choices, made here and nowhere else:

* the **tile of packed rows** (``tile_shape``): the G = Hq / Hkv query heads of one KV head times the Nq
  new queries form the rows r = g·Nq + i of one tile of BLOCK_M rows (≥ 16, the ``tl.dot`` minimum;
  several tiles above ``MAX_BLOCK_M``, each streaming the cache again);
* the **kernel configuration** (``candidates``): BLOCK_N keys per tile, warps and pipeline stages.
  Decode is memory-bound and its cost is the K/V stream of each program, which does not depend on Nq:
  so the candidates depend on the load (how many programs share the SMs: ``load_class``), the head dims
  and the page size, never on Nq. A decode call (Nq = 1) therefore gets exactly the candidates, in the
  same order, of a verify call (Nq = 5) of the same load: the autotuner times them per tile shape and
  load class, ``tuning="first"`` runs the first.

Why the load class: Triton's autotuner keeps one choice per key. Keyed by the tile alone, the choice
timed at B = 64 (1024 programs, bandwidth-bound: every config streams at the copy rate) was reused at
B = 1 with 256 split programs of 512 keys each (latency-bound: the bytes each program keeps in flight
and its loop's prologue count), where it can be the wrong one; the H200 run of 2026-11-30 saw Nq = 1 floor at 0.146 ms where
Nq = 5, keyed and tuned separately, reached 0.091 ms.
"""
from __future__ import annotations

from typing import NamedTuple

from .plan import PROGRAMS_PER_SM

__all__ = ["KernelConfig", "TileShape", "CONFIGS", "MAX_BLOCK_M", "LOAD_CLASSES", "FUSED_MAX_SPLITS", "tile_shape",
           "load_class", "candidates", "fuse_merge", "next_pow2"]

#: rows per tile at most (G·Nq above this takes several M-tiles, each streaming the cache again)
MAX_BLOCK_M = 128


class KernelConfig(NamedTuple):
    """One Triton configuration of ``kvcache_fwd``: keys per tile, warps, software-pipeline stages."""

    block_n: int
    num_warps: int
    num_stages: int


#: Every configuration the kernel is built with. Shared memory per program at d = 128, bf16 (sm_90
#: cubins, ``tests/test_kvcache_compile.py``): (64, 4, 3) 70 KiB (3 programs per SM), (128, 4, 3)
#: 136 KiB (1 per SM), (64, 8, 4) 102 KiB (2), (128, 8, 2) 72 KiB (3).
CONFIGS = (KernelConfig(64, 4, 3), KernelConfig(128, 4, 3), KernelConfig(64, 8, 4), KernelConfig(128, 8, 2))

#: ``load_class`` values: "few" — at most one program per SM (each SM streams one program's split: the
#: bytes a program keeps in flight set the rate); "some" — up to ``plan.PROGRAMS_PER_SM`` per SM (what
#: the split rule aims at: every launch with splits lands here or in "few"); "many" — more (large
#: batches without splits, bandwidth-bound).
LOAD_CLASSES = ("few", "some", "many")


class TileShape(NamedTuple):
    """BLOCK_M packed rows per tile, M_TILES tiles per KV head, BLOCK_D / BLOCK_DV the padded head dims."""

    block_m: int
    m_tiles: int
    block_d: int
    block_dv: int


def next_pow2(x: int) -> int:
    """The smallest power of two ≥ x (1 for x ≤ 1)."""
    return 1 << max(0, int(x) - 1).bit_length()


def tile_shape(groups: int, n_q: int, d: int, dv: int) -> TileShape:
    """Rows r = g·Nq + i (g < groups, i < n_q) packed into tiles of a power of two ≥ 16 rows (the
    ``tl.dot`` minimum), at most ``MAX_BLOCK_M``; head dims padded to a power of two ≥ 16. (Decode's 4
    rows in a 32-row tile, as verify's 20, timed no faster on the H200: 1.870 vs 1.851 ms at B = 64,
    32k; 0.943 vs 0.934 at B = 8, 128k; 0.033 vs 0.032 at B = 1, 16k.)"""
    rows = groups * n_q
    block_m = min(MAX_BLOCK_M, max(16, next_pow2(rows)))
    return TileShape(block_m, -(-rows // block_m), max(16, next_pow2(d)), max(16, next_pow2(dv)))


def load_class(programs: int, num_sms: int) -> str:
    """``LOAD_CLASSES``: "few" for at most one program per SM, "some" for at most ``PROGRAMS_PER_SM``,
    else "many"."""
    sms = max(1, num_sms)
    return "few" if programs <= sms else "some" if programs <= PROGRAMS_PER_SM * sms else "many"


def candidates(load: str, page_size: int) -> tuple:
    """The configurations the autotuner times for a launch of this load class (``load_class``) and page
    size (0: contiguous), best guess first (what ``tuning="first"`` runs). Independent of Nq and of the
    group size (module docstring). Until the bench's forced-config sweep (``ours-C*`` rows of
    ``bench/kvcache.py``) has been read, every class gets ``CONFIGS`` in its order."""
    if load not in LOAD_CLASSES:
        raise ValueError(f"load must be one of {LOAD_CLASSES}, got {load!r}")
    if page_size < 0:
        raise ValueError(f"page_size must be 0 (contiguous) or a page length, got {page_size}")
    return CONFIGS


#: the most splits the last program of a tile merges itself (``fuse_merge``)
FUSED_MAX_SPLITS = 4


def fuse_merge(num_splits: int) -> bool:
    """Whether the partials of ``num_splits`` > 1 splits are merged by the last program of each tile (one
    launch) rather than by the merge kernel (a second launch). That program folds the splits one after
    another, so its tail grows with the split count while the separate merge spreads one row per
    program. The H200 run of 2026-12-01 17:33 (GPU time, same kernel config, bf16, d = 128): S = 4 —
    B = 8, 64/8, 128k: 0.934 fused vs 0.935 merge kernel (Nq = 1), 0.954 vs 0.955 (Nq = 5); S = 32 —
    B = 1, 32/8, 16k: 0.031 vs 0.024. So: fused up to ``FUSED_MAX_SPLITS`` (a launch saved, ~50 µs of host
    time there), the merge kernel above. The run of 2026-12-01 19:58 (``ours-other-merge`` against the
    default, 32/8, 16k, Nq = 1 / 5) agrees on both sides: S = 16 (B = 1, 2) and S = 8 (B = 4), where the merge
    kernel is the default: 0.024 / 0.032, 0.038 / 0.042, 0.069 / 0.072 against fused 0.027 / 0.038,
    0.043 / 0.053, 0.071 / 0.077; S = 4 (B = 8, fused by default): 0.128 vs 0.127 merge kernel (Nq = 1). At
    B = 8, 64/8, 128k (S = 4) its default row read 1.085 / 1.100 against 0.939 / 0.956 for the merge
    kernel, but the fused launch forced with the default's config read 0.939 / 0.949 in the same run (and
    the forced S = 4 row, fused, 0.938 / 0.947): that default row is the first timed on a new cache (the
    bench's two-level effect, ``docs/kvcache.md``), not the fused merge."""
    return 1 < num_splits <= FUSED_MAX_SPLITS
