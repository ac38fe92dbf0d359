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
use super::node_tree::NodeTree;
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
/// Kept state (none of it changes a choice; a packer serves one run, one
/// job table):
///
/// - each job's computation `C_j`, read from the database once;
/// - per node, under its stamp ([`Cluster::node_stamp`]), each GPU that can
///   take a tenant ([`Cluster::share_room`]) with its room, the memory held
///   and its tenants' summed computation: a request's candidate on the node
///   is then one pass over these (the memory need is one figure per node,
///   whose GPUs have one memory size);
/// - per request class ((partition, GPUs, memory need, share, `C_j`)),
///   unless the first node with room wins (below) or the request names GPU
///   types: a min-tree of the partition's nodes by their best candidate's
///   key (`policy::node_tree::NodeTree`; the key ends with the candidate's first GPU, so it
///   orders nodes as the scan does), brought up to date for the nodes whose
///   stamp changed since the class was last placed. Otherwise nodes are
///   scanned in index order.
#[derive(Clone, Debug)]
pub struct MemeffPack {
    db: Arc<ProfileDb>,
    scratch: Vec<Cand>,
    /// Per job index: `C_j` GFLOP, NaN until read.
    c_of: Vec<f64>,
    gpus: NodeGpus,
    /// Per request class: its tree of nodes by best candidate.
    trees: HashMap<Class, NodeTree<TreeKey>, WordState>,
}

/// (mean ME, shared GPUs, memory left MiB, first GPU) of a candidate.
type Key = (f64, usize, u64, GpuId);

/// A request class: (partition, GPUs, memory need MiB, milli-GPU, the job's
/// computation `C_j` as `f64` bits).
type Class = (VcId, u32, u64, u32, u64);

/// A node's place in a class's tree: [`Key`] as ordered integers (mean ME
/// descending as `!` of its `f64::total_cmp` order, then ascending);
/// [`NONE`] for a node without a candidate.
type TreeKey = (i64, u32, u64, u32);

/// The tree key of a node without a candidate.
const NONE: TreeKey = (i64::MAX, u32::MAX, u64::MAX, u32::MAX);

/// Trees kept, counted in nodes (classes × partition nodes); more, and the
/// trees start over (results are unchanged, memory stays bounded: about 56
/// bytes a node of a tree).
const MAX_TREE_NODES: usize = 1 << 20;

/// A GPU that can take a tenant: its room (MiB, milli-GPU), memory held
/// MiB, its tenants' summed computation GFLOP, whether it has tenants, the GPU.
#[derive(Clone, Copy, Debug)]
struct GpuRoom {
    room_mib: u64,
    room_milli: u32,
    held_mib: u64,
    tenants_c: f64,
    shared: bool,
    gpu: GpuId,
}

/// Per node, under its stamp: its GPUs that can take a tenant, in index order.
#[derive(Clone, Debug, Default)]
struct NodeGpus {
    /// Per node: (stamp the rooms were read at, 0: never; rooms kept).
    at: Vec<(u64, u32)>,
    /// From each node's first GPU's index: its rooms.
    rooms: Vec<GpuRoom>,
}

/// `f64::total_cmp`'s order as an integer.
fn ordered(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

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
        MemeffPack { db, scratch: Vec::new(), c_of: Vec::new(), gpus: NodeGpus::default(), trees: HashMap::default() }
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

    /// `C_j` of `job` (0 when unknown), kept.
    fn c_of(&mut self, jobs: &JobTable, job: JobId) -> f64 {
        if self.c_of.len() <= job.index() {
            self.c_of.resize(jobs.len().max(job.index() + 1), f64::NAN);
        }
        let c = self.c_of[job.index()];
        if !c.is_nan() {
            return c;
        }
        let c = compute_gflop_per_iter(&self.db, jobs.spec(job)).unwrap_or(0.0);
        self.c_of[job.index()] = c;
        c
    }

    /// The GPUs of `node` that can take a tenant, read again if its stamp
    /// changed: their positions in `self.gpus.rooms`.
    fn rooms(&mut self, cluster: &Cluster, jobs: &JobTable, node: NodeId) -> std::ops::Range<usize> {
        if self.gpus.at.len() < cluster.num_nodes() {
            self.gpus.at.resize(cluster.num_nodes(), (0, 0));
        }
        let total = cluster.total_gpus() as usize;
        if self.gpus.rooms.len() < total {
            let none =
                GpuRoom { room_mib: 0, room_milli: 0, held_mib: 0, tenants_c: 0.0, shared: false, gpu: GpuId(0) };
            self.gpus.rooms.resize(total, none);
        }
        let Some(first) = cluster.node_gpus(node).next() else { return 0..0 };
        let start = first.index();
        let stamp = cluster.node_stamp(node);
        if self.gpus.at[node.index()].0 != stamp {
            let mut len = 0;
            for g in cluster.node_gpus(node) {
                let Some((room_mib, room_milli)) = cluster.share_room(g) else { continue };
                let s = cluster.share(g);
                // Summed in tenant order, as `gpu_me` sums them.
                let tenants_c: f64 = s.tenants.iter().map(|&t| self.c_of(jobs, t)).sum();
                let room = GpuRoom {
                    room_mib,
                    room_milli,
                    held_mib: s.mem_mib,
                    tenants_c,
                    shared: !s.tenants.is_empty(),
                    gpu: g,
                };
                self.gpus.rooms[start + len] = room;
                len += 1;
            }
            self.gpus.at[node.index()] = (stamp, len as u32);
        }
        start..start + self.gpus.at[node.index()].1 as usize
    }

    /// The GPUs of `node` that can host `req` with their ranking figures,
    /// sorted by them, into `scratch`.
    fn hostable(&mut self, cluster: &Cluster, jobs: &JobTable, req: &Request<'_>, c_job: f64, node: NodeId) {
        self.scratch.clear();
        let Some(first) = cluster.node_gpus(node).next() else { return };
        let mem = cluster.tenant_mem_mib(first, (req.min_gpu_mem_mib > 0).then_some(req.min_gpu_mem_mib), req.milli);
        let gpu_mem = cluster.gpu_mem_mib(first);
        let range = self.rooms(cluster, jobs, node);
        for r in &self.gpus.rooms[range] {
            if mem <= r.room_mib && req.milli <= r.room_milli {
                let m = r.held_mib + mem;
                self.scratch.push(Cand {
                    me: if m == 0 { 0.0 } else { (c_job + r.tenants_c) / m as f64 },
                    shared: r.shared,
                    left_mib: gpu_mem.saturating_sub(m),
                    gpu: r.gpu,
                });
            }
        }
        self.scratch.sort_unstable_by(cmp_gpu);
    }

    /// The best candidate of `node` for `req` (module docs), if `req.gpus`
    /// of its GPUs can host it; its GPUs are then the first `req.gpus` of
    /// `scratch`.
    fn node_best(
        &mut self,
        cluster: &Cluster,
        jobs: &JobTable,
        req: &Request<'_>,
        c_job: f64,
        node: NodeId,
    ) -> Option<Key> {
        self.hostable(cluster, jobs, req, c_job, node);
        let n = req.gpus as usize;
        (self.scratch.len() >= n).then(|| {
            let pick = &self.scratch[..n];
            (
                pick.iter().map(|c| c.me).sum::<f64>() / n as f64,
                pick.iter().filter(|c| c.shared).count(),
                pick.iter().map(|c| c.left_mib).sum(),
                pick.iter().map(|c| c.gpu).min().unwrap_or(GpuId(0)),
            )
        })
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
        let c_job = self.c_of(jobs, job);
        // A job of unknown memory without a share holds a whole GPU, more
        // than any shared GPU offers (headroom > 0): only idle GPUs host it.
        // Without computation every such GPU rates (ME 0, idle, 0 MiB left),
        // so the first node with room wins on its lowest GPU: stop there.
        let first_wins = c_job == 0.0
            && req.min_gpu_mem_mib == 0
            && !(1..1000).contains(&req.milli)
            && cluster.share_limits().mem_headroom > 0.0;
        let winner = if first_wins || !req.gpu_types.is_empty() {
            self.scan(cluster, jobs, &req, c_job, first_wins)
        } else {
            let class = (req.vc, req.gpus, req.min_gpu_mem_mib, req.milli, c_job.to_bits());
            let mut tree = match self.trees.remove(&class) {
                Some(t) if t.stamps.len() == p.nodes.len() => t,
                _ => NodeTree::new(p.nodes.len(), NONE),
            };
            tree.refresh(cluster, req.vc, |_, node| {
                // A node with fewer than n free or open GPUs cannot host n.
                if cluster.node_share_candidates(node) < req.gpus {
                    return NONE;
                }
                match self.node_best(cluster, jobs, &req, c_job, node) {
                    Some(k) => (!ordered(k.0), k.1 as u32, k.2, k.3.0),
                    None => NONE,
                }
            });
            let least = tree.least();
            if self.trees.len() * p.nodes.len() >= MAX_TREE_NODES {
                self.trees.clear();
            }
            self.trees.insert(class, tree);
            (least != NONE).then(|| cluster.node_of(GpuId(least.3)))
        };
        if let Some(node) = winner {
            self.node_best(cluster, jobs, &req, c_job, node);
            out.extend(self.scratch[..n].iter().map(|c| c.gpu));
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
        all.select_nth_unstable_by(n - 1, cmp_gpu);
        all[..n].sort_unstable_by(cmp_gpu);
        out.extend(all[..n].iter().map(|c| c.gpu));
        true
    }
}

impl MemeffPack {
    /// The node of the best one-node candidate by a scan in index order
    /// (`first_wins`: the first node with one).
    fn scan(
        &mut self,
        cluster: &Cluster,
        jobs: &JobTable,
        req: &Request<'_>,
        c_job: f64,
        first_wins: bool,
    ) -> Option<NodeId> {
        let better =
            |a: &Key, b: &Key| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)).is_lt();
        let mut best: Option<(Key, NodeId)> = None;
        for &node in &cluster.partition(req.vc).nodes {
            // A node with fewer than n free or open GPUs cannot host n.
            if cluster.node_share_candidates(node) < req.gpus || !req.fits_type(cluster, node) {
                continue;
            }
            let Some(key) = self.node_best(cluster, jobs, req, c_job, node) else { continue };
            if best.as_ref().is_none_or(|(k, _)| better(&key, k)) {
                best = Some((key, node));
            }
            if first_wins {
                break;
            }
        }
        best.map(|(_, node)| node)
    }
}
