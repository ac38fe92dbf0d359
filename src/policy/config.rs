//! The queue policies' options ([`PolicyConfig`]: order × backfill ×
//! placement), plain data that builds the policy; the lower-level builder
//! behind the `fifo`, `sjf` and `iawp` kinds of
//! [`PolicySpec`](super::registry::PolicySpec). Above the policies it builds,
//! so `mod.rs` imports none of its children.

use std::sync::Arc;

use super::Policy;
use super::iawp;
use super::placement::PlacementKind;
use super::queue::{QueueOrder, QueuePolicy};
use crate::error::ConfigError;
use crate::profile::db::ProfileDb;

/// A queue policy to build, with its options: plain data.
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
    /// database (memeff-pack ranks, IAWP's SM proxy) reading the run's
    /// database `db` (`None`: the builtin one).
    ///
    /// # Errors
    /// As [`PolicyConfig::build`].
    pub fn build_with_profiles(
        &self,
        partitions: usize,
        db: Option<&Arc<ProfileDb>>,
    ) -> Result<Box<dyn Policy>, ConfigError> {
        if self.placement == PlacementKind::Iawp {
            if self.order != QueueOrder::Fifo {
                return Err(ConfigError::other(format!(
                    "--placement iawp is a FIFO policy of its own; it cannot use --policy {}",
                    self.order.name()
                )));
            }
            // The cosine admission (`admission=cosine`); the registry's `iawp`
            // kind (IawpOptions) builds the predicted one with its learned model.
            let p = iawp::Iawp::new(self.backfill);
            return Ok(Box::new(match db {
                Some(db) => p.with_profiles(db.clone()),
                None => p,
            }));
        }
        Ok(Box::new(QueuePolicy::new(self.order, self.backfill, self.placement.build_for(db), partitions)))
    }
}
