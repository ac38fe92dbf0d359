//! The calibrated profile database: loader errors, the builtin tables'
//! coverage, hand-checked conversions, and that `dlsched profile import`
//! reproduces the committed tables byte for byte (when `../shared` is present).

use std::path::{Path, PathBuf};
use std::process::Command;

use dlsched::error::TraceError;
use dlsched::profile::db::{FILES, ProfileDb, Split, fmt_num};

const THROUGHPUT: &str = "model,gpu_type,local_bsz,gpus,split,iter_time_s,source\n\
    m,t4,32,1,1,0.1,pollux\n\
    m,t4,32,4,2+2,0.2,pollux\n\
    m,k80,32,4,spread,0.3,gavel\n";
const COLOCATION: &str = "gpu_type,model_a,bsz_a,model_b,bsz_b,speed_a,speed_b,source\nk80,m,32,m,32,0.5,0.5,gavel\n";
const MULTINODE: &str = "model,gpus,servers,relative,source\nm,4,2,0.9,chronus\n";
const MODELS: &str = "model,family,params_m,gflops_per_sample,source,state_bytes_per_param,act_mib_per_sample,mem_source\n\
    m,cnn,11.2,NaN,\"He et al. 2016; torchvision\",12,4.5,hand\n";

/// A directory with the four valid hand-made files, `name` replaced by `text`.
fn dir_with(name: &str, text: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (f, t) in [
        ("throughput.csv", THROUGHPUT),
        ("colocation.csv", COLOCATION),
        ("multinode.csv", MULTINODE),
        ("models.csv", MODELS),
    ] {
        std::fs::write(d.path().join(f), if f == name { text } else { t }).unwrap();
    }
    d
}

/// (file name, line, column) of a field error.
fn field_at(e: &TraceError) -> (String, u64, String) {
    match e {
        TraceError::Field { file, line, column, .. } => {
            (file.file_name().unwrap().to_string_lossy().into_owned(), *line, column.clone())
        }
        other => panic!("expected a field error, got {other}"),
    }
}

#[test]
fn hand_made_tables_load() {
    let d = dir_with("", "");
    let db = ProfileDb::load_dir(d.path()).unwrap();
    assert_eq!(db.throughput.len(), 3);
    assert_eq!(db.throughput[1].split, Split::Exact(vec![2, 2]));
    assert_eq!(db.throughput[2].split, Split::Spread);
    assert_eq!(db.colocation[0].speed_b, 0.5);
    assert_eq!(db.multinode[0].relative, 0.9);
    assert!(db.models[0].gflops_per_sample.is_nan());
    assert_eq!(db.models[0].source, "He et al. 2016; torchvision");
    assert_eq!(db.models().collect::<Vec<_>>(), ["m"]);
}

#[test]
fn loader_errors_name_file_line_and_column() {
    let head = "model,gpu_type,local_bsz,gpus,split,iter_time_s,source\n";
    let cases: [(&str, String, (&str, u64, &str)); 11] = [
        // A split that does not add up to `gpus`, on the third line.
        ("throughput.csv", format!("{head}m,t4,32,1,1,0.1,x\nm,t4,32,4,2+1,0.2,x\n"), ("throughput.csv", 3, "split")),
        // Unknown split syntax.
        ("throughput.csv", format!("{head}m,t4,32,4,2x2,0.2,x\n"), ("throughput.csv", 2, "split")),
        // Zero GPUs.
        ("throughput.csv", format!("{head}m,t4,32,0,1,0.2,x\n"), ("throughput.csv", 2, "gpus")),
        // Non-finite and non-positive times.
        ("throughput.csv", format!("{head}m,t4,32,1,1,inf,x\n"), ("throughput.csv", 2, "iter_time_s")),
        ("throughput.csv", format!("{head}\nm,t4,32,1,1,-0.1,x\n"), ("throughput.csv", 3, "iter_time_s")),
        // A zero co-location speed.
        (
            "colocation.csv",
            "gpu_type,model_a,bsz_a,model_b,bsz_b,speed_a,speed_b,source\nk80,m,32,m,32,0.5,0,gavel\n".into(),
            ("colocation.csv", 2, "speed_b"),
        ),
        // A NaN relative throughput (only models.csv may say NaN).
        ("multinode.csv", "model,gpus,servers,relative,source\nm,4,2,NaN,c\n".into(), ("multinode.csv", 2, "relative")),
        // Columns in another order are fine; the bad value is still named.
        (
            "models.csv",
            "source,model,family,gflops_per_sample,params_m,mem_source,act_mib_per_sample,state_bytes_per_param\n\
             x,m,cnn,1.5,zero,h,1,12\n"
                .into(),
            ("models.csv", 2, "params_m"),
        ),
        // The memory inputs: bytes per parameter must be a number > 0 (no NaN).
        (
            "models.csv",
            "model,family,params_m,gflops_per_sample,source,state_bytes_per_param,act_mib_per_sample,mem_source\n\
             m,cnn,1,1,x,16,NaN,h\nn,cnn,1,1,x,NaN,2,h\n"
                .into(),
            ("models.csv", 3, "state_bytes_per_param"),
        ),
        (
            "models.csv",
            "model,family,params_m,gflops_per_sample,source,state_bytes_per_param,act_mib_per_sample,mem_source\n\
             m,cnn,1,1,x,16,-2,h\n"
                .into(),
            ("models.csv", 2, "act_mib_per_sample"),
        ),
        (
            "models.csv",
            "model,family,params_m,gflops_per_sample,source,state_bytes_per_param,act_mib_per_sample,mem_source\n\
             m,cnn,1,1,x,16,2,\n"
                .into(),
            ("models.csv", 2, "mem_source"),
        ),
    ];
    for (name, text, (file, line, column)) in cases {
        let d = dir_with(name, &text);
        let e = ProfileDb::load_dir(d.path()).unwrap_err();
        assert_eq!(field_at(&e), (file.to_string(), line, column.to_string()), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(file) && msg.contains(&format!(":{line}:")) && msg.contains(column), "{msg}");
    }

    // Wrong field count → a row error with its line.
    let d = dir_with("multinode.csv", "model,gpus,servers,relative,source\nm,4,2,0.9,c\nm,4,4,0.8\n");
    match ProfileDb::load_dir(d.path()).unwrap_err() {
        TraceError::Row { file, line, message } => {
            assert!(file.ends_with("multinode.csv"));
            assert_eq!(line, 3);
            assert!(message.contains("4 fields"), "{message}");
        }
        e => panic!("expected a row error, got {e}"),
    }
    // A missing column → a format error naming it.
    let d = dir_with("colocation.csv", "gpu_type,model_a,bsz_a,model_b,bsz_b,speed_a,source\nk80,m,32,m,32,0.5,g\n");
    match ProfileDb::load_dir(d.path()).unwrap_err() {
        TraceError::Format { file, message } => {
            assert!(file.ends_with("colocation.csv"));
            assert!(message.contains("`speed_b`"), "{message}");
        }
        e => panic!("expected a format error, got {e}"),
    }
    // A missing file → an I/O error naming it.
    let d = dir_with("", "");
    std::fs::remove_file(d.path().join("models.csv")).unwrap();
    match ProfileDb::load_dir(d.path()).unwrap_err() {
        TraceError::Io { file, .. } => assert!(file.ends_with("models.csv")),
        e => panic!("expected an I/O error, got {e}"),
    }
}

#[test]
fn builtin_has_every_source_and_describes_every_model() {
    let db = &ProfileDb::builtin();
    let count = |source: &str| db.throughput.iter().filter(|r| r.source == source).count();
    for source in ["gavel", "pollux", "sia", "elasticflow"] {
        assert!(count(source) > 0, "no throughput rows from {source}");
    }
    assert_eq!(count("gavel") + count("pollux") + count("sia") + count("elasticflow"), db.throughput.len());
    assert!(!db.colocation.is_empty() && db.colocation.iter().all(|r| r.source == "gavel"));
    assert!(!db.multinode.is_empty() && db.multinode.iter().all(|r| r.source == "chronus"));
    assert!(!db.throughput.iter().any(|r| r.source.contains("lucid")), "Lucid is non-commercial");

    // Every model named in a table has a models.csv row, and every row is used.
    assert_eq!(db.models_without_info(), Vec::<&str>::new());
    let listed: Vec<&str> = db.models.iter().map(|m| m.model.as_str()).collect();
    assert_eq!(db.models().collect::<Vec<_>>(), listed);
    for m in &db.models {
        assert!(!m.family.is_empty() && !m.source.is_empty(), "{}", m.model);
        assert!(m.params_m.is_nan() || m.params_m > 0.0, "{}", m.model);
    }

    // The GPU types of each source.
    let gpus = |source: &str| {
        let mut g: Vec<&str> =
            db.throughput.iter().filter(|r| r.source == source).map(|r| r.gpu_type.as_str()).collect();
        g.sort_unstable();
        g.dedup();
        g
    };
    assert_eq!(gpus("gavel"), ["k80", "p100", "v100"]);
    assert_eq!(gpus("pollux"), ["t4"]);
    assert_eq!(gpus("sia"), ["a100", "quadro6000", "rtx2080ti", "v100"]);
    assert_eq!(gpus("elasticflow"), ["a100"]);

    // ElasticFlow: 109 of its 119 A100 cells (see src/profile/data/README.md),
    // per model, and the scaling points up to 64 GPUs on whole 8-GPU servers.
    let mut per_model: Vec<(&str, usize)> = Vec::new();
    for r in db.throughput.iter().filter(|r| r.source == "elasticflow") {
        match per_model.iter_mut().find(|(m, _)| *m == r.model) {
            Some((_, n)) => *n += 1,
            None => per_model.push((r.model.as_str(), 1)),
        }
    }
    per_model.sort_unstable();
    assert_eq!(
        per_model,
        [
            ("bert-large-cola", 14),
            ("deepspeech2-librispeech", 13),
            ("gpt2-imdb", 14),
            ("inceptionv3-imagenet", 14),
            ("resnet50-cifar10", 12),
            ("resnet50-imagenet", 21),
            ("vgg16-imagenet", 21),
        ]
    );
    for r in db.throughput.iter().filter(|r| r.source == "elasticflow") {
        assert!([1, 2, 4, 8, 16, 32, 64].contains(&r.gpus), "{r:?}");
        let want = if r.gpus <= 8 { vec![r.gpus] } else { vec![8; (r.gpus / 8) as usize] };
        assert_eq!(r.split, Split::Exact(want), "{r:?}");
    }
    assert!(db.throughput.iter().any(|r| r.source == "elasticflow" && r.gpus == 64));

    // Every row is valid (the loader checks it; here the invariants the
    // performance models rely on).
    for r in &db.throughput {
        assert!(r.iter_time_s.is_finite() && r.iter_time_s > 0.0);
        match &r.split {
            Split::Exact(v) => {
                assert_eq!(v.iter().sum::<u32>(), r.gpus);
                assert!(v.windows(2).all(|w| w[0] >= w[1]));
            }
            Split::Spread => assert!(r.gpus > 1),
        }
    }
    // The committed files are compact.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/profile/data");
    let bytes: u64 = FILES.iter().map(|f| std::fs::metadata(dir.join(f)).unwrap().len()).sum();
    assert!(bytes < 800_000, "the profile tables take {bytes} bytes");
}

#[test]
fn hand_checked_conversions() {
    let db = &ProfileDb::builtin();
    let iter_time = |model: &str, gpu: &str, bsz: u32, gpus: u32, split: Split, source: &str| {
        let rows: Vec<f64> = db
            .throughput
            .iter()
            .filter(|r| {
                r.model == model
                    && r.gpu_type == gpu
                    && r.local_bsz == bsz
                    && r.gpus == gpus
                    && r.split == split
                    && r.source == source
            })
            .map(|r| r.iter_time_s)
            .collect();
        assert_eq!(rows.len(), 1, "{model} {gpu} {bsz} {source}");
        rows[0]
    };

    // Gavel, gavel_throughputs_flat.csv line 4908:
    //   simulation,v100,true,ResNet-50 (batch size 64),4,,,9.451949566394442,
    // 9.45195 iterations/s counted over 4 workers, so one iteration of the
    // job takes 4 / 9.451949566394442 = 0.4231931… s → 0.423193 (6 digits),
    // on one server: split 4.
    assert_eq!(iter_time("resnet50-imagenet", "v100", 64, 4, Split::Exact(vec![4]), "gavel"), 0.423193);
    // Line 6750, the same job unconsolidated: 11.136430014818272 it/s →
    // 4 / 11.136430014818272 = 0.3591815… s → 0.359182, split `spread`.
    assert_eq!(iter_time("resnet50-imagenet", "v100", 64, 4, Split::Spread, "gavel"), 0.359182);

    // Pollux, pollux/cifar10/placements.csv, local_bsz 64, the six orders of
    // servers with 4, 3, 2 and 1 GPUs (lines 334, 367, 455, 521, 598, 631):
    //   1234 0.12780120372772216   1243 0.12350857257843018
    //   1324 0.1527341365814209    1342 0.14965453147888183
    //   1423 0.16525912284851074   1432 0.13088488578796387
    // Sorted: 0.12351, 0.12780, 0.13088, 0.14965, 0.15273, 0.16526; the
    // median of six is the mean of the 3rd and 4th:
    // (0.13088488578796387 + 0.14965453147888183) / 2 = 0.14026970863342285
    // → 0.14027 (6 digits: 0.140270), split 4+3+2+1, 10 GPUs.
    assert_eq!(iter_time("resnet18-cifar10", "t4", 64, 10, Split::Exact(vec![4, 3, 2, 1]), "pollux"), 0.14027);
    // A single measurement is copied: line 2, `1,32,0.0427886962890625,…`.
    assert_eq!(iter_time("resnet18-cifar10", "t4", 32, 1, Split::Exact(vec![1]), "pollux"), 0.0427887);

    // Gavel pair: ResNet-18 bs 16 with itself on a K80, line 4 of the flat
    // file: 2.4081728540044867 it/s each, alone 4.795294551566172 (line 2):
    // 2.4081728540044867 / 4.795294551566172 = 0.5021950… → 0.502195.
    let pair = db
        .colocation
        .iter()
        .find(|r| {
            r.gpu_type == "k80"
                && r.model_a == "resnet18-cifar10"
                && r.bsz_a == 16
                && r.model_b == "resnet18-cifar10"
                && r.bsz_b == 16
        })
        .unwrap();
    assert_eq!((pair.speed_a, pair.speed_b), (0.502195, 0.502195));

    // ElasticFlow, elasticflow/throughputs_A100/resnet50.csv line 3 (global
    // batch 128), column `16`: 20.15564728008105 iterations/s of the whole
    // job → 1 / 20.15564728008105 = 0.0496138866… s → 0.0496139; 128 / 16 =
    // 8 per GPU; 16 GPUs on two 8-A100 servers.
    assert_eq!(iter_time("resnet50-imagenet", "a100", 8, 16, Split::Exact(vec![8, 8]), "elasticflow"), 0.0496139);
    // vgg16.csv line 4 (global 256), column `64`: 20.655522724924108 → 1 /
    // 20.655522724924108 = 0.0484132022… → 0.0484132; 256 / 64 = 4 per GPU,
    // eight servers.
    assert_eq!(iter_time("vgg16-imagenet", "a100", 4, 64, Split::Exact(vec![8; 8]), "elasticflow"), 0.0484132);
    // gpt2.csv line 2 (global 128), column `1`: 7.3088357107474415 → 1 /
    // 7.3088357107474415 = 0.1368206975… → 0.136821, one GPU.
    assert_eq!(iter_time("gpt2-imdb", "a100", 128, 1, Split::Exact(vec![1]), "elasticflow"), 0.136821);
    // Skipped cells: resnet50_cifar10.csv is 0 on 16, 32 and 64 GPUs (not
    // measured), and deepspeech2.csv's global-batch-32 row has an empty
    // 64-GPU cell (32 / 64 is not a whole batch either), so DeepSpeech2's only
    // 64-GPU row is global batch 64 (line 3): 1 / 13.973921754361951 →
    // 0.0715619, one sample per GPU.
    let ef: Vec<_> = db.throughput.iter().filter(|r| r.source == "elasticflow").collect();
    assert_eq!(ef.iter().filter(|r| r.model == "resnet50-cifar10").map(|r| r.gpus).max(), Some(8));
    let ds64: Vec<(u32, f64)> = ef
        .iter()
        .filter(|r| r.model == "deepspeech2-librispeech" && r.gpus == 64)
        .map(|r| (r.local_bsz, r.iter_time_s))
        .collect();
    assert_eq!(ds64, [(1, 0.0715619)]);

    // Chronus: resnet101 on 8 GPUs over 4 servers, 0.8025198551591541 → 0.80252.
    let m = db.multinode.iter().find(|r| r.model == "resnet101-imagenet" && r.gpus == 8 && r.servers == 4).unwrap();
    assert_eq!(m.relative, 0.80252);
}

/// `../shared/profiles`, or `None` after printing why the caller skips.
fn shared_profiles() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if p.join("profiles").is_dir() {
        Some(p.join("profiles"))
    } else {
        eprintln!(
            "SKIP profile import reproducibility: ../shared/profiles is absent (it holds the public measurements)"
        );
        None
    }
}

/// Runs `dlsched profile SUB --from FROM --out <temp dir>`, asserts it
/// succeeded, and returns the directory.
fn run_import(sub: &str, from: &Path) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_dlsched"))
        .args(["profile", sub, "--from"])
        .arg(from)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn import_reproduces_the_committed_tables() {
    let Some(from) = shared_profiles() else { return };
    let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/profile/data");
    let out = run_import("import", &from);
    let read = |dir: &Path, f: &str| std::fs::read(dir.join(f)).unwrap();
    for f in FILES {
        assert!(
            read(out.path(), f) == read(&committed, f),
            "{f} differs from src/profile/data/{f}: regenerate with \
             `dlsched profile import --from ../shared/profiles --out src/profile/data`"
        );
    }
    // In memory too: the library import equals the compiled-in tables.
    let db = dlsched::profile::import::import(&from).unwrap();
    // (NaN marks unknown numbers in models.csv, and NaN != NaN: compare as written.)
    let written = |d: &ProfileDb| -> Vec<String> {
        d.models
            .iter()
            .map(|m| {
                format!(
                    "{} {} {} {} {} {} {} {}",
                    m.model,
                    m.family,
                    fmt_num(m.params_m),
                    fmt_num(m.gflops_per_sample),
                    m.source,
                    fmt_num(m.state_bytes_per_param),
                    fmt_num(m.act_mib_per_sample),
                    m.mem_source
                )
            })
            .collect()
    };
    let builtin = ProfileDb::builtin();
    assert_eq!(written(&db), written(&builtin));
    assert_eq!(db.throughput, builtin.throughput);
    assert_eq!(db.colocation, builtin.colocation);
    assert_eq!(db.multinode, builtin.multinode);
}

#[test]
fn import_help_says_what_it_derives() {
    let o = Command::new(env!("CARGO_BIN_EXE_dlsched")).args(["profile", "import", "--help"]).output().unwrap();
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for needle in ["Gavel", "Pollux", "Sia", "Chronus", "throughput.csv", "--from", "--out"] {
        assert!(help.contains(needle), "`{needle}` missing from:\n{help}");
    }
}

/// No process-wide database: a run reads the profile database of its artefact
/// set, which parses each database once, on first use. A plain replay at
/// trace speed parses none; a sharing replay takes the builtin one for the
/// co-location model; a run with the table rate model reads it too, and runs
/// sharing one set (a sweep's) share the one parse; a second set parses its own.
#[test]
fn runs_parse_a_database_only_when_they_read_it_and_once_per_artefact_set() {
    use dlsched::experiment::{
        Artefacts, ClusterChoice, RateModelKind, RunSpec, WorkloadSource, run_one_with_artefacts,
    };
    use dlsched::policy::placement::PlacementKind;
    use dlsched::policy::registry::{PolicySpec, QueueOptions};
    use dlsched::trace::{ColumnMap, TraceFormat};
    use std::sync::Arc;

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let plain = RunSpec::new(
        WorkloadSource::Trace {
            path: root.join("traces/example_jobs.csv"),
            format: TraceFormat::Auto,
            columns: ColumnMap::default(),
        },
        ClusterChoice::VcFile { path: root.join("traces/example_vcs.csv") },
    );
    let run = |spec: &RunSpec, a: &Artefacts| run_one_with_artefacts(spec, a, |_| {}).unwrap();
    let set = Artefacts::default();
    run(&plain, &set);
    assert_eq!(set.profiles().parsed(), 0, "a plain replay parses no database");
    let shared = RunSpec {
        policy: PolicySpec::Fifo(QueueOptions { placement: PlacementKind::ShareBestFit, ..Default::default() }),
        ..plain.clone()
    };
    run(&shared, &set);
    assert_eq!(set.profiles().parsed(), 1, "a sharing replay reads the builtin co-location table");
    let table = RunSpec { rate_model: RateModelKind::Table, ..plain.clone() };
    run(&table, &set);
    run(&table, &set.clone());
    assert_eq!(set.profiles().parsed(), 1, "three runs, clones of one set: one parse");
    let other = Artefacts::default();
    run(&table, &other);
    assert_eq!(other.profiles().parsed(), 1);
    assert!(!Arc::ptr_eq(&other.profiles().builtin(), &set.profiles().builtin()), "sets share nothing");
    // A directory is read once per set, whatever the spelling.
    let dir = root.join("src/profile/data");
    let a = RunSpec { profiles: Some(dir.clone()), ..table.clone() };
    let b = RunSpec { profiles: Some(dir.join(".")), ..table };
    run(&a, &set);
    run(&b, &set);
    assert_eq!(set.profiles().parsed(), 2, "the builtin database and one directory");
}

/// `dlsched profile import-elasticflow` on `../shared/profiles/elasticflow`
/// writes exactly the committed `src/profile/data/elasticflow/throughputs.csv`,
/// and the library's conversion gives the compiled-in table.
#[test]
fn elasticflow_import_reproduces_the_committed_table() {
    let Some(from) = shared_profiles() else { return };
    let from = from.join("elasticflow");
    let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/profile/data/elasticflow/throughputs.csv");
    let out = run_import("import-elasticflow", &from);
    assert!(
        std::fs::read(out.path().join("throughputs.csv")).unwrap() == std::fs::read(&committed).unwrap(),
        "throughputs.csv differs from src/profile/data/elasticflow/throughputs.csv: regenerate with \
         `dlsched profile import-elasticflow --from ../shared/profiles/elasticflow --out src/profile/data/elasticflow`"
    );
    use dlsched::profile::elasticflow::ElasticFlowTables;
    assert_eq!(ElasticFlowTables::convert(&from).unwrap(), ElasticFlowTables::builtin());
}
