"""The obligation API: what other areas plug into, and what the runner executes.

An **obligation** is a function ``fn(ctx) -> Outcome`` registered with ``@obligation``. It builds a
query by running ``flashproof.verified`` functions on a symbolic number system (never a copy of the
algorithm) and discharges it with a solver. A **control** (negative control, ``@control``) is a
deliberately wrong variant of an obligation (the reference patched at ONE small place); the runner
requires the same checker to *refute* it with a concrete counterexample.

    from flashproof.proofs.engine.core import obligation, control, Outcome, z3_prove

    @obligation("ATT-MERGE-ASSOC", checks=["DEF-SUMMARY"], bounds={"v": 16},
                assumptions=["A-EXP-ISO"], solver="z3")
    def merge_assoc(ctx):
        ...                               # ctx.bounds["v"], ctx.timeout_ms, ctx.deep
        return z3_prove(claim, ctx)       # -> Outcome(status="proved" | "refuted" | "unknown", ...)

    @control("ATT-MERGE-ASSOC/no-rescale", of="ATT-MERGE-ASSOC", bug="merge adds ℓ without the e^{m−m'} rescale")
    def merge_assoc_no_rescale(ctx):
        with patch.object(attention, "merge", bad_merge):
            return merge_assoc.fn(ctx)

Statuses: ``proved`` (claim holds for the stated bounds), ``refuted`` (a counterexample, which is
recorded), ``unknown`` (the solver gave up), ``timeout`` (killed by the runner), ``error`` (an
exception), ``vacuous`` (the hypotheses of a query that came out unsat are themselves unsatisfiable,
so the "proof" would hold for any claim). An obligation succeeds only when ``proved``; a control only
when ``refuted`` *with* a counterexample. ``unknown``, ``timeout`` and ``vacuous`` are never success.

Scope and role (declared at registration, shown in the audit): ``scope="unbounded"`` when the check
covers every size the claim quantifies over (then ``why_unbounded`` says why in one line when
``bounds`` is not empty, e.g. "v is a vector width: coordinates are updated independently"), else
``"bounded"`` (the default: nothing reads as "every n" unless declared and explained);
``role="cross-check"`` for a check that re-confirms a claim some ``"proof"`` obligation (the default)
already proves, e.g. a bounded unrolled run beside an inductive proof.

Every z3 query goes through ``fresh_solver`` (also used by ``z3_prove``/``z3_witness``): its
``check()`` records the query's SMT-LIB text and z3's answer in ``QUERY_LOG`` (the runner hands
them to the second solver, ``engine.second``) and, when the answer is unsat, checks that the
hypotheses — every formula but the last, plus the antecedent of a claim that is an implication —
are satisfiable, raising ``VacuousHypotheses`` when they are not.

Where obligations live: every module under ``flashproof.proofs.obligations`` (found by
``flashproof.proofs.engine.discover``, which also reports a module that fails to import or
registers nothing).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

__all__ = ["STATUSES", "SCOPES", "ROLES", "Outcome", "Context", "Obligation", "obligation", "control", "OBLIGATIONS",
           "resolve_control", "z3_prove", "z3_witness", "fresh_solver", "model_dict", "Query", "QUERY_LOG",
           "VacuousHypotheses", "VacuityUnknown"]

STATUSES = ("proved", "refuted", "unknown", "timeout", "error", "vacuous")
SCOPES = ("unbounded", "bounded")
ROLES = ("proof", "cross-check")


class Query(NamedTuple):
    """One z3 query as it was decided: ``smt2`` (z3's SMT-LIB export of the solver; None for a goal
    when the context does not record text, see ``Context.record_text``), ``z3`` (sat,
    unsat or unknown), ``seconds`` (z3's time) and ``purpose``: "goal" (the obligation's query) or
    "hypotheses" (the vacuity check of a goal that came out unsat; expected sat); ``hint``, for a
    query z3 found sat while text is recorded, z3's model as SMT-LIB assertions ``(= c v)``, one per
    constant with a literal value (``smt.model_text``): the second solver may check that assignment
    against the whole query when it finds no model of its own (``second.decide``)."""

    smt2: str
    z3: str
    seconds: float
    purpose: str
    hint: str | None = None


#: The z3 queries of the obligation running in this process, in order. A recorder, not a switch:
#: the runner clears it before an obligation runs and reads it afterwards (one forked process per
#: obligation), so the second solver sees exactly the formulas z3 decided.
QUERY_LOG: list[Query] = []


class VacuousHypotheses(Exception):
    """The hypotheses of an unsat query are unsatisfiable: the query proves nothing."""


class VacuityUnknown(Exception):
    """z3 could not decide whether the hypotheses of an unsat query are satisfiable."""


class Outcome(NamedTuple):
    """What an obligation function returns.

    status: one of ``STATUSES``; counterexample: a JSON-able dict (solver model or concrete input)
    or None; detail: one line for humans; solver: the checker actually used (e.g. "z3", "sympy",
    "exact"); witness: for an existential claim proved by a ``sat`` answer, the witness found."""

    status: str
    counterexample: Any = None
    detail: str = ""
    solver: str = ""
    witness: Any = None


class Context(NamedTuple):
    """Passed to every obligation: ``bounds`` (the dict in force: ``deep_bounds`` under --deep),
    ``timeout_ms`` for the solver (the runner also kills the process after its own timeout),
    ``deep``, and ``record_text``: whether each goal query's SMT-LIB text is kept in ``QUERY_LOG``
    for a second solver (the runner sets it exactly when it cross-checks; without it a goal's
    ``Query.smt2`` is None — the export cost the kernel obligations a fifth of their time)."""

    bounds: dict
    timeout_ms: int
    deep: bool
    record_text: bool = True


class Obligation(NamedTuple):
    """A registered obligation or control.

    id: stable id (a control's id is ``"<of>/<name>"`` by convention); checks: spec item ids;
    expected: "proved" for obligations, "refuted" for controls; of/bug: for controls only."""

    id: str
    fn: Callable[[Context], Outcome]
    checks: tuple
    bounds: dict
    deep_bounds: dict
    assumptions: tuple
    solver: str
    expected: str
    of: str | None
    bug: str | None
    module: str
    title: str
    scope: str = "bounded"
    role: str = "proof"
    why_unbounded: str = ""


#: id -> Obligation, filled at import time by the decorators.
OBLIGATIONS: dict[str, Obligation] = {}


def _register(ob: Obligation) -> None:
    old = OBLIGATIONS.get(ob.id)
    if old is not None and (old.module, old.fn.__qualname__) != (ob.module, ob.fn.__qualname__):
        raise ValueError(f"obligation id {ob.id!r} registered twice: {old.module}.{old.fn.__qualname__} "
                         f"and {ob.module}.{ob.fn.__qualname__}")
    OBLIGATIONS[ob.id] = ob


def _seq(name: str, x) -> tuple:
    if isinstance(x, str):
        raise TypeError(f"{name} must be a list of ids, received the string {x!r}")
    return tuple(x)


def obligation(id: str, *, checks, bounds: dict | None = None, deep_bounds: dict | None = None,
               assumptions=(), solver: str = "z3", scope: str = "bounded", role: str = "proof",
               why_unbounded: str = ""):
    """Register ``fn(ctx) -> Outcome`` as obligation ``id`` checking the spec items ``checks``.

    bounds: what "bounded" means for this check (e.g. ``{"n": 6, "b": "all"}``; ``{}`` for an
    unbounded lemma); deep_bounds: larger bounds used under ``--deep`` (defaults to ``bounds``);
    scope: "unbounded" (covers every size the claim quantifies over; with non-empty ``bounds``
    ``why_unbounded`` must say in one line why they do not limit it) or "bounded"; role: "proof"
    or "cross-check" (see the module docstring)."""
    if scope not in SCOPES:
        raise ValueError(f"obligation {id!r}: scope must be one of {SCOPES}, received {scope!r}")
    if role not in ROLES:
        raise ValueError(f"obligation {id!r}: role must be one of {ROLES}, received {role!r}")
    if "\n" in why_unbounded:
        raise ValueError(f"obligation {id!r}: why_unbounded must be one line")
    if scope == "unbounded" and (bounds or deep_bounds) and not why_unbounded.strip():
        raise ValueError(f"obligation {id!r}: scope 'unbounded' with bounds {dict(bounds or deep_bounds)} needs "
                         "why_unbounded: one line saying why these bounds do not limit the claim")
    if scope == "bounded" and why_unbounded:
        raise ValueError(f"obligation {id!r}: why_unbounded given for a bounded obligation")

    def deco(fn):
        doc = (fn.__doc__ or "").strip().splitlines()
        _register(Obligation(id, fn, _seq("checks", checks), dict(bounds or {}), dict(deep_bounds or bounds or {}),
                             _seq("assumptions", assumptions), solver, "proved", None, None, fn.__module__,
                             doc[0] if doc else id, scope, role, why_unbounded.strip()))
        return fn
    return deco


def control(id: str, *, of: str, bug: str, solver: str | None = None):
    """Register ``fn(ctx) -> Outcome`` as a negative control of obligation ``of`` with the planted
    ``bug`` (one line). Bounds, items and assumptions are those of ``of`` (resolved by the runner);
    the control must come out ``refuted`` with a counterexample."""
    if not bug or "\n" in bug:
        raise ValueError(f"control {id!r}: bug must be one non-empty line")

    def deco(fn):
        _register(Obligation(id, fn, (), {}, {}, (), solver or "", "refuted", of, bug, fn.__module__, bug))
        return fn
    return deco


def resolve_control(ob: Obligation) -> Obligation:
    """A control with the checks/bounds/assumptions/solver of the obligation it mutates."""
    if ob.of is None:
        return ob
    base = OBLIGATIONS.get(ob.of)
    if base is None:
        return ob
    return ob._replace(checks=base.checks, bounds=base.bounds, deep_bounds=base.deep_bounds,
                       assumptions=base.assumptions, solver=ob.solver or base.solver, scope=base.scope,
                       role=base.role, why_unbounded=base.why_unbounded)


# ---------------------------------------------------------------------------------------- z3 helpers

def model_dict(model) -> dict:
    """A z3 model as {constant name: value text} (fractions as ``p/q``), sorted by name."""
    out = {}
    for d in model.decls():
        if d.arity() > 0:  # interpretations of x/0 and the like: not part of the counterexample input
            continue
        val = model[d]
        try:
            if hasattr(val, "as_fraction"):
                fr = val.as_fraction()
                out[d.name()] = str(fr)
                continue
        except Exception:  # noqa: BLE001 — algebraic numbers have no fraction
            pass
        out[d.name()] = str(val)
    return dict(sorted(out.items()))


def fresh_solver(formulas, ctx: Context, *, logic: str | None = None):
    """A solver in a NEW z3 context holding ``formulas`` (translated): the last one is the goal (the
    negated claim, or an existential formula), the others are hypotheses. z3's search depends on the
    ids of terms created earlier in the same context, so a fresh context makes each answer a function
    of the query alone (the same in a forked worker, a test process or a REPL). Its ``check()``
    records the query in ``QUERY_LOG`` and checks the hypotheses of an unsat answer for vacuity
    (``engine.smt.CheckedSolver``)."""
    from .smt import CheckedSolver

    return CheckedSolver(list(formulas), timeout_ms=int(ctx.timeout_ms), logic=logic, record_text=ctx.record_text)


def z3_prove(claim, ctx: Context, *, hypotheses=(), logic: str | None = None) -> Outcome:
    """Prove ``claim`` (a z3 BoolRef) under ``hypotheses``: unsat of the negation is ``proved``,
    sat is ``refuted`` with the model as counterexample, anything else is ``unknown``. The query is
    solved in a fresh context (``fresh_solver``); ``logic`` picks a z3 logic (e.g. "QF_FP")."""
    import z3

    s = fresh_solver(list(hypotheses) + [z3.Not(claim)], ctx, logic=logic)
    r = s.check()
    if r == z3.unsat:
        return Outcome("proved", solver="z3", detail="negation unsat")
    if r == z3.sat:
        return Outcome("refuted", counterexample=model_dict(s.model()), solver="z3", detail="negation sat")
    return Outcome("unknown", solver="z3", detail=f"z3: {s.reason_unknown()}")


def z3_witness(formula, ctx: Context, *, logic: str | None = None) -> Outcome:
    """An existential claim: ``formula`` is satisfiable. sat is ``proved`` (the model is the
    witness); unsat is ``refuted`` (no witness exists: recorded as the counterexample
    ``{"unsat": true}``); otherwise ``unknown``."""
    import z3

    s = fresh_solver([formula], ctx, logic=logic)
    r = s.check()
    if r == z3.sat:
        return Outcome("proved", witness=model_dict(s.model()), solver="z3", detail="witness found (sat)")
    if r == z3.unsat:
        return Outcome("refuted", counterexample={"unsat": True}, solver="z3", detail="no witness exists (unsat)")
    return Outcome("unknown", solver="z3", detail=f"z3: {s.reason_unknown()}")
