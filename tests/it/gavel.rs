//! Gavel: the max-min LP, FIFO and max-sum allocations computed by hand,
//! water-filling and the max-sum flow against the LP on random instances, round-by-round schedules computed by
//! hand, and seeded random workloads under the invariants (one and two GPU
//! types, VC partitions).

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, RunOutput, Simulation};
use dlsched::ids::VcId;
use dlsched::job::JobState;
use dlsched::policy::gavel::{
    Gavel, GavelObjective, GavelOptions, fifo_allocation, max_min_lp, max_sum_allocation, max_sum_gpus,
    normalised_weights, values, water_fill,
};
use dlsched::policy::placement::PlacementKind;
use dlsched::profile::TraceSpeed;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;
use rand::{Rng, SeedableRng};

use crate::common::dlsched;
use crate::common::rec;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn max_min_lp_on_two_types_matches_the_hand_solution() {
    // Types (K80: 1 GPU, V100: 1 GPU), N = 2; three 1-GPU jobs with relative
    // throughputs a = (0.25, 1), b = (0.5, 1), c = (1, 1).
    // prop_m = (thr_K80 + thr_V100) / 2: a 0.625, b 0.75, c 1, so the weights
    // thr / prop are a (0.4, 1.6), b (2/3, 4/3), c (1, 1).
    // Guess: a only on V100 (p), c only on K80 (q), b the rest of each:
    // a = 1.6 p, c = q, b = 2/3 (1 - q) + 4/3 (1 - p); all equal to t gives
    // p = t / 1.6, q = t, 2 - 1.5 t = t, t = 0.8: p = 0.5, q = 0.8,
    // b = (0.2, 0.5). Duals: b on both types gives pi_V100 = 2 pi_K80;
    // y_a = 1.25 pi, y_b = 1.5 pi, y_c = pi, sum 1: pi_K80 = 4/15, and
    // pi_K80 + pi_V100 = 0.8 = t, so t* = 0.8. Any allocation with every value
    // >= 0.8 has sum y_m v_m <= 0.8, so every value is exactly 0.8 and the
    // second LP (max sum at t*) keeps this X, which complementary slackness
    // makes unique (a on K80 and c on V100 have negative reduced cost).
    let cap = [1, 1];
    let thr = vec![vec![0.25, 1.0], vec![0.5, 1.0], vec![1.0, 1.0]];
    let x = max_min_lp(&cap, &[1, 1, 1], &thr).unwrap();
    let want = [[0.0, 0.5], [0.2, 0.5], [0.8, 0.0]];
    for (m, row) in want.iter().enumerate() {
        for (j, &w) in row.iter().enumerate() {
            assert!(close(x[m][j], w, 1e-4), "X[{m}][{j}] = {} want {w}: {x:?}", x[m][j]);
        }
    }
    let v = values(&normalised_weights(&cap, &[1, 1, 1], &thr), &x);
    assert!(v.iter().all(|&v| close(v, 0.8, 1e-4)), "{v:?}");
}

#[test]
fn max_min_lp_gives_spare_capacity_to_jobs_above_the_minimum() {
    // K80 2 GPUs, V100 2 GPUs, N = 4; same throughputs as above. prop_m =
    // (2 thr_K80 + 2 thr_V100) / 4: the same weights a (0.4, 1.6), b (2/3,
    // 4/3), c (1, 1). c's value is at most 1 (X row sum <= 1, weights 1), so
    // t* = 1 with c = 1. The second LP maximises the sum: a and b take the two
    // V100s (gains 1.6 and 4/3 over 1 for c), c takes a K80:
    // X = a (0, 1), b (0, 1), c (1, 0), values 1.6, 4/3, 1.
    let cap = [2, 2];
    let thr = vec![vec![0.25, 1.0], vec![0.5, 1.0], vec![1.0, 1.0]];
    let x = max_min_lp(&cap, &[1, 1, 1], &thr).unwrap();
    let want = [[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]];
    for (m, row) in want.iter().enumerate() {
        for (j, &w) in row.iter().enumerate() {
            assert!(close(x[m][j], w, 1e-4), "X[{m}][{j}] = {} want {w}: {x:?}", x[m][j]);
        }
    }
}

#[test]
fn water_filling_by_hand_and_fifo_by_hand() {
    // 4 GPUs, jobs of 1, 2, 4 GPUs: share 4/3 >= 1, so the 1-GPU job gets 1
    // (X = 1); 3 GPUs left for two jobs: 1.5 each, X = 1.5/2 = 0.75 and
    // 1.5/4 = 0.375.
    assert_eq!(water_fill(4, &[1, 2, 4]), vec![1.0, 0.75, 0.375]);
    // Enough for all: everyone X = 1.
    assert_eq!(water_fill(8, &[1, 2, 4]), vec![1.0, 1.0, 1.0]);
    // FIFO on (K80 2, V100 2): job 0 (1 GPU) takes its fastest type V100,
    // job 1 (2 GPUs) fits only K80, job 2 (1 GPU) V100, job 3 (1 GPU) fits
    // nowhere: the pass stops there, and job 4 gets nothing either (strict).
    let thr = vec![vec![0.5, 1.0]; 5];
    let x = fifo_allocation(&[2, 2], &[1, 2, 1, 1, 1], &thr);
    assert_eq!(x, vec![vec![0.0, 1.0], vec![1.0, 0.0], vec![0.0, 1.0], vec![0.0, 0.0], vec![0.0, 0.0]]);
}

#[test]
fn water_filling_attains_both_lp_optima_on_random_instances() {
    // On one GPU type, water-filling must be feasible and reach the LP's
    // minimum value (phase 1) and its total (phase 2).
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
    for case in 0..40 {
        let cap: u32 = rng.gen_range(1..=16);
        let m = rng.gen_range(1..=8);
        let gpus: Vec<u32> = (0..m).map(|_| [1, 1, 2, 4, 8][rng.gen_range(0..5)].min(cap)).collect();
        let thr = vec![vec![1.0]; m];
        let lp = max_min_lp(&[cap], &gpus, &thr).unwrap();
        let wf: Vec<Vec<f64>> = water_fill(cap, &gpus).into_iter().map(|x| vec![x]).collect();
        let w = normalised_weights(&[cap], &gpus, &thr);
        let (vl, vw) = (values(&w, &lp), values(&w, &wf));
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let sum = |v: &[f64]| v.iter().sum::<f64>();
        assert!(close(min(&vl), min(&vw), 1e-4), "case {case}: min {vl:?} vs {vw:?}");
        assert!(close(sum(&vl), sum(&vw), 1e-3), "case {case}: sum {vl:?} vs {vw:?}");
        let used: f64 = wf.iter().zip(&gpus).map(|(x, &g)| x[0] * f64::from(g)).sum();
        assert!(used <= f64::from(cap) + 1e-6 && wf.iter().all(|x| (0.0..=1.0).contains(&x[0])), "case {case}");
    }
}

#[test]
fn max_sum_on_two_types_matches_the_hand_solution() {
    // Types A (2 GPUs) and B (1 GPU); jobs (GPUs; steps/s on A, B):
    // j0 (1; 4, 1), j1 (1; 3, 2), j2 (2; 6, cannot run on B).
    // Claim: X = j0 (1, 0), j1 (0, 1), j2 (0.5, 0), total 4 + 2 + 3 = 9.
    // Dual certificate (prices per GPU pi_A = 3, pi_B = 1.5; per job row
    // u0 = 1, u1 = 0.5, u2 = 0): every thr_mj <= u_m + s_m pi_j, with
    // equality exactly on the three positive entries (j0 on A: 4 = 1 + 3;
    // j1 on B: 2 = 0.5 + 1.5; j2 on A: 6 = 0 + 2 * 3) and strict elsewhere
    // (j0 on B: 1 < 2.5; j1 on A: 3 < 3.5), and the dual value
    // 1 + 0.5 + 2 * 3 + 1 * 1.5 = 9 equals the primal's: optimal. With the
    // strict entries at 0 the rest is max 4a + 6e, a <= 1, a + 2e <= 2,
    // e <= 1: a = 1, e = 0.5 only, so the optimum is unique.
    let (cap, gpus) = ([2, 1], [1, 1, 2]);
    let thr = vec![vec![4.0, 1.0], vec![3.0, 2.0], vec![6.0, 0.0]];
    assert_eq!(max_sum_gpus(&cap, &gpus, &thr), vec![vec![1, 0], vec![0, 1], vec![1, 0]]);
    assert_eq!(max_sum_allocation(&cap, &gpus, &thr), vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.5, 0.0]]);
}

#[test]
fn max_sum_differs_from_max_min_where_it_should_and_shares_ties() {
    // One type of 1 GPU, two 1-GPU jobs of 2 and 1 steps/s: max-sum gives
    // the GPU to the faster job; max-min (water-filling) halves it.
    let x = max_sum_allocation(&[1], &[1, 1], &[vec![2.0], vec![1.0]]);
    assert_eq!(x, vec![vec![1.0], vec![0.0]]);
    assert_eq!(water_fill(1, &[1, 1]), vec![0.5, 0.5]);
    // One type of 2 GPUs, jobs of 1, 1 and 2 GPUs at 1 step/s each: max-sum
    // earns 1 per GPU-second from a 1-GPU job and 0.5 from the 2-GPU one,
    // so the 1-GPU jobs get it all; water-filling gives 2/3, 2/3, 1/3.
    let x = max_sum_allocation(&[2], &[1, 1, 2], &[vec![1.0], vec![1.0], vec![1.0]]);
    assert_eq!(x, vec![vec![1.0], vec![1.0], vec![0.0]]);
    let wf = water_fill(2, &[1, 1, 2]);
    assert!(close(wf[0], 2.0 / 3.0, 1e-9) && close(wf[2], 1.0 / 3.0, 1e-9), "{wf:?}");
    // Where they agree: five identical 1-GPU jobs on 4 GPUs tie exactly;
    // the vertex gives 4 of them the GPUs, our rule shares the 4 GPUs
    // equally, 0.8 each, which is also the water-filling.
    let thr = vec![vec![1.5]; 5];
    let y = max_sum_gpus(&[4], &[1; 5], &thr);
    assert_eq!(y.iter().map(|r| r[0]).sum::<u32>(), 4);
    let x = max_sum_allocation(&[4], &[1; 5], &thr);
    assert!(x.iter().all(|r| r[0] == 0.8), "{x:?}");
    assert_eq!(water_fill(4, &[1; 5]), vec![0.8; 5]);
    // Two types, a class of three identical jobs and a faster other: the
    // class shares what the vertex gives it on each type, row by row.
    let thr = vec![vec![1.0, 3.0], vec![1.0, 3.0], vec![2.0, 8.0], vec![1.0, 3.0]];
    let x = max_sum_allocation(&[2, 2], &[1, 1, 1, 1], &thr);
    // j2 gains most on the second type (8), the class fills its other GPU
    // (3) and both GPUs of the first type (1 each): class totals (2, 1).
    assert_eq!(x[2], vec![0.0, 1.0]);
    for m in [0, 1, 3] {
        assert!(close(x[m][0], 2.0 / 3.0, 1e-9) && close(x[m][1], 1.0 / 3.0, 1e-9), "{x:?}");
    }
}

#[test]
fn max_sum_flow_attains_the_lp_optimum_on_random_instances() {
    // The LP itself (Clarabel through good_lp): the flow's allocation must
    // be feasible, whole GPUs per type before the class averaging, and reach
    // the LP's optimum value.
    use good_lp::{Expression, ProblemVariables, Solution, SolverModel, variable};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(34);
    for case in 0..60 {
        let k = rng.gen_range(1..=3);
        let cap: Vec<u32> = (0..k).map(|_| rng.gen_range(1..=12)).collect();
        let m = rng.gen_range(1..=10);
        let gpus: Vec<u32> = (0..m).map(|_| [1, 1, 2, 4, 8][rng.gen_range(0..5)]).collect();
        // Throughputs from a few levels, so that ties occur; 0 where the
        // type is too small or at random.
        let thr: Vec<Vec<f64>> = (0..m)
            .map(|i| {
                (0..k)
                    .map(|j| {
                        if gpus[i] > cap[j] || rng.gen_range(0..6) == 0 {
                            0.0
                        } else {
                            [0.5, 1.0, 1.5, 4.0][rng.gen_range(0..4)]
                        }
                    })
                    .collect()
            })
            .collect();
        let y = max_sum_gpus(&cap, &gpus, &thr);
        let x = max_sum_allocation(&cap, &gpus, &thr);
        for i in 0..m {
            let row: u32 = y[i].iter().sum();
            assert!(row <= gpus[i], "case {case}: job {i} gets {row} GPUs: {y:?}");
            assert!(x[i].iter().sum::<f64>() <= 1.0 + 1e-9, "case {case}: {x:?}");
            for j in 0..k {
                assert!(thr[i][j] > 0.0 || y[i][j] == 0, "case {case}: a job on a type it cannot use");
            }
        }
        for j in 0..k {
            let used: f64 = (0..m).map(|i| x[i][j] * f64::from(gpus[i])).sum();
            assert!(used <= f64::from(cap[j]) + 1e-6, "case {case}: type {j} over: {used}");
        }
        let total = |x: &[Vec<f64>]| -> f64 {
            x.iter().zip(&thr).map(|(r, t)| r.iter().zip(t).map(|(a, b)| a * b).sum::<f64>()).sum()
        };
        let mut vars = ProblemVariables::new();
        let xs: Vec<Vec<_>> =
            (0..m).map(|_| (0..k).map(|_| vars.add(variable().min(0.0).max(1.0))).collect()).collect();
        let obj: Expression = (0..m).flat_map(|i| (0..k).map(move |j| (i, j))).map(|(i, j)| thr[i][j] * xs[i][j]).sum();
        let mut model = vars.maximise(obj).using(good_lp::clarabel);
        for row in &xs {
            let e: Expression = row.iter().copied().sum();
            model = model.with(e.leq(1.0));
        }
        for j in 0..k {
            let e: Expression = (0..m).map(|i| f64::from(gpus[i]) * xs[i][j]).sum();
            model = model.with(e.leq(f64::from(cap[j])));
        }
        let sol = model.solve().unwrap();
        let lp: Vec<Vec<f64>> = xs.iter().map(|r| r.iter().map(|&v| sol.value(v)).collect()).collect();
        let (f, l) = (total(&x), total(&lp));
        assert!(close(f, l, 1e-5 * l.max(1.0)), "case {case}: flow {f} vs LP {l}");
    }
}

/// (trace id, first start s, end s, waited s, preemptions) of every job.
pub(crate) type Row = (String, u64, u64, u64, u32);

/// Runs `records` under Gavel at trace speed with checkpoint model `ckpt`,
/// checking every invariant after every instant.
pub(crate) fn run_gavel_ckpt(
    records: Vec<TraceRecord>,
    spec: ClusterSpec,
    opts: GavelOptions,
    objective: GavelObjective,
    ckpt: CheckpointModel,
) -> RunOutput {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::Consolidate.build());
    let p = Box::new(Gavel::new(opts, objective, &cluster, None));
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), cfg).with_checkpoint(ckpt);
    while sim.step().unwrap().is_some() {
        if let Err(e) = sim.check_invariants() {
            panic!("at {}: {e}", sim.now());
        }
    }
    sim.finish()
}

fn run_gavel(records: Vec<TraceRecord>, spec: ClusterSpec, opts: GavelOptions, objective: GavelObjective) -> RunOutput {
    run_gavel_ckpt(records, spec, opts, objective, CheckpointModel::None)
}

fn rows(out: &RunOutput) -> Vec<Row> {
    out.jobs
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
        .collect()
}

fn want(rows: &[(&str, u64, u64, u64, u32)]) -> Vec<Row> {
    rows.iter().map(|&(n, a, b, c, d)| (n.to_string(), a, b, c, d)).collect()
}

fn opts(round: f64, reset: f64) -> GavelOptions {
    GavelOptions { round, reset_interval: reset, ..GavelOptions::default() }
}

#[test]
fn max_min_rounds_by_hand() {
    // One node of 2 GPUs, rounds of 100 s, allocation recomputed whenever
    // the job set changed. A, B, C: 1 GPU, 300/300/200 s, all at 0.
    // Counters start at round/2 = 50 s; worker time is their sum.
    // t=0: X = 2/3 each (water-filling); priorities X/(50/150) tie -> id
    //   order: A, B run.
    // t=100: job times A 150, B 150, C 50; worker 150 + 200 = 350;
    //   priority C 2/3/(50/350) = 4.67 > A = B 1.56 -> C, A; B preempted.
    // t=200: A 250, B 150, C 150; worker 350 + 200 = 550; B = C 2.44 > A
    //   1.47 -> B, C (id order); A preempted (done 200 of 300).
    // t=300: C completes (ran 100-300); at the boundary the job set changed:
    //   new X = 1, 1 for A and B, both run: A resumes (100 s left), B keeps
    //   its GPU (done 100 + 100, 100 left); both end at 400.
    // A: 0-400, waited 200-300; B: 0-400, waited 100-200; C: 100-300, waited 0-100.
    let recs = vec![rec("A", 0, 1, 300), rec("B", 0, 1, 300), rec("C", 0, 1, 200)];
    let out =
        run_gavel(recs, ClusterSpec::uniform("1x2", 1, 2, "V100", 16384), opts(100.0, 0.0), GavelObjective::MaxMin);
    assert_eq!(rows(&out), want(&[("A", 0, 400, 100, 1), ("B", 0, 400, 100, 1), ("C", 100, 300, 100, 0)]));
}

#[test]
fn keep_counters_by_hand() {
    // One GPU, rounds of 100 s, allocation recomputed whenever the job set
    // changed. A, B: 1 GPU, 1,000 s, at 0; C: 1 GPU, 100 s, at 250.
    // Both ways alike until 300: X = 1/2 each, counters 50, worker 100;
    // t=0 A runs (tie, id order); t=100 B (2 > 0.67); t=200 tie, A runs.
    // Gavel's reset at 300 (C arrived): deficits += X·300 − (time − 50): A
    // 150 − 200 = −50, B 150 − 100 = 50, C 0; all counters 50, worker 150,
    // X = 1/3 each: priorities tie at 1, deficits order B (runs 300-400);
    // t=400: A = C = (1/3) / (50/250) > B, deficit C 0 > A −50: C runs
    // 400-500.
    let recs = || vec![rec("A", 0, 1, 1000), rec("B", 0, 1, 1000), rec("C", 250, 1, 100)];
    let spec = || ClusterSpec::uniform("1x1", 1, 1, "V100", 16384);
    let c_row = |out: &RunOutput| rows(out).into_iter().find(|r| r.0 == "C").unwrap();
    let out = run_gavel(recs(), spec(), opts(100.0, 0.0), GavelObjective::MaxMin);
    assert_eq!(c_row(&out), ("C".to_string(), 400, 500, 150, 0));
    // Kept counters: worker time 100 (two arrivals) + 300 run + 50 (C's
    // arrival) = 450 at 300, A 250, B 150, C 50; with X = 1/3 the
    // priorities are A 0.6, B 1, C 3: C runs 300-400.
    let keep = GavelOptions { keep_counters: true, ..opts(100.0, 0.0) };
    let out = run_gavel(recs(), spec(), keep, GavelObjective::MaxMin);
    assert_eq!(c_row(&out), ("C".to_string(), 300, 400, 50, 0));
}

#[test]
fn fifo_rounds_by_hand_with_and_without_the_reset_interval() {
    // One node of 2 GPUs, rounds of 100 s. A (0 s, 1 GPU, 150 s), B (10 s,
    // 1 GPU, 100 s), C (20 s, 1 GPU, 300 s).
    let recs = || vec![rec("A", 0, 1, 150), rec("B", 10, 1, 100), rec("C", 20, 1, 300)];
    let spec = || ClusterSpec::uniform("1x2", 1, 2, "V100", 16384);
    // Reset interval 250 s: t=0 X_A = 1, A runs. t=100: no reset (100 < 250
    // and A runs), B and C are in no allocation: priority 0, FIFO skips them
    // (one GPU idles). t=150: A completes, the round's only job: the round
    // ends, nothing runs, so the allocation is recomputed (our reading):
    // X_B = X_C = 1, both start at 150: B 150-250, C 150-450.
    let out = run_gavel(recs(), spec(), opts(100.0, 250.0), GavelObjective::Fifo);
    assert_eq!(rows(&out), want(&[("A", 0, 150, 0, 0), ("B", 150, 250, 140, 0), ("C", 150, 450, 130, 0)]));
    // Reset interval 0: t=100: X = A 1, B 1 (2 GPUs), C none (FIFO stops):
    // B starts at 100. t=150: A completes, B still runs: the round goes on.
    // t=200: B completes, the round ends; X_C = 1: C 200-500.
    let out = run_gavel(recs(), spec(), opts(100.0, 0.0), GavelObjective::Fifo);
    assert_eq!(rows(&out), want(&[("A", 0, 150, 0, 0), ("B", 100, 200, 90, 0), ("C", 200, 500, 180, 0)]));
}

/// Two types (4 nodes K80 and 2 of V100, 4 GPUs each) in two VCs, or one.
pub(crate) fn hetero(vcs: bool) -> ClusterSpec {
    let mut spec = ClusterSpec::uniform("het", 6, 4, "K80", 12288);
    for n in &mut spec.nodes[4..] {
        n.gpu_type = "V100".into();
        n.gpu_mem_mib = 16384;
    }
    if vcs {
        spec.vc_names = vec!["a".into(), "b".into()];
        spec.named_vcs = true;
        for i in [1, 5] {
            spec.nodes[i].vc = VcId(1);
        }
    }
    spec
}

/// (job id, first start s, end s, preemptions) from a run's `jobs.csv`.
fn jobs_csv(dir: &std::path::Path) -> Vec<(String, String, String, String)> {
    let text = std::fs::read_to_string(dir.join("jobs.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (id, fs, end, pre) = (col("job_id"), col("first_start_s"), col("end_s"), col("preemptions"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[id].to_string(), f[fs].to_string(), f[end].to_string(), f[pre].to_string())
        })
        .collect()
}

#[test]
fn gavel_runs_from_the_cli_and_a_sweep_with_its_options() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.csv");
    std::fs::write(&jobs, "job_id,submit_time,duration,gpu_num\nA,0,300,1\nB,0,300,1\nC,0,200,1\n").unwrap();
    let out = dir.path().join("run");
    let o = dlsched(&[
        "simulate",
        "--trace",
        jobs.to_str().unwrap(),
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
        "--policy",
        "gavel",
        "--policy-opt",
        "round=100",
        "--policy-opt",
        "reset-interval=0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The schedule of `max_min_rounds_by_hand`, through the platform.
    let s = |a: &str, b: &str, c: &str, d: &str| (a.to_string(), b.to_string(), c.to_string(), d.to_string());
    assert_eq!(jobs_csv(&out), vec![s("A", "0", "400", "1"), s("B", "0", "400", "1"), s("C", "100", "300", "0")]);
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(summary.contains("gavel_unit_throughput_jobs"), "{summary}");
    // A bad value names the option.
    let o =
        dlsched(&["simulate", "--trace", jobs.to_str().unwrap(), "--policy", "gavel-fifo", "--policy-opt", "round=0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("round"), "{err}");
    // A sweep over the round length.
    let toml = dir.path().join("g.toml");
    std::fs::write(
        &toml,
        "question = \"gavel rounds\"\n[base]\ntrace = \"jobs.csv\"\nnodes = 1\ngpus_per_node = 2\n[sweep]\npolicy = [\"gavel\", \"gavel-fifo\"]\npolicy_opt.round = [100.0, 50.0]\n",
    )
    .unwrap();
    let sweep_out = dir.path().join("sweep");
    let o = dlsched(&["sweep", toml.to_str().unwrap(), "--out", sweep_out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
