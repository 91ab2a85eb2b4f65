"""Rigorous rational enclosures of e^x for rational x: exact Fractions, no floating point.

``exp_bounds(x)`` returns Fractions lo ≤ e^x ≤ hi, hi − lo below 2^−(bits−12)·e^x for |x| ≤ 2000. It reduces
x = k + r (k = round(x), |r| ≤ 1/2), sums the Taylor series of e^r to N terms with the Lagrange
remainder |r|^{N+1}/(N+1)!·e^{|r|} ≤ 3·|r|^{N+1}/(N+1)!, multiplies by an enclosure of e^k (e from
its own series), and rounds every intermediate bound outward to ``bits`` significant bits.
Used to check the float, mpmath and interval number systems against exact arithmetic.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

__all__ = ["exp_bounds"]


def _down(v: Fraction, bits: int) -> Fraction:
    if v <= 0:
        raise ValueError(f"expected a positive bound, received {v}")
    s = bits - (v.numerator.bit_length() - v.denominator.bit_length())
    return Fraction(math.floor(v * 2**s), 2**s) if s >= 0 else Fraction(math.floor(v / 2**-s) * 2**-s)


def _up(v: Fraction, bits: int) -> Fraction:
    s = bits - (v.numerator.bit_length() - v.denominator.bit_length())
    return Fraction(math.ceil(v * 2**s), 2**s) if s >= 0 else Fraction(math.ceil(v / 2**-s) * 2**-s)


def _series(r: Fraction, terms: int) -> tuple[Fraction, Fraction]:
    """Σ_{n ≤ terms} r^n/n! and the remainder bound 3|r|^{terms+1}/(terms+1)! (valid for |r| ≤ 1,
    since e^{|r|} ≤ e < 3)."""
    p, q = r.numerator, r.denominator
    a = math.factorial(terms) * q**terms          # a_n = N!/n!·p^n·q^(N−n), exact integers
    acc = a
    for n in range(1, terms + 1):
        a = a * p // (n * q)                      # exact: a_{n−1}·p = n·q·a_n
        acc += a
    total = Fraction(acc, math.factorial(terms) * q**terms)
    rem = 3 * abs(r) ** (terms + 1) / math.factorial(terms + 1)
    return total, rem


@lru_cache(maxsize=4)
def _e(bits: int) -> tuple[Fraction, Fraction]:
    terms = 40
    while math.factorial(terms + 1) < 2 ** (bits + 4):
        terms += 10
    s, rem = _series(Fraction(1), terms)
    return _down(s - rem, bits), _up(s + rem, bits)


def exp_bounds(x: Fraction, bits: int = 400) -> tuple[Fraction, Fraction]:
    """lo ≤ e^x ≤ hi for a rational x (|x| ≤ 2000)."""
    x = Fraction(x)
    if abs(x) > 2000:
        raise ValueError(f"exp_bounds covers |x| ≤ 2000, received {float(x)}")
    k = round(x)
    r = x - k
    terms = 20
    while Fraction(1, 2) ** (terms + 1) / math.factorial(terms + 1) > Fraction(1, 2 ** (bits + 8)):
        terms += 10
    s, rem = _series(r, terms)
    lo, hi = _down(s - rem, bits), _up(s + rem, bits)
    e_lo, e_hi = _e(bits)
    p_lo, p_hi = Fraction(1), Fraction(1)
    for _ in range(abs(k)):
        p_lo, p_hi = _down(p_lo * e_lo, bits), _up(p_hi * e_hi, bits)
    if k < 0:
        p_lo, p_hi = _down(1 / p_hi, bits), _up(1 / p_lo, bits)
    return _down(lo * p_lo, bits), _up(hi * p_hi, bits)
