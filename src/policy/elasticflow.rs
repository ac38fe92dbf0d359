//! ElasticFlow (D. Gu et al., *ElasticFlow: An Elastic Serverless Training
//! Platform for Distributed Deep Learning*, ASPLOS 2023): admission control
//! by each job's minimum satisfactory share, and elastic allocation of the
//! GPUs left over; after its simulator (pkusys/ElasticFlow @ 04a0109a,
//! `ElasticFlow/scheduler/scheduler.py`: `ef_sim_jobs_access_control`,
//! `estimate_all_jobs`, `ef_sim_allocation`, `allocate_free_gpus`; schedule
//! name `ef-accessctrl` in `run_fig*.sh`). What it shares with [`super::edf`]
//! (GPU levels, scheduling instants, turning a GPU count per job into
//! decisions) is here too.
//!
//! Jobs are ElasticFlow's: work-defined with their own iterations
//! (`jobs-csv` `num_iteration`) at a fixed global batch, rated by the run's
//! progress model (ElasticFlow's throughput tables,
//! [`crate::profile::elasticflow`]), each with a deadline (`jobs-csv`
//! `deadline`). A run with any other job is refused before it starts
//! (`BuildPolicy::deadline_jobs_only`), naming the file, line and column.
//!
//! # Rules
//!
//! - **Levels.** A job runs on one of the table's GPU counts (1, 2, 4, 8,
//!   16, 32, 64: the simulator steps through the table's columns,
//!   `utils.get_next_level`/`get_last_level`), at most its *largest count*:
//!   for `elasticflow`, the simulator's `models.get_max_gpu` for the
//!   cluster's GPU type (e.g. ncf on T4s 1, yolov3 on T4s 4, bert and
//!   cifar10 on T4s 16, gpt2 at 128 on A100s 16), capped by the global
//!   batch and by what the table rates; for `edf`, the largest count the
//!   table rates, at most 64 and at most the global batch (`jobs.py`
//!   `add_job`, the branch for other schedules). Both at most the cluster's GPUs.
//! - **Time slots.** Plans are made over slots of
//!   [`ElasticFlowOptions::slot_s`] (the simulator's `--scheduling_slot`:
//!   60 s for figures 8a/8b, 240 s for 9 to 11) from now; a plan's end is
//!   rounded up to a slot (`utils.align_to_time_slot`), its deadline too,
//!   with the last slot counted only up to the deadline itself.
//! - **Minimum satisfactory share** (`ef_sim_allocation`). Over the free
//!   GPUs per slot left by the jobs planned before it, a job's plan is found
//!   for the smallest level `q` (ascending) such that, walking the slots
//!   back from its deadline and giving it in each `min(q, the largest level
//!   that fits the slot's free GPUs)`, its remaining iterations are done by
//!   its deadline; it then takes those GPUs from the first slot of that
//!   walk on (as late as possible at the granularity of the free-GPU
//!   profile's change points) until its work is done. No level works: the
//!   job cannot meet its deadline.
//! - **Admission** (`estimate_all_jobs`). Admitted jobs are planned in
//!   deadline order (ties: job order) from scratch at every scheduling
//!   instant. A newly arrived job is admitted when planning it with the
//!   admitted jobs meets its deadline and breaks no admitted job's plan that
//!   met its deadline without it; otherwise it is rejected
//!   ([`Decision::Reject`]) and never runs.
//! - **Elastic allocation** (`allocate_free_gpus`). Each admitted job gets
//!   its plan's GPUs of the current slot; the GPUs still free go, one level
//!   step at a time, to the job with the highest marginal gain: jobs with no
//!   GPUs first (the simulator gives them `sys.maxsize`), then the largest
//!   throughput gain per added GPU, `(T(next) − T(now)) / (next − now)`
//!   iterations/s per GPU (ties: earlier deadline, then job order), while a
//!   step fits.
//! - **Instants** (the simulator's event loop). The policy schedules at
//!   arrivals and completions, at most once per slot: an event within a slot
//!   of the last scheduling instant waits until that slot ends (the
//!   simulator moves such events to `cur_time + scheduling_slot`), and at
//!   the first future slot where some job's plan changes its GPUs (the
//!   simulator's `first_scale_event_time`).
//! - **Placement.** A job whose GPU count is unchanged keeps its GPUs (no
//!   re-scale delay). Others release theirs and take their new count node by
//!   node, most free node first (`pollux_sim`'s rule), larger jobs first
//!   (the simulator places jobs of a node or more first, then by size). The
//!   rate does not depend on placement ([`crate::profile::elasticflow`]).
//!
//! # Our readings
//!
//! - Arrivals at one instant are admitted one at a time in job order; the
//!   simulator tests them together (all in or all out).
//! - The simulator rejects newcomers whenever any admitted job fails its
//!   plan (even one that already failed without them); we reject only a
//!   newcomer that fails itself or breaks an admitted job's plan. An
//!   admitted job that can no longer meet its deadline (it lost time to
//!   re-scale delays) keeps running on leftover GPUs (it has none planned,
//!   so it comes first among them) and counts as late.
//! - The simulator ranks leftover GPUs by `marginal_gputime`, the change in
//!   the GPU-time of the job's re-planned schedule per added GPU; we rank by
//!   the throughput gained per added GPU (the paper's "marginal return").
//! - A job without a deadline or that the progress model rates on no GPU
//!   count (a simulation built without the run's check) is rejected.
//! - Re-allocation cost is the run's re-scale delay (`--rescale-delay`,
//!   default 30 s); the simulator charges `utils.estimate_overhead`
//!   (2 s + 2 × (log2 GPUs + 1) s, plus 27 s at every `scheduling_slot`-th
//!   scheduling) to every running job at every scheduling instant.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::pollux_sim::{GpuPool, held};
use super::{Decision, Policy, View};
use crate::error::RunError;
use crate::ids::{GpuId, JobId};
use crate::profile::elasticflow::{EfGpu, GPU_COUNTS};
use crate::time::SimTime;

/// Options of `elasticflow`. Names are kebab-case; unknown names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ElasticFlowOptions {
    /// Scheduling slot, s (`slot-s`; default 60, the simulator's
    /// `--scheduling_slot` in figures 8a and 8b; 240 in 9 to 11); 1 to 1e6.
    #[serde(alias = "slot_s")]
    pub slot_s: u64,
}

impl Default for ElasticFlowOptions {
    fn default() -> Self {
        ElasticFlowOptions { slot_s: 60 }
    }
}

/// Checks a slot option (`slot-s`) of `kind`: 1 to 1e6 s.
pub(crate) fn check_slot_s(kind: &str, slot_s: u64) -> Result<(), String> {
    if slot_s == 0 || slot_s > 1_000_000 {
        return Err(format!("{kind}: slot-s must be 1 to 1e6 s, got {slot_s}"));
    }
    Ok(())
}

impl BuildPolicy for ElasticFlowOptions {
    fn validate(&self, kind: &str) -> Result<(), String> {
        check_slot_s(kind, self.slot_s)
    }

    fn deadline_jobs_only(&self) -> bool {
        true
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        super::pollux_sim::one_partition(kind, ctx.cluster)?;
        Ok(Box::new(ElasticFlow::new(*self)))
    }
}

/// The largest GPU count ElasticFlow's simulator gives a job of `model` at
/// global batch `batch` on `gpu` (`scheduler/models.py` `get_max_gpu`, used
/// by its `ef` schedules), before the table's own limit.
pub fn artifact_max_gpus(gpu: EfGpu, model: &str, batch: u32) -> u32 {
    match gpu {
        EfGpu::T4 => match model {
            "bert" | "cifar10" => 16,
            "deepspeech2" if batch == 320 => 32,
            "yolov3" => 4,
            "ncf" => 1,
            _ => 64,
        },
        EfGpu::A100 => match (model, batch) {
            ("deepspeech2", b) => b,
            ("gpt2", 128) => 16,
            ("gpt2", 256) => 32,
            ("bert", 64) => 8,
            ("bert", _) => 16,
            ("inception3", 64) => 16,
            ("inception3", 128) => 32,
            ("resnet50", 64) => 32,
            ("vgg16", 64) => 32,
            (_, b) => b.min(64),
        },
    }
}

/// A job's GPU levels: (GPUs, iterations/s) ascending, the table's counts
/// up to its largest count (module docs, *Levels*).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Levels(pub Vec<(u32, f64)>);

impl Levels {
    /// The levels of `job` in `view`; `artifact_cap` applies
    /// [`artifact_max_gpus`] (`elasticflow`), else the table's (`edf`).
    /// Empty when the job is not work-defined or the run has no progress
    /// model or the model rates it on no count.
    pub fn of(view: &View<'_>, job: JobId, artifact_cap: bool) -> Self {
        let (Some(spec), Some(model)) = (view.jobs.spec(job).elastic(), view.progress_model()) else {
            return Levels::default();
        };
        let total = view.cluster.total_gpus();
        let mut cap = spec.tuned_bsz.min(64).min(total);
        if artifact_cap {
            let types = view.cluster.gpu_type_names();
            if let Some(g) = types.first().and_then(|t| EfGpu::of_gpu_type(t)) {
                cap = cap.min(artifact_max_gpus(g, &spec.app, spec.tuned_bsz));
            }
        }
        let mut out = Vec::new();
        for n in GPU_COUNTS {
            if n > cap {
                break;
            }
            let cfg = model.tuned_config(&spec.app, &[n], spec.tuned_bsz);
            match model.goodput(&spec.app, &cfg, 0.0) {
                Ok(r) if r.is_finite() && r > 0.0 => out.push((n, r)),
                _ => break,
            }
        }
        Levels(out)
    }

    /// The largest level of at most `gpus` GPUs, with its rate; `(0, 0.0)`
    /// when none fits.
    pub fn fit(&self, gpus: u32) -> (u32, f64) {
        self.0.iter().rev().find(|l| l.0 <= gpus).copied().unwrap_or((0, 0.0))
    }

    /// The rate on `gpus` (a level, or 0 → 0.0).
    pub fn rate(&self, gpus: u32) -> f64 {
        self.0.iter().find(|l| l.0 == gpus).map_or(0.0, |l| l.1)
    }

    /// The next level above `gpus`, with its rate.
    pub fn next(&self, gpus: u32) -> Option<(u32, f64)> {
        self.0.iter().find(|l| l.0 > gpus).copied()
    }
}

/// What the policies keep of an active job.
#[derive(Clone, Debug)]
pub(crate) struct Active {
    /// Its levels.
    pub(crate) levels: Levels,
    /// Its deadline, ms (absolute).
    pub(crate) deadline_ms: u64,
}

/// Iterations left of `job` now (its target − progress; 0 when unknown).
pub(crate) fn remaining(view: &View<'_>, job: JobId) -> f64 {
    view.elastic(job).map_or(0.0, |e| (e.target.unwrap_or(0.0) - e.progress).max(0.0))
}

/// When the policies schedule (module docs, *Instants*).
#[derive(Clone, Debug, Default)]
pub(crate) struct Cadence {
    /// Slot, ms.
    slot_ms: u64,
    /// The last scheduling instant.
    last: Option<SimTime>,
    /// An arrival or completion not scheduled yet.
    dirty: bool,
    /// A plan change at this time.
    change_at: Option<SimTime>,
    /// The timers asked for and not delivered.
    timers: std::collections::BTreeSet<SimTime>,
}

impl Cadence {
    pub(crate) fn new(slot_s: u64) -> Self {
        Cadence { slot_ms: slot_s.saturating_mul(1000).max(1), ..Default::default() }
    }

    /// An arrival or completion happened.
    pub(crate) fn touch(&mut self) {
        self.dirty = true;
    }

    pub(crate) fn on_timer(&mut self, now: SimTime) {
        while self.timers.first().is_some_and(|&t| t <= now) {
            self.timers.pop_first();
        }
    }

    /// Whether to schedule at `now`; otherwise the timer to ask for (once).
    pub(crate) fn due(&mut self, now: SimTime) -> Result<(), Option<Decision>> {
        let by_change = self.change_at.is_some_and(|t| t <= now);
        if !(self.dirty || by_change) {
            return Err(self.timer(self.change_at));
        }
        if let Some(last) = self.last {
            let next = SimTime::from_ms(last.as_ms().saturating_add(self.slot_ms));
            if now < next && !by_change {
                return Err(self.timer(Some(next)));
            }
        }
        self.last = Some(now);
        self.dirty = false;
        self.change_at = None;
        Ok(())
    }

    /// After scheduling at `now`: the next plan change, if any.
    pub(crate) fn plan_change(&mut self, at: Option<SimTime>) {
        self.change_at = at;
    }

    /// The timer to ask for `at`, if not asked yet.
    fn timer(&mut self, at: Option<SimTime>) -> Option<Decision> {
        let at = at?;
        if self.timers.contains(&at) {
            return None;
        }
        self.timers.insert(at);
        Some(Decision::WakeAt(at))
    }
}

/// Turns a GPU count per active job into decisions (module docs,
/// *Placement*). Shrinking jobs keep the first GPUs of their list and are
/// resized (or preempted, at 0) first; growing jobs keep all theirs and add
/// GPUs, and idle jobs start, larger targets first, each taking GPUs node by
/// node from the most free node: every decision is valid when applied in order.
pub(crate) fn place(view: &View<'_>, target: &BTreeMap<JobId, u32>) -> Vec<Decision> {
    let mut pool = GpuPool::free(view);
    let mut out = Vec::new();
    let mut grow: Vec<(JobId, u32, Vec<GpuId>)> = Vec::new();
    for (&j, &n) in target {
        let have = held(view, j);
        let k = have.len() as u32;
        if k == n {
            continue;
        }
        if n < k {
            pool.add(view, &have[n as usize..]);
            if n == 0 {
                out.push(Decision::Preempt { job: j });
            } else if let Some(d) = resize(view, j, have[..n as usize].to_vec()) {
                out.push(d);
            }
        } else {
            grow.push((j, n, have));
        }
    }
    grow.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (j, n, mut gpus) in grow {
        let Some((extra, _)) = pool.take_most_free(n - gpus.len() as u32, &[]) else { continue };
        gpus.extend(extra);
        if let Some(d) = resize(view, j, gpus) {
            out.push(d);
        }
    }
    out
}

/// The resize of work-defined `job` onto `gpus` at its global batch split
/// by the progress model's rule (`None` for a job the model does not know).
fn resize(view: &View<'_>, job: JobId, gpus: Vec<GpuId>) -> Option<Decision> {
    let spec = view.jobs.spec(job).elastic()?;
    let model = view.progress_model()?;
    let mut per_node: Vec<(crate::ids::NodeId, u32)> = Vec::new();
    for &g in &gpus {
        let node = view.cluster.node_of(g);
        match per_node.iter_mut().find(|p| p.0 == node) {
            Some(p) => p.1 += 1,
            None => per_node.push((node, 1)),
        }
    }
    let counts: Vec<u32> = per_node.iter().map(|p| p.1).collect();
    let cfg = model.tuned_config(&spec.app, &counts, spec.tuned_bsz);
    Some(Decision::Resize { job, gpus, atomic_bsz: cfg.atomic_bsz, accum_steps: cfg.accum_steps })
}

/// Free GPUs over time from now: piecewise constant, `(start s, free GPUs)`
/// by start, the first at 0; the last piece lasts for ever.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile(pub Vec<(u64, u32)>);

/// A job's plan: `(start s, end s, GPUs)` pieces from now.
pub type Plan = Vec<(u64, u64, u32)>;

impl Profile {
    /// `gpus` free from now on.
    pub fn new(gpus: u32) -> Self {
        Profile(vec![(0, gpus)])
    }

    /// Splits the piece holding `t` at `t` (no-op at a boundary), searching
    /// from piece `from` on (which must start at or before `t`): the index of
    /// the piece that starts at `t`.
    fn split(&mut self, t: u64, from: usize) -> usize {
        // i ≥ from + 1 ≥ 1: piece `from` starts at or before t. A plan's
        // pieces mostly follow the profile's, so `t` is mostly a few pieces
        // on: look there first, then search.
        let near = (from + 1..self.0.len().min(from + 9)).find(|&i| self.0[i].0 > t);
        let i = near.unwrap_or_else(|| from + self.0[from..].partition_point(|p| p.0 <= t));
        if self.0[i - 1].0 == t {
            return i - 1;
        }
        let free = self.0[i - 1].1;
        self.0.insert(i, (t, free));
        i
    }

    /// Takes `plan`'s GPUs (its pieces sorted, not overlapping).
    fn take(&mut self, plan: &Plan) {
        let mut from = 0;
        for &(a, b, n) in plan {
            if n == 0 {
                continue;
            }
            if self.0[from].0 > a {
                from = 0;
            }
            // The pieces starting in [a, b).
            let lo = self.split(a, from);
            let hi = self.split(b, lo);
            for p in &mut self.0[lo..hi] {
                p.1 = p.1.saturating_sub(n);
            }
            from = hi;
        }
    }

    /// How many pieces start before `end` s.
    fn count_before(&self, end: u64) -> usize {
        self.0.partition_point(|p| p.0 < end)
    }

    /// Piece `k` (of the first [`Profile::count_before`]`(end)`) clipped to
    /// `[0, end)`: `(start, end, free)`.
    fn piece(&self, k: usize, end: u64) -> (u64, u64, u32) {
        let (a, free) = self.0[k];
        (a, self.0.get(k + 1).map_or(end, |p| p.0.min(end)), free)
    }

    /// The minimum satisfactory share (module docs) of a job with `left`
    /// iterations, `levels`, its deadline `deadline_s` s from now, over
    /// slots of `slot_s` s: its plan, or `None` when no level meets the
    /// deadline. Takes the plan's GPUs from the profile.
    pub fn min_share(&mut self, left: f64, levels: &Levels, deadline_s: f64, slot_s: u64) -> Option<Plan> {
        if left <= 0.0 {
            return Some(Vec::new());
        }
        if deadline_s <= 0.0 || levels.0.is_empty() {
            return None;
        }
        let slot = slot_s.max(1);
        let aligned = (deadline_s / slot as f64).ceil() as u64 * slot;
        let np = self.count_before(aligned);
        // The fastest rate of the levels so far: no walk at level q gathers
        // more than deadline_s × it (the walk's durations sum to deadline_s);
        // a level whose bound, with a margin far above the sum's rounding,
        // falls short is skipped without walking (a saving of time only).
        let mut fastest = 0.0f64;
        for &(q, rate) in &levels.0 {
            fastest = fastest.max(rate);
            if left > deadline_s * fastest * (1.0 + 1e-6) {
                continue;
            }
            let mut iters = 0.0;
            let mut from = None;
            for k in (0..np).rev() {
                let (a, b, free) = self.piece(k, aligned);
                let (n, r) = levels.fit(q.min(free));
                let dur = (b as f64).min(deadline_s) - a as f64;
                if n > 0 && dur > 0.0 {
                    iters += dur * r;
                }
                if iters >= left {
                    from = Some(k);
                    break;
                }
            }
            let Some(k0) = from else { continue };
            // Forward from the walk's first piece until the work is done.
            let mut plan = Vec::new();
            let mut need = left;
            for k in k0..np {
                let (a, b, free) = self.piece(k, aligned);
                let (n, r) = levels.fit(q.min(free));
                if n == 0 {
                    continue;
                }
                let secs = need / r;
                if (a as f64) + secs <= b as f64 {
                    let end = a + ((secs / slot as f64).ceil() as u64).max(1) * slot;
                    plan.push((a, end.min(b), n));
                    need = 0.0;
                    break;
                }
                need -= (b - a) as f64 * r;
                plan.push((a, b, n));
            }
            if need > 0.0 {
                continue;
            }
            self.take(&plan);
            return Some(plan);
        }
        None
    }
}

/// The GPUs of `plan` at time `t` s.
fn at(plan: &Plan, t: u64) -> u32 {
    plan.iter().find(|p| p.0 <= t && t < p.1).map_or(0, |p| p.2)
}

/// The first time `t` > 0 s where `plan`'s GPUs change (`at(plan, t) !=
/// at(plan, t - 1)`), if any. A plan's pieces are sorted, each `a < b` with
/// GPUs > 0, and do not overlap: a piece's start is a change unless the
/// piece before ends there with the same GPUs, and its end unless the next
/// starts there with the same GPUs. One pass over the pieces.
fn first_change(plan: &Plan) -> Option<u64> {
    for (i, &(a, b, n)) in plan.iter().enumerate() {
        let joined_before = i > 0 && plan[i - 1].1 == a && plan[i - 1].2 == n;
        if a > 0 && !joined_before {
            return Some(a);
        }
        let joined_after = plan.get(i + 1).is_some_and(|q| q.0 == b && q.2 == n);
        if !joined_after {
            return Some(b);
        }
    }
    None
}

/// One job to plan: its id, iterations left, deadline s from now, levels.
pub struct PlanJob<'a> {
    /// The job.
    pub job: JobId,
    /// Iterations left.
    pub left: f64,
    /// Deadline, s from now (may be ≤ 0).
    pub deadline_s: f64,
    /// Its levels.
    pub levels: &'a Levels,
}

/// Plans `jobs` (already in deadline order) on `gpus` free GPUs over slots
/// of `slot_s` s: each job's plan, `None` for a job that cannot meet its
/// deadline.
pub fn plan_all(gpus: u32, jobs: &[PlanJob<'_>], slot_s: u64) -> Vec<Option<Plan>> {
    Planned::new(gpus, jobs, slot_s).plans
}

/// The plans of the admitted jobs, in deadline order, with the free GPUs
/// they leave: what an admission test starts from, kept up to date through
/// the admissions of one scheduling instant ([`Planned::admit`]) so that
/// neither each test nor the instant's allocation re-plans the jobs before
/// the newcomer (the same plans, from the same free GPUs, in the same order:
/// a saving of time only).
#[derive(Clone, Debug)]
pub struct Planned {
    /// The GPUs of the cluster.
    gpus: u32,
    /// Each admitted job's plan (`None`: it cannot meet its deadline), in
    /// deadline order.
    pub plans: Vec<Option<Plan>>,
    /// The free GPUs after all of them.
    profile: Profile,
}

impl Planned {
    /// `jobs` (in deadline order) planned one after the other on `gpus` GPUs
    /// over slots of `slot_s` s ([`Profile::min_share`]).
    pub fn new(gpus: u32, jobs: &[PlanJob<'_>], slot_s: u64) -> Self {
        let mut profile = Profile::new(gpus);
        let plans = jobs.iter().map(|j| profile.min_share(j.left, j.levels, j.deadline_s, slot_s)).collect();
        Planned { gpus, plans, profile }
    }

    /// ElasticFlow's admission decision (module docs, *Admission*) for
    /// `newcomer` among `admitted` (in deadline order, the jobs `self` was
    /// planned for): its own plan meets its deadline and no admitted job's
    /// plan that met its deadline without it fails with it. When it is
    /// admitted, `self` becomes the plans of `admitted` with the newcomer in
    /// its place (its position in deadline order, ties by job); otherwise
    /// `self` is unchanged.
    pub fn admit(&mut self, admitted: &[PlanJob<'_>], newcomer: PlanJob<'_>, slot_s: u64) -> bool {
        debug_assert_eq!(admitted.len(), self.plans.len());
        // The newcomer's place in deadline order (ties: job order).
        let at = admitted.partition_point(|p| (p.deadline_s, p.job) <= (newcomer.deadline_s, newcomer.job));
        // The free GPUs the jobs before it leave: their plans are the same
        // with it as without it.
        let mut profile = if at == admitted.len() {
            self.profile.clone()
        } else {
            let mut p = Profile::new(self.gpus);
            for plan in self.plans[..at].iter().flatten() {
                p.take(plan);
            }
            p
        };
        let Some(own) = profile.min_share(newcomer.left, newcomer.levels, newcomer.deadline_s, slot_s) else {
            return false;
        };
        let mut after = Vec::with_capacity(admitted.len() - at);
        for (p, before) in admitted[at..].iter().zip(&self.plans[at..]) {
            let plan = profile.min_share(p.left, p.levels, p.deadline_s, slot_s);
            if plan.is_none() && before.is_some() {
                return false;
            }
            after.push(plan);
        }
        self.plans.truncate(at);
        self.plans.push(Some(own));
        self.plans.extend(after);
        self.profile = profile;
        true
    }
}

/// ElasticFlow's admission decision (module docs, *Admission*): whether
/// `newcomer` is admitted among `admitted` (in deadline order) on `gpus`
/// GPUs over slots of `slot_s` s: its own plan meets its deadline and no
/// admitted job's plan that met its deadline without it fails with it.
pub fn admits(gpus: u32, admitted: &[PlanJob<'_>], newcomer: PlanJob<'_>, slot_s: u64) -> bool {
    Planned::new(gpus, admitted, slot_s).admit(admitted, newcomer, slot_s)
}

/// One level step of [`give_leftover`]: job `i` to `to` GPUs, gaining `gain`
/// iterations/s per added GPU; ordered by gain, then by lower rank, then by
/// lower index (the linear scan's choice).
#[derive(Clone, Copy, Debug)]
struct Step {
    gain: f64,
    rank: u64,
    i: usize,
    to: u32,
}

impl PartialEq for Step {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Step {}

impl PartialOrd for Step {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Step {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // `+ 0.0` makes −0.0 equal to 0.0, as `==` has it; gains are never
        // NaN (levels' rates are finite).
        (self.gain + 0.0).total_cmp(&(other.gain + 0.0)).then(other.rank.cmp(&self.rank)).then(other.i.cmp(&self.i))
    }
}

/// Gives `free` GPUs to the jobs of `now` (GPUs each) one level step at a
/// time by marginal gain (module docs, *Elastic allocation*): `now` holds
/// (job, GPUs, rank), the rank breaking ties (lower first: deadline order).
///
/// Each step is the best (highest gain; ties: lower rank, then earlier in
/// `now`) of the jobs' next steps that fit the GPUs still free. A job's next
/// step changes only when it is taken, and the free GPUs only shrink, so the
/// steps wait in a heap and one that does not fit when it comes out never
/// will: the same steps as scanning every job at every step, in n log n.
pub fn give_leftover(now: &mut [(JobId, u32, u64)], levels: &[&Levels], mut free: u32) {
    let step = |i: usize, n: u32, rank: u64| {
        levels[i].next(n).map(|(m, r)| {
            let gain = if n == 0 { f64::INFINITY } else { (r - levels[i].rate(n)) / f64::from(m - n) };
            Step { gain, rank, i, to: m }
        })
    };
    if free == 0 {
        return;
    }
    let mut heap: std::collections::BinaryHeap<Step> = now
        .iter()
        .enumerate()
        .filter_map(|(i, &(_, n, rank))| step(i, n, rank))
        .filter(|s| s.to - now[s.i].1 <= free)
        .collect();
    while let Some(s) = heap.pop() {
        let n = now[s.i].1;
        if s.to - n > free {
            continue;
        }
        free -= s.to - n;
        now[s.i].1 = s.to;
        if let Some(t) = step(s.i, s.to, s.rank).filter(|t| t.to - s.to <= free) {
            heap.push(t);
        }
    }
}

/// `elasticflow`; see the module docs.
pub struct ElasticFlow {
    opts: ElasticFlowOptions,
    cadence: Cadence,
    /// Admitted and not complete.
    admitted: BTreeMap<JobId, Active>,
    /// Arrived, not decided yet.
    arrived: Vec<JobId>,
    plan: std::collections::VecDeque<Decision>,
}

impl ElasticFlow {
    /// The policy with `opts`.
    pub fn new(opts: ElasticFlowOptions) -> Self {
        ElasticFlow {
            opts,
            cadence: Cadence::new(opts.slot_s),
            admitted: BTreeMap::new(),
            arrived: Vec::new(),
            plan: Default::default(),
        }
    }

    /// Admitted jobs (plus `extra`) in deadline order as plan inputs.
    fn plan_jobs<'a>(&'a self, view: &View<'_>, extra: Option<(JobId, &'a Active)>) -> Vec<PlanJob<'a>> {
        let now_ms = view.now.as_ms();
        let mut v: Vec<(u64, JobId, &Active)> = self.admitted.iter().map(|(&j, a)| (a.deadline_ms, j, a)).collect();
        if let Some((j, a)) = extra {
            v.push((a.deadline_ms, j, a));
        }
        v.sort_by_key(|x| (x.0, x.1));
        v.into_iter()
            .map(|(d, job, a)| PlanJob {
                job,
                left: remaining(view, job),
                deadline_s: (d as f64 - now_ms as f64) / 1000.0,
                levels: &a.levels,
            })
            .collect()
    }

    /// The scheduling of one instant: admission, min shares, leftovers, placement.
    fn schedule(&mut self, view: &View<'_>) {
        let gpus = view.cluster.total_gpus();
        let slot = self.opts.slot_s;
        // The admitted jobs' plans, kept through the admissions.
        let mut planned = Planned::new(gpus, &self.plan_jobs(view, None), slot);
        // Admission, one newcomer at a time.
        for j in std::mem::take(&mut self.arrived) {
            // The run refuses jobs without a deadline before it starts
            // (`BuildPolicy::deadline_jobs_only`); one built around that
            // check is rejected, as one its model cannot rate (no levels).
            let Some(deadline) = view.jobs.spec(j).deadline() else {
                self.plan.push_back(Decision::Reject { job: j });
                continue;
            };
            let cand = Active { levels: Levels::of(view, j, true), deadline_ms: deadline.as_ms() };
            let admitted = self.plan_jobs(view, None);
            let newcomer = PlanJob {
                job: j,
                left: remaining(view, j),
                deadline_s: (cand.deadline_ms as f64 - view.now.as_ms() as f64) / 1000.0,
                levels: &cand.levels,
            };
            if planned.admit(&admitted, newcomer, slot) {
                self.admitted.insert(j, cand);
            } else {
                self.plan.push_back(Decision::Reject { job: j });
            }
        }
        // Plans of the admitted (as the admissions left them).
        let jobs = self.plan_jobs(view, None);
        let plans = planned.plans;
        let mut now: Vec<(JobId, u32, u64)> = Vec::with_capacity(jobs.len());
        let mut change: Option<u64> = None;
        let mut used = 0u32;
        for (rank, (p, plan)) in jobs.iter().zip(&plans).enumerate() {
            let n = plan.as_ref().map_or(0, |pl| at(pl, 0));
            used += n;
            now.push((p.job, n, rank as u64));
            // The plan's first change of GPU count after now.
            if let Some(t) = plan.as_ref().and_then(first_change) {
                change = Some(change.map_or(t, |c: u64| c.min(t)));
            }
        }
        let levels: Vec<&Levels> = jobs.iter().map(|p| p.levels).collect();
        give_leftover(&mut now, &levels, gpus.saturating_sub(used));
        let target: BTreeMap<JobId, u32> = now.iter().map(|&(j, n, _)| (j, n)).collect();
        self.plan.extend(place(view, &target));
        self.cadence.plan_change(change.map(|s| SimTime::from_ms(view.now.as_ms() + s * 1000)));
    }
}

impl Policy for ElasticFlow {
    fn name(&self) -> String {
        "elasticflow".into()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.arrived.push(job);
        self.cadence.touch();
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        self.admitted.remove(&job);
        self.cadence.touch();
    }

    fn on_timer(&mut self, view: &View<'_>) {
        self.cadence.on_timer(view.now);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        if let Some(d) = self.plan.pop_front() {
            return d;
        }
        match self.cadence.due(view.now) {
            Ok(()) => {
                self.schedule(view);
                self.plan.pop_front().unwrap_or_else(|| self.decide_after(view))
            }
            Err(timer) => timer.unwrap_or(Decision::Wait),
        }
    }
}

impl ElasticFlow {
    /// After a scheduling that decided nothing: the timer to the next plan change.
    fn decide_after(&mut self, view: &View<'_>) -> Decision {
        match self.cadence.due(view.now) {
            Ok(()) => Decision::Wait,
            Err(t) => t.unwrap_or(Decision::Wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_share_takes_the_smallest_level_as_late_as_possible() {
        // Levels 1 → 1 it/s, 2 → 1.5 it/s; 8 GPUs; deadline 300 s, slot 60.
        let lv = Levels(vec![(1, 1.0), (2, 1.5)]);
        let mut p = Profile::new(8);
        // 200 iterations at 1 it/s fit in 300 s: one GPU, from 0 (one piece)
        // to 200 s rounded up to a slot = 240 s.
        assert_eq!(p.min_share(200.0, &lv, 300.0, 60), Some(vec![(0, 240, 1)]));
        assert_eq!(p.0, vec![(0, 7), (240, 8)]);
        // 400 iterations: 1 GPU gives 300 < 400; 2 GPUs: 1.5 × 300 = 450.
        // Walking back: piece [240, 300) (8 free, 2 GPUs: 90), [0, 240)
        // (7 free: 360) → 450 ≥ 400 from piece 0; forward: 360 by 240 s,
        // 40 left at 1.5 it/s = 26.7 s → ends at 240 + 60 = 300.
        assert_eq!(p.min_share(400.0, &lv, 300.0, 60), Some(vec![(0, 240, 2), (240, 300, 2)]));
        // 500 iterations cannot be done by 300 s on 2 GPUs.
        assert_eq!(p.min_share(500.0, &lv, 300.0, 60), None);
    }

    #[test]
    fn first_change_is_the_first_time_the_gpus_change() {
        // Against the definition, at(t) != at(t - 1), at every piece end.
        let brute = |plan: &Plan| -> Option<u64> {
            plan.iter().flat_map(|&(a, b, _)| [a, b]).filter(|&t| t > 0 && at(plan, t) != at(plan, t - 1)).min()
        };
        let plans: Vec<Plan> = vec![
            vec![],
            vec![(0, 60, 2)],
            vec![(0, 60, 2), (60, 120, 2), (120, 180, 4)],
            vec![(0, 60, 2), (60, 120, 2)],
            vec![(60, 120, 1)],
            vec![(0, 60, 1), (120, 180, 1)],
            vec![(0, 60, 1), (60, 90, 1), (90, 240, 1), (300, 360, 8)],
        ];
        for plan in &plans {
            assert_eq!(first_change(plan), brute(plan), "{plan:?}");
        }
        // By hand: 2 GPUs to 120 s, then 4.
        assert_eq!(first_change(&plans[2]), Some(120));
        // Starts at 60 s.
        assert_eq!(first_change(&plans[4]), Some(60));
        // One GPU over [0, 240) in three pieces, then none.
        assert_eq!(first_change(&plans[6]), Some(240));
    }

    /// The admission test as first written (every plan from scratch, with
    /// and without the newcomer): the reference for [`Planned::admit`].
    fn admits_slow(gpus: u32, admitted: &[PlanJob<'_>], newcomer: PlanJob<'_>, slot_s: u64) -> bool {
        let before = plan_all(gpus, admitted, slot_s);
        let at = admitted.partition_point(|p| (p.deadline_s, p.job) <= (newcomer.deadline_s, newcomer.job));
        let mut profile = Profile::new(gpus);
        for (i, p) in admitted.iter().enumerate() {
            if i == at && profile.min_share(newcomer.left, newcomer.levels, newcomer.deadline_s, slot_s).is_none() {
                return false;
            }
            if profile.min_share(p.left, p.levels, p.deadline_s, slot_s).is_none() && before[i].is_some() {
                return false;
            }
        }
        at < admitted.len() || profile.min_share(newcomer.left, newcomer.levels, newcomer.deadline_s, slot_s).is_some()
    }

    /// Leftover GPUs as first written (every job scanned at every step):
    /// the reference for [`give_leftover`].
    fn give_leftover_slow(now: &mut [(JobId, u32, u64)], levels: &[&Levels], mut free: u32) {
        loop {
            let mut best: Option<(usize, f64, u32)> = None;
            for (i, &(_, n, _)) in now.iter().enumerate() {
                let Some((m, r)) = levels[i].next(n) else { continue };
                if m - n > free {
                    continue;
                }
                let gain = if n == 0 { f64::INFINITY } else { (r - levels[i].rate(n)) / f64::from(m - n) };
                let better = match best {
                    None => true,
                    Some((bi, bg, _)) => gain > bg || (gain == bg && now[i].2 < now[bi].2),
                };
                if better {
                    best = Some((i, gain, m));
                }
            }
            let Some((i, _, m)) = best else { return };
            free -= m - now[i].1;
            now[i].1 = m;
        }
    }

    /// Differential: admissions one after another through [`Planned`]
    /// (admitted newcomers joining the plans) against [`admits_slow`] on
    /// the growing admitted list, and the final plans against
    /// [`plan_all`]; leftovers against [`give_leftover_slow`]. Jobs by a
    /// fixed arithmetic pattern over four level sets (ties in deadline and
    /// in gain included), 16 GPUs so that many are rejected.
    #[test]
    fn fast_admission_and_leftovers_agree_with_the_first_versions() {
        let kinds = [
            Levels(vec![(1, 1.0), (2, 1.9), (4, 3.5), (8, 6.0)]),
            Levels(vec![(1, 2.0), (2, 3.0), (4, 3.2)]),
            Levels(vec![(1, 1.0), (2, 2.0), (4, 4.0), (8, 8.0), (16, 16.0)]),
            Levels(vec![(2, 1.5), (4, 2.5)]),
        ];
        let (gpus, slot) = (16, 60);
        let mut rejected = 0;
        for round in 0..6u64 {
            let mut admitted: Vec<(f64, JobId, f64, usize)> = Vec::new();
            for i in 0..40u64 {
                let deadline_s =
                    (300 + (i * 7_919 + round * 104_729) % 20_000) as f64 / if i % 5 == 0 { 1.0 } else { 1.5 };
                let left = (1_000 + (i * 15_485_863 + round) % 60_000) as f64;
                let kind = ((i + round) % 4) as usize;
                let job = JobId(i as u32);
                let jobs: Vec<PlanJob<'_>> = admitted
                    .iter()
                    .map(|&(d, j, l, k)| PlanJob { job: j, left: l, deadline_s: d, levels: &kinds[k] })
                    .collect();
                let newcomer = || PlanJob { job, left, deadline_s, levels: &kinds[kind] };
                let slow = admits_slow(gpus, &jobs, newcomer(), slot);
                let mut planned = Planned::new(gpus, &jobs, slot);
                let fast = planned.admit(&jobs, newcomer(), slot);
                assert_eq!(fast, slow, "round {round}, job {i}");
                assert_eq!(admits(gpus, &jobs, newcomer(), slot), slow);
                drop(jobs);
                if fast {
                    admitted.push((deadline_s, job, left, kind));
                    admitted.sort_by(|a, b| (a.0, a.1).partial_cmp(&(b.0, b.1)).expect("finite"));
                } else {
                    rejected += 1;
                }
                let jobs: Vec<PlanJob<'_>> = admitted
                    .iter()
                    .map(|&(d, j, l, k)| PlanJob { job: j, left: l, deadline_s: d, levels: &kinds[k] })
                    .collect();
                if fast {
                    assert_eq!(planned.plans, plan_all(gpus, &jobs, slot), "round {round}, job {i}");
                }
                // Leftovers from each plan's GPUs now.
                let plans = plan_all(gpus, &jobs, slot);
                let mut now: Vec<(JobId, u32, u64)> = jobs
                    .iter()
                    .zip(&plans)
                    .enumerate()
                    .map(|(r, (p, pl))| (p.job, pl.as_ref().map_or(0, |pl| at(pl, 0)), r as u64))
                    .collect();
                let used: u32 = now.iter().map(|x| x.1).sum();
                let levels: Vec<&Levels> = jobs.iter().map(|p| p.levels).collect();
                for free in [gpus.saturating_sub(used), gpus.saturating_sub(used) + 5, 64] {
                    let mut a = now.clone();
                    let mut b = now.clone();
                    give_leftover(&mut a, &levels, free);
                    give_leftover_slow(&mut b, &levels, free);
                    assert_eq!(a, b, "round {round}, job {i}, free {free}");
                }
                now.clear();
            }
        }
        // The pattern exercises both outcomes.
        assert!(rejected > 20 && rejected < 200, "{rejected} rejected");
    }

    #[test]
    fn leftover_goes_to_idle_jobs_first_then_by_gain_per_gpu() {
        let a = Levels(vec![(1, 1.0), (2, 1.9), (4, 3.0)]);
        let b = Levels(vec![(1, 1.0), (2, 1.2), (4, 1.3)]);
        // a on 1, b on 0, 3 free: b first (idle) → 1; then a's step 1→2
        // gains 0.9/GPU, b's 1→2 0.2: a → 2; 1 left: a's 2→4 needs 2, b's
        // 1→2 needs 1: b → 2.
        let mut now = vec![(JobId(0), 1, 0), (JobId(1), 0, 1)];
        give_leftover(&mut now, &[&a, &b], 3);
        assert_eq!(now, vec![(JobId(0), 2, 0), (JobId(1), 2, 1)]);
    }
}
