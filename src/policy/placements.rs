//! The placement table: each [`PlacementKind`] to the rule that implements
//! it. Above the rules it builds (the plain rules in [`super::placement`],
//! the sharing packers in [`super::sharing`], [`super::memeff`] and
//! [`super::fgd`]), which import the `Placement` trait from below, so no
//! import closes a circle.

use std::sync::Arc;

use super::fgd::Fgd;
use super::memeff::MemeffPack;
use super::placement::{Consolidate, FirstFit, Placement, PlacementKind, Recorded};
use super::sharing::ShareFit;
use crate::profile::db::ProfileDb;

impl PlacementKind {
    /// A fresh placement of this kind; rules that read the profile database
    /// (`memeff-pack`) read the builtin one ([`PlacementKind::build_for`]).
    pub fn build(self) -> Box<dyn Placement> {
        self.build_for(None)
    }

    /// A fresh placement of this kind over the run's profile database `db`
    /// (`None`: the builtin one, parsed for it).
    pub fn build_for(self, db: Option<&Arc<ProfileDb>>) -> Box<dyn Placement> {
        match self {
            PlacementKind::Consolidate => Box::new(Consolidate),
            PlacementKind::FirstFit => Box::new(FirstFit),
            PlacementKind::Recorded => Box::new(Recorded),
            PlacementKind::ShareFirstFit => Box::new(ShareFit::first_fit()),
            PlacementKind::ShareBestFit => Box::new(ShareFit::best_fit()),
            PlacementKind::MemeffPack => Box::new(match db {
                Some(db) => MemeffPack::new(db.clone()),
                None => MemeffPack::default(),
            }),
            PlacementKind::Fgd => Box::new(Fgd::default()),
            PlacementKind::Iawp => Box::new(ShareFit::best_fit()),
        }
    }
}
