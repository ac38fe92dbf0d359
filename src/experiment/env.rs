//! A learning agent's environment: the engine driven one scheduling choice
//! at a time by its caller (Gymnasium's `reset`/`step`), with no thread
//! hand-off ([`Env`]), and a vector of them stepped together ([`VecEnv`]).
//!
//! The Python package wraps these as `dlsched.gym.ClusterSchedulingEnv`
//! and `dlsched.gym.VectorClusterSchedulingEnv` (`docs/python.md`,
//! "Learned schedulers"). An episode is one run of a [`RunSpec`]; the
//! engine stops at each **decision point** ([`crate::engine::Simulation::open_instant`]):
//! an instant's scheduling pass where at least one action other than wait
//! is valid. Instants where nothing can be placed are not decision points.
//!
//! **Action modes** ([`ActionMode`]):
//! - `job` (the default): start one of the first `max_queue` waiting jobs
//!   (arrival order) on the GPUs the run's placement rule gives it, or
//!   wait; `max_queue + 1` actions, wait last.
//! - `placement` (RIFLING's action set, Chen 2022; `policy::rifling`):
//!   place the head job (the earliest waiting job) as `<d_node, d_gpn>`:
//!   `d_gpn` GPUs on each of `d_node` nodes, `d_node · d_gpn` equal to its
//!   GPUs, on the nodes with most free GPUs ([`super::super::policy::symmetric::physical`]);
//!   action `(d_node - 1) · G + d_gpn - 1` for `G` GPUs per node, `d_node`
//!   up to [`MAX_SPREAD`] nodes, wait last. A head job that no such shape
//!   fits (7 GPUs on nodes of 4) is started by the run's placement rule as
//!   soon as it fits, without a decision.
//! - `node` (LDWP's, `policy::ldwp`): start the head job on one node: its
//!   GPUs on that node (the lowest free GPU ids), and for a job wider than a
//!   node that node's free GPUs first, then the nodes with most free GPUs;
//!   one action per node, wait last.
//!
//! Every mode's **mask** ([`Env::mask`]) marks the valid actions. Wait is
//! valid unless it would end the run with jobs left (nothing runs and no
//! job is still to arrive: the engine would run out of events); the first
//! version of the environment (threads, before issue 36) left it valid and
//! raised the run's "unfinished" error when it was taken.
//!
//! **Observations** ([`ObservationKind`]): `flat` (the default, the first
//! version's, `max_queue · 4 + nodes + 3` values) or `fixed` (the same
//! size whatever the cluster: [`FIXED_CLUSTER_FEATURES`] cluster features
//! plus [`FIXED_JOB_FEATURES`] per queue slot), all in `[0, 1]`.
//!
//! **Rewards** ([`RewardKind`]) accrue between decision points over the
//! simulated time between them, in job-hours, optionally divided by the
//! episode's jobs ([`RewardNorm::PerJob`]: an episode's return is then
//! minus the mean JCT in hours for `jct`).
//!
//! **Episodes** ([`EpisodeSource`], [`Split`]): each reset draws an episode
//! key from the environment's generator (a ChaCha8 stream seeded by the
//! last `reset(seed)`, else by the spec's seed); the key gives the run's
//! seed, and with it the workload: the spec's own (a synthetic workload of
//! that seed, a trace replayed as it is), a window of `jobs` consecutive jobs
//! of a trace, or the synthetic workload at a load drawn from a range.
//! Evaluation episodes ([`Split::Eval`]) use run seeds at or above 2^63 and
//! the last [`EpisodeSource::TraceWindows`] share of a trace; training
//! episodes seeds below 2^63 and the rest of the trace: disjoint by
//! construction.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::run::{PreparedRun, RunBuilder, RunReport};
use super::spec::{RunSpec, WorkloadSource};
use crate::error::{ConfigError, RunError};
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::{JobState, JobTable};
use crate::policy::placement::Placement;
use crate::policy::{Decision, Policy, View};
use crate::trace::TraceRecord;

/// The most nodes a `placement`-mode action spreads a job over (ours: it
/// bounds the action space on large clusters; a head job that needs more
/// nodes is not placeable in that mode).
pub const MAX_SPREAD: u32 = 32;

/// Cluster features of the `fixed` observation: free GPU share, share of
/// nodes wholly free, share partly free, the largest free block on one
/// node / the largest node, running jobs / GPUs, waiting / (waiting +
/// max_queue), and the share of nodes with 0, 1, 2-3 and 4+ free GPUs (4).
pub const FIXED_CLUSTER_FEATURES: usize = 10;

/// Per-slot features of the `fixed` observation: present, GPUs / cluster
/// GPUs, model code, VC / VCs, the user's share of jobs alive, waited,
/// attained service, predicted duration, oracle duration (0 without the
/// oracle); times `t` as `t / (t + 1 h)`.
pub const FIXED_JOB_FEATURES: usize = 9;

/// The most queue slots an environment observes (`max_queue`; ours: it
/// bounds the observation and action arrays).
pub const MAX_QUEUE: usize = 4096;

/// The most environments of a [`VecEnv`] (ours: it bounds the batch arrays).
pub const MAX_ENVS: usize = 4096;

/// The first run seed of the evaluation split: evaluation episodes use run
/// seeds `EVAL_SEED_BASE + key`, training episodes `key`, with `key < 2^63`.
pub const EVAL_SEED_BASE: u64 = 1 << 63;

/// What the agent chooses at a decision point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionMode {
    /// One of the first `max_queue` waiting jobs, placed by the run's rule.
    Job,
    /// A symmetric placement `<d_node, d_gpn>` of the head job (RIFLING).
    Placement,
    /// A node for the head job (LDWP).
    Node,
}

impl ActionMode {
    /// The mode of a name: `job`, `placement` or `node`.
    ///
    /// # Errors
    /// The names allowed, for any other.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "job" => Ok(ActionMode::Job),
            "placement" => Ok(ActionMode::Placement),
            "node" => Ok(ActionMode::Node),
            _ => Err(format!("action=`{s}`: job, placement or node")),
        }
    }
}

/// The observation's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObservationKind {
    /// `max_queue · 4 + nodes + 3` values: per slot [present, GPUs / cluster
    /// GPUs, waited, oracle duration], each node's free share, then waiting
    /// / (waiting + max_queue), running jobs / GPUs, free GPU share.
    Flat,
    /// `FIXED_CLUSTER_FEATURES + max_queue · FIXED_JOB_FEATURES` values,
    /// whatever the cluster's size.
    Fixed,
}

impl ObservationKind {
    /// The layout of a name: `flat` or `fixed`.
    ///
    /// # Errors
    /// The names allowed, for any other.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "flat" => Ok(ObservationKind::Flat),
            "fixed" => Ok(ObservationKind::Fixed),
            _ => Err(format!("observation=`{s}`: flat or fixed")),
        }
    }
}

/// The reward accrued between two decision points over the simulated time
/// `dt` (h) between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewardKind {
    /// Minus the queueing delay accrued (waiting jobs × dt): an episode's
    /// sum is minus its total queueing delay, job-hours.
    QueueDelay,
    /// Minus the JCT accrued ((waiting + running jobs) × dt): the sum is
    /// minus the total JCT of the episode's jobs, job-hours.
    Jct,
    /// Jobs completed since the last decision point.
    Throughput,
    /// Minus the slowdown accrued: each waiting or running job adds dt / its
    /// duration (h / h).
    Slowdown,
}

impl RewardKind {
    /// The reward of a name: `queue_delay`, `jct`, `throughput` or `slowdown`.
    ///
    /// # Errors
    /// The names allowed, for any other.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "queue_delay" => Ok(RewardKind::QueueDelay),
            "jct" => Ok(RewardKind::Jct),
            "throughput" => Ok(RewardKind::Throughput),
            "slowdown" => Ok(RewardKind::Slowdown),
            _ => Err(format!("reward=`{s}`: queue_delay, jct, throughput or slowdown")),
        }
    }
}

/// How rewards are scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewardNorm {
    /// As accrued (job-hours, jobs, or hours / hours).
    None,
    /// Divided by the episode's jobs: an episode's return is minus the mean
    /// JCT (h) for `jct`, minus the mean queueing delay (h) for
    /// `queue_delay`, minus the mean slowdown for `slowdown`, the share of
    /// jobs completed for `throughput`; returns of episodes of different
    /// sizes are then on one scale.
    PerJob,
}

impl RewardNorm {
    /// The scaling of a name: `none` or `per_job`.
    ///
    /// # Errors
    /// The names allowed, for any other.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(RewardNorm::None),
            "per_job" => Ok(RewardNorm::PerJob),
            _ => Err(format!("reward_norm=`{s}`: none or per_job")),
        }
    }
}

/// Where episodes come from.
#[derive(Clone, Debug, PartialEq)]
pub enum EpisodeSource {
    /// The spec's workload with the episode's seed (a synthetic workload is
    /// drawn again; a trace is replayed whole each time).
    Spec,
    /// Windows of `jobs` consecutive jobs (submit order) of the spec's trace,
    /// shifted to start at 0; the last `eval_share` of the trace's jobs is the
    /// evaluation split's (RLScheduler samples 128- or 256-job windows).
    TraceWindows {
        /// Jobs per window.
        jobs: usize,
        /// The share of the trace's jobs (its end) kept for evaluation, in [0, 1).
        eval_share: f64,
    },
    /// The spec's synthetic workload at an offered load drawn uniformly in
    /// `[lo, hi]` per episode.
    Loads {
        /// The lowest load.
        lo: f64,
        /// The highest load.
        hi: f64,
    },
}

/// The episodes an environment draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Training episodes.
    Train,
    /// Held-out evaluation episodes.
    Eval,
}

/// An environment's settings.
#[derive(Clone, Debug)]
pub struct EnvConfig {
    /// Queue slots seen and (job mode) chosen from, at least 1.
    pub max_queue: usize,
    /// The reward.
    pub reward: RewardKind,
    /// Its scaling.
    pub reward_norm: RewardNorm,
    /// Whether observations show the jobs' true durations.
    pub oracle: bool,
    /// Steps after which an episode is truncated.
    pub max_steps: u64,
    /// Simulated time after which an episode is truncated, s.
    pub max_time_s: Option<f64>,
    /// The observation's layout.
    pub observation: ObservationKind,
    /// The action mode.
    pub action: ActionMode,
    /// Where episodes come from.
    pub episodes: EpisodeSource,
    /// Training or evaluation episodes.
    pub split: Split,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            max_queue: 8,
            reward: RewardKind::QueueDelay,
            reward_norm: RewardNorm::None,
            oracle: true,
            max_steps: 100_000,
            max_time_s: None,
            observation: ObservationKind::Flat,
            action: ActionMode::Job,
            episodes: EpisodeSource::Spec,
            split: Split::Train,
        }
    }
}

/// What the engine told the policy's hooks, in order.
#[derive(Clone, Copy, Debug)]
enum Hook {
    Arrival(JobId),
    Completion(JobId),
}

/// The policy inside an environment's simulation: it only records the hooks
/// (the environment decides). Its `decide` is never called.
struct HookPolicy {
    log: Arc<Mutex<Vec<Hook>>>,
}

impl Policy for HookPolicy {
    fn name(&self) -> String {
        "gym-agent".into()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        if let Ok(mut l) = self.log.lock() {
            l.push(Hook::Arrival(job));
        }
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        if let Ok(mut l) = self.log.lock() {
            l.push(Hook::Completion(job));
        }
    }

    fn decide(&mut self, _view: &View<'_>) -> Decision {
        Decision::Wait
    }
}

/// What one step returns.
#[derive(Clone, Debug, Default)]
pub struct StepOut {
    /// The reward since the last decision point.
    pub reward: f64,
    /// The episode ended (every job done).
    pub terminated: bool,
    /// The episode was cut (`max_steps`, `max_time_s`).
    pub truncated: bool,
}

/// The episode in progress.
struct Episode {
    run: PreparedRun,
    log: Arc<Mutex<Vec<Hook>>>,
    placement: Box<dyn Placement>,
    /// Arrived jobs not running, by id.
    waiting: BTreeSet<JobId>,
    running: BTreeSet<JobId>,
    /// Reward accrued since the last hand-over, and the state it accrues
    /// from: time (s), waiting and running jobs, Σ 1 h / duration.
    acc: f64,
    t: f64,
    n_waiting: usize,
    n_running: usize,
    inv_dur: f64,
    /// The open instant's pass is in progress.
    in_pass: bool,
    /// The candidate GPUs of each action at the current decision point.
    choices: Vec<Option<Vec<GpuId>>>,
    /// Queue slots of the current decision point (job mode).
    slots: Vec<JobId>,
    steps: u64,
    jobs: usize,
    /// Per user: completed jobs' durations (s) summed and counted, for the
    /// predicted duration; the empty user for all jobs.
    history: BTreeMap<String, (f64, u32)>,
}

/// One environment ([`super::env`]'s docs).
pub struct Env {
    base: RunSpec,
    cfg: EnvConfig,
    artefacts: crate::policy::build::Artefacts,
    /// The trace's records, loaded once (trace windows).
    trace: Option<Arc<Vec<TraceRecord>>>,
    rng: ChaCha8Rng,
    /// The episode's key and run seed.
    key: u64,
    ep: Option<Episode>,
    /// The report of the last episode that terminated.
    report: Option<RunReport>,
    /// Steps of the last episode.
    last_steps: u64,
    /// Cluster shape: GPUs per node, total GPUs, GPUs of the largest node.
    node_gpus: Vec<u32>,
    total_gpus: u32,
    gpn: u32,
    obs_len: usize,
    n_actions: usize,
    obs: Vec<f32>,
    mask: Vec<bool>,
    done: bool,
    now_s: f64,
}

fn cfg_err(msg: impl Into<String>) -> RunError {
    ConfigError::other(msg.into()).into()
}

impl Env {
    /// An environment of episodes of `base` (its workload, cluster,
    /// placement rule: the `policy` is the agent and is ignored).
    ///
    /// # Errors
    /// A configuration error (`max_queue` 0, a source that needs a trace or
    /// a synthetic workload without one, a window larger than the trace),
    /// or the errors of building a run of `base`.
    pub fn new(base: RunSpec, cfg: EnvConfig) -> Result<Self, RunError> {
        if cfg.max_queue == 0 || cfg.max_queue > MAX_QUEUE {
            return Err(cfg_err(format!("max_queue={}: 1 to {MAX_QUEUE}", cfg.max_queue)));
        }
        if cfg.max_steps == 0 {
            return Err(cfg_err("max_steps=0: at least 1"));
        }
        if base.seed >= EVAL_SEED_BASE {
            return Err(cfg_err(format!(
                "seed={}: at most 2^63 - 1 (seeds above are the evaluation split's)",
                base.seed
            )));
        }
        let mut trace = None;
        match &cfg.episodes {
            EpisodeSource::Spec => {}
            EpisodeSource::TraceWindows { jobs, eval_share } => {
                let WorkloadSource::Trace { path, format, columns } = &base.workload else {
                    return Err(cfg_err("episodes=windows: give a trace (trace=...)"));
                };
                if !(0.0..1.0).contains(eval_share) {
                    return Err(cfg_err(format!("eval_share={eval_share}: in [0, 1)")));
                }
                let t = crate::trace::load_trace_with(path, *format, columns, base.row_errors())?;
                let mut recs = t.records;
                recs.retain(|r| r.skip.is_none());
                recs.sort_by_key(|r| r.submit_ms);
                let cut = (recs.len() as f64 * (1.0 - eval_share)).floor() as usize;
                let (train, eval) = (cut, recs.len() - cut);
                let short = match cfg.split {
                    Split::Train => train < *jobs,
                    Split::Eval => eval < *jobs,
                };
                if *jobs == 0 || short {
                    return Err(cfg_err(format!(
                        "window_jobs={jobs}: the trace {} has {} replayable jobs, {train} for training and {eval} \
                         for evaluation (eval_share {eval_share}); a window must be 1 to the split's jobs",
                        path.display(),
                        recs.len()
                    )));
                }
                trace = Some(Arc::new(recs));
            }
            EpisodeSource::Loads { lo, hi } => {
                if !matches!(base.workload, WorkloadSource::Synthetic(_)) {
                    return Err(cfg_err("episodes=loads: the synthetic workload only (no trace)"));
                }
                if !(lo.is_finite() && hi.is_finite() && *lo > 0.0 && lo <= hi) {
                    return Err(cfg_err(format!("loads=({lo}, {hi}): 0 < lo <= hi")));
                }
            }
        }
        let cluster = crate::experiment::run::cluster_of(&base)?;
        let node_gpus: Vec<u32> = cluster.spec().nodes.iter().map(|n| n.gpus).collect();
        let total_gpus = cluster.total_gpus();
        let gpn = node_gpus.iter().copied().max().unwrap_or(1);
        let k = cfg.max_queue;
        let obs_len = match cfg.observation {
            ObservationKind::Flat => k * 4 + node_gpus.len() + 3,
            ObservationKind::Fixed => FIXED_CLUSTER_FEATURES + k * FIXED_JOB_FEATURES,
        };
        let n_actions = match cfg.action {
            ActionMode::Job => k + 1,
            ActionMode::Placement => (MAX_SPREAD.min(node_gpus.len() as u32) * gpn) as usize + 1,
            ActionMode::Node => node_gpus.len() + 1,
        };
        let rng = ChaCha8Rng::seed_from_u64(base.seed);
        Ok(Env {
            key: base.seed,
            base,
            cfg,
            artefacts: crate::policy::build::Artefacts::default(),
            trace,
            rng,
            ep: None,
            report: None,
            last_steps: 0,
            node_gpus,
            total_gpus,
            gpn,
            obs_len,
            n_actions,
            obs: vec![0.0; obs_len],
            mask: vec![false; n_actions],
            done: true,
            now_s: 0.0,
        })
    }

    /// Draws unseeded episodes from stream `stream` of the generator (the
    /// `i`-th environment of a [`VecEnv`] uses stream `i`, so that the
    /// environments of one vector draw different episodes; a single
    /// environment uses stream 0).
    pub fn set_stream(&mut self, stream: u64) {
        self.rng.set_stream(stream);
    }

    /// Values per observation.
    pub fn obs_len(&self) -> usize {
        self.obs_len
    }

    /// Actions (the last is wait).
    pub fn n_actions(&self) -> usize {
        self.n_actions
    }

    /// The observation at the current decision point (zeros once the
    /// episode ended).
    pub fn obs(&self) -> &[f32] {
        &self.obs
    }

    /// The valid actions at the current decision point.
    pub fn mask(&self) -> &[bool] {
        &self.mask
    }

    /// Whether the episode is over (terminated or truncated).
    pub fn done(&self) -> bool {
        self.done
    }

    /// Simulated time of the current decision point, s.
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// The current episode's run seed (the workload's and the placement
    /// rule's streams).
    pub fn episode_seed(&self) -> u64 {
        self.key
    }

    /// Waiting and running jobs at the current decision point.
    pub fn counts(&self) -> (usize, usize) {
        self.ep.as_ref().map_or((0, 0), |e| (e.n_waiting, e.n_running))
    }

    /// Steps taken in this episode (or the last one, once it ended).
    pub fn steps(&self) -> u64 {
        self.ep.as_ref().map_or(self.last_steps, |e| e.steps)
    }

    /// The report of the episode's run, once it terminated (until the next
    /// reset).
    pub fn report(&self) -> Option<&RunReport> {
        self.report.as_ref()
    }

    /// The terminated episode's summary as `summary.json` writes it.
    pub fn summary_json(&self) -> Option<String> {
        self.report.as_ref().and_then(|r| serde_json::to_string(&r.summary).ok())
    }

    /// The episode's jobs.
    pub fn jobs(&self) -> Option<&JobTable> {
        self.ep.as_ref().map(|e| e.run.sim().jobs())
    }

    /// Starts an episode: `seed` reseeds the environment's generator and is
    /// the episode's key; without it the key is the generator's next draw.
    /// Returns whether the episode ended before its first decision point.
    ///
    /// # Errors
    /// A seed of 2^63 or more; the errors of building or running the
    /// episode's run.
    pub fn reset(&mut self, seed: Option<u64>) -> Result<bool, RunError> {
        let key = match seed {
            Some(s) => {
                if s >= EVAL_SEED_BASE {
                    return Err(cfg_err(format!("seed={s}: at most 2^63 - 1")));
                }
                self.rng = ChaCha8Rng::seed_from_u64(s);
                s
            }
            None => self.rng.next_u64() >> 1,
        };
        let run_seed = match self.cfg.split {
            Split::Train => key,
            Split::Eval => EVAL_SEED_BASE | key,
        };
        self.key = run_seed;
        let mut spec = self.base.clone();
        spec.seed = run_seed;
        let mut records = None;
        match &self.cfg.episodes {
            EpisodeSource::Spec => {}
            EpisodeSource::Loads { lo, hi } => {
                let mut r = ChaCha8Rng::seed_from_u64(run_seed ^ 0x6c6f_6164);
                let load = lo + (hi - lo) * r.gen_range(0.0..=1.0);
                if let WorkloadSource::Synthetic(s) = &mut spec.workload {
                    s.load = load;
                    s.jobs_per_hour = None;
                }
            }
            EpisodeSource::TraceWindows { jobs, eval_share } => {
                let recs = self.trace.as_ref().ok_or_else(|| cfg_err("trace windows without a trace"))?;
                let cut = (recs.len() as f64 * (1.0 - eval_share)).floor() as usize;
                let (lo, hi) = match self.cfg.split {
                    Split::Train => (0, cut - jobs),
                    Split::Eval => (cut, recs.len() - jobs),
                };
                let mut r = ChaCha8Rng::seed_from_u64(run_seed ^ 0x7769_6e64);
                let start = r.gen_range(lo..=hi);
                let origin = recs[start].submit_ms;
                let window: Vec<TraceRecord> = recs[start..start + jobs]
                    .iter()
                    .map(|rec| {
                        let mut rec = rec.clone();
                        rec.submit_ms -= origin;
                        rec
                    })
                    .collect();
                records = Some(window);
            }
        }
        self.ep = None;
        self.report = None;
        let log = Arc::new(Mutex::new(Vec::new()));
        let log2 = log.clone();
        let placement_cell: Arc<Mutex<Option<Box<dyn Placement>>>> = Arc::new(Mutex::new(None));
        let pc = placement_cell.clone();
        let kind = spec.policy.placement();
        let mut builder = RunBuilder::new(&spec).artefacts(&self.artefacts).policy(move |ctx| {
            if let Ok(mut p) = pc.lock() {
                *p = Some(kind.build_for(ctx.db.as_ref()));
            }
            Ok(Box::new(HookPolicy { log: log2 }) as Box<dyn Policy>)
        });
        if let Some(r) = records {
            builder = builder.records(r);
        }
        let run = builder.build()?;
        run.sim().check_start().map_err(|e| run.in_file(e))?;
        let placement = placement_cell
            .lock()
            .ok()
            .and_then(|mut p| p.take())
            .ok_or_else(|| cfg_err("the episode's placement rule was not built"))?;
        let jobs = run.sim().jobs().len();
        self.ep = Some(Episode {
            run,
            log,
            placement,
            waiting: BTreeSet::new(),
            running: BTreeSet::new(),
            acc: 0.0,
            t: 0.0,
            n_waiting: 0,
            n_running: 0,
            inv_dur: 0.0,
            in_pass: false,
            choices: Vec::new(),
            slots: Vec::new(),
            steps: 0,
            jobs,
            history: BTreeMap::new(),
        });
        self.done = false;
        self.now_s = 0.0;
        // The reward before the first choice belongs to no action.
        let (_, ended) = self.advance()?;
        Ok(ended)
    }

    /// Takes `action` at the current decision point and runs to the next
    /// one (or the end).
    ///
    /// # Errors
    /// A step after the episode ended, an action out of range; the run's
    /// errors (an invalid decision of a placement mode the cluster refuses,
    /// the run ending with jobs left).
    pub fn step(&mut self, action: usize) -> Result<StepOut, RunError> {
        if self.done {
            return Err(cfg_err("the episode is over: call reset()"));
        }
        if action >= self.n_actions {
            return Err(cfg_err(format!("action {action} is not in 0..{}", self.n_actions)));
        }
        let Some(ep) = self.ep.as_mut() else { return Err(cfg_err("no episode: call reset()")) };
        ep.steps += 1;
        let decision = match ep.choices.get(action).and_then(Option::as_ref) {
            Some(gpus) => {
                let job = match self.cfg.action {
                    ActionMode::Job => ep.slots[action],
                    _ => ep.slots[0],
                };
                Some((job, gpus.clone()))
            }
            None => None,
        };
        if decision.is_none() && !self.mask.last().copied().unwrap_or(true) {
            let left = ep.waiting.len();
            return Err(cfg_err(format!(
                "action {action} waits (the mask marks it invalid), but nothing runs and no job is still to \
                 arrive: waiting would end the run with {left} jobs never started; take a valid action \
                 (action_masks())"
            )));
        }
        match decision {
            Some((job, gpus)) => {
                ep.waiting.remove(&job);
                ep.running.insert(job);
                let (sim, rec) = ep.run.sim_mut();
                if let Err(e) = sim.apply(Decision::Launch { job, gpus }, rec) {
                    return Err(self.fail(e));
                }
            }
            None => {
                // Wait (or an action with nothing behind it): the pass ends.
                ep.in_pass = false;
                let (sim, rec) = ep.run.sim_mut();
                if let Err(e) = sim.close_instant(rec) {
                    return Err(self.fail(e));
                }
                if let Err(e) = sim.check_after_instant() {
                    return Err(self.fail(e));
                }
            }
        }
        let (reward, terminated) = self.advance()?;
        let mut truncated = false;
        if !terminated {
            let ep = self.ep.as_ref().map_or(0, |e| e.steps);
            if ep >= self.cfg.max_steps || self.cfg.max_time_s.is_some_and(|m| self.now_s >= m) {
                truncated = true;
                self.done = true;
            }
        }
        Ok(StepOut { reward, terminated, truncated })
    }

    /// Ends the episode after a failure of its run.
    fn fail(&mut self, e: crate::error::SimError) -> RunError {
        self.done = true;
        let e = match &self.ep {
            Some(ep) => ep.run.in_file(e),
            None => e,
        };
        self.ep = None;
        e.into()
    }

    /// Runs to the next decision point or the end: (reward since the last
    /// hand-over, ended).
    fn advance(&mut self) -> Result<(f64, bool), RunError> {
        loop {
            let ep = self.ep.as_mut().ok_or_else(|| cfg_err("no episode: call reset()"))?;
            if !ep.in_pass {
                let (sim, rec) = ep.run.sim_mut();
                let opened = if sim.past_horizon() { Ok(None) } else { sim.open_instant(rec) };
                match opened {
                    Err(e) => return Err(self.fail(e)),
                    Ok(None) => return self.end(),
                    Ok(Some(due)) => {
                        Self::drain_hooks(&self.cfg, ep);
                        if !due {
                            let (sim, rec) = ep.run.sim_mut();
                            let r = sim.close_instant(rec).and_then(|()| sim.check_after_instant());
                            if let Err(e) = r {
                                return Err(self.fail(e));
                            }
                            continue;
                        }
                        ep.in_pass = true;
                    }
                }
            }
            // A decide call: accrue, then see whether there is a choice.
            let now = ep.run.sim().now().as_ms() as f64 / 1000.0;
            Self::accrue(&self.cfg, ep, now);
            if self.cfg.action == ActionMode::Placement && self.place_asymmetric_head()? {
                // Started by the placement rule: the pass goes on.
                continue;
            }
            let any = self.candidates();
            let ep = self.ep.as_mut().ok_or_else(|| cfg_err("no episode"))?;
            if any {
                let reward = std::mem::take(&mut ep.acc);
                self.now_s = now;
                self.fill_obs();
                self.fill_mask();
                return Ok((self.scale(reward), false));
            }
            ep.in_pass = false;
            let (sim, rec) = ep.run.sim_mut();
            let r = sim.close_instant(rec).and_then(|()| sim.check_after_instant());
            if let Err(e) = r {
                return Err(self.fail(e));
            }
        }
    }

    /// The end of the episode's run: its report and the reward accrued
    /// after the last decision point.
    fn end(&mut self) -> Result<(f64, bool), RunError> {
        let Some(ep) = self.ep.take() else { return Err(cfg_err("no episode")) };
        let reward = ep.acc;
        let jobs = ep.jobs;
        self.last_steps = ep.steps;
        self.done = true;
        self.obs.iter_mut().for_each(|v| *v = 0.0);
        self.mask.iter_mut().for_each(|m| *m = false);
        if let Some(w) = self.mask.last_mut() {
            *w = true;
        }
        self.report = Some(ep.run.finish()?);
        Ok((self.scale_by(reward, jobs), true))
    }

    fn scale(&self, r: f64) -> f64 {
        self.scale_by(r, self.ep.as_ref().map_or(1, |e| e.jobs))
    }

    fn scale_by(&self, r: f64, jobs: usize) -> f64 {
        match self.cfg.reward_norm {
            RewardNorm::None => r,
            RewardNorm::PerJob => r / jobs.max(1) as f64,
        }
    }

    /// The reward accrued since the last callback, then the counts it
    /// accrues from (the first version's `_accrue`, one call per hook and
    /// per decide call).
    fn accrue(cfg: &EnvConfig, ep: &mut Episode, now: f64) {
        let dt_h = (now - ep.t) / 3600.0;
        match cfg.reward {
            RewardKind::QueueDelay => ep.acc -= ep.n_waiting as f64 * dt_h,
            RewardKind::Jct => ep.acc -= (ep.n_waiting + ep.n_running) as f64 * dt_h,
            RewardKind::Slowdown => ep.acc -= ep.inv_dur * dt_h,
            RewardKind::Throughput => {}
        }
        ep.t = now;
        ep.n_waiting = ep.waiting.len();
        ep.n_running = ep.running.len();
    }

    /// The instant's hooks, in the engine's order: each updates the sets,
    /// then accrues.
    fn drain_hooks(cfg: &EnvConfig, ep: &mut Episode) {
        let hooks: Vec<Hook> = match ep.log.lock() {
            Ok(mut l) => std::mem::take(&mut *l),
            Err(_) => Vec::new(),
        };
        let now = ep.run.sim().now().as_ms() as f64 / 1000.0;
        for h in hooks {
            match h {
                Hook::Arrival(j) => {
                    ep.waiting.insert(j);
                    Self::accrue(cfg, ep, now);
                    let d = ep.run.sim().jobs().spec(j).duration_ms as f64 / 1000.0;
                    ep.inv_dur += 3600.0 / d.max(1.0);
                }
                Hook::Completion(j) => {
                    ep.running.remove(&j);
                    Self::accrue(cfg, ep, now);
                    if cfg.reward == RewardKind::Throughput {
                        ep.acc += 1.0;
                    }
                    let spec = ep.run.sim().jobs().spec(j);
                    let d = spec.duration_ms as f64 / 1000.0;
                    ep.inv_dur -= 3600.0 / d.max(1.0);
                    let user = spec.user().unwrap_or("").to_string();
                    for u in [user, String::new()] {
                        let e = ep.history.entry(u).or_insert((0.0, 0));
                        e.0 += d;
                        e.1 += 1;
                    }
                }
            }
        }
    }

    /// `placement` mode: a head job whose GPUs no `<d_node, d_gpn>` of the
    /// action set gives (e.g. 7 GPUs on lab16's 4 nodes of 4) is started by
    /// the run's placement rule as soon as it fits, without a decision
    /// (RIFLING's tasks are moldable; rigid jobs may have no symmetric
    /// shape). Returns whether it started one.
    fn place_asymmetric_head(&mut self) -> Result<bool, RunError> {
        let (nodes, gpn) = (MAX_SPREAD.min(self.node_gpus.len() as u32), self.gpn);
        let Some(ep) = self.ep.as_mut() else { return Ok(false) };
        let Some(&head) = ep.waiting.iter().next() else { return Ok(false) };
        let sim = ep.run.sim();
        let g = sim.jobs().spec(head).gpus;
        if (1..=nodes).any(|d| g % d == 0 && g / d <= gpn) {
            return Ok(false);
        }
        let view = sim.view();
        let mut gpus = Vec::new();
        let req = crate::policy::queue::request(&view, head);
        if !ep.placement.place_job(&view, head, req, &mut gpus) {
            return Ok(false);
        }
        ep.waiting.remove(&head);
        ep.running.insert(head);
        let (sim, rec) = ep.run.sim_mut();
        match sim.apply(Decision::Launch { job: head, gpus }, rec) {
            Ok(()) => Ok(true),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The candidate GPUs of every action now; whether any action but wait
    /// has some. The job mode asks the placement rule for each slot, as the
    /// first version did (in slot order, so a rule with a random stream
    /// draws the same numbers).
    fn candidates(&mut self) -> bool {
        let Some(ep) = self.ep.as_mut() else { return false };
        let n = self.n_actions;
        ep.choices.clear();
        ep.choices.resize(n, None);
        ep.slots.clear();
        let sim = ep.run.sim();
        let view = sim.view();
        match self.cfg.action {
            ActionMode::Job => {
                ep.slots.extend(ep.waiting.iter().take(self.cfg.max_queue).copied());
                let mut scratch = Vec::new();
                for (i, &j) in ep.slots.iter().enumerate() {
                    scratch.clear();
                    let req = crate::policy::queue::request(&view, j);
                    if ep.placement.place_job(&view, j, req, &mut scratch) {
                        ep.choices[i] = Some(scratch.clone());
                    }
                }
            }
            ActionMode::Placement => {
                let Some(&head) = ep.waiting.iter().next() else { return false };
                ep.slots.push(head);
                let spec = view.jobs.spec(head);
                let nodes = MAX_SPREAD.min(self.node_gpus.len() as u32);
                for d_node in 1..=nodes {
                    for d_gpn in 1..=self.gpn {
                        if d_node * d_gpn != spec.gpus {
                            continue;
                        }
                        let a = crate::policy::rifling::action_index(d_node, d_gpn, self.gpn);
                        ep.choices[a] = crate::policy::symmetric::physical(view.cluster, spec.vc, d_node, d_gpn, false);
                    }
                }
            }
            ActionMode::Node => {
                let Some(&head) = ep.waiting.iter().next() else { return false };
                ep.slots.push(head);
                let spec = view.jobs.spec(head);
                let p = view.cluster.partition(spec.vc);
                if p.gpus_free >= spec.gpus {
                    for &node in &p.nodes {
                        ep.choices[node.index()] = node_placement(view.cluster, spec.vc, node, spec.gpus);
                    }
                }
            }
        }
        ep.choices[..n - 1].iter().any(Option::is_some)
    }

    fn fill_mask(&mut self) {
        let Some(ep) = self.ep.as_ref() else { return };
        for (m, c) in self.mask.iter_mut().zip(&ep.choices) {
            *m = c.is_some();
        }
        // Wait ends the run with jobs left when nothing runs and nothing
        // is still to arrive.
        let stall = ep.running.is_empty() && ep.run.sim().arrivals_left() == 0;
        if let Some(w) = self.mask.last_mut() {
            *w = !stall;
        }
    }

    fn fill_obs(&mut self) {
        let Some(ep) = self.ep.as_ref() else { return };
        let sim = ep.run.sim();
        let jobs = sim.jobs();
        let cluster = sim.cluster();
        let k = self.cfg.max_queue;
        let now = sim.now().as_ms() as f64 / 1000.0;
        let total = f64::from(self.total_gpus);
        let obs = &mut self.obs;
        obs.iter_mut().for_each(|v| *v = 0.0);
        let waiting_n = ep.waiting.len() as f64;
        match self.cfg.observation {
            ObservationKind::Flat => {
                for (i, &j) in ep.waiting.iter().take(k).enumerate() {
                    let s = jobs.spec(j);
                    let waited = (now - s.submit.as_ms() as f64 / 1000.0).max(0.0);
                    let dur = if self.cfg.oracle { s.duration_ms as f64 / 1000.0 } else { 0.0 };
                    obs[i * 4] = 1.0;
                    obs[i * 4 + 1] = (f64::from(s.gpus) / total) as f32;
                    obs[i * 4 + 2] = (waited / (waited + 3600.0)) as f32;
                    obs[i * 4 + 3] = (dur / (dur + 3600.0)) as f32;
                }
                for (n, &g) in self.node_gpus.iter().enumerate() {
                    let free = f64::from(cluster.node_free(NodeId(n as u32)));
                    obs[k * 4 + n] = (free / f64::from(g).max(1.0)) as f32;
                }
                let m = obs.len();
                obs[m - 3] = (waiting_n / (waiting_n + k as f64)) as f32;
                obs[m - 2] = (ep.running.len() as f64 / total).min(1.0) as f32;
                obs[m - 1] = (cluster.free_gpus() as f64 / total) as f32;
            }
            ObservationKind::Fixed => {
                let nodes = self.node_gpus.len() as f64;
                let (mut whole, mut part, mut best) = (0u32, 0u32, 0u32);
                let mut buckets = [0u32; 4];
                for (n, &g) in self.node_gpus.iter().enumerate() {
                    let free = cluster.node_free(NodeId(n as u32));
                    if free == g && g > 0 {
                        whole += 1;
                    } else if free > 0 {
                        part += 1;
                    }
                    best = best.max(free);
                    buckets[match free {
                        0 => 0,
                        1 => 1,
                        2 | 3 => 2,
                        _ => 3,
                    }] += 1;
                }
                obs[0] = (cluster.free_gpus() as f64 / total) as f32;
                obs[1] = (f64::from(whole) / nodes) as f32;
                obs[2] = (f64::from(part) / nodes) as f32;
                obs[3] = (f64::from(best) / f64::from(self.gpn)) as f32;
                obs[4] = (ep.running.len() as f64 / total).min(1.0) as f32;
                obs[5] = (waiting_n / (waiting_n + k as f64)) as f32;
                for (i, b) in buckets.iter().enumerate() {
                    obs[6 + i] = (f64::from(*b) / nodes) as f32;
                }
                let vcs = cluster.partitions().len().max(1) as f64;
                // Jobs alive per user, for the user's share.
                let mut per_user: BTreeMap<&str, u32> = BTreeMap::new();
                let alive = ep.waiting.len() + ep.running.len();
                for j in ep.waiting.iter().chain(ep.running.iter()) {
                    *per_user.entry(jobs.spec(*j).user().unwrap_or("")).or_insert(0) += 1;
                }
                let hours = |t: f64| (t / (t + 3600.0)) as f32;
                let global = ep.history.get("").copied();
                for (i, &j) in ep.waiting.iter().take(k).enumerate() {
                    let s = jobs.spec(j);
                    let o = FIXED_CLUSTER_FEATURES + i * FIXED_JOB_FEATURES;
                    let waited = (now - s.submit.as_ms() as f64 / 1000.0).max(0.0);
                    let attained = match jobs.state(j) {
                        JobState::Suspended(st) => st.attained_gpu_ms as f64 / 1000.0,
                        _ => 0.0,
                    };
                    let user = s.user().unwrap_or("");
                    let predicted = ep
                        .history
                        .get(user)
                        .filter(|_| !user.is_empty())
                        .or(global.as_ref())
                        .map_or(0.0, |(sum, n)| sum / f64::from(*n));
                    obs[o] = 1.0;
                    obs[o + 1] = (f64::from(s.gpus) / total) as f32;
                    obs[o + 2] = s.model().map_or(0.0, model_code);
                    obs[o + 3] = (s.vc.index() as f64 / vcs) as f32;
                    obs[o + 4] = if s.user().is_some() {
                        (f64::from(per_user.get(user).copied().unwrap_or(0)) / alive.max(1) as f64) as f32
                    } else {
                        0.0
                    };
                    obs[o + 5] = hours(waited);
                    obs[o + 6] = hours(attained / f64::from(s.gpus.max(1)));
                    obs[o + 7] = hours(predicted);
                    obs[o + 8] = if self.cfg.oracle { hours(s.duration_ms as f64 / 1000.0) } else { 0.0 };
                }
            }
        }
    }
}

/// A model's code in `(0, 1)`: its name hashed (FNV-1a), so that a model
/// has the same code in every run and on every cluster (ours).
fn model_code(name: &str) -> f32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ((h >> 40) as f32 + 1.0) / ((1u64 << 24) as f32 + 2.0)
}

/// The GPUs of a `node`-mode action: `gpus` GPUs with `node` first (the
/// lowest free ids), then the partition's nodes with most free GPUs (ties
/// to the lower index); `None` when `node` cannot take the job (fewer free
/// GPUs than the job needs or than the node has, for a job wider than it).
fn node_placement(
    cluster: &crate::cluster::Cluster,
    vc: crate::ids::VcId,
    node: NodeId,
    gpus: u32,
) -> Option<Vec<GpuId>> {
    let free = cluster.node_free(node);
    let size = cluster.spec().nodes[node.index()].gpus;
    if free < gpus.min(size) || free == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(gpus as usize);
    cluster.take_free_gpus(node, free.min(gpus), &mut out);
    let mut left = gpus - free.min(gpus);
    if left > 0 {
        for (n, f) in cluster.partition(vc).nodes_by_free_desc() {
            if left == 0 {
                break;
            }
            if n == node || f == 0 {
                continue;
            }
            let take = f.min(left);
            cluster.take_free_gpus(n, take, &mut out);
            left -= take;
        }
    }
    (left == 0).then_some(out)
}

/// `n` environments stepped together, each on its own episode stream, in
/// parallel on rayon's threads (the results do not depend on the thread
/// count: each environment is independent).
pub struct VecEnv {
    envs: Vec<Env>,
    /// Gymnasium's autoreset modes: `true` resets an environment in the step
    /// that ended its episode (the returned observation is the new
    /// episode's, Stable-Baselines3's convention), `false` in the step after
    /// (Gymnasium's default, `next-step`: that step's action is ignored).
    pub same_step: bool,
    /// Environments whose episode ended at the last step (next-step mode).
    pending_reset: Vec<bool>,
}

/// One environment's outcome of a vector step.
#[derive(Clone, Debug, Default)]
pub struct VecStepOut {
    /// As [`StepOut`].
    pub out: StepOut,
    /// The step reset the environment (next-step autoreset): its reward is 0.
    pub was_reset: bool,
    /// Same-step autoreset: the observation that ended the episode.
    pub final_obs: Option<Vec<f32>>,
    /// The ended episode's summary (`summary.json`'s text), if it terminated.
    pub final_summary: Option<String>,
    /// An error of this environment's step (the vector goes on).
    pub error: Option<String>,
}

impl VecEnv {
    /// A vector of `envs` (their observation and action sizes must agree).
    ///
    /// # Errors
    /// No environments, or sizes that differ.
    pub fn new(envs: Vec<Env>, same_step: bool) -> Result<Self, RunError> {
        let Some(first) = envs.first() else { return Err(cfg_err("num_envs: at least 1")) };
        if envs.len() > MAX_ENVS {
            return Err(cfg_err(format!("num_envs={}: at most {MAX_ENVS}", envs.len())));
        }
        if envs.iter().any(|e| e.obs_len != first.obs_len || e.n_actions != first.n_actions) {
            return Err(cfg_err("the environments' observation or action sizes differ"));
        }
        let n = envs.len();
        let mut envs = envs;
        for (i, e) in envs.iter_mut().enumerate() {
            e.set_stream(i as u64);
        }
        Ok(VecEnv { envs, same_step, pending_reset: vec![false; n] })
    }

    /// The environments.
    pub fn envs(&self) -> &[Env] {
        &self.envs
    }

    /// Resets every environment; `seeds[i]` for the `i`-th (None: its
    /// generator's next draw).
    ///
    /// # Errors
    /// The first environment's error, with its index.
    pub fn reset(&mut self, seeds: &[Option<u64>]) -> Result<(), RunError> {
        use rayon::prelude::*;
        let results: Vec<Result<bool, RunError>> =
            self.envs.par_iter_mut().enumerate().map(|(i, e)| e.reset(seeds.get(i).copied().flatten())).collect();
        self.pending_reset.iter_mut().for_each(|p| *p = false);
        for (i, r) in results.into_iter().enumerate() {
            let ended = r.map_err(|e| cfg_err(format!("environment {i}: {e}")))?;
            if ended {
                return Err(cfg_err(format!("environment {i}: the episode has no decision point")));
            }
        }
        Ok(())
    }

    /// Steps every environment with its action, autoresetting the ones
    /// whose episode ended.
    pub fn step(&mut self, actions: &[usize]) -> Vec<VecStepOut> {
        use rayon::prelude::*;
        let same_step = self.same_step;
        self.envs
            .par_iter_mut()
            .zip(self.pending_reset.par_iter_mut())
            .zip(actions.par_iter())
            .map(|((env, pending), &a)| {
                let mut o = VecStepOut::default();
                if *pending {
                    *pending = false;
                    o.was_reset = true;
                    if let Err(e) = env.reset(None) {
                        o.error = Some(e.to_string());
                    }
                    return o;
                }
                match env.step(a) {
                    Ok(out) => {
                        if out.terminated || out.truncated {
                            o.final_summary = env.summary_json();
                            if same_step {
                                o.final_obs = Some(env.obs().to_vec());
                                if let Err(e) = env.reset(None) {
                                    o.error = Some(e.to_string());
                                }
                            } else {
                                *pending = true;
                            }
                        }
                        o.out = out;
                    }
                    Err(e) => {
                        o.error = Some(e.to_string());
                        o.out.truncated = true;
                        if same_step {
                            let _ = env.reset(None);
                        } else {
                            *pending = true;
                        }
                    }
                }
                o
            })
            .collect()
    }
}
