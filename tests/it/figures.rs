//! Figures that read wrong, options that were silently ignored, inputs that
//! got past the bounds (issue 13, points 7 and 9).

use crate::common::dlsched;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn clean_error(o: &Output, needles: &[&str]) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error:") && !err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`: {err}");
    }
}

fn run_to(dir: &Path, args: &[&str]) -> PathBuf {
    let out = dir.join("run");
    let mut a = args.to_vec();
    a.extend(["--out", out.to_str().unwrap(), "--sample-interval", "0"]);
    let o = dlsched(&a);
    assert!(o.status.success(), "{}", text(&o.stderr));
    out
}

fn summary(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap()
}

/// `jobs.csv` rows as (job_id, column) for one column.
fn column(run: &Path, name: &str) -> Vec<(String, String)> {
    let mut rdr = csv::Reader::from_path(run.join("jobs.csv")).unwrap();
    let col = rdr.headers().unwrap().iter().position(|h| h == name).unwrap();
    rdr.records().map(|r| r.unwrap()).map(|r| (r[0].to_string(), r[col].to_string())).collect()
}

#[test]
fn offered_load_of_jobs_arriving_at_one_instant_is_not_zero() {
    let d = tempfile::tempdir().unwrap();
    // Three 16-GPU jobs at t = 0 on lab16 (16 GPUs), 100, 200 and 300 s:
    // demand 16 × 600 = 9,600 GPU-s; the arrival span is 0, so the window is
    // the mean duration, 200 s: 9,600 / (16 × 200) = 3.
    let t = write(d.path(), "t.csv", "job_id,submit_time,duration,gpu_num\na,0,100,16\nb,0,200,16\nc,0,300,16\n");
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap()]);
    assert_eq!(summary(&run)["offered_load"], 3.0);
    // Spread arrivals keep the arrival span: 1 GPU × 10 s + 2 × 30 s = 70
    // GPU-s over 1,000 s (longer than the 20 s mean) on 16 GPUs = 0.004375.
    let t = write(d.path(), "u.csv", "job_id,submit_time,duration,gpu_num\na,0,10,1\nb,1000,30,2\n");
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap()]);
    assert_eq!(summary(&run)["offered_load"], 0.004375);
}

#[test]
fn a_job_larger_than_its_vc_but_not_the_cluster_exceeds_the_vc() {
    let d = tempfile::tempdir().unwrap();
    // Two VCs of one 8-GPU node: 16 GPUs in all. 12 GPUs fit the cluster but
    // not VC a; 20 fit neither.
    let vcs = write(d.path(), "vcs.csv", "vc,nodes,gpus_per_node\na,1,8\nb,1,8\n");
    let t = write(
        d.path(),
        "t.csv",
        "job_id,submit_time,duration,gpu_num,vc\nsmall,0,10,8,b\nwide,0,10,12,a\nhuge,0,10,20,a\n",
    );
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap(), "--vcs", vcs.to_str().unwrap()]);
    let s = summary(&run);
    assert_eq!(s["jobs_skipped_by_reason"], serde_json::json!({"exceeds_cluster": 1, "exceeds_vc": 1}));
    assert_eq!(s["jobs_completed"], 1);
    let skipped = std::fs::read_to_string(run.join("skipped.csv")).unwrap();
    assert!(skipped.contains("wide") && skipped.contains("exceeds_vc"), "{skipped}");
}

#[test]
fn trace_speed_ends_exactly_at_the_longest_durations() {
    let d = tempfile::tempdir().unwrap();
    // 10^9, 10^10 and 10^11 s (the accepted maximum) from t = 0, and
    // 10^11 - 1 s from t = 7 s: ends 10^9, 10^10, 10^11 and 10^11 + 6 s.
    let t = write(
        d.path(),
        "t.csv",
        "job_id,submit_time,duration,gpu_num\n\
         a,0,1000000000,1\nb,0,10000000000,1\nc,0,100000000000,1\nd,7,99999999999,1\n",
    );
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap()]);
    let ends = column(&run, "end_s");
    let want = [("a", "1000000000"), ("b", "10000000000"), ("c", "100000000000"), ("d", "100000000006")];
    assert_eq!(ends, want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec());
}

#[test]
fn wall_clock_submissions_are_held_to_the_time_limit() {
    let d = tempfile::tempdir().unwrap();
    let helios = |last: &str| {
        format!(
            "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n\
             1,u,v,1,1,1,COMPLETED,2020-01-01 00:00:00,,,60,0\n\
             2,u,v,1,1,1,COMPLETED,{last},,,60,0\n"
        )
    };
    let h = write(d.path(), "h.csv", &helios("9999-12-31 23:59:59"));
    // 9999-12-31 is about 2.5e11 s after 2020-01-01: over the 1e11 s limit.
    clean_error(&dlsched(&["simulate", "--trace", h.to_str().unwrap()]), &["h.csv:3", "`submit_time`", "1e11"]);
    let p = write(
        d.path(),
        "p.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2020-01-01 00:00:00,60,1,60,c\n9999-12-31 23:59:59,60,1,60,c\n",
    );
    clean_error(&dlsched(&["simulate", "--trace", p.to_str().unwrap()]), &["p.csv:3", "`timestamp`", "1e11"]);
    // 2999-12-31 is about 3.1e10 s later: accepted.
    let ok = write(d.path(), "ok.csv", &helios("2999-12-31 00:00:00"));
    let o = dlsched(&["simulate", "--trace", ok.to_str().unwrap(), "--sample-interval", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn genie_profile_takes_the_clusters_simulate_takes() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("v100.json");
    let cluster = ["--nodes", "2", "--gpus-per-node", "4", "--gpu-type", "v100"];
    let mut args = vec!["genie-profile", "--out", m.to_str().unwrap()];
    args.extend(cluster);
    let o = dlsched(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
    assert_eq!(saved["models"]["gpu_type"], "v100");
    let mut args = vec!["simulate", "--workload", "genie", "--policy", "genie", "--hours", "1"];
    args.extend(cluster);
    args.extend(["--genie-models", m.to_str().unwrap()]);
    let o = dlsched(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn backfill_is_said_to_change_nothing_where_it_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let mut a = vec!["simulate", "--workload", "genie", "--jobs-per-hour", "40", "--hours", "4"];
        a.extend_from_slice(extra);
        a.extend(["--out", out.to_str().unwrap()]);
        let o = dlsched(&a);
        assert!(o.status.success(), "{}", text(&o.stderr));
        (out, text(&o.stderr))
    };
    let (strict, note) = run("strict", &["--policy", "fifo"]);
    assert!(!note.contains("--backfill"), "{note}");
    let (bf, note) = run("bf", &["--policy", "fifo", "--backfill"]);
    assert!(note.contains("note: --backfill changes nothing"), "{note}");
    // And it does change nothing: every task starts at the same time.
    assert_eq!(column(&strict, "start_s"), column(&bf, "start_s"));
    let (_, note) = run("rp", &["--policy", "random-placement", "--backfill"]);
    assert!(note.contains("random-placement") && note.contains("--backfill do not apply"), "{note}");
    // A sweep says so too, once per case.
    let f = write(
        d.path(),
        "e.toml",
        "question = \"q\"\n[base]\nworkload = \"genie\"\nbackfill = true\n\
         [sweep]\npolicy = [\"fifo\", \"random-placement\", \"genie\"]\nseed = [1, 2]\n",
    );
    let e = dlsched::sweep::Experiment::load(&f).unwrap();
    assert_eq!(e.notes.len(), 2, "{:?}", e.notes);
    assert!(e.notes[0].contains("`fifo` on GENIE tasks") && e.notes[1].contains("`random-placement`"), "{:?}", e.notes);
}

#[test]
fn a_file_without_line_breaks_is_an_error_not_an_abort() {
    let d = tempfile::tempdir().unwrap();
    // 2 MiB with no line break: over the 1 MiB line bound.
    let blob = write(d.path(), "blob.csv", &"x".repeat(2 << 20));
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example_jobs.csv");
    let trace = trace.to_str().unwrap();
    clean_error(
        &dlsched(&["simulate", "--trace", trace, "--vcs", blob.to_str().unwrap()]),
        &["blob.csv:1", "longer than 1048576 bytes"],
    );
    clean_error(&dlsched(&["simulate", "--trace", blob.to_str().unwrap()]), &["blob.csv:1", "longer than"]);
    clean_error(&dlsched(&["simulate", "--nodes-file", blob.to_str().unwrap()]), &["blob.csv:1", "longer than"]);
    // An endless device, under a 4 GB address-space limit (it used to abort
    // with SIGABRT, exit 134, inside the csv crate).
    if !Path::new("/dev/zero").exists() || !Path::new("/bin/sh").exists() {
        eprintln!("SKIP a_file_without_line_breaks_is_an_error_not_an_abort (/dev/zero): no /dev/zero or /bin/sh");
        return;
    }
    for flag in ["--vcs", "--trace", "--nodes-file", "--columns-file"] {
        let mut args: Vec<&str> = vec!["simulate"];
        if flag == "--vcs" || flag == "--columns-file" {
            args.extend(["--trace", trace]);
        }
        args.extend([flag, "/dev/zero"]);
        let o = Command::new("/bin/sh")
            .arg("-c")
            .arg("ulimit -v 4000000 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_dlsched"))
            .args(&args)
            .output()
            .unwrap();
        clean_error(&o, &["/dev/zero"]);
    }
}

#[test]
fn sweep_files_and_the_command_line_share_one_set_of_bounds() {
    let d = tempfile::tempdir().unwrap();
    let load = |base: &str| {
        let f = write(d.path(), "e.toml", &format!("question = \"q\"\n[base]\n{base}\n[sweep]\nseed = [1, 2]\n"));
        dlsched::sweep::Experiment::load(&f).map(|_| ()).unwrap_err()
    };
    for (base, needles) in [
        ("jobs = 5000000000", &["`jobs` is too large", "2000000"][..]),
        ("jobs = 2000001", &["`jobs` is too large", "2000000"]),
        ("jobs = 0", &["`jobs` must be at least 1"]),
        ("nodes = 2\ngpus_per_node = 65", &["`gpus_per_node` is too large", "at most 64"]),
        ("workload = \"genie\"\nhours = 9000", &["`hours`", "8,760"]),
        ("sample_interval = 100000000001", &["`sample_interval`", "at most 1e11"]),
        ("workload = \"genie\"\npolicy = \"rifling\"\ntheta = 0.5", &["`theta` applies only to the GENIE-family"]),
    ] {
        let e = load(base);
        for n in needles {
            assert!(e.contains(n), "{base}: `{e}` lacks `{n}`");
        }
    }
    // The same values on the command line meet the same bounds.
    clean_error(&dlsched(&["simulate", "--jobs", "2000001"]), &["--jobs is too large", "2000000"]);
    clean_error(&dlsched(&["simulate", "--nodes", "2", "--gpus-per-node", "65"]), &["--gpus-per-node", "at most 64"]);
    clean_error(&dlsched(&["simulate", "--workload", "genie", "--hours", "9000"]), &["--hours", "8,760"]);
    clean_error(&dlsched(&["simulate", "--sample-interval", "100000000001"]), &["--sample-interval", "1e11"]);
}

#[test]
fn a_sweep_reads_each_rifling_table_once() {
    let d = tempfile::tempdir().unwrap();
    let table = d.path().join("table.json");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/rifling-lab16.json"), &table).unwrap();
    let f = write(
        d.path(),
        "e.toml",
        "question = \"q\"\n[base]\nworkload = \"genie\"\npolicy = \"rifling-frozen\"\nrifling_table = \"table.json\"\n\
         hours = 1\n[sweep]\nseed = [1, 2, 3]\n",
    );
    let e = dlsched::sweep::Experiment::load(&f).unwrap();
    assert_eq!((e.runs.len(), e.artefacts.len()), (3, 1));
    // The runs use the table read at load time: a file spoiled since is not read again.
    std::fs::write(&table, "not json").unwrap();
    let out = d.path().join("out");
    let o = dlsched::sweep::run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.failed.len()), (3, 0), "{:?}", o.failed);
}
