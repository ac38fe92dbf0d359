//! Helpers shared by the integration tests.

use std::path::PathBuf;

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, RunOutput, Simulation};
use dlsched::ids::{JobId, VcId};
use dlsched::job::{ElasticSpec, JobSpec, JobState, JobTable};
use dlsched::policy::{Policy, config::PolicyConfig, placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::TraceSpeed;
use dlsched::profile::elastic::ProgressModel;
use dlsched::time::SimTime;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

/// `../shared` beside the checkout, or `None` after printing why the caller skips.
pub fn shared(what: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIP {what}: ../shared is absent (it holds the real traces; CI has it)");
        None
    }
}

/// Runs the `dlsched` binary built for these tests with `args`.
pub fn dlsched(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dlsched")).args(args).output().unwrap()
}

/// A job record: id, submit (s), GPUs, duration (s).
pub fn rec(id: &str, submit_s: u64, gpus: u32, duration_s: u64) -> TraceRecord {
    TraceRecord::new(id, submit_s * 1000, duration_s * 1000, gpus)
}

/// A work-defined job `name` of application `app`, submitted at `submit_s`
/// (s), tuned to `gpus` GPUs (on one node as recorded) and a total batch of
/// `tuned_bsz` samples; `adaptive`: a policy may change its batch. Its
/// duration (1 s) is unused; `JobTable::new` assigns its id.
pub fn elastic_job(name: &str, app: &str, submit_s: u64, gpus: u32, tuned_bsz: u32, adaptive: bool) -> JobSpec {
    JobSpec {
        id: JobId(0),
        name: name.into(),
        submit: SimTime::from_secs(submit_s),
        duration_ms: 1000,
        gpus,
        vc: VcId(0),
        recorded_shape: false,
        line: 0,
        recorded_split: vec![gpus].into(),
        task: None,
        extra: None,
    }
    .with_extra(|e| {
        e.elastic = Some(ElasticSpec {
            app: app.into(),
            tuned_gpus: gpus,
            tuned_bsz,
            adaptive,
            work: None,
            sample_budget: None,
        })
    })
}

/// A simulation of `jobs` on `cluster` under `policy` at trace speed, its
/// work-defined jobs progressing by `model`, with no timeline samples and the
/// engine's invariants checked after every event.
pub fn elastic_sim(
    cluster: Cluster,
    jobs: Vec<JobSpec>,
    policy: Box<dyn Policy>,
    model: Box<dyn ProgressModel>,
) -> Simulation {
    Simulation::new(
        cluster,
        JobTable::new(jobs),
        policy,
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .with_progress_model(model)
    .with_invariant_checks(true)
}

/// The co-location model of the builtin profile database, which a test that
/// co-locates jobs hands to the engine (`Simulation::with_interference`).
pub fn builtin_interference() -> Box<dyn dlsched::profile::coloc::Interference> {
    Box::new(dlsched::profile::coloc::ProfileInterference::new(std::sync::Arc::new(
        dlsched::profile::db::ProfileDb::builtin(),
    )))
}

/// A policy config.
pub fn policy(order: QueueOrder, backfill: bool, placement: PlacementKind) -> PolicyConfig {
    PolicyConfig { order, backfill, placement }
}

/// Runs records on a cluster under a policy at trace speed.
pub fn run(records: Vec<TraceRecord>, spec: ClusterSpec, p: PolicyConfig) -> RunOutput {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, p.placement.build());
    let policy = p.build(cluster.partitions().len()).unwrap();
    Simulation::new(
        cluster,
        w.jobs,
        policy,
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .run()
    .unwrap()
}

/// Runs moldable tasks (id, submit s, trace duration s, task spec) on a
/// cluster under `policy` at trace speed, checking the engine's invariants
/// after every instant.
pub fn run_tasks_checked(
    spec: ClusterSpec,
    tasks: Vec<(&str, u64, u64, dlsched::job::TaskSpec)>,
    policy: Box<dyn dlsched::policy::Policy>,
) -> RunOutput {
    let cluster = Cluster::new(spec).unwrap();
    let recs = tasks.iter().map(|(id, s, d, _)| rec(id, *s, 1, *d)).collect();
    let mut w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    let mut map: std::collections::HashMap<String, dlsched::job::TaskSpec> =
        tasks.into_iter().map(|(id, _, _, t)| (id.to_string(), t)).collect();
    w.jobs.attach_tasks(&mut map);
    let mut sim = Simulation::new(
        cluster,
        w.jobs,
        policy,
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    );
    while sim.step().unwrap().is_some() {
        sim.check_invariants().unwrap();
    }
    sim.finish()
}

/// (job id, start s, end s) of every job, in job order; panics on an unfinished job.
pub fn schedule(out: &RunOutput) -> Vec<(String, u64, u64)> {
    out.jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => (s.name.to_string(), d.start.as_ms() / 1000, d.end.as_ms() / 1000),
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect()
}

/// Owned `(id, start, end)` triples from a literal table.
pub fn expect(rows: &[(&str, u64, u64)]) -> Vec<(String, u64, u64)> {
    rows.iter().map(|&(n, s, e)| (n.to_string(), s, e)).collect()
}

/// 150 seeded synthetic jobs (load 1.5) for `cluster`, every third in VC `b`
/// and the rest in VC `a`, so both partitions of a two-VC cluster are used:
/// the workload of the seeded invariant checks.
pub fn seeded_two_vc_records(cluster: &Cluster, seed: u64) -> Vec<TraceRecord> {
    use dlsched::workload::synthetic::{SyntheticSpec, generate};
    let max = cluster.partitions().iter().map(|p| p.gpus_total).max().unwrap();
    let syn = SyntheticSpec { jobs: 150, jobs_per_hour: None, load: 1.5, max_job_gpus: None, max_duration_s: None };
    let mut recs = generate(&syn, cluster.total_gpus(), max, seed).unwrap();
    for (i, r) in recs.iter_mut().enumerate() {
        r.extra_mut().vc = Some(if i % 3 == 0 { "b" } else { "a" }.to_string());
    }
    recs
}

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): a stateless mix, so a
/// test's random inputs need no RNG state.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
