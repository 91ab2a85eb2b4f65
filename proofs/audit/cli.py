"""``flashproof audit``: the browsable audit trail (HTML + Markdown + JSON) in one offline folder.

    flashproof audit [--trail out/audit.json] [--out out/audit] [--prove | --no-prove] [--jobs N]
                     [--cache-dir .prove-cache | --no-cache] [--strict]

Reads the registry (``flashproof.spec``), the obligations (``flashproof.proofs``), the results of
``flashproof prove`` (``--trail``) and recomputes the claims ledger; writes ``index.html`` and its
``static/`` folder (open it from disk, no server), ``index.md`` + ``graph.svg`` (for reviews) and ``index.json`` (for machines,
schema ``flashproof.audit-report/1``, see ``docs/audit.md``).

When the trail is missing (a fresh checkout) the proofs are run first (``flashproof prove --out
<the trail's folder> --cache-dir <--cache-dir>``, which reuses its result cache, or ``--no-cache``);
``--no-prove`` renders whatever exists, every item then ``unchecked``. Exit status: 0 when the
report was written (``--strict``: and every item/claim is in order); 2 for a usage error or a file
that is not a trail.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

__all__ = ["add_arguments", "run", "provenance", "write_report"]


TRAIL_NAME = "audit.json"  # what `flashproof prove --out DIR` writes for a full run


def add_arguments(p) -> None:
    from flashproof.proofs.engine.args import directory, file_path, positive_int

    p.add_argument("--trail", type=file_path, default=Path("out") / TRAIL_NAME, help="results JSON of `flashproof prove`")
    p.add_argument("--out", type=directory, default=Path("out/audit"), help="folder for index.html/.md/.json")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--prove", action="store_true", help="run `flashproof prove` first (default when --trail is missing)")
    g.add_argument("--no-prove", action="store_true", help="never run the proofs; render what exists")
    p.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1,
                   help="parallel jobs (≥ 1) for `flashproof prove`")
    p.add_argument("--cache-dir", type=directory, default=Path(".prove-cache"),
                   help="the prover's result cache: results under the current content hash count as fresh evidence")
    p.add_argument("--no-cache", action="store_true", help="use the trail's records only")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 unless every item is checked/fully checked/assumed, no problem is listed "
                        "and every recomputed claim matches the ledger")


def _git(root: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def provenance() -> dict:
    """Date, flashproof commit (``+dirty`` when tracked files differ from it), checker versions, machine."""
    from flashproof.proofs.engine.cache import versions

    root = Path(__file__).resolve().parents[2]
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        commit = "unknown (not a git checkout)"
    elif _git(root, "status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    v = versions()
    return {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
            "python": v.get("python"), "z3": v.get("z3"), "sympy": v.get("sympy"),
            "machine": f"{platform.node()} · {platform.system()} {platform.release()} {platform.machine()} · "
                       f"{_cpu_model()} · {os.cpu_count()} CPUs"}


def _load_trail(path: Path) -> dict | None:
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("flashproof.audit/"):
        raise ValueError(f"{path}: expected a `flashproof prove` trail (schema flashproof.audit/1), "
                         f"received schema {doc.get('schema') if isinstance(doc, dict) else type(doc).__name__!r}")
    return doc


def build_report(doc: dict | None, cache_dir: Path | None = Path(".prove-cache"),
                 trail: Path = Path("out") / TRAIL_NAME) -> dict:
    """Registry + obligations + trail (+ the prover's result cache) + ledger → the report dict;
    ``trail`` is the path the trail was read from (named in the report's messages)."""
    from flashproof.spec.registry import collect as collect_items

    from . import model as audit_model
    from flashproof.proofs.ledger.verdict import ledger
    from flashproof.proofs.engine.discover import collect as collect_obligations

    items = collect_items()
    obligations, _ = collect_obligations()
    prov = dict(provenance(), trail=str(trail), cache_dir=str(cache_dir) if cache_dir is not None else None)
    return audit_model.build(items, obligations, doc, ledger(), prov, cache_dir=cache_dir, trail=str(trail))


def write_report(report: dict, out: Path) -> Path:
    """Write index.html (with its static/ folder), index.md, graph.svg and index.json under ``out``;
    return the HTML path."""
    from . import html as audit_html, md as audit_md
    from .svg import graph_svg

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    g = report["graph"]
    (out / "graph.svg").write_text(graph_svg(g["nodes"], g["edges"]) + "\n", encoding="utf-8")
    (out / "index.md").write_text(audit_md.render(report, "graph.svg"), encoding="utf-8")
    (out / "index.json").write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    html = out / "index.html"
    html.write_text(audit_html.render(report), encoding="utf-8")
    audit_html.copy_static(out)
    return html


def _strict_ok(report: dict) -> bool:
    good = {"checked", "fully-checked", "assumed"}
    items_ok = all(it["status"] in good for sec in report["sections"] for it in sec["items"])
    claims_ok = all(r["agrees"] is not False and (r["obligation"] is None or r["obligation"]["state"] == "ok")
                    for r in report["ledger"])
    return items_ok and claims_ok and not report["problems"]


def prove_command(args) -> list[str]:
    """The ``flashproof prove`` argv that writes ``args.trail`` with the audit's cache settings."""
    cmd = ["prove", "--jobs", str(args.jobs), "--out", str(Path(args.trail).parent)]
    return cmd + (["--no-cache"] if args.no_cache else ["--cache-dir", str(args.cache_dir)])


def run(args) -> int:
    trail = Path(args.trail)
    must_prove = args.prove or (not args.no_prove and not trail.exists())
    if must_prove and trail.name != TRAIL_NAME:
        print(f"flashproof audit: --trail {trail}: `flashproof prove --out DIR` writes DIR/{TRAIL_NAME}, so a "
              f"trail to prove into must be named {TRAIL_NAME} (or pass --no-prove to render {trail} as it is)",
              file=sys.stderr)
        return 2
    if must_prove:
        cmd = prove_command(args)
        why = "--prove" if args.prove else f"{trail} does not exist"
        print(f"flashproof audit: {why}; running flashproof " + " ".join(cmd), flush=True)
        rc = subprocess.run([sys.executable, "-m", "flashproof", *cmd]).returncode
        if rc == 2:
            print(f"flashproof audit: `flashproof {' '.join(cmd)}` rejected its arguments (exit 2)", file=sys.stderr)
            return 2
        if rc != 0:
            print(f"flashproof audit: `flashproof prove` exited {rc}; the report shows what failed in {trail}",
                  file=sys.stderr)
    try:
        doc = _load_trail(trail)
    except ValueError as e:
        print(f"flashproof audit: {e}", file=sys.stderr)
        return 2
    report = build_report(doc, None if args.no_cache else args.cache_dir, trail=trail)
    html = write_report(report, args.out)
    s = report["summary"]
    print(f"flashproof audit: read {trail if doc is not None else f'no trail ({trail} missing)'}"
          + ("" if args.no_cache else f" and the result cache {args.cache_dir}"))
    print("flashproof audit: items " + ", ".join(f"{k} {v}" for k, v in s["items"].items() if v)
          + "; claims " + ", ".join(f"{k} {v}" for k, v in s["ledger"].items()))
    for p in report["problems"]:
        print(f"  problem: {p}")
    print(f"flashproof audit: wrote {html} (+ index.md, index.json, graph.svg, static/)")
    return 0 if (not args.strict or _strict_ok(report)) else 1
