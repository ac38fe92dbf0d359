//! `dlsched sweep` and `dlsched merge`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use crate::sweep::{
    Experiment, SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MAX, SLURM_ARRAY_TASK_MIN, Shard,
    SlurmArrayVars, merge, run_sweep,
};

/// `--shard`: `I/N`, or `slurm` for the job array task's own share.
#[derive(Clone, Copy, Debug)]
pub enum ShardArg {
    /// `I/N` as given.
    Fixed(Shard),
    /// From the Slurm job array variables of the environment.
    Slurm,
}

impl std::str::FromStr for ShardArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "slurm" {
            return Ok(ShardArg::Slurm);
        }
        s.parse().map(ShardArg::Fixed).map_err(|e| format!("{e}, or `slurm`"))
    }
}

impl ShardArg {
    /// The shard; for `slurm`, from this process's environment.
    fn resolve(self) -> Result<Shard> {
        match self {
            ShardArg::Fixed(s) => Ok(s),
            ShardArg::Slurm => {
                // A value that is not UTF-8 is shown as read, and is not a number.
                let var = |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
                let (id, count, min, max) = (
                    var(SLURM_ARRAY_TASK_ID),
                    var(SLURM_ARRAY_TASK_COUNT),
                    var(SLURM_ARRAY_TASK_MIN),
                    var(SLURM_ARRAY_TASK_MAX),
                );
                Shard::from_slurm_array(&SlurmArrayVars {
                    task_id: id.as_deref(),
                    task_count: count.as_deref(),
                    task_min: min.as_deref(),
                    task_max: max.as_deref(),
                })
                .map_err(|e| anyhow::anyhow!("--shard slurm: {e}"))
            }
        }
    }
}

#[derive(Args)]
pub struct SweepArgs {
    /// Experiment file: `question`, a `[base]` table and a `[sweep]` table
    /// whose keys take one value, a list, or `{ from, to, step }`; the runs
    /// are the cartesian product. See experiments/README.md.
    experiment: PathBuf,
    /// Worker threads (each runs one simulation at a time); results do not
    /// depend on it.
    #[arg(long, default_value_t = 2, value_name = "N")]
    threads: usize,
    /// Output directory (default: runs/<experiment name>, the same for every
    /// shard: give each shard its own, e.g. `--out runs/X/shard-2`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run only share I of N of the runs (1-based); join the shards' outputs
    /// with `dlsched merge`. `slurm` takes I and N from the Slurm job array
    /// task's environment: I = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1
    /// (the task id when MIN is not set), N = SLURM_ARRAY_TASK_COUNT (or MAX -
    /// MIN + 1), so `sbatch --array=1-N` runs the N shards. Each shard writes
    /// sweep.json and summary.csv into its --out, so every shard needs a
    /// directory of its own: `--out runs/X/shard-$SLURM_ARRAY_TASK_ID`, then
    /// `dlsched merge runs/X/shard-* --out runs/X/merged` (templates in
    /// experiments/slurm/).
    #[arg(long, value_name = "I/N|slurm")]
    shard: Option<ShardArg>,
    /// Keep runs whose directory is complete (has manifest.json) from an
    /// earlier, interrupted sweep.
    #[arg(long)]
    resume: bool,
    /// The runs' tables and the sweep's summary as CSV, parquet or both
    /// (overrides the file's `output_format`; summary.csv is always
    /// written). Parquet needs a build with the cargo feature `parquet`.
    #[arg(long, value_enum, value_name = "FORMAT")]
    output_format: Option<crate::experiment::OutputFormat>,
}

#[derive(Args)]
pub struct MergeArgs {
    /// Shard output directories (each with sweep.json and summary.csv).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where to write the merged summary.csv.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// How often a sweep whose stderr is not a terminal prints a progress line.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

pub fn sweep(a: &SweepArgs, registry: &crate::experiment::Registry) -> Result<ExitCode> {
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if let Some(f) = a.output_format {
        f.check_supported().map_err(|e| anyhow::anyhow!("--output-format: {e}"))?;
    }
    let shard = a.shard.map(ShardArg::resolve).transpose()?;
    let mut exp = Experiment::load_in(&a.experiment, registry).map_err(anyhow::Error::msg)?;
    if let Some(f) = a.output_format {
        exp.output_format = f;
    }
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("runs")
            .join(a.experiment.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default())
    });
    for note in &exp.notes {
        errln!("note: {note}")?;
    }
    let n = shard.map_or(exp.runs.len(), |s| s.select(&exp.runs).len());
    // Stdout as the sweep goes: a failed write (a full stdout) is reported
    // after the sweep has written its files, not instead of them.
    let mut stdout = crate::cli::stdio::DeferredOut::default();
    stdout.line(format_args!(
        "{}\n  {} runs{} -> {}",
        exp.question,
        n,
        shard
            .map(|s| format!(
                " (shard {}/{}{})",
                s.index,
                s.count,
                if matches!(a.shard, Some(ShardArg::Slurm)) { ", from the Slurm job array" } else { "" }
            ))
            .unwrap_or_default(),
        out.display()
    ));
    let bar = indicatif::ProgressBar::new(n as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} runs, {msg} ETA {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let failed = std::sync::atomic::AtomicUsize::new(0);
    bar.set_message("0 failed,");
    // The bar draws only on a terminal; elsewhere (a log file, a Slurm
    // job's output) a line every few seconds says how the sweep goes.
    let plain = (!std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
        let now = std::time::Instant::now();
        std::sync::Mutex::new((now, now, 0usize))
    });
    let outcome = run_sweep(&exp, &out, a.threads, shard, a.resume, &|_, ok| {
        if !ok {
            failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let nfailed = failed.load(std::sync::atomic::Ordering::Relaxed);
        bar.set_message(format!("{nfailed} failed,"));
        bar.inc(1);
        if let Some(Ok(mut p)) = plain.as_ref().map(|m| m.lock()) {
            let (start, last, done) = &mut *p;
            *done += 1;
            if last.elapsed() >= PROGRESS_EVERY || *done == n {
                *last = std::time::Instant::now();
                let rate = *done as f64 / start.elapsed().as_secs_f64().max(1e-3);
                // Not eprintln!: a closed stderr must not stop the sweep.
                let line = format!("sweep: {done}/{n} runs done, {nfailed} failed, {rate:.1} runs/s\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            }
        }
    })
    .map_err(anyhow::Error::msg)?;
    bar.finish_and_clear();
    // The plots are files too: drawn before the report is printed.
    let plots =
        (outcome.write_errors.is_empty() && outcome.ran + outcome.kept > 0).then(|| crate::plot::plot_sweep(&out));
    stdout.line(format_args!(
        "  ran {}, kept {} (complete from before), failed {}",
        outcome.ran,
        outcome.kept,
        outcome.failed.len()
    ));
    for (id, e) in &outcome.failed {
        errln!("  run {id} failed: {e}")?;
    }
    for note in &outcome.notes {
        errln!("  note: {note}")?;
    }
    if !outcome.changed_inputs.is_empty() {
        errln!(
            "  note: {} complete run{} rerun because the trace changed since ({})",
            outcome.changed_inputs.len(),
            if outcome.changed_inputs.len() == 1 { " was" } else { "s were" },
            outcome.changed_inputs.join(", ")
        )?;
    }
    if !outcome.foreign.is_empty() {
        let shown: Vec<&str> = outcome.foreign.iter().take(5).map(String::as_str).collect();
        errln!(
            "  note: {} has {} run director{} not of this experiment ({}{}), from an earlier sweep; left as they are and not in summary.csv",
            out.join("runs").display(),
            outcome.foreign.len(),
            if outcome.foreign.len() == 1 { "y" } else { "ies" },
            shown.join(", "),
            if outcome.foreign.len() > shown.len() { ", ..." } else { "" }
        )?;
    }
    if !outcome.write_errors.is_empty() {
        bail!(
            "the sweep's results could not all be written ({}); the runs' errors are above",
            outcome.write_errors.join("; ")
        );
    }
    stdout.line(format_args!("  wrote {}", out.join("summary.csv").display()));
    match plots {
        Some(Ok(files)) => stdout.line(format_args!(
            "  plots: {}",
            files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
        )),
        Some(Err(e)) => errln!("  no plots: {e}")?,
        None => {}
    }
    stdout.finish()?;
    Ok(if outcome.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub fn merge_cmd(a: &MergeArgs) -> Result<ExitCode> {
    let n = merge(&a.dirs, &a.out).map_err(anyhow::Error::msg)?;
    // The plots first, then the report.
    let plots = crate::plot::plot_sweep(&a.out);
    outln!("merged {n} runs into {}", a.out.join("summary.csv").display())?;
    match plots {
        Ok(files) => outln!("plots: {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "))?,
        Err(e) => errln!("no plots: {e}")?,
    }
    Ok(ExitCode::SUCCESS)
}
