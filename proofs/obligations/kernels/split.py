"""KER-SPLIT: any split of a row's keys into contiguous ranges, each summarised as a partial (out, lse)
and the partials merged by ⋆, is exact — for any number of ranges, any cut points, empty ranges
included. The general statement that split plans (split-KV over a KV cache, ring / context parallel
shards, the kernels' own block walk) cite: a plan only has to show that its ranges are contiguous cuts
lo = c_0 ≤ c_1 ≤ … ≤ c_P = hi of the keys it covers.

Decomposed so that nothing grows with P (induction on the number of ranges):

* KER-SPLIT-CUTS (z3 integers): one cut c with lo ≤ c ≤ hi splits [lo, hi) into [lo, c) and [c, hi),
  each key in exactly one; by induction any cut sequence partitions [lo, hi).
* KER-SPLIT-PARTIAL (z3 exp domain, ``verified.attention._finish``): the partial a kernel returns for a
  nonempty range, (out, lse) = (z/ℓ, m + log ℓ), read back as the summary (lse, 1, out), carries the
  same sums as the kernel's state: e^lse·1 = Σ e^s and e^lse·out = Σ e^s v. An empty range returns
  lse = −∞, which reads back as ⊥.
* KER-SPLIT-FOLD (z3 exp domain, ``verified.attention.merge``): the induction step. If the accumulator
  carries the sums (P, R) of the ranges merged so far, merging the next range's partial (sums
  (P', R')) gives a state with sums (P + P', R + R'); merging ⊥ changes nothing. With the base (⊥ has
  sums (0, 0)) and the final division (ATT-TILED-BASE-FINAL) the merged result is the attention over
  all ranges, for any P.

The sums relation is the invariant of ATT-TILED-STEP for an arbitrary rescale reference: a state
(A, ℓ, z, flag) carries (P, R) when flag ⇒ A > 0, P > 0, A·ℓ = P, A·z = R and ¬flag ⇒ P = 0, R = 0 (A = e^m).
"""
from __future__ import annotations

from unittest.mock import patch

import z3

from flashproof.verified import attention as att
from flashproof.verified.attention import Summary

from flashproof.proofs.engine.core import control, obligation, z3_prove
from flashproof.proofs.mutants import attention as att_mutants, kernels as kernel_mutants
from flashproof.proofs.numbers.symbolic import num, reals

V = {"v": 8}
DEEP = {"v": 32}
ASSUME = ["A-EXP-ISO", "A-SOLVER-TRUST"]


def carries(s: Summary, P, R):
    """z3 Bool: the state s carries the weight sum P and weighted value sums R."""
    flag = s.nonempty
    ne = z3.And(s.m > 0, P > 0, s.m * s.l == P, *[s.m * za == r for za, r in zip(s.z, R)])
    empty = z3.And(P == 0, *[r == 0 for r in R])
    if flag is True:
        return ne
    if flag is False:
        return empty
    return z3.If(flag, ne, empty)


def _state(name, v):
    """A symbolic state with a symbolic nonempty flag."""
    return Summary(z3.Real(f"{name}_A"), z3.Real(f"{name}_l"), reals(f"{name}_z", v), z3.Bool(f"{name}_ne"))


def normalised(partial_out, lse, nonempty):
    """The summary a merge reads back from a partial (out, lse): (lse, 1, out), ⊥ when lse = −∞."""
    N = num()
    return Summary(lse, N.one(), list(partial_out), nonempty)


def check_cuts(ctx, start_second=None):
    lo, c, hi, j = z3.Ints("lo c hi j")
    claim = z3.And(z3.Implies(z3.And(j >= lo, j < hi), z3.If(z3.And(j >= lo, j < c), 1, 0)
                              + z3.If(z3.And(j >= (start_second(c) if start_second else c), j < hi), 1, 0) == 1),
                   z3.Implies(z3.Or(j < lo, j >= hi),
                              z3.And(z3.Not(z3.And(j >= lo, j < c)),
                                     z3.Not(z3.And(j >= (start_second(c) if start_second else c), j < hi)))))
    return z3_prove(claim, ctx, hypotheses=[lo <= c, c <= hi])


@obligation("KER-SPLIT-CUTS", checks=["KER-SPLIT"], bounds={}, assumptions=["A-SOLVER-TRUST"])
def split_cuts(ctx):
    """A cut lo ≤ c ≤ hi splits [lo, hi) into [lo, c) and [c, hi), each key in exactly one (any lo, c, hi)."""
    return check_cuts(ctx)


@control("KER-SPLIT-CUTS/overlap", of="KER-SPLIT-CUTS", bug="the second range starts one key before the cut")
def split_cuts_overlap(ctx):
    return check_cuts(ctx, start_second=lambda c: c - 1)


def check_partial(ctx):
    N = num()
    v = ctx.bounds["v"]
    s = _state("S", v)
    s = s._replace(nonempty=True)
    P, R = z3.Real("P"), reals("R", v)
    out, _, _, lse = att._finish(s, N)
    back = normalised(out, lse, True)
    return z3_prove(carries(back, P, R), ctx, hypotheses=[carries(s, P, R)])


@obligation("KER-SPLIT-PARTIAL", checks=["KER-SPLIT"], bounds=V, deep_bounds=DEEP, assumptions=ASSUME)
def split_partial(ctx):
    """A range's partial (out, lse) from _finish, read back as (lse, 1, out), carries the range's sums."""
    return check_partial(ctx)


@control("KER-SPLIT-PARTIAL/lse-without-log", of="KER-SPLIT-PARTIAL",
         bug="the partial's lse is the running maximum m, not m + log ℓ")
def split_partial_lse_without_log(ctx):
    with patch.object(att, "_finish", kernel_mutants.finish_lse_without_log):
        return check_partial(ctx)


def check_fold(ctx):
    N = num()
    v = ctx.bounds["v"]
    acc, part = _state("acc", v), _state("part", v)
    P, Q = z3.Real("P"), z3.Real("Q")
    R, T = reals("R", v), reals("T", v)
    merged = att.merge(acc, part, N)
    step = carries(merged, P + Q, [a + b for a, b in zip(R, T)])
    empty_part = carries(att.merge(acc, att.BOTTOM, N), P, R)
    return z3_prove(z3.And(step, empty_part), ctx, hypotheses=[carries(acc, P, R), carries(part, Q, T)])


@obligation("KER-SPLIT-FOLD", checks=["KER-SPLIT"], bounds=V, deep_bounds=DEEP, assumptions=ASSUME)
def split_fold(ctx):
    """Induction step: accumulator with sums (P, R) ⋆ next partial with (P', R') carries (P + P', R + R'); ⋆ ⊥ keeps it."""
    return check_fold(ctx)


@control("KER-SPLIT-FOLD/no-rescale", of="KER-SPLIT-FOLD", bug="merge adds ℓ and z without the e^{m−m'} rescale")
def split_fold_no_rescale(ctx):
    with patch.object(att, "merge", att_mutants.merge_no_rescale):
        return check_fold(ctx)
