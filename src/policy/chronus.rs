//! Chronus (W. Gao et al., *Chronus: A Novel Deadline-aware Scheduler for
//! Deep Learning Training Jobs*, SoCC 2021) as ElasticFlow ran it as a
//! baseline (pkusys/ElasticFlow @ 04a0109a, `ElasticFlow/chronus-scheduler`:
//! `alg/scheduler/time_aware_with_lease.py`, `alg/scheduler/solver.py`
//! `MIPSolver.job_selection`, `utils/convert_ef_trace_to_chronus.py`), with
//! the flags of `run_fig8a.sh`: `--schedule=time-aware-with-lease
//! --aggressive=True --mip_objective=adaptive --placement=local_search
//! --profile=True --check_time_interval=60 --disable_turn_off=True
//! --lease_term_interval=240`.
//!
//! Jobs are ElasticFlow's (work-defined, `jobs-csv` `num_iteration` at a
//! fixed global batch, with a `deadline`), refused otherwise before the run
//! starts as for [`super::elasticflow`]. The converter makes every job an
//! SLO job (`best_effort` 0) with one deadline option (`expect_time_list` =
//! deadline − submit, value 10) on the GPUs its trace row asks for: jobs
//! are **rigid**, each runs on its `num_gpu` GPUs or not at all.
//!
//! # Rules
//!
//! - **Leases.** Time is cut into leases of [`ChronusOptions::lease_s`]
//!   (240 s), from time 0 of the trace's clock. Everything is decided at
//!   lease boundaries: a job that ends within a lease leaves its GPUs idle
//!   until the next boundary (with `check_time_interval` 60 and the
//!   simulator's `BEST_SLOT` 240, its 60-s ticks only settle completions,
//!   and its `filling_jobs` never runs: `cur_time % BEST_EFFORT` is 0 at
//!   every tick). A job arriving within a lease is first seen at the next
//!   boundary (`flush_event_jobs_with_cache_solution`, after that
//!   boundary's integer program).
//! - **Estimates** (`flush_event_jobs_with_cache_solution`). A job of `g`
//!   GPUs and duration `d` s on them (its iterations at the throughput
//!   table's rate on `g` GPUs; the simulator reads the trace's `duration`,
//!   the same figure) is budgeted `est = ⌊d · (1 + (1 + log2 g) · 0.5 /
//!   240) · 1.1⌋` s (checkpoint 0.1 s + resume 0.4 s per lease, 10 %
//!   margin) and needs `⌈est / 240⌉` leases. Its resource in the program is
//!   `g` rounded up to 4 or 8 (`convert_to_bin`: 3 → 4, 5-7 → 8).
//! - **Admission.** A newcomer whose deadline leaves at least the leases it
//!   needs (whole leases from the next boundary to its deadline,
//!   `compute_maximum_lease`: `⌊deadline / 240⌋ − lease index`) and that
//!   fits beside the accepted jobs (greedy packing, below) is an *accepted
//!   SLO* job: its GPUs are
//!   guaranteed for its leases. Otherwise it is *unaccepted*: it is not
//!   refused (Chronus rejects no job), it runs on GPUs the accepted jobs
//!   leave, and it counts as missed if it ends after its deadline.
//! - **Integer program** (`flush_lease_jobs`, `job_selection`), at every
//!   boundary, over the accepted jobs that still need leases: binary `x[i,
//!   t]`, job `i` runs in lease `t` (only before its deadline lease),
//!   `Σ_t x[i, t] = leases_i · s_i`, at most the cluster's GPUs per lease
//!   (`Σ_i res_i x[i, t] ≤ G`); maximise `10 Σ s_i ± Σ_i res_i x[i, 0] / G`:
//!   `+` (run accepted jobs now) while no unaccepted job is in the system,
//!   `−` (leave this lease's GPUs to unaccepted jobs) otherwise
//!   (`--mip_objective=adaptive`: `maximize` unless `number_of_accepted`,
//!   the count of unaccepted jobs at the last boundary plus newcomers not
//!   accepted since, is positive). Jobs with `x[i, 0] = 1` get their GPUs
//!   for the lease and need one lease less. Solved exactly by `microlp`
//!   0.2 (the artifact: Gurobi, 5-s limit); solve time per program in
//!   [`Policy::solver_rounds`].
//! - **Progress and budgets** (`flush_running_jobs`, `flush_lease_jobs`). A
//!   job's leases left drop to `⌈(est − progress) / 240⌉` when that is
//!   fewer (progress = the seconds of work done at its rate). A job that has
//!   run (held GPUs) for its whole budget `est` and is not done becomes
//!   unaccepted with top priority among them (`fake_force_guarantee`).
//! - **Hopeless jobs** (`flush_pending_jobs`). A waiting job that cannot
//!   finish by its deadline even if it ran from now (the deadline rounded
//!   down to a lease for an accepted job, `uesr_specified_deadline_time`)
//!   is demoted to the lowest class.
//! - **Leftover GPUs** (`opportunistic_run`; with leases over 30 s accepted
//!   jobs never take them). The waiting jobs that are not accepted, ordered
//!   by (budget exhausted first, unaccepted before lowest, then *emergence*
//!   descending: `−(est − progress) · g` for unaccepted jobs (least GPU-time
//!   left first), `(now + est − progress − deadline) · g` for the lowest
//!   (latest first), then earlier submission), each take their GPUs if
//!   that many are free (first fit, skipping those that do not fit).
//! - **Placement.** Every running job is stopped at each boundary and the
//!   chosen ones placed again; one that keeps running keeps its GPUs (no
//!   re-allocation; the simulator charges only resumes). The others take
//!   GPUs node by node, most free node first, larger jobs first
//!   ([`super::elasticflow`]'s rule).
//!
//! # Our readings and simplifications
//!
//! - **Time-aggregated program (ours).** The artifact has one binary per job
//!   and lease up to the furthest deadline (thousands of leases on these
//!   traces; Gurobi stops after 5 s with what it has; microlp's branch and
//!   bound would not finish). Here the first [`ChronusOptions::exact_leases`]
//!   leases (lease 0, the one decided now, among them) have one binary per
//!   job and lease as in the artifact; later leases are grouped into windows
//!   between consecutive deadline leases of the jobs (within a window every
//!   job may use either all its leases or none), with one continuous
//!   variable per job and window (its leases there, at most the window's
//!   length) and the window's capacity `G × length`. Leases, deadlines and
//!   lease 0 stay exact; the packing inside a window is relaxed (fractional
//!   leases, and jobs of different sizes may not fit lease by lease as the
//!   totals say). An accepted job whose plan proves too optimistic later
//!   needs more leases than its deadline leaves, and the program drops it.
//! - **Dropping instead of failing (ours).** The artifact forces `s_i = 1`
//!   (every accepted job keeps its guarantee) and falls back to a greedy
//!   repair when that is infeasible; here `s_i` is free, so the program
//!   keeps as many accepted jobs as it can (the weight 10 per job dominates
//!   the ±1 of the lease-0 term), and a dropped job becomes unaccepted (as
//!   the artifact's repair marks a job it cannot place).
//! - **Admission and lease-by-lease plans.** The artifact admits a newcomer
//!   by its greedy packing (`batch_fast_check_if_packable`: more GPUs first,
//!   then less slack, then later deadline; each job takes its latest leases
//!   with room first) on the GPUs per lease that the accepted jobs' plans
//!   (`cache_solution`, from its last program) leave, together with the
//!   accepted jobs that have no plan yet (newcomers of the same boundary,
//!   tested one at a time in job order); so do we. The plans, **ours**: the
//!   program above has no lease-by-lease solution, so after each program the
//!   accepted jobs' remaining leases (from the next lease) are laid out by
//!   the same greedy packing (the artifact's `batch_fast_job_selection`); a
//!   job it cannot lay out holds no leases there (admission is then
//!   optimistic by its leases).
//! - **Placement (ours).** The artifact's `local_search` searches node splits
//!   for the best profiled speed, but its simulated progress ignores
//!   placement (`compute_progress` returns 1.0), as our ElasticFlow rate
//!   model does ([`crate::profile::elasticflow`]): any placement of the
//!   right GPU count gives the same run, so we use the simpler rule above.
//! - **Re-allocation cost.** The run's re-scale delay (`--rescale-delay`) at
//!   every start and resume; the simulator adds `0.5 × (1 + log2 g)` s per
//!   resume to the job's duration. Progress is the model's (work done), so
//!   the delay slows a job's plan, which the budget rule then catches.
//! - **Deadline met.** The run's own metric: done by the trace's deadline.
//!   The artifact's `summary_all_jobs` compares an accepted job with its
//!   deadline rounded down to a lease (stricter by less than 240 s).
//! - Not modelled: the artifact's noise injection (off in this
//!   configuration), its profiler (`--profile=True` only sets placement
//!   rewards, unused by the simulated progress), node power-off
//!   (`--disable_turn_off=True`), `MAX_SEARCH_JOB` (4,800 job options per
//!   program: never reached by these traces' jobs at once).
//! - A job the run's progress model cannot rate on its GPU count, or
//!   without a deadline (a simulation built without the run's check), is
//!   rejected ([`Decision::Reject`]), as `elasticflow` does.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::elasticflow::place;
use super::{Decision, Policy, SolverRound, View};
use crate::error::RunError;
use crate::ids::JobId;
use crate::time::SimTime;

/// The weight of one kept guarantee in the program's objective: the
/// converter's `expect_value_list` (10) for every job.
pub const KEEP_VALUE: f64 = 10.0;

/// Checkpoint plus resume cost per lease the estimate budgets, s
/// (`CHECKPOINT_OVER_HEAD` 0.1 + `RESUME_OVER_HEAD` 0.4).
pub const LEASE_OVERHEAD_S: f64 = 0.5;

/// Options of `chronus`. Names are kebab-case; unknown names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ChronusOptions {
    /// Lease term, s (`lease-s`; default 240, `--lease_term_interval` of
    /// `run_fig8a.sh`); 1 to 1e6.
    #[serde(alias = "lease_s")]
    pub lease_s: u64,
    /// Leases from now with one program variable per job and lease
    /// (`exact-leases`; default 1, lease 0 alone; later leases are aggregated,
    /// module docs);
    /// 1 to 1,000.
    #[serde(alias = "exact_leases")]
    pub exact_leases: u32,
}

impl Default for ChronusOptions {
    fn default() -> Self {
        ChronusOptions { lease_s: 240, exact_leases: 1 }
    }
}

impl BuildPolicy for ChronusOptions {
    fn validate(&self, kind: &str) -> Result<(), String> {
        if self.lease_s == 0 || self.lease_s > 1_000_000 {
            return Err(format!("{kind}: lease-s must be 1 to 1e6 s, got {}", self.lease_s));
        }
        if self.exact_leases == 0 || self.exact_leases > 1000 {
            return Err(format!("{kind}: exact-leases must be 1 to 1,000, got {}", self.exact_leases));
        }
        if !cfg!(feature = "lp") {
            return Err(format!("{kind} needs dlsched built with the `lp` feature (its integer program)"));
        }
        Ok(())
    }

    fn deadline_jobs_only(&self) -> bool {
        true
    }

    /// Its programs' solve times go to `timing.json`, as Sia's.
    fn time_decisions(&self) -> bool {
        true
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        super::pollux_sim::one_partition(kind, ctx.cluster)?;
        Ok(Box::new(Chronus::new(*self)))
    }
}

/// `convert_to_bin`: a job's GPUs as the program counts them (3 → 4, 5-7 → 8).
pub fn resource_bin(gpus: u32) -> u32 {
    match gpus {
        3 => 4,
        5..=7 => 8,
        g => g,
    }
}

/// A job's budget, s, for `duration_s` s of work on `gpus` GPUs with
/// leases of `lease_s` s (module docs, *Estimates*).
pub fn estimate_s(duration_s: f64, gpus: u32, lease_s: u64) -> u64 {
    let coef = 1.0 + (1.0 + f64::from(gpus.max(1)).log2()) * LEASE_OVERHEAD_S / lease_s as f64;
    (duration_s * coef * 1.1).floor().max(0.0) as u64
}

/// One accepted job in the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseJob {
    /// GPUs it counts for ([`resource_bin`]).
    pub gpus: u32,
    /// Leases it still needs.
    pub leases: u32,
    /// Leases from now (lease 0 the current one) that end by its deadline.
    pub max_lease: u32,
}

/// The sign of the program's lease-0 term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseObjective {
    /// None (admission: only how many keep their guarantee).
    Feasibility,
    /// `+Σ res x[i, 0] / G`: run accepted jobs now.
    Maximize,
    /// `−Σ res x[i, 0] / G`: leave this lease to unaccepted jobs.
    Minimize,
}

/// The program's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// Per job: keeps its guarantee (`s_i`).
    pub keep: Vec<bool>,
    /// Per job: runs in lease 0 (`x[i, 0]`).
    pub run_now: Vec<bool>,
    /// Variables of the program.
    pub variables: u32,
}

/// Solves the program (module docs, *Integer program* and *Time-aggregated
/// program*) for `jobs` on `gpus` GPUs per lease, with the first
/// `exact_leases` leases one by one. A job that needs no lease, more
/// leases than its deadline leaves, or more GPUs than there are is not
/// kept (and gets no variable).
///
/// # Errors
/// The solver's failure (not expected: keeping no job is feasible), or a
/// build without the `lp` feature.
#[cfg(feature = "lp")]
pub fn select(jobs: &[LeaseJob], gpus: u32, objective: LeaseObjective, exact_leases: u32) -> Result<Selection, String> {
    use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem, Variable};
    let n = jobs.len();
    let mut out = Selection { keep: vec![false; n], run_now: vec![false; n], variables: 0 };
    let ok: Vec<usize> = (0..n)
        .filter(|&i| jobs[i].leases >= 1 && jobs[i].leases <= jobs[i].max_lease && (1..=gpus).contains(&jobs[i].gpus))
        .collect();
    let Some(horizon) = ok.iter().map(|&i| jobs[i].max_lease).max() else { return Ok(out) };
    // Window edges: every lease up to `exact_leases`, every deadline lease.
    let mut cuts: BTreeSet<u32> = (1..=exact_leases.min(horizon)).collect();
    cuts.insert(1);
    cuts.extend(ok.iter().map(|&i| jobs[i].max_lease));
    let edges: Vec<u32> = cuts.into_iter().collect();
    let windows: Vec<(u32, u32)> = edges.windows(2).map(|w| (w[0], w[1])).collect();
    let g = f64::from(gpus);
    let mut pb = Problem::new(OptimizationDirection::Maximize);
    let mut s_vars = Vec::with_capacity(ok.len());
    let mut x0_vars = Vec::with_capacity(ok.len());
    let mut lease0 = LinearExpr::empty();
    let mut per_window: Vec<Vec<(Variable, f64)>> = vec![Vec::new(); windows.len()];
    for &i in &ok {
        let j = jobs[i];
        let res = f64::from(j.gpus);
        let s = pb.add_binary_var(KEEP_VALUE);
        let c0 = match objective {
            LeaseObjective::Feasibility => 0.0,
            LeaseObjective::Maximize => res / g,
            LeaseObjective::Minimize => -res / g,
        };
        let x0 = pb.add_binary_var(c0);
        lease0.add(x0, res);
        let mut need = LinearExpr::empty();
        need.add(x0, 1.0);
        need.add(s, -f64::from(j.leases));
        for (w, &(a, b)) in windows.iter().enumerate() {
            if b > j.max_lease {
                break;
            }
            let len = b - a;
            // Leases one by one (binary) up to `exact_leases`, then windows
            // of fractional lease counts (module docs).
            let y = if b <= exact_leases { pb.add_binary_var(0.0) } else { pb.add_var(0.0, (0.0, f64::from(len))) };
            need.add(y, 1.0);
            per_window[w].push((y, res));
            out.variables += 1;
        }
        pb.add_constraint(need, ComparisonOp::Eq, 0.0);
        s_vars.push(s);
        x0_vars.push(x0);
        out.variables += 2;
    }
    pb.add_constraint(lease0, ComparisonOp::Le, g);
    for (w, vars) in per_window.into_iter().enumerate() {
        if vars.is_empty() {
            continue;
        }
        let (a, b) = windows[w];
        let mut e = LinearExpr::empty();
        for (v, res) in vars {
            e.add(v, res);
        }
        pb.add_constraint(e, ComparisonOp::Le, g * f64::from(b - a));
    }
    let sol = pb.solve().map_err(|e| format!("chronus: the solver failed: {e}"))?;
    for (k, &i) in ok.iter().enumerate() {
        out.keep[i] = *sol.var_value(s_vars[k]) > 0.5;
        out.run_now[i] = out.keep[i] && *sol.var_value(x0_vars[k]) > 0.5;
    }
    Ok(out)
}

/// Without the `lp` feature: an error (the options refuse such a build).
///
/// # Errors
/// Always.
#[cfg(not(feature = "lp"))]
pub fn select(_jobs: &[LeaseJob], _gpus: u32, _objective: LeaseObjective, _exact: u32) -> Result<Selection, String> {
    Err("chronus needs the `lp` feature".into())
}

/// The artifact's greedy packing (`batch_fast_check_if_packable`,
/// `batch_fast_job_selection`): `jobs` in the order given, each taking, from
/// its last lease before its deadline backwards, the leases where `free`
/// (GPUs per lease from lease 0) still has its GPUs, until it has the
/// leases it needs. Per job its leases (from lease 0), or `None` when it
/// could not get them all (what it took is then given back).
pub fn pack_latest_first(free: &mut [u32], jobs: &[LeaseJob]) -> Vec<Option<Vec<u32>>> {
    jobs.iter()
        .map(|j| {
            let mut got = Vec::new();
            let top = (j.max_lease as usize).min(free.len());
            for t in (0..top).rev() {
                if got.len() as u32 == j.leases {
                    break;
                }
                if free[t] >= j.gpus {
                    free[t] -= j.gpus;
                    got.push(t as u32);
                }
            }
            if got.len() as u32 == j.leases {
                Some(got)
            } else {
                for &t in &got {
                    free[t as usize] += j.gpus;
                }
                None
            }
        })
        .collect()
}

/// The artifact's packing order (`batch_fast_check_if_packable`): more GPUs
/// first, then less slack (`max_lease − leases`), then later deadline;
/// ties keep their order.
pub fn packing_order(jobs: &mut [(JobId, LeaseJob)]) {
    jobs.sort_by_key(|(_, j)| {
        (std::cmp::Reverse(j.gpus), i64::from(j.max_lease) - i64::from(j.leases), std::cmp::Reverse(j.max_lease))
    });
}

/// A job's class (the simulator's `queue_priority`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// `ACCEPTED_SLO`: guaranteed leases.
    Accepted,
    /// `UNACCEPTED_SLO`: leftover GPUs only.
    Unaccepted,
    /// `LOWEST`: cannot meet its deadline any more; leftover GPUs last.
    Lowest,
}

impl Class {
    /// `min(queue_priority, UNACCEPTED_SLO)` of `best_func`.
    fn rank(self) -> i32 {
        match self {
            Class::Lowest => -1,
            Class::Accepted => 0,
            Class::Unaccepted => 1,
        }
    }
}

/// What the policy keeps of a job.
#[derive(Clone, Debug)]
struct Job {
    /// GPUs (the trace's).
    gpus: u32,
    /// Iterations/s on them.
    rate: f64,
    /// Iterations to do.
    target: f64,
    /// Budget, s.
    est_s: u64,
    /// Deadline, ms (absolute).
    deadline_ms: u64,
    /// Deadline the class rules compare with, s (absolute): rounded down to
    /// a lease once accepted.
    rule_deadline_s: f64,
    /// Submit time, ms.
    submit_ms: u64,
    class: Class,
    /// Leases it still needs (accepted jobs).
    leases: u32,
    /// Budget exhausted (`fake_force_guarantee`).
    forced: bool,
    /// Time it has held GPUs, ms, up to its last boundary.
    executed_ms: u64,
    /// When it last got GPUs (while it holds them).
    run_since: Option<u64>,
    /// Its planned future leases (absolute indices), laid out after the
    /// last program (accepted jobs; empty when none or not laid out).
    plan: Vec<u64>,
}

/// `chronus`; see the module docs.
pub struct Chronus {
    opts: ChronusOptions,
    lease_ms: u64,
    /// Seen at a boundary and not complete.
    jobs: BTreeMap<JobId, Job>,
    /// Arrived since the last boundary.
    arrived: Vec<JobId>,
    plan: VecDeque<Decision>,
    /// The last boundary scheduled, ms.
    last_boundary: Option<u64>,
    /// Timers asked for and not delivered.
    timers: BTreeSet<SimTime>,
    /// `number_of_accepted` (module docs, *Integer program*).
    unaccepted_now: usize,
    rounds: Vec<SolverRound>,
    solver_failures: u64,
    /// Newcomers not accepted.
    not_admitted: u64,
    /// Accepted jobs later demoted (dropped by the program or out of budget).
    demoted: u64,
}

impl Chronus {
    /// The policy with `opts`.
    pub fn new(opts: ChronusOptions) -> Self {
        Chronus {
            opts,
            lease_ms: opts.lease_s.saturating_mul(1000).max(1),
            jobs: BTreeMap::new(),
            arrived: Vec::new(),
            plan: VecDeque::new(),
            last_boundary: None,
            timers: BTreeSet::new(),
            unaccepted_now: 0,
            rounds: Vec::new(),
            solver_failures: 0,
            not_admitted: 0,
            demoted: 0,
        }
    }

    /// The solver rounds so far.
    pub fn rounds(&self) -> &[SolverRound] {
        &self.rounds
    }

    /// Solves and records one program at `now`.
    fn solve(&mut self, now: SimTime, jobs: &[LeaseJob], gpus: u32, objective: LeaseObjective) -> Option<Selection> {
        let t0 = std::time::Instant::now();
        let r = select(jobs, gpus, objective, self.opts.exact_leases);
        let solve_s = t0.elapsed().as_secs_f64();
        match r {
            Ok(sel) => {
                self.rounds.push(SolverRound {
                    at_s: now.as_secs_f64(),
                    jobs: jobs.len() as u32,
                    variables: sel.variables,
                    solve_s,
                });
                Some(sel)
            }
            Err(_) => {
                self.solver_failures += 1;
                None
            }
        }
    }

    /// Iterations done by `j` now.
    fn progress(view: &View<'_>, j: JobId) -> f64 {
        view.elastic(j).map_or(0.0, |e| e.progress)
    }

    /// The job as the policy keeps it, or `None` (reject) for one without a
    /// deadline or that the model cannot rate on its GPUs.
    fn read(&self, view: &View<'_>, j: JobId) -> Option<Job> {
        let spec = view.jobs.spec(j);
        let deadline = spec.deadline()?;
        let e = spec.elastic()?;
        let model = view.progress_model()?;
        let gpus = spec.gpus.max(1);
        let cfg = model.tuned_config(&e.app, &[gpus], e.tuned_bsz);
        let rate = model.goodput(&e.app, &cfg, 0.0).ok().filter(|r| r.is_finite() && *r > 0.0)?;
        let target = view.elastic(j).and_then(|s| s.target)?;
        let est_s = estimate_s(target / rate, gpus, self.opts.lease_s);
        Some(Job {
            gpus,
            rate,
            target,
            est_s,
            deadline_ms: deadline.as_ms(),
            rule_deadline_s: deadline.as_secs_f64(),
            submit_ms: spec.submit.as_ms(),
            class: Class::Unaccepted,
            leases: est_s.div_ceil(self.opts.lease_s).min(u64::from(u32::MAX)) as u32,
            forced: false,
            executed_ms: 0,
            run_since: None,
            plan: Vec::new(),
        })
    }

    /// Leases from lease `index` that end by `deadline_ms`.
    fn max_lease(&self, deadline_ms: u64, index: u64) -> u32 {
        (deadline_ms / self.lease_ms).saturating_sub(index).min(u64::from(u32::MAX)) as u32
    }

    /// The accepted jobs that still need leases, as program rows from lease `index`.
    fn accepted_rows(&self, index: u64) -> (Vec<JobId>, Vec<LeaseJob>) {
        let mut ids = Vec::new();
        let mut rows = Vec::new();
        for (&j, a) in &self.jobs {
            if a.class == Class::Accepted && a.leases > 0 {
                ids.push(j);
                rows.push(LeaseJob {
                    gpus: resource_bin(a.gpus),
                    leases: a.leases,
                    max_lease: self.max_lease(a.deadline_ms, index),
                });
            }
        }
        (ids, rows)
    }

    /// The scheduling of the boundary `now` (module docs, *Rules*).
    fn boundary(&mut self, view: &View<'_>) {
        let now = view.now;
        let now_ms = now.as_ms();
        let now_s = now.as_secs_f64();
        let lease_s = self.opts.lease_s as f64;
        let index = now_ms / self.lease_ms;
        let total = view.cluster.total_gpus();
        // Budgets and leases left of the jobs that ran in the last lease.
        for (&j, a) in self.jobs.iter_mut() {
            if let Some(since) = a.run_since.take() {
                a.executed_ms += now_ms.saturating_sub(since);
                if a.executed_ms >= a.est_s.saturating_mul(1000) {
                    if a.class == Class::Accepted {
                        self.demoted += 1;
                    }
                    a.class = Class::Unaccepted;
                    a.forced = true;
                }
            }
            if a.class == Class::Accepted {
                let done_s = Self::progress(view, j) / a.rate;
                let left = ((a.est_s as f64 - done_s) / lease_s).ceil().max(0.0) as u32;
                a.leases = a.leases.min(left);
            }
        }
        // The program over the accepted jobs.
        let objective = if self.unaccepted_now > 0 { LeaseObjective::Minimize } else { LeaseObjective::Maximize };
        let (ids, rows) = self.accepted_rows(index);
        let mut run: BTreeSet<JobId> = BTreeSet::new();
        if !rows.is_empty()
            && let Some(sel) = self.solve(now, &rows, total, objective)
        {
            for (k, &j) in ids.iter().enumerate() {
                let a = self.jobs.get_mut(&j).expect("accepted job");
                if !sel.keep[k] {
                    a.class = Class::Unaccepted;
                    self.demoted += 1;
                } else if sel.run_now[k] {
                    a.leases -= 1;
                    run.insert(j);
                }
            }
        }
        self.unaccepted_now = self.jobs.values().filter(|a| a.class == Class::Unaccepted).count();
        // Lease-by-lease plans of the accepted jobs from the next lease
        // (module docs, *Admission*), and the GPUs they leave per lease.
        let (ids, rows) = self.accepted_rows(index + 1);
        let mut order: Vec<(JobId, LeaseJob)> =
            ids.into_iter().zip(rows).filter(|(_, r)| r.leases <= r.max_lease).collect();
        packing_order(&mut order);
        let horizon = order.iter().map(|(_, r)| r.max_lease as usize).max().unwrap_or(0);
        let mut free = vec![total; horizon];
        let rows: Vec<LeaseJob> = order.iter().map(|(_, r)| *r).collect();
        let plans = pack_latest_first(&mut free, &rows);
        for a in self.jobs.values_mut() {
            a.plan.clear();
        }
        for ((j, _), p) in order.iter().zip(plans) {
            if let Some(p) = p {
                self.jobs.get_mut(j).expect("accepted job").plan =
                    p.into_iter().map(|t| index + 1 + u64::from(t)).collect();
            }
        }
        // Admission of the newcomers, from the next lease on.
        let mut arrived = std::mem::take(&mut self.arrived);
        arrived.sort_unstable();
        for j in arrived {
            let Some(mut a) = self.read(view, j) else {
                self.plan.push_back(Decision::Reject { job: j });
                continue;
            };
            let max_lease = self.max_lease(a.deadline_ms, index + 1);
            let mut admitted = false;
            if a.leases >= 1 && a.leases <= max_lease {
                // Accepted jobs without a plan (newcomers of this boundary)
                // and this one, packed on what the plans leave.
                let mut fresh: Vec<(JobId, LeaseJob)> = self
                    .jobs
                    .iter()
                    .filter(|(_, b)| b.class == Class::Accepted && b.leases > 0 && b.plan.is_empty())
                    .map(|(&k, b)| {
                        (
                            k,
                            LeaseJob {
                                gpus: resource_bin(b.gpus),
                                leases: b.leases,
                                max_lease: self.max_lease(b.deadline_ms, index + 1),
                            },
                        )
                    })
                    .collect();
                fresh.push((j, LeaseJob { gpus: resource_bin(a.gpus), leases: a.leases, max_lease }));
                packing_order(&mut fresh);
                let len = fresh.iter().map(|(_, r)| r.max_lease as usize).max().unwrap_or(0).max(free.len());
                let mut cap = free.clone();
                cap.resize(len, total);
                let rows: Vec<LeaseJob> = fresh.iter().map(|(_, r)| *r).collect();
                admitted = pack_latest_first(&mut cap, &rows).iter().all(Option::is_some);
            }
            if admitted {
                a.class = Class::Accepted;
                a.rule_deadline_s = ((a.deadline_ms / self.lease_ms) * self.lease_ms) as f64 / 1000.0;
            } else {
                self.not_admitted += 1;
                self.unaccepted_now += 1;
            }
            self.jobs.insert(j, a);
        }
        // Hopeless waiting jobs, then the leftover GPUs.
        let mut free = total.saturating_sub(run.iter().map(|j| self.jobs[j].gpus).sum::<u32>());
        let mut cands: Vec<(bool, i32, f64, u64, JobId)> = Vec::new();
        for (&j, a) in self.jobs.iter_mut() {
            if run.contains(&j) {
                continue;
            }
            let done_s = Self::progress(view, j) / a.rate;
            let true_left_s = (a.target / a.rate - done_s).max(0.0);
            if a.class != Class::Lowest && a.rule_deadline_s < now_s + true_left_s {
                if a.class == Class::Accepted {
                    self.demoted += 1;
                }
                a.class = Class::Lowest;
            }
            if a.class == Class::Accepted {
                continue;
            }
            let g = f64::from(a.gpus);
            let emergence = match a.class {
                Class::Unaccepted => -(a.est_s as f64 - done_s) * g,
                _ => -(a.rule_deadline_s - now_s - a.est_s as f64 + done_s) * g,
            };
            cands.push((a.forced, a.class.rank(), emergence, a.submit_ms, j));
        }
        // Descending (forced, class, emergence), then earlier submission, then job order.
        cands.sort_by(|x, y| {
            y.0.cmp(&x.0).then(y.1.cmp(&x.1)).then(y.2.total_cmp(&x.2)).then(x.3.cmp(&y.3)).then(x.4.cmp(&y.4))
        });
        for (_, _, _, _, j) in cands {
            let g = self.jobs[&j].gpus;
            if g <= free {
                free -= g;
                run.insert(j);
            }
        }
        let target: BTreeMap<JobId, u32> =
            self.jobs.iter().map(|(&j, a)| (j, if run.contains(&j) { a.gpus } else { 0 })).collect();
        for &j in &run {
            if let Some(a) = self.jobs.get_mut(&j) {
                a.run_since = Some(now_ms);
            }
        }
        self.plan.extend(place(view, &target));
    }

    /// The timer to the next boundary after `now`, if there is work and it
    /// was not asked for yet.
    fn next_timer(&mut self, now: SimTime) -> Decision {
        if self.jobs.is_empty() && self.arrived.is_empty() {
            return Decision::Wait;
        }
        let at = SimTime::from_ms((now.as_ms() / self.lease_ms + 1) * self.lease_ms);
        if self.timers.insert(at) { Decision::WakeAt(at) } else { Decision::Wait }
    }
}

impl Policy for Chronus {
    fn name(&self) -> String {
        "chronus".into()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.arrived.push(job);
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        self.jobs.remove(&job);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        while self.timers.first().is_some_and(|&t| t <= view.now) {
            self.timers.pop_first();
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        if let Some(d) = self.plan.pop_front() {
            return d;
        }
        let now_ms = view.now.as_ms();
        let at_boundary = now_ms.is_multiple_of(self.lease_ms);
        if at_boundary && self.last_boundary != Some(now_ms) && !(self.jobs.is_empty() && self.arrived.is_empty()) {
            self.last_boundary = Some(now_ms);
            self.boundary(view);
            if let Some(d) = self.plan.pop_front() {
                return d;
            }
        }
        self.next_timer(view.now)
    }

    fn solver_rounds(&self) -> Vec<SolverRound> {
        self.rounds.clone()
    }

    /// `chronus_not_admitted` (newcomers not accepted: run on leftover GPUs,
    /// not refused), `chronus_demoted` (accepted jobs that lost their
    /// guarantee), and `chronus_solver_failures` when the solver failed.
    fn metrics(&self, _jobs: &crate::job::JobTable) -> Vec<(&'static str, f64)> {
        let mut m = vec![("chronus_not_admitted", self.not_admitted as f64), ("chronus_demoted", self.demoted as f64)];
        if self.solver_failures > 0 {
            m.push(("chronus_solver_failures", self.solver_failures as f64));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_and_bins_are_the_artifacts() {
        // 5,644 s on 1 GPU: coef = 1 + 1 × 0.5 / 240 = 1.0020833; × 1.1 →
        // 5,644 × 1.10229167 = 6,221.334 → 6,221 s, 26 leases of 240 s.
        assert_eq!(estimate_s(5644.0, 1, 240), 6221);
        // 8 GPUs: coef = 1 + 4 × 0.5 / 240 = 1.0083333; 1,000 × 1.1091667 = 1,109.17 → 1,109.
        assert_eq!(estimate_s(1000.0, 8, 240), 1109);
        assert_eq!((resource_bin(3), resource_bin(5), resource_bin(7), resource_bin(16)), (4, 8, 8, 16));
    }

    #[cfg(feature = "lp")]
    #[test]
    fn the_program_keeps_the_most_jobs_then_weighs_lease_0() {
        // 4 GPUs. a: 4 GPUs, 2 leases by lease 2; b: 4 GPUs, 1 lease by
        // lease 1; c: 4 GPUs, 1 lease by lease 2. Leases 0 and 1 hold one
        // 4-GPU job each: a alone (1 job) or b in lease 0 and c in lease 1
        // (2 jobs): b and c keep their guarantee, a does not.
        let jobs = [
            LeaseJob { gpus: 4, leases: 2, max_lease: 2 },
            LeaseJob { gpus: 4, leases: 1, max_lease: 1 },
            LeaseJob { gpus: 4, leases: 1, max_lease: 2 },
        ];
        for exact in [1, 4] {
            let s = select(&jobs, 4, LeaseObjective::Maximize, exact).unwrap();
            assert_eq!(s.keep, vec![false, true, true], "exact {exact}");
            assert_eq!(s.run_now, vec![false, true, false], "exact {exact}");
        }
        // One 2-GPU job with 1 lease by lease 3 on 4 GPUs: maximising runs
        // it now (+0.5), minimising later (0 instead of −0.5).
        let one = [LeaseJob { gpus: 2, leases: 1, max_lease: 3 }];
        assert_eq!(select(&one, 4, LeaseObjective::Maximize, 4).unwrap().run_now, vec![true]);
        let min = select(&one, 4, LeaseObjective::Minimize, 4).unwrap();
        assert_eq!((min.keep, min.run_now), (vec![true], vec![false]));
        // A job needing more leases than its deadline leaves, or more GPUs
        // than there are, is not kept and has no variable.
        let bad = [LeaseJob { gpus: 1, leases: 3, max_lease: 2 }, LeaseJob { gpus: 8, leases: 1, max_lease: 5 }];
        let s = select(&bad, 4, LeaseObjective::Maximize, 4).unwrap();
        assert_eq!((s.keep, s.variables), (vec![false, false], 0));
    }

    #[cfg(feature = "lp")]
    #[test]
    fn windows_aggregate_leases_between_deadlines() {
        // 2 GPUs, exact lease 0 only. Three 2-GPU jobs each needing 2
        // leases by lease 6: 6 leases of work in leases 0..6, all kept.
        // Window [1, 6) holds 5 leases × 2 GPUs = 10 GPU-leases.
        let jobs = [LeaseJob { gpus: 2, leases: 2, max_lease: 6 }; 3];
        let s = select(&jobs, 2, LeaseObjective::Feasibility, 1).unwrap();
        assert_eq!(s.keep, vec![true; 3]);
        // Variables: per job s, x0 and one window: 9.
        assert_eq!(s.variables, 9);
        // A fourth does not fit (8 leases of work in 6).
        let jobs = [LeaseJob { gpus: 2, leases: 2, max_lease: 6 }; 4];
        let s = select(&jobs, 2, LeaseObjective::Feasibility, 1).unwrap();
        assert_eq!(s.keep.iter().filter(|&&k| k).count(), 3);
    }
}
