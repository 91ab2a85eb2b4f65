"""Imports flow one way: kernels/ never imports verified/ or proofs/ — statically or dynamically
(``importlib.import_module("...")``, ``__import__("...")`` with a string literal); verified/ imports only
the standard library at module level (mpmath, sympy, z3 load inside the adapter that needs them)."""
import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"kernels": "flashproof.kernels", "verified": "flashproof.verified", "proofs": "flashproof.proofs",
           "spec": "flashproof.spec", "bench": "flashproof.bench", "flashproof": "flashproof"}
FORBIDDEN_IN_KERNELS = ("flashproof.verified", "flashproof.proofs", "verified", "proofs")


def _module_level(tree):
    """Every node run at import time: the module body, including ``if``/``try``/``with`` blocks and
    class bodies, but not the bodies of functions (lazy imports inside an adapter are allowed)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _dynamic(node):
    """(module, level) of ``importlib.import_module("m"[, "pkg"])`` / ``import_module(...)`` /
    ``__import__("m")`` with a literal name; a relative name ("..x") counts its leading dots."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name not in ("import_module", "__import__") or not isinstance(node.args[0].value, str):
        return None
    target = node.args[0].value
    level = len(target) - len(target.lstrip(".")) if name == "import_module" else 0
    return target.lstrip("."), level


def imports(path: Path, *, top_level_only: bool = False):
    """(module, level) of every import in ``path``: statements and dynamic imports by literal name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = _module_level(tree) if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, 0
        elif isinstance(node, ast.ImportFrom):
            yield (node.module or ""), node.level
        elif (dyn := _dynamic(node)) is not None:
            yield dyn


def resolved(path: Path, module: str, level: int) -> str:
    """The absolute module name of an import inside the package folder that holds ``path``."""
    if level == 0:
        return module
    rel = path.relative_to(ROOT)
    pkg = FOLDERS[rel.parts[0]].split(".") + list(rel.parts[1:-1])
    parts = pkg[: len(pkg) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def violations(path: Path) -> list:
    return [name for name in (resolved(path, m, lvl) for m, lvl in imports(path))
            if name.startswith(FORBIDDEN_IN_KERNELS)]


@pytest.mark.parametrize("path", sorted((ROOT / "kernels").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_kernels_never_import_the_reference_or_proofs(path):
    assert not violations(path), f"{path.relative_to(ROOT)} imports {violations(path)}"


@pytest.mark.parametrize("path", sorted((ROOT / "verified").rglob("*.py")), ids=lambda p: p.name)
def test_verified_imports_only_stdlib_at_module_level(path):
    for module, level in imports(path, top_level_only=True):
        if level:
            assert resolved(path, module, level).startswith("flashproof.verified"), module
        else:
            assert module.split(".")[0] in sys.stdlib_module_names | {"__future__"}, f"{path.name} imports {module}"


def test_the_checker_sees_planted_violations(tmp_path):
    """Static, relative, ``importlib.import_module`` (absolute and relative to the package) and
    ``__import__`` imports of the reference or the proofs, planted in a file placed under kernels/."""
    planted = ROOT / "kernels" / "attention" / "planted.py"  # never written: its text is parsed from tmp_path
    src = tmp_path / "planted.py"
    src.write_text("import importlib\n"
                   "from ...verified import tiled_forward\n"
                   "import flashproof.proofs.core\n"
                   "def f():\n"
                   "    importlib.import_module('flashproof.verified.attention')\n"
                   "    importlib.import_module('...proofs.run', __package__)\n"
                   "    __import__('flashproof.proofs')\n"
                   "    importlib.import_module('.torch', __package__)\n")
    names = [resolved(planted, m, lvl) for m, lvl in imports(src)]
    assert sorted(n for n in names if n.startswith(FORBIDDEN_IN_KERNELS)) == sorted([
        "flashproof.verified", "flashproof.proofs.core", "flashproof.verified.attention", "flashproof.proofs.run",
        "flashproof.proofs"])
    assert "flashproof.kernels.attention.torch" in names  # a dynamic import inside kernels/ is resolved, not flagged


def _opaque_dynamic_imports(path: Path) -> list:
    """Lines of ``import_module(...)`` / ``__import__(...)`` calls whose module is not a literal string
    (which no static reading can follow)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in ("import_module", "__import__") and _dynamic(node) is None:
                out.append(node.lineno)
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "kernels").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_kernels_import_nothing_by_computed_name(path):
    assert not _opaque_dynamic_imports(path), f"{path.relative_to(ROOT)}: import by a computed name"


def test_the_checker_sees_a_computed_import_name(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("import importlib\nNAME = 'flashproof.' + 'verified'\nimportlib.import_module(NAME)\n__import__(NAME)\n")
    assert _opaque_dynamic_imports(src) == [3, 4]


def test_module_level_includes_guarded_imports_but_not_function_bodies(tmp_path):
    src = tmp_path / "v.py"
    src.write_text("try:\n    import numpy\nexcept ImportError:\n    pass\nif True:\n    import torch\n"
                   "def f():\n    import z3\n")
    assert sorted(m for m, _ in imports(src, top_level_only=True)) == ["numpy", "torch"]


#: the only flashproof.kernels modules proofs/ may import, each for the index or schedule code the
#: obligations run symbolically: the Triton kernels and their host (window clamp, block-size tables) for
#: KER-* (proofs/obligations/kernels/, proofs/mutants/kernels.py; the GQA backward's partial-sum kernel for
#: KER-BOUNDS-PSUM and the Gluon backward host's stand-in for it), the Gluon kernels, their hosts and row
#: views and the persistent forward's schedule type for KER-BOUNDS-GLUON-*, the KV-cache split plan (EXT-SPLIT-KV) and the ring schedule (RING-*)
PROOFS_MAY_IMPORT_FROM_KERNELS = frozenset({
    "flashproof.kernels.attention.triton.fwd", "flashproof.kernels.attention.triton.bwd",
    "flashproof.kernels.attention.triton.plan", "flashproof.kernels.attention.triton.host",
    "flashproof.kernels.attention.triton.partials",
    "flashproof.kernels.attention.gluon.fwd", "flashproof.kernels.attention.gluon.bwd",
    "flashproof.kernels.attention.gluon.common", "flashproof.kernels.attention.gluon.layout",
    "flashproof.kernels.attention.gluon.schedule", "flashproof.kernels.kvcache.plan", "flashproof.kernels.distributed.schedule"})


def _kernels_imports(path):
    """The flashproof.kernels modules ``path`` imports (``from X import a, b`` names X.a, X.b when those
    are submodules of the allowed set, else X)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("flashproof.kernels")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flashproof.kernels"):
            subs = [f"{node.module}.{a.name}" for a in node.names]
            out += subs if all(s in PROOFS_MAY_IMPORT_FROM_KERNELS for s in subs) else [node.module]
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "proofs").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_proofs_import_only_the_kernels_index_modules(path):
    for name in _kernels_imports(path):
        assert name in PROOFS_MAY_IMPORT_FROM_KERNELS, f"{path.name} imports {name}"


def test_the_kernels_allowance_sees_a_planted_violation(tmp_path):
    src = tmp_path / "p.py"
    src.write_text("from flashproof.kernels.attention.triton import fwd, host\nfrom flashproof.kernels import attention\n"
                   "import flashproof.kernels.attention.api\n")
    assert _kernels_imports(src) == ["flashproof.kernels.attention.triton.fwd", "flashproof.kernels.attention.triton.host",
                                     "flashproof.kernels", "flashproof.kernels.attention.api"]
