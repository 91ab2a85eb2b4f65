"""Merge the parallel steps of ``scripts/gpu_session.sh`` into one verdict.

Usage: python3 scripts/gpu_merge.py RESULTS_DIR. Reads every ``*/gpu_check.json`` (feature cases,
poison, determinism), every ``fuzz_*.json`` (campaign summaries) and every ``*.summary`` (a step's
exit status). Our kernels PASS only if every case passed (a skipped or missing case is not a pass),
every shard of our fuzz campaign is complete with no deviation, and every step exited 0 (third-party
fuzz steps exit 1 when they deviate: those are findings about someone else's kernel, listed, not failures).
"""
from __future__ import annotations

import json
import pathlib
import re
import sys


def main(res: pathlib.Path) -> int:
    problems, lines = [], []
    cases = []
    for f in sorted(res.glob("*/gpu_check.json")):
        for r in json.loads(f.read_text())["results"]:
            cases.append(r)
            word = ("PASS" if r.get("passed") else "FAIL" if "passed" in r else "HARNESS" if "harness_error" in r
                    else "SKIP")   # a harness error: the check did not run, not a finding about the kernel
            worst = max(r.get("err_over_bound", {}).values(), default="")
            lines.append(f"{word:4} {r['case']:28} {r.get('dtype', ''):5} {worst!s:8} "
                         + "; ".join(r.get("problems", [])) + r.get("harness_error", "") + r.get("skipped", ""))
            if word != "PASS":
                problems.append(f"case {r['case']} {r.get('dtype', '')}: {word}")
    lines.append("")
    fuzz_examples = {}
    for f in sorted(res.glob("fuzz_*.json")):
        for s in json.loads(f.read_text()):
            ours = s["kernel"] in ("triton", "triton-atomic", "torch")
            for r in s.get("results", []):
                n = r.get("examples", 0)
                devs = r.get("deviations", [])
                state = ("DEVIATES" if devs else "complete" if r.get("complete") else "INCOMPLETE")
                lines.append(f"fuzz {f.stem:28} {s['kernel']:15} {r['dtype']:5} {n:4} examples  {state}"
                             + (f"  first: {devs[0].get('check')} {devs[0].get('spec', '')}"[:200] if devs else ""))
                if ours:
                    fuzz_examples[r["dtype"]] = fuzz_examples.get(r["dtype"], 0) + n
                    if state != "complete":
                        problems.append(f"fuzz {f.stem} {r['dtype']}: {state}")
            if not s.get("available", True):
                lines.append(f"fuzz {f.stem:28} {s['kernel']:15} not available: {s.get('reason')}")
    lines.append("")
    for f in sorted(res.glob("*.summary")):
        head = f.read_text().splitlines()[0]
        m = re.match(r"== (\S+): rc=(\d+)", head)
        lines.append(head)
        if m and m.group(2) != "0" and not m.group(1).startswith("fuzz_third_party") and not m.group(1).startswith("bench"):
            problems.append(f"step {m.group(1)} exited {m.group(2)}")
    print("\n".join(lines))
    print(f"\nour kernel's fuzz examples (all shards): {fuzz_examples}; feature/poison/determinism records: {len(cases)}")
    print("VERDICT: " + ("PASSED" if not problems and cases else "NOT PASSED: " + "; ".join(problems or ["no case ran"])))
    return 0 if not problems and cases else 1


if __name__ == "__main__":
    raise SystemExit(main(pathlib.Path(sys.argv[1])))
