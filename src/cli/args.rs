//! Options several subcommands share (the cluster, RIFLING's parameters), as raw-spec keys.

use std::path::{Path, PathBuf};

use crate::cluster::ClusterPreset;
use crate::experiment::ClusterChoice;
use crate::experiment::raw::{self, Origin, RawSpec, Value};
use crate::policy::rifling::RiflingParams;
use anyhow::Result;
use clap::{Args, ValueEnum};

/// The cluster options `simulate` and `genie-profile` share: a preset, a
/// node list, a uniform cluster or VC partitions.
#[derive(Args)]
pub(crate) struct ClusterArgs {
    /// Cluster preset: lab16 = 4 nodes × 4 K80 (16 GPUs, the GENIE/RIFLING
    /// cluster); philly = 321 × 2 + 231 × 8 GPUs (2,490); alibaba-openb = the
    /// 1,213 GPU nodes (6,212 GPUs, 7 types) of the Alibaba PAI 2023 trace;
    /// ldwp-testbed = the LDWP paper's heterogeneous testbed, 12 nodes, 40
    /// GPUs: 2 × 2 K80 (24 GB), 4 × 4 P4 (8 GB, P100 rates), 4 × 4 K80
    /// (24 GB), 2 × 2 P4 (8 GB, P100 rates); helios-venus = SenseTime
    /// Helios Venus in its 15 VC partitions (135 × 8 = 1,080 GPUs; jobs of
    /// other VCs are skipped as unknown_vc); helios-earth, helios-saturn,
    /// helios-uranus = 125, 260, 265 nodes × 8 GPUs in one partition (the
    /// published 997, 2,080, 2,119 GPUs rounded up to whole nodes); pollux
    /// = 16 nodes × 4 T4 (64 GPUs, the Pollux simulator's cluster).
    /// Default: lab16.
    #[arg(long, value_enum, conflicts_with_all = ["nodes", "vcs", "nodes_file"])]
    pub(crate) cluster: Option<ClusterPreset>,

    /// A heterogeneous cluster from a node list in the Alibaba PAI 2023
    /// format (`sn,cpu_milli,memory_mib,gpu,model`): one node per row with
    /// GPUs, of that GPU type (memory per type: P100, T4, V100M16 16 GiB;
    /// A10 24 GiB; V100M32 32 GiB; undisclosed G2, G3 assumed 32 GiB).
    /// CPU-only rows are skipped and counted.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["nodes", "vcs"])]
    pub(crate) nodes_file: Option<PathBuf>,

    /// A uniform cluster of N nodes (with --gpus-per-node) instead of a preset.
    #[arg(long, value_name = "N", requires = "gpus_per_node", conflicts_with = "vcs")]
    pub(crate) nodes: Option<u32>,

    /// GPUs per node of the uniform cluster (with --nodes).
    #[arg(long, value_name = "G", requires = "nodes")]
    pub(crate) gpus_per_node: Option<u32>,

    /// GPU type of the uniform cluster (k80, p100, v100, v100-32g, t4, a100,
    /// a100-80g, rtx2080ti, quadro6000); without it, a generic GPU of 16 GiB
    /// with no profile data (the profile model then borrows another type's
    /// speeds).
    #[arg(long, value_name = "TYPE", requires = "nodes")]
    pub(crate) gpu_type: Option<String>,

    /// Virtual-cluster partitions: a CSV `vc,nodes[,gpus_per_node]` (default 8
    /// GPUs per node). The cluster is built from it; each job runs only on its
    /// VC's nodes, and jobs of other VCs are skipped (counted as unknown_vc).
    #[arg(long, value_name = "PATH")]
    pub(crate) vcs: Option<PathBuf>,

    /// Scales every VC of --vcs to this share of its nodes, in (0, 1]:
    /// nodes × F rounded to the nearest node (halves up), at least 1
    /// (`--vc-scale 0.5` halves the VCs; each keeps its first nodes).
    #[arg(long, value_name = "F", requires = "vcs")]
    pub(crate) vc_scale: Option<f64>,
}

impl ClusterArgs {
    /// These options as raw-spec keys ([`raw::KEYS`]).
    pub(crate) fn fill(&self, r: &mut RawSpec) {
        put_path(r, "vcs", self.vcs.as_deref());
        if let Some(f) = self.vc_scale {
            r.insert("vc_scale".into(), Value::Float(f));
        }
        put_path(r, "nodes_file", self.nodes_file.as_deref());
        if let Some(n) = self.nodes {
            r.insert("nodes".into(), Value::UInt(n.into()));
        }
        if let Some(g) = self.gpus_per_node {
            r.insert("gpus_per_node".into(), Value::UInt(g.into()));
        }
        if let Some(t) = &self.gpu_type {
            r.insert("gpu_type".into(), Value::Str(t.clone()));
        }
        if let Some(c) = self.cluster {
            r.insert("cluster".into(), Value::Str(value_name(&c)));
        }
    }

    /// The cluster these options name (the one translation,
    /// [`raw::cluster_choice`]); a node list's CPU-only nodes are noted.
    pub(crate) fn choice(&self) -> Result<ClusterChoice> {
        let mut r = RawSpec::new();
        self.fill(&mut r);
        let choice = raw::cluster_choice(&r, Origin::CommandLine).map_err(anyhow::Error::msg)?;
        nodes_file_note(&choice)?;
        Ok(choice)
    }
}

/// Says on stderr how many nodes of a node list have no GPU.
pub(crate) fn nodes_file_note(choice: &ClusterChoice) -> Result<()> {
    if let ClusterChoice::NodesFile { path } = choice {
        let list = crate::cluster::load_nodes_file(path)?;
        if list.cpu_only_nodes > 0 {
            errln!("{}: {} of {} nodes have no GPU and are left out", path.display(), list.cpu_only_nodes, list.rows)?;
        }
    }
    Ok(())
}

/// The command-line name of a value-enum value.
pub(crate) fn value_name(v: &impl ValueEnum) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// Sets a path key of a raw spec, when given.
pub(crate) fn put_path(r: &mut RawSpec, key: &str, p: Option<&Path>) {
    if let Some(p) = p {
        r.insert(key.into(), Value::Str(p.to_string_lossy().into_owned()));
    }
}

#[derive(Args, Clone)]
pub(crate) struct RiflingArgs {
    /// RIFLING: a Q-table saved by `dlsched rifling-train` (required by
    /// rifling-frozen; rifling starts learning from it).
    #[arg(long, value_name = "FILE")]
    pub(crate) rifling_table: Option<PathBuf>,
    /// RIFLING: K-means groups of training tasks (inference is one more).
    #[arg(long, default_value_t = RiflingParams::default().k, value_name = "K")]
    pub(crate) rifling_k: usize,
    /// RIFLING: learning rate alpha.
    #[arg(long, default_value_t = RiflingParams::default().alpha, value_name = "ALPHA")]
    pub(crate) rifling_alpha: f64,
    /// RIFLING: discount gamma.
    #[arg(long, default_value_t = RiflingParams::default().gamma, value_name = "GAMMA")]
    pub(crate) rifling_gamma: f64,
    /// RIFLING: exploration rate at the first episode (or decision).
    #[arg(long, default_value_t = RiflingParams::default().epsilon_start, value_name = "EPS")]
    pub(crate) rifling_epsilon: f64,
    /// RIFLING: exploration rate after the decay.
    #[arg(long, default_value_t = RiflingParams::default().epsilon_end, value_name = "EPS")]
    pub(crate) rifling_epsilon_end: f64,
    /// RIFLING: episodes (or decisions, --rifling-epsilon-per) over which
    /// epsilon decays linearly.
    #[arg(long, default_value_t = RiflingParams::default().epsilon_decay, value_name = "N")]
    pub(crate) rifling_epsilon_decay: u64,
    /// RIFLING: what the epsilon decay counts: episode (training episodes of
    /// rifling-train; a single run is one episode) or decision (cumulative
    /// decisions, the first proposal's rule; see experiments/rifling.md).
    #[arg(long, value_enum, default_value_t = RiflingParams::default().epsilon_per, value_name = "UNIT")]
    pub(crate) rifling_epsilon_per: crate::policy::rifling::EpsilonPer,
    /// RIFLING: greedy tie-break: random (seeded) or lowest-index (fewest
    /// GPUs, the first proposal's rule).
    #[arg(long, value_enum, default_value_t = RiflingParams::default().tie_break, value_name = "RULE")]
    pub(crate) rifling_tie_break: crate::policy::rifling::TieBreak,
    /// RIFLING: initial Q value of every state-action pair (optimistic above
    /// any return; 0 in the first proposal).
    #[arg(long, default_value_t = RiflingParams::default().q_init, value_name = "Q", allow_negative_numbers = true)]
    pub(crate) rifling_q_init: f64,
    /// RIFLING: time constant of the discount gamma^(dt/tau) and of the
    /// integrated reward, s; 0 = discount per scheduling point.
    #[arg(long, default_value_t = RiflingParams::default().tau_s, value_name = "SECONDS")]
    pub(crate) rifling_tau: f64,
    /// RIFLING: add the queue length behind the head (0, 1, 2-3, 4+) to the
    /// state (true or false).
    #[arg(long, default_value_t = RiflingParams::default().queue_feature, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub(crate) rifling_queue_feature: bool,
    /// RIFLING: when WAIT is available: when-running (some task runs; the
    /// paper's WAIT action, the default) or never (the earlier default).
    #[arg(long, value_enum, default_value_t = RiflingParams::default().wait, value_name = "RULE")]
    pub(crate) rifling_wait: crate::policy::rifling::WaitRule,
    /// RIFLING: what a frozen table's greedy choice ranges over: tried (the
    /// actions tried in the state, the default) or all (every feasible
    /// action, untried ones at the initial value; the earlier default).
    #[arg(long, value_enum, default_value_t = RiflingParams::default().frozen_greedy, value_name = "RULE")]
    pub(crate) rifling_frozen_greedy: crate::policy::rifling::FrozenGreedy,
    /// RIFLING: learning-rate schedule: visits (1/n at the n-th update of a
    /// state-action pair, the default) or constant (alpha; the earlier
    /// default).
    #[arg(long, value_enum, default_value_t = RiflingParams::default().alpha_schedule, value_name = "RULE")]
    pub(crate) rifling_alpha_schedule: crate::policy::rifling::AlphaSchedule,
    /// RIFLING: re-run the K-means every N arrivals.
    #[arg(long, default_value_t = RiflingParams::default().regroup_every, value_name = "N")]
    pub(crate) rifling_regroup: u64,
    /// RIFLING: K-means over the last N training tasks.
    #[arg(long, default_value_t = RiflingParams::default().window, value_name = "N")]
    pub(crate) rifling_window: usize,
    /// RIFLING: reward: scaling-efficiency (placed task's normalised rate per
    /// GPU, WAIT 0; the default), throughput-integral (cluster-normalised
    /// throughput integrated over the transition, / tau; the earlier
    /// default) or throughput (its time-average between decisions; the
    /// first proposal's default). History: experiments/rifling.md.
    #[arg(long, value_enum, default_value_t = RiflingParams::default().reward)]
    pub(crate) rifling_reward: crate::policy::rifling::RewardKind,
}

impl RiflingArgs {
    pub(crate) fn params(&self, best_fit_nodes: bool) -> Result<RiflingParams> {
        let p = RiflingParams {
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
            epsilon_per: self.rifling_epsilon_per,
            tie_break: self.rifling_tie_break,
            q_init: self.rifling_q_init,
            tau_s: self.rifling_tau,
            queue_feature: self.rifling_queue_feature,
            wait: self.rifling_wait,
            frozen_greedy: self.rifling_frozen_greedy,
            alpha_schedule: self.rifling_alpha_schedule,
        };
        p.validate().map_err(anyhow::Error::msg)?;
        Ok(p)
    }

    /// These options as raw-spec keys ([`raw::KEYS`]).
    pub(crate) fn fill(&self, r: &mut RawSpec) {
        put_path(r, "rifling_table", self.rifling_table.as_deref());
        let mut put = |k: &str, v: Value| r.insert(k.into(), v);
        put("rifling_k", Value::UInt(self.rifling_k as u64));
        put("rifling_alpha", Value::Float(self.rifling_alpha));
        put("rifling_gamma", Value::Float(self.rifling_gamma));
        put("rifling_epsilon", Value::Float(self.rifling_epsilon));
        put("rifling_epsilon_end", Value::Float(self.rifling_epsilon_end));
        put("rifling_epsilon_decay", Value::UInt(self.rifling_epsilon_decay));
        put("rifling_regroup", Value::UInt(self.rifling_regroup));
        put("rifling_window", Value::UInt(self.rifling_window as u64));
        put("rifling_reward", Value::Str(value_name(&self.rifling_reward)));
        put("rifling_epsilon_per", Value::Str(value_name(&self.rifling_epsilon_per)));
        put("rifling_tie_break", Value::Str(value_name(&self.rifling_tie_break)));
        put("rifling_q_init", Value::Float(self.rifling_q_init));
        put("rifling_tau", Value::Float(self.rifling_tau));
        put("rifling_queue_feature", Value::Bool(self.rifling_queue_feature));
        put("rifling_wait", Value::Str(value_name(&self.rifling_wait)));
        put("rifling_frozen_greedy", Value::Str(value_name(&self.rifling_frozen_greedy)));
        put("rifling_alpha_schedule", Value::Str(value_name(&self.rifling_alpha_schedule)));
    }
}
