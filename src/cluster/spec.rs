//! A cluster's static description (nodes, GPU types and memory, VC names),
//! its size limits and the sharing limits: plain data, below the ledger in
//! `mod.rs` and the presets and node files that build it.

use crate::error::ConfigError;
use crate::ids::{JobId, VcId};

/// The most GPUs one node may have (the free-GPU ledger is a 64-bit mask per node).
pub const MAX_GPUS_PER_NODE: u32 = 64;

/// The most nodes a cluster may have (a guard against typos that would
/// allocate gigabytes; the largest published trace clusters have a few thousand).
pub const MAX_NODES: usize = 100_000;

/// The most GPUs a cluster may have, for the same reason.
pub const MAX_GPUS: u64 = 1_000_000;

/// The most distinct GPU types a cluster may have (a job's GPU type is a
/// 16-bit index, `crate::job::ElasticConfig::gpu_type`).
pub const MAX_GPU_TYPES: usize = 4096;

/// One node's hardware and where it sits.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// GPUs in the node.
    pub gpus: u32,
    /// GPU model name (e.g. `K80`, `P100`, `V100`).
    pub gpu_type: String,
    /// Memory of one GPU, MiB.
    pub gpu_mem_mib: u64,
    /// GPUs behind one PCIe switch (GPU `i` is on switch `i / gpus_per_switch`).
    pub gpus_per_switch: u32,
    /// CPU sockets; GPUs are split evenly and in order across them.
    pub sockets: u32,
    /// Rack index.
    pub rack: u32,
    /// The virtual cluster (partition) the node belongs to.
    pub vc: VcId,
}

/// Limits on GPU sharing, the same for every GPU of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShareLimits {
    /// Most jobs on one GPU (at least 1). Default 2: the co-location data
    /// (Gavel OSDI'20, Lucid ASPLOS'23) measures pairs only, so more tenants
    /// rest on an extrapolation ([`crate::profile::coloc`]).
    pub max_tenants: u32,
    /// Fraction of a GPU's memory kept free when two or more jobs share it
    /// (0 ≤ headroom < 1), a policy choice that absorbs allocator
    /// fragmentation; a lone tenant may use the whole memory. Default 0.05.
    pub mem_headroom: f64,
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits { max_tenants: 2, mem_headroom: 0.05 }
    }
}

impl ShareLimits {
    /// Checks the limits; messages name the fields as a run spec spells
    /// them (`max_tenants`, `mem_headroom`).
    ///
    /// # Errors
    /// A [`ConfigError`] for a tenant cap of 0 or a headroom outside [0, 1).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_tenants == 0 {
            return Err(ConfigError::other("the tenant cap (`max_tenants`) must be at least 1"));
        }
        if !(0.0..1.0).contains(&self.mem_headroom) {
            return Err(ConfigError::other(format!(
                "the memory headroom (`mem_headroom`) must be in [0, 1), got {}",
                self.mem_headroom
            )));
        }
        Ok(())
    }
}

/// The tenants of one GPU and what they hold of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuShare {
    /// Jobs sharing the GPU, in the order they arrived on it.
    pub tenants: Vec<JobId>,
    /// Memory the tenants need, MiB.
    pub mem_mib: u64,
    /// Compute shares the tenants were guaranteed, milli-GPU (at most 1,000).
    pub milli: u32,
}

/// A cluster's static description.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSpec {
    /// A short name for outputs (`lab16`, `philly`, `4x8`, `vcs:vc_sizes.csv`).
    pub name: String,
    /// Nodes, in index order.
    pub nodes: Vec<NodeSpec>,
    /// VC names, indexed by [`VcId`]; a cluster without VCs has one, named `default`.
    pub vc_names: Vec<String>,
    /// True when the partitions are named VCs (from a VC file): jobs then run
    /// only in the VC they name. False for one unnamed partition, where every
    /// job runs and the trace's VC label is kept for output only.
    pub named_vcs: bool,
}

impl ClusterSpec {
    /// `nodes` identical nodes of `gpus_per_node` GPUs in one partition.
    pub fn uniform(name: &str, nodes: u32, gpus_per_node: u32, gpu_type: &str, gpu_mem_mib: u64) -> Self {
        let node = NodeSpec {
            gpus: gpus_per_node,
            gpu_type: gpu_type.to_string(),
            gpu_mem_mib,
            gpus_per_switch: gpus_per_node.clamp(1, 2),
            sockets: if gpus_per_node >= 2 { 2 } else { 1 },
            rack: 0,
            vc: VcId(0),
        };
        ClusterSpec {
            name: name.to_string(),
            nodes: vec![node; nodes as usize],
            vc_names: vec!["default".to_string()],
            named_vcs: false,
        }
    }

    /// Total GPUs.
    pub fn total_gpus(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.gpus)).sum()
    }

    /// Checks the spec: at least one GPU, node sizes within [`MAX_GPUS_PER_NODE`],
    /// positive switch and socket counts, VC indices in range.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first bad node.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nodes.is_empty() || self.total_gpus() == 0 {
            return Err(ConfigError::other(format!("cluster `{}` has no GPUs", self.name)));
        }
        if self.nodes.len() > MAX_NODES || self.total_gpus() > MAX_GPUS {
            return Err(ConfigError::other(format!(
                "cluster `{}` has {} nodes and {} GPUs; dlsched simulates at most {MAX_NODES} nodes and {MAX_GPUS} GPUs",
                self.name,
                self.nodes.len(),
                self.total_gpus()
            )));
        }
        let types: std::collections::HashSet<&str> = self.nodes.iter().map(|n| n.gpu_type.as_str()).collect();
        if types.len() > MAX_GPU_TYPES {
            return Err(ConfigError::other(format!(
                "cluster `{}` has {} distinct GPU types; at most {MAX_GPU_TYPES} are supported",
                self.name,
                types.len()
            )));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.gpus > MAX_GPUS_PER_NODE {
                return Err(ConfigError::other(format!(
                    "cluster `{}`: node {i} has {} GPUs; at most {MAX_GPUS_PER_NODE} per node are supported",
                    self.name, n.gpus
                )));
            }
            if n.gpus_per_switch == 0 || n.sockets == 0 {
                return Err(ConfigError::other(format!(
                    "cluster `{}`: node {i} needs at least one PCIe switch and one socket",
                    self.name
                )));
            }
            if self.vc_names.len() > usize::from(u16::MAX) + 1 {
                return Err(ConfigError::other(format!(
                    "cluster `{}` has {} VCs; at most {} are supported",
                    self.name,
                    self.vc_names.len(),
                    usize::from(u16::MAX) + 1
                )));
            }
            if n.vc.index() >= self.vc_names.len() {
                return Err(ConfigError::other(format!(
                    "cluster `{}`: node {i} names VC index {} but only {} VCs exist",
                    self.name,
                    n.vc.0,
                    self.vc_names.len()
                )));
            }
        }
        Ok(())
    }
}
