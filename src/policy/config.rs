//! Which policy to build: every policy by its command-line name
//! ([`PolicyName`]) and the queue policies' options ([`PolicyConfig`]), plain
//! data that builds the policy. Above the policies it names, so `mod.rs`
//! imports none of its children.

use super::Policy;
use super::genie::GenieVariant;
use super::iawp;
use super::placement::PlacementKind;
use super::queue::{QueueOrder, QueuePolicy};
use super::rifling;
use crate::error::ConfigError;

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
    pub fn genie(self) -> Option<GenieVariant> {
        use GenieVariant as G;
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
