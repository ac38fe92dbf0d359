//! Tiresias (`dlas`, `dlas-gpu`, `tiresias-gittins`): the reference's hand
//! examples (`../shared/fidelity/tiresias-philly-103959/SEMANTICS-dlas.md`
//! §11, confirmed there by the Tiresias simulator's output) on 1 node × 4
//! GPUs, the default semantics, a Gittins and a promotion example computed by
//! hand, seeded random workloads under the invariants, and the policy from
//! the command line and a sweep file.

use std::path::Path;

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, RunOutput, Simulation};
use dlsched::experiment::sweep::{Experiment, to_run_spec};
use dlsched::job::JobState;
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::registry::PolicySpec;
use dlsched::policy::tiresias::{Tiresias, TiresiasOptions, kind_rules};
use dlsched::profile::TraceSpeed;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::dlsched;
use crate::common::rec;

/// (trace id, first start s, end s, waited s, preemptions), sorted by id.
type Row = (String, u64, u64, u64, u32);

/// Runs `records` under Tiresias kind `kind` with `opts`, checking every
/// invariant after every instant.
pub fn run_tiresias(
    kind: &str,
    opts: TiresiasOptions,
    records: Vec<TraceRecord>,
    spec: ClusterSpec,
    ckpt: CheckpointModel,
) -> RunOutput {
    use dlsched::policy::build::BuildPolicy;
    opts.validate(kind).unwrap();
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::FirstFit.build());
    let (service, priority) = kind_rules(kind);
    let p = Box::new(Tiresias::new(kind, service, priority, opts, cluster.partitions().len()));
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), cfg).with_checkpoint(ckpt);
    while sim.step().unwrap().is_some() {
        if let Err(e) = sim.check_invariants() {
            panic!("{kind} at {}: {e}", sim.now());
        }
    }
    sim.finish()
}

fn rows(out: &RunOutput) -> Vec<Row> {
    let mut v: Vec<Row> = out
        .jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => (
                s.name.to_string(),
                d.first_start().as_ms() / 1000,
                d.end.as_ms() / 1000,
                d.waited_ms(s.submit) / 1000,
                d.preemptions(),
            ),
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect();
    v.sort();
    v
}

fn want(rows: &[(&str, u64, u64, u64, u32)]) -> Vec<Row> {
    let mut v: Vec<Row> = rows.iter().map(|&(n, a, b, c, d)| (n.to_string(), a, b, c, d)).collect();
    v.sort();
    v
}

fn n1g4() -> ClusterSpec {
    ClusterSpec::uniform("n1g4", 1, 4, "V100", 16384)
}

fn run(kind: &str, opts: TiresiasOptions, records: Vec<TraceRecord>) -> Vec<Row> {
    rows(&run_tiresias(kind, opts, records, n1g4(), CheckpointModel::None))
}

/// §11.1: (id, submit s, GPUs, duration s).
fn example1() -> Vec<TraceRecord> {
    vec![
        rec("0", 0, 2, 8000),
        rec("1", 0, 1, 4000),
        rec("2", 100, 4, 1000),
        rec("3", 200, 1, 500),
        rec("4", 5000, 1, 300),
    ]
}

/// §11.2: P = 10, R = 11, X = 12, Y = 13, Z = 14.
fn example2() -> Vec<TraceRecord> {
    vec![
        rec("10", 0, 2, 10000),
        rec("11", 0, 1, 10000),
        rec("12", 3000, 3, 750),
        rec("13", 3500, 1, 1000),
        rec("14", 3600, 1, 1000),
    ]
}

/// §11.3: G0 = 20, G1 = 21.
fn example3() -> Vec<TraceRecord> {
    vec![rec("20", 0, 2, 5000), rec("21", 1500, 4, 100)]
}

#[test]
fn reference_example_1_fit_first_demotion_preemption_merged_event() {
    // §11.1 (the reference's job.csv, pending_time = our waited):
    // 0: J0 (2) and J1 (1) run. 200: J3 (1) fits ahead of J2 (4): 200-700.
    // 3250 (job jump): J0, J1 reach 3250 s -> Q1; J2 (Q0) takes all 4 GPUs,
    // J0 and J1 are preempted: J2 3250-4250 (waited 3150). 4250: J0 and J1
    // resume (waited 1000 each); J1 ends 4250 + 750 = 5000. 5000: J1's end and
    // J4's arrival are one pass: J4 5000-5300. J0: 4250 + (8000 - 3250 - 750)
    // = 9000.
    let expected = want(&[
        ("0", 0, 9000, 1000, 1),
        ("1", 0, 5000, 1000, 1),
        ("2", 3250, 4250, 3150, 0),
        ("3", 200, 700, 0, 0),
        ("4", 5000, 5300, 0, 0),
    ]);
    assert_eq!(run("dlas", TiresiasOptions::reference(), example1()), expected);
    // The default semantics give the same schedule here: on one node first
    // fit is a count, and no queue holds a waiting job ahead of a running one.
    assert_eq!(run("dlas", TiresiasOptions::default(), example1()), expected);
}

#[test]
fn reference_example_2_running_first_order_inside_q1() {
    // §11.2: at 3250 P (2) and R (1) go to Q1 = [P, R]; X (3) starts, P is
    // preempted, R keeps running; the partition gives Q1 = [R, P]. 3500: Y
    // preempts R. 4000: X ends; Y runs, Z starts, R (first in Q1) resumes,
    // P (2) does not fit. 4500: Y ends, P resumes. R ends 4000 + (10000 -
    // 3500) = 10500 (waited 500); P 4500 + (10000 - 3250) = 11250 (waited 1250).
    let expected = want(&[
        ("10", 0, 11250, 1250, 1),
        ("11", 0, 10500, 500, 1),
        ("12", 3250, 4000, 250, 0),
        ("13", 3500, 4500, 0, 0),
        ("14", 4000, 5000, 400, 0),
    ]);
    assert_eq!(run("dlas", TiresiasOptions::reference(), example2()), expected);
}

#[test]
fn default_order_inside_a_queue_is_submission_order() {
    // §11.2's input, default options (FIFO by submission within a queue):
    // Q1 = [P, R] at 3250 and stays so. 3250: X (3) runs, P (2) preempted, R
    // (1) kept. 3500: Y (1) runs, R preempted. 3600: Z waits. 4000: X ends;
    // Q0: Y, Z (start 4000, 2 left); Q1: P (2) resumes (budget 0), R waits.
    // 4500: Y ends; R resumes. 5000: Z ends (waited 400). P: 3250 s done,
    // 6750 left from 4000 -> 10750 (waited 4000 - 3250 = 750); R: 3500 done,
    // 6500 left from 4500 -> 11000 (waited 1000). Demotions to Q2 at 7950 (P)
    // and 8200 (R) change nothing (3 of 4 GPUs used).
    let expected = want(&[
        ("10", 0, 10750, 750, 1),
        ("11", 0, 11000, 1000, 1),
        ("12", 3250, 4000, 250, 0),
        ("13", 3500, 4500, 0, 0),
        ("14", 4000, 5000, 400, 0),
    ]);
    assert_eq!(run("dlas", TiresiasOptions::default(), example2()), expected);
}

#[test]
fn reference_example_3_dlas_gpu_units_and_the_late_jump() {
    // §11.3, dlas-gpu with the reference's late jump: G0 (2 GPUs) truly
    // crosses 3250 GPU-s at 1625, but the jump recomputed at 1500 is 1500 +
    // ceil((3250 - 1500) / 2) = 2375: G1 runs 2375-2475 (waited 875), G0
    // resumes and ends 2475 + (5000 - 2375) = 5100 (waited 100).
    let late = run("dlas-gpu", TiresiasOptions::reference(), example3());
    assert_eq!(late, want(&[("20", 0, 5100, 100, 1), ("21", 2375, 2475, 875, 0)]));
    // Under dlas (seconds) G0 is demoted at 3250: G1 3250-3350 (waited 1750).
    let dlas = run("dlas", TiresiasOptions::reference(), example3());
    assert_eq!(dlas, want(&[("20", 0, 5100, 100, 1), ("21", 3250, 3350, 1750, 0)]));
    // dlas-gpu at the exact crossing (default): G0 reaches 2 x 1625 = 3250
    // GPU-s at 1625 and is demoted; G1 runs 1625-1725 (waited 125); G0
    // resumes with 5000 - 1625 = 3375 s left: ends 5100 (waited 100).
    let exact = run("dlas-gpu", TiresiasOptions::default(), example3());
    assert_eq!(exact, want(&[("20", 0, 5100, 100, 1), ("21", 1625, 1725, 125, 0)]));
}

#[test]
fn reference_example_1_under_dlas_gpu_demotes_at_a_completion_pass() {
    // §11.4 (the reference's output): J0 (2) reaches 3250 GPU-s at the jump
    // computed at 700: 700 + ceil(2550 / 2) = 1975 (Q1; nothing changes).
    // 3250: J1 (1) reaches 3250 -> Q1 = [J0, J1]; J2 (4) preempts both.
    // J2 is demoted at 3250 + ceil(3250 / 4) = 4063, behind J0 and J1 in Q1:
    // they resume, J2 is preempted. J1 ends 4063 + 750 = 4813 (waited 813).
    // At that completion pass J0 has 2 x 4000 >= 7200 GPU-s: Q2; J2 (Q1)
    // preempts J0 and ends 4813 + 187 = 5000 (waited 3150 + 750 = 3900).
    // 5000: J4 and J0 run; J0 ends 5000 + 4000 = 9000 (waited 813 + 187).
    let expected = want(&[
        ("0", 0, 9000, 1000, 2),
        ("1", 0, 4813, 813, 1),
        ("2", 3250, 5000, 3900, 1),
        ("3", 200, 700, 0, 0),
        ("4", 5000, 5300, 0, 0),
    ]);
    assert_eq!(run("dlas-gpu", TiresiasOptions::reference(), example1()), expected);
}

#[test]
fn reference_example_5_two_whole_cluster_jobs_take_turns() {
    // §11.6: K0 (4, 10000 s) at 0, K1 (4, 10000 s) at 1. 3250: K0 -> Q1, K1
    // runs. 6500: K1 -> Q1 behind the waiting K0: K0 resumes. 10450: K0 ->
    // Q2 (3250 + 3950 = 7200), K1 resumes. 14400: K1 -> Q2 behind K0: K0
    // resumes, ends 14400 + 2800 = 17200 (waited 7200); K1 ends 20000
    // (waited 20000 - 1 - 10000 = 9999).
    let jobs = vec![rec("40", 0, 4, 10000), rec("41", 1, 4, 10000)];
    let expected = want(&[("40", 0, 17200, 7200, 2), ("41", 3250, 20000, 9999, 2)]);
    assert_eq!(run("dlas", TiresiasOptions::reference(), jobs.clone()), expected);
    assert_eq!(run("dlas", TiresiasOptions::default(), jobs), expected);
}

#[test]
fn gittins_index_orders_a_queue_by_expected_completion() {
    // One queue, Δ = 40 GPU-s; every job takes the 4 GPUs. GPU-time samples
    // (the workload's): J1 4 x 10 = 40, J3 4 x 30 = 120, J2 4 x 100 = 400.
    // G(a) = #{a < s <= a+Δ} / (Σ (s - a) over them + #{s > a+Δ} Δ):
    // G(0) = 1 / (40 + 2 x 40) = 1/120; G(20) = 1 / (20 + 2 x 40) = 1/100;
    // G(160) = 0 (no sample in (160, 200]).
    // 0: J2 runs. 40: J1 arrives; J2 has 160 GPU-s, G = 0 < G(0): J1 runs
    // 40-50, J2 preempted. 45: J3 arrives, G(0) = 1/120 < J1's G(20) = 1/100:
    // J1 keeps running. 50: J3 (1/120) before J2 (0): 50-80 (waited 5).
    // 80: J2 resumes with 60 s left: ends 140 (waited 40).
    let jobs = vec![rec("J2", 0, 4, 100), rec("J1", 40, 4, 10), rec("J3", 45, 4, 30)];
    let opts = TiresiasOptions { queues: 1, gittins_delta_s: 40.0, ..Default::default() };
    let g = run("tiresias-gittins", opts.clone(), jobs.clone());
    assert_eq!(g, want(&[("J1", 40, 50, 0, 0), ("J2", 0, 140, 40, 1), ("J3", 50, 80, 5, 0)]));
    // dlas-gpu with the same single queue is FIFO: 0-100, 100-110, 110-140.
    let f = run("dlas-gpu", opts, jobs);
    assert_eq!(f, want(&[("J1", 100, 110, 60, 0), ("J2", 0, 100, 0, 0), ("J3", 110, 140, 65, 0)]));
}

#[test]
fn starvation_promotion_by_hand() {
    // dlas, 2 queues, threshold 100 s, PROMOTEKNOB 1. A (4, 300 s) at 0,
    // B (4, 1000 s) at 150.
    // 0: A runs; 100: A -> Q1 (alone, keeps running). 150: B (Q0) preempts A
    // (A: 150 s of service). 250: B reaches 100 s -> Q1 = [A, B] (submission
    // order); A has waited 100 < 1 x 150: no promotion; A resumes, B
    // preempted. 350: B has waited 100 >= 1 x 100: promoted to Q0 (its
    // counter reset), preempts A (250 s done, 50 left). 450: B's counter
    // reaches 100 -> Q1 = [A, B]; A has waited 100 + 100 = 200 < 250: A
    // resumes, ends 500 (waited 200, 2 preemptions). B resumes at 500 with
    // 1000 - 200 = 800 s left: ends 1300 (waited 100 + 50 = 150).
    let jobs = vec![rec("A", 0, 4, 300), rec("B", 150, 4, 1000)];
    let opts = TiresiasOptions { queues: 2, thresholds_s: vec![100.0], promote_knob: 1.0, ..Default::default() };
    assert_eq!(run("dlas", opts.clone(), jobs.clone()), want(&[("A", 0, 500, 200, 2), ("B", 150, 1300, 150, 2)]));
    // Without promotion: 250: A resumes (150 s left) and ends 400 (waited
    // 100); B, preempted 250-400, resumes with 900 s left: ends 1300 (waited 150).
    let off = TiresiasOptions { promote_knob: 0.0, ..opts };
    assert_eq!(run("dlas", off, jobs), want(&[("A", 0, 400, 100, 1), ("B", 150, 1300, 150, 1)]));
}

/// Runs `records` on lab16 (4 × 4 K80) under `kind` with 2 queues, a
/// 440 GPU-s threshold, PROMOTEKNOB 2 and the Helios checkpoint table,
/// checking the invariants after every instant; fails (rather than hangs)
/// if the run is not over after `cap` instants.
fn run_promoting_with_checkpoints(kind: &str, records: Vec<TraceRecord>, cap: u32) -> RunOutput {
    use dlsched::policy::build::BuildPolicy;
    let opts = TiresiasOptions { queues: 2, thresholds_s: vec![440.0], promote_knob: 2.0, ..Default::default() };
    opts.validate(kind).unwrap();
    let cluster = Cluster::new(ClusterSpec::uniform("lab16", 4, 4, "K80", 12 * 1024)).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::FirstFit.build());
    let (service, priority) = kind_rules(kind);
    let p = Box::new(Tiresias::new(kind, service, priority, opts, cluster.partitions().len()));
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim =
        Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), cfg).with_checkpoint(CheckpointModel::HeliosTable);
    for _ in 0..cap {
        if sim.step().unwrap().is_none() {
            return sim.finish();
        }
        if let Err(e) = sim.check_invariants() {
            panic!("{kind} at {}: {e}", sim.now());
        }
    }
    panic!(
        "{kind}: not over after {cap} instants (at {}, {} of {} jobs done)",
        sim.now(),
        sim.completed(),
        sim.jobs().len()
    );
}

#[test]
fn a_promoted_job_that_gained_nothing_is_not_promoted_again() {
    // Two 16-GPU jobs on 16 GPUs, dlas-gpu, Q0 up to 440 GPU-s (27.5 s on
    // 16 GPUs), PROMOTEKNOB 2, 60 s of checkpoint per 16-GPU preemption.
    // 0: A (3000 s) runs. 10: B (2000 s) waits in Q0. 27.5: A -> Q1, B
    // preempts it (A: 3000 - 27.5 + 60 = 3032.5 s left). 55: B -> Q1 =
    // [A, B]; A has waited 27.5 < 2 x 27.5: A resumes, B preempted (2032.5
    // left). 110: B has waited 55 >= 2 x 27.5: promoted (first time, 2032.5
    // left), preempts A (3032.5 - 55 + 60 = 3037.5 left). 137.5: B -> Q1,
    // A resumes, B preempted (2032.5 - 27.5 + 60 = 2065 left). 192.5: B has
    // waited 55 again, but 2065 >= 2032.5: it gained nothing from its
    // promotion, so it is not promoted again (before, it was, and then every
    // 82.5 s: A ran 55 s and B 27.5 s per cycle, each paying 60 s, and the
    // run never ended). A ends at 137.5 + 3037.5 = 3175; B runs 3175-5240.
    // A waited 27.5 + 27.5 = 55 s; B 17.5 + 55 + 3037.5 = 3110 s.
    let out = run_promoting_with_checkpoints("dlas-gpu", vec![rec("A", 0, 16, 3000), rec("B", 10, 16, 2000)], 1000);
    let got: Vec<(String, u64, u64, u64, u32)> = out
        .jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => {
                (s.name.to_string(), d.first_start().as_ms(), d.end.as_ms(), d.waited_ms(s.submit), d.preemptions())
            }
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect();
    assert_eq!(
        got,
        vec![("A".to_string(), 0, 3_175_000, 55_000, 2), ("B".to_string(), 27_500, 5_240_000, 3_110_000, 2)]
    );
}

#[test]
fn promotion_with_checkpoint_costs_finishes_the_nine_job_trace() {
    // The fuzzed hang (issue 30): 9 jobs of 2-16 GPUs on lab16, 2 queues,
    // 440 GPU-s, PROMOTEKNOB 2, `--checkpoint helios-table`. Before the
    // re-promotion rule the 16- and 8-GPU jobs took turns forever, each turn
    // adding more checkpoint work than it did, and j5-j9 never started.
    let jobs = vec![
        rec("j1", 0, 16, 3000),
        rec("j2", 10, 16, 2000),
        rec("j3", 20, 8, 1500),
        rec("j4", 30, 8, 800),
        rec("j5", 40, 4, 600),
        rec("j6", 50, 16, 2500),
        rec("j7", 60, 2, 400),
        rec("j8", 70, 8, 1200),
        rec("j9", 80, 4, 900),
    ];
    for kind in ["dlas-gpu", "tiresias-gittins"] {
        let out = run_promoting_with_checkpoints(kind, jobs.clone(), 10_000);
        let mut done = 0;
        for (s, st) in out.jobs.iter() {
            let JobState::Completed(d) = st else { panic!("{kind}: {} did not complete: {st:?}", s.name) };
            // At rate 1 a job holds GPUs for its duration plus the table's
            // 7/30/60 s (1, up to 8, more GPUs) per preemption.
            let per = if s.gpus <= 1 {
                7_000
            } else if s.gpus <= 8 {
                30_000
            } else {
                60_000
            };
            assert_eq!(d.attained_ms(), s.duration_ms + per * u64::from(d.preemptions()), "{kind}: {}", s.name);
            done += 1;
        }
        assert_eq!(done, 9, "{kind}");
    }
}

#[test]
fn seeded_random_workloads_keep_every_invariant() {
    use dlsched::cluster::ClusterPreset;
    use dlsched::ids::VcId;
    let mut two_vcs = ClusterSpec::uniform("2vc", 6, 8, "V100", 16384);
    two_vcs.vc_names = vec!["a".into(), "b".into()];
    two_vcs.named_vcs = true;
    for n in &mut two_vcs.nodes[4..] {
        n.vc = VcId(1);
    }
    let clusters = [ClusterPreset::Lab16.spec(), ClusterSpec::uniform("3x8", 3, 8, "V100", 16384), two_vcs];
    let promoting = TiresiasOptions { promote_knob: 2.0, thresholds_s: vec![600.0, 3600.0], ..Default::default() };
    let (mut runs, mut preempting) = (0, 0);
    for spec in clusters {
        for seed in 1..=2u64 {
            for kind in ["dlas", "dlas-gpu", "tiresias-gittins"] {
                for (mode, opts) in [
                    ("default", TiresiasOptions::default()),
                    ("reference", TiresiasOptions::reference()),
                    ("promote", promoting.clone()),
                ] {
                    for ckpt in [CheckpointModel::None, CheckpointModel::HeliosTable] {
                        let cluster = Cluster::new(spec.clone()).unwrap();
                        let recs = crate::common::seeded_two_vc_records(&cluster, seed);
                        let what = format!("{} seed {seed} {kind} {mode} {ckpt:?}", spec.name);
                        // run_tiresias checks the invariants after every instant.
                        let out = run_tiresias(kind, opts.clone(), recs.clone(), spec.clone(), ckpt);
                        for (s, st) in out.jobs.iter() {
                            let JobState::Completed(d) = st else { panic!("{what}: {} unfinished: {st:?}", s.name) };
                            // Trace speed: held GPUs = work + checkpoint overheads.
                            let work = s.duration_ms + ckpt.overhead_ms(s.gpus) * u64::from(d.preemptions());
                            assert_eq!(d.attained_ms(), work, "{what}: {}", s.name);
                            assert_eq!(
                                d.end.since(s.submit),
                                d.waited_ms(s.submit) + d.attained_ms(),
                                "{what}: {}",
                                s.name
                            );
                        }
                        assert_eq!(out.stats.preemptions, out.stats.resumes, "{what}");
                        preempting += usize::from(out.stats.preemptions > 0);
                        runs += 1;
                        // Determinism: the same run, the same jobs.csv bytes.
                        let again = run_tiresias(kind, opts.clone(), recs, spec.clone(), ckpt);
                        let (mut a, mut b) = (Vec::new(), Vec::new());
                        dlsched::metrics::export::write_jobs_csv(&out, &mut a).unwrap();
                        dlsched::metrics::export::write_jobs_csv(&again, &mut b).unwrap();
                        assert!(a == b, "{what}: two runs differ");
                    }
                }
            }
        }
    }
    // At load 1.5 the queues preempt in most runs: the invariants were checked under preemption.
    assert!(preempting * 2 > runs, "{preempting} of {runs} runs preempted");
}

/// (job, first start s, end s, queue delay s, preemptions) from a jobs.csv, sorted.
fn csv_rows(jobs_csv: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(jobs_csv).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let (id, fs, end, q, p) =
        (col("job_id"), col("first_start_s"), col("end_s"), col("queue_delay_s"), col("preemptions"));
    let mut v: Vec<Row> = r
        .records()
        .map(|x| {
            let x = x.unwrap();
            (
                x[id].to_string(),
                x[fs].parse().unwrap(),
                x[end].parse().unwrap(),
                x[q].parse().unwrap(),
                x[p].parse().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn simulate_and_sweep_run_tiresias_with_its_options() {
    // §11.3 from the command line: dlas-gpu with the late jump gives G1 at 2375.
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs.csv");
    std::fs::write(&jobs, "job_id,submit_time,duration,gpu_num\n20,0,5000,2\n21,1500,100,4\n").unwrap();
    let out = d.path().join("run");
    let o = dlsched(&[
        "simulate",
        "--trace",
        jobs.to_str().unwrap(),
        "--nodes",
        "1",
        "--gpus-per-node",
        "4",
        "--policy",
        "dlas-gpu",
        "--policy-opt",
        "late-gpu-jump=true",
        "--policy-opt",
        "count-only=true",
        "--policy-opt",
        "running-first=true",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(csv_rows(&out.join("jobs.csv")), want(&[("20", 0, 5100, 100, 1), ("21", 2375, 2475, 875, 0)]));
    // A bad option value names the option.
    let o = dlsched(&[
        "simulate",
        "--trace",
        jobs.to_str().unwrap(),
        "--policy",
        "dlas",
        "--policy-opt",
        "thresholds-s=7200,3250",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("thresholds-s") && e.contains("increasing"), "{e}");
    // A sweep over the three kinds and an option.
    let p = d.path().join("e.toml");
    std::fs::write(
        &p,
        "question = \"q\"\n[base]\ntrace = \"jobs.csv\"\nnodes = 1\ngpus_per_node = 4\npolicy_opt.late-gpu-jump = true\n[sweep]\npolicy = [\"dlas\", \"dlas-gpu\", \"tiresias-gittins\"]\n",
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    let mut kinds: Vec<&str> = e
        .runs
        .iter()
        .map(|r| {
            let s = to_run_spec(&r.params, &p).unwrap();
            let o = match &s.policy {
                PolicySpec::Dlas(o) | PolicySpec::DlasGpu(o) | PolicySpec::TiresiasGittins(o) => o,
                other => panic!("{other:?}"),
            };
            assert!(o.late_gpu_jump && !o.count_only);
            s.policy.kind()
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds, vec!["dlas", "dlas-gpu", "tiresias-gittins"]);
}
