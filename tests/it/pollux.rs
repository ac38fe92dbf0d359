//! The `pollux` policy on small clusters: a job alone grows beyond its first
//! allocation as it profiles itself, two distributed jobs never share a
//! node, every job completes with the engine's invariants checked after
//! every event, and a seed fixes the run.

use std::sync::{Arc, Mutex};

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::RunOutput;
use dlsched::ids::JobId;
use dlsched::job::{JobSpec, JobState};
use dlsched::policy::pollux::{Pollux, PolluxOptions};
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::pollux::PolluxApps;
use dlsched::time::SimTime;

use crate::common::elastic_sim;

/// Job `{app}-{id}`: one GPU, tuned batch 128, adaptive.
fn job(id: u32, app: &str, submit_s: u64) -> JobSpec {
    crate::common::elastic_job(&format!("{app}-{id}"), app, submit_s, 1, 128, true)
}

/// What the wrapper saw at each tick (before the tick's decisions): per
/// running job, its GPUs per node.
type Seen = Arc<Mutex<Vec<(SimTime, Vec<(JobId, Vec<u32>)>)>>>;

/// Pollux, recording the allocation at each of its ticks.
struct Watch {
    inner: Pollux,
    seen: Seen,
}

impl Policy for Watch {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        self.inner.on_arrival(job, view)
    }
    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        self.inner.on_completion(job, view)
    }
    fn on_timer(&mut self, view: &View<'_>) {
        let mut now = Vec::new();
        for (spec, state) in view.jobs.iter() {
            if let JobState::Running(r) = state {
                let mut per_node = vec![0u32; view.cluster.num_nodes()];
                for &g in &r.gpus {
                    per_node[view.cluster.node_of(g).index()] += 1;
                }
                now.push((spec.id, per_node));
            }
        }
        self.seen.lock().unwrap().push((view.now, now));
        self.inner.on_timer(view)
    }
    fn decide(&mut self, view: &View<'_>) -> Decision {
        self.inner.decide(view)
    }
}

fn run(nodes: u32, jobs: Vec<JobSpec>, seed: u64) -> (RunOutput, Seen) {
    let seen: Seen = Arc::default();
    let opts = PolluxOptions { population: 20, generations: 10, ..PolluxOptions::default() };
    let policy = Watch { inner: Pollux::new(opts, dlsched::rng::stream(seed, "pollux")), seen: seen.clone() };
    let cluster = Cluster::new(ClusterSpec::uniform("t", nodes, 4, "t4", 16_000)).unwrap();
    let out = elastic_sim(cluster, jobs, Box::new(policy), Box::new(PolluxApps::builtin())).run().unwrap();
    (out, seen)
}

fn ends(out: &RunOutput) -> Vec<SimTime> {
    (0..out.jobs.len() as u32)
        .map(|j| match out.jobs.state(JobId(j)) {
            JobState::Completed(d) => d.end,
            s => panic!("job {j} not completed: {s:?}"),
        })
        .collect()
}

#[test]
fn a_job_alone_grows_beyond_its_first_allocation() {
    // Rule 2: unprofiled, its maximum is max(2 × 0, 1) = 1 GPU; once it has
    // run on r GPUs it may take 2r: 1, then 2, then 4, then 8 (2 nodes × 4).
    let (out, seen) = run(2, vec![job(0, "cifar10", 0)], 1);
    ends(&out);
    let seen = seen.lock().unwrap();
    // Ticks at 60, 120, ... s: the first sees nothing running yet.
    assert_eq!(seen[0].0, SimTime::from_secs(60));
    assert!(seen[0].1.is_empty());
    let gpus = |k: usize| seen[k].1.iter().map(|(_, n)| n.iter().sum::<u32>()).sum::<u32>();
    assert_eq!(gpus(1), 1, "{:?}", seen[1]);
    let most = (0..seen.len()).map(gpus).max().unwrap();
    assert!(most > 1, "never grew: {:?}", &seen[..seen.len().min(6)]);
    let first_grown = (0..seen.len()).find(|&k| gpus(k) > 1).unwrap();
    assert!(first_grown <= 4, "grew only at tick {first_grown}");
    // Every tick is a multiple of the 60-s interval.
    assert!(seen.iter().all(|(t, _)| t.as_ms() % 60_000 == 0));
}

#[test]
fn two_distributed_jobs_never_share_a_node_and_a_seed_fixes_the_run() {
    let jobs = || {
        vec![
            job(0, "cifar10", 0),
            job(1, "cifar10", 30),
            job(2, "bert", 100),
            job(3, "ncf", 200),
            job(4, "cifar10", 400),
        ]
    };
    let (out, seen) = run(3, jobs(), 7);
    let e1 = ends(&out);
    let seen = seen.lock().unwrap();
    let mut distributed_ticks = 0;
    for (t, jobs) in seen.iter() {
        let distributed: Vec<&Vec<u32>> =
            jobs.iter().map(|(_, n)| n).filter(|n| n.iter().filter(|&&c| c > 0).count() > 1).collect();
        distributed_ticks += usize::from(!distributed.is_empty());
        for node in 0..3 {
            let on = distributed.iter().filter(|n| n[node] > 0).count();
            assert!(on <= 1, "at {t:?} node {node} holds {on} distributed jobs: {jobs:?}");
        }
        // ncf (job 3) never has more than one GPU.
        for (j, n) in jobs {
            if *j == JobId(3) {
                assert_eq!(n.iter().sum::<u32>(), 1);
            }
        }
    }
    assert!(distributed_ticks > 0, "no distributed job at any tick");
    drop(seen);
    let (out2, _) = run(3, jobs(), 7);
    assert_eq!(ends(&out2), e1);
}
