"""The float draw's exact law, as the code computes it (SPEC-EXT-QUANTISED).

On floats ``inverse_cdf`` fixes the weights to integers W_y = ⌊w_y·2^40⌋ and the uniform to
U = ⌊u·2^31⌋, and returns min{y : ⌊U·T/2^31⌋ < C_y} (T = ΣW, C the running sums). For a uniform u,
U is uniform on {0, …, 2^31 − 1}, and ⌊U·T/2^31⌋ < C ⟺ U·T < C·2^31 ⟺ U < s(C) := ⌈C·2^31/T⌉, so

    P(token = y) = (s(C_y) − s(C_{y−1})) / 2^31,      |P(token = y) − W_y/T| < 2^−31.

The obligation computes s exactly (Fractions; W from the float's exact value, floor written here,
not taken from the code) and runs the code on either side of every boundary: at
u = (s − 0.3)/2^31 it must return the previous token, at u = s/2^31 and (s + 0.3)/2^31 the token
whose cell starts at s, and at the ends of [0, 1) the first and the last token with mass. The
token the code returns is nondecreasing in U (⌊U·T/2^31⌋ is, and min{y : t < C_y} is in t), so the
boundaries give the whole law. Inputs include residual-sized rows (T < 2^31, every unit of C moves
a boundary) whose w·2^40 have fractional parts ≥ 1/2, where flooring and rounding differ.
"""
from __future__ import annotations

import math
import random
from fractions import Fraction
from unittest.mock import patch

from flashproof.verified import speculative as sp
from flashproof.verified.numbers import FloatNum

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.mutants import speculative as mut

TWO31 = 2 ** sp.UNIFORM_BITS
TWO40 = 2 ** sp.WEIGHT_BITS


def _rows(n: int, seed: int) -> list:
    rng = random.Random(seed)
    rows = [[2 / 3, 1 / 3], [0.1, 0.2, 0.7], [1000.75 / TWO40, 3000.5 / TWO40, 500.9 / TWO40],
            [0.0, 7.5 / TWO40, 0.0, 2.625 / TWO40], [1 / 3, 0.0, 2 / 3]]
    for _ in range(n):
        V = rng.randint(2, 6)
        scale = rng.choice((1.0, 1e-6, 2.0 ** -30))
        rows.append([0.0 if rng.random() < 0.2 else (rng.randint(1, 2000) + rng.choice((0.5, 0.75, 0.9))) * scale / 2000
                     for _ in range(V)])
        if not any(rows[-1]):
            rows[-1][0] = scale
    return rows


def _law(row):
    """(starts, P): s(C_{y−1}) for every y and the exact law, from the formula of the module doc."""
    W = [math.floor(Fraction(w) * TWO40) for w in row]
    T = sum(W)
    C, starts = 0, []
    for w in W:
        starts.append(-(-C * TWO31 // T))  # ⌈C·2^31/T⌉
        C += w
    ends = starts[1:] + [TWO31]
    return W, T, starts, [Fraction(e - s, TWO31) for s, e in zip(starts, ends)]


def _draw(row, u) -> int:
    return sp.inverse_cdf(FloatNum(), row, u)


def _check(ctx) -> Outcome:
    n = 0
    for row in _rows(ctx.bounds["rows"], 15):
        W, T, starts, P = _law(row)
        if T == 0:
            continue
        support = [y for y, p in enumerate(P) if p]
        for y, p in enumerate(P):
            if abs(p - Fraction(W[y], T)) >= Fraction(1, TWO31):
                return Outcome("error", detail=f"internal: the formula's law is not within 2^-31 of W/T at {row}")
        probes = [(0.0, support[0]), ((TWO31 - 1) / TWO31, support[-1])]
        for i, y in enumerate(support):
            s = starts[y]
            probes += [(s / TWO31, y), ((s + 0.3) / TWO31, y)]
            if i > 0:
                probes.append(((s - 0.3) / TWO31, support[i - 1]))
        for u, want in probes:
            got = _draw(row, u)
            n += 1
            if got != want:
                return Outcome("refuted", solver="exact", detail="the float draw leaves the fixed-point law",
                               counterexample={"weights": [repr(w) for w in row], "u_times_2^31": repr(u * TWO31),
                                               "token": got, "expected": want, "W": W, "cell_starts": starts})
    return Outcome("proved", solver="exact", detail=f"{n} boundary probes: the float draw is the fixed-point law")


@obligation("SPEC-QUANTISED-DRAW", checks=["SPEC-EXT-QUANTISED"], bounds={"rows": 40},
            deep_bounds={"rows": 400}, assumptions=["A-UNIFORM"], solver="exact")
def quantised_draw(ctx):
    """The float draw returns min{y : ⌊U·T/2^31⌋ < C_y} with W = ⌊w·2^40⌋, U = ⌊u·2^31⌋: its exact law, floor not round."""
    return _check(ctx)


@control("SPEC-QUANTISED-DRAW/weights-rounded", of="SPEC-QUANTISED-DRAW",
         bug="the fixed-point draw rounds each weight w·2^40 to nearest instead of flooring")
def quantised_weights_rounded(ctx):
    with patch.object(sp._FixedPoint, "quantize", staticmethod(mut.quantize_rounded)):
        return _check(ctx)


@control("SPEC-QUANTISED-DRAW/uniform-rounded", of="SPEC-QUANTISED-DRAW",
         bug="the fixed-point draw rounds u·2^31 to nearest instead of flooring")
def quantised_uniform_rounded(ctx):
    with patch.object(sp._FixedPoint, "threshold", staticmethod(mut.threshold_rounded)):
        return _check(ctx)
