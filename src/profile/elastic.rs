//! Work-defined jobs: how a job defined by the work it must do (an
//! application trained to a target, Pollux's model, OSDI'21 §3) progresses
//! on a configuration of GPUs and batch. Its progress rate is its goodput,
//! throughput × statistical efficiency, constant between the model's
//! breakpoints (Pollux's simulator: epoch boundaries), so the engine moves it
//! from event to event, never by ticks.
//!
//! [`ProgressModel`] is what the engine and the elastic policies read; the
//! Pollux application model implements it from the Pollux measurements.

// The types live on the job floor (`crate::job`), below the engine and the
// job state that hold them; this module is where the profile side names them.
pub use crate::job::{BatchLimits, ElasticConfig, ProgressModel};

use serde::{Deserialize, Serialize};

/// Which application model rates the work-defined jobs of a Pollux or Sia
/// workload (jobs without work of their own; ElasticFlow's jobs always take
/// ElasticFlow's model): `--elastic-model`, sweep key `elastic_model`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum ElasticModel {
    /// The default: Sia's per-GPU-type model when every GPU
    /// type of the cluster is one Sia measured and one of them is not T4
    /// (`--cluster sia`, `sia-physical`, `--gpu-type a100`, ...); else the
    /// Pollux model (T4 measurements; on a cluster of other types too, as
    /// before, with a note).
    #[default]
    Auto,
    /// The Pollux application model, T4 speeds on any cluster
    /// (src/profile/pollux.rs).
    Pollux,
    /// Sia's per-GPU-type model; every GPU type of the cluster must be one
    /// Sia measured (T4, V100, A100, RTX2080Ti, RTX6000).
    Sia,
}

crate::names::value_names!(ElasticModel {
    Auto => "auto",
    Pollux => "pollux",
    Sia => "sia",
});

impl ElasticModel {
    /// Whether this is the default ([`ElasticModel::Auto`]), for manifests.
    pub fn is_auto(&self) -> bool {
        *self == ElasticModel::Auto
    }
}
