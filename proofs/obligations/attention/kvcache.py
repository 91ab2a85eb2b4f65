"""Split-KV is exact (spec item EXT-SPLIT-KV): the KV-cache kernel's split plan, merged by the
summary merge rule ⋆, gives dense attention for every request length and every split count.

The kernel cuts a request's n candidate keys into S splits with ``kernels/kvcache/plan.split_range``
(split t = [t·c, min(t·c + c, n)), c = ⌈⌈n/b⌉/S⌉·b), computes each split's summary, and merges them
in split order, an empty split being ⊥. The argument is an induction over the split index t whose
invariant is "the state represents the prefix [0, min(t·c, n))", checked in three pieces that hold
for all n, S, b, v — none is a bounded unrolling:

* KV-SPLIT-PLAN — the plan function itself, run on z3 integers (symbolic n, S, b, t): split t
  starts where the prefix ends and ends at the next prefix's end (so it is disjoint from the
  prefix and their union is the next prefix), an empty split leaves the prefix unchanged, every
  split lies in [0, n), and after S splits the prefix is all n keys;
* KV-SPLIT-MERGE-STEP — ⋆ (``verified.attention.merge``, the theorem page's rule) of a state
  representing a key set S and a split summary representing a disjoint set I — either may be ⊥ —
  represents S ∪ I;
* KV-SPLIT-FINISH — the initial state ⊥ represents ∅ (the induction's base), and finishing a state
  that represents all allowed keys gives the dense row z/ℓ = Σwv/Σw and lse = log Σ e^s (0 and −∞
  for a row with none);
* KV-SPLIT-LSE-FORM — the kernel stores each split as (out, lse) and merges those pairs as
  lse = log Σ e^{lse_s}, out = Σ e^{lse_s − lse}·out_s: in the exp domain (W = e^{lse}) that is the
  finished form of ⋆, so the pairs' merge equals finishing the ⋆ of the summaries.

KV-SPLIT-BOUNDED cross-checks the composition end to end: the real plan and the real
``summarize``/``merge``/``_finish`` on symbolic weights and values equal the dense row for every
n ≤ 5, S ≤ 3 and b ≤ 2 (n ≤ 6, S ≤ 4 under --deep). Controls: a merge without the e^{m−m'} rescale; a split edge off by one.
"""
from __future__ import annotations

from unittest.mock import patch

import z3

from flashproof.kernels.kvcache import plan
from flashproof.verified import attention as att
from flashproof.verified.attention import BOTTOM, Summary

from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove
from flashproof.proofs.numbers.symbolic import Represents, num, reals, summary

#: ``plan.split_range``'s two non-ring operations on z3 integers (divisors are ≥ 1 here, where z3's
#: integer division is floor division)
Z3_OPS = plan.IntOps(floordiv=lambda a, b: a / b, minimum=lambda a, b: z3.If(a <= b, a, b))


# ------------------------------------------------------------------------------ mutants (controls)

def split_range_edge_off_by_one(s, n, num_splits, block, ops=plan.INT_OPS):
    """split s also takes the first key of split s + 1 (stop one past the edge)."""
    start, stop = _REAL_SPLIT_RANGE(s, n, num_splits, block, ops)
    return start, ops.minimum(stop + 1, n)


def chunk_size_rounded_down(n, num_splits, block, ops=plan.INT_OPS):
    """the split length rounds ⌈n/b⌉/S down instead of up, so the last keys belong to no split."""
    return ops.floordiv(ops.floordiv(n + block - 1, block), num_splits) * block


def finish_without_max(state, num):
    """finishing forgets the maximum: lse = log ℓ instead of m + log ℓ."""
    ne = state.nonempty
    l_safe = num.where(ne, state.l, num.one())
    out = [num.where(ne, num.div(za, l_safe), num.zero()) for za in state.z]
    return out, state.m, state.l, num.where(ne, num.log(l_safe), num.score_neg_inf())


def merge_without_rescale(a, b, num=None):
    """⋆ adds ℓ and z of both sides without rescaling them by e^{m−m'}."""
    num = att.resolve(num)
    if a is BOTTOM and b is BOTTOM:
        return BOTTOM
    v = len(b.z) if a is BOTTOM else len(a.z)
    a, b = att._lift(a, num, v), att._lift(b, num, v)
    return Summary(num.score_max(a.m, b.m), num.add(a.l, b.l), [num.add(x, y) for x, y in zip(a.z, b.z)],
                   num.or_(a.nonempty, b.nonempty))


_REAL_SPLIT_RANGE = plan.split_range


def _split_summary(name, v, flag):
    """A symbolic summary as the kernel holds it for one split: (A, ℓ, z) with A > 0, ℓ > 0 when the
    split had an allowed key (``flag``), else the initial state ⊥ = (A = 0 i.e. m = −∞, ℓ = 0, z = 0)."""
    s, hyp = summary(name, v, flag=flag)
    return s, hyp + [z3.Implies(z3.Not(flag), z3.And(s.m == 0, s.l == 0, *[x == 0 for x in s.z]))]


# ------------------------------------------------------------------------------------- the plan

@obligation("KV-SPLIT-PLAN", checks=["EXT-SPLIT-KV"], bounds={}, solver="z3", assumptions=["A-SOLVER-TRUST"])
def split_plan(ctx):
    """plan.split_range on z3 Ints: split t extends the prefix [0, min(t·c, n)) to [0, min((t+1)·c, n)), all n, S, b."""
    n, S, b, t, j = z3.Ints("n S b t j")
    c = plan.chunk_size(n, S, b, Z3_OPS)
    start, stop = plan.split_range(t, n, S, b, Z3_OPS)
    prefix = lambda k: z3.If(k * c <= n, k * c, n)  # noqa: E731 - min(k·c, n), the keys of splits 0..k−1
    last_start, last_stop = plan.split_range(S - 1, n, S, b, Z3_OPS)
    setting = z3.And(n >= 0, S >= 1, b >= 1)
    claim = z3.Implies(setting, z3.And(
        z3.Implies(n >= 1, c >= 1),
        z3.Implies(z3.And(0 <= t, t < S), z3.And(
            # a non-empty split starts at the prefix's end and ends at the next prefix's end
            z3.Implies(start < stop, z3.And(start == prefix(t), stop == prefix(t + 1))),
            # an empty split leaves the prefix where it was
            z3.Implies(start >= stop, prefix(t + 1) == prefix(t)),
            # every key of a split is a key of the request
            z3.Implies(z3.And(start <= j, j < stop), z3.And(0 <= j, j < n)))),
        # after the last split the prefix is every key (and the last split ends at n)
        prefix(S) == n, z3.Or(last_start >= last_stop, last_stop == n)))
    out = z3_prove(claim, ctx, logic="QF_NIA")
    return out._replace(detail="symbolic n ≥ 0, S ≥ 1, b ≥ 1, t; " + out.detail)


@control("KV-SPLIT-PLAN/edge-off-by-one", of="KV-SPLIT-PLAN", bug="a split's stop is one past its edge")
def split_plan_off_by_one(ctx):
    with patch.object(plan, "split_range", split_range_edge_off_by_one):
        return split_plan(ctx)


@control("KV-SPLIT-PLAN/chunk-rounded-down", of="KV-SPLIT-PLAN", bug="the split length rounds ⌈n/b⌉/S down")
def split_plan_rounded_down(ctx):
    with patch.object(plan, "chunk_size", chunk_size_rounded_down):
        return split_plan(ctx)


# ------------------------------------------------------------------------------- the merge step

@obligation("KV-SPLIT-MERGE-STEP", checks=["EXT-SPLIT-KV"], bounds={"v": 16}, deep_bounds={"v": 64},
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST"])
def split_merge_step(ctx):
    """⋆ of a state ~ S and a split summary ~ I (either ⊥, symbolic flags) represents S ∪ I (width v)."""
    v = ctx.bounds["v"]
    N = num()
    fs, fi = z3.Bools("state_nonempty split_nonempty")
    st, h_s = _split_summary("S", v, fs)
    sp, h_i = _split_summary("I", v, fi)
    P_S, P_I, M_S, M_I = z3.Reals("P_S P_I Mx_S Mx_I")
    R_S, R_I = reals("R_S", v), reals("R_I", v)
    hyp = h_s + h_i + [Represents.holds(st, P_S, R_S, M_S), Represents.holds(sp, P_I, R_I, M_I)]
    merged = att.merge(st, sp, N)
    claim = Represents.holds(merged, P_S + P_I, [x + y for x, y in zip(R_S, R_I)], z3.If(M_S >= M_I, M_S, M_I))
    return z3_prove(claim, ctx, hypotheses=hyp)


@control("KV-SPLIT-MERGE-STEP/no-rescale", of="KV-SPLIT-MERGE-STEP", bug="⋆ adds ℓ and z without the e^{m−m'} rescale")
def split_merge_step_no_rescale(ctx):
    with patch.object(att, "merge", merge_without_rescale):
        return split_merge_step(ctx)


# ------------------------------------------------------------------------- base and finish

@obligation("KV-SPLIT-FINISH", checks=["EXT-SPLIT-KV"], bounds={"v": 16}, deep_bounds={"v": 64},
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST"])
def split_finish(ctx):
    """The kernel's initial state ⊥ represents ∅; finishing a state ~ all allowed keys gives Σwv/Σw and lse = log Σ e^s."""
    v = ctx.bounds["v"]
    N = num()
    f = z3.Bool("nonempty")
    st, hyp = _split_summary("A", v, f)
    P, M = z3.Reals("P Mx")
    R = reals("R", v)
    zero = z3.RealVal(0)
    base = att._lift(BOTTOM, N, v)
    out, _, _, lse = att._finish(st, N)
    claim = z3.And(Represents.holds(base, zero, [zero] * v, zero),
                   z3.Implies(f, z3.And(lse == P, *[y * P == r for y, r in zip(out, R)])),
                   z3.Implies(z3.Not(f), z3.And(lse == 0, *[y == 0 for y in out])))  # empty row: out 0, lse −∞
    return z3_prove(claim, ctx, hypotheses=hyp + [Represents.holds(st, P, R, M)])


@control("KV-SPLIT-FINISH/lse-without-max", of="KV-SPLIT-FINISH", bug="finishing forgets the maximum (lse = log ℓ)")
def split_finish_without_max(ctx):
    with patch.object(att, "_finish", finish_without_max):
        return split_finish(ctx)


# ------------------------------------------------------------------------- the (out, lse) form

@obligation("KV-SPLIT-LSE-FORM", checks=["EXT-SPLIT-KV"], bounds={"v": 4}, deep_bounds={"v": 6},
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST"])
def split_lse_form(ctx):
    """Finishing a ⋆ b gives W = W_a + W_b and out = (W_a·out_a + W_b·out_b)/W, (out_x, W_x = e^{lse_x}) = finish(x)."""
    v = ctx.bounds["v"]
    N = num()
    fa, fb = z3.Bools("a_nonempty b_nonempty")
    a, ha = _split_summary("a", v, fa)
    b, hb = _split_summary("b", v, fb)
    out_a, _, _, w_a = att._finish(a, N)
    out_b, _, _, w_b = att._finish(b, N)
    out, _, _, w = att._finish(att.merge(a, b, N), N)
    total = w_a + w_b
    claim = z3.And(
        z3.Implies(z3.Or(fa, fb), z3.And(w == total, *[o * total == w_a * x + w_b * y for o, x, y in zip(out, out_a, out_b)])),
        # both empty: out 0 and lse −∞ (exp-domain weight 0), the empty-row convention
        z3.Implies(z3.Not(z3.Or(fa, fb)), z3.And(w == 0, *[o == 0 for o in out])),
        # an empty side has weight 0, so it drops out of the weighted average
        z3.Implies(z3.Not(fa), w_a == 0), z3.Implies(z3.Not(fb), w_b == 0))
    return z3_prove(claim, ctx, hypotheses=ha + hb)


@control("KV-SPLIT-LSE-FORM/no-rescale", of="KV-SPLIT-LSE-FORM", bug="⋆ adds ℓ and z without the e^{m−m'} rescale")
def split_lse_form_no_rescale(ctx):
    with patch.object(att, "merge", merge_without_rescale):
        return split_lse_form(ctx)


# ------------------------------------------------------------------- end to end, bounded

def _splits_vs_dense(ctx, n, S, b):
    """The real plan's splits of n keys (one row, v = 1, symbolic weights, values and mask),
    summarised, merged in split order, finished; compared with the dense row."""
    N = num()
    w, vals, flags = reals("w", n), reals("val", n), [z3.Bool(f"f{j}") for j in range(n)]
    state = BOTTOM
    for r in plan.split_ranges(n, S, b):
        keys = list(r)
        if not keys:
            part = BOTTOM
        else:
            part = att.summarize([w[j] for j in keys], [[vals[j]] for j in keys], N, allowed=[flags[j] for j in keys])
        state = att.merge(state, part, N)
    den = z3.Sum([z3.If(f, x, 0) for x, f in zip(w, flags)])
    nm = z3.Sum([z3.If(f, x * y, 0) for x, y, f in zip(w, vals, flags)])
    if state is BOTTOM:
        return Outcome("refuted", counterexample={"n": n, "S": S, "b": b}, solver="z3", detail="no split holds a key")
    out, _, _, lse = att._finish(state, N)
    claim = z3.Implies(z3.Or(*flags), z3.And(out[0] * den == nm, lse == den))
    res = z3_prove(claim, ctx, hypotheses=[x > 0 for x in w])
    if res.status == "refuted":
        res = res._replace(counterexample=dict(res.counterexample or {}, n=n, S=S, b=b))
    return res


@obligation("KV-SPLIT-BOUNDED", checks=["EXT-SPLIT-KV"], bounds={"n": 5, "S": 3, "b": 2, "v": 1, "mask": "symbolic"},
            deep_bounds={"n": 6, "S": 4, "b": 2, "v": 1, "mask": "symbolic"},
            assumptions=["A-EXP-ISO", "A-NONEMPTY-ROW", "A-SOLVER-TRUST"])
def split_bounded(ctx):
    """Cross-check: the real plan + summarize + ⋆ + finish equal the dense row, all n ≤ bound, S ≤ bound, b ≤ bound."""
    k = 0
    for n in range(1, ctx.bounds["n"] + 1):
        for S in range(1, ctx.bounds["S"] + 1):
            for b in range(1, ctx.bounds["b"] + 1):
                out = _splits_vs_dense(ctx, n, S, b)
                k += 1
                if out.status != "proved":
                    return out._replace(detail=f"n={n}, S={S}, b={b}: {out.detail}")
    return Outcome("proved", solver="z3", detail=f"{k} (n, S, b) cases, symbolic mask per key")


@control("KV-SPLIT-BOUNDED/edge-off-by-one", of="KV-SPLIT-BOUNDED", bug="a split's stop is one past its edge")
def split_bounded_off_by_one(ctx):
    with patch.object(plan, "split_range", split_range_edge_off_by_one):
        return split_bounded(ctx)


@control("KV-SPLIT-BOUNDED/no-rescale", of="KV-SPLIT-BOUNDED", bug="⋆ adds ℓ and z without the e^{m−m'} rescale")
def split_bounded_no_rescale(ctx):
    with patch.object(att, "merge", merge_without_rescale):
        return split_bounded(ctx)
