//! One run from plain data: build the cluster, the workload and the policy,
//! simulate, summarise, and write the run directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cluster::{Cluster, ClusterPreset, ClusterSpec, ShareLimits, load_vc_file};
use crate::engine::{EngineConfig, Progress, RunOutput, Simulation};
use crate::error::{ConfigError, RunError};
use crate::job::Skipped;
use crate::metrics::{self, Summary, VcSummary, export};
use crate::metrics::{Recorder, Recording};
use crate::policy::config::PolicyConfig;
use crate::policy::genie::{GenieOptions, GeniePolicy, GenieProfiles};
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
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

/// A GENIE-family policy and where its fitted models come from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenieRun {
    /// Which policy, theta, backfill.
    pub options: GenieOptions,
    /// Fitted models saved by `dlsched genie-profile`; `None` profiles at the
    /// start of the run (seeded by the run's seed).
    pub models: Option<PathBuf>,
}

/// A RIFLING policy (or the random-placement baseline) and its agent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RiflingRun {
    /// Online, frozen or random.
    pub mode: crate::policy::rifling::RiflingMode,
    /// The agent's parameters (a loaded table keeps its own).
    pub params: crate::policy::rifling::RiflingParams,
    /// A Q-table saved by `dlsched rifling-train`: the frozen policy's table,
    /// or an online agent's starting point.
    pub table: Option<PathBuf>,
}

/// Reads an agent saved by `dlsched rifling-train`.
///
/// # Errors
/// A [`TraceError`](crate::error::TraceError) naming the file when it cannot be read or parsed.
pub fn load_rifling_agent(path: &Path) -> Result<crate::policy::rifling::Agent, crate::error::TraceError> {
    load_rifling_table(path).map(|(a, _)| a)
}

/// [`load_rifling_agent`] with the cluster named in the file's manifest, after
/// checking the table: parameters in range, centroids finite and ascending
/// (at most `k` of them), every Q row `actions` long and finite.
///
/// # Errors
/// A [`TraceError`](crate::error::TraceError) naming the file and what is wrong.
pub fn load_rifling_table(
    path: &Path,
) -> Result<(crate::policy::rifling::Agent, Option<String>), crate::error::TraceError> {
    let text = crate::io::read_text(path)?;
    #[derive(serde::Deserialize)]
    struct Manifest {
        cluster: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Saved {
        agent: crate::policy::rifling::Agent,
        manifest: Option<Manifest>,
    }
    let bad = |message: String| crate::error::TraceError::Format { file: path.to_path_buf(), message };
    let s = serde_json::from_str::<Saved>(&text)
        .map_err(|e| bad(format!("not a RIFLING table (line {}, column {}): {e}", e.line(), e.column())))?;
    let a = s.agent;
    a.params.validate().map_err(|e| bad(format!("parameters: {e}")))?;
    if a.centroids.len() > a.params.k
        || a.centroids.iter().any(|c| !c.is_finite())
        || !a.centroids.is_sorted_by(|x, y| x <= y)
    {
        return Err(bad(format!(
            "centroids must be at most k = {} finite values in ascending order, got {:?}",
            a.params.k, a.centroids
        )));
    }
    if let Some((state, row)) = a.q.iter().find(|(_, r)| r.len() != a.actions || r.iter().any(|v| !v.is_finite())) {
        return Err(bad(format!(
            "Q row `{state}` must hold {} finite values, one per action (it has {})",
            a.actions,
            row.len()
        )));
    }
    Ok((a, s.manifest.and_then(|m| m.cluster)))
}

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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ClusterChoice {
    /// A named preset.
    Preset {
        /// The preset.
        #[serde(serialize_with = "ser_preset")]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
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
    fn build(self, db: Option<&'static ProfileDb>) -> Box<dyn RateModel> {
        let db = || db.unwrap_or_else(ProfileDb::builtin);
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

/// Everything that defines a run; plain data, so sweeps can build runs anywhere.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSpec {
    /// The jobs.
    pub workload: WorkloadSource,
    /// The cluster.
    pub cluster: ClusterChoice,
    /// The policy.
    pub policy: PolicyConfig,
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
    /// GPU-sharing limits (tenant cap, memory headroom), used by the sharing placements.
    pub share: ShareLimits,
    /// A GENIE-family policy instead of `policy` (which then only gives the
    /// placement for nothing: GENIE places tasks itself).
    pub genie: Option<GenieRun>,
    /// A RIFLING-family policy (moldable tasks) instead of `policy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rifling: Option<RiflingRun>,
    /// The order of jobs submitted at the same instant (default: trace order;
    /// left out of manifests and run ids when default).
    #[serde(skip_serializing_if = "TieOrder::is_trace")]
    pub tie_order: TieOrder,
}

impl RunSpec {
    /// A run of `workload` on `cluster` with every other setting at its
    /// command-line default: strict FIFO with consolidated placement, seed 1,
    /// 600 s timeline samples, trace speed, the builtin profile database,
    /// default sharing limits, no GENIE or RIFLING policy.
    pub fn new(workload: WorkloadSource, cluster: ClusterChoice) -> Self {
        RunSpec {
            workload,
            cluster,
            policy: PolicyConfig {
                order: crate::policy::queue::QueueOrder::Fifo,
                backfill: false,
                placement: crate::policy::placement::PlacementKind::Consolidate,
            },
            seed: 1,
            sample_interval_ms: 600_000,
            rate_model: RateModelKind::Trace,
            profiles: None,
            share: ShareLimits::default(),
            genie: None,
            rifling: None,
            tie_order: TieOrder::Trace,
        }
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
    run_inner(spec, None, &Artefacts::default(), progress)
}

/// Files that many runs read (RIFLING tables, fitted GENIE models), each
/// read and checked once and shared, keyed by the path the runs name. A
/// sweep builds one before its runs, so that 100,000 runs of one table parse
/// it once, not 200,000 times.
#[derive(Clone, Debug, Default)]
pub struct Artefacts {
    rifling: BTreeMap<PathBuf, std::sync::Arc<(crate::policy::rifling::Agent, Option<String>)>>,
    genie: BTreeMap<PathBuf, std::sync::Arc<GenieProfiles>>,
}

/// Two sets are equal when they hold the same files (the contents are those
/// files', read once).
impl PartialEq for Artefacts {
    fn eq(&self, other: &Self) -> bool {
        self.rifling.keys().eq(other.rifling.keys()) && self.genie.keys().eq(other.genie.keys())
    }
}

impl Artefacts {
    /// The RIFLING table at `path` ([`load_rifling_table`]), read on first use.
    ///
    /// # Errors
    /// As [`load_rifling_table`].
    pub fn rifling_table(
        &mut self,
        path: &Path,
    ) -> Result<std::sync::Arc<(crate::policy::rifling::Agent, Option<String>)>, crate::error::TraceError> {
        if let Some(t) = self.rifling.get(path) {
            return Ok(t.clone());
        }
        let t = std::sync::Arc::new(load_rifling_table(path)?);
        self.rifling.insert(path.to_path_buf(), t.clone());
        Ok(t)
    }

    /// The GENIE models at `path` ([`load_genie_profiles`]), read on first use.
    ///
    /// # Errors
    /// As [`load_genie_profiles`].
    pub fn genie_models(&mut self, path: &Path) -> Result<std::sync::Arc<GenieProfiles>, crate::error::TraceError> {
        if let Some(m) = self.genie.get(path) {
            return Ok(m.clone());
        }
        let m = std::sync::Arc::new(load_genie_profiles(path)?);
        self.genie.insert(path.to_path_buf(), m.clone());
        Ok(m)
    }

    /// Distinct files held.
    pub fn len(&self) -> usize {
        self.rifling.len() + self.genie.len()
    }

    /// True when no file is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
    run_inner(spec, None, artefacts, progress)
}

/// [`run_one`] with a RIFLING policy driving `agent` (kept by the caller, e.g.
/// across training episodes) instead of a fresh or loaded one.
///
/// # Errors
/// As [`run_one`].
pub fn run_one_with_agent(
    spec: &RunSpec,
    agent: Option<std::sync::Arc<std::sync::Mutex<crate::policy::rifling::Agent>>>,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    run_inner(spec, agent, &Artefacts::default(), progress)
}

fn run_inner(
    spec: &RunSpec,
    agent: Option<std::sync::Arc<std::sync::Mutex<crate::policy::rifling::Agent>>>,
    artefacts: &Artefacts,
    progress: impl FnMut(Progress),
) -> Result<RunReport, RunError> {
    let mut cluster = Cluster::new(spec.cluster.spec()?)?;
    cluster.set_share_limits(spec.share)?;
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
            let db = match &spec.profiles {
                Some(dir) => ProfileDb::load_dir_cached(dir)?,
                None => ProfileDb::builtin(),
            };
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
                let profiles = genie_profiles(spec, &cluster, db, artefacts)?;
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
    if (spec.genie.is_some() || spec.rifling.is_some()) && !is_tasks {
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
    let db: Option<&'static ProfileDb> = match &spec.profiles {
        // Read once per directory for the process, so a sweep's runs share it.
        Some(dir) => Some(ProfileDb::load_dir_cached(dir)?),
        None if rate_model != RateModelKind::Trace || has_models => Some(ProfileDb::builtin()),
        None => None,
    };
    let mut records = records;
    spec.tie_order.order_records(&mut records);
    let max_gpu_mem_mib = cluster.spec().nodes.iter().map(|n| n.gpu_mem_mib).max().unwrap_or(0);
    if let Some(db) = db
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
    if let Some(db) = db.filter(|_| !is_tasks) {
        for r in &mut records {
            if let (Some(m), Some(b)) = (r.model.as_deref(), r.local_bsz) {
                r.gpu_mem_mib = db.gpu_mem_mib(m, b).map(|mib| mib.ceil() as u64);
            }
        }
    }
    // The sharing figures say something when jobs have a model or memory
    // figure, a guaranteed share, or a sharing placement; not in a plain replay.
    let share_metrics_useful = rate_model != RateModelKind::Trace
        || spec.policy.placement.may_share()
        || records.iter().any(|r| r.model.is_some() || r.gpu_mem_mib.is_some() || r.gpu_milli.is_some());
    let mut workload = build_workload(records, &cluster, spec.policy.placement.build());
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
    let policy: Box<dyn crate::policy::Policy> = match (&spec.genie, &spec.rifling) {
        (_, Some(r)) => {
            use crate::policy::rifling::{Agent, RiflingMode, RiflingPolicy};
            if !is_tasks {
                return Err(
                    ConfigError("the RIFLING policies schedule moldable tasks: use --workload genie".into()).into()
                );
            }
            let p = cluster.partition(crate::ids::VcId(0));
            let actions = (p.nodes.len() as u32 * p.max_node_gpus) as usize + 1;
            let agent = match (agent, &r.table) {
                (Some(a), _) => a,
                (None, Some(path)) => {
                    let (mut a, trained_on) = match artefacts.rifling.get(path) {
                        Some(t) => (t.0.clone(), t.1.clone()),
                        None => load_rifling_table(path)?,
                    };
                    if let Some(c) = trained_on.filter(|c| *c != cluster.spec().name) {
                        return Err(ConfigError(format!(
                            "{}: the table was trained on cluster `{c}`, this run is on `{}`",
                            path.display(),
                            cluster.spec().name
                        ))
                        .into());
                    }
                    if r.mode == RiflingMode::Online {
                        // An online agent keeps learning from the table with
                        // this run's parameters; its groups come from the table.
                        if r.params.k != a.params.k {
                            return Err(ConfigError(format!(
                                "{}: the table's groups come from k = {}; this run asks k = {} (--rifling-k)",
                                path.display(),
                                a.params.k,
                                r.params.k
                            ))
                            .into());
                        }
                        a.params = r.params;
                    }
                    if a.actions != actions {
                        return Err(ConfigError(format!(
                            "{}: the table has {} actions, cluster `{}` needs {actions}",
                            path.display(),
                            a.actions,
                            cluster.spec().name
                        ))
                        .into());
                    }
                    a.reseed(spec.seed);
                    std::sync::Arc::new(std::sync::Mutex::new(a))
                }
                (None, None) if r.mode == RiflingMode::Frozen => {
                    return Err(
                        ConfigError("rifling-frozen needs a trained table (--rifling-table FILE)".into()).into()
                    );
                }
                (None, None) => std::sync::Arc::new(std::sync::Mutex::new(Agent::new(r.params, actions, spec.seed))),
            };
            Box::new(RiflingPolicy::new(r.mode, agent, db.unwrap_or_else(ProfileDb::builtin)))
        }
        (Some(g), None) => {
            let db = db.unwrap_or_else(ProfileDb::builtin);
            let profiles = match run_profiles.take() {
                Some(p) => p,
                None => genie_profiles(spec, &cluster, db, artefacts)?,
            };
            let p = cluster.partition(crate::ids::VcId(0));
            let online = crate::policy::genie::OnlineProfiling {
                gpu_type: cluster.node(p.nodes[0]).gpu_type.clone(),
                nodes: p.nodes.len() as u32,
                gpus_per_node: p.max_node_gpus,
                seed: spec.seed,
                config: profiles.config,
            };
            Box::new(GeniePolicy::new(g.options, profiles, db).with_online_profiling(online))
        }
        (None, None) => spec.policy.build_with_profiles(cluster.partitions().len(), db)?,
    };
    // The recorder reads the run's database for the SM-utilisation proxy.
    let mut recorder = Recorder::new(&cluster, &workload.jobs, share_metrics_useful, db);
    // GENIE and RIFLING report what their decisions cost (timing.json);
    // timing a plain replay's decisions would cost a few percent.
    let policy = if spec.genie.is_some() || spec.rifling.is_some() { recorder.time_policy(policy) } else { policy };
    // The co-location model, from the run's database; built at the first
    // co-location, so that a run that never shares (or shares jobs without
    // models) reads no database it does not otherwise need (parsing the
    // builtin tables costs more than a plain replay).
    let interference = crate::profile::coloc::LazyInterference::new(move || {
        Box::new(crate::profile::coloc::ProfileInterference::new(db.unwrap_or_else(ProfileDb::builtin)))
    });
    let sim = Simulation::new(
        cluster,
        workload.jobs,
        policy,
        rate_model.build(db),
        EngineConfig { sample_interval_ms: spec.sample_interval_ms },
    )
    .with_interference(Box::new(interference));
    // An error of the run names the job's trace file and line.
    let output = sim.run_observed(&mut recorder, progress).map_err(|e| match &spec.workload {
        WorkloadSource::Trace { path, .. } => e.in_file(path),
        _ => e,
    })?;
    let recording = recorder.into_recording();
    let (summary, vcs) = metrics::summarize(&output, &recording, &workload.skipped, workload.rows_total);
    Ok(RunReport { spec: spec.clone(), input, output, recording, skipped: workload.skipped, summary, vcs })
}

/// The run's fitted GENIE models: loaded from the run's `genie_models` file
/// when it names one, else profiled on the cluster's first partition with the
/// run's seed.
fn genie_profiles(
    spec: &RunSpec,
    cluster: &Cluster,
    db: &ProfileDb,
    artefacts: &Artefacts,
) -> Result<GenieProfiles, RunError> {
    let p = cluster.partition(crate::ids::VcId(0));
    let gpu_type = cluster.node(p.nodes[0]).gpu_type.clone();
    if let Some(path) = spec.genie.as_ref().and_then(|g| g.models.as_ref()) {
        let models = match artefacts.genie.get(path) {
            Some(m) => GenieProfiles::clone(m),
            None => load_genie_profiles(path)?,
        };
        if !models.gpu_type.eq_ignore_ascii_case(&gpu_type) {
            return Err(ConfigError(format!(
                "{}: these GENIE models were fitted on {} GPUs, the cluster has {gpu_type}; profile it with `dlsched genie-profile`",
                path.display(),
                models.gpu_type
            ))
            .into());
        }
        return Ok(models);
    }
    let db_name = spec.profiles.as_ref().map_or("builtin".to_string(), |d| d.display().to_string());
    Ok(crate::policy::genie::profile(
        db,
        &db_name,
        &gpu_type,
        p.nodes.len() as u32,
        p.max_node_gpus,
        spec.seed,
        Default::default(),
    ))
}

/// Reads fitted GENIE models saved by `dlsched genie-profile`.
///
/// # Errors
/// A [`TraceError`](crate::error::TraceError) naming the file when it cannot be read or parsed.
pub fn load_genie_profiles(path: &Path) -> Result<GenieProfiles, crate::error::TraceError> {
    let text = crate::io::read_text(path)?;
    #[derive(serde::Deserialize)]
    struct Saved {
        models: GenieProfiles,
    }
    let models =
        serde_json::from_str::<Saved>(&text).map(|s| s.models).map_err(|e| crate::error::TraceError::Format {
            file: path.to_path_buf(),
            message: format!("not a GENIE model file (line {}, column {}): {e}", e.line(), e.column()),
        })?;
    models.validate().map_err(|message| crate::error::TraceError::Format { file: path.to_path_buf(), message })?;
    Ok(models)
}

/// The data files a run directory may hold, `manifest.json` first. A run
/// writes `manifest.json` last: its presence marks a complete run directory.
pub const OUTPUT_FILES: [&str; 8] = [
    "manifest.json",
    "jobs.csv",
    "summary.json",
    "vc_summary.csv",
    "timeline.csv",
    "skipped.csv",
    "timing.json",
    "learning_curve.csv",
];

/// The charts `dlsched plot` draws into a run directory ([`crate::plot::plot_run`]).
pub const PLOT_FILES: [&str; 5] =
    ["jct_cdf.svg", "queue_delay_cdf.svg", "gpu_utilization.svg", "queue_length.svg", "learning_curve.svg"];

/// Every file name a run writes into a run directory or that is drawn from
/// it: [`OUTPUT_FILES`], [`PLOT_FILES`], and the temporary `<name>.tmp` each
/// is written under before it is renamed into place
/// ([`export::write_atomic`]). The one listing of a run directory's contents.
pub fn run_dir_files() -> impl Iterator<Item = String> {
    OUTPUT_FILES.iter().chain(PLOT_FILES.iter()).flat_map(|f| [f.to_string(), format!("{f}.tmp")])
}

/// Removes an earlier run's files from `dir` (all of [`run_dir_files`]),
/// `manifest.json` first, so that a rerun interrupted at any point leaves no
/// old file beside new ones and no manifest: a reader ([`check_run_dir`])
/// then refuses the directory. Other files are left alone.
///
/// # Errors
/// The first I/O error other than a missing file, with the path.
pub fn clear_run_dir(dir: &Path) -> std::io::Result<()> {
    for name in run_dir_files() {
        let p = dir.join(&name);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(e.kind(), format!("removing the earlier run's {}: {e}", p.display())));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks that `dir` holds a complete run: a `manifest.json` that parses as a
/// dlsched manifest (written last by [`write_run_dir`]) and the `jobs.csv` and
/// `summary.json` every run writes. For readers of a run directory (`dlsched
/// compare`, `dlsched plot`, `sweep --resume`), so that they never use the
/// files of a run that did not finish, or an earlier run's left beside them.
///
/// # Errors
/// A message naming the directory and what is missing.
pub fn check_run_dir(dir: &Path) -> Result<(), String> {
    let manifest = dir.join("manifest.json");
    let text = match std::fs::read_to_string(&manifest) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{}: not a complete run directory: manifest.json is missing (a run writes it last, so the run that wrote here did not finish, and its other files may be an earlier run's); rerun it",
                dir.display()
            ));
        }
        Err(e) => return Err(format!("{}: {e}", manifest.display())),
    };
    let complete = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|v| v.get("dlsched_version").is_some_and(serde_json::Value::is_string));
    if !complete {
        return Err(format!(
            "{}: not a complete run manifest (no JSON object with dlsched_version); rerun the run",
            manifest.display()
        ));
    }
    for f in ["jobs.csv", "summary.json"] {
        if !dir.join(f).is_file() {
            return Err(format!(
                "{}: not a complete run directory: manifest.json is there but {f} is missing; rerun it",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Writes a run directory: `manifest.json`, `jobs.csv`, `summary.json`,
/// `vc_summary.csv`, `timeline.csv`, and `skipped.csv` when rows were skipped.
/// An earlier run's files go first ([`clear_run_dir`]: manifest, data files,
/// charts, temporaries), then the data files are written, then the manifest,
/// last: a directory without one is a run that did not finish.
///
/// # Errors
/// The first I/O error.
pub fn write_run_dir(report: &RunReport, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    clear_run_dir(dir)?;
    let cluster = report.output.cluster.spec();
    let manifest = serde_json::json!({
        "dlsched_version": env!("CARGO_PKG_VERSION"),
        "config": &report.spec,
        "seed": report.spec.seed,
        "input": &report.input,
        "cluster": {
            "name": cluster.name,
            "nodes": cluster.nodes.len(),
            "gpus": cluster.total_gpus(),
            "vcs": cluster.vc_names,
        },
        "policy": report.output.policy,
        "rate_model": report.output.model,
        "engine": report.output.stats,
    });
    let json = |v: &serde_json::Value| {
        let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
        s.push('\n');
        s.into_bytes()
    };
    // The old files are gone, so the large files need not keep an old one
    // until the rename (see `write_replacing_with`).
    export::write_replacing_with(&dir.join("jobs.csv"), |w| export::write_jobs_csv(&report.output, w))?;
    export::write_atomic(&dir.join("vc_summary.csv"), &export::vc_summary_csv(&report.vcs))?;
    let timeline = export::timeline_csv(&report.output, &report.recording);
    export::write_replacing_with(&dir.join("timeline.csv"), |w| std::io::Write::write_all(w, &timeline))?;
    if !report.skipped.is_empty() {
        export::write_atomic(&dir.join("skipped.csv"), &export::skipped_csv(&report.skipped))?;
    }
    export::write_atomic(&dir.join("summary.json"), &json(&serde_json::to_value(&report.summary).unwrap_or_default()))?;
    // Wall-clock decision cost: the one output that differs from run to run,
    // so it is kept out of summary.json and jobs.csv.
    if let Some(t) = &report.recording.timing {
        let makespan = report.summary.makespan_s;
        let v = serde_json::json!({
            "note": "wall-clock time of the policy's decisions on this machine; not deterministic",
            "decisions": t.decisions,
            "decision_time_total_s": t.total_s,
            "decision_time_mean_s": if t.decisions > 0 { t.total_s / t.decisions as f64 } else { 0.0 },
            "decision_time_max_s": t.max_s,
            "fraction_of_makespan": if makespan > 0.0 { t.total_s / makespan } else { 0.0 },
        });
        export::write_atomic(&dir.join("timing.json"), &json(&v))?;
    }
    for (name, text) in &report.output.policy_files {
        // Listed, so that a rerun removes it (`clear_run_dir`).
        debug_assert!(OUTPUT_FILES.contains(name), "{name} is not in OUTPUT_FILES");
        export::write_atomic(&dir.join(name), text.as_bytes())?;
    }
    // The manifest last: its presence marks a complete run directory.
    export::write_atomic(&dir.join("manifest.json"), &json(&manifest))?;
    Ok(())
}
