"""The branching-uniform backend: the exact law of a sampler, obtained by running its code.

A sampler in ``verified.speculative`` takes its randomness as uniforms u ∈ [0, 1) and only ever
uses a uniform in a *decision* ``u·c < t`` (c ≥ 0): the accept test u·p_draft(x) < p_target(x) and
the comparisons of an inverse-CDF draw. This backend passes a ``Uniform`` object instead of a
number. Each decision on it forks the run: the uniform's interval [lo, hi) (initially [0, 1)) is
split at s = clamp(t/c, lo, hi) into [lo, s) (decision true) and [s, hi) (decision false). A
path's probability is the product over its uniforms of hi − lo, so correlated uses of ONE uniform
(a bug: reusing it across positions) are accounted for exactly, not assumed independent.

``emission_law(fn)`` re-runs ``fn(num)`` depth-first over every decision sequence (replay, no
threads) and returns ``{outcome: probability}``. Data (the probability tables) live in a base
number system: ``"fraction"`` (exact rationals; zero-probability branches are pruned) or ``"z3"``
(symbolic reals; weights become z3 terms with ``If``, nothing can be pruned, so keep it to tiny V).

Decisions are Python bools in every system the sampler runs on (a concrete uniform compares
concretely; here the run forks), so the sampler may stop a scan at the first true decision.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .numbers import NumberSystem, resolve

__all__ = ["Uniform", "Scaled", "BranchingNum", "emission_law", "canonical"]


class Uniform(NamedTuple):
    """A fresh uniform on [0, 1); ``id`` is its creation index within one run."""

    id: int


class Scaled(NamedTuple):
    """The number u·c for a uniform u and a data value c ≥ 0 (the only arithmetic a uniform allows)."""

    u: Uniform
    c: Any


class _Abort(Exception):
    """Raised when a path is cut (its weight is exactly zero)."""


class BranchingNum(NumberSystem):
    """Linear arithmetic and data conditions of ``base``; uniforms fork the run.

    One instance serves one run (one path): ``emission_law`` creates a fresh one per path.
    """

    symbolic = False

    def __init__(self, base: Any = "fraction", *, choices: tuple = ()):
        self.base = resolve(base)
        self.name = f"branching[{self.base.name}]"
        self.exact_concrete = not self.base.symbolic
        self._choices = list(choices)  # decisions to replay (0 = first option)
        self._pos = 0
        self._arity: list[int] = []  # options at each decision taken in this run
        self._iv: dict[int, tuple] = {}
        self._n_uniforms = 0

    # --- data: delegated to the base system ----------------------------------------------
    def const(self, x):
        return self.base.const(x)

    def add(self, a, b):
        return self.base.add(a, b)

    def sub(self, a, b):
        return self.base.sub(a, b)

    def div(self, a, b):
        return self.base.div(a, b)

    def neg(self, a):
        return self.base.neg(a)

    def mul(self, a, b):
        if isinstance(a, Uniform):
            return Scaled(a, b)
        if isinstance(b, Uniform):
            return Scaled(b, a)
        if isinstance(a, Scaled) or isinstance(b, Scaled):
            raise TypeError("a uniform may be scaled once (u·c); the sampler never forms u·c·d")
        return self.base.mul(a, b)

    def ge(self, a, b):
        self._no_uniform(a, b)
        return self.base.ge(a, b)

    def gt(self, a, b):
        """a > b. With ``b = u·c`` this is the decision u·c < a, which forks the run."""
        if isinstance(b, Scaled) and not isinstance(a, (Scaled, Uniform)):
            return self._decide(b.u, b.c, a)
        if isinstance(b, Uniform):
            return self._decide(b, self.base.one(), a)
        self._no_uniform(a, b)
        return self.base.gt(a, b)

    def is_finite(self, a):
        return True

    def and_(self, a, b):
        return self.base.and_(a, b)

    def or_(self, a, b):
        return self.base.or_(a, b)

    def not_(self, a):
        return self.base.not_(a)

    def where(self, cond, a, b):
        return self.base.where(cond, a, b)

    # --- uniforms ------------------------------------------------------------------------
    def uniform(self) -> Uniform:
        """A fresh uniform on [0, 1), independent of every other."""
        u = Uniform(self._n_uniforms)
        self._n_uniforms += 1
        self._iv[u.id] = (self.base.zero(), self.base.one())
        return u

    def _no_uniform(self, *xs):
        if any(isinstance(x, (Uniform, Scaled)) for x in xs):
            raise TypeError("a uniform may only appear in a decision a > u·c (use gt)")

    def _clamp(self, x, lo, hi):
        b = self.base
        x = b.where(b.ge(x, lo), x, lo)
        return b.where(b.ge(hi, x), x, hi)

    def _decide(self, u: Uniform, c, t) -> bool:
        """Fork on u·c < t. True branch: u ∈ [lo, s); false branch: u ∈ [s, hi)."""
        b = self.base
        lo, hi = self._iv[u.id]
        zero = b.zero()
        # c > 0: split at t/c. c = 0: the decision is 0 < t, the same for every u.
        c_pos = b.gt(c, zero)
        c_safe = b.where(c_pos, c, b.one())
        s = b.where(c_pos, self._clamp(b.div(t, c_safe), lo, hi), b.where(b.gt(t, zero), hi, lo))
        options = [(True, (lo, s)), (False, (s, hi))]
        if self.exact_concrete:  # prune zero-measure branches
            options = [o for o in options if o[1][1] > o[1][0]]
        if not options:
            raise _Abort
        k = self._choose(len(options))
        value, self._iv[u.id] = options[k]
        return value

    def _choose(self, n: int) -> int:
        if self._pos < len(self._choices):
            k = self._choices[self._pos]
        else:
            k = 0
            self._choices.append(0)
        self._arity.append(n)
        self._pos += 1
        return k

    def weight(self):
        """This path's probability: Π over uniforms of the length of its interval."""
        b = self.base
        w = b.one()
        for lo, hi in self._iv.values():
            w = b.mul(w, b.sub(hi, lo))
        return w


def emission_law(fn: Callable[[BranchingNum], Any], base: Any = "fraction", *, max_paths: int = 1_000_000) -> dict:
    """{outcome: probability} of ``fn(num)`` over all decision paths (outcomes must be hashable).

    With a symbolic base the probabilities are terms (summed per outcome); zero-measure paths are
    then kept, so outcomes with weight identically 0 may appear (see ``canonical``)."""
    law: dict = {}
    stack = [()]
    paths = 0
    while stack:
        prefix = stack.pop()
        num = BranchingNum(base, choices=prefix)
        try:
            out = fn(num)
        except _Abort:
            continue
        paths += 1
        if paths > max_paths:
            raise ValueError(f"more than {max_paths} paths: shrink the problem")
        taken = num._choices[:num._pos]
        # schedule the untried alternatives of every decision made beyond the replayed prefix
        for d in range(len(prefix), len(taken)):
            for alt in range(1, num._arity[d]):
                stack.append(tuple(taken[:d]) + (alt,))
        w = num.weight()
        law[out] = num.base.add(law[out], w) if out in law else w
    return law


def canonical(law: dict) -> dict:
    """Drop outcomes of (concrete) probability 0 so that two laws compare as dicts."""
    return {k: v for k, v in law.items() if v != 0}
