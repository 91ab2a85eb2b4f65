#!/usr/bin/env bash
# The Gluon backward with dQ by TMA bulk reduce-add (issue 17), and its deterministic mode (the dQ
# writer's semaphore-ordered adds), on one H200, in under 4 minutes:  bash scripts/gpu_tmadq.sh OUTDIR
#   (a) in parallel (mostly compiling): lab/gpu_check.py's gluon_* cases (GQA 4 and 8 causal and not,
#       (B, N, H, D) views, packed QKV slices, the older Gluon cases) in bf16 and fp16 against the
#       float64 oracle, through the router (deterministic=False); and det_check: gluon/bwd.py's backward
#       with deterministic=True, called directly (the router's deterministic=True on sm_90), against the
#       same oracle and tolerance rule (gpu_check's case builder and dense formula) at G = 1 and GQA,
#       d = 128 and 64, causal and not, bf16 and fp16, each repeated 20 times and required bitwise equal;
#   (b) alone on the GPU afterwards: flashproof bench, ours vs SDPA cuDNN, at d = 128 bf16, 16k tokens,
#       width 2048: N = 4k / 8k / 16k non-causal, 8k causal, GQA 64/8 and 32/8 8k causal; then
#       det_time: the Gluon backward deterministic and not, and cuDNN's, at 4k / 16k non-causal, 8k
#       causal (medians of triton.testing.do_bench, 3 interleaved rounds).
# (The A/B of the TMA reduce-add against the consumers' 16-byte vector reductions ran with this script
# at commit d18a356.) Every log and JSON goes to OUTDIR; the last lines printed are one summary table
# (OUTDIR/summary.md). Exit status 0 only if every check passed and both timings ran. The package is
# installed from this checkout into /tmp/fp (no network) and run from /tmp.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: bash scripts/gpu_tmadq.sh OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PY:-python3}
BOX=${BOX:-110}  # seconds for each correctness process (they run in parallel)
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
GC="$PY $ROOT/lab/gpu_check.py --fuzz-budget 0 --minutes ${MINUTES:-1.5}"  # no check starts after 90 s
declare -A CASEGROUPS=(
  [older]=gluon_plain,gluon_causal_gqa,gluon_huge_logits,gluon_ties_flat
  [gqa]=gluon_gqa4,gluon_gqa8_causal,gluon_gqa8
  [layout]=gluon_bnhd,gluon_bnhd_gqa4_causal,gluon_packed_qkv_causal
)
cat > "$OUT/det.py" <<'PYEOF'
"""det_check (argv: check OUT.json): the deterministic Gluon backward vs the float64 oracle, 20 bitwise
repeats; det_time (argv: time OUT.json): its speed beside the other backwards."""
import json, math, statistics, sys, time

import torch

sys.path.insert(0, sys.argv[3])  # lab/ of the checkout: gpu_check's case builder and dense formula
import gpu_check as GC  # noqa: E402
from flashproof.fuzz.oracle import read_inputs  # noqa: E402
from flashproof.fuzz.tolerance import judge, magnitudes  # noqa: E402
from flashproof.kernels import attention  # noqa: E402
from flashproof.kernels.attention.api import validate  # noqa: E402
from flashproof.kernels.attention.gluon import bwd as GB  # noqa: E402

mode, out_path = sys.argv[1], sys.argv[2]
F = torch.nn.functional


def det_backward(q, k, v, o, lse, do, dlse, causal):
    prob = validate(q, k, v, causal=causal, deterministic=True)
    return GB.backward(q, k, v, o, lse, do, dlse, prob)


def check(cid, shape, causal, dname, runs=20):
    dtype = GC.DTYPES[dname]
    prob, (q, k, v), kw = GC._build(cid, shape, {"causal": causal}, dtype, 5)
    q, k, v = (t.detach() for t in (q, k, v))
    with torch.no_grad():
        o, lse = attention(q, k, v, causal=causal, return_lse=True)
    gen = torch.Generator().manual_seed(7)
    G = prob.dout.to("cuda", torch.float64)
    g = torch.randn(lse.shape, dtype=torch.float64, generator=gen).to("cuda")
    first, problems = None, []
    for r in range(runs):
        grads = det_backward(q, k, v, o, lse, G.to(dtype), g.to(torch.float32), causal)
        if first is None:
            first = grads
            continue
        for name, a, b in zip(("dq", "dk", "dv"), first, grads):
            if not torch.equal(a.view(torch.int16), b.view(torch.int16)):
                problems.append(f"run {r} {name}: {int((a.view(torch.int16) != b.view(torch.int16)).sum())} "
                                f"elements differ")
    clean = read_inputs(prob)
    allowed = prob.allowed.to("cuda")
    want = GC._dense(clean, allowed, prob.scale, torch.float64, G, g)
    base = GC._dense(clean, allowed, prob.scale, dtype, G, g)
    mags = magnitudes(*clean, prob.dout, want[1], prob.scale, dlse=g.cpu())
    worst = {}
    for name, a, w, n in zip(("dq", "dk", "dv"), first, want[2:], base[2:]):
        verdict = judge(name, a, w.cpu(), n, dtype, mags)
        if 0 < verdict.bound < math.inf:
            worst[name] = round(verdict.error / verdict.bound, 4)
        if not verdict.ok:
            problems.append(f"{name}: {verdict.reason} at {verdict.first}: got {verdict.got!r}, expected "
                            f"{verdict.expected!r} (error {verdict.error:.3g}, bound {verdict.bound:.3g})")
    return {"case": cid, "dtype": dname, "causal": causal, "runs": runs, "passed": not problems,
            "problems": problems[:8], "err_over_bound": worst}


TIMED = [(4096, False, 16, 16), (16384, False, 16, 16), (8192, True, 16, 16), (8192, True, 64, 8)]


def timing():
    from triton.testing import do_bench
    rows = []
    for n, causal, hq, hkv in TIMED:
        B, d = 16384 // n, 128
        gen = torch.Generator(device="cuda").manual_seed(n)
        q, k, v = (torch.randn(B, h, n, d, device="cuda", dtype=torch.bfloat16, generator=gen) for h in (hq, hkv, hkv))
        do = torch.randn(B, hq, n, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        flops = 2.5 * 4 * B * hq * n * n * d * (0.5 if causal else 1.0)
        with torch.no_grad():
            o, lse = attention(q, k, v, causal=causal, return_lse=True)
        p_nd = validate(q, k, v, causal=causal)
        calls = {"gluon": lambda: GB.backward(q, k, v, o, lse, do, None, p_nd),
                 "gluon_det": lambda: det_backward(q, k, v, o, lse, do, None, causal)}
        lc = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.CUDNN_ATTENTION]):
            try:
                oc = F.scaled_dot_product_attention(*lc, is_causal=causal, enable_gqa=hq != hkv)
            except RuntimeError:
                oc = F.scaled_dot_product_attention(lc[0], lc[1].repeat_interleave(hq // hkv, 1),
                                                    lc[2].repeat_interleave(hq // hkv, 1), is_causal=causal)
        calls["cudnn"] = lambda: oc.backward(do, retain_graph=True)
        ms = {name: [] for name in calls}
        for _ in range(3):
            for name, fn in calls.items():
                ms[name].append(do_bench(fn, warmup=10, rep=60, grad_to_none=lc, return_mode="median"))
        t = {name: round(flops / statistics.median(v_) * 1e-9, 1) for name, v_ in ms.items()}
        rows.append(dict(n=n, causal=causal, heads=f"{hq}/{hkv}", tflops=t, rounds=ms))
        print(json.dumps(rows[-1]["tflops"] | {"n": n, "causal": causal, "heads": f"{hq}/{hkv}"}), flush=True)
        del q, k, v, do, o, lse, calls, lc, oc
        torch.cuda.empty_cache()
    return rows


if mode == "check":
    res = [check(cid, shape, c, dn) for dn in ("bf16", "fp16") for cid, shape in
           (("det_g1", (2, 4, 4, 1024, 1024, 128, 128)), ("det_gqa4", (1, 8, 2, 1024, 1024, 128, 128)),
            ("det_g1_d64", (2, 4, 4, 1024, 1024, 64, 64)), ("det_gqa8_d64", (1, 16, 2, 1024, 1024, 64, 64)))
           for c in (False, True)]
    for r in res:
        print(("PASS " if r["passed"] else "FAIL ") + json.dumps(r), flush=True)
    for n, causal, hq, hkv in TIMED:  # compile det_time's specialisations now, beside the other checks
        x = [torch.randn(1, h, 1024, 128, device="cuda", dtype=torch.bfloat16) for h in (hq, hkv, hkv, hq)]
        with torch.no_grad():
            o, lse = attention(*x[:3], causal=causal, return_lse=True)
        det_backward(*x[:3], o, lse, x[3], None, causal)
        GB.backward(*x[:3], o, lse, x[3], None, validate(*x[:3], causal=causal))
    torch.cuda.synchronize()
    json.dump({"results": res}, open(out_path, "w"), indent=1)
    sys.exit(0 if all(r["passed"] for r in res) else 1)
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": timing()}, open(out_path, "w"), indent=1)
PYEOF
for dt in bf16 fp16; do
  for g in "${!CASEGROUPS[@]}"; do
    step "gc_${g}_$dt" "$BOX" $GC --cases "${CASEGROUPS[$g]}" --dtypes $dt --out "$OUT/gc_${g}_$dt" &
  done
done
step det_check "$BOX" $PY "$OUT/det.py" check "$OUT/det_check.json" "$ROOT/lab" &
wait
SHAPES=128:4096:0,128:8192:0,128:16384:0,128:8192:1,128:8192:1:64/8,128:8192:1:32/8
step bench 70 $PY -m flashproof bench --shapes "$SHAPES" --providers ours,sdpa-cudnn --out "$OUT/bench"  # alone
step det_time 50 $PY "$OUT/det.py" time "$OUT/det_time.json" "$ROOT/lab"  # alone
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
    elif name == "det_check":
        try:
            res = json.loads((out / "det_check.json").read_text())["results"]
        except (OSError, ValueError) as e:
            res, verdict = [], f"no results ({type(e).__name__})"
        bad = [f"{r['case']}/{r['dtype']}/causal={r['causal']}: {'; '.join(r['problems'])}"[:300]
               for r in res if not r["passed"]]
        worst = max((max(r["err_over_bound"].values(), default=0) for r in res), default=0)
        verdict = verdict or (f"{len(res) - len(bad)}/{len(res)} passed (20 bitwise-equal runs each), worst "
                              f"err/bound {worst}" + ("; FAILED " + " | ".join(bad) if bad else ""))
        ok &= bool(res) and not bad and rc == "0"
    else:
        ok &= rc == "0"
    print(f"| {name} | {rc} | {secs} | {verdict} |")
try:
    rows = json.loads((out / "bench" / "bench.json").read_text())["rows"]
except (OSError, ValueError):
    rows, ok = [], False
by = {(r["n"], r["causal"], r.get("heads", ""), r["provider"]): r for r in rows}
print("\n| d=128 bf16 | N | causal | Hq/Hkv | ours bwd | cuDNN bwd | bwd ratio | ours fwd | cuDNN fwd | note |\n"
      "|---|---|---|---|---|---|---|---|---|---|")
for (n, c, h, prov), r in by.items():
    if prov != "ours":
        continue
    cd = by.get((n, c, h, "sdpa-cudnn"), {})
    ratio = r["bwd_tflops"] / cd["bwd_tflops"] if cd.get("bwd_tflops") else float("nan")
    nan = float("nan")
    print(f"| | {n} | {'yes' if c else 'no'} | {h or '='} | {r['bwd_tflops']:.0f} | {cd.get('bwd_tflops', nan):.0f} | "
          f"{ratio:.3f} | {r['fwd_tflops']:.0f} | {cd.get('fwd_tflops', nan):.0f} | {(r.get('note') or '')[:60]} |")
    ok &= "WRONG" not in (r.get("note") or "")
try:
    det = json.loads((out / "det_time.json").read_text())["rows"]
except (OSError, ValueError):
    det, ok = [], False
print("\n| d=128 bf16 bwd TFLOP/s | N | causal | Hq/Hkv | Gluon | Gluon det | cuDNN | Gluon det / Gluon "
      "| Gluon det / cuDNN |\n|---|---|---|---|---|---|---|---|---|")
for r in det:
    t = r["tflops"]
    print(f"| | {r['n']} | {'yes' if r['causal'] else 'no'} | {r['heads']} | {t['gluon']:.0f} | {t['gluon_det']:.0f} | "
          f"{t['cudnn']:.0f} | {t['gluon_det'] / t['gluon']:.3f} | {t['gluon_det'] / t['cudnn']:.3f} |")
print(f"\ngpu_tmadq: {'PASSED' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PYEOF
exit "${PIPESTATUS[0]}"
