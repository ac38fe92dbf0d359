"""Figure 10 of ElasticFlow, job by job: which of the artifact's finish times
are our finish times moved by the simulator's slot alignment and overhead.

Usage (experiments/elasticflow.md, "Figure 10, job by job"):
    python3 experiments/elasticflow_fig10_check.py ARTIFACT_FIG10_DIR OUR_RUN_DIR

ARTIFACT_FIG10_DIR: the artifact's `plot_figure/logs/figure10/ef-accessctrl`
(its job.csv and scheduling_events.csv); OUR_RUN_DIR: a `dlsched simulate`
output of the same trace under `elasticflow` (its jobs.csv).

The rule tested (pkusys/ElasticFlow @ 04a0109a, scheduler.py and utils.py):
a job's end event is its real end (whole seconds, `math.ceil`) rounded up to
the slot grid (240 s) of the scheduling instant that planned it
(`utils.align_to_time_slot`), and at every scheduling instant while it runs
it is charged `utils.estimate_overhead`: 2 s if its configuration is cached,
else 2 + 2 * (log2 GPUs + 1) s. A job counts as explained when, for some
scheduling instant t0 of the artifact's log between its submission and our
end, its artifact end minus align(t0, our end) lies between 2 s and the
uncached overhead summed over the instants of its life (GPU counts from the
log). Standard library only.
"""

import csv
import math
import sys

SLOT_S = 240


def align(start, t, unit):
    """utils.align_to_time_slot: t rounded up to start + k * unit."""
    n = (t - start) // unit
    if (t - start) % unit > 0:
        n += 1
    return start + n * unit


def main(art_dir, our_dir):
    art = {int(r["job_id"]): r for r in csv.DictReader(open(f"{art_dir}/job.csv"))}
    ours = {int(r["job_id"]): r for r in csv.DictReader(open(f"{our_dir}/jobs.csv"))}
    with open(f"{art_dir}/scheduling_events.csv") as f:
        rows = [line.split(",") for line in f.read().splitlines()[1:]]
    instants = [float(r[0]) for r in rows]
    explained, other = [], []
    for j in sorted(art):
        a_end = float(art[j]["end_time"])
        o_end = math.ceil(float(ours[j]["end_s"]))
        submit = float(art[j]["submit_time"])
        # The job's GPUs at each of the artifact's instants of its life.
        gpus = [sum(1 for x in r[1:-1] if x == str(j)) for r in rows if submit <= float(r[0]) < a_end]
        o_max = sum(2 + 2 * (math.log2(g) + 1) for g in gpus if g > 0)
        o_min = 2 * sum(1 for g in gpus if g > 0)
        ends = [align(t0, o_end, SLOT_S) for t0 in instants if submit <= t0 <= o_end]
        hit = any(o_min - 1e-9 <= a_end - e <= o_max + 1e-9 for e in ends)
        (explained if hit else other).append((j, round(a_end - o_end)))
    print(f"jobs: {len(art)}; artifact end = our end aligned to a slot + overhead: {len(explained)}")
    print("the others (job, artifact end - our end, s):", other)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
