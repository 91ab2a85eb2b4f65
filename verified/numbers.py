"""Number systems behind one small protocol.

The reference in this package never touches a number directly: every arithmetic step, every
comparison and every data-dependent choice goes through a ``NumberSystem``. The same reference
function therefore runs on Python floats (the fuzzing oracle), on mpmath at a chosen precision, on
mpmath intervals (a certified enclosure), on exact Fractions, on sympy expressions (to
differentiate) and on z3 terms (to prove).

Two sorts of number appear in attention:

* **linear values** (entries of Q, K, V, G, normalisers ℓ, weighted sums z, outputs Y) with
  ``add, sub, mul, div, neg``;
* **scores** (s, the running max m, the log-sum-exp), which only ever enter the algorithm through
  ``score_sub`` (s − m), ``score_max``, ``score_add`` (m + log ℓ), ``exp`` (score → linear) and
  ``log`` (linear → score).

In the ordinary ("log") domain both sorts are the same numbers. In the *exp domain*
(``verified.expdomain``) a score s is represented by its weight w = e^s ≥ 0 (w = 0 is s = −∞),
so s − m becomes w / W, max stays max, exp(s) is w itself: no exponential ever reaches the
solver. That substitution is the assumption ``A-EXP-ISO`` of the registry (exp is an order
isomorphism from (ℝ ∪ {−∞}, +, ≤) onto (ℝ≥0, ·, ≤)).

Conditions (``score_ge``, mask flags, ``and_``, ``or_``, ``not_``, ``any_``) are Python bools in
the concrete systems and solver formulas in the symbolic ones; ``where(cond, a, b)`` is the only
way the reference chooses between data values. A concrete ``where`` picks eagerly, so both
branches must be *computable* (the reference guards every division and every exponent argument
so that they are), but only the chosen one is used.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

__all__ = ["NumberSystem", "FloatNum", "MpmathNum", "IntervalNum", "SympyNum", "resolve", "register",
           "available"]


class NumberSystem:
    """The protocol. Subclasses override the arithmetic; the condition helpers here are shared.

    Every method is a pure function of its arguments. ``note_alloc``/``note_free`` are hooks that
    a counting system uses to measure live workspace; they do nothing by default.
    """

    name = "abstract"
    symbolic = False  # True when conditions may be solver formulas rather than Python bools

    # --- linear values -------------------------------------------------------------------
    def const(self, x: Any) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        return self.const(0)

    def one(self) -> Any:
        return self.const(1)

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    def neg(self, a):
        return -a

    def ge(self, a, b):
        """Condition a ≥ b on linear values."""
        return a >= b

    def gt(self, a, b):
        return a > b

    def is_finite(self, a) -> bool:
        """True unless ``a`` is a concrete NaN or infinity (symbolic terms count as finite)."""
        try:
            return math.isfinite(a)
        except (TypeError, ValueError):
            return True  # a symbolic term: no concrete value to check

    # --- scores (log domain) -------------------------------------------------------------
    def to_score(self, x):
        """A score from a linear value (s = c·⟨q, k⟩ is computed linearly, then read as a score)."""
        return x

    def score_const(self, x: Any):
        """A score from a Python number; ``float('-inf')`` is the empty maximum."""
        return self.const(x)

    def score_neg_inf(self):
        return self.score_const(float("-inf"))

    def score_zero(self):
        return self.score_const(0)

    def score_sub(self, a, b):
        return self.sub(a, b)

    def score_add(self, a, b):
        return self.add(a, b)

    def score_ge(self, a, b):
        return self.ge(a, b)

    def score_max(self, a, b):
        return self.where(self.score_ge(a, b), a, b)

    def exp(self, s):
        raise NotImplementedError

    def log(self, x):
        raise NotImplementedError

    # --- conditions ----------------------------------------------------------------------
    def true(self):
        return True

    def false(self):
        return False

    def and_(self, a, b):
        return a and b

    def or_(self, a, b):
        return a or b

    def not_(self, a):
        return not a

    def any_(self, conds):
        acc = self.false()
        for c in conds:
            acc = self.or_(acc, c)
        return acc

    def where(self, cond, a, b):
        """``a`` where ``cond`` holds, else ``b``. Concrete systems pick eagerly."""
        return a if cond else b

    # --- instrumentation hooks -----------------------------------------------------------
    def note_alloc(self, kind: str, size: int) -> None:
        """Called when the reference allocates ``size`` scalars of workspace named ``kind``."""

    def note_free(self, kind: str, size: int) -> None:
        """Called when that workspace is released."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class FloatNum(NumberSystem):
    """IEEE double precision, Python ``float``. ``exp`` of a score ≤ 0 never overflows."""

    name = "float"

    def const(self, x):
        return float(x)

    def div(self, a, b):
        return a / b

    def exp(self, s):
        return math.exp(s)

    def log(self, x):
        return math.log(x) if x > 0 else float("-inf")



class MpmathNum(NumberSystem):
    """mpmath ``mpf`` in a private context at ``dps`` decimal digits (default 60)."""

    def __init__(self, dps: int = 60):
        import mpmath

        self.ctx = mpmath.MPContext()
        self.ctx.dps = dps
        self.dps = dps
        self.name = f"mpmath[{dps}]"

    def const(self, x):
        if isinstance(x, Fraction):
            return self.ctx.mpf(x.numerator) / x.denominator
        return self.ctx.mpf(x)

    def exp(self, s):
        return self.ctx.exp(s)

    def log(self, x):
        return self.ctx.log(x) if x > 0 else self.ctx.mpf("-inf")



class IntervalNum(NumberSystem):
    """mpmath interval arithmetic at ``dps`` digits: every result is an interval that encloses the
    exact real result of the same computation on the (exactly representable) inputs."""

    def __init__(self, dps: int = 30):
        from mpmath import ctx_iv

        self.ctx = ctx_iv.MPIntervalContext()
        self.ctx.dps = dps
        self.dps = dps
        self.name = f"interval[{dps}]"

    def const(self, x):
        if isinstance(x, Fraction):
            return self.ctx.mpf(x.numerator) / x.denominator
        if isinstance(x, float) and not math.isfinite(x):
            return self.ctx.mpf(str(x))
        return self.ctx.mpf(x)

    def score_max(self, a, b):
        # Interval maximum: [max(lo), max(hi)]; no (uncertain) comparison needed.
        lo = a.a if a.a >= b.a else b.a
        hi = a.b if a.b >= b.b else b.b
        return self.ctx.mpf([lo, hi])

    def score_ge(self, a, b):
        raise TypeError("interval scores are never compared; use score_max")

    def exp(self, s):
        if s.b == self.ctx.mpf("-inf").b:  # the score −∞ exactly
            return self.ctx.mpf(0)
        return self.ctx.exp(s)

    def log(self, x):
        return self.ctx.log(x)



class SympyNum(NumberSystem):
    """sympy expressions, for differentiation. Rationals stay exact; ``exp``/``log`` are sympy's.

    ``score_max`` is ``sympy.Max``; the reverse pass treats the stored maximum as a frozen shift, so
    a proof may also substitute any symbol for it (see ``proofs``).
    """

    name = "sympy"
    symbolic = True

    def __init__(self):
        import sympy

        self.sp = sympy

    def const(self, x):
        if isinstance(x, float) and math.isinf(x):
            return self.sp.oo if x > 0 else -self.sp.oo
        return self.sp.sympify(x) if not isinstance(x, float) else self.sp.nsimplify(x)

    def score_max(self, a, b):
        return self.sp.Max(a, b)

    def exp(self, s):
        return self.sp.exp(s)

    def log(self, x):
        return self.sp.log(x)

    def where(self, cond, a, b):
        if isinstance(cond, bool):
            return a if cond else b
        return self.sp.Piecewise((a, cond), (b, True))


_FACTORIES: dict[str, Callable[[], NumberSystem]] = {
    "float": FloatNum,
    "mpmath": MpmathNum,
    "interval": IntervalNum,
    "sympy": SympyNum,
}


def register(name: str, factory: Callable[[], NumberSystem]) -> None:
    """Make ``factory()`` available as ``num=name``."""
    _FACTORIES[name] = factory


def available() -> list[str]:
    """Names accepted by ``resolve``."""
    _load_lazy()
    return sorted(_FACTORIES)


def _load_lazy() -> None:
    from . import expdomain  # noqa: F401  (registers "fraction" and "z3")


def resolve(num: Any) -> NumberSystem:
    """A number system from a name or an adapter object; ``None`` is ``"float"``."""
    if num is None:
        return FloatNum()
    if isinstance(num, NumberSystem):
        return num
    if isinstance(num, str):
        _load_lazy()
        if num in _FACTORIES:
            return _FACTORIES[num]()
        raise ValueError(f"unknown number system {num!r}: expected one of {sorted(_FACTORIES)} "
                         "or a NumberSystem instance")
    raise ValueError(f"num must be a name or a NumberSystem, received {type(num).__name__}")
