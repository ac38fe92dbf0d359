"""Trains a small tabular Q-learning scheduler in dlsched's Gymnasium environment
and plots its learning curve against FIFO.

    pip install ".[gym]" matplotlib
    python examples/python/train_agent.py --episodes 60 --out /tmp/agent.png

The agent sees a coarse state: which of the first four waiting jobs can be
placed now (4 bits), how many GPUs each of them asks (1, 2, 4 or 8+: 2 bits
each for the first two), and the cluster's free share (4 levels). It picks a
slot or waits (masked to the valid actions), epsilon-greedy with epsilon
decaying from 0.3 to 0.02; the reward is minus the JCT accrued (``reward="jct"``).
Every episode is the same workload (seed 1: 120 synthetic jobs on lab16 at
load 0.9), so the curve shows the agent learning that workload; FIFO (strict)
and FIFO with backfill (always the first job that fits) are its baselines.
Kept out of the test dependencies: it needs matplotlib.

What one run showed (40 episodes, 2026-12-02): the agent's mean JCT moved
between 10 and 33 h without a trend, mostly between FIFO's 20.4 h and
FIFO with backfill's 12.4 h. This coarse state and 40 episodes do not learn
backfilling reliably; the example shows the loop, not a result.

For an agent that learns, see ``examples/python/train_maskable_ppo.py``
(sb3-contrib's MaskablePPO on the vectorised environment, episodes sampled
over a load range, evaluated on held-out episodes with paired intervals;
write-up ``experiments/rl-agent.md``). This file stays as the smallest
dependency-free loop (no torch).
"""
import argparse
import collections
import random

import numpy as np

import dlsched.gym

WORKLOAD = dict(jobs=120, load=0.9, cluster="lab16")
K = 4


def state(obs):
    slots = obs[: K * 4].reshape(K, 4)
    free = obs[-1]
    bits = tuple(int(s[0] > 0) for s in slots)
    gpus = tuple(min(3, int(round(np.log2(max(1.0, s[1] * 16))))) for s in slots[:2])
    return bits + gpus + (min(3, int(free * 4)),)


def run(env, choose, seed=1):
    obs, info = env.reset(seed=seed)
    done = truncated = False
    steps = []
    while not (done or truncated):
        a = choose(obs, info)
        nobs, r, done, truncated, ninfo = env.step(a)
        steps.append((obs, info, a, r, nobs, ninfo, done))
        obs, info = nobs, ninfo
    return steps, env.result.summary["jct_mean_s"] / 3600.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--out", default="agent_learning_curve.png")
    ap.add_argument("--seed", type=int, default=0, help="the agent's own random stream")
    a = ap.parse_args()
    env = dlsched.gym.ClusterSchedulingEnv(max_queue=K, reward="jct", **WORKLOAD)
    _, fifo = run(env, lambda o, i: 0 if i["action_mask"][0] else K)
    _, backfill = run(env, lambda o, i: int(np.flatnonzero(i["action_mask"])[0]))
    rng = random.Random(a.seed)
    q = collections.defaultdict(float)
    alpha, gamma = 0.2, 0.98
    curve = []
    for ep in range(a.episodes):
        eps = max(0.02, 0.3 * (1 - ep / max(1, a.episodes * 0.7)))

        def choose(obs, info):
            valid = list(np.flatnonzero(info["action_mask"]))
            if rng.random() < eps:
                return int(rng.choice(valid))
            s = state(obs)
            return int(max(valid, key=lambda x: (q[(s, x)], -x)))

        steps, jct = run(env, choose)
        for obs, info, act, r, nobs, ninfo, done in steps:
            s, ns = state(obs), state(nobs)
            best = 0.0 if done else max(q[(ns, x)] for x in np.flatnonzero(ninfo["action_mask"]))
            q[(s, act)] += alpha * (r + gamma * best - q[(s, act)])
        curve.append(jct)
        print(f"episode {ep + 1}: mean JCT {jct:.2f} h (epsilon {eps:.2f}); FIFO {fifo:.2f} h, FIFO+backfill {backfill:.2f} h")
    env.close()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    ax.plot(range(1, len(curve) + 1), curve, marker="o", ms=3, label="tabular Q-learning agent")
    ax.axhline(fifo, color="C1", ls="--", label="FIFO (strict)")
    ax.axhline(backfill, color="C2", ls=":", label="FIFO + backfill")
    ax.set_xlabel("Training episode")
    ax.set_ylabel("Mean JCT (h)")
    ax.set_ylim(bottom=0)
    ax.set_title("Learning curve on lab16, 120 synthetic jobs, load 0.9, seed 1")
    ax.legend()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
