"""KER-TILES: the Triton kernels' tile classification visits exactly the allowed pairs, for every shape.

Executed symbolically (``kernel_exec``: the functions' own Python bodies, ``tl`` bound to z3 integer
semantics) with symbolic lengths, window sides, block offset and varlen offsets, and every BLOCK_M ×
BLOCK_N of the host's autotuning tables:

* ``fwd.key_range`` (forward and dQ) and ``bwd.query_range`` (dK/dV) give the three stages
  [a, b) masked, [b, c) unmasked, [c, hi) masked that the kernels walk with
  ``range(a, b, BLOCK)``, ``range(b, c, BLOCK)``, ``range(c, hi, BLOCK)``. For a real row (key) of the
  program's block and any key (row): an allowed pair lies in exactly one visited block, and every pair
  of a block of the unmasked stage is allowed. The three loops are the kernels' code read as stated
  here (their bounds come from the executed function); nothing else of the loop is modelled.
* ``fwd.allowed_pairs``, the per-pair predicate of the masked stages, is exactly the API's rule
  (a dense mask can only remove pairs).
* ``plan._classes``, the block-sparse plan's tile classes: a tile holding an allowed pair is reached
  (listed), and a full tile (walked without the predicate) holds only allowed pairs. Tile sizes are
  symbolic here (any bq, bk ≥ 16).
* ``fwd.seq_bounds``: a program's (start, length) are its sequence's rows in ``cu_seqlens``.

Every integer operation is also checked not to wrap around in its Triton width (i32 unless an operand
is i64), under the lengths and window the host passes (``host._index_args``).
"""
from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import z3

from flashproof.kernels.attention.triton import bwd, fwd, host, plan

from flashproof.proofs.engine.core import Outcome, control, obligation, z3_prove
from flashproof.proofs.mutants import kernels as mutants
from flashproof.proofs.support import kernel_exec as kx, triton_sym as ts
from flashproof.proofs.support.kernel_spec import FLAGS, INT32_MAX, allowed, count, visited

ASSUME = ["A-TRITON-INT", "A-TRITON-DIV", "A-KER-HOST-LIMITS", "A-SOLVER-TRUST"]


def block_sizes():
    """(BLOCK_M, BLOCK_N) pairs of every autotuning table row the host may launch (host.TUNED)."""
    return sorted({(m, n) for _, shapes, _, _ in host.TUNED.values() for m, n, _, _ in shapes})


class Window(NamedTuple):
    """One admitted path of the host's window arguments: its hypotheses, the call's lengths Nq, Nk,
    the kernel arguments left, right (Syms) and the user's window sides (z3 Ints, the API's rule)."""

    hyps: list
    Nq: object
    Nk: object
    left: object
    right: object
    user_left: object
    user_right: object


def host_windows(has_left, has_right, overrides=None):
    """Every path of ``host._index_args`` (run symbolically) that admits the call: yields (hyps, Nq, Nk,
    left, right), where Nq, Nk are the call's (packed) lengths, any size, and the window sides any
    int ≥ 0 the API accepts; left, right are the kernel arguments the host passes (i32 or i64 by value)."""
    Nq, Nk, wl, wr = (ts.Sym(z3.Int(n), True) for n in ("Nq", "Nk", "window_left", "window_right"))
    window = (wl if has_left else None, wr if has_right else None)
    hyps = [Nq.e >= 0, Nk.e >= 0, wl.e >= 0, wr.e >= 0]
    for path in kx.execute(host._index_args, dict(window=window, Nq=Nq, Nk=Nk), hyps=hyps, overrides=overrides,
                           rejects=(ValueError,)):
        if isinstance(path.result, kx.Rejected):
            continue
        left, right = (ts.Sym(ts.Sym.lift(x).e, z3.Or(ts.Sym.lift(x).e > INT32_MAX, ts.Sym.lift(x).e < -INT32_MAX - 1))
                       for x in path.result)
        yield Window(list(path.hyps), Nq.e, Nk.e, left, right, wl.e, wr.e)


def kernel_windows():
    """The window arguments as the kernels receive them (what KER-TILES-HOST proves of the host):
    the call's lengths Nq, Nk ≤ host.MAX_LEN and sides 0 ≤ left, right ≤ max(Nq, Nk). One Window, whose
    user sides are the kernel's (the host obligation shows the clamp allows the same pairs)."""
    Nq, Nk = z3.Ints("Nq Nk")
    left, right = ts.arg("left"), ts.arg("right")
    cap = z3.If(Nq >= Nk, Nq, Nk)
    hyps = [Nq >= 0, Nk >= 0, Nq <= host.MAX_LEN, Nk <= host.MAX_LEN, left.e >= 0, right.e >= 0, left.e <= cap,
            right.e <= cap]
    yield Window(hyps, Nq, Nk, left, right, left.e, right.e)


def _lazy(gen):
    """``check_*`` as written yields (configuration, outcome) pairs; the check is their ``_combine``, which
    reads them only up to the first non-proved one (a control stops at its refutation; an obligation
    that holds runs every configuration)."""
    @functools.wraps(gen)
    def check(*a, **k):
        return _combine(gen(*a, **k))
    return check


@_lazy
def check_host(ctx, overrides=None):
    """host._index_args, run symbolically on any lengths and window sides the API accepts: on every
    path that admits the call, the lengths are ≤ MAX_LEN, each side is 0 when absent and within
    [0, max(Nq, Nk)], and the clamped window allows exactly the user's pairs in every sequence."""
    for has_left, has_right in FLAGS:
        for w in host_windows(has_left, has_right, overrides):
            q_len, k_len, i, j = z3.Ints("q_len k_len i j")
            cap = z3.If(w.Nq >= w.Nk, w.Nq, w.Nk)
            side = [z3.And(x.e >= 0, x.e <= cap) if has else x.e == 0
                    for x, has in ((w.left, has_left), (w.right, has_right))]
            same = (allowed(i, j, q_len, k_len, w.user_left, w.user_right, has_left, has_right)
                    == allowed(i, j, q_len, k_len, w.left.e, w.right.e, has_left, has_right))
            claim = z3.And(w.Nq <= host.MAX_LEN, w.Nk <= host.MAX_LEN, *side, same)
            hyps = w.hyps + [q_len >= 0, q_len <= w.Nq, k_len >= 0, k_len <= w.Nk]
            yield (f"_index_args HAS_LEFT={has_left} HAS_RIGHT={has_right}",
                   z3_prove(claim, ctx, hypotheses=hyps))


def _lengths(q_len, k_len, Nq, Nk):
    """A program's sequence: its lengths are at most the call's (packed) lengths."""
    return [q_len >= 0, q_len <= Nq, k_len >= 0, k_len <= Nk]


def _seq(name):
    """A sequence length or offset the kernel derived in i32 (from an i32 argument or an int32 table)."""
    return ts.Sym(z3.Int(name), False)


def _all_safe(path, values):
    return z3.And(*[c for _, c, _ in path.side], *[v.safe for v in values if isinstance(v, ts.Sym)])


def _combine(results):
    """The first non-proved outcome (with the configuration that produced it), else proved."""
    n = 0
    for where, out in results:
        n += 1
        if out.status != "proved":
            cex = dict(out.counterexample or {}, config=where)
            return out._replace(counterexample=cex, detail=f"{where}: {out.detail}")
    return Outcome("proved", solver="z3", detail=f"{n} queries (configurations x paths), all unsat")


def _stage_claim(lo_real, hi_real, other, stages, limit, block, pair):
    """Real index x of the program's block (lo_real ≤ x < hi_real, x < limit); other index y walked
    in ``stages`` [(start, stop, masked)] of width ``block``; ``pair(x, y)``: the API's rule."""
    x = z3.Int("x")
    real = z3.And(x >= lo_real, x < hi_real, x < limit)
    visits = [visited(s, e, block, other) for s, e, _ in stages]
    exactly_once = z3.Implies(z3.And(real, pair(x, other)), count(visits) == 1)
    unmasked_ok = z3.And(*[z3.Implies(z3.And(real, v), pair(x, other))
                           for v, (_, _, masked) in zip(visits, stages) if not masked])
    return z3.And(exactly_once, unmasked_ok)


@_lazy
def check_ranges(ctx, which, overrides=None):
    """which = "fwd" (key_range: forward and dQ) or "bwd" (query_range: dK/dV)."""
    fn = fwd.key_range if which == "fwd" else bwd.query_range
    for (bm, bn), (has_left, has_right), all_masked in itertools.product(block_sizes(), FLAGS, (False, True)):
        for host_hyps, Nq, Nk, left, right, ul, ur in kernel_windows():
            q_len, k_len, m0 = _seq("q_len"), _seq("k_len"), _seq("blk0")
            own, walk = (bm, bn) if which == "fwd" else (bn, bm)
            limit = q_len.e if which == "fwd" else k_len.e
            hyps = host_hyps + _lengths(q_len.e, k_len.e, Nq, Nk) + [m0.e >= 0, m0.e < limit, m0.e % own == 0]
            args = dict(q_len=q_len, k_len=k_len, left=left, right=right, BLOCK_M=bm, BLOCK_N=bn,
                        HAS_LEFT=has_left, HAS_RIGHT=has_right, ALL_MASKED=all_masked)
            args["m0" if which == "fwd" else "n0"] = m0
            y = z3.Int("y")
            for path in kx.execute(fn, args, hyps=hyps, overrides=overrides):
                a, b, c, hi = path.result
                stages = [(a.e, b.e, True), (b.e, c.e, False), (c.e, hi.e, True)]
                if which == "fwd":
                    def pair(x, j):
                        return allowed(x, j, q_len.e, k_len.e, ul, ur, has_left, has_right)
                else:
                    def pair(x, i):
                        return allowed(i, x, q_len.e, k_len.e, ul, ur, has_left, has_right)
                claim = z3.And(_all_safe(path, path.result),
                               _stage_claim(m0.e, m0.e + own, y, stages, limit, walk, pair))
                where = f"{fn.fn.__name__} BLOCK_M={bm} BLOCK_N={bn} HAS_LEFT={has_left} " \
                        f"HAS_RIGHT={has_right} ALL_MASKED={all_masked}"
                yield (where, z3_prove(claim, ctx, hypotheses=list(path.hyps) + [y >= 0]))


@_lazy
def check_pairs(ctx, overrides=None):
    for (has_left, has_right), has_mask in itertools.product(FLAGS, (False, True)):
        for host_hyps, Nq, Nk, left, right, ul, ur in kernel_windows():
            q_len, k_len, i, j = _seq("q_len"), _seq("k_len"), _seq("i"), _seq("j")
            diag = k_len - q_len
            args = dict(qi=i, kj=j, q_len=q_len, k_len=k_len, diag=diag, left=left, right=right,
                        mask_base=ts.Ptr("MASK"), smi=ts.arg("smi", stride=True), smj=ts.arg("smj", stride=True),
                        q_start=_seq("q_start"), HAS_LEFT=has_left, HAS_RIGHT=has_right, HAS_MASK=has_mask)
            hyps = host_hyps + _lengths(q_len.e, k_len.e, Nq, Nk) + [i.e >= 0, i.e <= Nq + 256, j.e >= 0,
                                                                     j.e <= Nk + 256]  # lanes of a last block
            for path in kx.execute(fwd.allowed_pairs, args, hyps=hyps, overrides=overrides):
                ok = path.result
                spec = allowed(i.e, j.e, q_len.e, k_len.e, ul, ur, has_left, has_right)
                same = (ok.e == spec) if ok.exact else z3.Implies(ok.e, spec)
                exact_when_no_mask = ok.exact or has_mask
                claim = z3.And(_all_safe(path, [diag]), ok.safe, same, z3.BoolVal(exact_when_no_mask))
                where = f"allowed_pairs HAS_LEFT={has_left} HAS_RIGHT={has_right} HAS_MASK={has_mask}"
                yield (where, z3_prove(claim, ctx, hypotheses=list(path.hyps)))


@_lazy
def check_plan(ctx, overrides=None):
    for (has_left, has_right), has_dense in itertools.product(FLAGS, (False, True)):
        for host_hyps, nq, nk, left, right, ul, ur in kernel_windows():
            Nq, Nk = _seq("Nq"), _seq("Nk")  # the kernel's i32 arguments (admitted lengths fit)
            qi, kj, bq, bk = _seq("qi"), _seq("kj"), ts.arg("bq"), ts.arg("bk")
            hyps = host_hyps + [Nq.e == nq, Nk.e == nk] + [
                qi.e >= 0, kj.e >= 0, bq.e >= 16, bk.e >= 16, bq.e <= 2 ** 20, bk.e <= 2 ** 20,
                qi.e * bq.e < Nq.e, kj.e * bk.e < Nk.e]  # the tile grid is cdiv(N, block) wide
            args = dict(qi=qi, kj=kj, Nq=Nq, Nk=Nk, bq=bq, bk=bk, left=left, right=right, HAS_LEFT=has_left,
                        HAS_RIGHT=has_right, HAS_DENSE=has_dense)
            u, w = z3.Ints("u w")
            for path in kx.execute(plan._classes, args, hyps=hyps, overrides=overrides):
                reach, full = path.result
                i, j = qi.e * bq.e + u, kj.e * bk.e + w
                inside = z3.And(u >= 0, u < bq.e, w >= 0, w < bk.e)
                pair = allowed(i, j, Nq.e, Nk.e, ul, ur, has_left, has_right)
                listed = z3.Implies(z3.And(inside, pair), reach.e)
                only_allowed = z3.Implies(z3.And(inside, full.e), z3.And(pair, z3.BoolVal(not has_dense)))
                claim = z3.And(_all_safe(path, []), reach.safe, full.safe, z3.BoolVal(reach.exact and full.exact),
                               listed, only_allowed)
                where = f"_classes HAS_LEFT={has_left} HAS_RIGHT={has_right} HAS_DENSE={has_dense}"
                yield (where, z3_prove(claim, ctx, hypotheses=list(path.hyps)))


def _cu_loads(n_seq, total_q, total_k):
    """Loads from CU_Q / CU_K: entries b and b + 1 of a cu_seqlens table the host validated
    (0 = cu[0] ≤ … ≤ cu[S] = total)."""
    made = {}

    def model(table, total):
        def load(off, run):
            b = z3.Int("b")
            for k in (0, 1):
                if z3.is_true(z3.simplify(off.e == b + k)) or z3.is_true(z3.simplify(off.e - b - k == 0)):
                    name = f"{table}_{k}"
                    if name not in made:
                        made[name] = z3.Int(name)
                    lo, hi = made.setdefault(f"{table}_0", z3.Int(f"{table}_0")), \
                        made.setdefault(f"{table}_1", z3.Int(f"{table}_1"))
                    run.base += [lo >= 0, lo <= hi, hi <= total]
                    return ts.Sym(made[name], False)
            raise kx.Unsupported(f"a load from {table} at an offset other than b, b + 1")
        return load
    return {"CU_Q": model("cu_q", total_q), "CU_K": model("cu_k", total_k)}, made


@_lazy
def check_seq_bounds(ctx, overrides=None):
    for varlen in (False, True):
        Nq, Nk, b = _seq("Nq"), _seq("Nk"), _seq("b")
        loads, cu = _cu_loads(None, Nq.e, Nk.e)
        hyps = [Nq.e >= 1, Nq.e <= host.MAX_LEN, Nk.e >= 0, Nk.e <= host.MAX_LEN, b.e >= 0]
        args = dict(CU_Q=ts.Ptr("CU_Q"), CU_K=ts.Ptr("CU_K"), b=b, Nq=Nq, Nk=Nk, IS_VARLEN=varlen)
        for path in kx.execute(fwd.seq_bounds, args, hyps=hyps, loads=loads, overrides=overrides):
            q_start, q_len, k_start, k_len, bb = path.result
            if varlen:
                want = [cu["cu_q_0"], cu["cu_q_1"] - cu["cu_q_0"], cu["cu_k_0"], cu["cu_k_1"] - cu["cu_k_0"], 0]
            else:
                want = [0, Nq.e, 0, Nk.e, b.e]
            got = [q_start, q_len, k_start, k_len, bb]
            claim = z3.And(_all_safe(path, got), *[g.e == w for g, w in zip(got, want)])
            yield (f"seq_bounds IS_VARLEN={varlen}", z3_prove(claim, ctx, hypotheses=list(path.hyps)))


BOUNDS = {"BLOCK_M x BLOCK_N": "host.TUNED (every row)", "Nq, Nk": "symbolic ≤ host.MAX_LEN",
          "window": "symbolic, clamped", "tile sizes": "symbolic ≥ 16"}


@obligation("KER-TILES-HOST", checks=["KER-TILES"], bounds={"Nq, Nk, window": "symbolic, any size"},
            assumptions=["A-SOLVER-TRUST"])
def tiles_host(ctx):
    """host._index_args: admitted lengths ≤ MAX_LEN, sides clamped to [0, max(Nq, Nk)], the same allowed pairs."""
    return check_host(ctx)


@obligation("KER-TILES-KEY-RANGE", checks=["KER-TILES"], bounds=BOUNDS, assumptions=ASSUME)
def tiles_key_range(ctx):
    """fwd.key_range (forward, dQ): each allowed key of a real row is in exactly one visited block; unmasked blocks hold only allowed keys."""
    return check_ranges(ctx, "fwd")


@obligation("KER-TILES-QUERY-RANGE", checks=["KER-TILES"], bounds=BOUNDS, assumptions=ASSUME)
def tiles_query_range(ctx):
    """bwd.query_range (dK/dV): each allowed row of a real key is in exactly one visited block; unmasked blocks hold only allowed rows."""
    return check_ranges(ctx, "bwd")


@obligation("KER-TILES-PAIRS", checks=["KER-TILES"], bounds=BOUNDS, assumptions=ASSUME)
def tiles_pairs(ctx):
    """fwd.allowed_pairs, the masked stages' predicate, is the API's rule (a dense mask only removes pairs)."""
    return check_pairs(ctx)


@obligation("KER-TILES-PLAN", checks=["KER-TILES"], bounds=BOUNDS, assumptions=ASSUME + ["A-KER-PLAN-LISTS"])
def tiles_plan(ctx):
    """plan._classes: a tile with an allowed pair is listed; a full tile holds only allowed pairs (symbolic tile sizes)."""
    return check_plan(ctx)


@obligation("KER-TILES-VARLEN", checks=["KER-TILES"], bounds=BOUNDS, assumptions=ASSUME + ["A-KER-CU-VALID"])
def tiles_varlen(ctx):
    """fwd.seq_bounds: a program's rows and keys are its own sequence's (cu_seqlens[b], cu_seqlens[b+1])."""
    return check_seq_bounds(ctx)


def _ctl(name, fn, *a):
    def run(ctx):
        return fn(ctx, *a, overrides=mutants.overrides(name))
    return run


for _name, _of, _fn, _args in (
        ("fwd-full-hi-wider", "KER-TILES-KEY-RANGE", check_ranges, ("fwd",)),
        ("fwd-full-lo-wider", "KER-TILES-KEY-RANGE", check_ranges, ("fwd",)),
        ("fwd-edge-past-tile", "KER-TILES-KEY-RANGE", check_ranges, ("fwd",)),
        ("bwd-full-hi-wider", "KER-TILES-QUERY-RANGE", check_ranges, ("bwd",)),
        ("bwd-full-lo-wider", "KER-TILES-QUERY-RANGE", check_ranges, ("bwd",)),
        ("pair-edge", "KER-TILES-PAIRS", check_pairs, ()),
        ("plan-full-wider", "KER-TILES-PLAN", check_plan, ()),
        ("plan-full-lo-wider", "KER-TILES-PLAN", check_plan, ()),
        ("plan-edge-past-tile", "KER-TILES-PLAN", check_plan, ()),
        ("varlen-k-start", "KER-TILES-VARLEN", check_seq_bounds, ()),
        ("host-unclamped", "KER-TILES-HOST", check_host, ())):
    _f = _ctl(_name, _fn, *_args)
    _f.__name__ = _f.__qualname__ = "control_" + _name.replace("-", "_")
    control(f"{_of}/{_name}", of=_of, bug=mutants.MUTANTS[_name].bug)(_f)
