"""flashproof/fuzz/interpreter_shim.py: Triton's interpreter made fit for the CPU checks.

* bf16 dots: Triton 3.6's interpreter multiplied the uint16 bit patterns it stores bf16 in (a bf16
  Triton kernel returned values ~1e8 on CPU); with the shim a bf16 dot of small integers is exact.
* ``bounds_checked()``: an interpreted load or store of an active lane outside every tensor argument
  raises; a strided view's padding counts as outside (a negative control for each direction).
* A fresh process (no tests/conftest.py) that calls ``examine`` on the Triton target, as the varlen
  report's reproducer did: the target applies the shim itself, so no InterpreterError (numpy >= 2.4's
  "only 0-dimensional arrays can be converted to Python scalars") is reported as a kernel error."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from flashproof.kernels.interpreter import interpreting

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
needs_interpreter = pytest.mark.skipif(not interpreting(), reason="the interpreter shim acts under TRITON_INTERPRET=1")

from flashproof.fuzz.interpreter_shim import OutOfBounds, bounds_checked  # noqa: E402


@triton.jit
def _dot16(A, B, C):
    """C (16, 16) fp32 = A (16, 16) @ B (16, 16), all contiguous."""
    i = tl.arange(0, 16)
    a = tl.load(A + i[:, None] * 16 + i[None, :])
    b = tl.load(B + i[:, None] * 16 + i[None, :])
    tl.store(C + i[:, None] * 16 + i[None, :], tl.dot(a, b, input_precision="ieee"))


@triton.jit
def _copy(X, Y, n, sx, BLOCK: tl.constexpr):
    """Y[i] = X[i · sx] for i < n (BLOCK lanes)."""
    o = tl.arange(0, BLOCK)
    tl.store(Y + o, tl.load(X + o * sx, mask=o < n), mask=o < n)


@triton.jit
def _bump(T, n, st, BLOCK: tl.constexpr):
    """T[i · st] += 1 for i < n, by atomics (the kvcache merge's tickets are atomics too)."""
    o = tl.arange(0, BLOCK)
    tl.atomic_add(T + o * st, 1, mask=o < n)


@triton.jit
def _swap(T, at):
    """One compare-and-swap at T[at] (0 -> 1)."""
    tl.atomic_cas(T + at, 0, 1)


@needs_interpreter
def test_bounds_checked_covers_atomics():
    t = torch.zeros(8, dtype=torch.int32)
    with bounds_checked():
        _bump[(1,)](t, 8, 1, BLOCK=16)
        _swap[(1,)](t, 7)
        assert t.tolist() == [1] * 8
        with pytest.raises(Exception, match="OutOfBounds.*atomic of 1 of 9 active lanes"):
            _bump[(1,)](t, 9, 1, BLOCK=16)   # one past the tensor
        with pytest.raises(Exception, match="OutOfBounds.*atomic of 1 of 1 active lanes"):
            _swap[(1,)](t, 8)
    _swap[(1,)](torch.zeros(16, dtype=torch.int32)[:8], 8)   # outside the block: not checked


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_dot_of_small_integers_is_exact(dtype):
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randint(-4, 5, (16, 16), generator=g).to(dtype) for _ in range(2))
    c = torch.empty(16, 16)
    _dot16[(1,)](a, b, c)
    assert torch.equal(c, a.double() @ b.double())  # |sums| <= 256: exact in fp32


@needs_interpreter
def test_bounds_checked_passes_legal_accesses_and_catches_stray_ones():
    base = torch.arange(16.0)
    x = base[::2]  # a strided view: its odd neighbours are storage, not elements
    y = torch.zeros(8)
    with bounds_checked():
        _copy[(1,)](x, y, 8, 2, BLOCK=16)
        assert torch.equal(y, x)
        with pytest.raises(Exception, match="OutOfBounds.*load of 1 of 9 active lanes"):
            _copy[(1,)](x, torch.zeros(9), 9, 2, BLOCK=16)  # reads one element past the view (inside storage)
        with pytest.raises(Exception, match="OutOfBounds.*load of 4 of 8 active lanes"):
            _copy[(1,)](x, y, 8, 1, BLOCK=16)  # unit stride on a stride-2 view: the padding between elements
        with pytest.raises(Exception, match="OutOfBounds.*store of 1 of 9"):
            _copy[(1,)](torch.arange(9.0), y, 9, 1, BLOCK=16)  # writes past y
    _copy[(1,)](torch.arange(9.0), torch.zeros(16)[:8], 9, 1, BLOCK=16)  # outside the block: not checked
    assert issubclass(OutOfBounds, RuntimeError)


def test_examine_in_a_fresh_process_applies_the_shim(tmp_path):
    """The varlen report's CPU reproducer: programmatic ``examine`` without tests/conftest.py."""
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent("""
        from flashproof.fuzz.problem import ProblemSpec
        from flashproof.fuzz.checks import examine
        from flashproof.fuzz import targets
        spec = ProblemSpec(heads_q=3, n_q=5, n_k=20, d=16, dv=8, seqlens=((1, 1), (0, 18), (4, 1)), block=16,
                           empty_rows=True, poison='inf', noncontig=True, seed=7)
        ex = examine(targets.get("triton"), spec, "bf16", "cpu", checks=["forward"], determinism_runs=0)
        print("DEVIATIONS", [d.note or d.reason for d in ex.deviations], "VERDICTS", len(ex.verdicts))
    """))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "DEVIATIONS [] VERDICTS 2" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


@needs_interpreter
def test_bounds_checked_takes_the_descriptor_path_and_poisoned_views(monkeypatch):
    """The attention kernels' TMA descriptor loads (dense problems) and poisoned strided views run clean
    under the bounds check (a descriptor's zero fill is a masked load, the views' padding is never read)."""
    from flashproof.fuzz import targets
    from flashproof.fuzz.checks import examine
    from flashproof.fuzz.problem import ProblemSpec
    from flashproof.kernels.attention.triton import host
    spec = ProblemSpec(heads_q=2, heads_kv=1, n_q=33, n_k=20, d=16, dv=32, mask_kind="block_sparse", block=16,
                       empty_rows=True, poison="nan", noncontig=True, seed=4)
    seen = []
    real = host._descriptors

    def spy(prob, *ts):
        out = real(prob, *ts)
        seen.append(out is not None)
        return out
    monkeypatch.setattr(host, "_descriptors", spy)
    with bounds_checked():
        ex = examine(targets.get("triton"), spec, "fp16", "cpu", checks=("forward", "gradients"), determinism_runs=0)
    assert seen and all(seen)  # every launch took descriptors
    assert len(ex.verdicts) == 5 and not ex.deviations, [d.reproducer() for d in ex.deviations]
