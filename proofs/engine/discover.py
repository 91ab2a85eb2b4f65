"""Find and import the obligation modules: every module under ``flashproof.proofs.obligations``.

The package is the registry: a module placed under ``proofs/obligations/`` is an obligation module,
and nothing outside it is imported as one. A module there that fails to import, or that imports but
registers no obligation (a helper put in the wrong room), becomes an import error of the run, so a
broken or misplaced area fails ``flashproof prove`` rather than vanishing.

    collect() -> (id -> Obligation with controls resolved, module name -> error text)
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import traceback

from . import core
from .core import Obligation, resolve_control

__all__ = ["PACKAGE", "obligation_modules", "collect"]

PACKAGE = "flashproof.proofs.obligations"


def _walk(paths, prefix: str) -> list[str]:
    names = []
    for m in pkgutil.iter_modules(paths):
        name = f"{prefix}.{m.name}"
        if m.ispkg:
            names += _walk([os.path.join(p, m.name) for p in paths], name)
        else:
            names.append(name)
    return names


def obligation_modules() -> list[str]:
    """Dotted names of every (non-package) module under ``flashproof.proofs.obligations``, sorted.
    Found on disk (no import), so a module that fails to import is still listed."""
    pkg = importlib.import_module(PACKAGE)
    return sorted(_walk(list(pkg.__path__), PACKAGE))


def collect() -> tuple[dict[str, Obligation], dict[str, str]]:
    """Import every obligation module; return (id -> Obligation, module -> import error text)."""
    errors = {}
    for name in obligation_modules():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 — reported as an error record, never swallowed
            errors[name] = traceback.format_exc(limit=3)
            continue
        if not any(ob.module == name for ob in core.OBLIGATIONS.values()):
            errors[name] = (f"{name} is under {PACKAGE} but registers no obligation; expected every module "
                            "there to register one (shared helpers belong in flashproof.proofs.support)")
    return {k: resolve_control(v) for k, v in core.OBLIGATIONS.items()}, errors
