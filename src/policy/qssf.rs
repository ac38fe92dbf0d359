//! QSSF, quasi-shortest-service-first (Helios, Hu et al., SC'21, §5.1):
//! non-preemptive, one queue per VC partition ordered by *expected GPU-time*
//! (an estimate of the job's duration × its GPUs), smallest first.
//!
//! # Rules (default semantics)
//!
//! - Every VC partition has its own queue, ordered by (estimated GPU-time,
//!   submission order).
//! - A job's estimate is fixed when it is first needed, at its arrival, and
//!   never refreshed (as Helios: a priority is computed at most once per job,
//!   `SEMANTICS-srtf-qssf.md` §2.1).
//! - Strict by default: a scheduling pass starts jobs from the head of the
//!   queue and stops at the first one that cannot be placed (head-of-line
//!   blocking, as the reference). [`QssfOptions::backfill`] lets later jobs
//!   that can be placed start (greedy, no reservation, as `--backfill` for
//!   FIFO/SJF).
//! - Non-preemptive: a started job runs to completion.
//!
//! # Estimators ([`QssfOptions::estimator`])
//!
//! - [`QssfEstimator::Oracle`]: the trace duration × GPUs (ms × GPUs), the
//!   stand-in the Helios artefact's Philly experiment uses (priority = the
//!   true duration, `SEMANTICS-srtf-qssf.md` §2.1). At trace speed it is the
//!   job's true GPU-time; under `--rate-model table` a job may run slower or
//!   faster than its trace duration, and the oracle is the trace's figure.
//! - [`QssfEstimator::History`] (our reading of the paper's history-based
//!   duration estimate, §5.1 "rolling-update" part; its learned GBDT model
//!   is not reproduced): the job's estimated duration is the mean *observed*
//!   run time (time holding GPUs, `attained_s`) of the jobs that completed
//!   before the decision (at or before the instant the estimate is made:
//!   completions are delivered before the instant's pass), taken from the
//!   first of these groups that has at least one completed job:
//!   1. the same user in the same VC (`user` and `vc` columns);
//!   2. the same VC;
//!   3. the whole cluster;
//!   4. a prior of [`QssfOptions::prior_s`] seconds (default 3,600 s, our
//!      choice; it is used only until the first job of the run completes).
//!
//!   The estimate is that duration (ms, rounded to the nearest ms) × the
//!   job's GPUs, as Helios multiplies its predicted duration by the GPU
//!   count (`priority × gpu_num`, `estimator.py:174-183`). The trace fields
//!   it needs are `user` and `vc`; a trace without a user column (the Philly
//!   window) skips level 1 and starts at the VC, a trace without VCs (one
//!   partition) has levels 1, 3 and 4 only (2 = 3 there).
//!
//! The run's predictor (`--predictor`, [`crate::policy::predictor`])
//! overrides the estimator: `oracle` is the job's duration × GPUs (as the
//! `oracle` estimator), `noisy:P` that × (1 + e), e uniform in ±P % per
//! (seed, job) ([`Qssf::with_predictor`]); the default `fitted` leaves the
//! estimator in charge.
//!
//! Prediction quality goes to `summary.json`'s `policy_metrics`:
//! `qssf_estimate_error_mean` and `qssf_estimate_error_p95` (absolute
//! relative error |estimate − actual| / actual over the completed jobs that
//! got an estimate, actual = GPUs × time holding them, `attained_gpu_s`),
//! `qssf_estimated_jobs`, and how many estimates came from each level
//! (`qssf_estimates_user_vc`, `_vc`, `_global`, `_prior`; the oracle counts
//! none of these).
//!
//! # The reference's order ([`QssfOptions::helios_order`])
//!
//! The Helios simulator's QSSF (HeliosArtifact @ bdaae10, `framework/QSSF
//! Service/policies/qssf.py`; rules in `SEMANTICS-srtf-qssf.md` §2) orders
//! its queue differently, behind `helios-order=true` (off by default):
//! - the queue is a persistent list; this instant's arrivals are appended in
//!   trace order, then the list is stable-sorted by GPU count;
//! - only when the list holds a job that was already waiting before this
//!   instant's arrivals (`len(queue) > new`) does every job without an
//!   estimate get one (so a job that starts at a tick without a carried-over
//!   job never gets one) and the list is then stable-sorted by estimate:
//!   ties go to the smaller GPU count, then the previous order;
//! - the sorted order persists into the next pass.
//!
//! With [`QssfEstimator::Oracle`], strict placement, consolidate, and
//! `--tie-order numpy2-avx512` on the trace, the Helios-window replay is the
//! reference's schedule job for job (`tests/it/fidelity.rs`).
//!
//! **Ticks and events.** The reference ticks every second; dlsched runs a
//! pass only at the instants of its events. In a second with no event of a
//! VC, the reference re-sorts that VC's queue: after a carry tick that is
//! the same order again (a stable sort of a sorted list) on the same free
//! GPUs, so nothing starts. After a *no-carry* tick that left jobs queued,
//! the next second is a carry tick: the queue is re-sorted by estimate, and
//! a different head might fit. So after such a pass the policy asks for a
//! timer one second later ([`Decision::WakeAt`]) and runs that VC's pass
//! then; passes at instants of other VCs' events, or at timeline samples,
//! leave a VC alone.
//!
//! # Cost
//!
//! Default mode: one B-tree per VC keyed by (estimate, job), a pass touches
//! the jobs it starts plus the blocked head (with backfill, the later jobs
//! it tries; an unconstrained job is not tried once one of no more GPUs
//! failed in the pass). Helios mode: two stable sorts of the VC's queue per
//! pass of that VC (nearly sorted lists, so close to linear).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::placement::{Placement, PlacementKind};
use super::predictor::PredictorKind;
use super::queue::request;
use super::{Decision, Policy, View};
use crate::error::RunError;
use crate::ids::{GpuId, JobId, VcId};
use crate::job::{JobState, JobTable};
use crate::time::SimTime;

/// Where a job's estimated GPU-time comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QssfEstimator {
    /// The trace duration × GPUs (the Helios artefact's Philly stand-in).
    #[default]
    Oracle,
    /// Mean observed run time of completed jobs of the same (user, VC), else
    /// VC, else cluster, else the prior, × GPUs (see the module docs).
    History,
}

/// QSSF's options. Names are kebab-case (`helios-order`); the snake_case
/// spelling is accepted too. Unknown names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct QssfOptions {
    /// The estimator (default `oracle`).
    pub estimator: QssfEstimator,
    /// Let later jobs that can be placed start when the head cannot (greedy,
    /// no reservation); default false (strict, as the reference).
    pub backfill: bool,
    /// The Helios simulator's queue order (see the module docs); default false.
    #[serde(alias = "helios_order")]
    pub helios_order: bool,
    /// Placement rule, exclusive only (default `consolidate`, the
    /// reference's rule; also set by `--placement`).
    pub placement: PlacementKind,
    /// History estimator: the duration assumed, s, before any job of the run
    /// has completed (default 3,600 s, our choice).
    #[serde(alias = "prior_s")]
    pub prior_s: u64,
}

impl Default for QssfOptions {
    fn default() -> Self {
        QssfOptions {
            estimator: QssfEstimator::Oracle,
            backfill: false,
            helios_order: false,
            placement: PlacementKind::Consolidate,
            prior_s: 3_600,
        }
    }
}

impl QssfOptions {
    /// The Helios simulator's QSSF: oracle estimate, its order, strict,
    /// consolidate. Pair it with `--tie-order numpy2-avx512`.
    pub fn helios() -> Self {
        QssfOptions { helios_order: true, ..QssfOptions::default() }
    }
}

impl BuildPolicy for QssfOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        super::build::whole_gpu_placement("qssf", self.placement)?;
        if self.prior_s == 0 || self.prior_s > 100_000_000_000 {
            return Err(format!("qssf: prior-s must be 1 to 1e11 s, got {}", self.prior_s));
        }
        Ok(())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let placement = self.placement.build_for(ctx.db_for(self.placement).as_ref());
        let q = Qssf::new(*self, placement, ctx.cluster.partitions().len());
        Ok(Box::new(q.with_predictor(ctx.predictor, ctx.seed)))
    }

    fn predicts(&self) -> bool {
        true
    }

    fn placement(&self) -> PlacementKind {
        self.placement
    }
}

/// (estimate GPU-ms, job): the default mode's queue key.
type Key = (u64, JobId);

/// Sum of observed run times (ms) and count of completed jobs.
#[derive(Clone, Copy, Debug, Default)]
struct Mean {
    sum_ms: u128,
    n: u64,
}

impl Mean {
    fn add(&mut self, ms: u64) {
        self.sum_ms += u128::from(ms);
        self.n += 1;
    }

    /// The mean, ms, rounded to the nearest ms; `None` without samples.
    fn get(&self) -> Option<u64> {
        (self.n > 0).then(|| {
            let n = u128::from(self.n);
            u64::try_from((self.sum_ms + n / 2) / n).unwrap_or(u64::MAX)
        })
    }
}

#[derive(Default)]
struct VcQueue {
    /// Default mode: pending jobs by (estimate, job).
    tree: BTreeSet<Key>,
    /// Helios mode: pending jobs in the persistent list order.
    list: Vec<JobId>,
    /// Helios mode: arrivals at `new_at` (this instant's `new`).
    new: usize,
    new_at: SimTime,
}

/// QSSF; see the module docs.
pub struct Qssf {
    opts: QssfOptions,
    placement: Box<dyn Placement>,
    exact_by_count: bool,
    vcs: Vec<VcQueue>,
    dirty: BTreeSet<u16>,
    /// Estimate per job (GPU-ms), once made.
    est: Vec<Option<u64>>,
    /// History: per VC, per user; per VC; the whole cluster.
    by_user: Vec<BTreeMap<String, Mean>>,
    by_vc: Vec<Mean>,
    all: Mean,
    /// Estimates by level: user-VC, VC, global, prior.
    levels: [u64; 4],
    /// The partition being scheduled: its position (default mode: the last
    /// key started; Helios mode: the list index), the smallest GPU count of
    /// an unconstrained job that failed in this pass.
    cur: Option<VcId>,
    cursor: Option<Key>,
    pos: usize,
    min_failed: u32,
    /// Helios mode: (ms, VC) passes due one second after a no-carry pass,
    /// and timers still to ask for.
    due: BTreeSet<(u64, u16)>,
    wake: Vec<SimTime>,
    asked: BTreeSet<u64>,
    scratch: Vec<GpuId>,
    /// The run's predictor and master seed (`--predictor`; the default
    /// `fitted` uses [`QssfOptions::estimator`]).
    predictor: PredictorKind,
    seed: u64,
}

impl Qssf {
    /// QSSF with `opts` placing by `placement` for `partitions` partitions.
    pub fn new(opts: QssfOptions, placement: Box<dyn Placement>, partitions: usize) -> Self {
        let n = partitions.max(1);
        Qssf {
            exact_by_count: matches!(opts.placement, PlacementKind::Consolidate | PlacementKind::FirstFit),
            opts,
            placement,
            vcs: (0..n).map(|_| VcQueue::default()).collect(),
            dirty: BTreeSet::new(),
            est: Vec::new(),
            by_user: vec![BTreeMap::new(); n],
            by_vc: vec![Mean::default(); n],
            all: Mean::default(),
            levels: [0; 4],
            cur: None,
            cursor: None,
            pos: 0,
            min_failed: u32::MAX,
            due: BTreeSet::new(),
            wake: Vec::new(),
            asked: BTreeSet::new(),
            scratch: Vec::new(),
            predictor: PredictorKind::Fitted,
            seed: 0,
        }
    }

    /// Estimates from the run's predictor (`--predictor`,
    /// [`crate::policy::predictor`]) under master seed `seed`: `oracle`, the
    /// job's duration × GPUs whatever [`QssfOptions::estimator`] says;
    /// `noisy:P`, that times its error (stream
    /// `predictor.noisy.<job index>.<GPUs>`), rounded to the nearest
    /// GPU-ms; `fitted` (the default), the estimator.
    pub fn with_predictor(mut self, predictor: PredictorKind, seed: u64) -> Self {
        self.predictor = predictor;
        self.seed = seed;
        self
    }

    /// The job's estimate, GPU-ms, made now if it has none yet.
    fn estimate(&mut self, job: JobId, view: &View<'_>) -> u64 {
        if self.est.len() <= job.index() {
            self.est.resize(job.index() + 1, None);
        }
        if let Some(e) = self.est[job.index()] {
            return e;
        }
        let spec = view.jobs.spec(job);
        let gpus = u64::from(spec.gpus);
        let truth = self.predictor.factor(self.seed, job, &spec.gpus.to_string());
        let e = match (truth, self.opts.estimator) {
            (Some(f), _) => ((spec.duration_ms as f64 * f).round() as u64).saturating_mul(gpus),
            (None, QssfEstimator::Oracle) => spec.duration_ms.saturating_mul(gpus),
            (None, QssfEstimator::History) => {
                let vc = spec.vc.index();
                let user = spec.user().and_then(|u| self.by_user[vc].get(u)).and_then(Mean::get);
                let (level, d) = if let Some(d) = user {
                    (0, d)
                } else if let Some(d) = self.by_vc[vc].get() {
                    (1, d)
                } else if let Some(d) = self.all.get() {
                    (2, d)
                } else {
                    (3, self.opts.prior_s.saturating_mul(1000))
                };
                self.levels[level] += 1;
                d.saturating_mul(gpus)
            }
        };
        self.est[job.index()] = Some(e);
        e
    }

    /// Whether `job` is known to fail now: an unconstrained job of at least
    /// as many GPUs as one that failed in this pass (consolidate and first
    /// fit place an unconstrained job by free-GPU counts alone, and a pass
    /// only takes GPUs).
    fn known_to_fail(&self, view: &View<'_>, job: JobId) -> bool {
        self.exact_by_count && unconstrained(view, job) && view.jobs.spec(job).gpus >= self.min_failed
    }

    fn try_place(&mut self, view: &View<'_>, job: JobId) -> bool {
        if self.known_to_fail(view, job) {
            return false;
        }
        self.scratch.clear();
        if self.placement.place_job(view, job, request(view, job), &mut self.scratch) {
            return true;
        }
        if self.exact_by_count && unconstrained(view, job) {
            self.min_failed = self.min_failed.min(view.jobs.spec(job).gpus);
        }
        false
    }

    /// Starts scheduling partition `vc`: Helios mode orders its list.
    fn begin(&mut self, vc: VcId, view: &View<'_>) {
        self.cur = Some(vc);
        self.cursor = None;
        self.pos = 0;
        self.min_failed = u32::MAX;
        if !self.opts.helios_order {
            return;
        }
        let q = &mut self.vcs[vc.index()];
        let new = if q.new_at == view.now { q.new } else { 0 };
        let mut list = std::mem::take(&mut q.list);
        list.sort_by_key(|&j| view.jobs.spec(j).gpus);
        if list.len() > new {
            for &j in &list {
                self.estimate(j, view);
            }
            list.sort_by_key(|&j| self.est[j.index()]);
        }
        self.vcs[vc.index()].list = list;
    }

    /// The next job of the current partition to start (GPUs in `scratch`).
    fn next_default(&mut self, vc: VcId, view: &View<'_>) -> Option<JobId> {
        use std::ops::Bound;
        let from = match self.cursor {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        };
        // The queue is taken out while it is walked (placing reads `self`).
        let tree = std::mem::take(&mut self.vcs[vc.index()].tree);
        let mut found = None;
        for &key in tree.range((from, Bound::Unbounded)) {
            if self.try_place(view, key.1) {
                found = Some(key);
                break;
            }
            if !self.opts.backfill {
                break;
            }
        }
        let q = &mut self.vcs[vc.index()];
        q.tree = tree;
        let key = found?;
        q.tree.remove(&key);
        self.cursor = Some(key);
        Some(key.1)
    }

    fn next_helios(&mut self, vc: VcId, view: &View<'_>) -> Option<JobId> {
        while self.pos < self.vcs[vc.index()].list.len() {
            let job = self.vcs[vc.index()].list[self.pos];
            self.pos += 1;
            if self.try_place(view, job) {
                return Some(job);
            }
            if !self.opts.backfill {
                break;
            }
        }
        None
    }

    /// Ends the pass of partition `vc`: Helios mode drops the started jobs
    /// from its list and, after a no-carry pass that left jobs queued, asks
    /// for that VC's pass one second later.
    fn end(&mut self, vc: VcId, view: &View<'_>) {
        self.cur = None;
        if !self.opts.helios_order {
            return;
        }
        let q = &mut self.vcs[vc.index()];
        let new = if q.new_at == view.now { q.new } else { 0 };
        let before = q.list.len();
        q.list.retain(|&j| matches!(view.jobs.state(j), JobState::Pending));
        if before <= new && !q.list.is_empty() {
            let at = view.now.plus_ms(1000);
            self.due.insert((at.as_ms(), vc.0));
            if self.asked.insert(at.as_ms()) {
                self.wake.push(at);
            }
        }
    }
}

/// True when a job has no memory need, GPU-type constraint or share.
fn unconstrained(view: &View<'_>, job: JobId) -> bool {
    let s = view.jobs.spec(job);
    s.gpu_mem_mib().is_none() && s.gpu_types().is_none() && s.gpu_milli().is_none()
}

impl Policy for Qssf {
    fn name(&self) -> String {
        let mut n = String::from("qssf");
        if self.opts.estimator == QssfEstimator::History {
            n.push_str("+history");
        }
        if self.opts.backfill {
            n.push_str("+backfill");
        }
        n
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc;
        if self.opts.helios_order {
            let q = &mut self.vcs[vc.index()];
            if q.new_at != view.now {
                q.new_at = view.now;
                q.new = 0;
            }
            q.new += 1;
            q.list.push(job);
        } else {
            let e = self.estimate(job, view);
            self.vcs[vc.index()].tree.insert((e, job));
        }
        self.dirty.insert(vc.0);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        let spec = view.jobs.spec(job);
        let vc = spec.vc.index();
        if self.opts.estimator == QssfEstimator::History
            && let JobState::Completed(d) = view.jobs.state(job)
        {
            if let Some(u) = spec.user() {
                match self.by_user[vc].get_mut(u) {
                    Some(m) => m.add(d.attained_ms()),
                    None => {
                        let mut m = Mean::default();
                        m.add(d.attained_ms());
                        self.by_user[vc].insert(u.to_string(), m);
                    }
                }
            }
            self.by_vc[vc].add(d.attained_ms());
            self.all.add(d.attained_ms());
        }
        self.dirty.insert(spec.vc.0);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        let now = view.now.as_ms();
        self.asked.remove(&now);
        while let Some(&(t, vc)) = self.due.first() {
            if t > now {
                break;
            }
            self.due.pop_first();
            self.dirty.insert(vc);
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        loop {
            let vc = match self.cur {
                Some(vc) => vc,
                None => {
                    let Some(v) = self.dirty.pop_first() else { break };
                    self.begin(VcId(v), view);
                    VcId(v)
                }
            };
            let next = if self.opts.helios_order { self.next_helios(vc, view) } else { self.next_default(vc, view) };
            match next {
                Some(job) => return Decision::Launch { job, gpus: std::mem::take(&mut self.scratch) },
                None => self.end(vc, view),
            }
        }
        match self.wake.pop() {
            Some(at) => Decision::WakeAt(at),
            None => Decision::Wait,
        }
    }

    fn metrics(&self, jobs: &JobTable) -> Vec<(&'static str, f64)> {
        let mut errs: Vec<f64> = Vec::new();
        for (i, e) in self.est.iter().enumerate() {
            let Some(e) = *e else { continue };
            if let JobState::Completed(d) = jobs.state(JobId(i as u32))
                && d.attained_gpu_ms() > 0
            {
                let actual = d.attained_gpu_ms() as f64;
                errs.push((e as f64 - actual).abs() / actual);
            }
        }
        errs.sort_by(f64::total_cmp);
        let mut m = vec![("qssf_estimated_jobs", self.est.iter().filter(|e| e.is_some()).count() as f64)];
        if !errs.is_empty() {
            m.push(("qssf_estimate_error_mean", errs.iter().sum::<f64>() / errs.len() as f64));
            m.push(("qssf_estimate_error_p95", crate::stats::quantile_sorted(&errs, 0.95)));
        }
        if self.opts.estimator == QssfEstimator::History {
            let names =
                ["qssf_estimates_user_vc", "qssf_estimates_vc", "qssf_estimates_global", "qssf_estimates_prior"];
            m.extend(names.iter().zip(self.levels).map(|(&n, c)| (n, c as f64)));
        }
        m
    }
}
