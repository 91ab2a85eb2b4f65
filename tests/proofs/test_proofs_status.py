"""The name check and the derived status of the proof registry (no solver runs here)."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine.core import Obligation
from flashproof.proofs.engine.status import derive, name_errors, record_ok, transitive_assumptions
from flashproof.spec.registry import Item


def _item(id, kind="theorem", uses=(), checked_by=(), assumptions=()):
    return Item(id, kind, id, "s", "", (), tuple(uses), tuple(checked_by), tuple(assumptions), "t")


def _ob(id, checks=(), of=None, assumptions=()):
    return Obligation(id, lambda ctx: None, tuple(checks), {}, {}, tuple(assumptions), "z3",
                      "refuted" if of else "proved", of, "bug" if of else None, "t", id)


def _rec(id, status, expected="proved", cx=None):
    r = {"obligation": id, "status": status, "expected": expected, "counterexample": cx}
    r["ok"] = record_ok(r)
    return r


def _world():
    items = {"A": _item("A", uses=["B"], checked_by=["OA"], assumptions=["AX"]),
             "B": _item("B", kind="definition", checked_by=["OB"]),
             "AX": _item("AX", kind="assumption")}
    obs = {"OA": _ob("OA", ["A"], assumptions=["AX"]), "OB": _ob("OB", ["B"]),
           "OA/c": _ob("OA/c", of="OA"), "OB/c": _ob("OB/c", of="OB")}
    return items, obs


def test_consistent_world_has_no_name_errors():
    items, obs = _world()
    assert name_errors(items, obs) == []


@pytest.mark.parametrize("mutate, fragment", [
    (lambda i, o: i.__setitem__("A", i["A"]._replace(checked_by=("OA", "NOPE"))), "'NOPE', which is not a registered obligation"),
    (lambda i, o: i.__setitem__("A", i["A"]._replace(uses=("GHOST",))), "uses names 'GHOST'"),
    (lambda i, o: i.__setitem__("A", i["A"]._replace(assumptions=("B",))), "which is a definition"),
    (lambda i, o: o.pop("OB/c"), "obligation OB: has no negative control"),
    (lambda i, o: o.__setitem__("X/c", _ob("X/c", of="X")), "'of' names 'X'"),
    (lambda i, o: o.__setitem__("OC", _ob("OC", ["A"])) or o.__setitem__("OC/c", _ob("OC/c", of="OC")),
     "A.checked_by does not list it"),
    (lambda i, o: i.__setitem__("A", i["A"]._replace(checked_by=("OA", "OB/c"))), "names the control"),
], ids=["dangling-checked_by", "dangling-uses", "assumption-not-assumption", "no-control", "control-of-missing",
        "one-sided-link", "control-listed-as-check"])
def test_name_check_reports(mutate, fragment):
    items, obs = _world()
    mutate(items, obs)
    errs = name_errors(items, obs)
    assert any(fragment in e for e in errs), errs


def test_real_registry_names_resolve():
    from flashproof.proofs.engine.discover import collect
    from flashproof.spec.registry import collect as collect_items

    obs, import_errs = collect()
    assert import_errs == {}
    assert name_errors(collect_items(), obs) == []


def test_derived_status_full_checked_and_failed():
    items, _ = _world()
    all_ok = [_rec("OA", "proved"), _rec("OB", "proved")]
    st = derive(items, all_ok)
    assert (st["A"].status, st["B"].status, st["AX"].status) == ("fully-checked", "fully-checked", "assumed")
    st = derive(items, [_rec("OA", "proved"), _rec("OB", "refuted", cx={"x": 1})])
    assert st["B"].status == "failed" and st["B"].failing == ("OB",)
    assert st["A"].status == "checked"  # its own obligation holds, a dependency does not


@pytest.mark.parametrize("status", ["unknown", "timeout", "error", "refuted"])
def test_not_proved_is_never_success(status):
    items, _ = _world()
    st = derive(items, [_rec("OA", status, cx={"x": 1} if status == "refuted" else None), _rec("OB", "proved")])
    assert st["A"].status == "failed"
    assert not record_ok(_rec("OA", status))


def test_control_needs_a_counterexample():
    assert record_ok(_rec("C", "refuted", "refuted", cx={"x": 0}))
    assert not record_ok(_rec("C", "refuted", "refuted", cx=None))
    assert not record_ok(_rec("C", "unknown", "refuted"))
    assert not record_ok(_rec("C", "proved", "refuted"))


@pytest.mark.parametrize("status", ["proved", "unknown", "timeout", "error"])
def test_a_control_not_refuted_fails_the_item(status):
    """The obligation is proved, but its checker cannot refute the planted bug: not checked."""
    items, _ = _world()
    ctl = {**_rec("OB/c", status, "refuted"), "of": "OB"}
    st = derive(items, [_rec("OA", "proved"), _rec("OB", "proved"), ctl])
    assert st["B"].status == "failed" and st["B"].failing == ("OB/c",)
    assert st["A"].status == "checked"  # it uses B
    ok = {**_rec("OB/c", "refuted", "refuted", cx={"x": 0}), "of": "OB"}
    assert derive(items, [_rec("OA", "proved"), _rec("OB", "proved"), ok])["A"].status == "fully-checked"


def test_missing_record_is_unchecked():
    items, _ = _world()
    st = derive(items, [_rec("OB", "proved")])
    assert st["A"].status == "unchecked" and st["A"].missing == ("OA",)


def test_transitive_assumptions_follow_uses():
    items, obs = _world()
    items["B"] = items["B"]._replace(assumptions=("AX2",))
    items["AX2"] = _item("AX2", kind="assumption")
    assert transitive_assumptions(items, obs, "A") == ["AX", "AX2"]
