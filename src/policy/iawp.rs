//! Interference-aware co-location after IAWP (Zhang, Geng and Ma, TPDS
//! 2021; `specs/policies.md` §5.3 and §5.5), `--placement iawp`.
//!
//! IAWP profiles each subtask's GPU metrics (SM usage, caches, device
//! memory, load/store throughput), and a GPU's queue launches the waiting
//! subtask least similar (cosine) to the ones running, while the GPU's
//! utilisation and device-memory utilisation are below thresholds. The
//! profile database here has neither SM usage nor cache or bandwidth
//! measurements, so the resource vector of a job `j` on GPU `g` is (ours):
//!
//! ```text
//! v_j = (u_j, m_j)   u_j = SM-utilisation proxy (dlsched::profile::resources::SmUtil::job)
//!                    m_j = memory the job holds on g / g's memory
//! ```
//!
//! (no memory-bandwidth component: nothing in the data supports one). With
//! two non-negative components the cosine compares the ratio of compute to
//! memory: a compute-heavy, memory-light job is least similar to a
//! memory-heavy, compute-light one. Jobs without a model count `u_j` =
//! their guaranteed share or 1.
//!
//! The policy (FIFO order), at every pass of a partition:
//!
//! 1. the head of the queue starts on idle GPUs if it can (consolidated, as
//!    `consolidate` places it), as a tenant so others may join later; with
//!    backfill, so may the later jobs of the first [`WINDOW`];
//! 2. else admission (IAWP's rule): every GPU with at least one tenant and
//!    room for another whose tenants' summed `u` is below [`UTIL_MAX`] and
//!    whose memory held is below [`MEM_MAX`] of its memory takes, among the
//!    one-GPU jobs of the first [`WINDOW`] of the queue that fit it, the one
//!    of least mean cosine similarity to its tenants (priority `1 − mean
//!    cosine`, the spec's fix for negative similarities; ties: queue order).
//!    Multi-GPU jobs are only started on idle GPUs (step 1).
//!
//! Thresholds 0.8 and 0.9 are the spec's proposal (the paper's values are
//! unknown).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use super::placement::{Consolidate, Placement};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::ids::{GpuId, JobId, VcId};
use crate::profile::db::ProfileDb;
use crate::profile::resources::{SmUtil, cosine};

/// Queued jobs considered for admission and backfill, in queue order.
pub const WINDOW: usize = 32;
/// A GPU admits another job only while its tenants' summed SM estimate is below this.
pub const UTIL_MAX: f64 = 0.8;
/// ... and its memory held is below this fraction of its memory.
pub const MEM_MAX: f64 = 0.9;

/// The IAWP-style policy (module docs).
pub struct Iawp {
    backfill: bool,
    /// The run's profile database (for the SM proxy); `None`: the builtin one.
    db: Option<Arc<ProfileDb>>,
    /// The SM proxy over it, built on first use.
    sm: OnceLock<SmUtil>,
    queues: BTreeMap<VcId, BTreeSet<(u64, JobId)>>,
    dirty: BTreeSet<VcId>,
}

impl Iawp {
    /// FIFO, with or without backfill onto idle GPUs.
    /// The SM proxy reads the builtin profile database unless
    /// [`Iawp::with_profiles`] names the run's.
    pub fn new(backfill: bool) -> Self {
        Iawp { backfill, db: None, sm: OnceLock::new(), queues: BTreeMap::new(), dirty: BTreeSet::new() }
    }

    /// The same, reading the SM proxy from the run's database `db`.
    pub fn with_profiles(mut self, db: Arc<ProfileDb>) -> Self {
        self.db = Some(db);
        self.sm = OnceLock::new();
        self
    }

    /// The SM proxy over the run's database (the builtin one, parsed here,
    /// when none was given).
    fn sm(&self) -> &SmUtil {
        self.sm.get_or_init(|| SmUtil::new(self.db.clone().unwrap_or_else(|| Arc::new(ProfileDb::builtin()))))
    }

    /// The resource vector of `job` on `g` (module docs).
    pub fn vector(&self, view: &View<'_>, job: JobId, g: GpuId) -> [f64; 2] {
        let c = view.cluster;
        let spec = view.jobs.spec(job);
        let gpu_type = &c.node(c.node_of(g)).gpu_type;
        let mem = c.tenant_mem_mib(g, spec.gpu_mem_mib, spec.gpu_milli.unwrap_or(0));
        [self.sm().job(spec, gpu_type), mem as f64 / c.gpu_mem_mib(g).max(1) as f64]
    }

    fn next_in(&self, vc: VcId, view: &View<'_>) -> Option<Decision> {
        let q = self.queues.get(&vc)?;
        let window: Vec<JobId> = q.iter().take(WINDOW).map(|k| k.1).collect();
        // 1. Idle GPUs: the head, then (backfill) the rest of the window.
        let idle_tries = if self.backfill { window.len() } else { window.len().min(1) };
        for &job in &window[..idle_tries] {
            let mut gpus = Vec::new();
            if Consolidate.place(view.cluster, request(view, job), &mut gpus) {
                return Some(Decision::Colocate { job, gpus });
            }
        }
        // 2. Admission onto shared GPUs.
        let c = view.cluster;
        let p = c.partition(vc);
        // Only an open shared GPU (`Cluster::is_open`: a tenant, below the
        // cap, memory not over its shareable part) can take another tenant.
        if p.gpus_open == 0 {
            return None;
        }
        for &node in &p.nodes {
            if c.node_open(node) == 0 {
                continue;
            }
            for g in c.node_gpus(node) {
                let s = c.share(g);
                if !c.is_open(g) || s.mem_mib as f64 >= MEM_MAX * c.gpu_mem_mib(g) as f64 {
                    continue;
                }
                let gpu_type = &c.node(node).gpu_type;
                let util: f64 = s.tenants.iter().map(|&t| self.sm().job(view.jobs.spec(t), gpu_type)).sum();
                if util >= UTIL_MAX {
                    continue;
                }
                let tenants: Vec<[f64; 2]> = s.tenants.iter().map(|&t| self.vector(view, t, g)).collect();
                let mut best: Option<(f64, JobId)> = None;
                for &job in &window {
                    let req = request(view, job);
                    if req.gpus != 1 || !req.fits_type(c, node) {
                        continue;
                    }
                    let spec = view.jobs.spec(job);
                    let mem = c.tenant_mem_mib(g, spec.gpu_mem_mib, req.milli);
                    if !c.can_host(g, vc, mem, req.milli) {
                        continue;
                    }
                    let v = self.vector(view, job, g);
                    let sim = tenants.iter().map(|t| cosine(&v, t)).sum::<f64>() / tenants.len() as f64;
                    if best.is_none_or(|(b, _)| sim < b) {
                        best = Some((sim, job));
                    }
                }
                if let Some((_, job)) = best {
                    return Some(Decision::Colocate { job, gpus: vec![g] });
                }
            }
        }
        None
    }
}

impl Policy for Iawp {
    fn name(&self) -> String {
        if self.backfill { "fifo+backfill".into() } else { "fifo".into() }
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let spec = view.jobs.spec(job);
        self.queues.entry(spec.vc).or_default().insert((spec.submit.as_ms(), job));
        self.dirty.insert(spec.vc);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        self.dirty.insert(view.jobs.spec(job).vc);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        while let Some(&vc) = self.dirty.first() {
            if let Some(d) = self.next_in(vc, view) {
                if let Decision::Colocate { job, .. } = &d {
                    let key = (view.jobs.spec(*job).submit.as_ms(), *job);
                    if let Some(q) = self.queues.get_mut(&vc) {
                        q.remove(&key);
                    }
                }
                return d;
            }
            self.dirty.remove(&vc);
        }
        Decision::Wait
    }
}
