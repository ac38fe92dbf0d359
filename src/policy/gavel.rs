//! Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies
//! for Deep Learning Workloads", OSDI'20): an allocation `X` (the fraction of
//! time each job should spend on each GPU type) computed by a policy, and
//! realised by round-based time-sharing with preemption at round boundaries.
//!
//! Kinds:
//! - `gavel`: heterogeneity-aware max-min fairness ("LAS" in the paper's
//!   §4.1 and its simulator's `max_min_fairness_perf`), solved as a linear
//!   program per VC partition;
//! - `gavel-fifo`: Gavel's heterogeneity-aware FIFO (§4.2 "FIFO",
//!   simulator `fifo_perf`): in arrival order each job gets `X = 1` on the
//!   fastest GPU type with room for it, stopping at the first job that fits
//!   no type;
//! - `gavel-max-sum`: Gavel's maximum total throughput (§4.2 "Maximize
//!   total throughput", simulator `max_sum_throughput_perf`, class
//!   `ThroughputSumWithPerf`; the policy the Sia artifact runs Gavel with,
//!   `gavel_default_policy` in `sia-simulator/simulator_config.py`), see
//!   "Maximum total throughput" below.
//!
//! Gavel's finish-time-fairness objective (`finish_time_fairness.py`) does
//! *not* fall out of this machinery: its objective `t + r / (X·thr)` is
//! convex but not linear (cvxpy `inv_pos`), so it needs a conic solver or a
//! bisection over LPs; it is not provided.
//!
//! # Effective throughput and the allocation (§3.1, §4.1)
//!
//! Job `m` on GPU type `j` has throughput `thr_mj`, from the profile database
//! when the run reads one (`--rate-model table|genie`) and the job has a model
//! and batch: `1 / iteration time` of its model at its per-GPU batch on its
//! recorded split (Gavel's measured K80/P100/V100 rows are in the database).
//! A work-defined job's throughput on a type is instead its tuned
//! configuration's samples per second there by the run's progress model
//! (on Sia's per-type tables: the Sia artifact's Gavel baseline, whose jobs
//! keep their requested GPUs and batch).
//! A type on which the model has no measurement (the table would borrow
//! another type) counts as **1.0 relative** to the job's fastest measured
//! type, and a job with no model, or a run without a database (trace speed:
//! the engine runs every job its trace duration on every type), has 1.0 on
//! every type; both are counted in the summary's policy metrics
//! (`gavel_type_fallback_jobs`, `gavel_unit_throughput_jobs`), never silent.
//! A type the job cannot use (the trace's allowed GPU types, GPU memory, more
//! GPUs than the type has in the partition) has throughput 0.
//!
//! Normalised as Gavel does (`max_min_fairness.py`, `proportional.py`): the
//! job's value of an allocation is `v_m = Σ_j thr_mj / prop_m · s_m · X_mj`,
//! with `s_m` the job's GPUs (scale factor) and `prop_m = Σ_j thr_mj · n_j / N`
//! its throughput under an equal share of every type (`n_j` GPUs of type
//! `j`, `N` in all). The LP is
//!
//! ```text
//! maximise t  s.t.  v_m >= t,  Σ_j X_mj <= 1,  Σ_m s_m X_mj <= n_j,  X >= 0.
//! ```
//!
//! Gavel returns whatever its solver (cvxpy/ECOS) gives for the jobs that are
//! not at the minimum; dlsched (our reading) solves a second LP that
//! maximises `Σ_m v_m` with every `v_m >= t*` (so no GPU time is left
//! unallocated that some job could use), with the pure-Rust interior-point
//! solver Clarabel through `good_lp`. Values below 1e-6 are set to 0 and the
//! rest rounded to 1e-9, so that the round mechanism reads stable numbers.
//! On a partition of one GPU type (`solver = "auto"`, the default) the same
//! optimum has a closed form, water-filling: `v_m = min(s_m, λ)` with
//! `Σ_m v_m = min(N, Σ_m s_m)`, i.e. `X_m = min(1, λ / s_m)`; it attains both
//! LPs' optima (checked against the LP on random instances in the tests) and
//! is what the LP's interior point tends to for identical jobs.
//! `solver = "lp"` uses the LP everywhere.
//!
//! # Maximum total throughput (`max_sum_throughput.py`)
//!
//! `ThroughputSumWithPerf` maximises `Σ_m Σ_j thr_mj · X_mj` over the same
//! base constraints (`policy.py`, `get_base_constraints`: `X >= 0`,
//! `Σ_j X_mj <= 1`, `Σ_m s_m X_mj <= n_j`), with *absolute* throughputs:
//! neither normalised nor multiplied by the scale factor (its `scale` is
//! computed and unused; instance costs are 1). So `thr_mj` here is the job's
//! own steps per second on type `j`, not the relative throughput above:
//! `1 / iteration time` from the profile database, and for a work-defined job
//! the Sia artifact's `GavelPolicy.predict_throughput` (`sia-simulator/gavel.py`):
//! `1 / (step + accum_steps · (step − sync))` of its requested GPUs and
//! batch packed onto the type's largest nodes, with that type's batch limits
//! ([`crate::job::ProgressModel::tuned_config_on`]), times the progress
//! model's [`crate::job::ProgressModel::calibration`] (the artifact's
//! `slowdown_factor`). A type without a measurement counts as the job's
//! fastest measured one, and a job without any as 1.0 step/s everywhere,
//! counted as above.
//!
//! With `y_mj = s_m X_mj` (GPUs) the program is a transportation problem:
//! maximise `Σ (thr_mj / s_m) y_mj` with `Σ_j y_mj <= s_m` and
//! `Σ_m y_mj <= n_j`. dlsched solves it exactly without an LP solver, by
//! successive most-profitable augmenting paths ([`max_sum_gpus`]; at most
//! `Σ_j n_j` of them, each a Bellman-Ford pass over the jobs and types),
//! which ends at a vertex where every `y_mj` is a whole number of GPUs. The
//! LP has many optima (identical jobs competing for the last GPUs of a type
//! tie exactly), and Gavel returns whatever its interior-point solver
//! (cvxpy/ECOS) gives, rounded to 5 decimals. Our rule, deterministic
//! ([`max_sum_allocation`]): jobs with the same GPUs and bitwise the same
//! throughput row form a class, and every member gets the class's mean row
//! of the vertex (feasible and optimal, since the constraints and the
//! objective are symmetric in the members). When the only ties are among
//! identical jobs this is the point an interior-point method tends to (the
//! analytic centre of the optimal face, which is symmetric in them); any
//! other exact tie is broken by the relaxation order of the augmenting-path
//! search (jobs by id, then types by name: the first found wins). Values
//! are snapped as above. `solver` does not apply (the flow is exact on
//! every partition); each solve counts in `gavel_closed_form_solves`.
//!
//! # Rounds (`scheduler.py`, `simulate`, `_schedule_jobs_on_workers`)
//!
//! Time is cut into rounds of `round` seconds (360 s, Gavel's
//! `time_per_iteration`), per VC partition. At a round boundary:
//! 1. the time each job ran on each type in the ended round is added to its
//!    `job_time[m][j]` and to the type's `worker_time[j]`;
//! 2. if the active job set changed since the allocation was computed, and
//!    `reset-interval` seconds (1,920 s, Gavel's
//!    `minimum_time_between_allocation_resets`) have passed since the last
//!    reset (or there was none, or no job of the partition is running: our
//!    reading, so that a partition never idles with work waiting), the
//!    allocation is recomputed and the counters reset (`_reset_time_run_so_far`):
//!    each job's deficit grows by `X_mj · elapsed − (job_time[m][j] − round/2)`,
//!    `job_time[m][j] = round/2` and `worker_time[j] = Σ_m job_time[m][j]`;
//!    a job that arrives gets `job_time = round/2` on every type (with
//!    `keep-counters = true`, the Sia artifact's `GavelPolicy`, the
//!    allocation is recomputed but nothing is reset: see
//!    [`GavelOptions::keep_counters`]);
//! 3. priorities (`_update_priorities`): `X_mj / (job_time[m][j] /
//!    worker_time[j])`; 0 for a job not in the allocation (it arrived after
//!    the last reset) or with `X_mj = 0`;
//! 4. per type, jobs are sorted by (priority, deficit, allocation)
//!    descending (ties: submission order), the types' lists are
//!    concatenated (fastest type first: our reading of Gavel's fixed
//!    `v100, p100, k80`, by the mean relative throughput of the jobs in
//!    the allocation, ties by name), and jobs are taken greedily: a job is
//!    skipped if already taken, if its type has fewer GPUs left than it asks,
//!    if its throughput there is 0, and under `gavel-fifo` if its priority is
//!    0; a job not yet in the allocation (priority 0 under `gavel`) that is
//!    taken counts against its type's GPUs but is not given any (Gavel's
//!    `_schedule_jobs_on_workers` skips jobs not in `self._allocation` when
//!    it assigns workers), so those GPUs idle for the round;
//! 5. jobs taken on the type they already run on keep their GPUs (Gavel's
//!    lease extension); every other running job of the partition is
//!    preempted (checkpoint cost: the run's `--checkpoint`), then the taken
//!    jobs are launched, larger first (Gavel assigns by decreasing scale
//!    factor), on GPUs of their type: the node with the fewest free GPUs that
//!    holds the whole job, else across the freest nodes of that type.
//!
//! A round ends `round` seconds after it started, or earlier when every job
//! it runs has completed (Gavel's round ends at the latest finish of its
//! jobs). Jobs that arrive during a round wait for its end; a job that
//! arrives at an idle partition starts a round at once (Gavel's simulator
//! jumps to the next arrival). GPUs a job frees mid-round stay idle until the
//! round ends. So a round-based simulator's JCTs exceed an event-driven one's
//! (`experiments/baselines.md`, "Gavel's reference check").
//!
//! # Cost
//!
//! An allocation is recomputed only when the partition's job set changed and
//! the reset interval has passed; on a one-type partition it is the
//! water-filling closed form, O(M log M) for M active jobs. Each round sorts
//! the partition's jobs once per type.
//!
//! A round that decides nothing is not run when the rounds after it provably
//! decide nothing either, until an arrival or a completion: when every
//! active job of a one-type partition runs, or when the greedy took, on each
//! type, every job of positive priority there (the allocation, hence the set
//! of positive priorities, changes only at a reset; only the order of the
//! priorities moves with time, and it chose nothing). The partition then
//! asks for no timer (or one at the boundary where a pending reset falls
//! due), and the boundaries passed are counted in `gavel_rounds` when it is
//! next woken, so that one job of 10^9 s costs one timer instead of 2.8
//! million, and the schedule is the one of every round run
//! ([`Gavel::with_round_skipping`] turns this off, for the tests that
//! compare the two).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::cluster::Cluster;
use crate::error::RunError;
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::{JobSpec, JobState, JobTable};
use crate::profile::db::ProfileDb;
use crate::profile::model::{PerfModel, TableModel};
use crate::time::SimTime;
use crate::workload::admission::AdmissionRule;

/// How the allocation is solved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GavelSolver {
    /// Water-filling (closed form) on a partition of one GPU type, the LP
    /// otherwise.
    #[default]
    Auto,
    /// The LP on every partition.
    Lp,
}

/// Options of `gavel` and `gavel-fifo`. In a file the names are kebab-case
/// (`reset-interval`); the snake_case spelling is accepted too.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct GavelOptions {
    /// Round length, s (default 360, Gavel's `time_per_iteration`).
    pub round: f64,
    /// Minimum time between two recomputations of the allocation (resets of
    /// the time counters), s (default 1,920, Gavel's
    /// `minimum_time_between_allocation_resets`; 0: at every round boundary
    /// where the job set changed).
    #[serde(alias = "reset_interval")]
    pub reset_interval: f64,
    /// `auto` (default: water-filling on a one-type partition, else the LP)
    /// or `lp` (the LP everywhere).
    pub solver: GavelSolver,
    /// Keep the time counters across allocation recomputations (default
    /// false: Gavel's reset, step 2 of "Rounds" in the module docs). True
    /// is the Sia artifact's `GavelPolicy` (`sia-simulator/gavel.py`, whose
    /// `reset_time` is commented out): `job_time` and `worker_time` only
    /// grow, deficits stay 0, and each arriving job adds `round / 2` to
    /// every type's `worker_time` as it does to its own `job_time`.
    /// Written to manifests only when true.
    #[serde(alias = "keep_counters", skip_serializing_if = "std::ops::Not::not")]
    pub keep_counters: bool,
}

impl Default for GavelOptions {
    fn default() -> Self {
        GavelOptions { round: 360.0, reset_interval: 1920.0, solver: GavelSolver::Auto, keep_counters: false }
    }
}

/// Which allocation policy a kind uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GavelObjective {
    /// Heterogeneity-aware max-min fairness (`gavel`).
    MaxMin,
    /// Heterogeneity-aware FIFO (`gavel-fifo`).
    Fifo,
    /// Maximum total throughput (`gavel-max-sum`).
    MaxSum,
}

impl BuildPolicy for GavelOptions {
    fn preemption_period_ms(&self, _kind: &str) -> Option<u64> {
        Some((self.round * 1000.0).round() as u64)
    }

    fn validate(&self, kind: &str) -> Result<(), String> {
        if !(self.round.is_finite() && self.round >= 0.001 && self.round <= 1e9) {
            return Err(format!("{kind}: round must be a number of seconds in [0.001, 1e9], got {}", self.round));
        }
        if !(self.reset_interval.is_finite() && (0.0..=1e9).contains(&self.reset_interval)) {
            return Err(format!(
                "{kind}: reset-interval must be a number of seconds in [0, 1e9], got {}",
                self.reset_interval
            ));
        }
        Ok(())
    }

    /// Gavel runs a job on GPUs of one type (its placement): a job wider
    /// than every type's GPUs in its partition could never start.
    fn admission_rule(&self, _kind: &str) -> AdmissionRule {
        AdmissionRule::OneGpuType
    }

    /// `gavel` needs the LP solver (the `lp` feature); `gavel-fifo` and
    /// `gavel-max-sum` do not.
    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let objective = match kind {
            "gavel-fifo" => GavelObjective::Fifo,
            "gavel-max-sum" => GavelObjective::MaxSum,
            _ => GavelObjective::MaxMin,
        };
        if objective == GavelObjective::MaxMin && !cfg!(feature = "lp") {
            return Err(crate::error::FeatureDisabled::new(format!("policy `{kind}`"), "lp").into());
        }
        Ok(Box::new(Gavel::new(*self, objective, ctx.cluster, ctx.db.clone())))
    }
}

/// Rounds an allocation value: below 1e-6 is 0, above 1 − 1e-6 is 1, the
/// rest to 1e-9.
fn snap(x: f64) -> f64 {
    if x.is_nan() || x <= 1e-6 {
        0.0
    } else if x > 1.0 - 1e-6 {
        1.0
    } else {
        (x * 1e9).round() / 1e9
    }
}

/// The normalised weights `thr_mj / prop_m · s_m` of Gavel's max-min LP
/// (`prop_m = Σ_j thr_mj n_j / N`); a job with no usable type has all 0.
pub fn normalised_weights(cap: &[u32], gpus: &[u32], thr: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let total: f64 = cap.iter().map(|&c| f64::from(c)).sum();
    thr.iter()
        .zip(gpus)
        .map(|(row, &s)| {
            let prop: f64 = row.iter().zip(cap).map(|(t, &c)| t * f64::from(c) / total).sum();
            if prop > 0.0 { row.iter().map(|t| t / prop * f64::from(s)).collect() } else { vec![0.0; row.len()] }
        })
        .collect()
}

/// Each job's value `v_m = Σ_j w_mj X_mj` of allocation `x` (weights from
/// [`normalised_weights`]).
pub fn values(weights: &[Vec<f64>], x: &[Vec<f64>]) -> Vec<f64> {
    weights.iter().zip(x).map(|(w, r)| w.iter().zip(r).map(|(a, b)| a * b).sum()).collect()
}

/// Max-min fair allocation on one GPU type of `cap` GPUs for jobs of `gpus`
/// GPUs each (water-filling): `X_m = min(1, λ / s_m)` with
/// `Σ_m min(s_m, λ) = min(cap, Σ_m s_m)`.
pub fn water_fill(cap: u32, gpus: &[u32]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..gpus.len()).collect();
    order.sort_by_key(|&i| (gpus[i], i));
    let mut left = f64::from(cap);
    let mut x = vec![0.0; gpus.len()];
    for (k, &i) in order.iter().enumerate() {
        let share = left / (order.len() - k) as f64;
        let s = f64::from(gpus[i]);
        let v = s.min(share);
        x[i] = snap(v / s);
        left -= v;
    }
    x
}

/// Gavel's max-min LP over `cap` GPUs per type for jobs of `gpus` GPUs with
/// throughputs `thr` (rows: jobs, columns: types; 0 = cannot run there),
/// then the second LP that maximises the sum of values at that minimum (see
/// the module docs). Jobs with no usable type get 0 everywhere.
///
/// # Errors
/// The solver's message if it fails.
#[cfg(feature = "lp")]
pub fn max_min_lp(cap: &[u32], gpus: &[u32], thr: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, String> {
    use good_lp::{Expression, ProblemVariables, Solution, SolverModel, Variable, variable};
    let weights = normalised_weights(cap, gpus, thr);
    let types = cap.len();
    let usable: Vec<bool> = weights.iter().map(|w| w.iter().any(|&v| v > 0.0)).collect();
    if !usable.iter().any(|&u| u) {
        return Ok(vec![vec![0.0; types]; gpus.len()]);
    }
    let solve = |min_value: Option<f64>| -> Result<Vec<Vec<f64>>, String> {
        let mut vars = ProblemVariables::new();
        let xs: Vec<Vec<Option<Variable>>> = weights
            .iter()
            .map(|w| w.iter().map(|&v| (v > 0.0).then(|| vars.add(variable().min(0.0).max(1.0)))).collect())
            .collect();
        let t = vars.add(variable().min(0.0));
        let value =
            |m: usize| -> Expression { xs[m].iter().zip(&weights[m]).filter_map(|(x, &w)| x.map(|x| w * x)).sum() };
        let objective: Expression = match min_value {
            None => t.into(),
            Some(_) => (0..gpus.len()).filter(|&m| usable[m]).map(value).sum(),
        };
        let mut model = vars.maximise(objective).using(good_lp::clarabel);
        for m in (0..gpus.len()).filter(|&m| usable[m]) {
            let v = value(m);
            model = match min_value {
                None => model.with(v.geq(t)),
                Some(lo) => model.with(v.geq(lo)),
            };
            let row: Expression = xs[m].iter().flatten().copied().sum();
            model = model.with(row.leq(1.0));
        }
        for j in 0..types {
            let used: Expression = (0..gpus.len()).filter_map(|m| xs[m][j].map(|x| f64::from(gpus[m]) * x)).sum();
            model = model.with(used.leq(f64::from(cap[j])));
        }
        let sol = model.solve().map_err(|e| e.to_string())?;
        Ok(xs.iter().map(|r| r.iter().map(|x| x.map_or(0.0, |x| sol.value(x).clamp(0.0, 1.0))).collect()).collect())
    };
    let first = solve(None)?;
    let v = values(&weights, &first);
    let t_star = (0..gpus.len()).filter(|&m| usable[m]).map(|m| v[m]).fold(f64::INFINITY, f64::min);
    let second = solve(Some(t_star * (1.0 - 1e-6)))?;
    Ok(second.into_iter().map(|r| r.into_iter().map(snap).collect()).collect())
}

/// GPU type `gpu_type`'s index and work-defined job `es`'s tuned GPUs
/// packed onto that type's largest nodes (GPUs per node); `None` when the
/// cluster has no node of that type.
fn packed_on_type(view: &View<'_>, es: &crate::job::ElasticSpec, gpu_type: &str) -> Option<(u16, Vec<u32>)> {
    let c = view.cluster;
    let ix = c.gpu_type_names().iter().position(|t| t == gpu_type)? as u16;
    let per = (0..c.num_nodes() as u32)
        .map(crate::ids::NodeId)
        .filter(|&n| c.gpu_type_of(n) == ix)
        .map(|n| c.node(n).gpus)
        .max()?
        .max(1);
    let mut placement = Vec::new();
    let mut left = es.tuned_gpus.max(1);
    while left > 0 {
        placement.push(left.min(per));
        left -= left.min(per);
    }
    Some((ix, placement))
}

/// Samples/s of work-defined job `es` on GPU type `gpu_type` at its tuned
/// GPUs and batch (packed onto that type's largest nodes), from progress
/// model `pm`'s step times; `None` when the model gives none.
fn elastic_throughput(
    view: &View<'_>,
    pm: &dyn crate::job::ProgressModel,
    es: &crate::job::ElasticSpec,
    gpu_type: &str,
) -> Option<f64> {
    let (ix, placement) = packed_on_type(view, es, gpu_type)?;
    let mut cfg = pm.tuned_config(&es.app, &placement, es.tuned_bsz);
    cfg.gpu_type = ix;
    let (step, sync) = pm.step_times(&es.app, &cfg).ok()?;
    let total = step + f64::from(cfg.accum_steps) * (step - sync);
    (total > 0.0 && total.is_finite()).then(|| cfg.total_batch() as f64 / total)
}

/// Gavel's heterogeneity-aware FIFO allocation (`FIFOPolicyWithPerf`): in
/// the given (arrival) order, each job gets `X = 1` on the type of highest
/// throughput among those with at least its GPUs left (ties: lowest index);
/// the pass stops at the first job that fits no type.
pub fn fifo_allocation(cap: &[u32], gpus: &[u32], thr: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut left = cap.to_vec();
    let mut x = vec![vec![0.0; cap.len()]; gpus.len()];
    for m in 0..gpus.len() {
        if left.iter().all(|&l| l == 0) {
            break;
        }
        let mut best: Option<usize> = None;
        for j in 0..cap.len() {
            if left[j] > 0 && left[j] >= gpus[m] && best.is_none_or(|b| thr[m][j] > thr[m][b]) {
                best = Some(j);
            }
        }
        let Some(j) = best else { break };
        if thr[m][j] > 0.0 {
            x[m][j] = 1.0;
            left[j] -= gpus[m];
        }
    }
    x
}

/// GPUs `y_mj` of Gavel's max-sum-throughput program over `cap` GPUs per
/// type for jobs of `gpus` GPUs with absolute throughputs `thr` (rows: jobs,
/// columns: types; 0 = cannot run there): maximise `Σ (thr_mj / s_m) y_mj`
/// with `Σ_j y_mj <= s_m`, `Σ_m y_mj <= n_j`, `y >= 0`, solved exactly by
/// successive most-profitable augmenting paths from the jobs to the types
/// (Bellman-Ford over the residual network, jobs by index then types by
/// index, strict improvements only, so the first path found among exact
/// ties wins), stopping when no path gains more than `1e-12` of the largest
/// profit per GPU. Every `y_mj` is a whole number of GPUs.
pub fn max_sum_gpus(cap: &[u32], gpus: &[u32], thr: &[Vec<f64>]) -> Vec<Vec<u32>> {
    let (m_n, k) = (gpus.len(), cap.len());
    let profit: Vec<Vec<f64>> = thr
        .iter()
        .zip(gpus)
        .map(|(row, &s)| row.iter().map(|&t| if t > 0.0 && s > 0 { t / f64::from(s) } else { 0.0 }).collect())
        .collect();
    let pmax = profit.iter().flatten().copied().fold(0.0, f64::max);
    let mut y = vec![vec![0u32; k]; m_n];
    if pmax <= 0.0 {
        return y;
    }
    let eps = 1e-12 * pmax;
    let mut used = vec![0u32; m_n];
    let mut load = vec![0u32; k];
    // Predecessors: a type's is the job it was reached from; a job's is the
    // type it was reached from (`None`: straight from the source).
    let mut dj = vec![f64::INFINITY; m_n];
    let mut dt = vec![f64::INFINITY; k];
    let mut pj: Vec<Option<usize>> = vec![None; m_n];
    let mut pt = vec![0usize; k];
    loop {
        for m in 0..m_n {
            dj[m] = if used[m] < gpus[m] { 0.0 } else { f64::INFINITY };
            pj[m] = None;
        }
        dt.fill(f64::INFINITY);
        // Bellman-Ford; the residual network has no negative cycle (an
        // invariant of shortest augmenting paths), so `m_n + k` passes
        // suffice; the `eps` margin keeps rounding from relaxing forever.
        for _ in 0..=(m_n + k) {
            let mut changed = false;
            for m in 0..m_n {
                if dj[m].is_infinite() {
                    continue;
                }
                for j in 0..k {
                    if profit[m][j] > 0.0 && dj[m] - profit[m][j] < dt[j] - eps {
                        dt[j] = dj[m] - profit[m][j];
                        pt[j] = m;
                        changed = true;
                    }
                }
            }
            for j in 0..k {
                if dt[j].is_infinite() {
                    continue;
                }
                for m in 0..m_n {
                    if y[m][j] > 0 && dt[j] + profit[m][j] < dj[m] - eps {
                        dj[m] = dt[j] + profit[m][j];
                        pj[m] = Some(j);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        // The most profitable type with a free GPU.
        let Some(end) = (0..k)
            .filter(|&j| load[j] < cap[j] && dt[j] < -eps)
            .min_by(|&a, &b| dt[a].total_cmp(&dt[b]).then(a.cmp(&b)))
        else {
            break;
        };
        // Walk back to the source; the bottleneck in GPUs.
        let mut amount = cap[end] - load[end];
        let mut path: Vec<(usize, usize, bool)> = Vec::new(); // (job, type, forward)
        let mut j = end;
        loop {
            let m = pt[j];
            path.push((m, j, true));
            match pj[m] {
                None => {
                    amount = amount.min(gpus[m] - used[m]);
                    break;
                }
                Some(prev) => {
                    amount = amount.min(y[m][prev]);
                    path.push((m, prev, false));
                    j = prev;
                }
            }
            if path.len() > 2 * (m_n + k) {
                // A cycle through rounding: stop with what is optimal so far.
                return y;
            }
        }
        if amount == 0 {
            break;
        }
        for &(m, j, fwd) in &path {
            if fwd {
                y[m][j] += amount;
            } else {
                y[m][j] -= amount;
            }
        }
        let (first, _, _) = *path.last().expect("a path has an edge");
        used[first] += amount;
        load[end] += amount;
    }
    y
}

/// Gavel's max-sum-throughput allocation `X` (see the module docs): the
/// GPUs of [`max_sum_gpus`] as time fractions `y_mj / s_m`, averaged over
/// each class of identical jobs (same GPUs, bitwise the same throughput
/// row), snapped.
pub fn max_sum_allocation(cap: &[u32], gpus: &[u32], thr: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let y = max_sum_gpus(cap, gpus, thr);
    let key = |m: usize| (gpus[m], thr[m].iter().map(|t| t.to_bits()).collect::<Vec<u64>>());
    let mut classes: BTreeMap<(u32, Vec<u64>), Vec<usize>> = BTreeMap::new();
    for m in 0..gpus.len() {
        classes.entry(key(m)).or_default().push(m);
    }
    let mut x = vec![vec![0.0; cap.len()]; gpus.len()];
    for ((s, _), members) in classes {
        if s == 0 {
            continue;
        }
        let n = members.len() as f64;
        for j in 0..cap.len() {
            let total: u32 = members.iter().map(|&m| y[m][j]).sum();
            let v = snap(f64::from(total) / n / f64::from(s));
            for &m in &members {
                x[m][j] = v;
            }
        }
    }
    x
}

/// Steps per second of work-defined job `es` on GPU type `gpu_type` as the
/// Sia artifact's Gavel predicts them (`GavelPolicy.predict_throughput`):
/// its tuned GPUs packed onto the type's largest nodes, its tuned batch
/// within that type's limits, `1 / (step + accum_steps · (step − sync))`
/// times the model's calibration; `None` when the model gives no step times.
fn elastic_steps_per_s(
    view: &View<'_>,
    pm: &dyn crate::job::ProgressModel,
    es: &crate::job::ElasticSpec,
    gpu_type: &str,
) -> Option<f64> {
    let (ix, placement) = packed_on_type(view, es, gpu_type)?;
    let cfg = pm.tuned_config_on(&es.app, &placement, es.tuned_bsz, ix);
    let (step, sync) = pm.step_times(&es.app, &cfg).ok()?;
    let total = step + f64::from(cfg.accum_steps) * (step - sync);
    let rate = pm.calibration(&es.app) / total;
    (total > 0.0 && rate.is_finite() && rate > 0.0).then_some(rate)
}

/// A job in the policy's books.
struct Book {
    gpus: u32,
    /// Relative throughput per type (index into the partition's types).
    thr: Vec<f64>,
    /// Absolute throughput per type, steps/s (`gavel-max-sum` only; empty
    /// otherwise).
    raw: Vec<f64>,
    /// The allocation row, `None` until the job is in an allocation.
    alloc: Option<Vec<f64>>,
    /// Time run per type since the last reset, s (starts at round / 2).
    job_time: Vec<f64>,
    deficit: Vec<f64>,
    /// While running: (type, ms since when its time is not yet in `job_time`).
    on: Option<(usize, u64)>,
}

impl Book {
    /// `job_time` on type `t` at `now` (ms).
    fn time_on(&self, t: usize, now: u64) -> f64 {
        match self.on {
            Some((on, since)) if on == t => self.job_time[t] + (now - since) as f64 / 1000.0,
            _ => self.job_time[t],
        }
    }
}

/// One partition's state.
struct VcState {
    /// GPU types, by name, and GPUs of each.
    types: Vec<String>,
    cap: Vec<u32>,
    /// The greedy's type order (indices into `types`).
    order: Vec<usize>,
    jobs: BTreeMap<JobId, Book>,
    /// Jobs running in the current round and their type.
    running: BTreeMap<JobId, usize>,
    round_start: SimTime,
    /// The next round boundary (ms): a timer is pending there, unless the
    /// partition is `skipping`.
    round_end: Option<u64>,
    /// The rounds from `round_end` on are provably no-ops until an arrival,
    /// a completion or `wake` ([`Gavel::stable_after`]): no timer is pending
    /// at `round_end`, and the boundaries passed are counted as rounds when
    /// the partition is next woken ([`Gavel::catch_up`]).
    skipping: bool,
    /// While skipping: the boundary at which a pending reset falls due (a
    /// timer is pending there), if any.
    wake: Option<u64>,
    need_alloc: bool,
    last_reset: Option<u64>,
    /// Per type: the time counted so far, s, plus, for the running jobs,
    /// `run_n` of them and the sum of their `since` (ms) for the time not yet
    /// counted.
    worker_time: Vec<f64>,
    run_n: Vec<u64>,
    since_sum: Vec<u128>,
}

impl VcState {
    /// Gavel's reset of the time counters at `now` (ms; step 2 of "Rounds"
    /// in the module docs), `half` being half a round, s: each job's
    /// deficit grows by what it should have run since the last reset less
    /// what it ran, and every counter restarts from `half`.
    fn reset_counters(&mut self, half: f64, now: u64) {
        let elapsed = self.last_reset.map_or(0.0, |l| (now - l) as f64 / 1000.0);
        for b in self.jobs.values_mut() {
            for j in 0..b.job_time.len() {
                let should = b.alloc.as_ref().map_or(0.0, |a| a[j] * elapsed);
                b.deficit[j] += should - (b.time_on(j, now) - half);
                b.job_time[j] = half;
            }
            if let Some((t, _)) = b.on {
                b.on = Some((t, now));
            }
        }
        for j in 0..self.worker_time.len() {
            self.worker_time[j] = half * self.jobs.len() as f64;
            self.since_sum[j] = u128::from(self.run_n[j]) * u128::from(now);
        }
    }

    /// `worker_time` of type `t` at `now` (ms).
    fn worker_time_at(&self, t: usize, now: u64) -> f64 {
        self.worker_time[t] + (u128::from(self.run_n[t]) * u128::from(now) - self.since_sum[t]) as f64 / 1000.0
    }

    /// `job` starts running on type `t` at `now`.
    fn start(&mut self, job: JobId, t: usize, now: u64) {
        if let Some(b) = self.jobs.get_mut(&job) {
            b.on = Some((t, now));
            self.run_n[t] += 1;
            self.since_sum[t] += u128::from(now);
        }
        self.running.insert(job, t);
    }

    /// `job` stops running at `now` (preempted or completed): its time is counted.
    fn stop(&mut self, job: JobId, now: u64) {
        if let Some(b) = self.jobs.get_mut(&job)
            && let Some((t, since)) = b.on.take()
        {
            let ran = (now - since) as f64 / 1000.0;
            b.job_time[t] += ran;
            self.worker_time[t] += ran;
            self.run_n[t] -= 1;
            self.since_sum[t] -= u128::from(since);
        }
        self.running.remove(&job);
    }
}

/// One step of a round's plan.
enum Step {
    Preempt(JobId),
    Launch(JobId, usize),
    Wake(u64),
}

/// Counters reported as policy metrics.
#[derive(Default)]
struct Counters {
    rounds: u64,
    allocations: u64,
    lp_solves: u64,
    closed_form: u64,
    lp_failures: u64,
    unit_jobs: u64,
    fallback_jobs: u64,
    unschedulable: u64,
}

/// Gavel; see the module docs.
pub struct Gavel {
    objective: GavelObjective,
    opts: GavelOptions,
    round_ms: u64,
    reset_ms: u64,
    model: Option<TableModel<Arc<ProfileDb>>>,
    vcs: Vec<VcState>,
    dirty: BTreeSet<u16>,
    timers: BTreeSet<u64>,
    plan: VecDeque<Step>,
    plan_vc: usize,
    counters: Counters,
    /// Per job index: (plan stamp, type) of the last plan that took it.
    mark: Vec<(u64, usize)>,
    /// Scratch of the greedy: (priority, deficit, allocation, job, GPUs).
    entries: Vec<Entry>,
    /// Skip the rounds that provably change nothing (default; see
    /// [`Gavel::with_round_skipping`]).
    skip_rounds: bool,
    /// Timers to ask for (a skipping partition woken by an event).
    wakes: Vec<u64>,
}

/// A greedy entry: (priority, deficit, allocation, job, GPUs).
type Entry = (f64, f64, f64, JobId, u32);

impl Gavel {
    /// Gavel with `opts` and `objective` on `cluster`; throughputs from `db`
    /// when the run reads one (else 1.0 everywhere).
    pub fn new(opts: GavelOptions, objective: GavelObjective, cluster: &Cluster, db: Option<Arc<ProfileDb>>) -> Self {
        let vcs = cluster
            .partitions()
            .iter()
            .map(|p| {
                let mut caps: BTreeMap<String, u32> = BTreeMap::new();
                for &n in &p.nodes {
                    *caps.entry(cluster.node(n).gpu_type.clone()).or_default() += cluster.node(n).gpus;
                }
                let (types, cap): (Vec<String>, Vec<u32>) = caps.into_iter().unzip();
                let k = types.len();
                VcState {
                    types,
                    cap,
                    order: (0..k).collect(),
                    jobs: BTreeMap::new(),
                    running: BTreeMap::new(),
                    round_start: SimTime::ZERO,
                    round_end: None,
                    skipping: false,
                    wake: None,
                    need_alloc: false,
                    last_reset: None,
                    worker_time: vec![0.0; k],
                    run_n: vec![0; k],
                    since_sum: vec![0; k],
                }
            })
            .collect();
        Gavel {
            objective,
            opts,
            round_ms: (opts.round * 1000.0).round().max(1.0) as u64,
            reset_ms: (opts.reset_interval * 1000.0).round() as u64,
            model: db.map(TableModel::new),
            vcs,
            dirty: BTreeSet::new(),
            timers: BTreeSet::new(),
            plan: VecDeque::new(),
            plan_vc: 0,
            counters: Counters::default(),
            mark: Vec::new(),
            entries: Vec::new(),
            skip_rounds: true,
            wakes: Vec::new(),
        }
    }

    /// With `on = false`, every round boundary is a timer and a pass, as
    /// before round skipping; the schedule is the same either way (the
    /// skipped rounds are the ones that provably decide nothing), so this is
    /// for tests that compare the two.
    pub fn with_round_skipping(mut self, on: bool) -> Self {
        self.skip_rounds = on;
        self
    }

    /// Ends partition `v`'s skipping at `now` (an arrival, a completion or
    /// its wake-up): the boundaries before `now` are counted as the no-op
    /// rounds they would have been, a boundary at `now` is a round due now,
    /// and a later one is returned: the timer to ask for, as if every
    /// boundary had had one (unless the round ends now anyway).
    fn catch_up(&mut self, v: usize, now: u64) -> Option<u64> {
        let round_ms = self.round_ms;
        let vc = &mut self.vcs[v];
        if !std::mem::take(&mut vc.skipping) {
            return None;
        }
        vc.wake = None;
        let mut end = vc.round_end?;
        if end < now {
            let k = (now - end).div_ceil(round_ms);
            self.counters.rounds += k;
            end += k * round_ms;
            vc.round_end = Some(end);
        }
        if end == now {
            self.dirty.insert(v as u16);
            None
        } else {
            Some(end)
        }
    }

    /// After a round of partition `v` at `now` that decided nothing and
    /// left jobs running: whether every later round decides nothing too
    /// until an arrival or a completion, and the boundary at which a pending
    /// reset falls due (which must run). `greedy_fixed` says that the round's
    /// greedy took, on each type, every job of positive priority there (so
    /// the order of the priorities, the only thing that moves with time,
    /// chose nothing).
    ///
    /// Why nothing changes: between events the job set, the running set
    /// (no decision) and the allocation (recomputed only at a reset) stay as
    /// they are; the set of positive priorities on each type is the set of
    /// jobs with `X_mj > 0` there, so the greedy takes the same jobs of
    /// positive priority on each type whatever their order, then the
    /// priority-0 jobs in (deficit, allocation, id) order, which only a
    /// reset changes; so it takes the same jobs on the same types, which are
    /// the running ones. The time counters move, but lazily (`time_on`,
    /// `worker_time_at`), exactly as in a round that decides nothing.
    fn stable_after(&self, v: usize, now: u64, greedy_fixed: bool) -> Option<Option<u64>> {
        let vc = &self.vcs[v];
        if !self.skip_rounds || !greedy_fixed || vc.running.is_empty() {
            return None;
        }
        if !vc.need_alloc {
            return Some(None);
        }
        // A reset is pending (the job set changed) but the interval has not
        // passed: it falls due at the first boundary `now + k·round` at least
        // `reset_ms` after the last reset; that round runs.
        let last = vc.last_reset?;
        let k = (last + self.reset_ms).saturating_sub(now).div_ceil(self.round_ms).max(1);
        Some(Some(now + k * self.round_ms))
    }

    /// A job's relative throughput on each of the partition's types, and
    /// under `gavel-max-sum` its absolute one (steps/s; see the module docs).
    fn throughputs(&mut self, spec: &JobSpec, view: &View<'_>) -> (Vec<f64>, Vec<f64>) {
        let max_sum = self.objective == GavelObjective::MaxSum;
        let vc = &self.vcs[spec.vc.index()];
        let req = request(view, spec.id);
        let p = view.cluster.partition(spec.vc);
        let usable: Vec<bool> = vc
            .types
            .iter()
            .zip(&vc.cap)
            .map(|(t, &c)| {
                spec.gpus <= c
                    && p.nodes.iter().any(|&n| &view.cluster.node(n).gpu_type == t && req.fits_node(view.cluster, n))
            })
            .collect();
        let measured: Option<Vec<Option<f64>>> = match (&self.model, spec.model(), spec.local_bsz()) {
            // A work-defined job: samples/s of its tuned configuration on
            // each type, from the run's progress model (Sia's per-type
            // tables), as the Sia artifact's Gavel reads its throughputs.
            _ if spec.elastic().is_some() && view.progress_model().is_some() => {
                let (Some(es), Some(pm)) = (spec.elastic(), view.progress_model()) else { unreachable!("checked") };
                if max_sum {
                    // Steps/s, each type at its own batch limits, calibrated.
                    Some(vc.types.iter().map(|t| elastic_steps_per_s(view, pm, es, t)).collect())
                } else {
                    Some(vc.types.iter().map(|t| elastic_throughput(view, pm, es, t)).collect())
                }
            }
            (Some(model), Some(name), Some(bsz)) => {
                let split: Vec<u32> =
                    if spec.recorded_split.is_empty() { vec![spec.gpus] } else { spec.recorded_split.to_vec() };
                Some(
                    vc.types
                        .iter()
                        .map(|t| {
                            let e = model.iter_time(name, &t.to_ascii_lowercase(), bsz, &split);
                            (!e.fallbacks.gpu_type && !e.fallbacks.model && e.iter_time_s > 0.0)
                                .then(|| 1.0 / e.iter_time_s)
                        })
                        .collect(),
                )
            }
            _ => None,
        };
        match measured {
            None => {
                self.counters.unit_jobs += 1;
                let thr: Vec<f64> = usable.iter().map(|&u| if u { 1.0 } else { 0.0 }).collect();
                let raw = if max_sum { thr.clone() } else { Vec::new() };
                (thr, raw)
            }
            Some(raw) => {
                let best = raw.iter().zip(&usable).filter(|(_, u)| **u).filter_map(|(r, _)| *r).fold(0.0, f64::max);
                let mut fell_back = false;
                let thr: Vec<f64> = raw
                    .iter()
                    .zip(&usable)
                    .map(|(r, &u)| match (u, r) {
                        (false, _) => 0.0,
                        (true, Some(r)) if best > 0.0 => r / best,
                        (true, _) => {
                            fell_back = true;
                            1.0
                        }
                    })
                    .collect();
                if fell_back {
                    self.counters.fallback_jobs += 1;
                }
                // Absolute: the relative value times the fastest measured
                // type's (a fallback type counts as that one).
                let raw = match (max_sum, best > 0.0) {
                    (false, _) => Vec::new(),
                    (true, true) => thr.iter().map(|t| t * best).collect(),
                    // No type measured: 1.0 step/s on every usable type.
                    (true, false) => thr.clone(),
                };
                (thr, raw)
            }
        }
    }

    /// Recomputes partition `v`'s allocation and resets its time counters.
    fn reset(&mut self, v: usize, now: u64) {
        let vc = &mut self.vcs[v];
        // `keep-counters`: the counters (and deficits) stay as they are.
        if !self.opts.keep_counters {
            vc.reset_counters(self.opts.round / 2.0, now);
        }
        vc.last_reset = Some(now);
        vc.need_alloc = false;
        let ids: Vec<JobId> = vc.jobs.keys().copied().collect();
        let gpus: Vec<u32> = vc.jobs.values().map(|b| b.gpus).collect();
        let thr: Vec<Vec<f64>> = vc.jobs.values().map(|b| b.thr.clone()).collect();
        self.counters.allocations += 1;
        let x =
            match self.objective {
                GavelObjective::Fifo => fifo_allocation(&vc.cap, &gpus, &thr),
                GavelObjective::MaxSum => {
                    self.counters.closed_form += 1;
                    let raw: Vec<Vec<f64>> = vc.jobs.values().map(|b| b.raw.clone()).collect();
                    max_sum_allocation(&vc.cap, &gpus, &raw)
                }
                GavelObjective::MaxMin if vc.types.len() == 1 && self.opts.solver == GavelSolver::Auto => {
                    self.counters.closed_form += 1;
                    let ok: Vec<usize> = (0..ids.len()).filter(|&m| thr[m][0] > 0.0).collect();
                    let fill = water_fill(vc.cap[0], &ok.iter().map(|&m| gpus[m]).collect::<Vec<_>>());
                    let mut x = vec![vec![0.0]; ids.len()];
                    for (k, &m) in ok.iter().enumerate() {
                        x[m][0] = fill[k];
                    }
                    x
                }
                GavelObjective::MaxMin => {
                    self.counters.lp_solves += 1;
                    #[cfg(feature = "lp")]
                    let solved = max_min_lp(&vc.cap, &gpus, &thr);
                    // Without the solver (the registry refuses `gavel` then)
                    // every LP counts as failed.
                    #[cfg(not(feature = "lp"))]
                    let solved: Result<Vec<Vec<f64>>, String> = Err("no LP solver (the `lp` feature is off)".into());
                    match solved {
                        Ok(x) => x,
                        Err(_) => {
                            // Counted; every job gets an equal share of each type it can use.
                            self.counters.lp_failures += 1;
                            let n = ids.len().max(1) as f64;
                            thr.iter()
                                .zip(&gpus)
                                .map(|(r, &s)| {
                                    r.iter()
                                        .zip(&vc.cap)
                                        .map(|(&t, &c)| {
                                            if t > 0.0 { snap((f64::from(c) / n / f64::from(s)).min(1.0)) } else { 0.0 }
                                        })
                                        .collect()
                                })
                                .collect()
                        }
                    }
                }
            };
        // Fastest type first: mean relative throughput over the jobs, ties by name.
        let k = vc.types.len();
        let mean: Vec<f64> = (0..k).map(|j| thr.iter().map(|r| r[j]).sum::<f64>()).collect();
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by(|&a, &b| mean[b].total_cmp(&mean[a]).then(a.cmp(&b)));
        vc.order = order;
        for (id, row) in ids.iter().zip(x) {
            if let Some(b) = vc.jobs.get_mut(id) {
                b.alloc = Some(row);
            }
        }
    }

    /// Plans a round of partition `v` at `now`.
    fn plan_round(&mut self, v: usize, view: &View<'_>) {
        let now = view.now.as_ms();
        self.plan.clear();
        self.plan_vc = v;
        self.vcs[v].skipping = false;
        self.vcs[v].wake = None;
        // 1. The ended round's time is counted lazily (`Book::time_on`,
        // `VcState::worker_time_at`): the same sums, read at `now`.
        if self.vcs[v].jobs.is_empty() {
            self.vcs[v].round_end = None;
            self.vcs[v].running.clear();
            return;
        }
        self.counters.rounds += 1;
        // 2. The allocation.
        let vc = &self.vcs[v];
        let interval_passed = vc.last_reset.is_none_or(|l| now - l >= self.reset_ms);
        let idle = vc.running.is_empty();
        if vc.need_alloc && (interval_passed || idle) {
            self.reset(v, now);
        }
        let end = now + self.round_ms;
        let vc = &self.vcs[v];
        if vc.types.len() == 1 && vc.running.len() == vc.jobs.len() {
            // Every active job runs on the partition's one type: the greedy
            // takes them all on the type they run on, so nothing changes.
            self.end_round(v, view.now, end, true);
            return;
        }
        // 3-4. Priorities and the greedy.
        let stamp = self.counters.rounds;
        let vc = &self.vcs[v];
        let fifo = self.objective == GavelObjective::Fifo;
        let mut left = vc.cap.clone();
        let mut taken: Vec<(JobId, usize)> = Vec::new();
        let mut greedy_fixed = true;
        let mut entries = std::mem::take(&mut self.entries);
        for &j in &vc.order {
            let wt = vc.worker_time_at(j, now);
            entries.clear();
            entries.extend(vc.jobs.iter().filter(|(_, b)| b.thr[j] > 0.0).map(|(&id, b)| {
                let a = b.alloc.as_ref().map_or(0.0, |a| a[j]);
                let prio = if a <= 0.0 {
                    0.0
                } else if wt > 0.0 && b.time_on(j, now) > 0.0 {
                    a / (b.time_on(j, now) / wt)
                } else {
                    a * 1e9
                };
                (prio, b.deficit[j], a, id, b.gpus)
            }));
            // A total order (ties by job id): sorting only the prefix the
            // greedy reads gives the same sequence as a full sort.
            let cmp = |x: &Entry, y: &Entry| {
                y.0.total_cmp(&x.0).then(y.1.total_cmp(&x.1)).then(y.2.total_cmp(&x.2)).then(x.3.cmp(&y.3))
            };
            // The jobs of positive priority not taken on an earlier type:
            // if they fit together, the greedy takes them all whatever
            // their order (see `stable_after`).
            let positive: u64 = entries
                .iter()
                .filter(|e| e.0 > 0.0 && self.mark.get(e.3.index()).is_none_or(|m| m.0 != stamp))
                .map(|e| u64::from(e.4))
                .sum();
            greedy_fixed &= positive <= u64::from(left[j]);
            let n = entries.len();
            let mut sorted = (2 * left[j] as usize + 16).min(n);
            if sorted < n {
                entries.select_nth_unstable_by(sorted, cmp);
            }
            entries[..sorted].sort_unstable_by(cmp);
            for i in 0..n {
                if left[j] == 0 {
                    break;
                }
                if i == sorted {
                    entries[sorted..].sort_unstable_by(cmp);
                    sorted = n;
                }
                let (prio, _, _, id, g) = entries[i];
                let i = id.index();
                if self.mark.len() <= i {
                    self.mark.resize(i + 1, (u64::MAX, 0));
                }
                if self.mark[i].0 == stamp || (fifo && prio <= 0.0) || g > left[j] {
                    continue;
                }
                left[j] -= g;
                self.mark[i] = (stamp, j);
                if vc.jobs[&id].alloc.is_some() {
                    taken.push((id, j));
                }
            }
        }
        self.entries = entries;
        // 5. Keep, preempt, launch.
        let taken_on = |mark: &[(u64, usize)], job: JobId| mark.get(job.index()).filter(|m| m.0 == stamp).map(|m| m.1);
        let mut keep: BTreeMap<JobId, usize> = BTreeMap::new();
        let mut stop: Vec<JobId> = Vec::new();
        for (&job, &t) in &vc.running {
            match taken_on(&self.mark, job) {
                Some(j) if j == t => {
                    keep.insert(job, j);
                }
                _ if matches!(view.jobs.state(job), JobState::Running(r) if r.work_done) => {
                    keep.insert(job, t);
                }
                _ => {
                    stop.push(job);
                    self.plan.push_back(Step::Preempt(job));
                }
            }
        }
        let mut launch: Vec<(u32, JobId, usize)> =
            taken.iter().filter(|(id, _)| !keep.contains_key(id)).map(|&(id, j)| (vc.jobs[&id].gpus, id, j)).collect();
        launch.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let quiet = stop.is_empty() && launch.is_empty();
        self.plan.extend(launch.into_iter().map(|(_, id, j)| Step::Launch(id, j)));
        let vc = &mut self.vcs[v];
        for job in stop {
            vc.stop(job, now);
        }
        debug_assert_eq!(vc.running, keep);
        self.end_round(v, view.now, end, quiet && greedy_fixed);
    }

    /// Ends the planning of partition `v`'s round at `now`, the next
    /// boundary being `end`: a timer there, unless the round decided nothing
    /// and every later one provably decides nothing either (`fixed`, then
    /// [`Gavel::stable_after`]), when the partition skips them.
    fn end_round(&mut self, v: usize, now: SimTime, end: u64, fixed: bool) {
        let stable = self.stable_after(v, now.as_ms(), fixed);
        let vc = &mut self.vcs[v];
        vc.round_start = now;
        vc.round_end = Some(end);
        match stable {
            Some(wake) => {
                vc.skipping = true;
                vc.wake = wake;
                self.plan.extend(wake.map(Step::Wake));
            }
            None => self.plan.push_back(Step::Wake(end)),
        }
    }

    /// GPUs of type `ty` in `job`'s partition for it: the fullest node that
    /// holds it whole, else the freest nodes of that type.
    fn place(&self, view: &View<'_>, job: JobId, ty: &str) -> Option<Vec<GpuId>> {
        let spec = view.jobs.spec(job);
        let req = request(view, job);
        let p = view.cluster.partition(spec.vc);
        let nodes: Vec<(NodeId, u32)> = p
            .nodes
            .iter()
            .filter(|&&n| view.cluster.node(n).gpu_type == ty && req.fits_node(view.cluster, n))
            .map(|&n| (n, view.cluster.node_free(n)))
            .filter(|&(_, f)| f > 0)
            .collect();
        let mut out = Vec::with_capacity(spec.gpus as usize);
        if let Some(&(n, _)) = nodes.iter().filter(|&&(_, f)| f >= spec.gpus).min_by_key(|&&(n, f)| (f, n)) {
            return view.cluster.take_free_gpus(n, spec.gpus, &mut out).then_some(out);
        }
        let mut by_free = nodes;
        by_free.sort_by_key(|&(n, f)| (std::cmp::Reverse(f), n));
        let mut left = spec.gpus;
        for (n, f) in by_free {
            let take = f.min(left);
            if !view.cluster.take_free_gpus(n, take, &mut out) {
                return None;
            }
            left -= take;
            if left == 0 {
                return Some(out);
            }
        }
        None
    }
}

impl Policy for Gavel {
    fn name(&self) -> String {
        match self.objective {
            GavelObjective::MaxMin => "gavel".into(),
            GavelObjective::Fifo => "gavel-fifo".into(),
            GavelObjective::MaxSum => "gavel-max-sum".into(),
        }
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let spec = view.jobs.spec(job);
        let (thr, raw) = self.throughputs(spec, view);
        if thr.iter().all(|&t| t <= 0.0) {
            // No GPU type of its partition can hold it whole: Gavel runs a
            // job on one type, so it never starts (counted; it ends the run
            // unfinished).
            self.counters.unschedulable += 1;
            return;
        }
        let v = spec.vc.index();
        let wake = self.catch_up(v, view.now.as_ms());
        self.wakes.extend(wake);
        let k = self.vcs[v].types.len();
        let half = self.opts.round / 2.0;
        let vc = &mut self.vcs[v];
        if self.opts.keep_counters {
            // The artifact's `add_jobs`: `_cluster_time[cname] += job_time`.
            vc.worker_time.iter_mut().for_each(|w| *w += half);
        }
        vc.jobs.insert(
            job,
            Book { gpus: spec.gpus, thr, raw, alloc: None, job_time: vec![half; k], deficit: vec![0.0; k], on: None },
        );
        vc.need_alloc = true;
        if vc.round_end.is_none() {
            self.dirty.insert(spec.vc.0);
        }
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        let v = view.jobs.spec(job).vc.index();
        let wake = self.catch_up(v, view.now.as_ms());
        let vc = &mut self.vcs[v];
        let was_running = vc.running.contains_key(&job);
        vc.stop(job, view.now.as_ms());
        vc.jobs.remove(&job);
        vc.need_alloc = true;
        if was_running && vc.running.is_empty() {
            // Every job of the round has finished: the round ends now.
            self.dirty.insert(v as u16);
        } else {
            self.wakes.extend(wake);
        }
    }

    fn on_timer(&mut self, view: &View<'_>) {
        let now = view.now.as_ms();
        self.timers.remove(&now);
        for v in 0..self.vcs.len() {
            let vc = &self.vcs[v];
            if vc.skipping {
                // Its boundaries stay skipped, unless a reset falls due now.
                if vc.wake == Some(now) {
                    let w = self.catch_up(v, now);
                    self.wakes.extend(w);
                }
            } else if vc.round_end == Some(now) {
                self.dirty.insert(v as u16);
            }
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        while let Some(t) = self.wakes.pop() {
            if self.timers.insert(t) {
                return Decision::WakeAt(SimTime::from_ms(t));
            }
        }
        loop {
            while let Some(step) = self.plan.pop_front() {
                match step {
                    Step::Preempt(job) => return Decision::Preempt { job },
                    Step::Launch(job, j) => {
                        let v = self.plan_vc;
                        let ty = self.vcs[v].types[j].clone();
                        if let Some(gpus) = self.place(view, job, &ty) {
                            self.vcs[v].start(job, j, view.now.as_ms());
                            return Decision::Launch { job, gpus };
                        }
                    }
                    Step::Wake(t) => {
                        let vc = &mut self.vcs[self.plan_vc];
                        if vc.running.is_empty() {
                            // Nothing could be placed: no timer (it would
                            // fire forever); the partition waits for an
                            // arrival as an idle one does.
                            vc.round_end = None;
                            continue;
                        }
                        if self.timers.insert(t) {
                            return Decision::WakeAt(SimTime::from_ms(t));
                        }
                    }
                }
            }
            let Some(v) = self.dirty.pop_first() else { return Decision::Wait };
            self.plan_round(usize::from(v), view);
        }
    }

    fn metrics(&self, _jobs: &JobTable) -> Vec<(&'static str, f64)> {
        let c = &self.counters;
        vec![
            ("gavel_rounds", c.rounds as f64),
            ("gavel_allocations", c.allocations as f64),
            ("gavel_lp_solves", c.lp_solves as f64),
            ("gavel_closed_form_solves", c.closed_form as f64),
            ("gavel_lp_failures", c.lp_failures as f64),
            ("gavel_unit_throughput_jobs", c.unit_jobs as f64),
            ("gavel_type_fallback_jobs", c.fallback_jobs as f64),
            ("gavel_unschedulable_jobs", c.unschedulable as f64),
        ]
    }
}
