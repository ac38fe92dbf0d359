//! Criterion benchmark of one scheduling pass of a sharing placement:
//! `sharing_pass/<placement>/<cluster>/<queue>`.
//!
//! FIFO with backfill over `share-first-fit`, `share-best-fit`, `fgd` or
//! `memeff-pack`; a pending queue of 100 / 1,000 / 10,000 jobs of 1, 2,
//! 4 or 8 GPUs with per-GPU memory needs of 1,000–14,000 MiB (so they share);
//! a cluster of 512 (64 × 8 V100, 16 GiB) or 6,212 GPUs (`alibaba-openb`,
//! mixed memory) on which about half the GPUs already have one tenant of
//! 1,000–15,000 MiB (node `i` of `g` GPUs: its first `(7 i) mod (g + 1)`).
//! (Those tenants are jobs of the table, never passed to the policy.)
//! The pass calls `Policy::decide` until `Decision::Wait`, allocating each
//! decision as the engine does (`Cluster::allocate_tenant`). The cluster and
//! the policy (every job passed to `on_arrival`) are built in an untimed
//! setup closure; FGD builds its target workload at its first decision,
//! inside the timed pass, as in a run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::ids::{JobId, NodeId, VcId};
use dlsched::job::{JobSpec, JobTable};
use dlsched::policy::{Decision, Policy, View, config::PolicyConfig, placement::PlacementKind, queue::QueueOrder};
use dlsched::time::SimTime;

/// splitmix64: a tiny deterministic hash, so the inputs need no RNG state.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn job_spec(i: usize, gpus: u32, mem: u64, duration_s: u64) -> JobSpec {
    JobSpec {
        id: JobId(i as u32),
        name: format!("p{i}").into(),
        line: 0,
        submit: SimTime::from_secs(i as u64),
        duration_ms: duration_s * 1000,
        gpus,
        vc: VcId(0),
        recorded_shape: false,
        recorded_split: vec![gpus].into(),
        task: None,
        extra: Some(Box::new(dlsched::job::JobExtra { gpu_mem_mib: Some(mem), ..Default::default() })),
    }
}

/// About half the GPUs with one tenant each (module docs), and a job table
/// of those tenants (ids 0..) followed by `n` pending jobs of 1, 2, 4 or 8
/// GPUs (the pending ids, also returned).
fn setup(spec: ClusterSpec, n: usize) -> (Cluster, JobTable, Vec<JobId>) {
    const SIZES: [u32; 4] = [1, 2, 4, 8];
    let mut c = Cluster::new(spec).expect("valid cluster");
    let mut specs = Vec::new();
    let mut tenants = Vec::new();
    for i in 0..c.num_nodes() {
        let node = NodeId(i as u32);
        let g = c.node(node).gpus;
        let held = (7 * i as u32) % (g + 1);
        for gpu in c.node_gpus(node).take(held as usize) {
            let mem = 1_000 + mix(u64::from(gpu.0)) % 14_001;
            tenants.push((gpu, mem));
        }
    }
    for (k, &(gpu, mem)) in tenants.iter().enumerate() {
        specs.push(job_spec(k, 1, mem, 1_000_000));
        c.allocate_tenant(JobId(k as u32), VcId(0), &[gpu], Some(mem), 0).expect("a free GPU");
    }
    let first = specs.len();
    for i in 0..n {
        let h = mix(i as u64 + 7_000_003);
        specs.push(job_spec(first + i, SIZES[(h % 4) as usize], 1_000 + (h >> 24) % 13_001, 60 + (h >> 8) % 100_000));
    }
    let pending = (first..first + n).map(|i| JobId(i as u32)).collect();
    (c, JobTable::new(specs), pending)
}

/// One pass; returns the launches.
fn pass(policy: &mut dyn Policy, cluster: &mut Cluster, jobs: &JobTable, now: SimTime) -> u32 {
    let mut launches = 0;
    loop {
        match policy.decide(&View { now, cluster, jobs }) {
            Decision::Wait => return launches,
            Decision::Launch { job, gpus } => {
                cluster.allocate(job, jobs.spec(job).vc, &gpus).expect("valid launch");
                launches += 1;
            }
            Decision::Colocate { job, gpus } => {
                let s = jobs.spec(job);
                cluster.allocate_tenant(job, s.vc, &gpus, s.gpu_mem_mib(), s.gpu_milli().unwrap_or(0)).expect("valid");
                launches += 1;
            }
            // Queue policies never preempt, reject, resize or set timers.
            d
            @ (Decision::Preempt { .. } | Decision::Reject { .. } | Decision::Resize { .. } | Decision::WakeAt(_)) => {
                panic!("unexpected {d:?}")
            }
        }
    }
}

fn sharing_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("sharing_pass");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let clusters = [
        ("512gpu", ClusterSpec::uniform("64x8", 64, 8, "V100", 16_384)),
        ("6212gpu", ClusterPreset::AlibabaOpenb.spec()),
    ];
    let placements =
        [PlacementKind::ShareFirstFit, PlacementKind::ShareBestFit, PlacementKind::Fgd, PlacementKind::MemeffPack];
    for (cluster_name, cluster_spec) in clusters {
        for n in [100usize, 1_000, 10_000] {
            let (base, jobs, pending) = setup(cluster_spec.clone(), n);
            let now = SimTime::from_secs(jobs.len() as u64);
            for placement in placements {
                let cfg = PolicyConfig { order: QueueOrder::Fifo, backfill: true, placement };
                let setup = || {
                    let cluster = base.clone();
                    let mut p = cfg.build(1).expect("policy");
                    let view = View { now, cluster: &cluster, jobs: &jobs };
                    for &j in &pending {
                        p.on_arrival(j, &view);
                    }
                    (p, cluster)
                };
                let (mut p, mut cl) = setup();
                eprintln!(
                    "sharing_pass/{}/{cluster_name}/{n}: {} launches",
                    placement.name(),
                    pass(p.as_mut(), &mut cl, &jobs, now)
                );
                group.bench_function(BenchmarkId::new(format!("{}/{cluster_name}", placement.name()), n), |b| {
                    b.iter_batched(
                        setup,
                        |(mut p, mut cl)| {
                            black_box(pass(p.as_mut(), &mut cl, &jobs, now));
                            (p, cl)
                        },
                        BatchSize::LargeInput,
                    );
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, sharing_pass);
criterion_main!(benches);
