//! A work-defined job through the whole run pipeline: an `elastic-workload`
//! trace runs under a rigid policy at its tuned configuration, by the Pollux
//! application model, and its JCT is the model's own sum over its epochs.

use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
use dlsched::profile::elastic::ProgressModel;
use dlsched::profile::pollux::PolluxApps;
use dlsched::trace::{ColumnMap, TraceFormat};

#[test]
fn a_work_defined_job_runs_its_epochs_at_the_models_goodput() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("w.csv");
    // BERT on one GPU at its initial batch (12), submitted at 5 s.
    std::fs::write(&trace, "name,time,application,num_replicas,batch_size\nbert-0,5,bert,1,12\n").unwrap();
    let workload = WorkloadSource::Trace { path: trace, format: TraceFormat::Auto, columns: ColumnMap::default() };
    let cluster = ClusterChoice::Uniform { nodes: 1, gpus_per_node: 4, gpu_type: Some("t4".into()) };
    let spec = RunSpec::new(workload, cluster);
    let report = run_one(&spec, |_| {}).unwrap();
    assert_eq!((report.summary.jobs_total, report.summary.jobs_completed), (1, 1));
    // The independent route: the model's epochs one by one. The job starts
    // at once (the cluster is empty) and first waits Pollux's 30-s re-scale
    // delay; then each epoch takes (its progress) / (goodput in it), and the
    // engine rounds each epoch's end up to a whole ms (at most 1 ms each).
    let apps = PolluxApps::builtin();
    let cfg = apps.tuned_config("bert", &[1], 12);
    assert_eq!((cfg.atomic_bsz, cfg.accum_steps), (12, 0)); // 12 / 1 GPU, max local batch 12
    let target = apps.target("bert").unwrap();
    let (mut p, mut s, mut epochs) = (0.0, 30.0, 0);
    while p < target {
        let next = apps.next_breakpoint("bert", p);
        s += (next - p) / apps.goodput("bert", &cfg, p).unwrap();
        p = next;
        epochs += 1;
    }
    assert_eq!(epochs, 2); // BERT trains 2 epochs
    let jct = report.summary.jct_mean_s;
    assert!(jct >= s - 1e-6 && jct <= s + 0.001 * f64::from(epochs) + 1e-6, "JCT {jct} s, the model's sum {s} s");
    assert!(s > 60.0, "{s}");
}

/// Under `--rate-model table` a work-defined job draws no model or batch from
/// the profile database (it runs at its progress model's speed): its row of
/// `jobs.csv` and its JCT are those of the trace-speed run. Before the fix, a
/// Pollux workload's jobs drew models (e.g. `bert-squad` for a cifar10 job).
#[test]
fn the_rate_model_draws_nothing_for_work_defined_jobs() {
    use dlsched::experiment::RateModelKind;
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("w.csv");
    std::fs::write(
        &trace,
        "name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,2,256\nbert-1,5,bert,1,12\n",
    )
    .unwrap();
    let run = |rate_model| {
        let workload =
            WorkloadSource::Trace { path: trace.clone(), format: TraceFormat::Auto, columns: ColumnMap::default() };
        let cluster = ClusterChoice::Uniform { nodes: 1, gpus_per_node: 4, gpu_type: Some("t4".into()) };
        let mut spec = RunSpec::new(workload, cluster);
        spec.rate_model = rate_model;
        run_one(&spec, |_| {}).unwrap()
    };
    let (trace_speed, table) = (run(RateModelKind::Trace), run(RateModelKind::Table));
    assert_eq!(table.summary.jobs_completed, 2);
    for j in 0..2 {
        let spec = table.output.jobs.spec(dlsched::ids::JobId(j));
        assert_eq!((spec.model(), spec.local_bsz()), (None, None), "job {j}");
    }
    assert_eq!(table.summary.jct_mean_s, trace_speed.summary.jct_mean_s);
}

/// A sample budget and a deadline through the whole pipeline: an
/// `elastic-workload` row with `max_sample` and `ddl` ends at its budget
/// over its sample rate by the Pollux model's step times, and the summary
/// counts its deadline on the trace's clock.
#[test]
fn a_sample_budget_from_the_trace_ends_the_job_and_its_deadline_is_counted() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("w.csv");
    // BERT on one GPU at batch 12, submitted at 5 s, 6,000 samples (BERT's
    // target is about 177,000 samples at batch 12: the budget ends it).
    // Two copies, one with a deadline it meets (1,000 s), one it misses (40 s).
    let rows = "b-met,5,bert,1,12,1000,6000\nb-late,5,bert,1,12,40,6000\n";
    std::fs::write(&trace, format!("name,time,application,num_replicas,batch_size,ddl,max_sample\n{rows}")).unwrap();
    let workload = WorkloadSource::Trace { path: trace, format: TraceFormat::Auto, columns: ColumnMap::default() };
    let cluster = ClusterChoice::Uniform { nodes: 1, gpus_per_node: 4, gpu_type: Some("t4".into()) };
    let report = run_one(&RunSpec::new(workload, cluster), |_| {}).unwrap();
    assert_eq!(report.summary.jobs_completed, 2);
    // The independent route: the model's step time on 1 GPU at atomic
    // batch 12 (no accumulation): 12 samples per step; both jobs start at
    // 5 s on GPUs of their own, wait 30 s, then take 6,000 / (12 / step) s,
    // rounded up to a whole ms.
    let apps = PolluxApps::builtin();
    let cfg = apps.tuned_config("bert", &[1], 12);
    assert_eq!((cfg.atomic_bsz, cfg.accum_steps), (12, 0));
    let (step, _sync) = apps.step_times("bert", &cfg).unwrap();
    let run_ms = (6000.0 / (12.0 / step) * 1000.0 - 1e-6).ceil();
    let jct_s = (30_000.0 + run_ms) / 1000.0;
    assert!(
        (report.summary.jct_mean_s - jct_s).abs() < 1e-9,
        "JCT {} s, expected {jct_s} s",
        report.summary.jct_mean_s
    );
    assert!(jct_s < 1000.0 - 5.0 && jct_s > 40.0 - 5.0, "{jct_s}");
    // One deadline met, one missed.
    let s = &report.summary;
    assert_eq!((s.deadline_jobs, s.deadline_late_jobs), (Some(2), Some(1)));
    assert_eq!(s.deadline_satisfactory_ratio, Some(0.5));
}
