//! GENIE: QoS-aware dynamic scheduling from an offline profiler and a
//! throughput prediction model (Chen et al., "Deep Learning Research and
//! Development Platform: Characterizing and Scheduling with QoS Guarantees on
//! GPU Clusters", IEEE TPDS 2020; restated in `specs/policies.md` §2), and the
//! paper's baselines, for moldable tasks ([`crate::job::TaskSpec`]).
//!
//! What is the paper's and what is ours:
//!
//! - **Paper**: the prediction model (per-GPU rate `sPR(b) = k0 + k1 b + k2 b²`,
//!   communication penalty `Comm = gamma ((d_node - 1) d_gpn + lambda (d_gpn - 1)) / (n - 1)`,
//!   0 for inference; task rate `PR = (n - Comm) sPR(b')`, latency
//!   `Lat = w_bat w_iter / PR + nu`); the lightweight profiler (B single-GPU
//!   runs over batch sizes, then N + G runs at a fixed global batch); the cost
//!   `Cost(s) = n / (N G) + theta d_node / N` (theta 0.4) and `CER = PR / Cost`;
//!   Algorithm 1 (every waiting task scores every symmetric placement
//!   `<d_node, d_gpn>`, takes the best-CER placement that meets its ECT, else
//!   the best-CER one, and the queue is ordered by least waiting allowance,
//!   SWAF); the six task types; the priority classes.
//! - **Ours** (each a documented option or constant here): the simulated
//!   profiler runs against the simulator's ground truth (the profile
//!   database's table model) with log-normal measurement noise (sd 2 %), 100
//!   iterations per run; `nu = 0` (the simulator has no start-up cost);
//!   `deadline = arrival + ECT`; the queue is strict (the head waits for its
//!   chosen placement; `backfill` lets later tasks whose placement is free go
//!   first); physical nodes for `<d_node, d_gpn>` are the `d_node` nodes with
//!   the most free GPUs (ties by node index), the lowest-indexed free GPUs on
//!   each; inference runs at its single-GPU step time on every GPU (no
//!   synchronisation); its step time is a third of a training step
//!   (forward only; a common rule of thumb: backward ≈ 2 × forward);
//!   baselines' placement and order rules as in [`GenieVariant`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use super::symmetric::physical;
use super::{Decision, Policy, View};
use crate::ids::{JobId, VcId};
use crate::job::{JobState, JobTable, TaskSpec};
use crate::profile::db::ProfileDb;
use crate::profile::genie::{GenieFit, Point, fit};
pub use crate::profile::genie::{GenieTruth, GroundTruth, INFERENCE_STEP_FRACTION, TASK_MODELS, kind_name};

/// The simulated profiler's settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfilerConfig {
    /// Iterations per profiling run (the paper: about 100).
    pub iterations_per_run: u64,
    /// Standard deviation of the log-normal measurement noise (0.02 = 2 %).
    pub noise_sd: f64,
    /// The ground truth measured (default `table`; left out of saved models then).
    #[serde(default, skip_serializing_if = "GenieTruth::is_table")]
    pub truth: GenieTruth,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        ProfilerConfig { iterations_per_run: 100, noise_sd: 0.02, truth: GenieTruth::Table }
    }
}

/// The fitted model of one task type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeProfile {
    /// Task type, e.g. `resnet50-train`.
    pub kind: String,
    /// Profile database model it runs.
    pub model: String,
    /// Inference (no communication penalty) or training.
    pub inference: bool,
    /// `[k0, k1, k2]` of `sPR(b)`, samples/s per GPU.
    pub k: [f64; 3],
    /// Cross-node penalty, GPU-equivalents (0 for inference).
    pub gamma: f64,
    /// Same-node weight relative to cross-node (`None` when not identified:
    /// inference, or no same-node runs).
    pub lambda: Option<f64>,
    /// Profiling runs made.
    pub runs: u32,
    /// Their cost, simulated GPU-seconds.
    pub gpu_seconds: f64,
}

impl TypeProfile {
    fn fit(&self) -> GenieFit {
        GenieFit { k: self.k, gamma: self.gamma, lambda: self.lambda.unwrap_or(f64::NAN) }
    }

    /// Predicted task rate, samples/s, on `d_node` nodes × `d_gpn` GPUs at
    /// global batch `global` (GENIE Eqs. 4–7); `None` when not positive.
    pub fn rate(&self, global: u32, d_node: u32, d_gpn: u32) -> Option<f64> {
        let n = d_node * d_gpn;
        let b = f64::from(global) / f64::from(n);
        let f = self.fit();
        let comm = if self.inference || n == 1 { 0.0 } else { f.comm(&vec![d_gpn; d_node as usize]) };
        let pr = (f64::from(n) - comm) * f.spr(b);
        (pr.is_finite() && pr > 0.0).then_some(pr)
    }

    /// Predicted latency, ms, of `task` on `<d_node, d_gpn>` (GENIE Eq. 8 with nu = 0).
    pub fn latency_ms(&self, task: &TaskSpec, d_node: u32, d_gpn: u32) -> Option<f64> {
        let pr = self.rate(task.global_bsz, d_node, d_gpn)?;
        Some(f64::from(task.global_bsz) * task.iterations as f64 / pr * 1000.0)
    }
}

/// Every task type's fitted model, with where it came from: what
/// `dlsched genie-profile` saves under `policies/`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenieProfiles {
    /// GPU type profiled.
    pub gpu_type: String,
    /// Nodes (N) and GPUs per node (G) of the profiled platform.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Seed of the measurement noise.
    pub seed: u64,
    /// Profiler settings.
    pub config: ProfilerConfig,
    /// Which profile database was the ground truth (`builtin` or a directory).
    pub profile_db: String,
    /// Fitted models by task type.
    pub types: BTreeMap<String, TypeProfile>,
}

impl GenieProfiles {
    /// Checks that every coefficient is finite and that `gamma` is not
    /// negative.
    ///
    /// # Errors
    /// A message naming the first task type at fault.
    pub fn validate(&self) -> Result<(), String> {
        for (kind, t) in &self.types {
            if t.k.iter().any(|k| !k.is_finite())
                || !t.gamma.is_finite()
                || t.gamma < 0.0
                || t.lambda.is_some_and(|l| !l.is_finite() || l < 0.0)
                || !t.gpu_seconds.is_finite()
            {
                return Err(format!(
                    "task type `{kind}`: coefficients must be finite, gamma and lambda >= 0 (k {:?}, gamma {}, lambda {:?})",
                    t.k, t.gamma, t.lambda
                ));
            }
        }
        Ok(())
    }

    /// Total profiling cost, simulated GPU-seconds.
    pub fn gpu_seconds(&self) -> f64 {
        self.types.values().map(|t| t.gpu_seconds).sum()
    }

    /// The profile for `kind`, or the most similar profiled type's (same
    /// train/infer mode, then nearest parameter count in the database — GENIE
    /// compares model structure; we compare size) when `kind` is not profiled.
    pub fn for_kind(&self, kind: &str, model: &str, inference: bool, db: &ProfileDb) -> Option<&TypeProfile> {
        if let Some(t) = self.types.get(kind) {
            return Some(t);
        }
        let params = |m: &str| db.model_info(m).map_or(f64::NAN, |i| i.params_m);
        let p = params(model);
        self.types.values().filter(|t| t.inference == inference).min_by(|a, b| {
            let d = |t: &TypeProfile| (params(&t.model).ln() - p.ln()).abs();
            d(a).total_cmp(&d(b)).then(a.kind.cmp(&b.kind))
        })
    }
}

/// Runs GENIE's lightweight profiler for every task type against the ground
/// truth: for each type, single-GPU runs at batches 1, 2, 4, … up to the
/// largest batch measured for its model, and at the measured batches
/// (fitting `k0..k2`), then for training `N - 1` runs on `<d_node, 1>`
/// (d_node = 2..N) and `G - 1` on `<1, d_gpn>` (d_gpn = 2..G) at a fixed
/// global batch (the largest measured batch), fitting `gamma` and `lambda`
/// (a negative penalty is read as 0). Each run's time is the true step time times
/// `exp(noise)`, noise ~ N(0, noise_sd²) on the seeded stream `genie.profiler`.
pub fn profile(
    db: &ProfileDb,
    db_name: &str,
    gpu_type: &str,
    nodes: u32,
    gpus_per_node: u32,
    seed: u64,
    cfg: ProfilerConfig,
) -> GenieProfiles {
    let truth = GroundTruth::with(db, gpu_type, cfg.truth);
    let mut rng = crate::rng::stream(seed, "genie.profiler");
    let mut types = BTreeMap::new();
    for (name, model) in TASK_MODELS {
        for inference in [false, true] {
            let t = profile_type(&truth, name, model, inference, nodes, gpus_per_node, cfg, &mut rng);
            types.insert(t.kind.clone(), t);
        }
    }
    GenieProfiles {
        gpu_type: gpu_type.to_ascii_lowercase(),
        nodes,
        gpus_per_node,
        seed,
        config: cfg,
        profile_db: db_name.to_string(),
        types,
    }
}

/// Profiles one task type (see [`profile`]) with measurement noise drawn from `rng`.
#[allow(clippy::too_many_arguments)]
pub fn profile_type(
    truth: &GroundTruth<'_>,
    name: &str,
    model: &str,
    inference: bool,
    nodes: u32,
    gpus_per_node: u32,
    cfg: ProfilerConfig,
    rng: &mut rand_chacha::ChaCha8Rng,
) -> TypeProfile {
    let noise = Normal::new(0.0, cfg.noise_sd.max(0.0)).unwrap_or_else(|_| Normal::new(0.0, 0.0).expect("valid"));
    let mut points: Vec<Point> = Vec::new();
    let (mut runs, mut gpu_s) = (0u32, 0.0);
    let mut measure = |b: u32, split: Vec<u32>, rng: &mut rand_chacha::ChaCha8Rng| {
        let t = truth.step_s(model, inference, b, &split) * noise.sample(rng).exp();
        let n: u32 = split.iter().sum();
        runs += 1;
        gpu_s += f64::from(n) * cfg.iterations_per_run as f64 * t;
        points.push((b, split, t));
    };
    // Single-GPU runs: powers of two from 1 up to the largest batch measured
    // for the model, and the measured batches themselves, so the fit covers
    // the small per-GPU batches that splitting a task over many GPUs produces.
    let measured = truth.batches(model);
    let largest = measured.last().copied().unwrap_or(32);
    let mut batches: Vec<u32> =
        (0..32).map(|i| 1u32 << i).take_while(|&b| b <= largest).chain(measured.iter().copied()).collect();
    batches.sort_unstable();
    batches.dedup();
    for &b in &batches {
        measure(b, vec![1], rng);
    }
    if !inference {
        let global = largest;
        for d_node in 2..=nodes {
            measure(global / d_node, vec![1; d_node as usize], rng);
        }
        for d_gpn in 2..=gpus_per_node {
            measure(global / d_gpn, vec![d_gpn], rng);
        }
    }
    let mut f = fit(&points).unwrap_or(GenieFit { k: [0.0; 3], gamma: 0.0, lambda: f64::NAN });
    // A penalty is a loss: a negative fit (noise, or a ground truth that
    // scales better than the model's form) is read as none.
    if f.gamma.is_nan() || f.gamma <= 0.0 {
        f.gamma = 0.0;
        f.lambda = f64::NAN;
    } else if f.lambda < 0.0 {
        f.lambda = 0.0;
    }
    TypeProfile {
        kind: kind_name(name, inference),
        model: model.to_string(),
        inference,
        k: f.k,
        gamma: if inference { 0.0 } else { f.gamma },
        lambda: (!inference && f.lambda.is_finite()).then_some(f.lambda),
        runs,
        gpu_seconds: gpu_s,
    }
}

/// GENIE and the paper's baselines, over the same predictions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum GenieVariant {
    /// GENIE (Algorithm 1): best-CER placement meeting the ECT, else best CER;
    /// queue by least waiting allowance (SWAF).
    Genie,
    /// FIFO: arrival order; each task on its best-CER placement (GENIE's cost
    /// model without QoS; the paper does not say which placement FIFO used).
    GenieFifo,
    /// Min-Min (Braun et al., JPDC 2001), GENIE's adaptation: earliest ECT
    /// first, each task on its minimum-latency placement.
    MinMin,
    /// Weighted Fair: ordered by the mean of arrival time and ECT (equal
    /// weights: ours), best-CER placement.
    WeightedFair,
    /// Tetris+Perf: the placement with the highest predicted rate; shortest
    /// predicted latency first (Tetris blends packing with SRTF).
    TetrisPerf,
    /// Tetris+CER: the best-CER placement, no QoS; shortest predicted latency first.
    TetrisCer,
}

impl GenieVariant {
    /// The policy's name in outputs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GenieVariant::Genie => "genie",
            GenieVariant::GenieFifo => "genie-fifo",
            GenieVariant::MinMin => "min-min",
            GenieVariant::WeightedFair => "weighted-fair",
            GenieVariant::TetrisPerf => "tetris-perf",
            GenieVariant::TetrisCer => "tetris-cer",
        }
    }
}

/// Options of the GENIE family.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GenieOptions {
    /// Which policy.
    pub variant: GenieVariant,
    /// Concentration weight of the cost (the paper's example: 0.4).
    pub theta: f64,
    /// Let later tasks start when the head's placement is not free.
    pub backfill: bool,
    /// Physical nodes for `<d_node, d_gpn>`: the fullest nodes that have room
    /// (best fit, keeps whole nodes free for wide tasks) instead of the spec's
    /// proposal, the emptiest (which spreads tasks over nodes).
    pub best_fit_nodes: bool,
}

/// A scored placement: (d_node, d_gpn, latency ms, rate samples/s, CER).
type Cand = (u32, u32, f64, f64, f64);

/// A symmetric placement.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Choice {
    d_node: u32,
    d_gpn: u32,
    latency_ms: f64,
    key: f64,
}

/// Where and how to profile task types that the models lack, once the
/// cluster is idle (GENIE: "profiled when the cluster is idle").
#[derive(Clone, Debug)]
pub struct OnlineProfiling {
    /// GPU type to profile on.
    pub gpu_type: String,
    /// Nodes (N) of the platform.
    pub nodes: u32,
    /// GPUs per node (G).
    pub gpus_per_node: u32,
    /// Seed of the measurement noise (stream `genie.profiler.online.<type>`).
    pub seed: u64,
    /// Profiler settings.
    pub config: ProfilerConfig,
}

/// The GENIE-family policy.
///
/// A task whose type the fitted models lack borrows the most similar
/// profiled type ([`GenieProfiles::for_kind`]); with [`OnlineProfiling`]
/// set, such types are profiled at the first decision at which every GPU of
/// the cluster is free, and their own model is used from then on. The
/// simulated profiling adds its GPU time to the profiling cost but does not
/// occupy the simulated cluster (it would run on the idle GPUs).
pub struct GeniePolicy {
    opts: GenieOptions,
    profiles: GenieProfiles,
    db: Arc<ProfileDb>,
    pending: Vec<JobId>,
    /// Predicted latency (ms) of each launched task on its placement.
    predicted: HashMap<JobId, f64>,
    /// Tasks that started on a borrowed model.
    borrowed: u64,
    online: Option<OnlineProfiling>,
    /// Unprofiled task types seen so far: (kind, type name, model, inference).
    missing: std::collections::BTreeSet<(String, String, String, bool)>,
    profiled_online: u64,
    /// Tasks started without a positive predicted rate anywhere.
    unpredicted: u64,
}

impl GeniePolicy {
    /// A policy with fitted `profiles` (see [`profile`]).
    pub fn new(opts: GenieOptions, profiles: GenieProfiles, db: Arc<ProfileDb>) -> Self {
        GeniePolicy {
            opts,
            profiles,
            db,
            pending: Vec::new(),
            predicted: HashMap::new(),
            borrowed: 0,
            online: None,
            missing: Default::default(),
            profiled_online: 0,
            unpredicted: 0,
        }
    }

    /// Profiles missing task types when the cluster is idle.
    pub fn with_online_profiling(mut self, online: OnlineProfiling) -> Self {
        self.online = Some(online);
        self
    }

    /// Profiles every missing type seen so far, if the cluster is idle.
    fn profile_missing(&mut self, view: &View<'_>) {
        let Some(op) = &self.online else { return };
        if self.missing.is_empty() || view.cluster.free_gpus() != u64::from(view.cluster.total_gpus()) {
            return;
        }
        let truth = GroundTruth::with(&self.db, &op.gpu_type, op.config.truth);
        for (kind, name, model, inference) in std::mem::take(&mut self.missing) {
            let mut rng = crate::rng::stream(op.seed, &format!("genie.profiler.online.{kind}"));
            let t = profile_type(&truth, &name, &model, inference, op.nodes, op.gpus_per_node, op.config, &mut rng);
            self.profiles.types.insert(kind, t);
            self.profiled_online += 1;
        }
    }

    fn type_profile(&self, view: &View<'_>, job: JobId) -> Option<&TypeProfile> {
        let spec = view.jobs.spec(job);
        let task = spec.task.as_deref()?;
        self.profiles.for_kind(&task.kind, spec.model.as_deref().unwrap_or(""), task.inference, &self.db)
    }

    /// GENIE's cost of `<d_node, d_gpn>` on a platform of N × G.
    fn cost(&self, d_node: u32, d_gpn: u32, nodes: u32, gpn: u32) -> f64 {
        f64::from(d_node * d_gpn) / f64::from(nodes * gpn) + self.opts.theta * f64::from(d_node) / f64::from(nodes)
    }

    /// Scores every symmetric placement of a waiting task and returns its
    /// choice and queue key (smaller first).
    fn choose(&self, view: &View<'_>, job: JobId, vc: VcId) -> Option<Choice> {
        let spec = view.jobs.spec(job);
        let task = spec.task.as_deref()?;
        let prof = self.type_profile(view, job)?;
        let p = view.cluster.partition(vc);
        let (nodes, gpn) = (p.nodes.len() as u32, p.max_node_gpus);
        let now = view.now.as_ms() as f64;
        let deadline = task.deadline.as_ms() as f64;
        // (d_node, d_gpn, latency ms, rate, cer)
        let mut all: Vec<Cand> = Vec::new();
        for d_node in 1..=nodes {
            for d_gpn in 1..=gpn {
                if u64::from(d_node * d_gpn) > u64::from(task.global_bsz) {
                    continue;
                }
                let Some(pr) = prof.rate(task.global_bsz, d_node, d_gpn) else { continue };
                let lat = f64::from(task.global_bsz) * task.iterations as f64 / pr * 1000.0;
                all.push((d_node, d_gpn, lat, pr, pr / self.cost(d_node, d_gpn, nodes, gpn)));
            }
        }
        // Ties: fewer GPUs, then fewer nodes (the enumeration order).
        let best_by = |v: &mut dyn Iterator<Item = &Cand>, score: &dyn Fn(&Cand) -> f64| {
            v.fold(None::<Cand>, |best, c| match best {
                Some(b) if score(&b) >= score(c) => Some(b),
                _ => Some(*c),
            })
        };
        let submit = spec.submit.as_ms() as f64;
        if all.is_empty() {
            // The model predicts no positive rate anywhere (a degenerate
            // fit): run the task on one GPU, after every predictable task,
            // rather than never. Counted as `tasks_without_prediction`.
            return Some(Choice { d_node: 1, d_gpn: 1, latency_ms: f64::NAN, key: f64::INFINITY });
        }
        let pick = match self.opts.variant {
            GenieVariant::Genie => {
                let meets = best_by(&mut all.iter().filter(|c| now + c.2 <= deadline), &|c| c.4);
                meets.or_else(|| best_by(&mut all.iter(), &|c| c.4))
            }
            GenieVariant::GenieFifo | GenieVariant::WeightedFair | GenieVariant::TetrisCer => {
                best_by(&mut all.iter(), &|c| c.4)
            }
            GenieVariant::MinMin => best_by(&mut all.iter(), &|c| -c.2),
            GenieVariant::TetrisPerf => best_by(&mut all.iter(), &|c| c.3),
        }?;
        let key = match self.opts.variant {
            GenieVariant::Genie => deadline - (now + pick.2),
            GenieVariant::GenieFifo => submit,
            GenieVariant::MinMin => deadline,
            GenieVariant::WeightedFair => 0.5 * submit + 0.5 * deadline,
            GenieVariant::TetrisPerf | GenieVariant::TetrisCer => pick.2,
        };
        Some(Choice { d_node: pick.0, d_gpn: pick.1, latency_ms: pick.2, key })
    }
}

impl Policy for GeniePolicy {
    fn name(&self) -> String {
        let mut n = self.opts.variant.name().to_string();
        if self.opts.backfill {
            n.push_str("+backfill");
        }
        n
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        self.pending.push(job);
        let spec = view.jobs.spec(job);
        if let Some(t) = &spec.task
            && !self.profiles.types.contains_key(&t.kind)
        {
            let name = t.kind.rsplit_once('-').map_or(t.kind.as_str(), |(n, _)| n).to_string();
            self.missing.insert((t.kind.clone(), name, spec.model.clone().unwrap_or_default(), t.inference));
        }
    }

    fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}

    fn decide(&mut self, view: &View<'_>) -> Decision {
        self.profile_missing(view);
        let mut scored: Vec<(f64, JobId, Choice, VcId)> = self
            .pending
            .iter()
            .filter_map(|&j| {
                let vc = view.jobs.spec(j).vc;
                self.choose(view, j, vc).map(|c| (c.key, j, c, vc))
            })
            .collect();
        scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, job, c, vc) in scored {
            if let Some(gpus) = physical(view.cluster, vc, c.d_node, c.d_gpn, self.opts.best_fit_nodes) {
                self.pending.retain(|&j| j != job);
                if c.latency_ms.is_finite() {
                    self.predicted.insert(job, c.latency_ms);
                } else {
                    self.unpredicted += 1;
                }
                let spec = view.jobs.spec(job);
                if let Some(t) = &spec.task
                    && !self.profiles.types.contains_key(&t.kind)
                {
                    self.borrowed += 1;
                }
                return Decision::Launch { job, gpus };
            }
            if !self.opts.backfill {
                break;
            }
        }
        Decision::Wait
    }

    fn metrics(&self, jobs: &JobTable) -> Vec<(&'static str, f64)> {
        let mut errs: Vec<f64> = Vec::new();
        for (&job, &pred) in &self.predicted {
            if let JobState::Completed(d) = jobs.state(job) {
                let actual = d.end.since(d.start) as f64;
                if actual > 0.0 {
                    errs.push((pred - actual).abs() / actual);
                }
            }
        }
        errs.sort_by(f64::total_cmp);
        let mut m = vec![
            ("profiling_gpu_hours", self.profiles.gpu_seconds() / 3600.0),
            ("tasks_on_borrowed_model", self.borrowed as f64),
            ("task_types_profiled_online", self.profiled_online as f64),
            ("tasks_without_prediction", self.unpredicted as f64),
        ];
        if !errs.is_empty() {
            m.push(("prediction_error_mean", errs.iter().sum::<f64>() / errs.len() as f64));
            m.push(("prediction_error_p95", crate::stats::quantile_sorted(&errs, 0.95)));
        }
        m
    }
}
