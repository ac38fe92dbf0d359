//! Criterion benchmark of one GENIE-family decision (`src/policy/genie.rs`)
//! against the number of waiting tasks.
//!
//! - `genie_decision/<path>/<queue>`: one `Policy::decide` of `genie`
//!   (strict reading, the paper's placement set) on `lab16` (4 × 4 K80) with
//!   every GPU held, so the decision waits, as most decisions under overload
//!   do, and leaves the policy as it found it (the same decision is timed
//!   again and again). `queue` = 10 / 100 / 1,000 / 10,000 waiting tasks of
//!   the six GENIE task types (training and inference), global batches 16 to
//!   256, 100 to 5,000 iterations, ECTs from 1 minute to 10 hours after
//!   arrival (arrivals 1 s apart, the decision at the last arrival). Paths:
//!   `indexed` and `indexed-backfill` (the policy as built), `scan` and
//!   `scan-backfill` ([`GeniePolicy::with_full_scan`]: every waiting task
//!   scored against every placement, the earlier code). The tasks
//!   arrive and a first decision indexes them in the untimed setup.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterPreset};
use dlsched::ids::{GpuId, JobId, NodeId, VcId};
use dlsched::job::{JobSpec, JobTable, QosClass, TaskSpec};
use dlsched::policy::genie::{
    GenieOptions, GeniePolicy, GenieVariant, ProfilerConfig, TASK_MODELS, kind_name, profile,
};
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::db::ProfileDb;
use dlsched::time::SimTime;

/// lab16 with every GPU held by jobs that are not in the queue.
fn full_lab16() -> Cluster {
    let mut c = Cluster::new(ClusterPreset::Lab16.spec()).expect("valid cluster");
    for i in 0..c.num_nodes() {
        let node = NodeId(i as u32);
        let gpus: Vec<GpuId> = c.node_gpus(node).collect();
        c.allocate(JobId(u32::MAX - i as u32), c.node(node).vc, &gpus).expect("free GPUs");
    }
    c
}

fn tasks(n: usize) -> JobTable {
    let specs = (0..n)
        .map(|i| {
            let (name, model) = TASK_MODELS[i % TASK_MODELS.len()];
            let inference = (i / TASK_MODELS.len()) % 2 == 1;
            let global_bsz = [16, 32, 64, 128, 256][(i / 12) % 5];
            let iterations = [100, 1_000, 5_000][(i / 7) % 3];
            let ect_s = [60, 600, 3_600, 36_000][(i / 5) % 4];
            JobSpec {
                id: JobId(i as u32),
                name: format!("t{i}").into(),
                submit: SimTime::from_secs(i as u64),
                duration_ms: 600_000,
                gpus: 1,
                vc: VcId(0),
                recorded_shape: false,
                line: 0,
                recorded_split: vec![1].into(),
                task: Some(Box::new(TaskSpec {
                    kind: kind_name(name, inference),
                    inference,
                    global_bsz,
                    iterations,
                    qos: QosClass::Normal,
                    deadline: SimTime::from_secs(i as u64 + ect_s),
                })),
                extra: Some(Box::new(dlsched::job::JobExtra {
                    model: Some(model.to_string()),
                    local_bsz: Some(global_bsz),
                    ..Default::default()
                })),
            }
        })
        .collect();
    JobTable::new(specs)
}

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("genie_decision");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let db = Arc::new(ProfileDb::builtin());
    let profiles = profile(&db, "builtin", "k80", 4, 4, 1, ProfilerConfig::default());
    let cluster = full_lab16();
    for queue in [10usize, 100, 1_000, 10_000] {
        let jobs = tasks(queue);
        let now = SimTime::from_secs(queue as u64);
        for (path, scan, backfill) in [
            ("indexed", false, false),
            ("indexed-backfill", false, true),
            ("scan", true, false),
            ("scan-backfill", true, true),
        ] {
            let opts = GenieOptions { variant: GenieVariant::Genie, backfill, ..Default::default() };
            let mut pol = GeniePolicy::new(opts, profiles.clone(), db.clone());
            if scan {
                pol = pol.with_full_scan();
            }
            let view = View { now, cluster: &cluster, jobs: &jobs };
            for s in jobs.specs() {
                pol.on_arrival(s.id, &view);
            }
            // Indexes the arrivals; every GPU is held, so it waits.
            assert_eq!(pol.decide(&view), Decision::Wait);
            group.bench_with_input(BenchmarkId::new(path, queue), &queue, |b, _| {
                b.iter(|| black_box(pol.decide(&view)));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
