//! GPU memory: the memory table's interpolation, placements that use only GPUs
//! with enough memory, skips for jobs no GPU can hold, and the engine's check.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::ids::{GpuId, JobId};
use dlsched::job::{JobState, SkipReason};
use dlsched::policy::{Decision, Policy, View, placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::TraceSpeed;
use dlsched::profile::db::{MemSource, MemoryRow, ModelInfo, ProfileDb};
use dlsched::workload::build_workload;

use crate::common::{policy, rec, shared};

#[test]
fn memory_need_is_interpolated_in_the_batch() {
    let row = |b: u32, m: f64| MemoryRow { model: "r".into(), local_bsz: b, gpu_mem_mib: m, source: "hand".into() };
    let db = ProfileDb { memory: vec![row(32, 5518.0), row(64, 8570.0), row(128, 13326.0)], ..Default::default() };
    assert_eq!(db.gpu_mem_mib("r", 64), Some(8570.0));
    // 48: 5518 + 3052 * 16 / 32 = 7044.
    assert_eq!(db.gpu_mem_mib("r", 48), Some(7044.0));
    // 256: beyond 128 along the last segment, 13326 + 4756 * 128 / 64 = 22838.
    assert_eq!(db.gpu_mem_mib("r", 256), Some(22838.0));
    // 16: the line would give 3992, below the smallest measurement: 5518.
    assert_eq!(db.gpu_mem_mib("r", 16), Some(5518.0));
    assert_eq!(db.gpu_mem_mib("other", 32), None);
}

/// Node 0: 4 GPUs of 12 GiB; node 1: 4 GPUs of 24 GiB.
fn two_memories() -> ClusterSpec {
    let mut s = ClusterSpec::uniform("mixed", 2, 4, "x", 12 * 1024);
    s.nodes[1].gpu_mem_mib = 24 * 1024;
    s
}

#[test]
fn placements_use_only_gpus_with_enough_memory() {
    // a needs 16,000 MiB on 2 GPUs: best fit and first fit would pick node 0
    // (equal free GPUs, lower index) but its GPUs have 12,288 MiB, so node 1.
    // b needs 30,000 MiB, more than any GPU: skipped. c needs nothing: best
    // fit takes node 1 (2 free, the tightest), first fit node 0.
    for (placement, c_node) in
        [(PlacementKind::Consolidate, 1), (PlacementKind::FirstFit, 0), (PlacementKind::Recorded, 1)]
    {
        let mut recs = vec![rec("a", 0, 2, 10), rec("b", 0, 1, 10), rec("c", 0, 2, 10)];
        recs[0].extra_mut().gpu_mem_mib = Some(16_000);
        recs[1].extra_mut().gpu_mem_mib = Some(30_000);
        let cluster = Cluster::new(two_memories()).unwrap();
        let w = build_workload(recs, &cluster, placement.build());
        assert_eq!(
            w.skipped.iter().map(|s| (s.name.as_str(), s.reason)).collect::<Vec<_>>(),
            vec![("b", SkipReason::ExceedsGpuMemory)]
        );
        let p = policy(QueueOrder::Fifo, false, placement).build(1).unwrap();
        let mut sim = Simulation::new(
            cluster,
            w.jobs,
            p,
            Box::new(TraceSpeed),
            EngineConfig { sample_interval_ms: 0, ..Default::default() },
        );
        sim.step().unwrap();
        let node_of = |name: &str| {
            let (s, st) = sim.jobs().iter().find(|(s, _)| s.name == name).unwrap();
            let JobState::Running(r) = st else { panic!("{} not running", s.name) };
            sim.cluster().node_of(r.gpus[0]).0
        };
        assert_eq!((node_of("a"), node_of("c")), (1, c_node), "{placement:?}");
    }
}

/// A policy that puts every job on GPUs 0 and 1 (node 0, 12 GiB).
struct Careless(bool);

impl Policy for Careless {
    fn name(&self) -> String {
        "careless".into()
    }
    fn on_arrival(&mut self, _: JobId, _: &View<'_>) {}
    fn on_completion(&mut self, _: JobId, _: &View<'_>) {}
    fn decide(&mut self, _: &View<'_>) -> Decision {
        if std::mem::replace(&mut self.0, true) {
            Decision::Wait
        } else {
            Decision::Launch { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] }
        }
    }
}

#[test]
fn the_engine_refuses_a_placement_without_enough_memory() {
    let mut recs = vec![rec("a", 0, 2, 10)];
    recs[0].extra_mut().gpu_mem_mib = Some(16_000);
    let cluster = Cluster::new(two_memories()).unwrap();
    let w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    let err = Simulation::new(
        cluster,
        w.jobs,
        Box::new(Careless(false)),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .run()
    .err()
    .expect("an invalid decision is an error of the run")
    .to_string();
    assert!(
        err.contains("careless") && err.contains("gpu0") && err.contains("12288 MiB") && err.contains("16000 MiB"),
        "{err}"
    );
}

#[test]
fn lucid_memory_table_end_to_end() {
    let Some(shared) = shared("Lucid memory import") else { return };
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlsched"))
        .args(["profile", "import", "--from"])
        .arg(shared.join("profiles"))
        .arg("--out")
        .arg(dir.path())
        .arg("--include-lucid")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let db = ProfileDb::load_dir(dir.path()).unwrap();
    // Lucid single_data.csv, amp = 0: ResNet-50 ImageNet at batch 64 uses 8,570 MiB.
    assert_eq!(db.gpu_mem_mib("resnet50-imagenet", 64), Some(8570.0));
    // Co-location pairs: full-precision rows of colocate_info.csv whose two
    // models both map to database names, counted straight from the file.
    let mapped = [
        "BERT,SQuAD",
        "LSTM,Wikitext2",
        "NeuMF,MovieLens",
        "ResNet18,CIFAR-10",
        "ResNet50,ImageNet",
        "Transformer,Multi30k",
    ];
    let mut rdr = csv::Reader::from_path(shared.join("profiles/lucid/colocate_info.csv")).unwrap();
    let expected = rdr
        .records()
        .map(Result::unwrap)
        .filter(|r| {
            r[5].trim() == "0"
                && r[11].trim() == "0"
                && mapped.contains(&format!("{},{}", &r[1], &r[2]).as_str())
                && mapped.contains(&format!("{},{}", &r[7], &r[8]).as_str())
        })
        .count();
    assert_eq!(db.colocation.iter().filter(|c| c.source == "lucid").count(), expected);
    assert!(expected > 0);
    // On lab16 (K80, 12,288 MiB per GPU), every admitted job's need fits a GPU.
    let out = dir.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlsched"))
        .args(["simulate", "--rate-model", "table", "--jobs", "300", "--profiles"])
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut rdr = csv::Reader::from_path(out.join("jobs.csv")).unwrap();
    let col = rdr.headers().unwrap().iter().position(|h| h == "gpu_mem_mib").unwrap();
    let needs: Vec<u64> = rdr.records().filter_map(|r| r.unwrap()[col].parse().ok()).collect();
    assert!(!needs.is_empty() && needs.iter().all(|&m| m <= 12 * 1024), "{needs:?}");
}

fn model(name: &str, params_m: f64, gflops: f64, state: f64, act: f64) -> ModelInfo {
    ModelInfo {
        model: name.into(),
        family: "cnn".into(),
        params_m,
        gflops_per_sample: gflops,
        source: "hand".into(),
        state_bytes_per_param: state,
        act_mib_per_sample: act,
        mem_source: "hand".into(),
    }
}

#[test]
fn the_memory_estimate_is_overhead_plus_state_plus_activations() {
    let db = ProfileDb {
        models: vec![
            model("h", 10.0, 2.0, 12.0, 2.5),
            model("k", 30.0, 10.0, 12.0, 5.0),
            model("u", f64::NAN, 4.0, 16.0, f64::NAN),
            model("v", 2.0, f64::NAN, 16.0, f64::NAN),
        ],
        ..Default::default()
    };
    // h at 32: 1024 + 10e6 × 12 / 1,048,576 (= 114.44091796875) + 32 × 2.5 = 1218.44091796875.
    let e = db.estimated_gpu_mem_mib("h", 32).unwrap();
    assert!((e.mib - 1_218.440_917_968_75).abs() < 1e-9, "{e:?}");
    assert!(!e.params_fallback && !e.act_fallback);
    assert_eq!(db.gpu_mem("h", 32).map(|(_, s)| s), Some(MemSource::Estimated));
    // u: parameters = median of h, k and v (10 M), activations = 4 GFLOPs ×
    // median of 2.5 / 2 and 5 / 10 (0.875) = 3.5 MiB: 1024 + 10e6 × 16 /
    // 1,048,576 (= 152.587890625) + 10 × 3.5 = 1211.587890625.
    let e = db.estimated_gpu_mem_mib("u", 10).unwrap();
    assert!((e.mib - 1_211.587_890_625).abs() < 1e-9, "{e:?}");
    assert!(e.params_fallback && e.act_fallback);
    // v: no GFLOPs either: the family's median activation, (2.5 + 5) / 2 = 3.75;
    // 1024 + 2e6 × 16 / 1,048,576 (= 30.517578125) + 4 × 3.75 = 1069.517578125.
    let e = db.estimated_gpu_mem_mib("v", 4).unwrap();
    assert!((e.mib - 1_069.517_578_125).abs() < 1e-9, "{e:?}");
    assert_eq!(db.gpu_mem_mib("nobody", 4), None);
    // A measured table wins for the models it has.
    let mut db = db;
    db.memory = vec![MemoryRow { model: "h".into(), local_bsz: 32, gpu_mem_mib: 3000.0, source: "m".into() }];
    assert_eq!(db.gpu_mem("h", 32), Some((3000.0, MemSource::Measured)));
    assert_eq!(db.gpu_mem("k", 1).map(|(_, s)| s), Some(MemSource::Estimated));
}

#[test]
fn builtin_estimate_of_resnet50_by_hand() {
    // models.csv: 25.557 M parameters, 12 B each (SGD with momentum), 84.8006
    // MiB per sample. At batch 64: 1024 + 25.557e6 × 12 / 1,048,576 (=
    // 292.4766540527...) + 64 × 84.8006 (= 5427.2384) = 6743.715054...
    let db = ProfileDb::builtin();
    let e = db.estimated_gpu_mem_mib("resnet50-imagenet", 64).unwrap();
    assert!((e.mib - 6_743.715_054).abs() < 1e-3, "{e:?}");
    // Every builtin model has an estimate.
    for m in db.models() {
        assert!(db.gpu_mem_mib(m, 1).is_some_and(|x| x > 1024.0), "{m}");
    }
}

#[test]
fn a_default_run_skips_a_job_no_gpu_can_hold() {
    // lab16 GPUs have 12,288 MiB. vgg16-imagenet at batch 128: 1024 +
    // 138.358e6 × 12 / 1,048,576 (≈ 1583.4) + 128 × 103.43 (= 13,239.0) ≈
    // 15,846 MiB: skipped. resnet18-cifar10 at 32: 1024 + 127.9 + 150.0 ≈
    // 1,302 MiB: runs. No --profiles, default rate model.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("jobs.csv");
    std::fs::write(
        &trace,
        "job_id,submit_time,duration,gpu_num,model,local_bsz\nbig,0,60,1,vgg16-imagenet,128\nsmall,0,60,1,resnet18-cifar10,32\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlsched"))
        .args(["simulate", "--format", "jobs-csv", "--trace"])
        .arg(&trace)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let skipped = std::fs::read_to_string(out.join("skipped.csv")).unwrap();
    assert_eq!(skipped, "job_id,line,gpus,reason\nbig,2,1,exceeds_gpu_memory\n");
    let mut rdr = csv::Reader::from_path(out.join("jobs.csv")).unwrap();
    let col = rdr.headers().unwrap().iter().position(|h| h == "gpu_mem_mib").unwrap();
    let needs: Vec<String> = rdr.records().map(|r| r.unwrap()[col].to_string()).collect();
    // ceil(1024 + 11.174e6 × 12 / 1,048,576 + 32 × 4.68758) = ceil(1301.88...) = 1302.
    assert_eq!(needs, ["1302"]);
}

#[test]
fn estimate_against_lucid_measurements() {
    let Some(shared) = shared("memory estimate vs Lucid") else { return };
    let rows = dlsched::profile::import::lucid_memory(&shared.join("profiles")).unwrap();
    let db = &ProfileDb::builtin();
    let mut errs = Vec::new();
    eprintln!("{:<22} {:>6} {:>10} {:>10} {:>8}", "model", "batch", "Lucid MiB", "estimate", "error %");
    for r in &rows {
        let est = db.estimated_gpu_mem_mib(&r.model, r.local_bsz).unwrap().mib;
        let err = (est - r.gpu_mem_mib) / r.gpu_mem_mib * 100.0;
        eprintln!("{:<22} {:>6} {:>10.0} {:>10.0} {:>8.1}", r.model, r.local_bsz, r.gpu_mem_mib, est, err);
        errs.push(err.abs());
    }
    let mape = errs.iter().sum::<f64>() / errs.len() as f64;
    eprintln!("memory estimate vs Lucid: {} points, mean absolute error {mape:.1} %", errs.len());
    assert_eq!(errs.len(), 13);
    assert!(mape < 60.0, "{mape}");
}
