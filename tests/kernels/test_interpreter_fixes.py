"""kernels/interpreter.py's ``interpreter_fixes``: the product's Triton paths compute under TRITON_INTERPRET=1
what they compute on a GPU, without the fuzz harness, and no import order leaves the harness's bounds hooks
out. Each check runs in a fresh process (no tests/conftest.py, which applies the harness first).

Before the fixes lived in the product: ``attention(backend="triton")`` raised numpy >= 2.4's "only
0-dimensional arrays can be converted to Python scalars" on CPU, its bf16 forward returned values ~1e8
once the kvcache module's own loop-bound patch had run, ``attention_with_kvcache(backend="triton")`` with
the default tuning raised "0 active drivers" (the autotuner timed its candidates), and importing the
kvcache kernels before the harness's ``apply()`` left both the bf16 dot fix and the bounds hooks out."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(tmp_path, body: str) -> str:
    script = tmp_path / "fresh.py"
    script.write_text(f"import sys\nsys.path.insert(0, {ROOT!r})\n" + textwrap.dedent(body))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_the_product_alone_runs_bf16_attention_and_kvcache_on_the_interpreter(tmp_path):
    """bf16 attention forward + backward (Triton) and a split KV-cache call with the default tuning, judged
    by the tests' one checker (the oracle and the tolerance rule), the harness never applied."""
    out = _run(tmp_path, """
        import torch
        from triton.runtime import interpreter
        import flashproof.kernels.kvcache.triton          # the kvcache kernels first, as a user's import may be
        from flashproof.kernels import attention_with_kvcache
        from tests.support.kernel_cases import CASES, check_case
        from tests.support import kvcache_problems as kvp
        assert not getattr(interpreter, "_flashproof_bounds_hooks", False), "the harness was applied"
        case = next(c for c in CASES if c.id == "causal_square")
        check_case(case, torch.bfloat16, "triton")
        p = kvp.make(lengths=[0, 1, 17, 40], heads_q=4, heads_kv=2, n_q=2, dtype=torch.bfloat16, seed=3)
        bad = kvp.failures(kvp.verdicts(p, kvp.run(p, backend="triton", num_splits=5, tuning="autotune")))
        assert not bad, bad
        assert not getattr(interpreter, "_flashproof_bounds_hooks", False), "the harness was applied"
        print("FRESH OK")
    """)
    assert "FRESH OK" in out


def test_importing_a_kernel_module_first_keeps_the_bounds_hooks(tmp_path):
    """The harness's ``bounds_checked`` still catches a stray load after a kernel module patched the
    interpreter first (the negative control: the same kernel with legal strides passes)."""
    out = _run(tmp_path, """
        import torch, triton, triton.language as tl
        import flashproof.kernels.kvcache.triton          # applies the product's fixes (and once set the flag)
        from flashproof.fuzz.interpreter_shim import OutOfBounds, bounds_checked

        @triton.jit
        def copy(X, Y, n, sx, BLOCK: tl.constexpr):
            o = tl.arange(0, BLOCK)
            tl.store(Y + o, tl.load(X + o * sx, mask=o < n), mask=o < n)

        x = torch.arange(16.0)[::2]
        y = torch.zeros(8)
        with bounds_checked():
            copy[(1,)](x, y, 8, 2, BLOCK=16)
            assert torch.equal(y, x)
            try:
                copy[(1,)](x, y, 8, 1, BLOCK=16)       # unit stride on a stride-2 view: its padding
            except Exception as e:
                assert "OutOfBounds" in repr(e), repr(e)
                print("CAUGHT")
    """)
    assert "CAUGHT" in out
