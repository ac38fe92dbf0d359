//! Gandiva (`dlsched::policy::gandiva`): hand-computed schedules of its
//! three mechanisms (time-slicing with suspend/resume cost, packing by the
//! profile database's measured pair speeds, migration for locality), each
//! with every invariant checked after every instant; and the policy from
//! the command line and a sweep file.

use std::sync::Arc;

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, RunOutput, Simulation};
use dlsched::experiment::sweep::{Experiment, to_run_spec};
use dlsched::job::JobState;
use dlsched::policy::gandiva::{Gandiva, GandivaOptions};
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::registry::PolicySpec;
use dlsched::profile::TraceSpeed;
use dlsched::profile::coloc::ProfileInterference;
use dlsched::profile::db::ProfileDb;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::dlsched;
use crate::common::{builtin_interference, rec};

/// Runs `records` under Gandiva with `opts` at trace speed, with the
/// builtin profile database's co-location model (for the policy and the
/// engine alike) and checkpoint model `ckpt`, checking every invariant
/// after every instant.
pub fn run_gandiva(
    records: Vec<TraceRecord>,
    spec: ClusterSpec,
    opts: GandivaOptions,
    ckpt: CheckpointModel,
) -> RunOutput {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::Consolidate.build());
    let coloc = ProfileInterference::new(Arc::new(ProfileDb::builtin()));
    let p = Box::new(Gandiva::new(opts, cluster.partitions().len(), Some(coloc)));
    let cfg = EngineConfig { sample_interval_ms: 0 };
    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), cfg)
        .with_interference(builtin_interference())
        .with_checkpoint(ckpt);
    while sim.step().unwrap().is_some() {
        if let Err(e) = sim.check_invariants() {
            panic!("at {}: {e}", sim.now());
        }
    }
    sim.finish()
}

/// (trace id, first start ms, end ms, preemptions) of every job, in job order.
fn rows(out: &RunOutput) -> Vec<(String, u64, u64, u32)> {
    out.jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => (s.name.to_string(), d.first_start().as_ms(), d.end.as_ms(), d.preemptions()),
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect()
}

fn want(rows: &[(&str, u64, u64, u32)]) -> Vec<(String, u64, u64, u32)> {
    rows.iter().map(|&(n, a, b, p)| (n.to_string(), a, b, p)).collect()
}

fn metric(out: &RunOutput, name: &str) -> f64 {
    out.policy_metrics.iter().find(|(k, _)| *k == name).map(|&(_, v)| v).unwrap()
}

/// A 1-GPU job of `model` at per-GPU batch `bsz` needing 4,000 MiB.
fn with_model(mut r: TraceRecord, model: &str, bsz: u32) -> TraceRecord {
    r.extra_mut().model = Some(model.into());
    r.extra_mut().local_bsz = Some(bsz);
    r.extra_mut().gpu_mem_mib = Some(4_000);
    r
}

#[test]
fn time_slicing_rotates_one_gpu_in_rounds_and_charges_each_suspend() {
    // One GPU, rounds of 60 s, Gandiva's 100 ms per suspend. A (100 s), B
    // (70 s) and C (30 s) all arrive at 0, in that order.
    // - 0: A starts; B, C wait (rotation B, C).
    // - 60: round; A has run a full round: B suspends A (A: 100 - 60 = 40 s
    //   left + 0.1 s = 40.1 s) and starts; rotation C, A.
    // - 120: B has run a full round: C suspends B (70 - 60 = 10 s + 0.1 =
    //   10.1 s left) and starts; rotation A, B.
    // - 150: C ends (120 + 30); A resumes: ends 150 + 40.1 = 190.1.
    // - 180: round, but A (re)started at 150 has not run a full round.
    // - 190.1: A ends; B resumes: ends 190.1 + 10.1 = 200.2.
    let jobs = vec![rec("A", 0, 1, 100), rec("B", 0, 1, 70), rec("C", 0, 1, 30)];
    let out = run_gandiva(
        jobs,
        ClusterSpec::uniform("1", 1, 1, "V100", 16_000),
        Default::default(),
        CheckpointModel::Gandiva,
    );
    assert_eq!(rows(&out), want(&[("A", 0, 190_100, 1), ("B", 60_000, 200_200, 1), ("C", 120_000, 150_000, 0)]));
    // Waiting: A 150 - 60 = 90 s; B 60 + (190.1 - 120) = 130.1 s; C 120 s.
    let waited: Vec<u64> = out
        .jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => d.waited_ms(s.submit),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(waited, vec![90_000, 130_100, 120_000]);
    assert_eq!(out.stats.checkpoint_ms, 200, "two suspends of 100 ms");
    assert_eq!(metric(&out, "gandiva_time_slices"), 2.0);
    // Without time-slicing, FIFO on one GPU: A 0-100, B 100-170, C 170-200.
    let jobs = vec![rec("A", 0, 1, 100), rec("B", 0, 1, 70), rec("C", 0, 1, 30)];
    let opts = GandivaOptions { time_slicing: false, ..Default::default() };
    let out = run_gandiva(jobs, ClusterSpec::uniform("1", 1, 1, "V100", 16_000), opts, CheckpointModel::Gandiva);
    assert_eq!(rows(&out), want(&[("A", 0, 100_000, 0), ("B", 100_000, 170_000, 0), ("C", 170_000, 200_000, 0)]));
}

#[test]
fn round_length_is_an_option() {
    // Rounds of 30 s, no checkpoint cost, one GPU: A (50 s) and B (40 s) at 0.
    // 0: A starts. 30: B suspends A (20 s left). 60: A suspends B (10 s
    // left). 80: A ends; B resumes, ends 90.
    let jobs = vec![rec("A", 0, 1, 50), rec("B", 0, 1, 40)];
    let opts = GandivaOptions { round_s: 30, ..Default::default() };
    let out = run_gandiva(jobs, ClusterSpec::uniform("1", 1, 1, "V100", 16_000), opts, CheckpointModel::None);
    assert_eq!(rows(&out), want(&[("A", 0, 80_000, 1), ("B", 30_000, 90_000, 1)]));
}

/// The packing example's jobs: the builtin database's (Gavel's) V100 pair
/// autoencoder-ml20m at batch 512 with lstm-wikitext2 at batch 20 runs at
/// 0.752901 and 0.867094 (sum 1.619995 > 1: packed); two autoencoder-ml20m
/// at 512 measure 0.173401 each, lifted to time slicing less 5 %, 0.475
/// each (sum 0.95 < 1: not packed).
fn packing_jobs() -> Vec<TraceRecord> {
    vec![
        with_model(rec("A", 0, 1, 200), "autoencoder-ml20m", 512),
        with_model(rec("D", 0, 1, 30), "autoencoder-ml20m", 512),
        with_model(TraceRecord::new("B", 10_000, 86_709, 1), "lstm-wikitext2", 20),
        with_model(rec("C", 20, 1, 10), "autoencoder-ml20m", 512),
    ]
}

#[test]
fn packing_pairs_jobs_whose_measured_speeds_beat_time_slicing() {
    // One node of 2 V100 (16,000 MiB; 4,000 MiB per job fits two to a GPU).
    // - 0: A on GPU 0, D on GPU 1 (each alone, as a tenant).
    // - 10: B finds no free GPU: it packs with A or with D (the same pair,
    //   sum 1.619995 > 1; the lower GPU index: GPU 0, with A).
    //   B: 86,709 ms of work at 0.867094 = 99,999.3 ms -> ends at 110 s.
    // - 20: C finds no free GPU; with D (autoencoder pair: 0.95 <= 1) it does
    //   not pack: it waits. 30: D ends; C takes GPU 1, 30-40.
    // - 60: a round; A + B observed 0.752901 + 0.867094 > 1: kept.
    // - A: 10 s alone, then 100 s at 0.752901 = 75,290.1 ms of work; at 110
    //   it has 200,000 - 10,000 - 75,290.1 = 114,709.9 ms left, alone at
    //   speed 1: ends at 110,000 + 114,710 = 224,710 ms.
    let out = run_gandiva(
        packing_jobs(),
        ClusterSpec::uniform("2", 1, 2, "V100", 16_000),
        Default::default(),
        CheckpointModel::Gandiva,
    );
    assert_eq!(
        rows(&out),
        want(&[("A", 0, 224_710, 0), ("D", 0, 30_000, 0), ("B", 10_000, 110_000, 0), ("C", 30_000, 40_000, 0)])
    );
    assert_eq!((metric(&out, "gandiva_packs"), metric(&out, "gandiva_unpacks")), (1.0, 0.0));
    assert_eq!(out.stats.shared_launches, 4, "every 1-GPU job with a memory figure starts as a tenant");

    // A threshold of 1.7 refuses the pair (1.619995 <= 1.7): B waits.
    // - 30: D ends; B (first in rotation) takes GPU 1: 30 + 86.709 = 116.709.
    // - 60: round: C suspends A, which has run a full round (200 - 60 = 140 s
    //   left + 0.1 s), and runs on GPU 0, 60-70; B (started at 30) has not.
    // - 70: C ends; A resumes on GPU 0: 70 + 140.1 = 210.1.
    let opts = GandivaOptions { pack_threshold: 1.7, ..Default::default() };
    let out =
        run_gandiva(packing_jobs(), ClusterSpec::uniform("2", 1, 2, "V100", 16_000), opts, CheckpointModel::Gandiva);
    assert_eq!(
        rows(&out),
        want(&[("A", 0, 210_100, 1), ("D", 0, 30_000, 0), ("B", 30_000, 116_709, 0), ("C", 60_000, 70_000, 0)])
    );
    assert_eq!(metric(&out, "gandiva_packs"), 0.0);
}

#[test]
fn packing_undoes_a_pair_whose_observed_speed_falls_short() {
    // The policy judges pairs by the builtin database; the engine here runs
    // them with a co-location model that gives every tenant 0.4 (a pair
    // sums 0.8 <= 1). One V100, no checkpoint cost: A (200 s) at 0, B (lstm,
    // 100 s) at 10.
    // - 10: B packs with A (the database's 1.619995 > 1); both run at 0.4.
    // - 60: round: observed 0.4 + 0.4 <= 1: the pack is undone, B (the later
    //   start) preempted with 100 - 50 x 0.4 = 80 s left, and the pair is
    //   never packed again. Then time-slicing: B waits, A has run a full
    //   round: B suspends A (10 + 50 x 0.4 = 30 s done, 170 s left), alone.
    // - 120: A suspends B (20 s left); 180: B suspends A (110 s left);
    //   200: B ends; A resumes: 200 + 110 = 310.
    struct Slow;
    impl dlsched::profile::coloc::Interference for Slow {
        fn speed(&self, _: &str, _: &dlsched::job::JobSpec, _: &[&dlsched::job::JobSpec]) -> f64 {
            0.4
        }
    }
    let jobs = vec![
        with_model(rec("A", 0, 1, 200), "autoencoder-ml20m", 512),
        with_model(rec("B", 10, 1, 100), "lstm-wikitext2", 20),
    ];
    let cluster = Cluster::new(ClusterSpec::uniform("1", 1, 1, "V100", 16_000)).unwrap();
    let w = build_workload(jobs, &cluster, PlacementKind::Consolidate.build());
    let coloc = ProfileInterference::new(Arc::new(ProfileDb::builtin()));
    let p = Box::new(Gandiva::new(Default::default(), 1, Some(coloc)));
    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), EngineConfig { sample_interval_ms: 0 })
        .with_interference(Box::new(Slow));
    while sim.step().unwrap().is_some() {
        sim.check_invariants().unwrap();
    }
    let out = sim.finish();
    assert_eq!(rows(&out), want(&[("A", 0, 310_000, 2), ("B", 10_000, 200_000, 2)]));
    assert_eq!((metric(&out, "gandiva_packs"), metric(&out, "gandiva_unpacks")), (1.0, 1.0));
    assert_eq!(metric(&out, "gandiva_time_slices"), 3.0);
}

#[test]
fn migration_moves_a_spread_job_onto_one_node_when_one_frees_up() {
    // 2 nodes x 4 GPUs, Gandiva's 100 ms per suspend.
    // - 0: X (3 GPUs, 100 s) on node 0 (GPUs 0-2; best fit ties to node 0);
    //   Z (3 GPUs, 20 s) on node 1 (GPUs 4-6).
    // - 1: W (2 GPUs, 200 s): no node has 2 free; spread over the freest
    //   nodes: GPU 3 (node 0) and GPU 7 (node 1).
    // - 20: Z ends; node 1 has 3 free: W (181 s left > one round) migrates
    //   there: preempted (181 + 0.1 s left) and relaunched on GPUs 4-5 at
    //   20: ends 20 + 181.1 = 201.1 s, on one node.
    let jobs = || vec![rec("X", 0, 3, 100), rec("Z", 0, 3, 20), rec("W", 1, 2, 200)];
    let spec = ClusterSpec::uniform("2x4", 2, 4, "V100", 16_000);
    let out = run_gandiva(jobs(), spec.clone(), Default::default(), CheckpointModel::Gandiva);
    assert_eq!(rows(&out), want(&[("X", 0, 100_000, 0), ("Z", 0, 20_000, 0), ("W", 1_000, 201_100, 1)]));
    let JobState::Completed(w) = out.jobs.state(out.jobs.specs()[2].id) else { unreachable!() };
    assert_eq!(
        (w.nodes_spanned, w.start.as_ms(), w.waited_ms(out.jobs.specs()[2].submit)),
        (1, 20_000, 0),
        "moved at once, to one node"
    );
    assert_eq!(metric(&out, "gandiva_migrations"), 1.0);
    // Migration off: W stays spread, 1-201.
    let opts = GandivaOptions { migration: false, ..Default::default() };
    let out = run_gandiva(jobs(), spec.clone(), opts, CheckpointModel::Gandiva);
    assert_eq!(rows(&out), want(&[("X", 0, 100_000, 0), ("Z", 0, 20_000, 0), ("W", 1_000, 201_000, 0)]));
    // Spreading off too: W waits for node 1 at 20: 20-220.
    let opts = GandivaOptions { migration: false, spread: false, ..Default::default() };
    let out = run_gandiva(jobs(), spec, opts, CheckpointModel::Gandiva);
    assert_eq!(rows(&out), want(&[("X", 0, 100_000, 0), ("Z", 0, 20_000, 0), ("W", 20_000, 220_000, 0)]));
}

#[test]
fn gandiva_runs_from_the_command_line_and_a_sweep() {
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs.csv");
    // The time-slicing example above, from the CLI, rounds of 60 s.
    std::fs::write(&jobs, "job_id,submit_time,duration,gpu_num\nA,0,100,1\nB,0,70,1\nC,0,30,1\n").unwrap();
    let out = d.path().join("run");
    let o = dlsched(&[
        "simulate",
        "--trace",
        jobs.to_str().unwrap(),
        "--nodes",
        "1",
        "--gpus-per-node",
        "1",
        "--policy",
        "gandiva",
        "--policy-opt",
        "round-s=60",
        "--checkpoint",
        "gandiva",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let got: Vec<(String, String, String)> = r
        .records()
        .map(|x| {
            let x = x.unwrap();
            (x[col("job_id")].to_string(), x[col("end_s")].to_string(), x[col("preemptions")].to_string())
        })
        .collect();
    let ends: Vec<(String, f64, u32)> =
        got.iter().map(|(j, e, p)| (j.clone(), e.parse::<f64>().unwrap(), p.parse().unwrap())).collect();
    assert_eq!(ends, vec![("A".into(), 190.1, 1), ("B".into(), 200.2, 1), ("C".into(), 150.0, 0)]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["policy"], "gandiva");
    // No profile database in a plain trace replay: packing is off, and said so.
    assert_eq!(summary["policy_metrics"]["gandiva_packing_available"], 0.0);
    assert_eq!(summary["policy_metrics"]["gandiva_time_slices"], 2.0);
    // A sweep over the round length.
    let p = d.path().join("e.toml");
    std::fs::write(
        &p,
        "question = \"q\"\n[base]\ntrace = \"jobs.csv\"\npolicy = \"gandiva\"\ncheckpoint = \"gandiva\"\n[sweep]\npolicy_opt.round-s = [30, 60]\n",
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    let mut rounds: Vec<u64> = e
        .runs
        .iter()
        .map(|r| {
            let s = to_run_spec(&r.params, &p).unwrap();
            let PolicySpec::Gandiva(o) = s.policy else { panic!("{:?}", s.policy) };
            assert_eq!(s.checkpoint, CheckpointModel::Gandiva);
            o.round_s
        })
        .collect();
    rounds.sort();
    assert_eq!(rounds, vec![30, 60]);
    // A bad value names the option.
    let o =
        dlsched(&["simulate", "--trace", jobs.to_str().unwrap(), "--policy", "gandiva", "--policy-opt", "round-s=0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("round-s"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn gandiva_packs_with_the_profile_rate_model_on_lab16() {
    // The embedded synthetic workload (500 jobs, load 0.8) on lab16 with
    // --rate-model table: every job has a model, batch and memory figure,
    // so the profile database is there and some 1-GPU jobs pack.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = dlsched(&[
        "simulate",
        "--policy",
        "gandiva",
        "--rate-model",
        "table",
        "--checkpoint",
        "gandiva",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["jobs_completed"], 500);
    assert_eq!(s["policy_metrics"]["gandiva_packing_available"], 1.0);
    assert!(s["policy_metrics"]["gandiva_packs"].as_f64().unwrap() > 0.0, "{}", s["policy_metrics"]);
    assert!(s["colocated_jobs"].as_u64().unwrap() > 0);
}
