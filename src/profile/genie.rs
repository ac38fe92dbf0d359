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
    let single: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.1 == [1])
        .map(|p| (f64::from(p.0), f64::from(p.0) / p.2)) // (b, samples/s)
        .collect();
    let mut batches: Vec<f64> = single.iter().map(|s| s.0).collect();
    batches.sort_by(f64::total_cmp);
    batches.dedup();
    if batches.len() < 3 {
        return None;
    }
    // Relative least squares (each point weighted by 1 / its rate): per-GPU
    // rates span an order of magnitude over the batches, and an absolute fit
    // would sacrifice the small batches to the large ones.
    let rows: Vec<Vec<f64>> = single.iter().map(|&(b, y)| vec![1.0 / y, b / y, b * b / y]).collect();
    let ys: Vec<f64> = vec![1.0; single.len()];
    let k = least_squares(&rows, &ys)?;
    let mut f = GenieFit { k: [k[0], k[1], k[2]], gamma: 0.0, lambda: f64::NAN };
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

/// The simulator's ground truth for a task type: iteration time from the
/// profile database's table model.
pub struct GroundTruth<'a> {
    table: TableModel<&'a ProfileDb>,
    gpu_type: String,
}

impl<'a> GroundTruth<'a> {
    /// Ground truth on `gpu_type` GPUs.
    pub fn new(db: &'a ProfileDb, gpu_type: &str) -> Self {
        GroundTruth { table: TableModel::new(db), gpu_type: gpu_type.to_ascii_lowercase() }
    }

    /// Seconds per iteration of `model` at per-GPU batch `b` on `split`
    /// (training), or per forward step on one GPU (inference).
    pub fn step_s(&self, model: &str, inference: bool, b: u32, split: &[u32]) -> f64 {
        if inference {
            self.table.iter_time(model, &self.gpu_type, b.max(1), &[1]).iter_time_s * INFERENCE_STEP_FRACTION
        } else {
            self.table.iter_time(model, &self.gpu_type, b.max(1), split).iter_time_s
        }
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
}
