//! The first run a user makes (issue 18): `dlsched simulate` with no arguments
//! drains its queue and says what it ran and what to try next; strict FIFO is
//! one flag away; every `--help` is plain text; the README's `genie-profile`
//! command rewrites its committed artefact byte for byte.

use crate::common::dlsched;
use std::path::{Path, PathBuf};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// (gpus, submit_s, end_s, duration_s, status) per row of a run's jobs.csv.
fn jobs(dir: &Path) -> Vec<(u32, f64, f64, f64, String)> {
    let mut rdr = csv::Reader::from_path(dir.join("jobs.csv")).unwrap();
    let h = rdr.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (g, s, e, d, st) = (col("gpus"), col("submit_s"), col("end_s"), col("duration_s"), col("status"));
    rdr.records()
        .map(|r| {
            let r = r.unwrap();
            let f = |i: usize| r[i].parse::<f64>().unwrap_or(f64::NAN);
            (r[g].parse().unwrap(), f(s), f(e), f(d), r[st].to_string())
        })
        .collect()
}

#[test]
fn the_default_run_drains_and_says_what_it_ran() {
    let d = tempfile::tempdir().unwrap();
    // No arguments at all: the summary names the scenario and ends with where
    // outputs would go and what to try next.
    let o = dlsched(&["simulate"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for needle in [
        "cluster lab16 (16 GPUs)",
        "500 total, 500 completed, 0 skipped, 0 unfinished",
        "workload  Philly job mix, jobs of at most 8 GPUs, durations cut at 24 h; Poisson arrivals at offered load 0.8",
        "queue     backfill",
        "--out DIR writes jobs.csv",
        "dlsched plot runs/first",
        "dlsched simulate --strict",
    ] {
        assert!(out.contains(needle), "stdout lacks `{needle}`:\n{out}");
    }
    assert!(out.trim_end().lines().last().unwrap().contains("--strict"), "{out}");
    // The same run written out: --out changes nothing but the files.
    let run = d.path().join("run");
    let o = dlsched(&["simulate", "--out", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let with_out = text(&o.stdout);
    assert!(with_out.contains(&format!("wrote {}", run.display())), "{with_out}");
    assert!(with_out.contains(&format!("dlsched plot {}", run.display())), "{with_out}");
    let spec = &json(&run.join("manifest.json"))["spec"];
    assert_eq!(spec["policy"]["kind"], "fifo");
    assert_eq!(spec["policy"]["backfill"], true);
    assert_eq!(spec["workload"]["max_duration_s"], 86_400);
    // Half of lab16's 4 x 4 GPUs.
    assert_eq!(spec["workload"]["max_job_gpus"], 8);
    let rows = jobs(&run);
    assert_eq!(rows.len(), 500);
    assert!(rows.iter().all(|r| r.4 == "completed"), "a job did not complete");
    assert!(rows.iter().all(|r| r.0 <= 8 && r.3 <= 86_400.0), "a job wider than 8 GPUs or longer than a day");
    // The cut binds: 6.4 % of Philly durations exceed a day (synthetic.rs's
    // unit test derives it), about 32 of 500 jobs; none is longer.
    assert!(rows.iter().any(|r| r.3 == 86_400.0), "no job reached the one-day cut");
    // The offered load is 0.8 after the cut: GPU-seconds asked for over 16 GPUs
    // x the arrival span (arrivals rounded to whole seconds, hence 1e-3).
    let demand: f64 = rows.iter().map(|r| f64::from(r.0) * r.3).sum();
    let first = rows.iter().map(|r| r.1).fold(f64::MAX, f64::min);
    let last_arrival = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    let load = demand / (16.0 * (last_arrival - first));
    assert!((load - 0.8).abs() < 1e-3, "offered load {load}");
    // The queue drains: the last job ends within two of the longest runs
    // (2 x 86,400 s) of the last arrival, so utilisation (GPU-time over 16 x
    // makespan) stays within that of the offered load.
    let last_end = rows.iter().map(|r| r.2).fold(0.0, f64::max);
    assert!(last_end <= last_arrival + 2.0 * 86_400.0, "ends {last_end}, last arrival {last_arrival}");
    let s = json(&run.join("summary.json"));
    assert_eq!(s["jobs_unfinished"], 0);
    let util = demand / (16.0 * (last_end - first));
    assert!((s["gpu_utilization"].as_f64().unwrap() - util).abs() < 1e-6);
    assert!(util >= 0.8 * (last_arrival - first) / (last_arrival - first + 2.0 * 86_400.0));
}

#[test]
fn strict_fifo_is_one_flag_away() {
    let d = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| -> (PathBuf, String) {
        let dir = d.path().join(name);
        let mut a = vec!["simulate", "--jobs", "60", "--sample-interval", "0", "--out", dir.to_str().unwrap()];
        a.extend(extra);
        let o = dlsched(&a);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        (dir, text(&o.stdout))
    };
    let (backfill, _) = run("default", &[]);
    let (strict, out) = run("strict", &["--strict"]);
    assert!(out.contains("queue     strict") && out.contains("head-of-line blocking"), "{out}");
    assert_eq!(json(&strict.join("manifest.json"))["spec"]["policy"]["backfill"], false);
    assert_eq!(json(&backfill.join("manifest.json"))["spec"]["policy"]["backfill"], true);
    // Only the queue changes: the same jobs (GPUs, submit time, duration).
    let key = |dir: &Path| jobs(dir).into_iter().map(|r| (r.0, r.1 as u64, r.3 as u64)).collect::<Vec<_>>();
    assert_eq!(key(&backfill), key(&strict));
    // --max-duration 0 is the uncut Philly tail; a trace replay stays strict.
    let (uncut, out) = run("uncut", &["--max-duration", "0"]);
    assert!(out.contains("durations uncut"), "{out}");
    assert!(json(&uncut.join("manifest.json"))["spec"]["workload"].get("max_duration_s").is_none());
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/inputs/queue_jobs.csv");
    let (replay, out) = run("replay", &["--trace", trace]);
    assert!(!out.contains("queue     "), "{out}");
    assert_eq!(json(&replay.join("manifest.json"))["spec"]["policy"]["backfill"], false);
    // The two flags exclude each other.
    let o = dlsched(&["simulate", "--strict", "--backfill"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cannot be used with"), "{}", text(&o.stderr));
}

#[test]
fn no_help_text_shows_rustdoc_links_or_missing_files() {
    // Every subcommand the top-level help lists, and the subcommands of those.
    let top = text(&dlsched(&["--help"]).stdout);
    let commands = |help: &str| -> Vec<String> {
        help.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|c| c != "help")
            .collect()
    };
    let mut helps = vec![("dlsched".to_string(), top.clone())];
    let cmds = commands(&top);
    assert!(cmds.len() >= 8 && cmds.iter().any(|c| c == "simulate"), "{cmds:?}");
    for c in &cmds {
        let h = text(&dlsched(&[c, "--help"]).stdout);
        for sub in commands(&h) {
            helps.push((format!("{c} {sub}"), text(&dlsched(&[c, &sub, "--help"]).stdout)));
        }
        helps.push((c.clone(), h));
    }
    for (name, h) in &helps {
        assert!(!h.is_empty(), "{name} --help printed nothing");
        for bad in ["[`", "super::", "crate::", "specs/policies.md"] {
            assert!(!h.contains(bad), "`{name} --help` shows `{bad}`");
        }
    }
}

#[test]
fn the_readme_genie_profile_command_rewrites_its_artefact_byte_for_byte() {
    // README: `dlsched genie-profile --cluster lab16 --seed 1 --out
    // policies/genie-lab16-seed1.json`, here into a temporary directory: the
    // files must equal the committed ones (no wall-clock date), so that
    // running the README's command leaves the checkout clean.
    let d = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    for (stem, extra) in [("genie-lab16-seed1", vec![]), ("genie-lab16-k80-seed1", vec!["--truth", "genie-k80"])] {
        let out = d.path().join(format!("{stem}.json"));
        let mut a = vec!["genie-profile", "--cluster", "lab16", "--seed", "1", "--out", out.to_str().unwrap()];
        a.extend(extra);
        let o = dlsched(&a);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(json(&out)["manifest"].get("date").is_none(), "{stem}: a date makes every rerun a change");
        for f in [format!("{stem}.json"), format!("{stem}.errors.csv")] {
            assert!(
                std::fs::read(d.path().join(&f)).unwrap() == std::fs::read(repo.join(&f)).unwrap(),
                "policies/{f} differs from what its README command writes"
            );
        }
    }
}

/// Without `--out`, the hint repeats the command as it was run with
/// `--out runs/first` added (not a bare `dlsched simulate`, which would drop
/// the trace and the policy), an argument with a space quoted for the shell.
#[test]
fn the_next_hint_repeats_the_command_with_out() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("my traces");
    std::fs::create_dir(&dir).unwrap();
    let trace = dir.join("jobs.csv");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example_jobs.csv"), &trace).unwrap();
    let o = dlsched(&["simulate", "--trace", trace.to_str().unwrap(), "--policy", "sjf"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // The program as the test ran it (a path without characters a shell
    // treats specially, so unquoted).
    let bin = env!("CARGO_BIN_EXE_dlsched");
    let want = format!(
        "next      {bin} simulate --trace '{}' --policy sjf --out runs/first && {bin} plot runs/first",
        trace.display()
    );
    assert!(out.contains(&want), "stdout lacks `{want}`:\n{out}");
}

/// One configuration, one answer (issue 35): the same run built by
/// `dlsched simulate`, by an experiment file (`dlsched sweep`) and by the
/// library (`RunSpec::new` + `set_policy`) writes the same files byte for
/// byte; the Python package's two routes are held to the command line's in
/// python/tests/test_simulate.py. QSSF is the case: only FIFO and SJF
/// used to backfill by default, and only `simulate` cut durations and job
/// widths. Both the default and a strict queue.
#[test]
fn one_configuration_gives_one_answer_from_every_builder() {
    use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, write_run_dir};
    use dlsched::policy::registry::PolicyName;
    use dlsched::workload::synthetic::SyntheticSpec;
    let d = tempfile::tempdir().unwrap();
    for strict in [false, true] {
        let tag = if strict { "strict" } else { "default" };
        let cli = d.path().join(format!("cli-{tag}"));
        let mut args = vec!["simulate", "--policy", "qssf", "--jobs", "120", "--load", "0.9", "--seed", "3"];
        if strict {
            args.push("--strict");
        }
        let cli_s = cli.to_str().unwrap().to_string();
        args.extend(["--out", &cli_s]);
        let o = dlsched(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let exp = d.path().join(format!("{tag}.toml"));
        let backfill = if strict { "backfill = false\n" } else { "" };
        std::fs::write(
            &exp,
            format!(
                "question = \"q\"\n[base]\npolicy = \"qssf\"\njobs = 120\nload = 0.9\n{backfill}[sweep]\nseed = [3]\n"
            ),
        )
        .unwrap();
        let sw = d.path().join(format!("sweep-{tag}"));
        let o = dlsched(&["sweep", exp.to_str().unwrap(), "--out", sw.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let runs: Vec<PathBuf> = std::fs::read_dir(sw.join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let mut spec = RunSpec::new(
            WorkloadSource::Synthetic(SyntheticSpec { jobs: 120, load: 0.9, ..SyntheticSpec::default() }),
            ClusterChoice::Preset { preset: dlsched::cluster::ClusterPreset::Lab16 },
        );
        spec.set_policy(PolicyName::Qssf);
        spec.seed = 3;
        if strict {
            spec.policy = spec.policy.clone().with_backfill(false);
        }
        let lib = d.path().join(format!("lib-{tag}"));
        let report = dlsched::experiment::run_one(&spec, |_| {}).unwrap();
        write_run_dir(&report, &lib).unwrap();
        for f in ["jobs.csv", "timeline.csv", "vc_timeline.csv", "vc_summary.csv", "summary.json"] {
            let a = std::fs::read(cli.join(f)).unwrap();
            assert!(a == std::fs::read(runs[0].join(f)).unwrap(), "{tag}: {f} differs between simulate and sweep");
            assert!(a == std::fs::read(lib.join(f)).unwrap(), "{tag}: {f} differs between simulate and the library");
        }
        // The manifests record the same effective spec: the one-day cut,
        // jobs of at most 8 GPUs, and the backfill switch.
        let specs: Vec<serde_json::Value> = [cli.clone(), runs[0].clone(), lib.clone()]
            .iter()
            .map(|p| json(&p.join("manifest.json"))["spec"].clone())
            .collect();
        assert_eq!(specs[0], specs[1]);
        assert_eq!(specs[0], specs[2]);
        assert_eq!(specs[0]["workload"]["max_duration_s"], 86_400, "{}", specs[0]);
        assert_eq!(specs[0]["workload"]["max_job_gpus"], 8);
        assert_eq!(specs[0]["policy"]["backfill"], !strict);
    }
}
