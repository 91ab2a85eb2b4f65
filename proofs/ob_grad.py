"""The recomputed reverse pass returns the exact gradient (THM-EXACT, second half).

``tiled_forward`` then ``tiled_backward`` run on ``SympyNum`` with symbolic Q, K, V, G; each of dQ, dK,
dV is compared with sympy's derivative of Φ = Σ G∘Y, Y the theorem's dense masked softmax formula.
The stored maxima appear as ``Max(...)`` terms; every one is replaced by an independent free symbol
before simplifying, so the identity is proved for ANY frozen shift — in particular at tied maxima.
A concrete tied instance (two equal keys) is also checked exactly. A difference that does not reduce
to 0 is evaluated at a random rational point (50 digits) to give a concrete counterexample.
"""
from __future__ import annotations

import random
from unittest.mock import patch

import sympy as sp

from flashproof.verified import attention as att
from flashproof.verified.numbers import SympyNum

from . import mutants
from .core import Outcome, control, obligation

# (n, d, v, b, allowed) — allowed None is every key; sets are per-row allowed keys (0-based)
CASES = [
    (2, 2, 2, 1, None),
    (3, 1, 1, 2, [{0}, {0, 1}, {0, 1, 2}]),            # causal
    (3, 2, 2, 2, [{0}, {0, 1}, {0, 1, 2}]),            # causal, d = v = 2
    (3, 1, 2, 1, [{0, 2}, {1}, {0, 1, 2}]),            # sparse holes, a one-key row
    (2, 3, 3, 2, [{0, 1}, {1}]),                       # d = v = 3
]
DEEP_CASES = CASES + [(3, 3, 3, 2, [{0}, {0, 1}, {0, 1, 2}]), (3, 3, 3, 2, None), (3, 3, 3, 1, [{0, 2}, {1, 2}, {0, 1, 2}])]


def _mat(prefix, rows, cols):
    return [[sp.Symbol(f"{prefix}{i}_{r}", real=True) for r in range(cols)] for i in range(rows)]


def _phi(Q, K, V, G, c, allowed):
    n, d, v = len(Q), len(Q[0]), len(V[0])
    phi = 0
    for i in range(n):
        A = range(n) if allowed is None else sorted(allowed[i])
        if not A:
            continue  # the empty-row extension: Y_i = 0 contributes nothing
        e = {j: sp.exp(c * sum(Q[i][r] * K[j][r] for r in range(d))) for j in A}
        den = sum(e.values())
        phi += sum(G[i][a] * sum(e[j] * V[j][a] for j in A) for a in range(v)) / den
    return phi


def _zero(expr) -> bool:
    """True when ``expr`` is identically 0. Every ``Max(...)`` (a frozen shift) becomes a free symbol;
    after expanding, every exp(c·t) (c rational, t a monomial) becomes E_t**c with E_t a positive
    symbol, and the numerator of the resulting rational function must expand to 0. Both steps only
    generalise, so a 0 here is a proof; a nonzero numerator is checked numerically by the caller."""
    maxes = sorted(expr.atoms(sp.Max), key=sp.default_sort_key)
    expr = sp.expand(expr.xreplace({mx: sp.Symbol(f"mu{k}", real=True) for k, mx in enumerate(maxes)}))
    names: dict = {}
    rep = {}
    for e in expr.atoms(sp.exp):
        c, t = e.args[0].as_coeff_Mul()
        rep[e] = names.setdefault(t, sp.Symbol(f"E{len(names)}", positive=True)) ** c
    rep[sp.E] = names.setdefault(sp.Integer(1), sp.Symbol(f"E{len(names)}", positive=True))  # exp(1) prints as E
    numer, _ = sp.fraction(sp.together(expr.xreplace(rep)))
    return sp.expand(numer) == 0


def _witness(expr, syms, seed=0):
    rng = random.Random(seed)
    for _ in range(5):
        point = {s: sp.Rational(rng.randint(-9, 9), rng.randint(1, 4)) for s in syms}
        val = sp.N(expr.xreplace(point), 50)
        if val.is_number and abs(val) > sp.Float("1e-30"):
            return {str(k): str(x) for k, x in sorted(point.items(), key=lambda kv: str(kv[0]))} | {"difference": str(val)[:24]}
    return None


def _check_case(n, d, v, b, allowed, c=sp.Rational(1, 2), empty_rows="error"):
    Q, K, V, G = _mat("q", n, d), _mat("k", n, d), _mat("v", n, v), _mat("g", n, v)
    N = SympyNum()
    fw = att.tiled_forward(Q, K, V, scale=c, block=b, allowed=allowed, num=N, empty_rows=empty_rows)
    gr = att.tiled_backward(Q, K, V, G, fw, scale=c, block=b, allowed=allowed, num=N, empty_rows=empty_rows)
    for i, A in enumerate(allowed or []):
        if not A and (any(y != 0 for y in fw.out[i]) or fw.lse[i] != -sp.oo or any(x != 0 for x in gr.dq[i])):
            return {"case": f"n={n} d={d} v={v} b={b} mask={allowed}", "row": i, "out": str(fw.out[i]),
                    "lse": str(fw.lse[i]), "dq": str(gr.dq[i]), "difference": "empty row not 0 / -inf"}
    phi = _phi(Q, K, V, G, c, allowed)
    syms = [x for M in (Q, K, V, G) for row in M for x in row]
    for name, M, X in (("dq", gr.dq, Q), ("dk", gr.dk, K), ("dv", gr.dv, V)):
        for i in range(n):
            for r in range(len(X[0])):
                diff = M[i][r] - sp.diff(phi, X[i][r])
                if not _zero(diff):
                    maxes = diff.atoms(sp.Max)
                    w = _witness(diff, syms)
                    return {"case": f"n={n} d={d} v={v} b={b} mask={allowed}", "entry": f"{name}[{i}][{r}]",
                            **(w or {"note": "no nonzero point found in 5 tries"})} if (w or not maxes) else \
                        {"case": f"n={n} d={d} v={v} b={b}", "entry": f"{name}[{i}][{r}]", "note": "did not simplify"}
    return None


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
    Qs, Ks, Vs, Gs = _mat("q", n, d), _mat("k", n, d), _mat("v", n, v), _mat("g", n, v)
    phi = _phi(Qs, Ks, Vs, Gs, c, None)
    point = {s: sp.Integer(x) for Ms, M in ((Qs, Q), (Ks, K), (Vs, V), (Gs, G)) for rs, r in zip(Ms, M) for s, x in zip(rs, r)}
    for name, M, X in (("dq", gr.dq, Qs), ("dk", gr.dk, Ks), ("dv", gr.dv, Vs)):
        for i in range(n):
            for r in range(len(X[0])):
                diff = M[i][r] - sp.diff(phi, X[i][r]).xreplace(point)
                if not _zero(diff):
                    return {"case": "tie (K0 = K1)", "entry": f"{name}[{i}][{r}]", "difference": str(sp.N(diff, 20))}
    return None


@obligation("ATT-GRAD", checks=["THM-EXACT"], bounds={"n": 3, "d": 3, "v": 3, "cases": "(n,d,v) in (2,2,2) full, (3,1,1)/(3,2,2) causal, (3,1,2) sparse + one-key row, (2,3,3), tie"},
            deep_bounds={"n": 3, "d": 3, "v": 3, "cases": "default + n = d = v = 3 causal, full, sparse"}, assumptions=["A-SOLVER-TRUST"], solver="sympy")
def grad(ctx):
    """tiled_backward equals sympy's gradient of Φ = Σ G∘Y_dense, for any frozen shift (ties included)."""
    for case in (DEEP_CASES if ctx.deep else CASES):
        bad = _check_case(*case)
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
