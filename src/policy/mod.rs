//! Scheduling policies: a read-only view in, decisions out.
//!
//! Policies never mutate the cluster: they return [`Decision`]s, which the
//! engine validates and applies one at a time, so every decision sees the state
//! the previous one left (after dslab's scheduler interface,
//! osukhoroslov/dslab). An invalid decision is an error of the run, not a panic.
//! Baselines compose a queue order with a [`placement::Placement`].

pub mod build;
pub mod chronus;
pub mod config;
pub mod edf;
pub mod elasticflow;
pub mod fgd;
pub mod fgd_family;
pub mod gandiva;
pub mod gavel;
pub mod genie;
pub mod genie_error;
pub mod genie_family;
pub mod iawp;
pub mod las;
pub mod ldwp;
pub mod memeff;
pub mod memeff_tasks;
mod node_tree;
pub mod nodesel;
pub mod optimus;
pub mod placement;
pub mod placements;
pub mod pollux;
pub mod pollux_goodput;
pub mod pollux_sim;
pub mod predictor;
pub mod qssf;
pub mod queue;
pub mod registry;
pub mod rifling;
pub mod rifling_family;
pub mod sharing;
pub mod sia;
#[cfg(feature = "lp")]
mod sia_start;
pub mod srtf;
pub mod symmetric;
pub mod themis;
pub mod tiresias;
pub mod tiresias_tuned;

use crate::cluster::Cluster;
use crate::ids::{GpuId, JobId};
use crate::job::JobTable;
use crate::profile::elastic::ElasticConfig;
use crate::time::SimTime;

/// What a policy sees: the time, the cluster and every job, read-only.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// Simulated time.
    pub now: SimTime,
    /// The cluster (free GPUs per node and partition, topology).
    pub cluster: &'a Cluster,
    /// Every job's spec and state.
    pub jobs: &'a JobTable,
}

impl View<'_> {
    /// What a policy may read of a work-defined job: its progress now, its
    /// target and, while it runs, its configuration; `None` for a
    /// duration-defined job (or a job id out of range).
    pub fn elastic(&self, job: JobId) -> Option<ElasticStatus<'_>> {
        use crate::job::JobState;
        if job.index() >= self.jobs.len() {
            return None;
        }
        let spec = self.jobs.spec(job).elastic()?;
        let target = self.jobs.progress_model().and_then(|m| spec.target(m).ok());
        let (progress, cfg, rescaling, restarts) = match self.jobs.state(job) {
            JobState::Running(r) => match r.elastic.as_deref() {
                Some(e) => {
                    (e.progress_at(r.settled_at, self.now), Some(&e.cfg), self.now < e.rescale_until, e.restarts())
                }
                None => (0.0, None, false, 0),
            },
            JobState::Suspended(s) => {
                let (p, a) = s.elastic.map_or((0.0, 0), |e| (e.progress, e.allocations));
                (p, None, false, a.saturating_sub(1))
            }
            JobState::Completed(d) => (target.unwrap_or(0.0), None, false, d.restarts()),
            JobState::Pending | JobState::NotArrived | JobState::Rejected(_) => (0.0, None, false, 0),
        };
        Some(ElasticStatus { spec, progress, target, cfg, rescaling, restarts })
    }

    /// The run's progress model of work-defined jobs (`None` in a run
    /// without one): for policies that model the jobs' throughput and
    /// remaining work themselves (step times, gradient statistics, an
    /// oracle of remaining steps, batch limits).
    pub fn progress_model(&self) -> Option<&dyn crate::job::ProgressModel> {
        self.jobs.progress_model()
    }

    /// The run's progress model's goodput for work-defined `job` on `cfg`
    /// at progress `progress`, progress units per second: what a policy
    /// weighs candidate configurations by (Pollux, Optimus). `None` for a
    /// duration-defined job or a run without a progress model; the model's
    /// error for a configuration it cannot rate.
    pub fn goodput(&self, job: JobId, cfg: &ElasticConfig, progress: f64) -> Option<Result<f64, String>> {
        if job.index() >= self.jobs.len() {
            return None;
        }
        let spec = self.jobs.spec(job).elastic()?;
        Some(self.jobs.progress_model()?.goodput(&spec.app, cfg, progress))
    }
}

/// A work-defined job as a policy sees it ([`View::elastic`]).
#[derive(Clone, Copy, Debug)]
pub struct ElasticStatus<'a> {
    /// Its application, tuned configuration and adaptivity.
    pub spec: &'a crate::job::ElasticSpec,
    /// Its progress now, in the progress model's units (0 before its first
    /// start; its target once completed).
    pub progress: f64,
    /// The progress at which it is done (`None` when the run has no progress
    /// model or the model does not know its application).
    pub target: Option<f64>,
    /// Its configuration while it runs.
    pub cfg: Option<&'a ElasticConfig>,
    /// True while it runs within a re-scale delay (no progress yet).
    pub rescaling: bool,
    /// Reallocations after its first allocation so far.
    pub restarts: u32,
}

/// A policy's answer to "what now?".
///
/// Migration is a [`Decision::Preempt`] followed, at the same instant or
/// later, by a [`Decision::Launch`] of the same job on other GPUs: the job
/// keeps its remaining work and pays the run's checkpoint overhead
/// ([`crate::engine::CheckpointModel`]) once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start a pending job on exactly these GPUs, or resume a suspended
    /// (preempted) one there with the work it has left.
    Launch {
        /// The job.
        job: JobId,
        /// Its GPUs; as many as it asks for, all free, all in its partition.
        gpus: Vec<GpuId>,
    },
    /// Start (or resume) a job as a tenant of these GPUs (shared mode): each may
    /// already have tenants, none may be held exclusively, and each must have
    /// room for the job under the cluster's [`crate::cluster::ShareLimits`].
    Colocate {
        /// The job.
        job: JobId,
        /// Its GPUs; as many as it asks for, in its partition.
        gpus: Vec<GpuId>,
    },
    /// Stop a running job now: it releases its GPUs and becomes suspended
    /// ([`crate::job::JobState::Suspended`]), keeping its remaining work plus
    /// the run's checkpoint overhead, until a later `Launch` or `Colocate`
    /// resumes it. A job whose work is done and that only holds its GPUs for
    /// the policy's release delay cannot be preempted.
    Preempt {
        /// The job.
        job: JobId,
    },
    /// Give a work-defined job ([`crate::job::JobSpec::elastic`]) these GPUs
    /// and this batch: resize a running one (grow, shrink or move: each GPU
    /// free or already the job's, all in its partition), or start or resume
    /// a pending or suspended one on them (each GPU free, in its partition),
    /// with any GPU count from 1. Its progress is settled at the old goodput
    /// and carries over. A change of GPUs, and every start or resume, is a
    /// reallocation: the job makes no progress for the run's re-scale delay
    /// (`crate::engine::Simulation::with_rescale_delay_ms`), and every
    /// reallocation after its first allocation is a restart. Keeping the
    /// same GPUs and changing only the batch is not a reallocation (the job
    /// changes its batch itself, as Pollux's jobs do between steps): no
    /// delay, no restart. A plain [`Decision::Launch`] of a work-defined job
    /// runs it on the tuned batch
    /// ([`crate::profile::elastic::ProgressModel::tuned_config`]).
    Resize {
        /// The job.
        job: JobId,
        /// Its GPUs, one replica each, in any order.
        gpus: Vec<GpuId>,
        /// Per-GPU micro-batch of one step, samples, at least 1.
        atomic_bsz: u32,
        /// Gradient-accumulation steps beyond the first (0 = none).
        accum_steps: u32,
    },
    /// Refuse a pending job for good (admission control, as ElasticFlow
    /// declines a job whose deadline it cannot meet): it never runs, and
    /// becomes [`crate::job::JobState::Rejected`], a terminal state counted
    /// apart from completed jobs (no JCT) and listed as `rejected` in
    /// `jobs.csv`. Only a pending job (submitted, never started) can be
    /// rejected.
    Reject {
        /// The job.
        job: JobId,
    },
    /// Call [`Policy::on_timer`] at this simulated time, which must be later
    /// than now; that instant then has a scheduling pass. Timers pop with the
    /// other events in (time, request order).
    WakeAt(SimTime),
    /// Nothing more to do at this instant.
    Wait,
}

/// A scheduling policy. The engine calls `on_completion`, `on_timer` and
/// `on_arrival` as events happen (completions and timers in (time, request)
/// order, then arrivals), then `decide` repeatedly after each instant until it
/// returns [`Decision::Wait`], applying each decision (launch, preemption,
/// timer request) before the next call.
pub trait Policy: Send {
    /// The policy's name for outputs (e.g. `fifo`, `sjf+backfill`).
    fn name(&self) -> String;

    /// A job was submitted and is now pending.
    fn on_arrival(&mut self, job: JobId, view: &View<'_>);

    /// A job completed and released its GPUs.
    fn on_completion(&mut self, job: JobId, view: &View<'_>);

    /// The next decision at this instant.
    fn decide(&mut self, view: &View<'_>) -> Decision;

    /// A timer the policy asked for ([`Decision::WakeAt`]) is due now; the
    /// instant's scheduling pass follows. By default nothing happens.
    fn on_timer(&mut self, _view: &View<'_>) {}

    /// How long a job keeps its GPUs after its work runs out, ms, before
    /// it completes and releases them (0 by default). It exists to reproduce
    /// a reference simulator's release order (the Helios SRTF "+1 s per job",
    /// [`srtf::SrtfOptions::helios_release_delay`]); the engine asks once, when the
    /// simulation is built.
    fn release_delay_ms(&self) -> u64 {
        0
    }

    /// Named figures the policy computed about its own run (e.g. GENIE's
    /// prediction error), for the run summary; none by default.
    fn metrics(&self, _jobs: &JobTable) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Extra files for the run directory, (name, contents) (e.g. RIFLING's
    /// `learning_curve.csv`); none by default.
    fn files(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// The rounds of the policy's solver so far with their wall-clock cost
    /// (Sia's integer program), for `timing.json` only (they are not
    /// deterministic); none by default.
    fn solver_rounds(&self) -> Vec<SolverRound> {
        Vec::new()
    }
}

/// One round of a policy's solver ([`Policy::solver_rounds`]).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SolverRound {
    /// Simulated time of the round, s.
    pub at_s: f64,
    /// Jobs in the program.
    pub jobs: u32,
    /// Its variables.
    pub variables: u32,
    /// Wall time to build and solve it on this machine, s.
    pub solve_s: f64,
}
