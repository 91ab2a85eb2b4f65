"""The kernels' base-2 convention, as a number system plus one conversion.

Kernels fold log2(e) into the scale (c₂ = c·log2 e), exponentiate with exp2 and keep the running
maximum and the log-sum-exp in base-2 units. ``Base2SympyNum`` is that arithmetic (exp ↦ 2^x,
log ↦ log₂) on sympy expressions, so the unchanged reference runs "as the kernel does";
``natural_from_base2`` is the conversion a kernel applies on the way out: lse = ln2·lse₂ and, because
the scale it differentiated through was c₂ = c/ln 2, dQ = ln2·dQ₂ and dK = ln2·dK₂ (dV unchanged).
"""
from __future__ import annotations

from typing import NamedTuple

import sympy as sp

from flashproof.verified.numbers import SympyNum

__all__ = ["Base2SympyNum", "Natural", "natural_from_base2", "LN2"]

LN2 = sp.log(2)


class Base2SympyNum(SympyNum):
    """sympy arithmetic with exp2/log2 as the exponential and logarithm."""

    name = "sympy-base2"

    def exp(self, s):
        return sp.Integer(2) ** s

    def log(self, x):
        return sp.log(x, 2)


class Natural(NamedTuple):
    """Outputs in natural units: out (n, v), lse (n), dq (n, d), dk (n, d), dv (n, v)."""

    out: list
    lse: list
    dq: list
    dk: list
    dv: list


def natural_from_base2(fw, gr) -> Natural:
    """The kernel's conversion of a base-2 run (scale c·log2 e) to natural-log outputs."""
    return Natural(fw.out, [LN2 * x for x in fw.lse], [[LN2 * x for x in row] for row in gr.dq],
                   [[LN2 * x for x in row] for row in gr.dk], gr.dv)
