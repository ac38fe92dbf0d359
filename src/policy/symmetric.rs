//! Symmetric placements `<d_node, d_gpn>` on physical GPUs: GENIE's
//! placements and RIFLING's actions share this rule.

use crate::cluster::Cluster;
use crate::ids::{GpuId, NodeId, VcId};

/// The GPUs of `<d_node, d_gpn>` now: the `d_node` nodes of `vc` with the most
/// free GPUs (ties by index) that have `d_gpn` free — or, with `best_fit`, the
/// fewest — and the lowest free GPUs on each.
pub fn physical(cluster: &Cluster, vc: VcId, d_node: u32, d_gpn: u32, best_fit: bool) -> Option<Vec<GpuId>> {
    let p = cluster.partition(vc);
    let pick = |it: &mut dyn Iterator<Item = (NodeId, u32)>| -> Vec<NodeId> {
        it.filter(|&(_, free)| free >= d_gpn).take(d_node as usize).map(|(n, _)| n).collect()
    };
    let nodes = if best_fit { pick(&mut p.nodes_by_free_asc()) } else { pick(&mut p.nodes_by_free_desc()) };
    if nodes.len() < d_node as usize {
        return None;
    }
    let mut out = Vec::with_capacity((d_node * d_gpn) as usize);
    for n in nodes {
        cluster.take_free_gpus(n, d_gpn, &mut out);
    }
    Some(out)
}
