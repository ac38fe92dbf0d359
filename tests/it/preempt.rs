//! The engine's preemption and timers through the public API only: a tiny
//! round-robin policy that time-slices two jobs on one GPU with a round timer,
//! migration as preempt + launch elsewhere, and invalid decisions.

use std::collections::VecDeque;

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, RunOutput, Simulation};
use dlsched::error::SimError;
use dlsched::ids::{GpuId, JobId};
use dlsched::job::{DoneState, JobState};
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::TraceSpeed;
use dlsched::time::SimTime;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::rec;

/// Round robin on GPU 0 with a fixed quantum: the running job is preempted
/// when its round ends and someone waits, and the next in line starts.
struct RoundRobin {
    quantum_ms: u64,
    queue: VecDeque<JobId>,
    running: Option<JobId>,
    /// The round timer asked for, if any; an older timer that fires is ignored.
    round_ends: Option<SimTime>,
    round_over: bool,
    need_timer: bool,
}

impl Policy for RoundRobin {
    fn name(&self) -> String {
        "round-robin".into()
    }
    fn on_arrival(&mut self, job: JobId, _: &View<'_>) {
        self.queue.push_back(job);
    }
    fn on_completion(&mut self, _: JobId, _: &View<'_>) {
        self.running = None;
    }
    fn on_timer(&mut self, view: &View<'_>) {
        if self.round_ends == Some(view.now) {
            self.round_ends = None;
            self.round_over = true;
        }
    }
    fn decide(&mut self, view: &View<'_>) -> Decision {
        if let Some(r) = self.running.filter(|_| self.round_over) {
            self.round_over = false;
            if self.queue.is_empty() {
                // Nobody waits: another round for the same job.
                self.need_timer = true;
            } else {
                self.running = None;
                self.queue.push_back(r);
                return Decision::Preempt { job: r };
            }
        }
        if self.running.is_none()
            && let Some(j) = self.queue.pop_front()
        {
            self.running = Some(j);
            self.need_timer = true;
            return Decision::Launch { job: j, gpus: vec![GpuId(0)] };
        }
        if std::mem::take(&mut self.need_timer) {
            let at = view.now.plus_ms(self.quantum_ms);
            self.round_ends = Some(at);
            return Decision::WakeAt(at);
        }
        Decision::Wait
    }
}

fn sim(records: Vec<TraceRecord>, spec: ClusterSpec, policy: Box<dyn Policy>, ckpt: CheckpointModel) -> Simulation {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::FirstFit.build());
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    Simulation::new(cluster, w.jobs, policy, Box::new(TraceSpeed), cfg).with_checkpoint(ckpt)
}

fn run_checked(s: Simulation) -> RunOutput {
    run_recorded(s).0
}

/// Runs to the end under the metrics recorder, checking every invariant
/// after every instant.
fn run_recorded(mut s: Simulation) -> (RunOutput, dlsched::metrics::Recording) {
    let mut rec = dlsched::metrics::Recorder::new(s.cluster(), s.jobs(), false, None);
    while s.step_observed(&mut rec).unwrap().is_some() {
        if let Err(e) = s.check_invariants() {
            panic!("at {}: {e}", s.now());
        }
    }
    let out = s.finish_observed(&mut rec);
    (out, rec.into_recording())
}

fn done(out: &RunOutput, name: &str) -> DoneState {
    match out.jobs.iter().find(|(s, _)| s.name == name) {
        Some((_, JobState::Completed(d))) => d.clone(),
        other => panic!("{name}: {other:?}"),
    }
}

/// A finished job's waiting time, ms (every waiting period).
fn waited(out: &RunOutput, name: &str) -> u64 {
    match out.jobs.iter().find(|(s, _)| s.name == name) {
        Some((s, JobState::Completed(d))) => d.waited_ms(s.submit),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn round_robin_time_slices_two_jobs_by_hand() {
    // One GPU, rounds of 10 s, Helios checkpoint table (7 s of work added to
    // a 1-GPU job at each preemption). X (25 s) and Y (15 s) both at t0.
    // t0  X starts (25 left), timer 10.
    // t10 X preempted: 25-10+7 = 22 left; Y starts (15), timer 20.
    // t20 Y preempted: 15-10+7 = 12; X resumes (22), timer 30.
    // t30 X preempted: 22-10+7 = 19; Y resumes (12), timer 40.
    // t40 Y preempted: 12-10+7 = 9; X resumes (19), timer 50.
    // t50 X preempted: 19-10+7 = 16; Y resumes (9), timer 60.
    // t59 Y's work runs out: Y ends; X resumes (16), timer 69 (the 60 timer
    //     still fires and is ignored).
    // t69 nobody waits: another round, timer 79. t75 X ends. t79 last timer.
    // X: first start 0, last start 59, end 75, 3 preemptions, attained
    //    10+10+10+16 = 46 = 25 + 3x7, waited 10+10+9 = 29 (29 + 46 = 75).
    // Y: first start 10, last start 50, end 59, 2 preemptions, attained
    //    10+10+9 = 29 = 15 + 2x7, waited 10+10+10 = 30 (30 + 29 = 59).
    let rr = RoundRobin {
        quantum_ms: 10_000,
        queue: VecDeque::new(),
        running: None,
        round_ends: None,
        round_over: false,
        need_timer: false,
    };
    let s = sim(
        vec![rec("X", 0, 1, 25), rec("Y", 0, 1, 15)],
        ClusterSpec::uniform("one", 1, 1, "V100", 16384),
        Box::new(rr),
        CheckpointModel::HeliosTable,
    );
    let (out, recording) = run_recorded(s);
    let secs = |name: &str| {
        let d = done(&out, name);
        (
            d.first_start().as_ms() / 1000,
            d.start.as_ms() / 1000,
            d.end.as_ms() / 1000,
            d.preemptions(),
            d.attained_ms() / 1000,
            waited(&out, name) / 1000,
        )
    };
    assert_eq!(secs("X"), (0, 59, 75, 3, 46, 29));
    assert_eq!(secs("Y"), (10, 50, 59, 2, 29, 30));
    // Timers at 10, 20, 30, 40, 50, 60, 69, 79; 5 preemptions of 7 s each.
    assert_eq!((out.stats.timers, out.stats.preemptions, out.stats.checkpoint_ms), (8, 5, 35_000));
    // jobs.csv: start_s is the last start, queue_delay_s every waiting
    // period, then first_start_s, preemptions, attained_s, attained_gpu_s;
    // speed = 25 / 46 = 0.5435.
    let mut csv = Vec::new();
    dlsched::metrics::export::write_jobs_csv(&out, &mut csv).unwrap();
    let text = String::from_utf8(csv).unwrap();
    let row = text.lines().find(|l| l.starts_with("X,")).unwrap();
    assert_eq!(row, "X,default,1,0,59,75,75,29,25,1,completed,,,,,0.5435,0,3,46,46");
    // The summary counts every waiting period: (29 + 30) / 2 = 29.5 s.
    let (summary, _) = dlsched::metrics::summarize(&out, &recording, &[], 2);
    assert_eq!((summary.queue_delay_mean_s, summary.jobs_preempted, summary.preemptions), (29.5, 2, 5));
    // The GPU was held from 0 to 75 without a gap (each preemption's
    // release and resume fall at one instant; the recorder sees both):
    // utilisation 75 GPU-s / (1 GPU x 75 s makespan) = 1.
    assert_eq!(summary.gpu_utilization, 1.0);
}

/// A policy that plays a script: at each listed time (s), the listed
/// decisions in order, then wait.
struct Script(Vec<(u64, Vec<Decision>)>);

impl Policy for Script {
    fn name(&self) -> String {
        "script".into()
    }
    fn on_arrival(&mut self, _: JobId, _: &View<'_>) {}
    fn on_completion(&mut self, _: JobId, _: &View<'_>) {}
    fn decide(&mut self, view: &View<'_>) -> Decision {
        match self.0.first_mut() {
            Some((t, ds)) if *t * 1000 == view.now.as_ms() => {
                if ds.is_empty() {
                    self.0.remove(0);
                    return Decision::Wait;
                }
                ds.remove(0)
            }
            _ => Decision::Wait,
        }
    }
}

#[test]
fn migration_is_preempt_then_launch_elsewhere() {
    // Two nodes of 1 GPU. M (20 s, 1 GPU) starts on GPU 0 at 0; at 5 it is
    // preempted (15 left + 7 s checkpoint = 22) and launched on GPU 1 at the
    // same instant: it ends at 5 + 22 = 27, waited 0, attained 27, one
    // preemption, first start 0, last start 5.
    let script = Script(vec![
        (0, vec![Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] }, Decision::WakeAt(SimTime::from_ms(5_000))]),
        (5, vec![Decision::Preempt { job: JobId(0) }, Decision::Launch { job: JobId(0), gpus: vec![GpuId(1)] }]),
    ]);
    let mut s = sim(
        vec![rec("M", 0, 1, 20)],
        ClusterSpec::uniform("two", 2, 1, "V100", 16384),
        Box::new(script),
        CheckpointModel::HeliosTable,
    );
    s.step().unwrap();
    s.step().unwrap();
    s.check_invariants().unwrap();
    match s.jobs().state(JobId(0)) {
        JobState::Running(r) => {
            assert_eq!((r.gpus.clone(), r.first_start.as_ms(), r.start.as_ms()), (vec![GpuId(1)], 0, 5_000))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.cluster().owner(GpuId(0)), None);
    let out = run_checked(s);
    let m = done(&out, "M");
    assert_eq!((m.end.as_ms(), waited(&out, "M"), m.attained_ms(), m.preemptions()), (27_000, 0, 27_000, 1));
    assert_eq!(out.stats.stale_completions, 1, "the completion of the first run (at 20) is stale");
}

#[test]
fn invalid_preemptions_and_timers_are_errors() {
    let one = || ClusterSpec::uniform("one", 1, 1, "V100", 16384);
    // Preempting a job that is not running.
    let s = sim(
        vec![rec("P", 0, 1, 10)],
        one(),
        Box::new(Script(vec![(0, vec![Decision::Preempt { job: JobId(0) }])])),
        CheckpointModel::None,
    );
    let e = s.run().err().expect("preempting a pending job is refused");
    assert!(matches!(&e, SimError::InvalidDecision { job_name, .. } if job_name == "P"), "{e}");
    assert!(e.to_string().contains("not running"), "{e}");
    // A timer at the current time (t 3) is not in the future.
    let s = sim(
        vec![rec("T", 3, 1, 10)],
        one(),
        Box::new(Script(vec![(3, vec![Decision::WakeAt(SimTime::from_ms(3_000))])])),
        CheckpointModel::None,
    );
    let e = s.run().err().expect("a timer at now is refused");
    assert!(matches!(e, SimError::InvalidTimer { .. }), "{e}");
    assert!(e.to_string().contains("not after now"), "{e}");
    // Resuming a job that was never suspended nor pending: a completed one.
    let s = sim(
        vec![rec("C", 0, 1, 1)],
        one(),
        Box::new(Script(vec![
            (0, vec![Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] }]),
            (1, vec![Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] }]),
        ])),
        CheckpointModel::None,
    );
    let e = s.run().err().expect("launching a completed job is refused");
    assert!(e.to_string().contains("neither pending nor suspended"), "{e}");
}

/// [`Script`] with a release delay: a job keeps its GPUs this long after its
/// work runs out.
struct DelayedScript(Script, u64);

impl Policy for DelayedScript {
    fn name(&self) -> String {
        "delayed-script".into()
    }
    fn on_arrival(&mut self, _: JobId, _: &View<'_>) {}
    fn on_completion(&mut self, _: JobId, _: &View<'_>) {}
    fn decide(&mut self, view: &View<'_>) -> Decision {
        self.0.decide(view)
    }
    fn release_delay_ms(&self) -> u64 {
        self.1
    }
}

#[test]
fn a_job_in_its_release_delay_holds_its_gpus_and_cannot_be_preempted() {
    // R (10 s) starts at 0; its work runs out at 10, it keeps its GPU for
    // the 1 s delay and completes at 11 (attained 11 s). A second job Q (5 s)
    // submitted at 10 finds the GPU busy at 10 and starts at 11; its work runs
    // out at 16 and it too keeps the GPU 1 s: it completes at 17.
    let script = DelayedScript(
        Script(vec![
            (0, vec![Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] }]),
            (11, vec![Decision::Launch { job: JobId(1), gpus: vec![GpuId(0)] }]),
        ]),
        1_000,
    );
    let one = ClusterSpec::uniform("one", 1, 1, "V100", 16384);
    let s = sim(vec![rec("R", 0, 1, 10), rec("Q", 10, 1, 5)], one.clone(), Box::new(script), CheckpointModel::None);
    let out = run_checked(s);
    let (r, q) = (done(&out, "R"), done(&out, "Q"));
    assert_eq!((r.end.as_ms(), r.attained_ms(), q.start.as_ms(), q.end.as_ms()), (11_000, 11_000, 11_000, 17_000));
    // Preempting R at 10, in its delay, is refused.
    let script = DelayedScript(
        Script(vec![
            (0, vec![Decision::Launch { job: JobId(0), gpus: vec![GpuId(0)] }]),
            (10, vec![Decision::Preempt { job: JobId(0) }]),
        ]),
        1_000,
    );
    let s = sim(vec![rec("R", 0, 1, 10), rec("Q", 10, 1, 5)], one, Box::new(script), CheckpointModel::None);
    let e = s.run().err().expect("preempting a job in its release delay is refused");
    assert!(e.to_string().contains("release delay"), "{e}");
}
