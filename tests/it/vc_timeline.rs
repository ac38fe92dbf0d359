//! `vc_timeline.csv`: the timeline per VC (issue 18 §4), checked on a
//! hand-worked two-VC trace and, on the example trace, against
//! `timeline.csv` and `jobs.csv` (independent routes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::dlsched;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Runs `simulate --out DIR` with `args` and returns DIR.
fn run(dir: &Path, args: &[&str]) -> PathBuf {
    let out = dir.join("run");
    let mut a = vec!["simulate"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--out", s(&out)]);
    let o = dlsched(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// A CSV file as its header's names and its rows.
fn csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    (header, lines.map(|l| l.split(',').map(String::from).collect()).collect())
}

fn col(header: &[String], name: &str) -> usize {
    header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

#[test]
fn a_two_vc_trace_gives_the_hand_worked_rows() {
    // VC A: 1 node × 2 GPUs; VC B: 1 node × 4 GPUs; FIFO per VC, samples
    // every 20 s. Events (s): 0 a1 (A, 2 GPUs, 100 s) and b1 (B, 4, 30 s)
    // start; 10 a2 (A, 1, 50 s) waits (A full); 20 b2 (B, 2, 40 s) waits;
    // 25 b3 (B, 3, 10 s) waits; 30 b1 ends, b2 starts, b3 still waits (2
    // free < 3); 70 b2 ends, b3 starts; 80 b3 ends; 100 a1 ends, a2 starts;
    // 150 a2 ends. Samples at 0, 20, 40; after 40 the next event is at 70,
    // past 60, so the next sample is the first multiple of 20 s at or after
    // it, 80 (60 is skipped: its state is 40's, forward-filled); then 100;
    // then nothing until 150, so 160, and none follows.
    //   time  A: run pend busy gpus_pend   B: run pend busy gpus_pend
    //   0        1   0    2    0              1   0    4    0
    //   20       1   1    2    1  (a2)        1   1    4    2  (b2)
    //   40       1   1    2    1              1   1    2    3  (b2 runs, b3 waits)
    //  (60 skipped: as 40)
    //   80       1   1    2    1              0   0    0    0
    //   100      1   0    1    0  (a2 runs)   0   0    0    0
    //   160      0   0    0    0              0   0    0    0
    let d = tempfile::tempdir().unwrap();
    let vcs = d.path().join("vcs.csv");
    std::fs::write(&vcs, "vc,nodes,gpus_per_node\nA,1,2\nB,1,4\n").unwrap();
    let trace = d.path().join("jobs.csv");
    std::fs::write(
        &trace,
        "job_id,vc,gpu_num,submit_time,duration\na1,A,2,0,100\nb1,B,4,0,30\na2,A,1,10,50\nb2,B,2,20,40\nb3,B,3,25,10\n",
    )
    .unwrap();
    let out = run(d.path(), &["--trace", s(&trace), "--vcs", s(&vcs), "--sample-interval", "20"]);
    let got = std::fs::read_to_string(out.join("vc_timeline.csv")).unwrap();
    let want = "time_s,vc,jobs_running,jobs_pending,gpus_busy,gpus_pending\n\
                0,A,1,0,2,0\n0,B,1,0,4,0\n\
                20,A,1,1,2,1\n20,B,1,1,4,2\n\
                40,A,1,1,2,1\n40,B,1,1,2,3\n\
                80,A,1,1,2,1\n80,B,0,0,0,0\n\
                100,A,1,0,1,0\n100,B,0,0,0,0\n\
                160,A,0,0,0,0\n160,B,0,0,0,0\n";
    assert_eq!(got, want);
    // The same instants as timeline.csv.
    let (_, rows) = csv(&out.join("timeline.csv"));
    let times: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(times, ["0", "20", "40", "80", "100", "160"]);
}

#[test]
fn a_run_without_vcs_has_one_vc_named_as_vc_summary_names_it() {
    // One 4-GPU job 0..10 s and one 1-GPU job submitted at 5 s, on the
    // default 16-GPU cluster, samples every 5 s: at 0 one job runs (4 GPUs);
    // at 5 both run (5 GPUs); at 10 the second runs; at 15 nothing.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("jobs.csv");
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\nx,0,10,4\ny,5,10,1\n").unwrap();
    let out = run(d.path(), &["--trace", s(&trace), "--sample-interval", "5"]);
    let (h, rows) = csv(&out.join("vc_summary.csv"));
    let name = rows[0][col(&h, "vc")].clone();
    assert_eq!(rows.len(), 1);
    let got = std::fs::read_to_string(out.join("vc_timeline.csv")).unwrap();
    let want = format!(
        "time_s,vc,jobs_running,jobs_pending,gpus_busy,gpus_pending\n0,{name},1,0,4,0\n5,{name},2,0,5,0\n10,{name},1,0,1,0\n15,{name},0,0,0,0\n"
    );
    assert_eq!(got, want);
}

/// Per instant, the VC rows' sums of `jobs_running`, `jobs_pending` and
/// `gpus_busy`, and the VC names in order.
fn vc_sums(out: &Path) -> (BTreeMap<u64, [u64; 3]>, Vec<String>) {
    let (h, rows) = csv(&out.join("vc_timeline.csv"));
    assert_eq!(h.join(","), "time_s,vc,jobs_running,jobs_pending,gpus_busy,gpus_pending");
    let (t, v, r, p, b) = (0, 1, 2, 3, 4);
    let mut sums: BTreeMap<u64, [u64; 3]> = BTreeMap::new();
    let mut names = Vec::new();
    let first = rows[0][t].clone();
    for row in &rows {
        let e = sums.entry(row[t].parse().unwrap()).or_default();
        for (k, i) in [r, p, b].into_iter().enumerate() {
            e[k] += row[i].parse::<u64>().unwrap();
        }
        if row[t] == first {
            names.push(row[v].clone());
        }
    }
    (sums, names)
}

#[test]
fn on_the_example_trace_the_vcs_sum_to_the_cluster_timeline() {
    let d = tempfile::tempdir().unwrap();
    let (trace, vcs) = (repo("traces/example_jobs.csv"), repo("traces/example_vcs.csv"));
    // FIFO (no preemption) and LAS (preempts: suspended jobs count as pending).
    for policy in ["fifo", "las"] {
        let dir = d.path().join(policy);
        let out = run(&dir, &["--trace", s(&trace), "--vcs", s(&vcs), "--sample-interval", "60", "--policy", policy]);
        let (sums, names) = vc_sums(&out);
        let (vh, vrows) = csv(&out.join("vc_summary.csv"));
        let want_names: Vec<String> = vrows.iter().map(|r| r[col(&vh, "vc")].clone()).collect();
        assert_eq!(names, want_names, "{policy}: VCs in vc_summary.csv's order");
        let (h, rows) = csv(&out.join("timeline.csv"));
        let (t, b, r, p) = (col(&h, "time_s"), col(&h, "gpus_busy"), col(&h, "jobs_running"), col(&h, "jobs_pending"));
        let cluster: BTreeMap<u64, [u64; 3]> = rows
            .iter()
            .map(|x| (x[t].parse().unwrap(), [x[r].parse().unwrap(), x[p].parse().unwrap(), x[b].parse().unwrap()]))
            .collect();
        assert!(cluster.len() > 5, "{policy}: {} samples", cluster.len());
        assert_eq!(sums, cluster, "{policy}: per-VC sums vs timeline.csv");
        // Every instant has one row per VC.
        let n = std::fs::read_to_string(out.join("vc_timeline.csv")).unwrap().lines().count() - 1;
        assert_eq!(n, cluster.len() * names.len());
        if policy == "las" {
            let m = std::fs::read_to_string(out.join("manifest.json")).unwrap();
            assert!(!m.contains("\"preemptions\": 0"), "LAS should preempt here: {m}");
        }
    }
}

#[test]
fn on_the_example_trace_fifo_rows_match_jobs_csv() {
    // Without preemption a job is waiting at sample t when submit <= t <
    // start, and running when start <= t < end (a sample is the state after
    // its instant's pass): per VC, the counts and requested GPUs from
    // jobs.csv must equal vc_timeline.csv's rows.
    let d = tempfile::tempdir().unwrap();
    let (trace, vcs) = (repo("traces/example_jobs.csv"), repo("traces/example_vcs.csv"));
    let out = run(d.path(), &["--trace", s(&trace), "--vcs", s(&vcs), "--sample-interval", "60"]);
    let (jh, jobs) = csv(&out.join("jobs.csv"));
    let (vc, gpus, submit, start, end) =
        (col(&jh, "vc"), col(&jh, "gpus"), col(&jh, "submit_s"), col(&jh, "start_s"), col(&jh, "end_s"));
    let f = |x: &String| x.parse::<f64>().unwrap();
    let (_, rows) = csv(&out.join("vc_timeline.csv"));
    let mut pending_seen = 0;
    for row in &rows {
        let t = f(&row[0]);
        let (mut run_n, mut run_g, mut pend_n, mut pend_g) = (0u64, 0u64, 0u64, 0u64);
        for j in jobs.iter().filter(|j| j[vc] == row[1]) {
            if f(&j[submit]) <= t && t < f(&j[start]) {
                pend_n += 1;
                pend_g += j[gpus].parse::<u64>().unwrap();
            } else if f(&j[start]) <= t && t < f(&j[end]) {
                run_n += 1;
                run_g += j[gpus].parse::<u64>().unwrap();
            }
        }
        let got: Vec<u64> = [2, 3, 4, 5].iter().map(|&i| row[i].parse().unwrap()).collect();
        assert_eq!(got, [run_n, pend_n, run_g, pend_g], "row {row:?}");
        pending_seen += pend_n;
    }
    assert!(pending_seen > 0, "the example trace should queue jobs at some sample");
}
