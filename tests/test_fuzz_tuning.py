"""Our Triton launches' tuning is an argument of the campaign, carried to every call as
``Case.tuning`` (no module-level switch): "first" by default, "autotune" with --all-configs."""
import argparse

import pytest
import torch

from flashproof.fuzz import targets
from flashproof.fuzz.campaign import run_campaign
from flashproof.fuzz.cli import add_arguments, run as cli_run


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _recording(seen: list, name="fake:tuning"):
    def run(c, det):
        seen.append(c.tuning)
        return targets.get("torch").run(c, det)
    return targets.get("torch")._replace(name=name, run=run)


@pytest.mark.parametrize("tuning", ["first", "autotune"])
def test_the_campaign_carries_its_tuning_to_every_call(tuning):
    seen = []
    s = run_campaign(_recording(seen), device="cpu", dtypes=("fp32",), budget=4, rounds=1, tuning=tuning)
    assert s["passed"] and s["tuning"] == tuning
    assert seen and set(seen) == {tuning}


@pytest.mark.parametrize("flag, tuning", [([], "first"), (["--all-configs"], "autotune")])
def test_the_cli_chooses_the_tuning_by_argument(flag, tuning, monkeypatch, tmp_path):
    seen = []
    monkeypatch.setitem(targets._TARGETS, "fake:tuning", _recording(seen))
    p = argparse.ArgumentParser()
    add_arguments(p)
    rc = cli_run(p.parse_args(["--kernel", "fake:tuning", "--dtype", "fp32", "--budget", "3", "--quiet",
                               "--repro-dir", str(tmp_path), *flag]))
    assert rc == 0 and set(seen) == {tuning}


def test_no_module_level_tuning_switch_and_bad_values_are_refused():
    assert not hasattr(targets, "TUNING") and not hasattr(targets, "set_tuning")
    with pytest.raises(ValueError, match="tuning must be one of"):
        run_campaign("torch", device="cpu", tuning="fastest")
