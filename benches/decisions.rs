//! Criterion benchmark of one scheduling decision of each registered policy
//! kind in [`KINDS`] against the number of jobs it orders (10, 100, 1,000,
//! 10,000), each policy built through the registry with its default options
//! (`{"kind": KIND}`), exactly as `--policy KIND` builds it.
//!
//! Input, for N: one partition of `max(1, N / 4)` nodes × 8 V100 (16 GiB),
//! trace speed, the Helios checkpoint table; N jobs submitted at t = 0, job
//! i asking for 2^(i mod 4) GPUs (1, 2, 4, 8: 3.75 on average, so the
//! demand is about twice the GPUs) for 1,000 + (i × 7,919 mod N) s. The
//! pass at t = 0 starts what fits and leaves the rest queued (about half).
//! The timed step is the simulation's next instant, whatever wakes the
//! policy first: for an event-driven policy (FIFO, SJF, SRTF) the first
//! completion at t = 1,000 s (job 0), whose pass orders the N − 1 others
//! and starts what fits; for a round-based policy its first round timer,
//! if it comes earlier, at which it re-plans the whole queue. The engine
//! applies every decision, as in a run. The simulation advanced through
//! t = 0 is built in the untimed setup (`iter_batched`) and dropped after
//! timing stops.
//!
//! A policy helper adds its kind to [`KINDS`] (one line, with a trailing
//! comment so that rustfmt keeps one kind per line); `cargo bench
//! --bench decisions -- KIND --quick` runs one kind.

use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, Simulation};
use dlsched::policy::registry::{Artefacts, BuildContext, PolicySpec};
use dlsched::profile::TraceSpeed;
use dlsched::profile::coloc::ProfileInterference;
use dlsched::profile::db::ProfileDb;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

/// The registry kinds benchmarked, each with its default options.
const KINDS: &[&str] = &[
    "fifo",             // queue.rs
    "sjf",              // queue.rs
    "srtf",             // srtf.rs
    "qssf",             // qssf.rs
    "las",              // las.rs
    "themis",           // themis.rs
    "dlas",             // tiresias.rs
    "dlas-gpu",         // tiresias.rs
    "tiresias-gittins", // tiresias.rs
    "gandiva",          // gandiva.rs
    "gavel",            // gavel.rs
    "gavel-fifo",       // gavel.rs
];

/// Queue lengths: the jobs in the system at the timed decision.
const SIZES: [u64; 4] = [10, 100, 1_000, 10_000];

/// The simulation of `kind` on the input of size `n`, after its t = 0 pass.
fn at_zero(kind: &str, n: u64, db: &Arc<ProfileDb>, artefacts: &Artefacts) -> Simulation {
    let nodes = (n / 4).max(1) as u32;
    let cluster = Cluster::new(ClusterSpec::uniform("bench", nodes, 8, "V100", 16384)).expect("cluster");
    let recs: Vec<TraceRecord> =
        (0..n).map(|i| TraceRecord::new(format!("j{i}"), 0, (1_000 + (i * 7_919) % n) * 1000, 1 << (i % 4))).collect();
    let spec: PolicySpec = serde_json::from_value(serde_json::json!({ "kind": kind })).expect("a registered kind");
    let w = build_workload(recs, &cluster, spec.placement().build());
    let mut ctx = BuildContext {
        cluster: &cluster,
        db: None,
        db_name: "builtin".into(),
        seed: 1,
        tasks: false,
        artefacts,
        extensions: Default::default(),
        // The run's rate model (trace speed), for policies that predict speeds.
        rate_model: &|| Box::new(TraceSpeed) as Box<dyn dlsched::profile::RateModel>,
        predictor: Default::default(),
    };
    let policy = spec.build(&mut ctx).expect("policy");
    // Kept with `..Default::default()` so that new engine options leave it alone.
    #[allow(clippy::needless_update)]
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim = Simulation::new(cluster, w.jobs, policy, Box::new(TraceSpeed), cfg)
        .with_checkpoint(CheckpointModel::HeliosTable)
        .with_interference(Box::new(ProfileInterference::new(db.clone())));
    sim.step().expect("t = 0");
    sim
}

fn decisions(c: &mut Criterion) {
    let db = Arc::new(ProfileDb::builtin());
    let artefacts = Artefacts::default();
    let mut group = c.benchmark_group("decision");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for &kind in KINDS {
        for n in SIZES {
            group.bench_with_input(BenchmarkId::new(kind, n), &n, |b, &n| {
                b.iter_batched(
                    || at_zero(kind, n, &db, &artefacts),
                    |mut sim| {
                        sim.step().expect("the next instant");
                        sim
                    },
                    BatchSize::LargeInput,
                );
            });
        }
    }
    group.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
