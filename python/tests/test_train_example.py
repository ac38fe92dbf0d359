"""The parts of examples/python/train_maskable_ppo.py that need no torch:
the baselines' replay of an episode's workload and the paired interval."""
import importlib.util
import math
import pathlib

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("pandas")

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "train_maskable_ppo.py"


def example():
    spec = importlib.util.spec_from_file_location("train_maskable_ppo", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_paired_interval_by_hand():
    T = example()
    # differences 1, 2, 3, 4: mean 2.5, sd sqrt(5/3), t_{0.975,3} = 3.182
    p = T.paired_interval([2, 4, 6, 8], [1, 2, 3, 4])
    half = 3.182 * math.sqrt(5 / 3) / 2
    assert p["n"] == 4 and p["mean"] == pytest.approx(2.5)
    assert p["lo"] == pytest.approx(2.5 - half) and p["hi"] == pytest.approx(2.5 + half)
    assert T.t975(19) == 2.093 and T.t975(100) == 1.96
    with pytest.raises(ValueError):
        T.paired_interval([1], [2])


def test_the_replayed_baselines_are_the_environment_s_own_workload():
    # With a window covering the whole queue, first-valid in the environment is
    # FIFO with backfill job for job (tests/it/env.rs), and shortest-first by
    # the oracle duration is SJF with backfill: the simulator's replay of the
    # episode's jobs.csv must give the same mean JCT, so the replay runs the
    # identical workload.
    T = example()
    env = T.make_env("eval", jobs=40, max_queue=40)
    for key in (0, 3):
        fifo = T.run_episode(env, key, T.first_valid)
        assert fifo["run_seed"] == 2**63 + key
        assert T.replay(fifo["result"], "fifo") == pytest.approx(fifo["jct_h"], rel=1e-12)
        sjf = T.run_episode(env, key, T.window_sjf(40))
        assert T.replay(fifo["result"], "sjf") == pytest.approx(sjf["jct_h"], rel=1e-12)


def test_random_valid_is_seeded_and_valid():
    T = example()
    env = T.make_env("eval", jobs=30)
    a = T.run_episode(env, 1, T.random_valid(5))
    b = T.run_episode(env, 1, T.random_valid(5))
    assert a["jct_h"] == b["jct_h"] and a["steps"] == b["steps"]
    assert np.isfinite(a["jct_h"]) and a["result"].summary["jobs_completed"] == 30
