"""The audit trail: ``out/audit.json`` (machine-readable, schema ``flashproof.audit/1``, described
in ``docs/proofs.md``) and ``out/audit.md`` (a summary for humans)."""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from . import cache
from .status import derive, transitive_assumptions

__all__ = ["SCHEMA", "build", "write"]

SCHEMA = "flashproof.audit/1"


def build(items: dict, obligations: dict, records: list[dict], *, name_errs: list[str], import_errs: dict,
          total_seconds: float, jobs: int, argv: list[str], partial: bool) -> dict:
    """The audit document. ``partial`` marks a run restricted by ``--only`` (item statuses then
    reflect only the obligations that ran)."""
    records = sorted(records, key=lambda r: r["obligation"])
    statuses = derive(items, records)
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
        "versions": cache.versions(),
        "summary": {"records": len(records), "ok": n_ok, "not_ok": len(records) - n_ok, "by_kind_status": count,
                    "items": {s: sum(1 for r in item_rows if r["status"] == s) for s in
                              ("fully-checked", "checked", "failed", "unchecked", "assumed")}},
        "name_errors": name_errs,
        "import_errors": import_errs,
        "items": item_rows,
        "obligations": records,
    }


def _md(doc: dict) -> str:
    s = doc["summary"]
    lines = [f"# flashproof audit — {'OK' if doc['ok'] else 'FAILED'}", "",
             f"{doc['generated']} · `{doc['command']}` · {doc['total_seconds']} s on {doc['jobs']} jobs · "
             f"z3 {doc['versions']['z3']} · sympy {doc['versions']['sympy']}"
             + (" · **partial run (--only)**" if doc["partial"] else ""), "",
             f"{s['records']} records, {s['ok']} ok, {s['not_ok']} not ok. Items: "
             + ", ".join(f"{k} {v}" for k, v in s["items"].items()), ""]
    if doc["name_errors"] or doc["import_errors"]:
        lines += ["## Errors", ""] + [f"- {e}" for e in doc["name_errors"]] + \
                 [f"- import of `{m}` failed: {t.strip().splitlines()[-1]}" for m, t in doc["import_errors"].items()] + [""]
    lines += ["## Items", "", "| id | kind | status | checked by | assumptions |", "|---|---|---|---|---|"]
    for it in doc["items"]:
        lines.append(f"| {it['id']} | {it['kind']} | {it['status']} | {', '.join(it['checked_by']) or '—'} | "
                     f"{', '.join(it['assumptions']) or '—'} |")
    lines += ["", "## Obligations and controls", "", "| id | kind | status | expected | ok | solver | bounds | s |",
              "|---|---|---|---|---|---|---|---|"]
    for r in doc["obligations"]:
        b = ", ".join(f"{k}={v}" for k, v in r["bounds"].items()) or "unbounded"
        lines.append(f"| {r['obligation']} | {r['kind']} | {r['status']} | {r['expected']} | "
                     f"{'yes' if r['ok'] else '**NO**'} | {r['solver']} | {b} | {r['seconds']} |")
    bad = [r for r in doc["obligations"] if not r["ok"]]
    if bad:
        lines += ["", "## Not ok", ""]
        for r in bad:
            lines.append(f"- `{r['obligation']}`: {r['status']} (expected {r['expected']}) — {r['detail']}; "
                         f"reproduce: `{r['command']}`")
    return "\n".join(lines) + "\n"


def write(doc: dict, out_dir: Path, stem: str = "audit") -> tuple[Path, Path]:
    """Write ``<out_dir>/<stem>.json`` and ``<stem>.md``; return both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    j, m = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    j.write_text(json.dumps(doc, indent=1, sort_keys=False, default=str) + "\n")
    m.write_text(_md(doc))
    return j, m
