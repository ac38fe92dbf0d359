//! The GENIE family's part of a run: its options ([`GenieFamilyOptions`],
//! one struct for `genie` and the paper's baselines), how a policy of the
//! family is built, its fitted models as an [`Artefact`] read once per
//! sweep, and its stage of the run pipeline ([`GenieRun`]: the profiler's
//! settings and the models fitted for the workload's predicted ECT, handed
//! to the policy through [`Extensions`](super::build::Extensions)).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Policy;
use super::build::{Artefact, Artefacts, BuildContext, BuildPolicy, FamilyKey};
use super::genie::{BlackBox, GenieOptions, GeniePolicy, GenieProfiles, GenieVariant, PlacementSet, Reading};
use crate::cluster::Cluster;
use crate::error::{ConfigError, RunError, TraceError};
use crate::ids::VcId;
use crate::profile::db::ProfileDb;

/// Options of the GENIE family (`genie`, the paper's baselines `genie-fifo`,
/// `capacity`, `min-min`, `weighted-fair`, `tetris-perf`, `tetris-cer`, and
/// dlsched's earlier variants `fifo-cer`, `min-min-pred`,
/// `weighted-fair-cer`, `tetris-perf-srtf`, `tetris-cer-srtf`; the kind picks
/// the variant, [`GenieVariant`] documents each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenieFamilyOptions {
    /// Concentration weight theta of the placement cost n/(N G) + theta
    /// d_node/N, >= 0. Default 0.4 (the paper's example, GENIE TPDS 2020).
    pub theta: f64,
    /// Let later tasks start when the head's placement is not free. Default false.
    pub backfill: bool,
    /// Place on the fullest nodes with room instead of the emptiest (the
    /// spec's proposal). Default false.
    pub best_fit_nodes: bool,
    /// Fitted models saved by `dlsched genie-profile`; `None` (default)
    /// profiles at the start of the run, seeded by the run's seed.
    pub models: Option<PathBuf>,
    /// `genie` only: the reading of Algorithm 1, `strict` (default, the
    /// paper's rule) or `available` (the best-CER placement free now that
    /// meets the ECT, else the paper's rule); [`Reading`].
    pub reading: Reading,
    /// The placements considered: `paper` (default; `{1, 2, 4, …} ≤ N` nodes
    /// × `{1, 2, 4, …} ≤ G` GPUs per node) or `all` (every `1..=N × 1..=G`,
    /// as dlsched once did); [`PlacementSet`].
    pub placements: PlacementSet,
    /// The black-box kinds only (`genie-fifo`, `capacity`, `min-min`,
    /// `weighted-fair`): `one-gpu`, `node` or `all-free`; `None` (default)
    /// = the kind's default ([`BlackBox::default_for`]: `one-gpu` for
    /// Capacity, `node` for the others).
    pub blackbox: Option<BlackBox>,
}

impl Default for GenieFamilyOptions {
    fn default() -> Self {
        GenieFamilyOptions {
            theta: 0.4,
            backfill: false,
            best_fit_nodes: false,
            models: None,
            reading: Reading::Strict,
            placements: PlacementSet::Paper,
            blackbox: None,
        }
    }
}

/// The GENIE family's sweep-file keys and flags (`theta`, `--theta`, ...)
/// and the options they set.
pub const GENIE_KEYS: &[FamilyKey] = &[
    FamilyKey { check: Some(crate::bounds::theta), only_for: Some("GENIE-family"), ..FamilyKey::new("theta", "theta") },
    FamilyKey::new("backfill", "backfill"),
    FamilyKey::new("genie_best_fit", "best_fit_nodes"),
    FamilyKey::path("genie_models", "models"),
];

/// The GENIE variant of a registry kind.
fn genie_variant(kind: &str) -> GenieVariant {
    use crate::names::ValueNames;
    GenieVariant::from_value_name(kind).unwrap_or(GenieVariant::Genie)
}

impl BuildPolicy for GenieFamilyOptions {
    fn validate(&self, kind: &str) -> Result<(), String> {
        crate::bounds::theta(self.theta).map(|_| ()).map_err(|e| format!("--theta {e}"))?;
        let variant = genie_variant(kind);
        if self.reading != Reading::Strict && variant != GenieVariant::Genie {
            return Err(format!(
                "policy option `reading` is GENIE's Algorithm 1 (`--policy genie`); `{kind}` has no such choice"
            ));
        }
        if self.blackbox.is_some() && !variant.black_box() {
            return Err(format!(
                "policy option `blackbox` is the placement of genie-fifo, capacity, min-min and weighted-fair; `{kind}` places by the prediction model"
            ));
        }
        Ok(())
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        if !ctx.tasks {
            return Err(ConfigError::new(
                crate::error::ConfigErrorKind::Conflict,
                "GENIE-family and RIFLING policies schedule moldable tasks: use `--workload genie`",
            )
            .into());
        }
        let run = ctx.extensions.take::<GenieRun>().unwrap_or_default();
        let profiles = match run.profiles {
            Some(p) => p,
            None => genie_profiles(
                self.models.as_deref(),
                ctx.cluster,
                &ctx.db(),
                &ctx.db_name,
                ctx.seed,
                run.profiler,
                ctx.artefacts,
            )?,
        };
        let p = ctx.cluster.partition(VcId(0));
        let online = super::genie::OnlineProfiling {
            gpu_type: ctx.cluster.node(p.nodes[0]).gpu_type.clone(),
            nodes: p.nodes.len() as u32,
            gpus_per_node: p.max_node_gpus,
            seed: ctx.seed,
            config: profiles.config,
        };
        let variant = genie_variant(kind);
        let options = GenieOptions {
            variant,
            theta: self.theta,
            backfill: self.backfill,
            best_fit_nodes: self.best_fit_nodes,
            reading: self.reading,
            placements: self.placements,
            blackbox: self.blackbox.unwrap_or_else(|| BlackBox::default_for(variant)),
        };
        let policy = GeniePolicy::new(options, profiles, ctx.db()).with_online_profiling(online);
        if ctx.predictor.is_fitted() {
            return Ok(Box::new(policy));
        }
        Ok(Box::new(policy.with_predictor(ctx.predictor, ctx.seed, (ctx.rate_model)())))
    }

    fn family_keys(&self, _kind: &str, _from_file: bool) -> &'static [FamilyKey] {
        GENIE_KEYS
    }

    fn load_artefacts(&self, artefacts: &mut Artefacts) -> Result<(), (&'static str, TraceError)> {
        match &self.models {
            Some(m) => artefacts.load::<GenieProfiles>(m).map(|_| ()).map_err(|e| ("models", e)),
            None => Ok(()),
        }
    }

    fn moldable(&self) -> bool {
        true
    }

    fn predicts(&self) -> bool {
        true
    }

    fn time_decisions(&self) -> bool {
        true
    }
}

/// What GENIE's stage of a run hands to a GENIE-family policy (through
/// [`BuildContext::extensions`]): the profiler's settings (its ground
/// truth, the run's rate model's, and its batch sizes, `--profile-batches`)
/// and, when the workload's ECT was predicted, the models fitted for it, so
/// that the policy uses the same ones. A run without it profiles with the
/// defaults.
#[derive(Clone, Debug, Default)]
pub struct GenieRun {
    /// The profiler's settings.
    pub profiler: super::genie::ProfilerConfig,
    /// Models already fitted or loaded for this run.
    pub profiles: Option<GenieProfiles>,
}

/// Reads fitted GENIE models saved by `dlsched genie-profile`.
///
/// # Errors
/// A [`TraceError`] naming the file when it cannot be read or parsed.
pub fn load_genie_profiles(path: &Path) -> Result<GenieProfiles, TraceError> {
    let text = crate::io::read_text(path)?;
    #[derive(Deserialize)]
    struct Saved {
        models: GenieProfiles,
    }
    let models = serde_json::from_str::<Saved>(&text).map(|s| s.models).map_err(|e| TraceError::Format {
        file: path.to_path_buf(),
        message: format!("not a GENIE model file (line {}, column {}): {e}", e.line(), e.column()),
    })?;
    models.validate().map_err(|message| TraceError::Format { file: path.to_path_buf(), message })?;
    Ok(models)
}

/// GENIE models saved by `dlsched genie-profile`, read once for a sweep.
impl Artefact for GenieProfiles {
    fn load(path: &Path) -> Result<Self, TraceError> {
        load_genie_profiles(path)
    }
}

/// A run's fitted GENIE models: loaded from `models` when given (through
/// `artefacts` when it holds them), else profiled on the cluster's first
/// partition with the run's seed (GENIE's offline profiler,
/// [`super::genie::profile`]) with the settings `profiler` (its ground
/// truth and batch sizes; a loaded file must have been profiled with the same
/// two).
///
/// # Errors
/// An unreadable file, or models fitted on another GPU type.
pub fn genie_profiles(
    models: Option<&Path>,
    cluster: &Cluster,
    db: &ProfileDb,
    db_name: &str,
    seed: u64,
    profiler: super::genie::ProfilerConfig,
    artefacts: &Artefacts,
) -> Result<GenieProfiles, RunError> {
    let (truth, batches) = (profiler.truth, profiler.batches);
    let p = cluster.partition(VcId(0));
    let gpu_type = cluster.node(p.nodes[0]).gpu_type.clone();
    if let Some(path) = models {
        let models = GenieProfiles::clone(&*artefacts.get_or_read::<GenieProfiles>(path)?);
        if !models.gpu_type.eq_ignore_ascii_case(&gpu_type) {
            return Err(ConfigError::new(crate::error::ConfigErrorKind::Artefact, format!(
                "{}: these GENIE models were fitted on {} GPUs, the cluster has {gpu_type}; profile it with `dlsched genie-profile`",
                path.display(),
                models.gpu_type
            ))
            .into());
        }
        if models.config.truth != truth {
            return Err(ConfigError::new(crate::error::ConfigErrorKind::Artefact, format!(
                "{}: these GENIE models were profiled against the `{}` ground truth, the run uses `{}` (its rate model); profile with `dlsched genie-profile --truth {}`",
                path.display(),
                models.config.truth.name(),
                truth.name(),
                truth.name()
            ))
            .into());
        }
        if models.config.batches != batches {
            return Err(ConfigError::new(crate::error::ConfigErrorKind::Artefact, format!(
                "{}: these GENIE models were profiled at `{}` batch sizes, the run asks for `{}` (--profile-batches); profile with `dlsched genie-profile --batches {}`",
                path.display(),
                models.config.batches.name(),
                batches.name(),
                batches.name()
            ))
            .into());
        }
        return Ok(models);
    }
    Ok(super::genie::profile(db, db_name, &gpu_type, p.nodes.len() as u32, p.max_node_gpus, seed, profiler))
}

/// The moldable tasks of a run ([`task_workload`]).
#[derive(Clone, Debug)]
pub struct TaskWorkload {
    /// Each task with its trace record (submit time, model), in arrival order.
    pub tasks: Vec<(crate::trace::TraceRecord, crate::job::TaskSpec)>,
    /// The GENIE models fitted or loaded for the tasks' predicted ECT, if any.
    pub profiles: Option<GenieProfiles>,
}

/// GENIE's stage of a run's workload: the moldable tasks of `workload`
/// (GENIE's task types, generated, or drawn from the rows of `trace` when
/// given), their speeds read from the ground truth the profiler also
/// measures (`profiler.truth`: the run's rate model's), and, when the
/// workload's ECT is [`EctBasis::Predicted`](crate::workload::genie::EctBasis::Predicted),
/// each task's deadline a multiple of its predicted single-GPU latency from
/// the run's fitted models (those a GENIE policy of the run uses, `models`
/// or profiled now), for every policy alike. Returns the tasks with their
/// trace records, and the fitted models when it fitted or loaded them (for
/// [`GenieRun::profiles`]).
///
/// # Errors
/// [`ConfigError`] for the `genie-k80` truth on a cluster of other GPUs, an
/// empty cluster, or a task workload that cannot be drawn; as
/// [`genie_profiles`] for the models.
#[allow(clippy::too_many_arguments)]
pub fn task_workload(
    workload: &crate::workload::genie::GenieWorkloadSpec,
    trace: Option<&[crate::trace::TraceRecord]>,
    cluster: &Cluster,
    db: &ProfileDb,
    db_name: &str,
    profiler: super::genie::ProfilerConfig,
    models: Option<&Path>,
    seed: u64,
    artefacts: &Artefacts,
) -> Result<TaskWorkload, RunError> {
    let node = cluster.spec().nodes.first().cloned().ok_or_else(|| ConfigError::other("empty cluster"))?;
    let genie_truth = profiler.truth;
    if genie_truth == crate::profile::genie::GenieTruth::GenieK80
        && !node.gpu_type.eq_ignore_ascii_case(crate::profile::genie::K80)
    {
        return Err(ConfigError::new(
            crate::error::ConfigErrorKind::Conflict,
            format!(
                "rate model `genie-k80` is the K80 ground truth of GENIE's task types; cluster `{}` has {} GPUs",
                cluster.spec().name,
                node.gpu_type
            ),
        )
        .into());
    }
    let truth = crate::profile::genie::GroundTruth::with(db, &node.gpu_type, genie_truth);
    let mut tasks = match trace {
        Some(records) => {
            let p = cluster.partition(VcId(0));
            crate::workload::genie::from_trace_with(
                records,
                workload,
                db,
                &truth,
                node.gpu_mem_mib,
                p.gpus_total,
                p.max_node_gpus,
                seed,
            )
        }
        None => crate::workload::genie::generate_with(workload, db, &truth, node.gpu_mem_mib, seed),
    }
    .map_err(ConfigError::other)?;
    if workload.ect != crate::workload::genie::EctBasis::Predicted {
        return Ok(TaskWorkload { tasks, profiles: None });
    }
    // The paper's ECT: a multiple of the predicted single-GPU latency, from
    // the run's fitted models (the ones a GENIE policy of this run uses),
    // for every policy alike.
    let profiles = genie_profiles(models, cluster, db, db_name, seed, profiler, artefacts)?;
    for (rec, t) in &mut tasks {
        let p = profiles.for_kind(&t.kind, rec.model().unwrap_or(""), t.inference, db);
        if let Some(lat) = p.and_then(|p| p.latency_ms(t, 1, 1)) {
            t.deadline = crate::time::SimTime::from_ms(rec.submit_ms + t.qos.ect_factor() * lat.ceil() as u64);
        }
    }
    Ok(TaskWorkload { tasks, profiles: Some(profiles) })
}
