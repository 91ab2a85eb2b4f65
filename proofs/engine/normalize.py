"""Field normalisation: an exported real-arithmetic query rewritten, case by case, without division.

cvc5's complete procedure for nonlinear real arithmetic (coverings) uses McCallum's projection in its
PyPI build, which reports ``incomplete`` on the queries where a polynomial vanishes on a whole cell —
as the purified divisions of the attention identities do (x·r = 1 with r = 1/x); its other procedure
(incremental linearisation) then runs out of time on identities such as (c/a)·(b/c) = b/a, which
need the field's cancellation law. ``cases(smt2)`` rewrites the SAME formula so that cancellation is
plain polynomial arithmetic, which cvc5's rewriter normalises by itself:

1. **ite cases.** A condition c of a real-valued ite inside a divisor is split on: the query F is
   unsat iff both c ∧ F[every ite(c, x, y) := x] and ¬c ∧ F[every ite(c, x, y) := y] are, and a
   model of either is a model of F (on each side those ites have the value substituted). Repeated
   until no divisor holds an ite (at most ``MAX_CASES`` cases). A side whose division-free assertions
   and condition the second solver finds unsat is dropped (no model, so its case has none); an ite
   elsewhere keeps its condition
   and gets one denominator for both branches, ite(c, x, y) ↦ ite(c, Nx·Dy, Ny·Dx)/(Dx·Dy) — or,
   with ``split_all``, is split on as well.
Before the split, each top-level equation x_1 + … + x_k = c over distinct variables (a
distribution's total mass) replaces x_k by c − x_1 − … − x_{k−1} in the other assertions (the
equation stays): the same models, and an identity that holds on the simplex becomes one of polynomials.

2. **Clearing denominators.** In each case every real term t is written as a fraction N/D whose
   denominator is a polynomial: x + y ↦ (Nx·Dy + Ny·Dx)/(Dx·Dy), x·y ↦ (Nx·Ny)/(Dx·Dy), x/y ↦ (Nx·Dy)/(Dx·Ny); an
   atom x = y becomes Nx·Dy = Ny·Dx and x < y (≤, >, ≥) becomes Nx·Dx·Dy² < Ny·Dy·Dx² — both
   equivalent to the original atom wherever every D is non-zero (the second multiplies by
   (Dx·Dy)² > 0). Every D is a product of divisors' numerators, so the rewrite is exact in every
   model in which **each divisor is non-zero**. That side condition is not assumed: for each divisor
   y the case yields the query G ∧ Ny = 0, where G are the case's assertions that contain no
   division (the hypotheses, e.g. A > 0, and the case's conditions); the second solver must answer
   it unsat — or the same query with G the division-free assertions of the query itself (fewer
   facts, so its unsat implies the case's; asked once for every case). Then in every model of the
   case (which satisfies G) every divisor is non-zero, so the case and its rewrite have the same
   models.

So the original query is unsat iff the second solver finds, in every case, every side query and the
rewritten query unsat; it is sat when it finds some case's side queries unsat and its rewrite sat
(that model satisfies the original case, hence F). ``Case.side`` lists the side queries, ``Case.text``
the rewrite; ``None`` from ``cases`` means the query is outside what this rewrite handles (integers,
floating point, a division under an uninterpreted function, too many cases), and it is then not
used. The formula is parsed and printed by z3 (the library that exported it), in a fresh context.
"""
from __future__ import annotations

from typing import NamedTuple

import z3

__all__ = ["Case", "Rewrite", "cases", "MAX_CASES"]

#: more ite cases than this and the rewrite is not attempted
MAX_CASES = 64


class Case(NamedTuple):
    """One ite case: ``side`` (per divisor, two SMT-LIB queries of which one must be unsat: the
    divisor is zero under the division-free assertions common to every case, or under the case's
    own — the first, when unsat, serves every case, the second is weaker) and ``text`` (the case
    without division)."""

    side: tuple
    text: str


class _Outside(Exception):
    """The query uses something the rewrite does not handle."""


_ARITH = {z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_MUL, z3.Z3_OP_DIV, z3.Z3_OP_UMINUS}
_CMP = {z3.Z3_OP_LE: lambda a, b: a <= b, z3.Z3_OP_LT: lambda a, b: a < b,
        z3.Z3_OP_GE: lambda a, b: a >= b, z3.Z3_OP_GT: lambda a, b: a > b}


def _text(fs, ctx) -> str:
    s = z3.Solver(ctx=ctx)
    s.add(*fs)
    return s.to_smt2()


def _real_ite(fs, in_divisor=False):
    """A real-valued ite inside a divisor of ``fs`` (anywhere, with ``in_divisor``) whose condition
    has no such ite inside (so it is split first), or None."""
    seen = set()
    todo = [(f, in_divisor) for f in fs]
    while todo:
        e, inside = todo.pop()
        if (e.get_id(), inside) in seen:
            continue
        seen.add((e.get_id(), inside))
        if inside and z3.is_app_of(e, z3.Z3_OP_ITE) and e.sort().kind() == z3.Z3_REAL_SORT:
            inner = _real_ite([e.arg(0)])
            return inner if inner is not None else e
        if z3.is_app_of(e, z3.Z3_OP_DIV):
            todo += [(e.arg(0), inside), (e.arg(1), True)]
        else:
            todo += [(c, inside) for c in e.children()]
    return None


def _ite_cases(fs, ctx, refute, split_all=False):
    """The ite cases of ``fs`` that ``refute`` does not rule out, and how many it ruled out: a side
    c (or ¬c) whose division-free assertions plus c the second solver finds unsat has no model, so
    neither has its case (that unsat answer is part of the verdict)."""
    out, pruned, todo = [], 0, [list(fs)]
    while todo:
        case = todo.pop()
        t = _real_ite(case, in_divisor=split_all)
        if t is None:
            out.append(case)
            if len(out) > MAX_CASES:
                raise _Outside(f"more than {MAX_CASES} ite cases")
            continue
        c = t.arg(0)
        same = _ites_on(case, c)
        memo: dict = {}
        plain = [f for f in case if not _has_div(f, memo)]
        for cond, branch in ((z3.Not(c), 2), (c, 1)):
            if refute(_text(plain + [cond], ctx)):
                pruned += 1
                continue
            todo.append([z3.substitute(f, *[(u, u.arg(branch)) for u in same]) for f in case] + [cond])
    return out, pruned


def _ites_on(fs, c):
    """Every real ite of ``fs`` whose condition is ``c`` itself (one split settles them all)."""
    seen, out, todo = set(), [], list(fs)
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_app_of(e, z3.Z3_OP_ITE) and e.sort().kind() == z3.Z3_REAL_SORT and e.arg(0).eq(c):
            out.append(e)
        todo += e.children()
    return out


def _has_div(e, memo) -> bool:
    k = e.get_id()
    if k not in memo:
        memo[k] = z3.is_app_of(e, z3.Z3_OP_DIV) or any(_has_div(c, memo) for c in e.children())
    return memo[k]


class _Fractions:
    """N/D forms of the real terms of one case; ``divisors`` collects each divisor's numerator
    (innermost first), the side conditions."""

    def __init__(self, ctx):
        self.ctx, self.memo, self.divisors = ctx, {}, []
        self.one = z3.RealVal(1, ctx)

    def frac(self, e):
        k = e.get_id()
        if k in self.memo:
            return self.memo[k]
        if z3.is_rational_value(e) or (z3.is_const(e) and e.num_args() == 0):
            r = (e, self.one)
        elif z3.is_app(e) and e.decl().kind() in _ARITH:
            op, args = e.decl().kind(), [self.frac(c) for c in e.children()]
            if op == z3.Z3_OP_UMINUS:
                r = (-args[0][0], args[0][1])
            elif op in (z3.Z3_OP_ADD, z3.Z3_OP_SUB):
                n, d = args[0]
                for (n2, d2) in args[1:]:
                    n = n * d2 + n2 * d if op == z3.Z3_OP_ADD else n * d2 - n2 * d
                    d = d * d2
                r = (n, d)
            elif op == z3.Z3_OP_MUL:
                n, d = args[0]
                for (n2, d2) in args[1:]:
                    n, d = n * n2, d * d2
                r = (n, d)
            else:  # division x / y: exact where y's numerator is non-zero (a side query)
                (nx, dx), (ny, dy) = args
                if not (z3.is_rational_value(ny) and ny.as_fraction() != 0):
                    self.divisors.append(ny)
                r = (nx * dy, dx * ny)
        elif z3.is_app_of(e, z3.Z3_OP_ITE):  # no ite is left in a divisor: one denominator for both sides
            (nx, dx), (ny, dy) = self.frac(e.arg(1)), self.frac(e.arg(2))
            r = (z3.If(self.formula(e.arg(0)), nx * dy, ny * dx), dx * dy)
        else:
            raise _Outside(f"real term {e.decl().name()} is not field arithmetic")
        self.memo[k] = r
        return r

    def formula(self, f):
        """``f`` with every real atom cleared of denominators (Boolean structure kept)."""
        if z3.is_app(f) and f.decl().kind() in (z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_NOT, z3.Z3_OP_IMPLIES,
                                                 z3.Z3_OP_XOR, z3.Z3_OP_IFF) or z3.is_true(f) or z3.is_false(f):
            if f.num_args() == 0:
                return f
            return f.decl()(*[self.formula(c) for c in f.children()])
        if z3.is_app_of(f, z3.Z3_OP_ITE) and z3.is_bool(f):
            return z3.If(self.formula(f.arg(0)), self.formula(f.arg(1)), self.formula(f.arg(2)))
        if z3.is_app_of(f, z3.Z3_OP_EQ) and f.arg(0).sort().kind() == z3.Z3_BOOL_SORT:
            return self.formula(f.arg(0)) == self.formula(f.arg(1))
        if z3.is_app(f) and f.decl().kind() in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT) and f.num_args() == 2 \
                and f.arg(0).sort().kind() == z3.Z3_REAL_SORT:
            (nx, dx), (ny, dy) = self.frac(f.arg(0)), self.frac(f.arg(1))
            eq = nx * dy == ny * dx
            return eq if f.decl().kind() == z3.Z3_OP_EQ else z3.Not(eq)
        if z3.is_app(f) and f.decl().kind() in _CMP:
            (nx, dx), (ny, dy) = self.frac(f.arg(0)), self.frac(f.arg(1))
            return _CMP[f.decl().kind()](nx * dx * dy * dy, ny * dy * dx * dx)
        if z3.is_const(f) and f.num_args() == 0:
            return f  # a Boolean variable
        raise _Outside(f"atom {f.decl().name()} is not a comparison of real terms")


def _eliminate(fs):
    """``fs`` with each top-level equation x_1 + … + x_k = c (distinct real variables, c a numeral)
    used to replace x_k by c − x_1 − … − x_{k−1} in every other assertion (the equation stays): the
    same models, and identities that hold on the simplex become polynomial identities."""
    out = list(fs)
    for i, f in enumerate(fs):
        if not (z3.is_eq(f) and z3.is_add(f.arg(0)) and z3.is_rational_value(f.arg(1))):
            continue
        xs = f.arg(0).children()
        if not all(z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED for x in xs) or \
                len({x.get_id() for x in xs}) != len(xs):
            continue
        v, rest = xs[-1], xs[:-1]
        value = f.arg(1) - z3.Sum(*rest) if rest else f.arg(1)
        out = [g if j == i else z3.substitute(g, (v, value)) for j, g in enumerate(out)]
    return out


class Rewrite(NamedTuple):
    """``cases`` (one ``Case`` per ite case left) and ``pruned`` (ite sides the second solver refuted)."""

    cases: list
    pruned: int


def cases(smt2: str, refute, split_all: bool = False) -> Rewrite | None:
    """The ite cases of the query with denominators cleared (see the module docstring), or None when
    the query is outside the rewrite. Only for queries over the reals (no Int, no FP). ``refute(text)``:
    True when the second solver finds that SMT-LIB query unsat (it prunes ite sides). ``split_all``:
    split on every real ite, not only those inside divisors (no ite is left: each case is a
    polynomial formula, at the price of more cases)."""
    if any(tok in smt2 for tok in ("Int", "FloatingPoint", "RoundingMode", "forall", "exists", "Array")):
        return None
    ctx = z3.Context()
    try:
        fs = list(z3.parse_smt2_string(smt2, ctx=ctx))
        memo: dict = {}
        if not any(_has_div(f, memo) for f in fs):
            return None  # nothing to clear: the rewrite would be the query itself
        fs = _eliminate(fs)
        memo = {}
        common = [f for f in fs if not _has_div(f, memo)]  # the division-free assertions of every case
        split, pruned = _ite_cases(fs, ctx, refute, split_all)
        out = []
        for case in split:
            fr = _Fractions(ctx)
            rewritten = [fr.formula(f) for f in case]
            memo = {}
            plain = [f for f in case if not _has_div(f, memo)]
            seen, side = set(), []
            for n in fr.divisors:
                if n.get_id() not in seen:
                    seen.add(n.get_id())
                    side.append((_text(common + [n == 0], ctx), _text(plain + [n == 0], ctx)))
            out.append(Case(tuple(side), _text(rewritten, ctx)))
        return Rewrite(out, pruned)
    except _Outside:
        return None
