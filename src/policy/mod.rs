//! Scheduling policies: a read-only view in, decisions out.
//!
//! Policies never mutate the cluster: they return [`Decision`]s, which the
//! engine validates and applies one at a time, so every decision sees the state
//! the previous one left (after dslab's scheduler interface,
//! osukhoroslov/dslab). An invalid decision is an error of the run, not a panic.
//! Baselines compose a queue order with a [`placement::Placement`].

pub mod fgd;
pub mod genie;
pub mod iawp;
pub mod memeff;
pub mod placement;
pub mod queue;
pub mod rifling;
pub mod sharing;
pub mod srtf;

use crate::cluster::Cluster;
use crate::error::ConfigError;
use crate::ids::{GpuId, JobId};
use crate::job::JobTable;
use crate::time::SimTime;

pub use placement::{Placement, PlacementKind};
pub use queue::{QueueOrder, QueuePolicy};

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
    /// Call [`Policy::on_timer`] at this simulated time, which must be later
    /// than now; that instant then has a scheduling pass. Timers pop with the
    /// other events in (time, request order).
    WakeAt(SimTime),
    /// Nothing more to do at this instant.
    Wait,
}

/// A scheduling policy. The engine calls `on_arrival` and `on_completion` as
/// events happen, then `decide` repeatedly after each instant until it returns
/// [`Decision::Wait`], applying each launch before the next call.
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
}

/// Every policy by its command-line name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    /// First in, first out (submit order).
    Fifo,
    /// Shortest job first by the trace duration.
    Sjf,
    /// GENIE (QoS-aware; moldable tasks, `--workload genie`).
    Genie,
    /// GENIE's FIFO baseline: arrival order, best-CER placement.
    GenieFifo,
    /// Min-Min: earliest ECT first, minimum-latency placement.
    MinMin,
    /// Weighted Fair: by the mean of arrival time and ECT.
    WeightedFair,
    /// Tetris+Perf: highest predicted rate, shortest predicted latency first.
    TetrisPerf,
    /// Tetris+CER: best CER, shortest predicted latency first, no QoS.
    TetrisCer,
    /// RIFLING: online tabular Q-learning over placements (moldable tasks).
    Rifling,
    /// RIFLING from a trained table (`--rifling-table`), greedy, not learning.
    RiflingFrozen,
    /// FCFS, a uniformly random feasible placement per task (moldable tasks).
    RandomPlacement,
}

impl PolicyName {
    /// The queue order of the queue policies (FIFO for the GENIE family, unused there).
    pub fn queue_order(self) -> QueueOrder {
        if self == PolicyName::Sjf { QueueOrder::Sjf } else { QueueOrder::Fifo }
    }

    /// The RIFLING mode, if it is one of the RIFLING policies.
    pub fn rifling(self) -> Option<rifling::RiflingMode> {
        match self {
            PolicyName::Rifling => Some(rifling::RiflingMode::Online),
            PolicyName::RiflingFrozen => Some(rifling::RiflingMode::Frozen),
            PolicyName::RandomPlacement => Some(rifling::RiflingMode::Random),
            _ => None,
        }
    }

    /// The GENIE-family variant, if it is one.
    pub fn genie(self) -> Option<genie::GenieVariant> {
        use genie::GenieVariant as G;
        match self {
            PolicyName::Fifo
            | PolicyName::Sjf
            | PolicyName::Rifling
            | PolicyName::RiflingFrozen
            | PolicyName::RandomPlacement => None,
            PolicyName::Genie => Some(G::Genie),
            PolicyName::GenieFifo => Some(G::GenieFifo),
            PolicyName::MinMin => Some(G::MinMin),
            PolicyName::WeightedFair => Some(G::WeightedFair),
            PolicyName::TetrisPerf => Some(G::TetrisPerf),
            PolicyName::TetrisCer => Some(G::TetrisCer),
        }
    }
}

/// Which policy to build, with its options: plain data, so a sweep can build one
/// inside each worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PolicyConfig {
    /// Queue order.
    pub order: QueueOrder,
    /// Whether jobs behind a blocked head may start when they fit.
    pub backfill: bool,
    /// Placement rule.
    pub placement: PlacementKind,
}

impl PolicyConfig {
    /// Builds the policy for a cluster with `partitions` VC partitions.
    ///
    /// # Errors
    /// A [`ConfigError`] for an invalid combination: `iawp` is a FIFO policy
    /// of its own, so it refuses another queue order.
    pub fn build(&self, partitions: usize) -> Result<Box<dyn Policy>, ConfigError> {
        self.build_with_profiles(partitions, None)
    }

    /// [`PolicyConfig::build`] with every part that reads the profile
    /// database (memory-efficiency ranks, IAWP's SM proxy) reading the run's
    /// database `db` (`None`: the builtin one).
    ///
    /// # Errors
    /// As [`PolicyConfig::build`].
    pub fn build_with_profiles(
        &self,
        partitions: usize,
        db: Option<&'static crate::profile::db::ProfileDb>,
    ) -> Result<Box<dyn Policy>, ConfigError> {
        if self.placement == PlacementKind::Iawp {
            if self.order != QueueOrder::Fifo {
                return Err(ConfigError(format!(
                    "--placement iawp is a FIFO policy of its own; it cannot use --policy {}",
                    self.order.name()
                )));
            }
            let p = iawp::Iawp::new(self.backfill);
            return Ok(Box::new(match db {
                Some(db) => p.with_profiles(db),
                None => p,
            }));
        }
        Ok(Box::new(QueuePolicy::new(self.order, self.backfill, self.placement.build_for(db), partitions)))
    }
}
