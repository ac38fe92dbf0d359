"""Trains sb3-contrib's MaskablePPO to schedule jobs in dlsched's environment,
and evaluates it on held-out episodes against random-valid, FIFO with
backfill and (ours, an oracle) SJF with backfill. Write-up and results:
``experiments/rl-agent.md``.

    pip install ".[gym]" stable-baselines3 sb3-contrib matplotlib   # torch comes with them
    S=examples/python/train_maskable_ppo.py
    python $S train --setup heavy --arch per-job --steps 800000 --eval-every 25000 --seed 1 --out runs/heavy-pj
    python $S evaluate --setup heavy --model runs/heavy-pj/best.zip --name ppo --out runs/heavy-pj
    python $S plot runs/heavy-pj/curve.csv --out runs/heavy-pj/curve.png

The setups (``SETUPS``, ``--setup``): lab16 (16 GPUs), episodes of 100
synthetic jobs at an offered load drawn uniformly in 0.8-1.6 ("base") or
1.5-2.5 ("heavy") (``episodes="loads"``), the fixed observation (cluster
summary + 9 features for each of the first ``max_queue`` waiting jobs, 8 in
"base", 16 in "heavy"; oracle duration included unless ``--no-oracle``),
``action="job"`` (start one of them with the consolidate rule, or wait),
``reward="jct"`` with ``reward_norm="per_job"`` (an episode's return is minus
its mean JCT in hours).

Policies (``--arch``): SB3's ``MlpPolicy``, or ``per-job``
(:func:`per_job_policy`: one shared network scores every queue slot, as
RLScheduler does). ``train`` writes ``curve.csv`` (training episodes' and
tuning episodes' mean JCT against steps), ``model.zip`` (the last),
``best.zip`` (the lowest mean JCT on the tuning keys) and ``train.json``
(settings, wall and CPU time).

Seeds, kept apart:

- training episodes: ``split="train"`` (run seeds below 2^63), drawn by each
  environment's generator, seeded from ``--seed``;
- tuning episodes (hyperparameters and the learning curve's held-out points):
  ``split="eval"``, keys 0-9 (``TUNING_KEYS``);
- reporting episodes: ``split="eval"``, keys 100-119 (``REPORT_KEYS``), used
  only by ``evaluate``; the eval split's run seeds are 2^63 + key, so no
  training episode can be one of them, and the key ranges do not overlap.

The baselines run on the identical workload: each episode's jobs (submit
time, duration, GPUs, taken from the episode's ``jobs.csv``; the workload
does not depend on the actions) are written as a ``jobs-csv`` trace and
replayed by ``dlsched.simulate`` with ``policy="fifo"`` / ``"sjf"`` and
``backfill=True`` on the same cluster and placement. Random-valid (the
control) draws uniformly over the mask with its own seeded stream.

The parts without torch (baselines, paired intervals, the trace export)
import without stable-baselines3; ``python/tests/test_train_example.py``
tests them.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

import dlsched
import dlsched.gym

ENV: Dict = dict(
    cluster="lab16",
    jobs=100,
    episodes="loads",
    loads=(0.8, 1.6),
    observation="fixed",
    reward="jct",
    reward_norm="per_job",
    action="job",
    max_queue=8,
)
# Named setups (``--setup``): "base" is ENV; "heavy" is a higher load range
# with a window of 16 (on 100 jobs it covers the queue almost always, so
# first-valid in the window is FIFO with backfill and shortest-first is SJF
# with backfill; at loads 0.8-1.6 and a window of 8 shortest-first in the
# window gains only 0.13 h on FIFO with backfill, on the tuning keys).
SETUPS: Dict[str, Dict] = {"base": dict(ENV), "heavy": dict(ENV, loads=(1.5, 2.5), max_queue=16)}


def use_setup(name: str) -> None:
    """Makes setup ``name`` the module's ``ENV`` (every function reads ``ENV``)."""
    ENV.clear()
    ENV.update(SETUPS[name])


TUNING_KEYS = list(range(0, 10))
REPORT_KEYS = list(range(100, 120))

# Two-sided 95 % Student t quantiles t_{0.975, df} (df 1-30; normal beyond).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table; 1.96 past 30)."""
    if df < 1:
        raise ValueError("df: at least 1")
    return _T975[df - 1] if df <= 30 else 1.96


def paired_interval(a: Sequence[float], b: Sequence[float]) -> Dict[str, float]:
    """Mean of ``a - b`` over paired episodes with its t-based 95 % interval."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size < 2:
        raise ValueError("paired_interval: at least 2 pairs")
    m = float(d.mean())
    half = t975(d.size - 1) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return {"n": int(d.size), "mean": m, "lo": m - half, "hi": m + half}


def make_env(split: str = "eval", oracle: bool = True, **over) -> "dlsched.gym.ClusterSchedulingEnv":
    """One environment of the setup (``over`` replaces keys of ``ENV``)."""
    kw = dict(ENV)
    kw.update(over)
    return dlsched.gym.ClusterSchedulingEnv(split=split, oracle=oracle, **kw)


def run_episode(env, key: int, choose: Callable) -> dict:
    """Plays the episode of ``key`` with ``choose(obs, mask) -> action``; returns
    its mean JCT (h), steps, waits, its run seed and its ``dlsched.Result``."""
    obs, info = env.reset(seed=key)
    done = truncated = False
    steps = waits = 0
    wait = env.action_space.n - 1
    while not (done or truncated):
        a = int(choose(obs, env.action_masks()))
        waits += a == wait
        obs, _, done, truncated, info = env.step(a)
        steps += 1
    if truncated and not done:
        raise RuntimeError(f"episode {key} was cut after {steps} steps")
    res = env.result
    return {"jct_h": res.summary["jct_mean_s"] / 3600.0, "steps": steps, "waits": waits,
            "run_seed": env.episode_seed, "result": res}


def random_valid(seed: int) -> Callable:
    """The control: uniform over the valid actions, its own seeded stream."""
    rng = np.random.default_rng(seed)
    return lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))


def first_valid(obs, mask) -> int:
    return int(np.flatnonzero(mask)[0])


def window_sjf(max_queue: int) -> Callable:
    """Ours: among the valid jobs of the window, the shortest by the fixed
    observation's oracle duration (slot feature 8); waits only when nothing fits."""

    def choose(obs, mask):
        valid = np.flatnonzero(mask[:max_queue])
        if valid.size == 0:
            return max_queue
        slots = np.asarray(obs[10:10 + max_queue * 9]).reshape(max_queue, 9)
        return int(valid[np.argmin(slots[valid, 8])])

    return choose


def agreement(env, keys: Sequence[int], choose: Callable, ref=None) -> Dict[str, float]:
    """What a policy does at the steps with a real choice (two or more jobs
    startable): the shares of those steps where it starts the window's
    shortest job (oracle duration), the first startable job (arrival order),
    or waits; over the episodes of ``keys``, following its own trajectory.
    ``ref``, an environment of ``ENV``'s observation stepped alongside with
    the same actions, gives the oracle durations when ``env`` lacks them."""
    ref = ref if ref is not None else env
    sjf = window_sjf(ref.max_queue)
    wait = env.action_space.n - 1
    n = same_sjf = same_first = waits = 0
    for k in keys:
        obs, _ = env.reset(seed=k)
        robs, _ = ref.reset(seed=k) if ref is not env else (obs, None)
        done = truncated = False
        while not (done or truncated):
            mask = env.action_masks()
            a = int(choose(obs, mask))
            jobs = np.flatnonzero(mask[:wait])
            if jobs.size >= 2:
                n += 1
                same_sjf += a == sjf(robs, mask)
                same_first += a == int(jobs[0])
                waits += a == wait
            obs, _, done, truncated, _ = env.step(a)
            robs = ref.step(a)[0] if ref is not env else obs
    return {"choice_steps": n, "as_window_sjf": same_sjf / max(n, 1), "as_first_valid": same_first / max(n, 1),
            "waits": waits / max(n, 1)}


def replay(result, policy: str, cluster: str = "lab16", placement: str = "consolidate") -> float:
    """Mean JCT (h) of ``policy`` with backfill on the workload of an
    episode's ``result`` (its jobs as a jobs-csv trace)."""
    jobs = result.jobs.sort_values(["submit_s", "job_id"], kind="stable")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "jobs.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["job_id", "submit_time", "duration", "gpu_num"])
            for r in jobs.itertuples():
                w.writerow([r.job_id, r.submit_s, r.duration_s, r.gpus])
        out = dlsched.simulate(policy=policy, backfill=True, trace=path, format="jobs-csv", cluster=cluster,
                               placement=placement)
    s = out.summary
    if s["jobs_completed"] != len(jobs):
        raise RuntimeError(f"{policy}: {s['jobs_completed']} of {len(jobs)} jobs completed")
    return s["jct_mean_s"] / 3600.0


# ---------------------------------------------------------------- training (torch)

def per_job_policy():
    """A MaskablePPO policy that scores every queue slot with one shared
    network (RLScheduler's kernel-based design, Zhang et al., SC'20: the
    same small MLP rates each job from its own features and the cluster
    summary, so a rule like "shortest first" is the same in every slot), and
    the wait action from the summary; the value network is an MLP on the
    whole observation. Reads the fixed observation's layout (10 summary
    values, then 9 per slot)."""
    import torch
    from torch import nn
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    class PerJob(nn.Module):
        def __init__(self, obs_dim: int, hidden: int = 64):
            super().__init__()
            self.mq = (obs_dim - 10) // 9
            if 10 + 9 * self.mq != obs_dim:
                raise ValueError(f"per-job policy: {obs_dim} values is not the fixed observation's layout")
            self.latent_dim_pi, self.latent_dim_vf = self.mq + 1, hidden
            self.score = nn.Sequential(nn.Linear(19, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                       nn.Linear(hidden, 1))
            self.wait = nn.Sequential(nn.Linear(10, hidden), nn.Tanh(), nn.Linear(hidden, 1))
            self.vf = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())

        def forward_actor(self, x):
            summary = x[:, :10]
            slots = x[:, 10:10 + 9 * self.mq].reshape(-1, self.mq, 9)
            both = torch.cat([slots, summary.unsqueeze(1).expand(-1, self.mq, -1)], dim=-1)
            return torch.cat([self.score(both).squeeze(-1), self.wait(summary)], dim=-1)

        def forward_critic(self, x):
            return self.vf(x)

        def forward(self, x):
            return self.forward_actor(x), self.forward_critic(x)

    class PerJobPolicy(MaskableActorCriticPolicy):
        def _build_mlp_extractor(self) -> None:
            self.mlp_extractor = PerJob(self.features_dim)

        def _build(self, lr_schedule) -> None:
            super()._build(lr_schedule)
            self.action_net = nn.Identity()  # the extractor's outputs are the logits
            self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    return PerJobPolicy


def train(a) -> None:
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    env_kw = dict(ENV, oracle=not a.no_oracle)
    if a.observation:
        env_kw["observation"] = a.observation
    if a.reward:
        env_kw["reward"] = a.reward
    venv = dlsched.gym.sb3_vec_env(num_envs=a.n_envs, split="train", seed=a.seed, **env_kw)
    eval_env = make_env("eval", **env_kw)
    if a.arch == "per-job":
        policy, policy_kwargs = per_job_policy(), {}
    else:
        policy, policy_kwargs = "MlpPolicy", dict(net_arch=dict(pi=[a.width, a.width], vf=[a.width, a.width]))
    model = MaskablePPO(policy, venv, learning_rate=a.lr, n_steps=a.n_steps, batch_size=a.batch,
                        n_epochs=a.epochs, gamma=a.gamma, gae_lambda=a.gae_lambda, ent_coef=a.ent_coef,
                        policy_kwargs=policy_kwargs, seed=a.seed, verbose=0, device="cpu")

    def evaluate_now() -> float:
        return float(np.mean([run_episode(eval_env, k, agent_chooser(model))["jct_h"] for k in TUNING_KEYS]))

    best = [math.inf, 0]  # the best tuning mean JCT so far and its step
    t0 = time.time()
    csv_path = os.path.join(a.out, "curve.csv")
    fields = ["steps", "wall_s", "train_episodes", "train_jct_h", "tuning_jct_h"]
    with open(csv_path, "w", newline="") as f:
        csv.DictWriter(f, fieldnames=fields).writeheader()

    def log(row: dict) -> None:
        """One point of the curve, appended at once (a partial curve is readable)."""
        with open(csv_path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=fields).writerow(row)
        print(json.dumps(row), flush=True)

    class Curve(BaseCallback):
        def __init__(self):
            super().__init__()
            self.train_jcts: List[float] = []
            self.next_eval = 0

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                s = info.get("summary")
                if s is not None:
                    self.train_jcts.append(s["jct_mean_s"] / 3600.0)
            if self.num_timesteps >= self.next_eval:
                self.next_eval += a.eval_every
                row = {"steps": self.num_timesteps, "wall_s": round(time.time() - t0, 1),
                       "train_episodes": len(self.train_jcts),
                       "train_jct_h": round(float(np.mean(self.train_jcts)), 4) if self.train_jcts else "",
                       "tuning_jct_h": round(evaluate_now(), 4)}
                self.train_jcts = []
                log(row)
                if row["tuning_jct_h"] < best[0]:
                    # Model selection on the tuning keys only (never the reporting ones).
                    best[0] = row["tuning_jct_h"]
                    model.save(os.path.join(a.out, "best.zip"))
                    best[1] = self.num_timesteps
            return True

    model.learn(total_timesteps=a.steps, callback=Curve())
    final = {"steps": model.num_timesteps, "wall_s": round(time.time() - t0, 1), "train_episodes": "",
             "train_jct_h": "", "tuning_jct_h": round(evaluate_now(), 4)}
    log(final)
    if final["tuning_jct_h"] < best[0]:
        best[:] = [final["tuning_jct_h"], model.num_timesteps]
        model.save(os.path.join(a.out, "best.zip"))
    model.save(os.path.join(a.out, "model.zip"))
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump({"args": vars(a), "env": {k: list(v) if isinstance(v, tuple) else v for k, v in env_kw.items()},
                   "wall_s": round(time.time() - t0, 1), "cpu_s": round(time.process_time(), 1),
                   "best": {"steps": best[1], "tuning_jct_h": best[0]},
                   "dlsched": getattr(dlsched, "__version__", None)}, f,
                  indent=1)
    print(f"wrote {csv_path} and {os.path.join(a.out, 'model.zip')}")


def agent_chooser(model) -> Callable:
    """The trained agent: deterministic, masked."""

    def choose(obs, mask):
        act, _ = model.predict(obs, action_masks=mask, deterministic=True)
        return int(act)

    return choose


def baselines_on_keys(keys: Sequence[int]) -> List[dict]:
    """Per episode of ``keys`` (eval split): random-valid, first-valid in the
    window, window-SJF (ours), and the simulator's FIFO and SJF with backfill.
    Always on ``ENV``'s observation with the oracle (window-SJF reads it); the
    workload is the same whatever the agent's observation."""
    env = make_env("eval")
    rows = []
    for k in keys:
        fv = run_episode(env, k, first_valid)
        row = {"key": k, "run_seed": fv["run_seed"], "offered_load": fv["result"].summary["offered_load"],
               "first_valid_window": fv["jct_h"],
               "random_valid": run_episode(env, k, random_valid(10_000 + k))["jct_h"],
               "window_sjf": run_episode(env, k, window_sjf(env.max_queue))["jct_h"],
               "fifo_backfill": replay(fv["result"], "fifo"), "sjf_backfill": replay(fv["result"], "sjf")}
        rows.append(row)
    return rows


def evaluate(a) -> None:
    import torch
    from sb3_contrib import MaskablePPO

    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    keys = TUNING_KEYS if a.tuning else REPORT_KEYS
    over = {"observation": a.observation} if a.observation else {}
    rows = baselines_on_keys(keys)
    env = make_env("eval", oracle=not a.no_oracle, **over)
    for m in a.model:
        name = a.name or os.path.splitext(os.path.basename(m))[0]
        model = MaskablePPO.load(m, device="cpu")
        for row in rows:
            ep = run_episode(env, row["key"], agent_chooser(model))
            row[name] = ep["jct_h"]
            row[name + "_waits"] = ep["waits"]
    write_rows(rows, os.path.join(a.out, "tuning.csv" if a.tuning else "eval.csv"))
    ref = make_env("eval")
    behaviour = {"random_valid": agreement(ref, keys, random_valid(1)),
                 "fifo_in_window": agreement(ref, keys, first_valid)}
    for m in a.model:
        name = a.name or os.path.splitext(os.path.basename(m))[0]
        behaviour[name] = agreement(env, keys, agent_chooser(MaskablePPO.load(m, device="cpu")), ref=make_env("eval"))
    with open(os.path.join(a.out, "behaviour-tuning.json" if a.tuning else "behaviour.json"), "w") as f:
        json.dump(behaviour, f, indent=1)
    for name, b in behaviour.items():
        print(f"  {name}: {b['choice_steps']} steps with a choice; as window-SJF {b['as_window_sjf']:.1%}, "
              f"as first-valid {b['as_first_valid']:.1%}, waits {b['waits']:.1%}")
    print_table(rows, [a.name or os.path.splitext(os.path.basename(m))[0] for m in a.model])


def write_rows(rows: List[dict], path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    print(f"wrote {path}")


def baselines(a) -> None:
    os.makedirs(a.out, exist_ok=True)
    keys = TUNING_KEYS if a.tuning else REPORT_KEYS
    rows = baselines_on_keys(keys)
    write_rows(rows, os.path.join(a.out, "baselines-tuning.csv" if a.tuning else "baselines.csv"))
    print_table(rows, [])


def print_table(rows: List[dict], agents: List[str]) -> None:
    cols = ["random_valid", "fifo_backfill", "first_valid_window", "window_sjf", "sjf_backfill"]
    print(f"{len(rows)} episodes; mean JCT (h):")
    for c in agents + cols:
        print(f"  {c:20s} {np.mean([r[c] for r in rows]):8.3f}")
    for ag in agents:
        for c in cols:
            p = paired_interval([r[ag] for r in rows], [r[c] for r in rows])
            verdict = "agent lower" if p["hi"] < 0 else ("agent higher" if p["lo"] > 0 else "no difference shown")
            print(f"  {ag} - {c}: {p['mean']:+.3f} h [{p['lo']:+.3f}, {p['hi']:+.3f}] ({verdict})")


def plot(a) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.2), constrained_layout=True)
    for i, path in enumerate(a.curves):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        label = a.labels[i] if a.labels and i < len(a.labels) else os.path.basename(os.path.dirname(path))
        tr = [(int(r["steps"]), float(r["train_jct_h"])) for r in rows if r["train_jct_h"]]
        ev = [(int(r["steps"]), float(r["tuning_jct_h"])) for r in rows]
        ax.plot([s / 1000 for s, _ in ev], [v for _, v in ev], color=f"C{i}", lw=2,
                label=f"{label}: held-out (tuning keys)")
        ax.plot([s / 1000 for s, _ in tr], [v for _, v in tr], color=f"C{i}", lw=1, ls=":", alpha=0.8,
                label=f"{label}: training episodes")
    if a.baselines:
        with open(a.baselines) as f:
            rows = list(csv.DictReader(f))
        styles = {"random_valid": ("random-valid (control)", "0.5", "--"),
                  "fifo_backfill": ("FIFO + backfill", "k", "-."),
                  "sjf_backfill": ("SJF + backfill (ours, oracle)", "k", ":")}
        for c, (lab, col, ls) in styles.items():
            ax.axhline(np.mean([float(r[c]) for r in rows]), color=col, ls=ls, lw=1.2, label=lab)
    ax.set_xlabel("Training steps (thousands)")
    ax.set_ylabel("Mean JCT (h)")
    title = a.title
    if a.baselines:
        # Zoomed on the baselines (the untrained agent's first points are far above).
        lo = 0.85 * min(np.mean([float(r[c]) for r in rows]) for c in styles)
        hi = 1.35 * max(np.mean([float(r[c]) for r in rows]) for c in styles)
        ax.set_ylim(lo, hi)
        title += f"\n(y axis {lo:.1f}-{hi:.1f} h, not from 0; points above it are cut)"
    else:
        ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train MaskablePPO; writes curve.csv, model.zip (last), best.zip "
                       "(best mean JCT on the tuning keys), train.json")
    t.add_argument("--steps", type=int, default=300_000)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--n-envs", type=int, default=8)
    t.add_argument("--n-steps", type=int, default=256, help="rollout steps per environment")
    t.add_argument("--batch", type=int, default=256)
    t.add_argument("--epochs", type=int, default=5)
    t.add_argument("--lr", type=float, default=3e-4)
    t.add_argument("--gamma", type=float, default=1.0)
    t.add_argument("--gae-lambda", type=float, default=0.95)
    t.add_argument("--ent-coef", type=float, default=0.01)
    t.add_argument("--width", type=int, default=64, help="hidden units of the mlp arch's two layers")
    t.add_argument("--arch", choices=["mlp", "per-job"], default="mlp",
                   help="mlp: SB3's MlpPolicy; per-job: one shared network scores each slot (per_job_policy)")
    t.add_argument("--eval-every", type=int, default=20_000)
    t.add_argument("--no-oracle", action="store_true", help="the observation without the oracle duration")
    t.add_argument("--observation", choices=["fixed", "flat"], default=None)
    t.add_argument("--reward", choices=["jct", "queue_delay", "slowdown", "throughput"], default=None,
                   help="the training reward (default ENV's jct); evaluation is on mean JCT whatever it is")
    t.add_argument("--out", required=True)
    e = sub.add_parser("evaluate", help="agents vs baselines on the reporting keys (or --tuning)")
    e.add_argument("--model", nargs="+", required=True)
    e.add_argument("--name", default=None, help="the column name (one model)")
    e.add_argument("--tuning", action="store_true", help="the tuning keys instead of the reporting ones")
    e.add_argument("--no-oracle", action="store_true")
    e.add_argument("--observation", choices=["fixed", "flat"], default=None)
    e.add_argument("--out", required=True)
    b = sub.add_parser("baselines", help="the baselines alone on the reporting keys (or --tuning)")
    b.add_argument("--tuning", action="store_true")
    b.add_argument("--out", required=True)
    p = sub.add_parser("plot", help="learning curves (curve.csv) against the baselines")
    p.add_argument("curves", nargs="+")
    p.add_argument("--labels", nargs="*")
    p.add_argument("--baselines", help="a baselines-tuning.csv (the keys of the curves' held-out points)")
    p.add_argument("--title", default="MaskablePPO on lab16, 100 jobs")
    p.add_argument("--out", required=True)
    for sp in (t, e, b):
        sp.add_argument("--setup", choices=sorted(SETUPS), default="base")
    a = ap.parse_args(argv)
    if getattr(a, "setup", None):
        use_setup(a.setup)
    {"train": train, "evaluate": evaluate, "baselines": baselines, "plot": plot}[a.cmd](a)


if __name__ == "__main__":
    main()
