"""The warm phase of a compile-aware campaign: every launch specialisation compiled before the
timed part, in parallel worker processes.

Compiling is CPU work (Triton's LLVM passes, ptxas, the C launcher built by gcc: ~1 s per kernel
variant, several variants per launch: forward, δ, dK/dV, dQ, the split calls' masked forward) and
one process compiles one variant at a time. ``warm_up`` runs, in fresh processes over the CPU
cores (``fresh.py``), each launch's smallest problem (``launches.specimen``) through the
same checks as the campaign, once per dtype; each compile lands in Triton's on-disk cache
(``~/.triton/cache`` or ``TRITON_CACHE_DIR``), from which the campaign's own process then loads
it in milliseconds. The workers' results are not findings (the campaign examines everything
itself, and attributes every error there); a worker that failed is counted and its first error
line kept, for the report. A CI job that keeps the Triton cache between runs pays the compiles
once: later warm phases find every variant cached and cost the workers' start-up only.

``count_compiles()`` counts, while it is open, Triton compilations in this process and loads from
the on-disk cache (``triton.knobs.compilation.listener``): the campaign records them for its timed
part, so "the timed part compiled nothing" is a measured statement, not an assumption.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import NamedTuple

__all__ = ["Warm", "warm_up", "count_compiles", "default_workers"]


class Warm(NamedTuple):
    """seconds: wall clock of the warm phase; tasks: (launch, dtype) pairs run; failed: those that
    raised in their worker (first error in ``errors``); workers: processes used; compiled / cached:
    Triton compilations and on-disk cache loads in the workers; cut: tasks not run (deadline)."""

    seconds: float
    tasks: int
    failed: int
    workers: int
    compiled: int
    cached: int
    cut: int
    errors: tuple


def default_workers() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def count_compiles():
    """Yields a dict updated while open: "compiled" / "cached" (Triton compilations, on-disk cache
    loads), "kernels" (the first 20 compiled: kernel name and its integer/pointer attributes) and
    "examples" (filled by the campaign: problems whose examination compiled). No-op counts without
    triton."""
    counts = {"compiled": 0, "cached": 0, "kernels": [], "examples": []}
    try:
        import triton
        knobs = triton.knobs.compilation
    except (ImportError, AttributeError):
        yield counts
        return
    previous = knobs.listener

    def listen(*, cache_hit: bool, **kw):
        counts["cached" if cache_hit else "compiled"] += 1
        if not cache_hit and len(counts["kernels"]) < 20:
            src = kw.get("src")
            name = getattr(getattr(src, "fn", None), "__name__", None) or getattr(src, "name", "?")
            counts["kernels"].append(f"{name} {getattr(src, 'attrs', '')}"[:300])
        if previous is not None:
            previous(cache_hit=cache_hit, **kw)
    knobs.listener = listen
    try:
        yield counts
    finally:
        knobs.listener = previous


def warm_up(kernel: str, specimens: list, dtypes, *, device: str, checks, determinism_runs: int, tuning: str,
            conventions: dict | None = None, workers: int | None = None, deadline: float = float("inf"),
            max_work=None) -> Warm:
    """Run every specimen (a ``ProblemSpec``) in every dtype once, spread over ``workers`` (default:
    the CPU cores) fresh Python processes (``fresh.run_fresh``); ``kernel``: a reference
    ``user.resolve`` loads in a fresh process (a built-in name, ``MODULE:FUNCTION``,
    ``/abs/path.py:FUNCTION``). Workers still running at ``deadline`` (time.monotonic()) are
    stopped; their unfinished tasks are ``Warm.cut``."""
    from .fresh import run_fresh

    t0 = time.monotonic()
    tasks = [(s, dt) for s in specimens for dt in dtypes]
    if not tasks:
        return Warm(0.0, 0, 0, 0, 0, 0, 0, ())
    n = max(1, min(workers or default_workers(), len(tasks)))
    runs = run_fresh(kernel, [tasks[i::n] for i in range(n)], device=device, checks=checks,
                     determinism_runs=determinism_runs, tuning=tuning, conventions=conventions, max_work=max_work,
                     deadline=deadline)
    failed = compiled = cached = cut = 0
    errors = []
    for run, count in zip(runs, (len(tasks[i::n]) for i in range(n))):
        for r in run.results:
            compiled, cached = compiled + r["compiled"], cached + r["cached"]
            if r["error"]:
                failed += 1
                errors.append(r["error"])
        if len(run.results) < count:
            if run.killed:
                cut += count - len(run.results)
            else:  # the worker died (a fault that killed it, out of memory) or could not load the kernel
                failed += count - len(run.results)
                errors.append(f"worker exited with {run.returncode}: {run.stderr_tail}"[:200])
    return Warm(round(time.monotonic() - t0, 2), len(tasks), failed, n, compiled, cached, cut, tuple(errors[:3]))
