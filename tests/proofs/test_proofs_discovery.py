"""Discovery by package: every module under the obligations package is imported as an obligation
module, a module there that registers nothing or fails to import is an error, and nothing outside
the package is imported as one."""
from __future__ import annotations

import sys

import pytest

from flashproof.proofs.engine import core, discover


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A throw-away obligations package ``fp_disc`` (a good module, a helper in the wrong room, a
    module that fails to import, a nested area) with its own empty registry."""
    root = tmp_path / "fp_disc"
    (root / "area").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "area" / "__init__.py").write_text("")
    reg = "from flashproof.proofs.engine.core import Outcome, obligation\n"
    (root / "good.py").write_text(reg + "@obligation('DISC-GOOD', checks=['I'])\ndef good(ctx):\n"
                                        "    return Outcome('proved')\n")
    (root / "area" / "nested.py").write_text(reg + "@obligation('DISC-NESTED', checks=['I'])\ndef nested(ctx):\n"
                                                   "    return Outcome('proved')\n")
    (root / "helper.py").write_text("TABLE = [1, 2, 3]\n")
    (root / "broken.py").write_text("import a_module_that_does_not_exist\n")
    (tmp_path / "fp_disc_outside.py").write_text("raise AssertionError('imported although outside the package')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(discover, "PACKAGE", "fp_disc")
    monkeypatch.setattr(core, "OBLIGATIONS", {})
    yield root
    for name in [m for m in sys.modules if m.startswith("fp_disc")]:
        del sys.modules[name]


def test_every_module_under_the_package_is_listed_nested_ones_included(fake_package):
    assert discover.obligation_modules() == ["fp_disc.area.nested", "fp_disc.broken", "fp_disc.good",
                                              "fp_disc.helper"]


def test_a_helper_or_a_broken_module_in_the_package_is_an_error(fake_package):
    obs, errs = discover.collect()
    assert sorted(obs) == ["DISC-GOOD", "DISC-NESTED"]
    assert sorted(errs) == ["fp_disc.broken", "fp_disc.helper"]
    assert "registers no obligation" in errs["fp_disc.helper"]
    assert "ModuleNotFoundError" in errs["fp_disc.broken"]
    assert "fp_disc_outside" not in sys.modules


def test_the_real_package_imports_cleanly_and_every_module_registers():
    obs, errs = discover.collect()
    assert errs == {}
    mods = discover.obligation_modules()
    assert {o.module for o in obs.values()} >= set(mods)
    assert all(m.startswith("flashproof.proofs.obligations.") for m in mods)
