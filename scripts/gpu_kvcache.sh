#!/usr/bin/env bash
# The KV-cache GPU run in one command (one H200, < 4.5 min: time boxes 145 + 80 + 10 s, plus the install):  bash scripts/gpu_kvcache.sh OUTDIR
#   1. bench/kvcache.py: the bf16 checks against the float64 formula, the copy bandwidth, then GPU
#      time (graph replay), one-call latency and host time (whole call, validation, launches, buffers)
#      of ours / paged / SDPA cuDNN / FA2, the forced-split sweep and the forced kernel configs
#      (contiguous and paged), at decode Nq = 1 and verify Nq = 5 (B = 1 ... 256);
#   2. examples/spec_e2e.py at its GPU size: the G-test of the law, tokens/s at k = 0, 1, 2, 4, 8 in 2 rounds
#      (all of k = 1 ... 8 in 5 rounds did not finish in a 70 s box on the H200, 2026-12-01 17:33);
#   3. examples/plot_spec_e2e.py: the measured vs formula speed-up as an SVG.
# Steps run one after another, never beside a compile; run the script ALONE on the machine (timings
# beside another GPU or compile-heavy process say nothing): env.txt and summary.txt record the other
# compute processes on the GPU and the load average at the start and after each step. Everything lands
# in OUTDIR: install.log, env.txt, kvcache.log/.json (kvcache-partial.json as it goes), e2e.log/.json,
# spec_e2e_speedup.svg, summary.txt (each step's rc and seconds, then the tables). The package is installed from this checkout
# without network into /tmp/fp and imported from there (the steps run from /tmp).
#   bash scripts/gpu_kvcache.sh OUTDIR bench   runs step 1 alone, in a 200 s box with a 150 s timing budget
#   (< 4 min with the install: the run that checks a bench change).
set -u
if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# -eq 2 ] && [ "$2" != bench ]; }; then
  echo "usage: bash scripts/gpu_kvcache.sh OUTDIR [bench]" >&2; exit 2
fi
ONLY=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
PY=${PY:-python3}
rm -rf /tmp/fp
$PY -m pip install -q --no-deps --no-build-isolation --target /tmp/fp "$ROOT" > "$OUT/install.log" 2>&1 \
  || { echo "install failed:"; tail -20 "$OUT/install.log"; exit 4; }
export PYTHONPATH=/tmp/fp
cd /tmp
{ date -u; git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "commit: unknown"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} > "$OUT/env.txt" 2>&1
others() {  # the GPU's compute processes other than this script's, and the load average
  echo "other GPU processes: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null | tr '\n' ';' || echo unknown); load: $(cut -d' ' -f1-3 /proc/loadavg)"
}
others >> "$OUT/env.txt"
cat "$OUT/env.txt"
: > "$OUT/steps.txt"
step() {  # step NAME SECONDS CMD...: run with a time box, log to OUT/NAME.log, record rc and time
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 15 "$secs" "$@" > "$OUT/$name.log" 2>&1   # SIGTERM at the box (the bench then prints what it has), KILL 15 s later
  local rc=$?
  echo "$name: rc=$rc in $(( $(date +%s) - t0 )) s (box $secs s); after it: $(others)" | tee -a "$OUT/steps.txt"
  if [ $rc -ne 0 ]; then tail -n 12 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$OUT/steps.txt"; fi
}
if [ "$ONLY" = bench ]; then
  step kvcache 200 $PY "$ROOT/bench/kvcache.py" --skip-e2e --budget-s 150 --out "$OUT/kvcache.json"
else
  step kvcache 145 $PY "$ROOT/bench/kvcache.py" --skip-e2e --budget-s 100 --out "$OUT/kvcache.json"
  step e2e 80 $PY "$ROOT/examples/spec_e2e.py" --device cuda --ks 1,2,4,8 --repeats 2 --out "$OUT/e2e.json"
  step plot 10 $PY "$ROOT/examples/plot_spec_e2e.py" "$OUT/e2e.json" --out "$OUT/spec_e2e_speedup.svg"
fi
{ echo "# gpu_kvcache.sh summary"; cat "$OUT/env.txt"; echo; cat "$OUT/steps.txt"; echo
  echo "## bench/kvcache.py (tables)"
  sed -n '/^read bandwidth ceiling/,$p' "$OUT/kvcache.log"
  grep -E '^check .*FAILED' "$OUT/kvcache.log"
  if [ -z "$ONLY" ]; then
    echo; echo "## examples/spec_e2e.py"
    sed -n '/^law of the/,$p' "$OUT/e2e.log"
    echo; echo "## plot"; cat "$OUT/plot.log"
  fi
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
grep -q "rc=[^0]" "$OUT/steps.txt" && exit 1
exit 0
