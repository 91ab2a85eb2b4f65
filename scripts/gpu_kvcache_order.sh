#!/usr/bin/env bash
# The KV-cache bench's two-level effect taken apart, one command on one H200 (< 4 min: a 200 s box
# plus the install):  bash scripts/gpu_kvcache_order.sh OUTDIR
#   bench/kvcache_order.py: the copy anchor; default vs forced rows of B = 8, 64/8, 128k (Nq = 1, 5)
#   in several orders around fresh caches, frees and idle time; eager calls; the read rate right
#   after a large free; the 16k sweep B = 1 ... 256 (checked, then ours, cuDNN, ours again).
# nvidia-smi samples the SM / memory clocks and power every 50 ms beside it (clocks.csv); the bench
# reads them back per row. Run ALONE on the machine. Everything lands in OUTDIR: install.log,
# env.txt, clocks.csv, order.log, order.json, summary.txt (rc and seconds, then the tables).
set -u
if [ $# -ne 1 ]; then echo "usage: bash scripts/gpu_kvcache_order.sh OUTDIR" >&2; exit 2; fi
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
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
  $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
  echo "other GPU processes: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null | tr '\n' ';'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 50 \
  > "$OUT/clocks.csv" 2>&1 &
SMI=$!
t0=$(date +%s)
timeout -k 15 200 $PY "$ROOT/bench/kvcache_order.py" --budget-s 150 --clocks "$OUT/clocks.csv" \
  --out "$OUT/order.json" > "$OUT/order.log" 2>&1
rc=$?
kill "$SMI" 2>/dev/null
{ echo "# gpu_kvcache_order.sh summary"; cat "$OUT/env.txt"; echo
  echo "order: rc=$rc in $(( $(date +%s) - t0 )) s (box 200 s); clock samples: $(wc -l < "$OUT/clocks.csv")"
  if [ $rc -ne 0 ]; then tail -n 25 "$OUT/order.log"; fi
  echo; sed -n '/^copy anchor/,$p' "$OUT/order.log"
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
exit $rc
