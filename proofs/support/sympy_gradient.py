"""Symbolic gradient checks shared by the attention obligations (sympy).

``gradient_mismatch(n, d, v, b, allowed, n_k=None)`` runs ``tiled_forward`` then ``tiled_backward``
on ``SympyNum`` with symbolic Q (n_q, d), K (n_k, d), V (n_k, v), G (n_q, v) (n_q = n; n_k = n
unless given: rectangular problems both ways) and compares each of dQ, dK, dV
with sympy's derivative of Φ = Σ G∘Y (``phi``, the dense masked softmax formula); it returns None
when they agree, else a JSON-able counterexample. ``vanishes(expr)`` decides that a difference is
identically 0 (every frozen shift ``Max(...)`` generalised to a free symbol); ``nonzero_point``
finds a rational point where it is not.
"""
from __future__ import annotations

import random

import sympy as sp

from flashproof.verified import attention as att
from flashproof.verified.numbers import SympyNum

__all__ = ["matrix", "phi", "vanishes", "nonzero_point", "gradient_mismatch"]


def matrix(prefix, rows, cols):
    """A (rows, cols) list of real sympy symbols named ``<prefix><i>_<r>``."""
    return [[sp.Symbol(f"{prefix}{i}_{r}", real=True) for r in range(cols)] for i in range(rows)]


def phi(Q, K, V, G, c, allowed):
    """Φ = Σ_i Σ_a G_ia Y_ia with Y the dense masked softmax(c·QKᵀ)·V; Q (n_q, d), K (n_k, d),
    V (n_k, v), G (n_q, v); ``allowed`` None (every key) or one set of allowed keys per row (an
    empty row contributes 0)."""
    n_q, n_k, d, v = len(Q), len(K), len(Q[0]), len(V[0])
    total = 0
    for i in range(n_q):
        A = range(n_k) if allowed is None else sorted(allowed[i])
        if not A:
            continue  # the empty-row extension: Y_i = 0 contributes nothing
        e = {j: sp.exp(c * sum(Q[i][r] * K[j][r] for r in range(d))) for j in A}
        den = sum(e.values())
        total += sum(G[i][a] * sum(e[j] * V[j][a] for j in A) for a in range(v)) / den
    return total


def vanishes(expr) -> bool:
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


def nonzero_point(expr, syms, seed=0):
    """A seeded rational point of ``syms`` where ``expr`` is visibly nonzero (50 digits), as a
    JSON-able dict with the difference; None when five tries find none."""
    rng = random.Random(seed)
    for _ in range(5):
        point = {s: sp.Rational(rng.randint(-9, 9), rng.randint(1, 4)) for s in syms}
        val = sp.N(expr.xreplace(point), 50)
        if val.is_number and abs(val) > sp.Float("1e-30"):
            return {str(k): str(x) for k, x in sorted(point.items(), key=lambda kv: str(kv[0]))} | {"difference": str(val)[:24]}
    return None


def _shape_error(gr, n_q, n_k, d, v):
    want = {"dq": (n_q, d), "dk": (n_k, d), "dv": (n_k, v)}
    got = {name: (len(M), len(M[0]) if M else 0) for name, M in zip(("dq", "dk", "dv"), gr)}
    return None if got == want else {"expected": str(want), "received": str(got)}


def gradient_mismatch(n, d, v, b, allowed, c=sp.Rational(1, 2), empty_rows="error", n_k=None):
    """None when the tiled backward (block ``b``, scale ``c``) equals sympy's gradient of ``phi`` for
    symbolic Q (n, d), K (n_k, d), V (n_k, v), G (n, v) (n_k = n unless given), and an empty row
    gives 0 / −∞; else a counterexample dict (with ``"difference"``, or with ``"note"`` when a
    difference did not simplify). A reverse pass that raises on these valid inputs, or returns
    gradients of the wrong shape, is a counterexample too."""
    n_k = n if n_k is None else n_k
    case = f"n_q={n} n_k={n_k} d={d} v={v} b={b} mask={allowed}"
    Q, K, V, G = matrix("q", n, d), matrix("k", n_k, d), matrix("v", n_k, v), matrix("g", n, v)
    N = SympyNum()
    fw = att.tiled_forward(Q, K, V, scale=c, block=b, allowed=allowed, num=N, empty_rows=empty_rows)
    try:
        gr = att.tiled_backward(Q, K, V, G, fw, scale=c, block=b, allowed=allowed, num=N, empty_rows=empty_rows)
    except (IndexError, ValueError) as e:  # the inputs are valid: a crash is a wrong reverse pass
        return {"case": case, "difference": f"reverse pass raised {type(e).__name__}: {e}"}
    bad = _shape_error(gr, n, n_k, d, v)
    if bad is not None:
        return {"case": case, "difference": "gradient shapes", **bad}
    for i, A in enumerate(allowed or []):
        if not A and (any(y != 0 for y in fw.out[i]) or fw.lse[i] != -sp.oo or any(x != 0 for x in gr.dq[i])):
            return {"case": case, "row": i, "out": str(fw.out[i]),
                    "lse": str(fw.lse[i]), "dq": str(gr.dq[i]), "difference": "empty row not 0 / -inf"}
    phi_dense = phi(Q, K, V, G, c, allowed)
    syms = [x for M in (Q, K, V, G) for row in M for x in row]
    for name, M, X in (("dq", gr.dq, Q), ("dk", gr.dk, K), ("dv", gr.dv, V)):
        for i in range(len(X)):
            for r in range(len(X[0])):
                diff = M[i][r] - sp.diff(phi_dense, X[i][r])
                if not vanishes(diff):
                    maxes = diff.atoms(sp.Max)
                    w = nonzero_point(diff, syms)
                    return {"case": case, "entry": f"{name}[{i}][{r}]",
                            **(w or {"note": "no nonzero point found in 5 tries"})} if (w or not maxes) else \
                        {"case": case, "entry": f"{name}[{i}][{r}]", "note": "did not simplify"}
    return None
