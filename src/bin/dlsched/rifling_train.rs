//! `dlsched rifling-train`: a RIFLING agent trained over episodes of the GENIE workload.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::args::RiflingArgs;
use crate::stdio::DeferredOut;
use anyhow::{Context, Result, bail};
use clap::Args;
use dlsched::cluster::ClusterPreset;
use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource};
use dlsched::policy::registry::{PolicySpec, RiflingOptions};
use dlsched::workload::genie::GenieWorkloadSpec;
use dlsched::workload::synthetic::SyntheticSpec;

#[derive(Args)]
pub(crate) struct RiflingTrainArgs {
    /// Cluster preset to train on.
    #[arg(long, value_enum, default_value = "lab16")]
    pub(crate) cluster: ClusterPreset,
    /// Episodes (each a GENIE workload of its own seed).
    #[arg(long, default_value_t = 20)]
    pub(crate) episodes: u64,
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
    use dlsched::policy::rifling::Agent;
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
    // Episode indices drive the per-episode epsilon schedule; a table we
    // continue from goes on after its last episode.
    let (agent, first_episode) = match &a.rifling.rifling_table {
        Some(p) => {
            let t = dlsched::experiment::load_rifling_agent(p)?;
            let next = t.episode + 1;
            (t, next)
        }
        None => (Agent::new(params, actions, a.seed), 0),
    };
    let agent = Arc::new(Mutex::new(agent));
    let mut curve =
        String::from("episode,seed,decisions,epsilon,reward_mean,normalized_throughput_mean,makespan_s,jct_mean_s\n");
    // Episode lines as training goes; a full stdout must not cost the table.
    let mut progress = DeferredOut::default();
    // One artefact set for every episode: the profile database is parsed once.
    let artefacts = dlsched::experiment::Artefacts::default();
    for e in 0..a.episodes {
        let seed = a.seed + e;
        agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?.start_episode(first_episode + e, seed);
        let spec = RunSpec {
            policy: PolicySpec::Rifling(RiflingOptions { params, table: None }),
            workload: WorkloadSource::Genie(GenieWorkloadSpec {
                ect: dlsched::workload::genie::EctBasis::True,
                jobs_per_hour: a.jobs_per_hour,
                hours: a.hours,
                tasks: None,
            }),
            seed,
            rate_model: dlsched::experiment::RateModelKind::Table,
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Synthetic(SyntheticSpec::default()),
                ClusterChoice::Preset { preset: a.cluster },
            )
        };
        let r = dlsched::experiment::run_one_with_agent(&spec, Some(agent.clone()), &artefacts, |_| {})
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
