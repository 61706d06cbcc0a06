#!/usr/bin/env bash
# Example CI job: run a fixed prompt set through pp-offline and compare every
# output with its checked-in golden using `pp-offline compare`. The job fails
# (exit 1) if any output is "different" from its golden or any run fails.
#
# Usage (from anywhere in the repository):
#
#   scripts/ci-compare.sh                      # tiny bundled model, testdata goldens
#   PROMPT_SET=ci/prompts.tsv scripts/ci-compare.sh
#   UPDATE_GOLDENS=1 scripts/ci-compare.sh     # re-bless: copy outputs over the goldens
#
# Environment (all optional):
#   PP_OFFLINE      pp-offline binary (default: built from this checkout with `go build`)
#   MODEL_DIR       directory with model.safetensors, mimi.safetensors,
#                   tokenizer.model, config.json, voices/ (default: testdata/tiny)
#   MOSHI_WEIGHT, MIMI_WEIGHT, TOKENIZER, CONFIG, VOICE_DIR
#                   override single files / the voice-prompt directory
#   PROMPT_SET      tab-separated prompt set, one case per line (# comments and
#                   blank lines ignored):
#                     name <TAB> input.wav <TAB> voice prompt (file in VOICE_DIR)
#                          <TAB> text prompt <TAB> golden dir (holds output.wav, output.json)
#                   default: the single case below (the run_pt reference output)
#   OUT_DIR         where outputs, reports (report.json) and plots (diff.png) go
#                   (default: a new temporary directory; kept, and printed, for CI artifacts)
#   DEVICE          --device for pp-offline (default: cpu)
#   SEED            --seed (default: 42; greedy decoding ignores it)
#   COMPARE_FLAGS   extra flags for `pp-offline compare`, e.g.
#                   "--min-snr-db 40 --max-mel-distance 1 --max-text-edits 0"
#   UPDATE_GOLDENS  if 1, copy each output over its golden instead of comparing
#
# Exit status: 0 all outputs exact or equivalent, 1 some output differs or a run
# failed, 2 the job itself is misconfigured (missing files, bad prompt set).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

MODEL_DIR=${MODEL_DIR:-testdata/tiny}
MOSHI_WEIGHT=${MOSHI_WEIGHT:-$MODEL_DIR/model.safetensors}
MIMI_WEIGHT=${MIMI_WEIGHT:-$MODEL_DIR/mimi.safetensors}
TOKENIZER=${TOKENIZER:-$MODEL_DIR/tokenizer.model}
CONFIG=${CONFIG:-$MODEL_DIR/config.json}
VOICE_DIR=${VOICE_DIR:-$MODEL_DIR/voices}
DEVICE=${DEVICE:-cpu}
SEED=${SEED:-42}
COMPARE_FLAGS=${COMPARE_FLAGS:-}
UPDATE_GOLDENS=${UPDATE_GOLDENS:-0}

# The default prompt set: the bundled tiny model on the bundled user audio,
# with the reference's default text prompt; golden = the reference output.
default_prompt_set() {
  printf '%s\t%s\t%s\t%s\t%s\n' \
    run_pt testdata/tiny/input.wav TINYF0.pt \
    "You are a wise and friendly teacher. Answer questions or provide advice in a clear and engaging way." \
    testdata/tiny/expected/run_pt
}

die() { echo "ci-compare: $*" >&2; exit 2; }

for f in "$MOSHI_WEIGHT" "$MIMI_WEIGHT" "$TOKENIZER" "$CONFIG"; do
  [ -f "$f" ] || die "missing model file $f"
done
[ -d "$VOICE_DIR" ] || die "missing voice-prompt directory $VOICE_DIR"

if [ -z "${PP_OFFLINE:-}" ]; then
  bindir=$(mktemp -d)
  trap 'rm -rf "$bindir"' EXIT
  echo "== building pp-offline"
  go build -o "$bindir/pp-offline" . || die "go build failed"
  PP_OFFLINE=$bindir/pp-offline
fi
[ -x "$PP_OFFLINE" ] || die "PP_OFFLINE=$PP_OFFLINE is not executable"

OUT_DIR=${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ci-compare.XXXXXX")}
mkdir -p "$OUT_DIR"

if [ -n "${PROMPT_SET:-}" ]; then
  [ -f "$PROMPT_SET" ] || die "missing prompt set $PROMPT_SET"
  cases=$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$PROMPT_SET" || true)
else
  cases=$(default_prompt_set)
fi
[ -n "$cases" ] || die "empty prompt set"

passed=() failed=() summary=()
while IFS=$'\t' read -r name input voice text golden; do
  [ -n "$name" ] && [ -n "$input" ] && [ -n "$voice" ] && [ -n "$golden" ] ||
    die "bad prompt-set line for case '${name:-?}': want 5 tab-separated fields"
  [ -f "$input" ] || die "$name: missing input $input"
  [ -f "$VOICE_DIR/$voice" ] || die "$name: missing voice prompt $VOICE_DIR/$voice"
  out="$OUT_DIR/$name"
  mkdir -p "$out"
  echo "== $name: running pp-offline"
  if ! "$PP_OFFLINE" \
      --input-wav "$input" \
      --voice-prompt "$voice" --voice-prompt-dir "$VOICE_DIR" \
      --text-prompt "$text" \
      --moshi-weight "$MOSHI_WEIGHT" --mimi-weight "$MIMI_WEIGHT" \
      --tokenizer "$TOKENIZER" --config "$CONFIG" \
      --greedy --seed "$SEED" --device "$DEVICE" \
      --output-wav "$out/output.wav" --output-text "$out/output.json" \
      </dev/null >"$out/run.log" 2>&1; then
    echo "   pp-offline failed; last lines of $out/run.log:" >&2
    tail -n 20 "$out/run.log" >&2 || true
    failed+=("$name") summary+=("$name: RUN FAILED")
    continue
  fi

  if [ "$UPDATE_GOLDENS" = 1 ]; then
    mkdir -p "$golden"
    cp "$out/output.wav" "$golden/output.wav"
    cp "$out/output.json" "$golden/output.json"
    echo "   golden updated: $golden"
    passed+=("$name") summary+=("$name: golden updated")
    continue
  fi

  [ -f "$golden/output.wav" ] || die "$name: missing golden $golden/output.wav"
  text_flags=()
  if [ -f "$golden/output.json" ]; then
    text_flags=(--reference-text "$golden/output.json" --candidate-text "$out/output.json")
  fi
  echo "== $name: comparing with $golden"
  status=0
  # shellcheck disable=SC2086 # COMPARE_FLAGS is a list of flags
  "$PP_OFFLINE" compare \
    --reference "$golden/output.wav" --candidate "$out/output.wav" \
    "${text_flags[@]}" \
    --report "$out/report.json" --plot "$out/diff.png" \
    $COMPARE_FLAGS </dev/null || status=$?
  case $status in
    0) passed+=("$name") summary+=("$name: ok") ;;
    1) failed+=("$name") summary+=("$name: DIFFERENT (see $out/report.json, $out/diff.png)") ;;
    *) failed+=("$name") summary+=("$name: COMPARE ERROR (exit $status)") ;;
  esac
done <<<"$cases"

echo
echo "== summary (outputs in $OUT_DIR)"
printf '   %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "ci-compare: ${#failed[@]} of $((${#passed[@]} + ${#failed[@]})) case(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "ci-compare: all ${#passed[@]} case(s) match their goldens"
