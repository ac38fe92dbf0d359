//! Seeded random workloads with every invariant checked after every instant.

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::job::JobState;
use dlsched::policy::{PlacementKind, PolicyConfig, QueueOrder};
use dlsched::profile::TraceSpeed;
use dlsched::trace::build_workload;
use dlsched::trace::synthetic::{SyntheticSpec, generate};

fn clusters() -> Vec<ClusterSpec> {
    let mut two_vcs = ClusterSpec::uniform("2vc", 6, 8, "V100", 16384);
    two_vcs.vc_names = vec!["a".into(), "b".into()];
    two_vcs.named_vcs = true;
    for n in &mut two_vcs.nodes[4..] {
        n.vc = dlsched::ids::VcId(1);
    }
    vec![ClusterPreset::Lab16.spec(), ClusterSpec::uniform("3x8", 3, 8, "V100", 16384), two_vcs]
}

#[test]
fn invariants_hold_after_every_instant() {
    let mut runs = 0;
    for spec in clusters() {
        for seed in 1..=3u64 {
            for order in [QueueOrder::Fifo, QueueOrder::Sjf] {
                for backfill in [false, true] {
                    for placement in [PlacementKind::Consolidate, PlacementKind::FirstFit] {
                        let cluster = Cluster::new(spec.clone()).unwrap();
                        let max = cluster.partitions().iter().map(|p| p.gpus_total).max().unwrap();
                        let syn = SyntheticSpec { jobs: 150, jobs_per_hour: None, load: 1.5 };
                        let mut recs = generate(&syn, cluster.total_gpus(), max, seed).unwrap();
                        // Spread jobs over the VCs by id so both partitions are used.
                        for (i, r) in recs.iter_mut().enumerate() {
                            r.vc = Some(if i % 3 == 0 { "b" } else { "a" }.to_string());
                        }
                        let w = build_workload(recs, &cluster, placement);
                        let admitted = w.jobs.len();
                        assert_eq!(admitted + w.skipped.len(), 150, "every row is admitted or skipped");
                        let p = PolicyConfig { order, backfill, placement }.build(cluster.partitions().len()).unwrap();
                        let mut sim =
                            Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), EngineConfig::default());
                        while sim.step().unwrap().is_some() {
                            if let Err(e) = sim.check_invariants() {
                                panic!(
                                    "{} seed {seed} {order:?} backfill {backfill} {placement:?} at {}: {e}",
                                    spec.name,
                                    sim.now()
                                );
                            }
                        }
                        let out = sim.finish();
                        assert!(
                            out.jobs.iter().all(|(_, s)| matches!(s, JobState::Completed(_))),
                            "every admitted job completes"
                        );
                        runs += 1;
                    }
                }
            }
        }
    }
    assert_eq!(runs, 3 * 3 * 2 * 2 * 2);
}
