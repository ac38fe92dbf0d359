//! No job left behind: a run never ends with an admitted job silently
//! unfinished. Each case the fuzzing of main 945ca3c found (a policy that
//! admitted a job it could never start, and the run exited 0 with means over
//! the rest) is here, with the engine's end-of-run check and the options that
//! allow cut-off runs (`--allow-unfinished`, `--horizon`).

use dlsched::cluster::{Cluster, ClusterPreset};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::error::SimError;
use dlsched::ids::JobId;
use dlsched::policy::placement::{Consolidate, Placement, PlacementKind};
use dlsched::policy::queue::request;
use dlsched::policy::{Decision, Policy, View};
use dlsched::profile::TraceSpeed;
use dlsched::workload::build_workload;

use crate::common::{dlsched, rec};

/// Writes `text` to `dir/name` and returns the path as a string.
fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Runs `dlsched simulate args --out DIR/out` and returns (exit code,
/// stderr, summary.json when written).
fn simulate(dir: &std::path::Path, args: &[&str]) -> (i32, String, Option<serde_json::Value>) {
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    let mut all = vec!["simulate"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = dlsched(&all);
    let summary = std::fs::read_to_string(out.join("summary.json")).ok().map(|s| serde_json::from_str(&s).unwrap());
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned(), summary)
}

fn count(s: &serde_json::Value, key: &str) -> u64 {
    s[key].as_u64().unwrap_or_else(|| panic!("{key} in {s}"))
}

/// Gavel runs a job on GPUs of one type. ldwp-testbed has 2 × 2 + 4 × 4 = 20
/// K80 and 4 × 4 + 2 × 2 = 20 P100 (`src/cluster/presets.rs`): a 24-GPU job
/// (the whole cluster has 40) was admitted and never started; a 20-GPU job
/// fits one type exactly. Now the 24-GPU job is refused at admission as
/// `exceeds_gpu_type_group` and the run completes the other two.
#[test]
fn gavel_refuses_a_job_wider_than_every_gpu_type_of_its_partition() {
    let d = tempfile::tempdir().unwrap();
    let trace = write(
        d.path(),
        "wide.csv",
        "job_id,gpu_num,submit_time,duration\nwide,24,0,600\nexact,20,5,100\nsmall,1,10,300\n",
    );
    for policy in ["gavel", "gavel-fifo", "gavel-max-sum"] {
        let (code, err, s) = simulate(d.path(), &["--trace", &trace, "--cluster", "ldwp-testbed", "--policy", policy]);
        assert_eq!(code, 0, "{policy}: {err}");
        let s = s.unwrap();
        assert_eq!(count(&s, "jobs_completed"), 2, "{policy}: {s}");
        assert_eq!(count(&s, "jobs_unfinished"), 0, "{policy}");
        assert_eq!(s["jobs_skipped_by_reason"]["exceeds_gpu_type_group"], 1, "{policy}: {s}");
    }
    // FIFO places across types: it admits and completes all three.
    let (code, err, s) = simulate(d.path(), &["--trace", &trace, "--cluster", "ldwp-testbed", "--policy", "fifo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(count(&s.unwrap(), "jobs_completed"), 3);
}

/// Nodes of 1, 4 and 2 GPUs: the GENIE family's symmetric placements are
/// `<d_node, d_gpn>` over 3 nodes × 4 GPUs, and `<2, 4>` (or `<3, 2>`) can
/// never be free on them (one node has 4 GPUs, one has 2). Variants that
/// pick by predicted speed alone picked such a placement and waited for
/// ever (min-min-pred completed 0 or 1 of 3 tasks, tetris-perf 2 of 3). Now
/// only placements the empty partition can hold are candidates.
#[test]
fn prediction_using_genie_variants_complete_every_task_on_unequal_nodes() {
    let d = tempfile::tempdir().unwrap();
    let nodes = write(
        d.path(),
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,1,T4\nn2,64000,262144,4,V100M16\nn3,64000,262144,2,V100M16\n",
    );
    for policy in ["min-min-pred", "tetris-perf", "tetris-perf-srtf", "tetris-cer-srtf", "weighted-fair-cer", "genie"] {
        let (code, err, s) = simulate(
            d.path(),
            &["--workload", "genie", "--tasks", "3", "--hours", "1", "--nodes-file", &nodes, "--policy", policy],
        );
        assert_eq!(code, 0, "{policy}: {err}");
        let s = s.unwrap();
        assert_eq!((count(&s, "jobs_completed"), count(&s, "jobs_unfinished")), (3, 0), "{policy}: {s}");
    }
}

/// IAWP starts a job on idle GPUs as `consolidate` places it, but jobs were
/// admitted by `share-best-fit`, which spans nodes: a 5-GPU pod allowed only
/// V100M32 (two 4-GPU nodes) beside an 8-GPU T4 node was admitted, never
/// started, and (strict FIFO) held back the 1-GPU pod behind it: 0 of 2
/// completed. Now it is refused as `unplaceable`, as under `consolidate`.
#[test]
fn iawp_refuses_a_job_its_placement_can_never_start() {
    let d = tempfile::tempdir().unwrap();
    let nodes = write(
        d.path(),
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,T4\nn2,64000,262144,4,V100M32\nn3,64000,262144,4,V100M32\n",
    );
    let pods = write(
        d.path(),
        "pods.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         p1,1000,1000,5,1000,V100M32,LS,Succeeded,0,600,0\n\
         p2,1000,1000,1,1000,,LS,Succeeded,10,310,10\n",
    );
    for placement in ["iawp", "consolidate"] {
        let (code, err, s) = simulate(d.path(), &["--trace", &pods, "--nodes-file", &nodes, "--placement", placement]);
        assert_eq!(code, 0, "{placement}: {err}");
        let s = s.unwrap();
        assert_eq!(count(&s, "jobs_completed"), 1, "{placement}: {s}");
        assert_eq!(s["jobs_skipped_by_reason"]["unplaceable"], 1, "{placement}: {s}");
    }
    // share-best-fit spans the two V100M32 nodes (4 + 1) and completes both.
    let (code, err, s) =
        simulate(d.path(), &["--trace", &pods, "--nodes-file", &nodes, "--placement", "share-best-fit"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(count(&s.unwrap(), "jobs_completed"), 2);
}

/// A policy that starts every job except those asking for more than 2 GPUs:
/// a policy bug the engine must not hide.
struct NeverWide(Vec<JobId>);

impl Policy for NeverWide {
    fn name(&self) -> String {
        "never-wide".into()
    }
    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.0.push(job);
    }
    fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}
    fn decide(&mut self, view: &View<'_>) -> Decision {
        for (i, &job) in self.0.iter().enumerate() {
            let mut gpus = Vec::new();
            if view.jobs.spec(job).gpus <= 2 && Consolidate.place(view.cluster, request(view, job), &mut gpus) {
                self.0.remove(i);
                return Decision::Launch { job, gpus };
            }
        }
        Decision::Wait
    }
}

fn never_wide_sim() -> Simulation {
    let cluster = Cluster::new(ClusterPreset::Lab16.spec()).unwrap();
    let recs = vec![rec("a", 0, 1, 100), rec("b", 10, 4, 100), rec("c", 20, 2, 50), rec("d", 30, 8, 10)];
    let w = build_workload(recs, &cluster, PlacementKind::Consolidate.build());
    Simulation::new(
        cluster,
        w.jobs,
        Box::new(NeverWide(Vec::new())),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
}

/// The engine's end-of-run check: jobs `b` (4 GPUs) and `d` (8 GPUs) are
/// never started, so the run fails naming both, in id order, with their
/// state; the last event is `a`'s completion at 0 + 100 = 100 s (`c` ends
/// at 20 + 50 = 70 s). Allowed, the same run ends with 2 completed.
#[test]
fn a_run_that_leaves_admitted_jobs_unfinished_fails_naming_them() {
    let err = never_wide_sim().run().err().expect("the run must fail");
    match &err {
        SimError::Unfinished { policy, count, admitted, jobs, now, .. } => {
            assert_eq!((policy.as_str(), *count, *admitted), ("never-wide", 2, 4));
            let names: Vec<(&str, u32, &str)> = jobs.iter().map(|j| (j.name.as_str(), j.gpus, j.state)).collect();
            assert_eq!(names, vec![("b", 4, "pending"), ("d", 8, "pending")]);
            assert_eq!(now.as_ms(), 100_000);
        }
        e => panic!("expected Unfinished, got {e}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("job `b`") && msg.contains("job `d`") && msg.contains("--allow-unfinished"), "{msg}");
    let out = never_wide_sim().allow_unfinished().run().unwrap();
    let done = out.jobs.iter().filter(|(_, s)| matches!(s, dlsched::job::JobState::Completed(_))).count();
    assert_eq!(done, 2);
}

/// `--horizon`: the example trace under strict FIFO cut at 1,000 s completes
/// exactly the jobs whose full run ends by then (the independent route:
/// the uncut run's jobs.csv), says why in the summary, and exits 0; without
/// a horizon the same run completes every job and writes no such key.
#[test]
fn a_horizon_cuts_the_run_and_the_summary_says_so() {
    let d = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let trace = format!("{root}/traces/example_jobs.csv");
    let vcs = format!("{root}/traces/example_vcs.csv");
    let (code, err, full) = simulate(d.path(), &["--trace", &trace, "--vcs", &vcs]);
    assert_eq!(code, 0, "{err}");
    let full = full.unwrap();
    assert!(full.get("cut_off").is_none(), "{full}");
    let jobs = std::fs::read_to_string(d.path().join("out/jobs.csv")).unwrap();
    let header: Vec<&str> = jobs.lines().next().unwrap().split(',').collect();
    let end = header.iter().position(|&c| c == "end_s").unwrap();
    let by_1000 =
        jobs.lines().skip(1).filter(|l| l.split(',').nth(end).unwrap().parse::<f64>().unwrap() <= 1000.0).count();
    assert!(by_1000 > 0 && (by_1000 as u64) < count(&full, "jobs_completed"), "{by_1000}");
    let (code, err, cut) = simulate(d.path(), &["--trace", &trace, "--vcs", &vcs, "--horizon", "1000"]);
    assert_eq!(code, 0, "{err}");
    let cut = cut.unwrap();
    assert_eq!(count(&cut, "jobs_completed"), by_1000 as u64);
    assert_eq!(count(&cut, "jobs_unfinished"), count(&full, "jobs_completed") - by_1000 as u64);
    assert_eq!(cut["cut_off"]["horizon_s"], 1000.0);
}

/// Found by the fuzzing harness: FIFO with a sharing placement on GENIE
/// tasks on ldwp-testbed (K80 GPUs of 24 GiB, P4 GPUs of 8 GiB) placed a
/// 12 GiB task on a P4 (the placement saw a job of unknown memory, the
/// engine the task's memory): an invalid decision mid-run. Now the run is
/// refused before it starts, naming the placement and the memory sizes; a
/// non-sharing placement still runs every task.
#[test]
fn sharing_queue_placements_refuse_genie_tasks_on_gpus_of_unequal_memory() {
    let d = tempfile::tempdir().unwrap();
    let base =
        ["--cluster", "ldwp-testbed", "--workload", "genie", "--hours", "0.473", "--tasks", "28", "--seed", "862"];
    for placement in ["iawp", "fgd", "share-best-fit"] {
        let mut args = base.to_vec();
        args.extend_from_slice(&["--placement", placement]);
        let (code, err, _) = simulate(d.path(), &args);
        assert_eq!(code, 2, "{placement}: {err}");
        assert!(err.contains(placement) && err.contains("8192") && err.contains("24576"), "{err}");
        assert!(!err.contains("invalid decision"), "{err}");
    }
    let mut args = base.to_vec();
    args.extend_from_slice(&["--placement", "consolidate"]);
    let (code, err, s) = simulate(d.path(), &args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(count(&s.unwrap(), "jobs_completed"), 28);
}

/// A run cut off at a horizon integrates busy GPU-time to its last event,
/// after its last completion: the utilisation's span runs to that event
/// (it was the makespan, up to the last completion, which gave 0 with no
/// completion and values over 100 % with one: 102.97 on fuzz case 49299).
/// Two 1-GPU jobs of 1,000 s on one GPU under LAS with 10 s rounds take
/// turns; cut at 500 s, neither has completed, and the GPU was held the
/// whole time from 0 to the last round boundary: utilisation exactly 1.
#[test]
fn a_cut_off_run_reports_utilisation_over_the_span_it_ran() {
    let d = tempfile::tempdir().unwrap();
    let trace = write(d.path(), "two.csv", "job_id,gpu_num,submit_time,duration\na,1,0,1000\nb,1,0,1000\n");
    let (code, err, s) = simulate(
        d.path(),
        &[
            "--trace",
            &trace,
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--policy",
            "las",
            "--policy-opt",
            "round=10",
            "--horizon",
            "500",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let s = s.unwrap();
    assert_eq!(count(&s, "jobs_completed"), 0, "{s}");
    assert_eq!(s["gpu_utilization"].as_f64(), Some(1.0), "{s}");
}
