#!/usr/bin/env bash
# Tests the arm64 build under user-mode emulation (qemu-user-static; binfmt
# need not be registered: the emulator is named explicitly):
#  1. the ops and backend tests, GOARCH=arm64, under qemu (the kernel tests
#     compare the "neon" variant with the portable kernels bit for bit);
#  2. an arm64 binary runs README's tiny job once with each kernel variant
#     (PP_OFFLINE_KERNEL=neon and =portable): each JSON transcript must equal
#     the fixture the e2e tests use (testdata/tiny/expected/run_pt/output.json)
#     and the two runs' WAV files must be identical.
# Exits non-zero on any failure or difference. Everything is built with
# -tags nocuda: the default linux build links the system's dynamic loader
# (for the CUDA binding), which a host without an arm64 sysroot lacks; the
# kernels are the same in both builds.
#
#   scripts/test-arm64.sh            # QEMU=/path/to/qemu-aarch64 to override
#
# Speed means nothing under emulation; on an arm64 machine run
# go test -bench 'NEON|MatVec' ./infer/ops/ instead.
set -euo pipefail
cd "$(dirname "$0")/.."

qemu=${QEMU:-$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)}
if [ -z "$qemu" ]; then
  echo "test-arm64: no qemu-aarch64-static (apt-get install qemu-user-static)" >&2
  exit 1
fi

echo "== arm64 ops and backend tests under $(basename "$qemu")"
GOARCH=arm64 go test -tags nocuda -exec "$qemu" -count=1 -short -timeout 60m ./infer/ops/ ./infer/backend/...

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/pp-offline-arm64
echo "== arm64 binary: the tiny job with each kernel variant"
GOARCH=arm64 go build -tags nocuda -o "$bin" .

tiny=testdata/tiny
want=$tiny/expected/run_pt/output.json
status=0
for k in neon portable; do
  mkdir "$work/$k"
  if ! PP_OFFLINE_KERNEL=$k "$qemu" "$bin" --input-wav $tiny/input.wav --voice-prompt TINYF0.pt \
    --voice-prompt-dir $tiny/voices --config $tiny/config.json \
    --moshi-weight $tiny/model.safetensors --mimi-weight $tiny/mimi.safetensors \
    --tokenizer $tiny/tokenizer.model --greedy --device cpu --quiet \
    --output-wav "$work/$k/out.wav" --output-text "$work/$k/out.json"; then
    echo "FAIL: the tiny job with PP_OFFLINE_KERNEL=$k exited non-zero" >&2
    status=1
    continue
  fi
  if cmp -s "$work/$k/out.json" "$want"; then
    echo "ok   $k: the transcript equals $want"
  else
    echo "FAIL: $k: the transcript differs from $want:" >&2
    diff <(tr ',' '\n' <"$want") <(tr ',' '\n' <"$work/$k/out.json") | head -20 >&2 || true
    status=1
  fi
done
if [ "$status" = 0 ]; then
  if cmp -s "$work/neon/out.wav" "$work/portable/out.wav"; then
    echo "ok   the neon and portable WAV files are identical"
  else
    echo "FAIL: the neon and portable WAV files differ" >&2
    status=1
  fi
fi
exit $status
