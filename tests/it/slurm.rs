//! `dlsched sweep --shard slurm` (issue 19): the shard comes from a Slurm job
//! array task's environment. No Slurm here: the binary runs with the
//! variables Slurm would set, one process per task, and the merged shards
//! must give the unsharded sweep's summary.csv byte for byte.
//! `.ci/slurm.sh` runs the same on a real Slurm.

use std::path::Path;
use std::process::{Command, Output};

const VARS: [&str; 4] =
    ["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX"];

/// One array task's Slurm variables, (name, value).
type TaskEnv = Vec<(&'static str, &'static str)>;

/// Runs the binary with exactly the Slurm array variables `env` (the others
/// removed, in case the tests themselves run inside a job array).
fn dlsched_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dlsched"));
    for v in VARS {
        c.env_remove(v);
    }
    c.args(args).envs(env.iter().copied()).output().unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run_ids(dir: &Path) -> usize {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    meta["run_ids"].as_array().unwrap().len()
}

#[test]
fn slurm_array_tasks_merge_to_the_unsharded_sweep() {
    let d = tempfile::tempdir().unwrap();
    let exp = d.path().join("tiny.toml");
    // 2 policies x 3 seeds = 6 runs; 3 shards of 2 runs each.
    std::fs::write(
        &exp,
        "question = \"q\"\n[base]\ncluster = \"lab16\"\njobs = 30\n\
         [sweep]\npolicy = [\"fifo\", \"sjf\"]\nseed = { from = 1, to = 3, step = 1 }\n",
    )
    .unwrap();
    let exp = exp.to_str().unwrap();
    let path = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    ok(&dlsched_env(&["sweep", exp, "--out", &path("whole"), "--threads", "1"], &[]));
    let whole = std::fs::read(d.path().join("whole/summary.csv")).unwrap();
    assert_eq!(String::from_utf8_lossy(&whole).lines().count(), 7);

    // As `sbatch --array=1-3` sets them (id, count, min, max), and as an
    // array from 0 without a count (`--array=0-2`: shard id - min + 1 of
    // max - min + 1).
    let layouts: [(&str, Vec<TaskEnv>); 2] = [
        (
            "a",
            ["1", "2", "3"]
                .iter()
                .map(|id| {
                    vec![
                        ("SLURM_ARRAY_TASK_ID", *id),
                        ("SLURM_ARRAY_TASK_COUNT", "3"),
                        ("SLURM_ARRAY_TASK_MIN", "1"),
                        ("SLURM_ARRAY_TASK_MAX", "3"),
                    ]
                })
                .collect(),
        ),
        (
            "b",
            ["0", "1", "2"]
                .iter()
                .map(|id| {
                    vec![("SLURM_ARRAY_TASK_ID", *id), ("SLURM_ARRAY_TASK_MIN", "0"), ("SLURM_ARRAY_TASK_MAX", "2")]
                })
                .collect(),
        ),
    ];
    for (name, tasks) in &layouts {
        let mut shards = Vec::new();
        for (i, env) in tasks.iter().enumerate() {
            let out = path(&format!("{name}/shard-{}", i + 1));
            let stdout = ok(&dlsched_env(&["sweep", exp, "--shard", "slurm", "--out", &out, "--threads", "1"], env));
            assert!(stdout.contains(&format!("2 runs (shard {}/3, from the Slurm job array)", i + 1)), "{stdout}");
            assert_eq!(run_ids(Path::new(&out)), 2);
            shards.push(out);
        }
        let merged = path(&format!("{name}/merged"));
        let mut args = vec!["merge"];
        args.extend(shards.iter().map(String::as_str));
        args.extend(["--out", &merged]);
        assert!(ok(&dlsched_env(&args, &[])).starts_with("merged 6 runs"));
        assert_eq!(std::fs::read(Path::new(&merged).join("summary.csv")).unwrap(), whole, "layout {name}");
    }
}

#[test]
fn slurm_shard_errors_name_the_variable() {
    let d = tempfile::tempdir().unwrap();
    let exp = d.path().join("tiny.toml");
    std::fs::write(&exp, "question = \"q\"\n[base]\njobs = 10\n[sweep]\nseed = [1, 2]\n").unwrap();
    let exp = exp.to_str().unwrap();
    let out = d.path().join("out");
    let err = |env: &[(&str, &str)]| {
        let o = dlsched_env(&["sweep", exp, "--shard", "slurm", "--out", out.to_str().unwrap()], env);
        assert_eq!(o.status.code(), Some(2), "{env:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(err(&[]).contains("--shard slurm: SLURM_ARRAY_TASK_ID is not set"));
    assert!(
        err(&[("SLURM_ARRAY_TASK_ID", "4"), ("SLURM_ARRAY_TASK_COUNT", "3")])
            .contains("--shard slurm: SLURM_ARRAY_TASK_ID=4 is outside the array's task ids 1 to 3")
    );
    assert!(
        err(&[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_COUNT", "three")])
            .contains("--shard slurm: SLURM_ARRAY_TASK_COUNT=`three` is not a whole number >= 0")
    );
    // Nothing was written: the shard is checked before the sweep starts.
    assert!(!out.exists());
    // `--shard` still takes I/N, and says what else it takes.
    let o = dlsched_env(&["sweep", exp, "--shard", "x"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("or `slurm`"));
}
