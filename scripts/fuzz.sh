#!/usr/bin/env bash
# Runs every native fuzz target of the project for FUZZTIME each (default
# 10m), JOBS at a time (default 1), and prints one summary line per target:
# elapsed time, execs, corpus size (new interesting + seeds) and PASS/FAIL.
# Crashers are written by go test under the package's testdata/fuzz/ (keep
# them: they become regression seeds). Usage:
#   FUZZTIME=10m JOBS=2 scripts/fuzz.sh [pkg:Target ...]
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10m}
JOBS=${JOBS:-1}
LOGDIR=${LOGDIR:-$(mktemp -d)}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  while IFS= read -r line; do
    file=${line%%:*}; name=${line##*func }; name=${name%%(*}
    targets+=("./$(dirname "$file"):$name")
  done < <(grep -rn --include='*_test.go' '^func Fuzz' . | sed 's|^\./||')
fi
run() {
  local pkg=${1%%:*} name=${1##*:}
  local log="$LOGDIR/$(echo "${pkg#./}" | tr / _)_$name.log"
  # -fuzzminimizetime bounds the minimizer, which otherwise stalls on some
  # decoders' inputs (0 execs/s).
  go test -run XXX -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 2s -parallel 1 "$pkg" >"$log" 2>&1
  local rc=$?
  local last; last=$(grep 'fuzz: elapsed' "$log" | tail -1)
  printf '%-16s %-20s rc=%d %s\n' "$pkg" "$name" "$rc" "${last#fuzz: }"
}
export -f run; export FUZZTIME LOGDIR
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'run "$@"' _ {}
echo "logs in $LOGDIR"
