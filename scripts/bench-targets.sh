#!/usr/bin/env bash
# Issue 24's targets on this machine, each beside the best this machine
# could do at all: one Markdown table from one run, for docs/PERFORMANCE.md.
#
#   scripts/bench-targets.sh
#
# It measures the two cores' FMA peak (BenchmarkFMAPeak: zmm on AVX-512,
# ymm for the AVX2 kernels) and runs `pp-offline bench` (the ~1.3B shape,
# random bf16 weights, f32 compute, 2 threads) at B = 1 and B = 16 with each
# kernel family, and q8_0 / q4_k / bf16 at B = 8. bench reports the
# arithmetic of a step's weight products (lm_gflop_per_step,
# codec_gflop_per_step: attention, norms and sampling left out, so a lower
# bound of the work). A step can take no less than that arithmetic at the
# FMA peak, so
#   LM ratio at B = 16 <= 16 x LM(B=1) / (LM GFLOP at B = 16 / peak)
# and likewise for the whole frame (LM + codec), the codec per stream and
# the quantized step. A "ceiling" below its target means the target cannot
# be met on this machine with these kernels' arithmetic, however fast they
# get. The job's ratio (>= 5x) is scripts/bench-batch.sh's (7 minutes).
#
# Environment: CONFIG (default testdata/personaplex-1b.config.json), FRAMES
# (16), WARMUP (4), THREADS (2). amd64 only (the peak is an amd64 benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
config=${CONFIG:-testdata/personaplex-1b.config.json}
frames=${FRAMES:-16}
warmup=${WARMUP:-4}
threads=${THREADS:-2}
[ "$(go env GOARCH)" = amd64 ] || { echo "bench-targets: amd64 only" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/pp-offline" .
go test -c -o "$work/ops.test" ./infer/ops

flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|avx512f|avx512_bf16' | tr '\n' ' ' || true)
echo "## Issue 24's targets against this machine's ceiling: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs), model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | xargs)), $(nproc) CPUs, flags: ${flags}; $(go version | cut -d' ' -f3)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

"$work/ops.test" -test.run XXX -test.bench "FMAPeak/(zmm|ymm)/threads=$threads\$" -test.benchtime 50x >"$work/peak.txt" 2>&1 || true
bench() { # label, kernel, batch, extra flags...
  local label=$1 kernel=$2 b=$3; shift 3
  PP_OFFLINE_KERNEL=$kernel "$work/pp-offline" bench --config "$config" --threads "$threads" --batch-size "$b" \
    --frames "$frames" --warmup "$warmup" --json -q "$@" 2>/dev/null | tail -1 >"$work/$label.json" || echo '{}' >"$work/$label.json"
}
kernels=avx2
grep -qw avx512f /proc/cpuinfo && kernels="avx512 avx2"
for k in $kernels; do
  bench "$k-1" "$k" 1
  bench "$k-16" "$k" 16
done
bench bf16-8 "" 8
bench q8_0-8 "" 8 --weights q8_0
bench q4_k-8 "" 8 --weights q4_k
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

python3 - "$work" "$kernels" <<'PY'
import json, os, re, sys
work, kernels = sys.argv[1], sys.argv[2].split()
peak = {}
for line in open(os.path.join(work, "peak.txt")):
    m = re.match(r"BenchmarkFMAPeak/(zmm|ymm)/threads=\d+\S*\s.*?([\d.]+) GFLOP/s", line)
    if m:
        peak[m.group(1)] = float(m.group(2))
def load(label):
    with open(os.path.join(work, label + ".json")) as f:
        return json.load(f)
def fmt(x, unit=""):
    return "—" if x is None else "%.2f%s" % (x, unit)
print("FMA peak, two threads: " + ", ".join("%s %.1f GFLOP/s" % kv for kv in sorted(peak.items())))
print()
print("| target | measured | ceiling at the FMA peak | target | reachable here |")
print("|---|---|---|---|---|")
rows = []
for k in kernels:
    p = peak.get("zmm" if k == "avx512" else "ymm")
    b1, b16 = load(k + "-1"), load(k + "-16")
    if not b1 or not b16 or not p:
        print("| %s | failed | | | |" % k)
        continue
    lm = 16 * b1["lm_ms_per_step"] / b16["lm_ms_per_step"]
    lm_ceil = 16 * b1["lm_ms_per_step"] / (b16["lm_gflop_per_step"] / p * 1e3)
    fr = 16 * b1["frame_ms_per_step"] / b16["frame_ms_per_step"]
    fr_ceil = 16 * b1["frame_ms_per_step"] / ((b16["lm_gflop_per_step"] + b16["codec_gflop_per_step"]) / p * 1e3)
    codec = b16["codec_ms_per_step"] / 16 / b1["codec_ms_per_step"]
    codec_floor = b16["codec_gflop_per_step"] / p * 1e3 / 16 / b1["codec_ms_per_step"]
    lm_t, fr_t = (10, 8) if k == "avx512" else (8, 6)
    for name, got, bound, target, better in [
        ("%s: LM at B = 16, × B = 1" % k, lm, lm_ceil, lm_t, "higher"),
        ("%s: frame at B = 16, × B = 1" % k, fr, fr_ceil, fr_t, "higher"),
        ("%s: codec per stream at B = 16, × B = 1" % k, codec, codec_floor, 0.25, "lower")]:
        ok = bound >= target if better == "higher" else bound <= target
        unit = "×"
        print("| %s | %.2f%s | %s%.2f%s | %s %.2f%s | %s |" % (name, got, unit, "≤ " if better == "higher" else "≥ ",
              bound, unit, "≥" if better == "higher" else "≤", target, unit, "in arithmetic only" if ok else "**no**"))
    print("| %s: B = 1 LM, B = 16 LM and frame (ms) | %.1f, %.1f, %.1f | B = 16: %.1f + %.1f GFLOP, %.0f and %.0f GFLOP/s (%.0f %% and %.0f %% of the peak) | | |" % (
        k, b1["lm_ms_per_step"], b16["lm_ms_per_step"], b16["frame_ms_per_step"], b16["lm_gflop_per_step"], b16["codec_gflop_per_step"],
        b16["lm_gflops"], b16["frame_gflops"], 100 * b16["lm_gflops"] / p, 100 * b16["frame_gflops"] / p))
bf, p = load("bf16-8"), peak.get("zmm" if "avx512" in kernels else "ymm")
for q in ("q8_0", "q4_k"):
    r = load(q + "-8")
    if not bf or not r or not p:
        print("| %s at B = 8, × bf16 | failed | | | |" % q)
        continue
    got = r["lm_ms_per_step"] / bf["lm_ms_per_step"]
    floor = r["lm_gflop_per_step"] / p * 1e3 / bf["lm_ms_per_step"]
    print("| %s LM at B = 8, × bf16's (%s) | %.2f× (%.1f / %.1f ms) | ≥ %.2f× | ≤ 0.70× | %s |" % (q, r.get("kernel", "?"), got,
          r["lm_ms_per_step"], bf["lm_ms_per_step"], floor, "in arithmetic only (the bound leaves memory out)" if floor <= 0.7 else "**no**"))
PY
