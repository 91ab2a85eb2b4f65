"""The oracle's number systems against exact arithmetic (EXT-ORACLE-NUMBERS).

The fuzzer's verdicts rest on ``FloatNum`` (IEEE double), ``MpmathNum`` (60 digits) and
``IntervalNum`` (the certified enclosure); ``make prove`` checks each against exact Fractions on
seeded samples, with e^x enclosed rigorously by ``proofs/support/exact_exp.py``:

* ATT-ORACLE-FLOAT — ``FloatNum``: const, add, sub, mul, div correctly rounded (equal to the exact
  Fraction result rounded to the nearest double); exp and log within one ulp of the exact value
  (for log, checked through exp: log x ∈ [y − u, y + u] ⟺ e^{y−u} ≤ x ≤ e^{y+u}); log 0 = −∞.
  ``MpmathNum``: every operation within one ulp of its working precision.
* ATT-ORACLE-INTERVAL — ``IntervalNum`` encloses the exact result on inputs that are not binary
  fractions (1/3, 1/10, 2/7, …): const, the four operations, exp and log, and the whole reference
  (``tiled_forward`` + ``tiled_backward``) on a problem with K = 0, where every score is exactly 0
  and the exact outputs are rational (Y_i the mean of the allowed V_j, dV_j = Σ_i G_i/|A_i|,
  dK_j = c·Σ_i γ_ij Q_i with γ_ij = (⟨G_i,V_j⟩ − ⟨G_i,Y_i⟩)/|A_i|, dQ = 0, lse_i = log |A_i|).

"One ulp" is the error model these checks state for the two rounding systems; a sample is proved
when the exact enclosure lies inside it, refuted when it lies outside, unknown otherwise.
"""
from __future__ import annotations

import math
import random
from fractions import Fraction
from unittest.mock import patch

from flashproof.verified import attention as att
from flashproof.verified.numbers import FloatNum, IntervalNum, MpmathNum

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.support.exact_exp import exp_bounds

NON_BINARY = [Fraction(1, 3), Fraction(1, 10), Fraction(2, 7), Fraction(-5, 3), Fraction(7, 10), Fraction(-1, 9)]


def _samples(k: int, seed: int, lo_exp=-8, hi_exp=4):
    rng = random.Random(seed)
    return [rng.choice((-1, 1)) * rng.uniform(1, 2) * 2.0 ** rng.randint(lo_exp, hi_exp) for _ in range(k)]


def _show(lo: Fraction, hi: Fraction) -> str:
    """A point as its exact fraction, an interval by its endpoints (as doubles)."""
    return str(lo) if lo == hi else f"[{float(lo)!r}, {float(hi)!r}]"


class _Verdict:
    """Collects the first refuted or undecided sample of a check."""

    def __init__(self):
        self.refuted = None
        self.unknown = None
        self.count = 0

    def inside(self, what: str, x_lo: Fraction, x_hi: Fraction, lo: Fraction, hi: Fraction, **ctx) -> None:
        """The exact value t ∈ [lo, hi] must lie in the claimed set [x_lo, x_hi]."""
        self.count += 1
        if x_lo <= lo and hi <= x_hi:
            return
        record = {"check": what, "claimed": _show(x_lo, x_hi), "exact": _show(lo, hi),
                  **{k: str(v) for k, v in ctx.items()}}
        if hi < x_lo or lo > x_hi:
            self.refuted = self.refuted or record
        else:
            self.unknown = self.unknown or record

    def outcome(self, solver: str, detail: str) -> Outcome:
        if self.refuted:
            return Outcome("refuted", counterexample=self.refuted, solver=solver, detail=f"{self.refuted['check']}")
        if self.unknown:
            return Outcome("unknown", solver=solver, detail=f"enclosure too wide to decide: {self.unknown}")
        return Outcome("proved", solver=solver, detail=f"{self.count} samples: {detail}")


def _within(v: _Verdict, what, y: Fraction, ulp: Fraction, exact: Fraction | tuple, **ctx):
    lo, hi = (exact, exact) if isinstance(exact, Fraction) else exact
    v.inside(what, y - ulp, y + ulp, lo, hi, **ctx)


def _log_within(v: _Verdict, what, y: Fraction, ulp: Fraction, x: Fraction, **ctx):
    """log x ∈ [y − u, y + u] ⟺ e^{y−u} ≤ x ≤ e^{y+u}: x must lie in that exp-image."""
    lo_lo, lo_hi = exp_bounds(y - ulp)
    hi_lo, hi_hi = exp_bounds(y + ulp)
    v.count += 1
    if lo_hi <= x <= hi_lo:
        return
    record = {"check": what, "log_value": repr(float(y)), "log_of": str(x), **{k: str(c) for k, c in ctx.items()}}
    if x < lo_lo or x > hi_hi:
        v.refuted = v.refuted or record
    else:
        v.unknown = v.unknown or record


def _float_checks(v: _Verdict, k: int) -> None:
    N = FloatNum()
    xs, ys = _samples(k, 1), _samples(k, 2)
    for x in NON_BINARY:
        y = N.const(x)
        v.inside("FloatNum.const rounds to nearest", Fraction(y), Fraction(y), Fraction(float(x)), Fraction(float(x)), x=x)
    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b}
    for a, b in zip(xs, ys):
        for name, exact in ops.items():
            want = Fraction(float(exact(Fraction(a), Fraction(b))))  # exact, then rounded once to nearest
            got = Fraction(getattr(N, name)(a, b))
            v.inside(f"FloatNum.{name} correctly rounded", got, got, want, want, a=repr(a), b=repr(b))
    for s in _samples(k, 3, -6, 4):
        s = max(min(s, 700.0), -700.0)
        y = N.exp(s)
        _within(v, "FloatNum.exp within one ulp", Fraction(y), Fraction(math.ulp(y)), exp_bounds(Fraction(s)), s=repr(s))
    for x in [abs(t) for t in _samples(k, 4, -12, 12)]:
        y = N.log(x)
        _log_within(v, "FloatNum.log within one ulp", Fraction(y), Fraction(math.ulp(y)), Fraction(x))
    if N.log(0.0) != float("-inf"):
        v.refuted = v.refuted or {"check": "FloatNum.log(0) = -inf", "received": repr(N.log(0.0))}


def _mpf_fraction(t) -> Fraction:
    sign, man, exp, _ = t
    if man == 0:
        raise ValueError(f"expected a finite nonzero mpf, received {t}")
    return (-1) ** sign * Fraction(man) * Fraction(2) ** exp


def _mp_ulp(t, prec: int) -> Fraction:
    _, man, exp, bc = t
    return Fraction(2) ** (exp + bc - prec)


def _mpmath_checks(v: _Verdict, k: int) -> None:
    N = MpmathNum()
    prec = N.ctx.prec
    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b}
    pairs = list(zip(NON_BINARY, NON_BINARY[1:] + NON_BINARY[:1])) + [(Fraction(a), Fraction(b))
                                                                      for a, b in zip(_samples(k, 5), _samples(k, 6))]
    for a, b in pairs:
        A, B = N.const(a), N.const(b)
        for name, val, exact in ((f"const({a})", A, a), (f"const({b})", B, b)):
            _within(v, f"MpmathNum.{name} within one ulp", _mpf_fraction(val._mpf_), _mp_ulp(val._mpf_, prec), exact)
        for name, exact in ops.items():
            y = getattr(N, name)(A, B)
            want = exact(_mpf_fraction(A._mpf_), _mpf_fraction(B._mpf_))
            _within(v, f"MpmathNum.{name} within one ulp", _mpf_fraction(y._mpf_), _mp_ulp(y._mpf_, prec), want,
                    a=a, b=b)
    for s in [Fraction(x) for x in _samples(k, 7, -6, 4)] + NON_BINARY:
        S = N.const(s)
        y = N.exp(S)
        _within(v, "MpmathNum.exp within one ulp", _mpf_fraction(y._mpf_), _mp_ulp(y._mpf_, prec),
                exp_bounds(_mpf_fraction(S._mpf_), bits=prec + 64), s=s)
    for x in [abs(Fraction(t)) for t in _samples(k, 8, -12, 12)] + [abs(t) for t in NON_BINARY]:
        X = N.const(x)
        y = N.log(X)
        yf = _mpf_fraction(y._mpf_) if y._mpf_[1] else Fraction(0)
        u = _mp_ulp(y._mpf_, prec) if y._mpf_[1] else Fraction(2) ** -prec
        lo_lo, lo_hi = exp_bounds(yf - u, bits=prec + 64)
        hi_lo, hi_hi = exp_bounds(yf + u, bits=prec + 64)
        xf = _mpf_fraction(X._mpf_)
        v.inside("MpmathNum.log within one ulp", lo_hi, hi_lo, xf, xf, x=x)


@obligation("ATT-ORACLE-FLOAT", checks=["EXT-ORACLE-NUMBERS"],
            bounds={"samples": 40, "error_model": "float: + − × ÷ correctly rounded, exp/log ≤ 1 ulp; mpmath[60]: ≤ 1 ulp"},
            deep_bounds={"samples": 400, "error_model": "float: + − × ÷ correctly rounded, exp/log ≤ 1 ulp; mpmath[60]: ≤ 1 ulp"},
            assumptions=[], solver="exact")
def oracle_float(ctx):
    """FloatNum and MpmathNum agree with exact Fractions on sampled inputs, to their stated rounding."""
    v = _Verdict()
    _float_checks(v, ctx.bounds["samples"])
    _mpmath_checks(v, ctx.bounds["samples"])
    return v.outcome("exact", "FloatNum + − × ÷ correctly rounded, exp/log ≤ 1 ulp; MpmathNum ≤ 1 ulp")


@control("ATT-ORACLE-FLOAT/log2", of="ATT-ORACLE-FLOAT", bug="FloatNum.log returns log2 x instead of the natural log")
def oracle_float_log2(ctx):
    with patch.object(FloatNum, "log", mutants.float_log_base2):
        return oracle_float(ctx)


# ---------------------------------------------------------------------------------- intervals

def _iv_bounds(x) -> tuple[Fraction, Fraction]:
    lo, hi = x._mpi_
    return _mpf_fraction(lo) if lo[1] else Fraction(0), _mpf_fraction(hi) if hi[1] else Fraction(0)


def _encloses(v: _Verdict, what: str, iv, exact, **ctx) -> None:
    a, b = _iv_bounds(iv)
    lo, hi = (exact, exact) if isinstance(exact, Fraction) else exact
    v.inside(what, a, b, lo, hi, **ctx)


def _log_encloses(v: _Verdict, what: str, iv, arg: Fraction, **ctx) -> None:
    a, b = _iv_bounds(iv)
    v.count += 1
    if exp_bounds(a)[1] <= arg <= exp_bounds(b)[0]:
        return
    record = {"check": what, "interval": f"[{float(a)!r}, {float(b)!r}]", "log_of": str(arg),
              **{k: str(c) for k, c in ctx.items()}}
    if arg < exp_bounds(a)[0] or arg > exp_bounds(b)[1]:
        v.refuted = v.refuted or record
    else:
        v.unknown = v.unknown or record


def _exact_zero_scores(Q, V, G, c, allowed):
    """The theorem's outputs when every score is 0 (K = 0): uniform weights 1/|A_i| over A_i."""
    n_q, n_k, d, v = len(Q), len(V), len(Q[0]), len(V[0])
    Y = [[sum((V[j][a] for j in A), Fraction(0)) / len(A) for a in range(v)] for A in allowed]
    dv = [[sum((G[i][a] / len(A) for i, A in enumerate(allowed) if j in A), Fraction(0)) for a in range(v)]
          for j in range(n_k)]
    dk = [[Fraction(0)] * d for _ in range(n_k)]
    for i, A in enumerate(allowed):
        delta = sum(G[i][a] * Y[i][a] for a in range(v))
        for j in A:
            gamma = (sum(G[i][a] * V[j][a] for a in range(v)) - delta) / len(A)
            for r in range(d):
                dk[j][r] += c * gamma * Q[i][r]
    return Y, dk, dv


def _interval(ctx) -> Outcome:
    N = IntervalNum()
    v = _Verdict()
    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b}
    for a in NON_BINARY:
        _encloses(v, "IntervalNum.const encloses", N.const(a), a, x=a)
        _encloses(v, "IntervalNum.exp encloses", N.exp(N.const(a)), exp_bounds(a), x=a)
        _log_encloses(v, "IntervalNum.log encloses", N.log(N.const(abs(a))), abs(a), x=abs(a))
        for b in NON_BINARY:
            for name, exact in ops.items():
                _encloses(v, f"IntervalNum.{name} encloses", getattr(N, name)(N.const(a), N.const(b)), exact(a, b), a=a, b=b)
    # the whole reference, K = 0: every score exactly 0, exact outputs rational
    n_q, n_k, d, dv_ = 3, 4, 2, 2
    pick = lambda t: NON_BINARY[t % len(NON_BINARY)]  # noqa: E731
    Q = [[pick(i * d + r) for r in range(d)] for i in range(n_q)]
    K = [[Fraction(0)] * d for _ in range(n_k)]
    V = [[pick(3 * j + a + 1) for a in range(dv_)] for j in range(n_k)]
    G = [[pick(5 * i + a + 2) for a in range(dv_)] for i in range(n_q)]
    allowed = [{0}, {0, 2, 3}, {1, 2}]
    c = Fraction(1, 3)
    fw = att.tiled_forward(Q, K, V, scale=c, block=2, allowed=allowed, num=N)
    gr = att.tiled_backward(Q, K, V, G, fw, scale=c, block=2, allowed=allowed, num=N)
    Y, dk, dv = _exact_zero_scores(Q, V, G, c, allowed)
    for name, got, want in (("Y", fw.out, Y), ("dK", gr.dk, dk), ("dV", gr.dv, dv),
                            ("dQ", gr.dq, [[Fraction(0)] * d for _ in range(n_q)])):
        for i, (grow, wrow) in enumerate(zip(got, want)):
            for a, (x, t) in enumerate(zip(grow, wrow)):
                _encloses(v, f"reference on IntervalNum encloses {name}", x, t, entry=f"{name}[{i}][{a}]")
    for i, A in enumerate(allowed):
        _log_encloses(v, "reference on IntervalNum encloses lse", fw.lse[i], Fraction(len(A)), row=i)
    return v.outcome("exact", "IntervalNum encloses const, + − × ÷, exp, log on non-binary inputs and the reference's outputs")


@obligation("ATT-ORACLE-INTERVAL", checks=["EXT-ORACLE-NUMBERS"],
            bounds={"inputs": "1/3, 1/10, 2/7, −5/3, 7/10, −1/9 and their pairs; reference (n_q, n_k, d, v) = (3, 4, 2, 2), K = 0"},
            assumptions=[], solver="exact")
def oracle_interval(ctx):
    """IntervalNum encloses the exact result on inputs that are not binary fractions, through the whole reference."""
    return _interval(ctx)


@control("ATT-ORACLE-INTERVAL/const-via-float", of="ATT-ORACLE-INTERVAL",
         bug="IntervalNum.const rounds a Fraction to the nearest double first (1/3 is no longer enclosed)")
def oracle_interval_float_const(ctx):
    with patch.object(IntervalNum, "const", mutants.interval_const_via_float):
        return oracle_interval(ctx)
