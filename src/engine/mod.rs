//! The discrete-event engine: one clock, one event queue, all mutable state.
//!
//! The engine pops every event of the earliest instant (arrivals, completions,
//! samples), then runs one scheduling pass in which it asks the policy for
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

mod checkpoint;
mod preempt;
mod queue;

pub use checkpoint::CheckpointModel;
pub use queue::EventQueue;

use crate::cluster::Cluster;
use crate::error::SimError;
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::{DoneState, JobSpec, JobState, JobTable, RunState};
use crate::policy::{Decision, Policy, View};
use crate::profile::RateModel;
use crate::profile::coloc::{Interference, ProfileInterference};
use crate::profile::db::ProfileDb;
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

/// Engine options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Interval between timeline samples, ms; 0 disables sampling.
    pub sample_interval_ms: u64,
    /// Measure the wall-clock time of every policy decision (two clock reads
    /// per call: off for plain replays, where it would cost a few percent).
    pub time_decisions: bool,
    /// Keep the sharing figures' time integrals ([`ShareIntegrals`]:
    /// allocation, SM-busy estimate, memory, fragmentation). They cost about
    /// a tenth of a plain trace replay, where they say nothing new (no model,
    /// no memory, no sharing), so `run_one` turns them off there.
    pub share_metrics: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { sample_interval_ms: 600_000, time_decisions: false, share_metrics: true }
    }
}

/// Wall-clock cost of the policy's decisions (the one non-deterministic
/// output: it goes to `timing.json`, never to `summary.json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct DecisionTiming {
    /// `decide` calls.
    pub decisions: u64,
    /// Their total wall time, s.
    pub total_s: f64,
    /// The slowest call, s.
    pub max_s: f64,
}

/// One timeline sample: cluster state after the scheduling pass at `time`
/// (ms since the trace origin). Between two samples the state is either
/// constant or sampled every interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When.
    pub time: SimTime,
    /// GPUs held by running jobs.
    pub gpus_busy: u32,
    /// Jobs running.
    pub jobs_running: u32,
    /// Jobs submitted and waiting (pending, and suspended after a preemption).
    pub jobs_pending: u32,
}

/// Counters of what the engine did (deterministic; wall time is measured elsewhere).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    /// Events popped.
    pub events: u64,
    /// Distinct instants processed (one scheduling pass each).
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
    /// Timers delivered to the policy.
    pub timers: u64,
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
}

/// The result of a finished run.
pub struct RunOutput {
    /// The cluster in its final state.
    pub cluster: Cluster,
    /// Every job with its final state.
    pub jobs: JobTable,
    /// Timeline samples.
    pub timeline: Vec<Sample>,
    /// What the engine did.
    pub stats: EngineStats,
    /// The policy's name.
    pub policy: String,
    /// The rate model's name.
    pub model: &'static str,
    /// The rate model's counters (e.g. profile fallbacks), then the
    /// interference model's.
    pub model_counters: Vec<(&'static str, u64)>,
    /// Per partition (by [`crate::ids::VcId`]): GPU-milliseconds during which a
    /// GPU was held (exclusively or by at least one tenant), from t = 0 to the
    /// last event. A shared GPU counts once, however many tenants it has.
    pub busy_gpu_ms: Vec<u64>,
    /// Decision timing, when measured ([`EngineConfig::time_decisions`]).
    pub timing: Option<DecisionTiming>,
    /// Time integrals from t = 0 to the last event, GPU-ms, of the sharing
    /// metrics ([`ShareIntegrals`]); `None` when not kept
    /// ([`EngineConfig::share_metrics`]).
    pub share_integrals: Option<ShareIntegrals>,
    /// The policy's own figures ([`Policy::metrics`]).
    pub policy_metrics: Vec<(&'static str, f64)>,
    /// The policy's extra run-directory files ([`Policy::files`]).
    pub policy_files: Vec<(&'static str, String)>,
}

/// Time integrals (GPU-milliseconds) of per-GPU figures, summed over GPUs;
/// the engine keeps each GPU's current value and updates only the GPUs and
/// nodes a launch or completion touches (O(GPUs of the job) per event).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShareIntegrals {
    /// Allocated fraction: 1 for a GPU held exclusively; for a shared GPU
    /// the tenants' requests summed and capped at 1 (a guaranteed share
    /// counts milli-GPU / 1,000, a whole-GPU tenant 1).
    pub alloc_gpu_ms: f64,
    /// SM-busy estimate from the work actually done: per GPU, the sum over
    /// its holders of (achieved rate / isolated rate, the job's co-location
    /// speed) × (its SM-utilisation estimate alone,
    /// [`crate::profile::resources::job_sm_util`]), capped at 1. A job that
    /// runs at 0.6 of its isolated speed keeps its GPU's SMs busy 0.6 as
    /// long per unit of time as it would alone.
    pub util_gpu_ms: f64,
    /// Memory held / GPU memory (an exclusive job of unknown memory holds it all).
    pub mem_gpu_ms: f64,
    /// FGD fragmentation ([`crate::policy::fgd`]) summed over nodes, in GPUs.
    pub frag_gpu_ms: f64,
}

/// A simulation: owns the clock, the event queue, the cluster, the jobs, the
/// policy and the rate model. Only the engine mutates state.
pub struct Simulation {
    now: SimTime,
    events: EventQueue<Event>,
    cluster: Cluster,
    jobs: JobTable,
    policy: Box<dyn Policy>,
    model: Box<dyn RateModel>,
    /// Set at the first shared launch (so runs that never share never load
    /// the profile database), or by [`Simulation::with_interference`].
    interference: Option<Box<dyn Interference>>,
    /// The run's profile database ([`Simulation::with_profiles`]), for the
    /// co-location model and the SM-utilisation estimates; the builtin one,
    /// loaded when first needed, when unset.
    profiles: Option<&'static ProfileDb>,
    cfg: EngineConfig,
    timeline: Vec<Sample>,
    pending: u32,
    running: u32,
    completed: usize,
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
    /// Per partition: busy GPU-ms up to `busy_since`.
    busy_gpu_ms: Vec<u64>,
    busy_since: Vec<SimTime>,
    timing: DecisionTiming,
    next_arrival: usize,
    stats: EngineStats,
    /// Per GPU: allocated fraction, SM-busy estimate, memory fraction.
    gpu_figs: Vec<[f64; 3]>,
    /// Per node: FGD fragmentation.
    node_frag: Vec<f64>,
    /// Current sums of the above (alloc, util, mem, frag).
    fig_sums: [f64; 4],
    integrals: ShareIntegrals,
    figs_since: SimTime,
    frag_model: crate::policy::fgd::FragModel,
    /// Jobs' SM-utilisation estimates, by job index (set at launch).
    job_util: Vec<f64>,
    /// Jobs' co-location speeds (achieved / isolated rate), by job index
    /// (set at launch and whenever a rate is recomputed).
    job_speed: Vec<f64>,
    /// Scratch for [`Simulation::refresh_figs`]: touched nodes, free capacities.
    fig_nodes: Vec<NodeId>,
    fig_free: Vec<f64>,
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
        let cluster_partitions = cluster.partitions().len();
        let n_jobs = jobs.len();
        let max_mem = cluster.spec().nodes.iter().map(|n| n.gpu_mem_mib).max().unwrap_or(0);
        let max_node = cluster.spec().nodes.iter().map(|n| n.gpus).max().unwrap_or(0);
        let (frag_model, node_frag, gpu_figs) = if cfg.share_metrics {
            let frag_model = crate::policy::fgd::FragModel::from_jobs(&jobs, max_mem, max_node);
            let mut free = Vec::new();
            let node_frag: Vec<f64> = (0..cluster.num_nodes())
                .map(|n| {
                    crate::policy::fgd::node_free(&cluster, NodeId(n as u32), &mut free);
                    frag_model.node_frag(&free)
                })
                .collect();
            (frag_model, node_frag, vec![[0.0; 3]; cluster.total_gpus() as usize])
        } else {
            (Default::default(), Vec::new(), Vec::new())
        };
        let frag0: f64 = node_frag.iter().sum();
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
            profiles: None,
            cfg,
            timeline: Vec::new(),
            pending: 0,
            running: 0,
            completed: 0,
            suspended: 0,
            checkpoint: CheckpointModel::None,
            release_delay_ms,
            touched: Vec::new(),
            touched_shared: Vec::new(),
            busy_gpu_ms: vec![0; cluster_partitions],
            busy_since: vec![SimTime::ZERO; cluster_partitions],
            timing: DecisionTiming::default(),
            next_arrival: 0,
            stats: EngineStats::default(),
            gpu_figs,
            node_frag,
            fig_sums: [0.0, 0.0, 0.0, frag0],
            integrals: ShareIntegrals::default(),
            figs_since: SimTime::ZERO,
            frag_model,
            job_util: vec![1.0; n_jobs],
            job_speed: vec![1.0; n_jobs],
            fig_nodes: Vec::new(),
            fig_free: Vec::new(),
        }
    }

    /// Charges every preemption of this run by `model` (default
    /// [`CheckpointModel::None`]).
    pub fn with_checkpoint(mut self, model: CheckpointModel) -> Self {
        self.checkpoint = model;
        self
    }

    /// Replaces the co-location model (default: the run's profile
    /// database's co-location table, [`ProfileInterference`]).
    pub fn with_interference(mut self, interference: Box<dyn Interference>) -> Self {
        self.interference = Some(interference);
        self
    }

    /// Reads the run's profile database `db` (the one its `--profiles`
    /// names, else the builtin one) for the default co-location model and
    /// the SM-utilisation estimates of the sharing figures. Without it the
    /// engine reads the builtin database.
    pub fn with_profiles(mut self, db: &'static ProfileDb) -> Self {
        self.profiles = Some(db);
        self
    }

    /// The run's profile database; the builtin one when none was given.
    fn profiles(&mut self) -> &'static ProfileDb {
        self.profiles.get_or_insert_with(ProfileDb::builtin)
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
    /// [`SimError::InvalidDecision`] when the policy asks for something the
    /// cluster cannot do; the run should stop then.
    pub fn step(&mut self) -> Result<Option<SimTime>, SimError> {
        let Some(t) = self.next_time() else { return Ok(None) };
        self.now = t;
        self.stats.instants += 1;
        let mut sample_due = false;
        // Completions (and timers) first, then arrivals, then one pass.
        while let Some(ev) = self.events.pop_at(t) {
            self.stats.events += 1;
            match ev {
                Event::Completion { job, epoch } => match self.jobs.state(job) {
                    JobState::Running(r) if r.epoch == epoch => {
                        if self.release_delay_ms > 0 && !r.work_done {
                            self.hold_after_work(job);
                        } else {
                            self.complete(job)?;
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
        }
        self.schedule_pass()?;
        if (self.model.depends_on_neighbours() && !self.touched.is_empty()) || !self.touched_shared.is_empty() {
            self.update_rates();
        }
        self.touched.clear();
        self.touched_shared.clear();
        if sample_due {
            self.timeline.push(Sample {
                time: t,
                gpus_busy: self.cluster.total_gpus() - self.cluster.free_gpus() as u32,
                jobs_running: self.running,
                jobs_pending: self.pending + self.suspended,
            });
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
        Ok(Some(t))
    }

    /// Runs to the end, calling `progress` every 4,096 instants.
    ///
    /// # Errors
    /// The first [`SimError`] of the run.
    pub fn run_with(mut self, mut progress: impl FnMut(Progress)) -> Result<RunOutput, SimError> {
        let mut n: u64 = 0;
        while self.step()?.is_some() {
            n += 1;
            if n.is_multiple_of(4096) {
                progress(Progress { now: self.now, completed: self.completed, total: self.jobs.len() });
            }
        }
        progress(Progress { now: self.now, completed: self.completed, total: self.jobs.len() });
        Ok(self.finish())
    }

    /// Runs to the end.
    ///
    /// # Errors
    /// The first [`SimError`] of the run.
    pub fn run(self) -> Result<RunOutput, SimError> {
        self.run_with(|_| {})
    }

    /// Ends the run where it is and hands back its state.
    pub fn finish(mut self) -> RunOutput {
        for vc in 0..self.busy_gpu_ms.len() {
            self.settle_busy(crate::ids::VcId(vc as u16));
        }
        self.settle_figs();
        RunOutput {
            share_integrals: self.cfg.share_metrics.then_some(self.integrals),
            busy_gpu_ms: self.busy_gpu_ms,
            timing: self.cfg.time_decisions.then_some(self.timing),
            policy_metrics: self.policy.metrics(&self.jobs),
            policy_files: self.policy.files(),
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
            timeline: self.timeline,
            stats: self.stats,
        }
    }

    /// Brings partition `vc`'s busy GPU-ms up to now (call before its
    /// allocation changes).
    fn settle_busy(&mut self, vc: crate::ids::VcId) {
        let p = self.cluster.partition(vc);
        let busy = u64::from(p.gpus_total - p.gpus_free);
        let i = vc.index();
        self.busy_gpu_ms[i] += busy * self.now.since(self.busy_since[i]);
        self.busy_since[i] = self.now;
    }

    /// Brings the sharing integrals up to now (call before an allocation changes).
    fn settle_figs(&mut self) {
        if !self.cfg.share_metrics {
            return;
        }
        let dt = self.now.since(self.figs_since) as f64;
        let [a, u, m, f] = self.fig_sums;
        self.integrals.alloc_gpu_ms += a * dt;
        self.integrals.util_gpu_ms += u * dt;
        self.integrals.mem_gpu_ms += m * dt;
        self.integrals.frag_gpu_ms += f * dt;
        self.figs_since = self.now;
    }

    /// Recomputes the figures of `gpus` and the fragmentation of their nodes.
    fn refresh_figs(&mut self, gpus: &[GpuId]) {
        if !self.cfg.share_metrics {
            return;
        }
        let mut nodes = std::mem::take(&mut self.fig_nodes);
        nodes.clear();
        for &g in gpus {
            let cap = self.cluster.gpu_mem_mib(g).max(1) as f64;
            let new = if let Some(o) = self.cluster.owner(g) {
                let mem = self.jobs.spec(o).gpu_mem_mib.map_or(1.0, |m| (m as f64 / cap).min(1.0));
                [1.0, self.job_util[o.index()] * self.job_speed[o.index()], mem]
            } else {
                let s = self.cluster.share(g);
                let (mut a, mut u) = (0.0, 0.0);
                for t in &s.tenants {
                    a += match self.jobs.spec(*t).gpu_milli {
                        Some(k) if k > 0 && k < 1000 => f64::from(k) / 1000.0,
                        _ => 1.0,
                    };
                    u += self.job_util[t.index()] * self.job_speed[t.index()];
                }
                [a.min(1.0), u.min(1.0), (s.mem_mib as f64 / cap).min(1.0)]
            };
            let old = std::mem::replace(&mut self.gpu_figs[g.index()], new);
            for i in 0..3 {
                self.fig_sums[i] += new[i] - old[i];
            }
            let n = self.cluster.node_of(g);
            if !nodes.contains(&n) {
                nodes.push(n);
            }
        }
        let mut free = std::mem::take(&mut self.fig_free);
        for &n in &nodes {
            crate::policy::fgd::node_free(&self.cluster, n, &mut free);
            let f = self.frag_model.node_frag(&free);
            self.fig_sums[3] += f - std::mem::replace(&mut self.node_frag[n.index()], f);
        }
        self.fig_nodes = nodes;
        self.fig_free = free;
    }

    fn invalid(&self, job: JobId, gpu: Option<GpuId>, reason: String) -> SimError {
        self.invalid_by(self.policy.name(), job, gpu, reason)
    }

    /// An invalid decision of `who` (the policy, the rate model or the engine)
    /// about `job`, named as the trace names it.
    fn invalid_by(&self, who: String, job: JobId, gpu: Option<GpuId>, reason: String) -> SimError {
        let (job_name, line) = match self.jobs.specs().get(job.index()) {
            Some(s) => (s.name.clone(), s.line),
            None => (String::new(), 0),
        };
        SimError::InvalidDecision { policy: who, job, job_name, line, file: None, gpu, reason }
    }

    fn schedule_pass(&mut self) -> Result<(), SimError> {
        loop {
            let view = View { now: self.now, cluster: &self.cluster, jobs: &self.jobs };
            let decision = if self.cfg.time_decisions {
                let t0 = std::time::Instant::now();
                let d = self.policy.decide(&view);
                let s = t0.elapsed().as_secs_f64();
                self.timing.decisions += 1;
                self.timing.total_s += s;
                self.timing.max_s = self.timing.max_s.max(s);
                d
            } else {
                self.policy.decide(&view)
            };
            match decision {
                Decision::Wait => return Ok(()),
                Decision::Launch { job, gpus } => self.launch(job, gpus, false)?,
                Decision::Colocate { job, gpus } => self.launch(job, gpus, true)?,
                Decision::Preempt { job } => self.preempt(job)?,
                Decision::WakeAt(at) => {
                    if at <= self.now {
                        let msg = format!("timer at {at} is not after now ({})", self.now);
                        return Err(SimError::InvalidTimer { policy: self.policy.name(), reason: msg });
                    }
                    self.events.push(at, Event::Timer);
                }
            }
        }
    }

    /// A job's rate on `gpus` now: its placement rate from the rate model,
    /// times the smallest co-location speed over its shared GPUs. Returns
    /// (rate, isolated rate, co-located now, co-location speed).
    fn rate_of(&self, job: JobId, gpus: &[GpuId]) -> (f64, f64, bool, f64) {
        let spec = self.jobs.spec(job);
        let base = self.model.rate(spec, gpus, &self.cluster);
        let Some(interference) = self.interference.as_deref().filter(|_| self.cluster.shared_gpus() > 0) else {
            return (base, base, false, 1.0);
        };
        let mut speed: f64 = 1.0;
        let mut colocated = false;
        let mut others: Vec<&JobSpec> = Vec::new();
        // A tenant with a guaranteed compute share (milli-GPU) runs at its
        // recorded speed: its trace run time was measured under that share
        // (the Alibaba PAI 2023 pods), so slowing it again would count the
        // sharing twice. Only whole-GPU jobs that time-slice are slowed.
        if spec.gpu_milli.is_some() {
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
            others.extend(tenants.iter().filter(|&&t| t != job).map(|&t| self.jobs.spec(t)));
            let gpu_type = &self.cluster.node(self.cluster.node_of(g)).gpu_type;
            speed = speed.min(interference.speed(gpu_type, spec, &others));
        }
        (base * speed, base, colocated, speed)
    }

    fn launch(&mut self, job: JobId, gpus: Vec<GpuId>, shared: bool) -> Result<(), SimError> {
        if job.index() >= self.jobs.len() {
            return Err(self.invalid(job, None, "no such job".into()));
        }
        let resumed = match self.jobs.state(job) {
            JobState::Pending => None,
            JobState::Suspended(s) => Some(*s),
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
        if let Some(need) = spec.gpu_mem_mib
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
        if let Some(types) = &spec.gpu_types
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
        let (milli, mem_need) = (spec.gpu_milli.unwrap_or(0), spec.gpu_mem_mib);
        self.settle_busy(vc);
        self.settle_figs();
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
        if self.cfg.share_metrics {
            // The SM-utilisation estimate feeds only the sharing figures; the
            // database is read (and the builtin one loaded) only for a job
            // with a model and batch.
            let spec = self.jobs.spec(job);
            let u = if spec.model.is_some() && spec.local_bsz.is_some() {
                let db = self.profiles();
                let spec = self.jobs.spec(job);
                let gpu_type = &self.cluster.node(self.cluster.node_of(gpus[0])).gpu_type;
                crate::profile::resources::job_sm_util(db, spec, gpu_type)
            } else {
                crate::profile::resources::held_share(spec)
            };
            self.job_util[job.index()] = u;
        }
        if shared {
            self.touched_shared.extend_from_slice(&gpus);
            self.stats.shared_launches += 1;
            if self.interference.is_none() {
                let db = self.profiles();
                self.interference = Some(Box::new(ProfileInterference::new(db)));
            }
        }
        let (rate, isolated_rate, colocated, speed) = self.rate_of(job, &gpus);
        self.job_speed[job.index()] = speed;
        self.refresh_figs(&gpus);
        let spec = self.jobs.spec(job);
        if !(rate.is_finite() && rate > 0.0) {
            let reason = format!("rate model gave rate {rate}; rates must be finite and positive");
            return Err(self.invalid_by(self.model.name().to_string(), job, None, reason));
        }
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
        *self.jobs.state_mut(job) = JobState::Running(RunState {
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
        });
        if resumed.is_some() {
            self.suspended -= 1;
            self.stats.resumes += 1;
        } else {
            self.pending -= 1;
        }
        self.running += 1;
        self.stats.launches += 1;
        Ok(())
    }

    fn complete(&mut self, job: JobId) -> Result<(), SimError> {
        let JobState::Running(run) = std::mem::replace(self.jobs.state_mut(job), JobState::Pending) else {
            unreachable!("complete() is only called on running jobs");
        };
        self.settle_busy(self.jobs.spec(job).vc);
        self.settle_figs();
        if let Err(e) = self.cluster.release(job, &run.gpus) {
            return Err(self.invalid_by("engine".into(), job, e.gpu, e.reason));
        }
        self.refresh_figs(&run.gpus);
        if self.model.depends_on_neighbours() {
            self.touched.extend(run.gpus.iter().map(|&g| self.cluster.node_of(g)));
        }
        if run.shared {
            self.touched_shared.extend_from_slice(&run.gpus);
        }
        let work = self.jobs.spec(job).duration_ms as f64;
        let ran = self.now.since(run.start);
        *self.jobs.state_mut(job) = JobState::Completed(DoneState {
            start: run.start,
            end: self.now,
            nodes_spanned: run.nodes_spanned,
            colocated: run.colocated,
            isolated_ms: ms_to_finish(work, run.isolated_rate),
            gpus: run.gpus.len() as u32,
            first_start: run.first_start,
            preemptions: run.preemptions,
            attained_ms: run.attained_ms + ran,
            attained_gpu_ms: run.attained_gpu_ms + ran * run.gpus.len() as u64,
            waited_ms: run.waited_ms,
        });
        self.running -= 1;
        self.completed += 1;
        let view = View { now: self.now, cluster: &self.cluster, jobs: &self.jobs };
        self.policy.on_completion(job, &view);
        Ok(())
    }

    /// Recomputes the rate of every job on a node whose occupancy changed at
    /// this instant (when the rate model depends on neighbours) and of every
    /// tenant of a GPU whose tenants changed; a changed rate settles the work
    /// done and re-schedules the completion under a new epoch.
    fn update_rates(&mut self) {
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
        let mut fig_gpus: Vec<GpuId> = Vec::new();
        for job in affected {
            let JobState::Running(run) = self.jobs.state(job) else {
                continue;
            };
            if run.work_done {
                // Holding its GPUs for the release delay: no work to re-time.
                continue;
            }
            let (new_rate, isolated, colocated, speed) = self.rate_of(job, &run.gpus);
            if self.job_speed[job.index()] != speed {
                // The sharing figures count the work done at the new speed from now.
                self.job_speed[job.index()] = speed;
                self.settle_figs();
                fig_gpus.clear();
                if let JobState::Running(run) = self.jobs.state(job) {
                    fig_gpus.extend_from_slice(&run.gpus);
                }
                let gpus = std::mem::take(&mut fig_gpus);
                self.refresh_figs(&gpus);
                fig_gpus = gpus;
            }
            if let JobState::Running(run) = self.jobs.state_mut(job) {
                run.isolated_rate = isolated;
                run.colocated |= colocated;
            }
            let JobState::Running(run) = self.jobs.state(job) else {
                continue;
            };
            if new_rate == run.rate || !(new_rate.is_finite() && new_rate > 0.0) {
                continue;
            }
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
                JobState::Suspended(su) => {
                    suspended += 1;
                    if su.preemptions == 0 || su.first_start < spec.submit || su.since < su.first_start {
                        return Err(format!("{} suspended with inconsistent state {su:?}", spec.id));
                    }
                    if !(su.remaining.is_finite() && su.remaining >= 0.0) {
                        return Err(format!("{} suspended with remaining work {}", spec.id, su.remaining));
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
                    if spec.task.is_none() && r.gpus.len() != spec.gpus as usize {
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
                    if r.shared {
                        held_shared.extend(r.gpus.iter().copied());
                    } else {
                        held += r.gpus.len() as u64;
                    }
                }
                JobState::Completed(d) => {
                    completed += 1;
                    if d.end < d.start || d.start < spec.submit || d.first_start > d.start {
                        return Err(format!("{} has start {} end {} submit {}", spec.id, d.start, d.end, spec.submit));
                    }
                    adds_up(spec.id, "its end", d.end.since(spec.submit), d.waited_ms, d.attained_ms)?;
                    if d.attained_gpu_ms != d.attained_ms * u64::from(d.gpus) && spec.task.is_none() {
                        return Err(format!(
                            "{}: attained {} GPU-ms for {} ms on {} GPUs",
                            spec.id, d.attained_gpu_ms, d.attained_ms, d.gpus
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
        if (pending, running, completed, suspended) != (self.pending, self.running, self.completed, self.suspended) {
            return Err(format!(
                "counters (pending {}, running {}, completed {}, suspended {}) disagree with states ({pending}, {running}, {completed}, {suspended})",
                self.pending, self.running, self.completed, self.suspended
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
    use super::ms_to_finish;

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
