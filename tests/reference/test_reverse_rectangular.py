"""The reverse pass on rectangular problems (n_q ≠ n_k, both ways): shapes, and agreement with
central differences of Φ = Σ G∘Y_dense at 50 digits (an exactness check at high precision)."""
from __future__ import annotations

import random

import pytest

from flashproof.verified import dense_attention, tiled_backward, tiled_forward
from flashproof.verified.numbers import MpmathNum

CASES = {"more-keys": (2, 5, 2, 3, 2, [{0, 1, 3}, {2, 4}]), "more-queries": (5, 2, 3, 1, 1, [{0}, {0, 1}, {1}, {0, 1}, {0}])}


def _phi(Q, K, V, G, allowed, scale, num):
    Y = dense_attention(Q, K, V, scale=scale, allowed=allowed, num=num)
    return sum((g * y for gi, yi in zip(G, Y) for g, y in zip(gi, yi)), num.zero())


@pytest.mark.parametrize("name", list(CASES))
def test_rectangular_reverse_pass_shapes_and_central_differences(name):
    n_q, n_k, d, v, b, allowed = CASES[name]
    rng = random.Random(n_q * 10 + n_k)
    num = MpmathNum(50)
    mk = lambda r, c: [[num.const(rng.uniform(-1, 1)) for _ in range(c)] for _ in range(r)]  # noqa: E731
    Q, K, V, G = mk(n_q, d), mk(n_k, d), mk(n_k, v), mk(n_q, v)
    fw = tiled_forward(Q, K, V, scale=0.7, block=b, allowed=allowed, num=num)
    gr = tiled_backward(Q, K, V, G, fw, scale=0.7, block=b, allowed=allowed, num=num)
    assert [(len(M), len(M[0])) for M in gr] == [(n_q, d), (n_k, d), (n_k, v)]
    h = num.const("1e-20")
    for mat, analytic in (("Q", gr.dq), ("K", gr.dk), ("V", gr.dv)):
        for r, row in enumerate(analytic):
            for c, x in enumerate(row):
                args = {"Q": [w[:] for w in Q], "K": [w[:] for w in K], "V": [w[:] for w in V]}
                base = args[mat][r][c]
                args[mat][r][c] = base + h
                up = _phi(args["Q"], args["K"], args["V"], G, allowed, 0.7, num)
                args[mat][r][c] = base - h
                down = _phi(args["Q"], args["K"], args["V"], G, allowed, 0.7, num)
                assert abs((up - down) / (2 * h) - x) < 1e-30, (name, mat, r, c)
