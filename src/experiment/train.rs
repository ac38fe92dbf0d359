//! Training loops of the learned policies: LDWP's deep Q-network over
//! synthetic episodes ([`train_ldwp`]) and RIFLING's Q-table over GENIE
//! episodes, with a convergence criterion ([`train_rifling`]).
//!
//! Each loop runs one simulation per episode (episode `i` uses seed
//! `seed + i`) with one learner shared across the episodes, calls a progress
//! callback after each episode and returns a typed report: the learning curve
//! (one row per episode run), the trained artefact and, for RIFLING, the
//! convergence verdict. Nothing here prints or writes files; the report
//! renders the files `dlsched ldwp-train` and `dlsched rifling-train` write
//! ([`LdwpTrainReport::model_json`], [`RiflingTrainReport::table_json`], the
//! `curve_csv` methods).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::cluster::ClusterPreset;
use crate::error::{RunError, TraceError};
use crate::experiment::{ClusterChoice, RateModelKind, RunSpec, WorkloadSource};
use crate::policy::ldwp::{Dqn, LdwpOptions, LdwpParams, load_model};
use crate::policy::registry::{PolicySpec, RiflingOptions};
use crate::policy::rifling::{Agent, RiflingParams};
use crate::workload::genie::{EctBasis, GenieWorkloadSpec, TaskMix};
use crate::workload::synthetic::SyntheticSpec;

/// Why a training loop stopped before producing its artefact.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// An option out of range: `option` is the options struct's field name
    /// (`episodes`, `jobs_per_hour`, ...), `message` what is wrong with it.
    #[error("{option} {message}")]
    Option {
        /// The field of the options struct.
        option: &'static str,
        /// What is wrong, e.g. "must be at least 1".
        message: String,
    },
    /// The learner's parameters are invalid (their own validation's message).
    #[error("{0}")]
    Params(String),
    /// A saved model or table could not be read.
    #[error(transparent)]
    Load(#[from] TraceError),
    /// A saved model does not fit this training (cluster, node count or
    /// hidden layers); the message names the file.
    #[error("{0}")]
    Mismatch(String),
    /// An episode's simulation failed.
    #[error("episode {episode}")]
    Episode {
        /// The episode index (0-based, within this training).
        episode: u64,
        /// The run's error.
        #[source]
        source: Box<RunError>,
    },
    /// The shared learner's lock was poisoned by a panicking episode.
    #[error("agent lock")]
    Lock,
}

fn opt_err(option: &'static str, message: String) -> TrainError {
    TrainError::Option { option, message }
}

/// The last seed of `episodes` episodes from `seed`, or an error when it
/// overflows the 64-bit seed range.
fn check_seeds(seed: u64, episodes: u64) -> Result<(), TrainError> {
    if seed.checked_add(episodes.saturating_sub(1)).is_none() {
        return Err(opt_err("seed", format!("{seed} + {episodes} episodes overflows the 64-bit seed range")));
    }
    Ok(())
}

// ---------------------------------------------------------------- LDWP

/// What an LDWP network starts from.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LdwpStart {
    /// Fresh weights drawn from the first episode's seed.
    #[default]
    Fresh,
    /// Continue a saved model (same cluster, same hidden layers) from its
    /// weights; episode numbering goes on after its last episode.
    Continue(PathBuf),
    /// Transfer a model trained on another cluster: its hidden layers are
    /// kept, the input and output layers re-initialised for this cluster's
    /// node count.
    Transfer(PathBuf),
}

/// Options of [`train_ldwp`].
#[derive(Clone, Debug, PartialEq)]
pub struct LdwpTrainOptions {
    /// Cluster preset to train on.
    pub cluster: ClusterPreset,
    /// Episodes, at least 1 (each a synthetic workload of its own seed).
    pub episodes: u64,
    /// Seed of the first episode; episode `i` uses `seed + i`.
    pub seed: u64,
    /// Jobs per episode, at least 1 (synthetic Philly-like mix, table rate model).
    pub jobs: u32,
    /// Arrival rate, jobs per hour (positive); `None`: from `load`.
    pub jobs_per_hour: Option<f64>,
    /// Offered load (GPU demand / capacity) when `jobs_per_hour` is `None`.
    pub load: f64,
    /// The learner's parameters.
    pub params: LdwpParams,
    /// What the network starts from.
    pub start: LdwpStart,
}

impl Default for LdwpTrainOptions {
    /// The defaults of `dlsched ldwp-train`: lab16, 20 episodes from seed
    /// 1000, 500 jobs at load 0.8, default parameters, fresh weights.
    fn default() -> Self {
        LdwpTrainOptions {
            cluster: ClusterPreset::Lab16,
            episodes: 20,
            seed: 1000,
            jobs: 500,
            jobs_per_hour: None,
            load: 0.8,
            params: LdwpParams::default(),
            start: LdwpStart::Fresh,
        }
    }
}

impl LdwpTrainOptions {
    /// Checks the options' ranges (episodes, jobs, arrival rate, seed range)
    /// and the parameters.
    ///
    /// # Errors
    /// [`TrainError::Option`] naming the first field out of range, else
    /// [`TrainError::Params`].
    pub fn validate(&self) -> Result<(), TrainError> {
        if self.episodes == 0 {
            return Err(opt_err("episodes", "must be at least 1".into()));
        }
        if self.jobs == 0 {
            return Err(opt_err("jobs", "must be at least 1".into()));
        }
        if let Some(x) = self.jobs_per_hour
            && !(x.is_finite() && x > 0.0)
        {
            return Err(opt_err("jobs_per_hour", format!("must be a positive number, got {x}")));
        }
        check_seeds(self.seed, self.episodes)?;
        self.params.validate().map_err(TrainError::Params)
    }
}

/// One LDWP training episode: a row of the learning curve.
#[derive(Clone, Debug, PartialEq)]
pub struct LdwpEpisode {
    /// Episode index within this training (0-based).
    pub episode: u64,
    /// The episode's seed.
    pub seed: u64,
    /// The agent's decisions so far (cumulative over its life).
    pub decisions: u64,
    /// Exploration rate after the episode.
    pub epsilon: f64,
    /// Mean reward per decision in the episode.
    pub reward_mean: f64,
    /// Mean training loss in the episode.
    pub loss_mean: f64,
    /// Training steps skipped as diverged so far (cumulative).
    pub diverged_steps: u64,
    /// Throughput, jobs per hour.
    pub throughput_jobs_per_hour: f64,
    /// GPU utilisation, share of GPU time busy.
    pub gpu_utilization: f64,
    /// Mean job completion time, s.
    pub jct_mean_s: f64,
}

/// Header of the LDWP learning curve (`NAME.curve.csv`).
pub const LDWP_CURVE_HEADER: &str = "episode,seed,decisions,epsilon,reward_mean,loss_mean,diverged_steps,throughput_jobs_per_hour,gpu_utilization,jct_mean_s\n";

impl LdwpEpisode {
    /// The episode's row of the curve CSV (with its newline).
    pub fn csv_row(&self) -> String {
        format!(
            "{},{},{},{:.4},{:.6},{:.6e},{},{:.4},{:.6},{:.3}\n",
            self.episode,
            self.seed,
            self.decisions,
            self.epsilon,
            self.reward_mean,
            self.loss_mean,
            self.diverged_steps,
            self.throughput_jobs_per_hour,
            self.gpu_utilization,
            self.jct_mean_s
        )
    }
}

/// What [`train_ldwp`] returns.
#[derive(Clone, Debug)]
pub struct LdwpTrainReport {
    /// One row per episode run.
    pub curve: Vec<LdwpEpisode>,
    /// The trained network, weights rounded to `f32` (the saved precision).
    pub model: Dqn,
    /// Where it started, as the manifest's `start` object.
    pub start: serde_json::Value,
    /// Cluster name.
    pub cluster: String,
    /// Cluster nodes.
    pub cluster_nodes: usize,
    /// Cluster GPUs.
    pub cluster_gpus: u32,
}

impl LdwpTrainReport {
    /// The learning curve as CSV ([`LDWP_CURVE_HEADER`] and one row per episode).
    pub fn curve_csv(&self) -> String {
        let mut s = String::from(LDWP_CURVE_HEADER);
        for r in &self.curve {
            s.push_str(&r.csv_row());
        }
        s
    }

    /// The model file (pretty JSON with a trailing newline: manifest and
    /// network), loadable by `--policy ldwp`; `command` is recorded as the
    /// manifest's `command`.
    ///
    /// # Errors
    /// Serialisation failures (non-finite numbers cannot occur in a valid model).
    pub fn model_json(&self, opts: &LdwpTrainOptions, command: &str) -> Result<String, serde_json::Error> {
        let g = &self.model;
        let doc = serde_json::json!({
            "manifest": {
                "what": "LDWP deep Q-network trained by dlsched ldwp-train",
                "command": command,
                "dlsched_version": env!("CARGO_PKG_VERSION"),
                "cluster": self.cluster,
                "cluster_nodes": self.cluster_nodes,
                "cluster_gpus": self.cluster_gpus,
                "workload": {
                    "kind": "synthetic",
                    "jobs": opts.jobs,
                    "jobs_per_hour": opts.jobs_per_hour,
                    "load": opts.load,
                    "rate_model": "table",
                    "profiles": "builtin",
                },
                "episodes": opts.episodes,
                "seeds": format!("{}..={}", opts.seed, opts.seed + opts.episodes - 1),
                "start": self.start,
                "weights": "f32 text",
                "parameters": g.params,
                "network": g.q.sizes(),
                "weights_count": g.q.n_params(),
            },
            "agent": g,
        });
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        Ok(text)
    }
}

/// A saved model's hidden layers must be the run's (`--param hidden`).
fn same_hidden_layers(p: &std::path::Path, m: &Dqn, params: &LdwpParams) -> Result<(), TrainError> {
    if m.params.hidden != params.hidden {
        return Err(TrainError::Mismatch(format!(
            "{}: hidden layers {:?}, --param hidden {:?}",
            p.display(),
            m.params.hidden,
            params.hidden
        )));
    }
    Ok(())
}

/// Trains an LDWP deep Q-network over `opts.episodes` synthetic episodes on
/// `opts.cluster` (table rate model, built-in profiles, no samples), calling
/// `progress` after each episode with its curve row and the agent.
///
/// # Errors
/// [`TrainError`]: options out of range, a start model unreadable or not
/// fitting, an episode's simulation failing.
// `..SyntheticSpec::default()` names only the fields set here, so that the
// workload's later options (e.g. a largest-job cap) take their defaults.
#[allow(clippy::needless_update)]
pub fn train_ldwp(
    opts: &LdwpTrainOptions,
    progress: &mut dyn FnMut(&LdwpEpisode, &Dqn),
) -> Result<LdwpTrainReport, TrainError> {
    opts.validate()?;
    let params = &opts.params;
    let cspec = opts.cluster.spec();
    let nodes = cspec.nodes.len();
    let (agent, first_episode, start) = match &opts.start {
        LdwpStart::Continue(p) => {
            let (mut m, c) = load_model(p)?;
            if c.as_deref().is_some_and(|c| c != cspec.name) || m.nodes != nodes {
                return Err(TrainError::Mismatch(format!(
                    "{}: trained on `{}` ({} nodes), not `{}` ({nodes} nodes); use --transfer-from",
                    p.display(),
                    c.as_deref().unwrap_or("?"),
                    m.nodes,
                    cspec.name
                )));
            }
            same_hidden_layers(p, &m, params)?;
            m.params = params.clone();
            let next = m.episode + 1;
            (m, next, serde_json::json!({ "continued_from": p.display().to_string() }))
        }
        LdwpStart::Transfer(p) => {
            let (m, c) = load_model(p)?;
            same_hidden_layers(p, &m, params)?;
            let mut t = m.transfer(nodes, opts.seed);
            t.params = params.clone();
            let carried = format!("layers 2..{} (hidden to hidden) of {}", m.q.layers.len() - 1, p.display());
            (
                t,
                0,
                serde_json::json!({
                    "transferred_from": p.display().to_string(),
                    "source_cluster": c,
                    "source_nodes": m.nodes,
                    "carried_over": carried,
                    "reinitialised": "input layer and output layer",
                }),
            )
        }
        LdwpStart::Fresh => {
            let db = crate::profile::db::ProfileDb::builtin();
            let models: Vec<String> = db.models().map(str::to_string).collect();
            (Dqn::new(params.clone(), nodes, models, opts.seed), 0, serde_json::json!({ "initialised": "fresh" }))
        }
    };
    let agent = Arc::new(Mutex::new(agent));
    let mut curve = Vec::with_capacity(usize::try_from(opts.episodes).unwrap_or(0).min(1 << 16));
    let lopts = LdwpOptions { params: params.clone(), ..LdwpOptions::default() };
    for e in 0..opts.episodes {
        let seed = opts.seed + e;
        {
            let mut g = agent.lock().map_err(|_| TrainError::Lock)?;
            g.episode = first_episode + e;
            g.reseed(seed);
        }
        // The training workload predates the one set of run defaults (issue
        // 35) and keeps its own, so that trained networks stay reproducible:
        // no duration cut, jobs up to the largest partition.
        let spec = RunSpec {
            policy: PolicySpec::Ldwp(lopts.clone()),
            workload: WorkloadSource::Synthetic(SyntheticSpec {
                jobs: opts.jobs,
                jobs_per_hour: opts.jobs_per_hour,
                load: opts.load,
                max_job_gpus: None,
                max_duration_s: None,
                ..SyntheticSpec::default()
            }),
            seed,
            rate_model: RateModelKind::Table,
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Synthetic(SyntheticSpec::default()),
                ClusterChoice::Preset { preset: opts.cluster },
            )
        };
        let shared = agent.clone();
        let r = crate::experiment::RunBuilder::new(&spec)
            .extension(shared)
            .run(|_| {})
            .map_err(|source| TrainError::Episode { episode: e, source: Box::new(source) })?;
        let s = &r.summary;
        let m = |k: &str| s.policy_metrics.get(k).copied().unwrap_or(0.0);
        let g = agent.lock().map_err(|_| TrainError::Lock)?;
        let row = LdwpEpisode {
            episode: e,
            seed,
            decisions: g.decisions,
            epsilon: g.epsilon(),
            reward_mean: m("ldwp_reward_mean"),
            loss_mean: m("ldwp_loss_mean"),
            diverged_steps: g.diverged,
            throughput_jobs_per_hour: m("throughput_jobs_per_hour"),
            gpu_utilization: s.gpu_utilization,
            jct_mean_s: s.jct_mean_s,
        };
        progress(&row, &g);
        curve.push(row);
    }
    let mut model = agent.lock().map_err(|_| TrainError::Lock)?.clone();
    // f32 text: half the file, loaded back exactly (nn module docs).
    model.q.round_to_f32();
    Ok(LdwpTrainReport {
        curve,
        model,
        start,
        cluster: cspec.name.to_string(),
        cluster_nodes: nodes,
        cluster_gpus: cspec.nodes.iter().map(|n| n.gpus).sum::<u32>(),
    })
}

// ---------------------------------------------------------------- RIFLING

/// Default of [`RiflingTrainOptions::converge_dq`].
pub const RIFLING_CONVERGE_DQ: f64 = 0.05;
/// Default of [`RiflingTrainOptions::converge_greedy`].
pub const RIFLING_CONVERGE_GREEDY: f64 = 0.05;

/// Options of [`train_rifling`].
#[derive(Clone, Debug, PartialEq)]
pub struct RiflingTrainOptions {
    /// Cluster preset to train on.
    pub cluster: ClusterPreset,
    /// Most episodes, at least 1 (each a GENIE workload of its own seed);
    /// training stops earlier when the convergence criterion holds.
    pub episodes: u64,
    /// Convergence window, episodes: stop once epsilon is at its floor and
    /// each of the last `converge_window` episodes settled ([`converged`]);
    /// 0 = never stop early.
    pub converge_window: u64,
    /// Mean |ΔQ| per update in an episode below which it counts as settled (positive).
    pub converge_dq: f64,
    /// Share of an episode's updates made in states whose greedy action
    /// changed in it, below which it counts as settled; in (0, 1].
    pub converge_greedy: f64,
    /// Workload task mix.
    pub task_mix: TaskMix,
    /// A fixed number of tasks per episode (at least 1) arriving uniformly
    /// over `hours`, instead of a Poisson count at `jobs_per_hour`.
    pub tasks: Option<u64>,
    /// Seed of the first episode; episode `i` uses `seed + i`.
    pub seed: u64,
    /// Task density, tasks per hour (positive).
    pub jobs_per_hour: f64,
    /// Arrival window per episode, hours (positive).
    pub hours: f64,
    /// The learner's parameters (for a fresh table).
    pub params: RiflingParams,
    /// A saved table to continue from (its parameters are kept; episode
    /// numbering goes on after its last episode); `None`: a fresh table.
    pub table: Option<PathBuf>,
}

impl Default for RiflingTrainOptions {
    /// The defaults of `dlsched rifling-train`: lab16, at most 500 episodes
    /// from seed 1000, window 10 at 0.05 / 0.05, the paper's task mix at 10
    /// tasks per hour over 24 h, default parameters, a fresh table.
    fn default() -> Self {
        RiflingTrainOptions {
            cluster: ClusterPreset::Lab16,
            episodes: 500,
            converge_window: 10,
            converge_dq: RIFLING_CONVERGE_DQ,
            converge_greedy: RIFLING_CONVERGE_GREEDY,
            task_mix: TaskMix::Paper,
            tasks: None,
            seed: 1000,
            jobs_per_hour: 10.0,
            hours: 24.0,
            params: RiflingParams::default(),
            table: None,
        }
    }
}

impl RiflingTrainOptions {
    /// Checks the options' ranges and the parameters.
    ///
    /// # Errors
    /// [`TrainError::Option`] naming the first field out of range, else
    /// [`TrainError::Params`].
    pub fn validate(&self) -> Result<(), TrainError> {
        if self.episodes == 0 {
            return Err(opt_err("episodes", "must be at least 1".into()));
        }
        if !(self.converge_dq.is_finite() && self.converge_dq > 0.0) {
            return Err(opt_err("converge_dq", format!("must be a positive number, got {}", self.converge_dq)));
        }
        let g = self.converge_greedy;
        if !(g.is_finite() && g > 0.0 && g <= 1.0) {
            return Err(opt_err("converge_greedy", format!("must be in (0, 1], got {g}")));
        }
        if self.tasks == Some(0) {
            return Err(opt_err("tasks", "must be at least 1".into()));
        }
        if !(self.jobs_per_hour.is_finite() && self.jobs_per_hour > 0.0) {
            return Err(opt_err("jobs_per_hour", format!("must be a positive number, got {}", self.jobs_per_hour)));
        }
        if !(self.hours.is_finite() && self.hours > 0.0) {
            return Err(opt_err("hours", format!("must be a positive number, got {}", self.hours)));
        }
        check_seeds(self.seed, self.episodes)?;
        self.params.validate().map_err(TrainError::Params)
    }
}

/// One episode's convergence figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settle {
    /// Mean |ΔQ| over the episode's updates (0 without updates).
    pub mean_dq: f64,
    /// Largest |ΔQ| of one update in the episode (reported, not a criterion:
    /// a pair updated for the first or second time always moves a lot).
    pub max_dq: f64,
    /// Share of the episode's updates made in states whose greedy action
    /// over tried actions differs after the episode from before it.
    pub greedy_changed: f64,
}

/// The convergence criterion of [`train_rifling`]: the last `window` episodes
/// (all of them at the epsilon floor) each had `mean_dq < dq` and
/// `greedy_changed < greedy`. `history` holds (at the epsilon floor, figures)
/// per episode so far. A window of 0 never holds.
pub fn converged(history: &[(bool, Settle)], window: u64, dq: f64, greedy: f64) -> bool {
    let w = usize::try_from(window).unwrap_or(usize::MAX);
    w > 0
        && history.len() >= w
        && history[history.len() - w..].iter().all(|(floor, s)| *floor && s.mean_dq < dq && s.greedy_changed < greedy)
}

/// Per state of an agent: its greedy action over tried actions and its
/// updates so far.
pub type Snapshot = std::collections::BTreeMap<String, (Option<usize>, u64)>;

/// [`Snapshot`] of `agent` now.
pub fn greedy_snapshot(agent: &Agent) -> Snapshot {
    agent
        .q
        .keys()
        .map(|s| (s.clone(), (agent.greedy_tried(s), agent.visits.get(s).map_or(0, |v| v.iter().sum()))))
        .collect()
}

/// The share of the updates between `before` and `after` made in states
/// whose greedy action differs between the two (a state new in `after`
/// counts as changed); 0 without updates.
pub fn greedy_changed_share(before: &Snapshot, after: &Snapshot) -> f64 {
    let (mut all, mut changed) = (0u64, 0u64);
    for (s, &(g, n)) in after {
        let (g0, n0) = before.get(s).copied().unwrap_or((None, 0));
        let k = n.saturating_sub(n0);
        all += k;
        if g != g0 {
            changed += k;
        }
    }
    if all == 0 { 0.0 } else { changed as f64 / all as f64 }
}

/// One RIFLING training episode: a row of the learning curve.
#[derive(Clone, Debug, PartialEq)]
pub struct RiflingEpisode {
    /// Episode index within this training (0-based).
    pub episode: u64,
    /// The episode's seed.
    pub seed: u64,
    /// The agent's decisions so far (cumulative over its life).
    pub decisions: u64,
    /// Exploration rate after the episode.
    pub epsilon: f64,
    /// Mean reward per decision in the episode.
    pub reward_mean: f64,
    /// Mean normalised throughput of the episode's tasks.
    pub normalized_throughput_mean: f64,
    /// Makespan, s.
    pub makespan_s: f64,
    /// Mean task completion time, s.
    pub jct_mean_s: f64,
    /// The episode's convergence figures.
    pub settle: Settle,
    /// States in the Q-table after the episode.
    pub states: usize,
    /// States visited in the episode (policy metric `rifling_states_visited`).
    pub states_visited: f64,
    /// Share of decisions in states whose actions were all tried.
    pub all_tried_share: f64,
    /// Chance a greedy choice repeated (policy metric `rifling_greedy_repeat`).
    pub greedy_repeat: f64,
    /// Chance a random choice repeated (policy metric `rifling_random_repeat`).
    pub random_repeat: f64,
    /// Share of greedy choices with every feasible action tied.
    pub greedy_all_tied_share: f64,
    /// Mean spread of Q over feasible actions.
    pub q_spread_mean: f64,
    /// Epsilon at its floor after the episode.
    pub at_epsilon_floor: bool,
    /// The convergence criterion holds after this episode (training stops).
    pub converged: bool,
}

/// Header of the RIFLING learning curve (`NAME.curve.csv`).
pub const RIFLING_CURVE_HEADER: &str = "episode,seed,decisions,epsilon,reward_mean,normalized_throughput_mean,makespan_s,jct_mean_s,\
     mean_dq,max_dq,greedy_changed_share,states,states_visited,all_tried_share,greedy_repeat,random_repeat,\
     greedy_all_tied_share,q_spread_mean,converged\n";

impl RiflingEpisode {
    /// The episode's row of the curve CSV (with its newline).
    pub fn csv_row(&self) -> String {
        format!(
            "{},{},{},{:.4},{:.6},{:.6},{:.3},{:.3},{:.6},{:.6},{:.6},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{}\n",
            self.episode,
            self.seed,
            self.decisions,
            self.epsilon,
            self.reward_mean,
            self.normalized_throughput_mean,
            self.makespan_s,
            self.jct_mean_s,
            self.settle.mean_dq,
            self.settle.max_dq,
            self.settle.greedy_changed,
            self.states,
            self.states_visited,
            self.all_tried_share,
            self.greedy_repeat,
            self.random_repeat,
            self.greedy_all_tied_share,
            self.q_spread_mean,
            u8::from(self.converged),
        )
    }
}

/// What [`train_rifling`] returns.
#[derive(Clone, Debug)]
pub struct RiflingTrainReport {
    /// One row per episode run (at most `episodes`).
    pub curve: Vec<RiflingEpisode>,
    /// The trained agent (Q-table, centroids, counters).
    pub agent: Agent,
    /// The episode at which the convergence criterion held (training stopped
    /// there), or `None` when it never held.
    pub converged_at: Option<u64>,
    /// Cluster name.
    pub cluster: String,
}

impl RiflingTrainReport {
    /// Episodes run.
    pub fn episodes_run(&self) -> u64 {
        self.curve.len() as u64
    }

    /// The learning curve as CSV ([`RIFLING_CURVE_HEADER`] and one row per episode).
    pub fn curve_csv(&self) -> String {
        let mut s = String::from(RIFLING_CURVE_HEADER);
        for r in &self.curve {
            s.push_str(&r.csv_row());
        }
        s
    }

    /// The table file (pretty JSON with a trailing newline: manifest,
    /// centroids, Q-table), loadable by `--rifling-table`.
    ///
    /// # Errors
    /// Serialisation failures.
    pub fn table_json(&self, opts: &RiflingTrainOptions) -> Result<String, serde_json::Error> {
        let ran = self.episodes_run();
        let last = self.curve.last().map(|r| r.settle);
        let g = &self.agent;
        let doc = serde_json::json!({
            "manifest": {
                "what": "RIFLING Q-table and K-means centroids trained by dlsched rifling-train",
                "dlsched_version": env!("CARGO_PKG_VERSION"),
                "cluster": self.cluster,
                "workload": {
                    "kind": "genie", "jobs_per_hour": opts.jobs_per_hour, "hours": opts.hours, "tasks": opts.tasks,
                    "task_mix": opts.task_mix, "rate_model": "table"
                },
                "episodes": ran,
                "episodes_cap": opts.episodes,
                "seeds": format!("{}..={}", opts.seed, opts.seed + ran - 1),
                "convergence": {
                    "criterion": format!(
                        "epsilon at its floor and, in each of the last {} episodes, mean |dQ| per update < {} \
                         and share of its updates made in states whose greedy action (over tried actions) changed < {}",
                        opts.converge_window, opts.converge_dq, opts.converge_greedy
                    ),
                    "held": self.converged_at.is_some(),
                    "at_episode": self.converged_at,
                    "last_mean_dq": last.map(|s| s.mean_dq),
                    "last_max_dq": last.map(|s| s.max_dq),
                    "last_greedy_changed_share": last.map(|s| s.greedy_changed),
                },
                "parameters": g.params,
            },
            "agent": g,
        });
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        Ok(text)
    }
}

/// Trains a RIFLING agent over at most `opts.episodes` GENIE episodes on
/// `opts.cluster` (true ECTs, table rate model, no samples), stopping at the
/// first episode after which [`converged`] holds; calls `progress` after each
/// episode with its curve row.
///
/// # Errors
/// [`TrainError`]: options out of range, a start table unreadable, an
/// episode's simulation failing.
pub fn train_rifling(
    opts: &RiflingTrainOptions,
    progress: &mut dyn FnMut(&RiflingEpisode),
) -> Result<RiflingTrainReport, TrainError> {
    opts.validate()?;
    let params = opts.params;
    let cspec = opts.cluster.spec();
    let gpn = cspec.nodes.iter().map(|n| n.gpus).max().unwrap_or(1);
    let actions = (cspec.nodes.len() as u32 * gpn) as usize + 1;
    // Episode indices drive the per-episode epsilon schedule; a table we
    // continue from goes on after its last episode.
    let (agent, first_episode) = match &opts.table {
        Some(p) => {
            let t = crate::experiment::load_rifling_agent(p)?;
            let next = t.episode + 1;
            (t, next)
        }
        None => (Agent::new(params, actions, opts.seed), 0),
    };
    let agent = Arc::new(Mutex::new(agent));
    let mut history: Vec<(bool, Settle)> = Vec::new();
    let mut curve = Vec::new();
    let mut converged_at = None;
    // One artefact set for every episode: the profile database is parsed once.
    let artefacts = crate::experiment::Artefacts::default();
    for e in 0..opts.episodes {
        let seed = opts.seed + e;
        let (before, updates0) = {
            let mut g = agent.lock().map_err(|_| TrainError::Lock)?;
            g.start_episode(first_episode + e, seed);
            (greedy_snapshot(&g), g.updates)
        };
        let spec = RunSpec {
            policy: PolicySpec::Rifling(RiflingOptions { params, table: None }),
            workload: WorkloadSource::Genie(GenieWorkloadSpec {
                ect: EctBasis::True,
                jobs_per_hour: opts.jobs_per_hour,
                hours: opts.hours,
                tasks: opts.tasks,
                mix: opts.task_mix,
            }),
            seed,
            rate_model: RateModelKind::Table,
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Synthetic(SyntheticSpec::default()),
                ClusterChoice::Preset { preset: opts.cluster },
            )
        };
        let r = crate::experiment::run_one_with_agent(&spec, Some(agent.clone()), &artefacts, |_| {})
            .map_err(|source| TrainError::Episode { episode: e, source: Box::new(source) })?;
        let s = &r.summary;
        let g = agent.lock().map_err(|_| TrainError::Lock)?;
        let pm = |k: &str| s.policy_metrics.get(k).copied().unwrap_or(0.0);
        let n_up = g.updates - updates0;
        let settle = Settle {
            mean_dq: if n_up == 0 { 0.0 } else { g.sum_dq / n_up as f64 },
            max_dq: g.max_dq,
            greedy_changed: greedy_changed_share(&before, &greedy_snapshot(&g)),
        };
        let floor = g.epsilon() <= g.params.epsilon_end;
        history.push((floor, settle));
        let done = converged(&history, opts.converge_window, opts.converge_dq, opts.converge_greedy);
        let row = RiflingEpisode {
            episode: e,
            seed,
            decisions: g.decisions,
            epsilon: g.epsilon(),
            reward_mean: pm("rifling_reward_mean"),
            normalized_throughput_mean: s.normalized_throughput_mean.unwrap_or(0.0),
            makespan_s: s.makespan_s,
            jct_mean_s: s.jct_mean_s,
            settle,
            states: g.q.len(),
            states_visited: pm("rifling_states_visited"),
            all_tried_share: pm("rifling_all_tried_share"),
            greedy_repeat: pm("rifling_greedy_repeat"),
            random_repeat: pm("rifling_random_repeat"),
            greedy_all_tied_share: pm("rifling_greedy_all_tied_share"),
            q_spread_mean: pm("rifling_q_spread_mean"),
            at_epsilon_floor: floor,
            converged: done,
        };
        progress(&row);
        curve.push(row);
        if done {
            converged_at = Some(e);
            break;
        }
    }
    let agent = agent.lock().map_err(|_| TrainError::Lock)?.clone();
    Ok(RiflingTrainReport { curve, agent, converged_at, cluster: cspec.name.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(mean_dq: f64, greedy_changed: f64) -> Settle {
        Settle { mean_dq, max_dq: 2.0 * mean_dq, greedy_changed }
    }

    #[test]
    fn the_criterion_needs_the_whole_window_settled_at_the_epsilon_floor() {
        // Thresholds dq 0.05, greedy 0.05, window 3.
        let ok = st(0.01, 0.0);
        let mut h = vec![(true, st(0.2, 0.3)), (true, ok), (true, ok)];
        // Only 2 of the last 3 settled.
        assert!(!converged(&h, 3, 0.05, 0.05));
        h.push((true, ok));
        assert!(converged(&h, 3, 0.05, 0.05));
        // One episode at the threshold (not below) breaks it.
        h.push((true, st(0.05, 0.0)));
        assert!(!converged(&h, 3, 0.05, 0.05));
        h.push((true, st(0.01, 0.05)));
        assert!(!converged(&h, 3, 0.05, 0.05));
        // Settled but epsilon still decaying: no.
        let early = vec![(false, ok), (true, ok), (true, ok)];
        assert!(!converged(&early, 3, 0.05, 0.05));
        // Fewer episodes than the window, or a window of 0: never.
        assert!(!converged(&[(true, ok)], 3, 0.05, 0.05));
        assert!(!converged(&[(true, ok); 5], 0, 0.05, 0.05));
    }

    #[test]
    fn greedy_change_is_weighted_by_the_updates_of_the_episode() {
        let before: Snapshot = [("a".to_string(), (Some(0), 10)), ("b".to_string(), (Some(1), 5))].into();
        // a: greedy 0 -> 0, 10 -> 16 updates (6, unchanged); b: 1 -> 2, 5 -> 7
        // (2, changed); c: new, 2 updates (changed). 4 of 10 updates: 0.4.
        let after: Snapshot =
            [("a".to_string(), (Some(0), 16)), ("b".to_string(), (Some(2), 7)), ("c".to_string(), (Some(1), 2))].into();
        assert!((greedy_changed_share(&before, &after) - 0.4).abs() < 1e-12);
        // No update: 0.
        assert_eq!(greedy_changed_share(&before, &before), 0.0);
    }
}
