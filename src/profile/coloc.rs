//! Co-location: how fast a job runs when other jobs share its GPU.
//!
//! Rule (measured pairs from the profile database's co-location table, Gavel
//! OSDI'20; the bounds for unmeasured pairs and for three or more tenants
//! are our proposal):
//!
//! - alone: speed 1;
//! - with one co-tenant whose pair is measured on the GPU type: the measured
//!   speeds of the pair, at the nearest measured batch sizes of the two
//!   models, exactly, unless their sum is below `1 − c` (below): then the
//!   GPU would rather time-slice the two, and they are lifted to that floor;
//! - in general (any number of tenants, measured or not) every tenant `i`
//!   of the GPU first gets the raw estimate `e_i = Π_{j ≠ i} p(i, j)`, the
//!   product of its pair speeds (each co-tenant taken to slow it
//!   independently; for two tenants, the pair speeds themselves), and then
//!   all tenants' estimates are scaled by one factor `k` so that their sum,
//!   the GPU's summed normalised throughput, lies in `[1 − c, S_max]`:
//!
//!   ```text
//!   E     = Σ_i e_i
//!   k     = clamp(E, 1 − c, S_max) / E        (k = 1 when E is inside)
//!   s_i   = k · e_i
//!   S_max = max(1, best measured pair sum p(a, b) + p(b, a) on the GPU type)
//!   ```
//!
//!   The upper bound: no set of tenants gets more out of one GPU than the
//!   best pair measured on that GPU type did (without it, pair speeds of 1
//!   let any number of tenants run at full speed). The lower bound: a GPU
//!   can always time-slice its tenants, `1/N` each, less a context-switch
//!   cost `c` ([`SWITCH_COST`]); the product alone falls far below that
//!   (four tenants at pair speed 0.32 would get 0.032 each, 0.13 of a GPU
//!   together), and so does a measured pair of jobs that thrash each other
//!   (Gavel's V100 pairs include sums as low as 0.385). Scaling keeps the
//!   tenants' relative speeds. A measured pair inside the bounds is kept
//!   exactly (its sum is at most `S_max` by definition).
//! - a pair not measured on the GPU type borrows the same pair measured on
//!   another GPU type (Lucid's pairs, from an unstated GPU, are stored as
//!   `unknown`), else the mean speed of all pairs measured on the GPU type,
//!   else 0.5 (equal time slicing of two jobs). Each of these, and a pair
//!   read at the nearest measured batches, counts as a fallback. With
//!   [`ColocUnmeasured::Learned`] (`--coloc-unmeasured learned`) the learned
//!   model's prediction (`src/profile/ncf.rs`) comes first among these, when
//!   it knows both models and the GPU type (`dlsched profile check`: its
//!   held-out error on Gavel's pairs is below both the borrowed pair's and
//!   the type mean's), counted as a fallback and in `coloc_learned`;
//! - a row of one model with itself at two batches reads from either side
//!   (`m` at 64 next to `m` at 16 finds the row stored as (16, 64));
//! - a pair speed above 1 (measurement noise: a co-tenant does not speed a
//!   job up) is read as 1.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::db::{ColocRow, ProfileDb};
use super::memo::KeyMemo;
use crate::job::JobSpec;

/// The context-switch cost `c` of time-slicing one GPU, as a fraction of
/// its throughput: tenants that time-slice a GPU get together at least
/// `1 − c` of it (module docs). **An assumption, not a measurement**: Gandiva
/// (Xiao et al., OSDI'18) time-slices GPUs between training jobs by
/// suspending and resuming them at mini-batch boundaries, and Salus (Yu and
/// Chowdhury, MLSys'20) switches jobs inside one GPU process, but we found no
/// overhead figure in a source we could cite, so 5 % is our label for "a
/// switch costs a little". Change it with
/// [`ProfileInterference::with_switch_cost`] or [`colocated_speed_with`].
pub const SWITCH_COST: f64 = 0.05;

/// How fast a job runs when other jobs share one of its GPUs. The engine
/// multiplies a job's placement rate by the smallest speed over its GPUs: a
/// distributed job steps at the pace of its slowest worker.
pub trait Interference: Send + Sync {
    /// The model's name for error messages (`interference` by default).
    fn name(&self) -> &'static str {
        "interference"
    }

    /// The speed of `me` on a GPU of `gpu_type` shared with `others`, in
    /// (0, 1] (1.0 = as fast as alone). A speed that is not finite and
    /// positive stops the run with `SimError::ModelFailure`.
    fn speed(&self, gpu_type: &str, me: &JobSpec, others: &[&JobSpec]) -> f64;

    /// Named counters for the run summary.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// What the co-location rule reads for a pair of models never measured on
/// the GPU type (module docs). Part of the run spec (`coloc_unmeasured`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum ColocUnmeasured {
    /// The same pair on another GPU type, else the GPU type's mean, else 0.5 (the default).
    #[default]
    Mean,
    /// The learned model's prediction (src/profile/ncf.rs) first, where it
    /// knows both models and the GPU type; else as mean.
    Learned,
}

crate::names::value_names!(ColocUnmeasured { Mean => "mean", Learned => "learned" });

impl ColocUnmeasured {
    /// Whether this is the default (`mean`; left out of manifests).
    pub fn is_mean(&self) -> bool {
        *self == ColocUnmeasured::Mean
    }
}

/// Memoised pair lookups: (GPU type, my model, my batch, other model, other batch).
type PairMemo = Mutex<HashMap<(String, String, u32, String, u32), (f64, PairSource)>>;

/// [`Interference`] from a profile database's co-location table by the rule
/// of this module ([`colocated_speed`]). A job without a model is looked up
/// under the name `unknown`, so its pairs take the fallback (the mean of the
/// pairs measured on the GPU type). Counts every evaluation, every one that
/// needed a fallback, and every one that a bound scaled (`coloc_bounded_above`:
/// the tenants' summed speed exceeded `S_max`; `coloc_bounded_below`: it was
/// below `1 − c`). Pair lookups, `S_max` and whole evaluations (by GPU type
/// and the tenants in order; a hit counts as the evaluation did) are
/// memoised (looked up, never iterated: the results do not depend on the memo).
pub struct ProfileInterference {
    db: Arc<ProfileDb>,
    switch_cost: f64,
    evaluations: AtomicU64,
    fallbacks: AtomicU64,
    bounded_above: AtomicU64,
    bounded_below: AtomicU64,
    learned_evals: AtomicU64,
    learned: Option<Arc<super::ncf::LearnedModel>>,
    pairs: PairMemo,
    s_max: Mutex<HashMap<String, f64>>,
    /// Evaluations by (GPU type, tenants in order): my speed and what the
    /// evaluation counted.
    evals: Mutex<KeyMemo<Evaluation>>,
    /// The co-location rows of each pair of models (the two names in
    /// order), row indices ascending; built at the first pair lookup.
    by_pair: std::sync::OnceLock<HashMap<(String, String), Vec<usize>>>,
}

/// One memoised evaluation of [`ProfileInterference::speed`]: the speed,
/// then whether it read a learned pair, needed a fallback, and which bound
/// scaled it.
type Evaluation = (f64, bool, bool, Option<Bound>);

impl ProfileInterference {
    /// Co-location speeds from the run's database `db`, with the
    /// context-switch cost [`SWITCH_COST`].
    pub fn new(db: Arc<ProfileDb>) -> Self {
        ProfileInterference {
            db,
            switch_cost: SWITCH_COST,
            evaluations: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            bounded_above: AtomicU64::new(0),
            bounded_below: AtomicU64::new(0),
            learned_evals: AtomicU64::new(0),
            learned: None,
            pairs: Mutex::new(HashMap::new()),
            s_max: Mutex::new(HashMap::new()),
            evals: Mutex::new(KeyMemo::default()),
            by_pair: std::sync::OnceLock::new(),
        }
    }

    /// The same with context-switch cost `c` (a fraction of the GPU's
    /// throughput in [0, 1]; module docs).
    pub fn with_switch_cost(mut self, c: f64) -> Self {
        self.switch_cost = c.clamp(0.0, 1.0);
        self
    }

    /// The same reading pairs never measured on a GPU type from the learned
    /// model `ncf` first ([`ColocUnmeasured::Learned`]), trained when the
    /// first such pair is read; evaluations that read one count in
    /// `coloc_learned`.
    pub fn with_learned(mut self, ncf: Arc<super::ncf::LearnedModel>) -> Self {
        self.learned = Some(ncf);
        self
    }

    fn pair(&self, gpu_type: &str, me: Tenant<'_>, other: Tenant<'_>) -> (f64, PairSource) {
        let key = (gpu_type.to_string(), me.0.to_string(), me.1, other.0.to_string(), other.1);
        let mut memo = self.pairs.lock().expect("pair memo lock");
        *memo.entry(key).or_insert_with(|| {
            // Only the rows of these two models can match: read those, in row order.
            let by_pair = self.by_pair.get_or_init(|| {
                let mut m: HashMap<(String, String), Vec<usize>> = HashMap::new();
                for (i, r) in self.db.colocation.iter().enumerate() {
                    m.entry(ordered(&r.model_a, &r.model_b)).or_default().push(i);
                }
                m
            });
            let rows = by_pair.get(&ordered(me.0, other.0)).map_or(&[][..], |v| &v[..]);
            let rows = rows.iter().map(|&i| &self.db.colocation[i]);
            let learned = || self.learned.as_deref().map(super::ncf::LearnedModel::get);
            pair_speed_among(&self.db, rows, learned, gpu_type, me, other)
        })
    }

    fn s_max(&self, gpu_type: &str) -> f64 {
        let mut memo = self.s_max.lock().expect("S_max memo lock");
        *memo.entry(gpu_type.to_string()).or_insert_with(|| best_pair_sum(&self.db, gpu_type))
    }
}

impl ProfileInterference {
    /// One evaluation by the module rule (the memo's slow path).
    fn evaluate(&self, gpu_type: &str, me: &JobSpec, others: &[&JobSpec]) -> Evaluation {
        let gpu_type = gpu_type.to_ascii_lowercase();
        let mut tenants: Vec<Tenant<'_>> = Vec::with_capacity(others.len() + 1);
        tenants.push(tenant(me));
        tenants.extend(others.iter().map(|o| tenant(o)));
        let s_max = self.s_max(&gpu_type);
        let mut learned = false;
        let r = tenant_speeds(&tenants, s_max, self.switch_cost, |a, b| {
            let p = self.pair(&gpu_type, a, b);
            learned |= p.1 == PairSource::Learned;
            p
        });
        (r.speeds.first().copied().unwrap_or(1.0), learned, r.fallback, r.bound)
    }
}

/// Two model names in order, the key of [`ProfileInterference`]'s row index.
fn ordered(a: &str, b: &str) -> (String, String) {
    if a <= b { (a.to_string(), b.to_string()) } else { (b.to_string(), a.to_string()) }
}

/// A job as a tenant of the rule: its model (`unknown` without one) and
/// per-GPU batch (0 without one).
pub fn tenant(spec: &JobSpec) -> Tenant<'_> {
    (spec.model().unwrap_or("unknown"), spec.local_bsz().unwrap_or(0))
}

impl Interference for ProfileInterference {
    fn name(&self) -> &'static str {
        "profile-coloc"
    }

    fn speed(&self, gpu_type: &str, me: &JobSpec, others: &[&JobSpec]) -> f64 {
        let mut memo = self.evals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        memo.start();
        memo.push_name(gpu_type);
        for t in std::iter::once(me).chain(others.iter().copied()).map(tenant) {
            memo.push_name(t.0);
            memo.push(t.1);
        }
        let (speed, learned, fallback, bound) = match memo.get() {
            Some(e) => e,
            None => {
                let e = self.evaluate(gpu_type, me, others);
                memo.insert(e);
                e
            }
        };
        drop(memo);
        if learned {
            self.learned_evals.fetch_add(1, Ordering::Relaxed);
        }
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        if fallback {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        match bound {
            Some(Bound::Above) => self.bounded_above.fetch_add(1, Ordering::Relaxed),
            Some(Bound::Below) => self.bounded_below.fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
        speed
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = vec![
            ("coloc_evaluations", self.evaluations.load(Ordering::Relaxed)),
            ("coloc_fallbacks", self.fallbacks.load(Ordering::Relaxed)),
            ("coloc_bounded_above", self.bounded_above.load(Ordering::Relaxed)),
            ("coloc_bounded_below", self.bounded_below.load(Ordering::Relaxed)),
        ];
        // Only with the learned option, so the default's summary is unchanged.
        if self.learned.is_some() {
            c.push(("coloc_learned", self.learned_evals.load(Ordering::Relaxed)));
        }
        c
    }
}

/// An [`Interference`] built on first use by `build`: a run that may
/// co-locate hands it to the engine without paying for its database (e.g.
/// parsing the builtin profile tables) until a job actually shares a GPU.
/// Its counters are the built model's (and the model is built to give them).
pub struct LazyInterference {
    build: Box<dyn Fn() -> Box<dyn Interference> + Send + Sync>,
    model: std::sync::OnceLock<Box<dyn Interference>>,
}

impl LazyInterference {
    /// A model that `build` makes when first asked for a speed.
    pub fn new(build: impl Fn() -> Box<dyn Interference> + Send + Sync + 'static) -> Self {
        LazyInterference { build: Box::new(build), model: std::sync::OnceLock::new() }
    }

    fn get(&self) -> &dyn Interference {
        self.model.get_or_init(|| (self.build)()).as_ref()
    }
}

impl Interference for LazyInterference {
    fn name(&self) -> &'static str {
        self.get().name()
    }

    fn speed(&self, gpu_type: &str, me: &JobSpec, others: &[&JobSpec]) -> f64 {
        self.get().speed(gpu_type, me, others)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.get().counters()
    }
}

pub use super::db::Tenant;

/// Where a pair's speed came from (module docs, in the order tried).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairSource {
    /// Measured on the GPU type at exactly these batches.
    Measured,
    /// Measured on the GPU type at the nearest measured batches (a fallback).
    NearestBatch,
    /// The same model pair measured on another GPU type (a fallback).
    OtherGpuType,
    /// The learned model's prediction (a fallback; [`ColocUnmeasured::Learned`]).
    Learned,
    /// The mean of all pair speeds measured on the GPU type (a fallback).
    TypeMean,
    /// Nothing measured on the GPU type: 0.5, equal time slicing (a fallback).
    TimeSlice,
}

impl PairSource {
    /// Whether the pair of models was measured on the GPU type (at some batches).
    pub fn measured_on_type(self) -> bool {
        matches!(self, PairSource::Measured | PairSource::NearestBatch)
    }

    /// Whether this counts as a fallback.
    pub fn is_fallback(self) -> bool {
        self != PairSource::Measured
    }
}

/// One pair's speed for `me` next to `other` on `gpu_type` (lower case),
/// capped at 1, and where it came from.
pub fn pair_speed(db: &ProfileDb, gpu_type: &str, me: Tenant<'_>, other: Tenant<'_>) -> (f64, PairSource) {
    pair_speed_with(db, None, gpu_type, me, other)
}

/// [`pair_speed`], reading a pair of models never measured on the GPU type
/// from `learned` first when given ([`ColocUnmeasured::Learned`]).
pub fn pair_speed_with(
    db: &ProfileDb,
    learned: Option<&super::ncf::Ncf>,
    gpu_type: &str,
    me: Tenant<'_>,
    other: Tenant<'_>,
) -> (f64, PairSource) {
    pair_speed_among(db, db.colocation.iter(), || learned, gpu_type, me, other)
}

/// [`pair_speed_with`] reading the pair's rows from `rows`: the rows of
/// `db.colocation` in their order, or any subsequence of them that keeps
/// every row of the two models (the rows of other models never match);
/// `learned` is called only for a pair never measured on the GPU type.
fn pair_speed_among<'r, 'n>(
    db: &ProfileDb,
    rows: impl Iterator<Item = &'r ColocRow> + Clone,
    learned: impl FnOnce() -> Option<&'n super::ncf::Ncf>,
    gpu_type: &str,
    me: Tenant<'_>,
    other: Tenant<'_>,
) -> (f64, PairSource) {
    // A row read from `me`'s side: (my batch, other's batch, my speed). A
    // row of one model with itself reads both ways (its batches may differ).
    let oriented = |r: &ColocRow| -> [Option<(u32, u32, f64)>; 2] {
        [
            (r.model_a == me.0 && r.model_b == other.0).then_some((r.bsz_a, r.bsz_b, r.speed_a)),
            (r.model_b == me.0 && r.model_a == other.0).then_some((r.bsz_b, r.bsz_a, r.speed_b)),
        ]
    };
    let nearest = |rows: Vec<(u32, u32, f64)>| {
        rows.into_iter()
            .min_by_key(|&(a, b, _)| (a.abs_diff(me.1) + b.abs_diff(other.1), a, b))
            .map(|(a, b, s)| (s, a != me.1 || b != other.1))
    };
    let on_type: Vec<_> = rows.clone().filter(|r| r.gpu_type == gpu_type).flat_map(oriented).flatten().collect();
    if let Some((s, inexact)) = nearest(on_type) {
        return (s.min(1.0), if inexact { PairSource::NearestBatch } else { PairSource::Measured });
    }
    if let Some(s) = learned().and_then(|m| m.predict(gpu_type, me, other)) {
        return (s.min(1.0), PairSource::Learned);
    }
    let anywhere: Vec<_> = rows.flat_map(oriented).flatten().collect();
    if let Some((s, _)) = nearest(anywhere) {
        return (s.min(1.0), PairSource::OtherGpuType);
    }
    let speeds: Vec<f64> =
        db.colocation.iter().filter(|r| r.gpu_type == gpu_type).flat_map(|r| [r.speed_a, r.speed_b]).collect();
    if speeds.is_empty() {
        (0.5, PairSource::TimeSlice)
    } else {
        ((speeds.iter().sum::<f64>() / speeds.len() as f64).min(1.0), PairSource::TypeMean)
    }
}

/// `S_max` of the module rule: the best summed speed of a pair measured on
/// `gpu_type` (lower case), each speed capped at 1, and at least 1 (a GPU
/// type without measured pairs: 1).
pub fn best_pair_sum(db: &ProfileDb, gpu_type: &str) -> f64 {
    db.colocation
        .iter()
        .filter(|r| r.gpu_type == gpu_type)
        .map(|r| r.speed_a.min(1.0) + r.speed_b.min(1.0))
        .fold(1.0, f64::max)
}

/// Which bound of the module rule scaled the speeds, if one did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The summed estimate exceeded `S_max` and was scaled down to it.
    Above,
    /// The summed estimate was below `1 − c` and was scaled up to it.
    Below,
}

/// The speeds of the tenants of one GPU by the module rule.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSpeeds {
    /// Per tenant, in the order given, in (0, 1].
    pub speeds: Vec<f64>,
    /// Whether any pair read needed a fallback.
    pub fallback: bool,
    /// The bound that scaled the speeds, if any.
    pub bound: Option<Bound>,
}

/// The speeds of all `tenants` of one GPU (module rule), with `s_max` the
/// GPU type's [`best_pair_sum`], `switch_cost` its `c`, and `pair(a, b)` the
/// speed of `a` next to `b` ([`pair_speed`]).
pub fn tenant_speeds<'a>(
    tenants: &[Tenant<'a>],
    s_max: f64,
    switch_cost: f64,
    mut pair: impl FnMut(Tenant<'a>, Tenant<'a>) -> (f64, PairSource),
) -> TenantSpeeds {
    let n = tenants.len();
    if n < 2 {
        return TenantSpeeds { speeds: vec![1.0; n], fallback: false, bound: None };
    }
    let mut fallback = false;
    let mut raw = vec![1.0; n];
    for (i, &a) in tenants.iter().enumerate() {
        for (j, &b) in tenants.iter().enumerate() {
            if i != j {
                let (p, src) = pair(a, b);
                raw[i] *= p;
                fallback |= src.is_fallback();
            }
        }
    }
    let lo = (1.0 - switch_cost).clamp(0.0, 1.0);
    let hi = s_max.max(lo);
    let sum: f64 = raw.iter().sum();
    let (speeds, bound) = if !(sum.is_finite() && sum > 0.0) {
        (vec![lo / n as f64; n], Some(Bound::Below))
    } else if sum > hi {
        (raw.iter().map(|e| e * (hi / sum)).collect(), Some(Bound::Above))
    } else if sum < lo {
        (raw.iter().map(|e| (e * (lo / sum)).min(1.0)).collect(), Some(Bound::Below))
    } else {
        (raw, None)
    };
    TenantSpeeds { speeds, fallback, bound }
}

/// The speed of `me` on a GPU of `gpu_type` shared with `others` (1.0 =
/// as fast as alone) by the module rule with context-switch cost
/// [`SWITCH_COST`], and whether any pair needed a fallback.
pub fn colocated_speed(db: &ProfileDb, gpu_type: &str, me: Tenant<'_>, others: &[Tenant<'_>]) -> (f64, bool) {
    colocated_speed_with(db, gpu_type, me, others, SWITCH_COST)
}

/// [`colocated_speed`] with context-switch cost `switch_cost` (a fraction of
/// the GPU's throughput).
pub fn colocated_speed_with(
    db: &ProfileDb,
    gpu_type: &str,
    me: Tenant<'_>,
    others: &[Tenant<'_>],
    switch_cost: f64,
) -> (f64, bool) {
    let gpu_type = gpu_type.to_ascii_lowercase();
    let mut tenants = Vec::with_capacity(others.len() + 1);
    tenants.push(me);
    tenants.extend_from_slice(others);
    let r = tenant_speeds(&tenants, best_pair_sum(db, &gpu_type), switch_cost, |a, b| pair_speed(db, &gpu_type, a, b));
    (r.speeds[0], r.fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs by hand. k80: x/y 0.8/0.6, x/x 0.5/0.5, p/q 0.3/0.4 (a measured
    /// pair below time slicing); best k80 pair sum 0.8 + 0.6 = 1.4, mean of
    /// the k80 speeds (0.8 + 0.6 + 0.5 + 0.5 + 0.3 + 0.4) / 6 = 3.1 / 6 =
    /// 0.516667. v100: y/z 0.9/0.7 (S_max 1.6). t4: n/n 1.2/1.2, read as 1/1
    /// (S_max 2). p100: a/b 0.2/0.3 (S_max max(1, 0.5) = 1, mean 0.25).
    fn db() -> ProfileDb {
        let row = |g: &str, a: &str, ba: u32, b: &str, bb: u32, sa: f64, sb: f64| ColocRow {
            gpu_type: g.into(),
            model_a: a.into(),
            bsz_a: ba,
            model_b: b.into(),
            bsz_b: bb,
            speed_a: sa,
            speed_b: sb,
            source: "hand".into(),
        };
        ProfileDb {
            colocation: vec![
                row("k80", "x", 32, "y", 64, 0.8, 0.6),
                row("k80", "x", 32, "x", 32, 0.5, 0.5),
                row("k80", "p", 16, "q", 16, 0.3, 0.4),
                row("v100", "y", 64, "z", 16, 0.9, 0.7),
                row("t4", "n", 8, "n", 8, 1.2, 1.2),
                row("p100", "a", 1, "b", 1, 0.2, 0.3),
                row("p100", "m", 16, "m", 64, 0.45, 0.65),
            ],
            ..Default::default()
        }
    }

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// `n` tenants of one model at one batch.
    fn same(n: usize, t: Tenant<'static>) -> Vec<Tenant<'static>> {
        vec![t; n - 1]
    }

    #[test]
    fn two_tenants_by_hand() {
        let db = db();
        assert_eq!(colocated_speed(&db, "k80", ("x", 32), &[]), (1.0, false));
        // Measured pair, both orientations, exactly.
        assert_eq!(colocated_speed(&db, "K80", ("x", 32), &[("y", 64)]), (0.8, false));
        assert_eq!(colocated_speed(&db, "k80", ("y", 64), &[("x", 32)]), (0.6, false));
        // A measured pair below time slicing (0.3 + 0.4 = 0.7 < 0.95): the GPU
        // time-slices them instead, so both scale by 0.95 / 0.7: q 0.4 × 0.95 /
        // 0.7 = 0.542857, p 0.3 × 0.95 / 0.7 = 0.407143 (sum 0.95).
        let (s, fb) = colocated_speed(&db, "k80", ("q", 16), &[("p", 16)]);
        assert!(near(s, 0.38 / 0.7) && !fb && (s - 0.542_857).abs() < 1e-6, "{s}");
        let (s, _) = colocated_speed(&db, "k80", ("p", 16), &[("q", 16)]);
        assert!((s - 0.407_143).abs() < 1e-6, "{s}");
        // Nearest batch: x at 48 next to y at 64 reads the (32, 64) pair, a fallback, still measured.
        assert_eq!(colocated_speed(&db, "k80", ("x", 48), &[("y", 64)]), (0.8, true));
        // One model with itself at two batches reads the row from either side, exactly.
        assert_eq!(colocated_speed(&db, "p100", ("m", 64), &[("m", 16)]), (0.65, false));
        assert_eq!(colocated_speed(&db, "p100", ("m", 16), &[("m", 64)]), (0.45, false));
        // Pair measured only on v100, borrowed for k80: z 0.7, y 0.9, sum 1.6
        // > S_max(k80) 1.4, so both scale by 1.4 / 1.6: z 0.6125, y 0.7875.
        let (s, fb) = colocated_speed(&db, "k80", ("z", 16), &[("y", 64)]);
        assert!(near(s, 0.6125) && fb, "{s}");
        let (s, _) = colocated_speed(&db, "k80", ("y", 64), &[("z", 16)]);
        assert!(near(s, 0.7875), "{s}");
        // Unmeasured pair on k80: the k80 mean 0.516667 each, sum 1.033 in [0.95, 1.4]: kept.
        let (s, fb) = colocated_speed(&db, "k80", ("w", 8), &[("q", 8)]);
        assert!(near(s, 3.1 / 6.0) && fb, "{s}");
        // Unmeasured pair on p100: mean (0.2 + 0.3 + 0.45 + 0.65) / 4 = 0.4 each,
        // sum 0.8 < 0.95: scaled up to 0.95 / 2 = 0.475 each.
        let (s, fb) = colocated_speed(&db, "p100", ("w", 8), &[("v", 8)]);
        assert!(near(s, 0.475) && fb, "{s}");
        // Nothing on the GPU type: equal time slicing 0.5 each, sum 1 = S_max 1: kept.
        assert_eq!(colocated_speed(&ProfileDb::default(), "a100", ("w", 8), &[("q", 8)]), (0.5, true));
        // Measured speeds above 1 (noise) read as 1: sum 2 = S_max(t4).
        assert_eq!(colocated_speed(&db, "t4", ("n", 8), &[("n", 8)]), (1.0, false));
    }

    #[test]
    fn three_four_and_eight_tenants_by_hand() {
        let db = db();
        let c = SWITCH_COST;
        assert_eq!(c, 0.05);
        // Measured, inside the bounds: x next to y and x: e_x = 0.8 × 0.5 =
        // 0.4, e_y = 0.6 × 0.6 = 0.36, the other x 0.4; E = 1.16 in [0.95, 1.4]: kept.
        let (s, fb) = colocated_speed(&db, "k80", ("x", 32), &[("y", 64), ("x", 32)]);
        assert!(near(s, 0.4) && !fb, "{s}");
        let (s, _) = colocated_speed(&db, "k80", ("y", 64), &[("x", 32), ("x", 32)]);
        assert!(near(s, 0.36), "{s}");
        // Measured, below time slicing: N x's at pair speed 0.5 get 0.5^(N-1)
        // each (E = N × 0.5^(N-1) = 0.75, 0.5, 0.0625 for N = 3, 4, 8), all
        // below 0.95: scaled up to 0.95 / N each.
        for (n, want) in [(3, 0.95 / 3.0), (4, 0.2375), (8, 0.11875)] {
            let (s, fb) = colocated_speed(&db, "k80", ("x", 32), &same(n, ("x", 32)));
            assert!(near(s, want) && !fb, "{n}: {s}");
        }
        // Measured, above what one GPU gave a pair: N n's at pair speed 1 get
        // 1 each by the product (E = N); S_max(t4) = 2: 2 / N each.
        for (n, want) in [(3, 2.0 / 3.0), (4, 0.5), (8, 0.25)] {
            let (s, fb) = colocated_speed(&db, "t4", ("n", 8), &same(n, ("n", 8)));
            assert!(near(s, want) && !fb, "{n}: {s}");
        }
        // Unmeasured, nothing on the GPU type: pairs 0.5, so the same
        // 0.95 / N as the x's (S_max 1).
        for (n, want) in [(3, 0.95 / 3.0), (4, 0.2375), (8, 0.11875)] {
            let (s, fb) = colocated_speed(&ProfileDb::default(), "a100", ("w", 8), &same(n, ("w", 8)));
            assert!(near(s, want) && fb, "{n}: {s}");
        }
        // Mixed, four tenants x, y, w, w on k80 (w's pairs read the mean m = 3.1 / 6):
        // e_x = 0.8 m², e_y = 0.6 m², e_w = m³ each; E = m² (1.4 + 2m) =
        // m² × 2.433333 < 0.95, so s = 0.95 e / E: x = 0.76 / 2.433333 =
        // 0.312329, y = 0.57 / 2.433333 = 0.234247, w = 0.95 m / 2.433333 = 0.201712.
        let m = 3.1 / 6.0;
        let k = 1.4 + 2.0 * m;
        let (s, fb) = colocated_speed(&db, "k80", ("x", 32), &[("y", 64), ("w", 8), ("w", 8)]);
        assert!(near(s, 0.76 / k) && fb && (s - 0.312_329).abs() < 1e-6, "{s}");
        let (s, _) = colocated_speed(&db, "k80", ("y", 64), &[("x", 32), ("w", 8), ("w", 8)]);
        assert!((s - 0.234_247).abs() < 1e-6, "{s}");
        let (s, _) = colocated_speed(&db, "k80", ("w", 8), &[("x", 32), ("y", 64), ("w", 8)]);
        assert!((s - 0.201_712).abs() < 1e-6, "{s}");
        // Eight tenants, two measured models and unmeasured ones, on v100
        // (S_max 1.6, mean (0.9 + 0.7) / 2 = 0.8): y, z and six w's. e_y =
        // 0.9 × 0.8^6, e_z = 0.7 × 0.8^6, e_w = 0.8^7 each; E = 0.8^6 (1.6 +
        // 6 × 0.8) = 0.262144 × 6.4 = 1.677722 > 1.6: s = 1.6 e / E, so y =
        // 1.6 × 0.9 / 6.4 = 0.225, z = 0.175, w = 1.6 × 0.8 / 6.4 = 0.2.
        let ws = [("w", 8); 6];
        let mut others = vec![("z", 16)];
        others.extend_from_slice(&ws);
        let (s, _) = colocated_speed(&db, "v100", ("y", 64), &others);
        assert!(near(s, 0.225), "{s}");
        let mut others = vec![("y", 64), ("z", 16)];
        others.extend_from_slice(&ws[1..]);
        let (s, _) = colocated_speed(&db, "v100", ("w", 8), &others);
        assert!(near(s, 0.2), "{s}");
        // Without a switch cost the floor is plain time slicing: 1 / 4 each.
        let (s, _) = colocated_speed_with(&db, "k80", ("x", 32), &same(4, ("x", 32)), 0.0);
        assert!(near(s, 0.25), "{s}");
    }

    #[cfg(feature = "learned")]
    #[test]
    fn the_learned_option_reads_unmeasured_pairs_from_the_model_and_counts_them() {
        // z/y is measured only on v100, w nowhere: on k80, z next to y is a
        // pair the learned model knows (both models and k80 are in its ids):
        // its prediction, before the borrowed v100 pair; w next to q is not
        // (w unknown): the k80 mean 3.1 / 6, as without the option.
        let db = Arc::new(db());
        let ncf = Arc::new(super::super::ncf::Ncf::from_db(&db));
        let want = ncf.predict("k80", ("z", 16), ("y", 64)).unwrap();
        assert_eq!(pair_speed_with(&db, Some(&ncf), "k80", ("z", 16), ("y", 64)), (want, PairSource::Learned));
        assert_eq!(pair_speed(&db, "k80", ("z", 16), ("y", 64)), (0.7, PairSource::OtherGpuType));
        let (s, src) = pair_speed_with(&db, Some(&ncf), "k80", ("w", 8), ("q", 16));
        assert!(near(s, 3.1 / 6.0) && src == PairSource::TypeMean, "{s} {src:?}");
        // Measured pairs stay measured.
        assert_eq!(pair_speed_with(&db, Some(&ncf), "k80", ("x", 32), ("y", 64)), (0.8, PairSource::Measured));
        // The counter: only with the option; one evaluation that read a learned pair.
        let spec = |m: &str, b: u32| JobSpec {
            id: crate::ids::JobId(0),
            name: "t".into(),
            line: 0,
            submit: crate::time::SimTime::ZERO,
            duration_ms: 10,
            gpus: 1,
            vc: crate::ids::VcId(0),
            recorded_shape: false,
            recorded_split: vec![1].into(),
            task: None,
            extra: Some(Box::new(crate::job::JobExtra {
                model: Some(m.into()),
                local_bsz: Some(b),
                ..Default::default()
            })),
        };
        let plain = ProfileInterference::new(db.clone());
        plain.speed("k80", &spec("z", 16), &[&spec("y", 64)]);
        assert!(plain.counters().iter().all(|(k, _)| *k != "coloc_learned"));
        // Trained at the first pair that needs it, not before: a measured pair does not.
        let lazy = Arc::new(super::super::ncf::LearnedModel::new(db.clone()));
        let learned = ProfileInterference::new(db.clone()).with_learned(lazy.clone());
        learned.speed("k80", &spec("x", 32), &[&spec("y", 64)]);
        assert!(!lazy.is_trained());
        learned.speed("k80", &spec("z", 16), &[&spec("y", 64)]);
        assert!(lazy.is_trained());
        assert_eq!(lazy.get().predict("k80", ("z", 16), ("y", 64)), Some(want), "the same training");
        let c = learned.counters();
        assert!(c.contains(&("coloc_learned", 1)) && c.contains(&("coloc_evaluations", 2)), "{c:?}");
    }

    #[test]
    fn the_sum_stays_within_the_bounds() {
        // Every tenant set on every type, measured pairs of two included:
        // summed speed in [1 - c, S_max].
        let db = db();
        let models = [("x", 32), ("y", 64), ("z", 16), ("n", 8), ("w", 8), ("p", 16), ("q", 16)];
        for g in ["k80", "v100", "t4", "p100", "a100"] {
            let s_max = best_pair_sum(&db, g);
            for n in 2..=8usize {
                for start in 0..models.len() {
                    let ts: Vec<Tenant<'_>> = (0..n).map(|i| models[(start + i * 3) % models.len()]).collect();
                    let r = tenant_speeds(&ts, s_max, SWITCH_COST, |a, b| pair_speed(&db, g, a, b));
                    let sum: f64 = r.speeds.iter().sum();
                    assert!(r.speeds.iter().all(|&s| s > 0.0 && s <= 1.0), "{g} {ts:?} {r:?}");
                    assert!(sum >= 0.95 - 1e-12 && sum <= s_max + 1e-12, "{g} {ts:?} {sum}");
                }
            }
        }
    }
}
