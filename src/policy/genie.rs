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
//!   baselines' placement and order rules as in [`GenieVariant`] (the
//!   paper's black-box baselines' placement, [`BlackBox`], is ours: the paper
//!   gives none; Capacity's quota rule is ours); the candidate placements are
//!   the paper's set ([`PlacementSet::Paper`], its Figs. 8 and 10) unless
//!   `placements = all`.
//! - **Two readings of Algorithm 1** ([`Reading`]): `strict` (default) is
//!   the paper's rule as written, blind to which GPUs are free; `available`
//!   is our reading of "generate all placements under the limitations of
//!   platform P": the best-CER placement free now that meets the ECT, else
//!   the paper's rule. On lab16 (seeds 1-3, 24 h, table model, `--sample-interval 0`) at 5 / 10 /
//!   20 tasks/h, QoS guarantee: strict 87.4 / 67.8 / 11.6 %, strict with
//!   backfill 87.4 / 81.4 / 36.9 %, available 88.0 / 83.8 / 16.1 %,
//!   available with backfill 88.0 / 85.9 / 69.9 %.
//! - **The predictor** (`--predictor`, [`crate::policy::predictor`]): by
//!   default every prediction (latency, rate, so CER and the waiting
//!   allowance) comes from the fitted models; `oracle` reads instead the
//!   time the engine will run the task on the placement (0 % error),
//!   `noisy:P` that time × (1 + e), e uniform in ±P % per (seed, task,
//!   placement) ([`GeniePolicy::with_predictor`]). The black-box baselines
//!   decide without predictions whatever the predictor; only their
//!   prediction-error report follows it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use super::predictor::PredictorKind;
use super::symmetric::physical;
use super::{Decision, Policy, View};
use crate::cluster::Cluster;
use crate::ids::{GpuId, JobId, VcId};
use crate::job::{JobSpec, JobState, JobTable, TaskSpec};
use crate::profile::RateModel;
use crate::profile::db::ProfileDb;
use crate::profile::genie::{GenieFit, Point, fit, fit_with};
pub use crate::profile::genie::{GenieTruth, GroundTruth, INFERENCE_STEP_FRACTION, TASK_MODELS, kind_name};
use crate::profile::memo::WordState;

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
    /// The batch sizes profiled (default `grid`; left out of saved models then).
    #[serde(default, skip_serializing_if = "ProfileBatches::is_grid")]
    pub batches: ProfileBatches,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        ProfilerConfig {
            iterations_per_run: 100,
            noise_sd: 0.02,
            truth: GenieTruth::Table,
            batches: ProfileBatches::Grid,
        }
    }
}

/// Which batch sizes GENIE's simulated profiler measures (`--profile-batches`,
/// sweep key `profile_batches`).
///
/// The ground truth it measures is the profile database's table
/// (`profile::model::TableModel`, under `genie-k80` too for single-GPU
/// times): exact only at the per-GPU batches the public measurements contain
/// (Gavel's K80 rows: ResNet-50 16/32/64/128, LSTM 5/10/20/40/80, Transformer
/// 16/32/64/128/256; the A100 rows of the substituted VGG-16 64/128/256 and
/// Inception-v3 64/128), and elsewhere `at_batch`'s linear interpolation
/// between the two neighbouring measured batches (below the smallest, the
/// line through the two smallest points, bounded; above the largest,
/// proportional). Under [`ProfileBatches::Grid`] the profiler measures at
/// powers of two and at per-GPU batches `global / d` that are mostly such
/// interpolated points, so its fit is in part fitted to our interpolation;
/// [`ProfileBatches::Measured`] keeps to the measured batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum ProfileBatches {
    /// Single-GPU runs at 1, 2, 4, … up to the largest measured batch and at
    /// the measured batches; multi-GPU runs at per-GPU batch `largest / d`
    /// (the default; the profiler before the option existed).
    #[default]
    Grid,
    /// Only at per-GPU batches the truth reads without batch interpolation
    /// (its estimate's `fallbacks.batch` is false): single-GPU runs at the
    /// measured single-GPU batches; each multi-GPU run at the largest such
    /// batch of its split not above `largest / d` (else the smallest such
    /// batch; no run when the split has none). A split fallback (a measured
    /// split standing in for an unmeasured one) is kept: only the batch axis
    /// is restricted. A type with two measured single-GPU batches (Inception-v3,
    /// A100 64 and 128) gets a linear `sPR` (`k2 = 0`): a quadratic through
    /// two points is not identified.
    Measured,
}

crate::names::value_names!(ProfileBatches { Grid => "grid", Measured => "measured" });

impl ProfileBatches {
    /// True for the default (left out of saved models and manifests).
    pub fn is_grid(&self) -> bool {
        *self == ProfileBatches::Grid
    }

    /// The name on the command line and in sweeps.
    pub fn name(self) -> &'static str {
        match self {
            ProfileBatches::Grid => "grid",
            ProfileBatches::Measured => "measured",
        }
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

/// The profiling runs of one task type, in the order they are made: each a
/// per-GPU batch and a split over servers (see [`profile`] and
/// [`ProfileBatches`]).
pub fn profile_plan(
    truth: &GroundTruth<'_>,
    model: &str,
    inference: bool,
    nodes: u32,
    gpus_per_node: u32,
    which: ProfileBatches,
) -> Vec<(u32, Vec<u32>)> {
    // Single-GPU runs: powers of two from 1 up to the largest batch measured
    // for the model, and the measured batches themselves, so the fit covers
    // the small per-GPU batches that splitting a task over many GPUs produces
    // (`grid`); or only the batches measured on one GPU (`measured`).
    let measured = truth.batches(model);
    let largest = measured.last().copied().unwrap_or(32);
    let batches: Vec<u32> = match which {
        ProfileBatches::Grid => {
            let mut v: Vec<u32> =
                (0..32).map(|i| 1u32 << i).take_while(|&b| b <= largest).chain(measured.iter().copied()).collect();
            v.sort_unstable();
            v.dedup();
            v
        }
        ProfileBatches::Measured => {
            measured.iter().copied().filter(|&b| truth.batch_measured(model, inference, b, &[1])).collect()
        }
    };
    let mut plan: Vec<(u32, Vec<u32>)> = batches.into_iter().map(|b| (b, vec![1])).collect();
    if !inference {
        // At a fixed global batch (the largest measured one): `<d_node, 1>`
        // for d_node = 2..N, then `<1, d_gpn>` for d_gpn = 2..G.
        let global = largest;
        let splits = (2..=nodes).map(|d| vec![1; d as usize]).chain((2..=gpus_per_node).map(|d| vec![d]));
        for split in splits {
            let d: u32 = split.iter().sum();
            let b = match which {
                ProfileBatches::Grid => Some(global / d),
                ProfileBatches::Measured => {
                    let ok: Vec<u32> =
                        measured.iter().copied().filter(|&b| truth.batch_measured(model, false, b, &split)).collect();
                    ok.iter().rev().find(|&&b| b <= global / d).or(ok.first()).copied()
                }
            };
            if let Some(b) = b {
                plan.push((b, split));
            }
        }
    }
    plan
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
    for (b, split) in profile_plan(truth, model, inference, nodes, gpus_per_node, cfg.batches) {
        measure(b, split, rng);
    }
    let fitted = match cfg.batches {
        ProfileBatches::Grid => fit(&points),
        ProfileBatches::Measured => fit_with(&points, true),
    };
    let mut f = fitted.unwrap_or(GenieFit { k: [0.0; 3], gamma: 0.0, lambda: f64::NAN });
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

/// GENIE and the paper's baselines (TPDS 2020 §7.1), with today's earlier
/// variants under names that say what they are.
///
/// The paper: FIFO, Capacity, Min-Min and Weighted Fair "treat DL tasks as
/// black boxes and place tasks with simple heuristics, ignoring the
/// relationship between resource provisions and task performance"; only
/// Tetris+Perf and Tetris+CER use the prediction model. So those four take a
/// [`BlackBox`] placement (no prediction), and the two Tetris variants are
/// ordered by Tetris's packing score. The `*-cer`, `*-pred` and `*-srtf`
/// kinds are dlsched's earlier, prediction-using readings (not the paper's),
/// kept for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum GenieVariant {
    /// GENIE (Algorithm 1): best-CER placement meeting the ECT, else best CER;
    /// queue by least waiting allowance (SWAF); [`Reading`] picks how free
    /// GPUs enter the choice.
    Genie,
    /// The paper's FIFO: arrival order, head-of-line blocking, a black-box
    /// placement ([`BlackBox`]). (The earlier `genie-fifo`, with GENIE's
    /// best-CER placement, is `fifo-cer`.)
    GenieFifo,
    /// The paper's Capacity (YARN capacity scheduler as GENIE adapts it): one
    /// queue per task type (model, training and inference together), each
    /// with a quota of GPUs it alone may use; FIFO within a queue, the
    /// queues independent; a black-box placement no wider than the queue's
    /// unused quota. Quota rule (ours, the paper gives none): the partition's
    /// GPUs split equally over the six task types of [`TASK_MODELS`],
    /// `floor(N G / 6)` each, the remainder one GPU each to the first types
    /// in [`TASK_MODELS`] order (lab16: alexnet, googlenet, resnet50,
    /// inception3 3 GPUs, lstm and seq2seq 2); every type at least one GPU
    /// (over-committed on fewer than six GPUs); a type outside the six gets
    /// the floor share.
    Capacity,
    /// Min-Min (Braun et al., JPDC 2001) as GENIE adapts it: earliest ECT
    /// first, a black-box placement. (The earlier `min-min`, with the minimum
    /// predicted latency placement, is `min-min-pred`.)
    MinMin,
    /// Weighted Fair: ordered by the mean of arrival time and ECT (equal
    /// weights: ours; GENIE cites DRF), a black-box placement. (The earlier
    /// `weighted-fair`, with the best-CER placement, is `weighted-fair-cer`.)
    WeightedFair,
    /// Tetris+Perf: the placement with the highest predicted rate; among the
    /// tasks whose placement is free now, the best Tetris packing score first
    /// (Grandl et al., SIGCOMM 2014 §3: alignment = Σ over nodes of the
    /// placement's GPUs there × the node's free GPUs, both over G). (The
    /// earlier `tetris-perf`, shortest predicted latency first, is
    /// `tetris-perf-srtf`.)
    TetrisPerf,
    /// Tetris+CER: the best-CER placement, no QoS; ordered by the packing
    /// score as [`GenieVariant::TetrisPerf`]. (The earlier SRTF order is
    /// `tetris-cer-srtf`.)
    TetrisCer,
    /// Ours, not the paper's: arrival order, GENIE's best-CER placement (the
    /// earlier `genie-fifo`).
    FifoCer,
    /// Ours, not the paper's: earliest ECT first, the minimum predicted
    /// latency placement (the earlier `min-min`).
    MinMinPred,
    /// Ours, not the paper's: Weighted Fair's order, the best-CER placement
    /// (the earlier `weighted-fair`).
    WeightedFairCer,
    /// Ours, not the paper's: highest predicted rate, shortest predicted
    /// latency first (the earlier `tetris-perf`).
    TetrisPerfSrtf,
    /// Ours, not the paper's: best CER, shortest predicted latency first (the
    /// earlier `tetris-cer`).
    TetrisCerSrtf,
}

crate::names::value_names!(GenieVariant {
    Genie => "genie",
    GenieFifo => "genie-fifo",
    Capacity => "capacity",
    MinMin => "min-min",
    WeightedFair => "weighted-fair",
    TetrisPerf => "tetris-perf",
    TetrisCer => "tetris-cer",
    FifoCer => "fifo-cer",
    MinMinPred => "min-min-pred",
    WeightedFairCer => "weighted-fair-cer",
    TetrisPerfSrtf => "tetris-perf-srtf",
    TetrisCerSrtf => "tetris-cer-srtf",
});

impl GenieVariant {
    /// The policy's name in outputs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GenieVariant::Genie => "genie",
            GenieVariant::GenieFifo => "genie-fifo",
            GenieVariant::Capacity => "capacity",
            GenieVariant::MinMin => "min-min",
            GenieVariant::WeightedFair => "weighted-fair",
            GenieVariant::TetrisPerf => "tetris-perf",
            GenieVariant::TetrisCer => "tetris-cer",
            GenieVariant::FifoCer => "fifo-cer",
            GenieVariant::MinMinPred => "min-min-pred",
            GenieVariant::WeightedFairCer => "weighted-fair-cer",
            GenieVariant::TetrisPerfSrtf => "tetris-perf-srtf",
            GenieVariant::TetrisCerSrtf => "tetris-cer-srtf",
        }
    }

    /// Whether the variant places tasks as a black box ([`BlackBox`]): the
    /// paper's FIFO, Capacity, Min-Min and Weighted Fair.
    pub fn black_box(self) -> bool {
        matches!(
            self,
            GenieVariant::GenieFifo | GenieVariant::Capacity | GenieVariant::MinMin | GenieVariant::WeightedFair
        )
    }
}

/// The two readings of GENIE's Algorithm 1 ("generate all placements under
/// the limitations of platform P").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reading {
    /// The paper's rule as written: the best-CER placement meeting the ECT,
    /// else the best-CER one, whatever is free; the task waits for it.
    #[default]
    Strict,
    /// Availability-aware (our reading of "under the limitations of
    /// platform P"): among the placements free now that meet the ECT, the
    /// best CER; if none, the paper's rule.
    Available,
}

/// The symmetric placements `<d_node, d_gpn>` the GENIE family considers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementSet {
    /// The paper's: `d_node ∈ {1, 2, 4, 8, …} ≤ N`, `d_gpn ∈ {1, 2, 4, …} ≤ G`
    /// (on lab16 exactly the 9 placements of its Figs. 8 and 10).
    #[default]
    Paper,
    /// Every `1..=N × 1..=G` (the earlier default).
    All,
}

impl PlacementSet {
    /// The placements on N nodes of G GPUs, in enumeration order (d_node,
    /// then d_gpn, ascending).
    pub fn placements(self, nodes: u32, gpn: u32) -> Vec<(u32, u32)> {
        let axis = |max: u32| -> Vec<u32> {
            match self {
                PlacementSet::All => (1..=max).collect(),
                PlacementSet::Paper => (0..32).map(|i| 1u32 << i).take_while(|&x| x <= max).collect(),
            }
        };
        let gs = axis(gpn);
        axis(nodes).into_iter().flat_map(|n| gs.iter().map(move |&g| (n, g))).collect()
    }
}

/// The black-box placement of the paper's FIFO, Capacity, Min-Min and
/// Weighted Fair. The paper gives no rule (it says only that they place
/// "with simple heuristics" and no prediction); these are our readings, each
/// at most the task's global batch of GPUs (one sample per GPU at least) and,
/// for Capacity, its queue's unused quota, and always a placement of the
/// [`PlacementSet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlackBox {
    /// One GPU, `<1, 1>`. The default of Capacity: the paper's Fig. 13(c)
    /// gives Capacity a normalised latency of exactly 100 %, i.e. every task
    /// ran at its single-GPU speed.
    OneGpu,
    /// One whole node, `<1, G>` (the widest one-node placement allowed).
    Node,
    /// Every free GPU it may take: the largest placement free now (most
    /// GPUs, then fewest nodes); with nothing free, it waits for the largest
    /// allowed placement.
    AllFree,
}

impl BlackBox {
    /// The rule a black-box `variant` uses unless `blackbox` is set: one GPU
    /// for Capacity (see [`BlackBox::OneGpu`]), one whole node for FIFO,
    /// Min-Min and Weighted Fair (ours: of the three rules the one whose QoS
    /// is nearest the paper's Fig. 13, FIFO ≈ 1 / 1 / 1 %, Min-Min 31 / 13 /
    /// 3 %, Weighted Fair 65 / 10 / 5 % at 5 / 10 / 20 tasks/h). Measured on
    /// lab16 (24 h, table model, strict, seeds 1-3, `--sample-interval 0`), QoS % at 5 / 10 / 20
    /// tasks/h: `node` FIFO 90.4 / 28.5 / 4.5, Min-Min 91.2 / 33.7 / 4.8,
    /// Weighted Fair 91.8 / 31.6 / 4.5; `all-free` 78.9 / 70.1 / 8.3, 83.9 /
    /// 84.1 / 12.7, 82.7 / 81.4 / 10.2; `one-gpu` 85.7 / 83.5 / 56.1, 85.7 /
    /// 83.6 / 67.2, 85.7 / 83.6 / 63.9. Capacity (paper ≈ 91 / 8 / 6 %):
    /// `one-gpu` 84.0 / 75.5 / 38.8, `node` 88.0 / 62.9 / 26.7 (nearer the
    /// paper's QoS; `one-gpu` kept for the Fig. 13(c) latency evidence).
    pub fn default_for(variant: GenieVariant) -> BlackBox {
        if variant == GenieVariant::Capacity { BlackBox::OneGpu } else { BlackBox::Node }
    }
}

/// Options of the GENIE family.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GenieOptions {
    /// Which policy.
    pub variant: GenieVariant,
    /// Concentration weight of the cost (the paper's example: 0.4).
    pub theta: f64,
    /// Let later tasks start when the head's placement is not free (per
    /// queue for Capacity; Tetris always packs whatever fits, so it has no
    /// effect there).
    pub backfill: bool,
    /// Physical nodes for `<d_node, d_gpn>`: the fullest nodes that have room
    /// (best fit, keeps whole nodes free for wide tasks) instead of the spec's
    /// proposal, the emptiest (which spreads tasks over nodes).
    pub best_fit_nodes: bool,
    /// GENIE's reading of Algorithm 1 (only `genie` uses it).
    pub reading: Reading,
    /// The placements considered.
    pub placements: PlacementSet,
    /// The black-box placement (only the black-box variants use it).
    pub blackbox: BlackBox,
}

impl Default for GenieOptions {
    /// GENIE as the paper writes it: theta 0.4, strict, the emptiest nodes,
    /// the paper's placement set.
    fn default() -> Self {
        GenieOptions {
            variant: GenieVariant::Genie,
            theta: 0.4,
            backfill: false,
            best_fit_nodes: false,
            reading: Reading::Strict,
            placements: PlacementSet::Paper,
            blackbox: BlackBox::default_for(GenieVariant::Genie),
        }
    }
}

/// A scored placement: (d_node, d_gpn, latency ms, rate samples/s, CER).
type Cand = (u32, u32, f64, f64, f64);

/// The position of highest `score` among `v`; ties go to the earlier one,
/// as [`best_by`].
fn best_at(v: &mut dyn Iterator<Item = usize>, score: &dyn Fn(&usize) -> f64) -> Option<usize> {
    v.fold(None::<usize>, |best, c| match best {
        Some(b) if score(&b) >= score(&c) => Some(b),
        _ => Some(c),
    })
}

/// The candidate of highest `score`; ties go to the earlier one (fewer GPUs,
/// then fewer nodes: the enumeration order).
fn best_by(v: &mut dyn Iterator<Item = &Cand>, score: &dyn Fn(&Cand) -> f64) -> Option<Cand> {
    v.fold(None::<Cand>, |best, c| match best {
        Some(b) if score(&b) >= score(c) => Some(b),
        _ => Some(*c),
    })
}

/// A symmetric placement.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Choice {
    d_node: u32,
    d_gpn: u32,
    latency_ms: f64,
    key: f64,
    /// False when the task may not start now whatever is free (Capacity at
    /// its quota; Tetris with the placement not free).
    startable: bool,
}

/// An `f64` ordered by [`f64::total_cmp`] (the scan's sort order).
#[derive(Clone, Copy, Debug)]
struct TotalF64(f64);

impl PartialEq for TotalF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}

impl Eq for TotalF64 {}

impl PartialOrd for TotalF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TotalF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// What the waiting tasks of a group would run on. At any decision every
/// task of a group gets the same placement and startability, whatever the
/// free GPUs: that is what lets a decision look at one task per group.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    /// A black-box variant's task allowed these placements (enumeration
    /// order); the rule ([`BlackBox`]) and, for Capacity, the queue's unused
    /// quota pick one at each decision.
    BlackBox(Vec<(u32, u32)>),
    /// A predicting variant's picked placement `<d_node, d_gpn>`.
    Pick(u32, u32),
    /// GENIE's `available` reading for a task that can still meet its ECT:
    /// the task's scored placements (`d_node`, `d_gpn`, CER bits) and which
    /// of them meet its ECT now (at least one); the pick, made at each
    /// decision from the free placements, is the same for every task of the
    /// group and meets the ECT, so the key is never negative. (A task that
    /// can no longer meet it takes the best-CER placement whatever is free:
    /// it is filed under [`Slot::Pick`], as the strict reading files it.)
    Available { cands: Vec<(u32, u32, u64)>, meets: Vec<bool> },
    /// No positive predicted rate anywhere: one GPU, key +inf.
    Unpredicted,
}

/// A group of waiting tasks: one VC, one queue (Capacity: the task type;
/// otherwise empty), one [`Slot`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    vc: VcId,
    queue: String,
    slot: Slot,
}

/// Tasks in the scan's order: (filing key, task) -> (deadline, latency) in
/// ms, what GENIE's exact key `deadline - (now + latency)` reads (the
/// latency of the placement the set is for; NaN where the key is not GENIE's).
type Members = BTreeMap<(TotalF64, JobId), (f64, f64)>;

/// The tasks of a group in the scan's order.
#[derive(Debug, Default)]
struct Group {
    /// The filing key is the scan's key where that does not change between
    /// decisions (black-box and fixed-order variants), 0 for Tetris (its
    /// key, the packing score, is one per group), +inf for unpredicted
    /// tasks, and for GENIE `deadline - latency` (ms), which orders as the
    /// key `deadline - (now + latency)` up to rounding.
    members: Members,
    /// [`Slot::Available`]: for each placement (by position), the tasks
    /// filed by `deadline - latency` there (ms), as `members` for GENIE.
    by_pick: Vec<Members>,
    /// Largest `|deadline| + |latency|` (ms) of any task filed here (GENIE's
    /// rounding window; never lowered).
    magnitude: f64,
    /// [`Slot::Available`]: the positions of the placements that meet the
    /// ECT, best CER first (ties: the earlier), so the pick is the first free
    /// one, else the first; empty when a CER is NaN (the pick then takes
    /// [`best_at`]'s passes, whose `>=` is no order with NaN).
    ranked: Vec<usize>,
}

/// A group's first task at a decision: (key, task, group, placement,
/// startable).
type Head<'a> = (f64, JobId, &'a GroupKey, (u32, u32), bool);

/// A waiting task's scores, kept between decisions.
#[derive(Debug)]
struct Scored {
    group: GroupKey,
    /// Filing key (see [`Group::members`]).
    order: f64,
    /// ECT deadline and arrival, ms.
    deadline: f64,
    submit: f64,
    /// Predicted latency of the picked placement, ms (NaN: black-box or
    /// unpredicted).
    latency_ms: f64,
    /// Scored placements (predicting variants), kept for GENIE's re-picks.
    all: Vec<Cand>,
    /// GENIE: the first millisecond at which its pick may change.
    change: Option<u64>,
}

/// The waiting tasks of the indexed decision path, grouped so that a
/// decision costs O(groups × log tasks) instead of O(tasks × placements):
/// a task is scored once on arrival (its placements' rates, CER and
/// latency do not change while it waits), GENIE's pick is re-made only at
/// the milliseconds at which a placement stops meeting the task's ECT, and
/// each decision looks at the first task of each group (of the `available`
/// reading's groups only when the others leave the decision open).
#[derive(Debug, Default)]
struct Index {
    /// Tasks that arrived since the last decision (scored at the next).
    fresh: Vec<JobId>,
    scored: HashMap<JobId, Scored, WordState>,
    /// Every group but [`Slot::Available`]'s: a few per placement and VC.
    groups: BTreeMap<GroupKey, Group>,
    /// The [`Slot::Available`] groups (GENIE's `available` reading, tasks
    /// that can still meet their ECT): some hundreds under overload, visited
    /// only when the other groups' heads leave the decision open.
    available: BTreeMap<GroupKey, Group>,
    /// GENIE: (millisecond, task) of the next possible change of each pick.
    changes: BTreeSet<(u64, JobId)>,
    /// Waiting tasks not yet counted in `tasks_waited_while_gpus_free`, by
    /// (VC, Capacity queue: the task type; `None` for the other variants).
    uncounted: BTreeMap<(VcId, Option<String>), BTreeSet<JobId>>,
}

impl Index {
    /// Forgets every score (the models changed); arrivals stay counted.
    fn clear_scores(&mut self) {
        self.scored.clear();
        self.groups.clear();
        self.available.clear();
        self.changes.clear();
    }

    /// The map that holds the groups of `slot`.
    fn map(&mut self, slot: &Slot) -> &mut BTreeMap<GroupKey, Group> {
        if matches!(slot, Slot::Available { .. }) { &mut self.available } else { &mut self.groups }
    }

    fn file(&mut self, job: JobId, s: Scored) {
        let g = self.map(&s.group.slot).entry(s.group.clone()).or_default();
        if let Slot::Available { cands, meets } = &s.group.slot
            && g.members.is_empty()
        {
            // A new group (an emptied one is removed).
            let cer = |i: usize| f64::from_bits(cands[i].2);
            if cands.iter().all(|c| !f64::from_bits(c.2).is_nan()) {
                g.ranked = (0..cands.len()).filter(|&i| meets[i]).collect();
                // Stable: equal CERs (`>=` both ways, -0 with +0) keep
                // enumeration order, as `best_at` keeps the earlier.
                g.ranked.sort_by(|&a, &b| cer(b).partial_cmp(&cer(a)).unwrap_or(std::cmp::Ordering::Equal));
            }
        }
        g.members.insert((TotalF64(s.order), job), (s.deadline, s.latency_ms));
        g.magnitude = g.magnitude.max(s.deadline.abs() + s.latency_ms.abs());
        if let Slot::Available { .. } = s.group.slot {
            g.by_pick.resize_with(s.all.len(), BTreeMap::new);
            for (set, c) in g.by_pick.iter_mut().zip(&s.all) {
                set.insert((TotalF64(s.deadline - c.2), job), (s.deadline, c.2));
                g.magnitude = g.magnitude.max(s.deadline.abs() + c.2.abs());
            }
        }
        if let Some(t) = s.change {
            self.changes.insert((t, job));
        }
        self.scored.insert(job, s);
    }

    fn unfile(&mut self, job: JobId) -> Option<Scored> {
        let s = self.scored.remove(&job)?;
        let map = self.map(&s.group.slot);
        if let Some(g) = map.get_mut(&s.group) {
            g.members.remove(&(TotalF64(s.order), job));
            for (set, c) in g.by_pick.iter_mut().zip(&s.all) {
                set.remove(&(TotalF64(s.deadline - c.2), job));
            }
            if g.members.is_empty() {
                map.remove(&s.group);
            }
        }
        if let Some(t) = s.change {
            self.changes.remove(&(t, job));
        }
        Some(s)
    }

    /// The `uncounted` key of a task.
    fn count_key(view: &View<'_>, job: JobId, variant: GenieVariant) -> (VcId, Option<String>) {
        let spec = view.jobs.spec(job);
        let queue = match (&spec.task, variant) {
            (Some(t), GenieVariant::Capacity) => Some(task_type(&t.kind).to_string()),
            _ => None,
        };
        (spec.vc, queue)
    }

    fn uncount(&mut self, view: &View<'_>, job: JobId, variant: GenieVariant) {
        if let Some(set) = self.uncounted.get_mut(&Self::count_key(view, job, variant)) {
            set.remove(&job);
        }
    }
}

/// The first whole millisecond `t` at which GENIE's test `t + latency_ms <=
/// deadline_ms` (in f64, as [`GeniePolicy::pick`] computes it) fails:
/// `Some(0)` if it fails at once, `None` if it holds up to 2^53 ms (the
/// test is monotone in `t`, so a binary search finds the exact boundary).
fn first_miss(latency_ms: f64, deadline_ms: f64) -> Option<u64> {
    const LIMIT: u64 = 1 << 53;
    let holds = |t: u64| t as f64 + latency_ms <= deadline_ms;
    if !holds(0) {
        return Some(0);
    }
    if holds(LIMIT) {
        return None;
    }
    // Bracket the boundary from `deadline - latency` (within a few ms of
    // it), doubling the step, then bisect: the same boundary as bisecting
    // [0, 2^53], in a few steps instead of 53.
    let guess = (deadline_ms - latency_ms).floor();
    let guess = if guess > 0.0 { (guess as u64).min(LIMIT) } else { 0 };
    let (mut lo, mut hi) = (guess, guess);
    let mut step = 1;
    if holds(guess) {
        while holds(hi) {
            lo = hi;
            hi = hi.saturating_add(step).min(LIMIT);
            step *= 2;
        }
    } else {
        while !holds(lo) {
            hi = lo;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) { lo = mid } else { hi = mid }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::first_miss;

    /// `first_miss` as it was: bisection over [0, 2^53].
    fn first_miss_bisect(latency_ms: f64, deadline_ms: f64) -> Option<u64> {
        const LIMIT: u64 = 1 << 53;
        let holds = |t: u64| t as f64 + latency_ms <= deadline_ms;
        if !holds(0) {
            return Some(0);
        }
        if holds(LIMIT) {
            return None;
        }
        let (mut lo, mut hi) = (0u64, LIMIT);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if holds(mid) { lo = mid } else { hi = mid }
        }
        Some(hi)
    }

    #[test]
    fn first_miss_finds_the_boundary_bisection_finds() {
        // Latencies and deadlines to the sub-millisecond, near whole
        // milliseconds, at the scale of a day and near 2^53 (where f64
        // steps by 1 ms and more), and the edge values.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut cases = vec![
            (0.0, 0.0),
            (1.0, 0.0),
            (0.0, 1.0),
            (0.5, 1.0),
            (1e-300, 5.0),
            (3.0, 2f64.powi(53)),
            (0.25, 2f64.powi(53) + 2.0),
            (1.0, 2f64.powi(54)),
            (f64::NAN, 10.0),
            (10.0, f64::INFINITY),
            (f64::INFINITY, 10.0),
            (1.0, -5.0),
        ];
        for _ in 0..20_000 {
            let scale = [1e3, 1e6, 1e8, 1e11, 2f64.powi(53)][(next() % 5) as usize];
            let u = |v: u64| (v >> 11) as f64 / (1u64 << 53) as f64;
            let latency = u(next()) * scale * 0.1;
            let mut deadline = u(next()) * scale;
            if next() % 3 == 0 {
                deadline = deadline.round() + [0.0, 0.5, -0.5, 1e-9][(next() % 4) as usize];
            }
            cases.push((latency, deadline));
        }
        for (l, d) in cases {
            assert_eq!(first_miss(l, d), first_miss_bisect(l, d), "latency {l}, deadline {d}");
        }
    }
}

/// Capacity's GPU quota of each of the six task types on `total` GPUs (see
/// [`GenieVariant::Capacity`]), in [`TASK_MODELS`] order.
pub fn capacity_quotas(total: u32) -> [u32; 6] {
    let (share, rem) = (total / 6, total % 6);
    std::array::from_fn(|i| (share + u32::from((i as u32) < rem)).max(1))
}

/// Capacity's quota of `task_type` (a [`TASK_MODELS`] name) on `total` GPUs.
fn capacity_quota(task_type: &str, total: u32) -> u32 {
    let q = capacity_quotas(total);
    TASK_MODELS.iter().position(|(n, _)| *n == task_type).map_or((total / 6).max(1), |i| q[i])
}

/// The task type (model) of a task kind: `resnet50-train` -> `resnet50`.
fn task_type(kind: &str) -> &str {
    kind.rsplit_once('-').map_or(kind, |(n, _)| n)
}

/// Whether `<d_node, d_gpn>` is free now in `vc`: `d_node` nodes with
/// `d_gpn` free GPUs each.
fn fits(view: &View<'_>, vc: VcId, d_node: u32, d_gpn: u32) -> bool {
    view.cluster.partition(vc).nodes_by_free_desc().filter(|&(_, f)| f >= d_gpn).take(d_node as usize).count()
        == d_node as usize
}

/// [`fits`] for many placements at one decision: each VC's free GPUs per
/// node (nodes with any free, most first) are read once. The nodes with at
/// least `d_gpn` free are a prefix of that order, so `<d_node, d_gpn>` fits
/// when the `d_node`-th has `d_gpn` free.
#[derive(Debug, Default)]
struct FreeNodes(Vec<Option<Vec<u32>>>);

impl FreeNodes {
    fn fits(&mut self, view: &View<'_>, vc: VcId, d_node: u32, d_gpn: u32) -> bool {
        let i = vc.index();
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        let desc =
            self.0[i].get_or_insert_with(|| view.cluster.partition(vc).nodes_by_free_desc().map(|(_, f)| f).collect());
        d_node == 0 || desc.get(d_node as usize - 1).is_some_and(|&f| f >= d_gpn)
    }
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

/// The truth a GENIE-family policy predicts from under `--predictor oracle`
/// or `noisy:P` ([`GeniePolicy::with_predictor`]).
struct Truth {
    predictor: PredictorKind,
    seed: u64,
    rates: Box<dyn RateModel>,
}

/// The GPU type a task of partition `vc` is predicted on: its first node's.
fn partition_gpu_type(cluster: &Cluster, vc: VcId) -> &str {
    cluster.partition(vc).nodes.first().map_or("", |&n| cluster.node(n).gpu_type.as_str())
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
    /// Waiting tasks.
    pending: BTreeSet<JobId>,
    /// Decide by scoring every waiting task at every decision (the
    /// reference path); otherwise through [`Index`].
    scan: bool,
    /// The waiting tasks grouped by what they would run on (see [`Index`]).
    index: Index,
    /// Predicted latency (ms) of each launched task on its placement.
    predicted: HashMap<JobId, f64>,
    /// Tasks that started on a borrowed model.
    borrowed: u64,
    online: Option<OnlineProfiling>,
    /// Unprofiled task types seen so far: (kind, type name, model, inference).
    missing: BTreeSet<(String, String, String, bool)>,
    profiled_online: u64,
    /// Tasks started without a positive predicted rate anywhere.
    unpredicted: u64,
    /// Running tasks: (task type, GPUs), for Capacity's quotas.
    running: BTreeMap<JobId, (String, u32)>,
    /// Predictions from the simulator's truth instead of the fitted models
    /// (`--predictor oracle` or `noisy:P`); `None`: the fitted models.
    truth: Option<Truth>,
    /// Tasks that, at some decision that left them waiting, had a free GPU
    /// in their partition they could use (for Capacity: within their queue's
    /// quota).
    waited_free: BTreeSet<JobId>,
}

impl GeniePolicy {
    /// A policy with fitted `profiles` (see [`profile`]).
    pub fn new(opts: GenieOptions, profiles: GenieProfiles, db: Arc<ProfileDb>) -> Self {
        GeniePolicy {
            opts,
            profiles,
            db,
            pending: BTreeSet::new(),
            scan: false,
            index: Index::default(),
            predicted: HashMap::new(),
            borrowed: 0,
            online: None,
            missing: Default::default(),
            profiled_online: 0,
            unpredicted: 0,
            running: BTreeMap::new(),
            waited_free: BTreeSet::new(),
            truth: None,
        }
    }

    /// Predicts from the simulator's truth instead of the fitted models
    /// ([`crate::policy::predictor`]): `predictor` `oracle` or `noisy:P`,
    /// the run's master `seed` (the noise's streams) and a copy of the
    /// run's rate model `rates` (what the engine runs tasks at).
    /// [`PredictorKind::Fitted`] keeps the fitted models.
    pub fn with_predictor(mut self, predictor: PredictorKind, seed: u64, rates: Box<dyn RateModel>) -> Self {
        self.truth = (!predictor.is_fitted()).then_some(Truth { predictor, seed, rates });
        self
    }

    /// Decides by scoring every waiting task at every decision (GENIE's
    /// Algorithm 1 as written, O(waiting tasks × placements) a decision)
    /// instead of through the index: the reference the indexed path is
    /// tested against, and the baseline of `benches/genie.rs`. Identical
    /// decisions either way.
    pub fn with_full_scan(mut self) -> Self {
        self.scan = true;
        self.index = Index::default();
        self
    }

    /// Profiles missing task types when the cluster is idle.
    pub fn with_online_profiling(mut self, online: OnlineProfiling) -> Self {
        self.online = Some(online);
        self
    }

    /// Profiles every missing type seen so far, if the cluster is idle;
    /// true when it profiled any.
    fn profile_missing(&mut self, view: &View<'_>) -> bool {
        let Some(op) = &self.online else { return false };
        if self.missing.is_empty() || view.cluster.free_gpus() != u64::from(view.cluster.total_gpus()) {
            return false;
        }
        let truth = GroundTruth::with(&self.db, &op.gpu_type, op.config.truth);
        for (kind, name, model, inference) in std::mem::take(&mut self.missing) {
            let mut rng = crate::rng::stream(op.seed, &format!("genie.profiler.online.{kind}"));
            let t = profile_type(&truth, &name, &model, inference, op.nodes, op.gpus_per_node, op.config, &mut rng);
            self.profiles.types.insert(kind, t);
            self.profiled_online += 1;
        }
        true
    }

    fn type_profile(&self, view: &View<'_>, job: JobId) -> Option<&TypeProfile> {
        let spec = view.jobs.spec(job);
        let task = spec.task.as_deref()?;
        self.profiles.for_kind(&task.kind, spec.model().unwrap_or(""), task.inference, &self.db)
    }

    /// GENIE's cost of `<d_node, d_gpn>` on a platform of N × G.
    fn cost(&self, d_node: u32, d_gpn: u32, nodes: u32, gpn: u32) -> f64 {
        f64::from(d_node * d_gpn) / f64::from(nodes * gpn) + self.opts.theta * f64::from(d_node) / f64::from(nodes)
    }

    /// GPUs of `task_type` in use now, and its Capacity quota in `vc`.
    fn quota_headroom(&self, view: &View<'_>, vc: VcId, task_type: &str) -> u32 {
        let used: u32 = self.running.values().filter(|(t, _)| t == task_type).map(|(_, n)| n).sum();
        capacity_quota(task_type, view.cluster.partition(vc).gpus_total).saturating_sub(used)
    }

    /// The black-box placement of a task (see [`BlackBox`]) of at most `cap`
    /// GPUs, from `set`; `None` when no placement is allowed (`cap` 0).
    fn black_box(&self, view: &View<'_>, vc: VcId, set: &[(u32, u32)], cap: u32) -> Option<(u32, u32)> {
        let allowed = || set.iter().copied().filter(|&(n, g)| n * g <= cap);
        // Most GPUs, then fewest nodes.
        let widest = |it: &mut dyn Iterator<Item = (u32, u32)>| {
            it.max_by(|a, b| (a.0 * a.1).cmp(&(b.0 * b.1)).then(b.0.cmp(&a.0)))
        };
        match self.opts.blackbox {
            BlackBox::OneGpu => allowed().find(|&p| p == (1, 1)),
            BlackBox::Node => widest(&mut allowed().filter(|&(n, _)| n == 1)),
            BlackBox::AllFree => {
                widest(&mut allowed().filter(|&(n, g)| fits(view, vc, n, g))).or_else(|| widest(&mut allowed()))
            }
        }
    }

    /// Scores the placements of a waiting task and returns its choice and
    /// queue key (smaller first).
    fn choose(&self, view: &View<'_>, job: JobId, vc: VcId) -> Option<Choice> {
        let spec = view.jobs.spec(job);
        let task = spec.task.as_deref()?;
        let prof = self.type_profile(view, job);
        let p = view.cluster.partition(vc);
        let (nodes, gpn) = (p.nodes.len() as u32, p.max_node_gpus);
        let now = view.now.as_ms() as f64;
        let deadline = task.deadline.as_ms() as f64;
        let submit = spec.submit.as_ms() as f64;
        let set = self.allowed(task, view.cluster, vc);
        let variant = self.opts.variant;
        if variant.black_box() {
            // No prediction: the placement by rule, the order by arrival
            // and ECT only. The predicted latency is kept for the
            // prediction-error report, not used.
            let cap = if variant == GenieVariant::Capacity {
                self.quota_headroom(view, vc, task_type(&task.kind))
            } else {
                u32::MAX
            };
            let key = match variant {
                GenieVariant::MinMin => deadline,
                GenieVariant::WeightedFair => 0.5 * submit + 0.5 * deadline,
                _ => submit,
            };
            let Some((d_node, d_gpn)) = self.black_box(view, vc, &set, cap) else {
                return Some(Choice { d_node: 1, d_gpn: 1, latency_ms: f64::NAN, key, startable: false });
            };
            let gpu_type = partition_gpu_type(view.cluster, vc);
            let latency_ms = self.predict(spec, job, prof, gpu_type, d_node, d_gpn).map_or(f64::NAN, |p| p.0);
            return Some(Choice { d_node, d_gpn, latency_ms, key, startable: true });
        }
        if prof.is_none() && self.truth.is_none() {
            return None;
        }
        let all = self.candidates(spec, job, prof, &set, nodes, gpn, partition_gpu_type(view.cluster, vc));
        if all.is_empty() {
            // The model predicts no positive rate anywhere (a degenerate
            // fit): run the task on one GPU, after every predictable task,
            // rather than never. Counted as `tasks_without_prediction`.
            return Some(Choice { d_node: 1, d_gpn: 1, latency_ms: f64::NAN, key: f64::INFINITY, startable: true });
        }
        let pick = self.pick(&all, now, deadline, &|n, g| fits(view, vc, n, g))?;
        let mut startable = true;
        let key = match variant {
            GenieVariant::Genie => deadline - (now + pick.2),
            GenieVariant::FifoCer => submit,
            GenieVariant::MinMinPred => deadline,
            GenieVariant::WeightedFairCer => 0.5 * submit + 0.5 * deadline,
            GenieVariant::TetrisPerfSrtf | GenieVariant::TetrisCerSrtf => pick.2,
            _ => match self.alignment(view, vc, pick.0, pick.1) {
                // Highest alignment first.
                Some(a) => -a,
                None => {
                    startable = false;
                    f64::INFINITY
                }
            },
        };
        Some(Choice { d_node: pick.0, d_gpn: pick.1, latency_ms: pick.2, key, startable })
    }

    /// The placements of the set on partition `vc` (its node count ×
    /// its largest node's GPUs) that give `task` at least one sample per GPU
    /// and that the empty partition can hold (`d_node` nodes of at least
    /// `d_gpn` GPUs), in enumeration order. On a partition of equal nodes
    /// every placement of the set fits; on one of unequal nodes (a nodes
    /// file: 1 + 4 + 2 GPUs) `<2, 4>` would never be free, and a variant
    /// that picked it would wait for ever.
    fn allowed(&self, task: &TaskSpec, cluster: &Cluster, vc: VcId) -> Vec<(u32, u32)> {
        let p = cluster.partition(vc);
        let (nodes, gpn) = (p.nodes.len() as u32, p.max_node_gpus);
        let uniform = u64::from(p.gpus_total) == u64::from(nodes) * u64::from(gpn);
        // Node sizes, largest first: `<d_node, d_gpn>` fits the empty
        // partition when the `d_node`-th largest node has `d_gpn` GPUs.
        let sizes: Vec<u32> = if uniform {
            Vec::new()
        } else {
            let mut s: Vec<u32> = p.nodes.iter().map(|&n| cluster.node(n).gpus).collect();
            s.sort_unstable_by(|a, b| b.cmp(a));
            s
        };
        self.opts
            .placements
            .placements(nodes, gpn)
            .into_iter()
            .filter(|&(n, g)| u64::from(n * g) <= u64::from(task.global_bsz))
            .filter(|&(n, g)| uniform || sizes.get(n as usize - 1).is_some_and(|&s| s >= g))
            .collect()
    }

    /// The scored placements of task `job` (those of `set` with a positive
    /// predicted rate), in `set`'s order: what [`GeniePolicy::pick`] chooses
    /// from. Depends only on the task, its type's model `prof` (or the
    /// truth, [`GeniePolicy::with_predictor`], on `gpu_type`) and the
    /// partition's shape (`nodes` × `gpn`), so the index computes it once per task.
    #[allow(clippy::too_many_arguments)]
    fn candidates(
        &self,
        spec: &JobSpec,
        job: JobId,
        prof: Option<&TypeProfile>,
        set: &[(u32, u32)],
        nodes: u32,
        gpn: u32,
        gpu_type: &str,
    ) -> Vec<Cand> {
        let mut all: Vec<Cand> = Vec::new();
        for &(d_node, d_gpn) in set {
            let Some((lat, pr)) = self.predict(spec, job, prof, gpu_type, d_node, d_gpn) else { continue };
            all.push((d_node, d_gpn, lat, pr, pr / self.cost(d_node, d_gpn, nodes, gpn)));
        }
        all
    }

    /// The predicted latency, ms, and rate, samples/s, of task `job` on
    /// `<d_node, d_gpn>` GPUs of `gpu_type`; `None` when it has no positive
    /// predicted rate there (or is not a task). By default from its type's
    /// fitted model `prof` (GENIE Eqs. 4–8, nu = 0); with a truth
    /// ([`GeniePolicy::with_predictor`]): the task's work (its single-GPU
    /// latency, ms) over the rate the run's rate model gives it on
    /// `d_node` × `d_gpn` (what the engine runs it at), times the
    /// predictor's error (1 for the oracle), and the rate it implies.
    fn predict(
        &self,
        spec: &JobSpec,
        job: JobId,
        prof: Option<&TypeProfile>,
        gpu_type: &str,
        d_node: u32,
        d_gpn: u32,
    ) -> Option<(f64, f64)> {
        let task = spec.task.as_deref()?;
        let samples = f64::from(task.global_bsz) * task.iterations as f64;
        let Some(truth) = &self.truth else {
            let pr = prof?.rate(task.global_bsz, d_node, d_gpn)?;
            return Some((samples / pr * 1000.0, pr));
        };
        let rate = truth.rates.rate_on(spec, gpu_type, &vec![d_gpn; d_node as usize])?;
        let factor = truth.predictor.factor(truth.seed, job, &format!("{d_node}x{d_gpn}"))?;
        let lat = spec.duration_ms as f64 / rate * factor;
        (lat.is_finite() && lat > 0.0).then(|| (lat, samples / lat * 1000.0))
    }

    /// The placement a predicting variant picks from `all` (not empty) at
    /// `now` (ms) for a task due at `deadline` (ms); `free(d_node, d_gpn)`
    /// says whether a placement is free now (read only by GENIE's
    /// `available` reading). `None` for the black-box variants.
    fn pick(&self, all: &[Cand], now: f64, deadline: f64, free: &dyn Fn(u32, u32) -> bool) -> Option<Cand> {
        match self.opts.variant {
            GenieVariant::Genie => {
                let meets = |c: &&Cand| now + c.2 <= deadline;
                let free_meets = match self.opts.reading {
                    Reading::Strict => None,
                    Reading::Available => best_by(&mut all.iter().filter(meets).filter(|c| free(c.0, c.1)), &|c| c.4),
                };
                free_meets
                    .or_else(|| best_by(&mut all.iter().filter(meets), &|c| c.4))
                    .or_else(|| best_by(&mut all.iter(), &|c| c.4))
            }
            GenieVariant::FifoCer
            | GenieVariant::WeightedFairCer
            | GenieVariant::TetrisCer
            | GenieVariant::TetrisCerSrtf => best_by(&mut all.iter(), &|c| c.4),
            GenieVariant::MinMinPred => best_by(&mut all.iter(), &|c| -c.2),
            GenieVariant::TetrisPerf | GenieVariant::TetrisPerfSrtf => best_by(&mut all.iter(), &|c| c.3),
            GenieVariant::GenieFifo | GenieVariant::Capacity | GenieVariant::MinMin | GenieVariant::WeightedFair => {
                None
            }
        }
    }

    /// Tetris's packing score of `<d_node, d_gpn>` on the GPUs it would get
    /// now (Grandl et al., SIGCOMM 2014 §3: the dot product of the task's
    /// demand vector and the free-resource vector, each resource normalised
    /// by capacity): Σ over its nodes of (d_gpn / G) × (free GPUs of the
    /// node / G); `None` when it is not free.
    fn alignment(&self, view: &View<'_>, vc: VcId, d_node: u32, d_gpn: u32) -> Option<f64> {
        let gpus = physical(view.cluster, vc, d_node, d_gpn, self.opts.best_fit_nodes)?;
        let g = f64::from(view.cluster.partition(vc).max_node_gpus);
        let mut nodes: Vec<crate::ids::NodeId> = gpus.iter().map(|&x| view.cluster.node_of(x)).collect();
        nodes.dedup();
        Some(nodes.iter().map(|&n| f64::from(d_gpn) / g * f64::from(view.cluster.node_free(n)) / g).sum())
    }

    /// The bookkeeping of a launch of `job` on `gpus` GPUs whose predicted
    /// latency is `latency_ms` (NaN when unpredicted): the prediction-error
    /// record, the borrowed-profile count and the running set (Capacity's
    /// quotas). Both decision paths call it.
    fn note_launch(&mut self, view: &View<'_>, job: JobId, latency_ms: f64, gpus: u32) {
        if latency_ms.is_finite() {
            self.predicted.insert(job, latency_ms);
        } else {
            self.unpredicted += 1;
        }
        if let Some(t) = &view.jobs.spec(job).task {
            if !self.profiles.types.contains_key(&t.kind) {
                self.borrowed += 1;
            }
            self.running.insert(job, (task_type(&t.kind).to_string(), gpus));
        }
    }

    /// One decision by scoring every waiting task (GENIE's Algorithm 1 as
    /// written: O(waiting tasks × placements)); the reference the indexed
    /// path ([`GeniePolicy::decide_indexed`]) must agree with.
    fn decide_scan(&mut self, view: &View<'_>) -> Decision {
        let mut scored: Vec<(f64, JobId, Choice, VcId)> = self
            .pending
            .iter()
            .filter_map(|&j| {
                let vc = view.jobs.spec(j).vc;
                self.choose(view, j, vc).map(|c| (c.key, j, c, vc))
            })
            .collect();
        scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Capacity's queues are independent: a blocked head blocks only its
        // own type's queue. Every other variant has one queue.
        let queue_of = |job: JobId| -> &str {
            match (&view.jobs.spec(job).task, self.opts.variant) {
                (Some(t), GenieVariant::Capacity) => task_type(&t.kind),
                _ => "",
            }
        };
        let mut blocked: BTreeSet<&str> = BTreeSet::new();
        for (_, job, c, vc) in &scored {
            let (job, vc) = (*job, *vc);
            if blocked.contains(queue_of(job)) {
                continue;
            }
            let gpus = if c.startable {
                physical(view.cluster, vc, c.d_node, c.d_gpn, self.opts.best_fit_nodes)
            } else {
                None
            };
            if let Some(gpus) = gpus {
                self.pending.remove(&job);
                self.note_launch(view, job, c.latency_ms, c.d_node * c.d_gpn);
                return Decision::Launch { job, gpus };
            }
            if !self.opts.backfill {
                blocked.insert(queue_of(job));
            }
        }
        // Everything pending waits until the next event: count those that
        // could have used a free GPU.
        for &j in &self.pending {
            if !self.waited_free.contains(&j) && self.could_use_free(view, j) {
                self.waited_free.insert(j);
            }
        }
        Decision::Wait
    }

    /// Scores a task that arrived (or whose model changed) and files it in
    /// its group ([`Index`]).
    fn score(&mut self, view: &View<'_>, job: JobId) {
        let now = view.now.as_ms() as f64;
        let spec = view.jobs.spec(job);
        let Some(task) = spec.task.as_deref() else { return };
        let vc = spec.vc;
        let p = view.cluster.partition(vc);
        let (nodes, gpn) = (p.nodes.len() as u32, p.max_node_gpus);
        let deadline = task.deadline.as_ms() as f64;
        let submit = spec.submit.as_ms() as f64;
        let set = self.allowed(task, view.cluster, vc);
        let variant = self.opts.variant;
        let queue = if variant == GenieVariant::Capacity { task_type(&task.kind).to_string() } else { String::new() };
        let (slot, order, latency_ms, all, change) = if variant.black_box() {
            // The same keys as `choose`.
            let key = match variant {
                GenieVariant::MinMin => deadline,
                GenieVariant::WeightedFair => 0.5 * submit + 0.5 * deadline,
                _ => submit,
            };
            (Slot::BlackBox(set), key, f64::NAN, Vec::new(), None)
        } else {
            let prof = self.type_profile(view, job);
            if prof.is_none() && self.truth.is_none() {
                return;
            }
            let all = self.candidates(spec, job, prof, &set, nodes, gpn, partition_gpu_type(view.cluster, vc));
            let (slot, order, latency_ms, change) = self.slot_of(&all, now, deadline, submit);
            (slot, order, latency_ms, all, change)
        };
        let group = GroupKey { vc, queue, slot };
        self.index.file(job, Scored { group, order, deadline, submit, latency_ms, all, change });
    }

    /// A predicting variant's group slot for a task with candidates `all`
    /// at `now` (ms): the slot, the order key within the group, the picked
    /// placement's latency (ms), and (GENIE) the first whole millisecond at
    /// which one of the placements meeting the ECT now stops meeting it (the
    /// pick may change then). The same arithmetic as [`GeniePolicy::choose`].
    fn slot_of(&self, all: &[Cand], now: f64, deadline: f64, submit: f64) -> (Slot, f64, f64, Option<u64>) {
        if all.is_empty() {
            return (Slot::Unpredicted, f64::INFINITY, f64::NAN, None);
        }
        let variant = self.opts.variant;
        if variant == GenieVariant::Genie
            && self.opts.reading == Reading::Available
            && all.iter().any(|c| now + c.2 <= deadline)
        {
            // The pick waits for the decision's free placements; filed by id.
            // (With no placement meeting the ECT, the pick is the best-CER
            // one whatever is free, as in the strict reading, below.)
            let meets: Vec<bool> = all.iter().map(|c| now + c.2 <= deadline).collect();
            let cands = all.iter().map(|c| (c.0, c.1, c.4.to_bits())).collect();
            let change = all.iter().filter(|c| now + c.2 <= deadline).filter_map(|c| first_miss(c.2, deadline)).min();
            return (Slot::Available { cands, meets }, 0.0, f64::NAN, change);
        }
        // Strict: the pick does not read the free placements.
        let Some(pick) = self.pick(all, now, deadline, &|_, _| false) else {
            return (Slot::Unpredicted, f64::INFINITY, f64::NAN, None);
        };
        let order = match variant {
            // Orders as `deadline - (now + latency)` up to rounding; the
            // exact key is computed at each decision (`genie_head`).
            GenieVariant::Genie => deadline - pick.2,
            GenieVariant::FifoCer => submit,
            GenieVariant::MinMinPred => deadline,
            GenieVariant::WeightedFairCer => 0.5 * submit + 0.5 * deadline,
            GenieVariant::TetrisPerfSrtf | GenieVariant::TetrisCerSrtf => pick.2,
            // Tetris: one key per group (the packing score), then task id.
            _ => 0.0,
        };
        let change = if variant == GenieVariant::Genie {
            all.iter().filter(|c| now + c.2 <= deadline).filter_map(|c| first_miss(c.2, deadline)).min()
        } else {
            None
        };
        (Slot::Pick(pick.0, pick.1), order, pick.2, change)
    }

    /// GENIE: re-picks the placement of every task whose meeting set changed
    /// by `now` (ms).
    fn repick(&mut self, now_ms: u64) {
        let now = now_ms as f64;
        while let Some(&(t, job)) = self.index.changes.first()
            && t <= now_ms
        {
            let Some(mut s) = self.index.unfile(job) else { continue };
            let (slot, order, latency_ms, change) = self.slot_of(&s.all, now, s.deadline, s.submit);
            s.group.slot = slot;
            s.order = order;
            s.latency_ms = latency_ms;
            s.change = change;
            self.index.file(job, s);
        }
    }

    /// The first task of a GENIE group by the exact key `deadline - (now +
    /// latency)` (ms) and then task id, as the scan sorts. Members are filed
    /// by `deadline - latency`; the two orders differ only by rounding, at
    /// most 4 u (|deadline| + |latency| + now) with u = 2^-53, far below the
    /// window `e` used here, so every member that could come first is
    /// within `4 e` of the best one's filing key.
    /// `at`: the position of the placement in [`Slot::Available`] (its
    /// ordered set and latency), `None` for the picked placement.
    fn genie_head(g: &Group, now: f64, at: Option<usize>) -> Option<(f64, JobId)> {
        let e = 1e-12 * (1.0 + now.abs() + g.magnitude);
        let mut best: Option<(f64, JobId, f64)> = None;
        let set = match at {
            Some(i) => g.by_pick.get(i)?,
            None => &g.members,
        };
        for (&(TotalF64(order), job), &(deadline, latency_ms)) in set {
            if let Some((_, _, filed)) = best
                && order > filed + 4.0 * e
            {
                break;
            }
            let key = deadline - (now + latency_ms);
            if best.is_none_or(|(k, j, _)| key.total_cmp(&k).then(job.cmp(&j)).is_lt()) {
                best = Some((key, job, order));
            }
        }
        best.map(|(k, j, _)| (k, j))
    }

    /// The head of a group that is not [`Slot::Available`]'s (see
    /// [`GeniePolicy::decide_indexed`]): its first task and that task's key,
    /// placement and startability at this decision.
    fn head<'a>(&self, view: &View<'_>, gk: &'a GroupKey, g: &Group, now: f64) -> Option<Head<'a>> {
        let variant = self.opts.variant;
        let (key, job) = match &gk.slot {
            Slot::Pick(..) if variant == GenieVariant::Genie => Self::genie_head(g, now, None)?,
            _ => g.members.first_key_value().map(|(&(TotalF64(k), j), _)| (k, j))?,
        };
        let (key, shape, startable) = match &gk.slot {
            Slot::BlackBox(set) => {
                let cap = if variant == GenieVariant::Capacity {
                    self.quota_headroom(view, gk.vc, &gk.queue)
                } else {
                    u32::MAX
                };
                match self.black_box(view, gk.vc, set, cap) {
                    Some(shape) => (key, shape, true),
                    None => (key, (1, 1), false),
                }
            }
            &Slot::Pick(n, g) if matches!(variant, GenieVariant::TetrisPerf | GenieVariant::TetrisCer) => {
                match self.alignment(view, gk.vc, n, g) {
                    Some(a) => (-a, (n, g), true),
                    None => (f64::INFINITY, (n, g), false),
                }
            }
            &Slot::Pick(n, g) => (key, (n, g), true),
            Slot::Available { .. } | Slot::Unpredicted => (key, (1, 1), true),
        };
        Some((key, job, gk, shape, startable))
    }

    /// The head of a [`Slot::Available`] group: the group's pick from the
    /// placements free now (the best-CER free one that meets the ECT, else
    /// the best-CER one that meets it), then the first task of that
    /// placement's set. With `free_only` (backfill), `None` when the pick is
    /// not free: such a head neither launches nor blocks.
    fn available_head<'a>(
        gk: &'a GroupKey,
        g: &Group,
        now: f64,
        free: &mut FreeNodes,
        view: &View<'_>,
        free_only: bool,
    ) -> Option<Head<'a>> {
        let Slot::Available { cands, meets } = &gk.slot else { return None };
        let mut is_free = |i: usize| free.fits(view, gk.vc, cands[i].0, cands[i].1);
        let i = if let Some(&first) = g.ranked.first() {
            // The same pick as the passes below, in one.
            match g.ranked.iter().copied().find(|&i| is_free(i)) {
                Some(i) => i,
                None if free_only => return None,
                None => first,
            }
        } else {
            let cer = |i: &usize| f64::from_bits(cands[*i].2);
            let met = || (0..cands.len()).filter(|&i| meets[i]);
            best_at(&mut met().filter(|&i| is_free(i)), &cer)
                .or_else(|| best_at(&mut met(), &cer))
                .or_else(|| best_at(&mut (0..cands.len()), &cer))?
        };
        if free_only && !is_free(i) {
            return None;
        }
        let (key, job) = Self::genie_head(g, now, Some(i))?;
        Some((key, job, gk, (cands[i].0, cands[i].1), true))
    }

    /// The scan's loop over `heads` (in the scan's order): the first that
    /// launches, as (task, GPUs, d_node, d_gpn); without backfill a head
    /// that does not launch blocks its queue (`blocked`, kept across calls).
    fn walk<'a>(
        &self,
        view: &View<'_>,
        heads: &[Head<'a>],
        blocked: &mut BTreeSet<&'a str>,
    ) -> Option<(JobId, Vec<GpuId>, u32, u32)> {
        for &(_, job, gk, (d_node, d_gpn), startable) in heads {
            if blocked.contains(gk.queue.as_str()) {
                continue;
            }
            let gpus =
                if startable { physical(view.cluster, gk.vc, d_node, d_gpn, self.opts.best_fit_nodes) } else { None };
            if let Some(gpus) = gpus {
                return Some((job, gpus, d_node, d_gpn));
            }
            if !self.opts.backfill {
                blocked.insert(gk.queue.as_str());
            }
        }
        None
    }

    /// One decision through the [`Index`]: each group's first task and its
    /// placement at this decision, then the scan's loop over those heads
    /// only. Identical to [`GeniePolicy::decide_scan`]: every task of a group
    /// gets the same placement and startability, so the first task of the
    /// scan's order that launches is the first of its group, and a queue
    /// blocks at its first task, which heads its group.
    fn decide_indexed(&mut self, view: &View<'_>) -> Decision {
        let now_ms = view.now.as_ms();
        let now = now_ms as f64;
        for job in std::mem::take(&mut self.index.fresh) {
            self.score(view, job);
        }
        self.repick(now_ms);
        let variant = self.opts.variant;
        // Every group's head, then the scan's loop over them in the scan's
        // order. The `available` groups' heads all have keys >= +0 (their
        // picks meet the ECT), so they come after every negative key: when
        // the loop over the other heads with negative keys launches, or
        // blocks GENIE's one queue, they cannot change the decision and are
        // not visited (under overload, most decisions).
        let mut heads: Vec<Head<'_>> =
            self.index.groups.iter().filter_map(|(gk, g)| self.head(view, gk, g, now)).collect();
        heads.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let negative = heads.partition_point(|h| h.0.total_cmp(&0.0).is_lt());
        let mut blocked: BTreeSet<&str> = BTreeSet::new();
        let mut launch = self.walk(view, &heads[..negative], &mut blocked);
        if launch.is_none() {
            // Only GENIE files `available` groups, all in its one queue "".
            if !self.index.available.is_empty() && !blocked.contains("") {
                let mut free = FreeNodes::default();
                let backfill = self.opts.backfill;
                heads.extend(
                    self.index
                        .available
                        .iter()
                        .filter_map(|(gk, g)| Self::available_head(gk, g, now, &mut free, view, backfill)),
                );
                debug_assert!(heads[negative..].iter().all(|h| h.0.total_cmp(&0.0).is_ge()));
                heads[negative..].sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            }
            launch = self.walk(view, &heads[negative..], &mut blocked);
        }
        drop(heads);
        if let Some((job, gpus, d_node, d_gpn)) = launch {
            let s = self.index.unfile(job);
            self.index.uncount(view, job, variant);
            self.pending.remove(&job);
            let latency_ms = match s.as_ref().map(|s| &s.group.slot) {
                Some(Slot::BlackBox(_)) => {
                    let spec = view.jobs.spec(job);
                    let gpu_type = partition_gpu_type(view.cluster, spec.vc);
                    self.predict(spec, job, self.type_profile(view, job), gpu_type, d_node, d_gpn)
                        .map_or(f64::NAN, |p| p.0)
                }
                Some(Slot::Pick(..)) => s.as_ref().map_or(f64::NAN, |s| s.latency_ms),
                Some(Slot::Available { .. }) => s
                    .as_ref()
                    .and_then(|s| s.all.iter().find(|c| (c.0, c.1) == (d_node, d_gpn)))
                    .map_or(f64::NAN, |c| c.2),
                _ => f64::NAN,
            };
            self.note_launch(view, job, latency_ms, d_node * d_gpn);
            return Decision::Launch { job, gpus };
        }
        // Everything waits until the next event: count those that could
        // have used a free GPU, a (VC, queue) at a time.
        let ready: Vec<(VcId, Option<String>)> = self
            .index
            .uncounted
            .iter()
            .filter(|((vc, q), jobs)| {
                !jobs.is_empty()
                    && view.cluster.partition(*vc).gpus_free > 0
                    && q.as_deref().is_none_or(|q| self.quota_headroom(view, *vc, q) > 0)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in ready {
            if let Some(jobs) = self.index.uncounted.get_mut(&k) {
                self.waited_free.extend(std::mem::take(jobs));
            }
        }
        Decision::Wait
    }

    /// Whether a waiting task could use a free GPU now (for Capacity:
    /// within its queue's quota).
    fn could_use_free(&self, view: &View<'_>, job: JobId) -> bool {
        let spec = view.jobs.spec(job);
        if view.cluster.partition(spec.vc).gpus_free == 0 {
            return false;
        }
        match (&spec.task, self.opts.variant) {
            (Some(t), GenieVariant::Capacity) => self.quota_headroom(view, spec.vc, task_type(&t.kind)) > 0,
            _ => true,
        }
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
        self.pending.insert(job);
        if !self.scan {
            self.index.fresh.push(job);
            let key = Index::count_key(view, job, self.opts.variant);
            self.index.uncounted.entry(key).or_default().insert(job);
        }
        let spec = view.jobs.spec(job);
        if let Some(t) = &spec.task
            && !self.profiles.types.contains_key(&t.kind)
        {
            let name = t.kind.rsplit_once('-').map_or(t.kind.as_str(), |(n, _)| n).to_string();
            self.missing.insert((t.kind.clone(), name, spec.model().unwrap_or_default().to_string(), t.inference));
        }
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        self.running.remove(&job);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        let reprofiled = self.profile_missing(view);
        if self.scan {
            return self.decide_scan(view);
        }
        if reprofiled {
            // Every waiting task's model may have changed: index them anew.
            self.index.clear_scores();
            self.index.fresh = self.pending.iter().copied().collect();
        }
        self.decide_indexed(view)
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
            ("tasks_waited_while_gpus_free", self.waited_free.len() as f64),
        ];
        if !errs.is_empty() {
            m.push(("prediction_error_mean", errs.iter().sum::<f64>() / errs.len() as f64));
            m.push(("prediction_error_p95", crate::stats::quantile_sorted(&errs, 0.95)));
        }
        m
    }
}
