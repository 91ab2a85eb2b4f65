"""The split plan and the launch shape as plain functions: the splits partition every length
(exhaustively for small sizes; the obligation KV-SPLIT-PARTITION proves it for all), and the
split-count heuristic's documented properties."""
from __future__ import annotations

import pytest

from flashproof.kernels.kvcache import plan


@pytest.mark.parametrize("block", [1, 3, 16, 64])
def test_splits_partition_the_keys(block):
    for n in range(0, 200):
        for s in range(1, 12):
            parts = plan.split_ranges(n, s, block)
            assert len(parts) == s
            assert [j for r in parts for j in r] == list(range(n)), (n, s, block)
            c = plan.chunk_size(n, s, block)
            assert c % block == 0 and all(r.start == i * c for i, r in enumerate(parts) if len(r))


def test_split_ranges_rejects_bad_arguments():
    for args in ((-1, 1, 16), (5, 0, 16), (5, 1, 0)):
        with pytest.raises(ValueError, match="split_ranges needs"):
            plan.split_ranges(*args)


def _violates(batch, heads_kv, longest, sms, s):
    """Which of the rule's limits split count s breaks (an empty tuple: none)."""
    return tuple(name for name, bad in (
        ("max", s > plan.MAX_SPLITS),
        ("keys", s > 1 and longest // s < plan.SPLIT_KEYS_PER_SPLIT * s
         and not (s <= plan.SHORT_SPLITS and longest // s >= plan.SHORT_SPLIT_KEYS)),
        ("programs", s > 1 and batch * heads_kv * s > plan.PROGRAMS_PER_SM * sms)) if bad)


def test_num_splits_is_the_largest_power_of_two_within_the_limits():
    """Over a grid of shapes: S is a power of two, breaks no limit, and 2·S would break one."""
    for sms in (1, 8, 132):
        for batch in (1, 2, 3, 4, 8, 16, 33, 64, 256):
            for heads_kv in (1, 2, 8):
                for longest in (0, 1, 511, 512, 1024, 5000, 16384, 131072, 10 ** 7):
                    c = plan.choose_num_splits(batch, heads_kv, longest, sms)
                    s = c.num_splits
                    where = (batch, heads_kv, longest, sms, s)
                    assert s >= 1 and s & (s - 1) == 0, where
                    assert not _violates(batch, heads_kv, longest, sms, s), where
                    assert _violates(batch, heads_kv, longest, sms, 2 * s), where
                    assert (c.programs_without_split, c.target_programs) == (batch * heads_kv, plan.PROGRAMS_PER_SM * sms)


def test_num_splits_is_monotone():
    """More requests never get more splits; a longer cache never gets fewer."""
    for longest in (1024, 16384, 131072):
        got = [plan.choose_num_splits(b, 8, longest, 132).num_splits for b in range(1, 300)]
        assert got == sorted(got, reverse=True), longest
    got = [plan.choose_num_splits(2, 8, n, 132).num_splits for n in range(0, 40000, 97)]
    assert got == sorted(got)


@pytest.mark.parametrize("batch,longest,expected", [
    (1, 16384, 16), (2, 16384, 16), (4, 16384, 8), (8, 16384, 4), (16, 16384, 2), (32, 16384, 1),
    (64, 16384, 1), (256, 16384, 1), (8, 131072, 4), (64, 32768, 1), (1, 131072, 32), (1, 4096, 16),
    (1, 8192, 16), (2, 8192, 16), (4, 8192, 8), (1, 32768, 32), (1, 65536, 32), (1, 100, 1), (1, 0, 1),
    (1, 2048, 16), (2, 2048, 16), (4, 2048, 8), (2, 4096, 16), (4, 4096, 8), (1, 1024, 8), (1, 256, 2)])
def test_the_h200_choices(batch, longest, expected):
    """The values the docstring derives for the H200 (132 SMs) at Hkv = 8."""
    assert plan.choose_num_splits(batch, 8, longest, 132).num_splits == expected


def test_launch_shape_covers_the_packed_rows():
    pytest.importorskip("triton")
    from flashproof.kernels.kvcache.triton import MAX_BLOCK_M, launch_shape
    for groups in (1, 2, 4, 8, 16, 64):
        for n_q in (1, 2, 5, 16):
            s = launch_shape(groups, n_q, 128, 96)
            assert 16 <= s.block_m <= MAX_BLOCK_M and s.block_m & (s.block_m - 1) == 0
            assert s.m_tiles * s.block_m >= groups * n_q > (s.m_tiles - 1) * s.block_m
            assert (s.block_d, s.block_dv) == (128, 128)
