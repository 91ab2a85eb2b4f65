"""The per-operation error models behind EXT-FP-ERROR, checked in IEEE arithmetic (SMT FP theory).

Each query states one rounding model for one single IEEE operation, over every pair of operands of
the format, and asks for a counterexample (so ``unsat`` proves it):

* fp32 multiplication: fl(a·b) = ab(1 + δ), |δ| ≤ u = 2⁻²⁴, whenever a, b are finite and the
  *exact* product is ≥ 2⁻¹²⁶ in magnitude (normal); the exact product is formed in double, where
  it is exact (24 + 24 ≤ 53 significand bits), and |fl(a·b) − ab| is exact there (Sterbenz).
* fp32 addition, in two cases (|a| ≥ |b| by symmetry of +): if |b| ≤ 2⁻²⁸·|a| then fl(a + b) = a
  (so |δ| = |b|/|a + b| ≤ 2⁻²⁸/(1 − 2⁻²⁸) < u); otherwise the exponents differ by at most 28, the
  exact sum fits double's 53 bits (from b's last bit, ≥ 2^(e_a − 51), to the carry, ≤ 2^(e_a + 1)),
  and |fl(a + b) − (a + b)| ≤ u·|a + b| (a sum whose exact value is subnormal is computed exactly).
* fl(0 + x) = x for every non-NaN x (the first add into a zero accumulator is exact).
* the weight cast fp32 → fp16 and fp32 → bf16 (``p.to(v.dtype)``): relative error ≤ u_in for a
  result in the target's normal range, absolute error ≤ η_in (half the target's smallest subnormal)
  below it.

fp32 queries are decided by Bitwuzla (z3 times out on the fp32 multiplier); the casts, whose
circuits are small, by z3 (Bitwuzla's PyPI build has no bf16). Subtraction is addition of −b
(negation is exact in IEEE). exp, log and the device division are not IEEE operations: their
accuracy is the assumption A-FP-EXP-ACC.
"""
from __future__ import annotations

import time
from unittest.mock import patch

import z3

from flashproof.proofs.engine.core import Outcome, control, fresh_solver, model_dict, obligation
from flashproof.proofs.mutants import fp_error as mutants

#: format -> (exponent bits, significand bits, unit roundoff u = 2^-p)
UNITS = {"fp32": (8, 24, 2.0 ** -24), "bf16": (8, 8, 2.0 ** -8), "fp16": (5, 11, 2.0 ** -11)}
#: the cast targets' absolute underflow error: half the smallest subnormal
ETA = {"fp16": 2.0 ** -25, "bf16": 2.0 ** -134}
RM = z3.RNE()


def _sort(fmt):
    e, s, _ = UNITS[fmt]
    return z3.FPSort(e, s)


def _finite(*xs):
    return [z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x))) for x in xs]


def _rel(err, exact, unit, sort):
    """|err| ≤ unit·|exact| in ``sort`` (unit a power of two: the product is exact)."""
    return z3.fpLEQ(z3.fpAbs(err), z3.fpMul(RM, z3.FPVal(unit, sort), z3.fpAbs(exact)))


def q_mul():
    F, D = _sort("fp32"), z3.Float64()
    a, b = z3.FPs("a b", F)
    r = z3.fpMul(RM, a, b)
    p = z3.fpMul(RM, z3.fpFPToFP(RM, a, D), z3.fpFPToFP(RM, b, D))  # exact
    normal = z3.fpGEQ(z3.fpAbs(p), z3.FPVal(2.0 ** -126, D))
    hyp = _finite(a, b) + [normal, z3.Not(z3.fpIsInf(r))]
    return hyp, _rel(z3.fpSub(RM, z3.fpFPToFP(RM, r, D), p), p, UNITS["fp32"][2], D)


def q_add_near():
    F, W = _sort("fp32"), z3.Float64()
    a, b = z3.FPs("a b", F)
    r = z3.fpAdd(RM, a, b)
    aw, bw = z3.fpFPToFP(RM, a, W), z3.fpFPToFP(RM, b, W)
    x = z3.fpAdd(RM, aw, bw)  # exact: the exponent gap is at most 28
    near = z3.fpGT(z3.fpAbs(bw), z3.fpMul(RM, z3.FPVal(2.0 ** -28, W), z3.fpAbs(aw)))
    hyp = _finite(a, b) + [z3.fpGEQ(z3.fpAbs(a), z3.fpAbs(b)), near, z3.Not(z3.fpIsInf(r))]
    return hyp, _rel(z3.fpSub(RM, z3.fpFPToFP(RM, r, W), x), x, UNITS["fp32"][2], W)


def q_add_far():
    F = _sort("fp32")
    a, b = z3.FPs("a b", F)
    far = z3.fpLEQ(z3.fpAbs(b), z3.fpMul(RM, z3.FPVal(2.0 ** -28, F), z3.fpAbs(a)))
    far = z3.And(far, z3.fpGT(z3.fpAbs(a), z3.FPVal(0.0, F)))
    return _finite(a, b) + [far], z3.fpEQ(z3.fpAdd(RM, a, b), a)


def q_zero_add():
    F = _sort("fp32")
    x = z3.FP("x", F)
    return [z3.Not(z3.fpIsNaN(x))], z3.fpEQ(z3.fpAdd(RM, z3.FPVal(0.0, F), x), x)


def q_cast(target):
    F, T = _sort("fp32"), _sort(target)
    x = z3.FP("x", F)
    c = z3.fpFPToFP(RM, x, T)
    back = z3.fpFPToFP(RM, c, F)  # exact: the target's values are fp32 values
    err = z3.fpSub(RM, back, x)
    _, s, unit = UNITS[target]
    tiny = z3.FPVal(2.0 ** (2 - 2 ** (UNITS[target][0] - 1)), F)  # the target's smallest normal
    normal = z3.fpGEQ(z3.fpAbs(x), tiny)
    claim = z3.If(normal, _rel(err, x, unit, F), z3.fpLEQ(z3.fpAbs(err), z3.FPVal(ETA[target], F)))
    return _finite(x) + [z3.Not(z3.fpIsInf(c))], claim


QUERIES = [("fp32 mul", q_mul, "bitwuzla"), ("fp32 add, |b| > 2^-28 |a|", q_add_near, "bitwuzla"),
           ("fp32 add, |b| ≤ 2^-28 |a|", q_add_far, "bitwuzla"), ("fp32 0 + x", q_zero_add, "z3"),
           ("cast fp32→fp16", lambda: q_cast("fp16"), "z3"), ("cast fp32→bf16", lambda: q_cast("bf16"), "z3")]


def _bitwuzla(hyp, claim, ms):
    """Bitwuzla on z3's SMT-LIB export of hyp ∧ ¬claim; on unsat, the hypotheses alone must be
    satisfiable (else the query is vacuous: reported as ``vacuous``)."""
    r, model, who = _bitwuzla_sat(list(hyp) + [z3.Not(claim)], ms)
    if r == "unsat":
        h, _, _ = _bitwuzla_sat(list(hyp), ms)
        if h != "sat":
            return ("vacuous" if h == "unsat" else "unknown"), None, who
    return r, model, who


def _bitwuzla_sat(formulas, ms):
    import bitwuzla

    s = z3.Solver()
    s.add(*formulas)
    tm, opts = bitwuzla.TermManager(), bitwuzla.Options()
    opts.set(bitwuzla.Option.TIME_LIMIT_PER, int(ms))
    opts.set(bitwuzla.Option.PRODUCE_MODELS, True)
    p = bitwuzla.Parser(tm, opts)
    p.parse("(set-logic QF_FP)\n" + s.to_smt2().replace("(check-sat)", ""), True, False)
    bz = p.bitwuzla()
    r = str(bz.check_sat())
    model = {str(t): str(bz.get_value(t)) for t in p.get_declared_funs()} if r == "sat" else None
    return r, model, f"bitwuzla {bitwuzla.version()}"


def _z3(hyp, claim, ctx):
    s = fresh_solver(list(hyp) + [z3.Not(claim)], ctx, logic="QF_FP")
    r = s.check()
    return str(r), (model_dict(s.model()) if r == z3.sat else None), f"z3 {z3.get_version_string()}"


def _run(queries, ctx):
    used, times = set(), []
    for name, build, solver in queries:
        hyp, claim = build()
        t0 = time.perf_counter()
        try:
            r, model, who = _bitwuzla(hyp, claim, ctx.timeout_ms) if solver == "bitwuzla" else _z3(hyp, claim, ctx)
        except ImportError:
            return Outcome("unknown", solver=solver, detail=f"{name}: bitwuzla is not installed")
        used.add(who)
        times.append(f"{name} {time.perf_counter() - t0:.1f}s")
        if r == "sat":
            return Outcome("refuted", counterexample={"step": name, **(model or {})}, solver=who,
                           detail=f"{name}: the error model fails")
        if r != "unsat":
            return Outcome("unknown", solver=who, detail=f"{name}: {r}")
    return Outcome("proved", solver="+".join(sorted(used)), detail="; ".join(times))


_ADD = [q for q in QUERIES if q[0].startswith("fp32 add")]
_REST = [q for q in QUERIES if not q[0].startswith("fp32 add")]


@obligation("ATT-FP-ERROR-MODEL", checks=["EXT-FP-ERROR"],
            bounds={"formats": "fp32 ×, 0 + x; casts fp32 → fp16, bf16", "operands": "all finite"},
            assumptions=["A-FP-IEEE", "A-SOLVER-TRUST"], solver="bitwuzla+z3", scope="unbounded",
            why_unbounded="each query ranges over every finite operand of the format; there is no size")
def fp_model(ctx):
    """The IEEE steps' error models (fp32 ×, 0 + x, the weight cast) hold for all finite operands."""
    return _run(_REST, ctx)


@obligation("ATT-FP-ERROR-MODEL-ADD", checks=["EXT-FP-ERROR"], bounds={"formats": "fp32 +", "operands": "all finite"},
            assumptions=["A-FP-IEEE", "A-SOLVER-TRUST"], solver="bitwuzla", scope="unbounded",
            why_unbounded="each query ranges over every finite operand of the format; there is no size")
def fp_model_add(ctx):
    """fp32 addition's error model fl(a+b) = (a+b)(1+δ), |δ| ≤ u, holds for all finite operands."""
    return _run(_ADD, ctx)


@control("ATT-FP-ERROR-MODEL/half-u", of="ATT-FP-ERROR-MODEL",
         bug="the error model claims |δ| ≤ u/2 instead of u (a rounding can be off by half an ulp)")
def fp_model_half_u(ctx):
    with patch.dict(UNITS, mutants.HALF_UNITS):
        return fp_model(ctx)


@control("ATT-FP-ERROR-MODEL-ADD/half-u", of="ATT-FP-ERROR-MODEL-ADD",
         bug="fp32 addition's error model claims |δ| ≤ u/2 instead of u")
def fp_model_add_half_u(ctx):
    with patch.dict(UNITS, mutants.HALF_UNITS):
        return fp_model_add(ctx)
