"""The reference's dropout (verified/dropout.py): p = 0 with every bit kept is the undropped run
bitwise; tiled = dense exactly (Fractions, exp domain) for every keep mask at n = 3 and every block;
the statistics do not depend on the mask; bad Dropout arguments are ValueErrors naming the problem."""
from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest

from flashproof import verified as V

Q = [[0.5, -1.0], [1.5, 0.25], [-0.75, 1.0]]
K = [[1.0, 0.5], [-0.5, 1.0], [0.25, -1.25]]
VV = [[1.0, 2.0], [-3.0, 0.5], [2.5, -1.0]]
G = [[0.5, 1.0], [-1.0, 2.0], [1.5, -0.5]]
CAUSAL = [{0}, {0, 1}, {0, 1, 2}]


def test_all_kept_at_p_zero_is_the_undropped_run_bitwise():
    keep = [[1] * 3 for _ in range(3)]
    d = V.Dropout(keep, 0.0)
    fw0, fw = (V.tiled_forward(Q, K, VV, scale=0.5, block=2, allowed=CAUSAL, dropout=x) for x in (None, d))
    assert fw0 == fw
    g0, g = (V.tiled_backward(Q, K, VV, G, f, scale=0.5, block=2, allowed=CAUSAL, dropout=x)
             for f, x in ((fw0, None), (fw, d)))
    assert g0 == g


def test_tiled_equals_dense_exactly_for_every_mask_and_block():
    S = [[F(1), F(2), F(3)], [F(1, 2), F(1), F(4)], [F(2), F(1), F(5)]]  # weights w = e^s (exp domain)
    for bits in itertools.product((0, 1), repeat=9):
        keep = [list(bits[3 * i:3 * i + 3]) for i in range(3)]
        d = V.Dropout(keep, F(1, 3))
        dense = V.dense_attention_from_scores(S, VV, num="fraction", dropout=d)
        for b in (1, 2, 3):
            fw = V.tiled_forward_from_scores(S, VV, block=b, num="fraction", dropout=d)
            assert fw.out == dense, (keep, b)
            assert fw.l == V.tiled_forward_from_scores(S, VV, block=b, num="fraction").l  # undropped ℓ


@pytest.mark.parametrize("dropout, words", [
    (V.Dropout([[1, 0, 1]] * 3, 1.0), "[0, 1)"),
    (V.Dropout([[1, 0, 1]] * 3, -0.5), "[0, 1)"),
    (V.Dropout([[1, 0, 1]] * 3, True), "number"),
    (V.Dropout([[1, 2, 1]] * 3, 0.5), "0 (dropped) or 1"),
    (V.Dropout([[1, 0, 1]] * 2, 0.5), "3 rows"),
    (V.Dropout([[1, 0]] * 3, 0.5), "3 columns"),
    (([[1, 0, 1]] * 3, 0.5), "Dropout(keep, p)"),
], ids=["p_one", "p_negative", "p_bool", "bit_two", "rows", "cols", "not_a_dropout"])
def test_bad_dropout(dropout, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace(")", r"\)").replace("(", r"\(")):
        V.tiled_forward(Q, K, VV, scale=0.5, block=2, dropout=dropout)
