//! Tiresias+TunedJobs as the Pollux simulator runs it (Qiao et al.,
//! "Pollux", OSDI'21, §5.1 baselines; artifact petuum/adaptdl, branch
//! `osdi21-artifact`, `simulator/tiresias.py` `TiresiasPolicy` and
//! `simulator.py`): Tiresias' two-queue 2D-LAS (Gu et al., NSDI'19) on the
//! workload's tuned GPU count and batch, not elastic.
//!
//! # Rules
//!
//! At every tick (multiples of [`TiresiasTunedOptions::interval_s`], default
//! 60 s, the first at one interval: the simulator steps its jobs before its
//! first call; see [`super::pollux_sim`]), over the jobs submitted at or
//! before the tick and not complete, in the order they became visible (job
//! order: submission, then trace row):
//! 1. **Queues.** A newly visible job joins the back of queue 0.
//! 2. **Service.** A job whose status was *running* since the last tick adds
//!    the whole seconds since then to its executed time (its re-scale delay
//!    included: the simulator counts ticks, not progress). When executed
//!    time × its tuned GPUs reaches [`TiresiasTunedOptions::threshold_gpu_s`]
//!    (default 3,600 × 16 GPU-s, the simulator's `_queue_threshold`) a job
//!    of queue 0 moves to the back of queue 1. Jobs are checked in job order.
//!    There is no promotion (the simulator's `_solve_starvation` is 0).
//! 3. **Status.** Walking queue 0 then queue 1 with the cluster's GPU count
//!    as the budget, a job whose tuned GPUs fit what is left is *running*,
//!    any other *pending* (smaller jobs further on may still run); a pending
//!    job that holds GPUs is preempted ([`Decision::Preempt`]; a
//!    work-defined job keeps its progress).
//! 4. **Placement.** Running jobs keep their GPUs. Each running job without
//!    GPUs, in queue order, takes its tuned GPUs node by node from the node
//!    with the most free GPUs (`pollux_sim::most_free_first`), and
//!    is launched there ([`Decision::Launch`]: for a work-defined job, its
//!    tuned batch by the progress model's rule; the engine charges the
//!    re-scale delay, and a restart from the second allocation on). Its GPU
//!    list lists its nodes in the order they were taken, which is the order
//!    of its placement for the throughput model.
//!
//! Passes between ticks (arrivals, completions) decide nothing: an arrival
//! waits for the next tick, and freed GPUs stay idle until then, as in the
//! simulator.
//!
//! # Our readings
//!
//! - The cluster is one pool (the simulator's has no partitions); a cluster
//!   with several VC partitions is refused when the policy is built.
//! - A duration-defined job is scheduled by the same rules on its GPU count
//!   (the rules read nothing else of a job): the policy does not refuse it.
//!   Under exact event times its completion, not a tick, frees its GPUs,
//!   which stay idle until the next tick.
//! - The simulator's executed time is `int(event_time − last_check)`, in
//!   seconds; here ticks are whole seconds, so it is exact.
//! - On a cluster of several GPU types (`--cluster sia`), a job takes its
//!   GPUs within one type: the first type, in the cluster's order, whose
//!   nodes have enough in the pool (`GpuPool::take_most_free_one_type`);
//!   the budget of rule 3 stays the cluster's GPU count, so a job that is
//!   *running* by the budget but fits no single type waits for a later
//!   tick; a job needing more GPUs than any one type has is skipped at
//!   admission as `exceeds_gpu_type_group`, as for Gavel (ours: it would
//!   otherwise wait for ever). On one type nothing changes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::pollux_sim::{AtTicks, GpuPool, TickLoop, decide_at_ticks, held};
use super::{Decision, Policy, View};
use crate::error::RunError;
use crate::ids::JobId;
use crate::job::JobState;
use crate::workload::admission::AdmissionRule;

/// Options of `tiresias-tuned`. Names are kebab-case; unknown names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TiresiasTunedOptions {
    /// Scheduling interval, s (`interval-s`; default 60, the Pollux simulator's); at least 1.
    pub interval_s: u64,
    /// Demotion threshold from queue 0 to queue 1, GPU-s of executed time
    /// × tuned GPUs (default 57,600 = 3,600 × 16, the simulator's).
    #[serde(alias = "threshold_gpu_s")]
    pub threshold_gpu_s: u64,
}

impl Default for TiresiasTunedOptions {
    fn default() -> Self {
        TiresiasTunedOptions { interval_s: 60, threshold_gpu_s: 3600 * 16 }
    }
}

impl BuildPolicy for TiresiasTunedOptions {
    fn validate(&self, kind: &str) -> Result<(), String> {
        super::pollux_sim::check_interval_s(kind, self.interval_s)?;
        if self.threshold_gpu_s > 100_000_000_000 {
            return Err(format!("{kind}: threshold-gpu-s must be at most 1e11, got {}", self.threshold_gpu_s));
        }
        Ok(())
    }

    fn preemption_period_ms(&self, _kind: &str) -> Option<u64> {
        Some(self.interval_s.saturating_mul(1000))
    }

    /// A job runs on its tuned GPUs of one type (rule "Placement"): one
    /// needing more than any type has is skipped, not left waiting.
    fn admission_rule(&self, _kind: &str) -> AdmissionRule {
        AdmissionRule::OneGpuType
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        super::pollux_sim::one_partition(kind, ctx.cluster)?;
        Ok(Box::new(TiresiasTuned::new(*self)))
    }
}

/// What the policy keeps of a visible job (the simulator's counters).
#[derive(Clone, Copy, Debug)]
struct Book {
    /// Its status after the last tick: running (true) or pending.
    running: bool,
    /// The tick it was last checked at, s.
    last_check_s: u64,
    /// Executed time, s (time with status running, counted at ticks).
    executed_s: u64,
}

/// `tiresias-tuned`; see the module docs.
pub struct TiresiasTuned {
    opts: TiresiasTunedOptions,
    at: TickLoop,
    books: BTreeMap<JobId, Book>,
    queue0: Vec<JobId>,
    queue1: Vec<JobId>,
}

impl TiresiasTuned {
    /// The policy with `opts`.
    pub fn new(opts: TiresiasTunedOptions) -> Self {
        TiresiasTuned {
            opts,
            at: TickLoop::new(opts.interval_s.saturating_mul(1000)),
            books: BTreeMap::new(),
            queue0: Vec::new(),
            queue1: Vec::new(),
        }
    }
}

impl AtTicks for TiresiasTuned {
    fn tick_loop(&mut self) -> &mut TickLoop {
        &mut self.at
    }

    /// The tick's decisions (rules 1 to 4).
    fn tick(&mut self, view: &View<'_>) {
        let now_s = view.now.as_ms() / 1000;
        // 1. New jobs join queue 0 in job order.
        for &j in &self.at.active {
            if let std::collections::btree_map::Entry::Vacant(v) = self.books.entry(j) {
                v.insert(Book { running: false, last_check_s: 0, executed_s: 0 });
                self.queue0.push(j);
            }
        }
        // 2. Executed time and demotion, in job order.
        for &j in &self.at.active {
            let Some(b) = self.books.get_mut(&j) else { continue };
            if b.running {
                b.executed_s += now_s.saturating_sub(b.last_check_s);
                let gpu_s = b.executed_s.saturating_mul(u64::from(view.jobs.spec(j).gpus));
                if gpu_s >= self.opts.threshold_gpu_s
                    && let Some(at) = self.queue0.iter().position(|&x| x == j)
                {
                    self.queue0.remove(at);
                    self.queue1.push(j);
                }
            }
            b.last_check_s = now_s;
        }
        // 3. Status by the GPU budget; pending jobs that hold GPUs are preempted.
        let mut budget = u64::from(view.cluster.total_gpus());
        let mut pool = GpuPool::free(view);
        let mut preempt = Vec::new();
        for &j in self.queue0.iter().chain(&self.queue1) {
            let gpus = u64::from(view.jobs.spec(j).gpus);
            let running = gpus <= budget;
            if running {
                budget -= gpus;
            } else if matches!(view.jobs.state(j), JobState::Running(_)) {
                pool.give_back(view, j);
                preempt.push(j);
            }
            if let Some(b) = self.books.get_mut(&j) {
                b.running = running;
            }
        }
        // 4. Running jobs without GPUs take them, most free node first.
        let mut launch = Vec::new();
        for &j in self.queue0.iter().chain(&self.queue1) {
            let running = self.books.get(&j).is_some_and(|b| b.running);
            if !running || !held(view, j).is_empty() || preempt.contains(&j) {
                continue;
            }
            let need = view.jobs.spec(j).gpus;
            let Some((gpus, _)) = pool.take_most_free_one_type(view.cluster, need, &[]) else { continue };
            launch.push(Decision::Launch { job: j, gpus });
        }
        self.at.plan.extend(preempt.into_iter().map(|job| Decision::Preempt { job }));
        self.at.plan.extend(launch);
    }
}

impl Policy for TiresiasTuned {
    fn name(&self) -> String {
        "tiresias-tuned".into()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.at.on_arrival(job);
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        self.at.on_completion(job);
        self.books.remove(&job);
        self.queue0.retain(|&x| x != job);
        self.queue1.retain(|&x| x != job);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        self.at.on_timer(view.now);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        decide_at_ticks(self, view)
    }
}
