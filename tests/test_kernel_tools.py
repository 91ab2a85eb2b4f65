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
