//! One run spec: the command line and a sweep file fill the same spec, the
//! manifest records it in full, and `simulate --from-manifest` reruns it byte
//! for byte.

use crate::common::dlsched;
use std::path::Path;
use std::process::Command;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn repo(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p).to_string_lossy().into_owned()
}

/// The file names in a directory, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn from_manifest_reruns_a_run_byte_for_byte() {
    let d = tempfile::tempdir().unwrap();
    let (jobs, vcs, share) =
        (repo("traces/example_jobs.csv"), repo("traces/example_vcs.csv"), repo("tests/golden/inputs/share_jobs.csv"));
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "trace-vcs-sjf",
            vec!["--trace", &jobs, "--vcs", &vcs, "--policy", "sjf", "--backfill", "--tie-order", "numpy2-avx512"],
        ),
        (
            "sharing",
            vec![
                "--trace",
                &share,
                "--nodes",
                "2",
                "--gpus-per-node",
                "2",
                "--gpu-type",
                "v100",
                "--placement",
                "share-best-fit",
                "--max-tenants",
                "3",
                "--mem-headroom",
                "0.1",
                "--rate-model",
                "table",
                "--sample-interval",
                "60",
            ],
        ),
        ("iawp", vec!["--trace", &share, "--placement", "iawp", "--backfill", "--rate-model", "table"]),
        ("synthetic", vec!["--jobs", "80", "--seed", "9", "--load", "1.2", "--placement", "first-fit"]),
        (
            "genie",
            vec![
                "--workload",
                "genie",
                "--policy",
                "min-min",
                "--hours",
                "2",
                "--jobs-per-hour",
                "6",
                "--theta",
                "0.7",
                "--genie-best-fit",
                "--ect",
                "true",
            ],
        ),
        (
            "rifling",
            vec!["--workload", "genie", "--policy", "rifling", "--hours", "2", "--rifling-alpha", "0.2", "--seed", "3"],
        ),
    ];
    for (name, args) in cases {
        let first = d.path().join(format!("{name}-a"));
        let again = d.path().join(format!("{name}-b"));
        let mut a = vec!["simulate"];
        a.extend(args.iter().copied());
        a.extend(["--out", first.to_str().unwrap()]);
        let o = dlsched(&a);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let manifest = first.join("manifest.json");
        let o = dlsched(&["simulate", "--from-manifest", manifest.to_str().unwrap(), "--out", again.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        assert_eq!(files(&first), files(&again), "{name}");
        for f in files(&first).iter().filter(|f| *f != "timing.json") {
            assert!(
                std::fs::read(first.join(f)).unwrap() == std::fs::read(again.join(f)).unwrap(),
                "{name}: {f} differs after --from-manifest"
            );
        }
    }
}

#[test]
fn an_old_manifest_and_extra_options_are_refused_clearly() {
    let d = tempfile::tempdir().unwrap();
    // A manifest as dlsched wrote it before the run spec: `config`, no `spec`.
    let old = d.path().join("manifest.json");
    std::fs::write(&old, r#"{"dlsched_version": "0.1.0", "config": {"seed": 1}}"#).unwrap();
    let o = dlsched(&["simulate", "--from-manifest", old.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.starts_with("error: ") && err.contains("manifest.json") && err.contains("no `spec` field"), "{err}");
    // A spec with an unknown policy option names it.
    let bad = d.path().join("bad.json");
    let spec = r#"{"workload": {"kind": "synthetic", "jobs": 5, "jobs_per_hour": null, "load": 0.8},
        "cluster": {"kind": "preset", "preset": "lab16"}, "policy": {"kind": "fifo", "bakfill": true},
        "seed": 1, "sample_interval_ms": 0, "rate_model": "trace", "profiles": null}"#;
    std::fs::write(&bad, format!(r#"{{"dlsched_version": "0.1.0", "spec": {spec}}}"#)).unwrap();
    let o = dlsched(&["simulate", "--from-manifest", bad.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(o.status.code() == Some(2) && err.contains("unknown field `bakfill`"), "{err}");
    // The spec is the manifest's: other run options are refused, not mixed in.
    let o = dlsched(&["simulate", "--from-manifest", old.to_str().unwrap(), "--policy", "sjf"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cannot be used with"), "{}", text(&o.stderr));
}

#[test]
fn the_command_line_and_a_sweep_file_fill_the_same_spec() {
    let d = tempfile::tempdir().unwrap();
    let (jobs, vcs) = (repo("traces/example_jobs.csv"), repo("traces/example_vcs.csv"));
    let run = d.path().join("cli");
    let o = dlsched(&[
        "simulate",
        "--trace",
        &jobs,
        "--vcs",
        &vcs,
        "--policy",
        "sjf",
        "--backfill",
        "--placement",
        "first-fit",
        "--seed",
        "7",
        "--sample-interval",
        "60",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    // The same run as a sweep file's keys (absolute paths stay as they are).
    let exp = d.path().join("e.toml");
    std::fs::write(
        &exp,
        format!(
            "question = \"q\"\n[base]\ntrace = {jobs:?}\nvcs = {vcs:?}\npolicy = \"sjf\"\nbackfill = true\nplacement = \"first-fit\"\nsample_interval = 60\n[sweep]\nseed = [7]\n"
        ),
    )
    .unwrap();
    let e = dlsched::sweep::Experiment::load(&exp).unwrap();
    let spec = dlsched::sweep::to_run_spec(&e.runs[0].params, &exp).unwrap();
    assert_eq!(m["spec"], serde_json::to_value(&spec).unwrap());
    // And the recorded spec reads back to the same value.
    assert_eq!(dlsched::experiment::RunSpec::from_manifest(&run.join("manifest.json")).unwrap(), spec);
}

/// Runs dlsched in `dir`.
fn dlsched_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dlsched")).current_dir(dir).args(args).output().unwrap()
}

#[test]
fn from_manifest_checks_the_input_file_it_recorded() {
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs.csv");
    let original = std::fs::read(repo("traces/example_jobs.csv")).unwrap();
    std::fs::write(&jobs, &original).unwrap();
    // A relative trace path, as a user types it, from the directory `d`.
    let o = dlsched_in(d.path(), &["simulate", "--trace", "jobs.csv", "--out", "run"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let manifest = d.path().join("run/manifest.json");
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let recorded = m["input"]["sha256"].as_str().unwrap().to_string();
    // The unchanged file reruns.
    let o = dlsched_in(d.path(), &["simulate", "--from-manifest", "run/manifest.json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A trailing blank line changes the file: refused, naming the file and both
    // hashes; the new hash computed independently here from the new bytes.
    let mut changed = original.clone();
    changed.push(b'\n');
    std::fs::write(&jobs, &changed).unwrap();
    let now = {
        use sha2::Digest;
        sha2::Sha256::digest(&changed).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert_ne!(now, recorded);
    let o = dlsched_in(d.path(), &["simulate", "--from-manifest", "run/manifest.json"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("jobs.csv")
            && err.contains(&recorded)
            && err.contains(&now)
            && err.contains("--allow-changed-input"),
        "{err}"
    );
    // The flag reruns anyway.
    let o = dlsched_in(d.path(), &["simulate", "--from-manifest", "run/manifest.json", "--allow-changed-input"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // From another directory the relative path is not found: the error says
    // where paths are read from.
    let other = d.path().join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let o = dlsched_in(&other, &["simulate", "--from-manifest", "../run/manifest.json"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("jobs.csv") && err.contains("relative to the directory the original run started in"), "{err}");
}

#[test]
fn a_bad_spec_field_is_named_by_its_json_path() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("manifest.json");
    let spec = r#"{"workload": {"kind": "synthetic", "jobs": 5, "jobs_per_hour": null, "load": 0.8},
        "cluster": {"kind": "preset", "preset": "lab16"}, "policy": {"kind": "fifo", "backfill": "yes"},
        "seed": 1, "sample_interval_ms": 0, "rate_model": "trace", "profiles": null}"#;
    std::fs::write(&bad, format!(r#"{{"dlsched_version": "0.1.0", "spec": {spec}}}"#)).unwrap();
    let o = dlsched(&["simulate", "--from-manifest", bad.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("spec.policy.backfill: invalid type"), "{err}");
}

/// The error of loading a sweep file with `text`.
fn sweep_error(dir: &Path, text: &str) -> String {
    let p = dir.join("e.toml");
    std::fs::write(&p, text).unwrap();
    match dlsched::sweep::Experiment::load(&p) {
        Ok(_) => panic!("{text}: loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_name_the_key_as_their_origin_spells_it() {
    let d = tempfile::tempdir().unwrap();
    // The tenant cap: a sweep key, a flag.
    let err = sweep_error(d.path(), "question = \"q\"\n[base]\njobs = 5\nmax_tenants = 0\n");
    assert!(err.contains("the tenant cap (`max_tenants`) must be at least 1") && !err.contains("--"), "{err}");
    let o = dlsched(&["simulate", "--jobs", "5", "--max-tenants", "0"]);
    let err = text(&o.stderr);
    assert!(o.status.code() == Some(2) && err.contains("the tenant cap (--max-tenants) must be at least 1"), "{err}");
    let err = sweep_error(d.path(), "question = \"q\"\n[base]\njobs = 5\nmem_headroom = 1.5\n");
    assert!(err.contains("(`mem_headroom`) must be in [0, 1), got 1.5") && !err.contains("--"), "{err}");
    // A manifest's sampling interval: 10^19 ms = 10^16 s, above the 10^11 s bound.
    let m = d.path().join("manifest.json");
    let spec = r#"{"workload": {"kind": "synthetic", "jobs": 5, "jobs_per_hour": null, "load": 0.8},
        "cluster": {"kind": "preset", "preset": "lab16"}, "policy": {"kind": "fifo"},
        "seed": 1, "sample_interval_ms": 10000000000000000000, "rate_model": "trace", "profiles": null}"#;
    std::fs::write(&m, format!(r#"{{"dlsched_version": "0.1.0", "spec": {spec}}}"#)).unwrap();
    let o = dlsched(&["simulate", "--from-manifest", m.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("`sample_interval_ms` = 10000000000000000000: 10000000000000000 s is out of range"), "{err}");
    assert!(!err.contains("--sample-interval"), "{err}");
}

#[test]
fn policy_iawp_hints_at_the_placement() {
    let d = tempfile::tempdir().unwrap();
    let err = sweep_error(d.path(), "question = \"q\"\n[sweep]\npolicy = [\"fifo\", \"iawp\"]\n");
    assert!(err.contains("`policy` = `iawp`") && err.contains("`placement` = `iawp`"), "{err}");
    let o = dlsched(&["simulate", "--jobs", "5", "--policy", "iawp"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("'iawp'") && err.contains("fifo, sjf") && err.contains("--placement iawp"), "{err}");
    // A name that is neither gets clap's own message, without the hint.
    let o = dlsched(&["simulate", "--jobs", "5", "--policy", "nope"]);
    let err = text(&o.stderr);
    assert!(o.status.code() == Some(2) && err.contains("'nope'") && !err.contains("--placement"), "{err}");
}
