"""exp2 rescaling (EXT-EXP2): the reference run in the kernels' base-2 convention (scale c·log2 e,
exp2, log2; ``proofs.base2``) and converted back with ``natural_from_base2`` gives exactly the
natural-exp run's output, log-sum-exp and gradients (sympy, symbolic Q, K, V, G)."""
from __future__ import annotations

from unittest.mock import patch

import sympy as sp

from flashproof.verified import attention as att
from flashproof.verified.numbers import SympyNum

from flashproof.proofs.numbers import base2
from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.support.sympy_gradient import matrix, nonzero_point, vanishes

# (n_q, n_k, d, v, b, allowed): square and rectangular both ways
CASES = [(2, 2, 1, 1, 1, None), (3, 3, 1, 1, 2, [{0}, {0, 1}, {0, 1, 2}]), (1, 2, 1, 1, 1, None), (2, 1, 1, 1, 1, None)]


def _as_exp(e):
    return sp.sympify(e).rewrite(sp.exp)


def _check(n, n_k, d, v, b, allowed):
    Q, K, V, G = matrix("q", n, d), matrix("k", n_k, d), matrix("v", n_k, v), matrix("g", n, v)
    c = sp.Rational(1, 2)
    nat_num, b2_num = SympyNum(), base2.Base2SympyNum()
    fw = att.tiled_forward(Q, K, V, scale=c, block=b, allowed=allowed, num=nat_num)
    gr = att.tiled_backward(Q, K, V, G, fw, scale=c, block=b, allowed=allowed, num=nat_num)
    c2 = c / base2.LN2  # c·log2(e)
    fw2 = att.tiled_forward(Q, K, V, scale=c2, block=b, allowed=allowed, num=b2_num)
    gr2 = att.tiled_backward(Q, K, V, G, fw2, scale=c2, block=b, allowed=allowed, num=b2_num)
    conv = base2.natural_from_base2(fw2, gr2)
    syms = [x for M in (Q, K, V, G) for row in M for x in row]
    pairs = [("out", fw.out, conv.out), ("dq", gr.dq, conv.dq), ("dk", gr.dk, conv.dk), ("dv", gr.dv, conv.dv)]
    for name, want, got in pairs:
        for i, (rw, rg) in enumerate(zip(want, got)):
            for r, (x, y) in enumerate(zip(rw, rg)):
                diff = _as_exp(x - y)
                if not vanishes(diff):
                    return {"case": f"n_q={n} n_k={n_k} d={d} v={v} b={b}", "entry": f"{name}[{i}][{r}]",
                            **(nonzero_point(diff, syms) or {"note": "did not simplify"})}
    for i, (x, y) in enumerate(zip(fw.lse, conv.lse)):
        diff = sp.expand_log(_as_exp(x - y), force=True)
        if not vanishes(sp.simplify(diff)):
            return {"case": f"n_q={n} n_k={n_k} d={d} v={v} b={b}", "entry": f"lse[{i}]", **(nonzero_point(diff, syms) or {})}
    return None


@obligation("ATT-EXP2", checks=["EXT-EXP2"], bounds={"cases": "(n_q,n_k,d,v,b) = (2,2,1,1,1) full, (3,3,1,1,2) causal, (1,2,1,1,1), (2,1,1,1,1) full"},
            solver="sympy", assumptions=["A-SOLVER-TRUST"], scope="bounded")
def exp2(ctx):
    """Base-2 run with folded log2(e), converted (lse·ln2, dQ·ln2, dK·ln2), equals the natural run."""
    for case in CASES:
        bad = _check(*case)
        if bad is not None:
            return Outcome("refuted" if "difference" in bad else "unknown",
                           counterexample=bad if "difference" in bad else None, detail=str(bad), solver="sympy")
    return Outcome("proved", solver="sympy", detail=f"{len(CASES)} symbolic cases")


def _no_ln2_on_dq(fw, gr):
    """the conversion forgets the ln 2 factor on dQ."""
    return base2.Natural(fw.out, [base2.LN2 * x for x in fw.lse], gr.dq,
                         [[base2.LN2 * x for x in row] for row in gr.dk], gr.dv)


@control("ATT-EXP2/dq-missing-ln2", of="ATT-EXP2", bug="the conversion forgets the ln 2 factor on dQ")
def exp2_no_ln2(ctx):
    with patch.object(base2, "natural_from_base2", _no_ln2_on_dq):
        return exp2(ctx)
