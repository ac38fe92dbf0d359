"""Policies written in Python on the Rust engine."""
import importlib.util
import pathlib

import pytest

import dlsched

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sjf_example", ROOT / "examples" / "python" / "sjf.py")
sjf_example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sjf_example)


def test_the_python_sjf_is_the_rust_sjf_byte_for_byte(example_trace):
    run = dict(placement="consolidate", **example_trace)
    py = dlsched.simulate(policy=sjf_example.SJF(), **run)
    rust = dlsched.simulate(policy="sjf", **run)
    assert py.files["jobs.csv"] == rust.files["jobs.csv"]
    assert py.summary["policy"] == "python-sjf"
    # And it is not FIFO's (the example trace tells them apart).
    assert py.files["jobs.csv"] != dlsched.simulate(policy="fifo", **run).files["jobs.csv"]


def test_the_python_sjf_on_the_helios_window():
    window = ROOT.parent / "shared" / "fidelity" / "helios-philly"
    if not window.is_dir():
        pytest.skip(f"{window} is absent (../shared); CI has it")
    run = dict(trace=str(window / "philly_window_jobs.csv"), format="jobs-csv", vcs=str(window / "vc_sizes.csv"),
               placement="consolidate", tie_order="numpy2-avx512")
    py = dlsched.simulate(policy=sjf_example.SJF(), **run)
    rust = dlsched.simulate(policy="sjf", **run)
    assert len(py.jobs) > 60000
    assert py.files["jobs.csv"] == rust.files["jobs.csv"]


class Greedy:
    """Launches every waiting job on GPU 0: the second launch is invalid."""

    def decide(self, view):
        w = view.waiting()
        return dlsched.launch(w[0], [0] * view.gpus(w[0])) if w else None


def test_an_invalid_decision_is_an_error_naming_the_job(example_trace):
    with pytest.raises(dlsched.DlschedError) as e:
        dlsched.simulate(policy=Greedy(), **example_trace)
    # The first job on a GPU already held: the trace's job id, its line, the GPU.
    msg = str(e.value)
    assert "invalid decision for job `" in msg and "example_jobs.csv, line" in msg and "gpu0" in msg, msg


class Raises:
    def decide(self, view):
        raise KeyError("from the policy")


def test_a_policy_exception_is_raised_as_is(example_trace):
    with pytest.raises(KeyError, match="from the policy"):
        dlsched.simulate(policy=Raises(), **example_trace)


class Keeps:
    def __init__(self):
        self.kept = None

    def decide(self, view):
        self.kept = view
        return None


def test_a_view_kept_past_its_call_refuses(example_trace):
    k = Keeps()
    # Keeps starts no job: the run must be allowed to end with all 10 unfinished.
    dlsched.simulate(policy=k, allow_unfinished=True, **example_trace)
    with pytest.raises(RuntimeError, match="valid only during"):
        k.kept.waiting()


def test_a_policy_that_leaves_jobs_unfinished_is_an_error_naming_them(example_trace):
    with pytest.raises(dlsched.DlschedError, match=r"left 10 of 10 admitted jobs unfinished.*job `a1`"):
        dlsched.simulate(policy=Keeps(), **example_trace)


class Bad:
    def decide(self, view):
        return "launch everything"


def test_a_malformed_decision_says_what_decide_returns(example_trace):
    with pytest.raises(TypeError, match=r"dlsched.launch\(job, gpus\)"):
        dlsched.simulate(policy=Bad(), **example_trace)
