#!/usr/bin/env bash
# The Slurm test of `pp-offline batch` (README "Batch jobs"): against a real
# single-node Slurm on localhost. It installs Debian's slurm-wlm and munge
# (apt-get; needs root and Debian's package registry), starts munged,
# slurmctld and slurmd with a minimal cgroup-free config in a temporary
# folder, submits scripts/slurm-array.sh as a 3-task array over a manifest
# of the tiny fixtures, waits, and checks every output exactly once and
# byte-identical to a run of the main command; then reruns one task
# (--array=1) and a sparse set (--array=0,2) after removing their outputs,
# which must run those shards of the original array alone, and a task
# outside the array (--array=3), which must be refused. The daemons it started are
# stopped by pid on exit. Run by .ci/run when PP_OFFLINE_SLURM_TEST=1.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$(date +%s)
deadline=$((start + 400))

if [ "$(id -u)" != 0 ]; then echo "test-slurm: needs root (apt-get, the Slurm daemons)" >&2; exit 1; fi
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  echo "test-slurm: installing slurm-wlm and munge" >&2
  made_policy=
  # Packages must not start their own daemons (no systemd here, and they would not be ours to stop).
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

work=$(mktemp -d /tmp/pp-offline-slurm.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [ $rc != 0 ]; then
    echo "test-slurm: FAILED (rc $rc); logs:" >&2
    tail -n 20 "$work"/*.log "$work"/out/*.log 2>/dev/null >&2 || true
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "test-slurm: building pp-offline" >&2
go build -o "$work/pp-offline" .

# munge: our own key, socket and files.
mkdir -p "$work/munge" && chmod 711 "$work/munge"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
munged -F --force --key-file "$work/munge/munge.key" --socket "$work/munge/munge.sock" \
  --pid-file "$work/munge/munged.pid" --log-file "$work/munged.log" --seed-file "$work/munge/seed" 2>"$work/munged.out.log" &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$work/munge/munge.sock" ] || { echo "test-slurm: munged did not start" >&2; exit 1; }

host=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
port=$((20000 + RANDOM % 20000))
mkdir -p "$work/state" "$work/spool" "$work/out"
cat >"$work/slurm.conf" <<CONF
ClusterName=ppoffline
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:3
CONF
export SLURM_CONF=$work/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$work/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/slurmd.out.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
  sleep 0.2
done
sinfo -h -o %T | grep -qE '^(idle|mixed|allocated)' || { echo "test-slurm: the node did not come up: $(sinfo 2>&1)" >&2; exit 1; }
echo "test-slurm: Slurm up ($(sinfo -h -o '%P %D %T %c'))" >&2

# The manifest: 7 items of the tiny fixtures, mixed lengths and voices.
t=$repo/testdata/tiny
job=$work/job
mkdir -p "$job"
le32() { printf "\\$(printf %03o $(($1 & 255)))\\$(printf %03o $((($1 >> 8) & 255)))\\$(printf %03o $((($1 >> 16) & 255)))\\$(printf %03o $((($1 >> 24) & 255)))"; }
clip() { # clip NAME SAMPLES: the first SAMPLES samples of the tiny input (16-bit PCM mono, 44-byte header)
  local bytes=$(($2 * 2))
  { printf 'RIFF'; le32 $((36 + bytes)); printf 'WAVE'; head -c 36 "$t/input.wav" | tail -c 24
    printf 'data'; le32 $bytes; head -c $((44 + bytes)) "$t/input.wav" | tail -c $bytes; } >"$job/$1.wav"
}
voices=(TINYF0.pt TINYF0.wav TINYF0-bf16.pt)
: >"$job/jobs.jsonl"
for i in 0 1 2 3 4 5 6; do
  clip "in$i" $(( 1920 * (3 + 5 * i) ))
  printf '{"input_wav": "in%d.wav", "voice_prompt": "%s", "greedy": true}\n' $i "${voices[$((i % 3))]}" >>"$job/jobs.jsonl"
done
model=(--config "$t/config.json" --moshi-weight "$t/model.safetensors" --mimi-weight "$t/mimi.safetensors"
  --tokenizer "$t/tokenizer.model" --device cpu --voice-prompt-dir "$t/voices")

echo "test-slurm: sbatch --array=0-2 scripts/slurm-array.sh" >&2
left=$((deadline - $(date +%s)))
PP_OFFLINE=$work/pp-offline PP_OFFLINE_SHARDS=3 timeout "$left" sbatch --wait --array=0-2 --cpus-per-task=1 --mem=500M \
  --output="$work/out/task-%a.log" --chdir="$work" scripts/slurm-array.sh "$job/jobs.jsonl" \
  --output-dir "$job/out" "${model[@]}" >"$work/sbatch.log" 2>&1 || { cat "$work/sbatch.log" >&2; exit 1; }
cat "$work/sbatch.log" >&2

fail() { echo "test-slurm: FAIL: $*" >&2; exit 1; }
for a in 0 1 2; do
  grep -q "shard $a/3 (Slurm array task $a" "$work/out/task-$a.log" || fail "task $a did not take shard $a/3 from Slurm: $(cat "$work/out/task-$a.log")"
  [ -f "$job/report-task$a.json" ] || fail "no report of task $a"
done
n=$(ls "$job/out" | wc -l)
[ "$n" = 14 ] || fail "$n files in the output folder, want 14: $(ls -a "$job/out")"
# Every item in exactly one report, as ok.
oks=$(cat "$job"/report-task*.json | grep -c '"status": "ok"')
[ "$oks" = 7 ] || fail "$oks ok items in the reports, want 7"
mkdir -p "$work/single"
for i in 0 1 2 3 4 5 6; do
  c=$(cat "$job"/report-task*.json | grep -c "\"input_wav\": \"$job/in$i.wav\"")
  [ "$c" = 1 ] || fail "in$i.wav in $c reports"
  "$work/pp-offline" --quiet --input-wav "$job/in$i.wav" --voice-prompt "${voices[$((i % 3))]}" --greedy "${model[@]}" \
    --output-wav "$work/single/in$i.wav" --output-text "$work/single/in$i.json"
done
same() { # every output identical to its single run
  for i in 0 1 2 3 4 5 6; do
    cmp -s "$work/single/in$i.wav" "$job/out/in$i.wav" || fail "$1: in$i.wav differs from its single run"
    cmp -s "$work/single/in$i.json" "$job/out/in$i.json" || fail "$1: in$i.json differs from its single run"
  done
}
same "the array"
echo "test-slurm: 7 items over 3 array tasks, each output once and identical to single runs ($(( $(date +%s) - start )) s)" >&2

# Reruns of some tasks (items i of shard i mod 3): each runs its own shard of the original 3.
rerun() { # rerun ARRAY: sbatch --array=ARRAY, waited for
  left=$((deadline - $(date +%s)))
  PP_OFFLINE=$work/pp-offline PP_OFFLINE_SHARDS=3 timeout "$left" sbatch --wait --array="$1" --cpus-per-task=1 --mem=500M \
    --output="$work/out/rerun-%a.log" --chdir="$work" scripts/slurm-array.sh "$job/jobs.jsonl" \
    --output-dir "$job/out" "${model[@]}" >"$work/sbatch-rerun.log" 2>&1
}
ran() { # ran TASK ITEMS...: the task's log took its shard, its report has exactly these items, all ok
  local a=$1; shift
  grep -q "shard $a/3 (Slurm array task $a, --shard-count 3)" "$work/out/rerun-$a.log" || fail "rerun task $a did not take shard $a/3: $(cat "$work/out/rerun-$a.log")"
  local n; n=$(grep -c '"status": "ok"' "$job/report-task$a.json")
  [ "$n" = $# ] || fail "rerun task $a: $n ok items, want $#: $(cat "$job/report-task$a.json")"
  for i in "$@"; do grep -q "\"input_wav\": \"$job/in$i.wav\"" "$job/report-task$a.json" || fail "rerun task $a did not run in$i.wav"; done
}
rm "$job"/out/in1.* "$job"/out/in4.*
rerun 1 || { cat "$work/sbatch-rerun.log" >&2; fail "sbatch --array=1"; }
ran 1 1 4
same "the one-task rerun"
rm "$job"/out/in0.* "$job"/out/in3.* "$job"/out/in6.* "$job"/out/in2.* "$job"/out/in5.*
rm -f "$work"/out/rerun-*.log
rerun 0,2 || { cat "$work/sbatch-rerun.log" >&2; fail "sbatch --array=0,2"; }
ran 0 0 3 6
ran 2 2 5
[ ! -e "$work/out/rerun-1.log" ] || fail "the sparse rerun ran task 1"
same "the sparse rerun"
# A task outside the array is refused (exit 2), and writes nothing.
if rerun 3; then fail "sbatch --array=3 succeeded"; fi
grep -q "outside --shard-count 3" "$work/out/rerun-3.log" || fail "task 3 not refused: $(cat "$work/out/rerun-3.log")"
[ ! -e "$job/report-task3.json" ] || fail "task 3 wrote a report"
n=$(ls "$job/out" | wc -l)
[ "$n" = 14 ] || fail "$n files in the output folder after the reruns, want 14"
echo "test-slurm: PASS: 7 items over 3 array tasks, the one-task rerun (--array=1), the sparse rerun (--array=0,2) and the refused task 3 ($(( $(date +%s) - start )) s)" >&2
