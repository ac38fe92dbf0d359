//! The run spec: plain data that defines a run ([`RunSpec`]), its parts
//! ([`WorkloadSource`], [`ClusterChoice`], [`RateModelKind`]) and the
//! command line's defaults; `manifest.json` records it in full.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cluster::{ClusterPreset, ClusterSpec, load_vc_file};
use crate::engine::{CheckpointModel, ElasticTiming};
use crate::error::{ConfigError, ConfigErrorKind, RunError};
use crate::policy::predictor::PredictorKind;
use crate::policy::registry::{PolicyName, PolicySpec};
use crate::profile::coloc::ColocUnmeasured;
use crate::profile::db::ProfileDb;
use crate::profile::elastic::ElasticModel;
use crate::profile::genie::GenieModel;
use crate::profile::model::TableModel;
use crate::profile::rate::ProfileRate;
use crate::profile::{RateModel, TraceSpeed};
use crate::trace::tie_order::TieOrder;
use crate::trace::{ColumnMap, TraceFormat};
use crate::workload::genie::GenieWorkloadSpec;
use crate::workload::synthetic::SyntheticSpec;

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
    /// Work-defined jobs drawn from a Philly job list by the rules of the
    /// Pollux artifact's workload generator ([`crate::workload::pollux`]),
    /// as an `elastic-workload` trace would give them.
    Pollux {
        /// The Philly job list (the Pollux artifact's columns).
        path: PathBuf,
        /// Jobs, window and start hour.
        spec: crate::workload::pollux::PolluxWorkloadSpec,
    },
}

impl WorkloadSource {
    /// Whether the workload is GENIE's moldable tasks (`--workload genie`,
    /// generated or drawn from a trace).
    pub fn is_tasks(&self) -> bool {
        matches!(self, WorkloadSource::Genie(_) | WorkloadSource::TraceTasks { .. })
    }
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
    /// VC partitions from a file with every VC's node count scaled by
    /// `scale` in (0, 1] (`--vc-scale`, sweep key `vc_scale`; see
    /// [`crate::cluster::load_vc_file_scaled`] for the rounding).
    ScaledVcFile {
        /// The file.
        path: PathBuf,
        /// The factor on every VC's node count.
        scale: f64,
    },
    /// A heterogeneous cluster from an Alibaba PAI 2023 node list (see
    /// [`crate::cluster::load_nodes_file`]), one partition.
    NodesFile {
        /// The file.
        path: PathBuf,
    },
}

fn ser_preset<S: serde::Serializer>(p: &ClusterPreset, s: S) -> Result<S::Ok, S::Error> {
    use crate::names::ValueNames;
    s.serialize_str(p.value_name())
}

fn de_preset<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ClusterPreset, D::Error> {
    use crate::names::ValueNames;
    let name = String::deserialize(d)?;
    ClusterPreset::from_value_name(&name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown cluster preset `{name}`")))
}

impl ClusterChoice {
    /// The default largest job of a synthetic workload on this cluster:
    /// [`crate::workload::synthetic::default_job_cap`] of its GPUs (half
    /// of them); `None` when the cluster cannot be built (the run then
    /// fails on the cluster's own error).
    pub fn default_job_cap(&self) -> Option<u32> {
        self.spec()
            .ok()
            .map(|c| crate::workload::synthetic::default_job_cap(u32::try_from(c.total_gpus()).unwrap_or(u32::MAX)))
    }

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
                    return Err(ConfigError::new(
                        ConfigErrorKind::InvalidValue,
                        format!(
                            "{nodes} nodes × {gpus_per_node} GPUs is too large: at most {} nodes and {} GPUs",
                            crate::cluster::MAX_NODES,
                            crate::cluster::MAX_GPUS
                        ),
                    )
                    .into());
                }
                let (ty, mem) = match gpu_type {
                    None => ("generic".to_string(), 16 * 1024),
                    Some(t) => (
                        t.clone(),
                        gpu_type_mem_mib(t).ok_or_else(|| {
                            ConfigError::new(
                                ConfigErrorKind::UnknownName,
                                format!(
                                    "unknown GPU type `{t}`; known: {}",
                                    GPU_TYPE_MEMORY.iter().map(|g| g.0).collect::<Vec<_>>().join(", ")
                                ),
                            )
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
            ClusterChoice::ScaledVcFile { path, scale } => {
                crate::cluster::load_vc_file_scaled(path, *scale, "generic", 16 * 1024)?
            }
            ClusterChoice::NodesFile { path } => crate::cluster::load_nodes_file(path)?.spec,
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// How a running job's speed is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum RateModelKind {
    /// Every job runs exactly its trace duration, wherever it is placed.
    Trace,
    /// Profile database, table interpolation: a job placed other than its
    /// recorded allocation runs at the measured iteration-time ratio.
    Table,
    /// Profile database, GENIE's fitted prediction model.
    Genie,
    /// The K80 ground truth of GENIE's task types (`profile::genie::K80Truth`:
    /// measured K80 rows, the GENIE paper's Fig. 8 speed-ups elsewhere);
    /// table interpolation for every other model. Selects the same truth for the GENIE workload generator
    /// and GENIE's profiler. K80 clusters only.
    GenieK80,
}

crate::names::value_names!(RateModelKind {
    Trace => "trace",
    Table => "table",
    Genie => "genie",
    GenieK80 => "genie-k80",
});

impl RateModelKind {
    /// The rate model over `db` (the builtin database when `None`; trace
    /// speed reads no database).
    pub(super) fn build(self, db: Option<&Arc<ProfileDb>>) -> Box<dyn RateModel> {
        let db = || db.cloned().unwrap_or_else(|| Arc::new(ProfileDb::builtin()));
        match self {
            RateModelKind::Trace => Box::new(TraceSpeed),
            RateModelKind::Table => Box::new(ProfileRate::new(Box::new(TableModel::new(db())), "profile-table")),
            RateModelKind::Genie => Box::new(ProfileRate::new(Box::new(GenieModel::new(db())), "profile-genie")),
            RateModelKind::GenieK80 => {
                Box::new(ProfileRate::new(Box::new(crate::profile::genie::K80Truth::new(db())), "profile-genie-k80"))
            }
        }
    }

    /// The ground truth GENIE tasks run against under this rate model.
    pub fn genie_truth(self) -> crate::profile::genie::GenieTruth {
        match self {
            RateModelKind::GenieK80 => crate::profile::genie::GenieTruth::GenieK80,
            _ => crate::profile::genie::GenieTruth::Table,
        }
    }
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
    /// (`srtf`, `las`, the Tiresias kinds, `gandiva`, `themis`, the Gavel
    /// kinds) preempt; see [`CheckpointModel`] for the models and sources.
    #[serde(default, skip_serializing_if = "CheckpointModel::is_none")]
    pub checkpoint: CheckpointModel,
    /// How work-defined jobs' progress advances in time (`--elastic-timing`,
    /// sweep key `elastic_timing`): exact event times (default; left out of
    /// manifests) or `pollux-sim`, the Pollux simulator's 60-s steps with
    /// whole-second epoch crossings ([`ElasticTiming`]).
    #[serde(default, skip_serializing_if = "ElasticTiming::is_exact")]
    pub elastic_timing: ElasticTiming,
    /// The re-scale delay of a work-defined job's reallocation, ms
    /// (`--rescale-delay` s, sweep key `rescale_delay`); `None` (default;
    /// left out of manifests): [`crate::engine::DEFAULT_RESCALE_DELAY_MS`],
    /// Pollux's 30 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescale_delay_ms: Option<u64>,
    /// The application model of work-defined jobs without work of their own
    /// (Pollux's and Sia's workloads): `--elastic-model`, sweep key
    /// `elastic_model`; `auto` (default; left out of manifests) picks by the
    /// cluster's GPU types ([`ElasticModel`]).
    #[serde(default, skip_serializing_if = "ElasticModel::is_auto")]
    pub elastic_model: ElasticModel,
    /// What the co-location rule reads for a pair of models never measured
    /// on the GPU type: `mean` (default; left out of manifests) or `learned`
    /// (`src/profile/coloc.rs`, `src/profile/ncf.rs`).
    #[serde(default, skip_serializing_if = "ColocUnmeasured::is_mean")]
    pub coloc_unmeasured: ColocUnmeasured,
    /// Simulated time after which the run stops, ms (`--horizon` s, sweep key
    /// `horizon`): a cut-off run whose jobs still waiting or running then
    /// count as unfinished. `None` (default; left out of manifests): run
    /// until every admitted job completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_ms: Option<u64>,
    /// Whether the run may end with admitted jobs the policy never completed
    /// (`--allow-unfinished`, sweep key `allow_unfinished`); by default such
    /// a run fails naming them ([`crate::error::SimError::Unfinished`]).
    /// Left out of manifests when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_unfinished: bool,
    /// What the policy's predictions read (`--predictor`, sweep key
    /// `predictor`): `fitted` (default; left out of manifests), `oracle`
    /// (the simulator's truth, 0 % error) or `noisy:P` (the truth × a
    /// seeded error uniform in ±P %); see [`crate::policy::predictor`].
    /// Only prediction-using policies (the GENIE family, QSSF) take one
    /// other than `fitted`.
    #[serde(default, skip_serializing_if = "PredictorKind::is_fitted")]
    pub predictor: PredictorKind,
    /// Which batch sizes GENIE's offline profiler measures
    /// (`--profile-batches`, sweep key `profile_batches`): `grid` (default;
    /// left out of manifests) or `measured` (only the per-GPU batches the
    /// public measurements contain; [`crate::policy::genie::ProfileBatches`]).
    /// Changes the fitted models of a run of GENIE tasks (so GENIE-family
    /// decisions and the predicted ECT); no other run.
    #[serde(default, skip_serializing_if = "crate::policy::genie::ProfileBatches::is_grid")]
    pub profile_batches: crate::policy::genie::ProfileBatches,
    /// Whether the trace's malformed rows are left out and listed
    /// (`--skip-malformed`, sweep key `skip_malformed`;
    /// [`crate::trace::RowErrors::Skip`]: `skipped.csv` lists each with its
    /// line, column and reason, the summary counts them as `malformed`)
    /// instead of the run failing at the first with its precise error (the
    /// default; left out of manifests when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_malformed: bool,
    /// Whether a trace with columns the run does not read (the ignored
    /// columns of [`crate::trace::LoadedTrace::ignored_columns`]) is an error
    /// (`--strict-input`, sweep key `strict_input`) rather than a note (the
    /// default; left out of manifests when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict_input: bool,
}

/// The command line's defaults of a run, in one place: seed 1, timeline
/// samples every 600 s, trace speed, the builtin profile database, trace
/// tie order (the policy's defaults are its options struct's `Default`).
pub const DEFAULT_SEED: u64 = 1;
/// Default timeline sampling interval, s.
pub const DEFAULT_SAMPLE_INTERVAL_S: u64 = 600;

impl RunSpec {
    /// A run of `workload` on `cluster` with every other setting at the
    /// default every builder of a run uses (`dlsched simulate`, an
    /// experiment file, `dlsched.simulate`/`sweep`; `docs/experiments.md`,
    /// "Defaults"): FIFO with consolidated placement, backfilling on the
    /// synthetic workload and strict otherwise ([`PolicySpec::with_backfill`]),
    /// seed [`DEFAULT_SEED`], timeline samples every
    /// [`DEFAULT_SAMPLE_INTERVAL_S`] s, trace speed, the builtin profile
    /// database, trace tie order, no checkpoint overhead. A synthetic
    /// workload without a `max_job_gpus` gets the default cap,
    /// [`ClusterChoice::default_job_cap`] (half the cluster's GPUs; set
    /// `max_job_gpus` after `new` for the largest partition's, `None`).
    pub fn new(workload: WorkloadSource, cluster: ClusterChoice) -> Self {
        let mut workload = workload;
        if let WorkloadSource::Synthetic(s) = &mut workload
            && s.max_job_gpus.is_none()
        {
            s.max_job_gpus = cluster.default_job_cap();
        }
        let backfill = matches!(workload, WorkloadSource::Synthetic(_));
        RunSpec {
            workload,
            cluster,
            policy: PolicySpec::default().with_backfill(backfill),
            seed: DEFAULT_SEED,
            sample_interval_ms: DEFAULT_SAMPLE_INTERVAL_S * 1000,
            rate_model: RateModelKind::Trace,
            profiles: None,
            tie_order: TieOrder::Trace,
            checkpoint: CheckpointModel::None,
            elastic_timing: ElasticTiming::Exact,
            rescale_delay_ms: None,
            elastic_model: ElasticModel::Auto,
            coloc_unmeasured: ColocUnmeasured::Mean,
            horizon_ms: None,
            allow_unfinished: false,
            predictor: PredictorKind::Fitted,
            profile_batches: crate::policy::genie::ProfileBatches::Grid,
            skip_malformed: false,
            strict_input: false,
        }
    }

    /// What the trace readers do with a malformed row under this spec
    /// ([`RunSpec::skip_malformed`]).
    pub fn row_errors(&self) -> crate::trace::RowErrors {
        if self.skip_malformed { crate::trace::RowErrors::Skip } else { crate::trace::RowErrors::Fail }
    }

    /// Sets the policy to the kind `name` with its options at the defaults
    /// of this run's workload, as every builder of a run sets them
    /// (backfill on the synthetic workload: [`RunSpec::new`]).
    pub fn set_policy(&mut self, name: crate::policy::registry::PolicyName) {
        let backfill = matches!(self.workload, WorkloadSource::Synthetic(_));
        self.policy = name.default_spec().with_backfill(backfill);
    }

    /// Why this run may end with admitted jobs unfinished, for the summary's
    /// `cut_off` map: `horizon_s` (the horizon, s) or `allow_unfinished`
    /// (1); empty when it may not.
    pub fn cut_off(&self) -> std::collections::BTreeMap<String, f64> {
        match (self.horizon_ms, self.allow_unfinished) {
            (Some(h), _) => [("horizon_s".to_string(), h as f64 / 1000.0)].into(),
            (None, true) => [("allow_unfinished".to_string(), 1.0)].into(),
            (None, false) => Default::default(),
        }
    }

    /// Why the run's policy refuses its predictor: one other than `fitted`
    /// for a policy that makes no prediction ([`PolicySpec::predicts`]).
    pub fn predictor_refusal(&self) -> Option<String> {
        (!self.predictor.is_fitted() && !self.policy.predicts()).then(|| {
            format!(
                "policy `{}` makes no prediction a predictor could replace; predictors apply to the \
                 GENIE family (genie, tetris-perf, tetris-cer, min-min-pred, fifo-cer, weighted-fair-cer, \
                 the -srtf variants; the black-box baselines only in their prediction-error report) and qssf",
                self.policy.kind()
            )
        })
    }

    /// Checks what can be checked without reading a file: the policy's
    /// options ([`PolicySpec::validate`]) and the sampling interval.
    ///
    /// # Errors
    /// A message naming the option at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.policy.validate().map_err(|e| ConfigError::new(crate::error::ConfigErrorKind::InvalidValue, e))?;
        if let Some(e) = self.predictor_refusal() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                format!("--predictor {} (sweep key `predictor`): {e}", self.predictor),
            )
            .with_key("predictor"));
        }
        if let Some(period) = self.policy.preemption_period_ms()
            && self.checkpoint.max_overhead_ms() >= period
        {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                format!(
                    "`{}`'s round/lease of {} s is not longer than the `{}` checkpoint cost \
                 (up to {} s per preemption): a job preempted every round would never \
                 progress; use a longer round or a cheaper --checkpoint",
                    self.policy.kind(),
                    period as f64 / 1000.0,
                    self.checkpoint.name(),
                    self.checkpoint.max_overhead_ms() as f64 / 1000.0
                ),
            )
            .with_key("checkpoint"));
        }
        crate::bounds::sample_interval_ms(self.sample_interval_ms / 1000).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::InvalidValue,
                format!("`sample_interval_ms` = {}: {e}", self.sample_interval_ms),
            )
            .with_key("sample_interval")
        })?;
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
        Self::from_manifest_in(path, &super::registry::Registry::default())
    }

    /// [`RunSpec::from_manifest`] knowing the policy kinds and trace
    /// formats of `registry`, so that a run of a registered kind reruns.
    ///
    /// # Errors
    /// As [`RunSpec::from_manifest`].
    pub fn from_manifest_in(path: &Path, registry: &super::registry::Registry) -> Result<RunSpec, String> {
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
        // A registered policy kind is read by the registry; the rest of the
        // spec as always.
        let mut spec = spec.clone();
        let outside = match spec.get_mut("policy") {
            Some(p)
                if p.get("kind")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|k| registry.policy_kind(k).is_some()) =>
            {
                let p = std::mem::replace(p, serde_json::json!({"kind": "fifo"}));
                Some(registry.policy_spec(p).map_err(|(at, msg)| {
                    format!("{}: spec.policy{}{at}: {msg}", path.display(), if at.is_empty() { "" } else { "." })
                })?)
            }
            _ => None,
        };
        let format = match spec.get_mut("workload").and_then(|w| w.get_mut("format")) {
            Some(f) if let Some(k) = f.as_str().and_then(|n| registry.format_kind(n)) => {
                *f = serde_json::json!("auto");
                Some(TraceFormat::Registered(k))
            }
            _ => None,
        };
        let spec = &spec;
        let mut spec: RunSpec = serde_path_to_error::deserialize(spec).map_err(|e| {
            let at = e.path().to_string();
            // Inside the policy (an internally tagged enum) serde loses the
            // path: parse the options again as the kind's own struct.
            let inner = (at == "policy")
                .then(|| {
                    let mut o = spec.get("policy")?.as_object()?.clone();
                    let kind = o.remove("kind")?;
                    let name = <PolicyName as crate::names::ValueNames>::from_value_name(kind.as_str()?)?;
                    name.options_error(serde_json::Value::Object(o))
                })
                .flatten();
            match inner {
                Some((field, msg)) => format!("{}: spec.policy.{field}: {msg}", path.display()),
                None => format!("{}: spec.{at}: {}", path.display(), e.inner()),
            }
        })?;
        if let Some(p) = outside {
            spec.policy = p;
        }
        if let (Some(f), WorkloadSource::Trace { format, .. } | WorkloadSource::TraceTasks { format, .. }) =
            (format, &mut spec.workload)
        {
            *format = f;
        }
        spec.policy.validate().map_err(|e| format!("{}: spec.policy: {e}", path.display()))?;
        spec.validate().map_err(|e| format!("{}: spec: {e}", path.display()))?;
        Ok(spec)
    }

    /// Checks that the trace a run directory's `manifest.json` read
    /// (`input.path`, relative to the directory the original run started
    /// in) is still there and still has the SHA-256 the manifest recorded
    /// (`input.sha256`), so a rerun reads the same jobs. With
    /// `allow_changed`, a changed file is accepted (a missing one never is).
    /// A manifest without an input file (a synthetic workload) passes.
    ///
    /// # Errors
    /// A message naming the manifest and the input file: unreadable
    /// manifest, missing input (with where its relative path is read from),
    /// or a changed input with both hashes and `--allow-changed-input`.
    pub fn check_manifest_input(path: &Path, allow_changed: bool) -> Result<(), String> {
        let text = crate::io::read_text(path).map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON (line {}, column {}): {e}", path.display(), e.line(), e.column()))?;
        let Some(input) = v.get("input").and_then(|i| i.get("path")).and_then(serde_json::Value::as_str) else {
            return Ok(());
        };
        let input = Path::new(input);
        if !input.exists() {
            return Err(format!(
                "{}: input file `{}` (`input.path`) not found; paths in a manifest are relative to the directory the original run started in, so rerun from that directory (or give the file there)",
                path.display(),
                input.display()
            ));
        }
        let Some(recorded) = v["input"].get("sha256").and_then(serde_json::Value::as_str) else {
            return Ok(());
        };
        let now = crate::trace::file_sha256(input)?;
        if now != recorded && !allow_changed {
            return Err(format!(
                "{}: input file `{}` changed since the run: the manifest recorded SHA-256 {recorded} (`input.sha256`), the file now has {now}; the rerun would not read the same jobs (give --allow-changed-input to rerun anyway)",
                path.display(),
                input.display()
            ));
        }
        Ok(())
    }
}
