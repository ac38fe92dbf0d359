//! The run pipeline: build the cluster, the workload and the policy from a
//! [`RunSpec`], simulate and summarise ([`run_one`] and its variants), and
//! what a finished run holds ([`RunReport`], [`InputInfo`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::spec::{RateModelKind, RunSpec, WorkloadSource};
use crate::cluster::Cluster;
use crate::engine::{EngineConfig, Progress, RunOutput, Simulation};
use crate::error::{ConfigError, RunError, TraceError};
use crate::job::Skipped;
use crate::metrics::{self, Summary, VcSummary};
use crate::metrics::{Recorder, Recording};
use crate::policy::build::{Artefacts, BuildContext, Extensions};
use crate::policy::genie_family::GenieRun;
use crate::policy::placement::PlacementKind;
use crate::profile::db::ProfileDb;
use crate::trace::TraceRecord;
use crate::trace::{ColumnMap, load_trace_with};
use crate::workload::models::{assign_models, check_models, resolve_model_aliases};
use crate::workload::synthetic;

/// The reason `skipped.csv` and the summary's `jobs_skipped_by_reason` give
/// a malformed row left out under [`RunSpec::skip_malformed`].
pub const MALFORMED: &str = "malformed";

/// Facts about the input, for the manifest.
#[derive(Clone, Debug, Serialize)]
pub struct InputInfo {
    /// The trace file, if any.
    pub path: Option<PathBuf>,
    /// Format read (`synthetic` for generated jobs, `pollux-workload` for
    /// jobs drawn from a Philly job list, `genie-tasks` for GENIE's tasks).
    pub format: String,
    /// SHA-256 of the trace file.
    pub sha256: Option<String>,
    /// Wall-clock time of t = 0, for wall-clock traces.
    pub origin: Option<String>,
    /// Rows read.
    pub rows: usize,
    /// The trace header's columns that its format does not know (for a
    /// note; not in the manifest).
    #[serde(skip)]
    pub ignored_columns: Vec<String>,
    /// The malformed rows left out under [`RunSpec::skip_malformed`], by
    /// line (the manifest records how many, `malformed_rows`, when any).
    #[serde(rename = "malformed_rows", serialize_with = "count", skip_serializing_if = "Vec::is_empty")]
    pub malformed: Vec<crate::trace::MalformedRow>,
}

/// A list as its length.
fn count<S: serde::Serializer, T>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(v.len() as u64)
}

/// A finished run.
pub struct RunReport {
    /// What was run.
    pub spec: RunSpec,
    /// The input.
    pub input: InputInfo,
    /// The engine's output.
    pub output: RunOutput,
    /// What the run's recorder kept (busy GPU-time, timeline, sharing
    /// figures, decision timing).
    pub recording: Recording,
    /// Rows not simulated.
    pub skipped: Vec<Skipped>,
    /// The summary.
    pub summary: Summary,
    /// Per-VC summaries.
    pub vcs: Vec<VcSummary>,
    /// The model aliases the trace used ([`crate::profile::aliases`]) and
    /// on how many rows, in the alias table's order; empty when none.
    pub model_aliases: Vec<crate::profile::aliases::AliasUse>,
    /// Work-defined jobs with their own work (a `jobs-csv` `num_iteration`)
    /// whose trace row also gave a non-zero `duration`, which the run does
    /// not use (they run until their iterations are done): `simulate`
    /// notes the count.
    pub unused_durations: usize,
}

impl RunReport {
    /// The bytes of `skipped.csv`: every row not simulated, with its line
    /// and reason; under [`RunSpec::skip_malformed`] the malformed rows left
    /// out too, with two more columns, `field` and `detail`
    /// ([`crate::metrics::export::skipped_csv_with_malformed`]).
    pub fn skipped_csv(&self) -> Vec<u8> {
        if self.spec.skip_malformed {
            crate::metrics::export::skipped_csv_with_malformed(&self.skipped, &self.input.malformed)
        } else {
            crate::metrics::export::skipped_csv(&self.skipped)
        }
    }
}

/// Runs `spec`, calling `progress` now and then ([`RunBuilder`] with
/// nothing added).
///
/// # Errors
/// [`RunError`] for unreadable or malformed input, an invalid configuration,
/// an empty workload, or an invalid policy decision.
pub fn run_one(spec: &RunSpec, progress: impl FnMut(Progress)) -> Result<RunReport, RunError> {
    RunBuilder::new(spec).run(progress)
}

/// [`run_one_with_artefacts`] with every engine invariant checked after every
/// instant ([`crate::engine::Simulation::with_invariant_checks`]): a
/// violation ends the run with [`crate::error::SimError::Invariant`]. The
/// outputs of a run that passes are those of [`run_one_with_artefacts`]. For
/// fuzzing and tests; the check costs O(GPUs + jobs) per instant.
///
/// # Errors
/// As [`run_one`], and the first invariant violation.
pub fn run_one_checked(
    spec: &RunSpec,
    artefacts: &Artefacts,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    RunBuilder::new(spec).artefacts(artefacts).invariant_checks(true).run(progress)
}

/// [`run_one`] taking the files its policy reads (RIFLING tables, GENIE
/// models) and its profile databases from `artefacts` where it holds them
/// (read from disk otherwise, and not kept).
///
/// # Errors
/// As [`run_one`].
pub fn run_one_with_artefacts(
    spec: &RunSpec,
    artefacts: &Artefacts,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    RunBuilder::new(spec).artefacts(artefacts).run(progress)
}

/// [`run_one`] with a RIFLING policy driving `agent` (kept by the caller, e.g.
/// across training episodes) instead of a fresh or loaded one, reading its
/// files and profile databases through `artefacts` (one set for all the
/// episodes parses each database once).
///
/// # Errors
/// As [`run_one`].
pub fn run_one_with_agent(
    spec: &RunSpec,
    agent: Option<Arc<std::sync::Mutex<crate::policy::rifling::Agent>>>,
    artefacts: &Artefacts,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    let mut run = RunBuilder::new(spec).artefacts(artefacts);
    if let Some(agent) = agent {
        run = run.extension(agent);
    }
    run.run(progress)
}

/// Builds a policy for a run from its [`BuildContext`] (see
/// [`RunBuilder::policy`]).
pub type PolicyBuilder<'b> =
    Box<dyn FnOnce(&mut BuildContext<'_>) -> Result<Box<dyn crate::policy::Policy>, RunError> + 'b>;

/// [`run_one`] with the policy built by `build` instead of from
/// `spec.policy` (which still gives the placement jobs are admitted under
/// and the sharing limits): a policy defined outside the crate runs through
/// the same pipeline (workload, cluster, rate model, summary) as the
/// registered ones. `docs/writing-a-policy.md` shows one.
///
/// # Errors
/// As [`run_one`], and whatever `build` returns.
pub fn run_one_with_policy(
    spec: &RunSpec,
    build: impl FnOnce(&mut BuildContext<'_>) -> Result<Box<dyn crate::policy::Policy>, RunError>,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    RunBuilder::new(spec).policy(build).run(progress)
}

/// One run, built stage by stage from its [`RunSpec`]:
///
/// 1. **cluster**: the spec's cluster, with the policy's sharing limits;
/// 2. **workload**: the trace or generated jobs, or a policy family's own
///    workload (GENIE's moldable tasks, [`crate::policy::genie_family::task_workload`]);
/// 3. **models**: the rate model and profile database, the model and batch
///    of every job, its GPU memory; then admission on the empty cluster;
/// 4. **policy**: a [`BuildContext`] to which each policy family's stage
///    adds what its policies read ([`Extensions`]; GENIE's profiler
///    settings and fitted models), then the spec's policy (or the one
///    [`RunBuilder::policy`] builds);
/// 5. **engine**: the simulation, with the co-location model, checkpoint
///    model, horizon and task memory;
/// 6. **recorder**: the run observed, then summarised into a [`RunReport`].
///
/// What a caller adds beyond the spec goes in before [`RunBuilder::run`]:
/// an artefact set shared by many runs ([`RunBuilder::artefacts`]), state a
/// policy keeps across runs ([`RunBuilder::extension`]: a RIFLING agent
/// `Arc<Mutex<rifling::Agent>>` or an LDWP network `Arc<Mutex<ldwp::Dqn>>`
/// trained over episodes), a policy built outside the registry.
///
/// Two runs sharing one artefact set (the profile database parsed once),
/// the second with its invariants checked; a checked run that passes is the
/// unchecked one:
///
/// ```
/// use dlsched::cluster::ClusterPreset;
/// use dlsched::experiment::{Artefacts, ClusterChoice, RateModelKind, RunBuilder, RunSpec, WorkloadSource};
/// use dlsched::workload::synthetic::SyntheticSpec;
///
/// let workload = WorkloadSource::Synthetic(SyntheticSpec { jobs: 30, ..SyntheticSpec::default() });
/// let mut spec = RunSpec::new(workload, ClusterChoice::Preset { preset: ClusterPreset::Lab16 });
/// spec.rate_model = RateModelKind::Table; // speeds from the profile database
/// let shared = Artefacts::default();
/// let plain = RunBuilder::new(&spec).artefacts(&shared).run(|_| {})?;
/// let checked = RunBuilder::new(&spec).artefacts(&shared).invariant_checks(true).run(|_| {})?;
/// assert_eq!(plain.summary.jobs_completed, 30);
/// assert_eq!(plain.summary.jct_mean_s.to_bits(), checked.summary.jct_mean_s.to_bits());
/// # Ok::<(), dlsched::error::RunError>(())
/// ```
pub struct RunBuilder<'a> {
    spec: &'a RunSpec,
    artefacts: Cow<'a, Artefacts>,
    extensions: Extensions,
    policy: Option<PolicyBuilder<'a>>,
    checks: bool,
    records: Option<Vec<TraceRecord>>,
}

impl<'a> RunBuilder<'a> {
    /// A run of `spec`, its files read for it alone.
    pub fn new(spec: &'a RunSpec) -> Self {
        RunBuilder {
            spec,
            artefacts: Cow::Owned(Artefacts::default()),
            extensions: Extensions::default(),
            policy: None,
            checks: false,
            records: None,
        }
    }

    /// Replays `records` instead of the rows of the spec's trace (which must
    /// be a [`WorkloadSource::Trace`]; the manifest still names its file):
    /// a window of the trace's jobs that the caller cut from rows it loaded
    /// once (a learning environment's episodes, [`crate::experiment::env`]).
    /// The records go through the same stages as the file's rows (models,
    /// admission).
    pub fn records(mut self, records: Vec<TraceRecord>) -> Self {
        self.records = Some(records);
        self
    }

    /// Reads the files the run names (RIFLING tables, GENIE models, profile
    /// databases) through `artefacts`, where a sweep's runs share them.
    pub fn artefacts(mut self, artefacts: &'a Artefacts) -> Self {
        self.artefacts = Cow::Borrowed(artefacts);
        self
    }

    /// Hands `value` to the run's policy ([`BuildContext::extensions`]): state
    /// the caller keeps across runs, e.g. the `Arc<Mutex<rifling::Agent>>` a
    /// RIFLING policy then drives instead of a fresh or loaded one.
    pub fn extension<T: std::any::Any + Send>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Builds the policy with `build` instead of from the spec's policy
    /// (which still gives the placement jobs are admitted under and the
    /// sharing limits).
    pub fn policy(
        mut self,
        build: impl FnOnce(&mut BuildContext<'_>) -> Result<Box<dyn crate::policy::Policy>, RunError> + 'a,
    ) -> Self {
        self.policy = Some(Box::new(build));
        self
    }

    /// Checks every engine invariant after every instant
    /// ([`run_one_checked`]).
    pub fn invariant_checks(mut self, on: bool) -> Self {
        self.checks = on;
        self
    }

    /// Runs the stages, calling `progress` now and then.
    ///
    /// # Errors
    /// As [`run_one`].
    pub fn run(self, progress: impl FnMut(Progress)) -> Result<RunReport, RunError> {
        self.build()?.run(progress)
    }

    /// Runs the stages up to the engine and hands back the run ready to
    /// start: [`PreparedRun::run`] runs it to the end (what
    /// [`RunBuilder::run`] does), or a caller drives it instant by instant
    /// ([`PreparedRun::sim_mut`], a learning agent's environment) and then
    /// [`PreparedRun::finish`]es it.
    ///
    /// # Errors
    /// As [`run_one`], for the stages before the first instant.
    pub fn build(self) -> Result<PreparedRun, RunError> {
        let RunBuilder { spec, artefacts, extensions, policy, checks, records } = self;
        let artefacts = &*artefacts;
        spec.validate()?;
        let cluster = cluster_stage(spec)?;
        let mut extensions = extensions;
        let loaded = match (records, &spec.workload) {
            (None, _) => workload_stage(spec, &cluster, artefacts, &mut extensions)?,
            (Some(records), WorkloadSource::Trace { path, .. }) => {
                let input = InputInfo {
                    path: Some(path.clone()),
                    format: "trace-window".into(),
                    sha256: None,
                    origin: None,
                    rows: records.len(),
                    ignored_columns: Vec::new(),
                    malformed: Vec::new(),
                };
                Loaded { records, input, tasks: HashMap::new() }
            }
            (Some(_), _) => {
                return Err(ConfigError::other("RunBuilder::records: the spec's workload must be a trace").into());
            }
        };
        let Loaded { records, input, mut tasks } = loaded;
        let is_tasks = spec.workload.is_tasks();
        let models = models_stage(spec, &cluster, artefacts, records, is_tasks)?;
        let mut workload = admission_stage(spec, &cluster, artefacts, models.records, &input)?;
        if spec.policy.work_defined_only()
            && let Some(s) = workload.jobs.specs().iter().find(|s| s.elastic().is_none())
        {
            let from = input.path.as_ref().map_or(String::new(), |p| format!("{}: ", p.display()));
            return Err(ConfigError::new(
                crate::error::ConfigErrorKind::Conflict,
                format!(
                    "{from}policy `{}` schedules work-defined jobs only (an elastic-workload trace or --workload pollux), \
                     but job `{}`{} is defined by its duration",
                    spec.policy.kind(),
                    s.name,
                    if s.line > 0 { format!(" (line {})", s.line) } else { String::new() }
                ),
            )
            .with_key("policy")
            .into());
        }
        if spec.policy.deadline_jobs_only() {
            deadline_jobs_check(spec, &workload.jobs, &input)?;
        }
        workload.jobs.attach_tasks(&mut tasks);
        let rate_model = models.rate_model;
        let db = models.db;
        // A policy that predicts speeds (Themis's bids) builds its own copy.
        let policy_rates = || rate_model.build(db.as_ref());
        let mut ctx = BuildContext {
            cluster: &cluster,
            db: db.clone(),
            db_name: db_name(spec),
            seed: spec.seed,
            tasks: is_tasks,
            artefacts,
            extensions,
            rate_model: &policy_rates,
            predictor: spec.predictor,
        };
        let policy = match policy {
            Some(build) => build(&mut ctx)?,
            None => spec.policy.build(&mut ctx)?,
        };
        // The recorder reads the run's database for the SM-utilisation proxy.
        let mut recorder = Recorder::new(&cluster, &workload.jobs, models.share_metrics_useful, db.clone());
        // GENIE and RIFLING report what their decisions cost (timing.json);
        // timing a plain replay's decisions would cost a few percent.
        let policy = if spec.policy.time_decisions() { recorder.time_policy(policy) } else { policy };
        let progress_model = progress_model_stage(spec, &cluster, &workload.jobs, &input)?;
        let unused_durations = workload
            .jobs
            .specs()
            .iter()
            .filter(|s| s.elastic().is_some_and(|e| e.work.is_some()) && s.duration_ms > 0)
            .count();
        let sim = engine_stage(
            spec,
            cluster,
            workload.jobs,
            policy,
            rate_model,
            db,
            artefacts,
            is_tasks,
            checks,
            progress_model,
        )?;
        Ok(PreparedRun {
            sim,
            rest: RunParts {
                spec: spec.clone(),
                recorder,
                input,
                skipped: workload.skipped,
                rows_total: workload.rows_total,
                model_aliases: models.model_aliases,
                unused_durations,
            },
        })
    }
}

/// A run built by [`RunBuilder::build`], not yet started (or driven part of
/// the way by its caller).
pub struct PreparedRun {
    sim: Simulation,
    rest: RunParts,
}

/// What a run keeps beside its simulation until it is summarised.
struct RunParts {
    spec: RunSpec,
    recorder: Recorder,
    input: InputInfo,
    skipped: Vec<Skipped>,
    rows_total: usize,
    model_aliases: Vec<crate::profile::aliases::AliasUse>,
    unused_durations: usize,
}

impl PreparedRun {
    /// The run's spec.
    pub fn spec(&self) -> &RunSpec {
        &self.rest.spec
    }

    /// The simulation and the recorder that observes it, for a caller that
    /// drives the run ([`Simulation::open_instant`], [`Simulation::apply`],
    /// [`Simulation::close_instant`], each given the recorder as observer).
    pub fn sim_mut(&mut self) -> (&mut Simulation, &mut Recorder) {
        (&mut self.sim, &mut self.rest.recorder)
    }

    /// The simulation, read-only.
    pub fn sim(&self) -> &Simulation {
        &self.sim
    }

    /// An error of the run with the trace file it names, where there is one.
    pub fn in_file(&self, e: crate::error::SimError) -> crate::error::SimError {
        self.rest.in_file(e)
    }

    /// Runs the rest of the run and summarises it.
    ///
    /// # Errors
    /// As [`run_one`].
    pub fn run(self, progress: impl FnMut(Progress)) -> Result<RunReport, RunError> {
        let PreparedRun { sim, mut rest } = self;
        // An error of the run names the job's trace file and line.
        let output = sim.run_observed(&mut rest.recorder, progress).map_err(|e| rest.in_file(e))?;
        Ok(rest.summarise(output))
    }

    /// Ends a driven run where it is (after the caller's last
    /// [`Simulation::close_instant`]) and summarises it, as [`PreparedRun::run`]
    /// does at the end.
    ///
    /// # Errors
    /// [`crate::error::SimError::Unfinished`] when admitted jobs are left and
    /// the run does not allow it (as [`PreparedRun::run`]).
    pub fn finish(self) -> Result<RunReport, RunError> {
        let PreparedRun { sim, mut rest } = self;
        sim.check_end().map_err(|e| rest.in_file(e))?;
        let output = sim.finish_observed(&mut rest.recorder);
        Ok(rest.summarise(output))
    }
}

impl RunParts {
    /// An error of the run with the trace file it names, where there is one.
    fn in_file(&self, e: crate::error::SimError) -> crate::error::SimError {
        match &self.spec.workload {
            WorkloadSource::Trace { path, .. } => e.in_file(path),
            _ => e,
        }
    }

    /// A finished run's report: the recording and the summary.
    fn summarise(self, output: RunOutput) -> RunReport {
        let RunParts { spec, recorder, input, skipped, rows_total, model_aliases, unused_durations } = self;
        let recording = recorder.into_recording();
        let (mut summary, vcs) = metrics::summarize(&output, &recording, &skipped, rows_total);
        // Malformed rows left out of a replayed trace are rows read and not
        // simulated (a drawn workload's, GENIE's tasks or Pollux's jobs, are
        // not rows of the summary's count).
        if !input.malformed.is_empty() && matches!(spec.workload, WorkloadSource::Trace { .. }) {
            let n = input.malformed.len() as u64;
            summary.jobs_total += n;
            summary.jobs_skipped += n;
            *summary.jobs_skipped_by_reason.entry(MALFORMED.to_string()).or_insert(0) += n;
        }
        if summary.jobs_unfinished > 0 {
            summary.cut_off = spec.cut_off();
        }
        RunReport { spec, input, output, recording, skipped, summary, vcs, model_aliases, unused_durations }
    }
}

/// The cluster of a run of `spec` (validated), as the run would build it.
///
/// # Errors
/// An invalid spec, a node or VC file that cannot be read.
pub(crate) fn cluster_of(spec: &RunSpec) -> Result<Cluster, RunError> {
    spec.validate()?;
    cluster_stage(spec)
}

/// The name of the run's profile database for manifests.
fn db_name(spec: &RunSpec) -> String {
    spec.profiles.as_ref().map_or("builtin".to_string(), |d| d.display().to_string())
}

/// Stage 1: the cluster, with the sharing limits of the run's policy.
fn cluster_stage(spec: &RunSpec) -> Result<Cluster, RunError> {
    let mut cluster = Cluster::new(spec.cluster.spec()?)?;
    cluster.set_share_limits(spec.policy.share_limits())?;
    Ok(cluster)
}

/// What the workload stage read.
struct Loaded {
    /// One record per job or task, in trace order.
    records: Vec<TraceRecord>,
    /// Facts about the input, for the manifest.
    input: InputInfo,
    /// The moldable tasks by job name (empty unless the workload is tasks).
    tasks: HashMap<String, crate::job::TaskSpec>,
}

/// Stage 2: the workload's records (a trace, generated jobs, or GENIE's
/// moldable tasks, whose stage adds [`GenieRun`] to `extensions`).
fn workload_stage(
    spec: &RunSpec,
    cluster: &Cluster,
    artefacts: &Artefacts,
    extensions: &mut Extensions,
) -> Result<Loaded, RunError> {
    let loaded = match &spec.workload {
        WorkloadSource::Trace { path, format, columns } => {
            let t = load_trace_with(path, *format, columns, spec.row_errors())?;
            if spec.strict_input && !t.ignored_columns.is_empty() {
                return Err(TraceError::Format {
                    file: t.path.clone(),
                    message: format!(
                        "ignored columns: {} (not columns of the {} format); strict input (--strict-input, key \
                         `strict_input`) refuses a trace with columns the run does not read: remove them{}, or run \
                         without it",
                        t.ignored_columns.join(", "),
                        t.format.name(),
                        if t.format == crate::trace::TraceFormat::JobsCsv {
                            " or map them to fields (--columns)"
                        } else {
                            ""
                        }
                    ),
                }
                .into());
            }
            let input = InputInfo {
                path: Some(t.path.clone()),
                format: t.format.name().to_string(),
                sha256: Some(t.sha256.clone()),
                origin: t.origin.clone(),
                rows: t.records.len(),
                ignored_columns: t.ignored_columns,
                malformed: t.malformed,
            };
            Loaded { records: t.records, input, tasks: HashMap::new() }
        }
        WorkloadSource::Pollux { path, spec: p } => {
            let w = crate::workload::pollux::from_file_with(path, p, spec.seed, spec.row_errors())?;
            let input = InputInfo {
                path: Some(w.path),
                format: "pollux-workload".into(),
                sha256: Some(w.sha256),
                origin: None,
                rows: w.rows,
                ignored_columns: Vec::new(),
                malformed: w.malformed,
            };
            Loaded { records: w.records, input, tasks: HashMap::new() }
        }
        WorkloadSource::Synthetic(s) => {
            let max = cluster.partitions().iter().map(|p| p.gpus_total).max().unwrap_or(0);
            let max = s.max_job_gpus.map_or(max, |m| m.min(max));
            let recs = synthetic::generate(s, cluster.total_gpus(), max, spec.seed).map_err(ConfigError::other)?;
            let input = InputInfo {
                path: None,
                format: "synthetic".into(),
                sha256: None,
                origin: None,
                rows: recs.len(),
                ignored_columns: Vec::new(),
                malformed: Vec::new(),
            };
            Loaded { records: recs, input, tasks: HashMap::new() }
        }
        WorkloadSource::Genie(g) | WorkloadSource::TraceTasks { spec: g, .. } => {
            let db = artefacts.profiles().get(spec.profiles.as_deref())?;
            let profiler = crate::policy::genie::ProfilerConfig {
                truth: spec.rate_model.genie_truth(),
                batches: spec.profile_batches,
                ..Default::default()
            };
            let (trace, malformed) = match &spec.workload {
                WorkloadSource::TraceTasks { path, format, .. } => {
                    let t = load_trace_with(path, *format, &ColumnMap::default(), spec.row_errors())?;
                    (Some(t.records), t.malformed)
                }
                _ => (None, Vec::new()),
            };
            let crate::policy::genie_family::TaskWorkload { tasks, profiles } =
                crate::policy::genie_family::task_workload(
                    g,
                    trace.as_deref(),
                    cluster,
                    &db,
                    &db_name(spec),
                    profiler,
                    spec.policy.genie_models(),
                    spec.seed,
                    artefacts,
                )?;
            extensions.insert(GenieRun { profiler, profiles });
            let input = InputInfo {
                path: None,
                format: "genie-tasks".into(),
                sha256: None,
                origin: None,
                rows: tasks.len(),
                ignored_columns: Vec::new(),
                malformed,
            };
            let (records, specs): (Vec<TraceRecord>, Vec<_>) = tasks.into_iter().unzip();
            let tasks = specs.into_iter().enumerate().map(|(i, t)| (format!("t{i}"), t)).collect();
            Loaded { records, input, tasks }
        }
    };
    let is_tasks = spec.workload.is_tasks();
    if spec.policy.moldable() && !is_tasks {
        return Err(ConfigError::new(
            crate::error::ConfigErrorKind::Conflict,
            "GENIE-family and RIFLING policies schedule moldable tasks: use `--workload genie`",
        )
        .into());
    }
    // A queue policy that shares GPUs places a task as a job of unknown
    // memory (its memory depends on the GPU count, which only GENIE-family
    // policies choose), while the engine checks the task's memory on each
    // shared GPU: on GPUs of unequal memory the placement could pick one the
    // task does not fit (the generator draws batches that fit the first
    // node's GPUs), a policy error mid-run. Refused here instead.
    if is_tasks && !spec.policy.moldable() && spec.policy.placement().may_share() {
        let mems: std::collections::BTreeSet<u64> = cluster.spec().nodes.iter().map(|n| n.gpu_mem_mib).collect();
        if mems.len() > 1 {
            return Err(ConfigError::new(crate::error::ConfigErrorKind::Conflict, format!(
                "placement `{}` shares GPUs, and GENIE tasks (--workload genie) under a queue policy need GPUs of one \
                 memory size to share them; cluster `{}` has GPUs of {} MiB (use a non-sharing placement, a \
                 GENIE-family policy, or a cluster of one GPU memory size)",
                spec.policy.placement().name(),
                cluster.spec().name,
                mems.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            ))
            .into());
        }
    }
    Ok(loaded)
}

/// What the models stage settled.
struct Models {
    /// The records, tie-ordered, with models, batches and GPU memory filled in.
    records: Vec<TraceRecord>,
    /// The rate model the engine runs.
    rate_model: RateModelKind,
    /// The run's profile database, when it reads one.
    db: Option<Arc<ProfileDb>>,
    /// Other systems' model names the trace used.
    model_aliases: Vec<crate::profile::aliases::AliasUse>,
    /// Whether the sharing figures say something for this run.
    share_metrics_useful: bool,
}

/// Stage 3: the rate model and profile database, and what they give the
/// jobs (model names, models and batches drawn, GPU memory).
fn models_stage(
    spec: &RunSpec,
    cluster: &Cluster,
    artefacts: &Artefacts,
    records: Vec<TraceRecord>,
    is_tasks: bool,
) -> Result<Models, RunError> {
    // Moldable tasks need a performance model: trace speed would run them
    // equally fast on any number of GPUs.
    let rate_model =
        if is_tasks && spec.rate_model == RateModelKind::Trace { RateModelKind::Table } else { spec.rate_model };
    // The profile database, only when the run uses it (parsing the builtin
    // tables costs more than replaying a large trace at trace speed): a rate
    // model that reads it, or jobs with a model and batch, whose GPU memory
    // it gives.
    let has_models = records.iter().any(|r| r.model().is_some() && r.local_bsz().is_some());
    let db: Option<Arc<ProfileDb>> = match &spec.profiles {
        // Read once per directory for the artefact set, so a sweep's runs share it.
        Some(dir) => Some(artefacts.profiles().dir(dir)?),
        None if rate_model != RateModelKind::Trace || has_models => Some(artefacts.profiles().builtin()),
        None => None,
    };
    let mut records = records;
    spec.tie_order.order_records(&mut records);
    // Other systems' model names (Pollux, ElasticFlow, ...) become the database's.
    let model_aliases = match db.as_deref() {
        Some(db) if !is_tasks => resolve_model_aliases(db, &mut records),
        _ => Vec::new(),
    };
    // A model the database does not know is an error whatever the rate
    // model: at trace speed too (the builtin database is then read for this
    // check only, when no rate model or batch needs it), so that a typo is
    // never replayed as if the name were known.
    if !is_tasks {
        let in_file = |e: String| {
            ConfigError::other(match &spec.workload {
                WorkloadSource::Trace { path, .. } => format!("{}: {e}", path.display()),
                _ => e,
            })
        };
        match db.as_deref() {
            Some(db) => check_models(db, &records).map_err(in_file)?,
            None if records.iter().any(|r| r.model().is_some()) => {
                check_models(&artefacts.profiles().builtin(), &records).map_err(in_file)?;
            }
            None => {}
        }
    }
    let max_gpu_mem_mib = cluster.spec().nodes.iter().map(|n| n.gpu_mem_mib).max().unwrap_or(0);
    if let Some(db) = db.as_deref()
        && rate_model != RateModelKind::Trace
        && !is_tasks
    {
        let gpu_type = cluster.spec().nodes.first().map(|n| n.gpu_type.clone()).unwrap_or_default();
        assign_models(db, &mut records, &gpu_type, max_gpu_mem_mib, spec.seed).map_err(|e| {
            ConfigError::other(match &spec.workload {
                WorkloadSource::Trace { path, .. } => format!("{}: {e}", path.display()),
                _ => e,
            })
        })?;
    }
    // GPU memory per GPU of every job with a model and batch: measured when
    // the database has a memory table for the model, else the analytical
    // estimate; placements then use only GPUs with that much memory.
    // (Not for moldable tasks: their memory per GPU depends on the GPU count
    // the policy picks; the generator only draws batches that fit one GPU.)
    if let Some(db) = db.as_deref().filter(|_| !is_tasks) {
        for r in &mut records {
            if let (Some(m), Some(b)) = (r.model(), r.local_bsz()) {
                let mib = db.gpu_mem_mib(m, b).map(|mib| mib.ceil() as u64);
                r.extra_mut().gpu_mem_mib = mib;
            }
        }
    }
    // The sharing figures say something when jobs have a model or memory
    // figure, a guaranteed share, or a sharing placement; not in a plain replay.
    let share_metrics_useful = rate_model != RateModelKind::Trace
        || spec.policy.placement().may_share()
        || records.iter().any(|r| r.model().is_some() || r.gpu_mem_mib().is_some() || r.gpu_milli().is_some());
    Ok(Models { records, rate_model, db, model_aliases, share_metrics_useful })
}

/// Stage 3, end: admission on the empty cluster by the run's placement rule
/// (the memeff-pack rule reads the builtin database there); refuses a
/// workload of which no job can run.
fn admission_stage(
    spec: &RunSpec,
    cluster: &Cluster,
    artefacts: &Artefacts,
    records: Vec<TraceRecord>,
    input: &InputInfo,
) -> Result<crate::workload::admission::Workload, RunError> {
    let placement = spec.policy.placement();
    let admission_db = (placement == PlacementKind::MemeffPack).then(|| artefacts.profiles().builtin());
    let workload = crate::workload::admission::build_workload_with(
        records,
        cluster,
        placement.build_for(admission_db.as_ref()),
        spec.policy.admission_rule(),
    );
    if workload.jobs.is_empty() {
        // Name the trace file, and say so when it has no rows at all.
        let from = input.path.as_ref().map_or(String::new(), |p| format!("{}: ", p.display()));
        if workload.rows_total == 0 {
            let what = if input.path.is_some() {
                "the trace has no job rows (header only)"
            } else {
                "the workload has no jobs"
            };
            return Err(ConfigError::new(
                crate::error::ConfigErrorKind::EmptyWorkload,
                format!("{from}{what}: nothing to simulate"),
            )
            .into());
        }
        let reasons: Vec<String> = workload.skipped_by_reason().iter().map(|(r, n)| format!("{n} {r}")).collect();
        return Err(ConfigError::new(
            crate::error::ConfigErrorKind::EmptyWorkload,
            format!(
                "{from}no job of the {} rows can run on cluster `{}` (skipped: {})",
                workload.rows_total,
                cluster.spec().name,
                if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") }
            ),
        )
        .into());
    }
    Ok(workload)
}

/// Refuses, for a policy that schedules ElasticFlow jobs with deadlines only
/// ([`crate::policy::build::BuildPolicy::deadline_jobs_only`]), the first
/// job without its own work (`num_iteration`) or without a deadline: the
/// error names the trace file, line and column (as `--columns` maps it).
fn deadline_jobs_check(spec: &RunSpec, jobs: &crate::job::JobTable, input: &InputInfo) -> Result<(), RunError> {
    let columns = match &spec.workload {
        WorkloadSource::Trace { columns, .. } => columns.clone(),
        _ => ColumnMap::default(),
    };
    let kind = spec.policy.kind();
    for s in jobs.specs() {
        let (field, what) = if s.elastic().and_then(|e| e.work).is_none() {
            ("num_iteration", "is not an ElasticFlow job (no num_iteration: its work is not a number of iterations)")
        } else if s.deadline().is_none() {
            ("deadline", "has no deadline")
        } else {
            continue;
        };
        let column = columns.column(field).to_string();
        let message = format!(
            "job `{}` {what}; policy `{kind}` schedules ElasticFlow jobs with deadlines only (jobs-csv with \
             num_iteration and deadline)",
            s.name
        );
        return Err(match &input.path {
            Some(file) => TraceError::Field { file: file.clone(), line: s.line, column, message }.into(),
            None => ConfigError::new(crate::error::ConfigErrorKind::Conflict, message).with_key("policy").into(),
        });
    }
    Ok(())
}

/// Stage 4, end: the progress model of the run's work-defined jobs, `None`
/// when it has none. Jobs without work of their own (Pollux's and Sia's
/// workloads) progress by the application model `--elastic-model` chooses
/// ([`pollux_or_sia`]: by default Sia's per-GPU-type model on a cluster of
/// Sia's GPU types that are not all T4, else the Pollux model); jobs with their own
/// work (ElasticFlow's traces, `jobs-csv` `num_iteration`) by ElasticFlow's
/// model for the cluster's GPU type (T4 or A100, every node alike:
/// `--cluster pollux`, or `--nodes N --gpus-per-node G --gpu-type t4|a100`).
/// A run with both kinds is refused, and so is a job ElasticFlow's tables
/// cannot rate (an unknown model, a batch the tables lack, more GPUs than
/// measured): the error names the trace file, line and column. Policies
/// that read step times and gradient statistics (`pollux`, `optimus`) are
/// refused with ElasticFlow jobs: its tables give neither.
/// The application model of jobs without work of their own
/// ([`ElasticModel`](crate::profile::elastic::ElasticModel)): `auto` takes Sia's ([`crate::profile::sia::SiaModel`],
/// per GPU type, built from `Cluster::gpu_type_names`) when every GPU type of
/// the cluster is one Sia measured and not every one is T4, else the Pollux
/// model (T4 measurements on any cluster, as before: a cluster of other types
/// gets a note from `simulate`); `pollux` and `sia` force one.
///
/// # Errors
/// `sia` on a cluster with a GPU type Sia did not measure, naming it and the
/// known ones.
pub fn pollux_or_sia(
    choice: crate::profile::elastic::ElasticModel,
    cluster: &Cluster,
) -> Result<Box<dyn crate::job::ProgressModel>, String> {
    use crate::profile::elastic::ElasticModel;
    use crate::profile::sia::{SiaGpu, SiaModel};
    let names = cluster.gpu_type_names();
    let sia = match choice {
        ElasticModel::Pollux => false,
        ElasticModel::Sia => true,
        ElasticModel::Auto => {
            let types: Option<Vec<SiaGpu>> = names.iter().map(|n| SiaGpu::of_gpu_type(n)).collect();
            types.is_some_and(|t| t.iter().any(|&g| g != SiaGpu::T4))
        }
    };
    if sia {
        let model = SiaModel::for_gpu_types(names)
            .map_err(|e| format!("--elastic-model sia on cluster `{}`: {e}", cluster.spec().name))?;
        Ok(Box::new(model))
    } else {
        Ok(Box::new(crate::profile::pollux::PolluxApps::builtin()))
    }
}

fn progress_model_stage(
    spec: &RunSpec,
    cluster: &Cluster,
    jobs: &crate::job::JobTable,
    input: &InputInfo,
) -> Result<Option<Box<dyn crate::job::ProgressModel>>, RunError> {
    use crate::job::ProgressModel as _;
    use crate::profile::elasticflow::{EfField, EfGpu, ElasticFlowModel};
    if jobs.work_defined() == 0 {
        return Ok(None);
    }
    let from = input.path.as_ref().map_or(String::new(), |p| format!("{}: ", p.display()));
    let at = |s: &crate::job::JobSpec| if s.line > 0 { format!(" (line {})", s.line) } else { String::new() };
    let elastic = || jobs.specs().iter().filter_map(|s| s.elastic().map(|e| (s, e)));
    let own = elastic().find(|(_, e)| e.work.is_some());
    let target = elastic().find(|(_, e)| e.work.is_none());
    let Some((first, _)) = own else {
        // Work-defined jobs progress by the Pollux or Sia application model
        // (compiled in), parsed only for a run that has them.
        return pollux_or_sia(spec.elastic_model, cluster).map(Some).map_err(|message| {
            ConfigError::new(crate::error::ConfigErrorKind::Conflict, format!("{from}{message}"))
                .with_key("elastic_model")
                .into()
        });
    };
    if let Some((other, _)) = target {
        return Err(ConfigError::new(
            crate::error::ConfigErrorKind::Conflict,
            format!(
                "{from}job `{}`{} has its own work (num_iteration: ElasticFlow's model) and job `{}`{} the Pollux \
                 model's target for its application; a run has one progress model",
                first.name,
                at(first),
                other.name,
                at(other)
            ),
        )
        .into());
    }
    let types: std::collections::BTreeSet<&str> = cluster.spec().nodes.iter().map(|n| n.gpu_type.as_str()).collect();
    let gpu = match types.iter().map(|t| EfGpu::of_gpu_type(t)).collect::<Option<std::collections::BTreeSet<_>>>() {
        Some(g) if g.len() == 1 => g.into_iter().next().expect("one"),
        _ => {
            return Err(ConfigError::new(
                crate::error::ConfigErrorKind::Conflict,
                format!(
                    "{from}job `{}`{} is an ElasticFlow job (num_iteration), rated by ElasticFlow's T4 or A100 \
                     throughput tables, but cluster `{}` has GPUs of type {}: run it on T4s or A100s (e.g. \
                     `--cluster pollux`, or `--nodes N --gpus-per-node G --gpu-type t4|a100`)",
                    first.name,
                    at(first),
                    cluster.spec().name,
                    types.into_iter().collect::<Vec<_>>().join(", ")
                ),
            )
            .into());
        }
    };
    let model = ElasticFlowModel::builtin(gpu);
    let columns = match &spec.workload {
        WorkloadSource::Trace { columns, .. } => columns.clone(),
        _ => ColumnMap::default(),
    };
    for (s, e) in elastic() {
        if let Err((field, message)) = model.check_job(&e.app, e.tuned_bsz, e.tuned_gpus) {
            let column = columns
                .column(match field {
                    EfField::Model => "model",
                    EfField::Batch => "global_bsz",
                    EfField::Gpus => "gpu_num",
                })
                .to_string();
            let message = format!("job `{}`: {message}", s.name);
            return Err(match &input.path {
                Some(file) => TraceError::Field { file: file.clone(), line: s.line, column, message }.into(),
                None => ConfigError::other(message).into(),
            });
        }
    }
    // The policies for work-defined jobs only (pollux, optimus) model each
    // job's throughput and remaining work themselves from the model's step
    // times, gradient statistics and remaining steps, which ElasticFlow's
    // tables do not give: refused rather than run on a model they cannot read.
    let first_spec = first.elastic().expect("work-defined");
    let cfg = model.tuned_config(&first_spec.app, &[first_spec.tuned_gpus.max(1)], first_spec.tuned_bsz);
    if spec.policy.work_defined_only()
        && let Err(e) = model.step_times(&first_spec.app, &cfg)
    {
        return Err(ConfigError::new(
            crate::error::ConfigErrorKind::Conflict,
            format!(
                "{from}policy `{}` models each job's throughput from the progress model's step times and gradient \
                 statistics, and job `{}`{} is an ElasticFlow job (num_iteration) whose model gives none ({e}); \
                 run ElasticFlow jobs under a policy that launches jobs on their tuned GPUs (fifo, srtf, dlas, \
                 tiresias-tuned, ...)",
                spec.policy.kind(),
                first.name,
                at(first)
            ),
        )
        .with_key("policy")
        .into());
    }
    Ok(Some(Box::new(model)))
}

/// Stage 5: the simulation of `jobs` under `policy` on `cluster`, with the
/// run's rate model, co-location model (built at the first co-location),
/// checkpoint model, horizon and the memory of moldable tasks.
#[allow(clippy::too_many_arguments)]
fn engine_stage(
    spec: &RunSpec,
    cluster: Cluster,
    jobs: crate::job::JobTable,
    policy: Box<dyn crate::policy::Policy>,
    rate_model: RateModelKind,
    db: Option<Arc<ProfileDb>>,
    artefacts: &Artefacts,
    is_tasks: bool,
    checks: bool,
    progress_model: Option<Box<dyn crate::job::ProgressModel>>,
) -> Result<Simulation, RunError> {
    // The co-location model, from the run's database (else the builtin one,
    // parsed once for the artefact set); built at the first co-location, so
    // that a run that never shares (or shares jobs without models) reads no
    // database it does not otherwise need (parsing the builtin tables costs
    // more than a plain replay).
    let (coloc_db, profiles) = (db.clone(), artefacts.profiles().clone());
    let learned = spec.coloc_unmeasured == crate::profile::coloc::ColocUnmeasured::Learned;
    if learned && !cfg!(feature = "learned") {
        return Err(crate::error::FeatureDisabled::new("`coloc_unmeasured = learned`", "learned").into());
    }
    let interference = crate::profile::coloc::LazyInterference::new(move || {
        let db = coloc_db.clone().unwrap_or_else(|| profiles.builtin());
        let model = crate::profile::coloc::ProfileInterference::new(db.clone());
        // The learned model of the database, trained once for the artefact set
        // (never missing here: a build without it refused the run above).
        Box::new(match learned.then(|| profiles.learned_coloc(&db)) {
            Some(Ok(ncf)) => model.with_learned(ncf),
            _ => model,
        })
    });
    let sim = Simulation::new(
        cluster,
        jobs,
        policy,
        rate_model.build(db.as_ref()),
        EngineConfig { sample_interval_ms: spec.sample_interval_ms },
    )
    .with_interference(Box::new(interference))
    .with_checkpoint(spec.checkpoint)
    .with_elastic_timing(spec.elastic_timing)
    .with_invariant_checks(checks);
    // Without --rescale-delay, the progress model's per application, else 30 s.
    let sim = match spec.rescale_delay_ms {
        Some(ms) => sim.with_rescale_delay_ms(ms),
        None => sim,
    };
    let sim = match progress_model {
        Some(m) => sim.with_progress_model(m),
        None => sim,
    };
    let sim = match (spec.horizon_ms, spec.allow_unfinished) {
        (Some(h), _) => sim.with_horizon(crate::time::SimTime::from_ms(h)),
        (None, true) => sim.allow_unfinished(),
        (None, false) => sim,
    };
    // A moldable task that shares GPUs holds its memory at its per-GPU batch.
    Ok(match db.filter(|_| is_tasks) {
        Some(db) => sim.with_task_memory(Box::new(move |s, n| crate::profile::resources::task_gpu_mem_mib(&db, s, n))),
        None => sim,
    })
}

/// A run that needs a feature this build left out fails with
/// [`crate::error::FeatureDisabled`] naming it, and the kinds that need no such
/// feature still run (compiled only when one of these features is off:
/// `cargo test --lib --no-default-features`).
#[cfg(test)]
#[cfg(not(all(feature = "lp", feature = "kmeans", feature = "learned")))]
mod without_features {
    use super::*;
    use crate::cluster::ClusterPreset;
    use crate::error::FeatureDisabled;
    use crate::experiment::spec::{ClusterChoice, RateModelKind, WorkloadSource};
    use crate::policy::registry::PolicySpec;
    use crate::workload::synthetic::SyntheticSpec;

    /// 20 synthetic jobs on the LDWP testbed, table rates, under `policy`.
    fn spec(policy: PolicySpec) -> RunSpec {
        let workload = WorkloadSource::Synthetic(SyntheticSpec { jobs: 20, ..SyntheticSpec::default() });
        let mut s = RunSpec::new(workload, ClusterChoice::Preset { preset: ClusterPreset::LdwpTestbed });
        s.rate_model = RateModelKind::Table;
        s.policy = policy;
        s
    }

    fn refused(s: &RunSpec) -> FeatureDisabled {
        match run_one(s, |_| {}).err() {
            Some(RunError::Feature(f)) => f,
            other => panic!("expected a FeatureDisabled error, got {:?}", other.map(|e| e.to_string())),
        }
    }

    #[cfg(not(feature = "lp"))]
    #[test]
    fn gavel_needs_the_lp_feature_and_gavel_fifo_does_not() {
        use crate::policy::gavel::GavelOptions;
        let e = refused(&spec(PolicySpec::Gavel(GavelOptions::default())));
        assert_eq!(e.to_string(), "policy `gavel` needs dlsched built with the `lp` feature");
        let report = run_one(&spec(PolicySpec::GavelFifo(GavelOptions::default())), |_| {}).unwrap();
        assert_eq!(report.summary.jobs_total, 20);
        // Max-sum is solved without an LP solver (a flow).
        let report = run_one(&spec(PolicySpec::GavelMaxSum(GavelOptions::default())), |_| {}).unwrap();
        assert_eq!(report.summary.jobs_total, 20);
        assert_eq!(report.summary.jobs_completed, 20);
    }

    #[cfg(not(feature = "kmeans"))]
    #[test]
    fn learning_rifling_needs_the_kmeans_feature() {
        // Ten of GENIE's moldable tasks over 2 hours, on lab16.
        let tasks = crate::workload::genie::GenieWorkloadSpec {
            jobs_per_hour: 5.0,
            hours: 2.0,
            ect: Default::default(),
            tasks: Some(10),
            mix: Default::default(),
        };
        let mut s = RunSpec::new(WorkloadSource::Genie(tasks), ClusterChoice::Preset { preset: ClusterPreset::Lab16 });
        s.policy = PolicySpec::Rifling(Default::default());
        let e = refused(&s);
        assert_eq!((e.what.as_str(), e.feature), ("policy `rifling`", "kmeans"));
        // The random placement (as the frozen agent) uses no k-means: the 10 tasks all run.
        s.policy = PolicySpec::RandomPlacement(Default::default());
        let summary = run_one(&s, |_| {}).unwrap().summary;
        assert_eq!((summary.jobs_total, summary.jobs_completed), (10, 10));
    }

    #[cfg(not(feature = "learned"))]
    #[test]
    fn ldwp_and_the_learned_coloc_model_need_the_learned_feature() {
        let e = refused(&spec(PolicySpec::Ldwp(Default::default())));
        assert_eq!(e.to_string(), "policy `ldwp` needs dlsched built with the `learned` feature");
        let e = refused(&spec(PolicySpec::LdwpFrozen(Default::default())));
        assert_eq!(e.what, "policy `ldwp-frozen`");
        let mut s = spec(PolicySpec::default());
        s.coloc_unmeasured = crate::profile::coloc::ColocUnmeasured::Learned;
        assert_eq!(
            refused(&s).to_string(),
            "`coloc_unmeasured = learned` needs dlsched built with the `learned` feature"
        );
    }
}
