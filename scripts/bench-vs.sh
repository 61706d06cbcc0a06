#!/usr/bin/env bash
# Two builds of pp-offline, same benchmark, run alternately (A B A B …) so
# that both see the same machine: prints each run's ms per step (LM, its
# temporal and depformer parts, the codec, the whole frame) and each
# figure's median and minimum per build, then new / old of the LM's and
# the frame's medians. The minimum is the less noisy figure on a machine
# whose load only ever slows a run down. Usage:
#   scripts/bench-vs.sh OLD_BIN NEW_BIN [bench flags...]
#   PAIRS default 3
set -euo pipefail
old=$1 new=$2; shift 2
PAIRS=${PAIRS:-3}
rows=()
for i in $(seq "$PAIRS"); do
  for bin in "$old" "$new"; do
    js=$("$bin" bench "$@" --json -q 2>/dev/null | tail -1)
    rows+=("$i $([ "$bin" = "$old" ] && echo old || echo new) $js")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c '
import json, statistics, sys
keys = ["lm_ms_per_step", "temporal_ms_per_frame", "depformer_ms_per_frame", "codec_ms_per_step", "frame_ms_per_step"]
runs = {"old": [], "new": []}
print("| run | build | LM | temporal | depformer | codec | frame |")
print("|---|---|---|---|---|---|---|")
for line in sys.stdin:
    i, build, js = line.split(" ", 2)
    r = json.loads(js)
    v = [float(r.get(k, 0)) for k in keys]
    runs[build].append(v)
    print("| %s | %s | %s |" % (i, build, " | ".join("%.1f" % x for x in v)))
med = {b: [statistics.median(c) for c in zip(*runs[b])] for b in runs}
low = {b: [min(c) for c in zip(*runs[b])] for b in runs}
for b in ("old", "new"):
    print("| median | %s | %s |" % (b, " | ".join("%.1f" % x for x in med[b])))
for b in ("old", "new"):
    print("| min | %s | %s |" % (b, " | ".join("%.1f" % x for x in low[b])))
print()
print("new / old, medians: LM %.3f, frame %.3f; minimums: LM %.3f, frame %.3f" % (
    med["new"][0] / med["old"][0], med["new"][4] / med["old"][4], low["new"][0] / low["old"][0], low["new"][4] / low["old"][4]))
'
