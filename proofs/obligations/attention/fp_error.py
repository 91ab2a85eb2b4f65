"""The proved floating-point error bound of the tiled forward (EXT-FP-ERROR): derivation and validation.

ATT-FP-ERROR-DERIVE — the reference's ``tiled_forward`` runs on ``ErrBoundNum``
(``proofs/numbers/fperror.py``: every rounding a factor (1 ± u), multiplied out, no first-order
truncation), on one query row with symbolic magnitudes M_q, M_k, M_v, c. The run's bounds are
compared with the closed formula ``verified/fp_bound.py``: the raw-score error and the counts of
ℓ (roundings, exps, exponent error φ) must equal the formula's symbolically, and the derived bounds
on Y and on the LSE, evaluated at 40 digits for each input format and a set of magnitudes, must not
exceed the formula. Full rows and masked rows (checked against the formula at the full n_k).
Bounded: the sizes of ``bounds`` (a claim for every n_k, d, b is not made by this check).

ATT-FP-ERROR-VALID — the bound against measurement: fuzzed inputs in each format (including
large logits), the reference run on ``RoundNum`` (the kernels' rounding: fp32 accumulation, weights
rounded to the input format before P·V) against the certified interval oracle (``IntervalNum``, the
same reference); the error, taken against the far end of the oracle's enclosure, must stay within the
bound for every entry. The detail reports the ratio error/bound (max and median).
"""
from __future__ import annotations

import random
import statistics
from unittest.mock import patch

import mpmath
import sympy as sp

from flashproof.verified import attention as att
from flashproof.verified import fp_bound
from flashproof.verified.numbers import IntervalNum

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.mutants import fp_error as mutants
from flashproof.proofs.numbers import fperror as fe
from flashproof.proofs.numbers.fpround import RoundNum, round_to

Mq, Mk, Mv, C = sp.symbols("M_q M_k M_v c", positive=True)
FMTS = ("fp32", "bf16", "fp16")
#: (M_q, M_k, M_v, c) at which derived and formula bounds are compared
MAGS = [(1, 1, 1, sp.Rational(1, 2)), (3, 2, sp.Rational(3, 2), sp.Rational(3, 10)), (10, 10, 2, 1),
        (sp.Rational(1, 100), 100, sp.Rational(1, 1000), sp.Rational(1, 8))]


def derive(n_k: int, d: int, block: int, allowed=None):
    """Run the reference on ``ErrBoundNum``: one row per set in ``allowed`` (one full row when
    None). Returns (number system, TiledForward of bounds)."""
    n_q = 1 if allowed is None else len(allowed)
    Q = [[fe.Entry("Q", Mq) for _ in range(d)] for _ in range(n_q)]
    K = [[fe.Entry("K", Mk) for _ in range(d)] for _ in range(n_k)]
    V = [[fe.Entry("V", Mv)] for _ in range(n_k)]
    N = fe.ErrBoundNum()
    fw = att.tiled_forward(Q, K, V, scale=fe.Entry("c", C, rounded=True), block=block, allowed=allowed, num=N)
    return N, fw


def _values(fmt, N, mags):
    u_in, eta_in = fp_bound.FORMATS[fmt]
    q = sp.Rational  # a float's exact binary value
    base = {fe.u: q(fp_bound.U_ACC), fe.u_in: q(u_in), fe.u_e: q(fp_bound.U_EXP), fe.u_div: q(fp_bound.U_DIV),
            fe.eta_e: q(fp_bound.ETA_EXP), fe.eta_in: q(eta_in)}
    mq, mk, mv, c = mags
    sub = {Mq: mq, Mk: mk, Mv: mv, C: c}
    es, S = (x.subs(sub).subs(base) for x in N.score_atoms)
    return {**base, fe.Es: es, fe.Sm: S, Mv: mv}


def _counts_match(N, l, n_k, d, block):
    """None when the run's raw-score error and ℓ's counts are the formula's; else what differs."""
    t = fp_bound.terms(n_k, d, block, "fp32", mq=1, mk=1, scale=1)
    es, S = N.score_atoms
    want_es = sp.expand(((1 + fe.u) ** (d + 2) - 1) * d * C * Mq * Mk)
    if sp.expand(es - want_es) != 0 or sp.expand(S - d * C * Mq * Mk) != 0:
        return {"raw score": f"E_s = {es}, S = {S}", "formula": f"E_s = {want_es}"}
    want_phi = fe.Es + 2 * fe.u * t.T * (fe.Sm + fe.Es)
    got, want = (l.ku, l.kin, l.ke), (t.ku_l, 0, t.ke)
    if any(g > w for g, w in zip(got, want)) or not _le_poly(l.phi, want_phi):
        return {"derived (ku, kin, ke, φ)": f"{got}, {l.phi}", "formula": f"{want}, {sp.expand(want_phi)}"}
    return None


def _le_poly(a, b):
    """a ≤ b for all non-negative symbols: every coefficient of b − a is ≥ 0."""
    diff = sp.expand(b - a)
    if diff == 0:
        return True
    return all(c >= 0 for c in sp.Poly(diff, *sorted(diff.free_symbols, key=str)).coeffs())


def _check_case(n_k, d, block, allowed=None):
    N, fw = derive(n_k, d, block, allowed)
    case = {"n_k": n_k, "d": d, "b": block, "mask": None if allowed is None else [sorted(A) for A in allowed]}
    for i, l in enumerate(fw.l):
        bad = _counts_match(N, l, n_k, d, block)
        if bad is not None:
            return dict(case, row=i, **bad)
    rows = range(len(fw.l))
    args = sorted(set().union(*(fw.out[i][0].err.free_symbols | fw.lse[i].err.free_symbols for i in rows)), key=str)
    with mpmath.workdps(40):
        for fmt in FMTS:
            for mags in MAGS:
                vals = _values(fmt, N, mags)
                env = {a: _mp(vals[a]) for a in args}
                F = fp_bound.forward_error_bound(n_k, d, block, fmt, mq=float(mags[0]), mk=float(mags[1]),
                                                 mv=float(mags[2]), scale=float(mags[3]))
                for i in rows:
                    y, g = _ev(fw.out[i][0].err, env), _ev(fw.lse[i].err, env)
                    if not (y <= F.out and g <= F.lse):
                        return dict(case, row=i, format=fmt, mags=[str(m) for m in mags], derived_out=float(y),
                                    formula_out=F.out, derived_lse=float(g), formula_lse=F.lse)
    return None


def _ev(e, env, memo=None):
    """A sympy expression of +, ×, powers, exp and log evaluated in mpmath (the working precision)
    with the symbols of ``env``; flat sums of thousands of terms, which ``lambdify`` cannot compile."""
    memo = {} if memo is None else memo
    if e in memo:
        return memo[e]
    if e.is_Symbol:
        r = env[e]
    elif e.is_Number:
        r = _mp(e)
    else:
        xs = [_ev(a, env, memo) for a in e.args]
        if e.is_Add:
            r = mpmath.fsum(xs)
        elif e.is_Mul:
            r = mpmath.fprod(xs)
        elif e.is_Pow:
            r = xs[0] ** xs[1]
        elif isinstance(e, sp.exp):
            r = mpmath.exp(xs[0])
        elif isinstance(e, sp.log):
            r = mpmath.log(xs[0])
        else:
            raise TypeError(f"cannot evaluate {type(e).__name__} in a derived bound")
    memo[e] = r
    return r


def _mp(x):
    """A sympy number (rational, or an expression of rationals) as an mpmath number at 40 digits."""
    x = sp.sympify(x)
    if x.is_Rational:
        return mpmath.mpf(int(x.p)) / int(x.q)
    return mpmath.mpf(str(sp.N(x, 50)))


def _grid(bounds):
    cases = [(n, d, b, None) for n, d, b in bounds["full"]]
    cases += [(n, 1, b, mask) for n, b, mask in bounds["masked"]]
    return cases


QUICK = {"full": [(n, d, b) for n in range(1, 7) for d in (1, 2) for b in range(1, n + 1)],
         "masked": [(4, 2, [{0}, {0, 3}, {1, 2, 3}]), (6, 2, [{0, 5}, {2}, {1, 2, 3, 4}])]}
DEEP = {"full": [(n, d, b) for n in range(1, 13) for d in (1, 3) for b in sorted({1, 3, 8, n}) if b <= n],
        "masked": [(6, 2, [{0}, {0, 5}, {1, 2, 3}, {4}, set(range(6)), {2, 5}]), (9, 4, [{0, 8}, {3}, {1, 4, 7}]),
                   (12, 3, [set(range(0, 12, 2)), {11}, set(range(12))])]}


@obligation("ATT-FP-ERROR-DERIVE", checks=["EXT-FP-ERROR"], bounds={"cases": QUICK}, deep_bounds={"cases": DEEP},
            assumptions=["A-FP-IEEE", "A-FP-EXP-ACC", "A-FP-NORMAL", "A-SOLVER-TRUST"], solver="sympy")
def derive_bound(ctx):
    """The formula in verified/fp_bound.py is at least the bound derived by running the reference on ErrBoundNum."""
    cases = _grid(ctx.bounds["cases"])
    for n_k, d, b, mask in cases:
        bad = _check_case(n_k, d, b, mask)
        if bad is not None:
            return Outcome("refuted", counterexample=bad, solver="sympy", detail="the formula is below the derived bound")
    return Outcome("proved", solver="sympy", detail=f"{len(cases)} (n_k, d, b, mask) cases × {len(FMTS)} formats × {len(MAGS)} magnitudes")


@control("ATT-FP-ERROR-DERIVE/no-nk-growth", of="ATT-FP-ERROR-DERIVE",
         bug="the formula forgets the growth with n_k (every row treated as one block)")
def derive_no_nk(ctx):
    with patch.object(fp_bound, "terms", mutants.terms_without_nk):
        return derive_bound(ctx)


# ---------------------------------------------------------------------------------------- validation

def _draw(rng, fmt, n_q, n_k, d, big):
    """Inputs representable in ``fmt``: Gaussian entries with a per-problem scale; ``big`` gives
    logits of tens to a hundred."""
    sq, sk, sv = (rng.choice((0.05, 0.5, 1.0, 4.0)) for _ in range(3))
    if big:
        sq, sk = 6.0, 6.0
    mat = lambda r, s: [[round_to(fmt, rng.gauss(0, s)) for _ in range(d)] for _ in range(r)]  # noqa: E731
    return mat(n_q, sq), mat(n_k, sk), [[round_to(fmt, rng.gauss(0, sv))] for _ in range(n_k)]


def _absmax(M):
    return max(abs(x) for row in M for x in row)


def validate(samples: int, seed: int) -> tuple[dict | None, list]:
    """(first violation or None, ratios error/bound for Y and lse over every entry)."""
    rng = random.Random(seed)
    oracle = IntervalNum(30)
    ratios = []
    for k in range(samples):
        fmt = FMTS[k % 3]
        n_q, n_k, d, b = rng.randint(1, 2), rng.randint(1, 12), rng.randint(1, 6), rng.choice((1, 2, 4, 8))
        Q, K, V = _draw(rng, fmt, n_q, n_k, d, big=(k % 5 == 4))
        c = float(round_to("fp32", 1 / d ** 0.5))
        E = lambda name, M: [[fe.Entry(name, None, x) for x in row] for row in M]  # noqa: E731
        fp = att.tiled_forward(E("Q", Q), E("K", K), E("V", V), scale=fe.Entry("c", None, c, rounded=True),
                               block=b, num=RoundNum(fmt))
        ex = att.tiled_forward(Q, K, V, scale=c, block=b, num=oracle)
        F = fp_bound.forward_error_bound(n_k, d, b, fmt, mq=_absmax(Q), mk=_absmax(K), mv=_absmax(V), scale=c)
        where = {"format": fmt, "n_q": n_q, "n_k": n_k, "d": d, "b": b, "sample": k, "seed": seed}
        pairs = [(fp.out[i][a], ex.out[i][a], F.out, f"Y[{i}][{a}]") for i in range(n_q) for a in range(len(V[0]))]
        pairs += [(fp.lse[i], ex.lse[i], F.lse, f"lse[{i}]") for i in range(n_q)]
        for got, iv, bound, name in pairs:
            err = max(abs(mpmath.mpf(got) - iv.a), abs(mpmath.mpf(got) - iv.b)) if got == got else mpmath.inf
            if not err <= bound:
                return dict(where, entry=name, got=got, oracle=str(iv), error=float(err), bound=bound), ratios
            ratios.append(float(err / bound) if bound else 0.0)
    return None, ratios


@obligation("ATT-FP-ERROR-VALID", checks=["EXT-FP-ERROR"], bounds={"samples": 120, "seed": 0},
            deep_bounds={"samples": 600, "seed": 0}, assumptions=["A-FP-EXP-ACC"], solver="interval", role="cross-check")
def validate_bound(ctx):
    """The proved bound holds on fuzzed inputs: the kernels' rounding emulated against the certified interval oracle."""
    bad, ratios = validate(ctx.bounds["samples"], ctx.bounds["seed"])
    if bad is not None:
        return Outcome("refuted", counterexample=bad, solver="interval", detail="measured error above the proved bound")
    return Outcome("proved", solver="interval",
                   detail=f"{len(ratios)} entries, error/bound max {max(ratios):.3g}, median {statistics.median(ratios):.3g}")


@control("ATT-FP-ERROR-VALID/no-max-subtraction", of="ATT-FP-ERROR-VALID",
         bug="summarize exponentiates raw scores (no max subtraction): large logits overflow fp32")
def validate_no_max(ctx):
    with patch.object(att, "summarize", mutants.summarize_no_max):
        return validate_bound(ctx)
