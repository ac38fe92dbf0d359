//! Placement rules: which GPUs a job of `n` GPUs gets in its partition.

use crate::cluster::Cluster;
pub use crate::cluster::request::Request;
use crate::ids::{GpuId, JobId};
use crate::workload::AdmissionPlacer;

/// Chooses GPUs for a job. Reads the cluster only; the engine allocates.
pub trait Placement: Send {
    /// The rule's name for outputs.
    fn name(&self) -> &'static str;

    /// Appends `req.gpus` free GPUs of partition `req.vc` to `out` and returns
    /// true, or returns false and leaves `out` as it was when the job cannot
    /// be placed now.
    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool;

    /// [`Placement::place`] for a known job, with the whole view (the
    /// queue policies call this). Rules that read the job's model or its
    /// would-be co-tenants (memory efficiency, FGD) override it; by default
    /// it is `place`.
    fn place_job(&mut self, view: &super::View<'_>, job: JobId, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let _ = job;
        self.place(view.cluster, req, out)
    }

    /// Requests of one class (in one partition) are placed alike in every
    /// cluster state, so a backfilling queue tries one job per class. By
    /// default the class is the GPU count, the memory need (MiB), the
    /// guaranteed share and the allowed GPU types.
    fn class(&self, req: Request<'_>) -> Vec<u32> {
        let mut c = vec![req.gpus, mem_key(req.min_gpu_mem_mib), req.milli];
        push_types_key(req.gpu_types, &mut c);
        c
    }

    /// True if the rule places a request exactly when enough GPUs of its
    /// partition (of its allowed types) can host it as a tenant
    /// ([`Cluster::can_host`] with [`Cluster::tenant_mem_mib`] of each GPU): the sharing packers. A failed request
    /// then implies the failure of every request of the same partition and
    /// GPU types that asks at least as much of each GPU (see
    /// [`Request::asks_at_least`]) until GPUs are released, which lets a
    /// backfilling queue skip such jobs within one scheduling pass.
    fn fails_by_count(&self) -> bool {
        false
    }

    /// True if the rule places jobs as tenants of shared GPUs
    /// ([`super::Decision::Colocate`]) rather than on free GPUs exclusively.
    fn shares(&self) -> bool {
        false
    }
}

/// Admission places a job on the empty partition by the run's rule itself.
impl<P: Placement + ?Sized> AdmissionPlacer for Box<P> {
    fn admission_class(&self, req: Request<'_>) -> Vec<u32> {
        self.class(req)
    }

    fn place_on_empty(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        self.place(cluster, req, out)
    }
}

/// A memory need as a class component (MiB, saturating at `u32::MAX`).
pub fn mem_key(mib: u64) -> u32 {
    u32::try_from(mib).unwrap_or(u32::MAX)
}

/// Appends the allowed GPU types to a class, exactly (each name as its length
/// then its bytes, four to a component); nothing for an unconstrained request.
pub fn push_types_key(types: &[String], class: &mut Vec<u32>) {
    for t in types {
        class.push(u32::try_from(t.len()).unwrap_or(u32::MAX));
        class.extend(t.as_bytes().chunks(4).map(|c| c.iter().fold(0u32, |a, &b| (a << 8) | u32::from(b))));
    }
}

/// The placement rules on offer. The variants' doc comments are the
/// `--placement` help (clap prints them as written): plain text, no links.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum PlacementKind {
    /// Fewest nodes; best fit on one node when the job fits one.
    Consolidate,
    /// First node in index order with room.
    FirstFit,
    /// Replay the recorded split over servers (Philly RFold `shape`); jobs
    /// without one are packed as consolidate packs them.
    Recorded,
    /// GPU sharing, first fit: the first GPUs in index order with room for
    /// the job as a tenant (memory, tenant cap, guaranteed share).
    ShareFirstFit,
    /// GPU sharing, best fit by memory: the GPUs with room that would have
    /// the least memory left after the job joins.
    ShareBestFit,
    /// GPU sharing, packing a fixed-size job by memory efficiency: the GPUs
    /// whose computation per MiB of memory is highest once the job joins
    /// (src/policy/memeff.rs; formerly named `memory-efficiency`; the
    /// thesis's placement of moldable tasks is --policy memory-efficiency).
    MemeffPack,
    /// GPU sharing after FGD (Weng et al., ATC'23): the GPUs where the
    /// expected fragmentation grows least (src/policy/fgd.rs).
    Fgd,
    /// Interference-aware co-location after IAWP (TPDS 2021): a policy of
    /// its own, FIFO, that admits onto a shared GPU the queued job least
    /// cosine-similar to its tenants (src/policy/iawp.rs). As a plain
    /// placement (without the queue) it packs as share-best-fit.
    Iawp,
}

crate::names::value_names!(PlacementKind {
    Consolidate => "consolidate",
    FirstFit => "first-fit",
    Recorded => "recorded",
    ShareFirstFit => "share-first-fit",
    ShareBestFit => "share-best-fit",
    MemeffPack => "memeff-pack",
    Fgd => "fgd",
    Iawp => "iawp",
});

impl PlacementKind {
    /// The rule's name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            PlacementKind::Consolidate => "consolidate",
            PlacementKind::FirstFit => "first-fit",
            PlacementKind::Recorded => "recorded",
            PlacementKind::ShareFirstFit => "share-first-fit",
            PlacementKind::ShareBestFit => "share-best-fit",
            PlacementKind::MemeffPack => "memeff-pack",
            PlacementKind::Fgd => "fgd",
            PlacementKind::Iawp => "iawp",
        }
    }

    /// True for every rule that may put several jobs on one GPU: the sharing
    /// placements and `iawp` (a policy of its own that co-locates).
    pub fn may_share(self) -> bool {
        self.shares() || self == PlacementKind::Iawp
    }

    /// True for the GPU-sharing placements (the queue policy starts their
    /// jobs as tenants).
    pub fn shares(self) -> bool {
        matches!(
            self,
            PlacementKind::ShareFirstFit | PlacementKind::ShareBestFit | PlacementKind::MemeffPack | PlacementKind::Fgd
        )
    }
}

/// Consolidating placement: a job takes as few nodes as possible. Exactly the
/// "consolidate" rule of the Helios study's simulator (Hu et al., SC'21;
/// HeliosArtifact `policies/placer/consolidate.py`), generalised to nodes of
/// any size:
///
/// - a job no larger than the partition's largest node goes on one node: among
///   nodes with a free GPU, ordered by free GPUs ascending (ties: node index),
///   the first with room (best fit); if none has room it waits, even when the
///   partition has enough free GPUs spread over several nodes;
/// - a larger job walks the nodes with a free GPU in order of free GPUs
///   descending (ties: node index), taking each wholly free node while more
///   than that node's GPUs are still needed, then puts the remainder on the
///   next node in that order if it has room; otherwise it waits. (So the
///   remainder goes on the freest remaining node, which may be a whole free
///   node, not the best-fitting one: the reference does exactly this.)
///
/// Within a node, the lowest-indexed free GPUs are taken.
#[derive(Clone, Copy, Debug, Default)]
pub struct Consolidate;

impl Placement for Consolidate {
    fn name(&self) -> &'static str {
        "consolidate"
    }

    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let (vc, gpus) = (req.vc, req.gpus);
        let p = cluster.partition(vc);
        if gpus == 0 || gpus > p.gpus_free {
            return false;
        }
        if gpus <= p.max_node_gpus {
            let node = if req.unconstrained() {
                p.best_fit_node(gpus)
            } else {
                p.nodes_by_free_asc().find(|&(n, free)| free >= gpus && req.fits_node(cluster, n)).map(|(n, _)| n)
            };
            return match node {
                Some(node) => cluster.take_free_gpus(node, gpus, out),
                None => false,
            };
        }
        let start = out.len();
        let mut remaining = gpus;
        for (node, free) in p.nodes_by_free_desc().filter(|&(n, _)| req.fits_node(cluster, n)) {
            if free == cluster.node(node).gpus && remaining > free {
                cluster.take_free_gpus(node, free, out);
                remaining -= free;
                continue;
            }
            if free >= remaining {
                return cluster.take_free_gpus(node, remaining, out);
            }
            break;
        }
        out.truncate(start);
        false
    }
}

/// First-fit placement, after the "yarn" rule of the Tiresias simulator: a job
/// no larger than the partition's largest node goes on the first node in index
/// order with room (it waits if none has room); a larger job takes free GPUs
/// node by node in index order until it has enough.
#[derive(Clone, Copy, Debug, Default)]
pub struct FirstFit;

impl Placement for FirstFit {
    fn name(&self) -> &'static str {
        "first-fit"
    }

    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let (vc, gpus) = (req.vc, req.gpus);
        let p = cluster.partition(vc);
        if gpus == 0 || gpus > p.gpus_free {
            return false;
        }
        if gpus <= p.max_node_gpus {
            return p
                .nodes
                .iter()
                .find(|&&n| cluster.node_free(n) >= gpus && req.fits_node(cluster, n))
                .is_some_and(|&n| cluster.take_free_gpus(n, gpus, out));
        }
        let eligible: u32 = p.nodes.iter().filter(|&&n| req.fits_node(cluster, n)).map(|&n| cluster.node_free(n)).sum();
        if eligible < gpus {
            return false;
        }
        let mut remaining = gpus;
        for &n in p.nodes.iter().filter(|&&n| req.fits_node(cluster, n)) {
            let take = cluster.node_free(n).min(remaining);
            if take > 0 {
                cluster.take_free_gpus(n, take, out);
                remaining -= take;
                if remaining == 0 {
                    break;
                }
            }
        }
        true
    }
}

/// Replays a recorded split: each part (largest first) goes on a distinct
/// node, the one with the fewest free GPUs that has room (best fit); the job
/// waits until every part fits. A job with no recorded split (or one that does
/// not add up to its GPU count) is placed by [`Consolidate`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Recorded;

impl Placement for Recorded {
    fn name(&self) -> &'static str {
        "recorded"
    }

    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        if req.shape.is_empty() || req.shape.iter().map(|&g| u64::from(g)).sum::<u64>() != u64::from(req.gpus) {
            return Consolidate.place(cluster, req, out);
        }
        let p = cluster.partition(req.vc);
        if req.gpus > p.gpus_free {
            return false;
        }
        let start = out.len();
        let mut used: Vec<crate::ids::NodeId> = Vec::with_capacity(req.shape.len());
        for &part in req.shape {
            match p
                .nodes_by_free_asc()
                .find(|&(n, free)| free >= part && !used.contains(&n) && req.fits_node(cluster, n))
            {
                Some((n, _)) => {
                    cluster.take_free_gpus(n, part, out);
                    used.push(n);
                }
                None => {
                    out.truncate(start);
                    return false;
                }
            }
        }
        true
    }

    fn class(&self, req: Request<'_>) -> Vec<u32> {
        let mut c = if req.shape.is_empty() { vec![req.gpus] } else { req.shape.to_vec() };
        c.push(mem_key(req.min_gpu_mem_mib));
        c.push(req.milli);
        push_types_key(req.gpu_types, &mut c);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::ids::{JobId, NodeId, VcId};

    /// 4 nodes × 8 GPUs; node 0 has 3 free, node 1 has 6 free, nodes 2 and 3 are free.
    fn cluster() -> Cluster {
        let mut c = Cluster::new(ClusterSpec::uniform("t", 4, 8, "V100", 16384)).unwrap();
        c.allocate(JobId(90), VcId(0), &(0..5).map(GpuId).collect::<Vec<_>>()).unwrap();
        c.allocate(JobId(91), VcId(0), &(8..10).map(GpuId).collect::<Vec<_>>()).unwrap();
        c
    }

    fn nodes(c: &Cluster, gpus: &[GpuId]) -> Vec<(NodeId, usize)> {
        let mut v: Vec<(NodeId, usize)> = Vec::new();
        for &g in gpus {
            let n = c.node_of(g);
            match v.iter_mut().find(|(m, _)| *m == n) {
                Some(e) => e.1 += 1,
                None => v.push((n, 1)),
            }
        }
        v
    }

    #[test]
    fn consolidate_small_job_best_fits() {
        let c = cluster();
        let mut out = Vec::new();
        // 3 GPUs: node 0 (3 free) is the tightest fit.
        assert!(Consolidate.place(&c, Request::new(VcId(0), 3), &mut out));
        assert_eq!(out, vec![GpuId(5), GpuId(6), GpuId(7)]);
        out.clear();
        // 4 GPUs: node 0 is too small, node 1 (6 free) is next.
        assert!(Consolidate.place(&c, Request::new(VcId(0), 4), &mut out));
        assert_eq!(nodes(&c, &out), vec![(NodeId(1), 4)]);
    }

    #[test]
    fn consolidate_large_job_takes_whole_nodes_then_freest_node() {
        let c = cluster();
        let mut out = Vec::new();
        // 12 GPUs: whole node 2, then the remainder 4 on the next node by free
        // GPUs descending, which is whole node 3 (8 free), not best-fit node 1.
        assert!(Consolidate.place(&c, Request::new(VcId(0), 12), &mut out));
        assert_eq!(nodes(&c, &out), vec![(NodeId(2), 8), (NodeId(3), 4)]);
        out.clear();
        // 16: nodes 2 and 3 whole.
        assert!(Consolidate.place(&c, Request::new(VcId(0), 16), &mut out));
        assert_eq!(nodes(&c, &out), vec![(NodeId(2), 8), (NodeId(3), 8)]);
        out.clear();
        // 22 GPUs: 2 whole nodes, remainder 6 on node 1 (6 free).
        assert!(Consolidate.place(&c, Request::new(VcId(0), 22), &mut out));
        assert_eq!(nodes(&c, &out), vec![(NodeId(2), 8), (NodeId(3), 8), (NodeId(1), 6)]);
        out.clear();
        // 24 GPUs: needs 3 whole nodes; only 2 exist, though 25 GPUs are free.
        assert!(!Consolidate.place(&c, Request::new(VcId(0), 24), &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn first_fit_takes_first_node_with_room() {
        let c = cluster();
        let mut out = Vec::new();
        assert!(FirstFit.place(&c, Request::new(VcId(0), 2), &mut out));
        assert_eq!(nodes(&c, &out), vec![(NodeId(0), 2)]);
        out.clear();
        assert!(FirstFit.place(&c, Request::new(VcId(0), 10), &mut out));
        assert_eq!(nodes(&c, &out), vec![(NodeId(0), 3), (NodeId(1), 6), (NodeId(2), 1)]);
    }
}
