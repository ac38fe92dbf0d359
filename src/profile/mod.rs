//! Job speed: the rate model the engine asks for every running job's rate.
//!
//! The calibrated profile database and its performance models (locality,
//! interference, GPU memory) come with a later change; today the engine ships
//! the trace-speed model, under which every job runs exactly its trace
//! duration. The trait is the seam the calibrated models plug into.

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

    /// True if a job's rate can change when other jobs start or stop on the
    /// nodes it uses (contention, co-location). The engine then recomputes the
    /// rates of the jobs on every node whose occupancy changed.
    fn depends_on_neighbours(&self) -> bool {
        false
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
}
