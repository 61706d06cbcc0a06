#!/usr/bin/env bash
# Lockstep batching on the CPU (issue 12): `pp-offline bench --batch-size B`
# at B = 1, 2, 4, 8, 16 for each shape and compute dtype, one table with the
# machine, date and commit. Every figure of one table comes from one run of
# this script. Usage: scripts/bench-batch-sizes.sh [shape ...]
#   SHAPES  default "testdata/personaplex-1b.config.json testdata/personaplex-7b.config.json"
#   BATCHES default "1 2 4 8 16";  DTYPES default "f32 bf16";  FRAMES default 6
set -euo pipefail
cd "$(dirname "$0")/.."
SHAPES=${SHAPES:-"testdata/personaplex-1b.config.json testdata/personaplex-7b.config.json"}
BATCHES=${BATCHES:-"1 2 4 8 16"}
DTYPES=${DTYPES:-"f32 bf16"}
FRAMES=${FRAMES:-6}
bin=$(mktemp -d)/pp-offline
go build -o "$bin" .
echo "## Run of $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; memory $(free -g | awk '/Mem:/{print $2}') GiB; $(go version | cut -d' ' -f3)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| shape | dtype | B | LM ms/step | frame ms/step | LM frames/s | frames/s | LM × B=1 | frame × B=1 | weights GB/s | peak RSS GiB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for shape in $SHAPES; do
  for dt in $DTYPES; do
    base_lm="" base_fr=""
    for b in $BATCHES; do
      js=$("$bin" bench --config "$shape" --batch-size "$b" --compute-dtype "$dt" --frames "$FRAMES" --warmup 2 --memory-mib 256 --json -q 2>/dev/null | tail -1) || { echo "| $(basename "$shape" .config.json) | $dt | $b | failed | | | | | | | |"; continue; }
      python3 - "$shape" "$dt" "$b" "$js" "$base_lm" "$base_fr" <<'PY'
import json, sys, os
shape, dt, b, js, blm, bfr = sys.argv[1:7]
r = json.loads(js)
lm, fr = r["lm_frames_per_second"], r["frames_per_second"]
blm = float(blm) if blm else lm
bfr = float(bfr) if bfr else fr
print("| %s | %s | %s | %.1f | %.1f | %.2f | %.2f | %.2f× | %.2f× | %.1f | %.2f |" % (
    os.path.basename(shape).replace(".config.json", ""), dt, b, r["lm_ms_per_step"], r["frame_ms_per_step"],
    lm, fr, lm / blm, fr / bfr, r["achieved_gbps"], r["peak_rss_bytes"] / 2**30))
with open("/tmp/.bbs_base", "w") as f:
    f.write("%f %f" % (blm, bfr))
PY
      read -r base_lm base_fr < /tmp/.bbs_base || true
    done
  done
done
