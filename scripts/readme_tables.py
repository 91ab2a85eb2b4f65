"""Render the README's performance tables from the newest curated run in ``benchmarks/``.

    python3 scripts/readme_tables.py          # rewrite the block between the README's markers
    python3 scripts/readme_tables.py --check  # exit 1 if the README does not say what the JSON says

"Newest" is the curated file with bench rows whose ``date`` is the latest. The tables are a view of
the JSON and nothing else: a number in the README that is not in the file cannot pass ``--check``.
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- benchmarks:begin (scripts/readme_tables.py) -->", "<!-- benchmarks:end -->"
COLUMNS = (("ours", "ours fwd / bwd"), ("ours-det", "ours deterministic"), ("sdpa-cudnn", "cuDNN (SDPA)"),
           ("sdpa-flash", "FA2 (SDPA flash)"), ("flex", "FlexAttention"))


def newest(folder: pathlib.Path = ROOT / "benchmarks") -> tuple[pathlib.Path, dict]:
    runs = [(json.loads(p.read_text()), p) for p in sorted(folder.glob("*.json"))]
    runs = [(d, p) for d, p in runs if d.get("bench", {}).get("rows")]
    if not runs:
        raise SystemExit(f"no curated run with bench rows in {folder}")
    doc, path = max(runs, key=lambda dp: dp[0]["date"])
    return path, doc


def _cell(row) -> str:
    """``fwd / bwd`` TFLOP/s; the row's note instead when the row has no time (the provider could not
    run the shape) or the bench flagged it WRONG. Other notes are information (ours' rows name the
    router's plan) and stay in the JSON."""
    if row is None:
        return "—"
    note = row.get("note") or ""
    fwd = row.get("fwd_tflops")
    if fwd is None or math.isnan(fwd) or note.startswith("WRONG"):
        return note or "—"
    bwd = row.get("bwd_tflops")
    return f"{row['fwd_tflops']:.0f} / {bwd:.0f}" if bwd is not None else f"{row['fwd_tflops']:.0f}"


def render(path: pathlib.Path, doc: dict) -> str:
    v = doc["versions"]
    rows = [r for r in doc["bench"]["rows"] if not r.get("heads") and r.get("layout", "bhnd") == "bhnd"]  # the grid
    have = [c for c in COLUMNS if any(r["provider"] == c[0] for r in rows)]
    shapes = sorted({(r["d"], r["n"], r["causal"]) for r in rows}, key=lambda s: (-s[0], s[2], s[1]))
    by = {(r["d"], r["n"], r["causal"], r["provider"]): r for r in rows}
    rel = path.relative_to(ROOT)
    out = [BEGIN, "",
           f"Run `{doc['label']}` of {doc['date']} on one {doc['gpu']} at commit `{doc['commit']}` "
           f"(torch {v.get('torch')}, Triton {v.get('triton')}, CUDA {v.get('cuda')}, cuDNN {v.get('cudnn')}); "
           f"every row in [`{rel}`]({rel}). bf16, B·N = 16k tokens, H·d = 2048, TFLOP/s forward / backward "
           "(backward counted as 2.5× the forward's FLOPs; causal halves both).", "",
           "| d | N | causal | " + " | ".join(h for _, h in have) + " |",
           "|---|---|---|" + "---|" * len(have)]
    for d, n, c in shapes:
        out.append(f"| {d} | {n} | {'yes' if c else 'no'} | "
                   + " | ".join(_cell(by.get((d, n, c, p))) for p, _ in have) + " |")
    sparse = doc["bench"].get("sparse") or []
    if sparse:
        graphed = any("graphed_ratio" in s for s in sparse)
        out += ["", "Block-sparse forward + backward against the dense call (fraction of 128×128 tiles present"
                + ("; graphed: the call wrapped by `torch.cuda.make_graphed_callables`, launches captured" if graphed
                   else "") + "):", "",
                "| d | N | causal | tiles present | dense ms | block-sparse ms | wall-clock ratio | GPU-time ratio |"
                + (" graphed ratio |" if graphed else ""), "|---|---|---|---|---|---|---|---|" + ("---|" if graphed else "")]
        for s in sparse:
            out.append(f"| {s['d']} | {s['n']} | {'yes' if s['causal'] else 'no'} | {s['tiles_present']:.3f} | "
                       f"{s['dense_ms']:.3f} | {s['sparse_ms']:.3f} | {s['ratio']:.3f} | {s['gpu_time_ratio']:.3f} |"
                       + (f" {s['graphed_ratio']:.3f} |" if "graphed_ratio" in s else " - |" if graphed else ""))
    out += ["", END]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--readme", type=pathlib.Path, default=ROOT / "README.md")
    a = ap.parse_args(argv)
    text = a.readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{a.readme} has no benchmarks block ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + render(*newest()) + tail
    if a.check:
        if new != text:
            print(f"{a.readme}'s benchmark tables differ from the newest run in benchmarks/: "
                  "run python3 scripts/readme_tables.py")
            return 1
        return 0
    a.readme.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
