"""KER-BOUNDS-PLAN: the block-sparse plan kernel ``plan.tile_plan`` stays inside its tensors and writes
walk lists the attention kernels can read: for every shape it is launched with, tile sizes up to 2^20.

Executed symbolically (``kernel_exec``): the whole body of ``tile_plan`` with its helper ``_classes``,
on symbolic B, Hq, lengths Nq, Nk, tile sizes bq, bk (16 to ``TILE_MAX``), window sides, the tile grid's four
strides (0 on a broadcast dim), program ids and loop iterations, both directions (TRANSPOSED), every
window kind listed and the dense-mask switch, per listed BLOCK (the lane count of a step; C is
symbolic, so one BLOCK covers every C it is launched with). Loaded tile values are an uninterpreted
function of their address (the grid is read, never written).

Its column loop carries the counts n (and the full pass reads n_part, the partial pass's result), so it
runs by induction (``kernel_exec.Loop``): the invariant n = G_g(c0), G_g the ghost count of pass g's
flag (the number of columns below c0 it takes), is checked at entry and re-established by the body;
``tl.cumsum``/``tl.sum`` of the flag are differences of G_g. The facts about G_g that the claims need
are instances of four counting lemmas, each proved here by induction on z3 (base and step queries over
an uninterpreted flag and count), with their premises checked as queries of their own:

* RANGE: 0 ≤ a ≤ b ⇒ 0 ≤ G(b) − G(a) ≤ b − a;
* POINT: flag(a), 0 ≤ a < b ⇒ G(a) + 1 ≤ G(b);
* TAIL: no flag at p ≥ K (checked: flag(p) ⇒ p < C), b ≥ K ⇒ G(b) = G(K);
* DISJOINT: no p has both passes' flags (checked) ⇒ G_0(a) + G_1(a) ≤ a for a ≥ 0.

They are instantiated at every argument of G in the run's formulas and at C (POINT with b = C), as
premises of the claims that mention a count (``_linked``). Claims: every access
inside its tensor (the tile grid strided, the lists flat (B·Hq, R, C) and (B·Hq, R, 2), digit by digit)
with no wrap-around; every IDX entry written is a column in [0, C); the partial pass writes slots
[0, n_part), the full pass slots [n_part, n_part + n_full); the counts stored are ≥ 0 with
n_part + n_full ≤ C. Not claimed: that every slot below n_part + n_full is written (so a consumer's read
of one returns a column: the rest of A-KER-PLAN-LISTS).
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import z3

from flashproof.kernels.attention.triton import host, plan

from flashproof.proofs.engine.core import Outcome, control, obligation
from flashproof.proofs.obligations.kernels.bounds import WINDOWS, Tensor, _confirm, _Prover, _product, inside
from flashproof.proofs.support import kernel_exec as kx, radix, triton_sym as ts

ASSUME = ["A-TRITON-INT", "A-TRITON-DIV", "A-TRITON-MASKED-LOAD", "A-TRITON-LAUNCH", "A-TRITON-CODEGEN",
          "A-KER-HOST-LIMITS", "A-SOLVER-TRUST"]
LOOP = ("tile_plan", "for c0 in range(0, C, BLOCK):")
#: tile sizes covered (the API admits any power of two >= 16): above this, _classes' int32 products of a
#: masked-off lane (a column past C times the tile size) can wrap, which the mask-safety claim refuses
TILE_MAX = 2 ** 20


class PlanConfig(NamedTuple):
    transposed: bool
    left: bool
    right: bool
    dense: bool
    block: int

    def __str__(self):
        return " ".join(f"{k}={v}" for k, v in self._asdict().items())


# ------------------------------------------------------------------------------ the counting lemmas

def _lemma_queries():
    """(name, claim) of each induction base / step and derived lemma, over an uninterpreted flag f, g
    and counts F, G with F(p + 1) − F(p) = [f(p)] for p ≥ 0 (the definition, a premise of every step)."""
    f, g = z3.Function("lem_f", z3.IntSort(), z3.BoolSort()), z3.Function("lem_g", z3.IntSort(), z3.BoolSort())
    F, G = z3.Function("lem_F", z3.IntSort(), z3.IntSort()), z3.Function("lem_G", z3.IntSort(), z3.IntSort())
    a, k, K = z3.Ints("lem_a lem_k lem_K")
    step = lambda C, h, p: C(p + 1) - C(p) == z3.If(h(p), 1, 0)  # noqa: E731
    rng = lambda x, y: z3.And(0 <= G(y) - G(x), G(y) - G(x) <= y - x)  # noqa: E731
    return [
        ("RANGE base", z3.Implies(a >= 0, rng(a, a))),
        ("RANGE step", z3.Implies(z3.And(a >= 0, k >= 0, rng(a, a + k), step(G, g, a + k)), rng(a, a + k + 1))),
        ("POINT", z3.Implies(z3.And(a >= 0, k >= 1, g(a), step(G, g, a), rng(a + 1, a + k)), G(a) + 1 <= G(a + k))),
        ("TAIL base", G(K) == G(K)),
        ("TAIL step", z3.Implies(z3.And(K >= 0, k >= 0, G(K + k) == G(K), step(G, g, K + k), z3.Not(g(K + k))),
                                 G(K + k + 1) == G(K))),
        ("DISJOINT base", z3.Implies(z3.And(F(0) == 0, G(0) == 0), F(0) + G(0) <= 0)),
        ("DISJOINT step", z3.Implies(z3.And(k >= 0, F(k) + G(k) <= k, step(F, f, k), step(G, g, k),
                                            z3.Not(z3.And(f(k), g(k)))), F(k + 1) + G(k + 1) <= k + 1)),
    ]


def _apps(e, G, out, seen=None):
    """The arguments of every application of G in e (added to ``out`` by id, in the walk's order). With
    ``seen`` (shared by the calls for one G over several formulas), the subterms an earlier call walked
    are skipped: their applications are in ``out`` already, so ``out`` (keys and order) is the same."""
    g = G.decl() if hasattr(G, "decl") else G
    for x in kx.subterms(e, seen):
        if z3.is_app(x) and x.decl().eq(g):
            out[x.arg(0).get_id()] = x.arg(0)
    return out


def _linked(counts, base):
    """Names of the ghost counts and of the constants a base fact mentions together with one (the carried
    counts' fresh values after their loops, the trip counts): a claim that mentions none of them gets no
    lemma instances (dropping premises loses no soundness, only work)."""
    ghosts = {str(c.G) for c in counts}
    names = set(ghosts)
    for h in base:
        cs = _names(h)
        if cs & ghosts:
            names |= cs
    return names


def _names(e):
    """The uninterpreted constants and functions named in ``e``."""
    return kx._consts(e, set(), functions=True)


def _mentions(claims, linked):
    return any(_names(c) & linked for c in claims)


def _instances(counts, C, formulas):
    """The lemma instances (z3 Bools, each an implication whose premises are in it or checked) at every
    argument of each ghost count in ``formulas`` and at C."""
    facts = []
    for cnt in counts:
        args, seen = {C.get_id(): C}, set()
        for e in formulas:  # the formulas share most of their terms: each walked once
            _apps(e, cnt.G, args, seen)
        at = lambda x: z3.substitute(cnt.flag, (cnt.pos, x))  # noqa: E731
        xs = list(args.values())
        for x in xs:
            facts.append(z3.Implies(x >= 0, cnt.G(x + 1) - cnt.G(x) == z3.If(at(x), 1, 0)))  # the definition
            facts.append(z3.Implies(x >= C, cnt.G(x) == cnt.G(C)))  # TAIL (premise checked: flag(p) ⇒ p < C)
            facts.append(z3.Implies(z3.And(at(x), 0 <= x, x < C), cnt.G(x) + 1 <= cnt.G(C)))  # POINT, up to C
            for y in xs:
                facts.append(z3.Implies(z3.And(0 <= x, x <= y), z3.And(0 <= cnt.G(y) - cnt.G(x),
                                                                       cnt.G(y) - cnt.G(x) <= y - x)))  # RANGE
    if len(counts) == 2:  # DISJOINT (premise checked: no column in both passes)
        a, b = counts
        xs, seen_a, seen_b = {}, set(), set()
        for e in formulas:
            _apps(e, a.G, xs, seen_a), _apps(e, b.G, xs, seen_b)
        xs[C.get_id()] = C
        facts += [z3.Implies(x >= 0, a.G(x) + b.G(x) <= x) for x in xs.values()]
    return facts


# ------------------------------------------------------------------------------------- the launch

def _setup(cfg: PlanConfig):
    """(args, hyps, grid, layout, C, loads, loops) of one launch as plan.build_lists makes it."""
    I = z3.Int
    B, Hq, Nq, Nk, bq, bk, TQ, TK = (I(n) for n in ("B", "Hq", "Nq", "Nk", "bq", "bk", "TQ", "TK"))
    L = host.MAX_LEN
    cap = z3.If(Nq >= Nk, Nq, Nk)
    hyps = [B >= 1, Hq >= 1, Nq >= 1, Nq <= L, Nk >= 0, Nk <= L, bq >= 16, bk >= 16, bq <= TILE_MAX, bk <= TILE_MAX,
            TQ * bq >= Nq, (TQ - 1) * bq < Nq, TK * bk >= Nk, z3.Or(TK == 0, (TK - 1) * bk < Nk), TK >= 0]
    Rv, Cv = (TK, TQ) if cfg.transposed else (TQ, TK)
    R, C = I("R"), I("C")  # the kernel's own arguments (their digits are read in the code's terms)
    args, layout = {}, {}

    def int_arg(name, term):
        s = ts.arg(name)
        hyps.append(s.e == term)
        args[name] = s

    for name, term in (("Hq", Hq), ("R", Rv), ("C", Cv), ("Nq", Nq), ("Nk", Nk), ("bq", bq), ("bk", bk)):
        int_arg(name, term)
    left, right = I("left"), I("right")
    hyps += [left >= 0, left <= cap, right >= 0, right <= cap]
    int_arg("left", left), int_arg("right", right)
    # the tile grid, expanded to (B, Hq, TQ, TK): four non-negative strides, 0 on a broadcast dim
    strides = ["stb", "sth", "sti", "stj"]
    st = [ts.arg(s, stride=True) for s in strides]
    for s in st:
        args[s.e.decl().name()] = s
        hyps.append(s.e >= 0)
    sizes = (B, Hq, TQ, TK)
    span = z3.Sum(*[(n - 1) * s.e for n, s in zip(sizes, st)])
    hyps.append(span <= ts.SPAN_MAX)
    ts.SPANS["TILES"] = span
    ts.STRIDES.update({s: ("TILES", n) for s, n in zip(strides, sizes)})
    layout["TILES"] = Tensor(tuple(zip(sizes, strides)))
    rows = B * Hq
    layout["NUM"] = Tensor(((rows * R * 2, None),), (rows, R, z3.IntVal(2)))
    layout["IDX"] = Tensor(((rows * R * C, None),), (rows, R, C))
    hyps += [rows * R * C <= ts.SPAN_MAX, rows * R * 2 <= ts.SPAN_MAX]
    for name in ("TILES", "NUM", "IDX"):
        args[name] = ts.Ptr(name)
    consts = dict(HAS_LEFT=cfg.left, HAS_RIGHT=cfg.right, HAS_DENSE=cfg.dense, TRANSPOSED=cfg.transposed,
                  BLOCK=cfg.block)
    grid = (R, rows)
    hyps += [R >= 1, R <= 2 ** 31 - 1, rows <= 65535]  # a launch has programs; CUDA's grid limits
    tile = z3.Function("TILES_at", z3.IntSort(), z3.IntSort())
    loads = {"TILES": lambda off, run: ts.Sym(tile(off.e), False)}
    ghosts = {0: z3.Function("n_partial_below", z3.IntSort(), z3.IntSort()),
              1: z3.Function("n_full_below", z3.IntSort(), z3.IntSort())}
    loops = {LOOP: kx.Loop(lambda v, state, env: state["n"].e == ghosts[env["FULL"]](v),
                           lambda env: ghosts[env["FULL"]])}
    return {**args, **consts}, hyps, grid, layout, C, loads, loops


def _configs(blocks, windows, denses=(False,)):
    for transposed, w, dense, block in itertools.product((False, True), windows, denses, blocks):
        yield PlanConfig(transposed, *WINDOWS[w], dense, block)


def check_plan(ctx, overrides=None):
    pr = _Prover(ctx)
    for name, claim in _lemma_queries():
        bad = pr.prove(claim, z3.BoolVal(True), [], [], f"counting lemma {name}")
        if bad:
            return bad
    fn = plan.tile_plan
    params = fn.fn.__code__.co_varnames[:fn.fn.__code__.co_argcount]
    b = ctx.bounds
    for cfg in _configs(b.get("BLOCK", [1024]), b.get("windows", ["both"]), b.get("dense mask", [False])):
        a, hyps, grid, layout, C, loads, loops = _setup(cfg)
        paths = kx.execute(fn, {p: a[p] for p in params}, hyps=hyps, grid=grid, loads=loads, overrides=overrides,
                           loops=loops)
        zero = lambda s: z3.Int(s) == 0  # noqa: E731
        for path in paths:
            bad = _check_path(pr, path, layout, C, zero, f"tile_plan [{cfg}]")
            if bad:
                return bad
    return Outcome("proved", solver="z3", detail=f"{pr.n} queries, all unsat")


def _check_path(pr, path, layout, C, zero, tag):
    true = z3.BoolVal(True)
    base = list(path.base)
    if len(path.counts) != 2:
        return Outcome("error", detail=f"{tag}: expected one ghost count per pass, the run bound {len(path.counts)}")
    p = z3.FreshInt("col")
    premises = [("every flagged column is below C", z3.Implies(f, z3.And(p >= 0, p < C))) for f in
                [z3.substitute(c.flag, (c.pos, p)) for c in path.counts]]
    premises.append(("no column is both partial and full",
                     z3.Not(z3.And(*[z3.substitute(c.flag, (c.pos, p)) for c in path.counts]))))
    for what, claim in premises:
        bad = pr.prove(claim, true, base, [p >= 0], f"{tag}: lemma premise: {what}")
        if bad:
            return bad
    formulas = base + [x for acc in path.accesses for x in (acc.off.e, acc.mask.e if acc.mask is not None else true,
                                                            *acc.path)]
    formulas += [x for _, cond, at in path.side for x in (cond, *at)]
    facts = _instances(path.counts, C, formulas)
    linked = _linked(path.counts, base)
    with_facts = lambda at, *claims: list(at) + (facts if _mentions(claims, linked) else [])  # noqa: E731
    stores = {"IDX": [], "NUM": []}
    for acc in path.accesses:
        if acc.kind == "store":
            stores[acc.tensor].append(acc)
    if len(stores["IDX"]) != 2 or len(stores["NUM"]) != 2 or any(not isinstance(s.value, ts.Sym) for s in stores["NUM"]):
        return Outcome("error", detail=f"{tag}: expected one IDX store per pass and two integer NUM stores")
    n_part, n_full = (s.value.e for s in stores["NUM"])
    slots = {id(stores["IDX"][0]): lambda pos: pos < n_part,
             id(stores["IDX"][1]): lambda pos: z3.And(pos >= n_part, pos < n_part + n_full)}
    # the stores first (a control's planted bug is in one: it is found before the rest is proved)
    for acc in sorted(path.accesses, key=lambda a: a.kind != "store"):
        where = f"{tag} {acc.kind} {acc.tensor} at {acc.where}"
        t = layout[acc.tensor]
        mask_on = acc.mask.e if acc.mask is not None else true

        def ask(claim, premise, what=""):
            return pr.prove(claim, premise, base, with_facts(acc.path, claim, premise), where + what)

        bad = ask(acc.mask.safe, true, " (mask)") if acc.mask is not None else None
        if bad is None and t.radix is not None:
            flat = z3.And(acc.off.e >= 0, acc.off.e < _product(t.radix))
            bad = ask(inside(t, acc.off, zero), mask_on)
            if bad is not None and bad.status == "refuted":
                bad = _confirm(ask(flat, mask_on, " (the offset itself)"), bad)
            bad = bad or ask(acc.off.safe, z3.And(mask_on, flat), " (no wrap-around)")
        elif bad is None:
            bad = ask(z3.And(acc.off.safe, inside(t, acc.off, zero)), mask_on)
        if bad is None and id(acc) in slots:
            pos = radix.digits(acc.off.e, t.radix)[-1]
            if not isinstance(acc.value, ts.Sym):
                return Outcome("error", detail=f"{where}: the stored entry is not an integer")
            value = acc.value.e
            bad = ask(z3.And(value >= 0, value < C, slots[id(acc)](pos)), mask_on, " (a column, in its pass's slots)")
        if bad:
            return bad
    for what, cond, at in path.side:
        bad = pr.prove(cond, true, base, with_facts(at, cond), f"{tag} {what}")
        if bad:
            return bad
    last = stores["NUM"][1]
    return pr.prove(z3.And(n_part >= 0, n_full >= 0, n_part + n_full <= C), true, base, list(last.path) + facts,
                    f"{tag} the counts stored: n_partial + n_full <= C")


BOUNDS = {"BLOCK": [1024], "windows": ["both"], "dense mask": [False], "direction": ["KV", "Q"],
          "tile sizes": "16 to 2^20", "B, H, Nq, Nk, tile sizes, strides, window sides, R, C": "symbolic"}
BOUNDS_DEEP = dict(BOUNDS, **{"BLOCK": [1, 2, 16, 1024], "windows": ["none", "both", "causal"],
                              "dense mask": [False, True]})


@obligation("KER-BOUNDS-PLAN", checks=["KER-BOUNDS"], bounds=BOUNDS, deep_bounds=BOUNDS_DEEP, assumptions=ASSUME)
def bounds_plan(ctx):
    """plan.tile_plan: every access inside its tensor, the lists' entries, slots and counts as the attention
    kernels read them, by induction over its column loop."""
    return check_plan(ctx)


def _mutant(old, new):
    return {"tile_plan": kx.mutate(plan.tile_plan, old, new)}


@control("KER-BOUNDS-PLAN/full-without-offset", of="KER-BOUNDS-PLAN",
         bug="block-sparse plan: the full tiles are written from slot 0 (without the n_partial offset), over the "
             "partial ones")
def control_plan_full_without_offset(ctx):
    return check_plan(ctx, _mutant("pos += n_part", "pos += 0"))


@control("KER-BOUNDS-PLAN/slot-one-too-far", of="KER-BOUNDS-PLAN",
         bug="block-sparse plan: a tile's slot is the inclusive prefix count (one too far; past the row for a "
             "full row)")
def control_plan_slot_one_too_far(ctx):
    return check_plan(ctx, _mutant("pos = n + tl.cumsum(flag, 0) - flag", "pos = n + tl.cumsum(flag, 0)"))
