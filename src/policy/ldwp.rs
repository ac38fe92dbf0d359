//! LDWP: learning-driven workload parallelisation, a deep Q-network that picks
//! the node for each arriving job (Zhang, Geng, Ma, "Learning-Driven
//! Interference-Aware Workload Parallelization for Streaming Applications in
//! Heterogeneous Cluster", IEEE TPDS 2021; restated in `specs/policies.md` §5.2).
//!
//! The DQN acts through the node-dispatch platform
//! ([`super::nodesel::NodeDispatch`]): on each arrival it returns one feasible
//! node, and the node runs its queue.
//!
//! What is the paper's and what is ours:
//!
//! - **Paper** (§5.2): action = a worker node; observation = the task's
//!   features (type id, size) plus per node CPU, GPU, host-memory and
//!   GPU-memory utilisation and uplink/downlink rates; reward = change in
//!   system throughput, `r_t = thr(t+1) - thr(t)`; a DQN, an MLP with hidden
//!   layers of 256 and 128 (ReLU), plain SGD at learning rate 0.1, minibatch
//!   20, discount 0.8, experience replay with random minibatches, a target
//!   network copied every μ steps, ε-greedy; supervised pre-training gives
//!   the initial weights; transfer learning reuses the hidden layers when the
//!   number of nodes changes.
//! - **Ours** (every choice a field of [`LdwpParams`]):
//!   - the network is [`crate::nn::Mlp`] (`n_in → 256 → 128 → M`, one
//!     Q-value per node; He/Glorot initialisation from the run's stream
//!     `policy.ldwp` of the master seed);
//!   - the observation ([`encode`]) is laid out in [`encode`]'s doc: the job's
//!     model one-hot over the model vocabulary (the profile database's models,
//!     sorted, kept in the model file), `ln(1+batch)/ln(1025)`, GPUs asked /
//!     the largest node's GPUs, and its predicted run time on the fastest
//!     feasible node `h(s) = ln(1 + s/3600)/ln(1001)`; then per node the six
//!     utilisations of the paper in its order — CPU, GPU (`NodeLoad::gpu_util`:
//!     GPUs held / GPUs), host memory **0** (not modelled), GPU memory
//!     (`NodeLoad::gpu_mem_util`, the memory model), uplink and downlink; CPU,
//!     uplink and downlink are **0** by default ([`NodeInputs::Zero`]) and,
//!     with `params.node_inputs = "load-model"`, come from the host-load model
//!     of [`crate::profile::resources::HostLoad`] (ours: data-loading cores
//!     from the samples/s, gradient all-reduce MB/s from the parameter count
//!     and iteration time; `experiments/ldwp.md` measures the difference) —
//!     and six of ours: feasible (0/1),
//!     the SM-utilisation proxy, free GPUs / GPUs, `q/(1+q)` of the queue
//!     length, `h` of the node's predicted backlog (outstanding GPU-work /
//!     GPUs, s), `h` of the job's predicted run time there (0 if infeasible).
//!     Every input is in `[0, 1]`, so no running normalisation is needed;
//!   - reward ([`RewardKind`]): by default the change, between consecutive
//!     decisions, of the cluster's normalised processing throughput
//!     `Φ = Σ_running rate_j · gpus_j / G` (rate 1 = the job's trace speed,
//!     `G` = the cluster's GPUs); or the change of the completions per hour
//!     per GPU over a trailing window;
//!   - replay: a ring of [`LdwpParams::replay`] = 5,000 transitions, minibatches
//!     drawn uniformly with replacement; one SGD step per decision once the
//!     ring holds a minibatch; the target network copied every μ =
//!     [`LdwpParams::target_every`] = 100 steps; the target is
//!     `r + γ max_{a' feasible in s'} Q_target(s', a')` (a stream never ends:
//!     no terminal states);
//!   - ε-greedy: ε linear from 0.3 (the note's "30 % random, 70 % greedy") to
//!     0.05 over 2,000 decisions after pre-training; random actions uniform
//!     over the feasible nodes; greedy = argmax over feasible nodes, ties to
//!     the lowest node index;
//!   - pre-training ([`LdwpParams::pretrain`]): the agent's first 200
//!     decisions follow min-ECT (`super::nodesel::MinEct`) while the network
//!     regresses every feasible node's Q-value on `-κ h(ECT_n)` (κ =
//!     [`LdwpParams::pretrain_scale`] = 0.1, masked MSE over the feasible
//!     nodes): the initial greedy policy is min-ECT's; those decisions'
//!     transitions also fill the replay ring; at the switch the target
//!     network is copied;
//!   - transfer ([`Dqn::transfer`]): the hidden layer `256 → 128` (weights and
//!     bias) carries over; the input layer (its width depends on the node
//!     count) and the output layer (one Q per node) are re-initialised.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Policy;
use super::build::{BuildContext, BuildPolicy};
use super::nodesel::Dispatch;
use crate::error::RunError;
// The deep Q-network and the selector driving it (the `learned` feature).
#[cfg(feature = "learned")]
use {
    super::View,
    super::nodesel::{Completion, MinEct, NodeDispatch, NodeSelector},
    crate::error::{ConfigError, TraceError},
    crate::ids::JobId,
    crate::job::JobState,
    crate::nn::{Mlp, OutputActivation},
    crate::profile::resources::SmUtil,
    crate::rng::Stream,
    ndarray::Array2,
    rand::Rng,
    std::collections::{BTreeSet, VecDeque},
    std::path::Path,
    std::sync::{Arc, Mutex},
};

/// What the agent is rewarded for (both "the change in system throughput",
/// spec §5.2; which throughput is our reading).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum RewardKind {
    /// `Φ(t_{k+1}) - Φ(t_k)` between consecutive decisions, `Φ = Σ_running
    /// rate · GPUs / G` (the default).
    RateDelta,
    /// The change of the completions per hour per GPU over the trailing
    /// [`LdwpParams::window_s`].
    CompletionsDelta,
}

crate::names::value_names!(RewardKind { RateDelta => "rate-delta", CompletionsDelta => "completions-delta" });

/// What fills the paper's CPU, host-memory and uplink/downlink inputs of
/// each node block ([`encode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum NodeInputs {
    /// All four 0 (dlsched had no CPU or network model; the default, so the
    /// shipped `policies/ldwp-lab16.json` and every earlier run keep their
    /// meaning).
    #[default]
    Zero,
    /// CPU = [`NodeLoad::cpu_util`](super::nodesel::NodeLoad::cpu_util),
    /// uplink and downlink = `q/(1+q)` with `q` = the node's all-reduce
    /// MB/s / 1,000, from the host-load model of
    /// [`crate::profile::resources::HostLoad`] (ours); host memory stays 0
    /// (no model).
    LoadModel,
}

crate::names::value_names!(NodeInputs { Zero => "zero", LoadModel => "load-model" });

impl NodeInputs {
    /// True for the default (so that saved models and manifests of default
    /// runs do not change).
    pub fn is_zero(&self) -> bool {
        *self == NodeInputs::Zero
    }
}

/// Every open choice of LDWP, with our defaults (module docs say which are the
/// paper's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LdwpParams {
    /// Hidden layer widths (the paper's 256 and 128).
    pub hidden: Vec<usize>,
    /// SGD learning rate (the paper's 0.1).
    pub lr: f64,
    /// Minibatch size (the paper's 20).
    pub batch: usize,
    /// Discount per decision (the paper's 0.8).
    pub gamma: f64,
    /// Replay capacity, transitions (ours: 5,000).
    pub replay: usize,
    /// μ: SGD steps between target-network copies (ours: 100).
    pub target_every: u64,
    /// ε at the end of pre-training (ours: 0.3).
    pub epsilon_start: f64,
    /// ε after the decay (ours: 0.05).
    pub epsilon_end: f64,
    /// Decisions of the linear ε decay (ours: 2,000).
    pub epsilon_decay: u64,
    /// Decisions of supervised pre-training on min-ECT (ours: 200; 0 = none).
    pub pretrain: u64,
    /// κ: pre-training label scale, `label_n = -κ h(ECT_n)` (ours: 0.1).
    pub pretrain_scale: f64,
    /// The reward.
    pub reward: RewardKind,
    /// Window of [`RewardKind::CompletionsDelta`], s (ours: 3,600).
    pub window_s: f64,
    /// The paper's CPU and network inputs: zero (default) or the host-load
    /// model (`policy_opt.params.node_inputs = "load-model"`). Not written
    /// when zero.
    #[serde(skip_serializing_if = "NodeInputs::is_zero")]
    pub node_inputs: NodeInputs,
}

impl Default for LdwpParams {
    fn default() -> Self {
        LdwpParams {
            hidden: vec![256, 128],
            lr: 0.1,
            batch: 20,
            gamma: 0.8,
            replay: 5000,
            target_every: 100,
            epsilon_start: 0.3,
            epsilon_end: 0.05,
            epsilon_decay: 2000,
            pretrain: 200,
            pretrain_scale: 0.1,
            reward: RewardKind::RateDelta,
            window_s: 3600.0,
            node_inputs: NodeInputs::Zero,
        }
    }
}

impl LdwpParams {
    /// Checks every field, naming the option (`--ldwp-…` flag, sweep key `ldwp_…`).
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn validate(&self) -> Result<(), String> {
        if self.hidden.is_empty() || self.hidden.contains(&0) {
            return Err(format!("ldwp hidden layers must be positive widths, got {:?}", self.hidden));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(format!("--ldwp-lr must be a positive number, got {}", self.lr));
        }
        if self.batch == 0 {
            return Err("--ldwp-batch must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return Err(format!("--ldwp-gamma must be in [0, 1], got {}", self.gamma));
        }
        if self.replay < self.batch {
            return Err(format!("--ldwp-replay ({}) must hold at least one minibatch ({})", self.replay, self.batch));
        }
        if self.target_every == 0 {
            return Err("--ldwp-target-every must be at least 1".into());
        }
        for (name, e) in [("--ldwp-epsilon", self.epsilon_start), ("--ldwp-epsilon-end", self.epsilon_end)] {
            if !(0.0..=1.0).contains(&e) {
                return Err(format!("{name} must be in [0, 1], got {e}"));
            }
        }
        if !(self.pretrain_scale.is_finite() && self.pretrain_scale >= 0.0) {
            return Err(format!("--ldwp-pretrain-scale must be a non-negative number, got {}", self.pretrain_scale));
        }
        if !(self.window_s.is_finite() && self.window_s > 0.0) {
            return Err(format!("--ldwp-window must be a positive number of seconds, got {}", self.window_s));
        }
        Ok(())
    }
}

/// One experience: observation, node taken, reward, next observation and its mask.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// Observation, length `n_in`.
    pub s: Vec<f64>,
    /// Action (node index).
    pub a: usize,
    /// Reward.
    pub r: f64,
    /// Next observation.
    pub s2: Vec<f64>,
    /// Feasible nodes at the next observation.
    pub mask2: Vec<bool>,
}

/// A pre-training example: observation, per-node labels, mask.
#[cfg(feature = "learned")]
#[derive(Clone, Debug, PartialEq)]
struct Labelled {
    s: Vec<f64>,
    y: Vec<f64>,
    mask: Vec<bool>,
}

/// The job features before the per-node blocks: model one-hot (vocabulary
/// size) + these.
pub const JOB_EXTRA: usize = 3;
/// Inputs per node (module docs: the paper's six, then six of ours).
pub const PER_NODE: usize = 12;

/// The learner: Q-network, target network, replay, counters. Saved (without the
/// replay, the pre-training buffer and the generator) by `dlsched ldwp-train`.
#[cfg(feature = "learned")]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dqn {
    /// Parameters.
    pub params: LdwpParams,
    /// Nodes (actions).
    pub nodes: usize,
    /// The model vocabulary of the one-hot (sorted).
    pub models: Vec<String>,
    /// The Q-network, `(batch, n_in) → (batch, nodes)`.
    pub q: Mlp,
    /// Decisions taken (over all episodes).
    pub decisions: u64,
    /// SGD steps (TD and pre-training).
    pub updates: u64,
    /// Training episodes completed (set by the trainer).
    pub episode: u64,
    /// Times an update produced a non-finite weight (then undone; counted).
    pub diverged: u64,
    #[serde(skip)]
    target: Option<Mlp>,
    /// Gradient buffers reused by every SGD step (sized on the first).
    #[serde(skip)]
    grads: crate::nn::Grads,
    #[serde(skip)]
    replay: Vec<Transition>,
    #[serde(skip)]
    replay_next: usize,
    #[serde(skip)]
    labelled: Vec<Labelled>,
    #[serde(skip)]
    labelled_next: usize,
    #[serde(skip)]
    rng: Option<Stream>,
    #[serde(skip)]
    last_loss: f64,
}

#[cfg(feature = "learned")]
impl PartialEq for Dqn {
    /// Equal saved state (what a model file holds).
    fn eq(&self, o: &Self) -> bool {
        self.params == o.params
            && self.nodes == o.nodes
            && self.models == o.models
            && self.q == o.q
            && self.decisions == o.decisions
            && self.updates == o.updates
            && self.episode == o.episode
            && self.diverged == o.diverged
    }
}

/// The stream name of the agent's generator.
pub const STREAM: &str = "policy.ldwp";

/// Input width for `nodes` nodes and a vocabulary of `vocab` models.
pub fn input_width(vocab: usize, nodes: usize) -> usize {
    vocab + JOB_EXTRA + PER_NODE * nodes
}

#[cfg(feature = "learned")]
impl Dqn {
    /// A fresh agent for `nodes` nodes over the model vocabulary `models`,
    /// initialised from stream [`STREAM`] of `seed`.
    pub fn new(params: LdwpParams, nodes: usize, models: Vec<String>, seed: u64) -> Self {
        let mut rng = crate::rng::stream(seed, STREAM);
        let mut sizes = vec![input_width(models.len(), nodes)];
        sizes.extend(params.hidden.iter().copied());
        sizes.push(nodes);
        let q = Mlp::new(&sizes, OutputActivation::Linear, &mut rng);
        Dqn {
            params,
            nodes,
            models,
            q,
            decisions: 0,
            updates: 0,
            episode: 0,
            diverged: 0,
            grads: crate::nn::Grads::empty(),
            target: None,
            replay: Vec::new(),
            replay_next: 0,
            labelled: Vec::new(),
            labelled_next: 0,
            rng: Some(rng),
            last_loss: f64::NAN,
        }
    }

    /// Restarts the generator on stream [`STREAM`] of `seed` (each run or
    /// episode draws from its own seed's stream).
    pub fn reseed(&mut self, seed: u64) {
        self.rng = Some(crate::rng::stream(seed, STREAM));
    }

    fn rng(&mut self) -> &mut Stream {
        self.rng.get_or_insert_with(|| crate::rng::stream(0, STREAM))
    }

    /// The agent for `nodes` nodes transferred from `self` (module docs): the
    /// hidden-to-hidden layers (all but the first and last) carry over
    /// unchanged; the input and output layers are drawn afresh from stream
    /// [`STREAM`] of `seed`, as [`Mlp::new`] draws them. Counters restart at 0;
    /// pre-training runs again (the new input layer knows nothing).
    pub fn transfer(&self, nodes: usize, seed: u64) -> Dqn {
        let mut fresh = Dqn::new(self.params.clone(), nodes, self.models.clone(), seed);
        let n = self.q.layers.len();
        for l in 1..n - 1 {
            fresh.q.layers[l] = self.q.layers[l].clone();
        }
        fresh
    }

    /// ε at the current decision count (module docs).
    pub fn epsilon(&self) -> f64 {
        let p = &self.params;
        let after = self.decisions.saturating_sub(p.pretrain);
        if p.epsilon_decay == 0 || after >= p.epsilon_decay {
            return p.epsilon_end;
        }
        let f = after as f64 / p.epsilon_decay as f64;
        p.epsilon_start + (p.epsilon_end - p.epsilon_start) * f
    }

    /// Whether the agent is still in supervised pre-training.
    pub fn pretraining(&self) -> bool {
        self.decisions < self.params.pretrain
    }

    /// Q-values of one observation.
    pub fn q_values(&self, s: &[f64]) -> Vec<f64> {
        self.q.forward_one(s)
    }

    /// The feasible node of largest Q, the lowest index among equals; `None`
    /// if none is feasible.
    pub fn greedy(&self, s: &[f64], mask: &[bool]) -> Option<usize> {
        argmax_masked(&self.q_values(s), mask)
    }

    /// ε-greedy choice (`explore`), else greedy; counts the decision.
    pub fn act(&mut self, s: &[f64], mask: &[bool], explore: bool) -> Option<usize> {
        let eps = self.epsilon();
        self.decisions += 1;
        if self.params.pretrain > 0 && self.decisions == self.params.pretrain + 1 {
            // The first decision after pre-training: the target starts from
            // the pre-trained network.
            self.target = Some(self.q.clone());
        }
        if explore && self.rng().r#gen::<f64>() < eps {
            let feasible: Vec<usize> = (0..mask.len()).filter(|&i| mask[i]).collect();
            if feasible.is_empty() {
                return None;
            }
            let k = self.rng().gen_range(0..feasible.len());
            return Some(feasible[k]);
        }
        self.greedy(s, mask)
    }

    /// Stores a transition (the ring drops the oldest beyond capacity) and
    /// takes one TD step if the ring holds a minibatch. Returns the step's loss.
    pub fn observe(&mut self, t: Transition) -> Option<f64> {
        self.remember(t);
        (self.replay.len() >= self.params.batch).then(|| self.td_step())
    }

    /// Stores a transition without a TD step (pre-training fills the ring).
    pub fn remember(&mut self, t: Transition) {
        let cap = self.params.replay;
        if self.replay.len() < cap {
            self.replay.push(t);
        } else {
            self.replay[self.replay_next] = t;
        }
        self.replay_next = (self.replay_next + 1) % cap;
    }

    /// Transitions in the ring.
    pub fn replay_len(&self) -> usize {
        self.replay.len()
    }

    /// The loss of the last SGD step (NaN before any).
    pub fn last_loss(&self) -> f64 {
        self.last_loss
    }

    /// One TD step on a minibatch drawn uniformly with replacement: targets
    /// `r + γ max_{feasible a'} Q_target(s', a')`, MSE on the taken actions'
    /// Q-values, SGD.
    pub fn td_step(&mut self) -> f64 {
        let b = self.params.batch;
        let n = self.replay.len();
        let idx: Vec<usize> = (0..b).map(|_| self.rng().gen_range(0..n)).collect();
        let n_in = self.q.n_in();
        let mut x = Array2::<f64>::zeros((b, n_in));
        let mut x2 = Array2::<f64>::zeros((b, n_in));
        for (row, &i) in idx.iter().enumerate() {
            x.row_mut(row).assign(&ndarray::ArrayView1::from(&self.replay[i].s[..]));
            x2.row_mut(row).assign(&ndarray::ArrayView1::from(&self.replay[i].s2[..]));
        }
        let target_net = self.target.get_or_insert_with(|| self.q.clone());
        let q2 = target_net.forward(x2.view());
        let mut targets = Vec::with_capacity(b);
        let mut actions = Vec::with_capacity(b);
        for (row, &i) in idx.iter().enumerate() {
            let t = &self.replay[i];
            let next = max_masked(q2.row(row).as_slice().expect("owned rows are contiguous"), &t.mask2);
            targets.push(t.r + self.params.gamma * next.unwrap_or(0.0));
            actions.push(t.a);
        }
        let tr = self.q.forward_trace(x.view());
        let (loss, d) = crate::nn::mse_selected(tr.output(), &actions, &targets);
        self.apply(&tr, &d);
        if self.updates.is_multiple_of(self.params.target_every) {
            self.target = Some(self.q.clone());
        }
        self.last_loss = loss;
        loss
    }

    /// Back-propagates `d` and takes the SGD step; a step that would make a
    /// weight non-finite is undone and counted in [`Dqn::diverged`].
    fn apply(&mut self, tr: &crate::nn::Trace, d: &Array2<f64>) {
        let mut g = std::mem::take(&mut self.grads);
        self.q.backward_weights_into(tr, d, &mut g);
        let stepped = self.q.sgd_step_if_finite(&g, self.params.lr);
        self.grads = g;
        if !stepped {
            self.diverged += 1;
        }
        self.updates += 1;
    }

    /// One supervised pre-training example (labels per node, masked) and one
    /// SGD step on a minibatch of the examples so far (masked MSE). Returns the loss.
    pub fn pretrain_step(&mut self, s: Vec<f64>, y: Vec<f64>, mask: Vec<bool>) -> f64 {
        let cap = self.params.replay;
        if self.labelled.len() < cap {
            self.labelled.push(Labelled { s, y, mask });
        } else {
            self.labelled[self.labelled_next] = Labelled { s, y, mask };
        }
        self.labelled_next = (self.labelled_next + 1) % cap;
        let b = self.params.batch;
        let n = self.labelled.len();
        let idx: Vec<usize> = (0..b).map(|_| self.rng().gen_range(0..n)).collect();
        let n_in = self.q.n_in();
        let m = self.nodes;
        let mut x = Array2::<f64>::zeros((b, n_in));
        let mut t = Array2::<f64>::zeros((b, m));
        let mut w = Array2::<f64>::zeros((b, m));
        for (row, &i) in idx.iter().enumerate() {
            let e = &self.labelled[i];
            x.row_mut(row).assign(&ndarray::ArrayView1::from(&e.s[..]));
            for k in 0..m {
                if e.mask[k] {
                    t[[row, k]] = e.y[k];
                    w[[row, k]] = 1.0;
                }
            }
        }
        let tr = self.q.forward_trace(x.view());
        let (loss, d) = crate::nn::mse_masked(tr.output(), &t, &w);
        self.apply(&tr, &d);
        self.last_loss = loss;
        loss
    }
}

/// The feasible index of largest value, lowest index among equals.
pub fn argmax_masked(v: &[f64], mask: &[bool]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, (&x, &ok)) in v.iter().zip(mask).enumerate() {
        if ok && best.is_none_or(|(_, b)| x > b) {
            best = Some((i, x));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(feature = "learned")]
fn max_masked(v: &[f64], mask: &[bool]) -> Option<f64> {
    argmax_masked(v, mask).map(|i| v[i])
}

/// `h(s) = ln(1 + s/3600) / ln(1001)`: a duration in s squashed into `[0, 1]`
/// for 0 to 1,000 h (clamped above).
pub fn squash_s(s: f64) -> f64 {
    if !s.is_finite() || s <= 0.0 {
        return if s == f64::INFINITY { 1.0 } else { 0.0 };
    }
    ((s / 3600.0).ln_1p() / 1001f64.ln()).min(1.0)
}

/// A per-model index of the vocabulary.
pub fn vocab_index(models: &[String]) -> BTreeMap<String, usize> {
    models.iter().enumerate().map(|(i, m)| (m.clone(), i)).collect()
}

// ---- the node selector ----

/// Builds the observation of one dispatch decision (module docs), length
/// [`input_width`]`(vocab.len(), nodes.len())`:
///
/// `[one-hot(model) | ln(1+batch)/ln(1025), gpus / max node GPUs, h(fastest
/// run s)] ++ per node [CPU, GPU util, host mem 0, GPU-mem util, uplink,
/// downlink, feasible, SM proxy, free/GPUs, q/(1+q), h(backlog s), h(run s)]`
/// with `h` = [`squash_s`]; CPU, uplink and downlink are 0 under
/// [`NodeInputs::Zero`], else as [`NodeInputs::LoadModel`] says.
pub fn encode(d: &Dispatch<'_>, vocab: &BTreeMap<String, usize>, inputs: NodeInputs) -> Vec<f64> {
    let mut x = vec![0.0; input_width(vocab.len(), d.nodes.len())];
    if let Some(i) = d.spec.model().and_then(|m| vocab.get(m)) {
        x[*i] = 1.0;
    }
    let v = vocab.len();
    let batch = f64::from(d.spec.local_bsz().unwrap_or(0));
    x[v] = (batch.ln_1p() / 1025f64.ln()).min(1.0);
    let max_gpus = d.nodes.iter().map(|n| n.gpus).max().unwrap_or(1).max(1);
    x[v + 1] = (f64::from(d.spec.gpus) / f64::from(max_gpus)).min(1.0);
    let fastest = d.nodes.iter().filter(|n| n.feasible).map(|n| n.job_run_s).fold(f64::INFINITY, f64::min);
    x[v + 2] = if fastest.is_finite() { squash_s(fastest) } else { 0.0 };
    for (k, n) in d.nodes.iter().enumerate() {
        let o = v + JOB_EXTRA + PER_NODE * k;
        let g = f64::from(n.gpus.max(1));
        x[o + 1] = n.gpu_util.clamp(0.0, 1.0);
        x[o + 2] = 0.0; // host-memory utilisation: not modelled
        x[o + 3] = n.gpu_mem_util.clamp(0.0, 1.0);
        if inputs == NodeInputs::LoadModel {
            x[o] = n.cpu_util.clamp(0.0, 1.0);
            let (up, down) = (n.uplink_mb_s.max(0.0) / 1000.0, n.downlink_mb_s.max(0.0) / 1000.0);
            x[o + 4] = up / (1.0 + up);
            x[o + 5] = down / (1.0 + down);
        }
        x[o + 6] = if n.feasible { 1.0 } else { 0.0 };
        x[o + 7] = n.sm_util.clamp(0.0, 1.0);
        x[o + 8] = f64::from(n.gpus_free) / g;
        let q = f64::from(n.queue_len);
        x[o + 9] = q / (1.0 + q);
        x[o + 10] = squash_s((n.running_gpu_s + n.queued_gpu_s) / g);
        x[o + 11] = if n.feasible { squash_s(n.job_run_s) } else { 0.0 };
    }
    x
}

/// Whether the selector learns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LdwpMode {
    /// Pre-trains, explores and learns (`ldwp`).
    Online,
    /// Greedy on a saved network, no updates (`ldwp-frozen`).
    Frozen,
}

/// The open transition: the observation and node of the last decision, and
/// the throughput then.
#[cfg(feature = "learned")]
struct Open {
    s: Vec<f64>,
    a: usize,
    thr: f64,
}

/// LDWP's node selector driving a shared [`Dqn`] (shared so that a trainer
/// keeps it across episodes).
#[cfg(feature = "learned")]
pub struct LdwpSelector {
    mode: LdwpMode,
    agent: Arc<Mutex<Dqn>>,
    vocab: BTreeMap<String, usize>,
    /// The agent's [`LdwpParams::node_inputs`].
    inputs: NodeInputs,
    total_gpus: f64,
    live: BTreeSet<JobId>,
    completions_ms: VecDeque<u64>,
    open: Option<Open>,
    curve: String,
    reward_sum: f64,
    rewards: u64,
    loss_sum: f64,
    losses: u64,
}

#[cfg(feature = "learned")]
impl LdwpSelector {
    /// A selector in `mode` over `agent` for a cluster of `total_gpus` GPUs.
    pub fn new(mode: LdwpMode, agent: Arc<Mutex<Dqn>>, total_gpus: u32) -> Self {
        let (models, inputs) = agent.lock().map(|a| (a.models.clone(), a.params.node_inputs)).unwrap_or_default();
        let vocab = vocab_index(&models);
        LdwpSelector {
            mode,
            agent,
            vocab,
            inputs,
            total_gpus: f64::from(total_gpus.max(1)),
            live: BTreeSet::new(),
            completions_ms: VecDeque::new(),
            open: None,
            curve: "decision,time_s,phase,node,reward,throughput,epsilon,loss\n".to_string(),
            reward_sum: 0.0,
            rewards: 0,
            loss_sum: 0.0,
            losses: 0,
        }
    }

    /// The throughput the reward differences (module docs).
    fn throughput(&mut self, d: &Dispatch<'_>, p: &LdwpParams) -> f64 {
        match p.reward {
            RewardKind::RateDelta => {
                let jobs = d.view.jobs;
                let sum: f64 = self
                    .live
                    .iter()
                    .map(|&j| match jobs.state(j) {
                        JobState::Running(r) => r.rate * f64::from(jobs.spec(j).gpus),
                        _ => 0.0,
                    })
                    .sum();
                sum / self.total_gpus
            }
            RewardKind::CompletionsDelta => {
                let w_ms = (p.window_s * 1000.0) as u64;
                let now = d.now.as_ms();
                while self.completions_ms.front().is_some_and(|&t| t + w_ms <= now) {
                    self.completions_ms.pop_front();
                }
                self.completions_ms.len() as f64 * 3600.0 / p.window_s / self.total_gpus
            }
        }
    }
}

#[cfg(feature = "learned")]
impl NodeSelector for LdwpSelector {
    fn name(&self) -> String {
        match self.mode {
            LdwpMode::Online => "ldwp",
            LdwpMode::Frozen => "ldwp-frozen",
        }
        .to_string()
    }

    fn select(&mut self, d: &Dispatch<'_>) -> usize {
        let s = encode(d, &self.vocab, self.inputs);
        let mask: Vec<bool> = d.nodes.iter().map(|n| n.feasible).collect();
        let agent = self.agent.clone();
        let mut agent = agent.lock().expect("ldwp agent lock");
        let p = agent.params.clone();
        let thr = self.throughput(d, &p);
        let online = self.mode == LdwpMode::Online;
        let mut reward = None;
        let mut loss = None;
        let pretraining = online && agent.pretraining();
        if let Some(o) = self.open.take() {
            let r = thr - o.thr;
            reward = Some(r);
            self.reward_sum += r;
            self.rewards += 1;
            if online {
                let t = Transition { s: o.s, a: o.a, r, s2: s.clone(), mask2: mask.clone() };
                if pretraining { agent.remember(t) } else { loss = agent.observe(t) }
            }
        }
        let eps = if pretraining {
            0.0
        } else if online {
            agent.epsilon()
        } else {
            0.0
        };
        let a = if pretraining {
            let ect: Vec<f64> = d.nodes.iter().map(MinEct::ect_s).collect();
            let labels: Vec<f64> = ect.iter().map(|&e| -p.pretrain_scale * squash_s(e)).collect();
            let neg: Vec<f64> = ect.iter().map(|e| -e).collect();
            let a = argmax_masked(&neg, &mask).unwrap_or(0);
            agent.decisions += 1;
            loss = Some(agent.pretrain_step(s.clone(), labels, mask));
            a
        } else {
            agent.act(&s, &mask, online).unwrap_or(0)
        };
        if let Some(l) = loss {
            self.loss_sum += l;
            self.losses += 1;
        }
        let decision = agent.decisions;
        drop(agent);
        self.live.insert(d.job);
        use std::fmt::Write;
        let _ = writeln!(
            self.curve,
            "{decision},{:.3},{},{},{},{:.6},{eps:.4},{}",
            d.now.as_secs_f64(),
            if pretraining {
                "pretrain"
            } else if online {
                "learn"
            } else {
                "frozen"
            },
            d.nodes[a].node.index(),
            reward.map_or(String::new(), |r| format!("{:.6}", r + 0.0)),
            thr + 0.0,
            loss.map_or(String::new(), |l| format!("{l:.6e}")),
        );
        self.open = Some(Open { s, a, thr });
        a
    }

    fn on_completion(&mut self, c: &Completion, _view: &View<'_>) {
        self.live.remove(&c.job);
        self.completions_ms.push_back(c.now.as_ms());
    }

    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let a = self.agent.lock().map(|a| (a.decisions, a.updates, a.diverged, a.epsilon())).unwrap_or_default();
        let mean = |s: f64, n: u64| if n == 0 { 0.0 } else { s / n as f64 };
        vec![
            ("ldwp_decisions", a.0 as f64),
            ("ldwp_updates", a.1 as f64),
            ("ldwp_diverged_steps", a.2 as f64),
            ("ldwp_epsilon", a.3),
            ("ldwp_reward_mean", mean(self.reward_sum, self.rewards)),
            ("ldwp_loss_mean", mean(self.loss_sum, self.losses)),
        ]
    }

    fn files(&self) -> Vec<(&'static str, String)> {
        vec![("learning_curve.csv", self.curve.clone())]
    }
}

// ---- registry options, model files ----

/// Options of `ldwp` (learns online: pre-training, ε-greedy, TD steps) and
/// `ldwp-frozen` (greedy on a saved model, no updates); set with
/// `--policy-opt NAME=VALUE` (`params.lr=0.01`, `model=FILE`) or a sweep's
/// `policy_opt.NAME`. Defaults (derived): [`LdwpParams::default`], no model,
/// no transfer, no node-local backfill.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LdwpOptions {
    /// The learner's parameters. A loaded model keeps its network; an online
    /// run learns on with these (hidden widths must match the model's).
    pub params: LdwpParams,
    /// A model saved by `dlsched ldwp-train`: required by `ldwp-frozen`, the
    /// starting point of `ldwp`.
    pub model: Option<PathBuf>,
    /// When the model's node count differs from the cluster's: reuse its
    /// hidden layers and re-initialise the input and output layers
    /// ([`Dqn::transfer`]); `ldwp` only. Default false (a mismatch is an error).
    pub transfer: bool,
    /// Node-local greedy backfill in the node queues
    /// ([`super::nodesel::NodeDispatchOptions::backfill`]). Default false.
    pub backfill: bool,
}

#[cfg(feature = "learned")]
impl LdwpOptions {
    /// Builds the policy of `kind` (`ldwp` or `ldwp-frozen`) driving `agent`
    /// when given (a trainer's, kept across episodes), else a loaded or fresh
    /// one.
    ///
    /// # Errors
    /// A [`RunError`] when the run is not one node dispatch can do (moldable
    /// tasks, VC partitions), the model cannot be read or does not fit the
    /// cluster.
    pub fn build_with_agent(
        &self,
        kind: &str,
        ctx: &mut BuildContext<'_>,
        agent: Option<Arc<Mutex<Dqn>>>,
    ) -> Result<Box<dyn Policy>, RunError> {
        let mode = if kind == "ldwp-frozen" { LdwpMode::Frozen } else { LdwpMode::Online };
        if ctx.tasks {
            return Err(ConfigError::other(format!(
                "`{kind}` dispatches fixed-size jobs to nodes; it does not schedule moldable tasks (`--workload genie`)"
            ))
            .into());
        }
        let cluster = ctx.cluster;
        if cluster.partitions().len() > 1 {
            return Err(ConfigError::other(format!(
                "`{kind}` has one Q-value per node of the cluster: it does not run on VC partitions ({} here)",
                cluster.partitions().len()
            ))
            .into());
        }
        let nodes = cluster.num_nodes();
        let agent = match (agent, &self.model) {
            (Some(a), _) => a,
            (None, Some(path)) => {
                let saved = ctx.artefacts.get_or_read::<LdwpModel>(path)?;
                let (mut a, trained_on) = (saved.dqn.clone(), saved.trained_on.clone());
                let name = cluster.spec().name.clone();
                let differs = trained_on.as_ref().is_some_and(|c| *c != name) || a.nodes != nodes;
                if differs && !self.transfer {
                    return Err(ConfigError::other(format!(
                        "{}: the model was trained on cluster `{}` ({} nodes), this run is on `{name}` ({nodes} nodes); \
                         `--policy-opt transfer=true` (ldwp) reuses its hidden layers",
                        path.display(),
                        trained_on.as_deref().unwrap_or("?"),
                        a.nodes
                    ))
                    .into());
                }
                if differs && mode == LdwpMode::Frozen {
                    return Err(ConfigError::other(format!(
                        "{}: ldwp-frozen cannot transfer (its new input and output layers would be untrained); \
                         use `ldwp` with transfer=true, or `dlsched ldwp-train --transfer-from`",
                        path.display()
                    ))
                    .into());
                }
                if mode == LdwpMode::Online {
                    if self.params.hidden != a.params.hidden {
                        return Err(ConfigError::other(format!(
                            "{}: the model's hidden layers are {:?}; this run asks {:?} (params.hidden)",
                            path.display(),
                            a.params.hidden,
                            self.params.hidden
                        ))
                        .into());
                    }
                    a.params = self.params.clone();
                }
                if differs {
                    a = a.transfer(nodes, ctx.seed);
                }
                a.reseed(ctx.seed);
                Arc::new(Mutex::new(a))
            }
            (None, None) if mode == LdwpMode::Frozen => {
                return Err(ConfigError::other("ldwp-frozen needs a trained model (--policy-opt model=FILE)").into());
            }
            (None, None) => {
                let models: Vec<String> = ctx.db().models().map(str::to_string).collect();
                Arc::new(Mutex::new(Dqn::new(self.params.clone(), nodes, models, ctx.seed)))
            }
        };
        let selector = LdwpSelector::new(mode, agent, cluster.total_gpus());
        Ok(Box::new(NodeDispatch::new(
            Box::new(selector),
            cluster,
            (ctx.rate_model)(),
            SmUtil::new(ctx.db()),
            self.backfill,
        )))
    }
}

impl BuildPolicy for LdwpOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        self.params.validate()
    }

    /// Needs the deep Q-network (the `learned` feature).
    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        #[cfg(feature = "learned")]
        {
            // A network the caller keeps across runs (training episodes).
            let agent = ctx.extensions.take::<Arc<Mutex<Dqn>>>();
            self.build_with_agent(kind, ctx, agent)
        }
        #[cfg(not(feature = "learned"))]
        {
            let _ = ctx;
            Err(crate::error::FeatureDisabled::new(format!("policy `{kind}`"), "learned").into())
        }
    }
}

/// A model saved by `dlsched ldwp-train`, checked ([`load_model`]), read
/// once for a sweep.
#[cfg(feature = "learned")]
#[derive(Clone, Debug)]
pub struct LdwpModel {
    /// The trained network.
    pub dqn: Dqn,
    /// The cluster the file's manifest names (the one it was trained on).
    pub trained_on: Option<String>,
}

#[cfg(feature = "learned")]
impl crate::policy::build::Artefact for LdwpModel {
    fn load(path: &Path) -> Result<Self, TraceError> {
        load_model(path).map(|(dqn, trained_on)| LdwpModel { dqn, trained_on })
    }
}

/// Reads a model saved by `dlsched ldwp-train` (`{"manifest": {..., "cluster":
/// NAME}, "agent": Dqn}`) and checks it: parameters in range, the network's
/// shape `[input_width(models, nodes), hidden..., nodes]`. Returns the agent
/// and the cluster its manifest names.
///
/// # Errors
/// A [`TraceError`] naming the file and what is wrong.
#[cfg(feature = "learned")]
pub fn load_model(path: &Path) -> Result<(Dqn, Option<String>), TraceError> {
    let (a, trained_on) = crate::policy::build::read_saved_agent::<Dqn>(path, "an LDWP model")?;
    let bad = |message: String| TraceError::Format { file: path.to_path_buf(), message };
    a.params.validate().map_err(|e| bad(format!("parameters: {e}")))?;
    let mut want = vec![input_width(a.models.len(), a.nodes)];
    want.extend(a.params.hidden.iter().copied());
    want.push(a.nodes);
    if a.q.sizes() != want || a.q.output != OutputActivation::Linear {
        return Err(bad(format!(
            "the Q-network's layer sizes are {:?}; {} models, {} nodes and hidden {:?} need {want:?} (linear output)",
            a.q.sizes(),
            a.models.len(),
            a.nodes,
            a.params.hidden
        )));
    }
    Ok((a, trained_on))
}

#[cfg(feature = "learned")]
#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobSpec;
    use crate::policy::nodesel::NodeLoad;
    use crate::time::SimTime;

    fn small(params: LdwpParams) -> Dqn {
        Dqn::new(params, 3, vec!["a".into(), "b".into()], 1)
    }

    #[test]
    fn greedy_masks_and_breaks_ties_by_index() {
        assert_eq!(argmax_masked(&[1.0, 5.0, 5.0, 9.0], &[true, true, true, false]), Some(1));
        assert_eq!(argmax_masked(&[1.0, 5.0], &[false, false]), None);
        // All-equal Q (zero output layer): the lowest feasible index.
        let mut d = small(LdwpParams { hidden: vec![4], ..Default::default() });
        d.q.layers[1].w.fill(0.0);
        let s = vec![0.5; d.q.n_in()];
        assert_eq!(d.greedy(&s, &[false, true, true]), Some(1));
    }

    #[test]
    fn epsilon_schedule_by_hand() {
        let p =
            LdwpParams { pretrain: 10, epsilon_start: 0.3, epsilon_end: 0.1, epsilon_decay: 100, ..Default::default() };
        let mut d = small(p);
        assert!(d.pretraining());
        d.decisions = 10;
        assert!((d.epsilon() - 0.3).abs() < 1e-12);
        d.decisions = 60; // half-way: 0.3 + (0.1 - 0.3) · 0.5 = 0.2
        assert!((d.epsilon() - 0.2).abs() < 1e-12);
        d.decisions = 500;
        assert_eq!(d.epsilon(), 0.1);
    }

    /// The TD target by hand on a one-transition ring: a net with zero hidden
    /// weights outputs its output bias, so Q(s) = Q_target(s') = bias.
    /// With bias (1, 2, 3), mask' (true, false, true), r = 0.5, γ = 0.8:
    /// target = 0.5 + 0.8 · max(1, 3) = 2.9; the taken action 0 has Q = 1, so
    /// the loss is (1 - 2.9)² = 3.61 and the bias moves by
    /// lr · 2 (1 - 2.9) = -0.38 · lr · (-1) → 1 + 0.1 · 3.8 = 1.38.
    #[test]
    fn td_step_by_hand() {
        let p = LdwpParams { hidden: vec![4], batch: 1, replay: 1, lr: 0.1, gamma: 0.8, ..Default::default() };
        let mut d = small(p);
        for l in &mut d.q.layers {
            l.w.fill(0.0);
            l.b.fill(0.0);
        }
        d.q.layers[1].b = ndarray::array![1.0, 2.0, 3.0];
        let n = d.q.n_in();
        let loss = d
            .observe(Transition { s: vec![0.0; n], a: 0, r: 0.5, s2: vec![0.0; n], mask2: vec![true, false, true] })
            .unwrap();
        assert!((loss - 3.61).abs() < 1e-12, "{loss}");
        assert!((d.q.layers[1].b[0] - 1.38).abs() < 1e-12, "{}", d.q.layers[1].b[0]);
        assert_eq!(d.q.layers[1].b[1], 2.0);
        assert_eq!(d.updates, 1);
    }

    /// A two-armed bandit in a fixed state: action 1 pays 1, action 0 pays 0,
    /// γ = 0. After training, Q(1) ≈ 1 > Q(0) ≈ 0 and greedy picks 1.
    #[test]
    fn learns_a_bandit() {
        let p = LdwpParams {
            hidden: vec![16, 8],
            lr: 0.05,
            gamma: 0.0,
            pretrain: 0,
            epsilon_start: 1.0,
            epsilon_end: 1.0,
            ..Default::default()
        };
        let mut d = Dqn::new(p, 2, vec![], 3);
        let s = vec![0.5; d.q.n_in()];
        for _ in 0..400 {
            let a = d.act(&s, &[true, true], true).unwrap();
            d.observe(Transition { s: s.clone(), a, r: a as f64, s2: s.clone(), mask2: vec![true, true] });
        }
        let q = d.q_values(&s);
        assert!((q[1] - 1.0).abs() < 0.05 && q[0].abs() < 0.05, "{q:?}");
        assert_eq!(d.greedy(&s, &[true, true]), Some(1));
        assert_eq!(d.diverged, 0);
    }

    #[test]
    fn same_seed_same_agent_and_transfer_keeps_hidden_layer() {
        let a = Dqn::new(LdwpParams::default(), 4, vec!["m".into()], 7);
        let b = Dqn::new(LdwpParams::default(), 4, vec!["m".into()], 7);
        assert_eq!(a, b);
        assert_eq!(a.q.sizes(), vec![1 + JOB_EXTRA + PER_NODE * 4, 256, 128, 4]);
        let t = a.transfer(11, 9);
        assert_eq!(t.q.sizes(), vec![1 + JOB_EXTRA + PER_NODE * 11, 256, 128, 11]);
        assert_eq!(t.q.layers[1], a.q.layers[1]);
        assert_eq!(t.q.layers[0].w.dim(), (1 + JOB_EXTRA + PER_NODE * 11, 256));
        assert_eq!(t.q.layers[2].w.dim(), (128, 11));
    }

    #[test]
    fn params_are_checked_by_option_name() {
        assert!(LdwpParams::default().validate().is_ok());
        let e = LdwpParams { lr: 0.0, ..Default::default() }.validate().unwrap_err();
        assert!(e.contains("--ldwp-lr"), "{e}");
        let e = LdwpParams { replay: 5, ..Default::default() }.validate().unwrap_err();
        assert!(e.contains("--ldwp-replay"), "{e}");
        let e = LdwpParams { gamma: 1.5, ..Default::default() }.validate().unwrap_err();
        assert!(e.contains("--ldwp-gamma"), "{e}");
    }

    fn node(i: u32, feasible: bool, free: u32, q: u32, backlog_gpu_s: f64, run_s: f64) -> NodeLoad<'static> {
        NodeLoad {
            node: crate::ids::NodeId(i),
            feasible,
            gpu_type: "K80",
            gpus: 4,
            gpus_free: free,
            gpu_mem_mib: 12000,
            queue_len: q,
            queued_gpus: q,
            queued_gpu_s: backlog_gpu_s,
            running_gpu_s: 0.0,
            gpu_util: f64::from(4 - free) / 4.0,
            sm_util: 0.25,
            gpu_mem_util: 0.5,
            job_rate: if feasible { 1.0 } else { 0.0 },
            job_run_s: if feasible { run_s } else { f64::INFINITY },
            cpu_util: 0.375,
            uplink_mb_s: 1000.0,
            downlink_mb_s: 3000.0,
        }
    }

    fn with_dispatch<R>(nodes: &[NodeLoad<'_>], f: impl FnOnce(&Dispatch<'_>) -> R) -> R {
        let cluster =
            crate::cluster::Cluster::new(crate::cluster::ClusterSpec::uniform("2x4", 2, 4, "K80", 12000)).unwrap();
        let spec = JobSpec {
            id: JobId(0),
            name: "j".into(),
            submit: SimTime::from_secs(0),
            duration_ms: 3_600_000,
            gpus: 2,
            vc: crate::ids::VcId(0),
            recorded_shape: false,
            line: 0,
            recorded_split: vec![2].into(),
            task: None,
            extra: Some(Box::new(crate::job::JobExtra {
                model: Some("b".into()),
                local_bsz: Some(32),
                ..Default::default()
            })),
        };
        let jobs = crate::job::JobTable::new(vec![spec]);
        let view = View { now: SimTime::from_secs(10), cluster: &cluster, jobs: &jobs };
        let d = Dispatch { now: view.now, job: JobId(0), spec: jobs.spec(JobId(0)), nodes, view: &view };
        f(&d)
    }

    /// The observation layout by hand: vocabulary (a, b), job of model b,
    /// batch 32, 2 GPUs, on 2 nodes of 4 GPUs.
    #[test]
    fn encode_by_hand() {
        let nodes = [node(0, true, 4, 0, 0.0, 3600.0), node(1, false, 1, 3, 4.0 * 7200.0, 0.0)];
        let vocab = vocab_index(&["a".to_string(), "b".to_string()]);
        let x = with_dispatch(&nodes, |d| encode(d, &vocab, NodeInputs::Zero));
        let h = |s: f64| (s / 3600.0).ln_1p() / 1001f64.ln();
        #[rustfmt::skip]
        let want = [
            0.0, 1.0,                              // one-hot: model b
            33f64.ln() / 1025f64.ln(), 0.5, h(3600.0), // batch, 2 of 4 GPUs, fastest run 1 h
            // node 0: CPU, GPU util, host mem, GPU mem, up, down | feasible, SM, free, queue, backlog, run
            0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.25, 1.0, 0.0, 0.0, h(3600.0),
            // node 1: 3 of 4 held; queue 3 -> 3/4; backlog 4 × 7200 GPU-s / 4 GPUs = 7200 s; infeasible
            0.0, 0.75, 0.0, 0.5, 0.0, 0.0, 0.0, 0.25, 0.25, 0.75, h(7200.0), 0.0,
        ];
        assert_eq!(x.len(), input_width(2, 2));
        for (i, (a, b)) in x.iter().zip(want).enumerate() {
            assert!((a - b).abs() < 1e-15, "input {i}: {a} vs {b}");
        }
    }

    /// The load-model inputs by hand (the nodes of `encode_by_hand`, CPU
    /// 0.375, uplink 1,000 MB/s, downlink 3,000 MB/s): CPU as given, uplink
    /// q = 1 → 1/2, downlink q = 3 → 3/4; host memory stays 0; every other
    /// input equals the zero encoding's.
    #[test]
    fn encode_load_model_by_hand() {
        let nodes = [node(0, true, 4, 0, 0.0, 3600.0), node(1, false, 1, 3, 4.0 * 7200.0, 0.0)];
        let vocab = vocab_index(&["a".to_string(), "b".to_string()]);
        let zero = with_dispatch(&nodes, |d| encode(d, &vocab, NodeInputs::Zero));
        let x = with_dispatch(&nodes, |d| encode(d, &vocab, NodeInputs::LoadModel));
        for k in 0..2 {
            let o = 2 + JOB_EXTRA + PER_NODE * k;
            assert_eq!(zero[o..o + 6].iter().filter(|&&v| v == 0.0).count(), if k == 0 { 5 } else { 4 });
            assert_eq!([x[o], x[o + 2], x[o + 4], x[o + 5]], [0.375, 0.0, 0.5, 0.75], "node {k}");
            for i in [1, 3, 6, 7, 8, 9, 10, 11] {
                assert_eq!(x[o + i], zero[o + i], "node {k} input {i}");
            }
        }
        // The option is not written when zero, so saved models and
        // manifests of default runs keep their bytes.
        let json = serde_json::to_string(&LdwpParams::default()).unwrap();
        assert!(!json.contains("node_inputs"), "{json}");
        let p = LdwpParams { node_inputs: NodeInputs::LoadModel, ..Default::default() };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""node_inputs":"load-model""#), "{json}");
        assert_eq!(serde_json::from_str::<LdwpParams>(&json).unwrap(), p);
    }

    /// Pre-training follows min-ECT: node 0's ECT is 0 / 4 + 7,200 = 7,200 s,
    /// node 1's (queued 3,600 GPU-s) / 4 GPUs + 3,600 = 4,500 s, so node 1 every
    /// time (the snapshots do not change); a frozen agent whose output bias prefers node 0
    /// (other weights 0) takes node 0, and never an infeasible node.
    #[test]
    fn selector_pretrains_on_min_ect_and_frozen_is_greedy_masked() {
        let nodes = [node(0, true, 4, 0, 0.0, 7200.0), node(1, true, 0, 1, 3600.0, 3600.0)];
        let p = LdwpParams { hidden: vec![4], pretrain: 5, ..Default::default() };
        let agent = Arc::new(Mutex::new(Dqn::new(p, 2, vec!["a".into(), "b".into()], 1)));
        let mut sel = LdwpSelector::new(LdwpMode::Online, agent.clone(), 8);
        let picks: Vec<usize> = (0..3).map(|_| with_dispatch(&nodes, |d| sel.select(d))).collect();
        assert_eq!(picks, vec![1, 1, 1]);
        assert_eq!(agent.lock().unwrap().decisions, 3);
        assert!(sel.curve.lines().nth(1).unwrap().contains(",pretrain,1,"), "{}", sel.curve);
        let mut frozen = Dqn::new(LdwpParams { hidden: vec![4], ..Default::default() }, 2, vec![], 1);
        for l in &mut frozen.q.layers {
            l.w.fill(0.0);
        }
        frozen.q.layers[1].b = ndarray::array![1.0, 0.0];
        let mut sel = LdwpSelector::new(LdwpMode::Frozen, Arc::new(Mutex::new(frozen)), 8);
        assert_eq!(with_dispatch(&nodes, |d| sel.select(d)), 0);
        let masked = [node(0, false, 4, 0, 0.0, 7200.0), node(1, true, 0, 1, 3600.0, 3600.0)];
        assert_eq!(with_dispatch(&masked, |d| sel.select(d)), 1);
    }

    #[test]
    fn squash_is_bounded() {
        assert_eq!(squash_s(0.0), 0.0);
        assert_eq!(squash_s(f64::INFINITY), 1.0);
        // 1 h: ln 2 / ln 1001 = 0.10034
        assert!((squash_s(3600.0) - 2f64.ln() / 1001f64.ln()).abs() < 1e-15);
        assert_eq!(squash_s(1e12), 1.0);
    }
}
