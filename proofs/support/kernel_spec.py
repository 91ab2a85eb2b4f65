"""The allowed-pair relation as the API states it (our words, not the kernels' code), and small z3
helpers shared by the kernel index obligations.

Query i (0 ≤ i < q_len) may read key j (0 ≤ j < k_len) when, with diag = k_len − q_len (bottom-right
alignment), j ≥ i + diag − left if the window has a left side and j ≤ i + diag + right if it has a
right side (causal is right = 0). Varlen sequences apply this per sequence, on sequence-local indices.
"""
from __future__ import annotations

import z3

__all__ = ["allowed", "visited", "count", "FLAGS", "INT32_MAX"]

INT32_MAX = 2 ** 31 - 1

#: (HAS_LEFT, HAS_RIGHT) combinations: no window, left only, right only (causal), both
FLAGS = ((False, False), (True, False), (False, True), (True, True))


def allowed(i, j, q_len, k_len, left, right, has_left, has_right):
    """z3 Bool: the API's rule for sequence-local query i and key j."""
    diag = k_len - q_len
    parts = [i >= 0, i < q_len, j >= 0, j < k_len]
    if has_left:
        parts.append(j >= i + diag - left)
    if has_right:
        parts.append(j <= i + diag + right)
    return z3.And(*parts)


def visited(start, stop, step, j):
    """z3 Bool: ``for s in range(start, stop, step)`` (step > 0) visits a block [s, s + step) holding j."""
    t = (j - start) / step  # floor division: j − start ≥ 0 below
    return z3.And(j >= start, start + step * t < stop)


def count(flags):
    """z3 Int: how many of the Bools ``flags`` hold."""
    return z3.Sum(*[z3.If(f, 1, 0) for f in flags])
