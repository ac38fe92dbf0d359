//! SRTF through the platform only: `dlsched simulate --policy srtf
//! --policy-opt ... --checkpoint ...` on the Helios semantics file's §6.1
//! hand example, its rerun from the manifest, sweep files' `policy_opt` keys,
//! and the errors a bad option name or value gives.

use std::path::Path;

use crate::common::dlsched;
use dlsched::engine::CheckpointModel;
use dlsched::experiment::sweep::{Experiment, to_run_spec};
use dlsched::policy::registry::PolicySpec;
use dlsched::policy::srtf::SrtfOptions;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The §6.1 input of `SEMANTICS-srtf-qssf.md` (the same as
/// `tests/it/srtf.rs`'s `sem_jobs`): VC a and VC c, 2 nodes x 8 GPUs each.
fn write_example(dir: &Path) -> (String, String) {
    let vcs = dir.join("vcs.csv");
    let jobs = dir.join("jobs.csv");
    std::fs::write(&vcs, "vc,nodes\na,2\nc,2\n").unwrap();
    std::fs::write(
        &jobs,
        "job_id,submit_time,duration,gpu_num,vc\nA,0,20,4,a\nL0,0,30,16,c\nC,1,100,1,a\nE,2,100,3,a\nB,3,30,4,a\nP,4,40,8,a\nL1,10,20,16,c\n",
    )
    .unwrap();
    (jobs.to_str().unwrap().to_string(), vcs.to_str().unwrap().to_string())
}

const HELIOS_OPTS: [&str; 8] = [
    "--policy-opt",
    "quota-by-count=true",
    "--policy-opt",
    "pending-first-on-ties=true",
    "--policy-opt",
    "preempted-to-back=true",
    "--policy-opt",
    "helios-release-delay=true",
];

/// (job, first start s, end s, queue delay s, preemptions) from a jobs.csv.
fn rows(jobs_csv: &Path) -> Vec<(String, u64, u64, u64, u32)> {
    let mut r = csv::Reader::from_path(jobs_csv).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let (id, fs, end, q, p) =
        (col("job_id"), col("first_start_s"), col("end_s"), col("queue_delay_s"), col("preemptions"));
    let mut v: Vec<_> = r
        .records()
        .map(|x| {
            let x = x.unwrap();
            (
                x[id].to_string(),
                x[fs].parse().unwrap(),
                x[end].parse().unwrap(),
                x[q].parse().unwrap(),
                x[p].parse().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn simulate_srtf_with_reference_options_gives_the_hand_schedule_and_reruns_from_its_manifest() {
    let d = tempfile::tempdir().unwrap();
    let (jobs, vcs) = write_example(d.path());
    let out = d.path().join("run");
    let mut args =
        vec!["simulate", "--trace", &jobs, "--vcs", &vcs, "--policy", "srtf", "--checkpoint", "helios-table"];
    args.extend(HELIOS_OPTS);
    args.extend(["--out", out.to_str().unwrap()]);
    let o = dlsched(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The hand schedule of SEMANTICS-srtf-qssf.md §6.1 (derivation in
    // tests/it/srtf.rs, helios_semantics_example_6_1): in VC a, P (8 GPUs,
    // 40 s) arrives at 4 and takes the 16-GPU count with A and B, so C and E
    // are preempted (C 97 + 7 s = 104 s left, E 98 + 30 = 128) and P waits
    // for A's release at 20 + 1 = 21; then P, C and E start at 21 and end
    // at 21 + 40 + 1 = 62, 21 + 104 + 1 = 126, 21 + 128 + 1 = 150; B ends at
    // 3 + 30 + 1 = 34. In VC c, L1 (20 s) ties with L0's 20 s left at 10 and
    // ranks first: L0 is preempted (20 + 60 = 80 s left), resumes at 31 and
    // ends at 31 + 80 + 1 = 112, waiting 31 - 10 = 21 s.
    let want: Vec<(String, u64, u64, u64, u32)> = {
        let mut v: Vec<_> = [
            ("A", 0, 21, 0, 0),
            ("B", 3, 34, 0, 0),
            ("C", 1, 126, 17, 1),
            ("E", 2, 150, 17, 1),
            ("L0", 0, 112, 21, 1),
            ("L1", 10, 31, 0, 0),
            ("P", 21, 62, 17, 0),
        ]
        .iter()
        .map(|&(n, a, b, c, p)| (n.to_string(), a, b, c, p))
        .collect();
        v.sort();
        v
    };
    assert_eq!(rows(&out.join("jobs.csv")), want);
    let stdout = text(&o.stdout);
    // Three preemptions (C, E, L0), each of a distinct job.
    assert!(
        stdout.contains("preemptions                3    (3 jobs preempted at least once; checkpoint helios-table)"),
        "{stdout}"
    );
    // The manifest holds the options and the checkpoint model ...
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["spec"]["checkpoint"], "helios-table");
    assert_eq!(
        serde_json::from_value::<PolicySpec>(m["spec"]["policy"].clone()).unwrap(),
        PolicySpec::Srtf(SrtfOptions::helios())
    );
    // ... and reproduces the run byte for byte.
    let again = d.path().join("again");
    let o = dlsched(&[
        "simulate",
        "--from-manifest",
        out.join("manifest.json").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for f in ["manifest.json", "jobs.csv", "summary.json", "vc_summary.csv", "timeline.csv"] {
        assert_eq!(std::fs::read(out.join(f)).unwrap(), std::fs::read(again.join(f)).unwrap(), "{f}");
    }
    // Without the checkpoint table the preempted jobs resume with exactly
    // the work they had: C ends at 21 + 97 + 1 = 119, E at 21 + 98 + 1 = 120,
    // L0 at 31 + 20 + 1 = 52.
    let free = d.path().join("free");
    let mut args = vec!["simulate", "--trace", &jobs, "--vcs", &vcs, "--policy", "srtf"];
    args.extend(HELIOS_OPTS);
    args.extend(["--out", free.to_str().unwrap()]);
    assert!(dlsched(&args).status.success());
    let ends: Vec<(String, u64)> = rows(&free.join("jobs.csv")).into_iter().map(|r| (r.0, r.2)).collect();
    let get = |n: &str| ends.iter().find(|r| r.0 == n).unwrap().1;
    assert_eq!((get("C"), get("E"), get("L0")), (119, 120, 52));
}

#[test]
fn bad_policy_options_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let (jobs, vcs) = write_example(d.path());
    let run = |extra: &[&str]| {
        let mut args = vec!["simulate", "--trace", &jobs, "--vcs", &vcs];
        args.extend(extra);
        let o = dlsched(&args);
        assert!(!o.status.success(), "{extra:?} should fail");
        text(&o.stderr)
    };
    // An unknown name: named as given, with the kind's options and defaults.
    let e = run(&["--policy", "srtf", "--policy-opt", "quota-by-cont=true"]);
    assert!(e.contains("--policy-opt quota-by-cont=true: unknown field `quota-by-cont`"), "{e}");
    assert!(e.contains("`srtf` options:") && e.contains("quota-by-count (default false)"), "{e}");
    // A value of the wrong type.
    let e = run(&["--policy", "srtf", "--policy-opt", "quota-by-count=yes"]);
    assert!(e.contains("--policy-opt quota-by-count=yes: invalid type: string \"yes\", expected a boolean"), "{e}");
    let e = run(&["--policy", "srtf", "--policy-opt", "placement=share-best-fit"]);
    assert!(
        e.contains("unknown variant `share-best-fit`, expected one of `consolidate`, `first-fit`, `recorded`"),
        "{e}"
    );
    // Not NAME=VALUE; the same name twice.
    let e = run(&["--policy", "srtf", "--policy-opt", "quota-by-count"]);
    assert!(e.contains("is not NAME=VALUE"), "{e}");
    let e = run(&["--policy", "srtf", "--policy-opt", "quota-by-count=true", "--policy-opt", "quota-by-count=false"]);
    assert!(e.contains("--policy-opt quota-by-count is given twice"), "{e}");
    // The generic flags set a kind's option of the same name, or say it has none.
    let e = run(&["--policy", "srtf", "--backfill"]);
    assert!(e.contains("--backfill: unknown field `backfill`") && e.contains("`srtf` options:"), "{e}");
    let e = run(&["--policy", "srtf", "--placement", "fgd"]);
    assert!(e.contains("--placement fgd: unknown variant `fgd`"), "{e}");
    // A bad checkpoint model is clap's error, listing the models.
    let e = run(&["--policy", "srtf", "--checkpoint", "lucid"]);
    assert!(e.contains("none") && e.contains("helios-table"), "{e}");
}

#[test]
fn sweep_files_set_and_sweep_policy_options() {
    let d = tempfile::tempdir().unwrap();
    write_example(d.path());
    let p = d.path().join("e.toml");
    std::fs::write(
        &p,
        r#"question = "Does the reference's budget change SRTF?"
[base]
trace = "jobs.csv"
vcs = "vcs.csv"
policy = "srtf"
checkpoint = "helios-table"
policy_opt.pending-first-on-ties = true
[sweep]
policy_opt.quota-by-count = [false, true]
"#,
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    assert_eq!(e.swept, vec!["policy_opt.quota-by-count".to_string()]);
    let mut got: Vec<(bool, bool, CheckpointModel)> = e
        .runs
        .iter()
        .map(|r| {
            let s = to_run_spec(&r.params, &p).unwrap();
            let PolicySpec::Srtf(o) = s.policy else { panic!("{:?}", s.policy) };
            (o.quota_by_count, o.pending_first_on_ties, s.checkpoint)
        })
        .collect();
    got.sort_by_key(|g| g.0);
    assert_eq!(got, vec![(false, true, CheckpointModel::HeliosTable), (true, true, CheckpointModel::HeliosTable)]);
    // A `[base.policy_opt]` table is the same keys.
    std::fs::write(
        &p,
        "question = \"q\"\n[base]\ntrace = \"jobs.csv\"\nvcs = \"vcs.csv\"\npolicy = \"srtf\"\n[base.policy_opt]\nquota-by-count = true\n",
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    let s = to_run_spec(&e.runs[0].params, &p).unwrap();
    assert_eq!(s.policy, PolicySpec::Srtf(SrtfOptions { quota_by_count: true, ..Default::default() }));
    // A bad name: the file, the key as the file spells it, the kind's options.
    std::fs::write(
        &p,
        "question = \"q\"\n[base]\ntrace = \"jobs.csv\"\nvcs = \"vcs.csv\"\npolicy = \"srtf\"\npolicy_opt.quota = true\n",
    )
    .unwrap();
    let err = Experiment::load(&p).unwrap_err().message;
    assert!(err.contains("e.toml") && err.contains("`policy_opt.quota` = `true`: unknown field `quota`"), "{err}");
    assert!(err.contains("quota-by-count (default false)"), "{err}");
}
