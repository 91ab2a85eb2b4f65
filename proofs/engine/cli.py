"""``flashproof prove``: discharge every obligation, require every control refuted, write the trail.

    flashproof prove [--only ID ...] [--jobs N] [--timeout S] [--deep] [--[no-]cross-check] [--force] [--out DIR]

Exit status 0 only when every name resolves, every obligation module imports, every obligation is
``proved`` and every control is ``refuted`` with a counterexample, and (with ``--cross-check``, the
default of ``--deep``) no second solver contradicts z3 on any query. ``--only`` takes obligation,
control or item ids (an obligation brings its controls; an item brings its obligations).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from . import cache, runner, trail
from .discover import collect as collect_obligations
from .status import name_errors

__all__ = ["add_arguments", "run", "select", "cross_check_on"]


def add_arguments(p) -> None:
    p.add_argument("--only", action="append", metavar="ID", default=[],
                   help="run only this obligation/control/item id (repeatable)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel worker processes")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per obligation before it is killed")
    p.add_argument("--deep", action="store_true", help="use each obligation's larger deep_bounds")
    p.add_argument("--cross-check", action=argparse.BooleanOptionalAction, default=None,
                   help="decide every z3 query again with a second solver (cvc5; Bitwuzla for floating point); "
                        "default: on with --deep, off otherwise")
    p.add_argument("--force", action="store_true", help="ignore the result cache")
    p.add_argument("--out", type=Path, default=Path("out"), help="directory for audit.json and audit.md")
    p.add_argument("--cache-dir", type=Path, default=cache.DEFAULT_DIR, help="result cache directory")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")


def cross_check_on(args) -> bool:
    """The one place the second solver is switched: ``--cross-check``/``--no-cross-check`` when
    given, else on exactly with ``--deep``."""
    return args.deep if args.cross_check is None else bool(args.cross_check)


def select(only: list[str], obligations: dict, items: dict) -> list:
    """The obligations to run for ``--only`` (all when empty). Unknown ids raise ``ValueError``."""
    if not only:
        return list(obligations.values())
    chosen: dict = {}
    for oid in only:
        if oid in obligations:
            ids = [oid] + [c.id for c in obligations.values() if c.of == oid]
        elif oid in items:
            base = list(items[oid].checked_by)
            ids = base + [c.id for c in obligations.values() if c.of in base]
        else:
            raise ValueError(f"--only {oid!r}: not an obligation, control or item id")
        for i in ids:
            if i in obligations:
                chosen[i] = obligations[i]
    return list(chosen.values())


def _line(rec: dict, k: int, n: int) -> str:
    st = rec["status"]
    mark = "ok " if rec["ok"] else "BAD"
    extra = ""
    if st == "refuted" and rec["counterexample"] is not None:
        cx = str(rec["counterexample"])
        extra = f" (counterexample {cx[:70]}{'…' if len(cx) > 70 else ''})"
    elif not rec["ok"] and rec["detail"]:
        extra = f" ({rec['detail'][:90]})"
    cached = " cached" if rec.get("cached") else ""
    return f"[{k:>3}/{n}] {mark} {st:<8} {rec['seconds']:7.2f}s{cached}  {rec['obligation']}{extra}"


def run(args) -> int:
    from flashproof.spec.registry import collect as collect_items

    t0 = time.perf_counter()
    items = collect_items()
    obligations, import_errs = collect_obligations()
    names = name_errors(items, obligations)
    try:
        chosen = select(args.only, obligations, items)
    except ValueError as e:
        print(f"flashproof prove: {e}", file=sys.stderr)
        return 2
    n = len(chosen)
    cross = cross_check_on(args)
    print(f"flashproof prove: {n} obligations/controls, {args.jobs} jobs, timeout {args.timeout:g} s"
          + (", deep bounds" if args.deep else "") + (", second solver on every z3 query" if cross else
                                                      ", z3 only (no --cross-check)"), flush=True)
    k = [0]

    def progress(rec):
        k[0] += 1
        print(_line(rec, k[0], n), flush=True)

    records = runner.execute(chosen, all_obs=obligations, jobs=args.jobs, timeout=args.timeout, deep=args.deep,
                             force=args.force, cache_dir=None if args.no_cache else args.cache_dir,
                             cross_check=cross, progress=progress)
    total = time.perf_counter() - t0
    argv = [f"--only {i}" for i in args.only] + [f"--jobs {args.jobs}", f"--timeout {args.timeout:g}"] + \
        [flag for flag, on in (("--deep", args.deep), ("--force", args.force), ("--no-cache", args.no_cache)) if on] + \
        ([] if args.cross_check is None else ["--cross-check" if args.cross_check else "--no-cross-check"])
    doc = trail.build(items, obligations, records, name_errs=names, import_errs=import_errs, total_seconds=total,
                      jobs=args.jobs, argv=argv, partial=bool(args.only), cross_check=cross)
    j, m = trail.write(doc, args.out)
    for e in names:
        print(f"name check: {e}", file=sys.stderr)
    for mod, tb in import_errs.items():
        print(f"import of {mod} failed:\n{tb}", file=sys.stderr)
    s = doc["summary"]
    x = s["solvers"]
    print(f"{s['ok']}/{s['records']} ok; items {s['items']}; total {total:.1f} s; wrote {j} and {m}")
    print(f"solvers: {x['z3_records']} records with z3 queries; two solvers {x['two_solvers']}, one solver "
          f"{x['one_solver']} ({x['agreement_rate']:.1%} agreeing second verdicts); disagreements "
          f"{x['disagreements']}; controls refuted by both {x['controls_refuted_by_both']}/{x['z3_controls']}"
          + ("" if cross else " — cross-check not run"))
    return 0 if doc["ok"] else 1
