//! Every trace format: a good file, a malformed file, a file with unusable rows.

use std::path::Path;

use dlsched::cluster::{Cluster, ClusterSpec, load_vc_file};
use dlsched::job::SkipReason;
use dlsched::policy::placement::PlacementKind;
use dlsched::trace::{ColumnMap, TraceFormat, load_trace};
use dlsched::workload::build_workload;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn lab16() -> Cluster {
    Cluster::new(dlsched::cluster::ClusterPreset::Lab16.spec()).unwrap()
}

fn err(path: &Path, format: TraceFormat) -> String {
    load_trace(path, format, &ColumnMap::default()).unwrap_err().to_string()
}

#[test]
fn philly_rfold() {
    let d = tempfile::tempdir().unwrap();
    let head = "#job id,arrival time (sec),topology,shape,size,duration (sec)\n";
    let good = write(
        d.path(),
        "r.csv",
        &format!("{head}0,0.0,CLOS,1,1,30.0\n1,5.5,CLOS,2+2,4,60.0\n2,5.5,CLOS,1,1,0.0\n3,7.0,CLOS,8+8+8,24,10.0\n"),
    );
    let t = load_trace(&good, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!(t.format, TraceFormat::PhillyRfold);
    assert_eq!(t.records.len(), 4);
    assert_eq!(t.records[1].submit_ms, 5_500);
    assert_eq!(t.records[1].shape.as_deref(), Some(&[2, 2][..]));
    assert_eq!(t.records[1].line, 3);
    let w = build_workload(t.records, &lab16(), PlacementKind::Consolidate.build());
    assert_eq!(w.jobs.len(), 2);
    let reasons: Vec<_> = w.skipped.iter().map(|s| (s.name.as_str(), s.reason)).collect();
    assert_eq!(reasons, vec![("2", SkipReason::NonpositiveDuration), ("3", SkipReason::ExceedsCluster)]);

    let bad = write(d.path(), "bad.csv", &format!("{head}0,0.0,CLOS,1,1,30.0\n1,soon,CLOS,1,1,60.0\n"));
    let e = err(&bad, TraceFormat::Auto);
    assert!(e.contains("bad.csv:3") && e.contains("arrival time (sec)") && e.contains("soon"), "{e}");
    let bad_shape = write(d.path(), "shape.csv", &format!("{head}0,0.0,CLOS,2+1,4,30.0\n"));
    let e = err(&bad_shape, TraceFormat::Auto);
    assert!(e.contains("shape.csv:2") && e.contains("`shape`") && e.contains("does not add up"), "{e}");
    let short = write(d.path(), "short.csv", &format!("{head}0,0.0,CLOS,1\n"));
    let e = err(&short, TraceFormat::Auto);
    assert!(e.contains("short.csv:2") && e.contains("4 fields") && e.contains("6"), "{e}");
}

#[test]
fn philly_pollux() {
    let d = tempfile::tempdir().unwrap();
    // Unsorted, with a duplicate row and a 0-GPU row; origin = earliest time.
    let text = "timestamp,duration,num_gpus,gpu_time,cluster\n\
        2017-10-09 07:01:55,66.0,1,66.0,vcA\n\
        2017-10-09 06:13:03,2951.0,2,5902.0,vcB\n\
        2017-10-09 07:01:55,66.0,1,66.0,vcA\n\
        2017-10-09 06:13:04,10.0,0,0.0,vcB\n\n";
    let p = write(d.path(), "p.csv", text);
    let t = load_trace(&p, TraceFormat::Philly, &ColumnMap::default()).unwrap();
    assert_eq!(t.format, TraceFormat::PhillyPollux);
    assert_eq!(t.origin.as_deref(), Some("2017-10-09 06:13:03"));
    // 07:01:55 - 06:13:03 = 48 min 52 s = 2932 s.
    assert_eq!(t.records[0].submit_ms, 2_932_000);
    assert_eq!(t.records[1].submit_ms, 0);
    assert_eq!(t.records[0].vc(), Some("vcA"));
    let w = build_workload(t.records, &lab16(), PlacementKind::Consolidate.build());
    // Ordered by (submit, trace order): row 1 (t=0), then rows 0 and 2 (t=2932, duplicates kept).
    let names: Vec<_> = w.jobs.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["1", "0", "2"]);
    assert_eq!(w.skipped_by_reason().get("zero_gpus"), Some(&1));

    let bad = write(
        d.path(),
        "bad.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,a\n2017-13-09 07:01:55,66.0,1,66.0,a\n",
    );
    let e = err(&bad, TraceFormat::PhillyPollux);
    assert!(e.contains("bad.csv:3") && e.contains("`timestamp`") && e.contains("YYYY-MM-DD"), "{e}");
}

const HELIOS_HEAD: &str =
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n";

#[test]
fn helios_cluster_log() {
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "{HELIOS_HEAD}\
        j1,u1,vcA,1,6,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:00:10,2020-04-01 00:01:10,60,0\n\
        j2,u2,vcB,8,48,1,FAILED,2020-04-01 00:00:00,2020-04-01 00:00:05,2020-04-01 01:00:05,3600,5\n\
        j3,u1,vcA,0,4,1,COMPLETED,2020-04-01 00:00:20,2020-04-01 00:00:20,2020-04-01 00:00:50,30,0\n\
        j4,u3,vcC,2,12,1,CANCELLED,2020-04-01 00:00:30,,,0,0\n"
    );
    let p = write(d.path(), "cluster_log.csv", &text);
    let t = load_trace(&p, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!(t.format, TraceFormat::Helios);
    assert_eq!(t.records[0].job_id, "j1");
    assert_eq!(t.records[0].submit_ms, 10_000);
    assert_eq!(t.records[0].user(), Some("u1"));
    // Partitions a (1 node × 8) and b: vcC is not one of them.
    let vcs = write(d.path(), "vcs.csv", "vc,nodes,gpus_per_node\nvcA,1,8\nvcB,1,8\n");
    let cluster = Cluster::new(load_vc_file(&vcs, "V100", 16384).unwrap()).unwrap();
    let w = build_workload(t.records, &cluster, PlacementKind::Consolidate.build());
    assert_eq!(w.jobs.len(), 2);
    let m = w.skipped_by_reason();
    assert_eq!((m.get("zero_gpus"), m.get("nonpositive_duration")), (Some(&1), Some(&1)));
    // j4 is skipped for its duration before its VC is looked at.
    assert_eq!(m.get("unknown_vc"), None);

    let bad = write(
        d.path(),
        "bad_log.csv",
        &format!("{HELIOS_HEAD}j1,u1,vcA,one,6,1,COMPLETED,2020-04-01 00:00:10,,,60,0\n"),
    );
    let e = err(&bad, TraceFormat::Helios);
    assert!(e.contains("bad_log.csv:2") && e.contains("`gpu_num`") && e.contains("one"), "{e}");

    let unknown =
        write(d.path(), "u.csv", &format!("{HELIOS_HEAD}j9,u,vcZ,1,1,1,COMPLETED,2020-04-01 00:00:10,,,60,0\n"));
    let t = load_trace(&unknown, TraceFormat::Helios, &ColumnMap::default()).unwrap();
    let w = build_workload(t.records, &cluster, PlacementKind::Consolidate.build());
    assert_eq!(w.skipped_by_reason().get("unknown_vc"), Some(&1));
}

#[test]
fn jobs_csv_with_mapped_columns() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "mine.csv", "id,arrival,runtime,gpus,pool\na,0,10,1,x\nb,2,0,1,x\nc,3,5,9,x\n");
    let mut cols = ColumnMap::default();
    cols.parse_pairs("job_id=id,submit_time=arrival,duration=runtime,gpu_num=gpus,vc=pool").unwrap();
    let t = load_trace(&p, TraceFormat::Auto, &cols).unwrap();
    assert_eq!(t.format, TraceFormat::JobsCsv);
    assert_eq!(t.records[0].vc(), Some("x"));
    let small = Cluster::new(ClusterSpec::uniform("1x8", 1, 8, "V100", 16384)).unwrap();
    let w = build_workload(t.records, &small, PlacementKind::Consolidate.build());
    assert_eq!(w.jobs.len(), 1);
    let m = w.skipped_by_reason();
    assert_eq!((m.get("nonpositive_duration"), m.get("exceeds_cluster")), (Some(&1), Some(&1)));

    // The same mapping from TOML.
    let toml = write(
        d.path(),
        "map.toml",
        "[columns]\njob_id = \"id\"\nsubmit_time = \"arrival\"\nduration = \"runtime\"\ngpu_num = \"gpus\"\n",
    );
    let mut from_toml = ColumnMap::default();
    from_toml.load_toml(&toml).unwrap();
    assert_eq!(from_toml.column("submit_time"), "arrival");
    assert!(ColumnMap::default().parse_pairs("arrival_time=x").unwrap_err().contains("unknown jobs-csv field"));

    // Without the mapping the header matches no format.
    let e = err(&p, TraceFormat::Auto);
    assert!(e.contains("cannot tell the trace format") && e.contains("jobs-csv"), "{e}");
    // Forced format, missing column: named.
    let e = err(&p, TraceFormat::JobsCsv);
    assert!(e.contains("no column `job_id`"), "{e}");
    let neg = write(d.path(), "neg.csv", "job_id,submit_time,duration,gpu_num\na,-5,10,1\n");
    let e = err(&neg, TraceFormat::JobsCsv);
    assert!(e.contains("neg.csv:2") && e.contains("`submit_time`"), "{e}");
}

#[test]
fn jobs_larger_than_any_node_spread_over_whole_nodes() {
    // A 3-GPU job on four 1-GPU nodes is larger than any node, so consolidate
    // takes three whole nodes; it is admitted, not skipped.
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "j.csv", "job_id,submit_time,duration,gpu_num\na,0,10,3\n");
    let t = load_trace(&p, TraceFormat::JobsCsv, &ColumnMap::default()).unwrap();
    let c = Cluster::new(ClusterSpec::uniform("4x1", 4, 1, "K80", 12288)).unwrap();
    let w = build_workload(t.records, &c, PlacementKind::Consolidate.build());
    assert_eq!(w.jobs.len(), 1, "a job larger than every node spreads over whole nodes");
}

#[test]
fn line_numbers_count_crlf_and_blank_lines() {
    let d = tempfile::tempdir().unwrap();
    let crlf = write(d.path(), "crlf.csv", "job_id,submit_time,duration,gpu_num\r\n1,0,100,2\r\n2,x,100,2\r\n");
    let e = err(&crlf, TraceFormat::JobsCsv);
    assert!(e.contains("crlf.csv:3:"), "{e}");
    let blank = write(d.path(), "blank.csv", "job_id,submit_time,duration,gpu_num\n1,0,100,2\n\n2,x,100,2\n");
    let e = err(&blank, TraceFormat::JobsCsv);
    assert!(e.contains("blank.csv:4:"), "{e}");
    let short = write(d.path(), "short.csv", "job_id,submit_time,duration,gpu_num\r\n1,0,100,2\r\n\r\n2,0\r\n");
    let e = err(&short, TraceFormat::JobsCsv);
    assert!(e.contains("short.csv:4:"), "{e}");
}

#[test]
fn ambiguous_input_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let dup = write(d.path(), "dup.csv", "job_id,submit_time,duration,gpu_num\n7,0,100,2\n8,0,100,2\n7,5,100,1\n");
    let e = err(&dup, TraceFormat::JobsCsv);
    assert!(e.contains("dup.csv:4") && e.contains("`7` repeats line 2"), "{e}");
    let twice = write(d.path(), "twice.csv", "job_id,submit_time,duration,gpu_num,gpu_num\n7,0,100,2,3\n");
    let e = err(&twice, TraceFormat::JobsCsv);
    assert!(e.contains("twice.csv:1") && e.contains("`gpu_num`") && e.contains("twice"), "{e}");
    let empty_id = write(d.path(), "noid.csv", "job_id,submit_time,duration,gpu_num\n,0,100,2\n");
    let e = err(&empty_id, TraceFormat::JobsCsv);
    assert!(e.contains("noid.csv:2") && e.contains("empty job id"), "{e}");
    let huge = write(d.path(), "huge.csv", "job_id,submit_time,duration,gpu_num\n1,0,1e300,2\n");
    let e = err(&huge, TraceFormat::JobsCsv);
    assert!(e.contains("huge.csv:2") && e.contains("`duration`") && e.contains("out of range"), "{e}");
    let leap =
        write(d.path(), "leap.csv", &format!("{HELIOS_HEAD}j1,u1,vcA,1,6,1,COMPLETED,2020-04-01 00:00:60,,,60,0\n"));
    let e = err(&leap, TraceFormat::Helios);
    assert!(e.contains("leap.csv:2") && e.contains("`submit_time`"), "{e}");
    let mut cols = ColumnMap::default();
    assert!(cols.parse_pairs("job_id=id,job_id=arrival").unwrap_err().contains("mapped twice"));
    let mut cols = ColumnMap::default();
    assert!(cols.parse_pairs("submit_time=t,duration=t").unwrap_err().contains("both"));
    // A column map on a trace that is not jobs-csv.
    let rfold = write(
        d.path(),
        "r.csv",
        "#job id,arrival time (sec),topology,shape,size,duration (sec)\n0,0.0,CLOS,1,1,30.0\n",
    );
    let mut cols = ColumnMap::default();
    cols.parse_pairs("job_id=id").unwrap();
    let e = load_trace(&rfold, TraceFormat::PhillyRfold, &cols).unwrap_err().to_string();
    assert!(e.contains("apply to jobs-csv"), "{e}");
    // A VC without nodes.
    let vcs = write(d.path(), "vcs0.csv", "vc,nodes,gpus_per_node\na,0,8\n");
    let e = load_vc_file(&vcs, "V100", 16384).unwrap_err().to_string();
    assert!(e.contains("vcs0.csv:2") && e.contains("no nodes"), "{e}");
}

#[test]
fn recorded_split_comes_from_the_trace_or_the_packed_placement() {
    // RFold `shape` 1+3 is the recorded split (sorted descending: [3, 1]); a
    // jobs-csv job of 12 GPUs on 8-GPU nodes was, by assumption, packed as
    // consolidate packs it on an empty partition: one whole node + 4 = [8, 4].
    let d = tempfile::tempdir().unwrap();
    let head = "#job id,arrival time (sec),topology,shape,size,duration (sec)\n";
    let r = write(d.path(), "r.csv", &format!("{head}0,0.0,CLOS,1+3,4,30.0\n"));
    let t = load_trace(&r, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    let c = Cluster::new(ClusterSpec::uniform("2x8", 2, 8, "V100", 16384)).unwrap();
    let w = build_workload(t.records, &c, PlacementKind::Consolidate.build());
    assert_eq!(w.jobs.specs()[0].recorded_split[..], [3, 1]);
    let j = write(
        d.path(),
        "j.csv",
        "job_id,submit_time,duration,gpu_num,model,local_bsz\na,0,10,12,resnet50-imagenet,32\n",
    );
    let t = load_trace(&j, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    let w = build_workload(t.records, &c, PlacementKind::Consolidate.build());
    let s = &w.jobs.specs()[0];
    assert_eq!(s.recorded_split[..], [8, 4]);
    assert_eq!((s.model(), s.local_bsz()), (Some("resnet50-imagenet"), Some(32)));
}

#[test]
fn recorded_placement_replays_the_trace_shape() {
    // Two nodes of 4 GPUs. Job a (shape 2+2) takes 2 GPUs on each node under
    // `recorded` (consolidate would pack it on one node); job b (shape 3+1 is
    // fine on 4-GPU nodes) waits for a to end since each node has 2 free.
    // Job c (shape 5) can never fit a 4-GPU node: skipped as unplaceable.
    let d = tempfile::tempdir().unwrap();
    let head = "#job id,arrival time (sec),topology,shape,size,duration (sec)\n";
    let r = write(d.path(), "r.csv", &format!("{head}a,0,CLOS,2+2,4,10\nb,1,CLOS,3+1,4,5\nc,2,CLOS,5,5,5\n"));
    let t = load_trace(&r, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    let spec = ClusterSpec::uniform("2x4", 2, 4, "V100", 16384);
    let c = Cluster::new(spec.clone()).unwrap();
    let w = build_workload(t.records.clone(), &c, PlacementKind::Recorded.build());
    assert_eq!(
        w.skipped.iter().map(|s| (s.name.as_str(), s.reason)).collect::<Vec<_>>(),
        vec![("c", SkipReason::Unplaceable)]
    );
    let p = dlsched::policy::config::PolicyConfig {
        order: dlsched::policy::queue::QueueOrder::Fifo,
        backfill: false,
        placement: PlacementKind::Recorded,
    };
    let out = dlsched::engine::Simulation::new(
        c,
        w.jobs,
        p.build(1).unwrap(),
        Box::new(dlsched::profile::TraceSpeed),
        dlsched::engine::EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .run()
    .unwrap();
    let done: Vec<_> = out
        .jobs
        .iter()
        .map(|(s, st)| match st {
            dlsched::job::JobState::Completed(d) => (s.name.to_string(), d.start.as_ms() / 1000, d.nodes_spanned),
            _ => panic!("unfinished"),
        })
        .collect();
    assert_eq!(done, vec![("a".to_string(), 0, 2), ("b".to_string(), 10, 2)]);
    // Under consolidate, c (5 GPUs, more than a node) spreads 4 + 1: all three run.
    let c = Cluster::new(spec).unwrap();
    let w = build_workload(t.records, &c, PlacementKind::Consolidate.build());
    assert_eq!((w.jobs.len(), w.skipped.len()), (3, 0));
}

#[test]
fn review_findings_stay_fixed() {
    let d = tempfile::tempdir().unwrap();
    // RFold shapes: a server with 0 GPUs, and parts whose sum overflows u32.
    let head = "#job id,arrival time (sec),topology,shape,size,duration (sec)\n";
    let zero = write(d.path(), "zero.csv", &format!("{head}a,0,CLOS,4+0,4,10\n"));
    assert!(err(&zero, TraceFormat::Auto).contains("0 GPUs"));
    let big = write(d.path(), "big.csv", &format!("{head}a,0,CLOS,4294967295+5,4,10\n"));
    assert!(err(&big, TraceFormat::Auto).contains("does not add up"));
    // A VC file whose only VC is called `default` still partitions by name.
    let vcs = write(d.path(), "v.csv", "vc,nodes\ndefault,1\n");
    let cluster = Cluster::new(load_vc_file(&vcs, "V100", 16384).unwrap()).unwrap();
    let jobs =
        write(d.path(), "j.csv", "job_id,submit_time,duration,gpu_num,vc\na,0,10,1,research\nb,0,10,1,default\n");
    let t = load_trace(&jobs, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    let w = build_workload(t.records, &cluster, PlacementKind::Consolidate.build());
    assert_eq!(w.skipped_by_reason().get("unknown_vc"), Some(&1));
    assert_eq!(w.jobs.len(), 1);
    // Under `recorded`, jobs without a trace shape are placed as consolidate
    // places them: 3 nodes × 8 GPUs, x (3 GPUs), y (12), z (8): same schedule.
    let jobs = write(d.path(), "r.csv", "job_id,submit_time,duration,gpu_num\nx,0,100,3\ny,1,100,12\nz,2,10,8\n");
    let t = load_trace(&jobs, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    let spec = ClusterSpec::uniform("3x8", 3, 8, "V100", 16384);
    let run = |placement| {
        let out = crate::common::run(
            t.records.clone(),
            spec.clone(),
            crate::common::policy(dlsched::policy::queue::QueueOrder::Fifo, false, placement),
        );
        crate::common::schedule(&out)
    };
    assert_eq!(run(PlacementKind::Recorded), run(PlacementKind::Consolidate));
}

#[test]
fn admission_of_a_list_answers_each_job_as_admitting_it_alone() {
    // Admission keeps answers by (VC, GPUs, memory, recorded shape) and by
    // placement class; a job admitted alone starts from empty tables, so the
    // two routes agree only if what is kept is what would be recomputed.
    use std::sync::Arc;
    let shapes: [&[u32]; 7] = [&[1], &[2, 2], &[3, 1], &[1, 3], &[5], &[1, 1, 1, 1, 1], &[4]];
    let spec = ClusterSpec::uniform("2x4", 2, 4, "V100", 16384);
    let c = Cluster::new(spec).unwrap();
    for placement in [PlacementKind::Recorded, PlacementKind::Consolidate, PlacementKind::FirstFit] {
        let mut x = 5u64;
        let records: Vec<_> = (0..400u64)
            .map(|i| {
                x = crate::common::mix(x);
                let shape = shapes[(x % 7) as usize];
                let gpus: u32 = shape.iter().sum();
                // Some rows without a recorded shape, some with a memory need
                // (one too large for a V100 of 16 GiB).
                let mut r = dlsched::trace::TraceRecord {
                    shape: (!(x >> 8).is_multiple_of(5)).then(|| Arc::from(shape)),
                    line: i + 2,
                    ..dlsched::trace::TraceRecord::new(i.to_string(), i, 10_000, gpus)
                };
                let mem = [0, 0, 8_000, 16_000, 20_000][((x >> 16) % 5) as usize];
                if mem > 0 {
                    r = r.with_extra(|e| e.gpu_mem_mib = Some(mem));
                }
                r
            })
            .collect();
        let answer = |w: &dlsched::workload::Workload, name: &str| {
            if let Some(s) = w.skipped.iter().find(|s| s.name == name) {
                return format!("skip {:?}", s.reason);
            }
            let s = w.jobs.specs().iter().find(|s| s.name == name).expect("admitted or skipped");
            format!("split {:?} recorded {}", s.recorded_split, s.recorded_shape)
        };
        let all = build_workload(records.clone(), &c, placement.build());
        let mut kinds = std::collections::BTreeSet::new();
        for r in &records {
            let alone = build_workload(vec![r.clone()], &c, placement.build());
            let want = answer(&alone, &r.job_id);
            assert_eq!(answer(&all, &r.job_id), want, "{placement:?} job {}", r.job_id);
            kinds.insert(want);
        }
        // Admitted with several splits, and skipped for two reasons.
        assert!(kinds.len() >= 6, "{placement:?} {kinds:?}");
    }
}

#[test]
fn blank_lines_before_the_header_are_skipped_and_counted() {
    let d = tempfile::tempdir().unwrap();
    // Lines 1-2 blank (the second CRLF), header on line 3, rows on 4 and 5.
    let p = write(d.path(), "b.csv", "\n\r\njob_id,submit_time,duration,gpu_num\na,0,10,1\nb,5,20,2\n");
    // Auto-detection reads the header the explicit reader reads.
    let auto = load_trace(&p, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    let forced = load_trace(&p, TraceFormat::JobsCsv, &ColumnMap::default()).unwrap();
    assert_eq!(auto.format, TraceFormat::JobsCsv);
    let lines =
        |t: &dlsched::trace::LoadedTrace| t.records.iter().map(|r| (r.job_id.to_string(), r.line)).collect::<Vec<_>>();
    assert_eq!(lines(&auto), vec![("a".to_string(), 4), ("b".to_string(), 5)]);
    assert_eq!(lines(&auto), lines(&forced));
    // A header error names line 3, under either format.
    let dup = write(d.path(), "dup.csv", "\n\njob_id,submit_time,duration,gpu_num,gpu_num\na,0,10,1,1\n");
    for f in [TraceFormat::Auto, TraceFormat::JobsCsv] {
        let e = err(&dup, f);
        assert!(e.starts_with(&format!("{}:3: column `gpu_num`", dup.display())), "{e}");
    }
    // A header no format matches: quoted, with its line.
    let odd = write(d.path(), "odd.csv", "\n\nfoo,bar\n1,2\n");
    let e = err(&odd, TraceFormat::Auto);
    assert!(e.contains("from the header `foo,bar` (line 3)"), "{e}");
    let e = err(&odd, TraceFormat::JobsCsv);
    assert!(e.contains("no column `job_id` in the header (foo, bar) (line 3)"), "{e}");
    // A first line of lone CRs before a CRLF (found by the byte fuzzer) is
    // blank too: the duplicate column is on line 2.
    let cr = write(d.path(), "cr.csv", "\r\r\njob_id,submit_time,duration,gpu_num,gpu_num\r\na,0,10,1,1\r\n");
    let e = err(&cr, TraceFormat::JobsCsv);
    assert!(e.starts_with(&format!("{}:2: column `gpu_num`", cr.display())), "{e}");
    // Without blank lines the messages are as before: no line for line 1.
    let e = err(&write(d.path(), "odd1.csv", "foo,bar\n1,2\n"), TraceFormat::JobsCsv);
    assert!(e.ends_with("no column `job_id` in the header (foo, bar)"), "{e}");
}

#[test]
fn a_header_only_trace_says_so_and_names_the_file() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "h.csv", "job_id,submit_time,duration,gpu_num\n");
    let out = crate::common::dlsched(&["simulate", "--trace", p.to_str().unwrap()]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains(&format!("{}: the trace has no job rows (header only)", p.display())), "{e}");
    // Rows that all fail admission: the file is named before the count.
    let big = write(d.path(), "big.csv", "job_id,submit_time,duration,gpu_num\na,0,10,64\n");
    let out = crate::common::dlsched(&["simulate", "--trace", big.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains(&format!("{}: no job of the 1 rows can run on cluster `lab16`", big.display())), "{e}");
}

/// A VC file's errors name the line in the file: blank lines count (the csv
/// reader's own count skips them). Header on 1, blanks on 2, 3 and 5 (the
/// last CRLF), `research` on 4, the bad row on 6.
#[test]
fn vc_file_errors_count_blank_lines() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "vcs.csv", "vc,nodes\n\n\nresearch,2\n\r\nprod,x\n");
    let e = dlsched::cluster::load_vc_file(&p, "generic", 16 * 1024).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:6: column `nodes`", p.display())), "{e}");
}

/// The Pollux/Sia elastic workloads: each row a work-defined job with its
/// application and tuned GPUs and batch, no duration; admission keeps it.
#[test]
fn elastic_workload() {
    let d = tempfile::tempdir().unwrap();
    let head = "name,time,application,num_replicas,batch_size\n";
    let good = write(d.path(), "w.csv", &format!("{head}cifar10-0,53,cifar10,6,2048\nbert-1,401.5,bert,1,12\n"));
    let t = load_trace(&good, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!(t.format, TraceFormat::ElasticWorkload);
    assert_eq!(t.records.len(), 2);
    let r = &t.records[1];
    // 401.5 s = 401,500 ms; line 3 of the file.
    assert_eq!((r.job_id.as_str(), r.submit_ms, r.duration_ms, r.gpus, r.line), ("bert-1", 401_500, 0, 1, 3));
    let e = r.elastic().expect("work-defined");
    assert_eq!((e.app.as_str(), e.tuned_gpus, e.tuned_bsz, e.adaptive), ("bert", 1, 12, true));
    let w = build_workload(t.records, &lab16(), PlacementKind::Consolidate.build());
    assert_eq!((w.jobs.len(), w.skipped.len()), (2, 0), "no duration is no reason to skip a work-defined job");
    for (row, msg) in [
        ("x,1,cifar10,0,64", "column `num_replicas`: a work-defined job needs at least 1 GPU, got 0"),
        ("x,1,cifar10,2,0", "column `batch_size`: the total batch must be at least 1 sample, got 0"),
        ("x,1,,2,64", "column `application`: no application named"),
    ] {
        let bad = write(d.path(), "b.csv", &format!("{head}{row}\n"));
        let e = err(&bad, TraceFormat::ElasticWorkload);
        assert!(e.ends_with(&format!("b.csv:2: {msg}")), "{e}");
    }
}

/// ElasticFlow's adapted Pollux simulator's optional columns: `ddl` (an
/// absolute deadline, s) and `max_sample` (a sample budget); empty fields
/// mean none; bad values name file, line and column.
#[test]
fn elastic_workload_with_deadlines_and_sample_budgets() {
    let d = tempfile::tempdir().unwrap();
    let head = "name,time,application,num_replicas,batch_size,ddl,max_sample\n";
    // Job 0: ddl 3,719,996 s, budget 2,011 × 4,096 = 8,237,056 samples
    // (pandas' float form); job 1: neither (empty fields).
    let rows = "0,3715485,cifar10,1,4096,3719996,8237056.0\n1,3717550,ncf,8,32768,,\n";
    let good = write(d.path(), "p.csv", &format!("{head}{rows}"));
    let t = load_trace(&good, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!(t.format, TraceFormat::ElasticWorkload);
    let (a, b) = (&t.records[0], &t.records[1]);
    assert_eq!((a.submit_ms, a.deadline_ms()), (3_715_485_000, Some(3_719_996_000)));
    assert_eq!(a.elastic().unwrap().sample_budget, Some(8_237_056));
    assert_eq!((b.deadline_ms(), b.elastic().unwrap().sample_budget), (None, None));
    // Without the columns, as before: no deadline, no budget.
    let plain = write(d.path(), "q.csv", "name,time,application,num_replicas,batch_size\nx,0,bert,1,12\n");
    let t = load_trace(&plain, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!((t.records[0].deadline_ms(), t.records[0].elastic().unwrap().sample_budget), (None, None));
    for (row, msg) in [
        ("x,1,cifar10,1,64,-5,100", "column `ddl`: `-5` is negative"),
        ("x,1,cifar10,1,64,soon,100", "column `ddl`: `soon` is not a number of seconds"),
        ("x,1,cifar10,1,64,9,0", "column `max_sample`: `0` is not a whole number of samples from 1 to 2^53"),
        ("x,1,cifar10,1,64,9,12.5", "column `max_sample`: `12.5` is not a whole number of samples"),
        ("x,1,cifar10,1,64,9,-3", "column `max_sample`: `-3` is not a whole number of samples"),
        ("x,1,cifar10,1,64,9,1e300", "column `max_sample`: `1e300` is not a whole number of samples"),
    ] {
        let bad = write(d.path(), "b.csv", &format!("{head}{row}\n"));
        let e = err(&bad, TraceFormat::ElasticWorkload);
        assert!(e.contains(&format!("b.csv:2: {msg}")), "{e}");
    }
}

/// The shared Pollux workloads and Sia's Philly and Saturn workloads read
/// as they are: 160 work-defined jobs each.
#[test]
fn the_pollux_and_sia_workloads_replay_as_they_are() {
    let Some(shared) = crate::common::shared("the Pollux and Sia workloads") else { return };
    for dir in ["traces/pollux-workloads", "traces/sia-workloads/philly", "traces/sia-workloads/saturn"] {
        for e in std::fs::read_dir(shared.join(dir)).unwrap() {
            let p = e.unwrap().path();
            let t = load_trace(&p, TraceFormat::Auto, &ColumnMap::default()).unwrap();
            assert_eq!(t.format, TraceFormat::ElasticWorkload, "{}", p.display());
            assert_eq!(t.records.len(), 160, "{}", p.display());
            assert!(t.records.iter().all(|r| r.elastic().is_some() && r.gpus >= 1), "{}", p.display());
        }
    }
}
