//! Node dispatch: on each arrival a [`NodeSelector`] picks one node for the
//! job, and each node runs its own queue FIFO on its own GPUs (LDWP's
//! cluster scheduler and node schedulers, Zhang, Geng, Ma, TPDS 2021;
//! `specs/policies.md` §5.1-5.2, §5.5).
//!
//! The paper's cluster scheduler sends every task of a stream of mutually
//! independent tasks to one worker node, whose node scheduler queues and
//! runs it. Here:
//!
//! - **Feasible nodes** (the selector's mask): nodes of the job's partition
//!   with at least as many GPUs as the job asks, of a GPU type the job
//!   allows, whose GPU memory holds the job's memory need (the memory
//!   model's `gpu_mem_mib`, [`crate::cluster::request::Request::fits_node`]).
//! - **Node queues** (our reading; the paper's node scheduler orders DAG
//!   subtasks, which dlsched's jobs do not have): each node's queue is FIFO
//!   in dispatch order; its head starts on the node's lowest-indexed free
//!   GPUs when enough are free (consolidated inside the node). With
//!   `backfill`, the earliest queued job of that node that fits starts when
//!   the head does not (node-local greedy backfill, no reservation).
//! - **Jobs that fit no single node** (more GPUs than any node of their
//!   partition, or no node with their memory or type): our documented
//!   fallback. They wait in one partition-wide FIFO queue, tried after the
//!   node queues at every scheduling pass, and are placed by
//!   [`super::placement::Consolidate`] over several nodes. They are counted
//!   in the summary (`dispatch_multi_node_jobs`); the selector never sees
//!   them. (A job the consolidate rule cannot place on the empty partition
//!   is skipped at admission, as for every policy.)
//! - **Predictions**: the job's rate on a node is the run's rate model
//!   (a fresh copy, [`super::build::BuildContext::rate_model`]) evaluated on
//!   the node's first `gpus` GPUs; its predicted run time is the trace
//!   duration / that rate, s.
//!
//! The three baselines of the paper (§5.4; `specs/policies.md` §6) are
//! here: [`RandomNode`] (`random-node`), [`MinEct`] (`min-ect`) and
//! [`LoadGreedy`] (`load-greedy`), each defined exactly on its type.
//!
//! Metrics (the paper's, §5.4; summary `policy_metrics`, node-dispatch runs
//! only): `throughput_jobs_per_hour` (completed jobs / (last completion −
//! first arrival), per hour), `throughput_steady_jobs_per_hour` (completions
//! inside the steady window, from the arrival of job ⌈n/10⌉ (1-based, in
//! arrival order) to the last arrival, / that window, per hour; our
//! reading), `load_balance_degree` = 1 − std_i(Load_i) (population standard
//! deviation over the nodes of the cluster) with Load_i the mean of node
//! i's time-averaged GPU utilisation (GPUs held / GPUs) and time-averaged
//! GPU-memory utilisation (memory-model need of its jobs / its GPU memory),
//! both over [first arrival, last completion]. The paper's Load_i also
//! averages CPU and host-memory utilisation, which dlsched does not model
//! (our reading: those two terms dropped). `load_balance_degree_gpu` is the
//! same with Load_i = GPU utilisation alone. `gpu_utilization_steady`: GPU-s
//! held inside the steady window / (the cluster's GPUs × the window), the
//! utilisation while the stream arrives (the run's `gpu_utilization` also
//! counts the drain after the last arrival, which heavy-tailed durations
//! make long).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::Rng;

use super::placement::Placement;
use super::queue::request;
use super::{Decision, Policy, View};
use crate::cluster::Cluster;
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::{JobSpec, JobTable};
use crate::profile::RateModel;
use crate::profile::resources::{CORES_PER_GPU, SmUtil};
use crate::time::SimTime;

/// A read-only snapshot of one node at a dispatch decision, as the
/// selector sees it. Every node of the job's partition gets one, in node
/// index order; `feasible` is the mask.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeLoad<'a> {
    /// The node.
    pub node: NodeId,
    /// True if the job may be dispatched here (module docs: GPU count,
    /// type, memory). The selector must pick a feasible node.
    pub feasible: bool,
    /// The node's GPU type (e.g. `K80`).
    pub gpu_type: &'a str,
    /// GPUs in the node.
    pub gpus: u32,
    /// GPUs free now (not held by a running job).
    pub gpus_free: u32,
    /// Memory of one of its GPUs, MiB.
    pub gpu_mem_mib: u64,
    /// Jobs dispatched here and not started yet.
    pub queue_len: u32,
    /// GPUs asked by those queued jobs, Σ GPUs.
    pub queued_gpus: u32,
    /// Predicted GPU-work of those queued jobs, GPU-s: Σ predicted run time
    /// on this node (s) × GPUs.
    pub queued_gpu_s: f64,
    /// Predicted GPU-work still to do by the jobs running here, GPU-s:
    /// Σ max(0, predicted end − now) (s) × GPUs, the predicted end being
    /// the start + the predicted run time on this node.
    pub running_gpu_s: f64,
    /// GPU utilisation now: GPUs held by running jobs / GPUs, in [0, 1].
    pub gpu_util: f64,
    /// SM-utilisation proxy now: Σ over running jobs of
    /// [`SmUtil::job`] (on this node's type) × its GPUs, / GPUs, in [0, 1]
    /// (idle GPUs count 0; `crate::profile::resources` documents the proxy).
    pub sm_util: f64,
    /// GPU-memory utilisation now: Σ over running jobs of the memory
    /// model's need (MiB, 0 when the job has none) × GPUs, / (GPUs × MiB per
    /// GPU), in [0, 1].
    pub gpu_mem_util: f64,
    /// The job's predicted rate here (the run's rate model on this node's
    /// first `gpus` GPUs; 1 = its trace speed). 0 on an infeasible node.
    pub job_rate: f64,
    /// The job's predicted run time here, s (trace duration / `job_rate`);
    /// infinite on an infeasible node.
    pub job_run_s: f64,
    /// CPU utilisation now under the host-load model (ours,
    /// [`crate::profile::resources::HostLoad`]): Σ over running jobs of
    /// their CPU cores on this node / (`CORES_PER_GPU` × GPUs), in [0, 1].
    pub cpu_util: f64,
    /// Uplink rate, MB/s, under the host-load model (ours,
    /// [`crate::profile::resources::HostLoad`]): Σ over the jobs running
    /// here of their gradient all-reduce traffic. A dispatched job runs
    /// inside one node, so this is traffic on the node's interconnect, not
    /// its NIC; dlsched models no input streaming (the paper's
    /// uplink/downlink rates of streamed video have no counterpart).
    pub uplink_mb_s: f64,
    /// Downlink rate, MB/s: as `uplink_mb_s` (a ring receives what it sends).
    pub downlink_mb_s: f64,
}

/// One dispatch decision's input: the job, every node of its partition, and
/// the whole view.
pub struct Dispatch<'a> {
    /// The current time (the job's arrival).
    pub now: SimTime,
    /// The job.
    pub job: JobId,
    /// Its spec (model, per-GPU batch, GPUs, trace duration, memory need).
    pub spec: &'a JobSpec,
    /// One snapshot per node of the job's partition, in node index order;
    /// at least one is feasible.
    pub nodes: &'a [NodeLoad<'a>],
    /// The whole read-only view (cluster, jobs).
    pub view: &'a View<'a>,
}

/// A job that completed, for the selector's feedback (LDWP's reward).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The job.
    pub job: JobId,
    /// The node it was dispatched to.
    pub node: NodeId,
    /// Its arrival time.
    pub submit: SimTime,
    /// When it started on the node.
    pub start: SimTime,
    /// Now: when it completed.
    pub now: SimTime,
}

/// Picks a node for each arriving job. Implemented by the baselines here
/// and by LDWP's DQN (`src/policy/ldwp.rs`).
pub trait NodeSelector: Send {
    /// The selector's name, which is the policy's name in outputs.
    fn name(&self) -> String;

    /// The index into `d.nodes` of the chosen node, which must be feasible.
    /// (An infeasible or out-of-range answer is replaced by the first
    /// feasible node and counted as `dispatch_invalid_choices`.)
    fn select(&mut self, d: &Dispatch<'_>) -> usize;

    /// A job this selector dispatched completed (called after the policy
    /// updated its node state). Nothing by default.
    fn on_completion(&mut self, _c: &Completion, _view: &View<'_>) {}

    /// Named figures for the run summary; none by default.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Extra files for the run directory; none by default.
    fn files(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// `random-node`: a node uniformly at random among the feasible ones, from
/// the run's `policy.random-node` stream (the paper's Random, §5.4).
pub struct RandomNode {
    rng: crate::rng::Stream,
}

impl RandomNode {
    /// The selector for a run of master seed `seed`.
    pub fn new(seed: u64) -> Self {
        RandomNode { rng: crate::rng::stream(seed, "policy.random-node") }
    }
}

impl NodeSelector for RandomNode {
    fn name(&self) -> String {
        "random-node".into()
    }

    fn select(&mut self, d: &Dispatch<'_>) -> usize {
        let feasible: Vec<usize> = (0..d.nodes.len()).filter(|&i| d.nodes[i].feasible).collect();
        feasible[self.rng.gen_range(0..feasible.len())]
    }
}

/// `min-ect`: minimum expected completion time (the paper's ETC/MCT, §5.4;
/// Braun et al., JPDC 2001). Node n's expected completion time for the job
/// is its *ready time* plus the job's predicted run time there:
///
/// `ECT_n = (running_gpu_s_n + queued_gpu_s_n) / gpus_n + job_run_s_n`
///
/// (s after now; the node's predicted outstanding GPU-work spread over its
/// GPUs is the classic machine-ready time of the heuristic, our reading for
/// multi-GPU nodes). The feasible node of least ECT wins; ties go to the
/// lowest node index.
#[derive(Clone, Copy, Debug, Default)]
pub struct MinEct;

impl MinEct {
    /// Node `n`'s expected completion time for the job, s after now.
    pub fn ect_s(n: &NodeLoad<'_>) -> f64 {
        (n.running_gpu_s + n.queued_gpu_s) / f64::from(n.gpus) + n.job_run_s
    }
}

impl NodeSelector for MinEct {
    fn name(&self) -> String {
        "min-ect".into()
    }

    fn select(&mut self, d: &Dispatch<'_>) -> usize {
        best(d.nodes, |n| -MinEct::ect_s(n))
    }
}

/// `load-greedy`: a load-aware greedy after PATS (the paper's third
/// baseline, §5.4: "relative CPU/GPU performance + load"; the exact PATS
/// rule is not public, so this is our reading on GPUs). Node n scores
///
/// `score_n = (job_rate_n / max_m job_rate_m) / (1 + load_n)`,
/// `load_n = (GPUs held on n + GPUs asked by the jobs queued on n) / gpus_n`
///
/// (the max over feasible nodes m): the relative speed of the job there,
/// discounted by the node's load (its queue length counted in GPUs). The
/// feasible node of highest score wins; ties go to the lowest node index.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadGreedy;

impl LoadGreedy {
    /// Node `n`'s score given the best rate `best_rate` over feasible nodes.
    pub fn score(n: &NodeLoad<'_>, best_rate: f64) -> f64 {
        let held = f64::from(n.gpus - n.gpus_free);
        let load = (held + f64::from(n.queued_gpus)) / f64::from(n.gpus);
        (n.job_rate / best_rate) / (1.0 + load)
    }
}

impl NodeSelector for LoadGreedy {
    fn name(&self) -> String {
        "load-greedy".into()
    }

    fn select(&mut self, d: &Dispatch<'_>) -> usize {
        let best_rate = d.nodes.iter().filter(|n| n.feasible).map(|n| n.job_rate).fold(0.0, f64::max);
        best(d.nodes, |n| LoadGreedy::score(n, best_rate))
    }
}

/// The index of the feasible node of highest `key`, the lowest index among
/// equals. Panics never: the caller guarantees one feasible node.
fn best(nodes: &[NodeLoad<'_>], key: impl Fn(&NodeLoad<'_>) -> f64) -> usize {
    let mut best: Option<(usize, f64)> = None;
    for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.feasible) {
        let k = key(n);
        if best.is_none_or(|(_, b)| k > b) {
            best = Some((i, k));
        }
    }
    best.map_or(0, |(i, _)| i)
}

/// A job running on a node, as the policy predicted it.
#[derive(Clone, Debug)]
struct Running {
    /// GPUs held per node slot (one entry for a dispatched job).
    per_node: Vec<(usize, u32)>,
    node: usize,
    gpus: u32,
    start: SimTime,
    /// Predicted end, ms.
    pred_end_ms: f64,
    mem_mib: u64,
    /// Its host load per GPU held (CPU cores, MB/s), on its first node's type.
    host_per_gpu: (f64, f64),
}

/// A job waiting in a node's queue.
#[derive(Clone, Copy, Debug)]
struct Queued {
    job: JobId,
    gpus: u32,
    /// Predicted run time on the node, s.
    run_s: f64,
}

/// One node's state in the policy.
#[derive(Clone, Debug, Default)]
struct NodeState {
    queue: VecDeque<Queued>,
    queued_gpu_s: f64,
    queued_gpus: u32,
    held: u32,
    mem_used_mib: u64,
    sm_sum: f64,
    /// Σ CPU cores and Σ all-reduce MB/s of the jobs running here (host-load model).
    cpu_cores: f64,
    comm_mb_s: f64,
    running: BTreeSet<JobId>,
    /// Time integrals since the first arrival: GPUs held × ms, MiB × ms.
    busy_gpu_ms: f64,
    mem_mib_ms: f64,
    last_ms: u64,
    /// The node's GPUs and MiB per GPU.
    gpus: u32,
    gpu_mem_mib: u64,
}

impl NodeState {
    fn advance(&mut self, now_ms: u64) {
        let dt = now_ms.saturating_sub(self.last_ms) as f64;
        self.busy_gpu_ms += f64::from(self.held) * dt;
        self.mem_mib_ms += self.mem_used_mib as f64 * dt;
        self.last_ms = self.last_ms.max(now_ms);
    }
}

/// The node-dispatch policy (module docs): a [`NodeSelector`] picks the
/// node, each node runs its queue FIFO.
pub struct NodeDispatch {
    selector: Box<dyn NodeSelector>,
    rate: Box<dyn RateModel>,
    sm: SmUtil,
    backfill: bool,
    nodes: Vec<NodeState>,
    running: BTreeMap<JobId, Running>,
    /// Node slots whose queue may have a job to start.
    dirty: BTreeSet<usize>,
    /// Jobs that fit no single node, FIFO per partition (module docs).
    spill: Vec<VecDeque<JobId>>,
    consolidate: super::placement::Consolidate,
    scratch: Vec<GpuId>,
    arrivals_ms: Vec<u64>,
    completions_ms: Vec<u64>,
    multi_node_jobs: u64,
    invalid_choices: u64,
}

impl NodeDispatch {
    /// The policy over `cluster` with `selector`, predicting with `rate`
    /// (a copy of the run's rate model), the SM proxy over `sm`, and
    /// node-local backfill if `backfill`.
    pub fn new(
        selector: Box<dyn NodeSelector>,
        cluster: &Cluster,
        rate: Box<dyn RateModel>,
        sm: SmUtil,
        backfill: bool,
    ) -> Self {
        NodeDispatch {
            selector,
            rate,
            sm,
            backfill,
            nodes: (0..cluster.num_nodes())
                .map(|n| {
                    let ns = cluster.node(NodeId(n as u32));
                    NodeState { gpus: ns.gpus, gpu_mem_mib: ns.gpu_mem_mib, ..NodeState::default() }
                })
                .collect(),
            running: BTreeMap::new(),
            dirty: BTreeSet::new(),
            spill: vec![VecDeque::new(); cluster.partitions().len().max(1)],
            consolidate: super::placement::Consolidate,
            scratch: Vec::new(),
            arrivals_ms: Vec::new(),
            completions_ms: Vec::new(),
            multi_node_jobs: 0,
            invalid_choices: 0,
        }
    }

    /// The selector (e.g. to read a learner's state after a run).
    pub fn selector(&self) -> &dyn NodeSelector {
        self.selector.as_ref()
    }

    /// The job's predicted rate and run time (s) on `node`.
    fn predict(&self, spec: &JobSpec, node: NodeId, cluster: &Cluster) -> (f64, f64) {
        let gpus: Vec<GpuId> = cluster.node_gpus(node).take(spec.gpus as usize).collect();
        let r = self.rate.rate(spec, &gpus, cluster);
        let r = if r.is_finite() && r > 0.0 { r } else { f64::MIN_POSITIVE };
        (r, spec.duration_ms as f64 / 1000.0 / r)
    }

    /// The snapshots of every node of `job`'s partition.
    fn snapshot<'v>(&self, job: JobId, view: &View<'v>) -> Vec<NodeLoad<'v>> {
        let cluster = view.cluster;
        let spec = view.jobs.spec(job);
        let req = request(view, job);
        let now_ms = view.now.as_ms() as f64;
        cluster
            .partition(spec.vc)
            .nodes
            .iter()
            .map(|&node| {
                let ns = cluster.node(node);
                let st = &self.nodes[node.index()];
                let feasible = ns.gpus >= spec.gpus && spec.gpus > 0 && req.fits_node(cluster, node);
                let (job_rate, job_run_s) =
                    if feasible { self.predict(spec, node, cluster) } else { (0.0, f64::INFINITY) };
                let running_gpu_s = st
                    .running
                    .iter()
                    .map(|j| {
                        let r = &self.running[j];
                        (r.pred_end_ms - now_ms).max(0.0) / 1000.0 * f64::from(r.gpus)
                    })
                    .sum();
                let g = f64::from(ns.gpus);
                NodeLoad {
                    node,
                    feasible,
                    gpu_type: &ns.gpu_type,
                    gpus: ns.gpus,
                    gpus_free: cluster.node_free(node),
                    gpu_mem_mib: ns.gpu_mem_mib,
                    queue_len: st.queue.len() as u32,
                    queued_gpus: st.queued_gpus,
                    queued_gpu_s: st.queued_gpu_s,
                    running_gpu_s,
                    gpu_util: f64::from(st.held) / g,
                    sm_util: (st.sm_sum / g).clamp(0.0, 1.0),
                    gpu_mem_util: if ns.gpu_mem_mib == 0 {
                        0.0
                    } else {
                        (st.mem_used_mib as f64 / (g * ns.gpu_mem_mib as f64)).clamp(0.0, 1.0)
                    },
                    job_rate,
                    job_run_s,
                    cpu_util: (st.cpu_cores / (CORES_PER_GPU * g)).clamp(0.0, 1.0),
                    uplink_mb_s: st.comm_mb_s.max(0.0),
                    downlink_mb_s: st.comm_mb_s.max(0.0),
                }
            })
            .collect()
    }

    /// Starts `job` (queued on node slot `slot`, or a spilled job when
    /// `slot` is `None`) on `scratch`'s GPUs: records it as running.
    fn start(&mut self, job: JobId, slot: Option<usize>, run_s: f64, view: &View<'_>) {
        let spec = view.jobs.spec(job);
        let now = view.now.as_ms();
        let mut per: BTreeMap<usize, u32> = BTreeMap::new();
        for &g in &self.scratch {
            *per.entry(view.cluster.node_of(g).index()).or_default() += 1;
        }
        let per_node: Vec<(usize, u32)> = per.into_iter().collect();
        let h = self.sm.host_load(spec, &view.cluster.node(NodeId(per_node[0].0 as u32)).gpu_type);
        let g = f64::from(spec.gpus.max(1));
        let host_per_gpu = (h.cpu_cores / g, h.comm_mb_s / g);
        for &(n, on_n) in &per_node {
            let st = &mut self.nodes[n];
            st.advance(now);
            st.held += on_n;
            st.mem_used_mib += spec.gpu_mem_mib().unwrap_or(0) * u64::from(on_n);
            st.sm_sum += self.sm.job(spec, &view.cluster.node(NodeId(n as u32)).gpu_type) * f64::from(on_n);
            st.cpu_cores += host_per_gpu.0 * f64::from(on_n);
            st.comm_mb_s += host_per_gpu.1 * f64::from(on_n);
        }
        // A spilled job's state is kept on its first node for the
        // completion bookkeeping; its per-node shares are recomputed there.
        let node = slot.unwrap_or(per_node[0].0);
        self.nodes[node].running.insert(job);
        self.running.insert(
            job,
            Running {
                per_node,
                node,
                gpus: spec.gpus,
                start: view.now,
                pred_end_ms: now as f64 + run_s * 1000.0,
                mem_mib: spec.gpu_mem_mib().unwrap_or(0),
                host_per_gpu,
            },
        );
    }

    /// The next job to start from node slot `slot`'s queue, with its
    /// position, when its GPUs are free (GPUs in `scratch`).
    fn next_on(&mut self, slot: usize, view: &View<'_>) -> Option<usize> {
        let node = NodeId(slot as u32);
        let free = view.cluster.node_free(node);
        let q = &self.nodes[slot].queue;
        let limit = if self.backfill { q.len() } else { q.len().min(1) };
        let pos = (0..limit).find(|&i| q[i].gpus <= free)?;
        self.scratch.clear();
        view.cluster.take_free_gpus(node, q[pos].gpus, &mut self.scratch).then_some(pos)
    }
}

impl Policy for NodeDispatch {
    fn name(&self) -> String {
        self.selector.name()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        self.arrivals_ms.push(view.now.as_ms());
        let spec = view.jobs.spec(job);
        let nodes = self.snapshot(job, view);
        let Some(first) = nodes.iter().position(|n| n.feasible) else {
            self.multi_node_jobs += 1;
            self.spill[spec.vc.index()].push_back(job);
            return;
        };
        let d = Dispatch { now: view.now, job, spec, nodes: &nodes, view };
        let mut pick = self.selector.select(&d);
        if nodes.get(pick).is_none_or(|n| !n.feasible) {
            self.invalid_choices += 1;
            pick = first;
        }
        let chosen = &nodes[pick];
        let slot = chosen.node.index();
        let run_s = chosen.job_run_s;
        let st = &mut self.nodes[slot];
        st.queue.push_back(Queued { job, gpus: spec.gpus, run_s });
        st.queued_gpu_s += run_s * f64::from(spec.gpus);
        st.queued_gpus += spec.gpus;
        self.dirty.insert(slot);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        let now = view.now.as_ms();
        self.completions_ms.push(now);
        let Some(r) = self.running.remove(&job) else { return };
        self.nodes[r.node].running.remove(&job);
        // Release on every node the job held (one for a dispatched job).
        let spec = view.jobs.spec(job);
        for &(n, k) in &r.per_node {
            let st = &mut self.nodes[n];
            st.advance(now);
            st.held = st.held.saturating_sub(k);
            st.mem_used_mib = st.mem_used_mib.saturating_sub(r.mem_mib * u64::from(k));
            let sm = self.sm.job(spec, &view.cluster.node(NodeId(n as u32)).gpu_type);
            st.sm_sum = (st.sm_sum - sm * f64::from(k)).max(0.0);
            st.cpu_cores = (st.cpu_cores - r.host_per_gpu.0 * f64::from(k)).max(0.0);
            st.comm_mb_s = (st.comm_mb_s - r.host_per_gpu.1 * f64::from(k)).max(0.0);
            if st.held == 0 {
                st.sm_sum = 0.0;
                st.cpu_cores = 0.0;
                st.comm_mb_s = 0.0;
            }
            self.dirty.insert(n);
        }
        let c = Completion { job, node: NodeId(r.node as u32), submit: spec.submit, start: r.start, now: view.now };
        self.selector.on_completion(&c, view);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        while let Some(&slot) = self.dirty.first() {
            if let Some(pos) = self.next_on(slot, view) {
                let st = &mut self.nodes[slot];
                let q = st.queue.remove(pos).expect("position in range");
                st.queued_gpu_s = (st.queued_gpu_s - q.run_s * f64::from(q.gpus)).max(0.0);
                if st.queue.is_empty() {
                    st.queued_gpu_s = 0.0;
                }
                st.queued_gpus -= q.gpus;
                self.start(q.job, Some(slot), q.run_s, view);
                return Decision::Launch { job: q.job, gpus: std::mem::take(&mut self.scratch) };
            }
            self.dirty.remove(&slot);
        }
        for vc in 0..self.spill.len() {
            let Some(&job) = self.spill[vc].front() else { continue };
            self.scratch.clear();
            if self.consolidate.place(view.cluster, request(view, job), &mut self.scratch) {
                self.spill[vc].pop_front();
                let spec = view.jobs.spec(job);
                let (_, run_s) = self.predict(spec, view.cluster.node_of(self.scratch[0]), view.cluster);
                self.start(job, None, run_s, view);
                return Decision::Launch { job, gpus: std::mem::take(&mut self.scratch) };
            }
        }
        Decision::Wait
    }

    fn metrics(&self, jobs: &JobTable) -> Vec<(&'static str, f64)> {
        let mut m = vec![
            ("dispatch_multi_node_jobs", self.multi_node_jobs as f64),
            ("dispatch_invalid_choices", self.invalid_choices as f64),
        ];
        m.extend(dispatch_metrics(&self.arrivals_ms, &self.completions_ms, &self.nodes));
        if let Some((from, to)) = steady_window(&self.arrivals_ms).filter(|(f, t)| t > f) {
            // GPU-ms held inside the window by every job that started
            // (completed, or still running at the end until `to`).
            let mut busy = 0.0;
            for (spec, st) in jobs.iter() {
                let (s, e) = match st {
                    crate::job::JobState::Completed(d) => (d.start.as_ms(), d.end.as_ms()),
                    crate::job::JobState::Running(_) => match self.running.get(&spec.id) {
                        Some(r) => (r.start.as_ms(), to),
                        None => continue,
                    },
                    _ => continue,
                };
                busy += f64::from(spec.gpus) * e.min(to).saturating_sub(s.max(from)) as f64;
            }
            let gpus: u32 = self.nodes.iter().map(|n| n.gpus).sum();
            m.push(("gpu_utilization_steady", busy / (f64::from(gpus) * (to - from) as f64)));
        }
        m.extend(self.selector.metrics());
        m
    }

    fn files(&self) -> Vec<(&'static str, String)> {
        self.selector.files()
    }
}

/// The throughput and load-balancing figures (module docs) from the arrival
/// and completion times (ms) and the nodes' states.
fn dispatch_metrics(arrivals_ms: &[u64], completions_ms: &[u64], nodes: &[NodeState]) -> Vec<(&'static str, f64)> {
    let (tput, steady) = throughput(arrivals_ms, completions_ms);
    let mut m = vec![("throughput_jobs_per_hour", tput), ("throughput_steady_jobs_per_hour", steady)];
    let (Some(&first), Some(&end)) = (arrivals_ms.iter().min(), completions_ms.iter().max()) else {
        return m;
    };
    let span = end.saturating_sub(first) as f64;
    if span == 0.0 {
        return m;
    }
    // Each node's integrals run to its last change; GPUs still held then
    // (a job unfinished at the end) count on to the last completion.
    let (mut both, mut gpu) = (Vec::new(), Vec::new());
    for st in nodes {
        let mut st = st.clone();
        st.advance(end);
        let g = f64::from(st.gpus);
        let util = st.busy_gpu_ms / (g * span);
        let mem = if st.gpu_mem_mib == 0 { 0.0 } else { st.mem_mib_ms / (g * st.gpu_mem_mib as f64 * span) };
        both.push((util + mem) / 2.0);
        gpu.push(util);
    }
    m.push(("load_balance_degree", load_balance(&both)));
    m.push(("load_balance_degree_gpu", load_balance(&gpu)));
    m
}

/// (throughput over the run, throughput over the steady window), jobs per
/// hour (module docs): completions / (last completion − first arrival);
/// completions at times in [arrival of job ⌈n/10⌉, last arrival] / that
/// window's length. 0 when a window is empty.
pub fn throughput(arrivals_ms: &[u64], completions_ms: &[u64]) -> (f64, f64) {
    let (Some(&first), Some(&last_arr)) = (arrivals_ms.iter().min(), arrivals_ms.iter().max()) else {
        return (0.0, 0.0);
    };
    let last_done = completions_ms.iter().copied().max().unwrap_or(first);
    let per_hour = |n: usize, span_ms: u64| if span_ms == 0 { 0.0 } else { n as f64 * 3_600_000.0 / span_ms as f64 };
    let run = per_hour(completions_ms.len(), last_done.saturating_sub(first));
    let (from, _) = steady_window(arrivals_ms).expect("arrivals are not empty");
    let inside = completions_ms.iter().filter(|&&t| t >= from && t <= last_arr).count();
    (run, per_hour(inside, last_arr - from))
}

/// The steady window, ms: from the arrival of job ⌈n/10⌉ (1-based, in
/// arrival order) to the last arrival; `None` without arrivals.
pub fn steady_window(arrivals_ms: &[u64]) -> Option<(u64, u64)> {
    let mut sorted = arrivals_ms.to_vec();
    sorted.sort_unstable();
    let last = *sorted.last()?;
    Some((sorted[sorted.len().div_ceil(10).max(1) - 1], last))
}

/// `1 − std_i(Load_i)` (population standard deviation over the loads).
pub fn load_balance(loads: &[f64]) -> f64 {
    if loads.is_empty() {
        return 1.0;
    }
    let n = loads.len() as f64;
    let mean = loads.iter().sum::<f64>() / n;
    let var = loads.iter().map(|l| (l - mean) * (l - mean)).sum::<f64>() / n;
    1.0 - var.sqrt()
}

/// Options of the node-dispatch baselines `random-node`, `min-ect` and
/// `load-greedy` (the kind picks the selector); defaults (derived): no
/// backfill.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeDispatchOptions {
    /// Node-local greedy backfill: when a node's queue head does not fit its
    /// free GPUs, the earliest later job of that node's queue that fits
    /// starts. Default false (strict FIFO per node).
    pub backfill: bool,
}

impl super::build::BuildPolicy for NodeDispatchOptions {
    fn build(
        &self,
        kind: &str,
        ctx: &mut super::build::BuildContext<'_>,
    ) -> Result<Box<dyn Policy>, crate::error::RunError> {
        if ctx.tasks {
            return Err(crate::error::ConfigError::other(format!(
                "`{kind}` dispatches fixed-size jobs to nodes; it does not schedule moldable tasks (`--workload genie`)"
            ))
            .into());
        }
        let selector: Box<dyn NodeSelector> = match kind {
            "random-node" => Box::new(RandomNode::new(ctx.seed)),
            "load-greedy" => Box::new(LoadGreedy),
            _ => Box::new(MinEct),
        };
        Ok(Box::new(NodeDispatch::new(selector, ctx.cluster, (ctx.rate_model)(), SmUtil::new(ctx.db()), self.backfill)))
    }
}
