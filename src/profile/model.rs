//! Performance models: a job's iteration time from the profile database, and
//! the rate model the engine calls with it.
//!
//! The default model interpolates the measured table ([`TableModel`]). When
//! the table lacks the exact point it falls back by a fixed rule, and every
//! fallback is counted so a run can say how much of it rests on measurements:
//!
//! 1. **model**: a model the table does not know borrows the measured model of
//!    the same family with the most rows (else `resnet50-imagenet`);
//! 2. **GPU type**: a GPU type not measured for the model borrows the model's
//!    best-covered GPU type, scaled by the median single-GPU iteration-time
//!    ratio between the two types over the models measured on both (1.0 when
//!    the asked type is measured for no model at all);
//! 3. **split** (how the GPUs sit on servers): the exact split, else Gavel's
//!    "spread" rows for the same GPU count when the job spans several
//!    servers, else the measured split with the same GPU count and the same
//!    number of servers, else the same GPU count on any split, else weak
//!    scaling — the step time at a fixed per-GPU batch is taken from the
//!    nearest measured GPU count with no more servers than asked;
//! 4. **batch**: an unmeasured per-GPU batch is interpolated linearly between
//!    the two neighbouring measured batches of the chosen split; above the
//!    largest measured batch the iteration time grows in proportion to the
//!    batch (per-GPU throughput saturates, GENIE TPDS 2020 Observation 2);
//!    below the smallest it follows the line through the two smallest points,
//!    bounded by proportional scaling and the smallest point's time.
//!
//! Where two sources measured the same point (8 Gavel/Sia overlaps on V100),
//! the table reads their median (the mean of the two).

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

use super::db::{ProfileDb, Split, ThroughputRow};

/// Which fallbacks an estimate needed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fallbacks {
    /// The model was not measured; a same-family model stood in.
    pub model: bool,
    /// The GPU type was not measured for the model; another type, scaled, stood in.
    pub gpu_type: bool,
    /// The exact split over servers was not measured.
    pub split: bool,
    /// The per-GPU batch was not measured for the chosen split (interpolated).
    pub batch: bool,
    /// GENIE had no fit for the model (or predicted a non-positive rate), so
    /// table interpolation stood in.
    pub genie_table: bool,
}

impl Fallbacks {
    /// True when the estimate is a measured point.
    pub fn none(self) -> bool {
        !(self.model || self.gpu_type || self.split || self.batch || self.genie_table)
    }

    /// The flags of either estimate.
    pub fn or(self, o: Fallbacks) -> Fallbacks {
        Fallbacks {
            model: self.model || o.model,
            gpu_type: self.gpu_type || o.gpu_type,
            split: self.split || o.split,
            batch: self.batch || o.batch,
            genie_table: self.genie_table || o.genie_table,
        }
    }
}

/// An iteration-time estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Seconds per training iteration of the whole job.
    pub iter_time_s: f64,
    /// The fallbacks it needed.
    pub fallbacks: Fallbacks,
}

/// Predicts a data-parallel job's iteration time.
pub trait PerfModel: Send + Sync {
    /// The model's name for outputs.
    fn name(&self) -> &'static str;

    /// Seconds per iteration of `model` at per-GPU batch `local_bsz` on
    /// `gpu_type` GPUs split over servers as `split` (GPUs per server,
    /// descending; its sum is the GPU count).
    fn iter_time(&self, model: &str, gpu_type: &str, local_bsz: u32, split: &[u32]) -> Estimate;
}

/// Table interpolation over the measured points of a [`ProfileDb`] (the
/// default profile model: it returns every point one source measured exactly,
/// and the median where two sources measured the same point).
///
/// `D` is how it holds the database: borrowed (`&ProfileDb`) for a model used
/// within one scope, or shared (`Arc<ProfileDb>`, the run's) for one that
/// lives as long as the run (a boxed rate model).
pub struct TableModel<D: Deref<Target = ProfileDb>> {
    db: D,
    /// Rows by (model, GPU type).
    index: BTreeMap<(String, String), Vec<usize>>,
    /// Single-GPU iteration time at the smallest measured batch, by (model, GPU type).
    single: BTreeMap<(String, String), f64>,
}

impl<D: Deref<Target = ProfileDb>> TableModel<D> {
    /// The model over `db`.
    pub fn new(db: D) -> Self {
        let mut index: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
        // Rows of one (model, GPU type) mostly stand together (the canonical
        // order sorts by them): each run of them is keyed once. Every key's
        // rows stay in row order either way.
        let mut flush = |key: (&str, &str), rows: &mut Vec<usize>| {
            index.entry((key.0.to_string(), key.1.to_string())).or_default().append(rows);
        };
        let mut run: Option<(&str, &str)> = None;
        let mut rows = Vec::new();
        for (i, r) in db.throughput.iter().enumerate() {
            let key = (r.model.as_str(), r.gpu_type.as_str());
            if run.is_some_and(|k| k != key) {
                flush(run.unwrap_or(key), &mut rows);
            }
            run = Some(key);
            rows.push(i);
        }
        if let Some(key) = run {
            flush(key, &mut rows);
        }
        let mut single = BTreeMap::new();
        for (key, rows) in &index {
            let best = rows
                .iter()
                .map(|&i| &db.throughput[i])
                .filter(|r| r.gpus == 1)
                .min_by(|a, b| a.local_bsz.cmp(&b.local_bsz).then(a.iter_time_s.total_cmp(&b.iter_time_s)));
            if let Some(r) = best {
                single.insert(key.clone(), r.iter_time_s / f64::from(r.local_bsz));
            }
        }
        TableModel { db, index, single }
    }

    /// The database it reads.
    pub fn db(&self) -> &ProfileDb {
        &self.db
    }

    /// Models with measured throughput, sorted.
    pub fn measured_models(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.index.keys().map(|(m, _)| m.as_str()).collect();
        v.dedup();
        v
    }

    /// Per-GPU batches measured for a model on a GPU type, ascending.
    pub fn measured_batches_on(&self, model: &str, gpu_type: &str) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .index
            .get(&(model.to_string(), gpu_type.to_string()))
            .map(|rows| rows.iter().map(|&i| self.db.throughput[i].local_bsz).collect())
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Per-GPU batches measured for a model (any GPU type), ascending.
    pub fn measured_batches(&self, model: &str) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .index
            .range((model.to_string(), String::new())..)
            .take_while(|((m, _), _)| m == model)
            .flat_map(|(_, rows)| rows.iter().map(|&i| self.db.throughput[i].local_bsz))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// True when the table has a measured point of `model` on `gpu_type` at
    /// exactly `split` (any batch); a split of several servers with one GPU
    /// on each also matches Gavel's `spread` rows of that GPU count when it
    /// has two GPUs (two GPUs on different servers can only be `1+1`).
    pub fn has_split(&self, model: &str, gpu_type: &str, split: &[u32]) -> bool {
        let gpus: u32 = split.iter().sum();
        self.index.get(&(model.to_string(), gpu_type.to_string())).is_some_and(|rows| {
            rows.iter().map(|&i| &self.db.throughput[i]).any(|r| match &r.split {
                Split::Exact(s) => s == split,
                Split::Spread => gpus == 2 && split == [1, 1],
            })
        })
    }

    fn rows_for(&self, model: &str) -> usize {
        self.index
            .range((model.to_string(), String::new())..)
            .take_while(|((m, _), _)| m == model)
            .map(|(_, r)| r.len())
            .sum()
    }

    fn resolve_model<'s>(&'s self, model: &'s str) -> (&'s str, bool) {
        if self.rows_for(model) > 0 {
            return (model, false);
        }
        let family = self.db.models.iter().find(|m| m.model == model).map(|m| m.family.as_str());
        let stand_in = family
            .and_then(|f| {
                self.db
                    .models
                    .iter()
                    .filter(|m| m.family == f)
                    .map(|m| (self.rows_for(&m.model), m.model.as_str()))
                    .filter(|&(n, _)| n > 0)
                    .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))
                    .map(|(_, m)| m)
            })
            .unwrap_or("resnet50-imagenet");
        (stand_in, true)
    }

    /// The GPU type to read for `model`, the factor to scale its times by, and
    /// whether that was a fallback.
    pub fn resolve_gpu(&self, model: &str, gpu_type: &str) -> (String, f64, bool) {
        if self.index.contains_key(&(model.to_string(), gpu_type.to_string())) {
            return (gpu_type.to_string(), 1.0, false);
        }
        let best = self
            .index
            .range((model.to_string(), String::new())..)
            .take_while(|((m, _), _)| m == model)
            .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.1.cmp(&a.0.1)))
            .map(|((_, g), _)| g.clone())
            .unwrap_or_default();
        // Median ratio of per-sample single-GPU times, asked type / stand-in, over models measured on both.
        let mut ratios: Vec<f64> = self
            .single
            .iter()
            .filter(|((_, g), _)| *g == gpu_type)
            .filter_map(|((m, _), &t)| self.single.get(&(m.clone(), best.clone())).map(|&b| t / b))
            .collect();
        ratios.sort_by(f64::total_cmp);
        let n = ratios.len();
        let ratio = match n {
            0 => 1.0,
            _ if n % 2 == 1 => ratios[n / 2],
            _ => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
        };
        (best, ratio, true)
    }

    /// The rows of one split to read, and whether that was a fallback.
    fn choose_split<'r>(&self, rows: &[&'r ThroughputRow], split: &[u32]) -> (Vec<&'r ThroughputRow>, bool) {
        let gpus: u32 = split.iter().sum();
        let servers = split.len();
        let exact: Vec<_> =
            rows.iter().copied().filter(|r| matches!(&r.split, Split::Exact(s) if s == split)).collect();
        if !exact.is_empty() {
            return (exact, false);
        }
        if servers > 1 {
            let spread: Vec<_> = rows.iter().copied().filter(|r| r.gpus == gpus && r.split == Split::Spread).collect();
            if !spread.is_empty() {
                return (spread, true);
            }
        }
        let same_gpus = |want_servers: Option<usize>| -> Vec<&'r ThroughputRow> {
            // Among splits of this GPU count, the one closest in its largest part.
            let mut by_split: BTreeMap<Vec<u32>, Vec<&'r ThroughputRow>> = BTreeMap::new();
            for r in rows.iter().copied() {
                if let Split::Exact(s) = &r.split
                    && r.gpus == gpus
                    && want_servers.is_none_or(|n| s.len() == n)
                {
                    by_split.entry(s.clone()).or_default().push(r);
                }
            }
            by_split
                .into_iter()
                // Closest largest part, then closest server count, then the
                // least fragmented (fewest servers, largest parts first).
                .min_by_key(|(s, _)| {
                    (s[0].abs_diff(split[0]), s.len().abs_diff(split.len()), s.len(), std::cmp::Reverse(s.clone()))
                })
                .map(|(_, v)| v)
                .unwrap_or_default()
        };
        for want in [Some(servers), None] {
            let v = same_gpus(want);
            if !v.is_empty() {
                return (v, true);
            }
        }
        // Weak scaling: nearest measured GPU count with no more servers.
        let mut by_split: BTreeMap<(u32, Vec<u32>), Vec<&'r ThroughputRow>> = BTreeMap::new();
        for r in rows.iter().copied() {
            if let Split::Exact(s) = &r.split
                && s.len() <= servers
            {
                by_split.entry((r.gpus.abs_diff(gpus), s.clone())).or_default().push(r);
            }
        }
        let v = by_split.into_iter().next().map(|(_, v)| v).unwrap_or_else(|| rows.to_vec());
        (v, true)
    }
}

/// Iteration time at `bsz` from rows of one split: exact where measured
/// (the median where several sources measured the same point); linear between
/// the two neighbouring measured batches; above the largest measured batch,
/// proportional to the batch (throughput saturated); below the smallest, the
/// straight line through the two smallest points, kept between proportional
/// scaling and the smallest point's time (a smaller batch is never slower, and
/// never faster than linear scaling).
fn at_batch(rows: &[&ThroughputRow], bsz: u32) -> (f64, bool) {
    let mut pts: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for r in rows {
        pts.entry(r.local_bsz).or_default().push(r.iter_time_s);
    }
    let pts: Vec<(f64, f64)> = pts
        .into_iter()
        .map(|(b, mut v)| {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
            (f64::from(b), median)
        })
        .collect();
    let x = f64::from(bsz);
    if let Some(&(_, t)) = pts.iter().find(|p| p.0 == x) {
        return (t, false);
    }
    let (first, last) = (pts[0], pts[pts.len() - 1]);
    if x > last.0 {
        return (last.1 * x / last.0, true);
    }
    if x < first.0 {
        let line = match pts.get(1) {
            Some(&(x1, t1)) => first.1 + (t1 - first.1) * (x - first.0) / (x1 - first.0),
            None => first.1,
        };
        return (line.clamp(first.1 * x / first.0, first.1), true);
    }
    let i = pts.partition_point(|p| p.0 < x);
    let ((x0, t0), (x1, t1)) = (pts[i - 1], pts[i]);
    (t0 + (t1 - t0) * (x - x0) / (x1 - x0), true)
}

impl<D: Deref<Target = ProfileDb> + Send + Sync> PerfModel for TableModel<D> {
    fn name(&self) -> &'static str {
        "table"
    }

    fn iter_time(&self, model: &str, gpu_type: &str, local_bsz: u32, split: &[u32]) -> Estimate {
        let gpu_type = &gpu_type.to_ascii_lowercase();
        let mut fb = Fallbacks::default();
        let (model, m_fb) = self.resolve_model(model);
        fb.model = m_fb;
        let (gpu, scale, g_fb) = self.resolve_gpu(model, gpu_type);
        fb.gpu_type = g_fb;
        let rows: Vec<&ThroughputRow> = self
            .index
            .get(&(model.to_string(), gpu))
            .map(|v| v.iter().map(|&i| &self.db.throughput[i]).collect())
            .unwrap_or_default();
        if rows.is_empty() {
            // An empty database: nothing to read. One second per iteration, all fallbacks.
            return Estimate {
                iter_time_s: 1.0,
                fallbacks: Fallbacks { model: true, gpu_type: true, split: true, batch: true, genie_table: false },
            };
        }
        let (chosen, s_fb) = self.choose_split(&rows, split);
        fb.split = s_fb;
        let (t, b_fb) = at_batch(&chosen, local_bsz.max(1));
        fb.batch = b_fb;
        Estimate { iter_time_s: t * scale, fallbacks: fb }
    }
}

/// Counts of rate evaluations that needed each fallback, for the run summary.
#[derive(Debug, Default)]
pub struct FallbackCounter {
    evaluations: AtomicU64,
    model: AtomicU64,
    gpu_type: AtomicU64,
    split: AtomicU64,
    batch: AtomicU64,
    genie_table: AtomicU64,
}

impl FallbackCounter {
    /// Records one estimate.
    pub fn record(&self, f: Fallbacks) {
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        for (flag, counter) in [
            (f.model, &self.model),
            (f.gpu_type, &self.gpu_type),
            (f.split, &self.split),
            (f.batch, &self.batch),
            (f.genie_table, &self.genie_table),
        ] {
            if flag {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// (name, count) pairs: `evaluations`, then one per fallback kind.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("evaluations", self.evaluations.load(Ordering::Relaxed)),
            ("model", self.model.load(Ordering::Relaxed)),
            ("gpu_type", self.gpu_type.load(Ordering::Relaxed)),
            ("split", self.split.load(Ordering::Relaxed)),
            ("batch", self.batch.load(Ordering::Relaxed)),
            ("genie_table", self.genie_table.load(Ordering::Relaxed)),
        ]
    }
}
