"""scripts/gpu_merge.py: the verdict of a parallel GPU session (fed with small fake step outputs)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "gpu_merge.py"


def _write(res: pathlib.Path, *, case_passed=True, skipped=False, harness=False, shard_complete=True,
           third_party_deviates=True, rc=0):
    (res / "gc_a").mkdir(parents=True)
    case = {"case": "plain", "dtype": "bf16", "passed": case_passed, "err_over_bound": {"out": 0.1}}
    if skipped:
        case = {"case": "plain", "dtype": "bf16", "skipped": "time budget spent"}
    if harness:   # lab/gpu_check.py's record of an exception outside the kernel calls
        case = {"case": "plain", "dtype": "bf16", "harness_error": "IndexError: planted"}
    (res / "gc_a" / "gpu_check.json").write_text(json.dumps({"meta": {}, "results": [case]}))
    ours = [{"kernel": "triton", "available": True, "results": [
        {"dtype": "bf16", "examples": 25, "complete": shard_complete, "deviations": []}]}]
    (res / "fuzz_triton_bf16_s0.json").write_text(json.dumps(ours))
    theirs = [{"kernel": "sdpa-cudnn", "available": True, "results": [
        {"dtype": "bf16", "examples": 9, "complete": True,
         "deviations": [{"check": "forward", "spec": "n_q=64"}] if third_party_deviates else []}]}]
    (res / "fuzz_third_party.json").write_text(json.dumps(theirs))
    (res / "gc_a.summary").write_text(f"== gc_a: rc={rc} in 3s\n")
    (res / "fuzz_third_party.summary").write_text("== fuzz_third_party: rc=1 in 3s\n")


def _verdict(res):
    r = subprocess.run([sys.executable, str(SCRIPT), str(res)], capture_output=True, text=True)
    return r.returncode, r.stdout.strip().splitlines()[-1]


def test_all_passed_even_when_a_third_party_kernel_deviates(tmp_path):
    _write(tmp_path)
    assert _verdict(tmp_path) == (0, "VERDICT: PASSED")


def test_skipped_case_incomplete_shard_failed_step_or_nothing_are_not_passes(tmp_path):
    for i, kw in enumerate([dict(skipped=True), dict(case_passed=False), dict(harness=True), dict(shard_complete=False),
                            dict(rc=124)]):
        res = tmp_path / str(i)
        _write(res, **kw)
        rc, line = _verdict(res)
        assert rc == 1 and line.startswith("VERDICT: NOT PASSED"), (kw, line)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _verdict(empty)[0] == 1 and _verdict(empty)[1].startswith("VERDICT: NOT PASSED")


def test_a_harness_error_is_named_as_such_not_as_a_kernel_failure(tmp_path):
    _write(tmp_path, harness=True)
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True).stdout
    assert "HARNESS plain" in out and "IndexError: planted" in out and "FAIL plain" not in out
