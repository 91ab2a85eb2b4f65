"""Run obligations in parallel, one forked process each, with a per-obligation timeout.

``execute(obs, jobs=2, timeout=30, ...)`` returns one result record (a dict, schema in
``docs/proofs.md``) per obligation, in completion order, calling ``progress(record)`` as each
finishes. A process that outlives its timeout is killed and recorded as ``timeout``; an exception
is ``error``; an ``Outcome`` with a status outside ``STATUSES`` is ``error``. Cached definitive
results are returned without running unless ``force``.
"""
from __future__ import annotations

import gc
import multiprocessing as mp
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path
from typing import Callable

from . import cache
from .core import STATUSES, Context, Obligation, Outcome
from .status import record_ok

__all__ = ["execute", "make_record", "command_for"]


def command_for(ob_id: str, deep: bool) -> str:
    return f"flashproof prove --only {ob_id}" + (" --deep" if deep else "")


def make_record(ob: Obligation, out: Outcome, *, seconds: float, bounds: dict, deep: bool, key: str,
                cached: bool = False) -> dict:
    """The JSON record of one run (see ``docs/proofs.md`` for the schema)."""
    vers = cache.versions()
    solver = out.solver or ob.solver
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
        "bounds": bounds,
        "deep": deep,
        "seconds": round(seconds, 4),
        "counterexample": out.counterexample,
        "witness": out.witness,
        "detail": out.detail,
        "content_hash": key,
        "cached": cached,
        "command": command_for(ob.id, deep),
        "module": ob.module,
    }
    rec["ok"] = record_ok(rec)
    return rec


def _child(conn, ob: Obligation, ctx: Context) -> None:
    t0 = time.perf_counter()
    try:
        out = ob.fn(ctx)
        if not isinstance(out, Outcome):
            out = Outcome("error", detail=f"obligation returned {type(out).__name__}, not Outcome")
        elif out.status not in STATUSES or out.status == "timeout":
            out = Outcome("error", detail=f"obligation returned status {out.status!r}")
    except Exception as e:  # noqa: BLE001 — an exception is an 'error' record
        tb = traceback.format_exc(limit=4).strip().splitlines()
        out = Outcome("error", detail=f"{type(e).__name__}: {e} | " + " / ".join(tb[-3:]))
    try:
        conn.send((out, time.perf_counter() - t0))
    except Exception as e:  # noqa: BLE001 — e.g. an unpicklable counterexample
        conn.send((Outcome("error", detail=f"result not transferable: {e}"), time.perf_counter() - t0))
    conn.close()


def execute(obs: list[Obligation], *, all_obs: dict, jobs: int = 2, timeout: float = 30.0, deep: bool = False,
            force: bool = False, cache_dir: Path | None = cache.DEFAULT_DIR,
            progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Run ``obs`` (controls already resolved) and return their records."""
    ctx_mp = mp.get_context("fork")
    records: list[dict] = []

    def done(rec):
        records.append(rec)
        if progress:
            progress(rec)

    queue = []
    for ob in obs:
        bounds = ob.deep_bounds if deep else ob.bounds
        key = cache.content_hash(ob, bounds=bounds, base=all_obs.get(ob.of) if ob.of else None)
        hit = None if (force or cache_dir is None) else cache.load(cache_dir, key)
        if hit is not None and hit.get("obligation") == ob.id:
            hit["cached"] = True
            done(hit)
        else:
            queue.append((ob, bounds, key))
    # Longest first (by the last recorded time of each id) keeps both workers busy to the end.
    history = cache.load_timings(cache_dir) if cache_dir is not None else {}
    queue.sort(key=lambda q: -history.get(q[0].id, 1.0))
    running: dict = {}  # sentinel -> (proc, conn, ob, bounds, key, t0)
    # Objects that exist before the forks (every imported module: torch and triton too, which the kernel
    # index obligations import) go to the permanent generation: a child's garbage collections then skip
    # them (the allocation-heavy counting obligations ran 5x slower scanning torch's object graph).
    gc.freeze()
    while queue or running:
        while queue and len(running) < max(1, jobs):
            ob, bounds, key = queue.pop(0)
            ctx = Context(dict(bounds), int(timeout * 1000), deep)
            parent, child = ctx_mp.Pipe(duplex=False)
            proc = ctx_mp.Process(target=_child, args=(child, ob, ctx), daemon=True)
            proc.start()
            child.close()
            running[parent] = (proc, ob, bounds, key, time.perf_counter())
        now = time.perf_counter()
        next_deadline = min(t0 + timeout for (_, _, _, _, t0) in running.values())
        ready = wait(list(running), timeout=max(0.0, next_deadline - now))
        for conn in ready:
            proc, ob, bounds, key, t0 = running.pop(conn)
            try:
                out, secs = conn.recv()
            except (EOFError, OSError):
                proc.join(1)
                out, secs = Outcome("error", detail=f"worker died (exit code {proc.exitcode})"), time.perf_counter() - t0
            proc.join(5)
            rec = make_record(ob, out, seconds=secs, bounds=bounds, deep=deep, key=key)
            if cache_dir is not None:
                cache.store(cache_dir, key, rec)
            done(rec)
        now = time.perf_counter()
        for conn, (proc, ob, bounds, key, t0) in list(running.items()):
            if now - t0 >= timeout:
                proc.kill()
                proc.join(5)
                running.pop(conn)
                done(make_record(ob, Outcome("timeout", detail=f"killed after {timeout:g} s"), seconds=now - t0,
                                 bounds=bounds, deep=deep, key=key))
    if cache_dir is not None:
        cache.store_timings(cache_dir, {r["obligation"]: r["seconds"] for r in records if not r.get("cached")})
    return records
