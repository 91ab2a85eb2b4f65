"""The drafters that give no probabilities, and the float draw, checked on the code itself.

* SPEC-ONE-HOT-CYCLE — ``verify`` with ``p_draft_rows=None`` (one-hot drafts: n-gram and greedy
  drafters): for every fixed draft sequence x ∈ V^k, the exact emission law of the code (branching
  backend, Fractions), continued by target sampling to k+1 tokens, is the target's joint law; every
  position, not only the first (V ≤ 3, k ≤ 3, prefix-dependent tables).
* SPEC-GREEDY-TIES — ``verify(greedy=True)`` and ``speculative_cycle(greedy=True)`` on tables full of
  tied maxima: the emitted tokens are exactly the first n+1 tokens of greedy target decoding with the
  *first* argmax (written here as min{y : row[y] = max row}, not with the code's helper), and n is
  the length of the common prefix of the drafts and that decoding (every draft sequence, V ≤ 3, k ≤ 3).
"""
from __future__ import annotations

import itertools
import random
from fractions import Fraction
from unittest.mock import patch

from flashproof.verified import speculative as sp
from flashproof.verified.branching import canonical, emission_law

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.mutants import speculative as mut
from flashproof.proofs.support.distribution_tables import PrefixTables


def _target_prob(tab, prefix, seq) -> Fraction:
    w = Fraction(1)
    for j, y in enumerate(seq):
        w *= tab.p_target(tuple(prefix) + tuple(seq[:j]))[y]
    return w


def _one_hot(ctx, rules) -> Outcome:
    n = 0
    for V in range(2, ctx.bounds["V"] + 1):
        for k in range(1, ctx.bounds["k"] + 1):
            for seed in range(ctx.bounds["tables"]):
                tab = PrefixTables(V, seed, shape="mixed")
                want = {s: _target_prob(tab, (), s) for s in itertools.product(range(V), repeat=k + 1)}
                want = {s: w for s, w in want.items() if w}
                for xs in itertools.product(range(V), repeat=k):
                    rows = [tab.p_target(xs[:i]) for i in range(k + 1)]

                    def run(num, xs=xs, rows=rows, k=k):
                        uni = sp.CycleUniforms([num.uniform() for _ in range(k)], num.uniform(), num.uniform())
                        return sp.verify(list(xs), rows, None, uni, num=num, rules=rules).tokens

                    law = canonical(emission_law(run))
                    got: dict = {}
                    for tokens, w in law.items():
                        for tail in itertools.product(range(V), repeat=k + 1 - len(tokens)):
                            pr = w * _target_prob(tab, tokens, tail)
                            if pr:
                                got[tokens + tail] = got.get(tokens + tail, 0) + pr
                    if got != want:
                        bad = next(s for s in set(got) | set(want) if got.get(s, 0) != want.get(s, 0))
                        return Outcome("refuted", solver="exact", detail=f"one-hot drafts {list(xs)}, V = {V}",
                                       counterexample={"V": V, "k": k, "seed": seed, "drafts": list(xs),
                                                       "sequence": list(bad), "law": str(got.get(bad, 0)),
                                                       "target": str(want.get(bad, 0))})
                    n += 1
    return Outcome("proved", solver="exact", detail=f"{n} (table, draft sequence) cases, every position one-hot")


ONE_HOT_BOUNDS = {"V": 3, "k": 3, "tables": 2, "drafts": "every x in V^k"}


@obligation("SPEC-ONE-HOT-CYCLE", checks=["SPEC-EXT-POLICY", "SPEC-THM-CYCLE"], bounds=ONE_HOT_BOUNDS,
            deep_bounds=dict(ONE_HOT_BOUNDS, tables=6), assumptions=["A-UNIFORM"], solver="exact")
def one_hot_cycle(ctx):
    """With p_draft=None, for every fixed draft sequence, the cycle continued by target sampling has the target's law."""
    return _one_hot(ctx, sp.RULES)


@control("SPEC-ONE-HOT-CYCLE/first-draft-row", of="SPEC-ONE-HOT-CYCLE",
         bug="with p_draft=None every position's one-hot row is built at draft 0's token")
def one_hot_cycle_first(ctx):
    return _one_hot(ctx, mut.one_hot_first_draft)


# ----------------------------------------------------------------------------------- greedy

#: rows with ties (and one without) over V = 2, 3
TIED_ROWS = {2: [[Fraction(1, 2)] * 2, [Fraction(1, 4), Fraction(3, 4)], [Fraction(1), Fraction(0)]],
             3: [[Fraction(1, 3)] * 3, [Fraction(1, 2), Fraction(1, 2), Fraction(0)],
                 [Fraction(0), Fraction(1, 2), Fraction(1, 2)], [Fraction(2, 5), Fraction(1, 5), Fraction(2, 5)],
                 [Fraction(1, 6), Fraction(1, 2), Fraction(1, 3)]]}


class _TiedTables:
    """p_target / p_draft of a prefix: a seeded pick among ``TIED_ROWS[V]``."""

    def __init__(self, V: int, seed: int):
        self.V, self.seed = V, seed

    def _pick(self, who: str, prefix) -> list:
        rng = random.Random(f"{who}-{self.seed}-{tuple(prefix)}")
        return TIED_ROWS[self.V][rng.randrange(len(TIED_ROWS[self.V]))]

    def p_target(self, prefix):
        return self._pick("target", prefix)

    def p_draft(self, prefix):
        return self._pick("draft", prefix)


def _first_max(row) -> int:
    top = max(row)
    return min(y for y, x in enumerate(row) if x == top)


def _greedy_decode(tab, length: int) -> tuple:
    out: tuple = ()
    for _ in range(length):
        out += (_first_max(tab.p_target(out)),)
    return out


def _greedy(ctx) -> Outcome:
    n = 0
    none = sp.CycleUniforms((), 0.0, 0.0)
    for V in (2, 3):
        for k in range(0, ctx.bounds["k"] + 1):
            for seed in range(ctx.bounds["tables"]):
                tab = _TiedTables(V, seed)
                g = _greedy_decode(tab, k + 1)
                for xs in itertools.product(range(V), repeat=k):
                    rows = [tab.p_target(xs[:i]) for i in range(k + 1)]
                    out = sp.verify(list(xs), rows, None, none, greedy=True, num="fraction")
                    common = next((i for i in range(k) if xs[i] != g[i]), k)
                    if out.tokens != g[:common + 1] or out.n_accepted != common:
                        return Outcome("refuted", solver="exact", detail=f"greedy verify, V = {V}, k = {k}",
                                       counterexample={"V": V, "k": k, "seed": seed, "drafts": list(xs),
                                                       "tokens": list(out.tokens), "n_accepted": out.n_accepted,
                                                       "greedy_decode": list(g[:common + 1])})
                    n += 1
                cyc = sp.speculative_cycle((), k, tab.p_target, tab.p_draft, none, greedy=True, num="fraction")
                drafts = _greedy_decode_draft(tab, k)
                common = next((i for i in range(k) if drafts[i] != g[i]), k)
                if cyc.tokens != g[:common + 1]:
                    return Outcome("refuted", solver="exact", detail=f"greedy cycle, V = {V}, k = {k}",
                                   counterexample={"V": V, "k": k, "seed": seed, "tokens": list(cyc.tokens),
                                                   "greedy_decode": list(g[:common + 1])})
                n += 1
    return Outcome("proved", solver="exact", detail=f"{n} greedy verifications and cycles on tied tables")


def _greedy_decode_draft(tab, k: int) -> tuple:
    out: tuple = ()
    for _ in range(k):
        out += (_first_max(tab.p_draft(out)),)
    return out


@obligation("SPEC-GREEDY-TIES", checks=["SPEC-EXT-POLICY"], bounds={"V": "2, 3", "k": 3, "tables": 4},
            deep_bounds={"V": "2, 3", "k": 4, "tables": 12}, assumptions=[], solver="exact")
def greedy_ties(ctx):
    """Temperature 0 with tied maxima: the cycle emits exactly greedy target decoding's tokens (first argmax)."""
    return _greedy(ctx)


@control("SPEC-GREEDY-TIES/last-argmax", of="SPEC-GREEDY-TIES",
         bug="greedy's argmax returns the last index of a tied maximum")
def greedy_ties_last(ctx):
    with patch.object(sp, "first_argmax", mut.first_argmax_last_on_ties):
        return _greedy(ctx)
