"""Gymnasium environments on dlsched's engine: learned schedulers in Python.

    import gymnasium, dlsched.gym
    env = gymnasium.make("dlsched/ClusterScheduling-v0", jobs=200, load=0.8)
    obs, info = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(env.action_space.n - 1)   # wait

    venv = dlsched.gym.VectorClusterSchedulingEnv(num_envs=16, jobs=200, load=0.8)
    obs, infos = venv.reset(seed=0)                      # obs: (16, obs_len) float32
    obs, rewards, terminated, truncated, infos = venv.step(venv.action_masks().argmax(1))

The engine runs in Rust and stops at each decision point (no thread, no
hand-off); a vector of environments steps in Rust on the engine's threads
with the GIL released and returns batched numpy arrays
(``benches/README.md``, "Learning environment", has the speed).

A step is one scheduling choice. A **decision point** is an instant's
scheduling pass where some action other than wait is valid; instants where
nothing can be placed are skipped, so an episode's steps are real choices.

Action modes (``action=``; the last action is always wait, which ends the
instant's pass: the engine goes on to its next event):

- ``"job"`` (default): start one of the first ``max_queue`` waiting jobs
  (arrival order) on the GPUs the run's placement rule gives it
  (``placement``, default consolidate); ``max_queue + 1`` actions.
- ``"placement"`` (RIFLING's action set): place the head job (the earliest
  waiting) as ``<d_node, d_gpn>``, ``d_gpn`` GPUs on each of ``d_node``
  nodes (``d_node * d_gpn`` = its GPUs; the nodes with most free GPUs);
  action ``(d_node - 1) * G + d_gpn - 1`` on ``G`` GPUs per node, up to 32
  nodes. A head job no such shape fits (7 GPUs on nodes of 4) is started by
  the placement rule as soon as it fits, without a decision.
- ``"node"`` (LDWP's): start the head job on one node (its GPUs there; a
  job wider than a node takes that node first, then the nodes with most free
  GPUs); one action per node.

``action_masks()`` (what sb3-contrib's MaskablePPO reads) and
``info["action_mask"]`` mark the valid actions. Wait is invalid only where
it would end the run with jobs left (nothing runs, no job is still to
arrive); the first version left it valid and raised the run's error. An
action the mask marks invalid waits (as in the first version), unless
waiting is itself invalid: then it is an error that says so.

Observations (float32, all in 0..1; ``observation=``):

- ``"flat"`` (default), shape ``(max_queue * 4 + nodes + 3,)``: per queue
  slot [present, GPUs asked / cluster GPUs, waited / (waited + 1 h), the
  job's duration / (duration + 1 h) (an oracle; zero with ``oracle=False``)];
  each node's free GPUs / its GPUs; then waiting jobs / (waiting +
  max_queue), running jobs / cluster GPUs, the free share.
- ``"fixed"``, shape ``(10 + max_queue * 9,)`` whatever the cluster: free
  share, shares of nodes wholly and partly free, largest free block / node
  size, running / GPUs, waiting / (waiting + max_queue), shares of nodes with
  0, 1, 2-3, 4+ free GPUs; per slot [present, GPUs / cluster GPUs, model code
  (a hash of its name), VC / VCs, its user's share of the jobs alive, waited,
  attained service (GPU-time / GPUs), predicted duration (mean of the user's
  completed jobs, else of all completed), oracle duration (0 without the
  oracle)], times as ``t / (t + 1 h)``.

Reward between two decision points, over the simulated time ``dt`` (h)
between them (``reward=``); ``reward_norm="per_job"`` divides it by the
episode's jobs, so that returns of episodes of different sizes share a scale
(an episode's ``jct`` return is then minus its mean JCT in hours):

- ``"queue_delay"`` (default): minus the queueing delay accrued, job-hours
  (waiting jobs x dt): the sum over an episode is minus the total queueing delay.
- ``"jct"``: minus the JCT accrued (waiting + running jobs x dt): the sum is
  minus the total JCT of the episode's jobs.
- ``"throughput"``: jobs completed since the last step.
- ``"slowdown"``: minus the slowdown accrued: each waiting or running job adds
  dt / its duration.

Episodes. ``reset(seed=s)`` seeds the environment's generator and runs the
workload of seed ``s``; ``reset()`` without a seed draws the next episode's
seed from that generator (Gymnasium's semantics; seeded at construction by
the ``seed`` keyword, so a fresh environment's unseeded episodes are
reproducible too). ``episodes=`` says what an episode is:

- ``"spec"`` (default): the workload keywords as given, with the episode's
  seed (the synthetic mix is drawn again; a trace is replayed whole);
- ``"windows"``: ``window_jobs`` consecutive jobs of the trace (``trace=``),
  shifted to start at 0 (RLScheduler's 128- or 256-job windows);
- ``"loads"``: the synthetic workload at a load drawn uniformly in ``loads=(lo, hi)``.

``split="eval"`` gives held-out episodes, apart by construction: evaluation
runs use seeds of 2^63 and above (training ones below), and windows from
the last ``eval_share`` (default 0.2) of the trace's jobs (training windows
from the rest).

An episode ends (``terminated``) when the workload drains, and is cut
(``truncated``) after ``max_steps`` steps or ``max_time_h`` simulated hours.
The workload is any of :func:`dlsched.simulate`'s (a trace, the synthetic mix,
GENIE tasks) given as keyword arguments.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import gymnasium
from gymnasium import spaces

import dlsched
from dlsched import _core

ENV_ID = "dlsched/ClusterScheduling-v0"

REWARDS = ("queue_delay", "jct", "throughput", "slowdown")
ACTIONS = ("job", "placement", "node")
OBSERVATIONS = ("flat", "fixed")


MAX_QUEUE = 4096
"""The most queue slots (``max_queue``)."""
MAX_ENVS = 4096
"""The most environments of a vector."""
REWARD_NORMS = ("none", "per_job")
EPISODES = ("spec", "windows", "loads")
SPLITS = ("train", "eval")


def _int(name: str, v, lo: int, hi: Optional[int] = None) -> int:
    """An int keyword in [lo, hi], or ValueError naming it."""
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        bound = f"{lo} to {hi:,}" if hi is not None else f"at least {lo}"
        raise ValueError(f"{name}={v!r}: an int, {bound}")
    return int(v)


def _number(name: str, v, positive: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) \
            or (positive and v <= 0):
        raise ValueError(f"{name}={v!r}: a {'positive ' if positive else ''}number")
    return float(v)


def _env_keywords(max_queue, reward, oracle, max_steps, max_time_h, observation, action, reward_norm, episodes,
                  window_jobs, eval_share, loads, split, workload) -> Dict[str, Any]:
    """Checks the environment's own keywords (ValueError naming the keyword);
    returns them with the workload's."""
    for name, v, allowed in (("reward", reward, REWARDS), ("action", action, ACTIONS),
                             ("observation", observation, OBSERVATIONS), ("reward_norm", reward_norm, REWARD_NORMS),
                             ("episodes", episodes, EPISODES), ("split", split, SPLITS)):
        if v not in allowed:
            raise ValueError(f"{name}={v!r}: one of {', '.join(allowed)}")
    max_queue = _int("max_queue", max_queue, 1, MAX_QUEUE)
    max_steps = _int("max_steps", max_steps, 1)
    if not isinstance(oracle, (bool, np.bool_)):
        raise ValueError(f"oracle={oracle!r}: True or False")
    if max_time_h is not None:
        max_time_h = _number("max_time_h", max_time_h)
    if "policy" in workload:
        raise ValueError("policy=: the agent is the policy; give placement= for the rule that places its choices")
    kw = dict(workload)
    kw.setdefault("placement", "consolidate")
    kw.update(max_queue=max_queue, reward=reward, oracle=bool(oracle), max_steps=max_steps, max_time_h=max_time_h,
              observation=observation, action=action, reward_norm=reward_norm, episodes=episodes, split=split)
    # Keywords of one episode source only: given with another, an error (not ignored).
    if loads is not None and episodes != "loads":
        raise ValueError(f"loads={loads!r}: only with episodes=\"loads\" (episodes={episodes!r})")
    if episodes != "windows":
        for name, v in (("window_jobs", window_jobs), ("eval_share", eval_share)):
            if v is not None:
                raise ValueError(f"{name}={v!r}: only with episodes=\"windows\" (episodes={episodes!r})")
    if episodes == "loads":
        if not isinstance(loads, (tuple, list)) or len(loads) != 2:
            raise ValueError(f"loads={loads!r}: give (lo, hi), two offered loads with 0 < lo <= hi")
        lo, hi = _number("loads[0]", loads[0]), _number("loads[1]", loads[1])
        if lo > hi:
            raise ValueError(f"loads={loads!r}: 0 < lo <= hi")
        kw["loads"] = (lo, hi)
    if episodes == "windows":
        kw["window_jobs"] = _int("window_jobs", 256 if window_jobs is None else window_jobs, 1)
        share = 0.2 if eval_share is None else eval_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
            raise ValueError(f"eval_share={share!r}: a share in [0, 1)")
        kw["eval_share"] = float(share)
    if episodes == "windows" and "trace" not in workload:
        raise ValueError("episodes=\"windows\": give a trace (trace=...) to cut the windows from")
    if episodes == "loads" and "trace" in workload:
        raise ValueError("episodes=\"loads\": the synthetic workload only (no trace=)")
    if split == "eval" and episodes == "spec" and "trace" in workload:
        raise ValueError("split=\"eval\" with a whole trace (episodes=\"spec\") replays the training episode: "
                         "give episodes=\"windows\" for held-out windows of the trace")
    return kw


def _seed(seed) -> Optional[int]:
    """A reset's seed as an int in 0..2^63, or ValueError."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and 0 <= seed < 2**63:
        return int(seed)
    raise ValueError(f"seed={seed!r}: an int from 0 to 2^63 - 1 "
                     "(evaluation episodes, split=\"eval\", use the run seeds from 2^63 up)")


def _action(action, n: int) -> int:
    """An action as an int in 0..n, or ValueError (as Discrete(n).contains)."""
    if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
        action = action.item()
    if isinstance(action, (int, np.integer)) and not isinstance(action, bool) and 0 <= action < n:
        return int(action)
    raise ValueError(f"action {action!r} is not in Discrete({n})")


class ClusterSchedulingEnv(gymnasium.Env):
    """Job scheduling on a simulated GPU cluster (see the module's docs)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        max_queue: int = 8,
        reward: str = "queue_delay",
        oracle: bool = True,
        max_steps: int = 100_000,
        max_time_h: Optional[float] = None,
        *,
        observation: str = "flat",
        action: str = "job",
        reward_norm: str = "none",
        episodes: str = "spec",
        window_jobs: Optional[int] = None,
        eval_share: Optional[float] = None,
        loads: Optional[Sequence[float]] = None,
        split: str = "train",
        **workload: Any,
    ):
        self._kw = _env_keywords(max_queue, reward, oracle, max_steps, max_time_h, observation, action,
                                 reward_norm, episodes, window_jobs, eval_share, loads, split, workload)
        self.max_queue = int(max_queue)
        self.reward_kind = reward
        self.workload = dict(workload)
        self._core = _core.Env(**self._kw)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self._core.obs_len,), dtype=np.float32)
        self.action_space = spaces.Discrete(self._core.n_actions)
        self._n = self._core.n_actions
        self._active = self._core
        self._done = True
        self._result = None

    @property
    def result(self) -> Optional["dlsched.Result"]:
        """The last terminated episode's tables (a :class:`dlsched.Result`), or None."""
        if self._result is None:
            r = self._core.result()
            if r is not None:
                self._result = dlsched.Result(*r)
        return self._result

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        """Starts an episode: ``seed`` reseeds the generator and is the run's
        seed; without it the generator draws the next. ``options``: workload
        keywords for this episode only (builds a second environment)."""
        seed = _seed(seed)
        super().reset(seed=seed)
        self._result = None
        core = self._core
        if options:
            kw = dict(self._kw)
            kw.update(options)
            core = _core.Env(**kw)
            if core.obs_len != self._core.obs_len or core.n_actions != self._n:
                raise ValueError("options=: the episode's observation or action size differs from the environment's")
        self._active = core
        obs, ended = core.reset(seed)
        self._done = ended
        return obs, self._info_of(core, ended)

    @staticmethod
    def _info_of(core, ended: bool) -> Dict[str, Any]:
        if ended:
            s = core.summary_json()
            return {"action_mask": core.action_masks().view(np.int8), "summary": None if s is None else json.loads(s)}
        now, waiting, running, _, _ = core.status()
        return {"action_mask": core.action_masks().view(np.int8), "time_s": now, "waiting": waiting,
                "running": running}

    def step(self, action):
        """One choice (see the module's docs for the action modes); the last action waits."""
        if self._done:
            raise RuntimeError("the episode is over: call reset()")
        a = _action(action, self._n)
        core = self._active
        obs, reward, terminated, truncated = core.step(a)
        self._done = terminated or truncated
        return obs, reward, terminated, truncated, self._info_of(core, terminated)

    def action_masks(self) -> np.ndarray:
        """The valid actions now (bool, wait last): sb3-contrib's MaskablePPO reads this."""
        return self._active.action_masks()

    @property
    def episode_seed(self) -> int:
        """The current episode's run seed."""
        return self._active.status()[4]

    def close(self):
        pass


_AutoresetMode = getattr(gymnasium.vector, "AutoresetMode", None)


class VectorClusterSchedulingEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` environments stepped together in Rust (Gymnasium's vector
    API): batched observations ``(num_envs, obs_len)``, rewards, terminations,
    truncations, and ``infos["action_mask"]`` ``(num_envs, actions)``.

    ``autoreset="next_step"`` (Gymnasium's default): the step after an
    episode ended resets that environment (its action is ignored, its reward
    0). ``"same_step"``: the step that ends an episode resets at once and
    returns the new episode's observation, the last one in
    ``infos["final_obs"]`` (masked by ``infos["_final_obs"]``). A terminated
    episode's summary is in ``infos["summary"]`` (masked by ``infos["_summary"]``).
    Every environment draws its own episodes: ``reset(seed=s)`` seeds the
    ``i``-th with ``s + i``; unseeded, the ``i``-th draws from stream ``i``
    of the generator the ``seed`` keyword seeds. ``num_envs`` and
    ``max_queue`` are at most 4,096.
    """

    def __init__(self, num_envs: int = 16, *, autoreset: str = "next_step", max_queue: int = 8,
                 reward: str = "queue_delay", oracle: bool = True, max_steps: int = 100_000,
                 max_time_h: Optional[float] = None, observation: str = "flat", action: str = "job",
                 reward_norm: str = "none", episodes: str = "spec", window_jobs: Optional[int] = None,
                 eval_share: Optional[float] = None,
                 loads: Optional[Sequence[float]] = None, split: str = "train", **workload: Any):
        if autoreset not in ("next_step", "same_step"):
            raise ValueError(f"autoreset={autoreset!r}: next_step or same_step")
        kw = _env_keywords(max_queue, reward, oracle, max_steps, max_time_h, observation, action, reward_norm,
                           episodes, window_jobs, eval_share, loads, split, workload)
        num_envs = _int("num_envs", num_envs, 1, MAX_ENVS)
        self._core = _core.VecEnv(num_envs, same_step=autoreset == "same_step", **kw)
        self.num_envs = num_envs
        self.autoreset = autoreset
        if _AutoresetMode is not None:
            mode = _AutoresetMode.NEXT_STEP if autoreset == "next_step" else _AutoresetMode.SAME_STEP
            self.metadata = {"autoreset_mode": mode}
        self.single_observation_space = spaces.Box(0.0, 1.0, shape=(self._core.obs_len,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(self._core.n_actions)
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = spaces.MultiDiscrete([self._core.n_actions] * self.num_envs)

    def reset(self, *, seed: Union[int, List[Optional[int]], None] = None, options: Optional[dict] = None):
        """Resets every environment: ``seed`` an int (the ``i``-th gets
        ``seed + i``), a list of seeds (None draws), or None (each draws)."""
        if options:
            raise ValueError("options=: not supported by the vector environment; give workload keywords at construction")
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            if not 0 <= seed <= 2**63 - self.num_envs:
                raise ValueError(f"seed={seed!r}: an int from 0 to 2^63 - num_envs (environment i gets seed + i)")
            seeds = [int(seed) + i for i in range(self.num_envs)]
        elif isinstance(seed, (list, tuple, np.ndarray)):
            seeds = [_seed(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed=: {len(seeds)} seeds for {self.num_envs} environments")
        else:
            raise ValueError(f"seed={seed!r}: None, an int, or a list of num_envs seeds (ints or None)")
        obs, masks = self._core.reset(seeds)
        return obs, {"action_mask": masks.view(np.int8)}

    def step(self, actions):
        acts = np.asarray(actions)
        if acts.dtype.kind not in "iu" or acts.size != self.num_envs:
            raise ValueError(f"actions: {self.num_envs} ints (one per environment), not {actions!r}")
        acts = acts.reshape(-1)
        n = self.single_action_space.n
        bad = np.flatnonzero((acts < 0) | (acts >= n))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"actions[{i}] = {acts[i]}: not in Discrete({n})")
        obs, rewards, terminated, truncated, masks, ended = self._core.step(acts.tolist())
        infos: Dict[str, Any] = {"action_mask": masks.view(np.int8)}
        if ended:
            summaries = np.full(self.num_envs, None, dtype=object)
            has_summary = np.zeros(self.num_envs, dtype=bool)
            final_obs = np.full(self.num_envs, None, dtype=object)
            has_final = np.zeros(self.num_envs, dtype=bool)
            for i, fo, summary, error in ended:
                if error is not None:
                    raise dlsched.DlschedError(f"environment {i}: {error}")
                if summary is not None:
                    summaries[i] = json.loads(summary)
                    has_summary[i] = True
                if fo is not None:
                    final_obs[i] = fo
                    has_final[i] = True
            if has_summary.any():
                infos["summary"], infos["_summary"] = summaries, has_summary
            if has_final.any():
                infos["final_obs"], infos["_final_obs"] = final_obs, has_final
        return obs, rewards, terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """The valid actions of every environment now, ``(num_envs, actions)`` bool."""
        return self._core.action_masks()

    def episode_seeds(self) -> List[int]:
        """Each environment's current episode's run seed."""
        return [s[4] for s in self._core.status()]

    def close(self, **kwargs):
        pass


def sb3_vec_env(num_envs: int = 8, **kwargs: Any):
    """The vector environment as a Stable-Baselines3 ``VecEnv`` (same-step
    autoreset, ``terminal_observation`` in the infos, as SB3 expects), with
    ``env_method("action_masks")`` for sb3-contrib's MaskablePPO. Keywords
    as :class:`ClusterSchedulingEnv`'s. Needs ``stable-baselines3``."""
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv

    class DlschedVecEnv(VecEnv):
        def __init__(self):
            self.venv = VectorClusterSchedulingEnv(num_envs, autoreset="same_step", **kwargs)
            super().__init__(num_envs, self.venv.single_observation_space, self.venv.single_action_space)
            self._actions = None

        def reset(self):
            seeds = [None if s is None else int(s) for s in self._seeds]
            obs, _ = self.venv.reset(seed=seeds)
            self._reset_seeds()
            return obs

        def step_async(self, actions):
            self._actions = actions

        def step_wait(self):
            obs, rewards, terminated, truncated, infos = self.venv.step(self._actions)
            dones = terminated | truncated
            out = [{} for _ in range(self.num_envs)]
            for i in np.flatnonzero(dones):
                out[i]["terminal_observation"] = infos["final_obs"][i]
                out[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                if "_summary" in infos and infos["_summary"][i]:
                    out[i]["summary"] = infos["summary"][i]
            return obs, rewards.astype(np.float32), dones, out

        def close(self):
            pass

        def get_attr(self, attr_name, indices=None):
            idx = self._get_indices(indices)
            if attr_name == "action_masks":
                masks = self.venv.action_masks()
                return [(lambda m=masks[i]: m) for i in idx]
            if attr_name == "render_mode":
                return [None for _ in idx]
            raise AttributeError(attr_name)

        def set_attr(self, attr_name, value, indices=None):
            raise AttributeError(f"{attr_name}: the environments' settings are fixed at construction")

        def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
            idx = self._get_indices(indices)
            if method_name == "action_masks":
                masks = self.venv.action_masks()
                return [masks[i] for i in idx]
            raise AttributeError(method_name)

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False for _ in self._get_indices(indices)]

    return DlschedVecEnv()


gymnasium.register(id=ENV_ID, entry_point="dlsched.gym:ClusterSchedulingEnv")
