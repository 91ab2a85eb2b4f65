"""The campaign under a wall-clock budget: per-example progress, a partial summary marked
incomplete (never passed), and the GPU profile's small size sets (compiled kernels are reused)
that still reach every adversarial family."""
import argparse
import json
from random import Random

import pytest
import torch
from hypothesis import find, given, settings

from flashproof.fuzz.campaign import PROFILES, _strategy, format_summary, run_campaign
from flashproof.fuzz import targets
from flashproof.fuzz.cli import add_arguments, run as cli_run
from flashproof.fuzz.strategies import FAMILIES


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # as the CLI does on the CPU: on a loaded 2-core machine two threads cost 6x


def test_wall_clock_budget_gives_a_partial_summary_marked_incomplete():
    seen = []
    s = run_campaign("torch", device="cpu", dtypes=("fp32", "bf16"), budget=10_000, seconds=6.0, progress=seen.append)
    assert s["available"] and not s["complete"] and not s["passed"] and not s["deviations"]
    assert "budget ran out" in s["incomplete"]
    assert s["elapsed_s"] < 6.0 + 15.0  # the budget is checked before every example
    assert [r["dtype"] for r in s["results"]] == ["fp32", "bf16"]  # the time is shared by the dtypes
    assert all(r["examples"] >= 1 and not r["complete"] for r in s["results"])
    assert len(seen) == sum(r["examples"] + r["unsupported"] for r in s["results"])
    assert {p["status"] for p in seen} <= {"ok"} and all("ProblemSpec(" in p["spec"] for p in seen)
    text = format_summary(s)
    assert "INCOMPLETE, NOT PASSED" in text and "PASSED in" not in text.replace("NOT PASSED", "")


def test_a_campaign_within_its_budget_is_complete():
    s = run_campaign("torch", device="cpu", budget=3, rounds=1, seconds=600.0)
    assert s["complete"] and s["passed"] and s["incomplete"] == ""


def test_cli_seconds_prints_progress_and_exits_incomplete(tmp_path, capsys):
    p = argparse.ArgumentParser()
    add_arguments(p)
    out = tmp_path / "fuzz.json"
    rc = cli_run(p.parse_args(["--kernel", "torch", "--budget", "10000", "--seconds", "2", "--json", str(out)]))
    text = capsys.readouterr().out
    assert rc == 3 and "[torch fp32] #1 " in text and "INCOMPLETE" in text
    (summary,) = json.loads(out.read_text())
    assert summary["complete"] is False and summary["passed"] is False


def _gpu_strategy(name="triton", seed=0):
    return _strategy(targets.get(name), "cuda", dict(PROFILES["gpu"]), seed)


@settings(max_examples=150, database=None, deadline=None)
@given(_gpu_strategy())
def test_gpu_profile_draws_lengths_and_head_dims_from_small_sets(spec):
    prof = PROFILES["gpu"]
    assert spec.d in prof["dims"] and spec.dv in prof["dims"]
    if spec.seqlens is None:
        assert spec.n_q in prof["lengths"] and spec.n_k in prof["lengths"]
    else:
        assert all(a in (0, *prof["lengths"]) and b in (0, *prof["lengths"]) for a, b in spec.seqlens)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_gpu_campaign_reaches_every_family(seed):
    """Compile-aware campaigns draw from a few launch specialisations (tests/test_fuzz_launches.py);
    whichever the seed picks, every family still turns on in the campaign."""
    strat = _gpu_strategy(seed=seed)
    probes = {
        "causal": lambda s: s.causal, "window": lambda s: s.window is not None, "varlen": lambda s: s.seqlens is not None,
        "mask": lambda s: s.mask_kind != "none", "empty_rows": lambda s: s.empty_rows,
        "huge_logits": lambda s: s.huge_logits > 0, "ties": lambda s: s.ties, "zero_q": lambda s: s.zero_q, "late_max": lambda s: s.late_max,
        "poison": lambda s: s.poison is not None, "noncontig": lambda s: s.noncontig,
        "gqa": lambda s: s.heads_q > s.heads_kv, "special_lengths": lambda s: s.n_k > 64 and s.n_q == 1 or s.n_q > 64 and s.n_k == 1,
        "dv": lambda s: s.dv != s.d, "batch": lambda s: s.batch > 1, "sparse": lambda s: s.sparse,
    }
    assert set(probes) == set(FAMILIES)
    for fam, pred in probes.items():
        assert pred(find(strat, pred, settings=settings(max_examples=1000, database=None), random=Random(0))), fam


def _gluon_strategy():
    return _strategy(targets.get("triton"), "cuda", dict(PROFILES["gluon"]))


@settings(max_examples=40, database=None, deadline=None)
@given(_gluon_strategy())
def test_gluon_profile_draws_only_calls_the_hopper_kernels_take(spec):
    """Every problem of ``--profile gluon`` is routed to the Gluon kernels on an sm_90 GPU: the
    validated call of the built problem, in bf16 and with the leaves the campaign hands the kernel
    ((B, N, H, D) transposed views under ``noncontig``), plans the Gluon forward and backward for an H200
    (the default call, deterministic=False) at both head dims."""
    import torch

    from flashproof.fuzz.problem import build
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate

    p = build(spec)
    q, k, v = (t.to(torch.bfloat16) for t in (p.q, p.k, p.v))
    if spec.noncontig:  # as flashproof/fuzz/checks.py's _leaf builds them
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    prob = validate(q, k, v, causal=spec.causal, window=spec.window, scale=p.scale, requires_grad=True)
    route = dispatch.plan(prob, dispatch.Device("cuda", (9, 0), False, True, True))
    assert spec.d in dispatch.GLUON_HEAD_DIMS and (route.forward, route.backward) == ("gluon", "gluon"), (
        spec, route.reasons)


def test_gluon_profile_reaches_its_families():
    """Each family (and GQA group 8, (B, N, H, D) views with GQA, the longest length, both head dims) is drawn by the
    campaigns of some of the first eight seeds: a campaign draws inside its own launch set (the
    profile's ``launches``), and the seed rotates that set."""
    from hypothesis import strategies as st

    strat = st.one_of(*(_strategy(targets.get("triton"), "cuda", dict(PROFILES["gluon"]), seed) for seed in range(8)))
    for fam, pred in {"causal": lambda s: s.causal, "huge_logits": lambda s: s.huge_logits > 0,
                      "ties": lambda s: s.ties, "zero_q": lambda s: s.zero_q, "late_max": lambda s: s.late_max,
                      "gqa": lambda s: s.heads_q > s.heads_kv, "batch": lambda s: s.batch > 1,
                      "gqa8": lambda s: s.heads_q == 8 * s.heads_kv, "noncontig": lambda s: s.noncontig,
                      "noncontig_gqa": lambda s: s.noncontig and s.heads_q > s.heads_kv,
                      "long": lambda s: s.n_q == 1024, "d64": lambda s: s.d == 64, "d128": lambda s: s.d == 128,
                      "d64_causal_gqa": lambda s: s.d == 64 and s.causal and s.heads_q > s.heads_kv}.items():
        assert pred(find(strat, pred, settings=settings(max_examples=1000, database=None), random=Random(0))), fam
