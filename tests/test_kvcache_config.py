"""The KV-cache kernel's launch configuration (``kernels/kvcache/config.py`` and the launch plan built
from it) as plain functions: decode (Nq = 1) gets the configuration of verify (Nq = 5) at the same
load, the load classes follow the programs per SM, and the tile covers the packed rows."""
from __future__ import annotations

import pytest
import torch

from flashproof.kernels.kvcache import config, plan


def test_tile_covers_the_packed_rows():
    for groups in (1, 2, 4, 8, 16, 64):
        for n_q in (1, 2, 5, 16):
            s = config.tile_shape(groups, n_q, 100, 20)
            assert 16 <= s.block_m <= config.MAX_BLOCK_M and s.block_m & (s.block_m - 1) == 0
            assert s.m_tiles * s.block_m >= groups * n_q > (s.m_tiles - 1) * s.block_m
            assert (s.block_d, s.block_dv) == (128, 32)
    assert config.tile_shape(4, 1, 128, 128).block_m == 16 and config.tile_shape(8, 5, 128, 128).block_m == 64


@pytest.mark.parametrize("programs,expected", [(1, "few"), (132, "few"), (133, "some"),
                                               (plan.PROGRAMS_PER_SM * 132, "some"),
                                               (plan.PROGRAMS_PER_SM * 132 + 1, "many"), (10 ** 6, "many")])
def test_load_class_follows_programs_per_sm(programs, expected):
    assert config.load_class(programs, 132) == expected


def test_every_split_launch_of_the_rule_is_few_or_some():
    """The split rule aims at ≤ PROGRAMS_PER_SM programs per SM: its launches with splits never land in
    "many" (the class of large batches without splits), so they never reuse a "many" tuning."""
    for batch in (1, 2, 3, 4, 8, 16, 33):
        for longest in (1024, 16384, 131072):
            s = plan.choose_num_splits(batch, 8, longest, 132).num_splits
            if s > 1:
                assert config.load_class(batch * 8 * s, 132) in ("few", "some"), (batch, longest, s)


def test_candidates_are_built_configs_and_reject_unknown_arguments():
    for load in config.LOAD_CLASSES:
        for page in (0, 16, 64, 256):
            got = config.candidates(load, page)
            assert got and set(got) <= set(config.CONFIGS)
    with pytest.raises(ValueError, match="load must be one of"):
        config.candidates("busy", 0)
    with pytest.raises(ValueError, match="page_size must be"):
        config.candidates("few", -1)


def test_decode_runs_the_configuration_of_verify():
    """At every batch, group size and split count, Nq = 1 and Nq = 5 have the same load class, the
    same candidates in the same order and the same untuned launch (BLOCK_N, warps, stages); only the
    row tile differs."""
    pytest.importorskip("triton")
    from flashproof.kernels.kvcache.triton import launch_plan
    for B in (1, 2, 8, 64):
        for G in (1, 4, 8):
            for S in (1, 4, 32):
                plans = [launch_plan(B, 8, G, nq, 128, 128, S, 0, False, True, torch.bfloat16, 132) for nq in (1, 5)]
                one, five = plans
                assert (one.load, one.configs, one.grid[1]) == (five.load, five.configs, five.grid[1])
                pick = ("BLOCK_N", "num_warps", "num_stages")
                assert [one.first_kwargs[k] for k in pick] == [five.first_kwargs[k] for k in pick]
                assert one.shape.block_m <= five.shape.block_m


def test_autotuned_choices_are_kept_per_load_class():
    """Two load classes never share the autotuner (so never each other's timing), nor a kept choice."""
    pytest.importorskip("triton")
    from flashproof.kernels.kvcache import triton as kv_triton
    assert kv_triton._tuner("few", config.CONFIGS) is not kv_triton._tuner("some", config.CONFIGS)
    small = kv_triton.launch_plan(1, 8, 4, 1, 128, 128, 16, 0, False, True, torch.bfloat16, 132)
    large = kv_triton.launch_plan(64, 8, 4, 1, 128, 128, 16, 0, False, True, torch.bfloat16, 132)
    assert (small.load, large.load) == ("few", "many") and small.tune_key != large.tune_key


def test_fused_merge_stages_fit_64_kib():
    pytest.importorskip("triton")
    from flashproof.kernels.kvcache.triton import merge_stages
    for bm in (16, 32, 64, 128):
        for dv in (16, 64, 128, 256):
            st = merge_stages(bm, dv)
            assert 1 <= st <= 3 and (st == 1 or st * bm * dv * 4 <= 65536), (bm, dv, st)


def test_the_merge_form_follows_the_split_count():
    """No merge without splits; the last program merges up to FUSED_MAX_SPLITS splits, the merge kernel
    more; the launch plan follows the route unless a form is forced (the bench's A/B)."""
    assert [config.fuse_merge(s) for s in (1, 2, config.FUSED_MAX_SPLITS, config.FUSED_MAX_SPLITS + 1, 64)] == \
        [False, True, True, False, False]
    pytest.importorskip("triton")
    from flashproof.kernels.kvcache.triton import launch_plan
    for S in (1, 2, 4, 8, 32):
        lp = launch_plan(1, 8, 4, 1, 128, 128, S, 0, False, True, torch.bfloat16, 132)
        assert lp.consts["FUSED"] == config.fuse_merge(S) and (lp.merge_grid is None) == (S == 1 or config.fuse_merge(S))
        for forced in (True, False):
            lp = launch_plan(1, 8, 4, 1, 128, 128, S, 0, False, True, torch.bfloat16, 132, forced)
            assert lp.consts["FUSED"] == (S > 1 and forced) and (lp.merge_grid is None) == (S == 1 or forced)


def test_the_interpreter_runs_the_first_candidate_only():
    """Interpreted (``gpu=False``, the launch of CPU tensors under TRITON_INTERPRET=1) a launch has one
    candidate config, the first, so ``tuning="autotune"`` times nothing (the interpreter has no timer:
    the autotuner's benchmark raised "0 active drivers"); compiled for a GPU, every candidate of its class."""
    pytest.importorskip("triton")
    from flashproof.kernels.kvcache.triton import launch_plan
    for B, S, page in ((1, 16, 0), (64, 1, 0), (8, 4, 64)):
        cpu = launch_plan(B, 8, 4, 1, 128, 128, S, page, False, True, torch.bfloat16, 132)
        gpu = launch_plan(B, 8, 4, 1, 128, 128, S, page, False, True, torch.bfloat16, 132, None, True)
        assert gpu.configs == config.candidates(gpu.load, page) and len(gpu.configs) > 1
        assert cpu.configs == gpu.configs[:1] and cpu.first_kwargs == gpu.first_kwargs
