//! Preemptive shortest-remaining-time-first (SRTF) over the VC partitions.
//!
//! At each scheduling pass, in every partition touched since the last one,
//! pending (and suspended) and running jobs are ranked by their remaining
//! work (ms at rate 1: the oracle trace duration less the work done, plus any
//! checkpoint overhead charged at a preemption,
//! [`crate::engine::CheckpointModel`]); higher-ranked jobs get GPUs first,
//! running jobs that lose them are preempted ([`Decision::Preempt`]), and a
//! preempted job resumes, possibly elsewhere, when it ranks high enough
//! again (a launch of a suspended job).
//!
//! # Default semantics and the reference's
//!
//! By default ([`SrtfOptions::default`]):
//! - a job that cannot be *placed* holds no GPUs: pending jobs are tried in
//!   rank order, and GPUs a higher-ranked job cannot use (fragmentation) go
//!   to the next job that can use them;
//! - a pending job that does not fit the free GPUs preempts running jobs
//!   ranked below it, the lowest first, only as far as that lets it be
//!   placed (a trial placement on free-GPU counts per node, node for node
//!   the rule's for consolidate and first fit), so no job is preempted for
//!   one that still cannot start; once a pass has preempted, the partition is
//!   planned once more at that instant, without preempting, so the preempted
//!   jobs take any GPUs left;
//! - on equal remaining work a running job ranks before a pending one (no
//!   preemption between equals), pending jobs tie in submission order;
//! - a job's GPUs are released the instant its work runs out.
//!
//! The Helios simulator's SRTF (S-Lab-System-Group/HeliosArtifact @ bdaae10,
//! `framework/QSSF Service/policies/srtf.py`; its exact rules, with hand
//! examples checked against it, are in
//! `../shared/fidelity/helios-philly/SEMANTICS-srtf-qssf.md` §3) differs in
//! four ways, each behind its own option, all off by default
//! ([`SrtfOptions::helios`] sets them all):
//! - [`SrtfOptions::quota_by_count`]: the ranking is walked with the
//!   partition's GPU *count* as the budget; running jobs that do not fit it
//!   are all preempted, then the pending jobs that fit it are placed, and
//!   one that cannot be placed keeps its share of the count, so GPUs may
//!   stay idle (§3.2);
//! - [`SrtfOptions::pending_first_on_ties`]: on equal remaining work a
//!   pending job ranks before a running one, which is then preempted (§5.3);
//! - [`SrtfOptions::preempted_to_back`]: pending jobs tie in the order they
//!   joined the pending list, a preempted job joining it at the back (after
//!   that instant's arrivals); running jobs tie in the order they (re)started
//!   (in both modes);
//! - [`SrtfOptions::helios_release_delay`]: a job keeps its GPUs 1 s after
//!   its work runs out, once per job, the reference's release order (§3.5):
//!   it ranks with 0 remaining work during that second, so it keeps them.
//!
//! With [`SrtfPlacement::Consolidate`] (the default, as everywhere in
//! dlsched; it is also the reference's rule, [`super::placement::Consolidate`]), the Helios
//! checkpoint table ([`crate::engine::CheckpointModel::HeliosTable`]) and
//! `--tie-order numpy2-avx512` on the trace, the Helios-window replay
//! reproduces the reference job for job (`tests/it/fidelity.rs`).
//!
//! # Why passes at event instants give the reference's schedule
//!
//! The reference re-ranks every second. Between two events (arrivals,
//! completions, releases) nothing it reads changes except that every running
//! job's remaining work falls by one per second while pending jobs' stay put.
//! Running jobs therefore only move *up* the ranking, past pending ones; their
//! order among themselves, and the pending jobs' among themselves, is fixed.
//! After a pass every running job is in the selected set S (the others were
//! preempted) and S fits the count. At a later second with no event, walk the
//! new ranking: a job outside S is pending, and the selected jobs ranked
//! before it are a superset of those ranked before it at the pass, so it
//! still does not fit; so only jobs of S are taken, and all of them fit,
//! since S fits. The selection is unchanged, the free GPUs are unchanged
//! (only events release or take GPUs), so placements that failed fail again:
//! the reference does nothing in such a second. A pass at each event instant
//! of the partition (and none in between) gives the same schedule, and no
//! timer is needed. (The instant a job's work runs out under the release
//! delay is not an event of the policy: the job just ranks first, which
//! changes nothing by the same argument.) The default semantics are defined
//! at event instants, and the same holds for them: a pending job left out
//! could not be placed even with every running job ranked below it
//! preempted, and as time passes that set only shrinks.
//!
//! # Migration
//!
//! A job preempted to make room (default semantics) may resume at once on
//! other GPUs in the same instant's second plan: preempt + launch
//! elsewhere, charged one checkpoint (`tests/it/srtf.rs`, the default
//! hand example: C and E move from node 0 to node 1).
//!
//! # Cost
//!
//! Each partition keeps its pending jobs in one B-tree per GPU count by
//! (remaining work, tie key) and its running jobs in one by (projected
//! finish, tie key): the finish is constant while the job's rate is (a key
//! read in a pass is checked, and the running set re-keyed if a rate
//! changed), so ranking a pass is one merge of sorted sets, in partitions
//! touched since the last pass only, skipping GPU counts that cannot fit;
//! the reference's walk stops once no pending job fits the budget left and
//! every running job left does (`benches/srtf.rs`).

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::placement::{Consolidate, FirstFit, Placement, PlacementKind, Recorded};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::error::{ConfigError, RunError};
use crate::ids::{GpuId, JobId, VcId};
use crate::job::JobState;
use crate::time::SimTime;

/// The placement rules SRTF can use: exclusive ones (a preemptive policy
/// that shares GPUs is not offered).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SrtfPlacement {
    /// Fewest nodes, best fit; exactly the Helios simulator's rule
    /// ([`super::placement::Consolidate`]).
    #[default]
    Consolidate,
    /// First node in index order with room ([`super::placement::FirstFit`]).
    FirstFit,
    /// The trace's recorded split ([`super::placement::Recorded`]).
    Recorded,
}

/// SRTF's options. In a file (TOML/JSON) the names are kebab-case
/// (`quota-by-count`); the snake_case spelling (`quota_by_count`) is
/// accepted too. Unknown names are refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SrtfOptions {
    /// Placement rule (default `consolidate`).
    pub placement: SrtfPlacement,
    /// The reference's budget: the ranking is walked with the partition's GPU
    /// count as the budget, running jobs that do not fit it are preempted,
    /// and a pending job that fits it but cannot be placed keeps its share
    /// (default false: pending jobs are tried in rank order on the free GPUs,
    /// each preempting lower-ranked running jobs only as far as that lets it
    /// start; see the module docs).
    #[serde(alias = "quota_by_count")]
    pub quota_by_count: bool,
    /// On equal remaining work, pending jobs rank before running ones
    /// (default false: running first).
    #[serde(alias = "pending_first_on_ties")]
    pub pending_first_on_ties: bool,
    /// Pending jobs tie in the order they joined the pending list, a
    /// preempted job at its back (default false: submission order).
    #[serde(alias = "preempted_to_back")]
    pub preempted_to_back: bool,
    /// Compatibility switch for the Helios simulator's "+1 s per job": a job
    /// keeps its GPUs 1 s (1,000 ms) after its work runs out, once per job
    /// (default false).
    #[serde(alias = "helios_release_delay")]
    pub helios_release_delay: bool,
}

impl SrtfOptions {
    /// The Helios simulator's SRTF: every reference option on, consolidate
    /// placement. Pair it with [`crate::engine::CheckpointModel::HeliosTable`].
    pub fn helios() -> Self {
        SrtfOptions {
            placement: SrtfPlacement::Consolidate,
            quota_by_count: true,
            pending_first_on_ties: true,
            preempted_to_back: true,
            helios_release_delay: true,
        }
    }
}

/// Builds SRTF for a cluster of `partitions` VC partitions (what the
/// registry's builder calls).
///
/// # Errors
/// None today; the signature leaves room for option checks.
pub fn build(opts: &SrtfOptions, partitions: usize) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(Srtf::new(*opts, partitions)))
}

/// The registry's entry (`"srtf" => Srtf(SrtfOptions)`): every option is
/// valid, and jobs are admitted under the placement rule SRTF places with.
impl BuildPolicy for SrtfOptions {
    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        Ok(build(self, ctx.cluster.partitions().len())?)
    }

    fn placement(&self) -> PlacementKind {
        match self.placement {
            SrtfPlacement::Consolidate => PlacementKind::Consolidate,
            SrtfPlacement::FirstFit => PlacementKind::FirstFit,
            SrtfPlacement::Recorded => PlacementKind::Recorded,
        }
    }
}

/// (key, tie key, job): remaining ms (pending) or projected finish ms (running).
type Entry = (u64, u64, JobId);

#[derive(Default)]
struct VcJobs {
    /// Pending and suspended jobs by GPU count, each set in (remaining, tie) order.
    pending: std::collections::BTreeMap<u32, BTreeSet<Entry>>,
    running: BTreeSet<Entry>,
    /// GPUs of the running jobs.
    running_gpus: u32,
}

/// Where a job is in the policy's books.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Out,
    Pending(u64, u64),
    Running(u64, u64),
}

/// One step of a partition's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Preempt(JobId),
    Place(JobId),
}

/// Preemptive SRTF; see the module docs.
pub struct Srtf {
    opts: SrtfOptions,
    placement: Box<dyn Placement>,
    vcs: Vec<VcJobs>,
    dirty: BTreeSet<u16>,
    slots: Vec<Slot>,
    /// Tie keys in list order (arrivals, preemptions, starts).
    seq: u64,
    /// Jobs preempted or launched by the last decision, booked at the next call.
    to_book: Vec<JobId>,
    /// The partition being scheduled and what is left of its plan.
    plan_vc: VcId,
    plan: VecDeque<Action>,
    /// Smallest GPU count that failed to place in the current plan.
    failed_gpus: u32,
    /// Default mode: the current plan preempts, so the partition is planned
    /// once more at this instant (without preempting) to place the jobs it
    /// preempted where GPUs are left.
    replan: bool,
    scratch: Vec<GpuId>,
    /// Scratch for the default mode's trial placements: free GPUs per node
    /// of the partition (by position in it), node sizes, a node's position.
    hyp: Vec<u32>,
    trial: Vec<u32>,
    sizes: Vec<u32>,
    pos: Vec<u32>,
}

impl Srtf {
    /// SRTF with `opts` for `partitions` partitions.
    pub fn new(opts: SrtfOptions, partitions: usize) -> Self {
        let placement: Box<dyn Placement> = match opts.placement {
            SrtfPlacement::Consolidate => Box::new(Consolidate),
            SrtfPlacement::FirstFit => Box::new(FirstFit),
            SrtfPlacement::Recorded => Box::new(Recorded),
        };
        Srtf {
            opts,
            placement,
            vcs: (0..partitions.max(1)).map(|_| VcJobs::default()).collect(),
            dirty: BTreeSet::new(),
            slots: Vec::new(),
            seq: 0,
            to_book: Vec::new(),
            plan_vc: VcId(0),
            plan: VecDeque::new(),
            failed_gpus: u32::MAX,
            replan: false,
            scratch: Vec::new(),
            hyp: Vec::new(),
            trial: Vec::new(),
            sizes: Vec::new(),
            pos: Vec::new(),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn slot(&mut self, job: JobId) -> &mut Slot {
        if self.slots.len() <= job.index() {
            self.slots.resize(job.index() + 1, Slot::Out);
        }
        &mut self.slots[job.index()]
    }

    fn add_pending(&mut self, job: JobId, vc: VcId, gpus: u32, key: u64, tie: u64) {
        self.vcs[vc.index()].pending.entry(gpus).or_default().insert((key, tie, job));
        *self.slot(job) = Slot::Pending(key, tie);
    }

    fn unbook(&mut self, job: JobId, view: &View<'_>) {
        let spec = view.jobs.spec(job);
        let (vc, gpus) = (spec.vc, spec.gpus);
        let slot = std::mem::replace(self.slot(job), Slot::Out);
        let q = &mut self.vcs[vc.index()];
        match slot {
            Slot::Pending(k, s) => {
                if let Some(set) = q.pending.get_mut(&gpus) {
                    set.remove(&(k, s, job));
                    if set.is_empty() {
                        q.pending.remove(&gpus);
                    }
                }
            }
            Slot::Running(k, s) => {
                q.running.remove(&(k, s, job));
                q.running_gpus -= gpus;
            }
            Slot::Out => {}
        }
    }

    /// Books a job the engine just preempted or launched, from its state.
    fn book(&mut self, job: JobId, view: &View<'_>) {
        self.unbook(job, view);
        let spec = view.jobs.spec(job);
        let (vc, gpus) = (spec.vc, spec.gpus);
        match view.jobs.state(job) {
            JobState::Suspended(s) => {
                let tie = if self.opts.preempted_to_back { self.next_seq() } else { job.0.into() };
                self.add_pending(job, vc, gpus, ceil_ms(s.remaining), tie);
            }
            JobState::Running(_) => {
                let tie = self.next_seq();
                let key = finish_ms(view, job);
                let q = &mut self.vcs[vc.index()];
                q.running.insert((key, tie, job));
                q.running_gpus += gpus;
                *self.slot(job) = Slot::Running(key, tie);
            }
            _ => {}
        }
    }

    /// Re-keys a partition's running jobs whose projected finish moved (a
    /// rate change).
    fn refresh_running(&mut self, vc: VcId, view: &View<'_>) {
        let stale: Vec<Entry> =
            self.vcs[vc.index()].running.iter().copied().filter(|&(k, _, j)| finish_ms(view, j) != k).collect();
        for &(k, tie, j) in &stale {
            let q = &mut self.vcs[vc.index()];
            q.running.remove(&(k, tie, j));
            let nk = finish_ms(view, j);
            q.running.insert((nk, tie, j));
            self.slots[j.index()] = Slot::Running(nk, tie);
        }
    }

    /// Ranks partition `vc` and plans its preemptions (unless
    /// `may_preempt` is false) and placements. Running jobs' keys are checked
    /// as they are read; if one has moved (a rate change), the partition's
    /// running jobs are re-keyed and the plan made again.
    fn make_plan(&mut self, vc: VcId, view: &View<'_>, may_preempt: bool) {
        if !self.try_plan(vc, view, may_preempt) {
            self.refresh_running(vc, view);
            let fresh = self.try_plan(vc, view, may_preempt);
            debug_assert!(fresh, "running keys were just refreshed");
        }
    }

    /// [`Srtf::make_plan`] on the current keys; false (and no plan) when a
    /// running job's key it read is stale.
    fn try_plan(&mut self, vc: VcId, view: &View<'_>, may_preempt: bool) -> bool {
        self.plan.clear();
        self.plan_vc = vc;
        self.failed_gpus = u32::MAX;
        let now = view.now.as_ms();
        let (pend_class, run_class) = if self.opts.pending_first_on_ties { (0u8, 1u8) } else { (1, 0) };
        // Running jobs in rank order: remaining = finish - now (0 once done).
        let rank_run = |e: &Entry| (e.0.saturating_sub(now), run_class, e.1);
        // A job whose rate never changed since its (re)start has the key it
        // was booked with; only the others are recomputed.
        let fresh = |e: &Entry| match view.jobs.state(e.2) {
            JobState::Running(r) if r.settled_at == r.start => true,
            _ => finish_ms(view, e.2) == e.0,
        };
        let q = &self.vcs[vc.index()];
        // Per GPU count, an iterator over its pending jobs in rank order.
        let mut classes: Vec<(u32, std::iter::Peekable<std::collections::btree_set::Iter<'_, Entry>>)> =
            q.pending.iter().map(|(&g, set)| (g, set.iter().peekable())).collect();
        // Running jobs: taken from the front in rank order; in the default
        // mode, preempted from the back (the lowest ranked first).
        let mut run = q.running.iter();
        let mut run_next = run.next();
        // GPUs of the running jobs not yet taken from either end.
        let mut run_left: u32 = q.running_gpus;
        let mut actions: Vec<Action> = Vec::new();
        if self.opts.quota_by_count {
            // The reference: the partition's GPU count is the budget.
            let mut quota = view.cluster.partition(vc).gpus_total;
            loop {
                let best_p = classes
                    .iter_mut()
                    .enumerate()
                    .filter(|(_, (g, _))| *g <= quota)
                    .filter_map(|(i, (_, it))| it.peek().map(|e| ((e.0, pend_class, e.1), i)))
                    .min();
                if best_p.is_none() && quota >= run_left {
                    // No pending job fits and every running one does: done.
                    break;
                }
                let take_pending = match (best_p, run_next) {
                    (None, None) => break,
                    (Some((kp, _)), Some(e)) => kp < rank_run(e),
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                };
                if let (true, Some((_, i))) = (take_pending, best_p) {
                    let (g, it) = &mut classes[i];
                    let Some(&(_, _, job)) = it.next() else { break };
                    quota -= *g;
                    actions.push(Action::Place(job));
                } else if let Some(e) = run_next {
                    if !fresh(e) {
                        return false;
                    }
                    run_next = run.next();
                    let g = gpus_of(view, e.2);
                    run_left -= g;
                    if g <= quota {
                        quota -= g;
                    } else {
                        actions.push(Action::Preempt(e.2));
                    }
                }
                if quota == 0 {
                    let rest = run_next.into_iter().chain(run.by_ref());
                    actions.extend(rest.map(|e| Action::Preempt(e.2)));
                    break;
                }
            }
            // Preemptions first (in rank order), then the placements.
            let (pre, place): (Vec<Action>, Vec<Action>) =
                actions.into_iter().partition(|a| matches!(a, Action::Preempt(_)));
            self.plan.extend(pre);
            self.plan.extend(place);
        } else {
            // Default: a trial placement on the partition's free GPUs per
            // node; a pending job that does not fit may take the GPUs of
            // running jobs ranked below it (lowest first), if that lets it fit.
            let p = view.cluster.partition(vc);
            if self.pos.len() < view.cluster.num_nodes() {
                self.pos.resize(view.cluster.num_nodes(), 0);
            }
            self.hyp.clear();
            self.sizes.clear();
            for (i, &n) in p.nodes.iter().enumerate() {
                self.pos[n.index()] = i as u32;
                self.hyp.push(view.cluster.node_free(n));
                self.sizes.push(view.cluster.node(n).gpus);
            }
            let free: u32 = self.hyp.iter().sum();
            let rule = self.opts.placement;
            let mut min_failed = u32::MAX;
            loop {
                let best_p = classes
                    .iter_mut()
                    .enumerate()
                    .filter(|(_, (g, _))| *g < min_failed)
                    .filter_map(|(i, (_, it))| it.peek().map(|e| ((e.0, pend_class, e.1), i)))
                    .min();
                // Running jobs are only read to know what ranks below a
                // pending job: without pending candidates, the pass is done.
                let Some((kp, i)) = best_p else { break };
                if let Some(e) = run_next.filter(|e| rank_run(e) < kp) {
                    if !fresh(e) {
                        return false;
                    }
                    run_left -= gpus_of(view, e.2);
                    run_next = run.next();
                    continue;
                }
                let (g, it) = &mut classes[i];
                let g = *g;
                let Some(&(_, _, job)) = it.next() else { break };
                if g > free + run_left {
                    min_failed = min_failed.min(g);
                    continue;
                }
                let exact = rule != SrtfPlacement::Recorded && unconstrained(view, job);
                if trial_place(rule, exact, &mut self.hyp, &self.sizes, g) {
                    actions.push(Action::Place(job));
                    continue;
                }
                // Free the lowest-ranked running jobs one by one (on a copy
                // of the iterator, kept only if that lets the job fit).
                let mut trial_run = run.clone();
                let mut trial_next = run_next;
                self.trial.clone_from(&self.hyp);
                let mut victims: Vec<JobId> = Vec::new();
                let mut placed = false;
                while let Some(v) = may_preempt.then(|| trial_run.next_back().or_else(|| trial_next.take())).flatten() {
                    if !fresh(v) {
                        return false;
                    }
                    victims.push(v.2);
                    if let JobState::Running(r) = view.jobs.state(v.2) {
                        for &gpu in &r.gpus {
                            self.trial[self.pos[view.cluster.node_of(gpu).index()] as usize] += 1;
                        }
                    }
                    let mut t = self.trial.clone();
                    if trial_place(rule, exact, &mut t, &self.sizes, g) {
                        self.trial = t;
                        placed = true;
                        break;
                    }
                }
                if placed {
                    self.replan = true;
                    run_left -= victims.iter().map(|&v| gpus_of(view, v)).sum::<u32>();
                    actions.extend(victims.into_iter().map(Action::Preempt));
                    run = trial_run;
                    run_next = trial_next;
                    std::mem::swap(&mut self.hyp, &mut self.trial);
                    actions.push(Action::Place(job));
                } else {
                    // Larger jobs cannot fit later in this pass either.
                    min_failed = min_failed.min(g);
                }
            }
            self.plan.extend(actions);
        }
        true
    }

    /// Tries to place `job` now (GPUs in `scratch`), unless a job of no more
    /// GPUs already failed in this plan (the exclusive rules place an
    /// unconstrained job by GPU counts alone: a larger job fails where a
    /// smaller one did, until GPUs are released).
    fn try_place(&mut self, view: &View<'_>, job: JobId) -> bool {
        let req = request(view, job);
        let by_count = self.opts.placement != SrtfPlacement::Recorded && unconstrained(view, job);
        if by_count && req.gpus >= self.failed_gpus {
            return false;
        }
        self.scratch.clear();
        if self.placement.place_job(view, job, req, &mut self.scratch) {
            return true;
        }
        if by_count {
            self.failed_gpus = self.failed_gpus.min(req.gpus);
        }
        false
    }

    /// The next decision of the current plan, if any.
    fn step_plan(&mut self, view: &View<'_>) -> Option<Decision> {
        while let Some(a) = self.plan.pop_front() {
            match a {
                Action::Preempt(job) => {
                    // GPUs come free: earlier failures say nothing any more.
                    self.failed_gpus = u32::MAX;
                    self.to_book.push(job);
                    return Some(Decision::Preempt { job });
                }
                Action::Place(job) => {
                    if self.try_place(view, job) {
                        self.unbook(job, view);
                        self.to_book.push(job);
                        return Some(Decision::Launch { job, gpus: std::mem::take(&mut self.scratch) });
                    }
                }
            }
        }
        None
    }
}

/// True when a job has no memory need, GPU-type constraint or share.
fn unconstrained(view: &View<'_>, job: JobId) -> bool {
    let s = view.jobs.spec(job);
    s.gpu_mem_mib().is_none() && s.gpu_types().is_none() && s.gpu_milli().is_none()
}

/// The placement rule on free-GPU counts per node (`free`, by position in
/// the partition; `sizes` the nodes' GPUs): takes `g` GPUs from `free` and
/// returns true, or returns false and leaves `free` alone. `exact`: the job
/// is unconstrained and the rule is consolidate or first fit, which this
/// follows node for node ([`Consolidate`], [`FirstFit`]); otherwise only the
/// partition's free count is checked (the real placement may still fail).
fn trial_place(rule: SrtfPlacement, exact: bool, free: &mut [u32], sizes: &[u32], g: u32) -> bool {
    let total: u32 = free.iter().sum();
    if g == 0 || g > total {
        return false;
    }
    let max_node = sizes.iter().copied().max().unwrap_or(0);
    if !exact {
        let mut left = g;
        for f in free.iter_mut() {
            let take = (*f).min(left);
            *f -= take;
            left -= take;
        }
        return true;
    }
    match rule {
        SrtfPlacement::FirstFit | SrtfPlacement::Recorded if g <= max_node => match free.iter().position(|&f| f >= g) {
            Some(i) => {
                free[i] -= g;
                true
            }
            None => false,
        },
        SrtfPlacement::FirstFit | SrtfPlacement::Recorded => {
            let mut left = g;
            for f in free.iter_mut() {
                let take = (*f).min(left);
                *f -= take;
                left -= take;
            }
            true
        }
        SrtfPlacement::Consolidate if g <= max_node => {
            // Best fit: fewest free GPUs with room, ties to the lowest position.
            let best = free.iter().enumerate().filter(|&(_, &f)| f >= g).min_by_key(|&(i, &f)| (f, i)).map(|(i, _)| i);
            match best {
                Some(i) => {
                    free[i] -= g;
                    true
                }
                None => false,
            }
        }
        SrtfPlacement::Consolidate => {
            // Most free first (ties: lowest position): whole free nodes while
            // more than a node is still needed, then the remainder on the next.
            let mut order: Vec<usize> = (0..free.len()).filter(|&i| free[i] > 0).collect();
            order.sort_by_key(|&i| (std::cmp::Reverse(free[i]), i));
            let mut take: Vec<(usize, u32)> = Vec::new();
            let mut left = g;
            for i in order {
                let f = free[i];
                if f == sizes[i] && left > f {
                    take.push((i, f));
                    left -= f;
                    continue;
                }
                if f >= left {
                    take.push((i, left));
                    for (i, n) in take {
                        free[i] -= n;
                    }
                    return true;
                }
                break;
            }
            false
        }
    }
}

/// GPUs a job asks for.
fn gpus_of(view: &View<'_>, job: JobId) -> u32 {
    view.jobs.spec(job).gpus
}

/// Whole ms, rounded up, of a non-negative amount of work.
fn ceil_ms(x: f64) -> u64 {
    x.max(0.0).ceil() as u64
}

/// A running job's projected finish, ms: when its work runs out at its
/// current rate (constant while the rate is).
fn finish_ms(view: &View<'_>, job: JobId) -> u64 {
    match view.jobs.state(job) {
        JobState::Running(r) if r.work_done => r.settled_at.as_ms(),
        JobState::Running(r) => r.settled_at.as_ms() + ceil_ms(r.remaining / r.rate),
        _ => SimTime::ZERO.as_ms(),
    }
}

impl Policy for Srtf {
    fn name(&self) -> String {
        "srtf".into()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let spec = view.jobs.spec(job);
        let (vc, gpus, work) = (spec.vc, spec.gpus, spec.duration_ms);
        let tie = if self.opts.preempted_to_back { self.next_seq() } else { job.0.into() };
        self.add_pending(job, vc, gpus, work, tie);
        self.dirty.insert(vc.0);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        self.unbook(job, view);
        self.dirty.insert(view.jobs.spec(job).vc.0);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        for job in std::mem::take(&mut self.to_book) {
            self.book(job, view);
        }
        loop {
            if let Some(d) = self.step_plan(view) {
                return d;
            }
            if std::mem::take(&mut self.replan) {
                self.make_plan(self.plan_vc, view, false);
                continue;
            }
            let Some(vc) = self.dirty.pop_first() else {
                return Decision::Wait;
            };
            self.make_plan(VcId(vc), view, true);
        }
    }

    fn release_delay_ms(&self) -> u64 {
        if self.opts.helios_release_delay { 1_000 } else { 0 }
    }
}
