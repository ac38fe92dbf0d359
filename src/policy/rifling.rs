//! RIFLING: a tabular Q-learning GPU scheduler for moldable deep-learning
//! tasks (Z. Chen, "RIFLING: A reinforcement learning-based GPU scheduler for
//! deep learning research and development platforms", Software: Practice and
//! Experience 2022, doi 10.1002/spe.3066; restated in `specs/policies.md` §3).
//!
//! The paper's full text is not public. What is the paper's and what is ours:
//!
//! - **Paper** (abstract, third-party summary, one survey sentence): online
//!   tabular Q-learning without offline profiling; jobs grouped by their
//!   computation/communication ratio with K-means to shrink the state space;
//!   actions = every placement of the job plus WAIT; a reward from the
//!   processing rates observed at each scheduling point; a Bellman update at
//!   each scheduling point; regrouping and Q-table recomputation at
//!   intervals; epsilon-greedy; FCFS order; metrics average normalised
//!   processing rate and makespan.
//! - **Ours** (the spec's PROPOSAL, every choice a field of [`RiflingParams`]):
//!   the ratio `CCR = gflops_per_sample · 1e9 · global_batch / (4 · params)`
//!   (training FLOPs per byte of fp32 gradient), its `log10` as the one
//!   K-means feature, inference in a group of its own; K-means by
//!   linfa-clustering (k-means++ init, seeded) over the last `window`
//!   training tasks, re-run every `regroup_every` arrivals, groups kept in
//!   centroid order and each new group's Q rows copied from the nearest old
//!   centroid; state = (group of the FCFS head, free-GPU profile: the free
//!   GPUs per node sorted descending, or (5 buckets of free GPUs, 3 of
//!   wholly free nodes) for clusters larger than `lab16`); actions = the
//!   symmetric placements `<d_node, d_gpn>` (at most the task's global batch
//!   GPUs) plus WAIT, infeasible ones masked, WAIT masked when nothing runs
//!   (else the run could stall); reward = the time-average of the
//!   cluster-normalised throughput `Phi = Σ_running rate/rate_1GPU / (N·G)`
//!   between two scheduling points (or, [`RewardKind::ScalingEfficiency`],
//!   the placed task's normalised rate per GPU, WAIT 0); a scheduling point
//!   is a decision with at least one feasible placement; alpha 0.1, gamma
//!   0.9, epsilon linear 0.3 → 0.05 over 500 decisions; Q starts at 0;
//!   greedy ties go to the lowest action index (fewest GPUs, fewest nodes);
//!   physical nodes as GENIE's [`super::symmetric::physical`].
//! - **Ours, first revision** (the proposal above stays reachable field by
//!   field, all at once as [`RiflingParams::first_proposal`]).
//!   The proposal never explored: Q at 0, positive rewards and ties to the
//!   lowest index made the first greedy visit of every state take `<1, 1>`
//!   and keep it (the shipped table had 11 % of its entries ever updated);
//!   epsilon reached its floor in the second of 30 training episodes; the
//!   discount was per decision although decisions come in bursts at one
//!   instant and then hours apart. Now:
//!   - Q starts at `q_init` = 10, above any return (optimistic initial
//!     values), and greedy ties are broken uniformly on the agent's seeded
//!     stream, so every feasible action of a state is tried early;
//!   - epsilon decays linearly per training episode (0.3 at episode 0 →
//!     0.05 at episode 20, [`Agent::episode`] set by `rifling-train`); a
//!     single run is one episode;
//!   - semi-Markov credit: the reward of a transition is `∫ Phi dt / τ` over
//!     it ([`RewardKind::ThroughputIntegral`]) and the next state's value is
//!     discounted by `γ^(Δt/τ)` with `τ = tau_s` = 600 s (our reading of the
//!     paper's "Bellman update at each scheduling point" for decisions
//!     irregular in time; Bradtke & Duff 1995 for the continuous-time
//!     discount): placing several tasks at one instant passes value along
//!     undiscounted, a WAIT earns what the cluster produces while it lasts;
//!   - the state adds the queue length behind the head, bucketed 0 / 1 /
//!     2-3 / 4+ ([`queue_bucket`]), so that "GPUs would idle" and "others
//!     are waiting" are different states;
//!   - WAIT's availability is an option ([`WaitRule`]); this revision set
//!     it to never (measured: see [`RiflingParams::wait`]);
//!   - a task model without a finite CCR is an error at build time
//!     ([`check_ccr`]), not a silent group 0; `transformer-multi30k`'s
//!     parameter count and FLOPs, missing from `models.csv`, are computed
//!     and cited in [`CCR_FACTS`] (before, every seq2seq task was group 0).
//! - **Ours, second revision** (the current defaults;
//!   `experiments/rifling.md` tells the history). The first revision's
//!   table had an untried action at the optimistic 10 in every state, so
//!   its greedy choice was "a random untried action", and its constant
//!   alpha kept the greedy action of close actions swapping. Now:
//!   - WAIT is available whenever a task runs ([`WaitRule::WhenRunning`]):
//!     the paper's action;
//!   - the reward is the placed task's scaling efficiency
//!     ([`RewardKind::ScalingEfficiency`], WAIT 0), chosen on tuning seeds
//!     1-3 (with WAIT on, the integrated throughput teaches the table to wait);
//!   - the learning rate is `1 / n` at the `n`-th update of a pair
//!     ([`AlphaSchedule::Visits`], the sample average), and the agent
//!     counts its updates per pair ([`Agent::visits`]);
//!   - a frozen table ranks only the actions it tried in a state
//!     ([`FrozenGreedy::Tried`]);
//!   - online and frozen runs report table diagnostics ([`Diagnostics`]):
//!     states visited, the share of them with every feasible action tried,
//!     how decided the greedy choice is against a random one, and the Q
//!     spread per state; `dlsched rifling-train` stops at a stated
//!     convergence criterion.
//!
//!   The paper's Q initialisation, epsilon schedule and WAIT rule are not
//!   public (a search of public pages found none); the choices above are
//!   ours. [`RiflingParams::first_proposal`] keeps the first proposal; a saved
//!   table without the second revision's fields reads them as before.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{Decision, Policy, View};
use crate::cluster::Cluster;
use crate::ids::{JobId, VcId};
use crate::job::{JobState, JobTable};
use crate::profile::db::ProfileDb;

/// Bytes per parameter of the gradient exchanged (fp32).
pub const GRADIENT_BYTES_PER_PARAM: f64 = 4.0;

/// Clusters up to this many nodes and GPUs per node use the exact free-GPU
/// profile; larger ones are bucketed (`lab16` is 4 × 4).
pub const EXACT_PROFILE_MAX: (u32, u32) = (4, 4);

/// What the agent is rewarded for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum RewardKind {
    /// Time-average of the cluster-normalised throughput Phi between two
    /// scheduling points (the spec's proposal; the first proposal's default).
    /// A transition closed at the instant it opened earns the current Phi.
    Throughput,
    /// The integral of Phi over the transition, in units of `tau_s`:
    /// `(1 / tau_s) ∫ Phi dt` (so a transition of length 0 earns 0 and a long
    /// WAIT earns in proportion to how long it lasts). Ours (the
    /// semi-Markov credit of the module documentation); the earlier default.
    /// Needs `tau_s > 0`. With WAIT available a frozen table trained on it
    /// waits while GPUs are free (`experiments/rifling.md`).
    ThroughputIntegral,
    /// The placed task's normalised rate divided by its GPUs (scaling
    /// efficiency); WAIT earns 0 (the spec's alternative). The default,
    /// chosen on tuning seeds 1-3 (`experiments/rifling.md`): it
    /// rewards the placement's own effect on system efficiency, the paper's
    /// words for its reward.
    ScalingEfficiency,
}

crate::names::value_names!(RewardKind {
    Throughput => "throughput",
    ThroughputIntegral => "throughput-integral",
    ScalingEfficiency => "scaling-efficiency",
});

/// How the greedy choice breaks ties between equal Q values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum TieBreak {
    /// Uniformly among the tied feasible actions, on the agent's stream
    /// `rifling.agent` of the run's seed (the default).
    Random,
    /// The lowest action index (fewest nodes, then fewest GPUs per node; WAIT
    /// last): the first proposal's rule, under which an unseen state
    /// always took `<1, 1>`.
    LowestIndex,
}

crate::names::value_names!(TieBreak { Random => "random", LowestIndex => "lowest-index" });

/// What epsilon's linear decay counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum EpsilonPer {
    /// Training episodes (the agent's episode index, set by
    /// `dlsched rifling-train`; a single run is one episode, so its epsilon
    /// is constant): the default.
    Episode,
    /// Decisions taken, cumulated over episodes: the first proposal's rule
    /// (with 500 decisions, the floor came in the second episode).
    Decision,
}

crate::names::value_names!(EpsilonPer { Episode => "episode", Decision => "decision" });

/// When the WAIT action is available.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum WaitRule {
    /// When at least one task is running (otherwise a WAIT could stall the
    /// run): the default, and the first proposal's rule.
    WhenRunning,
    /// Never: every scheduling point places the FCFS head (the earlier
    /// default).
    Never,
}

crate::names::value_names!(WaitRule { WhenRunning => "when-running", Never => "never" });

/// The learning rate of one update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum AlphaSchedule {
    /// `alpha` at every update (the earlier default): with noisy
    /// rewards the values keep moving by about `alpha` times the noise, so
    /// the greedy action of close actions keeps swapping.
    Constant,
    /// `1 / n` at the `n`-th update of that (state, action): Q is the mean
    /// of the targets seen, the sample-average rate (Sutton & Barto 2018,
    /// §2.4, and the Robbins-Monro conditions of §2.5 under which tabular
    /// Q-learning converges, Watkins & Dayan 1992). The first update
    /// replaces the initial value. The default (ours).
    Visits,
}

crate::names::value_names!(AlphaSchedule { Constant => "constant", Visits => "visits" });

/// Which actions a frozen table's greedy choice ranges over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum FrozenGreedy {
    /// Every feasible action: an action never tried keeps its initial value
    /// `q_init`, so with optimistic values an untried action wins and the
    /// greedy choice is a random untried action (the earlier default).
    All,
    /// The feasible actions tried at least once in that state (an update
    /// counted, or for an older table a value moved off `q_init`); all
    /// feasible actions when none was tried. The default (ours: optimistic
    /// initial values are an exploration device, not an estimate, so a
    /// frozen table ranks only what it measured).
    Tried,
}

crate::names::value_names!(FrozenGreedy { All => "all", Tried => "tried" });

/// Every open choice of RIFLING, with our defaults (the spec's proposal,
/// revised twice: see the module documentation and
/// `experiments/rifling.md`; [`RiflingParams::first_proposal`] gives the first
/// proposal). A field missing from a saved table takes the first proposal's
/// value, which is what such a table was trained with.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RiflingParams {
    /// Training-task groups of the K-means (inference is one more group).
    pub k: usize,
    /// Learning rate.
    pub alpha: f64,
    /// Discount: per `tau_s` seconds of simulated time (`γ^(Δt/τ)`), or per
    /// scheduling point when `tau_s` is 0.
    pub gamma: f64,
    /// Exploration rate at the first episode (or decision).
    pub epsilon_start: f64,
    /// Exploration rate after the decay.
    pub epsilon_end: f64,
    /// Episodes (or decisions, per `epsilon_per`) over which epsilon falls
    /// linearly from start to end.
    pub epsilon_decay: u64,
    /// What `epsilon_decay` counts.
    #[serde(default = "pre16_epsilon_per")]
    pub epsilon_per: EpsilonPer,
    /// Re-run the K-means every this many arrivals.
    pub regroup_every: u64,
    /// K-means over the last this many training tasks seen.
    pub window: usize,
    /// Reward.
    pub reward: RewardKind,
    /// Put a placement on the fullest nodes with room instead of the emptiest.
    pub best_fit_nodes: bool,
    /// How greedy ties are broken.
    #[serde(default = "pre16_tie_break")]
    pub tie_break: TieBreak,
    /// Initial Q of every (state, action) pair, in reward units. Optimistic
    /// (above any return the agent can earn) makes every feasible action of
    /// a state be tried before the agent settles: with Phi at most 1 (no
    /// super-linear scaling), the return is at most `1 / (1 - γ)` = 10 per
    /// scheduling point at γ 0.9, and at most `1 / ln(1/γ)` = 9.49 with the
    /// integrated reward and time discount; the default 10 bounds both
    /// (Sutton & Barto 2018, §2.6, "optimistic initial values").
    #[serde(default)]
    pub q_init: f64,
    /// Time constant of the discount and of the integrated reward, s; 0 =
    /// discount once per scheduling point (the first proposal's rule).
    /// Default 600 s, the shortest single-GPU task of the GENIE workload
    /// ([`crate::workload::genie::MIN_LATENCY_S`]): at γ 0.9 a reward 95 min
    /// (`600 / ln(1/0.9)`) ahead counts 1/e, about a mean task's length.
    #[serde(default)]
    pub tau_s: f64,
    /// Add the coarse queue length to the state ([`queue_bucket`]: 0 / 1 /
    /// 2-3 / 4+ tasks waiting behind the FCFS head).
    #[serde(default)]
    pub queue_feature: bool,
    /// When WAIT is available. Default [`WaitRule::WhenRunning`]: WAIT is
    /// one of the paper's actions ("all placements plus an extra wait
    /// action", `specs/policies.md` §3.1). The earlier default was
    /// [`WaitRule::Never`], from a QoS measurement (online RIFLING, lab16, 24 h
    /// of GENIE tasks, seeds 1-5: QoS 56.6 % never vs 18.3 % when-running at
    /// 20 tasks/h), but QoS is not RIFLING's objective; `never` stays an option.
    #[serde(default = "pre16_wait")]
    pub wait: WaitRule,
    /// What a frozen table's greedy choice ranges over. Default
    /// [`FrozenGreedy::Tried`]; a saved table without the field
    /// reads [`FrozenGreedy::All`], the behaviour it was trained and shipped with.
    #[serde(default = "pre31_frozen_greedy")]
    pub frozen_greedy: FrozenGreedy,
    /// The learning rate's schedule. Default [`AlphaSchedule::Visits`]; a
    /// saved table without the field reads
    /// [`AlphaSchedule::Constant`].
    #[serde(default = "pre31_alpha_schedule")]
    pub alpha_schedule: AlphaSchedule,
}

fn pre31_alpha_schedule() -> AlphaSchedule {
    AlphaSchedule::Constant
}

fn pre31_frozen_greedy() -> FrozenGreedy {
    FrozenGreedy::All
}

fn pre16_epsilon_per() -> EpsilonPer {
    EpsilonPer::Decision
}

fn pre16_tie_break() -> TieBreak {
    TieBreak::LowestIndex
}

fn pre16_wait() -> WaitRule {
    WaitRule::WhenRunning
}

impl RiflingParams {
    /// Checks the ranges.
    ///
    /// # Errors
    /// A message naming the first parameter out of range.
    pub fn validate(&self) -> Result<(), String> {
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        if self.k == 0 {
            return Err("RIFLING k (--rifling-k) must be at least 1".into());
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(format!("RIFLING alpha (--rifling-alpha) must be in (0, 1], got {}", self.alpha));
        }
        for (name, x) in [
            ("gamma (--rifling-gamma)", self.gamma),
            ("epsilon (--rifling-epsilon)", self.epsilon_start),
            ("final epsilon (--rifling-epsilon-end)", self.epsilon_end),
        ] {
            if !unit(x) {
                return Err(format!("RIFLING {name} must be in [0, 1], got {x}"));
            }
        }
        if self.epsilon_end > self.epsilon_start {
            return Err(format!(
                "RIFLING final epsilon (--rifling-epsilon-end, {}) must not exceed the starting one (--rifling-epsilon, {})",
                self.epsilon_end, self.epsilon_start
            ));
        }
        if self.regroup_every == 0 {
            return Err("RIFLING regroup interval (--rifling-regroup) must be at least 1".into());
        }
        if self.window == 0 {
            return Err("RIFLING window (--rifling-window) must be at least 1".into());
        }
        if !self.q_init.is_finite() {
            return Err(format!("RIFLING initial Q (--rifling-q-init) must be a finite number, got {}", self.q_init));
        }
        if !(self.tau_s.is_finite() && self.tau_s >= 0.0) {
            return Err(format!(
                "RIFLING time constant (--rifling-tau) must be 0 or a positive number of seconds, got {}",
                self.tau_s
            ));
        }
        if self.reward == RewardKind::ThroughputIntegral && self.tau_s == 0.0 {
            return Err(
                "RIFLING reward throughput-integral (--rifling-reward) needs a time constant: --rifling-tau above 0"
                    .into(),
            );
        }
        Ok(())
    }
}

impl Default for RiflingParams {
    fn default() -> Self {
        RiflingParams {
            k: 4,
            alpha: 0.1,
            gamma: 0.9,
            epsilon_start: 0.3,
            epsilon_end: 0.05,
            epsilon_decay: 20,
            epsilon_per: EpsilonPer::Episode,
            regroup_every: 50,
            window: 200,
            reward: RewardKind::ScalingEfficiency,
            best_fit_nodes: false,
            tie_break: TieBreak::Random,
            q_init: 10.0,
            tau_s: 600.0,
            queue_feature: true,
            wait: WaitRule::WhenRunning,
            frozen_greedy: FrozenGreedy::Tried,
            alpha_schedule: AlphaSchedule::Visits,
        }
    }
}

impl RiflingParams {
    /// The first proposal's parameters (the spec's proposal): epsilon
    /// over 500 cumulative decisions, Q starting at 0 with ties to the lowest
    /// index, the time-average reward discounted once per scheduling point,
    /// no queue feature, WAIT whenever something runs.
    pub fn first_proposal() -> Self {
        RiflingParams {
            epsilon_decay: 500,
            epsilon_per: EpsilonPer::Decision,
            reward: RewardKind::Throughput,
            tie_break: TieBreak::LowestIndex,
            q_init: 0.0,
            tau_s: 0.0,
            queue_feature: false,
            wait: WaitRule::WhenRunning,
            frozen_greedy: FrozenGreedy::All,
            alpha_schedule: AlphaSchedule::Constant,
            ..Default::default()
        }
    }
}

/// How the agent runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RiflingMode {
    /// Learns during the run (epsilon-greedy, updates, regrouping).
    Online,
    /// A trained table, greedy, no updates, no regrouping.
    Frozen,
    /// Uniformly random feasible placement (the random-placement baseline;
    /// WAIT never chosen).
    Random,
}

/// Model facts RIFLING's CCR uses where `models.csv` gives `NaN`: (model,
/// millions of parameters, training GFLOPs per sample, source). Kept here,
/// not in `models.csv`, because that table's parameter count and GFLOPs also
/// feed the GPU-memory estimate and the SM-utilisation proxy of every other
/// policy's runs, which must stay byte-identical; moving a row
/// into `models.csv` changes those runs for that model's jobs.
///
/// `transformer-multi30k` (Vaswani et al. 2017 base config as Gavel runs it:
/// `workloads/pytorch/translation` of stanford-futuredata/gavel, from
/// jadore801120/attention-is-all-you-need-pytorch, `-proj_share_weight`):
/// layers computed here from its code, per layer a multi-head attention of
/// 4 biased 512 × 512 projections + LayerNorm = 1,051,648 and a position-wise
/// feed-forward of two biased 1 × 1 Conv1d 512 ↔ 2048 + LayerNorm =
/// 2,100,736; 6 encoder layers (1 attention) + 6 decoder layers (2) =
/// 44,138,496; plus source and target embeddings of 512 × 10,000 words each
/// (our assumption: `preprocess.py` keeps Multi30k words seen more than 5
/// times and the count is not recorded; `models.csv`'s activation column
/// assumes the same 10,000-word vocabulary; the output projection shares the
/// target embedding; the frozen sinusoid positions take no gradient) =
/// 54.3785 M. GFLOPs per sentence pair at 32 tokens a side (the activation
/// column's length): forward multiply-adds 32 × 18.87 M (encoder weights) +
/// 32 × (25.17 M + 5.12 M output projection) (decoder) + 18 attention blocks
/// × 2 × 32 × 32 × 512 = 1.592 G; training = 3 × forward, 2 FLOPs per
/// multiply-add: 9.552.
pub const CCR_FACTS: [(&str, f64, f64, &str); 1] = [(
    "transformer-multi30k",
    54.3785,
    9.552,
    "Vaswani et al. 2017 base config in jadore801120/attention-is-all-you-need-pytorch as used by Gavel; \
     layers computed from its code, 10,000-word vocabularies assumed, 32 tokens a side",
)];

/// The parameter count (millions) and training GFLOPs per sample RIFLING
/// uses for `model`: `models.csv`'s, each `NaN` replaced from
/// [`CCR_FACTS`] when that table has the model.
pub fn ccr_facts(db: &ProfileDb, model: &str) -> Option<(f64, f64)> {
    let i = db.model_info(model)?;
    let extra = CCR_FACTS.iter().find(|f| f.0 == model);
    let pick = |x: f64, f: Option<f64>| if x.is_finite() { x } else { f.unwrap_or(x) };
    Some((pick(i.params_m, extra.map(|f| f.1)), pick(i.gflops_per_sample, extra.map(|f| f.2))))
}

/// `log10` of a task's computation/communication ratio, from the profile
/// database and [`CCR_FACTS`] (`NaN` when the model's size or FLOPs are
/// unknown; see [`check_ccr`]).
pub fn log_ccr(db: &ProfileDb, model: &str, global_bsz: u32) -> f64 {
    let Some((params_m, gflops)) = ccr_facts(db, model) else { return f64::NAN };
    let flops = gflops * 1e9 * f64::from(global_bsz.max(1));
    let bytes = GRADIENT_BYTES_PER_PARAM * params_m * 1e6;
    (flops / bytes).log10()
}

/// Checks that every GENIE task model ([`crate::profile::genie::TASK_MODELS`])
/// has a finite CCR in `db`, so that no training task falls silently into a
/// group (`transformer-multi30k`'s figures, missing from `models.csv`, come
/// from [`CCR_FACTS`]; without them every seq2seq task would go to group 0).
///
/// # Errors
/// A message naming the first task type and model whose CCR is not a
/// number, and the missing `models.csv` field.
pub fn check_ccr(db: &ProfileDb) -> Result<(), String> {
    for (name, model) in crate::profile::genie::TASK_MODELS {
        if log_ccr(db, model, 1).is_finite() {
            continue;
        }
        let why = match ccr_facts(db, model) {
            None => "has no models.csv row".to_string(),
            Some((params_m, gflops)) => {
                let mut missing = Vec::new();
                if !(params_m.is_finite() && params_m > 0.0) {
                    missing.push("params_m");
                }
                if !(gflops.is_finite() && gflops > 0.0) {
                    missing.push("gflops_per_sample");
                }
                format!("has no usable {} in models.csv", missing.join(" or "))
            }
        };
        return Err(format!(
            "RIFLING groups training tasks by log10 CCR (FLOPs per gradient byte), but the model `{model}` of task type `{name}` {why}: its CCR is not a number"
        ));
    }
    Ok(())
}

/// The throughput reward of a transition that lasted `dt_ms` with
/// `area_ms = ∫ Phi dt` (ms × Phi) over it and Phi `phi_now` at its end:
/// [`RewardKind::Throughput`] the time-average `area / dt` (`phi_now` when
/// `dt` is 0); [`RewardKind::ThroughputIntegral`] `area / (1000 · tau_s)`;
/// 0 for any other kind.
pub fn throughput_reward(p: &RiflingParams, area_ms: f64, dt_ms: u64, phi_now: f64) -> f64 {
    match p.reward {
        RewardKind::Throughput if dt_ms == 0 => phi_now,
        RewardKind::Throughput => area_ms / dt_ms as f64,
        // tau_s > 0 (validated).
        RewardKind::ThroughputIntegral => area_ms / (1000.0 * p.tau_s),
        RewardKind::ScalingEfficiency => 0.0,
    }
}

/// Whether WAIT is available under `rule` when `busy` (some task runs).
pub fn wait_available(rule: WaitRule, busy: bool) -> bool {
    match rule {
        WaitRule::WhenRunning => busy,
        WaitRule::Never => false,
    }
}

/// The queue-length feature of the state: the tasks waiting behind the FCFS
/// head, bucketed `0`, `1`, `2-3`, `4+`.
pub fn queue_bucket(waiting: usize) -> &'static str {
    match waiting {
        0 => "0",
        1 => "1",
        2 | 3 => "2-3",
        _ => "4+",
    }
}

/// K-means of one-dimensional `xs` into at most `k` groups with linfa's
/// k-means (k-means++ initialisation, 10 runs, seeded by `rng`); returns the
/// centroids ascending. With fewer distinct values than `k`, the distinct
/// values are the centroids. Non-finite values are ignored.
#[cfg(feature = "kmeans")]
pub fn kmeans_1d(xs: &[f64], k: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    use linfa::traits::Fit;
    let mut pts: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    let mut distinct = pts.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if k == 0 || distinct.is_empty() {
        return Vec::new();
    }
    if distinct.len() <= k {
        return distinct;
    }
    pts.sort_by(f64::total_cmp);
    let n = pts.len();
    let data = ndarray::Array2::from_shape_vec((n, 1), pts).expect("n x 1");
    let ds = linfa::DatasetBase::from(data);
    let seed: u64 = rng.r#gen();
    let model = linfa_clustering::KMeans::params_with_rng(
        k,
        <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed),
    )
    .n_runs(10)
    .tolerance(1e-9)
    .max_n_iterations(300)
    .fit(&ds);
    let mut c: Vec<f64> = match model {
        Ok(m) => m.centroids().iter().copied().filter(|x| x.is_finite()).collect(),
        Err(_) => distinct,
    };
    c.sort_by(f64::total_cmp);
    c.dedup();
    c
}

/// Index of the centroid nearest `x` (ties: the lower).
pub fn nearest(centroids: &[f64], x: f64) -> usize {
    let mut best = 0;
    for (i, c) in centroids.iter().enumerate() {
        if (c - x).abs() < (centroids[best] - x).abs() {
            best = i;
        }
    }
    best
}

/// The free-GPU profile of partition `vc`: free GPUs per node, descending,
/// for clusters up to [`EXACT_PROFILE_MAX`]; else `b<total bucket>/<full bucket>`.
pub fn free_profile(cluster: &Cluster, vc: VcId) -> String {
    let p = cluster.partition(vc);
    let mut free: Vec<u32> = p.nodes.iter().map(|&n| cluster.node_free(n)).collect();
    let (nodes, gpn) = (p.nodes.len() as u32, p.max_node_gpus);
    if nodes <= EXACT_PROFILE_MAX.0 && gpn <= EXACT_PROFILE_MAX.1 {
        free.sort_unstable_by(|a, b| b.cmp(a));
        free.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    } else {
        let total: u32 = free.iter().sum();
        let cap = u64::from(p.gpus_total.max(1));
        let tb = ((5 * u64::from(total)) / cap).min(4);
        let whole = p.nodes.iter().filter(|&&n| cluster.node_free(n) == cluster.node(n).gpus).count();
        let wb = if whole == 0 {
            0
        } else if (whole as u32) * 2 < nodes {
            1
        } else {
            2
        };
        format!("b{tb}/{wb}")
    }
}

/// The action of `<d_node, d_gpn>` on a platform of `gpn` GPUs per node
/// (`(d_node - 1) · gpn + d_gpn - 1`); WAIT is `nodes · gpn`.
pub fn action_index(d_node: u32, d_gpn: u32, gpn: u32) -> usize {
    ((d_node - 1) * gpn + d_gpn - 1) as usize
}

/// `<d_node, d_gpn>` of a placement action.
pub fn action_shape(a: usize, gpn: u32) -> (u32, u32) {
    (a as u32 / gpn + 1, a as u32 % gpn + 1)
}

/// The feasibility mask over all actions (WAIT last) for a task of global
/// batch `global_bsz` on partition `vc` now: a placement is feasible when
/// `d_node` nodes have `d_gpn` free GPUs and `d_node · d_gpn <= global_bsz`;
/// WAIT when some job is running (`busy`).
pub fn feasible(cluster: &Cluster, vc: VcId, global_bsz: u32, busy: bool) -> Vec<bool> {
    let p = cluster.partition(vc);
    let (nodes, gpn) = (p.nodes.len() as u32, p.max_node_gpus);
    let mut free: Vec<u32> = p.nodes.iter().map(|&n| cluster.node_free(n)).collect();
    free.sort_unstable_by(|a, b| b.cmp(a));
    let mut mask = vec![false; (nodes * gpn) as usize + 1];
    for d_node in 1..=nodes {
        for d_gpn in 1..=gpn {
            let ok = d_node * d_gpn <= global_bsz.max(1) && free[d_node as usize - 1] >= d_gpn;
            mask[action_index(d_node, d_gpn, gpn)] = ok;
        }
    }
    mask[(nodes * gpn) as usize] = busy;
    mask
}

/// The learning agent: groups, Q-table, exploration schedule. Shared (behind
/// a mutex) by the policy and whoever trains over episodes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Agent {
    /// Its parameters.
    pub params: RiflingParams,
    /// Training-group centroids of `log10 CCR`, ascending.
    pub centroids: Vec<f64>,
    /// Actions per state (placements of the platform + WAIT).
    pub actions: usize,
    /// Q rows by state key (`t<group>|<profile>` or `inf|<profile>`).
    pub q: BTreeMap<String, Vec<f64>>,
    /// Decisions taken so far (drives a per-decision epsilon schedule).
    pub decisions: u64,
    /// Index of the current training episode, 0 first (drives the
    /// per-episode epsilon schedule; set by `dlsched rifling-train`, kept by
    /// a saved table: the index of its last episode).
    #[serde(default)]
    pub episode: u64,
    /// Q updates made.
    pub updates: u64,
    /// Regroupings made.
    pub regroups: u64,
    /// Updates per (state, action), rows keyed as `q` (an older saved table
    /// has none, and [`Agent::tried`] then reads a value moved off `q_init`
    /// as tried).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub visits: BTreeMap<String, Vec<u64>>,
    /// The largest `|ΔQ|` of one update since [`Agent::start_episode`] (or
    /// creation).
    #[serde(skip)]
    pub max_dq: f64,
    /// The sum of `|ΔQ|` over the updates since [`Agent::start_episode`]
    /// (or creation): with `updates` at the episode's start, the mean
    /// `|ΔQ|` the convergence criterion of `dlsched rifling-train` reads.
    #[serde(skip)]
    pub sum_dq: f64,
    #[serde(skip, default = "default_rng")]
    rng: ChaCha8Rng,
}

fn default_rng() -> ChaCha8Rng {
    crate::rng::stream(0, "rifling.agent")
}

impl Agent {
    /// A fresh agent for a platform with `actions` actions (placements + WAIT),
    /// its exploration on the stream `rifling.agent` of `seed`.
    pub fn new(params: RiflingParams, actions: usize, seed: u64) -> Self {
        Agent {
            params,
            centroids: Vec::new(),
            actions,
            q: BTreeMap::new(),
            decisions: 0,
            episode: 0,
            updates: 0,
            regroups: 0,
            visits: BTreeMap::new(),
            max_dq: 0.0,
            sum_dq: 0.0,
            rng: crate::rng::stream(seed, "rifling.agent"),
        }
    }

    /// Re-seeds the exploration stream (a new episode or run).
    pub fn reseed(&mut self, seed: u64) {
        self.rng = crate::rng::stream(seed, "rifling.agent");
    }

    /// Starts training episode `episode` (0 first) on workload seed `seed`:
    /// sets the episode index of the epsilon schedule and re-seeds.
    pub fn start_episode(&mut self, episode: u64, seed: u64) {
        self.episode = episode;
        self.max_dq = 0.0;
        self.sum_dq = 0.0;
        self.reseed(seed);
    }

    /// Whether action `a` of state `s` was ever updated: its visit count
    /// when the table keeps counts for `s`, else (an older saved table)
    /// whether its value moved off `q_init`.
    pub fn tried(&self, s: &str, a: usize) -> bool {
        match self.visits.get(s) {
            Some(v) => v.get(a).is_some_and(|&n| n > 0),
            None => self.q.get(s).is_some_and(|row| row.get(a).is_some_and(|&v| v != self.params.q_init)),
        }
    }

    /// The actions the greedy rule ranks for `s` under `mask`: every
    /// feasible one, or with `tried_only` the feasible ones tried in `s`
    /// (every feasible one when none was).
    pub fn greedy_mask(&self, s: &str, mask: &[bool], tried_only: bool) -> Vec<bool> {
        if !tried_only {
            return mask.to_vec();
        }
        let m: Vec<bool> = mask.iter().enumerate().map(|(a, &ok)| ok && self.tried(s, a)).collect();
        if m.iter().any(|&x| x) { m } else { mask.to_vec() }
    }

    /// The feasible actions of `mask` whose Q ties with the best one in `s`.
    pub fn tied_best(&self, s: &str, mask: &[bool]) -> Vec<usize> {
        let Some(best) = self.greedy(s, mask) else { return Vec::new() };
        let top = self.value(s, best);
        mask.iter().enumerate().filter(|&(a, &ok)| ok && self.value(s, a) == top).map(|(a, _)| a).collect()
    }

    /// The highest minus the lowest Q over the actions tried in `s` (0 when
    /// fewer than two were).
    pub fn spread(&self, s: &str) -> f64 {
        let Some(row) = self.q.get(s) else { return 0.0 };
        let vals: Vec<f64> = (0..row.len()).filter(|&a| self.tried(s, a)).map(|a| row[a]).collect();
        if vals.len() < 2 {
            return 0.0;
        }
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        hi - lo
    }

    /// The greedy action of `s` over its tried actions (ties: the lowest
    /// index), `None` when nothing was tried: what the convergence
    /// criterion of `dlsched rifling-train` compares between episodes.
    pub fn greedy_tried(&self, s: &str) -> Option<usize> {
        let n = self.q.get(s)?.len();
        let mask: Vec<bool> = (0..n).map(|a| self.tried(s, a)).collect();
        if mask.iter().any(|&x| x) { self.greedy(s, &mask) } else { None }
    }

    /// Epsilon now: linear from `epsilon_start` at episode (or decision) 0
    /// to `epsilon_end` at `epsilon_decay`, constant after.
    pub fn epsilon(&self) -> f64 {
        let p = &self.params;
        let at = match p.epsilon_per {
            EpsilonPer::Episode => self.episode,
            EpsilonPer::Decision => self.decisions,
        };
        if p.epsilon_decay == 0 || at >= p.epsilon_decay {
            return p.epsilon_end;
        }
        let f = at as f64 / p.epsilon_decay as f64;
        p.epsilon_start + (p.epsilon_end - p.epsilon_start) * f
    }

    /// State key of a task (`None` feature = inference): `t<group>|<profile>`
    /// or `inf|<profile>`, followed by `|q<bucket>` ([`queue_bucket`] of
    /// `waiting`, the tasks behind the head) when the queue feature is on.
    pub fn state(&self, feature: Option<f64>, profile: &str, waiting: usize) -> String {
        let base = match feature {
            None => format!("inf|{profile}"),
            Some(x) if self.centroids.is_empty() || !x.is_finite() => format!("t0|{profile}"),
            Some(x) => format!("t{}|{profile}", nearest(&self.centroids, x)),
        };
        if self.params.queue_feature { format!("{base}|q{}", queue_bucket(waiting)) } else { base }
    }

    /// Q(s, a) (`q_init` for an unseen state).
    pub fn value(&self, s: &str, a: usize) -> f64 {
        self.q.get(s).map_or(self.params.q_init, |row| row[a])
    }

    /// The feasible action with the highest Q (ties: lowest index; the
    /// value, not the choice, of the greedy action).
    pub fn greedy(&self, s: &str, mask: &[bool]) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (a, _) in mask.iter().enumerate().filter(|(_, ok)| **ok) {
            if best.is_none_or(|b| self.value(s, a) > self.value(s, b)) {
                best = Some(a);
            }
        }
        best
    }

    /// The greedy choice: the feasible action with the highest Q, ties
    /// broken by [`RiflingParams::tie_break`] (a random tie-break draws one
    /// number from the agent's stream, only when there is a tie).
    pub fn greedy_choice(&mut self, s: &str, mask: &[bool]) -> Option<usize> {
        let best = self.greedy(s, mask)?;
        if self.params.tie_break == TieBreak::LowestIndex {
            return Some(best);
        }
        let top = self.value(s, best);
        let tied: Vec<usize> =
            mask.iter().enumerate().filter(|&(a, &ok)| ok && self.value(s, a) == top).map(|(a, _)| a).collect();
        if tied.len() < 2 { Some(best) } else { Some(tied[self.rng.gen_range(0..tied.len())]) }
    }

    /// Epsilon-greedy choice among feasible actions (`explore` false: greedy).
    /// Counts the decision.
    pub fn select(&mut self, s: &str, mask: &[bool], explore: bool) -> Option<usize> {
        let eps = self.epsilon();
        self.decisions += 1;
        if explore && self.rng.gen_bool(eps.clamp(0.0, 1.0)) {
            return self.random(mask);
        }
        self.greedy_choice(s, mask)
    }

    /// The discount of a transition that lasted `dt_ms`: `γ^(Δt/τ)` with
    /// `τ = tau_s`, or `γ` per scheduling point when `tau_s` is 0.
    pub fn discount(&self, dt_ms: u64) -> f64 {
        let p = &self.params;
        if p.tau_s > 0.0 { p.gamma.powf(dt_ms as f64 / 1000.0 / p.tau_s) } else { p.gamma }
    }

    /// A uniformly random feasible action.
    pub fn random(&mut self, mask: &[bool]) -> Option<usize> {
        let ok: Vec<usize> = mask.iter().enumerate().filter(|(_, ok)| **ok).map(|(a, _)| a).collect();
        if ok.is_empty() { None } else { Some(ok[self.rng.gen_range(0..ok.len())]) }
    }

    /// `Q(s,a) <- Q(s,a) + alpha (r + d max_{a' feasible in s'} Q(s',a') - Q(s,a))`
    /// with `d` = [`Agent::discount`] of the transition's `dt_ms`; returns the
    /// new value.
    pub fn update(&mut self, s: &str, a: usize, r: f64, s2: &str, mask2: &[bool], dt_ms: u64) -> f64 {
        let next = self.greedy(s2, mask2).map_or(0.0, |b| self.value(s2, b));
        let d = self.discount(dt_ms);
        let (alpha, init, n) = (self.params.alpha, self.params.q_init, self.actions);
        let visits = self.visits.entry(s.to_string()).or_insert_with(|| vec![0; n]);
        visits[a] += 1;
        let alpha = match self.params.alpha_schedule {
            AlphaSchedule::Constant => alpha,
            AlphaSchedule::Visits => 1.0 / visits[a] as f64,
        };
        let row = self.q.entry(s.to_string()).or_insert_with(|| vec![init; n]);
        let dq = alpha * (r + d * next - row[a]);
        row[a] += dq;
        let v = row[a];
        self.max_dq = self.max_dq.max(dq.abs());
        self.sum_dq += dq.abs();
        self.updates += 1;
        v
    }

    /// Re-runs the K-means on `features` and carries every Q row of a
    /// training group to each new group whose nearest old centroid it was.
    /// Without the `kmeans` feature the groups stay as they are (the
    /// registry refuses the learning `rifling` then).
    pub fn regroup(&mut self, features: &[f64]) {
        #[cfg(feature = "kmeans")]
        let new = kmeans_1d(features, self.params.k, &mut self.rng);
        #[cfg(not(feature = "kmeans"))]
        let new: Vec<f64> = {
            let _ = features;
            Vec::new()
        };
        if new.is_empty() || new == self.centroids {
            return;
        }
        self.regroups += 1;
        if !self.centroids.is_empty() {
            let old_of_new: Vec<usize> = new.iter().map(|&c| nearest(&self.centroids, c)).collect();
            self.q = carry_rows(&self.q, &old_of_new);
            self.visits = carry_rows(&self.visits, &old_of_new);
        }
        self.centroids = new;
    }
}

/// The rows of `table` after a regrouping: inference rows as they are, and
/// for each new training group `g` the rows of its nearest old group
/// `old_of_new[g]`.
fn carry_rows<T: Clone>(table: &BTreeMap<String, Vec<T>>, old_of_new: &[usize]) -> BTreeMap<String, Vec<T>> {
    let mut q = BTreeMap::new();
    for (key, row) in table {
        if key.starts_with("inf|") {
            q.insert(key.clone(), row.clone());
        }
    }
    for (g, &old) in old_of_new.iter().enumerate() {
        let prefix = format!("t{old}|");
        for (key, row) in table.range(prefix.clone()..) {
            let Some(profile) = key.strip_prefix(&prefix) else { break };
            q.insert(format!("t{g}|{profile}"), row.clone());
        }
    }
    q
}

/// An open transition, closed at the next scheduling point.
#[derive(Clone, Debug)]
struct Open {
    state: String,
    action: usize,
    at_ms: u64,
    /// Integral of Phi over (at, last], ms × Phi.
    area: f64,
    /// The task launched (scaling-efficiency reward), if any.
    job: Option<(JobId, u32)>,
}

/// The RIFLING policy over moldable tasks.
pub struct RiflingPolicy {
    mode: RiflingMode,
    agent: Arc<Mutex<Agent>>,
    db: Arc<ProfileDb>,
    pending: Vec<JobId>,
    running: Vec<JobId>,
    arrivals: u64,
    window: std::collections::VecDeque<f64>,
    features: HashMap<JobId, Option<f64>>,
    open: Option<Open>,
    phi: f64,
    last_ms: u64,
    curve: String,
    rewards: Vec<f64>,
    waits: u64,
    diag: Diagnostics,
}

/// What a run of the learning agent (online or frozen) measures about its
/// own table: which states it visited with which actions
/// feasible, and how decided its greedy choices were.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diagnostics {
    /// Visited states, each with the union of the actions feasible at its
    /// visits (placements and WAIT).
    pub visited: BTreeMap<String, Vec<bool>>,
    /// Scheduling points seen.
    pub decisions: u64,
    /// Sum over decisions of `1 / #feasible actions`.
    pub inv_feasible: f64,
    /// Sum over decisions of `1 / #actions tied at the greedy rule's top`
    /// (1 with the lowest-index tie-break).
    pub inv_tied: f64,
    /// Decisions at which every action the greedy rule ranked tied (the
    /// greedy choice was a uniformly random one), with at least two ranked.
    pub all_tied: u64,
}

impl Diagnostics {
    /// Records one scheduling point in state `s` with feasibility `mask`,
    /// where the greedy rule ranked `ranked` actions and `tied` of them
    /// tied at the top (`lowest_index`: ties are broken deterministically).
    pub fn record(&mut self, s: &str, mask: &[bool], ranked: usize, tied: usize, lowest_index: bool) {
        let row = self.visited.entry(s.to_string()).or_insert_with(|| vec![false; mask.len()]);
        for (seen, &ok) in row.iter_mut().zip(mask) {
            *seen |= ok;
        }
        self.decisions += 1;
        let feasible = mask.iter().filter(|&&ok| ok).count().max(1);
        self.inv_feasible += 1.0 / feasible as f64;
        self.inv_tied += if lowest_index { 1.0 } else { 1.0 / tied.max(1) as f64 };
        if ranked >= 2 && tied == ranked && !lowest_index {
            self.all_tied += 1;
        }
    }

    /// The summary metrics against `agent`'s table (at the run's end):
    /// - `rifling_states_visited`;
    /// - `rifling_all_tried_share`: share of visited states whose every
    ///   action ever feasible there was tried ([`Agent::tried`]);
    /// - `rifling_greedy_repeat`: mean over decisions of `1 / #tied`, the
    ///   chance that the greedy rule, asked again, picks the same action (1 =
    ///   the table decides);
    /// - `rifling_random_repeat`: mean over decisions of `1 / #feasible`,
    ///   the same chance for a uniformly random choice (the expected
    ///   agreement of any rule with random placement; a greedy rule that is
    ///   random among all feasible actions scores this);
    /// - `rifling_greedy_all_tied_share`: share of decisions at which the
    ///   greedy rule's ranked actions all tied;
    /// - `rifling_q_spread_mean`: mean over visited states of
    ///   [`Agent::spread`] (Q max − min over tried actions).
    pub fn metrics(&self, agent: &Agent) -> Vec<(&'static str, f64)> {
        let n = self.visited.len();
        let per = |x: f64, d: f64| if d > 0.0 { x / d } else { 0.0 };
        let all_tried =
            self.visited.iter().filter(|(s, m)| m.iter().enumerate().all(|(a, &ok)| !ok || agent.tried(s, a))).count();
        let spread: f64 = self.visited.keys().map(|s| agent.spread(s)).sum();
        let d = self.decisions as f64;
        vec![
            ("rifling_states_visited", n as f64),
            ("rifling_all_tried_share", per(all_tried as f64, n as f64)),
            ("rifling_greedy_repeat", per(self.inv_tied, d)),
            ("rifling_random_repeat", per(self.inv_feasible, d)),
            ("rifling_greedy_all_tied_share", per(self.all_tied as f64, d)),
            ("rifling_q_spread_mean", per(spread, n as f64)),
        ]
    }
}

impl RiflingPolicy {
    /// A policy driving `agent` (shared so that a trainer keeps it across
    /// episodes).
    pub fn new(mode: RiflingMode, agent: Arc<Mutex<Agent>>, db: Arc<ProfileDb>) -> Self {
        RiflingPolicy {
            mode,
            agent,
            db,
            pending: Vec::new(),
            running: Vec::new(),
            arrivals: 0,
            window: Default::default(),
            features: HashMap::new(),
            open: None,
            phi: 0.0,
            last_ms: 0,
            curve: "decision,time_s,reward,normalized_throughput,epsilon,action\n".to_string(),
            rewards: Vec::new(),
            waits: 0,
            diag: Diagnostics::default(),
        }
    }

    /// Brings the Phi integral up to `now` and recomputes Phi from the view.
    fn advance(&mut self, view: &View<'_>) {
        let now = view.now.as_ms();
        if let Some(o) = &mut self.open {
            o.area += self.phi * now.saturating_sub(self.last_ms.max(o.at_ms)) as f64;
        }
        self.last_ms = now;
        self.running.retain(|&j| matches!(view.jobs.state(j), JobState::Running(_)));
        let total: f64 = self
            .running
            .iter()
            .map(|&j| match view.jobs.state(j) {
                JobState::Running(r) => r.rate,
                _ => 0.0,
            })
            .sum();
        self.phi = total / f64::from(view.cluster.total_gpus().max(1));
    }

    /// The reward of the open transition closed at `now`.
    fn reward(&self, p: &RiflingParams, o: &Open, view: &View<'_>) -> f64 {
        match p.reward {
            RewardKind::Throughput | RewardKind::ThroughputIntegral => {
                throughput_reward(p, o.area, view.now.as_ms().saturating_sub(o.at_ms), self.phi)
            }
            RewardKind::ScalingEfficiency => match o.job {
                None => 0.0,
                Some((j, n)) => {
                    let spec = view.jobs.spec(j);
                    let rate = match view.jobs.state(j) {
                        JobState::Running(r) => r.rate,
                        JobState::Completed(d) => spec.duration_ms as f64 / d.end.since(d.start).max(1) as f64,
                        _ => 0.0,
                    };
                    rate / f64::from(n.max(1))
                }
            },
        }
    }

    fn agent_params(&self) -> RiflingParams {
        self.agent.lock().map(|a| a.params).unwrap_or_default()
    }
}

impl Policy for RiflingPolicy {
    fn name(&self) -> String {
        match self.mode {
            RiflingMode::Online => "rifling",
            RiflingMode::Frozen => "rifling-frozen",
            RiflingMode::Random => "random-placement",
        }
        .to_string()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        self.advance(view);
        self.pending.push(job);
        let spec = view.jobs.spec(job);
        let feature = spec
            .task
            .as_deref()
            .and_then(|t| (!t.inference).then(|| log_ccr(&self.db, spec.model().unwrap_or(""), t.global_bsz)));
        self.features.insert(job, feature);
        if self.mode != RiflingMode::Online {
            return;
        }
        if let Some(x) = feature.filter(|x| x.is_finite()) {
            self.window.push_back(x);
            let cap = self.agent_params().window.max(1);
            while self.window.len() > cap {
                self.window.pop_front();
            }
        }
        self.arrivals += 1;
        let mut agent = self.agent.lock().expect("agent lock");
        let k = agent.params.k;
        let every = agent.params.regroup_every.max(1);
        let few = agent.centroids.len() < k;
        if few || self.arrivals.is_multiple_of(every) {
            let xs: Vec<f64> = self.window.iter().copied().collect();
            agent.regroup(&xs);
        }
    }

    fn on_completion(&mut self, _job: JobId, view: &View<'_>) {
        self.advance(view);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        self.advance(view);
        let Some(&head) = self.pending.first() else { return Decision::Wait };
        let spec = view.jobs.spec(head);
        let Some(task) = spec.task.as_deref() else { return Decision::Wait };
        let vc = spec.vc;
        let params = self.agent_params();
        let busy = !self.running.is_empty();
        let mask = feasible(view.cluster, vc, task.global_bsz, wait_available(params.wait, busy));
        let wait = mask.len() - 1;
        if !mask[..wait].iter().any(|&ok| ok) {
            // Only WAIT: not a scheduling point.
            return Decision::Wait;
        }
        let gpn = view.cluster.partition(vc).max_node_gpus;
        let profile = free_profile(view.cluster, vc);
        let feature = self.features.get(&head).copied().flatten();
        let waiting = self.pending.len() - 1;
        let mut agent = self.agent.lock().expect("agent lock");
        let s = agent.state(if task.inference { None } else { Some(feature.unwrap_or(f64::NAN)) }, &profile, waiting);
        let mut reward = None;
        if let Some(o) = self.open.take() {
            let r = self.reward(&params, &o, view);
            if self.mode == RiflingMode::Online {
                agent.update(&o.state, o.action, r, &s, &mask, view.now.as_ms().saturating_sub(o.at_ms));
            }
            reward = Some(r);
            self.rewards.push(r);
        }
        let eps = agent.epsilon();
        // The actions the greedy rule ranks: a frozen table's tried ones
        // (FrozenGreedy::Tried), else every feasible one.
        let ranked = if self.mode == RiflingMode::Frozen {
            agent.greedy_mask(&s, &mask, params.frozen_greedy == FrozenGreedy::Tried)
        } else {
            mask.clone()
        };
        if self.mode != RiflingMode::Random {
            let tied = agent.tied_best(&s, &ranked).len();
            let n_ranked = ranked.iter().filter(|&&ok| ok).count();
            self.diag.record(&s, &mask, n_ranked, tied, params.tie_break == TieBreak::LowestIndex);
        }
        let action = match self.mode {
            RiflingMode::Online => agent.select(&s, &mask, true),
            RiflingMode::Frozen => agent.select(&s, &ranked, false),
            RiflingMode::Random => {
                let mut m = mask.clone();
                m[wait] = false;
                agent.decisions += 1;
                agent.random(&m)
            }
        }
        .expect("a feasible placement exists");
        let decision_no = agent.decisions;
        drop(agent);
        let decision = if action == wait {
            self.waits += 1;
            self.open = Some(Open { state: s, action, at_ms: view.now.as_ms(), area: 0.0, job: None });
            Decision::Wait
        } else {
            let (d_node, d_gpn) = action_shape(action, gpn);
            let gpus = super::symmetric::physical(view.cluster, vc, d_node, d_gpn, params.best_fit_nodes)
                .expect("feasible placement has GPUs");
            self.pending.remove(0);
            self.running.push(head);
            self.open =
                Some(Open { state: s, action, at_ms: view.now.as_ms(), area: 0.0, job: Some((head, d_node * d_gpn)) });
            Decision::Launch { job: head, gpus }
        };
        use std::fmt::Write;
        let act = if action == wait {
            "wait".to_string()
        } else {
            let (a, b) = action_shape(action, gpn);
            format!("{a}x{b}")
        };
        let _ = writeln!(
            self.curve,
            "{decision_no},{:.3},{},{:.6},{:.4},{act}",
            view.now.as_secs_f64(),
            // `+ 0.0` turns a negative zero into 0 (no `-0.000000` in the file).
            reward.map_or(String::new(), |r| format!("{:.6}", r + 0.0)),
            self.phi + 0.0,
            eps
        );
        decision
    }

    fn metrics(&self, _jobs: &JobTable) -> Vec<(&'static str, f64)> {
        let a = self.agent.lock().map(|a| (a.updates, a.regroups, a.q.len(), a.centroids.len())).unwrap_or_default();
        let mean_r =
            if self.rewards.is_empty() { 0.0 } else { self.rewards.iter().sum::<f64>() / self.rewards.len() as f64 };
        let mut m = vec![
            ("rifling_q_updates", a.0 as f64),
            ("rifling_regroups", a.1 as f64),
            ("rifling_states", a.2 as f64),
            ("rifling_groups", a.3 as f64),
            ("rifling_waits", self.waits as f64),
            ("rifling_reward_mean", mean_r),
        ];
        // The table diagnostics, for the learning agent only
        // (random placement's outputs stay as they were).
        if self.mode != RiflingMode::Random
            && let Ok(agent) = self.agent.lock()
        {
            m.extend(self.diag.metrics(&agent));
        }
        m
    }

    fn files(&self) -> Vec<(&'static str, String)> {
        vec![("learning_curve.csv", self.curve.clone())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "kmeans")]
    #[test]
    fn kmeans_finds_separable_groups() {
        let mut xs = Vec::new();
        for i in 0..30 {
            let d = f64::from(i % 10) * 0.01;
            xs.push([0.0, 5.0, 10.0][i as usize / 10] + d);
        }
        let mut rng = crate::rng::stream(7, "rifling.test");
        let c = kmeans_1d(&xs, 3, &mut rng);
        assert_eq!(c.len(), 3);
        for (got, want) in c.iter().zip([0.045, 5.045, 10.045]) {
            assert!((got - want).abs() < 1e-9, "{c:?}");
        }
        // Same seed, same centroids; fewer distinct values than k: the values.
        assert_eq!(kmeans_1d(&xs, 3, &mut crate::rng::stream(7, "rifling.test")), c);
        assert_eq!(kmeans_1d(&[2.0, 1.0, 2.0], 4, &mut rng), vec![1.0, 2.0]);
        assert_eq!(nearest(&c, 4.0), 1);
    }

    #[test]
    fn q_update_by_hand() {
        let p = RiflingParams { alpha: 0.5, gamma: 0.9, ..RiflingParams::first_proposal() };
        let mut a = Agent::new(p, 3, 1);
        a.q.insert("s".into(), vec![1.0, 0.0, 0.0]);
        a.q.insert("s2".into(), vec![3.0, 4.0, -1.0]);
        // Action 1 of s2 is masked: the max is over feasible actions only (3).
        // 1 + 0.5 (2 + 0.9 · 3 - 1) = 2.85
        let v = a.update("s", 0, 2.0, "s2", &[true, false, true], 5_000);
        assert!((v - 2.85).abs() < 1e-12, "{v}");
        assert_eq!(a.value("s", 0), v);
        // An unseen next state counts 0: 0 + 0.5 (1 - 0) = 0.5.
        assert!((a.update("s", 2, 1.0, "new", &[true, true, true], 0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn masking_never_selects_an_infeasible_action() {
        let p = RiflingParams { epsilon_start: 1.0, epsilon_end: 1.0, ..Default::default() };
        let mut a = Agent::new(p, 17, 3);
        let mut rng = crate::rng::stream(3, "rifling.test.masks");
        for i in 0..2000 {
            let mask: Vec<bool> = (0..17).map(|_| rng.gen_bool(0.3)).collect();
            // Greedy side too: make masked actions look best.
            a.q.insert("s".into(), mask.iter().map(|&ok| if ok { 0.0 } else { 9.0 }).collect());
            let pick = a.select("s", &mask, i % 2 == 0);
            match pick {
                Some(x) => assert!(mask[x]),
                None => assert!(mask.iter().all(|ok| !ok)),
            }
        }
    }

    /// A toy environment: one task class on a 4 × 4 platform that loses most
    /// of its speed across nodes (normalised rate n on n GPUs of one node, 0.1 n over
    /// nodes: a 16-GPU spread runs at 1.6, below one whole node's 4);
    /// reward = its rate / 16 GPUs. After training the greedy
    /// choice is the whole node, `<1, 4>`.
    #[test]
    fn learns_the_clearly_best_placement() {
        let p = RiflingParams {
            alpha: 0.2,
            gamma: 0.0,
            epsilon_start: 1.0,
            epsilon_end: 0.1,
            epsilon_decay: 2000,
            ..RiflingParams::first_proposal()
        };
        let mut a = Agent::new(p, 17, 11);
        let mask: Vec<bool> = (0..17).map(|x| x < 16).collect();
        let reward = |act: usize| {
            let (dn, dg) = action_shape(act, 4);
            let n = f64::from(dn * dg);
            (if dn == 1 { n } else { 0.1 * n }) / 16.0
        };
        for _ in 0..4000 {
            let act = a.select("t0|4,4,4,4", &mask, true).unwrap();
            a.update("t0|4,4,4,4", act, reward(act), "t0|4,4,4,4", &mask, 0);
        }
        assert_eq!(a.greedy("t0|4,4,4,4", &mask), Some(action_index(1, 4, 4)));
    }

    #[cfg(feature = "kmeans")]
    #[test]
    fn epsilon_decays_linearly_and_regroup_carries_rows() {
        let mut a = Agent::new(RiflingParams { k: 2, ..RiflingParams::first_proposal() }, 3, 1);
        assert!((a.epsilon() - 0.3).abs() < 1e-12);
        a.decisions = 250;
        assert!((a.epsilon() - 0.175).abs() < 1e-12);
        a.decisions = 10_000;
        assert!((a.epsilon() - 0.05).abs() < 1e-12);
        a.regroup(&[0.0, 0.1, 5.0, 5.1]);
        assert!((a.centroids[0] - 0.05).abs() < 1e-6 && (a.centroids[1] - 5.05).abs() < 1e-6);
        a.q.insert("t1|x".into(), vec![1.0, 2.0, 3.0]);
        a.q.insert("inf|x".into(), vec![7.0, 0.0, 0.0]);
        // New centroids 5.0 and 9.0: both nearest old group 1.
        a.regroup(&[5.0, 5.0, 9.0, 9.0]);
        assert_eq!(a.centroids, vec![5.0, 9.0]);
        assert_eq!(a.q["t0|x"], vec![1.0, 2.0, 3.0]);
        assert_eq!(a.q["t1|x"], vec![1.0, 2.0, 3.0]);
        assert_eq!(a.q["inf|x"][0], 7.0);
    }

    #[test]
    fn ccr_of_the_task_models_is_ordered_as_expected() {
        let db = &ProfileDb::builtin();
        // VGG-16 (138 M parameters) is more communication-bound than ResNet-50.
        let vgg = log_ccr(db, "vgg16-imagenet", 64);
        let resnet = log_ccr(db, "resnet50-imagenet", 64);
        assert!(vgg.is_finite() && resnet.is_finite() && vgg < resnet, "{vgg} {resnet}");
        // Doubling the batch doubles the ratio.
        assert!((log_ccr(db, "resnet50-imagenet", 128) - resnet - 2f64.log10()).abs() < 1e-9);
    }

    #[test]
    fn random_tie_break_follows_the_agent_stream() {
        let p = RiflingParams { tie_break: TieBreak::Random, ..Default::default() };
        let mask = [true, true, true, false];
        // Actions 0 and 1 tie at 5; 2 is lower; 3 (higher) is masked.
        let row = vec![5.0, 5.0, 1.0, 9.0];
        for seed in [1, 2, 3, 4, 5, 6] {
            let mut a = Agent::new(p, 4, seed);
            a.q.insert("s".into(), row.clone());
            // Independent route: the choice is tied[gen_range(0..2)] on
            // stream `rifling.agent` of the seed, one draw per tied choice.
            let mut r = crate::rng::stream(seed, "rifling.agent");
            for _ in 0..8 {
                let want = [0, 1][r.gen_range(0..2)];
                assert_eq!(a.greedy_choice("s", &mask), Some(want), "seed {seed}");
            }
        }
        // Both tied actions do get chosen, and never the lower or masked ones.
        let mut a = Agent::new(p, 4, 9);
        a.q.insert("s".into(), row.clone());
        let picks: Vec<usize> = (0..64).map(|_| a.greedy_choice("s", &mask).unwrap()).collect();
        assert!(picks.contains(&0) && picks.contains(&1) && picks.iter().all(|&x| x < 2));
        // No tie: no draw, the best one.
        a.q.insert("u".into(), vec![1.0, 2.0, 3.0, 0.0]);
        assert_eq!(a.greedy_choice("u", &mask), Some(2));
        // Lowest-index rule: always 0.
        let mut low = Agent::new(RiflingParams { tie_break: TieBreak::LowestIndex, ..p }, 4, 9);
        low.q.insert("s".into(), row);
        assert!((0..16).all(|_| low.greedy_choice("s", &mask) == Some(0)));
        // An unseen state is all q_init: every feasible action ties.
        let mut fresh = Agent::new(p, 4, 2);
        let mut r = crate::rng::stream(2, "rifling.agent");
        assert_eq!(fresh.greedy_choice("never-seen", &mask), Some(r.gen_range(0..3)));
    }

    #[test]
    fn epsilon_decays_per_episode() {
        // Defaults: 0.3 -> 0.05 over 20 episodes, whatever the decisions.
        let mut a = Agent::new(RiflingParams::default(), 3, 1);
        a.decisions = 10_000;
        a.start_episode(0, 1000);
        assert!((a.epsilon() - 0.3).abs() < 1e-12);
        // Episode 8: 0.3 + (0.05 - 0.3) · 8/20 = 0.3 - 0.1 = 0.2.
        a.start_episode(8, 1008);
        assert!((a.epsilon() - 0.2).abs() < 1e-12, "{}", a.epsilon());
        // Episode 15: 0.3 - 0.25 · 0.75 = 0.1125.
        a.start_episode(15, 1015);
        assert!((a.epsilon() - 0.1125).abs() < 1e-12);
        // Episodes 20 and 29 (the last of the shipped 30): the floor.
        for e in [20, 29] {
            a.start_episode(e, 1000 + e);
            assert!((a.epsilon() - 0.05).abs() < 1e-12);
        }
        // Selecting counts decisions but leaves a per-episode epsilon alone.
        a.start_episode(8, 1);
        a.select("s", &[true, true, true], true);
        assert!((a.epsilon() - 0.2).abs() < 1e-12);
    }

    #[test]
    fn time_discounted_update_with_the_integrated_reward() {
        let p = RiflingParams {
            alpha: 0.5,
            gamma: 0.9,
            tau_s: 600.0,
            q_init: 10.0,
            reward: RewardKind::ThroughputIntegral,
            alpha_schedule: AlphaSchedule::Constant,
            ..Default::default()
        };
        // A transition of 1200 s: Phi 0.5 for 300 s then 0.75 for 900 s:
        // ∫ Phi dt = 150 + 675 = 825 s, in ms × Phi 825,000; / 600 s = 1.375.
        let area = 0.5 * 300_000.0 + 0.75 * 900_000.0;
        let r = throughput_reward(&p, area, 1_200_000, 0.75);
        assert!((r - 1.375).abs() < 1e-12, "{r}");
        // The time-average reading of the same interval: 825 / 1200 = 0.6875.
        let old = RiflingParams { reward: RewardKind::Throughput, ..p };
        assert!((throughput_reward(&old, area, 1_200_000, 0.75) - 0.6875).abs() < 1e-12);
        // Zero length: integral 0; time-average = Phi now.
        assert_eq!(throughput_reward(&p, 0.0, 0, 0.75), 0.0);
        assert_eq!(throughput_reward(&old, 0.0, 0, 0.75), 0.75);
        let mut a = Agent::new(p, 3, 1);
        a.q.insert("s2".into(), vec![2.0, 4.0, 8.0]);
        // Discount 0.9^(1200/600) = 0.81; next = max over feasible {2, 4} = 4;
        // Q(s, 0) starts at q_init 10: 10 + 0.5 (1.375 + 0.81 · 4 - 10) = 7.3075.
        assert!((a.discount(1_200_000) - 0.81).abs() < 1e-12);
        let v = a.update("s", 0, r, "s2", &[true, true, false], 1_200_000);
        assert!((v - 7.3075).abs() < 1e-12, "{v}");
        // The rest of the new row is q_init.
        assert_eq!(a.q["s"][1..], [10.0, 10.0]);
        // Two placements at one instant: discount 1, reward 0: Q <- Q + α (Q' - Q).
        // 10 + 0.5 (0 + 1 · 8 - 10) = 9.
        assert!((a.update("s", 1, 0.0, "s2", &[true, true, true], 0) - 9.0).abs() < 1e-12);
        // tau 0: discount per decision, 0.9 whatever the length.
        let per = Agent::new(RiflingParams { tau_s: 0.0, reward: RewardKind::Throughput, ..p }, 3, 1);
        assert_eq!(per.discount(1_200_000), 0.9);
        assert_eq!(per.discount(0), 0.9);
    }

    #[test]
    fn wait_rule_masks_wait() {
        assert!(wait_available(WaitRule::WhenRunning, true));
        assert!(!wait_available(WaitRule::WhenRunning, false));
        assert!(!wait_available(WaitRule::Never, true));
        assert!(!wait_available(WaitRule::Never, false));
        // On lab16 (4 × 4, all free), a task of global batch 4: placements
        // <1,1..4>, <2,1..2>, <3,1>, <4,1> (d_node · d_gpn <= 4), WAIT last.
        let cluster = Cluster::new(crate::cluster::ClusterPreset::Lab16.spec()).unwrap();
        for (busy, want_wait) in [(true, true), (false, false)] {
            let m = feasible(&cluster, VcId(0), 4, wait_available(WaitRule::WhenRunning, busy));
            assert_eq!(m[16], want_wait);
            let m = feasible(&cluster, VcId(0), 4, wait_available(WaitRule::Never, busy));
            assert!(!m[16]);
            let on: Vec<(u32, u32)> = (0..16).filter(|&x| m[x]).map(|x| action_shape(x, 4)).collect();
            assert_eq!(on, [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2), (3, 1), (4, 1)]);
        }
    }

    #[test]
    fn queue_feature_buckets() {
        let want = [(0, "0"), (1, "1"), (2, "2-3"), (3, "2-3"), (4, "4+"), (5, "4+"), (1000, "4+")];
        for (n, b) in want {
            assert_eq!(queue_bucket(n), b, "{n}");
        }
        let mut a = Agent::new(RiflingParams::default(), 17, 1);
        assert_eq!(a.state(None, "4,4,4,4", 0), "inf|4,4,4,4|q0");
        a.centroids = vec![1.0, 3.0];
        assert_eq!(a.state(Some(2.9), "4,3,0,0", 3), "t1|4,3,0,0|q2-3");
        // Off: the first proposal's key.
        a.params.queue_feature = false;
        assert_eq!(a.state(Some(2.9), "4,3,0,0", 3), "t1|4,3,0,0");
    }

    #[test]
    fn a_nan_ccr_is_an_error_naming_the_model() {
        let db = ProfileDb::builtin();
        // Every GENIE task model has a finite CCR in the builtin database.
        check_ccr(&db).unwrap();
        for (_, m) in crate::profile::genie::TASK_MODELS {
            assert!(log_ccr(&db, m, 64).is_finite(), "{m}");
        }
        // transformer-multi30k: 9.552 GFLOPs per sample, 54.3785 M params
        // (CCR_FACTS; layer count checked: 6 · (1,051,648 + 2,100,736) +
        // 6 · (2 · 1,051,648 + 2,100,736) = 44,138,496, + 2 · 512 · 10,000);
        // at batch 64: 9.552e9 · 64 / (4 · 54.3785e6) = 2,810.49, log10 3.44878.
        assert!((log_ccr(&db, "transformer-multi30k", 64) - 2810.49f64.log10()).abs() < 1e-5);
        // models.csv still has NaN there (its figures feed other runs'
        // memory estimates); CCR_FACTS supplies them.
        let row = db.model_info("transformer-multi30k").unwrap();
        assert!(row.params_m.is_nan() && row.gflops_per_sample.is_nan());
        assert_eq!(ccr_facts(&db, "transformer-multi30k"), Some((54.3785, 9.552)));
        // Without a fact: the model's own row, so a NaN is an error naming it.
        let mut bad = db.clone();
        let i = bad.models.iter().position(|m| m.model == "vgg16-imagenet").unwrap();
        bad.models[i].params_m = f64::NAN;
        let e = check_ccr(&bad).unwrap_err();
        for part in ["`vgg16-imagenet`", "`alexnet`", "params_m", "not a number"] {
            assert!(e.contains(part), "{e}");
        }
        bad.models[i].gflops_per_sample = f64::NAN;
        assert!(check_ccr(&bad).unwrap_err().contains("params_m or gflops_per_sample"));
        bad.models.remove(i);
        assert!(check_ccr(&bad).unwrap_err().contains("has no models.csv row"));
    }

    /// The table diagnostics on a table small enough to work by hand.
    #[test]
    fn diagnostics_by_hand_on_a_tiny_table() {
        // Three actions (two placements + WAIT), q_init 10, visit counts kept.
        let p = RiflingParams { q_init: 10.0, tie_break: TieBreak::Random, ..Default::default() };
        let mut a = Agent::new(p, 3, 1);
        // State A: actions 0 and 1 tried (Q 0.8 and 0.5), WAIT untried.
        a.q.insert("A".into(), vec![0.8, 0.5, 10.0]);
        a.visits.insert("A".into(), vec![2, 1, 0]);
        // State B: only action 0 tried (Q 0.3); 1 untried at 10.
        a.q.insert("B".into(), vec![0.3, 10.0, 10.0]);
        a.visits.insert("B".into(), vec![4, 0, 0]);
        assert!(a.tried("A", 0) && a.tried("A", 1) && !a.tried("A", 2) && !a.tried("B", 1));
        // Spread over tried actions: A 0.8 - 0.5 = 0.3; B one tried: 0.
        assert!((a.spread("A") - 0.3).abs() < 1e-12);
        assert_eq!(a.spread("B"), 0.0);
        assert_eq!(a.spread("unseen"), 0.0);
        // Greedy over tried ones: B takes 0 (0.3), not the untried 1 (10).
        let m2 = [true, true, false];
        assert_eq!(a.greedy_mask("B", &m2, true), vec![true, false, false]);
        assert_eq!(a.greedy_mask("B", &m2, false), m2.to_vec());
        // Nothing tried: every feasible action.
        assert_eq!(a.greedy_mask("C", &m2, true), m2.to_vec());
        assert_eq!(a.greedy_tried("B"), Some(0));
        assert_eq!(a.greedy_tried("A"), Some(0));
        assert_eq!(a.greedy_tried("C"), None);
        // Decisions: A with {0, 1} feasible (greedy ranks 2, 1 tied at the top);
        // A with {0, 1, WAIT} feasible; B with {0, 1}, ranked over all (untried
        // 1 wins alone); C unseen with {0, 1} (both tied at q_init).
        let mut d = Diagnostics::default();
        d.record("A", &[true, true, false], 2, a.tied_best("A", &[true, true, false]).len(), false);
        d.record("A", &[true, true, true], 2, 1, false);
        d.record("B", &m2, 2, a.tied_best("B", &m2).len(), false);
        d.record("C", &m2, 2, a.tied_best("C", &m2).len(), false);
        assert_eq!(a.tied_best("C", &m2), vec![0, 1]);
        let m: BTreeMap<&str, f64> = d.metrics(&a).into_iter().collect();
        assert_eq!(m["rifling_states_visited"], 3.0);
        // All tried: A was offered WAIT (untried) -> no; B offered 1 (untried)
        // -> no; C nothing tried -> no. 0 of 3.
        assert_eq!(m["rifling_all_tried_share"], 0.0);
        // Greedy repeat: (1 + 1 + 1 + 1/2) / 4 = 0.875.
        assert!((m["rifling_greedy_repeat"] - 0.875).abs() < 1e-12);
        // Random repeat: (1/2 + 1/3 + 1/2 + 1/2) / 4 = (11/6) / 4 = 0.458333.
        assert!((m["rifling_random_repeat"] - 11.0 / 24.0).abs() < 1e-12);
        // All tied: only C (2 ranked, 2 tied): 1 of 4.
        assert!((m["rifling_greedy_all_tied_share"] - 0.25).abs() < 1e-12);
        // Q spread: (0.3 + 0 + 0) / 3 = 0.1.
        assert!((m["rifling_q_spread_mean"] - 0.1).abs() < 1e-12);
        // After trying WAIT in A, A's offered actions are all tried: 1 of 3.
        a.visits.get_mut("A").unwrap()[2] = 1;
        let m: BTreeMap<&str, f64> = d.metrics(&a).into_iter().collect();
        assert!((m["rifling_all_tried_share"] - 1.0 / 3.0).abs() < 1e-12);
        // The lowest-index tie-break decides every time: repeat 1.
        let mut low = Diagnostics::default();
        low.record("C", &m2, 2, 2, true);
        let m: BTreeMap<&str, f64> = low.metrics(&a).into_iter().collect();
        assert_eq!((m["rifling_greedy_repeat"], m["rifling_greedy_all_tied_share"]), (1.0, 0.0));
    }

    #[cfg(feature = "kmeans")]
    #[test]
    fn visit_alpha_averages_the_targets_and_counts_visits() {
        let p = RiflingParams { gamma: 0.0, q_init: 10.0, ..Default::default() };
        assert_eq!(p.alpha_schedule, AlphaSchedule::Visits);
        let mut a = Agent::new(p, 2, 1);
        let m = [true, true];
        // gamma 0 and transitions of 1 s (0^(1/600) = 0; a zero-length one
        // would discount by 0^0 = 1): the target is the reward. 1/1: Q = 0.4 (replaces 10);
        // 1/2: 0.4 + (0.8 - 0.4) / 2 = 0.6; 1/3: 0.6 + (0.1 - 0.6) / 3 = 0.4333,
        // the mean of 0.4, 0.8, 0.1.
        a.start_episode(0, 1);
        assert!((a.update("s", 1, 0.4, "s", &m, 1000) - 0.4).abs() < 1e-12);
        assert!((a.update("s", 1, 0.8, "s", &m, 1000) - 0.6).abs() < 1e-12);
        assert!((a.update("s", 1, 0.1, "s", &m, 1000) - 1.3 / 3.0).abs() < 1e-12);
        assert_eq!(a.visits["s"], vec![0, 3]);
        // |dQ|: 9.6, 0.2, 0.1667: max 9.6, sum 9.9667.
        assert!((a.max_dq - 9.6).abs() < 1e-12);
        assert!((a.sum_dq - (9.6 + 0.2 + 0.5 / 3.0)).abs() < 1e-12);
        a.start_episode(1, 2);
        assert_eq!((a.max_dq, a.sum_dq), (0.0, 0.0));
        // Constant: 10 + 0.1 (0.4 - 10) = 9.04.
        let mut c = Agent::new(RiflingParams { alpha_schedule: AlphaSchedule::Constant, ..p }, 2, 1);
        assert!((c.update("s", 0, 0.4, "s", &m, 1000) - 9.04).abs() < 1e-12);
        // A table without counts: tried = moved off q_init.
        c.visits.clear();
        assert!(c.tried("s", 0) && !c.tried("s", 1));
        // Regrouping carries the counts with the rows.
        let mut g = Agent::new(RiflingParams { k: 2, ..p }, 2, 1);
        g.regroup(&[0.0, 0.1, 5.0, 5.1]);
        g.q.insert("t1|x".into(), vec![1.0, 2.0]);
        g.visits.insert("t1|x".into(), vec![3, 4]);
        g.regroup(&[5.0, 5.0, 9.0, 9.0]);
        assert_eq!(g.visits["t0|x"], vec![3, 4]);
        assert_eq!(g.visits["t1|x"], vec![3, 4]);
    }
}
