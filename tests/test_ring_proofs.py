"""The ring obligations (flashproof.proofs.obligations.attention.ring) prove and every control is refuted with a
counterexample, in-process with each obligation's own bounds; the names resolve."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine.core import Context
from flashproof.proofs.engine.discover import collect
from flashproof.proofs.engine.status import name_errors
from flashproof.spec.registry import collect as collect_items

OBS, ERRS = collect()
RING = sorted(i for i in OBS if i.startswith("RING-"))
MODULE = "flashproof.proofs.obligations.attention.ring"


def _run(ob_id):
    ob = OBS[ob_id]
    return ob.fn(Context(dict(ob.bounds), 60_000, False))


def test_ring_module_imports_and_names_resolve():
    assert MODULE not in ERRS, ERRS.get(MODULE)
    errs = [e for e in name_errors(collect_items(), OBS) if "RING" in e]
    assert errs == []
    assert {"RING-LAYOUT", "RING-SCHEDULE", "RING-FOLD-EXACT"} <= set(RING)
    assert {OBS[i].module for i in RING} == {MODULE}


def test_every_ring_obligation_has_a_control():
    bases = {i for i in RING if OBS[i].of is None}
    assert bases == {OBS[i].of for i in RING if OBS[i].of}


@pytest.mark.parametrize("ob_id", [i for i in RING if OBS[i].of is None])
def test_obligation_is_proved(ob_id):
    out = _run(ob_id)
    assert out.status == "proved", (ob_id, out.status, out.detail)


@pytest.mark.parametrize("ob_id", [i for i in RING if OBS[i].of is not None])
def test_control_is_refuted(ob_id):
    out = _run(ob_id)
    assert out.status == "refuted", (ob_id, out.status, out.detail)
    assert out.counterexample, ob_id


def test_rank_rule_mutant_is_caught_only_on_zigzag():
    """The contiguous skip rule is right for contiguous shards: the refutation must name zigzag."""
    out = _run("RING-SCHEDULE/rank-rule")
    assert out.counterexample["case"].startswith("zigzag")
