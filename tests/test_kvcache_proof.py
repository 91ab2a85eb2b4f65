"""The split-KV obligations (proofs/obligations/attention/kvcache.py) prove, every one of their negative controls is
refuted with a counterexample (same checker, same bounds), and the spec item they check exists."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine.core import Context
from flashproof.proofs.engine.discover import collect
from flashproof.spec.registry import collect as spec_items

OBS, ERRS = collect()
MINE = sorted(i for i in OBS if i.startswith("KV-"))


def _ctx(ob):
    return Context(dict(ob.bounds), 120_000, False)


def test_module_imports_and_every_obligation_has_a_control():
    assert not [m for m in ERRS if m.endswith("attention.kvcache")], ERRS
    bases = {i for i in MINE if OBS[i].of is None}
    assert bases == {"KV-SPLIT-PLAN", "KV-SPLIT-MERGE-STEP", "KV-SPLIT-FINISH", "KV-SPLIT-LSE-FORM",
                     "KV-SPLIT-BOUNDED"}
    assert bases <= {OBS[i].of for i in MINE if OBS[i].of}


def test_spec_item_names_existing_obligations():
    item = spec_items()["EXT-SPLIT-KV"]
    assert set(item.checked_by) <= set(OBS), set(item.checked_by) - set(OBS)
    assert all("EXT-SPLIT-KV" in OBS[i].checks for i in MINE if OBS[i].of is None)


@pytest.mark.parametrize("ob_id", [i for i in MINE if OBS[i].of is None])
def test_obligation_is_proved(ob_id):
    out = OBS[ob_id].fn(_ctx(OBS[ob_id]))
    assert out.status == "proved", (ob_id, out.status, out.detail)


@pytest.mark.parametrize("ob_id", [i for i in MINE if OBS[i].of is not None])
def test_control_is_refuted(ob_id):
    out = OBS[ob_id].fn(_ctx(OBS[ob_id]))
    assert out.status == "refuted", (ob_id, out.status, out.detail)
    assert out.counterexample, ob_id
