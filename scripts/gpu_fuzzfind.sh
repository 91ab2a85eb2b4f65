#!/usr/bin/env bash
# The tolerance rule's floors (dS's dot products, the row sums' γ_n terms) and the torch backward's
# per-head dK/dV sums on a CUDA machine (branches fuzzfind, dvfloor; issue 14), in about 4 minutes:
#   bash scripts/gpu_fuzzfind.sh OUTDIR
# 1. regressions: the problems of tests/test_fuzz_kernels.py::FINDINGS (one allowed key, or one key
#    column with GQA, whose dV sums 8 x 129 rows: the Triton fp32 finding of 2026-12-01) examined on CUDA
#    with every check, for ours (torch on CUDA, triton) in fp32 and bf16: no deviation expected; each
#    gradient's error/bound and dv's error and bound printed. One process per (finding, dtype) for
#    triton (each compiles its own specialisations: one process did not finish them in 80 s);
# 2. in parallel with 1, an fp32 campaign of triton on CUDA with the gpu profile, seed 3, time-boxed
#    (--seconds): PASSED expected (INCOMPLETE says the box was too small), any deviation is a finding to
#    investigate (reproducer under OUTDIR/repro_*). One campaign (155 s) with 8 warm-phase workers: three
#    campaigns of 5 workers each compiled 28 variants for 110 s and examined nothing (2026-12-01);
# 3. fuzz-bench, ours (triton) bf16, 15 s timed: examples per minute with the magnitudes' row sums
#    (P rebuilt from the LSE on the oracle's device); s15a measured 675/min before them in a 30 s
#    window, 26e4c00 464/min in this 15 s one (the timed part also loads 40 cached kernels);
# 4. the row sums' cost per example on CUDA, on the bench's problems: per example examined, the time
#    spent in tolerance._row_sums, and oracles() with and without them, alternated per problem.
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

# 1. the regressions on CUDA (FINDINGS is read from the checkout's test file): REGRESSION rows
REG=$(cat <<'EOF'
import sys, time
sys.path.insert(0, sys.argv[1])
from test_fuzz_kernels import FINDINGS
from flashproof.fuzz import targets
from flashproof.fuzz.checks import examine
device, kern, dtypes, names, bad = sys.argv[2], sys.argv[3], sys.argv[4].split(","), sys.argv[5:], 0
why = targets.get(kern).unavailable(device)
if why is not None:
    print(f"REGRESSION {kern} not available: {why}")
    sys.exit(0)
for name in names or sorted(FINDINGS):
    spec = FINDINGS[name][0]
    for dtype in dtypes:
        t = time.time()
        ex = examine(targets.get(kern), spec, dtype, device)
        grads = [v for c, v in ex.verdicts if c == "gradients" and v.bound]
        ratios = " ".join(f"{v.name}:{v.error / v.bound:.3f}" for v in grads)
        dv = " ".join(f"(dv error {v.error:.3g}, bound {v.bound:.3g})" for v in grads if v.name == "dv")
        verdict = "DEVIATION" if ex.deviations else "ok"
        bad += bool(ex.deviations)
        print(f"REGRESSION {name} {kern} {dtype} {verdict} {time.time() - t:.1f}s error/bound {ratios} {dv}", flush=True)
        for d in ex.deviations:
            print("   ", d.reproducer()[:400])
sys.exit(1 if bad else 0)
EOF
)
FINDING_NAMES=$($PY - "$ROOT/tests" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from test_fuzz_kernels import FINDINGS
print(" ".join(sorted(FINDINGS)))
EOF
)
step regressions_torch 165 $PY -c "$REG" "$ROOT/tests" "$DEVICE" torch fp32,bf16 &
for f in $FINDING_NAMES; do
  for dt in fp32 bf16; do
    step "regressions_triton_${f}_$dt" 165 $PY -c "$REG" "$ROOT/tests" "$DEVICE" triton "$dt" "$f" &
  done
done

# 2. the fp32 gpu-profile campaign of triton on CUDA, beside the regressions (its warm phase shares the cores)
step campaign_triton_fp32_s3 170 $PY -m flashproof fuzz --kernel triton --dtype fp32 --profile gpu --seed 3 \
    --device "$DEVICE" --budget 300 --seconds 155 --workers 8 --quiet --repro-dir "$OUT/repro_triton_s3" \
    --json "$OUT/campaign_triton_fp32_s3.json" &
wait
cat "$OUT"/regressions_*.log > "$OUT/regressions.log"

# 3. throughput of ours after the change, alone on the GPU (its warm phase compiles seed 0's launches)
step bench_triton_bf16 50 $PY -m flashproof fuzz-bench --kernel triton --dtype bf16 --seconds 15 --device "$DEVICE" \
    --json "$OUT/bench_triton_bf16.json"

# 4. what the row sums cost per example on CUDA: the bench's problems (triton, gpu profile, seed 0, bf16;
#    their kernels cached by 3), each examined with every check while tolerance._row_sums is timed
#    (synchronised), then oracles() alone with the row sums as shipped and replaced by zeros (the cost
#    before them), alternated per problem
step cost_row_sums 45 $PY - "$DEVICE" 100 <<'EOF'
import sys, time, warnings
import torch
from hypothesis import HealthCheck, given, settings
from flashproof.fuzz import oracle, targets, tolerance
from flashproof.fuzz.campaign import GPU_ORACLE_WORK, PROFILES, _strategy
from flashproof.fuzz.checks import examine
from flashproof.fuzz.problem import build, lse_cotangent
warnings.filterwarnings("ignore")
device, n = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(1)
kern = targets.get("triton") if targets.get("triton").unavailable(device) is None else targets.get("torch")
specs = []
@settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(_strategy(kern, device, dict(PROFILES["gpu"]), seed=0))
def collect(s):
    specs.append(s)
collect()
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
real, zero = tolerance._row_sums, (lambda *a, **kw: tolerance.RowSums(0.0, 0.0, 0.0))
spent = [0.0]
def timed(*a, **kw):
    sync(); t = time.perf_counter(); r = real(*a, **kw); sync(); spent[0] += time.perf_counter() - t
    return r
tolerance._row_sums = timed
for s in specs[:3]:
    examine(kern, s, "bf16", device, max_work=GPU_ORACLE_WORK)  # first calls: cache loads, cuBLAS
spent[0] = 0.0
sync(); t0 = time.perf_counter()
done = 0
for s in specs:  # at most 20 s, so the step ends inside its box on any machine
    examine(kern, s, "bf16", device, max_work=GPU_ORACLE_WORK)
    done += 1
    if time.perf_counter() - t0 > 20:
        break
sync(); total = time.perf_counter() - t0
def orc(p, fn):
    tolerance._row_sums = fn
    sync(); t = time.perf_counter(); oracle.oracles(p, device=device, max_work=GPU_ORACLE_WORK); sync()
    return time.perf_counter() - t
print(f"COST {kern.name} bf16 {device}: {done} examples, {1e3 * total / done:.1f} ms per example examined, of which the "
      f"row sums {1e3 * spent[0] / done:.2f} ms ({100 * spent[0] / total:.1f} %)", flush=True)
ta = tb = 0.0
t1, m = time.perf_counter(), 0
for i, s in enumerate(specs[:done]):  # the same problems, at most 10 s
    p = build(s).rounded(torch.bfloat16)._replace(dlse=lse_cotangent(s))
    pair = (orc(p, zero), orc(p, real))[::-1] if i % 2 else (orc(p, real), orc(p, zero))
    ta, tb, m = ta + pair[0], tb + pair[1], m + 1
    if time.perf_counter() - t1 > 10:
        break
tolerance._row_sums = real
print(f"COST oracles() alone, {m} problems: {1e3 * ta / m:.2f} ms with the row sums, {1e3 * tb / m:.2f} ms without "
      f"(+{1e3 * (ta - tb) / m:.2f} ms)")
EOF

$PY - "$OUT" "$(( $(date +%s) - T0 ))" <<'EOF' | tee "$OUT/summary.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"gpu_fuzzfind: total {sys.argv[2]} s")
print(f"{'step':<52} {'rc':>4} {'secs':>5}  result")
for line in sorted((out / "steps.tsv").read_text().splitlines()):
    name, rc, secs = line.split("\t")
    result = ""
    p = out / f"{name}.json"
    if name.startswith("regressions"):
        rows = [l for l in (out / f"{name}.log").read_text().splitlines()
                if l.startswith("REGRESSION") and "not available" not in l]
        result = f"{sum('DEVIATION' in r for r in rows)} deviations in {len(rows)} examinations"
    elif name.startswith("cost"):
        result = " ".join(l for l in (out / f"{name}.log").read_text().splitlines() if l.startswith("COST"))[:300]
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
    print(f"{name:<52} {rc:>4} {secs:>5}  {result or '(see ' + name + '.log)'}")
print()
print("\n".join(l for l in (out / "regressions.log").read_text().splitlines() if l.startswith(("REGRESSION", "    "))))
EOF
