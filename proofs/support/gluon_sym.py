"""Gluon's language (``triton.experimental.gluon.language`` and its Hopper modules) on ``triton_sym``
values: what ``kernel_exec`` binds in a Gluon kernel's globals so that its own Python body, every
partition it hands to ``gl.warp_specialize`` and every ``@gluon.jit`` helper run symbolically.

What each construct becomes (addresses only; floating-point work is ``Data``):

* ``gl.arange(0, n, layout=L)``: a lane variable, as ``tl.arange``; layouts are tags, except that the
  arange remembers which dim of L's parent its lanes run along (``LANE_DIM``). ``gl.expand_dims(x, 1)``
  is ``x[:, None]``, ``gl.expand_dims(x, 0)`` is ``x[None, :]`` (refused when the axis is not the one the
  SliceLayout removed, which LANE_DIM tells).
* ``gl.store`` and pointer arithmetic: ``triton_sym``'s (recorded by ``kernel_exec.record_access``);
  ``gl.load`` (the block-sparse walk lists' scalar reads) likewise, its value the run's model of the
  tensor (``kernel_exec.execute``'s ``loads``), If(mask, value, other) when masked.
* ``gl.allocate_shared_memory(dtype, shape, layout)``: a ``SMem`` of that shape, named by the variable the
  calling line assigns (``dq_smem = …``); ``.index(i)`` and ``.slice(start, length, dim)`` are recorded as
  accesses of kind ``"smem"`` (names ``dq_smem.index``, ``dq_smem[].slice1``): (first, last, extent), the
  indices they touch along the dim and the allocation's extent there (what the obligation proves);
  ``.permute``, ``.load``, ``.store`` touch no global memory.
* ``tma.async_copy_global_to_shared(desc, coord, bar, dest)`` / ``async_copy_shared_to_global(desc,
  coord, src)`` and ``common.tma_reduce_add(desc, coord, src)`` (bound as ``tma_reduce_add``): accesses of
  kind ``"tma_load"`` / ``"tma_store"`` / ``"tma_reduce"`` with the descriptor and the coordinates.
* ``gl.inline_asm_elementwise`` (``pack = 1`` only; another pack is refused): each ``[$k]`` address operand
  of the asm text is recorded as an access of kind ``"red"`` (``red``/``atom``/``st``: a write) or ``"ld"``
  (a read: ``ld… $r, [$k]``) at the pointer argument k (after the outputs); an instruction ``.vW`` touches W
  consecutive elements from that address; an asm with an address operand in any other instruction is refused.
* ``mbarrier.*``, ``fence_async_shared``, ``gl.thread_barrier``, ``tma.store_wait``,
  ``warpgroup_mma`` / ``warpgroup_mma_wait``: synchronisation and tensor-core work with no address:
  no effect (``warpgroup_mma_wait`` hands its dependencies back, data as fresh data of the same type).
* ``gl.warp_specialize([(fn, args), ...], ...)``: each partition ``fn(*args)`` in turn, on the same
  path (its accesses carry the partition's name in ``where``); ``range`` inside a Gluon function is
  ``sym_loop`` (one arbitrary iteration, as ``kernel_exec``'s loop, also with branches inside it).
"""
from __future__ import annotations

import itertools
import linecache
import re
import sys

import z3

from . import kernel_exec as kx, triton_sym as ts

__all__ = ["GL", "MBARRIER", "TMA", "BIND", "SMem", "GData", "LANE_DIM", "partition"]

#: arange id -> (parent layout, the parent dim its lanes run along)
LANE_DIM: dict = {}
#: loop variable name -> the conditions of its iteration (t >= 0, lo + step·t < hi): they hold on every
#: path formula that mentions it (it occurs only inside its loop's body)
LOOP_FACTS: dict = {}
#: (q·B + r, B, q, r) of every split product-range loop of a run (``_loop``): it // B = q, it % B = r
SPLITS: list = []
_PARTITION: list = []
_ids = itertools.count()


def partition() -> str:
    """The name of the warp_specialize partition running now ('' outside one)."""
    return _PARTITION[-1] if _PARTITION else ""


#: call site (partition, the calling frames' (file, function, line) chain) -> lane id: the same arange gets the same
#: lane variable on every path of a run (an arange inside a branch taken on some paths only shifts nothing)
_SITES: dict = {}


def _site_id():
    f, chain = sys._getframe(2), []
    while f is not None and len(chain) < 16:
        chain.append((f.f_code.co_filename, f.f_code.co_name, f.f_lineno))
        f = f.f_back
    key = (partition(), tuple(chain))
    if key not in _SITES:
        _SITES[key] = 100_000 + len(_SITES)
    return _SITES[key]


def _record(kind, name, off):
    run = kx._RUN
    where = kx._where()
    run.accesses.append(kx.Access(kind, name, off, None, tuple(run.path), f"{partition()}>{where}"))


class _Tag:
    """A layout: a tag (what it is named by and its arguments)."""

    def __init__(self, kind, *a, **kw):
        self.kind, self.a, self.kw = kind, a, kw

    def __repr__(self):
        return f"{self.kind}{self.a or ''}{self.kw or ''}"


def _layout(kind):
    return lambda *a, **kw: _Tag(kind, *a, **kw)


class _Type:
    def __init__(self, shape, layout=None):
        self.shape, self.layout = list(shape), layout
        self.tensor_type = self


class GData(ts.Data):
    """Data with a Gluon type (shape, layout): what ``x.type.shape`` reads; arithmetic keeps it."""

    def __init__(self, typ=None):
        self.type = typ if typ is not None else _Type([])

    def _d(self, *_):
        return GData(self.type)

    def to(self, *_, **__):
        return GData(self.type)


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__neg__"):
    setattr(GData, _op, GData._d)


class SMem:
    """A shared-memory allocation (or a view of one: an index, slice or permutation)."""

    def __init__(self, name, shape, dtype, layout):
        self.name, self.shape, self.dtype, self.layout = name, list(shape), dtype, layout
        self.type = _Type(shape, layout)

    def index(self, i):
        i = ts.Sym.lift(i)
        _record("smem", f"{self.name}.index", (i, i, self.shape[0]))
        return SMem(f"{self.name}[]", self.shape[1:], self.dtype, self.layout)

    def slice(self, start, length, dim=0):
        start = ts.Sym.lift(start)
        _record("smem", f"{self.name}.slice{dim}", (start, start + (length - 1), self.shape[dim]))
        shape = list(self.shape)
        shape[dim] = length
        return SMem(f"{self.name}[:]", shape, self.dtype, self.layout)

    def permute(self, order):
        return SMem(self.name, [self.shape[i] for i in order], self.dtype, self.layout)

    def load(self, layout=None):
        return GData(_Type(self.shape, layout))

    def store(self, value):
        return None


def _none(*_, **__):
    return None


class _GL:
    """The subset of ``gluon.language`` the attention kernels use."""

    int32, int64, float32 = ts.INT32, ts.INT64, ts.FLOAT32
    float16 = bfloat16 = ts._Dtype("float16")

    class constexpr:  # annotation only
        pass

    BlockedLayout = staticmethod(_layout("BlockedLayout"))
    NVMMADistributedLayout = staticmethod(_layout("NVMMADistributedLayout"))
    DotOperandLayout = staticmethod(_layout("DotOperandLayout"))

    class NVMMASharedLayout:
        @staticmethod
        def get_default_for(shape, dtype):
            return _Tag("NVMMASharedLayout", list(shape), dtype)

    @staticmethod
    def SliceLayout(dim, parent):
        return _Tag("SliceLayout", dim, parent)

    static_assert = staticmethod(ts.TL.static_assert)
    program_id = staticmethod(ts.TL.program_id)
    num_programs = staticmethod(ts.TL.num_programs)
    where = staticmethod(ts.TL.where)
    maximum = staticmethod(ts.TL.maximum)
    minimum = staticmethod(ts.TL.minimum)
    thread_barrier = staticmethod(_none)

    @staticmethod
    def static_range(*a):
        return range(*a)

    @staticmethod
    def arange(lo, hi, layout=None):
        if lo != 0:
            raise kx.Unsupported("gl.arange(lo, hi) with lo != 0 is not modelled")
        k = _site_id()
        ts.LANES[(k, 0)] = (z3.Int(f"lane{k}_0"), hi)
        x = ts.Sym(ts.LANES[(k, 0)][0], False, True, "own", {(k, 0)})
        if layout is not None and layout.kind == "SliceLayout":
            dim, parent = layout.a
            LANE_DIM[k] = (parent, 1 - dim)
        else:
            LANE_DIM[k] = (layout, 0)
        return x

    @staticmethod
    def expand_dims(x, axis):
        if not isinstance(x, (ts.Sym, ts.Bool)):
            return GData()
        for k, a in x.axes:
            if a != 0 or LANE_DIM.get(k, (None, 1 - axis))[1] != 1 - axis:
                raise kx.Unsupported(f"expand_dims(·, {axis}) of a tile whose layout is not SliceLayout({axis}, ·)")
        return x[:, None] if axis == 1 else x[None, :]

    @staticmethod
    def convert_layout(x, layout):
        return x if isinstance(x, (ts.Sym, ts.Bool)) else GData(_Type(getattr(getattr(x, "type", None), "shape", []),
                                                                          layout))

    @staticmethod
    def zeros(shape, dtype=None, layout=None):
        return GData(_Type(shape, layout))

    @staticmethod
    def full(shape, value, dtype=None, layout=None):
        return GData(_Type(shape, layout))

    @staticmethod
    def full_like(x, *_, **__):
        return GData(getattr(x, "type", None))

    zeros_like = full_like

    @staticmethod
    def max(x, *_, **__):
        return ts.TL.max(x)

    sum = max

    @staticmethod
    def exp2(x):
        return GData()

    log2 = exp2

    @staticmethod
    def load(ptr, mask=None, other=None, **_):
        """A pointer load (the block-sparse walk lists' scalar reads), recorded as ``tl.load`` is (kind
        "load", with its mask; ``where`` names the partition); its value is what the run's model of that
        tensor gives (``kernel_exec.execute``'s ``loads``), else data. With a mask, a masked-off lane holds
        ``other``: If(mask, value, other) (a data mask, or a mask without ``other``, is refused for an
        integer value: the lane's value would be undefined)."""
        v = kx.record_access("load", ptr, mask)
        run = kx._RUN
        run.accesses[-1] = run.accesses[-1]._replace(where=f"{partition()}>{run.accesses[-1].where}")
        if mask is None or not isinstance(v, ts.Sym):
            return v
        if not (isinstance(mask, ts.Bool) and mask.exact) or other is None or isinstance(other, float):
            raise kx.Unsupported("a masked integer load without an exact mask and an integer `other`")
        o = ts.Sym.lift(other)
        e = z3.If(mask.e, v.e, o.e)
        return ts.Sym(e, ts._or(v.wide, o.wide), ts._and(v.safe, o.safe, mask.safe), "own", v.axes | o.axes | mask.axes)

    @staticmethod
    def store(ptr, value, mask=None, **_):
        ts.TL.store(ptr, value, mask=mask)
        run = kx._RUN
        run.accesses[-1] = run.accesses[-1]._replace(where=f"{partition()}>{run.accesses[-1].where}")

    @staticmethod
    def allocate_shared_memory(dtype, shape, layout, value=None):
        return SMem(_assigned_name(sys._getframe(1)) or f"smem{next(_ids)}", shape, dtype, layout)

    @staticmethod
    def warp_specialize(functions_and_args, worker_num_warps, worker_num_regs):
        for fn, args in functions_and_args:
            _PARTITION.append(fn.__name__)
            try:
                fn(*args)
            finally:
                _PARTITION.pop()

    @staticmethod
    def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
        if pack != 1:  # which register of a pack an operand is would depend on the layout: not modelled
            raise kx.Unsupported(f"inline asm with pack = {pack} (only pack = 1 is modelled)")
        n_out = sum(1 for c in constraints.split(",") if c.startswith("="))
        found = 0
        for m in _ASM_ADDR.finditer(asm):
            op, width, operand = m.group(1), int(m.group(2) or 1), int(m.group(3))
            ptr = args[operand - n_out]
            if not isinstance(ptr, ts.Ptr):
                raise kx.Unsupported(f"inline asm address operand ${operand} is not a pointer")
            _record("ld" if op == "ld" else "red", ptr.name, (ptr.off, width))
            found += 1
        if asm.count("[$") != found:
            raise kx.Unsupported(f"inline asm with an address operand not modelled: {asm!r}")
        return GData()


#: one global-memory instruction with an address operand ``[$k]``: ``red``/``atom``/``st`` (a write; the
#: operand right after the type) or ``ld`` (a read; the operand after the destination register)
_ASM_ADDR = re.compile(r"\b(red|atom|st|ld)\.[\w.]*?(?:\.v(\d))?\.(?:f32|b32|u32|s32)\s+(?:\$\d+,\s*)?\[\$(\d+)\]")


def _assigned_name(frame):
    """The name the calling source line assigns (``dq_smem = gl.allocate_shared_memory(...)``), or None."""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = re.match(r"\s*(\w+)\s*=\s*gl\.allocate_shared_memory\(", line)
    return m.group(1) if m else None


class _MBarrier:
    MBarrierLayout = staticmethod(_layout("MBarrierLayout"))
    init = expect = wait = arrive = staticmethod(_none)


class _TMA:
    @staticmethod
    def async_copy_global_to_shared(tensor_desc, coord, barrier, result, pred=True):
        _record("tma_load", tensor_desc.name, [ts.Sym.lift(c) for c in coord])

    @staticmethod
    def async_copy_shared_to_global(tensor_desc, coord, src):
        _record("tma_store", tensor_desc.name, [ts.Sym.lift(c) for c in coord])

    @staticmethod
    def reduce_add(tensor_desc, coord, src):
        """``common.tma_reduce_add``: the box at ``coord`` += the shared tile (a TMA write, as a store)."""
        _record("tma_reduce", tensor_desc.name, [ts.Sym.lift(c) for c in coord])

    store_wait = staticmethod(_none)


def warpgroup_mma(a, b, acc, **_):
    return GData(getattr(acc, "type", None))


def warpgroup_mma_wait(num_outstanding=0, deps=None):
    out = [GData(d.type) if isinstance(d, GData) else d for d in deps]
    return out[0] if len(out) == 1 else tuple(out)


class _Loop:
    """``range`` in a Gluon function: ``kernel_exec``'s one-iteration loop, whose path conditions are
    dropped at the loop's end together with those of any branch taken inside the body (the branch
    then forks the run, both sides explored for an arbitrary iteration)."""

    @staticmethod
    def __call__(*a):
        if all(isinstance(x, int) for x in a):
            return range(*a)
        lo, hi, step = (0, a[0], 1) if len(a) == 1 else (a[0], a[1], a[2] if len(a) > 2 else 1)
        return _loop(ts.Sym.lift(lo), ts.Sym.lift(hi), ts.Sym.lift(step), sys._getframe(1))


def _split(hi):
    """(A, B) when ``hi`` is the product A·B of two non-constant terms (``range(G * n_iter)``), else None."""
    if z3.is_app_of(hi, z3.Z3_OP_MUL) and hi.num_args() == 2 and not any(z3.is_int_value(x) for x in hi.children()):
        return hi.arg(0), hi.arg(1)
    return None


def _loop(lo, hi, step, frame):
    run = kx._RUN
    carried = kx._carried(frame.f_code, frame.f_lineno)
    n = next(_ids)
    t = z3.Int(f"giter{n}")
    wide, safe = ts._or(ts._or(lo.wide, hi.wide), step.wide), ts._and(lo.safe, hi.safe, step.safe)
    run.side.append((f"loop bounds at {kx._where_frame(frame)} computed without wrap-around", safe, tuple(run.path)))
    if not z3.is_int_value(step.e):
        run.base.append(step.e > 0)
    start = len(run.path)
    split = _split(hi.e) if z3.is_int_value(lo.e) and lo.e.as_long() == 0 and z3.is_int_value(step.e) \
        and step.e.as_long() == 1 else None
    if split is None:
        v = ts.Sym(lo.e + step.e * t, wide, safe)
        run.path += [t >= 0, v.e < hi.e]
        LOOP_FACTS[t.decl().name()] = (t >= 0, v.e < hi.e)
    else:
        # range(A·B): the iteration it = q·B + r, q in [0, A), r in [0, B), a change of variables onto
        # [0, A·B) exactly when B > 0 or both ranges are empty (A ≥ 0 ≥ B: a side claim below); the
        # kernel's it // B and it % B are then q and r (``SPLITS``: a rewrite with its lemma, see
        # ``gluon_rewrite``)
        A, B = split
        q, r = z3.Int(f"giter{n}q"), z3.Int(f"giter{n}r")
        facts = (q >= 0, q < A, r >= 0, r < B)
        # exact also when the range is empty with B ≤ 0 and A ≥ 0 (A·B ≤ 0, no r < B: a block-sparse walk of
        # n_iter = 0 query blocks)
        run.side.append((f"the range A·B of the loop at {kx._where_frame(frame)} has B > 0 (or is empty: A ≥ 0, "
                         "B ≤ 0)", z3.Or(B > 0, A >= 0), tuple(run.path)))
        v = ts.Sym(q * B + r, wide, safe)
        run.path += list(facts)
        LOOP_FACTS[q.decl().name()] = LOOP_FACTS[r.decl().name()] = facts
        SPLITS.append((v.e, B, q, r))
    yield v
    for name in carried:
        val = frame.f_locals.get(name)
        vals = val if isinstance(val, tuple) else (val,)
        if any(isinstance(x, (ts.Sym, ts.Bool, ts.Ptr)) for x in vals):
            raise kx.Unsupported(f"the loop at {kx._where_frame(frame)} carries integer state {name!r} between "
                                 "iterations: the one-iteration model does not cover it")
    del run.path[start:]


GL, MBARRIER, TMA = _GL(), _MBarrier(), _TMA()

#: what ``kernel_exec.execute(..., bind=BIND)`` sets in a Gluon kernel's globals
BIND = {"gl": GL, "mbarrier": MBARRIER, "tma": TMA, "warpgroup_mma": warpgroup_mma,
        "warpgroup_mma_wait": warpgroup_mma_wait, "fence_async_shared": _none, "range": _Loop(),
        "tma_reduce_add": TMA.reduce_add}
