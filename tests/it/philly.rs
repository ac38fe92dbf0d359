//! Replay of the real Philly job list (needs ../shared).

use dlsched::cluster::ClusterPreset;
use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
use dlsched::trace::{ColumnMap, TraceFormat};

use crate::common::shared;

#[test]
fn rfold_philly_fifo_completes_every_usable_job() {
    let Some(shared) = shared("Philly RFold replay") else {
        return;
    };
    let path = shared.join("traces/philly/rfold_philly_jobs.csv");
    // Independent count: data lines, and those with a positive duration (last field).
    let text = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).filter(|l| !l.trim().is_empty()).collect();
    let usable = rows.iter().filter(|l| l.rsplit(',').next().unwrap().trim().parse::<f64>().unwrap() > 0.0).count();
    let spec = RunSpec::new(
        WorkloadSource::Trace { path, format: TraceFormat::Philly, columns: ColumnMap::default() },
        ClusterChoice::Preset { preset: ClusterPreset::Philly },
    );
    let r = run_one(&spec, |_| {}).unwrap();
    assert_eq!(r.summary.jobs_total as usize, rows.len());
    assert_eq!(r.summary.jobs_completed as usize, usable);
    assert_eq!(r.summary.jobs_unfinished, 0);
    assert_eq!(r.summary.jobs_skipped as usize, rows.len() - usable);
    assert_eq!(
        r.summary.jobs_skipped_by_reason.get("nonpositive_duration").copied(),
        Some((rows.len() - usable) as u64)
    );
    // Trace speed: every job runs exactly its trace duration.
    for (spec, state) in r.output.jobs.iter() {
        let dlsched::job::JobState::Completed(d) = state else { panic!("{} unfinished", spec.name) };
        assert_eq!(d.end.since(d.start), spec.duration_ms, "{}", spec.name);
    }
}

#[test]
fn synthetic_tables_are_derived_from_the_philly_list() {
    let Some(shared) = shared("synthetic mix derivation") else {
        return;
    };
    let path = shared.join("traces/philly/rfold_philly_jobs.csv");
    let t = dlsched::trace::load_trace(&path, TraceFormat::PhillyRfold, &ColumnMap::default()).unwrap();
    let m = dlsched::workload::synthetic::philly_mix_from(&t.records);
    assert_eq!(m.gpu_counts, dlsched::workload::synthetic::PHILLY_GPU_MIX.to_vec());
    for (got, want) in m.duration_quantiles.iter().zip(dlsched::workload::synthetic::PHILLY_DURATION_QUANTILES) {
        assert_eq!(got.0, want.0);
        assert!((got.1 - want.1).abs() < 0.01, "quantile {}: file {} table {}", got.0, got.1, want.1);
    }
}
