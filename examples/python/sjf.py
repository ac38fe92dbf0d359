"""Shortest job first, written in Python, on dlsched's engine.

Strict SJF inside each VC partition: the waiting job with the shortest trace
duration (ties: the earlier job id) starts when the run's placement rule can
place it; until then nothing behind it in its VC starts. This is the Rust
`--policy sjf` (strict), and gives its jobs.csv byte for byte:

    python examples/python/sjf.py TRACE.csv VCS.csv   # prints IDENTICAL or DIFFERENT
"""
import heapq
import dlsched


class SJF:
    name = "python-sjf"

    def __init__(self):
        self.queues = {}  # VC index -> heap of (duration_s, job id)

    def on_arrival(self, job, view):
        heapq.heappush(self.queues.setdefault(view.vc(job), []), (view.duration_s(job), job))

    def decide(self, view):
        for queue in self.queues.values():
            if queue and (gpus := view.place(queue[0][1])) is not None:
                return dlsched.launch(heapq.heappop(queue)[1], gpus)
        return None  # every VC's head waits: nothing more at this instant


if __name__ == "__main__":
    import sys

    trace, vcs = sys.argv[1], sys.argv[2]
    run = dict(trace=trace, format="jobs-csv", vcs=vcs, placement="consolidate", tie_order="numpy2-avx512")
    py = dlsched.simulate(policy=SJF(), **run)
    rust = dlsched.simulate(policy="sjf", **run)
    same = py.files["jobs.csv"] == rust.files["jobs.csv"]
    print(f"{len(py.jobs)} jobs: Python SJF vs Rust SJF jobs.csv", "IDENTICAL" if same else "DIFFERENT")
    sys.exit(0 if same else 1)
