//! Memory-efficiency GPU sharing (`specs/policies.md` §4).
//!
//! The thesis behind this policy publishes only its abstract: "memory
//! efficiency" (computation relative to the GPU memory occupied) rates the
//! placements of a task, and a heuristic co-locates tasks. Everything below
//! is a proposal. From the spec (§4.2, itself a proposal):
//!
//! - per job `j`, computation per iteration per GPU `C_j` = the model's
//!   training GFLOPs per sample × the per-GPU batch
//!   ([`crate::profile::resources::compute_gflop_per_iter`]; 0 when unknown),
//!   and memory per GPU `M_j` = the job's per-GPU memory need, MiB (the
//!   database's analytical estimate, or the held share of a GPU for a
//!   fractional pod, [`Cluster::tenant_mem_mib`]);
//! - memory efficiency = computation / memory; FIFO order (the queue policy,
//!   optionally with backfill); the tie-breaks "fewer already-shared GPUs,
//!   then better locality".
//!
//! Ours: trace jobs have a fixed GPU count and batch, so `C_j / M_j` is the
//! same for every placement of a job. What differs between candidate GPU
//! sets is who the job would share with, so a candidate is rated by the
//! memory efficiency of its GPUs **after** the job joins:
//!
//! ```text
//! ME_g(j) = (C_j + Σ_{i on g} C_i) / (M_j + Σ_{i on g} M_i)     GFLOP per MiB
//! ME(S)   = mean over g in S of ME_g(j)
//! ```
//!
//! An idle GPU rates `C_j / M_j`; joining tenants raises the rating exactly
//! when their own efficiency is higher than the job's. A job of `n` GPUs
//! takes, on each node with `n` GPUs that can host it (memory, tenant cap,
//! guaranteed share, GPU type), the `n` best GPUs by (ME_g desc, idle first,
//! least memory left, index); among those per-node candidates the best by
//! (ME(S) desc, fewer already-shared GPUs, least memory left in total,
//! lowest first GPU). When no node can host it, the best `n` GPUs of the
//! partition by the same per-GPU key. A job of unknown memory holds a whole
//! GPU's memory, so it only lands on idle GPUs: the exclusive fallback.

use super::View;
use super::placement::{Placement, Request};
use super::sharing::ShareFit;
use std::collections::HashMap;
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::ids::{GpuId, JobId, NodeId, VcId};
use crate::job::JobTable;
use crate::profile::db::ProfileDb;
use crate::profile::memo::WordState;
use crate::profile::resources::compute_gflop_per_iter;

/// A hostable GPU with its ranking figures.
#[derive(Clone, Copy, Debug)]
struct Cand {
    me: f64,
    shared: bool,
    left_mib: u64,
    gpu: GpuId,
}

fn cmp_gpu(a: &Cand, b: &Cand) -> std::cmp::Ordering {
    b.me.total_cmp(&a.me).then(a.shared.cmp(&b.shared)).then(a.left_mib.cmp(&b.left_mib)).then(a.gpu.cmp(&b.gpu))
}

/// The memory-efficiency packer of fixed-size jobs (`--placement memeff-pack`;
/// formerly named `memory-efficiency`).
///
/// A node's best one-node candidate is a function of the node's state (its
/// tenants, whose computation the run's job table gives) and of the
/// request's partition, GPU count, memory need, share and computation, so it
/// is kept per request class and node under the node's stamp
/// ([`Cluster::node_stamp`]) and reused until the stamp changes. A packer
/// serves one run (one job table).
#[derive(Clone, Debug)]
pub struct MemeffPack {
    db: Arc<ProfileDb>,
    scratch: Vec<Cand>,
    /// Per request class, per node index: its best candidate ([`NodeBest`]).
    best: HashMap<Class, Vec<NodeBest>, WordState>,
}

/// (mean ME, shared GPUs, memory left MiB, first GPU) of a candidate.
type Key = (f64, usize, u64, GpuId);

/// A request class: (partition, GPUs, memory need MiB, milli-GPU, the job's
/// computation `C_j` as `f64` bits).
type Class = (VcId, u32, u64, u32, u64);

/// A node's best one-node candidate for a class, if it has one: (node
/// stamp, candidate key and GPUs). Stamp 0: none yet (stamps start at 1).
type NodeBest = (u64, Option<(Key, Vec<GpuId>)>);

/// Request classes kept; more, and the candidates start over (results are
/// unchanged, memory stays bounded).
const MAX_CLASSES: usize = 256;

/// The rule over the builtin database, parsed for it ([`ProfileDb::builtin`]);
/// a run passes its own with [`MemeffPack::new`].
impl Default for MemeffPack {
    fn default() -> Self {
        MemeffPack::new(Arc::new(ProfileDb::builtin()))
    }
}

impl MemeffPack {
    /// The rule over the run's profile database (for `C_j`).
    pub fn new(db: Arc<ProfileDb>) -> Self {
        MemeffPack { db, scratch: Vec::new(), best: HashMap::default() }
    }

    /// `ME_g(j)` of GPU `g` if a job of computation `c_job` GFLOP and memory
    /// `m_job` MiB joined it (module docs); 0 when no memory is held.
    pub fn gpu_me(&self, cluster: &Cluster, jobs: &JobTable, g: GpuId, c_job: f64, m_job: u64) -> f64 {
        let s = cluster.share(g);
        let c: f64 = c_job
            + s.tenants.iter().map(|&t| compute_gflop_per_iter(&self.db, jobs.spec(t)).unwrap_or(0.0)).sum::<f64>();
        let m = s.mem_mib + m_job;
        if m == 0 { 0.0 } else { c / m as f64 }
    }

    fn hostable(&mut self, cluster: &Cluster, jobs: &JobTable, req: &Request<'_>, c_job: f64, node: NodeId) {
        self.scratch.clear();
        for g in cluster.node_gpus(node) {
            let mem = cluster.tenant_mem_mib(g, (req.min_gpu_mem_mib > 0).then_some(req.min_gpu_mem_mib), req.milli);
            if cluster.can_host(g, req.vc, mem, req.milli) {
                let s = cluster.share(g);
                self.scratch.push(Cand {
                    me: self.gpu_me(cluster, jobs, g, c_job, mem),
                    shared: !s.tenants.is_empty(),
                    left_mib: cluster.gpu_mem_mib(g).saturating_sub(s.mem_mib + mem),
                    gpu: g,
                });
            }
        }
        self.scratch.sort_unstable_by(cmp_gpu);
    }

    /// The best candidate of `node` for `req` (module docs), if `req.gpus`
    /// of its GPUs can host it: from `kept` (the request class's) while the
    /// node's stamp is unchanged.
    fn node_best<'k>(
        &mut self,
        kept: &'k mut [NodeBest],
        cluster: &Cluster,
        jobs: &JobTable,
        req: &Request<'_>,
        c_job: f64,
        node: NodeId,
    ) -> Option<&'k (Key, Vec<GpuId>)> {
        let stamp = cluster.node_stamp(node);
        if kept[node.index()].0 != stamp {
            self.hostable(cluster, jobs, req, c_job, node);
            let n = req.gpus as usize;
            let best = (self.scratch.len() >= n).then(|| {
                let pick = &self.scratch[..n];
                let key: Key = (
                    pick.iter().map(|c| c.me).sum::<f64>() / n as f64,
                    pick.iter().filter(|c| c.shared).count(),
                    pick.iter().map(|c| c.left_mib).sum(),
                    pick.iter().map(|c| c.gpu).min().unwrap_or(GpuId(0)),
                );
                (key, pick.iter().map(|c| c.gpu).collect())
            });
            kept[node.index()] = (stamp, best);
        }
        kept[node.index()].1.as_ref()
    }
}

impl Placement for MemeffPack {
    fn name(&self) -> &'static str {
        "memeff-pack"
    }

    fn shares(&self) -> bool {
        true
    }

    /// Without the job table the tenants' computation is unknown: best fit by memory.
    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        ShareFit::best_fit().place(cluster, req, out)
    }

    fn fails_by_count(&self) -> bool {
        true
    }

    fn place_job(&mut self, view: &View<'_>, job: JobId, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let (cluster, jobs) = (view.cluster, view.jobs);
        let n = req.gpus as usize;
        let p = cluster.partition(req.vc);
        // Fewer free or open GPUs than n (`Cluster::is_open`): nowhere to go.
        if n == 0 || p.gpus_free + p.gpus_open < req.gpus {
            return false;
        }
        let c_job = compute_gflop_per_iter(&self.db, jobs.spec(job)).unwrap_or(0.0);
        // (mean ME, shared GPUs, memory left, first GPU) of the best one-node candidate.
        let better =
            |a: &Key, b: &Key| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)).is_lt();
        let mut best: Option<(Key, Vec<GpuId>)> = None;
        // A job of unknown memory without a share holds a whole GPU, more
        // than any shared GPU offers (headroom > 0): only idle GPUs host it.
        // Without computation every such GPU rates (ME 0, idle, 0 MiB left),
        // so the first node with room wins on its lowest GPU: stop there.
        let first_wins = c_job == 0.0
            && req.min_gpu_mem_mib == 0
            && !(1..1000).contains(&req.milli)
            && cluster.share_limits().mem_headroom > 0.0;
        let class = (req.vc, req.gpus, req.min_gpu_mem_mib, req.milli, c_job.to_bits());
        let mut kept = self.best.remove(&class).unwrap_or_default();
        kept.resize(kept.len().max(cluster.num_nodes()), (0, None));
        for &node in &p.nodes {
            // A node with fewer than n free or open GPUs cannot host n.
            if cluster.node_share_candidates(node) < req.gpus || !req.fits_type(cluster, node) {
                continue;
            }
            let Some((key, pick)) = self.node_best(&mut kept, cluster, jobs, &req, c_job, node) else {
                continue;
            };
            if best.as_ref().is_none_or(|(k, _)| better(key, k)) {
                best = Some((*key, pick.clone()));
            }
            if first_wins {
                break;
            }
        }
        if self.best.len() >= MAX_CLASSES {
            self.best.clear();
        }
        self.best.insert(class, kept);
        if let Some((_, gpus)) = best {
            out.extend(gpus);
            return true;
        }
        // No node can host it alone: the best n hostable GPUs of the partition
        // (`cmp_gpu` is a total order, so the collection order does not matter).
        let mut all: Vec<Cand> = Vec::new();
        for &node in &p.nodes {
            if cluster.node_share_candidates(node) > 0 && req.fits_type(cluster, node) {
                self.hostable(cluster, jobs, &req, c_job, node);
                all.extend_from_slice(&self.scratch);
            }
        }
        if all.len() < n {
            return false;
        }
        all.sort_unstable_by(cmp_gpu);
        out.extend(all[..n].iter().map(|c| c.gpu));
        true
    }
}
