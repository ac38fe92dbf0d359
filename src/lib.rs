#![doc = include_str!("../README.md")]
//!
//! # Cargo features
//!
//! The default build has every feature but `parquet`. With
//! `default-features = false` the library is the simulator alone: every
//! trace format, cluster, workload, rate model and the policies below that
//! need nothing more, without the command-line parser, charts, LP solver,
//! k-means or neural networks. A configuration that needs a feature left out
//! still parses (spec files, manifests and sweeps stay valid); running it
//! fails with [`error::FeatureDisabled`] naming the feature.
//!
//! - `cli`: the `dlsched` binary's dependencies (clap, progress bars), and
//!   `clap::ValueEnum` on the library's named values ([`names::ValueNames`]
//!   parses the same names without it).
//! - `plot`: SVG and PNG charts of runs and sweeps (module `plot`, `dlsched plot`).
//! - `lp`: the LP solver of Gavel's max-min fairness (policy `gavel`;
//!   `gavel-fifo` needs no LP).
//! - `kmeans`: the k-means regrouping of the learning RIFLING agent (policy
//!   `rifling`; `rifling-frozen` and `random-placement` need none).
//! - `learned`: the multi-layer perceptron (module `nn`) and what learns with
//!   it: LDWP's deep Q-network (policies `ldwp`, `ldwp-frozen`) and the learned
//!   interference model (`coloc_unmeasured = learned`, IAWP's predicted
//!   admission, `dlsched profile check`).
//! - `parquet` (off by default): Parquet output tables (`output_format`).
//!
//! The binary needs `cli`, `plot` and `learned`.
#![warn(missing_docs)]
// The docs link to items of every feature: a build without `plot` or
// `learned` leaves those links unresolved (the default build checks them).
#![cfg_attr(not(all(feature = "plot", feature = "learned")), allow(rustdoc::broken_intra_doc_links))]

pub mod bounds;
pub mod cluster;
pub mod engine;
pub mod error;
pub mod experiment;
pub mod ids;
pub mod io;
pub mod job;
pub mod metrics;
pub mod names;
#[cfg(feature = "learned")]
pub mod nn;
pub mod policy;
pub mod profile;
pub mod rng;
pub mod stats;
pub mod time;
pub mod trace;
pub mod workload;

#[cfg(feature = "plot")]
pub use experiment::plot;
pub use experiment::sweep;
