//! `dlsched rifling-train`: a RIFLING agent trained over episodes of the GENIE
//! workload; the loop is [`crate::experiment::train::train_rifling`].

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::args::RiflingArgs;
use crate::cli::ldwp_train::train_error;
use crate::cli::stdio::DeferredOut;
use crate::cluster::ClusterPreset;
use crate::experiment::train::{RIFLING_CONVERGE_DQ, RIFLING_CONVERGE_GREEDY, RiflingTrainOptions, train_rifling};
use crate::policy::rifling::RiflingParams;
use anyhow::{Context, Result, bail};
use clap::Args;

#[derive(Args)]
pub(crate) struct RiflingTrainArgs {
    /// Cluster preset to train on.
    #[arg(long, value_enum, default_value = "lab16")]
    pub(crate) cluster: ClusterPreset,
    /// Most episodes (each a GENIE workload of its own seed); training stops
    /// earlier when the convergence criterion holds (--converge-window).
    #[arg(long, default_value_t = 500)]
    pub(crate) episodes: u64,
    /// Convergence: stop once epsilon is at its floor and, in each of the
    /// last N episodes, the mean |ΔQ| of its updates is below --converge-dq
    /// and the share of its updates made in states whose greedy action
    /// (over tried actions) changed during the episode is below
    /// --converge-greedy. 0 = never stop early (run --episodes).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub(crate) converge_window: u64,
    /// Convergence: mean |ΔQ| per update in an episode, below which the
    /// episode counts as settled.
    #[arg(long, default_value_t = RIFLING_CONVERGE_DQ, value_name = "DQ")]
    pub(crate) converge_dq: f64,
    /// Convergence: share of an episode's updates made in states whose
    /// greedy action changed in it, below which the episode counts as settled.
    #[arg(long, default_value_t = RIFLING_CONVERGE_GREEDY, value_name = "SHARE")]
    pub(crate) converge_greedy: f64,
    /// Workload task mix (see `simulate --task-mix`).
    #[arg(long, value_enum, default_value_t = crate::workload::genie::TaskMix::Paper)]
    pub(crate) task_mix: crate::workload::genie::TaskMix,
    /// A fixed number of tasks per episode arriving uniformly over --hours
    /// (a burst) instead of a Poisson count at --jobs-per-hour.
    #[arg(long, value_name = "N")]
    pub(crate) tasks: Option<u64>,
    /// Seed of the first episode; episode i uses seed + i (keep it away from
    /// the evaluation seeds).
    #[arg(long, default_value_t = 1000)]
    pub(crate) seed: u64,
    /// Task density, tasks per hour.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) jobs_per_hour: f64,
    /// Arrival window per episode, hours.
    #[arg(long, default_value_t = 24.0)]
    pub(crate) hours: f64,
    /// Put placements on the fullest nodes with room.
    #[arg(long)]
    pub(crate) genie_best_fit: bool,
    #[command(flatten)]
    pub(crate) rifling: RiflingArgs,
    /// Output file (JSON: manifest, centroids, Q-table).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
}

pub(crate) fn rifling_train(a: &RiflingTrainArgs) -> Result<ExitCode> {
    let mut opts = RiflingTrainOptions {
        cluster: a.cluster,
        episodes: a.episodes,
        converge_window: a.converge_window,
        converge_dq: a.converge_dq,
        converge_greedy: a.converge_greedy,
        task_mix: a.task_mix,
        tasks: a.tasks,
        seed: a.seed,
        jobs_per_hour: a.jobs_per_hour,
        hours: a.hours,
        params: RiflingParams::default(),
        table: a.rifling.rifling_table.clone(),
    };
    // The ranges first, then the output's directory (fail before training,
    // not after), then the parameters.
    opts.validate().map_err(train_error)?;
    if let Some(parent) = a.out.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        bail!("--out {}: the directory {} does not exist", a.out.display(), parent.display());
    }
    opts.params = a.rifling.params(a.genie_best_fit)?;
    // Episode lines as training goes; a full stdout must not cost the table.
    let mut progress = DeferredOut::default();
    let report = train_rifling(&opts, &mut |r| {
        progress.line(format_args!(
            "episode {:>3} seed {}: {} decisions, epsilon {:.3}, reward {:.4}, norm. throughput {:.4}, makespan {:.0} s, JCT {:.0} s, mean |dQ| {:.4}, greedy changed {:.4}, all tried {:.3}",
            r.episode,
            r.seed,
            r.decisions,
            r.epsilon,
            r.reward_mean,
            r.normalized_throughput_mean,
            r.makespan_s,
            r.jct_mean_s,
            r.settle.mean_dq,
            r.settle.greedy_changed,
            r.all_tried_share,
        ));
    })
    .map_err(train_error)?;
    let text = report.table_json(&opts)?;
    crate::metrics::export::write_atomic(&a.out, text.as_bytes())
        .with_context(|| format!("writing {}", a.out.display()))?;
    let curve_path = a.out.with_extension("curve.csv");
    crate::metrics::export::write_atomic(&curve_path, report.curve_csv().as_bytes())
        .with_context(|| format!("writing {}", curve_path.display()))?;
    progress.finish()?;
    outln!(
        "wrote {} ({} states, {} groups; {} episodes, convergence criterion {}) and {}",
        a.out.display(),
        report.agent.q.len(),
        report.agent.centroids.len(),
        report.episodes_run(),
        match report.converged_at {
            Some(e) => format!("held at episode {e}"),
            None => "not met".to_string(),
        },
        curve_path.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
