"""The kernel's rounding, emulated: Python floats rounded to fp32 after every operation.

``RoundNum(fmt)`` runs the reference the way the kernels compute it: inputs in ``fmt`` (fp32, bf16
or fp16; they must already be representable), every +, −, ×, ÷, exp and log rounded to fp32 (the
accumulation format), and a weight rounded to ``fmt`` before it multiplies an entry of V (the
kernels' ``p.to(v.dtype)`` before P·V). Each operation is computed in double and then rounded
once to fp32; for +, −, ×, ÷ that equals a single correct rounding (double has 53 ≥ 2·24 + 2
significand bits, so the double rounding is innocuous); exp and log are Python's (within an ulp of
double) rounded to fp32, inside A-FP-EXP-ACC's accuracy. Inputs are ``fperror.Entry`` objects.
"""
from __future__ import annotations

import math
import struct

from flashproof.verified.numbers import NumberSystem

from .fperror import Entry

__all__ = ["RoundNum", "round_to", "VALUE_FORMATS"]

VALUE_FORMATS = ("fp32", "bf16", "fp16")


def _f32(x: float) -> float:
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _bf16(x: float) -> float:
    """Round an fp32 value to bfloat16, nearest even (x must already be an fp32 value)."""
    if math.isnan(x) or math.isinf(x):
        return x
    bits = struct.unpack("I", struct.pack("f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", bits & 0xFFFFFFFF))[0]


def _f16(x: float) -> float:
    try:
        return struct.unpack("e", struct.pack("e", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def round_to(fmt: str, x: float) -> float:
    """x rounded to ``fmt`` (from a double for fp32 and fp16; from its fp32 rounding for bf16)."""
    if fmt == "fp32":
        return _f32(x)
    if fmt == "bf16":
        return _bf16(_f32(x))
    if fmt == "fp16":
        return _f16(x)
    raise ValueError(f"format must be one of {VALUE_FORMATS}, received {fmt!r}")


class _VIn(float):
    """An entry of V (the kernel rounds the weight that multiplies it)."""


class RoundNum(NumberSystem):
    """fp32 accumulation with inputs in ``fmt``; see the module docstring."""

    def __init__(self, fmt: str):
        if fmt not in VALUE_FORMATS:
            raise ValueError(f"format must be one of {VALUE_FORMATS}, received {fmt!r}")
        self.fmt = fmt
        self.name = f"round[{fmt}/fp32]"

    def const(self, x):
        if isinstance(x, Entry):
            if x.rounded:  # the scale: one fp32 constant
                return _f32(float(x.value))
            v = float(x.value)
            if round_to(self.fmt, v) != v:
                raise ValueError(f"input {x.name} = {v!r} is not representable in {self.fmt}")
            return _VIn(v) if x.name == "V" else v
        return _f32(float(x))

    def add(self, a, b):
        return _f32(a + b)

    def sub(self, a, b):
        return _f32(a - b)

    def mul(self, a, b):
        if isinstance(b, _VIn) and not isinstance(a, _VIn):
            a = round_to(self.fmt, a)
        return _f32(float(a) * float(b))

    def div(self, a, b):
        if b == 0:  # IEEE: ±inf, or NaN for 0/0
            return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
        return _f32(a / b)

    def exp(self, s):
        if s == -math.inf:
            return 0.0
        try:
            return _f32(math.exp(s))
        except OverflowError:  # e^s beyond double: beyond fp32 too
            return math.inf

    def log(self, x):
        return _f32(math.log(x)) if x > 0 else -math.inf
