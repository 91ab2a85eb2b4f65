"""Hypothesis slicing: subsets of an exported query's assertions that a second solver can refute.

A query is a conjunction of assertions; if some of them are already unsatisfiable together, so is
the whole query (every model of the query would be a model of the subset). So an ``unsat`` answer
on a subset is an ``unsat`` answer on the query — a weakening, sound for unsat only: a ``sat``
answer on a subset says nothing (a dropped assertion may exclude that model) and is discarded.

The kernel index queries (KER-BOUNDS) carry every fact the host guarantees about every tensor —
~100 assertions over strides, storage spans and tile lists — while a goal such as "the LSE offset
(b·Hq + h)·Nq + row is below B·Hq·Nq" needs half a dozen of them; cvc5's nonlinear integer
procedures are swamped by the rest (such a goal alone is decided in 0.1–1 s; with all of them not in
20 s). ``levels(smt2)`` gives the growing subsets tried in turn: the goal (the last assertion, the
negated claim) with the assertions whose variables lie within the goal's; then, step by step, the
variables of the assertions that share a variable with those kept and add at most one new one
(n_seq = B, Hq = GROUPS·Hkv, …) are admitted too. Every subset strictly smaller than the query; the
assertions keep their order. The formula is parsed and printed by z3 (the library that exported it).
"""
from __future__ import annotations

import z3

__all__ = ["levels", "MAX_LEVELS"]

#: subsets tried at most
MAX_LEVELS = 4


def _vars(e, memo) -> frozenset:
    k = e.get_id()
    if k not in memo:
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            memo[k] = frozenset([e.decl().name()])
        else:
            memo[k] = frozenset().union(*[_vars(c, memo) for c in e.children()])
    return memo[k]


def levels(smt2: str) -> list[tuple[int, int, str]]:
    """[(assertions kept, assertions in all, SMT-LIB text)] of the growing subsets (see the module
    docstring); empty when the query has fewer than two assertions."""
    ctx = z3.Context()
    fs = list(z3.parse_smt2_string(smt2, ctx=ctx))
    if len(fs) < 2:
        return []
    memo: dict = {}
    vs = [_vars(f, memo) for f in fs]
    goal = len(fs) - 1
    allowed = set(vs[goal])
    out, seen = [], set()
    for _ in range(MAX_LEVELS):
        keep = [i for i in range(len(fs)) if i == goal or vs[i] <= allowed]
        if len(keep) == len(fs):
            break
        key = tuple(keep)
        if key not in seen:
            seen.add(key)
            s = z3.Solver(ctx=ctx)
            s.add(*[fs[i] for i in keep])
            out.append((len(keep), len(fs), s.to_smt2()))
        grown = set(allowed)
        for v in vs:
            if v & allowed and len(v - allowed) <= 1:
                grown |= v
        if grown == allowed:
            break
        allowed = grown
    return out
