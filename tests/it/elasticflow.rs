//! ElasticFlow's traces: a `jobs-csv` row with `num_iteration` is a
//! work-defined job that runs its iterations at ElasticFlow's measured
//! iterations/s (`dlsched::profile::elasticflow`). Hand-computed JCTs under
//! the rigid baselines, the errors of bad rows, and (when ElasticFlow's
//! traces are at hand) the model against the traces' own `duration` column.

use std::path::{Path, PathBuf};

use dlsched::profile::elasticflow::{EfGpu, ElasticFlowModel};
use dlsched::trace::{ColumnMap, TraceFormat, load_trace};

use crate::common::dlsched;

/// ElasticFlow's header, mapped by `--columns` (as docs/traces.md says).
const HEADER: &str = "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n";
const COLUMNS: &str = "num_iteration=iteration,model=model_name,deadline=ddl,global_bsz=batch_size,gpu_num=num_gpu";

/// Two jobs on T4s, written here by hand (not copied from a trace):
/// - `a`: cifar10, global batch 2,048 on 1 GPU, 1,000 iterations, submitted
///   at 0 s, no duration. `throughputs_T4/cifar10.csv`, row 2048, column 1:
///   0.7124343161725541 it/s, so 1,000 / 0.7124343161725541 =
///   1,403.63817 s, done at the first whole ms after: 1,403.639 s.
/// - `b`: cifar10, 4,096 on 4 GPUs, 500 iterations, submitted at 10 s, a
///   trace duration of 395 s that the run does not use. Row 4096, column 4:
///   1.2660132732806406 it/s: 500 / 1.2660132732806406 = 394.94057 s →
///   394.941 s, so it ends at 404.941 s.
const TWO: &str = "a,0,1000,cifar10,100000,2048,1,\nb,10,500,cifar10,100000,4096,4,395\n";

fn write(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("ef.csv");
    std::fs::write(&p, format!("{HEADER}{body}")).unwrap();
    p
}

/// A `jobs.csv` row: (job_id, start_s, end_s, attained_s).
type Row = (String, String, String, String);

/// Runs `simulate` on `trace` with `extra` arguments; (exit ok, stderr, jobs.csv rows).
fn simulate(trace: &Path, out: &Path, extra: &[&str]) -> (bool, String, Vec<Row>) {
    let mut args = vec!["simulate", "--trace", trace.to_str().unwrap(), "--columns", COLUMNS];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = dlsched(&args);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    if !o.status.success() {
        return (false, stderr, Vec::new());
    }
    let text = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let g = |n: &str| f[col(n)].to_string();
            (g("job_id"), g("start_s"), g("end_s"), g("attained_s"))
        })
        .collect();
    (true, stderr, rows)
}

fn row(id: &str, start: &str, end: &str, attained: &str) -> Row {
    (id.into(), start.into(), end.into(), attained.into())
}

#[test]
fn two_jobs_run_their_iterations_at_the_table_rate_under_the_rigid_baselines() {
    let d = tempfile::tempdir().unwrap();
    let trace = write(d.path(), TWO);
    // The Pollux cluster: 16 nodes × 4 T4s, both jobs start at once.
    for policy in ["fifo", "srtf", "dlas"] {
        let out = d.path().join(policy);
        let (ok, stderr, rows) =
            simulate(&trace, &out, &["--cluster", "pollux", "--policy", policy, "--rescale-delay", "0"]);
        assert!(ok, "{policy}: {stderr}");
        let want = vec![row("a", "0", "1403.639", "1403.639"), row("b", "10", "404.941", "394.941")];
        assert_eq!(rows, want, "{policy}");
        // b's trace duration is not used, and the run says so once.
        assert_eq!(stderr.matches("note: 1 work-defined jobs (num_iteration) also have a trace duration").count(), 1);
    }
    // Tiresias with tuned jobs acts on its 60-s grid: both start at 60 s.
    let out = d.path().join("tt");
    let (ok, stderr, rows) =
        simulate(&trace, &out, &["--cluster", "pollux", "--policy", "tiresias-tuned", "--rescale-delay", "0"]);
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("a", "60", "1463.639", "1403.639"), row("b", "60", "454.941", "394.941")]);
    // The default re-scale delay (Pollux's 30 s) delays each job's first
    // iteration by 30 s: 1,433.639 s and 10 + 30 + 394.941 = 434.941 s.
    let out = d.path().join("delay");
    let (ok, stderr, rows) = simulate(&trace, &out, &["--cluster", "pollux", "--policy", "fifo"]);
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("a", "0", "1433.639", "1433.639"), row("b", "10", "434.941", "424.941")]);
}

#[test]
fn gpu_counts_between_columns_are_interpolated_and_a100_tables_read_on_a100s() {
    let d = tempfile::tempdir().unwrap();
    // cifar10 at 2,048 on 3 T4s: between 2 GPUs (1.193356620784188) and 4
    // (2.53513302294422): 1.864244821864204 it/s; 1,000 iterations take
    // 536.4102 s → 536.411 s.
    let trace = write(d.path(), "c,0,1000,cifar10,,2048,3,\n");
    let (ok, stderr, rows) =
        simulate(&trace, &d.path().join("t4"), &["--cluster", "pollux", "--policy", "fifo", "--rescale-delay", "0"]);
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("c", "0", "536.411", "536.411")]);
    assert!(!stderr.contains("trace duration"), "{stderr}");
    // resnet50 at 128 on 16 A100s (2 × 8): throughputs_A100/resnet50.csv,
    // row 128, column 16: 20.15564728008105 it/s; 10,000 iterations take
    // 496.1389 s → 496.139 s.
    let trace = write(d.path(), "r,0,10000,resnet50,,128,16,\n");
    let a100 =
        ["--nodes", "2", "--gpus-per-node", "8", "--gpu-type", "a100", "--policy", "fifo", "--rescale-delay", "0"];
    let (ok, stderr, rows) = simulate(&trace, &d.path().join("a100"), &a100);
    assert!(ok, "{stderr}");
    assert_eq!(rows, vec![row("r", "0", "496.139", "496.139")]);
}

#[test]
fn bad_rows_are_errors_naming_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let pollux = ["--cluster", "pollux", "--policy", "fifo"];
    let cases: [(&str, &str); 9] = [
        // An unknown model (gpt2 is measured on A100s only).
        (
            "a,0,1000,cifar10,,2048,1,\nb,0,10,gpt2,,128,1,\n",
            "ef.csv:3: column `model_name`: job `b`: ElasticFlow has no t4",
        ),
        // A batch not in the table.
        (
            "a,0,1000,cifar10,,1024,1,\n",
            "ef.csv:2: column `batch_size`: job `a`: ElasticFlow measured `cifar10` on t4 at global batch 2048, 4096 only, not 1024",
        ),
        // More GPUs than measured (yolov3 is nan past 16 T4s).
        (
            "a,0,10,yolov3,,64,32,\n",
            "ef.csv:2: column `num_gpu`: job `a`: 32 GPUs: ElasticFlow measured `yolov3` at global batch 64 on t4 on 1 to 16 GPUs",
        ),
        ("a,0,-5,cifar10,,2048,1,\n", "ef.csv:2: column `iteration`: `-5` is not a positive number of iterations"),
        ("a,0,0,cifar10,,2048,1,\n", "ef.csv:2: column `iteration`: `0` is not a positive number of iterations"),
        ("a,0,many,cifar10,,2048,1,\n", "ef.csv:2: column `iteration`: `many` is not a positive number of iterations"),
        // Neither iterations nor a duration.
        ("a,0,,cifar10,,2048,1,\n", "ef.csv:2: column `duration`: empty"),
        // No model, no batch.
        ("a,0,10,,,2048,1,\n", "ef.csv:2: column `model_name`: a row with num_iteration needs its model"),
        (
            "a,0,10,cifar10,,,1,\n",
            "ef.csv:2: column `iteration`: a row with num_iteration needs its global batch (`batch_size`",
        ),
    ];
    for (i, (body, want)) in cases.iter().enumerate() {
        let trace = write(d.path(), body);
        let (ok, stderr, _) = simulate(&trace, &d.path().join(format!("o{i}")), &pollux);
        assert!(!ok, "{body}");
        assert!(stderr.contains(want), "{body}: want `{want}`, got {stderr}");
    }
    // A cluster of other GPUs, and a policy that needs step times.
    let trace = write(d.path(), TWO);
    let (ok, stderr, _) = simulate(&trace, &d.path().join("k80"), &["--policy", "fifo"]);
    assert!(
        !ok && stderr
            .contains("rated by ElasticFlow's T4 or A100 throughput tables, but cluster `lab16` has GPUs of type K80"),
        "{stderr}"
    );
    for policy in ["pollux", "optimus"] {
        let (ok, stderr, _) = simulate(&trace, &d.path().join(policy), &["--cluster", "pollux", "--policy", policy]);
        assert!(!ok && stderr.contains("gives no step times"), "{policy}: {stderr}");
    }
}

#[test]
fn a_file_without_a_duration_column_is_read_when_it_has_iterations() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("nd.csv");
    std::fs::write(&p, "job_id,submit_time,num_iteration,model,global_bsz,gpu_num\na,0,1000,cifar10,2048,1\n").unwrap();
    let t = load_trace(&p, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!(t.format, TraceFormat::JobsCsv);
    let e = t.records[0].elastic().unwrap();
    assert_eq!(
        (e.app.as_str(), e.tuned_gpus, e.tuned_bsz, e.adaptive, e.work),
        ("cifar10", 1, 2048, false, Some(1000.0))
    );
    // Neither the rate model's model nor a per-GPU batch: the job is the progress model's.
    assert_eq!((t.records[0].model(), t.records[0].local_bsz(), t.records[0].duration_ms), (None, None, 0));
    // Without the column, every row needs its iterations.
    std::fs::write(&p, "job_id,submit_time,num_iteration,model,global_bsz,gpu_num\na,0,,cifar10,2048,1\n").unwrap();
    let e = load_trace(&p, TraceFormat::Auto, &ColumnMap::default()).unwrap_err().to_string();
    assert!(e.contains("nd.csv:2: column `num_iteration`: empty; without a `duration` column"), "{e}");
}

/// ElasticFlow's own traces (pkusys/ElasticFlow @ 04a0109a,
/// `ElasticFlow/traces_for_ElasticFlow/`), from `$DLSCHED_ELASTICFLOW_TRACES`
/// or `../shared/traces/elasticflow`: each row's `iteration / rate(batch,
/// num_gpu)` on the GPU type ElasticFlow ran the trace on (run_fig8a.sh:
/// `elasticVpollux_e` on T4; the others A100) against its `duration`.
#[test]
fn trace_durations_agree() {
    let dir = std::env::var_os("DLSCHED_ELASTICFLOW_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/elasticflow"));
    if !dir.is_dir() {
        eprintln!(
            "SKIP trace_durations_agree: no ElasticFlow traces in {} (set DLSCHED_ELASTICFLOW_TRACES)",
            dir.display()
        );
        return;
    }
    // (file, GPU type, rows, rows whose duration is the floor, the ceiling, within 1 s).
    let expect = [
        ("elasticVpollux_e.csv", EfGpu::T4, 195, 195, 0, 195),
        ("philly_103959.csv", EfGpu::A100, 876, 0, 876, 876),
        // Row 3 (line 5) says 10,823 s; 17,316 iterations at 28.60 it/s take 605.4 s.
        ("resnet_cifar_trace.csv", EfGpu::A100, 5, 0, 4, 4),
    ];
    let mut cols = ColumnMap::default();
    cols.parse_pairs("num_iteration=iteration,model=model_name,global_bsz=batch_size,gpu_num=num_gpu,deadline=ddl")
        .unwrap();
    for (file, gpu, rows, floor, ceil, within) in expect {
        let p = dir.join(file);
        if !p.is_file() {
            eprintln!("SKIP trace_durations_agree: {} is absent", p.display());
            continue;
        }
        let model = ElasticFlowModel::builtin(gpu);
        let t = load_trace(&p, TraceFormat::Auto, &cols).unwrap();
        let (mut n, mut f, mut c, mut w, mut worst) = (0, 0, 0, 0, 0.0f64);
        for r in &t.records {
            let e = r.elastic().expect("every row has iterations");
            let secs = e.work.unwrap() / model.throughput(&e.app, e.tuned_bsz, e.tuned_gpus).unwrap();
            let dur = r.duration_ms as f64 / 1000.0;
            n += 1;
            f += usize::from(secs.floor() == dur);
            c += usize::from(secs.ceil() == dur);
            w += usize::from((secs - dur).abs() <= 1.0);
            worst = worst.max((secs - dur).abs());
        }
        eprintln!(
            "{file}: {n} rows, duration = floor {f}, = ceil {c}, within 1 s {w}; largest difference {worst:.3} s"
        );
        assert_eq!((n, f, c, w), (rows, floor, ceil, within), "{file}");
    }
}
