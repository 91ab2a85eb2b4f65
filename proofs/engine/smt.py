"""The one z3 solver every obligation query goes through: recorded, and checked for vacuity.

``CheckedSolver(formulas, timeout_ms=..., logic=None)`` is a ``z3.Solver`` in a fresh z3 context
holding ``formulas``: the last is the goal (a negated claim, or an existential formula), the others
are the hypotheses. Its ``check()``

* records the query — z3's SMT-LIB export (when ``record_text``: the runner asks for it exactly
  when a second solver will read it), z3's answer and time, and for a sat answer z3's model
  (``model_text``, recorded with the text) — in ``core.QUERY_LOG``, from which the
  runner gives the same text to the second solver (``engine.second``);
* when z3 answers unsat, checks that the hypotheses are satisfiable, together with the antecedent
  of a claim that is an implication (or of each implication of a claim that is a conjunction):
  an unsatisfiable set raises ``core.VacuousHypotheses`` (the query would "prove" anything), an
  undecided one ``core.VacuityUnknown``. Each such check is itself a recorded query (purpose
  "hypotheses", expected sat), so the second solver must find them satisfiable too.
"""
from __future__ import annotations

import time

import z3

from . import core

__all__ = ["CheckedSolver", "antecedents", "smt2_text", "model_text"]


def model_text(solver) -> str:
    """z3's model of a sat ``solver`` as SMT-LIB assertions ``(assert (= c v))``, one per constant
    whose value has a literal (integers, rationals, Booleans, floating point); functions with
    arguments and irrational algebraic values are left out (the second solver chooses them)."""
    m = solver.model()
    out = []
    for d in m.decls():
        if d.arity() != 0:
            continue
        v = m[d]
        if v is None or z3.is_algebraic_value(v):
            continue
        out.append(f"(assert {(d() == v).sexpr()})")
    return " ".join(out)


def smt2_text(solver) -> str:
    """The solver's assertions as z3's SMT-LIB benchmark: the same text as ``Solver.to_smt2()``
    (all assertions but the last as hypotheses, the last as the formula), built from the native
    assertion vector without wrapping each assertion in a Python object (``to_smt2`` spent most
    of the kernel obligations' time doing so for their thousands of queries)."""
    ref = solver.ctx.ref()
    vec = z3.Z3_solver_get_assertions(ref, solver.solver)
    z3.Z3_ast_vector_inc_ref(ref, vec)
    try:
        n = z3.Z3_ast_vector_size(ref, vec)
        head = (z3.Ast * max(n - 1, 0))()
        get = z3.Z3_ast_vector_get
        for i in range(n - 1):
            head[i] = get(ref, vec, i)
        last = get(ref, vec, n - 1) if n else z3.BoolVal(True, solver.ctx).as_ast()
        return z3.Z3_benchmark_to_smtlib_string(ref, "benchmark generated from python API", "", "unknown", "",
                                                max(n - 1, 0), head, last)
    finally:
        z3.Z3_ast_vector_dec_ref(ref, vec)


def antecedents(goal) -> list:
    """The antecedent a claim's proof must not get for free: for a goal ``Not(claim)``, the
    antecedent of ``claim`` if it is an implication; otherwise none. An implication inside a
    conjunction is not checked on its own: a conjunct whose case cannot occur on this path (a tile
    class that is not full, say) is true for a reason, not vacuously, as long as the hypotheses are
    satisfiable (which is always checked)."""
    if goal is None or not z3.is_not(goal):
        return []
    claim = goal.arg(0)
    if z3.is_implies(claim):
        return [claim.arg(0)]
    return []


class CheckedSolver(z3.Solver):
    """See the module docstring. ``check()`` takes no assumptions: the recorded text must be the
    whole query."""

    def __init__(self, formulas, *, timeout_ms: int, logic: str | None = None, record_text: bool = True):
        c = z3.Context()
        raw = z3.Z3_mk_solver_for_logic(c.ref(), z3.to_symbol(logic, c)) if logic else None
        super().__init__(solver=raw, ctx=c)
        self.set("timeout", int(timeout_ms))
        self._timeout_ms = int(timeout_ms)
        self._logic = logic
        self._record_text = record_text
        fs = [f.translate(c) if isinstance(f, z3.ExprRef) else z3.BoolVal(bool(f), ctx=c) for f in formulas]
        self.hypotheses = fs[:-1]
        self.goal = fs[-1] if fs else None
        self._vacuity_done = False  # hypotheses and goal are fixed at construction: checked once
        for f in fs:
            self.add(f)

    def check(self, *assumptions):
        if assumptions:
            raise TypeError("CheckedSolver.check() takes no assumptions; add them as formulas instead")
        t0 = time.perf_counter()
        r = super().check()
        secs = time.perf_counter() - t0
        hint = model_text(self) if self._record_text and r == z3.sat else None
        core.QUERY_LOG.append(core.Query(smt2_text(self) if self._record_text else None, str(r), secs, "goal", hint))
        if r == z3.unsat and not self._vacuity_done:
            self._not_vacuous()
            self._vacuity_done = True
        return r

    def _not_vacuous(self) -> None:
        """Check the hypotheses (and antecedent) given at construction; formulas added later between
        push and pop are part of each goal, not hypotheses, so one check covers every ``check()``."""
        ants = antecedents(self.goal)
        sets = [(a, self.hypotheses + [a]) for a in ants] if ants else [(None, self.hypotheses)]
        for ant, fs in sets:
            if not fs:
                continue
            s = z3.SolverFor(self._logic, ctx=self.ctx) if self._logic else z3.Solver(ctx=self.ctx)
            s.set("timeout", self._timeout_ms)
            s.add(*fs)
            text = smt2_text(s)
            seen = next((q.z3 for q in core.QUERY_LOG if q.purpose == "hypotheses" and q.smt2 == text), None)
            if seen is None:
                t0 = time.perf_counter()
                seen = str(s.check())
                secs = time.perf_counter() - t0
                hint = model_text(s) if self._record_text and seen == "sat" else None
                core.QUERY_LOG.append(core.Query(text, seen, secs, "hypotheses", hint))
            what = "the hypotheses" + (f" with the claim's antecedent {_short(ant)}" if ant is not None else "")
            if seen == "unsat":
                raise core.VacuousHypotheses(f"{what} are unsatisfiable (z3): the unsat query proves nothing")
            if seen != "sat":
                raise core.VacuityUnknown(f"z3 could not decide whether {what} are satisfiable ({seen})")


def _short(e) -> str:
    t = " ".join(str(e).split())
    return t if len(t) <= 60 else t[:57] + "..."
