"""The spec registry: theorem-page items, our extensions and the assumptions they rest on.

An item is data: a stable id, a kind, a title, the statement in our own words, where it comes
from, which items it ``uses``, which obligations (``checked_by``) check it and which assumptions
those checks rest on. Status is never stored here; ``flashproof.proofs.engine.status`` derives it from
the obligation results.

Adding items from another area needs no edit of this file: put them in a new submodule of
``flashproof.spec`` (e.g. ``spec/speculative.py``) that calls ``item(...)`` at import time.
``collect()`` imports every submodule of the package (pkgutil) and returns the full table.

    item("DEF-SUMMARY", "definition", "Stable summary of an attention key block",
         statement="...", source="004_b37f59f788102f1f.txt", provenance=("Literature-sourced",),
         uses=(), checked_by=("ATT-MERGE-ASSOC",), assumptions=("A-EXP-ISO",))
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import NamedTuple

__all__ = ["KINDS", "Item", "item", "assumption", "collect", "ITEMS"]

KINDS = ("definition", "algorithm", "theorem", "remark", "extension", "example", "assumption")


class Item(NamedTuple):
    """One registry entry. ``checked_by`` holds obligation ids; ``uses`` and ``assumptions`` hold
    item ids (an assumption is an item of kind ``assumption``)."""

    id: str
    kind: str
    title: str
    statement: str
    source: str
    provenance: tuple
    uses: tuple
    checked_by: tuple
    assumptions: tuple
    module: str


#: id -> Item, filled at import time by ``item``/``assumption``.
ITEMS: dict[str, Item] = {}


def item(id: str, kind: str, title: str, *, statement: str, source: str = "", provenance=(), uses=(),
         checked_by=(), assumptions=(), module: str | None = None) -> Item:
    """Register one item. Re-registering an id from a different module is an error (ids are stable
    and never reused); re-importing the same module is harmless."""
    if kind not in KINDS:
        raise ValueError(f"item {id!r}: kind must be one of {KINDS}, received {kind!r}")
    if not id or not isinstance(id, str):
        raise ValueError(f"item id must be a non-empty string, received {id!r}")
    for field, val in (("uses", uses), ("checked_by", checked_by), ("assumptions", assumptions),
                       ("provenance", provenance)):
        if isinstance(val, str):
            raise TypeError(f"item {id!r}: {field} must be a sequence of strings, received the string {val!r}")
    import inspect

    mod = module or inspect.getmodule(inspect.stack()[1].frame).__name__
    it = Item(id, kind, title, statement.strip(), source, tuple(provenance), tuple(uses), tuple(checked_by),
              tuple(assumptions), mod)
    old = ITEMS.get(id)
    if old is not None and old.module != mod:
        raise ValueError(f"item id {id!r} is registered twice: by {old.module} and by {mod}")
    ITEMS[id] = it
    return it


def assumption(id: str, title: str, *, statement: str, source: str = "", module: str | None = None) -> Item:
    """Register an assumption: an item of kind ``assumption`` that nothing checks (it is trusted,
    and the audit lists it per item, like Lean's ``#print axioms``)."""
    import inspect

    mod = module or inspect.getmodule(inspect.stack()[1].frame).__name__
    return item(id, "assumption", title, statement=statement, source=source, module=mod)


def collect() -> dict[str, Item]:
    """Import every submodule of ``flashproof.spec`` and return the full id -> Item table.

    A submodule that fails to import raises: a broken spec module must fail the run loudly."""
    import flashproof.spec as pkg

    order = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "registry":
            continue
        importlib.import_module(f"{pkg.__name__}.{info.name}")
        order.append(f"{pkg.__name__}.{info.name}")
    # a stable order whatever imported which spec module first (tests, tools): by module name, then
    # in each module's registration order
    rank = {m: k for k, m in enumerate(order)}
    return dict(sorted(ITEMS.items(), key=lambda kv: rank.get(kv[1].module, len(rank))))
