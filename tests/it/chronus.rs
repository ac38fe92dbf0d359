//! The `chronus` policy (`dlsched::policy::chronus`) on tiny ElasticFlow
//! traces written here by hand, with the values computed by hand from
//! ElasticFlow's T4 table (`throughputs_T4/cifar10.csv`): cifar10 at global
//! batch 2,048 runs 0.7124343161725541 it/s on 1 GPU, so 100 iterations
//! take 140.363817 s and 200 take 280.727634 s. A job's budget is
//! `⌊d · (1 + (1 + log2 g) · 0.5 / 240) · 1.1⌋` s: on 1 GPU, 100 iterations
//! → ⌊140.363817 · 1.0020833 · 1.1⌋ = 154 s (1 lease of 240 s), 200 → 309 s
//! (2 leases). Leases start at multiples of 240 s. Every run has
//! `--rescale-delay 0`; the engine ends a job at the first whole ms after
//! its iterations are done.

use std::path::{Path, PathBuf};

use crate::common::dlsched;

const HEADER: &str = "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n";
const COLUMNS: &str = "num_iteration=iteration,model=model_name,deadline=ddl,global_bsz=batch_size,gpu_num=num_gpu";

fn write(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("ef.csv");
    std::fs::write(&p, format!("{HEADER}{body}")).unwrap();
    p
}

/// A `jobs.csv` row: (job_id, first_start_s, end_s, status, preemptions).
type Row = (String, String, String, String, String);

/// Runs `simulate` on `trace` on `nodes` × `gpus` T4s under chronus;
/// (exit ok, stderr, jobs.csv rows, summary.json).
fn simulate(trace: &Path, out: &Path, nodes: &str, gpus: &str) -> (bool, String, Vec<Row>, serde_json::Value) {
    let args = [
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--columns",
        COLUMNS,
        "--nodes",
        nodes,
        "--gpus-per-node",
        gpus,
        "--gpu-type",
        "t4",
        "--rescale-delay",
        "0",
        "--policy",
        "chronus",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = dlsched(&args);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    if !o.status.success() {
        return (false, stderr, Vec::new(), serde_json::Value::Null);
    }
    let text = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let g = |n: &str| f[col(n)].to_string();
            (g("job_id"), g("first_start_s"), g("end_s"), g("status"), g("preemptions"))
        })
        .collect();
    let summary = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    (true, stderr, rows, summary)
}

fn row(id: &str, start: &str, end: &str, status: &str, preemptions: &str) -> Row {
    (id.into(), start.into(), end.into(), status.into(), preemptions.into())
}

#[test]
fn a_job_is_admitted_at_the_next_lease_boundary_and_runs_from_the_one_after() {
    // One T4. a (100 iterations, deadline 100,000 s) arrives at 100 s: it
    // is first seen at the boundary 240 s, after that boundary's program;
    // its deadline leaves ⌊100,000 / 240⌋ − 2 = 414 leases from 480 s ≥ its
    // 1: accepted. Accepted jobs only run in the leases the program gives
    // them: at 480 s (no unaccepted job: run now) it starts, and ends at
    // 480 + 140.363817 = 620.363817 → 620.364 s, although the GPU was free
    // from 100 s.
    let d = tempfile::tempdir().unwrap();
    let trace = write(d.path(), "a,100,100,cifar10,100000,2048,1,\n");
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("o"), "1", "1");
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("a", "480", "620.364", "completed", "0")]);
    assert_eq!(s["policy_metrics"]["chronus_not_admitted"], 0.0, "{s}");
    assert_eq!(s["deadline_satisfactory_ratio"], 1.0);
}

#[test]
fn a_job_whose_deadline_cannot_be_met_runs_on_leftover_gpus_and_is_late() {
    // One T4. c (1,000 iterations: 1,403.638 s; budget ⌊1,403.638 ·
    // 1.0020833 · 1.1⌋ = 1,547 s → 7 leases) arrives at 0 with deadline
    // 1,000 s: ⌊1,000 / 240⌋ − 1 = 3 leases < 7, so it is not accepted
    // (Chronus refuses no job). At the same boundary it takes the free GPU
    // as an unaccepted job and runs to 1,403.639 s, 403.639 s late.
    let d = tempfile::tempdir().unwrap();
    let trace = write(d.path(), "c,0,1000,cifar10,1000,2048,1,\n");
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("o"), "1", "1");
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("c", "0", "1403.639", "completed", "0")]);
    assert_eq!(s["jobs_rejected"], 0);
    assert_eq!(s["deadline_late_jobs"], 1);
    assert_eq!(s["deadline_late_max_s"], 403.639);
    assert_eq!(s["deadline_satisfactory_ratio"], 0.0);
    assert_eq!(s["policy_metrics"]["chronus_not_admitted"], 1.0, "{s}");
}

#[test]
fn of_two_jobs_that_cannot_both_be_guaranteed_one_is_and_the_other_is_late() {
    // One T4. a and b (200 iterations each: 280.727634 s, 2 leases) arrive
    // at 1 s with deadline 1,000 s. At the boundary 240 s, ⌊1,000 / 240⌋ − 2
    // = 2 leases are left before the deadline (480-960 s): a (job order)
    // packs into both and is accepted; b then finds none: not accepted.
    // b, unaccepted, takes the free GPU at 240 s. At 480 s the program must
    // give a this lease (its last two before its deadline): b is preempted
    // after 240 s of work (40.727634 s left), a runs 480-760.727634 →
    // 760.728 s (it keeps its GPU at 720 s). The GPU then idles until the
    // boundary 960 s, where b resumes and ends at 1,000.727634 → 1,000.728
    // s, 0.728 s late.
    let d = tempfile::tempdir().unwrap();
    let trace = write(d.path(), "a,1,200,cifar10,1000,2048,1,\nb,1,200,cifar10,1000,2048,1,\n");
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("o"), "1", "1");
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("a", "480", "760.728", "completed", "0"), row("b", "240", "1000.728", "completed", "1")]);
    assert_eq!(s["deadline_late_jobs"], 1);
    assert_eq!(s["deadline_late_max_s"], 0.728);
    assert_eq!(s["deadline_satisfactory_ratio"], 0.5);
    assert_eq!(s["policy_metrics"]["chronus_not_admitted"], 1.0, "{s}");
}

#[test]
fn the_program_runs_the_tighter_deadline_first() {
    // One T4. u (deadline 100,000 s) and v (deadline 750 s), 100 iterations
    // each (1 lease), arrive at 1 s. At 240 s, u is accepted (414 leases
    // left); v (⌊750 / 240⌋ − 2 = 1 lease left) packs first (less slack),
    // u after it: both accepted. At 480 s the program must run v (its only
    // lease); u, which could run now, cannot share the one GPU, so it runs
    // at 720 s: v 480-620.364, u 720-860.364. Both meet their deadlines.
    let d = tempfile::tempdir().unwrap();
    let trace = write(d.path(), "u,1,100,cifar10,100000,2048,1,\nv,1,100,cifar10,750,2048,1,\n");
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("o"), "1", "1");
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("u", "720", "860.364", "completed", "0"), row("v", "480", "620.364", "completed", "0")]);
    assert_eq!(s["deadline_satisfactory_ratio"], 1.0);
    assert_eq!(s["policy_metrics"]["chronus_not_admitted"], 0.0, "{s}");
}

#[test]
fn runs_are_deterministic() {
    // Twelve jobs of 1 to 4 GPUs on 2 × 2 T4s, some with deadlines they
    // cannot meet: two runs give byte-identical jobs.csv and summary.json.
    let d = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for i in 0..12u32 {
        let gpus = [1, 2, 4][(i % 3) as usize];
        let submit = i * 97;
        let iters = 100 + 150 * (i % 5);
        let ddl = submit + 600 + 400 * (i % 4);
        body.push_str(&format!("j{i},{submit},{iters},cifar10,{ddl},2048,{gpus},\n"));
    }
    let trace = write(d.path(), &body);
    let (ok1, e1, _, _) = simulate(&trace, &d.path().join("r1"), "2", "2");
    let (ok2, e2, _, _) = simulate(&trace, &d.path().join("r2"), "2", "2");
    assert!(ok1 && ok2, "{e1}{e2}");
    for f in ["jobs.csv", "summary.json"] {
        let a = std::fs::read(d.path().join("r1").join(f)).unwrap();
        let b = std::fs::read(d.path().join("r2").join(f)).unwrap();
        assert_eq!(a, b, "{f}");
    }
}

#[test]
fn jobs_without_a_deadline_are_refused_with_file_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let trace = write(d.path(), "a,0,100,cifar10,5000,2048,1,\nb,0,100,cifar10,,2048,1,\n");
    let (ok, stderr, _, _) = simulate(&trace, &d.path().join("o"), "1", "1");
    assert!(!ok);
    let want = "ef.csv:3: column `ddl`: job `b` has no deadline; policy `chronus` schedules ElasticFlow jobs with deadlines only";
    assert!(stderr.contains(want), "want `{want}`, got {stderr}");
}
