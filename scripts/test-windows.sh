#!/bin/sh
# Windows tests under wine: scripts/test-windows.sh [PACKAGE...]
#
# Cross-compiles the test binaries of the packages below for
# windows/amd64 (go test -c), runs each under wine in its package folder
# (as go test does), then builds pp-offline.exe and runs README's first
# command (the tiny job) with Windows paths in several spellings, comparing
# the transcript with testdata/tiny/expected/run_pt/output.json byte for
# byte and the WAV with the Linux build's. Exit status 0 when everything
# passed. Headless: console programs need no X display.
#
# Needs wine (wine64) and mingw-w64 (x86_64-w64-mingw32-gcc). What this
# script works around, both for wine only (real Windows needs neither):
#
#  - Go 1.22+'s runtime imports ProcessPrng from bcryptprimitives.dll,
#    which Debian's wine 8.0 lacks: scripts/wine/bcryptprimitives.c is a
#    stand-in (RtlGenRandom), built here with mingw and put in the
#    system32 folder of a throwaway WINEPREFIX under /tmp (the runtime
#    loads it from system32 only).
#  - wine 8.0's NtSetInformationFile answers FileDispositionInformationEx
#    (POSIX delete, which os.RemoveAll uses since Go 1.24 and t.TempDir's
#    cleanup with it) with STATUS_NOT_IMPLEMENTED, which Go takes for a
#    failure rather than for an old Windows: the test binaries are built
#    with an overlay that adds one file to internal/syscall/windows
#    setting its TestDeleteatFallback switch (Go's own path for Windows
#    before 10 1607 and for FAT). pp-offline.exe is built without it.
#
# Tests that cannot pass under wine for wine's sake are skipped here with
# -test.skip (SKIP_<pkg> below says which and why); tests that assume a
# Unix system skip themselves on Windows in the test files.
#
# PP_WINE_KEEP=1 keeps the temporary folder (prefix, binaries, logs).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)

for tool in wine x86_64-w64-mingw32-gcc go cmp; do
	command -v "$tool" >/dev/null 2>&1 || { echo "test-windows.sh: $tool is not installed" >&2; exit 2; }
done

pkgs=${*:-"internal/fileio audio prompts voices infer/config infer/weights infer/nn infer/ops infer/mimi infer/lm infer/job infer/backend/cpu infer/backend/cuda offload compare batchjob hub cli"}
[ "$pkgs" = none ] && pkgs= # only the jobs
# Not run: e2e (its TestMain builds the binary with the go command and
# several tests run sh and ffmpeg; the tiny job below is its first case).

# wine 8.0's CreateSymbolicLinkW reports success and creates nothing, so
# every test through the hub's cache links (blobs/ -> snapshots/) or a tar
# symlink fails under wine; on Windows proper a symlink needs the
# privilege or developer mode, else the hub makes a hard link.
SKIP_hub='TestHuggingfaceHubCacheFollowsRefs|TestColdCacheLayoutThenWarm|TestInterruptedDownloadResumesWithRange|TestWrongSHA256Rejected|TestRetriesOn500|TestOfflineListsEveryMissingFile|TestOptionalFileAbsent|TestStalledTransferResumes|TestExtractVoicesOnce|TestTokenStaysOnItsOrigin|TestUnsizedBodiesAreCompletedOrRefused|TestCachedBlobOfWrongSizeReplaced|TestCachedBranchRevalidated|TestRefWrittenBeforeTheFiles|TestMovedRefHint'

# TestConvAssemblyIsGenerated runs `go run conv_gen.go`: there is no go
# command for Windows here.
SKIP_infer_ops='TestConvAssemblyIsGenerated'

tmp=$(mktemp -d /tmp/pp-wine.XXXXXX)
export WINEPREFIX="$tmp/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
cleanup() {
	wineserver -k >/dev/null 2>&1 || true
	if [ "${PP_WINE_KEEP:-}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT INT TERM

start=$(date +%s)
echo "== bcryptprimitives.dll (mingw) and a WINEPREFIX in $tmp"
x86_64-w64-mingw32-gcc -O2 -shared -nostdlib -Wl,--entry,DllMain -o "$tmp/bcryptprimitives.dll" \
	scripts/wine/bcryptprimitives.c scripts/wine/bcryptprimitives.def -ladvapi32 -lkernel32
wine wineboot -i >"$tmp/wineboot.log" 2>&1 || { cat "$tmp/wineboot.log" >&2; exit 1; }
wineserver -w
# One wineserver for the whole run. Left alone, each test binary's server
# lingers a few seconds after it exits and then shuts down; a binary that
# starts during that shutdown can die before it runs a test (CI saw
# "FAIL prompts (0 s)" with an empty log once). cleanup kills this one.
wineserver -p
cp "$tmp/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"

cat >"$tmp/zz_wine_deleteat.go" <<'EOF'
package windows

// Added by scripts/test-windows.sh for wine 8.0 (see there).
func init() { TestDeleteatFallback = true }
EOF
printf '{"Replace":{"%s":"%s"}}\n' "$(go env GOROOT)/src/internal/syscall/windows/zz_wine_deleteat.go" "$tmp/zz_wine_deleteat.go" >"$tmp/overlay.json"

fail=0
failed=
for p in $pkgs; do
	n=$(echo "$p" | tr / _)
	exe="$tmp/$n.test.exe"
	t0=$(date +%s)
	if ! GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go test -overlay "$tmp/overlay.json" -c -o "$exe" "./$p" >"$tmp/$n.build.log" 2>&1; then
		echo "FAIL $p (build)"; cat "$tmp/$n.build.log"; fail=1; failed="$failed $p"; continue
	fi
	skip=$(eval echo "\${SKIP_$n:-}")
	set -- -test.count=1
	[ -n "$skip" ] && set -- "$@" "-test.skip=$skip"
	if (cd "$p" && timeout 900 wine "$exe" "$@" >"$tmp/$n.log" 2>&1); then
		echo "ok   $p ($(($(date +%s) - t0)) s$([ -n "$skip" ] && echo ", $(echo "$skip" | tr '|' '\n' | wc -l) skipped (see SKIP_)"))"
	else
		echo "FAIL $p ($(($(date +%s) - t0)) s)"
		lines=$(grep -E -- '^(--- FAIL|panic|fatal)|_test\.go:[0-9]+:' "$tmp/$n.log" | head -40)
		if [ -n "$lines" ]; then echo "$lines"; else echo "(no test failed; the log's last lines:)"; tail -20 "$tmp/$n.log"; fi
		fail=1; failed="$failed $p"
	fi
done

echo "== the tiny job through pp-offline.exe"
GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go build -o "$tmp/pp-offline.exe" .
CGO_ENABLED=0 go build -tags nocuda -o "$tmp/pp-offline" .
want=testdata/tiny/expected/run_pt/output.json
"$tmp/pp-offline" --input-wav testdata/tiny/input.wav --voice-prompt TINYF0.pt --voice-prompt-dir testdata/tiny/voices \
	--config testdata/tiny/config.json --moshi-weight testdata/tiny/model.safetensors --mimi-weight testdata/tiny/mimi.safetensors \
	--tokenizer testdata/tiny/tokenizer.model --greedy --device cpu --output-wav "$tmp/linux.wav" --output-text "$tmp/linux.json" 2>"$tmp/linux.log"

# winpath /unix/path: the same file as wine's Z: drive sees it.
winpath() { printf 'Z:%s' "$(echo "$1" | tr / '\\')"; }
Z=$(winpath "$root")
T=$(winpath "$tmp")
mkdir -p "$tmp/out"
# wine serves \\server\share from dosdevices/unc/server/share.
mkdir -p "$WINEPREFIX/dosdevices/unc/localhost"
ln -s "$root" "$WINEPREFIX/dosdevices/unc/localhost/pp"
ln -s "$tmp/out" "$WINEPREFIX/dosdevices/unc/localhost/pp-out"
# name | working folder | the tiny folder | the output folder
cases="relative, forward slashes|$root|testdata/tiny|$T\\out
relative, backslashes|$root|testdata\\tiny|$T\\out
drive letter|$tmp|$Z\\testdata\\tiny|$T\\out
drive letter, forward slashes|$tmp|Z:$root/testdata/tiny|Z:$tmp/out
extended-length (\\\\?\\)|$tmp|\\\\?\\$Z\\testdata\\tiny|\\\\?\\$T\\out
UNC (\\\\localhost\\pp)|$tmp|\\\\localhost\\pp\\testdata\\tiny|\\\\localhost\\pp-out"
i=0
IFS='
'
for c in $cases; do
	IFS='|' read -r name cwd d o <<EOF
$c
EOF
	i=$((i + 1))
	rm -f "$tmp/out/"*
	if (cd "$cwd" && wine "$tmp/pp-offline.exe" --input-wav "$d\\input.wav" --voice-prompt TINYF0.pt --voice-prompt-dir "$d\\voices" \
		--config "$d\\config.json" --moshi-weight "$d\\model.safetensors" --mimi-weight "$d\\mimi.safetensors" \
		--tokenizer "$d\\tokenizer.model" --greedy --device cpu --output-wav "$o\\out.wav" --output-text "$o\\out.json" >"$tmp/job$i.log" 2>&1) &&
		cmp -s "$tmp/out/out.json" "$want" && cmp -s "$tmp/out/out.wav" "$tmp/linux.wav"; then
		printf 'ok   job, %s: transcript = %s, WAV = the Linux build'"'"'s\n' "$name" "$want"
	else
		printf 'FAIL job, %s (%s, %s)\n' "$name" "$d" "$o"; tail -5 "$tmp/job$i.log"; fail=1; failed="$failed job($name)"
	fi
done
IFS=' '

# The output guard on Windows: an output that is the input is refused in
# one line and nothing is written.
rm -f "$tmp/out/"*
cp testdata/tiny/input.wav "$tmp/out/in.wav"
if (cd "$root" && wine "$tmp/pp-offline.exe" --input-wav "$T\\out\\in.wav" --voice-prompt TINYF0.pt --voice-prompt-dir testdata/tiny/voices \
	--config testdata/tiny/config.json --moshi-weight testdata/tiny/model.safetensors --mimi-weight testdata/tiny/mimi.safetensors \
	--tokenizer testdata/tiny/tokenizer.model --greedy --device cpu --output-wav "$T\\out\\in.wav" --output-text "$T\\out\\o.json" >"$tmp/guard.log" 2>&1); then
	echo "FAIL job, output over its input: accepted"; fail=1; failed="$failed job(guard)"
elif cmp -s "$tmp/out/in.wav" testdata/tiny/input.wav && [ ! -e "$tmp/out/o.json" ]; then
	printf 'ok   job, output over its input: refused (%s), nothing written\n' "$(tail -1 "$tmp/guard.log")"
else
	echo "FAIL job, output over its input: the input changed or a file was written"; tail -3 "$tmp/guard.log"; fail=1; failed="$failed job(guard)"
fi

# batch on Windows: two items (the tiny input under two names, greedy) in
# one batch through a manifest with Windows paths; each transcript must be
# the fixture and each WAV the Linux build's; a second run skips both
# (complete outputs, same fingerprints: the Windows file identities).
mkdir -p "$tmp/bj"
cp testdata/tiny/input.wav "$tmp/bj/a.wav"
cp testdata/tiny/input.wav "$tmp/bj/b.wav"
printf '{"input_wav": "a.wav", "greedy": true}\n{"input_wav": "%s", "greedy": true}\n' "$(printf "%s" "$T" | sed 's/\\/\\\\/g')\\\\bj\\\\b.wav" >"$tmp/bj/jobs.jsonl"
bargs="batch --manifest $T\\bj\\jobs.jsonl --output-dir $T\\bj\\out --batch-size 2 --config testdata/tiny/config.json --moshi-weight testdata/tiny/model.safetensors --mimi-weight testdata/tiny/mimi.safetensors --tokenizer testdata/tiny/tokenizer.model --device cpu --voice-prompt-dir testdata/tiny/voices --voice-prompt TINYF0.pt"
# shellcheck disable=SC2086
if wine "$tmp/pp-offline.exe" $bargs >"$tmp/batch1.log" 2>&1 &&
	cmp -s "$tmp/bj/out/a.json" "$want" && cmp -s "$tmp/bj/out/b.json" "$want" &&
	cmp -s "$tmp/bj/out/a.wav" "$tmp/linux.wav" && cmp -s "$tmp/bj/out/b.wav" "$tmp/linux.wav"; then
	echo "ok   batch, 2 items at --batch-size 2: transcripts = $want, WAVs = the Linux build's"
else
	echo "FAIL batch, 2 items"; tail -5 "$tmp/batch1.log"; ls "$tmp/bj/out" 2>&1; fail=1; failed="$failed batch"
fi
# shellcheck disable=SC2086
if wine "$tmp/pp-offline.exe" $bargs >"$tmp/batch2.log" 2>&1 && grep -q "0 ok, 2 skipped, 0 failed" "$tmp/batch2.log"; then
	echo "ok   batch, rerun: both items skipped (complete, same fingerprints)"
else
	echo "FAIL batch, rerun"; tail -5 "$tmp/batch2.log"; fail=1; failed="$failed batch(rerun)"
fi

# Ctrl-C: wine turns a ^C typed on its terminal into the console's
# CTRL_C_EVENT, which Go delivers as os.Interrupt. A job on a 2-minute
# input runs under a pseudo-terminal (script); once its progress bar is
# drawn, ^C is typed: exit 130, one line, no output written.
if command -v script >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
	python3 -c '
import sys, wave
r = wave.open(sys.argv[1], "rb"); p = r.getparams(); d = r.readframes(r.getnframes()); r.close()
w = wave.open(sys.argv[2], "wb"); w.setparams(p)
for _ in range(40): w.writeframes(d)
w.close()' testdata/tiny/input.wav "$tmp/long.wav"
	rm -f "$tmp/out/"*
	rc=0
	(
		i=0
		while [ $i -lt 300 ] && ! grep -q "frames (RTF" "$tmp/pty.log" 2>/dev/null; do sleep 1; i=$((i + 1)); done
		printf '\003'
		# keep the terminal open until the job has stopped
		while [ $i -lt 400 ] && ! grep -aq "pp-offline: " "$tmp/pty.log"; do sleep 1; i=$((i + 1)); done
		sleep 2
	) | timeout 600 script -qefc "wine '$tmp/pp-offline.exe' --input-wav '$T\\long.wav' --voice-prompt TINYF0.pt --voice-prompt-dir testdata/tiny/voices --config testdata/tiny/config.json --moshi-weight testdata/tiny/model.safetensors --mimi-weight testdata/tiny/mimi.safetensors --tokenizer testdata/tiny/tokenizer.model --greedy --device cpu --output-wav '$T\\out\\long.wav' --output-text '$T\\out\\long.json'" "$tmp/pty.log" >/dev/null || rc=$?
	msg=$(tr '\r' '\n' <"$tmp/pty.log" | grep -a -o 'pp-offline: .*' | tail -1)
	if [ $rc -eq 130 ] && echo "$msg" | grep -q "interrupted by interrupt: no output written" && ! ls "$tmp/out/"* >/dev/null 2>&1; then
		printf 'ok   job, Ctrl-C: exit 130, %s\n' "$msg"
	else
		printf 'FAIL job, Ctrl-C: exit %s, %s\n' "$rc" "$msg"; ls "$tmp/out"; fail=1; failed="$failed job(Ctrl-C)"
	fi
else
	echo "note: no script (util-linux) or python3: the Ctrl-C check did not run"
fi

echo "== $(($(date +%s) - start)) s"
if [ $fail -ne 0 ]; then
	echo "failed:$failed" >&2
	PP_WINE_KEEP=1
	exit 1
fi
