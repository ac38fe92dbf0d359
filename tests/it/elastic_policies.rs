//! `tiresias-tuned` and `optimus` on hand-computed schedules: 2 nodes × 4
//! GPUs, a few work-defined jobs, the exact allocations at the first ticks
//! (the Pollux simulator's rules, worked by hand in the comments).

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::Observer;
use dlsched::engine::{EngineConfig, Simulation, Snapshot};
use dlsched::error::SimError;
use dlsched::ids::{GpuId, JobId};
use dlsched::job::{BatchLimits, JobSpec, JobTable};
use dlsched::policy::Policy;
use dlsched::policy::optimus::{Optimus, OptimusOptions, predict_step_time};
use dlsched::policy::tiresias_tuned::{TiresiasTuned, TiresiasTunedOptions};
use dlsched::profile::TraceSpeed;
use dlsched::profile::elastic::{ElasticConfig, ProgressModel};
use dlsched::time::SimTime;

use crate::common::elastic_sim;

/// Jobs never finish (target 1e9 at goodput 1); per application `a`, `b`,
/// `c`: step time `k × atomic batch + 0.1` s, sync 0.1 s, with `k` = 0.01,
/// 0.01, 0.02 s per sample; remaining steps 1,000, 2,000, 400 whatever the
/// progress; batch limits: max per GPU 64, least per GPU 16, max total 1,024.
struct Toy;

impl Toy {
    fn k(app: &str) -> f64 {
        if app == "c" { 0.02 } else { 0.01 }
    }
}

impl ProgressModel for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }
    fn target(&self, _app: &str) -> Result<f64, String> {
        Ok(1e9)
    }
    fn goodput(&self, _app: &str, _cfg: &ElasticConfig, _progress: f64) -> Result<f64, String> {
        Ok(1.0)
    }
    fn next_breakpoint(&self, _app: &str, _progress: f64) -> f64 {
        1e9
    }
    fn step_times(&self, app: &str, cfg: &ElasticConfig) -> Result<(f64, f64), String> {
        Ok((Toy::k(app) * f64::from(cfg.atomic_bsz) + 0.1, 0.1))
    }
    fn remaining_steps(&self, app: &str, _batch: u64, _progress: f64) -> Result<f64, String> {
        Ok(match app {
            "b" => 2000.0,
            "c" => 400.0,
            _ => 1000.0,
        })
    }
    fn batch_limits(&self, _app: &str) -> Option<BatchLimits> {
        Some(BatchLimits { init_batch: 64, max_batch: 1024, min_local: 16, max_local: 64 })
    }
}

/// A work-defined job, not adaptive (the policies run it at its tuned batch).
fn job(name: &str, app: &str, submit_s: u64, gpus: u32, batch: u32) -> JobSpec {
    crate::common::elastic_job(name, app, submit_s, gpus, batch, false)
}

/// Allocations and releases: (s, job index, "+" or "-", GPUs).
#[derive(Default)]
struct Log(Vec<(u64, u32, &'static str, Vec<u32>)>);

impl Observer for Log {
    fn on_allocate(&mut self, at: &Snapshot<'_>, job: JobId, gpus: &[GpuId], _speed: f64) {
        self.0.push((at.now.as_ms() / 1000, job.0, "+", gpus.iter().map(|g| g.0).collect()));
    }
    fn on_release(&mut self, at: &Snapshot<'_>, job: JobId, gpus: &[GpuId]) {
        self.0.push((at.now.as_ms() / 1000, job.0, "-", gpus.iter().map(|g| g.0).collect()));
    }
}

fn run(jobs: Vec<JobSpec>, policy: Box<dyn Policy>, horizon_s: u64) -> Log {
    let c = Cluster::new(ClusterSpec::uniform("t", 2, 4, "T4", 16_000)).unwrap();
    let sim = elastic_sim(c, jobs, policy, Box::new(Toy)).with_horizon(SimTime::from_secs(horizon_s));
    let mut log = Log::default();
    sim.run_observed(&mut log, |_| {}).unwrap();
    log
}

#[test]
fn tiresias_tuned_ticks_demotes_preempts_and_places_on_the_most_free_node() {
    // Threshold 480 GPU-s. A: 4 GPUs at 0 s; B: 2 GPUs at 10 s; C: 4 GPUs at 70 s.
    let jobs = vec![job("A", "a", 0, 4, 64), job("B", "a", 10, 2, 64), job("C", "a", 70, 4, 64)];
    let opts = TiresiasTunedOptions { threshold_gpu_s: 480, ..Default::default() };
    let log = run(jobs, Box::new(TiresiasTuned::new(opts)), 330);
    let want: Vec<(u64, u32, &str, Vec<u32>)> = vec![
        // 60 s, the first tick: Q0 = [A, B]; both fit (8 − 4 − 2). A takes
        // node 0 (free 4, 4: the first of the tie), B node 1 (4 > 0).
        (60, 0, "+", vec![0, 1, 2, 3]),
        (60, 1, "+", vec![4, 5]),
        // 120 s: C joins Q0 but needs 4 of the 2 left: pending. A's
        // executed time is 60 s × 4 = 240 < 480 GPU-s: no change.
        // 180 s: A 120 s × 4 = 480 ≥ 480: A to Q1. Q0 = [B, C], Q1 = [A]:
        // B (6 left), C (2 left), A (4 > 2) pending: preempted; C takes node 0
        // (4 free against node 1's 2).
        (180, 0, "-", vec![0, 1, 2, 3]),
        (180, 2, "+", vec![0, 1, 2, 3]),
        // 240 s: B 180 × 2 = 360, C 60 × 4 = 240: no change.
        // 300 s: B 240 × 2 = 480 and C 120 × 4 = 480 reach the threshold, in
        // job order: Q0 = [], Q1 = [A, B, C]. A (4 left), B (2 left), C (4 >
        // 2) pending: C preempted, A resumes on node 0 (4 free against 2).
        (300, 2, "-", vec![0, 1, 2, 3]),
        (300, 0, "+", vec![0, 1, 2, 3]),
    ];
    assert_eq!(log.0, want);
}

#[test]
fn optimus_predicts_step_times_by_the_simulators_rule() {
    // Tuned batch 64, max 64 per GPU. r = 1: l = 64, accumulation
    // max(1, ceil(64/64) − 1) = 1, atomic 32: step 0.01 × 32 + 0.1 = 0.42,
    // T = 0.42 + 1 × (0.42 − 0.1) = 0.74. r = 2: atomic 32, T = 0.42. r = 3:
    // l = ceil(21.33) = 22, T = 0.32. r = 4: 16, T = 0.26.
    let t: Vec<f64> = (1..=4).map(|r| predict_step_time(&Toy, "a", 64, r).unwrap()).collect();
    for (got, want) in t.iter().zip([0.74, 0.42, 0.32, 0.26]) {
        assert!((got - want).abs() < 1e-12, "{t:?}");
    }
    // Atomic batch capped at floor(1024 / (r (a + 1))): batch 4096 on 1 GPU,
    // l = 4096, a = 63, atomic 64, cap floor(1024 / 64) = 16: step 0.26,
    // T = 0.26 + 63 × 0.16 = 10.34.
    assert!((predict_step_time(&Toy, "a", 4096, 1).unwrap() - 10.34).abs() < 1e-9);
}

#[test]
fn optimus_gives_gpus_by_marginal_gain_and_keeps_unchanged_allocations() {
    // Tuned batch 64 (at most 64 / 16 = 4 GPUs each). Step times (s) on
    // 1..4 GPUs: apps a, b: 0.74, 0.42, 0.32, 0.26 (gains per step 0.32,
    // 0.10, 0.06); app c (k = 0.02): 1.38, 0.74, 0.54, 0.42 (0.64, 0.20,
    // 0.12). Gains = saving × remaining: a 320, 100, 60; b (2,000 steps)
    // 640, 200, 120; c (400 steps) 256, 80, 48.
    let jobs =
        vec![job("a", "a", 0, 1, 64), job("b", "b", 5, 1, 64), job("c", "c", 10, 1, 64), job("d", "a", 70, 1, 64)];
    let log = run(jobs, Box::new(Optimus::new(OptimusOptions::default())), 150);
    let want: Vec<(u64, u32, &str, Vec<u32>)> = vec![
        // 60 s: a, b, c one GPU each, 5 left. Greedy: b 640 (b 2 GPUs, gain
        // 200), a 320 (a 2, 100), c 256 (c 2, 80), b 200 (b 3, 120), b 120
        // (b 4; 5 > 4 GPUs: gain 0). a 2, b 4, c 2. Placed by GPU count,
        // then job order: a (free 4, 4: node 0), c (node 1: 4 > 2), b (node 0's
        // 2, then node 1's 2).
        (60, 0, "+", vec![0, 1]),
        (60, 2, "+", vec![4, 5]),
        (60, 1, "+", vec![2, 3, 6, 7]),
        // 120 s: d joins; one GPU each, 4 left; gains a 320, b 640, c 256,
        // d 320. b 640 (b 2, 200), a 320 (first of the tie with d; a 2,
        // 100), d 320 (d 2, 100), c 256 (c 2). a and c keep their GPUs;
        // b (4 → 2) moves: free are b's 2 on node 0 and 2 on node 1, the
        // tie goes to node 0, where b keeps its own; d takes node 1's.
        (120, 1, "-", vec![2, 3, 6, 7]),
        (120, 1, "+", vec![2, 3]),
        (120, 3, "+", vec![6, 7]),
    ];
    assert_eq!(log.0, want);
}

#[test]
fn optimus_refuses_a_duration_defined_job_naming_it() {
    let mut rigid = job("rigid-7", "a", 0, 1, 64);
    rigid.extra = None;
    let c = Cluster::new(ClusterSpec::uniform("t", 2, 4, "T4", 16_000)).unwrap();
    let sim = Simulation::new(
        c,
        JobTable::new(vec![rigid]),
        Box::new(Optimus::new(OptimusOptions::default())),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    );
    let Err(err) = sim.run() else { panic!("a duration-defined job under optimus ran") };
    assert!(matches!(err, SimError::InvalidDecision { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("optimus") && msg.contains("rigid-7") && msg.contains("work-defined"), "{msg}");
}
