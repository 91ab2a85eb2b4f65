"""`flashproof fuzz --kernel triton` on a CPU, as a user runs it (a fresh process, not pytest's, so
tests/conftest.py's set-up does not help): the CLI itself must make the interpreter usable."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")


def test_triton_target_runs_under_the_interpreter_from_the_cli(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-m", "flashproof", "fuzz", "--kernel", "triton", "--budget", "2",
                        "--dtype", "fp32", "--seed", "1", "--json", str(tmp_path / "f.json")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "InterpreterError" not in r.stdout + r.stderr
