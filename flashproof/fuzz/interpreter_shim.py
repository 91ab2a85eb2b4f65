"""Harness machinery for Triton's interpreter (CPU runs under ``TRITON_INTERPRET=1``): applied by the
fuzz CLI, ``lab/gpu_check.py --smoke`` and tests/conftest.py; the kernels never import it (a
workaround for the interpreter is not product code)."""
from __future__ import annotations


def numpy_2_4_shim() -> None:
    """Triton 3.6's interpreter turns a scalar (a shape-(1,) array there) into a loop bound with
    ``int(array)``, which numpy >= 2.4 rejects; index through the first element instead. Patches the
    interpreter's tensor class once (a no-op without triton)."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - the kernel tests skip without triton
        return
    if getattr(interpreter, "_flashproof_shim", False):
        return
    patch = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
    interpreter._patch_lang_tensor = patched
    interpreter._flashproof_shim = True
