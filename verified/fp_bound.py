"""The proved a-priori error bound of the tiled forward in floating point (EXT-FP-ERROR), as a formula.

For one query row with n_k allowed keys, head dimension d, key blocks of b (T = ⌈n_k/b⌉ blocks,
b₁ = min(b, n_k)), inputs in format τ (unit roundoff u_in; the weights are rounded to τ before
P·V), fp32 accumulation (u = 2⁻²⁴), device exp/log accuracy u_e (assumption A-FP-EXP-ACC) and
|Q| ≤ M_q, |K| ≤ M_k, |V| ≤ M_v, scale c:

    S   = |c|·d·M_q·M_k                          (bound on every score)
    E_s = γ(d+2)·S,  γ(k) = (1+u)^k − 1          (error of a computed score)
    φ   = E_s + 2u·T·(S + E_s)                   (exponent error of a weight, incl. T rescales)
    ρ_ℓ = (1+u)^{b₁−1+2(T−1)} (1+u_e)^T e^φ − 1  (relative error of ℓ's terms)
    ρ_z = (1+u)^{b₁+2(T−1)} (1+u_in) (1+u_e)^T e^φ − 1
    H   = n_k·(η_e + η_in)·(1+u)^{b₁+2T}·e^φ·(1+u_e)^T   (underflow of weights, absolute)
    e   = M_v·(ρ_z + ρ_ℓ + 2H·e^{E_s}) / (1 − ρ_ℓ − H·e^{E_s})
    |Ŷ − Y| ≤ e + u_div·(M_v + e)              (u_div: the device division, 2⁻²²)

and for the log-sum-exp, with r = ρ_ℓ + H·e^{E_s}, Λ = ln(n_k(1+r)) + E_s − ln(1−r):
    |lsê − lse| ≤ L + u·(S + E_s + Λ + L),   L = −ln(1−r) + u_e·(1 + Λ).

Every coefficient is what the reference's operation sequence gives when it runs on the error-bounding
number system ``proofs/numbers/fperror.py``; ``ATT-FP-ERROR-DERIVE`` checks that this formula is at
least the derived bound on a grid of sizes. Stdlib only (the fuzzer imports it).
"""
from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["FORMATS", "U_ACC", "U_EXP", "U_DIV", "ETA_EXP", "FPErrorBound", "Terms", "terms", "forward_error_bound"]

U_ACC = 2.0 ** -24   # fp32 accumulation, round to nearest
U_EXP = 2.0 ** -21   # device exp2/log2 relative accuracy (A-FP-EXP-ACC)
U_DIV = 2.0 ** -22   # device fp32 division (div.full: 2 ulps), relative accuracy (A-FP-EXP-ACC)
ETA_EXP = 2.0 ** -126  # an exp result below fp32's smallest normal may be flushed to 0 (A-FP-EXP-ACC)

#: the formula is evaluated in double (a few dozen operations, each within an ulp): the result is
#: raised by 2^-40 relative so that the evaluation's own rounding cannot drop it below the exact
#: formula. This is not a tolerance margin; 2^-40 is far below every term of the bound.
SLACK = 1 + 2.0 ** -40

#: input format -> (u_in: unit roundoff of the weight cast, η_in: its absolute underflow);
#: fp32 inputs: the cast is the identity
FORMATS = {"fp32": (0.0, 0.0), "bf16": (2.0 ** -8, 2.0 ** -134), "fp16": (2.0 ** -11, 2.0 ** -25)}


class Terms(NamedTuple):
    """The formula's pieces for one row: counts and the derived quantities (see module docstring)."""

    T: int
    b1: int
    ku_l: int
    ku_z: int
    ke: int
    S: float
    E_s: float
    phi: float
    rho_l: float
    rho_z: float
    H: float


class FPErrorBound(NamedTuple):
    """|Ŷ − Y| ≤ out (every entry of the row) and |lsê − lse| ≤ lse; inf when the formula's
    denominator is not positive (the bound says nothing there)."""

    out: float
    lse: float
    terms: Terms


def _gamma(k: int, u: float) -> float:
    return math.expm1(k * math.log1p(u))


def terms(n_k: int, d: int, block: int, fmt: str, *, mq: float, mk: float, scale: float) -> Terms:
    """The counts and error pieces of one row (n_k ≥ 1 keys, head dimension d, block b)."""
    if fmt not in FORMATS:
        raise ValueError(f"input format must be one of {sorted(FORMATS)}, received {fmt!r}")
    if n_k < 1 or d < 1 or block < 1:
        raise ValueError(f"n_k, d and block must be ≥ 1, received n_k={n_k}, d={d}, block={block}")
    u, (u_in, eta_in) = U_ACC, FORMATS[fmt]
    T, b1 = -(-n_k // block), min(block, n_k)
    ku_l, ku_z = b1 - 1 + 2 * (T - 1), b1 + 2 * (T - 1)
    S = abs(scale) * d * mq * mk
    E_s = _gamma(d + 2, u) * S
    phi = E_s + 2 * u * T * (S + E_s)
    grow = phi + T * math.log1p(U_EXP)  # log of the factors every term shares
    rho_l = math.expm1(ku_l * math.log1p(u) + grow)  # expm1/log1p: no cancellation in ρ ≈ 1e-7
    rho_z = math.expm1(ku_z * math.log1p(u) + math.log1p(u_in) + grow)
    H = n_k * (ETA_EXP + eta_in) * math.exp((b1 + 2 * T) * math.log1p(u) + grow)
    return Terms(T, b1, ku_l, ku_z, T, S, E_s, phi, rho_l, rho_z, H)


def forward_error_bound(n_k: int, d: int, block: int, fmt: str, *, mq: float, mk: float, mv: float,
                        scale: float) -> FPErrorBound:
    """The proved bound on |Ŷ − Y| per output entry and on |lsê − lse| for a row with n_k keys."""
    t = terms(n_k, d, block, fmt, mq=mq, mk=mk, scale=scale)
    u = U_ACC
    hs = t.H * math.exp(t.E_s)
    den = 1 - t.rho_l - hs
    if not den > 0:
        return FPErrorBound(math.inf, math.inf, t)
    e = mv * (t.rho_z + t.rho_l + 2 * hs) / den
    out = (e + U_DIV * (mv + e)) * SLACK
    r = t.rho_l + hs
    lam = math.log(n_k) + math.log1p(r) + t.E_s - math.log1p(-r)
    L = -math.log1p(-r) + U_EXP * (1 + lam)
    lse = (L + u * (t.S + t.E_s + lam + L)) * SLACK
    return FPErrorBound(out, lse, t)
