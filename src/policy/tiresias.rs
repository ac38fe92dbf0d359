//! Tiresias (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
//! Learning", NSDI'19): discretised two-dimensional least attained service
//! (DLAS, DLAS-GPU) and its Gittins-index variant, over the VC partitions.
//!
//! Three kinds share one options struct ([`TiresiasOptions`]); the kind fixes
//! what "service" is and how a queue is ordered, as the paper's and the
//! reference simulator's schedule names do (`dlas`, `dlas-gpu`,
//! `dlas-gpu-gittins`):
//!
//! | kind | attained service | order within a queue |
//! |---|---|---|
//! | `dlas` | time holding GPUs (s) | FIFO |
//! | `dlas-gpu` | GPUs × time (GPU-s), the paper's 2D service | FIFO |
//! | `tiresias-gittins` | GPUs × time (GPU-s) | highest Gittins index first, then FIFO |
//!
//! Three kinds rather than one kind with `service` and `priority` options:
//! these are the three schedules the paper evaluates (Tiresias-L with and
//! without the GPU dimension, Tiresias-G) and the reference names, so a sweep
//! lists them as `policy = ["dlas", "dlas-gpu", "tiresias-gittins"]` beside
//! the other baselines; every other rule is an option they share.
//!
//! # Rules (the defaults)
//!
//! Per VC partition, at every scheduling pass (an arrival, a completion or a
//! job-jump timer of that partition; never at other instants, e.g. timeline
//! samples):
//! 1. **Queues and demotion** (paper §3.2 "Discretized 2D-LAS", Algorithm 1):
//!    K queues ([`TiresiasOptions::queues`], default 3) with cumulative
//!    thresholds on attained service ([`TiresiasOptions::thresholds_s`],
//!    default 3,250 and 7,200: the reference's values; seconds for `dlas`,
//!    GPU-seconds otherwise). A job arrives at the back of Q0; a running job
//!    whose service reaches the threshold of its queue moves to the back of the
//!    next queue. Demotion is checked at every pass, and a job-jump timer
//!    ([`Decision::WakeAt`]) at the exact crossing (now + (limit − service) /
//!    GPUs for GPU-time, rounded up to the ms) makes sure a pass happens then.
//!    A job crossing two thresholds between passes (possible only with
//!    [`TiresiasOptions::late_gpu_jump`]) moves down both at once (our
//!    reading; the reference moves one level per pass).
//! 2. **Order**: Q0 before Q1 before ..., and within a queue by submission
//!    (FIFO by arrival time, the paper's "FIFO within a queue"; our reading:
//!    arrival time, not the time the job entered the queue), or for
//!    `tiresias-gittins` by Gittins index (below).
//! 3. **Scan** (Algorithm 1 as we read it; also the reference's
//!    `dlas_sim_jobs`): one fit-first walk over Q0‖Q1‖…, running and waiting
//!    jobs alike, with the partition's GPU count as the budget: a job that fits
//!    what is left is selected, one that does not is skipped (no head-of-line
//!    blocking); a running job left out is preempted. Preemption cost is the
//!    run's `--checkpoint` model (none by default: the reference's free
//!    preemption).
//! 4. **Placement**: selected waiting jobs are placed in scan order with the
//!    placement rule ([`TiresiasOptions::placement`], default first fit, the
//!    reference's "yarn"); one that cannot be placed (fragmentation, GPU type,
//!    memory) waits for a later pass and its GPUs stay idle until then (our
//!    reading: the decision is on GPU counts, as in the paper's algorithm).
//!    A resumed job may land on other GPUs (migration).
//! 5. **Starvation** ([`TiresiasOptions::promote_knob`] = N, the paper's
//!    PROMOTEKNOB, §3.2; 0 = off, the default, as in the reference's `dlas` and
//!    `dlas-gpu`): a waiting job in Q1 or lower with some service is promoted to
//!    the back of Q0, its service counter reset to 0, once the time it has waited
//!    since its last promotion (counted only while it has service) reaches
//!    N × its service in seconds (seconds even for the GPU-time kinds, as the
//!    reference); a timer is set for that instant too. A job promoted before
//!    is promoted again only if it has less work left than at its last
//!    promotion (ours: with a checkpoint cost, a promoted job can lose more
//!    to the checkpoint than its Q0 quantum gains it, and re-promoting it
//!    then cycles forever; under the reference's free preemption every
//!    promoted job gains work, so the rule never binds; `may_promote`).
//!
//! # Gittins index (`tiresias-gittins`)
//!
//! The paper's index (§3.2, after Gittins; also Aalto et al.):
//! G(a) = P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a], for a job with
//! attained service a, S its total service drawn from the distribution of
//! job service, Δ the service quantum ([`TiresiasOptions::gittins_delta_s`],
//! default 3,250 GPU-s, the first threshold: our reading of the paper's
//! "next service quantum"; the supremum over Δ is not taken). The
//! distribution is the **empirical distribution of every job's GPU-time in the
//! run's workload** (duration × GPUs, an oracle over the whole trace, as the
//! reference's `prepare_job_dist` over its job list): with samples s₁ ≤ … ≤ sₙ,
//! G(a) = #{a < sᵢ ≤ a + Δ} / (Σ_{a < sᵢ ≤ a+Δ} (sᵢ − a) + #{sᵢ > a + Δ} · Δ),
//! and 0 when no sample exceeds a (the reference's rule). A higher index runs
//! first within a queue; queues keep their order. Indices are recomputed at
//! every pass of the partition.
//!
//! # Reference compatibility
//!
//! The Tiresias simulator (SymbioticLab/Tiresias @ 959f9b0, `simulator/`;
//! its exact rules, with hand examples checked against it, in
//! `../shared/fidelity/tiresias-philly-103959/SEMANTICS-dlas.md`) differs in
//! three artefacts, each behind its own option, all off by default
//! ([`TiresiasOptions::reference`] sets them all):
//! - [`TiresiasOptions::count_only`]: DLAS places nothing on nodes (§7): only
//!   free GPU counts. dlsched's launch needs GPUs, so a selected job takes
//!   any free GPUs of its partition (the lowest-indexed free GPUs of the
//!   nodes that suit it, node by node in index order), spanning nodes when it
//!   must; with a profile rate model that spread is charged as any other.
//! - [`TiresiasOptions::running_first`]: each queue is a list in entry order
//!   (arrivals and demotions appended) stably partitioned after every pass,
//!   running jobs first (§3 step 6, §5), so a demoted job enters behind the
//!   lower queue's waiting jobs and a job that ran goes ahead of one that
//!   waited.
//! - [`TiresiasOptions::late_gpu_jump`] (GPU-time kinds only): the job-jump
//!   timer at now + ⌈(limit − service in *seconds*) / GPUs⌉ whole seconds (§4.2),
//!   late by service × (1 − 1/GPUs); demotion still happens at the first pass
//!   at or after the true crossing.
//!
//! The fit-first scan over all queues, preemption at any pass and thresholds
//! on cumulative service are Tiresias' semantics (paper and reference agree)
//! and are the defaults; free preemption is `--checkpoint none` (the default).
//! With the reference options and a 1-partition cluster the replay of the
//! reference's VC 103959 on 8 × 8 GPUs reproduces its per-job schedule
//! (`tests/it/fidelity.rs`).
//!
//! # Cost
//!
//! A pass moves only the running jobs whose threshold crossing is due (one
//! B-tree of crossing times per partition) and, when promotion is on, its
//! preempted jobs. When the partition's jobs, running and waiting, ask for
//! no more GPUs than it has, the scan is skipped: every waiting job is placed,
//! none preempted (what the scan would select). Otherwise the scan walks the
//! queues in order and stops once the budget is spent and every running job
//! has been seen; the Gittins order is a sort per pass.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::placement::{Consolidate, FirstFit, Placement, PlacementKind};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::cluster::Cluster;
use crate::cluster::request::Request;
use crate::error::RunError;
use crate::ids::{GpuId, JobId, VcId};
use crate::job::{JobState, JobTable};
use crate::time::SimTime;

/// What attained service counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Time holding GPUs, ms (`dlas`).
    Time,
    /// GPUs × time holding them, GPU-ms (`dlas-gpu`, `tiresias-gittins`).
    GpuTime,
}

/// How a queue is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// By submission (or, with [`TiresiasOptions::running_first`], the
    /// reference's list order).
    Fifo,
    /// By Gittins index, highest first, then as `Fifo`.
    Gittins,
}

/// The placement rules Tiresias can use (exclusive ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TiresiasPlacement {
    /// First node in index order with room: the reference's "yarn"
    /// ([`super::placement::FirstFit`]).
    #[default]
    FirstFit,
    /// Fewest nodes, best fit ([`super::placement::Consolidate`]).
    Consolidate,
}

/// Options of `dlas`, `dlas-gpu` and `tiresias-gittins`. In a file
/// (TOML/JSON) the names are kebab-case (`thresholds-s`); the snake_case
/// spelling is accepted too. Unknown names are refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TiresiasOptions {
    /// Number of queues K, at least 1 (default 3, the reference's).
    pub queues: u32,
    /// Cumulative attained-service thresholds between the queues, s (`dlas`)
    /// or GPU-s (the GPU-time kinds), strictly increasing and positive; at
    /// least K − 1 of them, the first K − 1 used (default [3250, 7200], the
    /// reference's `queue_limit`). On the command line, where a value is a
    /// scalar, a comma-separated list: `--policy-opt thresholds-s=600,3600`.
    #[serde(alias = "thresholds_s", deserialize_with = "de_thresholds")]
    pub thresholds_s: Vec<f64>,
    /// The paper's PROMOTEKNOB N: a waiting job below Q0 goes back to Q0 once
    /// it has waited N × its service (s); 0 = no promotion (default).
    #[serde(alias = "promote_knob")]
    pub promote_knob: f64,
    /// The Gittins quantum Δ, GPU-s (`tiresias-gittins` only; default 3250).
    #[serde(alias = "gittins_delta_s")]
    pub gittins_delta_s: f64,
    /// Placement rule (default `first-fit`).
    pub placement: TiresiasPlacement,
    /// Reference artefact: place on GPU counts only, any free GPUs (default false).
    #[serde(alias = "count_only")]
    pub count_only: bool,
    /// Reference artefact: queues in entry order, partitioned running-first
    /// after every pass (default false: FIFO by submission).
    #[serde(alias = "running_first")]
    pub running_first: bool,
    /// Reference artefact (GPU-time kinds): the late job-jump timer
    /// ⌈(limit − service s) / GPUs⌉ (default false: the exact crossing).
    #[serde(alias = "late_gpu_jump")]
    pub late_gpu_jump: bool,
}

/// A list of seconds: a sequence, one number, or a comma-separated string.
fn de_thresholds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        List(Vec<f64>),
        One(f64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::List(v) => Ok(v),
        Raw::One(x) => Ok(vec![x]),
        Raw::Text(t) => t
            .split(',')
            .map(|x| {
                x.trim().parse::<f64>().map_err(|_| {
                    serde::de::Error::custom(format!("thresholds-s: `{t}` is not a comma-separated list of seconds"))
                })
            })
            .collect(),
    }
}

impl Default for TiresiasOptions {
    fn default() -> Self {
        TiresiasOptions {
            queues: 3,
            thresholds_s: vec![3250.0, 7200.0],
            promote_knob: 0.0,
            gittins_delta_s: 3250.0,
            placement: TiresiasPlacement::FirstFit,
            count_only: false,
            running_first: false,
            late_gpu_jump: false,
        }
    }
}

impl TiresiasOptions {
    /// The Tiresias simulator's rules: every artefact option on, first fit.
    pub fn reference() -> Self {
        TiresiasOptions { count_only: true, running_first: true, late_gpu_jump: true, ..Default::default() }
    }
}

/// The service unit and queue order of a registry kind.
pub fn kind_rules(kind: &str) -> (Service, Priority) {
    match kind {
        "dlas" => (Service::Time, Priority::Fifo),
        "tiresias-gittins" => (Service::GpuTime, Priority::Gittins),
        _ => (Service::GpuTime, Priority::Fifo),
    }
}

impl BuildPolicy for TiresiasOptions {
    fn validate(&self, kind: &str) -> Result<(), String> {
        if self.queues == 0 || self.queues > 64 {
            return Err(format!("{kind}: queues must be 1 to 64, got {}", self.queues));
        }
        let need = self.queues as usize - 1;
        if self.thresholds_s.len() < need {
            return Err(format!(
                "{kind}: thresholds-s needs at least queues - 1 = {need} values, got {}",
                self.thresholds_s.len()
            ));
        }
        let t = &self.thresholds_s[..need];
        if t.iter().any(|&x| !(x.is_finite() && x > 0.0 && x <= crate::time::MAX_SECS)) {
            return Err(format!("{kind}: thresholds-s must be positive finite seconds, got {t:?}"));
        }
        if t.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("{kind}: thresholds-s must be strictly increasing, got {t:?}"));
        }
        if !(self.promote_knob.is_finite() && self.promote_knob >= 0.0) {
            return Err(format!("{kind}: promote-knob must be >= 0, got {}", self.promote_knob));
        }
        if !(self.gittins_delta_s.is_finite()
            && self.gittins_delta_s > 0.0
            && self.gittins_delta_s <= crate::time::MAX_SECS)
        {
            return Err(format!("{kind}: gittins-delta-s must be positive seconds, got {}", self.gittins_delta_s));
        }
        Ok(())
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let (service, priority) = kind_rules(kind);
        Ok(Box::new(Tiresias::new(kind, service, priority, self.clone(), ctx.cluster.partitions().len())))
    }

    fn placement(&self) -> PlacementKind {
        match self.placement {
            TiresiasPlacement::FirstFit => PlacementKind::FirstFit,
            TiresiasPlacement::Consolidate => PlacementKind::Consolidate,
        }
    }
}

/// The policy's books on one job.
#[derive(Clone, Copy, Debug, Default)]
struct Book {
    /// Its queue.
    queue: u8,
    /// Running (as the policy last left it).
    running: bool,
    /// Service (ms, GPU-ms) at its last promotion: the counters restart there.
    base_ms: u64,
    base_gpu_ms: u64,
    /// Waiting time since its last promotion while it had service, ms.
    starve_ms: u64,
    /// Its remaining work (ms at rate 1) when it was last promoted; none
    /// before its first promotion. A later promotion needs less work left
    /// than this (see [`Tiresias::may_promote`]).
    promoted_remaining: Option<f64>,
    /// The pass that last counted it, ms.
    checked_ms: u64,
    /// While it runs below the last queue: when its service reaches its
    /// queue's threshold, ms (exact: service grows at 1 ms (or GPUs) per ms).
    crossing: Option<u64>,
}

#[derive(Default)]
struct VcBook {
    /// The running ones.
    running: BTreeSet<JobId>,
    /// Its preempted jobs (the only ones that can starve and be promoted).
    suspended: BTreeSet<JobId>,
    /// (threshold crossing ms, job) of its running jobs below the last queue.
    crossings: BTreeSet<(u64, JobId)>,
    /// GPUs its active jobs ask for, running or not.
    demand: u64,
    /// The queues, each in its order.
    queues: Vec<Vec<JobId>>,
    /// Its next job-jump (demotion or promotion) time, ms.
    next_jump: Option<u64>,
}

/// One step of a pass's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Preempt(JobId),
    Place(JobId),
}

/// The empirical service distribution the Gittins index reads.
struct Gittins {
    /// Sorted samples, GPU-ms (ms for `dlas`).
    samples: Vec<u64>,
    /// prefix[i] = samples[..i] summed.
    prefix: Vec<u128>,
    delta: u64,
}

impl Gittins {
    fn new(jobs: &JobTable, service: Service, delta: u64) -> Self {
        let mut samples: Vec<u64> = jobs
            .iter()
            .map(|(s, _)| match service {
                Service::Time => s.duration_ms,
                Service::GpuTime => s.duration_ms.saturating_mul(u64::from(s.gpus)),
            })
            .collect();
        samples.sort_unstable();
        let mut prefix = Vec::with_capacity(samples.len() + 1);
        let mut acc: u128 = 0;
        prefix.push(0);
        for &s in &samples {
            acc += u128::from(s);
            prefix.push(acc);
        }
        Gittins { samples, prefix, delta }
    }

    /// G(a) = #{a < s ≤ a+Δ} / (Σ_{a < s ≤ a+Δ} (s − a) + #{s > a+Δ}·Δ); 0 when no s > a.
    fn index(&self, a: u64) -> f64 {
        let n = self.samples.len();
        let i = self.samples.partition_point(|&s| s <= a);
        if i == n {
            return 0.0;
        }
        let hi = a.saturating_add(self.delta);
        let j = self.samples.partition_point(|&s| s <= hi);
        let done = (j - i) as f64;
        let within = (self.prefix[j] - self.prefix[i]) - u128::from(a) * (j - i) as u128;
        let denom = within as f64 + (n - j) as f64 * self.delta as f64;
        if denom <= 0.0 { 0.0 } else { done / denom }
    }
}

/// Discretised 2D-LAS and Tiresias-G; see the module docs.
pub struct Tiresias {
    kind: String,
    service: Service,
    priority: Priority,
    opts: TiresiasOptions,
    /// Thresholds, ms (or GPU-ms), K − 1 of them.
    limits: Vec<u64>,
    placement: Box<dyn Placement>,
    vcs: Vec<VcBook>,
    books: Vec<Book>,
    dirty: BTreeSet<u16>,
    /// Timer instants asked for and not yet delivered, ms.
    asked: BTreeSet<u64>,
    plan_vc: Option<VcId>,
    plan: VecDeque<Action>,
    gittins: Option<Gittins>,
    scratch: Vec<GpuId>,
}

impl Tiresias {
    /// A Tiresias policy of registry kind `kind` for `partitions` partitions.
    pub fn new(kind: &str, service: Service, priority: Priority, opts: TiresiasOptions, partitions: usize) -> Self {
        let k = opts.queues.max(1) as usize;
        let limits = opts.thresholds_s.iter().take(k - 1).map(|&s| (s * 1000.0).round() as u64).collect();
        let placement: Box<dyn Placement> = match opts.placement {
            TiresiasPlacement::FirstFit => Box::new(FirstFit),
            TiresiasPlacement::Consolidate => Box::new(Consolidate),
        };
        let vcs =
            (0..partitions.max(1)).map(|_| VcBook { queues: vec![Vec::new(); k], ..Default::default() }).collect();
        Tiresias {
            kind: kind.to_string(),
            service,
            priority,
            opts,
            limits,
            placement,
            vcs,
            books: Vec::new(),
            dirty: BTreeSet::new(),
            asked: BTreeSet::new(),
            plan_vc: None,
            plan: VecDeque::new(),
            gittins: None,
            scratch: Vec::new(),
        }
    }

    fn book(&mut self, job: JobId) -> &mut Book {
        if self.books.len() <= job.index() {
            self.books.resize(job.index() + 1, Book::default());
        }
        &mut self.books[job.index()]
    }

    /// Service counted toward the queues (since the last promotion), ms or GPU-ms.
    fn executed(&self, view: &View<'_>, job: JobId) -> u64 {
        let (t, g) = total_service(view, job);
        let b = &self.books[job.index()];
        match self.service {
            Service::Time => t.saturating_sub(b.base_ms),
            Service::GpuTime => g.saturating_sub(b.base_gpu_ms),
        }
    }

    /// Time service since the last promotion, ms.
    fn executed_time(&self, view: &View<'_>, job: JobId) -> u64 {
        total_service(view, job).0.saturating_sub(self.books[job.index()].base_ms)
    }

    /// Puts `job` into queue `q` of `vc`: at the back in the reference's
    /// list order, else at its submission-order place.
    fn enqueue(&mut self, vc: usize, q: usize, job: JobId) {
        let list = &mut self.vcs[vc].queues[q];
        if self.opts.running_first || list.last().is_none_or(|&l| l < job) {
            list.push(job);
        } else {
            let at = list.partition_point(|&j| j < job);
            list.insert(at, job);
        }
        self.books[job.index()].queue = q as u8;
    }

    fn dequeue(&mut self, vc: usize, q: usize, job: JobId) {
        let list = &mut self.vcs[vc].queues[q];
        if let Some(at) = list.iter().position(|&j| j == job) {
            list.remove(at);
        }
    }

    /// One pass of partition `vc`: accounting, demotion and promotion, the
    /// scan, and the plan it leaves.
    fn pass(&mut self, vc: VcId, view: &View<'_>) {
        let v = vc.index();
        let now = view.now.as_ms();
        // The reference's list order: running jobs first, as the last pass left them.
        if self.opts.running_first {
            let books = &self.books;
            let mut wait: Vec<JobId> = Vec::new();
            for list in &mut self.vcs[v].queues {
                wait.clear();
                let mut k = 0;
                for i in 0..list.len() {
                    let j = list[i];
                    if books[j.index()].running {
                        list[k] = j;
                        k += 1;
                    } else {
                        wait.push(j);
                    }
                }
                list.truncate(k);
                list.extend_from_slice(&wait);
            }
        }
        // Demotion (running jobs whose crossing is due) and, with the knob,
        // accounting and promotion of preempted ones, in arrival order.
        let mut walk: Vec<JobId> = Vec::new();
        while let Some(&(t, job)) = self.vcs[v].crossings.first() {
            if t > now {
                break;
            }
            self.vcs[v].crossings.pop_first();
            self.books[job.index()].crossing = None;
            walk.push(job);
        }
        let promote = self.opts.promote_knob > 0.0;
        if promote {
            walk.extend(self.vcs[v].suspended.iter().copied());
        }
        walk.sort_unstable();
        for job in walk {
            let b = self.books[job.index()];
            if b.running {
                self.demote(v, job, view);
                continue;
            }
            let q = usize::from(b.queue);
            let exec = self.executed_time(view, job);
            let dt = now.saturating_sub(b.checked_ms);
            let book = &mut self.books[job.index()];
            book.checked_ms = now;
            if exec > 0 {
                book.starve_ms += dt;
            }
            if q > 0
                && exec > 0
                && book.starve_ms as f64 >= exec as f64 * self.opts.promote_knob
                && may_promote(book, view, job)
            {
                let (t, g) = total_service(view, job);
                book.base_ms = t;
                book.base_gpu_ms = g;
                book.starve_ms = 0;
                book.promoted_remaining = Some(remaining(view, job));
                self.dequeue(v, q, job);
                self.enqueue(v, 0, job);
            }
        }
        if self.priority == Priority::Gittins && self.gittins.is_none() {
            let delta = (self.opts.gittins_delta_s * 1000.0).round() as u64;
            self.gittins = Some(Gittins::new(view.jobs, self.service, delta));
        }
        self.plan.clear();
        self.plan_vc = Some(vc);
        let budget = view.cluster.partition(vc).gpus_total;
        if self.vcs[v].demand <= u64::from(budget) {
            // Every job fits the count: no preemption; the waiting jobs are
            // placed in scan order (what the full scan would select).
            let mut wait: Vec<(usize, f64, JobId)> = Vec::new();
            for (q, list) in self.vcs[v].queues.iter().enumerate() {
                for &job in list.iter().filter(|j| !self.books[j.index()].running) {
                    let g = if self.priority == Priority::Gittins { self.gittins_of(view, job) } else { 0.0 };
                    wait.push((q, g, job));
                }
            }
            if self.priority == Priority::Gittins {
                // Stable: ties keep their queue order.
                wait.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
            }
            self.plan.extend(wait.into_iter().map(|(_, _, j)| Action::Place(j)));
            return;
        }
        // Gittins: each queue by index, highest first (stable: ties keep
        // their queue order), for this pass (the reference's lists keep it).
        let order: Option<Vec<Vec<JobId>>> = (self.priority == Priority::Gittins).then(|| {
            self.vcs[v]
                .queues
                .iter()
                .map(|list| {
                    let mut keyed: Vec<(f64, JobId)> = list.iter().map(|&j| (self.gittins_of(view, j), j)).collect();
                    keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
                    keyed.into_iter().map(|(_, j)| j).collect()
                })
                .collect()
        });
        if let (Some(o), true) = (&order, self.opts.running_first) {
            self.vcs[v].queues.clone_from(o);
        }
        // The fit-first scan over Q0 ‖ Q1 ‖ ... with the partition's GPU count as the budget.
        let mut budget = budget;
        let mut running_left = self.vcs[v].running.len();
        let mut preempt: Vec<JobId> = Vec::new();
        let mut place: Vec<JobId> = Vec::new();
        let lists = order.as_ref().unwrap_or(&self.vcs[v].queues);
        'scan: for list in lists {
            for &job in list {
                if budget == 0 && running_left == 0 {
                    break 'scan;
                }
                let g = view.jobs.spec(job).gpus;
                let running = self.books[job.index()].running;
                if running {
                    running_left -= 1;
                }
                if g <= budget {
                    budget -= g;
                    if !running {
                        place.push(job);
                    }
                } else if running {
                    preempt.push(job);
                }
            }
        }
        self.plan.extend(preempt.into_iter().map(Action::Preempt));
        self.plan.extend(place.into_iter().map(Action::Place));
    }

    /// Moves a running job down every queue whose threshold its service
    /// has reached, and books its next crossing.
    fn demote(&mut self, v: usize, job: JobId, view: &View<'_>) {
        let last = self.limits.len();
        let mut q = usize::from(self.books[job.index()].queue);
        let a = self.executed(view, job);
        while q < last && a >= self.limits[q] {
            self.dequeue(v, q, job);
            self.enqueue(v, q + 1, job);
            q += 1;
        }
        self.book_crossing(v, job, view);
    }

    /// (Re)books the threshold crossing of a job that runs (or is being
    /// launched) now; none for the others or in the last queue.
    fn book_crossing(&mut self, v: usize, job: JobId, view: &View<'_>) {
        if let Some(t) = self.books[job.index()].crossing.take() {
            self.vcs[v].crossings.remove(&(t, job));
        }
        let b = self.books[job.index()];
        let q = usize::from(b.queue);
        if !b.running || q >= self.limits.len() {
            return;
        }
        let now = view.now.as_ms();
        let left = self.limits[q].saturating_sub(self.executed(view, job));
        let t = match self.service {
            Service::Time => now + left,
            Service::GpuTime => now + left.div_ceil(u64::from(view.jobs.spec(job).gpus.max(1))),
        };
        self.books[job.index()].crossing = Some(t);
        self.vcs[v].crossings.insert((t, job));
    }

    fn gittins_of(&self, view: &View<'_>, job: JobId) -> f64 {
        let a = self.executed(view, job);
        self.gittins.as_ref().map_or(0.0, |g| g.index(a))
    }

    /// The next job-jump of partition `vc` after its pass: the earliest
    /// threshold crossing of a running job, or promotion of a waiting one.
    fn next_jump(&self, vc: usize, view: &View<'_>) -> Option<u64> {
        let now = view.now.as_ms();
        let last = self.limits.len();
        let mut best: Option<u64> = self.vcs[vc].crossings.first().map(|&(t, _)| t);
        if self.service == Service::GpuTime && self.opts.late_gpu_jump {
            // The reference's jump: ceil((limit GPU-s - executed s) / GPUs)
            // whole seconds from now, recomputed at every pass.
            best = None;
            for &job in &self.vcs[vc].running {
                let q = usize::from(self.books[job.index()].queue);
                if q >= last {
                    continue;
                }
                let g = u64::from(view.jobs.spec(job).gpus.max(1));
                let x = self.limits[q].saturating_sub(self.executed_time(view, job));
                let t = now + x.div_ceil(g * 1000) * 1000;
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
        if self.opts.promote_knob > 0.0 {
            for &job in &self.vcs[vc].suspended {
                let b = &self.books[job.index()];
                if b.running || b.queue == 0 || !may_promote(b, view, job) {
                    continue;
                }
                let exec = self.executed_time(view, job);
                if exec == 0 {
                    continue;
                }
                let due = (exec as f64 * self.opts.promote_knob).ceil() as u64;
                let t = now + due.saturating_sub(b.starve_ms);
                best = Some(best.map_or(t, |x| x.min(t)));
            }
        }
        // A timer must be later than now.
        best.map(|t| t.max(now + 1))
    }

    /// The next decision of the current plan, if any.
    fn step_plan(&mut self, view: &View<'_>) -> Option<Decision> {
        while let Some(a) = self.plan.pop_front() {
            match a {
                Action::Preempt(job) => {
                    let vc = view.jobs.spec(job).vc.index();
                    self.vcs[vc].running.remove(&job);
                    self.books[job.index()].running = false;
                    self.books[job.index()].checked_ms = view.now.as_ms();
                    self.vcs[vc].suspended.insert(job);
                    self.book_crossing(vc, job, view);
                    return Some(Decision::Preempt { job });
                }
                Action::Place(job) => {
                    let req = request(view, job);
                    self.scratch.clear();
                    let ok = if self.opts.count_only {
                        any_free(view.cluster, req, &mut self.scratch)
                    } else {
                        self.placement.place_job(view, job, req, &mut self.scratch)
                    };
                    if ok {
                        let vc = view.jobs.spec(job).vc.index();
                        self.vcs[vc].running.insert(job);
                        self.vcs[vc].suspended.remove(&job);
                        self.books[job.index()].running = true;
                        self.book_crossing(vc, job, view);
                        return Some(Decision::Launch { job, gpus: std::mem::take(&mut self.scratch) });
                    }
                }
            }
        }
        None
    }
}

/// Whether a waiting job may be promoted (once its starvation counter is
/// due): always the first time; afterwards only if it has less work left
/// than at its last promotion, i.e. it made net progress since then.
///
/// Without this rule a run can livelock when preemption costs more than a
/// promoted job's Q0 quantum: e.g. two 16-GPU jobs on 16 GPUs, 2 queues,
/// threshold 440 GPU-s (27.5 s on 16 GPUs), PROMOTEKNOB 2, `--checkpoint
/// helios-table` (60 s per 16-GPU preemption). The waiting one is promoted
/// after 55 s, preempts the other, is demoted after 27.5 s and preempted
/// in turn: each stint adds more checkpoint work than it does (27.5 − 60 s
/// and 55 − 60 s), so simulated time runs on forever and no job ends.
/// Under the reference's free preemption every stint does work, so a job
/// demoted after a promotion always has less left and the rule never
/// binds: the reference's schedule is unchanged. With a checkpoint cost a
/// job that gained nothing from its last promotion keeps its queue (and
/// its place in it) until it has run again.
fn may_promote(book: &Book, view: &View<'_>, job: JobId) -> bool {
    book.promoted_remaining.is_none_or(|r| remaining(view, job) < r)
}

/// A preempted job's remaining work, checkpoint overhead included, ms at
/// rate 1 (only preempted jobs are promoted; infinite for any other state).
fn remaining(view: &View<'_>, job: JobId) -> f64 {
    match view.jobs.state(job) {
        JobState::Suspended(s) => s.remaining,
        _ => f64::INFINITY,
    }
}

/// (time, GPU-time) of service so far, ms and GPU-ms.
fn total_service(view: &View<'_>, job: JobId) -> (u64, u64) {
    match view.jobs.state(job) {
        JobState::Running(r) => {
            let run = view.now.since(r.start);
            (r.attained_ms + run, r.attained_gpu_ms + run * r.gpus.len() as u64)
        }
        JobState::Suspended(s) => (s.attained_ms, s.attained_gpu_ms),
        _ => (0, 0),
    }
}

/// Count-only placement: the lowest-indexed free GPUs of the partition's
/// nodes that suit the request, node by node in index order.
fn any_free(cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
    let p = cluster.partition(req.vc);
    if req.gpus == 0 || req.gpus > p.gpus_free {
        return false;
    }
    let start = out.len();
    let mut left = req.gpus;
    for &n in p.nodes.iter().filter(|&&n| req.fits_node(cluster, n)) {
        let take = cluster.node_free(n).min(left);
        if take > 0 {
            cluster.take_free_gpus(n, take, out);
            left -= take;
            if left == 0 {
                return true;
            }
        }
    }
    out.truncate(start);
    false
}

impl Policy for Tiresias {
    fn name(&self) -> String {
        self.kind.clone()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc;
        let now = view.now.as_ms();
        *self.book(job) = Book { checked_ms: now, ..Book::default() };
        self.vcs[vc.index()].demand += u64::from(view.jobs.spec(job).gpus);
        self.enqueue(vc.index(), 0, job);
        self.dirty.insert(vc.0);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc.index();
        let q = usize::from(self.book(job).queue);
        self.dequeue(vc, q, job);
        self.vcs[vc].running.remove(&job);
        self.vcs[vc].suspended.remove(&job);
        self.books[job.index()].running = false;
        self.book_crossing(vc, job, view);
        self.vcs[vc].demand -= u64::from(view.jobs.spec(job).gpus);
        self.dirty.insert(vc as u16);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        let now = view.now.as_ms();
        while self.asked.first().is_some_and(|&t| t <= now) {
            self.asked.pop_first();
        }
        for (i, v) in self.vcs.iter_mut().enumerate() {
            if v.next_jump.is_some_and(|t| t <= now) {
                v.next_jump = None;
                self.dirty.insert(i as u16);
            }
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        loop {
            if let Some(d) = self.step_plan(view) {
                return d;
            }
            if let Some(vc) = self.plan_vc.take() {
                let t = self.next_jump(vc.index(), view);
                self.vcs[vc.index()].next_jump = t;
                if let Some(t) = t.filter(|t| self.asked.insert(*t)) {
                    return Decision::WakeAt(SimTime::from_ms(t));
                }
                continue;
            }
            let Some(vc) = self.dirty.pop_first() else {
                return Decision::Wait;
            };
            self.pass(VcId(vc), view);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gittins_index_by_hand() {
        // Samples 1, 2, 4, 8 (units), Δ = 2. At a = 0: all 4 > 0; done within
        // (0, 2]: {1, 2} = 2; Σ (s − a) over them = 3; beyond: {4, 8} → 2 × 2 = 4.
        // G = 2 / 7. At a = 2: > 2: {4, 8}; within (2, 4]: {4}, 4 − 2 = 2;
        // beyond: {8} → 2. G = 1 / 4. At a = 8: none > 8 → 0.
        let samples = vec![1u64, 2, 4, 8];
        let mut prefix = vec![0u128];
        for &s in &samples {
            prefix.push(prefix.last().unwrap() + u128::from(s));
        }
        let g = Gittins { samples, prefix, delta: 2 };
        assert_eq!(g.index(0), 2.0 / 7.0);
        assert_eq!(g.index(2), 0.25);
        assert_eq!(g.index(8), 0.0);
    }

    #[test]
    fn thresholds_read_as_a_list_a_number_or_comma_separated_text() {
        let o: TiresiasOptions = serde_json::from_str(r#"{"thresholds-s": [600, 3600]}"#).unwrap();
        assert_eq!(o.thresholds_s, vec![600.0, 3600.0]);
        let o: TiresiasOptions = serde_json::from_str(r#"{"thresholds_s": "600, 3600"}"#).unwrap();
        assert_eq!(o.thresholds_s, vec![600.0, 3600.0]);
        let o: TiresiasOptions = serde_json::from_str(r#"{"queues": 2, "thresholds-s": 100}"#).unwrap();
        assert_eq!((o.queues, o.thresholds_s), (2, vec![100.0]));
        assert!(serde_json::from_str::<TiresiasOptions>(r#"{"thresholds-s": "6x0"}"#).is_err());
        assert!(serde_json::from_str::<TiresiasOptions>(r#"{"queue": 2}"#).is_err());
        assert_eq!(serde_json::from_str::<TiresiasOptions>("{}").unwrap(), TiresiasOptions::default());
    }

    #[test]
    fn options_are_checked_by_name() {
        let ok = TiresiasOptions::default();
        assert!(ok.validate("dlas").is_ok());
        let e = TiresiasOptions { queues: 4, ..Default::default() }.validate("dlas").unwrap_err();
        assert!(e.contains("thresholds-s"), "{e}");
        let e =
            TiresiasOptions { thresholds_s: vec![7200.0, 3250.0], ..Default::default() }.validate("dlas").unwrap_err();
        assert!(e.contains("increasing"), "{e}");
        let e = TiresiasOptions { promote_knob: -1.0, ..Default::default() }.validate("dlas-gpu").unwrap_err();
        assert!(e.contains("promote-knob"), "{e}");
    }
}
