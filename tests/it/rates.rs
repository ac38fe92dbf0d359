//! Rate changes: settlement of work done and stale completion events.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::ids::GpuId;
use dlsched::job::JobSpec;
use dlsched::policy::{placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::RateModel;
use dlsched::workload::build_workload;

use crate::common::{expect, policy, rec, schedule};

/// Test model: a job's rate is 1 / (number of jobs on its node), a crude
/// stand-in for PCIe contention.
struct NodeContention;

impl RateModel for NodeContention {
    fn name(&self) -> &'static str {
        "node-contention"
    }
    fn rate(&self, _job: &JobSpec, gpus: &[GpuId], cluster: &Cluster) -> f64 {
        let node = cluster.node_of(gpus[0]);
        let mut jobs: Vec<_> = cluster.node_gpus(node).filter_map(|g| cluster.owner(g)).collect();
        jobs.sort();
        jobs.dedup();
        1.0 / jobs.len().max(1) as f64
    }
    fn depends_on_neighbours(&self) -> bool {
        true
    }
}

#[test]
fn rate_change_settles_work_and_skips_stale_completions() {
    // One node, 2 GPUs. J0 (0 s, 1 GPU, 10 s of work), J1 (4 s, 1 GPU, 4 s).
    // [0,4): J0 alone at rate 1 does 4 s of work, 6 left; its completion was set for t=10.
    // t4: J1 starts; both run at 0.5. J0 would end at 4 + 6/0.5 = 16, J1 at 4 + 4/0.5 = 12.
    // t12: J1 ends; J0 has done 8 * 0.5 = 4 more, 2 left, at rate 1 again: ends at 14.
    // The completions set for 10 (epoch 0) and 16 (epoch 1) are stale: 2 skipped.
    // Rate changes: J0 1 -> 0.5 at t4, 0.5 -> 1 at t12 (J1 started at 0.5): 2.
    let spec = ClusterSpec::uniform("1x2", 1, 2, "K80", 12 * 1024);
    let cluster = Cluster::new(spec).unwrap();
    let p = policy(QueueOrder::Fifo, false, PlacementKind::Consolidate);
    let w = build_workload(vec![rec("J0", 0, 1, 10), rec("J1", 4, 1, 4)], &cluster, p.placement.build());
    let sim = Simulation::new(
        cluster,
        w.jobs,
        p.build(1).unwrap(),
        Box::new(NodeContention),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    );
    let out = sim.run().unwrap();
    assert_eq!(schedule(&out), expect(&[("J0", 0, 14), ("J1", 4, 12)]));
    assert_eq!(out.stats.stale_completions, 2);
    assert_eq!(out.stats.rate_changes, 2);
}
