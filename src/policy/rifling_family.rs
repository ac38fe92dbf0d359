//! The RIFLING family's part of a run: its options ([`RiflingOptions`],
//! one struct for `rifling`, `rifling-frozen` and `random-placement`), how
//! a policy of the family is built, and its trained Q-table as an
//! [`Artefact`] read once per sweep. A caller that keeps an agent across
//! runs (training episodes) hands it to the run as an
//! `Arc<Mutex<Agent>>` in the run's
//! [`Extensions`](super::build::Extensions).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::Policy;
use super::build::{Artefact, Artefacts, BuildContext, BuildPolicy, FamilyKey};
use super::rifling::{Agent, RiflingMode, RiflingParams, RiflingPolicy};
use crate::error::{ConfigError, RunError, TraceError};
use crate::ids::VcId;

/// Options of the RIFLING family (`rifling` learns online, `rifling-frozen`
/// runs a trained table greedily, `random-placement` places at random); the
/// defaults (derived): [`RiflingParams::default`], no table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RiflingOptions {
    /// The agent's parameters (`specs/policies.md` §3.2;
    /// [`RiflingParams::default`] = the spec's proposal). A loaded table
    /// runs with these too (online or frozen), so the manifest records the
    /// parameters used; its `k` and `queue_feature` (the state encoding)
    /// must equal the table's.
    pub params: RiflingParams,
    /// A Q-table saved by `dlsched rifling-train`: the frozen policy's table
    /// (required there), or an online agent's starting point. Default none.
    pub table: Option<PathBuf>,
}

/// The RIFLING family's sweep-file keys and flags (`rifling_alpha`,
/// `--rifling-alpha`, ...) and the options they set; the table first.
pub const RIFLING_KEYS: &[FamilyKey] = &[
    FamilyKey::path("rifling_table", "table"),
    FamilyKey::new("rifling_k", "params.k"),
    FamilyKey::new("rifling_alpha", "params.alpha"),
    FamilyKey::new("rifling_gamma", "params.gamma"),
    FamilyKey::new("rifling_epsilon", "params.epsilon_start"),
    FamilyKey::new("rifling_epsilon_end", "params.epsilon_end"),
    FamilyKey::new("rifling_epsilon_decay", "params.epsilon_decay"),
    FamilyKey::new("rifling_regroup", "params.regroup_every"),
    FamilyKey::new("rifling_window", "params.window"),
    FamilyKey::new("rifling_reward", "params.reward"),
    FamilyKey::new("genie_best_fit", "params.best_fit_nodes"),
    FamilyKey::new("rifling_epsilon_per", "params.epsilon_per"),
    FamilyKey::new("rifling_tie_break", "params.tie_break"),
    FamilyKey::new("rifling_q_init", "params.q_init"),
    FamilyKey::new("rifling_tau", "params.tau_s"),
    FamilyKey::new("rifling_queue_feature", "params.queue_feature"),
    FamilyKey::new("rifling_wait", "params.wait"),
    FamilyKey::new("rifling_frozen_greedy", "params.frozen_greedy"),
    FamilyKey::new("rifling_alpha_schedule", "params.alpha_schedule"),
];

/// The RIFLING mode of a registry kind.
fn rifling_mode(kind: &str) -> RiflingMode {
    match kind {
        "rifling-frozen" => RiflingMode::Frozen,
        "random-placement" => RiflingMode::Random,
        _ => RiflingMode::Online,
    }
}

impl BuildPolicy for RiflingOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        self.params.validate()
    }

    /// The learning `rifling` needs k-means (the `kmeans` feature);
    /// `rifling-frozen` and `random-placement` do not.
    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let mode = rifling_mode(kind);
        if mode == RiflingMode::Online && !cfg!(feature = "kmeans") {
            return Err(crate::error::FeatureDisabled::new(format!("policy `{kind}`"), "kmeans").into());
        }
        if !ctx.tasks {
            return Err(ConfigError::new(
                crate::error::ConfigErrorKind::Conflict,
                "GENIE-family and RIFLING policies schedule moldable tasks: use `--workload genie`",
            )
            .into());
        }
        if mode != RiflingMode::Random {
            super::rifling::check_ccr(&ctx.db()).map_err(ConfigError::other)?;
        }
        let cluster = ctx.cluster;
        let p = cluster.partition(VcId(0));
        let actions = (p.nodes.len() as u32 * p.max_node_gpus) as usize + 1;
        let agent = match (ctx.extensions.take::<Arc<Mutex<Agent>>>(), &self.table) {
            (Some(a), _) => a,
            (None, Some(path)) => {
                let table = ctx.artefacts.get_or_read::<RiflingTable>(path)?;
                let (mut a, trained_on) = (table.agent.clone(), table.trained_on.clone());
                if let Some(c) = trained_on.filter(|c| *c != cluster.spec().name) {
                    return Err(ConfigError::other(format!(
                        "{}: the table was trained on cluster `{c}`, this run is on `{}`",
                        path.display(),
                        cluster.spec().name
                    ))
                    .into());
                }
                // The agent (online, learning on, or frozen, greedy) runs
                // with this run's parameters, so the run's manifest records
                // the ones used; the state encoding comes from the table
                // (its groups and its queue feature) and must agree.
                if self.params.k != a.params.k {
                    return Err(ConfigError::other(format!(
                        "{}: the table's groups come from k = {}; this run asks k = {} (--rifling-k)",
                        path.display(),
                        a.params.k,
                        self.params.k
                    ))
                    .into());
                }
                if self.params.queue_feature != a.params.queue_feature {
                    return Err(ConfigError::other(format!(
                        "{}: the table's states {} the queue feature; this run's parameters {} it \
                         (params.queue_feature)",
                        path.display(),
                        if a.params.queue_feature { "carry" } else { "do not carry" },
                        if self.params.queue_feature { "ask for" } else { "leave out" },
                    ))
                    .into());
                }
                a.params = self.params;
                if a.actions != actions {
                    return Err(ConfigError::other(format!(
                        "{}: the table has {} actions, cluster `{}` needs {actions}",
                        path.display(),
                        a.actions,
                        cluster.spec().name
                    ))
                    .into());
                }
                a.reseed(ctx.seed);
                Arc::new(Mutex::new(a))
            }
            (None, None) if mode == RiflingMode::Frozen => {
                return Err(ConfigError::other("rifling-frozen needs a trained table (--rifling-table FILE)").into());
            }
            (None, None) => Arc::new(Mutex::new(Agent::new(self.params, actions, ctx.seed))),
        };
        Ok(Box::new(RiflingPolicy::new(mode, agent, ctx.db())))
    }

    /// In an experiment file, `rifling_table` is the frozen policy's only:
    /// online runs of the same sweep start from an empty Q-table, as the
    /// experiments compare.
    fn family_keys(&self, kind: &str, from_file: bool) -> &'static [FamilyKey] {
        if from_file && rifling_mode(kind) != RiflingMode::Frozen { &RIFLING_KEYS[1..] } else { RIFLING_KEYS }
    }

    fn load_artefacts(&self, artefacts: &mut Artefacts) -> Result<(), (&'static str, TraceError)> {
        match &self.table {
            Some(t) => artefacts.load::<RiflingTable>(t).map(|_| ()).map_err(|e| ("table", e)),
            None => Ok(()),
        }
    }

    fn moldable(&self) -> bool {
        true
    }

    fn time_decisions(&self) -> bool {
        true
    }
}

/// A Q-table saved by `dlsched rifling-train`, checked
/// ([`load_rifling_table`]), read once for a sweep.
#[derive(Clone, Debug)]
pub struct RiflingTable {
    /// The trained agent.
    pub agent: Agent,
    /// The cluster the file's manifest names (the one it was trained on).
    pub trained_on: Option<String>,
}

impl Artefact for RiflingTable {
    fn load(path: &Path) -> Result<Self, TraceError> {
        load_rifling_table(path).map(|(agent, trained_on)| RiflingTable { agent, trained_on })
    }
}

/// Reads an agent saved by `dlsched rifling-train`.
///
/// # Errors
/// A [`TraceError`] naming the file when it cannot be read or parsed.
pub fn load_rifling_agent(path: &Path) -> Result<Agent, TraceError> {
    load_rifling_table(path).map(|(a, _)| a)
}

/// [`load_rifling_agent`] with the cluster named in the file's manifest, after
/// checking the table: parameters in range, centroids finite and ascending
/// (at most `k` of them), every Q row `actions` long and finite.
///
/// # Errors
/// A [`TraceError`] naming the file and what is wrong.
pub fn load_rifling_table(path: &Path) -> Result<(Agent, Option<String>), TraceError> {
    let (a, trained_on) = super::build::read_saved_agent::<Agent>(path, "a RIFLING table")?;
    let bad = |message: String| TraceError::Format { file: path.to_path_buf(), message };
    a.params.validate().map_err(|e| bad(format!("parameters: {e}")))?;
    if a.centroids.len() > a.params.k
        || a.centroids.iter().any(|c| !c.is_finite())
        || !a.centroids.is_sorted_by(|x, y| x <= y)
    {
        return Err(bad(format!(
            "centroids must be at most k = {} finite values in ascending order, got {:?}",
            a.params.k, a.centroids
        )));
    }
    if let Some((state, row)) = a.q.iter().find(|(_, r)| r.len() != a.actions || r.iter().any(|v| !v.is_finite())) {
        return Err(bad(format!(
            "Q row `{state}` must hold {} finite values, one per action (it has {})",
            a.actions,
            row.len()
        )));
    }
    Ok((a, trained_on))
}
