//! The moldable-task figures of `summary.json` (issue 16): GENIE's
//! normalised latency (run time) beside the waiting-included one, QoS per
//! class and over the classes that can be met, and the cluster-level
//! normalised rate, computed by hand on a small schedule; the GENIE
//! workload's density per GPU and its fixed-count burst, through the sweep
//! keys.

use std::collections::HashMap;
use std::path::Path;

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::experiment::WorkloadSource;
use dlsched::experiment::sweep::{Experiment, to_run_spec};
use dlsched::job::{QosClass, TaskSpec};
use dlsched::metrics::{Recording, summarize};
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::queue::QueueOrder;
use dlsched::profile::TraceSpeed;
use dlsched::time::SimTime;
use dlsched::workload::build_workload;

use crate::common::{expect, policy, rec, schedule};

fn close(got: Option<f64>, want: f64, what: &str) {
    let g = got.unwrap_or_else(|| panic!("{what} is null"));
    assert!((g - want).abs() < 1e-6, "{what}: {g} != {want}");
}

#[test]
fn task_metrics_by_hand() {
    // 1 node x 2 GPUs, strict FIFO at trace speed, each task on 1 GPU, so a
    // task runs exactly its single-GPU latency (its duration).
    //   A: submit 0,  100 s, Prior  (deadline 0 + 100 = 100):  runs 0..100, met.
    //   B: submit 0,  200 s, Normal (deadline 0 + 400 = 400):  runs 0..200, met.
    //   C: submit 10, 100 s, Prior  (deadline 10 + 100 = 110): waits for A,
    //      runs 100..200, missed.
    //   D: submit 20,  50 s, Urgent (deadline 20 + 0 = 20): waits for B and C,
    //      runs 200..250, missed (an Urgent task always is).
    let tasks = [
        ("A", 0, 100, QosClass::Prior),
        ("B", 0, 200, QosClass::Normal),
        ("C", 10, 100, QosClass::Prior),
        ("D", 20, 50, QosClass::Urgent),
    ];
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "V100", 16384)).unwrap();
    let recs = tasks.iter().map(|&(id, s, d, _)| rec(id, s, 1, d)).collect();
    let p = policy(QueueOrder::Fifo, false, PlacementKind::Consolidate);
    let mut w = build_workload(recs, &cluster, p.placement.build());
    let mut map: HashMap<String, TaskSpec> = tasks
        .iter()
        .map(|&(id, s, d, qos)| {
            let t = TaskSpec {
                kind: "x-train".into(),
                inference: false,
                global_bsz: 8,
                iterations: 1,
                qos,
                deadline: SimTime::from_ms((s + qos.ect_factor() * d) * 1000),
            };
            (id.to_string(), t)
        })
        .collect();
    w.jobs.attach_tasks(&mut map);
    let pol = p.build(1).unwrap();
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let out = Simulation::new(cluster, w.jobs, pol, Box::new(TraceSpeed), cfg).run().unwrap();
    assert_eq!(schedule(&out), expect(&[("A", 0, 100), ("B", 0, 200), ("C", 100, 200), ("D", 200, 250)]));
    let (s, _) = summarize(&out, &Recording::default(), &[], 4);
    // GENIE's normalised latency, run time / single-GPU latency: every task
    // ran its single-GPU latency, so 1 each, mean 1 (the paper's Capacity
    // at exactly 100 %).
    close(s.normalized_latency_mean, 1.0, "normalised latency");
    // With the waiting, JCT / latency: A 100/100 = 1, B 200/200 = 1,
    // C (200 - 10)/100 = 1.9, D (250 - 20)/50 = 4.6; mean 8.5 / 4 = 2.125.
    close(s.normalized_latency_with_wait_mean, 2.125, "normalised latency with waiting");
    // QoS: 2 of 4 met = 0.5; urgent 0/1, prior 1/2, normal 1/1; over the
    // classes that can be met (prior, normal) 2/3.
    close(s.qos_guarantee_rate, 0.5, "QoS");
    close(s.qos_guarantee_rate_urgent, 0.0, "QoS urgent");
    close(s.qos_guarantee_rate_prior, 0.5, "QoS prior");
    close(s.qos_guarantee_rate_normal, 1.0, "QoS normal");
    close(s.qos_guarantee_rate_meetable, 0.666667, "QoS meetable");
    // Cluster-level normalised rate: single-GPU work 100 + 200 + 100 + 50 =
    // 450 GPU-s over 2 GPUs x 250 s makespan = 0.9 (the per-task mean of
    // achieved / single-GPU rate is 1: the two figures differ by the idle
    // GPU-time, 50 s of one GPU).
    close(s.normalized_rate_cluster, 0.9, "cluster normalised rate");
    close(s.normalized_throughput_mean, 1.0, "per-task normalised rate");
}

#[test]
fn task_metrics_are_null_without_tasks() {
    let out = crate::common::run(
        vec![rec("A", 0, 1, 10)],
        ClusterSpec::uniform("t", 1, 2, "V100", 16384),
        policy(QueueOrder::Fifo, false, PlacementKind::Consolidate),
    );
    let (s, _) = summarize(&out, &Recording::default(), &[], 1);
    assert_eq!(
        (s.qos_guarantee_rate_meetable, s.qos_guarantee_rate_urgent, s.normalized_latency_with_wait_mean),
        (None, None, None)
    );
    assert_eq!((s.normalized_rate_cluster, s.normalized_latency_mean), (None, None));
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn genie_spec(w: &WorkloadSource) -> dlsched::workload::genie::GenieWorkloadSpec {
    match w {
        WorkloadSource::Genie(g) => *g,
        other => panic!("not the GENIE workload: {other:?}"),
    }
}

#[test]
fn density_per_gpu_scales_with_the_cluster() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "e.toml",
        "question = \"q\"\n[base]\nworkload = \"genie\"\nhours = 24\ngpus_per_node = 4\ngpu_type = \"k80\"\n\
         [sweep]\nnodes = [4, 8, 32]\njobs_per_hour_per_gpu = [1.25, 1.875]\n",
    );
    let e = Experiment::load(&p).unwrap();
    let mut got: Vec<(i64, f64, f64)> = e
        .runs
        .iter()
        .map(|r| {
            let n = match r.params["nodes"] {
                dlsched::experiment::sweep::Value::Int(n) => n,
                ref v => panic!("{v:?}"),
            };
            let per = match r.params["jobs_per_hour_per_gpu"] {
                dlsched::experiment::sweep::Value::Float(x) => x,
                ref v => panic!("{v:?}"),
            };
            (n, per, genie_spec(&to_run_spec(&r.params, &p).unwrap().workload).jobs_per_hour)
        })
        .collect();
    got.sort_by(|a, b| a.partial_cmp(b).unwrap());
    // 4 GPUs per node: 16, 32, 128 GPUs. 1.25 x 16 = 20, x 32 = 40,
    // x 128 = 160; 1.875 x 16 = 30, x 32 = 60, x 128 = 240 tasks/hour.
    let want =
        [(4, 1.25, 20.0), (4, 1.875, 30.0), (8, 1.25, 40.0), (8, 1.875, 60.0), (32, 1.25, 160.0), (32, 1.875, 240.0)];
    assert_eq!(got, want);
    // Two keys that both set the density are refused, naming both.
    let p2 = write(
        d.path(),
        "two.toml",
        "question = \"q\"\n[base]\nworkload = \"genie\"\njobs_per_hour = 5\njobs_per_hour_per_gpu = 1.25\n",
    );
    let err = Experiment::load(&p2).unwrap_err().message;
    assert!(err.contains("`jobs_per_hour` and `jobs_per_hour_per_gpu` both set the task density"), "{err}");
    // Per GPU without the GENIE workload is refused.
    let p3 = write(d.path(), "syn.toml", "question = \"q\"\n[base]\njobs_per_hour_per_gpu = 1.25\n");
    let err = Experiment::load(&p3).unwrap_err().message;
    assert!(err.contains("`jobs_per_hour_per_gpu` applies to the GENIE workload"), "{err}");
}

#[test]
fn the_scale_experiment_keeps_the_load_per_gpu() {
    // experiments/genie-scale.toml: every run's density is 15 or 20 tasks/h
    // per 16 GPUs of its cluster (0.9375 or 1.25 per GPU), not a fixed 20.
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/genie-scale.toml");
    let e = Experiment::load(&p).unwrap();
    let mut densities = std::collections::BTreeSet::new();
    for r in &e.runs {
        let spec = to_run_spec(&r.params, &p).unwrap();
        let gpus = spec.cluster.spec().unwrap().total_gpus() as f64;
        let per_16 = genie_spec(&spec.workload).jobs_per_hour / gpus * 16.0;
        assert!(per_16 == 15.0 || per_16 == 20.0, "run {}: {per_16} tasks/h per 16 GPUs", r.id);
        densities.insert((gpus as u64, per_16 as u64));
    }
    // 16 and 32 GPUs, both densities each: 0.9375 x 32 = 30 tasks/h, 1.25 x 32 = 40.
    assert_eq!(densities.len(), 4, "{densities:?}");
    assert!(densities.contains(&(16, 15)) && densities.contains(&(32, 20)), "{densities:?}");
}

#[test]
fn a_burst_is_exactly_its_tasks_within_the_window() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "b.toml", "question = \"q\"\n[base]\nworkload = \"genie\"\nhours = 1\ntasks = 150\n");
    let e = Experiment::load(&p).unwrap();
    let g = genie_spec(&to_run_spec(&e.runs[0].params, &p).unwrap().workload);
    // 150 tasks over 1 h: the recorded mean density is 150 / 1 = 150 per hour.
    assert_eq!((g.tasks, g.hours, g.jobs_per_hour), (Some(150), 1.0, 150.0));
    let db = dlsched::profile::db::ProfileDb::builtin();
    let tasks = dlsched::workload::genie::generate(&g, &db, "K80", 12 * 1024, 3).unwrap();
    assert_eq!(tasks.len(), 150);
    assert!(tasks.iter().all(|(r, _)| r.submit_ms < 3_600_000));
    let p2 = write(d.path(), "b0.toml", "question = \"q\"\n[base]\nworkload = \"genie\"\ntasks = 0\n");
    let err = Experiment::load(&p2).unwrap_err().message;
    assert!(err.contains("`tasks` must be 1 to 50000, got 0"), "{err}");
}

#[test]
fn every_experiment_file_loads() {
    // Each experiments/*.toml expands and validates every run (keys, values,
    // policy options, paths) without running it; a file that needs
    // ../shared is skipped when it is absent, one that reads tables trained
    // into runs/ when they are.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        if text.contains("../shared") && crate::common::shared(&f.display().to_string()).is_none() {
            continue;
        }
        // A file that reads tables its header's commands train into runs/,
        // or traces its write-up says to fetch into data/ (both git-ignored),
        // is checked only when they exist.
        let generated: Vec<&str> = text
            .split('"')
            .filter(|t| t.starts_with("../runs/") || t.starts_with("data/"))
            .filter(|t| !dir.join(t).exists())
            .collect();
        if let Some(missing) = generated.first() {
            eprintln!(
                "skipping {}: it reads {missing}, which the commands or fetch at its top make (absent on a clean clone)",
                f.display()
            );
            continue;
        }
        // A fill experiment (`dlsched fill`, experiments/fgd.md) is not a
        // sweep file: its spec, node list and pod lists are read instead.
        if text.lines().next().is_some_and(|l| l.contains("dlsched fill")) {
            use dlsched::experiment::fill::{FillSpec, read_nodes, read_pods};
            let spec = FillSpec::read(&f).unwrap_or_else(|e| panic!("{e}"));
            let cluster = read_nodes(&spec.nodes).unwrap_or_else(|e| panic!("{e}"));
            for p in &spec.pod_lists {
                read_pods(p, &cluster).unwrap_or_else(|e| panic!("{e}"));
            }
            assert!(!spec.rules().is_empty(), "{}", f.display());
            continue;
        }
        let e = Experiment::load(&f).unwrap_or_else(|e| panic!("{e}"));
        assert!(!e.runs.is_empty(), "{}", f.display());
    }
}
