#!/usr/bin/env bash
# Two builds of pp-offline, same benchmark, run alternately (A B A B …) so
# that both see the same machine: prints each run's LM ms per step and the
# medians. Usage: scripts/bench-vs.sh OLD_BIN NEW_BIN [bench flags...]
#   PAIRS default 3
set -euo pipefail
old=$1 new=$2; shift 2
PAIRS=${PAIRS:-3}
printf '| run | %s LM ms/step | %s LM ms/step |\n|---|---|---|\n' "$(basename "$old")" "$(basename "$new")"
a=() b=()
for i in $(seq "$PAIRS"); do
  x=$("$old" bench "$@" --json -q 2>/dev/null | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["lm_ms_per_frame"])')
  y=$("$new" bench "$@" --json -q 2>/dev/null | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["lm_ms_per_frame"])')
  a+=("$x") b+=("$y")
  printf '| %d | %.1f | %.1f |\n' "$i" "$x" "$y"
done
python3 - "${a[*]}" "${b[*]}" <<'PY'
import statistics, sys
a = [float(v) for v in sys.argv[1].split()]
b = [float(v) for v in sys.argv[2].split()]
print("| median | %.1f | %.1f |" % (statistics.median(a), statistics.median(b)))
print()
print("new / old = %.3f" % (statistics.median(b) / statistics.median(a)))
PY
