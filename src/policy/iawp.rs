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
//! unknown). This is [`Admission::Cosine`] (`--policy-opt admission=cosine`).
//!
//! [`Admission::Predicted`] (the default) replaces step 2's cosine
//! proxy by predicted co-location speeds, the paper's key idea (interference
//! of pairs never measured predicted by collaborative filtering): every open
//! GPU (as above, no utilisation proxy) takes, among the same candidates, the
//! job that maximises the GPU's predicted summed normalised throughput
//! `Σ_i s_i` over its tenants with the job, `s_i` by the co-location rule
//! (`src/profile/coloc.rs`: measured pairs, else the learned model's
//! prediction, `src/profile/ncf.rs`, else the rule's fallbacks), only while
//! every tenant's predicted speed stays at or above `theta_speed` and the
//! GPU's memory held with the job at or below `theta_mem` of its memory (our
//! reading of the paper's "GPU utilisation and device-memory utilisation
//! below thresholds"). Ties: queue order. The defaults
//! ([`THETA_SPEED`], [`THETA_MEM`]) are the best of the threshold sweep
//! `experiments/iawp.toml` by the criterion stated in `experiments/iawp.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use super::placement::{Consolidate, Placement};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::ids::{GpuId, JobId, VcId};
use crate::profile::coloc::{Interference, ProfileInterference};
use crate::profile::db::ProfileDb;
use crate::profile::resources::{SmUtil, cosine};

/// Queued jobs considered for admission and backfill, in queue order.
pub const WINDOW: usize = 32;
/// A GPU admits another job only while its tenants' summed SM estimate is below this.
pub const UTIL_MAX: f64 = 0.8;
/// ... and its memory held is below this fraction of its memory.
pub const MEM_MAX: f64 = 0.9;
/// Predicted admission: the lowest predicted speed (1 = as alone) any tenant
/// may be left at (`experiments/iawp.md`: the threshold sweep's best).
pub const THETA_SPEED: f64 = 0.5;
/// Predicted admission: the most memory, as a fraction of the GPU's, its
/// tenants may hold with the job (`experiments/iawp.md`).
pub const THETA_MEM: f64 = 1.0;

/// How IAWP admits a queued job onto a GPU with tenants (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// The spec's proposal (module docs): least cosine-similar (SM proxy, memory fraction),
    /// while the SM estimate < [`UTIL_MAX`] and memory < [`MEM_MAX`].
    Cosine,
    /// The most predicted summed normalised throughput, every tenant's
    /// predicted speed ≥ `theta_speed`, memory ≤ `theta_mem` (the default).
    #[default]
    Predicted,
}

/// The predicted admission's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Predicted {
    /// Lowest predicted speed of any tenant, in [0, 1].
    pub theta_speed: f64,
    /// Most memory held with the job, a fraction of the GPU's, in (0, 1].
    pub theta_mem: f64,
}

impl Default for Predicted {
    fn default() -> Self {
        Predicted { theta_speed: THETA_SPEED, theta_mem: THETA_MEM }
    }
}

/// The IAWP-style policy (module docs).
pub struct Iawp {
    backfill: bool,
    /// The run's profile database (for the SM proxy); `None`: the builtin one.
    db: Option<Arc<ProfileDb>>,
    /// The SM proxy over it, built on first use.
    sm: OnceLock<SmUtil>,
    queues: BTreeMap<VcId, BTreeSet<(u64, JobId)>>,
    dirty: BTreeSet<VcId>,
    /// Predicted admission: its settings and the co-location model it
    /// predicts with (the policy's own copy, counters unused); `None`: cosine.
    predicted: Option<(Predicted, ProfileInterference)>,
}

impl Iawp {
    /// FIFO, with or without backfill onto idle GPUs.
    /// The SM proxy reads the builtin profile database unless
    /// [`Iawp::with_profiles`] names the run's.
    pub fn new(backfill: bool) -> Self {
        Iawp {
            backfill,
            db: None,
            sm: OnceLock::new(),
            queues: BTreeMap::new(),
            dirty: BTreeSet::new(),
            predicted: None,
        }
    }

    /// The same admitting by predicted co-location speeds ([`Admission::Predicted`])
    /// from `model` (the run's database, with its learned model).
    pub fn with_predicted(mut self, settings: Predicted, model: ProfileInterference) -> Self {
        self.predicted = Some((settings, model));
        self
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
        let mem = c.tenant_mem_mib(g, spec.gpu_mem_mib(), spec.gpu_milli().unwrap_or(0));
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
        // cap, memory not over its shareable part) can take another tenant,
        // and only a one-GPU job of the window is admitted: without either,
        // no GPU below admits anything.
        if p.gpus_open == 0 || window.iter().all(|&job| view.jobs.spec(job).gpus != 1) {
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
                if let Some((set, model)) = &self.predicted {
                    if let Some(job) = self.admit_predicted(view, vc, &window, g, set, model) {
                        return Some(Decision::Colocate { job, gpus: vec![g] });
                    }
                    continue;
                }
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
                    let mem = c.tenant_mem_mib(g, spec.gpu_mem_mib(), req.milli);
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

impl Iawp {
    /// Predicted admission at open GPU `g` (module docs): the job of
    /// `window` that maximises the predicted summed speed of `g`'s tenants
    /// with it, every speed ≥ θ_speed and memory ≤ θ_mem; ties: queue order.
    fn admit_predicted(
        &self,
        view: &View<'_>,
        vc: VcId,
        window: &[JobId],
        g: GpuId,
        set: &Predicted,
        model: &ProfileInterference,
    ) -> Option<JobId> {
        let c = view.cluster;
        let node = c.node_of(g);
        let gpu_type = &c.node(node).gpu_type;
        let s = c.share(g);
        let tenants: Vec<&crate::job::JobSpec> = s.tenants.iter().map(|&t| view.jobs.spec(t)).collect();
        // Every tenant with the job, and every one but the i-th (buffers
        // reused across the window's jobs).
        let mut all: Vec<&crate::job::JobSpec> = Vec::with_capacity(tenants.len() + 1);
        let mut others: Vec<&crate::job::JobSpec> = Vec::with_capacity(tenants.len());
        let mut best: Option<(f64, JobId)> = None;
        for &job in window {
            let req = request(view, job);
            if req.gpus != 1 || !req.fits_type(c, node) {
                continue;
            }
            let spec = view.jobs.spec(job);
            let mem = c.tenant_mem_mib(g, spec.gpu_mem_mib(), req.milli);
            if !c.can_host(g, vc, mem, req.milli) || (s.mem_mib + mem) as f64 > set.theta_mem * c.gpu_mem_mib(g) as f64
            {
                continue;
            }
            all.clear();
            all.extend_from_slice(&tenants);
            all.push(spec);
            let mut sum = 0.0;
            let mut ok = true;
            for i in 0..all.len() {
                others.clear();
                others.extend(all.iter().enumerate().filter(|&(k, _)| k != i).map(|(_, s)| *s));
                let v = model.speed(gpu_type, all[i], &others);
                ok &= v >= set.theta_speed;
                sum += v;
            }
            if ok && best.is_none_or(|(b, _)| sum > b) {
                best = Some((sum, job));
            }
        }
        best.map(|(_, j)| j)
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
