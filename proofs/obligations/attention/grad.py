"""Cross-check of the reverse pass on the whole unrolled code, at small sizes (THM-EXACT, second half).

The proof for every n_q, n_k, d, v is the per-step decomposition in ``grad_pairs.py``; this bounded
run re-checks the composition end to end, on square and rectangular (n_q ≠ n_k, both ways) shapes.
``tiled_forward`` then ``tiled_backward`` run on ``SympyNum`` with symbolic Q, K, V, G; each of dQ, dK,
dV is compared with sympy's derivative of Φ = Σ G∘Y, Y the theorem's dense masked softmax formula.
The stored maxima appear as ``Max(...)`` terms; every one is replaced by an independent free symbol
before simplifying, so the identity is proved for ANY frozen shift — in particular at tied maxima.
A concrete tied instance (two equal keys) is also checked exactly. A difference that does not reduce
to 0 is evaluated at a random rational point (50 digits) to give a concrete counterexample.
"""
from __future__ import annotations

from unittest.mock import patch

import sympy as sp

from flashproof.verified import attention as att
from flashproof.verified.numbers import SympyNum

from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.support.sympy_gradient import gradient_mismatch, matrix, phi, vanishes

# (n_q, n_k, d, v, b, allowed) — allowed None is every key; sets are per-row allowed keys (0-based)
CASES = [  # rectangular first: the shape controls fail there, without running the rest
    (2, 3, 1, 2, 2, [{0, 1}, {0, 1, 2}]),                 # more keys than queries (bottom-right causal)
    (3, 2, 2, 1, 1, [{0}, {0, 1}, {1}]),                  # more queries than keys
    (2, 2, 2, 2, 1, None),
    (3, 3, 1, 1, 2, [{0}, {0, 1}, {0, 1, 2}]),            # causal
    (3, 3, 2, 2, 2, [{0}, {0, 1}, {0, 1, 2}]),            # causal, d = v = 2
    (3, 3, 1, 2, 1, [{0, 2}, {1}, {0, 1, 2}]),            # sparse holes, a one-key row
    (2, 2, 3, 3, 2, [{0, 1}, {1}]),                       # d = v = 3
]
DEEP_CASES = CASES + [(3, 3, 3, 3, 2, [{0}, {0, 1}, {0, 1, 2}]), (3, 3, 3, 3, 2, None),
                      (3, 3, 3, 3, 1, [{0, 2}, {1, 2}, {0, 1, 2}]), (2, 4, 1, 1, 3, None), (4, 2, 1, 2, 1, None)]


def _check_tie():
    """Two identical keys (a tied row maximum) at a concrete rational point: exact equality."""
    n, d, v, c = 3, 2, 2, sp.Rational(1, 2)
    Q = [[1, 2], [0, 1], [2, -1]]
    K = [[1, 1], [1, 1], [0, -1]]          # keys 0 and 1 tie for every query
    V, G = [[1, 2], [3, -1], [0, 5]], [[2, 1], [-1, 3], [1, 1]]
    N = SympyNum()
    conv = lambda M: [[sp.Integer(x) for x in row] for row in M]  # noqa: E731
    fw = att.tiled_forward(conv(Q), conv(K), conv(V), scale=c, block=1, num=N)
    gr = att.tiled_backward(conv(Q), conv(K), conv(V), conv(G), fw, scale=c, block=1, num=N)
    Qs, Ks, Vs, Gs = matrix("q", n, d), matrix("k", n, d), matrix("v", n, v), matrix("g", n, v)
    phi_dense = phi(Qs, Ks, Vs, Gs, c, None)
    point = {s: sp.Integer(x) for Ms, M in ((Qs, Q), (Ks, K), (Vs, V), (Gs, G)) for rs, r in zip(Ms, M) for s, x in zip(rs, r)}
    for name, M, X in (("dq", gr.dq, Qs), ("dk", gr.dk, Ks), ("dv", gr.dv, Vs)):
        for i in range(n):
            for r in range(len(X[0])):
                diff = M[i][r] - sp.diff(phi_dense, X[i][r]).xreplace(point)
                if not vanishes(diff):
                    return {"case": "tie (K0 = K1)", "entry": f"{name}[{i}][{r}]", "difference": str(sp.N(diff, 20))}
    return None


@obligation("ATT-GRAD", checks=["THM-EXACT"], bounds={"n_q": 3, "n_k": 3, "d": 3, "v": 3, "cases": "(n_q,n_k,d,v) in (2,2,2,2) full, (3,3,1,1)/(3,3,2,2) causal, (3,3,1,2) sparse + one-key row, (2,2,3,3), rectangular (2,3,1,2) and (3,2,2,1), tie"},
            deep_bounds={"n_q": 4, "n_k": 4, "d": 3, "v": 3, "cases": "default + n = d = v = 3 causal, full, sparse; (n_q,n_k,d,v) = (2,4,1,1), (4,2,1,2) full"}, assumptions=["A-SOLVER-TRUST"], solver="sympy", scope="bounded", role="cross-check")
def grad(ctx):
    """tiled_backward equals sympy's gradient of Φ = Σ G∘Y_dense, for any frozen shift (ties included)."""
    for n_q, n_k, d, v, b, allowed in (DEEP_CASES if ctx.deep else CASES):
        bad = gradient_mismatch(n_q, d, v, b, allowed, n_k=n_k)
        if bad is not None:
            return Outcome("refuted" if "difference" in bad else "unknown", counterexample=bad if "difference" in bad
                           else None, detail=str(bad), solver="sympy")
    bad = _check_tie()
    if bad is not None:
        return Outcome("refuted", counterexample=bad, detail="tied maximum", solver="sympy")
    return Outcome("proved", solver="sympy", detail=f"{len(DEEP_CASES if ctx.deep else CASES)} symbolic cases + 1 tie")


@control("ATT-GRAD/delta-wrong-row", of="ATT-GRAD", bug="δ_i computed from the next row's output Y_{i+1}")
def grad_delta_wrong_row(ctx):
    with patch.object(att, "tiled_backward", mutants.backward_delta_wrong_row):
        return grad(ctx)


@control("ATT-GRAD/l-wrong-row", of="ATT-GRAD", bug="p_ij divides by the next row's frozen normalizer ℓ_{i+1}")
def grad_l_wrong_row(ctx):
    with patch.object(att, "tiled_backward", mutants.backward_l_wrong_row):
        return grad(ctx)


@control("ATT-GRAD/dk-nq-rows", of="ATT-GRAD", bug="dK is allocated with n_q rows instead of n_k")
def grad_dk_rows(ctx):
    with patch.object(att, "_gradient_buffers", mutants.gradient_buffers_dk_nq_rows):
        return grad(ctx)


@control("ATT-GRAD/keys-up-to-nq", of="ATT-GRAD", bug="the reverse pass loops keys up to n_q instead of n_k")
def grad_keys_up_to_nq(ctx):
    with patch.object(att, "_schedule", mutants.schedule_keys_up_to_nq):
        return grad(ctx)


@control("ATT-GRAD/dk-unscaled", of="ATT-GRAD", bug="dK accumulates γ·Q_i without the scale c")
def grad_dk_unscaled(ctx):
    with patch.object(att, "_pair_update", mutants.pair_update_dk_unscaled):
        return grad(ctx)
