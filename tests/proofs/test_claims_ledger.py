"""The claims ledger: names resolve, the verdict rule, every recomputation and its control, and the
ledger's figures against the seed texts (when the seeds are present)."""
from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from flashproof.proofs.ledger import verdict as C
from flashproof.proofs.ledger.recompute import RECOMPUTE, Recomputed
from flashproof.spec import seed_claims as spec
from flashproof.spec.seed_claims import Claim, Figure

RECOMPUTABLE = [c.id for c in spec.CLAIMS if spec.recomputable(c)]
SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"


def test_names_resolve():
    assert C.missing_recomputations() == []


def test_claim_items_and_obligations_are_registered():
    from flashproof.proofs.engine.discover import collect
    from flashproof.proofs.engine.status import name_errors
    from flashproof.spec.registry import collect as collect_items

    items = collect_items()
    obligations, errs = collect()
    assert "flashproof.proofs.obligations.claims.seed_claims" not in errs
    for cid in RECOMPUTABLE:
        oid = spec.obligation_id(cid)
        assert items[cid].checked_by == (oid,)
        assert obligations[oid].checks == (cid,)
        assert [o.id for o in obligations.values() if o.of == oid] == [f"{oid}/perturbed"]
    mine = [e for e in name_errors(items, obligations) if "CL-" in e]
    assert mine == []


@pytest.mark.parametrize("stated, half", [
    ("33.6", Fraction(1, 20)), ("1.68e7", Fraction(5 * 10 ** 4)), ("200", Fraction(50)), ("4096", Fraction(1, 2)),
    ("0.050", Fraction(1, 2000)), ("3", Fraction(1, 2)), ("0.2401", Fraction(1, 20000)), ("3.4e38", Fraction(5 * 10 ** 36)),
])
def test_half_unit_is_the_printed_precision(stated, half):
    assert C.half_unit(stated) == half


def _value_claim(stated, expect="holds"):
    return Claim("CL-T", spec.S0, "t", "t", "value", (Figure("x", stated),), expect, "m", "n")


@pytest.mark.parametrize("stated, value, kind", [
    ("33.6", Fraction(33554432, 10 ** 6), "confirmed"),
    ("33.6", Fraction("33.65"), "confirmed"),        # exactly half a unit away: still rounds to the figure
    ("33.6", Fraction("33.6500001"), "off"),
    ("200", Fraction("249.9"), "confirmed"),          # one significant figure
    ("1.38", Fraction("1.3851"), "off"),
])
def test_verdict_rule(stated, value, kind):
    v = C.verdict(_value_claim(stated), Recomputed((value,)))
    assert v.kind == kind
    assert v.deviation == pytest.approx(float(abs(value - Fraction(stated)) / Fraction(stated)))
    if kind == "off":
        assert v.text.startswith("off by ")


def test_citations_are_never_confirmed():
    for row in C.ledger():
        if row.claim.check in ("citation", "not-checkable"):
            assert row.verdict.kind == row.claim.check and row.recomputed is None and row.agrees is None
        else:
            assert row.verdict.kind in ("confirmed", "off") and row.agrees is True, (row.claim.id, row.verdict)


@pytest.mark.parametrize("cid", RECOMPUTABLE)
def test_obligation_proved_and_control_refuted(cid):
    ok = C.check_claim(cid)
    assert ok.status == "proved", ok.detail
    bad = C.check_claim(cid, as_control=True)
    assert bad.status == "refuted" and bad.counterexample, bad.detail


def test_errata_are_refuted_by_recomputation():
    errata = {c.id for c in spec.CLAIMS if c.expect == "fails"}
    assert errata == {"CL-002-128K-HALF-A100", "CL-002-BITWISE", "CL-002-IO-GAIN"}
    rows = {r.claim.id: r for r in C.ledger()}
    assert rows["CL-002-IO-GAIN"].shown == ("24",)
    assert rows["CL-002-BITWISE"].recomputed.counterexample["streaming_l"] != \
        rows["CL-002-BITWISE"].recomputed.counterexample["oneshot_l"]


def test_a_wrong_expectation_fails_the_obligation(monkeypatch):
    """The obligation is not a rubber stamp: flip one claim's expectation and it is refuted."""
    claim = spec.by_id()["CL-002-RIDGE"]
    monkeypatch.setattr(spec, "by_id", lambda: {claim.id: claim._replace(expect="fails")})
    out = C.check_claim(claim.id)
    assert out.status == "refuted" and out.counterexample["verdict"] == "confirmed"


def test_recomputation_error_is_reported_not_hidden(monkeypatch):
    monkeypatch.setitem(RECOMPUTE, "CL-002-RIDGE", lambda control: (_ for _ in ()).throw(ZeroDivisionError("boom")))
    row = next(r for r in C.ledger() if r.claim.id == "CL-002-RIDGE")
    assert row.verdict.kind == "error" and "boom" in row.verdict.text and row.agrees is False


def _renderings(stated: str) -> list[str]:
    """How a figure may be printed: as is, with a decimal comma, or as a × 10ⁿ with superscripts."""
    out = [stated, stated.replace(".", ",")]
    m = re.fullmatch(r"([\d.]+)e(\d+)", stated)
    if m:
        sup = str(m.group(2)).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
        for mant in (m.group(1), m.group(1).replace(".", ",")):
            out += [f"{mant} × 10{sup}", f"{mant}×10{sup}", f"{mant}·10{sup}"]
    return out


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"seed documents not present at {SEEDS}")
def test_stated_figures_appear_in_their_seed():
    """Guards the ledger against typos: every printed figure with a decimal point, an exponent or at
    least three digits occurs in its seed document (small integers are too common to check)."""
    missing = []
    for c in spec.CLAIMS:
        text = (SEEDS / c.source).read_text(encoding="utf-8")
        for f in c.figures:
            if not ("." in f.stated or "e" in f.stated or len(f.stated) >= 3):
                continue
            if not any(r in text for r in _renderings(f.stated)):
                missing.append((c.id, f.stated))
    assert missing == []
