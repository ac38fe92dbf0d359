//! What `tiresias-tuned` and `optimus` share with the Pollux simulator
//! (petuum/adaptdl, branch `osdi21-artifact`, `simulator/`): its scheduling
//! tick and its "most free node first" allocation.
//!
//! - **Ticks.** The simulator advances its jobs by a scheduling interval
//!   (60 s by default) and then calls its policy with the jobs submitted at
//!   or before that instant and not complete (`Cluster.step`,
//!   `get_job_infos`); its first call is at one interval, not at 0. `Ticks`
//!   asks the engine for a timer ([`Decision::WakeAt`]) at the next multiple
//!   of the interval while some job is active, and says whether a pass is a
//!   tick that has not been run yet; the policies do nothing at other passes.
//!   `TickLoop` holds what both policies keep for this (the ticks, the
//!   active jobs, the decisions planned at a tick) and `decide_at_ticks` is
//!   their whole scheduling pass around their own rules (`AtTicks::tick`).
//! - **Allocation.** Both policies give a job `n` GPUs node by node, each
//!   time from the node with the most free GPUs (`Counter.most_common(1)`),
//!   as many as it has or the job still needs. The simulator's counter of
//!   free GPUs lists the nodes with a free GPU in node order, and
//!   `most_common(1)` returns the first maximal entry: ties go to the lowest
//!   node index (`most_free_first`). Which GPUs of a node a job gets does
//!   not matter to the simulator (it counts GPUs per node); here the lowest
//!   free ones.

use std::collections::{BTreeSet, VecDeque};

use crate::cluster::Cluster;
use crate::error::{ConfigError, ConfigErrorKind, RunError};
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::JobState;
use crate::time::SimTime;

use super::{Decision, View};

/// Refuses a cluster of several VC partitions: the simulator's cluster is
/// one pool, and `kind` allocates over all its nodes.
pub(crate) fn one_partition(kind: &str, cluster: &Cluster) -> Result<(), RunError> {
    let n = cluster.partitions().len();
    if n > 1 {
        return Err(ConfigError::new(
            ConfigErrorKind::Conflict,
            format!("{kind} schedules one pool of GPUs, as the Pollux simulator; the cluster has {n} VC partitions"),
        )
        .into());
    }
    Ok(())
}

/// Checks a scheduling interval option (`interval-s`) of `kind`: 1 to
/// 1e11 s; the error names the option and the value.
pub(crate) fn check_interval_s(kind: &str, interval_s: u64) -> Result<(), String> {
    if interval_s == 0 || interval_s > 100_000_000_000 {
        return Err(format!("{kind}: interval-s must be 1 to 1e11 s, got {interval_s}"));
    }
    Ok(())
}

/// The scheduling tick of the Pollux simulator; see the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Ticks {
    interval_ms: u64,
    /// The last tick run.
    last: Option<SimTime>,
    /// The timer asked for and not delivered yet.
    timer: Option<SimTime>,
}

impl Ticks {
    /// Ticks every `interval_ms` (at least 1) from time 0; the first at one interval.
    pub(crate) fn new(interval_ms: u64) -> Self {
        Ticks { interval_ms: interval_ms.max(1), last: None, timer: None }
    }

    /// A timer was delivered at `now`.
    pub(crate) fn on_timer(&mut self, now: SimTime) {
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
        }
    }

    /// True when `now` is a tick (a positive multiple of the interval) not
    /// run yet; marks it run.
    pub(crate) fn take_tick(&mut self, now: SimTime) -> bool {
        let ms = now.as_ms();
        if ms == 0 || !ms.is_multiple_of(self.interval_ms) || self.last == Some(now) {
            return false;
        }
        self.last = Some(now);
        true
    }

    /// The timer to ask for after a pass at `now`: the next tick, when some
    /// job is `active` and no timer is pending.
    pub(crate) fn wake(&mut self, now: SimTime, active: bool) -> Option<Decision> {
        if !active || self.timer.is_some() {
            return None;
        }
        let next = SimTime::from_ms((now.as_ms() / self.interval_ms + 1).saturating_mul(self.interval_ms));
        self.timer = Some(next);
        Some(Decision::WakeAt(next))
    }
}

/// What a policy that acts only at the simulator's ticks keeps between
/// passes; see the module docs.
#[derive(Clone, Debug)]
pub(crate) struct TickLoop {
    ticks: Ticks,
    /// Submitted and not complete.
    pub(crate) active: BTreeSet<JobId>,
    /// The decisions of the last tick not returned yet, in order.
    pub(crate) plan: VecDeque<Decision>,
}

impl TickLoop {
    /// Ticks every `interval_ms` (at least 1); no job active, nothing planned.
    pub(crate) fn new(interval_ms: u64) -> Self {
        TickLoop { ticks: Ticks::new(interval_ms), active: BTreeSet::new(), plan: VecDeque::new() }
    }

    /// `job` was submitted.
    pub(crate) fn on_arrival(&mut self, job: JobId) {
        self.active.insert(job);
    }

    /// `job` completed.
    pub(crate) fn on_completion(&mut self, job: JobId) {
        self.active.remove(&job);
    }

    /// A timer was delivered at `now`.
    pub(crate) fn on_timer(&mut self, now: SimTime) {
        self.ticks.on_timer(now);
    }
}

/// A policy whose rules run only at the simulator's ticks.
pub(crate) trait AtTicks {
    /// Its ticks, active jobs and planned decisions.
    fn tick_loop(&mut self) -> &mut TickLoop;

    /// Its rules at a tick with some job active: appends the tick's
    /// decisions to `tick_loop().plan`.
    fn tick(&mut self, view: &View<'_>);
}

/// The scheduling pass of `policy` at `view.now`: the next decision it
/// planned at its last tick; else, at a tick not run yet with some job
/// active, the first decision of that tick's rules; else the timer to its
/// next tick while some job is active, or [`Decision::Wait`].
pub(crate) fn decide_at_ticks(policy: &mut impl AtTicks, view: &View<'_>) -> Decision {
    if let Some(d) = policy.tick_loop().plan.pop_front() {
        return d;
    }
    let tl = policy.tick_loop();
    if tl.ticks.take_tick(view.now) && !tl.active.is_empty() {
        policy.tick(view);
        if let Some(d) = policy.tick_loop().plan.pop_front() {
            return d;
        }
    }
    let tl = policy.tick_loop();
    tl.ticks.wake(view.now, !tl.active.is_empty()).unwrap_or(Decision::Wait)
}

/// Takes `need` GPUs from `free` (free GPUs per node, by node index), node
/// by node, each time from the first node with the most free GPUs, as many
/// as it has or are still needed. Returns `(node index, count)` in the
/// order taken, or `None` (and `free` unchanged) when fewer than `need` are free.
pub(crate) fn most_free_first(free: &mut [u32], need: u32) -> Option<Vec<(usize, u32)>> {
    if free.iter().map(|&f| u64::from(f)).sum::<u64>() < u64::from(need) {
        return None;
    }
    let mut out = Vec::new();
    let mut left = need;
    while left > 0 {
        let mut best = 0;
        for (i, &f) in free.iter().enumerate() {
            if f > free[best] {
                best = i;
            }
        }
        let take = free[best].min(left);
        free[best] -= take;
        left -= take;
        out.push((best, take));
    }
    Some(out)
}

/// Per node, the GPUs a tick may hand out: free ones and those of the jobs
/// it takes GPUs from, each list ascending.
#[derive(Clone, Debug)]
pub(crate) struct GpuPool {
    per_node: Vec<Vec<GpuId>>,
}

impl GpuPool {
    /// The free GPUs of the cluster in `view`.
    pub(crate) fn free(view: &View<'_>) -> Self {
        let c = view.cluster;
        let per_node = (0..c.num_nodes() as u32)
            .map(|n| c.node_gpus(NodeId(n)).filter(|&g| c.holders(g).next().is_none()).collect())
            .collect();
        GpuPool { per_node }
    }

    /// Adds the GPUs `job` holds (it is being preempted or moved).
    pub(crate) fn give_back(&mut self, view: &View<'_>, job: JobId) {
        for g in held(view, job) {
            let n = view.cluster.node_of(g).index();
            if let Some(list) = self.per_node.get_mut(n) {
                let at = list.partition_point(|&x| x < g);
                list.insert(at, g);
            }
        }
    }

    /// Adds `gpus` (released by a job that keeps its others).
    pub(crate) fn add(&mut self, view: &View<'_>, gpus: &[GpuId]) {
        for &g in gpus {
            let n = view.cluster.node_of(g).index();
            if let Some(list) = self.per_node.get_mut(n) {
                let at = list.partition_point(|&x| x < g);
                list.insert(at, g);
            }
        }
    }

    /// Free GPUs per node.
    fn counts(&self) -> Vec<u32> {
        self.per_node.iter().map(|l| l.len() as u32).collect()
    }

    /// Takes `count` GPUs of node `node`, preferring those in `prefer`
    /// (ascending), then the lowest.
    fn take(&mut self, node: usize, count: u32, prefer: &[GpuId], out: &mut Vec<GpuId>) {
        let Some(list) = self.per_node.get_mut(node) else { return };
        let mut left = count as usize;
        let mut i = 0;
        while left > 0 && i < list.len() {
            if prefer.contains(&list[i]) {
                out.push(list.remove(i));
                left -= 1;
            } else {
                i += 1;
            }
        }
        let n = left.min(list.len());
        out.extend(list.drain(..n));
    }

    /// Takes `need` GPUs node by node by [`most_free_first`] over the
    /// pool's counts, within each node those in `prefer` (ascending) first,
    /// then the lowest. Returns the GPUs in the order taken and the count
    /// taken per node in that order, or `None` (the pool unchanged) when
    /// fewer than `need` are in it.
    pub(crate) fn take_most_free(&mut self, need: u32, prefer: &[GpuId]) -> Option<(Vec<GpuId>, Vec<u32>)> {
        let mut counts = self.counts();
        let chunks = most_free_first(&mut counts, need)?;
        let mut gpus = Vec::new();
        let mut per_node = Vec::new();
        for (node, count) in chunks {
            self.take(node, count, prefer, &mut gpus);
            per_node.push(count);
        }
        Some((gpus, per_node))
    }

    /// [`GpuPool::take_most_free`] within one GPU type: on a cluster of one
    /// type, the same; on several (Sia's clusters), over the nodes of the
    /// first type in [`Cluster::gpu_type_names`] order whose nodes hold
    /// `need` GPUs of the pool (our reading of how a job of the Pollux
    /// simulator's policies runs on a heterogeneous cluster: Sia's simulator
    /// places every job on GPUs of one type, and its progress model rates a
    /// job on one type only).
    pub(crate) fn take_most_free_one_type(
        &mut self,
        cluster: &Cluster,
        need: u32,
        prefer: &[GpuId],
    ) -> Option<(Vec<GpuId>, Vec<u32>)> {
        if cluster.gpu_type_names().len() <= 1 {
            return self.take_most_free(need, prefer);
        }
        for t in 0..cluster.gpu_type_names().len() as u16 {
            let mut counts = self.counts();
            for (n, c) in counts.iter_mut().enumerate() {
                if cluster.gpu_type_of(NodeId(n as u32)) != t {
                    *c = 0;
                }
            }
            let Some(chunks) = most_free_first(&mut counts, need) else { continue };
            let mut gpus = Vec::new();
            let mut per_node = Vec::new();
            for (node, count) in chunks {
                self.take(node, count, prefer, &mut gpus);
                per_node.push(count);
            }
            return Some((gpus, per_node));
        }
        None
    }
}

/// The GPUs `job` holds (empty unless it runs).
pub(crate) fn held(view: &View<'_>, job: JobId) -> Vec<GpuId> {
    match view.jobs.state(job) {
        JobState::Running(r) => r.gpus.clone(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_free_first_breaks_ties_by_the_lowest_node() {
        // free [2, 4, 4, 1]: 6 GPUs = 4 from node 1 (first of the two 4s),
        // then 2 from node 2 (now the most free, 4 > 2).
        let mut free = vec![2, 4, 4, 1];
        assert_eq!(most_free_first(&mut free, 6), Some(vec![(1, 4), (2, 2)]));
        assert_eq!(free, vec![2, 0, 2, 1]);
        // 3 more: node 0 (2, first of the 2s), then node 2 (2 > 1): 1.
        assert_eq!(most_free_first(&mut free, 3), Some(vec![(0, 2), (2, 1)]));
        assert_eq!(most_free_first(&mut free, 3), None);
        assert_eq!(free, vec![0, 0, 1, 1]);
    }

    #[test]
    fn ticks_are_positive_multiples_run_once() {
        let mut t = Ticks::new(60_000);
        assert!(!t.take_tick(SimTime::ZERO));
        assert_eq!(t.wake(SimTime::from_ms(5), true), Some(Decision::WakeAt(SimTime::from_secs(60))));
        assert_eq!(t.wake(SimTime::from_ms(6), true), None); // one pending
        assert!(!t.take_tick(SimTime::from_ms(59_999)));
        t.on_timer(SimTime::from_secs(60));
        assert!(t.take_tick(SimTime::from_secs(60)));
        assert!(!t.take_tick(SimTime::from_secs(60)));
        assert_eq!(t.wake(SimTime::from_secs(60), true), Some(Decision::WakeAt(SimTime::from_secs(120))));
        t.on_timer(SimTime::from_secs(120));
        assert_eq!(t.wake(SimTime::from_secs(120), false), None);
    }
}
