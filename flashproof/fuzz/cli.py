"""``flashproof fuzz`` — differential fuzzing of attention kernels and speculative samplers.

``--kernel`` takes a built-in name (``torch``, ``triton``, ``sdpa-flash``, …, ``mutant:<bug>``,
``all``, ``mutants``), ``MODULE:FUNCTION`` or ``PATH.py:FUNCTION`` (anyone's function; its
capabilities are read from its signature, its conventions from ``--layout``, ``--causal-alignment``,
``--lse``, ``--empty-rows`` or its ``@flashproof.fuzz.kernel(...)`` decorator; see
``flashproof.fuzz.user``). ``--sampler`` takes ``torch``, ``triton``, ``control:<bug>``,
``controls`` or ``MODULE:FUNCTION`` / ``PATH.py:FUNCTION`` with the ``rejection_sample`` contract
(``flashproof.fuzz.samplers``). Both are repeatable and may be mixed.

Exit status (one table, also in docs/fuzz.md):

====  =====================================================================================
0     every kernel and sampler ran its whole budget and passed
1     some kernel or sampler deviated (each deviation printed with a minimal reproducer and
      written as a standalone script under ``--repro-dir``)
2     usage error: a bad argument, a kernel that cannot be loaded, a device that is not here
      (all checked before any example is drawn), or a built-in kernel not available here
3     incomplete: ``--seconds`` ran out before the budget (INCOMPLETE, never passed); nothing
      deviated
4     the harness failed (the two oracles disagreed, our code raised): no verdict; never
      reported as a deviation of the kernel
====  =====================================================================================

When several apply, the first of 4, 1, 2, 3 in that order is the exit status. Errors go to
stderr, reports to stdout. One line per examined example is printed as it finishes (``--quiet``
turns that off); with ``--json`` the summaries are rewritten after every target, so a run stopped
from outside keeps what it finished. Triton kernels use their first configuration only (no
autotuning) unless ``--all-configs``. The campaign runs torch with ``--threads`` (1) intra-op
threads on every device: its CPU-side tensors (the problems built in float64, the oracles'
agreement rows) are small, and extra threads only wait for each other. On a GPU machine the
default of one thread per core made twelve parallel campaigns oversubscribe the CPU: on the H200
(16 cores, 2026-12-01 16:30 UTC) SDPA flash, 829 examples/min alone, examined 22 in 240 s, and a
problem with 1025 keys took ~20 s whatever the kernel.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from . import targets
from .campaign import DEFAULT_BUDGET, DEFAULT_DTYPES, PROFILES, campaign, format_summary
from .checks import CHECKS, DTYPES
from .errors import UsageError
from .user import CHOICES

EXIT = {"passed": 0, "deviation": 1, "usage": 2, "incomplete": 3, "harness": 4}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", action="append", metavar="KERNEL",
                        help="repeatable (default: torch unless --sampler is given): a built-in name ("
                             + ", ".join(n for n in targets.names() if not n.startswith("mutant:"))
                             + ", mutant:<bug>, 'all', 'mutants'), MODULE:FUNCTION or PATH.py:FUNCTION")
    parser.add_argument("--sampler", action="append", metavar="SAMPLER",
                        help="repeatable: torch, triton, control:<bug>, 'controls', or MODULE:FUNCTION / "
                             "PATH.py:FUNCTION with the rejection_sample contract")
    parser.add_argument("--layout", choices=CHOICES["layout"], default=None,
                        help="user kernels: q/k/v/out as (B, H, N, D) (bhnd, default) or (B, N, H, D)")
    parser.add_argument("--causal-alignment", choices=CHOICES["causal_alignment"], default=None,
                        help="user kernels: where the causal diagonal sits when Nq != Nk (default bottom-right)")
    parser.add_argument("--lse", choices=CHOICES["lse"], default=None,
                        help="user kernels: the LSE's base, or none (default natural)")
    parser.add_argument("--empty-rows", choices=CHOICES["empty_rows"], default=None,
                        help="user kernels: rows with no allowed key give 0 / -inf (zero, default) or NaN (nan)")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when present)")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), metavar="DTYPE",
                        help=f"repeatable; one of {sorted(DTYPES)} (default: {' '.join(DEFAULT_DTYPES)}; "
                             "a dtype the kernel does not take is skipped)")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                        help="random examples per search round (>= 1); the first round of each dtype runs up to as "
                             "many of the design's adversarial problems before them")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (the run is reproducible)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci", help="size caps of the problems")
    parser.add_argument("--tolerance", choices=("empirical", "proved"), default="empirical",
                        help="rule for out/lse: empirical (2x a naive run) or proved (EXT-FP-ERROR; fp32/bf16/fp16)")
    parser.add_argument("--check", action="append", choices=CHECKS, help="repeatable (default: all)")
    parser.add_argument("--determinism-runs", type=int, default=2,
                        help="runs compared bitwise (>= 0; fewer than 2: the determinism check is not run)")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write the summaries here")
    parser.add_argument("--repro-dir", type=pathlib.Path, default=pathlib.Path("fuzz-repro"),
                        help="where each deviation's standalone reproducer script is written (default ./fuzz-repro)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="wall-clock budget for all targets together, split evenly over those still to run; "
                             "a campaign cut short is reported INCOMPLETE (exit 3), never passed")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads for the campaign's CPU work, on every device (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no per-example progress lines")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes of the warm phase of a compile-aware profile (gpu, gluon): every launch "
                             "specialisation compiled before the timed part (default: the CPU cores, on CUDA only; "
                             "0: no warm phase)")
    parser.add_argument("--all-configs", action="store_true",
                        help="let our Triton kernels autotune (default: tuning='first', one configuration)")


def _kernels(requested, conventions: dict) -> list:
    """Targets for ``--kernel`` values (UsageError naming a bad one)."""
    from .user import resolve

    out = []
    for name in requested:
        if name == "all":
            out += [targets.get(n) for n in targets.names() if not n.startswith("mutant:")]
        elif name == "mutants":
            out += [targets.get(n) for n in targets.mutant_names()]
        else:
            out.append(resolve(name, **conventions))
    return out


def check_device(device: str | None) -> str:
    """The device to run on; UsageError when it does not exist here."""
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"unknown device {device!r}: expected cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return device
    if dev.type != "cuda":
        raise UsageError(f"device {device!r} is not supported: expected cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise UsageError(f"device {device!r} was asked for but there is no CUDA device here")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise UsageError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return device


def _check_json(path: pathlib.Path | None) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        with open(path, "a"):
            pass
        if not existed:
            path.unlink()
    except OSError as e:
        raise UsageError(f"--json {path}: cannot write there ({e.strerror or e})") from None


def validate(args: argparse.Namespace) -> dict:
    """Every argument checked before any campaign starts; returns what the run needs."""
    if args.budget < 1:
        raise UsageError(f"--budget must be >= 1 (examples per search round), received {args.budget}")
    if args.determinism_runs < 0:
        raise UsageError(f"--determinism-runs must be >= 0, received {args.determinism_runs}")
    if args.seconds is not None and not args.seconds > 0:
        raise UsageError(f"--seconds must be > 0, received {args.seconds}")
    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1, received {args.threads}")
    if args.workers is not None and args.workers < 0:
        raise UsageError(f"--workers must be >= 0 (0: no warm phase), received {args.workers}")
    device = check_device(args.device)
    _check_json(args.json)
    conventions = {"layout": args.layout, "causal_alignment": args.causal_alignment, "lse": args.lse,
                   "empty_rows": args.empty_rows}
    kernels = _kernels(args.kernel or ([] if args.sampler else ["torch"]), conventions)
    from .samplers import resolve_sampler

    samplers = [s for name in (args.sampler or []) for s in resolve_sampler(name)]
    return {"device": device, "kernels": kernels, "samplers": samplers}


def run(args: argparse.Namespace) -> int:
    try:
        plan = validate(args)
    except UsageError as e:
        print(f"flashproof fuzz: {e}", file=sys.stderr)
        return EXIT["usage"]
    import torch

    device = plan["device"]
    torch.set_num_threads(args.threads)
    if device == "cpu":
        from flashproof.kernels.interpreter import interpreting
        if interpreting():  # the interpreter fixes for a user's own Triton kernels too (ours apply them on import)
            from .interpreter_shim import apply as apply_interpreter_shims
            apply_interpreter_shims()
    jobs = [("kernel", t) for t in plan["kernels"]] + [("sampler", s) for s in plan["samplers"]]
    t_end = None if args.seconds is None else time.monotonic() + args.seconds
    summaries = []
    for i, (kind, target) in enumerate(jobs):
        share = None if t_end is None else max((t_end - time.monotonic()) / (len(jobs) - i), 1.0)
        if kind == "kernel":
            s = _run_kernel(target, args, device, share)
        else:
            from .samplers import format_sampler_summary, run_sampler_campaign

            s = run_sampler_campaign(target, device=device, budget=args.budget, seed=args.seed, seconds=share,
                                     repro_dir=args.repro_dir)
            print(format_sampler_summary(s), flush=True)
        summaries.append(s)
        if args.json is not None:
            args.json.write_text(json.dumps(summaries, indent=1, default=str))
        if s.get("device_fault"):  # the CUDA context is unusable: nothing more can run in this process
            rest = [t.name for _, t in jobs[i + 1:]]
            if rest:
                print(f"flashproof fuzz: {target.name} faulted on the device; not run in this process: "
                      f"{', '.join(rest)} (run them again separately)", file=sys.stderr)
            break
    return exit_status(summaries)


def _run_kernel(target, args, device, share) -> dict:
    from .repro import write_scripts

    c = campaign(target, device=device, dtypes=tuple(args.dtype or DEFAULT_DTYPES), budget=args.budget,
                 seed=args.seed, profile=args.profile, checks=tuple(args.check or CHECKS),
                 determinism_runs=args.determinism_runs, seconds=share, tolerance=args.tolerance,
                 tuning="autotune" if args.all_configs else "first",  # one configuration per launch key unless asked
                 warm=None if args.workers is None else args.workers > 0, workers=args.workers or None,
                 progress=None if args.quiet else _printer(target.name))
    s = c.summary
    if c.deviations:
        paths = write_scripts(c.deviations, target, args.repro_dir)
        for d, path in zip(s["deviations"], paths):
            d["script"] = str(path)
        for r in s["results"]:
            for d in r.get("deviations", []):
                d["script"] = next((x["script"] for x in s["deviations"] if x["reproducer"] == d["reproducer"]), "")
    print(format_summary(s), flush=True)
    if s.get("harness_error"):
        print(f"flashproof fuzz: harness error on {target.name}: {s['harness_error']}", file=sys.stderr)
    return s


def exit_status(summaries: list) -> int:
    """The exit-status table of the module docstring, over every summary."""
    if any(s.get("harness_error") for s in summaries):
        return EXIT["harness"]
    if any(s.get("available", True) and s.get("deviations") for s in summaries):
        return EXIT["deviation"]
    if not all(s.get("available", True) for s in summaries):
        return EXIT["usage"]
    return EXIT["passed"] if all(s.get("complete", True) for s in summaries) else EXIT["incomplete"]


def _printer(name: str):
    def show(p: dict) -> None:
        print(f"  [{name} {p['dtype']}] #{p['example']} {p['seconds']:.1f}s {p['status']}: {p['spec']}", flush=True)
    return show
