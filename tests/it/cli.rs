//! The command line as a user meets it: defaults, outputs, determinism, errors.

use crate::common::dlsched;
use std::path::Path;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn default_run_prints_a_summary() {
    let o = dlsched(&["simulate", "--jobs", "60"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("cluster lab16 (16 GPUs)") && out.contains("60 completed") && out.contains("JCT mean"),
        "{out}"
    );
}

#[test]
fn same_seed_gives_byte_identical_outputs() {
    let d = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let dir = d.path().join(name);
        let o = dlsched(&["simulate", "--jobs", "200", "--seed", seed, "--backfill", "--out", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        dir
    };
    let (a, b, c) = (run("a", "5"), run("b", "5"), run("c", "6"));
    for f in ["jobs.csv", "summary.json", "timeline.csv", "vc_summary.csv", "manifest.json"] {
        assert_eq!(std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap(), "{f} differs between runs");
    }
    assert_ne!(std::fs::read(a.join("jobs.csv")).unwrap(), std::fs::read(c.join("jobs.csv")).unwrap());
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(a.join("summary.json")).unwrap()).unwrap();
    for k in [
        "jobs_total",
        "jobs_completed",
        "jobs_skipped",
        "jct_mean_s",
        "jct_p50_s",
        "jct_p95_s",
        "jct_p99_s",
        "queue_delay_mean_s",
        "queue_delay_p95_s",
        "makespan_s",
        "gpu_utilization",
    ] {
        assert!(summary.get(k).is_some(), "summary.json lacks {k}");
    }
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(a.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["seed"], 5);
}

#[test]
fn summary_figures_agree_with_jobs_csv() {
    // Recompute mean JCT, makespan and utilisation from jobs.csv by hand.
    let d = tempfile::tempdir().unwrap();
    let o = dlsched(&["simulate", "--jobs", "120", "--seed", "3", "--out", d.path().to_str().unwrap()]);
    assert!(o.status.success());
    let mut rdr = csv::Reader::from_path(d.path().join("jobs.csv")).unwrap();
    let (mut jct, mut n, mut first, mut last, mut gpu_s) = (0.0, 0.0, f64::MAX, 0.0f64, 0.0);
    for r in rdr.records() {
        let r = r.unwrap();
        let f = |i: usize| r[i].parse::<f64>().unwrap();
        let (gpus, submit, start, end) = (f(2), f(3), f(4), f(5));
        jct += end - submit;
        n += 1.0;
        first = first.min(submit);
        last = last.max(end);
        gpu_s += gpus * (end - start);
    }
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(d.path().join("summary.json")).unwrap()).unwrap();
    assert!((s["jct_mean_s"].as_f64().unwrap() - jct / n).abs() < 0.001);
    assert_eq!(s["makespan_s"].as_f64().unwrap(), last - first);
    assert!((s["gpu_utilization"].as_f64().unwrap() - gpu_s / (16.0 * (last - first))).abs() < 1e-6);
}

fn assert_clean_error(o: &std::process::Output, needles: &[&str]) {
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.starts_with("error:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`: {err}");
    }
}

#[test]
fn bad_input_gives_one_clear_error() {
    let d = tempfile::tempdir().unwrap();
    assert_clean_error(
        &dlsched(&["simulate", "--trace", "/no/such/trace.csv"]),
        &["/no/such/trace.csv", "cannot read"],
    );
    let bad = d.path().join("bad.csv");
    std::fs::write(&bad, "job_id,submit_time,duration,gpu_num\na,0,10,1\nb,1,ten,1\n").unwrap();
    assert_clean_error(&dlsched(&["simulate", "--trace", bad.to_str().unwrap()]), &["bad.csv:3", "`duration`", "ten"]);
    let empty = d.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    assert_clean_error(&dlsched(&["simulate", "--trace", empty.to_str().unwrap()]), &["empty.csv"]);
    let none = d.path().join("none.csv");
    std::fs::write(&none, "job_id,submit_time,duration,gpu_num\na,0,10,0\n").unwrap();
    assert_clean_error(&dlsched(&["simulate", "--trace", none.to_str().unwrap()]), &["no job", "1 zero_gpus"]);
    assert_clean_error(&dlsched(&["simulate", "--nodes", "0", "--gpus-per-node", "4"]), &["--nodes"]);
    assert_clean_error(&dlsched(&["simulate", "--jobs-per-hour=-3"]), &["--jobs-per-hour"]);
    let o = dlsched(&["compare", "/no/run", "/no/ref.csv"]);
    assert_clean_error(&o, &["/no/run"]);
    // An option checked inside the run is an option error, not a failed simulation.
    let o = dlsched(&["simulate", "--workload", "genie", "--hours", "0"]);
    assert_clean_error(&o, &["error: --hours", "got 0"]);
    assert!(!text(&o.stderr).contains("simulation failed"), "{}", text(&o.stderr));
}

#[test]
fn help_explains_units() {
    let o = dlsched(&["simulate", "--help"]);
    let h = text(&o.stdout);
    for needle in ["--trace", "--vcs", "--backfill", "jobs per hour", "seconds", "lab16", "2,490"] {
        assert!(h.contains(needle), "--help lacks `{needle}`");
    }
}

#[test]
fn compare_exits_nonzero_on_any_difference() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let o = dlsched(&["simulate", "--jobs", "30", "--out", run.to_str().unwrap()]);
    assert!(o.status.success());
    // The run against itself is identical.
    let jobs = run.join("jobs.csv");
    let o = dlsched(&["compare", run.to_str().unwrap(), jobs.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("30 of 30"));
    // Shift one start: different, exit 1.
    let body = std::fs::read_to_string(&jobs).unwrap();
    let mut lines: Vec<String> = body.lines().map(String::from).collect();
    let mut f: Vec<String> = lines[1].split(',').map(String::from).collect();
    f[4] = format!("{}", f[4].parse::<f64>().unwrap() + 1.0);
    lines[1] = f.join(",");
    let shifted = d.path().join("shifted.csv");
    std::fs::write(&shifted, lines.join("\n")).unwrap();
    let o = dlsched(&["compare", run.to_str().unwrap(), shifted.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("29 of 30"));
    let _ = Path::new("");
}

#[test]
fn timeline_skips_idle_stretches() {
    // One 4-GPU job running 0 .. 1e10 s, samples every 600 s: a sample at 0
    // (4 busy), then nothing changes until the job ends at 1e10 s, so the next
    // sample is the first multiple of 600 s at or after it, 10,000,000,200 s
    // (idle), and sampling stops. Two rows, not 16.7 million.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("long.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\nlong,0,1e10,4\n").unwrap();
    let out = d.path().join("run");
    let o = dlsched(&["simulate", "--trace", trace.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let rows: Vec<&str> = timeline.lines().skip(1).collect();
    assert_eq!(rows, vec!["0,4,0.25,1,0", "10000000200,0,0,0,0"]);
}

#[test]
fn outputs_never_overwrite_the_input_and_sizes_are_bounded() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("jobs.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\na,0,10,1\n").unwrap();
    assert_clean_error(
        &dlsched(&["simulate", "--trace", trace.to_str().unwrap(), "--out", d.path().to_str().unwrap()]),
        &["would overwrite or delete the input --trace"],
    );
    assert_eq!(std::fs::read_to_string(&trace).unwrap(), "job_id,submit_time,duration,gpu_num\na,0,10,1\n");
    assert_clean_error(&dlsched(&["simulate", "--out", trace.to_str().unwrap()]), &["not a directory"]);
    assert_clean_error(&dlsched(&["simulate", "--nodes", "4294967295", "--gpus-per-node", "64"]), &["too large"]);
    assert_clean_error(&dlsched(&["simulate", "--load", "1e-300"]), &["beyond"]);
    assert_clean_error(&dlsched(&["simulate", "--load", "-1"]), &["--load must be a positive number"]);
    assert_clean_error(&dlsched(&["simulate", "--vcs", "traces/example_vcs.csv"]), &["synthetic workload has no VCs"]);
}

#[test]
fn exit_status_separates_differences_from_errors() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    assert!(dlsched(&["simulate", "--jobs", "5", "--out", run.to_str().unwrap()]).status.success());
    let other = d.path().join("other.csv");
    std::fs::write(&other, "job_id,start_s,end_s\nnope,0,1\n").unwrap();
    assert_eq!(dlsched(&["compare", run.to_str().unwrap(), other.to_str().unwrap()]).status.code(), Some(1));
    let broken = d.path().join("broken.csv");
    std::fs::write(&broken, "job_id,begin\nx,0\n").unwrap();
    let o = dlsched(&["compare", run.to_str().unwrap(), broken.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no start time column"), "{}", text(&o.stderr));
}

#[test]
fn profile_inputs_are_checked() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("m.csv");
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,model,local_bsz\na,0,10,1,resnet50-imagenet,0\n").unwrap();
    assert_clean_error(
        &dlsched(&["simulate", "--trace", t.to_str().unwrap(), "--rate-model", "table"]),
        &["m.csv:2", "`local_bsz`", "positive batch"],
    );
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,model,local_bsz\na,0,10,1,ResNet50,32\n").unwrap();
    assert_clean_error(
        &dlsched(&["simulate", "--trace", t.to_str().unwrap(), "--rate-model", "table"]),
        &["ResNet50", "profile show --list"],
    );
    assert_clean_error(&dlsched(&["profile", "show", "nosuch"]), &["nosuch", "--list"]);
    assert!(!dlsched(&["profile", "check", "--every", "1"]).status.success());
}

#[test]
fn genie_and_sharing_misuse_gives_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let code = |o: &std::process::Output| o.status.code();
    // Moldable-task policies need the GENIE workload, which has no trace.
    let o = dlsched(&["simulate", "--policy", "genie"]);
    assert_clean_error(&o, &["--workload genie"]);
    assert_eq!(code(&o), Some(2));
    // Sizes that would not finish: refused up front.
    assert_clean_error(&dlsched(&["simulate", "--workload", "genie", "--jobs-per-hour", "1e9"]), &["at most 50000"]);
    assert_clean_error(&dlsched(&["simulate", "--jobs", "1000000000"]), &["20000000"]);
    // A sweep that pairs a GENIE policy with the synthetic workload, or a
    // bad GPU type, fails before running anything (exit 2).
    for (body, needle) in [
        ("[base]\npolicy = \"genie\"\n[sweep]\nseed = [1]\n", "workload = \"genie\""),
        ("[base]\nnodes = 2\ngpus_per_node = 4\ngpu_type = \"h100\"\n[sweep]\nseed = [1]\n", "h100"),
    ] {
        let f = d.path().join("e.toml");
        std::fs::write(&f, format!("question = \"q\"\n{body}")).unwrap();
        let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", d.path().join("out").to_str().unwrap()]);
        assert_clean_error(&o, &[needle]);
        assert_eq!(code(&o), Some(2), "{}", text(&o.stderr));
    }
    // Fitted models: nonsense coefficients, or another GPU type, are refused.
    let m = d.path().join("m.json");
    let o = dlsched(&["genie-profile", "--cluster", "lab16", "--out", m.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let good = std::fs::read_to_string(&m).unwrap();
    let other_gpu = d.path().join("v100.json");
    std::fs::write(&other_gpu, good.replace("\"gpu_type\": \"k80\"", "\"gpu_type\": \"v100\"")).unwrap();
    assert_clean_error(
        &dlsched(&[
            "simulate",
            "--workload",
            "genie",
            "--policy",
            "genie",
            "--genie-models",
            other_gpu.to_str().unwrap(),
        ]),
        &["v100", "K80"],
    );
    let neg = d.path().join("neg.json");
    let v: serde_json::Value = serde_json::from_str(&good).unwrap();
    let mut v2 = v.clone();
    v2["models"]["types"]["resnet50-train"]["gamma"] = serde_json::json!(-5.0);
    std::fs::write(&neg, serde_json::to_string(&v2).unwrap()).unwrap();
    assert_clean_error(
        &dlsched(&["simulate", "--workload", "genie", "--policy", "genie", "--genie-models", neg.to_str().unwrap()]),
        &["resnet50-train", "gamma"],
    );
    // The profiler refuses the clusters simulate refuses, and noise it cannot fit through.
    assert_clean_error(
        &dlsched(&["genie-profile", "--nodes", "0", "--gpus-per-node", "4", "--out", m.to_str().unwrap()]),
        &["--nodes must be at least 1"],
    );
    assert_clean_error(
        &dlsched(&["genie-profile", "--noise", "-1", "--out", m.to_str().unwrap()]),
        &["--noise", "between 0 and 1"],
    );
}

#[test]
fn rifling_tables_and_iawp_misuse_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let table = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/rifling-lab16.json");
    let good: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    let run = |t: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["simulate", "--workload", "genie", "--policy", "rifling-frozen", "--rifling-table"];
        args.push(t.to_str().unwrap());
        args.extend_from_slice(extra);
        dlsched(&args)
    };
    // The committed table runs.
    let o = run(&table, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for (edit, needle) in [
        (("agent", "params", "alpha", serde_json::json!(-5.0)), "alpha"),
        (("agent", "params", "k", serde_json::json!(0)), "k"),
        (("agent", "centroids", "", serde_json::json!([3.0, 1.0])), "centroids"),
        (("manifest", "cluster", "", serde_json::json!("philly")), "philly"),
    ] {
        let mut v = good.clone();
        let ((a, b, c, val), needle) = (edit, needle);
        if c.is_empty() {
            v[a][b] = val;
        } else {
            v[a][b][c] = val;
        }
        let f = d.path().join("t.json");
        std::fs::write(&f, serde_json::to_string(&v).unwrap()).unwrap();
        let o = run(&f, &[]);
        assert_clean_error(&o, &[needle]);
        assert_eq!(o.status.code(), Some(2));
    }
    // An online agent resumed from a table learns with this run's parameters,
    // but its groups come from the table's k.
    let o = dlsched(&[
        "simulate",
        "--workload",
        "genie",
        "--policy",
        "rifling",
        "--rifling-table",
        table.to_str().unwrap(),
        "--rifling-k",
        "3",
    ]);
    assert_clean_error(&o, &["k = 4", "--rifling-k"]);
    // IAWP is FIFO of its own.
    assert_clean_error(&dlsched(&["simulate", "--placement", "iawp", "--policy", "sjf"]), &["iawp", "sjf"]);
    // rifling-train refuses an output it could not write before training.
    assert_clean_error(
        &dlsched(&["rifling-train", "--episodes", "1", "--out", "/no/such/dir/t.json"]),
        &["/no/such/dir"],
    );
}

#[test]
fn tie_order_decides_which_same_second_job_goes_first() {
    // 300 one-GPU jobs of 10 s, all submitted at 0, on one GPU: FIFO runs
    // them one after another, so the k-th job served starts at 10 k s.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("ties.csv");
    let mut rows = String::from("job_id,vc,gpu_num,submit_time,duration\n");
    for i in 0..300 {
        rows.push_str(&format!("j{i},default,1,0,10\n"));
    }
    std::fs::write(&trace, rows).unwrap();
    let run = |order: &str| {
        let out = d.path().join(order);
        let o = dlsched(&[
            "simulate",
            "--trace",
            trace.to_str().unwrap(),
            "--format",
            "jobs-csv",
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--tie-order",
            order,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let mut starts = std::collections::HashMap::new();
        let mut rdr = csv::Reader::from_path(out.join("jobs.csv")).unwrap();
        let h = rdr.headers().unwrap().clone();
        let (id, start) =
            (h.iter().position(|c| c == "job_id").unwrap(), h.iter().position(|c| c == "start_s").unwrap());
        for r in rdr.records() {
            let r = r.unwrap();
            starts.insert(r[id].to_string(), r[start].parse::<f64>().unwrap());
        }
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
        (starts, manifest)
    };
    let (trace_starts, m) = run("trace");
    for i in 0..300 {
        assert_eq!(trace_starts[&format!("j{i}")], 10.0 * i as f64);
    }
    assert!(m["spec"].get("tie_order").is_none(), "the default stays out of the manifest: {m}");
    let (numpy_starts, m) = run("numpy2-avx512");
    assert_eq!(m["spec"]["tie_order"], "numpy2-avx512");
    // The order served is the emulated argsort's (checked against NumPy in tie_order.rs).
    let order = dlsched::trace::tie_order::numpy2_avx512_argsort(&[0; 300]);
    assert_ne!(order, (0..300).collect::<Vec<_>>(), "equal keys are reordered");
    for (k, &i) in order.iter().enumerate() {
        assert_eq!(numpy_starts[&format!("j{i}")], 10.0 * k as f64, "job j{i}");
    }
    assert_clean_error(&dlsched(&["simulate", "--tie-order", "pandas"]), &["--tie-order", "numpy2-avx512"]);
}

#[test]
fn an_unknown_model_names_the_file_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("models.csv");
    std::fs::write(
        &t,
        "job_id,submit_time,duration,gpu_num,model,local_bsz\na,0,60,1,resnet18-cifar10,32\nb,5,60,1,nosuchmodel,32\n",
    )
    .unwrap();
    let o = dlsched(&["simulate", "--trace", t.to_str().unwrap(), "--rate-model", "table"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    // Job b is on the file's third line (the header is the first).
    let want = format!("{}: line 3, column `model`: job `b` names model `nosuchmodel`", t.display());
    assert!(text(&o.stderr).contains(&want), "{}", text(&o.stderr));
}

#[test]
fn an_unknown_model_is_an_error_at_trace_speed_too() {
    let d = tempfile::tempdir().unwrap();
    // With and without a batch column: without one, the trace-speed run
    // reads no profile database for its jobs, and the name was accepted.
    for (header, row_a, row_b) in
        [("model,local_bsz", "resnet18-cifar10,32", "modle-typo,32"), ("model", "resnet18-cifar10", "modle-typo")]
    {
        let t = d.path().join("models.csv");
        std::fs::write(
            &t,
            format!("job_id,submit_time,duration,gpu_num,{header}\na,0,60,1,{row_a}\nb,5,60,1,{row_b}\n"),
        )
        .unwrap();
        let o = dlsched(&["simulate", "--trace", t.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{header}: {}", text(&o.stderr));
        let want = format!("{}: line 3, column `model`: job `b` names model `modle-typo`", t.display());
        assert!(text(&o.stderr).contains(&want), "{header}: {}", text(&o.stderr));
    }
    // Known names and another system's alias (Pollux's `cifar10`) still run at trace speed.
    let t = d.path().join("known.csv");
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,model\na,0,60,1,resnet18-cifar10\nb,5,60,1,cifar10\n")
        .unwrap();
    let o = dlsched(&["simulate", "--trace", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn theta_for_a_policy_outside_genie_is_an_error_as_in_a_sweep() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = dlsched(&["simulate", "--jobs", "10", "--theta", "0.5", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--theta applies only to the GENIE-family policies, not --policy fifo"),
        "{}",
        text(&o.stderr)
    );
    assert!(!out.exists(), "the run ran");
    // Another GENIE-family option beside fifo stays a note.
    let o = dlsched(&["simulate", "--jobs", "10", "--genie-best-fit"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("note: --genie-models and --genie-best-fit apply only to the GENIE-family policies"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn trace_speed_on_mixed_gpus_and_an_ignored_vc_column_are_noted() {
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_jobs.csv");
    let vcs = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_vcs.csv");
    let hetero = "note: gavel ran at trace speed on a cluster of 3 GPU types (A100, RTX2080Ti, T4)";
    // The file's ten jobs each name a VC; without --vcs the cluster has none.
    let vc = "note: 10 of 10 jobs name a VC (the trace's `vc` column), which this run ignores";
    let err = |args: &[&str]| {
        let mut a = vec!["simulate", "--trace", trace];
        a.extend_from_slice(args);
        let o = dlsched(&a);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        text(&o.stderr)
    };
    let e = err(&["--policy", "gavel", "--cluster", "sia"]);
    assert!(e.contains(hetero) && e.contains(vc), "{e}");
    // Rates per GPU type, or a policy blind to types: no speed note.
    let e = err(&["--policy", "gavel", "--cluster", "sia", "--rate-model", "table"]);
    assert!(!e.contains("trace speed") && e.contains(vc), "{e}");
    let e = err(&["--policy", "fifo", "--cluster", "sia"]);
    assert!(!e.contains("trace speed") && e.contains(vc), "{e}");
    // One GPU type and the trace's VCs: neither note.
    let e = err(&["--policy", "gavel", "--vcs", vcs]);
    assert!(!e.contains("note:"), "{e}");
}

#[test]
fn unknown_columns_are_noted_and_a_misspelt_one_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.csv");
    let run = |csv: &str| {
        std::fs::write(&t, csv).unwrap();
        dlsched(&["simulate", "--trace", t.to_str().unwrap(), "--rate-model", "table"])
    };
    // `modle` is `model` with two letters swapped: an error naming both,
    // where it used to leave the job a randomly drawn model.
    let o = run("job_id,submit_time,duration,gpu_num,modle,local_bsz\na,0,60,1,resnet18-cifar10,32\n");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let want = format!(
        "{}:1: column `modle`: not a column of the jobs-csv format; did you mean `model`? (rename the column, or map it: --columns model=modle;",
        t.display()
    );
    assert!(text(&o.stderr).contains(&want), "{}", text(&o.stderr));
    // Columns no field is near: one note, in file order; the run goes on.
    let o = run("job_id,comment,submit_time,duration,gpu_num,model,local_bsz,Team\na,x,0,60,1,resnet18-cifar10,32,y\n");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = format!("note: {}: ignored columns: comment, Team (not columns of the jobs-csv format)", t.display());
    assert!(text(&o.stderr).contains(&want), "{}", text(&o.stderr));
    // One edit from a field the header has already: not taken for it, noted.
    let o = run("job_id,submit_time,duration,gpu_num,model,models\na,0,60,1,resnet18-cifar10,x\n");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("ignored columns: models (not"), "{}", text(&o.stderr));
    // Another format: a Helios log with `vcc` for `vc` (missing), at line 1.
    let helios = "job_id,user,vcc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n\
                  j1,u1,vc1,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,2020-04-01 00:01:10,60,10\n";
    let o = run(helios);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr)
            .contains("column `vcc`: not a column of the helios format; did you mean `vc`? (rename the column;"),
        "{}",
        text(&o.stderr)
    );
    // Every column known (the sample trace): no note of columns.
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_jobs.csv");
    let o = dlsched(&[
        "simulate",
        "--trace",
        sample,
        "--vcs",
        concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_vcs.csv"),
    ]);
    assert!(o.status.success() && !text(&o.stderr).contains("ignored columns"), "{}", text(&o.stderr));
}

#[test]
fn synthetic_options_beside_a_trace_are_said_not_to_apply() {
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_jobs.csv");
    let o = dlsched(&["simulate", "--trace", trace, "--jobs", "3", "--load", "0.3"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--jobs, --load and --jobs-per-hour shape the synthetic workload"),
        "{}",
        text(&o.stderr)
    );
    // The replay is the file's ten jobs, not the three --jobs asked for.
    assert!(text(&o.stdout).contains("10 total"), "{}", text(&o.stdout));
    let o = dlsched(&["simulate", "--trace", trace]);
    assert!(!text(&o.stderr).contains("synthetic workload"), "{}", text(&o.stderr));
}

#[test]
fn out_never_deletes_or_overwrites_any_input_and_refuses_a_directory_in_a_files_place() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num,vc\na,0,10,1,a\n").unwrap();
    let t = trace.to_str().unwrap();
    let x = d.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let xs = x.to_str().unwrap();
    // (option, file name in --out, its content, the rest of the command line)
    let nodes = "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,V100M32\n";
    let cases: [(&str, &str, &str, Vec<&str>); 6] = [
        ("--vcs", "vc_summary.csv", "vc,nodes\na,2\n", vec!["--trace", t]),
        ("--nodes-file", "timeline.csv", nodes, vec!["--jobs", "5"]),
        ("--genie-models", "summary.json", "{}\n", vec!["--workload", "genie", "--policy", "genie"]),
        ("--columns-file", "jobs.csv.tmp", "[columns]\n", vec!["--trace", t]),
        ("--rifling-table", "skipped.csv", "x\n", vec!["--workload", "genie", "--policy", "rifling-frozen"]),
        ("--profiles", "timing.json", "", vec![]),
    ];
    for (option, name, content, rest) in cases {
        let input = x.join(name);
        if option == "--profiles" {
            std::fs::create_dir(&input).unwrap();
        } else {
            std::fs::write(&input, content).unwrap();
        }
        let mut args = vec!["simulate", "--sample-interval", "0", option, input.to_str().unwrap(), "--out", xs];
        args.extend(rest);
        let o = dlsched(&args);
        assert_clean_error(&o, &[&format!("would overwrite or delete the input {option}")]);
        if option == "--profiles" {
            assert!(input.is_dir());
            std::fs::remove_dir(&input).unwrap();
        } else {
            assert_eq!(std::fs::read_to_string(&input).unwrap(), content, "{option}");
            std::fs::remove_file(&input).unwrap();
        }
    }
    // A directory where a run writes a file: refused before the run (it failed
    // at write time, after the simulation, before).
    let jd = d.path().join("jd");
    std::fs::create_dir_all(jd.join("jobs.csv")).unwrap();
    assert_clean_error(
        &dlsched(&["simulate", "--jobs", "5", "--out", jd.to_str().unwrap()]),
        &["jobs.csv is a directory"],
    );
    assert!(jd.join("jobs.csv").is_dir() && !jd.join("summary.json").exists());
}

#[test]
fn compare_says_when_no_job_id_is_in_common() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    assert!(
        dlsched(&["simulate", "--jobs", "5", "--sample-interval", "0", "--out", run.to_str().unwrap()])
            .status
            .success()
    );
    let other = d.path().join("other.csv");
    std::fs::write(&other, "job_id,start_s,end_s\nnope,0,1\nnada,0,2\n").unwrap();
    let o = dlsched(&["compare", run.to_str().unwrap(), other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    // 5 synthetic jobs (syn-0..syn-4) against the 2 reference rows.
    assert!(out.contains("no job id is in common: the run has 5 jobs, the reference 2"), "{out}");
    // No zero statistics that read as agreement.
    assert!(!out.contains("max 0") && !out.contains("+0.0000 %") && out.ends_with("DIFFERENT\n"), "{out}");
}

#[test]
fn a_small_offered_load_prints_significant_digits() {
    // Two 1-GPU jobs of 1,000 s submitted 50,000 s apart on lab16's 16 GPUs:
    // 2,000 GPU-s / (16 x max(50,000 s span, 1,000 s mean run time)) = 0.0025,
    // which printed as "0.00" before.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\na,0,1000,1\nb,50000,1000,1\n").unwrap();
    let o = dlsched(&["simulate", "--trace", trace.to_str().unwrap(), "--sample-interval", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let line = out.lines().find(|l| l.contains("offered load")).unwrap();
    assert!(line.contains(" 0.00250 "), "{line}");
    assert!(line.contains("(GPU-time asked / (GPUs x max(arrival span, mean run time)))"), "{line}");
}

#[test]
fn the_speed_line_shows_the_co_location_counters_and_is_left_out_when_empty() {
    // Two 1-GPU ResNet-18 jobs (memory from the builtin estimate) at once on
    // one GPU: share-best-fit puts them together.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num,model,local_bsz\na,0,1000,1,resnet18-cifar10,32\nb,0,1000,1,resnet18-cifar10,32\n")
        .unwrap();
    let run = |rate: &str, out: &Path| {
        let o = dlsched(&[
            "simulate",
            "--trace",
            trace.to_str().unwrap(),
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--gpu-type",
            "v100-32g",
            "--placement",
            "share-best-fit",
            "--rate-model",
            rate,
            "--sample-interval",
            "0",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        (text(&o.stdout), summary)
    };
    let (out, summary) = run("table", &d.path().join("table"));
    assert!(summary["shared_launches"].as_u64().unwrap() > 0, "{summary}");
    let c = &summary["rate_model_counters"];
    assert!(c["coloc_evaluations"].as_u64().unwrap() > 0, "{c}");
    // The line, from summary.json's counters by another route.
    let want = format!(
        "speed     profile-table: {} rate evaluations; fallbacks: model {}, GPU type {}, split {}, batch {}; co-location {} evaluations, {} fallbacks, bounded above {}, below {}",
        c["evaluations"],
        c["model"],
        c["gpu_type"],
        c["split"],
        c["batch"],
        c["coloc_evaluations"],
        c["coloc_fallbacks"],
        c["coloc_bounded_above"],
        c["coloc_bounded_below"]
    );
    assert!(out.lines().any(|l| l == want), "want {want}\n{out}");
    // At trace speed: the co-location counters only (it printed "0 rate
    // evaluations; fallbacks: model 0, ..." and no co-location counter).
    let (out, summary) = run("trace", &d.path().join("trace"));
    let c = &summary["rate_model_counters"];
    assert!(c["coloc_evaluations"].as_u64().unwrap() > 0, "{c}");
    let want = format!(
        "speed     trace-speed: co-location {} evaluations, {} fallbacks, bounded above {}, below {}",
        c["coloc_evaluations"], c["coloc_fallbacks"], c["coloc_bounded_above"], c["coloc_bounded_below"]
    );
    assert!(out.lines().any(|l| l == want), "want {want}\n{out}");
    // Nothing shared, every counter 0: no line at all.
    let o = dlsched(&["simulate", "--jobs", "20", "--placement", "share-best-fit", "--sample-interval", "0"]);
    assert!(o.status.success());
    let out = text(&o.stdout);
    assert!(!out.lines().any(|l| l.starts_with("speed")) && !out.contains("rate evaluations"), "{out}");
}

#[test]
fn simulate_help_is_plain_and_true() {
    let o = dlsched(&["simulate", "--help"]);
    let help = text(&o.stdout);
    // No rustdoc links or code spans printed verbatim.
    assert!(!help.contains("[`") && !help.contains("`]"), "{help}");
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "--max-tenants <N> With a sharing placement (share-first-fit, share-best-fit, memeff-pack, fgd, iawp)",
        "--mem-headroom <F> With a sharing placement (share-first-fit, share-best-fit, memeff-pack, fgd, iawp)",
        "timing.json",
        "learning_curve.csv",
        "analytical estimate",
    ] {
        assert!(flat.contains(needle), "help lacks `{needle}`");
    }
    // --jobs 0 and -1 are refused with the range that is allowed.
    for n in ["0", "-1"] {
        let o = dlsched(&["simulate", "--jobs", n]);
        assert!(!o.status.success());
        let err = text(&o.stderr);
        assert!(err.contains("1..") && !err.contains("0..="), "{err}");
    }
}

#[test]
fn a_sweep_rerun_removes_its_earlier_charts_and_notes_a_placement_that_shares_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let sweep = |body: &str| {
        let f = d.path().join("e.toml");
        std::fs::write(&f, format!("question = \"q\"\n[base]\nsample_interval = 0\n{body}")).unwrap();
        let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stderr)
    };
    sweep("jobs = 10\n[sweep]\nload = [0.5, 0.8]\n");
    assert!(out.join("jct_mean_s_vs_load.svg").is_file());
    std::fs::write(out.join("mine.svg"), "keep").unwrap();
    // Two placements that may share, two seeds each, on the synthetic
    // workload at trace speed: one note per placement, none for consolidate.
    let err = sweep(
        "load = 0.8\n[sweep]\njobs = [10, 12]\nseed = [1, 2]\nplacement = [\"consolidate\", \"share-best-fit\", \"fgd\"]\n",
    );
    assert!(out.join("jct_mean_s_vs_jobs.svg").is_file());
    assert!(!out.join("jct_mean_s_vs_load.svg").exists(), "a chart of `load`, no longer swept, is left");
    assert_eq!(std::fs::read_to_string(out.join("mine.svg")).unwrap(), "keep");
    for p in ["share-best-fit", "fgd"] {
        let needle = format!(
            "`placement` = `{p}` on the synthetic workload at `rate_model` = `trace`: no job has a memory figure"
        );
        assert_eq!(err.matches(&needle).count(), 1, "{err}");
    }
    assert!(!err.contains("`consolidate`"), "{err}");
}

/// A round or lease no longer than the checkpoint cost would livelock: every
/// period a job would pay at least as much overhead as it works (Gandiva's
/// 60-s rounds against the Helios table's 60 s above 8 GPUs; a 10-s Themis
/// lease against its 30 s up to 8 GPUs). The run is refused, naming both.
#[test]
fn rounds_no_longer_than_the_checkpoint_cost_are_refused() {
    for args in [
        &["--policy", "gandiva", "--checkpoint", "helios-table"][..],
        &["--policy", "themis", "--policy-opt", "lease-s=10", "--checkpoint", "helios-table"][..],
        &["--policy", "las", "--policy-opt", "round=60", "--checkpoint", "helios-table"][..],
        &["--policy", "gavel", "--policy-opt", "round=0.05", "--checkpoint", "gandiva"][..],
    ] {
        let mut a = vec!["simulate", "--jobs", "20", "--sample-interval", "0"];
        a.extend_from_slice(args);
        let o = dlsched(&a);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not longer than") && err.contains(args[1]), "{args:?}: {err}");
    }
    // 61 s > 60 s, and Gandiva's own 100 ms against its 60-s rounds: both run.
    for args in [
        &["--policy", "las", "--policy-opt", "round=61", "--checkpoint", "helios-table"][..],
        &["--policy", "gandiva", "--checkpoint", "gandiva"][..],
    ] {
        let mut a = vec!["simulate", "--jobs", "20", "--sample-interval", "0"];
        a.extend_from_slice(args);
        let o = dlsched(&a);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    }
}
