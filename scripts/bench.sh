#!/usr/bin/env bash
# Measures pp-offline on this machine and prints a Markdown report (machine
# description, then one row per model shape) for docs/PERFORMANCE.md.
#
#   scripts/bench.sh [frames] > /tmp/bench.md
#
# Shapes: the ~1.3B (testdata/personaplex-1b.config.json) and the real 7B
# (testdata/personaplex-7b.config.json, needs ~16 GB of RAM for its random
# bf16 weights). Run it on a quiet machine: other load halves the bandwidth.
set -euo pipefail
cd "$(dirname "$0")/.."
frames=${1:-12}
bin=$(mktemp -d)/pp-offline
go build -o "$bin" .

echo "## Run of $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $(grep -o 'avx512f\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "- L3: $(lscpu | sed -n 's/^L3 cache: *//p' | head -1); memory: $(free -g | awk '/^Mem:/ {print $2}') GiB; $(go version | cut -d' ' -f3-)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| shape | threads | LM ms/frame | temporal | heads+depformer | encode ms | decode ms | total ms | RTF | GB/frame | achieved GB/s | memory GB/s | roofline |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for cfg in testdata/personaplex-1b.config.json testdata/personaplex-7b.config.json; do
  for threads in 1 2; do
    line=$("$bin" bench --config "$cfg" --frames "$frames" --warmup 3 --threads "$threads" --json -q | tail -1)
    python3 - "$cfg" "$line" <<'PY'
import json, sys, os
cfg, r = sys.argv[1], json.loads(sys.argv[2])
name = os.path.basename(cfg).replace(".config.json", "")
print(f"| {name} | {r['threads']} | {r['lm_ms_per_frame']:.1f} | {r['temporal_ms_per_frame']:.1f} | {r['depformer_ms_per_frame']:.1f} | "
      f"{r['codec_encode_ms_per_frame']:.1f} | {r['codec_decode_ms_per_frame']:.1f} | {r['total_ms_per_frame']:.1f} | {r['real_time_factor']:.2f} | "
      f"{r['weight_bytes_per_frame']/1e9:.2f} | {r['achieved_gbps']:.1f} | {r['memory_gbps']:.1f} | {100*r['roofline_fraction']:.0f}% |")
PY
  done
done
echo
echo "7B at full context (--kv-fill 2980: a synthetic KV cache, 2996 positions attended):"
echo
echo '```'
"$bin" bench --config testdata/personaplex-7b.config.json --frames 8 --kv-fill 2980 -q | sed -n '2,11p'
echo '```'
echo
echo "Mimi alone (go test -bench, real Mimi size, random weights):"
echo
echo '```'
go test -run '^$' -bench 'EncodeFrame|DecodeFrame' -benchtime 40x ./infer/mimi/ | grep -E '^Benchmark'
echo '```'
