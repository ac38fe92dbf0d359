#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod bounds;
pub mod cli;
pub mod cluster;
pub mod engine;
pub mod error;
pub mod experiment;
pub mod ids;
pub mod io;
pub mod job;
pub mod metrics;
pub mod nn;
pub mod policy;
pub mod profile;
pub mod rng;
pub mod stats;
pub mod time;
pub mod trace;
pub mod workload;

pub use experiment::{plot, sweep};
