//! Decision timing: a policy decorator that measures the wall-clock cost of
//! every `decide` call, so that the engine never reads a clock.

use std::sync::{Arc, Mutex};

use crate::ids::JobId;
use crate::job::JobTable;
use crate::policy::{Decision, Policy, View};

/// Wall-clock cost of the policy's decisions (the one non-deterministic
/// output: it goes to `timing.json`, never to `summary.json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct DecisionTiming {
    /// `decide` calls.
    pub decisions: u64,
    /// Their total wall time, s.
    pub total_s: f64,
    /// The slowest call, s.
    pub max_s: f64,
}

/// Reads the timing a [`TimedPolicy`] collects, during or after the run.
#[derive(Clone, Debug, Default)]
pub struct TimingHandle(Arc<Mutex<DecisionTiming>>);

impl TimingHandle {
    /// The figures so far.
    pub fn get(&self) -> DecisionTiming {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A policy that behaves exactly as the one it wraps and times each
/// `decide` call (two clock reads per call: use it only where the timing is
/// wanted, as for GENIE and RIFLING, whose cost per decision is part of what
/// their papers report).
pub struct TimedPolicy {
    inner: Box<dyn Policy>,
    timing: TimingHandle,
}

impl TimedPolicy {
    /// `inner`, timed; the handle reads the figures.
    pub fn new(inner: Box<dyn Policy>) -> (Self, TimingHandle) {
        let timing = TimingHandle::default();
        (TimedPolicy { inner, timing: timing.clone() }, timing)
    }
}

impl Policy for TimedPolicy {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        self.inner.on_arrival(job, view);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        self.inner.on_completion(job, view);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        let t0 = std::time::Instant::now();
        let d = self.inner.decide(view);
        let s = t0.elapsed().as_secs_f64();
        let mut t = self.timing.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        t.decisions += 1;
        t.total_s += s;
        t.max_s = t.max_s.max(s);
        d
    }

    fn on_timer(&mut self, view: &View<'_>) {
        self.inner.on_timer(view);
    }

    fn release_delay_ms(&self) -> u64 {
        self.inner.release_delay_ms()
    }

    fn metrics(&self, jobs: &JobTable) -> Vec<(&'static str, f64)> {
        self.inner.metrics(jobs)
    }

    fn files(&self) -> Vec<(&'static str, String)> {
        self.inner.files()
    }

    fn solver_rounds(&self) -> Vec<crate::policy::SolverRound> {
        self.inner.solver_rounds()
    }
}
