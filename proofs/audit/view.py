"""The report dict (``model.build``) arranged for the HTML templates: each obligation once, links both ways.

``page(report) -> dict`` adds what the page needs and the data does not hold directly:

* ``obligations``: every obligation that checks a shown item, once, in order of first use, with
  ``checks`` (every shown item it checks) — the items link to it instead of repeating it;
* per item: ``refs`` (its obligations' id, state, result and time, for the links), ``rested_on_by``
  (for an assumption: every item whose transitive assumptions include it), ``formulas`` (TeX), and
  ``extra`` (record fields the renderer does not know by name, e.g. ``scope`` or ``role``, shown as
  they are so that a new field is visible without a template change);
* ``facets``: the statuses, kinds and assumptions the filters offer.
"""
from __future__ import annotations

import json

from .formulas import formulas_for

__all__ = ["page", "ITEM_KEYS", "OBLIGATION_KEYS", "extra_fields"]

ITEM_KEYS = frozenset({"id", "kind", "title", "statement", "source", "provenance", "uses", "used_by",
                       "assumptions", "status", "obligations"})
OBLIGATION_KEYS = frozenset({"id", "state", "registered", "title", "encoding", "solver", "solver_version", "bounds",
                             "assumptions", "seconds", "result", "ok", "stale", "cached", "evidence_from", "detail",
                             "counterexample", "witness", "command", "controls"})
CONTROL_KEYS = frozenset({"id", "bug", "result", "ok", "stale", "seconds", "counterexample", "detail"})


def _text(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) for x in v):
        return ", ".join(str(x) for x in v)
    return json.dumps(v, ensure_ascii=False, default=str)


def extra_fields(row: dict, known: frozenset) -> list[tuple[str, str]]:
    """(name, text) for every field of ``row`` outside ``known`` whose value is not empty."""
    return [(k, _text(v)) for k, v in row.items() if k not in known and v not in (None, "", [], {}, ())]


def page(report: dict) -> dict:
    items = [it for sec in report["sections"] for it in sec["items"]]
    shown = {it["id"] for it in items}
    obligations: dict[str, dict] = {}
    for it in items:
        for o in it["obligations"]:
            if o["id"] not in obligations:
                obligations[o["id"]] = dict(o, checks=[], extra=extra_fields(o, OBLIGATION_KEYS),
                                            controls=[dict(c, extra=extra_fields(c, CONTROL_KEYS))
                                                      for c in o["controls"]])
            obligations[o["id"]]["checks"].append(it["id"])
    rested: dict[str, list[str]] = {}
    for it in items:
        for a in it["assumptions"]:
            rested.setdefault(a, []).append(it["id"])
    for o in obligations.values():  # an obligation's assumptions: every item it checks rests on them
        o["item_assumptions"] = sorted({a for i in o["checks"] for a in next(
            x["assumptions"] for x in items if x["id"] == i)})
    sections = []
    for k, sec in enumerate(report["sections"]):
        if not sec["items"]:
            continue
        rows = []
        for it in sec["items"]:
            rows.append(dict(
                it, refs=[{"id": o["id"], "state": o["state"], "result": o["result"], "seconds": o["seconds"],
                           "cached": o["cached"]} for o in it["obligations"]],
                rested_on_by=rested.get(it["id"], []) if it["kind"] == "assumption" else [],
                formulas=formulas_for(it["id"]), extra=extra_fields(it, ITEM_KEYS),
                uses=[u for u in it["uses"]], links_ok={u: u in shown for u in it["uses"] + it["used_by"]}))
        sections.append({"key": f"sec-{k}", "title": sec["title"], "short": sec["title"].split(" (")[0],
                         "items": rows})
    assumptions = [(it["id"], it["title"]) for it in items if it["kind"] == "assumption"]
    statuses = [s for s, n in report["summary"]["items"].items() if n] or sorted({it["status"] for it in items})
    kinds = []
    for it in items:
        if it["kind"] not in kinds:
            kinds.append(it["kind"])
    return {"sections": sections, "obligations": list(obligations.values()), "shown": shown,
            "facets": {"statuses": statuses, "kinds": kinds, "assumptions": assumptions}}
