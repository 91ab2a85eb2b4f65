"""Turn one GPU session's raw results into the curated JSON that is published in ``benchmarks/``.

Usage::

    python3 scripts/curate_gpu_run.py --label LABEL --commit SHA [--check DIR] [--bench DIR]
        [--extra NAME=FILE.json ...] --out benchmarks/<date>-<gpu>-<label>.json

``--check DIR`` is a folder of ``scripts/gpu_session.sh`` step results (``*/gpu_check.json``,
``fuzz_*.json``, ``*.summary``); ``--bench DIR`` a folder holding ``bench/bench.json`` and the
``bench.log`` whose block-sparse table the bench printed. ``--extra`` keeps another bench's own JSON
(kvcache, fuzz throughput, ...) under ``extra[NAME]``. The raw logs stay outside git; the curated file
holds every row, the date, the GPU and the versions. ``scripts/readme_tables.py`` renders the README's
tables from the newest curated file.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpu_merge  # noqa: E402

OURS = ("triton", "triton-atomic", "torch")


def _env(path: pathlib.Path) -> dict:
    """GPU name and versions from a session's env.txt (``nvidia-smi`` csv line, then the versions line)."""
    meta = {}
    for line in path.read_text().splitlines():
        words = line.split()
        if words[:1] == ["python"] and len(words) % 2 == 0:
            meta.update(dict(zip(words[::2], words[1::2])))
        elif "," in line and "NVIDIA" in line:
            meta["gpu"] = line.split(",")[0].strip()
    return meta


def _check(res: pathlib.Path, verdict_file=None) -> dict:
    cases = []
    for f in sorted([*res.glob("gpu_check.json"), *res.glob("*/gpu_check.json")]):
        for r in json.loads(f.read_text())["results"]:
            cases.append({k: r[k] for k in ("case", "dtype", "passed", "problems", "err_over_bound", "skipped")
                          if k in r})
    fuzz = []
    for f in sorted(res.glob("fuzz_*.json")):
        for s in json.loads(f.read_text()):
            for r in s.get("results", []):
                devs = r.get("deviations", [])
                fuzz.append({"shard": f.stem, "kernel": s["kernel"], "ours": s["kernel"] in OURS,
                             "dtype": r["dtype"], "examples": r.get("examples", 0),
                             "state": "deviates" if devs else "complete" if r.get("complete") else "incomplete",
                             "worst_error_over_bound": r.get("worst_error_over_bound", {}),
                             "first_deviation": ({k: devs[0].get(k) for k in ("check", "spec", "message")}
                                                 if devs else None)})
    steps = []
    for f in sorted(res.glob("*.summary")):
        m = re.match(r"== (\S+): rc=(\d+) in (\d+)s", f.read_text().splitlines()[0])
        if m:
            steps.append({"step": m.group(1), "rc": int(m.group(2)), "seconds": int(m.group(3))})
    # the verdict is gpu_merge's, not a second rule: run it and keep its last line
    if verdict_file is not None:  # an older run's own verdict, as it printed it
        lines = [ln for ln in verdict_file.read_text().splitlines() if ln.startswith("VERDICT")]
        verdict = lines[-1] if lines else "no verdict recorded"
    elif list(res.glob("*/gpu_check.json")):
        import contextlib
        import io
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            gpu_merge.main(res)
        verdict = buf.getvalue().strip().splitlines()[-1]
    else:
        verdict = "no verdict recorded (the run predates scripts/gpu_merge.py's layout)"
    return {"verdict": verdict, "cases": cases, "fuzz": fuzz, "steps": steps}


def _sparse_rows(log: pathlib.Path) -> list:
    rows = []
    for line in log.read_text().splitlines() if log.exists() else []:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0].isdigit() and re.match(r"^[\d.]+$", cells[3]):
            d, n, causal, present, dense, sparse, ratio, gpu = cells
            rows.append({"d": int(d), "n": int(n), "causal": causal == "yes", "tiles_present": float(present),
                         "dense_ms": float(dense), "sparse_ms": float(sparse), "ratio": float(ratio),
                         "gpu_time_ratio": float(gpu)})
    return rows


def _sparse_row(r: dict) -> dict:
    """A bench.json block-sparse row (``bench.attention.bench_sparse``) in the curated form: the fields of
    ``_sparse_rows`` plus the captured (graphed) wall-clock and its ratio when the capture ran."""
    row = {"d": r["d"], "n": r["n"], "causal": r["causal"], "tiles_present": r["tiles_present"],
           "dense_ms": r["dense_ms"], "sparse_ms": r["sparse_ms"], "ratio": r["sparse_ms"] / r["dense_ms"],
           "gpu_time_ratio": r["sparse_gpu_ms"] / r["dense_gpu_ms"]}
    if "sparse_graphed_ms" in r:
        row.update(dense_graphed_ms=r["dense_graphed_ms"], sparse_graphed_ms=r["sparse_graphed_ms"],
                   graphed_ratio=r["sparse_graphed_ms"] / r["dense_graphed_ms"])
    elif "graphed_error" in r:
        row["graphed_error"] = r["graphed_error"]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--check", type=pathlib.Path)
    ap.add_argument("--bench", type=pathlib.Path)
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=FILE")
    ap.add_argument("--note", default="")
    ap.add_argument("--verdict-file", type=pathlib.Path, help="take the VERDICT line from this file")
    ap.add_argument("--date", help="the run's date when no gpu_check/bench JSON carries one")
    ap.add_argument("--env", type=pathlib.Path, help="an env.txt (GPU name and versions) when no gpu_check/bench JSON "
                    "carries them: its 'NAME, driver' line and its 'python X torch Y cuda Z triton W cudnn V' line")
    ap.add_argument("--out", type=pathlib.Path, required=True)
    a = ap.parse_args(argv)
    doc = {"label": a.label, "commit": a.commit, "note": a.note}
    meta = None
    if a.bench:
        bj = a.bench / "bench" / "bench.json"
        b = json.loads((bj if bj.exists() else a.bench / "bench.json").read_text())
        meta = b["meta"]
        # the block-sparse rows: in bench.json since the graphed rows (session 21), else the table of bench.log
        doc["bench"] = {"rows": b["rows"], "sparse": [_sparse_row(r) for r in b["sparse"]] if "sparse" in b
                        else _sparse_rows(a.bench / "bench.log")}
    if a.check:
        doc["check"] = _check(a.check, a.verdict_file)
        if meta is None:
            found = [*a.check.glob("gpu_check.json"), *a.check.glob("*/gpu_check.json")]
            meta = json.loads(found[0].read_text())["meta"] if found else None
    if meta is None and a.date:
        meta = {"date": a.date, "gpu": "NVIDIA H200", **(_env(a.env) if a.env else {})}
    for item in a.extra:
        name, _, path = item.partition("=")
        doc.setdefault("extra", {})[name] = json.loads(pathlib.Path(path).read_text())
    if meta is None:
        ap.error("give --check and/or --bench")
    doc = {"date": meta["date"], "gpu": meta["gpu"],
           "versions": {k: meta[k] for k in ("torch", "triton", "python", "cuda", "cudnn") if k in meta}, **doc}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"wrote {a.out}: {doc.get('check', {}).get('verdict', 'no check')}; "
          f"{len(doc.get('bench', {}).get('rows', []))} bench rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
