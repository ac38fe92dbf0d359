"""dlsched.simulate and dlsched.sweep against the command line, and their errors."""
import json
import pathlib
import subprocess

import pytest

import dlsched


def run_cli(cli, *args):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p


def test_the_first_run_is_the_cli_first_run(cli, tmp_path):
    # Same defaults as `dlsched simulate` (backfill, one-day cut, half-cluster jobs).
    run_cli(cli, "simulate", "--jobs", "120", "--seed", "3", "--out", str(tmp_path / "cli"))
    r = dlsched.simulate(jobs=120, seed=3, out=tmp_path / "py")
    for f in ["jobs.csv", "timeline.csv", "vc_timeline.csv", "vc_summary.csv", "summary.json"]:
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f
    assert r.files["jobs.csv"] == (tmp_path / "cli" / "jobs.csv").read_bytes()
    assert r.summary == json.loads((tmp_path / "cli" / "summary.json").read_text())
    # strict=True is --strict.
    run_cli(cli, "simulate", "--jobs", "120", "--seed", "3", "--strict", "--out", str(tmp_path / "strict"))
    s = dlsched.simulate(jobs=120, seed=3, strict=True)
    assert s.files["jobs.csv"] == (tmp_path / "strict" / "jobs.csv").read_bytes()
    assert s.files["jobs.csv"] != r.files["jobs.csv"]


def test_one_configuration_gives_one_answer_from_every_builder(cli, tmp_path):
    # Issue 35: dlsched simulate, an experiment file, dlsched.simulate and
    # dlsched.sweep build the same run from the same keys (QSSF, which alone
    # of the queue policies used to run strict by default; the library's
    # route is in tests/it/first_run.rs). Both the default and a strict queue.
    files = ["jobs.csv", "timeline.csv", "vc_timeline.csv", "vc_summary.csv", "summary.json"]
    for strict in [False, True]:
        tag = "strict" if strict else "default"
        extra = ["--strict"] if strict else []
        run_cli(cli, "simulate", "--policy", "qssf", "--jobs", "120", "--load", "0.9", "--seed", "3", *extra,
                "--out", str(tmp_path / f"cli-{tag}"))
        exp = tmp_path / f"{tag}.toml"
        backfill = "backfill = false\n" if strict else ""
        exp.write_text(f'question = "q"\n[base]\npolicy = "qssf"\njobs = 120\nload = 0.9\n{backfill}[sweep]\nseed = [3]\n')
        run_cli(cli, "sweep", str(exp), "--out", str(tmp_path / f"cli-sweep-{tag}"))
        dlsched.sweep(exp, threads=1, out=tmp_path / f"py-sweep-{tag}")
        kw = dict(strict=True) if strict else {}
        dlsched.simulate(policy="qssf", jobs=120, load=0.9, seed=3, out=tmp_path / f"py-{tag}", **kw)
        dirs = [tmp_path / f"py-{tag}"]
        for sw in [f"cli-sweep-{tag}", f"py-sweep-{tag}"]:
            (run,) = list((tmp_path / sw / "runs").iterdir())
            dirs.append(run)
        for f in files:
            want = (tmp_path / f"cli-{tag}" / f).read_bytes()
            for d in dirs:
                assert (d / f).read_bytes() == want, (tag, f, d)
        spec = json.loads((tmp_path / f"cli-{tag}" / "manifest.json").read_text())["spec"]
        assert (spec["workload"]["max_duration_s"], spec["workload"]["max_job_gpus"]) == (86400, 8)
        assert spec["policy"]["backfill"] is (not strict)
        for d in dirs:
            assert json.loads((d / "manifest.json").read_text())["spec"] == spec, d


def test_tables_are_dataframes_with_the_summary_figures(example_trace):
    pandas = pytest.importorskip("pandas")
    r = dlsched.simulate(policy="sjf", **example_trace)
    assert isinstance(r.jobs, pandas.DataFrame)
    done = r.jobs[r.jobs.status == "completed"]
    assert len(done) == r.summary["jobs_completed"]
    # The mean JCT of the summary, recomputed from jobs.csv.
    assert done.jct_s.mean() == pytest.approx(r.summary["jct_mean_s"], rel=1e-9, abs=1e-3)
    assert set(r.vc_summary.columns) >= {"vc"}
    assert "dlsched.Result sjf" in repr(r)


def test_policy_options_are_a_dict(cli, tmp_path, example_trace):
    opts = {"quota-by-count": True, "pending-first-on-ties": True}
    r = dlsched.simulate(policy="srtf", policy_opt=opts, checkpoint="helios-table", **example_trace)
    run_cli(cli, "simulate", "--trace", example_trace["trace"], "--vcs", example_trace["vcs"], "--policy", "srtf",
            "--policy-opt", "quota-by-count=true", "--policy-opt", "pending-first-on-ties=true",
            "--checkpoint", "helios-table", "--out", str(tmp_path / "cli"))
    assert r.files["jobs.csv"] == (tmp_path / "cli" / "jobs.csv").read_bytes()


def test_bad_values_raise_the_cli_message_with_the_keyword(tmp_path):
    with pytest.raises(dlsched.DlschedError, match=r"load="):
        dlsched.simulate(load=-1.0)
    with pytest.raises(dlsched.DlschedError, match=r"unknown keyword `jobz`"):
        dlsched.simulate(jobz=3)
    with pytest.raises(TypeError, match=r"jobs=: a str, int, float, bool or path, not list"):
        dlsched.simulate(jobs=[1])
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,gpu_num,submit_time,duration\na,1,0,10\nb,1,5,oops\n")
    with pytest.raises(dlsched.DlschedError) as e:
        dlsched.simulate(trace=bad, format="jobs-csv")
    msg = str(e.value)
    assert "bad.csv:3: column `duration`: `oops`" in msg, msg


def test_configuration_errors_say_their_kind_and_key(tmp_path):
    # A misspelt policy: a name that does not exist, at the key `policy`.
    with pytest.raises(dlsched.ConfigError) as e:
        dlsched.simulate(policy="fiffo")
    assert (e.value.kind, e.value.key) == ("unknown-name", "policy")
    assert str(e.value).startswith("policy=fiffo: expected one of fifo, sjf, "), str(e.value)
    # Still a DlschedError, for code that catches that.
    assert isinstance(e.value, dlsched.DlschedError)
    # A value out of range: theta is at least 0.
    with pytest.raises(dlsched.ConfigError) as e:
        dlsched.simulate(workload="genie", policy="genie", theta=-1.0)
    assert (e.value.kind, e.value.key) == ("invalid-value", "theta")
    assert str(e.value) == "theta= must be a number >= 0, got -1", str(e.value)
    # An unknown policy option, named by its policy_opt key.
    with pytest.raises(dlsched.ConfigError) as e:
        dlsched.simulate(policy="las", policy_opt={"rund": 60})
    assert (e.value.kind, e.value.key) == ("unknown-name", "policy_opt.rund")
    # A trace with no job: the workload is empty, the key is no one's.
    empty = tmp_path / "empty.csv"
    empty.write_text("job_id,vc,gpu_num,submit_time,duration\n")
    with pytest.raises(dlsched.ConfigError) as e:
        dlsched.simulate(trace=empty)
    assert (e.value.kind, e.value.key) == ("empty-workload", None)
    # An unknown key in an experiment.
    with pytest.raises(dlsched.ConfigError) as e:
        dlsched.sweep({"question": "q", "base": {"polcy": "fifo"}})
    assert (e.value.kind, e.value.key) == ("unknown-name", "polcy")


def test_a_sweep_from_a_dict_is_the_sweep_from_its_file(tmp_path):
    exp = {"question": "q", "base": {"jobs": 60, "cluster": "lab16"}, "sweep": {"policy": ["fifo", "sjf"], "seed": [1, 2]}}
    f = tmp_path / "e.toml"
    f.write_text('question = "q"\n[base]\njobs = 60\ncluster = "lab16"\n[sweep]\npolicy = ["fifo", "sjf"]\nseed = [1, 2]\n')
    a = dlsched.sweep(exp, threads=1)
    b = dlsched.sweep(f, threads=2, out=tmp_path / "out")
    assert len(a) == 4
    assert a.equals(b)
    assert (tmp_path / "out" / "summary.csv").exists()
    with pytest.raises(dlsched.DlschedError, match="unknown key `sweep.policies`"):
        dlsched.sweep({"question": "q", "sweep": {"policies": ["fifo"]}})


def test_skip_malformed_and_the_notes_as_warnings(cli, tmp_path):
    # Two malformed rows (lines 3 and 5) and a column no format reads.
    t = tmp_path / "t.csv"
    t.write_text("job_id,submit_time,duration,gpu_num,comment\na,0,100,1,x\nb,10,,1,y\nc,20,30,1,z\nd,30,10,two,w\n")
    with pytest.raises(dlsched.DlschedError, match=r"t.csv:3: column `duration`"):
        dlsched.simulate(trace=t, nodes=1, gpus_per_node=2)
    with pytest.warns(dlsched.DlschedNote) as notes:
        r = dlsched.simulate(trace=t, nodes=1, gpus_per_node=2, skip_malformed=True)
    texts = [str(w.message) for w in notes]
    assert any("2 malformed rows left out (skip_malformed=)" in n for n in texts), texts
    assert any("ignored columns: comment" in n for n in texts), texts
    assert r.notes == texts
    # skipped.csv as the command line writes it.
    run_cli(cli, "simulate", "--trace", str(t), "--nodes", "1", "--gpus-per-node", "2", "--skip-malformed",
            "--out", str(tmp_path / "cli"))
    assert r.files["skipped.csv"] == (tmp_path / "cli" / "skipped.csv").read_bytes()
    assert r.summary["jobs_skipped_by_reason"] == {"malformed": 2}
    # strict_input=True: the unread column is an error.
    with pytest.raises(dlsched.DlschedError, match="ignored columns: comment"):
        dlsched.simulate(trace=t, nodes=1, gpus_per_node=2, skip_malformed=True, strict_input=True)


def test_options_the_policy_ignores_are_noted(tmp_path):
    # As `dlsched simulate --genie-best-fit` notes it, spelt as keywords.
    with pytest.warns(dlsched.DlschedNote) as notes:
        r = dlsched.simulate(jobs=20, genie_best_fit=True)
    want = "genie_models= and genie_best_fit= apply only to the GENIE-family policies"
    assert want in [str(w.message) for w in notes]
    assert want in r.notes


def test_a_sweep_raises_its_notes_once(tmp_path):
    # The experiment's note (a sharing placement that shares nothing on the
    # synthetic workload, found as the file is read) and its runs' (GENIE's
    # best fit under FIFO), each once for two runs.
    exp = {"question": "q", "base": {"jobs": 20, "placement": "share-best-fit", "genie_best_fit": True},
           "sweep": {"seed": [1, 2]}}
    with pytest.warns(dlsched.DlschedNote) as notes:
        dlsched.sweep(exp)
    texts = [str(w.message) for w in notes]
    assert sum("none will share a GPU" in n for n in texts) == 1, texts
    assert texts.count("`genie_models` and `genie_best_fit` apply only to the GENIE-family policies") == 1, texts
