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


# --- The Rust environment (issue 36) -------------------------------------

import importlib.util
import pathlib

_ref_spec = importlib.util.spec_from_file_location(
    "reference_gym", pathlib.Path(__file__).with_name("reference_gym.py"))
reference_gym = importlib.util.module_from_spec(_ref_spec)
_ref_spec.loader.exec_module(reference_gym)


@pytest.mark.parametrize("kw", [
    dict(jobs=40, load=0.9),
    dict(jobs=60, load=1.5, reward="jct"),
    dict(jobs=60, load=1.2, reward="slowdown", max_queue=4),
    dict(jobs=50, load=1.0, reward="throughput", placement="first-fit"),
    dict(jobs=80, load=2.0, cluster="philly", reward="jct", oracle=False),
])
def test_the_rust_environment_steps_as_the_first_version_did(kw):
    # The first version (the engine in a thread, python/tests/reference_gym.py)
    # and the Rust one, fed the same random valid actions: the same
    # observations, rewards, ends, info and final tables, bit for bit. The
    # masks agree but for wait where waiting would end the run with jobs left
    # (the first version offered it and then failed).
    for seed in (1, 2):
        ref = reference_gym.ReferenceClusterSchedulingEnv(**kw)
        new = dlsched.gym.ClusterSchedulingEnv(**kw)
        rng = np.random.default_rng(seed)
        o1, i1 = ref.reset(seed=seed)
        o2, i2 = new.reset(seed=seed)
        assert o1.dtype == o2.dtype and np.array_equal(o1, o2)
        while True:
            assert np.array_equal(i1["action_mask"][:-1], i2["action_mask"][:-1])
            a = int(rng.choice(np.flatnonzero(i2["action_mask"])))
            o1, r1, d1, t1, i1 = ref.step(a)
            o2, r2, d2, t2, i2 = new.step(a)
            assert np.array_equal(o1, o2) and r1 == r2 and (d1, t1) == (d2, t2)
            if d1 or t1:
                break
            assert (i1["time_s"], i1["waiting"], i1["running"]) == (i2["time_s"], i2["waiting"], i2["running"])
        assert i1["summary"] == i2["summary"]
        assert ref.result.files["jobs.csv"] == new.result.files["jobs.csv"]
        ref.close()


def test_reset_without_a_seed_draws_the_next_workload_reproducibly():
    def seeds(**kw):
        env = dlsched.gym.ClusterSchedulingEnv(**WORKLOAD, **kw)
        out = []
        for i in range(4):
            env.reset(seed=11 if i == 0 else None)
            out.append(env.episode_seed)
        return out
    a = seeds()
    assert a == seeds() and a[0] == 11 and len(set(a)) == 4
    # Held-out evaluation episodes: the other half of the seed space.
    e = seeds(split="eval")
    assert all(s >= 2**63 for s in e) and all(s < 2**63 for s in a)
    # A fresh environment's unseeded episodes follow its `seed` keyword.
    env1 = dlsched.gym.ClusterSchedulingEnv(**WORKLOAD, seed=4)
    env2 = dlsched.gym.ClusterSchedulingEnv(**WORKLOAD, seed=4)
    o1, _ = env1.reset()
    o2, _ = env2.reset()
    assert env1.episode_seed == env2.episode_seed and np.array_equal(o1, o2)


@pytest.mark.parametrize("kw", [dict(action="placement"), dict(action="node"), dict(observation="fixed"),
                                dict(observation="fixed", action="node", cluster="philly", jobs=60)])
def test_every_mode_passes_the_gymnasium_checker_and_exposes_its_mask(kw):
    from gymnasium.utils.env_checker import check_env

    args = {**WORKLOAD, **kw}
    env = dlsched.gym.ClusterSchedulingEnv(**args)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=2)
    assert env.observation_space.contains(obs)
    m = env.action_masks()
    assert m.dtype == bool and m.shape == (env.action_space.n,)
    assert np.array_equal(m.astype(np.int8), info["action_mask"])
    # Only valid actions until the end; each starts a job or waits.
    steps = 0
    while True:
        obs, r, d, t, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
        steps += 1
        if d or t:
            break
        assert env.observation_space.contains(obs)
    assert d and env.result.summary["jobs_completed"] == args["jobs"]


def test_the_fixed_observation_has_one_size_on_every_cluster():
    a = dlsched.gym.ClusterSchedulingEnv(observation="fixed", max_queue=6, jobs=20, cluster="lab16")
    b = dlsched.gym.ClusterSchedulingEnv(observation="fixed", max_queue=6, jobs=20, cluster="philly")
    assert a.observation_space.shape == b.observation_space.shape == (10 + 6 * 9,)


def test_per_job_reward_normalisation_divides_the_return_by_the_jobs():
    def ret(norm):
        env = dlsched.gym.ClusterSchedulingEnv(reward="jct", reward_norm=norm, **WORKLOAD)
        _, rewards, result = episode(env, 3, first_valid)
        return sum(rewards), result
    raw, result = ret("none")
    per_job, _ = ret("per_job")
    assert per_job == pytest.approx(raw / WORKLOAD["jobs"], rel=1e-12)
    # minus the mean JCT, hours
    assert per_job == pytest.approx(-result.summary["jct_mean_s"] / 3600.0, rel=1e-9)


def test_the_vector_environment_is_its_environments_side_by_side():
    n = 3
    venv = dlsched.gym.VectorClusterSchedulingEnv(num_envs=n, max_queue=4, **WORKLOAD)
    alone = [dlsched.gym.ClusterSchedulingEnv(max_queue=4, **WORKLOAD) for _ in range(n)]
    obs, infos = venv.reset(seed=20)
    assert obs.shape == (n, venv.single_observation_space.shape[0]) and obs.dtype == np.float32
    singles = [e.reset(seed=20 + i) for i, e in enumerate(alone)]
    assert np.array_equal(obs, np.stack([o for o, _ in singles]))
    pending = [False] * n
    ends = 0
    for _ in range(400):
        actions = venv.action_masks().argmax(1)
        obs, rewards, term, trunc, infos = venv.step(actions)
        for i, e in enumerate(alone):
            if pending[i]:  # next-step autoreset: this step reset it, reward 0
                o, _ = e.reset()
                r, d, t = 0.0, False, False
                pending[i] = False
            else:
                o, r, d, t, _ = e.step(int(actions[i]))
                if d or t:
                    pending[i] = True
                    ends += 1
                    assert infos["_summary"][i] and infos["summary"][i] == e.result.summary
            assert np.array_equal(obs[i], o) and rewards[i] == r and (term[i], trunc[i]) == (d, t)
    assert ends > 0


def test_the_vector_environment_passes_gymnasiums_vector_checks():
    venv = dlsched.gym.VectorClusterSchedulingEnv(num_envs=2, **WORKLOAD)
    obs, _ = venv.reset(seed=0)
    assert venv.observation_space.contains(obs)
    obs, *_ = venv.step(venv.action_space.sample() * 0 + venv.action_masks().argmax(1))
    assert venv.observation_space.contains(obs)
    with pytest.raises(ValueError, match="seeds for 2"):
        venv.reset(seed=[1, 2, 3])


def test_maskable_ppo_trains_on_the_stable_baselines3_vector():
    sb3_contrib = pytest.importorskip("sb3_contrib")  # torch: never a CI dependency
    venv = dlsched.gym.sb3_vec_env(num_envs=2, observation="fixed", **WORKLOAD)
    model = sb3_contrib.MaskablePPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(total_timesteps=128)
    assert model.num_timesteps >= 128


def test_bad_environment_arguments_name_the_keyword():
    for kw, match in [(dict(episodes="windows"), "give a trace"), (dict(episodes="loads", loads=(2, 1)), "lo <= hi"),
                      (dict(split="test"), "one of train, eval"), (dict(reward_norm="x"), "none, per_job")]:
        with pytest.raises(ValueError, match=match):
            dlsched.gym.ClusterSchedulingEnv(**{**WORKLOAD, **kw})
    # What needs the trace read is the core's error, naming the counts.
    with pytest.raises(dlsched.DlschedError, match="8 for training"):
        dlsched.gym.ClusterSchedulingEnv(**WORKLOAD, episodes="windows", window_jobs=9,
                                         trace=str(pathlib.Path(__file__).resolve().parents[2] / "traces" / "example_jobs.csv"))
    with pytest.raises(ValueError, match="action="):
        dlsched.gym.ClusterSchedulingEnv(action="foo", **WORKLOAD)
    env = dlsched.gym.ClusterSchedulingEnv(**WORKLOAD)
    for seed in (-1, 2**63, "x"):
        with pytest.raises(ValueError, match="seed="):
            env.reset(seed=seed)


def test_keywords_of_another_episode_source_and_bad_types_are_errors_naming_them():
    trace = str(pathlib.Path(__file__).resolve().parents[2] / "traces" / "example_jobs.csv")
    cases = [
        (dict(loads=(1.5, 2.5)), "only with episodes=\"loads\""),
        (dict(window_jobs=4), "only with episodes=\"windows\""),
        (dict(split="eval", trace=trace), "replays the training episode"),
        (dict(episodes="loads", loads=0.8), "loads=0.8: give"),
        (dict(episodes="loads", loads=("a", "b")), "loads\\[0\\]='a'"),
        (dict(max_queue="8"), "max_queue='8': an int"),
        (dict(max_queue=2.7), "max_queue=2.7"),
        (dict(max_queue=2**40), "1 to 4,096"),
        (dict(max_steps=0), "max_steps=0"),
        (dict(reward_norm="x"), "reward_norm='x'"),
        (dict(episodes="nope"), "episodes='nope'"),
        (dict(split="test"), "split='test'"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            dlsched.gym.ClusterSchedulingEnv(**{**WORKLOAD, **kw})
    for n in (0, -1, 10**7, 2.5):
        with pytest.raises(ValueError, match="num_envs="):
            dlsched.gym.VectorClusterSchedulingEnv(n, **WORKLOAD)


def test_a_vectors_actions_and_seeds_are_checked_and_unseeded_envs_differ():
    venv = dlsched.gym.VectorClusterSchedulingEnv(num_envs=3, **WORKLOAD)
    venv.reset()
    seeds = venv.episode_seeds()
    assert len(set(seeds)) == 3
    for actions, match in [([0.9, 1.7, 0], "3 ints"), ([-1, 0, 0], "actions\\[0\\] = -1"), ([0, 99, 0], "actions\\[1\\]"),
                           ([True, False, True], "3 ints"), ([0, 0], "3 ints")]:
        with pytest.raises(ValueError, match=match):
            venv.step(actions)
    for seed in (1.5, "12", 2**63):
        with pytest.raises(ValueError, match="seed="):
            venv.reset(seed=seed)


def test_a_masked_action_waits_unless_waiting_would_strand_the_jobs():
    env = dlsched.gym.ClusterSchedulingEnv(jobs=3, load=0.5, cluster="lab16")
    obs, info = env.reset(seed=1)
    mask = env.action_masks()
    invalid = [a for a in range(env.action_space.n - 1) if not mask[a]]
    if mask[-1]:
        # As the first version: an invalid slot waits.
        same = dlsched.gym.ClusterSchedulingEnv(jobs=3, load=0.5, cluster="lab16")
        same.reset(seed=1)
        assert np.array_equal(env.step(invalid[0])[0], same.step(env.action_space.n - 1)[0])
    # Drive to the last job's decision: nothing runs and nothing arrives, then a wait is refused.
    env = dlsched.gym.ClusterSchedulingEnv(jobs=1, cluster="lab16")
    env.reset(seed=1)
    assert not env.action_masks()[-1]
    with pytest.raises(dlsched.DlschedError, match="waiting would end the run with 1 jobs never started"):
        env.step(env.action_space.n - 1)
    obs, r, d, t, info = env.step(0)
    assert d
