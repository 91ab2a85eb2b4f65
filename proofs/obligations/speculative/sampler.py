"""Speculative decoding obligations (spec items in ``flashproof.spec.speculative``).

Every check runs the verified sampler (``flashproof.verified.speculative``) itself: symbolically
(z3 terms through the branching-uniform backend) or in exact Fractions (the branching backend's
exact emission law). Each ``_impl(ctx, rules)`` takes the sampler's ``Rules``; the obligation passes
the real ``RULES``, a control passes a mutant from ``speculative_mutants`` (one field replaced).

Route for "every vocabulary size" (DESIGN.md: the naive simplex query stalls at V = 8):
  SPEC-ACCEPT-LEMMA   per token, from the code: p_draft·P(accept) = min(p_target, p_draft), the residual
                      weight is p_target − min ≥ 0;
  SPEC-DRAW-STEP      one scan step of the inverse-CDF draw keeps the invariant "the undecided interval
                      is [C/T, 1)", so token y is drawn with probability w_y/T, for every V;
  SPEC-STEP-COMPOSE   summing the per-token identities linearly (Σ p = Σ p_draft = 1) gives
                      P(emit y) = min_y + ρ·r_y/R = p_target(y) with ρ = R, including R = 0.
Cross-checks of the unrolled code: SPEC-STEP-SYMBOLIC (z3, V ≤ 3) and SPEC-STEP-EXACT (Fractions,
V ≤ 8, adversarial tables).
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import z3

from flashproof.verified import speculative as sp
from flashproof.verified.branching import BranchingNum, canonical, emission_law
from flashproof.verified.numbers import resolve

from flashproof.proofs.mutants import speculative as mut
from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove
from flashproof.proofs.support.distribution_tables import PrefixTables, step_cases

CHECKS_STEP = ["SPEC-THM-STEP", "SPEC-DEF-STEP"]
ASSUME = ["A-UNIFORM", "A-SOLVER-TRUST"]


def _mn(a, b):
    return z3.If(a <= b, a, b)


# ------------------------------------------------------------------------ step: per-token lemma

def _accept_lemma(ctx, rules):
    p, q = z3.Reals("p_target_x p_draft_x")
    law = emission_law(lambda num: rules.accept(num, p, q, num.uniform()), "z3")
    w_acc, w_rej = law.get(True, z3.RealVal(0)), law.get(False, z3.RealVal(0))
    r = rules.residual(resolve("z3"), [p], [q])[0]
    claim = z3.And(q * w_acc == _mn(p, q), w_acc + w_rej == 1, r == p - _mn(p, q), r >= 0)
    return z3_prove(claim, ctx, hypotheses=[p >= 0, q >= 0, p <= 1, q <= 1])


@obligation("SPEC-ACCEPT-LEMMA", checks=CHECKS_STEP, bounds={}, assumptions=ASSUME, scope="unbounded")
def accept_lemma(ctx):
    """Per token, from the code: p_draft·P(accept) = min(p_target, p_draft); residual = p_target − min ≥ 0."""
    return _accept_lemma(ctx, sp.RULES)


@control("SPEC-ACCEPT-LEMMA/always-accept", of="SPEC-ACCEPT-LEMMA", bug="every draft is accepted")
def accept_lemma_always(ctx):
    return _accept_lemma(ctx, mut.always_accept)


@control("SPEC-ACCEPT-LEMMA/ratio-inverted", of="SPEC-ACCEPT-LEMMA",
         bug="acceptance probability min(1, p_draft/p_target) instead of min(1, p_target/p_draft)")
def accept_lemma_inverted(ctx):
    return _accept_lemma(ctx, mut.ratio_inverted)


@control("SPEC-ACCEPT-LEMMA/residual-is-target", of="SPEC-ACCEPT-LEMMA",
         bug="the rejection draw uses p_target instead of max(0, p_target − p_draft)")
def accept_lemma_residual_target(ctx):
    return _accept_lemma(ctx, mut.residual_is_target)


# ------------------------------------------------------------------- step: the draw, every V

def _draw_step(ctx, threshold):
    C, w, T = z3.Reals("C w T")
    seen = {}

    def one(num: BranchingNum):
        u = num.uniform()
        num._iv[u.id] = (C / T, z3.RealVal(1))  # the invariant before scanning token y
        decided = sp._Exact.below(num, threshold(num, u, T), C + w)  # the scan's decision
        seen[decided] = num._iv[u.id]
        return decided

    law = emission_law(one, "z3")
    lo_f, _ = seen[False]
    claim = z3.And(law[True] == w / T, lo_f == (C + w) / T)
    base = BranchingNum("z3")
    u0 = base.uniform()
    lo0, hi0 = base._iv[u0.id]  # the initial interval is [0, 1) = [C_{-1}/T, 1) with C_{-1} = 0
    claim = z3.And(claim, lo0 == 0, hi0 == 1)
    return z3_prove(claim, ctx, hypotheses=[T > 0, C >= 0, w >= 0, C + w <= T])


@obligation("SPEC-DRAW-STEP", checks=CHECKS_STEP, bounds={}, assumptions=ASSUME, scope="unbounded")
def draw_step(ctx):
    """One inverse-CDF scan step on the branching backend keeps the undecided interval [C/T, 1)
    and decides token y with probability w_y/T (induction over y: every vocabulary size)."""
    return _draw_step(ctx, sp._Exact.threshold)


@control("SPEC-DRAW-STEP/unnormalised", of="SPEC-DRAW-STEP",
         bug="the draw compares the running sum with u instead of u·T (weights not normalised)")
def draw_step_unnormalised(ctx):
    return _draw_step(ctx, lambda num, u, total: u)


def _step_compose(ctx, normalised=True):
    py, my, ry, M, R, rho = z3.Reals("p_y min_y r_y M R rho")
    # SPEC-DRAW-STEP; empty residual: the fallback draws from p_target
    draw_y = z3.If(R > 0, ry / R if normalised else ry, py)
    hyp = [0 <= my, my <= py, ry == py - my,        # SPEC-ACCEPT-LEMMA at y
           R == 1 - M, rho == 1 - M,                # Σ r = Σ p − Σ min, Σ p_draft(1 − P(acc)) = Σ p_draft − Σ min
           0 <= ry, ry <= R, py <= 1]
    return z3_prove(my + rho * draw_y == py, ctx, hypotheses=hyp)


@obligation("SPEC-STEP-COMPOSE", checks=["SPEC-THM-STEP"], bounds={}, assumptions=ASSUME + ["A-LINEAR-SUM"], scope="unbounded")
def step_compose(ctx):
    """Summed linearly, the per-token lemmas give P(emit y) = p_target(y) for every V (R = 0 included)."""
    return _step_compose(ctx)


@control("SPEC-STEP-COMPOSE/unnormalised-residual", of="SPEC-STEP-COMPOSE",
         bug="the residual max(0, p_target − p_draft) is drawn from without normalising")
def step_compose_unnormalised(ctx):
    return _step_compose(ctx, normalised=False)


# ------------------------------------------------------------- step: unrolled cross-checks

def _step_law(pt, pd, rules, base="fraction"):
    """Exact law of the emitted token: x ~ p_draft by inverse CDF, then one rejection step."""

    def run(num):
        ud, ua, ur = num.uniform(), num.uniform(), num.uniform()
        x = sp.inverse_cdf(num, [num.const(v) for v in pd], ud)
        if x < 0:
            return -1
        return sp.rejection_step(pt, pd, x, ua, ur, num=num, rules=rules).token

    return emission_law(run, base)


def _step_symbolic(ctx, rules):
    V = ctx.bounds["V"]
    for n in range(1, V + 1):
        p = [z3.Real(f"p_target_{i}") for i in range(n)]
        q = [z3.Real(f"p_draft_{i}") for i in range(n)]
        law = _step_law(p, q, rules, "z3")
        hyp = [x >= 0 for x in p + q] + [z3.Sum(p) == 1, z3.Sum(q) == 1]
        # one query per outcome (a conjunction of all of them is much slower for z3)
        for y in [*range(n), -1]:
            want = p[y] if y >= 0 else z3.RealVal(0)
            out = z3_prove(law.get(y, z3.RealVal(0)) == want, ctx, hypotheses=hyp)
            if out.status != "proved":
                return out._replace(detail=f"V = {n}, P(emit {y}): {out.detail}")
    return Outcome("proved", solver="z3", detail=f"emitted law = p_target for symbolic simplex rows, V = 1..{V}")


@obligation("SPEC-STEP-SYMBOLIC", checks=["SPEC-THM-STEP"], bounds={"V": 3}, assumptions=ASSUME, scope="bounded", role="cross-check")
def step_symbolic(ctx):
    """Unrolled: the real step on symbolic simplex rows (z3, branching backend) emits p_target."""
    return _step_symbolic(ctx, sp.RULES)


@control("SPEC-STEP-SYMBOLIC/ratio-inverted", of="SPEC-STEP-SYMBOLIC",
         bug="acceptance probability min(1, p_draft/p_target) instead of min(1, p_target/p_draft)")
def step_symbolic_inverted(ctx):
    return _step_symbolic(ctx, mut.ratio_inverted)


def _step_exact(ctx, rules):
    Vmax, n = ctx.bounds["V"], ctx.bounds["tables"]
    checked = 0
    for V in range(1, Vmax + 1):
        for shape, pt, pd in step_cases(V, n):
            law = canonical(_step_law(pt, pd, rules))
            want = canonical(dict(enumerate(pt)))
            if law != want:
                return Outcome("refuted", solver="exact", detail=f"{shape} table, V = {V}",
                               counterexample={"V": V, "shape": shape, "p_target": list(map(str, pt)),
                                               "p_draft": list(map(str, pd)),
                                               "law": {str(k): str(v) for k, v in law.items()}})
            for x in range(V):  # one-hot drafts (p_draft=None): any fixed x, law = p_target
                law1 = canonical(emission_law(
                    lambda num: sp.rejection_step(pt, None, x, num.uniform(), num.uniform(), num=num,
                                                  rules=rules).token))
                if law1 != want:
                    return Outcome("refuted", solver="exact", detail=f"one-hot draft x = {x}, V = {V}",
                                   counterexample={"V": V, "x": x, "p_target": list(map(str, pt)),
                                                   "law": {str(k): str(v) for k, v in law1.items()}})
            checked += 1
    return Outcome("proved", solver="exact",
                   detail=f"{checked} rational tables, V = 1..{Vmax}, incl. p_draft zeros, p = q, disjoint, one-hot")


@obligation("SPEC-STEP-EXACT", checks=CHECKS_STEP + ["SPEC-EXT-POLICY"], bounds={"V": 8, "tables": 10},
            deep_bounds={"V": 10, "tables": 40}, assumptions=["A-UNIFORM"], solver="exact", scope="bounded", role="cross-check")
def step_exact(ctx):
    """Unrolled: the real step's exact law (Fractions) is p_target on adversarial tables, V ≤ 8."""
    return _step_exact(ctx, sp.RULES)


for _name, _bug in (("always-accept", "every draft is accepted"),
                    ("residual-is-target", "the rejection draw uses p_target instead of the residual"),
                    ("residual-softmax", "the rejection draw uses softmax(p_target − p_draft)"),
                    ("ratio-inverted", "acceptance probability min(1, p_draft/p_target)")):
    def _ctl(ctx, _rules=mut.MUTANTS[_name]):
        return _step_exact(ctx, _rules)
    _ctl.__qualname__ = f"step_exact_{_name.replace('-', '_')}"
    control(f"SPEC-STEP-EXACT/{_name}", of="SPEC-STEP-EXACT", bug=_bug)(_ctl)


# ------------------------------------------------------------------------------ cycle

def _cycle_law(tab: PrefixTables, k: int, rules, greedy=False):
    def run(num):
        uni = sp.CycleUniforms([num.uniform() for _ in range(k)], num.uniform(), num.uniform(),
                               [num.uniform() for _ in range(k)])
        out = sp.speculative_cycle((), k, tab.p_target, tab.p_draft, uni, num=num, rules=rules, greedy=greedy)
        return out.tokens, out.n_accepted

    return canonical(emission_law(run))


def _target_prob(tab, prefix, seq):
    w = Fraction(1)
    for j, y in enumerate(seq):
        w *= tab.p_target(tuple(prefix) + tuple(seq[:j]))[y]
    return w


def _continued(tab, law, length):
    """The law of the emitted tokens continued by target sampling to ``length`` tokens."""
    full: dict = {}
    for (tokens, _), w in law.items():
        tokens = tokens[:length]
        for tail in itertools.product(range(tab.V), repeat=length - len(tokens)):
            pr = w * _target_prob(tab, tokens, tail)
            if pr:
                full[tokens + tail] = full.get(tokens + tail, 0) + pr
    return full


def _cycle_tables(ctx):
    for V in range(1, ctx.bounds["V"] + 1):
        for k in range(0, ctx.bounds["k"] + 1):
            for seed in range(ctx.bounds["tables"]):
                yield V, k, seed, PrefixTables(V, seed, shape="mixed")


def _cycle(ctx, rules):
    n = 0
    for V, k, seed, tab in _cycle_tables(ctx):
        law = _cycle_law(tab, k, rules)
        got = _continued(tab, law, k + 1)
        want = {s: _target_prob(tab, (), s) for s in itertools.product(range(V), repeat=k + 1)}
        want = {s: w for s, w in want.items() if w}
        if got != want:
            bad = next(s for s in set(got) | set(want) if got.get(s, 0) != want.get(s, 0))
            return Outcome("refuted", solver="exact", detail=f"V = {V}, k = {k}, table seed {seed}",
                           counterexample={"V": V, "k": k, "seed": seed, "sequence": list(bad),
                                           "law": str(got.get(bad, 0)), "target": str(want.get(bad, 0))})
        n += 1
    return Outcome("proved", solver="exact",
                   detail=f"{n} prefix-dependent rational tables, k ≤ {ctx.bounds['k']}, V ≤ {ctx.bounds['V']}")


@obligation("SPEC-CYCLE-LAW", checks=["SPEC-THM-CYCLE", "SPEC-ALG-CYCLE"], bounds={"k": 3, "V": 3, "tables": 8},
            deep_bounds={"k": 3, "V": 4, "tables": 20}, assumptions=["A-UNIFORM"], solver="exact", scope="bounded")
def cycle_law(ctx):
    """A cycle's emitted tokens, continued by target sampling to k+1, have the target's joint law."""
    return _cycle(ctx, sp.RULES)


for _name, _bug in (("bonus-after-rejection", "a bonus token is also drawn after a rejection"),
                    ("uniform-reused", "position 0's accept uniform is reused at every position"),
                    ("always-accept", "every draft is accepted")):
    def _ctl(ctx, _rules=mut.MUTANTS[_name]):
        return _cycle(ctx, _rules)
    _ctl.__qualname__ = f"cycle_law_{_name.replace('-', '_')}"
    control(f"SPEC-CYCLE-LAW/{_name}", of="SPEC-CYCLE-LAW", bug=_bug)(_ctl)


def _n_law_formula(tab, k):
    """P(N = n) = Σ_{x_1..x_n} Π_{i≤n} min(p_target, p_draft)(x_i | x_<i) · (1 − β(x_≤n)) (n < k; n = k: no factor)."""
    def m(prefix, x):
        return min(tab.p_target(prefix)[x], tab.p_draft(prefix)[x])

    def beta(prefix):
        return sum(m(prefix, x) for x in range(tab.V))

    out = {}
    for n in range(k + 1):
        total = Fraction(0)
        for xs in itertools.product(range(tab.V), repeat=n):
            w = Fraction(1)
            for i in range(n):
                w *= m(xs[:i], xs[i])
            total += w * (1 - beta(xs) if n < k else 1)
        out[n] = total
    return out


def _n_law(ctx, rules):
    n_checked = 0
    for V, k, seed, _ in _cycle_tables(ctx):
        for position_only in (False, True):
            tab = PrefixTables(V, seed, position_only=position_only, shape="mixed")
            law = _cycle_law(tab, k, rules)
            got = {}
            for (_, n), w in law.items():
                got[n] = got.get(n, 0) + w
            want = _n_law_formula(tab, k)
            if position_only:  # the brief's product form with β_i per position
                betas = [sum(min(a, b) for a, b in zip(tab.p_target((0,) * i), tab.p_draft((0,) * i)))
                         for i in range(k + 1)]
                prod = {n: _prod(betas[:n]) * (1 - betas[n] if n < k else 1) for n in range(k + 1)}
                if prod != want:
                    return Outcome("error", detail="internal: product and sum forms of P(N = n) disagree")
            if canonical(got) != canonical(want):
                return Outcome("refuted", solver="exact", detail=f"V = {V}, k = {k}, seed {seed}",
                               counterexample={"V": V, "k": k, "seed": seed, "position_only": position_only,
                                               "law_N": {n: str(w) for n, w in sorted(got.items())},
                                               "formula": {n: str(w) for n, w in sorted(want.items())}})
            n_checked += 1
    return Outcome("proved", solver="exact", detail=f"{n_checked} tables: P(N = n) from the code = formula")


def _prod(xs):
    out = Fraction(1)
    for x in xs:
        out *= x
    return out


@obligation("SPEC-ACCEPT-COUNT", checks=["SPEC-THM-CYCLE"], bounds={"k": 3, "V": 3, "tables": 5},
            deep_bounds={"k": 3, "V": 4, "tables": 16}, assumptions=["A-UNIFORM"], solver="exact", scope="bounded")
def accept_count(ctx):
    """The number of accepted drafts N has P(N = n) = (Π_{i≤n} β_i)(1 − β_{n+1}), P(N = k) = Π β_i."""
    return _n_law(ctx, sp.RULES)


@control("SPEC-ACCEPT-COUNT/uniform-reused", of="SPEC-ACCEPT-COUNT",
         bug="position 0's accept uniform is reused at every position")
def accept_count_uniform_reused(ctx):
    return _n_law(ctx, mut.uniform_reused)


@control("SPEC-ACCEPT-COUNT/ratio-inverted", of="SPEC-ACCEPT-COUNT",
         bug="acceptance probability min(1, p_draft/p_target)")
def accept_count_inverted(ctx):
    return _n_law(ctx, mut.ratio_inverted)
