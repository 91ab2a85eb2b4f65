"""Three kernel bugs that passed `flashproof fuzz --kernel torch/triton` before and that the
default campaign now catches: the LSE's gradient with the wrong sign, float64 computed in float32,
and an unmasked interior that starts one key early at a left window edge (Triton, interpreter);
and the CPU campaign's shapes reach past the interpreter's 16-row tiles."""
import sys
from pathlib import Path
from random import Random

import pytest
import torch
from hypothesis import find, settings

from flashproof.fuzz import targets
from flashproof.fuzz.campaign import PROFILES, _strategy, run_campaign
from flashproof.fuzz.checks import examine

sys.path.insert(0, str(Path(__file__).parent))
from fuzz.planted import fp64_in_fp32_target, lse_sign_target, window_edge_one_key_early  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_lse_backward_with_the_wrong_sign_is_caught_by_the_default_campaign():
    s = run_campaign(lse_sign_target(), device="cpu", rounds=1, shrink_seconds=10)
    devs = [d for d in s["deviations"] if d["check"] == "gradients"]
    assert devs and devs[0]["tensor"] in ("dq", "dk"), [d["reproducer"] for d in s["deviations"]]


def test_our_kernel_passes_the_lse_cotangent_check():
    s = run_campaign("torch", device="cpu", dtypes=("fp32",), checks=("gradients",), rounds=1)
    assert s["passed"] and "LSE cotangent not fed back" not in " ".join(s["notes"])


def test_float64_computed_in_float32_is_caught_by_the_default_campaign():
    s = run_campaign(fp64_in_fp32_target(), device="cpu", rounds=1, shrink_seconds=10)
    by_dtype = {r["dtype"]: r for r in s["results"]}
    assert not by_dtype["fp32"]["deviations"]
    assert by_dtype["fp64"]["deviations"] and by_dtype["fp64"]["deviations"][0]["reason"] == "tolerance"


def _triggers(s, tile=16):
    """The planted window bug changes the result: for some query tile the last row's first key
    sits one past a key-tile boundary and an unmasked interior follows."""
    if s.window is None or s.seqlens is not None or s.causal:
        return False
    left, right = s.window
    diag = s.n_k - s.n_q
    for m0 in range(0, s.n_q, tile):
        p_hi, p_lo = min(m0 + tile, s.n_q) - 1 + diag, m0 + diag
        full_lo = max(p_hi - left, 0)
        if full_lo % tile == 1 and (min(p_lo + right + 1, s.n_k) // tile) * tile > full_lo - 1:
            return True
    return False


def test_the_ci_campaign_reaches_past_the_16_row_tiles():
    strat = _strategy(targets.get("triton"), "cpu", dict(PROFILES["ci"]))
    cfg = settings(max_examples=2000, database=None)
    big = find(strat, lambda s: s.n_q > 16 and s.n_k > 16, settings=cfg, random=Random(0))
    assert big.n_q == 17 and big.n_k == 17
    assert _triggers(find(strat, _triggers, settings=cfg, random=Random(0)))


def test_a_window_edge_one_key_early_is_caught_where_the_campaign_draws_it():
    why = targets.get("triton").unavailable("cpu")
    if why is not None:
        pytest.skip(why)
    strat = _strategy(targets.get("triton"), "cpu", dict(PROFILES["ci"]))
    spec = find(strat, _triggers, settings=settings(max_examples=2000, database=None), random=Random(0))
    assert not examine(targets.get("triton"), spec, "fp32", "cpu", checks=("forward",)).deviations
    with window_edge_one_key_early():
        ex = examine(targets.get("triton"), spec, "fp32", "cpu", checks=("forward",))
    assert ex.deviations and ex.deviations[0].check == "forward", spec


def test_the_default_campaign_at_seed_0_catches_the_window_edge_bug():
    """Not by chance: the campaign runs the design's window edges (tile boundary ± 1) as explicit
    examples before its random draws."""
    why = targets.get("triton").unavailable("cpu")
    if why is not None:
        pytest.skip(why)
    with window_edge_one_key_early():
        s = run_campaign("triton", device="cpu", rounds=1, shrink_seconds=5)
    devs = [d for d in s["deviations"] if d["check"] == "forward"]
    assert devs and devs[0]["spec"]["window"] is not None, [d["reproducer"] for d in s["deviations"]]


def test_every_campaign_starts_with_the_adversarial_problems():
    from flashproof.fuzz.adversarial import families_of
    from flashproof.fuzz.campaign import _plan

    first = _plan(targets.get("triton"), "cpu", dict(PROFILES["ci"]), 0).explicit
    assert sum(_triggers(s) for s in first) >= 1  # the planted window bug's trigger is among them
    assert set().union(*(families_of(s) for s in first)) == {
        "causal", "window", "varlen", "mask", "empty_rows", "huge_logits", "ties", "zero_q", "late_max", "poison",
        "noncontig", "gqa", "dv", "batch", "sparse"}
    assert {s.n_q for s in first} >= {1, 2} and {s.n_k for s in first} >= {1, 2, 129}
    assert _plan(targets.get("triton"), "cpu", dict(PROFILES["ci"]), 5).explicit == first  # every seed
    lacking = _plan(targets.get("sdpa-flash"), "cuda", dict(PROFILES["ci"]), 0).explicit
    assert lacking and not any(s.window or s.seqlens or s.mask_kind != "none" or s.dv != s.d for s in lacking)
