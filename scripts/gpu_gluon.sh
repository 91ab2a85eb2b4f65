#!/usr/bin/env bash
# The Hopper (Gluon) kernels on one H200, in 6–7 minutes:  bash scripts/gpu_gluon.sh OUTDIR
#   (a) lab/gpu_check.py's gluon_* cases (GQA 4 and 8 causal and not, (B, N, H, D) views, packed QKV
#       slices, d = 64, block-sparse, the older Gluon cases) in bf16 and fp16 against the float64 oracle, the router's plan
#       and the results' layouts asserted;
#   (b) flashproof fuzz --kernel triton-atomic --profile gluon (GQA up to 8, (B, N, H, D) views), bf16
#       and fp16, three hypothesis seeds each, and --profile gluon-sparse (the block-sparse Gluon kernels),
#       one seed each;
#   (c) alone on the GPU afterwards: flashproof bench, ours vs SDPA cuDNN in one process, for
#       Hq/Hkv = 32/8 and 64/8 causal at 8k and 16k, and contiguous vs (B, N, H, D) at d = 128, 8k.
# (a) and (b) run as parallel processes (their time is mostly compiling). Every log, JSON and table goes
# to OUTDIR; the last lines printed are one summary table (also OUTDIR/summary.md). Exit status 0 only
# if every check passed, every fuzz shard completed without a deviation and the bench ran.
# The package is installed from this checkout into /tmp/fp (no network) and run from /tmp, so the
# steps import the installed package; lab/gpu_check.py is run from the checkout.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: bash scripts/gpu_gluon.sh OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PY:-python3}
BOX=${BOX:-300}  # seconds for each correctness process (they run in parallel). 170 (with gpu_check's budget
#                  2 min) left 15 of 38 cases "time budget spent" once the block-sparse group and campaigns
#                  shared the 16 cores (2026-12-03 09:55 UTC, BENCHMARKS.md): the checks compile for most of it
T0=$(date +%s)
rm -rf /tmp/fp
$PY -m pip install -q --no-deps --no-build-isolation --target /tmp/fp "$ROOT" > "$OUT/install.log" 2>&1 \
  || { echo "install failed:"; tail -20 "$OUT/install.log"; exit 4; }
export PYTHONPATH=/tmp/fp
cd /tmp
{ date -u; git -C "$ROOT" log -1 --format='commit %H %s' 2>/dev/null | cut -c1-120
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
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
GC="$PY $ROOT/lab/gpu_check.py --fuzz-budget 0 --minutes $(( (BOX - 30) / 60 ))"  # its own budget ends first
declare -A CASEGROUPS=(
  [older]=gluon_plain,gluon_causal_gqa,gluon_huge_logits,gluon_ties_flat
  [gqa]=gluon_gqa4,gluon_gqa8_causal,gluon_gqa8
  [layout]=gluon_bnhd,gluon_bnhd_gqa4_causal,gluon_packed_qkv_causal,gluon_block_sparse_bnhd_causal
  [d64]=gluon_d64,gluon_d64_causal_gqa4,gluon_d64_huge_logits,gluon_d64_bnhd_gqa8_causal
  [sparse]=gluon_block_sparse,gluon_block_sparse_causal_gqa4,gluon_block_sparse_d64_causal,gluon_block_sparse_d64_gqa8_heads_shared
)  # at most 4 cases a process: with 5, the sparse group's last case ran out of its budget at BOX=210 (2026-12-04)
for dt in bf16 fp16; do
  for g in "${!CASEGROUPS[@]}"; do
    step "gc_${g}_$dt" "$BOX" $GC --cases "${CASEGROUPS[$g]}" --dtypes $dt --out "$OUT/gc_${g}_$dt" &
  done
  # three hypothesis seeds of a small budget each: on the H200 (2026-12-01 13:59 UTC) an example took
  # 0.4-52 s (mostly compiling new specialisations), and budget 25 ended INCOMPLETE after 11-12
  for seed in 0 1 2; do
    step "fuzz_${dt}_s$seed" "$BOX" $PY -m flashproof fuzz --kernel triton-atomic --profile gluon --dtype $dt \
        --seed $seed --budget "${FUZZ_BUDGET:-8}" --seconds $(( BOX - 20 )) --json "$OUT/fuzz_${dt}_s$seed.json" &
  done
  step "fuzz_sparse_${dt}" "$BOX" $PY -m flashproof fuzz --kernel triton-atomic --profile gluon-sparse --dtype $dt \
      --seed 0 --budget 25 --seconds $(( BOX - 20 )) --json "$OUT/fuzz_sparse_${dt}.json" &
done
wait
SHAPES=128:8192:1:32/8,128:16384:1:32/8,128:8192:1:64/8,128:16384:1:64/8
SHAPES=$SHAPES,128:8192:0,128:8192:0:bnhd,128:8192:1,128:8192:1:bnhd
step bench 130 $PY -m flashproof bench --shapes "$SHAPES" --providers ours,sdpa-cudnn --out "$OUT/bench"
echo "total $(( $(date +%s) - T0 ))s"
$PY - "$OUT" <<'PYEOF' | tee "$OUT/summary.md"
import json, math, pathlib, sys
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
    elif name.startswith("fuzz_"):
        try:
            s = json.loads((out / f"{name}.json").read_text())[0]
            ex = sum(r.get("examples", 0) for r in s.get("results", []))
            dev = [d.get("check") for d in s.get("deviations", [])]
            verdict = (f"{'PASS' if s.get('passed') else 'FAIL'}: {ex} examples, {len(dev)} deviations {dev[:4]}"
                       + ("" if s.get("complete", True) else f", INCOMPLETE ({s.get('incomplete', '')[:80]})")
                       + (f", harness error {s['harness_error'][:120]}" if s.get("harness_error") else ""))
            ok &= bool(s.get("passed"))
        except (OSError, ValueError, IndexError) as e:
            verdict, ok = f"no summary ({type(e).__name__})", False
    else:
        ok &= rc == "0"
    print(f"| {name} | {rc} | {secs} | {verdict} |")
try:
    rows = json.loads((out / "bench" / "bench.json").read_text())["rows"]
except (OSError, ValueError):
    rows, ok = [], False
by = {(r["n"], r["causal"], r.get("heads", ""), r.get("layout", "bhnd"), r["provider"]): r for r in rows}
f = lambda x: "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f}"  # noqa: E731
q = lambda a, b: "" if not a or not b or math.isnan(a) or math.isnan(b) else f"{a / b:.3f}"  # noqa: E731
print("\n| d=128 | N | causal | Hq/Hkv | layout | ours fwd | cuDNN fwd | fwd ratio | ours bwd | cuDNN bwd | bwd ratio "
      "| ours vs bhnd (fwd / bwd) | max err vs fp32 (ours / cuDNN) | note |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (n, c, h, lay, prov), r in by.items():
    if prov != "ours":
        continue
    cd = by.get((n, c, h, lay, "sdpa-cudnn"), {})
    base = by.get((n, c, h, "bhnd", "ours"), {}) if lay != "bhnd" else {}
    vs = f"{q(r['fwd_tflops'], base.get('fwd_tflops'))} / {q(r['bwd_tflops'], base.get('bwd_tflops'))}" if base else ""
    print(f"| | {n} | {'yes' if c else 'no'} | {h or '='} | {lay} | {f(r['fwd_tflops'])} | {f(cd.get('fwd_tflops'))} | "
          f"{q(r['fwd_tflops'], cd.get('fwd_tflops'))} | {f(r['bwd_tflops'])} | {f(cd.get('bwd_tflops'))} | "
          f"{q(r['bwd_tflops'], cd.get('bwd_tflops'))} | {vs} | {r.get('max_err', math.nan):.2e} / "
          f"{cd.get('max_err', math.nan):.2e} | {(r.get('note') or '')[:80]} {(cd.get('note') or '')[:80]} |")
    if not r.get("max_err", math.nan) <= 5 * max(cd.get("max_err", math.nan), 1e-3):  # NaN fails too
        ok = False
        print(f"  ^ ours' error {r.get('max_err')} is not within 5x cuDNN's {cd.get('max_err')} (or one is missing)")
print(f"\ngpu_gluon: {'PASSED' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PYEOF
exit "${PIPESTATUS[0]}"
