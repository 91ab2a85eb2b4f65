"""Hypothesis strategies for small attention problems for the reference's own tests.

``problems()`` shrinks toward n = 1, d = v = 1, all-zero entries and the full mask; the masks it
draws always give every query row at least one allowed key (the theorem's mode).
"""
from __future__ import annotations

from typing import NamedTuple

from hypothesis import strategies as st


class ReferenceCase(NamedTuple):
    """One small attention problem for the reference's own tests: Q (n, d), K (n, d), V (n, v)."""

    Q: list
    K: list
    V: list
    allowed: list  # one set of key indices per query row, each nonempty
    scale: float


ENTRY = st.floats(min_value=-3, max_value=3, allow_nan=False, allow_infinity=False, width=32)


def matrix(rows: int, cols: int, elements=ENTRY):
    return st.lists(st.lists(elements, min_size=cols, max_size=cols), min_size=rows, max_size=rows)


@st.composite
def nonempty_masks(draw, n_q: int, n_k: int):
    """One nonempty key set per row; shrinks toward the full mask."""
    rows = []
    for _ in range(n_q):
        full = draw(st.booleans().map(lambda b: not b))
        if full:
            rows.append(set(range(n_k)))
            continue
        keep = draw(st.lists(st.booleans(), min_size=n_k, max_size=n_k))
        s = {j for j, k in enumerate(keep) if k}
        if not s:
            s = {draw(st.integers(0, n_k - 1))}
        rows.append(s)
    return rows


@st.composite
def problems(draw, max_n: int = 6, max_d: int = 3, max_v: int = 3):
    n_q = draw(st.integers(1, max_n))
    n_k = draw(st.integers(1, max_n))
    d = draw(st.integers(1, max_d))
    v = draw(st.integers(1, max_v))
    Q = draw(matrix(n_q, d))
    K = draw(matrix(n_k, d))
    V = draw(matrix(n_k, v))
    allowed = draw(nonempty_masks(n_q, n_k))
    scale = draw(st.sampled_from([1.0, 0.5, 2.0, 0.25]))
    return ReferenceCase(Q, K, V, allowed, scale)
