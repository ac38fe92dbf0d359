//! One run from plain data: build the cluster, the workload and the policy,
//! simulate, summarise, and write the run directory.
//!
//! A [`RunSpec`] is filled one way: the command line and a sweep file both
//! fill a flat raw spec (one key table, [`raw::KEYS`]) and
//! [`raw::to_run_spec`] turns it into a validated spec; `manifest.json`
//! holds that spec in full (`spec`), and [`RunSpec::from_manifest`] reads it
//! back to rerun the run byte for byte.

pub mod output;
pub mod plot;
pub mod raw;
pub mod sweep;

pub use output::{OUTPUT_FILES, PLOT_FILES, check_run_dir, clear_run_dir, run_dir_files, write_run_dir};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, ClusterPreset, ClusterSpec, load_vc_file};
use crate::engine::{CheckpointModel, EngineConfig, Progress, RunOutput, Simulation};
use crate::error::{ConfigError, RunError};
use crate::job::Skipped;
use crate::metrics::{self, Summary, VcSummary};
use crate::metrics::{Recorder, Recording};
use crate::policy::genie::GenieProfiles;
use crate::policy::placement::PlacementKind;
use crate::policy::registry::PolicySpec;
use crate::profile::db::ProfileDb;
use crate::profile::genie::GenieModel;
use crate::profile::model::TableModel;
use crate::profile::rate::ProfileRate;
use crate::profile::{RateModel, TraceSpeed};
use crate::trace::TraceRecord;
use crate::trace::tie_order::TieOrder;
use crate::trace::{ColumnMap, TraceFormat, load_trace};
use crate::workload::build_workload;
use crate::workload::genie::GenieWorkloadSpec;
use crate::workload::synthetic::{self, SyntheticSpec};

/// Where the jobs come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum WorkloadSource {
    /// A trace file.
    Trace {
        /// The file.
        path: PathBuf,
        /// Its format (`auto` detects).
        format: TraceFormat,
        /// Column names for `jobs-csv`.
        columns: ColumnMap,
    },
    /// The seeded synthetic generator.
    Synthetic(SyntheticSpec),
    /// GENIE's QoS workload of moldable tasks ([`crate::workload::genie`]).
    Genie(GenieWorkloadSpec),
    /// A trace's jobs as moldable tasks ([`crate::workload::genie::from_trace`]):
    /// its arrival pattern and durations, GENIE's task types.
    TraceTasks {
        /// The trace file.
        path: PathBuf,
        /// Its format (`auto` detects).
        format: TraceFormat,
        /// Density (jobs kept = jobs_per_hour × hours), window and ECT basis.
        spec: GenieWorkloadSpec,
    },
}

pub use crate::policy::registry::{
    Artefacts, genie_profiles, load_genie_profiles, load_rifling_agent, load_rifling_table,
};

/// GPU types a uniform cluster may have, with the memory of one GPU, MiB (the
/// vendors' data sheets: K80 24 GB per board = 12 GB per GK210 GPU; P100 16
/// GB; V100 16 GB (the 32 GB model as `v100-32g`); T4 16 GB; A100 40 GB (80
/// GB as `a100-80g`); RTX 2080 Ti 11 GB; Quadro RTX 6000 24 GB). The names
/// match the profile database's GPU types.
pub const GPU_TYPE_MEMORY: [(&str, u64); 9] = [
    ("k80", 12 * 1024),
    ("p100", 16 * 1024),
    ("v100", 16 * 1024),
    ("v100-32g", 32 * 1024),
    ("t4", 16 * 1024),
    ("a100", 40 * 1024),
    ("a100-80g", 80 * 1024),
    ("rtx2080ti", 11 * 1024),
    ("quadro6000", 24 * 1024),
];

/// Memory of one GPU of a known type, MiB (case-insensitive).
pub fn gpu_type_mem_mib(gpu_type: &str) -> Option<u64> {
    let t = gpu_type.to_ascii_lowercase();
    GPU_TYPE_MEMORY.iter().find(|g| g.0 == t).map(|g| g.1)
}

/// Which cluster to simulate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum ClusterChoice {
    /// A named preset.
    Preset {
        /// The preset.
        #[serde(serialize_with = "ser_preset", deserialize_with = "de_preset")]
        preset: ClusterPreset,
    },
    /// `nodes` × `gpus_per_node` identical GPUs, one partition: type
    /// `gpu_type` (memory per [`gpu_type_mem_mib`]), or `generic` with 16 GiB.
    Uniform {
        /// Nodes.
        nodes: u32,
        /// GPUs per node.
        gpus_per_node: u32,
        /// GPU type, if not `generic`.
        #[serde(skip_serializing_if = "Option::is_none")]
        gpu_type: Option<String>,
    },
    /// VC partitions from a file (see [`load_vc_file`]); GPUs of type `generic`, 16 GiB.
    VcFile {
        /// The file.
        path: PathBuf,
    },
    /// A heterogeneous cluster from an Alibaba PAI 2023 node list (see
    /// [`crate::cluster::load_nodes_file`]), one partition.
    NodesFile {
        /// The file.
        path: PathBuf,
    },
}

fn ser_preset<S: serde::Serializer>(p: &ClusterPreset, s: S) -> Result<S::Ok, S::Error> {
    use clap::ValueEnum;
    s.serialize_str(p.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default().as_str())
}

fn de_preset<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ClusterPreset, D::Error> {
    use clap::ValueEnum;
    let name = String::deserialize(d)?;
    ClusterPreset::from_str(&name, false)
        .map_err(|_| serde::de::Error::custom(format!("unknown cluster preset `{name}`")))
}

impl ClusterChoice {
    /// The cluster spec.
    ///
    /// # Errors
    /// A malformed VC file or an invalid size.
    pub fn spec(&self) -> Result<ClusterSpec, RunError> {
        let spec = match self {
            ClusterChoice::Preset { preset } => preset.spec(),
            ClusterChoice::Uniform { nodes, gpus_per_node, gpu_type } => {
                let gpus = u64::from(*nodes) * u64::from(*gpus_per_node);
                if *nodes as usize > crate::cluster::MAX_NODES || gpus > crate::cluster::MAX_GPUS {
                    return Err(ConfigError(format!(
                        "{nodes} nodes × {gpus_per_node} GPUs is too large: at most {} nodes and {} GPUs",
                        crate::cluster::MAX_NODES,
                        crate::cluster::MAX_GPUS
                    ))
                    .into());
                }
                let (ty, mem) = match gpu_type {
                    None => ("generic".to_string(), 16 * 1024),
                    Some(t) => (
                        t.clone(),
                        gpu_type_mem_mib(t).ok_or_else(|| {
                            ConfigError(format!(
                                "unknown GPU type `{t}`; known: {}",
                                GPU_TYPE_MEMORY.iter().map(|g| g.0).collect::<Vec<_>>().join(", ")
                            ))
                        })?,
                    ),
                };
                let name = match gpu_type {
                    None => format!("{nodes}x{gpus_per_node}"),
                    Some(t) => format!("{nodes}x{gpus_per_node}-{t}"),
                };
                ClusterSpec::uniform(&name, *nodes, *gpus_per_node, &ty, mem)
            }
            ClusterChoice::VcFile { path } => load_vc_file(path, "generic", 16 * 1024)?,
            ClusterChoice::NodesFile { path } => crate::cluster::load_nodes_file(path)?.spec,
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// How a running job's speed is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RateModelKind {
    /// Every job runs exactly its trace duration, wherever it is placed.
    Trace,
    /// Profile database, table interpolation: a job placed other than its
    /// recorded allocation runs at the measured iteration-time ratio.
    Table,
    /// Profile database, GENIE's fitted prediction model.
    Genie,
}

impl RateModelKind {
    /// The rate model over `db` (the builtin database when `None`; trace
    /// speed reads no database).
    fn build(self, db: Option<&Arc<ProfileDb>>) -> Box<dyn RateModel> {
        let db = || db.cloned().unwrap_or_else(|| Arc::new(ProfileDb::builtin()));
        match self {
            RateModelKind::Trace => Box::new(TraceSpeed),
            RateModelKind::Table => Box::new(ProfileRate::new(Box::new(TableModel::new(db())), "profile-table")),
            RateModelKind::Genie => Box::new(ProfileRate::new(Box::new(GenieModel::new(db())), "profile-genie")),
        }
    }
}

/// Gives every job without a model or batch one drawn from the profile
/// database, on the `workload.model_mix` stream: a model uniformly among those
/// measured on `gpu_type` (all measured models if none is), then a per-GPU
/// batch uniformly among the batches measured for that model on `gpu_type`
/// (on its best-covered GPU type when `gpu_type` is not measured).
///
/// Only batches whose GPU memory ([`ProfileDb::gpu_mem_mib`], MiB) is at most
/// `max_gpu_mem_mib` (the largest GPU of the cluster) are drawn, and only
/// models with such a batch; a model the trace names with no fitting batch
/// draws among all its batches (the job is then skipped for memory).
///
/// # Errors
/// A message naming the first job whose model the database does not know.
pub fn assign_models(
    db: &ProfileDb,
    records: &mut [TraceRecord],
    gpu_type: &str,
    max_gpu_mem_mib: u64,
    seed: u64,
) -> Result<(), String> {
    use rand::seq::SliceRandom;
    let table = TableModel::new(db);
    let gpu_type = gpu_type.to_ascii_lowercase();
    let mut on_type: Vec<&str> =
        db.throughput.iter().filter(|r| r.gpu_type == gpu_type).map(|r| r.model.as_str()).collect();
    on_type.sort_unstable();
    on_type.dedup();
    let models = if on_type.is_empty() { table.measured_models() } else { on_type };
    let fits = |m: &str, b: u32| db.gpu_mem_mib(m, b).is_none_or(|mib| mib.ceil() <= max_gpu_mem_mib as f64);
    if let Some(r) =
        records.iter().find(|r| r.model.as_deref().is_some_and(|m| !db.models.iter().any(|i| i.model == m)))
    {
        return Err(format!(
            "line {}, column `model`: job `{}` names model `{}`, which the profile database does not know; `dlsched profile show --list` lists the names",
            r.line,
            r.job_id,
            r.model.as_deref().unwrap_or_default()
        ));
    }
    let batches_for = |m: &str| {
        let (gpu, _, _) = table.resolve_gpu(m, &gpu_type);
        let on = table.measured_batches_on(m, &gpu);
        let all = if on.is_empty() { table.measured_batches(m) } else { on };
        let fitting: Vec<u32> = all.iter().copied().filter(|&b| fits(m, b)).collect();
        if fitting.is_empty() { all } else { fitting }
    };
    let fitting_models: Vec<&str> =
        models.iter().copied().filter(|m| batches_for(m).iter().any(|&b| fits(m, b))).collect();
    let models = if fitting_models.is_empty() { models } else { fitting_models };
    if models.is_empty() {
        return Ok(());
    }
    let mut rng = crate::rng::stream(seed, "workload.model_mix");
    for r in records.iter_mut().filter(|r| r.model.is_none() || r.local_bsz.is_none()) {
        if r.model.is_none() {
            let i = rand::Rng::gen_range(&mut rng, 0..models.len());
            r.model = Some(models[i].to_string());
        }
        if r.local_bsz.is_none() {
            let pool = batches_for(r.model.as_deref().unwrap_or_default());
            r.local_bsz = pool.choose(&mut rng).copied();
        }
    }
    Ok(())
}

/// Everything that defines a run; plain data, so sweeps can build runs
/// anywhere, and what `manifest.json` records (`spec`) to rerun it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The jobs.
    pub workload: WorkloadSource,
    /// The cluster.
    pub cluster: ClusterChoice,
    /// The policy and its options (sharing limits included, where the
    /// policy's placement shares GPUs).
    pub policy: PolicySpec,
    /// Master seed of every random stream.
    pub seed: u64,
    /// Timeline sampling interval, ms (0: none).
    pub sample_interval_ms: u64,
    /// How job speed is decided.
    pub rate_model: RateModelKind,
    /// A profile database directory to use instead of the builtin one (see
    /// `dlsched profile import`); its optional `memory.csv` turns on the GPU
    /// memory check.
    pub profiles: Option<PathBuf>,
    /// The order of jobs submitted at the same instant (default: trace order;
    /// left out of manifests when default).
    #[serde(default, skip_serializing_if = "TieOrder::is_trace")]
    pub tie_order: TieOrder,
    /// The checkpoint/restore overhead charged at each preemption (default
    /// none; left out of manifests when default, so a run without
    /// preemption records the spec it always did). Only preemptive policies
    /// (`srtf`) preempt; see [`CheckpointModel`] for the models and sources.
    #[serde(default, skip_serializing_if = "CheckpointModel::is_none")]
    pub checkpoint: CheckpointModel,
}

/// The command line's defaults of a run, in one place: seed 1, timeline
/// samples every 600 s, trace speed, the builtin profile database, trace
/// tie order (the policy's defaults are its options struct's `Default`).
pub const DEFAULT_SEED: u64 = 1;
/// Default timeline sampling interval, s.
pub const DEFAULT_SAMPLE_INTERVAL_S: u64 = 600;

impl RunSpec {
    /// A run of `workload` on `cluster` with every other setting at its
    /// command-line default: strict FIFO with consolidated placement
    /// ([`PolicySpec::default`]), seed [`DEFAULT_SEED`], timeline samples
    /// every [`DEFAULT_SAMPLE_INTERVAL_S`] s, trace speed, the builtin
    /// profile database, trace tie order, no checkpoint overhead.
    pub fn new(workload: WorkloadSource, cluster: ClusterChoice) -> Self {
        RunSpec {
            workload,
            cluster,
            policy: PolicySpec::default(),
            seed: DEFAULT_SEED,
            sample_interval_ms: DEFAULT_SAMPLE_INTERVAL_S * 1000,
            rate_model: RateModelKind::Trace,
            profiles: None,
            tie_order: TieOrder::Trace,
            checkpoint: CheckpointModel::None,
        }
    }

    /// Checks what can be checked without reading a file: the policy's
    /// options ([`PolicySpec::validate`]) and the sampling interval.
    ///
    /// # Errors
    /// A message naming the option at fault.
    pub fn validate(&self) -> Result<(), String> {
        self.policy.validate()?;
        crate::bounds::sample_interval_ms(self.sample_interval_ms / 1000)
            .map_err(|e| format!("--sample-interval {e}"))?;
        Ok(())
    }

    /// The spec a run directory's `manifest.json` recorded (its `spec`
    /// field), validated.
    ///
    /// # Errors
    /// A message naming the file: unreadable, not JSON, written by a
    /// dlsched without `spec` (before 0.1's run specs), or a spec that does
    /// not parse or validate.
    pub fn from_manifest(path: &Path) -> Result<RunSpec, String> {
        let text = crate::io::read_text(path).map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON (line {}, column {}): {e}", path.display(), e.line(), e.column()))?;
        let Some(spec) = v.get("spec") else {
            let version = v.get("dlsched_version").and_then(serde_json::Value::as_str).unwrap_or("unknown");
            return Err(format!(
                "{}: this manifest (dlsched {version}) has no `spec` field: it was written before manifests recorded the full run spec, so it cannot be rerun; rerun the original command instead",
                path.display()
            ));
        };
        let spec: RunSpec =
            serde_json::from_value(spec.clone()).map_err(|e| format!("{}: `spec`: {e}", path.display()))?;
        spec.validate().map_err(|e| format!("{}: `spec`: {e}", path.display()))?;
        Ok(spec)
    }
}

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
}

/// Runs `spec`, calling `progress` now and then.
///
/// # Errors
/// [`RunError`] for unreadable or malformed input, an invalid configuration,
/// an empty workload, or an invalid policy decision.
pub fn run_one(spec: &RunSpec, progress: impl FnMut(Progress)) -> Result<RunReport, RunError> {
    run_inner(spec, None, None, &Artefacts::default(), progress)
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
    run_inner(spec, None, None, artefacts, progress)
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
    run_inner(spec, agent, None, artefacts, progress)
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
    run_inner(spec, None, Some(Box::new(build)), &Artefacts::default(), progress)
}

fn run_inner(
    spec: &RunSpec,
    agent: Option<std::sync::Arc<std::sync::Mutex<crate::policy::rifling::Agent>>>,
    custom: Option<PolicyBuilder<'_>>,
    artefacts: &Artefacts,
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
            let recs = synthetic::generate(s, cluster.total_gpus(), max, spec.seed).map_err(ConfigError)?;
            let input =
                InputInfo { path: None, format: "synthetic".into(), sha256: None, origin: None, rows: recs.len() };
            (recs, input)
        }
        WorkloadSource::Genie(g) | WorkloadSource::TraceTasks { spec: g, .. } => {
            let db = artefacts.profiles().get(spec.profiles.as_deref())?;
            let db = &*db;
            let node = cluster.spec().nodes.first().cloned().ok_or_else(|| ConfigError("empty cluster".into()))?;
            let mut tasks = match &spec.workload {
                WorkloadSource::TraceTasks { path, format, .. } => {
                    let t = load_trace(path, *format, &ColumnMap::default())?;
                    let p = cluster.partition(crate::ids::VcId(0));
                    crate::workload::genie::from_trace(
                        &t.records,
                        g,
                        db,
                        &node.gpu_type,
                        node.gpu_mem_mib,
                        p.gpus_total,
                        p.max_node_gpus,
                        spec.seed,
                    )
                }
                _ => crate::workload::genie::generate(g, db, &node.gpu_type, node.gpu_mem_mib, spec.seed),
            }
            .map_err(ConfigError)?;
            if g.ect == crate::workload::genie::EctBasis::Predicted {
                // The paper's ECT: a multiple of the predicted single-GPU
                // latency, from the run's fitted models (the ones a GENIE
                // policy of this run uses), for every policy alike.
                let profiles =
                    genie_profiles(spec.policy.genie_models(), &cluster, db, &db_name, spec.seed, artefacts)?;
                for (rec, t) in &mut tasks {
                    let p = profiles.for_kind(&t.kind, rec.model.as_deref().unwrap_or(""), t.inference, db);
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
    // Moldable tasks need a performance model: trace speed would run them
    // equally fast on any number of GPUs.
    let rate_model =
        if is_tasks && spec.rate_model == RateModelKind::Trace { RateModelKind::Table } else { spec.rate_model };
    // The profile database, only when the run uses it (parsing the builtin
    // tables costs more than replaying a large trace at trace speed): a rate
    // model that reads it, or jobs with a model and batch, whose GPU memory
    // it gives.
    let has_models = records.iter().any(|r| r.model.is_some() && r.local_bsz.is_some());
    let db: Option<Arc<ProfileDb>> = match &spec.profiles {
        // Read once per directory for the artefact set, so a sweep's runs share it.
        Some(dir) => Some(artefacts.profiles().dir(dir)?),
        None if rate_model != RateModelKind::Trace || has_models => Some(artefacts.profiles().builtin()),
        None => None,
    };
    let mut records = records;
    spec.tie_order.order_records(&mut records);
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
            if let (Some(m), Some(b)) = (r.model.as_deref(), r.local_bsz) {
                r.gpu_mem_mib = db.gpu_mem_mib(m, b).map(|mib| mib.ceil() as u64);
            }
        }
    }
    // The sharing figures say something when jobs have a model or memory
    // figure, a guaranteed share, or a sharing placement; not in a plain replay.
    let share_metrics_useful = rate_model != RateModelKind::Trace
        || spec.policy.placement().may_share()
        || records.iter().any(|r| r.model.is_some() || r.gpu_mem_mib.is_some() || r.gpu_milli.is_some());
    // Admission places on the empty cluster by the run's rule; the
    // memory-efficiency rule reads the builtin database there.
    let placement = spec.policy.placement();
    let admission_db = (placement == PlacementKind::MemoryEfficiency).then(|| artefacts.profiles().builtin());
    let mut workload = build_workload(records, &cluster, placement.build_for(admission_db.as_ref()));
    workload.jobs.attach_tasks(&mut genie_tasks);
    if workload.jobs.is_empty() {
        let reasons: Vec<String> = workload.skipped_by_reason().iter().map(|(r, n)| format!("{n} {r}")).collect();
        return Err(ConfigError(format!(
            "no job of the {} rows can run on cluster `{}` (skipped: {})",
            workload.rows_total,
            cluster.spec().name,
            if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") }
        ))
        .into());
    }
    let mut ctx = crate::policy::registry::BuildContext {
        cluster: &cluster,
        db: db.clone(),
        db_name,
        seed: spec.seed,
        tasks: is_tasks,
        artefacts,
        agent,
        genie_profiles: run_profiles.take(),
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
    let interference = crate::profile::coloc::LazyInterference::new(move || {
        Box::new(crate::profile::coloc::ProfileInterference::new(
            coloc_db.clone().unwrap_or_else(|| profiles.builtin()),
        ))
    });
    let sim = Simulation::new(
        cluster,
        workload.jobs,
        policy,
        rate_model.build(db.as_ref()),
        EngineConfig { sample_interval_ms: spec.sample_interval_ms },
    )
    .with_interference(Box::new(interference))
    .with_checkpoint(spec.checkpoint);
    // An error of the run names the job's trace file and line.
    let output = sim.run_observed(&mut recorder, progress).map_err(|e| match &spec.workload {
        WorkloadSource::Trace { path, .. } => e.in_file(path),
        _ => e,
    })?;
    let recording = recorder.into_recording();
    let (summary, vcs) = metrics::summarize(&output, &recording, &workload.skipped, workload.rows_total);
    Ok(RunReport { spec: spec.clone(), input, output, recording, skipped: workload.skipped, summary, vcs })
}
