//! Criterion benchmarks of RIFLING's policy cost (`src/policy/rifling.rs`).
//!
//! - `rifling_decision/<cluster>/<queue>`: one `Policy::decide` of an online
//!   RIFLING agent (state, masking, the Q update of the open transition,
//!   epsilon-greedy choice, physical placement) with `queue` moldable tasks
//!   pending, on a cluster about half of whose GPUs are held (node `i` of `g`
//!   GPUs has `(7 i) mod (g + 1)` held). The policy has seen every arrival
//!   (K-means groups formed) and made one decision before, so an open
//!   transition is closed in the timed call. Built in an untimed setup.
//! - `rifling_regroup/<window>`: `Agent::regroup` (linfa K-means on the
//!   window's `log10 CCR`, k = 4, 10 k-means++ runs, then carrying the Q rows
//!   of 1,000 states to the new groups).

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::ids::{GpuId, JobId, VcId};
use dlsched::job::{JobSpec, JobTable, QosClass, TaskSpec};
use dlsched::policy::rifling::{Agent, RiflingMode, RiflingParams, RiflingPolicy};
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::db::ProfileDb;
use dlsched::time::SimTime;

const MODELS: [&str; 4] = ["resnet50-imagenet", "vgg16-imagenet", "inceptionv3-imagenet", "transformer-multi30k"];

fn half_busy(spec: ClusterSpec) -> Cluster {
    let mut c = Cluster::new(spec).expect("valid cluster");
    let mut gpus: Vec<GpuId> = Vec::new();
    for i in 0..c.num_nodes() {
        let node = dlsched::ids::NodeId(i as u32);
        let held = (7 * i as u32) % (c.node(node).gpus + 1);
        if held == 0 {
            continue;
        }
        gpus.clear();
        gpus.extend(c.node_gpus(node).take(held as usize));
        c.allocate(JobId(u32::MAX - i as u32), c.node(node).vc, &gpus).expect("free GPUs");
    }
    c
}

fn tasks(n: usize) -> JobTable {
    let specs = (0..n)
        .map(|i| {
            let model = MODELS[i % MODELS.len()];
            let global_bsz = [16, 32, 64, 128][(i / 4) % 4];
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
                    kind: "bench".into(),
                    inference: i % 5 == 0,
                    global_bsz,
                    iterations: 1000,
                    qos: QosClass::Normal,
                    deadline: SimTime::from_secs(1_000_000),
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
    let mut group = c.benchmark_group("rifling_decision");
    group.sample_size(30).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let db = Arc::new(ProfileDb::builtin());
    for (name, spec) in
        [("16gpu", ClusterPreset::Lab16.spec()), ("512gpu", ClusterSpec::uniform("64x8", 64, 8, "V100", 16384))]
    {
        let cluster = half_busy(spec);
        let p = cluster.partition(VcId(0));
        let actions = (p.nodes.len() as u32 * p.max_node_gpus) as usize + 1;
        for queue in [10usize, 100, 1000] {
            let jobs = tasks(queue + 1);
            let now = SimTime::from_secs(queue as u64 + 1);
            group.bench_with_input(BenchmarkId::new(name, queue), &queue, |b, _| {
                b.iter_batched(
                    || {
                        let agent = Arc::new(Mutex::new(Agent::new(RiflingParams::default(), actions, 1)));
                        let mut pol = RiflingPolicy::new(RiflingMode::Online, agent, db.clone());
                        let mut cl = cluster.clone();
                        let view = View { now, cluster: &cl, jobs: &jobs };
                        for s in jobs.specs() {
                            pol.on_arrival(s.id, &view);
                        }
                        // One decision first, so the timed one closes a transition.
                        if let Decision::Launch { job, gpus } = pol.decide(&view) {
                            cl.allocate(job, VcId(0), &gpus).expect("valid launch");
                        }
                        (pol, cl)
                    },
                    |(mut pol, cl)| {
                        let d = pol.decide(&View { now, cluster: &cl, jobs: &jobs });
                        black_box(d);
                        (pol, cl)
                    },
                    BatchSize::SmallInput,
                );
            });
        }
    }
    group.finish();
}

fn regroup(c: &mut Criterion) {
    let mut group = c.benchmark_group("rifling_regroup");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let db = &ProfileDb::builtin();
    let mut base = Agent::new(RiflingParams::default(), 17, 1);
    base.regroup(&[0.5, 1.5, 2.5, 3.5]);
    for s in 0..1000 {
        base.q.insert(format!("t{}|{}", s % 4, s), vec![0.1; 17]);
    }
    for window in [50usize, 200, 1000] {
        let xs: Vec<f64> = (0..window)
            .map(|i| dlsched::policy::rifling::log_ccr(db, MODELS[i % 4], [16, 32, 64, 128][(i / 4) % 4]))
            .collect();
        group.bench_with_input(BenchmarkId::from_parameter(window), &xs, |b, xs| {
            b.iter_batched(
                || base.clone(),
                |mut a| {
                    a.regroup(xs);
                    a
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, decision, regroup);
criterion_main!(benches);
