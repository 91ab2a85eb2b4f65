#!/usr/bin/env bash
# The ecosystem checks on one CUDA machine (issue 16), each step time-boxed and logged to OUTDIR:
#   bash scripts/gpu_ecosystem.sh OUTDIR
# Steps: the `-m gpu` tests of the SDPA front (tests/kernels/test_sdpa_parity.py), torch.compile /
# opcheck on CUDA (test_compile_ops.py), dropout (test_dropout_gpu.py), the additive float bias on the
# Triton and torch kernels (test_bias_triton.py) — run as parallel processes, since their time is
# mostly Triton/inductor compiling on the CPU — and then, alone, the dropout bench
# (python -m flashproof.bench.dropout: ours vs SDPA flash / efficient / math, one table).
# Budget: tests 200 s (parallel), bench 130 s (its own --seconds 80 budget inside, so that a row begun
# near its end still finishes): under 6 minutes.
# The package is installed from this checkout into /tmp/fp (no network: --no-deps --no-build-isolation)
# and everything runs from /tmp with PYTHONPATH=/tmp/fp, so the installed package is imported, never the
# checkout's folders (pytest puts only tests/ and tests/kernels/ on sys.path: no __init__.py there).
# OUTDIR gets env.txt, install.txt, one <step>.log per step, summary.txt (the table printed at the end).
set -u
OUT=${1:?usage: bash scripts/gpu_ecosystem.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-python3}
TEST_BOX=${TEST_BOX:-200}
BENCH_BOX=${BENCH_BOX:-130}
FP=${FP:-/tmp/fp}  # where the package is installed (a dry run elsewhere may move it)
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
PYTEST="$PY -m pytest -q -p no:cacheprovider -m gpu -rfE"
step sdpa_parity "$TEST_BOX" $PYTEST "$ROOT/tests/kernels/test_sdpa_parity.py" &
step compile_opcheck "$TEST_BOX" $PYTEST "$ROOT/tests/kernels/test_compile_ops.py" &
step dropout_gpu "$TEST_BOX" $PYTEST "$ROOT/tests/kernels/test_dropout_gpu.py" &
step bias_cuda "$TEST_BOX" $PYTEST "$ROOT/tests/kernels/test_bias_triton.py" &
wait
# timing alone, after the parallel compiles have finished
step dropout_bench "$BENCH_BOX" $PY -u -m flashproof.bench.dropout --out "$OUT" --seconds 80
{
  echo "gpu_ecosystem: $(head -n 2 "$OUT/env.txt" | tail -n 1), total $(( $(date +%s) - T0 )) s"
  printf '%-16s %4s %6s  %s\n' step rc secs "last line"
  sort "$OUT/steps.tsv" | while IFS=$'\t' read -r n rc s last; do printf '%-16s %4s %6s  %s\n' "$n" "$rc" "$s" "$last"; done
  echo
  echo "dropout bench table:"
  sed -n '/^| d | N |/,$p' "$OUT/dropout_bench.log"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
