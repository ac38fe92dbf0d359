//! The `dlsched` command line as a library module: [`main`] is the whole
//! binary, one module per subcommand, each a thin translation into library
//! calls.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};

use crate::experiment::Registry;

/// Writes a line to standard output, like `println!`, but a failed write (a
/// full disk, `> /dev/full`) is an `anyhow` error ([`StdioError`]) instead of
/// a panic: `outln!(...)?`.
macro_rules! outln {
    () => { $crate::cli::stdio::write_line(false, format_args!("")) };
    ($($arg:tt)*) => { $crate::cli::stdio::write_line(false, format_args!($($arg)*)) };
}

/// Writes a line to standard error, like `eprintln!`, but a failed write is
/// an `anyhow` error ([`StdioError`]) instead of a panic: `errln!(...)?`.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::stdio::write_line(true, format_args!($($arg)*)) };
}

mod args;
mod compare;
mod fill;
mod genie_profile;
#[cfg(target_os = "linux")]
pub mod hugealloc;
mod ldwp_train;
mod paired;
mod profile;
mod rifling_train;
mod simulate;
mod stdio;
mod sweep;

use stdio::StdioError;

/// dlsched: an event-driven simulator of deep-learning GPU clusters.
///
/// Replays a job trace (Philly, Helios, your own CSV) or a seeded synthetic
/// workload against a scheduling policy, and reports job completion time (JCT),
/// queueing delay, makespan and GPU utilisation.
///
/// Exit status: 0 on success, 1 when `compare` finds a difference, 2 on an
/// error (bad input or options, or a failed write, to stdout included).
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one trace (or the synthetic default) under one policy.
    ///
    /// Without --trace, runs the embedded synthetic workload (Philly GPU-count
    /// and duration mix, Poisson arrivals) on the lab16 cluster.
    Simulate(Box<simulate::SimulateArgs>),
    /// Compare a run's jobs.csv with a per-job reference (job_id, start, end).
    ///
    /// Reports how many jobs match exactly (start and end equal to the
    /// millisecond), the distribution of start-time differences, and the
    /// relative difference of mean JCT and queueing delay over the jobs
    /// finished in both. Exits with status 1 when any job differs or is
    /// missing, 2 on an error.
    Compare(compare::CompareArgs),
    /// Run an experiment: the cartesian product of a [sweep] table over a
    /// base configuration, in parallel, resumable and shardable; writes one
    /// run directory per run and a summary.csv with one row per run.
    Sweep(sweep::SweepArgs),
    /// Join the summary.csv files of a sharded sweep, checking that no run is
    /// missing or duplicated.
    Merge(sweep::MergeArgs),
    /// The protocol for claims as a command: per configuration of a finished
    /// sweep, each value's mean over the seeds with a 95 % Student-t interval,
    /// and its per-seed difference to a baseline value (`--baseline
    /// policy=random-placement`) with the difference's interval and a verdict:
    /// `lower` or `higher` only when the interval excludes zero, else `no
    /// measurable difference` (`identical on every seed`, `one pair: no
    /// interval`, `no pairs` where they apply). Paired runs must share their
    /// workload, cluster and rate model (checked from their manifests). See
    /// experiments/README.md, "Protocol for claims".
    Paired(paired::PairedArgs),
    /// The FGD paper's fill experiment: pods arrive until the cluster is
    /// full and never leave; unallocated GPU % vs arrived workload under the
    /// paper's six schedulers (Weng et al., ATC'23, Fig. 9(a)).
    ///
    /// Per pod list and seed: the list (every row a pod, CPU-only pods
    /// included) is shuffled by the seed and extended by pods drawn from it
    /// until its GPU request reaches INFLATION × the cluster's GPUs (1.3 in
    /// experiments/fgd.toml); the pods then arrive one by one, each placed at
    /// once by the scheduler or, if no node has its CPU, memory, GPU type and
    /// GPUs free, skipped (the run goes on to the end of the list, as the
    /// paper's artifact does). Schedulers: random (the control), dotprod,
    /// gpu-clustering, gpu-packing, bestfit, fgd. Every scheduler sees the
    /// same pods in the same order on a seed (paired).
    ///
    /// The experiment file (TOML): question, nodes (a node list with columns
    /// cpu_milli,memory_mib,gpu,model), pod_lists (pod lists with columns
    /// name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]), schedulers,
    /// seeds, inflation, optionally report_at (arrived % compared, default
    /// [100]) and cpu (false zeroes every pod's CPU and memory). Paths are
    /// relative to the file's folder.
    ///
    /// Writes into --out: curves.csv (per run and whole arrived %: allocated
    /// and unallocated GPU %), runs.csv (per run: pods, failed pods,
    /// unallocated % at each report_at), paired.csv (each scheduler − FGD,
    /// paired by seed, 95 % interval, verdict) and unalloc-<pod list>.svg/.png
    /// (median over the seeds). Same file, same bytes.
    ///
    /// Example (from the repository's root, with ../shared beside it):
    /// `dlsched fill experiments/fgd.toml --only default --seeds 42-43`
    /// (12 runs, a few seconds). Write-up: experiments/fgd.md.
    Fill(fill::FillArgs),
    /// Draw SVG charts of a run directory (JCT and queueing-delay CDFs, GPU
    /// utilisation and queue length over time) or of a sweep directory (each
    /// metric against the swept parameter, one line per policy, error bars
    /// over seeds; JCT CDF per configuration). Files go into the directory.
    Plot {
        /// A run directory (complete: with the manifest.json a run writes last) or a sweep
        /// directory (with summary.csv and sweep.json).
        dir: PathBuf,
    },
    /// The calibrated profile database: `profile show` prints a model's table, `profile check` the held-out
    /// prediction error, `profile import` derives the tables from public measurements.
    Profile(profile::ProfileArgs),
    /// Run GENIE's simulated offline profiler for a cluster and save the
    /// fitted prediction models (k0..k2, gamma, lambda per task type) with a
    /// manifest (profile database, seed, profiler settings; no date, so the
    /// same options write the same bytes). `simulate
    /// --genie-models FILE` then uses them instead of profiling at start.
    /// Any cluster `simulate` takes can be profiled: the profiler runs on its
    /// first partition's GPU type, node count and largest node, as `simulate
    /// --policy genie` does when it is given no models.
    GenieProfile(genie_profile::GenieProfileArgs),
    /// Train a RIFLING agent over repeated episodes of the GENIE workload
    /// (one seed per episode) and save its Q-table and K-means centroids with
    /// a manifest (workload, seeds, parameters), plus a per-episode learning
    /// curve beside it (`NAME.curve.csv` for `--out NAME.json`). `simulate --policy rifling-frozen
    /// --rifling-table FILE` runs it greedily.
    RiflingTrain(Box<rifling_train::RiflingTrainArgs>),
    /// Train an LDWP deep Q-network (node dispatch) over repeated episodes of
    /// a synthetic workload (one seed per episode) and save it with a manifest
    /// (command, cluster, workload, seeds, parameters), plus a per-episode
    /// learning curve beside it (`NAME.curve.csv` for `--out NAME.json`). `simulate --policy
    /// ldwp-frozen --policy-opt model=FILE` runs it greedily; `--transfer-from`
    /// starts from a model of another cluster.
    LdwpTrain(Box<ldwp_train::LdwpTrainArgs>),
}

/// Reports a command's error on stderr and exits with status 2; when
/// standard error itself cannot be written, exits 2 without a word (nothing
/// else is possible).
fn fail(e: &anyhow::Error) -> ExitCode {
    let stderr_failed = e.chain().any(|c| c.downcast_ref::<StdioError>().is_some_and(|s| s.stderr));
    if !stderr_failed {
        let _ = errln!("error: {e:#}");
    }
    ExitCode::from(2)
}

/// The `dlsched` command: parses the process's arguments, runs the
/// subcommand, and returns its exit status (0 on success, 1 when `compare`
/// finds a difference, 2 on an error, reported on standard error).
pub fn main() -> ExitCode {
    main_with(Registry::default())
}

/// The `dlsched` command knowing the policy kinds and trace formats of
/// `registry` besides the built-in ones: `simulate --policy`, `--format`,
/// sweep files and `--from-manifest` take them. A program of its own (an
/// outside crate's `fn main`) calls it with its registrations.
///
/// ```no_run
/// use dlsched::experiment::Registry;
/// # use dlsched::policy::registry::QueueOptions as MyOptions;
/// fn main() -> std::process::ExitCode {
///     dlsched::cli::main_with(Registry::default().policy::<MyOptions>("my-kind", "My policy."))
/// }
/// ```
pub fn main_with(registry: Registry) -> ExitCode {
    // Die quietly on a closed pipe (`dlsched ... | head`), as command-line
    // tools do, instead of panicking on the next print.
    #[cfg(unix)]
    // SAFETY: restoring the default SIGPIPE action before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    ExitCode::from(main_args(registry, std::env::args_os()))
}

/// The `dlsched` command run on `args` (the program's name first, as
/// `argv`), in this process: what [`main_with`] does, but for the signal
/// handlers, which it leaves as they are. Returns the exit status (0 on
/// success, 1 when `compare` finds a difference, 2 on an error or a usage
/// error, reported on standard error; `--help` and `--version` print on
/// standard output and give 0). The Python package's `dlsched` command
/// (`python/dlsched/_cli.py`) runs the command line through it.
pub fn main_args<I, T>(registry: Registry, args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let argv: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if let Err(e) = registry.check() {
        return status(fail(&anyhow::anyhow!("{e}")));
    }
    let mut cmd = command(&registry);
    let cli = match cmd.try_get_matches_from_mut(argv.iter().cloned()).and_then(|mut m| {
        <Cli as clap::FromArgMatches>::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut cmd.clone()))
    }) {
        Ok(cli) => cli,
        // --help and --version (exit 0) go to stdout, usage errors (exit 2)
        // to stderr, as clap's own `exit` does, but a failed write is an error.
        Err(e) => {
            let res = e.print().and_then(|()| std::io::Write::flush(&mut std::io::stdout()));
            return match res {
                Ok(()) => u8::try_from(e.exit_code()).unwrap_or(2),
                Err(err) => status(fail(&anyhow::Error::new(StdioError { stderr: e.use_stderr(), err }))),
            };
        }
    };
    status(match run(cli, &registry, &argv) {
        Ok(code) => code,
        Err(e) => fail(&e),
    })
}

/// An exit code's number (`ExitCode` keeps it to itself; the commands give
/// 0, 1 or 2).
fn status(code: ExitCode) -> u8 {
    (0..=u8::MAX).find(|&c| ExitCode::from(c) == code).unwrap_or(2)
}

/// The command line's parser, its value parsers knowing `registry`.
fn command(registry: &Registry) -> clap::Command {
    use clap::CommandFactory;
    Cli::command().mut_subcommand("simulate", |s| {
        s.mut_arg("policy", |a| a.value_parser(simulate::PolicyNameParser::new(registry.clone())))
            .mut_arg("format", |a| a.value_parser(simulate::FormatParser::new(registry.clone())))
    })
}

/// Runs the parsed command; `argv` is the command as it was run (the
/// program's name first), which hints and manifests repeat.
fn run(cli: Cli, registry: &Registry, argv: &[std::ffi::OsString]) -> Result<ExitCode> {
    match cli.command {
        Command::Simulate(args) => simulate::simulate(*args, registry, argv).map(|()| ExitCode::SUCCESS),
        Command::Compare(args) => compare::run(&args),
        Command::Profile(args) => profile::run(&args),
        Command::GenieProfile(args) => genie_profile::genie_profile(&args),
        Command::RiflingTrain(args) => rifling_train::rifling_train(&args),
        Command::LdwpTrain(args) => ldwp_train::ldwp_train(&args, argv),
        Command::Sweep(args) => sweep::sweep(&args, registry),
        Command::Merge(args) => sweep::merge_cmd(&args),
        Command::Paired(args) => paired::paired_cmd(&args),
        Command::Fill(args) => fill::run(&args),
        Command::Plot { dir } => {
            let files = if dir.join("sweep.json").exists() {
                crate::experiment::plot::plot_sweep(&dir)
            } else if crate::experiment::run_dir_files().any(|f| dir.join(f).exists()) {
                // A run directory, complete or not: `plot_run` says what is missing.
                crate::experiment::plot::plot_run(&dir)
            } else {
                bail!(
                    "{}: expected a run directory (with jobs.csv) or a sweep directory (with summary.csv and sweep.json)",
                    dir.display()
                );
            }
            .map_err(anyhow::Error::msg)?;
            for f in files {
                outln!("wrote {}", f.display())?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
