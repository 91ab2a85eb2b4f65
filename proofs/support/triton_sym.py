"""Triton's integer and pointer semantics on z3 terms: the values a kernel's own code computes when
``kernel_exec`` runs it with this module standing in for ``triton.language``.

Values (what a Triton kernel holds, seen by its index arithmetic):

* ``Sym``: an integer scalar or tile. ``e`` is the exact integer (z3 Int); ``wide`` says whether
  Triton holds it in 64 bits (a Python bool, or a z3 Bool for a kernel argument, whose width Triton
  picks from its value: i32 when it fits, else i64); ``safe`` says that no operation on the way
  wrapped (each result lies in its width's range; a divisor is not 0); ``lin`` is the value as
  Σ coefficient·stride + constant over the named stride arguments (None once that form is lost),
  which is how an address is matched to a tensor element; ``axes`` names its lane variables.
* ``Bool``: a predicate over the same lanes; ``exact`` False means ``e`` is only an upper bound
  (it was combined with data: lanes where ``e`` is false are certainly false).
* ``Data``: anything the index logic never inspects (floating-point tiles, loaded values);
  every operation on it gives Data.
* ``Ptr``: a tensor argument plus an element offset (a Sym). ``Desc``: a TMA tensor descriptor.

A tile is one symbolic element: ``arange(0, n)`` is a fresh lane variable 0 ≤ L < n, ``x[:, None]``
keeps its lanes on axis 0 and ``x[None, :]`` moves them to axis 1 (renamed), so a 2-D mask such as
``rows[:, None] & (offs_d[None, :] < D)`` is a formula over one row lane and one column lane.

An exact predicate converted to an integer dtype is the 0/1 tile If(p, 1, 0); ``tl.cumsum`` and
``tl.sum`` of such a tile (axis 0) are modelled by ``kernel_exec``'s ghost count of the enclosing loop
(refused elsewhere, and for any other integer tile); ``tl.max`` of an integer tile is data.

Semantics taken from Triton 3.6 (the assumptions A-TRITON-* list them): signed ``//`` and ``%``
truncate toward zero (LLVM sdiv/srem, also in the interpreter); i32 ⊕ i32 is i32, anything with
i64 is i64; a Python int literal is i32 when it fits.
"""
from __future__ import annotations

import itertools

import z3

__all__ = ["Sym", "Bool", "Data", "Ptr", "Desc", "const", "arg", "lane_domain", "INT32", "INT64", "TL"]

I32 = (-(2 ** 31), 2 ** 31 - 1)
I64 = (-(2 ** 63), 2 ** 63 - 1)
_ids = itertools.count()


def _fits(e, wide):
    """z3 Bool: ``e`` lies in the range of its width (i64 when ``wide``; a z3 Bool picks per value). Only
    the ranges the width can take are built: these terms are made for every integer operation."""
    r32 = None if wide is True else z3.And(e >= I32[0], e <= I32[1])
    r64 = None if wide is False else z3.And(e >= I64[0], e <= I64[1])
    if wide is True:
        return r64
    if wide is False:
        return r32
    return z3.If(wide, r64, r32)


def _or(a, b):
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return z3.Or(a, b)


def _and(*xs):
    xs = [x for x in xs if x is not True]
    if any(x is False for x in xs):
        return z3.BoolVal(False)
    return z3.And(*xs) if xs else z3.BoolVal(True)


class _Dtype:
    def __init__(self, name, bits=None):
        self.name, self.bits = name, bits
        self.element_ty = self

    def __repr__(self):
        return self.name


INT32, INT64 = _Dtype("int32", 32), _Dtype("int64", 64)
FLOAT32 = _Dtype("float32")

#: lane variable (arange id, axis) -> (z3 Int, size); the domain 0 <= L < size is added by the executor
LANES: dict = {}


def lane_domain():
    """0 <= L < n for every lane variable made so far (the executor clears LANES per run)."""
    out = []
    for var, size in LANES.values():
        n = size.e if isinstance(size, Sym) else size
        out += [var >= 0, var < n]
    return out


def _lane(k, axis):
    key = (k, axis)
    if key not in LANES:
        size = LANES[(k, 0)][1]
        LANES[key] = (z3.Int(f"lane{k}_{axis}"), size)
    return LANES[key][0]


def _rename(e, axes, mapping):
    """Substitute lane variables (k, a) -> (k, mapping[a]) in e; return (e', axes')."""
    pairs, out = [], set()
    for k, a in axes:
        b = mapping.get(a, a)
        out.add((k, b))
        if b != a:
            pairs.append((_lane(k, a), _lane(k, b)))
    if pairs and isinstance(e, z3.ExprRef):
        e = z3.substitute(e, *pairs)
    return e, frozenset(out)


def _lin_map(lin, f):
    return None if lin is None else {k: f(v) for k, v in lin.items()}


def _lin_add(a, b, sign=1):
    if a is None or b is None:
        return None
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] + sign * v if k in out else sign * v
    return out


def _trunc_div(a, b):
    """Triton's signed integer division (sdiv): the quotient truncated toward zero (z3's div is
    floor division for b > 0, which agrees when a ≥ 0)."""
    general = z3.If(a >= 0, 1, -1) * z3.If(b >= 0, 1, -1) * (z3.If(a >= 0, a, -a) / z3.If(b >= 0, b, -b))
    return z3.If(z3.And(a >= 0, b > 0), a / b, general)


def _trunc_mod(a, b):
    """Triton's signed remainder (srem): a − b·trunc(a / b); z3's mod where a ≥ 0 and b > 0."""
    return z3.If(z3.And(a >= 0, b > 0), a % b, a - b * _trunc_div(a, b))


class Data:
    """A value the index logic never inspects (every operation gives Data)."""

    shape = ("?", "?")
    dtype = FLOAT32

    def _d(self, *_):
        return Data()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _d
    __floordiv__ = __rfloordiv__ = __mod__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _d
    __eq__ = __ne__ = __and__ = __rand__ = __or__ = __ror__ = __invert__ = __getitem__ = _d
    __hash__ = object.__hash__

    def to(self, *_, **__):
        return Data()

    def reshape(self, *_):
        return Data()

    def __bool__(self):
        raise TypeError("a Python branch on data (a loaded or floating-point value): not index logic")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


class Sym:
    __slots__ = ("e", "wide", "safe", "lin", "axes")

    def __init__(self, e, wide=False, safe=True, lin="own", axes=frozenset()):
        self.e, self.wide, self.safe, self.axes = e, wide, safe, frozenset(axes)
        self.lin = {None: e} if lin == "own" else lin

    shape = ("?",)
    __hash__ = object.__hash__

    @staticmethod
    def lift(x):
        if isinstance(x, Sym):
            return x
        if isinstance(x, bool):
            return Sym(z3.IntVal(int(x)))
        if _is_int(x):
            return Sym(z3.IntVal(x), wide=not (I32[0] <= x <= I32[1]))
        raise TypeError(f"not an integer: {x!r}")

    def _bin(self, other, op, lin_op=None, rev=False):
        if isinstance(other, (Data, float)) or isinstance(other, Ptr):
            return NotImplemented
        o = Sym.lift(other)
        a, b = (o, self) if rev else (self, o)
        wide = _or(a.wide, b.wide)
        e = op(a.e, b.e)
        lin = lin_op(a, b) if lin_op else ({None: e} if _plain(a) and _plain(b) else None)
        safe = _and(a.safe, b.safe, _address_fits(lin, wide) if _strided(lin) else _fits(e, wide))
        return Sym(e, wide, safe, lin, a.axes | b.axes)

    def __add__(self, o):
        return self._bin(o, lambda x, y: x + y, lambda a, b: _lin_add(a.lin, b.lin))

    def __radd__(self, o):
        return self._bin(o, lambda x, y: x + y, lambda a, b: _lin_add(a.lin, b.lin), rev=True)

    def __sub__(self, o):
        return self._bin(o, lambda x, y: x - y, lambda a, b: _lin_add(a.lin, b.lin, -1))

    def __rsub__(self, o):
        return self._bin(o, lambda x, y: x - y, lambda a, b: _lin_add(a.lin, b.lin, -1), rev=True)

    def __mul__(self, o):
        return self._bin(o, lambda x, y: x * y, _lin_mul)

    def __rmul__(self, o):
        return self._bin(o, lambda x, y: x * y, _lin_mul, rev=True)

    def __floordiv__(self, o):
        r = self._bin(o, _trunc_div)
        return r if r is NotImplemented else _nonzero(r, o)

    def __rfloordiv__(self, o):
        return self._bin(o, _trunc_div, rev=True)

    def __mod__(self, o):
        r = self._bin(o, _trunc_mod)
        return r if r is NotImplemented else _nonzero(r, o)

    def __neg__(self):
        return Sym.lift(0) - self

    def _low_bit(self, o, f):
        if not (_is_int(o) and o == 1):
            raise TypeError(f"only x & 1 and x ^ 1 are modelled, got the constant {o!r}")
        e = f(self.e)
        return Sym(e, self.wide, self.safe, {None: e} if _plain(self) else None, self.axes)

    def __and__(self, o):  # x & 1, the low bit: z3's x % 2 is 0 or 1 for every x, as in two's complement
        return self._low_bit(o, lambda x: x % 2)

    def __xor__(self, o):  # x ^ 1, the low bit flipped (never leaves x's width)
        return self._low_bit(o, lambda x: x + 1 - 2 * (x % 2))

    def _cmp(self, other, op):
        if isinstance(other, (Data, float)):
            return Data()
        o = Sym.lift(other)
        return Bool(op(self.e, o.e), True, _and(self.safe, o.safe), self.axes | o.axes)

    def __lt__(self, o):
        return self._cmp(o, lambda x, y: x < y)

    def __le__(self, o):
        return self._cmp(o, lambda x, y: x <= y)

    def __gt__(self, o):
        return self._cmp(o, lambda x, y: x > y)

    def __ge__(self, o):
        return self._cmp(o, lambda x, y: x >= y)

    def __eq__(self, o):
        return self._cmp(o, lambda x, y: x == y)

    def __ne__(self, o):
        return self._cmp(o, lambda x, y: x != y)

    def __getitem__(self, idx):
        return _broadcast(self, idx)

    def to(self, dtype, **_):
        if dtype is INT64:
            return Sym(self.e, True, self.safe, self.lin, self.axes)
        if dtype is INT32:
            return Sym(self.e, False, _and(self.safe, _fits(self.e, False)), self.lin, self.axes)
        return Data()

    def __bool__(self):
        from . import kernel_exec

        return kernel_exec.decide(self != 0)

    def __repr__(self):
        return f"Sym({self.e})"


#: stride argument name -> (tensor name, size of its dimension); tensor name -> storage span
#: Σ (size − 1)·stride. Filled by the obligation that declares the tensors (kernel_exec clears nothing).
STRIDES: dict = {}
SPANS: dict = {}
SPAN_MAX = 2 ** 62


def _strided(lin):
    return lin is not None and any(k is not None for k in lin)


def _address_fits(lin, wide):
    """An address term Σ c_k·s_k + c over the strides of ONE tensor fits int64 when every c_k lies in
    [0, size_k − 1] (or s_k = 0: a broadcast dimension) and |c| ≤ 2^62: then 0 ≤ Σ c_k·s_k ≤ Σ (size_k − 1)·s_k = span ≤ 2^62 (strides are
    non-negative). This linear sufficient condition replaces the nonlinear range check of the product.
    In i32, or over strides of several tensors, the exact check applies."""
    keys = [k for k in lin if k is not None]
    owners = {STRIDES[k][0] for k in keys if k in STRIDES}
    linear = len(owners) == 1 and all(k in STRIDES for k in keys)
    # the exact check is built only where it is returned: an i64 address over one tensor needs none
    exact = None if linear and wide is True else \
        _fits(sum((v * z3.Int(k) if k is not None else v) for k, v in lin.items()), wide)
    if not linear or wide is False:
        return exact
    c = lin.get(None, z3.IntVal(0))
    lin_ok = z3.And(c >= -SPAN_MAX, c <= SPAN_MAX,
                    *[z3.Or(z3.And(lin[k] >= 0, lin[k] <= STRIDES[k][1] - 1), z3.Int(k) == 0) for k in keys])
    if wide is True:
        return lin_ok
    return z3.If(wide, lin_ok, exact)


def _plain(s):
    return s.lin is not None and set(s.lin) <= {None}


def _lin_mul(a, b):
    if _plain(a) and b.lin is not None:
        return _lin_map(b.lin, lambda v: a.e * v)
    if _plain(b) and a.lin is not None:
        return _lin_map(a.lin, lambda v: v * b.e)
    return None


def _nonzero(r, o):
    d = Sym.lift(o)
    r.safe = _and(r.safe, d.e != 0)
    return r


def _broadcast(x, idx):
    """x[:, None] keeps x's lanes on axis 0; x[None, :] moves axis-0 lanes to axis 1."""
    if not isinstance(idx, tuple) or len(idx) != 2:
        raise TypeError(f"unsupported index {idx!r}: only [:, None] and [None, :]")
    if idx[0] is None and isinstance(idx[1], slice):
        e, axes = _rename(x.e, x.axes, {0: 1})
        if isinstance(x, Bool):
            return Bool(e, x.exact, x.safe, axes)
        return Sym(e, x.wide, x.safe, _lin_map(x.lin, lambda v: _rename(v, x.axes, {0: 1})[0]), axes)
    if isinstance(idx[0], slice) and idx[1] is None:
        return x
    raise TypeError(f"unsupported index {idx!r}: only [:, None] and [None, :]")


class Bool:
    """A predicate; ``exact`` False: ``e`` is an upper bound of the true predicate."""

    __slots__ = ("e", "exact", "safe", "axes")
    __hash__ = object.__hash__

    def __init__(self, e, exact=True, safe=True, axes=frozenset()):
        self.e, self.exact, self.safe, self.axes = e, exact, safe, frozenset(axes)

    @staticmethod
    def lift(x):
        if isinstance(x, Bool):
            return x
        if isinstance(x, bool):
            return Bool(z3.BoolVal(x))
        return None

    def __and__(self, o):
        b = Bool.lift(o)
        if b is None:  # data: the result is at most self
            return Bool(self.e, False, self.safe, self.axes)
        return Bool(z3.And(self.e, b.e), self.exact and b.exact, _and(self.safe, b.safe), self.axes | b.axes)

    __rand__ = __and__

    def __or__(self, o):
        b = Bool.lift(o)
        if b is None:
            return Bool(z3.BoolVal(True), False, True, self.axes)
        return Bool(z3.Or(self.e, b.e), self.exact and b.exact, _and(self.safe, b.safe), self.axes | b.axes)

    __ror__ = __or__

    def __invert__(self):
        if not self.exact:
            return Bool(z3.BoolVal(True), False, True, self.axes)
        return Bool(z3.Not(self.e), True, self.safe, self.axes)

    def __eq__(self, o):
        b = Bool.lift(o)
        if _is_int(o):
            b = Bool(z3.BoolVal(bool(o)))
        if b is None or not (self.exact and b.exact):
            return Data()
        return Bool(self.e == b.e, True, _and(self.safe, b.safe), self.axes | b.axes)

    def __ne__(self, o):
        r = self.__eq__(o)
        return ~r if isinstance(r, Bool) else r

    def __getitem__(self, idx):
        return _broadcast(self, idx)

    def to(self, dtype=None, **__):
        """An exact predicate as an integer dtype is the 0/1 tile If(e, 1, 0); anything else is data."""
        if self.exact and dtype in (INT32, INT64):
            e = z3.If(self.e, z3.IntVal(1), z3.IntVal(0))
            return Sym(e, dtype is INT64, self.safe, "own", self.axes)
        return Data()

    def __bool__(self):
        from . import kernel_exec

        return kernel_exec.decide(self)


class Ptr:
    """Tensor ``name`` at element offset ``off`` (a Sym)."""

    def __init__(self, name, off=None, dtype=FLOAT32):
        self.name, self.off, self.dtype = name, off if off is not None else Sym.lift(0), _PtrType(dtype)

    def __add__(self, o):
        if isinstance(o, (Data, float)):
            raise TypeError(f"pointer {self.name} offset by data")
        p = Ptr(self.name, self.off + o)
        p.dtype = self.dtype
        return p

    __radd__ = __add__

    def __bool__(self):
        raise TypeError("a branch on a pointer")


class _PtrType:
    def __init__(self, elem):
        self.element_ty = elem


class Desc:
    """A TMA tensor descriptor argument; ``load`` records the block coordinates it is given."""

    def __init__(self, name):
        self.name = name
        self.dtype = _PtrType(FLOAT32)

    def load(self, coords):
        from . import kernel_exec

        kernel_exec.record_desc(self.name, [Sym.lift(c) for c in coords])
        return Data()


def const(x) -> Sym:
    return Sym.lift(x)


def arg(name: str, *, stride=False) -> Sym:
    """An integer kernel argument: i32 when its value fits, else i64 (Triton's specialisation);
    ``stride``: it is a stride, tracked by name in the linear form of addresses."""
    e = z3.Int(name)
    wide = z3.Or(e > I32[1], e < I32[0])
    return Sym(e, wide, True, {name: z3.IntVal(1)} if stride else "own")


class _Math:
    @staticmethod
    def exp2(x):
        return Data()

    log2 = exp2


class _TL:
    """The subset of ``triton.language`` the attention kernels use, on these values."""

    int32, int64, float32 = INT32, INT64, FLOAT32
    float16 = bfloat16 = _Dtype("float16")
    uint8 = _Dtype("uint8")
    math = _Math()

    class constexpr:  # annotation only
        pass

    @staticmethod
    def static_assert(cond, msg=""):
        from . import kernel_exec

        kernel_exec.static_assert(cond, msg)

    @staticmethod
    def static_range(*a):
        return range(*a)

    @staticmethod
    def program_id(axis):
        from . import kernel_exec

        return kernel_exec.program_id(axis)

    @staticmethod
    def num_programs(axis):
        from . import kernel_exec

        return kernel_exec.num_programs(axis)

    @staticmethod
    def arange(lo, hi):
        if lo != 0:
            raise TypeError("arange(lo, hi) with lo != 0 is not modelled")
        k = next(_ids)
        LANES[(k, 0)] = (z3.Int(f"lane{k}_0"), hi)
        return Sym(LANES[(k, 0)][0], False, True, "own", {(k, 0)})

    @staticmethod
    def full(*_, **__):
        return Data()

    zeros = zeros_like = dot = full

    @staticmethod
    def cumsum(x, axis=0, **_):
        """Of a 0/1 integer lane tile: its inclusive prefix sums, through the enclosing loop's ghost count
        (``kernel_exec``); of data: data."""
        if isinstance(x, Sym):
            from . import kernel_exec

            if axis != 0:
                raise TypeError("tl.cumsum of an integer tile along an axis other than 0 is not modelled")
            return kernel_exec.count(x, total=False)
        return Data()

    @staticmethod
    def sum(x, axis=None, **_):
        """Of a 0/1 integer lane tile: the number of lanes on (``kernel_exec.count``); of data: data."""
        if isinstance(x, Sym):
            from . import kernel_exec

            if axis != 0:
                raise TypeError("tl.sum of an integer tile along an axis other than 0 is not modelled")
            return kernel_exec.count(x, total=True)
        return Data()

    @staticmethod
    def trans(x):
        if isinstance(x, (Sym, Bool)):
            e, axes = _rename(x.e, x.axes, {0: 1, 1: 0})
            if isinstance(x, Bool):
                return Bool(e, x.exact, x.safe, axes)
            return Sym(e, x.wide, x.safe, None, axes)
        return Data()

    @staticmethod
    def max(x, *a, **k):
        """A maximum is data (a value no index or mask may use: data in an address or branch is refused)."""
        return Data()

    @staticmethod
    def where(c, a, b):
        if isinstance(a, (Sym, int)) and isinstance(b, (Sym, int)) and isinstance(c, Bool) and c.exact \
                and not isinstance(a, bool) and not isinstance(b, bool):
            a, b = Sym.lift(a), Sym.lift(b)
            wide = _or(a.wide, b.wide)
            e = z3.If(c.e, a.e, b.e)
            return Sym(e, wide, _and(c.safe, a.safe, b.safe), {None: e} if _plain(a) and _plain(b) else None,
                       c.axes | a.axes | b.axes)
        return Data()

    @staticmethod
    def _minmax(a, b, pick):
        if isinstance(a, Data) or isinstance(b, Data) or isinstance(a, float) or isinstance(b, float):
            return Data()
        a, b = Sym.lift(a), Sym.lift(b)
        e = z3.If(pick(a.e, b.e), a.e, b.e)
        return Sym(e, _or(a.wide, b.wide), _and(a.safe, b.safe), {None: e} if _plain(a) and _plain(b) else None,
                   a.axes | b.axes)

    @staticmethod
    def minimum(a, b):
        return _TL._minmax(a, b, lambda x, y: x <= y)

    @staticmethod
    def maximum(a, b):
        return _TL._minmax(a, b, lambda x, y: x >= y)

    @staticmethod
    def load(ptr, mask=None, other=None, **_):
        from . import kernel_exec

        return kernel_exec.record_access("load", ptr, mask)

    @staticmethod
    def store(ptr, value, mask=None, **_):
        from . import kernel_exec

        kernel_exec.record_access("store", ptr, mask, value)


TL = _TL()
