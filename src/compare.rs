//! `dlsched compare RUN_DIR REFERENCE.csv`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use dlsched::metrics::compare::compare_files;

#[derive(Args)]
pub struct CompareArgs {
    /// A run directory (with jobs.csv) or a jobs.csv file.
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
    let jobs = if a.run.is_dir() { a.run.join("jobs.csv") } else { a.run.clone() };
    let r = compare_files(&jobs, &a.reference)?;
    let pct = |n: u64| {
        if r.reference_jobs == 0 { 0.0 } else { n as f64 * 100.0 / r.reference_jobs as f64 }
    };
    println!("run        {}", jobs.display());
    println!("reference  {}", a.reference.display());
    println!();
    println!(
        "  jobs matching exactly  {} of {} ({:.2} %; start and end equal to the ms)",
        r.exact,
        r.reference_jobs,
        pct(r.exact)
    );
    println!(
        "  joined                 {} (missing in run {}, not in reference {})",
        r.joined, r.missing_in_run, r.missing_in_reference
    );
    let d = &r.start_diff;
    println!(
        "  start diff run-ref s   min {} p5 {} p50 {} p95 {} max {} (mean |diff| {:.3})",
        d.min_s, d.p5_s, d.p50_s, d.p95_s, d.max_s, d.mean_abs_s
    );
    println!("  means over             {} jobs finished in both", r.finished_in_both);
    println!(
        "  mean JCT s             run {:.1} ref {:.1} ({:+.4} %)",
        r.jct_mean_run_s,
        r.jct_mean_reference_s,
        r.jct_mean_rel_diff * 100.0
    );
    println!(
        "  mean queueing s        run {:.1} ref {:.1} ({:+.4} %)",
        r.queue_delay_mean_run_s,
        r.queue_delay_mean_reference_s,
        r.queue_delay_mean_rel_diff * 100.0
    );
    if !r.first_differences.is_empty() {
        println!("  first differing jobs   {}", r.first_differences.join(", "));
    }
    println!("\n{}", if r.identical() { "IDENTICAL" } else { "DIFFERENT" });
    if let Some(p) = &a.json {
        let mut s = serde_json::to_string_pretty(&r)?;
        s.push('\n');
        std::fs::write(p, s).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(if r.identical() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
