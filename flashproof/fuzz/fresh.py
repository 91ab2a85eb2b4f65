"""Examinations in fresh Python processes: the warm phase's workers, and the shrinking of an
example after a device fault (which leaves the campaign's own CUDA context unusable).

``run_fresh(kernel, chunks, ...)`` starts one process per chunk (a list of (``ProblemSpec``,
dtype) tasks), each examining its tasks in order with the campaign's checks and printing one JSON
line per task: the first line of an exception the examination raised (``error``), whether the
kernel faulted on the device (``fault``), and the Triton compilations and cache loads it made.
The processes get this process's ``sys.path`` (nothing from the working directory, so they import
the same flashproof) and write to files, never pipes (a worker never waits for this process to
read it). Processes still running at ``deadline`` are stopped (``Fresh.killed``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

__all__ = ["Fresh", "run_fresh"]


class Fresh(NamedTuple):
    """One process: its result lines (dicts, in task order), exit status, whether it was stopped
    at the deadline, and the last line of its stderr."""

    results: list
    returncode: int
    killed: bool
    stderr_tail: str


def _spec_from(d: dict):
    from .problem import ProblemSpec

    d = dict(d)
    d["window"] = None if d["window"] is None else tuple(d["window"])
    d["seqlens"] = None if d["seqlens"] is None else tuple(tuple(p) for p in d["seqlens"])
    return ProblemSpec(**d)


def _worker() -> None:
    """A worker process: reads its job (a JSON file named by argv[1]), examines each task, prints
    one JSON line per task."""
    import torch

    torch.set_num_threads(1)
    from flashproof.kernels.interpreter import interpreting

    if interpreting():  # Triton kernels run in the interpreter: apply its workarounds (interpreter_shim)
        from .interpreter_shim import apply as apply_interpreter_shims
        apply_interpreter_shims()
    from .checks import examine
    from .user import resolve
    from .warm import count_compiles

    with open(sys.argv[1]) as f:
        job = json.load(f)
    target = resolve(job["kernel"], **job["conventions"])
    kw = {} if job["max_work"] is None else {"max_work": job["max_work"]}
    for spec, dtype in job["tasks"]:
        fault = False
        with count_compiles() as n:
            try:
                ex = examine(target, _spec_from(spec), dtype, job["device"], checks=tuple(job["checks"]),
                             determinism_runs=job["determinism_runs"], tuning=job["tuning"], **kw)
                err, fault = "", any(d.device_fault for d in ex.deviations)
            except Exception as e:  # reported to the caller; not a finding here
                err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
        print(json.dumps({"error": err, "fault": fault, "compiled": n["compiled"], "cached": n["cached"]}), flush=True)


def run_fresh(kernel: str, chunks: list, *, device: str, checks, determinism_runs: int, tuning: str,
              conventions: dict | None = None, max_work=None, deadline: float = float("inf")) -> list:
    """One fresh process per chunk of (spec, dtype) tasks, all at once; a ``Fresh`` per chunk."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code = "from flashproof.fuzz.fresh import _worker; _worker()"
    procs = []
    with tempfile.TemporaryDirectory(prefix="flashproof-fresh-") as folder:
        for i, chunk in enumerate(chunks):
            job = dict(kernel=kernel, conventions=dict(conventions or {}), device=device, checks=list(checks),
                       tasks=[(s._asdict(), dt) for s, dt in chunk], determinism_runs=determinism_runs,
                       tuning=tuning, max_work=max_work)
            path = os.path.join(folder, f"job{i}.json")
            with open(path, "w") as f:
                json.dump(job, f)
            with open(path + ".out", "w") as out, open(path + ".err", "w") as err:
                p = subprocess.Popen([sys.executable, "-P", "-c", code, path], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=err, env=env)
            procs.append((p, path))
        runs = []
        for p, path in procs:
            killed = False
            try:
                p.wait(timeout=None if deadline == float("inf") else max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                killed = True
            with open(path + ".out") as f_out, open(path + ".err") as f_err:
                out, err = f_out.read(), f_err.read()
            results = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
            runs.append(Fresh(results, p.returncode, killed, (err.strip().splitlines() or [""])[-1][:200]))
    return runs
