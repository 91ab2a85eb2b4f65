"""Dropout replays its realised mask in the reverse pass (EXT-DROPOUT; the page's remark as a theorem).

``tiled_forward`` and ``tiled_backward`` with ``dropout=Dropout(M, p)`` run on ``SympyNum`` with
symbolic Q, K, V, G, a symbolic keep matrix M (one real symbol per (i, j): the identities below are
polynomial in M_ij, so they hold for every realised 0/1 mask) and a symbolic drop probability p. The
dense dropped-out map is written here from its definition,

    Y_i = Σ_{j∈A_i} e^{s_ij} (M_ij/(1 − p)) V_j / Σ_{j∈A_i} e^{s_ij},   Φ = Σ_ia G_ia Y_ia,

and the obligation checks, per case: (1) the tiled forward's Y equals it; (2) its statistics are those
of the undropped softmax (e^{m_i}·ℓ_i = Σ_{A_i} e^{s_ij}, and m, ℓ carry no M or p); (3) the reverse
pass's δ_i = ⟨G_i, Y_i⟩ equals Σ_j P_ij ∂Φ/∂P_ij, the quantity the softmax pullback needs (so
δ = rowsum(dY ∘ Y) still holds with the dropped-out Y); (4) dQ, dK, dV equal sympy's derivative of Φ.
Every stored maximum ``Max(...)`` becomes a free symbol first (any frozen shift, ties included).

Bounded: the cases below (n_q = n_k ≤ 3, d, v ≤ 2; deep: d = v = 3 too), not every size. A difference
that does not vanish is evaluated at a rational point with 0/1 keep bits and p = 1/3 (50 digits).
"""
from __future__ import annotations

import random
from unittest.mock import patch

import sympy as sp

from flashproof.verified import attention as att
from flashproof.verified import dropout as drop
from flashproof.verified.numbers import SympyNum

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.support.sympy_gradient import matrix, vanishes

CAUSAL3 = [{0}, {0, 1}, {0, 1, 2}]
# (n, d, v, b, allowed): allowed None is every key; sets are per-row allowed keys (0-based)
CASES = [
    (2, 2, 2, 1, None),
    (3, 1, 1, 2, CAUSAL3),
    (3, 2, 1, 1, [{0, 2}, {1}, {0, 1, 2}]),  # sparse holes, a one-key row
]
DEEP_CASES = CASES + [(3, 2, 2, 2, CAUSAL3), (2, 3, 3, 2, None)]


def _dense(Q, K, V, G, M, p, c, allowed):
    """(Y (n, v), P (n, n) as a dict, Φ): the dense dropped-out map from its definition."""
    n, d, v = len(Q), len(Q[0]), len(V[0])
    Y, P, total = [], {}, 0
    for i in range(n):
        A = range(n) if allowed is None else sorted(allowed[i])
        e = {j: sp.exp(c * sum(Q[i][r] * K[j][r] for r in range(d))) for j in A}
        den = sum(e.values())
        P.update({(i, j): e[j] / den for j in A})
        row = [sum(P[i, j] * M[i][j] / (1 - p) * V[j][a] for j in A) for a in range(v)]
        Y.append(row)
        total += sum(G[i][a] * row[a] for a in range(v))
    return Y, P, total


def _witness(diff, M, p):
    """A rational point (keep bits 0/1, p = 1/3, other symbols small rationals) where ``diff`` is
    visibly nonzero, as a JSON-able dict; None if five tries find none."""
    bits = {x for row in M for x in row}
    rng = random.Random(0)
    for _ in range(5):
        point = {p: sp.Rational(1, 3)}
        for s in sorted(diff.free_symbols - {p}, key=str):
            point[s] = sp.Integer(rng.randint(0, 1)) if s in bits else sp.Rational(rng.randint(-9, 9), rng.randint(1, 4))
        val = sp.N(diff.xreplace(point), 50)
        if val.is_number and val.is_finite and abs(val) > sp.Float("1e-30"):
            return {str(k): str(x) for k, x in sorted(point.items(), key=lambda kv: str(kv[0]))} | {"difference": str(val)[:24]}
    return None


def _mismatch(n, d, v, b, allowed, c=sp.Rational(1, 2)):
    """None when checks (1)-(4) of the module docstring hold for this case, else a counterexample
    dict (with ``"difference"``) or a dict with ``"note"`` (a difference that did not simplify and
    has no visible nonzero point)."""
    Q, K, V, G, M = matrix("q", n, d), matrix("k", n, d), matrix("v", n, v), matrix("g", n, v), matrix("M", n, n)
    p = sp.Symbol("p", real=True)
    N, dr = SympyNum(), drop.Dropout(M, p)
    fw = att.tiled_forward(Q, K, V, scale=c, block=b, allowed=allowed, num=N, dropout=dr)
    gr = att.tiled_backward(Q, K, V, G, fw, scale=c, block=b, allowed=allowed, num=N, dropout=dr)
    Y, P, phi = _dense(Q, K, V, G, M, p, c, allowed)
    case = f"n={n} d={d} v={v} b={b} mask={allowed}"
    mask_syms = {x for row in M for x in row} | {p}
    Ps = {ij: sp.Symbol(f"P{ij[0]}_{ij[1]}", real=True) for ij in P}

    def terms():
        for i in range(n):
            A = range(n) if allowed is None else sorted(allowed[i])
            den = sum(sp.exp(c * sum(Q[i][r] * K[j][r] for r in range(d))) for j in A)
            for a in range(v):
                yield f"out[{i}][{a}]", fw.out[i][a] - Y[i][a]
            yield f"e^m*l[{i}] (undropped)", sp.exp(fw.m[i]) * fw.l[i] - den
            # δ_i: Φ_i as a function of the probabilities P_i·, differentiated, contracted with P_i·
            phi_p = sum(G[i][a] * sum(Ps[i, j] * M[i][j] / (1 - p) * V[j][a] for j in A) for a in range(v))
            need = sum(Ps[i, j] * sp.diff(phi_p, Ps[i, j]) for j in A).xreplace({Ps[i, j]: P[i, j] for j in A})
            yield f"delta[{i}]", sum(G[i][a] * fw.out[i][a] for a in range(v)) - need
        for name, Mg, X in (("dq", gr.dq, Q), ("dk", gr.dk, K), ("dv", gr.dv, V)):
            for i in range(n):
                for r in range(len(X[0])):
                    yield f"{name}[{i}][{r}]", Mg[i][r] - sp.diff(phi, X[i][r])

    for i in range(n):
        leaked = (sp.sympify(fw.m[i]).free_symbols | sp.sympify(fw.l[i]).free_symbols) & mask_syms
        if leaked:
            return {"case": case, "entry": f"m/l[{i}]", "difference": f"statistics depend on {sorted(map(str, leaked))}"}
    for entry, diff in terms():
        if not vanishes(diff):
            w = _witness(diff, M, p)
            return {"case": case, "entry": entry, **(w or {"note": "did not simplify; no nonzero point found"})}
    return None


@obligation("ATT-DROPOUT", checks=["EXT-DROPOUT"],
            bounds={"n": 3, "d": 2, "v": 2, "mask bits": "symbolic", "p": "symbolic",
                    "cases": "(2,2,2) full, (3,1,1) causal, (3,2,1) sparse + one-key row"},
            deep_bounds={"n": 3, "d": 3, "v": 3, "mask bits": "symbolic", "p": "symbolic",
                         "cases": "default + (3,2,2) causal, (2,3,3) full"},
            assumptions=["A-SOLVER-TRUST"], solver="sympy", scope="bounded", role="proof")
def dropout_replayed(ctx):
    """With the realised mask replayed, the tiled reverse pass is the exact gradient of the dropped-out map."""
    cases = DEEP_CASES if ctx.deep else CASES
    for case in cases:
        bad = _mismatch(*case)
        if bad is not None:
            if "difference" in bad:
                return Outcome("refuted", counterexample=bad, detail=f"{bad['entry']} ({bad['case']})", solver="sympy")
            return Outcome("unknown", detail=str(bad), solver="sympy")
    return Outcome("proved", solver="sympy",
                   detail=f"{len(cases)} symbolic cases: forward, undropped statistics, δ, dQ/dK/dV (bounded sizes)")


@control("ATT-DROPOUT/fresh-mask", of="ATT-DROPOUT", bug="the reverse pass draws a fresh dropout mask instead of replaying the forward's")
def dropout_fresh_mask(ctx):
    with patch.object(att, "_replayed", mutants.dropout_replayed_fresh):
        return dropout_replayed(ctx)


@control("ATT-DROPOUT/unscaled", of="ATT-DROPOUT", bug="kept probabilities are not scaled by 1/(1 − p)")
def dropout_unscaled(ctx):
    with patch.object(drop, "factors", mutants.dropout_factors_unscaled):
        return dropout_replayed(ctx)


@control("ATT-DROPOUT/delta-undropped", of="ATT-DROPOUT", bug="δ_i is taken from the undropped output Y instead of the dropped-out one")
def dropout_delta_undropped(ctx):
    with patch.object(att, "tiled_backward", mutants.backward_delta_undropped):
        return dropout_replayed(ctx)
