//! QSSF: hand-computed schedules (the Helios semantics file's §6.2 with the
//! reference's order, the default order, backfill, the timer after a
//! no-carry pass, the history estimator), and the command line and sweeps.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, RunOutput, Simulation};
use dlsched::ids::VcId;
use dlsched::job::JobState;
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::qssf::{Qssf, QssfEstimator, QssfOptions};
use dlsched::profile::TraceSpeed;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::dlsched;
use crate::common::{expect, rec};

/// Runs `records` under QSSF with `opts` (consolidate), timeline samples
/// every `sample_ms` (0: none), checking every invariant after every instant.
pub fn run_qssf(records: Vec<TraceRecord>, spec: ClusterSpec, opts: QssfOptions, sample_ms: u64) -> RunOutput {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::Consolidate.build());
    assert!(w.skipped.is_empty(), "{:?}", w.skipped);
    let p = Box::new(Qssf::new(opts, opts.placement.build(), cluster.partitions().len()));
    let cfg = EngineConfig { sample_interval_ms: sample_ms, ..Default::default() };
    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), cfg);
    while sim.step().unwrap().is_some() {
        if let Err(e) = sim.check_invariants() {
            panic!("at {}: {e}", sim.now());
        }
    }
    sim.finish()
}

/// (id, start s, end s) of every job, sorted by id.
fn sched(out: &RunOutput) -> Vec<(String, u64, u64)> {
    let mut v: Vec<_> = out
        .jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => {
                assert_eq!(d.preemptions(), 0, "{}: qssf never preempts", s.name);
                (s.name.to_string(), d.start.as_ms() / 1000, d.end.as_ms() / 1000)
            }
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect();
    v.sort();
    v
}

fn sorted(mut v: Vec<(String, u64, u64)>) -> Vec<(String, u64, u64)> {
    v.sort();
    v
}

fn metric(out: &RunOutput, name: &str) -> f64 {
    out.policy_metrics.iter().find(|(k, _)| *k == name).map(|&(_, v)| v).unwrap_or_else(|| panic!("no {name}"))
}

/// SEMANTICS-srtf-qssf.md §6.2: one node of 8 GPUs; (id, submit s, GPUs, duration s).
fn sem_jobs() -> Vec<TraceRecord> {
    vec![rec("Q0", 0, 4, 20), rec("X", 5, 1, 1000), rec("Y", 5, 4, 10), rec("Z1", 8, 3, 50), rec("Z2", 9, 1, 150)]
}

fn one_node() -> ClusterSpec {
    ClusterSpec::uniform("q", 1, 8, "V100", 16384)
}

#[test]
fn helios_semantics_example_6_2() {
    // Reference order, oracle estimates (duration x GPUs): Q0 80, X 1000,
    // Y 40, Z1 150, Z2 150 (GPU-s).
    // t0: queue [Q0], no carried job: no estimate; Q0 starts 0-20, 4 free.
    // t5: [X, Y] both new: by GPU count X(1), Y(4): X starts 5-1005, 3 free;
    //     Y does not fit: stop. Jobs left, no carry: a pass at t6.
    // t6: [Y] carried: Y gets 40; does not fit.
    // t8: Z1 (150) arrives: [Y 40, Z1 150]: Y blocks Z1 (which would fit).
    // t9: Z2 (150): GPU sort Z2(1) Z1(3) Y(4), then by estimate Y, Z2, Z1
    //     (the tie goes to the smaller GPU count).
    // t20: Q0 ends, 7 free: Y 20-30 (3 free), Z2 20-170 (2 free), Z1 (3) no.
    // t30: Y ends, 6 free: Z1 30-80.
    let want = expect(&[("Q0", 0, 20), ("X", 5, 1005), ("Y", 20, 30), ("Z1", 30, 80), ("Z2", 20, 170)]);
    let out = run_qssf(sem_jobs(), one_node(), QssfOptions::helios(), 0);
    assert_eq!(sched(&out), sorted(want.clone()));
    // Three jobs got an estimate (Q0 and X started at no-carry passes: the
    // reference's priority -1), each exact.
    assert_eq!(metric(&out, "qssf_estimated_jobs"), 3.0);
    assert_eq!(metric(&out, "qssf_estimate_error_mean"), 0.0);
    // One timer: after the no-carry pass at t5 that left Y queued.
    assert_eq!(out.stats.timers, 1);
    // Passes at timeline samples (every 1 s, every 7 s) change nothing.
    for ms in [1_000, 7_000] {
        assert_eq!(sched(&run_qssf(sem_jobs(), one_node(), QssfOptions::helios(), ms)), sorted(want.clone()));
    }
}

#[test]
fn default_order_by_hand() {
    // Default: queue by (estimate, submission order), strict.
    // t0: Q0 (80) 0-20, 4 free. t5: [Y 40, X 1000]: Y 5-15 (0 free), X waits.
    // t8: [Z1 150, X]; t9: [Z1 150, Z2 150, X] (tie: submission order).
    // t15: Y ends, 4 free: Z1 (3) 15-65, Z2 (1) 15-165, 0 free; X waits.
    // t20: Q0 ends, 4 free: X 20-1020.
    let want = expect(&[("Q0", 0, 20), ("X", 20, 1020), ("Y", 5, 15), ("Z1", 15, 65), ("Z2", 15, 165)]);
    let out = run_qssf(sem_jobs(), one_node(), QssfOptions::default(), 0);
    assert_eq!(sched(&out), sorted(want));
    assert_eq!(metric(&out, "qssf_estimated_jobs"), 5.0);
    assert_eq!(out.stats.timers, 0);
}

#[test]
fn backfill_by_hand() {
    // One node of 4 GPUs: A (2 GPUs, 100 s) at 0, B (4, 10 s: 40 GPU-s) at 1,
    // C (1, 50 s: 50 GPU-s) at 2.
    // Strict: B heads the queue from t1 and does not fit (2 free) until A
    // ends at 100: B 100-110, then C 110-160.
    // Backfill: at t2 C fits beside A: 2-52; B 100-110.
    let jobs = || vec![rec("A", 0, 2, 100), rec("B", 1, 4, 10), rec("C", 2, 1, 50)];
    let four = || ClusterSpec::uniform("4", 1, 4, "V100", 16384);
    let strict = run_qssf(jobs(), four(), QssfOptions::default(), 0);
    assert_eq!(sched(&strict), expect(&[("A", 0, 100), ("B", 100, 110), ("C", 110, 160)]));
    let bf = run_qssf(jobs(), four(), QssfOptions { backfill: true, ..Default::default() }, 0);
    assert_eq!(sched(&bf), expect(&[("A", 0, 100), ("B", 100, 110), ("C", 2, 52)]));
}

#[test]
fn reference_order_reorders_the_second_after_a_no_carry_pass() {
    // Two nodes of 2 GPUs, node 0 of type A, node 1 of type B. P (2 GPUs,
    // 100 s) at 0 goes on node 0 (best fit, tie to the lower index).
    // At 5: X (1 GPU, type A only, 1000 s: 1000 GPU-s), Y (2 GPUs, 10 s: 20).
    // Reference order: no carry at 5, by GPU count X first; X cannot be
    // placed (node 0 is full) and blocks Y. At 6 the reference re-sorts by
    // estimate: Y first, on node 1: 6-16. X waits for P: 100-1100.
    // Without the pass at 6, Y would wait for the next event (P at 100).
    // Default order: Y (20) heads the queue at 5: 5-15.
    let mut spec = ClusterSpec::uniform("ab", 2, 2, "A", 16384);
    spec.nodes[1].gpu_type = "B".into();
    let mut x = rec("X", 5, 1, 1000);
    x.extra_mut().gpu_types = Some(vec!["A".into()]);
    let jobs = vec![rec("P", 0, 2, 100), x, rec("Y", 5, 2, 10)];
    let out = run_qssf(jobs.clone(), spec.clone(), QssfOptions::helios(), 0);
    assert_eq!(sched(&out), expect(&[("P", 0, 100), ("X", 100, 1100), ("Y", 6, 16)]));
    assert_eq!(out.stats.timers, 1);
    let out = run_qssf(jobs, spec, QssfOptions::default(), 0);
    assert_eq!(sched(&out), expect(&[("P", 0, 100), ("X", 100, 1100), ("Y", 5, 15)]));
}

#[test]
fn history_estimator_by_hand() {
    // Two VCs of one 1-GPU node each: x (node 0) and y (node 1). Every job
    // 1 GPU, so its estimate is its estimated duration. (user, id, submit s,
    // duration s, VC):
    let job = |user: &str, id: &str, at: u64, dur: u64, vc: &str| {
        let mut r = rec(id, at, 1, dur);
        r.extra_mut().user = Some(user.into());
        r.extra_mut().vc = Some(vc.into());
        r
    };
    let jobs = vec![
        job("u", "a", 0, 10, "x"),
        job("v", "b", 1, 100, "x"),
        job("u", "c", 2, 30, "x"),
        job("u", "d", 20, 5, "x"),
        job("w", "e", 30, 20, "x"),
        job("u", "f", 120, 1, "x"),
        job("u", "g", 140, 40, "y"),
    ];
    let mut spec = ClusterSpec::uniform("xy", 2, 1, "V100", 16384);
    spec.vc_names = vec!["x".into(), "y".into()];
    spec.named_vcs = true;
    spec.nodes[1].vc = VcId(1);
    // Estimates are made at arrival from the jobs completed by then:
    // a, b, c (0, 1, 2 s): nothing completed: the prior, 3,600 s.
    // a runs 0-10. At 10 (u@x: [10]) b and c tie at 3,600: b 10-110.
    // d (20, u): u@x mean 10 s. e (30, w): no w@x: VC x mean 10 s.
    // At 110 (b done: x [10, 100]): d (10) before e (10, later), c (3,600):
    // d 110-115. At 115: e 115-135. f (120, u): u@x [10, 5]: 7.5 s.
    // At 135: f (7.5) 135-136, then c 136-166.
    // g (140, u, VC y): no u@y, no y: all completed jobs [10, 100, 5, 20,
    // 1]: 136 / 5 = 27.2 s; y is empty: 140-180.
    let o = QssfOptions { estimator: QssfEstimator::History, ..Default::default() };
    let out = run_qssf(jobs, spec, o, 0);
    let want = [
        ("a", 0, 10),
        ("b", 10, 110),
        ("c", 136, 166),
        ("d", 110, 115),
        ("e", 115, 135),
        ("f", 135, 136),
        ("g", 140, 180),
    ];
    assert_eq!(sched(&out), expect(&want));
    // Relative errors |est - actual| / actual: a 3590/10 = 359, b 3500/100
    // = 35, c 3570/30 = 119, d 5/5 = 1, e 10/20 = 0.5, f 6.5/1 = 6.5,
    // g 12.8/40 = 0.32: mean 521.32 / 7; p95 (type 7, sorted 0.32 0.5 1 6.5
    // 35 119 359: h = 6 x 0.95 = 5.7) = 119 + 0.7 x (359 - 119) = 287.
    assert!((metric(&out, "qssf_estimate_error_mean") - 521.32 / 7.0).abs() < 1e-9);
    assert!((metric(&out, "qssf_estimate_error_p95") - 287.0).abs() < 1e-9);
    let levels = ["qssf_estimates_user_vc", "qssf_estimates_vc", "qssf_estimates_global", "qssf_estimates_prior"];
    assert_eq!(levels.map(|l| metric(&out, l)), [2.0, 1.0, 1.0, 3.0]);
}

fn summary(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn runs_from_the_command_line_on_vcs_heterogeneous_clusters_and_the_table_model() {
    let root = env!("CARGO_MANIFEST_DIR");
    let (trace, vcs) = (format!("{root}/traces/example_jobs.csv"), format!("{root}/traces/example_vcs.csv"));
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = out.to_str().unwrap();
    let cases: [&[&str]; 4] = [
        &["--trace", &trace, "--vcs", &vcs, "--policy", "qssf", "--policy-opt", "estimator=history"],
        &["--trace", &trace, "--vcs", &vcs, "--policy", "qssf", "--policy-opt", "helios-order=true", "--backfill"],
        &["--cluster", "alibaba-openb", "--jobs", "200", "--policy", "qssf", "--policy-opt", "estimator=history"],
        &["--jobs", "200", "--rate-model", "table", "--policy", "qssf", "--placement", "first-fit"],
    ];
    for args in cases {
        let mut a = vec!["simulate", "--out", o];
        a.extend(args);
        let r = dlsched(&a);
        assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
        let s = summary(&out);
        assert_eq!(s["jobs_unfinished"], 0, "{args:?}");
        assert!(s["jobs_completed"].as_u64().unwrap() > 0, "{args:?}");
        assert!(s["policy"].as_str().unwrap().starts_with("qssf"), "{args:?}");
        assert!(s["policy_metrics"]["qssf_estimate_error_mean"].is_number(), "{args:?}");
    }
    // A sharing placement is refused, naming the option.
    let r = dlsched(&["simulate", "--policy", "qssf", "--placement", "share-best-fit"]);
    assert!(!r.status.success());
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(e.contains("qssf: placement share-best-fit shares GPUs"), "{e}");
}

#[test]
fn sweep_files_set_qssf_options() {
    use dlsched::experiment::sweep::{Experiment, to_run_spec};
    use dlsched::policy::registry::PolicySpec;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("e.toml");
    std::fs::write(
        &p,
        "question = \"q\"\n[base]\npolicy = \"qssf\"\npolicy_opt.helios-order = true\n[sweep]\npolicy_opt.estimator = [\"oracle\", \"history\"]\n",
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    let mut got: Vec<QssfOptions> = e
        .runs
        .iter()
        .map(|r| match to_run_spec(&r.params, &p).unwrap().policy {
            PolicySpec::Qssf(o) => o,
            other => panic!("{other:?}"),
        })
        .collect();
    got.sort_by_key(|o| o.estimator == QssfEstimator::History);
    // The synthetic workload: QSSF backfills by default, as every queue
    // policy does there (issue 35).
    let o = QssfOptions { backfill: true, ..QssfOptions::helios() };
    let h = QssfOptions { estimator: QssfEstimator::History, ..o };
    assert_eq!(got, vec![o, h]);
}
