//! A learned interference model: neural collaborative filtering (NCF) over
//! the measured co-location pairs of a profile database.
//!
//! IAWP (Zhang, Geng and Ma, TPDS 2021; `specs/policies.md` §5.3) fills the
//! missing entries of a sparse matrix of measurements by NCF: one-hot ids →
//! embeddings → concatenation → an MLP with hidden layers of 128, 64 and 32
//! (ReLU) → a sigmoid output; loss MSE/(2MN) + L2; pre-trained with Adam,
//! then updated with SGD. The paper's matrix is subtask × metric; here (our
//! reading, adapted to pairs) it is the co-location table:
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
//! dimension 8, L2 weight 1e-5 (weights and embeddings), embeddings uniform in
//! ±0.1, the output bias set to the logit of the mean training speed, Adam
//! (Kingma and Ba, ICLR 2015; β = 0.9, 0.999, ε = 1e-8) at 3e-3 for 25
//! epochs then SGD at 0.01 for 5, minibatches of 64 in an order shuffled per
//! epoch. The model is trained once per database with the fixed seed
//! [`NCF_SEED`] on the named stream `ncf` (`src/rng.rs`): it is a derived
//! table of the database, the same for every run and thread count. The
//! builtin database's is compiled in, trained ahead ([`compiled`]): runs over
//! it read the net instead of training it.
//!
//! The tower is [`crate::nn::Mlp`] (its He-uniform ReLU layers and
//! Glorot-uniform output layer, its backward pass, which also gives the
//! gradient of the input, i.e. of the embeddings); Adam is kept here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use ndarray::Array2;
use rand::Rng;
use rand::seq::SliceRandom;

use super::db::{ProfileDb, Tenant};
use crate::nn::{Mlp, OutputActivation};

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
            adam_epochs: 25,
            adam_lr: 3e-3,
            sgd_epochs: 5,
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
    /// Embeddings U (me), V (co-tenant), W (GPU type), each (ids, d).
    emb: [Array2<f64>; 3],
    /// The tower: 3d inputs, [`NcfParams::hidden`] ReLU layers, one sigmoid output.
    mlp: Mlp,
}

/// Gradients of every parameter of an [`NcfNet`]: embeddings, then the tower's.
struct NetGrads {
    emb: [Array2<f64>; 3],
    mlp: crate::nn::Grads,
}

impl NcfNet {
    /// An untrained net for `types` job types and `gpus` GPU types.
    fn init(types: usize, gpus: usize, p: &NcfParams, rng: &mut crate::rng::Stream, mean: f64) -> NcfNet {
        let d = p.embed_dim;
        let mut uniform = |rows: usize, cols: usize| Array2::from_shape_fn((rows, cols), |_| rng.gen_range(-0.1..=0.1));
        let emb = [uniform(types, d), uniform(types, d), uniform(gpus, d)];
        let sizes: Vec<usize> =
            std::iter::once(3 * d).chain(p.hidden.iter().copied()).chain(std::iter::once(1)).collect();
        let mut mlp = Mlp::new(&sizes, OutputActivation::Sigmoid, rng);
        let m = mean.clamp(1e-3, 1.0 - 1e-3);
        if let Some(out) = mlp.layers.last_mut() {
            out.b[0] = (m / (1.0 - m)).ln();
        }
        NcfNet { emb, mlp }
    }

    /// The input rows (batch, 3d) of `batch`.
    fn input(&self, batch: &[Sample]) -> Array2<f64> {
        let d = self.emb[0].ncols();
        let mut x = Array2::zeros((batch.len(), 3 * d));
        for (r, s) in batch.iter().enumerate() {
            for (e, id) in [s.me, s.other, s.gpu].into_iter().enumerate() {
                for k in 0..d {
                    x[[r, e * d + k]] = self.emb[e][[id, k]];
                }
            }
        }
        x
    }

    /// Predicted speeds of `samples` (their `speed` ignored), in (0, 1).
    pub fn predict(&self, samples: &[Sample]) -> Vec<f64> {
        if samples.is_empty() {
            return Vec::new();
        }
        self.mlp.forward(self.input(samples).view()).column(0).to_vec()
    }

    /// The gradients of the loss on `batch` (module docs).
    fn gradients(&self, batch: &[Sample], l2: f64) -> NetGrads {
        let n = batch.len() as f64;
        let trace = self.mlp.forward_trace(self.input(batch).view());
        let y = trace.output();
        // dL/dŷ of mean (ŷ − y)² / 2: (ŷ − y) / n.
        let d_out = Array2::from_shape_fn((batch.len(), 1), |(r, _)| (y[[r, 0]] - batch[r].speed) / n);
        let mut g = self.mlp.backward(&trace, &d_out);
        for (gw, layer) in g.w.iter_mut().zip(&self.mlp.layers) {
            gw.scaled_add(l2, &layer.w);
        }
        let d = self.emb[0].ncols();
        let mut emb = [self.emb[0].clone() * l2, self.emb[1].clone() * l2, self.emb[2].clone() * l2];
        for (r, s) in batch.iter().enumerate() {
            for (e, id) in [s.me, s.other, s.gpu].into_iter().enumerate() {
                for k in 0..d {
                    emb[e][[id, k]] += g.input[[r, e * d + k]];
                }
            }
        }
        NetGrads { emb, mlp: g }
    }

    /// The loss (module docs) over `samples`.
    pub fn loss(&self, samples: &[Sample], l2: f64) -> f64 {
        let y = self.predict(samples);
        let mse = y.iter().zip(samples).map(|(p, s)| (p - s.speed).powi(2) / 2.0).sum::<f64>() / samples.len() as f64;
        let sq = |a: &Array2<f64>| a.iter().map(|v| v * v).sum::<f64>();
        let reg: f64 = self.emb.iter().map(sq).sum::<f64>() + self.mlp.layers.iter().map(|l| sq(&l.w)).sum::<f64>();
        mse + l2 / 2.0 * reg
    }

    /// Every parameter, in a fixed order (embeddings, then per layer weights
    /// and bias), each as a flat slice.
    pub fn params(&self) -> Vec<&[f64]> {
        fn flat(a: &Array2<f64>) -> &[f64] {
            a.as_slice().expect("owned arrays are contiguous")
        }
        let mut out: Vec<&[f64]> = self.emb.iter().map(flat).collect();
        for layer in &self.mlp.layers {
            out.push(flat(&layer.w));
            out.push(layer.b.as_slice().expect("owned arrays are contiguous"));
        }
        out
    }

    /// [`NcfNet::params`], writable.
    fn params_mut(&mut self) -> Vec<&mut [f64]> {
        let mut out: Vec<&mut [f64]> =
            self.emb.iter_mut().map(|e| e.as_slice_mut().expect("owned arrays are contiguous")).collect();
        for layer in &mut self.mlp.layers {
            out.push(layer.w.as_slice_mut().expect("owned arrays are contiguous"));
            out.push(layer.b.as_slice_mut().expect("owned arrays are contiguous"));
        }
        out
    }

    /// Every parameter with its gradient, in a fixed order (embeddings, then
    /// per layer weights and bias), each as a flat slice.
    fn pairs<'a>(&'a mut self, g: &'a NetGrads) -> Vec<(&'a mut [f64], &'a [f64])> {
        let flat = |a: &'a Array2<f64>| a.as_slice().expect("owned arrays are contiguous");
        let mut out: Vec<(&mut [f64], &[f64])> = Vec::new();
        for (e, ge) in self.emb.iter_mut().zip(&g.emb) {
            out.push((e.as_slice_mut().expect("owned arrays are contiguous"), flat(ge)));
        }
        for ((layer, gw), gb) in self.mlp.layers.iter_mut().zip(&g.mlp.w).zip(&g.mlp.b) {
            out.push((layer.w.as_slice_mut().expect("owned arrays are contiguous"), flat(gw)));
            out.push((
                layer.b.as_slice_mut().expect("owned arrays are contiguous"),
                gb.as_slice().expect("owned arrays are contiguous"),
            ));
        }
        out
    }

    /// Trains a net on `samples` over `types` job types and `gpus` GPU types:
    /// Adam (kept here, over the tower's public weights and the embeddings;
    /// `crate::nn` has plain SGD), then plain SGD.
    pub fn train(samples: &[Sample], types: usize, gpus: usize, p: &NcfParams) -> NcfNet {
        let mut rng = crate::rng::stream(p.seed, "ncf");
        let mean =
            if samples.is_empty() { 0.5 } else { samples.iter().map(|s| s.speed).sum::<f64>() / samples.len() as f64 };
        let mut net = NcfNet::init(types.max(1), gpus.max(1), p, &mut rng, mean);
        if samples.is_empty() {
            return net;
        }
        // Adam moments, one flat vector per parameter in `pairs` order.
        let sizes: Vec<usize> =
            net.emb.iter().map(|e| e.len()).chain(net.mlp.layers.iter().flat_map(|l| [l.w.len(), l.b.len()])).collect();
        let mut m: Vec<Vec<f64>> = sizes.iter().map(|&n| vec![0.0; n]).collect();
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
                    for ((q, g), (m, v)) in net.pairs(&g).into_iter().zip(m.iter_mut().zip(v.iter_mut())) {
                        for (((q, &g), m), v) in q.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                            *m = b1 * *m + (1.0 - b1) * g;
                            *v = b2 * *v + (1.0 - b2) * g * g;
                            *q -= p.adam_lr * (*m / c1) / ((*v / c2).sqrt() + eps);
                        }
                    }
                } else {
                    for (q, g) in net.pairs(&g) {
                        for (q, &g) in q.iter_mut().zip(g) {
                            *q -= p.sgd_lr * g;
                        }
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
        let (Some(&a), Some(&b), Some(&g)) =
            (types.get(&(r.model_a.clone(), r.bsz_a)), types.get(&(r.model_b.clone(), r.bsz_b)), gpus.get(&r.gpu_type))
        else {
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

    /// The model trained on every pair of `db` with [`NcfParams::default`]:
    /// the compiled-in trained net when `db`'s samples are the builtin
    /// table's ([`compiled`]), else trained here.
    pub fn from_db(db: &ProfileDb) -> Ncf {
        let (types, gpus) = Ncf::index(db);
        let samples = samples_of(&db.colocation, &types, &gpus);
        let p = NcfParams::default();
        let net = compiled::net(&samples, types.len(), gpus.len(), &p)
            .unwrap_or_else(|| NcfNet::train(&samples, types.len(), gpus.len(), &p));
        Ncf { types: types.into_keys().collect(), gpus: gpus.into_keys().collect(), net }
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

/// The net trained on the builtin co-location table, compiled in
/// (`src/profile/data/ncf_builtin.bin`), so that a run over the builtin
/// database does not train it (0.5–2 s of CPU per process).
///
/// Training ([`NcfNet::train`]) is a function of its samples, the id counts
/// and the settings alone, and deterministic on every machine
/// ([`crate::nn`] sums in a fixed order, no BLAS), so its result is a derived
/// table like the database's own. The file holds that input (a header: the
/// id counts, every setting and every sample, exactly) and the trained
/// parameters, `f64` little-endian in [`NcfNet::params`] order. A net is
/// taken from it only when the input is the header byte for byte; any other
/// table (another database, a held-out subset) is trained. The test
/// `profile::ncf::tests::the_compiled_in_net_is_the_trained_one` trains on
/// the builtin table and compares every bit; with `DLSCHED_BLESS_NCF=1` it
/// rewrites the file (after a change to the table, the settings or the
/// training).
pub mod compiled {
    use super::{NcfNet, NcfParams, Sample};

    /// The file's bytes (module docs).
    pub const BYTES: &[u8] = include_bytes!("data/ncf_builtin.bin");

    /// The file's first 8 bytes.
    const MAGIC: &[u8; 8] = b"dlsncf01";

    /// The header of the training input (module docs).
    pub fn header(samples: &[Sample], types: usize, gpus: usize, p: &NcfParams) -> Vec<u8> {
        let mut h = Vec::with_capacity(96 + 20 * samples.len());
        h.extend_from_slice(MAGIC);
        let mut u64s = vec![types as u64, gpus as u64, p.embed_dim as u64, p.hidden.len() as u64];
        u64s.extend(p.hidden.iter().map(|&n| n as u64));
        u64s.extend([p.l2.to_bits(), p.adam_epochs as u64, p.adam_lr.to_bits(), p.sgd_epochs as u64]);
        u64s.extend([p.sgd_lr.to_bits(), p.batch as u64, p.seed, samples.len() as u64]);
        for v in u64s {
            h.extend_from_slice(&v.to_le_bytes());
        }
        for s in samples {
            for id in [s.me, s.other, s.gpu] {
                h.extend_from_slice(&(id as u32).to_le_bytes());
            }
            h.extend_from_slice(&s.speed.to_bits().to_le_bytes());
        }
        h
    }

    /// The file's bytes for a trained `net` and its input.
    pub fn bytes(net: &NcfNet, samples: &[Sample], types: usize, gpus: usize, p: &NcfParams) -> Vec<u8> {
        let mut b = header(samples, types, gpus, p);
        for v in net.params().into_iter().flatten() {
            b.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        b
    }

    /// The compiled-in net, when this is its training input (module docs).
    pub fn net(samples: &[Sample], types: usize, gpus: usize, p: &NcfParams) -> Option<NcfNet> {
        read(BYTES, samples, types, gpus, p)
    }

    /// The net of file bytes `file`, when `file`'s header is this input's
    /// and its parameters have the net's size.
    pub fn read(file: &[u8], samples: &[Sample], types: usize, gpus: usize, p: &NcfParams) -> Option<NcfNet> {
        if samples.is_empty() {
            return None;
        }
        let rest = file.strip_prefix(header(samples, types, gpus, p).as_slice())?;
        // The net's shapes (its values are overwritten).
        let mut net = NcfNet::init(types.max(1), gpus.max(1), p, &mut crate::rng::stream(p.seed, "ncf"), 0.5);
        let mut params = net.params_mut();
        if rest.len() != 8 * params.iter().map(|q| q.len()).sum::<usize>() {
            return None;
        }
        let mut words = rest.chunks_exact(8);
        for q in &mut params {
            for (v, w) in q.iter_mut().zip(&mut words) {
                *v = f64::from_bits(u64::from_le_bytes(w.try_into().ok()?));
            }
        }
        Some(net)
    }
}

/// The learned model of one database, trained at its first use: a run
/// whose co-located pairs are all measured never trains it, and one that
/// needs it trains it once ([`Ncf::from_db`]). The training reads only the
/// database's co-location table and the fixed [`NcfParams::default`], so the
/// trained model is a function of that table: it is kept for the process,
/// keyed by the table's rows (compared in full, not by a digest), and a
/// second database with the same table (another run, another artefact set,
/// the builtin tables parsed again) reuses it. The builtin table's model is
/// not trained but read from the compiled-in net ([`compiled`]).
pub struct LearnedModel {
    db: Arc<ProfileDb>,
    model: OnceLock<Arc<Ncf>>,
}

impl std::fmt::Debug for LearnedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LearnedModel").field("trained", &self.model.get().is_some()).finish()
    }
}

/// Models trained in this process, by co-location table (module docs of
/// [`LearnedModel`]); searched by equality, never iterated for a result.
type Trained = Vec<(Vec<super::db::ColocRow>, Arc<Ncf>)>;
static TRAINED: Mutex<Trained> = Mutex::new(Vec::new());

impl LearnedModel {
    /// The model of `db`, not trained yet.
    pub fn new(db: Arc<ProfileDb>) -> Self {
        LearnedModel { db, model: OnceLock::new() }
    }

    /// The trained model: trained now on first use in this process for this
    /// co-location table (the lock is held while training, so runs starting
    /// together train it once).
    pub fn get(&self) -> &Ncf {
        self.model.get_or_init(|| {
            let mut done = TRAINED.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, m)) = done.iter().find(|(rows, _)| *rows == self.db.colocation) {
                return m.clone();
            }
            let m = Arc::new(Ncf::from_db(&self.db));
            done.push((self.db.colocation.clone(), m.clone()));
            m
        })
    }

    /// Whether [`LearnedModel::get`] has trained (or found) the model yet.
    pub fn is_trained(&self) -> bool {
        self.model.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_net_is_the_trained_one() {
        // The builtin table's samples, trained here, against the file
        // (`compiled` docs): the same bytes, and read back bit for bit.
        let db = ProfileDb::builtin();
        let (types, gpus) = Ncf::index(&db);
        let (nt, ng) = (types.len(), gpus.len());
        let samples = samples_of(&db.colocation, &types, &gpus);
        let p = NcfParams::default();
        let trained = NcfNet::train(&samples, nt, ng, &p);
        let want = compiled::bytes(&trained, &samples, nt, ng, &p);
        if std::env::var_os("DLSCHED_BLESS_NCF").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/profile/data/ncf_builtin.bin");
            std::fs::write(path, &want).unwrap();
            eprintln!("wrote {path} ({} bytes); rebuild, then run this test without DLSCHED_BLESS_NCF", want.len());
            return;
        }
        assert!(
            compiled::BYTES == want.as_slice(),
            "src/profile/data/ncf_builtin.bin is not the net trained on the builtin table: \
             rerun this test with DLSCHED_BLESS_NCF=1 (profile::ncf::compiled)"
        );
        let bits = |n: &NcfNet| n.params().into_iter().flatten().map(|v| v.to_bits()).collect::<Vec<u64>>();
        let read = compiled::net(&samples, nt, ng, &p).expect("the builtin input finds the compiled-in net");
        assert_eq!(bits(&read), bits(&trained));
        assert_eq!(bits(&Ncf::from_db(&db).net), bits(&trained));
        // Any other input trains: a held-out sample, one speed changed, another seed or id count.
        assert!(compiled::net(&samples[1..], nt, ng, &p).is_none());
        let mut other = samples.clone();
        other[0].speed = f64::from_bits(other[0].speed.to_bits() ^ 1);
        assert!(compiled::net(&other, nt, ng, &p).is_none());
        assert!(compiled::net(&samples, nt, ng, &NcfParams { seed: 2, ..NcfParams::default() }).is_none());
        assert!(compiled::net(&samples, nt + 1, ng, &p).is_none());
        // A file cut short is refused, not read in part.
        assert!(compiled::read(&want[..want.len() - 8], &samples, nt, ng, &p).is_none());
    }

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
        // Embeddings and the tower's weights and biases, each perturbed by ±h.
        let (net, samples, _) = small();
        let l2 = 0.01;
        let g = net.gradients(&samples, l2);
        let analytic: Vec<Vec<f64>> = net.clone().pairs(&g).into_iter().map(|(_, g)| g.to_vec()).collect();
        let h = 1e-6;
        let mut checked = 0;
        for (i, an_i) in analytic.iter().enumerate() {
            for (k, &an) in an_i.iter().enumerate() {
                let nudge = |by: f64| {
                    let mut m = net.clone();
                    m.pairs(&g)[i].0[k] += by;
                    m.loss(&samples, l2)
                };
                let fd = (nudge(h) - nudge(-h)) / (2.0 * h);
                let err = (fd - an).abs() / fd.abs().max(an.abs()).max(1e-8);
                assert!(err < 1e-5 || (fd - an).abs() < 1e-10, "param {i}[{k}]: fd {fd} analytic {an}");
                checked += 1;
            }
        }
        // d = 2: 3 embeddings (3, 3, 2 ids × 2), tower 6-4-3-1 (28 + 15 + 4).
        assert_eq!(checked, 16 + 28 + 15 + 4);
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
