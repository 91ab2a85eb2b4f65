"""Merge algebra (page item DEF-SUMMARY and our EXT-MERGE-COMM / EXT-ANY-ORDER): ⊥ is a two-sided
identity of ⋆, ⋆ is commutative and associative, and ⋆ of two disjoint sets' summaries is the
summary of their union. Each runs ``flashproof.verified.attention.merge`` on z3 exp-domain terms."""
from __future__ import annotations

from unittest.mock import patch

import z3

from flashproof.verified import attention as att

from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.engine.core import control, obligation, z3_prove
from flashproof.proofs.numbers.symbolic import Represents, num, reals, summary, summary_eq

V_BOUNDS = {"v": 16}
DEEP = {"v": 64}


@obligation("ATT-MERGE-IDENTITY", checks=["DEF-SUMMARY", "EXT-ANY-ORDER"], bounds=V_BOUNDS, deep_bounds=DEEP,
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST", "A-COORDINATEWISE"], scope="unbounded", why_unbounded="v is a value width (A-COORDINATEWISE)")
def merge_identity(ctx):
    """⊥ ⋆ Σ = Σ ⋆ ⊥ = Σ for every summary Σ of width v."""
    N = num()
    a, hyp = summary("a", ctx.bounds["v"])
    left, right = att.merge(att.BOTTOM, a, N), att.merge(a, att.BOTTOM, N)
    claim = z3.And(summary_eq(left, a), summary_eq(right, a))
    ok_flags = left.nonempty is True and right.nonempty is True  # flags fold to Python bools here
    out = z3_prove(claim, ctx, hypotheses=hyp)
    return out if ok_flags else out._replace(status="refuted", counterexample={"nonempty": "flag lost"})


@control("ATT-MERGE-IDENTITY/bottom-weight-one", of="ATT-MERGE-IDENTITY",
         bug="⊥ stored with maximum score 0 (weight 1) instead of −∞")
def merge_identity_bottom_weight_one(ctx):
    with patch.object(att, "_bottom", mutants.bottom_weight_one):
        return merge_identity(ctx)


@obligation("ATT-MERGE-COMM", checks=["EXT-MERGE-COMM", "EXT-ANY-ORDER"], bounds=V_BOUNDS, deep_bounds=DEEP,
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST", "A-COORDINATEWISE"], scope="unbounded", why_unbounded="v is a value width (A-COORDINATEWISE)")
def merge_comm(ctx):
    """Σ_a ⋆ Σ_b = Σ_b ⋆ Σ_a, coordinatewise, for summaries of width v."""
    N = num()
    a, ha = summary("a", ctx.bounds["v"])
    b, hb = summary("b", ctx.bounds["v"])
    return z3_prove(summary_eq(att.merge(a, b, N), att.merge(b, a, N)), ctx, hypotheses=ha + hb)


@control("ATT-MERGE-COMM/max-from-second", of="ATT-MERGE-COMM",
         bug="merge keeps the second operand's maximum instead of max(m_S, m_T)")
def merge_comm_max_from_second(ctx):
    with patch.object(att, "merge", mutants.merge_max_from_second):
        return merge_comm(ctx)


@obligation("ATT-MERGE-ASSOC", checks=["EXT-ANY-ORDER"], bounds=V_BOUNDS, deep_bounds=DEEP,
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST", "A-COORDINATEWISE"], scope="unbounded", why_unbounded="v is a value width (A-COORDINATEWISE)")
def merge_assoc(ctx):
    """(Σ_a ⋆ Σ_b) ⋆ Σ_c = Σ_a ⋆ (Σ_b ⋆ Σ_c), coordinatewise, for summaries of width v."""
    N = num()
    v = ctx.bounds["v"]
    (a, ha), (b, hb), (c, hc) = summary("a", v), summary("b", v), summary("c", v)
    lhs = att.merge(att.merge(a, b, N), c, N)
    rhs = att.merge(a, att.merge(b, c, N), N)
    return z3_prove(summary_eq(lhs, rhs), ctx, hypotheses=ha + hb + hc)


@control("ATT-MERGE-ASSOC/second-not-rescaled", of="ATT-MERGE-ASSOC",
         bug="merge adds the second operand's ℓ and z without rescaling them")
def merge_assoc_second_not_rescaled(ctx):
    with patch.object(att, "merge", mutants.merge_second_not_rescaled):
        return merge_assoc(ctx)


@obligation("ATT-MERGE-UNION", checks=["DEF-SUMMARY", "THM-EXACT", "EXT-ANY-ORDER"], bounds=V_BOUNDS,
            deep_bounds=DEEP, assumptions=["A-EXP-ISO", "A-SOLVER-TRUST", "A-COORDINATEWISE"], scope="unbounded", why_unbounded="v is a value width (A-COORDINATEWISE)")
def merge_union(ctx):
    """Σ(S) ⋆ Σ(I) = Σ(S ∪ I) for disjoint nonempty S, I, stated over block sums (any n, any b)."""
    N = num()
    v = ctx.bounds["v"]
    a, _ = summary("S", v)
    b, _ = summary("I", v)
    P_S, P_I, M_S, M_I = z3.Reals("P_S P_I Mx_S Mx_I")
    R_S, R_I = reals("R_S", v), reals("R_I", v)
    hyp = [Represents.holds(a, P_S, R_S, M_S), Represents.holds(b, P_I, R_I, M_I)]
    merged = att.merge(a, b, N)
    union = Represents.holds(merged, P_S + P_I, [x + y for x, y in zip(R_S, R_I)], z3.If(M_S >= M_I, M_S, M_I))
    return z3_prove(union, ctx, hypotheses=hyp)


@control("ATT-MERGE-UNION/no-rescale", of="ATT-MERGE-UNION", bug="merge adds ℓ and z without the e^{m−m'} rescale")
def merge_union_no_rescale(ctx):
    with patch.object(att, "merge", mutants.merge_no_rescale):
        return merge_union(ctx)
