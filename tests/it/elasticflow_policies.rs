//! The `elasticflow` and `edf` policies (`dlsched::policy::elasticflow`,
//! `dlsched::policy::edf`) on tiny ElasticFlow traces written here by hand,
//! with the values computed by hand from ElasticFlow's T4 table
//! (`throughputs_T4/cifar10.csv`): cifar10 at global batch 2,048 runs
//! 0.7124343161725541 it/s on 1 GPU and 1.193356620784188 on 2; at 4,096,
//! 0.3562865663863035 on 1 GPU and 0.5970961534737874 on 2. The engine
//! ends a job at the first whole ms after its iterations are done; every
//! run has `--rescale-delay 0` and the default 60-s slot.

use std::path::{Path, PathBuf};

use crate::common::dlsched;

const HEADER: &str = "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n";
const COLUMNS: &str = "num_iteration=iteration,model=model_name,deadline=ddl,global_bsz=batch_size,gpu_num=num_gpu";

fn write(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("ef.csv");
    std::fs::write(&p, format!("{HEADER}{body}")).unwrap();
    p
}

/// A `jobs.csv` row: (job_id, start_s, end_s, status, gpus).
type Row = (String, String, String, String, String);

/// Runs `simulate` on `trace` on one node of `gpus` T4s under `policy`;
/// (exit ok, stdout then stderr, jobs.csv rows, summary.json).
fn simulate(trace: &Path, out: &Path, gpus: &str, policy: &str) -> (bool, String, Vec<Row>, serde_json::Value) {
    let args = [
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--columns",
        COLUMNS,
        "--nodes",
        "1",
        "--gpus-per-node",
        gpus,
        "--gpu-type",
        "t4",
        "--rescale-delay",
        "0",
        "--policy",
        policy,
        "--out",
        out.to_str().unwrap(),
    ];
    let o = dlsched(&args);
    // The printed summary, then stderr.
    let stderr = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
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
            (g("job_id"), g("start_s"), g("end_s"), g("status"), g("gpus"))
        })
        .collect();
    let summary = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    (true, stderr, rows, summary)
}

fn row(id: &str, start: &str, end: &str, status: &str, gpus: &str) -> Row {
    (id.into(), start.into(), end.into(), status.into(), gpus.into())
}

#[test]
fn admission_rejects_a_job_whose_deadline_cannot_be_met() {
    // One T4. a and b (cifar10 at 2,048, 1,000 iterations, deadline 2,000 s)
    // arrive at 0; c (100 iterations, deadline 100,000 s) at 100 s.
    // At 0: a alone needs 1,000 / 0.7124343161725541 = 1,403.638 s on its
    // one GPU, planned [0, 1,440) (rounded up to the 60-s slot): admitted.
    // b, planned after a (same deadline, later in job order), has the GPU
    // from 1,440 s only: 560 s × 0.712 = 399 < 1,000 iterations: rejected.
    // At 100 s (a slot after the last scheduling at 0): c's plan starts
    // when a's ends, so it is admitted and waits. a ends at 1,403.639 s;
    // c starts then and runs 100 / 0.7124343161725541 = 140.363817 s:
    // ends at 1,544.002817 → 1,544.003 s, by its deadline.
    let d = tempfile::tempdir().unwrap();
    let body = "a,0,1000,cifar10,2000,2048,1,\nb,0,1000,cifar10,2000,2048,1,\nc,100,100,cifar10,100000,2048,1,\n";
    let trace = write(d.path(), body);
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("o"), "1", "elasticflow");
    assert!(ok, "{stderr}");
    assert_eq!(
        rows,
        vec![
            row("a", "0", "1403.639", "completed", "1"),
            row("b", "", "", "rejected", "1"),
            row("c", "1403.639", "1544.003", "completed", "1"),
        ]
    );
    // 2 of 3 met their deadline; the rejected job is neither completed nor
    // unfinished, and the printed jobs line counts it.
    assert!(stderr.contains("3 total, 2 completed, 1 rejected, 0 skipped, 0 unfinished"), "{stderr}");
    assert_eq!(s["jobs_completed"], 2);
    assert_eq!(s["jobs_unfinished"], 0);
    assert_eq!(s["jobs_rejected"], 1);
    assert_eq!(s["deadline_admitted_jobs"], 2);
    assert_eq!(s["deadline_late_jobs"], 0);
    assert_eq!(s["deadline_satisfactory_ratio"], 0.666667);
    assert_eq!(s["deadline_late_max_s"], serde_json::Value::Null);
    assert!(s.as_object().unwrap().contains_key("deadline_late_max_s"));
    // EDF admits all three: b runs after a and is late.
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("edf"), "1", "edf");
    assert!(ok, "{stderr}");
    assert_eq!(s["jobs_rejected"], 0);
    // a [0, 1,403.639]; b from 1,403.639 to 2,807.277170 → 2,807.278 (late
    // by 807.278 s); c (deadline 100,000) last: + 140.363817 → 2,947.641817 → 2,947.642.
    assert_eq!(rows[1], row("b", "1403.639", "2807.278", "completed", "1"));
    assert_eq!(rows[2], row("c", "2807.278", "2947.642", "completed", "1"));
    assert_eq!(s["deadline_late_jobs"], 1);
    assert_eq!(s["deadline_late_max_s"], 807.278);
}

#[test]
fn edf_runs_jobs_in_deadline_order() {
    // One T4; x, y, z (cifar10 at 2,048, 100 iterations = 140.363817 s each)
    // arrive at 0 with deadlines 5,000, 3,000 and 4,000 s: y runs first
    // [0, 140.364], then z [140.364, 280.727817 → 280.728], then x
    // [280.728, 421.091817 → 421.092]. Each completion is more than a
    // 60-s slot after the last scheduling, so each next job starts at once.
    let d = tempfile::tempdir().unwrap();
    let body = "x,0,100,cifar10,5000,2048,1,\ny,0,100,cifar10,3000,2048,1,\nz,0,100,cifar10,4000,2048,1,\n";
    let trace = write(d.path(), body);
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("o"), "1", "edf");
    assert!(ok, "{stderr}");
    assert_eq!(
        rows,
        vec![
            row("x", "280.728", "421.092", "completed", "1"),
            row("y", "0", "140.364", "completed", "1"),
            row("z", "140.364", "280.728", "completed", "1"),
        ]
    );
    assert_eq!(s["deadline_satisfactory_ratio"], 1.0);
}

#[test]
fn spare_gpus_go_to_the_job_with_the_higher_marginal_gain() {
    // Three T4s; p (cifar10 at 2,048, 1,000 iterations) and q (cifar10 at
    // 4,096, 100 iterations), both at 0 with deadlines far off: each one's
    // minimum share is 1 GPU, 1 is left. Going 1 → 2 GPUs gains p
    // 1.193357 − 0.712434 = 0.480922 it/s and q 0.597096 − 0.356287 =
    // 0.240810: p gets it. q runs 100 / 0.3562865663863035 = 280.672945 s
    // → 280.673 s; p 1,000 / 1.193356620784188 = 837.972474 s → 837.973 s
    // (after q ends, p's next step, 2 → 4, needs 2 more GPUs of the 1
    // free: it stays on 2, with no reallocation).
    let d = tempfile::tempdir().unwrap();
    let body = "p,0,1000,cifar10,100000,2048,1,\nq,0,100,cifar10,100000,4096,1,\n";
    let trace = write(d.path(), body);
    let (ok, stderr, rows, s) = simulate(&trace, &d.path().join("o"), "3", "elasticflow");
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("p", "0", "837.973", "completed", "2"), row("q", "0", "280.673", "completed", "1")]);
    assert_eq!(s["jobs_rejected"], 0);
}

#[test]
fn jobs_without_a_deadline_or_iterations_are_refused_with_file_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    // Row 3 (b) has no deadline.
    let trace = write(d.path(), "a,0,100,cifar10,5000,2048,1,\nb,0,100,cifar10,,2048,1,\n");
    for policy in ["elasticflow", "edf"] {
        let (ok, stderr, _, _) = simulate(&trace, &d.path().join(policy), "1", policy);
        assert!(!ok, "{policy}");
        let want = format!(
            "ef.csv:3: column `ddl`: job `b` has no deadline; policy `{policy}` schedules ElasticFlow jobs with deadlines only"
        );
        assert!(stderr.contains(&want), "{policy}: want `{want}`, got {stderr}");
    }
    // Row 2 (a) is defined by its duration (no iterations).
    let trace = write(d.path(), "a,0,,cifar10,5000,2048,1,100\n");
    let (ok, stderr, _, _) = simulate(&trace, &d.path().join("dur"), "1", "elasticflow");
    assert!(!ok);
    assert!(stderr.contains("ef.csv:2: column `iteration`: job `a` is not an ElasticFlow job"), "{stderr}");
}
