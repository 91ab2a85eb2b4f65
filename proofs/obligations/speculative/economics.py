"""Economics of speculation (seed 000): expected tokens per cycle, speed-up, the marginal rule for k,
and the seed's worked numbers — the expectation taken from the verified sampler's exact law.

Under i.i.d. acceptance with rate α (assumption A-IID-ACCEPT), the table p_target = (1, 0),
p_draft = (α, 1 − α) at every position has β = Σ min(p_target, p_draft) = α, so the cycle's law of
N (from the code, branching backend) gives E[N + 1] exactly."""
from __future__ import annotations

from fractions import Fraction

import sympy

from flashproof.verified import speculative as sp
from flashproof.verified.branching import emission_law

from flashproof.proofs.mutants import speculative as mut
from flashproof.proofs.engine.core import Outcome, control, obligation

ASSUME = ["A-UNIFORM", "A-IID-ACCEPT", "A-SOLVER-TRUST"]


def expected_tokens_from_code(alpha: Fraction, k: int, rules=sp.RULES) -> Fraction:
    """E[tokens per cycle] = E[N + 1] from the exact emission law of ``speculative_cycle``."""
    row_t, row_d = [Fraction(1), Fraction(0)], [alpha, 1 - alpha]

    def run(num):
        uni = sp.CycleUniforms([num.uniform() for _ in range(k)], num.uniform(), num.uniform(),
                               [num.uniform() for _ in range(k)])
        return len(sp.speculative_cycle((), k, lambda _: row_t, lambda _: row_d, uni, num=num, rules=rules).tokens)

    return sum((n * w for n, w in emission_law(run).items()), Fraction(0))


def _formula(alpha, k):
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def _tokens(ctx, rules):
    a, k, i = sympy.symbols("alpha k i", positive=True)
    series = sympy.summation((i + 1) * a ** i * (1 - a), (i, 0, k - 1)) + (k + 1) * a ** k
    # sympy's closed form is piecewise in Eq(α, 1); the formula's domain is 0 < α < 1: take the other branch
    series = series.replace(lambda e: isinstance(e, sympy.Piecewise), lambda e: e.args[-1][0])
    diff = sympy.simplify(series - (1 - a ** (k + 1)) / (1 - a))
    if diff != 0:
        return Outcome("refuted", solver="sympy", counterexample={"difference": str(diff)})
    for alpha in (Fraction(1, 2), Fraction(7, 10), Fraction(4, 5)):
        for kk in range(ctx.bounds["k"] + 1):
            got = expected_tokens_from_code(alpha, kk, rules)
            if got != _formula(alpha, kk):
                return Outcome("refuted", solver="sympy+exact", detail="the code's E[N + 1] differs",
                               counterexample={"alpha": str(alpha), "k": kk, "code": str(got),
                                               "formula": str(_formula(alpha, kk))})
    return Outcome("proved", solver="sympy+exact",
                   detail=f"symbolic k (sympy summation); the code's law agrees for k ≤ {ctx.bounds['k']}")


@obligation("SPEC-TOKENS-PER-CYCLE", checks=["SPEC-THM-TOKENS"], bounds={"k": 4}, deep_bounds={"k": 6},
            assumptions=ASSUME, solver="sympy", scope="bounded")  # sympy: every k; the code's law: k ≤ bound
def tokens_per_cycle(ctx):
    """E[tokens per cycle] = (1 − α^{k+1})/(1 − α): sympy for symbolic k; the code's exact law for k ≤ 4."""
    return _tokens(ctx, sp.RULES)


@control("SPEC-TOKENS-PER-CYCLE/always-accept", of="SPEC-TOKENS-PER-CYCLE", bug="every draft is accepted")
def tokens_always_accept(ctx):
    return _tokens(ctx, mut.always_accept)


def _marginal(gain_exp: int):
    a, c, k = sympy.symbols("alpha c k", positive=True)
    E = lambda j: (1 - a ** (j + 1)) / (1 - a)  # noqa: E731
    S = lambda j: E(j) / (j * c + 1)  # noqa: E731
    gain = sympy.simplify(E(k + 1) - E(k) - a ** (k + gain_exp))
    # S(k+1) > S(k)  ⟺  α^{k+1}(kc + 1) > c·E(k): the sign of the difference, times positive costs
    rule = sympy.simplify((S(k + 1) - S(k)) * (k * c + 1) * ((k + 1) * c + 1)
                          - (a ** (k + gain_exp) * (k * c + 1) - c * E(k)))
    if gain != 0 or rule != 0:
        return Outcome("refuted", solver="sympy", counterexample={"gain_residue": str(gain), "rule_residue": str(rule)})
    return Outcome("proved", solver="sympy", detail="E(k+1) − E(k) = α^{k+1}; S(k+1) > S(k) ⟺ α^{k+1}(kc+1) > c·E(k)")


@obligation("SPEC-MARGINAL-K", checks=["SPEC-THM-TOKENS"], bounds={}, assumptions=ASSUME, solver="sympy", scope="unbounded")
def marginal_k(ctx):
    """One more draft adds α^{k+1} tokens; it raises the speed-up iff α^{k+1}/c exceeds the current E/(kc+1)."""
    return _marginal(1)


@control("SPEC-MARGINAL-K/gain-alpha-k", of="SPEC-MARGINAL-K", bug="the marginal gain is taken to be α^k")
def marginal_alpha_k(ctx):
    return _marginal(0)


#: (alpha, k, c) and the seed's rounded figures: tokens, cost, speed-up (None: not stated).
SEED_NUMBERS = (
    ("0.8", 4, "0.1", "3.36", "1.4", "2.4"),
    ("0.5", 4, "0.1", "1.94", "1.4", "1.38"),
    ("0.7", 3, "0.15", "2.53", "1.45", "1.75"),
)


def _rounds_to(x: Fraction, stated: str) -> bool:
    digits = len(stated.split(".")[1]) if "." in stated else 0
    return abs(x - Fraction(stated)) <= Fraction(1, 2 * 10 ** digits)


def _numbers(rules):
    rows = []
    for alpha, k, c, s_tok, s_cost, s_speed in SEED_NUMBERS:
        tok = expected_tokens_from_code(Fraction(alpha), k, rules)
        cost = k * Fraction(c) + 1
        speed = tok / cost
        rows.append(f"α={alpha} k={k} c={c}: {float(tok):.4f} tokens, cost {cost}, {float(speed):.4f}×")
        for got, stated in ((tok, s_tok), (cost, s_cost), (speed, s_speed)):
            if not _rounds_to(got, stated):
                return Outcome("refuted", solver="exact", counterexample={"alpha": alpha, "k": k, "c": c,
                                                                         "computed": str(got), "seed": stated})
    acc = min(Fraction(1), Fraction("0.3") / Fraction("0.5"))
    # through the rules under test (not sp.accept_test directly), so a control's planted accept rule reaches it
    law = emission_law(lambda num: rules.accept(num, Fraction("0.3"), Fraction("0.5"), num.uniform()))
    if acc != Fraction("0.6") or law.get(True) != Fraction("0.6"):
        return Outcome("refuted", solver="exact", counterexample={"acceptance": str(law.get(True))})
    return Outcome("proved", solver="exact", detail="; ".join(rows) + "; acceptance 0.6 (from the rules' accept test)")


@obligation("SPEC-ECON-NUMBERS", checks=["SPEC-EX-ECON"], bounds={}, assumptions=ASSUME, solver="exact", scope="unbounded")
def econ_numbers(ctx):
    """The seed's worked numbers (3.36 and 2.4×; 1.94 and 1.38×; 0.6; 2.53, 1.45, 1.75×) from the code's law."""
    return _numbers(sp.RULES)


@control("SPEC-ECON-NUMBERS/ratio-inverted", of="SPEC-ECON-NUMBERS", bug="acceptance probability min(1, p_draft/p_target)")
def econ_ratio_inverted(ctx):
    return _numbers(mut.ratio_inverted)
