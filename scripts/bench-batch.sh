#!/usr/bin/env bash
# Times `pp-offline batch --batch-size 8` over 16 inputs against 16
# separate runs of the main command, on a random-weight model of the ~1.3B
# shape (testdata/personaplex-1b.config.json, written by the hidden
# `pp-offline random-weights`), same machine, same run, and prints the
# ratio. Every item has the same voice prompt (TINYF0.wav) and the default
# text prompt, the usual overnight job: the batch runs the prompt phases
# once and restores them from its prompt cache into the other items (the
# log's "prompt cache:" line, printed below); each separate run computes
# its own. For docs/PERFORMANCE.md: run it on a quiet machine.
#
#   scripts/bench-batch.sh
#
# Environment: BENCH_CONFIG (default testdata/personaplex-1b.config.json),
# BENCH_ITEMS (16), BENCH_BATCH (8), BENCH_SECONDS (4: input length),
# BENCH_THREADS (default: pp-offline's), BENCH_DTYPE (--compute-dtype of
# both halves, default f32), BENCH_KV (--kv-dtype of both halves, default
# f32), BENCH_DIR (keep the model and inputs there
# instead of a temporary folder that is removed).
# Needs ~6 GB of free memory and disk for the 1.3B model (bf16 weights).
set -euo pipefail
cd "$(dirname "$0")/.."
config=${BENCH_CONFIG:-testdata/personaplex-1b.config.json}
items=${BENCH_ITEMS:-16}
batch=${BENCH_BATCH:-8}
secs=${BENCH_SECONDS:-4}
if [ -n "${BENCH_DIR:-}" ]; then work=$BENCH_DIR; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
threads=()
if [ -n "${BENCH_THREADS:-}" ]; then threads=(--threads "$BENCH_THREADS"); fi

go build -o "$work/pp-offline" .
bin=$work/pp-offline
mkdir -p "$work/model" "$work/in" "$work/single" "$work/batch"
if [ ! -f "$work/model/model.safetensors" ]; then
  echo "bench-batch: writing a random-weight model of $config" >&2
  "$bin" random-weights --config "$config" --tokenizer testdata/tiny/tokenizer.model --output "$work/model" >&2
fi

# Synthetic 24 kHz 16-bit mono inputs of about $secs s (white noise, lengths ±10%).
le32() { printf "\\$(printf %03o $(($1 & 255)))\\$(printf %03o $((($1 >> 8) & 255)))\\$(printf %03o $((($1 >> 16) & 255)))\\$(printf %03o $((($1 >> 24) & 255)))"; }
: >"$work/jobs.jsonl"
for i in $(seq 0 $((items - 1))); do
  n=$(( secs * 24000 * (90 + (i * 20) / items) / 100 ))
  bytes=$((n * 2))
  { printf 'RIFF'; le32 $((36 + bytes)); printf 'WAVE'
    printf 'fmt '; le32 16; printf '\001\000\001\000'; le32 24000; le32 48000; printf '\002\000\020\000'
    printf 'data'; le32 $bytes; head -c $bytes /dev/urandom; } >"$work/in/in$i.wav"
  echo "{\"input_wav\": \"in/in$i.wav\", \"output_wav\": \"batch/in$i.wav\", \"output_text\": \"batch/in$i.json\"}" >>"$work/jobs.jsonl"
done
model=(--config "$work/model/config.json" --moshi-weight "$work/model/model.safetensors" --mimi-weight "$work/model/mimi.safetensors"
  --tokenizer "$work/model/tokenizer.model" --device cpu --voice-prompt "$PWD/testdata/tiny/voices/TINYF0.wav" --greedy --seed 1
  --compute-dtype "${BENCH_DTYPE:-f32}" --kv-dtype "${BENCH_KV:-f32}" "${threads[@]}")

# Both halves start from the same page cache: the model files are dropped
# from it and read back once through pp-offline's own mapping (a one-frame
# bench, untimed), which holds them in 2 MiB folios. A file left in the cache
# for long can be held in 4 KiB pages instead (written and written back, or
# partly reclaimed and read back: a VM's proactive reclaim does this to idle
# files), and the batch reads weights held that way up to ~1.3x slower
# (docs/PERFORMANCE.md, "Page-cache folios").
for f in "$work/model/model.safetensors" "$work/model/mimi.safetensors"; do
  dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || echo "bench-batch: could not drop $f from the page cache" >&2
done
"$bin" bench --quiet --frames 1 --warmup 0 --memory-mib 16 --config "$work/model/config.json" \
  --moshi-weight "$work/model/model.safetensors" --mimi-weight "$work/model/mimi.safetensors" "${threads[@]}" >/dev/null

now() { date +%s.%N; }
echo "bench-batch: $items separate runs of the main command" >&2
t0=$(now)
for i in $(seq 0 $((items - 1))); do
  "$bin" --quiet --input-wav "$work/in/in$i.wav" --output-wav "$work/single/in$i.wav" --output-text "$work/single/in$i.json" "${model[@]}"
done
t1=$(now)
echo "bench-batch: pp-offline batch --batch-size $batch over the same $items inputs" >&2
"$bin" batch --manifest "$work/jobs.jsonl" --batch-size "$batch" --force --report "$work/report.json" "${model[@]}" 2>"$work/batch.log" || { cat "$work/batch.log" >&2; exit 1; }
t2=$(now)
same=0
for i in $(seq 0 $((items - 1))); do
  cmp -s "$work/single/in$i.wav" "$work/batch/in$i.wav" && cmp -s "$work/single/in$i.json" "$work/batch/in$i.json" && same=$((same + 1))
done
audio=$(grep -o '"audio_seconds": [0-9.]*' "$work/report.json" | grep -o '[0-9.]*$')
awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v a="$audio" -v n="$items" -v B="$batch" -v same="$same" -v cpus="$(nproc)" -v cfg="$config" -v dt="${BENCH_DTYPE:-f32}" -v kv="${BENCH_KV:-f32}" 'BEGIN {
  s = t1 - t0; b = t2 - t1
  printf "bench-batch: %s, %s compute, %s KV cache, %d inputs, %.1f s of audio, %d CPUs\n", cfg, dt, kv, n, a, cpus
  printf "  %d separate runs   %8.1f s  (real-time factor %.2f)\n", n, s, s / a
  printf "  batch, B = %-2d      %8.1f s  (real-time factor %.2f)\n", B, b, b / a
  printf "  ratio              %8.2fx  (separate / batch); outputs identical: %d/%d\n", s / b, same, n
}'
grep -o 'prompt cache: .*' "$work/batch.log" | sed 's/^/  /' >&2 || echo "  (no prompt cache line in the batch log)" >&2
[ "$same" = "$items" ] || { echo "bench-batch: batch outputs differ from the separate runs" >&2; exit 1; }
