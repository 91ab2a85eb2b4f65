"""Poison cannot reach a result (EXT-FP-POISON): NaN or ±∞ in an entry that no allowed pair reads —
a masked key's K_j, V_j, a padded row's Q_i, G_i — cannot reach Y, lse, dQ, dK or dV.

The reference runs forward and backward on IEEE fp16 terms (``FPTraceNum``, A-FP-IEEE, A-FP-EXP)
for n_q = 2 rows, n_k = 3 keys, d = v = 1, every one of the 64 masks, b = 2 (a mixed block and a
single-key one: partly masked, fully masked, skipped, copied and merged blocks; every b ≤ 3 under
--deep);
every unread entry is its own free constant (any value: NaN, ±∞ included). Claim: no result term
reaches an unread entry's constant — directly, or through the argument of an exp/log it uses — so
each result is a function of the read entries alone (``empty_rows="zero"``: a padded row gives
Y = 0, lse = −∞, zero gradients). No solver is needed for the claim. When a result does reach
poison, z3 searches for the counterexample: read entries finite with |x| ≤ 4 (so they cannot
overflow on their own) and a NaN result.
"""
from __future__ import annotations

import itertools
from unittest.mock import patch

import z3

from flashproof.verified import attention as att

from flashproof.proofs.engine.core import Outcome, control, obligation, z3_witness
from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.numbers.fptrace import FPTraceNum

N_Q, N_K, FMT = 2, 3, "fp16"


def _inputs(N, allowed):
    read_rows = {i for i, A in enumerate(allowed) if A}
    read_keys = set().union(*allowed)
    clean, poison = [], set()

    def var(name, read):
        x = N.var(name if read else f"poison_{name}")
        (clean.append(x) if read else poison.add(str(x)))
        return x

    Q = [[var(f"Q{i}", i in read_rows)] for i in range(N_Q)]
    K = [[var(f"K{j}", j in read_keys)] for j in range(N_K)]
    V = [[var(f"V{j}", j in read_keys)] for j in range(N_K)]
    G = [[var(f"G{i}", i in read_rows)] for i in range(N_Q)]
    return (Q, K, V, G), clean, poison


def _results(N, Q, K, V, G, allowed, b):
    fw = att.tiled_forward(Q, K, V, scale=0.5, block=b, allowed=allowed, num=N, empty_rows="zero")
    gr = att.tiled_backward(Q, K, V, G, fw, scale=0.5, block=b, allowed=allowed, num=N, empty_rows="zero")
    named = [(f"Y[{i}]", y) for i, row in enumerate(fw.out) for y in row] + [(f"lse[{i}]", x) for i, x in enumerate(fw.lse)]
    for g, M in zip(("dQ", "dK", "dV"), gr):
        named += [(f"{g}[{i}]", x) for i, row in enumerate(M) for x in row]
    return named


def _witness(ctx, N, name, term, clean, allowed, b, reached) -> Outcome:
    four = N.const(4.0)
    hyp = [z3.And(z3.Not(z3.fpIsNaN(x)), z3.Not(z3.fpIsInf(x)), z3.fpLEQ(z3.fpAbs(x), four)) for x in clean]
    out = z3_witness(z3.And(z3.fpIsNaN(term), *hyp, *N.side), ctx, logic="QF_UFFP")
    where = {"result": name, "mask": [sorted(A) for A in allowed], "b": b, "reaches": sorted(reached)}
    if out.status == "proved":  # a NaN result from poison: the claim is refuted
        return Outcome("refuted", counterexample=dict(where, **(out.witness or {})), solver="z3",
                       detail=f"{name} reaches poison and is NaN")
    return Outcome("unknown", counterexample=None, solver="z3",
                   detail=f"{name} reaches poison {sorted(reached)} but z3 found no NaN ({out.status}: {out.detail})")


@obligation("ATT-FP-POISON-fp16", checks=["EXT-FP-POISON"],
            bounds={"n_q": N_Q, "n_k": N_K, "d": 1, "v": 1, "b": [2], "masks": "all 64", "format": FMT},
            deep_bounds={"n_q": N_Q, "n_k": N_K, "d": 1, "v": 1, "b": [1, 2, 3], "masks": "all 64", "format": FMT},
            assumptions=["A-FP-IEEE", "A-FP-EXP", "A-SOLVER-TRUST"], solver="z3")
def poison(ctx):
    """NaN/±∞ in a masked key or a padded row reaches none of Y, lse, dQ, dK, dV (guarded update, fp16)."""
    k = 0
    for bits in itertools.product((False, True), repeat=N_Q * N_K):
        allowed = [{j for j in range(N_K) if bits[i * N_K + j]} for i in range(N_Q)]
        for b in ctx.bounds["b"]:
            N = FPTraceNum(FMT)
            (Q, K, V, G), clean, poison_names = _inputs(N, allowed)
            for name, term in _results(N, Q, K, V, G, allowed, b):
                k += 1
                reached = N.depends_on(term, poison_names)
                if reached:
                    return _witness(ctx, N, name, term, clean, allowed, b, reached)
    return Outcome("proved", solver="z3", detail=f"{k} result terms (64 masks, b ∈ {ctx.bounds['b']}) reach no unread entry")


@control("ATT-FP-POISON-fp16/summarize-unguarded", of="ATT-FP-POISON-fp16",
         bug="summarize adds p·v for masked keys too (0·NaN reaches z)")
def poison_summarize(ctx):
    with patch.object(att, "summarize", mutants.summarize_z_unguarded):
        return poison(ctx)


@control("ATT-FP-POISON-fp16/dq-unguarded", of="ATT-FP-POISON-fp16",
         bug="dQ adds c·γ·K_j for masked pairs too (no mask guard)")
def poison_dq(ctx):
    with patch.object(att, "_pair_update", mutants.pair_update_dq_unguarded):
        return poison(ctx)


@control("ATT-FP-POISON-fp16/exp-unguarded", of="ATT-FP-POISON-fp16",
         bug="summarize exponentiates a masked key's score and adds it to ℓ (poison reaches ℓ only through exp)")
def poison_exp(ctx):
    with patch.object(att, "summarize", mutants.summarize_exp_unguarded):
        return poison(ctx)
