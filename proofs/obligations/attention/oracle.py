"""The oracle's dense formula is the theorem's right-hand side (EXT-ORACLE-DENSE).

``dense_attention`` is what the fuzzer's verdicts and the tests compare kernels with, so it is
checked here against the right-hand side written once in ``proofs/support/dense_rhs.py``:

* exp domain (z3, assumption A-EXP-ISO): ``dense_attention_from_scores`` for n_q = 2 rows and
  n_k ≤ 4 keys with one symbolic mask Bool per (i, j) pair, discharged by a complete case split
  over the mask Bools: Y_i·Σ_{A_i} w = Σ_{A_i} w·v for every nonempty row, Y_i = 0 for an empty one;
* log domain (sympy): ``dense_attention`` itself (from Q, K: the scores c·⟨Q_i, K_j⟩, the row
  maximum as the shift) on rectangular shapes both ways, equal to Σ_A e^s V / Σ_A e^s with every
  ``Max`` generalised to a free symbol (so the identity holds for any shift, ties included).
"""
from __future__ import annotations

import itertools
from unittest.mock import patch

import sympy as sp
import z3

from flashproof.verified import attention as att
from flashproof.verified.numbers import SympyNum

from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove
from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.numbers.symbolic import num, reals
from flashproof.proofs.support.dense_rhs import dense_row
from flashproof.proofs.support.sympy_gradient import matrix, nonzero_point, vanishes


def _exp_domain(ctx, n_q: int, n_k_max: int) -> tuple[Outcome | None, int]:
    k = 0
    for n_k in range(1, n_k_max + 1):
        w = [reals(f"w{i}_", n_k) for i in range(n_q)]
        vals = reals("val", n_k)
        flags = [[z3.Bool(f"f{i}_{j}") for j in range(n_k)] for i in range(n_q)]
        Y = att.dense_attention_from_scores(w, [[x] for x in vals], allowed=lambda i, j: flags[i][j], num=num(),
                                            empty_rows="zero")
        parts = []
        for i in range(n_q):
            nm, den = dense_row(w[i], vals, flags[i])
            ne = z3.Or(*flags[i])
            parts.append(z3.If(ne, Y[i][0] * den == nm, Y[i][0] == 0))
        claim = z3.And(*parts)
        bools = [f for row in flags for f in row]
        for bits in itertools.product((False, True), repeat=len(bools)):
            case = z3.simplify(z3.substitute(claim, *[(f, z3.BoolVal(x)) for f, x in zip(bools, bits)]))
            out = z3_prove(case, ctx, hypotheses=[x > 0 for row in w for x in row])
            k += 1
            if out.status != "proved":
                mask = ["".join("1" if x else "0" for x in bits[i * n_k:(i + 1) * n_k]) for i in range(n_q)]
                cx = dict(out.counterexample or {}, n_q=n_q, n_k=n_k, mask=mask)
                return out._replace(counterexample=cx if out.counterexample else None,
                                    detail=f"n_q={n_q}, n_k={n_k}: {out.detail}"), k
    return None, k


#: (n_q, n_k, d, allowed) for the log-domain check of the Q, K entry point
LOG_CASES = [(2, 3, 2, [{0, 2}, {1}]), (3, 2, 1, [{0}, {0, 1}, {1}])]


def _log_domain() -> Outcome | None:
    N = SympyNum()
    c = sp.Rational(1, 2)
    for n_q, n_k, d, allowed in LOG_CASES:
        Q, K, V = matrix("q", n_q, d), matrix("k", n_k, d), matrix("v", n_k, 1)
        Y = att.dense_attention(Q, K, V, scale=c, allowed=allowed, num=N)
        syms = [x for M in (Q, K, V) for row in M for x in row]
        for i in range(n_q):
            e = {j: sp.exp(c * sum(Q[i][r] * K[j][r] for r in range(d))) for j in sorted(allowed[i])}
            rhs = sum(e[j] * V[j][0] for j in e) / sum(e.values())
            if not vanishes(Y[i][0] - rhs):
                w = nonzero_point(Y[i][0] - rhs, syms) or {"note": "no nonzero point found in 5 tries"}
                return Outcome("refuted", counterexample={"case": f"n_q={n_q} n_k={n_k} d={d} mask={allowed}",
                                                          "row": i, **w},
                               detail="dense_attention differs from Σ_A e^s V / Σ_A e^s", solver="sympy")
    return None


@obligation("ATT-ORACLE-DENSE", checks=["EXT-ORACLE-DENSE"],
            bounds={"exp_domain": "n_q = 2, n_k ≤ 3, v = 1, symbolic mask per pair (case split)",
                    "log_domain": "dense_attention (Q, K): (n_q, n_k, d) = (2, 3, 2), (3, 2, 1)"},
            deep_bounds={"exp_domain": "n_q = 2, n_k ≤ 4, v = 1, symbolic mask per pair (case split)",
                         "log_domain": "dense_attention (Q, K): (n_q, n_k, d) = (2, 3, 2), (3, 2, 1)"},
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST"], solver="z3+sympy")
def oracle_dense(ctx):
    """dense_attention equals the theorem's right-hand side Σ_A e^s V / Σ_A e^s (masks symbolic, rectangular shapes)."""
    bad, k = _exp_domain(ctx, 2, 4 if ctx.deep else 3)
    if bad is not None:
        return bad
    bad = _log_domain()
    if bad is not None:
        return bad
    return Outcome("proved", solver="z3+sympy",
                   detail=f"{k} mask assignments (exp domain, z3); {len(LOG_CASES)} rectangular log-domain cases (sympy)")


@control("ATT-ORACLE-DENSE/den-sums-masked", of="ATT-ORACLE-DENSE",
         bug="the dense formula's denominator sums the masked keys too")
def oracle_dense_masked(ctx):
    with patch.object(att, "_dense", mutants.dense_den_sums_masked):
        return oracle_dense(ctx)
