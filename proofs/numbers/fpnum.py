"""IEEE floating point in z3 (fp16, bf16, fp32), in the log domain, as a number system.

The reference runs on it unchanged. Arithmetic is z3's FloatingPoint theory with round-to-nearest-
even (assumption A-FP-IEEE). z3 has no FP exponential, so ``exp`` is one uninterpreted function
value per application (a fresh FP constant; no obligation here needs two applications to agree)
constrained only by the facts of assumption A-FP-EXP; every argument it is applied to is recorded in ``exp_args`` so that an
obligation can state a claim about it. ``log`` (used only for the log-sum-exp) is constrained the same
way: NaN exactly for NaN or negative inputs, −∞ for 0, ≥ 0 for inputs ≥ 1.
"""
from __future__ import annotations

import z3

from flashproof.verified.numbers import NumberSystem

__all__ = ["FORMATS", "FPNum"]

#: name -> (exponent bits, significand bits including the hidden bit)
FORMATS = {"fp16": (5, 11), "bf16": (8, 8), "fp32": (8, 24)}


class FPNum(NumberSystem):
    """z3 FP terms of one format. ``side`` collects the A-FP-EXP constraints of every exp/log applied."""

    symbolic = True

    def __init__(self, fmt: str):
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {sorted(FORMATS)}, received {fmt!r}")
        self.name = f"z3-fp[{fmt}]"
        self.sort = z3.FPSort(*FORMATS[fmt])
        self.rm = z3.RNE()
        self.side: list = []
        self.exp_args: list = []
        self.exp_vals: list = []

    def var(self, name: str):
        return z3.FP(name, self.sort)

    def const(self, x):
        if isinstance(x, (z3.ExprRef,)):
            return x
        x = float(x)
        if x == float("-inf"):
            return z3.fpMinusInfinity(self.sort)
        if x == float("inf"):
            return z3.fpPlusInfinity(self.sort)
        return z3.FPVal(x, self.sort)

    def add(self, a, b):
        return z3.fpAdd(self.rm, a, b)

    def sub(self, a, b):
        return z3.fpSub(self.rm, a, b)

    def mul(self, a, b):
        return z3.fpMul(self.rm, a, b)

    def div(self, a, b):
        return z3.fpDiv(self.rm, a, b)

    def neg(self, a):
        return z3.fpNeg(a)

    def ge(self, a, b):
        return z3.fpGEQ(a, b)

    def gt(self, a, b):
        return z3.fpGT(a, b)

    def exp(self, s):
        e = z3.FP(f"exp{len(self.exp_args)}_{self.name}", self.sort)
        zero, one = self.const(0), self.const(1)
        self.side.append(z3.And(
            z3.fpIsNaN(e) == z3.fpIsNaN(s),
            z3.Implies(s == z3.fpMinusInfinity(self.sort), z3.fpIsZero(e)),
            z3.Implies(z3.fpIsZero(s), e == one),
            z3.Implies(z3.And(z3.Not(z3.fpIsNaN(s)), z3.fpLEQ(s, zero)), z3.And(z3.fpGEQ(e, zero), z3.fpLEQ(e, one))),
            z3.Implies(z3.And(z3.fpIsNormal(s) | z3.fpIsSubnormal(s) | z3.fpIsZero(s), z3.fpGEQ(s, zero)),
                       z3.fpGEQ(e, one))))
        self.exp_args.append(s)
        self.exp_vals.append(e)
        return e

    def log(self, x):
        r = z3.FP(f"log{len(self.side)}_{self.name}", self.sort)
        zero, one = self.const(0), self.const(1)
        self.side.append(z3.And(
            z3.fpIsNaN(r) == z3.Or(z3.fpIsNaN(x), z3.fpLT(x, zero)),
            z3.Implies(z3.fpIsZero(x), r == z3.fpMinusInfinity(self.sort)),
            z3.Implies(z3.fpGEQ(x, one), z3.fpGEQ(r, zero))))
        return r

    def is_finite(self, a) -> bool:
        return True

    # conditions: z3 Bools, Python bools folded eagerly (as in Z3ExpNum)
    def and_(self, a, b):
        if isinstance(a, bool):
            return b if a else False
        if isinstance(b, bool):
            return a if b else False
        return z3.And(a, b)

    def or_(self, a, b):
        if isinstance(a, bool):
            return True if a else b
        if isinstance(b, bool):
            return True if b else a
        return z3.Or(a, b)

    def not_(self, a):
        return (not a) if isinstance(a, bool) else z3.Not(a)

    def where(self, cond, a, b):
        if isinstance(cond, bool):
            return a if cond else b
        return z3.If(cond, a, b)
