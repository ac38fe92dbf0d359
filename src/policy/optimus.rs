//! Optimus+Oracle+TunedJobs as the Pollux simulator runs it (Qiao et al.,
//! "Pollux", OSDI'21, §5.1 baselines; artifact petuum/adaptdl, branch
//! `osdi21-artifact`, `simulator/optimus.py` `OptimusPolicy` and
//! `simulator.py`): Optimus' greedy marginal-gain allocation (Peng et al.,
//! EuroSys'18, §4) with an oracle of each job's remaining iterations and the
//! workload's tuned batch size.
//!
//! # Rules
//!
//! At every tick (multiples of [`OptimusOptions::interval_s`], default 60 s,
//! the first at one interval; see [`super::pollux_sim`]), over the jobs
//! submitted at or before the tick and not complete, in job order
//! (submission, then trace row: the simulator's dict order):
//! 1. **Remaining work** `R`: the progress model's oracle
//!    ([`crate::job::ProgressModel::remaining_steps`]) at the job's tuned
//!    batch and current progress (Pollux: iterations from the end of its
//!    current epoch to the end of its completion epoch, 1 in its last epoch).
//! 2. **Step time** `T(r)` of the job on `r` GPUs (`predict_step_time`): `r`
//!    packed four to a node; per-GPU batch `l = ceil(B / r)` of the tuned
//!    batch `B`; accumulation steps `a = ceil(l / max_local_bsz) − 1`, at
//!    least 1 when `r = 1` (whatever `B`); atomic batch `ceil(l / (a + 1))`,
//!    at most `floor(max_batch_size / (r (a + 1)))`; `T = step + a × (step −
//!    sync)` from the model's step times
//!    ([`crate::job::ProgressModel::step_times`]). Divisions round up with
//!    the simulator's `−1e-8` tolerance.
//! 3. **Allocation.** Each job in job order gets one GPU while any is left
//!    (the others none). Its gain is `(T(r) − T(r + 1)) × R`, or 0 when `r +
//!    1` exceeds its most GPUs (`B // min_local_bsz`; `ncf`: 1) or no GPU is
//!    left. Then, while GPUs are left and some gain is positive, the job of
//!    largest gain (ties: the first in job order) gets one more GPU and its
//!    gain is recomputed (the "no GPU left" test before this GPU is counted,
//!    as the simulator does).
//! 4. **Placement.** A running job whose GPU count is unchanged keeps its
//!    GPUs. The others, by GPU count ascending (ties in job order), take
//!    theirs node by node from the node with the most free GPUs
//!    (`pollux_sim::most_free_first`), counting as free every GPU
//!    not kept. A job given no GPU is preempted ([`Decision::Preempt`],
//!    progress kept); every other job whose count changed is moved there
//!    with the tuned batch on its new placement ([`Decision::Resize`] with
//!    [`crate::job::ProgressModel::tuned_config`], the simulator's
//!    `update_local_bsz`): the engine charges the re-scale delay and counts
//!    a restart from the second allocation on. Its GPU list lists its nodes
//!    in the order they were taken (its placement for the throughput model).
//!
//! Passes between ticks decide nothing, as in the simulator.
//!
//! # Our readings
//!
//! - Within a node a moving job keeps the GPUs it had there, then takes the
//!   lowest free ones (the simulator counts GPUs per node only). Moves are
//!   applied in an order in which each one's GPUs are free; when moves wait
//!   on each other's GPUs in a cycle, the first is preempted and resumed
//!   after the others (a restart either way; the run also counts a
//!   preemption).
//! - Optimus reads a job's application, tuned batch, batch limits, step times
//!   and remaining work: it schedules work-defined jobs only. A
//!   duration-defined job is an invalid decision of the run naming the job
//!   (the policy asks to resize it, which the engine refuses). A step time
//!   or remaining work the model cannot give makes that job's gain 0.
//! - "An epoch boundary re-tunes the batch" of the simulator's jobs changes
//!   nothing here: with a tuned batch the rule gives the same configuration.
//! - The cluster is one pool (the simulator's has no partitions); a cluster
//!   with several VC partitions is refused when the policy is built.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::pollux_sim::{AtTicks, GpuPool, TickLoop, decide_at_ticks, held};
use super::{Decision, Policy, View};
use crate::error::RunError;
use crate::ids::{GpuId, JobId};
use crate::job::{ElasticConfig, ProgressModel};

/// Options of `optimus`. Names are kebab-case; unknown names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct OptimusOptions {
    /// Scheduling interval, s (`interval-s`; default 60, the Pollux simulator's); at least 1.
    pub interval_s: u64,
}

impl Default for OptimusOptions {
    fn default() -> Self {
        OptimusOptions { interval_s: 60 }
    }
}

impl BuildPolicy for OptimusOptions {
    /// Optimus' rules read each job's remaining steps and step times.
    fn work_defined_only(&self) -> bool {
        true
    }

    fn validate(&self, kind: &str) -> Result<(), String> {
        super::pollux_sim::check_interval_s(kind, self.interval_s)
    }

    fn preemption_period_ms(&self, _kind: &str) -> Option<u64> {
        Some(self.interval_s.saturating_mul(1000))
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        super::pollux_sim::one_partition(kind, ctx.cluster)?;
        Ok(Box::new(Optimus::new(*self)))
    }
}

/// The GPUs a job may use per node when Optimus predicts its step time (the
/// simulator packs four to a node, its nodes' size).
const PACK: u32 = 4;

/// `ceil(x − 1e-8)`: the simulator's rounding up.
fn ceil_tol(x: f64) -> f64 {
    (x - 1e-8).ceil()
}

/// Optimus' predicted time of one optimiser step of a job of `app` with
/// tuned batch `batch` on `r` GPUs (rule 2), s; `None` when the model cannot
/// give it.
pub fn predict_step_time(model: &dyn ProgressModel, app: &str, batch: u32, r: u32) -> Option<f64> {
    let limits = model.batch_limits(app)?;
    if r == 0 {
        return None;
    }
    let mut per_node = Vec::new();
    let mut left = r;
    while left > 0 {
        per_node.push(left.min(PACK));
        left -= left.min(PACK);
    }
    let local = ceil_tol(f64::from(batch) / f64::from(r));
    let mut accum = ceil_tol(local / f64::from(limits.max_local)) - 1.0;
    if r == 1 {
        accum = accum.max(1.0);
    }
    let atomic = ceil_tol(local / (accum + 1.0));
    let count = f64::from(r) * (accum + 1.0);
    let atomic = atomic.min((f64::from(limits.max_batch) / count).trunc());
    if !(atomic >= 1.0 && accum >= 0.0) {
        return None;
    }
    let cfg = ElasticConfig { per_node, atomic_bsz: atomic as u32, accum_steps: accum as u32, gpu_type: 0 };
    let (step, sync) = model.step_times(app, &cfg).ok()?;
    Some(step + (step - sync) * accum)
}

/// `optimus`; see the module docs.
pub struct Optimus {
    at: TickLoop,
    /// Predicted step times by (application, tuned batch, GPUs).
    step_times: BTreeMap<(String, u32, u32), Option<f64>>,
}

/// One visible job at a tick.
struct Entry {
    job: JobId,
    app: String,
    batch: u32,
    remaining: f64,
    max_replicas: u32,
    replicas: u32,
    gain: f64,
}

impl Optimus {
    /// The policy with `opts`.
    pub fn new(opts: OptimusOptions) -> Self {
        Optimus { at: TickLoop::new(opts.interval_s.saturating_mul(1000)), step_times: BTreeMap::new() }
    }

    fn step_time(&mut self, model: &dyn ProgressModel, app: &str, batch: u32, r: u32) -> Option<f64> {
        *self.step_times.entry((app.to_string(), batch, r)).or_insert_with(|| predict_step_time(model, app, batch, r))
    }

    /// The gain of one more GPU for `e` with `left` GPUs left (rule 3).
    fn gain(&mut self, model: &dyn ProgressModel, e: &Entry, left: u32) -> f64 {
        if e.replicas + 1 > e.max_replicas || left < 1 {
            return 0.0;
        }
        let now = self.step_time(model, &e.app, e.batch, e.replicas);
        let next = self.step_time(model, &e.app, e.batch, e.replicas + 1);
        match (now, next) {
            (Some(a), Some(b)) => (a - b) * e.remaining,
            _ => 0.0,
        }
    }

    /// Queues the preemptions, then the moves in an order in which each
    /// move's GPUs are free or its own (preempting the first of a cycle).
    fn order_moves(
        &mut self,
        view: &View<'_>,
        preempt: Vec<JobId>,
        mut moves: Vec<(JobId, Vec<GpuId>, Vec<GpuId>, ElasticConfig)>,
    ) {
        let c = view.cluster;
        let mut owner: Vec<Option<JobId>> = (0..c.total_gpus()).map(|g| c.holders(GpuId(g)).next()).collect();
        let release = |owner: &mut Vec<Option<JobId>>, job: JobId| {
            for o in owner.iter_mut() {
                if *o == Some(job) {
                    *o = None;
                }
            }
        };
        for job in preempt {
            release(&mut owner, job);
            self.at.plan.push_back(Decision::Preempt { job });
        }
        while !moves.is_empty() {
            let ready = moves.iter().position(|(job, _, gpus, _)| {
                gpus.iter().all(|g| owner.get(g.index()).is_some_and(|o| o.is_none() || *o == Some(*job)))
            });
            match ready {
                Some(i) => {
                    let (job, _, gpus, cfg) = moves.remove(i);
                    release(&mut owner, job);
                    for g in &gpus {
                        if let Some(o) = owner.get_mut(g.index()) {
                            *o = Some(job);
                        }
                    }
                    self.at.plan.push_back(Decision::Resize {
                        job,
                        gpus,
                        atomic_bsz: cfg.atomic_bsz,
                        accum_steps: cfg.accum_steps,
                    });
                }
                None => {
                    // A cycle: preempt the first moving job that holds
                    // GPUs, and move it last. (None holding any cannot
                    // happen: the GPUs placed are free or held by moving
                    // jobs; stop rather than loop.)
                    let Some(i) = moves.iter().position(|m| !m.1.is_empty()) else { break };
                    let m = moves.remove(i);
                    release(&mut owner, m.0);
                    self.at.plan.push_back(Decision::Preempt { job: m.0 });
                    moves.push((m.0, Vec::new(), m.2, m.3));
                }
            }
        }
    }
}

impl AtTicks for Optimus {
    fn tick_loop(&mut self) -> &mut TickLoop {
        &mut self.at
    }

    /// The tick's decisions (rules 1 to 4).
    fn tick(&mut self, view: &View<'_>) {
        if let Some(&job) = self.at.active.iter().find(|&&j| view.jobs.spec(j).elastic().is_none()) {
            // A duration-defined job: the engine refuses to resize it, an
            // error of the run naming the job.
            self.at.plan.push_back(Decision::Resize { job, gpus: Vec::new(), atomic_bsz: 1, accum_steps: 0 });
            return;
        }
        let Some(model) = view.progress_model() else { return };
        let mut entries = Vec::new();
        for &job in &self.at.active {
            let Some(st) = view.elastic(job) else { continue };
            let (app, batch) = (st.spec.app.clone(), st.spec.tuned_bsz);
            let remaining = model.remaining_steps(&app, u64::from(batch), st.progress).unwrap_or(0.0);
            let max_replicas = match (app.as_str(), model.batch_limits(&app)) {
                ("ncf", _) => 1,
                (_, Some(l)) if l.min_local > 0 => batch / l.min_local,
                _ => st.spec.tuned_gpus,
            };
            entries.push(Entry { job, app, batch, remaining, max_replicas, replicas: 0, gain: 0.0 });
        }
        // 3. One GPU each in job order, then greedy by marginal gain.
        let mut left = view.cluster.total_gpus();
        for e in entries.iter_mut() {
            if left < 1 {
                continue;
            }
            e.replicas = 1;
            left -= 1;
            e.gain = self.gain(model, e, left);
        }
        while left > 0 {
            let mut best: Option<usize> = None;
            for (i, e) in entries.iter().enumerate() {
                if best.is_none_or(|b| e.gain > entries[b].gain) {
                    best = Some(i);
                }
            }
            let Some(b) = best.filter(|&b| entries[b].gain > 0.0) else { break };
            entries[b].replicas += 1;
            entries[b].gain = self.gain(model, &entries[b], left);
            left -= 1;
        }
        // 4. Keep unchanged allocations; place the others, fewest GPUs first.
        let mut pool = GpuPool::free(view);
        for e in &entries {
            let old = held(view, e.job);
            if !old.is_empty() && old.len() as u32 != e.replicas {
                pool.give_back(view, e.job);
            }
        }
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by_key(|&i| entries[i].replicas);
        let mut preempt = Vec::new();
        let mut moves: Vec<(JobId, Vec<GpuId>, Vec<GpuId>, ElasticConfig)> = Vec::new();
        for i in order {
            let e = &entries[i];
            let old = held(view, e.job);
            if e.replicas == 0 {
                if !old.is_empty() {
                    preempt.push(e.job);
                }
                continue;
            }
            if old.len() as u32 == e.replicas {
                continue;
            }
            let Some((gpus, per_node)) = pool.take_most_free(e.replicas, &old) else { continue };
            let cfg = model.tuned_config(&e.app, &per_node, e.batch);
            moves.push((e.job, old, gpus, cfg));
        }
        self.order_moves(view, preempt, moves);
    }
}

impl Policy for Optimus {
    fn name(&self) -> String {
        "optimus".into()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.at.on_arrival(job);
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        self.at.on_completion(job);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        self.at.on_timer(view.now);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        decide_at_ticks(self, view)
    }
}
