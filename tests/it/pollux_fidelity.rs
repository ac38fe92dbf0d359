//! `tiresias-tuned` and `optimus` against the Pollux simulator's own per-job
//! JCTs (`../shared/fidelity/pollux-sim/*_summary.json`) on its 8 workloads
//! (`../shared/traces/pollux-workloads`), 16 nodes × 4 T4 GPUs. Skipped, with
//! a printed reason, when `../shared` is absent.

use std::collections::BTreeMap;
use std::path::Path;

use dlsched::engine::ElasticTiming;
use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
use dlsched::job::JobState;
use dlsched::policy::optimus::OptimusOptions;
use dlsched::policy::registry::PolicySpec;
use dlsched::policy::tiresias_tuned::TiresiasTunedOptions;
use dlsched::trace::{ColumnMap, TraceFormat};

use crate::common::shared;

/// Per-workload figures of one policy: (our mean JCT, the reference's, jobs
/// whose JCT is within 1 s of the reference's).
type Figures = Vec<(f64, f64, usize)>;

/// Runs `policy` on the 8 workloads under `timing` and compares with the
/// reference file `summary` (its `jcts`: workload → job → JCT, s).
fn compare(shared: &Path, policy: &PolicySpec, timing: ElasticTiming, summary: &str) -> Figures {
    let text = std::fs::read_to_string(shared.join("fidelity/pollux-sim").join(summary)).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for w in 1..=8 {
        let name = format!("workload-{w}");
        let path = shared.join(format!("traces/pollux-workloads/{name}.csv"));
        let workload = WorkloadSource::Trace { path, format: TraceFormat::Auto, columns: ColumnMap::default() };
        let cluster = ClusterChoice::Uniform { nodes: 16, gpus_per_node: 4, gpu_type: Some("t4".into()) };
        let spec = RunSpec { policy: policy.clone(), elastic_timing: timing, ..RunSpec::new(workload, cluster) };
        let report = run_one(&spec, |_| {}).unwrap();
        let mut ours = BTreeMap::new();
        for (s, state) in report.output.jobs.iter() {
            if let JobState::Completed(d) = state {
                ours.insert(s.name.to_string(), d.end.since(s.submit) as f64 / 1000.0);
            }
        }
        let refs = reference["jcts"][&name].as_object().unwrap();
        assert_eq!((ours.len(), refs.len()), (160, 160), "{name}");
        let mean_ref = refs.values().map(|v| v.as_f64().unwrap()).sum::<f64>() / 160.0;
        let mean_ours = ours.values().sum::<f64>() / 160.0;
        let matching = refs.iter().filter(|(k, v)| (ours[k.as_str()] - v.as_f64().unwrap()).abs() < 1.0).count();
        eprintln!(
            "{} {timing:?} {name}: mean JCT {mean_ours:.1} s, reference {mean_ref:.1} s ({:+.2} %), {matching}/160 jobs within 1 s",
            policy.kind(),
            100.0 * (mean_ours / mean_ref - 1.0)
        );
        out.push((mean_ours, mean_ref, matching));
    }
    out
}

/// The mean of the per-workload means over the reference's, minus 1.
fn overall(f: &Figures) -> f64 {
    f.iter().map(|x| x.0).sum::<f64>() / f.iter().map(|x| x.1).sum::<f64>() - 1.0
}

const TIRESIAS: &str = "tiresias_load1.0_summary.json";
const OPTIMUS: &str = "optimus_load1.0_summary.json";

/// [`compare`] of `tiresias-tuned` and of `optimus`, at their default options, under `timing`.
fn tiresias_and_optimus(shared: &Path, timing: ElasticTiming) -> (Figures, Figures) {
    let t = compare(shared, &PolicySpec::TiresiasTuned(TiresiasTunedOptions::default()), timing, TIRESIAS);
    let o = compare(shared, &PolicySpec::Optimus(OptimusOptions::default()), timing, OPTIMUS);
    (t, o)
}

#[test]
fn with_the_simulators_timing_tiresias_tuned_and_optimus_match_job_for_job() {
    let Some(shared) = shared("Pollux simulator fidelity") else { return };
    let (t, o) = tiresias_and_optimus(&shared, ElasticTiming::PolluxSim);
    // Every job of every workload ends on the reference's second, under
    // both policies (Optimus reads each job's epoch, so this also checks
    // that a zero-second epoch crossing at a tick comes after the tick's
    // decision, as in the simulator's next step: before that rule, 126 to
    // 159 Optimus jobs per workload matched).
    for (name, runs) in [("tiresias-tuned", &t), ("optimus", &o)] {
        for (i, (ours, reference, matching)) in runs.iter().enumerate() {
            assert_eq!(*matching, 160, "{name} workload {}: {ours} against {reference}", i + 1);
            assert!((ours - reference).abs() < 1e-6, "{name} workload {}: {ours} against {reference}", i + 1);
        }
    }
}

#[test]
fn with_exact_event_times_the_means_stay_close_to_the_simulators() {
    let Some(shared) = shared("Pollux simulator fidelity") else { return };
    let (t, o) = tiresias_and_optimus(&shared, ElasticTiming::Exact);
    // Exact event times (the default): every epoch ends when its work is
    // done, where the simulator rounds each epoch's end to a whole second
    // (a cifar10 job's 100 epochs drift by up to tens of seconds), so few
    // jobs match to the second, and a job that ends just before rather than
    // just after a 60-s tick changes the next allocations. Per workload
    // within 1 % but Tiresias on workload 7 (−3.9 %), and the means of the 8
    // within 1 %.
    for (i, (ours, reference, _)) in t.iter().chain(&o).enumerate() {
        let tol = if i == 6 { 0.04 } else { 0.01 };
        assert!((ours / reference - 1.0).abs() < tol, "run {i}: {ours} against {reference}");
    }
    assert!(overall(&t).abs() < 0.01 && overall(&o).abs() < 0.01, "{} {}", overall(&t), overall(&o));
}
