//! The `dlsched` command line: thin layer over the library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use clap::ValueEnum;
use dlsched::bounds;
use dlsched::cluster::ClusterPreset;
use dlsched::experiment::{ClusterChoice, GenieRun, RunReport, RunSpec, WorkloadSource, run_one, write_run_dir};
use dlsched::policy::genie::GenieOptions;
use dlsched::policy::{config::PolicyConfig, config::PolicyName, placement::PlacementKind};
use dlsched::trace::{ColumnMap, TraceFormat};
use dlsched::workload::genie::GenieWorkloadSpec;
use dlsched::workload::synthetic::SyntheticSpec;

/// Writes a line to standard output, like `println!`, but a failed write (a
/// full disk, `> /dev/full`) is an `anyhow` error ([`StdioError`]) instead of
/// a panic: `outln!(...)?`.
macro_rules! outln {
    () => { $crate::write_line(false, format_args!("")) };
    ($($arg:tt)*) => { $crate::write_line(false, format_args!($($arg)*)) };
}

/// Writes a line to standard error, like `eprintln!`, but a failed write is
/// an `anyhow` error ([`StdioError`]) instead of a panic: `errln!(...)?`.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::write_line(true, format_args!($($arg)*)) };
}

mod compare;
#[cfg(target_os = "linux")]
mod hugealloc;
mod profile_cmd;
mod sweep_cmd;

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
    Simulate(Box<SimulateArgs>),
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
    Sweep(sweep_cmd::SweepArgs),
    /// Join the summary.csv files of a sharded sweep, checking that no run is
    /// missing or duplicated.
    Merge(sweep_cmd::MergeArgs),
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
    Profile(profile_cmd::ProfileArgs),
    /// Run GENIE's simulated offline profiler for a cluster and save the
    /// fitted prediction models (k0..k2, gamma, lambda per task type) with a
    /// manifest (profile database, seed, profiler settings, date). `simulate
    /// --genie-models FILE` then uses them instead of profiling at start.
    /// Any cluster `simulate` takes can be profiled: the profiler runs on its
    /// first partition's GPU type, node count and largest node, as `simulate
    /// --policy genie` does when it is given no models.
    GenieProfile(GenieProfileArgs),
    /// Train a RIFLING agent over repeated episodes of the GENIE workload
    /// (one seed per episode) and save its Q-table and K-means centroids with
    /// a manifest (workload, seeds, parameters), plus a per-episode learning
    /// curve beside it (`FILE.curve.csv`). `simulate --policy rifling-frozen
    /// --rifling-table FILE` runs it greedily.
    RiflingTrain(Box<RiflingTrainArgs>),
}

#[derive(Args)]
#[command(allow_negative_numbers = true)]
struct GenieProfileArgs {
    /// The cluster (its first partition is profiled).
    #[command(flatten)]
    machines: ClusterArgs,
    /// Seed of the measurement noise.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Standard deviation of the log-normal measurement noise.
    #[arg(long, default_value_t = 0.02)]
    noise: f64,
    /// Iterations per profiling run.
    #[arg(long, default_value_t = 100)]
    iterations: u64,
    /// A profile database directory as ground truth instead of the builtin one.
    #[arg(long, value_name = "DIR")]
    profiles: Option<PathBuf>,
    /// Output file (JSON).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

fn genie_profile(a: &GenieProfileArgs) -> Result<ExitCode> {
    use dlsched::policy::genie::{ProfilerConfig, profile};
    if !(a.noise.is_finite() && (0.0..=1.0).contains(&a.noise)) {
        bail!("--noise is the log-normal noise's standard deviation: between 0 and 1 (0.02 = 2 %), got {}", a.noise);
    }
    if a.iterations == 0 || a.iterations > 1_000_000 {
        bail!("--iterations must be between 1 and 1,000,000, got {}", a.iterations);
    }
    let db: &'static dlsched::profile::db::ProfileDb = match &a.profiles {
        Some(d) => dlsched::profile::db::ProfileDb::load_dir_cached(d)?,
        None => dlsched::profile::db::ProfileDb::builtin(),
    };
    let choice = a.machines.choice()?;
    let cluster = dlsched::cluster::Cluster::new(choice.spec()?)?;
    let spec = cluster.spec();
    // The shape `simulate` profiles when it has no models: the first
    // partition's node count, largest node and GPU type.
    let part = cluster.partition(dlsched::ids::VcId(0));
    let (nodes, gpn) = (part.nodes.len() as u32, part.max_node_gpus);
    let gpu_type = cluster.node(part.nodes[0]).gpu_type.clone();
    let name = a.profiles.as_ref().map_or("builtin".to_string(), |d| d.display().to_string());
    let cfg = ProfilerConfig { iterations_per_run: a.iterations, noise_sd: a.noise };
    if part.nodes.iter().any(|&n| cluster.node(n).gpu_type != gpu_type) {
        errln!(
            "note: {}: the first partition mixes GPU types; profiling {gpu_type} (its first node's), as simulate does",
            spec.name
        )?;
    }
    let p = profile(db, &name, &gpu_type, nodes, gpn, a.seed, cfg);
    p.validate().map_err(|e| anyhow::anyhow!("the fit failed: {e}"))?;
    let doc = serde_json::json!({
        "manifest": {
            "what": "GENIE prediction models fitted by dlsched's simulated offline profiler",
            "dlsched_version": env!("CARGO_PKG_VERSION"),
            "cluster": spec.name,
            "profile_db": name,
            "seed": a.seed,
            "profiler": cfg,
            "date": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|d| chrono::DateTime::from_timestamp(d.as_secs() as i64, 0))
                .map_or_else(String::new, |t| t.format("%Y-%m-%d").to_string()),
            "profiling_gpu_hours": p.gpu_seconds() / 3600.0,
        },
        "models": p,
    });
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    dlsched::metrics::export::write_atomic(&a.out, text.as_bytes())
        .with_context(|| format!("writing {}", a.out.display()))?;
    outln!(
        "profiled {} task types on {} ({} x {} {}): {:.2} GPU-hours of profiling; wrote {}",
        p.types.len(),
        spec.name,
        nodes,
        gpn,
        gpu_type,
        p.gpu_seconds() / 3600.0,
        a.out.display()
    )?;
    for t in p.types.values() {
        outln!(
            "  {:<18} sPR(b) = {:.3} + {:.4} b + {:.6} b^2   gamma {:.3}  lambda {}",
            t.kind,
            t.k[0],
            t.k[1],
            t.k[2],
            t.gamma,
            t.lambda.map_or("-".to_string(), |l| format!("{l:.3}"))
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The cluster options `simulate` and `genie-profile` share: a preset, a
/// node list, a uniform cluster or VC partitions.
#[derive(Args)]
struct ClusterArgs {
    /// Cluster preset: lab16 = 4 nodes × 4 K80 (16 GPUs, the GENIE/RIFLING
    /// cluster); philly = 321 × 2 + 231 × 8 GPUs (2,490); alibaba-openb = the
    /// 1,213 GPU nodes (6,212 GPUs, 7 types) of the Alibaba PAI 2023 trace.
    /// Default: lab16.
    #[arg(long, value_enum, conflicts_with_all = ["nodes", "vcs", "nodes_file"])]
    cluster: Option<ClusterPreset>,

    /// A heterogeneous cluster from a node list in the Alibaba PAI 2023
    /// format (`sn,cpu_milli,memory_mib,gpu,model`): one node per row with
    /// GPUs, of that GPU type (memory per type: P100, T4, V100M16 16 GiB;
    /// A10 24 GiB; V100M32 32 GiB; undisclosed G2, G3 assumed 32 GiB).
    /// CPU-only rows are skipped and counted.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["nodes", "vcs"])]
    nodes_file: Option<PathBuf>,

    /// A uniform cluster of N nodes (with --gpus-per-node) instead of a preset.
    #[arg(long, value_name = "N", requires = "gpus_per_node", conflicts_with = "vcs")]
    nodes: Option<u32>,

    /// GPUs per node of the uniform cluster (with --nodes).
    #[arg(long, value_name = "G", requires = "nodes")]
    gpus_per_node: Option<u32>,

    /// GPU type of the uniform cluster (k80, p100, v100, v100-32g, t4, a100,
    /// a100-80g, rtx2080ti, quadro6000); default `generic` (16 GiB, no
    /// profile data: the profile model then borrows another type's speeds).
    #[arg(long, value_name = "TYPE", requires = "nodes")]
    gpu_type: Option<String>,

    /// Virtual-cluster partitions: a CSV `vc,nodes[,gpus_per_node]` (default 8
    /// GPUs per node). The cluster is built from it; each job runs only on its
    /// VC's nodes, and jobs of other VCs are skipped (counted as unknown_vc).
    #[arg(long, value_name = "PATH")]
    vcs: Option<PathBuf>,
}

impl ClusterArgs {
    /// The cluster these options name.
    fn choice(&self) -> Result<ClusterChoice> {
        cluster_choice(
            self.vcs.as_ref(),
            self.nodes_file.as_ref(),
            (self.nodes, self.gpus_per_node, self.gpu_type.as_ref()),
            self.cluster,
        )
    }
}

#[derive(Args)]
#[command(allow_negative_numbers = true)]
struct SimulateArgs {
    /// Trace file to replay (CSV). Omit to run the synthetic workload.
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,

    /// Trace format; `auto` detects it from the header line.
    #[arg(long, value_enum, default_value = "auto")]
    format: TraceFormat,

    /// For `jobs-csv`: map fields to your column names, e.g.
    /// `submit_time=arrival,gpu_num=gpus`. Fields: job_id, submit_time (s),
    /// duration (s), gpu_num, vc, user, model, local_bsz (samples per GPU).
    #[arg(long, value_name = "FIELD=COLUMN,...")]
    columns: Option<String>,

    /// For `jobs-csv`: a TOML file with a `[columns]` table of field = "column".
    #[arg(long, value_name = "PATH")]
    columns_file: Option<PathBuf>,

    /// The cluster.
    #[command(flatten)]
    machines: ClusterArgs,

    /// Policy. Queue policies (any workload): fifo (submit time), sjf
    /// (shortest trace duration first), each over --placement. GENIE family
    /// (moldable tasks of --workload genie; they choose each task's GPUs):
    /// genie (QoS-aware: best cost-efficiency placement that meets the
    /// task's expected completion time, least waiting allowance first) and
    /// the paper's baselines genie-fifo, min-min, weighted-fair, tetris-perf,
    /// tetris-cer.
    #[arg(long, value_enum, default_value = "fifo")]
    policy: PolicyName,

    /// Without --trace: the synthetic Philly-like job mix (synthetic) or
    /// GENIE's QoS tasks (genie: six DL models, half training, half
    /// inference, Poisson at --jobs-per-hour, default 10, over --hours,
    /// priority classes 5/35/60 %). With --trace, genie turns the trace's
    /// first jobs-per-hour x hours jobs into moldable tasks (their arrival
    /// pattern rescaled to --hours, durations to a 45-minute median; GENIE's
    /// task types drawn per job).
    #[arg(long, value_enum, default_value = "synthetic")]
    workload: WorkloadKind,

    /// GENIE workload: what a task's expected completion time multiplies:
    /// its single-GPU latency as predicted by the run's fitted GENIE models
    /// (predicted, the paper's definition) or the true one.
    #[arg(long, value_enum, default_value = "predicted")]
    ect: dlsched::workload::genie::EctBasis,

    /// GENIE workload: arrival window, hours.
    #[arg(long, default_value_t = 24.0, value_name = "H")]
    hours: f64,

    /// GENIE family: concentration weight theta of the placement cost
    /// n/(N G) + theta d_node/N (the paper's example: 0.4).
    #[arg(long, default_value_t = 0.4, value_name = "THETA")]
    theta: f64,

    /// GENIE family: fitted models saved by `dlsched genie-profile` (default:
    /// profile at the start of the run, seeded by --seed).
    #[arg(long, value_name = "FILE")]
    genie_models: Option<PathBuf>,

    /// GENIE family: put a placement's GPUs on the fullest nodes that have
    /// room (best fit) instead of the emptiest (the spec's proposal).
    #[arg(long)]
    genie_best_fit: bool,

    #[command(flatten)]
    rifling: RiflingArgs,

    /// Let later jobs start when the head of the queue does not fit (greedy,
    /// no reservation). Without it the queue is strict (head-of-line blocking).
    #[arg(long)]
    backfill: bool,

    /// Order of jobs submitted at the same instant: trace (file order) or
    /// numpy2-avx512, the order pandas' default sort_values gives them under
    /// NumPy 2.0-2.2 on an AVX-512 CPU (an unstable quicksort over the submit
    /// times in file order). Simulators written with pandas, such as the
    /// Helios simulator, queue ties that way; use it to match one job for job.
    #[arg(long, value_enum, default_value = "trace", value_name = "ORDER")]
    tie_order: dlsched::trace::tie_order::TieOrder,

    /// Placement: consolidate (fewest nodes; best fit on one node when the job
    /// fits one), first-fit (first node with room, in node order), recorded
    /// (the trace's per-server split), or a GPU-sharing rule: share-first-fit
    /// / share-best-fit put a job on GPUs other jobs already use when its
    /// memory fits beside theirs (best fit = least memory left over), and
    /// co-located jobs slow each other down: two tenants at their measured pair
    /// speeds, more tenants (or unmeasured pairs) within [1 - switch cost, best
    /// measured pair sum] of one GPU together (src/profile/coloc.rs). The
    /// other sharing rules, memory-efficiency, fgd and iawp, are below.
    #[arg(long, value_enum, default_value = "consolidate")]
    placement: PlacementKind,

    /// Job speed: trace = every job runs its trace duration wherever it is
    /// placed; table / genie = from the calibrated profile database (table
    /// interpolation, or GENIE's fitted model): a job placed other than its
    /// recorded allocation runs at the measured ratio of iteration times.
    /// Jobs the trace gives no model or batch get one drawn from the database
    /// (seeded). The summary names them profile-table / profile-genie.
    #[arg(long, value_enum, default_value = "trace")]
    rate_model: dlsched::experiment::RateModelKind,

    /// A profile database directory (the CSVs written by dlsched profile
    /// import) instead of the builtin one. With either, a job with a known
    /// model and per-GPU batch is placed only on GPUs with enough memory, and
    /// a job needing more than any GPU of its partition is skipped
    /// (exceeds_gpu_memory); its memory is the analytical estimate from the
    /// database's models.csv, or, for the models a memory.csv in the
    /// directory has (profile import --include-lucid), that measurement.
    #[arg(long, value_name = "DIR")]
    profiles: Option<PathBuf>,

    /// With a sharing placement (share-first-fit, share-best-fit,
    /// memory-efficiency, fgd, iawp): the most jobs on one GPU.
    #[arg(long, value_name = "N", default_value_t = dlsched::cluster::ShareLimits::default().max_tenants)]
    max_tenants: u32,

    /// With a sharing placement (share-first-fit, share-best-fit,
    /// memory-efficiency, fgd, iawp): the fraction of a shared GPU's memory
    /// kept free (0 <= F < 1); a job alone on a GPU may use all of it.
    #[arg(long, value_name = "F", default_value_t = dlsched::cluster::ShareLimits::default().mem_headroom)]
    mem_headroom: f64,

    /// Master seed for every random stream (synthetic workload, policies).
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Synthetic workload: number of jobs, 1 to 2,000,000.
    #[arg(long, default_value_t = 500, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,

    /// Synthetic workload: arrival rate, jobs per hour (default: from --load).
    #[arg(long, value_name = "RATE")]
    jobs_per_hour: Option<f64>,

    /// Synthetic workload: offered load (GPU demand / GPUs) that sets the
    /// arrival rate when --jobs-per-hour is not given.
    #[arg(long, default_value_t = 0.8, value_name = "FRACTION")]
    load: f64,

    /// Timeline sampling interval, whole seconds (0: no timeline samples).
    /// While nothing happens, samples are skipped up to the next event.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    sample_interval: u64,

    /// Write manifest.json, jobs.csv, summary.json, vc_summary.csv,
    /// timeline.csv (and skipped.csv when rows were skipped, timing.json for
    /// GENIE-family runs, learning_curve.csv for RIFLING runs) to this
    /// directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// RIFLING's parameters (`specs/policies.md` §3.2; defaults = the spec's proposal).
#[derive(Args, Clone)]
struct RiflingArgs {
    /// RIFLING: a Q-table saved by `dlsched rifling-train` (required by
    /// rifling-frozen; rifling starts learning from it).
    #[arg(long, value_name = "FILE")]
    rifling_table: Option<PathBuf>,
    /// RIFLING: K-means groups of training tasks (inference is one more).
    #[arg(long, default_value_t = 4, value_name = "K")]
    rifling_k: usize,
    /// RIFLING: learning rate alpha.
    #[arg(long, default_value_t = 0.1, value_name = "ALPHA")]
    rifling_alpha: f64,
    /// RIFLING: discount gamma.
    #[arg(long, default_value_t = 0.9, value_name = "GAMMA")]
    rifling_gamma: f64,
    /// RIFLING: exploration rate at the first decision.
    #[arg(long, default_value_t = 0.3, value_name = "EPS")]
    rifling_epsilon: f64,
    /// RIFLING: exploration rate after the decay.
    #[arg(long, default_value_t = 0.05, value_name = "EPS")]
    rifling_epsilon_end: f64,
    /// RIFLING: decisions over which epsilon decays linearly.
    #[arg(long, default_value_t = 500, value_name = "N")]
    rifling_epsilon_decay: u64,
    /// RIFLING: re-run the K-means every N arrivals.
    #[arg(long, default_value_t = 50, value_name = "N")]
    rifling_regroup: u64,
    /// RIFLING: K-means over the last N training tasks.
    #[arg(long, default_value_t = 200, value_name = "N")]
    rifling_window: usize,
    /// RIFLING: reward: throughput (time-average cluster-normalised
    /// throughput between decisions) or scaling-efficiency (placed task's
    /// normalised rate per GPU).
    #[arg(long, value_enum, default_value = "throughput")]
    rifling_reward: dlsched::policy::rifling::RewardKind,
}

impl RiflingArgs {
    fn params(&self, best_fit_nodes: bool) -> Result<dlsched::policy::rifling::RiflingParams> {
        let p = dlsched::policy::rifling::RiflingParams {
            k: self.rifling_k,
            alpha: self.rifling_alpha,
            gamma: self.rifling_gamma,
            epsilon_start: self.rifling_epsilon,
            epsilon_end: self.rifling_epsilon_end,
            epsilon_decay: self.rifling_epsilon_decay,
            regroup_every: self.rifling_regroup,
            window: self.rifling_window,
            reward: self.rifling_reward,
            best_fit_nodes,
        };
        p.validate().map_err(anyhow::Error::msg)?;
        Ok(p)
    }
}

#[derive(Args)]
struct RiflingTrainArgs {
    /// Cluster preset to train on.
    #[arg(long, value_enum, default_value = "lab16")]
    cluster: ClusterPreset,
    /// Episodes (each a GENIE workload of its own seed).
    #[arg(long, default_value_t = 20)]
    episodes: u64,
    /// Seed of the first episode; episode i uses seed + i (keep it away from
    /// the evaluation seeds).
    #[arg(long, default_value_t = 1000)]
    seed: u64,
    /// Task density, tasks per hour.
    #[arg(long, default_value_t = 10.0)]
    jobs_per_hour: f64,
    /// Arrival window per episode, hours.
    #[arg(long, default_value_t = 24.0)]
    hours: f64,
    /// Put placements on the fullest nodes with room.
    #[arg(long)]
    genie_best_fit: bool,
    #[command(flatten)]
    rifling: RiflingArgs,
    /// Output file (JSON: manifest, centroids, Q-table).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

fn rifling_train(a: &RiflingTrainArgs) -> Result<ExitCode> {
    use dlsched::policy::rifling::{Agent, RiflingMode};
    use std::sync::{Arc, Mutex};
    if a.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    if !(a.jobs_per_hour.is_finite() && a.jobs_per_hour > 0.0) {
        bail!("--jobs-per-hour must be a positive number, got {}", a.jobs_per_hour);
    }
    if !(a.hours.is_finite() && a.hours > 0.0) {
        bail!("--hours must be a positive number, got {}", a.hours);
    }
    if a.seed.checked_add(a.episodes - 1).is_none() {
        bail!("--seed {} + {} episodes overflows the 64-bit seed range", a.seed, a.episodes);
    }
    // Fail before training, not after: the output's directory must exist.
    if let Some(parent) = a.out.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        bail!("--out {}: the directory {} does not exist", a.out.display(), parent.display());
    }
    let params = a.rifling.params(a.genie_best_fit)?;
    let cspec = a.cluster.spec();
    let gpn = cspec.nodes.iter().map(|n| n.gpus).max().unwrap_or(1);
    let actions = (cspec.nodes.len() as u32 * gpn) as usize + 1;
    let agent = match &a.rifling.rifling_table {
        Some(p) => dlsched::experiment::load_rifling_agent(p)?,
        None => Agent::new(params, actions, a.seed),
    };
    let agent = Arc::new(Mutex::new(agent));
    let mut curve =
        String::from("episode,seed,decisions,epsilon,reward_mean,normalized_throughput_mean,makespan_s,jct_mean_s\n");
    // Episode lines as training goes; a full stdout must not cost the table.
    let mut progress = DeferredOut::default();
    for e in 0..a.episodes {
        let seed = a.seed + e;
        agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?.reseed(seed);
        let spec = RunSpec {
            rifling: Some(dlsched::experiment::RiflingRun { mode: RiflingMode::Online, params, table: None }),
            genie: None,
            workload: WorkloadSource::Genie(GenieWorkloadSpec {
                ect: dlsched::workload::genie::EctBasis::True,
                jobs_per_hour: a.jobs_per_hour,
                hours: a.hours,
            }),
            cluster: ClusterChoice::Preset { preset: a.cluster },
            policy: PolicyConfig {
                order: PolicyName::Fifo.queue_order(),
                backfill: false,
                placement: PlacementKind::Consolidate,
            },
            seed,
            rate_model: dlsched::experiment::RateModelKind::Table,
            profiles: None,
            share: Default::default(),
            sample_interval_ms: 0,
            tie_order: Default::default(),
        };
        let r = dlsched::experiment::run_one_with_agent(&spec, Some(agent.clone()), |_| {})
            .with_context(|| format!("episode {e}"))?;
        let s = &r.summary;
        let g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?;
        let reward = s.policy_metrics.get("rifling_reward_mean").copied().unwrap_or(0.0);
        let nt = s.normalized_throughput_mean.unwrap_or(0.0);
        progress.line(format_args!(
            "episode {e:>3} seed {seed}: {} decisions, epsilon {:.3}, reward {reward:.4}, norm. throughput {nt:.4}, makespan {:.0} s, JCT {:.0} s",
            g.decisions,
            g.epsilon(),
            s.makespan_s,
            s.jct_mean_s
        ));
        curve.push_str(&format!(
            "{e},{seed},{},{:.4},{reward:.6},{nt:.6},{:.3},{:.3}\n",
            g.decisions,
            g.epsilon(),
            s.makespan_s,
            s.jct_mean_s
        ));
    }
    let g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?;
    let doc = serde_json::json!({
        "manifest": {
            "what": "RIFLING Q-table and K-means centroids trained by dlsched rifling-train",
            "dlsched_version": env!("CARGO_PKG_VERSION"),
            "cluster": cspec.name,
            "workload": { "kind": "genie", "jobs_per_hour": a.jobs_per_hour, "hours": a.hours, "rate_model": "table" },
            "episodes": a.episodes,
            "seeds": format!("{}..={}", a.seed, a.seed + a.episodes - 1),
            "parameters": g.params,
        },
        "agent": &*g,
    });
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    dlsched::metrics::export::write_atomic(&a.out, text.as_bytes())
        .with_context(|| format!("writing {}", a.out.display()))?;
    let curve_path = a.out.with_extension("curve.csv");
    dlsched::metrics::export::write_atomic(&curve_path, curve.as_bytes())
        .with_context(|| format!("writing {}", curve_path.display()))?;
    progress.finish()?;
    outln!(
        "wrote {} ({} states, {} groups) and {}",
        a.out.display(),
        g.q.len(),
        g.centroids.len(),
        curve_path.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The generated workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum WorkloadKind {
    /// Philly-like job mix at an offered load.
    Synthetic,
    /// GENIE's QoS tasks.
    Genie,
}

#[cfg(target_os = "linux")]
#[global_allocator]
static GLOBAL: hugealloc::HugePageAlloc = hugealloc::HugePageAlloc;

/// A failed write to standard output or standard error.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard {}: {err}", if *.stderr { "error" } else { "output" })]
struct StdioError {
    /// Standard error (else standard output).
    stderr: bool,
    /// The write's error.
    err: std::io::Error,
}

/// One line to standard output or standard error; see [`outln!`], [`errln!`].
fn write_line(stderr: bool, args: std::fmt::Arguments) -> Result<()> {
    use std::io::Write;
    let res = if stderr {
        writeln!(std::io::stderr().lock(), "{args}")
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{args}").and_then(|()| out.flush())
    };
    res.map_err(|err| anyhow::Error::new(StdioError { stderr, err }))
}

/// Standard output of a command that prints as it goes and writes its files
/// at the end: the first failed write is kept and later lines are dropped,
/// so the work goes on; [`DeferredOut::finish`] returns the error once the
/// files are written.
#[derive(Default)]
struct DeferredOut(Option<anyhow::Error>);

impl DeferredOut {
    /// Writes a line, unless an earlier one failed.
    fn line(&mut self, args: std::fmt::Arguments) {
        if self.0.is_none()
            && let Err(e) = write_line(false, args)
        {
            self.0 = Some(e);
        }
    }

    /// The first failed write, if any.
    fn finish(self) -> Result<()> {
        self.0.map_or(Ok(()), Err)
    }
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

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`dlsched ... | head`), as command-line
    // tools do, instead of panicking on the next print.
    #[cfg(unix)]
    // SAFETY: restoring the default SIGPIPE action before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version (exit 0) go to stdout, usage errors (exit 2)
        // to stderr, as clap's own `exit` does, but a failed write is an error.
        Err(e) => {
            let res = e.print().and_then(|()| std::io::Write::flush(&mut std::io::stdout()));
            return match res {
                Ok(()) => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)),
                Err(err) => fail(&anyhow::Error::new(StdioError { stderr: e.use_stderr(), err })),
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Simulate(args) => simulate(*args).map(|()| ExitCode::SUCCESS),
        Command::Compare(args) => compare::run(&args),
        Command::Profile(args) => profile_cmd::run(&args),
        Command::GenieProfile(args) => genie_profile(&args),
        Command::RiflingTrain(args) => rifling_train(&args),
        Command::Sweep(args) => sweep_cmd::sweep(&args),
        Command::Merge(args) => sweep_cmd::merge_cmd(&args),
        Command::Plot { dir } => {
            let files = if dir.join("sweep.json").exists() {
                dlsched::plot::plot_sweep(&dir)
            } else if dlsched::experiment::run_dir_files().any(|f| dir.join(f).exists()) {
                // A run directory, complete or not: `plot_run` says what is missing.
                dlsched::plot::plot_run(&dir)
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

fn run_spec(a: &SimulateArgs) -> Result<RunSpec> {
    let workload = match &a.trace {
        Some(path) => {
            let mut columns = ColumnMap::default();
            if let Some(f) = &a.columns_file {
                columns.load_toml(f).map_err(anyhow::Error::msg)?;
            }
            if let Some(c) = &a.columns {
                columns.parse_pairs(c).map_err(|e| anyhow::anyhow!("--columns: {e}"))?;
            }
            if a.workload == WorkloadKind::Genie {
                WorkloadSource::TraceTasks {
                    path: path.clone(),
                    format: a.format,
                    spec: GenieWorkloadSpec {
                        ect: a.ect,
                        jobs_per_hour: a.jobs_per_hour.unwrap_or(10.0),
                        hours: a.hours,
                    },
                }
            } else {
                WorkloadSource::Trace { path: path.clone(), format: a.format, columns }
            }
        }
        None => {
            if a.columns.is_some() || a.columns_file.is_some() {
                bail!("--columns and --columns-file apply to a --trace in jobs-csv format");
            }
            if a.machines.vcs.is_some() {
                bail!("the synthetic workload has no VCs; --vcs needs a --trace whose jobs name their VC");
            }
            if let Some(r) = a.jobs_per_hour {
                bounds::positive(r).map_err(|e| anyhow::anyhow!("--jobs-per-hour {e}"))?;
            }
            bounds::jobs(a.jobs.into()).map_err(|e| anyhow::anyhow!("--jobs {e}"))?;
            bounds::positive(a.load).map_err(|e| anyhow::anyhow!("--load {e}"))?;
            match a.workload {
                WorkloadKind::Synthetic => WorkloadSource::Synthetic(SyntheticSpec {
                    jobs: a.jobs,
                    jobs_per_hour: a
                        .jobs_per_hour
                        .map(|r| bounds::synthetic_jobs_per_hour(r, a.jobs))
                        .transpose()
                        .map_err(|e| anyhow::anyhow!("--jobs-per-hour {e}"))?,
                    load: a.load,
                }),
                WorkloadKind::Genie => {
                    bounds::hours(a.hours).map_err(|e| anyhow::anyhow!("--hours {e}"))?;
                    WorkloadSource::Genie(GenieWorkloadSpec {
                        ect: a.ect,
                        jobs_per_hour: bounds::genie_jobs_per_hour(a.jobs_per_hour.unwrap_or(10.0), a.hours)
                            .map_err(|e| anyhow::anyhow!("--jobs-per-hour {e}"))?,
                        hours: a.hours,
                    })
                }
            }
        }
    };
    let cluster = a.machines.choice()?;
    bounds::theta(a.theta).map_err(|e| anyhow::anyhow!("--theta {e}"))?;
    if a.workload == WorkloadKind::Genie {
        bounds::hours(a.hours).map_err(|e| anyhow::anyhow!("--hours {e}"))?;
    }
    let genie = a.policy.genie().map(|variant| GenieRun {
        options: GenieOptions { variant, theta: a.theta, backfill: a.backfill, best_fit_nodes: a.genie_best_fit },
        models: a.genie_models.clone(),
    });
    let tasks = matches!(workload, WorkloadSource::Genie(_) | WorkloadSource::TraceTasks { .. });
    if genie.is_some() && !tasks {
        bail!(
            "--policy {} schedules moldable tasks: use it with --workload genie (trace jobs have a fixed GPU count; use fifo or sjf)",
            a.policy.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
        );
    }
    let rifling = match a.policy.rifling() {
        Some(mode) => Some(dlsched::experiment::RiflingRun {
            mode,
            params: a.rifling.params(a.genie_best_fit)?,
            table: a.rifling.rifling_table.clone(),
        }),
        None => None,
    };
    if rifling.is_some() && !tasks {
        bail!("the RIFLING policies schedule moldable tasks: use them with --workload genie");
    }
    Ok(RunSpec {
        rifling,
        genie,
        workload,
        cluster,
        policy: PolicyConfig { order: a.policy.queue_order(), backfill: a.backfill, placement: a.placement },
        tie_order: a.tie_order,
        seed: a.seed,
        rate_model: a.rate_model,
        profiles: a.profiles.clone(),
        share: {
            let s = dlsched::cluster::ShareLimits { max_tenants: a.max_tenants, mem_headroom: a.mem_headroom };
            s.validate()?;
            s
        },
        sample_interval_ms: bounds::sample_interval_ms(a.sample_interval)
            .map_err(|e| anyhow::anyhow!("--sample-interval {e}"))?,
    })
}

/// The cluster the options `--vcs`, `--nodes-file`, `--nodes --gpus-per-node
/// [--gpu-type]` and `--cluster` name (in that order of precedence; default
/// lab16), shared by `simulate` and `genie-profile`.
fn cluster_choice(
    vcs: Option<&PathBuf>,
    nodes_file: Option<&PathBuf>,
    uniform: (Option<u32>, Option<u32>, Option<&String>),
    preset: Option<ClusterPreset>,
) -> Result<ClusterChoice> {
    Ok(match (vcs, nodes_file, uniform) {
        (Some(path), ..) => ClusterChoice::VcFile { path: path.clone() },
        (None, Some(path), _) => {
            let list = dlsched::cluster::load_nodes_file(path)?;
            if list.cpu_only_nodes > 0 {
                errln!(
                    "{}: {} of {} nodes have no GPU and are left out",
                    path.display(),
                    list.cpu_only_nodes,
                    list.rows
                )?;
            }
            ClusterChoice::NodesFile { path: path.clone() }
        }
        (None, None, (Some(nodes), Some(gpus_per_node), gpu_type)) => {
            bounds::nodes(nodes.into()).map_err(|e| anyhow::anyhow!("--nodes {e}"))?;
            bounds::gpus_per_node(gpus_per_node.into()).map_err(|e| anyhow::anyhow!("--gpus-per-node {e}"))?;
            ClusterChoice::Uniform { nodes, gpus_per_node, gpu_type: gpu_type.cloned() }
        }
        (None, None, _) => ClusterChoice::Preset { preset: preset.unwrap_or(ClusterPreset::Lab16) },
    })
}

/// Refuses an output directory that is a file, that would overwrite or
/// delete one of the run's inputs (`inputs`: option name and path, e.g.
/// `--vcs X/vc_summary.csv`), that holds a directory where a run writes a
/// file, or that cannot be written (a file is created and removed in it);
/// creates it. Called before the simulation, so that a long run does not end
/// on an unwritable `--out`. Returns whether it created the directory.
fn check_out_dir(out: &Path, inputs: &[(&str, &Path)]) -> Result<bool> {
    if out.exists() && !out.is_dir() {
        bail!("--out {}: exists and is not a directory", out.display());
    }
    if let Ok(dir) = out.canonicalize() {
        for (option, input) in inputs {
            // A run first removes every name of `run_dir_files` from --out,
            // then writes some of them.
            if let (Some(parent), Some(name)) =
                (input.canonicalize().ok().and_then(|t| t.parent().map(Path::to_path_buf)), input.file_name())
                && parent == dir
                && dlsched::experiment::run_dir_files().any(|f| name == f.as_str())
            {
                bail!(
                    "--out {} would overwrite or delete the input {option} {}; choose another directory",
                    out.display(),
                    input.display()
                );
            }
        }
        if let Some(name) = dlsched::experiment::run_dir_files().find(|f| dir.join(f).is_dir()) {
            bail!(
                "--out {}: {} is a directory, and a run writes a file of that name there; move it or choose another directory",
                out.display(),
                out.join(name).display()
            );
        }
    }
    let created = !out.exists();
    std::fs::create_dir_all(out).with_context(|| format!("--out {}: cannot create the directory", out.display()))?;
    // A name of the run directory's own (a leftover is removed by the next run).
    let probe = out.join("manifest.json.tmp");
    let res = std::fs::File::create(&probe).and_then(|mut f| std::io::Write::write_all(&mut f, b"\n"));
    let _ = std::fs::remove_file(&probe);
    if let Err(e) = res {
        if created {
            let _ = std::fs::remove_dir(out);
        }
        bail!("--out {}: cannot write there: {e}", out.display());
    }
    Ok(created)
}

fn simulate(a: SimulateArgs) -> Result<()> {
    let spec = run_spec(&a)?;
    let created = match &a.out {
        Some(out) => {
            let inputs = [
                ("--trace", &a.trace),
                ("--vcs", &a.machines.vcs),
                ("--nodes-file", &a.machines.nodes_file),
                ("--columns-file", &a.columns_file),
                ("--genie-models", &a.genie_models),
                ("--rifling-table", &a.rifling.rifling_table),
                ("--profiles", &a.profiles),
            ];
            let inputs: Vec<(&str, &Path)> = inputs.iter().filter_map(|(o, p)| p.as_deref().map(|p| (*o, p))).collect();
            check_out_dir(out, &inputs)?
        }
        None => false,
    };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} simulating [{bar:30}] {pos}/{len} jobs done, {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let report = run_one(&spec, |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.completed as u64);
        bar.set_message(format!("simulated time {:.1} h", p.now.as_secs_f64() / 3600.0));
    })
    .map_err(|e| {
        // Leave no empty directory behind for a run that never wrote one.
        if let (true, Some(out)) = (created, &a.out) {
            let _ = std::fs::remove_dir(out);
        }
        match e {
            // Input and option errors speak for themselves; only a failure of
            // the simulation itself is labelled so.
            dlsched::error::RunError::Sim(_) => anyhow::Error::new(e).context("simulation failed"),
            e => anyhow::Error::new(e),
        }
    })?;
    bar.finish_and_clear();
    // The files first: a failed print (a full stdout) must not cost the run.
    if let Some(dir) = &a.out {
        write_run_dir(&report, dir).context("writing the run directory")?;
    }
    notes(&a)?;
    share_note(&a, &report)?;
    print_summary(&report)?;
    if let Some(dir) = &a.out {
        outln!("\nwrote {}", dir.display())?;
    }
    // The process exits next: the OS reclaims the run's memory at once, far
    // faster than freeing every job's allocations one by one.
    std::mem::forget(report);
    Ok(())
}

/// Tells the user, on stderr, about options this run ignores.
fn notes(a: &SimulateArgs) -> Result<()> {
    let genie_workload = a.workload == WorkloadKind::Genie;
    let defaults = dlsched::cluster::ShareLimits::default();
    let note = |s: &str| errln!("note: {s}");
    if !a.placement.may_share() && (a.max_tenants != defaults.max_tenants || a.mem_headroom != defaults.mem_headroom) {
        note(
            "--max-tenants and --mem-headroom apply only to a sharing placement (share-first-fit, share-best-fit, fgd, memory-efficiency, iawp)",
        )?;
    }
    if a.policy.genie().is_none() && (a.genie_models.is_some() || a.genie_best_fit || a.theta != 0.4) {
        note("--genie-models, --genie-best-fit and --theta apply only to the GENIE-family policies")?;
    }
    if !genie_workload && (a.hours != 24.0 || a.ect != dlsched::workload::genie::EctBasis::Predicted) {
        note("--hours and --ect apply only to --workload genie")?;
    }
    if a.trace.is_some() && !genie_workload && (a.jobs != 500 || a.load != 0.8 || a.jobs_per_hour.is_some()) {
        note(
            "--jobs, --load and --jobs-per-hour shape the synthetic workload; a --trace replay takes its jobs and arrivals from the file",
        )?;
    }
    if a.policy.rifling().is_some() && (a.backfill || a.placement != PlacementKind::Consolidate) {
        note(
            "the RIFLING policies and random-placement choose each task's placement themselves and take tasks in arrival order: --placement and --backfill do not apply",
        )?;
    }
    if genie_workload && a.backfill && a.policy.genie().is_none() && a.policy.rifling().is_none() {
        // Every GENIE task asks for one GPU under a queue policy: when the
        // first task in the queue cannot start, no GPU is free for a later one.
        note(
            "--backfill changes nothing here: fifo and sjf run each GENIE task on 1 GPU, so no task can start while the first in the queue waits",
        )?;
    }
    if a.policy.rifling().is_none() && a.rifling.rifling_table.is_some() {
        note("--rifling-table and the --rifling-* options apply only to the RIFLING policies")?;
    }
    if genie_workload && a.rate_model == dlsched::experiment::RateModelKind::Trace {
        note("GENIE tasks run at the profile table's speeds (trace speed would make every placement equal)")?;
    }
    Ok(())
}

/// Tells the user, on stderr, when a sharing placement ran jobs that cannot
/// share: a job with neither a memory figure nor a guaranteed share holds
/// whole GPUs ([`dlsched::cluster::Cluster::tenant_mem_mib`]), synthetic or
/// trace job alike.
fn share_note(a: &SimulateArgs, report: &RunReport) -> Result<()> {
    if !a.placement.may_share() {
        return Ok(());
    }
    let specs = report.output.jobs.specs();
    let whole = specs.iter().filter(|s| s.task.is_none() && s.gpu_mem_mib.is_none() && s.gpu_milli.is_none()).count();
    if whole == 0 {
        return Ok(());
    }
    let hint = if a.rate_model == dlsched::experiment::RateModelKind::Trace {
        "; --rate-model table gives jobs a model and a memory estimate"
    } else {
        ""
    };
    if whole == specs.len() {
        errln!(
            "note: no job has a memory figure or a guaranteed share (gpu_milli), so none will share a GPU: each holds whole GPUs, as with an exclusive placement{hint}"
        )?;
    } else {
        errln!(
            "note: {whole} of {} jobs have no memory figure or guaranteed share (gpu_milli); they hold whole GPUs and share none{hint}",
            specs.len()
        )?;
    }
    Ok(())
}

/// The summary's `speed` line: the profile models' counters (`evaluations`
/// and fallbacks) and the co-location model's (`coloc_*`), those present;
/// `None` when there are none or all are 0 (trace speed), which would say
/// nothing.
fn speed_line(model: &str, c: &std::collections::BTreeMap<String, u64>) -> Option<String> {
    if c.values().all(|&n| n == 0) {
        return None;
    }
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    let mut parts = Vec::new();
    if c.contains_key("evaluations") {
        parts.push(format!(
            "{} rate evaluations; fallbacks: model {}, GPU type {}, split {}, batch {}",
            get("evaluations"),
            get("model"),
            get("gpu_type"),
            get("split"),
            get("batch")
        ));
    }
    if c.contains_key("coloc_evaluations") {
        parts.push(format!(
            "co-location {} evaluations, {} fallbacks, bounded above {}, below {}",
            get("coloc_evaluations"),
            get("coloc_fallbacks"),
            get("coloc_bounded_above"),
            get("coloc_bounded_below")
        ));
    }
    Some(format!("speed     {model}: {}", parts.join("; ")))
}

/// A summary figure: two decimals from 0.1 up (and for 0), three significant
/// digits below, so that a small value (0.00268) does not print as 0.00.
fn small_figure(x: f64) -> String {
    if x == 0.0 || x.abs() >= 0.1 || !x.is_finite() {
        format!("{x:.2}")
    } else {
        let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
        format!("{x:.decimals$}")
    }
}

fn print_summary(r: &RunReport) -> Result<()> {
    let s = &r.summary;
    let input = match &r.input.path {
        Some(p) => format!("{} ({})", p.display(), r.input.format),
        None => format!("{}, {} jobs, seed {}", r.input.format, r.input.rows, r.spec.seed),
    };
    outln!(
        "dlsched {} | policy {} | placement {} | cluster {} ({} GPUs)",
        env!("CARGO_PKG_VERSION"),
        s.policy,
        r.spec.policy.placement.name(),
        s.cluster,
        s.gpus_total
    )?;
    outln!("input     {input}")?;
    if let Some(line) = speed_line(&s.rate_model, &s.rate_model_counters) {
        outln!("{line}")?;
    }
    outln!()?;
    outln!(
        "  jobs            {:>12} total, {} completed, {} skipped, {} unfinished",
        s.jobs_total,
        s.jobs_completed,
        s.jobs_skipped,
        s.jobs_unfinished
    )?;
    for (reason, n) in &s.jobs_skipped_by_reason {
        outln!("    skipped       {n:>12} {reason}")?;
    }
    let h = |x: f64| format!("{x:>12.1} s  ({:.2} h)", x / 3600.0);
    outln!("  JCT mean        {}", h(s.jct_mean_s))?;
    outln!("  JCT p50/p95/p99 {:>12.1} / {:.1} / {:.1} s", s.jct_p50_s, s.jct_p95_s, s.jct_p99_s)?;
    outln!("  queueing mean   {}", h(s.queue_delay_mean_s))?;
    outln!("  queueing p95    {}", h(s.queue_delay_p95_s))?;
    outln!("  makespan        {}", h(s.makespan_s))?;
    outln!("  GPU utilisation {:>12.1} %  ({:.1} GPU-hours)", s.gpu_utilization * 100.0, s.gpu_hours)?;
    outln!(
        "  offered load    {:>12}    (GPU-time asked / (GPUs x max(arrival span, mean run time)))",
        small_figure(s.offered_load)
    )?;
    if s.shared_launches > 0 {
        outln!(
            "  GPU sharing     {:>12} jobs shared a GPU; achieved / isolated speed {:.3} on average",
            s.colocated_jobs,
            s.interference_slowdown_mean
        )?;
    }
    if let Some(q) = s.qos_guarantee_rate {
        let classes: Vec<String> =
            s.qos_guarantee_by_class.iter().map(|(k, v)| format!("{k} {:.1} %", v * 100.0)).collect();
        outln!("  QoS guarantee   {:>12.1} %  ({})", q * 100.0, classes.join(", "))?;
        if let Some(l) = s.normalized_latency_mean {
            outln!("  norm. latency   {l:>12.2}    (JCT / single-GPU latency, mean)")?;
        }
        if let Some(t) = s.normalized_throughput_mean {
            outln!("  norm. rate      {t:>12.3}    (achieved / single-GPU processing rate, mean)")?;
        }
        if let (Some(m), Some(p)) = (s.prediction_error_mean, s.prediction_error_p95) {
            outln!(
                "  pred. error     {:>12.1} %  mean, {:.1} % p95 (predicted vs simulated run time)",
                m * 100.0,
                p * 100.0
            )?;
        }
    }
    if r.vcs.len() > 1 {
        outln!("\n  {:<10} {:>6} {:>8} {:>14} {:>14}", "VC", "GPUs", "jobs", "JCT mean s", "queue mean s")?;
        for v in &r.vcs {
            outln!("  {:<10} {:>6} {:>8} {:>14.1} {:>14.1}", v.vc, v.gpus, v.jobs, v.jct_mean_s, v.queue_delay_mean_s)?;
        }
    }
    Ok(())
}
