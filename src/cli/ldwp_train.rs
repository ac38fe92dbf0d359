//! `dlsched ldwp-train`: an LDWP deep Q-network trained over episodes of a
//! streaming synthetic workload on a cluster preset (node dispatch); the loop
//! is [`crate::experiment::train::train_ldwp`].

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::stdio::DeferredOut;
use crate::cluster::ClusterPreset;
use crate::experiment::train::{LdwpStart, LdwpTrainOptions, TrainError, train_ldwp};
use crate::policy::ldwp::LdwpParams;
use anyhow::{Context, Result, bail};
use clap::Args;

#[derive(Args)]
pub(crate) struct LdwpTrainArgs {
    /// Cluster preset to train on.
    #[arg(long, value_enum, default_value = "lab16")]
    pub(crate) cluster: ClusterPreset,
    /// Episodes (each a synthetic workload of its own seed).
    #[arg(long, default_value_t = 20)]
    pub(crate) episodes: u64,
    /// Seed of the first episode; episode i uses seed + i (keep it away from
    /// the evaluation seeds).
    #[arg(long, default_value_t = 1000)]
    pub(crate) seed: u64,
    /// Jobs per episode (synthetic Philly-like mix, table rate model).
    #[arg(long, default_value_t = 500)]
    pub(crate) jobs: u32,
    /// Arrival rate, jobs per hour (default: from --load).
    #[arg(long)]
    pub(crate) jobs_per_hour: Option<f64>,
    /// Offered load (GPU demand / capacity) when --jobs-per-hour is not given.
    #[arg(long, default_value_t = 0.8)]
    pub(crate) load: f64,
    /// A learner parameter, `NAME=VALUE` (repeatable): a field of the
    /// `params` option of `--policy ldwp` (`lr=0.01`, `epsilon_decay=5000`,
    /// `reward=completions-delta`, `hidden=[256,128]`...).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub(crate) params: Vec<String>,
    /// Continue training a saved model (same cluster) from its weights.
    #[arg(long, value_name = "FILE", conflicts_with = "transfer_from")]
    pub(crate) from: Option<PathBuf>,
    /// Transfer: start from a model trained on another cluster, reusing its
    /// hidden layer (256 → 128) and re-initialising the input and output
    /// layers for this cluster's node count.
    #[arg(long, value_name = "FILE")]
    pub(crate) transfer_from: Option<PathBuf>,
    /// Output file (JSON: manifest and network); the per-episode learning
    /// curve goes beside it as NAME.curve.csv for NAME.json.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
}

/// `params` with `NAME=VALUE` settings applied (VALUE as JSON, else a string).
fn parse_params(settings: &[String]) -> Result<LdwpParams> {
    let mut json = serde_json::to_value(LdwpParams::default())?;
    for s in settings {
        let Some((k, v)) = s.split_once('=') else { bail!("--param {s}: expected NAME=VALUE") };
        let v: serde_json::Value = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.into()));
        json.as_object_mut().expect("params are an object").insert(k.trim().to_string(), v);
    }
    let p: LdwpParams = serde_json::from_value(json).context("--param")?;
    p.validate().map_err(anyhow::Error::msg)?;
    Ok(p)
}

/// A library training error as the command reports it: an option out of
/// range names its flag (`--jobs-per-hour`), everything else keeps its message.
pub(crate) fn train_error(e: TrainError) -> anyhow::Error {
    match e {
        TrainError::Option { option, message } => anyhow::anyhow!("--{} {message}", option.replace('_', "-")),
        e => anyhow::Error::new(e),
    }
}

pub(crate) fn ldwp_train(a: &LdwpTrainArgs, argv: &[std::ffi::OsString]) -> Result<ExitCode> {
    let mut opts = LdwpTrainOptions {
        cluster: a.cluster,
        episodes: a.episodes,
        seed: a.seed,
        jobs: a.jobs,
        jobs_per_hour: a.jobs_per_hour,
        load: a.load,
        params: LdwpParams::default(),
        start: match (&a.from, &a.transfer_from) {
            (Some(p), _) => LdwpStart::Continue(p.clone()),
            (None, Some(p)) => LdwpStart::Transfer(p.clone()),
            (None, None) => LdwpStart::Fresh,
        },
    };
    // The ranges first, then the output's directory, then the parameters.
    opts.validate().map_err(train_error)?;
    if let Some(parent) = a.out.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        bail!("--out {}: the directory {} does not exist", a.out.display(), parent.display());
    }
    opts.params = parse_params(&a.params)?;
    let mut progress = DeferredOut::default();
    let report = train_ldwp(&opts, &mut |r, _| {
        progress.line(format_args!(
            "episode {:>3} seed {}: {} decisions, epsilon {:.3}, reward {:.5}, loss {:.3e}, {:.2} jobs/h, GPU util {:.3}, JCT {:.0} s",
            r.episode,
            r.seed,
            r.decisions,
            r.epsilon,
            r.reward_mean,
            r.loss_mean,
            r.throughput_jobs_per_hour,
            r.gpu_utilization,
            r.jct_mean_s
        ));
    })
    .map_err(train_error)?;
    let command: Vec<String> = argv.iter().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
    let text = report.model_json(&opts, &format!("dlsched {}", command.join(" ")))?;
    crate::metrics::export::write_atomic(&a.out, text.as_bytes())
        .with_context(|| format!("writing {}", a.out.display()))?;
    let curve_path = a.out.with_extension("curve.csv");
    crate::metrics::export::write_atomic(&curve_path, report.curve_csv().as_bytes())
        .with_context(|| format!("writing {}", curve_path.display()))?;
    progress.finish()?;
    outln!(
        "wrote {} ({} weights, {} decisions) and {}",
        a.out.display(),
        report.model.q.n_params(),
        report.model.decisions,
        curve_path.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
