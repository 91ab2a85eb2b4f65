"""The block-sparse rows of ``flashproof bench --sparse``: the table ``bench.attention.sparse_table`` prints
and the curated form ``scripts/curate_gpu_run._sparse_row`` keeps (ratios computed from the medians, the
captured row only when the capture ran, its error otherwise). The timings themselves need a GPU."""
from __future__ import annotations

import importlib.util
import pathlib

from flashproof.bench.attention import sparse_table

ROW = {"d": 128, "n": 8192, "causal": False, "tiles_present": 0.1, "dense_ms": 6.0, "sparse_ms": 1.5,
       "dense_gpu_ms": 5.0, "sparse_gpu_ms": 0.75, "dense_graphed_ms": 6.0, "sparse_graphed_ms": 0.9}


def _curate():
    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "curate_gpu_run.py"
    spec = importlib.util.spec_from_file_location("curate_gpu_run", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_gives_eager_gpu_and_graphed_ratios():
    line = sparse_table([ROW]).splitlines()[2]
    assert line == "| 128 | 8192 | no | 0.100 | 6.000 | 1.500 | 0.250 | 0.150 | 6.000 | 0.900 | 0.150 |"


def test_table_names_a_failed_capture():
    row = {k: v for k, v in ROW.items() if "graphed" not in k} | {"graphed_error": "RuntimeError: capture"}
    assert sparse_table([row]).splitlines()[2].endswith("| - | - | RuntimeError: capture |")


def test_curated_row_keeps_the_ratios():
    cur = _curate()._sparse_row(ROW)
    assert (cur["ratio"], cur["gpu_time_ratio"], cur["graphed_ratio"]) == (0.25, 0.15, 0.15)
    bare = _curate()._sparse_row({k: v for k, v in ROW.items() if "graphed" not in k} | {"graphed_error": "x"})
    assert "graphed_ratio" not in bare and bare["graphed_error"] == "x"
