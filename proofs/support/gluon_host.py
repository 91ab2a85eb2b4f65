"""Stand-ins for what the Gluon hosts (``gluon/fwd.forward``, ``gluon/bwd.backward``) touch, so that
those host functions themselves run under ``kernel_exec`` and launch the kernel they launch, with the
arguments and grid they build:

* ``FakeTensor``: shape, strides (z3-backed ``Sym``), dtype, ``element_size``; ``data_ptr()`` is 0 (a
  misaligned base is refused by ``row_descriptor``/``tma_kind`` before any launch: not modelled).
* ``FakeTorch``: ``empty_like`` / ``empty`` / ``zeros`` return the tensors the obligation names, in call
  order (their layout is the obligation's model of torch's; ``empty`` and ``zeros`` record the element
  count the host asked for, ``requested``; an ``empty`` entry that is a function is called with the shape
  and dtype the host asked for: a tensor of exactly that shape); every other attribute is torch's.
  ``FakeTensor.view``: ``view(-1)`` and the 2-D ``view(rows, D)`` (rows · D = numel a side condition of the
  path); any other shape gives a tensor of that shape with unknown strides (no descriptor or row view is
  built on it). ``copy_`` (dQ's conversion) takes its operands by shape only: torch's own op, which reads and
  writes them itself (no access of its is claimed).
* ``SymDesc``: a TensorDescriptor (global shape, strides, block shape), recorded by name in ``DESCS``.
* ``row_view`` / ``coords`` / ``tma_kind`` (``layout.py``) for a tensor read through a row view whose
  kind is a z3 Bool (``FakeTensor.bhnd``): ``layout.coords`` is executed for each kind and the two
  results merged (z3 ``If``); ``row_view``'s result is its "bhnd" / "bnhd" value likewise. That every
  path on which the real ``row_view`` accepts a tensor returns exactly one of these two is the
  obligation KER-BOUNDS-GLUON-VIEW, which executes ``row_view`` itself.
* ``Launcher``: ``kernel[grid](*args, **constexprs)`` — tensors become ``triton_sym.Ptr``, integers
  kernel arguments named as the kernel's parameters (i32 when they fit, Triton's specialisation),
  then ``kernel_exec.launch`` runs the kernel's body on this path.
"""
from __future__ import annotations

import itertools
import types
from typing import NamedTuple

import torch
import z3

from flashproof.kernels.attention.gluon import layout as _layout

from . import gluon_sym as gs, kernel_exec as kx, triton_sym as ts

__all__ = ["FakeTensor", "FakeTorch", "SymDesc", "DESCS", "Launcher", "rebind", "merged_layout", "merge"]

#: descriptor name -> SymDesc, filled by the host's TensorDescriptor calls (the obligation clears it)
DESCS: dict = {}


def _e(x):
    return x.e if isinstance(x, ts.Sym) else z3.IntVal(x)


def merge(flag, a, b) -> ts.Sym:
    """If(flag, a, b) as a Sym (a, b: Sym or int)."""
    a, b = ts.Sym.lift(a), ts.Sym.lift(b)
    e = z3.If(flag, a.e, b.e)
    return ts.Sym(e, ts._or(a.wide, b.wide), ts._and(a.safe, b.safe))


class _Strides(tuple):
    tensor = None


class FakeTensor:
    """A (B, H, N, D)-style tensor: ``shape`` and ``strides`` tuples of Sym/int; ``bhnd`` the z3 Bool
    choosing its row view's kind (None: not read through a row view); ``rows``: its row view's row count
    (the extent of the row stride a kernel steps it by: ``Launcher``)."""

    def __init__(self, name, shape, strides, dtype=torch.bfloat16, bhnd=None, rows=None):
        self.name, self.shape, self.dtype, self.bhnd, self.rows = name, tuple(shape), dtype, bhnd, rows
        self._strides = _Strides(strides)
        self._strides.tensor = self
        self.device = "cuda"

    def stride(self, i=None):
        return self._strides if i is None else self._strides[i]

    def element_size(self):
        return 4 if self.dtype in (torch.float32, torch.int32) else 2

    def data_ptr(self):
        return 0

    def contiguous(self):
        return self  # the tensors passed where the host calls it are contiguous by the obligation's model

    def numel(self):
        n = ts.Sym.lift(1)
        for s in self.shape:
            n = n * s
        return n

    def view(self, *shape):
        """A flat ``view(-1)`` or the 2-D ``view(rows, cols)`` of a contiguous tensor whose last dim is
        ``cols`` (rows · cols = numel, checked by a recorded side condition); any other shape: a tensor of
        that shape, strides unknown (see the module docstring)."""
        if len(shape) == 1 and isinstance(shape[0], int) and shape[0] == -1:  # (not shape == (-1,): a tuple
            # compares its items before its length, and comparing a Sym item branches the path)
            return FakeTensor(self.name, (self.numel(),), (1,), self.dtype)
        if len(shape) == 2 and isinstance(shape[1], int) and not isinstance(self.shape[-1], ts.Sym) \
                and shape[1] == self.shape[-1]:
            rows = ts.Sym.lift(shape[0])
            r = kx._RUN
            r.side.append((f"{self.name}.view{tuple(shape)}: rows · cols = numel",
                           _e(rows * shape[1]) == _e(self.numel()), tuple(r.path)))
            return FakeTensor(self.name, (rows, shape[1]), (shape[1], 1), self.dtype)
        if len(shape) == 2:
            raise kx.Unsupported(f"view{shape} of a fake tensor of shape {self.shape}")
        return FakeTensor(self.name, shape, (None,) * len(shape), self.dtype)

    def copy_(self, other):
        return self


def _numel(shape):
    n = ts.Sym.lift(1)
    for s in shape:
        n = n * s
    return n


class FakeTorch:
    """``torch`` for a host function: the tensors it allocates, by constructor, in call order (on each
    path of the run)."""

    def __init__(self, made: dict):
        self._all, self._made, self._run = made, {}, None

    def _next(self, what):
        if kx._RUN is not self._run:  # a new path of the host: its allocations start again
            self._run, self._made = kx._RUN, {k: list(v) for k, v in self._all.items()}
        if not self._made.get(what):
            raise kx.Unsupported(f"the host called torch.{what} more often than the obligation models")
        return self._made[what].pop(0)

    def empty_like(self, t, **_):
        return self._next("empty_like")

    def empty(self, *shape, dtype=torch.bfloat16, **_):
        t = self._next("empty")
        if callable(t):
            t = t(shape, dtype)
        t.requested = _numel(shape)
        return t

    def zeros(self, *shape, **_):
        """The next modelled tensor; ``requested``: the element count the host asked for (what a claim
        on the tensor's extent uses, rather than the model's shape)."""
        t = self._next("zeros")
        t.requested = _numel(shape)
        return t

    def __getattr__(self, name):
        return getattr(torch, name)


class _BlockType(NamedTuple):
    shape: list
    nbytes: int


class SymDesc:
    """A TMA tensor descriptor: ``shape`` (global, Sym/int per dim), ``strides``, ``block_shape`` (ints)."""

    def __init__(self, base, shape, strides, block_shape, layout, padding="zero"):
        self.name, self.base = base.name, base
        self.shape, self.strides, self.block_shape = list(shape), list(strides), [int(b) for b in block_shape]
        self.layout, self.dtype = layout, base.dtype
        n = 1
        for b in self.block_shape:
            n *= b
        self.block_type = _BlockType(self.block_shape, n * base.element_size())
        DESCS[self.name] = self

    @staticmethod
    def from_tensor(tensor, block_shape, layout, padding="zero"):
        return SymDesc(tensor, tensor.shape, tensor.stride(), block_shape, layout, padding)


class _Kind:
    """A row view's kind chosen by a z3 Bool (True: "bhnd")."""

    def __init__(self, flag):
        self.flag = flag


def merged_layout():
    """``layout``'s three functions for tensors whose view kind is a z3 Bool (see the module docstring)."""

    def row_view(shape, strides, itemsize):
        t = strides.tensor
        B, H, N, D = t.shape
        a, b = _layout.RowView("bhnd", B * H * N, D, t.stride(2)), _layout.RowView("bnhd", B * N, H * D, t.stride(2))
        return _layout.RowView(_Kind(t.bhnd), merge(t.bhnd, a.rows, b.rows), merge(t.bhnd, a.cols, b.cols),
                               t.stride(2))

    def coords(kind, H, N, D):
        if not isinstance(kind, _Kind):
            return _layout.coords(kind, H, N, D)  # raises for None, as the real one does
        a, b = _layout.coords("bhnd", H, N, D), _layout.coords("bnhd", H, N, D)
        return _layout.Coords(*(merge(kind.flag, x, y) for x, y in zip(a, b)))

    def tma_kind(t):
        return None if t.bhnd is None else _Kind(t.bhnd)

    # layout.head_rc (the row-view formula as a Gluon function, on the branch that adds it): its plain body
    extra = {"head_rc": _layout._head_rc} if hasattr(_layout, "_head_rc") else {}
    return types.SimpleNamespace(row_view=row_view, coords=coords, tma_kind=tma_kind, RowView=_layout.RowView,
                                 Coords=_layout.Coords, KINDS=_layout.KINDS, **extra)


def rebind(fn, **names):
    """``fn``'s code with the globals in ``names`` replaced (a host helper run on the stand-ins)."""
    g = dict(fn.__globals__)
    g.update(names)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


class Launcher:
    """``kernel[grid](*args, **kw)`` from a host run by ``kernel_exec``; ``strides``: kernel parameter
    name -> the pointer parameter whose rows it steps, for the integer arguments that are row strides
    (tracked by name in address terms, ``triton_sym.STRIDES``, with the extent of the tensor passed there:
    its ``rows``)."""

    def __init__(self, kernel, strides=None):
        self.kernel, self.strides = kernel, strides or {}
        self.params = kernel.fn.__code__.co_varnames[:kernel.fn.__code__.co_argcount]

    def __getitem__(self, grid):
        def run(*args, num_warps=4, maxnreg=None, **consts):
            r = kx._RUN
            # lane and loop variables numbered afresh on every path, so that an access the paths share
            # is the same z3 term on each (the provers memoise by term)
            ts._ids, gs._ids = itertools.count(), itertools.count()
            terms = tuple(_e(g) for g in grid)
            r.base += [terms[0] <= 2 ** 31 - 1] + [t <= 65535 for t in terms[1:]]  # CUDA's grid limits (A-TRITON-LAUNCH)
            given = dict(zip(self.params, args))
            bound = {name: self._arg(name, v, r, given) for name, v in given.items()}
            return kx.launch(self.kernel, terms)(**bound, **consts)
        return run

    def _arg(self, name, v, r, given):
        if isinstance(v, FakeTensor):
            return ts.Ptr(v.name, dtype=ts.FLOAT32)
        if isinstance(v, ts.Sym) or (isinstance(v, int) and not isinstance(v, bool)):
            s = ts.arg(name, stride=name in self.strides)
            r.base.append(s.e == _e(v))
            if name in self.strides:
                t = given[self.strides[name]]
                ts.STRIDES[name] = (t.name, t.rows)
            return s
        return v
