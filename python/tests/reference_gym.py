"""The first version of dlsched.gym (before issue 36), kept as the reference the
Rust environment is compared with (test_gym.py): the engine ran in a thread and
handed each decision to Python through two queues. Not part of the package.

Its documentation, as it was:

A Gymnasium environment on dlsched's engine: learned schedulers in Python.

    import gymnasium, dlsched.gym
    env = gymnasium.make("dlsched/ClusterScheduling-v0", jobs=200, load=0.8)
    obs, info = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(env.action_space.n - 1)   # wait

A step is one scheduling choice. At each decision point, the agent sees the
first ``max_queue`` waiting jobs (arrival order) and the free GPUs of every
node, and picks one of them to start now on the GPUs the run's placement rule
gives it (``placement``, default consolidate), or the last action, wait: the
engine then goes on to its next event (an arrival or a completion). Instants
where no waiting job can be placed are not decision points (wait is the only
choice), so an episode's steps are real choices. ``info["action_mask"]`` marks
the valid actions (a slot with a job that can be placed now, and wait).

Observation (float32, shape ``(max_queue * 4 + nodes + 3,)``), all in 0..1:
for each queue slot, [present, GPUs asked / cluster GPUs, waited /
(waited + 1 h), the job's duration / (duration + 1 h) (an oracle; zero with
``oracle=False``)]; each node's free GPUs / its GPUs; then waiting jobs /
(waiting + max_queue), running jobs / cluster GPUs, the cluster's free share.

Reward between two decision points, over the simulated time ``dt`` (h)
between them (``reward=``):

- ``"queue_delay"`` (default): minus the queueing delay accrued, job-hours
  (waiting jobs x dt): the sum over an episode is minus the total queueing delay.
- ``"jct"``: minus the JCT accrued (waiting + running jobs x dt): the sum is
  minus the total JCT of the episode's jobs.
- ``"throughput"``: jobs completed since the last step.
- ``"slowdown"``: minus the slowdown accrued: each waiting or running job adds
  dt / its duration.

An episode ends (``terminated``) when the workload drains, and is cut
(``truncated``) after ``max_steps`` steps or ``max_time_h`` simulated hours.
The workload is any of :func:`dlsched.simulate`'s (a trace, the synthetic mix,
GENIE tasks) given as keyword arguments; ``reset(seed=s)`` sets its ``seed``
(the synthetic workload's and the policies' streams), so one seed and one
action sequence give one trajectory.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Dict, Optional

import numpy as np
import gymnasium
from gymnasium import spaces

import dlsched


REWARDS = ("queue_delay", "jct", "throughput", "slowdown")


class _Stop(Exception):
    """Raised inside the engine's policy call to end an episode early."""


class _Bridge:
    """The Python policy the engine runs in the episode's thread: it accrues
    the reward at every event, and at each decision point hands the
    observation to the environment and waits for the action."""

    name = "gym-agent"

    def __init__(self, env: "ReferenceClusterSchedulingEnv"):
        self.env = env
        self.kind = env.reward_kind
        self.to_env: "queue.Queue" = queue.Queue(maxsize=1)
        self.to_engine: "queue.Queue" = queue.Queue(maxsize=1)
        self.stop = False
        # The reward accrued since the last hand-over, and the state it
        # accrues from: time (s), waiting and running jobs, and the sum of
        # 1 h / duration over them (for the slowdown).
        self.acc = 0.0
        self.t = 0.0
        self.waiting = 0
        self.running = 0
        self.inv_dur = 0.0

    def _accrue(self, view):
        now = view.now
        dt_h = (now - self.t) / 3600.0
        if self.kind == "queue_delay":
            self.acc -= self.waiting * dt_h
        elif self.kind == "jct":
            self.acc -= (self.waiting + self.running) * dt_h
        elif self.kind == "slowdown":
            self.acc -= self.inv_dur * dt_h
        self.t = now
        self.waiting = view.waiting_count()
        self.running = view.running_count()

    def on_arrival(self, job, view):
        if self.stop:
            raise _Stop()
        self._accrue(view)
        self.inv_dur += 3600.0 / max(view.duration_s(job), 1.0)

    def on_completion(self, job, view):
        if self.stop:
            raise _Stop()
        self._accrue(view)
        if self.kind == "throughput":
            self.acc += 1.0
        self.inv_dur -= 3600.0 / max(view.duration_s(job), 1.0)

    def decide(self, view):
        if self.stop:
            raise _Stop()
        self._accrue(view)
        waiting = view.waiting()
        slots = waiting[: self.env.max_queue]
        placements = [view.place(j) for j in slots]
        if all(p is None for p in placements):
            return None  # no choice here: wait for the next event
        reward, self.acc = self.acc, 0.0
        obs = self.env._observe(view, waiting)
        placeable = [p is not None for p in placements]
        self.to_env.put(("decide", obs, placeable, reward, view.now, len(waiting), self.running))
        action = self.to_engine.get()
        if action is None or self.stop:
            raise _Stop()
        if action >= len(slots) or placements[action] is None:
            return None
        return dlsched.launch(slots[action], placements[action])


class ReferenceClusterSchedulingEnv(gymnasium.Env):
    """Job scheduling on a simulated GPU cluster (see the module's docs)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        max_queue: int = 8,
        reward: str = "queue_delay",
        oracle: bool = True,
        max_steps: int = 100_000,
        max_time_h: Optional[float] = None,
        **workload: Any,
    ):
        if reward not in REWARDS:
            raise ValueError(f"reward={reward!r}: one of {', '.join(REWARDS)}")
        if max_queue < 1:
            raise ValueError("max_queue: at least 1")
        if "policy" in workload:
            raise ValueError("policy=: the agent is the policy; give placement= for the rule that places its choices")
        self.max_queue = int(max_queue)
        self.reward_kind = reward
        self.oracle = bool(oracle)
        self.max_steps = int(max_steps)
        self.max_time_h = max_time_h
        self.workload = dict(workload)
        self.workload.setdefault("placement", "consolidate")
        # The cluster's shape, read at the workload's first decision (when
        # nothing runs yet, every GPU is free).
        self._probe_nodes()
        n = self.max_queue * 4 + self._nodes + 3
        self.observation_space = spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)
        self.action_space = spaces.Discrete(self.max_queue + 1)
        self._thread = None
        self._bridge = None

    def _probe_nodes(self):
        class NodeProbe:
            name = "probe"
            free = None
            total = None

            def decide(self, view):
                self.free, self.total = view.free_gpus_per_node(), view.total_gpus()
                raise _Stop()

        p = NodeProbe()
        try:
            dlsched.simulate(policy=p, **self.workload)
        except _Stop:
            pass
        if p.free is None:
            raise ValueError("the workload never asks for a decision (no job arrives)")
        self.total_gpus = int(p.total)
        self._node_gpus = np.array(p.free, dtype=np.float64)
        self._nodes = len(self._node_gpus)

    # -- called in the engine's thread, inside the policy call ---------------
    def _observe(self, view, waiting):
        k = self.max_queue
        obs = np.zeros(k * 4 + self._nodes + 3, dtype=np.float32)
        now = view.now
        for i, j in enumerate(waiting[:k]):
            waited = max(0.0, now - view.submit_s(j))
            dur = view.duration_s(j) if self.oracle else 0.0
            obs[i * 4: i * 4 + 4] = (1.0, view.gpus(j) / self.total_gpus, waited / (waited + 3600.0),
                                     dur / (dur + 3600.0))
        free = np.array(view.free_gpus_per_node(), dtype=np.float64)
        obs[k * 4: k * 4 + self._nodes] = free / np.maximum(self._node_gpus, 1.0)
        running = len(view.running())
        obs[-3] = len(waiting) / (len(waiting) + k)
        obs[-2] = min(1.0, running / self.total_gpus)
        obs[-1] = view.free_gpus() / self.total_gpus
        return obs

    # -- the episode's thread ---------------------------------------------------
    def _run(self, bridge, options):
        try:
            result = dlsched.simulate(policy=bridge, **options)
            bridge.to_env.put(("done", result))
        except _Stop:
            bridge.to_env.put(("stopped", None))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            bridge.to_env.put(("error", e))

    def _close_episode(self):
        if self._thread is not None:
            self._bridge.stop = True
            try:
                self._bridge.to_engine.put_nowait(None)
            except queue.Full:
                pass
            # Drain until the thread has finished.
            while self._thread.is_alive():
                try:
                    self._bridge.to_env.get(timeout=0.1)
                except queue.Empty:
                    pass
            self._thread.join()
        self._thread = None
        self._bridge = None

    def _next(self):
        """Waits for the next decision point or the end: (obs, reward, done, info)."""
        kind, *rest = self._bridge.to_env.get()
        if kind == "error":
            self._thread.join()
            self._thread = None
            raise rest[0]
        if kind in ("done", "stopped"):
            self._thread.join()
            self._thread = None
            # What accrued after the last decision point, up to the end.
            reward, self._bridge.acc = self._bridge.acc, 0.0
            self.result = rest[0]
            mask = np.zeros(self.action_space.n, dtype=np.int8)
            mask[-1] = 1
            info = {"action_mask": mask, "summary": self.result.summary if self.result else None}
            return np.zeros(self.observation_space.shape, dtype=np.float32), reward, True, info
        obs, placeable, reward, now, waiting, running = rest
        self._now = now
        mask = np.zeros(self.action_space.n, dtype=np.int8)
        mask[: len(placeable)] = placeable
        mask[-1] = 1
        return obs, reward, False, {"action_mask": mask, "time_s": now, "waiting": waiting, "running": running}

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        """Starts an episode; ``seed`` is the run's seed, ``options`` more workload keywords."""
        super().reset(seed=seed)
        self._close_episode()
        run = dict(self.workload)
        if seed is not None:
            run["seed"] = int(seed)
        if options:
            run.update(options)
        self._now = 0.0
        self._steps = 0
        self.result = None
        self._bridge = _Bridge(self)
        self._thread = threading.Thread(target=self._run, args=(self._bridge, run), daemon=True)
        self._thread.start()
        # The reward before the first choice belongs to no action.
        obs, _, done, info = self._next()
        self._done = done
        return obs, info

    def step(self, action):
        """One choice: a queue slot to start, or the last action (wait)."""
        if self._done:
            raise RuntimeError("the episode is over: call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self._steps += 1
        self._bridge.to_engine.put(int(action))
        obs, reward, done, info = self._next()
        self._done = done
        truncated = False
        if not done and (self._steps >= self.max_steps
                         or (self.max_time_h is not None and self._now >= self.max_time_h * 3600.0)):
            truncated = True
            self._done = True
            self._close_episode()
        return obs, float(reward), bool(done), truncated, info

    def close(self):
        self._close_episode()

