//! Tolerant loading (`--skip-malformed`, key `skip_malformed`): malformed
//! rows left out and listed, every other row read as from a file without
//! them; strict input (`--strict-input`, key `strict_input`); a run's notes
//! from the library, once per sweep.

use std::path::Path;

use dlsched::experiment::RunSpec;
use dlsched::sweep::{Experiment, run_sweep};
use dlsched::trace::{ColumnMap, RowErrors, TraceFormat, load_trace, load_trace_with};

use crate::common::dlsched;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// (id, submit ms, duration ms, GPUs) of every record: what a row gives a
/// job, without its line.
fn jobs(path: &Path, rows: RowErrors) -> Vec<(String, u64, u64, u32)> {
    load_trace_with(path, TraceFormat::Auto, &ColumnMap::default(), rows)
        .unwrap()
        .records
        .iter()
        .map(|r| (r.job_id.to_string(), r.submit_ms, r.duration_ms, r.gpus))
        .collect()
}

/// A Helios `cluster_log.csv`-like file with the three malformed rows of
/// the issue (a RUNNING row with an empty duration at line 3, a row with a
/// field too many at line 5, a repeated job id at line 7, the earliest
/// submission of the file), and the same file with those rows deleted.
fn helios() -> (String, String) {
    let head = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n";
    let good = [
        "j1,u,vc1,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,2020-04-01 00:01:10,60,10\n",
        "j3,u,vc1,2,4,1,COMPLETED,2020-04-01 00:02:00,2020-04-01 00:02:00,2020-04-01 00:03:00,60,0\n",
        "j5,u,vc2,1,4,1,COMPLETED,2020-04-01 00:04:00,2020-04-01 00:04:00,2020-04-01 00:05:00,60,0\n",
    ];
    let bad = [
        "j2,u,vc1,1,4,1,RUNNING,2020-04-01 00:01:00,2020-04-01 00:01:00,,,0\n",
        "j4,u,vc1,1,4,1,COMPLETED,2020-04-01 00:03:00,2020-04-01 00:03:00,2020-04-01 00:04:00,60,0,x\n",
        "j1,u,vc1,1,4,1,COMPLETED,2020-03-31 23:00:00,2020-03-31 23:00:00,2020-03-31 23:01:00,60,0\n",
    ];
    let text = format!("{head}{}{}{}{}{}{}", good[0], bad[0], good[1], bad[1], good[2], bad[2]);
    (text, format!("{head}{}", good.concat()))
}

#[test]
fn skipped_rows_leave_the_others_as_a_file_without_them_gives_them() {
    let d = tempfile::tempdir().unwrap();
    // The Helios log and a jobs-csv list, each with its malformed rows.
    let (helios, clean) = helios();
    let jobs_csv = "job_id,submit_time,duration,gpu_num\na,0,100,1\nb,10,5,two\nc,20,30,1\n\"d\",x,10,2\ne,40,5,1\n";
    let jobs_clean = "job_id,submit_time,duration,gpu_num\na,0,100,1\nc,20,30,1\ne,40,5,1\n";
    for (name, text, clean, want) in [
        (
            "helios.csv",
            helios.as_str(),
            clean.as_str(),
            vec![
                (3, Some("duration"), "`` is not a number of seconds"),
                (5, None, "row has 13 fields but the header has 12"),
                (7, Some("job_id"), "job id `j1` repeats line 2; job ids must be unique"),
            ],
        ),
        (
            "jobs.csv",
            jobs_csv,
            jobs_clean,
            vec![
                (3, Some("gpu_num"), "`two` is not a whole, non-negative count (at most 4294967295)"),
                (5, Some("submit_time"), "`x` is not a number of seconds"),
            ],
        ),
    ] {
        let (p, c) = (d.path().join(name), d.path().join(format!("clean-{name}")));
        std::fs::write(&p, text).unwrap();
        std::fs::write(&c, clean).unwrap();
        // By default: the first one's precise error, as before.
        let e = load_trace(&p, TraceFormat::Auto, &ColumnMap::default()).unwrap_err().to_string();
        let (line, col, msg) = want[0];
        assert_eq!(e, format!("{}:{line}: column `{}`: {msg}", p.display(), col.unwrap()));
        // Skipping: both listed, the rest as the clean file gives it.
        let t = load_trace_with(&p, TraceFormat::Auto, &ColumnMap::default(), RowErrors::Skip).unwrap();
        let got: Vec<(u64, Option<&str>, &str)> =
            t.malformed.iter().map(|m| (m.line, m.column.as_deref(), m.message.as_str())).collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(jobs(&p, RowErrors::Skip), jobs(&c, RowErrors::Fail), "{name}");
        let origin = |f: &Path| load_trace(f, TraceFormat::Auto, &ColumnMap::default()).map(|t| t.origin);
        assert_eq!(t.origin, origin(&c).unwrap(), "{name}");
    }
}

#[test]
fn a_large_file_read_in_parts_skips_the_same_rows() {
    // 40,000 rows (over 256 KiB: read in two parts on two threads), with a
    // malformed row near the start, in the middle and near the end, and one
    // repeated id; then the same with a quote (read by the csv reader in one pass).
    let d = tempfile::tempdir().unwrap();
    let mut rows = String::from("job_id,submit_time,duration,gpu_num\n");
    let mut clean = rows.clone();
    let mut bad_lines = Vec::new();
    for i in 0..40_000u64 {
        let line = i + 2;
        let row = match i {
            7 => format!("j{i},{i},,1\n"),
            20_000 => format!("j{i},{i},5\n"),
            39_990 => format!("j{i},{i},5,1.5\n"),
            39_995 => "j3,1,5,1\n".to_string(),
            _ => {
                let r = format!("j{i},{i},{},1\n", 1 + i % 7);
                clean.push_str(&r);
                r
            }
        };
        if matches!(i, 7 | 20_000 | 39_990 | 39_995) {
            bad_lines.push(line);
        }
        rows.push_str(&row);
    }
    let (p, c, q) = (d.path().join("big.csv"), d.path().join("clean.csv"), d.path().join("quoted.csv"));
    std::fs::write(&p, &rows).unwrap();
    std::fs::write(&c, &clean).unwrap();
    std::fs::write(&q, rows.replacen("j0,", "\"j0\",", 1)).unwrap();
    let want = jobs(&c, RowErrors::Fail);
    assert_eq!(want.len(), 39_996);
    for f in [&p, &q] {
        let t = load_trace_with(f, TraceFormat::Auto, &ColumnMap::default(), RowErrors::Skip).unwrap();
        assert_eq!(t.malformed.iter().map(|m| m.line).collect::<Vec<_>>(), bad_lines, "{}", f.display());
        assert_eq!(t.malformed[3].message, "job id `j3` repeats line 5; job ids must be unique");
        assert_eq!(jobs(f, RowErrors::Skip), want, "{}", f.display());
    }
}

#[test]
fn skip_malformed_from_the_command_line_lists_them_and_runs_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let (t, clean) = (d.path().join("t.csv"), d.path().join("clean.csv"));
    let (bad, good) = helios();
    std::fs::write(&t, bad).unwrap();
    std::fs::write(&clean, good).unwrap();
    let cluster = ["--nodes", "1", "--gpus-per-node", "2"];
    let run = |trace: &Path, extra: &[&str], out: &str| {
        let out = d.path().join(out);
        let mut args = vec!["simulate", "--trace", trace.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend(cluster);
        args.extend(extra);
        (dlsched(&args), out)
    };
    // Without the option: the first one's precise error, nothing written.
    let (o, out) = run(&t, &[], "fail");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains(&format!("{}:3: column `duration`: `` is not a number of seconds", t.display())),
        "{}",
        text(&o.stderr)
    );
    assert!(!out.join("manifest.json").exists());
    // With it: the three rows in skipped.csv, counted in the summary, noted once.
    let (o, out) = run(&t, &["--skip-malformed"], "skip");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(out.join("skipped.csv")).unwrap(),
        "job_id,line,gpus,reason,field,detail\n\
         ,3,,malformed,duration,`` is not a number of seconds\n\
         ,5,,malformed,,row has 13 fields but the header has 12\n\
         ,7,,malformed,job_id,job id `j1` repeats line 2; job ids must be unique\n"
    );
    let err = text(&o.stderr);
    assert_eq!(err.matches("malformed rows left out").count(), 1, "{err}");
    assert!(
        err.contains(
            "3 malformed rows left out (--skip-malformed): 1 in column `duration`, 1 in column `job_id`, 1 of the wrong shape"
        ),
        "{err}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!((summary["jobs_total"].as_u64(), summary["jobs_skipped"].as_u64()), (Some(6), Some(3)));
    assert_eq!(summary["jobs_completed"].as_u64(), Some(3));
    assert_eq!(summary["jobs_skipped_by_reason"]["malformed"].as_u64(), Some(3));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["spec"]["skip_malformed"].as_bool(), Some(true));
    assert_eq!(manifest["input"]["malformed_rows"].as_u64(), Some(3));
    // The jobs run are those of the file without the three rows.
    let (o, clean_out) = run(&clean, &[], "clean");
    assert!(o.status.success(), "{}", text(&o.stderr));
    for f in ["jobs.csv", "timeline.csv", "vc_timeline.csv"] {
        assert_eq!(std::fs::read(out.join(f)).unwrap(), std::fs::read(clean_out.join(f)).unwrap(), "{f}");
    }
    // The summary too, but for the rows counted as read and skipped.
    let mut clean_summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(clean_out.join("summary.json")).unwrap()).unwrap();
    assert_eq!((clean_summary["jobs_total"].as_u64(), clean_summary["jobs_skipped"].as_u64()), (Some(3), Some(0)));
    let mut summary = summary;
    for s in [&mut summary, &mut clean_summary] {
        let m = s.as_object_mut().unwrap();
        for k in ["jobs_total", "jobs_skipped", "jobs_skipped_by_reason"] {
            m.remove(k);
        }
    }
    assert_eq!(summary, clean_summary);
    // The option off: left out of the manifest, as before it existed.
    let m = std::fs::read_to_string(clean_out.join("manifest.json")).unwrap();
    assert!(!m.contains("skip_malformed") && !m.contains("malformed_rows") && !m.contains("strict_input"), "{m}");
    // Rerun from the manifest: the same rows left out.
    let rerun = d.path().join("rerun");
    let m = out.join("manifest.json");
    let o = dlsched(&["simulate", "--from-manifest", m.to_str().unwrap(), "--out", rerun.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(rerun.join("skipped.csv")).unwrap(), std::fs::read(out.join("skipped.csv")).unwrap());
    // Without a trace there is nothing to skip: refused.
    let o = dlsched(&["simulate", "--skip-malformed"]);
    assert!(text(&o.stderr).contains("--skip-malformed applies to a --trace"), "{}", text(&o.stderr));
}

#[test]
fn strict_input_refuses_unread_columns_from_every_origin() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.csv");
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,comment\na,0,60,1,x\nb,5,60,1,y\n").unwrap();
    // The command line: a note by default, an error with --strict-input.
    let o = dlsched(&["simulate", "--trace", t.to_str().unwrap()]);
    assert!(o.status.success() && text(&o.stderr).contains("ignored columns: comment"), "{}", text(&o.stderr));
    let o = dlsched(&["simulate", "--trace", t.to_str().unwrap(), "--strict-input"]);
    assert!(!o.status.success());
    let want = format!(
        "{}: ignored columns: comment (not columns of the jobs-csv format); strict input (--strict-input, key `strict_input`) refuses",
        t.display()
    );
    assert!(text(&o.stderr).contains(&want), "{}", text(&o.stderr));
    // A sweep: its runs fail with the same error.
    let f = d.path().join("e.toml");
    std::fs::write(&f, "question = \"q\"\n[base]\ntrace = \"t.csv\"\nstrict_input = true\n[sweep]\nseed = [1, 2]\n")
        .unwrap();
    let e = Experiment::load(&f).unwrap();
    let outcome = run_sweep(&e, &d.path().join("out"), 1, None, false, &|_, _| {}).unwrap();
    assert_eq!(outcome.failed.len(), 2);
    assert!(outcome.failed.iter().all(|(_, e)| e.contains("ignored columns: comment")), "{:?}", outcome.failed);
    // The spec records it (and nothing when off).
    let spec = dlsched::experiment::raw::to_run_spec(
        &[("trace".to_string(), dlsched::experiment::raw::Value::Str(t.display().to_string()))].into(),
        dlsched::experiment::raw::Origin::Keywords,
        None,
    )
    .unwrap();
    assert!(!serde_json::to_string(&spec).unwrap().contains("strict_input"));
    let strict = RunSpec { strict_input: true, ..spec };
    assert!(serde_json::to_string(&strict).unwrap().contains("\"strict_input\":true"));
}

#[test]
fn a_sweep_gives_each_distinct_note_once() {
    // Four runs on a trace with a column no format reads, and a malformed
    // row left out: each note once, spelt as the file spells its keys.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("t.csv"),
        "job_id,submit_time,duration,gpu_num,comment\na,0,60,1,x\nb,5,,1,y\nc,9,30,1,z\n",
    )
    .unwrap();
    let f = d.path().join("e.toml");
    std::fs::write(
        &f,
        "question = \"q\"\n[base]\ntrace = \"t.csv\"\nskip_malformed = true\nsample_interval = 0\n\
         [sweep]\nseed = [1, 2]\npolicy = [\"fifo\", \"sjf\"]\n",
    )
    .unwrap();
    let out = d.path().join("out");
    let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert_eq!(err.matches("ignored columns: comment").count(), 1, "{err}");
    assert_eq!(err.matches("1 malformed row left out (`skip_malformed`): 1 in column `duration`").count(), 1, "{err}");
    // The library's outcome holds them, the same two.
    let e = Experiment::load(&f).unwrap();
    let outcome = run_sweep(&e, &d.path().join("out2"), 2, None, false, &|_, _| {}).unwrap();
    assert_eq!(outcome.notes.len(), 2, "{:?}", outcome.notes);
    assert!(outcome.notes[0].contains("malformed row") && outcome.notes[1].contains("ignored columns"));
}

#[test]
fn options_a_policy_ignores_are_noted_the_same_way_everywhere() {
    // FIFO on a consolidating placement with GENIE's best fit and a tenant
    // cap: a note on the command line, the same note (keys spelt as the
    // file spells them) once for a sweep of two runs.
    let o = dlsched(&["simulate", "--jobs", "20", "--genie-best-fit", "--max-tenants", "3"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("note: --genie-models and --genie-best-fit apply only to the GENIE-family policies\n"),
        "{err}"
    );
    assert!(
        err.contains(
            "note: --max-tenants and --mem-headroom apply only to a sharing placement (share-first-fit, share-best-fit, fgd, memeff-pack, iawp)\n"
        ),
        "{err}"
    );
    // At their defaults, or on a placement that shares: no note.
    let o = dlsched(&["simulate", "--jobs", "20", "--max-tenants", "3", "--placement", "share-best-fit"]);
    assert!(o.status.success() && !text(&o.stderr).contains("apply only"), "{}", text(&o.stderr));
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("e.toml");
    std::fs::write(
        &f,
        "question = \"q\"\n[base]\njobs = 20\ngenie_best_fit = true\nmax_tenants = 3\nsample_interval = 0\n\
         [sweep]\nseed = [1, 2]\n",
    )
    .unwrap();
    let e = Experiment::load(&f).unwrap();
    let outcome = run_sweep(&e, &d.path().join("out"), 2, None, false, &|_, _| {}).unwrap();
    assert_eq!(
        outcome.notes,
        [
            "`max_tenants` and `mem_headroom` apply only to a sharing placement (share-first-fit, share-best-fit, fgd, memeff-pack, iawp)",
            "`genie_models` and `genie_best_fit` apply only to the GENIE-family policies",
        ]
    );
    let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", d.path().join("cli").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr).matches("`genie_best_fit` apply only").count(), 1, "{}", text(&o.stderr));
}

#[test]
fn workload_options_a_trace_replay_ignores_are_noted_the_same_way_everywhere() {
    // A trace replay given the synthetic workload's shape (jobs, load, the
    // duration cut) and GENIE's hours: silently ignored by a sweep before
    // (issue 35); now the command line's notes and, keys spelt as the file
    // spells them, once in a sweep of two runs.
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_jobs.csv");
    let o = dlsched(&["simulate", "--trace", trace, "--jobs", "5", "--max-duration", "3600", "--hours", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    for want in [
        "note: --hours applies only to the genie and pollux workloads, --ect only to genie (--workload genie)\n",
        "note: --jobs, --load and --jobs-per-hour shape the synthetic workload; a --trace replay takes its jobs and arrivals from the file\n",
        "note: --max-duration and --max-job-gpus cut the synthetic workload's jobs; a --trace replay runs the file's jobs as they are, and the genie and pollux workloads set their own\n",
    ] {
        assert!(err.contains(want), "stderr lacks {want:?}:\n{err}");
    }
    // The same replay without those options: none of these notes.
    let o = dlsched(&["simulate", "--trace", trace]);
    assert!(o.status.success() && !text(&o.stderr).contains("synthetic workload"), "{}", text(&o.stderr));
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("e.toml");
    std::fs::write(
        &f,
        format!(
            "question = \"q\"\n[base]\ntrace = \"{trace}\"\nload = 0.5\nmax_job_gpus = 2\nvcs = \"{}\"\n\
             [sweep]\nseed = [1, 2]\n",
            concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_vcs.csv")
        ),
    )
    .unwrap();
    let e = Experiment::load(&f).unwrap();
    let outcome = run_sweep(&e, &d.path().join("out"), 2, None, false, &|_, _| {}).unwrap();
    assert_eq!(
        outcome.notes,
        [
            "`jobs`, `load` and `jobs_per_hour` shape the synthetic workload; a `trace` replay takes its jobs and arrivals from the file",
            "`max_duration` and `max_job_gpus` cut the synthetic workload's jobs; a `trace` replay runs the file's jobs as they are, and the genie and pollux workloads set their own",
        ]
    );
}

#[test]
fn genie_task_notes_come_from_every_front_end() {
    // GENIE tasks at trace speed and a backfilling FIFO over them: the
    // command line noted both; a sweep ran them silently (issue 35).
    let o = dlsched(&["simulate", "--workload", "genie", "--tasks", "20", "--backfill"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("note: GENIE tasks run at the profile table's speeds"), "{err}");
    assert!(err.contains("note: --backfill changes nothing here: fifo and sjf run each GENIE task on 1 GPU"), "{err}");
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("e.toml");
    std::fs::write(
        &f,
        "question = \"q\"\n[base]\nworkload = \"genie\"\ntasks = 20\nrate_model = \"trace\"\nbackfill = true\n\
         [sweep]\npolicy = [\"fifo\", \"genie\"]\n",
    )
    .unwrap();
    let e = Experiment::load(&f).unwrap();
    let outcome = run_sweep(&e, &d.path().join("out"), 2, None, false, &|_, _| {}).unwrap();
    assert_eq!(
        outcome.notes,
        [
            "GENIE tasks run at the profile table's speeds (trace speed would make every placement equal)",
            "`backfill` changes nothing here: fifo and sjf run each GENIE task on 1 GPU, so no task can start while the first in the queue waits",
        ]
    );
}
