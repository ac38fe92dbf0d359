//! Workloads: what is simulated, built from trace records or generated. The
//! seeded synthetic generator ([`synthetic`]), GENIE's QoS tasks ([`genie`]),
//! Pollux-style job loads drawn from a Philly job list ([`pollux`]),
//! model/batch enrichment ([`models`]), and admission ([`admission`]:
//! ordering, partition lookup, skips by reason).
//!
//! On the floor above traces and profiles (the GENIE tasks read the profile
//! database) and below the policies: admission takes the run's placement rule
//! through [`AdmissionPlacer`].

pub mod admission;
pub mod genie;
pub mod models;
pub mod pollux;
pub mod synthetic;

pub use admission::{AdmissionPlacer, Workload, build_workload};
