//! A preemptive policy defined outside the crate, in one file, through the
//! public API only (`docs/writing-a-policy.md`, "A preemptive policy"): LAS,
//! least attained service first, re-ranked at arrivals, completions and a
//! round timer. Its schedule is checked against one computed by hand, and
//! shown not to depend on the timeline sampling interval (the engine also
//! runs scheduling passes at sample instants and at stale completions).

use dlsched::cluster::request::Request;
use dlsched::experiment::{ClusterChoice, RunReport, RunSpec, WorkloadSource, run_one_with_policy};
use dlsched::ids::{GpuId, JobId};
use dlsched::job::JobState;
use dlsched::policy::placement::{Placement, PlacementKind};
use dlsched::policy::{Decision, Policy, View};
use dlsched::time::SimTime;
use dlsched::trace::{ColumnMap, TraceFormat};

/// Least attained service first, preemptive, one round timer while a job waits.
struct Las {
    round_ms: u64,
    /// Arrived, not completed, in submit order.
    active: Vec<JobId>,
    /// The round timer asked for, if it has not fired yet.
    timer_at: Option<SimTime>,
    /// The jobs that should hold GPUs; `None` = re-rank at the next decision.
    plan: Option<Vec<JobId>>,
    placement: Box<dyn Placement>,
    scratch: Vec<GpuId>,
    /// Re-rank at every decision instead (the pitfall the page warns of).
    rerank_every_pass: bool,
}

impl Las {
    fn new(round_ms: u64, rerank_every_pass: bool) -> Self {
        Las {
            round_ms,
            active: Vec::new(),
            timer_at: None,
            plan: None,
            placement: PlacementKind::Consolidate.build(),
            scratch: Vec::new(),
            rerank_every_pass,
        }
    }

    /// Service so far, ms of holding GPUs.
    fn attained(view: &View<'_>, j: JobId) -> u64 {
        match view.jobs.state(j) {
            JobState::Running(r) => r.attained_ms + view.now.since(r.start),
            JobState::Suspended(s) => s.attained_ms,
            _ => 0,
        }
    }

    /// By attained service (ties: submit order), greedily while they fit
    /// their partition's GPUs.
    fn rank(&self, view: &View<'_>) -> Vec<JobId> {
        let mut ranked: Vec<(u64, JobId)> = self.active.iter().map(|&j| (Self::attained(view, j), j)).collect();
        ranked.sort_unstable();
        let mut used = std::collections::BTreeMap::new();
        let mut out = Vec::new();
        for (_, j) in ranked {
            let s = view.jobs.spec(j);
            let u = used.entry(s.vc).or_insert(0u32);
            if *u + s.gpus <= view.cluster.partition(s.vc).gpus_total {
                *u += s.gpus;
                out.push(j);
            }
        }
        out
    }
}

impl Policy for Las {
    fn name(&self) -> String {
        "las".into()
    }
    fn on_arrival(&mut self, job: JobId, _: &View<'_>) {
        self.active.push(job);
        self.plan = None;
    }
    fn on_completion(&mut self, job: JobId, _: &View<'_>) {
        self.active.retain(|&j| j != job);
        self.plan = None;
    }
    fn on_timer(&mut self, view: &View<'_>) {
        if self.timer_at == Some(view.now) {
            self.timer_at = None;
            self.plan = None;
        }
    }
    fn decide(&mut self, view: &View<'_>) -> Decision {
        if self.plan.is_none() || self.rerank_every_pass {
            self.plan = Some(self.rank(view));
        }
        let plan = self.plan.as_deref().unwrap_or_default();
        let running = |j: JobId| matches!(view.jobs.state(j), JobState::Running(_));
        if let Some(&j) = self.active.iter().find(|&&j| running(j) && !plan.contains(&j)) {
            return Decision::Preempt { job: j };
        }
        for &j in plan.iter().filter(|&&j| !running(j)) {
            let s = view.jobs.spec(j);
            self.scratch.clear();
            if self.placement.place(view.cluster, Request::new(s.vc, s.gpus), &mut self.scratch) {
                return Decision::Launch { job: j, gpus: std::mem::take(&mut self.scratch) };
            }
        }
        let waiting = self.active.iter().any(|&j| !running(j));
        if waiting && self.timer_at.is_none() {
            let at = view.now.plus_ms(self.round_ms);
            self.timer_at = Some(at);
            return Decision::WakeAt(at);
        }
        Decision::Wait
    }
}

/// (name, first start, last start, end, preemptions, waited) of every job, s.
type Row = (String, u64, u64, u64, u32, u64);

fn rows(r: &RunReport) -> Vec<Row> {
    r.output
        .jobs
        .iter()
        .map(|(spec, st)| match st {
            JobState::Completed(d) => (
                spec.name.to_string(),
                d.first_start().as_ms() / 1000,
                d.start.as_ms() / 1000,
                d.end.as_ms() / 1000,
                d.preemptions(),
                d.waited_ms(spec.submit) / 1000,
            ),
            other => panic!("job {} did not complete: {other:?}", spec.name),
        })
        .collect()
}

fn run(trace: &std::path::Path, sample_interval_ms: u64, rerank_every_pass: bool) -> RunReport {
    let spec = RunSpec {
        sample_interval_ms,
        ..RunSpec::new(
            WorkloadSource::Trace { path: trace.into(), format: TraceFormat::JobsCsv, columns: ColumnMap::default() },
            ClusterChoice::Uniform { nodes: 1, gpus_per_node: 1, gpu_type: None },
        )
    };
    run_one_with_policy(&spec, |_| Ok(Box::new(Las::new(10_000, rerank_every_pass))), |_| {}).unwrap()
}

#[test]
fn las_with_a_round_timer_defined_outside_the_crate_schedules_as_computed_by_hand() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("jobs.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\nA,0,30,1\nB,5,20,1\nC,12,5,1\n").unwrap();
    // One GPU, rounds of 10 s, no checkpoint cost. Attained service in ().
    // t0  A starts. t5  B arrives: B(0) < A(5): A preempted, B runs; timer 15.
    // t12 C arrives: C(0) < A(5) < B(7): B preempted, C runs.
    // t15 timer: C(3) still first; timer 25. t17 C ends: A(5) < B(7): A runs.
    // t25 timer: B(7) < A(13): A preempted, B runs; timer 35.
    // t35 timer: A(13) < B(17): B preempted, A runs; timer 45.
    // t45 timer: B(17) < A(23): A preempted, B runs its last 3 s: ends 48.
    // t48 A runs its last 7 s: ends 55.
    // Waits: A 5-17, 25-35, 45-48 = 25 (= 55 - 30); B 12-25, 35-45 = 23
    // (= 48 - 5 - 20); C 0.
    let s = |n: &str, f, st, e, p, w| (n.to_string(), f, st, e, p, w);
    let want = vec![s("A", 0, 48, 55, 3, 25), s("B", 5, 45, 48, 2, 23), s("C", 12, 12, 17, 0, 0)];
    let r = run(&trace, 0, false);
    assert_eq!(r.summary.policy, "las");
    assert_eq!(rows(&r), want);
    assert_eq!((r.summary.jobs_preempted, r.summary.preemptions), (2, 5));
    // JCT 55, 43, 5: mean 103 / 3; queueing delay (every wait) 25, 23, 0: mean 16.
    assert!((r.summary.jct_mean_s - 103.0 / 3.0).abs() < 1e-3);
    assert!((r.summary.queue_delay_mean_s - 16.0).abs() < 1e-9);
    // Ranking only at its own events, the schedule is the same whatever the
    // timeline sampling interval (passes at samples change nothing).
    assert_eq!(rows(&run(&trace, 7_000, false)), want);
    // Re-ranking at every pass instead picks up the passes at the stale
    // completion events preempted jobs leave behind, so the schedule changes
    // (the pitfall `docs/writing-a-policy.md` warns of); samples run no pass,
    // so even then the sampling interval changes nothing.
    let rerank = rows(&run(&trace, 0, true));
    assert_ne!(rerank, want);
    assert_eq!(rows(&run(&trace, 7_000, true)), rerank);
}
