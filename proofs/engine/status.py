"""Derived status and the name check (leanblueprint style: computed, never typed in).

* An obligation record is **ok** when an obligation is ``proved``, or a control is ``refuted``
  with a concrete counterexample.
* An item is ``checked`` when it has at least one obligation and every one of them is ok;
  ``fully-checked`` when it is checked and every item it ``uses`` is fully checked (assumptions
  are leaves: they are listed, not checked); ``failed`` when some obligation of it is not ok;
  ``unchecked`` when nothing checks it; assumptions are ``assumed``.
* The name check lists every dangling reference: a ``checked_by`` id that is not a real
  obligation, a ``uses``/``assumptions`` id that is not an item, an obligation's ``checks`` that
  disagrees with the items' ``checked_by``, a control of a missing obligation, and an obligation
  without any control (a check that cannot fail is a defect).
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

__all__ = ["record_ok", "name_errors", "ItemStatus", "derive", "transitive_assumptions", "ItemScope", "evidence",
           "derive_scope", "item_trust", "scope_label"]


def record_ok(rec: dict) -> bool:
    """The success rule for one result record (dict with ``status``, ``expected``, ``counterexample``):
    an obligation ``proved``, a control ``refuted`` with a counterexample, and in both cases no
    second solver contradicting z3 on any query (``disagreements``)."""
    if rec.get("disagreements"):
        return False
    if rec["expected"] == "proved":
        return rec["status"] == "proved"
    return rec["status"] == "refuted" and rec.get("counterexample") not in (None, {}, [])


def name_errors(items: dict, obligations: dict) -> list[str]:
    """Every dangling or inconsistent name, as one message each (empty list: all names resolve)."""
    errs = []
    controls_of: dict[str, list] = {}
    for ob in obligations.values():
        if ob.of is not None:
            controls_of.setdefault(ob.of, []).append(ob.id)
            if ob.of not in obligations or obligations[ob.of].of is not None:
                errs.append(f"control {ob.id}: 'of' names {ob.of!r}, which is not an obligation")
    for it in items.values():
        for oid in it.checked_by:
            if oid not in obligations:
                errs.append(f"item {it.id}: checked_by names {oid!r}, which is not a registered obligation")
            elif obligations[oid].of is not None:
                errs.append(f"item {it.id}: checked_by names the control {oid!r}; list obligations only")
            elif it.id not in obligations[oid].checks:
                errs.append(f"item {it.id}: checked_by names {oid!r}, but that obligation's checks omit {it.id}")
        for field in ("uses", "assumptions"):
            for ref in getattr(it, field):
                if ref not in items:
                    errs.append(f"item {it.id}: {field} names {ref!r}, which is not a registered item")
                elif field == "assumptions" and items[ref].kind != "assumption":
                    errs.append(f"item {it.id}: assumptions names {ref!r}, which is a {items[ref].kind}")
    for ob in obligations.values():
        if ob.of is not None:
            continue
        if not ob.checks:
            errs.append(f"obligation {ob.id}: checks no item")
        for iid in ob.checks:
            if iid not in items:
                errs.append(f"obligation {ob.id}: checks {iid!r}, which is not a registered item")
            elif ob.id not in items[iid].checked_by:
                errs.append(f"obligation {ob.id}: checks {iid}, but {iid}.checked_by does not list it")
        for a in ob.assumptions:
            if a not in items or items[a].kind != "assumption":
                errs.append(f"obligation {ob.id}: assumption {a!r} is not a registered assumption")
        if not controls_of.get(ob.id):
            errs.append(f"obligation {ob.id}: has no negative control")
    return sorted(errs)


class ItemStatus(NamedTuple):
    """Derived status of one item: ``status`` in assumed/unchecked/failed/checked/fully-checked;
    ``failing`` obligation ids not ok; ``missing`` obligation ids without a record."""

    status: str
    failing: tuple
    missing: tuple


def derive(items: dict, records: Iterable[dict]) -> dict[str, ItemStatus]:
    """id -> ItemStatus from the result records (latest record per obligation id). An item is
    ``failed`` when one of its obligations is not proved OR one of their controls (records with
    ``of``) is not refuted with a counterexample; ``failing`` lists both kinds of id."""
    by_id = {r["obligation"]: r for r in records}
    controls = sorted(c for c, r in by_id.items() if r.get("of") is not None and not record_ok(r))
    local: dict[str, ItemStatus] = {}
    for it in items.values():
        if it.kind == "assumption":
            local[it.id] = ItemStatus("assumed", (), ())
            continue
        if not it.checked_by:
            local[it.id] = ItemStatus("unchecked", (), ())
            continue
        missing = tuple(o for o in it.checked_by if o not in by_id)
        failing = tuple(o for o in it.checked_by if o in by_id and not record_ok(by_id[o]))
        # a control its checker did not refute means the checker cannot see that bug: the item fails too
        failing += tuple(c for c in controls if by_id[c].get("of") in it.checked_by)
        st = "failed" if failing else ("unchecked" if missing else "checked")
        local[it.id] = ItemStatus(st, failing, missing)

    full: dict[str, bool] = {}

    def fully(iid: str, stack: tuple = ()) -> bool:
        if iid in full:
            return full[iid]
        if iid not in items or iid in stack:
            return False  # dangling or cyclic: never fully checked
        it = items[iid]
        if it.kind == "assumption":
            res = True
        else:
            res = local[iid].status == "checked" and all(fully(u, stack + (iid,)) for u in it.uses)
        full[iid] = res
        return res

    out = {}
    for iid, st in local.items():
        if st.status == "checked" and fully(iid):
            st = st._replace(status="fully-checked")
        out[iid] = st
    return out


def transitive_assumptions(items: dict, obligations: dict, iid: str) -> list[str]:
    """Every assumption item ``iid`` rests on: its own, its obligations', and those of every
    item it uses, transitively (Lean's ``#print axioms``)."""
    seen, out, todo = set(), set(), [iid]
    while todo:
        cur = todo.pop()
        if cur in seen or cur not in items:
            continue
        seen.add(cur)
        it = items[cur]
        out.update(it.assumptions)
        for oid in it.checked_by:
            if oid in obligations:
                out.update(obligations[oid].assumptions)
        todo.extend(it.uses)
    return sorted(out)


class ItemScope(NamedTuple):
    """Derived scope of one item (the issue's rule, on its own checks). ``scope``: "unbounded" only
    if every obligation that carries its evidence is unbounded — its ``proof`` obligations, or its
    cross-checks when it has none — else "bounded"; "—" for assumptions and items nothing checks.
    ``bounded_by``: those evidence obligations that are bounded. ``with_uses``: the same rule applied
    also to every item it uses, transitively (what a reader of the whole chain gets);
    ``bounded_via``: the bounded evidence obligations of the items it uses."""

    scope: str
    bounded_by: tuple
    with_uses: str
    bounded_via: tuple


def evidence(it, obligations: dict) -> list:
    """The obligations whose scope decides an item's: its ``proof`` obligations, or its
    cross-checks when it has no proof obligation (registered ones only)."""
    obs = [obligations[o] for o in it.checked_by if o in obligations]
    proofs = [o for o in obs if o.role == "proof"]
    return proofs or obs


def derive_scope(items: dict, obligations: dict) -> dict[str, ItemScope]:
    """id -> ItemScope from the registration (scope is a property of the checks, not of a run)."""
    own: dict[str, tuple] = {}
    for iid, it in items.items():
        if it.kind == "assumption" or not it.checked_by:
            own[iid] = ("—", ())
            continue
        ev = evidence(it, obligations)
        bounded = tuple(sorted(o.id for o in ev if o.scope != "unbounded"))
        own[iid] = ("unbounded" if ev and not bounded else "bounded", bounded)
    memo: dict[str, frozenset] = {}

    def via(iid: str, stack: tuple = ()) -> frozenset:
        """Bounded evidence of the items ``iid`` uses, transitively (an unchecked used item counts
        by its own id)."""
        if iid in memo:
            return memo[iid]
        acc: set = set()
        for u in items[iid].uses if iid in items else ():
            if u not in items or u in stack:
                acc.add(u)
                continue
            usc, uby = own[u]
            if items[u].kind != "assumption":
                acc.update(uby if usc == "bounded" else ())
                if usc == "—":
                    acc.add(u)
            acc.update(via(u, stack + (iid,)))
        memo[iid] = frozenset(acc)
        return memo[iid]

    out = {}
    for iid in items:
        sc, by = own[iid]
        extra = tuple(sorted(via(iid) - set(by))) if sc != "—" else ()
        full = sc if sc == "—" else ("unbounded" if sc == "unbounded" and not extra else "bounded")
        out[iid] = ItemScope(sc, by, full, extra)
    return out


def item_trust(it, obligations: dict, records: dict) -> str:
    """The solver trust tier of an item's evidence (latest records by id): "one solver" if some
    evidence obligation or one of its controls made z3 queries without an agreeing second verdict
    on each, else "two solvers" if any made z3 queries, else "no SMT"; "—" when nothing ran."""
    ids = [o.id for o in evidence(it, obligations)]
    ids += [c.id for c in obligations.values() if c.of in ids]
    tiers = [records[i].get("trust") for i in ids if i in records]
    if not tiers:
        return "—"
    if "one solver" in tiers:
        return "one solver"
    return "two solvers" if "two solvers" in tiers else "no SMT"


def _size_name(key: str) -> bool:
    """A bound that is a problem size: a short name (n, d, v, b, k, V, dv) or ``n_…``."""
    return len(key) <= 3 or key.startswith("n_")


def scope_label(sc: ItemScope, obligations: dict) -> str:
    """Words for the status chip: "every n" for an unbounded item; for a bounded one "up to" the
    smallest numeric bound per size parameter over its bounded evidence (``n ≤ 3, b ≤ 4``; a grid
    counts by its largest size), or "on bounded instances" when those bounds are not sizes; "" for
    assumptions and unchecked items."""
    if sc.scope == "unbounded":
        return "every n"
    if sc.scope != "bounded":
        return ""
    least: dict = {}
    for oid in sc.bounded_by:
        ob = obligations.get(oid)
        for k, v in (ob.bounds.items() if ob else ()):
            if not _size_name(k):
                continue  # counts of cases or tables, formulas: listed with the obligation, not sizes
            if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v):
                v = max(v)  # a grid of sizes: checked up to its largest
            if isinstance(v, int) and not isinstance(v, bool):
                least[k] = min(v, least.get(k, v))
    if not least:
        return "on bounded instances"
    return "up to " + ", ".join(f"{k} ≤ {v}" for k, v in least.items())
