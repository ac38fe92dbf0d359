//! LAS, least attained service, as round-based max-min fair time-sharing
//! over the VC partitions.
//!
//! # Rules
//!
//! - **Service** ([`LasOptions::service`]): a job's attained service is the
//!   GPU-time it has held GPUs (`attained_gpu_s`: GPUs × time, the
//!   default) or the time alone (`attained_s`). GPU-time is the default
//!   because it is the service that max-min fairness over GPUs equalises
//!   and the one Tiresias argues for (Gu et al., NSDI'19, §3.1: a job's
//!   service is its GPUs × its executed time, so that a wide job does not get
//!   the same priority as a narrow one; the section number is our reading);
//!   `time` is 1D LAS. Service counts
//!   any checkpoint overhead the run charges ([`crate::engine::CheckpointModel`]),
//!   as it is time holding GPUs.
//! - **Rounds** ([`LasOptions::round`], s, default 360 s: the 6-minute
//!   rounds of Gavel's round-based mechanism, Narayanan et al., OSDI'20, §5,
//!   as its evaluation, §7, runs it; the section numbers are our reading;
//!   Gavel's heterogeneity-agnostic LAS baseline, max-min fairness over
//!   attained service, is solved there as an LP; here it is the greedy
//!   ranking below). Round boundaries are the multiples of the round
//!   length from the trace origin (time 0). At each boundary at which some
//!   job of a partition waits, that partition's active jobs (running,
//!   pending and preempted) are ranked by attained service, least first
//!   (ties: submission order), and selected greedily by GPU count: walking
//!   the ranking, a job is selected if its GPUs fit the partition's GPUs not
//!   yet given to a higher-ranked selected job, else skipped (smaller jobs
//!   further down may still be selected). Running jobs not selected are
//!   preempted (the run's `--checkpoint` cost is added to their remaining
//!   work); selected waiting jobs are then placed in rank order. A selected
//!   job that cannot be placed (fragmentation, GPU type or memory) waits,
//!   and the GPUs it leaves go to the next waiting jobs in rank order that
//!   can be placed, except those preempted at this boundary (a job is not
//!   preempted and resumed in one round). Running jobs that stay selected
//!   keep their GPUs (no repacking; our reading: a round-based scheduler
//!   that keeps a job's lease when it is scheduled again, as Gavel does).
//! - **Between boundaries** ([`LasOptions::work_conserving`]): by default a
//!   job that arrives, or GPUs that a completion frees, are used at once:
//!   waiting jobs, in rank order, start on the free GPUs if they can be
//!   placed, without preempting anyone (work-conserving; an event-driven
//!   scheduler would not leave GPUs idle until the next boundary). With
//!   `work-conserving=false` jobs start only at boundaries, as in a purely
//!   round-based simulator (Gavel's): arrivals wait for the next boundary,
//!   and freed GPUs stay idle until then.
//! - At a boundary at which no job of a partition waits, every active job
//!   runs and fits: the ranking would select them all, so nothing happens
//!   there, and the policy only asks for a timer ([`Decision::WakeAt`]) at
//!   the next boundary while some job waits. Passes at other instants
//!   (timeline samples, other partitions' events) change nothing: waiting
//!   jobs' service does not change while they wait, and preemption happens
//!   only at boundaries, so the schedule does not depend on the sampling
//!   interval.
//!
//! # Options
//!
//! `service` (`gpu-time` | `time`), `round` (s, ≥ 1), `work-conserving`
//! (bool), `placement` (`consolidate`, `first-fit`, `recorded`; also set
//! by `--placement`).
//!
//! # Cost
//!
//! A boundary sorts each partition with a waiting job (running and waiting
//! jobs, O(n log n)); between boundaries a pass walks the waiting jobs in
//! rank order (a B-tree by (service, job)), and an unconstrained job is not
//! tried once one of no more GPUs failed in the pass.
//!
//! After a boundary whose round decided nothing (every running job
//! selected, no waiting job placeable), the next timer is at the first
//! boundary where the ranking by service can change (waiting services are
//! constant, running ones linear in time: the first neighbour crossing,
//! in closed form), not at every boundary; an arrival or a completion
//! before it asks for the next boundary again. The schedule is the one of
//! every round run ([`Las::with_round_skipping`]).

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::placement::{Placement, PlacementKind};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::error::RunError;
use crate::ids::{GpuId, JobId, VcId};
use crate::job::JobState;
use crate::time::SimTime;

/// What attained service measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LasService {
    /// GPUs × time holding them (2D, the default).
    #[default]
    GpuTime,
    /// Time holding GPUs (1D).
    Time,
}

/// LAS's options. Names are kebab-case (`work-conserving`); the snake_case
/// spelling is accepted too. Unknown names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LasOptions {
    /// Attained service: `gpu-time` (default) or `time`.
    pub service: LasService,
    /// Round length, s (default 360, Gavel's); at least 1.
    pub round: u64,
    /// Start waiting jobs on free GPUs between boundaries (default true);
    /// false: only at boundaries.
    #[serde(alias = "work_conserving")]
    pub work_conserving: bool,
    /// Placement rule, exclusive only (default `consolidate`).
    pub placement: PlacementKind,
}

impl Default for LasOptions {
    fn default() -> Self {
        LasOptions {
            service: LasService::GpuTime,
            round: 360,
            work_conserving: true,
            placement: PlacementKind::Consolidate,
        }
    }
}

impl BuildPolicy for LasOptions {
    fn preemption_period_ms(&self, _kind: &str) -> Option<u64> {
        Some(self.round.saturating_mul(1000))
    }

    fn validate(&self, _kind: &str) -> Result<(), String> {
        super::build::whole_gpu_placement("las", self.placement)?;
        if self.round == 0 || self.round > 100_000_000_000 {
            return Err(format!("las: round must be 1 to 1e11 s, got {}", self.round));
        }
        Ok(())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let placement = self.placement.build_for(ctx.db_for(self.placement).as_ref());
        Ok(Box::new(Las::new(*self, placement, ctx.cluster.partitions().len())))
    }

    fn placement(&self) -> PlacementKind {
        self.placement
    }
}

#[derive(Default)]
struct VcJobs {
    /// Pending and preempted jobs by (service, job).
    waiting: BTreeSet<(u64, JobId)>,
    /// Running jobs.
    running: BTreeSet<JobId>,
}

/// One step of a round's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Preempt(JobId),
    Place(JobId),
}

/// LAS; see the module docs.
pub struct Las {
    opts: LasOptions,
    round_ms: u64,
    placement: Box<dyn Placement>,
    exact_by_count: bool,
    vcs: Vec<VcJobs>,
    /// Service each waiting job is booked under (its key in `waiting`).
    keys: Vec<u64>,
    /// Partitions with an arrival or completion since their last pass.
    dirty: BTreeSet<u16>,
    /// The boundary a round was last run at.
    last_round: Option<SimTime>,
    /// The timer asked for, not yet delivered.
    timer_at: Option<SimTime>,
    /// The current plan (a round's, or a between-rounds pass's).
    plan: VecDeque<Action>,
    /// Jobs launched or preempted by the last decision, booked at the next call.
    to_book: Vec<JobId>,
    /// The smallest GPU count of an unconstrained job that failed since GPUs
    /// were last freed in this pass.
    min_failed: u32,
    failed_at: Option<SimTime>,
    scratch: Vec<GpuId>,
    /// Skip the boundaries whose round provably decides nothing (default;
    /// see [`Las::with_round_skipping`]).
    skip_rounds: bool,
    /// The boundary whose round has decided nothing so far in its pass.
    quiet_round: Option<SimTime>,
}

impl Las {
    /// LAS with `opts` placing by `placement` for `partitions` partitions.
    pub fn new(opts: LasOptions, placement: Box<dyn Placement>, partitions: usize) -> Self {
        Las {
            round_ms: opts.round.saturating_mul(1000),
            exact_by_count: matches!(opts.placement, PlacementKind::Consolidate | PlacementKind::FirstFit),
            opts,
            placement,
            vcs: (0..partitions.max(1)).map(|_| VcJobs::default()).collect(),
            keys: Vec::new(),
            dirty: BTreeSet::new(),
            last_round: None,
            timer_at: None,
            plan: VecDeque::new(),
            to_book: Vec::new(),
            min_failed: u32::MAX,
            failed_at: None,
            scratch: Vec::new(),
            skip_rounds: true,
            quiet_round: None,
        }
    }

    /// With `on = false`, a timer at every boundary while a job waits, as
    /// before round skipping; the schedule is the same either way (only
    /// rounds that provably decide nothing are skipped), so this is for
    /// tests that compare the two.
    pub fn with_round_skipping(mut self, on: bool) -> Self {
        self.skip_rounds = on;
        self
    }

    /// After a round at `now` that decided nothing: the first boundary whose
    /// round may decide something if no job arrives or completes before it
    /// (`None`: none ever).
    ///
    /// Such a round selected every running job (none was preempted) and
    /// failed to place every waiting one. Until an arrival or a completion
    /// the cluster stays as it is, so the waiting jobs keep failing, and a
    /// later round decides nothing as long as it selects every running job;
    /// the selection is a function of the ranking by (service, job), so it
    /// cannot change before the ranking does. Waiting jobs' services are
    /// constant and running jobs' grow linearly (slope: their GPUs under
    /// `gpu-time`, 1 under `time`), and the first change of an order of
    /// lines is a swap of two neighbours: for neighbours a before b with
    /// slopes g_a > g_b and gap d = s_b − s_a, a passes b after
    /// ⌊d / (g_a − g_b)⌋ + 1 ms, or d / (g_a − g_b) ms when the gap closes
    /// exactly and a's id is the larger (ties rank by id).
    fn next_change(&self, view: &View<'_>) -> Option<SimTime> {
        let gpu = self.opts.service == LasService::GpuTime;
        let mut first: Option<u64> = None;
        let mut keys: Vec<(u64, JobId, u64)> = Vec::new();
        for q in self.vcs.iter().filter(|q| !q.waiting.is_empty()) {
            keys.clear();
            keys.extend(q.waiting.iter().map(|&(s, j)| (s, j, 0)));
            keys.extend(q.running.iter().map(|&j| {
                let slope = if gpu { u64::from(view.jobs.spec(j).gpus) } else { 1 };
                (self.service(view, j), j, slope)
            }));
            keys.sort_unstable();
            for w in keys.windows(2) {
                let ((sa, a, ga), (sb, b, gb)) = (w[0], w[1]);
                if ga <= gb {
                    continue;
                }
                let (d, dg) = (sb - sa, ga - gb);
                let after = if a > b && d % dg == 0 { d / dg } else { d / dg + 1 };
                first = Some(first.map_or(after, |f| f.min(after)));
            }
        }
        let at = view.now.as_ms().checked_add(first?)?;
        Some(SimTime::from_ms(at.div_ceil(self.round_ms).saturating_mul(self.round_ms)))
    }

    /// A job's attained service now (ms or GPU-ms).
    fn service(&self, view: &View<'_>, job: JobId) -> u64 {
        let gpu = self.opts.service == LasService::GpuTime;
        match view.jobs.state(job) {
            JobState::Running(r) => {
                let run = view.now.since(r.start);
                if gpu { r.attained_gpu_ms + run * u64::from(view.jobs.spec(job).gpus) } else { r.attained_ms + run }
            }
            JobState::Suspended(s) => {
                if gpu {
                    s.attained_gpu_ms
                } else {
                    s.attained_ms
                }
            }
            _ => 0,
        }
    }

    fn key_slot(&mut self, job: JobId) -> &mut u64 {
        if self.keys.len() <= job.index() {
            self.keys.resize(job.index() + 1, 0);
        }
        &mut self.keys[job.index()]
    }

    /// Books a job the engine just launched or preempted, from its state.
    fn book(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc.index();
        let key = *self.key_slot(job);
        match view.jobs.state(job) {
            JobState::Running(_) => {
                self.vcs[vc].waiting.remove(&(key, job));
                self.vcs[vc].running.insert(job);
            }
            JobState::Suspended(_) => {
                let s = self.service(view, job);
                self.vcs[vc].running.remove(&job);
                *self.key_slot(job) = s;
                self.vcs[vc].waiting.insert((s, job));
            }
            _ => {}
        }
    }

    fn is_boundary(&self, now: SimTime) -> bool {
        now.as_ms().is_multiple_of(self.round_ms) && self.last_round != Some(now)
    }

    /// The round's plan for partition `vc`: preemptions, then placements.
    fn plan_round(&mut self, vc: VcId, view: &View<'_>) {
        let q = &self.vcs[vc.index()];
        let mut ranked: Vec<(u64, JobId, bool)> = q.waiting.iter().map(|&(s, j)| (s, j, false)).collect();
        ranked.extend(q.running.iter().map(|&j| (self.service(view, j), j, true)));
        ranked.sort_unstable();
        let mut budget = view.cluster.partition(vc).gpus_total;
        let mut selected = vec![false; ranked.len()];
        for (i, &(_, j, _)) in ranked.iter().enumerate() {
            let g = view.jobs.spec(j).gpus;
            if g <= budget {
                budget -= g;
                selected[i] = true;
            }
        }
        let it = || ranked.iter().zip(&selected);
        self.plan.extend(it().filter(|&(r, &s)| r.2 && !s).map(|(r, _)| Action::Preempt(r.1)));
        self.plan.extend(it().filter(|&(r, &s)| !r.2 && s).map(|(r, _)| Action::Place(r.1)));
        self.plan.extend(it().filter(|&(r, &s)| !r.2 && !s).map(|(r, _)| Action::Place(r.1)));
    }

    /// A between-rounds pass of partition `vc`: every waiting job, in rank order.
    fn plan_fill(&mut self, vc: VcId, view: &View<'_>) {
        if view.cluster.partition(vc).gpus_free == 0 {
            return;
        }
        self.plan.extend(self.vcs[vc.index()].waiting.iter().map(|&(_, j)| Action::Place(j)));
    }

    /// Whether `job` is known to fail now (see [`Las::min_failed`]).
    fn known_to_fail(&self, view: &View<'_>, job: JobId) -> bool {
        self.exact_by_count
            && self.failed_at == Some(view.now)
            && unconstrained(view, job)
            && view.jobs.spec(job).gpus >= self.min_failed
    }

    fn try_place(&mut self, view: &View<'_>, job: JobId) -> bool {
        if self.failed_at != Some(view.now) {
            self.failed_at = Some(view.now);
            self.min_failed = u32::MAX;
        }
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

    /// The next decision of the current plan, if any.
    fn step_plan(&mut self, view: &View<'_>) -> Option<Decision> {
        while let Some(a) = self.plan.pop_front() {
            match a {
                Action::Preempt(job) => {
                    // GPUs come free: earlier failures say nothing any more.
                    self.min_failed = u32::MAX;
                    self.to_book.push(job);
                    return Some(Decision::Preempt { job });
                }
                Action::Place(job) => {
                    if matches!(view.jobs.state(job), JobState::Pending | JobState::Suspended(_))
                        && self.try_place(view, job)
                    {
                        self.to_book.push(job);
                        return Some(Decision::Launch { job, gpus: std::mem::take(&mut self.scratch) });
                    }
                }
            }
        }
        None
    }

    fn anyone_waits(&self) -> bool {
        self.vcs.iter().any(|q| !q.waiting.is_empty())
    }
}

/// True when a job has no memory need, GPU-type constraint or share.
fn unconstrained(view: &View<'_>, job: JobId) -> bool {
    let s = view.jobs.spec(job);
    s.gpu_mem_mib().is_none() && s.gpu_types().is_none() && s.gpu_milli().is_none()
}

impl Policy for Las {
    fn name(&self) -> String {
        "las".into()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc;
        *self.key_slot(job) = 0;
        self.vcs[vc.index()].waiting.insert((0, job));
        self.dirty.insert(vc.0);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc;
        self.vcs[vc.index()].running.remove(&job);
        self.dirty.insert(vc.0);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        if self.timer_at == Some(view.now) {
            self.timer_at = None;
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        for job in std::mem::take(&mut self.to_book) {
            self.book(job, view);
        }
        if self.plan.is_empty() && self.is_boundary(view.now) {
            self.last_round = Some(view.now);
            // A round covers every partition with a waiting job, and
            // (work-conserving) the partitions with events too.
            for vc in 0..self.vcs.len() {
                if !self.vcs[vc].waiting.is_empty() {
                    self.plan_round(VcId(vc as u16), view);
                }
            }
            self.dirty.clear();
            self.quiet_round = Some(view.now);
        }
        loop {
            if let Some(d) = self.step_plan(view) {
                self.quiet_round = None;
                return d;
            }
            if !self.opts.work_conserving {
                self.dirty.clear();
            }
            let Some(vc) = self.dirty.pop_first() else { break };
            self.plan_fill(VcId(vc), view);
        }
        if !self.anyone_waits() {
            return Decision::Wait;
        }
        // The next boundary, or, after a round that decided nothing, the
        // first one whose round may decide something (an arrival or a
        // completion before it asks for the next boundary again; the timer
        // left behind then fires at a boundary where a round runs anyway
        // while a job waits, or where no job waits and a round does nothing).
        let at = if self.skip_rounds && self.quiet_round == Some(view.now) {
            self.next_change(view)
        } else {
            let next = (view.now.as_ms() / self.round_ms + 1).saturating_mul(self.round_ms);
            Some(SimTime::from_ms(next))
        };
        match at {
            Some(at) if self.timer_at.is_none_or(|t| t <= view.now || t > at) => {
                self.timer_at = Some(at);
                Decision::WakeAt(at)
            }
            _ => Decision::Wait,
        }
    }
}
