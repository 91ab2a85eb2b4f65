"""Harness machinery for Triton's interpreter (CPU runs under ``TRITON_INTERPRET=1``): applied by the
fuzz CLI, the Triton fuzz target on CPU, ``lab/gpu_check.py --smoke`` and tests/conftest.py; the
kernels never import it (checking accesses is the harness's business, not the product's).

* ``apply()``: the product's interpreter fixes (``flashproof.kernels.interpreter.interpreter_fixes``:
  numpy >= 2.4 loop bounds and bf16 dots, which the kernel modules also apply when imported), then the
  bounds hooks below; idempotent, each under its own flag, so importing a kernel module first never
  leaves the hooks out (it once did: the kvcache module's copy of the loop-bound fix set the flag this
  function read, and a later ``apply()`` installed neither the bf16 dot nor the bounds hooks).
* ``bounds_checked()``: a context manager under which every load, store and atomic a kernel issues on
  an active lane must address an element of one of its tensor arguments (views: the elements the view
  covers, not its whole storage, so a read of a strided view's padding is caught too). A stray access
  raises ``OutOfBounds`` (inside the kernel, so the interpreter reports it as an InterpreterError
  naming it). Cheap: the element addresses of each launch's tensors are listed once (fine at test
  sizes) and each access is a sorted search. Limit: an address that belongs to *another* argument
  of the same launch is not told apart from one of the tensor the pointer came from.
"""
from __future__ import annotations

import contextlib

#: the element addresses of the tensor arguments of the launch being interpreted, while checking
_CHECK = {"on": False, "addresses": None, "tensors": ()}


class OutOfBounds(RuntimeError):
    """A load or store of an interpreted kernel addressed no element of its tensor arguments."""


#: set on Triton's interpreter module once the bounds hooks are installed
HOOKED = "_flashproof_bounds_hooks"


def apply() -> None:
    """The product's interpreter fixes (``flashproof.kernels.interpreter.interpreter_fixes``: numpy >= 2.4
    loop bounds, bf16 dots), then the bounds hooks, once (idempotent, a no-op without triton)."""
    from flashproof.kernels.interpreter import interpreter_fixes

    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - the kernel tests skip without triton
        return
    interpreter_fixes()
    if getattr(interpreter, HOOKED, False):
        return
    _bounds_hooks(interpreter)
    setattr(interpreter, HOOKED, True)


def _element_addresses(t):
    """Sorted uint64 byte addresses of the elements a torch tensor (view) covers."""
    import numpy as np

    off = np.zeros((), dtype=np.int64)
    for n, s in zip(t.shape, t.stride()):
        off = np.add.outer(off, np.arange(n, dtype=np.int64) * s)
    return (t.data_ptr() + off.reshape(-1) * t.element_size()).astype(np.uint64)


def _bounds_hooks(interpreter) -> None:
    import numpy as np
    from triton.runtime.jit import TensorWrapper
    from triton.tools.tensor_descriptor import TensorDescriptor

    ex = interpreter.GridExecutor
    init = ex._init_args_hst

    def _init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        if _CHECK["on"]:
            named = list(zip(self.arg_names, args_hst)) + list(kwargs_hst.items())
            tensors = []
            for name, a in named:
                if isinstance(a, (TensorDescriptor, TensorWrapper)):  # (not torch's own ``base``)
                    a = a.base
                if hasattr(a, "data_ptr") and hasattr(a, "stride"):
                    tensors.append((name, a))
            parts = [_element_addresses(a) for _, a in tensors]
            _CHECK["addresses"] = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
            _CHECK["tensors"] = tuple((n, a.data_ptr(), tuple(a.shape), tuple(a.stride()), a.element_size())
                                      for n, a in tensors)
            _CHECK["kernel"] = getattr(self.fn, "__name__", "?")
        return args_hst, kwargs_hst
    ex._init_args_hst = _init_args_hst

    def check(kind, ptrs, mask):
        if not _CHECK["on"] or _CHECK["addresses"] is None:
            return
        on = np.broadcast_to(mask.data, ptrs.data.shape)
        lanes = ptrs.data[on].astype(np.uint64)
        if lanes.size == 0:
            return
        known = _CHECK["addresses"]
        if known.size:
            at = np.minimum(np.searchsorted(known, lanes), known.size - 1)
            bad = lanes[known[at] != lanes]
        else:
            bad = lanes
        if bad.size:
            raise OutOfBounds(_describe(kind, int(bad[0]), int(bad.size), int(lanes.size)))

    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store

    def create_masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        check("load", ptrs, mask)
        return load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)

    def create_masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        check("store", ptrs, mask)
        return store(self, ptrs, value, mask, cache_modifier, eviction_policy)
    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):   # tl.atomic_add / xchg / max / …
        check("atomic", ptr, mask)
        return rmw(self, rmwOp, ptr, val, mask, sem, scope)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):   # tl.atomic_cas: every lane (no mask)
        check("atomic", ptr, _AllLanes(ptr.data.shape))
        return cas(self, ptr, cmp, val, sem, scope)
    builder.create_atomic_rmw, builder.create_atomic_cas = create_atomic_rmw, create_atomic_cas


class _AllLanes:
    """A mask of every lane, as the hooks' ``check`` reads masks (``.data``)."""

    def __init__(self, shape):
        import numpy as np
        self.data = np.ones(shape, dtype=bool)


def _describe(kind, addr, n_bad, n_lanes) -> str:
    """Which tensor argument the stray address is nearest to, as an element offset from its base."""
    near = min(_CHECK["tensors"], key=lambda t: abs(addr - t[1]), default=None)
    where = ""
    if near is not None:
        name, base, shape, stride, esize = near
        where = (f"; nearest tensor argument {name} (shape {shape}, strides {stride}): element offset "
                 f"{(addr - base) / esize:g} from its base")
    return (f"{_CHECK.get('kernel', '?')}: {kind} of {n_bad} of {n_lanes} active lanes outside every tensor argument, "
            f"first at address {addr:#x}{where}")


@contextlib.contextmanager
def bounds_checked():
    """Within the block, interpreted launches raise ``OutOfBounds`` on a load or store of an active lane
    that addresses no element of the launch's tensor arguments (module docstring). Applies the shims."""
    apply()
    before = dict(_CHECK)
    _CHECK.update(on=True, addresses=None, tensors=())
    try:
        yield
    finally:
        _CHECK.clear()
        _CHECK.update(before)
