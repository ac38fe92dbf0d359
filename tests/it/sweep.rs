//! Sweeps: thread-count independence, resume, shards and merge, failures.

use std::path::Path;

use dlsched::sweep::{Experiment, Shard, merge, run_sweep};

fn experiment(dir: &Path) -> Experiment {
    let p = dir.join("e.toml");
    std::fs::write(
        &p,
        "question = \"test\"\n[base]\njobs = 40\nsample_interval = 0\n[sweep]\npolicy = [\"fifo\", \"sjf\"]\nbackfill = [false, true]\nseed = { from = 1, to = 2, step = 1 }\n",
    )
    .unwrap();
    Experiment::load(&p).unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn threads_do_not_change_the_results() {
    let d = tempfile::tempdir().unwrap();
    let e = experiment(d.path());
    assert_eq!(e.runs.len(), 8);
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let o1 = run_sweep(&e, &a, 1, None, false, &|_, _| {}).unwrap();
    let o2 = run_sweep(&e, &b, 2, None, false, &|_, _| {}).unwrap();
    assert_eq!((o1.ran, o2.ran, o1.failed.len()), (8, 8, 0));
    assert_eq!(read(&a.join("summary.csv")), read(&b.join("summary.csv")));
    // One row per run, swept keys first, in the experiment's own order: the
    // keys by name, each key's values as the file lists them, the last key
    // varying fastest.
    let text = read(&a.join("summary.csv"));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("run_id,backfill,policy,seed,"), "{}", lines[0]);
    assert!(lines[0].contains(",summary.policy,"));
    let swept: Vec<String> =
        lines[1..].iter().map(|l| l.split(',').skip(1).take(3).collect::<Vec<_>>().join(",")).collect();
    let mut want = Vec::new();
    for backfill in ["false", "true"] {
        for policy in ["fifo", "sjf"] {
            for seed in [1, 2] {
                want.push(format!("{backfill},{policy},{seed}"));
            }
        }
    }
    assert_eq!(swept, want);
    // Every run once.
    let mut ids: Vec<&str> = lines[1..].iter().map(|l| l.split(',').next().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, e.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>());
}

#[test]
fn resume_completes_an_interrupted_sweep() {
    let d = tempfile::tempdir().unwrap();
    let e = experiment(d.path());
    let out = d.path().join("out");
    run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    let full = read(&out.join("summary.csv"));
    // "Kill" it: two runs lose their outputs, one only its manifest (half written).
    std::fs::remove_dir_all(out.join("runs").join(&e.runs[0].id)).unwrap();
    std::fs::remove_dir_all(out.join("runs").join(&e.runs[3].id)).unwrap();
    std::fs::remove_file(out.join("runs").join(&e.runs[5].id).join("manifest.json")).unwrap();
    std::fs::remove_file(out.join("summary.csv")).unwrap();
    let o = run_sweep(&e, &out, 2, None, true, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.kept), (3, 5));
    assert_eq!(read(&out.join("summary.csv")), full);
    assert!(o.foreign.is_empty());
    // Another experiment into the same place: the 8 earlier runs are reported, not mixed in.
    let p = d.path().join("other.toml");
    std::fs::write(&p, "question = \"other\"\n[base]\njobs = 40\nsample_interval = 0\nseed = 9\n").unwrap();
    let other = Experiment::load(&p).unwrap();
    let o = run_sweep(&other, &out, 2, None, false, &|_, _| {}).unwrap();
    let mut earlier: Vec<String> = e.runs.iter().map(|r| r.id.clone()).collect();
    earlier.sort();
    assert_eq!((o.ran, o.foreign.clone()), (1, earlier));
    assert_eq!(read(&out.join("summary.csv")).lines().count(), 2);
}

#[test]
fn shards_merge_to_the_unsharded_sweep_and_merge_checks() {
    let d = tempfile::tempdir().unwrap();
    let e = experiment(d.path());
    let whole = d.path().join("whole");
    run_sweep(&e, &whole, 2, None, false, &|_, _| {}).unwrap();
    let shards: Vec<_> = (1..=3).map(|i| d.path().join(format!("s{i}"))).collect();
    for (i, s) in shards.iter().enumerate() {
        run_sweep(&e, s, 1, Some(Shard { index: i + 1, count: 3 }), false, &|_, _| {}).unwrap();
    }
    let merged = d.path().join("merged");
    assert_eq!(merge(&shards, &merged).unwrap(), 8);
    assert_eq!(read(&merged.join("summary.csv")), read(&whole.join("summary.csv")));
    // The merged directory is a sweep directory: it plots.
    assert!(dlsched::plot::plot_sweep(&merged).is_ok());
    // Merging into one of the shards is refused.
    assert!(merge(&shards, &shards[0]).unwrap_err().contains("one of the shards"));
    // A missing shard, and a duplicated one, are refused.
    let e1 = merge(&shards[..2], &d.path().join("m2")).unwrap_err();
    assert!(e1.contains("missing"), "{e1}");
    let dup = vec![shards[0].clone(), shards[0].clone(), shards[1].clone(), shards[2].clone()];
    let e2 = merge(&dup, &d.path().join("m3")).unwrap_err();
    assert!(e2.contains("appears in both"), "{e2}");
}

#[test]
fn a_failing_run_is_reported_and_the_others_go_on() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("good.csv"), "job_id,submit_time,duration,gpu_num\na,0,10,1\n").unwrap();
    std::fs::write(d.path().join("bad.csv"), "job_id,submit_time,duration,gpu_num\na,0,ten,1\n").unwrap();
    let p = d.path().join("e.toml");
    std::fs::write(&p, "question = \"q\"\n[sweep]\ntrace = [\"good.csv\", \"bad.csv\"]\n").unwrap();
    let e = Experiment::load(&p).unwrap();
    let out = d.path().join("out");
    let o = run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.failed.len()), (1, 1));
    assert!(o.failed[0].1.contains("bad.csv:2"), "{:?}", o.failed);
    assert_eq!(read(&out.join("summary.csv")).lines().count(), 2);
    assert!(read(&out.join("failed.csv")).contains("bad.csv"));
    // A path that does not exist is an error of the file, before anything runs.
    std::fs::write(&p, "question = \"q\"\n[sweep]\ntrace = [\"good.csv\", \"missing.csv\"]\n").unwrap();
    assert!(Experiment::load(&p).unwrap_err().message.contains("missing.csv"));
}

#[test]
fn plots_of_a_run_and_a_sweep() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("e.toml");
    std::fs::write(&p, "question = \"q\"\n[base]\njobs = 30\n[sweep]\nload = [0.5, 1.0]\npolicy = [\"fifo\", \"sjf\"]\nseed = [1, 2]\n").unwrap();
    let e = Experiment::load(&p).unwrap();
    let out = d.path().join("out");
    run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    let files = dlsched::plot::plot_sweep(&out).unwrap();
    let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(
        names,
        [
            "jct_mean_s_vs_load.svg",
            "jct_mean_s_vs_load.png",
            "queue_delay_mean_s_vs_load.svg",
            "queue_delay_mean_s_vs_load.png",
            "makespan_s_vs_load.svg",
            "makespan_s_vs_load.png",
            "gpu_utilization_vs_load.svg",
            "gpu_utilization_vs_load.png",
            "jct_cdf.svg",
            "jct_cdf.png"
        ]
    );
    // One line per policy in the legend.
    let svg = read(&out.join("jct_mean_s_vs_load.svg"));
    assert!(svg.starts_with("<svg") && svg.contains("fifo") && svg.contains("sjf"));
    let run = out.join("runs").join(&e.runs[0].id);
    let files = dlsched::plot::plot_run(&run).unwrap();
    // Four charts, each an SVG and its PNG twin.
    assert_eq!(files.len(), 8);
    let svgs: Vec<_> = files.iter().filter(|f| f.extension().is_some_and(|x| x == "svg")).collect();
    assert_eq!(svgs.len(), 4);
    assert!(svgs.iter().all(|f| read(f).starts_with("<svg")));
    assert!(
        files
            .iter()
            .filter(|f| f.extension().is_some_and(|x| x == "png"))
            .all(|f| std::fs::read(f).unwrap().starts_with(b"\x89PNG"))
    );
}

/// The load error of an experiment file, or a panic if it loads.
fn load_error(dir: &Path, text: &str) -> String {
    let p = dir.join("bad.toml");
    std::fs::write(&p, text).unwrap();
    match Experiment::load(&p) {
        Ok(e) => panic!("loaded {} runs of:\n{text}", e.runs.len()),
        Err(e) => {
            let e = e.message;
            assert!(e.starts_with(&p.display().to_string()), "{e}");
            e
        }
    }
}

#[test]
fn a_preset_with_nodes_or_vcs_is_refused_at_load_as_on_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("vcs.csv"), "vc,nodes\na,2\n").unwrap();
    // Each of these ran (the preset or the nodes ignored) before.
    for (text, keys) in [
        ("[base]\nnodes = 2\ngpus_per_node = 2\n[sweep]\ncluster = [\"lab16\", \"philly\"]\n", "`cluster`"),
        ("[base]\ncluster = \"philly\"\nnodes = 2\ngpus_per_node = 2\n", "`cluster`"),
        ("[base]\ncluster = \"philly\"\nvcs = \"vcs.csv\"\n", "`cluster`"),
        ("[base]\nvcs = \"vcs.csv\"\nnodes = 2\ngpus_per_node = 2\n", "`vcs`"),
        ("[base]\ncluster = \"philly\"\ngpu_type = \"k80\"\n", "`gpu_type`"),
    ] {
        let e = load_error(d.path(), &format!("question = \"q\"\n{text}"));
        assert!(e.contains(keys) && (e.contains("goes with") || e.contains("set those too")), "{e}");
    }
    // Each alone (or nodes with gpus_per_node and gpu_type) still loads.
    for text in [
        "[sweep]\ncluster = [\"lab16\", \"philly\"]\n",
        "[base]\nnodes = 2\ngpus_per_node = 2\ngpu_type = \"k80\"\n",
        "[base]\nvcs = \"vcs.csv\"\n",
    ] {
        let p = d.path().join("ok.toml");
        std::fs::write(&p, format!("question = \"q\"\n{text}")).unwrap();
        Experiment::load(&p).unwrap();
    }
}

#[test]
fn out_of_range_arrival_rates_are_refused_at_load() {
    let d = tempfile::tempdir().unwrap();
    // Before, each loaded and failed only when its run ran.
    // GENIE: 1e9 per hour x 24 h = 2.4e10 tasks > 50,000; 1e-300 x 24 < 1 task.
    for rate in ["1e9", "1e-300"] {
        let e = load_error(
            d.path(),
            &format!("question = \"q\"\n[base]\nworkload = \"genie\"\n[sweep]\njobs_per_hour = [{rate}]\n"),
        );
        assert!(e.contains("`jobs_per_hour` is too"), "{e}");
    }
    // Synthetic: 500 jobs x 3,600 s / 1e-300 per hour is far past 1e11 s.
    let e = load_error(d.path(), "question = \"q\"\n[sweep]\njobs_per_hour = [1e-300]\n");
    assert!(e.contains("`jobs_per_hour` is too small") && e.contains("500 jobs"), "{e}");
    // 500 x 3,600 / 1e11 = 1.8e-5 per hour is the slowest rate allowed.
    let p = d.path().join("ok.toml");
    std::fs::write(&p, "question = \"q\"\n[sweep]\njobs_per_hour = [1.8e-5, 1e9]\n").unwrap();
    assert_eq!(Experiment::load(&p).unwrap().runs.len(), 2);
}

#[test]
fn resume_reruns_a_complete_run_whose_trace_changed() {
    // Two runs over one trace; the trace's job then runs 999 s instead of
    // 100 s. A resumed sweep must not keep the JCT of 100 s beside it.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("tr.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\na,0,100,1\n").unwrap();
    let p = d.path().join("e.toml");
    std::fs::write(
        &p,
        format!(
            "question = \"resume\"\n[base]\ntrace = \"{}\"\nsample_interval = 0\n[sweep]\npolicy = [\"fifo\", \"sjf\"]\n",
            trace.display()
        ),
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    let out = d.path().join("out");
    run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    // Unchanged: both kept.
    let o = run_sweep(&e, &out, 2, None, true, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.kept, o.changed_inputs.len()), (0, 2, 0));
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\na,0,999,1\n").unwrap();
    std::fs::remove_file(out.join("runs").join(&e.runs[0].id).join("manifest.json")).unwrap();
    let o = run_sweep(&e, &out, 2, None, true, &|_, _| {}).unwrap();
    // Run 0 was incomplete, run 1 complete but read the old trace: both rerun.
    assert_eq!((o.ran, o.kept), (2, 0));
    assert_eq!(o.changed_inputs, vec![e.runs[1].id.clone()]);
    let text = read(&out.join("summary.csv"));
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "jct_mean_s").unwrap();
    for line in text.lines().skip(1) {
        assert_eq!(line.split(',').nth(col), Some("999.0"), "{text}");
    }
}

#[test]
fn summary_csv_flattens_nested_maps_into_numeric_columns() {
    // One row of zero GPUs (skipped: `zero_gpus`), two jobs that run. fifo
    // reports no policy metrics; gandiva reports its five counters.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("t.csv"), "job_id,submit_time,duration,gpu_num\na,0,100,1\nb,0,100,0\nc,10,50,2\n")
        .unwrap();
    let p = d.path().join("e.toml");
    std::fs::write(&p, "question = \"q\"\n[base]\ntrace = \"t.csv\"\n[sweep]\npolicy = [\"fifo\", \"gandiva\"]\n")
        .unwrap();
    let e = Experiment::load(&p).unwrap();
    let out = d.path().join("out");
    let o = run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.failed.len()), (2, 0));
    let text = read(&out.join("summary.csv"));
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let h: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    for nested in ["jobs_skipped_by_reason", "rate_model_counters", "qos_guarantee_by_class", "policy_metrics"] {
        assert!(!h.contains(&nested.to_string()), "{nested} still a column: {h:?}");
    }
    // The flattened columns come last, sorted.
    let flat = ["gandiva_migrations", "gandiva_packing_available", "gandiva_packs", "gandiva_time_slices"];
    let flat = [&flat[..], &["gandiva_unpacks", "jobs_skipped_zero_gpus"]].concat();
    assert_eq!(&h[h.len() - flat.len()..], flat.as_slice(), "{h:?}");
    assert!(!text.contains('{'), "{text}");
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    let col = |n: &str| h.iter().position(|x| x == n).unwrap_or_else(|| panic!("no column {n}"));
    for row in &rows {
        let id = &row[col("run_id")];
        let s: serde_json::Value =
            serde_json::from_str(&read(&out.join("runs").join(id).join("summary.json"))).unwrap();
        // By hand: row b asks for zero GPUs.
        assert_eq!(row[col("jobs_skipped_zero_gpus")].parse::<f64>().unwrap(), 1.0);
        assert_eq!(s["jobs_skipped_by_reason"]["zero_gpus"], 1);
        let pm = s["policy_metrics"].as_object().unwrap();
        match &row[col("policy")] {
            "fifo" => {
                assert!(pm.is_empty());
                for m in &flat[..5] {
                    assert_eq!(&row[col(m)], "", "{m} of fifo");
                }
            }
            "gandiva" => {
                assert_eq!(pm.len(), 5);
                for (k, v) in pm {
                    assert_eq!(row[col(k)].parse::<f64>().unwrap(), v.as_f64().unwrap(), "{k}");
                }
                // By hand: a plain trace replay has no profile database to pack with.
                assert_eq!(row[col("gandiva_packing_available")].parse::<f64>().unwrap(), 0.0);
            }
            other => panic!("policy {other}"),
        }
    }
    // A shard holding only the fifo run has no gandiva columns; the merge
    // gives the unsharded columns all the same.
    let shards: Vec<_> = (1..=2).map(|i| d.path().join(format!("s{i}"))).collect();
    for (i, s) in shards.iter().enumerate() {
        run_sweep(&e, s, 1, Some(Shard { index: i + 1, count: 2 }), false, &|_, _| {}).unwrap();
    }
    let widths: Vec<usize> =
        shards.iter().map(|s| read(&s.join("summary.csv")).lines().next().unwrap().split(',').count()).collect();
    assert_eq!(widths.iter().max().unwrap() - widths.iter().min().unwrap(), 5, "{widths:?}");
    merge(&shards, &d.path().join("m")).unwrap();
    assert_eq!(read(&d.path().join("m").join("summary.csv")), text);
}

#[test]
fn a_sweep_whose_stderr_is_not_a_terminal_prints_progress_lines() {
    // The test captures stderr (not a terminal): no bar, but a line when
    // the last of the 2 runs is done.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("e.toml");
    std::fs::write(&p, "question = \"q\"\n[base]\njobs = 20\nsample_interval = 0\n[sweep]\nseed = [1, 2]\n").unwrap();
    let out = d.path().join("out");
    let o = crate::common::dlsched(&["sweep", p.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sweep: 2/2 runs done, 0 failed, "), "{err}");
    assert!(!err.contains("ETA"), "{err}");
}
