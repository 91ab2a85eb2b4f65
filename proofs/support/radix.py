"""Mixed-radix offsets: an offset into a flat tensor laid out as (X_1, …, X_k), written by the code as
((x_1·X_2 + x_2)·X_3 + …)·X_k + x_k, is inside the tensor when every digit x_i lies in [0, X_i).

z3 answers ``unknown`` on the direct claim 0 ≤ off < X_1·…·X_k once three or four of the sizes are
symbolic (a product of symbolic factors on each side). The lemma

    0 ≤ x < X ∧ 0 ≤ y < Y  ⇒  0 ≤ x·Y + y < X·Y

replaces it by k small claims, one per digit. ``digits`` finds the digits in the offset's own z3 term
(its addends that carry the factor X_k form x·X_k, the others y; then x is split by X_{k−1}, and so on);
``claims`` returns what must be proved instead: each digit's range, the identity off = Σ digits ×
place values (checked, not assumed: a decomposition that loses a term fails it) and the lemma itself
(``lemma``, a z3 query over fresh integers). Nothing is taken on trust: the three kinds of claim
together imply 0 ≤ off < X_1·…·X_k.
"""
from __future__ import annotations

import z3

__all__ = ["digits", "claims", "lemma"]


def _addends(e, sign=1):
    """e as a list of (sign, term) whose signed sum is e (through +, binary −, unary − and products of
    sums, distributed)."""
    if z3.is_mul(e):
        terms = [(sign, [])]
        for f in e.children():
            terms = [(s * t, fs + [a]) for s, fs in terms for t, a in _addends(f)]
        return [(s, _product(fs)) for s, fs in terms]
    if z3.is_add(e):
        return [a for c in e.children() for a in _addends(c, sign)]
    if z3.is_sub(e):
        first, *rest = e.children()
        return _addends(first, sign) + [a for c in rest for a in _addends(c, -sign)]
    if z3.is_app_of(e, z3.Z3_OP_UMINUS):
        return _addends(e.children()[0], -sign)
    return [(sign, e)]


def _factors(e):
    if z3.is_mul(e):
        return [f for c in e.children() for f in _factors(c)]
    return [e]


def _same(a, b):
    if a.eq(b):
        return True
    return z3.is_int_value(a) and z3.is_int_value(b) and a.as_long() == b.as_long()


def _product(fs):
    if not fs:
        return z3.IntVal(1)
    out = fs[0]
    for f in fs[1:]:
        out = out * f
    return out


def _sum(terms):
    out = z3.IntVal(0)
    for s, t in terms:
        out = out + t if s > 0 else out - t
    return out


def split(e, size):
    """(hi, lo) with e = hi·size + lo term by term: hi collects the addends with a factor ``size`` (that
    factor removed), lo the others."""
    hi, lo = [], []
    for s, t in _addends(e):
        fs = _factors(t)
        k = next((i for i, f in enumerate(fs) if _same(f, size)), None)
        if k is None:
            lo.append((s, t))
        else:
            hi.append((s, _product(fs[:k] + fs[k + 1:])))
    return _sum(hi), _sum(lo)


def digits(e, sizes):
    """The digits (x_1, …, x_k) of ``e`` in the layout ``sizes`` = (X_1, …, X_k) (z3 Int terms):
    x_k = the addends without the factor X_k, x_{k−1} = the same of the rest divided by X_k, …;
    x_1 is what remains."""
    out = []
    for size in reversed(sizes[1:]):
        e, lo = split(e, size)
        out.append(lo)
    out.append(e)
    return list(reversed(out))


def claims(e, sizes, subst=()):
    """The conjuncts that together imply 0 ≤ e < Π sizes (with ``lemma``): each digit in [0, X_i) and
    e equal to its digits' value. ``subst``: (term, equal term) pairs applied to e before its digits are
    read (a size the code writes as one argument that the layout splits, e.g. Hq = Hkv·GROUPS); the
    identity is claimed of e itself, so the substitution is checked under the hypotheses."""
    ds = digits(z3.substitute(e, *subst) if subst else e, sizes)
    value = ds[0]
    for d, size in zip(ds[1:], sizes[1:]):
        value = value * size + d
    return [z3.And(d >= 0, d < size) for d, size in zip(ds, sizes)] + [e == value]


def lemma(strict=True):
    """The mixed-radix lemma over fresh integers, as a claim to prove (``strict`` False: the control's
    version, with x ≤ X, which is false)."""
    x, X, y, Y = z3.Ints("radix_x radix_X radix_y radix_Y")
    top = x < X if strict else x <= X
    return z3.Implies(z3.And(x >= 0, top, y >= 0, y < Y), z3.And(x * Y + y >= 0, x * Y + y < X * Y))
