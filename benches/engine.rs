//! Criterion benchmarks of the simulator's hot paths, smallest to largest.
//!
//! - `event_queue`: push N events (N = 1,000 and 100,000) into an
//!   [`EventQueue`], then pop all N. Timestamps are drawn from N/16 distinct
//!   instants, so about 16 events share each one and the FIFO tie-break on the
//!   insertion sequence is exercised.
//! - `scheduling_pass`: one full scheduling pass of a queue policy (FIFO and SJF,
//!   each strict and with backfill, consolidate placement) over a pending queue
//!   of 10 / 100 / 1,000 / 10,000 jobs of 1, 2, 4 or 8 GPUs, on a cluster of 16
//!   (`lab16`), 512 (64 × 8) or 2,490 (`philly`) GPUs of which about half are
//!   already held by other jobs, spread unevenly over the nodes. The pass calls
//!   `Policy::decide` until it returns `Decision::Wait`, applying each launch
//!   with `Cluster::allocate` as the engine does (otherwise the policy would be
//!   offered the same free GPUs again).
//! - `replay_synthetic_10k`: `experiment::run_one` end to end (workload
//!   generation, admission, simulation, summary) on 10,000 synthetic jobs at
//!   offered load 0.8 on a 64 × 8 cluster, per policy, without timeline samples.
//! - `replay_philly`: `run_one` on the real Philly job list (RFold artifact,
//!   2,490-GPU `philly` preset) and on the Helios study's Philly window (its VC
//!   partitions), strict FIFO, consolidate, trace parsing included. Skipped with
//!   a printed reason when `../shared` does not hold the files.
//!
//! Every input (events, clusters, job tables, policies with their queues
//! filled, run specs) is built outside the timed closures; where the timed code
//! consumes or mutates its input, `iter_batched` builds a fresh copy in an
//! untimed setup closure, and outputs are dropped after timing stops.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::engine::{Event, EventQueue};
use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
use dlsched::ids::{GpuId, JobId, VcId};
use dlsched::job::{JobSpec, JobTable};
use dlsched::policy::{Decision, Policy, View, config::PolicyConfig, placement::PlacementKind, queue::QueueOrder};
use dlsched::time::SimTime;
use dlsched::trace::{ColumnMap, TraceFormat};
use dlsched::workload::synthetic::SyntheticSpec;

/// splitmix64: a tiny deterministic hash, so the inputs need no RNG state.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn policy_config(order: QueueOrder, backfill: bool) -> PolicyConfig {
    PolicyConfig { order, backfill, placement: PlacementKind::Consolidate }
}

const POLICIES: [(QueueOrder, bool); 4] =
    [(QueueOrder::Fifo, false), (QueueOrder::Sjf, false), (QueueOrder::Fifo, true), (QueueOrder::Sjf, true)];

fn policy_label(order: QueueOrder, backfill: bool) -> String {
    format!("{}{}", order.name(), if backfill { "+backfill" } else { "" })
}

// ---------------------------------------------------------------- event_queue

fn event_queue(c: &mut Criterion) {
    let mut group = c.benchmark_group("event_queue");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for n in [1_000u64, 100_000] {
        let instants = (n / 16).max(1);
        let events: Vec<(SimTime, Event)> = (0..n)
            .map(|i| {
                let t = SimTime::from_ms((mix(i) % instants) * 1000);
                (t, Event::Completion { job: JobId(i as u32), epoch: 0 })
            })
            .collect();
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::new("push_pop", n), &events, |b, events| {
            b.iter_batched(
                || EventQueue::<Event>::with_capacity(events.len()),
                |mut q| {
                    for &(t, e) in events {
                        q.push(t, e);
                    }
                    let mut acc = 0u64;
                    while let Some((t, e)) = q.pop() {
                        if let Event::Completion { job, .. } = e {
                            acc = acc.wrapping_add(t.as_ms() ^ u64::from(job.0));
                        }
                    }
                    black_box(acc);
                    q
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

// ------------------------------------------------------------ scheduling_pass

/// A cluster with about half of its GPUs held by jobs that are not in the
/// pending table (ids from `u32::MAX` down). Node `i` of `g` GPUs has
/// `(7 i) mod (g + 1)` GPUs held: every count from 0 to `g` in turn (7 is prime
/// to 3, 5 and 9), so the free GPUs are fragmented and average half a node.
fn half_busy(spec: ClusterSpec) -> Cluster {
    let mut c = Cluster::new(spec).expect("valid cluster");
    let mut gpus: Vec<GpuId> = Vec::new();
    for i in 0..c.num_nodes() {
        let node = dlsched::ids::NodeId(i as u32);
        let g = c.node(node).gpus;
        let held = (7 * i as u32) % (g + 1);
        if held == 0 {
            continue;
        }
        gpus.clear();
        gpus.extend(c.node_gpus(node).take(held as usize));
        c.allocate(JobId(u32::MAX - i as u32), c.node(node).vc, &gpus).expect("free GPUs");
    }
    c
}

/// `n` pending jobs of 1, 2, 4 or 8 GPUs (equally likely), submitted one second
/// apart, with durations from 1 minute to about 28 hours (so SJF's order differs
/// from FIFO's).
fn pending_jobs(n: usize) -> JobTable {
    const SIZES: [u32; 4] = [1, 2, 4, 8];
    let specs = (0..n)
        .map(|i| {
            let h = mix(i as u64 + 1_000_003);
            JobSpec {
                id: JobId(i as u32),
                name: format!("p{i}").into(),
                submit: SimTime::from_secs(i as u64),
                duration_ms: (60 + (h >> 8) % 100_000) * 1000,
                gpus: SIZES[(h % 4) as usize],
                vc: VcId(0),
                recorded_shape: false,
                line: 0,
                recorded_split: vec![SIZES[(h % 4) as usize]].into(),
                task: None,
                extra: None,
            }
        })
        .collect();
    JobTable::new(specs)
}

/// A fresh policy that has seen every job of `jobs` arrive.
fn filled_policy(cfg: PolicyConfig, cluster: &Cluster, jobs: &JobTable, now: SimTime) -> Box<dyn Policy> {
    let mut p = cfg.build(cluster.partitions().len()).expect("policy");
    let view = View { now, cluster, jobs };
    for s in jobs.specs() {
        p.on_arrival(s.id, &view);
    }
    p
}

/// One scheduling pass: decide until `Wait`, allocating every launch. Returns
/// the number of launches.
fn pass(policy: &mut dyn Policy, cluster: &mut Cluster, jobs: &JobTable, now: SimTime) -> u32 {
    let mut launches = 0;
    loop {
        let decision = policy.decide(&View { now, cluster, jobs });
        match decision {
            Decision::Wait => return launches,
            Decision::Launch { job, gpus } => {
                cluster.allocate(job, jobs.spec(job).vc, &gpus).expect("valid launch");
                launches += 1;
            }
            Decision::Colocate { job, gpus } => {
                let spec = jobs.spec(job);
                let milli = spec.gpu_milli().unwrap_or(0);
                cluster.allocate_tenant(job, spec.vc, &gpus, spec.gpu_mem_mib(), milli).expect("valid launch");
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

fn scheduling_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduling_pass");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let clusters = [
        ("16gpu", ClusterPreset::Lab16.spec()),
        ("512gpu", ClusterSpec::uniform("64x8", 64, 8, "V100", 16384)),
        ("2490gpu", ClusterPreset::Philly.spec()),
    ];
    for (cluster_name, spec) in clusters {
        let base = half_busy(spec);
        eprintln!(
            "scheduling_pass: cluster {cluster_name}: {} of {} GPUs held before the pass",
            u64::from(base.total_gpus()) - base.free_gpus(),
            base.total_gpus()
        );
        for n in [10usize, 100, 1_000, 10_000] {
            let jobs = pending_jobs(n);
            let now = SimTime::from_secs(n as u64);
            for (order, backfill) in POLICIES {
                let cfg = policy_config(order, backfill);
                // One untimed pass, to report how much work a pass does.
                let mut probe = base.clone();
                let launched = pass(filled_policy(cfg, &base, &jobs, now).as_mut(), &mut probe, &jobs, now);
                let id = format!("{}/{cluster_name}", policy_label(order, backfill));
                eprintln!("scheduling_pass/{id}/{n}: {launched} launches, {} GPUs free after", probe.free_gpus());
                group.bench_function(BenchmarkId::new(id, n), |b| {
                    b.iter_batched(
                        || (filled_policy(cfg, &base, &jobs, now), base.clone()),
                        |(mut policy, mut cluster)| {
                            let launched = pass(policy.as_mut(), &mut cluster, &jobs, now);
                            black_box(launched);
                            (policy, cluster)
                        },
                        BatchSize::LargeInput,
                    );
                });
            }
        }
    }
    group.finish();
}

// ------------------------------------------------------------------- replays

fn replay_synthetic_10k(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay_synthetic_10k");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for (order, backfill) in POLICIES {
        let spec = RunSpec {
            policy: policy_config(order, backfill).into(),
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Synthetic(SyntheticSpec {
                    jobs: 10_000,
                    jobs_per_hour: None,
                    load: 0.8,
                    max_job_gpus: None,
                    max_duration_s: None,
                }),
                ClusterChoice::Uniform { nodes: 64, gpus_per_node: 8, gpu_type: None },
            )
        };
        group.bench_function(policy_label(order, backfill), |b| {
            b.iter_batched(
                || spec.clone(),
                |spec| run_one(&spec, |_| {}).expect("synthetic run"),
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

fn replay_philly(c: &mut Criterion) {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    let rfold = shared.join("traces/philly/rfold_philly_jobs.csv");
    let helios = shared.join("fidelity/helios-philly");
    let (window, vcs) = (helios.join("philly_window_jobs.csv"), helios.join("vc_sizes.csv"));

    let mut runs: Vec<(&str, RunSpec)> = Vec::new();
    if rfold.is_file() {
        runs.push((
            "rfold_philly_fifo",
            RunSpec {
                sample_interval_ms: 0,
                ..RunSpec::new(
                    WorkloadSource::Trace {
                        path: rfold.clone(),
                        format: TraceFormat::Philly,
                        columns: ColumnMap::default(),
                    },
                    ClusterChoice::Preset { preset: ClusterPreset::Philly },
                )
            },
        ));
    } else {
        eprintln!(
            "replay_philly/rfold_philly_fifo: SKIPPED: {} not found (../shared holds the real traces)",
            rfold.display()
        );
    }
    if window.is_file() && vcs.is_file() {
        runs.push((
            "helios_window_fifo",
            RunSpec {
                sample_interval_ms: 0,
                ..RunSpec::new(
                    WorkloadSource::Trace {
                        path: window.clone(),
                        format: TraceFormat::JobsCsv,
                        columns: ColumnMap::default(),
                    },
                    ClusterChoice::VcFile { path: vcs.clone() },
                )
            },
        ));
    } else {
        eprintln!(
            "replay_philly/helios_window_fifo: SKIPPED: {} or {} not found (../shared holds the real traces)",
            window.display(),
            vcs.display()
        );
    }
    if runs.is_empty() {
        return;
    }

    let mut group = c.benchmark_group("replay_philly");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for (name, spec) in runs {
        group.bench_function(name, |b| {
            b.iter_batched(|| spec.clone(), |spec| run_one(&spec, |_| {}).expect("trace run"), BatchSize::PerIteration);
        });
    }
    group.finish();
}

criterion_group!(benches, event_queue, scheduling_pass, replay_synthetic_10k, replay_philly);
criterion_main!(benches);
