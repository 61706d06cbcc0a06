#!/usr/bin/env bash
# pp-offline batch as a Slurm job array: array task i runs shard i of
# PP_OFFLINE_SHARDS (--shard-count; keep it equal to the --array below) and
# logs which shard it took. Rerunning resumes: items whose outputs are
# complete and were made with the same settings are skipped. To rerun
# some tasks only, submit those: `sbatch --array=2` or `--array=1,3` runs
# the shards 2, or 1 and 3, of the original array.
#
#   PP_OFFLINE_SHARDS=8 sbatch --array=0-7 scripts/slurm-array.sh jobs.jsonl [pp-offline batch flags...]
#
# Environment: PP_OFFLINE (the binary, default: pp-offline on PATH);
# PP_OFFLINE_REPORT_DIR (default: the manifest's folder; each task writes
# report-task<ID>.json there); HF_HUB_OFFLINE defaults to 1 (run
# `pp-offline download` once on a login node, see README).
# Change the resources below to the model: the 7B wants ~20 GB of host
# memory for the weights plus ~3 GiB per conversation in the batch.
#SBATCH --job-name=pp-offline-batch
#SBATCH --array=0-3
#SBATCH --cpus-per-task=16
#SBATCH --mem=64G
#SBATCH --time=12:00:00
#SBATCH --output=pp-offline-%A_%a.log
#SBATCH --signal=B:TERM@120
set -euo pipefail
manifest=${1:?usage: sbatch --array=0-N scripts/slurm-array.sh jobs.jsonl [pp-offline batch flags]}
shift
bin=${PP_OFFLINE:-pp-offline}
shards=${PP_OFFLINE_SHARDS:-4} # the tasks of the whole array: #SBATCH --array=0-3
reports=${PP_OFFLINE_REPORT_DIR:-$(dirname "$manifest")}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
threads=()
# Without a cgroup task plugin the CPUs given to the task are not enforced:
# use what was asked for.
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then threads=(--threads "$SLURM_CPUS_PER_TASK"); fi
# exec: pp-offline gets Slurm's SIGTERM (time limit, scancel) itself: no new
# item starts, those in flight finish when they can within --grace (100 s
# by default, for TERM@120), nothing is half-written, the report is written,
# exit 143.
exec "$bin" batch --manifest "$manifest" --shard-count "$shards" --report "$reports/report-task${SLURM_ARRAY_TASK_ID:-0}.json" "${threads[@]}" "$@"
