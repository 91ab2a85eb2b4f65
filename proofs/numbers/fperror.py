"""A rigorous error-bounding number system: the reference run on it returns a bound, not a value.

Every value is an abstract record of how the floating-point run of the same operation sequence can
differ from the exact run (EXT-FP-ERROR). Nothing is first-order: every rounding contributes a
factor (1 + δ), |δ| ≤ u, and the factors are multiplied out exactly, so the bound comes with no
dropped remainder. The per-operation models are those of ``spec`` assumptions A-FP-IEEE,
A-FP-ROUND-MODEL (checked by Bitwuzla, ``ATT-FP-ERROR-MODEL``), A-FP-EXP-ACC (exp, log and
the division, which are device approximations, not IEEE operations) and A-FP-NORMAL.

Linear values (``Lin``): the computed value is x̂ = Σ_t x_t·(1 + θ_t) + h, a sum of exact terms
x_t = w_t·y_t (w_t ≥ 0 a product of exp results, 1 on the score path; y_t a product of inputs),
with, for every term, |1 + θ_t| within (1 ± u)^ku (1 ± u_in)^kin (1 ± u_e)^ke e^{±φ} and an
absolute part |h| ≤ H·ymag. Fields: counts (ku, kin, ke), φ (a polynomial in the non-negative
symbols), absum (≥ Σ|x_t|), ymag (≥ |y_t| for every t), H, and whether it is an input of V.

Scores (``Score``): |ŝ − s| ≤ err and |s| ≤ mag. A running maximum is a *shift*: it is taken as
exact (err 0) because the exact algorithm returns the same Y and lse for any finite shifts used
consistently (THM-EXACT; e^{s−m} is defined with the computed m), so only the scores' own errors
and the roundings of s − m and of m_old − m_new enter the exponent errors.

Inputs are ``Entry(name, magnitude, ...)`` objects (magnitude: a sympy symbol bounding |x|); the
scale is an Entry with ``rounded=True`` (the kernel folds c·log2 e into one fp32 constant).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import sympy as sp

from flashproof.verified.numbers import NumberSystem

__all__ = ["Entry", "Lin", "Score", "Out", "LogVal", "ErrBoundNum", "SYMBOLS", "rho"]

#: unit roundoff of the fp32 accumulation, of the input format (the weight cast before P·V), the
#: device exp's relative accuracy; absolute underflow of an exp result (flush) and of the cast
#: the device division's relative accuracy (Triton's fp32 ``/`` is div.full, not IEEE)
u, u_in, u_e, u_div, eta_e, eta_in = sp.symbols("u u_in u_e u_div eta_e eta_in", nonnegative=True)
SYMBOLS = {"u": u, "u_in": u_in, "u_e": u_e, "u_div": u_div, "eta_e": eta_e, "eta_in": eta_in}
Es, Sm = sp.symbols("E_s S", nonnegative=True)  # a raw score's error bound, its magnitude bound


class Entry:
    """One input entry: ``name`` ("Q", "K", "V" or "c"), ``mag`` (sympy bound on |x|), ``value``
    (the concrete number, for rounding systems), ``rounded`` (the constant is rounded to fp32)."""

    __slots__ = ("name", "mag", "value", "rounded")

    def __init__(self, name: str, mag: Any, value: float = 0.0, rounded: bool = False):
        self.name, self.mag, self.value, self.rounded = name, mag, value, rounded

    def __repr__(self) -> str:
        return f"Entry({self.name}, {self.value})"


class Lin(NamedTuple):
    ku: int
    kin: int
    ke: int
    phi: Any
    absum: Any
    ymag: Any
    H: Any
    v_input: bool = False
    zero: bool = False


class Score(NamedTuple):
    err: Any
    mag: Any
    shift: bool = False
    neg_inf: bool = False


class LogVal(NamedTuple):
    """log ℓ̂: |computed − exact| ≤ err, |value| ≤ mag."""

    err: Any
    mag: Any


class Out(NamedTuple):
    """An output entry Y = z/ℓ: |Ŷ − Y| ≤ err."""

    err: Any


def rho(x: Lin):
    """The relative bound of a Lin's terms: (1+u)^ku (1+u_in)^kin (1+u_e)^ke e^φ − 1."""
    return (1 + u) ** x.ku * (1 + u_in) ** x.kin * (1 + u_e) ** x.ke * sp.exp(x.phi) - 1


def _pmax(a, b):
    """A bound on max(a, b) for polynomials with non-negative coefficients in non-negative symbols:
    the coefficient-wise maximum."""
    a, b = sp.expand(a), sp.expand(b)
    if a == b:
        return a
    gens = sorted((a + b).free_symbols, key=str)
    if not gens:
        return sp.Max(a, b)
    pa, pb = sp.Poly(a, *gens), sp.Poly(b, *gens)
    terms = dict(pa.terms())
    for mono, c in pb.terms():
        terms[mono] = max(terms.get(mono, 0), c)
    for c in terms.values():
        if c < 0:
            raise ValueError(f"_pmax needs non-negative coefficients, received {a} and {b}")
    return sp.Poly.from_dict(terms, *gens).as_expr()


_ZERO = Lin(0, 0, 0, sp.Integer(0), sp.Integer(0), sp.Integer(0), sp.Integer(0), zero=True)
_NEG_INF = Score(sp.Integer(0), sp.Integer(0), shift=True, neg_inf=True)


class ErrBoundNum(NumberSystem):
    """The forward's error bounds. Conditions are concrete (run it without a symbolic mask).

    ``score_atoms`` holds the one (E_s, S) pair every raw score shares (a raw score is c·⟨q, k⟩;
    all of them run the same operation sequence); a second, different pair is an error."""

    name = "fp-error-bound"

    def __init__(self):
        self.score_atoms: tuple | None = None

    # --- linear values
    def const(self, x):
        if isinstance(x, Entry):
            ku = 1 if x.rounded else 0
            return Lin(ku, 0, 0, sp.Integer(0), x.mag, x.mag, sp.Integer(0), v_input=x.name == "V")
        if x == 0:
            return _ZERO
        if x == 1:
            return Lin(0, 0, 0, sp.Integer(0), sp.Integer(1), sp.Integer(1), sp.Integer(0))
        raise TypeError(f"ErrBoundNum.const expects an Entry, 0 or 1, received {x!r}")

    def add(self, a: Lin, b: Lin) -> Lin:
        if a.zero:  # fl(0 + x) = x exactly
            return b
        if b.zero:
            return a
        return Lin(max(a.ku, b.ku) + 1, max(a.kin, b.kin), max(a.ke, b.ke), _pmax(a.phi, b.phi),
                   a.absum + b.absum, _pmax(a.ymag, b.ymag), (a.H + b.H) * (1 + u))

    def mul(self, a: Lin, b: Lin) -> Lin:
        if a.zero or b.zero:
            return _ZERO
        kin, Ha = a.kin, a.H
        if b.v_input and not a.v_input:  # the kernel rounds the weight to V's format before P·V
            kin, Ha = kin + 1, Ha * (1 + u_in) + eta_in
        ra, rb = rho(a._replace(kin=kin)), rho(b)
        # (a(1+θa) + ha)(b(1+θb) + hb), ha, hb in units of ymag; |a|, |b| per term ≤ absum
        H = (Ha * (b.absum / b.ymag * (1 + rb) + b.H) + (1 + ra) * a.absum / a.ymag * b.H) * (1 + u)
        return Lin(a.ku + b.ku + 1, kin + b.kin, a.ke + b.ke, sp.expand(a.phi + b.phi), a.absum * b.absum,
                   a.ymag * b.ymag, H)

    def div(self, z: Lin, l: Lin) -> Out:
        """Y = z/ℓ with ℓ = Σ w_t (ymag 1), z = Σ w_t y_t, |y_t| ≤ z.ymag, ℓ ≥ L0 = e^{−E_s}."""
        if z.zero:
            return Out(sp.Integer(0))
        rz, rl = rho(z), rho(l)
        L0 = sp.exp(-Es)
        num = rz + rl + (z.H + l.H) / L0
        den = 1 - rl - l.H / L0
        e = z.ymag * num / den
        return Out(e + u_div * (z.ymag + e))  # the device division's own error, on |Ŷ| ≤ ymag + e

    # --- scores
    def to_score(self, x: Lin) -> Score:
        atoms = (sp.expand(rho(x) * x.absum), x.absum)
        if self.score_atoms is None:
            self.score_atoms = atoms
        elif self.score_atoms != atoms:
            raise ValueError(f"raw scores with different error sequences: {self.score_atoms} and {atoms}")
        return Score(Es, Sm)

    def score_const(self, x):
        if x == float("-inf"):
            return _NEG_INF
        if x == 0:
            return Score(sp.Integer(0), sp.Integer(0), shift=True)
        raise TypeError(f"ErrBoundNum.score_const expects -inf or 0, received {x!r}")

    def score_max(self, a: Score, b: Score) -> Score:
        if a.neg_inf:
            return b._replace(err=sp.Integer(0), mag=b.mag + b.err, shift=True)
        if b.neg_inf:
            return a._replace(err=sp.Integer(0), mag=a.mag + a.err, shift=True)
        return Score(sp.Integer(0), _pmax(a.mag + a.err, b.mag + b.err), shift=True)

    def score_sub(self, a: Score, b: Score) -> Score:
        if a.neg_inf or b.neg_inf:
            return _NEG_INF
        if not b.shift:
            raise ValueError("ErrBoundNum: a score is only ever shifted by a running maximum")
        return Score(sp.expand(a.err + b.err + u * (a.mag + a.err + b.mag + b.err)), a.mag + b.mag)

    def exp(self, s: Score) -> Lin:
        if s.neg_inf:
            return _ZERO
        # e^{ŝ}(1 + δ_e) + η: relative to e^{s}, the factor e^{ŝ−s}(1+δ_e); each weight ≤ 1 (A-FP-SHIFT)
        return Lin(0, 0, 1, s.err, sp.Integer(1), sp.Integer(1), eta_e)

    def log(self, l: Lin) -> LogVal:
        """log ℓ̂ with ℓ̂ ∈ ℓ·[1 − r, 1 + r], r = ρ_ℓ + H/L0, ℓ ∈ [L0, absum]; the device log adds
        u_e·(1 + |log|) (A-FP-EXP-ACC)."""
        r = rho(l) + l.H / sp.exp(-Es)
        mag = sp.log(l.absum * (1 + r)) + Es - sp.log(1 - r)
        return LogVal(-sp.log(1 - r) + u_e * (1 + mag), mag)

    def score_add(self, m: Score, lg: LogVal) -> Score:
        err = m.err + lg.err
        return Score(err + u * (m.mag + m.err + lg.mag + lg.err), m.mag + lg.mag)

    def where(self, cond, a, b):
        if not isinstance(cond, bool):
            raise TypeError("ErrBoundNum needs concrete conditions (run the reference without a symbolic mask)")
        return a if cond else b
