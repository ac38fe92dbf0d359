//! GPU-sharing placements: a job joins GPUs as a tenant when its memory fits
//! next to the tenants already there (see [`crate::cluster::ShareLimits`]).
//!
//! These are the baseline packers (first fit; best fit by memory).
//! A job of unknown memory needs a whole GPU's memory, so it only ever lands
//! on an idle GPU: the rules then behave as exclusive placements. The
//! exception is a job of unknown memory with a guaranteed share (`milli`),
//! which holds that fraction of the GPU's memory
//! ([`Cluster::tenant_mem_mib`]). Both rules use only nodes of the GPU types
//! a job allows.

use super::node_tree::NodeTree;
use super::placement::{Placement, Request};
use std::collections::HashMap;

use crate::cluster::Cluster;
use crate::ids::{GpuId, NodeId, VcId};
use crate::profile::memo::WordState;

/// How a sharing rule ranks the GPUs that can take a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rank {
    /// Index order.
    FirstFit,
    /// Least memory left after the job joins, then index order.
    BestFitMemory,
}

/// A sharing placement (first fit or best fit by memory).
///
/// A job of `n` GPUs takes `n` GPUs that can host it on one node when some
/// node has that many (the first such node in index order for first fit; the
/// node whose best `n` GPUs leave the least memory for best fit), else the
/// best-ranked hostable GPUs across nodes. Within the choice, GPUs are taken
/// in rank order.
///
/// Kept state (none of it changes a choice):
///
/// - per node, under its stamp ([`Cluster::node_stamp`], which changes
///   whenever the node's holders change), the room of each GPU that can
///   take a tenant ([`Cluster::share_room`]), in rank order: a request's
///   hostable GPUs on the node are those whose room holds its memory need
///   and share, and the need is one figure per node (its GPUs have one
///   memory size), so a node's answer to a request (how many of its GPUs can
///   host it, the summed rank key of the best `n`) is one pass over at most
///   its GPU count of rooms;
/// - per request class ((partition, GPUs, memory need, share)): for best fit
///   without a GPU-type constraint, a min-tree of the partition's nodes by
///   (score of the best `n`, place in the partition) (`policy::node_tree::NodeTree`),
///   brought up to date for the nodes whose stamp changed since the class
///   was last placed; its root is the node the scan in index order picks
///   (least score, earliest node). Otherwise each node's answer, kept until
///   its stamp changes, read by a scan in index order.
#[derive(Clone, Debug)]
pub struct ShareFit {
    rank: Rank,
    scratch: Vec<(u64, GpuId)>,
    rooms: Rooms,
    /// Per request class, per node index: its answer ([`NodeAnswer`]).
    answers: HashMap<Class, Vec<NodeAnswer>, WordState>,
    /// Per request class: its tree of nodes by (score, place); best fit only.
    trees: HashMap<Class, NodeTree<TreeKey>, WordState>,
}

/// A request class: (partition, GPUs, memory need MiB, milli-GPU).
type Class = (VcId, u32, u64, u32);

/// A node's answer to a request class: (node stamp, hostable GPUs, sum of
/// the rank keys of the best `n` when at least `n` can host). Stamp 0: none
/// yet (stamps start at 1).
type NodeAnswer = (u64, u32, u64);

/// A node's place in a class's tree: (score of its best `n`, place in the
/// partition); [`NONE`] when fewer than `n` of its GPUs can host the class.
type TreeKey = (u64, u32);

/// The tree key of a node that cannot host the class.
const NONE: TreeKey = (u64::MAX, u32::MAX);

/// Request classes kept; more, and the answers (or trees) start over
/// (results are unchanged, memory stays bounded: classes × nodes × 24
/// bytes, or × about 40 bytes for trees).
const MAX_CLASSES: usize = 512;

/// A GPU's room for a tenant: memory left MiB (GPU memory − memory held,
/// the best-fit key before the job's need), room MiB and milli-GPU
/// ([`Cluster::share_room`]), the GPU.
#[derive(Clone, Copy, Debug)]
struct Room {
    left: u64,
    mem: u64,
    milli: u32,
    gpu: GpuId,
}

/// Per node, under its stamp: the rooms of its GPUs that can take a tenant,
/// in rank order (best fit: memory left, then index; first fit: index).
#[derive(Clone, Debug, Default)]
struct Rooms {
    /// Per node: (stamp the rooms were read at, 0: never; rooms kept).
    at: Vec<(u64, u32)>,
    /// Per GPU index: the rooms of the node that GPU starts, in order, from
    /// the node's first GPU's slot.
    rooms: Vec<Room>,
}

impl Rooms {
    /// The rooms of `node` in rank order, read again if its stamp changed.
    fn of(&mut self, cluster: &Cluster, rank: Rank, node: NodeId) -> &[Room] {
        if self.at.len() < cluster.num_nodes() {
            self.at.resize(cluster.num_nodes(), (0, 0));
        }
        if self.rooms.len() < cluster.total_gpus() as usize {
            self.rooms.resize(cluster.total_gpus() as usize, Room { left: 0, mem: 0, milli: 0, gpu: GpuId(0) });
        }
        let mut gpus = cluster.node_gpus(node);
        let Some(first) = gpus.next() else { return &[] };
        let stamp = cluster.node_stamp(node);
        let start = first.index();
        if self.at[node.index()].0 != stamp {
            let mut len = 0;
            for g in std::iter::once(first).chain(gpus) {
                if let Some((mem, milli)) = cluster.share_room(g) {
                    let left = cluster.gpu_mem_mib(g) - cluster.share(g).mem_mib;
                    self.rooms[start + len] = Room { left, mem, milli, gpu: g };
                    len += 1;
                }
            }
            let rooms = &mut self.rooms[start..start + len];
            if rank == Rank::BestFitMemory {
                rooms.sort_unstable_by_key(|r| (r.left, r.gpu));
            }
            self.at[node.index()] = (stamp, len as u32);
        }
        &self.rooms[start..start + self.at[node.index()].1 as usize]
    }
}

impl ShareFit {
    fn with_rank(rank: Rank) -> Self {
        ShareFit {
            rank,
            scratch: Vec::new(),
            rooms: Rooms::default(),
            answers: HashMap::default(),
            trees: HashMap::default(),
        }
    }

    /// First fit: GPUs in index order.
    pub fn first_fit() -> Self {
        ShareFit::with_rank(Rank::FirstFit)
    }

    /// Best fit by memory: the GPUs that would have the least memory left.
    pub fn best_fit() -> Self {
        ShareFit::with_rank(Rank::BestFitMemory)
    }

    /// How many GPUs of `node` can host `req`, and the summed rank key of
    /// the best `min(req.gpus, count)` of them, from the node's rooms.
    fn fresh_answer(&mut self, cluster: &Cluster, req: &Request<'_>, node: NodeId) -> (u32, u64) {
        let Some(first) = cluster.node_gpus(node).next() else { return (0, 0) };
        let mem = need(cluster, req, first);
        let (rank, n) = (self.rank, req.gpus as usize);
        let (mut count, mut score) = (0u32, 0u64);
        for r in self.rooms.of(cluster, rank, node) {
            if mem <= r.mem && req.milli <= r.milli {
                if (count as usize) < n && rank == Rank::BestFitMemory {
                    score += r.left - mem;
                }
                count += 1;
            }
        }
        (count, score)
    }

    /// [`ShareFit::fresh_answer`] from `answers` (the request class's)
    /// while the node's stamp is unchanged.
    fn answer(&mut self, answers: &mut [NodeAnswer], cluster: &Cluster, req: &Request<'_>, node: NodeId) -> (u32, u64) {
        let stamp = cluster.node_stamp(node);
        let a = answers[node.index()];
        if a.0 == stamp {
            return (a.1, a.2);
        }
        let (count, score) = self.fresh_answer(cluster, req, node);
        answers[node.index()] = (stamp, count, score);
        (count, score)
    }

    /// Hostable GPUs of `node` with their rank key, in rank order, into
    /// `scratch`.
    fn hostable(&mut self, cluster: &Cluster, req: &Request<'_>, node: NodeId) {
        self.scratch.clear();
        let Some(first) = cluster.node_gpus(node).next() else { return };
        let mem = need(cluster, req, first);
        let rank = self.rank;
        for r in self.rooms.of(cluster, rank, node) {
            if mem <= r.mem && req.milli <= r.milli {
                let key = match rank {
                    Rank::FirstFit => 0,
                    Rank::BestFitMemory => r.left - mem,
                };
                self.scratch.push((key, r.gpu));
            }
        }
    }
}

/// The memory a request holds on `g`, MiB (0 in the request means unknown;
/// see [`Cluster::tenant_mem_mib`]).
fn need(cluster: &Cluster, req: &Request<'_>, g: GpuId) -> u64 {
    cluster.tenant_mem_mib(g, (req.min_gpu_mem_mib > 0).then_some(req.min_gpu_mem_mib), req.milli)
}

impl Placement for ShareFit {
    fn name(&self) -> &'static str {
        match self.rank {
            Rank::FirstFit => "share-first-fit",
            Rank::BestFitMemory => "share-best-fit",
        }
    }

    fn shares(&self) -> bool {
        true
    }

    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let n = req.gpus as usize;
        if n == 0 {
            return false;
        }
        let p = cluster.partition(req.vc);
        // Every GPU that can host the job is free or open
        // (`Cluster::is_open`): fewer than n such GPUs, in the partition or
        // on a node, and the job cannot go there. These bounds skip the
        // per-GPU checks without changing any choice.
        if p.gpus_free + p.gpus_open < req.gpus {
            return false;
        }
        let class = (req.vc, req.gpus, req.min_gpu_mem_mib, req.milli);
        if self.rank == Rank::BestFitMemory && req.gpu_types.is_empty() {
            let mut tree = match self.trees.remove(&class) {
                Some(t) if t.stamps.len() == p.nodes.len() => t,
                _ => NodeTree::new(p.nodes.len(), NONE),
            };
            let placed = self.search_by_tree(cluster, req, out, &mut tree);
            if self.trees.len() >= MAX_CLASSES {
                self.trees.clear();
            }
            self.trees.insert(class, tree);
            return placed;
        }
        let mut answers = self.answers.remove(&class).unwrap_or_default();
        answers.resize(answers.len().max(cluster.num_nodes()), (0, 0, 0));
        let placed = self.search(cluster, req, out, &mut answers);
        if self.answers.len() >= MAX_CLASSES {
            self.answers.clear();
        }
        self.answers.insert(class, answers);
        placed
    }

    fn fails_by_count(&self) -> bool {
        true
    }
}

impl ShareFit {
    /// [`Placement::place`] past its bounds, reading and keeping the
    /// request class's node answers in `answers`.
    fn search(
        &mut self,
        cluster: &Cluster,
        req: Request<'_>,
        out: &mut Vec<GpuId>,
        answers: &mut [NodeAnswer],
    ) -> bool {
        let n = req.gpus as usize;
        let p = cluster.partition(req.vc);
        // One node if possible.
        let mut best: Option<(u64, NodeId)> = None;
        for &node in &p.nodes {
            if cluster.node_share_candidates(node) < req.gpus || !req.fits_type(cluster, node) {
                continue;
            }
            let (count, score) = self.answer(answers, cluster, &req, node);
            if (count as usize) < n {
                continue;
            }
            if best.is_none_or(|(s, _)| score < s) {
                best = Some((score, node));
            }
            // First fit takes the first node; best fit cannot beat a score
            // of 0 (ties keep the earlier node).
            if self.rank == Rank::FirstFit || score == 0 {
                break;
            }
        }
        if let Some((_, node)) = best {
            self.hostable(cluster, &req, node);
            out.extend(self.scratch[..n].iter().map(|e| e.1));
            return true;
        }
        if n == 1 {
            // Every node with a candidate GPU was searched: none can host it.
            return false;
        }
        self.spread(cluster, req, out)
    }

    /// [`Placement::place`] past its bounds for best fit without a GPU-type
    /// constraint: the class's `tree` brought up to date, then its root.
    fn search_by_tree(
        &mut self,
        cluster: &Cluster,
        req: Request<'_>,
        out: &mut Vec<GpuId>,
        tree: &mut NodeTree<TreeKey>,
    ) -> bool {
        let n = req.gpus as usize;
        let p = cluster.partition(req.vc);
        tree.refresh(cluster, req.vc, |l, node| {
            // A node with fewer than n free or open GPUs has fewer than n
            // hostable ones (every hostable GPU is free or open).
            if cluster.node_share_candidates(node) < req.gpus {
                return NONE;
            }
            match self.fresh_answer(cluster, &req, node) {
                (count, score) if count as usize >= n => (score, l as u32),
                _ => NONE,
            }
        });
        let least = tree.least();
        if least != NONE {
            self.hostable(cluster, &req, p.nodes[least.1 as usize]);
            out.extend(self.scratch[..n].iter().map(|e| e.1));
            return true;
        }
        n > 1 && self.spread(cluster, req, out)
    }

    /// Across nodes: the best-ranked hostable GPUs of the partition, when no
    /// node can host the job alone. For first fit (every key 0) that is the
    /// first n in index order: nodes are in index order, and so are their
    /// GPUs.
    fn spread(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let n = req.gpus as usize;
        let p = cluster.partition(req.vc);
        let mut all: Vec<(u64, GpuId)> = Vec::new();
        for &node in &p.nodes {
            if cluster.node_share_candidates(node) == 0 || !req.fits_type(cluster, node) {
                continue;
            }
            self.hostable(cluster, &req, node);
            all.extend_from_slice(&self.scratch);
            if self.rank == Rank::FirstFit && all.len() >= n {
                break;
            }
        }
        if all.len() < n {
            return false;
        }
        // The n least (GPU ids make every key distinct), in order.
        all.select_nth_unstable(n - 1);
        all[..n].sort_unstable();
        out.extend(all[..n].iter().map(|e| e.1));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::ids::{JobId, VcId};

    /// 2 nodes × 2 GPUs of 16,000 MiB (headroom 5 %: 15,200 MiB usable when shared).
    fn cluster() -> Cluster {
        Cluster::new(ClusterSpec::uniform("t", 2, 2, "V100", 16_000)).unwrap()
    }

    fn req(gpus: u32, mem: u64) -> Request<'static> {
        Request { min_gpu_mem_mib: mem, ..Request::new(VcId(0), gpus) }
    }

    #[test]
    fn first_fit_joins_the_first_gpu_with_room() {
        let mut c = cluster();
        c.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 10_000, 0).unwrap();
        let mut out = Vec::new();
        // 4,000 MiB fits next to 10,000 (14,000 <= 15,200): GPU 0.
        assert!(ShareFit::first_fit().place(&c, req(1, 4_000), &mut out));
        assert_eq!(out, vec![GpuId(0)]);
        out.clear();
        // 6,000 MiB does not (16,000 > 15,200): GPU 1, idle.
        assert!(ShareFit::first_fit().place(&c, req(1, 6_000), &mut out));
        assert_eq!(out, vec![GpuId(1)]);
    }

    #[test]
    fn best_fit_takes_the_tightest_gpu() {
        let mut c = cluster();
        c.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 10_000, 0).unwrap();
        c.allocate_shared(JobId(1), VcId(0), &[GpuId(3)], 6_000, 0).unwrap();
        let mut out = Vec::new();
        // 3,000 MiB: leftovers GPU0 3,000, GPU1 13,000, GPU2 13,000, GPU3 7,000.
        assert!(ShareFit::best_fit().place(&c, req(1, 3_000), &mut out));
        assert_eq!(out, vec![GpuId(0)]);
        out.clear();
        // 2 GPUs on one node: node 0 leaves 3,000 + 13,000, node 1 leaves 13,000 + 7,000.
        assert!(ShareFit::best_fit().place(&c, req(2, 3_000), &mut out));
        assert_eq!(out, vec![GpuId(0), GpuId(1)]);
    }

    #[test]
    fn unknown_memory_never_shares_and_caps_hold() {
        let mut c = cluster();
        c.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 1_000, 0).unwrap();
        let mut out = Vec::new();
        // Unknown memory = a whole GPU: only idle GPUs.
        assert!(ShareFit::first_fit().place(&c, req(1, 0), &mut out));
        assert_eq!(out, vec![GpuId(1)]);
        // The tenant cap (2) and guaranteed shares (<= 1,000 milli) are enforced.
        c.allocate_shared(JobId(1), VcId(0), &[GpuId(0)], 1_000, 0).unwrap();
        assert!(!c.can_host(GpuId(0), VcId(0), 1, 0));
        assert!(c.can_host(GpuId(2), VcId(0), 1, 600));
        c.allocate_shared(JobId(2), VcId(0), &[GpuId(2)], 1_000, 600).unwrap();
        assert!(!c.can_host(GpuId(2), VcId(0), 1, 500), "600 + 500 > 1,000 milli");
        assert!(c.can_host(GpuId(2), VcId(0), 1, 400));
        // Exclusive placements never take a shared GPU.
        assert!(c.allocate(JobId(3), VcId(0), &[GpuId(2)]).is_err());
        c.check_consistency().unwrap();
        c.release(JobId(2), &[GpuId(2)]).unwrap();
        assert_eq!(c.free_gpus(), 3, "GPUs 1, 2 and 3 free again");
        c.check_consistency().unwrap();
    }
}
