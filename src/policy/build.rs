//! What every policy is built from: the [`BuildPolicy`] trait its options
//! struct implements, the [`BuildContext`] of a run (cluster, profile
//! database, seed, artefacts), and the [`Artefacts`] a sweep's runs share.
//!
//! It sits below the policies and below [`super::registry`], which names
//! them all: a policy's file imports this one, never the registry, so adding
//! a policy closes no import circle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use super::Policy;
use super::genie::GenieProfiles;
use super::placement::PlacementKind;
use super::rifling::Agent;
use crate::cluster::{Cluster, ShareLimits};
use crate::error::{ConfigError, RunError, TraceError};
use crate::ids::VcId;
use crate::profile::RateModel;
use crate::profile::db::ProfileDb;
use crate::profile::set::ProfileSet;
use crate::workload::admission::AdmissionRule;

/// What a policy is built from, besides its options: the run's cluster,
/// profile database, seed and loaded artefacts.
pub struct BuildContext<'a> {
    /// The cluster the run simulates (partitions, nodes, GPU types).
    pub cluster: &'a Cluster,
    /// The run's profile database: `None` when the run reads none (trace
    /// speed, no model figures), then [`BuildContext::db`] gives the builtin
    /// one of the artefact set, parsed on first use.
    pub db: Option<Arc<ProfileDb>>,
    /// The name of that database for manifests (`builtin` or the directory).
    pub db_name: String,
    /// The run's master seed; a policy draws from its own named streams
    /// ([`crate::rng::stream`]).
    pub seed: u64,
    /// Whether the workload is moldable tasks (`--workload genie`).
    pub tasks: bool,
    /// Files read once for many runs (RIFLING tables, GENIE models).
    pub artefacts: &'a Artefacts,
    /// A RIFLING agent the caller keeps (e.g. across training episodes),
    /// driven instead of a fresh or loaded one.
    pub agent: Option<Arc<Mutex<Agent>>>,
    /// GENIE models the run already fitted or loaded (for the workload's
    /// predicted ECT), so that the policy uses the same ones.
    pub genie_profiles: Option<GenieProfiles>,
    /// The ground truth GENIE's profiler measures (the run's rate model's,
    /// [`crate::experiment::RateModelKind::genie_truth`]).
    pub genie_truth: crate::profile::genie::GenieTruth,
    /// Builds a fresh copy of the run's rate model (trace speed, or the
    /// profile model the run's `--rate-model` names, over the run's
    /// database), for a policy that predicts a job's speed on a candidate
    /// placement (Themis's bids). The copy has its own fallback counters, so
    /// the run's counters stay the engine's.
    pub rate_model: &'a dyn Fn() -> Box<dyn RateModel>,
    /// What a prediction-using policy's predictions read (`--predictor`,
    /// [`crate::policy::predictor`]): the default `fitted` leaves every
    /// policy as it was.
    pub predictor: crate::policy::predictor::PredictorKind,
    /// Which batch sizes GENIE's profiler measures (`--profile-batches`).
    pub genie_batches: super::genie::ProfileBatches,
}

impl BuildContext<'_> {
    /// The run's profile database, the builtin one (the artefact set's)
    /// when the run names none.
    pub fn db(&self) -> Arc<ProfileDb> {
        self.db.clone().unwrap_or_else(|| self.artefacts.profiles().builtin())
    }

    /// The database for a queue policy placing by `placement`: the run's; or,
    /// when the run reads none, the builtin one for the rules that read it
    /// (memory efficiency, IAWP's SM proxy), from the artefact set.
    pub fn db_for(&self, placement: PlacementKind) -> Option<Arc<ProfileDb>> {
        let reads = matches!(placement, PlacementKind::MemeffPack | PlacementKind::Iawp);
        self.db.clone().or_else(|| reads.then(|| self.artefacts.profiles().builtin()))
    }
}

/// The options struct of one policy kind: how it is checked and built.
pub trait BuildPolicy {
    /// Checks the options, once, before any run. `kind` is the registry kind
    /// (several kinds may share one options type).
    ///
    /// # Errors
    /// A message naming the option (its command-line flag or sweep key).
    fn validate(&self, kind: &str) -> Result<(), String> {
        let _ = kind;
        Ok(())
    }

    /// The policy's round or lease length, ms, if it preempts running jobs
    /// at fixed period boundaries (LAS, Gandiva, Themis, Gavel); `None`
    /// otherwise. A run refuses a checkpoint model whose largest overhead
    /// is not shorter than this: a job preempted every period would pay at
    /// least as much overhead per period as it works, and never finish.
    fn preemption_period_ms(&self, kind: &str) -> Option<u64> {
        let _ = kind;
        None
    }

    /// Builds the policy for a run.
    ///
    /// # Errors
    /// A [`RunError`] when the options do not fit the run (its cluster, its
    /// workload) or an artefact cannot be read.
    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError>;

    /// The placement rule jobs are admitted under (the GPUs a job may use,
    /// whether it may share): [`PlacementKind::Consolidate`] unless the
    /// policy places with another rule.
    fn placement(&self) -> PlacementKind {
        PlacementKind::Consolidate
    }

    /// GPU-sharing limits the run's cluster enforces (defaults unless the
    /// policy shares GPUs).
    fn share_limits(&self) -> ShareLimits {
        ShareLimits::default()
    }

    /// Whether the policy schedules only moldable tasks (`--workload genie`).
    fn moldable(&self) -> bool {
        false
    }

    /// Whether the run times the policy's decisions (`timing.json`).
    fn time_decisions(&self) -> bool {
        false
    }

    /// Whether the policy's predictions follow the run's predictor
    /// ([`BuildContext::predictor`], `--predictor`); a run refuses a
    /// predictor other than `fitted` for a policy that says no.
    fn predicts(&self) -> bool {
        false
    }

    /// The policy's own limit on the jobs it can ever start, which
    /// admission applies after the placement rule's, so that a job the
    /// policy would never start is skipped with a named reason instead of
    /// waiting for ever ([`AdmissionRule::Any`] unless the policy has one).
    fn admission_rule(&self, kind: &str) -> AdmissionRule {
        let _ = kind;
        AdmissionRule::Any
    }
}

/// Files that many runs read (RIFLING tables, fitted GENIE models, profile
/// databases), each read and checked once and shared, keyed by the path the
/// runs name (the builtin profile database too, parsed on first use). A
/// sweep builds one before its runs, so that 100,000 runs of one table parse
/// it once, not 200,000 times.
#[derive(Clone, Debug, Default)]
pub struct Artefacts {
    pub(crate) rifling: BTreeMap<PathBuf, Arc<(Agent, Option<String>)>>,
    genie: BTreeMap<PathBuf, Arc<GenieProfiles>>,
    /// The profile databases the runs read, each parsed once, on first use.
    profiles: ProfileSet,
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
    pub fn rifling_table(&mut self, path: &Path) -> Result<Arc<(Agent, Option<String>)>, TraceError> {
        if let Some(t) = self.rifling.get(path) {
            return Ok(t.clone());
        }
        let t = Arc::new(load_rifling_table(path)?);
        self.rifling.insert(path.to_path_buf(), t.clone());
        Ok(t)
    }

    /// The GENIE models at `path` ([`load_genie_profiles`]), read on first use.
    ///
    /// # Errors
    /// As [`load_genie_profiles`].
    pub fn genie_models(&mut self, path: &Path) -> Result<Arc<GenieProfiles>, TraceError> {
        if let Some(m) = self.genie.get(path) {
            return Ok(m.clone());
        }
        let m = Arc::new(load_genie_profiles(path)?);
        self.genie.insert(path.to_path_buf(), m.clone());
        Ok(m)
    }

    /// The profile databases the runs share (each parsed on first use).
    pub fn profiles(&self) -> &ProfileSet {
        &self.profiles
    }

    /// Distinct files held (RIFLING tables and GENIE models).
    pub fn len(&self) -> usize {
        self.rifling.len() + self.genie.len()
    }

    /// True when no file is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reads an agent saved by `dlsched rifling-train`.
///
/// # Errors
/// A [`TraceError`] naming the file when it cannot be read or parsed.
pub fn load_rifling_agent(path: &Path) -> Result<Agent, TraceError> {
    load_rifling_table(path).map(|(a, _)| a)
}

/// [`load_rifling_agent`] with the cluster named in the file's manifest, after
/// checking the table: parameters in range, centroids finite and ascending
/// (at most `k` of them), every Q row `actions` long and finite.
///
/// # Errors
/// A [`TraceError`] naming the file and what is wrong.
pub fn load_rifling_table(path: &Path) -> Result<(Agent, Option<String>), TraceError> {
    let text = crate::io::read_text(path)?;
    #[derive(Deserialize)]
    struct Manifest {
        cluster: Option<String>,
    }
    #[derive(Deserialize)]
    struct Saved {
        agent: Agent,
        manifest: Option<Manifest>,
    }
    let bad = |message: String| TraceError::Format { file: path.to_path_buf(), message };
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
        if models.config.truth != truth {
            return Err(ConfigError(format!(
                "{}: these GENIE models were profiled against the `{}` ground truth, the run uses `{}` (its rate model); profile with `dlsched genie-profile --truth {}`",
                path.display(),
                models.config.truth.name(),
                truth.name(),
                truth.name()
            ))
            .into());
        }
        if models.config.batches != batches {
            return Err(ConfigError(format!(
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

/// Refuses a sharing placement for a policy that places jobs on whole GPUs
/// (`las`, `qssf`): only `consolidate`, `first-fit` and `recorded` are allowed.
///
/// # Errors
/// A message naming the policy kind and the placement.
pub fn whole_gpu_placement(kind: &str, placement: PlacementKind) -> Result<(), String> {
    if placement.may_share() {
        return Err(format!(
            "{kind}: placement {} shares GPUs; {kind} places jobs on whole GPUs (consolidate, first-fit, recorded)",
            placement.name()
        ));
    }
    Ok(())
}
