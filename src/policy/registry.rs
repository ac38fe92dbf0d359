//! The policy registry: one [`PolicySpec`] (serde, tagged by `kind`) for
//! every policy, each kind with its own options struct, and one place that
//! builds a policy from its spec and a [`BuildContext`].
//!
//! A policy's options struct holds its defaults in one `Default` impl
//! (`#[serde(default, deny_unknown_fields)]`) and implements
//! [`BuildPolicy`]: `validate` (once, naming the option) and `build`. Adding a
//! policy is its file plus one line of the `registry!` table below, e.g.
//!
//! ```text
//! /// Preemptive shortest remaining time first.
//! "srtf" => Srtf(crate::policy::srtf::SrtfOptions),
//! ```
//!
//! which gives it a `kind` in run specs and manifests, a value of `--policy`
//! and of a sweep's `policy` key (with its default options), and its builder.
//! `docs/writing-a-policy.md` walks through one.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Policy;
pub use super::build::{Artefact, Artefacts, BuildContext, BuildPolicy, Extensions, FamilyKey};
use super::config::PolicyConfig;
use super::genie::GenieVariant;
pub use super::genie_family::{GenieFamilyOptions, GenieRun, genie_profiles, load_genie_profiles};
use super::placement::PlacementKind;
use super::queue::QueueOrder;
use super::rifling::RiflingMode;
pub use super::rifling_family::{RiflingOptions, RiflingTable, load_rifling_agent, load_rifling_table};
use crate::cluster::ShareLimits;
use crate::error::RunError;
use crate::workload::admission::AdmissionRule;

/// Declares every policy kind: `"kind" => Variant(OptionsType)`, with the doc
/// comment the command line shows for it (and `#[value(skip)]` for a kind
/// that is no value of `--policy`). Generates [`PolicySpec`] (serde, tagged
/// by `kind`), [`PolicyName`] (the `--policy` values) and
/// [`KINDS`].
/// Whether a kind's `#[value(...)]` attribute keeps it off the command line.
macro_rules! skipped {
    (skip) => {
        true
    };
    ($($other:tt)*) => {
        false
    };
}

macro_rules! registry {
    ($($(#[doc = $doc:literal])* $(#[value($($cli:tt)*)])? $kind:literal => $variant:ident($opts:ty)),* $(,)?) => {
        /// A policy and its options: plain data, tagged by `kind` (`{"kind":
        /// "fifo", "backfill": true}`), each kind's options defaulted field by
        /// field from its options struct's `Default`. A kind registered from
        /// outside the crate ([`PolicyKind`]) is [`PolicySpec::Registered`]:
        /// it serialises the same way, and reads back through the
        /// [`PolicyKind`] that registered it ([`PolicyKind::spec`]); plain
        /// deserialisation knows the built-in kinds only.
        #[derive(Clone, Debug, PartialEq)]
        pub enum PolicySpec {
            $($(#[doc = $doc])* $variant($opts),)*
            /// A kind registered from outside the crate, with its options.
            Registered(RegisteredPolicy),
        }

        /// The built-in kinds as serde sees them (the serialised form of
        /// [`PolicySpec`]).
        #[derive(Serialize)]
        #[serde(tag = "kind")]
        enum BuiltinRef<'a> {
            $(#[serde(rename = $kind)] $variant(&'a $opts),)*
        }

        /// The built-in kinds read back.
        #[derive(Deserialize)]
        #[serde(tag = "kind")]
        enum Builtin {
            $(#[serde(rename = $kind)] $variant($opts),)*
        }

        impl Serialize for PolicySpec {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(PolicySpec::$variant(o) => BuiltinRef::$variant(o).serialize(s),)*
                    PolicySpec::Registered(r) => r.serialize(s),
                }
            }
        }

        impl<'de> Deserialize<'de> for PolicySpec {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(match Builtin::deserialize(d)? {
                    $(Builtin::$variant(o) => PolicySpec::$variant(o),)*
                })
            }
        }

        /// Every policy kind by its command-line name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
        #[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
        #[serde(rename_all = "kebab-case")]
        pub enum PolicyName {
            $($(#[doc = $doc])* $(#[cfg_attr(feature = "cli", value($($cli)*))])? #[cfg_attr(feature = "cli", value(name = $kind))] $variant,)*
        }

        impl crate::names::ValueNames for PolicyName {
            /// Every kind but those marked `#[value(skip)]` (no value of `--policy`).
            fn selectable() -> &'static [Self] {
                static SELECTABLE: std::sync::LazyLock<Vec<PolicyName>> = std::sync::LazyLock::new(|| {
                    [$((PolicyName::$variant, false $(|| skipped!($($cli)*))?)),*]
                        .into_iter()
                        .filter(|&(_, skip)| !skip)
                        .map(|(name, _)| name)
                        .collect()
                });
                &SELECTABLE
            }

            fn value_name(self) -> &'static str {
                self.kind()
            }
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
                match self {
                    $(PolicySpec::$variant(_) => $kind,)*
                    PolicySpec::Registered(r) => r.kind(),
                }
            }

            /// The kind as a [`PolicyName`]; `None` for a kind registered
            /// from outside the crate.
            pub fn name(&self) -> Option<PolicyName> {
                match self {
                    $(PolicySpec::$variant(_) => Some(PolicyName::$variant),)*
                    PolicySpec::Registered(_) => None,
                }
            }

            fn options(&self) -> &dyn BuildPolicy {
                match self {
                    $(PolicySpec::$variant(o) => o,)*
                    PolicySpec::Registered(r) => r.built.as_ref(),
                }
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
    /// GENIE's FIFO baseline as the paper defines it: arrival order,
    /// head-of-line blocking, a black-box placement (`--policy-opt blackbox`).
    "genie-fifo" => GenieFifo(GenieFamilyOptions),
    /// Min-Min as GENIE adapts it: earliest ECT first, a black-box placement.
    "min-min" => MinMin(GenieFamilyOptions),
    /// Weighted Fair: by the mean of arrival time and ECT, a black-box placement.
    "weighted-fair" => WeightedFair(GenieFamilyOptions),
    /// Tetris+Perf: highest predicted rate, best packing score first.
    "tetris-perf" => TetrisPerf(GenieFamilyOptions),
    /// Tetris+CER: best CER, best packing score first, no QoS.
    "tetris-cer" => TetrisCer(GenieFamilyOptions),
    /// Capacity (YARN) as GENIE adapts it: a GPU quota per task type, FIFO per queue, black-box placement.
    "capacity" => Capacity(GenieFamilyOptions),
    /// Not in the paper: arrival order, GENIE's best-CER placement (formerly named `genie-fifo`).
    "fifo-cer" => FifoCer(GenieFamilyOptions),
    /// Not in the paper: earliest ECT first, minimum predicted latency (formerly named `min-min`).
    "min-min-pred" => MinMinPred(GenieFamilyOptions),
    /// Not in the paper: Weighted Fair's order, best-CER placement (formerly named `weighted-fair`).
    "weighted-fair-cer" => WeightedFairCer(GenieFamilyOptions),
    /// Not in the paper: highest predicted rate, shortest predicted latency first (formerly named `tetris-perf`).
    "tetris-perf-srtf" => TetrisPerfSrtf(GenieFamilyOptions),
    /// Not in the paper: best CER, shortest predicted latency first (formerly named `tetris-cer`).
    "tetris-cer-srtf" => TetrisCerSrtf(GenieFamilyOptions),
    /// Preemptive shortest remaining time first over the VC partitions
    /// (`--policy-opt` sets its options; `--checkpoint` the preemption cost).
    "srtf" => Srtf(crate::policy::srtf::SrtfOptions),
    /// Tiresias DLAS: discretised least attained service on time, K queues
    /// (`--policy-opt`: queues, thresholds-s, promote-knob, placement, reference flags).
    "dlas" => Dlas(crate::policy::tiresias::TiresiasOptions),
    /// Tiresias DLAS-GPU: discretised 2D-LAS on GPU-time (options as `dlas`).
    "dlas-gpu" => DlasGpu(crate::policy::tiresias::TiresiasOptions),
    /// Tiresias-G: DLAS-GPU queues ordered by Gittins index (options as `dlas`, gittins-delta-s).
    "tiresias-gittins" => TiresiasGittins(crate::policy::tiresias::TiresiasOptions),
    /// Tiresias+TunedJobs as the Pollux simulator runs it: two-queue 2D-LAS on
    /// the workload's tuned GPUs and batch, at 60-s ticks (`--policy-opt interval-s=60`).
    "tiresias-tuned" => TiresiasTuned(crate::policy::tiresias_tuned::TiresiasTunedOptions),
    /// Optimus+Oracle+TunedJobs as the Pollux simulator runs it: greedy
    /// marginal-gain GPUs by remaining work, tuned batch, work-defined jobs only
    /// (`--policy-opt interval-s=60`).
    "optimus" => Optimus(crate::policy::optimus::OptimusOptions),
    /// Pollux (OSDI'21): elastic GPUs and batch of work-defined jobs, a genetic
    /// search for the best fairness-weighted speedups every interval
    /// (`--policy-opt interval-s=60, population=100, generations=100, patience=5`).
    "pollux" => Pollux(crate::policy::pollux::PolluxOptions),
    /// Sia (SOSP'23): per round one (GPU type, nodes, GPUs) configuration per
    /// work-defined job by an integer program over normalised goodputs
    /// (`--policy-opt interval-s=60, p=-0.5, lambda-n=1.1, clip=3000, type-aware=true`).
    "sia" => Sia(crate::policy::sia::SiaOptions),
    /// ElasticFlow (ASPLOS'23): admission by each job's minimum satisfactory
    /// share over time slots, leftover GPUs by marginal gain; ElasticFlow
    /// jobs with deadlines only (`--policy-opt slot-s=60`).
    "elasticflow" => ElasticFlow(crate::policy::elasticflow::ElasticFlowOptions),
    /// Earliest deadline first as ElasticFlow's baseline: elastic, preemptive,
    /// no admission control; ElasticFlow jobs with deadlines only (`--policy-opt slot-s=60`).
    "edf" => Edf(crate::policy::edf::EdfOptions),
    /// Chronus (SoCC'21) as ElasticFlow ran it: rigid jobs, 240-s leases
    /// chosen by an integer program keeping the most deadlines, unaccepted
    /// jobs on leftover GPUs; ElasticFlow jobs with deadlines only
    /// (`--policy-opt lease-s=240, exact-leases=1`).
    "chronus" => Chronus(crate::policy::chronus::ChronusOptions),
    /// Gandiva: time-slicing in rounds, packing by measured co-location
    /// speed, migration for locality (`--policy-opt`; `--checkpoint gandiva`).
    "gandiva" => Gandiva(crate::policy::gandiva::GandivaOptions),
    /// QSSF (Helios): non-preemptive, queue by expected GPU-time, oracle or
    /// history estimate (`--policy-opt estimator=history`).
    "qssf" => Qssf(crate::policy::qssf::QssfOptions),
    /// LAS: least attained service time-sharing, preempting at round
    /// boundaries (`--policy-opt round=360`).
    "las" => Las(crate::policy::las::LasOptions),
    /// Themis (NSDI'20): finish-time fairness over lease rounds, a
    /// placement-aware auction per VC (`--policy-opt lease-s=..., fairness-knob=...`).
    "themis" => Themis(crate::policy::themis::ThemisOptions),
    /// Gavel (OSDI'20): heterogeneity-aware max-min fairness by LP, realised
    /// in rounds (`--policy-opt round=360`).
    "gavel" => Gavel(crate::policy::gavel::GavelOptions),
    /// Gavel's heterogeneity-aware FIFO, realised in rounds.
    "gavel-fifo" => GavelFifo(crate::policy::gavel::GavelOptions),
    /// Gavel's maximum total throughput (`max_sum_throughput_perf`, the Sia
    /// artifact's Gavel), realised in rounds (`--policy-opt round=360,
    /// reset-interval=1920, keep-counters=false`).
    "gavel-max-sum" => GavelMaxSum(crate::policy::gavel::GavelOptions),
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
    /// The thesis's memory-efficiency placement of moldable tasks: FIFO, the
    /// placement of highest computation per MiB of GPU memory, sharing GPUs
    /// when memory fits (`--workload genie`; `--policy-opt pack=..., placements=..., share.max_tenants=...`).
    "memory-efficiency" => MemoryEfficiency(crate::policy::memeff_tasks::MemeffTaskOptions),
    /// Node dispatch (LDWP's platform): each job to a uniformly random feasible node, FIFO per node.
    "random-node" => RandomNode(crate::policy::nodesel::NodeDispatchOptions),
    /// Node dispatch: each job to the node of minimum expected completion time, FIFO per node.
    "min-ect" => MinEct(crate::policy::nodesel::NodeDispatchOptions),
    /// Node dispatch: each job to the node of best rate / (1 + load), FIFO per node (PATS-like).
    "load-greedy" => LoadGreedy(crate::policy::nodesel::NodeDispatchOptions),
    /// LDWP: a deep Q-network picks each job's node, learning online (node dispatch; `--policy-opt params.lr=...`).
    "ldwp" => Ldwp(crate::policy::ldwp::LdwpOptions),
    /// LDWP greedy on a trained model (`--policy-opt model=FILE`), not learning.
    "ldwp-frozen" => LdwpFrozen(crate::policy::ldwp::LdwpOptions),
}

/// A policy kind registered from outside the crate: its name (the `kind`
/// of specs and manifests, a value of `--policy` and of a sweep's `policy`
/// key), its one-line help, and its options type, which reads, checks and
/// builds it as a built-in kind's options struct does ([`BuildPolicy`]).
/// Made by [`PolicyKind::new`]; a [`crate::experiment::Registry`] holds the
/// kinds a command line knows.
pub struct PolicyKind {
    name: &'static str,
    help: &'static str,
    parse: ParseFn,
    default: DefaultFn,
}

/// Reads a registered kind's options (an object without `kind`).
type ParseFn = fn(&Arc<PolicyKind>, serde_json::Value) -> Result<RegisteredPolicy, (String, String)>;
/// A registered kind's options at their defaults.
type DefaultFn = fn(&Arc<PolicyKind>) -> Result<RegisteredPolicy, (String, String)>;

/// What an options type of a registered kind must be: serde data with
/// defaults that builds a policy, shared by the runs of a sweep.
pub trait RegisteredOptions:
    BuildPolicy + Default + Serialize + serde::de::DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static
{
}

impl<O> RegisteredOptions for O where
    O: BuildPolicy
        + Default
        + Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

impl std::fmt::Debug for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyKind").field("name", &self.name).field("help", &self.help).finish()
    }
}

fn registered_from<O: RegisteredOptions>(kind: &Arc<PolicyKind>, o: O) -> Result<RegisteredPolicy, (String, String)> {
    match serde_json::to_value(&o) {
        Ok(options @ serde_json::Value::Object(_)) => {
            Ok(RegisteredPolicy { kind: kind.clone(), options, built: Arc::new(o) })
        }
        Ok(other) => {
            Err((String::new(), format!("the options of `{}` must be a map of names, not {other}", kind.name)))
        }
        Err(e) => Err((String::new(), e.to_string())),
    }
}

fn parse_as<O: RegisteredOptions>(
    kind: &Arc<PolicyKind>,
    options: serde_json::Value,
) -> Result<RegisteredPolicy, (String, String)> {
    let o: O = serde_path_to_error::deserialize(options).map_err(|e| (e.path().to_string(), e.inner().to_string()))?;
    registered_from(kind, o)
}

fn default_as<O: RegisteredOptions>(kind: &Arc<PolicyKind>) -> Result<RegisteredPolicy, (String, String)> {
    registered_from(kind, O::default())
}

impl PolicyKind {
    /// The kind `name` (lower case, `-`-separated, as `--policy` takes it)
    /// with options type `O` and the one-line `help` that `dlsched simulate
    /// --help` shows for it.
    pub fn new<O: RegisteredOptions>(name: &'static str, help: &'static str) -> Arc<PolicyKind> {
        Arc::new(PolicyKind { name, help, parse: parse_as::<O>, default: default_as::<O> })
    }

    /// The kind's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The kind's one-line help.
    pub fn help(&self) -> &'static str {
        self.help
    }

    /// The spec of this kind with `options` (a JSON object, its `kind` field
    /// ignored when present), parsed by the kind's options type.
    ///
    /// # Errors
    /// The path of the bad option (`share.max_tenants`; empty when the
    /// whole value is at fault) and serde's message.
    pub fn spec(self: &Arc<Self>, options: serde_json::Value) -> Result<PolicySpec, (String, String)> {
        let options = match options {
            serde_json::Value::Object(mut m) => {
                m.remove("kind");
                serde_json::Value::Object(m)
            }
            other => other,
        };
        (self.parse)(self, options).map(PolicySpec::Registered)
    }

    /// The spec of this kind with every option at its default.
    ///
    /// # Errors
    /// When the options type does not serialise as a map of names.
    pub fn default_spec(self: &Arc<Self>) -> Result<PolicySpec, String> {
        (self.default)(self).map(PolicySpec::Registered).map_err(|(_, m)| m)
    }
}

/// A policy of a kind registered from outside the crate ([`PolicyKind`]):
/// its options as data (what manifests record) and as the options type
/// that builds it.
#[derive(Clone)]
pub struct RegisteredPolicy {
    kind: Arc<PolicyKind>,
    /// The options as the options type serialises them: a JSON object.
    options: serde_json::Value,
    built: Arc<dyn BuildPolicy + Send + Sync>,
}

impl RegisteredPolicy {
    /// The kind's name.
    pub fn kind(&self) -> &'static str {
        self.kind.name
    }

    /// The kind that registered it.
    pub fn policy_kind(&self) -> &Arc<PolicyKind> {
        &self.kind
    }

    /// The options, as their type serialises them (a JSON object).
    pub fn options(&self) -> &serde_json::Value {
        &self.options
    }
}

impl std::fmt::Debug for RegisteredPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredPolicy").field("kind", &self.kind.name).field("options", &self.options).finish()
    }
}

/// Two are equal when they are of one kind (by name) with equal options.
impl PartialEq for RegisteredPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.kind.name == other.kind.name && self.options == other.options
    }
}

/// `{"kind": NAME, ...options}`, as the built-in kinds are written.
impl Serialize for RegisteredPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let fields = self.options.as_object();
        let mut m = s.serialize_map(Some(1 + fields.map_or(0, |f| f.len())))?;
        m.serialize_entry("kind", &self.kind.name)?;
        for (k, v) in fields.into_iter().flatten() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
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
            PolicyName::Capacity => Some(G::Capacity),
            PolicyName::FifoCer => Some(G::FifoCer),
            PolicyName::MinMinPred => Some(G::MinMinPred),
            PolicyName::WeightedFairCer => Some(G::WeightedFairCer),
            PolicyName::TetrisPerfSrtf => Some(G::TetrisPerfSrtf),
            PolicyName::TetrisCerSrtf => Some(G::TetrisCerSrtf),
            _ => None,
        }
    }
}

impl Default for PolicySpec {
    /// Strict FIFO with consolidated placement: the default of a trace
    /// replay (a run's builders turn backfill on for the synthetic workload:
    /// [`PolicySpec::with_backfill`]).
    fn default() -> Self {
        PolicySpec::Fifo(QueueOptions::default())
    }
}

impl PolicySpec {
    /// The `backfill` switch of the kind's options; `None` for a kind
    /// without one. The queue policies have one: `fifo`, `sjf`, `qssf`,
    /// IAWP, the node-dispatch kinds, the GENIE family (and a kind
    /// registered from outside whose options name `backfill`).
    pub fn backfill(&self) -> Option<bool> {
        serde_json::to_value(self).ok()?.get("backfill")?.as_bool()
    }

    /// This spec with its `backfill` switch set to `on`; unchanged for a
    /// kind without one ([`PolicySpec::backfill`]) or registered from
    /// outside the crate (such a kind keeps its own default). The default of
    /// every builder of a run (the command line, experiment files, Python,
    /// `RunSpec::new`): on for the built-in queue policies on the synthetic
    /// workload, off (strict, head-of-line blocking) for a trace replay and
    /// GENIE tasks.
    #[must_use]
    pub fn with_backfill(self, on: bool) -> PolicySpec {
        if matches!(self, PolicySpec::Registered(_)) {
            return self;
        }
        match serde_json::to_value(&self) {
            Ok(serde_json::Value::Object(mut m)) if m.contains_key("backfill") => {
                m.insert("backfill".into(), serde_json::Value::Bool(on));
                serde_json::from_value(serde_json::Value::Object(m)).unwrap_or(self)
            }
            _ => self,
        }
    }

    /// Checks the options ([`BuildPolicy::validate`]).
    ///
    /// # Errors
    /// A message naming the option at fault.
    pub fn validate(&self) -> Result<(), String> {
        self.options().validate(self.kind())
    }

    /// The family's own keys that set this kind's options
    /// ([`BuildPolicy::family_keys`]).
    pub fn family_keys(&self, from_file: bool) -> &'static [FamilyKey] {
        self.options().family_keys(self.kind(), from_file)
    }

    /// Reads the files the options name into `artefacts`
    /// ([`BuildPolicy::load_artefacts`]).
    ///
    /// # Errors
    /// The option naming the file, and why it cannot be read.
    pub fn load_artefacts(&self, artefacts: &mut Artefacts) -> Result<(), (&'static str, crate::error::TraceError)> {
        self.options().load_artefacts(artefacts)
    }

    /// The policy's round or lease length, ms ([`BuildPolicy::preemption_period_ms`]).
    pub fn preemption_period_ms(&self) -> Option<u64> {
        self.options().preemption_period_ms(self.kind())
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

    /// Whether the policy's predictions follow the run's predictor
    /// ([`BuildPolicy::predicts`]).
    pub fn predicts(&self) -> bool {
        self.options().predicts()
    }

    /// Whether the run times the policy's decisions.
    pub fn time_decisions(&self) -> bool {
        self.options().time_decisions()
    }

    /// Whether the policy schedules only work-defined jobs
    /// ([`BuildPolicy::work_defined_only`]).
    pub fn work_defined_only(&self) -> bool {
        self.options().work_defined_only()
    }

    /// Whether the policy schedules only ElasticFlow jobs with deadlines
    /// ([`BuildPolicy::deadline_jobs_only`]).
    pub fn deadline_jobs_only(&self) -> bool {
        self.options().deadline_jobs_only()
    }

    /// The policy's own admission limit ([`BuildPolicy::admission_rule`]).
    pub fn admission_rule(&self) -> crate::workload::admission::AdmissionRule {
        self.options().admission_rule(self.kind())
    }

    /// The spec of this spec's kind with every option at its default.
    ///
    /// # Errors
    /// A registered kind whose options do not serialise as a map.
    pub fn kind_default(&self) -> Result<PolicySpec, String> {
        match self {
            PolicySpec::Registered(r) => r.kind.default_spec(),
            other => Ok(other.name().map_or_else(PolicySpec::default, PolicyName::default_spec)),
        }
    }

    /// A spec of this spec's kind read from `json` (the whole spec, `kind`
    /// included), as the kind's options type reads it.
    ///
    /// # Errors
    /// Serde's message (for a registered kind, prefixed by the path of the
    /// bad option when it is nested).
    pub fn reparse(&self, json: serde_json::Value) -> Result<PolicySpec, String> {
        match self {
            PolicySpec::Registered(r) => r.kind.spec(json).map_err(|(_, msg)| msg),
            _ => serde_json::from_value(json).map_err(|e| e.to_string()),
        }
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
            GenieVariant::Capacity => PolicySpec::Capacity(o),
            GenieVariant::FifoCer => PolicySpec::FifoCer(o),
            GenieVariant::MinMinPred => PolicySpec::MinMinPred(o),
            GenieVariant::WeightedFairCer => PolicySpec::WeightedFairCer(o),
            GenieVariant::TetrisPerfSrtf => PolicySpec::TetrisPerfSrtf(o),
            GenieVariant::TetrisCerSrtf => PolicySpec::TetrisCerSrtf(o),
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
            | PolicySpec::TetrisCer(o)
            | PolicySpec::Capacity(o)
            | PolicySpec::FifoCer(o)
            | PolicySpec::MinMinPred(o)
            | PolicySpec::WeightedFairCer(o)
            | PolicySpec::TetrisPerfSrtf(o)
            | PolicySpec::TetrisCerSrtf(o) => o.models.as_deref(),
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
                PolicySpec::Iawp(IawpOptions { backfill: c.backfill, share: q.share, ..IawpOptions::default() })
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

    /// `--placement iawp` is IAWP, which starts a job on idle GPUs as
    /// `consolidate` places it.
    fn admission_rule(&self, _kind: &str) -> AdmissionRule {
        if self.placement == PlacementKind::Iawp { AdmissionRule::Consolidated } else { AdmissionRule::Any }
    }

    fn share_limits(&self) -> ShareLimits {
        self.share
    }
}

/// Options of IAWP (a FIFO policy of its own that places jobs on shared
/// GPUs); the defaults: strict, [`ShareLimits::default`], predicted admission.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IawpOptions {
    /// Let later jobs start when the head of the queue does not fit. Default false.
    pub backfill: bool,
    /// GPU-sharing limits; [`ShareLimits::default`] by default.
    pub share: ShareLimits,
    /// How a queued job is admitted onto a GPU with tenants: `predicted`
    /// (default) or `cosine` (IAWP's cosine-similarity rule); `src/policy/iawp.rs`.
    pub admission: crate::policy::iawp::Admission,
    /// Predicted admission: lowest predicted speed of any tenant, in [0, 1]
    /// (default [`crate::policy::iawp::THETA_SPEED`]).
    pub theta_speed: f64,
    /// Predicted admission: most memory held with the job, a fraction of the
    /// GPU's memory in (0, 1] (default [`crate::policy::iawp::THETA_MEM`]).
    pub theta_mem: f64,
}

impl Default for IawpOptions {
    fn default() -> Self {
        IawpOptions {
            backfill: false,
            share: ShareLimits::default(),
            admission: crate::policy::iawp::Admission::default(),
            theta_speed: crate::policy::iawp::THETA_SPEED,
            theta_mem: crate::policy::iawp::THETA_MEM,
        }
    }
}

impl BuildPolicy for IawpOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.theta_speed) {
            return Err(format!("policy option theta_speed must be in [0, 1], got {}", self.theta_speed));
        }
        if !(self.theta_mem > 0.0 && self.theta_mem <= 1.0) {
            return Err(format!("policy option theta_mem must be in (0, 1], got {}", self.theta_mem));
        }
        self.share.validate().map_err(|e| e.to_string())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        use crate::policy::iawp::{Admission, Iawp, Predicted};
        let db = ctx.db_for(PlacementKind::Iawp).unwrap_or_else(|| ctx.artefacts.profiles().builtin());
        let p = Iawp::new(self.backfill).with_profiles(db.clone());
        Ok(Box::new(match self.admission {
            Admission::Cosine => p,
            Admission::Predicted => {
                // Measured pairs, else the database's learned model (trained once per set).
                let model = crate::profile::coloc::ProfileInterference::new(db.clone())
                    .with_learned(ctx.artefacts.profiles().learned_coloc(&db)?);
                p.with_predicted(Predicted { theta_speed: self.theta_speed, theta_mem: self.theta_mem }, model)
            }
        }))
    }

    fn placement(&self) -> PlacementKind {
        PlacementKind::Iawp
    }

    /// IAWP starts a job on idle GPUs as `consolidate` places it.
    fn admission_rule(&self, _kind: &str) -> AdmissionRule {
        AdmissionRule::Consolidated
    }

    fn share_limits(&self) -> ShareLimits {
        self.share
    }
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
        for name in <PolicyName as crate::names::ValueNames>::selectable() {
            let spec = name.default_spec();
            let back: PolicySpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
            assert_eq!(back, spec);
            assert_eq!(spec.kind(), name.kind());
        }
        // Every kind once; the skipped `iawp` is a kind but no `--policy` value.
        let unique: std::collections::BTreeSet<_> = KINDS.iter().collect();
        assert_eq!(unique.len(), KINDS.len());
        assert_eq!(KINDS.len(), <PolicyName as crate::names::ValueNames>::selectable().len() + 1);
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
