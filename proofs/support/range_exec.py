"""Run plain-Python reference code whose loops are ``range`` loops with symbolic (z3 Int) bounds.

``shim(fn, **names)`` returns ``fn`` with its own code object and its globals copied, ``range``
and ``min`` replaced by the symbolic versions below (and any other global named in ``names``
replaced by the value given: a helper shimmed the same way, or a recorder). Nothing is retyped:
the code that runs is the reference's.

* ``range(lo, hi[, step])`` with a symbolic argument is a ``SymRange``: its ``start``, ``stop``,
  ``step`` are the arguments (as z3 terms). Iterating it yields ONE element, x = lo + step·t for a
  fresh z3 Int t, and appends that iteration's scope (t ≥ 0, x < hi, the Python semantics of a
  range with positive step) to ``SCOPES``. A loop over a SymRange therefore runs its body once,
  for an arbitrary iteration; that covers every iteration only when the body carries no state
  from one iteration to the next, which the callers argue for each function they run.
* ``min(a, b)`` is z3's ``If(b < a, b, a)`` (Python's ``min`` returns the first of equal values).

Only a positive step is modelled: the callers' steps are block sizes b ≥ 1 (the reference
validates them), and the callers put b ≥ 1 among their hypotheses.
"""
from __future__ import annotations

import itertools
import types
from typing import Any, NamedTuple

import z3

__all__ = ["SymRange", "Scope", "SCOPES", "RANGES", "clear", "shim", "sym_range", "sym_min"]

_ids = itertools.count()


class Scope(NamedTuple):
    """One symbolic iteration: ``t`` (its index, a z3 Int), ``x`` (the element) and ``conds``
    (z3 Bools: t ≥ 0 and x < stop)."""

    t: Any
    x: Any
    conds: tuple


#: the iterations the last run entered, in order, and every SymRange it built (the caller clears both)
SCOPES: list[Scope] = []
RANGES: list = []


def _lift(a):
    return z3.IntVal(a) if isinstance(a, int) else a


class SymRange:
    """``range(start, stop, step)`` with z3 Int terms; iterating yields one arbitrary element."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = _lift(start), _lift(stop), _lift(step)
        RANGES.append(self)

    def __iter__(self):
        t = z3.Int(f"t{next(_ids)}")
        x = self.start + self.step * t
        SCOPES.append(Scope(t, x, (t >= 0, x < self.stop)))
        yield x

    def __repr__(self):
        return f"SymRange({self.start}, {self.stop}, {self.step})"


def clear() -> None:
    SCOPES.clear()
    RANGES.clear()


def sym_range(*a):
    if all(isinstance(x, int) for x in a):
        return range(*a)
    lo, hi, step = (0, a[0], 1) if len(a) == 1 else (a[0], a[1], a[2] if len(a) > 2 else 1)
    return SymRange(lo, hi, step)


def sym_min(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    a, b = _lift(a), _lift(b)
    return z3.If(b < a, b, a)


def shim(fn, **names):
    """``fn``'s code with ``range``/``min`` symbolic and the globals in ``names`` replaced."""
    g = dict(fn.__globals__)
    g["range"], g["min"] = sym_range, sym_min
    g.update(names)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)

