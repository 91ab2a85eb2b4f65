#!/usr/bin/env bash
# One call on a CUDA machine: correctness, fuzzing and timing, each step time-boxed, logs under $OUT.
#   bash scripts/gpu_session.sh check   # gpu_check (bf16/fp16 cases, poison, determinism), triton fuzz,
#                                       # third-party fuzz, sampler GPU tests + sampler bench
#   bash scripts/gpu_session.sh bench   # flashproof bench (ours vs SDPA flash/cuDNN/efficient, FlexAttention)
# Works without installing: the GPU machine has no network, so the package is put on PYTHONPATH by a
# symlinked namespace (the repository's folders are flashproof's sub-packages).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/out/gpu}
mkdir -p "$OUT" /tmp/fp/flashproof
cp -r "$ROOT"/flashproof/. /tmp/fp/flashproof/
for d in kernels verified spec proofs; do ln -sfn "$ROOT/$d" "/tmp/fp/flashproof/$d"; done
export PYTHONPATH=/tmp/fp
cd /tmp
PY=${PY:-python3}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
step() {  # step NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc in $(( $(date +%s) - t0 ))s"; tail -n 6 "$OUT/$name.log"
}
case "${1:-check}" in
check)
  step gpu_check 200 $PY -m flashproof.kernels.gpu_check --out "$OUT/gpu_check" --minutes 2.5 --dtypes bf16,fp16 --fuzz-budget 0
  step fuzz_triton 130 $PY -m flashproof fuzz --kernel triton --dtype bf16 --dtype fp16 --budget 20 --profile gpu --json "$OUT/fuzz_triton.json"
  for k in sdpa-cudnn sdpa-efficient sdpa-flash flex; do
    step "fuzz_$k" 45 $PY -m flashproof fuzz --kernel "$k" --dtype bf16 --budget 15 --profile gpu --json "$OUT/fuzz_$k.json"
  done
  step sampler_tests 60 $PY -m pytest -q -p no:cacheprovider -m gpu "$ROOT/tests/test_sampler_coupled.py" "$ROOT/tests/test_sampler_triton.py"
  step sampler_bench 60 $PY -m flashproof.kernels.sampler_bench --out "$OUT/sampler_bench.json"
  ;;
bench)
  step bench 420 $PY -m flashproof bench --out "$OUT/bench" --sparse 0.1
  ;;
esac
