#!/usr/bin/env bash
# Submits a dlsched sweep to Slurm: a job array of N shards (sweep.sbatch)
# and the merge (merge.sbatch) as a job that starts once every shard has
# succeeded (--dependency=afterok), then prints both job ids.
#
#   experiments/slurm/submit.sh [--wait] EXPERIMENT OUT_ROOT N [SBATCH_OPTION...]
#
# SBATCH_OPTION... (your site's --partition, --account, --time, --qos, ...)
# go to both submissions. Environment:
#   CPUS_PER_TASK  CPUs of each array task = dlsched's --threads (default 2)
#   DLSCHED        the dlsched binary (default: `dlsched` on PATH, else this
#                  checkout's target/release/dlsched)
#   SWEEP_ARGS     more options for `dlsched sweep`, split on spaces (e.g. --resume)
# --wait returns once the merge job has ended: 0 when it completed, else
# non-zero (a failed shard leaves the merge pending, DependencyNeverSatisfied,
# unless the cluster cancels it: DependencyParameters=kill_invalid_depend). Results: OUT_ROOT/merged;
# shards in OUT_ROOT/shard-I; job logs in OUT_ROOT/logs. See README.md here.
set -euo pipefail

usage() {
  echo "usage: $0 [--wait] EXPERIMENT OUT_ROOT N [SBATCH_OPTION...]" >&2
  exit 2
}
wait_flag=()
if [ "${1:-}" = "--wait" ]; then
  wait_flag=(--wait)
  shift
fi
[ "$#" -ge 3 ] || usage
here="$(cd "$(dirname "$0")" && pwd)"
experiment="$(realpath -e "$1")" || { echo "$0: no experiment file $1" >&2; exit 2; }
root="$(realpath -m "$2")"
shards="$3"
shift 3
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "$0: N must be a whole number >= 1, got '$shards'" >&2; exit 2; }
cpus="${CPUS_PER_TASK:-2}"
[[ "$cpus" =~ ^[1-9][0-9]*$ ]] || { echo "$0: CPUS_PER_TASK must be a whole number >= 1, got '$cpus'" >&2; exit 2; }
if [ -n "${DLSCHED:-}" ]; then
  dlsched="$DLSCHED"
elif command -v dlsched >/dev/null; then
  dlsched="$(command -v dlsched)"
elif [ -x "$here/../../target/release/dlsched" ]; then
  dlsched="$(realpath "$here/../../target/release/dlsched")"
else
  echo "$0: no dlsched binary: set DLSCHED, put dlsched on PATH (cargo install --path ., or pip install . in the active venv) or cargo build --release" >&2
  exit 2
fi
read -r -a sweep_args <<<"${SWEEP_ARGS:-}"

mkdir -p "$root/logs"
array_id="$(sbatch --parsable --array="1-$shards" --cpus-per-task="$cpus" \
  --output="$root/logs/sweep-%A_%a.out" --export="ALL,DLSCHED=$dlsched" "$@" \
  "$here/sweep.sbatch" "$experiment" "$root" ${sweep_args[@]+"${sweep_args[@]}"})"
array_id="${array_id%%;*}" # --parsable prints "id" or "id;cluster"
echo "sweep: array job $array_id, $shards tasks of $cpus CPU$([ "$cpus" = 1 ] || echo s) -> $root/shard-1..$shards"
merge_out="$(sbatch --parsable ${wait_flag[@]+"${wait_flag[@]}"} --dependency="afterok:$array_id" \
  --output="$root/logs/merge-%j.out" --export="ALL,DLSCHED=$dlsched" "$@" \
  "$here/merge.sbatch" "$root" "$shards")" && status=0 || status=$?
merge_id="${merge_out%%;*}"
echo "merge: job $merge_id, after array job $array_id succeeds -> $root/merged"
# sbatch --wait exits 0 for a merge cancelled before it ran (a shard failed
# and the cluster cancels jobs whose dependency can never be met): ask.
if [ "${#wait_flag[@]}" -gt 0 ] && [ "$status" -eq 0 ]; then
  merge_state="$(scontrol -o show job "$merge_id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -n 1)" || true
  merge_state="${merge_state#JobState=}"
  if [ -n "$merge_state" ] && [ "$merge_state" != COMPLETED ]; then
    echo "$0: merge job $merge_id ended $merge_state, not COMPLETED (did a shard fail? logs in $root/logs)" >&2
    status=1
  fi
fi
exit "$status"
