"""Imports flow one way: kernels/ never imports verified/ or proofs/; verified/ imports only the
standard library at module level (mpmath, sympy, z3 load inside the adapter that needs them)."""
import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module_level(tree):
    """Every node run at import time: the module body, including ``if``/``try``/``with`` blocks and
    class bodies, but not the bodies of functions (lazy imports inside an adapter are allowed)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def imports(path: Path, *, top_level_only: bool = False):
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = _module_level(tree) if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, 0
        elif isinstance(node, ast.ImportFrom):
            yield (node.module or ""), node.level


def resolved(path: Path, module: str, level: int) -> str:
    """The absolute module name of an import inside the package folder that holds ``path``."""
    if level == 0:
        return module
    folder = {"kernels": "flashproof.kernels", "verified": "flashproof.verified", "proofs": "flashproof.proofs",
              "spec": "flashproof.spec"}[path.relative_to(ROOT).parts[0]]
    parts = folder.split(".")[: len(folder.split(".")) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


@pytest.mark.parametrize("path", sorted((ROOT / "kernels").rglob("*.py")), ids=lambda p: p.name)
def test_kernels_never_import_the_reference_or_proofs(path):
    for module, level in imports(path):
        name = resolved(path, module, level)
        assert not name.startswith(("flashproof.verified", "flashproof.proofs", "verified", "proofs")), \
            f"{path.name} imports {name}"


@pytest.mark.parametrize("path", sorted((ROOT / "verified").rglob("*.py")), ids=lambda p: p.name)
def test_verified_imports_only_stdlib_at_module_level(path):
    for module, level in imports(path, top_level_only=True):
        if level:
            assert resolved(path, module, level).startswith("flashproof.verified"), module
        else:
            assert module.split(".")[0] in sys.stdlib_module_names | {"__future__"}, f"{path.name} imports {module}"


def test_the_checker_sees_a_planted_violation(tmp_path):
    bad = ROOT / "kernels" / "x.py"  # not written: we parse a string through the same helper
    src = tmp_path / "k.py"
    src.write_text("from ..verified import tiled_forward\nimport flashproof.proofs.engine.core\n")
    names = [resolved(bad, m, lvl) for m, lvl in imports(src)]
    assert names == ["flashproof.verified", "flashproof.proofs.engine.core"]


def test_module_level_includes_guarded_imports_but_not_function_bodies(tmp_path):
    src = tmp_path / "v.py"
    src.write_text("try:\n    import numpy\nexcept ImportError:\n    pass\nif True:\n    import torch\n"
                   "def f():\n    import z3\n")
    assert sorted(m for m, _ in imports(src, top_level_only=True)) == ["numpy", "torch"]


#: the only flashproof.kernels modules proofs/ may import: the Triton kernels whose integer index code
#: the KER-* obligations run symbolically (proofs/obligations/kernels/, proofs/mutants/kernels.py), and
#: the host module whose window clamp and block-size tables they read
PROOFS_MAY_IMPORT_FROM_KERNELS = frozenset({
    "flashproof.kernels.attention.triton.fwd", "flashproof.kernels.attention.triton.bwd",
    "flashproof.kernels.attention.triton.plan", "flashproof.kernels.attention.triton.host"})


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
