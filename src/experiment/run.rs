//! The run pipeline: build the cluster, the workload and the policy from a
//! [`RunSpec`], simulate and summarise ([`run_one`] and its variants), and
//! what a finished run holds ([`RunReport`], [`InputInfo`]).

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::spec::{RateModelKind, RunSpec, WorkloadSource};
use crate::cluster::Cluster;
use crate::engine::{EngineConfig, Progress, RunOutput, Simulation};
use crate::error::{ConfigError, RunError};
use crate::job::Skipped;
use crate::metrics::{self, Summary, VcSummary};
use crate::metrics::{Recorder, Recording};
use crate::policy::genie::GenieProfiles;
use crate::policy::placement::PlacementKind;
use crate::policy::registry::{Artefacts, genie_profiles};
use crate::profile::db::ProfileDb;
use crate::trace::TraceRecord;
use crate::trace::{ColumnMap, load_trace};
use crate::workload::models::{assign_models, resolve_model_aliases};
use crate::workload::synthetic;

/// Facts about the input, for the manifest.
#[derive(Clone, Debug, Serialize)]
pub struct InputInfo {
    /// The trace file, if any.
    pub path: Option<PathBuf>,
    /// Format read (`synthetic` for generated jobs).
    pub format: String,
    /// SHA-256 of the trace file.
    pub sha256: Option<String>,
    /// Wall-clock time of t = 0, for wall-clock traces.
    pub origin: Option<String>,
    /// Rows read.
    pub rows: usize,
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
}

/// Runs `spec`, calling `progress` now and then.
///
/// # Errors
/// [`RunError`] for unreadable or malformed input, an invalid configuration,
/// an empty workload, or an invalid policy decision.
pub fn run_one(spec: &RunSpec, progress: impl FnMut(Progress)) -> Result<RunReport, RunError> {
    run_inner(spec, None, None, &Artefacts::default(), false, progress)
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
    run_inner(spec, None, None, artefacts, true, progress)
}

/// [`run_one`] taking the RIFLING table and GENIE models from `artefacts`
/// where it holds them (read from disk otherwise, and not kept).
///
/// # Errors
/// As [`run_one`].
pub fn run_one_with_artefacts(
    spec: &RunSpec,
    artefacts: &Artefacts,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    run_inner(spec, None, None, artefacts, false, progress)
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
    agent: Option<std::sync::Arc<std::sync::Mutex<crate::policy::rifling::Agent>>>,
    artefacts: &Artefacts,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    run_inner(spec, agent, None, artefacts, false, progress)
}

/// Builds a policy for a run from its [`crate::policy::registry::BuildContext`] (see
/// [`run_one_with_policy`]).
pub type PolicyBuilder<'b> = Box<
    dyn FnOnce(&mut crate::policy::registry::BuildContext<'_>) -> Result<Box<dyn crate::policy::Policy>, RunError> + 'b,
>;

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
    build: impl FnOnce(&mut crate::policy::registry::BuildContext<'_>) -> Result<Box<dyn crate::policy::Policy>, RunError>,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    run_inner(spec, None, Some(Box::new(build)), &Artefacts::default(), false, progress)
}

fn run_inner(
    spec: &RunSpec,
    agent: Option<std::sync::Arc<std::sync::Mutex<crate::policy::rifling::Agent>>>,
    custom: Option<PolicyBuilder<'_>>,
    artefacts: &Artefacts,
    checks: bool,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    spec.validate().map_err(ConfigError)?;
    let mut cluster = Cluster::new(spec.cluster.spec()?)?;
    cluster.set_share_limits(spec.policy.share_limits())?;
    let db_name = spec.profiles.as_ref().map_or("builtin".to_string(), |d| d.display().to_string());
    let mut genie_tasks: std::collections::HashMap<String, crate::job::TaskSpec> = Default::default();
    let mut run_profiles: Option<GenieProfiles> = None;
    let (records, input) = match &spec.workload {
        WorkloadSource::Trace { path, format, columns } => {
            let t = load_trace(path, *format, columns)?;
            let input = InputInfo {
                path: Some(t.path.clone()),
                format: t.format.name().to_string(),
                sha256: Some(t.sha256.clone()),
                origin: t.origin.clone(),
                rows: t.records.len(),
            };
            (t.records, input)
        }
        WorkloadSource::Synthetic(s) => {
            let max = cluster.partitions().iter().map(|p| p.gpus_total).max().unwrap_or(0);
            let max = s.max_job_gpus.map_or(max, |m| m.min(max));
            let recs = synthetic::generate(s, cluster.total_gpus(), max, spec.seed).map_err(ConfigError)?;
            let input =
                InputInfo { path: None, format: "synthetic".into(), sha256: None, origin: None, rows: recs.len() };
            (recs, input)
        }
        WorkloadSource::Genie(g) | WorkloadSource::TraceTasks { spec: g, .. } => {
            let db = artefacts.profiles().get(spec.profiles.as_deref())?;
            let db = &*db;
            let node = cluster.spec().nodes.first().cloned().ok_or_else(|| ConfigError("empty cluster".into()))?;
            let genie_truth = spec.rate_model.genie_truth();
            if genie_truth == crate::profile::genie::GenieTruth::GenieK80
                && !node.gpu_type.eq_ignore_ascii_case(crate::profile::genie::K80)
            {
                return Err(ConfigError(format!(
                    "rate model `genie-k80` is the K80 ground truth of GENIE's task types; cluster `{}` has {} GPUs",
                    cluster.spec().name,
                    node.gpu_type
                ))
                .into());
            }
            let truth = crate::profile::genie::GroundTruth::with(db, &node.gpu_type, genie_truth);
            let mut tasks = match &spec.workload {
                WorkloadSource::TraceTasks { path, format, .. } => {
                    let t = load_trace(path, *format, &ColumnMap::default())?;
                    let p = cluster.partition(crate::ids::VcId(0));
                    crate::workload::genie::from_trace_with(
                        &t.records,
                        g,
                        db,
                        &truth,
                        node.gpu_mem_mib,
                        p.gpus_total,
                        p.max_node_gpus,
                        spec.seed,
                    )
                }
                _ => crate::workload::genie::generate_with(g, db, &truth, node.gpu_mem_mib, spec.seed),
            }
            .map_err(ConfigError)?;
            if g.ect == crate::workload::genie::EctBasis::Predicted {
                // The paper's ECT: a multiple of the predicted single-GPU
                // latency, from the run's fitted models (the ones a GENIE
                // policy of this run uses), for every policy alike.
                let profiles = genie_profiles(
                    spec.policy.genie_models(),
                    &cluster,
                    db,
                    &db_name,
                    spec.seed,
                    crate::policy::genie::ProfilerConfig {
                        truth: genie_truth,
                        batches: spec.profile_batches,
                        ..Default::default()
                    },
                    artefacts,
                )?;
                for (rec, t) in &mut tasks {
                    let p = profiles.for_kind(&t.kind, rec.model().unwrap_or(""), t.inference, db);
                    if let Some(lat) = p.and_then(|p| p.latency_ms(t, 1, 1)) {
                        t.deadline =
                            crate::time::SimTime::from_ms(rec.submit_ms + t.qos.ect_factor() * lat.ceil() as u64);
                    }
                }
                run_profiles = Some(profiles);
            }
            let input =
                InputInfo { path: None, format: "genie-tasks".into(), sha256: None, origin: None, rows: tasks.len() };
            let (recs, specs): (Vec<TraceRecord>, Vec<_>) = tasks.into_iter().unzip();
            genie_tasks = specs.into_iter().enumerate().map(|(i, t)| (format!("t{i}"), t)).collect();
            (recs, input)
        }
    };
    let is_tasks = matches!(spec.workload, WorkloadSource::Genie(_) | WorkloadSource::TraceTasks { .. });
    if spec.policy.moldable() && !is_tasks {
        return Err(ConfigError(
            "GENIE-family and RIFLING policies schedule moldable tasks: use `--workload genie`".into(),
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
            return Err(ConfigError(format!(
                "placement `{}` shares GPUs, and GENIE tasks (--workload genie) under a queue policy need GPUs of one                  memory size to share them; cluster `{}` has GPUs of {} MiB (use a non-sharing placement, a                  GENIE-family policy, or a cluster of one GPU memory size)",
                spec.policy.placement().name(),
                cluster.spec().name,
                mems.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            ))
            .into());
        }
    }
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
    let max_gpu_mem_mib = cluster.spec().nodes.iter().map(|n| n.gpu_mem_mib).max().unwrap_or(0);
    if let Some(db) = db.as_deref()
        && rate_model != RateModelKind::Trace
        && !is_tasks
    {
        let gpu_type = cluster.spec().nodes.first().map(|n| n.gpu_type.clone()).unwrap_or_default();
        assign_models(db, &mut records, &gpu_type, max_gpu_mem_mib, spec.seed).map_err(|e| {
            ConfigError(match &spec.workload {
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
    // Admission places on the empty cluster by the run's rule; the
    // memeff-pack rule reads the builtin database there.
    let placement = spec.policy.placement();
    let admission_db = (placement == PlacementKind::MemeffPack).then(|| artefacts.profiles().builtin());
    let mut workload = crate::workload::admission::build_workload_with(
        records,
        &cluster,
        placement.build_for(admission_db.as_ref()),
        spec.policy.admission_rule(),
    );
    workload.jobs.attach_tasks(&mut genie_tasks);
    if workload.jobs.is_empty() {
        // Name the trace file, and say so when it has no rows at all.
        let from = input.path.as_ref().map_or(String::new(), |p| format!("{}: ", p.display()));
        if workload.rows_total == 0 {
            let what = if input.path.is_some() {
                "the trace has no job rows (header only)"
            } else {
                "the workload has no jobs"
            };
            return Err(ConfigError(format!("{from}{what}: nothing to simulate")).into());
        }
        let reasons: Vec<String> = workload.skipped_by_reason().iter().map(|(r, n)| format!("{n} {r}")).collect();
        return Err(ConfigError(format!(
            "{from}no job of the {} rows can run on cluster `{}` (skipped: {})",
            workload.rows_total,
            cluster.spec().name,
            if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") }
        ))
        .into());
    }
    // A policy that predicts speeds (Themis's bids) builds its own copy.
    let policy_rates = || rate_model.build(db.as_ref());
    let mut ctx = crate::policy::registry::BuildContext {
        cluster: &cluster,
        db: db.clone(),
        db_name,
        seed: spec.seed,
        tasks: is_tasks,
        artefacts,
        agent,
        genie_profiles: run_profiles.take(),
        genie_truth: spec.rate_model.genie_truth(),
        rate_model: &policy_rates,
        predictor: spec.predictor,
        genie_batches: spec.profile_batches,
    };
    let policy = match custom {
        Some(build) => build(&mut ctx)?,
        None => spec.policy.build(&mut ctx)?,
    };
    // The recorder reads the run's database for the SM-utilisation proxy.
    let mut recorder = Recorder::new(&cluster, &workload.jobs, share_metrics_useful, db.clone());
    // GENIE and RIFLING report what their decisions cost (timing.json);
    // timing a plain replay's decisions would cost a few percent.
    let policy = if spec.policy.time_decisions() { recorder.time_policy(policy) } else { policy };
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
        workload.jobs,
        policy,
        rate_model.build(db.as_ref()),
        EngineConfig { sample_interval_ms: spec.sample_interval_ms },
    )
    .with_interference(Box::new(interference))
    .with_checkpoint(spec.checkpoint)
    .with_invariant_checks(checks);
    let sim = match (spec.horizon_ms, spec.allow_unfinished) {
        (Some(h), _) => sim.with_horizon(crate::time::SimTime::from_ms(h)),
        (None, true) => sim.allow_unfinished(),
        (None, false) => sim,
    };
    // A moldable task that shares GPUs holds its memory at its per-GPU batch.
    let sim = match db.clone().filter(|_| is_tasks) {
        Some(db) => sim.with_task_memory(Box::new(move |s, n| crate::profile::resources::task_gpu_mem_mib(&db, s, n))),
        None => sim,
    };
    // An error of the run names the job's trace file and line.
    let output = sim.run_observed(&mut recorder, progress).map_err(|e| match &spec.workload {
        WorkloadSource::Trace { path, .. } => e.in_file(path),
        _ => e,
    })?;
    let recording = recorder.into_recording();
    let (mut summary, vcs) = metrics::summarize(&output, &recording, &workload.skipped, workload.rows_total);
    if summary.jobs_unfinished > 0 {
        summary.cut_off = spec.cut_off();
    }
    Ok(RunReport {
        spec: spec.clone(),
        input,
        output,
        recording,
        skipped: workload.skipped,
        summary,
        vcs,
        model_aliases,
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
