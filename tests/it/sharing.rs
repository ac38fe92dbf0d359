//! GPU sharing in the engine: co-located rates by hand, a tenant leaving,
//! memory and guaranteed shares never over-committed on seeded random workloads.

use dlsched::cluster::{Cluster, ClusterSpec, ShareLimits};
use dlsched::engine::{EngineConfig, RunOutput, Simulation};
use dlsched::job::JobState;
use dlsched::metrics::{Recorder, Recording};
use dlsched::policy::{config::PolicyConfig, placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::TraceSpeed;
use dlsched::profile::coloc::ProfileInterference;
use dlsched::profile::db::{ColocRow, ModelInfo, ProfileDb, Split, ThroughputRow};
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;
use std::sync::Arc;

use crate::common::rec;

/// A profile database with one measured pair on `v100`: `x` (batch 32) keeps
/// 0.8 of its speed next to `y` (batch 64), which keeps 0.6.
fn pair_db() -> Arc<ProfileDb> {
    let row = ColocRow {
        gpu_type: "v100".into(),
        model_a: "x".into(),
        bsz_a: 32,
        model_b: "y".into(),
        bsz_b: 64,
        speed_a: 0.8,
        speed_b: 0.6,
        source: "hand".into(),
    };
    Arc::new(ProfileDb { colocation: vec![row], ..Default::default() })
}

fn job(id: &str, submit_s: u64, gpus: u32, duration_s: u64, model: &str, bsz: u32, mem: u64) -> TraceRecord {
    (rec(id, submit_s, gpus, duration_s)).with_extra(|e| {
        e.model = Some(model.into());
        e.local_bsz = Some(bsz);
        e.gpu_mem_mib = Some(mem);
    })
}

/// A run's engine output and what its recorder kept (derefs to the output).
struct Shared {
    out: RunOutput,
    rec: Recording,
}

impl std::ops::Deref for Shared {
    type Target = RunOutput;
    fn deref(&self) -> &RunOutput {
        &self.out
    }
}

fn run_shared(recs: Vec<TraceRecord>, spec: ClusterSpec, placement: PlacementKind, limits: ShareLimits) -> Shared {
    run_shared_on(pair_db(), recs, spec, placement, limits)
}

/// [`run_shared`] over the profile database `db` (co-location speeds and SM proxy).
fn run_shared_on(
    db: Arc<ProfileDb>,
    recs: Vec<TraceRecord>,
    spec: ClusterSpec,
    placement: PlacementKind,
    limits: ShareLimits,
) -> Shared {
    let mut cluster = Cluster::new(spec).unwrap();
    cluster.set_share_limits(limits).unwrap();
    let w = build_workload(recs, &cluster, placement.build());
    let p = PolicyConfig { order: QueueOrder::Fifo, backfill: true, placement }.build(1).unwrap();
    let mut sim = Simulation::new(
        cluster,
        w.jobs,
        p,
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .with_interference(Box::new(ProfileInterference::new(db.clone())));
    // The recorder reads `db` for the SM proxy.
    let mut rec = Recorder::new(sim.cluster(), sim.jobs(), true, Some(db));
    while sim.step_observed(&mut rec).unwrap().is_some() {
        sim.check_invariants().unwrap();
    }
    let out = sim.finish_observed(&mut rec);
    Shared { out, rec: rec.into_recording() }
}

fn times(out: &RunOutput) -> Vec<(u64, u64)> {
    out.jobs
        .iter()
        .map(|(_, s)| match s {
            JobState::Completed(d) => (d.start.as_ms(), d.end.as_ms()),
            other => panic!("not completed: {other:?}"),
        })
        .collect()
}

#[test]
fn two_colocated_jobs_by_hand_and_the_survivor_speeds_up() {
    // One GPU of 16,000 MiB; x needs 6,000 and y 8,000 MiB: 14,000 <= 15,200
    // (5 % headroom), so they share. Both 100 s of work, submitted at 0.
    // x runs at 0.8 and y at 0.6 while together; x ends at 100 / 0.8 = 125 s,
    // when y has done 125 * 0.6 = 75 s of work; alone again (rate 1) y does
    // the last 25 s and ends at 150 s.
    let recs = vec![job("x", 0, 1, 100, "x", 32, 6_000), job("y", 0, 1, 100, "y", 64, 8_000)];
    let out = run_shared(
        recs,
        ClusterSpec::uniform("1", 1, 1, "V100", 16_000),
        PlacementKind::ShareFirstFit,
        ShareLimits::default(),
    );
    assert_eq!(times(&out), vec![(0, 125_000), (0, 150_000)]);
    assert_eq!(out.stats.shared_launches, 2);
    // Counters: the interference model was asked and found the measured pair.
    let c: std::collections::BTreeMap<_, _> = out.model_counters.iter().copied().collect();
    assert_eq!(c["coloc_fallbacks"], 0);
    assert!(c["coloc_evaluations"] >= 2);
    // Summary: x achieved 100/125 = 0.8 of its isolated rate, y 100/150;
    // the one GPU was busy for the whole 150 s makespan; GPU-hours count
    // both tenants: (125 + 150) / 3600.
    let (s, _) = dlsched::metrics::summarize(&out, &out.rec, &[], 2);
    assert!((s.interference_slowdown_mean - (0.8 + 100.0 / 150.0) / 2.0).abs() < 1e-6, "{s:?}");
    assert_eq!((s.colocated_jobs, s.shared_launches, s.gpu_utilization), (2, 2, 1.0));
    assert!((s.gpu_hours - 275.0 / 3600.0).abs() < 1e-3);
    // Isolated times are the work at rate 1: 100 s each.
    for (_, s) in out.jobs.iter() {
        let JobState::Completed(d) = s else { unreachable!() };
        assert!(d.colocated);
        assert_eq!(d.isolated_ms, 100_000);
    }
}

/// A database with one pair measured on `v100`: model `m` at batch 32 next
/// to itself at speeds `sa`, `sb`.
fn self_pair_db(sa: f64, sb: f64) -> Arc<ProfileDb> {
    let row = ColocRow {
        gpu_type: "v100".into(),
        model_a: "m".into(),
        bsz_a: 32,
        model_b: "m".into(),
        bsz_b: 32,
        speed_a: sa,
        speed_b: sb,
        source: "hand".into(),
    };
    Arc::new(ProfileDb { colocation: vec![row], ..Default::default() })
}

#[test]
fn many_tenants_never_beat_the_best_measured_pair_nor_fall_below_time_slicing() {
    // Issue 13 point 3. One V100 of 16,000 MiB, up to 4 tenants, no
    // headroom; four jobs of model m (batch 32, 4,000 MiB, 100 s of work)
    // at 0 s, all four on the GPU at once.
    let four = || (0..4).map(|i| job(&format!("j{i}"), 0, 1, 100, "m", 32, 4_000)).collect::<Vec<_>>();
    let limits = ShareLimits { max_tenants: 4, mem_headroom: 0.0 };
    let gpu = || ClusterSpec::uniform("1", 1, 1, "V100", 16_000);
    // Pair speeds 1 (resnet18-cifar10 on V100 in Gavel's table): the product
    // would run all four at full speed, four GPUs' worth on one. The best
    // pair sum on v100 is 2, so each runs at 2 / 4 = 0.5 and ends at
    // 100 / 0.5 = 200 s.
    let out = run_shared_on(self_pair_db(1.0, 1.0), four(), gpu(), PlacementKind::ShareFirstFit, limits);
    assert_eq!(times(&out), vec![(0, 200_000); 4]);
    let c: std::collections::BTreeMap<_, _> = out.model_counters.iter().copied().collect();
    assert!(c["coloc_bounded_above"] > 0 && c["coloc_bounded_below"] == 0, "{c:?}");
    // Pair speeds 0.3 (slower than time slicing even for two): the product
    // gives 0.3^3 = 0.027 each, 0.108 of the GPU together. Floor: 1 - 0.05
    // shared by four, 0.2375 each: 100 / 0.2375 = 421.0526 s -> 421,053 ms.
    let out = run_shared_on(self_pair_db(0.3, 0.3), four(), gpu(), PlacementKind::ShareFirstFit, limits);
    assert_eq!(times(&out), vec![(0, 421_053); 4]);
    // Two of them alone: the measured pair sums to 0.6 < 0.95, so the GPU
    // time-slices them, 0.475 each: 100 / 0.475 = 210.5263 s -> 210,527 ms.
    let two: Vec<TraceRecord> = four().into_iter().take(2).collect();
    let out = run_shared_on(self_pair_db(0.3, 0.3), two, gpu(), PlacementKind::ShareFirstFit, limits);
    assert_eq!(times(&out), vec![(0, 210_527); 2]);
    let c: std::collections::BTreeMap<_, _> = out.model_counters.iter().copied().collect();
    assert!(c["coloc_bounded_below"] > 0, "{c:?}");
}

/// Issue 13 point 5: effective utilisation counts the work done. A database
/// where x (batch 32, 1.57 GFLOP per sample, 0.016 s per iteration alone on
/// a V100) keeps 50.24 / 0.016 = 3,140 GFLOP/s busy, 0.2 of the V100's
/// 15,700, and y (batch 64, 0.0128 s) 100.48 / 0.0128 = 7,850, 0.5; the pair
/// x/y runs at 0.8/0.6.
#[test]
fn effective_utilisation_counts_the_work_done_by_hand() {
    let model = |m: &str| ModelInfo {
        model: m.into(),
        family: "cnn".into(),
        params_m: 1.0,
        gflops_per_sample: 1.57,
        source: "hand".into(),
        state_bytes_per_param: 16.0,
        act_mib_per_sample: 1.0,
        mem_source: "hand".into(),
    };
    let tp = |m: &str, bsz: u32, t: f64| ThroughputRow {
        model: m.into(),
        gpu_type: "v100".into(),
        local_bsz: bsz,
        gpus: 1,
        split: Split::Exact(vec![1]),
        iter_time_s: t,
        source: "hand".into(),
    };
    let db = Arc::new(ProfileDb {
        throughput: vec![tp("x", 32, 0.016), tp("y", 64, 0.0128)],
        models: vec![model("x"), model("y")],
        ..ProfileDb::clone(&pair_db())
    });
    // x and y share the GPU from 0 s (100 s of work each): x ends at 125 s,
    // y runs alone from 125 s to 150 s. Busy SMs: 0.2 × 0.8 + 0.5 × 0.6 =
    // 0.46 for 125 s, then 0.5 for 25 s: (57.5 + 12.5) / 150 = 0.466667 of
    // the GPU over the 150 s makespan. (Summing the isolated figures,
    // 0.7 for 125 s, would give 100 / 150 = 0.666667.)
    let recs = vec![job("x", 0, 1, 100, "x", 32, 6_000), job("y", 0, 1, 100, "y", 64, 8_000)];
    let out = run_shared_on(
        db,
        recs,
        ClusterSpec::uniform("1", 1, 1, "V100", 16_000),
        PlacementKind::ShareFirstFit,
        ShareLimits::default(),
    );
    assert_eq!(times(&out), vec![(0, 125_000), (0, 150_000)]);
    let (s, _) = dlsched::metrics::summarize(&out, &out.rec, &[], 2);
    let u = s.gpu_utilization_effective_mean.unwrap();
    assert!((u - 70.0 / 150.0).abs() < 1e-6, "{u}");
}

#[test]
fn memory_that_does_not_fit_waits_for_an_idle_gpu() {
    // 9,000 + 8,000 > 15,200: y waits until x leaves at 100 s, then runs alone.
    let recs = vec![job("x", 0, 1, 100, "x", 32, 9_000), job("y", 0, 1, 100, "y", 64, 8_000)];
    let out = run_shared(
        recs,
        ClusterSpec::uniform("1", 1, 1, "V100", 16_000),
        PlacementKind::ShareFirstFit,
        ShareLimits::default(),
    );
    assert_eq!(times(&out), vec![(0, 100_000), (100_000, 200_000)]);
    // With no headroom they fit: 17,000 > 16,000 still does not.
    let recs = vec![job("x", 0, 1, 100, "x", 32, 8_000), job("y", 0, 1, 100, "y", 64, 8_000)];
    let none = ShareLimits { mem_headroom: 0.0, ..ShareLimits::default() };
    let out = run_shared(recs, ClusterSpec::uniform("1", 1, 1, "V100", 16_000), PlacementKind::ShareFirstFit, none);
    assert_eq!(times(&out), vec![(0, 125_000), (0, 150_000)]);
}

#[test]
fn a_distributed_tenant_runs_at_its_slowest_gpu() {
    // z (2 GPUs, model x) shares GPU 0 with y from 0 s; GPU 1 is its alone.
    // Its speed is min(0.8, 1) = 0.8 while y is there. y (50 s of work at 0.6)
    // ends at 83,334 ms (50,000 / 0.6 rounded up to the ms); z has then done
    // 83,334 * 0.8 = 66,667.2 ms of its 100,000, and finishes the rest alone:
    // 83,334 + 33,332.8 -> 116,667 ms.
    let recs = vec![job("y", 0, 1, 50, "y", 64, 4_000), job("z", 0, 2, 100, "x", 32, 4_000)];
    let out = run_shared(
        recs,
        ClusterSpec::uniform("2", 1, 2, "V100", 16_000),
        PlacementKind::ShareFirstFit,
        ShareLimits::default(),
    );
    assert_eq!(times(&out), vec![(0, 83_334), (0, 116_667)]);
}

#[test]
fn memory_and_shares_are_never_over_committed_on_random_workloads() {
    use rand::{Rng, SeedableRng};
    let mut checked = 0;
    for seed in 1..=6u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let recs: Vec<TraceRecord> = (0..200)
            .map(|i| {
                let gpus = [1, 1, 1, 2, 4][rng.gen_range(0..5)];
                let mut r = job(
                    &format!("j{i}"),
                    rng.gen_range(0..3_600),
                    gpus,
                    rng.gen_range(10..2_000),
                    ["x", "y", "w"][rng.gen_range(0..3)],
                    [32, 64][rng.gen_range(0..2)],
                    rng.gen_range(500..16_000),
                );
                if gpus == 1 && rng.gen_bool(0.3) {
                    r.extra_mut().gpu_milli = Some(rng.gen_range(100..1000));
                }
                r
            })
            .collect();
        for placement in [
            PlacementKind::ShareFirstFit,
            PlacementKind::ShareBestFit,
            PlacementKind::Fgd,
            PlacementKind::MemeffPack,
            PlacementKind::Iawp,
        ] {
            let limits = ShareLimits { max_tenants: 2 + (seed as u32 % 3), mem_headroom: 0.05 };
            // run_shared checks every invariant after every instant, including
            // memory <= capacity and guaranteed shares <= 1,000 milli per GPU.
            let out = run_shared(recs.clone(), ClusterSpec::uniform("2x4", 2, 4, "V100", 16_000), placement, limits);
            assert!(out.jobs.iter().all(|(_, s)| matches!(s, JobState::Completed(_))));
            assert!(out.stats.shared_launches == 200);
            checked += 1;
        }
    }
    assert_eq!(checked, 30);
}

/// Memory-efficiency ranking by hand (`dlsched::policy::memeff`), on one node
/// of 3 V100s (16,000 MiB): GPU 0 holds resnet18-cifar10 at batch 100
/// (C = 3.34 × 100 = 334 GFLOP, 2,000 MiB), GPU 1 vgg16-imagenet at batch
/// 10 (928 GFLOP, 4,000 MiB), GPU 2 is idle.
#[test]
fn memory_efficiency_ranks_gpus_by_hand() {
    use dlsched::ids::{GpuId, JobId, VcId};
    use dlsched::policy::View;
    use dlsched::policy::memeff::MemeffPack;
    use dlsched::policy::placement::{Placement, Request};
    use dlsched::time::SimTime;

    let mut cluster = Cluster::new(ClusterSpec::uniform("t", 1, 3, "V100", 16_000)).unwrap();
    let recs = vec![
        job("a", 0, 1, 10, "resnet18-cifar10", 100, 2_000),
        job("b", 0, 1, 10, "vgg16-imagenet", 10, 4_000),
        job("j", 0, 1, 10, "resnet50-imagenet", 10, 4_000),
        job("k", 0, 1, 10, "resnet50-imagenet", 40, 2_000),
        rec("u", 0, 1, 10),
    ];
    let w = build_workload(recs, &cluster, PlacementKind::MemeffPack.build());
    assert_eq!(w.jobs.len(), 5);
    cluster.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 2_000, 0).unwrap();
    cluster.allocate_shared(JobId(1), VcId(0), &[GpuId(1)], 4_000, 0).unwrap();
    let view = View { now: SimTime::ZERO, cluster: &cluster, jobs: &w.jobs };
    let mut me = MemeffPack::default();
    // j: C = 24.54 × 10 = 245.4 GFLOP, 4,000 MiB. ME after joining:
    // GPU 0 (245.4 + 334) / 6,000 = 0.09657, GPU 1 (245.4 + 928) / 8,000 =
    // 0.14668, GPU 2 245.4 / 4,000 = 0.06135: GPU 1.
    let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(near(me.gpu_me(&cluster, &w.jobs, GpuId(0), 245.4, 4_000), 579.4 / 6_000.0));
    assert!(near(me.gpu_me(&cluster, &w.jobs, GpuId(1), 245.4, 4_000), 1_173.4 / 8_000.0));
    assert!(near(me.gpu_me(&cluster, &w.jobs, GpuId(2), 245.4, 4_000), 245.4 / 4_000.0));
    let req = |mem: u64| Request { min_gpu_mem_mib: mem, ..Request::new(VcId(0), 1) };
    let mut out = Vec::new();
    assert!(me.place_job(&view, JobId(2), req(4_000), &mut out));
    assert_eq!(out, vec![GpuId(1)]);
    // k: C = 24.54 × 40 = 981.6 GFLOP, 2,000 MiB; alone 0.4908, with a
    // (981.6 + 334) / 4,000 = 0.3289, with b (981.6 + 928) / 6,000 = 0.3183:
    // the idle GPU 2.
    out.clear();
    assert!(me.place_job(&view, JobId(3), req(2_000), &mut out));
    assert_eq!(out, vec![GpuId(2)]);
    // Unknown memory: a whole GPU's, so only the idle GPU (exclusive fallback).
    out.clear();
    assert!(me.place_job(&view, JobId(4), req(0), &mut out));
    assert_eq!(out, vec![GpuId(2)]);
    cluster.allocate_shared(JobId(3), VcId(0), &[GpuId(2)], 2_000, 0).unwrap();
    let view = View { now: SimTime::ZERO, cluster: &cluster, jobs: &w.jobs };
    out.clear();
    // j again: GPU 2 now holds k: (245.4 + 981.6) / 6,000 = 0.2045 beats GPU 1's 0.14668.
    assert!(me.place_job(&view, JobId(2), req(4_000), &mut out));
    assert_eq!(out, vec![GpuId(2)]);
}

/// The sharing metrics on a tiny run by hand: one node of 2 V100s, first-fit
/// sharing; x (8,000 MiB, 100 s) and y (4,000 MiB, 100 s) share GPU 0 from
/// t = 0 at speeds 0.8 and 0.6, x ends at 125 s, y at 150 s; z (1,000 MiB,
/// 10 s) arrives at 200 s and runs alone on GPU 0 until 210 s.
#[test]
fn sharing_metrics_by_hand() {
    let recs = vec![
        job("x", 0, 1, 100, "x", 32, 8_000),
        job("y", 0, 1, 100, "y", 64, 4_000),
        job("z", 200, 1, 10, "x", 32, 1_000),
    ];
    let out = run_shared(
        recs,
        ClusterSpec::uniform("t", 1, 2, "V100", 16_000),
        PlacementKind::ShareFirstFit,
        ShareLimits::default(),
    );
    let (s, _) = dlsched::metrics::summarize(&out, &out.rec, &[], 3);
    assert_eq!(s.makespan_s, 210.0);
    let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
    // GPU 0 allocated (capped at 1) for 150 + 10 s of 2 × 210 GPU-s.
    let (alloc, util, mem, frag) = (
        s.gpu_allocation_mean.unwrap(),
        s.gpu_utilization_effective_mean.unwrap(),
        s.gpu_memory_utilization_mean.unwrap(),
        s.fragmentation_mean.unwrap(),
    );
    assert!(near(alloc, 160.0 / 420.0), "{alloc}");
    // Models x, y have no GFLOPs in the builtin database: SM estimate 1 per job, capped at 1.
    assert!(near(util, 160.0 / 420.0));
    // Memory: 12,000 / 16,000 for 125 s, 4,000 / 16,000 for 25 s, 1,000 / 16,000 for 10 s.
    assert!(near(mem, (0.75 * 125.0 + 0.25 * 25.0 + 0.0625 * 10.0) / 420.0));
    // One-GPU requests of 0.5, 0.25, 0.1 GPU: an idle GPU is always left or
    // GPU 0 is at the tenant cap, so nothing fragments.
    assert_eq!(frag, 0.0);
    // Horizon = last submission (200 s): x and y finished by then, z not.
    assert!(near(s.completion_rate, 2.0 / 3.0));
    assert_eq!(s.queue_delay_mean_whole_s, Some(0.0));
    assert_eq!(s.queue_delay_mean_fractional_s, None);
    // Interference: x 100 / 125 = 0.8, y 100 / 150.
    assert!(near(s.interference_slowdown_mean, (0.8 + 100.0 / 150.0) / 2.0));
}

/// IAWP admission by hand: one V100 (16,000 MiB) holds a (0.4 GPU, 8,000
/// MiB): vector (0.4, 0.5). Waiting, in queue order: c (0.3, 7,000 MiB):
/// (0.3, 0.4375), cosine 0.33875 / (0.640312 × 0.530477) = 0.9973; b (0.3,
/// 1,600 MiB): (0.3, 0.1), cosine 0.17 / (0.640312 × 0.316228) = 0.8396.
/// The GPU's SM estimate 0.4 < 0.8 and memory 0.5 < 0.9, so it admits b, the
/// less similar, although c is ahead of it.
#[test]
fn iawp_admits_the_least_similar_job() {
    use dlsched::ids::{GpuId, JobId, VcId};
    use dlsched::policy::iawp::Iawp;
    use dlsched::policy::{Decision, Policy, View};
    use dlsched::profile::resources::cosine;
    use dlsched::time::SimTime;

    let frac = |id: &str, submit: u64, milli: u32, mem: u64| {
        (rec(id, submit, 1, 10)).with_extra(|e| {
            e.gpu_milli = Some(milli);
            e.gpu_mem_mib = Some(mem);
        })
    };
    let mut cluster = Cluster::new(ClusterSpec::uniform("t", 1, 1, "V100", 16_000)).unwrap();
    let w = build_workload(
        vec![frac("a", 0, 400, 8_000), frac("c", 1, 300, 7_000), frac("b", 2, 300, 1_600)],
        &cluster,
        PlacementKind::Iawp.build(),
    );
    assert_eq!(w.jobs.len(), 3);
    cluster.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 8_000, 400).unwrap();
    let view = View { now: SimTime(2_000), cluster: &cluster, jobs: &w.jobs };
    assert_eq!(Iawp::new(false).vector(&view, JobId(0), GpuId(0)), [0.4, 0.5]);
    assert_eq!(Iawp::new(false).vector(&view, JobId(2), GpuId(0)), [0.3, 0.1]);
    assert!((cosine(&[0.4, 0.5], &[0.3, 0.1]) - 0.839_56).abs() < 1e-4);
    assert!((cosine(&[0.4, 0.5], &[0.3, 0.4375]) - 0.997_29).abs() < 1e-4);
    let mut p = Iawp::new(false);
    p.on_arrival(JobId(1), &view);
    p.on_arrival(JobId(2), &view);
    assert_eq!(p.decide(&view), Decision::Colocate { job: JobId(2), gpus: vec![GpuId(0)] });
    // With b admitted the GPU has 2 tenants, the cap: c waits.
    cluster.allocate_shared(JobId(2), VcId(0), &[GpuId(0)], 1_600, 300).unwrap();
    let view = View { now: SimTime(2_000), cluster: &cluster, jobs: &w.jobs };
    assert_eq!(p.decide(&view), Decision::Wait);
    // Thresholds: a tenant at 0.85 GPU (SM estimate 0.85 >= 0.8) admits nobody,
    // although a 0.1-GPU job would fit.
    let mut cluster = Cluster::new(ClusterSpec::uniform("t", 1, 1, "V100", 16_000)).unwrap();
    let w =
        build_workload(vec![frac("a", 0, 850, 2_000), frac("d", 1, 100, 1_000)], &cluster, PlacementKind::Iawp.build());
    cluster.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 2_000, 850).unwrap();
    let view = View { now: SimTime(1_000), cluster: &cluster, jobs: &w.jobs };
    let mut p = Iawp::new(true);
    p.on_arrival(JobId(1), &view);
    assert!(cluster.can_host(GpuId(0), VcId(0), 1_000, 100));
    assert_eq!(p.decide(&view), Decision::Wait);
}

/// Issue 13 point 4: a run's `--profiles` directory drives its co-location
/// speeds, memory-efficiency ranks and SM proxy. The directory holds the
/// builtin tables with three changes:
/// - co-location: only two v100 pairs, resnet18-cifar10/resnet50-cifar10
///   (batch 32 each) at 0.5/0.5 and resnet50-imagenet/resnet50-cifar10 at
///   0.25/0.25;
/// - resnet50-cifar10 at 100,000 GFLOP per sample (builtin 0.5006);
/// - resnet18-cifar10: one v100 iteration time, 0.02 s at batch 32 on one
///   GPU, and 4.90625 GFLOP per sample (builtin 3.34), so its SM proxy is
///   4.90625 × 32 / 0.02 / 15,700 = 0.5.
#[test]
fn a_profiles_directory_drives_colocation_memory_efficiency_and_the_sm_proxy() {
    use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
    use dlsched::trace::{ColumnMap, TraceFormat};

    let mut db = ProfileDb::builtin();
    let pair = |a: &str, b: &str, s: f64| ColocRow {
        gpu_type: "v100".into(),
        model_a: a.into(),
        bsz_a: 32,
        model_b: b.into(),
        bsz_b: 32,
        speed_a: s,
        speed_b: s,
        source: "hand".into(),
    };
    db.colocation =
        vec![pair("resnet18-cifar10", "resnet50-cifar10", 0.5), pair("resnet50-imagenet", "resnet50-cifar10", 0.25)];
    for m in &mut db.models {
        match m.model.as_str() {
            "resnet50-cifar10" => m.gflops_per_sample = 1e5,
            "resnet18-cifar10" => m.gflops_per_sample = 4.90625,
            _ => {}
        }
    }
    db.throughput.retain(|r| !(r.model == "resnet18-cifar10" && r.gpu_type == "v100"));
    db.throughput.push(ThroughputRow {
        model: "resnet18-cifar10".into(),
        gpu_type: "v100".into(),
        local_bsz: 32,
        gpus: 1,
        split: Split::Exact(vec![1]),
        iter_time_s: 0.02,
        source: "hand".into(),
    });
    let d = tempfile::tempdir().unwrap();
    let profiles = d.path().join("profiles");
    db.write_dir(&profiles).unwrap();
    let run = |jobs: &str, gpus: u32, placement: PlacementKind| {
        let trace = d.path().join(format!("jobs-{gpus}.csv"));
        std::fs::write(&trace, format!("job_id,submit_time,duration,gpu_num,model,local_bsz\n{jobs}")).unwrap();
        let spec = RunSpec {
            policy: PolicyConfig { order: QueueOrder::Fifo, backfill: false, placement }.into(),
            profiles: Some(profiles.clone()),
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Trace { path: trace, format: TraceFormat::JobsCsv, columns: ColumnMap::default() },
                ClusterChoice::Uniform { nodes: 1, gpus_per_node: gpus, gpu_type: Some("v100".into()) },
            )
        };
        run_one(&spec, |_| {}).unwrap()
    };
    // Memory-efficiency on two V100s, a (resnet18-cifar10), b
    // (resnet50-imagenet), j (resnet50-cifar10), batch 32, 100 s each, all at
    // 0 s; memory per GPU (the database's estimate): a 1,302, b 4,031, j
    // 1,349 MiB; C = GFLOP per sample × 32: a 157, b 785.28, j 3,200,000.
    // a: both GPUs idle and equal: GPU 0. b: with a (785.28 + 157) / 5,333
    // = 0.177 < alone 785.28 / 4,031 = 0.195: GPU 1. j: with a 3,200,157 /
    // 2,651 = 1,207 > with b 3,200,785 / 5,380 = 595: GPU 0, beside a. (With
    // the builtin 0.5006 GFLOP, j would rate 122.9 / 2,651 = 0.046 beside a
    // and 801.3 / 5,380 = 0.149 beside b, and join b.) a and j share at the
    // directory's 0.5: both end at 200 s; b runs alone, 100 s.
    let r = run(
        "a,0,100,1,resnet18-cifar10,32\nb,0,100,1,resnet50-imagenet,32\nj,0,100,1,resnet50-cifar10,32\n",
        2,
        PlacementKind::MemeffPack,
    );
    assert_eq!(times(&r.output), vec![(0, 200_000), (0, 100_000), (0, 200_000)]);
    let mem: Vec<Option<u64>> = r.output.jobs.specs().iter().map(|s| s.gpu_mem_mib()).collect();
    assert_eq!(mem, vec![Some(1_302), Some(4_031), Some(1_349)]);
    // The SM proxy: a alone on one V100 keeps 0.5 of it busy all along.
    let r = run("a,0,100,1,resnet18-cifar10,32\n", 1, PlacementKind::Consolidate);
    let u = r.summary.gpu_utilization_effective_mean.unwrap();
    assert!((u - 0.5).abs() < 1e-6, "{u}");
    // A sweep's `profiles` key (relative to the experiment file) does the same.
    let toml = d.path().join("e.toml");
    std::fs::write(
        &toml,
        "question = \"profiles\"\n[base]\ntrace = \"jobs-2.csv\"\nformat = \"jobs-csv\"\nnodes = 1\n\
         gpus_per_node = 2\ngpu_type = \"v100\"\nplacement = \"memeff-pack\"\nsample_interval = 0\n\
         [sweep]\nprofiles = [\"profiles\"]\n",
    )
    .unwrap();
    let e = dlsched::sweep::Experiment::load(&toml).unwrap();
    let out = d.path().join("sweep");
    let o = dlsched::sweep::run_sweep(&e, &out, 1, None, false, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.failed.len()), (1, 0));
    let jobs = std::fs::read_to_string(out.join("runs").join(&e.runs[0].id).join("jobs.csv")).unwrap();
    let header: Vec<&str> = jobs.lines().next().unwrap().split(',').collect();
    let end = header.iter().position(|&c| c == "end_s").unwrap();
    let ends: Vec<&str> = jobs.lines().skip(1).map(|l| l.split(',').nth(end).unwrap()).collect();
    assert_eq!(ends, vec!["200", "100", "200"]);
}

/// IAWP's predicted admission (issue 17) by hand. One V100 (16,000 MiB,
/// tenant cap 2) holds a = x at batch 32 (4,000 MiB). Measured V100 pairs:
/// x/y 0.8/0.6 (sum 1.4 = S_max), x/z 0.5/0.45 (sum 0.95 = the time-slicing
/// floor 1 − 0.05: kept). Waiting, in queue order: c = z at 16 (2,000 MiB),
/// b = y at 64 (4,000 MiB).
/// - θ_speed 0.5, θ_mem 1: c leaves a at 0.5 but itself at 0.45 < 0.5; b
///   gives a 0.8, b 0.6 (sum 1.4): b, although c is ahead.
/// - θ_speed 0.65: b's 0.6 < 0.65 and c's 0.45 too: nobody.
/// - θ_speed 0.45, θ_mem 0.45 (7,200 MiB): b would hold 8,000 > 7,200; c
///   6,000 <= 7,200 with speeds 0.5 and 0.45 >= 0.45: c.
#[test]
fn iawp_predicted_admission_by_hand() {
    use dlsched::ids::{GpuId, JobId, VcId};
    use dlsched::policy::iawp::{Iawp, Predicted};
    use dlsched::policy::{Decision, Policy, View};
    use dlsched::time::SimTime;

    let row = |b: &str, bb: u32, sa: f64, sb: f64| ColocRow {
        gpu_type: "v100".into(),
        model_a: "x".into(),
        bsz_a: 32,
        model_b: b.into(),
        bsz_b: bb,
        speed_a: sa,
        speed_b: sb,
        source: "hand".into(),
    };
    let db =
        Arc::new(ProfileDb { colocation: vec![row("y", 64, 0.8, 0.6), row("z", 16, 0.5, 0.45)], ..Default::default() });
    let mut cluster = Cluster::new(ClusterSpec::uniform("t", 1, 1, "V100", 16_000)).unwrap();
    let w = build_workload(
        vec![
            job("a", 0, 1, 10, "x", 32, 4_000),
            job("c", 1, 1, 10, "z", 16, 2_000),
            job("b", 2, 1, 10, "y", 64, 4_000),
        ],
        &cluster,
        PlacementKind::Iawp.build(),
    );
    assert_eq!(w.jobs.len(), 3);
    cluster.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 4_000, 0).unwrap();
    let view = View { now: SimTime(2_000), cluster: &cluster, jobs: &w.jobs };
    let decide = |theta_speed: f64, theta_mem: f64| {
        let mut p = Iawp::new(false)
            .with_profiles(db.clone())
            .with_predicted(Predicted { theta_speed, theta_mem }, ProfileInterference::new(db.clone()));
        p.on_arrival(JobId(1), &view);
        p.on_arrival(JobId(2), &view);
        p.decide(&view)
    };
    assert_eq!(decide(0.5, 1.0), Decision::Colocate { job: JobId(2), gpus: vec![GpuId(0)] });
    assert_eq!(decide(0.65, 1.0), Decision::Wait);
    assert_eq!(decide(0.45, 0.45), Decision::Colocate { job: JobId(1), gpus: vec![GpuId(0)] });
    // The cosine rule (no predicted admission) on the same GPU: the models
    // have no SM figure, so a's estimate counts 1 >= 0.8 and it admits nobody.
    let mut p = Iawp::new(false).with_profiles(db.clone());
    p.on_arrival(JobId(1), &view);
    p.on_arrival(JobId(2), &view);
    assert_eq!(p.decide(&view), Decision::Wait);
}
