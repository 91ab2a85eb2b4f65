"""Ahead-of-time compile of every sampler kernel variant for sm_90 (the H200) on a machine without a GPU.

The interpreter (TRITON_INTERPRET=1, how CI runs the coupled tests) does not catch what only the compiler
rejects (loop-carried types, branches yielding values, pointer arithmetic); Triton's own ptxas does. The
compile (tests/support/sampler_compile.py) runs in a subprocess because the kernels must be imported
without the interpreter. The same subprocess route runs the compiled kernels on CUDA against the
reference (marked gpu)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "sampler_compile.py"


def _subprocess(*argv) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compiled kernels, not the interpreter
    r = subprocess.run([sys.executable, str(SCRIPT), *argv], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.gpu
def test_compiled_kernels_on_cuda_match_reference():
    """conftest sets TRITON_INTERPRET=1 without CUDA, under which even CUDA tensors would go through the
    interpreter; this runs the compiled kernels in a subprocess without it."""
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    out = _subprocess("cuda").split()
    assert out[0] == "cuda-coupled" and int(out[1]) == 44, out


def test_kernels_compile_for_sm90():
    pytest.importorskip("triton.backends.nvidia")
    sys.path.insert(0, str(SCRIPT.parent.parent))
    from support.sampler_compile import VARIANTS
    out = _subprocess()
    assert out.split() == ["compiled", str(2 * len(VARIANTS))], out
