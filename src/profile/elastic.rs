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
