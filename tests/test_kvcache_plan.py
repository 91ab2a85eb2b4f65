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


@pytest.mark.parametrize("batch,heads_kv,longest", [(1, 8, 131072), (8, 8, 131072), (64, 8, 32768), (256, 8, 16384),
                                                    (1, 1, 100), (4, 2, 8192), (1, 8, 0)])
def test_num_splits_heuristic(batch, heads_kv, longest):
    sms = 132
    c = plan.choose_num_splits(batch, heads_kv, longest, sms)
    assert 1 <= c.num_splits <= plan.MAX_SPLITS
    if c.num_splits > 1:
        assert longest // c.num_splits >= plan.MIN_KEYS_PER_SPLIT            # no split shorter than the minimum
        assert batch * heads_kv * (c.num_splits - 1) < plan.CTAS_PER_SM * sms  # never more splits than needed
    if batch * heads_kv >= plan.CTAS_PER_SM * sms:
        assert c.num_splits == 1                                              # enough programs already: no merge


def test_decode_shapes_get_split():
    assert plan.choose_num_splits(8, 8, 131072, 132).num_splits == 9
    assert plan.choose_num_splits(64, 8, 32768, 132).num_splits == 2
    assert plan.choose_num_splits(1, 8, 16384, 132).num_splits == 32


def test_launch_shape_covers_the_packed_rows():
    pytest.importorskip("triton")
    from flashproof.kernels.kvcache.triton import MAX_BLOCK_M, launch_shape
    for groups in (1, 2, 4, 8, 16, 64):
        for n_q in (1, 2, 5, 16):
            s = launch_shape(groups, n_q, 128, 96)
            assert 16 <= s.block_m <= MAX_BLOCK_M and s.block_m & (s.block_m - 1) == 0
            assert s.m_tiles * s.block_m >= groups * n_q > (s.m_tiles - 1) * s.block_m
            assert (s.block_d, s.block_dv) == (128, 128)
