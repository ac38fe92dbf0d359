//! What every policy is built from: the [`BuildPolicy`] trait its options
//! struct implements, the [`BuildContext`] of a run (cluster, profile
//! database, seed, artefacts, and the [`Extensions`] the run's stages add),
//! and the [`Artefacts`] a sweep's runs share (any [`Artefact`] a policy
//! family reads, by type and path). Nothing here names a policy: a family
//! brings its own types through these two open ends.
//!
//! It sits below the policies and below [`super::registry`], which names
//! them all: a policy's file imports this one, never the registry, so adding
//! a policy closes no import circle.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Policy;
use super::placement::PlacementKind;
use crate::cluster::{Cluster, ShareLimits};
use crate::error::{RunError, TraceError};
use crate::profile::RateModel;
use crate::profile::db::ProfileDb;
use crate::profile::set::ProfileSet;
use crate::workload::admission::AdmissionRule;

/// What a policy is built from, besides its options: the run's cluster,
/// profile database, seed and loaded artefacts, and what the run's stages
/// added for the policy ([`Extensions`]).
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
    /// Files read once for many runs ([`Artefacts`]: profile databases,
    /// and whatever a policy family loads through [`Artefact`]).
    pub artefacts: &'a Artefacts,
    /// What the run's stages and its caller handed to the policy, by type: a
    /// policy family's own stage adds what its policies read (GENIE's
    /// profiler settings and fitted models), and a caller adds state it
    /// keeps across runs (a RIFLING agent or an LDWP network trained over
    /// episodes). A policy takes what it reads with [`Extensions::take`].
    pub extensions: Extensions,
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
}

/// Values handed to a run's policy by type, at most one of each type: the
/// open end of [`BuildContext`], through which a policy family's stage (or
/// the caller of a run) gives its policies what the generic pipeline knows
/// nothing about. Only the policy that reads a type looks for it.
#[derive(Default)]
pub struct Extensions {
    values: BTreeMap<TypeId, Box<dyn Any + Send>>,
}

impl Extensions {
    /// Adds `value`, replacing one of the same type; returns `self` for chaining.
    pub fn with<T: Any + Send>(mut self, value: T) -> Self {
        self.insert(value);
        self
    }

    /// Adds `value`, replacing (and returning) one of the same type.
    pub fn insert<T: Any + Send>(&mut self, value: T) -> Option<T> {
        self.values.insert(TypeId::of::<T>(), Box::new(value)).and_then(|b| b.downcast::<T>().ok().map(|b| *b))
    }

    /// The value of type `T`, if one was added.
    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        self.values.get(&TypeId::of::<T>()).and_then(|b| b.downcast_ref::<T>())
    }

    /// Takes the value of type `T` out, if one was added.
    pub fn take<T: Any + Send>(&mut self) -> Option<T> {
        self.values.remove(&TypeId::of::<T>()).and_then(|b| b.downcast::<T>().ok().map(|b| *b))
    }

    /// How many values are held.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Extensions({} values)", self.values.len())
    }
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

    /// Whether the policy schedules only work-defined jobs (a run whose
    /// workload has a duration-defined job is then refused before it
    /// starts, naming the job).
    fn work_defined_only(&self) -> bool {
        false
    }

    /// Whether the policy schedules only ElasticFlow jobs with deadlines
    /// (`elasticflow`, `edf`): work-defined jobs with their own work
    /// (`jobs-csv` `num_iteration`) and a `deadline`. A run with another
    /// job is refused before it starts, naming the trace file, line and
    /// column.
    fn deadline_jobs_only(&self) -> bool {
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

    /// The sweep-file keys (and command-line flags) of the policy's family
    /// that set options of this kind, each as the option it sets
    /// ([`FamilyKey`]): the family's own spelling of [`BuildPolicy`] options,
    /// translated into the one option system (`policy_opt.NAME`) before a
    /// run's `policy_opt` options apply. `from_file` is true for a sweep or
    /// experiment file (some keys mean less there). None unless the family
    /// has such keys.
    fn family_keys(&self, kind: &str, from_file: bool) -> &'static [FamilyKey] {
        let _ = (kind, from_file);
        &[]
    }

    /// Reads the files the options name into `artefacts` (once for a whole
    /// sweep), so that a bad file fails the sweep at load, before any run.
    ///
    /// # Errors
    /// The option naming the file (as [`FamilyKey::option`] spells it) and
    /// why it cannot be read.
    fn load_artefacts(&self, artefacts: &mut Artefacts) -> Result<(), (&'static str, TraceError)> {
        let _ = artefacts;
        Ok(())
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

/// A sweep-file key (and command-line flag, `--` and dashes) that a policy
/// family declares for one of its options, next to its options struct: the
/// key is its users' spelling, the option the one option system's
/// (`policy_opt.NAME`), where the value goes.
#[derive(Clone, Copy, Debug)]
pub struct FamilyKey {
    /// The raw-spec key (`rifling_alpha`; `--rifling-alpha`).
    pub key: &'static str,
    /// The option it sets, dotted when nested (`params.alpha`).
    pub option: &'static str,
    /// Whether the value is a path, read relative to an experiment file's
    /// directory (a `policy_opt` path is taken as written).
    pub path: bool,
    /// A range check giving the message for `{key} {message}`, for a
    /// number whose options struct checks it with a flag's spelling.
    pub check: Option<fn(f64) -> Result<f64, String>>,
    /// For a key that an experiment file may not set for a policy outside
    /// the family, the family's name in the message (`GENIE-family`); a key
    /// without it is left to the family's policies (a sweep over policies of
    /// several families sets them for all).
    pub only_for: Option<&'static str>,
}

impl FamilyKey {
    /// A key setting `option`, a plain value.
    pub const fn new(key: &'static str, option: &'static str) -> Self {
        FamilyKey { key, option, path: false, check: None, only_for: None }
    }

    /// A key setting `option`, a path.
    pub const fn path(key: &'static str, option: &'static str) -> Self {
        FamilyKey { key, option, path: true, check: None, only_for: None }
    }
}

/// Reads a file a trainer saved, `{"agent": A, "manifest": {"cluster":
/// NAME, ...}}`: the agent and the cluster it was trained on. `what` names
/// the kind of file in the message (`a RIFLING table`).
///
/// # Errors
/// A [`TraceError`] naming the file when it cannot be read or parsed.
pub fn read_saved_agent<A: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
) -> Result<(A, Option<String>), TraceError> {
    let text = crate::io::read_text(path)?;
    #[derive(serde::Deserialize)]
    struct Manifest {
        cluster: Option<String>,
    }
    #[derive(serde::Deserialize)]
    #[serde(bound = "A: serde::de::DeserializeOwned")]
    struct Saved<A> {
        agent: A,
        manifest: Option<Manifest>,
    }
    let s = serde_json::from_str::<Saved<A>>(&text).map_err(|e| TraceError::Format {
        file: path.to_path_buf(),
        message: format!("not {what} (line {}, column {}): {e}", e.line(), e.column()),
    })?;
    Ok((s.agent, s.manifest.and_then(|m| m.cluster)))
}

/// A file that many runs read and that is worth reading once: a RIFLING
/// table, fitted GENIE models, an LDWP network. The policy family that
/// reads it implements this next to its policy, and [`Artefacts`] keeps
/// one copy per path.
pub trait Artefact: Any + Send + Sync + Sized {
    /// Reads and checks the file.
    ///
    /// # Errors
    /// A [`TraceError`] naming the file and what is wrong.
    fn load(path: &Path) -> Result<Self, TraceError>;
}

/// Files that many runs read ([`Artefact`]s: RIFLING tables, fitted GENIE
/// models, ...; and profile databases), each read and checked once and
/// shared, keyed by its type and the path the runs name (the builtin
/// profile database too, parsed on first use). A sweep builds one before
/// its runs, so that 100,000 runs of one table parse it once, not 200,000
/// times.
#[derive(Clone, Default)]
pub struct Artefacts {
    files: BTreeMap<(TypeId, PathBuf), Arc<dyn Any + Send + Sync>>,
    /// The profile databases the runs read, each parsed once, on first use.
    profiles: ProfileSet,
}

impl std::fmt::Debug for Artefacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Artefacts")
            .field("files", &self.files.keys().map(|(_, p)| p).collect::<Vec<_>>())
            .field("profiles", &self.profiles)
            .finish()
    }
}

/// Two sets are equal when they hold the same files (the contents are those
/// files', read once).
impl PartialEq for Artefacts {
    fn eq(&self, other: &Self) -> bool {
        self.files.keys().eq(other.files.keys())
    }
}

impl Artefacts {
    /// The artefact of type `T` at `path`, read and checked on first use
    /// ([`Artefact::load`]) and kept.
    ///
    /// # Errors
    /// As [`Artefact::load`].
    pub fn load<T: Artefact>(&mut self, path: &Path) -> Result<Arc<T>, TraceError> {
        if let Some(t) = self.get::<T>(path) {
            return Ok(t);
        }
        let t = Arc::new(T::load(path)?);
        self.files.insert((TypeId::of::<T>(), path.to_path_buf()), t.clone());
        Ok(t)
    }

    /// The artefact of type `T` at `path` if this set holds it.
    pub fn get<T: Artefact>(&self, path: &Path) -> Option<Arc<T>> {
        let held = self.files.get(&(TypeId::of::<T>(), path.to_path_buf()))?;
        held.clone().downcast::<T>().ok()
    }

    /// The artefact of type `T` at `path`: this set's copy, or else read from
    /// the file (and not kept).
    ///
    /// # Errors
    /// As [`Artefact::load`].
    pub fn get_or_read<T: Artefact>(&self, path: &Path) -> Result<Arc<T>, TraceError> {
        match self.get::<T>(path) {
            Some(t) => Ok(t),
            None => T::load(path).map(Arc::new),
        }
    }

    /// The profile databases the runs share (each parsed on first use).
    pub fn profiles(&self) -> &ProfileSet {
        &self.profiles
    }

    /// Distinct files held (besides the profile databases).
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when no file is held.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_hold_one_value_per_type() {
        let mut x = Extensions::default().with(3_u32).with(String::from("a"));
        assert_eq!((x.len(), x.get::<u32>()), (2, Some(&3)));
        // Same type: replaced, the old value returned.
        assert_eq!(x.insert(4_u32), Some(3));
        assert_eq!(x.take::<u32>(), Some(4));
        assert_eq!(x.take::<u32>(), None);
        assert_eq!(x.get::<u64>(), None, "another type is another slot");
        assert_eq!(x.take::<String>().as_deref(), Some("a"));
        assert!(x.is_empty());
    }
}
