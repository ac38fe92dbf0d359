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
//!   `gavel-fifo` and `gavel-max-sum` need no LP).
//! - `kmeans`: the k-means regrouping of the learning RIFLING agent (policy
//!   `rifling`; `rifling-frozen` and `random-placement` need none).
//! - `learned`: the multi-layer perceptron (module `nn`) and what learns with
//!   it: LDWP's deep Q-network (policies `ldwp`, `ldwp-frozen`) and the learned
//!   interference model (`coloc_unmeasured = learned`, IAWP's predicted
//!   admission, `dlsched profile check`).
//! - `parquet` (off by default): Parquet output tables (`output_format`).
//!
//! The binary needs `cli` (which brings `plot` and `learned`).
//!
//! # Using the library
//!
//! One run is a [`experiment::RunSpec`] (plain serde data: workload,
//! cluster, policy, seed, models) given to [`experiment::run_one`], which
//! returns the report the command line prints and writes. 60 synthetic
//! Philly-like jobs on the 16-GPU `lab16` cluster, shortest job first:
//!
//! ```
//! use dlsched::cluster::ClusterPreset;
//! use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
//! use dlsched::policy::registry::PolicyName;
//! use dlsched::workload::synthetic::SyntheticSpec;
//!
//! let workload = WorkloadSource::Synthetic(SyntheticSpec { jobs: 60, ..SyntheticSpec::default() });
//! let mut spec = RunSpec::new(workload, ClusterChoice::Preset { preset: ClusterPreset::Lab16 });
//! spec.set_policy(PolicyName::Sjf); // SJF with the defaults every builder uses (backfill here)
//! let report = run_one(&spec, |_progress| {}).unwrap();
//! assert_eq!(report.summary.jobs_total, 60);
//! assert_eq!(report.summary.jobs_completed, 60); // the run drains
//! assert!(report.summary.queue_delay_mean_s <= report.summary.jct_mean_s);
//! // Same spec, same seed: the same schedule, bit for bit.
//! let again = run_one(&spec, |_| {}).unwrap();
//! assert_eq!(again.summary.jct_mean_s.to_bits(), report.summary.jct_mean_s.to_bits());
//! ```
//!
//! A policy of your own runs through [`experiment::run_one_with_policy`], or,
//! registered in an [`experiment::Registry`], through the whole command line
//! (`dlsched::cli::main_with`), sweep files and manifests: see
//! `docs/extending.md` and `docs/writing-a-policy.md`.
#![warn(missing_docs)]
// The docs link to items of every feature: a build without `plot` or
// `learned` leaves those links unresolved (the default build checks them).
#![cfg_attr(not(all(feature = "plot", feature = "learned")), allow(rustdoc::broken_intra_doc_links))]

pub mod bounds;
#[cfg(feature = "cli")]
pub mod cli;
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
