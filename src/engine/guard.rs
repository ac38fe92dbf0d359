//! The progress guard: a scheduling pass that never ends (a policy that
//! keeps deciding at one instant) is an error of the run, not a hang.
//!
//! Only loops at one instant are caught. A cycle across instants (simulated
//! time advancing while no job ever completes) is not: telling it from a
//! slow legitimate run needs the policy's state, which the engine cannot
//! see. "No job did any work" is exact and cheap but misses the cycles met
//! so far (Tiresias' promotion with checkpoint costs: jobs run between
//! preemptions, each run doing less work than its checkpoint adds), and
//! "no completion for N instants" is cheap but not exact (a long job under
//! a round-based policy legitimately spans millions of rounds). Such a
//! cycle ends the run with its jobs unfinished only if the policy stops
//! asking for wake-ups; otherwise it is the policy's bug to fix, as the
//! Tiresias one was (`src/policy/tiresias.rs`, `may_promote`).

use std::collections::BTreeMap;

use super::{Event, Observer, Simulation};
use crate::error::SimError;
use crate::ids::JobId;
use crate::policy::{Decision, View};

/// Decisions allowed per job alive (arrived, not completed) or partition at
/// one instant; see [`Simulation::decision_bound`].
const PER_JOB: u64 = 64;
/// Decisions allowed at any instant on top of [`PER_JOB`].
const BASE: u64 = 4096;
/// Decisions recorded after the bound is passed, to name the jobs the
/// policy keeps deciding on.
const DIAGNOSE: u64 = 1024;
/// Jobs named in the error.
const NAMED: usize = 5;

impl Simulation {
    /// The most decisions one scheduling pass may make before it is taken
    /// for a loop: 64 × (jobs alive at this instant + partitions) + 4,096.
    ///
    /// Why no legitimate policy reaches it: simulated time does not move
    /// during a pass, so every decision is a launch, a co-location, a
    /// preemption or a wake-up at a later time. A job alive at this instant
    /// is launched (or co-located) at most once per preemption, and a
    /// preemption needs a launch before it, so a policy that migrates or
    /// reshapes every job a few times per pass (Pollux, Gandiva, Sia make at
    /// most one preemption and one launch per job) stays far below 64
    /// decisions per job; a wake-up is asked at most once per job or per
    /// partition (round timers, job jumps); the 4,096 covers fixed costs of
    /// a policy with no job. The count costs one add and one compare per
    /// decision.
    pub(super) fn decision_bound(&self) -> u64 {
        let alive = u64::from(self.running) + u64::from(self.pending) + u64::from(self.suspended);
        let parts = self.cluster.partitions().len() as u64;
        PER_JOB.saturating_mul(alive.saturating_add(parts)).saturating_add(BASE)
    }

    /// The error of a pass that passed `bound` decisions: lets the policy
    /// make up to [`DIAGNOSE`] more (applied as usual) to see which jobs it
    /// keeps deciding on, then names the most frequent ones (ties by job
    /// id). An invalid decision met meanwhile is returned instead.
    pub(super) fn no_progress<O: Observer + ?Sized>(&mut self, obs: &mut O, bound: u64) -> SimError {
        let mut seen: BTreeMap<JobId, u64> = BTreeMap::new();
        let mut timers: u64 = 0;
        for _ in 0..DIAGNOSE {
            let view = View { now: self.now, cluster: &self.cluster, jobs: &self.jobs };
            let r = match self.policy.decide(&view) {
                Decision::Wait => break,
                Decision::Launch { job, gpus } => {
                    *seen.entry(job).or_default() += 1;
                    self.launch(job, gpus, false, obs)
                }
                Decision::Colocate { job, gpus } => {
                    *seen.entry(job).or_default() += 1;
                    self.launch(job, gpus, true, obs)
                }
                Decision::Preempt { job } => {
                    *seen.entry(job).or_default() += 1;
                    self.preempt(job, obs)
                }
                Decision::WakeAt(at) => {
                    timers += 1;
                    if at <= self.now {
                        let msg = format!("timer at {at} is not after now ({})", self.now);
                        return SimError::InvalidTimer { policy: self.policy.name(), reason: msg };
                    }
                    self.events.push(at, Event::Timer);
                    Ok(())
                }
            };
            if let Err(e) = r {
                return e;
            }
        }
        let mut most: Vec<(u64, JobId)> = seen.into_iter().map(|(j, n)| (n, j)).collect();
        most.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let jobs = most
            .into_iter()
            .take(NAMED)
            .map(|(n, j)| {
                let (name, line) = self.job_label(j);
                (j, name, line, n)
            })
            .collect();
        SimError::NoProgress { policy: self.policy.name(), now: self.now, bound, jobs, timers, file: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{Cluster, ClusterSpec};
    use crate::engine::EngineConfig;
    use crate::ids::GpuId;
    use crate::policy::Policy;
    use crate::time::SimTime;

    /// Launches job 0 on GPU 0, then preempts it, then launches it again,
    /// forever, at the instant it arrives.
    struct PingPong;

    impl Policy for PingPong {
        fn name(&self) -> String {
            "ping-pong".into()
        }
        fn on_arrival(&mut self, _job: JobId, _view: &View<'_>) {}
        fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}
        fn decide(&mut self, view: &View<'_>) -> Decision {
            let job = JobId(0);
            match view.jobs.state(job) {
                crate::job::JobState::Running(_) => Decision::Preempt { job },
                _ => Decision::Launch { job, gpus: vec![GpuId(0)] },
            }
        }
    }

    #[test]
    fn a_policy_that_preempts_and_relaunches_one_job_forever_is_an_error() {
        // Two 1-GPU jobs at 0 on 1 node × 2 GPUs (1 partition). Bound:
        // 64 × (2 jobs alive + 1 partition) + 4096 = 4288 decisions. After
        // it the guard watches 1,024 more: job `a` is decided on each time.
        let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "V100", 16_000)).unwrap();
        let mut a = crate::trace::TraceRecord::new("a", 0, 10_000, 1);
        a.line = 2;
        let mut b = crate::trace::TraceRecord::new("b", 0, 10_000, 1);
        b.line = 3;
        let w = crate::workload::build_workload(
            vec![a, b],
            &cluster,
            crate::policy::placement::PlacementKind::FirstFit.build(),
        );
        let mut sim = Simulation::new(
            cluster,
            w.jobs,
            Box::new(PingPong),
            Box::new(crate::profile::TraceSpeed),
            EngineConfig { sample_interval_ms: 0 },
        );
        // Before the arrivals: 64 × (0 + 1) + 4096.
        assert_eq!(sim.decision_bound(), 4160);
        let err = sim.step().expect_err("the pass never ends");
        match &err {
            SimError::NoProgress { policy, now, bound, jobs, timers, .. } => {
                assert_eq!(policy, "ping-pong");
                assert_eq!(*now, SimTime::ZERO);
                assert_eq!(*bound, 4288);
                assert_eq!(jobs, &vec![(JobId(0), "a".to_string(), 2, 1024)]);
                assert_eq!(*timers, 0);
            }
            other => panic!("{other:?}"),
        }
        let text = err.in_file(std::path::Path::new("x.csv")).to_string();
        assert!(text.starts_with("policy `ping-pong` made more than 4288 decisions at "), "{text}");
        assert!(text.contains("job `a` (x.csv, line 2) 1024 times"), "{text}");
    }
}
