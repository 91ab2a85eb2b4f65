"""Content hashes and the result cache.

An obligation's hash covers: its id and kind, the bounds in force, whether the second solver
cross-checks it, the source of its module and of every ``flashproof.proofs`` module that module uses
(transitively), every source file of ``flashproof.verified`` (the reference it runs), the engine's
``core``, ``smt`` and ``second`` modules, and the versions of Python, z3, sympy, cvc5 and Bitwuzla,
each file under its module name. A control also hashes the obligation it
mutates. Change any of these and the cached
result is stale, so the obligation runs again.

Only definitive results (``proved``/``refuted``) are cached; ``unknown``, ``timeout`` and ``error``
always run again. Cache entries are JSON files ``<dir>/<hash>.json``.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import types
from pathlib import Path

__all__ = ["versions", "content_hash", "load", "store", "load_timings", "store_timings", "DEFAULT_DIR"]

DEFAULT_DIR = Path(".prove-cache")


def versions() -> dict:
    """The checker versions recorded in every result and mixed into every hash."""
    out = {"python": platform.python_version()}
    try:
        import z3

        out["z3"] = z3.get_version_string()
    except ImportError:
        out["z3"] = None
    try:
        import sympy

        out["sympy"] = sympy.__version__
    except ImportError:
        out["sympy"] = None
    from .second import versions as second_versions

    out.update(second_versions())
    return out


def _module_file(name: str) -> str | None:
    mod = sys.modules.get(name)
    f = getattr(mod, "__file__", None)
    return f if f and f.endswith(".py") else None


def _proof_deps(modname: str, seen: set) -> None:
    """Add ``modname`` and the ``flashproof.proofs``/``flashproof.spec`` modules it references, and the
    ``flashproof.kernels`` modules whose code it runs (the kernel index obligations)."""
    if modname in seen or modname not in sys.modules:
        return
    seen.add(modname)
    for val in vars(sys.modules[modname]).values():
        if isinstance(val, types.ModuleType):
            dep = val.__name__
        else:
            dep = getattr(val, "__module__", None)
        if isinstance(dep, str) and dep.startswith(("flashproof.proofs", "flashproof.spec", "flashproof.kernels")):
            _proof_deps(dep, seen)


def _reference_files() -> dict[str, str]:
    """module name -> file of every source file of ``flashproof.verified``."""
    import flashproof.verified as ver

    root = Path(ver.__file__).parent
    return {f"{ver.__name__}.{p.stem}": str(p) for p in sorted(root.glob("*.py"))}


def content_hash(ob, *, bounds: dict, base=None, cross_check: bool = False) -> str:
    """sha256 (hex) of everything the result of ``ob`` depends on; ``base`` is the mutated
    obligation when ``ob`` is a control; ``cross_check``: whether the second solver runs."""
    from . import second, smt  # noqa: F401 — loaded, so their files are always part of the hash

    mods: set = set()
    for o in (ob, base):
        if o is not None:
            _proof_deps(o.module, mods)
    mods.update(("flashproof.proofs.engine.core", "flashproof.proofs.engine.smt", "flashproof.proofs.engine.second"))
    files = {m: f for m, f in ((m, _module_file(m)) for m in mods) if f} | _reference_files()
    h = hashlib.sha256()
    h.update(json.dumps({"id": ob.id, "expected": ob.expected, "of": ob.of, "bounds": bounds,
                         "versions": versions(), **({"cross_check": True} if cross_check else {})},
                        sort_keys=True, default=str).encode())
    for name in sorted(files):  # by module name: two rooms may each hold a file of the same name
        h.update(name.encode() + b"\0")
        h.update(Path(files[name]).read_bytes())
    return h.hexdigest()


def load(cache_dir: Path, key: str) -> dict | None:
    p = Path(cache_dir) / f"{key}.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def store(cache_dir: Path, key: str, record: dict) -> None:
    if record.get("status") not in ("proved", "refuted"):
        return
    d = Path(cache_dir)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{key}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, sort_keys=True, default=str))
    tmp.replace(d / f"{key}.json")


def load_timings(cache_dir: Path) -> dict:
    """id -> seconds of its last run (used only to schedule the longest obligations first)."""
    try:
        return json.loads((Path(cache_dir) / "timings.json").read_text())
    except (OSError, ValueError):
        return {}


def store_timings(cache_dir: Path, seconds: dict) -> None:
    d = Path(cache_dir)
    d.mkdir(parents=True, exist_ok=True)
    t = load_timings(d)
    t.update(seconds)
    tmp = d / f".timings.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(t, sort_keys=True))
    tmp.replace(d / "timings.json")
