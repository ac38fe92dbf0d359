//! `dlsched paired` on a hand-written sweep directory: means, Student-t
//! intervals, paired differences and verdicts computed by hand.

use std::fs;

use dlsched::experiment::paired::{PairedOptions, paired};

/// A sweep directory with the two files `paired` reads.
fn sweep_dir(rows: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("sweep.json"), r#"{"question": "q", "swept": ["jobs_per_hour", "policy", "seed"]}"#)
        .unwrap();
    fs::write(d.path().join("summary.csv"), format!("run_id,jobs_per_hour,policy,seed,makespan_s\n{rows}")).unwrap();
    d
}

const ROWS: &str = "\
r01,5,base,3,100
r02,5,a,3,0
r03,5,base,4,10
r04,5,base,5,12
r05,5,base,6,14
r06,5,a,4,9
r07,5,a,5,10
r08,5,a,6,13
r09,5,c,4,8
r10,5,c,5,10
r11,5,c,6,12
r12,5,d,4,11
r13,5,d,5,13
r14,5,d,6,null
r15,10,base,4,1
r17,10,e,4,1
r18,10,e,5,1
r16,10,base,5,1
";

fn opts() -> PairedOptions {
    PairedOptions {
        metrics: vec!["makespan_s".into()],
        baseline: Some(("policy".into(), "base".into())),
        seeds: Some((4, 6)),
        level: 0.95,
        ..PairedOptions::default()
    }
}

#[test]
fn paired_differences_and_verdicts_by_hand() {
    let d = sweep_dir(ROWS);
    let r = paired(d.path(), &opts()).unwrap();
    assert_eq!(r.seeds, vec![4, 5, 6], "seed 3 is outside --seeds 4-6");
    assert_eq!(r.config_keys, vec!["jobs_per_hour".to_string()]);
    let rows = &r.tables[0].1;
    // Configurations numerically (5 before 10), the baseline first, then a, c, d.
    let order: Vec<(String, String)> = rows.iter().map(|r| (r.config[0].1.clone(), r.value.clone())).collect();
    let want = [("5", "base"), ("5", "a"), ("5", "c"), ("5", "d"), ("10", "base"), ("10", "e")];
    assert_eq!(order, want.map(|(a, b)| (a.to_string(), b.to_string())));
    // base: 10, 12, 14: mean 12, sd 2, half = t(0.975, 2) 4.302653 · 2 / √3 = 4.968275.
    let base = &rows[0];
    assert_eq!(base.stat.mean, 12.0);
    assert!((base.stat.half_width - 4.968275).abs() < 1e-5);
    assert!(base.diff.is_none());
    // a − base per seed: −1, −2, −1: mean −4/3, sd √(1/3), half = 4.302653 · √(1/3) / √3
    // = 4.302653 / 3 = 1.434218: [−2.76755, 0.10089] contains 0.
    let a = rows[1].diff.unwrap();
    assert_eq!(a.n, 3);
    assert!((a.mean + 4.0 / 3.0).abs() < 1e-12);
    assert!((a.half_width - 1.434218).abs() < 1e-5);
    assert_eq!(rows[1].verdict(), "no measurable difference");
    // c − base: −2, −2, −2: no spread, the interval is the point −2: lower.
    let c = rows[2].diff.unwrap();
    assert_eq!((c.mean, c.half_width), (-2.0, 0.0));
    assert_eq!(rows[2].verdict(), "lower");
    // d: seed 6 has no value: counted as missing, 2 values, 2 pairs (+1, +1),
    // baseline mean over the paired seeds (10 + 12) / 2 = 11.
    assert_eq!((rows[3].stat.n, rows[3].missing), (2, 1));
    let dd = rows[3].diff.unwrap();
    assert_eq!((dd.n, dd.mean, dd.half_width), (2, 1.0, 0.0));
    assert_eq!(rows[3].baseline_mean, 11.0);
    assert_eq!(rows[3].verdict(), "higher");
    // e equals the baseline on both seeds: identical, not merely "no measurable difference".
    assert_eq!(rows[5].verdict(), "identical on every seed");
    // The Markdown names every cell; the missing run is reported.
    let md = r.markdown();
    assert!(
        md.contains("| 5 | c | 3 | 10.00 ± 4.9683 | 3 | -2.0000 [-2.0000, -2.0000] | -16.7 [-16.7, -16.7] | lower |"),
        "{md}"
    );
    assert!(md.contains("2 (1 without a value)"), "{md}");
}

#[test]
fn paired_refuses_what_it_cannot_compare() {
    let d = sweep_dir(ROWS);
    let err = |o: PairedOptions| paired(d.path(), &o).unwrap_err();
    assert!(err(PairedOptions { metrics: vec!["nope".into()], ..opts() }).contains("no column `nope`"));
    assert!(
        err(PairedOptions { baseline: Some(("policy".into(), "zzz".into())), ..opts() }).contains("`policy` = `zzz`")
    );
    assert!(err(PairedOptions { baseline: Some(("seed".into(), "4".into())), ..opts() }).contains("not a swept key"));
    assert!(err(PairedOptions { seeds: Some((40, 50)), ..opts() }).contains("no run has a seed in 40-50"));
    // Two runs of one configuration and seed (a key that differs but is not swept).
    let dup = sweep_dir("x1,5,base,4,1\nx2,5,base,4,2\n");
    let e = paired(dup.path(), &opts()).unwrap_err();
    assert!(e.contains("line 3") && e.contains("second run of arm `base` for seed 4"), "{e}");
    let bad_seed = sweep_dir("x1,5,base,four,1\n");
    let e = paired(bad_seed.path(), &opts()).unwrap_err();
    assert!(e.contains("line 2") && e.contains("field `seed`"), "{e}");
}

/// A sweep directory named `name` under `root` with its swept keys and rows.
fn sweep_at(root: &std::path::Path, name: &str, swept: &[&str], rows: &str) -> std::path::PathBuf {
    let d = root.join(name);
    fs::create_dir_all(&d).unwrap();
    let keys: Vec<String> = swept.iter().map(|k| format!("\"{k}\"")).collect();
    fs::write(d.join("sweep.json"), format!(r#"{{"question": "{name}", "swept": [{}]}}"#, keys.join(", "))).unwrap();
    fs::write(d.join("summary.csv"), format!("run_id,{},makespan_s\n{rows}", swept.join(","))).unwrap();
    d
}

#[test]
fn several_sweeps_are_joined_by_configuration_and_seed() {
    use dlsched::experiment::paired::paired_many;
    let root = tempfile::tempdir().unwrap();
    // GENIE with its own option, its baseline in another sweep, and a control
    // sweep that does not sweep the predictor (it joins every predictor).
    let a = sweep_at(
        root.path(),
        "genie",
        &["rate", "predictor", "reading", "seed"],
        "a1,t,oracle,strict,4,10\na2,t,oracle,strict,5,12\na3,t,noisy,strict,4,20\na4,t,noisy,strict,5,22\n",
    );
    let b = sweep_at(
        root.path(),
        "baselines",
        &["rate", "predictor", "policy", "seed"],
        "b1,t,oracle,cap,4,11\nb2,t,oracle,cap,5,14\nb3,t,noisy,cap,4,19\nb4,t,noisy,cap,5,25\n",
    );
    let c = sweep_at(root.path(), "fifo-ctl", &["rate", "seed"], "c1,t,4,9\nc2,t,5,13\n");
    let o = PairedOptions {
        metrics: vec!["makespan_s".into()],
        baseline: Some(("policy".into(), "cap".into())),
        by: Some(vec!["rate".into(), "predictor".into()]),
        level: 0.95,
        ..PairedOptions::default()
    };
    let r = paired_many(&[&a, &b, &c], &o).unwrap();
    assert_eq!(r.config_keys, ["rate", "predictor"]);
    let got: Vec<(String, String, f64)> = r.tables[0]
        .1
        .iter()
        .filter_map(|row| Some((row.config[1].1.clone(), row.value.clone(), row.diff?.mean)))
        .collect();
    // noisy: fifo 9, 13 − cap 19, 25 = −10, −12 → −11; strict 20, 22 − 19, 25 = +1, −3 → −1.
    // oracle: fifo 9, 13 − cap 11, 14 = −2, −1 → −1.5; strict 10, 12 − 11, 14 = −1, −2 → −1.5.
    let want = [
        ("noisy", "reading=strict", -1.0),
        ("noisy", "sweep fifo-ctl", -11.0),
        ("oracle", "reading=strict", -1.5),
        ("oracle", "sweep fifo-ctl", -1.5),
    ];
    assert_eq!(got, want.map(|(p, a, d)| (p.to_string(), a.to_string(), d)));
    // With the predictor left out of --by it names arms, and two of them have
    // policy = cap: the baseline is ambiguous, and said so.
    let e = paired_many(&[&b], &PairedOptions { by: Some(vec!["rate".into()]), ..o.clone() }).unwrap_err();
    assert!(e.contains("several arms have it (predictor=noisy, policy=cap; predictor=oracle, policy=cap)"), "{e}");
}

#[test]
fn average_over_a_key_pairs_only_seeds_with_the_same_values() {
    let root = tempfile::tempdir().unwrap();
    // base: seed 4 (10 + 20) / 2 = 15, seed 5 (12 + 22) / 2 = 17.
    // x: seed 4 (11 + 23) / 2 = 17, seed 5 only load 0.5 → 12, not paired (different loads).
    let d = sweep_at(
        root.path(),
        "loads",
        &["load", "policy", "seed"],
        "r1,0.5,base,4,10\nr2,1.0,base,4,20\nr3,0.5,base,5,12\nr4,1.0,base,5,22\nr5,0.5,x,4,11\nr6,1.0,x,4,23\nr7,0.5,x,5,12\n",
    );
    let o = PairedOptions {
        metrics: vec!["makespan_s".into()],
        baseline: Some(("policy".into(), "base".into())),
        average_over: vec!["load".into()],
        level: 0.95,
        ..PairedOptions::default()
    };
    let r = paired(&d, &o).unwrap();
    let rows = &r.tables[0].1;
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].value.as_str(), rows[0].stat.mean), ("base", 16.0));
    assert_eq!((rows[1].value.as_str(), rows[1].stat.mean), ("x", 14.5));
    let dx = rows[1].diff.unwrap();
    assert_eq!((dx.n, dx.mean), (1, 2.0));
    assert_eq!(rows[1].verdict(), "one pair: no interval");
    assert!(r.markdown().contains("each seed's value is its mean over load"));
}

/// Writes `runs/ID/manifest.json` for a run: its policy and a spec whose
/// workload has `jobs_per_hour`.
fn manifest(sweep: &std::path::Path, id: &str, policy: &str, seed: u64, jobs_per_hour: u32) {
    let d = sweep.join("runs").join(id);
    fs::create_dir_all(&d).unwrap();
    let spec = format!(
        r#"{{"policy": "{policy}", "spec": {{"cluster": "lab16", "seed": {seed}, "rate_model": "table", "profiles": null, "workload": {{"kind": "genie", "jobs_per_hour": {jobs_per_hour}}}, "policy": {{"kind": "{policy}"}}}}}}"#
    );
    fs::write(d.join("manifest.json"), spec).unwrap();
}

#[test]
fn joined_sweeps_must_share_the_workload_and_name_their_fixed_policies() {
    use dlsched::experiment::paired::paired_many;
    let root = tempfile::tempdir().unwrap();
    // GENIE at 20 tasks/h (policy in [base]) against a FIFO control whose
    // density, 10, is fixed in its [base] too: not the same workload.
    let g = sweep_at(root.path(), "g", &["jobs_per_hour", "seed"], "g1,20,4,5\ng2,20,5,6\n");
    manifest(&g, "g1", "genie", 4, 20);
    manifest(&g, "g2", "genie", 5, 20);
    let f = sweep_at(root.path(), "f", &["seed"], "f1,4,1\nf2,5,2\n");
    manifest(&f, "f1", "fifo", 4, 10);
    manifest(&f, "f2", "fifo", 5, 10);
    let o = PairedOptions {
        metrics: vec!["makespan_s".into()],
        baseline: Some(("policy".into(), "fifo".into())),
        level: 0.95,
        ..PairedOptions::default()
    };
    // `policy` is swept by neither: joined, it is read from the manifests.
    let e = paired_many(&[&g, &f], &o).unwrap_err();
    assert!(e.contains("differ in their `workload`") && e.contains("seed 4"), "{e}");
    // The same control at 20 tasks/h pairs: 5 − 1 = 4, 6 − 2 = 4.
    manifest(&f, "f1", "fifo", 4, 20);
    manifest(&f, "f2", "fifo", 5, 20);
    let r = paired_many(&[&g, &f], &o).unwrap();
    let row = &r.tables[0].1[1];
    assert_eq!((row.value.as_str(), row.diff.unwrap().mean), ("genie", 4.0));
    // A directory given twice is said so.
    assert!(paired_many(&[&g, &g], &o).unwrap_err().contains("given twice"));
    // A run directory instead of a sweep directory.
    let e = paired_many(&[&g.join("runs").join("g1")], &o).unwrap_err();
    assert!(e.contains("a run directory"), "{e}");
}

#[test]
fn a_metric_field_that_is_not_a_number_is_an_error_naming_its_line() {
    let d = sweep_dir("r1,5,base,4,10\nr2,5,base,5,abc\n");
    let e = paired(d.path(), &opts()).unwrap_err();
    assert!(e.contains("line 3: field `makespan_s`: `abc` is not a number"), "{e}");
    let d = sweep_dir("r1,5,base,4,inf\n");
    assert!(paired(d.path(), &opts()).unwrap_err().contains("`inf` is not a finite number"));
    // Empty and null are "without a value", counted.
    let d = sweep_dir("r1,5,base,4,\nr2,5,base,5,null\nr3,5,base,6,3\n");
    let r = paired(d.path(), &opts()).unwrap();
    assert_eq!((r.tables[0].1[0].stat.n, r.tables[0].1[0].missing), (1, 2));
    // A zero-byte summary.
    let d = sweep_dir("");
    fs::write(d.path().join("summary.csv"), "").unwrap();
    assert!(paired(d.path(), &opts()).unwrap_err().contains("empty file"));
}
