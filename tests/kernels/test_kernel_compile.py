"""Every attention kernel compiles for sm_90 on this CPU machine (tests/support/kernel_compile.py): the
Triton kernels in fp32/bf16/fp16 and their feature variants, the Gluon forward, and the Gluon backward
(Hq = Hkv, GQA and a GQA group split over CTAs; any row-view layout: runtime arguments; deterministic or
not) with its dQ by TMA
bulk reduce-add and its register split (checked in the PTX). Slow (about 3-5 min from a cold Triton cache)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "kernel_compile.py"
#: 4 Triton kernels x 3 dtypes x their variants (39), 16 Gluon forwards (2 dtypes x causal or not x d = 64 and
#: 128 x dense or block-sparse), 48 dense Gluon backwards (2 dtypes x causal or not x G = 1, GQA and a split
#: GQA group x deterministic or not x d = 64 and 128) and 16 block-sparse ones (2 dtypes x causal or not x
#: G = 1 and GQA x d = 64 and 128), 2 walk-list kernels
MINIMUM = 121


@pytest.mark.slow
def test_kernels_compile_to_sm90_cubins():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compiled, not interpreted
    r = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = re.search(r"compiled (\d+) of (\d+)", r.stdout)
    assert m and m.group(1) == m.group(2) and int(m.group(2)) >= MINIMUM, r.stdout[-2000:]
