#!/bin/sh
# Soak: a batch of N items (default 1000) on the tiny test model, the
# process's resident memory (VmRSS) sampled every second; prints the
# samples' least-squares slope (KiB per 100 items) over the run after the
# first 10 % of the items (warm-up: the model and the codec's state), and
# checks every output is there and no temporary file is left.
#   scripts/soak-batch.sh [N] [seconds of audio per item]
set -eu
N=${1:-1000}
SECS=${2:-1}
BIN=${PP_OFFLINE:-./pp-offline}
T=testdata/tiny
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W" "$N" "$SECS" <<'EOF'
import math, struct, sys, wave, os
w, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
frames = int(24000 * secs)
with open(os.path.join(w, "jobs.jsonl"), "w") as m:
    for i in range(n):
        p = os.path.join(w, "in", "%04d.wav" % i)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with wave.open(p, "wb") as f:
            f.setnchannels(1); f.setsampwidth(2); f.setframerate(24000)
            f.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(0.01 * (k + 37 * i)))) for k in range(frames)))
        m.write('{"input_wav": "in/%04d.wav", "output_wav": "out/%04d.wav", "output_text": "out/%04d.json", "seed": %d}\n' % (i, i, i, i))
EOF
"$BIN" batch --manifest "$W/jobs.jsonl" --config $T/config.json --moshi-weight $T/model.safetensors \
	--mimi-weight $T/mimi.safetensors --tokenizer $T/tokenizer.model --device cpu \
	--voice-prompt TINYF0.pt --voice-prompt-dir $T/voices --batch-size 4 --report "$W/report.json" -q &
PID=$!
START=$(date +%s)
: >"$W/rss"
while kill -0 $PID 2>/dev/null; do
	rss=$(awk '/VmRSS/ {print $2}' /proc/$PID/status 2>/dev/null || true)
	done_=$(ls "$W/out" 2>/dev/null | grep -c '\.json$' || true)
	[ -n "$rss" ] && echo "$(($(date +%s) - START)) $done_ $rss" >>"$W/rss"
	sleep 1
done
wait $PID
python3 - "$W" "$N" <<'EOF'
import json, os, sys
w, n = sys.argv[1], int(sys.argv[2])
rows = [tuple(map(int, l.split())) for l in open(os.path.join(w, "rss")) if l.strip()]
rows = [r for r in rows if r[1] >= n // 10]
xs, ys = [r[1] for r in rows], [r[2] for r in rows]
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(1e-9, sum((x - mx) ** 2 for x in xs))
r = json.load(open(os.path.join(w, "report.json")))
outs = os.listdir(os.path.join(w, "out"))
left = [f for f in outs if not (f.endswith(".wav") or f.endswith(".json"))]
print("items %d: ok %d, failed %d; %d samples after %d items; RSS %d..%d KiB (first %d, last %d); slope %.1f KiB per 100 items; wall %.0f s; left over: %s"
      % (n, r["counts"]["ok"], r["counts"]["failed"], len(rows), n // 10, min(ys), max(ys), ys[0], ys[-1], slope * 100, r["wall_seconds"], left or "nothing"))
sys.exit(0 if r["counts"]["ok"] == n and len(outs) == 2 * n and not left else 1)
EOF
