"""lab/gpu_check.py's verdict rules, on CPU: a mutant counts as caught only by a deviation of a complete
campaign without a harness error, and an exception outside the kernel calls is recorded as a harness error,
never as the kernel's failure (the script's --smoke mode: the Triton kernels in the interpreter)."""
from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

from flashproof.kernels.interpreter import interpreting

PATH = pathlib.Path(__file__).resolve().parents[1] / "lab" / "gpu_check.py"


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_only_a_complete_deviating_campaign_catches_a_mutant(gc):
    caught = dict(available=True, complete=True, harness_error="", deviations=[{"check": "forward"}])
    assert gc.mutant_caught(caught)
    for change in (dict(available=False), dict(complete=False), dict(harness_error="HarnessError: oracles disagree"),
                   dict(deviations=[]), dict(passed=False, deviations=[])):
        assert not gc.mutant_caught({**caught, **change}), change


@pytest.mark.skipif(not interpreting(), reason="the smoke run needs TRITON_INTERPRET=1")
def test_a_harness_exception_is_a_harness_error_and_a_kernel_exception_a_failure(gc, tmp_path, monkeypatch):
    def planted(*a, **k):
        raise IndexError("planted in the oracle's evaluation")
    monkeypatch.setattr(gc, "_dense", planted)
    assert gc.main(["--smoke", "--cases", "plain_d256", "--out", str(tmp_path / "h")]) == 1
    (r,) = json.loads((tmp_path / "h" / "gpu_check.json").read_text())["results"]
    assert "passed" not in r and "IndexError: planted" in r["harness_error"], r
    monkeypatch.undo()

    def raising(*a, **k):
        raise RuntimeError("planted in the kernel")
    monkeypatch.setattr(gc, "attention", raising)
    assert gc.main(["--smoke", "--cases", "plain_d256", "--out", str(tmp_path / "k")]) == 1
    (r,) = json.loads((tmp_path / "k" / "gpu_check.json").read_text())["results"]
    assert r["passed"] is False and "the kernel raised RuntimeError: planted in the kernel" in r["problems"][0], r
