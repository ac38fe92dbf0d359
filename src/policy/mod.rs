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
pub mod registry;
pub mod rifling;
pub mod sharing;

use crate::cluster::Cluster;
use crate::error::ConfigError;
use crate::ids::{GpuId, JobId};
use crate::job::JobTable;
use crate::time::SimTime;

pub use placement::{Placement, PlacementKind};
pub use queue::{QueueOrder, QueuePolicy};
pub use registry::{BuildContext, BuildPolicy, PolicyName, PolicySpec};

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start a pending job on exactly these GPUs.
    Launch {
        /// The job.
        job: JobId,
        /// Its GPUs; as many as it asks for, all free, all in its partition.
        gpus: Vec<GpuId>,
    },
    /// Start a pending job as a tenant of these GPUs (shared mode): each may
    /// already have tenants, none may be held exclusively, and each must have
    /// room for the job under the cluster's [`crate::cluster::ShareLimits`].
    Colocate {
        /// The job.
        job: JobId,
        /// Its GPUs; as many as it asks for, in its partition.
        gpus: Vec<GpuId>,
    },
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
            PolicyName::Genie => Some(G::Genie),
            PolicyName::GenieFifo => Some(G::GenieFifo),
            PolicyName::MinMin => Some(G::MinMin),
            PolicyName::WeightedFair => Some(G::WeightedFair),
            PolicyName::TetrisPerf => Some(G::TetrisPerf),
            PolicyName::TetrisCer => Some(G::TetrisCer),
            _ => None,
        }
    }
}

/// A queue policy (order × backfill × placement) to build: the lower-level
/// builder behind the `fifo`, `sjf` and `iawp` kinds of [`PolicySpec`].
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
