//! Queue-order baselines: FIFO and SJF, strict or with backfill, over any placement.
//!
//! Each VC partition has its own queue, ordered by a key (submit time for FIFO,
//! trace duration for SJF) with ties broken by job id, i.e. submission order.
//! Pending jobs live in ordered collections, so a scheduling pass touches only
//! the jobs it starts plus one blocked head per partition (and, with backfill,
//! one candidate per distinct GPU count). SJF's queue is a B-tree set; FIFO's,
//! whose jobs arrive in key order, a sorted double-ended queue (O(1) at both
//! ends; a job backfilled from the middle shifts the shorter side).

use std::collections::{BTreeMap, BTreeSet};

use super::placement::Placement;
use super::placement::Request;
use super::{Decision, Policy, View};
use crate::ids::{GpuId, JobId, VcId};

/// How the queue is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum QueueOrder {
    /// First in, first out: by submit time, ties in trace order.
    Fifo,
    /// Shortest job first by the oracle (trace) duration, ties in submission order.
    Sjf,
}

crate::names::value_names!(QueueOrder { Fifo => "fifo", Sjf => "sjf" });

impl QueueOrder {
    /// The order's name.
    pub fn name(self) -> &'static str {
        match self {
            QueueOrder::Fifo => "fifo",
            QueueOrder::Sjf => "sjf",
        }
    }
}

type Key = (u64, JobId);

/// Pending jobs in key order. Under FIFO, jobs arrive in key order (submit
/// time, then id), so a sorted double-ended queue takes them at its back and
/// gives the head from its front in O(1); a key out of order is still
/// inserted at its place. Under SJF keys arrive in any order, so a B-tree
/// set keeps insertions O(log n) however long the queue.
enum Pending {
    Sorted(std::collections::VecDeque<Key>),
    Tree(BTreeSet<Key>),
}

impl Pending {
    fn new(order: QueueOrder) -> Self {
        match order {
            QueueOrder::Fifo => Pending::Sorted(Default::default()),
            QueueOrder::Sjf => Pending::Tree(BTreeSet::new()),
        }
    }

    fn insert(&mut self, key: Key) {
        match self {
            Pending::Sorted(q) if q.back().is_none_or(|&b| b < key) => q.push_back(key),
            Pending::Sorted(q) => {
                let at = q.partition_point(|&k| k < key);
                if q.get(at) != Some(&key) {
                    q.insert(at, key);
                }
            }
            Pending::Tree(t) => {
                t.insert(key);
            }
        }
    }

    fn remove(&mut self, key: &Key) {
        match self {
            Pending::Sorted(q) if q.front() == Some(key) => {
                q.pop_front();
            }
            Pending::Sorted(q) => {
                if let Ok(at) = q.binary_search(key) {
                    q.remove(at);
                }
            }
            Pending::Tree(t) => {
                t.remove(key);
            }
        }
    }

    fn first(&self) -> Option<&Key> {
        match self {
            Pending::Sorted(q) => q.front(),
            Pending::Tree(t) => t.first(),
        }
    }
}

/// The partitions whose queue may have a job to start: a bit set, taken
/// lowest partition first.
struct Dirty(Vec<u64>);

impl Dirty {
    fn new(partitions: usize) -> Self {
        Dirty(vec![0; partitions.div_ceil(64).max(1)])
    }

    fn insert(&mut self, vc: VcId) {
        self.0[vc.index() / 64] |= 1 << (vc.index() % 64);
    }

    fn remove(&mut self, vc: VcId) {
        self.0[vc.index() / 64] &= !(1 << (vc.index() % 64));
    }

    fn first(&self) -> Option<VcId> {
        let (w, bits) = self.0.iter().enumerate().find(|(_, b)| **b != 0)?;
        Some(VcId((w * 64 + bits.trailing_zeros() as usize) as u16))
    }
}

struct VcQueue {
    order: Pending,
    /// Only kept with backfill: the same jobs bucketed by placement class
    /// (the GPU count, or the recorded split for the recorded placement).
    by_class: BTreeMap<Vec<u32>, BTreeSet<Key>>,
}

/// The placement request of a job: its partition, GPU count, recorded split,
/// memory need, guaranteed share and allowed GPU types.
pub fn request<'a>(view: &View<'a>, job: JobId) -> Request<'a> {
    let spec = view.jobs.spec(job);
    // Only a split the trace recorded is replayed; the packed split assumed for
    // other jobs is not a placement to reproduce.
    let shape: &[u32] = if spec.recorded_shape { &spec.recorded_split } else { &[] };
    Request {
        vc: spec.vc,
        gpus: spec.gpus,
        shape,
        min_gpu_mem_mib: spec.gpu_mem_mib().unwrap_or(0),
        milli: spec.gpu_milli().unwrap_or(0),
        gpu_types: spec.gpu_types().unwrap_or(&[]),
    }
}

/// FIFO or SJF over a placement rule.
///
/// Strict (no backfill): the pass stops at the first job of a partition that
/// cannot be placed (head-of-line blocking). With backfill: when the head cannot
/// be placed, the earliest-ordered later job that can be placed starts, and so
/// on; there is no reservation for the head (greedy backfill, not EASY).
pub struct QueuePolicy {
    order: QueueOrder,
    backfill: bool,
    placement: Box<dyn Placement>,
    queues: Vec<VcQueue>,
    dirty: Dirty,
    scratch: Vec<GpuId>,
    /// For placements that [`Placement::fails_by_count`]: jobs that could not
    /// be placed at `failed_at`, none asking at least as much as another.
    /// Allocations only take capacity away, so until GPUs are released (a
    /// completion, a later instant) any job asking at least as much as one of
    /// them fails too and is not tried.
    failed: Vec<JobId>,
    failed_at: Option<crate::time::SimTime>,
}

impl QueuePolicy {
    /// A policy for a cluster of `partitions` VC partitions.
    pub fn new(order: QueueOrder, backfill: bool, placement: Box<dyn Placement>, partitions: usize) -> Self {
        QueuePolicy {
            order,
            backfill,
            placement,
            queues: (0..partitions.max(1))
                .map(|_| VcQueue { order: Pending::new(order), by_class: BTreeMap::new() })
                .collect(),
            dirty: Dirty::new(partitions.max(1)),
            scratch: Vec::new(),
            failed: Vec::new(),
            failed_at: None,
        }
    }

    fn key(&self, job: JobId, view: &View<'_>) -> Key {
        let spec = view.jobs.spec(job);
        match self.order {
            QueueOrder::Fifo => (spec.submit.as_ms(), job),
            QueueOrder::Sjf => (spec.duration_ms, job),
        }
    }

    fn remove(&mut self, vc: VcId, key: Key, view: &View<'_>) {
        let class = self.backfill.then(|| self.placement.class(request(view, key.1)));
        let q = &mut self.queues[vc.index()];
        q.order.remove(&key);
        if let Some(class) = class
            && let Some(b) = q.by_class.get_mut(&class)
        {
            b.remove(&key);
            if b.is_empty() {
                q.by_class.remove(&class);
            }
        }
    }

    /// Places `job` now (its GPUs in `scratch`), unless it asks at least as
    /// much as a job that already failed at this instant.
    fn try_place(&mut self, view: &View<'_>, job: JobId) -> bool {
        let memo = self.placement.fails_by_count();
        if memo {
            if self.failed_at != Some(view.now) {
                self.failed.clear();
                self.failed_at = Some(view.now);
            }
            let req = request(view, job);
            if self.failed.iter().any(|&f| req.asks_at_least(&request(view, f))) {
                return false;
            }
        }
        self.scratch.clear();
        if self.placement.place_job(view, job, request(view, job), &mut self.scratch) {
            return true;
        }
        if memo {
            let req = request(view, job);
            self.failed.retain(|&f| !request(view, f).asks_at_least(&req));
            self.failed.push(job);
        }
        false
    }

    /// The next job of partition `vc` to start now (its GPUs in `scratch`), if any.
    fn next_in(&mut self, vc: VcId, view: &View<'_>) -> Option<Key> {
        let &head = self.queues[vc.index()].order.first()?;
        if self.try_place(view, head.1) {
            return Some(head);
        }
        let q = &self.queues[vc.index()];
        if !self.backfill {
            return None;
        }
        // Every job of one placement class fits or fails alike, so one
        // candidate per class (its earliest) is enough; try them in queue order.
        let head_class = self.placement.class(request(view, head.1));
        let mut candidates: Vec<Key> = q
            .by_class
            .iter()
            .filter(|&(class, _)| *class != head_class)
            .filter_map(|(_, set)| set.first().copied())
            .collect();
        candidates.sort_unstable();
        candidates.into_iter().find(|&key| self.try_place(view, key.1))
    }
}

impl Policy for QueuePolicy {
    fn name(&self) -> String {
        let mut n = self.order.name().to_string();
        if self.backfill {
            n.push_str("+backfill");
        }
        n
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let key = self.key(job, view);
        let spec = view.jobs.spec(job);
        let class = self.backfill.then(|| self.placement.class(request(view, job)));
        let q = &mut self.queues[spec.vc.index()];
        q.order.insert(key);
        if let Some(class) = class {
            q.by_class.entry(class).or_default().insert(key);
        }
        self.dirty.insert(spec.vc);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        self.dirty.insert(view.jobs.spec(job).vc);
        // GPUs were released: earlier failures say nothing any more.
        self.failed.clear();
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        while let Some(vc) = self.dirty.first() {
            if let Some(key) = self.next_in(vc, view) {
                self.remove(vc, key, view);
                let gpus = std::mem::take(&mut self.scratch);
                return if self.placement.shares() {
                    Decision::Colocate { job: key.1, gpus }
                } else {
                    Decision::Launch { job: key.1, gpus }
                };
            }
            self.dirty.remove(vc);
        }
        Decision::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_pending_collections_keep_key_order() {
        let keys: Vec<Key> = [(5, 3), (1, 0), (5, 1), (9, 2), (1, 4), (7, 5)].map(|(t, j)| (t, JobId(j))).to_vec();
        for order in [QueueOrder::Fifo, QueueOrder::Sjf] {
            let mut p = Pending::new(order);
            for &k in &keys {
                p.insert(k);
            }
            p.insert(keys[0]); // a repeat is kept once, as in a set
            let mut taken = Vec::new();
            p.remove(&(5, JobId(1))); // from the middle
            while let Some(&k) = p.first() {
                taken.push(k);
                p.remove(&k);
            }
            let want: Vec<Key> = [(1, 0), (1, 4), (5, 3), (7, 5), (9, 2)].map(|(t, j)| (t, JobId(j))).to_vec();
            assert_eq!(taken, want, "{order:?}");
        }
    }
}
