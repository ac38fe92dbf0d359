//! What a job asks of a placement: its partition, GPU count, recorded split,
//! memory need, guaranteed share and allowed GPU types. On the cluster floor,
//! so that admission (`workload`) and the placement rules (`policy`) share it.

use super::Cluster;
use crate::ids::{NodeId, VcId};

/// What a job asks a placement for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The job's partition.
    pub vc: VcId,
    /// GPUs wanted.
    pub gpus: u32,
    /// The recorded split over servers (GPUs per server, descending), or empty.
    /// Only the `recorded` placement (`policy::placement::Recorded`) reads it.
    pub shape: &'a [u32],
    /// GPU memory each GPU must have, MiB (0: no constraint). Every placement
    /// uses only nodes whose GPUs have at least this much.
    pub min_gpu_mem_mib: u64,
    /// For shared placements: the compute share guaranteed per GPU, milli-GPU
    /// (0 for a whole-GPU job that time-slices with its co-tenants).
    pub milli: u32,
    /// The GPU types the job may run on (empty: any). Every placement uses
    /// only nodes whose `gpu_type` is one of them.
    pub gpu_types: &'a [String],
}

impl<'a> Request<'a> {
    /// A request of `gpus` GPUs in `vc` with no recorded split, no memory need
    /// and no GPU-type constraint.
    pub fn new(vc: VcId, gpus: u32) -> Self {
        Request { vc, gpus, shape: &[], min_gpu_mem_mib: 0, milli: 0, gpu_types: &[] }
    }

    /// True if `node`'s GPUs have the memory this request needs.
    pub fn fits_memory(&self, cluster: &Cluster, node: NodeId) -> bool {
        self.min_gpu_mem_mib == 0 || cluster.node(node).gpu_mem_mib >= self.min_gpu_mem_mib
    }

    /// True if `node`'s GPUs are of a type this request allows.
    pub fn fits_type(&self, cluster: &Cluster, node: NodeId) -> bool {
        self.gpu_types.is_empty() || self.gpu_types.contains(&cluster.node(node).gpu_type)
    }

    /// True if `node` meets the request's memory need and GPU-type constraint.
    pub fn fits_node(&self, cluster: &Cluster, node: NodeId) -> bool {
        self.fits_memory(cluster, node) && self.fits_type(cluster, node)
    }

    /// True if every GPU that cannot host `other` as a tenant cannot host this
    /// request either: same partition and GPU types, at least as many GPUs, a
    /// guaranteed share at least as large, and on every GPU at least as much
    /// memory ([`Cluster::tenant_mem_mib`]: both needs known and this one at
    /// least as large, or both unknown with the same share). So when a
    /// placement that fails by count (`policy::placement::Placement::fails_by_count`) cannot place `other`, it
    /// cannot place this request in the same cluster state, or in any state
    /// reached from it by allocations only.
    pub fn asks_at_least(&self, other: &Request<'_>) -> bool {
        let mem = match (self.min_gpu_mem_mib, other.min_gpu_mem_mib) {
            (0, 0) => self.milli == other.milli,
            (0, _) | (_, 0) => false,
            (a, b) => a >= b,
        };
        mem && self.vc == other.vc
            && self.gpus >= other.gpus
            && self.milli >= other.milli
            && self.gpu_types == other.gpu_types
    }

    /// True when any node of the partition will do (no memory need, no type constraint).
    pub fn unconstrained(&self) -> bool {
        self.min_gpu_mem_mib == 0 && self.gpu_types.is_empty()
    }
}
