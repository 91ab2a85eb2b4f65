"""The audit trail: ``out/audit.json`` (machine-readable, schema ``flashproof.audit/1``, described
in ``docs/proofs.md``) and ``out/audit.md`` (a summary for humans)."""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from . import cache
from .status import derive, derive_scope, item_trust, scope_label, transitive_assumptions

__all__ = ["SCHEMA", "build", "write", "solver_summary"]

SCHEMA = "flashproof.audit/1"


def solver_summary(records: list[dict]) -> dict:
    """Counts over the records that made z3 queries: how many carry an agreeing second-solver
    verdict on every query ("two solvers"), how many do not ("one solver"), the agreement rate, the
    disagreements, and the controls refuted by both solvers (``refutation_confirmed``: every query agreed,
    or a counterexample of z3's found by a second solver too, whatever it said of the other queries)."""
    smt = [r for r in records if r.get("trust") in ("two solvers", "one solver")]
    two = [r for r in smt if r["trust"] == "two solvers"]
    ctl = [r for r in smt if r["kind"] == "control"]
    both = [r for r in ctl if r.get("refutation_confirmed")]
    obl = [r for r in smt if r["kind"] == "obligation"]
    return {"z3_records": len(smt), "two_solvers": len(two), "one_solver": len(smt) - len(two),
            "agreement_rate": round(len(two) / len(smt), 4) if smt else 0.0,
            "z3_obligations": len(obl), "obligations_two_solvers": sum(r["trust"] == "two solvers" for r in obl),
            "obligations_agreement_rate": (round(sum(r["trust"] == "two solvers" for r in obl) / len(obl), 4)
                                           if obl else 0.0),
            "disagreements": sum(len(r.get("disagreements") or []) for r in records),
            "z3_controls": len(ctl), "controls_refuted_by_both": len(both),
            "one_solver_ids": sorted(r["obligation"] for r in smt if r["trust"] != "two solvers")}


def build(items: dict, obligations: dict, records: list[dict], *, name_errs: list[str], import_errs: dict,
          total_seconds: float, jobs: int, argv: list[str], partial: bool, cross_check: bool = False) -> dict:
    """The audit document. ``partial`` marks a run restricted by ``--only`` (item statuses then
    reflect only the obligations that ran); ``cross_check``: whether the second solver ran."""
    records = sorted(records, key=lambda r: r["obligation"])
    statuses = derive(items, records)
    scopes = derive_scope(items, obligations)
    by_id = {r["obligation"]: r for r in records}
    controls_of: dict[str, list] = {}
    for ob in obligations.values():
        if ob.of:
            controls_of.setdefault(ob.of, []).append(ob.id)
    item_rows = []
    for iid in sorted(items):
        it, st = items[iid], statuses[iid]
        item_rows.append({
            "id": it.id, "kind": it.kind, "title": it.title, "statement": it.statement, "source": it.source,
            "provenance": list(it.provenance), "uses": list(it.uses), "checked_by": list(it.checked_by),
            "controls": sorted(c for o in it.checked_by for c in controls_of.get(o, [])),
            "assumptions": transitive_assumptions(items, obligations, iid), "module": it.module,
            "status": st.status, "failing": list(st.failing), "missing": list(st.missing),
            "scope": scopes[iid].scope, "bounded_by": list(scopes[iid].bounded_by),
            "scope_with_uses": scopes[iid].with_uses, "bounded_via_uses": list(scopes[iid].bounded_via),
            "scope_text": scope_label(scopes[iid], obligations),
            "trust": item_trust(it, obligations, by_id) if it.kind != "assumption" else "—",
        })
    n_ok = sum(r["ok"] for r in records)
    ok = not name_errs and not import_errs and n_ok == len(records)
    count = {}
    for r in records:
        count[f"{r['kind']}:{r['status']}"] = count.get(f"{r['kind']}:{r['status']}", 0) + 1
    return {
        "schema": SCHEMA,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "flashproof prove " + " ".join(argv),
        "partial": partial,
        "ok": ok,
        "jobs": jobs,
        "cpus": os.cpu_count(),
        "total_seconds": round(total_seconds, 3),
        "cross_check": cross_check,
        "versions": cache.versions(),
        "summary": {"records": len(records), "ok": n_ok, "not_ok": len(records) - n_ok, "by_kind_status": count,
                    "items": {s: sum(1 for r in item_rows if r["status"] == s) for s in
                              ("fully-checked", "checked", "failed", "unchecked", "assumed")},
                    "scope": {s: sum(1 for r in item_rows if r["scope"] == s) for s in ("unbounded", "bounded")},
                    "solvers": solver_summary(records)},
        "name_errors": name_errs,
        "import_errors": import_errs,
        "items": item_rows,
        "obligations": records,
    }


def _md(doc: dict) -> str:
    s = doc["summary"]
    lines = [f"# flashproof audit — {'OK' if doc['ok'] else 'FAILED'}", "",
             f"{doc['generated']} · `{doc['command']}` · {doc['total_seconds']} s on {doc['jobs']} jobs · "
             f"z3 {doc['versions']['z3']} · cvc5 {doc['versions'].get('cvc5')} · bitwuzla "
             f"{doc['versions'].get('bitwuzla')} · sympy {doc['versions']['sympy']}"
             + (" · **partial run (--only)**" if doc["partial"] else ""), "",
             f"{s['records']} records, {s['ok']} ok, {s['not_ok']} not ok. Items: "
             + ", ".join(f"{k} {v}" for k, v in s["items"].items())
             + f"; scope: {s['scope']['unbounded']} every n, {s['scope']['bounded']} bounded", "",
             _solver_line(s["solvers"], doc.get("cross_check", False)), ""]
    if doc["name_errors"] or doc["import_errors"]:
        lines += ["## Errors", ""] + [f"- {e}" for e in doc["name_errors"]] + \
                 [f"- import of `{m}` failed: {t.strip().splitlines()[-1]}" for m, t in doc["import_errors"].items()] + [""]
    lines += ["## Items", "", "| id | kind | status | scope | solvers | checked by | bounded by | assumptions |",
              "|---|---|---|---|---|---|---|---|"]
    for it in doc["items"]:
        lines.append(f"| {it['id']} | {it['kind']} | {it['status']} | {it.get('scope_text') or '—'} | "
                     f"{it.get('trust', '—')} | {', '.join(it['checked_by']) or '—'} | "
                     f"{', '.join(it.get('bounded_by', [])) or '—'} | {', '.join(it['assumptions']) or '—'} |")
    lines += ["", "## Obligations and controls", "",
              "| id | kind | role | scope | status | expected | ok | solvers | bounds | s |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["obligations"]:
        b = ", ".join(f"{k}={v}" for k, v in r["bounds"].items()) or "—"
        lines.append(f"| {r['obligation']} | {r['kind']} | {r.get('role', '—')} | {r.get('scope', '—')} | "
                     f"{r['status']}{_cached(r)} | {r['expected']} | {'yes' if r['ok'] else '**NO**'} | {_solvers_cell(r)} | "
                     f"{b} | {r['seconds']} |")
    bad = [r for r in doc["obligations"] if not r["ok"]]
    if bad:
        lines += ["", "## Not ok", ""]
        for r in bad:
            lines.append(f"- `{r['obligation']}`: {r['status']} (expected {r['expected']}) — {r['detail']}; "
                         f"reproduce: `{r['command']}`")
    return "\n".join(lines) + "\n"


def _solver_line(x: dict, cross_check: bool) -> str:
    if not cross_check:
        return (f"Solvers: z3 only — the second-solver cross-check did not run (`--cross-check`, default of "
                f"`--deep`); all {x['z3_records']} records with z3 queries rest on one solver.")
    return (f"Solvers: {x['two_solvers']}/{x['z3_records']} records with z3 queries carry an agreeing second "
            f"verdict on every query ({x['agreement_rate']:.1%}; obligations alone {x['obligations_two_solvers']}/"
            f"{x['z3_obligations']}, {x['obligations_agreement_rate']:.1%}); {x['disagreements']} disagreements; controls "
            f"refuted by both: {x['controls_refuted_by_both']}/{x['z3_controls']}. One solver: "
            + (", ".join(x["one_solver_ids"]) or "none") + ".")


def _cached(r: dict) -> str:
    return f" (cached from run {r.get('cached_from')})" if r.get("cached") else ""


def _solvers_cell(r: dict) -> str:
    sv = r.get("solvers") or []
    if not sv:
        return r["solver"]
    return " · ".join(f"{e['name']} {e['status']}" for e in sv) + f" ({r.get('trust')})"


def write(doc: dict, out_dir: Path, stem: str = "audit") -> tuple[Path, Path]:
    """Write ``<out_dir>/<stem>.json`` and ``<stem>.md``; return both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    j, m = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    j.write_text(json.dumps(doc, indent=1, sort_keys=False, default=str) + "\n")
    m.write_text(_md(doc))
    return j, m
