"""An independent cross-check of merge associativity that does not use the exp-domain substitution
(EXT-ANY-ORDER): ``merge`` runs on the log-domain z3 system (``proofs.numbers.logdom``) with exp
uninterpreted, and the claim is proved in each of the 6 orders of the three maxima from ground instances of
E(x)·E(y) = E(x+y) (assumption A-EXP-HOM). v = 1: every z coordinate has the form of ℓ.
A ``sat`` model is re-evaluated with mpmath's real exp before it is reported as a counterexample."""
from __future__ import annotations

import itertools
from fractions import Fraction
from unittest.mock import patch

import z3

from flashproof.verified import attention as att
from flashproof.verified.attention import Summary
from flashproof.verified.numbers import MpmathNum

from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.engine.core import Outcome, control, fresh_solver, model_dict, obligation
from flashproof.proofs.numbers.logdom import LogZ3Num

NAMES = "abc"


def _summaries(make):
    return [Summary(make(f"{k}_m"), make(f"{k}_l"), [make(f"{k}_z0")], True) for k in NAMES]


def _real_exp_differs(model) -> tuple[bool, dict]:
    """Re-evaluate both merge orders at the model's inputs with mpmath (60 digits, real exp)."""
    def val(name):
        x = model.get(name, "0")
        return Fraction(x) if "/" in x or x.lstrip("-").isdigit() else Fraction(0)

    N = MpmathNum(60)
    a, b, c = _summaries(lambda n: N.const(val(n)))
    lhs = att.merge(att.merge(a, b, N), c, N)
    rhs = att.merge(a, att.merge(b, c, N), N)
    gap = max(abs(lhs.l - rhs.l), abs(lhs.z[0] - rhs.z[0]), abs(lhs.m - rhs.m))
    return gap > N.ctx.mpf(10) ** -40, {"real_exp_gap": str(N.ctx.nstr(gap, 8))}


@obligation("ATT-MERGE-ASSOC-LOGDOM", checks=["EXT-ANY-ORDER"], bounds={"v": 1, "orders": 6},
            assumptions=["A-EXP-HOM", "A-SOLVER-TRUST", "A-COORDINATEWISE"], role="cross-check", scope="unbounded",
            why_unbounded="v is a value width (A-COORDINATEWISE); the 6 orders are all orders of three maxima")
def merge_assoc_logdom(ctx):
    """(a⋆b)⋆c = a⋆(b⋆c) in the log domain with exp uninterpreted, per order of the three maxima."""
    N = LogZ3Num()
    sums = _summaries(z3.Real)
    a, b, c = sums
    lhs = att.merge(att.merge(a, b, N), c, N)
    rhs = att.merge(a, att.merge(b, c, N), N)
    claim = z3.And(lhs.m == rhs.m, lhs.l == rhs.l, lhs.z[0] == rhs.z[0])
    inst = N.instances()
    for order in itertools.permutations(range(3)):
        ms = [sums[i].m for i in order]
        s = fresh_solver(inst + [ms[0] <= ms[1], ms[1] <= ms[2], z3.Not(claim)], ctx)
        r = s.check()
        if r == z3.sat:
            model = model_dict(s.model())
            differs, extra = _real_exp_differs(model)
            if differs:
                return Outcome("refuted", counterexample={**model, **extra, "order": "≤".join(NAMES[i] for i in order)},
                               solver="z3", detail="model confirmed with mpmath exp")
            return Outcome("unknown", solver="z3", detail="model of the ground instances is not one of the real exp")
        if r != z3.unsat:
            return Outcome("unknown", solver="z3", detail=f"order {order}: {s.reason_unknown()}")
    return Outcome("proved", solver="z3", detail="6 orders, ground homomorphism instances")


@control("ATT-MERGE-ASSOC-LOGDOM/second-not-rescaled", of="ATT-MERGE-ASSOC-LOGDOM",
         bug="merge adds the second operand's ℓ and z without rescaling them")
def merge_assoc_logdom_second(ctx):
    with patch.object(att, "merge", mutants.merge_second_not_rescaled):
        return merge_assoc_logdom(ctx)
