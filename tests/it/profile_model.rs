//! The performance models and the profile-driven rate model: exact rates from
//! a hand-made profile, counted fallbacks, locality on the builtin tables, and
//! the Philly replay under the profile model.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::ids::{JobId, VcId};
use dlsched::job::{JobSpec, JobState, JobTable};
use dlsched::policy::{placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::RateModel;
use dlsched::profile::db::{ModelInfo, ProfileDb, Split, ThroughputRow};
use dlsched::profile::model::{PerfModel, TableModel};
use dlsched::profile::rate::ProfileRate;
use dlsched::time::SimTime;

use crate::common::{policy, shared};

fn row(gpus: u32, split: Split, bsz: u32, t: f64) -> ThroughputRow {
    ThroughputRow {
        model: "m".into(),
        gpu_type: "g".into(),
        local_bsz: bsz,
        gpus,
        split,
        iter_time_s: t,
        source: "hand".into(),
    }
}

/// Model `m` on GPU type `g` at batch 32: 1 GPU 0.10 s, 2 GPUs on one server
/// 0.12 s, 2 GPUs on two servers 0.20 s per iteration; 1 GPU at batch 64:
/// 0.16 s. `m` and `m2` are CNNs; `m2` has no measurements.
fn hand_db() -> &'static ProfileDb {
    let info = |m: &str| ModelInfo {
        model: m.into(),
        family: "cnn".into(),
        params_m: 1.0,
        gflops_per_sample: 1.0,
        source: "hand".into(),
        state_bytes_per_param: 12.0,
        act_mib_per_sample: 1.0,
        mem_source: "hand".into(),
    };
    Box::leak(Box::new(ProfileDb {
        throughput: vec![
            row(1, Split::Exact(vec![1]), 32, 0.10),
            row(1, Split::Exact(vec![1]), 64, 0.16),
            row(2, Split::Exact(vec![2]), 32, 0.12),
            row(2, Split::Exact(vec![1, 1]), 32, 0.20),
        ],
        colocation: vec![],
        multinode: vec![],
        models: vec![info("m"), info("m2")],
        memory: vec![],
    }))
}

fn job(name: &str, gpus: u32, recorded: Vec<u32>, model: &str, duration_s: u64) -> JobSpec {
    JobSpec {
        id: JobId(0),
        name: name.into(),
        submit: SimTime::ZERO,
        duration_ms: duration_s * 1000,
        gpus,
        vc: VcId(0),
        recorded_shape: false,
        line: 0,
        recorded_split: recorded.into(),
        task: None,
        extra: Some(Box::new(dlsched::job::JobExtra {
            model: Some(model.into()),
            local_bsz: Some(32),
            ..Default::default()
        })),
    }
}

#[test]
fn a_job_spread_worse_than_recorded_runs_longer_by_the_measured_ratio() {
    // Recorded on one server ([2], 0.12 s/iter); the cluster has two 1-GPU
    // nodes, so it runs on [1, 1] (0.20 s/iter): rate 0.12 / 0.20 = 0.6, and
    // 60 s of trace run time takes 60 / 0.6 = 100 s. A 1-GPU job recorded on
    // [1] runs as recorded: rate 1, exactly its 30 s.
    let cluster = Cluster::new(ClusterSpec::uniform("2x1", 2, 1, "g", 16384)).unwrap();
    let jobs = JobTable::new(vec![job("spread", 2, vec![2], "m", 60)]);
    let rate = ProfileRate::new(Box::new(TableModel::new(hand_db())), "profile-table");
    let p = policy(QueueOrder::Fifo, false, PlacementKind::Consolidate).build(1).unwrap();
    let out =
        Simulation::new(cluster, jobs, p, Box::new(rate), EngineConfig { sample_interval_ms: 0, ..Default::default() })
            .run()
            .unwrap();
    let JobState::Completed(d) = out.jobs.state(JobId(0)) else { panic!("unfinished") };
    assert_eq!((d.start.as_ms(), d.end.as_ms()), (0, 100_000));

    let cluster = Cluster::new(ClusterSpec::uniform("2x1", 2, 1, "g", 16384)).unwrap();
    let jobs = JobTable::new(vec![job("one", 1, vec![1], "m", 30)]);
    let rate = ProfileRate::new(Box::new(TableModel::new(hand_db())), "profile-table");
    let p = policy(QueueOrder::Fifo, false, PlacementKind::Consolidate).build(1).unwrap();
    let out =
        Simulation::new(cluster, jobs, p, Box::new(rate), EngineConfig { sample_interval_ms: 0, ..Default::default() })
            .run()
            .unwrap();
    let JobState::Completed(d) = out.jobs.state(JobId(0)) else { panic!("unfinished") };
    assert_eq!(d.end.as_ms(), 30_000);
}

#[test]
fn fallbacks_follow_the_documented_rule_and_are_counted() {
    let t = TableModel::new(hand_db());
    // Measured point: no fallback.
    let e = t.iter_time("m", "g", 32, &[2]);
    assert_eq!(e.iter_time_s, 0.12);
    assert!(e.fallbacks.none());
    // Batch 48 between 32 (0.10) and 64 (0.16): 0.10 + 0.06 * 16 / 32 = 0.13.
    let e = t.iter_time("m", "g", 48, &[1]);
    assert!((e.iter_time_s - 0.13).abs() < 1e-12 && e.fallbacks.batch && !e.fallbacks.split);
    // Above the largest batch, proportional: 0.16 * 128 / 64 = 0.32.
    assert!((t.iter_time("m", "g", 128, &[1]).iter_time_s - 0.32).abs() < 1e-12);
    // Below the smallest, the line through the two smallest points,
    // 0.10 - 0.06 * 16 / 32 = 0.07, within [0.10 * 16 / 32, 0.10] = [0.05, 0.10].
    assert!((t.iter_time("m", "g", 16, &[1]).iter_time_s - 0.07).abs() < 1e-12);
    // At batch 2: 0.10 - 0.06 * 30 / 32 = 0.04375, still above proportional 0.00625.
    assert!((t.iter_time("m", "g", 2, &[1]).iter_time_s - 0.04375).abs() < 1e-12);
    // A split measured only at batch 32, asked at batch 64: one point, proportional.
    assert!((t.iter_time("m", "g", 64, &[2]).iter_time_s - 0.24).abs() < 1e-12);
    // GPU type `k80` unmeasured for any model: the best-covered type `g`, ratio 1.0.
    let e = t.iter_time("m", "K80", 32, &[1]);
    assert!(e.iter_time_s == 0.10 && e.fallbacks.gpu_type && !e.fallbacks.model);
    // `m2` (a CNN, unmeasured) borrows `m`, the measured CNN.
    let e = t.iter_time("m2", "g", 32, &[1, 1]);
    assert!(e.iter_time_s == 0.20 && e.fallbacks.model);
    // 4 GPUs on 4 servers, unmeasured: weak scaling from the nearest GPU count
    // with no more servers; 2 GPUs, and of [1,1] and [2] the first in order: 0.20.
    let e = t.iter_time("m", "g", 32, &[1, 1, 1, 1]);
    assert!(e.iter_time_s == 0.20 && e.fallbacks.split);

    // Through the rate model, every evaluation and fallback is counted.
    let rate = ProfileRate::new(Box::new(TableModel::new(hand_db())), "profile-table");
    let cluster = Cluster::new(ClusterSpec::uniform("4x1", 4, 1, "g", 16384)).unwrap();
    let gpus: Vec<_> = (0..4).map(dlsched::ids::GpuId).collect();
    let r = rate.rate(&job("x", 4, vec![4], "m2", 10), &gpus, &cluster);
    assert!(r > 0.0);
    let counts: std::collections::BTreeMap<_, _> = rate.counters().into_iter().collect();
    assert_eq!((counts["evaluations"], counts["model"], counts["split"]), (1, 1, 1));
    assert_eq!((counts["gpu_type"], counts["batch"]), (0, 0));
}

#[test]
fn spread_is_never_faster_than_packed_unless_the_data_says_so() {
    // For every (model, GPU type, batch, n) with a packed measurement [n], the
    // table model's time for n GPUs on n servers is at least the packed time,
    // unless the data itself has, for that model, GPU type and n, some
    // multi-server split faster than packed at the same batch (Gavel and Sia
    // have such points; the shared README calls Gavel's noise).
    let db = &ProfileDb::builtin();
    let t = TableModel::new(db);
    let (mut checked, mut data_says_spread_faster) = (0, 0);
    for p in db.throughput.iter().filter(|r| r.gpus > 1 && r.split == Split::Exact(vec![r.gpus])) {
        let spread = vec![1; p.gpus as usize];
        let est = t.iter_time(&p.model, &p.gpu_type, p.local_bsz, &spread).iter_time_s;
        // Does the data, at any batch, have a multi-server split of these n
        // GPUs faster than the packed one at the same batch?
        let faster_in_data = db.throughput.iter().any(|q| {
            q.model == p.model
                && q.gpu_type == p.gpu_type
                && q.gpus == p.gpus
                && q.split != Split::Exact(vec![q.gpus])
                && db.throughput.iter().any(|k| {
                    k.model == q.model
                        && k.gpu_type == q.gpu_type
                        && k.local_bsz == q.local_bsz
                        && k.split == Split::Exact(vec![k.gpus])
                        && k.gpus == q.gpus
                        && q.iter_time_s < k.iter_time_s
                })
        });
        if faster_in_data {
            data_says_spread_faster += 1;
        } else {
            assert!(
                est >= p.iter_time_s,
                "{} on {} b{} n{}: spread {est} < packed {}",
                p.model,
                p.gpu_type,
                p.local_bsz,
                p.gpus,
                p.iter_time_s
            );
        }
        checked += 1;
    }
    assert!(checked > 100, "only {checked} packed points");
    eprintln!("spread vs packed: {checked} keys checked, {data_says_spread_faster} where the data has spread faster");
}

#[test]
fn philly_replay_under_the_profile_model() {
    let Some(shared) = shared("Philly replay under the profile model") else { return };
    use dlsched::experiment::{ClusterChoice, RateModelKind, RunSpec, WorkloadSource, run_one};
    let spec = RunSpec {
        sample_interval_ms: 0,
        rate_model: RateModelKind::Table,
        ..RunSpec::new(
            WorkloadSource::Trace {
                path: shared.join("traces/philly/rfold_philly_jobs.csv"),
                format: dlsched::trace::TraceFormat::PhillyRfold,
                columns: Default::default(),
            },
            ClusterChoice::Preset { preset: dlsched::cluster::ClusterPreset::Philly },
        )
    };
    let r = run_one(&spec, |_| {}).unwrap();
    assert_eq!(r.summary.jobs_unfinished, 0);
    let (mut exact, mut longer) = (0, 0u64);
    for (s, st) in r.output.jobs.iter() {
        let JobState::Completed(d) = st else { panic!("{} unfinished", s.name) };
        let ran = d.end.since(d.start);
        assert!(s.model().is_some() && s.local_bsz().is_some());
        if s.gpus == 1 {
            // One GPU is always placed as recorded: exactly the trace duration.
            assert_eq!(ran, s.duration_ms, "{}", s.name);
            exact += 1;
        } else if ran > s.duration_ms {
            longer += 1;
        }
    }
    assert!(exact > 90_000);
    assert!(longer > 0, "some multi-GPU job placed worse than recorded runs longer");
    // The model is consulted only for jobs not placed as recorded: never for
    // 1-GPU jobs, always for a job whose run time differs from its duration.
    let c = &r.summary.rate_model_counters;
    let multi = r.output.jobs.specs().iter().filter(|s| s.gpus > 1).count() as u64;
    assert!(c["evaluations"] >= longer && c["evaluations"] <= multi, "{c:?}, {longer} longer, {multi} multi-GPU");
}
