#!/usr/bin/env bash
# The Gluon backward with dQ by TMA bulk reduce-add (issue 17) on one H200, in under 4 minutes:
#   bash scripts/gpu_tmadq.sh OUTDIR
#   (a) lab/gpu_check.py's gluon_* cases (GQA 4 and 8 causal and not, (B, N, H, D) views, packed QKV
#       slices, the older Gluon cases) in bf16 and fp16 against the float64 oracle, through the router;
#       six processes in parallel (mostly compiling);
#   (b) alone on the GPU afterwards: flashproof bench, ours vs SDPA cuDNN in one process, at d = 128 bf16,
#       16k tokens, width 2048: N = 4k / 8k / 16k non-causal, 8k causal, GQA 64/8 and 32/8 8k causal.
# (The A/B of the TMA reduce-add against the consumers' 16-byte vector reductions ran with this script's
# earlier version, commit d18a356.) Every log and JSON goes to OUTDIR; the last lines printed are one
# summary table (OUTDIR/summary.md). Exit status 0 only if every check passed and the bench ran. The
# package is installed from this checkout into /tmp/fp (no network) and run from /tmp.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: bash scripts/gpu_tmadq.sh OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PY:-python3}
BOX=${BOX:-130}  # seconds for each correctness process (they run in parallel)
T0=$(date +%s)
rm -rf /tmp/fp
$PY -m pip install -q --no-deps --no-build-isolation --target /tmp/fp "$ROOT" > "$OUT/install.log" 2>&1 \
  || { echo "install failed:"; tail -20 "$OUT/install.log"; exit 4; }
export PYTHONPATH=/tmp/fp
cd /tmp
{ date -u; git -C "$ROOT" log -1 --format='commit %H %s' 2>/dev/null | cut -c1-120
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
: > "$OUT/steps.tsv"
step() {  # step NAME SECONDS CMD...: log to OUT/NAME.log; name, rc, seconds to OUT/steps.tsv
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" >> "$OUT/steps.tsv"
  echo "== $name: rc=$rc in $(( $(date +%s) - t0 ))s"
}
GC="$PY $ROOT/lab/gpu_check.py --fuzz-budget 0 --minutes ${MINUTES:-1.9}"  # no check starts after 114 s
declare -A CASEGROUPS=(
  [older]=gluon_plain,gluon_causal_gqa,gluon_huge_logits,gluon_ties_flat
  [gqa]=gluon_gqa4,gluon_gqa8_causal,gluon_gqa8
  [layout]=gluon_bnhd,gluon_bnhd_gqa4_causal,gluon_packed_qkv_causal
)
for dt in bf16 fp16; do
  for g in "${!CASEGROUPS[@]}"; do
    step "gc_${g}_$dt" "$BOX" $GC --cases "${CASEGROUPS[$g]}" --dtypes $dt --out "$OUT/gc_${g}_$dt" &
  done
done
wait
SHAPES=128:4096:0,128:8192:0,128:16384:0,128:8192:1,128:8192:1:64/8,128:8192:1:32/8
step bench 90 $PY -m flashproof bench --shapes "$SHAPES" --providers ours,sdpa-cudnn --out "$OUT/bench"  # alone
echo "total $(( $(date +%s) - T0 ))s"
$PY - "$OUT" <<'PYEOF' | tee "$OUT/summary.md"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
steps = [l.split("\t") for l in (out / "steps.tsv").read_text().splitlines() if l]
ok = True
print("| step | rc | s | verdict |\n|---|---|---|---|")
for name, rc, secs in steps:
    verdict = ""
    if name.startswith("gc_"):
        try:
            res = json.loads((out / name / "gpu_check.json").read_text())["results"]
        except (OSError, ValueError) as e:
            res, verdict = [], f"no results ({type(e).__name__})"
        bad = [f"{r['case']}/{r.get('dtype')}: {'; '.join(r.get('problems', [])) or r.get('skipped', '')}"[:300]
               for r in res if not r.get("passed")]
        worst = max((max(r.get("err_over_bound", {}).values(), default=0) for r in res), default=0)
        verdict = verdict or (f"{len(res) - len(bad)}/{len(res)} passed, worst err/bound {worst}"
                              + ("; FAILED " + " | ".join(bad) if bad else ""))
        ok &= bool(res) and not bad and rc == "0"
    else:
        ok &= rc == "0"
    print(f"| {name} | {rc} | {secs} | {verdict} |")
try:
    rows = json.loads((out / "bench" / "bench.json").read_text())["rows"]
except (OSError, ValueError):
    rows, ok = [], False
by = {(r["n"], r["causal"], r.get("heads", ""), r["provider"]): r for r in rows}
print("\n| d=128 bf16 | N | causal | Hq/Hkv | ours bwd | cuDNN bwd | bwd ratio | ours fwd | cuDNN fwd | note |\n"
      "|---|---|---|---|---|---|---|---|---|---|")
for (n, c, h, prov), r in by.items():
    if prov != "ours":
        continue
    cd = by.get((n, c, h, "sdpa-cudnn"), {})
    ratio = r["bwd_tflops"] / cd["bwd_tflops"] if cd.get("bwd_tflops") else float("nan")
    nan = float("nan")
    print(f"| | {n} | {'yes' if c else 'no'} | {h or '='} | {r['bwd_tflops']:.0f} | {cd.get('bwd_tflops', nan):.0f} | "
          f"{ratio:.3f} | {r['fwd_tflops']:.0f} | {cd.get('fwd_tflops', nan):.0f} | {(r.get('note') or '')[:60]} |")
    ok &= "WRONG" not in (r.get("note") or "")
print(f"\ngpu_tmadq: {'PASSED' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PYEOF
exit "${PIPESTATUS[0]}"
