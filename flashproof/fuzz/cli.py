"""``flashproof fuzz`` — differential fuzzing of a named attention kernel against the oracle.

Exit status: 0 when every named kernel ran its whole budget and showed no deviation; 1 when a
deviation was found; 2 when a kernel is not available here (each such kernel is reported as "not
available" with the reason) and nothing deviated; 3 when ``--seconds`` ran out before the budget
(the summary says INCOMPLETE, never passed) and nothing deviated.

One line per examined example is printed as it finishes (``--quiet`` turns that off); with
``--json`` the summaries are rewritten after every kernel, so a run stopped from outside keeps the
kernels it finished. Triton kernels use their first configuration only (no autotuning) unless
``--all-configs`` is given: each new shape/feature combination would otherwise compile every one.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

from . import targets
from .campaign import DEFAULT_BUDGET, DEFAULT_DTYPES, PROFILES, format_summary, run_campaign
from .checks import CHECKS, DTYPES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", action="append", metavar="NAME",
                        help="kernel to fuzz (repeatable; default: torch). Names: "
                             + ", ".join(n for n in targets.names() if not n.startswith("mutant:"))
                             + ", mutant:<bug>; 'all' for every non-mutant name, 'mutants' for the corpus")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), metavar="DTYPE",
                        help=f"repeatable; one of {sorted(DTYPES)} (default: {' '.join(DEFAULT_DTYPES)})")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="examples per search round")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (the run is reproducible)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci", help="size caps of the problems")
    parser.add_argument("--check", action="append", choices=CHECKS, help="repeatable (default: all)")
    parser.add_argument("--determinism-runs", type=int, default=2, help="runs compared bitwise")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write the summaries here")
    parser.add_argument("--seconds", type=float, default=None,
                        help="wall-clock budget for all kernels together, split evenly over the kernels "
                             "still to run; a campaign cut short is reported INCOMPLETE (exit 3), never passed")
    parser.add_argument("--quiet", action="store_true", help="no per-example progress lines")
    parser.add_argument("--all-configs", action="store_true",
                        help="let our Triton kernels autotune (default: tuning='first', one configuration)")


def _names(requested: list[str] | None) -> list[str]:
    out = []
    for name in requested or ["torch"]:
        if name == "all":
            out += [n for n in targets.names() if not n.startswith("mutant:")]
        elif name == "mutants":
            out += targets.mutant_names()
        else:
            targets.get(name)  # ValueError naming the known kernels
            out.append(name)
    return out


def run(args: argparse.Namespace) -> int:
    try:
        names = _names(args.kernel)
    except ValueError as e:
        print(f"flashproof fuzz: {e}")
        return 2
    seconds = getattr(args, "seconds", None)
    if seconds is not None and not seconds > 0:
        print(f"flashproof fuzz: --seconds must be > 0, received {seconds}")
        return 2
    if not getattr(args, "all_configs", False):
        targets.set_tuning("first")  # one configuration per launch key (the default)
    else:
        targets.set_tuning("autotune")
    t_end = None if seconds is None else time.monotonic() + seconds
    summaries = []
    for i, name in enumerate(names):
        share = None if t_end is None else max((t_end - time.monotonic()) / (len(names) - i), 1.0)
        s = run_campaign(name, device=args.device, dtypes=tuple(args.dtype or DEFAULT_DTYPES), budget=args.budget,
                         seed=args.seed, profile=args.profile, checks=tuple(args.check or CHECKS),
                         determinism_runs=args.determinism_runs, seconds=share,
                         progress=None if getattr(args, "quiet", False) else _printer(name))
        print(format_summary(s), flush=True)
        summaries.append(s)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(summaries, indent=1, default=str))
    if any(s["available"] and s["deviations"] for s in summaries):
        return 1
    if not all(s["available"] for s in summaries):
        return 2
    return 0 if all(s["complete"] for s in summaries) else 3


def _printer(name: str):
    def show(p: dict) -> None:
        print(f"  [{name} {p['dtype']}] #{p['example']} {p['seconds']:.1f}s {p['status']}: {p['spec']}", flush=True)
    return show
