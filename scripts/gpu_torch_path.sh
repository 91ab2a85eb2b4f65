#!/usr/bin/env bash
# The torch backend (kernels/attention/torch.py, the key-chunk sweep of issue 16) on one CUDA machine,
# each step time-boxed and logged to OUTDIR:
#   bash scripts/gpu_torch_path.sh OUTDIR
# Steps (parallel processes; under 4 minutes on one H200): the torch-backend cases of the `-m gpu`
# dropout tests (the same Philox bits as the Triton kernels, on CUDA) and of the bias tests; the
# step-plan and op-count tests (tests/kernels/test_torch_steps.py, CPU tensors, under this machine's
# torch: the op counts are pinned by non-view ops there); and the fuzzer against the torch backend on
# CUDA (fp32 + fp64, 60 s).
# The package is installed from this checkout into /tmp/fp (no network: --no-deps --no-build-isolation)
# and everything runs from /tmp with PYTHONPATH=/tmp/fp, so the installed package is imported, never the
# checkout's folders. OUTDIR gets env.txt, install.txt, one <step>.log per step, summary.txt.
set -u
OUT=${1:?usage: bash scripts/gpu_torch_path.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-python3}
BOX=${BOX:-200}
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
  last=$(grep -E "passed|failed|error|skipped|PASSED|FAILED|INCOMPLETE|deviation" "$OUT/$name.log" | tail -n 1 | tr '\t' ' ' | cut -c1-110)
  [ "$rc" = 124 ] && last="TIMED OUT after ${secs}s; ${last}"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "${last:-"(see $name.log)"}" >> "$OUT/steps.tsv"
}
PYTEST="$PY -m pytest -q -p no:cacheprovider -rfE"
step dropout_cuda "$BOX" $PYTEST -m gpu -k torch "$ROOT/tests/kernels/test_dropout_gpu.py" &
step bias_cuda "$BOX" $PYTEST -m gpu -k torch "$ROOT/tests/kernels/test_bias_triton.py" &
step steps_opcount "$BOX" $PYTEST "$ROOT/tests/kernels/test_torch_steps.py" &
step fuzz_cuda "$BOX" $PY -m flashproof fuzz --kernel torch --device cuda --dtype fp32 --dtype fp64 --seconds 60 \
  --quiet --repro-dir "$OUT/repro" --json "$OUT/fuzz.json" &
wait
{
  echo "gpu_torch_path: $(sed -n 3p "$OUT/env.txt"), total $(( $(date +%s) - T0 )) s"
  printf '%-14s %4s %6s  %s\n' step rc secs "last line"
  sort "$OUT/steps.tsv" | while IFS=$'\t' read -r n rc s last; do printf '%-14s %4s %6s  %s\n' "$n" "$rc" "$s" "$last"; done
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
