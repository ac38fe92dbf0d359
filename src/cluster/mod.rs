//! The cluster: nodes × GPUs, virtual-cluster partitions, and the allocation ledger.
//!
//! Only the engine mutates a [`Cluster`] (through [`Cluster::allocate`],
//! [`Cluster::allocate_shared`] and [`Cluster::release`]); policies read it.
//! Every allocation is validated: a GPU that does not exist, is taken, or lies
//! outside the job's partition is refused.
//!
//! A GPU is held in one of two ways. **Exclusively** (the default): one job owns
//! it. **Shared**: one or more *tenants* hold it, each with a per-GPU memory
//! need (MiB) and an optional guaranteed compute share (milli-GPU, as the
//! Alibaba PAI 2023 trace's `gpu_milli`). A shared GPU admits another tenant
//! while the tenant cap allows, the tenants' memory fits the GPU's memory less
//! the headroom ([`ShareLimits`]), and the guaranteed shares add up to at most
//! 1,000 milli-GPU. A GPU with any holder is not free: exclusive placements
//! never land on shared GPUs.

pub mod fragmentation;
mod presets;
pub mod request;
mod spec;
mod topology;

pub use presets::{
    ClusterPreset, HELIOS_GPUS, HELIOS_GPUS_PER_NODE, NodeList, OPENB_GPU_NODES, SIA_GPUS, VENUS_VC_NODES,
    load_nodes_file, load_vc_file, load_vc_file_scaled, openb_gpu_mem_mib, scaled_vc_nodes,
};
pub use spec::{ClusterSpec, GpuShare, MAX_GPUS, MAX_GPUS_PER_NODE, MAX_NODES, NodeSpec, ShareLimits};
pub use topology::LocalityTier;

use crate::error::ConfigError;
use crate::ids::{GpuId, JobId, NodeId, VcId};

/// A virtual-cluster partition's live state, with indices that make placement
/// queries logarithmic in the node count.
#[derive(Clone, Debug)]
pub struct Partition {
    /// The VC's name.
    pub name: String,
    /// Its nodes, in index order.
    pub nodes: Vec<NodeId>,
    /// GPUs in the partition.
    pub gpus_total: u32,
    /// GPUs free now.
    pub gpus_free: u32,
    /// The largest node's GPU count.
    pub max_node_gpus: u32,
    /// The largest GPU memory of its nodes, MiB.
    pub max_gpu_mem_mib: u64,
    /// Its shared GPUs open to another tenant ([`Cluster::is_open`]).
    pub gpus_open: u32,
    /// Its GPUs with tenants and part of their capacity still free
    /// ([`Cluster::free_capacity`] strictly between 0 and 1).
    pub gpus_partial: u32,
    /// Nodes with at least one free GPU, bucketed by free GPUs.
    index: FreeIndex,
}

/// Nodes of one partition bucketed by their free-GPU count: one bitset of
/// partition-local node indices per count, so updates are O(1) and ordered
/// queries scan at most (GPUs per node) × (nodes / 64) words.
#[derive(Clone, Debug)]
struct FreeIndex {
    words: usize,
    /// `bits[f * words + w]`: bit `i` set when local node `64 w + i` has exactly `f` free GPUs.
    bits: Vec<u64>,
    /// Nodes in each bucket.
    counts: Vec<u32>,
}

impl FreeIndex {
    fn new(nodes: usize, max_free: u32) -> Self {
        let words = nodes.div_ceil(64).max(1);
        let buckets = max_free as usize + 1;
        FreeIndex { words, bits: vec![0; words * buckets], counts: vec![0; buckets] }
    }

    fn max_free(&self) -> u32 {
        self.counts.len() as u32 - 1
    }

    fn insert(&mut self, free: u32, local: usize) {
        self.bits[free as usize * self.words + local / 64] |= 1 << (local % 64);
        self.counts[free as usize] += 1;
    }

    fn remove(&mut self, free: u32, local: usize) {
        self.bits[free as usize * self.words + local / 64] &= !(1 << (local % 64));
        self.counts[free as usize] -= 1;
    }

    fn contains(&self, free: u32, local: usize) -> bool {
        (free as usize) < self.counts.len()
            && self.bits[free as usize * self.words + local / 64] & (1 << (local % 64)) != 0
    }

    fn len(&self) -> u32 {
        self.counts[1..].iter().sum()
    }

    /// Local nodes with exactly `free` free GPUs, ascending.
    fn bucket(&self, free: u32) -> impl Iterator<Item = usize> + '_ {
        let base = free as usize * self.words;
        let words = if self.counts[free as usize] == 0 { &[][..] } else { &self.bits[base..base + self.words] };
        words.iter().enumerate().flat_map(|(w, &word)| {
            let mut m = word;
            std::iter::from_fn(move || {
                if m == 0 {
                    return None;
                }
                let b = m.trailing_zeros() as usize;
                m &= m - 1;
                Some(w * 64 + b)
            })
        })
    }
}

impl Partition {
    /// The node with the fewest free GPUs that still has at least `gpus` free
    /// (ties: lowest node index), or `None`.
    pub fn best_fit_node(&self, gpus: u32) -> Option<NodeId> {
        (gpus.max(1)..=self.index.max_free()).find_map(|f| self.index.bucket(f).next()).map(|l| self.nodes[l])
    }

    /// Nodes with exactly `free` free GPUs (at least one), lowest index first.
    pub fn nodes_with_free(&self, free: u32) -> impl Iterator<Item = NodeId> + '_ {
        let f = if free == 0 || free > self.index.max_free() { None } else { Some(free) };
        f.into_iter().flat_map(move |f| self.index.bucket(f).map(move |l| self.nodes[l]))
    }

    /// Nodes with at least one free GPU, most free first (ties: lowest index),
    /// as (node, free GPUs).
    pub fn nodes_by_free_desc(&self) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        (1..=self.index.max_free()).rev().flat_map(move |f| self.index.bucket(f).map(move |l| (self.nodes[l], f)))
    }

    /// Nodes with at least one free GPU, fewest free first (ties: lowest index),
    /// as (node, free GPUs).
    pub fn nodes_by_free_asc(&self) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        (1..=self.index.max_free()).flat_map(move |f| self.index.bucket(f).map(move |l| (self.nodes[l], f)))
    }
}

/// A refused allocation, before any state changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocError {
    /// The offending GPU, where one is at fault.
    pub gpu: Option<GpuId>,
    /// What was wrong.
    pub reason: String,
}

/// Why a GPU cannot take another tenant (formatted by [`Cluster::share_refusal`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// The GPU is in another partition.
    Vc,
    /// A job holds it exclusively.
    Exclusive(JobId),
    /// It has as many tenants as the cap allows.
    TenantCap,
    /// The guaranteed shares would exceed 1,000 milli-GPU.
    Milli,
    /// The memory would exceed this many usable MiB.
    Memory(u64),
}

/// The cluster's live state: who holds which GPU, free GPUs per node and per partition.
#[derive(Clone, Debug)]
pub struct Cluster {
    spec: ClusterSpec,
    node_first_gpu: Vec<u32>,
    gpu_node: Vec<NodeId>,
    gpu_owner: Vec<Option<JobId>>,
    node_free_mask: Vec<u64>,
    /// Per GPU: its tenants when shared (empty when free or held exclusively).
    shares: Vec<GpuShare>,
    /// Per tenant job: its per-GPU memory need (MiB, `None` = unknown) and
    /// share (milli-GPU); the memory it holds on each of its GPUs is
    /// [`Cluster::tenant_mem_mib`] of that GPU.
    tenant_claims: std::collections::HashMap<JobId, (Option<u64>, u32)>,
    limits: ShareLimits,
    /// GPUs with at least one tenant.
    shared_gpus: u32,
    /// Per node: its open shared GPUs ([`Cluster::is_open`]).
    node_open: Vec<u32>,
    /// Per node: a stamp that changes whenever the node's holders change
    /// ([`Cluster::node_stamp`]).
    node_stamp: Vec<u64>,
    /// The nodes whose stamp changed, in order ([`Cluster::nodes_changed_since`]).
    changes: ChangeLog,
    /// Each node's index within its partition.
    node_local: Vec<u32>,
    partitions: Vec<Partition>,
    gpus_free: u64,
    /// The nodes' distinct GPU types, in node order ([`Cluster::gpu_type_names`]).
    gpu_type_names: Vec<String>,
    /// Per node: its GPU type's index in `gpu_type_names`.
    node_type: Vec<u16>,
}

impl Cluster {
    /// An empty (all GPUs free) cluster from a spec.
    ///
    /// # Errors
    /// The spec's validation error ([`ClusterSpec::validate`]).
    pub fn new(spec: ClusterSpec) -> Result<Self, ConfigError> {
        spec.validate()?;
        let mut node_first_gpu = Vec::with_capacity(spec.nodes.len());
        let mut gpu_node = Vec::new();
        let mut node_free_mask = Vec::with_capacity(spec.nodes.len());
        let mut partitions: Vec<Partition> = spec
            .vc_names
            .iter()
            .map(|name| Partition {
                name: name.clone(),
                nodes: Vec::new(),
                gpus_total: 0,
                gpus_free: 0,
                max_node_gpus: 0,
                max_gpu_mem_mib: 0,
                gpus_open: 0,
                gpus_partial: 0,
                index: FreeIndex::new(0, 0),
            })
            .collect();
        let mut node_local = Vec::with_capacity(spec.nodes.len());
        for (i, n) in spec.nodes.iter().enumerate() {
            let id = NodeId(i as u32);
            node_first_gpu.push(gpu_node.len() as u32);
            gpu_node.extend(std::iter::repeat_n(id, n.gpus as usize));
            node_free_mask.push(full_mask(n.gpus));
            let p = &mut partitions[n.vc.index()];
            node_local.push(p.nodes.len() as u32);
            p.nodes.push(id);
            p.gpus_total += n.gpus;
            p.gpus_free += n.gpus;
            p.max_node_gpus = p.max_node_gpus.max(n.gpus);
            p.max_gpu_mem_mib = p.max_gpu_mem_mib.max(n.gpu_mem_mib);
        }
        for p in &mut partitions {
            p.index = FreeIndex::new(p.nodes.len(), p.max_node_gpus);
            for (local, &node) in p.nodes.iter().enumerate() {
                let gpus = spec.nodes[node.index()].gpus;
                if gpus > 0 {
                    p.index.insert(gpus, local);
                }
            }
        }
        let total = gpu_node.len();
        let mut gpu_type_names: Vec<String> = Vec::new();
        let mut node_type = Vec::with_capacity(spec.nodes.len());
        for n in &spec.nodes {
            let ix = match gpu_type_names.iter().position(|t| *t == n.gpu_type) {
                Some(ix) => ix,
                None => {
                    gpu_type_names.push(n.gpu_type.clone());
                    gpu_type_names.len() - 1
                }
            };
            // At most MAX_GPU_TYPES (checked by `validate`), below the mixed marker.
            node_type.push(ix as u16);
        }
        Ok(Cluster {
            gpu_type_names,
            node_type,
            gpus_free: total as u64,
            gpu_owner: vec![None; total],
            shares: vec![GpuShare::default(); total],
            tenant_claims: std::collections::HashMap::new(),
            limits: ShareLimits::default(),
            shared_gpus: 0,
            node_open: vec![0; spec.nodes.len()],
            node_stamp: (0..spec.nodes.len()).map(|_| next_stamp()).collect(),
            changes: ChangeLog::new(),
            spec,
            node_first_gpu,
            gpu_node,
            node_free_mask,
            node_local,
            partitions,
        })
    }

    /// The nodes' distinct GPU types, in node order: what
    /// [`crate::job::ElasticConfig::gpu_type`] indexes.
    pub fn gpu_type_names(&self) -> &[String] {
        &self.gpu_type_names
    }

    /// The index of `node`'s GPU type in [`Cluster::gpu_type_names`].
    pub fn gpu_type_of(&self, node: NodeId) -> u16 {
        self.node_type[node.index()]
    }

    /// The GPU type of `gpus` ([`Cluster::gpu_type_of`] of their nodes),
    /// [`crate::job::MIXED_GPU_TYPES`] when they span types, 0 for none.
    pub fn gpu_type_of_gpus(&self, gpus: &[GpuId]) -> u16 {
        let mut it = gpus.iter().map(|&g| self.gpu_type_of(self.node_of(g)));
        let Some(first) = it.next() else { return 0 };
        if it.all(|t| t == first) { first } else { crate::job::MIXED_GPU_TYPES }
    }

    /// The static description.
    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// Total GPUs.
    pub fn total_gpus(&self) -> u32 {
        self.gpu_node.len() as u32
    }

    /// Free GPUs in the whole cluster.
    pub fn free_gpus(&self) -> u64 {
        self.gpus_free
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.spec.nodes.len()
    }

    /// A node's spec.
    pub fn node(&self, node: NodeId) -> &NodeSpec {
        &self.spec.nodes[node.index()]
    }

    /// The node a GPU is in.
    pub fn node_of(&self, gpu: GpuId) -> NodeId {
        self.gpu_node[gpu.index()]
    }

    /// The job holding a GPU exclusively, if any.
    pub fn owner(&self, gpu: GpuId) -> Option<JobId> {
        self.gpu_owner[gpu.index()]
    }

    /// Every job holding a GPU: its exclusive owner, or its tenants.
    pub fn holders(&self, gpu: GpuId) -> impl Iterator<Item = JobId> + '_ {
        self.gpu_owner[gpu.index()].into_iter().chain(self.shares[gpu.index()].tenants.iter().copied())
    }

    /// The tenants of a shared GPU (empty when it is free or held exclusively).
    pub fn tenants(&self, gpu: GpuId) -> &[JobId] {
        &self.shares[gpu.index()].tenants
    }

    /// A GPU's sharing state.
    pub fn share(&self, gpu: GpuId) -> &GpuShare {
        &self.shares[gpu.index()]
    }

    /// GPUs with at least one tenant.
    pub fn shared_gpus(&self) -> u32 {
        self.shared_gpus
    }

    /// The sharing limits.
    pub fn share_limits(&self) -> ShareLimits {
        self.limits
    }

    /// Sets the sharing limits (before any GPU is shared).
    ///
    /// # Errors
    /// The limits' validation error, or a [`ConfigError`] if a GPU is already shared.
    pub fn set_share_limits(&mut self, limits: ShareLimits) -> Result<(), ConfigError> {
        limits.validate()?;
        if self.shared_gpus > 0 {
            return Err(ConfigError::other("sharing limits can only be set before any GPU is shared"));
        }
        self.limits = limits;
        // What a node can host depends on the limits: new stamps.
        for st in &mut self.node_stamp {
            *st = next_stamp();
        }
        self.changes = ChangeLog::new();
        Ok(())
    }

    /// Memory of one GPU, MiB.
    pub fn gpu_mem_mib(&self, gpu: GpuId) -> u64 {
        self.node(self.node_of(gpu)).gpu_mem_mib
    }

    /// The memory a tenant with per-GPU need `need` (MiB; `None` = unknown)
    /// and guaranteed share `milli` (milli-GPU, 0 = none) holds on `gpu`:
    ///
    /// - its need, when known;
    /// - unknown, with a share: the same fraction of the GPU's shareable
    ///   memory (its memory less the headroom), rounded down, so that tenants
    ///   whose shares add up to at most 1,000 milli-GPU also fit in memory.
    ///   This is the assumption for the Alibaba PAI 2023 trace, whose
    ///   fractional pods give `gpu_milli` but no memory need: the share is
    ///   taken as a fraction of the whole GPU, compute and memory alike;
    /// - unknown, without a share: the whole GPU (such a job never shares).
    pub fn tenant_mem_mib(&self, gpu: GpuId, need: Option<u64>, milli: u32) -> u64 {
        match need {
            Some(n) => n,
            None if milli > 0 && milli < 1000 => {
                let shareable = self.shareable_mem_mib(gpu);
                (u128::from(shareable) * u128::from(milli) / 1000) as u64
            }
            None => self.gpu_mem_mib(gpu),
        }
    }

    /// Memory a GPU offers two or more tenants: its memory less the headroom,
    /// MiB, rounded down.
    pub fn shareable_mem_mib(&self, gpu: GpuId) -> u64 {
        (self.gpu_mem_mib(gpu) as f64 * (1.0 - self.limits.mem_headroom)) as u64
    }

    /// Why `gpu` cannot take one more tenant needing `mem_mib` MiB and
    /// `milli` milli-GPU in partition `vc`, or `None` if it can.
    /// ([`Cluster::can_host`] answers the same question without building the text.)
    pub fn share_refusal(&self, gpu: GpuId, vc: VcId, mem_mib: u64, milli: u32) -> Option<String> {
        let node = self.node_of(gpu);
        let s = &self.shares[gpu.index()];
        let cap = self.node(node).gpu_mem_mib;
        Some(match self.refusal(gpu, vc, mem_mib, milli)? {
            Refusal::Vc => format!(
                "GPU is in VC `{}`, not the job's VC `{}`",
                self.partitions[self.node(node).vc.index()].name,
                self.partitions[vc.index()].name
            ),
            Refusal::Exclusive(other) => format!("GPU is held exclusively by {other}"),
            Refusal::TenantCap => format!("GPU already has {} tenants (the cap)", s.tenants.len()),
            Refusal::Milli => format!("GPU has {} milli-GPU guaranteed, the job asks {milli} more", s.milli),
            Refusal::Memory(usable) => {
                format!("GPU memory: {} MiB used + {mem_mib} MiB needed > {usable} MiB usable of {cap} MiB", s.mem_mib)
            }
        })
    }

    /// The first rule that keeps `gpu` from taking one more tenant (see
    /// [`Cluster::share_refusal`]), without formatting anything.
    fn refusal(&self, gpu: GpuId, vc: VcId, mem_mib: u64, milli: u32) -> Option<Refusal> {
        let node = self.node_of(gpu);
        if self.node(node).vc != vc {
            return Some(Refusal::Vc);
        }
        if let Some(other) = self.gpu_owner[gpu.index()] {
            return Some(Refusal::Exclusive(other));
        }
        let s = &self.shares[gpu.index()];
        if s.tenants.len() as u32 >= self.limits.max_tenants {
            return Some(Refusal::TenantCap);
        }
        if milli > 1000 || s.milli + milli > 1000 {
            return Some(Refusal::Milli);
        }
        let usable = if s.tenants.is_empty() { self.node(node).gpu_mem_mib } else { self.shareable_mem_mib(gpu) };
        if s.mem_mib + mem_mib > usable {
            return Some(Refusal::Memory(usable));
        }
        None
    }

    /// True if `gpu` can take one more tenant (see [`Cluster::share_refusal`]).
    pub fn can_host(&self, gpu: GpuId, vc: VcId, mem_mib: u64, milli: u32) -> bool {
        self.refusal(gpu, vc, mem_mib, milli).is_none()
    }

    /// The room `gpu` has for one more tenant of its partition: (memory,
    /// MiB; guaranteed share, milli-GPU), or `None` when it can take none
    /// (held exclusively, at the tenant cap, or its tenants already over
    /// its usable memory or 1,000 milli-GPU). A tenant needing `mem_mib` and
    /// `milli` fits exactly when both are within the room:
    /// `can_host(gpu, vc, mem_mib, milli)` is `vc` being the GPU's partition
    /// and `share_room(gpu)` holding `(m, s)` with `mem_mib <= m` and
    /// `milli <= s` (the same rules as [`Cluster::share_refusal`]).
    pub fn share_room(&self, gpu: GpuId) -> Option<(u64, u32)> {
        if self.gpu_owner[gpu.index()].is_some() {
            return None;
        }
        let s = &self.shares[gpu.index()];
        if s.tenants.len() as u32 >= self.limits.max_tenants {
            return None;
        }
        let usable = if s.tenants.is_empty() { self.gpu_mem_mib(gpu) } else { self.shareable_mem_mib(gpu) };
        Some((usable.checked_sub(s.mem_mib)?, 1000u32.checked_sub(s.milli)?))
    }

    /// True if a shared GPU might still take another tenant, whatever it
    /// needs: it has at least one tenant, fewer than the cap, and its tenants
    /// hold no more than its shareable memory ([`Cluster::shareable_mem_mib`]).
    /// Every GPU that can host a request is free or open, so free + open GPUs
    /// bound a placement's choice from above.
    pub fn is_open(&self, gpu: GpuId) -> bool {
        let s = &self.shares[gpu.index()];
        !s.tenants.is_empty()
            && (s.tenants.len() as u32) < self.limits.max_tenants
            && s.mem_mib <= self.shareable_mem_mib(gpu)
    }

    /// A GPU's free capacity in GPUs, 0 to 1 (FGD's `f_g`, Weng et al.,
    /// ATC'23, as `dlsched::policy::fgd` reads it): 1 when free, 0 when held
    /// exclusively or at the tenant cap, else 1 − max(guaranteed milli-GPU /
    /// 1,000, memory held / GPU memory).
    pub fn free_capacity(&self, g: GpuId) -> f64 {
        if self.gpu_owner[g.index()].is_some() {
            return 0.0;
        }
        let s = &self.shares[g.index()];
        if s.tenants.is_empty() {
            return 1.0;
        }
        if s.tenants.len() as u32 >= self.limits.max_tenants {
            return 0.0;
        }
        let used = (f64::from(s.milli) / 1000.0).max(s.mem_mib as f64 / self.gpu_mem_mib(g).max(1) as f64);
        (1.0 - used).clamp(0.0, 1.0)
    }

    /// Whether a GPU with tenants has part of its capacity free
    /// ([`Cluster::free_capacity`] above 0).
    fn is_partial(&self, g: GpuId) -> bool {
        !self.shares[g.index()].tenants.is_empty() && self.free_capacity(g) > 0.0
    }

    /// A stamp of the node's state: it changes whenever a job takes or leaves
    /// one of its GPUs, and no two nodes of any clusters of the process (nor a
    /// node before and after a change) share one, while a clone keeps its
    /// original's stamps until it changes. Equal stamps mean equal node
    /// states, so a placement may cache what it computed about a node.
    pub fn node_stamp(&self, node: NodeId) -> u64 {
        self.node_stamp[node.index()]
    }

    /// A mark of the present end of the log of stamp changes, for
    /// [`Cluster::nodes_changed_since`].
    pub fn change_mark(&self) -> ChangeMark {
        ChangeMark { log: self.changes.id, at: self.changes.start + self.changes.nodes.len() as u64 }
    }

    /// The nodes whose stamp ([`Cluster::node_stamp`]) changed since `mark`
    /// was taken, in order of change, a node once per change: every node
    /// whose stamp differs from what it was at the mark is listed. `None`
    /// when the log no longer reaches back that far (it keeps the last
    /// [`CHANGE_LOG_MAX`] / 2 to [`CHANGE_LOG_MAX`] changes), or the mark is of
    /// another cluster, of this one before [`Cluster::set_share_limits`], or
    /// of the original of a clone (a clone starts a log of its own): then
    /// compare every node's stamp.
    pub fn nodes_changed_since(&self, mark: ChangeMark) -> Option<&[NodeId]> {
        let log = &self.changes;
        if mark.log != log.id || mark.at < log.start {
            return None;
        }
        log.nodes.get((mark.at - log.start) as usize..)
    }

    /// A node's place in its partition's node list ([`Partition::nodes`]).
    pub fn partition_place(&self, node: NodeId) -> usize {
        self.node_local[node.index()] as usize
    }

    /// Open shared GPUs on a node ([`Cluster::is_open`]).
    pub fn node_open(&self, node: NodeId) -> u32 {
        self.node_open[node.index()]
    }

    /// GPUs of a node that might take another tenant: free ones and open
    /// shared ones ([`Cluster::is_open`]); no request can be hosted on more.
    pub fn node_share_candidates(&self, node: NodeId) -> u32 {
        self.node_free(node) + self.node_open[node.index()]
    }

    /// Free GPUs on a node.
    pub fn node_free(&self, node: NodeId) -> u32 {
        self.node_free_mask[node.index()].count_ones()
    }

    /// A node's GPUs, in index order.
    pub fn node_gpus(&self, node: NodeId) -> impl Iterator<Item = GpuId> + use<> {
        let first = self.node_first_gpu[node.index()];
        let n = self.spec.nodes[node.index()].gpus;
        (first..first + n).map(GpuId)
    }

    /// Pushes the `count` lowest-indexed free GPUs of `node` onto `out`; returns
    /// false (pushing nothing) if the node has fewer free.
    pub fn take_free_gpus(&self, node: NodeId, count: u32, out: &mut Vec<GpuId>) -> bool {
        let mut mask = self.node_free_mask[node.index()];
        if mask.count_ones() < count {
            return false;
        }
        let first = self.node_first_gpu[node.index()];
        for _ in 0..count {
            let bit = mask.trailing_zeros();
            mask &= mask - 1;
            out.push(GpuId(first + bit));
        }
        true
    }

    /// Partitions, indexed by [`VcId`].
    pub fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// One partition.
    pub fn partition(&self, vc: VcId) -> &Partition {
        &self.partitions[vc.index()]
    }

    /// The VC index of a name, if the cluster has it.
    pub fn vc_by_name(&self, name: &str) -> Option<VcId> {
        self.spec.vc_names.iter().position(|n| n == name).map(|i| VcId(i as u16))
    }

    /// The locality tier between two GPUs.
    pub fn locality(&self, a: GpuId, b: GpuId) -> LocalityTier {
        if a == b {
            return LocalityTier::SameGpu;
        }
        let (na, nb) = (self.node_of(a), self.node_of(b));
        if na != nb {
            let (ra, rb) = (self.node(na).rack, self.node(nb).rack);
            return if ra == rb { LocalityTier::SameRack } else { LocalityTier::CrossRack };
        }
        let spec = self.node(na);
        let first = self.node_first_gpu[na.index()];
        let (ia, ib) = (a.0 - first, b.0 - first);
        if ia / spec.gpus_per_switch == ib / spec.gpus_per_switch {
            return LocalityTier::SamePcieSwitch;
        }
        let socket = |i: u32| i * spec.sockets / spec.gpus.max(1);
        if socket(ia) == socket(ib) { LocalityTier::SameSocket } else { LocalityTier::SameNode }
    }

    /// The farthest tier between any two GPUs of a placement (`SameGpu` for one GPU).
    pub fn spread(&self, gpus: &[GpuId]) -> LocalityTier {
        let mut worst = LocalityTier::SameGpu;
        for (i, &a) in gpus.iter().enumerate() {
            for &b in &gpus[i + 1..] {
                worst = worst.max(self.locality(a, b));
                if worst == LocalityTier::CrossRack {
                    return worst;
                }
            }
        }
        worst
    }

    /// GPUs per node of a placement, descending (e.g. `[4, 2]`).
    pub fn split_of(&self, gpus: &[GpuId]) -> Vec<u32> {
        let mut per_node: Vec<(NodeId, u32)> = Vec::new();
        for &g in gpus {
            let n = self.node_of(g);
            match per_node.iter_mut().find(|e| e.0 == n) {
                Some(e) => e.1 += 1,
                None => per_node.push((n, 1)),
            }
        }
        let mut split: Vec<u32> = per_node.into_iter().map(|e| e.1).collect();
        split.sort_unstable_by(|a, b| b.cmp(a));
        split
    }

    /// Number of distinct nodes a placement spans.
    pub fn nodes_spanned(&self, gpus: &[GpuId]) -> u32 {
        let node = |i: usize| self.node_of(gpus[i]);
        (0..gpus.len()).filter(|&i| (0..i).all(|j| node(j) != node(i))).count() as u32
    }

    /// Checks that `job` may take exactly `gpus` inside partition `vc`: every GPU
    /// exists, is free, lies in the partition, and appears once.
    ///
    /// # Errors
    /// An [`AllocError`] naming the first offending GPU.
    pub fn check_allocation(&self, vc: VcId, gpus: &[GpuId]) -> Result<(), AllocError> {
        self.check_gpu_list(gpus, |g| self.exclusive_refusal(g, vc))
    }

    /// Checks a placement's GPU list: not empty, every GPU exists and appears
    /// once, and `refusal` has nothing against it.
    fn check_gpu_list(&self, gpus: &[GpuId], refusal: impl Fn(GpuId) -> Option<String>) -> Result<(), AllocError> {
        if gpus.is_empty() {
            return Err(AllocError { gpu: None, reason: "no GPUs in the placement".into() });
        }
        for (i, &g) in gpus.iter().enumerate() {
            if g.index() >= self.gpu_node.len() {
                return Err(AllocError {
                    gpu: Some(g),
                    reason: format!("GPU does not exist (the cluster has {})", self.gpu_node.len()),
                });
            }
            // Placements are a few GPUs: a scan beats building a set.
            if gpus[..i].contains(&g) {
                return Err(AllocError { gpu: Some(g), reason: "GPU listed twice".into() });
            }
            if let Some(reason) = refusal(g) {
                return Err(AllocError { gpu: Some(g), reason });
            }
        }
        Ok(())
    }

    /// Why an existing GPU cannot be taken exclusively in `vc`, or `None`.
    fn exclusive_refusal(&self, g: GpuId, vc: VcId) -> Option<String> {
        if let Some(other) = self.gpu_owner[g.index()] {
            return Some(format!("GPU already held by {other}"));
        }
        if let Some(t) = self.shares[g.index()].tenants.first() {
            return Some(format!("GPU is shared by {t}"));
        }
        let node = self.node_of(g);
        (self.node(node).vc != vc).then(|| {
            format!(
                "GPU is in VC `{}`, not the job's VC `{}`",
                self.partitions[self.node(node).vc.index()].name,
                self.partitions[vc.index()].name
            )
        })
    }

    /// Gives `gpus` to `job` (exclusive mode), after [`Cluster::check_allocation`].
    ///
    /// # Errors
    /// The check's [`AllocError`]; nothing changes then.
    pub fn allocate(&mut self, job: JobId, vc: VcId, gpus: &[GpuId]) -> Result<(), AllocError> {
        self.check_allocation(vc, gpus)?;
        for &g in gpus {
            let node = self.node_of(g);
            let before = self.node_free(node);
            let bit = g.0 - self.node_first_gpu[node.index()];
            self.node_free_mask[node.index()] &= !(1u64 << bit);
            self.gpu_owner[g.index()] = Some(job);
            self.reindex(node, before);
        }
        self.partitions[vc.index()].gpus_free -= gpus.len() as u32;
        self.gpus_free -= gpus.len() as u64;
        Ok(())
    }

    /// Makes `job` a tenant of each of `gpus` (shared mode), holding `mem_mib`
    /// MiB of memory and `milli` milli-GPU on each, after checking every GPU
    /// with [`Cluster::share_refusal`]. (A known per-GPU need: the same as
    /// [`Cluster::allocate_tenant`] with `Some(mem_mib)`.)
    ///
    /// # Errors
    /// An [`AllocError`] naming the first GPU that cannot take the job; nothing changes then.
    pub fn allocate_shared(
        &mut self,
        job: JobId,
        vc: VcId,
        gpus: &[GpuId],
        mem_mib: u64,
        milli: u32,
    ) -> Result<(), AllocError> {
        self.allocate_tenant(job, vc, gpus, Some(mem_mib), milli)
    }

    /// Makes `job` a tenant of each of `gpus` (shared mode), with per-GPU
    /// memory need `need` (MiB, `None` = unknown) and `milli` milli-GPU: on
    /// each GPU it holds [`Cluster::tenant_mem_mib`] of that GPU (so a job of
    /// unknown memory holds each GPU's whole memory, whatever its type),
    /// after checking every GPU with [`Cluster::share_refusal`].
    ///
    /// # Errors
    /// An [`AllocError`] naming the first GPU that cannot take the job; nothing changes then.
    pub fn allocate_tenant(
        &mut self,
        job: JobId,
        vc: VcId,
        gpus: &[GpuId],
        need: Option<u64>,
        milli: u32,
    ) -> Result<(), AllocError> {
        if self.tenant_claims.contains_key(&job) {
            return Err(AllocError { gpu: None, reason: format!("{job} already holds shared GPUs") });
        }
        self.check_gpu_list(gpus, |g| self.share_refusal(g, vc, self.tenant_mem_mib(g, need, milli), milli))?;
        for &g in gpus {
            let mem_mib = self.tenant_mem_mib(g, need, milli);
            let (was_open, was_partial) = (self.is_open(g), self.is_partial(g));
            if self.shares[g.index()].tenants.is_empty() {
                self.take_free(g);
                self.shared_gpus += 1;
            }
            let s = &mut self.shares[g.index()];
            s.tenants.push(job);
            s.mem_mib += mem_mib;
            s.milli += milli;
            self.recount_open(g, was_open, was_partial);
        }
        self.tenant_claims.insert(job, (need, milli));
        Ok(())
    }

    /// Updates the open and partial counts of `g`'s node and partition after
    /// its tenants changed (`was_open`, `was_partial`: [`Cluster::is_open`],
    /// [`Cluster::is_partial`] before).
    fn recount_open(&mut self, g: GpuId, was_open: bool, was_partial: bool) {
        let n = self.node_of(g).index();
        self.node_stamp[n] = next_stamp();
        self.changes.push(NodeId(n as u32));
        let node = self.node_of(g);
        let vc = self.spec.nodes[node.index()].vc;
        let partial = self.is_partial(g);
        if partial != was_partial {
            let p = &mut self.partitions[vc.index()];
            if partial {
                p.gpus_partial += 1;
            } else {
                p.gpus_partial -= 1;
            }
        }
        let open = self.is_open(g);
        if open == was_open {
            return;
        }
        if open {
            self.node_open[node.index()] += 1;
            self.partitions[vc.index()].gpus_open += 1;
        } else {
            self.node_open[node.index()] -= 1;
            self.partitions[vc.index()].gpus_open -= 1;
        }
    }

    /// Marks a free GPU busy in the mask, the node index and the counts.
    fn take_free(&mut self, g: GpuId) {
        let node = self.node_of(g);
        let before = self.node_free(node);
        let bit = g.0 - self.node_first_gpu[node.index()];
        self.node_free_mask[node.index()] &= !(1u64 << bit);
        self.reindex(node, before);
        let vc = self.spec.nodes[node.index()].vc;
        self.partitions[vc.index()].gpus_free -= 1;
        self.gpus_free -= 1;
    }

    /// Frees `gpus` held by `job`, exclusively or as a tenant.
    ///
    /// # Errors
    /// An [`AllocError`] if some GPU is not held by `job` (an engine bug); nothing changes then.
    pub fn release(&mut self, job: JobId, gpus: &[GpuId]) -> Result<(), AllocError> {
        if let Some(&(need, milli)) = self.tenant_claims.get(&job) {
            if let Some(&g) =
                gpus.iter().find(|g| !self.shares.get(g.index()).is_some_and(|s| s.tenants.contains(&job)))
            {
                return Err(AllocError { gpu: Some(g), reason: format!("GPU is not shared by {job}") });
            }
            for &g in gpus {
                let mem = self.tenant_mem_mib(g, need, milli);
                let (was_open, was_partial) = (self.is_open(g), self.is_partial(g));
                let s = &mut self.shares[g.index()];
                s.tenants.retain(|&t| t != job);
                s.mem_mib -= mem;
                s.milli -= milli;
                let emptied = s.tenants.is_empty();
                self.recount_open(g, was_open, was_partial);
                if emptied {
                    self.shared_gpus -= 1;
                    let node = self.node_of(g);
                    let before = self.node_free(node);
                    let bit = g.0 - self.node_first_gpu[node.index()];
                    self.node_free_mask[node.index()] |= 1u64 << bit;
                    self.reindex(node, before);
                    let vc = self.spec.nodes[node.index()].vc;
                    self.partitions[vc.index()].gpus_free += 1;
                    self.gpus_free += 1;
                }
            }
            self.tenant_claims.remove(&job);
            return Ok(());
        }
        if let Some(&g) = gpus.iter().find(|g| self.gpu_owner.get(g.index()).copied().flatten() != Some(job)) {
            return Err(AllocError { gpu: Some(g), reason: format!("GPU is not held by {job}") });
        }
        for &g in gpus {
            let node = self.node_of(g);
            let before = self.node_free(node);
            let bit = g.0 - self.node_first_gpu[node.index()];
            self.node_free_mask[node.index()] |= 1u64 << bit;
            self.gpu_owner[g.index()] = None;
            self.reindex(node, before);
            let vc = self.spec.nodes[node.index()].vc;
            self.partitions[vc.index()].gpus_free += 1;
        }
        self.gpus_free += gpus.len() as u64;
        Ok(())
    }

    fn reindex(&mut self, node: NodeId, before: u32) {
        self.node_stamp[node.index()] = next_stamp();
        self.changes.push(node);
        let after = self.node_free(node);
        let local = self.node_local[node.index()] as usize;
        let p = &mut self.partitions[self.spec.nodes[node.index()].vc.index()];
        if before > 0 {
            p.index.remove(before, local);
        }
        if after > 0 {
            p.index.insert(after, local);
        }
    }

    /// Recomputes every derived count from the GPU owner table and compares:
    /// used by the invariant checks in tests.
    ///
    /// # Errors
    /// A description of the first inconsistency found.
    pub fn check_consistency(&self) -> Result<(), String> {
        let held = |g: usize| self.gpu_owner[g].is_some() || !self.shares[g].tenants.is_empty();
        let free = (0..self.gpu_owner.len()).filter(|&g| !held(g)).count() as u64;
        if free != self.gpus_free {
            return Err(format!("cluster free count {} but {} GPUs have no holder", self.gpus_free, free));
        }
        let shared = self.shares.iter().filter(|s| !s.tenants.is_empty()).count() as u32;
        if shared != self.shared_gpus {
            return Err(format!("{} GPUs counted shared but {shared} have tenants", self.shared_gpus));
        }
        for (g, s) in self.shares.iter().enumerate() {
            if s.tenants.is_empty() {
                continue;
            }
            if let Some(o) = self.gpu_owner[g] {
                return Err(format!("GPU {g} is held exclusively by {o} and shared by {:?}", s.tenants));
            }
            if s.tenants.len() as u32 > self.limits.max_tenants {
                return Err(format!("GPU {g} has {} tenants, over the cap", s.tenants.len()));
            }
            let (mut mem, mut milli) = (0u64, 0u32);
            for t in &s.tenants {
                let Some(&(need, k)) = self.tenant_claims.get(t) else {
                    return Err(format!("GPU {g}: tenant {t} has no claim"));
                };
                mem += self.tenant_mem_mib(GpuId(g as u32), need, k);
                milli += k;
            }
            let cap = self.node(self.node_of(GpuId(g as u32))).gpu_mem_mib;
            if mem != s.mem_mib || milli != s.milli || milli > 1000 || (s.tenants.len() > 1 && mem > cap) {
                return Err(format!(
                    "GPU {g}: tenants hold {mem} MiB and {milli} milli-GPU, ledger says {} MiB and {}; memory {cap} MiB",
                    s.mem_mib, s.milli
                ));
            }
        }
        for (vi, p) in self.partitions.iter().enumerate() {
            let (mut pf, mut po) = (0, 0);
            for &n in &p.nodes {
                let open = self.node_gpus(n).filter(|&g| self.is_open(g)).count() as u32;
                if open != self.node_open[n.index()] {
                    return Err(format!("node {n}: {open} open shared GPUs, counted {}", self.node_open[n.index()]));
                }
                po += open;
                let owned_free = self.node_gpus(n).filter(|g| !held(g.index())).count() as u32;
                if owned_free != self.node_free(n) {
                    return Err(format!("node {n}: mask says {} free, owners say {owned_free}", self.node_free(n)));
                }
                pf += owned_free;
                let indexed = p.index.contains(owned_free, self.node_local[n.index()] as usize);
                if indexed != (owned_free > 0) {
                    return Err(format!("node {n}: partition index out of date"));
                }
            }
            if pf != p.gpus_free {
                return Err(format!("VC {vi}: free count {} but nodes have {pf} free", p.gpus_free));
            }
            let partial =
                p.nodes.iter().flat_map(|&n| self.node_gpus(n)).filter(|&g| self.is_partial(g)).count() as u32;
            if partial != p.gpus_partial {
                return Err(format!("VC {vi}: partial count {} but nodes have {partial} partly free", p.gpus_partial));
            }
            if po != p.gpus_open {
                return Err(format!("VC {vi}: open count {} but nodes have {po} open", p.gpus_open));
            }
            let with_free = p.nodes.iter().filter(|&&n| self.node_free(n) > 0).count() as u32;
            if p.index.len() != with_free {
                return Err(format!("VC {vi}: index holds {} nodes, {with_free} have free GPUs", p.index.len()));
            }
        }
        Ok(())
    }
}

/// Node stamp changes a cluster's log keeps at most
/// ([`Cluster::nodes_changed_since`]); at this many, the older half goes.
pub const CHANGE_LOG_MAX: usize = 1 << 16;

/// A place in a cluster's log of stamp changes ([`Cluster::change_mark`]).
/// The default mark is of no cluster's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChangeMark {
    /// The log's id (0: none).
    log: u64,
    /// Changes logged before the mark.
    at: u64,
}

/// The nodes whose stamp changed, in order, the last [`CHANGE_LOG_MAX`] at most.
#[derive(Debug)]
struct ChangeLog {
    /// A process-wide fresh id (never 0).
    id: u64,
    /// Changes dropped from the front.
    start: u64,
    nodes: Vec<NodeId>,
}

impl ChangeLog {
    fn new() -> Self {
        ChangeLog { id: next_stamp(), start: 0, nodes: Vec::new() }
    }

    fn push(&mut self, node: NodeId) {
        if self.nodes.len() >= CHANGE_LOG_MAX {
            let half = self.nodes.len() / 2;
            self.nodes.drain(..half);
            self.start += half as u64;
        }
        self.nodes.push(node);
    }
}

/// A clone's log is its own and starts empty: marks of the original are
/// not valid in it (its nodes may then change apart from the original's).
impl Clone for ChangeLog {
    fn clone(&self) -> Self {
        ChangeLog::new()
    }
}

/// A process-wide fresh value for [`Cluster::node_stamp`].
fn next_stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn full_mask(gpus: u32) -> u64 {
    if gpus >= 64 { u64::MAX } else { (1u64 << gpus) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c2x4() -> Cluster {
        Cluster::new(ClusterSpec::uniform("t", 2, 4, "K80", 12 * 1024)).unwrap()
    }

    #[test]
    fn gpu_types_are_indexed_in_node_order() {
        // Nodes T4, A100, T4 (4 GPUs each): types [T4, A100]; GPUs 0-3 and
        // 8-11 are T4 (index 0), 4-7 A100 (index 1).
        let mut spec = ClusterSpec::uniform("t", 3, 4, "T4", 16 * 1024);
        spec.nodes[1].gpu_type = "A100".into();
        let c = Cluster::new(spec).unwrap();
        assert_eq!(c.gpu_type_names(), ["T4".to_string(), "A100".to_string()]);
        assert_eq!(c.gpu_type_of_gpus(&[GpuId(0), GpuId(9)]), 0);
        assert_eq!(c.gpu_type_of_gpus(&[GpuId(5)]), 1);
        assert_eq!(c.gpu_type_of_gpus(&[GpuId(3), GpuId(4)]), crate::job::MIXED_GPU_TYPES);
    }

    #[test]
    fn allocation_is_exclusive_and_counted() {
        let mut c = c2x4();
        c.allocate(JobId(0), VcId(0), &[GpuId(0), GpuId(1)]).unwrap();
        assert_eq!(c.free_gpus(), 6);
        assert_eq!(c.node_free(NodeId(0)), 2);
        let err = c.allocate(JobId(1), VcId(0), &[GpuId(1)]).unwrap_err();
        assert_eq!(err.gpu, Some(GpuId(1)));
        assert!(c.allocate(JobId(1), VcId(0), &[GpuId(8)]).is_err(), "GPU 8 does not exist");
        assert!(c.allocate(JobId(1), VcId(0), &[GpuId(2), GpuId(2)]).is_err(), "duplicate");
        assert!(c.release(JobId(1), &[GpuId(0)]).is_err(), "job 1 does not hold GPU 0");
        c.release(JobId(0), &[GpuId(0), GpuId(1)]).unwrap();
        assert_eq!(c.free_gpus(), 8);
        c.check_consistency().unwrap();
    }

    #[test]
    fn open_shared_gpus_are_counted_by_hand() {
        // 2 nodes × 4 GPUs of 12,288 MiB; shareable with 5 % headroom:
        // floor(12,288 × 0.95) = 11,673 MiB; tenant cap 2.
        let mut c = c2x4();
        assert_eq!(c.shareable_mem_mib(GpuId(0)), 11_673);
        // A tenant of 6,000 MiB on GPU 0: open (1 tenant, 6,000 <= 11,673).
        c.allocate_tenant(JobId(0), VcId(0), &[GpuId(0)], Some(6_000), 0).unwrap();
        // A whole-GPU tenant (unknown memory) on GPUs 1 and 4: 12,288 > 11,673, closed.
        c.allocate_tenant(JobId(1), VcId(0), &[GpuId(1), GpuId(4)], None, 0).unwrap();
        assert_eq!((c.node_open(NodeId(0)), c.node_open(NodeId(1)), c.partition(VcId(0)).gpus_open), (1, 0, 1));
        // Node 0: 2 free + 1 open; node 1: 3 free.
        assert_eq!((c.node_share_candidates(NodeId(0)), c.node_share_candidates(NodeId(1))), (3, 3));
        // A second tenant on GPU 0 reaches the cap: closed.
        c.allocate_tenant(JobId(2), VcId(0), &[GpuId(0)], Some(1_000), 0).unwrap();
        assert_eq!(c.partition(VcId(0)).gpus_open, 0);
        c.check_consistency().unwrap();
        // It leaves: open again; the first leaves too: free, not open.
        c.release(JobId(2), &[GpuId(0)]).unwrap();
        assert_eq!(c.node_open(NodeId(0)), 1);
        c.release(JobId(0), &[GpuId(0)]).unwrap();
        assert_eq!((c.node_open(NodeId(0)), c.node_free(NodeId(0))), (0, 3));
        c.check_consistency().unwrap();
    }

    #[test]
    fn best_fit_prefers_fullest_node_with_room() {
        let mut c = c2x4();
        c.allocate(JobId(0), VcId(0), &[GpuId(4), GpuId(5), GpuId(6)]).unwrap();
        let p = c.partition(VcId(0));
        assert_eq!(p.best_fit_node(1), Some(NodeId(1))); // node1 has 1 free, node0 has 4
        assert_eq!(p.best_fit_node(2), Some(NodeId(0)));
        assert_eq!(p.best_fit_node(5), None);
        let desc: Vec<_> = p.nodes_by_free_desc().collect();
        assert_eq!(desc, vec![(NodeId(0), 4), (NodeId(1), 1)]);
    }

    #[test]
    fn locality_tiers_follow_switch_socket_node() {
        // 4 GPUs per node, 2 per switch, 2 sockets: GPUs 0,1 share a switch;
        // 0 and 2 are on different sockets; 0 and 4 on different nodes.
        let c = c2x4();
        assert_eq!(c.locality(GpuId(0), GpuId(1)), LocalityTier::SamePcieSwitch);
        assert_eq!(c.locality(GpuId(0), GpuId(2)), LocalityTier::SameNode);
        assert_eq!(c.locality(GpuId(0), GpuId(4)), LocalityTier::SameRack);
        assert_eq!(c.spread(&[GpuId(0), GpuId(1), GpuId(5)]), LocalityTier::SameRack);
        assert_eq!(c.nodes_spanned(&[GpuId(0), GpuId(1), GpuId(5)]), 2);
    }
}
