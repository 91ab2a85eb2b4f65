"""The audit report as data: registry + ``out/audit.json`` (``flashproof prove``) + the claims ledger.

``build(items, obligations, doc, ledger_rows, provenance)`` returns one JSON-able dict (schema
``flashproof.audit-report/1``) that the HTML, Markdown and JSON renderings all draw from.

Status chips are derived here, never typed:

* a result record is **stale** when ``cache.content_hash`` of its obligation, computed from the
  *current* sources and versions, differs from the hash stored with the result (unless the
  prover's result cache holds a result under the current hash, which is then used instead);
* an obligation's evidence is ``ok`` (its record ok by ``status.record_ok`` and every negative
  control's record ok), ``failed`` (some of these records not ok), ``stale`` (some record stale),
  or ``missing`` (no record for it or for one of its controls);
* an item is ``assumed`` (assumption), ``unchecked`` (nothing checks it, or evidence missing),
  ``failed`` (some obligation failed), ``stale`` (else, some obligation stale), ``checked`` (all ok)
  and ``fully-checked`` (checked, and every item it uses is fully checked; assumptions are leaves).

This is ``status.derive`` plus staleness and plus the controls (a check whose control did not
fail is not evidence); with fresh, complete records and passing controls both agree.

Each item also carries its derived ``scope`` ("unbounded" only if every obligation carrying its
evidence is unbounded: ``status.derive_scope``), the words for it (``scope_text``: "every n" or
"up to n ≤ 3, …"), the solver ``trust`` tier of its evidence ("two solvers", "one solver", "no
SMT": ``status.item_trust``) and ``chip_text``, the status chip's label with both
("fully checked, every n · two solvers").
"""
from __future__ import annotations

import inspect
from typing import Iterable

from flashproof.proofs.engine import cache
from flashproof.proofs.engine.runner import command_for
from flashproof.proofs.engine.status import derive_scope, item_trust, record_ok, scope_label, transitive_assumptions

__all__ = ["SCHEMA", "STATUSES", "PAGE", "record_states", "item_statuses", "sections", "build", "chip_text"]

SCHEMA = "flashproof.audit-report/1"
STATUSES = ("fully-checked", "checked", "unchecked", "stale", "failed", "assumed")
PAGE = "004_b37f59f788102f1f.txt"
CLAIMS_MODULE = "flashproof.spec.seed_claims"


def _current_hash(ob, rec: dict, obligations: dict) -> str | None:
    try:
        return cache.content_hash(ob, bounds=rec.get("bounds", {}), base=obligations.get(ob.of) if ob.of else None,
                                  cross_check=bool(rec.get("cross_check")))
    except Exception:  # noqa: BLE001 — a hash we cannot compute can never vouch for a result
        return None


def record_states(obligations: dict, records: Iterable[dict], cache_dir=cache.DEFAULT_DIR) -> dict[str, dict]:
    """obligation/control id -> {"record": dict|None, "stale": bool, "ok": bool, "source": str} for
    every registered obligation and control, plus orphan records (results of ids that are no longer
    registered) under their id with ``"orphan": True``.

    The evidence is the trail's latest record when its hash matches the current sources
    (``source="trail"``). Otherwise, when the prover's result cache holds a definitive result under
    the *current* hash, that result is fresh evidence (``source="cache"``): a trail can be older
    than the sources, or partial (``prove --only --out DIR``), while the cache keeps every
    definitive result. Otherwise a trail record is stale
    and no record is missing. ``cache_dir=None`` ignores the cache."""
    by_id = {}
    for r in records:
        by_id[r["obligation"]] = r
    out = {}
    for oid, ob in obligations.items():
        rec = by_id.get(oid)
        cur = _current_hash(ob, rec if rec is not None else {"bounds": ob.bounds}, obligations)
        if rec is not None and cur is not None and cur == rec.get("content_hash"):
            out[oid] = {"record": rec, "stale": False, "ok": record_ok(rec), "source": "trail"}
            continue
        hit = cache.load(cache_dir, cur) if (cache_dir is not None and cur is not None) else None
        if hit is not None and hit.get("obligation") == oid and hit.get("content_hash") == cur:
            hit = dict(hit, cached=True)
            out[oid] = {"record": hit, "stale": False, "ok": record_ok(hit), "source": "cache"}
        elif rec is not None:
            out[oid] = {"record": rec, "stale": True, "ok": record_ok(rec), "source": "trail"}
        else:
            out[oid] = {"record": None, "stale": False, "ok": False, "source": None}
    for oid, rec in by_id.items():
        if oid not in obligations:
            out[oid] = {"record": rec, "stale": True, "ok": False, "orphan": True, "source": "trail"}
    return out


def obligation_state(oid: str, obligations: dict, states: dict) -> str:
    """ok | failed | stale | missing for one obligation together with its controls."""
    ids = [oid] + sorted(c.id for c in obligations.values() if c.of == oid)
    recs = [states.get(i, {"record": None}) for i in ids]
    if any(s["record"] is not None and not s["stale"] and not s["ok"] for s in recs):
        return "failed"
    if any(s["record"] is not None and s["stale"] for s in recs):
        return "stale"
    if any(s["record"] is None for s in recs):
        return "missing"
    return "ok"


def item_statuses(items: dict, obligations: dict, states: dict) -> dict[str, str]:
    """id -> derived status chip (see the module docstring)."""
    local = {}
    for iid, it in items.items():
        if it.kind == "assumption":
            local[iid] = "assumed"
            continue
        if not it.checked_by:
            local[iid] = "unchecked"
            continue
        obs = [obligation_state(o, obligations, states) if o in obligations else "missing" for o in it.checked_by]
        local[iid] = ("failed" if "failed" in obs else "stale" if "stale" in obs
                      else "unchecked" if "missing" in obs else "checked")
    full: dict[str, bool] = {}

    def fully(iid: str, stack: tuple = ()) -> bool:
        if iid in full:
            return full[iid]
        if iid not in items or iid in stack:
            return False
        it = items[iid]
        res = it.kind == "assumption" or (local[iid] == "checked" and all(fully(u, stack + (iid,)) for u in it.uses))
        full[iid] = res
        return res

    return {iid: ("fully-checked" if st == "checked" and fully(iid) else st) for iid, st in local.items()}


def chip_text(status: str, scope_text: str, trust: str) -> str:
    """The status chip's label: the status, its scope when the item is (fully) checked, and the
    solver tier when its evidence made SMT queries."""
    label = status.replace("-", " ")
    if status in ("fully-checked", "checked") and scope_text:
        label += ", " + scope_text if scope_text == "every n" else " " + scope_text
    if status in ("fully-checked", "checked") and trust in ("two solvers", "one solver"):
        label += " · " + trust
    return label


def sections(items: dict) -> list[tuple[str, list[str]]]:
    """The report's item sections, each in registration order (the page's order for the page):
    the theorem page, our extensions, other items, assumptions. Claims items are in the ledger."""
    page, ext, other, assum = [], [], [], []
    for iid, it in items.items():
        if it.module == CLAIMS_MODULE:
            continue
        if it.kind == "assumption":
            assum.append(iid)
        elif it.kind == "extension":
            ext.append(iid)
        elif it.source == PAGE:
            page.append(iid)
        else:
            other.append(iid)
    return [(f"Theorem page ({PAGE})", page), ("Our extensions (not on the page)", ext),
            ("Other items (seed examples, speculative decoding, …)", other), ("Assumptions", assum)]


def _encoding(ob) -> str:
    doc = inspect.getdoc(ob.fn) or ""
    return " ".join(doc.split())


def _ob_row(oid: str, obligations: dict, states: dict) -> dict:
    ob = obligations.get(oid)
    st = states.get(oid, {"record": None, "stale": False, "ok": False})
    rec = st["record"] or {}
    row = {
        "id": oid,
        "state": obligation_state(oid, obligations, states) if ob else "missing",
        "registered": ob is not None,
        "title": ob.title if ob else rec.get("title", ""),
        "encoding": _encoding(ob) if ob else "",
        "solver": rec.get("solver") or (ob.solver if ob else ""),
        "solver_version": rec.get("solver_version"),
        "solvers": rec.get("solvers", []),
        "trust": rec.get("trust", "—"),
        "scope": ob.scope if ob else rec.get("scope", "bounded"),
        "role": ob.role if ob else rec.get("role", "proof"),
        "why_unbounded": ob.why_unbounded if ob else rec.get("why_unbounded", ""),
        "bounds": rec.get("bounds", ob.bounds if ob else {}),
        "assumptions": list(ob.assumptions) if ob else [],
        "seconds": rec.get("seconds"),
        "result": rec.get("status", "not run"),
        "ok": bool(st["ok"]) if st["record"] is not None else False,
        "stale": bool(st["stale"]),
        "cached": bool(rec.get("cached")),
        "evidence_from": st.get("source"),
        "detail": rec.get("detail", ""),
        "counterexample": rec.get("counterexample"),
        "witness": rec.get("witness"),
        "command": rec.get("command") or command_for(oid, False),
        "controls": [],
    }
    for c in sorted((c for c in obligations.values() if c.of == oid), key=lambda c: c.id):
        cs = states.get(c.id, {"record": None, "stale": False, "ok": False})
        crec = cs["record"] or {}
        row["controls"].append({
            "id": c.id, "bug": c.bug, "result": crec.get("status", "not run"),
            "ok": bool(cs["ok"]) if cs["record"] is not None else False, "stale": bool(cs["stale"]),
            "seconds": crec.get("seconds"), "counterexample": crec.get("counterexample"),
            "trust": crec.get("trust", "—"), "solvers": crec.get("solvers", []),
            "detail": crec.get("detail", ""),
        })
    return row


def _ledger_row(row, obligations: dict, states: dict) -> dict:
    from flashproof.spec.seed_claims import obligation_id, recomputable

    c = row.claim
    figs = []
    for k, f in enumerate(c.figures):
        figs.append({"label": f.label, "stated": f.stated, "unit": f.unit,
                     "recomputed": row.shown[k] if k < len(row.shown) else None})
    ob = None
    if recomputable(c):
        oid = obligation_id(c.id)
        ob = _ob_row(oid, obligations, states)
    rec = row.recomputed
    return {
        "id": c.id, "source": c.source, "topic": c.topic, "claim": c.claim, "check": c.check,
        "figures": figs, "method": c.method, "note": c.note, "expect": c.expect or None,
        "verdict": row.verdict.kind, "deviation": row.verdict.deviation, "verdict_text": row.verdict.text,
        "agrees": row.agrees, "illustration": row.illustration,
        "recomputed_by": rec.solver if rec is not None else None,
        "detail": rec.detail if rec is not None else "",
        "recompute_seconds": round(row.seconds, 4), "obligation": ob,
    }


def build(items: dict, obligations: dict, doc: dict | None, ledger_rows: list, provenance: dict,
          cache_dir=cache.DEFAULT_DIR, trail: str = "out/audit.json") -> dict:
    """The report (see the module docstring). ``doc`` is the parsed trail (read from ``trail``) or
    None; ``cache_dir`` is the prover's result cache (None: use the trail only)."""
    records = list((doc or {}).get("obligations", []))
    states = record_states(obligations, records, cache_dir)
    status = item_statuses(items, obligations, states)
    scopes = derive_scope(items, obligations)
    latest = {oid: st["record"] for oid, st in states.items() if st["record"] is not None and not st["stale"]}
    secs = []
    for title, ids in sections(items):
        rows = []
        for iid in ids:
            it = items[iid]
            rows.append({
                "id": iid, "kind": it.kind, "title": it.title, "statement": it.statement, "source": it.source,
                "provenance": list(it.provenance), "uses": list(it.uses), "used_by": [
                    j for j, o in items.items() if iid in o.uses and o.module != CLAIMS_MODULE],
                "assumptions": transitive_assumptions(items, obligations, iid) if it.kind != "assumption" else [],
                "status": status[iid],
                "scope": scopes[iid].scope, "bounded_by": list(scopes[iid].bounded_by),
                "scope_with_uses": scopes[iid].with_uses, "bounded_via_uses": list(scopes[iid].bounded_via),
                "scope_text": scope_label(scopes[iid], obligations),
                "trust": item_trust(it, obligations, latest) if it.kind != "assumption" else "—",
                "obligations": [_ob_row(o, obligations, states) for o in it.checked_by],
            })
            rows[-1]["chip_text"] = chip_text(rows[-1]["status"], rows[-1]["scope_text"], rows[-1]["trust"])
        secs.append({"title": title, "items": rows})
    graph_ids = [i for _, ids in sections(items)[:3] for i in ids]
    graph = {"nodes": [{"id": i, "title": items[i].title, "kind": items[i].kind, "status": status[i]} for i in graph_ids],
             "edges": [[u, i] for i in graph_ids for u in items[i].uses if u in graph_ids]}
    ledger = [_ledger_row(r, obligations, states) for r in ledger_rows]
    problems = list((doc or {}).get("name_errors", []))
    problems += [f"import of {m} failed: {t.strip().splitlines()[-1] if t.strip() else ''}"
                 for m, t in (doc or {}).get("import_errors", {}).items()]
    problems += [f"result for {oid}, which is no longer a registered obligation" for oid, s in states.items()
                 if s.get("orphan")]
    problems += [f"claim {r['id']}: recomputation gives '{r['verdict']}' but the ledger expects "
                 f"{'confirmed' if r['expect'] == 'holds' else 'an erratum'}" for r in ledger if r["agrees"] is False]
    if doc is None:
        problems.append(f"no {trail}: nothing has been proved in this checkout (run `flashproof prove`)")
    elif doc.get("partial"):
        problems.append(f"{trail} comes from a partial run (--only): results of other obligations are missing")
    counts = {s: 0 for s in STATUSES}
    for st in status.values():
        counts[st] = counts.get(st, 0) + 1
    verdicts: dict = {}
    for r in ledger:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    return {
        "schema": SCHEMA,
        "provenance": provenance,
        "prove_run": None if doc is None else {k: doc.get(k) for k in (
            "schema", "generated", "command", "partial", "ok", "jobs", "cpus", "total_seconds", "versions",
            "cross_check")} | {"solvers": (doc.get("summary") or {}).get("solvers")},
        "summary": {"items": counts, "ledger": verdicts, "claims": len(ledger),
                    "evidence_from_cache": sorted(i for i, s in states.items() if s.get("source") == "cache"),
                    "stale_records": sorted(i for i, s in states.items() if s["record"] is not None and s["stale"])},
        "problems": problems,
        "sections": secs,
        "graph": graph,
        "ledger": ledger,
    }
