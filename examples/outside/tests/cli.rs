//! The crate's own binary (dlsched's command line with `largest-first` and
//! `ws-jobs`): a run on the sample checked against a schedule computed by
//! hand, the same run from a sweep file, and its rerun from its manifest.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dlsched-outside-example"))
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample.txt")
}

/// Runs the binary with `args`; panics with its stderr unless it succeeds.
fn run(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// (job_id, start_s, end_s) of the jobs of a run directory's jobs.csv.
fn schedule(dir: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(dir.join("jobs.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (id, start, end) = (col("job_id"), col("start_s"), col("end_s"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[id].to_string(), f[start].to_string(), f[end].to_string())
        })
        .collect()
}

fn row<'a>(s: &'a [(String, String, String)], id: &str) -> (&'a str, &'a str) {
    let r = s.iter().find(|r| r.0 == id).unwrap_or_else(|| panic!("no job {id} in {s:?}"));
    (&r.1, &r.2)
}

#[test]
fn largest_first_on_the_sample_schedules_as_computed_by_hand() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let trace = sample();
    let stdout = run(&[
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--format",
        "ws-jobs",
        "--policy",
        "largest-first",
        "--nodes",
        "1",
        "--gpus-per-node",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.contains("largest-first"), "{stdout}");
    // 1 node x 4 GPUs, strict, largest first. t=0: a(2), b(1), c(4) arrive;
    // c (4 GPUs) starts, 0 free, so a waits and b behind it. t=10 d(2),
    // t=20 e(1) join: queue a, d (2 GPUs, submit order), b, e (1 GPU).
    // t=80 c ends: a and d start (2+2), b does not fit. t=110 d ends: b and
    // e start. b ends 160, e 170, a 180. (FIFO would start a and b at 0.)
    let s = schedule(&out);
    assert_eq!(row(&s, "c"), ("0", "80"));
    assert_eq!(row(&s, "a"), ("80", "180"));
    assert_eq!(row(&s, "d"), ("80", "110"));
    assert_eq!(row(&s, "b"), ("110", "160"));
    assert_eq!(row(&s, "e"), ("110", "170"));
    // f asks for no GPU: skipped and counted, not run.
    assert!(s.iter().all(|r| r.0 != "f"), "{s:?}");
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(summary["jobs_completed"], 16, "{summary}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["spec"]["policy"], serde_json::json!({"kind": "largest-first", "backfill": false}));
    assert_eq!(manifest["spec"]["workload"]["format"], "ws-jobs");
}

#[test]
fn a_bad_line_is_named_by_file_line_and_field() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("bad.txt");
    std::fs::write(&trace, "# id submit_s duration_s gpus\na 0 100 2\nb 0 fifty 1\n").unwrap();
    let out = bin().args(["simulate", "--trace", trace.to_str().unwrap(), "--format", "ws-jobs"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.txt:3: column `duration_s`"), "{err}");
    assert!(err.contains("`fifty` is not a whole number"), "{err}");
}

/// The outside reader turns seconds into milliseconds with a saturating
/// multiplication, so a submit time of 1e17 s reaches dlsched as u64::MAX ms;
/// dlsched refuses it as it refuses it from its own readers (at most 1e11 s),
/// naming the line and the field, instead of simulating an overflowed time.
#[test]
fn a_time_beyond_the_bound_from_an_outside_reader_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("huge.txt");
    std::fs::write(&trace, "a 0 100 2\nb 99999999999999999 100 1\n").unwrap();
    let out = bin()
        .args(["simulate", "--trace", trace.to_str().unwrap(), "--format", "ws-jobs", "--policy", "largest-first"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("huge.txt:2: column `submit time`"), "{err}");
    assert!(err.contains("job `b`") && err.contains("at most 1e11 s"), "{err}");
}

#[test]
fn the_help_lists_the_registered_kind_and_format() {
    let help = run(&["simulate", "--help"]);
    assert!(help.contains("- largest-first:") && help.contains("Largest job first: by GPUs asked"), "{help}");
    assert!(help.contains("- ws-jobs:") && help.contains("Whitespace-separated `id submit_s"), "{help}");
    let out = bin().args(["simulate", "--policy", "nosuch"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ldwp-frozen, largest-first"), "{err}");
}

#[test]
fn a_sweep_file_runs_both_and_the_manifest_reruns_byte_for_byte() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(sample(), d.path().join("sample.txt")).unwrap();
    let exp = d.path().join("exp.toml");
    std::fs::write(
        &exp,
        r#"question = "Does largest-first change the schedule of the sample?"
[base]
trace = "sample.txt"
format = "ws-jobs"
nodes = 1
gpus_per_node = 4
[sweep]
policy = ["fifo", "largest-first"]
policy_opt.backfill = [false, true]
"#,
    )
    .unwrap();
    let out = d.path().join("sweep");
    run(&["sweep", exp.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    // 2 policies x 2 backfill settings, a header and four rows.
    assert_eq!(summary.lines().count(), 5, "{summary}");
    // The strict largest-first run of the sweep is the hand-computed one.
    let runs: Vec<PathBuf> = std::fs::read_dir(out.join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
    let spec = |dir: &Path| -> serde_json::Value {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
        m["spec"]["policy"].clone()
    };
    let strict = runs
        .iter()
        .find(|r| spec(r) == serde_json::json!({"kind": "largest-first", "backfill": false}))
        .expect("a strict largest-first run");
    assert!(runs.iter().any(|r| spec(r) == serde_json::json!({"kind": "largest-first", "backfill": true})));
    let s = schedule(strict);
    assert_eq!(row(&s, "c"), ("0", "80"));
    assert_eq!(row(&s, "b"), ("110", "160"));
    // Its manifest reruns it byte for byte (the decision timings aside).
    let again = d.path().join("again");
    run(&[
        "simulate",
        "--from-manifest",
        strict.join("manifest.json").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    let mut files: Vec<String> = std::fs::read_dir(strict)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f != "timing.json")
        .collect();
    files.sort();
    assert!(files.contains(&"jobs.csv".to_string()) && files.contains(&"manifest.json".to_string()), "{files:?}");
    for f in &files {
        let a = std::fs::read(strict.join(f)).unwrap();
        let b = std::fs::read(again.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(a == b, "{f} differs after --from-manifest");
    }
}
