"""What Python costs on dlsched's engine: a documented measurement, not a test.

    python examples/python/speed.py            # needs `pip install ".[gym]"`; ../shared for the real traces

1. The cost of a Python decision: the 20-line Python SJF (examples/python/sjf.py)
   against the Rust `--policy sjf` on the same trace; the difference in wall
   time divided by the Python policy's calls (decide and on_arrival).
2. Gymnasium steps per second of dlsched/ClusterScheduling-v0 on lab16 (the
   synthetic workload) and on the Philly preset (the RFold Philly job list),
   with an agent that takes the first valid action.

Wall-clock figures depend on the machine; docs/python.md ("What Python costs") gives the
figures of one run with the machine named.
"""
import importlib.util
import pathlib
import time

import numpy as np

import dlsched

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"

spec = importlib.util.spec_from_file_location("sjf", ROOT / "examples" / "python" / "sjf.py")
sjf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sjf)


class CountingSJF(sjf.SJF):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def on_arrival(self, job, view):
        self.calls += 1
        super().on_arrival(job, view)

    def decide(self, view):
        self.calls += 1
        return super().decide(view)


def best_of(n, f):
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def decision_cost():
    window = SHARED / "fidelity" / "helios-philly"
    if window.is_dir():
        run = dict(trace=str(window / "philly_window_jobs.csv"), format="jobs-csv", vcs=str(window / "vc_sizes.csv"),
                   placement="consolidate", tie_order="numpy2-avx512")
        name = "Helios window (68,503 Philly jobs)"
    else:
        run = dict(trace=str(ROOT / "traces" / "example_jobs.csv"), vcs=str(ROOT / "traces" / "example_vcs.csv"))
        name = "traces/example_jobs.csv (../shared absent)"
    counter = CountingSJF()
    dlsched.simulate(policy=counter, **run)
    calls = counter.calls
    t_py = best_of(3, lambda: dlsched.simulate(policy=sjf.SJF(), **run))
    t_rust = best_of(3, lambda: dlsched.simulate(policy="sjf", **run))
    print(f"{name}: Python SJF {t_py:.3f} s, Rust SJF {t_rust:.3f} s (best of 3); "
          f"{calls} Python calls: {(t_py - t_rust) / calls * 1e6:.2f} us per call")


def gym_speed(label, max_steps, **workload):
    import dlsched.gym

    env = dlsched.gym.ClusterSchedulingEnv(max_steps=max_steps, **workload)
    obs, info = env.reset(seed=1)
    steps = 0
    t = time.perf_counter()
    done = truncated = False
    while not (done or truncated):
        obs, r, done, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        steps += 1
    dt = time.perf_counter() - t
    env.close()
    print(f"gym on {label}: {steps} steps in {dt:.2f} s: {steps / dt:,.0f} steps/s"
          f"{' (truncated)' if truncated else ''}")


if __name__ == "__main__":
    decision_cost()
    gym_speed("lab16, 2,000 synthetic jobs", 100_000, jobs=2000, cluster="lab16")
    philly = SHARED / "traces" / "philly" / "rfold_philly_jobs.csv"
    if philly.exists():
        gym_speed("the Philly preset (RFold job list), first 20,000 steps", 20_000, trace=str(philly), cluster="philly")
    else:
        print(f"gym on the Philly preset: skipped, {philly} is absent")
