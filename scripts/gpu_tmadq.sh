#!/usr/bin/env bash
# The Gluon backward's dQ by TMA bulk reduce-add (issue 17) on one H200, in under 4 minutes:
#   bash scripts/gpu_tmadq.sh OUTDIR
#   (a) lab/gpu_check.py's gluon_* cases (GQA 4 and 8 causal and not, (B, N, H, D) views, packed QKV
#       slices, the older Gluon cases) in bf16 and fp16 against the float64 oracle, through the router:
#       the default backward, i.e. backward(dq_reduce="tma"); six processes in parallel (mostly compiling);
#   (b) alone on the GPU afterwards, in one process: the A/B of gluon/bwd.py's backward(dq_reduce="tma")
#       against backward(dq_reduce="red_v4") (main's 16-byte vector reductions), called directly on the
#       same inputs, with cuDNN's backward (SDPA, autograd) timed the same way beside them, at d = 128
#       bf16, 16k tokens, width 2048: N = 4k / 8k / 16k non-causal, 8k causal, GQA 64/8 8k causal.
#       Medians of triton.testing.do_bench, three interleaved rounds, the median of those; the two
#       variants' dQ compared on the timed inputs (their fp32 sums differ only in the order of adds).
# Every log and JSON goes to OUTDIR; the last lines printed are one summary table (OUTDIR/summary.md).
# Exit status 0 only if every check passed and the A/B ran. The package is installed from this checkout
# into /tmp/fp (no network) and run from /tmp.
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
cat > "$OUT/ab.py" <<'PYEOF'
"""A/B of the Gluon backward's dQ reduction (dq_reduce="tma" vs "red_v4") with cuDNN's backward."""
import json, statistics, sys, time

import torch
from triton.testing import do_bench

from flashproof.kernels import attention
from flashproof.kernels.attention import dispatch
from flashproof.kernels.attention.api import validate
from flashproof.kernels.attention.gluon import bwd as GB

out_path = sys.argv[1]
F = torch.nn.functional
SHAPES = [(4096, False, 16, 16), (8192, False, 16, 16), (16384, False, 16, 16), (8192, True, 16, 16),
          (8192, True, 64, 8)]  # (N, causal, Hq, Hkv); d = 128, B = 16384 / N
TOKENS = 16384
if out_path == "--warm":  # compile every variant the A/B launches (same specialisations, small sizes)
    SHAPES, TOKENS = [(1024, False, 16, 16), (1024, True, 16, 16), (1024, True, 64, 8)], 1024
rows = []
for n, causal, hq, hkv in SHAPES:
    B, d = TOKENS // n, 128
    g = torch.Generator(device="cuda").manual_seed(n)
    q, k, v = (torch.randn(B, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g) for h in (hq, hkv, hkv))
    do = torch.randn(B, hq, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
    prob = validate(q, k, v, causal=causal)
    route = dispatch.plan(prob, dispatch.device_of(q))
    flops = 2.5 * 4 * B * hq * n * n * d * (0.5 if causal else 1.0)
    with torch.no_grad():
        o, lse = attention(q, k, v, causal=causal, return_lse=True)
    calls = {r: (lambda r=r: GB.backward(q, k, v, o, lse, do, None, prob, dq_reduce=r)) for r in GB.DQ_REDUCES}
    dqs = {r: fn()[0].float() for r, fn in calls.items()}
    torch.cuda.synchronize()
    if out_path == "--warm":
        continue
    diff = (dqs["tma"] - dqs["red_v4"]).abs().max().item()
    scale_ = dqs["red_v4"].abs().max().item()
    qc, kc, vc = (t.detach().clone().requires_grad_() for t in (q, k, v))
    note = ""
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.CUDNN_ATTENTION]):
        try:
            oc = F.scaled_dot_product_attention(qc, kc, vc, is_causal=causal, enable_gqa=hq != hkv)
        except RuntimeError as e:  # as flashproof bench does: K/V repeated to Hq heads inside the graph
            note = f"cuDNN: K/V repeated (enable_gqa refused: {str(e)[:60]})"
            oc = F.scaled_dot_product_attention(qc, kc.repeat_interleave(hq // hkv, 1),
                                                vc.repeat_interleave(hq // hkv, 1), is_causal=causal)
    calls["cudnn"] = lambda: oc.backward(do, retain_graph=True)
    ms = {name: [] for name in calls}
    for _ in range(3):  # interleaved rounds: clock drift hits every provider alike
        for name, fn in calls.items():
            ms[name].append(do_bench(fn, warmup=10, rep=60, grad_to_none=[qc, kc, vc], return_mode="median"))
    med = {name: statistics.median(v) for name, v in ms.items()}
    row = dict(n=n, causal=causal, heads=f"{hq}/{hkv}", plan=f"{route.forward}/{route.backward}",
               ms={k_: round(v_, 4) for k_, v_ in med.items()}, rounds=ms,
               tflops={name: round(flops / m * 1e-9, 1) for name, m in med.items()},
               dq_maxdiff=diff, dq_maxabs=scale_, note=note)
    rows.append(row)
    print(json.dumps({k_: row[k_] for k_ in ("n", "causal", "heads", "plan", "tflops", "dq_maxdiff", "dq_maxabs",
                                           "note")}),
          flush=True)
    del q, k, v, do, o, lse, dqs, qc, kc, vc, oc, calls
    torch.cuda.empty_cache()
if out_path == "--warm":
    sys.exit(0)
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": torch.cuda.get_device_name(0),
           "rows": rows}, open(out_path, "w"), indent=1)
PYEOF
for dt in bf16 fp16; do
  for g in "${!CASEGROUPS[@]}"; do
    step "gc_${g}_$dt" "$BOX" $GC --cases "${CASEGROUPS[$g]}" --dtypes $dt --out "$OUT/gc_${g}_$dt" &
  done
done
step ab_compile "$BOX" $PY "$OUT/ab.py" --warm &  # the A/B's kernels into Triton's cache, beside the checks
wait
step ab 90 $PY "$OUT/ab.py" "$OUT/ab.json"  # alone on the GPU
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
    rows = json.loads((out / "ab.json").read_text())["rows"]
except (OSError, ValueError):
    rows, ok = [], False
print("\n| d=128 bf16 | N | causal | Hq/Hkv | plan | tma | red_v4 | cuDNN | tma/red_v4 | tma/cuDNN | red_v4/cuDNN "
      "| max abs dQ tma-red_v4 (of max abs dQ; information) | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    t = r["tflops"]
    print(f"| | {r['n']} | {'yes' if r['causal'] else 'no'} | {r['heads']} | {r['plan']} | {t['tma']:.0f} | "
          f"{t['red_v4']:.0f} | {t['cudnn']:.0f} | {t['tma'] / t['red_v4']:.3f} | {t['tma'] / t['cudnn']:.3f} | "
          f"{t['red_v4'] / t['cudnn']:.3f} | {r['dq_maxdiff']:.3g} ({r['dq_maxabs']:.3g}) | {r.get('note', '')} |")
print("\nbackward TFLOP/s (2.5x the forward's 4·B·Hq·N²·d, halved when causal); medians of 3 interleaved rounds")
print(f"\ngpu_tmadq: {'PASSED' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PYEOF
exit "${PIPESTATUS[0]}"
