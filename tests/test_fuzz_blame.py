"""Who failed, and whether anything was checked: an exception of an adapter's own code is a harness
error, never a deviation (only the kernel's own call is the kernel's); a campaign that examines
nothing never passes; a sampler harness crash is a harness error and a negative control that only
raises is not caught; the user adapter's 1/sqrt(D) test is exact; the split check says when it cannot
run; the interpreter is read through ``interpreting()`` only. Each test plants the fault with
monkeypatch (or a planted target), so it fails on the behaviour it replaced."""
from __future__ import annotations

import ast
import math
import pathlib

import pytest
import torch

from flashproof.fuzz import checks, kvcache, targets, user
from flashproof.fuzz.campaign import format_summary, run_campaign
from flashproof.fuzz.checks import examine
from flashproof.fuzz.errors import HarnessError
from flashproof.fuzz.problem import ProblemSpec, build
from flashproof.fuzz.samplers import control, resolve_sampler, sampler_target

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ProblemSpec(n_q=2, n_k=3, d=2, dv=2, seed=1)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _math(q, k, v, *, scale=None):
    """A correct user kernel (SDPA's math path), out only."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)


def _planted(*a, **k):
    raise IndexError("planted: the adapter crashed")


# ----------------------------------------------------------------------------------- 1: adapter vs kernel

def test_the_correct_user_kernel_passes_these_problems():
    """The control for the planted adapter faults below: unpatched, the same examination is clean."""
    ex = examine(user.user_target(_math, name="math"), SPEC, "fp32", "cpu", checks=("forward",))
    assert ex.verdicts and not ex.deviations


@pytest.mark.parametrize("where", ["_to_layout", "_converted"])
def test_a_crash_in_the_user_adapter_is_a_harness_error_not_a_deviation(monkeypatch, where):
    monkeypatch.setattr(user, where, _planted)
    with pytest.raises(HarnessError, match="user kernel adapter raised IndexError: planted"):
        examine(user.user_target(_math, name="math"), SPEC, "fp32", "cpu", checks=("forward",))


def test_a_crash_in_the_user_adapter_ends_the_campaign_as_a_harness_error(monkeypatch):
    monkeypatch.setattr(user, "_to_layout", _planted)
    s = run_campaign(user.user_target(_math, name="math"), device="cpu", dtypes=("fp32",), budget=3, rounds=1,
                     shrink_seconds=1)
    assert "IndexError: planted" in s["harness_error"] and not s["deviations"] and not s["passed"], s


@pytest.mark.parametrize("target, module, name, spec", [
    ("torch", targets, "mask_arg", SPEC._replace(mask_kind="random")),
    ("sdpa-math", targets, "_sdpa_mask", SPEC),
    ("kvcache-torch", kvcache, "to_kvcache_call", SPEC._replace(causal=True)),
])
def test_a_crash_in_a_built_in_adapter_is_a_harness_error(monkeypatch, target, module, name, spec):
    monkeypatch.setattr(module, name, _planted)
    with pytest.raises(HarnessError, match="IndexError: planted"):
        examine(targets.get(target), spec, "fp32", "cpu", checks=("forward",))


def _raises(q, k, v, *, scale=None):
    raise RuntimeError("kernel failure")


def _returns_a_string(q, k, v, *, scale=None):
    return "out"


def _wrong_shape(q, k, v, *, scale=None):
    return q[..., :1]  # Dv = 1 instead of 2, in either layout


@pytest.mark.parametrize("fn, note, conv", [
    (_raises, "RuntimeError: kernel failure", {}),
    (_returns_a_string, "the kernel returned str", {}),
    (_wrong_shape, "the kernel returned out of shape", {"empty_rows": "nan"}),  # before the conversion reads it
    (_wrong_shape, "the kernel returned out of shape", {"layout": "bnhd"}),
])
def test_a_kernel_that_raises_or_breaks_the_contract_is_still_a_deviation(fn, note, conv):
    ex = examine(user.user_target(fn, name="broken", **conv), SPEC, "fp32", "cpu", checks=("forward",))
    assert [d.reason for d in ex.deviations] == ["error"] and note in ex.deviations[0].note, ex.deviations


def test_an_opaque_run_is_the_kernel_whole():
    """A Target whose run is a test's own wrapper (no adapter_step): what it raises is the kernel's."""
    def run(c, det):
        raise IndexError("inside the wrapped kernel")
    ex = examine(targets.get("torch")._replace(name="opaque", run=run), SPEC, "fp32", "cpu", checks=("forward",))
    assert [d.reason for d in ex.deviations] == ["error"] and "IndexError" in ex.deviations[0].note


# ----------------------------------------------------------------------------------- 2: nothing examined

def _never(c, det):
    raise targets.Unsupported("takes nothing")


def test_a_campaign_on_which_every_problem_is_unsupported_does_not_pass():
    s = run_campaign(targets.get("torch")._replace(name="never", run=_never), device="cpu", dtypes=("fp32",),
                     budget=3, rounds=1)
    r = s["results"][0]
    assert r["examples"] == 0 and r["unsupported"] > 0 and not r["complete"], r
    assert not s["passed"] and not s["complete"] and not s["harness_error"] and not s["deviations"], s
    assert f"fp32: no example was examined ({r['unsupported']} unsupported)" in s["incomplete"], s["incomplete"]
    assert "INCOMPLETE, NOT PASSED" in format_summary(s)


def test_a_campaign_over_dtypes_the_kernel_lacks_does_not_pass():
    t = targets.get("torch")._replace(name="no-fp64", lacks=lambda d: frozenset({"fp64"}))
    s = run_campaign(t, device="cpu", dtypes=("fp64",), budget=3)
    assert not s["passed"] and not s["complete"] and "no dtype was examined" in s["incomplete"], s


def test_a_skipped_dtype_next_to_an_examined_one_still_passes():
    t = targets.get("torch")._replace(name="no-fp64", lacks=lambda d: frozenset({"fp64"}))
    s = run_campaign(t, device="cpu", dtypes=("fp32", "fp64"), budget=3, rounds=1)
    assert s["passed"] and s["complete"] and s["results"][1]["skipped"], s


def test_a_campaign_over_no_dtype_is_refused():
    with pytest.raises(ValueError, match="dtypes must name at least one"):
        run_campaign("torch", device="cpu", dtypes=(), budget=3)


# ----------------------------------------------------------------------------------- 3: samplers

def _crashing_sampler(draft_token_ids, p_draft, p_target, p_bonus, *, num_draft_tokens=None, uniforms=None,
                      generator=None):
    raise IndexError("planted: the sampler crashed")


def _generator_only(draft_token_ids, p_draft, p_target, p_bonus, *, num_draft_tokens=None, generator=None):
    raise IndexError("planted: the sampler crashed")


def test_a_negative_control_that_only_raises_is_not_caught_by_the_exact_check():
    from flashproof.fuzz.sampler_check import run_exact

    s = run_exact(sampler_target(_crashing_sampler, "control:crashes", control_=True), budget=5, rounds=1)
    assert not s["caught"] and not s["passed"] and "raised IndexError: planted" in s["harness_error"], s


def test_a_negative_control_that_only_raises_is_not_caught_by_the_statistical_test():
    from flashproof.fuzz.sampler_stat import run_statistical

    s = run_statistical(sampler_target(_generator_only, "control:crashes", control_=True))
    assert not s["caught"] and not s["passed"] and "raised IndexError: planted" in s["harness_error"], s


def test_a_real_sampler_that_raises_is_a_deviation_of_kind_error():
    from flashproof.fuzz.sampler_check import run_exact
    from flashproof.fuzz.sampler_stat import run_statistical

    s = run_exact(sampler_target(_crashing_sampler, "crashes"), budget=5, rounds=1)
    assert s["deviations"][0]["reason"] == "error" and not s["harness_error"] and not s["passed"], s
    s = run_statistical(sampler_target(_generator_only, "crashes"))
    assert s["deviations"][0]["reason"] == "error" and not s["harness_error"] and not s["passed"], s


def test_a_crash_of_the_exact_check_is_a_harness_error(monkeypatch):
    from flashproof.fuzz import sampler_check

    monkeypatch.setattr(sampler_check, "_reference", _planted)
    (ours,) = resolve_sampler("torch")
    s = sampler_check.run_exact(ours, budget=5, rounds=1)
    assert "IndexError: planted" in s["harness_error"] and not s["deviations"] and not s["passed"], s
    c = sampler_check.run_exact(sampler_target(control("always-accept"), "control:always-accept", control_=True),
                                budget=5, rounds=1)
    assert not c["caught"] and "IndexError: planted" in c["harness_error"] and not c["passed"], c


def test_a_crash_of_the_g_test_is_a_harness_error_not_a_caught_control(monkeypatch):
    from flashproof.fuzz import sampler_stat

    monkeypatch.setattr(sampler_stat, "g_test", _planted)
    c = sampler_stat.run_statistical(sampler_target(control("always-accept"), "control:always-accept",
                                                    control_=True))
    assert not c["caught"] and "IndexError: planted" in c["harness_error"] and not c["passed"], c


# ----------------------------------------------------------------------------------- 4: the scale test

def _no_scale(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _case(d: int, scale: float) -> targets.Case:
    g = torch.Generator().manual_seed(d)
    q, k, v = (torch.randn(1, 1, n, d, generator=g, dtype=torch.float64) for n in (2, 3, 3))
    return targets.Case(q, k, v, torch.ones(1, 1, 2, 3, dtype=torch.bool), scale, False, None, None, None, True)


def test_a_kernel_without_a_scale_takes_exactly_the_builders_scale():
    run = user.user_target(_no_scale, name="no-scale").run
    for d in range(1, 257):
        scale = build(ProblemSpec(n_q=1, n_k=1, d=d, dv=1)).scale
        assert run(_case(d, scale), False).out.shape == (1, 1, 2, d)
        with pytest.raises(targets.Unsupported, match="no scale parameter"):  # one ulp off is another scale
            run(_case(d, math.nextafter(scale, 2.0)), False)
    with pytest.raises(targets.Unsupported, match="no scale parameter"):
        examine(user.user_target(_no_scale, name="no-scale"), SPEC._replace(huge_logits=1e3), "fp32", "cpu")


# ----------------------------------------------------------------------------------- 6: split not checkable

def _without_lse(c, det):
    return targets.KernelOut(targets.get("torch").run(c, det).out, None)


def test_a_split_check_that_cannot_merge_says_so():
    t = targets.get("torch")._replace(name="no-lse", run=_without_lse)
    ex = examine(t, SPEC, "fp32", "cpu", checks=("split",))
    assert not ex.verdicts and not ex.deviations and any(n.startswith("split not checked") for n in ex.notes), ex
    s = run_campaign(t, device="cpu", dtypes=("fp32",), budget=3, rounds=1, checks=("forward", "split"))
    assert checks.SPLIT_NO_LSE in s["notes"], s["notes"]


# ----------------------------------------------------------------------------------- 5: the interpreter

def test_the_interpreter_is_read_through_interpreting_only(monkeypatch):
    from flashproof.fuzz.errors import UsageError
    from flashproof.kernels import interpreter

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(interpreter, "interpreting", lambda: False)
    assert "TRITON_INTERPRET=1" in (targets.get("triton").unavailable("cpu") or "")
    assert "TRITON_INTERPRET=1" in (targets.get("kvcache-triton").unavailable("cpu") or "")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="TRITON_INTERPRET=1"):
            resolve_sampler("triton")


def _environ_reads(source: str) -> list:
    """Lines of ``source`` that read TRITON_INTERPRET from the environment (os.environ / os.getenv)."""
    return sorted({node.lineno for node in ast.walk(ast.parse(source))
                   if isinstance(node, (ast.Call, ast.Subscript)) and "TRITON_INTERPRET" in ast.unparse(node)
                   and ("environ" in ast.unparse(node) or "getenv" in ast.unparse(node))})


def test_no_fuzz_or_bench_module_reads_the_interpreter_flag_itself():
    paths = sorted((ROOT / "flashproof" / "fuzz").glob("*.py")) + sorted((ROOT / "bench").glob("*.py"))
    reads = {str(p.relative_to(ROOT)): _environ_reads(p.read_text()) for p in paths}
    assert {p: lines for p, lines in reads.items() if lines} == {}
    # the scan can fail: the read it replaced is found
    assert _environ_reads("import os\nok = os.environ.get('TRITON_INTERPRET') != '1'\n") == [2]
