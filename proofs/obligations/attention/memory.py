"""Memory and arithmetic (THM-MEMORY), measured by running the reference on ``CountingNum``.

For a grid of shapes, with the full mask (the worst case for work), square (n_q = n_k = n) and
rectangular (n_q ≠ n_k, both ways):

* retained: live scalars after the call returns = n_q(v + 3) outputs (Y, m, ℓ, lse) for the forward,
  n_q·d + n_k·(d + v) gradients for the backward — exact; with the inputs Q, K, V (and G) that is
  O(n(d+v)); a reverse pass that allocates dK with n_q rows fails here (or raises: also a failure);
* workspace: W = peak live scalars − inputs − outputs must be ≤ 2b + 3v + 8 (``WORKSPACE``, fixed
  in advance) for every shape: live block workspace is O(b+v), independent of n and d — an n×n array
  would add n², an untiled row about 2n. (W is not an exact polynomial: which existing value a
  ``where`` keeps depends on the data, so W varies by ±1 between inputs; hence a bound, not a fit.)
* operations: the count (arithmetic + exp/log + comparisons + mask queries) is fitted, on the square
  shapes, as an exact polynomial in n, d, v and T = n/b (b | n), and sympy checks that
  with T ≤ n every monomial is O(n²(d+v)).
"""
from __future__ import annotations

import gc
import itertools
import random
from unittest.mock import patch

import sympy as sp

from flashproof.verified import attention as att

from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.numbers.counting import CountingNum, Live, counted_mask

n_, d_, v_, b_, T_ = sp.symbols("n d v b T", positive=True, integer=True)
OPS_BASIS = [sp.Integer(1), n_, d_, v_, n_ * d_, n_ * v_, n_**2, n_**2 * d_, n_**2 * v_, n_ * T_, n_ * T_ * v_,
             n_ * T_ * d_, T_, T_ * v_]


def _inputs(n_q, n_k, d, v, seed):
    rnd = random.Random(seed)
    mk = lambda r, c: [[rnd.uniform(-2, 2) for _ in range(c)] for _ in range(r)]  # noqa: E731
    return mk(n_q, d), mk(n_k, d), mk(n_k, v), mk(n_q, v)


def measure(n, d, v, b, seed=0, *, backward: bool = True, n_k: int | None = None) -> dict:
    """One run of tiled_forward (and tiled_backward) on CountingNum: peaks, retained counts, op counts.
    n query rows and n_k keys (n_k = n unless given)."""
    n_q, n_k = n, n if n_k is None else n_k
    Q, K, V, G = _inputs(n_q, n_k, d, v, seed)
    N = CountingNum()
    gc.collect()
    base = Live.now
    Live.reset()
    fw = att.tiled_forward(Q, K, V, scale=0.5, block=b, allowed=counted_mask(N), num=N)
    f_peak, f_kept, f_ops = Live.peak - base, Live.now - base, N.total()
    inputs_f = n_q * d + n_k * d + n_k * v + 1  # Q, K, V and the scale, as the reference holds them
    if not backward:
        return {"f_kept": f_kept, "f_W": f_peak - inputs_f - f_kept, "f_ops": f_ops}
    N2 = CountingNum()
    base2 = Live.now
    Live.reset()
    gr = att.tiled_backward(Q, K, V, G, fw, scale=0.5, block=b, allowed=counted_mask(N2), num=N2)
    b_peak, b_kept, b_ops = Live.peak - base2, Live.now - base2, N2.total()
    del fw, gr
    inputs_b = inputs_f + n_q * v     # + G (the forward's outputs are counted in its baseline)
    return {"f_kept": f_kept, "b_kept": b_kept, "f_W": f_peak - inputs_f - f_kept, "b_W": b_peak - inputs_b - b_kept,
            "f_ops": f_ops, "b_ops": b_ops}


def _fit(points, basis, vars_):
    """Exact least-squares fit of y over ``basis``; returns (polynomial, max |residual|)."""
    A = sp.Matrix([[m.subs(dict(zip(vars_, x))) for m in basis] for x, _ in points])
    y = sp.Matrix([yy for _, yy in points])
    coef = (A.T * A).LUsolve(A.T * y)
    poly = sp.expand(sum(c * m for c, m in zip(coef, basis)))
    resid = max(abs(poly.subs(dict(zip(vars_, x))) - yy) for x, yy in points)
    return poly, resid


def _rectangular(which: str, bounds: dict):
    """(shape, measurement) for n_q ≠ n_k both ways, every b dividing n_k; or a counterexample when
    the reference raises on these valid inputs."""
    rows = []
    for n_q, n_k in bounds["rect"]:
        for d, v in itertools.product(bounds["dv"][:2], bounds["dv"][:2]):
            for b in [b for b in range(1, n_k + 1) if n_k % b == 0]:
                try:
                    m = measure(n_q, d, v, b, backward=which == "b", n_k=n_k)
                except IndexError as e:
                    return None, {"n_q": n_q, "n_k": n_k, "d": d, "v": v, "b": b, "error": f"IndexError: {e}"}
                rows.append(((n_q, n_k, d, v, b), m))
    return rows, None


def _check(which: str, bounds: dict) -> Outcome:
    # each measurement starts with gc.collect() (no stale cycle may be freed mid-count); freezing
    # the heap that exists now (the solvers' and sympy's objects) makes those collections cheap
    gc.collect()
    gc.freeze()
    try:
        return _check_frozen(which, bounds)
    finally:
        gc.unfreeze()


def _check_frozen(which: str, bounds: dict) -> Outcome:
    ns, dv = bounds["n"], bounds["dv"]
    rect, crash = _rectangular(which, bounds)
    if crash is not None:
        return Outcome("refuted", crash, detail="the reference raised on a valid rectangular problem", solver="exact")
    rows = []
    for n in ns:
        for d, v in itertools.product(dv, dv):
            for b in [b for b in range(1, n + 1) if n % b == 0]:
                rows.append(((n, n, d, v, b), measure(n, d, v, b, backward=which == "b")))
    # retained outputs: exact
    for (n_q, n_k, d, v, b), m in rows + rect:
        want = n_q * (v + 3) if which == "f" else n_q * d + n_k * (d + v)
        if m[f"{which}_kept"] != want:
            return Outcome("refuted", {"shape_nq_nk_d_v_b": [n_q, n_k, d, v, b], "retained": m[f"{which}_kept"],
                                       "expected": want},
                           detail="retained outputs differ from n_q(v+3) / n_q·d + n_k(d+v)", solver="exact")
    # workspace: every run within the stated O(b+v) bound (constants fixed in advance, see WORKSPACE)
    a, bb, c = bounds["workspace"]
    over = [(shape, m[f"{which}_W"]) for shape, m in rows + rect if m[f"{which}_W"] > a * shape[4] + bb * shape[3] + c]
    if over:
        (shape, w) = max(over, key=lambda r: r[1] - (a * r[0][4] + bb * r[0][3]))
        return Outcome("refuted", {"shape_nq_nk_d_v_b": list(shape), "workspace": w, "bound": f"{a}b + {bb}v + {c}"},
                       detail="live workspace exceeds the O(b+v) bound", solver="exact")
    slack = min(a * b + bb * v + c - m[f"{which}_W"] for (_, _, d, v, b), m in rows + rect)
    # operation count (square shapes): exact polynomial, O(n²(d+v))
    pts = [((n, d, v, n // b), m[f"{which}_ops"]) for (n, _, d, v, b), m in rows]
    poly, resid = _fit(pts, OPS_BASIS, [n_, d_, v_, T_])
    if resid != 0:
        return Outcome("unknown", detail=f"operation count is not a polynomial in the basis (residual {resid})",
                       solver="sympy")
    worst_case = sp.Poly(sp.expand(poly.subs(T_, n_)), n_, d_, v_)
    over = [mono for mono, c in worst_case.terms() if c != 0 and (mono[0] > 2 or mono[1] + mono[2] > 1)]
    neg = [str(c) for _, c in worst_case.terms() if c < 0]
    if over or neg:
        return Outcome("refuted", {"ops": str(poly), "monomials_beyond_n2(d+v)": [str(m) for m in over],
                                   "negative_coefficients": neg}, detail="operation count not O(n²(d+v))", solver="sympy")
    return Outcome("proved", solver="exact+sympy",
                   detail=f"workspace ≤ {a}b + {bb}v + {c} (min slack {slack}); ops = {poly}; retained outputs exact; "
                          f"{len(rows)} square + {len(rect)} rectangular shapes")


#: live workspace bound α·b + β·v + γ claimed for every shape (the O(b+v) of the page, with constants)
WORKSPACE = (2, 3, 8)
BOUNDS = {"n": [2, 4, 6, 8], "dv": [1, 2, 4], "rect": [(2, 4), (4, 2), (3, 6), (6, 3)], "workspace": WORKSPACE}
DEEP = {"n": [2, 4, 6, 8, 12, 16], "dv": [1, 2, 4, 8], "rect": [(2, 4), (4, 2), (3, 6), (6, 3), (4, 12), (12, 4)],
        "workspace": WORKSPACE}


@obligation("ATT-MEMORY-FWD", checks=["THM-MEMORY"], bounds=BOUNDS, deep_bounds=DEEP,
            assumptions=["A-UNIT-COST", "A-MASK-ACCESSOR", "A-SOLVER-TRUST"], solver="exact+sympy", scope="bounded")
def memory_fwd(ctx):
    """Forward: retained n(v+3) outputs, O(b+v) live workspace, O(n²(d+v)) operations, no n×n array."""
    return _check("f", ctx.bounds)


@obligation("ATT-MEMORY-BWD", checks=["THM-MEMORY"], bounds=BOUNDS, deep_bounds=DEEP,
            assumptions=["A-UNIT-COST", "A-MASK-ACCESSOR", "A-SOLVER-TRUST"], solver="exact+sympy", scope="bounded")
def memory_bwd(ctx):
    """Reverse: retained n(2d+v) gradients, O(b+v) live workspace, O(n²(d+v)) operations, no n×n array."""
    return _check("b", ctx.bounds)


@control("ATT-MEMORY-FWD/untiled", of="ATT-MEMORY-FWD", bug="the key loop is not tiled: one block holds the whole row")
def memory_fwd_untiled(ctx):
    with patch.object(att, "block_ranges", mutants.block_ranges_untiled):
        return memory_fwd(ctx)


@control("ATT-MEMORY-FWD/score-cache", of="ATT-MEMORY-FWD", bug="scores are cached across rows (an n×n array)")
def memory_fwd_score_cache(ctx):
    with patch.object(att, "_qk_inputs", mutants.qk_inputs_score_cache):
        return memory_fwd(ctx)


@control("ATT-MEMORY-BWD/score-cache", of="ATT-MEMORY-BWD", bug="scores are cached across rows (an n×n array)")
def memory_bwd_score_cache(ctx):
    with patch.object(att, "_qk_inputs", mutants.qk_inputs_score_cache):
        return memory_bwd(ctx)


@control("ATT-MEMORY-BWD/dk-nq-rows", of="ATT-MEMORY-BWD", bug="dK is allocated with n_q rows instead of n_k")
def memory_bwd_dk_rows(ctx):
    with patch.object(att, "_gradient_buffers", mutants.gradient_buffers_dk_nq_rows):
        return memory_bwd(ctx)


@control("ATT-MEMORY-BWD/keys-up-to-nq", of="ATT-MEMORY-BWD", bug="the reverse pass loops keys up to n_q instead of n_k")
def memory_bwd_keys(ctx):
    with patch.object(att, "_schedule", mutants.schedule_keys_up_to_nq):
        return memory_bwd(ctx)
