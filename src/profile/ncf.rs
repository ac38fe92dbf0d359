//! A learned interference model: neural collaborative filtering (NCF) over
//! the measured co-location pairs of a profile database.
//!
//! IAWP (Zhang, Geng and Ma, TPDS 2021; `specs/policies.md` §5.3) fills the
//! missing entries of a sparse matrix of measurements by NCF: one-hot ids →
//! embeddings → concatenation → an MLP with hidden layers of 128, 64 and 32
//! (ReLU) → a sigmoid output; loss MSE/(2MN) + L2; pre-trained with Adam,
//! then updated with SGD. The paper's matrix is subtask × metric; here (our
//! reading, the issue's adaptation to pairs) it is the co-location table:
//!
//! ```text
//! speed(me, other, g) = σ( MLP( [U[me] ‖ V[other] ‖ W[g]] ) )
//! me, other = a job type: (model, per-GPU batch) as the table measures it
//! g         = a GPU type (Lucid's pairs, of an unstated GPU: `unknown`)
//! U, V, W   = embeddings of dimension d (NcfParams::embed_dim)
//! ```
//!
//! Each measured row `(g, a, b, s_a, s_b)` gives two samples, `(a, b, g) →
//! s_a` and `(b, a, g) → s_b` (speeds above 1, measurement noise, read as 1,
//! as the co-location rule reads them). The loss is the mean of `(ŷ − y)² / 2`
//! over a minibatch plus `λ/2 ‖θ‖²` over every weight and embedding (not the
//! biases). A type the table never measured has no embedding: a query for a
//! model it measured at other batches takes the nearest measured batch (ties:
//! the smaller), one for an unmeasured model or GPU type gets no prediction
//! ([`Ncf::predict`] returns `None`), and the co-location rule goes on down
//! its fallback chain (`src/profile/coloc.rs`).
//!
//! Our readings, not the paper's (which does not state them): embedding
//! dimension 8, L2 weight 1e-5, He-uniform initialisation of the ReLU layers
//! and of the output layer (He et al., ICCV 2015), embeddings uniform in
//! ±0.1, the output bias set to the logit of the mean training speed, Adam
//! (Kingma and Ba, ICLR 2015; β = 0.9, 0.999, ε = 1e-8) at 3e-3 for 60
//! epochs then SGD at 0.01 for 20, minibatches of 64 in an order shuffled per
//! epoch. The model is trained once per database with the fixed seed
//! [`NCF_SEED`] on the named stream `ncf` (`src/rng.rs`): it is a derived
//! table of the database, the same for every run and thread count.
//!
//! The MLP is this module's own: helper branch `nn17` (a shared dense MLP in
//! `src/nn.rs`) was not published in time to build on; see the issue-17 notes.

use std::collections::BTreeMap;

use ndarray::{Array2, Axis};
use rand::Rng;
use rand::seq::SliceRandom;

use super::coloc::Tenant;
use super::db::ProfileDb;

/// The seed the database's model is trained with (module docs): a fixed
/// constant, so the model is the same for every run of a database.
pub const NCF_SEED: u64 = 1;

/// The hidden layers of the NCF tower: 128, 64 and 32 units (IAWP, TPDS 2021,
/// `specs/policies.md` §5.3).
pub const HIDDEN: [usize; 3] = [128, 64, 32];

/// Training settings (module docs; our readings, not the paper's).
#[derive(Clone, Debug, PartialEq)]
pub struct NcfParams {
    /// Embedding dimension of each id.
    pub embed_dim: usize,
    /// Hidden layer widths (the paper's 128, 64, 32).
    pub hidden: Vec<usize>,
    /// L2 weight λ of the loss.
    pub l2: f64,
    /// Adam pre-training: epochs and learning rate.
    pub adam_epochs: usize,
    /// Adam learning rate.
    pub adam_lr: f64,
    /// SGD fine-tuning: epochs.
    pub sgd_epochs: usize,
    /// SGD learning rate.
    pub sgd_lr: f64,
    /// Minibatch size, samples.
    pub batch: usize,
    /// Master seed of the `ncf` stream.
    pub seed: u64,
}

impl Default for NcfParams {
    fn default() -> Self {
        NcfParams {
            embed_dim: 8,
            hidden: HIDDEN.to_vec(),
            l2: 1e-5,
            adam_epochs: 60,
            adam_lr: 3e-3,
            sgd_epochs: 20,
            sgd_lr: 0.01,
            batch: 64,
            seed: NCF_SEED,
        }
    }
}

/// One training sample: ids of "me", the co-tenant and the GPU type, and my
/// measured speed in (0, 1].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Job-type id of the job whose speed this is.
    pub me: usize,
    /// Job-type id of its co-tenant.
    pub other: usize,
    /// GPU-type id.
    pub gpu: usize,
    /// Speed while sharing / alone, in (0, 1].
    pub speed: f64,
}

/// The trained tower and embeddings over integer ids.
#[derive(Clone, Debug)]
pub struct NcfNet {
    /// Parameters in order: U, V, W (embeddings, (ids, d)), then per layer
    /// its weights (n_in, n_out) and bias (1, n_out), the last layer's n_out 1.
    params: Vec<Array2<f64>>,
    layers: usize,
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

impl NcfNet {
    /// An untrained net for `types` job types and `gpus` GPU types.
    fn init(types: usize, gpus: usize, p: &NcfParams, rng: &mut crate::rng::Stream, mean: f64) -> NcfNet {
        let d = p.embed_dim;
        let mut uniform = |rows: usize, cols: usize, a: f64| Array2::from_shape_fn((rows, cols), |_| rng.gen_range(-a..=a));
        let mut params = vec![uniform(types, d, 0.1), uniform(types, d, 0.1), uniform(gpus, d, 0.1)];
        let mut n_in = 3 * d;
        let widths: Vec<usize> = p.hidden.iter().copied().chain(std::iter::once(1)).collect();
        for &n_out in &widths {
            params.push(uniform(n_in, n_out, (6.0 / n_in as f64).sqrt()));
            params.push(Array2::zeros((1, n_out)));
            n_in = n_out;
        }
        let m = mean.clamp(1e-3, 1.0 - 1e-3);
        if let Some(b) = params.last_mut() {
            b[[0, 0]] = (m / (1.0 - m)).ln();
        }
        NcfNet { params, layers: widths.len() }
    }

    /// The input rows (batch, 3d) of `batch`.
    fn input(&self, batch: &[Sample]) -> Array2<f64> {
        let d = self.params[0].ncols();
        let mut x = Array2::zeros((batch.len(), 3 * d));
        for (r, s) in batch.iter().enumerate() {
            for k in 0..d {
                x[[r, k]] = self.params[0][[s.me, k]];
                x[[r, d + k]] = self.params[1][[s.other, k]];
                x[[r, 2 * d + k]] = self.params[2][[s.gpu, k]];
            }
        }
        x
    }

    /// Forward pass: the activations of every layer (the input first) and
    /// the outputs σ(z), shape (batch, 1).
    fn forward(&self, x: Array2<f64>) -> (Vec<Array2<f64>>, Array2<f64>) {
        let mut acts = vec![x];
        for l in 0..self.layers {
            let (w, b) = (&self.params[3 + 2 * l], &self.params[4 + 2 * l]);
            let mut z = acts[l].dot(w) + b;
            if l + 1 < self.layers {
                z.mapv_inplace(|v| v.max(0.0));
                acts.push(z);
            } else {
                z.mapv_inplace(sigmoid);
                return (acts, z);
            }
        }
        unreachable!("the tower has an output layer")
    }

    /// Predicted speeds of `samples` (their `speed` ignored), in (0, 1).
    pub fn predict(&self, samples: &[Sample]) -> Vec<f64> {
        if samples.is_empty() {
            return Vec::new();
        }
        let (_, y) = self.forward(self.input(samples));
        y.column(0).to_vec()
    }

    /// The gradients of the loss on `batch` (module docs), one per parameter.
    fn gradients(&self, batch: &[Sample], l2: f64) -> Vec<Array2<f64>> {
        let n = batch.len() as f64;
        let (acts, y) = self.forward(self.input(batch));
        let mut grads: Vec<Array2<f64>> = self.params.iter().map(|p| Array2::zeros(p.raw_dim())).collect();
        // dL/dz of the output: (ŷ − y) σ'(z) / n.
        let mut delta = Array2::from_shape_fn((batch.len(), 1), |(r, _)| {
            let p = y[[r, 0]];
            (p - batch[r].speed) * p * (1.0 - p) / n
        });
        for l in (0..self.layers).rev() {
            let w = &self.params[3 + 2 * l];
            grads[3 + 2 * l] = acts[l].t().dot(&delta) + &(w * l2);
            grads[4 + 2 * l] = delta.sum_axis(Axis(0)).insert_axis(Axis(0));
            let mut back = delta.dot(&w.t());
            if l > 0 {
                // Through the ReLU of layer l − 1: zero where it was off.
                back.zip_mut_with(&acts[l], |g, &a| {
                    if a <= 0.0 {
                        *g = 0.0
                    }
                });
            }
            delta = back;
        }
        // delta is now dL/dx (batch, 3d): scatter into the embeddings.
        let d = self.params[0].ncols();
        for (r, s) in batch.iter().enumerate() {
            for k in 0..d {
                grads[0][[s.me, k]] += delta[[r, k]];
                grads[1][[s.other, k]] += delta[[r, d + k]];
                grads[2][[s.gpu, k]] += delta[[r, 2 * d + k]];
            }
        }
        for e in 0..3 {
            grads[e] = &grads[e] + &(&self.params[e] * l2);
        }
        grads
    }

    /// The loss (module docs) over `samples`.
    pub fn loss(&self, samples: &[Sample], l2: f64) -> f64 {
        let y = self.predict(samples);
        let mse = y.iter().zip(samples).map(|(p, s)| (p - s.speed).powi(2) / 2.0).sum::<f64>() / samples.len() as f64;
        let reg: f64 = self
            .params
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 3 || (*i - 3).is_multiple_of(2))
            .map(|(_, p)| p.iter().map(|v| v * v).sum::<f64>())
            .sum();
        mse + l2 / 2.0 * reg
    }

    /// Trains a net on `samples` over `types` job types and `gpus` GPU types.
    pub fn train(samples: &[Sample], types: usize, gpus: usize, p: &NcfParams) -> NcfNet {
        let mut rng = crate::rng::stream(p.seed, "ncf");
        let mean = if samples.is_empty() {
            0.5
        } else {
            samples.iter().map(|s| s.speed).sum::<f64>() / samples.len() as f64
        };
        let mut net = NcfNet::init(types.max(1), gpus.max(1), p, &mut rng, mean);
        if samples.is_empty() {
            return net;
        }
        let mut m: Vec<Array2<f64>> = net.params.iter().map(|q| Array2::zeros(q.raw_dim())).collect();
        let mut v = m.clone();
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
        let mut order: Vec<usize> = (0..samples.len()).collect();
        let mut step = 0i32;
        let mut batch = Vec::with_capacity(p.batch);
        for epoch in 0..p.adam_epochs + p.sgd_epochs {
            order.shuffle(&mut rng);
            for chunk in order.chunks(p.batch.max(1)) {
                batch.clear();
                batch.extend(chunk.iter().map(|&i| samples[i]));
                let g = net.gradients(&batch, p.l2);
                if epoch < p.adam_epochs {
                    step += 1;
                    let (c1, c2) = (1.0 - b1.powi(step), 1.0 - b2.powi(step));
                    for ((q, g), (m, v)) in net.params.iter_mut().zip(&g).zip(m.iter_mut().zip(v.iter_mut())) {
                        m.zip_mut_with(g, |m, &g| *m = b1 * *m + (1.0 - b1) * g);
                        v.zip_mut_with(g, |v, &g| *v = b2 * *v + (1.0 - b2) * g * g);
                        ndarray::Zip::from(q).and(&*m).and(&*v).for_each(|q, &m, &v| {
                            *q -= p.adam_lr * (m / c1) / ((v / c2).sqrt() + eps);
                        });
                    }
                } else {
                    for (q, g) in net.params.iter_mut().zip(&g) {
                        q.zip_mut_with(g, |q, &g| *q -= p.sgd_lr * g);
                    }
                }
            }
        }
        net
    }
}

/// The learned interference model of a database: the ids of its measured
/// job types and GPU types and the net trained on all its pairs.
#[derive(Clone, Debug)]
pub struct Ncf {
    /// Job types (model, per-GPU batch), sorted; the id is the index.
    types: Vec<(String, u32)>,
    /// GPU types (lower case), sorted; the id is the index.
    gpus: Vec<String>,
    net: NcfNet,
}

/// The samples of `rows` (module docs) over the ids of [`Ncf::index`].
fn samples_of<'a>(
    rows: impl IntoIterator<Item = &'a super::db::ColocRow>,
    types: &BTreeMap<(String, u32), usize>,
    gpus: &BTreeMap<String, usize>,
) -> Vec<Sample> {
    let mut out = Vec::new();
    for r in rows {
        let (Some(&a), Some(&b), Some(&g)) = (
            types.get(&(r.model_a.clone(), r.bsz_a)),
            types.get(&(r.model_b.clone(), r.bsz_b)),
            gpus.get(&r.gpu_type),
        ) else {
            continue;
        };
        out.push(Sample { me: a, other: b, gpu: g, speed: r.speed_a.min(1.0) });
        out.push(Sample { me: b, other: a, gpu: g, speed: r.speed_b.min(1.0) });
    }
    out
}

impl Ncf {
    /// The job-type and GPU-type ids of every row of `db` (sorted: ids do
    /// not depend on the table's order).
    pub fn index(db: &ProfileDb) -> (BTreeMap<(String, u32), usize>, BTreeMap<String, usize>) {
        let mut types = BTreeMap::new();
        let mut gpus = BTreeMap::new();
        for r in &db.colocation {
            types.insert((r.model_a.clone(), r.bsz_a), 0);
            types.insert((r.model_b.clone(), r.bsz_b), 0);
            gpus.insert(r.gpu_type.clone(), 0);
        }
        for (i, v) in types.values_mut().enumerate() {
            *v = i;
        }
        for (i, v) in gpus.values_mut().enumerate() {
            *v = i;
        }
        (types, gpus)
    }

    /// The model trained on every pair of `db` with [`NcfParams::default`].
    pub fn from_db(db: &ProfileDb) -> Ncf {
        Ncf::train_on(db, &db.colocation.iter().collect::<Vec<_>>(), &NcfParams::default())
    }

    /// The model with the ids of all of `db`'s rows, trained on `rows` only
    /// (held-out checks: a held-out row's types keep their ids).
    pub fn train_on(db: &ProfileDb, rows: &[&super::db::ColocRow], p: &NcfParams) -> Ncf {
        let (types, gpus) = Ncf::index(db);
        let samples = samples_of(rows.iter().copied(), &types, &gpus);
        let net = NcfNet::train(&samples, types.len(), gpus.len(), p);
        Ncf { types: types.into_keys().collect(), gpus: gpus.into_keys().collect(), net }
    }

    /// The id of tenant `t`: its type, else its model's nearest measured
    /// batch (ties: the smaller); `None` for a model never measured.
    fn type_id(&self, t: Tenant<'_>) -> Option<usize> {
        let lo = self.types.partition_point(|(m, _)| m.as_str() < t.0);
        let hi = self.types.partition_point(|(m, _)| m.as_str() <= t.0);
        (lo..hi).min_by_key(|&i| (self.types[i].1.abs_diff(t.1), self.types[i].1))
    }

    /// The predicted speed of `me` next to `other` on `gpu_type` (lower
    /// case), in (0, 1); `None` when the model knows the GPU type or either
    /// model not (module docs).
    pub fn predict(&self, gpu_type: &str, me: Tenant<'_>, other: Tenant<'_>) -> Option<f64> {
        let gpu = self.gpus.binary_search_by(|g| g.as_str().cmp(gpu_type)).ok()?;
        let s = Sample { me: self.type_id(me)?, other: self.type_id(other)?, gpu, speed: 0.0 };
        self.net.predict(&[s]).first().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small net for the gradient check: d 2, hidden 4, 3.
    fn small() -> (NcfNet, Vec<Sample>, NcfParams) {
        let p = NcfParams { embed_dim: 2, hidden: vec![4, 3], ..NcfParams::default() };
        let mut rng = crate::rng::stream(3, "test");
        let net = NcfNet::init(3, 2, &p, &mut rng, 0.6);
        let samples = vec![
            Sample { me: 0, other: 1, gpu: 0, speed: 0.7 },
            Sample { me: 2, other: 0, gpu: 1, speed: 0.4 },
            Sample { me: 1, other: 1, gpu: 1, speed: 0.9 },
        ];
        (net, samples, p)
    }

    #[test]
    fn gradients_match_central_differences() {
        let (net, samples, _) = small();
        let l2 = 0.01;
        let g = net.gradients(&samples, l2);
        let h = 1e-6;
        for (i, p) in net.params.iter().enumerate() {
            for idx in 0..p.len() {
                let (r, c) = (idx / p.ncols(), idx % p.ncols());
                let mut plus = net.clone();
                plus.params[i][[r, c]] += h;
                let mut minus = net.clone();
                minus.params[i][[r, c]] -= h;
                let fd = (plus.loss(&samples, l2) - minus.loss(&samples, l2)) / (2.0 * h);
                let an = g[i][[r, c]];
                // Biases carry no L2 in the loss; the finite difference says so too.
                let err = (fd - an).abs() / fd.abs().max(an.abs()).max(1e-8);
                assert!(err < 1e-5 || (fd - an).abs() < 1e-10, "param {i} [{r},{c}]: fd {fd} analytic {an}");
            }
        }
    }

    /// A planted rank-2 matrix on one GPU type: M[i][j] = 0.2 + 0.6 (u_i · v_j)
    /// with u_i, v_j in the simplex {(a, 1 − a)} (so M in [0.2, 0.8]), 16 × 16;
    /// 30 % of the entries (every third-and-a-bit by a seeded draw) hidden.
    #[test]
    fn recovers_a_planted_low_rank_matrix() {
        let n = 16;
        let a: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
        let b: Vec<f64> = (0..n).map(|j| ((j * 7) % n) as f64 / (n - 1) as f64).collect();
        let m = |i: usize, j: usize| 0.2 + 0.6 * (a[i] * b[j] + (1.0 - a[i]) * (1.0 - b[j]));
        let mut rng = crate::rng::stream(5, "planted");
        let (mut train, mut held) = (Vec::new(), Vec::new());
        for i in 0..n {
            for j in 0..n {
                let s = Sample { me: i, other: j, gpu: 0, speed: m(i, j) };
                if rng.gen_bool(0.3) { held.push(s) } else { train.push(s) }
            }
        }
        assert!((70..=85).contains(&held.len()), "about 30 % of 256 hidden: {}", held.len());
        let p = NcfParams { adam_epochs: 150, sgd_epochs: 20, batch: 32, ..NcfParams::default() };
        let net = NcfNet::train(&train, n, 1, &p);
        let pred = net.predict(&held);
        let mae = pred.iter().zip(&held).map(|(p, s)| (p - s.speed).abs()).sum::<f64>() / held.len() as f64;
        // The mean of the training entries, the fallback the learned model replaces.
        let mean = train.iter().map(|s| s.speed).sum::<f64>() / train.len() as f64;
        let mae_mean = held.iter().map(|s| (mean - s.speed).abs()).sum::<f64>() / held.len() as f64;
        // Entries span 0.2..0.8 (mean predictor's error about 0.1); recovered to 0.03.
        assert!(mae < 0.03, "held-out MAE {mae} (mean predictor {mae_mean})");
        assert!(mae < mae_mean / 3.0, "held-out MAE {mae} vs mean predictor {mae_mean}");
    }

    #[test]
    fn unknown_types_get_no_prediction_and_batches_snap_to_the_nearest() {
        let row = |a: &str, ba: u32, b: &str, bb: u32, sa: f64, sb: f64| super::super::db::ColocRow {
            gpu_type: "k80".into(),
            model_a: a.into(),
            bsz_a: ba,
            model_b: b.into(),
            bsz_b: bb,
            speed_a: sa,
            speed_b: sb,
            source: "hand".into(),
        };
        let db = ProfileDb {
            colocation: vec![row("x", 16, "y", 32, 0.8, 0.6), row("x", 64, "x", 64, 0.5, 0.5)],
            ..Default::default()
        };
        let ncf = Ncf::train_on(&db, &[], &NcfParams { adam_epochs: 0, sgd_epochs: 0, ..NcfParams::default() });
        assert!(ncf.predict("v100", ("x", 16), ("y", 32)).is_none(), "GPU type never measured");
        assert!(ncf.predict("k80", ("z", 16), ("y", 32)).is_none(), "model never measured");
        // x at 40 is between 16 and 64 (24 each way): the smaller, 16.
        assert_eq!(ncf.type_id(("x", 40)), Some(0));
        assert_eq!(ncf.type_id(("x", 41)), Some(1));
        assert_eq!(ncf.type_id(("y", 1)), Some(2));
        let p = ncf.predict("k80", ("x", 40), ("y", 32)).unwrap();
        assert_eq!(Some(p), ncf.predict("k80", ("x", 16), ("y", 32)));
        // Untrained: the output bias alone is the logit of the mean 0.5, so
        // predictions sit near 0.5 (embeddings are small).
        assert!((p - 0.5).abs() < 0.2, "{p}");
    }
}
