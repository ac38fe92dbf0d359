//! Criterion benchmark of one SRTF scheduling pass against the number of
//! running plus pending jobs (10, 100, 1,000, 10,000), for the default
//! semantics and the Helios reference options.
//!
//! Input: one partition of `max(1, N / 16)` nodes × 8 GPUs; N 1-GPU jobs
//! submitted at t = 0 with durations 1,000 + (i × 7,919 mod N) s, so the
//! pass at t = 0 starts as many as there are GPUs (about half) and leaves the
//! rest pending, their remaining work interleaved with the running jobs'.
//! The timed step is the instant t = 1 s: one more 1-GPU job of 1 s arrives,
//! and the pass ranks all N + 1 jobs, preempts the lowest-ranked running job
//! for it and starts it (the engine applies each decision, as in a run).
//! The simulation advanced to t = 0 is built in the untimed setup closure
//! (`iter_batched`), and dropped after timing stops.

use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, Simulation};
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::srtf::{self, SrtfOptions};
use dlsched::profile::TraceSpeed;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

/// The simulation after its t = 0 pass, the t = 1 arrival still to come.
fn at_zero(n: u64, opts: SrtfOptions) -> Simulation {
    let nodes = (n / 16).max(1) as u32;
    let cluster = Cluster::new(ClusterSpec::uniform("bench", nodes, 8, "V100", 16384)).expect("cluster");
    let mut recs: Vec<TraceRecord> =
        (0..n).map(|i| TraceRecord::new(format!("j{i}"), 0, (1_000 + (i * 7_919) % n) * 1000, 1)).collect();
    recs.push(TraceRecord::new("late", 1_000, 1_000, 1));
    let w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    let policy = srtf::build(&opts, 1).expect("srtf");
    // Kept with `..Default::default()` so that new engine options leave it alone.
    #[allow(clippy::needless_update)]
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim = Simulation::new(cluster, w.jobs, policy, Box::new(TraceSpeed), cfg)
        .with_checkpoint(CheckpointModel::HeliosTable);
    sim.step().expect("t = 0");
    sim
}

fn srtf_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("srtf_pass");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for (mode, opts) in [("default", SrtfOptions::default()), ("helios", SrtfOptions::helios())] {
        for n in [10u64, 100, 1_000, 10_000] {
            group.bench_with_input(BenchmarkId::new(mode, n), &n, |b, &n| {
                b.iter_batched(
                    || at_zero(n, opts),
                    |mut sim| {
                        sim.step().expect("t = 1");
                        sim
                    },
                    BatchSize::LargeInput,
                );
            });
        }
    }
    group.finish();
}

criterion_group!(benches, srtf_pass);
criterion_main!(benches);
