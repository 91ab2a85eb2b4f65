"""CI's run of the second solver: the whole of ``flashproof prove --cross-check`` (minutes on 2 cores,
which is why the quick ``make prove`` leaves it out — see docs/proofs.md). Every obligation proved,
every control refuted, no disagreement between z3 and the second solver, every control with z3
queries refuted by both, and at least 90 % of the records with z3 queries carrying an agreeing
second verdict on every query."""
from __future__ import annotations

import json
import subprocess
import sys


def test_full_prove_with_the_second_solver(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "flashproof.cli", "prove", "--cross-check", "--jobs", "2",
                           "--out", str(out), "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=1800)
    doc = json.loads((out / "audit.json").read_text())
    x = doc["summary"]["solvers"]
    report = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert doc["cross_check"] is True
    assert proc.returncode == 0 and doc["ok"], report
    assert x["disagreements"] == 0, report
    assert x["controls_refuted_by_both"] == x["z3_controls"], x
    assert x["agreement_rate"] >= 0.9, x
