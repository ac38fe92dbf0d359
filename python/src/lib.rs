//! `dlsched._core`: the Rust side of the Python package `dlsched`.
//!
//! The Python modules (`python/dlsched/`) wrap these functions: they turn
//! the CSV bytes returned here into pandas DataFrames, and give decisions
//! their helper constructors. Everything here takes the same keys as an
//! experiment file's `[base]` table (`experiments/README.md`), as keyword
//! arguments, and reports a bad value with the same message as the command
//! line, with the key spelt `jobs_per_hour=`.

mod env;

use std::cell::Cell;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};

use dlsched::cluster::Cluster;
use dlsched::experiment::raw::{self, Origin, RawSpec, Value};
use dlsched::experiment::{RunReport, run_one_with_policy};
use dlsched::ids::{GpuId, JobId};
use dlsched::job::{JobState, JobTable};
use dlsched::metrics::export;
use dlsched::policy::placement::Placement;
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::RateModel;
use dlsched::time::SimTime;

pyo3::create_exception!(
    _core,
    DlschedError,
    pyo3::exceptions::PyException,
    "A run or sweep that dlsched refused or that failed: bad input (the message names the file, line and field, or the key), an invalid configuration, or an invalid policy decision."
);

pyo3::create_exception!(
    _core,
    ConfigError,
    DlschedError,
    "An invalid configuration (a keyword, an experiment file's key, a policy option): `kind` says what is wrong (`unknown-name`, `invalid-value`, `conflict`, `empty-workload`, `artefact`, `other`), `key` names the key at fault as an experiment file spells it (`policy`, `policy_opt.theta`), or is None."
);

fn err(msg: impl std::fmt::Display) -> PyErr {
    DlschedError::new_err(msg.to_string())
}

/// A configuration error as `dlsched.ConfigError`, with its `kind` (the
/// kebab-case name) and `key` (str or None) as attributes.
fn config_err(e: dlsched::error::ConfigError) -> PyErr {
    Python::attach(|py| {
        let pe = ConfigError::new_err(e.message);
        let v = pe.value(py);
        // Setting an attribute of a fresh exception object does not fail.
        let _ = v.setattr("kind", e.kind.name());
        let _ = v.setattr("key", e.key);
        pe
    })
}

/// A run's error: a configuration error as [`config_err`], any other as
/// `DlschedError`.
fn run_err(e: dlsched::error::RunError) -> PyErr {
    match e {
        dlsched::error::RunError::Config(c) => config_err(c),
        e => err(e),
    }
}

/// A Python scalar as a raw-spec value: bool, int, float, str or a path.
fn value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::Int(i));
        }
        return match v.extract::<u64>() {
            Ok(u) => Ok(Value::UInt(u)),
            Err(_) => Err(err(format!("{key}=: {v} is out of the 64-bit range"))),
        };
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Value::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(Value::Str(v.extract()?));
    }
    // pathlib.Path and other os.PathLike objects.
    if v.hasattr("__fspath__")? {
        let p: PathBuf = v.extract()?;
        return Ok(Value::Str(p.to_string_lossy().into_owned()));
    }
    Err(PyTypeError::new_err(format!("{key}=: a str, int, float, bool or path, not {}", v.get_type().name()?)))
}

/// Keyword arguments as a raw spec: every key one of the experiment file's
/// keys ([`raw::KEYS`]), `policy_opt` a dict of the policy's options (nested
/// dicts for dotted names). `strict` is taken out (the command line's
/// `--strict`).
fn raw_spec(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<(RawSpec, bool)> {
    let mut r = RawSpec::new();
    let mut strict = false;
    let Some(kwargs) = kwargs else { return Ok((r, strict)) };
    for (k, v) in kwargs.iter() {
        let k: String = k.extract()?;
        if k == "strict" {
            strict = v.extract().map_err(|_| PyTypeError::new_err("strict=: True or False"))?;
            continue;
        }
        if k == "policy_opt" {
            fn walk(prefix: &str, d: &Bound<'_, PyDict>, r: &mut RawSpec) -> PyResult<()> {
                for (n, v) in d.iter() {
                    let n: String =
                        n.extract().map_err(|_| PyTypeError::new_err("policy_opt=: option names are str"))?;
                    let name = if prefix.is_empty() { n } else { format!("{prefix}.{n}") };
                    if let Ok(sub) = v.cast::<PyDict>() {
                        walk(&name, sub, r)?;
                    } else {
                        let key = format!("{}{name}", raw::POLICY_OPT);
                        let val = value(&key, &v)?;
                        r.insert(key, val);
                    }
                }
                Ok(())
            }
            let d = v
                .cast::<PyDict>()
                .map_err(|_| PyTypeError::new_err("policy_opt=: a dict of option names to values"))?;
            walk("", d, &mut r)?;
            continue;
        }
        if !raw::KEYS.iter().any(|(key, _)| *key == k) {
            let mut allowed: Vec<&str> = raw::KEYS.iter().map(|(key, _)| *key).collect();
            allowed.extend(["policy_opt", "strict"]);
            return Err(config_err(
                dlsched::error::ConfigError::new(
                    dlsched::error::ConfigErrorKind::UnknownName,
                    format!("unknown keyword `{k}`; allowed: {}", allowed.join(", ")),
                )
                .with_key(k.as_str()),
            ));
        }
        let val = value(&k, &v)?;
        r.insert(k, val);
    }
    Ok((r, strict))
}

/// The run spec of keyword arguments, with the defaults every builder of a
/// run uses (`docs/experiments.md`, "Defaults"); `strict=True` is
/// `backfill=False` (the command line's `--strict`).
fn run_spec(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<(dlsched::experiment::RunSpec, RawSpec)> {
    let (mut r, strict) = raw_spec(kwargs)?;
    if strict {
        if matches!(r.get("backfill"), Some(Value::Bool(true))) {
            return Err(config_err(
                dlsched::error::ConfigError::new(
                    dlsched::error::ConfigErrorKind::Conflict,
                    "strict=True and backfill=True contradict each other; give one",
                )
                .with_key("strict"),
            ));
        }
        r.insert("backfill".into(), Value::Bool(false));
    }
    let spec = raw::to_run_spec(&r, Origin::Keywords, None).map_err(config_err)?;
    Ok((spec, r))
}

/// The run's tables as CSV bytes, by file name, and its summary as JSON text.
fn tables<'py>(py: Python<'py>, report: &RunReport) -> PyResult<(String, Bound<'py, PyDict>)> {
    let d = PyDict::new(py);
    let io = |e: std::io::Error| err(e);
    let mut jobs = Vec::new();
    export::write_jobs_csv(&report.output, &mut jobs).map_err(io)?;
    d.set_item("jobs.csv", PyBytes::new(py, &jobs))?;
    d.set_item("timeline.csv", PyBytes::new(py, &export::timeline_csv(&report.output, &report.recording)))?;
    let mut vct = Vec::new();
    export::write_vc_timeline_csv(&report.output, &report.recording, &mut vct).map_err(io)?;
    d.set_item("vc_timeline.csv", PyBytes::new(py, &vct))?;
    d.set_item("vc_summary.csv", PyBytes::new(py, &export::vc_summary_csv(&report.vcs)))?;
    d.set_item("skipped.csv", PyBytes::new(py, &report.skipped_csv()))?;
    for (name, text) in &report.output.policy_files {
        d.set_item(*name, PyBytes::new(py, text.as_bytes()))?;
    }
    let summary = serde_json::to_string(&report.summary).map_err(err)?;
    Ok((summary, d))
}

/// Runs one simulation: `kwargs` are the experiment file's keys (`policy`
/// among them, a registered policy's name); `policy_object`, a Python object with the policy methods, replaces the spec's policy (whose
/// placement `View.place` then uses); `out`, a directory written as
/// `dlsched simulate --out` writes it. Returns (summary JSON, {file name:
/// CSV bytes}, notes: what the run could not use or had to assume, keys
/// spelt `key=`, for `dlsched.simulate` to raise as warnings). The GIL is released while the engine runs (and taken back
/// for each call into a Python policy).
#[pyfunction]
#[pyo3(signature = (policy_object=None, out=None, output_format=None, **kwargs))]
fn simulate<'py>(
    py: Python<'py>,
    policy_object: Option<Py<PyAny>>,
    out: Option<PathBuf>,
    output_format: Option<String>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<(String, Bound<'py, PyDict>, Vec<String>)> {
    let (spec, raw_spec) = run_spec(kwargs)?;
    let format = match output_format.as_deref() {
        None | Some("csv") => dlsched::experiment::OutputFormat::Csv,
        Some("parquet") => dlsched::experiment::OutputFormat::Parquet,
        Some("both") => dlsched::experiment::OutputFormat::Both,
        Some(f) => return Err(err(format!("output_format=: csv, parquet or both, not `{f}`"))),
    };
    if out.is_some() {
        format.check_supported().map_err(|e| err(format!("output_format=: {e}")))?;
    }
    let failure: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let report = match policy_object {
        None => py.detach(|| dlsched::experiment::run_one(&spec, |_| {})).map_err(run_err)?,
        Some(obj) => {
            let name = policy_name(py, &obj)?;
            let placement = spec.policy.placement();
            let failure2 = failure.clone();
            let result = py.detach(|| {
                run_one_with_policy(
                    &spec,
                    move |ctx| {
                        let p = PyPolicy {
                            obj,
                            name,
                            placement: placement.build_for(ctx.db.as_ref()),
                            rate: (ctx.rate_model)(),
                            waiting: BTreeSet::new(),
                            running: BTreeSet::new(),
                            failure: failure2,
                            scratch: Vec::new(),
                        };
                        Ok(Box::new(p) as Box<dyn Policy>)
                    },
                    |_| {},
                )
            });
            if let Some(e) = failure.lock().map_err(|_| err("a Python policy's error was lost"))?.take() {
                return Err(e);
            }
            result.map_err(run_err)?
        }
    };
    if let Some(dir) = &out {
        dlsched::experiment::write_run_dir_as(&report, dir, format).map_err(err)?;
    }
    let mut notes = dlsched::experiment::notes::option_notes(&raw_spec, Origin::Keywords);
    notes.extend(dlsched::experiment::notes::run_notes(&report, Origin::Keywords));
    let (summary, files) = tables(py, &report)?;
    Ok((summary, files, notes))
}

fn policy_name(py: Python<'_>, obj: &Py<PyAny>) -> PyResult<String> {
    let o = obj.bind(py);
    if o.hasattr("name")? {
        let n = o.getattr("name")?;
        if let Ok(s) = n.extract::<String>() {
            return Ok(s);
        }
    }
    Ok(o.get_type().name()?.to_string())
}

/// Runs a sweep: `path` an experiment file, or `toml` an experiment's text
/// (its relative paths taken from the working directory); `out` the sweep
/// directory (a temporary one, removed afterwards, when None). Returns the
/// bytes of its `summary.csv` and the distinct notes of the experiment and
/// its runs, as `dlsched sweep` prints them (keys spelt as in an experiment
/// file). Runs on `threads` of the engine's own threads,
/// with the GIL released.
#[pyfunction]
#[pyo3(signature = (path=None, toml=None, threads=2, out=None, shard=None, resume=false))]
fn sweep<'py>(
    py: Python<'py>,
    path: Option<PathBuf>,
    toml: Option<String>,
    threads: usize,
    out: Option<PathBuf>,
    shard: Option<String>,
    resume: bool,
) -> PyResult<(Bound<'py, PyBytes>, Vec<String>)> {
    if threads == 0 {
        return Err(err("threads=: at least 1"));
    }
    let shard = shard.map(shard_of).transpose()?;
    // An experiment given as text is written to a file in the working
    // directory (relative paths are read from there), removed once read.
    let (exp, _file) = match (path, toml) {
        (Some(p), None) => (dlsched::sweep::Experiment::load(&p).map_err(config_err)?, None),
        (None, Some(text)) => {
            let f = tempfile::Builder::new()
                .prefix(".dlsched-sweep-")
                .suffix(".toml")
                .tempfile_in(".")
                .map_err(|e| err(format!("cannot write the experiment in the working directory: {e}")))?;
            std::fs::write(f.path(), text).map_err(err)?;
            let exp = dlsched::sweep::Experiment::load(f.path()).map_err(config_err)?;
            (exp, Some(f))
        }
        _ => return Err(PyTypeError::new_err("give path= (an experiment file) or toml= (its text), not both")),
    };
    let tmp;
    let out = match out {
        Some(o) => o,
        None => {
            tmp = tempfile::tempdir().map_err(err)?;
            tmp.path().to_path_buf()
        }
    };
    let outcome =
        py.detach(|| dlsched::sweep::run_sweep(&exp, &out, threads, shard, resume, &|_, _| {})).map_err(err)?;
    if let Some((id, e)) = outcome.failed.first() {
        return Err(err(format!("{} of the sweep's runs failed; the first, {id}: {e}", outcome.failed.len())));
    }
    if let Some(e) = outcome.write_errors.first() {
        return Err(err(e));
    }
    let csv = std::fs::read(out.join("summary.csv"))
        .map_err(|e| err(format!("{}: {e}", out.join("summary.csv").display())))?;
    // The notes of the experiment as loaded (`dlsched sweep` prints them
    // first), then those of its runs, each once.
    let mut notes = exp.notes.clone();
    notes.extend(outcome.notes.into_iter().filter(|n| !exp.notes.contains(n)));
    Ok((PyBytes::new(py, &csv), notes))
}

/// A policy written in Python: the engine calls its methods (`decide`, and
/// `on_arrival`, `on_completion`, `on_timer` where it has them) with a
/// [`PyView`]. Its first exception stops its decisions (it answers Wait from
/// then on, so the run drains at once) and is raised by `simulate`.
struct PyPolicy {
    obj: Py<PyAny>,
    name: String,
    placement: Box<dyn Placement>,
    rate: Box<dyn RateModel>,
    /// Arrived jobs not running: pending, or suspended by a preemption.
    waiting: BTreeSet<JobId>,
    running: BTreeSet<JobId>,
    failure: Arc<Mutex<Option<PyErr>>>,
    scratch: Vec<GpuId>,
}

impl PyPolicy {
    fn failed(&self) -> bool {
        self.failure.lock().map_or(true, |f| f.is_some())
    }

    fn fail(&self, e: PyErr) {
        if let Ok(mut f) = self.failure.lock()
            && f.is_none()
        {
            *f = Some(e);
        }
    }

    /// Calls `method(*args, view)` on the Python object, if it has it.
    fn call(&mut self, method: &str, job: Option<JobId>, view: &View<'_>) -> Option<Py<PyAny>> {
        if self.failed() {
            return None;
        }
        let result = Python::attach(|py| -> PyResult<Option<Py<PyAny>>> {
            let obj = self.obj.bind(py);
            if method != "decide" && !obj.hasattr(method)? {
                return Ok(None);
            }
            let valid = Rc::new(Cell::new(true));
            // SAFETY: the pointers are read only while `valid` is true, which
            // it is only during this call, while `view`, `self.placement`,
            // `self.rate`, `self.waiting` and `self.running` are alive and
            // not used by anything else (PyView is unsendable: it never
            // leaves this thread).
            let pv = PyView {
                view: std::ptr::from_ref(view).cast::<View<'static>>(),
                placement: &mut self.placement as *mut Box<dyn Placement>,
                rate: &*self.rate as *const dyn RateModel,
                waiting: &self.waiting as *const BTreeSet<JobId>,
                running: &self.running as *const BTreeSet<JobId>,
                scratch: &mut self.scratch as *mut Vec<GpuId>,
                valid: valid.clone(),
            };
            let pv = Py::new(py, pv)?;
            let r = match job {
                Some(j) => obj.call_method1(method, (j.0, pv)),
                None => obj.call_method1(method, (pv,)),
            };
            valid.set(false);
            Ok(Some(r?.unbind()))
        });
        match result {
            Ok(r) => r,
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    fn decision(&mut self, d: Option<Py<PyAny>>) -> Decision {
        let Some(d) = d else { return Decision::Wait };
        let parsed = Python::attach(|py| parse_decision(d.bind(py)));
        match parsed {
            Ok(d) => {
                match &d {
                    Decision::Launch { job, .. } | Decision::Colocate { job, .. } => {
                        self.waiting.remove(job);
                        self.running.insert(*job);
                    }
                    Decision::Preempt { job } => {
                        self.running.remove(job);
                        self.waiting.insert(*job);
                    }
                    _ => {}
                }
                d
            }
            Err(e) => {
                self.fail(e);
                Decision::Wait
            }
        }
    }
}

const DECISION_FORMS: &str = "None (wait), dlsched.launch(job, gpus), dlsched.colocate(job, gpus), dlsched.preempt(job) or dlsched.wake_at(time_s)";

fn parse_decision(d: &Bound<'_, PyAny>) -> PyResult<Decision> {
    if d.is_none() {
        return Ok(Decision::Wait);
    }
    let bad = || PyTypeError::new_err(format!("decide() returned {d}; it returns {DECISION_FORMS}"));
    let t = d.cast::<PyTuple>().map_err(|_| bad())?;
    let kind: String = t.get_item(0).and_then(|k| k.extract()).map_err(|_| bad())?;
    let job = |i: usize| -> PyResult<JobId> { Ok(JobId(t.get_item(i)?.extract::<u32>()?)) };
    let gpus = |i: usize| -> PyResult<Vec<GpuId>> {
        Ok(t.get_item(i)?.extract::<Vec<u32>>()?.into_iter().map(GpuId).collect())
    };
    Ok(match (kind.as_str(), t.len()) {
        ("launch", 3) => Decision::Launch { job: job(1).map_err(|_| bad())?, gpus: gpus(2).map_err(|_| bad())? },
        ("colocate", 3) => Decision::Colocate { job: job(1).map_err(|_| bad())?, gpus: gpus(2).map_err(|_| bad())? },
        ("preempt", 2) => Decision::Preempt { job: job(1).map_err(|_| bad())? },
        ("wake_at", 2) => {
            let s: f64 = t.get_item(1)?.extract().map_err(|_| bad())?;
            if !s.is_finite() || s < 0.0 {
                return Err(bad());
            }
            Decision::WakeAt(SimTime::from_ms((s * 1000.0).round() as u64))
        }
        ("wait", 1) => Decision::Wait,
        _ => return Err(bad()),
    })
}

impl Policy for PyPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        self.waiting.insert(job);
        self.call("on_arrival", Some(job), view);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        self.running.remove(&job);
        self.call("on_completion", Some(job), view);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        let d = self.call("decide", None, view);
        self.decision(d)
    }

    fn on_timer(&mut self, view: &View<'_>) {
        self.call("on_timer", None, view);
    }
}

/// What a Python policy sees of the simulation during one call: read-only,
/// valid only inside the call that received it.
#[pyclass(unsendable, name = "View", module = "dlsched._core")]
struct PyView {
    view: *const View<'static>,
    placement: *mut Box<dyn Placement>,
    rate: *const dyn RateModel,
    waiting: *const BTreeSet<JobId>,
    running: *const BTreeSet<JobId>,
    scratch: *mut Vec<GpuId>,
    valid: Rc<Cell<bool>>,
}

impl PyView {
    fn view(&self) -> PyResult<&View<'static>> {
        if !self.valid.get() {
            return Err(PyRuntimeError::new_err(
                "this View was kept past the policy call that received it; a View is valid only during that call",
            ));
        }
        // SAFETY: see `PyPolicy::call`.
        Ok(unsafe { &*self.view })
    }

    fn jobs(&self) -> PyResult<&JobTable> {
        Ok(self.view()?.jobs)
    }

    fn cluster(&self) -> PyResult<&Cluster> {
        Ok(self.view()?.cluster)
    }

    fn job_id(&self, job: u32) -> PyResult<JobId> {
        if (job as usize) < self.jobs()?.len() {
            Ok(JobId(job))
        } else {
            Err(pyo3::exceptions::PyIndexError::new_err(format!("no job {job}: the run has {}", self.jobs()?.len())))
        }
    }
}

#[pymethods]
impl PyView {
    /// Simulated time, s.
    #[getter]
    fn now(&self) -> PyResult<f64> {
        Ok(self.view()?.now.as_ms() as f64 / 1000.0)
    }

    /// Arrived jobs that are not running (pending, or suspended by a
    /// preemption), by job id (submission order).
    fn waiting(&self) -> PyResult<Vec<u32>> {
        self.view()?;
        // SAFETY: see `PyPolicy::call`.
        Ok(unsafe { &*self.waiting }.iter().map(|j| j.0).collect())
    }

    /// How many jobs `waiting()` lists (without building the list).
    fn waiting_count(&self) -> PyResult<usize> {
        self.view()?;
        // SAFETY: see `PyPolicy::call`.
        Ok(unsafe { &*self.waiting }.len())
    }

    /// How many jobs `running()` lists.
    fn running_count(&self) -> PyResult<usize> {
        self.view()?;
        // SAFETY: see `PyPolicy::call`.
        Ok(unsafe { &*self.running }.len())
    }

    /// Running jobs, by job id.
    fn running(&self) -> PyResult<Vec<u32>> {
        self.view()?;
        // SAFETY: see `PyPolicy::call`.
        Ok(unsafe { &*self.running }.iter().map(|j| j.0).collect())
    }

    /// A job's spec and state as a dict: `name` (the trace's id), `submit_s`,
    /// `duration_s` (its trace run time at the recorded allocation: an
    /// oracle, as SJF uses it), `gpus`, `vc` (index), `model` (or None),
    /// `state` (not_arrived, pending, running, suspended or completed).
    fn job<'py>(&self, py: Python<'py>, job: u32) -> PyResult<Bound<'py, PyDict>> {
        let id = self.job_id(job)?;
        let jobs = self.jobs()?;
        let s = jobs.spec(id);
        let d = PyDict::new(py);
        d.set_item("id", job)?;
        d.set_item("name", s.name.as_str())?;
        d.set_item("submit_s", s.submit.as_ms() as f64 / 1000.0)?;
        d.set_item("duration_s", s.duration_ms as f64 / 1000.0)?;
        d.set_item("gpus", s.gpus)?;
        d.set_item("vc", s.vc.index())?;
        d.set_item("model", s.model())?;
        let state = match jobs.state(id) {
            JobState::NotArrived => "not_arrived",
            JobState::Pending => "pending",
            JobState::Running(_) => "running",
            JobState::Suspended(_) => "suspended",
            JobState::Completed(_) => "completed",
            JobState::Rejected(_) => "rejected",
        };
        d.set_item("state", state)?;
        Ok(d)
    }

    /// A job's trace run time, s (the oracle duration SJF sorts by).
    fn duration_s(&self, job: u32) -> PyResult<f64> {
        let id = self.job_id(job)?;
        Ok(self.jobs()?.spec(id).duration_ms as f64 / 1000.0)
    }

    /// A job's submission time, s.
    fn submit_s(&self, job: u32) -> PyResult<f64> {
        let id = self.job_id(job)?;
        Ok(self.jobs()?.spec(id).submit.as_ms() as f64 / 1000.0)
    }

    /// A job's requested GPUs.
    fn gpus(&self, job: u32) -> PyResult<u32> {
        let id = self.job_id(job)?;
        Ok(self.jobs()?.spec(id).gpus)
    }

    /// A job's VC partition (index; 0 when the run has no VCs).
    fn vc(&self, job: u32) -> PyResult<usize> {
        let id = self.job_id(job)?;
        Ok(self.jobs()?.spec(id).vc.index())
    }

    /// Free GPUs of each node, in node order.
    fn free_gpus_per_node(&self) -> PyResult<Vec<u32>> {
        let c = self.cluster()?;
        Ok((0..c.spec().nodes.len()).map(|n| c.node_free(dlsched::ids::NodeId(n as u32))).collect())
    }

    /// Free GPUs of the whole cluster.
    fn free_gpus(&self) -> PyResult<u64> {
        Ok(self.cluster()?.free_gpus())
    }

    /// GPUs of the whole cluster.
    fn total_gpus(&self) -> PyResult<u32> {
        Ok(self.cluster()?.total_gpus())
    }

    /// The GPUs the run's placement rule (the `placement` key, default
    /// consolidate) would give `job` now, or None when it cannot be placed
    /// now. Nothing changes: return `dlsched.launch(job, gpus)` to start it.
    fn place(&self, job: u32) -> PyResult<Option<Vec<u32>>> {
        let id = self.job_id(job)?;
        let view = self.view()?;
        // SAFETY: see `PyPolicy::call`.
        let (placement, scratch) = unsafe { (&mut *self.placement, &mut *self.scratch) };
        scratch.clear();
        let req = dlsched::policy::queue::request(view, id);
        Ok(placement.place_job(view, id, req, scratch).then(|| scratch.iter().map(|g| g.0).collect()))
    }

    /// A job's remaining work, s at its trace speed (rate 1.0, the unit
    /// `duration_s` is in; the SRTF policies rank by it): its duration before
    /// it starts, the work left now while it runs (the engine's settled
    /// remainder less its rate × the time since), what was left plus the
    /// checkpoint/restore cost once preempted, and 0 once completed. With
    /// `at_current_rate=True`, a running job's remaining run time instead: s
    /// until it ends if its rate stays as it is now (the work over its rate;
    /// co-tenants and placements change the rate). None for a work-defined
    /// (elastic) job, whose work is in its progress model's units, not time.
    #[pyo3(signature = (job, at_current_rate = false))]
    fn remaining_s(&self, job: u32, at_current_rate: bool) -> PyResult<Option<f64>> {
        let id = self.job_id(job)?;
        let view = self.view()?;
        let jobs = self.jobs()?;
        let spec = jobs.spec(id);
        if spec.elastic().is_some() {
            return Ok(None);
        }
        let ms = match jobs.state(id) {
            JobState::NotArrived | JobState::Pending | JobState::Rejected(_) => spec.duration_ms as f64,
            JobState::Running(r) => {
                let left = (r.remaining - r.rate * view.now.since(r.settled_at) as f64).max(0.0);
                if at_current_rate { if r.rate > 0.0 { left / r.rate } else { f64::INFINITY } } else { left }
            }
            JobState::Suspended(s) => s.remaining,
            JobState::Completed(_) => 0.0,
        };
        Ok(Some(ms / 1000.0))
    }

    /// A job's attained service, GPU-s: the GPUs it has held × the time it
    /// held them, summed over all its runs up to now (Tiresias's 2D attained
    /// service, GPUs × time run). Time suspended by a preemption or waiting
    /// holds no GPU and does not count; a resized work-defined job counts
    /// each GPU set for the time it held it. 0 before its first start.
    fn attained_s(&self, job: u32) -> PyResult<f64> {
        let id = self.job_id(job)?;
        let now = self.view()?.now;
        let gpu_ms = match self.jobs()?.state(id) {
            JobState::Running(r) => {
                let run = match &r.elastic {
                    Some(e) => e.gpu_ms_before + now.since(e.gpus_since) * r.gpus.len() as u64,
                    None => now.since(r.start) * r.gpus.len() as u64,
                };
                r.attained_gpu_ms + run
            }
            JobState::Suspended(s) => s.attained_gpu_ms,
            JobState::Completed(d) => d.attained_gpu_ms(),
            JobState::NotArrived | JobState::Pending | JobState::Rejected(_) => 0,
        };
        Ok(gpu_ms as f64 / 1000.0)
    }

    /// The ids of the GPUs a running job holds, in the engine's order (the
    /// order it was launched on); empty for a job that is not running.
    fn gpus_held(&self, job: u32) -> PyResult<Vec<u32>> {
        let id = self.job_id(job)?;
        Ok(match self.jobs()?.state(id) {
            JobState::Running(r) => r.gpus.iter().map(|g| g.0).collect(),
            _ => Vec::new(),
        })
    }

    /// The run's rate model's speed of `job` on `gpus` with what runs now
    /// (1.0 = its trace speed, at its recorded allocation).
    fn predicted_rate(&self, job: u32, gpus: Vec<u32>) -> PyResult<f64> {
        let id = self.job_id(job)?;
        let c = self.cluster()?;
        if let Some(g) = gpus.iter().find(|g| **g >= c.total_gpus()) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "no GPU {g}: the cluster has {}",
                c.total_gpus()
            )));
        }
        let gpus: Vec<GpuId> = gpus.into_iter().map(GpuId).collect();
        // SAFETY: see `PyPolicy::call`.
        let rate = unsafe { &*self.rate };
        Ok(rate.rate(self.jobs()?.spec(id), &gpus, c))
    }
}

/// The `dlsched` command line (`dlsched::cli`, the binary's), run in this
/// process on `argv` (the program's name first): what the `dlsched` command
/// the package installs (`dlsched._cli:main`) runs. Prints on this process's
/// standard output and error as the binary does and returns its exit status
/// (0, 1 when `compare` finds a difference, 2 on an error). The GIL is
/// released while the command runs; the signal handlers are left as they
/// are (`dlsched._cli` restores the default SIGINT and SIGPIPE actions, as a
/// native program has them, so that Ctrl-C stops the command).
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| {
        let code = dlsched::cli::main_args(dlsched::experiment::Registry::default(), argv);
        // A native program's standard output is flushed at its exit; this
        // one's process is Python's, which does not know Rust's buffer.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        code
    })
}

/// A sweep given from Python (`dlsched.sweep(policies=..., seeds=...)`)
/// laid out as `dlsched sweep` lays out an experiment file's: its runs are
/// expanded, named, ordered and sharded by `dlsched::sweep` (the file's
/// run ids, order and `--shard I/N` split), and it writes `sweep.json`,
/// keeps complete runs on resume and writes `failed.csv` and `summary.csv`
/// with the same functions. The runs themselves are run by the caller
/// (`dlsched.simulate(out=runs/<id>)`, in worker processes).
#[pyclass(name = "SweepPlan", module = "dlsched._core", frozen)]
struct PySweepPlan {
    question: String,
    swept: Vec<String>,
    /// Every run, in id order.
    runs: Vec<dlsched::sweep::Run>,
    shard: Option<dlsched::sweep::Shard>,
}

impl PySweepPlan {
    fn selected(&self) -> Vec<&dlsched::sweep::Run> {
        match self.shard {
            Some(s) => s.select(&self.runs),
            None => self.runs.iter().collect(),
        }
    }
}

/// `shard=`: `"I/N"`, or `"slurm"` for the Slurm job array task's share, from
/// this process's environment as `dlsched sweep --shard slurm` reads it.
fn shard_of(s: String) -> PyResult<dlsched::sweep::Shard> {
    use dlsched::sweep::Shard;
    if s != "slurm" {
        return s.parse::<Shard>().map_err(|e| err(format!("shard=: {e}, or \"slurm\"")));
    }
    let var = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    let (id, count, min, max) = (
        var("SLURM_ARRAY_TASK_ID"),
        var("SLURM_ARRAY_TASK_COUNT"),
        var("SLURM_ARRAY_TASK_MIN"),
        var("SLURM_ARRAY_TASK_MAX"),
    );
    Shard::from_slurm_array(&dlsched::sweep::SlurmArrayVars {
        task_id: id.as_deref(),
        task_count: count.as_deref(),
        task_min: min.as_deref(),
        task_max: max.as_deref(),
    })
    .map_err(|e| err(format!("shard=\"slurm\": {e}")))
}

/// A raw-spec value as a Python object.
fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
        Value::Float(x) => x.into_pyobject(py)?.into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
    })
}

#[pymethods]
impl PySweepPlan {
    /// `base`: the options every run shares (keyword arguments of
    /// `dlsched.simulate`, `policy_opt` a dict); `axes`: swept key to its
    /// values (a Python policy given by its label, a `str`); `shard`: `"I/N"`.
    /// The axes are taken by key name, as an experiment file's `[sweep]`.
    #[new]
    #[pyo3(signature = (question, base, axes, shard=None))]
    fn new(
        question: String,
        base: Option<&Bound<'_, PyDict>>,
        axes: &Bound<'_, PyDict>,
        shard: Option<String>,
    ) -> PyResult<Self> {
        let (mut base, strict) = raw_spec(base)?;
        if strict {
            base.insert("backfill".into(), Value::Bool(false));
        }
        let mut grid: std::collections::BTreeMap<String, Vec<Value>> = std::collections::BTreeMap::new();
        for (k, vals) in axes.iter() {
            let k: String = k.extract()?;
            if base.contains_key(&k) {
                return Err(config_err(
                    dlsched::error::ConfigError::new(
                        dlsched::error::ConfigErrorKind::Conflict,
                        format!("`{k}` is both an option every run shares and swept; give one"),
                    )
                    .with_key(k.as_str()),
                ));
            }
            let list = vals
                .try_iter()
                .map_err(|_| PyTypeError::new_err(format!("{k}: a list of values to sweep over")))?
                .map(|v| value(&k, &v?))
                .collect::<PyResult<Vec<Value>>>()?;
            grid.insert(k, list);
        }
        let axes: Vec<(String, Vec<Value>)> = grid.into_iter().collect();
        let mut runs = dlsched::sweep::expand(&base, &axes).map_err(err)?;
        runs.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(w) = runs.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(err(format!("two runs share the id {} (a value listed twice?)", w[0].id)));
        }
        let shard = shard.map(shard_of).transpose()?;
        Ok(PySweepPlan { question, swept: axes.into_iter().map(|a| a.0).collect(), runs, shard })
    }

    /// The swept keys, by name.
    #[getter]
    fn swept(&self) -> Vec<String> {
        self.swept.clone()
    }

    /// Every run's id in the sweep's own order (the grid's: the keys by
    /// name, the last varying fastest), as `summary.csv` lists them.
    fn all_run_ids(&self) -> Vec<String> {
        let mut runs: Vec<&dlsched::sweep::Run> = self.runs.iter().collect();
        runs.sort_by_key(|r| r.index);
        runs.into_iter().map(|r| r.id.clone()).collect()
    }

    /// This shard's runs (all of them without a shard), in id order: (run
    /// id, {swept key: value}).
    fn runs<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyDict>)>> {
        self.selected()
            .into_iter()
            .map(|r| {
                let d = PyDict::new(py);
                for k in &self.swept {
                    d.set_item(k, value_to_py(py, &r.params[k])?)?;
                }
                Ok((r.id.clone(), d))
            })
            .collect()
    }

    /// Starts the sweep directory `out`: `out/runs/` and `sweep.json`.
    fn begin(&self, out: PathBuf) -> PyResult<()> {
        std::fs::create_dir_all(out.join("runs")).map_err(|e| err(format!("{}: {e}", out.display())))?;
        let mut all: Vec<&dlsched::sweep::Run> = self.runs.iter().collect();
        all.sort_by_key(|r| r.index);
        let text = dlsched::sweep::sweep_json(None, &self.question, &self.swept, self.shard, &all, &self.selected())
            .map_err(err)?;
        dlsched::metrics::export::write_atomic(&out.join("sweep.json"), text.as_bytes())
            .map_err(|e| err(format!("{}: {e}", out.join("sweep.json").display())))
    }

    /// Whether `dlsched sweep --resume` would keep run `id` of the sweep
    /// directory `out`: "kept" (complete, its trace unchanged), "changed"
    /// (complete, but its trace file changed: rerun) or "incomplete".
    fn kept(&self, out: PathBuf, id: &str) -> &'static str {
        let dir = out.join("runs").join(id);
        match dlsched::sweep::kept_run(&dir, &|p| dlsched::trace::file_sha256(p).ok()) {
            dlsched::sweep::KeptRun::Complete(_) => "kept",
            dlsched::sweep::KeptRun::InputChanged => "changed",
            dlsched::sweep::KeptRun::Incomplete => "incomplete",
        }
    }

    /// Ends the sweep: `failed.csv` of `failed` ((run id, error)), and
    /// `summary.csv` (and `summary.parquet` with `output_format="parquet"` or
    /// `"both"`) of this shard's other runs, each read from its
    /// `out/runs/<id>/summary.json`, in the sweep's order. Returns the bytes
    /// of `summary.csv` and a message per file that could not be written.
    #[pyo3(signature = (out, failed, output_format=None))]
    fn finish<'py>(
        &self,
        py: Python<'py>,
        out: PathBuf,
        failed: Vec<(String, String)>,
        output_format: Option<String>,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<String>)> {
        let format = match output_format.as_deref() {
            None | Some("csv") => dlsched::experiment::OutputFormat::Csv,
            Some("parquet") => dlsched::experiment::OutputFormat::Parquet,
            Some("both") => dlsched::experiment::OutputFormat::Both,
            Some(f) => return Err(err(format!("output_format=: csv, parquet or both, not `{f}`"))),
        };
        let mut rows = Vec::new();
        for r in self.selected() {
            if failed.iter().any(|(id, _)| *id == r.id) {
                continue;
            }
            let file = out.join("runs").join(&r.id).join("summary.json");
            let text = std::fs::read_to_string(&file).map_err(|e| err(format!("{}: {e}", file.display())))?;
            let summary: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| err(format!("{}: {e}", file.display())))?;
            rows.push((r.clone(), summary));
        }
        let errors = dlsched::sweep::write_sweep_tables(&out, &self.swept, rows, &failed, format).map_err(err)?;
        let csv = std::fs::read(out.join("summary.csv")).unwrap_or_default();
        Ok((PyBytes::new(py, &csv), errors))
    }
}

/// The Rust half of the `dlsched` Python package.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_class::<PySweepPlan>()?;
    m.add_class::<PyView>()?;
    m.add_class::<env::PyEnv>()?;
    m.add_class::<env::PyVecEnv>()?;
    m.add("DlschedError", m.py().get_type::<DlschedError>())?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
