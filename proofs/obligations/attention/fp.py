"""Floating-point safety of the online update (EXT-FP-SAFETY, REM-NOT-IO), per format.

Each obligation runs one forward step of the reference — ``summarize`` of a block of ``b`` keys with
a symbolic mask, then ``_skip_or_merge`` into a state that is either ⊥ (stored as m = −∞, ℓ = 0,
z = 0) or nonempty (finite m, finite ℓ ≥ 1, finite z), chosen by a symbolic flag — then ``_finish``,
all on ``FPNum``. Scores and values are arbitrary finite numbers of the format. Exactness over the
reals holds for any rescale reference, so only these checks can catch a kernel that forgets the max.
"""
from __future__ import annotations

from unittest.mock import patch

import z3

from flashproof.verified import attention as att
from flashproof.verified.attention import Summary
from flashproof.verified.expdomain import Z3ExpNum

from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove, z3_witness
from flashproof.proofs.numbers.fpnum import FORMATS, FPNum

B, V = 2, 1
EMAX = {"fp16": 15, "bf16": 127, "fp32": 127}
BOUNDS = {"b": B, "v": V, "inputs": "all finite scores and values; state ⊥ or nonempty (finite m, ℓ ≥ 1)"}
GUARD_BOUNDS = {"b": 1, "v": V, "checked": "ℓ, lse, z; and z/ℓ for fp16, bf16 (fp32: --deep)", "inputs": "finite scores; |v| ≤ 2^(emax−3), |z_state| ≤ 2^(emax−2) "
                "(no accumulator overflow: without it z3 finds overflow·(rescale underflowed to 0) = NaN)",
                "deep": "b = 2 under --deep"}


def _finite(x):
    return z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x)))


def _step(N: FPNum, *, b: int = B, finish: bool = True, vbound: int | None = None):
    """The reference's forward step on symbolic FP inputs. Returns (state, sigma, new, finish, hyps).
    ``vbound``: if given, |v| ≤ 2^vbound and |z_state| ≤ 2^(vbound+1)."""
    fs = z3.Bool("state_nonempty")
    m, l = N.var("S_m"), N.var("S_l")
    z = [N.var(f"S_z{a}") for a in range(V)]
    state = Summary(m, l, z, fs)
    hyp = [z3.If(fs, z3.And(_finite(m), _finite(l), z3.fpGEQ(l, N.const(1)), *[_finite(x) for x in z]),
                 z3.And(m == z3.fpMinusInfinity(N.sort), z3.fpIsZero(l), *[z3.fpIsZero(x) for x in z]))]
    s = [N.var(f"s{j}") for j in range(b)]
    vals = [[N.var(f"v{j}_{a}") for a in range(V)] for j in range(b)]
    flags = [z3.Bool(f"f{j}") for j in range(b)]
    hyp += [_finite(x) for x in s] + [_finite(x) for row in vals for x in row]
    if vbound is not None:
        big, bigger = N.const(2.0 ** vbound), N.const(2.0 ** (vbound + 1))
        hyp += [z3.fpLEQ(z3.fpAbs(x), big) for row in vals for x in row] + [z3.fpLEQ(z3.fpAbs(x), bigger) for x in z]
    sigma = att.summarize(s, vals, N, allowed=flags)
    new = att._skip_or_merge(state, sigma, N, V)
    fin = att._finish(new, N) if finish else None
    return state, sigma, new, fin, hyp


def _shift(fmt, N=None):
    N = N or FPNum(fmt)
    _, _, new, _, hyp = _step(N, finish=False)
    zero, one = N.const(0), N.const(1)
    claim = z3.And(*[z3.And(z3.Not(z3.fpIsNaN(x)), z3.fpLEQ(x, zero)) for x in N.exp_args],
                   *[z3.fpLEQ(e, one) for e in N.exp_vals])
    return claim, hyp + N.side


def _ell(fmt, N=None):
    N = N or FPNum(fmt)
    _, _, new, _, hyp = _step(N, finish=False)
    claim = z3.Implies(new.nonempty if not isinstance(new.nonempty, bool) else z3.BoolVal(new.nonempty),
                       z3.fpGEQ(new.l, N.const(1)))
    return claim, hyp + N.side


#: formats whose final division z/ℓ is checked by default (fp32's takes z3 > 30 s: --deep only)
DIVISION_BY_DEFAULT = ("fp16", "bf16")


def _guard(fmt, ctx) -> Outcome:
    """No NaN in ℓ, the log-sum-exp, z and (fp16/bf16, or --deep) the output z/ℓ: one query each."""
    N = FPNum(fmt)
    _, _, new, (out, _, _, lse), hyp = _step(N, b=2 if ctx.deep else 1, vbound=EMAX[fmt] - 3)
    parts = [("l", new.l), ("lse", lse)] + [(f"z{a}", x) for a, x in enumerate(new.z)]
    if ctx.deep or fmt in DIVISION_BY_DEFAULT:
        parts += [(f"out{a}", y) for a, y in enumerate(out)]
    claim = z3.And(*[z3.Not(z3.fpIsNaN(t)) for _, t in parts])
    res = z3_prove(claim, ctx, hypotheses=hyp + N.side, logic="QF_FP")
    return res._replace(detail=f"not NaN: {', '.join(n for n, _ in parts)} ({res.detail})")


class _RawScoreFP(FPNum):
    """FP system whose score_sub ignores the reference: the exponent argument is the raw score."""

    def score_sub(self, a, b):
        return a


def _register(fmt):
    ident = f"ATT-FP-SHIFT-{fmt}"

    @obligation(ident, checks=["EXT-FP-SAFETY", "REM-NOT-IO"], bounds=BOUNDS, assumptions=["A-FP-IEEE", "A-FP-EXP", "A-SOLVER-TRUST"], scope="bounded")
    def shift(ctx):
        """After subtracting the running max every exp argument is ≤ 0 (never NaN) and every rescale ≤ 1."""
        claim, hyp = _shift(fmt)
        return z3_prove(claim, ctx, hypotheses=hyp, logic="QF_FP")

    @control(f"{ident}/max-not-subtracted", of=ident, bug="the exponent argument is the raw score (max not subtracted)")
    def shift_raw(ctx):
        claim, hyp = _shift(fmt, _RawScoreFP(fmt))
        return z3_prove(claim, ctx, hypotheses=hyp, logic="QF_FP")

    ident_l = f"ATT-FP-ELL-{fmt}"

    @obligation(ident_l, checks=["EXT-FP-SAFETY"], bounds=BOUNDS, assumptions=["A-FP-IEEE", "A-FP-EXP", "A-SOLVER-TRUST"], scope="bounded")
    def ell(ctx):
        """Once the row has an allowed key, the rounded normalizer ℓ is ≥ 1."""
        claim, hyp = _ell(fmt)
        return z3_prove(claim, ctx, hypotheses=hyp, logic="QF_FP")

    @control(f"{ident_l}/max-not-subtracted", of=ident_l, bug="the exponent argument is the raw score (max not subtracted)")
    def ell_raw(ctx):
        claim, hyp = _ell(fmt, _RawScoreFP(fmt))
        return z3_prove(claim, ctx, hypotheses=hyp, logic="QF_FP")

    ident_w = f"ATT-FP-NAN-WITNESS-{fmt}"

    @obligation(ident_w, checks=["EXT-FP-SAFETY"], bounds={"states": "two ⊥ (m = −∞)"},
                assumptions=["A-FP-IEEE", "A-FP-EXP", "A-SOLVER-TRUST"], scope="unbounded", why_unbounded="an existential claim: one witness proves it")
    def nan_witness(ctx):
        """Expected sat: merging two empty states without the guard forms (−∞) − (−∞) = NaN."""
        return _nan_witness(fmt, mutants.merge_unguarded, ctx)

    @control(f"{ident_w}/guarded", of=ident_w, bug="the search runs on the guarded merge, where no NaN witness exists")
    def nan_witness_guarded(ctx):
        return _nan_witness(fmt, att.merge, ctx)

    ident_g = f"ATT-FP-GUARD-{fmt}"

    @obligation(ident_g, checks=["EXT-FP-SAFETY", "EXT-EMPTY-ROW"], bounds=GUARD_BOUNDS, assumptions=["A-FP-IEEE", "A-FP-EXP", "A-SOLVER-TRUST"], scope="bounded")
    def guard(ctx):
        """With the guards, no forward step, log-sum-exp or final division is NaN (empty state and blocks included)."""
        return _guard(fmt, ctx)

    @control(f"{ident_g}/empty-block-not-skipped", of=ident_g,
             bug="an empty block is not skipped but merged through an unguarded rescale")
    def guard_no_skip(ctx):
        with patch.object(att, "_skip_or_merge", mutants.skip_or_merge_no_skip_unguarded):
            return _guard(fmt, ctx)

    if fmt in DIVISION_BY_DEFAULT:
        @control(f"{ident_g}/finish-unguarded", of=ident_g, bug="the final division z/ℓ is not guarded for an empty row")
        def guard_finish(ctx):
            with patch.object(att, "_finish", mutants.finish_no_guard):
                return _guard(fmt, ctx)


def _nan_witness(fmt, merge_fn, ctx) -> Outcome:
    N = FPNum(fmt)
    a = Summary(N.var("a_m"), N.const(0), [N.const(0)], False)
    b = Summary(N.var("b_m"), N.const(0), [N.const(0)], False)
    out = merge_fn(a, b, N)  # two stored empty states (not the BOTTOM object): the rescale path runs
    ninf = z3.fpMinusInfinity(N.sort)
    return z3_witness(z3.And(a.m == ninf, b.m == ninf, z3.fpIsNaN(out.l), *N.side), ctx)


for _fmt in FORMATS:
    _register(_fmt)


@obligation("ATT-FP-MERGE-ORDER-fp16", checks=["REM-NOT-IO"], bounds={"v": 1, "maxima": "equal"},
            assumptions=["A-FP-IEEE", "A-FP-EXP", "A-SOLVER-TRUST"], scope="unbounded", why_unbounded="an existential claim: one witness proves it")
def merge_order(ctx):
    """Expected sat: even with equal maxima, (a⋆b)⋆c and a⋆(b⋆c) round ℓ to different fp16 values."""
    return _merge_order(FPNum("fp16"), ctx)


def _merge_order(N, ctx):
    fp = isinstance(N, FPNum)
    mk = (lambda n: N.var(n)) if fp else (lambda n: z3.Real(n))  # noqa: E731
    sums = [Summary(mk("m"), mk(f"{k}_l"), [mk(f"{k}_z")], True) for k in "abc"]
    a, b, c = sums
    lhs = att.merge(att.merge(a, b, N), c, N)
    rhs = att.merge(a, att.merge(b, c, N), N)
    if fp:
        hyp = [_finite(sums[0].m)] + [z3.And(_finite(s.l), z3.fpGEQ(s.l, N.const(1))) for s in sums] + N.side
        differ = z3.Not(z3.fpEQ(lhs.l, rhs.l))
    else:
        hyp = [sums[0].m > 0] + [s.l >= 1 for s in sums]
        differ = lhs.l != rhs.l
    return z3_witness(z3.And(differ, *hyp), ctx)


@control("ATT-FP-MERGE-ORDER-fp16/exact-reals", of="ATT-FP-MERGE-ORDER-fp16",
         bug="the same search in exact real arithmetic, where the merge orders agree")
def merge_order_reals(ctx):
    return _merge_order(Z3ExpNum(), ctx)
