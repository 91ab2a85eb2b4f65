#!/usr/bin/env bash
# The varlen / dv != d bug the GPU fuzzer found (an illegal memory access on
#   ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=8, seqlens=((1, 1), (0, 129), (65, 1), (1, 1)), block=64,
#               empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480), bf16)
# checked on one CUDA machine, every step time-boxed, everything logged under OUTDIR:
#   bash scripts/gpu_varlen.sh OUTDIR
# Runs so far (H200): the same launch faulted or gave NaN in some runs only, varlen with BLOCK_DV < BLOCK_D
# (d >= 32), at 8 and at 4 warps; dv >= d passed. The host now pads varlen V tiles to BLOCK_D (host._pad_dv), so
# the "first" probes below run that width; the CONTROL rows force the forward's 8-warp rows as before.
# 1. probe:    the spec's forward (and backward) alone, CUDA_LAUNCH_BLOCKING=1, one process each (an illegal
#              access cannot poison the next probe), each launch repeated 200 times and compared bitwise with
#              its first run: the host's own choice on the report's spec, its shrunk variants, one feature taken
#              away at a time and a d x dv grid; every 4-warp forward row forced; CONTROL rows force the 8-warp
#              launches the host now refuses (expected to reproduce) and one with Hopper's wgmma off; the
#              8-warp control and the host's choice under compute-sanitizer racecheck when the machine has it.
# 2. examine:  the fuzzer's checks (forward, gradients, split, determinism) on the two specs of the report and
#              shrunk variants, in bf16, fp16 and fp32 (CUDA_LAUNCH_BLOCKING=1).
# 3. campaign: a focused fuzz campaign (varlen with zero-length segments, dv != d, GQA, masks, poison, strided
#              views) in bf16, fp16 and fp32, and the command that found the bug:
#              flashproof fuzz --kernel triton --dtype bf16 --profile gpu --seed 0.
# Ends with a summary table (also OUTDIR/summary.txt). Exit status 0 iff every step passed.
# The package is installed from the checkout with --no-deps --no-build-isolation into /tmp/fp and run from
# /tmp (PYTHONPATH=/tmp/fp), so the installed package is imported, never the checkout's folders.
set -u
OUTDIR=${1:?usage: bash scripts/gpu_varlen.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
RES="$OUTDIR/results.jsonl"
: > "$RES"
JOBS=${JOBS:-8}
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1;
  python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1
  git -C "$ROOT" log -1 --format='commit %H %s' 2>&1; } > "$OUTDIR/env.txt"
cat "$OUTDIR/env.txt"
(cd "$ROOT" && python -m pip install -q --no-deps --no-build-isolation --target /tmp/fp . ) > "$OUTDIR/install.log" 2>&1 \
  || { echo "install failed (see $OUTDIR/install.log)"; tail -5 "$OUTDIR/install.log"; exit 2; }
export PYTHONPATH=/tmp/fp
cd /tmp

# ------------------------------------------------------------------------------------- the python side
cat > /tmp/gpu_varlen_step.py <<'PY'
"""One step of scripts/gpu_varlen.sh: prints one JSON line per result on stdout (the driver appends them
to results.jsonl). Modes: probe NAME SPEC DTYPE FWD_CFG WHAT | examine NAME SPEC DTYPE | campaign NAME DTYPE SECONDS SEED."""
import json, sys, time, traceback
import torch
from flashproof.fuzz.problem import ProblemSpec, build
from flashproof.fuzz import checks, targets


def emit(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


def _forced(cfg):
    """The forward's autotuner on the one configuration ``cfg`` (BLOCK_M, BLOCK_N, warps, stages), past
    host._prune: how a control launches what the host no longer would."""
    import triton
    from flashproof.kernels.attention.triton import host
    kernel, _, extra, kw = host.TUNED["fwd"]
    bm, bn, w, st = cfg
    fwd = triton.autotune([triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=st,
                                         pre_hook=host._set_blocks)], key=host._KEY + extra, **kw)(kernel)
    return host.Tuners(fwd, host.TUNERS["first"].dkdv, host.TUNERS["first"].dq)


def probe(name, spec_src, dtype, cfg, what, repeats):
    """The spec's forward (WHAT=fwd+bwd: and backward) through the Triton host with the fuzzer's own leaves,
    REPEATS times (a race shows in some runs only): the host's own choice (CFG 'first', tuning="first") or the
    forward forced onto CFG = BLOCK_M,BLOCK_N,warps,stages. FAIL: an exception, a non-finite output, or a run
    whose out/lse (dq/dk/dv) differ bitwise from the first run's."""
    from flashproof.kernels.attention import dispatch
    from flashproof.kernels.attention.api import validate
    from flashproof.kernels.attention.triton import host
    from flashproof.fuzz.oracle import oracles
    spec = eval(spec_src, {"ProblemSpec": ProblemSpec})
    dt = checks.DTYPES[dtype]
    p = build(spec).rounded(dt)
    ctx = checks._Ctx(None, p, None, None, dt, dtype, "cuda", None, None, False, False)
    q, k, v = (t.detach() for t in checks._inputs(ctx))
    structured = spec.mask_kind == "none" and not spec.empty_rows
    mask = None if structured else p.allowed.cuda()
    cu_q = None if p.cu_seqlens_q is None else p.cu_seqlens_q.cuda()
    cu_k = None if p.cu_seqlens_k is None else p.cu_seqlens_k.cuda()
    call = validate(q, k, v, causal=spec.causal, window=spec.window, mask=mask, scale=p.scale, cu_seqlens_q=cu_q,
                    cu_seqlens_k=cu_k, backend="triton", tuning="first")
    route = dispatch.plan(call, dispatch.device_of(q))
    tuned = None if cfg == "first" else _forced(tuple(int(x) for x in cfg.split(",")))
    dout = p.dout.to("cuda", dt)
    t = time.monotonic()
    runs, first, bad, stage = 0, None, [], "forward"
    try:
        for r in range(int(repeats)):
            out, lse = host.forward(q, k, v, call, route, tuned=tuned)
            res = [out, lse]
            if what == "fwd+bwd" and (r < 8 or r % 8 == 0):
                res += list(host.backward(q, k, v, out, lse, dout, None, call, route, tuned=tuned))
                stage = "forward and backward"
            torch.cuda.synchronize()
            runs += 1
            if not all(torch.isfinite(x).all() for x in (out, *res[2:])):
                bad.append(f"run {r}: non-finite output")
            if first is None:
                first = [x.clone() for x in res]
            elif any(not torch.equal(a, b) for a, b in zip(first, res)):
                bad.append(f"run {r}: differs bitwise from run 0")
        cfg_run = getattr((tuned or host.TUNERS["first"]).fwd, "best_config", None)
        e = oracles(p, device="cuda").expected
        err = (first[0].double().cpu() - e.out).abs().max().item() if first[0].numel() else 0.0
        emit(step="probe", name=name, dtype=dtype, cfg=cfg, status="FAIL" if bad else "ok",
             seconds=round(time.monotonic() - t, 2),
             note=(f"{runs} runs ({stage}) on {cfg_run}; " + ("; ".join(bad[:3]) + f" ({len(bad)} bad)" if bad else
                   f"all finite and bitwise equal; out of run 0: max abs error {err:.3g} vs the oracle")))
    except Exception as exc:
        emit(step="probe", name=name, dtype=dtype, cfg=cfg, status="FAIL", seconds=round(time.monotonic() - t, 2),
             note=f"after {runs} runs ({stage}): {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")


def examine(name, spec_src, dtype):
    spec = eval(spec_src, {"ProblemSpec": ProblemSpec})
    t = time.monotonic()
    try:
        ex = checks.examine(targets.get("triton"), spec, dtype, "cuda")
        worst = max((v.error / v.bound for _, v in ex.verdicts if v.bounded and v.bound > 0), default=0.0)
        devs = [d.reproducer()[:300] for d in ex.deviations]
        emit(step="examine", name=name, dtype=dtype, status="FAIL" if devs else "ok",
             seconds=round(time.monotonic() - t, 2),
             note=(devs[0] if devs else f"{len(ex.verdicts)} verdicts, worst error/bound {worst:.3f}"),
             deviations=devs)
    except Exception as exc:
        emit(step="examine", name=name, dtype=dtype, status="HARNESS", seconds=round(time.monotonic() - t, 2),
             note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        traceback.print_exc()


def campaign(name, dtype, seconds, seed):
    """Varlen with zero-length segments and dv != d turned on half the time each (the strategy's coin), on the
    gpu profile's sizes, with the families that interact with them."""
    from flashproof.fuzz.campaign import PROFILES, campaign as run
    prof = dict(PROFILES["gpu"], families=("varlen", "dv", "gqa", "mask", "empty_rows", "poison", "noncontig",
                                           "causal", "window", "ties", "special_lengths"),
                dims=(8, 16, 64, 80, 128), specialisations=dict(lengths=4, dims=3))
    t = time.monotonic()
    c = run("triton", device="cuda", dtypes=(dtype,), budget=10_000, seed=int(seed), profile=prof,
            seconds=float(seconds), shrink_seconds=20.0,
            progress=lambda d: print(f"  {d['dtype']} #{d['example']} {d['seconds']}s {d['status']}: {d['spec']}",
                                     flush=True))
    s = c.summary
    res = s["results"][0] if s["results"] else {}
    status = ("UNAVAILABLE" if not s.get("available") else "HARNESS" if s["harness_error"] else
              "FAIL" if s["deviations"] else "ok")
    note = (s.get("reason", "") if not s.get("available") else s["harness_error"].splitlines()[0][:200] if s["harness_error"] else
            (c.deviations[0].reproducer()[:300] if c.deviations else
             f"{res.get('examples', 0)} examples, {'complete' if s['complete'] else 'time budget spent (incomplete)'}"))
    emit(step="campaign", name=name, dtype=dtype, status=status, seconds=round(time.monotonic() - t, 2), note=note,
         examples=res.get("examples", 0), deviations=[d.reproducer()[:300] for d in c.deviations])


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    {"probe": probe, "examine": examine, "campaign": campaign}[mode](*rest)
PY

# one step: NAME LOG TIMEOUT -- command...; appends its RESULT lines (or a TIMEOUT/CRASH line) to results.jsonl
step() {
  local name=$1 log=$2 limit=$3; shift 3
  local t=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$log" 2>&1
  local rc=$?
  if grep -q '^RESULT ' "$log"; then
    grep '^RESULT ' "$log" | sed 's/^RESULT //' >> "$RES"
  else
    local why=CRASH; [ $rc = 124 ] && why=TIMEOUT
    printf '{"step": "%s", "name": "%s", "status": "%s", "seconds": %s, "note": "rc %s; %s"}\n' "${name%%:*}" \
      "${name#*:}" "$why" "$(( $(date +%s) - t ))" "$rc" "$(tail -1 "$log" | tr -d '"\\' | cut -c1-160)" >> "$RES"
  fi
}
export -f step
export RES

A="ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=8, seqlens=((1, 1), (0, 129), (65, 1), (1, 1)), block=64, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480)"
B="ProblemSpec(heads_q=3, n_q=66, n_k=132, d=64, dv=8, seqlens=((0, 1), (0, 129), (65, 1), (1, 1)), block=64, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480)"
# shrunk variants: one sequence, the zero-query one alone with a neighbour, dv = d, no GQA, no poison/strides
C="ProblemSpec(heads_q=3, n_q=65, n_k=130, d=64, dv=8, seqlens=((0, 129), (65, 1)), block=64, empty_rows=True, poison='inf', noncontig=True, seed=1)"
D="ProblemSpec(heads_q=1, n_q=66, n_k=131, d=64, dv=8, seqlens=((1, 1), (0, 129), (65, 1)), block=64, seed=2)"
E="ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=64, seqlens=((1, 1), (0, 129), (65, 1), (1, 1)), block=64, empty_rows=True, seed=3)"
F="ProblemSpec(heads_q=2, n_q=130, n_k=66, d=8, dv=64, seqlens=((65, 0), (0, 65), (65, 1)), block=64, causal=True, seed=4)"

# ------------------------------------------------------------------------------------- 1. probes
echo "== 1. probes (forward alone per configuration, features ablated), CUDA_LAUNCH_BLOCKING=1 (at $(( $(date +%s) - T0 )) s)"
mkdir -p "$OUTDIR/probe"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$SAN" ]; then  # shared-memory hazards of the forced 8-warp forward (the control) and of the host's choice
  for c in 128,64,8,3 first; do
    n=A-racecheck-${c//,/x}
    step "probe:$n" "$OUTDIR/probe/$n.log" 170 env CUDA_LAUNCH_BLOCKING=1 "$SAN" --tool racecheck --racecheck-report hazard \
      --print-limit 10 python /tmp/gpu_varlen_step.py probe "$n" "$A" bf16 "$c" fwd 2 &
  done
else
  echo "compute-sanitizer: not on this machine" > "$OUTDIR/probe/A-racecheck.log"
fi
L="seqlens=((1, 1), (0, 129), (65, 1), (1, 1)), block=64"
R=200
{
  # the host's own choice (tuning="first"), many runs each
  echo "A-first-fwdbwd|$A|bf16|first|fwd+bwd|$R"
  echo "B-first-fwdbwd|$B|bf16|first|fwd+bwd|$R"
  echo "A-fp16-fwdbwd|$A|fp16|first|fwd+bwd|$R"
  echo "A-fp32-fwdbwd|$A|fp32|first|fwd+bwd|100"
  # one feature of A taken away at a time
  echo "A-mha|ProblemSpec(heads_q=1, n_q=67, n_k=132, d=64, dv=8, $L, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480)|bf16|first|fwd|$R"
  echo "A-nomask|ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=8, $L, ties=True, poison='inf', noncontig=True, seed=41294480)|bf16|first|fwd|$R"
  echo "A-nopoison|ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=8, $L, empty_rows=True, ties=True, noncontig=True, seed=41294480)|bf16|first|fwd|$R"
  echo "A-contig|ProblemSpec(heads_q=3, n_q=67, n_k=132, d=64, dv=8, $L, empty_rows=True, ties=True, poison='inf', seed=41294480)|bf16|first|fwd|$R"
  echo "A-noempty|ProblemSpec(heads_q=3, n_q=67, n_k=3, d=64, dv=8, seqlens=((1, 1), (65, 1), (1, 1)), block=64, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480)|bf16|first|fwd|$R"
  echo "A-novarlen|ProblemSpec(heads_q=3, n_q=65, n_k=1, d=64, dv=8, block=64, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480)|bf16|first|fwd|$R"
  # head dims around the report's (d = 64, dv = 8): the first run's failures had BLOCK_DV < BLOCK_D, d >= 32
  for d in 16 32 64 128; do for dv in 8 16 32 64; do
    echo "A-d$d-dv$dv|ProblemSpec(heads_q=3, n_q=67, n_k=132, d=$d, dv=$dv, $L, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480)|bf16|first|fwd|$R"
  done; done
  # the descriptor (TMA) path keeps its 8-warp rows: dense problems with dv < d, masks, poison, strided views
  echo "TMA-d64-dv8|ProblemSpec(heads_q=3, n_q=129, n_k=130, d=64, dv=8, block=64, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=5)|bf16|first|fwd+bwd|$R"
  echo "TMA-d128-dv16|ProblemSpec(heads_q=3, n_q=129, n_k=130, d=128, dv=16, block=64, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=6)|bf16|first|fwd+bwd|$R"
  echo "TMA-d64-dv8-fp16|ProblemSpec(heads_q=3, n_q=129, n_k=130, d=64, dv=8, block=64, empty_rows=True, ties=True, seed=7)|fp16|first|fwd+bwd|$R"
  # every 4-warp row of the forward's table, forced
  for cfg in 128,64,4,3 64,64,4,3 64,128,4,3 128,32,4,4 64,32,4,2 32,32,4,2; do
    echo "A-fwd-$cfg|$A|bf16|$cfg|fwd|$R"
  done
  # controls: 8-warp rows forced (with BLOCK_DV as the host pads it now)
  for cfg in 128,64,8,3 128,128,8,3; do
    echo "CONTROL-A-fwd-$cfg|$A|bf16|$cfg|fwd|$R"
  done
  echo "CONTROL-A-d128-dv16-fwd-128,64,8,3|ProblemSpec(heads_q=3, n_q=67, n_k=132, d=128, dv=16, $L, empty_rows=True, ties=True, poison='inf', noncontig=True, seed=41294480)|bf16|128,64,8,3|fwd|$R"
  # the 8-warp launch with Hopper's wgmma off (Triton falls back to mma.sync; its own Triton cache, since that
  # switch is not in Triton's cache key): clean there = the fault is in the wgmma code, not in the indices
  echo "A-fwd-128,64,8,3-nommav3|$A|bf16|128,64,8,3|fwd|$R|DISABLE_MMA_V3=1 TRITON_CACHE_DIR=/tmp/tc-nommav3-a"
} | while IFS='|' read -r name spec dt cfg what reps extra; do
  printf '%s\0%s\0%s\0%s\0%s\0%s\0%s\0' "$name" "$spec" "$dt" "$cfg" "$what" "$reps" "${extra:-PROBE_ENV=default}"
done | xargs -0 -n 7 -P "$JOBS" bash -c \
  'step "probe:$0" "'"$OUTDIR"'/probe/$0.log" 120 env CUDA_LAUNCH_BLOCKING=1 $6 python /tmp/gpu_varlen_step.py probe "$0" "$1" "$2" "$3" "$4" "$5"'
wait
for f in "$OUTDIR"/probe/A-racecheck-*.log; do  # the sanitizer's verdict as its own row
  [ -f "$f" ] || continue
  n=$(basename "$f" .log)
  sumline=$(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$f" | tail -1 | tr -d '"\\=' | sed 's/^ *//')
  printf '{"step": "probe", "name": "%s-sanitizer", "dtype": "bf16", "status": "%s", "seconds": 0, "note": "%s"}\n' "$n" \
    "$(echo "$sumline" | grep -qE ' 0 hazards| 0 errors' && echo ok || echo FAIL)" "${sumline:-no sanitizer summary line}" >> "$RES"
done

# ------------------------------------------------------------------------------------- 2. examine
echo "== 2. examine (forward, gradients, split, determinism) on the specs and shrunk variants (at $(( $(date +%s) - T0 )) s)"
mkdir -p "$OUTDIR/examine"
for dt in bf16 fp16 fp32; do
  for s in A B C D E F; do
    printf '%s\0%s\0%s\0' "$s-$dt" "${!s}" "$dt"
  done
done | xargs -0 -n 3 -P "$JOBS" bash -c \
  'step "examine:$0" "'"$OUTDIR"'/examine/$0.log" 150 env CUDA_LAUNCH_BLOCKING=1 python /tmp/gpu_varlen_step.py examine "$0" "$1" "$2"'

# ------------------------------------------------------------------------------------- 3. campaigns
echo "== 3. focused campaigns (varlen / zero-length segments / dv != d) and the original command (at $(( $(date +%s) - T0 )) s)"
mkdir -p "$OUTDIR/campaign"
for dt in bf16 fp16 fp32; do
  step "campaign:focused-$dt" "$OUTDIR/campaign/focused-$dt.log" 100 python /tmp/gpu_varlen_step.py campaign "focused-$dt" "$dt" 60 7 &
done
t=$(date +%s)
timeout -k 5 100 python -m flashproof fuzz --kernel triton --dtype bf16 --profile gpu --seed 0 --seconds 70 \
  --json "$OUTDIR/campaign/fuzz-gpu-seed0.json" --repro-dir "$OUTDIR/campaign/repro" > "$OUTDIR/campaign/fuzz-gpu-seed0.log" 2>&1
rc=$?
case $rc in 0) st=ok;; 3) st=ok;; 1) st=FAIL;; 124) st=TIMEOUT;; *) st=HARNESS;; esac
printf '{"step": "campaign", "name": "fuzz-cli-gpu-seed0", "dtype": "bf16", "status": "%s", "seconds": %s, "note": "flashproof fuzz rc %s (3 = budget cut by --seconds, nothing deviated); %s"}\n' \
  "$st" "$(( $(date +%s) - t ))" "$rc" "$(grep -E 'bf16: [0-9]+ examples' "$OUTDIR/campaign/fuzz-gpu-seed0.log" | head -1 | tr -d '"\\' | cut -c1-120)" >> "$RES"
wait

# ------------------------------------------------------------------------------------- summary
python - "$RES" "$(( $(date +%s) - T0 ))" <<'PY' | tee "$OUTDIR/summary.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
order = {"probe": 0, "examine": 1, "campaign": 2}
rows.sort(key=lambda r: (order.get(r.get("step"), 9), r.get("name", "")))
for r in rows:  # a control is a launch the host refuses, forced: it should misbehave
    if r.get("name", "").startswith("CONTROL-"):
        r["status"] = "control reproduced" if r.get("status") != "ok" else "control NOT reproduced"
print(f"| step | name | dtype | status | s | note |\n|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r.get('step')} | {r.get('name')} | {r.get('dtype', '')} | {r.get('status')} | {r.get('seconds')} | "
          f"{str(r.get('note', '')).replace('|', '/')[:220]} |")
bad = [r for r in rows if r.get("status") not in ("ok", "control reproduced", "control NOT reproduced")]
ctl = [r for r in rows if r.get("status", "").startswith("control")]
print(f"\n{len(rows)} results, {len(bad)} not ok; controls reproduced {sum(r['status'] == 'control reproduced' for r in ctl)}"
      f"/{len(ctl)}; {sys.argv[2]} s in all")
sys.exit(1 if bad else 0)
PY
