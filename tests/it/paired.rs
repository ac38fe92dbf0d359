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
    assert!(e.contains("line 3") && e.contains("second run for seed 4"), "{e}");
    let bad_seed = sweep_dir("x1,5,base,four,1\n");
    let e = paired(bad_seed.path(), &opts()).unwrap_err();
    assert!(e.contains("line 2") && e.contains("field `seed`"), "{e}");
}
