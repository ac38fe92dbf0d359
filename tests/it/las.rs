//! LAS: hand-computed schedules with exact preemption times (GPU-time and
//! time service, work-conserving or not, with the Helios checkpoint table),
//! independence from the sampling interval, the command line and sweeps.

use crate::common::dlsched;
use dlsched::engine::CheckpointModel;
use dlsched::experiment::{ClusterChoice, RunReport, RunSpec, WorkloadSource, run_one};
use dlsched::job::JobState;
use dlsched::policy::las::{LasOptions, LasService};
use dlsched::policy::registry::PolicySpec;
use dlsched::trace::{ColumnMap, TraceFormat};

/// (name, first start, last start, end, preemptions, waited), s.
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

/// One node of 2 GPUs, rounds of 10 s: A (2 GPUs, 30 s) at 0, B (1, 12 s)
/// at 3, C (1, 8 s) at 4, D (1, 20 s) at 25.
fn run(opts: LasOptions, ckpt: CheckpointModel, sample_interval_ms: u64) -> RunReport {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("jobs.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\nA,0,30,2\nB,3,12,1\nC,4,8,1\nD,25,20,1\n").unwrap();
    let spec = RunSpec {
        workload: WorkloadSource::Trace { path: trace, format: TraceFormat::JobsCsv, columns: ColumnMap::default() },
        ..spec_for(opts, ckpt, sample_interval_ms)
    };
    run_one(&spec, |_| {}).unwrap()
}

/// The run spec of [`run`] (its workload a placeholder path).
fn spec_for(opts: LasOptions, ckpt: CheckpointModel, sample_interval_ms: u64) -> RunSpec {
    let trace = std::path::PathBuf::from("jobs.csv");
    RunSpec {
        policy: PolicySpec::Las(opts),
        checkpoint: ckpt,
        sample_interval_ms,
        ..RunSpec::new(
            WorkloadSource::Trace { path: trace, format: TraceFormat::JobsCsv, columns: ColumnMap::default() },
            ClusterChoice::Uniform { nodes: 1, gpus_per_node: 2, gpu_type: None },
        )
    }
}

fn opts(service: LasService, work_conserving: bool) -> LasOptions {
    LasOptions { service, round: 10, work_conserving, ..Default::default() }
}

fn row(n: &str, first: u64, last: u64, end: u64, p: u32, w: u64) -> Row {
    (n.to_string(), first, last, end, p, w)
}

#[test]
fn gpu_time_service_by_hand() {
    // Attained GPU-s in (). t0 A starts (both GPUs). t3 B, t4 C wait.
    // t10 round: B(0) C(0) A(20): B and C take the 2 GPUs, A (2) does not
    // fit: A preempted at 10 with 20 s left; B, C start at 10.
    // t18 C ends; A (2 GPUs) does not fit the free one.
    // t20 round: B(10) A(20): B keeps its GPU, A still does not fit.
    // t22 B ends: A resumes on the 2 free GPUs (work-conserving), 20 s left.
    // t25 D arrives, waits. t30 round: D(0) A(20 + 8 x 2 = 36): D selected,
    // A preempted at 30 with 12 s left (the free GPU stays idle: A needs 2).
    // t40 round: D(10) A(36): no change. t50 D ends (round too): A resumes,
    // ends 62. Waits: A 10-22 + 30-50 = 32 (= 62 - 30), B 3-10 = 7, C 6,
    // D 25-30 = 5.
    let want = vec![
        row("A", 0, 50, 62, 2, 32),
        row("B", 10, 10, 22, 0, 7),
        row("C", 10, 10, 18, 0, 6),
        row("D", 30, 30, 50, 0, 5),
    ];
    let r = run(opts(LasService::GpuTime, true), CheckpointModel::None, 0);
    assert_eq!(r.summary.policy, "las");
    assert_eq!(rows(&r), want);
    assert_eq!((r.summary.jobs_preempted, r.summary.preemptions), (1, 2));
    // Preemptions only at boundaries: the schedule does not move with
    // timeline samples every 1 s or 7 s.
    for ms in [1_000, 7_000] {
        assert_eq!(rows(&run(opts(LasService::GpuTime, true), CheckpointModel::None, ms)), want);
    }
}

#[test]
fn time_service_by_hand() {
    // Attained s in (). t10 round as with GPU-time: A(10) preempted, B, C
    // start. t18 C ends. t20 round: B(10) ties A(10): submission order, A
    // first: A (2 GPUs) selected, B preempted at 20 (2 s left); A resumes
    // on B's GPU and C's, 20 s left. t25 D waits. t30 round: D(0) B(10)
    // A(20): D and B take the 2 GPUs, A preempted at 30 (10 s left); D 30-50,
    // B 30-32. t32 B ends: A (2) does not fit. t40 round: D(10) A(20): no
    // change. t50 D ends: A resumes, ends 60.
    // Waits: A 10-20 + 30-50 = 30 (= 60 - 30), B 3-10 + 20-30 = 17
    // (= 32 - 3 - 12), C 6, D 5.
    let want = vec![
        row("A", 0, 50, 60, 2, 30),
        row("B", 10, 30, 32, 1, 17),
        row("C", 10, 10, 18, 0, 6),
        row("D", 30, 30, 50, 0, 5),
    ];
    let r = run(opts(LasService::Time, true), CheckpointModel::None, 0);
    assert_eq!(rows(&r), want);
    assert_eq!((r.summary.jobs_preempted, r.summary.preemptions), (2, 3));
}

#[test]
fn round_only_starts_by_hand() {
    // work-conserving=false, GPU-time: jobs start only at boundaries.
    // t0 is a boundary: A starts. t10 round: A preempted, B and C start.
    // C ends 18, B 22: their GPUs stay idle (A waits for a boundary).
    // t20 round: B(10) A(20): A does not fit beside B. t30 round: D(0)
    // A(20): D starts, A (2) does not fit beside it. t40: no change.
    // t50 D ends, round: A resumes with 20 s left: ends 70.
    // Waits: A 10-50 = 40 (= 70 - 30), B 7, C 6, D 5.
    let want = vec![
        row("A", 0, 50, 70, 1, 40),
        row("B", 10, 10, 22, 0, 7),
        row("C", 10, 10, 18, 0, 6),
        row("D", 30, 30, 50, 0, 5),
    ];
    assert_eq!(rows(&run(opts(LasService::GpuTime, false), CheckpointModel::None, 0)), want);
}

#[test]
fn checkpoint_cost_by_hand() {
    // GPU-time, work-conserving, Gandiva's 100 ms per preemption.
    // t10 A preempted: 20 + 0.1 = 20.1 s left. B, C 10-22, 10-18.
    // t22 A resumes (20.1 s). t30 round: A(20 + 8 x 2 = 36) D(0): A preempted
    // again: 20.1 - 8 + 0.1 = 12.2 s left. t50 D ends: A resumes, ends
    // 50 + 12.2 = 62.2 (62 in whole s). Waited 12 + 20 = 32 s; 200 ms charged.
    let r = run(opts(LasService::GpuTime, true), CheckpointModel::Gandiva, 0);
    let a = rows(&r).into_iter().find(|x| x.0 == "A").unwrap();
    assert_eq!(a, row("A", 0, 50, 62, 2, 32));
    let JobState::Completed(d) = r.output.jobs.iter().find(|(s, _)| s.name == "A").unwrap().1 else { unreachable!() };
    assert_eq!(d.end.as_ms(), 62_200);
    assert_eq!(r.output.stats.checkpoint_ms, 200);
    // The Helios table's 30 s for a 2-GPU job (60 s above 8) against 10-s
    // rounds: refused, since a job preempted every round would not progress.
    let mut spec = spec_for(opts(LasService::GpuTime, true), CheckpointModel::HeliosTable, 0);
    spec.sample_interval_ms = 0;
    let e = spec.validate().unwrap_err();
    // Two settings that cannot go together, at the key `checkpoint`.
    assert_eq!((e.kind, e.key.as_deref()), (dlsched::error::ConfigErrorKind::Conflict, Some("checkpoint")));
    let e = e.message;
    assert!(e.contains("not longer than") && e.contains("helios-table"), "{e}");
}

#[test]
fn runs_from_the_command_line_on_vcs_heterogeneous_clusters_and_the_table_model() {
    let root = env!("CARGO_MANIFEST_DIR");
    let (trace, vcs) = (format!("{root}/traces/example_jobs.csv"), format!("{root}/traces/example_vcs.csv"));
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = out.to_str().unwrap();
    let cases: [&[&str]; 4] = [
        &["--trace", &trace, "--vcs", &vcs, "--policy", "las", "--policy-opt", "round=60"],
        &[
            "--trace",
            &trace,
            "--vcs",
            &vcs,
            "--policy",
            "las",
            "--policy-opt",
            "service=time",
            "--checkpoint",
            "helios-table",
        ],
        &["--cluster", "alibaba-openb", "--jobs", "200", "--policy", "las", "--policy-opt", "work-conserving=false"],
        &["--jobs", "200", "--rate-model", "table", "--policy", "las", "--placement", "first-fit"],
    ];
    for args in cases {
        let mut a = vec!["simulate", "--out", o];
        a.extend(args);
        let r = dlsched(&a);
        assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(s["jobs_unfinished"], 0, "{args:?}");
        assert!(s["jobs_completed"].as_u64().unwrap() > 0, "{args:?}");
        assert_eq!(s["policy"], "las", "{args:?}");
    }
    let r = dlsched(&["simulate", "--policy", "las", "--policy-opt", "round=0"]);
    assert!(!r.status.success());
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(e.contains("las: round must be 1 to 1e11 s, got 0"), "{e}");
}

#[test]
fn sweep_files_sweep_the_round() {
    use dlsched::experiment::sweep::{Experiment, to_run_spec};
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("e.toml");
    std::fs::write(
        &p,
        "question = \"q\"\n[base]\npolicy = \"las\"\npolicy_opt.service = \"time\"\n[sweep]\npolicy_opt.round = [60, 360]\n",
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    let mut rounds: Vec<(u64, LasService)> = e
        .runs
        .iter()
        .map(|r| match to_run_spec(&r.params, &p).unwrap().policy {
            PolicySpec::Las(o) => (o.round, o.service),
            other => panic!("{other:?}"),
        })
        .collect();
    rounds.sort_by_key(|r| r.0);
    assert_eq!(rounds, vec![(60, LasService::Time), (360, LasService::Time)]);
}
