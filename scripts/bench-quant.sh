#!/usr/bin/env bash
# Measures quantized weights against bf16 and prints one Markdown table:
# the ~1.3B and 7B shapes (random weights), 2 threads, bf16 vs q8_0 vs q4_k
# (quantized at load: --weights), batch sizes 1 and 8.
#
#   scripts/bench-quant.sh [frames] > /tmp/bench-quant.md
#   SHAPES="testdata/personaplex-1b.config.json" limits the shapes run.
#
# Targets (issue 15): weight bytes per frame ≤ 0.55× bf16 (q8_0), ≤ 0.32×
# (q4_k); LM ms per frame ≤ 0.6× (q8_0), ≤ 0.4× (q4_k) at B = 1. The 7B
# runs need ~20 GB of RAM (random bf16 weights + the blocks) and q4_k's
# quantization at load takes minutes there (pp-offline quantize makes a
# file once instead). Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
frames=${1:-12}
bin=$(mktemp -d)/pp-offline
go build -o "$bin" .

echo "## Quantized weights, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| shape | weights | B | LM ms/step | LM ms/frame vs bf16 | GB/frame | bytes vs bf16 | achieved GB/s | frames/s |"
echo "|---|---|---|---|---|---|---|---|---|"
for cfg in ${SHAPES:-testdata/personaplex-1b.config.json testdata/personaplex-7b.config.json}; do
  for b in 1 8; do
    base=""
    for w in bf16 q8_0 q4_k; do
      flag=()
      [ "$w" != bf16 ] && flag=(--weights "$w")
      line=$("$bin" bench --config "$cfg" --frames "$frames" --warmup 3 --threads 2 --batch-size "$b" --memory-mib 256 --json -q "${flag[@]}" | tail -1)
      [ "$w" = bf16 ] && base=$line
      python3 - "$cfg" "$w" "$line" "$base" <<'PY'
import json, sys, os
cfg, w, r, b = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
name = os.path.basename(cfg).replace(".config.json", "")
print(f"| {name} | {w} | {r['batch_size']} | {r['lm_ms_per_step']:.1f} | {r['lm_ms_per_step']/b['lm_ms_per_step']:.2f}× | "
      f"{r['weight_bytes_per_frame']/1e9:.3f} | {r['weight_bytes_per_frame']/b['weight_bytes_per_frame']:.3f}× | {r['achieved_gbps']:.1f} | {r['frames_per_second']:.2f} |")
PY
    done
  done
done
