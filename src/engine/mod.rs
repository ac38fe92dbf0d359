//! The discrete-event engine: one clock, one event queue, all mutable state.
//!
//! The engine pops every event of the earliest instant (arrivals, completions,
//! timers, samples), then runs one scheduling pass (none when only a timeline
//! sample fell there: sampling observes, it never triggers decisions) in
//! which it asks the policy for
//! decisions until the policy says wait, validating and applying each one. A
//! job progresses at a rate; when its rate changes the engine settles the work
//! done at the old rate and re-schedules its completion, and the old completion
//! event, carrying an older epoch, is skipped when it pops. Time never advances
//! in fixed steps.
//!
//! Same-instant semantics: all events at time `t` are applied before the pass
//! at `t`, so a job ending at `t` frees its GPUs for jobs starting at `t`, and a
//! job submitted at `t` may start at `t` (completions, then arrivals, then one
//! pass — the order the Helios study's simulator uses).
//!
//! Preemption: a policy may stop a running job ([`Decision::Preempt`]); the
//! engine settles its work, releases its GPUs, charges the run's checkpoint
//! overhead ([`CheckpointModel`]) as added remaining work and keeps it
//! [`JobState::Suspended`] until a launch resumes it. Timers: a policy may ask
//! to be woken at a later time ([`Decision::WakeAt`]); the engine pushes an
//! [`Event::Timer`], pops it in the usual (time, insertion sequence) order,
//! calls [`Policy::on_timer`] and runs that instant's scheduling pass.
//!
//! GPU sharing: a policy may start a job as a tenant of GPUs that other jobs
//! share ([`Decision::Colocate`]). A tenant's rate is its placement rate times
//! the smallest co-location speed over its GPUs ([`Interference`]: a
//! distributed job steps at the pace of its slowest GPU); whenever a tenant
//! arrives on or leaves a GPU, the rates of the others on it are recomputed.
//!
//! Work-defined jobs (a spec with [`crate::job::ElasticSpec`]): a job
//! defined by the work it must do progresses in its progress model's units
//! at the model's goodput for its configuration
//! ([`Simulation::with_progress_model`]), from breakpoint to breakpoint,
//! each crossing an event; a policy resizes it with [`Decision::Resize`],
//! and each reallocation costs a re-scale delay without progress
//! ([`DEFAULT_RESCALE_DELAY_MS`]). The model, units and rounding are in
//! `elastic.rs`'s docs ([`Simulation::with_rescale_delay_ms`]).
//! Duration-defined jobs never take that path.
//!
//! The engine only runs the simulation: the run hands it its rate model and
//! co-location model (built from the run's profile database), and whatever the
//! run measures is recorded by an [`Observer`] the engine calls after each
//! change (`crate::metrics::Recorder`). The engine reads no clock and no
//! profile database.

mod checkpoint;
mod elastic;
mod guard;
mod observer;
mod preempt;
mod queue;

pub use checkpoint::{CheckpointModel, GANDIVA_SUSPEND_MS};
pub use elastic::{DEFAULT_RESCALE_DELAY_MS, ElasticTiming, POLLUX_SIM_INTERVAL_MS};
pub use observer::{NoObserver, Observer, Snapshot};
pub use queue::EventQueue;

use crate::cluster::Cluster;
use crate::error::SimError;
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::{DoneState, JobSpec, JobState, JobTable, RunState};
use crate::policy::{Decision, Policy, View};
use crate::profile::RateModel;
use crate::profile::coloc::Interference;
use crate::profile::elastic::ProgressModel;
use crate::time::SimTime;

/// What the event queue holds. Arrivals are events too, but they come already
/// sorted from the job table (jobs are numbered in submit order), so the engine
/// merges that stream with the heap instead of pushing every arrival into it:
/// the heap holds only completions and timers, and stays small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A job's work runs out, if `epoch` is still its current epoch.
    Completion {
        /// The job.
        job: JobId,
        /// The job's epoch when this event was scheduled.
        epoch: u32,
    },
    /// Record a timeline sample after this instant's scheduling pass. Samples
    /// fall on multiples of the sampling interval; while nothing else happens
    /// the next one jumps to the first multiple at or after the next event (the
    /// state in between equals the last sample), so a trace spanning years
    /// costs no more samples than it has events.
    Sample,
    /// A wake-up the policy asked for ([`Decision::WakeAt`]).
    Timer,
}

/// A moldable task's GPU memory per GPU, MiB, on a GPU count
/// ([`Simulation::with_task_memory`]).
pub type TaskMemory = dyn Fn(&JobSpec, u32) -> Option<u64> + Send;

/// The spec the co-location model reads for `spec` on `gpus` GPUs: a
/// moldable task's own batch is its global batch, but each of its GPUs
/// steps its per-GPU batch ([`crate::job::TaskSpec::local_bsz`]), so the
/// pair speeds are read at that batch. Any other job as it is.
fn as_tenant(spec: &JobSpec, gpus: usize) -> std::borrow::Cow<'_, JobSpec> {
    match &spec.task {
        Some(t) => {
            let mut s = spec.clone();
            s.extra_mut().local_bsz = Some(t.local_bsz(u32::try_from(gpus).unwrap_or(u32::MAX)));
            std::borrow::Cow::Owned(s)
        }
        None => std::borrow::Cow::Borrowed(spec),
    }
}

/// Engine options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Interval between timeline samples, ms; 0 disables sampling. The
    /// engine schedules the sample events ([`Event::Sample`]); the
    /// [`Observer`] records them.
    pub sample_interval_ms: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { sample_interval_ms: 600_000 }
    }
}

/// Counters of what the engine did (deterministic; wall time is measured elsewhere).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    /// Events popped.
    pub events: u64,
    /// Distinct instants processed (one scheduling pass each, except instants
    /// at which only a timeline sample fell).
    pub instants: u64,
    /// Launch decisions applied.
    pub launches: u64,
    /// Completion events skipped because the job's rate had changed since.
    pub stale_completions: u64,
    /// Rate changes applied to running jobs.
    pub rate_changes: u64,
    /// Jobs started as tenants of shared GPUs.
    pub shared_launches: u64,
    /// Preemptions applied.
    pub preemptions: u64,
    /// Launches that resumed a preempted job (included in `launches`).
    pub resumes: u64,
    /// Checkpoint overhead charged, ms of work at rate 1.
    pub checkpoint_ms: u64,
    /// Checkpoint overhead charged, weighted by the preempted job's GPUs:
    /// GPU-ms of work at rate 1 (the GPU-time lost to checkpointing).
    pub checkpoint_gpu_ms: u64,
    /// Timers delivered to the policy.
    pub timers: u64,
    /// Resizes of running work-defined jobs applied ([`Decision::Resize`]);
    /// written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub resizes: u64,
    /// Restarts of work-defined jobs: reallocations after a job's first
    /// allocation; written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub restarts: u64,
    /// Events at which a work-defined job's progress crossed a breakpoint of
    /// its model and its goodput was read again; written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub breakpoints: u64,
}

/// For `skip_serializing_if`.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a run is, for progress reporting.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Simulated time.
    pub now: SimTime,
    /// Jobs completed so far.
    pub completed: usize,
    /// Jobs in the run.
    pub total: usize,
    /// Allocation changes so far: launches and preemptions applied (the
    /// events a schedule implies; what a run's cost should be proportional to).
    pub changes: u64,
}

/// The result of a finished run: the engine's state. What the run measured
/// (busy GPU-time, timeline, sharing figures, decision timing) is the
/// observer's (`crate::metrics::Recording`).
pub struct RunOutput {
    /// The cluster in its final state.
    pub cluster: Cluster,
    /// Every job with its final state.
    pub jobs: JobTable,
    /// What the engine did.
    pub stats: EngineStats,
    /// The policy's name.
    pub policy: String,
    /// The rate model's name.
    pub model: &'static str,
    /// The rate model's counters (e.g. profile fallbacks), then the
    /// interference model's (when a job shared a GPU).
    pub model_counters: Vec<(&'static str, u64)>,
    /// The policy's own figures ([`Policy::metrics`]).
    pub policy_metrics: Vec<(&'static str, f64)>,
    /// The policy's extra run-directory files ([`Policy::files`]).
    pub policy_files: Vec<(&'static str, String)>,
    /// The policy's solver rounds ([`Policy::solver_rounds`]): wall-clock,
    /// for `timing.json` only.
    pub solver_rounds: Vec<crate::policy::SolverRound>,
}

/// A simulation: owns the clock, the event queue, the cluster, the jobs, the
/// policy, the rate model and the co-location model. Only the engine mutates state.
pub struct Simulation {
    /// The net-progress watch (`guard.rs`): a cycle across instants.
    net: guard::NetWatch,
    now: SimTime,
    events: EventQueue<Event>,
    cluster: Cluster,
    jobs: JobTable,
    policy: Box<dyn Policy>,
    model: Box<dyn RateModel>,
    /// The co-location model ([`Simulation::with_interference`]); a shared
    /// launch without one is an error of the run.
    interference: Option<Box<dyn Interference>>,
    /// A moldable task's GPU memory per GPU on a GPU count, MiB
    /// ([`Simulation::with_task_memory`]); without it a task that shares
    /// holds each GPU's whole memory.
    task_memory: Option<Box<TaskMemory>>,
    cfg: EngineConfig,
    pending: u32,
    running: u32,
    completed: usize,
    /// Jobs the policy rejected ([`Decision::Reject`]).
    rejected: usize,
    /// Jobs suspended (preempted, not yet resumed).
    suspended: u32,
    /// The checkpoint/restore overhead of a preemption.
    checkpoint: CheckpointModel,
    /// How long a job keeps its GPUs after its work runs out, ms
    /// ([`Policy::release_delay_ms`]).
    release_delay_ms: u64,
    touched: Vec<NodeId>,
    /// GPUs whose tenants changed at this instant.
    touched_shared: Vec<GpuId>,
    next_arrival: usize,
    stats: EngineStats,
    /// The last instant a run processes ([`Simulation::with_horizon`]).
    horizon: Option<SimTime>,
    /// Whether a run may end with admitted jobs not completed
    /// ([`Simulation::allow_unfinished`]).
    allow_unfinished: bool,
    /// Whether [`Simulation::run_observed`] checks every invariant after
    /// every instant ([`Simulation::with_invariant_checks`]).
    invariant_checks: bool,
    /// The progress model of work-defined jobs ([`Simulation::with_progress_model`]).
    progress_model: Option<std::sync::Arc<dyn ProgressModel>>,
    /// The re-scale delay of a work-defined job's reallocation, ms
    /// ([`Simulation::with_rescale_delay_ms`]).
    /// `None`: the progress model's per application
    /// ([`ProgressModel::rescale_delay_ms`]), else [`DEFAULT_RESCALE_DELAY_MS`].
    rescale_delay_ms: Option<u64>,
    /// How work-defined jobs' progress advances in time
    /// ([`Simulation::with_elastic_timing`]).
    elastic_timing: ElasticTiming,
    /// Under [`ElasticTiming::PolluxSim`], work-defined jobs' events due at
    /// the grid instant being processed that belong to the next grid step:
    /// pushed after the instant's scheduling pass.
    after_pass: Vec<(SimTime, Event)>,
    /// Each job's progress at the last invariant check (work-defined jobs,
    /// with invariant checks on), to check that progress never decreases.
    progress_seen: Vec<f64>,
    /// The instant being processed between [`Simulation::open_instant`] and
    /// [`Simulation::close_instant`].
    open: Option<OpenInstant>,
}

/// The error of a caller that drives instants out of order
/// ([`Simulation::open_instant`]).
fn driver_misuse(reason: &str) -> SimError {
    SimError::Internal { job: JobId(0), job_name: String::new(), line: 0, file: None, gpu: None, reason: reason.into() }
}

/// An instant opened by [`Simulation::open_instant`] and not yet closed.
#[derive(Clone, Copy, Debug)]
struct OpenInstant {
    /// A timeline sample falls at this instant.
    sample_due: bool,
    /// Decisions applied by the caller in this instant's pass.
    decisions: u64,
    /// The most decisions a pass may make ([`Simulation::decision_bound`]).
    bound: u64,
}

impl Simulation {
    /// A simulation of `jobs` on an empty `cluster`. Every job must fit its
    /// partition (the workload builder guarantees it). Jobs arrive in id order
    /// (the table is in submit order), so same-time arrivals reach the policy in
    /// trace order.
    pub fn new(
        cluster: Cluster,
        jobs: JobTable,
        policy: Box<dyn Policy>,
        model: Box<dyn RateModel>,
        cfg: EngineConfig,
    ) -> Self {
        let mut events = EventQueue::with_capacity(1024);
        if cfg.sample_interval_ms > 0 && !jobs.is_empty() {
            events.push(SimTime::ZERO, Event::Sample);
        }
        let release_delay_ms = policy.release_delay_ms();
        Simulation {
            now: SimTime::ZERO,
            events,
            cluster,
            jobs,
            policy,
            model,
            interference: None,
            task_memory: None,
            cfg,
            pending: 0,
            running: 0,
            completed: 0,
            rejected: 0,
            suspended: 0,
            checkpoint: CheckpointModel::None,
            release_delay_ms,
            touched: Vec::new(),
            touched_shared: Vec::new(),
            next_arrival: 0,
            stats: EngineStats::default(),
            horizon: None,
            allow_unfinished: false,
            invariant_checks: false,
            net: guard::NetWatch::default(),
            progress_model: None,
            rescale_delay_ms: None,
            elastic_timing: ElasticTiming::Exact,
            after_pass: Vec::new(),
            progress_seen: Vec::new(),
            open: None,
        }
    }

    /// Stops a run ([`Simulation::run_observed`]) after the last instant at
    /// or before `horizon`: a cut-off run, whose jobs still waiting or
    /// running then are unfinished (and allowed to be, as with
    /// [`Simulation::allow_unfinished`]). Events after it are not processed.
    pub fn with_horizon(mut self, horizon: SimTime) -> Self {
        self.horizon = Some(horizon);
        self.allow_unfinished = true;
        self
    }

    /// Lets a run end with admitted jobs not completed (the policy never
    /// started them, or left them suspended) instead of failing with
    /// [`SimError::Unfinished`]; the summary counts them as unfinished.
    pub fn allow_unfinished(mut self) -> Self {
        self.allow_unfinished = true;
        self
    }

    /// With `on`, [`Simulation::run_observed`] (and the runs built on it)
    /// calls [`Simulation::check_invariants`] after every instant and stops
    /// at the first violation with [`SimError::Invariant`]. Off by default:
    /// the check walks every GPU and job, O(GPUs + jobs) per instant. The
    /// fuzzing harness (`examples/fuzz_scenarios.rs`) turns it on.
    pub fn with_invariant_checks(mut self, on: bool) -> Self {
        self.invariant_checks = on;
        self
    }

    /// Charges every preemption of this run by `model` (default
    /// [`CheckpointModel::None`]).
    pub fn with_checkpoint(mut self, model: CheckpointModel) -> Self {
        self.checkpoint = model;
        self
    }

    /// Sets the co-location model: how fast a job runs beside the other
    /// tenants of its GPUs. The run builds it from its own profile database
    /// (`crate::profile::coloc::ProfileInterference`); a run whose policy
    /// never co-locates needs none, and one that does without it stops with
    /// [`SimError::ModelFailure`].
    pub fn with_interference(mut self, interference: Box<dyn Interference>) -> Self {
        self.interference = Some(interference);
        self
    }

    /// How much GPU memory a moldable task holds on each of its GPUs when
    /// it shares them ([`Decision::Colocate`]), MiB: `memory(spec, n)` for
    /// the task on `n` GPUs (its per-GPU batch is [`crate::job::TaskSpec::local_bsz`];
    /// the run passes the profile database's estimate,
    /// `crate::profile::resources::task_gpu_mem_mib`). A task's memory
    /// depends on the GPU count the policy picks, so the job has no fixed
    /// figure; `None` (or no hook) holds the whole GPU, as for any job of
    /// unknown memory. Exclusive launches are unaffected.
    pub fn with_task_memory(mut self, memory: Box<TaskMemory>) -> Self {
        self.task_memory = Some(memory);
        self
    }

    /// The state an observer sees now.
    fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            now: self.now,
            cluster: &self.cluster,
            jobs: &self.jobs,
            jobs_running: self.running,
            // Waiting: pending, and suspended after a preemption.
            jobs_pending: self.pending + self.suspended,
        }
    }

    /// The time of the next event: the earlier of the heap's top and the next arrival.
    fn next_time(&self) -> Option<SimTime> {
        let arrival = self.jobs.specs().get(self.next_arrival).map(|s| s.submit);
        match (self.events.peek_time(), arrival) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Simulated time of the last processed instant.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The jobs.
    pub fn jobs(&self) -> &JobTable {
        &self.jobs
    }

    /// Jobs completed so far.
    pub fn completed(&self) -> usize {
        self.completed
    }

    /// Processes every event of the next instant and its scheduling pass.
    /// Returns the instant, or `None` when no event is left.
    ///
    /// # Errors
    /// As [`Simulation::step_observed`].
    pub fn step(&mut self) -> Result<Option<SimTime>, SimError> {
        self.step_observed(&mut NoObserver)
    }

    /// [`Simulation::step`], calling `obs` after every change.
    ///
    /// # Errors
    /// [`SimError::InvalidDecision`] when the policy asks for something the
    /// cluster cannot do, [`SimError::ModelFailure`] when the rate or
    /// co-location model gives an unusable rate, [`SimError::Internal`] when
    /// the engine's own bookkeeping fails; the run should stop then.
    pub fn step_observed<O: Observer + ?Sized>(&mut self, obs: &mut O) -> Result<Option<SimTime>, SimError> {
        let Some(due) = self.open_instant(obs)? else { return Ok(None) };
        if due {
            self.schedule_pass(obs)?;
        }
        self.close_instant(obs)?;
        Ok(Some(self.now))
    }

    /// The first half of [`Simulation::step_observed`], for a caller that
    /// makes the instant's decisions itself (a learning agent driving the
    /// run: `dlsched.gym`): moves the clock to the next instant and processes
    /// its events (completions and timers, then arrivals, each told to the
    /// policy's hooks). Returns `None` when no event is left, else whether a
    /// scheduling pass is due at this instant. The caller then makes the
    /// pass's decisions with [`Simulation::apply`] (none when no pass is
    /// due) and ends the instant with [`Simulation::close_instant`];
    /// [`Simulation::step_observed`] is exactly this with the policy's
    /// decisions, so an external driver that decides as a policy would
    /// gives the same run.
    ///
    /// # Errors
    /// As [`Simulation::step_observed`]; also [`SimError::Internal`] when
    /// the previous instant was not closed.
    pub fn open_instant<O: Observer + ?Sized>(&mut self, obs: &mut O) -> Result<Option<bool>, SimError> {
        if self.open.is_some() {
            return Err(driver_misuse("open_instant: the previous instant is still open (close_instant it first)"));
        }
        let Some(t) = self.next_time() else { return Ok(None) };
        self.now = t;
        self.stats.instants += 1;
        let mut sample_due = false;
        // Whether anything but a timeline sample happened at this instant: a
        // sample only observes, so an instant with nothing else runs no
        // scheduling pass (else the sample interval, an output setting,
        // would change what time-dependent policies such as GENIE decide).
        let mut decision_due = false;
        // Completions (and timers) first, then arrivals, then one pass.
        while let Some(ev) = self.events.pop_at(t) {
            self.stats.events += 1;
            // A work-defined job's event runs a pass only when it completes
            // the job: at a breakpoint only its goodput changes.
            decision_due |= match ev {
                Event::Sample => false,
                Event::Completion { job, .. } => self.jobs.spec(job).elastic().is_none(),
                Event::Timer => true,
            };
            match ev {
                Event::Completion { job, epoch } => match self.jobs.state(job) {
                    JobState::Running(r) if r.epoch == epoch => {
                        if r.elastic.is_some() {
                            decision_due |= self.elastic_event(job, obs)?;
                        } else if self.release_delay_ms > 0 && !r.work_done {
                            self.hold_after_work(job);
                        } else {
                            self.complete(job, obs)?;
                        }
                    }
                    _ => self.stats.stale_completions += 1,
                },
                Event::Sample => sample_due = true,
                Event::Timer => {
                    self.stats.timers += 1;
                    let view = View { now: t, cluster: &self.cluster, jobs: &self.jobs };
                    self.policy.on_timer(&view);
                }
            }
        }
        while let Some(spec) = self.jobs.specs().get(self.next_arrival).filter(|s| s.submit == t) {
            let job = spec.id;
            self.next_arrival += 1;
            self.stats.events += 1;
            *self.jobs.state_mut(job) = JobState::Pending;
            self.pending += 1;
            let view = View { now: t, cluster: &self.cluster, jobs: &self.jobs };
            self.policy.on_arrival(job, &view);
            decision_due = true;
        }
        self.open =
            Some(OpenInstant { sample_due, decisions: 0, bound: if decision_due { self.decision_bound() } else { 0 } });
        Ok(Some(decision_due))
    }

    /// One decision of the open instant's scheduling pass, made by the
    /// caller ([`Simulation::open_instant`]), validated and applied as the
    /// policy's would be; [`Decision::Wait`] applies nothing. A pass of more
    /// decisions than the engine's bound (the guard against a policy that
    /// never waits) fails as a policy's would.
    ///
    /// # Errors
    /// [`SimError::InvalidDecision`] for a decision the cluster cannot
    /// apply (the run should stop then), [`SimError::Internal`] when no
    /// instant is open, the errors of [`Simulation::step_observed`].
    pub fn apply<O: Observer + ?Sized>(&mut self, decision: Decision, obs: &mut O) -> Result<(), SimError> {
        let Some(open) = self.open.as_mut() else {
            return Err(driver_misuse("apply: no instant is open (open_instant first)"));
        };
        open.decisions += 1;
        if open.decisions > open.bound.max(1) && !matches!(decision, Decision::Wait) {
            let bound = open.bound;
            return Err(SimError::NoProgress {
                policy: self.policy.name(),
                now: self.now,
                bound,
                jobs: Vec::new(),
                timers: 0,
                file: None,
            });
        }
        self.apply_decision(decision, obs)
    }

    /// Applies one decision of a pass (the policy's or the caller's).
    fn apply_decision<O: Observer + ?Sized>(&mut self, decision: Decision, obs: &mut O) -> Result<(), SimError> {
        match decision {
            Decision::Wait => Ok(()),
            Decision::Launch { job, gpus } => self.launch(job, gpus, false, obs),
            Decision::Colocate { job, gpus } => self.launch(job, gpus, true, obs),
            Decision::Preempt { job } => self.preempt(job, obs),
            Decision::Reject { job } => self.reject(job),
            Decision::Resize { job, gpus, atomic_bsz, accum_steps } => {
                self.resize(job, gpus, atomic_bsz, accum_steps, obs)
            }
            Decision::WakeAt(at) => {
                if at <= self.now {
                    let msg = format!("timer at {at} is not after now ({})", self.now);
                    return Err(SimError::InvalidTimer { policy: self.policy.name(), reason: msg });
                }
                self.events.push(at, Event::Timer);
                Ok(())
            }
        }
    }

    /// The second half of [`Simulation::step_observed`]: after the open
    /// instant's pass, the deferred events, the rates of jobs whose
    /// neighbours changed, and the timeline sample.
    ///
    /// # Errors
    /// As [`Simulation::step_observed`]; [`SimError::Internal`] when no
    /// instant is open.
    pub fn close_instant<O: Observer + ?Sized>(&mut self, obs: &mut O) -> Result<(), SimError> {
        let Some(OpenInstant { sample_due, .. }) = self.open.take() else {
            return Err(driver_misuse("close_instant: no instant is open"));
        };
        let t = self.now;
        for (at, ev) in self.after_pass.drain(..) {
            self.events.push(at, ev);
        }
        if (self.model.depends_on_neighbours() && !self.touched.is_empty()) || !self.touched_shared.is_empty() {
            self.update_rates(obs)?;
        }
        self.touched.clear();
        self.touched_shared.clear();
        if sample_due {
            obs.on_sample(&self.snapshot());
            // The heap holds no other sample now, so this is the next real event.
            if let Some(next) = self.next_time() {
                let every = self.cfg.sample_interval_ms;
                let mut at = t.plus_ms(every);
                if at < next {
                    at = SimTime(next.as_ms().div_ceil(every).saturating_mul(every));
                }
                self.events.push(at, Event::Sample);
            }
        }
        Ok(())
    }

    /// The view a policy gets now (for a caller driving the run with
    /// [`Simulation::open_instant`]).
    pub fn view(&self) -> View<'_> {
        View { now: self.now, cluster: &self.cluster, jobs: &self.jobs }
    }

    /// Jobs not yet submitted (still to arrive).
    pub fn arrivals_left(&self) -> usize {
        self.jobs.len() - self.next_arrival
    }

    /// Whether the next instant is past the run's horizon
    /// ([`Simulation::with_horizon`]): a driven run stops there, as
    /// [`Simulation::run_observed`] does.
    pub fn past_horizon(&self) -> bool {
        self.horizon.is_some_and(|h| self.next_time().is_some_and(|t| t > h))
    }

    /// The checks [`Simulation::run_observed`] makes after every instant:
    /// the invariants (when on) and the net-progress watch.
    ///
    /// # Errors
    /// [`SimError::Invariant`], or the net-progress watch's error.
    pub fn check_after_instant(&mut self) -> Result<(), SimError> {
        if self.invariant_checks {
            self.check_invariants().map_err(|reason| SimError::Invariant {
                policy: self.policy.name(),
                at_ms: self.now.as_ms(),
                reason,
            })?;
            if self.jobs.work_defined() > 0 {
                self.check_progress_monotone().map_err(|reason| SimError::Invariant {
                    policy: self.policy.name(),
                    at_ms: self.now.as_ms(),
                    reason,
                })?;
            }
        }
        if self.stats.launches + self.stats.preemptions + self.stats.resizes >= self.net.next_check {
            self.check_net_progress()?;
        }
        Ok(())
    }

    /// Before a driven run's first instant: the checks
    /// [`Simulation::run_observed`] makes before it (every work-defined
    /// job's application known to the progress model).
    ///
    /// # Errors
    /// [`SimError::ModelFailure`] naming the job.
    pub fn check_start(&self) -> Result<(), SimError> {
        self.check_progress_model()
    }

    /// Whether the run may end now: every admitted job completed or
    /// rejected, or the run allows unfinished jobs.
    ///
    /// # Errors
    /// [`SimError::Unfinished`] naming the jobs left.
    pub fn check_end(&self) -> Result<(), SimError> {
        if self.completed + self.rejected < self.jobs.len() && !self.allow_unfinished {
            return Err(self.unfinished());
        }
        Ok(())
    }

    /// Runs to the end, calling `progress` every 4,096 instants.
    ///
    /// # Errors
    /// The first [`SimError`] of the run.
    pub fn run_with(self, progress: impl FnMut(Progress)) -> Result<RunOutput, SimError> {
        self.run_observed(&mut NoObserver, progress)
    }

    /// Runs to the end, calling `obs` after every change and `progress` every
    /// 4,096 instants; `obs` has seen [`Observer::on_finish`] when this returns.
    ///
    /// # Errors
    /// The first [`SimError`] of the run.
    pub fn run_observed<O: Observer + ?Sized>(
        mut self,
        obs: &mut O,
        mut progress: impl FnMut(Progress),
    ) -> Result<RunOutput, SimError> {
        self.check_progress_model()?;
        let mut n: u64 = 0;
        loop {
            if self.past_horizon() {
                break;
            }
            if self.step_observed(obs)?.is_none() {
                break;
            }
            self.check_after_instant()?;
            n += 1;
            if n.is_multiple_of(4096) {
                progress(Progress {
                    now: self.now,
                    completed: self.completed,
                    total: self.jobs.len(),
                    changes: self.stats.launches + self.stats.preemptions,
                });
            }
        }
        progress(Progress {
            now: self.now,
            completed: self.completed,
            total: self.jobs.len(),
            changes: self.stats.launches + self.stats.preemptions,
        });
        self.check_end()?;
        Ok(self.finish_observed(obs))
    }

    /// The error of a run that ran out of events with admitted jobs not
    /// completed: how many, and the first few by id with their state.
    /// The jobs not completed (with `not_arrived`, also those not yet
    /// submitted): their count and the first five by id, for an error.
    pub(super) fn jobs_alive(&self, not_arrived: bool) -> (usize, Vec<crate::error::UnfinishedJob>) {
        /// Jobs named in the message.
        const NAMED: usize = 5;
        let mut jobs = Vec::new();
        let mut count = 0;
        for spec in self.jobs.specs() {
            let state = match self.jobs.state(spec.id) {
                JobState::Completed(_) | JobState::Rejected(_) => continue,
                JobState::NotArrived if !not_arrived => continue,
                JobState::Running(_) => "running",
                JobState::Suspended(_) => "suspended",
                JobState::Pending => "pending",
                JobState::NotArrived => "not yet submitted",
            };
            count += 1;
            if jobs.len() < NAMED {
                jobs.push(crate::error::UnfinishedJob {
                    name: spec.name.to_string(),
                    line: spec.line,
                    gpus: spec.gpus,
                    state,
                });
            }
        }
        (count, jobs)
    }

    fn unfinished(&self) -> SimError {
        let (count, jobs) = self.jobs_alive(true);
        SimError::Unfinished {
            policy: self.policy.name(),
            now: self.now,
            count,
            admitted: self.jobs.len(),
            jobs,
            file: None,
        }
    }

    /// Runs to the end.
    ///
    /// # Errors
    /// The first [`SimError`] of the run.
    pub fn run(self) -> Result<RunOutput, SimError> {
        self.run_with(|_| {})
    }

    /// Ends the run where it is and hands back its state.
    pub fn finish(self) -> RunOutput {
        self.finish_observed(&mut NoObserver)
    }

    /// [`Simulation::finish`], telling `obs` ([`Observer::on_finish`]).
    pub fn finish_observed<O: Observer + ?Sized>(self, obs: &mut O) -> RunOutput {
        obs.on_finish(&self.snapshot());
        RunOutput {
            policy_metrics: self.policy.metrics(&self.jobs),
            policy_files: self.policy.files(),
            solver_rounds: self.policy.solver_rounds(),
            policy: self.policy.name(),
            model: self.model.name(),
            model_counters: {
                let mut c = self.model.counters();
                if let Some(i) = self.interference.as_ref().filter(|_| self.stats.shared_launches > 0) {
                    c.extend(i.counters());
                }
                c
            },
            cluster: self.cluster,
            jobs: self.jobs,
            stats: self.stats,
        }
    }

    /// The trace's name and line of `job` (empty and 0 for no such job).
    fn job_label(&self, job: JobId) -> (String, u64) {
        match self.jobs.specs().get(job.index()) {
            Some(s) => (s.name.to_string(), s.line),
            None => (String::new(), 0),
        }
    }

    /// An invalid decision of the policy about `job`, named as the trace names it.
    fn invalid(&self, job: JobId, gpu: Option<GpuId>, reason: String) -> SimError {
        let (job_name, line) = self.job_label(job);
        SimError::InvalidDecision { policy: self.policy.name(), job, job_name, line, file: None, gpu, reason }
    }

    /// A failure of `model` (the rate model or the co-location model) for `job`.
    fn model_failure(&self, model: String, job: JobId, reason: String) -> SimError {
        let (job_name, line) = self.job_label(job);
        SimError::ModelFailure { model, job, job_name, line, file: None, reason }
    }

    /// A failure of the engine's own bookkeeping about `job` (a bug of the engine).
    fn internal(&self, job: JobId, gpu: Option<GpuId>, reason: String) -> SimError {
        let (job_name, line) = self.job_label(job);
        SimError::Internal { job, job_name, line, file: None, gpu, reason }
    }

    /// Checks a rate from [`Simulation::rate_of`]: the rate model's placement
    /// rate `base` and the co-location speed `speed` must be finite and
    /// positive, and so must their product.
    fn check_rate(&self, job: JobId, base: f64, speed: f64) -> Result<(), SimError> {
        if !(base.is_finite() && base > 0.0) {
            let reason = format!("rate model gave rate {base}; rates must be finite and positive");
            return Err(self.model_failure(self.model.name().to_string(), job, reason));
        }
        let rate = base * speed;
        if !(speed.is_finite() && speed > 0.0 && rate.is_finite() && rate > 0.0) {
            let name = self.interference.as_deref().map_or("interference", |i| i.name());
            let reason = format!(
                "co-location model gave speed {speed} (rate {base} × {speed} = {rate}); speeds must be finite and positive"
            );
            return Err(self.model_failure(name.to_string(), job, reason));
        }
        Ok(())
    }

    fn schedule_pass<O: Observer + ?Sized>(&mut self, obs: &mut O) -> Result<(), SimError> {
        // The bound open_instant computed for this pass.
        let bound = self.open.map_or_else(|| self.decision_bound(), |o| o.bound);
        let mut decisions: u64 = 0;
        loop {
            decisions += 1;
            if decisions > bound {
                return Err(self.no_progress(obs, bound));
            }
            let view = View { now: self.now, cluster: &self.cluster, jobs: &self.jobs };
            match self.policy.decide(&view) {
                Decision::Wait => return Ok(()),
                d => self.apply_decision(d, obs)?,
            }
        }
    }

    /// A job's rate on `gpus` now: its placement rate from the rate model,
    /// times the smallest co-location speed over its shared GPUs. Returns
    /// (rate, isolated rate, co-located now, co-location speed); a speed
    /// from the co-location model that is not finite and positive is
    /// returned as the speed, for [`Simulation::check_rate`] to report.
    fn rate_of(&self, job: JobId, gpus: &[GpuId]) -> (f64, f64, bool, f64) {
        let spec = self.jobs.spec(job);
        let base = self.model.rate(spec, gpus, &self.cluster);
        let Some(interference) = self.interference.as_deref().filter(|_| self.cluster.shared_gpus() > 0) else {
            return (base, base, false, 1.0);
        };
        let mut speed: f64 = 1.0;
        let mut colocated = false;
        let mut others: Vec<std::borrow::Cow<'_, JobSpec>> = Vec::new();
        // A tenant with a guaranteed compute share (milli-GPU) runs at its
        // recorded speed: its trace run time was measured under that share
        // (the Alibaba PAI 2023 pods), so slowing it again would count the
        // sharing twice. Only whole-GPU jobs that time-slice are slowed.
        if spec.gpu_milli().is_some() {
            let colocated = gpus.iter().any(|&g| self.cluster.tenants(g).len() > 1);
            return (base, base, colocated, 1.0);
        }
        for &g in gpus {
            let tenants = self.cluster.tenants(g);
            if tenants.len() < 2 {
                continue;
            }
            colocated = true;
            others.clear();
            others.extend(tenants.iter().filter(|&&t| t != job).map(|&t| {
                let n = match self.jobs.state(t) {
                    JobState::Running(r) => r.gpus.len(),
                    _ => 1,
                };
                as_tenant(self.jobs.spec(t), n)
            }));
            let gpu_type = &self.cluster.node(self.cluster.node_of(g)).gpu_type;
            let refs: Vec<&JobSpec> = others.iter().map(|o| o.as_ref()).collect();
            let s = interference.speed(gpu_type, &as_tenant(spec, gpus.len()), &refs);
            if !(s.is_finite() && s > 0.0) {
                // Not hidden by `min` (which drops a NaN): the caller reports it.
                return (base * s, base, true, s);
            }
            speed = speed.min(s);
        }
        (base * speed, base, colocated, speed)
    }

    /// Checks that `job` fits each of `gpus`: its memory need per GPU and
    /// the GPU types it allows (GPUs out of range are left to the ledger).
    fn check_fit(&self, job: JobId, gpus: &[GpuId]) -> Result<(), SimError> {
        let spec: &JobSpec = self.jobs.spec(job);
        if let Some(need) = spec.gpu_mem_mib()
            && let Some(&g) = gpus.iter().find(|&&g| {
                g.index() < self.cluster.total_gpus() as usize
                    && self.cluster.node(self.cluster.node_of(g)).gpu_mem_mib < need
            })
        {
            let have = self.cluster.node(self.cluster.node_of(g)).gpu_mem_mib;
            return Err(self.invalid(
                job,
                Some(g),
                format!("GPU has {have} MiB of memory, the job needs {need} MiB per GPU"),
            ));
        }
        if let Some(types) = &spec.gpu_types()
            && let Some(&g) = gpus.iter().find(|&&g| {
                g.index() < self.cluster.total_gpus() as usize
                    && !types.contains(&self.cluster.node(self.cluster.node_of(g)).gpu_type)
            })
        {
            let have = &self.cluster.node(self.cluster.node_of(g)).gpu_type;
            return Err(self.invalid(
                job,
                Some(g),
                format!("GPU is a {have}; the job allows only {}", types.join(", ")),
            ));
        }
        Ok(())
    }

    fn launch<O: Observer + ?Sized>(
        &mut self,
        job: JobId,
        gpus: Vec<GpuId>,
        shared: bool,
        obs: &mut O,
    ) -> Result<(), SimError> {
        if job.index() >= self.jobs.len() {
            return Err(self.invalid(job, None, "no such job".into()));
        }
        if self.jobs.spec(job).elastic().is_some() {
            return self.launch_elastic(job, gpus, None, shared, obs);
        }
        let resumed = match self.jobs.state(job) {
            JobState::Pending => None,
            JobState::Suspended(s) => Some(**s),
            _ => return Err(self.invalid(job, None, "job is neither pending nor suspended".into())),
        };
        let spec: &JobSpec = self.jobs.spec(job);
        match &spec.task {
            // A moldable task takes any GPU count that leaves every GPU at least one sample.
            Some(t) if gpus.is_empty() || gpus.len() as u64 > u64::from(t.global_bsz) => {
                let reason = format!(
                    "placement has {} GPUs; a task of global batch {} takes 1 to {} GPUs",
                    gpus.len(),
                    t.global_bsz,
                    t.global_bsz
                );
                return Err(self.invalid(job, None, reason));
            }
            Some(_) => {}
            None if gpus.len() != spec.gpus as usize => {
                let reason = format!("placement has {} GPUs but the job asks for {}", gpus.len(), spec.gpus);
                return Err(self.invalid(job, None, reason));
            }
            None => {}
        }
        let vc = spec.vc;
        self.check_fit(job, &gpus)?;
        let spec: &JobSpec = self.jobs.spec(job);
        let (milli, mut mem_need) = (spec.gpu_milli().unwrap_or(0), spec.gpu_mem_mib());
        if shared && spec.task.is_some() {
            // A moldable task's memory per GPU depends on its GPU count.
            mem_need = self.task_memory.as_ref().and_then(|m| m(spec, gpus.len() as u32));
        }
        let allocated = if shared {
            // Memory is per GPU, by the one rule the placements use
            // (`Cluster::tenant_mem_mib` of each GPU): a job of unknown
            // memory holds each GPU's whole memory, whatever its type.
            self.cluster.allocate_tenant(job, vc, &gpus, mem_need, milli)
        } else {
            self.cluster.allocate(job, vc, &gpus)
        };
        if let Err(e) = allocated {
            return Err(self.invalid(job, e.gpu, e.reason));
        }
        if shared {
            if self.interference.is_none() {
                let reason = "the policy co-locates a job but the run gave the engine no co-location model \
                              (Simulation::with_interference)"
                    .to_string();
                return Err(self.model_failure("interference".into(), job, reason));
            }
            self.touched_shared.extend_from_slice(&gpus);
            self.stats.shared_launches += 1;
        }
        let (rate, isolated_rate, colocated, speed) = self.rate_of(job, &gpus);
        self.check_rate(job, isolated_rate, speed)?;
        let spec = self.jobs.spec(job);
        // A resumed job carries its remaining work, its counters and its epoch.
        let (remaining, epoch, first_start, preemptions, attained_ms, attained_gpu_ms, waited_ms) = match resumed {
            None => (spec.duration_ms as f64, 0, self.now, 0, 0, 0, self.now.since(spec.submit)),
            Some(s) => (
                s.remaining,
                s.epoch,
                s.first_start,
                s.preemptions,
                s.attained_ms,
                s.attained_gpu_ms,
                s.waited_ms + self.now.since(s.since),
            ),
        };
        let nodes_spanned = self.cluster.nodes_spanned(&gpus);
        if self.model.depends_on_neighbours() {
            self.touched.extend(gpus.iter().map(|&g| self.cluster.node_of(g)));
        }
        self.events.push(self.now.plus_ms(ms_to_finish(remaining, rate)), Event::Completion { job, epoch });
        if resumed.is_some() {
            self.suspended -= 1;
            self.stats.resumes += 1;
        } else {
            self.pending -= 1;
        }
        self.running += 1;
        self.stats.launches += 1;
        *self.jobs.state_mut(job) = JobState::Running(Box::new(RunState {
            start: self.now,
            gpus,
            rate,
            remaining,
            settled_at: self.now,
            epoch,
            nodes_spanned,
            shared,
            isolated_rate,
            colocated,
            first_start,
            preemptions,
            attained_ms,
            attained_gpu_ms,
            waited_ms,
            work_done: false,
            elastic: None,
        }));
        if let JobState::Running(r) = self.jobs.state(job) {
            obs.on_allocate(&self.snapshot(), job, &r.gpus, speed);
        }
        Ok(())
    }

    /// Returns a run's GPUs to the ledger (a completion or a preemption) and
    /// marks its nodes and shared GPUs for this instant's rate update.
    fn release_run(&mut self, job: JobId, run: &RunState) -> Result<(), SimError> {
        if let Err(e) = self.cluster.release(job, &run.gpus) {
            return Err(self.internal(job, e.gpu, e.reason));
        }
        if self.model.depends_on_neighbours() {
            self.touched.extend(run.gpus.iter().map(|&g| self.cluster.node_of(g)));
        }
        if run.shared {
            self.touched_shared.extend_from_slice(&run.gpus);
        }
        Ok(())
    }

    fn complete<O: Observer + ?Sized>(&mut self, job: JobId, obs: &mut O) -> Result<(), SimError> {
        let JobState::Running(run) = std::mem::replace(self.jobs.state_mut(job), JobState::Pending) else {
            unreachable!("complete() is only called on running jobs");
        };
        self.release_run(job, &run)?;
        let work = self.jobs.spec(job).duration_ms as f64;
        let ran = self.now.since(run.start);
        let submit = self.jobs.spec(job).submit;
        // A work-defined job never shares a GPU: its isolated time is its run time.
        let isolated_ms = if run.elastic.is_some() { ran } else { ms_to_finish(work, run.isolated_rate) };
        let mut done = DoneState::new(
            submit,
            run.start,
            self.now,
            isolated_ms,
            run.gpus.len() as u32,
            run.nodes_spanned,
            run.colocated,
            run.first_start,
            run.preemptions,
            run.attained_ms + ran,
            run.attained_gpu_ms + elastic::run_gpu_ms(&run, self.now),
            run.waited_ms,
        );
        if let Some(e) = &run.elastic {
            done = done.with_restarts(submit, e.restarts());
        }
        *self.jobs.state_mut(job) = JobState::Completed(done);
        self.running -= 1;
        self.completed += 1;
        obs.on_release(&self.snapshot(), job, &run.gpus);
        let view = View { now: self.now, cluster: &self.cluster, jobs: &self.jobs };
        self.policy.on_completion(job, &view);
        Ok(())
    }

    /// Recomputes the rate of every job on a node whose occupancy changed at
    /// this instant (when the rate model depends on neighbours) and of every
    /// tenant of a GPU whose tenants changed; a changed rate settles the work
    /// done and re-schedules the completion under a new epoch.
    ///
    /// # Errors
    /// [`SimError::ModelFailure`] when a recomputed rate is not finite and positive.
    fn update_rates<O: Observer + ?Sized>(&mut self, obs: &mut O) -> Result<(), SimError> {
        let mut nodes = std::mem::take(&mut self.touched);
        nodes.sort_unstable();
        nodes.dedup();
        let mut affected: Vec<JobId> = Vec::new();
        if self.model.depends_on_neighbours() {
            for &n in &nodes {
                affected.extend(self.cluster.node_gpus(n).flat_map(|g| self.cluster.holders(g)));
            }
        }
        for &g in &self.touched_shared {
            affected.extend_from_slice(self.cluster.tenants(g));
        }
        affected.sort_unstable();
        affected.dedup();
        for job in affected {
            let JobState::Running(run) = self.jobs.state(job) else {
                continue;
            };
            if run.work_done || run.elastic.is_some() {
                // Holding its GPUs for the release delay: no work to re-time;
                // or work-defined: its goodput does not depend on neighbours.
                continue;
            }
            let (new_rate, isolated, colocated, speed) = self.rate_of(job, &run.gpus);
            obs.on_speed(&self.snapshot(), job, &run.gpus, speed);
            if let JobState::Running(run) = self.jobs.state_mut(job) {
                run.isolated_rate = isolated;
                run.colocated |= colocated;
            }
            let JobState::Running(run) = self.jobs.state(job) else {
                continue;
            };
            if new_rate == run.rate {
                continue;
            }
            self.check_rate(job, isolated, speed)?;
            let now = self.now;
            let JobState::Running(run) = self.jobs.state_mut(job) else {
                continue;
            };
            let done = now.since(run.settled_at) as f64 * run.rate;
            run.remaining = (run.remaining - done).max(0.0);
            run.settled_at = now;
            run.rate = new_rate;
            run.epoch += 1;
            let at = now.plus_ms(ms_to_finish(run.remaining, new_rate));
            let epoch = run.epoch;
            self.events.push(at, Event::Completion { job, epoch });
            self.stats.rate_changes += 1;
        }
        self.touched = nodes;
        Ok(())
    }

    /// Checks every invariant the engine keeps: the cluster's ledger is
    /// consistent, every running job holds exactly its GPUs and no GPU is held
    /// by a job that is not running (a suspended job holds none), every job's
    /// time since submission is its waiting plus its service
    /// (`waited + attained`, to its current run's start for a running job, to
    /// its preemption for a suspended one), and the job counters add up.
    ///
    /// # Errors
    /// A description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.cluster.check_consistency()?;
        let (mut pending, mut running, mut completed, mut held) = (0u32, 0u32, 0usize, 0u64);
        let mut rejected = 0usize;
        let mut suspended = 0u32;
        let mut held_shared: Vec<GpuId> = Vec::new();
        // No GPU is held by a job that is not running.
        for g in 0..self.cluster.total_gpus() {
            let g = GpuId(g);
            let holders = self.cluster.owner(g).into_iter().chain(self.cluster.tenants(g).iter().copied());
            for j in holders {
                if !matches!(self.jobs.state(j), JobState::Running(_)) {
                    return Err(format!("{g} is held by {j}, which is not running: {:?}", self.jobs.state(j)));
                }
            }
        }
        let adds_up = |id: JobId, what: &str, since_submit: u64, waited: u64, attained: u64| {
            if waited + attained == since_submit {
                Ok(())
            } else {
                Err(format!(
                    "{id}: waited {waited} ms + attained {attained} ms != {since_submit} ms from submit to {what}"
                ))
            }
        };
        for (spec, state) in self.jobs.iter() {
            match state {
                JobState::NotArrived => {
                    if spec.submit < self.now {
                        return Err(format!("{} should have arrived at {}", spec.id, spec.submit));
                    }
                }
                JobState::Pending => pending += 1,
                JobState::Rejected(at) => {
                    rejected += 1;
                    if *at < spec.submit || *at > self.now {
                        return Err(format!("{} rejected at {at}, submitted at {}", spec.id, spec.submit));
                    }
                }
                JobState::Suspended(su) => {
                    suspended += 1;
                    if su.preemptions == 0 || su.first_start < spec.submit || su.since < su.first_start {
                        return Err(format!("{} suspended with inconsistent state {su:?}", spec.id));
                    }
                    if !(su.remaining.is_finite() && su.remaining >= 0.0) {
                        return Err(format!("{} suspended with remaining work {}", spec.id, su.remaining));
                    }
                    if let Some(e) = &su.elastic {
                        elastic::check_suspended(spec, su, e, self.jobs.progress_model())?;
                    }
                    if su.attained_gpu_ms < su.attained_ms {
                        return Err(format!("{} attained {su:?}: fewer GPU-ms than ms", spec.id));
                    }
                    adds_up(spec.id, "its preemption", su.since.since(spec.submit), su.waited_ms, su.attained_ms)?;
                }
                JobState::Running(r) => {
                    running += 1;
                    if r.first_start > r.start || r.first_start < spec.submit {
                        return Err(format!("{} first start {} after start {}", spec.id, r.first_start, r.start));
                    }
                    adds_up(spec.id, "its start", r.start.since(spec.submit), r.waited_ms, r.attained_ms)?;
                    if spec.task.is_none() && r.elastic.is_none() && r.gpus.len() != spec.gpus as usize {
                        return Err(format!("{} holds {} GPUs, asked for {}", spec.id, r.gpus.len(), spec.gpus));
                    }
                    for &g in &r.gpus {
                        let ok = if r.shared {
                            self.cluster.tenants(g).contains(&spec.id)
                        } else {
                            self.cluster.owner(g) == Some(spec.id)
                        };
                        if !ok {
                            return Err(format!("{} thinks it holds {g} but the ledger disagrees", spec.id));
                        }
                        if r.shared {
                            let s = self.cluster.share(g);
                            if s.tenants.len() > 1 && s.mem_mib > self.cluster.gpu_mem_mib(g) {
                                return Err(format!(
                                    "GPU {g} memory over-committed: {} MiB held of {} MiB",
                                    s.mem_mib,
                                    self.cluster.gpu_mem_mib(g)
                                ));
                            }
                        }
                    }
                    if let Some(e) = &r.elastic {
                        elastic::check_running(spec, r, e, self.now)?;
                    }
                    if r.shared {
                        held_shared.extend(r.gpus.iter().copied());
                    } else {
                        held += r.gpus.len() as u64;
                    }
                }
                JobState::Completed(d) => {
                    completed += 1;
                    if d.end < d.start || d.start < spec.submit || d.first_start() > d.start {
                        return Err(format!("{} has start {} end {} submit {}", spec.id, d.start, d.end, spec.submit));
                    }
                    adds_up(spec.id, "its end", d.end.since(spec.submit), d.waited_ms(spec.submit), d.attained_ms())?;
                    if d.attained_gpu_ms() != d.attained_ms() * u64::from(d.gpus)
                        && spec.task.is_none()
                        && spec.elastic().is_none()
                    {
                        return Err(format!(
                            "{}: attained {} GPU-ms for {} ms on {} GPUs",
                            spec.id,
                            d.attained_gpu_ms(),
                            d.attained_ms(),
                            d.gpus
                        ));
                    }
                }
            }
        }
        held_shared.sort_unstable();
        held_shared.dedup();
        held += held_shared.len() as u64;
        let busy = u64::from(self.cluster.total_gpus()) - self.cluster.free_gpus();
        if held != busy {
            return Err(format!("running jobs hold {held} GPUs but the cluster has {busy} busy"));
        }
        if (pending, running, completed, suspended, rejected)
            != (self.pending, self.running, self.completed, self.suspended, self.rejected)
        {
            return Err(format!(
                "counters (pending {}, running {}, completed {}, suspended {}, rejected {}) disagree with states ({pending}, {running}, {completed}, {suspended}, {rejected})",
                self.pending, self.running, self.completed, self.suspended, self.rejected
            ));
        }
        Ok(())
    }
}

/// Whole milliseconds to finish `remaining` work at `rate`, rounded up, with a
/// tolerance of 1e-9 ms plus 1e-12 of the quotient so that exact quotients are
/// not pushed to the next ms by floating-point noise.
///
/// A whole number of ms at rate exactly 1 (trace speed) is its own answer:
/// the division is exact there, and the tolerance, 1 ms or more above 10^12 ms,
/// would end such a job early. Every whole number of ms up to the largest
/// accepted duration ([`crate::time::MAX_SECS`], 10^14 ms) is exact in `f64`.
fn ms_to_finish(remaining: f64, rate: f64) -> u64 {
    if rate == 1.0 && remaining.fract() == 0.0 {
        return remaining.max(0.0) as u64;
    }
    let q = remaining / rate;
    (q - 1e-9 - q.abs() * 1e-12).ceil().max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_failure_is_an_internal_error_not_the_policys() {
        // One job on one GPU; its GPU is released behind the engine's back,
        // so the ledger refuses the release at its completion (10 s).
        let cluster = Cluster::new(crate::cluster::ClusterSpec::uniform("t", 1, 1, "V100", 16_000)).unwrap();
        let p = crate::policy::config::PolicyConfig {
            order: crate::policy::queue::QueueOrder::Fifo,
            backfill: false,
            placement: crate::policy::placement::PlacementKind::Consolidate,
        };
        let mut r = crate::trace::TraceRecord::new("j", 0, 10_000, 1);
        r.line = 2;
        let w = crate::workload::build_workload(vec![r], &cluster, p.placement.build());
        let mut sim = Simulation::new(
            cluster,
            w.jobs,
            p.build(1).unwrap(),
            Box::new(crate::profile::TraceSpeed),
            EngineConfig { sample_interval_ms: 0 },
        );
        assert_eq!(sim.step().unwrap(), Some(SimTime::ZERO));
        sim.cluster.release(JobId(0), &[GpuId(0)]).unwrap();
        let err = sim.step().expect_err("the engine's release fails");
        assert!(
            matches!(&err, SimError::Internal { job_name, line: 2, gpu: Some(GpuId(0)), .. } if job_name == "j"),
            "{err:?}"
        );
        let text = err.in_file(std::path::Path::new("x.csv")).to_string();
        assert!(text.starts_with("internal engine error for job `j` (x.csv, line 2) on gpu0: "), "{text}");
    }

    #[test]
    fn exact_quotients_do_not_round_up() {
        // 20,559,000 ms of work at rate 0.7 is exactly 29,370,000 ms (the
        // floating-point quotient is 29370000.000000004).
        assert_eq!(ms_to_finish(20_559_000.0, 0.7), 29_370_000);
        assert_eq!(ms_to_finish(10.0, 1.0), 10);
        assert_eq!(ms_to_finish(10.5, 1.0), 11);
        assert_eq!(ms_to_finish(0.0, 0.3), 0);
    }

    #[test]
    fn trace_speed_ends_exactly_at_long_durations() {
        // 10^9 s = 10^12 ms, 10^10 s = 10^13 ms, 10^11 s (the accepted
        // maximum) = 10^14 ms; at rate 1 the run time is the duration itself.
        // The old tolerance took 1 ms (10^12 ms), 10 ms and 100 ms off them.
        assert_eq!(ms_to_finish(1e12, 1.0), 1_000_000_000_000);
        assert_eq!(ms_to_finish(1e13, 1.0), 10_000_000_000_000);
        assert_eq!(ms_to_finish(1e14, 1.0), 100_000_000_000_000);
        // An odd number of ms just below the maximum: 10^14 - 1.
        assert_eq!(ms_to_finish(99_999_999_999_999.0, 1.0), 99_999_999_999_999);
    }
}
