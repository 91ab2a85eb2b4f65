"""The one place in ``flashproof.kernels`` that reads the environment: whether Triton runs its kernels
in the interpreter (``TRITON_INTERPRET=1``, CI and CPU runs). Triton itself decides that when it is
imported; the dispatchers read this function so that a CPU tensor is routed to a Triton kernel only
when the interpreter will really run it.

``interpreter_fixes()`` makes Triton 3.6's interpreter compute what the compiled kernels compute on a GPU;
every module that launches Triton kernels calls it at import. Without it the product's own Triton paths
are wrong on CPU: a runtime loop bound (a scalar that the interpreter holds as a shape-(1,) numpy array)
becomes an int through ``int(array)``, which numpy >= 2.4 refuses ("only 0-dimensional arrays can be
converted to Python scalars"), and ``tl.dot`` multiplies bf16 operands as the uint16 bit patterns the
interpreter stores them in (a bf16 attention forward returned values ~1e8). The fixes: index a loop bound
through its one element; widen bf16 dot operands to fp32 first (exact, so the products are exact as on the
tensor cores, and they accumulate in the accumulator's dtype). Idempotent; a no-op when Triton does not
interpret (or is not installed). The fuzz harness's bounds checking (``flashproof.fuzz.interpreter_shim``)
builds on these and is not product code."""
from __future__ import annotations

import os

#: set on Triton's interpreter module once ``interpreter_fixes`` patched it (its own flag: the harness's
#: bounds hooks keep theirs, so neither one's import order disables the other)
FIXED = "_flashproof_fixes"


def interpreting() -> bool:
    """True when Triton kernels run on the CPU through the interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def interpreter_fixes() -> None:
    """Patch Triton's interpreter once (module docstring) when it interprets; else nothing."""
    if not interpreting():
        return
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - the Triton paths are not importable either
        return
    if getattr(interpreter, FIXED, False):
        return
    _loop_bounds(interpreter)
    _bf16_dot(interpreter)
    setattr(interpreter, FIXED, True)


def _loop_bounds(interpreter) -> None:
    patch = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
    interpreter._patch_lang_tensor = patched


def _bf16_dot(interpreter) -> None:
    import triton.language as tl

    builder = interpreter.InterpreterBuilder
    dot = builder.create_dot

    def widen(h):
        if h.dtype.scalar != tl.bfloat16:
            return h
        data = interpreter._convert_float(h.data, tl.bfloat16, tl.float32, None).view("float32")
        return interpreter.TensorHandle(data.reshape(h.data.shape), tl.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)
    builder.create_dot = create_dot
