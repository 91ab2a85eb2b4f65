"""Equivalence-preserving rewriting of a symbolic kernel run's formulas before a solver sees them: the
kernels' truncating divisions of program ids (b = bh // H, …) are what z3 struggles with, and their
values are known (the program's batch and head). Used by the Gluon index obligations
(``obligations/kernels/gluon_bounds.py``); every decision it takes is a recorded solver query."""
from __future__ import annotations

import z3

from . import gluon_sym as gs

__all__ = ["Rewrite"]


def _apps(e):
    """(ref, app, decl kind, number of arguments) of every distinct application subterm of ``e``, in the
    order of a depth-first walk from the last argument, read through z3's C API: wrapping every
    subterm in a Python object took most of the rewrite's time."""
    ref = e.ctx.ref()
    todo, seen = [e.as_ast()], set()
    while todo:
        a = todo.pop()
        k = z3.Z3_get_ast_id(ref, a)
        if k in seen or z3.Z3_get_ast_kind(ref, a) != z3.Z3_APP_AST:
            continue
        seen.add(k)
        app = z3.Z3_to_app(ref, a)
        n = z3.Z3_get_app_num_args(ref, app)
        yield ref, app, z3.Z3_get_decl_kind(ref, z3.Z3_get_app_decl(ref, app)), n
        todo += [z3.Z3_get_app_arg(ref, app, i) for i in range(n)]


class _Substitution:
    """``z3.substitute(f, *pairs)`` for a fixed list of pairs, its C arrays built (and the pairs' sorts
    checked) once: per call, z3's wrapper spent most of the rewrite's time re-checking every pair."""

    def __init__(self, pairs):
        bad = [a for a, b in pairs if not a.sort().eq(b.sort())]
        if bad:
            raise ValueError(f"substitution of mismatching sorts: {bad}")
        self.pairs, n = list(pairs), len(pairs)  # the pairs keep the arrays' terms alive
        self.n, self.frm, self.to = n, (z3.z3.Ast * n)(), (z3.z3.Ast * n)()
        for i, (a, b) in enumerate(self.pairs):
            self.frm[i], self.to[i] = a.as_ast(), b.as_ast()

    def __call__(self, f):
        return z3.z3._to_expr_ref(z3.Z3_substitute(f.ctx.ref(), f.as_ast(), self.n, self.frm, self.to), f.ctx)


def _ite_conditions(g):
    """The conditions of the ``If`` subterms of ``g``, each distinct subterm once (``_apps``' order)."""
    return [z3.BoolRef(z3.Z3_get_app_arg(ref, app, 0), g.ctx)  # holds a reference of its own
            for ref, app, kind, n in _apps(g) if n and kind == z3.Z3_OP_ITE]


class Rewrite:
    """Equivalence-preserving rewriting of a path's formulas before the solver sees them (the kernel's
    truncating divisions of program ids are what z3 struggles with), under ``base`` (facts every
    path of the run has):

    0. a kernel argument x with the base fact x = t (what the host passed) becomes t;
    1. an ``If(c, x, y)`` whose condition the base facts decide (c or ¬c is proved by a recorded
       query, e.g. pid0 ≥ 0 ∧ H > 0 of a truncating division) becomes x or y;
    2. a division or remainder ``x / y``, ``x % y`` listed in ``defs`` becomes its value: each
       (x, y, q, r) in ``defs`` comes with the lemma x = q·y + r ∧ 0 ≤ r < y (proved by ``lemmas``
       under the base facts, and a split loop's under its iteration's facts, before any rewriting is
       used), whence x / y = q and x % y = r.
    ``prover``: what decides a condition (``bounds._Prover``-like: ``_ask(claim, premise, base, path,
    bkey, pkey) -> Outcome``); ``facts``: the base facts decisions use (a subset: sound, and fast).
    Each step replaces a term by one equal to it under the base facts, so a claim is proved after
    rewriting exactly when it is proved before."""

    def __init__(self, base, defs, prover, params=(), facts=()):
        self.base, self.defs, self.known, self.memo, self.simple = list(base), defs, {}, {}, {}
        self.subs = None  # _substitutions(), built on first use
        self.dec = prover
        names = set(params)
        self.args = [(f.arg(0), f.arg(1)) for f in base if z3.is_eq(f) and z3.is_const(f.arg(0))
                     and f.arg(0).decl().name() in names]
        # conditions are decided after rewriting, under ``facts`` (sign facts that are among the base
        # facts: a subset decides soundly, and without the products of the base, fast)
        ids = {f.get_id() for f in base}
        missing = [f for f in facts if f.get_id() not in ids]
        if missing:
            raise ValueError(f"decision facts that are not base facts: {missing}")
        self.dbase = list(facts)

    def lemmas(self, pr):
        """Each definition's lemma under the base facts, and for a split loop's (q, r) under its
        iteration's facts too (the only formulas q, r occur in are that loop body's)."""
        for x, y, q, r in self.defs:
            names = [v.decl().name() for v in (q, r) if z3.is_const(v) and v.decl().name() in gs.LOOP_FACTS]
            scope = list(dict.fromkeys(f for name in names for f in gs.LOOP_FACTS[name]))
            lemma = z3.And(x == q * y + r, r >= 0, r < y)
            if pr.prove(lemma, z3.BoolVal(True), self.base, scope, "lemma"):
                # asked again (memoised: the same outcome) to name the lemma: printing every lemma's terms
                # took a fifth of the backward record's time
                return pr.prove(lemma, z3.BoolVal(True), self.base, scope, f"lemma {x} = {q}·{y} + {r}")
        return None

    def _decide(self, c):
        loops = self._simple(c)
        if loops is None:
            return None
        key = c.get_id()  # entries keep their terms alive: z3 reuses the ids of freed terms
        if key not in self.known or not self.known[key][0].eq(c):
            bkey, out = tuple(h.get_id() for h in self.dbase), None
            scope = [f for name in sorted(loops) for f in gs.LOOP_FACTS[name]]
            for val, goal in ((True, c), (False, z3.Not(c))):
                if self.dec._ask(goal, z3.BoolVal(True), self.dbase, scope, bkey,
                                 tuple(f.get_id() for f in scope)).status == "proved":
                    out = val
                    break
            self.known[key] = (c, goal, out)
        return self.known[key][2]

    def _simple(self, c):
        key = c.get_id()
        if key not in self.simple or not self.simple[key][0].eq(c):
            self.simple[key] = (c, self._loops(c))
        return self.simple[key][1]

    @staticmethod
    def _loops(c):
        """The loop variables of ``c`` (decided under the base facts and those loops' iteration
        conditions, which hold wherever their variable occurs), or None when ``c`` is not worth
        deciding: a lane variable (bounded on the path only), a division, a bare Boolean (a view kind)."""
        if z3.is_const(c):
            return None
        loops = set()
        for ref, app, kind, n in _apps(c):  # every distinct subterm once
            if n == 0 and kind == z3.Z3_OP_UNINTERPRETED:
                name = z3.z3._symbol2py(c.ctx, z3.Z3_get_decl_name(ref, z3.Z3_get_app_decl(ref, app)))
                if name.startswith("lane"):
                    return None
                if name in gs.LOOP_FACTS:
                    loops.add(name)
            if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
                return None
        return loops

    def __call__(self, f):
        key = f.get_id()
        if key in self.memo and self.memo[key][0].eq(f):
            return self.memo[key][1]
        g = self._fix(f)
        self.memo[key] = (f, g)
        return g

    def _substitutions(self):
        """(term, value) pairs of steps 0 and 2: each listed division and remainder, also with the
        kernel arguments replaced by what the host passed, and each argument itself (built once)."""
        if self.subs is None:
            defs = self.defs + [(z3.substitute(x, *self.args), z3.substitute(y, *self.args), q, r)
                                for x, y, q, r in self.defs] if self.args else self.defs
            self.subs = _Substitution([(x / y, q) for x, y, q, _ in defs] + [(x % y, r) for x, y, _, r in defs]
                                      + self.args)
        return self.subs

    def _fix(self, f):
        subs = self._substitutions()
        for _ in range(4):
            g = z3.simplify(subs(f))
            conds = {}
            for c in _ite_conditions(g):
                v = self._decide(c)
                if v is not None:
                    conds[c.get_id()] = (c, z3.BoolVal(v))
            if conds:
                g = z3.simplify(z3.substitute(g, *conds.values()))
            if g.eq(f):
                return g
            f = g
        return f
