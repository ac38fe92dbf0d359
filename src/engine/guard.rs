//! The progress guard: a scheduling pass that never ends (a policy that
//! keeps deciding at one instant) is an error of the run, not a hang.
//!
//! A cycle across instants (simulated time advancing while no job ever
//! gets closer to its end) is caught by the **net-progress watch**: "no job
//! did any work" misses the cycles met so far (Tiresias' promotion with
//! checkpoint costs, or a round-based policy time-slicing jobs whose
//! checkpoint overhead is at least the work a round lets them do: jobs run
//! between preemptions, each run doing less work than its checkpoint adds),
//! and "no completion for N instants" is not exact (a long job under a
//! round-based policy legitimately spans millions of rounds). The watch
//! keeps, per job, the least remaining work (ms at rate 1, checkpoint
//! overhead included) it has been seen with; every
//! [`NetWatch::PER_CHECK`] + 1,000 × jobs launches and preemptions it looks
//! again, and if since the last look no job completed or arrived and no
//! job's remaining work fell at least 1 ms below its least, the run is in a
//! cycle that cannot end ([`SimError::NoNetProgress`]). A legitimate long
//! job makes net progress between looks (its remaining work falls), so it
//! is never taken for a cycle; a run whose jobs gain less than 1 ms of work
//! per million allocation changes would need more changes than any run can
//! make, and is reported too.

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

/// The net-progress watch's state (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct NetWatch {
    /// Look again when launches + preemptions reach this.
    pub(super) next_check: u64,
    /// (completed, arrived) at the last look.
    marker: (usize, usize),
    /// Per job, the least remaining work seen at a look, ms at rate 1.
    least: Vec<f64>,
    /// Launches + preemptions at the last look that saw progress.
    since: u64,
    /// Launches and preemptions between looks, before the 1,000 per job
    /// ([`NetWatch::PER_CHECK`]; smaller in tests).
    per_check: u64,
}

impl Default for NetWatch {
    fn default() -> Self {
        NetWatch {
            next_check: NetWatch::PER_CHECK,
            marker: (0, 0),
            least: Vec::new(),
            since: 0,
            per_check: NetWatch::PER_CHECK,
        }
    }
}

impl NetWatch {
    /// Launches and preemptions between looks, on top of 1,000 per job.
    pub const PER_CHECK: u64 = 1_000_000;
}

impl Simulation {
    /// The net-progress watch's look (module docs): an error when no job
    /// completed or arrived and none got 1 ms of work closer to its end
    /// since the last look.
    pub(super) fn check_net_progress(&mut self) -> Result<(), SimError> {
        let changes = self.stats.launches + self.stats.preemptions + self.stats.resizes;
        let marker = (self.completed + self.rejected, self.next_arrival);
        let mut progress = marker != self.net.marker;
        self.net.marker = marker;
        if self.net.least.len() < self.jobs.len() {
            self.net.least.resize(self.jobs.len(), f64::INFINITY);
        }
        for spec in self.jobs.specs() {
            let rem = match self.jobs.state(spec.id) {
                // A work-defined job: its work left as a fraction of its
                // target, in millionths (progress units are the model's).
                crate::job::JobState::Running(r) if r.elastic.is_some() => {
                    r.elastic.as_ref().map_or(0.0, |e| (1.0 - e.progress_at(r.settled_at, self.now) / e.target) * 1e6)
                }
                crate::job::JobState::Suspended(s) if s.elastic.is_some() => {
                    let target = self.jobs.progress_model().and_then(|m| spec.elastic()?.target(m).ok());
                    match (s.elastic, target) {
                        (Some(e), Some(t)) => (1.0 - e.progress / t) * 1e6,
                        _ => f64::INFINITY,
                    }
                }
                crate::job::JobState::Running(r) => r.remaining - r.rate * self.now.since(r.settled_at) as f64,
                crate::job::JobState::Suspended(s) => s.remaining,
                _ => continue,
            };
            let least = &mut self.net.least[spec.id.index()];
            if rem < *least - 1.0 {
                progress = true;
            }
            *least = least.min(rem);
        }
        if progress {
            self.net.since = changes;
            self.net.next_check = changes
                .saturating_add(self.net.per_check)
                .saturating_add(1000u64.saturating_mul(self.jobs.len() as u64));
            return Ok(());
        }
        let (count, jobs) = self.jobs_alive(false);
        Err(SimError::NoNetProgress {
            policy: self.policy.name(),
            now: self.now,
            changes: changes - self.net.since,
            count,
            jobs,
            checkpoint_ms: self.stats.checkpoint_ms,
            file: None,
        })
    }

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
                Decision::Reject { job } => {
                    *seen.entry(job).or_default() += 1;
                    self.reject(job)
                }
                Decision::Resize { job, gpus, atomic_bsz, accum_steps } => {
                    *seen.entry(job).or_default() += 1;
                    self.resize(job, gpus, atomic_bsz, accum_steps, obs)
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

    /// Time-slices one GPU: every `lease_ms` it preempts the running job and
    /// launches the next waiting one (round robin by id).
    struct Slicer {
        lease_ms: u64,
        since: SimTime,
        last: Option<JobId>,
        timer: Option<SimTime>,
    }

    impl Policy for Slicer {
        fn name(&self) -> String {
            "slicer".into()
        }
        fn on_arrival(&mut self, _job: JobId, _view: &View<'_>) {}
        fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}
        fn decide(&mut self, view: &View<'_>) -> Decision {
            let mut running = None;
            let mut waiting = Vec::new();
            for (spec, st) in view.jobs.iter() {
                match st {
                    crate::job::JobState::Running(_) => running = Some(spec.id),
                    crate::job::JobState::Pending | crate::job::JobState::Suspended(_) => waiting.push(spec.id),
                    _ => {}
                }
            }
            let due = self.since.plus_ms(self.lease_ms);
            match running {
                None => {
                    let Some(&next) = waiting.iter().find(|&&j| Some(j) != self.last).or(waiting.first()) else {
                        return Decision::Wait;
                    };
                    self.since = view.now;
                    self.last = Some(next);
                    Decision::Launch { job: next, gpus: vec![GpuId(0)] }
                }
                Some(job) if view.now >= due && !waiting.is_empty() => Decision::Preempt { job },
                Some(_) if self.timer != Some(due) => {
                    self.timer = Some(due);
                    Decision::WakeAt(due)
                }
                Some(_) => Decision::Wait,
            }
        }
    }

    /// Two 1-GPU jobs of `work_ms` at 0 on one GPU, time-sliced every
    /// `lease_ms`, each preemption charged the Helios table's 7 s; the watch
    /// looks every 100 launches and preemptions (+ 1,000 per job).
    fn sliced(lease_ms: u64, work_ms: u64) -> Result<super::super::RunOutput, SimError> {
        let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 1, "V100", 16_000)).unwrap();
        let mut a = crate::trace::TraceRecord::new("a", 0, work_ms, 1);
        a.line = 2;
        let mut b = crate::trace::TraceRecord::new("b", 0, work_ms, 1);
        b.line = 3;
        let w = crate::workload::build_workload(
            vec![a, b],
            &cluster,
            crate::policy::placement::PlacementKind::FirstFit.build(),
        );
        let mut sim = Simulation::new(
            cluster,
            w.jobs,
            Box::new(Slicer { lease_ms, since: SimTime::ZERO, last: None, timer: None }),
            Box::new(crate::profile::TraceSpeed),
            EngineConfig { sample_interval_ms: 0 },
        )
        .with_checkpoint(crate::engine::CheckpointModel::HeliosTable);
        sim.net.per_check = 100;
        sim.net.next_check = 100;
        sim.run_with(|_| {})
    }

    #[test]
    fn time_slicing_that_checkpoints_more_than_a_lease_does_is_a_cycle_error() {
        // A 1 s lease does 1,000 ms of work and the preemption that ends it
        // adds 7,000 ms: every job's remaining work only grows, so the run
        // can never end. First look at 100 changes (sets the least remaining
        // work from +inf: progress), the next at 100 + 100 + 1,000 × 2 =
        // 2,200: no progress since, so the error reports 2,100 changes.
        let Err(err) = sliced(1_000, 10_000) else { panic!("the cycle ended") };
        match &err {
            SimError::NoNetProgress { policy, changes, count, jobs, .. } => {
                assert_eq!(policy, "slicer");
                assert_eq!(*changes, 2_100);
                assert_eq!(*count, 2);
                assert_eq!(jobs.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        let text = err.in_file(std::path::Path::new("x.csv")).to_string();
        assert!(text.starts_with("policy `slicer` makes no net progress: 2100 launches and preemptions"), "{text}");
        assert!(text.contains("job `a` (x.csv, line 2; 1 GPU, "), "{text}");
    }

    #[test]
    fn long_time_slicing_with_net_progress_completes() {
        // A 10 s lease does 10,000 ms and its preemption adds 7,000: each
        // job gains 3,000 ms net per lease. 10^6 ms each end after about
        // 2 × 10^6 / 3,000 ≈ 667 leases (~1,330 changes, one look); 10^7 ms
        // each after ~6,670 leases (~13,300 changes, six looks). No error.
        for work in [1_000_000, 10_000_000] {
            let out = sliced(10_000, work).expect("net progress every lease");
            assert!(out.jobs.iter().all(|(_, st)| matches!(st, crate::job::JobState::Completed(_))));
            assert!(out.stats.preemptions > 600, "{}", out.stats.preemptions);
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
