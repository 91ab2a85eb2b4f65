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
