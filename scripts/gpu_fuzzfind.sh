#!/usr/bin/env bash
# The tolerance rule's dS floor and the torch backward's per-head dK/dV sums on a CUDA machine (branch
# fuzzfind, issue 14), under 5 minutes:
#   bash scripts/gpu_fuzzfind.sh OUTDIR
# 1. regressions: the problems of tests/test_fuzz_kernels.py::FINDINGS (one allowed key or one key column
#    with GQA; found on the CPU) examined on CUDA with every check, for ours (torch on CUDA, triton) in fp32 and
#    bf16: no deviation expected; the gradients' error/bound printed;
# 2. fp32 campaigns on CUDA with the gpu profile (the profile the CPU finding came from): triton seeds 3
#    and 4, torch seed 3, in parallel, each time-boxed (--seconds): PASSED or INCOMPLETE expected, any
#    deviation is a finding to investigate (reproducer under OUTDIR/repro_*);
# 3. fuzz-bench, ours (triton) bf16, 30 s timed: the examples per minute after the magnitudes moved to the
#    oracle's device (M_dS is an |dO| @ |V|^T reduction); BENCHMARKS.md had 316/min for ours.
# The package is installed from this checkout into /tmp/fp (no network) and run from /tmp with
# PYTHONPATH=/tmp/fp. OUTDIR gets env.txt, one .log (and .json) per step, summary.txt (printed at the end).
set -u
OUT=${1:?usage: bash scripts/gpu_fuzzfind.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}  # a dry run of the script's plumbing on a machine without CUDA: DEVICE=cpu FP=/tmp/x
FP=${FP:-/tmp/fp}       # where the package is installed
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
rm -rf "$FP"
$PY -m pip install -q --no-deps --no-build-isolation --target "$FP" "$ROOT" > "$OUT/install.log" 2>&1 \
  || { echo "install failed:"; tail -20 "$OUT/install.log"; exit 4; }
export PYTHONPATH=$FP
cd /tmp
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  $PY -c "import flashproof, os; print('flashproof from', os.path.dirname(flashproof.__file__))"
  git -C "$ROOT" log -1 --oneline 2>/dev/null
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
: > "$OUT/steps.tsv"
step() {  # step NAME SECONDS CMD...: run CMD time-boxed, log to OUT/NAME.log, one row in steps.tsv
  local name=$1 secs=$2; shift 2
  local t=$(date +%s)
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t ))" >> "$OUT/steps.tsv"
}

# 1. the regressions on CUDA (FINDINGS is read from the checkout's test file)
step regressions 80 $PY - "$ROOT/tests" "$DEVICE" <<'EOF'
import sys, time
sys.path.insert(0, sys.argv[1])
from test_fuzz_kernels import FINDINGS
from flashproof.fuzz import targets
from flashproof.fuzz.checks import examine
device, bad = sys.argv[2], 0
for name, (spec, _, _) in sorted(FINDINGS.items()):
    for kern in ("torch", "triton"):
        why = targets.get(kern).unavailable(device)
        if why is not None:
            print(f"REGRESSION {name} {kern} not available: {why}")
            continue
        for dtype in ("fp32", "bf16"):
            t = time.time()
            ex = examine(targets.get(kern), spec, dtype, device)
            ratios = " ".join(f"{v.name}:{v.error / v.bound:.3f}" for c, v in ex.verdicts if c == "gradients" and v.bound)
            verdict = "DEVIATION" if ex.deviations else "ok"
            bad += bool(ex.deviations)
            print(f"REGRESSION {name} {kern} {dtype} {verdict} {time.time() - t:.1f}s error/bound {ratios}")
            for d in ex.deviations:
                print("   ", d.reproducer()[:400])
sys.exit(1 if bad else 0)
EOF

# 2. fp32 gpu-profile campaigns on CUDA, in parallel (warm phases share the 16 cores)
camp() {  # camp KERNEL SEED
  step "campaign_$1_fp32_s$2" 130 $PY -m flashproof fuzz --kernel "$1" --dtype fp32 --profile gpu --seed "$2" \
      --device "$DEVICE" --budget 1000 --seconds 110 --workers 5 --quiet --repro-dir "$OUT/repro_$1_s$2" --json "$OUT/campaign_$1_fp32_s$2.json"
}
camp triton 3 & camp triton 4 & camp torch 3 &
wait

# 3. throughput of ours after the change, alone on the GPU
step bench_triton_bf16 80 $PY -m flashproof fuzz-bench --kernel triton --dtype bf16 --seconds 30 --device "$DEVICE" \
    --json "$OUT/bench_triton_bf16.json"

$PY - "$OUT" "$(( $(date +%s) - T0 ))" <<'EOF' | tee "$OUT/summary.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"gpu_fuzzfind: total {sys.argv[2]} s")
print(f"{'step':<26} {'rc':>4} {'secs':>5}  result")
for line in sorted((out / "steps.tsv").read_text().splitlines()):
    name, rc, secs = line.split("\t")
    result = ""
    p = out / f"{name}.json"
    if name == "regressions":
        rows = [l for l in (out / "regressions.log").read_text().splitlines()
                if l.startswith("REGRESSION") and "not available" not in l]
        result = f"{sum('DEVIATION' in r for r in rows)} deviations in {len(rows)} examinations"
    elif p.exists() and name.startswith("campaign"):
        for s in json.loads(p.read_text()):
            n = sum(r.get("examples", 0) for r in s["results"])
            verdict = ("PASSED" if s.get("passed") else "not available: " + str(s.get("reason")) if not s.get("available")
                       else s.get("device_fault") or s.get("harness_error")
                       or ("DEVIATIONS" if s["deviations"] else "INCOMPLETE " + str(s.get("incomplete", ""))))
            result = f"{n} examples, {len(s['deviations'])} deviations: {str(verdict)[:70]}"
            for d in s["deviations"][:3]:
                result += "\n      " + d["reproducer"][:300]
    elif p.exists():
        for r in json.loads(p.read_text()):
            result = f"{r['examples']} examples in {r['seconds']} s timed = {r['examples_per_min']}/min, {r['deviations']} deviations"
    if rc == "124":
        result = "TIMED OUT; " + result
    print(f"{name:<26} {rc:>4} {secs:>5}  {result or '(see ' + name + '.log)'}")
print()
print("\n".join(l for l in (out / "regressions.log").read_text().splitlines() if l.startswith(("REGRESSION", "    "))))
EOF
