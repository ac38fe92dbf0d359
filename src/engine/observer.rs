//! Hooks through which a recorder watches a run ([`Observer`]).
//!
//! The engine owns only simulation state; whatever a run measures about
//! itself (busy GPU-time, the sharing figures' time integrals, timeline
//! samples) is kept by an observer that the engine calls after every change
//! it makes. Every hook has a no-op default, and the engine's loop is generic
//! over the observer (static dispatch), so [`NoObserver`] costs nothing. The
//! metrics layer's `crate::metrics::Recorder` is the observer of a run.
//!
//! Contract: every change of the GPU ledger goes through
//! [`Observer::on_allocate`] or [`Observer::on_release`], called after the
//! ledger changed and at the simulated time of the change, so an observer may
//! keep piecewise-constant figures (e.g. GPUs held per partition) and
//! integrate them over time from one hook to the next.

use crate::cluster::Cluster;
use crate::ids::{GpuId, JobId};
use crate::job::JobTable;
use crate::time::SimTime;

/// What an observer sees at a hook: the engine's state after the change,
/// read-only.
#[derive(Clone, Copy)]
pub struct Snapshot<'a> {
    /// Simulated time of the change, ms since the trace origin.
    pub now: SimTime,
    /// The cluster, ledger already updated.
    pub cluster: &'a Cluster,
    /// Every job's spec and state (a job that just started is `Running`, one
    /// that just completed is `Completed`).
    pub jobs: &'a JobTable,
    /// Jobs running.
    pub jobs_running: u32,
    /// Jobs submitted and waiting.
    pub jobs_pending: u32,
}

/// Hooks the engine calls as a run proceeds; all default to doing nothing.
pub trait Observer {
    /// `job` now holds `gpus` (exclusively or as a tenant), at co-location
    /// speed `speed` (achieved / isolated rate, in (0, 1]; 1 without sharing).
    fn on_allocate(&mut self, _at: &Snapshot<'_>, _job: JobId, _gpus: &[GpuId], _speed: f64) {}

    /// The rate of running `job` on `gpus` was recomputed because its
    /// neighbours or co-tenants changed; `speed` is its co-location speed now
    /// (possibly unchanged).
    fn on_speed(&mut self, _at: &Snapshot<'_>, _job: JobId, _gpus: &[GpuId], _speed: f64) {}

    /// `job` released `gpus` (it completed, or was preempted: it is then
    /// `Suspended`).
    fn on_release(&mut self, _at: &Snapshot<'_>, _job: JobId, _gpus: &[GpuId]) {}

    /// A timeline sample is due: the state after this instant's scheduling
    /// pass. Sample events are the engine's (they fall on multiples of
    /// [`super::EngineConfig::sample_interval_ms`]); what a sample records is
    /// the observer's.
    fn on_sample(&mut self, _at: &Snapshot<'_>) {}

    /// The run ends at `at.now` (the last processed instant).
    fn on_finish(&mut self, _at: &Snapshot<'_>) {}
}

/// The observer that records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}
