"""A sweep of Python policies over seeds, in worker processes, as one task
of a Slurm job array (or on one machine): dlsched.sweep(policies=...,
seeds=...) writes the sweep directory `dlsched sweep` writes, with its run
ids, shards and resume.

    python examples/python/sweep_policies.py runs/py-policies              # the whole sweep, here
    python examples/python/sweep_policies.py runs/py-policies/shard-2 2/4  # shard 2 of 4

As a Slurm job array of 4 tasks (each with its own output directory), then
the merge (docs/experiments.md, "Sweeps of Python policies"):

    sbatch --array=1-4 --cpus-per-task=4 --wrap \
      'python examples/python/sweep_policies.py runs/py-policies/shard-$SLURM_ARRAY_TASK_ID slurm'
    dlsched merge runs/py-policies/shard-{1,2,3,4} --out runs/py-policies/merged

The policies are given by name ("module:attr", imported by each worker), so
run it from the repository's root or put examples/python on PYTHONPATH.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `sjf` below, in the workers too

import dlsched  # noqa: E402


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "runs/py-policies"
    shard = sys.argv[2] if len(sys.argv) > 2 else None
    workers = int(os.environ.get("SLURM_CPUS_PER_TASK", os.cpu_count() or 1))
    summary = dlsched.sweep(
        policies={"python-sjf": "sjf:SJF", "fifo": "fifo"},  # a Python policy beside a registered one
        seeds=range(1, 6),
        grid={"load": [0.6, 0.9]},
        jobs=500,
        out=out,
        shard=shard,
        resume=True,  # a rerun of the task keeps its complete runs
        workers=workers,
        question="Does a Python SJF beat FIFO with backfill on lab16 as the load grows?",
    )
    print(f"{len(summary)} runs -> {out}/summary.csv")


if __name__ == "__main__":  # the workers (spawned) import this file without running it
    main()
