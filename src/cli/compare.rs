//! `dlsched compare RUN_DIR REFERENCE.csv`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::metrics::compare::compare_files;

#[derive(Args)]
pub struct CompareArgs {
    /// A run directory (with jobs.csv) or a jobs.csv file. A run directory,
    /// and the jobs.csv of one, must be complete (have the manifest.json a
    /// run writes last).
    run: PathBuf,
    /// Reference CSV, times in seconds, columns found by name: job id
    /// (job_id, jobid, id, job), start (start_s, start_time, start), end
    /// (end_s, end_time, end, finish_time) and optionally submit (submit_s,
    /// submit_time, submit, submission_time). An empty start or end means the
    /// job did not start or end.
    reference: PathBuf,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

pub fn run(a: &CompareArgs) -> Result<ExitCode> {
    // A run directory, or the jobs.csv of one, is used only when its run
    // finished (a complete manifest): never an interrupted run's leftovers.
    let jobs = if a.run.is_dir() {
        crate::experiment::check_run_dir(&a.run).map_err(anyhow::Error::msg)?;
        crate::experiment::check_csv_tables(&a.run).map_err(anyhow::Error::msg)?;
        a.run.join("jobs.csv")
    } else {
        if let Some(dir) = run_dir_of(&a.run) {
            crate::experiment::check_run_dir(&dir).map_err(anyhow::Error::msg)?;
        }
        a.run.clone()
    };
    let r = compare_files(&jobs, &a.reference)?;
    // The file first, then the report: a full stdout must not cost it.
    if let Some(p) = &a.json {
        let mut s = serde_json::to_string_pretty(&r)?;
        s.push('\n');
        std::fs::write(p, s).with_context(|| format!("writing {}", p.display()))?;
    }
    let pct = |n: u64| {
        if r.reference_jobs == 0 { 0.0 } else { n as f64 * 100.0 / r.reference_jobs as f64 }
    };
    outln!("run        {}", jobs.display())?;
    outln!("reference  {}", a.reference.display())?;
    outln!()?;
    outln!(
        "  jobs matching exactly  {} of {} ({:.2} %; start and end equal to the ms)",
        r.exact,
        r.reference_jobs,
        pct(r.exact)
    )?;
    outln!(
        "  joined                 {} (missing in run {}, not in reference {})",
        r.joined,
        r.missing_in_run,
        r.missing_in_reference
    )?;
    if r.joined == 0 && !r.identical() {
        // Zeros below would read as agreement.
        outln!(
            "  no job id is in common: the run has {} jobs, the reference {}; nothing to compare (are they runs of the same trace?)",
            r.run_jobs,
            r.reference_jobs
        )?;
        outln!("\nDIFFERENT")?;
        return Ok(ExitCode::FAILURE);
    }
    let d = &r.start_diff;
    outln!(
        "  start diff run-ref s   min {} p5 {} p50 {} p95 {} max {} (mean |diff| {:.3})",
        d.min_s,
        d.p5_s,
        d.p50_s,
        d.p95_s,
        d.max_s,
        d.mean_abs_s
    )?;
    outln!("  means over             {} jobs finished in both", r.finished_in_both)?;
    outln!(
        "  mean JCT s             run {:.1} ref {:.1} ({:+.4} %)",
        r.jct_mean_run_s,
        r.jct_mean_reference_s,
        r.jct_mean_rel_diff * 100.0
    )?;
    outln!(
        "  mean queueing s        run {:.1} ref {:.1} ({:+.4} %)",
        r.queue_delay_mean_run_s,
        r.queue_delay_mean_reference_s,
        r.queue_delay_mean_rel_diff * 100.0
    )?;
    if !r.first_differences.is_empty() {
        outln!("  first differing jobs   {}", r.first_differences.join(", "))?;
    }
    outln!("\n{}", if r.identical() { "IDENTICAL" } else { "DIFFERENT" })?;
    Ok(if r.identical() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The run directory a `jobs.csv` file lies in, if it lies in one: a file
/// named `jobs.csv` beside another file a run writes (manifest, summary,
/// timeline or one of their temporaries). A jobs-style CSV elsewhere is read
/// as it is.
fn run_dir_of(file: &Path) -> Option<PathBuf> {
    let dir = file.parent().map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d })?;
    (file.file_name()? == "jobs.csv"
        && crate::experiment::run_dir_files().any(|f| f != "jobs.csv" && dir.join(&f).exists()))
    .then(|| dir.to_path_buf())
}
