"""The Gymnasium environment dlsched/ClusterScheduling-v0."""
import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
import dlsched.gym  # noqa: E402  (registers the environment)

WORKLOAD = dict(jobs=40, load=0.9, cluster="lab16")


def first_valid(info):
    return int(np.flatnonzero(info["action_mask"])[0])


def episode(env, seed, choose):
    obs, info = env.reset(seed=seed)
    trace = [obs.copy()]
    rewards = []
    done = truncated = False
    while not (done or truncated):
        obs, r, done, truncated, info = env.step(choose(info))
        trace.append(obs.copy())
        rewards.append(r)
    return trace, rewards, env.result


def test_it_passes_the_gymnasium_checker():
    env = gymnasium.make(dlsched.gym.ENV_ID, **WORKLOAD)
    from gymnasium.utils.env_checker import check_env

    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_one_seed_and_one_action_sequence_give_one_trajectory():
    env = dlsched.gym.ClusterSchedulingEnv(**WORKLOAD)
    a = episode(env, 7, first_valid)
    b = episode(env, 7, first_valid)
    c = episode(env, 8, first_valid)
    assert len(a[0]) == len(b[0]) and all((x == y).all() for x, y in zip(a[0], b[0]))
    assert a[1] == b[1]
    assert a[2].files["jobs.csv"] == b[2].files["jobs.csv"]
    assert a[2].files["jobs.csv"] != c[2].files["jobs.csv"]
    env.close()


def test_the_queue_delay_rewards_sum_to_minus_the_total_queueing_delay():
    # The rewards accrue waiting jobs x time at every event; their sum over a
    # drained episode is minus the jobs' queueing delays (jobs.csv), in job-hours.
    env = dlsched.gym.ClusterSchedulingEnv(reward="queue_delay", **WORKLOAD)
    _, rewards, result = episode(env, 3, first_valid)
    jobs = result.jobs
    assert (jobs.status == "completed").all()
    assert sum(rewards) == pytest.approx(-jobs.queue_delay_s.sum() / 3600.0, rel=1e-9, abs=1e-9)
    # jct: minus the total JCT; throughput: the number of jobs.
    env = dlsched.gym.ClusterSchedulingEnv(reward="jct", **WORKLOAD)
    _, rewards, result = episode(env, 3, first_valid)
    assert sum(rewards) == pytest.approx(-result.jobs.jct_s.sum() / 3600.0, rel=1e-9)
    env = dlsched.gym.ClusterSchedulingEnv(reward="throughput", **WORKLOAD)
    _, rewards, result = episode(env, 3, first_valid)
    assert sum(rewards) == len(result.jobs)
    env.close()


def test_always_waiting_first_then_truncation():
    env = dlsched.gym.ClusterSchedulingEnv(max_steps=5, **WORKLOAD)
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert info["action_mask"][-1] == 1
    steps = 0
    truncated = done = False
    while not (done or truncated):
        obs, r, done, truncated, info = env.step(env.action_space.n - 1)
        steps += 1
    assert truncated and steps == 5
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.close()


def test_bad_arguments():
    with pytest.raises(ValueError, match="reward="):
        dlsched.gym.ClusterSchedulingEnv(reward="fun", **WORKLOAD)
    with pytest.raises(dlsched.DlschedError, match="load="):
        dlsched.gym.ClusterSchedulingEnv(jobs=10, load=-1.0)
