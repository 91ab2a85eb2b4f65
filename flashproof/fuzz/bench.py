"""``flashproof fuzz-bench`` (or ``python -m flashproof.fuzz.bench``): complete fuzzing examples
per minute, the throughput a kernel engineer's CI gets from ``flashproof fuzz``.

For each kernel (default: ``triton`` — ours — and ``sdpa-flash``) and dtype (default bf16) it runs
the campaign of ``--profile`` (default ``gpu``: compile-aware, ``launches.py``) in two measured
parts, reported apart:

* the warm phase (``warm.py``): every launch specialisation of the campaign compiled by running
  its smallest problem in ``--workers`` parallel processes (default: the CPU cores; 0 skips it,
  which measures a cold campaign that compiles as it goes). Its seconds are what a CI job pays once
  per Triton cache: with the cache kept between runs, later warm phases find every variant there
  and cost the workers' start-up;
* the timed campaign: ``--seconds`` of wall clock, examples examined with every check that applies
  to the kernel (forward, gradients with the LSE cotangent, split-KV merge, determinism where
  promised), examples per minute, and the Triton compilations it still made (0 when the warm phase
  covered every launch: a measured fact, from ``warm.count_compiles``).

Each row also gives the deviations, the oracle mix and the launch specialisations. On a CPU it
runs, slowly, as a smoke test (the warm phase is skipped there unless ``--workers`` is given: the
interpreter compiles nothing). Target (issue 14): >= 200 complete examples per minute on one H200
for ours and for SDPA's flash backend.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

__all__ = ["add_arguments", "run", "measure"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", action="append", help="repeatable (default: triton, sdpa-flash)")
    parser.add_argument("--dtype", action="append", help="repeatable (default: bf16)")
    parser.add_argument("--device", default=None, help="default: cuda when present")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--seconds", type=float, default=60.0, help="timed wall clock per kernel and dtype")
    parser.add_argument("--workers", type=int, default=None,
                        help="warm-phase processes (default: the CPU cores on CUDA, none on the CPU; 0: no warm phase)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--determinism-runs", type=int, default=2)
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write the rows here")


def measure(kernel: str, dtype: str, *, device: str, profile: str, seconds: float, workers: int | None, seed: int,
            determinism_runs: int) -> dict:
    """One row: the warm phase (timed on its own) then the timed campaign (same seed: the same launches)."""
    import torch

    from . import targets
    from .campaign import PROFILES, _applies, run_campaign, warm_phase
    from .checks import CHECKS

    # no shrinking (a deviation is reported as found; the time measured is the search's)
    kw = dict(device=device, dtypes=(dtype,), budget=1_000_000, seed=seed, profile=profile, rounds=1,
              determinism_runs=determinism_runs, diagnose=False, shrink_seconds=0.0)
    target = targets.get(kernel)
    warm = {"skipped": "no warm phase asked for"}
    do_warm = workers != 0 and (workers is not None or torch.device(device).type == "cuda")
    if do_warm and target.unavailable(device) is None:
        lacks = target.lacks(device)
        warm = warm_phase(target, device, dict(PROFILES[profile]), seed, [d for d in (dtype,) if d not in lacks],
                          [c for c in CHECKS if _applies(c, target, lacks)], determinism_runs, "first", workers)
    t0 = time.monotonic()
    s = run_campaign(kernel, seconds=seconds, warm=False, **kw)
    wall = time.monotonic() - t0
    r = s["results"][0] if s["results"] else {}
    n = r.get("examples", 0)
    return {"kernel": kernel, "dtype": dtype, "device": s.get("device_name", device), "available": s["available"],
            "reason": s.get("reason", ""), "warm_s": warm.get("seconds"), "warm": warm,
            "examples": n, "unsupported": r.get("unsupported", 0), "seconds": round(wall, 1),
            "examples_per_min": round(60.0 * n / wall, 1) if wall > 0 else 0.0,
            "timed_compiles": s.get("compiles", {}).get("compiled", 0),
            "timed_cache_loads": s.get("compiles", {}).get("cached", 0),
            "timed_compiled_on": s.get("compiles", {}).get("examples", []),
            "timed_kernels": s.get("compiles", {}).get("kernels", []),
            "deviations": len(s["deviations"]), "device_fault": s.get("device_fault", ""),
            "harness_error": s.get("harness_error", ""), "oracles": r.get("oracles", {}),
            "specialisations": s.get("specialisations", []), "notes": s.get("notes", []),
            "deviation_lines": [d["reproducer"] for d in s["deviations"]][:3]}


def _row(row: dict) -> str:
    warm = row["warm"]
    w = f"{row['warm_s']:>6}" if row["warm_s"] is not None else f"{'-':>6}"
    wc = f"{warm.get('compiled', '-')}/{warm.get('failed', '-')}" if "seconds" in warm else "-"
    return (f"{row['kernel']:<14} {row['dtype']:<5} {w} {wc:>8} {row['examples']:>8} {row['seconds']:>7} "
            f"{row['examples_per_min']:>7} {row['timed_compiles']:>8} {row['deviations']:>4}  {row['oracles']}"
            + (f"  DEVICE FAULT: {row['device_fault']}" if row["device_fault"] else "")
            + (f"  HARNESS ERROR: {row['harness_error']}" if row["harness_error"] else ""))


def run(args: argparse.Namespace) -> int:
    import torch

    from .cli import check_device
    from .errors import UsageError

    try:
        device = check_device(args.device)
    except UsageError as e:
        print(f"flashproof fuzz-bench: {e}")
        return 2
    if not args.seconds > 0 or (args.workers is not None and args.workers < 0):
        print("flashproof fuzz-bench: --seconds must be > 0 and --workers >= 0")
        return 2
    if device == "cpu":
        torch.set_num_threads(1)
    rows = []
    head = (f"{'kernel':<14} {'dtype':<5} {'warm_s':>6} {'wcomp/f':>8} {'examples':>8} {'seconds':>7} {'ex/min':>7} "
            f"{'compiles':>8} {'devs':>4}  oracles")
    print(head, flush=True)
    for kernel in args.kernel or ["triton", "sdpa-flash"]:
        for dtype in args.dtype or ["bf16"]:
            row = measure(kernel, dtype, device=device, profile=args.profile, seconds=args.seconds,
                          workers=args.workers, seed=args.seed, determinism_runs=args.determinism_runs)
            rows.append(row)
            if not row["available"]:
                print(f"{kernel:<14} {dtype:<5} not available: {row['reason']}", flush=True)
                continue
            print(_row(row), flush=True)
            if row["device_fault"]:
                break  # the CUDA context is unusable: nothing more can be measured in this process
    print("warm_s: the warm phase (every launch specialisation compiled in parallel processes; paid once per Triton "
          "cache); wcomp/f: its Triton compilations / failed tasks; seconds, ex/min: the timed campaign, complete "
          "examples (every check); compiles: Triton compilations during the timed part (shrinking a deviation "
          "compiles the new shapes it tries)", flush=True)
    for row in rows:
        for line in row.get("specialisations", []):
            print(f"  [{row['kernel']} {row['dtype']}] launch: {line}")
        for line in row.get("timed_compiled_on", []):
            print(f"  [{row['kernel']} {row['dtype']}] compiled in the timed part while examining: {line}")
        for line in row.get("timed_kernels", []):
            print(f"  [{row['kernel']} {row['dtype']}] compiled in the timed part: {line}")
        for line in row.get("deviation_lines", []):
            print(f"  [{row['kernel']} {row['dtype']}] DEVIATION {line}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    if any(r["harness_error"] for r in rows):
        return 4
    return 1 if any(r["deviations"] for r in rows) else 0


if __name__ == "__main__":
    import sys

    p = argparse.ArgumentParser(prog="python -m flashproof.fuzz.bench", description=__doc__.splitlines()[0])
    add_arguments(p)
    sys.exit(run(p.parse_args()))
