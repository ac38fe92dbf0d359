//! The FGD packer (`--placement fgd`) after Weng et al., "Beware of
//! Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
//! Gradient Descent", USENIX ATC'23: a task goes where the expected
//! fragmentation of its node grows least.
//!
//! The fragmentation model itself (FGD's `F_n(M)`, our simplifications, the
//! target workload) is a function of the cluster's state and the job list's
//! request mix, so it lives with the cluster, in
//! [`crate::cluster::fragmentation`], where the run's fragmentation metric
//! (`crate::metrics::fragmentation`) reads it too.
//!
//! The packer: for a job of `k` GPUs, on each node with `k` GPUs that can
//! host it, the `k` hostable GPUs with the least free capacity (best fit) are
//! tried, and for `k = 1` every hostable GPU; the candidate with the least
//! growth `F_n(M)` after − before wins (ties: least free capacity left, node
//! index). Nodes in identical states are evaluated once, and a node's
//! evaluation is kept until its state changes ([`Cluster::node_stamp`]).
//! When no GPU of the partition is open to a tenant or partly free (every
//! job holds whole GPUs, as in a trace without memory figures), a node's
//! evaluation depends only on its free-GPU count and its kind (GPU count,
//! memory, type), so only the first node of each (count, kind) is looked at;
//! the choice is the same as looking at every node (a differential test
//! holds it so). A job wider than every node skips the node search. When no
//! node can host the job, it is spread best-fit over the partition as
//! [`super::sharing::ShareFit`] does.

use std::collections::HashMap;

use super::View;
use super::placement::{Placement, Request};
use super::sharing::ShareFit;
use crate::cluster::Cluster;
pub use crate::cluster::fragmentation::{FragModel, demand, gpu_free, node_free};
use crate::ids::{GpuId, JobId, NodeId};

/// The FGD packer (module docs).
#[derive(Clone, Debug, Default)]
pub struct Fgd {
    model: Option<FragModel>,
    /// Scratch reused across calls (no choice depends on it): per node state,
    /// its evaluation; a node's GPUs, hostable positions, free capacities, state key.
    memo: HashMap<Vec<u64>, Eval>,
    gpus: Vec<GpuId>,
    host: Vec<usize>,
    free: Vec<f64>,
    key: Vec<u64>,
    /// Per node: evaluations by (node stamp, GPUs, memory need MiB, milli-GPU),
    /// the last few (a node's evaluation is a function of its state and the
    /// request's figures, so a stamp that has not changed gives it again).
    cache: Vec<Vec<Cached>>,
    /// Per node: its class, nodes alike in GPU count, GPU memory and GPU type
    /// (numbered in node order; built at the first call).
    class_of: Vec<u32>,
    /// Per partition: largest class id + 1, and the GPU count of each of its
    /// distinct classes.
    vc_classes: Vec<(usize, Vec<u32>)>,
    /// Look at every node, never only the first of each class.
    scan_all: bool,
    /// The nodes one call looks at, and which classes it has taken.
    nodes: Vec<NodeId>,
    seen: Vec<bool>,
}

/// Evaluations kept per node.
const CACHE_PER_NODE: usize = 4;

/// A node state's best pick, if any: (growth, free left, GPU positions).
type Eval = Option<(f64, f64, Vec<usize>)>;

/// A cached node evaluation: (node stamp, (GPUs, memory need MiB, milli-GPU), evaluation).
type Cached = (u64, (u32, u64, u32), Eval);

impl Fgd {
    /// A packer against a given target workload (else the job list's mix).
    pub fn with_model(model: FragModel) -> Self {
        Fgd { model: Some(model), ..Default::default() }
    }

    /// The same packer looking at every node of the partition at every call
    /// (no shortcut for partitions without partly free GPUs): the slow
    /// reference that differential tests hold the shortcut against.
    pub fn scanning_every_node(mut self) -> Self {
        self.scan_all = true;
        self
    }
}

impl Placement for Fgd {
    fn name(&self) -> &'static str {
        "fgd"
    }

    fn shares(&self) -> bool {
        true
    }

    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        ShareFit::best_fit().place(cluster, req, out)
    }

    fn fails_by_count(&self) -> bool {
        true
    }

    fn place_job(&mut self, view: &View<'_>, job: JobId, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let cluster = view.cluster;
        let p = cluster.partition(req.vc);
        let model =
            self.model.get_or_insert_with(|| FragModel::from_jobs(view.jobs, p.max_gpu_mem_mib, p.max_node_gpus));
        let k = req.gpus as usize;
        // Fewer free or open GPUs than k (`Cluster::is_open`): nowhere to go.
        if k == 0 || p.gpus_free + p.gpus_open < req.gpus {
            return false;
        }
        let _ = job;
        // A job wider than every node of the partition fits none: straight to
        // the spread (the node loop below would skip every node).
        if req.gpus > p.max_node_gpus {
            return ShareFit::best_fit().place(cluster, req, out);
        }
        let need =
            |g: GpuId| cluster.tenant_mem_mib(g, (req.min_gpu_mem_mib > 0).then_some(req.min_gpu_mem_mib), req.milli);
        // Best: (growth, free left, node index, GPUs).
        let mut best: Option<(f64, f64, NodeId, Vec<GpuId>)> = None;
        // Per node state: the best (growth, free left, GPU positions), if any
        // (one call's states; the buffers are kept to save allocations).
        let memo = &mut self.memo;
        memo.clear();
        let (gpus, host, free, key) = (&mut self.gpus, &mut self.host, &mut self.free, &mut self.key);
        let cache = &mut self.cache;
        if cache.len() < cluster.num_nodes() {
            cache.resize_with(cluster.num_nodes(), Vec::new);
        }
        let class = (req.gpus, req.min_gpu_mem_mib, req.milli);
        if self.class_of.len() != cluster.num_nodes() {
            let mut kinds: Vec<(u32, u64, &str)> = Vec::new();
            self.class_of = (0..cluster.num_nodes())
                .map(|n| {
                    let spec = cluster.node(NodeId(n as u32));
                    let kind = (spec.gpus, spec.gpu_mem_mib, spec.gpu_type.as_str());
                    let i = kinds.iter().position(|k| *k == kind).unwrap_or_else(|| {
                        kinds.push(kind);
                        kinds.len() - 1
                    });
                    i as u32
                })
                .collect();
            // Per partition: largest class id + 1, and the GPU count of each
            // of its distinct classes.
            self.vc_classes = cluster
                .partitions()
                .iter()
                .map(|p| {
                    let mut ids: Vec<u32> = p.nodes.iter().map(|n| self.class_of[n.index()]).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    let gpus = ids.iter().map(|&c| kinds[c as usize].0).collect();
                    (ids.last().map_or(0, |&c| c as usize + 1), gpus)
                })
                .collect();
        }
        // No GPU of the partition is open or partly free: every held GPU has
        // free capacity 0 and hosts nothing, so a node's evaluation depends
        // only on its free-GPU count and its class, and of the nodes alike in
        // both only the first (lowest index) can win. The free-GPU index lists
        // nodes by count, then index: the first node of each (count, class) is
        // looked at, the rest skipped. Otherwise every node is looked at.
        // Either way the winner is the least (growth, free left, node index).
        let nodes = &mut self.nodes;
        nodes.clear();
        if !self.scan_all && p.gpus_open == 0 && p.gpus_partial == 0 {
            let (ids, class_gpus) = &self.vc_classes[req.vc.index()];
            let seen = &mut self.seen;
            for free in req.gpus..=p.max_node_gpus {
                seen.clear();
                seen.resize(*ids, false);
                // Only classes of at least `free` GPUs have a node with `free` free.
                let mut left = class_gpus.iter().filter(|&&g| g >= free).count();
                for node in p.nodes_with_free(free) {
                    let c = self.class_of[node.index()] as usize;
                    if !seen[c] {
                        seen[c] = true;
                        nodes.push(node);
                        left -= 1;
                        if left == 0 {
                            break;
                        }
                    }
                }
            }
        } else {
            nodes.extend(p.nodes.iter().copied());
        }
        for &node in nodes.iter() {
            // A node with fewer than k free or open GPUs cannot host k.
            if cluster.node_share_candidates(node) < req.gpus || !req.fits_type(cluster, node) {
                continue;
            }
            let stamp = cluster.node_stamp(node);
            let cached = &mut cache[node.index()];
            let eval = match cached.iter().position(|e| e.0 == stamp && e.1 == class) {
                Some(i) => &cached[i].2,
                None => {
                    let eval = Self::evaluate(cluster, model, &req, node, k, &need, memo, gpus, host, free, key);
                    if cached.len() >= CACHE_PER_NODE {
                        cached.remove(0);
                    }
                    cached.push((stamp, class, eval));
                    &cached[cached.len() - 1].2
                }
            };
            if let Some((d, left, pick)) = eval.as_ref() {
                let better = best.as_ref().is_none_or(|(bd, bl, bn, _)| {
                    d.total_cmp(bd).then(left.total_cmp(bl)).then(node.index().cmp(&bn.index())).is_lt()
                });
                if better {
                    let first = cluster.node_gpus(node).next().map_or(0, |g| g.0);
                    best = Some((*d, *left, node, pick.iter().map(|&i| GpuId(first + i as u32)).collect()));
                }
            }
        }
        if let Some((_, _, _, gpus)) = best {
            out.extend(gpus);
            return true;
        }
        ShareFit::best_fit().place(cluster, req, out)
    }
}

impl Fgd {
    /// The best pick on `node` for a request of `k` GPUs (module docs), if any.
    #[allow(clippy::too_many_arguments)]
    fn evaluate(
        cluster: &Cluster,
        model: &FragModel,
        req: &Request<'_>,
        node: NodeId,
        k: usize,
        need: &dyn Fn(GpuId) -> u64,
        memo: &mut HashMap<Vec<u64>, Eval>,
        gpus: &mut Vec<GpuId>,
        host: &mut Vec<usize>,
        free: &mut Vec<f64>,
        key: &mut Vec<u64>,
    ) -> Eval {
        {
            gpus.clear();
            gpus.extend(cluster.node_gpus(node));
            host.clear();
            host.extend((0..gpus.len()).filter(|&i| cluster.can_host(gpus[i], req.vc, need(gpus[i]), req.milli)));
            if host.len() < k {
                return None;
            }
            node_free(cluster, node, free);
            // The state key: free capacities (to 1e-6) and which GPUs can host.
            key.clear();
            key.extend(
                free.iter().enumerate().map(|(i, f)| (f * 1e6).round() as u64 * 2 + u64::from(host.contains(&i))),
            );
            key.push(cluster.node(node).gpu_mem_mib);
            if !memo.contains_key(&key[..]) {
                let (gpus, host, free) = (&*gpus, &*host, &*free);
                let before = model.node_frag(free);
                let after_of = |pick: &[usize]| {
                    let mut f2 = free.clone();
                    for &i in pick {
                        let g = gpus[i];
                        let mem = need(g) as f64 / cluster.gpu_mem_mib(g).max(1) as f64;
                        let milli = f64::from(req.milli) / 1000.0;
                        let s = cluster.share(g);
                        let full = s.tenants.len() as u32 + 1 >= cluster.share_limits().max_tenants;
                        let used = (f64::from(s.milli) / 1000.0 + milli)
                            .max((s.mem_mib as f64) / cluster.gpu_mem_mib(g).max(1) as f64 + mem);
                        f2[i] = if full { 0.0 } else { (1.0 - used).clamp(0.0, 1.0) };
                    }
                    (model.node_frag(&f2) - before, f2.iter().sum::<f64>())
                };
                let picks: Vec<Vec<usize>> = if k == 1 {
                    // Idle GPUs of one node are alike: the job on any of them
                    // leaves the same capacities, so only the first is tried
                    // (the lowest position wins the tie anyway).
                    let mut idle_seen = false;
                    host.iter()
                        .filter(|&&i| {
                            let idle = cluster.owner(gpus[i]).is_none() && cluster.share(gpus[i]).tenants.is_empty();
                            !(idle && std::mem::replace(&mut idle_seen, true))
                        })
                        .map(|&i| vec![i])
                        .collect()
                } else {
                    let mut h = host.clone();
                    h.sort_by(|&a, &b| free[a].total_cmp(&free[b]).then(a.cmp(&b)));
                    vec![h[..k].to_vec()]
                };
                let eval = picks
                    .into_iter()
                    .map(|pick| {
                        let (d, left) = after_of(&pick);
                        (d, left, pick)
                    })
                    .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
                memo.insert(key.clone(), eval);
            }
            memo[&key[..]].clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::ids::VcId;
    use crate::job::JobTable;

    #[test]
    fn fgd_packs_where_fragmentation_grows_least() {
        // 1 node × 3 GPUs of 10,000 MiB, cap 4 tenants; pods of 0.5 GPU
        // (half of all jobs) and of one whole GPU.
        let mut c = Cluster::new(ClusterSpec::uniform("t", 1, 3, "T4", 10_000)).unwrap();
        c.set_share_limits(crate::cluster::ShareLimits { max_tenants: 4, mem_headroom: 0.0 }).unwrap();
        c.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 5_000, 500).unwrap();
        let model = FragModel { classes: vec![(1, 0.5, 0.5), (1, 1.0, 0.5)] };
        let mut fgd = Fgd::with_model(model);
        let jobs = JobTable::default();
        let view = View { now: crate::time::SimTime::ZERO, cluster: &c, jobs: &jobs };
        // Before: GPU 0's free 0.5 is a fragment for whole-GPU pods, F = 0.5 × 0.5.
        // A 0.5-GPU pod on GPU 0 fills it (F = 0, growth -0.25); on an idle
        // GPU it leaves two half-free GPUs (F = 0.5 × 1.0, growth +0.25): GPU 0.
        let req = Request { milli: 500, min_gpu_mem_mib: 5_000, ..Request::new(VcId(0), 1) };
        let mut out = Vec::new();
        assert!(fgd.place_job(&view, JobId(1), req, &mut out));
        assert_eq!(out, vec![GpuId(0)]);
    }
}
