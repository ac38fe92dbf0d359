//! Golden outputs: small committed inputs run through the command line, their
//! `jobs.csv` and `summary.json` compared byte for byte with committed copies in
//! `tests/golden/<case>/`, so that any change of behaviour shows as a diff.
//!
//! After a deliberate change of behaviour, regenerate the copies with
//! `DLSCHED_BLESS=1 cargo test --release golden`, read the diff (`git diff
//! tests/golden`), and commit it with a message that says why the figures moved.
//! `timing.json` and `manifest.json` are not compared: the first holds wall-clock
//! decision times, the second the version and input paths.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The compared files of a run directory.
const COMPARED: [&str; 2] = ["jobs.csv", "summary.json"];

/// (case name, `dlsched simulate` arguments; `@` stands for `tests/golden/inputs/`).
const CASES: &[(&str, &[&str])] = &[
    // Strict FIFO over two VCs (queue_jobs.csv names them; consolidate placement).
    ("fifo", &["--trace", "@queue_jobs.csv", "--policy", "fifo"]),
    // SJF by trace duration with greedy backfill.
    ("sjf-backfill", &["--trace", "@queue_jobs.csv", "--policy", "sjf", "--backfill"]),
    // Pairs sharing V100s at the measured co-location speeds (profile table rates).
    (
        "share-best-fit",
        &[
            "--trace",
            "@share_jobs.csv",
            "--nodes",
            "2",
            "--gpus-per-node",
            "2",
            "--gpu-type",
            "v100",
            "--placement",
            "share-best-fit",
            "--rate-model",
            "table",
        ],
    ),
    // Up to four tenants a GPU: the co-location rule for three or more tenants.
    (
        "share-first-fit-4",
        &[
            "--trace",
            "@share_jobs.csv",
            "--nodes",
            "1",
            "--gpus-per-node",
            "2",
            "--gpu-type",
            "v100",
            "--placement",
            "share-first-fit",
            "--max-tenants",
            "4",
            "--backfill",
            "--rate-model",
            "table",
        ],
    ),
    // GENIE on its own QoS tasks, two hours of arrivals on lab16, seeded.
    ("genie", &["--workload", "genie", "--policy", "genie", "--hours", "2", "--seed", "7"]),
    // RIFLING learning online on the same tasks.
    ("rifling", &["--workload", "genie", "--policy", "rifling", "--hours", "2", "--seed", "7"]),
];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Runs one case into `out` and returns the run directory.
fn run_case(args: &[&str], out: &Path) {
    let inputs = golden_dir().join("inputs");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlsched"));
    cmd.arg("simulate");
    for a in args {
        match a.strip_prefix('@') {
            Some(file) => cmd.arg(inputs.join(file)),
            None => cmd.arg(a),
        };
    }
    let o = cmd.arg("--out").arg(out).output().unwrap();
    assert!(o.status.success(), "dlsched simulate {args:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
}

/// The first differing line of two texts, for the failure message.
fn first_difference(expected: &str, got: &str) -> String {
    let (mut e, mut g) = (expected.lines(), got.lines());
    for n in 1.. {
        match (e.next(), g.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => {
                return format!(
                    "line {n}:\n  expected: {}\n  got:      {}",
                    a.unwrap_or("<end>"),
                    b.unwrap_or("<end>")
                );
            }
        }
    }
    "no line differs (line endings or a final newline do)".into()
}

#[test]
fn golden_outputs_are_unchanged() {
    let bless = std::env::var_os("DLSCHED_BLESS").is_some();
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (name, args) in CASES {
        let out = tmp.path().join(name);
        run_case(args, &out);
        for file in COMPARED {
            let got = std::fs::read_to_string(out.join(file)).unwrap();
            let want_path = golden_dir().join(name).join(file);
            if bless {
                std::fs::create_dir_all(want_path.parent().unwrap()).unwrap();
                std::fs::write(&want_path, &got).unwrap();
                continue;
            }
            match std::fs::read_to_string(&want_path) {
                Ok(want) if want == got => {}
                Ok(want) => failures.push(format!("{name}/{file}: {}", first_difference(&want, &got))),
                Err(e) => failures.push(format!("{name}/{file}: cannot read {}: {e}", want_path.display())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "golden outputs changed (if on purpose: DLSCHED_BLESS=1 cargo test --release golden, then read git diff tests/golden):\n{}",
        failures.join("\n")
    );
}

/// The harness itself: a changed line is reported with its number and both texts.
#[test]
fn first_difference_names_the_line() {
    let d = first_difference("a\nb\nc\n", "a\nB\nc\n");
    assert!(d.starts_with("line 2:") && d.contains("expected: b") && d.contains("got:      B"), "{d}");
    assert!(first_difference("a\n", "a\nz\n").contains("got:      z"));
}
