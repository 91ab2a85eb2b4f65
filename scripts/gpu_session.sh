#!/usr/bin/env bash
# One call on a CUDA machine: correctness, fuzzing and timing, each step time-boxed.
#   bash scripts/gpu_session.sh check    # everything below that checks correctness, then the sampler bench
#   bash scripts/gpu_session.sh kernel   # only the attention steps (fuzz campaigns, then gpu_check cases);
#   bash scripts/gpu_session.sh fuzz     # only the fuzz campaigns;  ... sampler  # only the sampler steps
#   bash scripts/gpu_session.sh bench    # flashproof bench (ours vs SDPA flash/cuDNN/efficient, FlexAttention), sampler bench
#   bash scripts/gpu_session.sh all      # check, then bench
#   bash scripts/gpu_session.sh probe    # lab/probe.py: Triton/Gluon timings, block-sparse breakdown
#   bash scripts/gpu_session.sh attn-bench  # the attention bench alone
#   bash scripts/gpu_session.sh gluon    # the Gluon kernels: their check cases and fuzz profile, then their probe
# The correctness steps run as parallel processes (JOBS of them at a time, default: the CPU count):
# almost all of their time is Triton/torch.compile compiling a new kernel variant on the CPU, so one
# process per case group / dtype / fuzz seed turns a run that took ~10 min serially into ~4 min.
# Timing steps (the benches) run alone, after the parallel ones have finished.
# Only a few files come back from the device, so $OUT holds at most four: env.txt, summary.txt (each
# step's rc, time and last lines), verdict.txt (scripts/gpu_merge.py: every case, shard and test in
# one table) and results.tar.gz (every log/JSON/markdown the steps wrote, re-packed after each step,
# so a run cut short keeps what finished).
# The package is installed from the checkout (no network: --no-deps --no-build-isolation, the machine's
# torch/triton/setuptools) into /tmp/fp, which goes on PYTHONPATH; the steps run from /tmp, so they import
# the installed package, not the checkout's folders. lab/ (gpu_check, probe) is run from the checkout.
# Correctness steps run our Triton kernels with tuning="first" (one configuration per launch key; the
# default of lab/gpu_check.py and of flashproof fuzz); the benches and the probe autotune.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/out/gpu}
RES=/tmp/fp_results
PY=${PY:-python3}
rm -rf "$RES" /tmp/fp  # a machine kept warm between calls still holds the previous call's results
mkdir -p "$OUT" "$RES"
$PY -m pip install -q --no-deps --no-build-isolation --target /tmp/fp "$ROOT" > "$OUT/install.txt" 2>&1 \
  || { echo "install failed:"; tail -20 "$OUT/install.txt"; exit 4; }
export PYTHONPATH=/tmp/fp
cd /tmp
JOBS=${JOBS:-$(nproc)}
BOX=${BOX:-300}            # time box of each fuzz campaign (s)
GC_BOX=${GC_BOX:-220}      # time box of each gpu_check step (s)
# warm-phase processes of each fuzz step (flashproof fuzz --workers): the steps already run in parallel,
# so each compiles its launch specialisations in a few processes rather than one per core; the SDPA and
# FlexAttention steps skip the warm phase (--workers 0: no Triton kernel of ours to compile)
FUZZ_WORKERS=${FUZZ_WORKERS:-3}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
  echo "jobs $JOBS, fuzz box ${BOX}s, gpu_check box ${GC_BOX}s"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
pack() { (flock 9; tar -czf "$OUT/results.tar.gz.part" -C "$RES" . 2>/dev/null && mv "$OUT/results.tar.gz.part" "$OUT/results.tar.gz") 9>"$RES.lock"; }
step() {  # step NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" > "$RES/$name.log" 2>&1
  local rc=$?
  { echo "== $name: rc=$rc in $(( $(date +%s) - t0 ))s"; tail -n 6 "$RES/$name.log"; } > "$RES/$name.summary"
  (flock 9; cat "$RES/$name.summary" >> "$OUT/summary.txt") 9>"$RES.lock2"
  pack
}
par() {  # par NAME SECONDS CMD...: a step in the background, at most JOBS at a time
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
  step "$@" &
}
GC="$PY $ROOT/lab/gpu_check.py --fuzz-budget 0 --minutes 60"
CASESG=gluon_plain,gluon_causal_gqa,gluon_huge_logits,gluon_ties_flat  # the Gluon kernels' shapes
CASES9=causal_1025_gqa,causal_nq_lt_nk,causal_nq_gt_nk_empty_rows,plain_d256,window_d96_dv64,mask_late_keys,block_sparse,varlen,strided_mqa
kernel_steps() {  # the fuzz campaigns first, with the machine to themselves, then the gpu_check cases
  fuzz_steps; wait
  gc_steps
}
# The campaigns are compile-bound (each warm phase compiles its launch specialisations in parallel
# processes), so they run before the gpu_check cases, whose compiles would otherwise share the cores
# with them: on 2026-12-01 15:16 UTC, all steps side by side, the Gluon profile's shards examined one
# example each in their boxes.
fuzz_steps() {
  # The campaign of our Triton kernel, sharded by hypothesis seed: each shard runs its whole budget
  # (complete) unless the time box ends it (INCOMPLETE, exit 3 — never counted as passed).
  # "triton" fuzzes the default GPU call with the deterministic backward (and checks it bitwise),
  # "triton-atomic" the default call (deterministic=False: the Gluon backward where it applies).
  for kern in triton triton-atomic; do for dt in bf16 fp16; do for seed in ${FUZZ_SEEDS:-0 1}; do
    par "fuzz_${kern}_${dt}_s$seed" "$BOX" $PY -m flashproof fuzz --kernel $kern --dtype $dt --seed $seed \
        --budget "${FUZZ_BUDGET:-25}" --profile gpu --seconds $((BOX * 9 / 10 - 10)) --workers "$FUZZ_WORKERS" \
        --json "$RES/fuzz_${kern}_${dt}_s$seed.json"
  done; done; done
  gluon_fuzz  # the Hopper (Gluon) kernels' fuzz profile (d = 128, Nq = Nk multiples of 128)
  # third-party kernels: deviations are findings about them (README), not failures of ours
  par fuzz_third_party "$BOX" $PY -m flashproof fuzz --kernel sdpa-cudnn --kernel sdpa-efficient \
      --kernel sdpa-flash --dtype bf16 --budget 100 --profile gpu --seconds $((BOX * 9 / 10 - 10)) --workers 0 \
      --json "$RES/fuzz_third_party.json"
  par fuzz_third_party_flex "$BOX" $PY -m flashproof fuzz --kernel flex --dtype bf16 --budget 100 --profile gpu \
      --seconds $((BOX * 9 / 10 - 10)) --workers 0 --json "$RES/fuzz_third_party_flex.json"
}
gc_steps() {  # lab/gpu_check.py's cases against the float64 oracle, one process per case group / dtype
  par gc_determinism "$GC_BOX" $GC --out "$RES/gc_determinism" --cases determinism --dtypes bf16
  for dt in bf16 fp16 fp32; do
    par "gc_priority_$dt" "$GC_BOX" $GC --out "$RES/gc_priority_$dt" --cases huge_logits,poison_window_late_nan,poison_causal_gqa_inf,poison_window_neg_inf,poison_late_1e30 --dtypes $dt
  done
  for dt in bf16 fp16; do par "gc_cases_$dt" "$GC_BOX" $GC --out "$RES/gc_cases_$dt" --cases $CASES9 --dtypes $dt; done
  # fp32 compiles and runs ~3x longer: one process per case (groups of three hit a 250 s box after
  # two of three on 2026-11-30 15:37, with ~20 steps sharing 16 cores)
  for case in ${CASES9//,/ }; do
    par "gc_fp32_$case" "$GC_BOX" $GC --out "$RES/gc_fp32_$case" --cases "$case" --dtypes fp32
  done
  gluon_gc
}
sampler_tests() {
  par sampler_tests "$BOX" $PY -m pytest -q -p no:cacheprovider -m gpu "$ROOT/tests/sampler"
}
sampler_bench() { step sampler_bench 120 $PY -m flashproof.bench.sampler --out "$RES/sampler_bench.json"; }
attn_bench() {  # autotuned timings; BENCH_SHAPES (d:N:causal,...) and BENCH_PROVIDERS narrow the run to fit a box
  step bench "${BENCH_SECONDS:-420}" $PY -m flashproof bench --out "$RES/bench" \
      --sparse 0.1 ${BENCH_SHAPES:+--shapes "$BENCH_SHAPES"} ${BENCH_PROVIDERS:+--providers "$BENCH_PROVIDERS"}
}
probe() {  # timings (lab/probe.py); PROBE_PARTS narrows it (fwd,sparse,host,launch,gluon,gluon-bwd)
  step probe "${PROBE_SECONDS:-540}" $PY "$ROOT/lab/probe.py" --out "$RES/probe" \
      ${PROBE_PARTS:+--parts "$PROBE_PARTS"}
}
verdict() { $PY "$ROOT/scripts/gpu_merge.py" "$RES" > "$OUT/verdict.txt" 2>&1; cat "$OUT/verdict.txt"; pack; }
gluon_gc() {  # the Hopper (Gluon) kernels' gpu_check cases
  for dt in bf16 fp16; do par "gc_gluon_$dt" "$GC_BOX" $GC --out "$RES/gc_gluon_$dt" --cases $CASESG --dtypes $dt; done
}
gluon_fuzz() {  # triton-atomic: deterministic=False, the default call, so the Gluon backward runs too
  for dt in bf16 fp16; do
    par "fuzz_gluon_$dt" "$BOX" $PY -m flashproof fuzz --kernel triton-atomic --dtype $dt --seed 0 \
        --budget "${FUZZ_BUDGET:-25}" --profile gluon --seconds $((BOX * 9 / 10 - 10)) --workers "$FUZZ_WORKERS" \
        --json "$RES/fuzz_gluon_$dt.json"
  done
}
case "${1:-check}" in
check)   kernel_steps; sampler_tests; wait; verdict; sampler_bench ;;
kernel)  kernel_steps; wait; verdict ;;
fuzz)    fuzz_steps; wait; verdict ;;
sampler) sampler_tests; wait; verdict; sampler_bench ;;
bench)   attn_bench; sampler_bench ;;
all)     kernel_steps; sampler_tests; wait; verdict; sampler_bench; attn_bench ;;
probe)   probe ;;
gluon)   gluon_gc; gluon_fuzz; wait; verdict; PROBE_PARTS=${PROBE_PARTS:-gluon,gluon-bwd} probe ;;
attn-bench) attn_bench ;;
*) echo "usage: $0 check|kernel|fuzz|sampler|bench|attn-bench|all|probe|gluon" >&2; exit 2 ;;
esac
