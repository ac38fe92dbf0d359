//! The run's fragmentation metric: FGD's expected fragmentation
//! (`F_n(M)`, [`crate::cluster::fragmentation`]) of every node against the
//! job list's request mix, kept current as jobs start and end, for the
//! time-averaged `fragmentation_mean` of the summary.

use crate::cluster::Cluster;
use crate::cluster::fragmentation::{FragModel, node_free};
use crate::ids::NodeId;
use crate::job::JobTable;

/// Per node, its current fragmentation (GPUs), and their sum.
#[derive(Clone, Debug, Default)]
pub struct FragMeter {
    model: FragModel,
    node_frag: Vec<f64>,
    sum: f64,
    free: Vec<f64>,
}

impl FragMeter {
    /// The meter of `cluster` in its current state against the request mix
    /// of `jobs` ([`FragModel::from_jobs`], with the cluster's largest GPU
    /// memory and largest node).
    pub fn new(cluster: &Cluster, jobs: &JobTable) -> Self {
        let max_mem = cluster.spec().nodes.iter().map(|n| n.gpu_mem_mib).max().unwrap_or(0);
        let max_node = cluster.spec().nodes.iter().map(|n| n.gpus).max().unwrap_or(0);
        let model = FragModel::from_jobs(jobs, max_mem, max_node);
        let mut free = Vec::new();
        let node_frag: Vec<f64> = (0..cluster.num_nodes())
            .map(|n| {
                node_free(cluster, NodeId(n as u32), &mut free);
                model.node_frag(&free)
            })
            .collect();
        let sum = node_frag.iter().sum();
        FragMeter { model, node_frag, sum, free }
    }

    /// The fragmentation summed over nodes now, GPUs.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Recomputes the fragmentation of `nodes` (whose GPUs changed).
    pub fn refresh(&mut self, cluster: &Cluster, nodes: &[NodeId]) {
        for &n in nodes {
            node_free(cluster, n, &mut self.free);
            let f = self.model.node_frag(&self.free);
            self.sum += f - std::mem::replace(&mut self.node_frag[n.index()], f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::ids::{GpuId, JobId, VcId};
    use crate::job::JobSpec;

    #[test]
    fn meter_follows_allocations() {
        // 1 node × 2 GPUs; the job list asks 2 GPUs (one job). Empty: the job
        // fits, nothing is a fragment (0). One GPU held: 1 GPU free but the
        // 2-GPU job does not fit, so the free GPU is a fragment: 1.
        let mut c = Cluster::new(ClusterSpec::uniform("t", 1, 2, "V100", 16_000)).unwrap();
        let spec = JobSpec {
            id: JobId(0),
            name: "a".into(),
            line: 0,
            submit: crate::time::SimTime::ZERO,
            duration_ms: 10,
            gpus: 2,
            vc: VcId(0),
            recorded_shape: false,
            recorded_split: vec![2].into(),
            task: None,
            extra: None,
        };
        let jobs = JobTable::new(vec![spec]);
        let mut m = FragMeter::new(&c, &jobs);
        assert_eq!(m.sum(), 0.0);
        c.allocate(JobId(0), VcId(0), &[GpuId(0)]).unwrap();
        m.refresh(&c, &[NodeId(0)]);
        assert_eq!(m.sum(), 1.0);
    }
}
