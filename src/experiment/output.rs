//! The run directory: the files a run writes (`manifest.json` last, which
//! marks it complete), how an earlier run's are cleared, and how readers
//! check that a directory holds a complete run.

use std::path::Path;

use super::run::RunReport;
use crate::metrics::export;

/// The data files a run directory may hold, `manifest.json` first. A run
/// writes `manifest.json` last: its presence marks a complete run directory.
pub const OUTPUT_FILES: [&str; 9] = [
    "manifest.json",
    "jobs.csv",
    "summary.json",
    "vc_summary.csv",
    "timeline.csv",
    "vc_timeline.csv",
    "skipped.csv",
    "timing.json",
    "learning_curve.csv",
];

/// The charts `dlsched plot` draws into a run directory ([`crate::plot::plot_run`]).
pub const PLOT_FILES: [&str; 14] = [
    "jct_cdf.svg",
    "jct_cdf.png",
    "queue_delay_cdf.svg",
    "queue_delay_cdf.png",
    "gpu_utilization.svg",
    "gpu_utilization.png",
    "queue_length.svg",
    "queue_length.png",
    "learning_curve.svg",
    "learning_curve.png",
    "vc_jct_cdf.svg",
    "vc_jct_cdf.png",
    "vc_gpu_utilization.svg",
    "vc_gpu_utilization.png",
];

/// The CSV tables of a run directory that `--output-format parquet|both`
/// also writes as `<table>.parquet` (each only when its `<table>.csv` was
/// written; see `crate::metrics::parquet` (feature `parquet`) for the conversion). Adding a
/// table is one entry here.
pub const PARQUET_TABLES: [&str; 4] = ["jobs", "timeline", "vc_summary", "vc_timeline"];

/// The message of a parquet output format asked of a build without the
/// cargo feature `parquet`.
pub const NO_PARQUET: &str = "built without parquet support; rebuild with `cargo build --release --features parquet`";

/// Which files a run directory's tables ([`PARQUET_TABLES`]) are written as
/// (`--output-format` of `simulate` and `sweep`, sweep key `output_format`).
/// Not part of the run spec: it changes no simulated value, so
/// `manifest.json` does not record it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum OutputFormat {
    /// CSV only (the default; the files every earlier version wrote).
    #[default]
    Csv,
    /// Parquet instead of CSV (`jobs.parquet` instead of `jobs.csv`, ...).
    /// `dlsched plot` reads the CSV tables, so it cannot draw such a run.
    Parquet,
    /// Both, side by side.
    Both,
}

crate::names::value_names!(OutputFormat { Csv => "csv", Parquet => "parquet", Both => "both" });

impl OutputFormat {
    /// Whether the CSV tables are kept.
    pub fn csv(self) -> bool {
        self != OutputFormat::Parquet
    }

    /// Whether parquet tables are written.
    pub fn parquet(self) -> bool {
        self != OutputFormat::Csv
    }

    /// Checks that this build can write the format.
    ///
    /// # Errors
    /// [`NO_PARQUET`] for a parquet format in a build without the feature.
    pub fn check_supported(self) -> Result<(), String> {
        if self.parquet() && !cfg!(feature = "parquet") { Err(NO_PARQUET.to_string()) } else { Ok(()) }
    }
}

/// Every file name a run writes into a run directory or that is drawn from
/// it: [`OUTPUT_FILES`], the parquet tables ([`PARQUET_TABLES`]),
/// [`PLOT_FILES`], and the temporary `<name>.tmp` each is written under
/// before it is renamed into place ([`export::write_atomic`]). The one
/// listing of a run directory's contents.
pub fn run_dir_files() -> impl Iterator<Item = String> {
    OUTPUT_FILES
        .iter()
        .map(|f| f.to_string())
        .chain(PARQUET_TABLES.iter().map(|t| format!("{t}.parquet")))
        .chain(PLOT_FILES.iter().map(|f| f.to_string()))
        .flat_map(|f| [f.clone(), format!("{f}.tmp")])
}

/// Removes an earlier run's files from `dir` (all of [`run_dir_files`]),
/// `manifest.json` first, so that a rerun interrupted at any point leaves no
/// old file beside new ones and no manifest: a reader ([`check_run_dir`])
/// then refuses the directory. Other files are left alone.
///
/// # Errors
/// The first I/O error other than a missing file, with the path.
pub fn clear_run_dir(dir: &Path) -> std::io::Result<()> {
    for name in run_dir_files() {
        let p = dir.join(&name);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(e.kind(), format!("removing the earlier run's {}: {e}", p.display())));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks that `dir` holds a complete run: a `manifest.json` that parses as a
/// dlsched manifest (written last by [`write_run_dir`]) and the `jobs.csv`
/// (or, for `--output-format parquet`, `jobs.parquet`) and `summary.json`
/// every run writes. For readers of a run directory (`dlsched
/// compare`, `dlsched plot`, `sweep --resume`), so that they never use the
/// files of a run that did not finish, or an earlier run's left beside them.
///
/// # Errors
/// A message naming the directory and what is missing.
pub fn check_run_dir(dir: &Path) -> Result<(), String> {
    let manifest = dir.join("manifest.json");
    let text = match std::fs::read_to_string(&manifest) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{}: not a complete run directory: manifest.json is missing (a run writes it last, so the run that wrote here did not finish, and its other files may be an earlier run's); rerun it",
                dir.display()
            ));
        }
        Err(e) => return Err(format!("{}: {e}", manifest.display())),
    };
    let complete = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|v| v.get("dlsched_version").is_some_and(serde_json::Value::is_string));
    if !complete {
        return Err(format!(
            "{}: not a complete run manifest (no JSON object with dlsched_version); rerun the run",
            manifest.display()
        ));
    }
    for f in ["jobs.csv", "summary.json"] {
        let present = dir.join(f).is_file() || (f == "jobs.csv" && dir.join("jobs.parquet").is_file());
        if !present {
            return Err(format!(
                "{}: not a complete run directory: manifest.json is there but {f} is missing; rerun it",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Checks that the complete run in `dir` has its CSV tables, for readers
/// of them (`dlsched plot`, `dlsched compare`): a run written with
/// `--output-format parquet` has `jobs.parquet` instead.
///
/// # Errors
/// A message naming the directory and how to get the CSVs.
pub fn check_csv_tables(dir: &Path) -> Result<(), String> {
    if !dir.join("jobs.csv").is_file() && dir.join("jobs.parquet").is_file() {
        return Err(format!(
            "{}: this run was written with --output-format parquet (jobs.parquet, no jobs.csv), and this command reads the CSV tables; rerun it with --output-format both",
            dir.display()
        ));
    }
    Ok(())
}

/// Writes a run directory: `manifest.json`, `jobs.csv`, `summary.json`,
/// `vc_summary.csv`, `timeline.csv`, `vc_timeline.csv`, and `skipped.csv` when
/// rows were skipped.
/// An earlier run's files go first ([`clear_run_dir`]: manifest, data files,
/// charts, temporaries), then the data files are written, then the manifest,
/// last: a directory without one is a run that did not finish.
///
/// # Errors
/// The first I/O error.
pub fn write_run_dir(report: &RunReport, dir: &Path) -> std::io::Result<()> {
    write_run_dir_as(report, dir, OutputFormat::Csv)
}

/// [`write_run_dir`] with the tables in `format`: with parquet, each CSV of
/// [`PARQUET_TABLES`] the run wrote is converted to `<table>.parquet`
/// (`crate::metrics::parquet` (feature `parquet`), from the CSV file itself, so the two never
/// disagree), and for [`OutputFormat::Parquet`] the CSV is then removed. All
/// before the manifest, so the completeness rule holds.
///
/// # Errors
/// The first I/O error; [`NO_PARQUET`] (as an `Unsupported` error) for a
/// parquet format in a build without the feature, before anything is written.
pub fn write_run_dir_as(report: &RunReport, dir: &Path, format: OutputFormat) -> std::io::Result<()> {
    format.check_supported().map_err(|e| std::io::Error::new(std::io::ErrorKind::Unsupported, e))?;
    std::fs::create_dir_all(dir).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    clear_run_dir(dir)?;
    let cluster = report.output.cluster.spec();
    let manifest = serde_json::json!({
        "dlsched_version": env!("CARGO_PKG_VERSION"),
        "spec": &report.spec,
        "seed": report.spec.seed,
        "input": &report.input,
        "cluster": {
            "name": cluster.name,
            "nodes": cluster.nodes.len(),
            "gpus": cluster.total_gpus(),
            "vcs": cluster.vc_names,
        },
        "policy": report.output.policy,
        "rate_model": report.output.model,
        "engine": report.output.stats,
    });
    // The progress model of work-defined jobs when it is Sia's (the Pollux
    // and ElasticFlow runs' manifests stay as they were: their model follows
    // from the trace and the cluster).
    let mut manifest = manifest;
    if let Some(name) = report.output.jobs.progress_model().map(|m| m.name()).filter(|&n| n == "sia")
        && let Some(m) = manifest.as_object_mut()
    {
        m.insert("progress_model".into(), serde_json::Value::from(name));
    }
    let json = |v: &serde_json::Value| {
        let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
        s.push('\n');
        s.into_bytes()
    };
    // The old files are gone, so the large files need not keep an old one
    // until the rename (see `write_replacing_with`).
    export::write_replacing_with(&dir.join("jobs.csv"), |w| export::write_jobs_csv(&report.output, w))?;
    export::write_atomic(&dir.join("vc_summary.csv"), &export::vc_summary_csv(&report.vcs))?;
    let timeline = export::timeline_csv(&report.output, &report.recording);
    export::write_replacing_with(&dir.join("timeline.csv"), |w| std::io::Write::write_all(w, &timeline))?;
    export::write_replacing_with(&dir.join("vc_timeline.csv"), |w| {
        export::write_vc_timeline_csv(&report.output, &report.recording, w)
    })?;
    if !report.skipped.is_empty() || !report.input.malformed.is_empty() {
        export::write_atomic(&dir.join("skipped.csv"), &report.skipped_csv())?;
    }
    export::write_atomic(&dir.join("summary.json"), &json(&serde_json::to_value(&report.summary).unwrap_or_default()))?;
    // Wall-clock decision cost: the one output that differs from run to run,
    // so it is kept out of summary.json and jobs.csv.
    if let Some(t) = &report.recording.timing {
        let makespan = report.summary.makespan_s;
        let v = serde_json::json!({
            "note": "wall-clock time of the policy's decisions on this machine; not deterministic",
            "decisions": t.decisions,
            "decision_time_total_s": t.total_s,
            "decision_time_mean_s": if t.decisions > 0 { t.total_s / t.decisions as f64 } else { 0.0 },
            "decision_time_max_s": t.max_s,
            "fraction_of_makespan": if makespan > 0.0 { t.total_s / makespan } else { 0.0 },
        });
        // A policy with a solver (Sia) adds each round's solve time.
        let rounds = &report.output.solver_rounds;
        let v = if rounds.is_empty() {
            v
        } else {
            let mut v = v;
            let total: f64 = rounds.iter().map(|r| r.solve_s).sum();
            let max = rounds.iter().map(|r| r.solve_s).fold(0.0, f64::max);
            v["solver_rounds"] = serde_json::json!(rounds.len());
            v["solver_time_total_s"] = serde_json::json!(total);
            v["solver_time_max_s"] = serde_json::json!(max);
            v["rounds"] = serde_json::to_value(rounds).unwrap_or_default();
            v
        };
        export::write_atomic(&dir.join("timing.json"), &json(&v))?;
    }
    for (name, text) in &report.output.policy_files {
        // Listed, so that a rerun removes it (`clear_run_dir`).
        debug_assert!(OUTPUT_FILES.contains(name), "{name} is not in OUTPUT_FILES");
        export::write_atomic(&dir.join(name), text.as_bytes())?;
    }
    if format.parquet() {
        write_parquet_tables(dir, format.csv())?;
    }
    // The manifest last: its presence marks a complete run directory.
    export::write_atomic(&dir.join("manifest.json"), &json(&manifest))?;
    Ok(())
}

/// Converts each table of [`PARQUET_TABLES`] whose CSV is in `dir` to
/// parquet; removes the CSV unless `keep_csv`.
#[cfg(feature = "parquet")]
fn write_parquet_tables(dir: &Path, keep_csv: bool) -> std::io::Result<()> {
    for table in PARQUET_TABLES {
        let csv = dir.join(format!("{table}.csv"));
        if !csv.is_file() {
            continue;
        }
        crate::metrics::parquet::table_to_parquet(dir, table)?;
        if !keep_csv {
            std::fs::remove_file(&csv).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", csv.display())))?;
        }
    }
    Ok(())
}

#[cfg(not(feature = "parquet"))]
fn write_parquet_tables(_dir: &Path, _keep_csv: bool) -> std::io::Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, NO_PARQUET))
}
