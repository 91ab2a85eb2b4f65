"""The tiled forward is exact (THM-EXACT, ALG-TILED), for every n and b, by induction:

* ATT-PARTITION — the key blocks partition 0..n−1 (z3 integer lemma for all n, b), and
  ``block_ranges`` itself, run on z3 Ints n, b with its ``range`` loop entered once for an
  arbitrary iteration t (``support.range_exec``), builds exactly those blocks, ⌈n/b⌉ of them;
* ATT-SUMMARIZE-ANY-B (summarize_any_b.py) — ``summarize`` of one block of any size returns
  Σ(J_t ∩ A_i), by induction over its key loops; ATT-SUMMARIZE-BLOCK re-checks it unrolled on a
  symbolic mask for b ≤ 4 (cross-check);
* ATT-TILED-STEP — one step of the forward loop (skip / copy / merge, symbolic flags) maps a state
  representing S and a block summary representing I to a state representing S ∪ I (any n, b);
* ATT-TILED-BASE-FINAL — ⊥ represents ∅, and the final division gives the dense row z/ℓ = Σwv/Σw;
* ATT-TILED-BOUNDED / ATT-TILED-MASKS — cross-check: the whole ``tiled_forward`` unrolled with one
  symbolic mask Bool per key, every b: solved directly for n ≤ 4 (z3 gives up at n = 5 after 20 s)
  and by a complete case split over the mask Bools for n ≤ 6.
"""
from __future__ import annotations

import itertools
from unittest.mock import patch

import z3

from flashproof.verified import attention as att

from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove
from flashproof.proofs.support import range_exec
from flashproof.proofs.support.dense_rhs import dense_row
from flashproof.proofs.support.sympy_gradient import gradient_mismatch
from flashproof.proofs.numbers.symbolic import Represents, num, reals, summary


@obligation("ATT-SUMMARIZE-BLOCK", checks=["DEF-SUMMARY", "ALG-TILED"], bounds={"b": 4, "v": 2},
            deep_bounds={"b": 6, "v": 4}, assumptions=["A-EXP-ISO", "A-SOLVER-TRUST"], scope="bounded",
            role="cross-check")
def summarize_block(ctx):
    """Cross-check of ATT-SUMMARIZE-ANY-B: summarize unrolled over b keys with a symbolic mask returns Σ(I): m = max allowed, m·ℓ = Σw, m·z = Σwv."""
    b, v = ctx.bounds["b"], ctx.bounds["v"]
    N = num()
    w = reals("w", b)
    vals = [reals(f"v{j}_", v) for j in range(b)]
    flags = [z3.Bool(f"f{j}") for j in range(b)]
    s = att.summarize(w, vals, N, allowed=flags)
    P = z3.Sum([z3.If(f, wj, 0) for wj, f in zip(w, flags)])
    R = [z3.Sum([z3.If(f, wj * vj[a], 0) for wj, vj, f in zip(w, vals, flags)]) for a in range(v)]
    nonempty = z3.Or(*flags)
    claim = z3.And(
        s.nonempty == nonempty,
        z3.Implies(nonempty, z3.And(s.m > 0, s.m * s.l == P, *[s.m * za == r for za, r in zip(s.z, R)],
                                    *[z3.Implies(f, wj <= s.m) for wj, f in zip(w, flags)],
                                    z3.Or(*[z3.And(f, s.m == wj) for wj, f in zip(w, flags)]))),
        z3.Implies(z3.Not(nonempty), z3.And(s.l == 0, *[za == 0 for za in s.z])))
    return z3_prove(claim, ctx, hypotheses=[wj > 0 for wj in w])


@control("ATT-SUMMARIZE-BLOCK/max-ignores-mask", of="ATT-SUMMARIZE-BLOCK",
         bug="the block maximum is taken over masked keys too")
def summarize_block_max_ignores_mask(ctx):
    with patch.object(att, "summarize", mutants.summarize_max_ignores_mask):
        return summarize_block(ctx)


@obligation("ATT-TILED-STEP", checks=["ALG-TILED", "THM-EXACT"], bounds={"v": 16}, deep_bounds={"v": 64},
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST", "A-COORDINATEWISE"], scope="unbounded", why_unbounded="v is a value width (A-COORDINATEWISE)")
def tiled_step(ctx):
    """One forward step: state ~ S, block summary ~ I (either may be ⊥) ⇒ new state ~ S ∪ I."""
    v = ctx.bounds["v"]
    N = num()
    fs, fi = z3.Bools("state_nonempty block_nonempty")
    st, _ = summary("S", v, flag=fs)
    sg, _ = summary("I", v, flag=fi)
    P_S, P_I, M_S, M_I = z3.Reals("P_S P_I Mx_S Mx_I")
    R_S, R_I = reals("R_S", v), reals("R_I", v)
    hyp = [Represents.holds(st, P_S, R_S, M_S), Represents.holds(sg, P_I, R_I, M_I)]
    new = att._skip_or_merge(st, sg, N, v)
    claim = Represents.holds(new, P_S + P_I, [x + y for x, y in zip(R_S, R_I)], z3.If(M_S >= M_I, M_S, M_I))
    return z3_prove(claim, ctx, hypotheses=hyp)


@control("ATT-TILED-STEP/no-rescale", of="ATT-TILED-STEP", bug="merge adds ℓ and z without the e^{m−m'} rescale")
def tiled_step_no_rescale(ctx):
    with patch.object(att, "merge", mutants.merge_no_rescale):
        return tiled_step(ctx)


@control("ATT-TILED-STEP/copy-not-merge", of="ATT-TILED-STEP",
         bug="a nonempty block's summary overwrites a nonempty state instead of merging")
def tiled_step_copy(ctx):
    with patch.object(att, "_skip_or_merge", mutants.skip_or_merge_copy):
        return tiled_step(ctx)


@obligation("ATT-TILED-BASE-FINAL", checks=["THM-EXACT"], bounds={"v": 16}, deep_bounds={"v": 64},
            assumptions=["A-EXP-ISO", "A-NONEMPTY-ROW", "A-SOLVER-TRUST", "A-COORDINATEWISE"], scope="unbounded", why_unbounded="v is a value width (A-COORDINATEWISE)")
def tiled_base_final(ctx):
    """⊥ represents ∅; a nonempty final state ~ A_i gives Y = Σwv/Σw and lse = log Σ e^s (= Σw)."""
    v = ctx.bounds["v"]
    N = num()
    base = att._lift(att.BOTTOM, N, v)
    zero = z3.RealVal(0)
    base_ok = Represents.holds(base, zero, [zero] * v, zero)
    st, _ = summary("A", v)
    P, M = z3.Reals("P Mx")
    R = reals("R", v)
    out, _, _, lse = att._finish(st, N)
    final_ok = z3.And(*[y == r / P for y, r in zip(out, R)], lse == P)
    return z3_prove(z3.And(base_ok, final_ok), ctx, hypotheses=[Represents.holds(st, P, R, M)])


@control("ATT-TILED-BASE-FINAL/lse-without-max", of="ATT-TILED-BASE-FINAL",
         bug="the log-sum-exp forgets the maximum (lse = log ℓ)")
def tiled_base_final_lse(ctx):
    with patch.object(att, "_finish", mutants.finish_lse_without_max):
        return tiled_base_final(ctx)


def _partition_lemma(ctx) -> Outcome:
    n, b, j, t, t2 = z3.Ints("n b j t t2")
    T = (n + b - 1) / b  # number of blocks, ⌈n/b⌉ (z3 integer division)

    def inside(tt):
        return z3.And(tt * b <= j, j < tt * b + b, j < n)

    claim = z3.And(
        z3.Implies(z3.And(n >= 1, b >= 1, 0 <= j, j < n), z3.And(0 <= j / b, j / b < T, inside(j / b))),
        z3.Implies(z3.And(n >= 1, b >= 1, 0 <= t2, t2 < T, inside(t2), 0 <= j, j < n), t2 == j / b),
        z3.Implies(z3.And(n >= 1, b >= 1, 0 <= t, t < T), t * b < n))
    return z3_prove(claim, ctx)


def block_ranges_symbolic(n, b):
    """Run the current ``att.block_ranges`` on z3 Ints n, b (its loop is ``range(0, n, b)``; the
    body carries nothing between iterations: it is one comprehension). Returns (SymRange of the
    arbitrary t-th block, t, the iteration's scope)."""
    range_exec.clear()
    blocks = range_exec.shim(att.block_ranges)(n, b)
    if len(blocks) != 1 or len(range_exec.SCOPES) != 1 or not isinstance(blocks[0], range_exec.SymRange):
        raise ValueError(f"block_ranges did not run as one symbolic loop: {blocks!r}, {len(range_exec.SCOPES)} loops")
    sc = range_exec.SCOPES[0]
    return blocks[0], sc.t, z3.And(*sc.conds)


def _partition_code(ctx) -> Outcome:
    """The code's t-th block, for symbolic n ≥ 0, b ≥ 1, t: it is [t·b, min((t+1)·b, n)) with step 1;
    the iterations are exactly t < ⌈n/b⌉; the first starts at 0, consecutive blocks are adjacent,
    the last ends at n, every block is nonempty and at most b long."""
    n, b = z3.Ints("n b")
    J, t, scope = block_ranges_symbolic(n, b)
    at = lambda e, tt: z3.substitute(e, (t, tt))  # noqa: E731  (the same block expression at another t)
    T = (n + b - 1) / b
    end = z3.If(t * b + b <= n, t * b + b, n)
    claim = z3.And(
        z3.Implies(scope, z3.And(J.start == t * b, J.stop == end, J.step == 1, J.start < J.stop, J.stop - J.start <= b)),
        scope == z3.And(t >= 0, t < T),                                              # count ⌈n/b⌉
        z3.Implies(n >= 1, z3.And(at(scope, z3.IntVal(0)), at(J.start, z3.IntVal(0)) == 0)),  # first
        z3.Implies(z3.And(scope, at(scope, t + 1)), J.stop == at(J.start, t + 1)),      # adjacent
        z3.Implies(z3.And(scope, z3.Not(at(scope, t + 1))), J.stop == n))               # last
    out = z3_prove(claim, ctx, hypotheses=[n >= 0, b >= 1])
    if out.status == "refuted":
        out = out._replace(detail="block_ranges' t-th block is not [t·b, min((t+1)·b, n)): " + out.detail)
    return out


@obligation("ATT-PARTITION", checks=["ALG-TILED", "THM-EXACT"], bounds={}, solver="z3",
            assumptions=["A-SOLVER-TRUST"], scope="unbounded")
def partition(ctx):
    """Blocks [t·b, min(t·b+b, n)), t < ⌈n/b⌉, partition 0..n−1, and ``block_ranges`` run on symbolic n, b is that (all n, b)."""
    code = _partition_code(ctx)
    if code.status != "proved":
        return code
    out = _partition_lemma(ctx)
    return out._replace(detail=out.detail + "; block_ranges run on symbolic n, b, t")


@control("ATT-PARTITION/block-off-by-one", of="ATT-PARTITION",
         bug="block boundary off by one: each block also takes the next block's first key")
def partition_off_by_one(ctx):
    with patch.object(att, "block_ranges", mutants.block_ranges_overlap):
        return partition(ctx)


@control("ATT-PARTITION/step-b-plus-one", of="ATT-PARTITION",
         bug="the block loop steps by b + 1: one key between blocks is never visited")
def partition_step(ctx):
    with patch.object(att, "block_ranges", mutants.block_ranges_step_plus_one):
        return partition(ctx)


def _tiled_vs_dense(ctx, n, b, w, vals, flags):
    fw = att.tiled_forward_from_scores([w], [[x] for x in vals], block=b, allowed=lambda i, j: flags[j], num=num())
    nm, den = dense_row(w, vals, flags)
    ne = flags[0] if len(flags) == 1 else z3.Or(*flags)
    claim = z3.Implies(ne, z3.And(fw.out[0][0] * den == nm, fw.lse[0] == den))
    out = z3_prove(claim, ctx, hypotheses=[x > 0 for x in w])
    if out.status == "refuted":
        out = out._replace(counterexample=dict(out.counterexample, n=n, b=b,
                                               mask="".join("1" if f is True else "0" if f is False else "?"
                                                            for f in flags)))
    return out._replace(detail=f"n={n}, b={b}: {out.detail}")


@obligation("ATT-TILED-BOUNDED", checks=["THM-EXACT"], bounds={"n": 4, "b": "1..n", "v": 1, "mask": "symbolic"},
            deep_bounds={"n": 5, "b": "1..n", "v": 1, "mask": "symbolic"}, assumptions=["A-EXP-ISO", "A-NONEMPTY-ROW", "A-SOLVER-TRUST"],
            scope="bounded", role="cross-check")
def tiled_bounded(ctx):
    """The real tiled_forward, unrolled with one symbolic mask Bool per key, equals dense attention (n ≤ bound, all b)."""
    for n in range(1, ctx.bounds["n"] + 1):
        w, vals, flags = reals("w", n), reals("val", n), [z3.Bool(f"f{j}") for j in range(n)]
        for b in range(1, n + 1):
            out = _tiled_vs_dense(ctx, n, b, w, vals, flags)
            if out.status != "proved":
                return out
    return Outcome("proved", solver="z3", detail=f"symbolic mask, all n ≤ {ctx.bounds['n']}, all b ≤ n")


@obligation("ATT-TILED-MASKS", checks=["THM-EXACT"], bounds={"n": 6, "b": "1..n", "v": 1, "mask": "symbolic, split"},
            deep_bounds={"n": 7, "b": "1..n", "v": 1, "mask": "symbolic, split"}, assumptions=["A-EXP-ISO", "A-NONEMPTY-ROW", "A-SOLVER-TRUST"],
            scope="bounded", role="cross-check")
def tiled_masks(ctx):
    """The same symbolic-mask query for n ≤ 6, discharged by a case split over its n mask Bools."""
    k = 0
    for n in range(1, ctx.bounds["n"] + 1):
        w, vals, flags = reals("w", n), reals("val", n), [z3.Bool(f"f{j}") for j in range(n)]
        nm, den = dense_row(w, vals, flags)
        for b in range(1, n + 1):
            fw = att.tiled_forward_from_scores([w], [[x] for x in vals], block=b, allowed=lambda i, j: flags[j],
                                               num=num())
            claim = z3.Implies(z3.Or(*flags), z3.And(fw.out[0][0] * den == nm, fw.lse[0] == den))
            for bits in itertools.product((False, True), repeat=n):
                # fixing the Bools and simplifying is an equivalence: the split is complete
                case = z3.simplify(z3.substitute(claim, *[(f, z3.BoolVal(x)) for f, x in zip(flags, bits)]))
                out = z3_prove(case, ctx, hypotheses=[x > 0 for x in w])
                k += 1
                if out.status != "proved":
                    cx = dict(out.counterexample, n=n, b=b, mask="".join("1" if x else "0" for x in bits)) \
                        if out.counterexample else None
                    return out._replace(counterexample=cx, detail=f"n={n}, b={b}: {out.detail}")
    return Outcome("proved", solver="z3", detail=f"{k} (n, b, mask assignment) cases of the symbolic query")


@control("ATT-TILED-MASKS/no-rescale", of="ATT-TILED-MASKS", bug="merge adds ℓ and z without the e^{m−m'} rescale")
def tiled_masks_no_rescale(ctx):
    with patch.object(att, "merge", mutants.merge_no_rescale):
        return tiled_masks(ctx)


@control("ATT-TILED-BOUNDED/block-short", of="ATT-TILED-BOUNDED",
         bug="block boundary off by one: each block stops one key early")
def tiled_bounded_short(ctx):
    with patch.object(att, "block_ranges", mutants.block_ranges_short):
        return tiled_bounded(ctx)


@obligation("ATT-EMPTY-ROW", checks=["EXT-EMPTY-ROW"], bounds={"n": 4, "b": 2}, deep_bounds={"n": 6, "b": 2},
            assumptions=["A-EXP-ISO", "A-SOLVER-TRUST"], scope="bounded")
def empty_row(ctx):
    """empty_rows='zero': an all-False (symbolic) mask row gives Y = 0, ℓ = 0, lse = −∞, and zero gradients."""
    n, b = ctx.bounds["n"], ctx.bounds["b"]
    N = num()
    w, vals, flags = reals("w", n), reals("val", n), [z3.Bool(f"f{j}") for j in range(n)]
    fw = att.tiled_forward_from_scores([w], [[x] for x in vals], block=b, allowed=lambda i, j: flags[j], num=N,
                                       empty_rows="zero")
    claim = z3.Implies(z3.Not(z3.Or(*flags)), z3.And(fw.out[0][0] == 0, fw.l[0] == 0, fw.lse[0] == 0))
    out = z3_prove(claim, ctx, hypotheses=[x > 0 for x in w])
    if out.status != "proved":
        return out
    # gradients (sympy): the empty row gets dQ = 0 and adds nothing to dK, dV (= ∂Φ over the other rows)
    bad = gradient_mismatch(3, 1, 2, 2, [set(), {0}, {0, 1}], empty_rows="zero", n_k=2)
    if bad is not None:
        return Outcome("refuted", counterexample=bad, solver="sympy", detail="empty-row gradients")
    return out._replace(solver="z3+sympy", detail="forward: z3 (symbolic mask); gradients: sympy (n_q=3, n_k=2, row 0 empty)")


@control("ATT-EMPTY-ROW/finish-unguarded", of="ATT-EMPTY-ROW", bug="the final division z/ℓ is not guarded for ℓ = 0")
def empty_row_unguarded(ctx):
    with patch.object(att, "_finish", mutants.finish_no_guard):
        return empty_row(ctx)
