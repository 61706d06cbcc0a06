#!/usr/bin/env bash
# pp-offline batch as a Slurm job array: each array task runs one shard of
# the manifest (pp-offline reads SLURM_ARRAY_TASK_ID / _MIN / _COUNT and
# logs which shard it took). Rerunning the array resumes: items whose
# outputs are complete are skipped.
#
#   sbatch --array=0-7 scripts/slurm-array.sh jobs.jsonl [pp-offline batch flags...]
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
reports=${PP_OFFLINE_REPORT_DIR:-$(dirname "$manifest")}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
threads=()
# Without a cgroup task plugin the CPUs given to the task are not enforced:
# use what was asked for.
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then threads=(--threads "$SLURM_CPUS_PER_TASK"); fi
# exec: pp-offline gets Slurm's SIGTERM (time limit, scancel) itself, finishes
# no partial item, writes the report and exits 143.
exec "$bin" batch --manifest "$manifest" --report "$reports/report-task${SLURM_ARRAY_TASK_ID:-0}.json" "${threads[@]}" "$@"
