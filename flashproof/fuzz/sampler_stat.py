"""The statistical sampler test, for samplers that take a generator instead of uniforms.

Setting: vocabulary V = 3, K = 2 drafts, prefix-dependent tables whose entries are multiples of
1/64 (exact in float32, so the rows the sampler reads are the rationals the law is computed in).
The exact law of the emitted token sequences comes from running the verified cycle
(``verified.speculative.speculative_cycle``) on the branching backend (``emission_law``). N = 20000
cycles are drafted from p_draft, the sampler verifies them, and a G-test compares the counts with
the law: false-alarm rate ALPHA = 1e-3 per run (cells with expected count < 5 pooled; an outcome
of probability 0 fails at once). Power: the same tables' exact laws under the negative controls
(always-accept, residual = p_target, residual = softmax(p − q)), each as ``verify``'s rules with one
field replaced, give the χ² non-centrality; the summary states each power (normal approximation)
and the run requires ≥ 0.99 for all, else the harness is too weak (harness error).
"""
from __future__ import annotations

import collections
import itertools
import math
import random
import time
from fractions import Fraction

import torch

__all__ = ["run_statistical", "ALPHA", "MIN_POWER", "N", "V", "K", "tables", "exact_law", "counts", "g_test", "g_test_sequences", "power",
           "power_at"]

V, K, N = 3, 2, 20000
ALPHA = 1e-3
MIN_POWER = 0.99


def _row(rng: random.Random) -> list:
    w = [0 if rng.random() < 0.25 else rng.randint(1, 8) for _ in range(V)]
    if not any(w):
        w[0] = 1
    q = [x * 64 // sum(w) for x in w]
    q[w.index(max(w))] += 64 - sum(q)
    return [Fraction(x, 64) for x in q]


def tables(seed: int) -> dict:
    """prefix (tuple, length ≤ K) -> (p_target row, p_draft row), exact rationals."""
    rng = random.Random(seed)
    return {p: (_row(rng), _row(rng)) for n in range(K + 1) for p in itertools.product(range(V), repeat=n)}


def _control_rules():
    from flashproof.verified import speculative as sp

    def softmax_residual(num, pt, pd):
        return [num.const(Fraction(math.exp(float(a) - float(b)))) for a, b in zip(pt, pd)]
    return {"always-accept": sp.RULES._replace(accept=lambda num, px, qx, u: True),
            "residual-is-target": sp.RULES._replace(residual=lambda num, pt, pd: list(pt)),
            "residual-softmax": sp.RULES._replace(residual=softmax_residual)}


def exact_law(tab: dict, rules=None) -> dict:
    from flashproof.verified import speculative as sp
    from flashproof.verified.branching import canonical, emission_law

    rules = rules or sp.RULES

    def run(num):
        uni = sp.CycleUniforms([num.uniform() for _ in range(K)], num.uniform(), num.uniform(),
                               [num.uniform() for _ in range(K)])
        return sp.speculative_cycle((), K, lambda p: tab[tuple(p)][0], lambda p: tab[tuple(p)][1], uni, num=num,
                                    rules=rules).tokens
    return canonical(emission_law(run))


def _cells(law: dict, n: int = N):
    """The G-test's cells at n samples: each outcome expected at least 5 times alone, the rest pooled."""
    big = [o for o, p in law.items() if n * p >= 5]
    small = [o for o in law if o not in big]
    return [[o] for o in big] + ([small] if small else [])


def g_test(observed: dict, law: dict, n: int = N) -> tuple:
    """(G, p-value, df) of ``observed`` counts of n samples against ``law`` (outcome -> probability; an
    observed outcome the law does not hold is impossible: G = inf, p = 0). Cells as ``_cells`` pools them
    at n; p exact (the regularised upper incomplete gamma)."""
    import mpmath

    if any(o not in law for o in observed):
        return math.inf, 0.0, 0
    g = 0.0
    cells = _cells(law, n)
    for c in cells:
        o = sum(observed.get(x, 0) for x in c)
        e = n * float(sum(law[x] for x in c))
        g += 2 * o * math.log(o / e) if o else 0.0
    df = len(cells) - 1
    return g, float(mpmath.gammainc(df / 2, g / 2, mpmath.inf, regularized=True)), df


def g_test_sequences(samples: torch.Tensor, law: torch.Tensor) -> tuple:
    """``g_test`` of m sampled token sequences ``samples`` (m, L), tokens 0 … V − 1, against their exact
    law ``law`` (V^L,) over all sequences in base-V order (the speculative examples' law test)."""
    m, L = samples.shape
    V = round(len(law) ** (1 / L))
    codes = (samples.cpu().long() * (V ** torch.arange(L - 1, -1, -1))).sum(1).tolist()
    return g_test(collections.Counter(codes), {i: p for i, p in enumerate(law.tolist()) if p > 0}, m)


def power(law: dict, bad: dict) -> float:
    """P(the G-test rejects at ALPHA) when the sampler follows ``bad`` (normal approximation of the
    non-central χ²; an outcome ``law`` forbids counts as certain detection once it appears), at N samples."""
    return power_at(law, bad, N)


def power_at(law: dict, bad: dict, n: int) -> float:
    """``power`` of a G-test on ``n`` samples (same ALPHA, cells pooled as ``_cells`` pools them at n):
    for a caller whose G-test has a sample size of its own."""
    import mpmath

    extra = sum(float(w) for o, w in bad.items() if o not in law)
    if extra > 0:
        return 1 - (1 - extra) ** n
    cells = _cells(law, n)
    lam = sum(n * (float(sum(bad.get(x, 0) for x in c)) - float(sum(law[x] for x in c))) ** 2
              / float(sum(law[x] for x in c)) for c in cells)
    df = len(cells) - 1
    crit = float(mpmath.findroot(lambda x: mpmath.gammainc(df / 2, x / 2, mpmath.inf, regularized=True) - ALPHA,
                                 df + 3 * math.sqrt(2 * df) + 10))
    mean, sd = df + lam, math.sqrt(2 * (df + 2 * lam))
    return 0.5 * math.erfc((crit - mean) / (sd * math.sqrt(2)))


def _drafts(tab: dict, gen: torch.Generator):
    """N cycles drafted from p_draft given the prefix, and the rows the sampler needs."""
    ids = torch.zeros(N, K, dtype=torch.int64)
    pt, pd = torch.zeros(N, K, V), torch.zeros(N, K, V)
    prefixes = [()] * N
    for i in range(K):
        for key in sorted(set(prefixes)):
            sel = torch.tensor([p == key for p in prefixes])
            t, d = (torch.tensor([float(x) for x in r]) for r in tab[key])
            pt[sel, i], pd[sel, i] = t, d
            ids[sel, i] = torch.multinomial(d, int(sel.sum()), replacement=True, generator=gen)
        prefixes = [p + (int(x),) for p, x in zip(prefixes, ids[:, i])]
    pb = torch.stack([torch.tensor([float(x) for x in tab[p][0]]) for p in prefixes])
    return ids, pd, pt, pb


def counts(tokens: torch.Tensor) -> dict:
    """Emitted sequence (the row's tokens ≥ 0) -> how many of the rows emitted it."""
    counts: dict = {}
    for row in tokens.tolist():
        seq = tuple(t for t in row if t >= 0)
        counts[seq] = counts.get(seq, 0) + 1
    return counts


def run_statistical(target, *, device: str = "cpu", budget: int = 40, seed: int = 0, seconds=None,
                    repro_dir=None) -> dict:
    """One G-test run of ``target`` (its ``generator`` drives it) on the tables of ``seed``."""
    t0 = time.monotonic()
    tab = tables(seed)
    law = exact_law(tab)
    powers = {name: round(power(law, exact_law(tab, rules)), 4) for name, rules in _control_rules().items()}
    gen = torch.Generator().manual_seed(100 + seed)
    ids, pd, pt, pb = _drafts(tab, gen)
    summary = {"sampler": target.name, "doc": target.doc, "mode": "statistical", "device": device, "seed": seed,
               "cycles": N, "alpha": ALPHA, "power_against_controls": powers, "complete": True,
               "control": target.control, "deviations": [], "harness_error": "", "notes": []}
    weak = {k: v for k, v in powers.items() if v < MIN_POWER}
    if weak:
        summary["harness_error"] = f"the G-test's power is below {MIN_POWER} against {weak} at N = {N}"
    raised = ""
    try:  # the sampler under test and its result's shape, nothing of ours: what raises here is the sampler's
        r = target.fn(ids.to(device), pd.to(device), pt.to(device), pb.to(device),
                      generator=torch.Generator(device=device).manual_seed(7 + seed))
        tokens = r[0].detach().cpu()
        if tokens.dim() != 2 or tokens.shape[0] != N:
            raise ValueError(f"tokens of shape {tuple(tokens.shape)}, expected ({N}, {K + 1})")
    except Exception as e:
        raised = f"{type(e).__name__}: {e}"[:300]
        summary["deviations"].append({"reason": "error", "reproducer": f"[{target.name}] raised {raised}"})
    if not raised:
        try:  # the counting and the G-test are ours: their failure is the harness's, never a finding
            g, p, df = g_test(counts(tokens), law)
        except Exception as e:
            summary["harness_error"] = f"the G-test raised {type(e).__name__}: {e}"[:300]
        else:
            summary["g"], summary["p_value"], summary["df"] = round(g, 3), p, df
            if p < ALPHA:
                summary["deviations"].append({"reason": "law", "reproducer":
                                              f"[{target.name}] G = {g:.1f} on {df} df, p = {p:.2e} < "
                                              f"{ALPHA}: the emitted law differs from the reference's "
                                              f"(flashproof.fuzz.sampler_stat.tables({seed}), N = {N})"})
    if target.control:  # caught only by the law: a control that raises shows nothing about the test's power
        summary["caught_by"] = [d["reproducer"] for d in summary["deviations"] if d["reason"] == "law"]
        summary["caught"] = bool(summary["caught_by"])
        summary["deviations"] = []
        if raised and not summary["harness_error"]:
            summary["harness_error"] = (f"negative control {target.name} raised {raised} instead of emitting "
                                        "tokens: only a deviation of the emitted law catches a control")
        elif not summary["caught"] and not summary["harness_error"]:
            summary["harness_error"] = f"negative control {target.name} passed the G-test: the test is too weak"
    summary["passed"] = not summary["deviations"] and not summary["harness_error"]
    summary["detail"] = (f"{N} cycles, V = {V}, K = {K}; G-test at alpha {ALPHA}"
                         + (f": G = {summary.get('g')}, p = {summary.get('p_value', 0):.3g}" if "g" in summary else "")
                         + f"; power against the controls {powers}")
    summary["elapsed_s"] = round(time.monotonic() - t0, 2)
    return summary
