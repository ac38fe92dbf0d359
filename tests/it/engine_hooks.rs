//! The engine only runs the simulation: what a run records comes through the
//! observer hooks (`engine::Observer`, `metrics::Recorder`), decision timing
//! through a policy decorator, the models are the run's, and a model's failure
//! is not reported as the policy's.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, Observer, Simulation, Snapshot};
use dlsched::error::SimError;
use dlsched::ids::{GpuId, JobId};
use dlsched::job::JobSpec;
use dlsched::metrics::{Recorder, Sample};
use dlsched::policy::{placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::coloc::Interference;
use dlsched::profile::{RateModel, TraceSpeed};
use dlsched::workload::build_workload;

use crate::common::{policy, rec};

/// A 1-GPU job of `secs` s that needs 4,000 MiB, so that two share a 16,000 MiB GPU.
fn small(id: &str, secs: u64) -> dlsched::trace::TraceRecord {
    rec(id, 0, 1, secs).with_extra(|e| e.gpu_mem_mib = Some(4_000))
}

/// A rate model that gives NaN to the job named `bad` and 1 to the others;
/// with `after_neighbour`, only once a second job shares the node.
struct NanRate {
    after_neighbour: bool,
}

impl RateModel for NanRate {
    fn name(&self) -> &'static str {
        "nan-rate"
    }
    fn rate(&self, job: &JobSpec, gpus: &[GpuId], cluster: &Cluster) -> f64 {
        let node = cluster.node_of(gpus[0]);
        let held = cluster.node_gpus(node).filter(|&g| cluster.owner(g).is_some()).count();
        let bad = job.name == "bad" && (!self.after_neighbour || held > 1);
        if bad { f64::NAN } else { 1.0 }
    }
    fn depends_on_neighbours(&self) -> bool {
        self.after_neighbour
    }
}

/// A co-location model whose speeds are NaN.
struct NanSpeed;

impl Interference for NanSpeed {
    fn name(&self) -> &'static str {
        "nan-coloc"
    }
    fn speed(&self, _gpu_type: &str, _me: &JobSpec, _others: &[&JobSpec]) -> f64 {
        f64::NAN
    }
}

/// A co-location model at half speed for every tenant of a shared GPU.
struct Half;

impl Interference for Half {
    fn speed(&self, _gpu_type: &str, _me: &JobSpec, _others: &[&JobSpec]) -> f64 {
        0.5
    }
}

fn sim(
    recs: Vec<dlsched::trace::TraceRecord>,
    gpus: u32,
    placement: PlacementKind,
    model: Box<dyn RateModel>,
) -> Simulation {
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, gpus, "V100", 16_000)).unwrap();
    let p = policy(QueueOrder::Fifo, false, placement);
    let w = build_workload(recs, &cluster, p.placement.build());
    Simulation::new(
        cluster,
        w.jobs,
        p.build(1).unwrap(),
        model,
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
}

#[test]
fn a_nan_rate_at_launch_is_a_model_failure_naming_the_model_and_the_job() {
    let mut bad = rec("bad", 0, 1, 10);
    bad.line = 3;
    let err = sim(vec![bad], 1, PlacementKind::Consolidate, Box::new(NanRate { after_neighbour: false }))
        .run()
        .err()
        .expect("a NaN rate stops the run");
    match &err {
        SimError::ModelFailure { model, job, job_name, line, .. } => {
            assert_eq!((model.as_str(), *job, job_name.as_str(), *line), ("nan-rate", JobId(0), "bad", 3));
        }
        e => panic!("not a model failure: {e:?}"),
    }
    let text = err.in_file(std::path::Path::new("t.csv")).to_string();
    assert!(
        text.starts_with("nan-rate model failed for job `bad` (t.csv, line 3): rate model gave rate NaN"),
        "{text}"
    );
    assert!(!text.contains("policy"), "{text}");
}

#[test]
fn a_rate_that_turns_nan_when_a_neighbour_starts_is_a_model_failure() {
    // `bad` starts alone at rate 1 (0 s); `ok` joins its node at 2 s, the
    // engine recomputes `bad`'s rate, which is NaN: the run stops there,
    // instead of `bad` silently keeping its old rate.
    let recs = vec![rec("bad", 0, 1, 10), rec("ok", 2, 1, 10)];
    let err = sim(recs, 2, PlacementKind::Consolidate, Box::new(NanRate { after_neighbour: true }))
        .run()
        .err()
        .expect("a NaN rate on recomputation stops the run");
    assert!(
        matches!(&err, SimError::ModelFailure { model, job_name, .. } if model == "nan-rate" && job_name == "bad"),
        "{err:?}"
    );
}

#[test]
fn a_nan_colocation_speed_is_a_failure_of_the_colocation_model() {
    // Two whole-GPU jobs share the one GPU (share-first-fit); the second's
    // speed beside the first is NaN.
    let recs = vec![small("a", 10), small("b", 10)];
    let err = sim(recs, 1, PlacementKind::ShareFirstFit, Box::new(TraceSpeed))
        .with_interference(Box::new(NanSpeed))
        .run()
        .err()
        .expect("a NaN speed stops the run");
    match &err {
        SimError::ModelFailure { model, job_name, reason, .. } => {
            assert_eq!((model.as_str(), job_name.as_str()), ("nan-coloc", "b"));
            assert!(reason.contains("speed NaN"), "{reason}");
        }
        e => panic!("not a model failure: {e:?}"),
    }
}

#[test]
fn colocating_without_a_colocation_model_is_a_model_failure() {
    let recs = vec![small("a", 10), small("b", 10)];
    let err = sim(recs, 1, PlacementKind::ShareFirstFit, Box::new(TraceSpeed))
        .run()
        .err()
        .expect("no co-location model for a co-located job stops the run");
    match &err {
        SimError::ModelFailure { model, job_name, reason, .. } => {
            assert_eq!((model.as_str(), job_name.as_str()), ("interference", "a"));
            assert!(reason.contains("with_interference"), "{reason}");
        }
        e => panic!("not a model failure: {e:?}"),
    }
}

#[test]
fn the_colocation_model_is_the_one_the_run_passes_in() {
    // a and b share the one GPU from 0 s at speed 0.5 (the `Half` model,
    // not the profile database's): 10 s of work each takes 20 s.
    let recs = vec![small("a", 10), small("b", 10)];
    let out = sim(recs, 1, PlacementKind::ShareFirstFit, Box::new(TraceSpeed))
        .with_interference(Box::new(Half))
        .run()
        .unwrap();
    assert_eq!(crate::common::schedule(&out), vec![("a".into(), 0, 20), ("b".into(), 0, 20)]);
    // `Half` has no counters: nothing of the profile model's appears.
    assert!(out.model_counters.is_empty(), "{:?}", out.model_counters);
}

/// Counts the hooks and remembers their times.
#[derive(Default)]
struct Log {
    allocs: Vec<(u64, JobId, usize)>,
    releases: Vec<(u64, JobId)>,
    samples: Vec<u64>,
    finished_at: Option<u64>,
}

impl Observer for Log {
    fn on_allocate(&mut self, at: &Snapshot<'_>, job: JobId, gpus: &[GpuId], _speed: f64) {
        self.allocs.push((at.now.as_ms(), job, gpus.len()));
    }
    fn on_release(&mut self, at: &Snapshot<'_>, job: JobId, _gpus: &[GpuId]) {
        self.releases.push((at.now.as_ms(), job));
    }
    fn on_sample(&mut self, at: &Snapshot<'_>) {
        self.samples.push(at.now.as_ms());
    }
    fn on_finish(&mut self, at: &Snapshot<'_>) {
        self.finished_at = Some(at.now.as_ms());
    }
}

#[test]
fn the_engine_calls_every_hook_once_per_change() {
    // 2 GPUs, strict FIFO: a (0 s, 2 GPUs, 10 s), b (1 s, 1 GPU, 5 s) waits
    // for a: a runs 0-10 s, b 10-15 s. Samples every 4 s, skipping to the
    // first multiple at or after the next event while nothing happens: at 0
    // (next event 1 s, so 4 s), 4 (next event 10 s: 8 < 10, so the first
    // multiple at or after 10, 12), 12 (next event 15 s; 16 >= 15, so 16) and
    // 16, the last instant.
    let recs = vec![rec("a", 0, 2, 10), rec("b", 1, 1, 5)];
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "V100", 16_000)).unwrap();
    let p = policy(QueueOrder::Fifo, false, PlacementKind::Consolidate);
    let w = build_workload(recs, &cluster, p.placement.build());
    let sim = Simulation::new(
        cluster,
        w.jobs,
        p.build(1).unwrap(),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 4_000, ..Default::default() },
    );
    let mut log = Log::default();
    let out = sim.run_observed(&mut log, |_| {}).unwrap();
    assert_eq!(log.allocs, vec![(0, JobId(0), 2), (10_000, JobId(1), 1)]);
    assert_eq!(log.releases, vec![(10_000, JobId(0)), (15_000, JobId(1))]);
    assert_eq!(log.samples, vec![0, 4_000, 12_000, 16_000]);
    assert_eq!(log.finished_at, Some(16_000));
    // The engine's own counters do not depend on the observer.
    let plain = {
        let recs = vec![rec("a", 0, 2, 10), rec("b", 1, 1, 5)];
        let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "V100", 16_000)).unwrap();
        let w = build_workload(recs, &cluster, p.placement.build());
        Simulation::new(
            cluster,
            w.jobs,
            p.build(1).unwrap(),
            Box::new(TraceSpeed),
            EngineConfig { sample_interval_ms: 4_000, ..Default::default() },
        )
        .run()
        .unwrap()
    };
    assert_eq!(out.stats, plain.stats);
}

#[test]
fn the_recorder_integrates_busy_gpus_and_samples_the_timeline() {
    // As above: a holds 2 GPUs for 10 s, b 1 GPU for 5 s: 2 × 10,000 +
    // 1 × 5,000 = 25,000 busy GPU-ms. Samples at 0 (a running, b not yet
    // submitted), 4 s (a running, b pending), 12 s (b running), 16 s (idle).
    let recs = vec![rec("a", 0, 2, 10), rec("b", 1, 1, 5)];
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "V100", 16_000)).unwrap();
    let p = policy(QueueOrder::Fifo, false, PlacementKind::Consolidate);
    let w = build_workload(recs, &cluster, p.placement.build());
    let mut rec_ = Recorder::new(&cluster, &w.jobs, true, None);
    let policy = rec_.time_policy(p.build(1).unwrap());
    let sim = Simulation::new(
        cluster,
        w.jobs,
        policy,
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 4_000, ..Default::default() },
    );
    let out = sim.run_observed(&mut rec_, |_| {}).unwrap();
    let r = rec_.into_recording();
    assert_eq!(r.busy_gpu_ms, vec![25_000]);
    let s = |t: u64, busy: u32, running: u32, pending: u32| Sample {
        time: dlsched::time::SimTime::from_ms(t),
        gpus_busy: busy,
        jobs_running: running,
        jobs_pending: pending,
    };
    assert_eq!(r.timeline, vec![s(0, 2, 1, 0), s(4_000, 2, 1, 1), s(12_000, 1, 1, 0), s(16_000, 0, 0, 0)]);
    // Sharing figures without sharing: allocation = busy GPUs (25,000
    // GPU-ms); memory unknown, so each held GPU counts whole (25,000); no
    // model, so the SM estimate is 1 per held GPU (25,000).
    let i = r.share_integrals.unwrap();
    assert_eq!((i.alloc_gpu_ms, i.mem_gpu_ms, i.util_gpu_ms), (25_000.0, 25_000.0, 25_000.0));
    // Decision timing through the decorator: one pass per instant with an
    // arrival or completion (a sample alone asks nothing), FIFO asked at 0 s
    // (launch a, then wait), 1 s (wait: b does not fit), 10 s (launch b,
    // wait) and 15 s (wait): 6 calls; not at the sample-only 4, 12, 16 s.
    assert_eq!(r.timing.unwrap().decisions, 6);
    let (summary, _) = dlsched::metrics::summarize(&out, &r, &[], 2);
    // 25,000 GPU-ms / (2 GPUs × 15,000 ms) = 0.833333.
    assert_eq!(summary.gpu_utilization, 0.833333);
    assert_eq!(summary.policy, "fifo");
}

#[test]
fn the_engine_reads_no_profile_database_and_no_policy_internals() {
    // The engine takes its models from the run; the fragmentation model is
    // on the cluster's floor. Checked on the engine's source files.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for banned in ["ProfileDb", "policy::fgd", "Instant::now", "profile::resources", "metrics::"] {
            let code: Vec<&str> =
                text.lines().filter(|l| !l.trim_start().starts_with("//") && l.contains(banned)).collect();
            assert!(code.is_empty(), "{} uses {banned}: {code:?}", path.display());
        }
    }
}
