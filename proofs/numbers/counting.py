"""A counting number system: the reference runs on it unchanged and it measures, by machine,

* every unit-cost event of the page's model (assumption A-UNIT-COST): scalar arithmetic, exp/log,
  comparisons (a max is one comparison), and mask-membership queries (through ``counted_mask``);
* live storage: every scalar the reference holds is a ``Tracked`` float (mask flags a ``Flag``); a
  class-wide counter goes up when one is created and down when CPython frees it, so ``peak`` is the
  largest number of scalars alive at once — an n×n score array would show up as n² of them.

``where`` (choosing between two existing values) is not an operation of the model and is not
counted; it allocates nothing.
"""
from __future__ import annotations

import math
from collections import Counter

from flashproof.verified.numbers import NumberSystem

__all__ = ["Tracked", "Flag", "CountingNum", "counted_mask", "Live"]


class Live:
    """The live-scalar counter (class-wide; one measurement at a time)."""

    now = 0
    peak = 0

    @classmethod
    def reset(cls) -> None:
        cls.peak = cls.now

    @classmethod
    def _inc(cls) -> None:
        cls.now += 1
        if cls.now > cls.peak:
            cls.peak = cls.now

    @classmethod
    def _dec(cls) -> None:
        cls.now -= 1


class Tracked(float):
    """A float that counts itself alive."""

    __slots__ = ()

    def __new__(cls, x):
        Live._inc()
        return super().__new__(cls, x)

    def __del__(self):
        Live._dec()


class Flag:
    """A mask flag that counts itself alive (a stored boolean is a stored scalar too)."""

    __slots__ = ("v",)

    def __init__(self, v: bool):
        Live._inc()
        self.v = bool(v)

    def __bool__(self):
        return self.v

    def __del__(self):
        Live._dec()


class CountingNum(NumberSystem):
    """Float arithmetic on ``Tracked`` values, with an operation ``Counter`` in ``self.ops``."""

    name = "counting"

    def __init__(self):
        self.ops: Counter = Counter()

    def _t(self, kind: str, x) -> Tracked:
        self.ops[kind] += 1
        return Tracked(x)

    def const(self, x):
        return Tracked(float(x))

    def add(self, a, b):
        return self._t("arith", a + b)

    def sub(self, a, b):
        return self._t("arith", a - b)

    def mul(self, a, b):
        return self._t("arith", a * b)

    def div(self, a, b):
        return self._t("arith", a / b)

    def neg(self, a):
        return self._t("arith", -a)

    def ge(self, a, b):
        self.ops["compare"] += 1
        return a >= b

    def gt(self, a, b):
        self.ops["compare"] += 1
        return a > b

    def exp(self, s):
        return self._t("exp", math.exp(s))

    def log(self, x):
        return self._t("exp", math.log(x) if x > 0 else float("-inf"))

    def total(self) -> int:
        return sum(self.ops.values())


def counted_mask(num: CountingNum, allowed=None):
    """A mask predicate (i, j) -> Flag that counts each membership query in ``num.ops['mask']``."""
    sets = None if allowed is None else [frozenset(s) for s in allowed]

    def pred(i, j):
        num.ops["mask"] += 1
        return Flag(True if sets is None else j in sets[i])

    return pred
