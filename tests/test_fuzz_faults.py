"""A device fault of the kernel is the kernel's finding: reported as a deviation (exit 1) with its
spec and reproducer script, never as a harness error, and the campaign stops there (the CUDA
context is unusable after it). On the CPU the fault is the exception torch raises for CUDA errors,
thrown by a fake kernel from its call, or from the wait that follows the call (as an asynchronous
fault surfaces); after it every call into the "device" fails, as in a dead CUDA context."""
import argparse
import json

import pytest
import torch

from flashproof.fuzz import checks, targets
from flashproof.fuzz.campaign import run_campaign
from flashproof.fuzz.cli import add_arguments, run as cli_run
from flashproof.fuzz.faults import is_device_fault

FAULT = getattr(torch, "AcceleratorError", RuntimeError)
MESSAGE = "CUDA error: an illegal memory access was encountered"


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


class _Device:
    """A fake device: dead after its first fault (every later call raises)."""

    def __init__(self):
        self.dead = False
        self.calls_after_fault = 0

    def check(self):
        if self.dead:
            self.calls_after_fault += 1
            raise FAULT(MESSAGE)


def _faulting(dev: _Device, when, name: str, from_sync: bool):
    """Our torch kernel, faulting on problems where ``when(case)`` holds: raising from the call, or
    (``from_sync``) returning and leaving the fault to the next wait on the device."""
    def run(c, det):
        dev.check()
        if when(c):
            dev.dead = True
            if not from_sync:
                raise FAULT(MESSAGE)
        return targets.get("torch").run(c, det)
    return targets.get("torch")._replace(name=name, run=run, doc="faults on the device")


def _dead_after_fault(dev: _Device):
    def synchronize(device):
        if dev.dead:
            raise FAULT(MESSAGE)
    return synchronize


def test_the_cuda_error_type_counts_as_a_device_fault():
    assert is_device_fault(FAULT(MESSAGE))
    assert is_device_fault(RuntimeError("CUDA error: misaligned address"))
    assert not is_device_fault(ValueError("bad shape")) and not is_device_fault(RuntimeError("shape mismatch"))


@pytest.mark.parametrize("from_sync", [False, True], ids=["raised-by-the-call", "surfaced-at-the-wait"])
def test_a_device_fault_is_a_deviation_with_a_reproducer_and_stops_the_campaign(from_sync, monkeypatch, tmp_path,
                                                                               capsys):
    dev = _Device()
    name = f"fake:fault-{'sync' if from_sync else 'call'}"
    monkeypatch.setitem(targets._TARGETS, name, _faulting(dev, lambda c: c.k.shape[2] >= 3, name, from_sync))
    monkeypatch.setattr(checks, "synchronize", _dead_after_fault(dev))
    p = argparse.ArgumentParser()
    add_arguments(p)
    out_json = tmp_path / "s.json"
    rc = cli_run(p.parse_args(["--kernel", name, "--kernel", "torch", "--repro-dir", str(tmp_path / "repro"),
                               "--json", str(out_json)]))
    text = capsys.readouterr()
    assert rc == 1, text.out
    (s,) = json.loads(out_json.read_text())  # the torch job after it was not run in the dead process
    assert "not run in this process: torch" in text.err
    assert not s["harness_error"] and "HARNESS ERROR" not in text.out
    assert s["device_fault"] and "not shrunk in this process" in s["device_fault"] and "DEVICE FAULT" in text.out
    assert not s["complete"] and not s["passed"]
    assert [r["dtype"] for r in s["results"]] == ["fp32"]  # fp64 never ran on the dead context
    (d,) = [d for d in s["deviations"] if d["device_fault"]]
    assert d["reason"] == "error" and MESSAGE in d["note"] and d["spec"]["n_k"] >= 3
    assert d["script"] and (tmp_path / "repro").joinpath(d["script"].rsplit("/", 1)[-1]).is_file()
    assert dev.calls_after_fault == 0  # nothing ran on the device after the fault


def test_a_fault_while_shrinking_keeps_the_deviation_found_before(monkeypatch):
    """A wrong result on Nk >= 2, and a fault on a smaller candidate (Nq = 1, Nk = 2): both are
    reported, neither as a harness error."""
    dev = _Device()

    def run(c, det):
        dev.check()
        nq, nk = c.q.shape[2], c.k.shape[2]
        if nk == 2 and nq == 1:
            dev.dead = True
            raise FAULT(MESSAGE)
        r = targets.get("torch").run(c, det)
        return targets.KernelOut(r.out * 2 if nk >= 2 else r.out, r.lse)
    target = targets.get("torch")._replace(name="fake:wrong-then-fault", run=run)
    monkeypatch.setattr(checks, "synchronize", _dead_after_fault(dev))
    s = run_campaign(target, device="cpu", dtypes=("fp32",), rounds=1, shrink_seconds=20)
    assert not s["harness_error"] and s["device_fault"] and not s["passed"]
    faults = [d for d in s["deviations"] if d["device_fault"]]
    assert len(faults) == 1 and dev.calls_after_fault == 0
    assert any(d["check"] == "forward" and d["reason"] != "error" for d in s["deviations"])


def test_a_device_fault_is_shrunk_in_fresh_processes():
    """The campaign's own context is unusable after the fault; the candidates run in fresh
    processes (each loads the kernel by its path), and the simplest that still faults is reported."""
    import pathlib

    from flashproof.fuzz.user import resolve

    ref = str(pathlib.Path(__file__).parent / "fuzz" / "kernels" / "faulting.py") + ":attention"
    s = run_campaign(resolve(ref), device="cpu", dtypes=("fp32",), rounds=1, shrink_seconds=90, workers=2)
    (d,) = [d for d in s["deviations"] if d["device_fault"]]
    assert not s["harness_error"] and s["device_fault"]
    assert "shrunk in fresh processes" in d["note"], d["note"]
    spec = d["spec"]
    assert spec["n_k"] == 3 and spec["n_q"] == 1 and spec["d"] == 1, spec  # the smallest problem that faults
