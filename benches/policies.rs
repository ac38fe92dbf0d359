//! Criterion benchmark of one scheduling pass of every registry kind
//! ([`dlsched::policy::registry::KINDS`], so a new kind is benchmarked
//! without a change here) at 10, 100 and 1,000 waiting jobs.
//!
//! Input, for N: one partition of `max(1, N / 4)` nodes × 8 V100 (16 GiB),
//! with every job submitted at t = 0. Fixed-size kinds get job i asking for
//! 2^(i mod 4) GPUs (1, 2, 4, 8: about twice the GPUs in all) for
//! 1,000 + (i × 7,919 mod N) s at trace speed, as `benches/decisions.rs`
//! builds them; moldable kinds (the GENIE family, RIFLING, memory-efficiency)
//! get N GENIE tasks (seed 1, true-latency ECT) at the profile table's
//! speeds. The kinds that run a trained artefact (`rifling-frozen`,
//! `ldwp-frozen`) read the project's own (`policies/*-lab16.json`) on
//! `lab16`, the cluster it was trained on. Every kind has its default
//! options (`{"kind": KIND}` plus that file), built through the registry as
//! `--policy KIND` builds it; `iawp` is FIFO with the IAWP placement.
//!
//! The timed step is the simulation's first instant, t = 0: the N arrivals
//! reach the policy (`on_arrival`) and one scheduling pass asks it for
//! decisions until it waits, the engine validating and applying each (what
//! one pass costs in a run). The simulation, policy and workload are built
//! in the untimed setup (`iter_batched`) and dropped after timing stops. A
//! kind whose input cannot be built with its defaults is reported on stderr
//! and left out (none today).
//!
//! `cargo bench --bench policies -- genie/100 --quick` runs one case.
//!
//! A second group, `pollux-tick`, times one allocation decision of the
//! `pollux` policy (defaults: population 100, at most 100 generations, patience 5) with 10, 50
//! and 160 active work-defined jobs on the Pollux cluster (16 nodes × 4 T4),
//! the simulator's timing (`pollux-sim`): job i runs the i-th of the six
//! Pollux applications in turn, all submitted at t = 0. The untimed setup
//! runs the ticks at 60, 120 and 180 s (jobs start, profile themselves and
//! fit their models); the timed step runs the instants up to and including
//! the tick at 240 s (the tick's search, allocation and batch choice).
//! `cargo bench --bench policies -- pollux-tick --quick` runs it alone.
//!
//! A third group, `sia-round`, times one round of `sia` (its integer
//! program, placement and batch choice) with 10, 100 and 1,000 active
//! work-defined jobs, set up the same way on a three-type cluster of 192,
//! 384 and 1,920 GPUs; see [`sia_rounds`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::engine::ElasticTiming;
use dlsched::engine::{CheckpointModel, EngineConfig, Simulation};
use dlsched::ids::{JobId, VcId};
use dlsched::job::{ElasticSpec, JobSpec, JobTable, TaskSpec};
use dlsched::policy::Policy;
use dlsched::policy::genie::ProfilerConfig;
use dlsched::policy::pollux::{Pollux, PolluxOptions};
use dlsched::policy::registry::{Artefacts, BuildContext, Extensions, GenieRun, KINDS, PolicySpec};
use dlsched::policy::sia::{Sia, SiaOptions};
use dlsched::profile::coloc::ProfileInterference;
use dlsched::profile::db::ProfileDb;
use dlsched::profile::genie::{GenieTruth, GroundTruth};
use dlsched::profile::model::TableModel;
use dlsched::profile::pollux::{APPS, PolluxApps};
use dlsched::profile::rate::ProfileRate;
use dlsched::profile::{RateModel, TraceSpeed};
use dlsched::time::SimTime;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;
use dlsched::workload::genie::{EctBasis, GenieWorkloadSpec, TaskMix, generate_with};

/// Waiting jobs at the timed pass.
const SIZES: [u64; 3] = [10, 100, 1_000];

/// The simulation of `kind` with `n` jobs submitted at t = 0, before its
/// first instant.
fn at_start(kind: &str, n: u64, db: &Arc<ProfileDb>, artefacts: &Artefacts) -> Result<Simulation, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `iawp` is a kind of the registry; its options are FIFO's with the IAWP placement.
    let mut json = serde_json::json!({ "kind": kind });
    let trained = match kind {
        "rifling-frozen" => Some(("table", root.join("policies/rifling-lab16.json"))),
        "ldwp-frozen" => Some(("model", root.join("policies/ldwp-lab16.json"))),
        _ => None,
    };
    if let Some((key, path)) = &trained {
        json[*key] = serde_json::Value::String(path.display().to_string());
    }
    let spec: PolicySpec = serde_json::from_value(json).map_err(|e| e.to_string())?;
    let cluster_spec = if trained.is_some() {
        ClusterPreset::Lab16.spec()
    } else {
        ClusterSpec::uniform("bench", (n / 4).max(1) as u32, 8, "V100", 16384)
    };
    let mut cluster = Cluster::new(cluster_spec).map_err(|e| e.to_string())?;
    cluster.set_share_limits(spec.share_limits()).map_err(|e| e.to_string())?;
    let tasks = spec.moldable();
    let mut task_specs: HashMap<String, TaskSpec> = HashMap::new();
    let recs: Vec<TraceRecord> = if tasks {
        let g = GenieWorkloadSpec {
            jobs_per_hour: n as f64,
            hours: 1.0,
            ect: EctBasis::True,
            tasks: Some(n),
            mix: TaskMix::Paper,
        };
        let node = cluster.spec().nodes[0].clone();
        let truth = GroundTruth::with(db, &node.gpu_type, GenieTruth::Table);
        let generated = generate_with(&g, db, &truth, node.gpu_mem_mib, 1)?;
        let (mut recs, specs): (Vec<TraceRecord>, Vec<TaskSpec>) = generated.into_iter().unzip();
        for r in &mut recs {
            r.submit_ms = 0;
        }
        task_specs = specs.into_iter().enumerate().map(|(i, t)| (format!("t{i}"), t)).collect();
        recs
    } else {
        (0..n).map(|i| TraceRecord::new(format!("j{i}"), 0, (1_000 + (i * 7_919) % n) * 1000, 1 << (i % 4))).collect()
    };
    let mut w = build_workload(recs, &cluster, spec.placement().build());
    w.jobs.attach_tasks(&mut task_specs);
    let rate = |tasks: bool| -> Box<dyn RateModel> {
        if tasks {
            Box::new(ProfileRate::new(Box::new(TableModel::new(db.clone())), "profile-table"))
        } else {
            Box::new(TraceSpeed)
        }
    };
    let policy_rates = || rate(tasks);
    let mut ctx = BuildContext {
        cluster: &cluster,
        db: Some(db.clone()),
        db_name: "builtin".into(),
        seed: 1,
        tasks,
        artefacts,
        // GENIE's profiler measures the table truth, as the run's rate model.
        extensions: Extensions::default().with(GenieRun {
            profiler: ProfilerConfig { truth: GenieTruth::Table, ..Default::default() },
            profiles: None,
        }),
        rate_model: &policy_rates,
        predictor: Default::default(),
    };
    let policy = spec.build(&mut ctx).map_err(|e| e.to_string())?;
    // Kept with `..Default::default()` so that new engine options leave it alone.
    #[allow(clippy::needless_update)]
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let sim = Simulation::new(cluster, w.jobs, policy, rate(tasks), cfg)
        .with_checkpoint(CheckpointModel::HeliosTable)
        .with_interference(Box::new(ProfileInterference::new(db.clone())));
    Ok(if tasks {
        let db = db.clone();
        sim.with_task_memory(Box::new(move |s, g| dlsched::profile::resources::task_gpu_mem_mib(&db, s, g)))
    } else {
        sim
    })
}

fn passes(c: &mut Criterion) {
    let db = Arc::new(ProfileDb::builtin());
    let artefacts = Artefacts::default();
    let mut group = c.benchmark_group("pass");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    for &kind in KINDS {
        for n in SIZES {
            if let Err(e) = at_start(kind, n, &db, &artefacts) {
                eprintln!("policies: {kind}/{n} left out: {e}");
                continue;
            }
            group.bench_with_input(BenchmarkId::new(kind, n), &n, |b, &n| {
                b.iter_batched(
                    || at_start(kind, n, &db, &artefacts).expect("built once above"),
                    |mut sim| {
                        sim.step().expect("the pass at t = 0");
                        sim
                    },
                    BatchSize::LargeInput,
                );
            });
        }
    }
    group.finish();
}

/// Active jobs at the timed Pollux tick.
const POLLUX_SIZES: [u32; 3] = [10, 50, 160];

/// The tick the `pollux-tick` group times, s.
const POLLUX_TICK_S: u64 = 240;

/// `n` work-defined jobs at t = 0 under Pollux on its cluster, stepped to
/// just before the tick at [`POLLUX_TICK_S`].
fn pollux_before_tick(n: u32, apps: &PolluxApps) -> Simulation {
    let cluster = Cluster::new(ClusterPreset::Pollux.spec()).expect("the Pollux preset is valid");
    let policy = Pollux::new(PolluxOptions::default(), dlsched::rng::stream(1, "pollux"));
    elastic_before_tick(n, apps, cluster, Box::new(policy))
}

/// `n` work-defined jobs at t = 0 (job i runs the i-th Pollux application
/// in turn) under `policy` on `cluster`, stepped to just before the tick at
/// [`POLLUX_TICK_S`].
fn elastic_before_tick(n: u32, apps: &PolluxApps, cluster: Cluster, policy: Box<dyn Policy>) -> Simulation {
    let jobs: Vec<JobSpec> = (0..n)
        .map(|i| {
            let app = APPS[i as usize % APPS.len()];
            JobSpec {
                id: JobId(i),
                name: format!("{app}-{i}").into(),
                submit: SimTime::ZERO,
                duration_ms: 1000,
                gpus: 1,
                vc: VcId(0),
                recorded_shape: false,
                line: 0,
                recorded_split: vec![1].into(),
                task: None,
                extra: None,
            }
            .with_extra(|e| {
                e.elastic = Some(ElasticSpec {
                    app: app.into(),
                    tuned_gpus: 1,
                    tuned_bsz: 128,
                    adaptive: true,
                    work: None,
                    sample_budget: None,
                })
            })
        })
        .collect();
    #[allow(clippy::needless_update)]
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim = Simulation::new(cluster, JobTable::new(jobs), policy, Box::new(TraceSpeed), cfg)
        .with_progress_model(Box::new(apps.clone()))
        .with_elastic_timing(ElasticTiming::PolluxSim);
    while let Some(t) = sim.step().expect("the setup's instants") {
        if t >= SimTime::from_secs(POLLUX_TICK_S - 60) {
            break;
        }
    }
    sim
}

fn pollux_ticks(c: &mut Criterion) {
    let apps = PolluxApps::builtin();
    timed_ticks(c, "pollux-tick", &POLLUX_SIZES, &|n| pollux_before_tick(n, &apps));
}

/// Times, per size `n`, the instants from [`POLLUX_TICK_S`] − 60 s up to
/// and including the tick at [`POLLUX_TICK_S`] of `setup(n)`.
fn timed_ticks(c: &mut Criterion, name: &str, sizes: &[u32], setup: &dyn Fn(u32) -> Simulation) {
    let mut group = c.benchmark_group(name);
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5)).sample_size(10);
    for &n in sizes {
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_batched(
                || setup(n),
                |mut sim| {
                    while let Some(t) = sim.step().expect("the timed instants") {
                        if t >= SimTime::from_secs(POLLUX_TICK_S) {
                            break;
                        }
                    }
                    sim
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

/// Active jobs at the timed Sia round.
const SIA_SIZES: [u32; 3] = [10, 100, 1000];

/// A three-type cluster of `16 × scale` nodes of 4 GPUs per type (T4,
/// A100, RTX2080Ti): `192 × scale` GPUs. Every node
/// has 4 GPUs because the jobs progress by the builtin Pollux (T4) model on
/// every type, which rates 4-GPU nodes only: the bench times the policy, not
/// the model.
fn sia_cluster(scale: u32) -> Cluster {
    let mut nodes = Vec::new();
    for ty in ["T4", "A100", "RTX2080Ti"] {
        let one = ClusterSpec::uniform("x", 1, 4, ty, 16 * 1024).nodes.remove(0);
        nodes.extend(std::iter::repeat_n(one, (16 * scale) as usize));
    }
    let mut spec = ClusterSpec::uniform(&format!("sia-bench-x{scale}"), 1, 1, "T4", 16 * 1024);
    spec.nodes = nodes;
    Cluster::new(spec).expect("a valid cluster")
}

/// One Sia round with 10, 100 and 1,000 active work-defined jobs on a
/// three-type cluster of 192, 384 and 1,920 GPUs (`sia_cluster` ×1, ×2,
/// ×10; the last near the paper's 2,000-GPU scale), set up as
/// `pollux-tick`'s.
fn sia_rounds(c: &mut Criterion) {
    let apps = PolluxApps::builtin();
    timed_ticks(c, "sia-round", &SIA_SIZES, &|n| {
        let scale = match n {
            0..=10 => 1,
            11..=100 => 2,
            _ => 10,
        };
        elastic_before_tick(n, &apps, sia_cluster(scale), Box::new(Sia::new(SiaOptions::default())))
    });
}

/// Admitted active jobs of the `elasticflow-admission` group.
const ADMISSION_SIZES: [usize; 3] = [10, 100, 1_000];

/// One ElasticFlow admission decision (`dlsched::policy::elasticflow::admits`:
/// the admitted jobs' minimum satisfactory shares planned without and with
/// the newcomer) with `n` admitted active jobs on 64 × 8 A100s (512 GPUs),
/// 60-s slots. The jobs (built outside the timed closure) cycle through
/// ElasticFlow's A100 models and batches (its table's levels), 10^4 to
/// 10^6 iterations left and deadlines 1 to 24 h away, by a fixed
/// arithmetic pattern (no randomness); the newcomer's deadline is in the middle.
fn elasticflow_admission(c: &mut Criterion) {
    use dlsched::policy::elasticflow::{Levels, PlanJob, admits};
    use dlsched::profile::elasticflow::{EfGpu, ElasticFlowModel, GPU_COUNTS};
    let model = ElasticFlowModel::builtin(EfGpu::A100);
    let kinds: Vec<Levels> = [("resnet50", 256), ("vgg16", 256), ("bert", 128), ("gpt2", 128), ("inception3", 128)]
        .iter()
        .map(|&(app, bsz)| {
            Levels(GPU_COUNTS.iter().filter_map(|&n| model.throughput(app, bsz, n).ok().map(|r| (n, r))).collect())
        })
        .filter(|l| !l.0.is_empty())
        .collect();
    let mut group = c.benchmark_group("elasticflow-admission");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    for n in ADMISSION_SIZES {
        let mut jobs: Vec<(f64, f64, usize)> = (0..n)
            .map(|i| {
                let left = 10_000.0 + (i * 7_919 % 990_000) as f64;
                let deadline_s = 3_600.0 * (1 + i * 13 % 24) as f64;
                (deadline_s, left, i % kinds.len())
            })
            .collect();
        jobs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let admitted: Vec<PlanJob<'_>> = jobs
            .iter()
            .enumerate()
            .map(|(i, &(deadline_s, left, k))| PlanJob { job: JobId(i as u32), left, deadline_s, levels: &kinds[k] })
            .collect();
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                let newcomer =
                    PlanJob { job: JobId(n as u32), left: 50_000.0, deadline_s: 12.0 * 3_600.0, levels: &kinds[0] };
                admits(512, &admitted, newcomer, 60)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, passes, pollux_ticks, sia_rounds, elasticflow_admission);
criterion_main!(benches);
