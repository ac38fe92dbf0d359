//! `dlsched ldwp-train`: an LDWP deep Q-network trained over episodes of a
//! streaming synthetic workload on a cluster preset (node dispatch).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use crate::cli::stdio::DeferredOut;
use crate::cluster::ClusterPreset;
use crate::experiment::{ClusterChoice, RunSpec, WorkloadSource};
use crate::policy::ldwp::{Dqn, LdwpOptions, LdwpParams, load_model};
use crate::policy::registry::PolicySpec;
use crate::workload::synthetic::SyntheticSpec;
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

// `..SyntheticSpec::default()` names only the fields set here, so that the
// workload's later options (e.g. a largest-job cap) take their defaults.
#[allow(clippy::needless_update)]
pub(crate) fn ldwp_train(a: &LdwpTrainArgs) -> Result<ExitCode> {
    if a.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    if a.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    if let Some(x) = a.jobs_per_hour
        && !(x.is_finite() && x > 0.0)
    {
        bail!("--jobs-per-hour must be a positive number, got {x}");
    }
    if a.seed.checked_add(a.episodes - 1).is_none() {
        bail!("--seed {} + {} episodes overflows the 64-bit seed range", a.seed, a.episodes);
    }
    if let Some(parent) = a.out.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        bail!("--out {}: the directory {} does not exist", a.out.display(), parent.display());
    }
    let params = parse_params(&a.params)?;
    let cspec = a.cluster.spec();
    let nodes = cspec.nodes.len();
    let (agent, first_episode, start) = match (&a.from, &a.transfer_from) {
        (Some(p), _) => {
            let (mut m, c) = load_model(p)?;
            if c.as_deref().is_some_and(|c| c != cspec.name) || m.nodes != nodes {
                bail!(
                    "{}: trained on `{}` ({} nodes), not `{}` ({nodes} nodes); use --transfer-from",
                    p.display(),
                    c.as_deref().unwrap_or("?"),
                    m.nodes,
                    cspec.name
                );
            }
            if m.params.hidden != params.hidden {
                bail!("{}: hidden layers {:?}, --param hidden {:?}", p.display(), m.params.hidden, params.hidden);
            }
            m.params = params.clone();
            let next = m.episode + 1;
            (m, next, serde_json::json!({ "continued_from": p.display().to_string() }))
        }
        (None, Some(p)) => {
            let (m, c) = load_model(p)?;
            if m.params.hidden != params.hidden {
                bail!("{}: hidden layers {:?}, --param hidden {:?}", p.display(), m.params.hidden, params.hidden);
            }
            let mut t = m.transfer(nodes, a.seed);
            t.params = params.clone();
            let carried = format!("layers 2..{} (hidden to hidden) of {}", m.q.layers.len() - 1, p.display());
            (
                t,
                0,
                serde_json::json!({
                    "transferred_from": p.display().to_string(),
                    "source_cluster": c,
                    "source_nodes": m.nodes,
                    "carried_over": carried,
                    "reinitialised": "input layer and output layer",
                }),
            )
        }
        (None, None) => {
            let db = crate::profile::db::ProfileDb::builtin();
            let models: Vec<String> = db.models().map(str::to_string).collect();
            (Dqn::new(params.clone(), nodes, models, a.seed), 0, serde_json::json!({ "initialised": "fresh" }))
        }
    };
    let agent = Arc::new(Mutex::new(agent));
    let mut curve = String::from(
        "episode,seed,decisions,epsilon,reward_mean,loss_mean,diverged_steps,throughput_jobs_per_hour,gpu_utilization,jct_mean_s\n",
    );
    let mut progress = DeferredOut::default();
    let opts = LdwpOptions { params: params.clone(), ..LdwpOptions::default() };
    for e in 0..a.episodes {
        let seed = a.seed + e;
        {
            let mut g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?;
            g.episode = first_episode + e;
            g.reseed(seed);
        }
        let spec = RunSpec {
            policy: PolicySpec::Ldwp(opts.clone()),
            seed,
            rate_model: crate::experiment::RateModelKind::Table,
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Synthetic(SyntheticSpec {
                    jobs: a.jobs,
                    jobs_per_hour: a.jobs_per_hour,
                    load: a.load,
                    ..SyntheticSpec::default()
                }),
                ClusterChoice::Preset { preset: a.cluster },
            )
        };
        let shared = agent.clone();
        let r = crate::experiment::run_one_with_policy(
            &spec,
            |ctx| opts.build_with_agent("ldwp", ctx, Some(shared)),
            |_| {},
        )
        .with_context(|| format!("episode {e}"))?;
        let s = &r.summary;
        let m = |k: &str| s.policy_metrics.get(k).copied().unwrap_or(0.0);
        let g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?;
        progress.line(format_args!(
            "episode {e:>3} seed {seed}: {} decisions, epsilon {:.3}, reward {:.5}, loss {:.3e}, {:.2} jobs/h, GPU util {:.3}, JCT {:.0} s",
            g.decisions,
            g.epsilon(),
            m("ldwp_reward_mean"),
            m("ldwp_loss_mean"),
            m("throughput_jobs_per_hour"),
            s.gpu_utilization,
            s.jct_mean_s
        ));
        curve.push_str(&format!(
            "{e},{seed},{},{:.4},{:.6},{:.6e},{},{:.4},{:.6},{:.3}\n",
            g.decisions,
            g.epsilon(),
            m("ldwp_reward_mean"),
            m("ldwp_loss_mean"),
            g.diverged,
            m("throughput_jobs_per_hour"),
            s.gpu_utilization,
            s.jct_mean_s
        ));
    }
    let mut g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?.clone();
    // f32 text: half the file, loaded back exactly (nn module docs).
    g.q.round_to_f32();
    let command: Vec<String> = std::env::args().skip(1).collect();
    let doc = serde_json::json!({
        "manifest": {
            "what": "LDWP deep Q-network trained by dlsched ldwp-train",
            "command": format!("dlsched {}", command.join(" ")),
            "dlsched_version": env!("CARGO_PKG_VERSION"),
            "cluster": cspec.name,
            "cluster_nodes": nodes,
            "cluster_gpus": cspec.nodes.iter().map(|n| n.gpus).sum::<u32>(),
            "workload": {
                "kind": "synthetic",
                "jobs": a.jobs,
                "jobs_per_hour": a.jobs_per_hour,
                "load": a.load,
                "rate_model": "table",
                "profiles": "builtin",
            },
            "episodes": a.episodes,
            "seeds": format!("{}..={}", a.seed, a.seed + a.episodes - 1),
            "start": start,
            "weights": "f32 text",
            "parameters": g.params,
            "network": g.q.sizes(),
            "weights_count": g.q.n_params(),
        },
        "agent": &g,
    });
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    crate::metrics::export::write_atomic(&a.out, text.as_bytes())
        .with_context(|| format!("writing {}", a.out.display()))?;
    let curve_path = a.out.with_extension("curve.csv");
    crate::metrics::export::write_atomic(&curve_path, curve.as_bytes())
        .with_context(|| format!("writing {}", curve_path.display()))?;
    progress.finish()?;
    outln!(
        "wrote {} ({} weights, {} decisions) and {}",
        a.out.display(),
        g.q.n_params(),
        g.decisions,
        curve_path.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
