"""The fuzzer's front door: user kernels by path from the CLI with defaults (four planted bugs
caught with a minimal reproducer, the correct version and a (B, N, H, D) kernel pass), arguments
validated before the campaign (exit 2), a harness failure never a deviation (exit 4, planted wrong
oracles), a kernel that raises reported once, reproducer scripts, fuzz_kernel and
check_attention_kernel."""
import argparse
import json
import pathlib
import subprocess
import sys

import pytest
import torch

from flashproof.fuzz import fuzz_kernel, oracle
from flashproof.fuzz.campaign import run_campaign
from flashproof.fuzz.cli import add_arguments, run as cli_run
from flashproof.testing import check_attention_kernel

HERE = pathlib.Path(__file__).parent
KERNELS = HERE / "fuzz" / "kernels"


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny tensors; the CLI does the same on the CPU (--threads 1)


def _cli(argv, tmp_path):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return cli_run(p.parse_args([*argv, "--quiet", "--repro-dir", str(tmp_path / "repro")]))


@pytest.mark.parametrize("bug, minimal", [
    ("top_left_causal", "causal=True"), ("gqa_head_map", "heads_kv=2"), ("no_max", "huge_logits="),
    ("ignored_scale", "huge_logits="),
])
def test_planted_bug_in_a_user_file_exits_1_with_a_minimal_reproducer(bug, minimal, tmp_path, capsys):
    rc = _cli(["--kernel", str(KERNELS / f"{bug}.py") + ":attention"], tmp_path)
    out = capsys.readouterr().out
    assert rc == 1, out
    lines = [x for x in out.splitlines() if "DEVIATION [" in x]
    assert lines and all("rebuild: flashproof.fuzz.problem.build(ProblemSpec(" in x for x in lines)
    assert any(minimal in x and "n_q=1," in x for x in lines), lines  # shrunk to one query row
    assert list((tmp_path / "repro").glob("repro_*.py"))


def test_diagnosis_names_the_convention_matched():
    s = run_campaign(targets_user("top_left_causal"), device="cpu", dtypes=("fp32",), rounds=1)
    assert any("matches top-left causal alignment" in d["diagnosis"] for d in s["deviations"])
    s = run_campaign(targets_user("gqa_head_map"), device="cpu", dtypes=("fp32",), rounds=1)
    assert any("interleaved GQA head map" in d["diagnosis"] for d in s["deviations"])


def targets_user(name, **conv):
    from flashproof.fuzz.user import resolve
    return resolve(str(KERNELS / f"{name}.py") + ":attention", **conv)


def test_the_correct_user_kernel_exits_0(tmp_path, capsys):
    rc = _cli(["--kernel", str(KERNELS / "correct.py") + ":attention"], tmp_path)
    assert rc == 0, capsys.readouterr().out


def test_a_bnhd_kernel_passes_with_layout_bnhd_and_not_without(tmp_path, capsys):
    ref = str(KERNELS / "bnhd.py") + ":attention"
    assert _cli(["--kernel", ref, "--layout", "bnhd", "--dtype", "fp32"], tmp_path) == 0, capsys.readouterr().out
    assert _cli(["--kernel", ref, "--dtype", "fp32", "--budget", "10"], tmp_path) == 1


@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "--budget must be >= 1"),
    (["--determinism-runs", "-1"], "--determinism-runs must be >= 0"),
    (["--seconds", "0"], "--seconds must be > 0"),
    (["--workers", "-1"], "--workers must be >= 0"),
    (["--device", "foo"], "unknown device 'foo'"),
    (["--json", "/proc/no/such/fuzz.json"], "--json /proc/no/such/fuzz.json: cannot write"),
    (["--kernel", "no-such-kernel"], "unknown kernel 'no-such-kernel'"),
    (["--kernel", "missing_file.py:attention"], "no such kernel file"),
    (["--kernel", "flashproof.kernels:no_such_function"], "has no 'no_such_function'"),
    (["--kernel", "tests/fuzz/kernels/correct.py:attention", "--layout", "nhbd"], None),
], ids=["budget-0", "determinism-negative", "seconds-0", "workers-negative", "device-foo", "json-unwritable", "unknown-kernel",
        "missing-file", "missing-function", "bad-layout"])
def test_arguments_are_validated_before_the_campaign(argv, message, tmp_path, capsys):
    p = argparse.ArgumentParser()
    add_arguments(p)
    if message is None:  # argparse's own choices
        with pytest.raises(SystemExit) as e:
            p.parse_args(argv)
        assert e.value.code == 2
        return
    assert cli_run(p.parse_args(argv)) == 2
    err = capsys.readouterr()
    assert message in err.err and "Traceback" not in err.err and "DEVIATION" not in err.out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only machine")
def test_cuda_without_cuda_is_a_usage_error(capsys):
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert cli_run(p.parse_args(["--device", "cuda"])) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_budget_0_exits_2_from_the_command_line():
    r = subprocess.run([sys.executable, "-m", "flashproof", "fuzz", "--budget", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "--budget must be >= 1" in r.stderr and "Traceback" not in r.stderr


def test_determinism_runs_0_is_not_a_deviation(tmp_path, capsys):
    rc = _cli(["--kernel", "torch", "--budget", "3", "--determinism-runs", "0", "--dtype", "fp32"], tmp_path)
    out = capsys.readouterr().out
    assert rc == 0 and "DEVIATION" not in out and "determinism not checked" in out


def _wrong_reference(problem, **kw):
    e = oracle.reference(problem, **kw) if not hasattr(_wrong_reference, "real") else _wrong_reference.real(problem, **kw)
    return e._replace(lse=e.lse * 1.0001)  # a 1e-4 relative LSE error: the kernel passed at ~0.5 of the old bound


def test_a_planted_wrong_oracle_is_a_harness_error_exit_4(monkeypatch, tmp_path, capsys):
    _wrong_reference.real = oracle.reference
    monkeypatch.setattr(oracle, "reference", _wrong_reference)
    rc = _cli(["--kernel", "torch", "--budget", "3", "--dtype", "fp32"], tmp_path)
    cap = capsys.readouterr()
    assert rc == 4 and "the two oracles disagree on lse" in cap.err and "DEVIATION" not in cap.out


def test_a_planted_wrong_dense_oracle_is_a_harness_error():
    real = oracle.dense

    def wrong(problem, **kw):
        e = real(problem, **kw)
        return e._replace(dk=e.dk * 1.01)
    s = run_campaign("torch", device="cpu", dtypes=("fp32",), budget=3, oracle_fns={"dense_fn": wrong})
    assert "disagree on dk" in s["harness_error"] and not s["passed"] and not s["deviations"]


def test_the_baseline_error_is_measured_against_the_independent_oracle():
    """The bound cannot be moved by the oracle: against a wrong oracle the naive run (close to the
    kernel) no longer widens the kernel's own bound."""
    from flashproof.fuzz.tolerance import judge
    true = torch.tensor([0.5, 0.25], dtype=torch.float64)
    wrong = true + 1e-3
    kernel, naive = true + 1e-7, true + 2e-7
    mags = {"out": 1.0, "score": 1.0}
    assert judge("out", kernel, wrong, naive, torch.float32, mags).ok            # the old rule: passes
    assert not judge("out", kernel, wrong, naive, torch.float32, mags, gold=true).ok


def test_a_harness_crash_is_never_a_deviation(monkeypatch):
    from flashproof.fuzz import checks

    def broken(*a, **k):
        raise IndexError("planted crash in the harness")
    monkeypatch.setattr(checks, "judge", broken)
    s = run_campaign("torch", device="cpu", dtypes=("fp32",), budget=3)
    assert "IndexError: planted crash" in s["harness_error"] and not s["deviations"] and not s["passed"]


def _raises(q, k, v, *, causal=False):
    raise RuntimeError(f"kernel failure on {tuple(q.shape)}")


def test_a_kernel_that_raises_is_reported_once():
    from flashproof.fuzz.user import user_target
    s = run_campaign(user_target(_raises, name="raises"), device="cpu", budget=8)
    assert [r["dtype"] for r in s["results"]] == ["fp32", "fp64"]
    assert len(s["deviations"]) == 1 and s["deviations"][0]["reason"] == "error"
    assert "RuntimeError: kernel failure" in s["deviations"][0]["note"]
    assert s["results"][1]["known_errors"] >= 1  # fp64 raised the same error: not reported again


def test_reproducer_script_replays_the_deviation(tmp_path, capsys):
    _cli(["--kernel", str(KERNELS / "no_max.py") + ":attention", "--dtype", "fp32"], tmp_path)
    capsys.readouterr()
    script = sorted((tmp_path / "repro").glob("repro_*.py"))[0]
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and "still deviates" in r.stdout and "bound" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "flashproof", "repro", str(script)], capture_output=True, text=True)
    assert r.returncode == 1 and "still deviates" in r.stdout


def test_fuzz_kernel_and_check_attention_kernel():
    sys.path.insert(0, str(KERNELS))
    try:
        import correct
        import ignored_scale
    finally:
        sys.path.remove(str(KERNELS))
    report = fuzz_kernel(correct.attention, dtype="fp32", budget=10)
    assert report.passed and report.complete and report.deviations == ()
    assert check_attention_kernel(correct.attention, dtype="fp32", budget=10).passed
    with pytest.raises(AssertionError, match=r"rebuild: flashproof.fuzz.problem.build\(ProblemSpec\(") as e:
        check_attention_kernel(ignored_scale.attention, dtype="fp32", budget=20)
    assert "replay(KERNEL, SPEC" in str(e.value)  # the standalone script is carried too


def test_json_summary_records_conventions_and_oracle_agreement(tmp_path):
    out = tmp_path / "s.json"
    assert _cli(["--kernel", "torch", "--budget", "3", "--dtype", "fp32", "--json", str(out)], tmp_path) == 0
    (s,) = json.loads(out.read_text())
    assert s["conventions"]["causal_alignment"] == "bottom-right"
    # budget 3: three of the design's adversarial problems first, then three random draws
    assert s["results"][0]["examples"] == 6 and s["results"][0]["oracle_agreement"] == {"full": 6}
