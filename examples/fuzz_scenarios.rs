//! dlsched's own fuzzing harness: seeded random scenarios through
//! the library's run pipeline, and seeded random bytes through the trace
//! loaders.
//!
//! Scenario mode (the default):
//!
//! ```text
//! cargo run --release --example fuzz_scenarios -- --seed 1 --count 100000 --out fuzz-out
//! cargo run --release --example fuzz_scenarios -- --seed 1 --time-budget-s 120 --out fuzz-out   # CI slice
//! cargo run --release --example fuzz_scenarios -- --seed 1 --only 4711 --out fuzz-out          # one scenario again
//! ```
//!
//! Scenario `i` is drawn from its own ChaCha stream, `dlsched::rng::stream(seed,
//! "fuzz-scenario-i")`, so `--only i` redraws it alone. Each draws a cluster
//! (presets, a uniform N×G cluster of a GPU type, a random heterogeneous node
//! file of several GPU types, a VC file), a workload (the synthetic generator,
//! a random jobs-csv list with ties in submit time, zero, tiny and huge
//! durations up to the trace bound of 10^11 s, models and batches; GENIE tasks
//! for the moldable kinds), one registry kind (every entry of
//! `dlsched::policy::registry::KINDS`, uniformly) with each of its options
//! drawn around its default with probability 0.3 (found through serde, so a
//! new kind or option is fuzzed without a change here), a rate model, a
//! checkpoint model, a tie order and a sampling interval. The run is built the
//! way `dlsched simulate` builds it (a raw spec of the flags' keys through
//! `raw::to_run_spec`, with the first run's defaults) and run with every engine
//! invariant checked after every instant (`run_one_checked`).
//!
//! Outcomes: `pass`; `config` (the run refused its options or input cleanly:
//! not a failure, counted by kind and message); failures: `unfinished` (an
//! admitted job neither completed nor refused with a reason), `sim-error` (an
//! invalid decision, an internal or model error, an invariant violation),
//! `panic`, `slow` (over `--time-limit-s` plus `--per-change-us` for every
//! launch and preemption the run made: cost must follow the schedule's
//! events, not simulated time; a run that stays within that allowance but
//! reaches the cap of 0.8 x `--hard-deadline-s`, a schedule of tens of
//! millions of changes, is cut and noted as `long`, not failed), `nondeterministic` (every
//! `--determinism-every`-th scenario runs again in a 1-thread and a 2-thread
//! rayon pool; jobs.csv and summary.json must match byte for byte). A run
//! still going after `--hard-deadline-s` is reported with its reproducer and
//! the process exits with status 3. Each failure gets `OUT/fail-<i>/`: the
//! trace, node and VC files, `repro.sh` (the `dlsched simulate` command, run
//! from that directory), `error.txt` and `spec.json`; `OUT/failures.txt` has
//! one line per failure. The last line is `N passed, M failed`; the exit
//! status is 1 when M > 0.
//!
//! Byte mode (`--bytes`): `--count` seeded inputs (mutations of the sample
//! traces and of small generated files of every format: byte flips,
//! truncations, inserted quotes, CRs, NULs, UTF-8 garbage, blank lines, huge
//! and non-finite numbers) through `load_trace` under auto-detection, the
//! file's own format and another format, and through the VC and node file
//! loaders. A failure is a panic, an error that does not name the file, or one
//! whose line is not a line of the file (or, in a file without quotes, a blank
//! line).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use dlsched::error::{RunError, SimError, TraceError};
use dlsched::experiment::raw::{self, Origin, RawSpec, Value};
use dlsched::experiment::{Artefacts, RunReport, run_one_checked};
use dlsched::job::JobState;
use dlsched::policy::registry::{KINDS, PolicyName};
use dlsched::trace::{ColumnMap, TraceFormat, load_trace};
use rand::Rng;
use rand::seq::SliceRandom;
use rayon::prelude::*;

#[derive(Parser, Debug)]
#[command(about = "dlsched's seeded scenario and trace-parser fuzzer")]
struct Args {
    /// Master seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scenarios (or, with --bytes, inputs) to run, from 0 (default 1,000;
    /// with --time-budget-s and no --count, as many as the budget allows).
    #[arg(long)]
    count: Option<u64>,
    /// The first scenario (or input) index: `--start 5000 --count 1000` runs
    /// 5000..6000 (to carry on past a hang that stopped a campaign).
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Scenario indices to leave out, comma-separated (a hang that stopped a
    /// campaign, when carrying on with --start).
    #[arg(long, value_delimiter = ',')]
    skip_indices: Vec<u64>,
    /// Run only scenario (or input) I of the seed.
    #[arg(long, value_name = "I")]
    only: Option<u64>,
    /// Directory for reproducers and scratch files.
    #[arg(long, default_value = "fuzz-out")]
    out: PathBuf,
    /// Worker threads (default: rayon's, one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// A run taking longer than this, wall seconds, is a failure (default 5
    /// in a release build, 60 in a debug build).
    #[arg(long)]
    time_limit_s: Option<f64>,
    /// A run still going after this many seconds is stopped at its next
    /// progress report (every 4,096 instants) and reported as `slow`
    /// (default 1.2 x the time limit).
    #[arg(long)]
    cut_s: Option<f64>,
    /// Wall microseconds allowed per allocation change (launch or
    /// preemption) on top of the time limit and the cut (default 20 in a
    /// release build, 200 in a debug build): a schedule whose own rules imply
    /// 10^6 preemptions (Gandiva or Gavel time-slicing jobs of 10^10 s) costs
    /// what its events cost; a run that is slow between changes (rounds that
    /// decide nothing, a pass that costs too much) is still caught. 0: the
    /// plain time limit.
    #[arg(long)]
    per_change_us: Option<f64>,
    /// A run still going after this many seconds (a loop the cut cannot stop,
    /// inside one instant) is reported and the process
    /// exits with status 3 (default 20 x the time limit, at least 60).
    #[arg(long)]
    hard_deadline_s: Option<f64>,
    /// Start no scenario after this many seconds (the CI slice).
    #[arg(long)]
    time_budget_s: Option<f64>,
    /// Report a `slow` run (over the time limit, or cut) with its reproducer
    /// as `NOTE slow` instead of a failure: for a CI slice on a shared
    /// machine, where wall time is noise; hangs inside one instant (the hard
    /// deadline) still fail. Campaigns leave it off.
    #[arg(long)]
    slow_is_note: bool,
    /// Every N-th scenario also runs in a 1-thread and a 2-thread pool and
    /// compares outputs byte for byte (0: never).
    #[arg(long, default_value_t = 50)]
    determinism_every: u64,
    /// Fuzz the trace loaders with random bytes instead of running scenarios.
    #[arg(long)]
    bytes: bool,
    /// Policy kinds to leave out, comma-separated (e.g. kinds with a known
    /// hang, so that a long campaign covers the others); their scenarios are
    /// counted as `skipped-kind`, not run.
    #[arg(long, value_delimiter = ',')]
    skip_kinds: Vec<String>,
    /// Print every scenario's outcome.
    #[arg(long)]
    verbose: bool,
}

fn main() {
    let args = Args::parse();
    if let Some(t) = args.threads {
        rayon::ThreadPoolBuilder::new().num_threads(t).build_global().expect("the rayon pool");
    }
    std::fs::create_dir_all(&args.out).unwrap_or_else(|e| die(&format!("--out {}: {e}", args.out.display())));
    install_quiet_panic_hook();
    let failed = if args.bytes { bytes::run(&args) } else { scenarios::run(&args) };
    std::process::exit(i32::from(failed > 0));
}

fn die(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}

thread_local! {
    /// Where the last panic on this thread happened (the hook records it; the
    /// catch_unwind that follows reports it).
    static PANIC_AT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Records a panic's location and message instead of printing it: every
/// caught panic is reported with its scenario.
fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        PANIC_AT.with(|p| *p.borrow_mut() = at);
    }));
}

/// The payload with which a run's progress callback stops a run past its cut:
/// what it did, and whether only the cap stopped it (`long`: its wall time
/// stayed within the allowance for the launches and preemptions it made).
struct Cut(String, bool);

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(c) = payload.downcast_ref::<Cut>() {
        return c.0.clone();
    }
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic payload)".into());
    let at = PANIC_AT.with(|p| p.borrow().clone());
    format!("panicked at {at}: {msg}")
}

/// The CLI's name of a value-enum value.
fn vname(v: &impl ValueEnum) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// Counters printed at the end: outcome -> count, and detail -> count.
#[derive(Default)]
struct Tally {
    outcomes: BTreeMap<String, u64>,
    details: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, outcome: &str, detail: Option<String>) {
        *self.outcomes.entry(outcome.to_string()).or_default() += 1;
        if let Some(d) = detail {
            *self.details.entry(d).or_default() += 1;
        }
    }
}

mod scenarios {
    use super::*;

    /// What a scenario is: the raw spec (the `dlsched simulate` flags as
    /// keys), the command line that gives it, and the files it reads.
    pub(crate) struct Scenario {
        pub index: u64,
        pub kind: String,
        pub raw: RawSpec,
        /// The `dlsched simulate` arguments, files relative to the scenario's directory.
        pub args: Vec<String>,
        /// File name -> contents, written to the scenario's directory.
        pub files: Vec<(String, String)>,
    }

    const GPU_TYPES: [&str; 9] =
        ["k80", "p100", "v100", "v100-32g", "t4", "a100", "a100-80g", "rtx2080ti", "quadro6000"];
    const NODE_FILE_TYPES: [&str; 7] = ["A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"];
    const PRESETS: [(&str, u32); 8] = [
        ("lab16", 40),
        ("ldwp-testbed", 20),
        ("philly", 2),
        ("alibaba-openb", 2),
        ("helios-venus", 2),
        ("helios-earth", 2),
        ("helios-saturn", 1),
        ("helios-uranus", 1),
    ];
    /// (model, per-GPU batches of the builtin profile database).
    const MODELS: [(&str, &[u32]); 8] = [
        ("resnet18-cifar10", &[32, 64, 128, 256]),
        ("resnet50-imagenet", &[16, 32, 64, 128]),
        ("lstm-wikitext2", &[10, 20, 40]),
        ("bert-squad", &[4, 8, 12]),
        ("transformer-multi30k", &[16, 32, 64]),
        ("autoencoder-ml20m", &[512, 1024]),
        ("vgg16-imagenet", &[8, 16, 32]),
        ("a3c-pong", &[20]),
    ];

    fn pick_weighted<'a, R: Rng>(rng: &mut R, items: &'a [(&'a str, u32)]) -> &'a str {
        let total: u32 = items.iter().map(|x| x.1).sum();
        let mut k = rng.gen_range(0..total);
        for (name, w) in items {
            if k < *w {
                return name;
            }
            k -= w;
        }
        items[0].0
    }

    /// A number as the CLI prints it: three decimals at most.
    fn num(x: f64) -> f64 {
        (x * 1000.0).round() / 1000.0
    }

    fn put(raw: &mut RawSpec, args: &mut Vec<String>, key: &str, v: Value) {
        args.push(format!("--{}", key.replace('_', "-")));
        args.push(v.to_string());
        raw.insert(key.into(), v);
    }

    /// The cluster: flags and files. Returns (GPUs of one partition at most
    /// (a rough figure for job widths), VC names when there are VCs).
    fn cluster<R: Rng>(
        rng: &mut R,
        raw: &mut RawSpec,
        args: &mut Vec<String>,
        files: &mut Vec<(String, String)>,
        trace: bool,
        k80_only: bool,
    ) -> (u32, Vec<String>) {
        if k80_only {
            // GENIE's K80 ground truth: lab16 or K80 nodes.
            if rng.gen_bool(0.6) {
                put(raw, args, "cluster", Value::Str("lab16".into()));
                return (16, vec![]);
            }
            let (n, g) = (rng.gen_range(1..=4u32), [1u32, 2, 4, 8][rng.gen_range(0..4)]);
            put(raw, args, "nodes", Value::UInt(n.into()));
            put(raw, args, "gpus_per_node", Value::UInt(g.into()));
            put(raw, args, "gpu_type", Value::Str("k80".into()));
            return (n * g, vec![]);
        }
        match rng.gen_range(0..100) {
            0..40 => {
                let p = pick_weighted(rng, &PRESETS);
                put(raw, args, "cluster", Value::Str(p.into()));
                let gpus = match p {
                    "lab16" => 16,
                    "ldwp-testbed" => 40,
                    "helios-venus" => 64,
                    _ => 64,
                };
                (gpus, vec![])
            }
            40..70 => {
                let n = if rng.gen_bool(0.8) { rng.gen_range(1..=6u32) } else { rng.gen_range(1..=40) };
                let g = if rng.gen_bool(0.8) { [1u32, 2, 4, 8][rng.gen_range(0..4)] } else { rng.gen_range(1..=16) };
                put(raw, args, "nodes", Value::UInt(n.into()));
                put(raw, args, "gpus_per_node", Value::UInt(g.into()));
                if rng.gen_bool(0.7) {
                    let t = GPU_TYPES[rng.gen_range(0..GPU_TYPES.len())];
                    put(raw, args, "gpu_type", Value::Str(t.into()));
                }
                (n * g, vec![])
            }
            70..88 => {
                // A heterogeneous node list: several GPU types and sizes.
                let nodes = rng.gen_range(1..=8);
                let types: Vec<&str> = (0..rng.gen_range(1..=3))
                    .map(|_| NODE_FILE_TYPES[rng.gen_range(0..NODE_FILE_TYPES.len())])
                    .collect();
                let mut text = String::from("sn,cpu_milli,memory_mib,gpu,model\n");
                let mut total = 0;
                for i in 0..nodes {
                    let g = [1u32, 2, 4, 8][rng.gen_range(0..4)];
                    let t = types[rng.gen_range(0..types.len())];
                    total += g;
                    text.push_str(&format!("node-{i},96000,786432,{g},{t}\n"));
                    if rng.gen_bool(0.1) {
                        text.push_str(&format!("cpu-{i},64000,262144,0,\n"));
                    }
                }
                files.push(("nodes.csv".into(), text));
                put(raw, args, "nodes_file", Value::Str("nodes.csv".into()));
                (total, vec![])
            }
            _ if trace => {
                // VC partitions (the CLI takes them with a trace only).
                let n = rng.gen_range(1..=4);
                let mut text = String::from("vc,nodes,gpus_per_node\n");
                let mut names = Vec::new();
                let mut most = 0;
                for i in 0..n {
                    let (k, g) = (rng.gen_range(1..=4u32), [1u32, 2, 4, 8][rng.gen_range(0..4)]);
                    most = most.max(k * g);
                    names.push(format!("vc{i}"));
                    text.push_str(&format!("vc{i},{k},{g}\n"));
                }
                files.push(("vcs.csv".into(), text));
                put(raw, args, "vcs", Value::Str("vcs.csv".into()));
                if rng.gen_bool(0.2) {
                    put(raw, args, "vc_scale", Value::Float(num(rng.gen_range(0.1..=1.0))));
                }
                (most, names)
            }
            _ => {
                put(raw, args, "cluster", Value::Str("lab16".into()));
                (16, vec![])
            }
        }
    }

    /// A duration, s: zero, tiny, ordinary, long or (when `huge`) huge, up
    /// to the bound.
    fn duration<R: Rng>(rng: &mut R, huge: bool) -> String {
        match rng.gen_range(0..if huge { 100 } else { 93 }) {
            0..5 => "0".into(),
            5..12 => format!("{}", num(rng.gen_range(0.001..2.0))),
            12..80 => format!("{}", rng.gen_range(1..7200u64)),
            80..93 => format!("{}", rng.gen_range(7200..2_000_000u64)),
            93..98 => format!("{}", rng.gen_range(1_000_000_000..100_000_000_000u64)),
            _ => "100000000000".into(),
        }
    }

    /// A jobs-csv trace of `n` jobs: ties in submit time, zero, tiny and huge
    /// durations, widths up to a little past the cluster, some with a model
    /// and batch, some with deadlines, VCs when the cluster has them.
    fn trace<R: Rng>(rng: &mut R, n: usize, max_gpus: u32, vcs: &[String]) -> String {
        let models = rng.gen_bool(0.4);
        let deadlines = rng.gen_bool(0.15);
        let mut header = "job_id,submit_time,duration,gpu_num".to_string();
        if !vcs.is_empty() {
            header.push_str(",vc");
        }
        if models {
            header.push_str(",model,local_bsz");
        }
        if deadlines {
            header.push_str(",deadline");
        }
        let mut text = header + "\n";
        let mut t: u64 = 0;
        let huge_gap = rng.gen_bool(0.05);
        // Huge durations (10^9 s up to the bound) in one trace of ten.
        let huge = rng.gen_bool(0.1);
        for i in 0..n {
            // Ties: half the jobs arrive with the one before.
            if i > 0 && !rng.gen_bool(0.5) {
                t += if huge_gap && rng.gen_bool(0.2) {
                    rng.gen_range(1..1_000_000_000)
                } else {
                    rng.gen_range(1..3600)
                };
            }
            let d = duration(rng, huge);
            let g = match rng.gen_range(0..100) {
                0..3 => 0,
                3..60 => 1,
                60..95 => rng.gen_range(1..=max_gpus.max(1)),
                _ => rng.gen_range(1..=max_gpus.max(1) + 4),
            };
            text.push_str(&format!("j{i},{t},{d},{g}"));
            if !vcs.is_empty() {
                let vc =
                    if rng.gen_bool(0.05) { "nosuch".to_string() } else { vcs[rng.gen_range(0..vcs.len())].clone() };
                text.push_str(&format!(",{vc}"));
            }
            if models {
                if rng.gen_bool(0.8) {
                    let (m, b) = MODELS[rng.gen_range(0..MODELS.len())];
                    text.push_str(&format!(",{m},{}", b[rng.gen_range(0..b.len())]));
                } else {
                    text.push_str(",,");
                }
            }
            if deadlines {
                let dl = t + rng.gen_range(0..20_000);
                text.push_str(&format!(",{dl}"));
            }
            text.push('\n');
        }
        text
    }

    /// The variants of an enum-valued option, found by asking serde to parse a
    /// value no enum has (its error lists `expected one of ...`).
    fn variants(kind: PolicyName, path: &[String]) -> Vec<String> {
        let mut v = serde_json::to_value(kind.default_spec()).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.remove("kind");
        }
        let mut slot = &mut v;
        for p in path {
            slot = match slot.get_mut(p.as_str()) {
                Some(s) => s,
                None => return vec![],
            };
        }
        *slot = serde_json::Value::String("\u{1}no-such-variant".into());
        let Some((_, msg)) = kind.options_error(v) else { return vec![] };
        let Some(list) = msg.split("expected one of ").nth(1).or_else(|| msg.split("expected ").nth(1)) else {
            return vec![];
        };
        list.split(", ")
            .map(|s| s.trim().trim_start_matches("or ").trim_matches('`').to_string())
            .filter(|s| !s.is_empty() && !s.contains(' '))
            .collect()
    }

    /// Options of `kind` drawn around their defaults: each leaf of the kind's
    /// default spec (nested ones dotted) is changed with probability 0.3.
    fn policy_options<R: Rng>(rng: &mut R, kind: PolicyName) -> Vec<(String, String)> {
        fn walk<R: Rng>(
            rng: &mut R,
            kind: PolicyName,
            path: &mut Vec<String>,
            v: &serde_json::Value,
            out: &mut Vec<(String, String)>,
        ) {
            if let serde_json::Value::Object(m) = v {
                for (k, x) in m {
                    if path.is_empty() && k == "kind" {
                        continue;
                    }
                    path.push(k.clone());
                    walk(rng, kind, path, x, out);
                    path.pop();
                }
                return;
            }
            // Options that default to none (a file, a per-kind choice) less often.
            if !rng.gen_bool(if v.is_null() { 0.1 } else { 0.3 }) {
                return;
            }
            let name = path.join(".");
            let value = match v {
                serde_json::Value::Bool(b) => Some((!b).to_string()),
                serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => {
                    let d = n.as_i64().unwrap_or(i64::MAX / 4).clamp(0, 1 << 40);
                    Some(
                        match rng.gen_range(0..6) {
                            0 => 0,
                            1 => 1,
                            2 => d / 2,
                            3 => d.saturating_mul(2),
                            4 => d + 1,
                            _ => rng.gen_range(0..=d.saturating_mul(2) + 3),
                        }
                        .to_string(),
                    )
                }
                serde_json::Value::Number(n) => {
                    let d = n.as_f64().unwrap_or(1.0);
                    let x: f64 = match rng.gen_range(0..6) {
                        0 => 0.0,
                        1 => d * 0.5,
                        2 => d * 2.0,
                        3 => rng.gen_range(0.0..1.0),
                        4 => d * rng.gen_range(0.1..3.0),
                        _ => rng.gen_range(0.0..(d.abs() * 2.0 + 1.0)),
                    };
                    let x = num(x);
                    // As the CLI would print it, with a decimal point.
                    Some(if x.fract() == 0.0 { format!("{x:.1}") } else { format!("{x}") })
                }
                serde_json::Value::String(_) | serde_json::Value::Null => {
                    let vs = variants(kind, path);
                    (!vs.is_empty()).then(|| vs[rng.gen_range(0..vs.len())].clone())
                }
                _ => None,
            };
            if let Some(val) = value {
                out.push((name, val));
            }
        }
        let mut out = Vec::new();
        let v = serde_json::to_value(kind.default_spec()).unwrap_or_default();
        walk(rng, kind, &mut Vec::new(), &v, &mut out);
        out
    }

    /// Scenario `index` of `seed`.
    pub(crate) fn draw(seed: u64, index: u64) -> Scenario {
        let mut rng = dlsched::rng::stream(seed, &format!("fuzz-scenario-{index}"));
        let rng = &mut rng;
        let kind_name = KINDS[rng.gen_range(0..KINDS.len())];
        let name = <PolicyName as ValueEnum>::from_str(kind_name, false).ok();
        let (mut raw, mut args, mut files) = (RawSpec::new(), Vec::new(), Vec::new());
        // `iawp` is `--policy fifo --placement iawp` on the command line.
        let (policy, name) = match name {
            Some(n) => (kind_name, n),
            None => ("fifo", PolicyName::Fifo),
        };
        let iawp = kind_name == "iawp";
        put(&mut raw, &mut args, "policy", Value::Str(policy.into()));
        let moldable = name.genie().is_some()
            || name.rifling().is_some()
            || name == PolicyName::MemoryEfficiency
            || (rng.gen_bool(0.03));
        let rate = match rng.gen_range(0..10) {
            0..5 => "trace",
            5..8 => "table",
            8 => "genie",
            _ => "genie-k80",
        };
        let k80 = rate == "genie-k80" && rng.gen_bool(0.9);
        let trace_workload = !moldable && rng.gen_bool(0.55) || moldable && rng.gen_bool(0.15);
        let (max_gpus, vcs) = cluster(rng, &mut raw, &mut args, &mut files, trace_workload && !moldable, k80);
        let n_jobs = if rng.gen_bool(0.9) { rng.gen_range(1..=30) } else { rng.gen_range(31..=100) };
        if trace_workload {
            files.push(("trace.csv".into(), trace(rng, n_jobs, max_gpus, &vcs)));
            put(&mut raw, &mut args, "trace", Value::Str("trace.csv".into()));
        }
        if moldable {
            put(&mut raw, &mut args, "workload", Value::Str("genie".into()));
            put(&mut raw, &mut args, "hours", Value::Float(num(rng.gen_range(0.05..3.0))));
            if rng.gen_bool(0.7) {
                put(&mut raw, &mut args, "tasks", Value::UInt(n_jobs as u64));
            } else {
                put(&mut raw, &mut args, "jobs_per_hour", Value::Float(num(rng.gen_range(1.0..30.0))));
            }
            if rng.gen_bool(0.2) {
                put(&mut raw, &mut args, "ect", Value::Str("true".into()));
            }
            if name.genie().is_some() {
                if rng.gen_bool(0.3) {
                    put(&mut raw, &mut args, "theta", Value::Float(num(rng.gen_range(0.0..2.0))));
                }
                if rng.gen_bool(0.2) {
                    raw.insert("genie_best_fit".into(), Value::Bool(true));
                    args.push("--genie-best-fit".into());
                }
            }
            if name == PolicyName::RiflingFrozen || (name == PolicyName::Rifling && rng.gen_bool(0.2)) {
                let t = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/rifling-lab16.json");
                put(&mut raw, &mut args, "rifling_table", Value::Str(t.display().to_string()));
            }
        } else if !trace_workload {
            put(&mut raw, &mut args, "jobs", Value::UInt(n_jobs as u64));
            if rng.gen_bool(0.7) {
                put(&mut raw, &mut args, "load", Value::Float(num(rng.gen_range(0.1..3.0))));
            } else {
                put(&mut raw, &mut args, "jobs_per_hour", Value::Float(num(rng.gen_range(0.5..200.0))));
            }
            if rng.gen_bool(0.4) {
                put(&mut raw, &mut args, "max_job_gpus", Value::UInt(rng.gen_range(1..=max_gpus.max(1) + 2).into()));
            }
            if rng.gen_bool(0.5) {
                let d = match rng.gen_range(0..4) {
                    0 => rng.gen_range(1..600u64),
                    1 => rng.gen_range(600..100_000),
                    2 => 0, // no cut: the Philly list's tail, up to 60 days
                    _ if rng.gen_bool(0.3) => rng.gen_range(100_000..100_000_000_000),
                    _ => rng.gen_range(100_000..10_000_000),
                };
                put(&mut raw, &mut args, "max_duration", Value::UInt(d));
            }
        }
        // Queue and placement flags where the kind has them.
        let has =
            |opt: &str| serde_json::to_value(name.default_spec()).ok().and_then(|v| v.get(opt).cloned()).is_some();
        let placements =
            ["consolidate", "first-fit", "recorded", "share-first-fit", "share-best-fit", "memeff-pack", "fgd"];
        let mut sharing = iawp;
        if iawp {
            put(&mut raw, &mut args, "placement", Value::Str("iawp".into()));
        } else if has("placement") && rng.gen_bool(0.6) {
            let p = placements[rng.gen_range(0..placements.len())];
            sharing = p.starts_with("share") || p == "memeff-pack" || p == "fgd";
            put(&mut raw, &mut args, "placement", Value::Str(p.into()));
        }
        if has("backfill") && rng.gen_bool(0.4) {
            raw.insert("backfill".into(), Value::Bool(true));
            args.push("--backfill".into());
        } else if !trace_workload
            && !moldable
            && matches!(name, PolicyName::Fifo | PolicyName::Sjf)
            && !iawp
            && rng.gen_bool(0.3)
        {
            raw.insert("backfill".into(), Value::Bool(false));
            args.push("--strict".into());
        }
        if (sharing || name == PolicyName::MemoryEfficiency) && rng.gen_bool(0.5) {
            put(&mut raw, &mut args, "max_tenants", Value::UInt(rng.gen_range(1..=4)));
            put(&mut raw, &mut args, "mem_headroom", Value::Float(num(rng.gen_range(0.0..0.5))));
        }
        if name == PolicyName::LdwpFrozen || (name == PolicyName::Ldwp && rng.gen_bool(0.2)) {
            let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/ldwp-lab16.json");
            args.push("--policy-opt".into());
            args.push(format!("model={}", m.display()));
            raw.insert(format!("{}model", raw::POLICY_OPT), Value::Str(m.display().to_string()));
        }
        if !iawp {
            for (opt, v) in policy_options(rng, name) {
                let key = format!("{}{opt}", raw::POLICY_OPT);
                if raw.contains_key(&key) || opt == "placement" || opt == "backfill" {
                    continue;
                }
                args.push("--policy-opt".into());
                args.push(format!("{opt}={v}"));
                raw.insert(key, raw::parse_scalar(&v));
            }
        }
        if rate != "trace" {
            put(&mut raw, &mut args, "rate_model", Value::Str(rate.into()));
        }
        let ckpt = ["none", "helios-table", "gandiva"][rng.gen_range(0..3)];
        if ckpt != "none" {
            put(&mut raw, &mut args, "checkpoint", Value::Str(ckpt.into()));
        }
        if rng.gen_bool(0.2) {
            put(&mut raw, &mut args, "tie_order", Value::Str("numpy2-avx512".into()));
        }
        if rng.gen_bool(0.05) {
            put(&mut raw, &mut args, "coloc_unmeasured", Value::Str("learned".into()));
        }
        let sample = [0u64, 1, 60, 600, 3600][rng.gen_range(0..5)];
        put(&mut raw, &mut args, "sample_interval", Value::UInt(sample));
        put(&mut raw, &mut args, "seed", Value::UInt(rng.gen_range(0..1000)));
        Scenario { index, kind: kind_name.to_string(), raw, args, files }
    }

    /// The scenario's raw spec with its files under `dir`, as the CLI run from
    /// `dir` would read them.
    fn raw_in(s: &Scenario, dir: &Path) -> RawSpec {
        let mut raw = s.raw.clone();
        for k in ["trace", "vcs", "nodes_file"] {
            if let Some(Value::Str(f)) = raw.get(k) {
                let p = dir.join(f);
                raw.insert(k.into(), Value::Str(p.display().to_string()));
            }
        }
        raw
    }

    /// How one scenario ended.
    pub(crate) enum Outcome {
        Pass,
        /// A clean refusal (class, message).
        Config(String, String),
        /// A failure (class, what).
        Fail(String, String),
    }

    /// jobs.csv and summary.json of a report, for the determinism check.
    fn fingerprint(r: &RunReport) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = dlsched::metrics::export::write_jobs_csv(&r.output, &mut out);
        out.extend(serde_json::to_vec(&r.summary).unwrap_or_default());
        out
    }

    /// The wall-time bound of a run: `base` plus `per_change` for every
    /// allocation change (launch or preemption) the run has made.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Bound {
        pub(crate) base: Duration,
        pub(crate) per_change: Duration,
        /// Never more than this (below the hard deadline, so that a run with
        /// many changes is cut, not taken for a hang).
        pub(crate) max: Duration,
    }

    impl Bound {
        pub(crate) fn uncapped(&self, changes: u64) -> Duration {
            self.base + self.per_change.saturating_mul(u32::try_from(changes).unwrap_or(u32::MAX))
        }

        pub(crate) fn at(&self, changes: u64) -> Duration {
            (self.base + self.per_change.saturating_mul(u32::try_from(changes).unwrap_or(u32::MAX))).min(self.max)
        }
    }

    fn one_run(s: &Scenario, dir: &Path, artefacts: &Artefacts, cut: Bound) -> Result<RunReport, RunError> {
        let start = Instant::now();
        let raw = raw_in(s, dir);
        let spec = raw::to_run_spec(&raw, Origin::CommandLine, None)?;
        let progress = |p: dlsched::engine::Progress| {
            if start.elapsed() > cut.at(p.changes) {
                let long = start.elapsed() <= cut.uncapped(p.changes);
                std::panic::panic_any(Cut(
                    format!(
                        "cut after {:.1} s at simulated time {} s, {}/{} jobs completed, {} launches and preemptions",
                        start.elapsed().as_secs_f64(),
                        p.now.as_ms() / 1000,
                        p.completed,
                        p.total,
                        p.changes
                    ),
                    long,
                ));
            }
        };
        // FUZZ_UNCHECKED=1: the run without the invariant checks (as `dlsched simulate` runs it).
        if std::env::var_os("FUZZ_UNCHECKED").is_some() {
            return dlsched::experiment::run_one_with_artefacts(&spec, artefacts, progress);
        }
        run_one_checked(&spec, artefacts, progress)
    }

    fn classify_error(e: &RunError) -> Outcome {
        match e {
            RunError::Config(c) => Outcome::Config("config".into(), c.to_string()),
            RunError::Trace(t) => Outcome::Config("input".into(), t.to_string()),
            RunError::Sim(s) => {
                let class = match s {
                    SimError::InvalidDecision { .. } => "sim-error:invalid-decision",
                    SimError::ModelFailure { .. } => "sim-error:model-failure",
                    SimError::Internal { .. } => "sim-error:internal",
                    SimError::InvalidTimer { .. } => "sim-error:invalid-timer",
                    SimError::Invariant { .. } => "sim-error:invariant",
                    // The engine's own end-of-run check: admitted jobs left unfinished.
                    SimError::Unfinished { .. } => "unfinished",
                    // The engine's progress guard: a pass that never ends.
                    SimError::NoProgress { .. } => "hang:no-progress",
                    // The net-progress watch: a cycle across instants.
                    SimError::NoNetProgress { .. } => "hang:no-net-progress",
                    #[allow(unreachable_patterns)]
                    _ => "sim-error:other",
                };
                Outcome::Fail(class.into(), s.to_string())
            }
            RunError::Output(o) => Outcome::Fail("output-error".into(), o.to_string()),
            #[allow(unreachable_patterns)]
            other => Outcome::Fail("run-error:other".into(), other.to_string()),
        }
    }

    /// Admitted = completed + refused with a reason: every job the run
    /// admitted completed, the summary's counts add up.
    fn check_report(r: &RunReport) -> Result<(), String> {
        let admitted = r.output.jobs.len() as u64;
        let unfinished: Vec<String> = r
            .output
            .jobs
            .iter()
            .filter(|(_, st)| !matches!(st, JobState::Completed(_)))
            .map(|(j, st)| format!("{} ({} GPUs, {st:?})", j.name, j.gpus))
            .collect();
        let s = &r.summary;
        if !unfinished.is_empty() {
            let shown: Vec<&str> = unfinished.iter().take(5).map(String::as_str).collect();
            return Err(format!(
                "{} of {admitted} admitted jobs unfinished: {}{}",
                unfinished.len(),
                shown.join(", "),
                if unfinished.len() > 5 { ", ..." } else { "" }
            ));
        }
        if s.jobs_completed != admitted
            || s.jobs_skipped != r.skipped.len() as u64
            || s.jobs_total != admitted + s.jobs_skipped
        {
            return Err(format!(
                "summary counts disagree with the job table: total {}, completed {}, skipped {}, unfinished {}; table {admitted} admitted, {} skipped rows",
                s.jobs_total,
                s.jobs_completed,
                s.jobs_skipped,
                s.jobs_unfinished,
                r.skipped.len()
            ));
        }
        let by_reason: u64 = s.jobs_skipped_by_reason.values().sum();
        if by_reason != s.jobs_skipped {
            return Err(format!("{} skipped rows but {by_reason} counted by reason", s.jobs_skipped));
        }
        Ok(())
    }

    /// Runs scenario `s` (files under `dir`): the outcome and its wall time.
    pub(crate) fn execute(
        s: &Scenario,
        dir: &Path,
        artefacts: &Artefacts,
        determinism: bool,
        cut: Bound,
    ) -> (Outcome, Duration, u64) {
        let start = Instant::now();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one_run(s, dir, artefacts, cut)));
        let took = start.elapsed();
        let changes = match &res {
            Ok(Ok(r)) => r.output.stats.launches + r.output.stats.preemptions,
            _ => 0,
        };
        let outcome = match res {
            // Cut by the cap alone: a schedule of tens of millions of
            // changes, each at the allowed cost (noted, not failed).
            Err(p) if p.downcast_ref::<Cut>().is_some_and(|c| c.1) => Outcome::Fail("long".into(), panic_text(p)),
            Err(p) if p.is::<Cut>() => Outcome::Fail("slow".into(), panic_text(p)),
            Err(p) => Outcome::Fail("panic".into(), panic_text(p)),
            Ok(Err(e)) => classify_error(&e),
            Ok(Ok(r)) => match check_report(&r) {
                Err(e) => {
                    // The run's job table beside the reproducer.
                    let mut jobs = Vec::new();
                    let _ = dlsched::metrics::export::write_jobs_csv(&r.output, &mut jobs);
                    let _ = std::fs::write(dir.join("run-jobs.csv"), jobs);
                    Outcome::Fail("unfinished".into(), e)
                }
                Ok(()) if determinism => {
                    let first = fingerprint(&r);
                    let mut again = Vec::new();
                    for threads in [1, 2] {
                        // From a thread of no pool: a rayon worker calling
                        // another pool's `install` keeps busy meanwhile,
                        // running other scenarios inside this one's wait.
                        let out = std::thread::scope(|scope| {
                            let h =
                                scope.spawn(|| match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                                    Ok(pool) => pool.install(|| {
                                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                            one_run(s, dir, artefacts, cut)
                                        }))
                                    }),
                                    Err(e) => Ok(Err(RunError::Output(std::io::Error::other(e.to_string())))),
                                });
                            h.join().unwrap_or_else(Err)
                        });
                        again.push((threads, out));
                    }
                    let mut verdict = Outcome::Pass;
                    for (threads, out) in again {
                        match out {
                            Ok(Ok(r2)) if fingerprint(&r2) == first => {}
                            Ok(Ok(_)) => {
                                verdict = Outcome::Fail(
                                    "nondeterministic".into(),
                                    format!(
                                        "jobs.csv or summary.json differ between runs (rerun in a {threads}-thread pool)"
                                    ),
                                );
                            }
                            Ok(Err(e)) => {
                                verdict = Outcome::Fail(
                                    "nondeterministic".into(),
                                    format!("the rerun in a {threads}-thread pool failed: {e}"),
                                );
                            }
                            // A rerun past the cut is slow, not different.
                            Err(p) if p.is::<Cut>() => {
                                verdict = Outcome::Fail(
                                    "slow".into(),
                                    format!("the rerun in a {threads}-thread pool was {}", panic_text(p)),
                                )
                            }
                            Err(p) => {
                                verdict = Outcome::Fail(
                                    "nondeterministic".into(),
                                    format!("the rerun in a {threads}-thread pool {}", panic_text(p)),
                                )
                            }
                        }
                    }
                    verdict
                }
                Ok(()) => Outcome::Pass,
            },
        };
        (outcome, took, changes)
    }

    /// Writes the scenario's files into `dir`.
    fn write_files(s: &Scenario, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for (name, text) in &s.files {
            std::fs::write(dir.join(name), text)?;
        }
        Ok(())
    }

    fn shell_quote(a: &str) -> String {
        if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:+".contains(c)) {
            a.to_string()
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    }

    /// The `dlsched simulate` command of a scenario (run from its directory).
    pub(crate) fn command(s: &Scenario) -> String {
        let args: Vec<String> = s.args.iter().map(|a| shell_quote(a)).collect();
        format!("dlsched simulate {}", args.join(" "))
    }

    /// Writes `OUT/fail-<i>/`: files, repro.sh, error.txt, spec.json.
    pub(crate) fn write_reproducer(
        out: &Path,
        s: &Scenario,
        seed: u64,
        class: &str,
        what: &str,
        took: Duration,
    ) -> PathBuf {
        let dir = out.join(format!("fail-{}", s.index));
        let _ = write_files(s, &dir);
        let repro = format!(
            "#!/bin/sh\n# fuzz_scenarios --seed {seed} --only {} ({}): {class}\n# or: cargo run --release --example fuzz_scenarios -- --seed {seed} --only {} --out DIR\ncd \"$(dirname \"$0\")\" && {}\n",
            s.index,
            s.kind,
            s.index,
            command(s)
        );
        let _ = std::fs::write(dir.join("repro.sh"), repro);
        let _ = std::fs::write(
            dir.join("error.txt"),
            format!(
                "{class} after {:.3} s (scenario {} of seed {seed}, kind {})\n{what}\n",
                took.as_secs_f64(),
                s.index,
                s.kind
            ),
        );
        let raw = raw_in(s, &dir);
        let spec = raw::to_run_spec(&raw, Origin::CommandLine, None)
            .map(|spec| serde_json::to_string_pretty(&spec).unwrap_or_default())
            .unwrap_or_else(|e| format!("(no spec: {e})"));
        let _ = std::fs::write(dir.join("spec.json"), spec);
        dir
    }

    /// In-flight scenarios for the watchdog: index -> (start, kind, command).
    type InFlight = Mutex<BTreeMap<u64, (Instant, String, String)>>;

    pub(crate) fn run(a: &Args) -> u64 {
        let time_limit = a.time_limit_s.unwrap_or(if cfg!(debug_assertions) { 60.0 } else { 5.0 });
        let per_change_us = a.per_change_us.unwrap_or(if cfg!(debug_assertions) { 200.0 } else { 20.0 });
        let per_change = Duration::from_secs_f64(per_change_us.max(0.0) * 1e-6);
        let hard = a.hard_deadline_s.unwrap_or((time_limit * 20.0).max(60.0));
        let max = Duration::from_secs_f64(hard * 0.8);
        let cut = Bound { base: Duration::from_secs_f64(a.cut_s.unwrap_or(time_limit * 1.2)), per_change, max };
        let limit = Bound { base: Duration::from_secs_f64(time_limit), per_change, max };
        let indices: Vec<u64> = match (a.only, a.count, a.time_budget_s) {
            (Some(i), _, _) => vec![i],
            (None, Some(n), _) => (a.start..a.start + n).collect(),
            (None, None, Some(_)) => (a.start..a.start + 10_000_000).collect(),
            (None, None, None) => (a.start..a.start + 1000).collect(),
        };
        let indices: Vec<u64> = indices.into_iter().filter(|i| !a.skip_indices.contains(i)).collect();
        let total = indices.len();
        // Workers take the next index in order, so that at a hang every index
        // below the lowest one in flight is done (the resume point).
        let next = AtomicU64::new(0);
        let started = Instant::now();
        let budget = a.time_budget_s.map(Duration::from_secs_f64);
        let artefacts = Artefacts::default();
        let in_flight: Arc<InFlight> = Arc::new(Mutex::new(BTreeMap::new()));
        let tally = Mutex::new(Tally::default());
        let failures = Mutex::new(Vec::<String>::new());
        let done = AtomicU64::new(0);
        let stop = Arc::new(AtomicBool::new(false));
        let scratch = a.out.join("scratch");
        let failures_file = a.out.join("failures.txt");
        let _ = std::fs::remove_file(&failures_file);
        // The watchdog: says when a run passes the time limit, and ends the
        // process when one passes the hard deadline (a thread cannot be killed).
        let watchdog = {
            let (in_flight, stop, out, seed, a_start) =
                (in_flight.clone(), stop.clone(), a.out.clone(), a.seed, a.start);
            std::thread::spawn(move || {
                let mut warned = std::collections::BTreeSet::new();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    let now = Instant::now();
                    let list: Vec<(u64, Duration, String, String)> = in_flight
                        .lock()
                        .map(|m| m.iter().map(|(i, (t, k, c))| (*i, now - *t, k.clone(), c.clone())).collect())
                        .unwrap_or_default();
                    for (i, took, kind, cmd) in list {
                        if took.as_secs_f64() > time_limit && warned.insert(i) {
                            eprintln!("slow: scenario {i} ({kind}) running for over {time_limit} s: {cmd}");
                        }
                        if took.as_secs_f64() > hard {
                            let s = draw(seed, i);
                            let dir = write_reproducer(
                                &out,
                                &s,
                                seed,
                                "hang",
                                &format!("still running after {hard} s"),
                                took,
                            );
                            eprintln!(
                                "HANG: scenario {i} ({kind}) still running after {:.0} s; reproducer {}\n{cmd}",
                                took.as_secs_f64(),
                                dir.display()
                            );
                            let mut f = std::fs::OpenOptions::new()
                                .create(true)
                                .append(true)
                                .open(out.join("failures.txt"))
                                .ok();
                            if let Some(f) = f.as_mut() {
                                let _ = writeln!(f, "{i}\thang\t{kind}\tstill running after {hard} s\t{cmd}");
                            }
                            let lowest = in_flight.lock().ok().and_then(|m| m.keys().next().copied()).unwrap_or(i);
                            println!(
                                "hard deadline: scenario {i} hung; stopping. Every scenario below {lowest} is done; carry on with --start {lowest} --skip-indices {i} (and --count reduced by {})",
                                lowest.saturating_sub(a_start)
                            );
                            std::process::exit(3);
                        }
                    }
                }
            })
        };
        let progress_every = Duration::from_secs(10);
        let last_progress = Mutex::new(Instant::now());
        let workers = rayon::current_num_threads();
        (0..workers).into_par_iter().for_each(|_| {
            loop {
                let Some(&i) = indices.get(next.fetch_add(1, Ordering::Relaxed) as usize) else { return };
                if budget.is_some_and(|b| started.elapsed() > b) {
                    return;
                }
                let s = draw(a.seed, i);
                if a.skip_kinds.contains(&s.kind) {
                    tally
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .add("skipped-kind", Some(format!("skipped-kind\t{}", s.kind)));
                    done.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let dir = scratch.join(format!("s-{i}"));
                if let Err(e) = write_files(&s, &dir) {
                    die(&format!("{}: {e}", dir.display()));
                }
                let cmd = command(&s);
                if let Ok(mut m) = in_flight.lock() {
                    m.insert(i, (Instant::now(), s.kind.clone(), cmd.clone()));
                }
                let determinism = a.determinism_every > 0 && i % a.determinism_every == 0;
                let (mut outcome, took, changes) = execute(&s, &dir, &artefacts, determinism, cut);
                if let Ok(mut m) = in_flight.lock() {
                    m.remove(&i);
                }
                if matches!(outcome, Outcome::Pass) && took > limit.at(changes) {
                    outcome = Outcome::Fail(
                        "slow".into(),
                        format!(
                            "took {:.2} s, over the limit of {time_limit} s + {per_change_us} us x {changes} launches and preemptions",
                            took.as_secs_f64()
                        ),
                    );
                }
                // The tally's lock ends with this block (the progress line below takes it again).
                let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
                match &outcome {
                    Outcome::Pass => {
                        t.add("pass", None);
                        drop(t);
                        if a.verbose {
                            println!("{i}\tpass\t{}\t{:.3} s", s.kind, took.as_secs_f64());
                        }
                    }
                    Outcome::Config(class, msg) => {
                        // Count by kind and by the message's start (numbers cut).
                        let short: String = msg.chars().take(90).filter(|c| !c.is_ascii_digit()).collect();
                        t.add(class, Some(format!("{class}\t{}\t{short}", s.kind)));
                        drop(t);
                        if a.verbose {
                            println!("{i}\t{class}\t{}\t{msg}", s.kind);
                        }
                    }
                    Outcome::Fail(class, what) => {
                        let label =
                            if (a.slow_is_note && class == "slow") || class == "long" { "NOTE" } else { "FAIL" };
                        t.add(&format!("{label} {class}"), Some(format!("{label} {class}\t{}", s.kind)));
                        drop(t);
                        let repro = write_reproducer(&a.out, &s, a.seed, class, what, took);
                        // The failing run's job table, where it wrote one.
                        let _ = std::fs::copy(dir.join("run-jobs.csv"), repro.join("run-jobs.csv"));
                        let dir = repro;
                        let line = format!(
                            "{i}\t{class}\t{}\t{:.3} s\t{}\t{}",
                            s.kind,
                            took.as_secs_f64(),
                            what.replace('\n', " "),
                            cmd
                        );
                        println!("{label} {line}\n  reproducer: {}", dir.display());
                        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&failures_file) {
                            let _ = writeln!(f, "{label} {line}");
                        }
                        if label == "FAIL" {
                            failures.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                        }
                    }
                }
                let _ = std::fs::remove_dir_all(scratch.join(format!("s-{i}")));
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Ok(mut last) = last_progress.try_lock()
                    && last.elapsed() > progress_every
                {
                    *last = Instant::now();
                    let t = tally.lock().map(|t| format!("{:?}", t.outcomes)).unwrap_or_default();
                    eprintln!("[{:.0} s] {n}/{total} scenarios: {t}", started.elapsed().as_secs_f64());
                }
            }
        });
        stop.store(true, Ordering::Relaxed);
        let _ = watchdog.join();
        let _ = std::fs::remove_dir(&scratch);
        let t = tally.into_inner().unwrap_or_else(|e| e.into_inner());
        let n = done.load(Ordering::Relaxed);
        let failed: u64 = t.outcomes.iter().filter(|(k, _)| k.starts_with("FAIL")).map(|(_, v)| v).sum();
        let skipped = t.outcomes.get("skipped-kind").copied().unwrap_or(0);
        println!("\n# details (class, kind, message start: count)");
        for (d, c) in &t.details {
            println!("{c:>8}  {d}");
        }
        println!("\n# outcomes");
        for (o, c) in &t.outcomes {
            println!("{c:>8}  {o}");
        }
        println!(
            "\nseed {}, {n} scenarios in {:.1} s ({} threads, time limit {time_limit} s, determinism every {})",
            a.seed,
            started.elapsed().as_secs_f64(),
            rayon::current_num_threads(),
            a.determinism_every
        );
        if failed > 0 {
            println!("failures listed in {}", failures_file.display());
        }
        let noted: u64 = t.outcomes.iter().filter(|(k, _)| k.starts_with("NOTE")).map(|(_, v)| v).sum();
        if noted > 0 {
            println!(
                "{noted} runs noted, not failed (long schedules cut at the cap; slow runs with --slow-is-note), listed in {}",
                failures_file.display()
            );
        }
        println!("{} passed, {failed} failed", n - failed - skipped - noted);
        failed
    }
}

mod bytes {
    use super::*;

    /// Small well-formed files of every format, as mutation seeds.
    fn seeds() -> Vec<(&'static str, String, Option<TraceFormat>)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
        vec![
            ("jobs", read("traces/example_jobs.csv"), Some(TraceFormat::JobsCsv)),
            ("vcs", read("traces/example_vcs.csv"), None),
            (
                "jobs",
                "job_id,submit_time,duration,gpu_num,vc,user,model,local_bsz,global_bsz,deadline\n\
                 a,0,600,1,research,u1,resnet18-cifar10,64,,900\n\
                 b,0,1.5,2,research,u2,cifar10,,128,\n\
                 c,30,100000000000,4,prod,u1,,,,\n"
                    .into(),
                Some(TraceFormat::JobsCsv),
            ),
            (
                "rfold",
                "#job id,arrival time (sec),topology,shape,size,duration (sec)\n\
                 1,0,1,1,1,600\n2,10,2,2+2,4,3600\n3,10,1,8,8,60\n"
                    .into(),
                Some(TraceFormat::PhillyRfold),
            ),
            (
                "pollux",
                "timestamp,duration,num_gpus,gpu_time,cluster\n\
                 0,600,1,600,vc1\n30,1200,4,4800,vc2\n30,5,2,10,vc1\n\n"
                    .into(),
                Some(TraceFormat::PhillyPollux),
            ),
            (
                "helios",
                "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n\
                 j1,u1,vc1,1,6,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:05,2020-04-01 00:10:05,600,5\n\
                 j2,u2,vc2,8,48,1,FAILED,2020-04-01 00:00:00,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,60\n\
                 j3,u1,vc1,0,4,1,COMPLETED,2020-04-01 00:02:00,2020-04-01 00:02:00,2020-04-01 00:03:00,60,0\n"
                    .into(),
                Some(TraceFormat::Helios),
            ),
            (
                "openb",
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                 p1,8000,30000,1,500,T4|P100,LS,Succeeded,0,600,10\n\
                 p2,16000,60000,2,1000,,BE,Running,5,9000,6\n\
                 p3,1000,2000,0,0,,BE,Succeeded,7,100,8\n\
                 p4,1000,2000,1,1000,V100M16,LS,Pending,9,100,\n"
                    .into(),
                Some(TraceFormat::AlibabaOpenb),
            ),
            (
                "nodes",
                "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,V100M32\nn2,64000,262144,0,\nn3,96000,393216,2,T4\n".into(),
                None,
            ),
        ]
    }

    const GARBAGE: [&str; 16] = [
        "\"",
        "\r",
        "\r\n",
        "\0",
        "\u{feff}",
        "\u{fffd}",
        "é",
        "\u{1F600}",
        "\n\n",
        ",",
        ",,,,",
        "-1",
        "1e400",
        "99999999999999999999999999",
        "NaN",
        "inf",
    ];

    /// One mutated input.
    fn mutate<R: Rng>(rng: &mut R, base: &str) -> Vec<u8> {
        let mut b = base.as_bytes().to_vec();
        let rounds = rng.gen_range(1..=4);
        for _ in 0..rounds {
            let len = b.len();
            match rng.gen_range(0..11) {
                0 if len > 0 => {
                    let i = rng.gen_range(0..len);
                    b[i] ^= 1 << rng.gen_range(0..8);
                }
                1 if len > 0 => {
                    let i = rng.gen_range(0..len);
                    b[i] = rng.r#gen();
                }
                2 => b.truncate(rng.gen_range(0..=len)),
                3 => {
                    let i = rng.gen_range(0..=len);
                    let g = GARBAGE[rng.gen_range(0..GARBAGE.len())];
                    b.splice(i..i, g.bytes());
                }
                4 => {
                    // A number replaced by a huge, negative or non-finite one.
                    let digits: Vec<usize> = (0..len).filter(|&i| b[i].is_ascii_digit()).collect();
                    if let Some(&i) = digits.choose(rng) {
                        let mut j = i;
                        while j < len && (b[j].is_ascii_digit() || b[j] == b'.') {
                            j += 1;
                        }
                        let r = [
                            "1e400",
                            "-5",
                            "18446744073709551616",
                            "NaN",
                            "inf",
                            "0.0000001",
                            "1e11",
                            "100000000001",
                            "",
                        ][rng.gen_range(0..9)];
                        b.splice(i..j, r.bytes());
                    }
                }
                5 => {
                    // Blank lines before the header, or anywhere.
                    let i = if rng.gen_bool(0.5) { 0 } else { rng.gen_range(0..=len) };
                    let n = rng.gen_range(1..4);
                    b.splice(i..i, std::iter::repeat_n(b'\n', n));
                }
                6 => {
                    // A line repeated (duplicate ids) or removed.
                    let text = String::from_utf8_lossy(&b).to_string();
                    let mut lines: Vec<&str> = text.split('\n').collect();
                    if !lines.is_empty() {
                        let k = rng.gen_range(0..lines.len());
                        if rng.gen_bool(0.5) {
                            lines.insert(k, lines[k]);
                        } else {
                            lines.remove(k);
                        }
                    }
                    b = lines.join("\n").into_bytes();
                }
                7 => {
                    // Only the header, or nothing.
                    let end = b.iter().position(|&c| c == b'\n').map_or(len, |p| p + 1);
                    b.truncate(if rng.gen_bool(0.8) { end } else { 0 });
                }
                8 => {
                    // Random bytes appended.
                    let n = rng.gen_range(1..32);
                    b.extend((0..n).map(|_| rng.r#gen::<u8>()));
                }
                9 => {
                    // A field made very long.
                    let i = rng.gen_range(0..=len);
                    b.splice(i..i, std::iter::repeat_n(b'9', rng.gen_range(20..400)));
                }
                _ => {
                    // CRLF line ends throughout.
                    let text = String::from_utf8_lossy(&b).replace('\n', "\r\n");
                    b = text.into_bytes();
                }
            }
        }
        b
    }

    /// Checks that an error names `path` and, where it gives a line, a line of
    /// the file (not a blank one, when the file has no quotes).
    fn check_error(e: &TraceError, path: &Path, bytes: &[u8]) -> Result<(), String> {
        let msg = e.to_string();
        if !msg.contains(&path.display().to_string()) {
            return Err(format!("error does not name the file: {msg}"));
        }
        let line = match e {
            TraceError::Field { line, .. } | TraceError::Row { line, .. } => *line,
            _ => return Ok(()),
        };
        let lines: Vec<&[u8]> = bytes.split(|&c| c == b'\n').collect();
        let n = lines.len() as u64;
        if line == 0 || line > n {
            return Err(format!("error names line {line}, past the file's {n} lines: {msg}"));
        }
        if !bytes.contains(&b'"') && lines[(line - 1) as usize].iter().all(|&c| c == b'\r') {
            return Err(format!("error names line {line}, an empty line: {msg}"));
        }
        Ok(())
    }

    const FORMATS: [TraceFormat; 7] = [
        TraceFormat::Auto,
        TraceFormat::Philly,
        TraceFormat::PhillyRfold,
        TraceFormat::PhillyPollux,
        TraceFormat::Helios,
        TraceFormat::JobsCsv,
        TraceFormat::AlibabaOpenb,
    ];

    pub(crate) fn run(a: &Args) -> u64 {
        let n = a.count.unwrap_or(1_000_000);
        let indices: Vec<u64> = match a.only {
            Some(i) => vec![i],
            None => (a.start..a.start + n).collect(),
        };
        let seeds = seeds();
        let scratch = a.out.join("bytes-scratch");
        let _ = std::fs::create_dir_all(&scratch);
        let started = Instant::now();
        let budget = a.time_budget_s.map(Duration::from_secs_f64);
        let tally = Mutex::new(Tally::default());
        let done = AtomicU64::new(0);
        let failed = AtomicU64::new(0);
        let failures_file = a.out.join("byte-failures.txt");
        let _ = std::fs::remove_file(&failures_file);
        let last_progress = Mutex::new(Instant::now());
        indices.par_iter().for_each(|&i| {
            if budget.is_some_and(|b| started.elapsed() > b) {
                return;
            }
            let mut rng = dlsched::rng::stream(a.seed, &format!("fuzz-bytes-{i}"));
            let (what, base, own) = &seeds[rng.gen_range(0..seeds.len())];
            let bytes = mutate(&mut rng, base);
            let path = scratch.join(format!("in-{i}.csv"));
            if let Err(e) = std::fs::write(&path, &bytes) {
                die(&format!("{}: {e}", path.display()));
            }
            let other = FORMATS[rng.gen_range(0..FORMATS.len())];
            let mut formats = vec![TraceFormat::Auto, other];
            formats.extend(*own);
            let mut problems = Vec::new();
            let mut local = Tally::default();
            for f in formats {
                let r = std::panic::catch_unwind(|| load_trace(&path, f, &ColumnMap::default()));
                match r {
                    Err(p) => problems.push(format!("load_trace --format {}: {}", vname(&f), panic_text(p))),
                    Ok(Ok(t)) => local.add("trace-ok", Some(format!("ok\t{}", t.format.name()))),
                    Ok(Err(e)) => {
                        local.add("trace-error", Some(format!("error\t{}", error_class(&e))));
                        if let Err(msg) = check_error(&e, &path, &bytes) {
                            problems.push(format!("load_trace --format {}: {msg}", vname(&f)));
                        }
                    }
                }
            }
            // The cluster files' loaders.
            if *what == "vcs" || *what == "nodes" || rng.gen_bool(0.1) {
                let vc = std::panic::catch_unwind(|| dlsched::cluster::load_vc_file(&path, "generic", 16384));
                let nodes = std::panic::catch_unwind(|| dlsched::cluster::load_nodes_file(&path));
                for (name, r) in
                    [("load_vc_file", vc.map(|r| r.map(|_| ()))), ("load_nodes_file", nodes.map(|r| r.map(|_| ())))]
                {
                    match r {
                        Err(p) => problems.push(format!("{name}: {}", panic_text(p))),
                        Ok(Ok(())) => local.add("cluster-ok", None),
                        Ok(Err(e)) => {
                            local.add("cluster-error", Some(format!("{name} error\t{}", error_class(&e))));
                            if let Err(msg) = check_error(&e, &path, &bytes) {
                                problems.push(format!("{name}: {msg}"));
                            }
                        }
                    }
                }
            }
            for p in &problems {
                // The loader and the check, without the file's name and numbers.
                let (loader, rest) = p.split_once(": ").unwrap_or((p.as_str(), ""));
                let check = if rest.starts_with("panicked") {
                    "panic".to_string()
                } else {
                    rest.split(": ").next().unwrap_or("").chars().filter(|c| !c.is_ascii_digit()).collect()
                };
                local.add("problem", Some(format!("FAIL\t{loader}\t{check}")));
            }
            {
                let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
                for (k, v) in local.outcomes {
                    *t.outcomes.entry(k).or_default() += v;
                }
                for (k, v) in local.details {
                    *t.details.entry(k).or_default() += v;
                }
                t.add(if problems.is_empty() { "input-pass" } else { "input-FAIL" }, None);
            }
            if problems.is_empty() {
                let _ = std::fs::remove_file(&path);
            } else {
                failed.fetch_add(1, Ordering::Relaxed);
                let keep = a.out.join(format!("bytes-fail-{i}.csv"));
                let _ = std::fs::rename(&path, &keep);
                let line = format!(
                    "{i}\t{}\t(seed {}, --bytes --only {i}; input kept as {})",
                    problems.join(" | ").replace('\n', " "),
                    a.seed,
                    keep.display()
                );
                println!("FAIL {line}");
                if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&failures_file) {
                    let _ = writeln!(f, "{line}");
                }
            }
            let k = done.fetch_add(1, Ordering::Relaxed) + 1;
            if let Ok(mut last) = last_progress.try_lock()
                && last.elapsed() > Duration::from_secs(10)
            {
                *last = Instant::now();
                eprintln!(
                    "[{:.0} s] {k}/{} inputs, {} failed",
                    started.elapsed().as_secs_f64(),
                    indices.len(),
                    failed.load(Ordering::Relaxed)
                );
            }
        });
        let _ = std::fs::remove_dir(&scratch);
        let t = tally.into_inner().unwrap_or_else(|e| e.into_inner());
        println!("\n# loader results (class: count)");
        for (d, c) in &t.details {
            println!("{c:>9}  {d}");
        }
        let n = done.load(Ordering::Relaxed);
        let m = failed.load(Ordering::Relaxed);
        println!(
            "\nseed {}, {n} inputs in {:.1} s ({} threads)",
            a.seed,
            started.elapsed().as_secs_f64(),
            rayon::current_num_threads()
        );
        println!("{} passed, {m} failed", n - m);
        m
    }

    fn error_class(e: &TraceError) -> &'static str {
        match e {
            TraceError::Io { .. } => "io",
            TraceError::Field { .. } => "field",
            TraceError::Row { .. } => "row",
            TraceError::Format { .. } => "format",
            #[allow(unreachable_patterns)]
            _ => "other",
        }
    }
}
