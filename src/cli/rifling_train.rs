//! `dlsched rifling-train`: a RIFLING agent trained over episodes of the GENIE workload.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::args::RiflingArgs;
use crate::cli::stdio::DeferredOut;
use crate::cluster::ClusterPreset;
use crate::experiment::{ClusterChoice, RunSpec, WorkloadSource};
use crate::policy::registry::{PolicySpec, RiflingOptions};
use crate::workload::genie::GenieWorkloadSpec;
use crate::workload::synthetic::SyntheticSpec;
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
    #[arg(long, default_value_t = DQ_DEFAULT, value_name = "DQ")]
    pub(crate) converge_dq: f64,
    /// Convergence: share of an episode's updates made in states whose
    /// greedy action changed in it, below which the episode counts as settled.
    #[arg(long, default_value_t = GREEDY_DEFAULT, value_name = "SHARE")]
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

/// Default of --converge-dq.
pub(crate) const DQ_DEFAULT: f64 = 0.05;
/// Default of --converge-greedy.
pub(crate) const GREEDY_DEFAULT: f64 = 0.05;

/// One episode's convergence figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Settle {
    /// Mean |ΔQ| over the episode's updates (0 without updates).
    pub(crate) mean_dq: f64,
    /// Largest |ΔQ| of one update in the episode (reported, not a criterion:
    /// a pair updated for the first or second time always moves a lot).
    pub(crate) max_dq: f64,
    /// Share of the episode's updates made in states whose greedy action
    /// over tried actions differs after the episode from before it.
    pub(crate) greedy_changed: f64,
}

/// The convergence criterion of `rifling-train`: the last `window` episodes
/// (all of them at the epsilon floor) each had `mean_dq < dq` and
/// `greedy_changed < greedy`. `history` holds (at the epsilon floor, figures)
/// per episode so far. A window of 0 never holds.
pub(crate) fn converged(history: &[(bool, Settle)], window: u64, dq: f64, greedy: f64) -> bool {
    let w = window as usize;
    w > 0
        && history.len() >= w
        && history[history.len() - w..].iter().all(|(floor, s)| *floor && s.mean_dq < dq && s.greedy_changed < greedy)
}

/// Per state of `agent`: its greedy action over tried actions and its
/// updates so far.
pub(crate) type Snapshot = std::collections::BTreeMap<String, (Option<usize>, u64)>;

/// [`Snapshot`] of `agent` now.
pub(crate) fn greedy_snapshot(agent: &crate::policy::rifling::Agent) -> Snapshot {
    agent
        .q
        .keys()
        .map(|s| (s.clone(), (agent.greedy_tried(s), agent.visits.get(s).map_or(0, |v| v.iter().sum()))))
        .collect()
}

/// The share of the updates between `before` and `after` made in states
/// whose greedy action differs between the two (a state new in `after`
/// counts as changed); 0 without updates.
pub(crate) fn greedy_changed_share(before: &Snapshot, after: &Snapshot) -> f64 {
    let (mut all, mut changed) = (0u64, 0u64);
    for (s, &(g, n)) in after {
        let (g0, n0) = before.get(s).copied().unwrap_or((None, 0));
        let k = n.saturating_sub(n0);
        all += k;
        if g != g0 {
            changed += k;
        }
    }
    if all == 0 { 0.0 } else { changed as f64 / all as f64 }
}

pub(crate) fn rifling_train(a: &RiflingTrainArgs) -> Result<ExitCode> {
    use crate::policy::rifling::Agent;
    use std::sync::{Arc, Mutex};
    if a.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    if !(a.converge_dq.is_finite() && a.converge_dq > 0.0) {
        bail!("--converge-dq must be a positive number, got {}", a.converge_dq);
    }
    if !(a.converge_greedy.is_finite() && a.converge_greedy > 0.0 && a.converge_greedy <= 1.0) {
        bail!("--converge-greedy must be in (0, 1], got {}", a.converge_greedy);
    }
    if a.tasks == Some(0) {
        bail!("--tasks must be at least 1");
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
            let t = crate::experiment::load_rifling_agent(p)?;
            let next = t.episode + 1;
            (t, next)
        }
        None => (Agent::new(params, actions, a.seed), 0),
    };
    let agent = Arc::new(Mutex::new(agent));
    let mut curve = String::from(
        "episode,seed,decisions,epsilon,reward_mean,normalized_throughput_mean,makespan_s,jct_mean_s,\
         mean_dq,max_dq,greedy_changed_share,states,states_visited,all_tried_share,greedy_repeat,random_repeat,\
         greedy_all_tied_share,q_spread_mean,converged\n",
    );
    let mut history: Vec<(bool, Settle)> = Vec::new();
    let mut stopped_at: Option<u64> = None;
    let mut ran = 0;
    // Episode lines as training goes; a full stdout must not cost the table.
    let mut progress = DeferredOut::default();
    // One artefact set for every episode: the profile database is parsed once.
    let artefacts = crate::experiment::Artefacts::default();
    for e in 0..a.episodes {
        let seed = a.seed + e;
        let (before, updates0) = {
            let mut g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?;
            g.start_episode(first_episode + e, seed);
            (greedy_snapshot(&g), g.updates)
        };
        let spec = RunSpec {
            policy: PolicySpec::Rifling(RiflingOptions { params, table: None }),
            workload: WorkloadSource::Genie(GenieWorkloadSpec {
                ect: crate::workload::genie::EctBasis::True,
                jobs_per_hour: a.jobs_per_hour,
                hours: a.hours,
                tasks: a.tasks,
                mix: a.task_mix,
            }),
            seed,
            rate_model: crate::experiment::RateModelKind::Table,
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Synthetic(SyntheticSpec::default()),
                ClusterChoice::Preset { preset: a.cluster },
            )
        };
        let r = crate::experiment::run_one_with_agent(&spec, Some(agent.clone()), &artefacts, |_| {})
            .with_context(|| format!("episode {e}"))?;
        let s = &r.summary;
        let g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?;
        let reward = s.policy_metrics.get("rifling_reward_mean").copied().unwrap_or(0.0);
        let nt = s.normalized_throughput_mean.unwrap_or(0.0);
        let pm = |k: &str| s.policy_metrics.get(k).copied().unwrap_or(0.0);
        let n_up = g.updates - updates0;
        let settle = Settle {
            mean_dq: if n_up == 0 { 0.0 } else { g.sum_dq / n_up as f64 },
            max_dq: g.max_dq,
            greedy_changed: greedy_changed_share(&before, &greedy_snapshot(&g)),
        };
        let floor = g.epsilon() <= g.params.epsilon_end;
        history.push((floor, settle));
        let done = converged(&history, a.converge_window, a.converge_dq, a.converge_greedy);
        progress.line(format_args!(
            "episode {e:>3} seed {seed}: {} decisions, epsilon {:.3}, reward {reward:.4}, norm. throughput {nt:.4}, makespan {:.0} s, JCT {:.0} s, mean |dQ| {:.4}, greedy changed {:.4}, all tried {:.3}",
            g.decisions,
            g.epsilon(),
            s.makespan_s,
            s.jct_mean_s,
            settle.mean_dq,
            settle.greedy_changed,
            pm("rifling_all_tried_share"),
        ));
        curve.push_str(&format!(
            "{e},{seed},{},{:.4},{reward:.6},{nt:.6},{:.3},{:.3},{:.6},{:.6},{:.6},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{}\n",
            g.decisions,
            g.epsilon(),
            s.makespan_s,
            s.jct_mean_s,
            settle.mean_dq,
            settle.max_dq,
            settle.greedy_changed,
            g.q.len(),
            pm("rifling_states_visited"),
            pm("rifling_all_tried_share"),
            pm("rifling_greedy_repeat"),
            pm("rifling_random_repeat"),
            pm("rifling_greedy_all_tied_share"),
            pm("rifling_q_spread_mean"),
            u8::from(done),
        ));
        ran = e + 1;
        if done {
            stopped_at = Some(e);
            break;
        }
    }
    let g = agent.lock().map_err(|_| anyhow::anyhow!("agent lock"))?;
    let doc = serde_json::json!({
        "manifest": {
            "what": "RIFLING Q-table and K-means centroids trained by dlsched rifling-train",
            "dlsched_version": env!("CARGO_PKG_VERSION"),
            "cluster": cspec.name,
            "workload": {
                "kind": "genie", "jobs_per_hour": a.jobs_per_hour, "hours": a.hours, "tasks": a.tasks,
                "task_mix": a.task_mix, "rate_model": "table"
            },
            "episodes": ran,
            "episodes_cap": a.episodes,
            "seeds": format!("{}..={}", a.seed, a.seed + ran - 1),
            "convergence": {
                "criterion": format!(
                    "epsilon at its floor and, in each of the last {} episodes, mean |dQ| per update < {} \
                     and share of its updates made in states whose greedy action (over tried actions) changed < {}",
                    a.converge_window, a.converge_dq, a.converge_greedy
                ),
                "held": stopped_at.is_some(),
                "at_episode": stopped_at,
                "last_mean_dq": history.last().map(|h| h.1.mean_dq),
                "last_max_dq": history.last().map(|h| h.1.max_dq),
                "last_greedy_changed_share": history.last().map(|h| h.1.greedy_changed),
            },
            "parameters": g.params,
        },
        "agent": &*g,
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
        "wrote {} ({} states, {} groups; {ran} episodes, convergence criterion {}) and {}",
        a.out.display(),
        g.q.len(),
        g.centroids.len(),
        match stopped_at {
            Some(e) => format!("held at episode {e}"),
            None => "not met".to_string(),
        },
        curve_path.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(mean_dq: f64, greedy_changed: f64) -> Settle {
        Settle { mean_dq, max_dq: 2.0 * mean_dq, greedy_changed }
    }

    #[test]
    fn the_criterion_needs_the_whole_window_settled_at_the_epsilon_floor() {
        // Thresholds dq 0.05, greedy 0.05, window 3.
        let ok = st(0.01, 0.0);
        let mut h = vec![(true, st(0.2, 0.3)), (true, ok), (true, ok)];
        // Only 2 of the last 3 settled.
        assert!(!converged(&h, 3, 0.05, 0.05));
        h.push((true, ok));
        assert!(converged(&h, 3, 0.05, 0.05));
        // One episode at the threshold (not below) breaks it.
        h.push((true, st(0.05, 0.0)));
        assert!(!converged(&h, 3, 0.05, 0.05));
        h.push((true, st(0.01, 0.05)));
        assert!(!converged(&h, 3, 0.05, 0.05));
        // Settled but epsilon still decaying: no.
        let early = vec![(false, ok), (true, ok), (true, ok)];
        assert!(!converged(&early, 3, 0.05, 0.05));
        // Fewer episodes than the window, or a window of 0: never.
        assert!(!converged(&[(true, ok)], 3, 0.05, 0.05));
        assert!(!converged(&[(true, ok); 5], 0, 0.05, 0.05));
    }

    #[test]
    fn greedy_change_is_weighted_by_the_updates_of_the_episode() {
        let before: Snapshot = [("a".to_string(), (Some(0), 10)), ("b".to_string(), (Some(1), 5))].into();
        // a: greedy 0 -> 0, 10 -> 16 updates (6, unchanged); b: 1 -> 2, 5 -> 7
        // (2, changed); c: new, 2 updates (changed). 4 of 10 updates: 0.4.
        let after: Snapshot =
            [("a".to_string(), (Some(0), 16)), ("b".to_string(), (Some(2), 7)), ("c".to_string(), (Some(1), 2))].into();
        assert!((greedy_changed_share(&before, &after) - 0.4).abs() < 1e-12);
        // No update: 0.
        assert_eq!(greedy_changed_share(&before, &before), 0.0);
    }
}
