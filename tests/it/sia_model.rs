//! Sia's per-GPU-type application model (`src/profile/sia.rs`): the derived
//! tables regenerate byte-identically, goodput is the artifact's formula on
//! each type's rows (by hand), throughput agrees with the artifact's own
//! `Application.get_throughput` (values computed with scipy), and runs on
//! the `sia` cluster preset pick the model, complete and are deterministic.

use std::path::PathBuf;

use dlsched::job::{ElasticConfig, MIXED_GPU_TYPES};
use dlsched::profile::elastic::ProgressModel;
use dlsched::profile::sia::{SiaGpu, SiaModel, SiaTables, TABLES};

use super::common;

fn shared_sia() -> Option<PathBuf> {
    let p = common::shared("Sia application tables")?.join("profiles/sia");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIP Sia application tables: ../shared/profiles/sia is absent");
        None
    }
}

/// The Sia model over every type, cluster type index = position in `SiaGpu::ALL`.
fn all_types() -> SiaModel {
    let names: Vec<String> = SiaGpu::ALL.iter().map(|g| g.name().to_string()).collect();
    SiaModel::for_gpu_types(&names).unwrap()
}

fn cfg(per_node: &[u32], atomic_bsz: u32, accum_steps: u32, gpu: SiaGpu) -> ElasticConfig {
    let gpu_type = SiaGpu::ALL.iter().position(|&g| g == gpu).unwrap() as u16;
    ElasticConfig { per_node: per_node.to_vec(), atomic_bsz, accum_steps, gpu_type }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn import_sia_reproduces_the_committed_tables() {
    let Some(from) = shared_sia() else { return };
    let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/profile/data/sia");
    let out = tempfile::tempdir().unwrap();
    let o = common::dlsched(&[
        "profile",
        "import-sia",
        "--from",
        from.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in TABLES {
        assert!(
            std::fs::read(out.path().join(f)).unwrap() == std::fs::read(committed.join(f)).unwrap(),
            "{f} differs from src/profile/data/sia/{f}: regenerate with \
             `dlsched profile import-sia --from ../shared/profiles/sia --out src/profile/data/sia`"
        );
    }
    // The original files (with the committed triangulations) and the builtin
    // tables give the same applications on every type.
    let raw = SiaTables::load_dir(&from, &committed).unwrap();
    let builtin = SiaTables::builtin();
    for gpu in SiaGpu::ALL {
        for (a, b) in raw.apps(gpu).unwrap().apps.iter().zip(&builtin.apps(gpu).unwrap().apps) {
            assert_eq!((gpu, &a.name), (gpu, &b.name));
            assert_eq!(a.placements, b.placements);
            assert_eq!(a.scalability, b.scalability);
            assert_eq!(a.points(), b.points());
            assert_eq!(a.tetrahedra().count(), b.tetrahedra().count());
            assert_eq!((a.min_local_bsz, a.max_local_bsz), (b.min_local_bsz, b.max_local_bsz));
        }
    }
}

#[test]
fn committed_tables_load_from_their_directory() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/profile/data/sia");
    let loaded = SiaTables::load_tables(&dir).unwrap();
    let builtin = SiaTables::builtin();
    for gpu in SiaGpu::ALL {
        let (l, b) = (loaded.apps(gpu).unwrap(), builtin.apps(gpu).unwrap());
        assert_eq!(l.apps.len(), 6);
        for (x, y) in l.apps.iter().zip(&b.apps) {
            assert_eq!(x.placements, y.placements);
            assert_eq!(x.tetrahedra().collect::<Vec<_>>(), y.tetrahedra().collect::<Vec<_>>());
        }
    }
    // The artifact's limits: deepspeech2 on rtx max local 57 (its own line), yolov3 without
    // the Pollux simulator's cap of 8 (T4 measured up to 16), A100 bert up to 48.
    let ds2 = builtin.get(SiaGpu::Rtx2080Ti, "deepspeech2").unwrap();
    assert_eq!((ds2.min_local_bsz, ds2.max_local_bsz), (10, 57));
    assert_eq!(builtin.get(SiaGpu::T4, "yolov3").unwrap().max_local_bsz, 16);
    assert_eq!(builtin.get(SiaGpu::A100, "bert").unwrap().max_local_bsz, 48);
}

#[test]
fn goodput_is_the_artifacts_formula_on_each_type() {
    let m = all_types();
    // bert on 2 GPUs of one node at local batch 6, no accumulation: total batch 12 = the
    // initial batch, so gain = (var + sqr) / (var / 1 + sqr) = 1, and goodput =
    // 1 / step_time × calibration 1 / 1.2 (SLOWDOWNS["bert"]). Rows `2,6` of
    // placements-<suffix>.csv (step_time):
    //   aws      2,6,0.586463674902916,...
    //   azure    6,0.29552707076072693,0.0316683521270752,2
    //   dgx-ext  6,0.13045267760753632,0.00795398396253586,2
    //   rtx      6,0.4472329616546631,0.17092990970611577,2
    //   quad     6,2,0.41541799902915955,0.17243222045898438
    let rows = [
        (SiaGpu::T4, 0.586463674902916),
        (SiaGpu::V100, 0.29552707076072693),
        (SiaGpu::A100, 0.13045267760753632),
        (SiaGpu::Rtx2080Ti, 0.4472329616546631),
        (SiaGpu::Rtx6000, 0.41541799902915955),
    ];
    for (gpu, step) in rows {
        let g = m.goodput("bert", &cfg(&[2], 6, 0, gpu), 0.0).unwrap();
        let want = 1.0 / step / 1.2;
        assert!(close(g, want, 1e-12), "{gpu:?}: {g} vs {want}");
        // The policies see the table's own step times, uncalibrated.
        let (s, _) = m.step_times("bert", &cfg(&[2], 6, 0, gpu)).unwrap();
        assert!(close(s, step, 1e-15), "{gpu:?}: {s}");
    }
    // With a gain above 1: T4, 2 GPUs × 12, batch 24, epoch 0. validation-24.csv epoch 0:
    // grad_sqr 82891973134775.4, grad_var 7412524673455386.0; scale 24 / 12 = 2;
    // placements-aws.csv `2,12,0.9190408140420914,0.05467441153526306`.
    let (sqr, var) = (82_891_973_134_775.4, 7_412_524_673_455_386.0);
    let gain = (var + sqr) / (var / 2.0 + sqr);
    let g = m.goodput("bert", &cfg(&[2], 12, 0, SiaGpu::T4), 0.0).unwrap();
    assert!(close(g, gain / 0.9190408140420914 / 1.2, 1e-12), "{g}");
    // cifar10's calibration is 1 / 1.8, ncf's 1 / 1.5.
    let t4 = dlsched::profile::pollux::PolluxApps::builtin();
    let c = cfg(&[1], 128, 0, SiaGpu::T4);
    let ratio = m.goodput("cifar10", &c, 0.0).unwrap() / t4.goodput("cifar10", &c, 0.0).unwrap();
    assert!(close(ratio, 1.0 / 1.8, 1e-12), "{ratio}");
}

#[test]
fn a100_is_faster_than_t4_where_the_tables_say_so() {
    let m = all_types();
    // imagenet, one node of 4 GPUs at local batch 81: placements-aws.csv `4,81,0.4490670680999756,...`,
    // placements-dgx-ext.csv `81,0.17811499536037445,0.010570368334650991,4`. Same gain and
    // calibration on both types, so the goodput ratio is the step-time ratio, 2.52.
    let t4 = m.goodput("imagenet", &cfg(&[4], 81, 0, SiaGpu::T4), 0.0).unwrap();
    let a100 = m.goodput("imagenet", &cfg(&[4], 81, 0, SiaGpu::A100), 0.0).unwrap();
    assert!(a100 > t4);
    assert!(close(a100 / t4, 0.4490670680999756 / 0.17811499536037445, 1e-12), "{}", a100 / t4);
    // So the job's time to its target is shorter on A100 too.
    let target = m.target("imagenet").unwrap();
    let on = |g| m.time_to("imagenet", &cfg(&[4], 81, 0, g), 0.0, target).unwrap();
    assert!(on(SiaGpu::A100) < on(SiaGpu::T4));
}

#[test]
fn throughput_matches_the_artifacts_get_throughput() {
    // The Sia artifact's own Application.get_throughput (applications.py, aaf7a0de) on
    // ../shared/profiles/sia with Pollux's validation files, scratch venv numpy 1.23.5,
    // pandas 1.5.3, scipy 1.10.1:
    //   app = Application(f"{traces}/{app}", cluster_suffix=suffix); app.get_throughput(placement, bsz)
    // (measured placements by interp1d, the others by LinearNDInterpolator).
    /// (type, application, placement, local batch, step_time s, sync_time s)
    type Case = (SiaGpu, &'static str, &'static [u32], u32, f64, f64);
    let cases: [Case; 12] = [
        (SiaGpu::Rtx2080Ti, "bert", &[8], 8, 0.8097047656774521, 0.4574004554748535),
        (SiaGpu::Rtx2080Ti, "bert", &[8, 8, 4], 6, 0.8589877784252167, 0.5566227684020996),
        (SiaGpu::Rtx2080Ti, "cifar10", &[8, 8], 256, 0.13753450193102393, 0.03495944758460631),
        (SiaGpu::A100, "bert", &[8], 8, 0.1560649275779724, 0.0227085440158844),
        (SiaGpu::A100, "imagenet", &[8, 4], 100, 0.19153817041831858, 0.020688378277070325),
        (SiaGpu::A100, "cifar10", &[8, 8], 300, 0.05199640501970014, 0.0031019149437639705),
        (SiaGpu::A100, "cifar10", &[4, 2], 300, 0.05132396069337731, 0.0017403181974757905),
        (SiaGpu::V100, "yolov3", &[8, 2], 12, 0.9687965780496597, 0.6575293701171875),
        (SiaGpu::V100, "ncf", &[3], 1000, 0.14405457302927965, 0.012065386667847549),
        (SiaGpu::T4, "bert", &[4], 8, 0.740765243768692, 0.09240074634552),
        (SiaGpu::T4, "yolov3", &[4, 4, 4, 4, 4], 12, 1.3719854950904846, 0.8526627025604249),
        (SiaGpu::Rtx6000, "deepspeech2", &[3], 20, 0.5318782478570938, 0.0461581639051437),
    ];
    let t = SiaTables::builtin();
    for (gpu, app, placement, bsz, step, sync) in cases {
        let (s, y) = t.get(gpu, app).unwrap().throughput(placement, bsz).unwrap();
        assert!(close(s, step, 1e-12) && close(y, sync, 1e-12), "{gpu:?} {app} {placement:?} {bsz}: ({s}, {y})");
    }
    // Outside a type's measurements: the artifact's interpolator gives NaN (its assertion
    // fails) for 3 A100 nodes (2 measured); RTX6000 has no triangulation (one node only).
    assert!(t.get(SiaGpu::A100, "cifar10").unwrap().throughput(&[8, 8, 8], 300).is_err());
    assert!(t.get(SiaGpu::Rtx6000, "bert").unwrap().throughput(&[2, 2], 4).is_err());
}

#[test]
fn mixed_and_unprofiled_gpu_types_are_errors_naming_them() {
    let m = SiaModel::for_gpu_types(&["T4".into(), "A100".into()]).unwrap();
    let mut c = cfg(&[4, 4], 6, 0, SiaGpu::T4);
    c.gpu_type = MIXED_GPU_TYPES;
    let e = m.goodput("bert", &c, 0.0).unwrap_err();
    assert!(e.contains("span GPU types") && e.contains("T4, A100"), "{e}");
    let e = SiaModel::for_gpu_types(&["T4".into(), "K80".into()]).unwrap_err();
    assert!(e.contains("`K80`") && e.contains("T4, V100, A100, RTX2080Ti, RTX6000"), "{e}");
    // Names match case-insensitively, without separators.
    assert_eq!(SiaGpu::of_gpu_type("rtx-2080ti"), Some(SiaGpu::Rtx2080Ti));
    assert_eq!(SiaGpu::of_gpu_type("a100"), Some(SiaGpu::A100));

    // A run: one 32-GPU cifar10 job under FIFO (consolidate) on the sia preset spans T4 and
    // A100 nodes (no type has 32 GPUs); the error names the job and the types.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("w.csv");
    std::fs::write(&trace, "name,time,application,num_replicas,batch_size\nbig,0,cifar10,32,4096\n").unwrap();
    let out = d.path().join("out");
    let o = common::dlsched(&[
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--cluster",
        "sia",
        "--policy",
        "fifo",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("`big`") && err.contains("span GPU types (T4, A100, RTX2080Ti)"), "{err}");
    // --elastic-model sia on the default cluster (K80) names the type and the known ones.
    std::fs::write(&trace, "name,time,application,num_replicas,batch_size\nsmall,0,cifar10,1,128\n").unwrap();
    let o = common::dlsched(&[
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--elastic-model",
        "sia",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("`K80`") && err.contains("(known: T4, V100, A100, RTX2080Ti, RTX6000)"), "{err}");
}

#[test]
fn the_rescale_delay_is_the_applications() {
    // One cifar10 job, 1 GPU, batch 128, alone on one A100 node (auto picks Sia's model):
    // JCT = Sia's cifar10 rescale_time (50 s) + the model's time to target on that GPU,
    // rounded up to the ms; with --rescale-delay 0, the time to target alone.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("w.csv");
    std::fs::write(&trace, "name,time,application,num_replicas,batch_size\nc,0,cifar10,1,128\n").unwrap();
    let jct = |extra: &[&str], name: &str| {
        let out = d.path().join(name);
        let mut args = vec![
            "simulate",
            "--trace",
            trace.to_str().unwrap(),
            "--nodes",
            "1",
            "--gpus-per-node",
            "8",
            "--gpu-type",
            "a100",
            "--policy",
            "fifo",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = common::dlsched(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("model     sia"));
        let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
        assert!(manifest.contains("\"progress_model\": \"sia\""), "{manifest}");
        let jobs = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
        let header: Vec<&str> = jobs.lines().next().unwrap().split(',').collect();
        let row: Vec<&str> = jobs.lines().nth(1).unwrap().split(',').collect();
        row[header.iter().position(|&h| h == "jct_s").unwrap()].parse::<f64>().unwrap()
    };
    let m = SiaModel::for_gpu_types(&["a100".into()]).unwrap();
    let c = m.tuned_config_on("cifar10", &[1], 128, 0);
    let work_s = m.time_to("cifar10", &c, 0.0, m.target("cifar10").unwrap()).unwrap();
    let with = jct(&[], "with");
    let without = jct(&["--rescale-delay", "0"], "without");
    assert!((without - work_s).abs() <= 0.002, "{without} vs {work_s}");
    assert!((with - without - 50.0).abs() <= 0.002, "{with} vs {without}");
}

#[test]
fn tiresias_tuned_runs_a_sia_workload_on_the_sia_preset_deterministically() {
    let Some(shared) = common::shared("Sia workload run") else { return };
    let trace = shared.join("traces/sia-workloads/philly/workload-1.csv");
    if !trace.is_file() {
        eprintln!("SKIP Sia workload run: {} is absent", trace.display());
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let toml = d.path().join("sia.toml");
    std::fs::write(
        &toml,
        format!(
            "question = \"tiresias-tuned on the sia preset\"\n[base]\ntrace = \"{}\"\ncluster = \"sia\"\npolicy = \"tiresias-tuned\"\n\
             [sweep]\nelastic_timing = [\"exact\", \"pollux-sim\"]\n",
            trace.display()
        ),
    )
    .unwrap();
    let sweep = |threads: &str| {
        let out = d.path().join(format!("t{threads}"));
        let o =
            common::dlsched(&["sweep", toml.to_str().unwrap(), "--out", out.to_str().unwrap(), "--threads", threads]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let (one, two) = (sweep("1"), sweep("2"));
    let summary = std::fs::read_to_string(one.join("summary.csv")).unwrap();
    assert_eq!(summary, std::fs::read_to_string(two.join("summary.csv")).unwrap());
    let header: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|&h| h == name).unwrap_or_else(|| panic!("no {name}"));
    for row in summary.lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        // All 160 jobs of workload-1 complete.
        assert_eq!((f[col("jobs_completed")], f[col("jobs_unfinished")]), ("160", "0"), "{row}");
    }
    // Every run directory's jobs.csv is the same at 1 and 2 threads.
    let mut compared = 0;
    for e in std::fs::read_dir(one.join("runs")).unwrap().flatten() {
        let jobs = e.path().join("jobs.csv");
        if jobs.is_file() {
            let other = two.join("runs").join(e.file_name()).join("jobs.csv");
            assert_eq!(std::fs::read(&jobs).unwrap(), std::fs::read(&other).unwrap(), "{}", jobs.display());
            compared += 1;
        }
    }
    assert_eq!(compared, 2);
}

#[test]
fn local_caps_are_a_placements_largest_measured_local_batch() {
    // From `placements.csv` (dgx-ext, deepspeech2): placement 78 is measured
    // at local batches 10 to 40, and it is the only 15-GPU placement, so
    // both caps are 40, whichever node comes first; one GPU is measured up
    // to 320. The caps apply per type: a mixed placement has none.
    let m = all_types();
    let a100 = SiaGpu::ALL.iter().position(|&g| g == SiaGpu::A100).unwrap() as u16;
    assert_eq!(m.local_caps_on("deepspeech2", &[8, 7], a100), Some((40, Some(40))));
    assert_eq!(m.local_caps_on("deepspeech2", &[0, 7, 8], a100), Some((40, Some(40))));
    assert_eq!(m.local_caps_on("deepspeech2", &[1], a100), Some((320, Some(320))));
    assert_eq!(m.local_caps_on("deepspeech2", &[0, 0], a100), None);
    assert_eq!(m.local_caps_on("deepspeech2", &[8, 7], MIXED_GPU_TYPES), None);
    assert_eq!(m.local_caps_on("no-such-app", &[1], a100), None);
    // The trait method is the model's (Pollux's batch choice reads it).
    assert_eq!(ProgressModel::local_caps_on(&m, "deepspeech2", &[7, 8], a100), Some((40, Some(40))));
}

#[test]
fn sia_and_tiresias_tuned_stop_on_jobs_they_could_never_run() {
    // Each of these once waited for ever (the run never ended).
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("w.csv");
    let run = |policy: &str, name: &str| {
        let out = d.path().join(name);
        let args = ["simulate", "--trace", trace.to_str().unwrap(), "--cluster", "sia", "--policy", policy];
        let o = common::dlsched(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
        (o, out)
    };
    // An application the model does not know: the run fails before its
    // first instant under sia, as under fifo, naming the job and line.
    std::fs::write(&trace, "name,time,application,num_replicas,batch_size\nc,0,cifar10,1,128\nx,10,resnet9000,4,128\n")
        .unwrap();
    for policy in ["sia", "fifo"] {
        let (o, _) = run(policy, policy);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{policy}");
        assert!(err.contains("`x`") && err.contains("line 3") && err.contains("`resnet9000`"), "{policy}: {err}");
    }
    // A 32-GPU job on the sia preset (no type has more than 24 GPUs: 6 x 4
    // T4, 3 x 8 RTX 2080 Ti, 2 x 8 A100): tiresias-tuned runs it on one
    // type, so skips it by name, as gavel does; the other job completes.
    std::fs::write(
        &trace,
        "name,time,application,num_replicas,batch_size\nc,0,cifar10,1,128\nwide,10,cifar10,32,4096\n",
    )
    .unwrap();
    let (o, out) = run("tiresias-tuned", "tt");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!((v["jobs_completed"].as_u64(), v["jobs_skipped"].as_u64()), (Some(1), Some(1)), "{summary}");
    let skipped = std::fs::read_to_string(out.join("skipped.csv")).unwrap();
    assert!(skipped.contains("wide") && skipped.contains("exceeds_gpu_type_group"), "{skipped}");
}
