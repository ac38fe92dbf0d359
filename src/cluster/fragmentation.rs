//! GPU fragmentation after FGD (Weng et al., "Beware of Fragmentation:
//! Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
//! USENIX ATC'23): the model that the FGD packer (`crate::policy::fgd`)
//! scores placements with and the run's fragmentation metric
//! (`crate::metrics::fragmentation`) integrates. It is a function of the
//! cluster's state and the job list's request mix only, so it sits on the
//! cluster's floor, below both.
//!
//! FGD's definition: for a node `n` and a task `m`, the fragment `F_n(m)` is
//! the node's unallocated GPU capacity that `m` cannot use: all of it when
//! `m` cannot be placed on the node, else the free capacity of the GPUs too
//! full for `m`. Against a target workload `M` of task classes with
//! popularity `p_m`, `F_n(M) = Σ_m p_m F_n(m)`; FGD places a task where the
//! expected fragmentation grows least.
//!
//! Our simplified version:
//!
//! - a GPU's free capacity `f_g` (in GPUs, 0..1) is 1 when free, 0 when held
//!   exclusively or at the tenant cap, else `1 − max(guaranteed milli-GPU /
//!   1,000, memory held / GPU memory)` (memory is what bounds co-location
//!   of whole-GPU jobs here); CPUs are not modelled;
//! - a task class is (GPU count `k`, per-GPU demand `d`): `d` = the
//!   guaranteed share for fractional pods, else the memory need / the
//!   largest GPU memory of the cluster, else 1; `d` is rounded up to a
//!   multiple of 0.05;
//! - `m` fits node `n` when at least `k` of its GPUs have `f_g ≥ d`; then
//!   `F_n(m) = Σ_{g: f_g < d} f_g`, else `Σ_g f_g`;
//! - the target workload is the request mix of the whole job list (FGD uses
//!   the trace's distribution, assumed known from history), leaving out
//!   jobs wider than a node.

use super::Cluster;
use crate::ids::{GpuId, NodeId};
use crate::job::{JobSpec, JobTable};

/// A target workload: task classes `(k GPUs, per-GPU demand d, popularity p)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FragModel {
    /// The classes; popularities add up to 1.
    pub classes: Vec<(u32, f64, f64)>,
}

/// A demand rounded up to a multiple of 0.05, within (0, 1].
fn bucket(d: f64) -> f64 {
    ((d * 20.0 - 1e-9).ceil() / 20.0).clamp(0.05, 1.0)
}

/// A job's per-GPU demand (module docs), in GPUs.
pub fn demand(spec: &JobSpec, max_mem_mib: u64) -> f64 {
    match (spec.gpu_milli(), spec.gpu_mem_mib()) {
        (Some(k), _) if k > 0 && k < 1000 => bucket(f64::from(k) / 1000.0),
        (_, Some(m)) if max_mem_mib > 0 => bucket(m as f64 / max_mem_mib as f64),
        _ => 1.0,
    }
}

impl FragModel {
    /// The request mix of `jobs` on a cluster whose largest GPU has
    /// `max_mem_mib` and largest node `max_node_gpus` GPUs. Jobs wider than a
    /// node are left out (FGD's fragmentation is per node: such a job never
    /// fits one).
    pub fn from_jobs(jobs: &JobTable, max_mem_mib: u64, max_node_gpus: u32) -> Self {
        // Counts by (k, 20 d): k <= max_node_gpus <= 64, 20 d in 1..=20.
        let mut counts = vec![0u64; (max_node_gpus as usize + 1) * 21];
        for (spec, _) in jobs.iter().filter(|(s, _)| s.gpus <= max_node_gpus) {
            let d = (demand(spec, max_mem_mib) * 20.0).round() as usize;
            counts[spec.gpus.max(1) as usize * 21 + d.min(20)] += 1;
        }
        let total = counts.iter().sum::<u64>().max(1) as f64;
        let classes = counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| ((i / 21) as u32, (i % 21) as f64 / 20.0, c as f64 / total))
            .collect();
        FragModel { classes }
    }

    /// `F_n(M)` of a node whose GPUs have free capacities `free`.
    pub fn node_frag(&self, free: &[f64]) -> f64 {
        let total: f64 = free.iter().sum();
        self.classes
            .iter()
            .map(|&(k, d, p)| {
                let fit = free.iter().filter(|&&f| f >= d - 1e-9).count() as u32;
                let frag = if fit >= k { free.iter().filter(|&&f| f < d - 1e-9).sum::<f64>() } else { total };
                p * frag
            })
            .sum()
    }
}

/// [`FragModel::node_frag`] prepared for many calls: each distinct demand
/// threshold is read once per call instead of once per task class that has
/// it. Every count, sum and product is the one `node_frag` computes, in the
/// same order, so the result is the same to the bit.
#[derive(Clone, Debug, Default)]
pub struct FragPrep {
    /// The distinct thresholds `d − 1e-9`, in first-seen order.
    thresholds: Vec<f64>,
    /// Per task class: its threshold's position in `thresholds`.
    slot: Vec<usize>,
    /// Per threshold: GPUs at or above it and the free capacity below it
    /// (one call's scratch).
    scratch: Vec<(u32, f64)>,
}

impl FragPrep {
    /// The thresholds of `model`.
    pub fn new(model: &FragModel) -> Self {
        let mut thresholds: Vec<f64> = Vec::new();
        let slot = model
            .classes
            .iter()
            .map(|&(_, d, _)| {
                let t = d - 1e-9;
                thresholds.iter().position(|x| x.to_bits() == t.to_bits()).unwrap_or_else(|| {
                    thresholds.push(t);
                    thresholds.len() - 1
                })
            })
            .collect();
        FragPrep { thresholds, slot, scratch: Vec::new() }
    }

    /// [`FragModel::node_frag`] of `model` (the model this was prepared
    /// from) for free capacities `free`.
    pub fn node_frag(&mut self, model: &FragModel, free: &[f64]) -> f64 {
        let total: f64 = free.iter().sum();
        self.scratch.clear();
        self.scratch.extend(
            self.thresholds.iter().map(|&t| {
                (free.iter().filter(|&&f| f >= t).count() as u32, free.iter().filter(|&&f| f < t).sum::<f64>())
            }),
        );
        let scratch = &self.scratch;
        model
            .classes
            .iter()
            .zip(&self.slot)
            .map(|(&(k, _, p), &s)| {
                let (fit, below) = scratch[s];
                let frag = if fit >= k { below } else { total };
                p * frag
            })
            .sum()
    }
}

/// A GPU's free capacity `f_g` (module docs; [`Cluster::free_capacity`]).
pub fn gpu_free(cluster: &Cluster, g: GpuId) -> f64 {
    cluster.free_capacity(g)
}

/// The free capacities of a node's GPUs.
pub fn node_free(cluster: &Cluster, node: NodeId, out: &mut Vec<f64>) {
    out.clear();
    out.extend(cluster.node_gpus(node).map(|g| gpu_free(cluster, g)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_fragmentation_equals_node_frag_to_the_bit() {
        // Random models (repeated thresholds, tiny and whole demands) and
        // random free capacities (0, 1, and in between, as a cluster has them).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..300 {
            let classes = (0..1 + next() % 40)
                .map(|_| {
                    let k = 1 + (next() % 8) as u32;
                    let d = bucket((next() % 1000) as f64 / 1000.0);
                    (k, d, (next() % 1000) as f64 / 7919.0)
                })
                .collect();
            let m = FragModel { classes };
            let mut prep = FragPrep::new(&m);
            for _ in 0..20 {
                let free: Vec<f64> = (0..1 + next() % 12)
                    .map(|_| match next() % 4 {
                        0 => 0.0,
                        1 => 1.0,
                        _ => 1.0 - (next() % 32_510) as f64 / 32_510.0,
                    })
                    .collect();
                assert_eq!(prep.node_frag(&m, &free).to_bits(), m.node_frag(&free).to_bits(), "{m:?} {free:?}");
            }
        }
    }

    #[test]
    fn node_fragmentation_by_hand() {
        // Half the tasks want 0.5 of one GPU, half two whole GPUs.
        let m = FragModel { classes: vec![(1, 0.5, 0.5), (2, 1.0, 0.5)] };
        // Free 1.0, 0.3, 0.6, 0.0: the half-GPU task fits (GPUs 0, 2) and
        // cannot use 0.3 + 0.0; the 2-GPU task does not fit (one whole GPU
        // free), so all 1.9 free GPUs are fragments: 0.5 × 0.3 + 0.5 × 1.9 = 1.1.
        assert!((m.node_frag(&[1.0, 0.3, 0.6, 0.0]) - 1.1).abs() < 1e-12);
        assert_eq!(m.node_frag(&[1.0, 1.0, 1.0, 1.0]), 0.0);
        assert_eq!(bucket(0.0625), 0.1);
        let mut prep = FragPrep::new(&m);
        assert_eq!(prep.node_frag(&m, &[1.0, 0.3, 0.6, 0.0]).to_bits(), m.node_frag(&[1.0, 0.3, 0.6, 0.0]).to_bits());
        assert_eq!(bucket(0.25), 0.25);
    }
}
