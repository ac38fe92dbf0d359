//! Job speed: the profile database, the performance models, and the rate
//! model the engine asks for every running job's rate.
//!
//! - [`db`]: the calibrated profile database (measured iteration times by
//!   model, GPU type, per-GPU batch and split over servers; co-location
//!   slowdowns; multi-server factors; model facts), compiled in.
//! - [`model`]: table interpolation with counted fallbacks (the default);
//!   [`genie`]: GENIE's fitted prediction model.
//! - [`rate`]: the rate model built on either; [`TraceSpeed`]: every job at
//!   its trace speed (the Helios study's semantics).
//! - [`coloc`]: a job's speed when other jobs share its GPU (pairs measured,
//!   a documented rule for more tenants and unmeasured pairs).
//! - [`ncf`]: a learned interference model (neural collaborative filtering)
//!   over the measured co-location pairs, for the pairs never measured.
//! - [`memo`]: the memo tables that make a repeated rate or co-location
//!   question one lookup.
//! - [`check`]: held-out prediction error.
//! - [`aliases`]: model names of other systems' traces (Pollux, Sia,
//!   ElasticFlow, Chronus) mapped to the database's canonical names.
//! - [`elastic`]: work-defined jobs (configurations, the progress model);
//!   [`pollux`]: the Pollux applications' progress model (goodput from the
//!   Pollux measurements, as the Pollux artifact's simulator computes it);
//!   [`elasticflow`]: ElasticFlow's (iterations per second of a model at its
//!   global batch on a GPU count, from ElasticFlow's throughput tables).

pub mod aliases;
pub mod check;
pub mod coloc;
pub mod db;
pub mod elastic;
pub mod elasticflow;
pub mod genie;
pub mod import;
pub mod memo;
pub mod model;
#[cfg(feature = "learned")]
pub mod ncf;
pub mod pollux;
/// The learned interference model is left out of this build (the `learned`
/// feature is off): its types exist without values, so the co-location
/// model compiles unchanged and never reads a learned prediction.
#[cfg(not(feature = "learned"))]
pub mod ncf {
    use super::db::Tenant;

    /// The learned interference model; no value exists without the `learned` feature.
    #[derive(Debug)]
    pub enum Ncf {}

    impl Ncf {
        /// Never called: no `Ncf` exists.
        pub fn predict(&self, _gpu_type: &str, _me: Tenant<'_>, _other: Tenant<'_>) -> Option<f64> {
            match *self {}
        }
    }

    /// A database's learned model, trained at first use; no value exists
    /// without the `learned` feature.
    #[derive(Debug)]
    pub enum LearnedModel {}

    impl LearnedModel {
        /// Never called: no `LearnedModel` exists.
        pub fn get(&self) -> &Ncf {
            match *self {}
        }
    }
}
pub mod rate;
pub mod resources;
pub mod set;
pub mod sia;

use crate::cluster::Cluster;
use crate::ids::GpuId;
use crate::job::JobSpec;

/// Gives a running job's rate in work units per simulated millisecond, where
/// one unit is one millisecond of the job's trace run time (rate 1.0 = the
/// speed it had in the trace under its recorded allocation).
pub trait RateModel: Send + Sync {
    /// The model's name for outputs.
    fn name(&self) -> &'static str;

    /// The rate of `job` on `gpus`, given everything else running on `cluster`.
    /// Must be finite and positive.
    fn rate(&self, job: &JobSpec, gpus: &[GpuId], cluster: &Cluster) -> f64;

    /// The rate [`RateModel::rate`] would give `job` alone on GPUs of
    /// `gpu_type` split over nodes as `split` (GPUs per node, e.g. `[4, 4]`
    /// for two nodes of four), without a physical placement: what a policy
    /// predicting from the simulator's own truth reads for a placement it
    /// has not made (`--predictor oracle`, [`crate::policy::predictor`]).
    /// `None` (the default) when the model needs the physical GPUs.
    fn rate_on(&self, _job: &JobSpec, _gpu_type: &str, _split: &[u32]) -> Option<f64> {
        None
    }

    /// True if a job's rate can change when other jobs start or stop on the
    /// nodes it uses (contention, co-location). The engine then recomputes the
    /// rates of the jobs on every node whose occupancy changed.
    fn depends_on_neighbours(&self) -> bool {
        false
    }

    /// Named counters for the run summary (e.g. how many rate evaluations
    /// needed each fallback); none by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Every job runs at its trace speed, whatever its placement (rate 1.0). This is
/// the semantics of trace-replay simulators such as the Helios study's.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceSpeed;

impl RateModel for TraceSpeed {
    fn name(&self) -> &'static str {
        "trace-speed"
    }

    fn rate(&self, _job: &JobSpec, _gpus: &[GpuId], _cluster: &Cluster) -> f64 {
        1.0
    }

    fn rate_on(&self, _job: &JobSpec, _gpu_type: &str, _split: &[u32]) -> Option<f64> {
        Some(1.0)
    }
}
