//! Sia (`dlsched::policy::sia`) on a cluster of two GPU types, with a toy
//! progress model whose speeds are known by hand.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{Observer, Snapshot};
use dlsched::ids::{GpuId, JobId};
use dlsched::job::{BatchLimits, JobState};
use dlsched::policy::sia::{Sia, SiaOptions};
use dlsched::profile::elastic::{ElasticConfig, ProgressModel};

use crate::common::{elastic_job, elastic_sim};

/// Goodput = GPUs × 1 progress unit/s on type 0 (T4), × the field on type
/// 1 (A100; 2 in most tests); target 1,200 units; step time `0.01 × atomic
/// batch / speed`, sync a tenth of it; batch limits: per GPU 16 to 64,
/// total up to 1,024.
struct TwoTypes(f64);

impl TwoTypes {
    fn speed(&self, cfg: &ElasticConfig) -> f64 {
        if cfg.gpu_type == 1 { self.0 } else { 1.0 }
    }
}

impl ProgressModel for TwoTypes {
    fn name(&self) -> &'static str {
        "two-types"
    }
    fn target(&self, _app: &str) -> Result<f64, String> {
        Ok(1200.0)
    }
    fn goodput(&self, _app: &str, cfg: &ElasticConfig, _progress: f64) -> Result<f64, String> {
        Ok(f64::from(cfg.replicas()) * self.speed(cfg))
    }
    fn next_breakpoint(&self, _app: &str, _progress: f64) -> f64 {
        1200.0
    }
    fn step_times(&self, _app: &str, cfg: &ElasticConfig) -> Result<(f64, f64), String> {
        let step = 0.01 * f64::from(cfg.atomic_bsz) / self.speed(cfg);
        Ok((step, step / 10.0))
    }
    fn grad_stats(&self, _app: &str, _batch: u64, _progress: f64) -> Result<(f64, f64), String> {
        Ok((1.0, 0.0))
    }
    fn batch_limits(&self, _app: &str) -> Option<BatchLimits> {
        Some(BatchLimits { init_batch: 64, max_batch: 1024, min_local: 16, max_local: 64 })
    }
}

/// Node 0: 4 T4 GPUs (GPUs 0-3); node 1: 4 A100 GPUs (GPUs 4-7).
fn two_types() -> Cluster {
    let mut spec = ClusterSpec::uniform("two-types", 2, 4, "T4", 16 * 1024);
    spec.nodes[1].gpu_type = "A100".into();
    Cluster::new(spec).unwrap()
}

#[test]
fn rigid_jobs_go_to_the_faster_type_and_finish_when_computed_by_hand() {
    // Two rigid (not adaptive) 1-GPU jobs at t = 0. Sia's goodput of a
    // rigid job on a type is its throughput there, scaled so the slowest
    // type gives its GPUs: T4 1, A100 2; A = G^-0.5 = 1 and 0.71, so with
    // λ_n = 1.1 each job is worth −0.1 on a T4 and −0.39 on an A100, and
    // the A100 node holds both. First round at 60 s, then the 30-s re-scale
    // delay, then 1,200 units at 2 units/s: complete at 60 + 30 + 600 = 690 s.
    let jobs = vec![elastic_job("a", "x", 0, 1, 64, false), elastic_job("b", "x", 0, 1, 64, false)];
    let sim = elastic_sim(two_types(), jobs, Box::new(Sia::new(SiaOptions::default())), Box::new(TwoTypes(2.0)));
    let mut log = Allocations::default();
    let out = sim.run_observed(&mut log, |_| {}).unwrap();
    for j in 0..2 {
        let JobState::Completed(d) = out.jobs.state(JobId(j)) else { panic!("job {j} did not complete") };
        assert_eq!(d.end.as_ms(), 690_000, "job {j}");
        assert_eq!(d.start.as_ms(), 60_000, "job {j}");
    }
    assert_eq!(log.0.len(), 2, "one allocation each: {:?}", log.0);
    for (job, gpus) in &log.0 {
        assert!(gpus.iter().all(|&g| g >= 4), "job {job} ran on {gpus:?}, not the A100 node");
    }
}

#[test]
fn the_type_blind_control_sees_the_types_as_equally_fast() {
    // Three rigid 1-GPU jobs at t = 0 on two types, type 1 (GPUs 4-7) at
    // half type 0's speed here. `type-aware=false` rates a rigid job as on
    // its slowest type everywhere, so its program must decide as Sia's own
    // does when both types are equally fast (an independent route to the
    // same rows and the same solver), where ties go to type 1; Sia itself
    // puts all three on type 0.
    let jobs = || (0..3).map(|i| elastic_job(&format!("j{i}"), "x", 0, 1, 64, false)).collect::<Vec<_>>();
    let run = |opts: SiaOptions, type1: f64| {
        let sim = elastic_sim(two_types(), jobs(), Box::new(Sia::new(opts)), Box::new(TwoTypes(type1)));
        let mut log = Allocations::default();
        let out = sim.run_observed(&mut log, |_| {}).unwrap();
        (log.0, out)
    };
    let blind = SiaOptions { type_aware: false, ..SiaOptions::default() };
    let (aware_log, _) = run(SiaOptions::default(), 0.5);
    let (equal_log, _) = run(SiaOptions::default(), 1.0);
    let (blind_log, out) = run(blind, 0.5);
    assert!(aware_log.iter().all(|(_, g)| g.iter().all(|&g| g < 4)), "Sia: all on type 0, {aware_log:?}");
    assert_eq!(blind_log, equal_log, "the blind program decides as on equally fast types");
    assert!(blind_log.iter().any(|(_, g)| g.iter().all(|&g| g >= 4)), "blind: some job on type 1, {blind_log:?}");
    // One allocation each at 60 s, the 30-s re-scale delay, then 1,200
    // units at 1 unit/s on type 0 (end 1,290 s) or 0.5 on type 1 (2,490 s).
    assert_eq!(blind_log.len(), 3);
    for (job, gpus) in &blind_log {
        let JobState::Completed(d) = out.jobs.state(JobId(*job)) else { panic!("job {job} did not complete") };
        let want = if gpus[0] >= 4 { 2_490_000 } else { 1_290_000 };
        assert_eq!((d.start.as_ms(), d.end.as_ms()), (60_000, want), "job {job} on {gpus:?}");
    }
}

/// Every allocation: (job index, GPUs).
#[derive(Default)]
struct Allocations(Vec<(u32, Vec<u32>)>);

impl Observer for Allocations {
    fn on_allocate(&mut self, _at: &Snapshot<'_>, job: JobId, gpus: &[GpuId], _speed: f64) {
        self.0.push((job.0, gpus.iter().map(|g| g.0).collect()));
    }
}

#[test]
fn sia_runs_the_pollux_workloads_deterministically() {
    let Some(shared) = crate::common::shared("sia_runs_the_pollux_workloads_deterministically") else { return };
    let trace = shared.join("traces/pollux-workloads/workload-2.csv");
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &str| {
        let out = dir.path().join(out);
        crate::common::dlsched(&[
            "simulate",
            "--cluster",
            "pollux",
            "--policy",
            "sia",
            "--trace",
            trace.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let (a, b) = (run("a"), run("b"));
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let read = |d: &str| std::fs::read(dir.path().join(d).join("jobs.csv")).unwrap();
    assert_eq!(read("a"), read("b"));
    let jobs = String::from_utf8(read("a")).unwrap();
    assert_eq!(jobs.lines().filter(|l| l.contains(",completed,")).count(), 160);
    let timing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("a").join("timing.json")).unwrap()).unwrap();
    assert!(timing["solver_rounds"].as_u64().unwrap() > 0);
    assert_eq!(timing["rounds"].as_array().unwrap().len() as u64, timing["solver_rounds"].as_u64().unwrap());
}

/// Goodput = GPUs × 1 unit/s on either type, target 120,000 units (long
/// enough for Pollux to scale a job out); step times and limits as
/// [`TwoTypes`] on a T4. Both types equally fast: nothing but a repair
/// keeps a job that scales out past 4 GPUs off the other node's type.
struct LongSameSpeed;

impl ProgressModel for LongSameSpeed {
    fn name(&self) -> &'static str {
        "long-same-speed"
    }
    fn target(&self, _app: &str) -> Result<f64, String> {
        Ok(120_000.0)
    }
    fn goodput(&self, _app: &str, cfg: &ElasticConfig, _progress: f64) -> Result<f64, String> {
        Ok(f64::from(cfg.replicas()))
    }
    fn next_breakpoint(&self, _app: &str, _progress: f64) -> f64 {
        120_000.0
    }
    fn step_times(&self, _app: &str, cfg: &ElasticConfig) -> Result<(f64, f64), String> {
        let step = 0.01 * f64::from(cfg.atomic_bsz);
        Ok((step, step / 10.0))
    }
    /// Gradient noise only: a larger batch loses no statistical efficiency.
    fn grad_stats(&self, _app: &str, _batch: u64, _progress: f64) -> Result<(f64, f64), String> {
        Ok((1e-3, 1.0))
    }
    fn batch_limits(&self, app: &str) -> Option<BatchLimits> {
        TwoTypes(2.0).batch_limits(app)
    }
}

#[test]
fn pollux_on_a_cluster_of_two_types_never_gives_a_job_gpus_of_both() {
    // Pollux's search does not know GPU types; the Sia artifact repairs its
    // choice by keeping each job's majority type (`dlsched::policy::pollux`,
    // rule 8). One adaptive job alone on 4 T4 + 4 A100 GPUs: it scales
    // out, and the toy model rates any placement, so only the repair keeps
    // it on one type.
    let jobs = vec![elastic_job("a", "x", 0, 1, 64, true)];
    let policy = dlsched::policy::pollux::Pollux::new(
        dlsched::policy::pollux::PolluxOptions::default(),
        dlsched::rng::stream(1, "pollux"),
    );
    let sim = elastic_sim(two_types(), jobs, Box::new(policy), Box::new(LongSameSpeed));
    let mut log = Allocations::default();
    let out = sim.run_observed(&mut log, |_| {}).unwrap();
    assert!(matches!(out.jobs.state(JobId(0)), JobState::Completed(_)), "the job did not complete");
    assert!(log.0.iter().any(|(_, g)| g.len() > 1), "the job scales out: {:?}", log.0);
    for (job, gpus) in &log.0 {
        let t4 = gpus.iter().filter(|&&g| g < 4).count();
        assert!(t4 == 0 || t4 == gpus.len(), "job {job} got T4 and A100 GPUs: {gpus:?}");
    }
}

#[test]
fn pollux_runs_a_sia_workload_on_the_sia_cluster() {
    // The Sia model refuses a job on GPUs of several types and a local
    // batch outside a placement's measurements, so a completed run shows
    // Pollux's type repair and its per-placement batch caps at work.
    let Some(shared) = crate::common::shared("pollux_runs_a_sia_workload_on_the_sia_cluster") else { return };
    let trace = shared.join("traces/sia-workloads/saturn/workload-1.csv");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = crate::common::dlsched(&[
        "simulate",
        "--cluster",
        "sia",
        "--policy",
        "pollux",
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let jobs = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    assert_eq!(jobs.lines().filter(|l| l.contains(",completed,")).count(), 160);
    // The search, unaware of types, did choose rows that span them.
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let repairs = summary["policy_metrics"]["pollux_type_repairs"].as_f64().unwrap();
    let idle = summary["policy_metrics"]["pollux_type_repair_idle_gpus"].as_f64().unwrap();
    assert!(repairs > 0.0 && idle >= repairs, "repairs {repairs}, idle GPUs {idle}");
}

#[test]
fn pollux_on_virtual_nodes_scales_a_job_out_on_one_type_deterministically() {
    // As the two-type test, with the search on virtual nodes of 2 GPUs
    // (`vnode-gpus`, the Sia artifact's unaware cluster): the job still
    // scales out, every allocation is GPUs of one node type, and the run
    // is the same twice.
    let run = || {
        let jobs = vec![elastic_job("a", "x", 0, 1, 64, true)];
        let opts = dlsched::policy::pollux::PolluxOptions { vnode_gpus: 2, ..Default::default() };
        let policy = dlsched::policy::pollux::Pollux::new(opts, dlsched::rng::stream(1, "pollux"));
        let sim = elastic_sim(two_types(), jobs, Box::new(policy), Box::new(LongSameSpeed));
        let mut log = Allocations::default();
        let out = sim.run_observed(&mut log, |_| {}).unwrap();
        assert!(matches!(out.jobs.state(JobId(0)), JobState::Completed(_)), "the job did not complete");
        log.0
    };
    let log = run();
    assert!(log.iter().any(|(_, g)| g.len() > 1), "the job scales out: {log:?}");
    for (job, gpus) in &log {
        let t4 = gpus.iter().filter(|&&g| g < 4).count();
        assert!(t4 == 0 || t4 == gpus.len(), "job {job} got T4 and A100 GPUs: {gpus:?}");
    }
    assert_eq!(log, run());
}
