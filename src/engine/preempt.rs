//! Preemption, rejection and the release delay: the engine's side of
//! [`Decision::Preempt`], [`Decision::Reject`] and
//! [`crate::policy::Policy::release_delay_ms`].
//!
//! [`Decision::Preempt`]: crate::policy::Decision::Preempt
//! [`Decision::Reject`]: crate::policy::Decision::Reject

use super::{Event, Observer, Simulation};
use crate::error::SimError;
use crate::ids::JobId;
use crate::job::{ElasticPaused, JobState, SuspendedState};

impl Simulation {
    /// Rejects a pending job for good ([`crate::policy::Decision::Reject`]):
    /// it becomes [`JobState::Rejected`] at now, holds nothing and never
    /// runs; the run ends when every job is completed or rejected.
    pub(super) fn reject(&mut self, job: JobId) -> Result<(), SimError> {
        if job.index() >= self.jobs.len() {
            return Err(self.invalid(job, None, "no such job".into()));
        }
        if !matches!(self.jobs.state(job), JobState::Pending) {
            return Err(self.invalid(job, None, "job is not pending; only a pending job can be rejected".into()));
        }
        *self.jobs.state_mut(job) = JobState::Rejected(self.now);
        self.pending -= 1;
        self.rejected += 1;
        Ok(())
    }

    /// Preempts a running job: settles the work it did at its rate, releases
    /// its GPUs (their other tenants' rates are recomputed after the pass),
    /// adds the checkpoint overhead to its remaining work and suspends it.
    /// Its pending completion event goes stale (the next run starts with a
    /// new epoch).
    pub(super) fn preempt<O: Observer + ?Sized>(&mut self, job: JobId, obs: &mut O) -> Result<(), SimError> {
        if job.index() >= self.jobs.len() {
            return Err(self.invalid(job, None, "no such job".into()));
        }
        match self.jobs.state(job) {
            JobState::Running(r) if r.work_done => {
                return Err(self.invalid(
                    job,
                    None,
                    "its work is done (it holds its GPUs only for the release delay); it cannot be preempted".into(),
                ));
            }
            JobState::Running(_) => {}
            _ => return Err(self.invalid(job, None, "job is not running; only a running job can be preempted".into())),
        }
        let JobState::Running(run) = std::mem::replace(self.jobs.state_mut(job), JobState::Pending) else {
            unreachable!("checked above");
        };
        let gpus_n = run.gpus.len() as u32;
        self.release_run(job, &run)?;
        let ran = self.now.since(run.start);
        // A work-defined job keeps its progress and pays no checkpoint
        // overhead: its cost is the re-scale delay when it is resumed.
        let (remaining, overhead, elastic) = match &run.elastic {
            Some(e) => (
                (run.remaining - self.now.since(run.settled_at) as f64).max(0.0),
                0,
                Some(ElasticPaused {
                    progress: e.progress_at(run.settled_at, self.now),
                    allocations: e.allocations,
                    samples: e.samples_at(run.settled_at, self.now),
                }),
            ),
            None => {
                let done = self.now.since(run.settled_at) as f64 * run.rate;
                let overhead = self.checkpoint.overhead_ms(gpus_n);
                ((run.remaining - done).max(0.0) + overhead as f64, overhead, None)
            }
        };
        *self.jobs.state_mut(job) = JobState::Suspended(Box::new(SuspendedState {
            remaining,
            since: self.now,
            first_start: run.first_start,
            preemptions: run.preemptions + 1,
            attained_ms: run.attained_ms + ran,
            attained_gpu_ms: run.attained_gpu_ms + super::elastic::run_gpu_ms(&run, self.now),
            waited_ms: run.waited_ms,
            epoch: run.epoch + 1,
            elastic,
        }));
        self.running -= 1;
        self.suspended += 1;
        self.stats.preemptions += 1;
        self.stats.checkpoint_ms += overhead;
        self.stats.checkpoint_gpu_ms += overhead * u64::from(gpus_n);
        obs.on_release(&self.snapshot(), job, &run.gpus);
        Ok(())
    }

    /// A running job's work ran out and the policy asks for a release delay:
    /// it keeps its GPUs (and stays running, with no work left) until the
    /// delay is over, then completes.
    pub(super) fn hold_after_work(&mut self, job: JobId) {
        let (now, delay) = (self.now, self.release_delay_ms);
        let JobState::Running(run) = self.jobs.state_mut(job) else {
            return;
        };
        run.remaining = 0.0;
        run.settled_at = now;
        run.work_done = true;
        run.epoch += 1;
        let epoch = run.epoch;
        self.events.push(now.plus_ms(delay), Event::Completion { job, epoch });
    }
}
