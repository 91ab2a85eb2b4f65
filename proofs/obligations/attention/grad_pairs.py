"""The reverse pass is the exact gradient for every n_q, n_k, d, v (THM-EXACT, second half), in
steps whose size does not grow with the problem. Each step runs the reference's own functions
(``_schedule``, ``_accumulate``, ``_row_stats``, ``_pair_terms``, ``_pair_update``, ``_dot``,
``_dot_step``, ``_score`` of ``flashproof.verified.attention``) on sympy or z3 terms.

Write w = e^{s_ij}, P_i = Σ_{k∈A_i} e^{s_ik}, R_ia = Σ_{k∈A_i} e^{s_ik} V_ka, Φ_i = Σ_a G_ia R_ia/P_i,
Φ = Σ_i Φ_i. The forward half (ATT-TILED-STEP, ATT-TILED-BASE-FINAL, for every n) gives the
statistics the reverse pass reads: Y_ia = R_ia/P_i and e^{m_i}·ℓ_i = P_i. Nothing else about m_i is
used: it is a free symbol (any frozen shift, so tied maxima are included).

* ATT-GRAD-SCHEDULE — the accumulation is a sum over allowed pairs: ``_accumulate`` adds a term
  exactly when the pair's flag holds (z3, symbolic flag); ``_row_visit`` and ``_pair_visit`` run
  with symbolic z3 integers i, j on stand-in containers, and every subscript they make is proved to
  be i or j (a pair reads Q_i, K_j, V_j, G_i, s_ij and writes dQ_i, dK_j, dV_j — for every n_q,
  n_k); ``_gradient_buffers`` allocates (n_q, d), (n_k, d), (n_k, v) (its loops run on symbolic
  z3 Ints); ``_schedule``, run on z3 Ints n_q, n_k, b with each of its loops entered once for an
  arbitrary iteration (``support.range_exec``; ``block_ranges`` inside it likewise), visits
  exactly the pairs of [0, n_q) × [0, n_k), each by one combination of iterations; ``_drive``, the
  loop of ``tiled_backward``, run the same way with recording stand-ins, makes row i's visit and
  then pair (i, j)'s visit with that row, the same buffers and inputs, and neither of its loops
  carries a name between iterations (AST), so one symbolic iteration covers them all. That a
  sequence of in-place additions over pairs visited once each leaves their sum is used as
  mathematics. ATT-GRAD-ROUTING re-runs the whole reverse pass on exact rationals at small
  rectangular shapes (n_q, n_k ≤ 4) as a cross-check.
* ATT-GRAD-SOFTMAX — per pair, with a symbolic row (P_i = w + P_rest, R_ia = w V_ja + R_rest,a for
  the other allowed keys, whatever their number): ``_pair_terms`` gives p_ij = w/P_i and
  γ_ij = p_ij(⟨G_i,V_j⟩ − δ_i), and γ_ij = ∂Φ_i/∂s_ij for every v, by induction on v over the
  code's dot-product step (base: the empty dot is 0 = ∂Φ_i⁽⁰⁾/∂s). A masked pair gets p = γ = 0.
* ATT-GRAD-CHAIN — per pair, the chain-rule terms: ∂s_ij/∂Q_ir = c·K_jr and ∂s_ij/∂K_jr = c·Q_ir
  for every d (induction on d over ``_dot_step``, then ``_score``); ``_pair_update`` adds
  γ_ij·∂s_ij/∂Q_ir to dQ_ir, γ_ij·∂s_ij/∂K_jr to dK_jr and ∂Φ_i/∂V_ja to dV_ja, and nothing for a
  masked pair. The update's coordinate loop reads coordinate r only (checked at d = v = 3).

Together: dQ_ir = Σ_{j∈A_i} (∂Φ_i/∂s_ij)(∂s_ij/∂Q_ir) = ∂Φ/∂Q_ir (s_ij depends on Q only through
Q_i, and a masked s_ij does not enter Φ), dK_jr = Σ_{i: j∈A_i} (∂Φ_i/∂s_ij)(∂s_ij/∂K_jr) = ∂Φ/∂K_jr,
dV_ja = Σ_{i: j∈A_i} ∂Φ_i/∂V_ja = ∂Φ/∂V_ja. The multivariable chain rule and linearity of the
derivative over a finite sum are used as mathematics, not checked. ATT-GRAD (sympy, n, d, v ≤ 3)
re-checks the whole composition on the unrolled code as a cross-check.
"""
from __future__ import annotations

import ast
import inspect
import itertools
import random
import textwrap
from fractions import Fraction
from typing import NamedTuple
from unittest.mock import patch

import sympy as sp
import z3

from flashproof.verified import attention as att
from flashproof.verified.numbers import SympyNum

from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove
from flashproof.proofs.mutants import attention as mutants
from flashproof.proofs.numbers.ufrational import UFRationalNum
from flashproof.proofs.support import range_exec
from flashproof.proofs.support.sympy_gradient import vanishes

ASSUMES = ["A-SOLVER-TRUST"]


def _fail(step: str, expr, solver="sympy") -> Outcome:
    return Outcome("refuted", counterexample={"step": step, "difference": str(sp.simplify(expr))[:200]},
                   detail=f"{step}: difference does not vanish", solver=solver)


# ---------------------------------------------------------------------------------- schedule

def _symbolic_schedule():
    """``_schedule`` shimmed for symbolic runs; ``att.block_ranges`` (read through the module by
    some variants) must be patched to the shimmed ``block_ranges`` around the run."""
    blocks = range_exec.shim(att.block_ranges)
    return range_exec.shim(att._schedule, block_ranges=blocks), blocks


def _schedule_sym(ctx) -> Outcome:
    """``_schedule`` run on z3 Ints n_q, n_k ≥ 0, b ≥ 1, each loop entered once for an arbitrary
    iteration (no loop of it carries state: a ``for`` yielding, and a generator over blocks):
    the visited (i, j) lie in [0, n_q) × [0, n_k), every pair there is visited, and by exactly one
    combination of iterations (once)."""
    n_q, n_k, b = z3.Ints("n_q n_k b")
    sched, blocks = _symbolic_schedule()
    range_exec.clear()
    with patch.object(att, "block_ranges", blocks):
        visits = [(i, j) for i, keys in sched(n_q, n_k, b) for j in keys]
    if len(visits) != 1:
        return Outcome("refuted", counterexample={"symbolic_visits": len(visits)}, solver="z3",
                       detail="_schedule did not run as one symbolic (i, j) iteration")
    (i, j), = visits
    ts = [sc.t for sc in range_exec.SCOPES]
    scope = z3.And(*[c for sc in range_exec.SCOPES for c in sc.conds])
    hyp = [n_q >= 0, n_k >= 0, b >= 1]
    inside = z3.And(0 <= i, i < n_q, 0 <= j, j < n_k)
    out = z3_prove(z3.Implies(scope, inside), ctx, hypotheses=hyp)
    if out.status != "proved":
        return out._replace(detail="_schedule visits a pair outside [0, n_q) × [0, n_k): " + out.detail)
    I, J = z3.Ints("I J")  # completeness: every pair of the rectangle has a visiting iteration,
    # the witness: the row loop at I, every later loop at the iteration whose element is ≤ J nearest
    # (t = (J − start)/step, its start evaluated at the earlier loops' witnesses)
    if len(range_exec.SCOPES) != 3:
        return Outcome("refuted", counterexample={"loops": len(range_exec.SCOPES)}, solver="z3",
                       detail="_schedule: expected a row loop, a block loop and a key loop")
    wit: list = []
    for k, sc in enumerate(range_exec.SCOPES):
        start = z3.substitute(z3.substitute(sc.x, (sc.t, z3.IntVal(0))), *wit) if wit else z3.substitute(sc.x, (sc.t, z3.IntVal(0)))
        step = z3.simplify(z3.substitute(sc.x, (sc.t, z3.IntVal(1))) - z3.substitute(sc.x, (sc.t, z3.IntVal(0))))
        wit.append((sc.t, ((I if k == 0 else J) - start) / step))
    out = z3_prove(z3.Implies(z3.And(0 <= I, I < n_q, 0 <= J, J < n_k),
                              z3.substitute(z3.And(scope, i == I, j == J), *wit)), ctx, hypotheses=hyp)
    if out.status != "proved":
        return out._replace(detail="_schedule misses a pair of [0, n_q) × [0, n_k): " + out.detail)
    ts2 = [z3.Int(f"{t}_other") for t in ts]
    ren = lambda e: z3.substitute(e, *zip(ts, ts2))  # noqa: E731
    out = z3_prove(z3.Implies(z3.And(scope, ren(scope), i == ren(i), j == ren(j)),
                              z3.And(*[t == t2 for t, t2 in zip(ts, ts2)])), ctx, hypotheses=hyp)
    if out.status != "proved":
        return out._replace(detail="_schedule visits a pair twice: " + out.detail)
    return Outcome("proved", solver="z3", detail="_schedule on symbolic n_q, n_k, b visits each pair once")


class _Call(NamedTuple):
    fn: str
    args: tuple


def _driver_sym(ctx) -> Outcome:
    """``_drive`` (the loop of ``tiled_backward``) run with the symbolic ``_schedule`` and recording
    stand-ins for ``_row_visit``/``_pair_visit``: per visited (i, j) it makes row i's visit, then
    pair (i, j)'s visit with that row's statistics, the same buffers and the same inputs; neither
    of its loops carries a name from one iteration to the next (AST), so one symbolic iteration
    of each covers every iteration."""
    from flashproof.proofs.support.kernel_exec import _read_before_write

    n_q, n_k, b = z3.Ints("n_q n_k b")
    sched, blocks = _symbolic_schedule()
    calls: list = []

    def row_visit(*args):
        calls.append(_Call("row", args))
        return ("row-stats", len(calls))

    def pair_visit(*args):
        calls.append(_Call("pair", args))

    tree = ast.parse(textwrap.dedent(inspect.getsource(att._drive)))
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For)]
    carried = sorted(set().union(*[_read_before_write(loop.body) for loop in loops])) if loops else []
    if carried:
        return Outcome("refuted", counterexample={"carried": carried}, solver="z3",
                       detail="_drive's loop carries a name between iterations")
    num, p = object(), att._ScoredInputs(n_q, n_k, None, None, None)
    c, Qc, Kc, Gc, fw, grads = object(), object(), object(), object(), object(), object()
    range_exec.clear()
    with patch.object(att, "block_ranges", blocks):
        range_exec.shim(att._drive, _schedule=sched, _row_visit=row_visit, _pair_visit=pair_visit)(
            num, p, c, Qc, Kc, Gc, fw, grads, b)
    kinds = [k.fn for k in calls]
    if kinds != ["row", "pair"] or len(range_exec.SCOPES) < 2:
        return Outcome("refuted", counterexample={"calls": str(kinds)}, solver="z3",
                       detail="_drive: expected one row visit then one pair visit per symbolic iteration")
    row, pair = calls
    i = range_exec.SCOPES[0].x   # the schedule's row loop is entered first: its element is i
    j = range_exec.SCOPES[-1].x  # and its innermost loop (over one block's keys) last: j
    same = row.args[:-1] == (num, p, fw, Gc) and len(pair.args) == 10 and pair.args[:8] == (num, p, c, Qc, Kc, Gc, grads, ("row-stats", 1))
    if not same:
        return Outcome("refuted", counterexample={"row_args": str(row.args)[:120], "pair_args": str(pair.args)[:160]},
                       solver="z3", detail="_drive passes the wrong inputs, buffers or row statistics")
    pi, pj = pair.args[8], pair.args[9]
    scope = [c for sc in range_exec.SCOPES for c in sc.conds]
    out = z3_prove(z3.And(row.args[-1] == i, pi == i, pj == j), ctx, hypotheses=[n_q >= 0, n_k >= 0, b >= 1, *scope])
    if out.status != "proved":
        return out._replace(detail="_drive's pair visit is not (i, j) of the schedule: " + out.detail)
    return Outcome("proved", solver="z3", detail="_drive wires schedule → row visit → pair visit (symbolic)")


def _buffers_sym(ctx) -> Outcome:
    """``_gradient_buffers`` on z3 Ints n_q, n_k, d, v: its row and column loops run to n_q × d,
    n_k × d and n_k × v (the ranges it builds, in order, each from 0 with step 1)."""
    n_q, n_k, d, v = z3.Ints("n_q n_k d v")
    range_exec.clear()
    range_exec.shim(att._gradient_buffers)(_ZeroNum(), n_q, n_k, d, v)
    got = [(r.start, r.stop, r.step) for r in range_exec.RANGES]
    want = [n_q, d, n_k, d, n_k, v]
    if len(got) != len(want):
        return Outcome("refuted", counterexample={"ranges": str(got)}, solver="z3",
                       detail="_gradient_buffers: expected 6 loops (rows, cols of dq, dk, dv)")
    out = z3_prove(z3.And(*[z3.And(lo == 0, hi == w, st == 1) for (lo, hi, st), w in zip(got, want)]), ctx)
    if out.status != "proved":
        return out._replace(detail="_gradient_buffers: expected dq (n_q, d), dk (n_k, d), dv (n_k, v): " + out.detail)
    return out


class _ZeroNum:
    def zero(self):
        return 0


def _accumulate_lemma(ctx) -> Outcome:
    """``_accumulate`` with a symbolic flag: acc + term when allowed, acc when masked."""
    from flashproof.verified.expdomain import Z3ExpNum

    f = z3.Bool("allowed")
    acc, term = z3.Reals("acc term")
    new = att._accumulate(Z3ExpNum(), f, acc, term)
    return z3_prove(z3.And(z3.Implies(f, new == acc + term), z3.Implies(z3.Not(f), new == acc)), ctx)


def _masks(n_q, n_k, rng):
    full = None
    band = [{j for j in range(n_k) if j <= i + n_k - n_q} for i in range(n_q)]  # bottom-right causal
    rand = [{j for j in range(n_k) if rng.random() < 0.5} for _ in range(n_q)]
    rand[0] = set()  # one empty (padded) row
    return [("full", full), ("causal", band), ("random+empty", rand)]


def _routing_case(n_q, n_k, d, v, b, name, allowed, rng):
    N = UFRationalNum()
    rat = lambda: Fraction(rng.randint(-6, 6), rng.randint(1, 3))  # noqa: E731
    mk = lambda r, c: [[rat() for _ in range(c)] for _ in range(r)]  # noqa: E731
    Q, K, V, G, c = mk(n_q, d), mk(n_k, d), mk(n_k, v), mk(n_q, v), Fraction(1, 2)
    case = {"n_q": n_q, "n_k": n_k, "d": d, "v": v, "b": b, "mask": name}
    fw = att.tiled_forward(Q, K, V, scale=c, block=b, allowed=allowed, num=N, empty_rows="zero")
    try:
        gr = att.tiled_backward(Q, K, V, G, fw, scale=c, block=b, allowed=allowed, num=N, empty_rows="zero")
    except IndexError as e:  # valid inputs: a crash is a wrong reverse pass
        return dict(case, error=f"IndexError: {e}")
    shapes = [(len(M), len(M[0])) for M in gr]
    if shapes != [(n_q, d), (n_k, d), (n_k, v)]:
        return dict(case, shapes=str(shapes), expected=str([(n_q, d), (n_k, d), (n_k, v)]))
    # the sum over allowed pairs of each pair's own update (from zero), computed pair by pair
    flag = (lambda i, j: True) if allowed is None else (lambda i, j: j in allowed[i])
    want = att.Gradients(*([[Fraction(0)] * cols for _ in range(rows)] for rows, cols in ((n_q, d), (n_k, d), (n_k, v))))
    for i in range(n_q):
        ne = any(flag(i, j) for j in range(n_k))
        row = att._row_stats(N, ne, fw.m[i], fw.l[i], G[i], fw.out[i])
        for j in range(n_k):
            if not flag(i, j):
                continue
            t = att._pair_terms(N, att._score(N, c, Q[i], K[j]), True, row, G[i], V[j])
            inc = att._gradient_buffers(N, 1, 1, d, v)
            att._pair_update(N, True, t, c, Q[i], K[j], G[i], inc.dq[0], inc.dk[0], inc.dv[0])
            for acc, rows_inc in ((want.dq[i], inc.dq[0]), (want.dk[j], inc.dk[0]), (want.dv[j], inc.dv[0])):
                for r, x in enumerate(rows_inc):
                    acc[r] += x
    for name_g, got, exp in zip(("dq", "dk", "dv"), gr, want):
        for r, (gr_row, ex_row) in enumerate(zip(got, exp)):
            if list(gr_row) != ex_row:
                return dict(case, entry=f"{name_g}[{r}]", received=str(gr_row)[:80], expected=str(ex_row)[:80])
    return None


def _routing(n_max: int):
    rng = random.Random(15)
    k = 0
    for n_q, n_k in itertools.product(range(1, n_max + 1), repeat=2):
        for (d, v), b in itertools.product(((1, 2), (2, 1)), sorted({1, 2, n_k + 1})):
            for name, allowed in _masks(n_q, n_k, rng):
                bad = _routing_case(n_q, n_k, d, v, b, name, allowed, rng)
                k += 1
                if bad is not None:
                    return bad, k
    return None, k


class _Indexed:
    """A stand-in container: records every subscript (name, index) in ``log`` and returns a fresh
    z3 row of ``width`` reals (or one real when width is None) for it."""

    def __init__(self, name: str, log: list, width: int | None):
        self.name, self.log, self.width = name, log, width

    def __getitem__(self, k):
        self.log.append((self.name, k))
        tag = f"{self.name}{len(self.log)}"
        return z3.Real(tag) if self.width is None else [z3.Real(f"{tag}_{r}") for r in range(self.width)]


#: the reads and writes each visit may make: container -> which symbolic index each subscript must be
ROW_ACCESS = {"flag": ("i", "key"), "m": ("i",), "l": ("i",), "G": ("i",), "Y": ("i",)}
PAIR_ACCESS = {"flag": ("i", "j"), "score": ("i", "j"), "Q": ("i",), "K": ("j",), "V": ("j",), "G": ("i",),
               "dQ": ("i",), "dK": ("j",), "dV": ("j",)}
PAIR_MUST = {"Q", "K", "V", "G", "score", "flag", "dQ", "dK", "dV"}  # a pair reads or writes each of these


def _index_discipline(ctx) -> Outcome:
    """``_row_visit`` and ``_pair_visit`` with symbolic (z3 Int) i, j: every subscript they make is
    provably i or j as ``ROW_ACCESS`` / ``PAIR_ACCESS`` say (so for every n_q, n_k, a pair reads
    Q_i, K_j, V_j, G_i and writes dQ_i, dK_j, dV_j, never another row)."""
    from flashproof.verified.expdomain import Z3ExpNum

    N = Z3ExpNum()
    i, j = z3.Ints("i j")
    d, v, n_k = 2, 2, 2
    log: list = []

    def rec2(name):
        def f(a, b):
            log.append((name, (a, b)))
            return z3.Bool(f"{name}{len(log)}") if name == "flag" else z3.Real(f"{name}{len(log)}")
        return f

    p = att._ScoredInputs(None, n_k, rec2("score"), _Indexed("V", log, v), rec2("flag"))
    fw = att.TiledForward(_Indexed("Y", log, v), _Indexed("m", log, None), _Indexed("l", log, None), None)
    Qc, Kc, Gc = _Indexed("Q", log, d), _Indexed("K", log, d), _Indexed("G", log, v)
    grads = att.Gradients(_Indexed("dQ", log, d), _Indexed("dK", log, d), _Indexed("dV", log, v))
    row = att._row_visit(N, p, fw, Gc, i)
    row_log, log[:] = list(log), []
    att._pair_visit(N, p, z3.Real("c"), Qc, Kc, Gc, grads, row, i, j)
    pair_log = list(log)
    sym = {"i": i, "j": j}
    for where, entries, allowed in (("row", row_log, ROW_ACCESS), ("pair", pair_log, PAIR_ACCESS)):
        keys_seen = set()
        for name, k in entries:
            if name not in allowed:
                return Outcome("refuted", counterexample={"visit": where, "reads": name}, solver="z3",
                               detail=f"_{where}_visit touches {name}, which it should not")
            ks = k if isinstance(k, tuple) else (k,)
            for want, got in zip(allowed[name], ks):
                if want == "key":
                    keys_seen.add(got)
                    continue
                out = z3_prove(sym[want] == got, ctx)
                if out.status != "proved":
                    return Outcome("refuted", counterexample={"visit": where, "container": name, "expected_index": want,
                                                              "received_index": str(got), **(out.counterexample or {})},
                                   solver="z3", detail=f"_{where}_visit subscripts {name} with {got}, expected {want}")
        if where == "row" and keys_seen != set(range(n_k)):
            return Outcome("refuted", counterexample={"visit": "row", "flag_keys": sorted(map(str, keys_seen))},
                           solver="z3", detail="the row's nonempty test does not read every key's flag once")
    missing = PAIR_MUST - {name for name, _ in pair_log}
    if missing:
        return Outcome("refuted", counterexample={"visit": "pair", "never_touched": sorted(missing)}, solver="z3",
                       detail="_pair_visit skips a read or a write")
    return Outcome("proved", solver="z3", detail="index discipline for symbolic i, j")


@obligation("ATT-GRAD-SCHEDULE", checks=["ALG-TILED", "THM-EXACT"], bounds={}, assumptions=ASSUMES, solver="z3",
            scope="unbounded")
def grad_schedule(ctx):
    """The reverse pass's accumulation is the sum over allowed pairs of each pair's update, with dK, dV of n_k rows."""
    steps = (("_accumulate", _accumulate_lemma), ("visits", _index_discipline), ("_gradient_buffers", _buffers_sym),
             ("_schedule", _schedule_sym), ("_drive", _driver_sym))
    for name, step in steps:
        out = step(ctx)
        if out.status != "proved":
            return out if out.detail.startswith(name) else out._replace(detail=f"{name}: {out.detail}")
    return Outcome("proved", solver="z3",
                   detail="_accumulate (symbolic flag); row/pair visits index i, j only; buffers, _schedule and "
                          "_drive run on symbolic n_q, n_k, d, v, b")


@obligation("ATT-GRAD-ROUTING", checks=["THM-EXACT"],
            bounds={"routing": "n_q, n_k ≤ 4 both ways, b ∈ {1, 2, n_k+1}"},
            deep_bounds={"routing": "n_q, n_k ≤ 6 both ways, b ∈ {1, 2, n_k+1}"},
            assumptions=ASSUMES, solver="exact", scope="bounded", role="cross-check")
def grad_routing(ctx):
    """Cross-check: the whole tiled_backward, run on exact rationals, is the sum of its pairs' updates (small shapes)."""
    bad, k = _routing(6 if ctx.deep else 4)
    if bad is not None:
        return Outcome("refuted", counterexample=bad, solver="exact",
                       detail="tiled_backward is not the sum of its pairs' updates")
    return Outcome("proved", solver="exact", detail=f"driver routing + shapes on {k} rectangular cases")


@control("ATT-GRAD-ROUTING/keys-up-to-nq", of="ATT-GRAD-ROUTING", bug="the reverse pass loops keys up to n_q instead of n_k")
def grad_routing_keys(ctx):
    with patch.object(att, "_schedule", mutants.schedule_keys_up_to_nq):
        return grad_routing(ctx)


@control("ATT-GRAD-SCHEDULE/drive-swaps-pair", of="ATT-GRAD-SCHEDULE",
         bug="the reverse pass's driver visits pair (j, i) instead of (i, j)")
def grad_schedule_drive_swapped(ctx):
    with patch.object(att, "_drive", mutants.drive_pair_swapped):
        return grad_schedule(ctx)


@control("ATT-GRAD-SCHEDULE/dk-nq-rows", of="ATT-GRAD-SCHEDULE", bug="dK is allocated with n_q rows instead of n_k")
def grad_schedule_dk_rows(ctx):
    with patch.object(att, "_gradient_buffers", mutants.gradient_buffers_dk_nq_rows):
        return grad_schedule(ctx)


@control("ATT-GRAD-SCHEDULE/keys-up-to-nq", of="ATT-GRAD-SCHEDULE", bug="the reverse pass loops keys up to n_q instead of n_k")
def grad_schedule_keys(ctx):
    with patch.object(att, "_schedule", mutants.schedule_keys_up_to_nq):
        return grad_schedule(ctx)


@control("ATT-GRAD-SCHEDULE/accumulate-ignores-mask", of="ATT-GRAD-SCHEDULE",
         bug="the accumulation step adds a masked pair's term too")
def grad_schedule_accumulate(ctx):
    with patch.object(att, "_accumulate", mutants.accumulate_ignores_mask):
        return grad_schedule(ctx)


# ---------------------------------------------------------------------------------- softmax Jacobian

def _row(N):
    """A symbolic row around one allowed pair: score s, frozen shift m (free), the other allowed
    keys' weight total P_rest ≥ 0; w = e^s, P = w + P_rest, and ℓ = P·e^{−m} (the forward's m, ℓ)."""
    s, m = sp.symbols("s m", real=True)
    p_rest = sp.Symbol("P_rest", nonnegative=True)
    w = sp.exp(s)
    P = w + p_rest
    return s, m, w, P, P * sp.exp(-m)


def _softmax(ctx) -> Outcome:
    N = SympyNum()
    s, m, w, P, l = _row(N)
    DP, DL = sp.symbols("DP DL", real=True)  # the code's ⟨G_i, V_j⟩ and δ_i (any v)
    row = att._row_stats(N, True, m, l, [sp.Integer(1)], [DL])
    if not vanishes(row.delta - DL):
        return _fail("δ_i is the dot of G_i and Y_i", row.delta - DL)
    t = att._pair_terms(N, s, True, row, [sp.Integer(1)], [DP])
    if not vanishes(t.p - w / P):
        return _fail("p_ij = e^{s−m}/ℓ = e^s/P (frozen m, ℓ)", t.p - w / P)
    if not vanishes(t.gamma - w / P * (DP - DL)):
        return _fail("γ_ij = p_ij(⟨G_i,V_j⟩ − δ_i)", t.gamma - w / P * (DP - DL))
    empty_row = att._row_stats(N, False, m, l, [sp.Integer(1)], [DL])  # a row with no allowed key
    for stats in (row, empty_row):
        masked = att._pair_terms(N, s, False, stats, [sp.Integer(1)], [DP])
        if masked.p != 0 or masked.gamma != 0:
            return _fail("a masked pair has p = γ = 0", masked.p + masked.gamma)
    # induction on v: Φ⁽ᵏ⁾ = Σ_{a<k} G_a R_a/P; IH ∂Φ⁽ᵏ⁾/∂s = (w/P)(DP_k − DL_k), DP_k, DL_k the code's partial dots
    if att._dot(N, [], []) != 0:
        return _fail("the empty dot is 0 (= ∂Φ⁽⁰⁾/∂s)", att._dot(N, [], []))
    F = sp.Function("Phi_k")(s)
    DPk, DLk, Gk, Vk, Rk = sp.symbols("DP_k DL_k G_k V_jk R_rest_k", real=True)
    R = w * Vk + Rk                                    # R_ik = e^{s_ij} V_jk + (the other allowed keys)
    dphi = sp.diff(F + Gk * R / P, s).subs(sp.Derivative(F, s), w / P * (DPk - DLk))
    step = w / P * (att._dot_step(N, DPk, Gk, Vk) - att._dot_step(N, DLk, Gk, R / P))  # Y_k = R_k/P
    if not vanishes(dphi - step):
        return _fail("induction step on v: ∂Φ⁽ᵏ⁺¹⁾/∂s = (w/P)(DP_{k+1} − DL_{k+1})", dphi - step)
    return Outcome("proved", solver="sympy", detail="frozen p, γ per pair with a symbolic row; ∂Φ_i/∂s_ij by induction on v")


@obligation("ATT-GRAD-SOFTMAX", checks=["THM-EXACT"], bounds={}, assumptions=ASSUMES, solver="sympy",
            scope="unbounded", why_unbounded="the row's other keys are the symbols P_rest, R_rest (any number); v by induction over the dot step")
def grad_softmax(ctx):
    """Per pair, with a symbolic row and frozen m, ℓ (ties included): γ_ij = ∂Φ_i/∂s_ij, for every n and v."""
    return _softmax(ctx)


@control("ATT-GRAD-SOFTMAX/delta-from-values", of="ATT-GRAD-SOFTMAX",
         bug="δ is taken as ⟨G_i, V_j⟩ (the value row) instead of ⟨G_i, Y_i⟩")
def grad_softmax_delta(ctx):
    with patch.object(att, "_pair_terms", mutants.pair_terms_delta_from_values):
        return grad_softmax(ctx)


# ---------------------------------------------------------------------------------- chain rule per pair

def _dot_derivative(N) -> Outcome | None:
    """∂⟨x, y⟩/∂x_r = y_r and ∂⟨x, y⟩/∂y_r = x_r for every length, by induction over ``_dot_step``."""
    x, y, x2, y2 = sp.symbols("x y x2 y2", real=True)
    A = sp.Function("A")
    checks = [
        ("d/dx of the step that reads x", sp.diff(att._dot_step(N, A(x), x, y), x) - (sp.diff(A(x), x) + y)),
        ("d/dx of a step that does not", sp.diff(att._dot_step(N, A(x), x2, y2), x) - sp.diff(A(x), x)),
        ("d/dy of the step that reads y", sp.diff(att._dot_step(N, A(y), x, y), y) - (sp.diff(A(y), y) + x)),
        ("d/dy of a step that does not", sp.diff(att._dot_step(N, A(y), x2, y2), y) - sp.diff(A(y), y)),
    ]
    for name, diff in checks:
        if sp.simplify(diff) != 0:
            return _fail(name, diff)
    c, D = sp.symbols("c D", real=True)
    s = att._score(N, c, [sp.Integer(1)], [D])   # s = c·(the dot), the dot value D abstract
    if sp.simplify(sp.diff(s, D) - c) != 0:
        return _fail("∂s/∂⟨Q_i,K_j⟩ = c", sp.diff(s, D) - c)
    return None


def _chain(ctx) -> Outcome:
    N = SympyNum()
    bad = _dot_derivative(N)
    if bad is not None:
        return bad
    s, m, w, P, l = _row(N)
    DP, DL, c = sp.symbols("DP DL c", real=True)
    dphi_ds = w / P * (DP - DL)                       # ATT-GRAD-SOFTMAX
    row = att._row_stats(N, True, m, l, [sp.Integer(1)], [DL])
    t = att._pair_terms(N, s, True, row, [sp.Integer(1)], [DP])
    for width in (1, 3):                              # one generic coordinate; then three, read independently
        q, k = sp.symbols(f"Q0:{width}", real=True), sp.symbols(f"K0:{width}", real=True)
        g, vj, rr = (sp.symbols(f"{p}0:{width}", real=True) for p in ("G", "V", "R_rest"))
        acc = [list(sp.symbols(f"{p}0:{width}", real=True)) for p in ("accQ", "accK", "accV")]
        new = [list(a) for a in acc]
        att._pair_update(N, True, t, c, list(q), list(k), list(g), *new)
        phi_i = sum(g[a] * (w * vj[a] + rr[a]) / P for a in range(width))   # Φ_i's dependence on V_j
        for r in range(width):
            want = [("dQ", dphi_ds * c * k[r]), ("dK", dphi_ds * c * q[r]), ("dV", sp.diff(phi_i, vj[r]))]
            for (name, target), before, after in zip(want, acc, new):
                if not vanishes(after[r] - before[r] - target):
                    return _fail(f"{name} term of coordinate {r} (width {width})", after[r] - before[r] - target)
        masked = [list(a) for a in acc]
        att._pair_update(N, False, t, c, list(q), list(k), list(g), *masked)
        if masked != acc:
            return _fail("a masked pair leaves dQ, dK, dV unchanged", sp.Matrix(masked) - sp.Matrix(acc))
    return Outcome("proved", solver="sympy", detail="∂s/∂Q, ∂s/∂K by induction on d; per-pair dQ, dK, dV terms")


@obligation("ATT-GRAD-CHAIN", checks=["THM-EXACT"], bounds={}, assumptions=ASSUMES, solver="sympy",
            scope="unbounded", why_unbounded="d by induction over the dot step; the update's coordinate loop reads coordinate r only")
def grad_chain(ctx):
    """Per pair: the update adds γ·∂s/∂Q_i to dQ_i, γ·∂s/∂K_j to dK_j and ∂Φ_i/∂V_j to dV_j, for every d and v."""
    return _chain(ctx)


@control("ATT-GRAD-CHAIN/dk-unscaled", of="ATT-GRAD-CHAIN", bug="dK accumulates γ·Q_i without the scale c")
def grad_chain_dk(ctx):
    with patch.object(att, "_pair_update", mutants.pair_update_dk_unscaled):
        return grad_chain(ctx)


@control("ATT-GRAD-CHAIN/dv-unnormalized", of="ATT-GRAD-CHAIN", bug="dV accumulates e^{s−m}·G_i without the 1/ℓ")
def grad_chain_dv(ctx):
    with patch.object(att, "_pair_terms", mutants.pair_terms_dv_unnormalized):
        return grad_chain(ctx)


@control("ATT-GRAD-SCHEDULE/dk-row-i", of="ATT-GRAD-SCHEDULE", bug="the pair's dK update goes to row i instead of row j")
def grad_schedule_dk_row_i(ctx):
    with patch.object(att, "_pair_visit", mutants.pair_visit_dk_row_i):
        return grad_schedule(ctx)
