//! `dlsched fill`: the FGD paper's fill experiment (pods arrive until the
//! cluster is full, never leave; unallocated GPU vs arrived workload), see
//! [`crate::experiment::fill`] and experiments/fgd.md.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::Args;

use crate::experiment::fill::{FillSpec, median_curves, run_spec, write_outputs};
use crate::experiment::plot::{ChartSeries, write_line_chart};
use crate::policy::fgd_family::FgdScheduler;

#[derive(Args)]
pub struct FillArgs {
    /// The experiment file (e.g. experiments/fgd.toml): node list, pod lists,
    /// schedulers, seeds, inflation; its paths are relative to its folder.
    spec: PathBuf,
    /// Output directory (default: runs/<file stem>/ under the current directory).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Only these seeds, `FROM-TO` inclusive, instead of the file's.
    #[arg(long, value_name = "FROM-TO")]
    seeds: Option<String>,
    /// Only the pod lists whose file name contains this (repeatable).
    #[arg(long = "only", value_name = "TEXT")]
    only: Vec<String>,
}

pub fn run(args: &FillArgs) -> Result<ExitCode> {
    let mut spec = FillSpec::read(&args.spec).map_err(|e| anyhow!(e))?;
    if let Some(s) = &args.seeds {
        let (a, b) = s.split_once('-').ok_or_else(|| anyhow!("--seeds: `{s}` is not FROM-TO"))?;
        let (a, b): (u64, u64) = (
            a.trim().parse().map_err(|_| anyhow!("--seeds: `{a}` is not a seed"))?,
            b.trim().parse().map_err(|_| anyhow!("--seeds: `{b}` is not a seed"))?,
        );
        if a > b {
            return Err(anyhow!("--seeds: {a} > {b}"));
        }
        spec.seeds = (a..=b).collect();
    }
    if !args.only.is_empty() {
        spec.pod_lists.retain(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            args.only.iter().any(|o| name.contains(o.as_str()))
        });
        if spec.pod_lists.is_empty() {
            return Err(anyhow!("--only: no pod list of {} matches", args.spec.display()));
        }
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("runs").join(args.spec.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default())
    });
    let results = run_spec(&spec).map_err(|e| anyhow!(e))?;
    let mut files = write_outputs(&out, &results, &spec.report_at).map_err(|e| anyhow!(e))?;
    let mut workloads: Vec<&str> = Vec::new();
    for r in &results {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let seeds = spec.seeds.len();
    // The figures start at 75 % arrived (the paper's Fig. 9(a) shows 75-120 %).
    const FROM: u32 = 75;
    let mut figures: Vec<(&str, Vec<ChartSeries>)> = Vec::new();
    for w in workloads {
        let mut series: Vec<ChartSeries> = median_curves(&results, w, FROM)
            .into_iter()
            .map(|(rule, pts)| {
                let name = match rule {
                    FgdScheduler::Random => "Random (control)".to_string(),
                    _ => rule.label().to_string(),
                };
                (name, pts, None)
            })
            .collect();
        let max = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).fold(100.0, f64::max);
        let ideal = (FROM..=max as u32).map(|x| (f64::from(x), (100.0 - f64::from(x)).max(0.0))).collect();
        series.push(("Ideal (100 − arrived)".into(), ideal, None));
        figures.push((w, series));
    }
    // One y range for every figure of the run, so the pod lists compare at a
    // glance: 0 to the highest median, rounded up to 5 %, at least 30 %.
    let y_max = figures.iter().flat_map(|f| f.1.iter().flat_map(|s| s.1.iter().map(|p| p.1))).fold(0.0, f64::max);
    let y_hi = ((y_max / 5.0).ceil() * 5.0).max(30.0);
    for (w, series) in figures {
        let title = format!("Unallocated GPU, {w} (median of {seeds} seeds)");
        files.extend(
            write_line_chart(
                &out,
                &format!("unalloc-{w}"),
                &title,
                ("Arrived workload (% of cluster GPU capacity)", "Unallocated GPU (%)"),
                series,
                Some((0.0, y_hi)),
            )
            .map_err(|e| anyhow!(e))?,
        );
    }
    for f in files {
        outln!("wrote {}", f.display())?;
    }
    Ok(ExitCode::SUCCESS)
}
