"""ATT-DROPOUT is proved and each of its controls (fresh mask in the backward, missing 1/(1 − p), δ from
the undropped output) is refuted with a counterexample, run in-process with the obligation's bounds."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine import core
from flashproof.proofs.obligations.attention import dropout  # noqa: F401 (registers the obligation)
from flashproof.spec import registry

IDS = sorted(o for o in core.OBLIGATIONS if o.startswith("ATT-DROPOUT"))


def test_the_obligation_and_its_controls_are_registered():
    assert IDS == ["ATT-DROPOUT", "ATT-DROPOUT/delta-undropped", "ATT-DROPOUT/fresh-mask", "ATT-DROPOUT/unscaled"]
    items = registry.collect()
    assert "ATT-DROPOUT" in items["EXT-DROPOUT"].checked_by
    assert core.OBLIGATIONS["ATT-DROPOUT"].checks == ("EXT-DROPOUT",)


@pytest.mark.parametrize("oid", IDS)
def test_outcome(oid):
    ob = core.resolve_control(core.OBLIGATIONS[oid])
    out = ob.fn(core.Context(ob.bounds, 60_000, False))
    assert out.status == ob.expected, (oid, out)
    if ob.expected == "refuted":
        assert out.counterexample is not None and "difference" in out.counterexample, out


def test_the_fresh_mask_is_caught_by_a_gradient_not_the_forward():
    """A fresh mask leaves the forward right; only a gradient entry can expose it."""
    ob = core.resolve_control(core.OBLIGATIONS["ATT-DROPOUT/fresh-mask"])
    out = ob.fn(core.Context(ob.bounds, 60_000, False))
    assert out.counterexample["entry"].startswith(("dq", "dk", "dv")), out


def test_the_missing_scale_is_caught_by_the_forward():
    ob = core.resolve_control(core.OBLIGATIONS["ATT-DROPOUT/unscaled"])
    out = ob.fn(core.Context(ob.bounds, 60_000, False))
    assert out.counterexample["entry"].startswith("out"), out
