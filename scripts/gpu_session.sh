#!/usr/bin/env bash
# One call on a CUDA machine: correctness, fuzzing and timing, each step time-boxed.
#   bash scripts/gpu_session.sh check   # gpu_check (determinism, then huge_logits + poison in bf16/fp16/fp32, then the cases),
#                                       # triton fuzz, third-party fuzz, sampler GPU tests + sampler bench
#   bash scripts/gpu_session.sh kernel  # only the attention steps;  ... sampler  # only the sampler steps
#   bash scripts/gpu_session.sh bench   # flashproof bench (ours vs SDPA flash/cuDNN/efficient, FlexAttention)
# Only a few files come back from the device, so $OUT holds at most four: env.txt, session.log (every
# step's full output, appended as it runs), summary.txt (each step's rc, time and last lines) and
# results.tar.gz (every JSON/markdown the steps wrote, re-packed after each step, so a run cut short keeps
# what finished). Worst case of `check`: 130 + 100 + 85 + 120 + 60 s of time boxes + ~10 s env ≈ 8.4 min.
# Each fuzz step's --seconds is ~30 s under its box: the budget is checked between examples, and
# one example can overrun it by a compile (flex runs first: its compiles are the longest). The
# sampler's compiled-CUDA tests were estimated at 2–3 min by their author: 120 s may cut them short.
# Works without installing: the GPU machine has no network, so the package is put on PYTHONPATH by a
# symlinked namespace (the repository's folders are flashproof's sub-packages).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/out/gpu}
RES=/tmp/fp_results
mkdir -p "$OUT" "$RES" /tmp/fp/flashproof
cp -r "$ROOT"/flashproof/. /tmp/fp/flashproof/
for d in kernels verified spec proofs; do ln -sfn "$ROOT/$d" "/tmp/fp/flashproof/$d"; done
export PYTHONPATH=/tmp/fp
export FLASHPROOF_TRITON_CONFIG=${FLASHPROOF_TRITON_CONFIG:-first}
cd /tmp
PY=${PY:-python3}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
step() {  # step NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  echo "=================== $name (time box ${secs}s) $(date -u +%H:%M:%S)" >> "$OUT/session.log"
  timeout "$secs" "$@" > "$RES/$name.log" 2>&1
  local rc=$?
  cat "$RES/$name.log" >> "$OUT/session.log"
  { echo "== $name: rc=$rc in $(( $(date +%s) - t0 ))s"; tail -n 8 "$RES/$name.log"; } | tee -a "$OUT/summary.txt"
  tar -czf "$OUT/results.tar.gz" -C "$RES" . 2>/dev/null
}
kernel_steps() {
  step gpu_check 130 $PY -m flashproof.kernels.gpu_check --out "$RES/gpu_check" --minutes 1.7 --dtypes bf16,fp16,fp32 --fuzz-budget 0
  step fuzz_triton 100 $PY -m flashproof fuzz --kernel triton --dtype bf16 --dtype fp16 --budget 200 --profile gpu --seconds 70 --json "$RES/fuzz_triton.json"
  step fuzz_third_party 85 $PY -m flashproof fuzz --kernel flex --kernel sdpa-cudnn --kernel sdpa-efficient --kernel sdpa-flash --dtype bf16 --budget 200 --profile gpu --seconds 55 --json "$RES/fuzz_third_party.json"
}
sampler_steps() {
  step sampler_tests 120 $PY -m pytest -q -p no:cacheprovider -m gpu "$ROOT/tests/test_sampler_coupled.py" "$ROOT/tests/test_sampler_triton.py" "$ROOT/tests/test_sampler_aot.py"
  step sampler_bench 60 $PY -m flashproof.kernels.sampler_bench --out "$RES/sampler_bench.json"
}
case "${1:-check}" in
check) kernel_steps; sampler_steps ;;   # everything (~8.4 min of time boxes)
kernel) kernel_steps ;;                 # the attention kernel and third-party fuzzing only
sampler) sampler_steps ;;               # the speculative sampler only
bench)   # autotuned timings; BENCH_SHAPES (d:N:causal,...) narrows the run to fit a time box
  step bench "${BENCH_SECONDS:-420}" env -u FLASHPROOF_TRITON_CONFIG $PY -m flashproof bench --out "$RES/bench" --sparse 0.1 ${BENCH_SHAPES:+--shapes "$BENCH_SHAPES"}
  ;;
*) echo "usage: $0 check|kernel|sampler|bench" >&2; exit 2 ;;
esac
