//! Seeded random workloads with every invariant checked after every instant.

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::job::JobState;
use dlsched::policy::{config::PolicyConfig, placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::TraceSpeed;
use dlsched::workload::build_workload;

fn clusters() -> Vec<ClusterSpec> {
    let mut two_vcs = ClusterSpec::uniform("2vc", 6, 8, "V100", 16384);
    two_vcs.vc_names = vec!["a".into(), "b".into()];
    two_vcs.named_vcs = true;
    for n in &mut two_vcs.nodes[4..] {
        n.vc = dlsched::ids::VcId(1);
    }
    vec![ClusterPreset::Lab16.spec(), ClusterSpec::uniform("3x8", 3, 8, "V100", 16384), two_vcs]
}

#[test]
fn invariants_hold_after_every_instant() {
    // Runs in which some job waited: at load 1.5 contention is the point of
    // the test (invariants checked on an idle cluster would prove little).
    let mut runs_with_queueing = 0;
    let mut runs = 0;
    for spec in clusters() {
        for seed in 1..=3u64 {
            for order in [QueueOrder::Fifo, QueueOrder::Sjf] {
                for backfill in [false, true] {
                    for placement in [PlacementKind::Consolidate, PlacementKind::FirstFit] {
                        let cluster = Cluster::new(spec.clone()).unwrap();
                        // Spread jobs over the VCs by id so both partitions are used.
                        let recs = crate::common::seeded_two_vc_records(&cluster, seed);
                        let w = build_workload(recs, &cluster, placement.build());
                        let admitted = w.jobs.len();
                        assert_eq!(admitted + w.skipped.len(), 150, "every row is admitted or skipped");
                        let p = PolicyConfig { order, backfill, placement }.build(cluster.partitions().len()).unwrap();
                        let mut sim =
                            Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), EngineConfig::default());
                        while sim.step().unwrap().is_some() {
                            if let Err(e) = sim.check_invariants() {
                                panic!(
                                    "{} seed {seed} {order:?} backfill {backfill} {placement:?} at {}: {e}",
                                    spec.name,
                                    sim.now()
                                );
                            }
                        }
                        let out = sim.finish();
                        let what = format!("{} seed {seed} {order:?} backfill {backfill} {placement:?}", spec.name);
                        assert!(admitted > 0, "{what}: no job admitted, nothing was checked");
                        let mut queued = false;
                        // Per VC, the start of the last job in submission order (strict FIFO).
                        let mut last_start: Vec<Option<u64>> = vec![None; cluster_vcs(&spec)];
                        for (job, state) in out.jobs.iter() {
                            let JobState::Completed(d) = state else {
                                panic!("{what}: job {} did not complete: {state:?}", job.name);
                            };
                            let (submit, start, end) = (job.submit.as_ms(), d.start.as_ms(), d.end.as_ms());
                            assert!(start >= submit, "{what}: job {} starts before its submission", job.name);
                            // Trace speed: a job runs exactly its trace duration.
                            assert_eq!(end - start, job.duration_ms, "{what}: job {} run time", job.name);
                            queued |= start > submit;
                            // Strict FIFO starts jobs of one VC in submission
                            // order (ids are in submission order), so their
                            // starts never decrease.
                            if order == QueueOrder::Fifo && !backfill {
                                let last = &mut last_start[job.vc.0 as usize];
                                assert!(
                                    last.is_none_or(|l| l <= start),
                                    "{what}: job {} starts before an earlier-submitted job of its VC",
                                    job.name
                                );
                                *last = Some(start);
                            }
                        }
                        runs_with_queueing += usize::from(queued);
                        runs += 1;
                    }
                }
            }
        }
    }
    // Load 1.5 on every cluster: in each run some job had to wait.
    assert_eq!(runs_with_queueing, runs, "some run had no queueing at load 1.5");
}

fn cluster_vcs(spec: &ClusterSpec) -> usize {
    spec.nodes.iter().map(|n| usize::from(n.vc.0) + 1).max().unwrap_or(1)
}

#[test]
fn gandiva_invariants_hold_after_every_instant() {
    // Gandiva (time-slicing, packing, migration) on the seeded two-VC
    // workloads at load 1.5, every invariant after every instant; on the
    // clusters above and a heterogeneous one (2 K80 nodes + 2 V100 nodes of
    // 4 GPUs; K80 12 GiB). Every third job gets a model, batch and memory
    // figure (so some pack), with Gandiva's 100 ms per suspend.
    use dlsched::engine::CheckpointModel;
    use dlsched::policy::gandiva::{Gandiva, GandivaOptions};
    use dlsched::profile::coloc::ProfileInterference;
    use dlsched::profile::db::ProfileDb;
    let db = std::sync::Arc::new(ProfileDb::builtin());
    let mut hetero = ClusterSpec::uniform("hetero", 4, 4, "V100", 16384);
    for n in &mut hetero.nodes[..2] {
        n.gpu_type = "K80".into();
        n.gpu_mem_mib = 12288;
    }
    let mut specs = clusters();
    specs.push(hetero);
    let models = [("autoencoder-ml20m", 512), ("lstm-wikitext2", 20), ("resnet18-cifar10", 64)];
    let (mut preempted, mut packed, mut runs) = (0u64, 0.0f64, 0);
    for spec in specs {
        for seed in 1..=3u64 {
            for opts in
                [GandivaOptions::default(), GandivaOptions { round_s: 600, spread: false, ..Default::default() }]
            {
                let cluster = Cluster::new(spec.clone()).unwrap();
                let mut recs = crate::common::seeded_two_vc_records(&cluster, seed);
                for (i, r) in recs.iter_mut().enumerate().filter(|(i, _)| i % 3 == 1) {
                    let (m, b) = models[i % models.len()];
                    r.extra_mut().model = Some(m.into());
                    r.extra_mut().local_bsz = Some(b);
                    r.extra_mut().gpu_mem_mib = Some(3_000);
                }
                let w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
                let coloc = ProfileInterference::new(db.clone());
                let p = Box::new(Gandiva::new(opts.clone(), cluster.partitions().len(), Some(coloc)));
                let interference = Box::new(ProfileInterference::new(db.clone()));
                let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), EngineConfig::default())
                    .with_interference(interference)
                    .with_checkpoint(CheckpointModel::Gandiva);
                let what = format!("{} seed {seed} round {} spread {}", spec.name, opts.round_s, opts.spread);
                while sim.step().unwrap().is_some() {
                    if let Err(e) = sim.check_invariants() {
                        panic!("{what} at {}: {e}", sim.now());
                    }
                }
                let out = sim.finish();
                for (job, state) in out.jobs.iter() {
                    let JobState::Completed(d) = state else {
                        panic!("{what}: job {} did not complete: {state:?}", job.name);
                    };
                    // A job without a memory figure never shares a GPU, so
                    // it runs at trace speed: it holds its GPUs for its
                    // duration plus 100 ms per suspend.
                    if job.gpu_mem_mib().is_none() {
                        assert_eq!(
                            d.attained_ms(),
                            job.duration_ms + 100 * u64::from(d.preemptions()),
                            "{what}: job {} service",
                            job.name
                        );
                    }
                }
                preempted += out.stats.preemptions;
                packed += out.policy_metrics.iter().find(|(k, _)| *k == "gandiva_packs").unwrap().1;
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 24);
    assert!(preempted > 0 && packed > 0.0, "the checks saw time slices ({preempted}) and packs ({packed})");
}

#[test]
fn qssf_and_las_keep_every_invariant() {
    use dlsched::engine::CheckpointModel;
    use dlsched::policy::Policy;
    use dlsched::policy::las::{Las, LasOptions, LasService};
    use dlsched::policy::qssf::{Qssf, QssfEstimator, QssfOptions};
    let qssf = |o: QssfOptions| move |n: usize| Box::new(Qssf::new(o, o.placement.build(), n)) as Box<dyn Policy>;
    let las = |o: LasOptions| move |n: usize| Box::new(Las::new(o, o.placement.build(), n)) as Box<dyn Policy>;
    let history = QssfOptions { estimator: QssfEstimator::History, ..Default::default() };
    /// (name, builder from the partition count, checkpoint model).
    type Variant = (&'static str, Box<dyn Fn(usize) -> Box<dyn Policy>>, CheckpointModel);
    let variants: Vec<Variant> = vec![
        ("qssf", Box::new(qssf(QssfOptions::default())), CheckpointModel::None),
        ("qssf helios", Box::new(qssf(QssfOptions::helios())), CheckpointModel::None),
        ("qssf history backfill", Box::new(qssf(QssfOptions { backfill: true, ..history })), CheckpointModel::None),
        (
            "qssf first-fit",
            Box::new(qssf(QssfOptions { placement: PlacementKind::FirstFit, ..history })),
            CheckpointModel::None,
        ),
        ("las", Box::new(las(LasOptions { round: 600, ..Default::default() })), CheckpointModel::None),
        (
            "las time helios-table",
            Box::new(las(LasOptions { round: 300, service: LasService::Time, ..Default::default() })),
            CheckpointModel::HeliosTable,
        ),
        (
            "las rounds only first-fit",
            Box::new(las(LasOptions {
                round: 900,
                work_conserving: false,
                placement: PlacementKind::FirstFit,
                ..Default::default()
            })),
            CheckpointModel::HeliosTable,
        ),
    ];
    let mut preempting_las_runs = 0;
    for spec in clusters() {
        for seed in 1..=3u64 {
            for (name, build, ckpt) in &variants {
                let what = format!("{} seed {seed} {name}", spec.name);
                let run = || {
                    let cluster = Cluster::new(spec.clone()).unwrap();
                    let recs = crate::common::seeded_two_vc_records(&cluster, seed);
                    let placement =
                        if name.contains("first-fit") { PlacementKind::FirstFit } else { PlacementKind::Consolidate };
                    let w = build_workload(recs, &cluster, placement.build());
                    let p = build(cluster.partitions().len());
                    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), EngineConfig::default())
                        .with_checkpoint(*ckpt);
                    while sim.step().unwrap().is_some() {
                        if let Err(e) = sim.check_invariants() {
                            panic!("{what} at {}: {e}", sim.now());
                        }
                    }
                    sim.finish()
                };
                let out = run();
                for (s, st) in out.jobs.iter() {
                    let JobState::Completed(d) = st else { panic!("{what}: {} unfinished: {st:?}", s.name) };
                    // Trace speed: time holding GPUs = work + checkpoint overheads.
                    let work = s.duration_ms + ckpt.overhead_ms(s.gpus) * u64::from(d.preemptions());
                    assert_eq!(d.attained_ms(), work, "{what}: {}", s.name);
                    assert_eq!(d.end.since(s.submit), d.waited_ms(s.submit) + d.attained_ms(), "{what}: {}", s.name);
                    if name.starts_with("qssf") {
                        assert_eq!(d.preemptions(), 0, "{what}: {} preempted", s.name);
                    }
                }
                assert_eq!(out.stats.preemptions, out.stats.resumes, "{what}: every preempted job resumed");
                if name.starts_with("las") {
                    preempting_las_runs += usize::from(out.stats.preemptions > 0);
                }
                // Determinism: the same run gives the same jobs.csv bytes.
                let again = run();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                dlsched::metrics::export::write_jobs_csv(&out, &mut a).unwrap();
                dlsched::metrics::export::write_jobs_csv(&again, &mut b).unwrap();
                assert!(a == b, "{what}: two runs differ");
            }
        }
    }
    // At load 1.5 LAS preempts: the invariants were checked under preemption.
    assert!(preempting_las_runs >= 20, "{preempting_las_runs} of 27 LAS runs preempted");
}

#[test]
fn themis_keeps_every_invariant_on_seeded_workloads() {
    use dlsched::engine::CheckpointModel;
    use dlsched::policy::themis::ThemisOptions;
    let (mut runs, mut preempting_runs) = (0, 0);
    for spec in clusters() {
        for seed in 1..=3u64 {
            for f in [0.0, 0.8] {
                for ckpt in [CheckpointModel::None, CheckpointModel::HeliosTable] {
                    let cluster = Cluster::new(spec.clone()).unwrap();
                    let recs = crate::common::seeded_two_vc_records(&cluster, seed);
                    let what = format!("{} seed {seed} f {f} {ckpt:?}", spec.name);
                    let opts = ThemisOptions { lease_s: 300.0, fairness_knob: f };
                    // run_themis checks the invariants after every instant.
                    let trace_speed = || Box::new(TraceSpeed) as Box<dyn dlsched::profile::RateModel>;
                    let (out, _) = crate::themis::run_themis(recs.clone(), spec.clone(), opts, ckpt, trace_speed);
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
                    assert_eq!(out.stats.preemptions, out.stats.resumes, "{what}: every preempted job resumed");
                    preempting_runs += usize::from(out.stats.preemptions > 0);
                    runs += 1;
                    // Determinism: the same run gives the same jobs.csv bytes.
                    let (again, _) = crate::themis::run_themis(recs, spec.clone(), opts, ckpt, trace_speed);
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    dlsched::metrics::export::write_jobs_csv(&out, &mut a).unwrap();
                    dlsched::metrics::export::write_jobs_csv(&again, &mut b).unwrap();
                    assert!(a == b, "{what}: two runs differ");
                }
            }
        }
    }
    // At load 1.5 the lease rounds preempt in most runs.
    assert!(preempting_runs * 2 > runs, "{preempting_runs} of {runs} runs preempted");
}

/// The most GPUs of one type in partition `vc`.
pub(crate) fn max_type_gpus(spec: &ClusterSpec, vc: dlsched::ids::VcId) -> u32 {
    let mut by_type = std::collections::BTreeMap::<&str, u32>::new();
    for n in spec.nodes.iter().filter(|n| n.vc == vc) {
        *by_type.entry(n.gpu_type.as_str()).or_default() += n.gpus;
    }
    by_type.values().copied().max().unwrap_or(0)
}

#[test]
fn gavel_keeps_every_invariant() {
    use crate::gavel::{hetero, run_gavel_ckpt};
    use dlsched::engine::CheckpointModel;
    use dlsched::ids::VcId;
    use dlsched::policy::gavel::{GavelObjective, GavelOptions, GavelSolver};
    let mut two_vcs = ClusterSpec::uniform("2vc", 6, 8, "V100", 16384);
    two_vcs.vc_names = vec!["a".into(), "b".into()];
    two_vcs.named_vcs = true;
    for n in &mut two_vcs.nodes[4..] {
        n.vc = VcId(1);
    }
    let specs = [ClusterPreset::Lab16.spec(), two_vcs, hetero(false), hetero(true)];
    let mut preempted = 0;
    for spec in specs {
        for seed in 1..=2u64 {
            for objective in [GavelObjective::MaxMin, GavelObjective::Fifo, GavelObjective::MaxSum] {
                for solver in [GavelSolver::Auto, GavelSolver::Lp] {
                    if solver == GavelSolver::Lp && (objective != GavelObjective::MaxMin || spec.name != "2vc") {
                        continue; // the LP on one type: once is enough (slow in debug)
                    }
                    let cluster = Cluster::new(spec.clone()).unwrap();
                    let recs = crate::common::seeded_two_vc_records(&cluster, seed);
                    let o = GavelOptions { round: 360.0, reset_interval: 1920.0, solver, keep_counters: false };
                    // Seed 2 pays the Helios checkpoint table at each preemption.
                    let ckpt = if seed == 2 { CheckpointModel::HeliosTable } else { CheckpointModel::None };
                    // run_gavel_ckpt checks the invariants after every instant.
                    let out = run_gavel_ckpt(recs.clone(), spec.clone(), o, objective, ckpt);
                    let what = format!("{} seed {seed} {objective:?} {solver:?}", spec.name);
                    assert!(!out.jobs.is_empty(), "{what}: nothing admitted");
                    for (job, state) in out.jobs.iter() {
                        let JobState::Completed(d) = state else {
                            // Gavel runs a job on one GPU type: one larger
                            // than every type of its VC never starts (counted).
                            let most = max_type_gpus(&spec, job.vc);
                            assert!(
                                job.gpus > most,
                                "{what}: {} ({} GPUs, {most} of a type) unfinished",
                                job.name,
                                job.gpus
                            );
                            continue;
                        };
                        // Trace speed: time holding GPUs = work + checkpoint overheads.
                        let work = job.duration_ms + ckpt.overhead_ms(job.gpus) * u64::from(d.preemptions());
                        assert_eq!(d.attained_ms(), work, "{what}: {} attained", job.name);
                        assert_eq!(
                            d.end.since(job.submit),
                            d.waited_ms(job.submit) + d.attained_ms(),
                            "{what}: {}",
                            job.name
                        );
                        assert!(d.first_start() >= job.submit, "{what}: {} started early", job.name);
                        preempted += usize::from(d.preemptions() > 0);
                    }
                    let again = run_gavel_ckpt(recs, spec.clone(), o, objective, ckpt);
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    dlsched::metrics::export::write_jobs_csv(&out, &mut a).unwrap();
                    dlsched::metrics::export::write_jobs_csv(&again, &mut b).unwrap();
                    assert!(a == b, "{what}: two runs differ");
                }
            }
        }
    }
    assert!(preempted > 0, "no job was ever preempted: the rounds were not exercised");
}

#[test]
fn checked_runs_equal_unchecked_ones() {
    // `run_one_checked` (the fuzzing harness's run) checks every invariant
    // after every instant and otherwise runs as `run_one`: the same jobs.csv
    // bytes, for a queue policy, a preemptive one with checkpoint costs, a
    // round-based one and GENIE tasks (each passes every check).
    use dlsched::experiment::raw::{self, Origin, RawSpec, Value};
    use dlsched::experiment::{Artefacts, run_one, run_one_checked};
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example_jobs.csv");
    let vcs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example_vcs.csv");
    let cases: [&[(&str, &str)]; 4] = [
        &[("policy", "fifo")],
        &[("policy", "srtf"), ("checkpoint", "helios-table")],
        &[("policy", "gavel")],
        &[("policy", "genie"), ("workload", "genie"), ("tasks", "20"), ("hours", "1")],
    ];
    let artefacts = Artefacts::default();
    for case in cases {
        let mut r = RawSpec::new();
        if !case.iter().any(|(k, _)| *k == "workload") {
            r.insert("trace".into(), Value::Str(trace.display().to_string()));
            r.insert("vcs".into(), Value::Str(vcs.display().to_string()));
        }
        for (k, v) in case {
            r.insert(k.to_string(), raw::parse_scalar(v));
        }
        let spec = raw::to_run_spec(&r, Origin::CommandLine, None).unwrap();
        let plain = run_one(&spec, |_| {}).unwrap();
        let checked = run_one_checked(&spec, &artefacts, |_| {}).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        dlsched::metrics::export::write_jobs_csv(&plain.output, &mut a).unwrap();
        dlsched::metrics::export::write_jobs_csv(&checked.output, &mut b).unwrap();
        assert!(a == b, "{case:?}: checked and unchecked runs differ");
        assert!(plain.summary.jobs_completed > 0, "{case:?}: nothing ran");
    }
}
