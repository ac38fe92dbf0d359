//! `vc_scale` / `--vc-scale`: VC partitions from a file with every VC's node
//! count scaled, from a sweep and from the command line.

use std::path::{Path, PathBuf};
use std::process::Command;

use dlsched::sweep::{Experiment, run_sweep};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn write_experiment(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("e.toml");
    std::fs::write(&p, format!("question = \"test\"\n{body}")).unwrap();
    p
}

#[test]
fn a_swept_vc_scale_halves_every_vc() {
    let d = tempfile::tempdir().unwrap();
    let r = root();
    let p = write_experiment(
        d.path(),
        &format!(
            "[base]\ntrace = \"{}\"\nvcs = \"{}\"\nsample_interval = 0\n[sweep]\nvc_scale = [0.5, 1.0]\n",
            r.join("traces/example_jobs.csv").display(),
            r.join("traces/example_vcs.csv").display()
        ),
    );
    let e = Experiment::load(&p).unwrap();
    let out = d.path().join("out");
    let o = run_sweep(&e, &out, 1, None, false, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.failed.len()), (2, 0));
    let mut got = Vec::new();
    for run in &e.runs {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("runs").join(&run.id).join("summary.json")).unwrap(),
        )
        .unwrap();
        got.push((
            run.params["vc_scale"].to_string(),
            s["gpus_total"].as_u64().unwrap(),
            s["jobs_skipped"].as_u64().unwrap(),
        ));
    }
    got.sort();
    // example_vcs.csv: research 2 nodes x 4 GPUs, production 4 x 8 = 40 GPUs.
    // Halved: research 1 x 4, production 2 x 8 = 20 GPUs; a3 (research,
    // 8 GPUs) no longer fits its VC and is skipped (exceeds_vc); p3
    // (production, 16) still fits.
    assert_eq!(got, vec![("0.5".to_string(), 20, 1), ("1".to_string(), 40, 0)]);
}

#[test]
fn vc_scale_needs_vcs_and_a_share_in_0_1() {
    let d = tempfile::tempdir().unwrap();
    let p = write_experiment(d.path(), "[base]\nvc_scale = 0.5\n");
    let e = Experiment::load(&p).err().unwrap().message;
    assert!(e.contains("`vc_scale`") && e.contains("`vcs`"), "{e}");
    let vcs = root().join("traces/example_vcs.csv");
    let p = write_experiment(d.path(), &format!("[base]\nvcs = \"{}\"\nvc_scale = 2\n", vcs.display()));
    let e = Experiment::load(&p).err().unwrap().message;
    assert!(e.contains("`vc_scale` = 2 is outside (0, 1]"), "{e}");
    let o = Command::new(env!("CARGO_BIN_EXE_dlsched"))
        .args(["simulate", "--trace", "traces/example_jobs.csv", "--vcs", "traces/example_vcs.csv", "--vc-scale", "0"])
        .current_dir(root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--vc-scale = 0 is outside (0, 1]"), "{err}");
}
