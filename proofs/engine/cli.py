"""``flashproof prove``: discharge every obligation, require every control refuted, write the trail.

    flashproof prove [--only ID ...] [--list] [--jobs N] [--timeout S] [--deep] [--[no-]cross-check] [--force] [--out DIR]

Exit status 0 only when every name resolves, every obligation module imports, every obligation is
``proved`` and every control is ``refuted`` with a counterexample, and (with ``--cross-check``, the
default of ``--deep``) no second solver contradicts z3 on any query; 2 for a usage error (a bad
argument or an unknown ``--only`` id), found before anything runs. ``--only`` takes obligation,
control or item ids (an obligation brings its controls; an item brings its obligations). A full run
writes ``out/audit.json``; a partial one (``--only``) writes ``out/audit-partial.json`` so the full
trail is never overwritten, unless ``--out DIR`` names the folder (then ``DIR/audit.json``).
``--list`` prints the selected ids, their kind and the items they check, and runs nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from . import cache, runner, trail
from .args import directory, positive_int, positive_seconds, unknown_ids
from .discover import collect as collect_obligations
from .status import name_errors

__all__ = ["add_arguments", "run", "select", "only_errors", "valid_ids", "trail_target", "listing", "DEFAULT_OUT", "cross_check_on"]

DEFAULT_OUT = Path("out")


def add_arguments(p) -> None:
    p.add_argument("--only", action="append", metavar="ID", default=[],
                   help="run only this obligation/control/item id (repeatable)")
    p.add_argument("--list", action="store_true",
                   help="print the selected ids (all, or --only's), their kind and the items they check; run nothing")
    p.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, help="parallel worker processes (≥ 1)")
    p.add_argument("--timeout", type=positive_seconds, default=60.0,
                   help="seconds (> 0) per obligation before it is killed")
    p.add_argument("--deep", action="store_true", help="use each obligation's larger deep_bounds")
    p.add_argument("--cross-check", action=argparse.BooleanOptionalAction, default=None,
                   help="decide every z3 query again with a second solver (cvc5; Bitwuzla for floating point); "
                        "default: on with --deep, off otherwise")
    p.add_argument("--force", action="store_true", help="ignore the result cache")
    p.add_argument("--out", type=directory, default=None,
                   help="folder for audit.json and audit.md (default: out/; a partial run without --out "
                        "writes out/audit-partial.json and out/audit-partial.md)")
    p.add_argument("--cache-dir", type=directory, default=cache.DEFAULT_DIR, help="result cache directory")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")


def valid_ids(obligations: dict, items: dict) -> list[str]:
    """What ``--only`` accepts: obligation and control ids, and the ids of items that something checks
    (an assumption, or an item nothing checks, would select nothing)."""
    return sorted(set(obligations) | {i for i, it in items.items() if it.checked_by})


def only_errors(only: list[str], obligations: dict, items: dict) -> list[str]:
    """One message per ``--only`` id that would select nothing: an assumption or an item nothing
    checks (said so), or an unknown id (with its close matches, else the checked items' ids)."""
    empty = [i for i in only if i in items and not items[i].checked_by]
    msgs = [f"--only {i!r}: " + ("an assumption (trusted, nothing checks it)" if items[i].kind == "assumption"
                                 else "an item that no obligation checks") + ", so it selects nothing" for i in empty]
    return msgs + unknown_ids([i for i in only if i not in empty], valid_ids(obligations, items),
                              show=[i for i, it in items.items() if it.kind != "assumption" and it.checked_by])


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
        elif oid in items and items[oid].checked_by:
            base = list(items[oid].checked_by)
            ids = base + [c.id for c in obligations.values() if c.of in base]
        else:
            raise ValueError(unknown_ids([oid], valid_ids(obligations, items))[0])
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
    cached = f" cached from run {rec.get('cached_from')}" if rec.get("cached") else ""
    return f"[{k:>3}/{n}] {mark} {st:<8} {rec['seconds']:7.2f}s{cached}  {rec['obligation']}{extra}"


def trail_target(out: Path | None, partial: bool) -> tuple[Path, str]:
    """(folder, file stem) of the trail: ``--out`` as given, else ``out/`` with ``audit`` for a full
    run and ``audit-partial`` for ``--only``, so that a partial run never replaces the full trail."""
    if out is not None:
        return Path(out), "audit"
    return DEFAULT_OUT, "audit-partial" if partial else "audit"


def listing(chosen: list) -> list[str]:
    """One line per obligation/control: id, kind, the items it checks (a control: the obligation it
    must refute a mutant of)."""
    width = max((len(o.id) for o in chosen), default=0)
    lines = []
    for o in chosen:
        what = f"control     of {o.of}" if o.of else "obligation  checks " + ", ".join(o.checks)
        lines.append(f"{o.id:<{width}}  {what}")
    return lines


def run(args) -> int:
    from flashproof.spec.registry import collect as collect_items

    from .progress import Progress

    t0 = time.perf_counter()
    items = collect_items()
    obligations, import_errs = collect_obligations()
    names = name_errors(items, obligations)
    bad = only_errors(args.only, obligations, items)
    if bad:
        for msg in bad:
            print(f"flashproof prove: {msg}", file=sys.stderr)
        return 2
    chosen = select(args.only, obligations, items)
    if args.list:
        try:
            for line in listing(chosen):
                print(line)
            sys.stdout.flush()
        except BrokenPipeError:  # `flashproof prove --list | head`
            sys.stdout = open(os.devnull, "w")
        return 0
    out_dir, stem = trail_target(args.out, bool(args.only))
    n = len(chosen)
    cross = cross_check_on(args)
    print(f"flashproof prove: {n} obligations/controls, {args.jobs} jobs, timeout {args.timeout:g} s"
          + (", deep bounds" if args.deep else "")
          + (", second solver on every z3 query" if cross else ", z3 only (no --cross-check)")
          + f"; trail {out_dir / (stem + '.json')}", flush=True)
    bar = Progress(n)
    k = [0]

    def progress(rec):
        k[0] += 1
        bar.step(_line(rec, k[0], n), cached=bool(rec.get("cached")))

    try:
        records = runner.execute(chosen, all_obs=obligations, jobs=args.jobs, timeout=args.timeout, deep=args.deep,
                                 force=args.force, cache_dir=None if args.no_cache else args.cache_dir,
                                 cross_check=cross, progress=progress)
    finally:
        bar.close()
    total = time.perf_counter() - t0
    argv = [f"--only {i}" for i in args.only] + [f"--jobs {args.jobs}", f"--timeout {args.timeout:g}"] + \
        [flag for flag, on in (("--deep", args.deep), ("--force", args.force), ("--no-cache", args.no_cache)) if on] + \
        ([] if args.cross_check is None else ["--cross-check" if args.cross_check else "--no-cross-check"])
    doc = trail.build(items, obligations, records, name_errs=names, import_errs=import_errs, total_seconds=total,
                      jobs=args.jobs, argv=argv, partial=bool(args.only), cross_check=cross)
    j, m = trail.write(doc, out_dir, stem=stem)
    for e in names:
        print(f"name check: {e}", file=sys.stderr)
    for mod, tb in import_errs.items():
        print(f"import of {mod} failed:\n{tb}", file=sys.stderr)
    s = doc["summary"]
    x = s["solvers"]
    print(f"{s['ok']}/{s['records']} ok; items {s['items']}; total {total:.1f} s; wrote {j} and {m}")
    print(f"solvers: {x['z3_records']} records with z3 queries; two solvers {x['two_solvers']}, one solver "
          f"{x['one_solver']} ({x['agreement_rate']:.1%} agreeing second verdicts; obligations alone "
          f"{x['obligations_two_solvers']}/{x['z3_obligations']}, {x['obligations_agreement_rate']:.1%}); disagreements "
          f"{x['disagreements']}; controls refuted by both {x['controls_refuted_by_both']}/{x['z3_controls']}"
          + ("" if cross else " — cross-check not run"))
    return 0 if doc["ok"] else 1
