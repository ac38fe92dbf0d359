//! `dlsched paired`: means with intervals and paired differences over the
//! seeds of a finished sweep.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use clap::Args;

use crate::experiment::paired::{PairedOptions, paired_many};

/// Output format of `dlsched paired`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PairedFormat {
    /// A Markdown table per metric (for a write-up).
    Md,
    /// One CSV row per metric, configuration and value, full precision.
    Csv,
}

#[derive(Args)]
pub struct PairedArgs {
    /// Sweep directories (each with summary.csv and sweep.json, merged or
    /// not). Several are joined: runs of the same workloads in different
    /// sweeps (a policy with its own options in one, its baselines in
    /// another) are paired by configuration and seed.
    #[arg(required = true, value_name = "SWEEP_DIR")]
    dirs: Vec<PathBuf>,
    /// A summary.csv column to report (repeat for several), e.g.
    /// `makespan_s`, `jct_mean_s`, `qos_guarantee_rate`,
    /// `normalized_rate_cluster`.
    #[arg(long = "metric", value_name = "COLUMN", required = true)]
    metrics: Vec<String>,
    /// The swept key to compare and its baseline value, e.g.
    /// `policy=random-placement`: every other value of the key is paired
    /// with it seed by seed within each configuration (the other swept keys).
    /// Without it, means and intervals only.
    #[arg(long, value_name = "KEY=VALUE")]
    baseline: Option<String>,
    /// The configuration keys, comma-separated (default: every swept key but
    /// `seed`, the baseline's key and --average-over). Runs are compared only
    /// within a configuration; the swept keys left over name the arms
    /// (`policy=genie, policy_opt.reading=strict`). A run from a sweep that
    /// does not sweep a configuration key is compared in every configuration
    /// that agrees with it on the keys it has (one control sweep for all).
    #[arg(long, value_delimiter = ',', value_name = "KEY,...")]
    by: Option<Vec<String>>,
    /// Keys to average over, comma-separated (e.g. `load`): a seed's value is
    /// its mean over their values, and arms are paired on a seed only when
    /// they cover the same values.
    #[arg(long, value_delimiter = ',', value_name = "KEY,...")]
    average_over: Vec<String>,
    /// Only these seeds, `FROM-TO` inclusive (the reporting seeds of the
    /// protocol in experiments/README.md are 4-13).
    #[arg(long, value_name = "FROM-TO")]
    seeds: Option<String>,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95, value_name = "LEVEL")]
    level: f64,
    /// Output format.
    #[arg(long, value_enum, default_value = "md")]
    format: PairedFormat,
    /// Write the report to this file (atomically) instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

fn parse_seeds(s: &str) -> Result<(u64, u64)> {
    let bad = || anyhow!("--seeds {s}: expected FROM-TO with whole numbers FROM <= TO, e.g. 4-13");
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

pub fn paired_cmd(a: &PairedArgs) -> Result<ExitCode> {
    let baseline = match &a.baseline {
        Some(b) => match b.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                Some((k.trim().to_string(), v.trim().to_string()))
            }
            _ => bail!("--baseline {b}: expected KEY=VALUE, e.g. policy=random-placement"),
        },
        None => None,
    };
    let seeds = a.seeds.as_deref().map(parse_seeds).transpose()?;
    let options = PairedOptions {
        metrics: a.metrics.clone(),
        baseline,
        seeds,
        level: a.level,
        by: a.by.clone(),
        average_over: a.average_over.clone(),
    };
    let dirs: Vec<&std::path::Path> = a.dirs.iter().map(PathBuf::as_path).collect();
    let report = paired_many(&dirs, &options).map_err(anyhow::Error::msg)?;
    let text = match a.format {
        PairedFormat::Md => report.markdown(),
        PairedFormat::Csv => report.csv(),
    };
    match &a.out {
        Some(path) => {
            crate::metrics::export::write_atomic(path, text.as_bytes()).map_err(|e| anyhow!("--out: {e}"))?;
            outln!("wrote {}", path.display())?;
        }
        None => outln!("{}", text.trim_end())?,
    }
    Ok(ExitCode::SUCCESS)
}
