"""Ring attention's schedule gives dense attention for every world size (item EXT-RING).

The schedule is the code's own: ``flashproof.kernels.distributed.schedule`` (pure functions of world
size W, rank r and step s, written with ``+ − %`` and ``where`` only), run here on z3 integers.

* RING-LAYOUT — ``chunk_of`` / ``owner_of`` are inverse bijections between (rank, slot) and the C
  chunks of the sequence, both layouts, every W ≥ 1 (so the ranks' query shards partition the rows,
  and ``shard`` / ``unshard`` are inverse);
* RING-SCHEDULE — for every W ≥ 1, rank r and chunk length n ≥ 1: every step's source rank is a rank;
  over the W steps each key chunk reaches each query slot exactly once (no chunk twice: injective in
  (step, key slot); every chunk some time: the owner gives the step); and each block's local call
  (``runs``, ``local_causal``: SKIP / FULL / causal-inside) admits exactly the pairs (i, j) that dense
  attention allows, j ≤ i under causal. So for each query row the merged blocks are disjoint key sets
  whose union is the row's allowed set, and ATT-MERGE-UNION / ATT-MERGE-IDENTITY (the fold's step,
  induction over the steps) with ATT-TILED-BASE-FINAL give the dense row — the EXT-ANY-ORDER argument;
* RING-FOLD-EXACT — cross-check, bounded in W: the code's ``ring_plan`` folded as
  ``kernels/distributed/merge.py`` folds it (⋆ of the accumulator and each block's normalised (out,
  lse), one normalisation at the end), in exact rationals (exp domain), equals dense attention on every
  row of every rank, both layouts, causal or not.

Controls: shards moved two ranks per step (a block merged twice, another never), the diagonal block
skipped under causal, the contiguous layout's skip rule applied to zigzag chunks, and a zigzag tail
chunk off by one.
"""
from __future__ import annotations

import random
from fractions import Fraction
from unittest.mock import patch

import z3

from flashproof.kernels.distributed import schedule as sch
from flashproof.verified import attention as att
from flashproof.verified.attention import Summary
from flashproof.verified.expdomain import FractionExpNum

from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove

CASES = [(layout, causal) for layout in sch.LAYOUTS for causal in (False, True)]
ASSUME = ["A-SOLVER-TRUST"]


def _where(c, a, b):
    if isinstance(c, bool):
        return a if c else b
    return z3.If(c, a, b)


def _bool(x):
    return z3.BoolVal(x) if isinstance(x, bool) else x


def _prove_each(ctx, claims) -> Outcome:
    """Prove every (label, claim, hypotheses); the first non-proved one is the outcome."""
    for label, claim, hyp in claims:
        out = z3_prove(claim, ctx, hypotheses=hyp)
        if out.status != "proved":
            cx = dict(out.counterexample or {}, case=label) if out.status == "refuted" else out.counterexample
            return out._replace(counterexample=cx, detail=f"{label}: {out.detail}")
    return Outcome("proved", solver="z3", detail=f"{len(claims)} queries, W symbolic")


# ------------------------------------------------------------------------------ RING-LAYOUT

def _layout_claim(layout):
    W, r, c = z3.Ints("W r c")
    C = sch.num_chunks(W, layout)
    k = sch.slots(layout)
    fwd = []
    for a in range(k):
        ch = sch.chunk_of(r, a, W, layout)
        o, b = sch.owner_of(ch, W, layout, where=_where)
        fwd.append(z3.And(0 <= ch, ch < C, o == r, b == a))
    o, b = sch.owner_of(c, W, layout, where=_where)
    back = z3.And(0 <= o, o < W, z3.Or(*[z3.And(b == a, sch.chunk_of(o, a, W, layout) == c) for a in range(k)]))
    claim = z3.And(z3.Implies(z3.And(0 <= r, r < W), z3.And(*fwd)), z3.Implies(z3.And(0 <= c, c < C), back))
    return claim, [W >= 1]


@obligation("RING-LAYOUT", checks=["EXT-RING"], bounds={"W": "symbolic"}, assumptions=ASSUME)
def ring_layout(ctx):
    """chunk_of and owner_of are inverse bijections (rank, slot) ↔ chunk, both layouts, every W ≥ 1."""
    return _prove_each(ctx, [(layout, *_layout_claim(layout)) for layout in sch.LAYOUTS])


def _chunk_of_tail_off_by_one(rank, slot, world, layout):
    """zigzag's second chunk is 2W − r instead of 2W − 1 − r."""
    if layout == "contiguous" or slot == 0:
        return rank
    return 2 * world - rank


@control("RING-LAYOUT/zigzag-tail-off-by-one", of="RING-LAYOUT", bug="zigzag's second chunk is 2W − r, not 2W − 1 − r")
def ring_layout_tail(ctx):
    with patch.object(sch, "chunk_of", _chunk_of_tail_off_by_one):
        return ring_layout(ctx)


# ---------------------------------------------------------------------------- RING-SCHEDULE

def _schedule_claims(layout, causal):
    W, r, s, s2, c, n, x, y = z3.Ints("W r s s2 c n x y")
    C = sch.num_chunks(W, layout)
    k = sch.slots(layout)
    base = [W >= 1, 0 <= r, r < W]
    in_steps = lambda t: z3.And(0 <= t, t < W)  # noqa: E731
    src, src2 = sch.source_rank(r, s, W), sch.source_rank(r, s2, W)
    label = f"{layout}, causal={causal}"
    claims = []
    # every step's source is a rank, and the chunks it holds are chunks
    claims.append((f"{label}: range", z3.Implies(in_steps(s), z3.And(
        0 <= src, src < W, *[z3.And(0 <= sch.chunk_of(src, b, W, layout), sch.chunk_of(src, b, W, layout) < C)
                             for b in range(k)])), base))
    # no key chunk twice: (step, key slot) ↦ chunk is injective
    inj = [z3.Implies(sch.chunk_of(src, b, W, layout) == sch.chunk_of(src2, b2, W, layout),
                      z3.And(s == s2, b == b2) if b == b2 else z3.BoolVal(False))
           for b in range(k) for b2 in range(k)]
    claims.append((f"{label}: no chunk twice", z3.Implies(z3.And(in_steps(s), in_steps(s2)), z3.And(*inj)), base))
    # every key chunk some time: its owner's shard arrives at step (r − owner) mod W
    o, a = sch.owner_of(c, W, layout, where=_where)
    t = (r - o) % W
    hit = z3.Or(*[z3.And(a == b, sch.chunk_of(sch.source_rank(r, t, W), b, W, layout) == c) for b in range(k)])
    claims.append((f"{label}: every chunk", z3.Implies(z3.And(0 <= c, c < C), z3.And(in_steps(t), hit)), base))
    # each block's local call admits exactly the densely allowed pairs
    st = sch.step_blocks(W, r, s, layout, causal, where=_where)
    exact = []
    for blk in st.blocks:
        qc, kc = sch.chunk_of(r, blk.q_slot, W, layout), sch.chunk_of(st.source, blk.k_slot, W, layout)
        local = z3.And(_bool(sch.runs(blk.kind)), z3.Or(z3.Not(_bool(sch.local_causal(blk.kind))), y <= x))
        dense = kc * n + y <= qc * n + x if causal else z3.BoolVal(True)
        exact.append(local == dense)
    pos = [n >= 1, 0 <= x, x < n, 0 <= y, y < n]
    claims.append((f"{label}: block masks", z3.Implies(z3.And(in_steps(s), *pos), z3.And(*exact)), base))
    return claims


@obligation("RING-SCHEDULE", checks=["EXT-RING"], bounds={"W": "symbolic", "rank": "symbolic", "step": "symbolic",
                                                          "n": "symbolic"}, assumptions=ASSUME)
def ring_schedule(ctx):
    """Each key chunk reaches each query slot once, with exactly the dense mask, every W ≥ 1 (z3 Ints)."""
    return _prove_each(ctx, [cl for layout, causal in CASES for cl in _schedule_claims(layout, causal)])


def _source_two_hops(rank, step, world):
    """shards move two ranks per step: with an even W some shards arrive twice and others never."""
    return (rank - 2 * step) % world


def _block_kind_diag_skipped(q_chunk, k_chunk, causal, *, where=sch._where):
    """under causal the diagonal block is skipped: only strictly earlier key chunks are merged."""
    if not causal:
        return sch.FULL
    return where(k_chunk < q_chunk, sch.FULL, sch.SKIP)


def _step_blocks_rank_rule(world, rank, step, layout, causal, *, where=sch._where):
    """block kinds decided by comparing ranks, not chunks (the contiguous rule), also on zigzag shards."""
    src = sch.source_rank(rank, step, world)
    kind = sch.block_kind(rank, src, causal, where=where)
    k = sch.slots(layout)
    return sch.Step(step, src, tuple(sch.Block(a, b, kind) for a in range(k) for b in range(k)))


MUTANTS = {"two-hops": ("source_rank", _source_two_hops, "shards move two ranks per step: some blocks merged twice"),
           "diag-skipped": ("block_kind", _block_kind_diag_skipped, "causal diagonal block skipped"),
           "rank-rule": ("step_blocks", _step_blocks_rank_rule,
                         "contiguous skip rule (by rank) used for zigzag chunks: needed blocks skipped")}


@control("RING-SCHEDULE/two-hops", of="RING-SCHEDULE", bug=MUTANTS["two-hops"][2])
def ring_schedule_two_hops(ctx):
    with patch.object(sch, "source_rank", _source_two_hops):
        return ring_schedule(ctx)


@control("RING-SCHEDULE/diag-skipped", of="RING-SCHEDULE", bug=MUTANTS["diag-skipped"][2])
def ring_schedule_diag_skipped(ctx):
    with patch.object(sch, "block_kind", _block_kind_diag_skipped):
        return ring_schedule(ctx)


@control("RING-SCHEDULE/rank-rule", of="RING-SCHEDULE", bug=MUTANTS["rank-rule"][2])
def ring_schedule_rank_rule(ctx):
    with patch.object(sch, "step_blocks", _step_blocks_rank_rule):
        return ring_schedule(ctx)


# -------------------------------------------------------------------------- RING-FOLD-EXACT

def _normalised(s: Summary, N) -> Summary:
    """(out, lse) as a summary: m = lse (a weight in the exp domain), ℓ = 1, z = out (merge.py's form)."""
    out, _, _, lse = att._finish(att._lift(s, N, 1), N)
    return Summary(lse, N.one(), out, s.nonempty) if s.nonempty else att.BOTTOM


def _fold_mismatch(world, rank, layout, causal, n, rng):
    """The first row of ``rank`` where the folded plan differs from dense attention, or None."""
    N = FractionExpNum()
    C = sch.num_chunks(world, layout)
    total = C * n
    val = [Fraction(rng.randint(-9, 9), rng.randint(1, 9)) for _ in range(total)]
    plan = sch.ring_plan(world, rank, layout, causal)
    for a in range(sch.slots(layout)):
        qc = sch.chunk_of(rank, a, world, layout)
        for x in range(n):
            i = qc * n + x
            w = [Fraction(rng.randint(1, 50), rng.randint(1, 50)) for _ in range(total)]  # e^{s_ij}
            acc = att.BOTTOM
            for st in plan:
                for blk in st.blocks:
                    if blk.q_slot != a:
                        continue
                    kc = sch.chunk_of(st.source, blk.k_slot, world, layout)
                    keys = range(kc * n, kc * n + n)
                    flags = [not sch.local_causal(blk.kind) or y <= x for y in range(n)]
                    part = _normalised(att.summarize([w[j] for j in keys], [[val[j]] for j in keys], N,
                                                     allowed=flags), N)
                    acc = att.merge(acc, part, N)
            allowed = [j for j in range(total) if not causal or j <= i]
            den = sum(w[j] for j in allowed)
            want_out, want_lse = sum(w[j] * val[j] for j in allowed) / den, den
            got_out, _, _, got_lse = att._finish(att._lift(acc, N, 1), N)
            if (got_out[0], got_lse) != (want_out, want_lse):
                return {"world": world, "rank": rank, "layout": layout, "causal": causal, "row": i,
                        "out": str(got_out[0]), "dense_out": str(want_out), "lse_weight": str(got_lse),
                        "dense_lse_weight": str(want_lse)}
    return None


@obligation("RING-FOLD-EXACT", checks=["EXT-RING"], bounds={"W": "1..6", "n": 2}, deep_bounds={"W": "1..10", "n": 3},
            solver="exact", assumptions=["A-EXP-ISO"])
def ring_fold_exact(ctx):
    """Cross-check: the code's ring_plan folded with ⋆ (exact rationals) is dense attention, W ≤ bound."""
    w_max = int(str(ctx.bounds["W"]).split("..")[1])
    n = ctx.bounds["n"]
    rows = 0
    for world in range(1, w_max + 1):
        rng = random.Random(world)
        for layout, causal in CASES:
            for rank in range(world):
                bad = _fold_mismatch(world, rank, layout, causal, n, rng)
                if bad is not None:
                    return Outcome("refuted", counterexample=bad, solver="exact", detail="folded plan ≠ dense row")
                rows += sch.num_chunks(world, layout) // world * n
    return Outcome("proved", solver="exact", detail=f"{rows} rows, W = 1..{w_max}, n = {n}, both layouts, causal or not")


@control("RING-FOLD-EXACT/two-hops", of="RING-FOLD-EXACT", bug=MUTANTS["two-hops"][2])
def ring_fold_two_hops(ctx):
    with patch.object(sch, "source_rank", _source_two_hops):
        return ring_fold_exact(ctx)


@control("RING-FOLD-EXACT/diag-skipped", of="RING-FOLD-EXACT", bug=MUTANTS["diag-skipped"][2])
def ring_fold_diag_skipped(ctx):
    with patch.object(sch, "block_kind", _block_kind_diag_skipped):
        return ring_fold_exact(ctx)
