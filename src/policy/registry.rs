//! The policy registry: one [`PolicySpec`] (serde, tagged by `kind`) for
//! every policy, each kind with its own options struct, and one place that
//! builds a policy from its spec and a [`BuildContext`].
//!
//! A policy's options struct holds its defaults in one `Default` impl
//! (`#[serde(default, deny_unknown_fields)]`) and implements
//! [`BuildPolicy`]: `validate` (once, naming the option) and `build`. Adding a
//! policy is its file plus one line of the [`registry!`] table below, e.g.
//!
//! ```text
//! /// Preemptive shortest remaining time first.
//! "srtf" => Srtf(crate::policy::srtf::SrtfOptions),
//! ```
//!
//! which gives it a `kind` in run specs and manifests, a value of `--policy`
//! and of a sweep's `policy` key (with its default options), and its builder.
//! `docs/writing-a-policy.md` walks through one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::Policy;
use super::config::PolicyConfig;
use super::genie::{GenieOptions, GeniePolicy, GenieProfiles, GenieVariant};
use super::placement::PlacementKind;
use super::queue::QueueOrder;
use super::rifling::{Agent, RiflingMode, RiflingParams, RiflingPolicy};
use crate::cluster::{Cluster, ShareLimits};
use crate::error::{ConfigError, RunError, TraceError};
use crate::ids::VcId;
use crate::profile::db::{ProfileDb, ProfileSet};

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
    fn db_for(&self, placement: PlacementKind) -> Option<Arc<ProfileDb>> {
        let reads = matches!(placement, PlacementKind::MemoryEfficiency | PlacementKind::Iawp);
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
}

/// Declares every policy kind: `"kind" => Variant(OptionsType)`, with the doc
/// comment the command line shows for it (and `#[value(skip)]` for a kind
/// that is no value of `--policy`). Generates [`PolicySpec`] (serde, tagged
/// by `kind`), [`PolicyName`] (the `--policy` values) and
/// [`KINDS`].
macro_rules! registry {
    ($($(#[doc = $doc:literal])* $(#[value($($cli:tt)*)])? $kind:literal => $variant:ident($opts:ty)),* $(,)?) => {
        /// A policy and its options: plain data, tagged by `kind` (`{"kind":
        /// "fifo", "backfill": true}`), each kind's options defaulted field by
        /// field from its options struct's `Default`.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum PolicySpec {
            $($(#[doc = $doc])* #[serde(rename = $kind)] $variant($opts),)*
        }

        /// Every policy kind by its command-line name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum PolicyName {
            $($(#[doc = $doc])* $(#[value($($cli)*)])? #[value(name = $kind)] $variant,)*
        }

        /// Every registered kind, in registry order.
        pub const KINDS: &[&str] = &[$($kind),*];

        impl PolicyName {
            /// The registry kind (`fifo`, `genie-fifo`, ...).
            pub fn kind(self) -> &'static str {
                match self { $(PolicyName::$variant => $kind,)* }
            }

            /// The spec of this kind with every option at its default.
            pub fn default_spec(self) -> PolicySpec {
                match self { $(PolicyName::$variant => PolicySpec::$variant(<$opts>::default()),)* }
            }

            /// Where `options` (a spec's policy object without its `kind`)
            /// fails to parse as this kind's options struct: the JSON path
            /// of the bad field (`backfill`) and serde's message. Serde's
            /// internally tagged enums lose the path inside the variant;
            /// this recovers it for error messages. `None` if it parses.
            pub fn options_error(self, options: serde_json::Value) -> Option<(String, String)> {
                match self {
                    $(PolicyName::$variant => serde_path_to_error::deserialize::<_, $opts>(options)
                        .err()
                        .map(|e| (e.path().to_string(), e.inner().to_string())),)*
                }
            }
        }

        impl PolicySpec {
            /// The registry kind.
            pub fn kind(&self) -> &'static str {
                match self { $(PolicySpec::$variant(_) => $kind,)* }
            }

            /// The kind as a [`PolicyName`].
            pub fn name(&self) -> PolicyName {
                match self { $(PolicySpec::$variant(_) => PolicyName::$variant,)* }
            }

            fn options(&self) -> &dyn BuildPolicy {
                match self { $(PolicySpec::$variant(o) => o,)* }
            }
        }
    };
}

registry! {
    /// First in, first out (submit order).
    "fifo" => Fifo(QueueOptions),
    /// Shortest job first by the trace duration.
    "sjf" => Sjf(QueueOptions),
    /// GENIE (QoS-aware; moldable tasks, `--workload genie`).
    "genie" => Genie(GenieFamilyOptions),
    /// GENIE's FIFO baseline: arrival order, best-CER placement.
    "genie-fifo" => GenieFifo(GenieFamilyOptions),
    /// Min-Min: earliest ECT first, minimum-latency placement.
    "min-min" => MinMin(GenieFamilyOptions),
    /// Weighted Fair: by the mean of arrival time and ECT.
    "weighted-fair" => WeightedFair(GenieFamilyOptions),
    /// Tetris+Perf: highest predicted rate, shortest predicted latency first.
    "tetris-perf" => TetrisPerf(GenieFamilyOptions),
    /// Tetris+CER: best CER, shortest predicted latency first, no QoS.
    "tetris-cer" => TetrisCer(GenieFamilyOptions),
    /// Preemptive shortest remaining time first over the VC partitions
    /// (`--policy-opt` sets its options; `--checkpoint` the preemption cost).
    "srtf" => Srtf(crate::policy::srtf::SrtfOptions),
    /// RIFLING: online tabular Q-learning over placements (moldable tasks).
    "rifling" => Rifling(RiflingOptions),
    /// RIFLING from a trained table (`--rifling-table`), greedy, not learning.
    "rifling-frozen" => RiflingFrozen(RiflingOptions),
    /// FCFS, a uniformly random feasible placement per task (moldable tasks).
    "random-placement" => RandomPlacement(RiflingOptions),
    /// IAWP: FIFO admitting onto a shared GPU the queued job least similar to
    /// its tenants (`--policy fifo --placement iawp` on the command line).
    #[value(skip)]
    "iawp" => Iawp(IawpOptions),
}

impl PolicyName {
    /// The queue order of the queue policies (FIFO for the others, unused there).
    pub fn queue_order(self) -> QueueOrder {
        if self == PolicyName::Sjf { QueueOrder::Sjf } else { QueueOrder::Fifo }
    }

    /// The RIFLING mode, if it is one of the RIFLING policies.
    pub fn rifling(self) -> Option<RiflingMode> {
        match self {
            PolicyName::Rifling => Some(RiflingMode::Online),
            PolicyName::RiflingFrozen => Some(RiflingMode::Frozen),
            PolicyName::RandomPlacement => Some(RiflingMode::Random),
            _ => None,
        }
    }

    /// The GENIE-family variant, if it is one.
    pub fn genie(self) -> Option<GenieVariant> {
        use GenieVariant as G;
        match self {
            PolicyName::Genie => Some(G::Genie),
            PolicyName::GenieFifo => Some(G::GenieFifo),
            PolicyName::MinMin => Some(G::MinMin),
            PolicyName::WeightedFair => Some(G::WeightedFair),
            PolicyName::TetrisPerf => Some(G::TetrisPerf),
            PolicyName::TetrisCer => Some(G::TetrisCer),
            _ => None,
        }
    }
}

impl Default for PolicySpec {
    /// Strict FIFO with consolidated placement, the command line's default.
    fn default() -> Self {
        PolicySpec::Fifo(QueueOptions::default())
    }
}

impl PolicySpec {
    /// Checks the options ([`BuildPolicy::validate`]).
    ///
    /// # Errors
    /// A message naming the option at fault.
    pub fn validate(&self) -> Result<(), String> {
        self.options().validate(self.kind())
    }

    /// Builds the policy ([`BuildPolicy::build`]).
    ///
    /// # Errors
    /// As [`BuildPolicy::build`].
    pub fn build(&self, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        self.options().build(self.kind(), ctx)
    }

    /// The placement jobs are admitted under ([`BuildPolicy::placement`]).
    pub fn placement(&self) -> PlacementKind {
        self.options().placement()
    }

    /// The run's GPU-sharing limits ([`BuildPolicy::share_limits`]).
    pub fn share_limits(&self) -> ShareLimits {
        self.options().share_limits()
    }

    /// Whether the policy schedules only moldable tasks.
    pub fn moldable(&self) -> bool {
        self.options().moldable()
    }

    /// Whether the run times the policy's decisions.
    pub fn time_decisions(&self) -> bool {
        self.options().time_decisions()
    }

    /// The GENIE-family policy of `variant` with options `o`.
    pub fn genie_family(variant: GenieVariant, o: GenieFamilyOptions) -> PolicySpec {
        match variant {
            GenieVariant::Genie => PolicySpec::Genie(o),
            GenieVariant::GenieFifo => PolicySpec::GenieFifo(o),
            GenieVariant::MinMin => PolicySpec::MinMin(o),
            GenieVariant::WeightedFair => PolicySpec::WeightedFair(o),
            GenieVariant::TetrisPerf => PolicySpec::TetrisPerf(o),
            GenieVariant::TetrisCer => PolicySpec::TetrisCer(o),
        }
    }

    /// The RIFLING-family policy of `mode` with options `o`.
    pub fn rifling_family(mode: RiflingMode, o: RiflingOptions) -> PolicySpec {
        match mode {
            RiflingMode::Online => PolicySpec::Rifling(o),
            RiflingMode::Frozen => PolicySpec::RiflingFrozen(o),
            RiflingMode::Random => PolicySpec::RandomPlacement(o),
        }
    }

    /// The GENIE models file a GENIE-family policy names, if any.
    pub fn genie_models(&self) -> Option<&Path> {
        match self {
            PolicySpec::Genie(o)
            | PolicySpec::GenieFifo(o)
            | PolicySpec::MinMin(o)
            | PolicySpec::WeightedFair(o)
            | PolicySpec::TetrisPerf(o)
            | PolicySpec::TetrisCer(o) => o.models.as_deref(),
            _ => None,
        }
    }

    /// The RIFLING table a RIFLING-family policy names, if any.
    pub fn rifling_table(&self) -> Option<&Path> {
        match self {
            PolicySpec::Rifling(o) | PolicySpec::RiflingFrozen(o) | PolicySpec::RandomPlacement(o) => {
                o.table.as_deref()
            }
            _ => None,
        }
    }
}

/// The queue policy a [`PolicyConfig`] describes, with default sharing
/// limits: `fifo` or `sjf`, or `iawp` for FIFO with the IAWP placement.
impl From<PolicyConfig> for PolicySpec {
    fn from(c: PolicyConfig) -> Self {
        let q = QueueOptions { backfill: c.backfill, placement: c.placement, share: ShareLimits::default() };
        match c.order {
            QueueOrder::Fifo if c.placement == PlacementKind::Iawp => {
                PolicySpec::Iawp(IawpOptions { backfill: c.backfill, share: q.share })
            }
            QueueOrder::Fifo => PolicySpec::Fifo(q),
            QueueOrder::Sjf => PolicySpec::Sjf(q),
        }
    }
}

/// Options of the queue policies `fifo` and `sjf`: backfill × placement, with
/// the sharing limits the sharing placements obey.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueOptions {
    /// Let later jobs start when the head of the queue does not fit (greedy,
    /// no reservation); strict otherwise. Default false.
    pub backfill: bool,
    /// Placement rule. Default consolidate.
    pub placement: PlacementKind,
    /// GPU-sharing limits (tenant cap, memory headroom) of the sharing
    /// placements; [`ShareLimits::default`] by default.
    pub share: ShareLimits,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions { backfill: false, placement: PlacementKind::Consolidate, share: ShareLimits::default() }
    }
}

impl BuildPolicy for QueueOptions {
    fn validate(&self, kind: &str) -> Result<(), String> {
        if self.placement == PlacementKind::Iawp && kind != "fifo" {
            return Err(format!("--placement iawp is a FIFO policy of its own; it cannot use --policy {kind}"));
        }
        self.share.validate().map_err(|e| e.to_string())
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let order = if kind == "sjf" { QueueOrder::Sjf } else { QueueOrder::Fifo };
        let config = PolicyConfig { order, backfill: self.backfill, placement: self.placement };
        Ok(config.build_with_profiles(ctx.cluster.partitions().len(), ctx.db_for(self.placement).as_ref())?)
    }

    fn placement(&self) -> PlacementKind {
        self.placement
    }

    fn share_limits(&self) -> ShareLimits {
        self.share
    }
}

/// Options of IAWP (a FIFO policy of its own that places jobs on shared
/// GPUs); the defaults (derived): strict, [`ShareLimits::default`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IawpOptions {
    /// Let later jobs start when the head of the queue does not fit. Default false.
    pub backfill: bool,
    /// GPU-sharing limits; [`ShareLimits::default`] by default.
    pub share: ShareLimits,
}

impl BuildPolicy for IawpOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        self.share.validate().map_err(|e| e.to_string())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let config = PolicyConfig { order: QueueOrder::Fifo, backfill: self.backfill, placement: PlacementKind::Iawp };
        Ok(config.build_with_profiles(ctx.cluster.partitions().len(), ctx.db_for(PlacementKind::Iawp).as_ref())?)
    }

    fn placement(&self) -> PlacementKind {
        PlacementKind::Iawp
    }

    fn share_limits(&self) -> ShareLimits {
        self.share
    }
}

/// Options of the GENIE family (`genie`, `genie-fifo`, `min-min`,
/// `weighted-fair`, `tetris-perf`, `tetris-cer`; the kind picks the variant).
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
}

impl Default for GenieFamilyOptions {
    fn default() -> Self {
        GenieFamilyOptions { theta: 0.4, backfill: false, best_fit_nodes: false, models: None }
    }
}

/// The GENIE variant of a registry kind.
fn genie_variant(kind: &str) -> GenieVariant {
    use clap::ValueEnum;
    GenieVariant::from_str(kind, false).unwrap_or(GenieVariant::Genie)
}

impl BuildPolicy for GenieFamilyOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        crate::bounds::theta(self.theta).map(|_| ()).map_err(|e| format!("--theta {e}"))
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        if !ctx.tasks {
            return Err(ConfigError(
                "GENIE-family and RIFLING policies schedule moldable tasks: use `--workload genie`".into(),
            )
            .into());
        }
        let profiles = match ctx.genie_profiles.take() {
            Some(p) => p,
            None => {
                genie_profiles(self.models.as_deref(), ctx.cluster, &ctx.db(), &ctx.db_name, ctx.seed, ctx.artefacts)?
            }
        };
        let p = ctx.cluster.partition(VcId(0));
        let online = super::genie::OnlineProfiling {
            gpu_type: ctx.cluster.node(p.nodes[0]).gpu_type.clone(),
            nodes: p.nodes.len() as u32,
            gpus_per_node: p.max_node_gpus,
            seed: ctx.seed,
            config: profiles.config,
        };
        let options = GenieOptions {
            variant: genie_variant(kind),
            theta: self.theta,
            backfill: self.backfill,
            best_fit_nodes: self.best_fit_nodes,
        };
        Ok(Box::new(GeniePolicy::new(options, profiles, ctx.db()).with_online_profiling(online)))
    }

    fn moldable(&self) -> bool {
        true
    }

    fn time_decisions(&self) -> bool {
        true
    }
}

/// Options of the RIFLING family (`rifling` learns online, `rifling-frozen`
/// runs a trained table greedily, `random-placement` places at random); the
/// defaults (derived): [`RiflingParams::default`], no table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RiflingOptions {
    /// The agent's parameters (`specs/policies.md` §3.2;
    /// [`RiflingParams::default`] = the spec's proposal). A loaded table
    /// keeps its own, except that an online agent learns on with these.
    pub params: RiflingParams,
    /// A Q-table saved by `dlsched rifling-train`: the frozen policy's table
    /// (required there), or an online agent's starting point. Default none.
    pub table: Option<PathBuf>,
}

/// The RIFLING mode of a registry kind.
fn rifling_mode(kind: &str) -> RiflingMode {
    match kind {
        "rifling-frozen" => RiflingMode::Frozen,
        "random-placement" => RiflingMode::Random,
        _ => RiflingMode::Online,
    }
}

impl BuildPolicy for RiflingOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        self.params.validate()
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let mode = rifling_mode(kind);
        if !ctx.tasks {
            return Err(ConfigError(
                "GENIE-family and RIFLING policies schedule moldable tasks: use `--workload genie`".into(),
            )
            .into());
        }
        let cluster = ctx.cluster;
        let p = cluster.partition(VcId(0));
        let actions = (p.nodes.len() as u32 * p.max_node_gpus) as usize + 1;
        let agent = match (ctx.agent.take(), &self.table) {
            (Some(a), _) => a,
            (None, Some(path)) => {
                let (mut a, trained_on) = match ctx.artefacts.rifling.get(path) {
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
                if mode == RiflingMode::Online {
                    // An online agent keeps learning from the table with
                    // this run's parameters; its groups come from the table.
                    if self.params.k != a.params.k {
                        return Err(ConfigError(format!(
                            "{}: the table's groups come from k = {}; this run asks k = {} (--rifling-k)",
                            path.display(),
                            a.params.k,
                            self.params.k
                        ))
                        .into());
                    }
                    a.params = self.params;
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
                a.reseed(ctx.seed);
                Arc::new(Mutex::new(a))
            }
            (None, None) if mode == RiflingMode::Frozen => {
                return Err(ConfigError("rifling-frozen needs a trained table (--rifling-table FILE)".into()).into());
            }
            (None, None) => Arc::new(Mutex::new(Agent::new(self.params, actions, ctx.seed))),
        };
        Ok(Box::new(RiflingPolicy::new(mode, agent, ctx.db())))
    }

    fn moldable(&self) -> bool {
        true
    }

    fn time_decisions(&self) -> bool {
        true
    }
}

/// Files that many runs read (RIFLING tables, fitted GENIE models, profile
/// databases), each read and checked once and shared, keyed by the path the
/// runs name (the builtin profile database too, parsed on first use). A
/// sweep builds one before its runs, so that 100,000 runs of one table parse
/// it once, not 200,000 times.
#[derive(Clone, Debug, Default)]
pub struct Artefacts {
    rifling: BTreeMap<PathBuf, Arc<(Agent, Option<String>)>>,
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
/// [`super::genie::profile`]).
///
/// # Errors
/// An unreadable file, or models fitted on another GPU type.
pub fn genie_profiles(
    models: Option<&Path>,
    cluster: &Cluster,
    db: &ProfileDb,
    db_name: &str,
    seed: u64,
    artefacts: &Artefacts,
) -> Result<GenieProfiles, RunError> {
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
        return Ok(models);
    }
    Ok(super::genie::profile(db, db_name, &gpu_type, p.nodes.len() as u32, p.max_node_gpus, seed, Default::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip_and_default_per_field() {
        // A missing option takes its struct's default; the kind picks the variant.
        let s: PolicySpec = serde_json::from_str(r#"{"kind": "sjf", "backfill": true}"#).unwrap();
        assert_eq!(s, PolicySpec::Sjf(QueueOptions { backfill: true, ..QueueOptions::default() }));
        let g: PolicySpec = serde_json::from_str(r#"{"kind": "min-min", "theta": 1.5}"#).unwrap();
        assert_eq!(g, PolicySpec::MinMin(GenieFamilyOptions { theta: 1.5, ..Default::default() }));
        for name in <PolicyName as clap::ValueEnum>::value_variants() {
            let spec = name.default_spec();
            let back: PolicySpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
            assert_eq!(back, spec);
            assert_eq!(spec.kind(), name.kind());
        }
        assert_eq!(KINDS.len(), 13);
    }

    #[test]
    fn unknown_options_and_kinds_are_refused_by_name() {
        let e = serde_json::from_str::<PolicySpec>(r#"{"kind": "fifo", "thetaa": 1}"#).unwrap_err().to_string();
        assert!(e.contains("unknown field `thetaa`"), "{e}");
        let e = serde_json::from_str::<PolicySpec>(r#"{"kind": "nosuch"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown variant `nosuch`"), "{e}");
        let e = PolicySpec::Sjf(QueueOptions { placement: PlacementKind::Iawp, ..Default::default() })
            .validate()
            .unwrap_err();
        assert!(e.contains("iawp") && e.contains("sjf"), "{e}");
        assert!(PolicySpec::Genie(GenieFamilyOptions { theta: -1.0, ..Default::default() }).validate().is_err());
    }
}
