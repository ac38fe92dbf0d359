//! The K80 ground truth of GENIE's task types as a run's truth (`--rate-model
//! genie-k80`): selected once for the generator, the profiler and the engine;
//! refused where it does not apply.

use dlsched::cluster::ClusterPreset;
use dlsched::experiment::{ClusterChoice, RateModelKind, RunSpec, WorkloadSource, run_one};
use dlsched::policy::genie::GenieVariant;
use dlsched::policy::registry::{GenieFamilyOptions, PolicySpec};
use dlsched::workload::genie::{EctBasis, GenieWorkloadSpec};

fn spec(preset: ClusterPreset, rate_model: RateModelKind, models: Option<std::path::PathBuf>) -> RunSpec {
    RunSpec {
        sample_interval_ms: 0,
        rate_model,
        policy: PolicySpec::genie_family(GenieVariant::Genie, GenieFamilyOptions { models, ..Default::default() }),
        ..RunSpec::new(
            WorkloadSource::Genie(GenieWorkloadSpec {
                jobs_per_hour: 10.0,
                hours: 3.0,
                ect: EctBasis::Predicted,
                tasks: None,
                mix: Default::default(),
            }),
            ClusterChoice::Preset { preset },
        )
    }
}

#[test]
fn genie_k80_runs_on_lab16_deterministically_and_differs_from_the_table_truth() {
    let r = run_one(&spec(ClusterPreset::Lab16, RateModelKind::GenieK80, None), |_| {}).unwrap();
    assert_eq!(r.summary.jobs_completed, r.summary.jobs_total);
    assert_eq!(r.summary.rate_model, "profile-genie-k80");
    let jobs = |r: &dlsched::experiment::RunReport| {
        let mut v = Vec::new();
        dlsched::metrics::export::write_jobs_csv(&r.output, &mut v).unwrap();
        v
    };
    let again = run_one(&spec(ClusterPreset::Lab16, RateModelKind::GenieK80, None), |_| {}).unwrap();
    assert!(jobs(&r) == jobs(&again));
    // Same tasks (single-GPU latencies are the same in both truths), other multi-GPU speeds.
    let table = run_one(&spec(ClusterPreset::Lab16, RateModelKind::Table, None), |_| {}).unwrap();
    assert_eq!(r.summary.jobs_total, table.summary.jobs_total);
    assert!(jobs(&r) != jobs(&table));
}

#[test]
fn genie_k80_is_refused_off_k80_and_with_models_of_the_other_truth() {
    let err = |s: &RunSpec| run_one(s, |_| {}).err().map(|e| e.to_string()).unwrap_or_default();
    let e = err(&spec(ClusterPreset::Philly, RateModelKind::GenieK80, None));
    assert!(e.contains("genie-k80") && e.contains("K80"), "{e}");
    // Models profiled against the table truth, run at genie-k80: refused, naming both.
    let db = dlsched::profile::db::ProfileDb::builtin();
    let p = dlsched::policy::genie::profile(&db, "builtin", "k80", 4, 4, 1, Default::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    std::fs::write(&path, serde_json::to_string(&serde_json::json!({ "models": p })).unwrap()).unwrap();
    let e = err(&spec(ClusterPreset::Lab16, RateModelKind::GenieK80, Some(path.clone())));
    assert!(e.contains("`table` ground truth") && e.contains("`genie-k80`"), "{e}");
    // The same models at the table truth are accepted.
    let r = run_one(&spec(ClusterPreset::Lab16, RateModelKind::Table, Some(path)), |_| {}).unwrap();
    assert_eq!(r.summary.jobs_completed, r.summary.jobs_total);
}
