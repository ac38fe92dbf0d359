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


class Probe:
    """Starts jobs as they come (job 0 preempted from 40 s to 50 s) and
    records View.remaining_s, attained_s and gpus_held of every job at 30, 40,
    50 and 55 s (timers) and at each completion."""

    name = "probe"

    def __init__(self):
        self.timers = [30.0, 40.0, 50.0, 55.0]
        self.seen = {}
        self.launched = {}

    def snapshot(self, view):
        return {
            view.job(j)["name"]: (view.remaining_s(j), view.remaining_s(j, at_current_rate=True), view.attained_s(j),
                                  view.gpus_held(j))
            for j in range(3)
        }

    def on_timer(self, view):
        self.seen[view.now] = self.snapshot(view)

    def on_completion(self, job, view):
        self.seen[("done", view.job(job)["name"])] = (view.remaining_s(job), view.attained_s(job),
                                                      view.gpus_held(job))

    def decide(self, view):
        if view.now == 40.0 and 0 in view.running():
            return dlsched.preempt(0)
        for j in view.waiting():
            if j == 0 and 40.0 <= view.now < 50.0:
                continue
            gpus = view.place(j)
            if gpus is not None:
                self.launched[j] = gpus
                return dlsched.launch(j, gpus)
        if self.timers:
            return dlsched.wake_at(self.timers.pop(0))
        return None


def test_remaining_attained_and_held_gpus_by_hand(tmp_path):
    # One 4-GPU node. a: 2 GPUs, 100 s, from 0 s; b: 1 GPU, 50 s, from 10 s;
    # c: 4 GPUs, 10 s, from 20 s (waits: never 4 free before a ends).
    trace = tmp_path / "jobs.csv"
    trace.write_text("job_id,vc,gpu_num,submit_time,duration\na,v,2,0,100\nb,v,1,10,50\nc,v,4,20,10\n")
    vcs = tmp_path / "vcs.csv"
    vcs.write_text("vc,nodes,gpus_per_node\nv,1,4\n")
    p = Probe()
    r = dlsched.simulate(policy=p, trace=str(trace), vcs=str(vcs))
    a, b = p.launched[0], p.launched[1]
    assert len(a) == 2 and len(b) == 1
    # (remaining s, remaining s at the current rate (1.0: trace speed), attained GPU-s, GPUs held)
    assert p.seen[30.0] == {"a": (70.0, 70.0, 60.0, a), "b": (30.0, 30.0, 20.0, b), "c": (10.0, 10.0, 0.0, [])}
    assert p.seen[40.0] == {"a": (60.0, 60.0, 80.0, a), "b": (20.0, 20.0, 30.0, b), "c": (10.0, 10.0, 0.0, [])}
    # a suspended from 40 s (no checkpoint cost by default): its work and service stay, it holds nothing.
    assert p.seen[50.0] == {"a": (60.0, 60.0, 80.0, []), "b": (10.0, 10.0, 40.0, b), "c": (10.0, 10.0, 0.0, [])}
    # a resumed at 50 s on its new GPUs: 5 s more of 2 GPUs.
    a2 = p.launched[0]
    assert p.seen[55.0] == {"a": (55.0, 55.0, 90.0, a2), "b": (5.0, 5.0, 45.0, b), "c": (10.0, 10.0, 0.0, [])}
    # Completions: no work left; service 2 GPUs x 100 s (a), 1 x 50 (b), 4 x 10 (c).
    assert p.seen[("done", "a")] == (0.0, 200.0, [])
    assert p.seen[("done", "b")] == (0.0, 50.0, [])
    assert p.seen[("done", "c")] == (0.0, 40.0, [])
    jobs = r.jobs.set_index("job_id")
    # a ran 0-40 s and 50-110 s; c starts when a frees its GPUs.
    assert jobs.loc["a", "end_s"] == 110 and jobs.loc["c", "start_s"] == 110
