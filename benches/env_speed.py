"""Steps per second of dlsched's learning environment: a documented
measurement, not a test (benches/README.md, "Learning environment", has the
figures of one run and the machine).

    python benches/env_speed.py                 # needs `pip install ".[gym]"`
    python benches/env_speed.py --seconds 10 --reference

Agents: "first-valid" (the first valid action: a FIFO with backfill over the
window) and "random-valid" (uniform over the mask, seeded). Cases:

1. one environment, `dlsched.gym.ClusterSchedulingEnv` stepped directly
   (what a training loop or SB3's DummyVecEnv does), and through
   `gymnasium.make` (with Gymnasium's checker and order wrappers);
2. `VectorClusterSchedulingEnv` of 1, 4, 16 and 64 environments: steps
   summed over the environments (a vector step of 16 counts 16);
3. with --reference, the first version (engine in a thread, before issue 36;
   python/tests/reference_gym.py) for the before/after ratio (its random
   agent never waits while nothing runs: that version then ends the run with
   an error instead of masking the wait).

Workload: lab16 (4 x 4 GPUs), 200 synthetic jobs per episode at load 0.9,
episodes drawn by reset() without a seed (each reset builds a new run: its
cost is in the figures). --cluster philly for the Philly preset.
"""
import argparse
import importlib.util
import os
import pathlib
import platform
import random
import time

import numpy as np
import gymnasium

import dlsched
import dlsched.gym

ROOT = pathlib.Path(__file__).resolve().parents[1]


def single(env, agent, seconds, rng, never_stall=False):
    pick = random.Random(0)
    obs, info = env.reset(seed=0)
    n = 0
    episodes = 0
    t0 = time.perf_counter()
    while True:
        mask = info["action_mask"]
        if agent == "first-valid":
            a = int(mask.argmax())
        else:
            valid = np.flatnonzero(mask)
            if never_stall and info["running"] == 0 and len(valid) > 1:
                valid = valid[:-1]  # the first version fails when a wait leaves nothing to run
            a = int(valid[pick.randrange(len(valid))])
        obs, r, term, trunc, info = env.step(a)
        n += 1
        if term or trunc:
            episodes += 1
            obs, info = env.reset()
        if n % 256 == 0 and time.perf_counter() - t0 > seconds:
            break
    return n / (time.perf_counter() - t0), episodes


def vector(num_envs, agent, seconds, rng, kw):
    venv = dlsched.gym.VectorClusterSchedulingEnv(num_envs=num_envs, **kw)
    obs, info = venv.reset(seed=0)
    n = 0
    t0 = time.perf_counter()
    while True:
        mask = info["action_mask"]
        if agent == "first-valid":
            a = mask.argmax(1)
        else:
            a = (rng.random(mask.shape) * mask).argmax(1)  # uniform over each row's valid actions
        obs, r, term, trunc, info = venv.step(a)
        n += num_envs
        if (n // num_envs) % 64 == 0 and time.perf_counter() - t0 > seconds:
            break
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    ap.add_argument("--cluster", default="lab16")
    ap.add_argument("--reference", action="store_true", help="also the first version (threads)")
    a = ap.parse_args()
    kw = dict(jobs=200, load=0.9, cluster=a.cluster)
    print(f"# {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"numpy {np.__version__}, gymnasium {gymnasium.__version__}; workload {kw}")
    rng = np.random.default_rng(0)
    for agent in ("first-valid", "random-valid"):
        env = dlsched.gym.ClusterSchedulingEnv(**kw)
        sps, eps = single(env, agent, a.seconds, rng)
        print(f"single  {agent:12s} direct            {sps:10,.0f} steps/s  ({eps} episodes)")
        env = gymnasium.make(dlsched.gym.ENV_ID, **kw)
        sps, _ = single(env, agent, a.seconds, rng)
        print(f"single  {agent:12s} gymnasium.make    {sps:10,.0f} steps/s")
        if a.reference:
            spec = importlib.util.spec_from_file_location("reference_gym", ROOT / "python/tests/reference_gym.py")
            ref = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(ref)
            env = ref.ReferenceClusterSchedulingEnv(**kw)
            sps, _ = single(env, agent, a.seconds, rng, never_stall=True)
            env.close()
            print(f"single  {agent:12s} first version     {sps:10,.0f} steps/s")
        for n in (1, 4, 16, 64):
            sps = vector(n, agent, a.seconds, rng, kw)
            print(f"vector  {agent:12s} {n:3d} environments  {sps:10,.0f} steps/s (summed)")


if __name__ == "__main__":
    main()
