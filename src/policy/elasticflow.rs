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

    /// Splits the piece holding `t` at `t` (no-op at a boundary).
    fn split(&mut self, t: u64) {
        let i = self.0.partition_point(|p| p.0 <= t);
        // i ≥ 1: the first piece starts at 0 ≤ t.
        if self.0[i - 1].0 != t {
            let free = self.0[i - 1].1;
            self.0.insert(i, (t, free));
        }
    }

    /// Takes `plan`'s GPUs.
    fn take(&mut self, plan: &Plan) {
        for &(a, b, n) in plan {
            if n == 0 {
                continue;
            }
            self.split(a);
            self.split(b);
            for p in self.0.iter_mut().filter(|p| p.0 >= a && p.0 < b) {
                p.1 = p.1.saturating_sub(n);
            }
        }
    }

    /// The pieces over `[0, end)`: `(start, end, free)`.
    fn pieces(&self, end: u64) -> Vec<(u64, u64, u32)> {
        let mut out = Vec::new();
        for (i, &(a, free)) in self.0.iter().enumerate() {
            if a >= end {
                break;
            }
            let b = self.0.get(i + 1).map_or(end, |p| p.0.min(end));
            out.push((a, b, free));
        }
        out
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
        let pieces = self.pieces(aligned);
        for &(q, _) in &levels.0 {
            let mut iters = 0.0;
            let mut from = None;
            for (k, &(a, b, free)) in pieces.iter().enumerate().rev() {
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
            for &(a, b, free) in &pieces[k0..] {
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
    let mut profile = Profile::new(gpus);
    jobs.iter().map(|j| profile.min_share(j.left, j.levels, j.deadline_s, slot_s)).collect()
}

/// ElasticFlow's admission decision (module docs, *Admission*): whether
/// `newcomer` is admitted among `admitted` (in deadline order) on `gpus`
/// GPUs over slots of `slot_s` s: its own plan meets its deadline and no
/// admitted job's plan that met its deadline without it fails with it.
pub fn admits(gpus: u32, admitted: &[PlanJob<'_>], newcomer: PlanJob<'_>, slot_s: u64) -> bool {
    let before = plan_all(gpus, admitted, slot_s);
    // The newcomer's place in deadline order (after equal deadlines: job order
    // puts it last among them, as it arrived last).
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

/// Gives `free` GPUs to the jobs of `now` (GPUs each) one level step at a
/// time by marginal gain (module docs, *Elastic allocation*): `now` holds
/// (job, GPUs, rank), the rank breaking ties (lower first: deadline order).
pub fn give_leftover(now: &mut [(JobId, u32, u64)], levels: &[&Levels], mut free: u32) {
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
            if admits(gpus, &admitted, newcomer, slot) {
                self.admitted.insert(j, cand);
            } else {
                self.plan.push_back(Decision::Reject { job: j });
            }
        }
        // Plans of the admitted.
        let jobs = self.plan_jobs(view, None);
        let plans = plan_all(gpus, &jobs, slot);
        let mut now: Vec<(JobId, u32, u64)> = Vec::with_capacity(jobs.len());
        let mut change: Option<u64> = None;
        let mut used = 0u32;
        for (rank, (p, plan)) in jobs.iter().zip(&plans).enumerate() {
            let n = plan.as_ref().map_or(0, |pl| at(pl, 0));
            used += n;
            now.push((p.job, n, rank as u64));
            // The plan's first change of GPU count after now.
            for &(a, b, _) in plan.iter().flatten() {
                for t in [a, b] {
                    if t > 0 && at(plan.as_ref().expect("some"), t) != at(plan.as_ref().expect("some"), t - 1) {
                        change = Some(change.map_or(t, |c: u64| c.min(t)));
                    }
                }
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
