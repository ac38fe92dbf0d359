"""dlsched.sweep over Python policies and seeds in worker processes: the
sweep directory `dlsched sweep` writes, with its resume and shard semantics."""
import os
import pathlib
import random
import subprocess
import sys

import pytest

import dlsched


class PyFifo:
    """Strict FIFO in Python."""

    name = "py-fifo"

    def decide(self, view):
        w = view.waiting()
        if w:
            gpus = view.place(w[0])
            if gpus is not None:
                return dlsched.launch(w[0], gpus)
        return None


class RandomFit:
    """Starts a waiting job that fits, drawn by its seed (an "RL seed": the
    schedule depends on it)."""

    name = "random-fit"

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def decide(self, view):
        fits = [(j, g) for j in view.waiting() if (g := view.place(j)) is not None]
        if fits:
            return dlsched.launch(*self.rng.choice(fits))
        return None


def random_fit(seed):
    return RandomFit(seed)


POLICIES = {"fifo-py": PyFifo, "random": random_fit}
OPTIONS = dict(jobs=40, load=1.2)


def sweep(out, **kw):
    return dlsched.sweep(policies=POLICIES, seeds=[1, 2, 3], out=str(out), workers=2, **OPTIONS, **kw)


def test_a_python_sweep_whole_sharded_and_resumed_gives_one_summary(cli, tmp_path):
    whole = sweep(tmp_path / "whole")
    assert len(whole) == 6 and list(whole.columns[:3]) == ["run_id", "policy", "seed"]
    # The sweep's order: policy by label, seed fastest.
    assert list(zip(whole["policy"], whole["seed"])) == [(p, s) for p in ["fifo-py", "random"] for s in [1, 2, 3]]
    # Each run is the simulate() of its policy and seed, byte for byte.
    row = whole.iloc[4]
    run = dlsched.simulate(policy=random_fit(seed=2), seed=2, **OPTIONS)
    assert (tmp_path / "whole" / "runs" / row["run_id"] / "jobs.csv").read_bytes() == run.files["jobs.csv"]
    # The seed reaches the factory: seeds differ, and random differs from FIFO.
    assert len(set(whole["jct_mean_s"])) > 2
    summary = (tmp_path / "whole" / "summary.csv").read_bytes()

    # Shards 1/2 and 2/2 split the runs as --shard does; merged by the CLI, the same summary.csv.
    one, two = sweep(tmp_path / "s1", shard="1/2"), sweep(tmp_path / "s2", shard="2/2")
    assert sorted(list(one["run_id"]) + list(two["run_id"])) == sorted(whole["run_id"])
    ids = sorted(whole["run_id"])
    assert sorted(one["run_id"]) == ids[0::2] and sorted(two["run_id"]) == ids[1::2]
    subprocess.run([cli, "merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "merged")],
                   check=True, capture_output=True)
    assert (tmp_path / "merged" / "summary.csv").read_bytes() == summary

    # Resume: complete runs are kept; an interrupted one (no summary.json,
    # no manifest.json) is run again.
    runs = tmp_path / "whole" / "runs"
    cut = runs / whole["run_id"][1]
    (cut / "summary.json").unlink()
    (cut / "manifest.json").unlink()
    kept = runs / whole["run_id"][0] / "jobs.csv"
    before = kept.stat().st_mtime_ns
    os.utime(kept, ns=(before - 10**9, before - 10**9))
    again = sweep(tmp_path / "whole", resume=True)
    assert (tmp_path / "whole" / "summary.csv").read_bytes() == summary
    assert (cut / "summary.json").is_file() and (cut / "manifest.json").is_file()
    assert kept.stat().st_mtime_ns == before - 10**9, "a complete run was redone"
    assert list(again["run_id"]) == list(whole["run_id"])


def test_registered_policies_get_the_experiment_file_s_run_ids_and_summary(cli, tmp_path):
    exp = tmp_path / "exp.toml"
    exp.write_text('question = "q"\n[base]\njobs = 40\nload = 1.2\n[sweep]\npolicy = ["fifo", "sjf"]\nseed = [1, 2]\n')
    subprocess.run([cli, "sweep", str(exp), "--out", str(tmp_path / "cli")], check=True, capture_output=True)
    py = dlsched.sweep(policies=["fifo", "sjf"], seeds=[1, 2], jobs=40, load=1.2, out=str(tmp_path / "py"), workers=1)
    assert len(py) == 4
    assert (tmp_path / "py" / "summary.csv").read_bytes() == (tmp_path / "cli" / "summary.csv").read_bytes()


def test_a_factory_workers_cannot_import_is_refused():
    with pytest.raises(TypeError, match="top-level"):
        dlsched.sweep(policies=[lambda: PyFifo()], seeds=[1])


def test_a_failing_run_is_in_failed_csv(tmp_path):
    with pytest.raises(dlsched.DlschedError, match=r"1 of the sweep's runs failed.*ZeroDivisionError"):
        dlsched.sweep(policies={"bad": Broken, "fifo": "fifo"}, out=str(tmp_path), jobs=20, workers=2)
    failed = (tmp_path / "failed.csv").read_text().splitlines()
    assert failed[0] == "run_id,error" and len(failed) == 2 and "ZeroDivisionError" in failed[1]
    assert len((tmp_path / "summary.csv").read_text().splitlines()) == 2  # header and the fifo run


class Broken:
    def decide(self, view):
        return 1 / 0


def test_shard_slurm_is_the_array_task_s_share(monkeypatch):
    axes = {"policy": ["a:x", "b:y"], "seed": [1, 2, 3]}
    for k, v in dict(SLURM_ARRAY_TASK_ID="2", SLURM_ARRAY_TASK_COUNT="2", SLURM_ARRAY_TASK_MIN="1",
                     SLURM_ARRAY_TASK_MAX="2").items():
        monkeypatch.setenv(k, v)
    slurm = dlsched._core.SweepPlan("q", {"jobs": 40}, axes, "slurm").runs()
    assert slurm == dlsched._core.SweepPlan("q", {"jobs": 40}, axes, "2/2").runs() and len(slurm) == 3
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID")
    with pytest.raises(dlsched.DlschedError, match="SLURM_ARRAY_TASK_ID is not set"):
        dlsched._core.SweepPlan("q", {"jobs": 40}, axes, "slurm")


def test_a_script_without_the_main_guard_fails_at_once(tmp_path):
    # Each spawned worker imports the script: unguarded, it would start the
    # sweep again; the pool breaks and the error says what to do (no hang).
    script = tmp_path / "unguarded.py"
    script.write_text("import dlsched\n"
                      f"dlsched.sweep(policies=['fifo'], seeds=[1, 2], jobs=20, out={str(tmp_path / 'out')!r}, workers=2)\n")
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and 'if __name__ == "__main__":' in r.stderr, r.stderr[-2000:]
