//! Traces from other systems (issue 18 §5): model aliases of Pollux, Sia and
//! ElasticFlow traces, `global_bsz`, the `deadline` column and its summary
//! figures, the Helios cluster presets, and the undetected-header message.

use std::path::Path;

use dlsched::trace::{ColumnMap, TraceFormat, load_trace};

use crate::common::dlsched;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `dlsched simulate` with `args` and `--out dir/run`, asserting success;
/// returns the run directory and stderr.
fn simulate(dir: &Path, args: &[&str]) -> (std::path::PathBuf, String) {
    let out = dir.join("run");
    let mut all = vec!["simulate"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = dlsched(&all);
    assert!(o.status.success(), "{}", text(&o.stderr));
    (out, text(&o.stderr))
}

/// `file`'s rows as maps from column name to value.
fn csv_rows(file: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let t = std::fs::read_to_string(file).unwrap();
    let mut lines = t.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| header.iter().map(|h| h.to_string()).zip(l.split(',').map(str::to_string)).collect()).collect()
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn foreign_model_names_run_under_the_table_model_as_their_aliased_models() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("ef.csv");
    // ElasticFlow-style columns (num_gpu, model_name, batch_size = global
    // batch), mapped with --columns; names of Pollux (cifar10, imagenet) and
    // ElasticFlow (gpt2, the qualified elasticflow:bert).
    std::fs::write(
        &t,
        "job_id,submit_time,duration,num_gpu,model_name,batch_size\n\
         a,0,60,1,cifar10,128\n\
         b,0,60,2,gpt2,128\n\
         c,5,60,4,elasticflow:bert,128\n\
         d,5,60,1,imagenet,64\n\
         e,9,60,1,bert,32\n",
    )
    .unwrap();
    let (out, err) = simulate(
        d.path(),
        &[
            "--trace",
            t.to_str().unwrap(),
            "--columns",
            "gpu_num=num_gpu,model=model_name,global_bsz=batch_size",
            "--nodes",
            "1",
            "--gpus-per-node",
            "8",
            "--gpu-type",
            "a100",
            "--rate-model",
            "table",
        ],
    );
    let rows = csv_rows(&out.join("jobs.csv"));
    let got: Vec<(&str, &str, &str)> =
        rows.iter().map(|r| (r["job_id"].as_str(), r["model"].as_str(), r["local_bsz"].as_str())).collect();
    // local = global / GPUs: 128/1, 128/2, 128/4, 64/1, 32/1.
    assert_eq!(
        got,
        [
            ("a", "resnet18-cifar10", "128"),
            ("b", "gpt2-imdb", "64"),
            ("c", "bert-large-cola", "32"),
            ("d", "resnet50-imagenet", "64"),
            ("e", "bert-squad", "32"),
        ]
    );
    assert!(err.contains("model `cifar10` read as `resnet18-cifar10` for 1 jobs"), "{err}");
    // The bare `bert` is ambiguous: the note names the other meaning.
    assert!(err.contains("model `bert` read as `bert-squad` for 1 jobs") && err.contains("elasticflow:bert"), "{err}");
}

#[test]
fn an_unknown_model_lists_the_models_and_the_aliases() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("m.csv");
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,model,local_bsz\na,0,60,1,resnet18,32\n").unwrap();
    let o = dlsched(&["simulate", "--trace", t.to_str().unwrap(), "--rate-model", "table"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(e.contains("line 2, column `model`: job `a` names model `resnet18`"), "{e}");
    for name in ["resnet18-cifar10", "gpt2-imdb", "cifar10", "elasticflow:deepspeech2"] {
        assert!(e.contains(name), "{name} missing from: {e}");
    }
}

#[test]
fn global_batches_are_divided_by_the_gpus_rounding_down() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("g.csv");
    // 256 / 4 = 64; 100 / 3 = 33.3 -> 33 (rounded down); 64 / 1 = 64; a
    // CPU job (0 GPUs) gets none; an empty cell gives none.
    std::fs::write(
        &t,
        "job_id,submit_time,duration,gpu_num,global_bsz\na,0,10,4,256\nb,0,10,3,100\nc,0,10,1,64\nz,0,10,0,32\ne,0,10,2,\n",
    )
    .unwrap();
    let tr = load_trace(&t, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!(tr.format, TraceFormat::JobsCsv);
    let got: Vec<Option<u32>> = tr.records.iter().map(|r| r.local_bsz()).collect();
    assert_eq!(got, [Some(64), Some(33), Some(64), None, None]);

    // Both columns: fine when local × GPUs = global, an error naming the
    // line and column otherwise.
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,local_bsz,global_bsz\na,0,10,4,16,64\nb,0,10,2,16,64\n")
        .unwrap();
    let e = load_trace(&t, TraceFormat::Auto, &ColumnMap::default()).unwrap_err().to_string();
    assert!(e.contains("g.csv:3") && e.contains("`global_bsz`") && e.contains("16 × 2 GPUs = 32"), "{e}");
    // A global batch under one sample per GPU.
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,global_bsz\na,0,10,8,4\n").unwrap();
    let e = load_trace(&t, TraceFormat::Auto, &ColumnMap::default()).unwrap_err().to_string();
    assert!(e.contains("g.csv:2") && e.contains("smaller than the job's 8 GPUs"), "{e}");
}

#[test]
fn deadline_figures_by_hand() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("dl.csv");
    // One node of 2 GPUs, strict FIFO, trace speed:
    //   a (2 GPUs) 0-100, deadline 150: met, lateness 0;
    //   b (2 GPUs) waits, 100-150, deadline 200: met, 0;
    //   c (2 GPUs) 150-250, deadline 180: missed, 70 s late;
    //   d (1 GPU, no deadline) 250-310: not counted;
    //   e (1 GPU) 250-350, deadline 120 < submit 40 + 100: infeasible, 230 s late.
    // deadline_jobs 4, met 2 -> ratio 0.5; lateness (0 + 0 + 70 + 230) / 4 = 75 s.
    std::fs::write(
        &t,
        "job_id,submit_time,duration,gpu_num,deadline\na,0,100,2,150\nb,10,50,2,200\nc,20,100,2,180\nd,30,60,1,\ne,40,100,1,120\n",
    )
    .unwrap();
    let (out, err) = simulate(d.path(), &["--trace", t.to_str().unwrap(), "--nodes", "1", "--gpus-per-node", "2"]);
    let s = summary(&out);
    assert_eq!(s["deadline_jobs"], 4);
    assert_eq!(s["deadline_satisfactory_ratio"], 0.5);
    assert_eq!(s["deadline_lateness_mean_s"], 75.0);
    assert_eq!(s["deadline_infeasible_jobs"], 1);
    assert!(err.contains("1 of 4 jobs with a deadline have one earlier than submit + duration"), "{err}");
    // The schedule the figures rest on.
    let ends: Vec<(String, String)> =
        csv_rows(&out.join("jobs.csv")).into_iter().map(|r| (r["job_id"].clone(), r["end_s"].clone())).collect();
    let want: Vec<(String, String)> = [("a", "100"), ("b", "150"), ("c", "250"), ("d", "310"), ("e", "350")]
        .map(|(j, e)| (j.into(), e.into()))
        .into();
    assert_eq!(ends, want);

    // Without a deadline column the four keys are null.
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num\na,0,100,2\n").unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let (out, _) = simulate(d2.path(), &["--trace", t.to_str().unwrap()]);
    let s = summary(&out);
    for k in ["deadline_jobs", "deadline_satisfactory_ratio", "deadline_lateness_mean_s", "deadline_infeasible_jobs"] {
        assert!(s[k].is_null(), "{k} = {}", s[k]);
    }
}

#[test]
fn a_bad_deadline_names_the_line() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("dl.csv");
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,deadline\na,0,100,2,150\nb,10,50,2,soon\n").unwrap();
    let e = load_trace(&t, TraceFormat::Auto, &ColumnMap::default()).unwrap_err().to_string();
    assert!(e.contains("dl.csv:3") && e.contains("`deadline`") && e.contains("soon"), "{e}");
}

#[test]
fn a_helios_log_replays_on_the_venus_preset_alone() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("cluster_log.csv");
    // HeliosData's cluster_log.csv layout. vcJsw has 32 nodes (256 GPUs),
    // vcgkz 1 node (8 GPUs) in Lucid's September configuration.
    //   1: vcJsw 16 GPUs at 0 s, 3,600 s;
    //   2: vcgkz 8 GPUs at 600 s, 1,200 s -> ends 1,800 s;
    //   3: vcgkz 8 GPUs at 1,200 s waits for 2: starts 1,800 s (queue 600 s);
    //   4: vcXXX (not a Venus VC of the table) -> unknown_vc;
    //   5: vcgkz 16 GPUs > its 8 (but < 1,080) -> exceeds_vc;
    //   6: a CPU job -> zero_gpus.
    std::fs::write(
        &t,
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n\
         1,uA,vcJsw,16,32,2,COMPLETED,2020-09-01 00:00:00,2020-09-01 00:00:00,2020-09-01 01:00:00,3600,0\n\
         2,uB,vcgkz,8,8,1,COMPLETED,2020-09-01 00:10:00,2020-09-01 00:10:00,2020-09-01 00:30:00,1200,0\n\
         3,uC,vcgkz,8,8,1,FAILED,2020-09-01 00:20:00,2020-09-01 00:30:00,2020-09-01 00:40:00,600,600\n\
         4,uD,vcXXX,1,4,1,COMPLETED,2020-09-01 00:21:00,2020-09-01 00:21:00,2020-09-01 00:31:00,600,0\n\
         5,uE,vcgkz,16,32,2,CANCELLED,2020-09-01 00:22:00,2020-09-01 00:22:00,2020-09-01 00:32:00,600,0\n\
         6,uF,vcJsw,0,4,1,COMPLETED,2020-09-01 00:23:00,2020-09-01 00:23:00,2020-09-01 00:33:00,600,0\n",
    )
    .unwrap();
    let (out, _) = simulate(d.path(), &["--trace", t.to_str().unwrap(), "--cluster", "helios-venus"]);
    let s = summary(&out);
    assert_eq!(s["cluster"], "helios-venus");
    assert_eq!(s["gpus_total"], 1080);
    assert_eq!(s["jobs_completed"], 3);
    let skipped = &s["jobs_skipped_by_reason"];
    assert_eq!((skipped["unknown_vc"].as_u64(), skipped["exceeds_vc"].as_u64()), (Some(1), Some(1)));
    assert_eq!(skipped["zero_gpus"], 1);
    let vcs = csv_rows(&out.join("vc_summary.csv"));
    assert_eq!(vcs.len(), 15);
    let vc = |name: &str| vcs.iter().find(|r| r["vc"] == name).unwrap().clone();
    assert_eq!((vc("vcJsw")["gpus"].as_str(), vc("vcJsw")["jobs"].as_str()), ("256", "1"));
    assert_eq!((vc("vcgkz")["gpus"].as_str(), vc("vcgkz")["jobs"].as_str()), ("8", "2"));
    let jobs = csv_rows(&out.join("jobs.csv"));
    let j3 = jobs.iter().find(|r| r["job_id"] == "3").unwrap();
    assert_eq!((j3["start_s"].as_str(), j3["queue_delay_s"].as_str()), ("1800", "600"));
}

#[test]
fn the_other_helios_presets_and_the_help_list_them() {
    let o = dlsched(&["simulate", "--help"]);
    let help = text(&o.stdout);
    for p in ["helios-venus", "helios-earth", "helios-saturn", "helios-uranus"] {
        assert!(help.contains(p), "--help does not list {p}");
    }
    // Earth: ⌈997 / 8⌉ = 125 nodes = 1,000 GPUs, one partition: any VC runs.
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("j.csv");
    std::fs::write(&t, "job_id,submit_time,duration,gpu_num,vc\na,0,10,8,vcAnything\n").unwrap();
    let (out, _) = simulate(d.path(), &["--trace", t.to_str().unwrap(), "--cluster", "helios-earth"]);
    let s = summary(&out);
    assert_eq!((s["gpus_total"].as_u64(), s["jobs_completed"].as_u64()), (Some(1000), Some(1)));
}

#[test]
fn an_undetected_header_lists_every_optional_jobs_csv_column() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("x.csv");
    std::fs::write(&t, "when,what\n1,2\n").unwrap();
    let e = load_trace(&t, TraceFormat::Auto, &ColumnMap::default()).unwrap_err().to_string();
    assert!(e.contains("cannot tell the trace format"), "{e}");
    let line = e.lines().find(|l| l.trim_start().starts_with("jobs-csv:")).expect("a jobs-csv line");
    let optional = ["vc", "user", "model", "local_bsz", "global_bsz", "deadline", "num_iteration"];
    for f in optional {
        assert!(line.contains(&format!("[,{f}]")), "`{f}` missing from: {line}");
    }
    assert_eq!(ColumnMap::optional_fields(), optional);
    // Every format auto-detection knows is listed, the Pollux/Sia workloads' too.
    assert!(e.contains("elastic-workload: name,time,application,num_replicas,batch_size"), "{e}");
}
