"""The warm phase of a compile-aware campaign: every launch specialisation compiled before the
timed part, in parallel worker processes.

Compiling is CPU work (Triton's LLVM passes, ptxas, the C launcher built by gcc: ~1 s per kernel
variant, several variants per launch: forward, δ, dK/dV, dQ, the split calls' masked forward) and
one process compiles one variant at a time. ``warm_up`` runs, in a pool of fresh ("spawn")
processes over the CPU cores, each launch's smallest problem (``launches.specimen``) through the
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


def _spec_from(d: dict):
    from .problem import ProblemSpec

    d = dict(d)
    d["window"] = None if d["window"] is None else tuple(d["window"])
    d["seqlens"] = None if d["seqlens"] is None else tuple(tuple(p) for p in d["seqlens"])
    return ProblemSpec(**d)


def _worker() -> None:
    """A worker process: reads its job (a JSON file named by argv[1]), examines each task, prints one
    JSON line per task."""
    import json
    import sys

    import torch

    torch.set_num_threads(1)
    if os.environ.get("TRITON_INTERPRET") == "1":
        from .interpreter_shim import numpy_2_4_shim
        numpy_2_4_shim()
    from .checks import examine
    from .user import resolve

    with open(sys.argv[1]) as f:
        job = json.load(f)
    target = resolve(job["kernel"], **job["conventions"])
    kw = {} if job["max_work"] is None else {"max_work": job["max_work"]}
    for spec, dtype in job["tasks"]:
        with count_compiles() as n:
            try:
                examine(target, _spec_from(spec), dtype, job["device"], checks=tuple(job["checks"]),
                        determinism_runs=job["determinism_runs"], tuning=job["tuning"], **kw)
                err = ""
            except Exception as e:  # not a finding here: the campaign meets the same problem itself
                err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
        print(json.dumps({"error": err, "compiled": n["compiled"], "cached": n["cached"]}), flush=True)


def warm_up(kernel: str, specimens: list, dtypes, *, device: str, checks, determinism_runs: int, tuning: str,
            conventions: dict | None = None, workers: int | None = None, deadline: float = float("inf"),
            max_work=None) -> Warm:
    """Run every specimen (a ``ProblemSpec``) in every dtype once, spread over ``workers`` (default:
    the CPU cores) fresh Python processes; ``kernel``: a reference ``user.resolve`` loads in a fresh
    process (a built-in name, ``MODULE:FUNCTION``, ``/abs/path.py:FUNCTION``). Workers still
    running at ``deadline`` (time.monotonic()) are stopped; their unfinished tasks are ``Warm.cut``.
    The workers get this process's ``sys.path`` (and nothing from the working directory), so they
    import the same flashproof."""
    import json
    import subprocess
    import sys
    import tempfile

    t0 = time.monotonic()
    tasks = [(s._asdict(), dt) for s in specimens for dt in dtypes]
    if not tasks:
        return Warm(0.0, 0, 0, 0, 0, 0, 0, ())
    n = max(1, min(workers or default_workers(), len(tasks)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code = "from flashproof.fuzz.warm import _worker; _worker()"
    procs = []
    folder = tempfile.TemporaryDirectory(prefix="flashproof-warm-")
    for i in range(n):
        chunk = tasks[i::n]
        job = dict(kernel=kernel, conventions=dict(conventions or {}), tasks=chunk, device=device, checks=list(checks),
                   determinism_runs=determinism_runs, tuning=tuning, max_work=max_work)
        path = os.path.join(folder.name, f"job{i}.json")
        with open(path, "w") as f:
            json.dump(job, f)
        # output to files, not pipes: a worker must never wait for this process to read it
        with open(path + ".out", "w") as out, open(path + ".err", "w") as err:
            p = subprocess.Popen([sys.executable, "-P", "-c", code, path], stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=err, env=env)
        procs.append((p, len(chunk), path))
    failed = compiled = cached = cut = 0
    errors = []
    for p, count, path in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1) if deadline != float("inf") else None)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        with open(path + ".out") as f_out, open(path + ".err") as f_err:
            out, err = f_out.read(), f_err.read()
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        for r in lines:
            compiled, cached = compiled + r["compiled"], cached + r["cached"]
            if r["error"]:
                failed += 1
                errors.append(r["error"])
        if len(lines) < count:
            if p.returncode not in (0, -9):  # the worker died (a fault that killed it, out of memory)
                failed += count - len(lines)
                errors.append(f"worker exited with {p.returncode}: {(err or '').strip().splitlines()[-1:]}"[:200])
            else:
                cut += count - len(lines)
    folder.cleanup()
    return Warm(round(time.monotonic() - t0, 2), len(tasks), failed, n, compiled, cached, cut, tuple(errors[:3]))
