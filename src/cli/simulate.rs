//! `dlsched simulate`: the command line as a raw spec, translated once into a
//! run spec (`crate::experiment::raw`), run, written and summarised.

use std::path::{Path, PathBuf};

use crate::cli::args::{ClusterArgs, RiflingArgs, nodes_file_note, put_path, value_name};
use crate::experiment::raw::{self, Origin, RawSpec, Value};
use crate::experiment::{ClusterChoice, Registry, RunReport, RunSpec, WorkloadSource, run_one, write_run_dir_as};
use crate::policy::placement::PlacementKind;
use crate::policy::registry::{GenieFamilyOptions, PolicyName};
use crate::trace::TraceFormat;
use crate::workload::synthetic::SyntheticSpec;
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct SimulateArgs {
    /// Rerun the run a manifest.json records (its `spec`: every option, the
    /// seed and the input paths), byte for byte; other run options are
    /// refused. With --out, writes that run directory.
    #[arg(long, value_name = "MANIFEST", conflicts_with_all = SPEC_ARGS)]
    pub(crate) from_manifest: Option<PathBuf>,

    /// With --from-manifest: rerun even if the input trace's SHA-256 differs
    /// from the one the manifest recorded (the run then reads other jobs).
    #[arg(long, requires = "from_manifest")]
    pub(crate) allow_changed_input: bool,

    /// Trace file to replay (CSV). Omit to run the synthetic workload.
    #[arg(long, value_name = "PATH")]
    pub(crate) trace: Option<PathBuf>,

    /// Trace format; `auto` detects it from the header line.
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) format: TraceFormat,

    /// For `jobs-csv`: map fields to your column names, e.g.
    /// `submit_time=arrival,gpu_num=gpus`. Fields: job_id, submit_time (s),
    /// duration (s), gpu_num, then optional vc, user, model (a profile
    /// database name or an alias of Pollux/Sia/ElasticFlow/Chronus traces,
    /// e.g. cifar10, gpt2), local_bsz (samples per GPU), global_bsz (samples
    /// per iteration of the whole job; divided by gpu_num, rounding down),
    /// deadline (s, absolute, on the submit_time clock), num_iteration
    /// (iterations: the row is a work-defined job of ElasticFlow's model,
    /// run on T4s or A100s; duration then optional and unused). An
    /// ElasticFlow trace: `num_iteration=iteration,gpu_num=num_gpu,model=model_name,global_bsz=batch_size,deadline=ddl`
    /// (without `num_iteration=iteration`: duration-defined jobs).
    #[arg(long, value_name = "FIELD=COLUMN,...")]
    pub(crate) columns: Option<String>,

    /// For `jobs-csv`: a TOML file with a `[columns]` table of field = "column".
    #[arg(long, value_name = "PATH")]
    pub(crate) columns_file: Option<PathBuf>,

    /// Leave the trace's malformed rows out instead of failing at the first:
    /// each is listed in skipped.csv (line, column, reason) and counted as
    /// `malformed` in the summary; stderr says how many, by column.
    #[arg(long)]
    pub(crate) skip_malformed: bool,

    /// A trace column the run does not read is an error (naming it), not a note.
    #[arg(long)]
    pub(crate) strict_input: bool,

    /// The cluster.
    #[command(flatten)]
    pub(crate) machines: ClusterArgs,

    /// Policy: every kind of the registry (the values below). Queue
    /// policies (any workload): fifo (submit time), sjf (shortest trace
    /// duration first), each over --placement; qssf (Helios: expected
    /// GPU-time first). Preemptive (--policy-opt sets their options,
    /// --checkpoint the cost of a preemption): srtf (shortest remaining time
    /// first), las (least attained service in rounds), dlas, dlas-gpu,
    /// tiresias-gittins (Tiresias), gandiva, themis, gavel, gavel-fifo,
    /// gavel-max-sum.
    /// Work-defined jobs (elastic workloads), at 60-s ticks as the Pollux
    /// simulator: tiresias-tuned (two-queue 2D-LAS on tuned GPUs), optimus
    /// (greedy marginal-gain GPUs by remaining work), pollux (elastic GPUs
    /// and batch per job by a genetic search for goodput), sia (one GPU type
    /// and count per job by an integer program over normalised goodputs, on
    /// clusters of several GPU types).
    /// ElasticFlow jobs with deadlines (jobs-csv with num_iteration and
    /// deadline): elasticflow (admission control by minimum satisfactory
    /// share, leftover GPUs by marginal gain; rejected jobs never run), edf
    /// (ElasticFlow's earliest-deadline-first baseline, elastic), chronus
    /// (ElasticFlow's Chronus baseline: rigid jobs, 240-s leases by an
    /// integer program; jobs it cannot guarantee run on leftover GPUs).
    /// GENIE family (moldable tasks of --workload
    /// genie; they choose each task's GPUs): genie (QoS-aware: best
    /// cost-efficiency placement that meets the task's expected completion
    /// time, least waiting allowance first), the paper's baselines
    /// genie-fifo, capacity, min-min, weighted-fair (black-box placement),
    /// tetris-perf, tetris-cer (packing order), and dlsched's earlier
    /// prediction-using variants fifo-cer, min-min-pred, weighted-fair-cer,
    /// tetris-perf-srtf, tetris-cer-srtf (not in the paper).
    #[arg(long, value_parser = PolicyNameParser::default(), default_value = "fifo")]
    pub(crate) policy: PolicyArg,

    /// Sets one option of the policy, NAME=VALUE (repeatable), by the name
    /// its options struct gives it; VALUE is a TOML scalar (true, 3, 0.5,
    /// "text"; bare text is a string). Any policy, no flag of its own: e.g.
    /// the Helios simulator's SRTF is --policy srtf --policy-opt
    /// quota-by-count=true --policy-opt pending-first-on-ties=true
    /// --policy-opt preempted-to-back=true --policy-opt
    /// helios-release-delay=true. An unknown name or a bad value is an
    /// error that lists the policy's options and their defaults. Applied
    /// after --backfill, --placement, --theta and the other policy flags. A
    /// sweep file sets the same with `policy_opt.NAME = VALUE`.
    #[arg(long = "policy-opt", value_name = "NAME=VALUE", value_parser = policy_opt)]
    pub(crate) policy_opt: Vec<(String, String)>,

    /// Checkpoint/restore overhead of a preemption, added to the preempted
    /// job's remaining work: none (free), or helios-table, the Helios
    /// simulator's fixed table by GPU count (7 s for 1 GPU, 30 s up to 8,
    /// 60 s above; HeliosArtifact policy.py), or gandiva, Gandiva's
    /// suspend/resume, 100 ms per preemption. Only preemptive policies
    /// (srtf, las, the Tiresias kinds, gandiva, themis, the Gavel kinds)
    /// preempt.
    #[arg(long, value_enum, default_value = "none", value_name = "MODEL")]
    pub(crate) checkpoint: crate::engine::CheckpointModel,

    /// How work-defined jobs (elastic-workload traces) progress in time:
    /// exact (event times to the ms) or pollux-sim, the Pollux simulator's
    /// semantics: 60-s steps, epoch crossings rounded to whole seconds
    /// (pair it with tiresias-tuned, optimus or pollux, which act every
    /// 60 s by default, to replay that simulator).
    #[arg(long, value_enum, default_value = "exact", value_name = "TIMING")]
    pub(crate) elastic_timing: crate::engine::ElasticTiming,

    /// Re-scale delay of a work-defined job, seconds: it makes no progress
    /// for this long after each (re)allocation. Default: the progress
    /// model's, 30 s for Pollux's, per application for Sia's (bert 120,
    /// cifar10 50, deepspeech2 25, imagenet 250, ncf 15, yolov3 80).
    #[arg(long, value_name = "SECONDS")]
    pub(crate) rescale_delay: Option<f64>,

    /// The application model of a Pollux or Sia workload's work-defined
    /// jobs: auto (Sia's when every GPU type of the cluster is one Sia
    /// measured, T4, V100, A100, RTX2080Ti or RTX6000, and not all are T4:
    /// --cluster sia, sia-physical; else Pollux's, T4 speeds), pollux or sia
    /// (per GPU type; an error on a type Sia did not measure).
    #[arg(long, value_enum, default_value = "auto", value_name = "MODEL")]
    pub(crate) elastic_model: crate::profile::elastic::ElasticModel,

    /// Without --trace: the synthetic Philly-like job mix (synthetic) or
    /// GENIE's QoS tasks (genie: six DL models, half training, half
    /// inference, Poisson at --jobs-per-hour, default 10, over --hours,
    /// priority classes 5/35/60 %). With --trace, genie turns the trace's
    /// first jobs-per-hour x hours jobs into moldable tasks (their arrival
    /// pattern rescaled to --hours, durations to a 45-minute median; GENIE's
    /// task types drawn per job). pollux (needs --trace, a Philly job list
    /// in the Pollux artifact's columns, e.g.
    /// ../shared/traces/philly/pollux_philly_jobs.csv): --jobs work-defined
    /// jobs (default 160) drawn by the rules of the Pollux artifact's
    /// workload generator: rows of at least 60 s and under 1,000 GPU-hours
    /// whose time of day, shifted back by --start-hour (default 2), is in the
    /// first --hours hours (default 8); application by GPU time, tuned GPUs
    /// and batch drawn from its configurations; seeded by --seed (the
    /// artifact's rules, dlsched's own random draws). Its relative job loads
    /// 0.5x, 1x, 1.5x, 2x are --jobs 80, 160, 240, 320.
    #[arg(long, value_enum, default_value = "synthetic")]
    pub(crate) workload: WorkloadKind,

    /// GENIE workload: what a task's expected completion time multiplies:
    /// its single-GPU latency as predicted by the run's fitted GENIE models
    /// (predicted, the paper's definition) or the true one.
    #[arg(long, value_enum, default_value = "predicted")]
    pub(crate) ect: crate::workload::genie::EctBasis,

    /// GENIE workload: arrival window, hours (default 24). Pollux workload:
    /// the window of the day its jobs arrive in, whole hours 1 to 24 (default 8).
    #[arg(long, value_name = "H")]
    pub(crate) hours: Option<f64>,

    /// Pollux workload: the hour of the day its window starts at, 0 to 23
    /// (default 2, the artifact's).
    #[arg(long, value_name = "HOUR")]
    pub(crate) start_hour: Option<u32>,

    /// GENIE workload: exactly N tasks arriving uniformly over --hours
    /// (instead of a Poisson count at --jobs-per-hour); --tasks 150 --hours 1
    /// is a burst of 150 tasks in one hour.
    #[arg(long, value_name = "N", conflicts_with_all = ["jobs_per_hour", "jobs_per_hour_per_gpu"])]
    pub(crate) tasks: Option<u64>,
    /// GENIE workload: the task mix: paper (six types, half inference) or
    /// training (every task trains, so every task's speed depends on how it
    /// spreads across nodes).
    #[arg(long, value_enum, default_value_t = crate::workload::genie::TaskMix::Paper)]
    pub(crate) task_mix: crate::workload::genie::TaskMix,

    /// GENIE workload: task density per GPU of the cluster, tasks per hour
    /// per GPU (the density is this x the cluster's GPUs: 1.25 is 20 tasks
    /// per hour on 16 GPUs).
    #[arg(long, value_name = "RATE", conflicts_with = "jobs_per_hour")]
    pub(crate) jobs_per_hour_per_gpu: Option<f64>,

    /// GENIE family: concentration weight theta of the placement cost
    /// n/(N G) + theta d_node/N (the paper's example: 0.4).
    #[arg(long, default_value_t = GenieFamilyOptions::default().theta, value_name = "THETA")]
    pub(crate) theta: f64,

    /// GENIE family: fitted models saved by `dlsched genie-profile` (default:
    /// profile at the start of the run, seeded by --seed).
    #[arg(long, value_name = "FILE")]
    pub(crate) genie_models: Option<PathBuf>,

    /// GENIE family: put a placement's GPUs on the fullest nodes that have
    /// room (best fit) instead of the emptiest (the spec's proposal).
    #[arg(long)]
    pub(crate) genie_best_fit: bool,

    #[command(flatten)]
    pub(crate) rifling: RiflingArgs,

    /// The queue policies (fifo, sjf, qssf, IAWP, the node-dispatch kinds,
    /// the GENIE family): let later jobs start when the head of the queue
    /// does not fit (greedy, no reservation). Without it the queue is strict
    /// (head-of-line blocking) when replaying a --trace or GENIE tasks; on
    /// the synthetic workload every queue policy backfills by default
    /// (--strict turns it off), as in an experiment file and from Python.
    #[arg(long, conflicts_with = "strict")]
    pub(crate) backfill: bool,

    /// Synthetic workload, every queue policy: strict queue, no backfill
    /// (the experiment-file key `backfill = false`). The pass
    /// stops at the first job that cannot start, so one wide job at the head
    /// (8 GPUs waiting for two whole nodes) holds back every job behind it,
    /// even 1-GPU jobs that would fit (head-of-line blocking). Trace replays
    /// are strict without it, as the Helios and Tiresias simulators are.
    #[arg(long)]
    pub(crate) strict: bool,

    /// Order of jobs submitted at the same instant: trace (file order) or
    /// numpy2-avx512, the order pandas' default sort_values gives them under
    /// NumPy 2.0-2.2 on an AVX-512 CPU (an unstable quicksort over the submit
    /// times in file order). Simulators written with pandas, such as the
    /// Helios simulator, queue ties that way; use it to match one job for job.
    #[arg(long, value_enum, default_value = "trace", value_name = "ORDER")]
    pub(crate) tie_order: crate::trace::tie_order::TieOrder,

    /// Placement: consolidate (fewest nodes; best fit on one node when the job
    /// fits one), first-fit (first node with room, in node order), recorded
    /// (the trace's per-server split), or a GPU-sharing rule: share-first-fit
    /// / share-best-fit put a job on GPUs other jobs already use when its
    /// memory fits beside theirs (best fit = least memory left over), and
    /// co-located jobs slow each other down: two tenants at their measured pair
    /// speeds, more tenants (or unmeasured pairs) within [1 - switch cost, best
    /// measured pair sum] of one GPU together (src/profile/coloc.rs). The
    /// other sharing rules, memeff-pack, fgd and iawp, are below.
    #[arg(long, value_parser = PlacementKindParser, default_value = "consolidate")]
    pub(crate) placement: PlacementKind,

    /// Job speed: trace = every job runs its trace duration wherever it is
    /// placed; table / genie = from the calibrated profile database (table
    /// interpolation, or GENIE's fitted model): a job placed other than its
    /// recorded allocation runs at the measured ratio of iteration times.
    /// Jobs the trace gives no model or batch get one drawn from the database
    /// (seeded). The summary names them profile-table / profile-genie.
    #[arg(long, value_enum, default_value = "trace")]
    pub(crate) rate_model: crate::experiment::RateModelKind,

    /// A profile database directory (the CSVs written by dlsched profile
    /// import) instead of the builtin one. With either, a job with a known
    /// model and per-GPU batch is placed only on GPUs with enough memory, and
    /// a job needing more than any GPU of its partition is skipped
    /// (exceeds_gpu_memory); its memory is the analytical estimate from the
    /// database's models.csv, or, for the models a memory.csv in the
    /// directory has (profile import --include-lucid), that measurement.
    #[arg(long, value_name = "DIR")]
    pub(crate) profiles: Option<PathBuf>,

    /// With a sharing placement (share-first-fit, share-best-fit,
    /// memeff-pack, fgd, iawp): the most jobs on one GPU.
    #[arg(long, value_name = "N", default_value_t = crate::cluster::ShareLimits::default().max_tenants)]
    pub(crate) max_tenants: u32,

    /// With a sharing placement (share-first-fit, share-best-fit,
    /// memeff-pack, fgd, iawp): the fraction of a shared GPU's memory
    /// kept free (0 <= F < 1); a job alone on a GPU may use all of it.
    #[arg(long, value_name = "F", default_value_t = crate::cluster::ShareLimits::default().mem_headroom)]
    pub(crate) mem_headroom: f64,

    /// What the co-location rule reads for a pair of models never measured
    /// on the GPU type: mean (the same pair on another GPU type, else the
    /// type's mean pair speed, else 0.5) or learned (first the prediction of
    /// a model trained on the database's measured pairs, neural collaborative
    /// filtering, src/profile/ncf.rs; counted in coloc_learned). Training
    /// costs about a second, once per database.
    #[arg(long, value_enum, default_value = "mean", value_name = "RULE")]
    pub(crate) coloc_unmeasured: crate::profile::coloc::ColocUnmeasured,

    /// What the predictions of a prediction-using policy read, to run it
    /// under a controlled prediction error. fitted (default): its own model,
    /// as without the flag (the GENIE family's fitted throughput model,
    /// QSSF's --policy-opt estimator). oracle: the simulator's truth, 0 %
    /// error (a GENIE-family task's latency on a placement is exactly how
    /// long the engine runs it there; QSSF's estimate is the job's duration
    /// x GPUs). noisy:P: the oracle x (1 + e), e uniform in [-P %, +P %]
    /// (0 <= P < 100), so P % is the largest error and P/2 % the mean
    /// absolute error (summary.json: prediction_error_mean,
    /// qssf_estimate_error_mean); e is drawn per (seed, task, placement),
    /// the same each time it is asked. Policies that predict nothing refuse
    /// a predictor other than fitted. E.g. --workload genie --policy genie
    /// --predictor noisy:25.
    #[arg(long, value_name = "fitted|oracle|noisy:P")]
    pub(crate) predictor: Option<String>,

    /// Which batch sizes GENIE's offline profiler measures (runs of
    /// --workload genie; no effect elsewhere). grid (default): single-GPU
    /// runs at 1, 2, 4, ... up to the largest measured batch and at the
    /// measured ones, multi-GPU runs at per-GPU batch largest/d, most of
    /// which the profile table interpolates between measured batches.
    /// measured: only at per-GPU batches the public measurements contain,
    /// so the fit is not fitted to our interpolation.
    #[arg(long, value_enum, value_name = "grid|measured")]
    pub(crate) profile_batches: Option<crate::policy::genie::ProfileBatches>,

    /// Master seed for every random stream (synthetic workload, policies).
    #[arg(long, default_value_t = crate::experiment::DEFAULT_SEED)]
    pub(crate) seed: u64,

    /// Synthetic workload: number of jobs, 1 to 20,000,000 (about 200 bytes
    /// of memory each; default 500). Pollux workload: jobs drawn (default 160).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) jobs: Option<u32>,

    /// Synthetic workload: arrival rate, jobs per hour (default: from --load).
    #[arg(long, value_name = "RATE")]
    pub(crate) jobs_per_hour: Option<f64>,

    /// Synthetic workload: offered load (GPU demand / GPUs) that sets the
    /// arrival rate when --jobs-per-hour is not given.
    #[arg(long, default_value_t = SyntheticSpec::default().load, value_name = "FRACTION")]
    pub(crate) load: f64,

    /// Synthetic workload: the largest job, GPUs (default: half the
    /// cluster's GPUs, 8 on lab16: a job of the whole cluster waits until
    /// every GPU is free; 0: the largest partition's GPUs); e.g. 4 on lab16
    /// keeps every job on one node.
    #[arg(long, value_name = "GPUS")]
    pub(crate) max_job_gpus: Option<u32>,

    /// Synthetic workload: the longest job, whole seconds; longer drawn
    /// durations are cut to it (default 86400, one day; 0: no cut, the Philly
    /// list's tail up to 60 days, whose few month-long jobs hold a 16-GPU
    /// cluster's GPUs for much of a run).
    #[arg(long, value_name = "SECONDS")]
    pub(crate) max_duration: Option<u64>,

    /// Timeline sampling interval, whole seconds (0: no timeline samples).
    /// While nothing happens, samples are skipped up to the next event.
    #[arg(long, default_value_t = crate::experiment::DEFAULT_SAMPLE_INTERVAL_S, value_name = "SECONDS")]
    pub(crate) sample_interval: u64,

    /// Stop the run at this simulated time, seconds: a cut-off run, whose
    /// jobs still waiting or running then count as unfinished (said in the
    /// summary). Default: run until every admitted job completed.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) horizon: Option<f64>,

    /// Let the run end with admitted jobs the policy never completed (counted
    /// as unfinished, said in the summary). Without it such a run fails with
    /// an error naming them: its means would leave them out without a word.
    #[arg(long)]
    pub(crate) allow_unfinished: bool,

    /// Write manifest.json, jobs.csv, summary.json, vc_summary.csv,
    /// timeline.csv, vc_timeline.csv (and skipped.csv when rows were skipped, timing.json for
    /// GENIE-family runs, learning_curve.csv for RIFLING runs) to this
    /// directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    /// The tables of --out (jobs, timeline, vc_summary) as CSV, as parquet
    /// (`<table>.parquet` instead of `<table>.csv`; `dlsched plot` reads the
    /// CSVs) or both. Parquet needs a build with the cargo feature `parquet`.
    #[arg(long, value_enum, default_value_t = crate::experiment::OutputFormat::Csv, value_name = "FORMAT")]
    pub(crate) output_format: crate::experiment::OutputFormat,
}

/// The generated workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum WorkloadKind {
    /// Philly-like job mix at an offered load.
    Synthetic,
    /// GENIE's QoS tasks.
    Genie,
    /// Work-defined jobs drawn from a Philly job list by the Pollux artifact's rules.
    Pollux,
}

/// The options of `simulate` that make the run spec (all but --out and
/// --from-manifest).
pub(crate) const SPEC_ARGS: [&str; 67] = [
    "trace",
    "skip_malformed",
    "strict_input",
    "policy_opt",
    "checkpoint",
    "elastic_timing",
    "elastic_model",
    "rescale_delay",
    "format",
    "columns",
    "columns_file",
    "cluster",
    "nodes_file",
    "nodes",
    "gpus_per_node",
    "gpu_type",
    "vcs",
    "vc_scale",
    "policy",
    "workload",
    "ect",
    "hours",
    "start_hour",
    "tasks",
    "task_mix",
    "jobs_per_hour_per_gpu",
    "theta",
    "genie_models",
    "genie_best_fit",
    "rifling_table",
    "rifling_k",
    "rifling_alpha",
    "rifling_gamma",
    "rifling_epsilon",
    "rifling_epsilon_end",
    "rifling_epsilon_decay",
    "rifling_epsilon_per",
    "rifling_tie_break",
    "rifling_q_init",
    "rifling_tau",
    "rifling_queue_feature",
    "rifling_wait",
    "rifling_frozen_greedy",
    "rifling_alpha_schedule",
    "rifling_regroup",
    "rifling_window",
    "rifling_reward",
    "backfill",
    "tie_order",
    "placement",
    "rate_model",
    "predictor",
    "profile_batches",
    "profiles",
    "max_tenants",
    "mem_headroom",
    "seed",
    "jobs",
    "jobs_per_hour",
    "load",
    "sample_interval",
    "horizon",
    "allow_unfinished",
    "coloc_unmeasured",
    "max_job_gpus",
    "max_duration",
    "strict",
];

/// Whether the run is the command line's synthetic workload (no --trace, no
/// --workload genie, no --from-manifest), whose defaults differ from a sweep
/// file's: backfill for fifo and sjf, jobs of at most half the cluster,
/// durations cut at [`raw::FIRST_RUN_MAX_DURATION_S`] ([`raw::first_run_defaults`]).
fn synthetic_scenario(a: &SimulateArgs) -> bool {
    a.from_manifest.is_none() && a.trace.is_none() && a.workload == WorkloadKind::Synthetic
}

/// The command line as a raw spec ([`raw::KEYS`], one key per flag of the
/// same name), for the one translation into a [`RunSpec`].
pub(crate) fn raw_spec(a: &SimulateArgs) -> RawSpec {
    let mut r = RawSpec::new();
    put_path(&mut r, "trace", a.trace.as_deref());
    put_path(&mut r, "columns_file", a.columns_file.as_deref());
    put_path(&mut r, "genie_models", a.genie_models.as_deref());
    put_path(&mut r, "profiles", a.profiles.as_deref());
    a.machines.fill(&mut r);
    a.rifling.fill(&mut r);
    let mut put = |k: &str, v: Value| r.insert(k.into(), v);
    if let Some(c) = &a.columns {
        put("columns", Value::Str(c.clone()));
    }
    put("format", Value::Str(a.format.name().to_string()));
    put("policy", Value::Str(a.policy.kind().to_string()));
    put("workload", Value::Str(value_name(&a.workload)));
    put("ect", Value::Str(value_name(&a.ect)));
    if let Some(h) = a.hours {
        put("hours", Value::Float(h));
    }
    if let Some(h) = a.start_hour {
        put("start_hour", Value::UInt(h.into()));
    }
    // Only when given or read: for another policy it is an error.
    if a.policy.genie().is_some() || a.theta != GenieFamilyOptions::default().theta {
        put("theta", Value::Float(a.theta));
    }
    put("genie_best_fit", Value::Bool(a.genie_best_fit));
    if a.backfill || a.strict {
        put("backfill", Value::Bool(a.backfill));
    }
    put("tie_order", Value::Str(value_name(&a.tie_order)));
    put("placement", Value::Str(value_name(&a.placement)));
    put("rate_model", Value::Str(value_name(&a.rate_model)));
    if let Some(p) = &a.predictor {
        put("predictor", Value::Str(p.clone()));
    }
    if let Some(b) = a.profile_batches {
        put("profile_batches", Value::Str(b.name().into()));
    }
    put("max_tenants", Value::UInt(a.max_tenants.into()));
    put("mem_headroom", Value::Float(a.mem_headroom));
    put("seed", Value::UInt(a.seed));
    if let Some(n) = a.jobs {
        put("jobs", Value::UInt(n.into()));
    }
    if let Some(x) = a.jobs_per_hour {
        put("jobs_per_hour", Value::Float(x));
    }
    if a.task_mix != crate::workload::genie::TaskMix::Paper {
        put("task_mix", Value::Str(crate::cli::args::value_name(&a.task_mix)));
    }
    if let Some(n) = a.tasks {
        put("tasks", Value::UInt(n));
    }
    if let Some(x) = a.jobs_per_hour_per_gpu {
        put("jobs_per_hour_per_gpu", Value::Float(x));
    }
    put("load", Value::Float(a.load));
    put("sample_interval", Value::UInt(a.sample_interval));
    if let Some(h) = a.horizon {
        put("horizon", Value::Float(h));
    }
    if a.allow_unfinished {
        put("allow_unfinished", Value::Bool(true));
    }
    if a.skip_malformed {
        put("skip_malformed", Value::Bool(true));
    }
    if a.strict_input {
        put("strict_input", Value::Bool(true));
    }
    if let Some(m) = a.max_job_gpus {
        put("max_job_gpus", Value::UInt(m.into()));
    }
    if let Some(d) = a.max_duration {
        put("max_duration", Value::UInt(d));
    }
    put("checkpoint", Value::Str(value_name(&a.checkpoint)));
    put("elastic_timing", Value::Str(value_name(&a.elastic_timing)));
    put("elastic_model", Value::Str(value_name(&a.elastic_model)));
    if let Some(d) = a.rescale_delay {
        put("rescale_delay", Value::Float(d));
    }
    put("coloc_unmeasured", Value::Str(value_name(&a.coloc_unmeasured)));
    for (name, v) in &a.policy_opt {
        r.insert(format!("{}{name}", raw::POLICY_OPT), raw::parse_scalar(v));
    }
    r
}

/// A `--policy-opt` value: NAME=VALUE, NAME not empty.
fn policy_opt(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("`{s}` is not NAME=VALUE (e.g. quota-by-count=true)")),
    }
}

pub(crate) fn run_spec(a: &SimulateArgs, registry: &Registry) -> Result<RunSpec> {
    if let Some(m) = &a.from_manifest {
        let spec = RunSpec::from_manifest_in(m, registry).map_err(anyhow::Error::msg)?;
        RunSpec::check_manifest_input(m, a.allow_changed_input).map_err(anyhow::Error::msg)?;
        return Ok(spec);
    }
    let mut names: Vec<&str> = a.policy_opt.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        bail!("--policy-opt {} is given twice; give each option once", w[0]);
    }
    if a.trace.is_none() && a.machines.vcs.is_some() {
        bail!("the synthetic workload has no VCs; --vcs needs a --trace whose jobs name their VC");
    }
    let spec = raw::to_run_spec_in(&raw_spec(a), Origin::CommandLine, None, registry).map_err(anyhow::Error::msg)?;
    nodes_file_note(&spec.cluster)?;
    Ok(spec)
}

/// Refuses an output directory that is a file, that would overwrite or
/// delete one of the run's inputs (`inputs`: option name and path, e.g.
/// `--vcs X/vc_summary.csv`), that holds a directory where a run writes a
/// file, or that cannot be written (a file is created and removed in it);
/// creates it. Called before the simulation, so that a long run does not end
/// on an unwritable `--out`. Returns whether it created the directory.
pub(crate) fn check_out_dir(out: &Path, inputs: &[(&str, &Path)]) -> Result<bool> {
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
                && crate::experiment::run_dir_files().any(|f| name == f.as_str())
            {
                bail!(
                    "--out {} would overwrite or delete the input {option} {}; choose another directory",
                    out.display(),
                    input.display()
                );
            }
        }
        if let Some(name) = crate::experiment::run_dir_files().find(|f| dir.join(f).is_dir()) {
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

pub(crate) fn simulate(a: SimulateArgs, registry: &Registry, argv: &[std::ffi::OsString]) -> Result<()> {
    // Before the run: a format this build cannot write fails at once.
    a.output_format.check_supported().map_err(|e| anyhow::anyhow!("--output-format: {e}"))?;
    let spec = run_spec(&a, registry)?;
    let created = match &a.out {
        Some(out) => {
            let mut inputs: Vec<(&str, &Path)> = Vec::new();
            match &spec.workload {
                WorkloadSource::Trace { path, .. }
                | WorkloadSource::TraceTasks { path, .. }
                | WorkloadSource::Pollux { path, .. } => inputs.push(("--trace", path)),
                _ => {}
            }
            match &spec.cluster {
                ClusterChoice::VcFile { path } | ClusterChoice::ScaledVcFile { path, .. } => {
                    inputs.push(("--vcs", path))
                }
                ClusterChoice::NodesFile { path } => inputs.push(("--nodes-file", path)),
                _ => {}
            }
            inputs.extend(a.columns_file.as_deref().map(|p| ("--columns-file", p)));
            inputs.extend(spec.policy.genie_models().map(|p| ("--genie-models", p)));
            inputs.extend(spec.policy.rifling_table().map(|p| ("--rifling-table", p)));
            inputs.extend(spec.profiles.as_deref().map(|p| ("--profiles", p)));
            inputs.extend(a.from_manifest.as_deref().map(|p| ("--from-manifest", p)));
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
            crate::error::RunError::Sim(_) => anyhow::Error::new(e).context("simulation failed"),
            e => anyhow::Error::new(e),
        }
    })?;
    bar.finish_and_clear();
    // The files first: a failed print (a full stdout) must not cost the run.
    if let Some(dir) = &a.out {
        write_run_dir_as(&report, dir, a.output_format).context("writing the run directory")?;
    }
    if a.from_manifest.is_none() {
        notes(&a)?;
    }
    share_note(&report)?;
    for note in crate::experiment::notes::run_notes(&report, Origin::CommandLine) {
        errln!("note: {note}")?;
    }
    if !report.spec.checkpoint.is_none() && report.summary.preemptions == 0 {
        errln!(
            "note: --checkpoint {} charged nothing: no job was preempted (only preemptive policies such as srtf preempt)",
            report.spec.checkpoint.name()
        )?;
    }
    if report.output.jobs.progress_model().map(|m| m.name()) == Some("pollux") {
        let other: std::collections::BTreeSet<&str> = report
            .output
            .cluster
            .spec()
            .nodes
            .iter()
            .map(|n| n.gpu_type.as_str())
            .filter(|t| !t.eq_ignore_ascii_case("t4"))
            .collect();
        if !other.is_empty() {
            errln!(
                "note: work-defined jobs ran at the Pollux application model's speeds, measured on T4 GPUs (AWS g4dn.12xlarge), \
                 whatever the cluster's GPU type (here {}); `--cluster pollux` is the measured cluster",
                other.into_iter().collect::<Vec<_>>().join(", ")
            )?;
        }
    }
    if report.summary.restarts_total.is_some() && !report.spec.checkpoint.is_none() {
        errln!(
            "note: --checkpoint {} charges duration-defined jobs only: a preempted work-defined job keeps its progress and waits the re-scale delay when it resumes",
            report.spec.checkpoint.name()
        )?;
    }
    if report.summary.restarts_total.is_none()
        && (!report.spec.elastic_timing.is_exact() || report.spec.rescale_delay_ms.is_some())
    {
        errln!(
            "note: --elastic-timing and --rescale-delay changed nothing: the run has no work-defined jobs (an elastic-workload trace has them)"
        )?;
    }
    print_summary(&report)?;
    print_next(&a, &report, argv)?;
    // The process exits next: the OS reclaims the run's memory at once, far
    // faster than freeing every job's allocations one by one.
    std::mem::forget(report);
    Ok(())
}

/// Tells the user, on stderr, about options this run ignores.
pub(crate) fn notes(a: &SimulateArgs) -> Result<()> {
    let note = |s: &str| errln!("note: {s}");
    // The options the policy or placement ignores, as a sweep and the
    // Python package note them. (--theta for another policy is an error.)
    for n in crate::experiment::notes::option_notes(&raw_spec(a), Origin::CommandLine) {
        note(&n)?;
    }
    // The workload options the run's workload does not read (--hours, --ect,
    // --jobs, --load, --max-duration, ...) are among the option notes above.
    if !synthetic_scenario(a) && a.from_manifest.is_none() && a.strict {
        note("--strict changes nothing here: a --trace replay is strict unless --backfill, and so are GENIE tasks")?;
    } else if a.strict && !matches!(&a.policy, PolicyArg::Builtin(n) if n.default_spec().backfill().is_some()) {
        note(&format!(
            "--strict applies to the queue policies (fifo, sjf, qssf, IAWP, the node-dispatch kinds); {} has no backfill to turn off",
            a.policy.kind()
        ))?;
    }
    if a.policy.rifling().is_some() && (a.backfill || a.placement != PlacementKind::Consolidate) {
        note(
            "the RIFLING policies and random-placement choose each task's placement themselves and take tasks in arrival order: --placement and --backfill do not apply",
        )?;
    }
    Ok(())
}

/// The summary's end: where the outputs went (or how to write them) and two
/// commands worth trying next.
fn print_next(a: &SimulateArgs, r: &RunReport, argv: &[std::ffi::OsString]) -> Result<()> {
    match &a.out {
        Some(dir) => outln!("\nwrote {}", dir.display())?,
        None => outln!(
            "\noutputs   none written; --out DIR writes jobs.csv (one row per job), timeline.csv, vc_timeline.csv, summary.json, vc_summary.csv, manifest.json"
        )?,
    }
    let (program, command) = this_command(argv);
    let plot = match &a.out {
        Some(dir) => format!("{program} plot {}", dir.display()),
        None => format!("{command} --out runs/first && {program} plot runs/first"),
    };
    let queue = match r.spec.policy.backfill() {
        Some(true) if synthetic_scenario(a) && !a.backfill => {
            Some(format!("{command} --strict   # a strict queue: one wide job at the head blocks the jobs behind it"))
        }
        Some(false) if synthetic_scenario(a) && a.policy.is(PolicyName::Fifo) => {
            Some(format!("{program} simulate --policy sjf   # shortest job first, with backfill"))
        }
        _ => None,
    };
    outln!("next      {plot}   # JCT and queueing CDFs, utilisation over time (SVG + PNG)")?;
    if let Some(q) = queue {
        outln!("          {q}")?;
    }
    Ok(())
}

/// The program as it was run (`argv[0]` as typed: `dlsched` from PATH,
/// `target/release/dlsched` from a checkout, or an outside crate's binary) and
/// the command `argv` (this process's arguments) ran without its `--out DIR` (a hint's
/// rerun must not overwrite the user's outputs), each word quoted for a POSIX
/// shell where it needs it, so that a hint can be pasted back to repeat the
/// run with one flag more.
fn this_command(argv: &[std::ffi::OsString]) -> (String, String) {
    let mut args = argv.iter();
    let program = args.next().map(|p| shell_word(&p.to_string_lossy())).unwrap_or_else(|| "dlsched".to_string());
    let mut command = program.clone();
    let mut skip_value = false;
    for arg in args {
        let arg = arg.to_string_lossy();
        if std::mem::take(&mut skip_value) || arg.starts_with("--out=") {
            continue;
        }
        if arg == "--out" {
            skip_value = true;
            continue;
        }
        command.push(' ');
        command.push_str(&shell_word(&arg));
    }
    (program, command)
}

/// `word` as one word of a POSIX shell: as it is when it holds only
/// characters no shell treats specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// The synthetic workload in one line, and for a queue policy whether the
/// queue backfills; no lines for a trace or GENIE tasks.
fn scenario_lines(r: &RunReport) -> Vec<String> {
    let WorkloadSource::Synthetic(s) = &r.spec.workload else { return Vec::new() };
    let width = match s.max_job_gpus {
        Some(g) => format!("jobs of at most {g} GPUs"),
        None => "jobs up to the cluster's size".to_string(),
    };
    let length = match s.max_duration_s {
        Some(d) if d % 3600 == 0 => format!("durations cut at {} h", d / 3600),
        Some(d) => format!("durations cut at {d} s"),
        None => "durations uncut (up to 60 days)".to_string(),
    };
    let rate = match s.jobs_per_hour {
        Some(x) => format!("{x} jobs per hour"),
        None => format!("offered load {}", s.load),
    };
    let mut lines = vec![format!("workload  Philly job mix, {width}, {length}; Poisson arrivals at {rate}")];
    if let Some(backfill) = r.spec.policy.backfill() {
        lines.push(if backfill {
            "queue     backfill: when the head of the queue cannot start, later jobs that fit do (--strict: head-of-line blocking)".to_string()
        } else {
            "queue     strict: nothing passes a head of the queue that cannot start (head-of-line blocking; --backfill lets jobs that fit pass)".to_string()
        });
    }
    lines
}

/// Tells the user, on stderr, when a sharing placement ran jobs that cannot
/// share: a job with neither a memory figure nor a guaranteed share holds
/// whole GPUs ([`crate::cluster::Cluster::tenant_mem_mib`]), synthetic or
/// trace job alike.
pub(crate) fn share_note(report: &RunReport) -> Result<()> {
    if !report.spec.policy.placement().may_share() {
        return Ok(());
    }
    let specs = report.output.jobs.specs();
    let whole =
        specs.iter().filter(|s| s.task.is_none() && s.gpu_mem_mib().is_none() && s.gpu_milli().is_none()).count();
    if whole == 0 {
        return Ok(());
    }
    let hint = if report.spec.rate_model == crate::experiment::RateModelKind::Trace {
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
pub(crate) fn speed_line(model: &str, c: &std::collections::BTreeMap<String, u64>) -> Option<String> {
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
pub(crate) fn small_figure(x: f64) -> String {
    if x == 0.0 || x.abs() >= 0.1 || !x.is_finite() {
        format!("{x:.2}")
    } else {
        let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
        format!("{x:.decimals$}")
    }
}

pub(crate) fn print_summary(r: &RunReport) -> Result<()> {
    let s = &r.summary;
    let input = match &r.input.path {
        Some(p) => format!("{} ({})", p.display(), r.input.format),
        None => format!("{}, {} jobs, seed {}", r.input.format, r.input.rows, r.spec.seed),
    };
    outln!(
        "dlsched {} | policy {} | placement {} | cluster {} ({} GPUs)",
        env!("CARGO_PKG_VERSION"),
        s.policy,
        r.spec.policy.placement().name(),
        s.cluster,
        s.gpus_total
    )?;
    outln!("input     {input}")?;
    // The Pollux model, the default, is not named (its runs print as before).
    if r.output.jobs.progress_model().map(|m| m.name()) == Some("sia") {
        outln!(
            "model     sia (work-defined jobs at Sia's per-GPU-type goodput x 1/slowdown; --elastic-model pollux for Pollux's T4 model)"
        )?;
    }
    for line in scenario_lines(r) {
        outln!("{line}")?;
    }
    if let Some(line) = speed_line(&s.rate_model, &s.rate_model_counters) {
        outln!("{line}")?;
    }
    outln!()?;
    // Jobs the policy's admission control refused are neither completed
    // nor unfinished: say so on the jobs line, so that it adds up.
    let rejected = match s.jobs_rejected {
        Some(r) if r > 0 => format!(", {r} rejected"),
        _ => String::new(),
    };
    outln!(
        "  jobs            {:>12} total, {} completed{rejected}, {} skipped, {} unfinished",
        s.jobs_total,
        s.jobs_completed,
        s.jobs_skipped,
        s.jobs_unfinished
    )?;
    for (reason, n) in &s.jobs_skipped_by_reason {
        outln!("    skipped       {n:>12} {reason}")?;
    }
    if s.jobs_unfinished > 0 {
        let why = match s.cut_off.get("horizon_s") {
            Some(h) => format!("cut off at the horizon, {h} s"),
            None => "--allow-unfinished".to_string(),
        };
        outln!(
            "    unfinished    {:>12} admitted jobs did not complete ({why}); the means leave them out",
            s.jobs_unfinished
        )?;
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
    if s.preemptions > 0 {
        outln!(
            "  preemptions     {:>12}    ({} jobs preempted at least once; checkpoint {})",
            s.preemptions,
            s.jobs_preempted,
            r.spec.checkpoint.name()
        )?;
    }
    if let (Some(total), Some(mean)) = (s.restarts_total, s.restarts_mean) {
        let per_app = r.output.jobs.progress_model().is_some_and(|m| m.rescale_delay_ms("").is_some());
        let delay = match r.spec.rescale_delay_ms {
            None if per_app => "its application's re-scale delay".to_string(),
            d => {
                format!("the {} s re-scale delay", d.unwrap_or(crate::engine::DEFAULT_RESCALE_DELAY_MS) as f64 / 1000.0)
            }
        };
        let of = if s.jobs_rejected.is_some_and(|r| r > 0) { ", rejected ones included" } else { "" };
        outln!(
            "  restarts        {:>12}    ({mean:.2} per work-defined job{of}; each reallocation waits {delay})",
            total
        )?;
    }
    if s.shared_launches > 0 {
        outln!(
            "  GPU sharing     {:>12} jobs shared a GPU; achieved / isolated speed {:.3} on average",
            s.colocated_jobs,
            s.interference_slowdown_mean
        )?;
    }
    if let (Some(n), Some(ratio)) = (s.deadline_jobs, s.deadline_satisfactory_ratio) {
        let late = s.deadline_lateness_mean_s.map_or("no job finished".to_string(), |l| format!("{l:.1} s"));
        outln!(
            "  deadlines met   {:>12.1} %  (of {n} jobs with a deadline; mean lateness {late}, on-time jobs as 0)",
            ratio * 100.0
        )?;
        if let (Some(admitted), Some(late)) = (s.deadline_admitted_jobs, s.deadline_late_jobs) {
            let rejected = s.jobs_rejected.unwrap_or(0);
            let lateness = match (s.deadline_late_mean_s.flatten(), s.deadline_late_max_s.flatten()) {
                (Some(m), Some(x)) => format!(" (their lateness mean {m:.1} s, max {x:.1} s)"),
                _ => String::new(),
            };
            outln!("  admission       {admitted:>12} admitted, {rejected} rejected; {late} finished late{lateness}")?;
        }
    }
    if let Some(q) = s.qos_guarantee_rate {
        let classes: Vec<String> =
            s.qos_guarantee_by_class.iter().map(|(k, v)| format!("{k} {:.1} %", v * 100.0)).collect();
        outln!("  QoS guarantee   {:>12.1} %  ({})", q * 100.0, classes.join(", "))?;
        if let Some(m) = s.qos_guarantee_rate_meetable {
            outln!("  QoS, meetable   {:>12.1} %  (prior and normal; urgent's ECT is 0)", m * 100.0)?;
        }
        if let Some(l) = s.normalized_latency_mean {
            outln!("  norm. latency   {l:>12.2}    (run time / single-GPU latency, mean; GENIE's)")?;
        }
        if let Some(l) = s.normalized_latency_with_wait_mean {
            outln!("    with waiting  {l:>12.2}    (JCT / single-GPU latency, mean)")?;
        }
        if let Some(t) = s.normalized_throughput_mean {
            outln!("  norm. rate      {t:>12.3}    (achieved / single-GPU processing rate, mean)")?;
        }
        if let Some(c) = s.normalized_rate_cluster {
            outln!("    cluster       {c:>12.3}    (single-GPU-equivalent work / (GPUs x makespan))")?;
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

/// A `--policy` value: a built-in kind, or a kind of the command line's
/// [`Registry`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PolicyArg {
    /// A built-in kind.
    Builtin(PolicyName),
    /// A registered kind, by name.
    Registered(&'static str),
}

impl PolicyArg {
    /// The kind's name.
    pub(crate) fn kind(&self) -> &str {
        match self {
            PolicyArg::Builtin(n) => n.kind(),
            PolicyArg::Registered(k) => k,
        }
    }

    /// Whether it is the built-in kind `n`.
    pub(crate) fn is(&self, n: PolicyName) -> bool {
        *self == PolicyArg::Builtin(n)
    }

    /// The GENIE variant of a GENIE-family kind.
    pub(crate) fn genie(&self) -> Option<crate::policy::genie::GenieVariant> {
        match self {
            PolicyArg::Builtin(n) => n.genie(),
            PolicyArg::Registered(_) => None,
        }
    }

    /// The RIFLING mode of a RIFLING kind.
    pub(crate) fn rifling(&self) -> Option<crate::policy::rifling::RiflingMode> {
        match self {
            PolicyArg::Builtin(n) => n.rifling(),
            PolicyArg::Registered(_) => None,
        }
    }
}

/// `--policy`'s parser: clap's for [`PolicyName`] (the same possible values
/// in `--help`), then the kinds of the command line's [`Registry`]; its
/// refusal of a placement's name (`--policy iawp`) adds the hint
/// `--placement iawp`.
#[derive(Clone, Default)]
pub(crate) struct PolicyNameParser {
    registry: Registry,
}

impl PolicyNameParser {
    /// The parser knowing the kinds of `registry` too.
    pub(crate) fn new(registry: Registry) -> Self {
        PolicyNameParser { registry }
    }
}

impl clap::builder::TypedValueParser for PolicyNameParser {
    type Value = PolicyArg;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<PolicyArg, clap::Error> {
        if let Some(k) = value.to_str().and_then(|v| self.registry.policy_kind(v)) {
            return Ok(PolicyArg::Registered(k.name()));
        }
        clap::builder::EnumValueParser::<PolicyName>::new().parse_ref(cmd, arg, value).map(PolicyArg::Builtin).map_err(
            |e| {
                let hint = raw::placement_hint(&Origin::CommandLine, "policy", &value.to_string_lossy());
                if hint.is_empty() && self.registry.policies().is_empty() {
                    e
                } else {
                    let names: Vec<&str> = PolicyName::value_variants()
                        .iter()
                        .map(|p| p.kind())
                        .chain(self.registry.policies().iter().map(|k| k.name()))
                        .collect();
                    clap::Error::raw(
                        clap::error::ErrorKind::InvalidValue,
                        format!(
                            "invalid value '{}' for '--policy <POLICY>': expected one of {}{hint}\n",
                            value.to_string_lossy(),
                            names.join(", ")
                        ),
                    )
                    .with_cmd(cmd)
                }
            },
        )
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(PolicyName::value_variants().iter().filter_map(|p| p.to_possible_value()).chain(
            self.registry.policies().iter().map(|k| clap::builder::PossibleValue::new(k.name()).help(k.help())),
        )))
    }
}

/// `--format`'s parser: clap's for [`TraceFormat`] (the same possible
/// values in `--help`), then the formats of the command line's [`Registry`].
#[derive(Clone)]
pub(crate) struct FormatParser {
    registry: Registry,
}

impl FormatParser {
    /// The parser knowing the formats of `registry` too.
    pub(crate) fn new(registry: Registry) -> Self {
        FormatParser { registry }
    }
}

impl clap::builder::TypedValueParser for FormatParser {
    type Value = TraceFormat;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<TraceFormat, clap::Error> {
        if let Some(k) = value.to_str().and_then(|v| self.registry.format_kind(v)) {
            return Ok(TraceFormat::Registered(k));
        }
        clap::builder::EnumValueParser::<TraceFormat>::new().parse_ref(cmd, arg, value).map_err(|e| {
            if self.registry.formats().is_empty() {
                e
            } else {
                clap::Error::raw(
                    clap::error::ErrorKind::InvalidValue,
                    format!(
                        "invalid value '{}' for '--format <FORMAT>': expected one of {}\n",
                        value.to_string_lossy(),
                        self.registry.format_names().join(", ")
                    ),
                )
                .with_cmd(cmd)
            }
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            TraceFormat::value_variants().iter().filter_map(|f| f.to_possible_value()).chain(
                self.registry.formats().iter().map(|k| clap::builder::PossibleValue::new(k.name()).help(k.help())),
            ),
        ))
    }
}

/// `--placement`'s parser: clap's for [`PlacementKind`] (the same possible
/// values in `--help`), whose refusal of `memory-efficiency` (the packer's
/// former name) says where it went.
#[derive(Clone)]
struct PlacementKindParser;

impl clap::builder::TypedValueParser for PlacementKindParser {
    type Value = PlacementKind;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<PlacementKind, clap::Error> {
        clap::builder::EnumValueParser::<PlacementKind>::new().parse_ref(cmd, arg, value).map_err(|e| {
            let hint = raw::renamed_placement_hint(&Origin::CommandLine, "placement", &value.to_string_lossy());
            if hint.is_empty() {
                e
            } else {
                let names: Vec<&str> = PlacementKind::value_variants().iter().map(|p| p.name()).collect();
                clap::Error::raw(
                    clap::error::ErrorKind::InvalidValue,
                    format!(
                        "invalid value '{}' for '--placement <PLACEMENT>': expected one of {}{hint}\n",
                        value.to_string_lossy(),
                        names.join(", ")
                    ),
                )
                .with_cmd(cmd)
            }
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(PlacementKind::value_variants().iter().filter_map(|p| p.to_possible_value())))
    }
}
