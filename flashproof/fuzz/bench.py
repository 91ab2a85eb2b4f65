"""``flashproof fuzz-bench`` (or ``python -m flashproof.fuzz.bench``): complete fuzzing examples
per minute, the throughput a kernel engineer's CI gets from ``flashproof fuzz``.

For each kernel (default: ``triton`` — ours — and ``sdpa-flash``) and dtype (default bf16) it runs
the campaign of ``--profile`` (default ``gpu``: compile-aware, each campaign drawing its lengths
and head dims from a few specialisations, the float64 oracle on the device beyond 100k
multiply-adds) for ``--seconds`` of wall clock, compile time included, and prints one table row:
examples examined with every check that applies to the kernel (forward, gradients with the LSE
cotangent, split-KV merge, determinism where promised), examples per minute, the specialisations
drawn, deviations and the oracle mix. ``--warmup`` seconds of an untimed campaign first (a CI job
pays compiles once per cache; 0 measures the cold start). It needs a GPU for the GPU profile; on
a CPU it runs, slowly, as a smoke test. Target (issue 14): ≥ 200 complete examples per minute on
one H200 for ours and for SDPA's flash backend.
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
    parser.add_argument("--warmup", type=float, default=30.0, help="untimed campaign first (compiles), seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--determinism-runs", type=int, default=2)
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write the rows here")


def measure(kernel: str, dtype: str, *, device: str, profile: str, seconds: float, warmup: float, seed: int,
            determinism_runs: int) -> dict:
    """One row: a warm-up campaign (same seed: the same specialisations) then the timed one."""
    from .campaign import run_campaign

    kw = dict(device=device, dtypes=(dtype,), budget=1_000_000, seed=seed, profile=profile, rounds=1,
              determinism_runs=determinism_runs, diagnose=False)
    if warmup > 0:
        run_campaign(kernel, seconds=warmup, **kw)
    t0 = time.monotonic()
    s = run_campaign(kernel, seconds=seconds, **kw)
    wall = time.monotonic() - t0
    r = s["results"][0] if s["results"] else {}
    n = r.get("examples", 0)
    return {"kernel": kernel, "dtype": dtype, "device": s.get("device_name", device), "available": s["available"],
            "reason": s.get("reason", ""), "examples": n, "unsupported": r.get("unsupported", 0), "seconds": round(wall, 1),
            "examples_per_min": round(60.0 * n / wall, 1) if wall > 0 else 0.0,
            "deviations": len(s["deviations"]), "harness_error": s.get("harness_error", ""),
            "oracles": r.get("oracles", {}), "specialisations": s.get("specialisations", {}),
            "notes": s.get("notes", [])}


def run(args: argparse.Namespace) -> int:
    import torch

    from .cli import check_device
    from .errors import UsageError

    try:
        device = check_device(args.device)
    except UsageError as e:
        print(f"flashproof fuzz-bench: {e}")
        return 2
    if not args.seconds > 0 or args.warmup < 0:
        print("flashproof fuzz-bench: --seconds must be > 0 and --warmup >= 0")
        return 2
    if device == "cpu":
        torch.set_num_threads(1)
    rows = []
    print(f"{'kernel':<14} {'dtype':<5} {'examples':>8} {'unsupp':>6} {'seconds':>7} {'ex/min':>7} {'devs':>4}  "
          f"specialisations / oracles", flush=True)
    for kernel in args.kernel or ["triton", "sdpa-flash"]:
        for dtype in args.dtype or ["bf16"]:
            row = measure(kernel, dtype, device=device, profile=args.profile, seconds=args.seconds,
                          warmup=args.warmup, seed=args.seed, determinism_runs=args.determinism_runs)
            rows.append(row)
            if not row["available"]:
                print(f"{kernel:<14} {dtype:<5} not available: {row['reason']}", flush=True)
                continue
            print(f"{kernel:<14} {dtype:<5} {row['examples']:>8} {row['unsupported']:>6} {row['seconds']:>7} "
                  f"{row['examples_per_min']:>7} {row['deviations']:>4}  {row['specialisations']} {row['oracles']}"
                  + (f"  HARNESS ERROR: {row['harness_error']}" if row["harness_error"] else ""), flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 4 if any(r["harness_error"] for r in rows) else 0


if __name__ == "__main__":
    import sys

    p = argparse.ArgumentParser(prog="python -m flashproof.fuzz.bench", description=__doc__.splitlines()[0])
    add_arguments(p)
    sys.exit(run(p.parse_args()))
