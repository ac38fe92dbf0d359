//! Output safety: a full stdout or stderr (`/dev/full`), an unwritable
//! `--out`, reruns into an old run directory, readers of an unfinished run,
//! a sweep whose own files cannot be written. Spawns the built binary.

use crate::common::dlsched;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs with stdout (or stderr) on `/dev/full`, where every write fails with ENOSPC.
#[cfg(target_os = "linux")]
fn dlsched_full(args: &[&str], full_stderr: bool) -> Output {
    let full = || Stdio::from(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap());
    let mut c = Command::new(env!("CARGO_BIN_EXE_dlsched"));
    c.args(args);
    if full_stderr {
        c.stderr(full()).stdout(Stdio::piped());
    } else {
        c.stdout(full()).stderr(Stdio::piped());
    }
    c.output().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Exit 2 with one `error: cannot write to standard output` line, no panic.
#[cfg(target_os = "linux")]
fn assert_stdout_error(o: &Output) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("error: cannot write to standard output: No space left on device"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn simulate_to_a_full_stdout_writes_its_files_then_exits_2() {
    let d = tempfile::tempdir().unwrap();
    let (full, normal) = (d.path().join("full"), d.path().join("normal"));
    let o = dlsched_full(&["simulate", "--jobs", "40", "--seed", "4", "--out", s(&full)], false);
    assert_stdout_error(&o);
    // The run directory is complete and the same as a run printing normally.
    let n = dlsched(&["simulate", "--jobs", "40", "--seed", "4", "--out", s(&normal)]);
    assert!(n.status.success(), "{}", text(&n.stderr));
    for f in ["jobs.csv", "summary.json", "timeline.csv", "vc_summary.csv", "manifest.json"] {
        assert_eq!(std::fs::read(full.join(f)).unwrap(), std::fs::read(normal.join(f)).unwrap(), "{f}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn other_commands_on_a_full_stdout_exit_2_without_a_panic() {
    let d = tempfile::tempdir().unwrap();
    assert_stdout_error(&dlsched_full(&["profile", "show", "--list"], false));
    assert_stdout_error(&dlsched_full(&["profile", "show", "resnet50-imagenet"], false));
    assert_stdout_error(&dlsched_full(&["--help"], false));
    assert_stdout_error(&dlsched_full(&["--version"], false));
    // A sweep writes its runs, summary.csv and plots, then reports the failed print.
    let exp = d.path().join("e.toml");
    std::fs::write(&exp, "question = \"q\"\n[base]\njobs = 20\n[sweep]\nseed = [1, 2]\n").unwrap();
    let out = d.path().join("sweep");
    assert_stdout_error(&dlsched_full(&["sweep", s(&exp), "--out", s(&out)], false));
    // Two runs: a header line and two rows.
    assert_eq!(std::fs::read_to_string(out.join("summary.csv")).unwrap().lines().count(), 3);
    assert!(out.join("jct_cdf.svg").exists());
    // rifling-train prints a line per episode before it saves the table: the
    // table and its curve (a header and one row per episode) are saved still.
    let table = d.path().join("rt.json");
    assert_stdout_error(&dlsched_full(
        &["rifling-train", "--episodes", "2", "--hours", "2", "--out", s(&table)],
        false,
    ));
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&table).unwrap()).unwrap();
    assert_eq!(t["manifest"]["episodes"], 2);
    assert_eq!(std::fs::read_to_string(d.path().join("rt.curve.csv")).unwrap().lines().count(), 3);
    let fits = d.path().join("gp.json");
    assert_stdout_error(&dlsched_full(&["genie-profile", "--out", s(&fits)], false));
    assert!(fits.exists());
    // compare and plot of a finished run.
    let run = d.path().join("run");
    assert!(dlsched(&["simulate", "--jobs", "10", "--out", s(&run)]).status.success());
    let json = d.path().join("compare.json");
    assert_stdout_error(&dlsched_full(&["compare", s(&run), s(&run.join("jobs.csv")), "--json", s(&json)], false));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["exact"], 10, "the run against its own jobs.csv: all 10 jobs match");
    assert_stdout_error(&dlsched_full(&["plot", s(&run)], false));
    assert!(run.join("jct_cdf.svg").exists(), "plot draws its files before it reports them");
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stderr_exits_2_silently() {
    // An error message that cannot be written: exit 2, not a panic (101).
    let o = dlsched_full(&["simulate", "--trace", "/no/such/trace.csv"], true);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    // A usage error from the argument parser.
    assert_eq!(dlsched_full(&["simulate", "--no-such-option"], true).status.code(), Some(2));
    // A note on stderr that cannot be written is an error of the run: exit 2,
    // the run's files are written already.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = dlsched_full(&["simulate", "--jobs", "10", "--genie-best-fit", "--out", s(&out)], true);
    assert_eq!(o.status.code(), Some(2));
    assert!(out.join("manifest.json").exists());
}

#[test]
fn an_unwritable_out_is_refused_before_the_simulation() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("file");
    std::fs::write(&file, "x").unwrap();
    // A directory under a regular file cannot be made: the error comes
    // first, nothing of a simulation is printed.
    let o = dlsched(&["simulate", "--jobs", "40", "--out", s(&file.join("sub"))]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.starts_with("error: --out ") && err.contains("file/sub") && err.contains("cannot create"), "{err}");
    assert!(o.stdout.is_empty(), "the summary was printed before the check: {}", text(&o.stdout));
    // A run that fails leaves no empty directory it made behind.
    let out = d.path().join("new");
    let o = dlsched(&["simulate", "--trace", "/no/such/trace.csv", "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
}

#[test]
fn a_rerun_removes_the_earlier_runs_files_and_charts() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // Run 1 skips a row (skipped.csv) and is plotted (four SVGs).
    let trace = d.path().join("t.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\na,0,10,1\nb,5,20,2\nz,6,10,0\n").unwrap();
    assert!(dlsched(&["simulate", "--trace", s(&trace), "--out", s(&run)]).status.success());
    assert!(run.join("skipped.csv").exists());
    assert!(dlsched(&["plot", s(&run)]).status.success());
    assert!(run.join("jct_cdf.svg").exists() && run.join("queue_length.svg").exists());
    // Leftovers of an interrupted write, and a file of the user's own.
    std::fs::write(run.join("jobs.csv.tmp"), "job_id,vc\nhalf").unwrap();
    std::fs::write(run.join("notes.txt"), "mine").unwrap();
    // Run 2, the synthetic workload: skips nothing, not plotted.
    assert!(dlsched(&["simulate", "--jobs", "5", "--out", s(&run)]).status.success());
    let mut names: Vec<String> =
        std::fs::read_dir(&run).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(
        names,
        ["jobs.csv", "manifest.json", "notes.txt", "summary.json", "timeline.csv", "vc_summary.csv", "vc_timeline.csv"]
    );
    // The charts plot_run draws are among the files a rerun removes.
    let files = dlsched::plot::plot_run(&run).unwrap();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(dlsched::experiment::PLOT_FILES.contains(&name.as_str()), "{name} is not in PLOT_FILES");
    }
}

#[test]
fn compare_and_plot_refuse_a_run_without_a_complete_manifest() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    assert!(dlsched(&["simulate", "--jobs", "20", "--out", s(&run)]).status.success());
    let jobs = run.join("jobs.csv");
    let reference = d.path().join("ref.csv");
    std::fs::copy(&jobs, &reference).unwrap();
    assert!(dlsched(&["compare", s(&run), s(&reference)]).status.success());
    // What an interrupted rerun used to leave: the old files, no manifest, a partial temporary.
    std::fs::remove_file(run.join("manifest.json")).unwrap();
    std::fs::write(run.join("jobs.csv.tmp"), "job_id,vc,gp").unwrap();
    for args in
        [vec!["compare", s(&run), s(&reference)], vec!["compare", s(&jobs), s(&reference)], vec!["plot", s(&run)]]
    {
        let o = dlsched(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(s(&run)) && err.contains("manifest.json is missing"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o.stdout));
    }
    assert!(!run.join("jct_cdf.svg").exists());
    // A manifest cut short is not complete either.
    std::fs::write(run.join("manifest.json"), "{\n  \"dlsched_ver").unwrap();
    let o = dlsched(&["compare", s(&run), s(&reference)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("not a complete run manifest"), "{}", text(&o.stderr));
    // A jobs-style CSV outside any run directory is compared as it is.
    let o = dlsched(&["compare", s(&reference), s(&reference)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("20 of 20"));
}

#[test]
fn profile_import_refuses_out_inside_from() {
    let d = tempfile::tempdir().unwrap();
    let raw = d.path().join("raw");
    std::fs::create_dir(&raw).unwrap();
    for out in [raw.clone(), raw.join("derived"), raw.join(".")] {
        let o = dlsched(&["profile", "import", "--from", s(&raw), "--out", s(&out)]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("--from") && err.contains("raw measurements"), "{err}");
    }
    assert_eq!(std::fs::read_dir(&raw).unwrap().count(), 0, "nothing was written into --from");
}

#[test]
fn a_sweep_whose_summary_cannot_be_written_keeps_the_runs_errors() {
    // summary.csv cannot be written (a non-empty directory is in its place,
    // so the rename fails); failed.csv and the per-run error still are.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("good.csv"), "job_id,submit_time,duration,gpu_num\na,0,10,1\n").unwrap();
    std::fs::write(d.path().join("bad.csv"), "job_id,submit_time,duration,gpu_num\na,0,ten,1\n").unwrap();
    let exp = d.path().join("e.toml");
    std::fs::write(&exp, "question = \"q\"\n[sweep]\ntrace = [\"good.csv\", \"bad.csv\"]\n").unwrap();
    let out = d.path().join("out");
    std::fs::create_dir_all(out.join("summary.csv").join("x")).unwrap();
    let e = dlsched::sweep::Experiment::load(&exp).unwrap();
    let o = dlsched::sweep::run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.failed.len()), (1, 1));
    assert_eq!(o.write_errors.len(), 1, "{:?}", o.write_errors);
    assert!(o.write_errors[0].contains("summary.csv"), "{:?}", o.write_errors);
    let failed = std::fs::read_to_string(out.join("failed.csv")).unwrap();
    assert!(failed.contains("bad.csv:2"), "{failed}");
    // The command prints the run's error and the write error, and exits 2.
    let o = dlsched(&["sweep", s(&exp), "--out", s(&out)]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("failed: ") && err.contains("bad.csv:2"), "{err}");
    assert!(
        err.contains("error: the sweep's results could not all be written") && err.contains("summary.csv"),
        "{err}"
    );
}
