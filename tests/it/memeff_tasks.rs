//! The thesis's memory-efficiency placement of moldable tasks
//! (`--policy memory-efficiency`, `src/policy/memeff_tasks.rs`) and the
//! engine hook that lets tasks share GPUs: hand-computed C / M / ME, the
//! choice on tiny cases, and the renamed packer's old name.

use std::sync::Arc;

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, RunOutput, Simulation};
use dlsched::ids::{JobId, VcId};
use dlsched::job::{JobState, QosClass, TaskSpec};
use dlsched::policy::memeff_tasks::{MemeffTaskOptions, MemeffTasks, task_compute_gflop};
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::TraceSpeed;
use dlsched::profile::coloc::ProfileInterference;
use dlsched::profile::db::{ColocRow, ModelInfo, ProfileDb};
use dlsched::profile::resources::task_gpu_mem_mib;
use dlsched::time::SimTime;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::dlsched;

/// One model `m`: 104.8576 M parameters × 10 B of state = 1,048,576,000 B =
/// 1,000 MiB; 100 MiB of activations and 2 GFLOP per sample. So on one GPU
/// at per-GPU batch b' its memory is 1,024 (framework) + 1,000 + 100 b' MiB.
/// On K80 `m` next to `m` at batches 16 / 16 runs at 0.8 each, at 32 / 16 at
/// 0.5 each (so reading a task's global batch instead of its per-GPU one
/// would show).
fn db() -> ProfileDb {
    let row = |ba: u32, bb: u32, s: f64| ColocRow {
        gpu_type: "k80".into(),
        model_a: "m".into(),
        bsz_a: ba,
        model_b: "m".into(),
        bsz_b: bb,
        speed_a: s,
        speed_b: s,
        source: "hand".into(),
    };
    ProfileDb {
        models: vec![ModelInfo {
            model: "m".into(),
            family: "cnn".into(),
            params_m: 104.8576,
            gflops_per_sample: 2.0,
            source: "hand".into(),
            state_bytes_per_param: 10.0,
            act_mib_per_sample: 100.0,
            mem_source: "hand".into(),
        }],
        colocation: vec![row(16, 16, 0.8), row(32, 16, 0.5)],
        ..Default::default()
    }
}

fn task(global_bsz: u32) -> TaskSpec {
    TaskSpec {
        kind: "m-train".into(),
        inference: false,
        global_bsz,
        iterations: 1,
        qos: QosClass::Normal,
        deadline: SimTime::from_ms(u64::MAX / 4),
    }
}

/// Runs tasks (id, submit s, work s at trace speed, global batch) of model
/// `m` on `gpus` K80s of 8,000 MiB (one node; shared GPUs keep 5 % free:
/// 7,600 MiB) under the thesis's policy, invariants checked at every step.
fn run(gpus: u32, tasks: &[(&str, u64, u64, u32)], with_memory: bool) -> RunOutput {
    let db = Arc::new(db());
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, gpus, "k80", 8_000)).unwrap();
    let recs: Vec<TraceRecord> = tasks
        .iter()
        .map(|&(id, s, d, b)| {
            (TraceRecord::new(id, s * 1000, d * 1000, 1)).with_extra(|e| {
                e.model = Some("m".into());
                e.local_bsz = Some(b);
            })
        })
        .collect();
    let mut w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    let mut map: std::collections::HashMap<String, TaskSpec> =
        tasks.iter().map(|&(id, _, _, b)| (id.to_string(), task(b))).collect();
    w.jobs.attach_tasks(&mut map);
    let policy = MemeffTasks::new(MemeffTaskOptions::default(), db.clone(), Box::new(TraceSpeed));
    let mut sim = Simulation::new(
        cluster,
        w.jobs,
        Box::new(policy),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .with_interference(Box::new(ProfileInterference::new(db.clone())));
    if with_memory {
        sim = sim.with_task_memory(Box::new(move |s, n| task_gpu_mem_mib(&db, s, n)));
    }
    while sim.step().unwrap().is_some() {
        sim.check_invariants().unwrap();
    }
    sim.finish()
}

/// (id, start ms, end ms, GPUs) of every task.
fn done(out: &RunOutput) -> Vec<(String, u64, u64, u32)> {
    out.jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => (s.name.to_string(), d.start.as_ms(), d.end.as_ms(), d.gpus),
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect()
}

#[test]
fn compute_memory_and_memory_efficiency_by_hand() {
    // Hand model, global batch 32. <1,1>: b' = 32, C = 2 × 32 = 64 GFLOP,
    // M = 1,024 + 1,000 + 3,200 = 5,224 MiB, ME = 64 / 5,224.
    // <1,2>: b' = 16, C = 32, M = 1,024 + 1,000 + 1,600 = 3,624, ME = 32 / 3,624.
    let db = Arc::new(db());
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "k80", 8_000)).unwrap();
    let recs = vec![(TraceRecord::new("a", 0, 1000, 1)).with_extra(|e| {
        e.model = Some("m".into());
        e.local_bsz = Some(32);
    })];
    let mut w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    let mut map: std::collections::HashMap<String, TaskSpec> = [("a".to_string(), task(32))].into_iter().collect();
    w.jobs.attach_tasks(&mut map);
    let spec = w.jobs.spec(JobId(0));
    assert_eq!(task_gpu_mem_mib(&db, spec, 1), Some(5_224));
    assert_eq!(task_gpu_mem_mib(&db, spec, 2), Some(3_624));
    assert_eq!(task_compute_gflop(&db, spec, 1), (64.0, true));
    assert_eq!(task_compute_gflop(&db, spec, 2), (32.0, true));
    let mut p = MemeffTasks::new(MemeffTaskOptions::default(), db.clone(), Box::new(TraceSpeed));
    let view = View { now: SimTime::ZERO, cluster: &cluster, jobs: &w.jobs };
    let rated = p.rate_placements(&view, JobId(0));
    // The paper set on 1 node × 2 GPUs: <1,1>, <1,2>.
    assert_eq!(rated.iter().map(|r| (r.d_node, r.d_gpn)).collect::<Vec<_>>(), vec![(1, 1), (1, 2)]);
    assert!((rated[0].me(8_000) - 64.0 / 5_224.0).abs() < 1e-15);
    assert!((rated[1].me(8_000) - 32.0 / 3_624.0).abs() < 1e-15);
    assert_eq!((rated[0].speed, rated[0].shared), (1.0, 0), "idle GPUs: speed 1, none shared");
    let best = p.choose(&view, JobId(0)).unwrap();
    assert_eq!((best.d_node, best.d_gpn), (1, 1), "64 / 5,224 = 0.01225 > 32 / 3,624 = 0.00883");

    // The builtin database's resnet50-imagenet (models.csv: 25.557 M
    // params × 12 B, 84.8006 MiB activations and 24.54 GFLOP per sample)
    // at global batch 64: <1,1> M = 1,024 + 25.557e6 × 12 / 2^20 (292.48)
    // + 64 × 84.8006 (5,427.24) = 6,743.72 -> 6,744 MiB, C = 24.54 × 64 =
    // 1,570.56 GFLOP; <1,2> M = 1,024 + 292.48 + 32 × 84.8006 (2,713.62)
    // = 4,030.10 -> 4,031 MiB, C = 785.28. Inference: a third of C.
    let b = ProfileDb::builtin();
    let mut r = spec.clone();
    r.extra_mut().model = Some("resnet50-imagenet".into());
    r.task = Some(Box::new(task(64)));
    assert_eq!(task_gpu_mem_mib(&b, &r, 1), Some(6_744));
    assert_eq!(task_gpu_mem_mib(&b, &r, 2), Some(4_031));
    assert!((task_compute_gflop(&b, &r, 1).0 - 1_570.56).abs() < 1e-9);
    assert!((task_compute_gflop(&b, &r, 2).0 - 785.28).abs() < 1e-9);
    r.task = Some(Box::new(TaskSpec { inference: true, ..task(64) }));
    assert!((task_compute_gflop(&b, &r, 2).0 - 785.28 / 3.0).abs() < 1e-9);
    // seq2seq's model has no GFLOPs: rated with 1 GFLOP per sample, flagged.
    r.extra_mut().model = Some("transformer-multi30k".into());
    r.task = Some(Box::new(task(64)));
    assert_eq!(task_compute_gflop(&b, &r, 2), (32.0, false));
}

#[test]
fn shares_a_gpu_when_memory_fits() {
    // One GPU. a (batch 16, 3,624 MiB) alone 0-10 s; b (3,624 MiB) joins at
    // 10 s: 7,248 <= 7,600, so both run at the measured 0.8. a's 90 s left
    // take 90 / 0.8 = 112.5 s: a ends at 122.5 s; b has done 90 of 100 s
    // of work by then and finishes alone at 132.5 s.
    let out = run(1, &[("a", 0, 100, 16), ("b", 10, 100, 16)], true);
    assert_eq!(done(&out), vec![("a".into(), 0, 122_500, 1), ("b".into(), 10_000, 132_500, 1)]);
    // Without the engine hook a sharing task holds the whole GPU: b waits.
    let out = run(1, &[("a", 0, 100, 16), ("b", 10, 100, 16)], false);
    assert_eq!(done(&out), vec![("a".into(), 0, 100_000, 1), ("b".into(), 100_000, 200_000, 1)]);
}

#[test]
fn does_not_share_when_memory_does_not_fit() {
    // Batch 32: 5,224 MiB each, 10,448 > 7,600: b waits for a.
    let out = run(1, &[("a", 0, 100, 32), ("b", 10, 100, 32)], true);
    assert_eq!(done(&out), vec![("a".into(), 0, 100_000, 1), ("b".into(), 100_000, 200_000, 1)]);
}

#[test]
fn idle_first_then_the_placement_memory_allows() {
    // Two GPUs. a and b (batch 16) at 0 s: a on GPU 0; b on GPU 1, idle
    // (speed 1 beats 0.8 beside a). c (batch 32) at 10 s: <1,1> needs
    // 5,224 MiB beside 3,624 (8,848 > 7,600) and does not fit; <1,2> at
    // b' = 16 needs 3,624 beside 3,624 on each GPU (7,248) and does: c
    // takes both GPUs, shared. Every pair is m16/m16 (c read at its
    // per-GPU batch): 0.8 each. a and b: 10 s alone, 90 s at 0.8 -> end
    // 122.5 s; c: 90 s of work by then, then alone -> 132.5 s. (Read at
    // its global batch 32, the pairs would be 0.5: a and b would end at 190 s.)
    let out = run(2, &[("a", 0, 100, 16), ("b", 0, 100, 16), ("c", 10, 100, 32)], true);
    assert_eq!(
        done(&out),
        vec![("a".into(), 0, 122_500, 1), ("b".into(), 0, 122_500, 1), ("c".into(), 10_000, 132_500, 2)]
    );
}

#[test]
fn the_comparison_packers_place_tasks_at_one_gpu() {
    // share-first-fit at <1,1>: b joins a's GPU 0 (first with room) though
    // GPU 1 is idle: the timeline of the one-GPU case above.
    use dlsched::policy::memeff_tasks::Pack;
    let db = Arc::new(db());
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "k80", 8_000)).unwrap();
    let tasks = [("a", 0u64, 100u64, 16u32), ("b", 10, 100, 16)];
    let recs: Vec<TraceRecord> = tasks
        .iter()
        .map(|&(id, s, d, b)| {
            (TraceRecord::new(id, s * 1000, d * 1000, 1)).with_extra(|e| {
                e.model = Some("m".into());
                e.local_bsz = Some(b);
            })
        })
        .collect();
    let mut w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    let mut map: std::collections::HashMap<String, TaskSpec> =
        tasks.iter().map(|&(id, _, _, b)| (id.to_string(), task(b))).collect();
    w.jobs.attach_tasks(&mut map);
    let opts = MemeffTaskOptions { pack: Pack::ShareFirstFit, ..Default::default() };
    let policy = MemeffTasks::new(opts, db.clone(), Box::new(TraceSpeed));
    assert_eq!(policy.name(), "share-first-fit@1gpu");
    let d2 = db.clone();
    let out = Simulation::new(
        cluster,
        w.jobs,
        Box::new(policy),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .with_interference(Box::new(ProfileInterference::new(db)))
    .with_task_memory(Box::new(move |s, n| task_gpu_mem_mib(&d2, s, n)))
    .run()
    .unwrap();
    assert_eq!(done(&out), vec![("a".into(), 0, 122_500, 1), ("b".into(), 10_000, 132_500, 1)]);
}

#[test]
fn a_policy_colocating_a_task_holds_its_per_gpu_memory() {
    // The hook alone, under a policy that co-locates task a on both GPUs:
    // at b' = 16 it holds 3,624 MiB on each.
    struct Both(bool);
    impl Policy for Both {
        fn name(&self) -> String {
            "both".into()
        }
        fn on_arrival(&mut self, _job: JobId, _view: &View<'_>) {}
        fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}
        fn decide(&mut self, view: &View<'_>) -> Decision {
            if self.0 {
                return Decision::Wait;
            }
            self.0 = true;
            let gpus: Vec<_> = view.cluster.node_gpus(dlsched::ids::NodeId(0)).collect();
            Decision::Colocate { job: JobId(0), gpus }
        }
    }
    let db = Arc::new(db());
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "k80", 8_000)).unwrap();
    let recs = vec![(TraceRecord::new("a", 0, 1000, 1)).with_extra(|e| {
        e.model = Some("m".into());
        e.local_bsz = Some(32);
    })];
    let mut w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    let mut map: std::collections::HashMap<String, TaskSpec> = [("a".to_string(), task(32))].into_iter().collect();
    w.jobs.attach_tasks(&mut map);
    let d2 = db.clone();
    let mut sim = Simulation::new(
        cluster,
        w.jobs,
        Box::new(Both(false)),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .with_interference(Box::new(ProfileInterference::new(db)))
    .with_task_memory(Box::new(move |s, n| task_gpu_mem_mib(&d2, s, n)));
    sim.step().unwrap();
    let c = sim.cluster();
    let held: Vec<u64> = c.node_gpus(dlsched::ids::NodeId(0)).map(|g| c.share(g).mem_mib).collect();
    assert_eq!(held, vec![3_624, 3_624]);
    let _ = VcId(0);
}

#[test]
fn the_old_placement_name_points_to_both_new_names() {
    let o = dlsched(&["simulate", "--placement", "memory-efficiency"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--placement memeff-pack") && e.contains("--policy memory-efficiency"), "{e}");
    // A sweep file's spelling.
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("e.toml");
    std::fs::write(&toml, "question = \"q\"\n[base]\njobs = 5\n[sweep]\nplacement = [\"memory-efficiency\"]\n")
        .unwrap();
    let o = dlsched(&["sweep", toml.to_str().unwrap(), "--out", dir.path().join("o").to_str().unwrap()]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("`placement` = `memeff-pack`") && e.contains("`policy` = `memory-efficiency`"), "{e}");
    // The thesis's policy refuses trace jobs, naming the packer.
    let o = dlsched(&["simulate", "--policy", "memory-efficiency", "--jobs", "5"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--workload genie"));
}
