#!/usr/bin/env bash
# Measures quantized weights against bf16 and prints one Markdown table:
# the ~1.3B and 7B shapes (random weights), 2 threads, bf16 vs q8_0 vs q4_k,
# batch sizes 1 and 8.
#
#   scripts/bench-quant.sh [frames] > /tmp/bench-quant.md
#   SHAPES="testdata/personaplex-1b.config.json" limits the shapes run.
#
# "weights from": load = random bf16 weights made in RAM by bench and
# quantized at load (--weights); file = as a user runs, memory-mapped files:
# a random bf16 model (pp-offline random-weights, streamed) and its
# quantized copies (pp-offline quantize), made once under QUANT_WORK
# (default: a temporary folder; set it to keep them: at 7B on 2 cores q4_k
# takes ~6 minutes). The 1.3B shape runs both ways (the bf16 kernels stream
# mapped file pages faster than bench's own heap); the 7B shape only from
# files (in RAM it would need ~22 GB). Files need ~35 GB of disk; each run
# maps one (the 7B bf16 one is 16.7 GB: ≥ 20 GB of RAM keeps it cached).
#
# Targets (issue 15): weight bytes per frame ≤ 0.55× bf16 (q8_0), ≤ 0.32×
# (q4_k); LM ms per frame ≤ 0.6× (q8_0), ≤ 0.4× (q4_k) at B = 1. Run it on
# a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
frames=${1:-12}
bin=$(mktemp -d)/pp-offline
go build -o "$bin" .

echo "## Quantized weights, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| shape | weights from | format | B | LM ms/step | LM ms/frame vs bf16 | GB/frame | bytes vs bf16 | achieved GB/s | frames/s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
work=${QUANT_WORK:-$(mktemp -d)}
# files CFG: makes (once) the random bf16 model of CFG's shape and its
# quantized copies under $work/NAME/.
files() {
  local cfg=$1 d
  d=$work/$(basename "$cfg" .config.json)
  mkdir -p "$d"
  [ -f "$d/model.safetensors" ] || "$bin" random-weights --config "$cfg" --tokenizer testdata/tiny/tokenizer.model --output "$d" >&2
  for w in q8_0 q4_k; do
    [ -f "$d/model-$w.safetensors" ] || "$bin" quantize --moshi-weight "$d/model.safetensors" --format "$w" --output "$d/model-$w.safetensors" -q >&2
  done
  echo "$d"
}
for cfg in ${SHAPES:-testdata/personaplex-1b.config.json testdata/personaplex-7b.config.json}; do
  modes="load file"
  case $cfg in *7b*) modes=file ;; esac
  for mode in $modes; do
  dir=""
  [ "$mode" = file ] && dir=$(files "$cfg")
  for b in 1 8; do
    base=""
    for w in bf16 q8_0 q4_k; do
      flag=()
      if [ -n "$dir" ]; then
        f=$dir/model.safetensors
        [ "$w" != bf16 ] && f=$dir/model-$w.safetensors
        flag=(--moshi-weight "$f" --mimi-weight "$dir/mimi.safetensors")
      elif [ "$w" != bf16 ]; then
        flag=(--weights "$w")
      fi
      line=$("$bin" bench --config "$cfg" --frames "$frames" --warmup 3 --threads 2 --batch-size "$b" --memory-mib 256 --json -q "${flag[@]}" | tail -1)
      [ "$w" = bf16 ] && base=$line
      python3 - "$cfg" "$w" "$line" "$base" "$mode" <<'PY'
import json, sys, os
cfg, w, r, b, mode = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
name = os.path.basename(cfg).replace(".config.json", "")
print(f"| {name} | {mode} | {w} | {r['batch_size']} | {r['lm_ms_per_step']:.1f} | {r['lm_ms_per_step']/b['lm_ms_per_step']:.2f}× | "
      f"{r['weight_bytes_per_frame']/1e9:.3f} | {r['weight_bytes_per_frame']/b['weight_bytes_per_frame']:.3f}× | {r['achieved_gbps']:.1f} | {r['frames_per_second']:.2f} |")
PY
    done
  done
  done
done
