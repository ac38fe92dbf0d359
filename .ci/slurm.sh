#!/usr/bin/env bash
# CI: a sharded sweep on a real Slurm. Installs Slurm and MUNGE from
# Debian's packages when they are missing, starts a private one-node cluster
# (munged, slurmctld, slurmd as root; config, keys, state and logs under
# $DLSCHED_SLURM_DIR, default /tmp/dlsched-ci-slurm, on ports 16817/16818, so a
# site's Slurm is not touched), waits for the node to be idle, then submits
# experiments/slurm/ci-small.toml with experiments/slurm/submit.sh: a 3-task job
# array (sweep.sbatch, `dlsched sweep --shard slurm`) and the merge as a job
# depending on it (merge.sbatch, --dependency=afterok). It runs the same sweep
# unsharded and checks that the merged summary.csv is byte-identical to it;
# with DLSCHED_PYTHON, the same for a sweep of a Python policy run by
# dlsched.sweep(shard="slurm") in a 2-task array (the Python route).
# The daemons are stopped on exit, whatever happened. Rerunnable: a run first
# stops the daemons an earlier, killed run left (by their pid files) and starts
# from an empty directory. Needs root (apt-get, slurmd).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
say() { echo "slurm: $*"; }
fail() {
  echo "slurm: FAILED: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || fail "needs root (it installs packages and runs slurmd); run it as root"

# --- packages ---
packages=(slurmctld slurmd slurm-client munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
say "$(slurmctld -V), $(munged -V 2>&1 | awk '{print $1}')"

# --- a private cluster of one node ---
state="${DLSCHED_SLURM_DIR:-/tmp/dlsched-ci-slurm}"
conf="$state/etc/slurm.conf"
export SLURM_CONF="$conf" # sbatch, sinfo, squeue, scontrol, scancel: this cluster
host="$(hostname -s)"
cpus="$(nproc)"

# Stops the daemons whose pid files are in $state/run (this script started
# them: the pid must still name that program), slurmd first.
stop_daemons() {
  local name pidfile pid i
  for name in slurmd slurmctld munged; do
    pidfile="$state/run/$name.pid"
    [ -s "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    if [[ "$pid" =~ ^[0-9]+$ ]] && [[ "$(ps -p "$pid" -o comm= 2>/dev/null)" == "$name"* ]]; then
      kill "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
      done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

# Cancels the jobs of this cluster, if its slurmctld is up, and waits (up to
# 20 s) for them to go, so that no job step outlives slurmd.
cancel_jobs() {
  [ -f "$conf" ] && [ -s "$state/run/slurmctld.pid" ] || return 0
  local jobs i
  jobs="$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | xargs)" || true
  [ -n "$jobs" ] || return 0
  # shellcheck disable=SC2086 # one word per job id
  timeout 10 scancel $jobs 2>/dev/null || true
  for i in $(seq 1 20); do
    [ -z "$(timeout 10 squeue -h -o %A 2>/dev/null)" ] && break
    sleep 1
  done
}

# On exit: cancel this cluster's jobs, stop the daemons; on failure, show the
# logs and keep $state for a look.
cleanup() {
  local status=$?
  trap - EXIT
  cancel_jobs
  stop_daemons
  if [ "$status" -ne 0 ]; then
    for log in "$state"/log/*.log "$state"/out/slurm/logs/*.out; do
      [ -f "$log" ] || continue
      echo "--- $log (last 30 lines)" >&2
      tail -n 30 "$log" >&2
    done
    echo "slurm: exit $status; state, config and logs kept in $state" >&2
  else
    rm -rf "$state"
  fi
  exit "$status"
}

cancel_jobs # an earlier run's, if it was killed
stop_daemons
rm -rf "$state"
mkdir -p "$state"/{etc,run,log,munge,key,spool/ctld,spool/d,out}
chmod 0755 "$state" "$state/munge" # munged: its socket's directory open to all
chmod 0700 "$state/key"
trap cleanup EXIT

cat >"$conf" <<EOF
# A one-node cluster for .ci/slurm.sh: no cgroups, no accounting.
ClusterName=dlsched-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket.2
StateSaveLocation=$state/spool/ctld
SlurmdSpoolDir=$state/spool/d
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
DependencyParameters=kill_invalid_depend
ReturnToService=2
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

mungekey --create --keyfile="$state/key/munge.key" --force
chmod 0400 "$state/key/munge.key"
munged --key-file="$state/key/munge.key" --socket="$state/munge/munge.socket.2" \
  --pid-file="$state/run/munged.pid" --log-file="$state/log/munged.log" \
  --seed-file="$state/key/munged.seed"
munge -n -S "$state/munge/munge.socket.2" | unmunge -S "$state/munge/munge.socket.2" >/dev/null ||
  fail "munged does not answer on $state/munge/munge.socket.2"
slurmctld -f "$conf"
slurmd -f "$conf" -N "$host"
say "munged, slurmctld, slurmd started ($state); node $host, $cpus CPUs"

for _ in $(seq 1 60); do
  node_state="$(sinfo -h -N -n "$host" -o %T 2>/dev/null || true)"
  [ "$node_state" = "idle" ] && break
  sleep 1
done
[ "${node_state:-}" = "idle" ] || fail "node $host is '${node_state:-unknown}' after 60 s, not idle: $(sinfo -R 2>&1)"
say "node $host is idle"

# --- the sweep as a job array, the merge as a dependent job ---
# The binary: $DLSCHED when the caller built one (.ci/run passes its test
# build's), else the `dlsched` on PATH (`pip install .` installs one, the same
# command line), else a release build of the checkout.
if [ -n "${DLSCHED:-}" ]; then
  dlsched="$DLSCHED"
elif command -v dlsched >/dev/null; then
  dlsched="$(command -v dlsched)"
else
  cargo build --release --quiet
  dlsched="$repo/target/release/dlsched"
fi
exp="experiments/slurm/ci-small.toml"
out="$state/out"
start=$SECONDS
submitted="$(CPUS_PER_TASK=1 DLSCHED="$dlsched" timeout 600 experiments/slurm/submit.sh --wait "$exp" "$out/slurm" 3)" ||
  fail "the sweep or its merge failed (submit.sh exit $?): $submitted"
echo "$submitted"
array_id="$(sed -n 's/^sweep: array job \([0-9]*\),.*/\1/p' <<<"$submitted")"
merge_id="$(sed -n 's/^merge: job \([0-9]*\),.*/\1/p' <<<"$submitted")"
[ -n "$array_id" ] && [ -n "$merge_id" ] || fail "no job ids in submit.sh's output"
tasks="$(scontrol -o show job "$array_id" | grep -o 'JobState=[A-Z]*' | sort | uniq -c | xargs)"
[ "$tasks" = "3 JobState=COMPLETED" ] || fail "array job $array_id: tasks $tasks, not 3 completed"
merge_state="$(scontrol -o show job "$merge_id" | grep -o 'JobState=[A-Z]*' | xargs)"
[ "$merge_state" = "JobState=COMPLETED" ] || fail "merge job $merge_id: $merge_state"
say "array job $array_id: $tasks; merge job $merge_id: $merge_state; $((SECONDS - start)) s"
for i in 1 2 3; do
  grep -q "(shard $i/3, from the Slurm job array)" "$out/slurm/logs/sweep-${array_id}_$i.out" ||
    fail "task $i's log does not say it ran shard $i/3: $(cat "$out/slurm/logs/sweep-${array_id}_$i.out")"
done
say "tasks 1, 2, 3 ran shards 1/3, 2/3, 3/3"
grep -h "^merged" "$out/slurm/logs/merge-$merge_id.out" | sed 's/^/slurm: /'

# --- the same sweep, unsharded, and the byte-for-byte check ---
"$dlsched" sweep "$exp" --out "$out/whole" >/dev/null
cmp "$out/slurm/merged/summary.csv" "$out/whole/summary.csv" ||
  fail "merged summary.csv differs from the unsharded sweep's"
say "merged summary.csv ($(($(wc -l <"$out/whole/summary.csv") - 1)) runs) is byte-identical to the unsharded sweep's"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "jct_mean_s") c = i } { print "slurm:   " $1 "," $2 "," $3 "," $c }' \
  "$out/slurm/merged/summary.csv"

# --- the Python route: a sweep of a Python policy as a job array ---
# With DLSCHED_PYTHON (the Python of an environment with the package: .ci/run
# gives its venv's), a 2-task array runs dlsched.sweep(policies=...,
# shard="slurm") of the Python SJF (examples/python/sjf.py) and FIFO over 3
# seeds of 100 synthetic jobs, each task in its own directory; the shards merged by `dlsched merge`
# must equal the sweep run whole in worker processes, byte for byte.
if [ -n "${DLSCHED_PYTHON:-}" ]; then
  py_out="$out/python"
  mkdir -p "$py_out/logs"
  cat >"$py_out/sweep.py" <<'PY'
import os, sys
import dlsched
if __name__ == "__main__":  # each worker process imports this file
    dlsched.sweep(policies={"python-sjf": "sjf:SJF", "fifo": "fifo"}, seeds=[1, 2, 3], jobs=100,
                  out=sys.argv[1], shard=sys.argv[2] if sys.argv[2] != "-" else None,
                  resume=True, workers=int(os.environ.get("SLURM_CPUS_PER_TASK", "2")))
PY
  start=$SECONDS
  PYTHONPATH="$repo/examples/python" timeout 300 sbatch --wait --array=1-2 --cpus-per-task=1 \
    --output="$py_out/logs/py-%A_%a.out" --wrap \
    "\"$DLSCHED_PYTHON\" \"$py_out/sweep.py\" \"$py_out/shard-\$SLURM_ARRAY_TASK_ID\" slurm" >/dev/null ||
    fail "the Python sweep's job array failed"
  "$dlsched" merge "$py_out/shard-1" "$py_out/shard-2" --out "$py_out/merged" >/dev/null
  PYTHONPATH="$repo/examples/python" "$DLSCHED_PYTHON" "$py_out/sweep.py" "$py_out/whole" -
  cmp "$py_out/merged/summary.csv" "$py_out/whole/summary.csv" ||
    fail "the Python sweep's merged summary.csv differs from the unsharded one's"
  say "Python route: 2 array tasks (shard=\"slurm\") merged = the sweep in worker processes ($(($(wc -l <"$py_out/whole/summary.csv") - 1)) runs, byte-identical summary.csv); $((SECONDS - start)) s"
fi
say "OK"
