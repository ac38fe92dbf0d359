//! Round skipping (issue 30): the round-based policies (Gavel, LAS,
//! Gandiva) skip the rounds that provably decide nothing. The schedule must
//! be the one of every round run: each policy is run with skipping on and
//! off over seeded workloads (long jobs included, so that rounds are
//! skipped) and the two `jobs.csv` compared byte for byte; hand-made cases
//! pin the counts of rounds and timers that follow from the rules.

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, RunOutput, Simulation};
use dlsched::ids::VcId;
use dlsched::policy::Policy;
use dlsched::policy::gandiva::{Gandiva, GandivaOptions};
use dlsched::policy::gavel::{Gavel, GavelObjective, GavelOptions, GavelSolver};
use dlsched::policy::las::{Las, LasOptions, LasService};
use dlsched::policy::placement::PlacementKind;
use dlsched::profile::TraceSpeed;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::{mix, rec};

/// Runs `records` on `spec` under the policy `make` builds (given the
/// cluster), checking every invariant after every instant.
fn run(
    records: &[TraceRecord],
    spec: &ClusterSpec,
    ckpt: CheckpointModel,
    make: &dyn Fn(&Cluster) -> Box<dyn Policy>,
) -> RunOutput {
    let cluster = Cluster::new(spec.clone()).unwrap();
    let w = build_workload(records.to_vec(), &cluster, PlacementKind::Consolidate.build());
    let p = make(&cluster);
    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), EngineConfig { sample_interval_ms: 0 })
        .with_checkpoint(ckpt);
    while sim.step().unwrap().is_some() {
        if let Err(e) = sim.check_invariants() {
            panic!("at {}: {e}", sim.now());
        }
    }
    sim.finish()
}

fn jobs_csv(out: &RunOutput) -> String {
    let mut b = Vec::new();
    dlsched::metrics::export::write_jobs_csv(out, &mut b).unwrap();
    String::from_utf8(b).unwrap()
}

/// A seeded workload of `n` jobs on `cluster`: arrivals over a few hours,
/// GPU counts up to the largest partition's (halved, so that jobs fit a
/// type), durations from minutes to months (the long ones make rounds
/// skippable), VCs `a` and `b` when the cluster has them.
fn workload(cluster: &Cluster, n: usize, seed: u64) -> Vec<TraceRecord> {
    let max = cluster.partitions().iter().map(|p| p.gpus_total).min().unwrap().max(2) / 2;
    (0..n)
        .map(|i| {
            let x = mix(seed * 1_000_003 + i as u64);
            let submit = x % 20_000;
            let gpus = [1, 1, 1, 2, 4, 8][(x >> 20) as usize % 6].min(max);
            let duration = match (x >> 30) % 4 {
                0 => 60 + (x >> 40) % 3_000,
                1 => 3_600 + (x >> 40) % 86_400,
                2 => 100_000 + (x >> 40) % 400_000,
                _ => 100 + (x >> 40) % 900,
            };
            let mut r = rec(&format!("j{i}"), submit, gpus, duration);
            if cluster.partitions().len() > 1 {
                r.extra_mut().vc = Some(if i % 3 == 0 { "b" } else { "a" }.to_string());
            }
            r
        })
        .collect()
}

fn two_vcs() -> ClusterSpec {
    let mut s = ClusterSpec::uniform("2vc", 4, 4, "V100", 16384);
    s.vc_names = vec!["a".into(), "b".into()];
    s.named_vcs = true;
    for n in &mut s.nodes[2..] {
        n.vc = VcId(1);
    }
    s
}

/// Every case: (cluster, workload), lab16, two VCs and two GPU types.
fn cases() -> Vec<(ClusterSpec, Vec<TraceRecord>)> {
    let mut out = Vec::new();
    for spec in [ClusterPreset::Lab16.spec(), two_vcs(), crate::gavel::hetero(false), crate::gavel::hetero(true)] {
        let cluster = Cluster::new(spec.clone()).unwrap();
        for seed in 1..=3u64 {
            for n in [3, 12, 40] {
                out.push((spec.clone(), workload(&cluster, n, seed + 10 * n as u64)));
            }
        }
    }
    out
}

/// Runs `make(skip)` with skipping on and off on every case; the jobs.csv
/// and the policy metrics must be identical. Returns the timers (on, off)
/// summed over the cases. (A skipping run may take a timer that a run
/// round by round does not: one asked for far ahead that an arrival or a
/// completion made moot; at most one per such event.)
fn same_schedule(what: &str, make: &dyn Fn(&Cluster, bool) -> Box<dyn Policy>) -> (u64, u64) {
    let (mut t_on, mut t_off) = (0, 0);
    for (k, (spec, recs)) in cases().into_iter().enumerate() {
        let ckpt = if k % 2 == 0 { CheckpointModel::None } else { CheckpointModel::HeliosTable };
        let on = run(&recs, &spec, ckpt, &|c| make(c, true));
        let off = run(&recs, &spec, ckpt, &|c| make(c, false));
        let case = format!("{what} case {k} ({}, {} jobs)", spec.name, recs.len());
        assert_eq!(jobs_csv(&on), jobs_csv(&off), "{case}: the schedules differ");
        assert_eq!(on.policy_metrics, off.policy_metrics, "{case}");
        assert_eq!(on.stats.preemptions, off.stats.preemptions, "{case}");
        t_on += on.stats.timers;
        t_off += off.stats.timers;
    }
    (t_on, t_off)
}

#[test]
fn gavel_skips_only_rounds_that_decide_nothing() {
    for objective in [GavelObjective::MaxMin, GavelObjective::Fifo, GavelObjective::MaxSum] {
        let (on, off) = same_schedule(&format!("{objective:?}"), &|c, skip| {
            Box::new(Gavel::new(GavelOptions::default(), objective, c, None).with_round_skipping(skip))
        });
        assert!(on < off, "{objective:?}: {on} timers skipping, {off} round by round");
    }
}

#[test]
fn las_skips_only_rounds_that_decide_nothing() {
    for service in [LasService::GpuTime, LasService::Time] {
        for work_conserving in [true, false] {
            let (on, off) = same_schedule(&format!("las {service:?} {work_conserving}"), &|c, skip| {
                let o = LasOptions { service, work_conserving, ..LasOptions::default() };
                Box::new(Las::new(o, o.placement.build(), c.partitions().len()).with_round_skipping(skip))
            });
            assert!(on < off, "{service:?} {work_conserving}: {on} timers skipping, {off} round by round");
        }
    }
}

#[test]
fn gandiva_skips_only_rounds_that_decide_nothing() {
    // Without spreading, a waiting job that fits no node while the
    // partition is not over-subscribed makes rounds that decide nothing.
    let mut fewer = false;
    for spread in [true, false] {
        let (on, off) = same_schedule(&format!("gandiva spread={spread}"), &|c, skip| {
            let o = GandivaOptions { spread, ..GandivaOptions::default() };
            Box::new(Gandiva::new(o, c.partitions().len(), None).with_round_skipping(skip))
        });
        fewer |= on < off;
    }
    assert!(fewer, "no round was ever skipped");
}

#[test]
fn gavel_one_long_job_costs_one_timer_not_one_per_round() {
    // One 1-GPU job of 10^9 s on lab16 (one GPU type), rounds of 360 s.
    // t = 0: the arrival starts a round (allocation X = 1; the job
    // launches) and a timer at 360 s. From 360 s on every active job runs
    // on the partition's one type, so no round can change anything until
    // the completion: no more timers. Gavel still counts the rounds: the
    // boundaries 360 k s < 10^9 s, k = 0 .. 2,777,777 (10^9 / 360 =
    // 2,777,777.8), 2,777,778 rounds; every round run one by one takes a
    // timer at k = 1 .. 2,777,778 (the last one fires after the completion;
    // skipping, the completion ends the round, so no timer is asked for).
    let recs = vec![rec("A", 0, 1, 1_000_000_000)];
    let spec = ClusterPreset::Lab16.spec();
    let go = |skip: bool| {
        run(&recs, &spec, CheckpointModel::None, &|c| {
            Box::new(Gavel::new(GavelOptions::default(), GavelObjective::MaxMin, c, None).with_round_skipping(skip))
        })
    };
    let on = go(true);
    assert_eq!(on.stats.timers, 1);
    let rounds = |o: &RunOutput| o.policy_metrics.iter().find(|m| m.0 == "gavel_rounds").unwrap().1;
    assert_eq!(rounds(&on), 2_777_778.0);
    let off = go(false);
    assert_eq!(off.stats.timers, 2_777_778);
    assert_eq!(rounds(&off), 2_777_778.0);
    assert_eq!(jobs_csv(&on), jobs_csv(&off));
}

#[test]
fn las_skips_to_the_boundary_where_the_ranking_changes() {
    // One node of 2 GPUs, GPU-time service, rounds of 360 s. B (2 GPUs,
    // 100,000 s) runs alone from 0. A (1 GPU, 7,000 s) arrives at 3,600 s,
    // a boundary: A (service 0) ranks before B (7,200,000 GPU-ms), A is
    // selected (1 GPU of 2 left), B (2 GPUs) is not: B is preempted, A
    // starts. At 3,960 s A has 360,000 GPU-ms, B still 7,200,000: the
    // selection is the same and B cannot be placed (1 GPU free), so the
    // round decides nothing. A's service grows 1 GPU-ms per ms: it passes
    // B's after 7,200,000 − 360,000 + 1 = 6,840,001 ms, at 10,800,001 ms,
    // so the next round that can change anything is at the boundary
    // 11,160 s: one timer there instead of one at every boundary. A
    // completes at 3,600 + 7,000 = 10,600 s and B resumes on the freed
    // GPU; the timer at 11,160 s then finds nobody waiting.
    // Timers: skipping, 3,960 and 11,160 s: 2. Round by round, every
    // boundary from 3,960 to 10,800 s (the one pending when A completes):
    // (10,800 − 3,960) / 360 + 1 = 20.
    // B: start 0, preempted once, resumes at 10,600 s with 100,000 − 3,600 =
    // 96,400 s left, ends at 107,000 s.
    let recs = vec![rec("B", 0, 2, 100_000), rec("A", 3_600, 1, 7_000)];
    let spec = ClusterSpec::uniform("t", 1, 2, "V100", 16384);
    let go = |skip: bool| {
        run(&recs, &spec, CheckpointModel::None, &|c| {
            let o = LasOptions::default();
            Box::new(Las::new(o, o.placement.build(), c.partitions().len()).with_round_skipping(skip))
        })
    };
    let (on, off) = (go(true), go(false));
    assert_eq!(on.stats.timers, 2);
    assert_eq!(off.stats.timers, 20);
    assert_eq!(jobs_csv(&on), jobs_csv(&off));
    let ends: Vec<(u64, u32)> = on
        .jobs
        .iter()
        .map(|(_, st)| match st {
            dlsched::job::JobState::Completed(d) => (d.end.as_ms() / 1000, d.preemptions()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ends, vec![(107_000, 1), (10_600, 0)]);
}

#[test]
fn gandiva_slices_only_when_oversubscribed() {
    // Two nodes of 2 GPUs, spread off (a job takes GPUs on one node), no
    // profile data (no packing), rounds of 60 s. At 0: A (1 GPU, 3,000 s)
    // and D (1 GPU, 100 s) fill node 0 (best fit), E (1 GPU, 10,000 s) takes
    // node 1. D ends at 100 s: one GPU free on each node. C (2 GPUs, 500 s)
    // arrives at 200 s and fits no node. Its partition's jobs ask for
    // 1 + 1 + 2 = 4 GPUs of 4: not over-subscribed, so no round suspends
    // anyone for C (the rule before issue 30 suspended A at 240 s, a job
    // that had run a full round, to free node 0). C starts when A ends, at
    // 3,000 s, and ends at 3,500 s: no preemption at all.
    // The round at 240 s decides nothing and A and E have run a full
    // round, so no timer follows until A's completion: 1 timer; round by
    // round, 240, 300, ..., 3,000 s: (3,000 − 240) / 60 + 1 = 47.
    let recs = vec![rec("A", 0, 1, 3_000), rec("D", 0, 1, 100), rec("E", 0, 1, 10_000), rec("C", 200, 2, 500)];
    let spec = ClusterSpec::uniform("t", 2, 2, "V100", 16384);
    let go = |skip: bool| {
        run(&recs, &spec, CheckpointModel::None, &|c| {
            let o = GandivaOptions { spread: false, ..GandivaOptions::default() };
            Box::new(Gandiva::new(o, c.partitions().len(), None).with_round_skipping(skip))
        })
    };
    let (on, off) = (go(true), go(false));
    assert_eq!(on.stats.preemptions, 0);
    assert_eq!(on.stats.timers, 1);
    assert_eq!(off.stats.timers, 47);
    assert_eq!(jobs_csv(&on), jobs_csv(&off));
    let c = on.jobs.iter().find(|(s, _)| &*s.name == "C").unwrap();
    let dlsched::job::JobState::Completed(d) = c.1 else { panic!("{:?}", c.1) };
    assert_eq!((d.first_start().as_ms(), d.end.as_ms()), (3_000_000, 3_500_000));
}

/// A policy that logs every launch, co-location and preemption it returns,
/// with the instant (ms): the decision log two runs are compared by (timer
/// requests are left out: skipping asks for fewer).
struct Logged {
    inner: Box<dyn Policy>,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Policy for Logged {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn on_arrival(&mut self, job: dlsched::ids::JobId, view: &dlsched::policy::View<'_>) {
        self.inner.on_arrival(job, view);
    }
    fn on_completion(&mut self, job: dlsched::ids::JobId, view: &dlsched::policy::View<'_>) {
        self.inner.on_completion(job, view);
    }
    fn decide(&mut self, view: &dlsched::policy::View<'_>) -> dlsched::policy::Decision {
        use dlsched::policy::Decision;
        let d = self.inner.decide(view);
        if matches!(d, Decision::Launch { .. } | Decision::Colocate { .. } | Decision::Preempt { .. }) {
            self.log.lock().unwrap().push(format!("{} {d:?}", view.now.as_ms()));
        }
        d
    }
    fn on_timer(&mut self, view: &dlsched::policy::View<'_>) {
        self.inner.on_timer(view);
    }
    fn release_delay_ms(&self) -> u64 {
        self.inner.release_delay_ms()
    }
    fn metrics(&self, jobs: &dlsched::job::JobTable) -> Vec<(&'static str, f64)> {
        self.inner.metrics(jobs)
    }
}

/// One random Gavel scenario in the shapes of the fuzzing reproducers of
/// issue 30 (`/tmp/camp-main2/fail-*`: gavel on node files of several GPU
/// types, VC files, tiny and long rounds, `reset-interval` 0, checkpoint
/// models, table throughputs, durations from under a round to far beyond
/// the horizon).
struct Shape {
    spec: ClusterSpec,
    recs: Vec<TraceRecord>,
    opts: GavelOptions,
    objective: GavelObjective,
    ckpt: CheckpointModel,
    table: bool,
    horizon_ms: u64,
}

fn shape(seed: u64) -> Shape {
    let mut k = 0u64;
    let mut draw = |n: u64| {
        k += 1;
        mix(seed.wrapping_mul(0x100_0000_01B3) ^ k) % n
    };
    // Cluster: 1-4 nodes of 1, 2 or 4 GPUs, of one to three types (some
    // measured in the builtin database, some not), in one or two VCs.
    let types = ["k80", "p100", "v100", "a100", "t4"];
    let ntypes = 1 + draw(3) as usize;
    let first = draw(5) as usize;
    let nodes = 1 + draw(4) as usize;
    let mut spec = ClusterSpec::uniform("shape", nodes as u32, 1, "k80", 16384);
    for (i, n) in spec.nodes.iter_mut().enumerate() {
        n.gpus = [1, 2, 4][draw(3) as usize];
        n.gpus_per_switch = n.gpus.clamp(1, 2);
        n.sockets = if n.gpus >= 2 { 2 } else { 1 };
        n.gpu_type = types[(first + i % ntypes) % types.len()].into();
    }
    let vcs = nodes >= 2 && draw(3) == 0;
    if vcs {
        spec.vc_names = vec!["a".into(), "b".into()];
        spec.named_vcs = true;
        spec.nodes[nodes - 1].vc = VcId(1);
    }
    let total: u32 = spec.nodes.iter().map(|n| n.gpus).sum();
    // Options: rounds from 0.2 s to 720 s, reset intervals 0, a fraction of
    // a round, the default or a few rounds.
    let round = [0.2, 0.9, 60.0, 180.0, 360.0, 720.0][draw(6) as usize];
    let reset_interval = [0.0, round / 3.0, 1920.0, 2.0 * round, 0.0][draw(5) as usize];
    let solver = if draw(4) == 0 { GavelSolver::Lp } else { GavelSolver::Auto };
    let opts = GavelOptions { round, reset_interval, solver, keep_counters: false };
    let objective = if draw(3) == 0 { GavelObjective::Fifo } else { GavelObjective::MaxMin };
    let ckpt = [CheckpointModel::None, CheckpointModel::HeliosTable, CheckpointModel::Gandiva][draw(3) as usize];
    let table = draw(2) == 0;
    // Jobs: 1-10, arrivals in bursts (ties), GPUs up to the cluster's
    // (some wider than any one type: never started), durations from a
    // fraction of a round to 10^9 s.
    let round_ms = (round * 1000.0) as u64;
    let models = [
        ("autoencoder-ml20m", 512),
        ("lstm-wikitext2", 20),
        ("resnet50-imagenet", 32),
        ("transformer-multi30k", 32),
        ("a3c-pong", 20),
        ("vgg16-imagenet", 16),
    ];
    let n = 1 + draw(10);
    let recs = (0..n)
        .map(|i| {
            let submit_ms = draw(4) * draw(40) * round_ms;
            let gpus = 1 + draw(u64::from(total)) as u32;
            let duration_ms = match draw(4) {
                0 => 1 + draw(round_ms * 3),
                1 => round_ms * (5 + draw(200)),
                2 => round_ms * (1_000 + draw(20_000)),
                _ => 1_000 * (1 + draw(1_000_000_000)),
            };
            let mut r = TraceRecord::new(format!("j{i}"), submit_ms, duration_ms, gpus);
            if draw(4) != 0 {
                let (m, b) = models[draw(models.len() as u64) as usize];
                r.extra_mut().model = Some(m.into());
                r.extra_mut().local_bsz = Some(b);
            }
            if vcs {
                r.extra_mut().vc = Some(if draw(3) == 0 { "b" } else { "a" }.into());
            }
            r
        })
        .collect();
    Shape { spec, recs, opts, objective, ckpt, table, horizon_ms: round_ms * 4_000 }
}

/// Runs `shape` with round skipping `skip`: (jobs.csv, decision log, output).
fn run_shape(s: &Shape, skip: bool) -> (String, Vec<String>, RunOutput) {
    use dlsched::profile::db::ProfileDb;
    use dlsched::profile::model::TableModel;
    use dlsched::profile::rate::ProfileRate;
    let cluster = Cluster::new(s.spec.clone()).unwrap();
    let w = build_workload(s.recs.clone(), &cluster, PlacementKind::Consolidate.build());
    let db = s.table.then(|| std::sync::Arc::new(ProfileDb::builtin()));
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let inner = Box::new(Gavel::new(s.opts, s.objective, &cluster, db.clone()).with_round_skipping(skip));
    let p = Box::new(Logged { inner, log: log.clone() });
    let rate: Box<dyn dlsched::profile::RateModel> = match db {
        Some(db) => Box::new(ProfileRate::new(Box::new(TableModel::new(db)), "profile-table")),
        None => Box::new(TraceSpeed),
    };
    let out = Simulation::new(cluster, w.jobs, p, rate, EngineConfig { sample_interval_ms: 0 })
        .with_checkpoint(s.ckpt)
        .with_horizon(dlsched::time::SimTime::from_ms(s.horizon_ms))
        .with_invariant_checks(true)
        .run()
        .unwrap();
    let log = log.lock().unwrap().clone();
    (jobs_csv(&out), log, out)
}

#[test]
fn gavel_random_shapes_same_schedule_with_and_without_skipping() {
    // 200 seeded scenarios in the reproducers' shapes, each run to a horizon
    // of 4,000 rounds with every round a timer and with skipping: the
    // decision logs (every launch and preemption, with its instant) and the
    // jobs.csv must be identical, and so must the policy metrics except
    // `gavel_rounds` (a run cut while skipping has not yet counted the
    // boundaries it skipped since its last wake-up: at most the rounds up to
    // the horizon, so never more than round by round).
    let (mut t_on, mut t_off) = (0u64, 0u64);
    for seed in 0..200u64 {
        let s = shape(seed);
        let (csv_on, log_on, on) = run_shape(&s, true);
        let (csv_off, log_off, off) = run_shape(&s, false);
        let case = format!(
            "seed {seed}: {:?} {:?} {:?} table={} on {:?}",
            s.objective,
            s.opts,
            s.ckpt,
            s.table,
            s.spec.nodes.iter().map(|n| (n.gpus, n.gpu_type.as_str(), n.vc.0)).collect::<Vec<_>>()
        );
        if let Some(i) = log_on.iter().zip(&log_off).position(|(a, b)| a != b) {
            panic!("{case}: decision {i} differs: {} (skipping) vs {} (every round)", log_on[i], log_off[i]);
        }
        assert_eq!(log_on.len(), log_off.len(), "{case}: decision counts differ");
        assert_eq!(csv_on, csv_off, "{case}: jobs.csv differ");
        let strip =
            |o: &RunOutput| o.policy_metrics.iter().filter(|m| m.0 != "gavel_rounds").cloned().collect::<Vec<_>>();
        assert_eq!(strip(&on), strip(&off), "{case}");
        let rounds = |o: &RunOutput| o.policy_metrics.iter().find(|m| m.0 == "gavel_rounds").unwrap().1;
        assert!(
            rounds(&on) <= rounds(&off),
            "{case}: {} rounds skipping, {} round by round",
            rounds(&on),
            rounds(&off)
        );
        t_on += on.stats.timers;
        t_off += off.stats.timers;
    }
    eprintln!("{t_on} timers skipping, {t_off} round by round");
    assert!(t_on < t_off, "{t_on} timers skipping, {t_off} round by round: nothing was skipped");
}

/// The table rate model of the builtin profile database (placements differ
/// in speed: consolidated and spread, K80 and V100).
fn table_rates() -> Box<dyn dlsched::profile::RateModel> {
    use dlsched::profile::model::TableModel;
    let db = std::sync::Arc::new(dlsched::profile::db::ProfileDb::builtin());
    Box::new(dlsched::profile::rate::ProfileRate::new(Box::new(TableModel::new(db)), "profile-table"))
}

fn trace_rates() -> Box<dyn dlsched::profile::RateModel> {
    Box::new(TraceSpeed)
}

/// A small seeded Themis workload on `cluster`: `n` jobs arriving within
/// 2,000 s, in ties of two now and then, 1 to 8 GPUs (at most half the
/// smallest partition), durations 10 s to 10,000 s, some with a profiled
/// model (so that the table rate model makes placements differ).
fn themis_workload(cluster: &Cluster, n: usize, seed: u64) -> Vec<TraceRecord> {
    let max = cluster.partitions().iter().map(|p| p.gpus_total).min().unwrap().max(2) / 2;
    let models = [("autoencoder-ml20m", 512), ("lstm-wikitext2", 20), ("resnet18-cifar10", 64)];
    (0..n)
        .map(|i| {
            let x = mix(seed * 7_919 + i as u64);
            let submit = if i % 4 == 1 { mix(seed * 7_919 + i as u64 - 1) % 2_000 } else { x % 2_000 };
            let gpus = [1, 1, 2, 3, 4, 8][(x >> 20) as usize % 6].min(max);
            let duration =
                [10 + (x >> 40) % 300, 300 + (x >> 40) % 3_000, 3_000 + (x >> 40) % 7_000][(x >> 30) as usize % 3];
            let mut r = rec(&format!("j{i}"), submit, gpus, duration);
            if (x >> 50).is_multiple_of(2) {
                let (m, b) = models[(x >> 52) as usize % models.len()];
                r.extra_mut().model = Some(m.into());
                r.extra_mut().local_bsz = Some(b);
            }
            if cluster.partitions().len() > 1 {
                r.extra_mut().vc = Some(if i % 3 == 0 { "b" } else { "a" }.to_string());
            }
            r
        })
        .collect()
}

#[test]
fn themis_skips_only_rounds_that_decide_nothing() {
    // Random small cases: four clusters (one type, two VCs, two GPU types
    // in one or two VCs), leases from 0.25 s to 600 s, fairness knobs 0,
    // 0.8 and 1, trace speed and the table rate model, no checkpoint cost
    // and the Helios table. With skipping on and off, jobs.csv, the policy
    // metrics (ρ) and the preemption count must be identical; skipping must
    // take fewer timers over all cases.
    use dlsched::policy::themis::{Themis, ThemisOptions};
    let (mut t_on, mut t_off, mut runs) = (0u64, 0u64, 0);
    let specs = [ClusterPreset::Lab16.spec(), two_vcs(), crate::gavel::hetero(false), crate::gavel::hetero(true)];
    for (c, spec) in specs.iter().enumerate() {
        let cluster = Cluster::new(spec.clone()).unwrap();
        for seed in 1..=4u64 {
            let k = c as u64 * 10 + seed;
            let n = [3, 6, 10, 16][(mix(k) % 4) as usize];
            let recs = themis_workload(&cluster, n, k);
            let lease_s = [0.25, 3.0, 47.5, 600.0][(mix(k + 1) % 4) as usize];
            for knob in [0.0, 0.8, 1.0] {
                for table in [false, true] {
                    let rates: fn() -> Box<dyn dlsched::profile::RateModel> =
                        if table { table_rates } else { trace_rates };
                    let ckpt = if (seed + c as u64).is_multiple_of(2) {
                        CheckpointModel::None
                    } else {
                        CheckpointModel::HeliosTable
                    };
                    let opts = ThemisOptions { lease_s, fairness_knob: knob };
                    let go = |skip: bool| {
                        let cl = Cluster::new(spec.clone()).unwrap();
                        let w = build_workload(recs.clone(), &cl, PlacementKind::Consolidate.build());
                        let p = Themis::new(opts, cl.partitions().len(), rates()).with_round_skipping(skip);
                        let cfg = EngineConfig { sample_interval_ms: 0 };
                        let mut sim = Simulation::new(cl, w.jobs, Box::new(p), rates(), cfg).with_checkpoint(ckpt);
                        while sim.step().unwrap().is_some() {}
                        sim.finish()
                    };
                    let (on, off) = (go(true), go(false));
                    let case = format!("{} seed {seed} lease {lease_s} knob {knob} table {table}", spec.name);
                    assert_eq!(jobs_csv(&on), jobs_csv(&off), "{case}: the schedules differ");
                    assert_eq!(on.policy_metrics, off.policy_metrics, "{case}");
                    assert_eq!(on.stats.preemptions, off.stats.preemptions, "{case}");
                    t_on += on.stats.timers;
                    t_off += off.stats.timers;
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 4 * 4 * 3 * 2);
    assert!(t_on < t_off, "{t_on} timers skipping, {t_off} round by round");
}

#[test]
fn themis_skips_to_the_completion_that_changes_the_auction() {
    // One node of 2 GPUs, leases of 600 s, trace speed, fairness knob 0
    // (everyone takes part). A (1 GPU, 10^6 s) runs from 0. B (2 GPUs,
    // 10^6 s) arrives at 600 s: 1 GPU free, B waits; timer at 1,200 s.
    // Round at 1,200 s: ρ_A = 1 (constant while it runs), ρ_B = (600,000 +
    // 10^9) / 10^9 = 1.0006. Gains (ln(ρ_lose/ρ_bid) per GPU): A bids its
    // own GPU, ln((10^9 + 600,000) / 10^9) / 1 = 6.0e-4; B ln((1,200,000 +
    // 10^9) / (600,000 + 10^9)) / 2 = 3.0e-4, falling as B waits. A is
    // served first and keeps its GPU, B finds 1 GPU: nothing decided. The
    // order by ρ (B's grows, A's is constant) and by gain (A's constant,
    // B's falls) can never change, so the next round that may decide
    // something is bounded by A's work running out at 10^6 s: the last
    // boundary with work left is 1,200 + 1,664 × 600 = 999,600 s, the
    // timer is at 1,000,200 s. A ends at 10^6 s, B starts then and ends at
    // 2·10^6 s, nobody preempted. Timers: skipping 1,200 and 1,000,200 s:
    // 2; round by round every boundary from 1,200 s to 1,000,200 s (the
    // one pending when A ends): (1,000,200 − 1,200) / 600 + 1 = 1,666.
    use dlsched::policy::themis::{Themis, ThemisOptions};
    let recs = vec![rec("A", 0, 1, 1_000_000), rec("B", 600, 2, 1_000_000)];
    let spec = ClusterSpec::uniform("t", 1, 2, "V100", 16384);
    let go = |skip: bool| {
        run(&recs, &spec, CheckpointModel::None, &|c| {
            let o = ThemisOptions { fairness_knob: 0.0, ..ThemisOptions::default() };
            Box::new(Themis::new(o, c.partitions().len(), trace_rates()).with_round_skipping(skip))
        })
    };
    let (on, off) = (go(true), go(false));
    assert_eq!(jobs_csv(&on), jobs_csv(&off));
    assert_eq!(on.stats.preemptions, 0);
    assert_eq!(on.stats.timers, 2);
    assert_eq!(off.stats.timers, 1_666);
    let ends: Vec<(u64, u64)> = on
        .jobs
        .iter()
        .map(|(_, st)| match st {
            dlsched::job::JobState::Completed(d) => (d.first_start().as_ms() / 1000, d.end.as_ms() / 1000),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ends, vec![(0, 1_000_000), (1_000_000, 2_000_000)]);
}

/// A seeded workload in the shape of the slow fuzz reproducers of issue 30
/// (LAS 13023, 15731, 41986, ...; Gandiva 5113, 6330, 51195, 65861, ...):
/// `n` jobs arriving within `spread_s` s, GPU counts from 1 up to the whole
/// of `max_gpus` (jobs wider than half the cluster make two wide jobs
/// alternate round after round), durations from zero and sub-second ones to
/// `long_s` s (the long ones leave quiet rounds to skip). With `models`,
/// every second 1-GPU job has a model, batch and memory figure, so that
/// Gandiva may pack it.
fn repro_shape(n: usize, seed: u64, max_gpus: u32, spread_s: u64, long_s: u64, models: bool) -> Vec<TraceRecord> {
    (0..n)
        .map(|i| {
            let x = mix(seed * 7_919 + i as u64);
            let submit = x % spread_s.max(1);
            let gpus = match (x >> 16) % 4 {
                0 | 1 => 1,
                2 => 1 + (x >> 24) as u32 % max_gpus,
                _ => (max_gpus / 2 + 1 + (x >> 24) as u32 % max_gpus.div_ceil(2)).min(max_gpus),
            };
            let duration = match (x >> 32) % 5 {
                0 => (x >> 40) % 2,
                1 => 1 + (x >> 40) % 60,
                2 => 60 + (x >> 40) % 3_000,
                _ => long_s / 4 + (x >> 40) % long_s,
            };
            let mut r = rec(&format!("j{i}"), submit, gpus, duration);
            if models && gpus == 1 && i.is_multiple_of(2) {
                let (m, b) =
                    if (x >> 48).is_multiple_of(2) { ("autoencoder-ml20m", 512) } else { ("lstm-wikitext2", 20) };
                r.extra_mut().model = Some(m.into());
                r.extra_mut().local_bsz = Some(b);
                r.extra_mut().gpu_mem_mib = Some(4_000);
            }
            r
        })
        .collect()
}

/// The reproducers' clusters: one node of 1 GPU (5113's VC), of 2 GPUs
/// (41986), 3 and 5 nodes of 1 GPU (51195, 65861), lab16 (29744, 42707,
/// ...), two VCs, and two GPU types (the ldwp-testbed and node-file cases),
/// each with the widest job it takes (one type's GPUs on the mixed one).
fn repro_clusters() -> Vec<(ClusterSpec, u32)> {
    vec![
        (ClusterSpec::uniform("1x1", 1, 1, "V100", 16384), 1),
        (ClusterSpec::uniform("1x2", 1, 2, "V100", 16384), 2),
        (ClusterSpec::uniform("3x1", 3, 1, "V100", 16384), 3),
        (ClusterSpec::uniform("5x1", 5, 1, "V100", 16384), 5),
        (ClusterPreset::Lab16.spec(), 16),
        (two_vcs(), 8),
        (crate::gavel::hetero(false), 8),
    ]
}

/// Runs `on` and `off` (the same policy, skipping on and off) on `recs`,
/// with the builtin co-location model when `coloc`; the two schedules must
/// be identical. Returns the timers (on, off).
fn compare(
    case: &str,
    recs: &[TraceRecord],
    spec: &ClusterSpec,
    ckpt: CheckpointModel,
    coloc: bool,
    make: &dyn Fn(&Cluster, bool) -> Box<dyn Policy>,
) -> (u64, u64) {
    let go = |skip: bool| {
        let cluster = Cluster::new(spec.clone()).unwrap();
        let w = build_workload(recs.to_vec(), &cluster, PlacementKind::Consolidate.build());
        let p = make(&cluster, skip);
        let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), EngineConfig { sample_interval_ms: 0 })
            .with_checkpoint(ckpt);
        if coloc {
            sim = sim.with_interference(crate::common::builtin_interference());
        }
        while sim.step().unwrap().is_some() {
            if let Err(e) = sim.check_invariants() {
                panic!("{case}, skipping {skip}, at {}: {e}", sim.now());
            }
            // A job that can never start would keep a round-by-round run
            // going for ever: no case here has one (bounded well above the
            // longest schedule, 12 jobs of at most 1.25 × 20,000 s each).
            assert!(sim.now().as_ms() < 2_000_000_000, "{case}: no end in sight");
        }
        sim.finish()
    };
    let (on, off) = (go(true), go(false));
    assert_eq!(jobs_csv(&on), jobs_csv(&off), "{case}: the schedules differ");
    assert_eq!(on.policy_metrics, off.policy_metrics, "{case}");
    assert_eq!(on.stats.preemptions, off.stats.preemptions, "{case}");
    (on.stats.timers, off.stats.timers)
}

/// The checkpoint model of case `k` for rounds of `round_s` s: the Helios
/// table (7 to 60 s per preemption) only with rounds longer than its 60 s,
/// since a round no longer than the overhead lets a time-sliced job make no
/// progress at all (LAS or Gandiva with rounds of 1 s would then never end).
fn ckpt(k: u64, round_s: u64) -> CheckpointModel {
    let all = [CheckpointModel::None, CheckpointModel::Gandiva, CheckpointModel::HeliosTable];
    let n = if round_s > 60 { 3 } else { 2 };
    all[(k % n) as usize]
}

#[test]
fn las_skipping_keeps_the_schedule_on_the_reproducers_shapes() {
    // Rounds of 1 s (13023, 15731, 29361, 41986), 360 s (the default) and
    // 361 s (57908), work-conserving on and off, both services, both
    // exclusive placements, the checkpoint models ([`ckpt`]); 2 seeds
    // per cluster and round. Round by round, every boundary while a job waits
    // is a timer, so a run skipping takes fewer timers in all.
    let (mut t_on, mut t_off) = (0, 0);
    let mut k = 0u64;
    for (spec, max) in repro_clusters() {
        for round in [1u64, 360, 361] {
            for seed in 0..2u64 {
                k += 1;
                let n = 4 + (mix(k) % 9) as usize;
                let long = if round == 1 { 5_000 } else { 20_000 };
                let recs = repro_shape(n, k, max, 300 * round.min(10), long, false);
                let service = if k.is_multiple_of(2) { LasService::GpuTime } else { LasService::Time };
                let work_conserving = (k / 2).is_multiple_of(2);
                let placement = if k.is_multiple_of(3) { PlacementKind::FirstFit } else { PlacementKind::Consolidate };
                let o = LasOptions { service, round, work_conserving, placement };
                let case = format!("las {} round {round} seed {seed} {o:?}", spec.name);
                let (on, off) = compare(&case, &recs, &spec, ckpt(k, round), false, &|c, skip| {
                    Box::new(Las::new(o, o.placement.build(), c.partitions().len()).with_round_skipping(skip))
                });
                t_on += on;
                t_off += off;
            }
        }
    }
    assert!(t_on < t_off, "{t_on} timers skipping, {t_off} round by round");
}

#[test]
fn gandiva_skipping_keeps_the_schedule_on_the_reproducers_shapes() {
    // Rounds of 1 s (5113, 43360, 48969, 51195, 61874) and 60 s (the
    // default; 6330, 25881, 65861), with and without spreading, migration
    // and packing (thresholds of 5113, 25881, 43360 and the default), the
    // checkpoint models ([`ckpt`]); 2 seeds per cluster and round.
    let (mut t_on, mut t_off) = (0, 0);
    let mut k = 0u64;
    for (spec, max) in repro_clusters() {
        for round_s in [1u64, 60] {
            for seed in 0..2u64 {
                k += 1;
                let n = 4 + (mix(k + 1_000) % 9) as usize;
                let long = if round_s == 1 { 5_000 } else { 20_000 };
                let packing = k.is_multiple_of(2);
                let recs = repro_shape(n, k + 1_000, max, 300 * round_s.min(10), long, packing);
                let o = GandivaOptions {
                    round_s,
                    packing,
                    pack_threshold: [1.0, 2.182, 2.278, 0.648][(k % 4) as usize],
                    migration: (k / 2).is_multiple_of(2),
                    spread: (k / 3).is_multiple_of(2),
                    ..GandivaOptions::default()
                };
                let case = format!("gandiva {} seed {seed} {o:?}", spec.name);
                let (on, off) = compare(&case, &recs, &spec, ckpt(k, round_s), packing, &|c, skip| {
                    let coloc = packing.then(|| {
                        dlsched::profile::coloc::ProfileInterference::new(std::sync::Arc::new(
                            dlsched::profile::db::ProfileDb::builtin(),
                        ))
                    });
                    Box::new(Gandiva::new(o.clone(), c.partitions().len(), coloc).with_round_skipping(skip))
                });
                t_on += on;
                t_off += off;
            }
        }
    }
    assert!(t_on <= t_off, "{t_on} timers skipping, {t_off} round by round");
}
