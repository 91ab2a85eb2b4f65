#!/usr/bin/env bash
# Dropout on one CUDA machine (issue 16: dropout's cost), checked, timed and logged to OUTDIR:
#   bash scripts/gpu_dropout.sh OUTDIR
# Steps: the `-m gpu` dropout tests (tests/kernels/test_dropout_gpu.py: the compiled kernels' bits equal
# dropout_mask's, Triton/torch on CUDA against the reference with the same bits), split over three
# parallel pytest processes since their time is Triton compiling on the CPU (box 110 s); then, alone
# on the GPU, the dropout bench (python -m flashproof.bench.dropout): per shape a check of our dropout
# (bf16, forward and backward) against the float64 dense oracle with the same bits under the tolerance
# rule, then ours with and without dropout beside SDPA's flash / efficient / math backends with dropout,
# and the ratio ours / SDPA flash (box 160 s; its timed rows get --seconds 60). Under 5 minutes.
# The package is installed from this checkout into /tmp/fp (no network) and run from /tmp with
# PYTHONPATH=/tmp/fp (the installed package, never the checkout's folders).
# OUTDIR gets env.txt, install.txt, one <step>.log per step, dropout.json, summary.txt (printed at the end).
set -u
OUT=${1:?usage: bash scripts/gpu_dropout.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-python3}
TEST_BOX=${TEST_BOX:-110}
BENCH_BOX=${BENCH_BOX:-160}
FP=${FP:-/tmp/fp}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
rm -rf "$FP"
$PY -m pip install -q --no-deps --no-build-isolation --target "$FP" "$ROOT" > "$OUT/install.txt" 2>&1 \
  || { echo "install failed:"; tail -20 "$OUT/install.txt"; exit 4; }
export PYTHONPATH=$FP
cd /tmp
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  $PY -c "import flashproof, os; print('flashproof from', os.path.dirname(flashproof.__file__))"
  echo "checkout $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), nproc $(nproc)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
: > "$OUT/steps.tsv"
step() {  # step NAME SECONDS CMD...: run CMD time-boxed, log to OUT/NAME.log, one row in steps.tsv
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local last
  last=$(grep -E "passed|failed|error|skipped|^total " "$OUT/$name.log" | tail -n 1 | tr '\t' ' ' | cut -c1-110)
  [ "$rc" = 124 ] && last="TIMED OUT after ${secs}s; ${last}"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "${last:-"(see $name.log)"}" >> "$OUT/steps.tsv"
}
PYTEST="$PY -m pytest -q -p no:cacheprovider -m gpu -rfE $ROOT/tests/kernels/test_dropout_gpu.py"
step gpu_tests_bits "$TEST_BOX" $PYTEST -k "compiled_bits or gluon_sized or p_zero" &
step gpu_tests_triton "$TEST_BOX" $PYTEST -k "meets_the_reference and triton" &
step gpu_tests_torch "$TEST_BOX" $PYTEST -k "meets_the_reference and torch" &
wait
step bench "$BENCH_BOX" $PY -u -m flashproof.bench.dropout --out "$OUT" --seconds 60
{
  echo "gpu_dropout: $(head -n 2 "$OUT/env.txt" | tail -n 1), $(tail -n 1 "$OUT/env.txt"), total $(( $(date +%s) - T0 )) s"
  printf '%-18s %4s %6s  %s\n' step rc secs "last line"
  sort "$OUT/steps.tsv" | while IFS=$'\t' read -r n rc s last; do printf '%-18s %4s %6s  %s\n' "$n" "$rc" "$s" "$last"; done
  echo
  echo "checks (ours-triton with dropout vs the float64 oracle with the same bits):"
  grep '^check ' "$OUT/bench.log"
  echo
  echo "bench tables:"
  sed -n '/^| d | N |/,$p' "$OUT/bench.log"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
