"""The bench and gpu_check entry points: argument handling on CPU; the GPU runs are marked."""
from __future__ import annotations

import argparse

import pytest
import torch

from flashproof.kernels import bench, gpu_check


def test_bench_parses_shapes_and_refuses_without_gpu():
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--shapes", "64:1024:1,128:2048:0", "--out", "/tmp/flashproof-bench-test"])
    assert bench._shapes(args.shapes) == [(64, 1024, True), (128, 2048, False)]
    if not torch.cuda.is_available():
        assert bench.run(args) == 2


def test_gpu_check_cases_are_well_formed():
    ids = [c[0] for c in gpu_check.CASES]
    assert len(ids) == len(set(ids)) and all(len(c[1]) == 7 for c in gpu_check.CASES)


@pytest.mark.slow
def test_gpu_check_smoke_on_cpu(tmp_path):
    """The whole gpu_check script through the interpreter at 1/16 size (~4 min)."""
    assert gpu_check.main(["--smoke", "--out", str(tmp_path)]) == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_check_on_cuda(tmp_path):
    assert gpu_check.main(["--out", str(tmp_path), "--fuzz-budget", "0"]) == 0


def test_gpu_check_runs_determinism_huge_logits_and_poison_first(tmp_path, monkeypatch, capsys):
    """The order of the GPU run (earlier runs ran out of time before huge_logits and poison), and
    determinism's verdict in the last lines of the log. The checks themselves are stubbed: this is
    about scheduling, on a CPU machine."""
    order = []

    def case(cid, shape, opt, dname, seed=0):
        order.append((cid, dname))
        return {"case": cid, "dtype": dname, "passed": True, "problems": [], "err_over_bound": {}}

    monkeypatch.setattr(gpu_check, "check_case", case)
    monkeypatch.setattr(gpu_check, "check_poison", lambda d: case("poison", None, None, d))
    monkeypatch.setattr(gpu_check, "check_determinism", lambda: case("determinism", None, None, "bf16"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "stub")
    assert gpu_check.main(["--out", str(tmp_path), "--fuzz-budget", "0", "--dtypes", "bf16,fp16"]) == 0
    assert order[:5] == [("determinism", "bf16"), ("huge_logits", "bf16"), ("poison", "bf16"),
                         ("huge_logits", "fp16"), ("poison", "fp16")]
    assert len(order) == 1 + 2 * len(gpu_check.CASES) + 2  # then every other case, each dtype once
    tail = capsys.readouterr().out.strip().splitlines()[-2:]
    assert tail[0].startswith("summary: determinism bf16 PASS; huge_logits bf16 PASS, fp16 PASS; poison")
    assert tail[1].startswith("gpu_check: PASSED")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("d", [16, 64, 128, 256])
def test_first_configuration_fits_shared_memory(monkeypatch, dtype, d):
    """The first-configuration mode (correctness runs) cannot lean on the autotuner skipping a
    configuration that runs out of shared memory: its choice must fit (fp32 at d = 128 asked for
    257 KiB on the H200 with the bf16-sized first configuration), and bf16 keeps the fast first one.
    The candidate lists are written out here (under the interpreter the kernels' own is one tiny tile)."""
    at = pytest.importorskip("flashproof.kernels.attention_triton")
    triton = pytest.importorskip("triton")
    shapes = [(128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (32, 128, 4, 3), (64, 32, 4, 2), (32, 32, 4, 2)]
    configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in shapes]
    monkeypatch.setenv("FLASHPROOF_TRITON_CONFIG", "first")
    for extra in ({}, {"DK": 1}):  # streamed K/V (forward, dQ) or streamed Q/dO (dK/dV)
        args = dict(Q=torch.empty(1, dtype=dtype), BLOCK_D=d, BLOCK_DV=d, TILE_Q=0, TILE_K=0, **extra)
        (c,) = at._prune(configs, args)
        assert at._smem_estimate(c, args) <= at.SMEM_BUDGET, (extra, c)
        if dtype != torch.float32 and d <= 64:
            assert c is configs[0]
    # the atomic-dQ kernel's extra Kᵀ tile: fp32, d = 96 (padded 128), dv = 64, the first configuration
    # (64 x 64, 3 stages) needs 4 · (192 · (64 + 3 · 64) + 64 · 128) bytes = 224 KiB (241 KiB measured)
    atomic = dict(Q=torch.empty(1, dtype=torch.float32), BLOCK_D=128, BLOCK_DV=64, TILE_Q=0, TILE_K=0, DK=1, DQ_ACC=1)
    cfg = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=8, num_stages=3), configs[-1]]
    assert at._prune(cfg, atomic)[0] is cfg[1]
    fp32 = dict(Q=torch.empty(1, dtype=torch.float32), BLOCK_D=128, BLOCK_DV=128, TILE_Q=0, TILE_K=0)
    assert at._prune(configs, fp32)[0] is not configs[0]  # 4 · 256 · (128 + 3 · 64) bytes do not fit
    monkeypatch.setenv("FLASHPROOF_TRITON_CONFIG", "")
    assert len(at._prune(configs, fp32)) == len(configs)  # autotuning keeps every candidate
