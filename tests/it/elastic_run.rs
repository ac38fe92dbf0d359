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
