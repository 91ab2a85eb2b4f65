"""The claims ledger's verdict rule, and ``check_claim`` that the RECOMPUTE obligations run.

Verdict rule (derived, never typed): a stated figure is *confirmed* when the recomputed value lies
within half a unit of the figure's last significant digit (trailing zeros of an integer are not
significant: "200" is ±50, "4096" is ±0.5); otherwise it is *off by X%* (relative to the stated
figure; the largest over a claim's figures). Citations and not-checkable claims get no verdict.

``check_claim(id)`` decides one claim as an obligation outcome; ``check_claim(id, as_control=True)``
decides its negative control: for a ``value`` claim the first stated figure moved by two units in
its last printed digit (for an erratum: replaced by the correctly rounded value), for a
``bound``/``identity`` claim the bug named in ``flashproof.proofs.ledger.recompute``. The
obligations themselves are registered by ``flashproof.proofs.obligations.claims.seed_claims``.

``ledger()`` recomputes everything (≈1 s) and returns one ``LedgerRow`` per claim, for the report.
"""
from __future__ import annotations

import time
from decimal import Decimal
from fractions import Fraction
from typing import Any, NamedTuple

from flashproof.spec import seed_claims as spec

from .recompute import BUGS, ILLUSTRATE, RECOMPUTE, Recomputed
from flashproof.proofs.engine.core import Outcome

__all__ = ["Verdict", "LedgerRow", "half_unit", "verdict", "check_claim", "ledger", "missing_recomputations"]


class Verdict(NamedTuple):
    """kind: confirmed | off | citation | not-checkable | error; deviation: the largest relative
    deviation |recomputed − stated| / |stated| over the figures (None when not numeric);
    text: one line for humans."""

    kind: str
    deviation: float | None
    text: str


class LedgerRow(NamedTuple):
    """One claim with its recomputation: claim (spec.Claim), recomputed (Recomputed or None),
    shown (recomputed figures as text, one per figure), verdict, agrees (the verdict matches
    ``expect``; None when nothing is recomputed), illustration (text or ""), seconds."""

    claim: Any
    recomputed: Any
    shown: tuple
    verdict: Verdict
    agrees: bool | None
    illustration: str
    seconds: float


def half_unit(stated: str) -> Fraction:
    """Half a unit in the last significant digit of a printed decimal ("33.6" → 0.05, "1.68e7" →
    5e4, "200" → 50, "0.050" → 0.0005)."""
    d = Decimal(stated)
    sign, digits, exp = d.as_tuple()
    if not isinstance(exp, int):
        raise ValueError(f"stated figure {stated!r} is not a finite decimal")
    if exp == 0 and "." not in stated and "e" not in stated.lower():
        while len(digits) > 1 and digits[-1] == 0:  # integer trailing zeros: not significant
            digits, exp = digits[:-1], exp + 1
    return Fraction(1, 2) * Fraction(10) ** exp


def _as_fraction(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    return Fraction(Decimal(str(x)))  # mpmath mpf / float: through its decimal repr


def _show(x) -> str:
    f = _as_fraction(x)
    if f.denominator == 1:
        return f"{f.numerator:,}" if abs(f) >= 10 ** 4 else str(f.numerator)
    v = float(f)
    return f"{v:.6g}" if 1e-4 <= abs(v) < 1e7 else f"{v:.6e}"


def verdict(claim, rec: Recomputed | None, stated_override: tuple | None = None) -> Verdict:
    """The verdict for ``claim`` given its recomputation (``stated_override`` replaces the stated
    figures, for the negative control)."""
    if claim.check in ("citation", "not-checkable"):
        return Verdict(claim.check, None, "citation of an external figure" if claim.check == "citation"
                       else "not checkable here: " + claim.method)
    if rec is None:
        return Verdict("error", None, "no recomputation")
    if claim.check == "value":
        printed = tuple(f.stated for f in claim.figures)
        stated = stated_override or tuple(Fraction(Decimal(s)) for s in printed)
        if len(rec.values) != len(stated):
            return Verdict("error", None, f"recomputation returned {len(rec.values)} values for {len(stated)} figures")
        worst, all_ok = 0.0, True
        for s, sv, r in zip(printed, stated, rec.values):
            rv = _as_fraction(r)
            ok = abs(rv - sv) <= half_unit(s)  # the printed figure's precision, also for a control
            all_ok &= ok
            dev = float(abs(rv - sv) / abs(sv)) if sv else float("inf")
            worst = max(worst, dev)
        if all_ok:
            return Verdict("confirmed", worst, f"confirmed (largest deviation {100 * worst:.2g}%, within the printed precision)")
        return Verdict("off", worst, f"off by {100 * worst:.3g}%")
    if rec.holds is None:
        return Verdict("error", None, "recomputation returned no answer")
    return Verdict("confirmed", None, "confirmed: " + rec.detail) if rec.holds else \
        Verdict("off", None, "off: " + rec.detail)


def _agrees(claim, v: Verdict) -> bool:
    return v.kind == ("confirmed" if claim.expect == "holds" else "off")


def _mutant_figures(claim, rec: Recomputed) -> tuple:
    """The control's stated values (Fractions; precision stays the printed one): the first moved by
    2 units in its last digit (a confirmed claim) or replaced by the recomputed value rounded at
    the printed precision (an erratum)."""
    figs = [Fraction(Decimal(f.stated)) for f in claim.figures]
    unit = 2 * half_unit(claim.figures[0].stated)
    if claim.expect == "holds":
        figs[0] += 2 * unit
    else:
        figs[0] = round(_as_fraction(rec.values[0]) / unit) * unit
    return tuple(figs)


def check_claim(claim_id: str, *, as_control: bool = False) -> Outcome:
    """Recompute ``claim_id`` and decide it: ``proved`` when the verdict matches ``expect``,
    otherwise ``refuted`` with the recomputed and stated figures as the counterexample."""
    claim = spec.by_id()[claim_id]
    rec = RECOMPUTE[claim_id](as_control and claim.check != "value")
    stated = _mutant_figures(claim, rec) if (as_control and claim.check == "value") else None
    v = verdict(claim, rec, stated)
    if v.kind == "error":
        return Outcome("error", detail=v.text, solver=rec.solver)
    detail = f"{v.text}; expected {'confirmed' if claim.expect == 'holds' else 'off (erratum)'}"
    if _agrees(claim, v):
        return Outcome("proved", detail=detail, solver=rec.solver,
                       witness={"recomputed": [_show(x) for x in rec.values], "verdict": v.kind,
                                "counterexample": rec.counterexample} if (rec.values or rec.counterexample) else None)
    cex = {"verdict": v.kind, "expected": claim.expect,
           "stated": [_show(x) for x in stated] if stated else [f.stated for f in claim.figures],
           "recomputed": [_show(x) for x in rec.values], "detail": rec.detail}
    if rec.counterexample is not None:
        cex["witness"] = rec.counterexample
    return Outcome("refuted", counterexample=cex, detail=detail, solver=rec.solver)


def missing_recomputations() -> list[str]:
    """Name check: recomputable claims without a function, functions without a claim, and
    bound/identity claims whose control has no named bug."""
    claims = spec.by_id()
    errs = [f"claim {c}: recomputable but has no recomputation" for c, cl in claims.items()
            if spec.recomputable(cl) and c not in RECOMPUTE]
    errs += [f"recomputation {c}: no recomputable claim of that id" for c in RECOMPUTE
             if c not in claims or not spec.recomputable(claims[c])]
    errs += [f"claim {c}: {cl.check} claim needs a planted bug for its control" for c, cl in claims.items()
             if cl.check in ("bound", "identity") and c not in BUGS]
    errs += [f"illustration {c}: no citation/not-checkable claim of that id" for c in ILLUSTRATE
             if c not in claims or spec.recomputable(claims[c])]
    return errs


def ledger() -> list[LedgerRow]:
    """Recompute every claim (in the ledger's order) for the report."""
    rows = []
    for c in spec.CLAIMS:
        t0 = time.perf_counter()
        rec, ill = None, ""
        try:
            if spec.recomputable(c):
                rec = RECOMPUTE[c.id](False)
            elif c.id in ILLUSTRATE:
                ill = ILLUSTRATE[c.id]()
            v = verdict(c, rec)
        except Exception as e:  # noqa: BLE001 — shown as an error verdict, never hidden
            v = Verdict("error", None, f"{type(e).__name__}: {e}")
        shown = tuple(_show(x) for x in rec.values) if rec is not None else ()
        agrees = _agrees(c, v) if spec.recomputable(c) else None
        rows.append(LedgerRow(c, rec, shown, v, agrees, ill, time.perf_counter() - t0))
    return rows
