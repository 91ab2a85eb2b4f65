"""The README's performance tables are generated from the newest curated run in benchmarks/."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "readme_tables.py"


def test_readme_tables_match_the_newest_curated_run():
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_check_fails_when_a_number_is_edited(tmp_path):
    readme = (ROOT / "README.md").read_text()
    begin = readme.index("<!-- benchmarks:begin")
    row = readme.index("| 128 |", begin)
    cell = readme.index(" / ", row) - 3  # the first 'ours' forward figure of the first row
    edited = readme[:cell] + "999" + readme[cell + 3:]
    assert edited != readme
    (tmp_path / "README.md").write_text(edited)
    r = subprocess.run([sys.executable, str(SCRIPT), "--check", "--readme", str(tmp_path / "README.md")],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr


def test_every_curated_run_names_date_gpu_versions_and_commit():
    files = sorted((ROOT / "benchmarks").glob("*.json"))
    assert files
    for f in files:
        doc = json.loads(f.read_text())
        for key in ("date", "gpu", "versions", "commit", "label"):
            assert doc.get(key), (f.name, key)
        assert doc["versions"].get("torch") and doc["versions"].get("triton"), f.name


def _load_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_cell_shows_the_figures_unless_the_row_failed():
    cell = _load_script()._cell
    assert cell({"fwd_tflops": 600.4, "bwd_tflops": 540.6, "note": "plan gluon/gluon "}) == "600 / 541"
    assert cell({"fwd_tflops": float("nan"), "bwd_tflops": float("nan"), "note": "unsupported: d = 256"}) == "unsupported: d = 256"
    assert cell({"fwd_tflops": 600.0, "bwd_tflops": 540.0, "note": "WRONG: error 0.5 vs sdpa-flash 0.001; "}).startswith("WRONG")
    assert cell(None) == "—"
