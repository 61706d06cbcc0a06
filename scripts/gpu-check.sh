#!/usr/bin/env bash
# GPU verification of the CUDA backend, for a machine with an NVIDIA GPU and
# its driver but no network and no Go toolchain (the device tool's H200).
# Everything it runs is built beforehand on a machine with Go:
#
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o bin/pp-offline .
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o bin/cuda.test ./infer/backend/cuda/
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o bin/lm.test ./infer/lm/
#
# (scripts/gpu-check.sh --build does exactly that), and the working tree
# travels with bin/ (the device tool's run: carry ["bin"]). Steps, each with
# its own timeout inside a total budget (GPU_CHECK_BUDGET seconds, default
# 450, so that the whole check ends well inside 8 minutes):
#
#   conformance   backendtest against the CPU backend (f32 and bf16) and the
#                 memory limit                                   (cuda.test)
#   parity        the tiny fixtures on the GPU vs the CPU: tokens identical
#                 under greedy decoding, text logits within 1e-3 relative,
#                 f32 compute, resident and through an offload plan run by
#                 offload.Runtime on the GPU's offload.Device, and the
#                 same for the tiny model quantized to q8_0 and q4_k
#                 (against the quantized CPU run)                  (lm.test)
#   job:run_pt, job:run_wav, job:run_dep8
#                 the fixtures' full offline jobs with --device cuda: the
#                 transcript must equal the reference's output.json
#   bench:B1, bench:B8, bench:B16
#                 pp-offline bench at the 7B shape, fully resident (f32
#                 compute: the FMA kernels); bench:B1-bf16, bench:B8-bf16
#                 the same with bf16 compute (tensor cores)
#   profile:B1    where ncu is: the GPU time of ~one B = 1 frame, by kernel
#   bench:8GiB, bench:16GiB, bench:24GiB
#                 the same under --cpu-offload --gpu-memory N (the plan's
#                 prediction vs the measured frame time); bench:8GiB-q8_0
#                 at 8 GiB with the weights quantized to q8_0 at load
#
# A/B (GPU_CHECK_OLD=path to another build's pp-offline, or its .gz): after
# the jobs, each job with f32 and with bf16 compute by both builds, their
# WAV and transcript compared byte for byte (ab:NAME-DTYPE: "same" or
# DIFFERS), and bench:B1, bench:B8 and bench:B1-bf16 by the two builds
# alternated, two pairs each (ab:bench-*: the LM ms/frame of every run).
# A kernel change that keeps the sums' order must give "same".
#
# It prints ONE table at the end, whatever failed or timed out, and writes
# it to $OUT/gpu-check.txt with every step's log in $OUT/gpu-check.log when
# $OUT is set (the device tool brings those back). Exit status: 0 when
# every step passed, 1 otherwise.
#
#   scripts/gpu-check.sh            run on the GPU machine
#   GPU_CHECK_OLD=bin/old.gz scripts/gpu-check.sh   the same, and A/B
#   scripts/gpu-check.sh --build    build bin/ here (needs Go)
#   scripts/gpu-check.sh --dry-run  exercise the steps, timeouts and table
#                                   with stand-in binaries (no GPU, no Go);
#                                   GPU_CHECK_DIFF names an A/B step whose
#                                   old build differs; GPU_CHECK_FAIL /
#                                   GPU_CHECK_HANG name a
#                                   step to fail / hang, GPU_CHECK_MAX_STEP
#                                   caps every step's timeout
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ "${1:-}" = "--build" ]; then
  set -e
  mkdir -p bin
  # Stripped (-s -w): the tree and bin/ travel to the device machine
  # within 64 MiB.
  CGO_ENABLED=0 go build -ldflags='-s -w' -o bin/pp-offline .
  CGO_ENABLED=0 go test -c -ldflags='-s -w' -o bin/cuda.test ./infer/backend/cuda/
  CGO_ENABLED=0 go test -c -ldflags='-s -w' -o bin/lm.test ./infer/lm/
  ls -l bin
  exit 0
fi

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; fi

budget=${GPU_CHECK_BUDGET:-450}
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${OUT:-$work/out}
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"

PPO=$root/bin/pp-offline
CUDA_TEST=$root/bin/cuda.test
LM_TEST=$root/bin/lm.test
if [ $dry = 1 ]; then
  # Stand-ins: they answer like the real binaries, quickly. GPU_CHECK_FAIL
  # and GPU_CHECK_HANG name a step to fail or to hang (to see the table
  # survive both).
  fake=$work/fake
  cat >"$fake" <<'FAKE'
#!/usr/bin/env bash
step=${GPU_CHECK_STEP:-}
if [ "$step" = "${GPU_CHECK_HANG:-}" ]; then sleep 1000; fi
if [ "$step" = "${GPU_CHECK_FAIL:-}" ]; then echo "dry run: $step fails" >&2; exit 1; fi
case "$*" in
  *-test.run*GPUMatches*) echo "gpu-check: 40 steps, tokens identical, text logits worst rel err 2.5e-06"; echo PASS ;;
  *-test.run*) echo PASS ;;
  bench*)
    plan=; case "$*" in *cpu-offload*) plan='"plan_frame_ms":50.0,"plan":"dry",' ;; esac
    echo "{\"lm_ms_per_frame\":8.5,\"total_ms_per_frame\":21.5,\"achieved_gbps\":1600.0,${plan}\"device_peak_bytes\":17179869184,\"batch_size\":1}" ;;
  *)
    # A job: write the reference's transcript where --output-text says.
    prev=; for a in "$@"; do
      if [ "$prev" = "--output-text" ]; then
        # GPU_CHECK_DIFF names an A/B step whose old build writes another transcript.
        case "$a" in */old.json) [ "$step" = "${GPU_CHECK_DIFF:-}" ] && { echo '{}' >"$a"; prev=$a; continue; } ;; esac
        cp testdata/tiny/expected/run_pt/output.json "$a"
      fi
      if [ "$prev" = "--output-wav" ]; then : >"$a"; fi
      prev=$a
    done ;;
esac
FAKE
  chmod +x "$fake"
  PPO=$fake CUDA_TEST=$fake LM_TEST=$fake
  [ -n "${GPU_CHECK_OLD:-}" ] && GPU_CHECK_OLD=$fake
else
  for b in "$PPO" "$CUDA_TEST" "$LM_TEST"; do
    if [ ! -x "$b" ]; then
      echo "gpu-check: $b is missing: build bin/ first (scripts/gpu-check.sh --build, on a machine with Go)" >&2
      exit 2
    fi
  done
fi

OLD=${GPU_CHECK_OLD:-}
if [ -n "$OLD" ] && [ $dry = 0 ]; then
  case "$OLD" in
    *.gz) gunzip -c "$OLD" >"$work/pp-offline-old" && chmod +x "$work/pp-offline-old" && OLD=$work/pp-offline-old ;;
  esac
  if [ ! -x "$OLD" ]; then
    echo "gpu-check: GPU_CHECK_OLD=${GPU_CHECK_OLD}: not an executable pp-offline" >&2
    exit 2
  fi
fi

rows=()
status=0
left() { echo $((budget - ($(date +%s) - start))); }

# step NAME TIMEOUT CMD... : runs CMD with the step's timeout (capped by
# what is left of the budget); its output goes to $log and $work/NAME.out.
step() {
  local name=$1 limit=$2
  shift 2
  local rem
  rem=$(left)
  if [ "$rem" -lt 5 ]; then
    last_status=SKIPPED
    echo "== $name: skipped (budget spent)" >>"$log"
    echo "skipped: the budget is spent" >"$work/$name.out"
    return 1
  fi
  [ "$limit" -gt "$rem" ] && limit=$rem
  [ -n "${GPU_CHECK_MAX_STEP:-}" ] && [ "$limit" -gt "$GPU_CHECK_MAX_STEP" ] && limit=$GPU_CHECK_MAX_STEP
  echo "== $name (timeout ${limit}s): $*" >>"$log"
  local t0 rc
  t0=$(date +%s)
  GPU_CHECK_STEP=$name timeout --kill-after=5 "$limit" "$@" >"$work/$name.out" 2>&1
  rc=$?
  cat "$work/$name.out" >>"$log"
  last_secs=$(($(date +%s) - t0))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    last_status=TIMEOUT
  elif [ $rc -ne 0 ]; then
    last_status="FAIL($rc)"
  else
    last_status=ok
  fi
  echo "== $name: $last_status in ${last_secs}s" >>"$log"
  [ "$last_status" = ok ]
}

# row NAME STATUS MS_LM MS_TOTAL GBPS PLAN RATIO PEAK NOTE
row() { rows+=("$(printf '%-14s %-10s %9s %9s %8s %9s %7s %8s  %s' "$@")"); [ "$2" = ok ] || status=1; }

json() { grep -o "\"$2\":[-0-9.e+]*" "$1" | head -1 | cut -d: -f2; }

print_table() {
  {
    echo
    local gpu
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1) || gpu=
    [ -n "$gpu" ] || gpu="no GPU seen by nvidia-smi"
    [ $dry = 1 ] && gpu="$gpu (DRY RUN: stand-in binaries)"
    echo "gpu-check: $gpu, $(($(date +%s) - start)) s of a ${budget} s budget"
    printf '%-14s %-10s %9s %9s %8s %9s %7s %8s  %s\n' step status "LM ms/fr" "tot ms/fr" "GB/s" "plan ms" "meas/pl" "dev GiB" note
    for r in "${rows[@]}"; do echo "$r"; done
  } | tee "$out/gpu-check.txt"
}
trap 'print_table; rm -rf "$work"' EXIT

# 1. Conformance of every op against the CPU backend.
if step conformance 120 bash -c "cd infer/backend/cuda && '$CUDA_TEST' -test.run 'TestConformance|TestMemoryLimit' -test.v -test.count=1"; then
  row conformance ok - - - - - - "backendtest f32 (tol 1e-4) and bf16 (2e-2); batching exact"
else
  row conformance "$last_status" - - - - - - "see gpu-check.log"
fi

# 2. The tiny fixtures: GPU vs CPU, tokens and text logits.
if step parity 150 bash -c "cd infer/lm && '$LM_TEST' -test.run 'TestGPUMatchesCPU' -test.v -test.count=1"; then
  row parity ok - - - - - - "$(grep -h 'gpu-check:' "$work/parity.out" | sed 's/gpu-check: //' | sort -u | tr '\n' ';' | cut -c1-120)"
else
  row parity "$last_status" - - - - - - "$(grep -h -m1 -E 'rel err|tokens|FAIL' "$work/parity.out" | cut -c1-100)"
fi

# 3. The fixtures' full offline jobs on the GPU.
scenarios="run_pt:TINYF0.pt:model.safetensors run_wav:TINYF0.wav:model.safetensors run_dep8:TINYF0.pt:model-dep8.safetensors"
# job BIN VOICE MODEL OUT-PREFIX [flags...]: one fixture job on the GPU.
job() {
  local bin=$1 voice=$2 model=$3 o=$4
  shift 4
  "$bin" --device cuda --greedy --quiet "$@" \
    --input-wav testdata/tiny/input.wav --voice-prompt "$voice" --voice-prompt-dir testdata/tiny/voices \
    --config testdata/tiny/config.json --moshi-weight "testdata/tiny/$model" --mimi-weight testdata/tiny/mimi.safetensors \
    --tokenizer testdata/tiny/tokenizer.model --output-wav "$o.wav" --output-text "$o.json"
}
export -f job # step runs commands under timeout: bash -c 'job …' reaches it
for sc in $scenarios; do
  IFS=: read -r name voice model <<<"$sc"
  d=$work/$name
  mkdir -p "$d"
  if step "job:$name" 60 bash -c 'job "$@"' _ "$PPO" "$voice" "$model" "$d/out"; then
    if cmp -s "$d/out.json" "testdata/tiny/expected/$name/output.json"; then
      row "job:$name" ok - - - - - - "transcript = reference"
    else
      row "job:$name" DIFFERS - - - - - - "transcript differs from testdata/tiny/expected/$name/output.json"
      { echo "== job:$name transcript:"; cat "$d/out.json"; } >>"$log"
    fi
  else
    row "job:$name" "$last_status" - - - - - - "$(tail -1 "$work/job:$name.out" | cut -c1-100)"
  fi
done

# 3b. A/B against another build (GPU_CHECK_OLD): the same jobs' bytes.
if [ -n "$OLD" ]; then
  for sc in $scenarios; do
    IFS=: read -r name voice model <<<"$sc"
    for dt in f32 bf16; do
      d=$work/ab-$name-$dt
      mkdir -p "$d"
      if step "ab:$name-$dt" 60 bash -c 'job "$1" "$3" "$4" "$5/new" --compute-dtype "$6" && job "$2" "$3" "$4" "$5/old" --compute-dtype "$6"' _ \
        "$PPO" "$OLD" "$voice" "$model" "$d" "$dt"; then
        if cmp -s "$d/new.wav" "$d/old.wav" && cmp -s "$d/new.json" "$d/old.json"; then
          row "ab:$name-$dt" ok - - - - - - "same: WAV and transcript byte-identical to the old build's"
        else
          row "ab:$name-$dt" DIFFERS - - - - - - "WAV or transcript differs from the old build's"
        fi
      else
        row "ab:$name-$dt" "$last_status" - - - - - - "$(tail -1 "$work/ab:$name-$dt.out" | cut -c1-100)"
      fi
    done
  done
fi

# 3c. A/B benches (before the table's, which the budget may cut): the two
# builds alternated, two pairs a configuration.
abbench() {
  local name=$1
  shift
  local f=$work/$name.ab
  : >"$f"
  if step "$name" 90 bash -c "for i in 1 2; do for b in old new; do
      if [ \$b = old ]; then bin='$OLD'; else bin='$PPO'; fi
      printf '%s ' \$b >>'$f'
      \"\$bin\" bench --config testdata/personaplex-7b.config.json --device cuda --frames 12 --warmup 3 --memory-mib 256 --json -q $* | tail -1 >>'$f' || exit 1
    done; done"; then
    local olds news
    olds=$(grep '^old ' "$f" | grep -o '"lm_ms_per_frame":[0-9.]*' | cut -d: -f2 | xargs printf '%.2f,' | sed 's/,$//')
    news=$(grep '^new ' "$f" | grep -o '"lm_ms_per_frame":[0-9.]*' | cut -d: -f2 | xargs printf '%.2f,' | sed 's/,$//')
    row "$name" ok - - - - - - "LM ms/frame: old $olds; new $news ($*)"
  else
    row "$name" "$last_status" - - - - - - "$*: see gpu-check.log"
  fi
}
if [ -n "$OLD" ]; then
  abbench ab:bench-B1 --batch-size 1
  abbench ab:bench-B8 --batch-size 8
  abbench ab:bench-B1-bf16 --batch-size 1 --compute-dtype bf16
fi

# 4. bench at the 7B shape (random bf16 weights, built in each run).
bench() {
  local name=$1 limit=$2
  shift 2
  if step "$name" "$limit" "$PPO" bench --config testdata/personaplex-7b.config.json --device cuda \
    --frames 12 --warmup 3 --memory-mib 256 --json -q "$@"; then
    local f=$work/$name.out lm tot gbps plan ratio peak
    lm=$(json "$f" lm_ms_per_frame)
    tot=$(json "$f" total_ms_per_frame)
    gbps=$(json "$f" achieved_gbps)
    plan=$(json "$f" plan_frame_ms)
    peak=$(json "$f" device_peak_bytes)
    ratio=-
    [ -n "$plan" ] && ratio=$(awk -v m="$lm" -v p="$plan" 'BEGIN { if (p > 0) printf "%.2f", m / p; else print "-" }')
    [ -n "$plan" ] && plan=$(printf %.2f "$plan")
    row "$name" ok "$(printf %.2f "${lm:-0}")" "$(printf %.2f "${tot:-0}")" "$(printf %.0f "${gbps:-0}")" \
      "${plan:--}" "$ratio" "$(awk -v b="${peak:-0}" 'BEGIN { printf "%.1f", b / 2^30 }')" "$*"
  else
    row "$name" "$last_status" - - - - - - "$* — $(grep -v '^{' "$work/$name.out" | tail -1 | cut -c1-80)"
  fi
}
bench bench:B1 75 --batch-size 1
bench bench:B8 75 --batch-size 8
bench bench:8GiB 80 --batch-size 1 --cpu-offload --gpu-memory 8GiB
bench bench:B1-bf16 60 --batch-size 1 --compute-dtype bf16
bench bench:B8-bf16 60 --batch-size 8 --compute-dtype bf16
bench bench:B16 60 --batch-size 16
bench bench:16GiB 70 --batch-size 1 --cpu-offload --gpu-memory 16GiB
bench bench:24GiB 70 --batch-size 1 --cpu-offload --gpu-memory 24GiB
bench bench:8GiB-q8_0 70 --batch-size 1 --cpu-offload --gpu-memory 8GiB --weights q8_0

# 5. Where a B = 1 frame's GPU time goes: an ncu trace of ~1,200
# consecutive kernels (about one 7B frame after the warm-up) when ncu is
# there; the log gets the kernels' times summed by name and grid, the table
# the window's total. No row without ncu (the dry run has none).
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ $dry = 0 ] && [ -n "$ncu" ]; then
  if step profile:B1 90 "$ncu" --clock-control none --metrics gpu__time_duration.sum --launch-skip 5000 --launch-count 1200 --csv \
    "$PPO" bench --config testdata/personaplex-7b.config.json --device cuda --memory-mib 256 -q --batch-size 1 --frames 3 --warmup 5; then
    summary=$(awk -F'","' '/"gpu__time_duration.sum"/ { gsub(/"/, "", $NF); gsub(/,/, "", $NF); k = $5 " " $9; t[k] += $NF; n[k]++; all += $NF; c++ }
      END { for (k in t) printf "%10.1f us %5d x  %s\n", t[k] / 1000, n[k], k; printf "TOTAL %d kernels %.2f ms\n", c, all / 1e6 }' "$work/profile:B1.out" | sort -rn)
    { echo "== profile:B1 by kernel and grid (ns summed):"; echo "$summary"; } >>"$log"
    row profile:B1 ok - "$(echo "$summary" | awk '/^TOTAL/ { printf "%.2f", $4 }')" - - - - "GPU ms of $(echo "$summary" | awk '/^TOTAL/ { print $2 }') kernels (~1 frame), by kernel in gpu-check.log"
  else
    row profile:B1 "$last_status" - - - - - - "ncu: see gpu-check.log"
  fi
fi

exit $status
