"""Run obligations in parallel, one forked process each, with a per-obligation timeout.

``execute(obs, jobs=2, timeout=30, cross_check=False, ...)`` returns one result record (a dict,
schema in ``docs/proofs.md``) per obligation, in completion order, calling ``progress(record)`` as
each finishes. A process that outlives its timeout is killed and recorded as ``timeout``; an
exception is ``error``; an ``Outcome`` with a status outside ``STATUSES`` is ``error``; a query
whose hypotheses are unsatisfiable is ``vacuous``. Cached definitive results are returned without
running unless ``force``.

With ``cross_check``, every z3 query an obligation made (``core.QUERY_LOG``) is decided again by
the second solver (``engine.second``) in a job of its own — forked, with the same timeout as a
budget of ``CROSS_CPU_FACTOR`` times it of its own CPU time (killed after ``CROSS_WALL_FACTOR`` times
that of wall time), so a
second solver that hangs costs its own verdicts, never the z3 result. Its verdicts stream back
one per query. The record then carries ``solvers`` (one entry per solver), ``trust`` ("two
solvers" when every query z3 decided got the same answer from a second solver, "one solver"
otherwise, "no SMT" without z3 queries) and ``disagreements`` (which make the record not ok). A
second solver's entry counts the queries it decided on a rewritten form (``rewritten``, named in its
``detail``).
"""
from __future__ import annotations

import datetime as _dt
import gc
import importlib
import multiprocessing as mp
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path
from typing import Callable, NamedTuple

from . import cache, core
from .core import STATUSES, Context, Obligation, Outcome
from .status import record_ok

__all__ = ["execute", "make_record", "command_for", "solver_entries", "SolverReport", "SECOND_QUERY_S", "cross_texts"]

#: the longest the second solver may spend on one query (the job's own budget bounds the sum); wall
#: time, as cvc5's limits are: 30 s (it was 20) because on a machine at load 4 the grouped-query
#: head offsets of the dK/dV kernel, decided on their slice in 1.4–3 s of CPU, took 5 s of wall
#: time on that slice alone; 40 s (it was 30) so that KV-SPLIT-PLAN's goal, which icp decides in
#: ≈ 27 s at load 4 and which has nothing to slice, gets ≈ 32 s of icp after the first portfolio
SECOND_QUERY_S = 40.0
#: a second-solver job may use ``timeout`` seconds of its own CPU time; on a loaded machine its
#: wall time runs longer, so the runner kills it only after this many times ``timeout`` of wall
#: time (a safety net: the verdicts it gathered until then still count)
CROSS_WALL_FACTOR = 4.0
#: a second-solver job's CPU budget is this many times the obligation's ``timeout``: the kernel index
#: records ask 1500–2000 queries, whose cvc5 runs (parse, set-up, decide: 30–50 ms each) need more
#: than the 60 s one z3 run may take; the budget still bounds a record's cross-check. 5 (it was 3):
#: KER-BOUNDS-DKDV asks 1785 distinct queries (≈ 80 s of cvc5 CPU for the easy ones) and 14 that
#: need the slices (≈ 5–10 s each), which did not fit in 180 s
CROSS_CPU_FACTOR = 5.0


#: modules that workers would otherwise import after the fork, each in every worker that reaches them
#: (≈ 6 s of CPU over a full run, found by diffing ``sys.modules`` around each obligation): the engine's
#: ``smt`` (``core.fresh_solver`` imports it on first use; 192 records), sympy's own lazy imports
#: (``Add.flatten`` imports ``sympy.tensor.tensor`` and with it ``sympy.combinatorics``, 40–70 ms, in
#: 43 records; ``is_ge`` ``sympy.assumptions.wrapper``; ``simplify`` ``sympy.physics.units``, which
#: brings ``sympy.physics.matrices``, ≈ 220 ms, in 11) and Bitwuzla (the floating-point error-model
#: records). ``execute`` imports them once in the parent before forking (≈ 0.3 s): the same modules,
#: the same code run, so no outcome changes; one that fails to import is left to the worker that
#: needs it (where its error is that record's, as before).
PRELOAD = ("flashproof.proofs.engine.smt", "sympy.tensor.tensor", "sympy.combinatorics", "sympy.assumptions.wrapper",
           "sympy.physics.units", "bitwuzla")


def _preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 — not ours to report here: the worker that imports it reports it
            pass


def command_for(ob_id: str, deep: bool) -> str:
    return f"flashproof prove --only {ob_id}" + (" --deep" if deep else "")


class SolverReport(NamedTuple):
    """The solver part of one record: ``solvers`` (one entry per solver, z3 first), ``trust``,
    ``disagreements`` (one dict per query where a second solver contradicts z3) and ``sat_goals_agreed``
    (goal queries z3 answered sat and a second solver answered sat too: counterexamples both found)."""

    solvers: list
    trust: str
    disagreements: list
    sat_goals_agreed: int = 0


def solver_entries(out: Outcome, queries: list, verdicts: list | None) -> SolverReport:
    """The solvers, trust tier and disagreements of one record.

    queries: ``core.Query`` tuples (as lists after pickling are fine); verdicts: one
    ``second.Verdict``-like tuple (name, version, status, seconds, detail) per query, or None for a
    query the second solver did not decide (job killed), or ``verdicts=None`` when the cross-check
    did not run. A second solver's entry status is ``disagrees`` if any answer contradicts z3's,
    else the first of error/timeout/unsupported/unknown that occurred, else the obligation's
    status (it agreed on every query)."""
    from . import second

    vers = cache.versions()
    if not queries:
        return SolverReport([], "no SMT", [])
    z3_secs = sum(q[2] for q in queries)
    entries = [{"name": "z3", "version": vers.get("z3"), "status": out.status, "seconds": round(z3_secs, 4),
                "queries": len(queries)}]
    if verdicts is None:
        entries.append({"name": "second solver", "version": None, "status": "not run", "seconds": 0.0,
                        "queries": 0, "detail": "cross-check not run (flashproof prove --cross-check; default of --deep)"})
        return SolverReport(entries, "one solver", [])
    per: dict = {}
    disagreements = []
    decided_by_z3 = 0
    agreed = 0
    sat_goals = 0
    for i, (q, v) in enumerate(zip(queries, verdicts)):
        z3_answer = q[1]
        if z3_answer in ("sat", "unsat"):
            decided_by_z3 += 1
        if v is None:
            v = second.Verdict("second solver", None, "timeout", 0.0, "not reached before the job's timeout")
        name, version, status, secs, detail = v
        e = per.setdefault(name, {"name": name, "version": version, "seconds": 0.0, "queries": 0, "agreed": 0,
                                  "answers": {}, "details": [], "rewritten": 0, "model_checked": 0})
        e["queries"] += 1
        e["seconds"] += secs
        e["answers"][status] = e["answers"].get(status, 0) + 1
        if status in ("sat", "unsat") and detail.startswith(second.REWRITTEN):
            e["rewritten"] += 1  # decided on the rewritten form of the query: said so in the entry's detail
            e["model_checked"] += second.MODEL_CHECKED in detail  # of which: z3's model checked (sat only)
        if status in ("sat", "unsat") and z3_answer in ("sat", "unsat"):
            if status == z3_answer:
                e["agreed"] += 1
                agreed += 1
                sat_goals += status == "sat" and q[3] == "goal"
            else:
                disagreements.append({"query": i, "purpose": q[3], "z3": z3_answer, "solver": name,
                                      "answer": status})
        elif status not in ("sat", "unsat") and detail and len(e["details"]) < 3:
            e["details"].append(detail)
    for e in per.values():
        ans = e.pop("answers")
        if any(d["solver"] == e["name"] for d in disagreements):
            st = "disagrees"
        else:
            st = next((k for k in ("error", "timeout", "unsupported", "unknown") if ans.get(k)), None) or out.status
        det = e.pop("details")
        if e["rewritten"]:
            det.insert(0, f"{e['rewritten']} of {e['queries']} queries decided on a rewritten form "
                          "(field normalisation, hypothesis slicing, a slice's model extended, or z3's model "
                          f"checked — {e['model_checked']} of them; docs/proofs.md)")
        entries.append(dict(e, status=st, seconds=round(e["seconds"], 4), answers=ans,
                            **({"detail": "; ".join(det)} if det else {})))
    trust = "two solvers" if decided_by_z3 and agreed == decided_by_z3 and not disagreements else "one solver"
    return SolverReport(entries, trust, disagreements, sat_goals)


def make_record(ob: Obligation, out: Outcome, *, seconds: float, bounds: dict, deep: bool, key: str,
                cached: bool = False, queries: list | None = None, verdicts: list | None = None,
                cpu_seconds: float | None = None) -> dict:
    """The JSON record of one run (see ``docs/proofs.md`` for the schema). ``seconds`` is the
    obligation's wall time in its worker, ``cpu_seconds`` that worker's CPU time (None when it was
    killed): on a shared machine the wall time grows with the load, the CPU time much less."""
    vers = cache.versions()
    solver = out.solver or ob.solver
    queries = list(queries or [])
    solvers, trust, disagreements, sat_goals = solver_entries(out, queries, verdicts)
    detail = out.detail
    if disagreements:
        d = disagreements[0]
        detail = (f"SOLVERS DISAGREE on {len(disagreements)} quer{'y' if len(disagreements) == 1 else 'ies'} "
                  f"(first: query {d['query']} ({d['purpose']}), z3 {d['z3']}, {d['solver']} {d['answer']}); " + detail)
    rec = {
        "obligation": ob.id,
        "kind": "control" if ob.of else "obligation",
        "of": ob.of,
        "bug": ob.bug,
        "title": ob.title,
        "items": list(ob.checks),
        "assumptions": list(ob.assumptions),
        "status": out.status,
        "expected": ob.expected,
        "solver": solver,
        "solver_version": vers.get(solver.split("+")[0], vers["python"]) if solver else None,
        "scope": ob.scope,
        "role": ob.role,
        "why_unbounded": ob.why_unbounded,
        "bounds": bounds,
        "deep": deep,
        "seconds": round(seconds, 4),
        "cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 4),
        "counterexample": out.counterexample,
        "witness": out.witness,
        "detail": detail,
        "queries": {"goal": sum(1 for q in queries if q[3] == "goal"),
                    "hypotheses": sum(1 for q in queries if q[3] == "hypotheses")},
        "solvers": solvers,
        "trust": trust,
        # a control's refutation confirmed by a second solver (docs/proofs.md): no answer of it contradicts
        # z3, and it either agreed on every query or found one of z3's counterexamples (a sat goal query)
        # sat too (a witness-style control is refuted by an unsat goal: then only the first applies)
        "refutation_confirmed": (bool(ob.of) and out.status == "refuted" and not disagreements
                                 and (trust == "two solvers" or sat_goals > 0)),
        "cross_check": verdicts is not None,
        "disagreements": disagreements,
        "content_hash": key,
        "cached": cached,
        "cached_from": None,
        "command": command_for(ob.id, deep),
        "module": ob.module,
    }
    if not solvers:  # no z3 query: the checker that decided it (sympy, exact arithmetic, …) stands alone
        rec["solvers"] = [{"name": solver or "none", "version": rec["solver_version"], "status": out.status,
                           "seconds": rec["seconds"], "queries": 0}]
    rec["ok"] = record_ok(rec)
    return rec


def _child(conn, ob: Obligation, ctx: Context) -> None:
    core.QUERY_LOG.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = ob.fn(ctx)
        if not isinstance(out, Outcome):
            out = Outcome("error", detail=f"obligation returned {type(out).__name__}, not Outcome")
        elif out.status not in STATUSES or out.status in ("timeout", "vacuous"):
            out = Outcome("error", detail=f"obligation returned status {out.status!r}")
    except core.VacuousHypotheses as e:
        out = Outcome("vacuous", solver="z3", detail=str(e))
    except core.VacuityUnknown as e:
        out = Outcome("unknown", solver="z3", detail=str(e))
    except Exception as e:  # noqa: BLE001 — an exception is an 'error' record
        tb = traceback.format_exc(limit=4).strip().splitlines()
        out = Outcome("error", detail=f"{type(e).__name__}: {e} | " + " / ".join(tb[-3:]))
    queries = [tuple(q) for q in core.QUERY_LOG]
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    try:
        conn.send((out, secs, cpu, queries))
    except Exception as e:  # noqa: BLE001 — e.g. an unpicklable counterexample
        conn.send((Outcome("error", detail=f"result not transferable: {e}"), secs, cpu, queries))
    conn.close()


def _cross_child(conn, texts: list, timeout: float) -> None:
    """Decide each distinct query text (``texts``: (text, z3's model or None) pairs, see
    ``second.decide``) with the second solver; send ("v", index, verdict) per text
    as it is decided, then ("done",). The budget is ``timeout`` seconds of this process's CPU time
    (cvc5 and Bitwuzla run in it), so the share of the machine other work takes does not decide how
    many verdicts a record gets; the texts it did not reach are reported as timeouts."""
    from . import second

    c0 = time.process_time()
    for i, (text, hint) in enumerate(texts):
        left = timeout - (time.process_time() - c0) - 0.5
        if left <= 0:
            break
        try:
            v = second.decide(text, int(1000 * min(SECOND_QUERY_S, left)), hint=hint)
        except Exception as e:  # noqa: BLE001 — a harness failure is the solver's 'error', never a verdict
            v = second.Verdict("second solver", None, "error", 0.0, f"{type(e).__name__}: {e}"[:160])
        conn.send(("v", i, tuple(v)))
    conn.send(("done",))
    conn.close()


def execute(obs: list[Obligation], *, all_obs: dict, jobs: int = 2, timeout: float = 30.0, deep: bool = False,
            force: bool = False, cache_dir: Path | None = cache.DEFAULT_DIR, cross_check: bool = False,
            progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Run ``obs`` (controls already resolved) and return their records. A record taken from the
    cache says so (``cached``) and names the run that computed it (``cached_from``: that run's
    start, UTC); a record computed now has ``cached_from`` None."""
    ctx_mp = mp.get_context("fork")
    records: list[dict] = []
    durations: dict = {}
    run_started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    def done(rec):
        records.append(rec)
        if cache_dir is not None and _cacheable(rec):
            cache.store(cache_dir, rec["content_hash"], dict(rec, cached_from=run_started))
        if progress:
            progress(rec)

    queue = []  # jobs: ("ob", ob, bounds, key) or ("cross", ob, bounds, key, out, secs, queries, cpu)
    for ob in obs:
        bounds = ob.deep_bounds if deep else ob.bounds
        key = cache.content_hash(ob, bounds=bounds, base=all_obs.get(ob.of) if ob.of else None,
                                 cross_check=cross_check)
        hit = None if (force or cache_dir is None) else cache.load(cache_dir, key)
        if hit is not None and hit.get("obligation") == ob.id:
            hit["cached"] = True
            hit.setdefault("cached_from", "an earlier run (before runs were named)")
            records.append(hit)
            if progress:
                progress(hit)
        else:
            queue.append(("ob", ob, bounds, key))
    # Longest first (by the last recorded time of each id) keeps both workers busy to the end.
    history = cache.load_timings(cache_dir) if cache_dir is not None else {}
    queue.sort(key=lambda q: -history.get(q[1].id, 1.0))
    running: dict = {}  # conn -> state dict
    if queue:
        _preload()  # before the freeze: the preloaded modules' objects are frozen too
    # Objects that exist before the forks (every imported module: torch and triton too, which the kernel
    # index obligations import) go to the permanent generation: a child's garbage collections then skip
    # them (the allocation-heavy counting obligations ran 5x slower scanning torch's object graph).
    gc.freeze()
    while queue or running:
        while queue and len(running) < max(1, jobs):
            job = queue.pop(0)
            parent, child = ctx_mp.Pipe(duplex=False)
            if job[0] == "ob":
                _, ob, bounds, key = job
                ctx = Context(dict(bounds), int(timeout * 1000), deep, record_text=cross_check)
                proc = ctx_mp.Process(target=_child, args=(child, ob, ctx), daemon=True)
                state = {"job": job, "proc": proc, "t0": time.perf_counter()}
            else:
                queries = job[6]
                texts = cross_texts(queries)
                hints: dict = {}
                for q in queries:  # z3's model of a sat query (core.Query.hint), the first one given
                    if len(q) > 4 and q[4] and q[0] not in hints:
                        hints[q[0]] = q[4]
                budget = timeout * CROSS_CPU_FACTOR
                proc = ctx_mp.Process(target=_cross_child, args=(child, [(t, hints.get(t)) for t in texts], budget),
                                      daemon=True)
                state = {"job": job, "proc": proc, "t0": time.perf_counter(), "texts": texts, "got": {},
                         "limit": budget * CROSS_WALL_FACTOR}
            proc.start()
            child.close()
            running[parent] = state
        now = time.perf_counter()
        next_deadline = min(s["t0"] + s.get("limit", timeout) for s in running.values())
        ready = wait(list(running), timeout=max(0.0, next_deadline - now))
        for conn in ready:
            state = running[conn]
            job, proc = state["job"], state["proc"]
            if job[0] == "ob":
                running.pop(conn)
                _, ob, bounds, key = job
                try:
                    out, secs, cpu, queries = conn.recv()
                except (EOFError, OSError):
                    proc.join(1)
                    out, secs, cpu, queries = (Outcome("error", detail=f"worker died (exit code {proc.exitcode})"),
                                               time.perf_counter() - state["t0"], None, [])
                proc.join(5)
                durations[ob.id] = secs
                if cross_check and queries:
                    queue.insert(0, ("cross", ob, bounds, key, out, secs, queries, cpu))
                else:
                    done(make_record(ob, out, seconds=secs, bounds=bounds, deep=deep, key=key, queries=queries,
                                     verdicts=None if not cross_check else [], cpu_seconds=cpu))
                continue
            finished = False
            try:
                while conn.poll():
                    msg = conn.recv()
                    if msg[0] == "v":
                        state["got"][msg[1]] = msg[2]
                    else:
                        finished = True
            except (EOFError, OSError):
                finished = True
            if finished:
                running.pop(conn)
                proc.join(5)
                done(_cross_record(state, deep))
        now = time.perf_counter()
        for conn, state in list(running.items()):
            if now - state["t0"] >= state.get("limit", timeout):
                state["proc"].kill()
                state["proc"].join(5)
                running.pop(conn)
                job = state["job"]
                if job[0] == "ob":
                    _, ob, bounds, key = job
                    durations[ob.id] = now - state["t0"]
                    done(make_record(ob, Outcome("timeout", detail=f"killed after {timeout:g} s"),
                                     seconds=now - state["t0"], bounds=bounds, deep=deep, key=key))
                else:
                    done(_cross_record(state, deep))
    if cache_dir is not None:
        cache.store_timings(cache_dir, durations)
    return records


def cross_texts(queries: list) -> list:
    """The distinct query texts in the order the second solver gets them: first the goal queries z3
    answered sat (a control's counterexamples, which decide whether it is refuted by both, so a CPU
    budget spent on its other queries cannot leave them unasked), then the rest in the order z3 asked
    them. The order changes no verdict, only which ones a cut-off job reaches."""
    first = [q[0] for q in queries if q[1] == "sat" and q[3] == "goal"]
    return list(dict.fromkeys(first + [q[0] for q in queries]))


def _cross_record(state: dict, deep: bool) -> dict:
    _, ob, bounds, key, out, secs, queries, cpu = state["job"]
    index = {t: i for i, t in enumerate(state["texts"])}
    verdicts = [state["got"].get(index[q[0]]) for q in queries]
    return make_record(ob, out, seconds=secs, bounds=bounds, deep=deep, key=key, queries=queries, verdicts=verdicts,
                       cpu_seconds=cpu)


def _cacheable(rec: dict) -> bool:
    """Definitive z3 results, unless a second solver was cut off or failed (then it runs again)."""
    if rec.get("status") not in ("proved", "refuted"):
        return False
    return not any(e.get("status") in ("timeout", "error") for e in rec.get("solvers", [])[1:])
