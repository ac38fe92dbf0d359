//! Work-defined jobs in the engine: progress between breakpoints, resizes
//! with the re-scale delay, preemption, restarts, with a hand-computable
//! progress model; and a seeded random policy under invariant checks.

use std::sync::{Arc, Mutex};

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, RunOutput, Simulation};
use dlsched::error::SimError;
use dlsched::ids::{GpuId, JobId};
use dlsched::job::{JobSpec, JobState, JobTable};
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::TraceSpeed;
use dlsched::profile::elastic::{ElasticConfig, ProgressModel};
use dlsched::time::SimTime;

use crate::common::elastic_sim as sim;

/// A model with target 100 and breakpoints at 20 and 60: goodput =
/// replicas × atomic batch / 32 × (1, 0.5, 0.25) units/s below 20, below
/// 60, from 60 on. Accumulation steps are ignored.
struct TwoBreaks;

impl ProgressModel for TwoBreaks {
    fn name(&self) -> &'static str {
        "two-breaks"
    }
    fn target(&self, app: &str) -> Result<f64, String> {
        if app == "toy" { Ok(100.0) } else { Err(format!("unknown application `{app}`")) }
    }
    fn goodput(&self, _app: &str, cfg: &ElasticConfig, progress: f64) -> Result<f64, String> {
        let seg = if progress < 20.0 {
            1.0
        } else if progress < 60.0 {
            0.5
        } else {
            0.25
        };
        Ok(f64::from(cfg.replicas()) * f64::from(cfg.atomic_bsz) / 32.0 * seg)
    }
    fn next_breakpoint(&self, _app: &str, progress: f64) -> f64 {
        [20.0, 60.0, 100.0].into_iter().find(|&b| b > progress).unwrap_or(100.0)
    }
}

/// [`TwoBreaks`] with step times: every atomic step takes 0.5 s, of which
/// 0.1 s synchronises, whatever the configuration; an optimiser step with
/// `a` accumulation steps takes 0.5 + 0.4 a s. A job on 1 GPU at batch 32
/// processes 64 samples/s.
struct Stepped;

impl ProgressModel for Stepped {
    fn name(&self) -> &'static str {
        "stepped"
    }
    fn target(&self, app: &str) -> Result<f64, String> {
        TwoBreaks.target(app)
    }
    fn goodput(&self, app: &str, cfg: &ElasticConfig, progress: f64) -> Result<f64, String> {
        TwoBreaks.goodput(app, cfg, progress)
    }
    fn next_breakpoint(&self, app: &str, progress: f64) -> f64 {
        TwoBreaks.next_breakpoint(app, progress)
    }
    fn step_times(&self, _app: &str, _cfg: &ElasticConfig) -> Result<(f64, f64), String> {
        Ok((0.5, 0.1))
    }
}

/// [`elastic_job`] with a sample budget, samples.
fn budget_job(name: &str, submit_s: u64, gpus: u32, budget: u64) -> JobSpec {
    let mut j = elastic_job(name, submit_s, gpus);
    j.extra_mut().elastic.as_mut().unwrap().sample_budget = Some(budget);
    j
}

#[test]
fn a_sample_budget_ends_a_job_at_budget_over_its_sample_rate_after_the_delay() {
    // 1 GPU, batch 32, step 0.5 s: 64 samples/s from 30 s (the delay).
    // Budget 3,840 = 60 s of samples: ends at 90 s. Progress then: 20 at
    // 50 s (1/s), + 0.5/s × 40 s = 40, below the target 100 (which it
    // would reach at 290 s). Events: the breakpoint at 50 s and the end.
    let out = sim(cluster(1, 4), vec![budget_job("a", 0, 1, 3840)], fifo(), Box::new(Stepped)).run().unwrap();
    let d = done(&out, 0);
    assert_eq!((d.start, d.end), (SimTime::ZERO, SimTime::from_secs(90)));
    assert_eq!(out.stats.breakpoints, 2);
    // A quotient that is not whole: 100 samples at 64/s = 1,562.5 ms, so
    // done at the first whole ms after it: 30 s + 1,563 ms.
    let out = sim(cluster(1, 4), vec![budget_job("a", 0, 1, 100)], fifo(), Box::new(Stepped)).run().unwrap();
    assert_eq!(done(&out, 0).end, SimTime::from_ms(31_563));
    // On 2 GPUs (tuned batch 64, 32 per GPU): 128 samples/s: 3,840 in 30 s,
    // at 60 s; without the delay at 30 s.
    let out = sim(cluster(1, 4), vec![budget_job("b", 0, 2, 3840)], fifo(), Box::new(Stepped)).run().unwrap();
    assert_eq!(done(&out, 0).end, SimTime::from_secs(60));
    let out = sim(cluster(1, 4), vec![budget_job("b", 0, 2, 3840)], fifo(), Box::new(Stepped))
        .with_rescale_delay_ms(0)
        .run()
        .unwrap();
    assert_eq!(done(&out, 0).end, SimTime::from_secs(30));
}

#[test]
fn progress_ends_a_job_whose_sample_budget_is_not_reached_first() {
    // TwoBreaks' 290 s (see the first test): by then it has processed
    // 64 × 260 = 16,640 samples. A budget of 16,641 is not reached: 290 s.
    // One of 16,640 is reached at 290 s too, the same instant; one of
    // 16,576 (one second less) at 289 s.
    for (budget, end_s) in [(16_641, 290), (1_000_000, 290), (16_640, 290), (16_576, 289)] {
        let out = sim(cluster(1, 4), vec![budget_job("a", 0, 1, budget)], fifo(), Box::new(Stepped)).run().unwrap();
        assert_eq!(done(&out, 0).end, SimTime::from_secs(end_s), "budget {budget}");
        assert_eq!(out.stats.breakpoints, 3, "budget {budget}");
    }
}

#[test]
fn samples_carry_over_a_resize_with_accumulation_and_a_preemption() {
    // Launched at 0 on GPU 0: 64 samples/s from 30 s; at 40 s 640 samples.
    // Resized to GPUs 0-1 at atomic batch 32 with 1 accumulation step: an
    // optimiser step of 2 × 32 × 2 = 128 samples takes 0.5 + 0.4 = 0.9 s,
    // 142.2 samples/s, from 70 s (a reallocation). Preempted at 80 s:
    // 640 + 1,422.2 = 2,062.2 samples. Resumed at 100 s by a plain launch
    // (tuned: 1 GPU, batch 32, 64/s from 130 s). Budget 3,000: 937.8 left,
    // 14.653 s: at 144,653 ms (the first whole ms after 144,652.8).
    let launch = Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] };
    let grow = Decision::Resize { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)], atomic_bsz: 32, accum_steps: 1 };
    let (p, _) = script(
        launch.clone(),
        vec![(40_000, vec![grow]), (80_000, vec![Decision::Preempt { job: JobId(0) }]), (100_000, vec![launch])],
    );
    let out = sim(cluster(1, 4), vec![budget_job("a", 0, 1, 3000)], p, Box::new(Stepped)).run().unwrap();
    let d = done(&out, 0);
    // 640 + 10 × 128 / 0.9 = 2,062.22; (3,000 − 2,062.22) / 64 = 14.6528 s.
    let left_s: f64 = (3000.0 - (640.0 + 10.0 * 128.0 / 0.9)) / 64.0;
    assert!((left_s - 14.652_78).abs() < 1e-4, "{left_s}");
    assert_eq!(d.end, SimTime::from_ms(144_653));
    assert_eq!((d.restarts(), d.preemptions()), (2, 1));
}

#[test]
fn a_sample_budget_needs_step_times_and_the_exact_timing() {
    // TwoBreaks gives no step times: the job's launch fails, naming it.
    let Err(err) = sim(cluster(1, 4), vec![budget_job("a", 0, 1, 100)], fifo(), Box::new(TwoBreaks)).run() else {
        panic!("a budget without step times must fail");
    };
    assert!(matches!(&err, SimError::ModelFailure { job_name, .. } if job_name == "a"), "{err:?}");
    assert!(err.to_string().contains("sample budget"), "{err}");
    // The pollux-sim timing does not count samples: refused before the run.
    let Err(err) =
        sim(cluster(1, 4), vec![elastic_job("x", 0, 1), budget_job("b", 0, 1, 100)], fifo(), Box::new(Stepped))
            .with_elastic_timing(dlsched::engine::ElasticTiming::PolluxSim)
            .run()
    else {
        panic!("a budget under pollux-sim timing must fail");
    };
    assert!(matches!(&err, SimError::ModelFailure { job_name, .. } if job_name == "b"), "{err:?}");
    assert!(err.to_string().contains("exact"), "{err}");
    // Without budgets, TwoBreaks needs none (the first test).
}

#[test]
fn a_budgeted_jobs_duration_estimate_is_the_sooner_of_target_and_budget() {
    // 1 GPU at batch 32: 260 s to target; a budget of 3,840 samples at
    // 64/s: 60 s. A budget of 10^6: 15,625 s, so the target's 260 s.
    let jobs = vec![budget_job("a", 0, 1, 3840), budget_job("b", 0, 1, 1_000_000)];
    let s = sim(cluster(1, 4), jobs, fifo(), Box::new(Stepped));
    assert_eq!(s.jobs().spec(JobId(0)).duration_ms, 60_000);
    assert_eq!(s.jobs().spec(JobId(1)).duration_ms, 260_000);
}

/// One constant goodput of 3 units/s per replica, target 1, no breakpoint:
/// for the rounding of a completion time.
struct Thirds;

impl ProgressModel for Thirds {
    fn name(&self) -> &'static str {
        "thirds"
    }
    fn target(&self, _app: &str) -> Result<f64, String> {
        Ok(1.0)
    }
    fn goodput(&self, _app: &str, cfg: &ElasticConfig, _progress: f64) -> Result<f64, String> {
        Ok(3.0 * f64::from(cfg.replicas()))
    }
    fn next_breakpoint(&self, _app: &str, _progress: f64) -> f64 {
        1.0
    }
}

/// A work-defined job of `toy` on `gpus` GPUs, tuned to 32 samples per GPU, adaptive.
fn elastic_job(name: &str, submit_s: u64, gpus: u32) -> JobSpec {
    crate::common::elastic_job(name, "toy", submit_s, gpus, 32 * gpus, true)
}

fn cluster(nodes: u32, per_node: u32) -> Cluster {
    Cluster::new(ClusterSpec::uniform("t", nodes, per_node, "V100", 16_000)).unwrap()
}

fn fifo() -> Box<dyn Policy> {
    dlsched::policy::config::PolicyConfig {
        order: dlsched::policy::queue::QueueOrder::Fifo,
        backfill: false,
        placement: dlsched::policy::placement::PlacementKind::Consolidate,
    }
    .build(1)
    .unwrap()
}

fn done(out: &RunOutput, j: u32) -> dlsched::job::DoneState {
    match out.jobs.state(JobId(j)) {
        JobState::Completed(d) => d.clone(),
        s => panic!("job {j} not completed: {s:?}"),
    }
}

#[test]
fn a_rigid_policy_runs_a_work_defined_job_through_two_breakpoints() {
    // FIFO launches it at 0 on its tuned 1 GPU, batch 32 (factor 1).
    // 30 s re-scale delay; 20 units at 1/s: 20 s (50 s); 40 units at
    // 0.5/s: 80 s (130 s); 40 units at 0.25/s: 160 s (290 s).
    let out = sim(cluster(1, 4), vec![elastic_job("a", 0, 1)], fifo(), Box::new(TwoBreaks)).run().unwrap();
    let d = done(&out, 0);
    assert_eq!((d.start, d.end), (SimTime::ZERO, SimTime::from_secs(290)));
    assert_eq!(d.restarts(), 0);
    // Two breakpoint events and the completion.
    assert_eq!(out.stats.breakpoints, 3);
    // On 2 GPUs (tuned batch 64 = 32 per GPU), goodput doubles: 30 + 10 +
    // 40 + 80 = 160 s.
    let out = sim(cluster(1, 4), vec![elastic_job("b", 0, 2)], fifo(), Box::new(TwoBreaks)).run().unwrap();
    assert_eq!(done(&out, 0).end, SimTime::from_secs(160));
    // Without the delay: 130 s.
    let out = sim(cluster(1, 4), vec![elastic_job("b", 0, 2)], fifo(), Box::new(TwoBreaks))
        .with_rescale_delay_ms(0)
        .run()
        .unwrap();
    assert_eq!(done(&out, 0).end, SimTime::from_secs(130));
}

#[test]
fn a_completion_is_rounded_up_to_the_first_whole_ms_of_done_work() {
    // 1 unit at 3 units/s is 333.33 ms: done during ms 333, so at 334 ms;
    // on 3 GPUs 9 units/s: 111.1 ms, at 112 ms; on 2 GPUs, 6/s: 166.67, at 167.
    for (gpus, end_ms) in [(1, 334), (3, 112), (2, 167)] {
        let out = sim(cluster(1, 4), vec![elastic_job("a", 0, gpus)], fifo(), Box::new(Thirds))
            .with_rescale_delay_ms(0)
            .run()
            .unwrap();
        assert_eq!(done(&out, 0).end, SimTime::from_ms(end_ms), "{gpus} GPUs");
    }
}

/// What the scripted policy saw at its timers: (ms, progress, rescaling, restarts).
type Seen = Arc<Mutex<Vec<(u64, f64, bool, u32)>>>;

/// A scripted policy: at each listed time (a timer) it makes the listed
/// decisions; it launches job 0 at its arrival with `first`; it records
/// what [`View::elastic`] says at each timer.
struct Script {
    first: Decision,
    steps: Vec<(u64, Vec<Decision>)>,
    queue: Vec<Decision>,
    seen: Seen,
    started: bool,
}

impl Policy for Script {
    fn name(&self) -> String {
        "script".into()
    }
    fn on_arrival(&mut self, _job: JobId, _view: &View<'_>) {}
    fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}
    fn on_timer(&mut self, view: &View<'_>) {
        let e = view.elastic(JobId(0)).unwrap();
        self.seen.lock().unwrap().push((view.now.as_ms(), e.progress, e.rescaling, e.restarts));
        if let Some(i) = self.steps.iter().position(|(t, _)| *t == view.now.as_ms()) {
            self.queue = std::mem::take(&mut self.steps[i].1);
            self.queue.reverse();
        }
    }
    fn decide(&mut self, view: &View<'_>) -> Decision {
        if !self.started {
            self.started = true;
            for (t, _) in &self.steps {
                self.queue.push(Decision::WakeAt(SimTime::from_ms(*t)));
            }
            self.queue.push(self.first.clone());
        }
        let _ = view;
        self.queue.pop().unwrap_or(Decision::Wait)
    }
}

fn script(first: Decision, steps: Vec<(u64, Vec<Decision>)>) -> (Box<dyn Policy>, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let p = Script { first, steps, queue: Vec::new(), seen: seen.clone(), started: false };
    (Box::new(p), seen)
}

fn resize(gpus: &[u32], atomic_bsz: u32) -> Decision {
    Decision::Resize { job: JobId(0), gpus: gpus.iter().map(|&g| GpuId(g)).collect(), atomic_bsz, accum_steps: 0 }
}

#[test]
fn a_resize_settles_progress_waits_the_rescale_delay_then_runs_at_the_new_goodput() {
    // Launched at 0 on GPU 0 (tuned, 1/s from 30 s); at 40 s progress is
    // 10; grown to GPUs 0-1 (2/s below 20): no progress until 70 s, then 10
    // units at 2/s: 5 s (75 s); 40 at 1/s: 40 s (115 s); 40 at 0.5/s: 80 s (195 s).
    let launch = Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] };
    let (p, seen) =
        script(launch, vec![(40_000, vec![resize(&[0, 1], 32)]), (50_000, vec![]), (70_000, vec![]), (72_000, vec![])]);
    let out = sim(cluster(1, 4), vec![elastic_job("a", 0, 1)], p, Box::new(TwoBreaks)).run().unwrap();
    let d = done(&out, 0);
    assert_eq!(d.end, SimTime::from_secs(195));
    assert_eq!((d.restarts(), d.gpus), (1, 2));
    // GPU-time: 1 GPU for 40 s, 2 GPUs for 155 s = 350 GPU-s.
    assert_eq!((d.attained_ms(), d.attained_gpu_ms()), (195_000, 350_000));
    let seen = seen.lock().unwrap().clone();
    // (time ms, progress, rescaling, restarts) as the policy saw them: at
    // 40 s before the resize (timers precede the pass) 10, not rescaling;
    // at 50 s and 70 s still 10 (the delay ends at 70 s); at 72 s 10 + 2 × 2.
    assert_eq!(
        seen,
        vec![(40_000, 10.0, false, 0), (50_000, 10.0, true, 1), (70_000, 10.0, false, 1), (72_000, 14.0, false, 1)]
    );
}

#[test]
fn a_batch_only_resize_is_not_a_restart_and_has_no_delay() {
    // Launched at 0 on GPU 0, batch 32: from 30 s at 1/s; at 40 s (progress
    // 10) the batch becomes 64 on the same GPU: 2/s at once: 10 units in 5 s
    // (45 s), 40 at 1/s (85 s), 40 at 0.5/s (165 s).
    let launch = Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] };
    let (p, _) = script(launch, vec![(40_000, vec![resize(&[0], 64)])]);
    let out = sim(cluster(1, 4), vec![elastic_job("a", 0, 1)], p, Box::new(TwoBreaks)).run().unwrap();
    let d = done(&out, 0);
    assert_eq!((d.end, d.restarts()), (SimTime::from_secs(165), 0));
    assert_eq!((out.stats.resizes, out.stats.restarts), (1, 0));
}

#[test]
fn a_preempted_work_defined_job_keeps_its_progress_and_pays_the_delay_again() {
    // 1 GPU from 0: progress 10 at 40 s, preempted; resumed at 100 s by a
    // plain launch (tuned): delay to 130 s, 10 units (140 s), 80 s (220 s),
    // 160 s (380 s). One restart, one preemption; held 40 + 280 = 320 s.
    let launch = Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] };
    let (p, seen) = script(
        launch.clone(),
        vec![(40_000, vec![Decision::Preempt { job: JobId(0) }]), (60_000, vec![]), (100_000, vec![launch])],
    );
    let out = sim(cluster(1, 4), vec![elastic_job("a", 0, 1)], p, Box::new(TwoBreaks)).run().unwrap();
    let d = done(&out, 0);
    assert_eq!((d.first_start(), d.start, d.end), (SimTime::ZERO, SimTime::from_secs(100), SimTime::from_secs(380)));
    assert_eq!((d.restarts(), d.preemptions(), d.attained_ms()), (1, 1, 320_000));
    // Suspended at 60 s with its progress.
    assert_eq!(seen.lock().unwrap()[1], (60_000, 10.0, false, 0));
}

#[test]
fn restarts_count_every_reallocation_after_the_first_and_reach_the_outputs() {
    // 0 s launch (allocation 1), 40 s grow to 2 GPUs (restart 1), 100 s
    // move to GPUs 2-3 (restart 2), 150 s batch-only change (none), 200 s
    // preempt, 210 s resume on GPU 1 (restart 3).
    let launch = Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] };
    let (p, _) = script(
        launch,
        vec![
            (40_000, vec![resize(&[0, 1], 32)]),
            (100_000, vec![resize(&[3, 2], 32)]),
            (150_000, vec![resize(&[2, 3], 16)]),
            (200_000, vec![Decision::Preempt { job: JobId(0) }]),
            (210_000, vec![resize(&[1], 32)]),
        ],
    );
    let jobs = vec![elastic_job("a", 0, 1)];
    let out = sim(cluster(1, 4), jobs, p, Box::new(TwoBreaks)).run().unwrap();
    assert_eq!(done(&out, 0).restarts(), 3);
    assert_eq!((out.stats.restarts, out.stats.resizes), (3, 3));
    let mut csv = Vec::new();
    dlsched::metrics::export::write_jobs_csv(&out, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",attained_gpu_s,restarts"), "{csv}");
    assert!(lines.next().unwrap().ends_with(",3"), "{csv}");
}

#[test]
fn a_work_defined_job_without_a_progress_model_is_an_error_of_the_run() {
    let s = Simulation::new(
        cluster(1, 4),
        JobTable::new(vec![elastic_job("a", 0, 1)]),
        fifo(),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0 },
    );
    let Err(err) = s.run() else { panic!("no progress model: the run must fail") };
    assert!(matches!(&err, SimError::ModelFailure { job_name, .. } if job_name == "a"), "{err:?}");
    assert!(err.to_string().contains("no progress model"), "{err}");
}

#[test]
fn invalid_resizes_are_errors_of_the_run() {
    // No GPU, a zero batch, a GPU that does not exist, a co-location.
    let cases: Vec<(Decision, &str)> = vec![
        (resize(&[], 32), "at least one GPU"),
        (resize(&[0], 0), "atomic batch 0"),
        (resize(&[0, 9], 32), ""),
        (Decision::Colocate { job: JobId(0), gpus: vec![GpuId(0)] }, "cannot be co-located"),
    ];
    for (d, msg) in cases {
        let (p, _) = script(d, vec![]);
        let Err(err) = sim(cluster(1, 4), vec![elastic_job("a", 0, 1)], p, Box::new(TwoBreaks)).run() else {
            panic!("an invalid resize must fail the run")
        };
        assert!(matches!(&err, SimError::InvalidDecision { .. }), "{err:?}");
        assert!(err.to_string().contains(msg), "{err}");
    }
}

/// xorshift64*: a tiny seeded generator for the random policy.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Launches, resizes and preempts work-defined jobs at random, at random
/// timers; checks through its view that a job in its re-scale delay has
/// the progress it had at its reallocation and that no progress goes back.
struct RandomElastic {
    rng: Rng,
    actions_left: u32,
    timer_set: bool,
    /// Per job: progress at its last reallocation, last progress seen.
    at_realloc: Vec<Option<f64>>,
    last: Vec<f64>,
    allocations: Vec<u32>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl RandomElastic {
    fn watch(&mut self, view: &View<'_>) {
        for j in 0..view.jobs.len() {
            let Some(e) = view.elastic(JobId(j as u32)) else { continue };
            if e.progress < self.last[j] {
                self.violations.lock().unwrap().push(format!("job {j} progress went back at {}", view.now));
            }
            if let Some(t) = e.target
                && e.progress > t
            {
                self.violations.lock().unwrap().push(format!("job {j} progress above target"));
            }
            self.last[j] = e.progress;
            if e.rescaling && self.at_realloc[j] != Some(e.progress) {
                self.violations.lock().unwrap().push(format!(
                    "job {j} progressed during its delay at {}: {} vs {:?}",
                    view.now, e.progress, self.at_realloc[j]
                ));
            }
        }
    }
}

impl Policy for RandomElastic {
    fn name(&self) -> String {
        "random-elastic".into()
    }
    fn on_arrival(&mut self, _job: JobId, view: &View<'_>) {
        self.watch(view);
    }
    fn on_completion(&mut self, _job: JobId, view: &View<'_>) {
        self.watch(view);
    }
    fn on_timer(&mut self, view: &View<'_>) {
        self.timer_set = false;
        self.actions_left = 1 + self.rng.below(3) as u32;
        self.watch(view);
    }
    fn decide(&mut self, view: &View<'_>) -> Decision {
        // Always a timer pending while a job is unfinished; up to 3 actions
        // after each timer.
        if !self.timer_set && view.jobs.iter().any(|(_, s)| !matches!(s, JobState::Completed(_))) {
            self.timer_set = true;
            return Decision::WakeAt(view.now.plus_ms(1 + self.rng.below(90_000)));
        }
        if self.actions_left == 0 {
            return Decision::Wait;
        }
        self.actions_left -= 1;
        let n = view.jobs.len();
        let j = JobId(self.rng.below(n as u64) as u32);
        let free: Vec<GpuId> =
            (0..view.cluster.total_gpus()).map(GpuId).filter(|&g| view.cluster.owner(g).is_none()).collect();
        let (own, running) = match view.jobs.state(j) {
            JobState::Running(r) => (r.gpus.clone(), true),
            JobState::Pending | JobState::Suspended(_) => (Vec::new(), false),
            _ => return Decision::Wait,
        };
        if running && self.rng.below(4) == 0 {
            return Decision::Preempt { job: j };
        }
        let mut pool: Vec<GpuId> = free.iter().chain(own.iter()).copied().collect();
        if pool.is_empty() {
            return Decision::Wait;
        }
        // A random subset of 1..=4 GPUs of the pool.
        let k = 1 + self.rng.below(pool.len().min(4) as u64) as usize;
        for i in 0..k {
            let r = i + self.rng.below((pool.len() - i) as u64) as usize;
            pool.swap(i, r);
        }
        pool.truncate(k);
        let mut sorted_new = pool.clone();
        sorted_new.sort_unstable();
        let mut sorted_old = own.clone();
        sorted_old.sort_unstable();
        let atomic_bsz = 8 * (1 + self.rng.below(8) as u32);
        if sorted_new != sorted_old {
            self.at_realloc[j.index()] = view.elastic(j).map(|e| e.progress);
            self.allocations[j.index()] += 1;
        }
        Decision::Resize { job: j, gpus: pool, atomic_bsz, accum_steps: self.rng.below(2) as u32 }
    }
}

#[test]
fn random_launches_resizes_and_preemptions_keep_every_invariant() {
    random_runs(None);
}

#[test]
fn random_runs_with_sample_budgets_keep_every_invariant() {
    // Budgets from 1,000 to 16,000 samples (TwoBreaks' runs process up to
    // 256 samples/s per GPU here), so some jobs end by budget, some by target.
    random_runs(Some(|i: u64| 1000 + 3000 * i));
}

/// Seeded runs of [`RandomElastic`] on [`Stepped`], each job's sample
/// budget `budget(i)` for job `i` when given, invariants checked after
/// every event.
fn random_runs(budget: Option<fn(u64) -> u64>) {
    for seed in 1..=50u64 {
        let jobs: Vec<JobSpec> = (0..6)
            .map(|i| {
                let mut j = elastic_job(&format!("j{i}"), i * 20, 1 + (i as u32 % 3));
                if let Some(b) = budget {
                    j.extra_mut().elastic.as_mut().unwrap().sample_budget = Some(b(i));
                }
                j
            })
            .collect();
        let violations = Arc::new(Mutex::new(Vec::new()));
        let p = RandomElastic {
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            actions_left: 0,
            timer_set: false,
            at_realloc: vec![None; 6],
            last: vec![0.0; 6],
            allocations: vec![0; 6],
            violations: violations.clone(),
        };
        let allocations = Arc::new(Mutex::new(Vec::new()));
        struct Report<P: Policy>(P, Arc<Mutex<Vec<u32>>>);
        impl Policy for Report<RandomElastic> {
            fn name(&self) -> String {
                self.0.name()
            }
            fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
                self.0.on_arrival(job, view);
            }
            fn on_completion(&mut self, job: JobId, view: &View<'_>) {
                self.0.on_completion(job, view);
                *self.1.lock().unwrap() = self.0.allocations.clone();
            }
            fn on_timer(&mut self, view: &View<'_>) {
                self.0.on_timer(view);
            }
            fn decide(&mut self, view: &View<'_>) -> Decision {
                self.0.decide(view)
            }
        }
        let p = Report(p, allocations.clone());
        let out = sim(cluster(2, 4), jobs, Box::new(p), Box::new(Stepped))
            .run()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(violations.lock().unwrap().is_empty(), "seed {seed}: {:?}", violations.lock().unwrap());
        // Every job completed, with the restarts the policy caused: its
        // reallocations after the first (a resume or GPU change each).
        let allocs = allocations.lock().unwrap().clone();
        for j in 0..6u32 {
            let d = done(&out, j);
            assert_eq!(d.restarts(), allocs[j as usize] - 1, "seed {seed} job {j}");
        }
    }
}

/// Goodput 0.25 units/s below 20, 0.5 from 20 on (one GPU), target 101.25:
/// for the Pollux simulator's stepping.
struct QuarterHalf;

impl ProgressModel for QuarterHalf {
    fn name(&self) -> &'static str {
        "quarter-half"
    }
    fn target(&self, _app: &str) -> Result<f64, String> {
        Ok(101.25)
    }
    fn goodput(&self, _app: &str, cfg: &ElasticConfig, progress: f64) -> Result<f64, String> {
        Ok(f64::from(cfg.replicas()) * if progress < 20.0 { 0.25 } else { 0.5 })
    }
    fn next_breakpoint(&self, _app: &str, progress: f64) -> f64 {
        if progress < 20.0 { 20.0 } else { 101.25 }
    }
}

#[test]
fn pollux_sim_timing_steps_on_the_minute_grid_and_rounds_crossings_to_whole_seconds() {
    use dlsched::engine::ElasticTiming;
    let run = |timing| {
        sim(cluster(1, 4), vec![elastic_job("a", 0, 1)], fifo(), Box::new(QuarterHalf))
            .with_elastic_timing(timing)
            .run()
            .unwrap()
    };
    // Exact: launched at 0, 30-s delay; 20 units at 0.25/s = 80 s (110 s);
    // 81.25 units at 0.5/s = 162.5 s: done at 272.5 s. Two events.
    let exact = run(ElasticTiming::Exact);
    assert_eq!(done(&exact, 0).end, SimTime::from_ms(272_500));
    assert_eq!(exact.stats.breakpoints, 2);
    // Pollux-sim, by the simulator's Job.step on 60-s steps:
    //   (0, 60]:    delay to 30; 0 + 0.25 × 30 = 7.5 < 20: progress 7.5 at 60;
    //   (60, 120]:  7.5 + 0.25 × 60 = 22.5 >= 20: crosses after
    //               round(12.5 / 0.25) = 50 s, at 110; 20 + 0.5 × 10 = 25 at 120;
    //   120 → 180 → 240: 55, 85;
    //   (240, 300]: 85 + 30 >= 101.25: crosses after round(16.25 / 0.5) =
    //               round(32.5) = 32 s (half to even), at 272 s.
    // Events: 60, 110, 120, 180, 240, 272.
    let sim_t = run(ElasticTiming::PolluxSim);
    assert_eq!(done(&sim_t, 0).end, SimTime::from_secs(272));
    assert_eq!(sim_t.stats.breakpoints, 6);
}

#[test]
fn a_work_defined_jobs_duration_is_the_models_time_to_target_on_its_tuned_configuration() {
    // TwoBreaks on 1 GPU at batch 32: 20 units at 1/s + 40 at 0.5/s + 40 at
    // 0.25/s = 20 + 80 + 160 = 260 s. On 2 GPUs (batch 64): half, 130 s.
    let jobs = vec![elastic_job("a", 0, 1), elastic_job("b", 0, 2)];
    let s = sim(cluster(1, 4), jobs, fifo(), Box::new(TwoBreaks));
    assert_eq!(s.jobs().spec(JobId(0)).duration_ms, 260_000);
    assert_eq!(s.jobs().spec(JobId(1)).duration_ms, 130_000);
    // And the run agrees: `b` launches at 0, 30-s delay + 130 s = 160 s.
    let out = s.run().unwrap();
    assert_eq!(done(&out, 1).end, SimTime::from_secs(160));
}

/// Goodput 0.25 units/s, a breakpoint at 7.6, target 100.
struct NearBoundary;

impl ProgressModel for NearBoundary {
    fn name(&self) -> &'static str {
        "near-boundary"
    }
    fn target(&self, _app: &str) -> Result<f64, String> {
        Ok(100.0)
    }
    fn goodput(&self, _app: &str, _cfg: &ElasticConfig, _progress: f64) -> Result<f64, String> {
        Ok(0.25)
    }
    fn next_breakpoint(&self, _app: &str, progress: f64) -> f64 {
        if progress < 7.6 { 7.6 } else { 100.0 }
    }
}

/// Launches job 0 on GPU 0 and records its progress as seen at 60 s.
struct SeeAtMinute(Arc<Mutex<Option<f64>>>, bool);

impl Policy for SeeAtMinute {
    fn name(&self) -> String {
        "see-at-minute".into()
    }
    fn on_arrival(&mut self, _job: JobId, _view: &View<'_>) {}
    fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}
    fn decide(&mut self, view: &View<'_>) -> Decision {
        if matches!(view.jobs.state(JobId(0)), JobState::Pending) {
            return Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] };
        }
        if view.now == SimTime::from_secs(60) {
            let mut seen = self.0.lock().unwrap();
            if seen.is_none() {
                *seen = view.elastic(JobId(0)).map(|e| e.progress);
            }
            return Decision::Wait;
        }
        if !self.1 {
            self.1 = true;
            return Decision::WakeAt(SimTime::from_secs(60));
        }
        Decision::Wait
    }
}

#[test]
fn pollux_sim_timing_crosses_a_boundary_due_at_a_grid_instant_after_that_instants_decisions() {
    use dlsched::engine::ElasticTiming;
    // Launched at 0, 30-s delay; (0, 60]: 0.25 × 30 = 7.5 < 7.6, progress
    // 7.5 at 60. The next step crosses 7.6 after round(0.1 / 0.25) =
    // round(0.4) = 0 s, at 60 itself: the simulator does that in its next
    // step, after its policy's decision at 60, so the policy sees 7.5 (and
    // 7.6 if the crossing came first).
    let seen = Arc::new(Mutex::new(None));
    let s = sim(
        cluster(1, 1),
        vec![elastic_job("a", 0, 1)],
        Box::new(SeeAtMinute(seen.clone(), false)),
        Box::new(NearBoundary),
    )
    .with_elastic_timing(ElasticTiming::PolluxSim);
    let out = s.run().unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(7.5));
    // Then 92.4 units at 0.25/s from 60: they run over steps; the last
    // crossing is at 60 + 369.6 → steps to 420 add 7.6 + 0.25 × 360 = 97.6,
    // then round(2.4 / 0.25) = round(9.6) = 10 s: done at 430 s.
    assert_eq!(done(&out, 0).end, SimTime::from_secs(430));
}
