//! Sia (Jayaram Subramanya et al., "Sia: Heterogeneity-aware,
//! goodput-optimized ML-cluster scheduling", SOSP'23): every scheduling
//! round, one configuration (GPU type, nodes, GPUs) or none per
//! work-defined job, chosen by an integer program that maximises the sum of
//! the jobs' normalised goodputs under a fairness power and a restart
//! penalty.
//!
//! The rules are those of the paper's simulator (siasosp23/artifacts @
//! aaf7a0de, `sia-simulator/sia.py`, `cluster.py`, `job.py`,
//! `simulator_config.py`, run as its `run_experiment.sh` runs Sia:
//! `--policy_p_val=-0.5 --mip_lambda_n=1.1 --interval=60
//! --project_throughput --share_max_replicas`); the job-side throughput fit
//! and goodput are Pollux's ([`crate::policy::pollux_goodput`]), one fit per
//! GPU type.
//!
//! # Rules
//!
//! 1. **Rounds.** The policy acts only at multiples of
//!    [`SiaOptions::interval_s`] (default 60 s), the first at one interval,
//!    while jobs are active ([`crate::policy::pollux_sim`]'s ticks).
//! 2. **Configurations** (`populate_valid_configs`): on a GPU type whose
//!    nodes have `G` GPUs, 1, 2, 4, ... GPUs below `G` on one node, then
//!    `k·G` GPUs on `k` whole nodes, `k` up to the type's nodes and at most
//!    64 GPUs (the artifact's `CONFIGS_4GPU`, `CONFIGS_8GPU`).
//! 3. **What each job tells the scheduler** (`Job.update_params`,
//!    `get_sia_multi_job_info`). A running job past its re-scale delay
//!    records `(nodes, GPUs, atomic batch)` with the step times it observes
//!    there ([`ProgressModel::step_times`] on its GPU type) the first time it
//!    runs on it, and refits that type's throughput model; its gradient
//!    statistics (one set for all types) are the model's at its batch and
//!    progress. Its maximum GPUs on a type is `min(max(2 × most GPUs
//!    profiled there, 1), 64, max_batch / min_local)`, and, as with
//!    `--share_max_replicas`, the largest of these over types applies on
//!    every type. `ncf` is rigid on 1 GPU with total batch 32,768; a job
//!    that is not adaptive is rigid on its tuned GPUs and batch.
//! 4. **Goodputs** (`optimize_mip`, `_compute_goodputs_v2`). On a type with
//!    a fit, a configuration's goodput is the job's best goodput there
//!    (Pollux's batch search, total batch at most the job's own
//!    `batch_size`, as the artifact's speedup function caps it). A type
//!    without a fit borrows the first fitted type's goodput on the same GPU
//!    count, times the ratio of the two types' single-GPU throughputs
//!    (`--project_throughput`; the artifact takes the ratio from its
//!    profile tables at the largest single-GPU batch, **ours** from the
//!    progress model's step times at that batch). A job fitted nowhere (it
//!    has not run yet) gets goodput 1 on one GPU of every type and nothing
//!    else. Goodputs are divided by the job's least positive one, values at
//!    most 1e-4 set to 1e-4 (`ZERO_ALLOC_GAIN`). A rigid job's goodput on a
//!    type is its throughput there on its GPUs (the model's step times of
//!    its tuned configuration, an oracle as in the artifact), scaled so the
//!    slowest type gives its GPU count. **Ours**, a control:
//!    [`SiaOptions::type_aware`] false rates every type as the job's first
//!    fitted type (no projection ratio; a rigid job as on its slowest
//!    type), so the program cannot tell GPU types apart.
//! 5. **Restart penalty.** For a job that holds a configuration (it got
//!    one last round), every other configuration is multiplied by `max(age − restarts·R, 0) / (age + R)` (1 while `age <
//!    R`), `R` the application's restart penalty (`get_restart_penalty`:
//!    deepspeech2 25 s, imagenet 250, cifar10 30, bert 120, yolov3 45,
//!    others 30).
//! 6. **Integer program** (`__solve_mip_rescaled`): `A = round(G^p, 2)`,
//!    clipped at [`SiaOptions::clip`]; binary `x[j, c]`, at most one
//!    configuration per job, GPUs used per type at most the type's GPUs,
//!    a job within its re-scale delay kept on its configuration; minimise
//!    (p < 0; maximise for p > 0) `Σ A·x + λ_n·(jobs − Σ x)`.
//!    Solved exactly by `microlp` 0.2 (pure Rust simplex with branch and
//!    bound; the artifact uses CBC with a 0.01 % gap). **Ours**, exact
//!    reductions before the solver: a configuration that cannot improve the
//!    objective (`A ≥ λ_n` when minimising, `A ≤ λ_n` when maximising) and
//!    one dominated on its type (another needs no more GPUs and is no
//!    worse; the one with fewer GPUs, then the earlier, is kept) get no
//!    variable, and jobs with the same candidates and values (no forced
//!    configuration) share integer variables that count how many of them
//!    take each configuration, handed out in job order (symmetric jobs
//!    otherwise make branch and bound explore every permutation). Also
//!    ours, exact: when every `A − λ_n` lies on the 0.01 grid (always with
//!    the defaults), a feasible starting solution (the LP relaxation
//!    rounded down, filled greedily, improved by single and paired moves:
//!    `policy::sia_start`) sets the cutoff "better than the start by at
//!    least 0.01"; the solver then either finds the optimum or proves the
//!    cutoff program infeasible, and the start is optimal. This spares
//!    branch and bound the nodes whose bound ties the optimum (microlp 0.2
//!    prunes only strictly worse nodes); the solver time of Sia's slowest
//!    workloads fell 3x. Ties between optima: the start when it is
//!    optimal, else the solver's; deterministic.
//! 7. **Placement** (ours; the artifact's simulator places by GPU counts
//!    only, and in dlsched a job that changes GPUs restarts). A job whose
//!    configuration is unchanged keeps its GPUs. The others, by GPUs
//!    descending then job order, take on their type: whole free nodes for a
//!    configuration of whole nodes, the free node that fits best for a
//!    smaller one, and otherwise GPUs from the nodes with the most free
//!    GPUs (possible: the program bounds each type's GPUs); a job whose
//!    spread placement the progress model cannot rate gets none this round
//!    (and, in rule 4, a configuration the model cannot rate packed is left
//!    out; ours, since a run stops at a configuration its model cannot
//!    rate). Then preemptions,
//!    resizes in an order that only takes free GPUs (a job blocked in a
//!    cycle is preempted first), and a batch re-tune of jobs that keep their
//!    GPUs (the artifact's jobs re-tune between steps).
//!
//! The solver time of each round is kept ([`Sia::rounds`]) and written to
//! `timing.json`; the solver is deterministic, so outputs are byte-identical
//! whatever the thread count.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::pollux_goodput::{BatchCandidates, BatchRange, FitKey, GoodputFn, PerfParams, Profile, fit_profile};
use super::pollux_sim::{AtTicks, TickLoop, decide_at_ticks};
use super::{Decision, Policy, SolverRound, View};
use crate::error::RunError;
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::{ElasticConfig, JobState, ProgressModel};

/// Most GPUs one job may get (the artifact's 64).
const MAX_JOB_GPUS: u32 = 64;

/// Grid of rule 6's objective values: `A` is rounded to 2 decimals (the
/// artifact's `np.round(.., 2)`), so two solutions' values differ by a
/// multiple of 0.01 when `λ_n` and the clip lie on the same grid.
#[cfg(feature = "lp")]
const GRID_STEP: f64 = 0.01;

/// Rule 6's program builder: (LP relaxation?, objective cutoff) to the
/// problem and, per group, its (configuration, variable) pairs.
#[cfg(feature = "lp")]
type ProgramFn<'a> = dyn Fn(bool, Option<f64>) -> (microlp::Problem, Vec<Vec<(usize, microlp::Variable)>>) + 'a;

/// Rule 6's starting solution from the groups and the program builder.
#[cfg(feature = "lp")]
type StartFn<'a> = dyn Fn(&[(Vec<usize>, Option<usize>)], &ProgramFn<'_>) -> Option<(Vec<Vec<usize>>, f64)> + 'a;

/// Goodput floor of a configuration (the artifact's `ZERO_ALLOC_GAIN`).
const ZERO_ALLOC_GAIN: f64 = 1e-4;

/// The application that is rigid on one GPU, and its total batch (the
/// artifact's `ncf` special case).
const RIGID_APP: (&str, u32) = ("ncf", 32_768);

/// Sia's options. In a file the names are kebab-case (`interval-s`,
/// `lambda-n`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SiaOptions {
    /// Scheduling interval, s (whole ms, 1 to 1e9). Default 60, the
    /// artifact's for Sia.
    #[serde(alias = "interval_s", alias = "interval")]
    pub interval_s: f64,
    /// Fairness power `p` (non-zero, -10 to 10): goodputs enter the
    /// objective as `G^p`. Default -0.5 (`sia_default_p_val`).
    pub p: f64,
    /// Weight of a job left without GPUs, `λ_n`: of the opposite sign to
    /// `p` and above 1 in magnitude (a job's least normalised goodput is 1;
    /// `simulator_config.py`'s rules). Default 1.1 (`sia_default_lambda_n`).
    #[serde(alias = "lambda_n")]
    pub lambda_n: f64,
    /// Largest value of `G^p` (`sia_goodput_clip_val`), positive. Default 3000.
    pub clip: f64,
    /// Whether the program tells GPU types apart (default true, Sia). False
    /// is **ours**, a control for heterogeneity awareness: every type is
    /// rated as the job's first fitted type (rule 4), so the program sees
    /// one goodput per GPU count whatever the type; the engine still runs
    /// each type at its own speed. Written to manifests only when false.
    #[serde(alias = "type_aware", skip_serializing_if = "is_true")]
    pub type_aware: bool,
}

/// `skip_serializing_if` of [`SiaOptions::type_aware`].
fn is_true(b: &bool) -> bool {
    *b
}

impl Default for SiaOptions {
    fn default() -> Self {
        SiaOptions { interval_s: 60.0, p: -0.5, lambda_n: 1.1, clip: 3000.0, type_aware: true }
    }
}

impl SiaOptions {
    /// The interval in whole ms.
    pub fn interval_ms(&self) -> u64 {
        (self.interval_s * 1000.0).round() as u64
    }
}

impl BuildPolicy for SiaOptions {
    /// Sia weighs each job's goodput from its step times and gradient statistics.
    fn work_defined_only(&self) -> bool {
        true
    }

    fn time_decisions(&self) -> bool {
        true
    }

    fn validate(&self, _kind: &str) -> Result<(), String> {
        if !cfg!(feature = "lp") {
            return Err("sia needs the MILP solver: build dlsched with the `lp` feature".into());
        }
        if !(1.0..=1e9).contains(&self.interval_s) {
            return Err(format!("sia: interval-s must be 1 to 1e9 s (the artifact's 60), got {}", self.interval_s));
        }
        if !(self.p.is_finite() && self.p != 0.0 && self.p.abs() <= 10.0) {
            return Err(format!("sia: p must be non-zero, -10 to 10 (the artifact's -0.5), got {}", self.p));
        }
        if !(self.lambda_n.is_finite() && self.lambda_n.abs() > 1.0 && self.lambda_n.abs() <= 1e6)
            || self.lambda_n.signum() == self.p.signum()
        {
            return Err(format!(
                "sia: lambda-n must be of the opposite sign to p and above 1 in magnitude, at most 1e6 (the \
                 artifact's 1.1 with p = -0.5: leaving a job without GPUs must cost more than its least goodput), \
                 got lambda-n {} with p {}",
                self.lambda_n, self.p
            ));
        }
        if !(self.clip.is_finite() && self.clip > 0.0) {
            return Err(format!("sia: clip must be positive and finite (the artifact's 3000), got {}", self.clip));
        }
        Ok(())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        super::pollux_sim::one_partition("sia", ctx.cluster)?;
        Ok(Box::new(Sia::new(*self)))
    }
}

/// The artifact's restart penalty of an application, s (`get_restart_penalty`).
pub fn restart_penalty_s(app: &str) -> f64 {
    match app {
        a if a.contains("deepspeech") => 25.0,
        a if a.contains("imagenet") => 250.0,
        a if a.contains("cifar") => 30.0,
        a if a.contains("bert") => 120.0,
        a if a.contains("yolov3") => 45.0,
        _ => 30.0,
    }
}

/// The configurations of one GPU type with `nodes` nodes of `per_node`
/// GPUs (rule 2): `(nodes, GPUs)`, GPUs ascending.
pub fn type_configs(nodes: u32, per_node: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    if nodes == 0 || per_node == 0 {
        return out;
    }
    let mut g = 1;
    while g < per_node && g <= MAX_JOB_GPUS {
        out.push((1, g));
        g *= 2;
    }
    let mut k = 1;
    while k <= nodes && k * per_node <= MAX_JOB_GPUS {
        out.push((k, k * per_node));
        k += 1;
    }
    out
}

/// The cluster's GPU types as the policy sees them.
#[derive(Clone, Debug)]
struct Types {
    /// Per type: its nodes (ascending).
    nodes: Vec<Vec<NodeId>>,
    /// Per type: GPUs per node (the largest of its nodes).
    per_node: Vec<u32>,
    /// Per type: GPUs in all.
    total: Vec<u32>,
    /// Every configuration: (type, nodes, GPUs), by type then GPUs.
    configs: Vec<(u16, u32, u32)>,
}

impl Types {
    fn of(cluster: &crate::cluster::Cluster) -> Self {
        let n_types = cluster.gpu_type_names().len();
        let mut nodes = vec![Vec::new(); n_types];
        let mut per_node = vec![0u32; n_types];
        let mut total = vec![0u32; n_types];
        for n in 0..cluster.num_nodes() {
            let id = NodeId(n as u32);
            let t = usize::from(cluster.gpu_type_of(id));
            let g = cluster.node(id).gpus;
            if g == 0 {
                continue;
            }
            nodes[t].push(id);
            per_node[t] = per_node[t].max(g);
            total[t] += g;
        }
        let mut configs = Vec::new();
        for t in 0..n_types {
            for (k, g) in type_configs(nodes[t].len() as u32, per_node[t]) {
                configs.push((t as u16, k, g));
            }
        }
        Types { nodes, per_node, total, configs }
    }
}

/// What the policy remembers of one job.
#[derive(Clone, Debug, Default)]
struct SiaJob {
    /// Per GPU type: configurations run on, (nodes, GPUs, atomic batch) →
    /// (step, sync) s.
    profile: Vec<Profile>,
    /// Per GPU type: the fit over its profile.
    perf: Vec<Option<PerfParams>>,
    /// The latest gradient statistics (sqr, var).
    grad: Option<(f64, f64)>,
    /// The configuration (index into `Types::configs`) of the last round.
    prev: Option<usize>,
}

/// The Sia policy (see the module docs).
pub struct Sia {
    opts: SiaOptions,
    tl: TickLoop,
    types: Option<Types>,
    memo: BTreeMap<JobId, SiaJob>,
    /// Fits by their observations (nodes, GPUs, atomic batch, bits of step
    /// and sync), as in `pollux`.
    fits: BTreeMap<FitKey, PerfParams>,
    rounds: Vec<SolverRound>,
    /// Rounds whose program the solver failed on (no job got GPUs then).
    solver_failures: u64,
    /// Best-batch candidates by (initial batch, GPUs, max batch, min
    /// local, max local): a pure function of them
    /// ([`BatchCandidates::new`]), kept across rounds.
    cands: RefCell<CandidatesCache>,
}

/// One job's row of the program: `(config index, A)` per candidate.
/// Best-batch candidates by (initial batch, GPUs, max batch, min local,
/// max local).
type CandidatesCache = BTreeMap<(u32, u32, u32, u32, u32), Arc<BatchCandidates>>;

#[derive(Clone)]
struct Row {
    job: JobId,
    cands: Vec<(usize, f64)>,
    /// Kept on its configuration (within its re-scale delay).
    forced: Option<usize>,
}

impl Sia {
    /// A Sia policy with `opts`.
    pub fn new(opts: SiaOptions) -> Self {
        Sia {
            opts,
            tl: TickLoop::new(opts.interval_ms()),
            types: None,
            memo: BTreeMap::new(),
            fits: BTreeMap::new(),
            rounds: Vec::new(),
            solver_failures: 0,
            cands: RefCell::new(BTreeMap::new()),
        }
    }

    /// The figures of every round so far.
    pub fn rounds(&self) -> &[SolverRound] {
        &self.rounds
    }

    /// Rigid on `(GPUs, total batch)`, or `None` for an adaptive job (rule 3).
    fn rigid(spec: &crate::job::ElasticSpec) -> Option<(u32, u32)> {
        if spec.app == RIGID_APP.0 {
            Some((1, RIGID_APP.1))
        } else if !spec.adaptive {
            Some((spec.tuned_gpus.max(1), spec.tuned_bsz))
        } else {
            None
        }
    }

    /// The batch range of `app` on type `t` for a job of total batch `bsz`.
    fn range(model: &dyn ProgressModel, app: &str, t: u16, bsz: u32) -> Option<(u32, BatchRange)> {
        let l = model.batch_limits_on(app, t)?;
        let max_batch = l.max_batch.min(bsz.max(l.init_batch));
        Some((l.init_batch, BatchRange { max_batch, min_local: l.min_local, max_local: l.max_local }))
    }

    /// Rule 3: what each active job observed since the last round.
    fn observe(&mut self, view: &View<'_>, model: &dyn ProgressModel, n_types: usize) {
        for &j in &self.tl.active {
            let m = self.memo.entry(j).or_default();
            if m.profile.len() < n_types {
                m.profile.resize(n_types, BTreeMap::new());
                m.perf.resize(n_types, None);
            }
            let Some(st) = view.elastic(j) else { continue };
            let Some(cfg) = st.cfg else { continue };
            if st.rescaling {
                continue;
            }
            let app = &st.spec.app;
            if let Ok(g) = model.grad_stats(app, cfg.total_batch(), st.progress) {
                m.grad = Some(g);
            }
            let t = usize::from(cfg.gpu_type);
            if t >= n_types {
                continue;
            }
            let key = (cfg.nodes(), cfg.replicas(), cfg.atomic_bsz);
            if m.profile[t].contains_key(&key) {
                continue;
            }
            let Ok((step, sync)) = model.step_times(app, cfg) else { continue };
            if !(step > sync && sync >= 0.0 && step.is_finite()) {
                continue;
            }
            m.profile[t].insert(key, (step, sync));
            m.perf[t] = Some(fit_profile(&m.profile[t], &mut self.fits));
        }
    }

    /// Samples/s of `app` on one GPU of type `t` at its largest per-GPU
    /// batch on that type (the single-GPU throughput of rule 4's projection).
    fn single_gpu_throughput(model: &dyn ProgressModel, app: &str, t: u16) -> Option<f64> {
        let l = model.batch_limits_on(app, t)?;
        let cfg = ElasticConfig { per_node: vec![1], atomic_bsz: l.max_local.max(1), accum_steps: 0, gpu_type: t };
        let (step, _) = model.step_times(app, &cfg).ok()?;
        (step > 0.0 && step.is_finite()).then(|| f64::from(cfg.atomic_bsz) / step)
    }

    /// Throughput, samples/s, of `app` on `gpus` GPUs of type `t` packed on
    /// nodes of `per_node`, total batch `bsz` (a rigid job's oracle, rule 4).
    fn rigid_throughput(
        model: &dyn ProgressModel,
        app: &str,
        t: u16,
        gpus: u32,
        per_node: u32,
        bsz: u32,
    ) -> Option<f64> {
        let mut placement = Vec::new();
        let mut left = gpus;
        while left > 0 {
            let take = left.min(per_node.max(1));
            placement.push(take);
            left -= take;
        }
        let (init, lim) = Self::range(model, app, t, bsz)?;
        let _ = init;
        let (atomic, accum) = split_batch(bsz, gpus, lim.max_local);
        let cfg = ElasticConfig { per_node: placement, atomic_bsz: atomic, accum_steps: accum, gpu_type: t };
        let (step, sync) = model.step_times(app, &cfg).ok()?;
        let total = step + f64::from(accum) * (step - sync);
        (total > 0.0 && total.is_finite()).then(|| cfg.total_batch() as f64 / total)
    }

    /// Rules 4 and 5: the program's row of `job`.
    fn row(&self, view: &View<'_>, model: &dyn ProgressModel, types: &Types, job: JobId) -> Option<Row> {
        let st = view.elastic(job)?;
        let spec = st.spec;
        let app = spec.app.as_str();
        let n_types = types.per_node.len();
        let memo = self.memo.get(&job);
        let mut g = vec![0.0f64; types.configs.len()];
        // The best (goodput, atomic batch, accumulation) found on a fitted
        // type, which the ratability check below reuses (the same search).
        let mut best = vec![None; types.configs.len()];
        match Self::rigid(spec) {
            Some((gpus, bsz)) => {
                let th: Vec<Option<f64>> = (0..n_types)
                    .map(|t| {
                        (types.total[t] >= gpus)
                            .then(|| Self::rigid_throughput(model, app, t as u16, gpus, types.per_node[t], bsz))
                            .flatten()
                    })
                    .collect();
                let min = th.iter().flatten().copied().fold(f64::INFINITY, f64::min);
                if !min.is_finite() || min <= 0.0 {
                    return None;
                }
                // Type-blind control: every type as fast as the slowest.
                let th: Vec<Option<f64>> =
                    if self.opts.type_aware { th } else { th.iter().map(|x| x.map(|_| min)).collect() };
                for (c, &(t, k, n)) in types.configs.iter().enumerate() {
                    if let Some(x) = th[usize::from(t)]
                        && n == gpus
                        && k == gpus.div_ceil(types.per_node[usize::from(t)].max(1))
                    {
                        g[c] = x * f64::from(gpus) / min;
                    }
                }
            }
            None => {
                let fitted = |t: usize| memo.and_then(|m| m.perf.get(t).copied().flatten()).zip(memo?.grad);
                let max_r = (0..n_types)
                    .filter_map(|t| {
                        let profiled = memo.and_then(|m| m.profile.get(t)).and_then(|p| p.keys().map(|k| k.1).max());
                        let l = model.batch_limits_on(app, t as u16)?;
                        Some(
                            (2 * profiled.unwrap_or(0))
                                .clamp(1, MAX_JOB_GPUS)
                                .min(l.max_batch / l.min_local.max(1))
                                .max(1),
                        )
                    })
                    .max()
                    .unwrap_or(1);
                let source = (0..n_types).find(|&t| fitted(t).is_some());
                match source {
                    None => {
                        for (c, &(_, _, n)) in types.configs.iter().enumerate() {
                            if n == 1 {
                                g[c] = 1.0;
                            }
                        }
                    }
                    Some(d) => {
                        let (perf_d, (sqr, var)) = fitted(d)?;
                        let (init_d, range_d) = Self::range(model, app, d as u16, spec.tuned_bsz)?;
                        let gd = GoodputFn { perf: perf_d, grad_sqr: sqr, grad_var: var, init_batch: init_d };
                        let th_d = Self::single_gpu_throughput(model, app, d as u16);
                        for (c, &(t, k, n)) in types.configs.iter().enumerate() {
                            if n > max_r {
                                continue;
                            }
                            let t = usize::from(t);
                            // Ours: every GPU must get its least per-GPU batch
                            // of the job's own total batch.
                            match Self::range(model, app, t as u16, spec.tuned_bsz) {
                                Some((_, r)) if u64::from(n) * u64::from(r.min_local) <= u64::from(r.max_batch) => {}
                                _ => continue,
                            }
                            g[c] = match fitted(t).filter(|_| self.opts.type_aware) {
                                Some((perf, (sqr, var))) => {
                                    let Some((init, range)) = Self::range(model, app, t as u16, spec.tuned_bsz) else {
                                        continue;
                                    };
                                    let gf = GoodputFn { perf, grad_sqr: sqr, grad_var: var, init_batch: init };
                                    let o = gf.optimize_over(k, n, &self.candidates(init, n, range));
                                    best[c] = Some(o);
                                    o.0
                                }
                                None => {
                                    let ratio = th_d.zip(Self::single_gpu_throughput(model, app, t as u16));
                                    let Some((td, tt)) = ratio else { continue };
                                    // Type-blind control: no projection.
                                    let (td, tt) = if self.opts.type_aware { (td, tt) } else { (1.0, 1.0) };
                                    let kd = n.div_ceil(types.per_node[d].max(1));
                                    gd.optimize_over(kd, n, &self.candidates(init_d, n, range_d)).0 * tt / td
                                }
                            };
                        }
                    }
                }
            }
        }
        // Ours: a configuration the progress model cannot rate (packed on
        // the type's nodes, at the batch the job would get) is left out.
        for (c, &(t, k, n)) in types.configs.iter().enumerate() {
            if g[c] > 0.0 && !self.ratable(model, view, job, t, &packed(k, n), best[c]) {
                g[c] = 0.0;
            }
        }
        let min = g.iter().copied().filter(|&x| x > ZERO_ALLOC_GAIN && x.is_finite()).fold(f64::INFINITY, f64::min);
        if !min.is_finite() {
            return None;
        }
        let prev = memo.and_then(|m| m.prev);
        let age = (view.now.as_secs_f64() - view.jobs.spec(job).submit.as_secs_f64()).max(0.0);
        let pen = restart_penalty_s(app);
        let factor = if age < pen { 1.0 } else { (age - f64::from(st.restarts) * pen).max(0.0) / (age + pen) };
        let minimise = self.opts.p < 0.0;
        let mut cands: Vec<(usize, f64)> = Vec::new();
        for (c, &x) in g.iter().enumerate() {
            if x <= 0.0 {
                continue;
            }
            let mut v = (x / min).max(ZERO_ALLOC_GAIN);
            // Only a job that holds a configuration pays for leaving it
            // (`__solve_mip_rescaled`: `if prev_config_idx is not None`).
            if prev.is_some_and(|p| p != c) {
                v *= factor;
            }
            let v = v.max(ZERO_ALLOC_GAIN);
            let a = ((v.powf(self.opts.p) * 100.0).round() / 100.0).min(self.opts.clip);
            cands.push((c, a));
        }
        let forced = if st.rescaling { prev.filter(|p| cands.iter().any(|&(c, _)| c == *p)) } else { None };
        // Rule 6's reductions: useless, then dominated on their type.
        let gain = |a: f64| if minimise { self.opts.lambda_n - a } else { a - self.opts.lambda_n };
        let mut kept: Vec<(usize, f64)> = Vec::new();
        for &(c, a) in &cands {
            if forced == Some(c) {
                kept.push((c, a));
                continue;
            }
            if gain(a) <= 0.0 {
                continue;
            }
            let (t, _, n) = types.configs[c];
            let dominated = cands.iter().any(|&(o, b)| {
                let (to, _, no) = types.configs[o];
                o != c
                    && to == t
                    && gain(b) > 0.0
                    && no <= n
                    && gain(b) >= gain(a)
                    && (no < n || gain(b) > gain(a) || o < c)
            });
            if !dominated {
                kept.push((c, a));
            }
        }
        Some(Row { job, cands: kept, forced })
    }

    /// Rule 6: the program over `rows`; per row the chosen configuration.
    #[cfg(feature = "lp")]
    fn solve(&self, rows: &[Row], types: &Types) -> Result<Vec<Option<usize>>, String> {
        self.solve_from(rows, types, &|groups, program| self.start(rows, types, groups, program))
    }

    /// [`Sia::solve`] with the starting solution `start` gives (per group of
    /// identical rows, in order of their first row, per candidate: how many
    /// rows take it; and its objective value).
    #[cfg(feature = "lp")]
    fn solve_from(&self, rows: &[Row], types: &Types, start: &StartFn<'_>) -> Result<Vec<Option<usize>>, String> {
        use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem};
        if rows.iter().all(|r| r.cands.is_empty()) {
            return Ok(vec![None; rows.len()]);
        }
        let dir = if self.opts.p < 0.0 { OptimizationDirection::Minimize } else { OptimizationDirection::Maximize };
        let lambda = self.opts.lambda_n;
        // Rows with the same candidates (configurations and bits of A) and
        // no forced configuration are interchangeable: one integer variable
        // per candidate counts how many of them take it (an exact
        // reformulation that removes the symmetry branch and bound would
        // otherwise explore). Groups in order of their first row.
        let mut groups: Vec<(Vec<usize>, Option<usize>)> = Vec::new(); // (rows, forced)
        let mut by_key: BTreeMap<Vec<(usize, u64)>, usize> = BTreeMap::new();
        for (i, r) in rows.iter().enumerate() {
            if r.cands.is_empty() {
                continue;
            }
            if r.forced.is_some() {
                groups.push((vec![i], r.forced));
                continue;
            }
            let key: Vec<(usize, u64)> = r.cands.iter().map(|&(c, a)| (c, a.to_bits())).collect();
            match by_key.get(&key) {
                Some(&g) => groups[g].0.push(i),
                None => {
                    by_key.insert(key, groups.len());
                    groups.push((vec![i], None));
                }
            }
        }
        // Rule 6's program: integer (`relax` false) or its LP relaxation,
        // with an optional cutoff on the objective.
        let program = |relax: bool, cutoff: Option<f64>| {
            let mut pb = Problem::new(dir);
            let xs: Vec<Vec<(usize, microlp::Variable)>> = groups
                .iter()
                .map(|(members, _)| {
                    let n = members.len() as i32;
                    let cands = rows[members[0]].cands.iter();
                    if relax {
                        cands.map(|&(c, a)| (c, pb.add_var(a - lambda, (0.0, f64::from(n))))).collect()
                    } else if n == 1 {
                        cands.map(|&(c, a)| (c, pb.add_binary_var(a - lambda))).collect()
                    } else {
                        cands.map(|&(c, a)| (c, pb.add_integer_var(a - lambda, (0, n)))).collect()
                    }
                })
                .collect();
            for ((members, forced), vars) in groups.iter().zip(&xs) {
                let mut e = LinearExpr::empty();
                for &(_, v) in vars {
                    e.add(v, 1.0);
                }
                pb.add_constraint(e, ComparisonOp::Le, members.len() as f64);
                if let Some(&(_, v)) = forced.and_then(|f| vars.iter().find(|&&(c, _)| c == f)) {
                    let mut e = LinearExpr::empty();
                    e.add(v, 1.0);
                    pb.add_constraint(e, ComparisonOp::Eq, 1.0);
                }
            }
            for (t, &cap) in types.total.iter().enumerate() {
                let mut e = LinearExpr::empty();
                let mut any = false;
                for &(c, v) in xs.iter().flatten() {
                    if usize::from(types.configs[c].0) == t {
                        e.add(v, f64::from(types.configs[c].2));
                        any = true;
                    }
                }
                if any {
                    pb.add_constraint(e, ComparisonOp::Le, f64::from(cap));
                }
            }
            if let Some(z) = cutoff {
                let mut e = LinearExpr::empty();
                for ((members, _), vars) in groups.iter().zip(&xs) {
                    for (&(_, v), &(_, a)) in vars.iter().zip(&rows[members[0]].cands) {
                        e.add(v, a - lambda);
                    }
                }
                let op = if self.opts.p < 0.0 { ComparisonOp::Le } else { ComparisonOp::Ge };
                pb.add_constraint(e, op, z);
            }
            (pb, xs)
        };
        // Ours, exact: a starting solution gives the cutoff "better by one
        // grid step" when every objective value lies on the 0.01 grid
        // (`A` is rounded to 2 decimals); an infeasible cutoff program
        // proves the start optimal (`sia_start` module docs).
        let sign = if self.opts.p < 0.0 { 1.0 } else { -1.0 };
        let on_grid = rows.iter().flat_map(|r| &r.cands).all(|&(_, a)| {
            let x = (a - lambda) * 100.0;
            x.is_finite() && (x - x.round()).abs() < 1e-6
        });
        let start = if on_grid { start(&groups, &program) } else { None };
        let (pb, xs) = program(false, start.as_ref().map(|(_, obj)| obj - sign * (GRID_STEP - 1e-6)));
        let counts: Vec<Vec<usize>> = match (pb.solve(), start) {
            (Ok(sol), _) => xs
                .iter()
                .map(|vars| vars.iter().map(|&(_, v)| sol.var_value(v).round().max(0.0) as usize).collect())
                .collect(),
            (Err(microlp::Error::Infeasible), Some((counts, _))) => counts,
            (Err(e), _) => return Err(format!("sia: the solver failed: {e}")),
        };
        // A group's counts go to its rows in order, candidates in order.
        let mut out = vec![None; rows.len()];
        for (((members, _), vars), row) in groups.iter().zip(&xs).zip(&counts) {
            let mut next = members.iter();
            for (&(c, _), &count) in vars.iter().zip(row) {
                for &i in next.by_ref().take(count) {
                    out[i] = Some(c);
                }
            }
        }
        Ok(out)
    }

    /// The starting solution of rule 6 (ours; `policy::sia_start`): per
    /// group, per candidate, how many members take it, and its objective
    /// value; `None` when the relaxation fails or rounds to an infeasible
    /// point (the program is then solved without a cutoff).
    #[cfg(feature = "lp")]
    #[allow(clippy::type_complexity)]
    fn start(
        &self,
        rows: &[Row],
        types: &Types,
        groups: &[(Vec<usize>, Option<usize>)],
        program: &ProgramFn<'_>,
    ) -> Option<(Vec<Vec<usize>>, f64)> {
        use super::sia_start::{Group, start};
        let sign = if self.opts.p < 0.0 { 1.0 } else { -1.0 };
        let lambda = self.opts.lambda_n;
        let (pb, xs) = program(true, None);
        let lp = pb.solve().ok()?;
        let spec: Vec<Group> = groups
            .iter()
            .map(|(members, forced)| {
                let cands = &rows[members[0]].cands;
                Group {
                    members: members.len() as u32,
                    cands: cands
                        .iter()
                        .map(|&(c, a)| {
                            let (t, _, n) = types.configs[c];
                            (usize::from(t), n, sign * (a - lambda))
                        })
                        .collect(),
                    forced: forced.and_then(|f| cands.iter().position(|&(c, _)| c == f)),
                }
            })
            .collect();
        let vals: Vec<Vec<f64>> = xs.iter().map(|vars| vars.iter().map(|&(_, v)| *lp.var_value(v)).collect()).collect();
        let counts = start(&spec, &types.total, &vals)?;
        let obj = groups
            .iter()
            .zip(&counts)
            .map(|((members, _), row)| {
                rows[members[0]].cands.iter().zip(row).map(|(&(_, a), &k)| (a - lambda) * f64::from(k)).sum::<f64>()
            })
            .sum();
        Some((counts.into_iter().map(|row| row.into_iter().map(|k| k as usize).collect()).collect(), obj))
    }

    #[cfg(not(feature = "lp"))]
    fn solve(&self, _rows: &[Row], _types: &Types) -> Result<Vec<Option<usize>>, String> {
        Err("sia needs the `lp` feature".into())
    }

    /// The best-batch candidates of `init` batch on `replicas` GPUs within
    /// `range`, built once.
    fn candidates(&self, init: u32, replicas: u32, range: BatchRange) -> Arc<BatchCandidates> {
        let key = (init, replicas, range.max_batch, range.min_local, range.max_local);
        self.cands
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| Arc::new(BatchCandidates::new(init, replicas, range)))
            .clone()
    }

    /// Whether the progress model rates `job` on `per_node` GPUs of type `t`
    /// at the batch [`Sia::batch_for`] gives it there; `best`: the batch
    /// search's result on that placement when the caller has it (the same
    /// as [`Sia::batch_for`]'s own).
    fn ratable(
        &self,
        model: &dyn ProgressModel,
        view: &View<'_>,
        job: JobId,
        t: u16,
        per_node: &[u32],
        best: Option<(f64, u32, u32)>,
    ) -> bool {
        let Some(spec) = view.jobs.spec(job).elastic() else { return false };
        let (atomic_bsz, accum_steps) = self.batch_for_with(model, view, job, t, per_node, best);
        let cfg = ElasticConfig { per_node: per_node.to_vec(), atomic_bsz, accum_steps, gpu_type: t };
        model.step_times(&spec.app, &cfg).is_ok()
    }

    /// The batch of `job` on configuration `cfg_ix` placed as `per_node`:
    /// its best on the type's fit, else its tuned batch (rule 7).
    fn batch_for(
        &self,
        model: &dyn ProgressModel,
        view: &View<'_>,
        job: JobId,
        t: u16,
        per_node: &[u32],
    ) -> (u32, u32) {
        self.batch_for_with(model, view, job, t, per_node, None)
    }

    /// [`Sia::batch_for`], with the batch search's result on `per_node`
    /// when the caller already has it (`best`).
    fn batch_for_with(
        &self,
        model: &dyn ProgressModel,
        view: &View<'_>,
        job: JobId,
        t: u16,
        per_node: &[u32],
        best: Option<(f64, u32, u32)>,
    ) -> (u32, u32) {
        let Some(spec) = view.jobs.spec(job).elastic() else { return (1, 0) };
        let replicas: u32 = per_node.iter().sum::<u32>().max(1);
        if let Some((_, bsz)) = Self::rigid(spec) {
            let max_local = model.batch_limits_on(&spec.app, t).map_or(u32::MAX, |l| l.max_local);
            return split_batch(bsz, replicas, max_local);
        }
        let Some((init, range)) = Self::range(model, &spec.app, t, spec.tuned_bsz) else {
            return split_batch(spec.tuned_bsz, replicas, u32::MAX);
        };
        let memo = self.memo.get(&job);
        let fitted = memo.and_then(|m| m.perf.get(usize::from(t)).copied().flatten()).zip(memo.and_then(|m| m.grad));
        match fitted {
            Some((perf, (sqr, var))) => {
                let gf = GoodputFn { perf, grad_sqr: sqr, grad_var: var, init_batch: init };
                let (gp, atomic, accum) = best.unwrap_or_else(|| {
                    gf.optimize_over(per_node.len() as u32, replicas, &self.candidates(init, replicas, range))
                });
                if gp > 0.0 && atomic > 0 {
                    let count = u64::from(replicas) * (u64::from(accum) + 1);
                    let cap = (u64::from(range.max_batch) / count.max(1)).max(1);
                    return ((u64::from(atomic).min(cap)) as u32, accum);
                }
                split_batch(init.max(range.min_local.saturating_mul(replicas)), replicas, range.max_local)
            }
            None => split_batch(init.max(range.min_local.saturating_mul(replicas)), replicas, range.max_local),
        }
    }
}

/// `n` GPUs on `k` nodes as configurations place them: whole nodes of
/// `n / k` GPUs (one node for fewer GPUs than a node has).
fn packed(k: u32, n: u32) -> Vec<u32> {
    vec![n / k.max(1); k.max(1) as usize]
}

/// `bsz` samples over `replicas` GPUs of at most `max_local` samples per
/// step: `(atomic batch, accumulation steps)` as the artifact splits it
/// (`local = ceil(bsz / replicas)`, `accum = ceil(local / max_local) − 1`,
/// `atomic = ceil(local / (accum + 1))`, at least 1).
pub fn split_batch(bsz: u32, replicas: u32, max_local: u32) -> (u32, u32) {
    let local = bsz.div_ceil(replicas.max(1)).max(1);
    let accum = local.div_ceil(max_local.max(1)).saturating_sub(1);
    (local.div_ceil(accum + 1).max(1), accum)
}

impl AtTicks for Sia {
    fn tick_loop(&mut self) -> &mut TickLoop {
        &mut self.tl
    }

    fn tick(&mut self, view: &View<'_>) {
        let Some(model) = view.progress_model() else { return };
        let cluster = view.cluster;
        // Built once; taken out for the round (the rules borrow `self`) and put back at its end.
        let types = self.types.take().unwrap_or_else(|| Types::of(cluster));
        let n_types = types.per_node.len();
        self.observe(view, model, n_types);
        let order: Vec<JobId> = self.tl.active.iter().copied().collect();
        let rows: Vec<Row> = order.iter().filter_map(|&j| self.row(view, model, &types, j)).collect();
        let t0 = std::time::Instant::now();
        let chosen = match self.solve(&rows, &types) {
            Ok(c) => c,
            // Not expected (leaving every job without GPUs is feasible);
            // then no job gets GPUs this round, counted in the summary.
            Err(_) => {
                self.solver_failures += 1;
                vec![None; rows.len()]
            }
        };
        self.rounds.push(SolverRound {
            at_s: view.now.as_secs_f64(),
            jobs: rows.len() as u32,
            variables: rows.iter().map(|r| r.cands.len() as u32).sum(),
            solve_s: t0.elapsed().as_secs_f64(),
        });
        let mut pick: BTreeMap<JobId, usize> = BTreeMap::new();
        for (r, c) in rows.iter().zip(chosen) {
            if let Some(c) = c {
                pick.insert(r.job, c);
            }
        }
        // Rule 7: placement. Current GPUs of each active job.
        let current: BTreeMap<JobId, Vec<GpuId>> = order
            .iter()
            .map(|&j| {
                (
                    j,
                    match view.jobs.state(j) {
                        JobState::Running(r) => r.gpus.clone(),
                        _ => Vec::new(),
                    },
                )
            })
            .collect();
        let same = |j: JobId, c: usize| -> bool {
            let (t, k, n) = types.configs[c];
            let gpus = &current[&j];
            gpus.len() == n as usize && cluster.gpu_type_of_gpus(gpus) == t && cluster.nodes_spanned(gpus) == k
        };
        let mut taken: BTreeSet<GpuId> = BTreeSet::new();
        let mut plan: BTreeMap<JobId, Vec<GpuId>> = BTreeMap::new();
        for (&j, &c) in &pick {
            if same(j, c) {
                taken.extend(current[&j].iter().copied());
                plan.insert(j, current[&j].clone());
            }
        }
        let mut movers: Vec<(JobId, usize)> =
            pick.iter().filter(|&(&j, _)| !plan.contains_key(&j)).map(|(&j, &c)| (j, c)).collect();
        movers.sort_by(|a, b| types.configs[b.1].2.cmp(&types.configs[a.1].2).then(a.0.cmp(&b.0)));
        for (j, c) in movers {
            let (t, k, n) = types.configs[c];
            let t = usize::from(t);
            let free: Vec<(NodeId, Vec<GpuId>)> = types.nodes[t]
                .iter()
                .map(|&node| {
                    let gs: Vec<GpuId> = cluster
                        .node_gpus(node)
                        .filter(|g| !taken.contains(g) && cluster.holders(*g).all(|h| self.tl.active.contains(&h)))
                        .collect();
                    (node, gs)
                })
                .collect();
            let mut gpus: Vec<GpuId> = Vec::new();
            let per = types.per_node[t];
            if n >= per && n == k * per {
                let whole: Vec<&(NodeId, Vec<GpuId>)> =
                    free.iter().filter(|(_, g)| g.len() as u32 == per).take(k as usize).collect();
                if whole.len() == k as usize {
                    for (_, g) in whole {
                        gpus.extend(g.iter().copied());
                    }
                }
            } else if let Some((_, g)) =
                free.iter().filter(|(_, g)| g.len() as u32 >= n).min_by_key(|(node, g)| (g.len(), *node))
            {
                gpus.extend(g.iter().take(n as usize).copied());
            }
            if gpus.is_empty() {
                let mut by_free: Vec<&(NodeId, Vec<GpuId>)> = free.iter().filter(|(_, g)| !g.is_empty()).collect();
                by_free.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
                for (_, g) in by_free {
                    let take = (n as usize - gpus.len()).min(g.len());
                    gpus.extend(g.iter().take(take).copied());
                    if gpus.len() == n as usize {
                        break;
                    }
                }
            }
            if gpus.len() != n as usize {
                continue; // cannot happen: the program bounds the type's GPUs
            }
            // A spread placement the model cannot rate: no GPUs this round.
            if !self.ratable(model, view, j, t as u16, &super::pollux::per_node_counts(cluster, &gpus), None) {
                continue;
            }
            taken.extend(gpus.iter().copied());
            plan.insert(j, gpus);
        }
        // Decisions: preemptions, then moves that only take free GPUs.
        let mut holder: BTreeMap<GpuId, JobId> = BTreeMap::new();
        for (&j, gs) in &current {
            for &g in gs {
                holder.insert(g, j);
            }
        }
        for (&j, gs) in &current {
            if !gs.is_empty() && !plan.contains_key(&j) {
                self.tl.plan.push_back(Decision::Preempt { job: j });
                for g in gs {
                    holder.remove(g);
                }
            }
        }
        let mut todo: Vec<JobId> = plan.iter().filter(|&(j, g)| current[j] != *g).map(|(&j, _)| j).collect();
        while !todo.is_empty() {
            let ready = todo.iter().position(|j| plan[j].iter().all(|g| holder.get(g).is_none_or(|h| h == j)));
            match ready {
                Some(k) => {
                    let j = todo.remove(k);
                    let gpus = plan[&j].clone();
                    let t = cluster.gpu_type_of_gpus(&gpus);
                    let per_node = super::pollux::per_node_counts(cluster, &gpus);
                    let (atomic_bsz, accum_steps) = self.batch_for(model, view, j, t, &per_node);
                    for g in &current[&j] {
                        holder.remove(g);
                    }
                    for &g in &gpus {
                        holder.insert(g, j);
                    }
                    self.tl.plan.push_back(Decision::Resize { job: j, gpus, atomic_bsz, accum_steps });
                }
                None => {
                    let Some(&j) = todo
                        .iter()
                        .find(|j| !current[j].is_empty() && current[j].iter().any(|g| holder.get(g) == Some(j)))
                    else {
                        break;
                    };
                    self.tl.plan.push_back(Decision::Preempt { job: j });
                    for g in &current[&j] {
                        holder.remove(g);
                    }
                }
            }
        }
        // Batch re-tune of jobs that keep their GPUs.
        for (&j, gpus) in &plan {
            if current[&j] != *gpus || gpus.is_empty() {
                continue;
            }
            let Some(st) = view.elastic(j) else { continue };
            let Some(cfg) = st.cfg else { continue };
            let (atomic, accum) = self.batch_for(model, view, j, cfg.gpu_type, &cfg.per_node);
            if (atomic, accum) != (cfg.atomic_bsz, cfg.accum_steps) {
                self.tl.plan.push_back(Decision::Resize {
                    job: j,
                    gpus: gpus.clone(),
                    atomic_bsz: atomic,
                    accum_steps: accum,
                });
            }
        }
        for &j in &order {
            if let Some(m) = self.memo.get_mut(&j) {
                m.prev = pick.get(&j).copied();
            }
        }
        self.types = Some(types);
    }
}

impl Policy for Sia {
    fn name(&self) -> String {
        "sia".to_string()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.tl.on_arrival(job);
        self.memo.entry(job).or_default();
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        self.tl.on_completion(job);
        self.memo.remove(&job);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        self.tl.on_timer(view.now);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        decide_at_ticks(self, view)
    }

    fn solver_rounds(&self) -> Vec<SolverRound> {
        self.rounds.clone()
    }

    /// `sia_solver_failures` when the solver failed on some round (absent otherwise).
    fn metrics(&self, _jobs: &crate::job::JobTable) -> Vec<(&'static str, f64)> {
        if self.solver_failures > 0 { vec![("sia_solver_failures", self.solver_failures as f64)] } else { Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_the_artifacts_lists() {
        // CONFIGS_4GPU with 16 nodes: 1, 2 GPUs on one node, then 4k on k nodes up to 64.
        let c4 = type_configs(16, 4);
        let gpus: Vec<u32> = c4.iter().map(|c| c.1).collect();
        assert_eq!(gpus, vec![1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64]);
        assert_eq!(c4[3], (2, 8));
        // CONFIGS_8GPU filtered to 2 nodes (the dgx-ext type of Sia's cluster).
        assert_eq!(type_configs(2, 8), vec![(1, 1), (1, 2), (1, 4), (1, 8), (2, 16)]);
        assert!(type_configs(0, 8).is_empty());
    }

    #[test]
    fn batches_split_as_the_artifact() {
        // 4096 over 12 GPUs: local ceil(341.33) = 342; max local 256 → 1 accumulation step, atomic 171.
        assert_eq!(split_batch(4096, 12, 256), (171, 1));
        assert_eq!(split_batch(64, 2, 256), (32, 0));
        assert_eq!(split_batch(1, 8, 4), (1, 0));
    }

    #[test]
    fn options_follow_the_artifacts_sign_rules() {
        let ok = SiaOptions::default();
        assert!(ok.validate("sia").is_ok() || !cfg!(feature = "lp"));
        let same_sign = SiaOptions { lambda_n: -1.1, ..ok };
        assert!(same_sign.validate("sia").unwrap_err().contains("opposite sign"));
        let small = SiaOptions { lambda_n: 0.9, ..ok };
        assert!(small.validate("sia").is_err());
        assert!(SiaOptions { p: 0.0, ..ok }.validate("sia").is_err());
        assert!(SiaOptions { interval_s: 0.5, ..ok }.validate("sia").is_err());
    }

    /// One type of one 4-GPU node: configurations 0 = 1 GPU, 1 = 2, 2 = 4.
    fn one_node() -> Types {
        let configs = type_configs(1, 4).into_iter().map(|(k, n)| (0u16, k, n)).collect();
        Types { nodes: vec![vec![NodeId(0)]], per_node: vec![4], total: vec![4], configs }
    }

    #[cfg(feature = "lp")]
    #[test]
    fn the_program_picks_the_least_total_cost() {
        // λ_n = 1.1, minimised Σ (A − λ_n)·x. Job a: 1 GPU A = 1.0 (−0.1),
        // 4 GPUs A = 0.5 (−0.6); job b: 1 GPU A = 1.0 (−0.1), 2 GPUs A = 0.71
        // (−0.39). On 4 GPUs: a on 4 alone −0.6; a 1 + b 2 −0.49; a 1 + b 1
        // −0.2; b 2 alone −0.39. The optimum gives a 4 GPUs and b none.
        let sia = Sia::new(SiaOptions::default());
        let rows = vec![
            Row { job: JobId(0), cands: vec![(0, 1.0), (2, 0.5)], forced: None },
            Row { job: JobId(1), cands: vec![(0, 1.0), (1, 0.71)], forced: None },
        ];
        assert_eq!(sia.solve(&rows, &one_node()).unwrap(), vec![Some(2), None]);
        // Job b kept on its 2 GPUs (within its re-scale delay): a gets 1 GPU
        // (2 + 4 would exceed the node), −0.39 − 0.1.
        let rows = vec![
            Row { job: JobId(0), cands: vec![(0, 1.0), (2, 0.5)], forced: None },
            Row { job: JobId(1), cands: vec![(0, 1.0), (1, 0.71)], forced: Some(1) },
        ];
        assert_eq!(sia.solve(&rows, &one_node()).unwrap(), vec![Some(0), Some(1)]);
    }

    /// The cutoff is one grid step (0.01) below the start: a start 0.01
    /// worse than the optimum is improved on; of two optima, the start is
    /// kept (the solver finds nothing strictly better).
    #[test]
    #[cfg(feature = "lp")]
    fn the_start_sets_a_cutoff_one_grid_step_below_it() {
        let sia = Sia::new(SiaOptions::default());
        // Costs A − 1.1: a: 1 GPU −0.1, 4 GPUs −0.6; b: 2 GPUs −0.51.
        // a 4 alone −0.6; a 1 + b 2 −0.61, the optimum by one step.
        let rows = vec![
            Row { job: JobId(0), cands: vec![(0, 1.0), (2, 0.5)], forced: None },
            Row { job: JobId(1), cands: vec![(1, 0.59)], forced: None },
        ];
        let a4 = |_: &[(Vec<usize>, Option<usize>)], _: &ProgramFn<'_>| Some((vec![vec![0, 1], vec![0]], -0.6));
        assert_eq!(sia.solve_from(&rows, &one_node(), &a4).unwrap(), vec![Some(0), Some(1)]);
        // b at 2 GPUs −0.5: a 1 + b 2 and a 4 alone tie at −0.6; each start is kept.
        let rows = vec![rows[0].clone(), Row { job: JobId(1), cands: vec![(1, 0.6)], forced: None }];
        assert_eq!(sia.solve_from(&rows, &one_node(), &a4).unwrap(), vec![Some(2), None]);
        let a1b2 = |_: &[(Vec<usize>, Option<usize>)], _: &ProgramFn<'_>| Some((vec![vec![1, 0], vec![1]], -0.6));
        assert_eq!(sia.solve_from(&rows, &one_node(), &a1b2).unwrap(), vec![Some(0), Some(1)]);
    }

    /// Rule 6 with its starting solution and cutoff reaches the optimum
    /// found by enumerating every assignment (an independent route), on
    /// random programs of two GPU types, with identical jobs (grouped
    /// variables) and kept configurations, minimising and maximising.
    #[test]
    #[cfg(feature = "lp")]
    fn the_program_reaches_the_enumerated_optimum() {
        let mut configs: Vec<(u16, u32, u32)> = type_configs(1, 4).into_iter().map(|(k, n)| (0u16, k, n)).collect();
        configs.extend(type_configs(2, 8).into_iter().map(|(k, n)| (1u16, k, n)));
        let types = Types {
            nodes: vec![vec![NodeId(0)], vec![NodeId(1), NodeId(2)]],
            per_node: vec![4, 8],
            total: vec![4, 16],
            configs: configs.clone(),
        };
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for (p, lambda) in [(-0.5, 1.1), (0.5, -1.1)] {
            let sia = Sia::new(SiaOptions { p, lambda_n: lambda, ..SiaOptions::default() });
            let cost = |a: f64| if p < 0.0 { a - lambda } else { lambda - a };
            for case in 0..150 {
                let jobs = 3 + next(4) as usize;
                let mut rows: Vec<Row> = Vec::new();
                let mut held = [0u32; 2];
                for j in 0..jobs {
                    if j > 0 && next(4) == 0 {
                        // An identical job: shares the previous one's variables.
                        let prev = rows[j - 1].cands.clone();
                        rows.push(Row { job: JobId(j as u32), cands: prev, forced: None });
                        continue;
                    }
                    let mut cands: Vec<(usize, f64)> = Vec::new();
                    for c in 0..configs.len() {
                        if next(3) == 0 {
                            // A on the 0.01 grid, each configuration useful.
                            let a =
                                if p < 0.0 { 0.3 + next(79) as f64 / 100.0 } else { 1.0 + next(200) as f64 / 100.0 };
                            cands.push((c, a));
                        }
                    }
                    // A kept configuration, as jobs hold them: within capacity.
                    let forced = cands.first().map(|&(c, _)| c).filter(|&c| {
                        let (t, _, n) = configs[c];
                        let keep = next(8) == 0 && held[usize::from(t)] + n <= types.total[usize::from(t)];
                        held[usize::from(t)] += if keep { n } else { 0 };
                        keep
                    });
                    rows.push(Row { job: JobId(j as u32), cands, forced });
                }
                // Enumerate: every job takes one of its candidates or none.
                let mut best = f64::INFINITY;
                let mut choice = vec![0usize; jobs];
                'all: loop {
                    let mut used = [0u32; 2];
                    let mut total = 0.0;
                    let mut ok = true;
                    for (r, &k) in rows.iter().zip(&choice) {
                        match k.checked_sub(1).map(|i| r.cands[i]) {
                            Some((c, a)) => {
                                used[usize::from(configs[c].0)] += configs[c].2;
                                total += cost(a);
                                ok &= r.forced.is_none_or(|f| f == c);
                            }
                            None => ok &= r.forced.is_none(),
                        }
                    }
                    if ok && used[0] <= 4 && used[1] <= 16 {
                        best = best.min(total);
                    }
                    for (k, r) in choice.iter_mut().zip(&rows) {
                        *k += 1;
                        if *k <= r.cands.len() {
                            continue 'all;
                        }
                        *k = 0;
                    }
                    break;
                }
                let got = sia.solve(&rows, &types).unwrap();
                let mut used = [0u32; 2];
                let mut total = 0.0;
                for (r, g) in rows.iter().zip(&got) {
                    if let Some(c) = *g {
                        let &(_, a) = r.cands.iter().find(|&&(x, _)| x == c).expect("a candidate");
                        used[usize::from(configs[c].0)] += configs[c].2;
                        total += cost(a);
                    }
                    assert!(r.forced.is_none_or(|f| *g == Some(f)), "p {p} case {case}: forced");
                }
                assert!(used[0] <= 4 && used[1] <= 16, "p {p} case {case}: over capacity");
                assert!((total - best).abs() < 1e-9, "p {p} case {case}: {total} vs enumerated {best}");
            }
        }
    }

    #[test]
    fn restart_penalties_are_the_artifacts() {
        assert_eq!(restart_penalty_s("imagenet"), 250.0);
        assert_eq!(restart_penalty_s("deepspeech2"), 25.0);
        assert_eq!(restart_penalty_s("ncf"), 30.0);
    }
}
