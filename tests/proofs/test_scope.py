"""Scope and role: the registration rules, the derived item scope (no item reads "every n" on bounded
evidence — with planted counter-cases), the chip words, and the trail/Markdown carrying them."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine import core, status, trail
from flashproof.proofs.engine.core import Obligation, Outcome, obligation
from flashproof.proofs.engine.discover import collect
from flashproof.proofs.engine.runner import make_record
from flashproof.spec.registry import Item


def _fn(ctx):
    return Outcome("proved")


def _ob(oid, checks, scope, role="proof", bounds=None):
    return Obligation(oid, _fn, tuple(checks), dict(bounds or {}), dict(bounds or {}), (), "z3", "proved", None, None,
                      __name__, oid, scope, role, "planted" if scope == "unbounded" and bounds else "")


def _item(iid, checked_by=(), uses=(), kind="theorem"):
    return Item(iid, kind, iid, "s", "", (), tuple(uses), tuple(checked_by), (), "tests")


def test_registration_rules():
    with pytest.raises(ValueError, match="why_unbounded"):
        obligation("T-X", checks=["I"], bounds={"n": 3}, scope="unbounded")(_fn)
    with pytest.raises(ValueError, match="scope must be"):
        obligation("T-Y", checks=["I"], scope="every n")(_fn)
    with pytest.raises(ValueError, match="role must be"):
        obligation("T-Z", checks=["I"], role="witness")(_fn)
    with pytest.raises(ValueError, match="bounded obligation"):
        obligation("T-W", checks=["I"], bounds={"n": 3}, why_unbounded="because")(_fn)
    assert "T-X" not in core.OBLIGATIONS and "T-Y" not in core.OBLIGATIONS


def test_default_is_bounded_proof():
    obligation("T-DEFAULT", checks=["I"], bounds={"n": 2})(_fn)
    try:
        ob = core.OBLIGATIONS["T-DEFAULT"]
        assert (ob.scope, ob.role) == ("bounded", "proof")
    finally:
        del core.OBLIGATIONS["T-DEFAULT"]


def test_planted_counter_cases():
    """Each planted item has unbounded-looking evidence next to bounded evidence; only the first
    two may read unbounded."""
    obs = {o.id: o for o in [
        _ob("U1", ["A", "MIXED", "XC"], "unbounded", bounds={"v": 16}),
        _ob("B1", ["MIXED", "ONLYX"], "bounded", "proof", {"n": 3, "d": 3}),
        _ob("X1", ["XC", "ONLYX2"], "bounded", "cross-check", {"n": 4}),
        _ob("U2", ["USER"], "unbounded"),
    ]}
    items = {"A": _item("A", ["U1"]),
             "MIXED": _item("MIXED", ["U1", "B1"]),           # a bounded proof beside an unbounded one
             "XC": _item("XC", ["U1", "X1"]),                 # unbounded proof + bounded cross-check
             "ONLYX2": _item("ONLYX2", ["X1"]),               # only a bounded cross-check: no proof at all
             "USER": _item("USER", ["U2"], uses=["MIXED"]),   # unbounded itself, uses a bounded item
             "ASM": _item("ASM", kind="assumption"), "NONE": _item("NONE")}
    sc = status.derive_scope(items, obs)
    assert sc["A"].scope == "unbounded" and sc["XC"].scope == "unbounded"
    assert sc["MIXED"] == status.ItemScope("bounded", ("B1",), "bounded", ())
    assert sc["ONLYX2"].scope == "bounded" and sc["ONLYX2"].bounded_by == ("X1",)
    assert sc["USER"].scope == "unbounded" and sc["USER"].with_uses == "bounded" and sc["USER"].bounded_via == ("B1",)
    assert sc["ASM"].scope == "—" and sc["NONE"].scope == "—"
    assert status.scope_label(sc["A"], obs) == "every n"
    assert status.scope_label(sc["MIXED"], obs) == "up to n ≤ 3, d ≤ 3"


def test_no_registered_item_reads_unbounded_on_bounded_evidence():
    """Over the real registry, recomputed here independently of ``derive_scope``."""
    from flashproof.spec.registry import collect as collect_items

    obs, errs = collect()
    assert not errs
    items = collect_items()
    sc = status.derive_scope(items, obs)
    for iid, it in items.items():
        if it.kind == "assumption" or not it.checked_by:
            continue
        mine = [obs[o] for o in it.checked_by]
        proofs = [o for o in mine if o.role == "proof"] or mine
        if sc[iid].scope == "unbounded":
            assert all(o.scope == "unbounded" for o in proofs), iid
        else:
            assert any(o.scope == "bounded" for o in proofs), iid
    for ob in obs.values():
        if ob.of is None and ob.scope == "unbounded" and ob.bounds:
            assert ob.why_unbounded, ob.id
    # what the registry says today: THM-EXACT reads every n (tests/proofs/test_thm_exact_scope.py says by which proofs)
    assert sc["THM-EXACT"].scope == "unbounded" and not sc["THM-EXACT"].bounded_by
    assert obs["ATT-TILED-BOUNDED"].role == "cross-check" and obs["ATT-TILED-MASKS"].role == "cross-check"


def test_trail_and_markdown_carry_scope_and_chip_words():
    obs = {o.id: o for o in [_ob("U1", ["A"], "unbounded"), _ob("B1", ["B"], "bounded", bounds={"n": 3})]}
    items = {"A": _item("A", ["U1"]), "B": _item("B", ["B1"])}
    recs = [make_record(o, Outcome("proved"), seconds=0.0, bounds=o.bounds, deep=False, key="k") for o in obs.values()]
    doc = trail.build(items, obs, recs, name_errs=[], import_errs={}, total_seconds=0.0, jobs=1, argv=[], partial=False)
    rows = {r["id"]: r for r in doc["items"]}
    assert (rows["A"]["scope"], rows["A"]["scope_text"]) == ("unbounded", "every n")
    assert (rows["B"]["scope"], rows["B"]["scope_text"], rows["B"]["bounded_by"]) == ("bounded", "up to n ≤ 3", ["B1"])
    assert {r["obligation"]: (r["scope"], r["role"]) for r in doc["obligations"]} == {
        "U1": ("unbounded", "proof"), "B1": ("bounded", "proof")}
    assert doc["summary"]["scope"] == {"unbounded": 1, "bounded": 1}
    md = trail._md(doc)
    assert "| A | theorem | fully-checked | every n |" in md and "| B | theorem | fully-checked | up to n ≤ 3 |" in md


def test_chip_text():
    from flashproof.proofs.audit.model import chip_text

    assert chip_text("fully-checked", "every n", "two solvers") == "fully checked, every n · two solvers"
    assert chip_text("fully-checked", "up to n ≤ 3", "one solver") == "fully checked up to n ≤ 3 · one solver"
    assert chip_text("failed", "every n", "two solvers") == "failed"
