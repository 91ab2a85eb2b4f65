"""The sampler front door: ours passes the exact check (injected uniforms, bit for bit against the
verified reference) and the statistical test; every negative control is caught; a user's sampler
file with a hard-coded uniform is caught from the CLI; arguments are validated."""
import argparse
import pathlib
import subprocess
import sys

import pytest
import torch

from flashproof.fuzz.cli import add_arguments, run as cli_run
from flashproof.fuzz.sampler_check import SamplerSpec, build_batch, check_batch
from flashproof.fuzz.sampler_stat import run_statistical
from flashproof.fuzz.samplers import CONTROLS, control, resolve_sampler, run_sampler_campaign, sampler_target

HERE = pathlib.Path(__file__).parent


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _cli(argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return cli_run(p.parse_args([*argv, "--quiet"]))


def test_our_sampler_passes_the_exact_check():
    (t,) = resolve_sampler("torch")
    s = run_sampler_campaign(t, budget=40)
    assert s["mode"] == "exact" and s["passed"] and s["examples"] >= 40, s


@pytest.mark.parametrize("bug", sorted(CONTROLS))
def test_every_negative_control_is_caught_by_the_exact_check(bug):
    (t,) = resolve_sampler(f"control:{bug}")
    s = run_sampler_campaign(t, budget=40)
    assert s["caught"] and s["passed"] and not s["harness_error"], s
    assert all("got tokens" in c for c in s["caught_by"]), s["caught_by"]  # by its tokens, never by raising


def test_the_control_harness_without_a_bug_matches_the_reference():
    t = sampler_target(control("none"), "control:none")
    for spec in (SamplerSpec(seed=3, batch=4, k=3, vocab=17, zeros=0.3, u_edges=True, ragged=True),
                 SamplerSpec(seed=5, batch=3, k=4, vocab=8, equal=True, u_boundary=True, one_hot=True),
                 SamplerSpec(seed=8, batch=2, k=2, vocab=8193, target_zero=True, disjoint=True, dtype="bf16")):
        assert check_batch(t, spec) == [], spec


def test_families_plant_what_they_say():
    b = build_batch(SamplerSpec(seed=1, batch=3, k=3, vocab=8, target_zero=True, ragged=True))
    valid = torch.arange(3)[None] < b.num_draft_tokens[:, None]
    ids = b.draft_token_ids.clamp(0, 7)
    assert (b.p_target.gather(2, ids[..., None])[..., 0][valid] == 0).all()
    assert (b.draft_token_ids[~valid] == -7).all() and b.num_draft_tokens[0] == 0


def test_statistical_test_passes_ours_and_rejects_controls():
    (ours,) = resolve_sampler("torch")
    s = run_statistical(ours._replace(uniforms=False))
    assert s["passed"] and min(s["power_against_controls"].values()) >= 0.99, s
    for bug in ("always-accept", "residual-is-target"):
        c = run_statistical(sampler_target(control(bug), f"control:{bug}", control_=True))
        assert c["caught"] and c["passed"] and not c["harness_error"], c
        assert all("the emitted law differs" in x for x in c["caught_by"]), c["caught_by"]


def test_cli_sampler_controls_exit_0_when_all_are_caught(capsys):
    assert _cli(["--sampler", "control:float32-check", "--sampler", "control:accept-zero-at-u0"]) == 0
    assert capsys.readouterr().out.count("NEGATIVE CONTROL CAUGHT") == 2


def test_cli_user_sampler_with_a_hard_coded_uniform_exits_1(capsys, tmp_path):
    rc = _cli(["--sampler", str(HERE / "fuzz" / "samplers" / "hard_coded_u.py") + ":sample", "--repro-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1 and "rebuild: flashproof.fuzz.sampler_check.build_batch(SamplerSpec(" in out, out
    (script,) = tmp_path.glob("repro_sampler_*.py")
    r = subprocess.run([sys.executable, "-m", "flashproof", "repro", str(script)], capture_output=True, text=True)
    assert r.returncode == 1 and "still deviates" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name, message", [("no-such", "unknown sampler"), ("control:nope", "unknown sampler control"),
                                           ("flashproof.kernels.sampler.api:row_sum_tol", "takes neither")])
def test_bad_samplers_are_usage_errors(name, message, capsys):
    assert _cli(["--sampler", name]) == 2
    assert message in capsys.readouterr().err
