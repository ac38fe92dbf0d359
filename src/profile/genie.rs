//! GENIE's throughput prediction model, fitted by least squares per (model,
//! GPU type) on the profile database.
//!
//! From the GENIE paper (Chen et al., TPDS 2020, Eqs. 4–8; restated in
//! `specs/policies.md` §2.2), for `n` GPUs at per-GPU batch `b`:
//!
//! - per-GPU rate (samples/s) `sPR(b) = k0 + k1 b + k2 b²`;
//! - communication penalty (GPU-equivalents lost)
//!   `Comm = gamma * ((d_node - 1) d_gpn + lambda (d_gpn - 1)) / (n - 1)` for a
//!   symmetric placement of `d_node` servers × `d_gpn` GPUs, 0 for one GPU;
//! - job rate `PR = (n - Comm) sPR(b)`, so iteration time `n b / PR`.
//!
//! The bracket is the average "hop class" one GPU sees to the other `n - 1`
//! (cross-server weight 1, same-server weight `lambda`). Our generalisation to
//! uneven splits (`g_i` GPUs on server `i`) averages it over GPUs:
//! `Comm = gamma x + (gamma lambda) y` with `x = Σ g_i (n - g_i) / (n (n - 1))`
//! and `y = Σ g_i (g_i - 1) / (n (n - 1))`, which is the paper's formula when
//! all `g_i` are equal. `k0..k2` are fitted on the single-GPU points, then
//! `gamma` and `gamma lambda` by linear least squares on the multi-GPU points'
//! measured `Comm = n - PR / sPR(b)`. Gavel's "spread" points (split unknown)
//! are read as one GPU per server. Where GENIE has no fit, or its fit gives a
//! non-positive rate (its penalty can exceed the GPUs it has), table
//! interpolation stands in and the `genie_table` fallback is counted. The
//! quadratic is fitted by relative least
//! squares (each point weighted by the inverse of its rate), which minimises
//! the relative error the paper reports. A (model, GPU type) with fewer than three
//! single-GPU batches is not fitted and falls back to table interpolation,
//! counted like any other fallback.
//!
//! Here too, below both the GENIE workload (`workload::genie`) and the GENIE
//! policy's profiler (`policy::genie`), which share them: GENIE's six task
//! types ([`TASK_MODELS`]) and the simulator's ground truth for them
//! ([`GroundTruth`]).

use std::collections::BTreeMap;
use std::ops::Deref;

use super::db::{ProfileDb, Split};
use super::model::{Estimate, PerfModel, TableModel};

/// A fitted GENIE model for one (model, GPU type).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenieFit {
    /// `sPR(b) = k0 + k1 b + k2 b²`, samples/s per GPU: `[k0, k1, k2]`.
    pub k: [f64; 3],
    /// Cross-server penalty weight, GPU-equivalents.
    pub gamma: f64,
    /// Same-server weight relative to cross-server (`lambda`); NaN when gamma is 0.
    pub lambda: f64,
}

impl GenieFit {
    /// Per-GPU rate at per-GPU batch `b`, samples/s.
    pub fn spr(&self, b: f64) -> f64 {
        self.k[0] + self.k[1] * b + self.k[2] * b * b
    }

    /// Communication penalty of a split, GPU-equivalents.
    pub fn comm(&self, split: &[u32]) -> f64 {
        let (x, y) = hop_terms(split);
        let gl = if self.lambda.is_finite() { self.gamma * self.lambda } else { 0.0 };
        self.gamma * x + gl * y
    }

    /// Iteration time, s, of a job on `split` at per-GPU batch `b`.
    pub fn iter_time(&self, b: f64, split: &[u32]) -> f64 {
        let n: f64 = split.iter().map(|&g| f64::from(g)).sum();
        let rate = (n - self.comm(split)) * self.spr(b);
        n * b / rate
    }
}

/// `(x, y)` of the generalised hop-class average (module docs); `(0, 0)` for one GPU.
pub fn hop_terms(split: &[u32]) -> (f64, f64) {
    let n: f64 = split.iter().map(|&g| f64::from(g)).sum();
    if n <= 1.0 {
        return (0.0, 0.0);
    }
    let denom = n * (n - 1.0);
    let x = split.iter().map(|&g| f64::from(g) * (n - f64::from(g))).sum::<f64>() / denom;
    let y = split.iter().map(|&g| f64::from(g) * (f64::from(g) - 1.0)).sum::<f64>() / denom;
    (x, y)
}

/// Solves the normal equations `AᵀA c = Aᵀy` for the least-squares fit of
/// `y ≈ A c` (rows of `A` given as slices of equal length `m`, m ≤ 3), by
/// Gaussian elimination with partial pivoting. `None` if singular.
pub fn least_squares(rows: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let m = rows.first()?.len();
    let mut a = vec![vec![0.0; m + 1]; m];
    for (r, &yi) in rows.iter().zip(y) {
        for (i, row) in a.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().take(m).enumerate() {
                *cell += r[i] * r[j];
            }
            row[m] += r[i] * yi;
        }
    }
    for col in 0..m {
        let piv = (col..m).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[piv][col].abs() < 1e-12 * (1.0 + a[piv][m].abs()) {
            return None;
        }
        a.swap(col, piv);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (cell, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *cell -= f * p;
                }
            }
        }
    }
    Some((0..m).map(|i| a[i][m] / a[i][i]).collect())
}

/// One measured point: (per-GPU batch, split over servers, iteration time s).
pub type Point = (u32, Vec<u32>, f64);

/// Fits GENIE's model to the points of one (model, GPU type).
pub fn fit(points: &[Point]) -> Option<GenieFit> {
    fit_with(points, false)
}

/// [`fit`], and with `linear_if_two` a linear `sPR(b) = k0 + k1 b`
/// (`k2 = 0`) when the single-GPU points have exactly two distinct batches
/// (a quadratic through two points is not identified; GENIE's profiler
/// under `--profile-batches measured`, where the public rows of a model give
/// only two). `None` below that.
pub fn fit_with(points: &[Point], linear_if_two: bool) -> Option<GenieFit> {
    let single: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.1 == [1])
        .map(|p| (f64::from(p.0), f64::from(p.0) / p.2)) // (b, samples/s)
        .collect();
    let mut batches: Vec<f64> = single.iter().map(|s| s.0).collect();
    batches.sort_by(f64::total_cmp);
    batches.dedup();
    let linear = linear_if_two && batches.len() == 2;
    if batches.len() < 3 && !linear {
        return None;
    }
    // Relative least squares (each point weighted by 1 / its rate): per-GPU
    // rates span an order of magnitude over the batches, and an absolute fit
    // would sacrifice the small batches to the large ones.
    let rows: Vec<Vec<f64>> = single
        .iter()
        .map(|&(b, y)| if linear { vec![1.0 / y, b / y] } else { vec![1.0 / y, b / y, b * b / y] })
        .collect();
    let ys: Vec<f64> = vec![1.0; single.len()];
    let k = least_squares(&rows, &ys)?;
    let mut f = GenieFit { k: [k[0], k[1], k.get(2).copied().unwrap_or(0.0)], gamma: 0.0, lambda: f64::NAN };
    let mut comm_rows = Vec::new();
    let mut comm_y = Vec::new();
    for (b, split, t) in points.iter().filter(|p| p.1.iter().sum::<u32>() > 1) {
        let n: f64 = split.iter().map(|&g| f64::from(g)).sum();
        let spr = f.spr(f64::from(*b));
        if spr <= 0.0 {
            continue;
        }
        let pr = n * f64::from(*b) / t;
        let (x, y) = hop_terms(split);
        comm_rows.push(vec![x, y]);
        comm_y.push(n - pr / spr);
    }
    let has_cross = comm_rows.iter().any(|r| r[0] > 0.0);
    let has_same = comm_rows.iter().any(|r| r[1] > 0.0);
    match (has_cross, has_same) {
        (true, true) => {
            if let Some(c) = least_squares(&comm_rows, &comm_y) {
                f.gamma = c[0];
                f.lambda = if c[0].abs() > 1e-12 { c[1] / c[0] } else { f64::NAN };
            }
        }
        (true, false) => {
            let x: Vec<Vec<f64>> = comm_rows.iter().map(|r| vec![r[0]]).collect();
            f.gamma = least_squares(&x, &comm_y).map_or(0.0, |c| c[0]);
        }
        (false, true) => {
            // Only same-server points: gamma * lambda is identified; take lambda = 1.
            let y: Vec<Vec<f64>> = comm_rows.iter().map(|r| vec![r[1]]).collect();
            f.gamma = least_squares(&y, &comm_y).map_or(0.0, |c| c[0]);
            f.lambda = 1.0;
        }
        (false, false) => {}
    }
    Some(f)
}

/// GENIE's model over a profile database: one fit per (model, GPU type), table
/// interpolation where no fit exists. Holds the database as `D` does (see
/// [`TableModel`]).
pub struct GenieModel<D: Deref<Target = ProfileDb>> {
    fits: BTreeMap<(String, String), GenieFit>,
    table: TableModel<D>,
}

impl<D: Deref<Target = ProfileDb>> GenieModel<D> {
    /// Fits every (model, GPU type) of `db` with enough single-GPU points.
    pub fn new(db: D) -> Self {
        let mut points: BTreeMap<(String, String), Vec<Point>> = BTreeMap::new();
        for r in &db.throughput {
            let split = match &r.split {
                Split::Exact(s) => s.clone(),
                Split::Spread => vec![1; r.gpus as usize],
            };
            points.entry((r.model.clone(), r.gpu_type.clone())).or_default().push((r.local_bsz, split, r.iter_time_s));
        }
        let fits = points.into_iter().filter_map(|(key, pts)| fit(&pts).map(|f| (key, f))).collect();
        GenieModel { fits, table: TableModel::new(db) }
    }

    /// The fit for a (model, GPU type), if any.
    pub fn fit_for(&self, model: &str, gpu_type: &str) -> Option<&GenieFit> {
        self.fits.get(&(model.to_string(), gpu_type.to_string()))
    }
}

impl<D: Deref<Target = ProfileDb> + Send + Sync> PerfModel for GenieModel<D> {
    fn name(&self) -> &'static str {
        "genie"
    }

    fn iter_time(&self, model: &str, gpu_type: &str, local_bsz: u32, split: &[u32]) -> Estimate {
        // An unfitted GPU type borrows the model's best-covered type, scaled
        // by the same ratio table interpolation uses.
        let (gpu, scale, gpu_fb) = self.table.resolve_gpu(model, &gpu_type.to_ascii_lowercase());
        if let Some(f) = self.fit_for(model, &gpu) {
            let t = f.iter_time(f64::from(local_bsz.max(1)), split) * scale;
            if t.is_finite() && t > 0.0 {
                let mut e = Estimate { iter_time_s: t, fallbacks: Default::default() };
                e.fallbacks.gpu_type = gpu_fb;
                return e;
            }
        }
        let mut e = self.table.iter_time(model, gpu_type, local_bsz, split);
        e.fallbacks.genie_table = true;
        e
    }
}

/// One of GENIE's six task types (model), mapped to a model of the profile
/// database. GENIE measured AlexNet, GoogLeNet, ResNet-50, Inception-v3, a
/// regularised LSTM and Seq2seq on K80s; our database (Gavel, Pollux, Sia,
/// ElasticFlow) lacks AlexNet and GoogLeNet, so the nearest measured models
/// stand in: VGG-16 for AlexNet (same plain conv + large fully-connected
/// design, communication-heavy; 138 M vs 61 M parameters) and Inception-v3
/// for GoogLeNet (same Inception family). Seq2seq is the Transformer
/// translation model (Multi30k), the LSTM the word-level language model
/// (WikiText-2). VGG-16 and Inception-v3 were not measured on K80s: their K80
/// times come from the GPU-type fallback (counted in the run summary).
///
/// Which of these are K80 measurements (Gavel's K80 rows): `resnet50`,
/// `lstm`, `seq2seq`. The three others are substitutions; what each one is
/// and its measured transfer error are in [`K80Truth`] and `dlsched profile
/// check` (section `k80-transfer`).
pub const TASK_MODELS: [(&str, &str); 6] = [
    ("alexnet", "vgg16-imagenet"),
    ("googlenet", "inceptionv3-imagenet"),
    ("resnet50", "resnet50-imagenet"),
    ("inception3", "inceptionv3-imagenet"),
    ("lstm", "lstm-wikitext2"),
    ("seq2seq", "transformer-multi30k"),
];

/// A forward pass costs a third of a training step (forward + backward ≈ 1 + 2).
pub const INFERENCE_STEP_FRACTION: f64 = 1.0 / 3.0;

/// Which ground truth GENIE's tasks run against: the one function the GENIE
/// workload generator (iterations, deadlines), GENIE's simulated profiler
/// and the engine's rate read in a run. Chosen by the run's rate model
/// (`--rate-model genie-k80` selects [`GenieTruth::GenieK80`]; every other
/// rate model keeps [`GenieTruth::Table`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum GenieTruth {
    /// The profile database's table interpolation (`TableModel`) with its
    /// fallbacks: VGG-16 and Inception-v3 scaled from A100 rows by the
    /// GPU-type ratio, and placements of 3, 6, 9, 12, 16 GPUs read at the
    /// nearest measured GPU count ("weak scaling"). The default (the truth
    /// every GENIE run used before `genie-k80` existed).
    #[default]
    Table,
    /// The K80 ground truth for GENIE's task types (`K80Truth`): measured
    /// K80 rows where they exist, the paper's Fig. 8 speed-ups elsewhere on
    /// its nine placements, a documented extrapolation beyond them.
    GenieK80,
}

crate::names::value_names!(GenieTruth { Table => "table", GenieK80 => "genie-k80" });

impl GenieTruth {
    /// True for the default (left out of saved models and manifests).
    pub fn is_table(&self) -> bool {
        *self == GenieTruth::Table
    }

    /// The truth's name in outputs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GenieTruth::Table => "table",
            GenieTruth::GenieK80 => "genie-k80",
        }
    }
}

/// One speed-up read from GENIE's Fig. 8 (`src/profile/data/genie_fig8.csv`).
#[derive(Clone, Debug, PartialEq)]
pub struct Fig8Row {
    /// Profile database model (`resnet50-imagenet`, `inceptionv3-imagenet`).
    pub model: String,
    /// Servers of the placement.
    pub d_node: u32,
    /// GPUs per server.
    pub d_gpn: u32,
    /// Global batch of the measurement, samples (64 in the paper).
    pub global_bsz: u32,
    /// Throughput on the placement / throughput on one GPU, same global batch.
    pub speedup: f64,
    /// Citation.
    pub source: String,
}

/// Parses `genie_fig8.csv` (header `model,d_node,d_gpn,global_bsz,speedup,source`).
///
/// # Errors
/// A message naming the file, the 1-based line and the field.
pub fn parse_fig8(file: &str, text: &str) -> Result<Vec<Fig8Row>, String> {
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, h)| h).unwrap_or_default();
    if header != "model,d_node,d_gpn,global_bsz,speedup,source" {
        return Err(format!("{file}:1: header must be `model,d_node,d_gpn,global_bsz,speedup,source`, got `{header}`"));
    }
    let mut out = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        let f: Vec<&str> = line.splitn(6, ',').collect();
        if f.len() != 6 {
            return Err(format!("{file}:{n}: expected 6 fields, got {}", f.len()));
        }
        let int = |k: usize, name: &str| -> Result<u32, String> {
            f[k].parse::<u32>()
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| format!("{file}:{n}: field `{name}` must be a whole number >= 1, got `{}`", f[k]))
        };
        let speedup = f[4]
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("{file}:{n}: field `speedup` must be a positive number, got `{}`", f[4]))?;
        if f[0].is_empty() || f[5].is_empty() {
            return Err(format!("{file}:{n}: fields `model` and `source` must not be empty"));
        }
        out.push(Fig8Row {
            model: f[0].to_string(),
            d_node: int(1, "d_node")?,
            d_gpn: int(2, "d_gpn")?,
            global_bsz: int(3, "global_bsz")?,
            speedup,
            source: f[5].to_string(),
        });
    }
    Ok(out)
}

/// The builtin Fig. 8 speed-ups (`src/profile/data/genie_fig8.csv`).
pub fn fig8() -> &'static [Fig8Row] {
    static ROWS: std::sync::OnceLock<Vec<Fig8Row>> = std::sync::OnceLock::new();
    ROWS.get_or_init(|| {
        parse_fig8("src/profile/data/genie_fig8.csv", include_str!("data/genie_fig8.csv"))
            .unwrap_or_else(|e| panic!("the builtin GENIE Fig. 8 table is invalid: {e}"))
    })
}

/// The model whose Fig. 8 curve a GENIE model's multi-GPU overhead follows:
/// its own where the paper plotted it (ResNet-50, Inception-v3, and GoogLeNet
/// through its Inception-v3 stand-in), else ResNet-50's (the paper plots no
/// other; our choice).
pub fn fig8_reference(model: &str) -> &'static str {
    if model == "inceptionv3-imagenet" { "inceptionv3-imagenet" } else { "resnet50-imagenet" }
}

/// The K80 ground truth for GENIE's task types (the models of
/// [`TASK_MODELS`] on `k80`; anything else is read from the table, unchanged).
///
/// - **Single GPU**: the table's K80 rows where measured (ResNet-50, LSTM,
///   Transformer: Gavel). VGG-16 (for AlexNet) and Inception-v3 (for
///   GoogLeNet, Inception-v3) have only ElasticFlow A100 rows; they are read
///   from them times the table's GPU-type ratio (K80 / A100, the median of
///   the per-sample single-GPU ratios of the models measured on both: 7.74).
///   Tested by leaving a K80-measured model's K80 rows out and transferring
///   it from its A100 rows alone (`dlsched profile check`, section
///   `k80-transfer-1gpu`, rule `from-a100`), this transfer is off by 75.7 %
///   on single-GPU points (ResNet-50 115 %, ResNet-18 44 %; the table's
///   default stand-in type is worse for ResNet-50: 139 %, 312 % over all
///   its K80 points). It is the only transfer these two models admit (A100
///   is their only GPU type); the other rule we tried, ResNet-50's K80 curve
///   times the A100 time ratio of the two models at the same batch, was
///   worse on average where it can be tested (ResNet-18 and ResNet-50, each
///   from the other, from V100 and P100: 64 % mean against 49 % for the
///   GPU-type ratio; a one-off computation, not a dlsched command). AlexNet
///   has no row on any GPU, so no transfer error can be measured for VGG-16
///   standing in for it.
/// - **Multi-GPU, measured**: a placement with K80 rows of the model at that
///   exact split (Gavel: one server of 2, 4 or 8 GPUs; `1+1` from its
///   two-GPU "spread" rows) reads the table.
/// - **Multi-GPU, the paper's Fig. 8**: elsewhere, the step time on `n` GPUs
///   at per-GPU batch `b` is the single-GPU time plus a per-iteration
///   overhead that does not depend on the batch (gradient exchange through
///   the parameter server moves the model, not the samples):
///   `t(b, s) = t1(b) + c(s)`. For a placement `<d_node, d_gpn>` of the
///   paper's nine, `c = t1_ref(64) / S - t1_ref(64 / n)` with `S` the Fig. 8
///   speed-up of the reference model ([`fig8_reference`]) at global batch
///   64 (Chen et al., TPDS 2020, Fig. 8; TensorFlow PS over 56 Gb/s
///   InfiniBand), so the truth reproduces the figure at global batch 64; a
///   negative `c` (a figure faster than our single-GPU curve allows) is read
///   as 0. A model that is not the reference scales the reference's
///   overhead by its parameter count over the reference's (`models.csv`;
///   traffic per step is proportional to the parameters; ratio 1 when either
///   count is unknown).
/// - **Outside the nine** (8 or more servers on the 32-node presets, 8 GPUs
///   per server, uneven splits): `c` is interpolated bilinearly in
///   `(log2 d_node, log2 (n / d_node))` over the 3 × 3 grid and extrapolated
///   linearly from its last segment, at least 0 (our extrapolation). An
///   uneven split reads at its server count and mean GPUs per server.
///
/// Estimates off a measured point carry the table's flags for the
/// single-GPU part and `split = true`.
pub struct K80Truth<D: Deref<Target = ProfileDb>> {
    table: TableModel<D>,
    /// Overhead grid, s per iteration, by reference model: `[log2 d_node][log2 d_gpn]`.
    grids: BTreeMap<String, [[f64; 3]; 3]>,
    /// Parameters, millions, by model (finite ones only).
    params: BTreeMap<String, f64>,
}

/// The GPU type [`K80Truth`] covers.
pub const K80: &str = "k80";

impl<D: Deref<Target = ProfileDb> + Send + Sync> K80Truth<D> {
    /// The truth over `db` and the builtin Fig. 8 table.
    pub fn new(db: D) -> Self {
        Self::with_fig8(db, fig8())
    }

    /// The truth over `db` and the given Fig. 8 rows.
    pub fn with_fig8(db: D, rows: &[Fig8Row]) -> Self {
        let params = db
            .models
            .iter()
            .filter(|m| m.params_m.is_finite() && m.params_m > 0.0)
            .map(|m| (m.model.clone(), m.params_m))
            .collect();
        let table = TableModel::new(db);
        let mut grids: BTreeMap<String, [[f64; 3]; 3]> = BTreeMap::new();
        for r in rows {
            let (Some(i), Some(j)) = (grid_index(r.d_node), grid_index(r.d_gpn)) else { continue };
            let n = r.d_node * r.d_gpn;
            let t1 = |b: u32| table.iter_time(&r.model, K80, b.max(1), &[1]).iter_time_s;
            let c = (t1(r.global_bsz) / r.speedup - t1(r.global_bsz / n)).max(0.0);
            grids.entry(r.model.clone()).or_insert([[0.0; 3]; 3])[i][j] = c;
        }
        K80Truth { table, grids, params }
    }

    /// The table it reads single-GPU and measured points from.
    pub fn table(&self) -> &TableModel<D> {
        &self.table
    }

    /// True for a model this truth covers (a model of [`TASK_MODELS`]).
    pub fn covers(model: &str) -> bool {
        TASK_MODELS.iter().any(|&(_, m)| m == model)
    }

    /// Per-iteration overhead, s, of `model` on `split` (n > 1) from the Fig. 8 grid.
    pub fn overhead_s(&self, model: &str, split: &[u32]) -> f64 {
        let reference = fig8_reference(model);
        let Some(grid) = self.grids.get(reference) else { return 0.0 };
        let scale = match (self.params.get(model), self.params.get(reference)) {
            _ if model == reference => 1.0,
            (Some(p), Some(q)) => p / q,
            _ => 1.0,
        };
        let n: f64 = split.iter().map(|&g| f64::from(g)).sum();
        let d = split.len().max(1) as f64;
        let (x, y) = (d.log2(), (n / d).log2());
        (bilinear(grid, x, y) * scale).max(0.0)
    }
}

/// Index of 1, 2, 4 in the Fig. 8 grid.
fn grid_index(v: u32) -> Option<usize> {
    match v {
        1 => Some(0),
        2 => Some(1),
        4 => Some(2),
        _ => None,
    }
}

/// Bilinear interpolation on a grid at integer coordinates 0, 1, 2, linear
/// extrapolation outside from the nearest segment.
fn bilinear(g: &[[f64; 3]; 3], x: f64, y: f64) -> f64 {
    let seg = |v: f64| if v <= 1.0 { 0usize } else { 1 };
    let (i, j) = (seg(x), seg(y));
    let (tx, ty) = (x - i as f64, y - j as f64);
    let row = |r: usize| g[r][j] + (g[r][j + 1] - g[r][j]) * ty;
    row(i) + (row(i + 1) - row(i)) * tx
}

impl<D: Deref<Target = ProfileDb> + Send + Sync> PerfModel for K80Truth<D> {
    fn name(&self) -> &'static str {
        "genie-k80"
    }

    fn iter_time(&self, model: &str, gpu_type: &str, local_bsz: u32, split: &[u32]) -> Estimate {
        let n: u32 = split.iter().sum();
        if n <= 1
            || !gpu_type.eq_ignore_ascii_case(K80)
            || !Self::covers(model)
            || self.table.has_split(model, K80, split)
        {
            return self.table.iter_time(model, gpu_type, local_bsz, split);
        }
        let one = self.table.iter_time(model, K80, local_bsz, &[1]);
        let mut fallbacks = one.fallbacks;
        fallbacks.split = true;
        Estimate { iter_time_s: one.iter_time_s + self.overhead_s(model, split), fallbacks }
    }
}

/// The simulator's ground truth for a task type: iteration time from the
/// chosen [`GenieTruth`] over the profile database.
pub struct GroundTruth<'a> {
    table: TableModel<&'a ProfileDb>,
    k80: Option<K80Truth<&'a ProfileDb>>,
    gpu_type: String,
}

impl<'a> GroundTruth<'a> {
    /// The table-based ground truth ([`GenieTruth::Table`]) on `gpu_type` GPUs.
    pub fn new(db: &'a ProfileDb, gpu_type: &str) -> Self {
        Self::with(db, gpu_type, GenieTruth::Table)
    }

    /// The ground truth `truth` on `gpu_type` GPUs.
    pub fn with(db: &'a ProfileDb, gpu_type: &str, truth: GenieTruth) -> Self {
        GroundTruth {
            table: TableModel::new(db),
            k80: (truth == GenieTruth::GenieK80).then(|| K80Truth::new(db)),
            gpu_type: gpu_type.to_ascii_lowercase(),
        }
    }

    /// The model it reads.
    pub fn model(&self) -> &dyn PerfModel {
        match &self.k80 {
            Some(k) => k,
            None => &self.table,
        }
    }

    /// Seconds per iteration of `model` at per-GPU batch `b` on `split`
    /// (training), or per forward step on one GPU (inference).
    pub fn step_s(&self, model: &str, inference: bool, b: u32, split: &[u32]) -> f64 {
        let m = self.model();
        if inference {
            m.iter_time(model, &self.gpu_type, b.max(1), &[1]).iter_time_s * INFERENCE_STEP_FRACTION
        } else {
            m.iter_time(model, &self.gpu_type, b.max(1), split).iter_time_s
        }
    }

    /// True when `model` has measured rows on the truth's GPU type (no GPU-type transfer).
    pub fn measured_on_gpu(&self, model: &str) -> bool {
        !self.table.resolve_gpu(model, &self.gpu_type).2
    }

    /// True when the truth reads `model` at per-GPU batch `b` on `split`
    /// (one GPU for inference) without interpolating between measured
    /// batches: its estimate has no batch fallback (`profile::model`, rule 4).
    pub fn batch_measured(&self, model: &str, inference: bool, b: u32, split: &[u32]) -> bool {
        let split: &[u32] = if inference { &[1] } else { split };
        !self.model().iter_time(model, &self.gpu_type, b.max(1), split).fallbacks.batch
    }

    /// Batches measured for `model` on the GPU type (or on its best-covered type).
    pub fn batches(&self, model: &str) -> Vec<u32> {
        let (gpu, _, _) = self.table.resolve_gpu(model, &self.gpu_type);
        let on = self.table.measured_batches_on(model, &gpu);
        if on.is_empty() { self.table.measured_batches(model) } else { on }
    }
}

/// Task type name: `<type>-train` or `<type>-infer`.
pub fn kind_name(task_type: &str, inference: bool) -> String {
    format!("{task_type}-{}", if inference { "infer" } else { "train" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_terms_match_the_paper_for_symmetric_splits() {
        // 2 servers × 2 GPUs: paper bracket ((2-1)*2 + lambda*(2-1)) / 3 = (2 + lambda) / 3.
        let (x, y) = hop_terms(&[2, 2]);
        assert!((x - 2.0 / 3.0).abs() < 1e-12 && (y - 1.0 / 3.0).abs() < 1e-12);
        // 1 server × 4: (0 + lambda*3)/3 = lambda.
        assert_eq!(hop_terms(&[4]), (0.0, 1.0));
        assert_eq!(hop_terms(&[1]), (0.0, 0.0));
    }

    #[test]
    fn fit_recovers_known_coefficients_from_noise_free_points() {
        // sPR(b) = 10 + 2 b - 0.01 b², gamma 0.6, lambda 0.25.
        let truth = GenieFit { k: [10.0, 2.0, -0.01], gamma: 0.6, lambda: 0.25 };
        let mut pts = Vec::new();
        for b in [8u32, 16, 32, 64, 96] {
            pts.push((b, vec![1], truth.iter_time(f64::from(b), &[1])));
        }
        for split in [vec![2], vec![4], vec![1, 1], vec![2, 2], vec![4, 4], vec![3, 1]] {
            pts.push((32, split.clone(), truth.iter_time(32.0, &split)));
        }
        let f = fit(&pts).unwrap();
        for (got, want) in f.k.iter().zip(truth.k) {
            assert!((got - want).abs() < 1e-6 * (1.0 + want.abs()), "{:?}", f);
        }
        assert!((f.gamma - 0.6).abs() < 1e-9 && (f.lambda - 0.25).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn least_squares_solves_an_exact_system() {
        // y = 1 + 2x: points (0,1), (1,3), (2,5).
        let c = least_squares(&[vec![1.0, 0.0], vec![1.0, 1.0], vec![1.0, 2.0]], &[1.0, 3.0, 5.0]).unwrap();
        assert!((c[0] - 1.0).abs() < 1e-12 && (c[1] - 2.0).abs() < 1e-12);
        assert!(least_squares(&[vec![1.0, 1.0], vec![2.0, 2.0]], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn a_fig8_speedup_becomes_a_step_time() {
        let db = ProfileDb::builtin();
        let truth = K80Truth::new(&db);
        let t = |b: u32, split: &[u32]| truth.iter_time("resnet50-imagenet", "K80", b, split).iter_time_s;
        // ResNet-50 2N2G, Fig. 8 speed-up 2.6 at global batch 64 (16 per GPU):
        // t = t1(64) / 2.6 = 1.61544 / 2.6 = 0.621323 s (Gavel K80, one GPU at batch 64).
        assert!((t(16, &[2, 2]) - 1.61544 / 2.6).abs() < 1e-9, "{}", t(16, &[2, 2]));
        // Overhead c = 0.621323 - t1(16) = 0.621323 - 0.434684 = 0.186639 s, batch-independent:
        // at 32 per GPU, t = t1(32) + c = 0.808689 + 0.186639 = 0.995328 s.
        assert!((t(32, &[2, 2]) - (0.808689 + 1.61544 / 2.6 - 0.434684)).abs() < 1e-9);
        // Measured placements read the table: one server of 2 (Gavel 0.46504 s at 16).
        assert_eq!(t(16, &[2]), 0.46504);
        // 8 nodes x 1 GPU (outside the nine): linear in log2(d_node) from 2 and 4 nodes.
        // c(2,1) = 1.61544/1.6 - t1(32) = 1.009650 - 0.808689 = 0.200961;
        // c(4,1) = 1.61544/2.8 - t1(16) = 0.576943 - 0.434684 = 0.142259;
        // c(8,1) = 2 c(4,1) - c(2,1) = 0.083557. t1(8): below the smallest batch,
        // the line through 16 and 32: 0.434684 - (0.808689 - 0.434684) / 2 = 0.247682.
        let c21 = 1.61544 / 1.6 - 0.808689;
        let c41 = 1.61544 / 2.8 - 0.434684;
        let want = 0.434684 - (0.808689 - 0.434684) / 2.0 + 2.0 * c41 - c21;
        assert!((t(8, &[1; 8]) - want).abs() < 1e-9, "{} vs {want}", t(8, &[1; 8]));
        // Not "the same as 8 GPUs on one server" (Gavel 1N8G at 8/GPU is not measured; 16/GPU is 0.531347).
        assert!((t(16, &[4, 4, 4, 4]) - t(16, &[8])).abs() > 0.01);
        // Off K80, or another model: the table, unchanged.
        let table = TableModel::new(&db);
        for (m, g, split) in [("resnet50-imagenet", "v100", vec![2, 2]), ("resnet18-cifar10", "k80", vec![2, 2])] {
            assert_eq!(truth.iter_time(m, g, 16, &split), table.iter_time(m, g, 16, &split));
        }
    }

    #[test]
    fn a_substitution_is_scaled_by_the_gpu_type_ratio() {
        // Inception-v3 has only A100 rows; K80 = A100 time x the median of the
        // per-sample single-GPU K80/A100 ratios at each model's smallest batch,
        // over the models measured on both:
        // ResNet-50: (0.434684/16) / (0.151689/20) = 3.582031;
        // ResNet-18: (0.208538/16) / (0.0350447/32) = 11.901333; median of two = mean = 7.741682.
        let db = ProfileDb::builtin();
        let ratio = ((0.434684 / 16.0) / (0.151689 / 20.0) + (0.208538 / 16.0) / (0.0350447 / 32.0)) / 2.0;
        let truth = GroundTruth::with(&db, "K80", GenieTruth::GenieK80);
        let t = truth.step_s("inceptionv3-imagenet", false, 64, &[1]);
        assert!((t - 0.207441 * ratio).abs() < 1e-9, "{t} vs {}", 0.207441 * ratio);
        assert!(!truth.measured_on_gpu("inceptionv3-imagenet") && truth.measured_on_gpu("resnet50-imagenet"));
    }

    #[test]
    fn the_ground_truth_reads_the_chosen_model() {
        let db = ProfileDb::builtin();
        let k80 = K80Truth::new(&db);
        let table = TableModel::new(&db);
        let g = GroundTruth::with(&db, "K80", GenieTruth::GenieK80);
        let want = k80.iter_time("lstm-wikitext2", "k80", 10, &[2, 2]).iter_time_s;
        assert_eq!(g.step_s("lstm-wikitext2", false, 10, &[2, 2]), want);
        let g = GroundTruth::new(&db, "K80");
        assert_eq!(
            g.step_s("lstm-wikitext2", false, 10, &[2, 2]),
            table.iter_time("lstm-wikitext2", "k80", 10, &[2, 2]).iter_time_s
        );
        // Inference: a third of the single-GPU step, either truth.
        let one = table.iter_time("lstm-wikitext2", "k80", 10, &[1]).iter_time_s;
        assert_eq!(g.step_s("lstm-wikitext2", true, 10, &[2, 2]), one * INFERENCE_STEP_FRACTION);
    }

    #[test]
    fn the_fig8_table_is_checked_and_complete() {
        let rows = fig8();
        assert_eq!(rows.len(), 18);
        let r = rows.iter().find(|r| r.model == "inceptionv3-imagenet" && r.d_node == 4 && r.d_gpn == 4).unwrap();
        assert_eq!((r.speedup, r.global_bsz), (5.7, 64));
        assert!(rows.iter().all(|r| r.source.contains("TPDS 2020 Fig. 8")));
        let bad = "model,d_node,d_gpn,global_bsz,speedup,source\nx,1,1,64,1,s\nx,2,0,64,1.5,s\n";
        let e = parse_fig8("f.csv", bad).unwrap_err();
        assert!(e.contains("f.csv:3") && e.contains("d_gpn"), "{e}");
        let e = parse_fig8("f.csv", "model,d_node,d_gpn,global_bsz,speedup,source\nx,1,1,64,-2,s\n").unwrap_err();
        assert!(e.contains("f.csv:2") && e.contains("speedup"), "{e}");
    }
}
