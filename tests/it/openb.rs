//! The Alibaba PAI 2023 ("openb") pod lists and node lists, and the GPU-type
//! constraint they bring: a hand-made file parsed to exact records, malformed
//! rows, the real files counted independently, placements that respect the
//! allowed GPU types, and fractional shares never over-committed in a replay.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec, NodeSpec, ShareLimits, load_nodes_file};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::ids::VcId;
use dlsched::job::{JobState, SkipReason};
use dlsched::policy::{config::PolicyConfig, placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::TraceSpeed;
use dlsched::trace::{ColumnMap, TraceFormat, TraceRecord, load_trace};
use dlsched::workload::build_workload;

use crate::common::{rec, shared};

const HEAD: &str =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn load(path: &Path) -> Vec<TraceRecord> {
    load_trace(path, TraceFormat::Auto, &ColumnMap::default()).unwrap().records
}

fn err(path: &Path) -> String {
    load_trace(path, TraceFormat::AlibabaOpenb, &ColumnMap::default()).unwrap_err().to_string()
}

#[test]
fn a_hand_made_pod_list_parses_to_exact_records() {
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "{HEAD}\
         p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n\
         p1,6000,12288,1,460,,LS,Running,427061,12902960,427070\n\
         p2,4000,8192,0,0,,BE,Succeeded,10,20,10\n\
         p3,8000,30000,1,500,,BE,Pending,100,200,\n\
         p4,88000,400000,8,1000,T4|V100M32|T4,Burstable,Failed,300,900,360\n\
         p5,1000,1000,1,250,G2,LS,Running,5,5,5\n"
    );
    let p = write(d.path(), "pods.csv", &text);
    let t = load_trace(&p, TraceFormat::Auto, &ColumnMap::default()).unwrap();
    assert_eq!(t.format, TraceFormat::AlibabaOpenb);
    let want = |id: &str, submit_s: u64, gpus: u32, dur_s: u64, line: u64| TraceRecord {
        line,
        ..rec(id, submit_s, gpus, dur_s)
    };
    let expected = vec![
        want("p0", 0, 1, 12_537_496, 2),
        (want("p1", 427_061, 1, 12_902_960 - 427_070, 3)).with_extra(|e| {
            e.gpu_milli = Some(460);
        }),
        want("p2", 10, 0, 10, 4),
        TraceRecord { skip: Some(SkipReason::NeverScheduled), ..want("p3", 100, 1, 0, 5) }.with_extra(|e| {
            e.gpu_milli = Some(500);
        }),
        (want("p4", 300, 8, 540, 6)).with_extra(|e| {
            e.gpu_types = Some(vec!["T4".into(), "V100M32".into()]);
        }),
        (want("p5", 5, 1, 0, 7)).with_extra(|e| {
            e.gpu_milli = Some(250);
            e.gpu_types = Some(vec!["G2".into()]);
        }),
    ];
    assert_eq!(t.records, expected);

    // On the openb preset: the CPU pod, the pending pod and the 0-s pod are skipped.
    let cluster = Cluster::new(ClusterPreset::AlibabaOpenb.spec()).unwrap();
    let w = build_workload(t.records, &cluster, PlacementKind::ShareBestFit.build());
    let skipped: Vec<_> = w.skipped.iter().map(|s| (s.name.as_str(), s.reason)).collect();
    assert_eq!(
        skipped,
        vec![("p2", SkipReason::ZeroGpus), ("p3", SkipReason::NeverScheduled), ("p5", SkipReason::NonpositiveDuration)]
    );
    let names: Vec<_> = w.jobs.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["p0", "p4", "p1"]);
    assert_eq!(w.jobs.specs()[1].gpu_types(), Some(&["T4".to_string(), "V100M32".to_string()][..]));
}

#[test]
fn malformed_pod_rows_name_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let ok = "p0,1,1,1,1000,,LS,Running,0,10,0\n";
    let cases = [
        ("p1,1,1,1,abc,,LS,Running,0,10,0\n", "gpu_milli", "abc"),
        ("p1,1,1,1,1500,,LS,Running,0,10,0\n", "gpu_milli", "1500"),
        ("p1,1,1,1,0,,LS,Running,0,10,0\n", "gpu_milli", "0 milli-GPU"),
        ("p1,1,1,-1,1000,,LS,Running,0,10,0\n", "num_gpu", "-1"),
        ("p1,1,1,1,1000,,LS,Running,soon,10,0\n", "creation_time", "soon"),
        ("p1,1,1,1,1000,,LS,Running,0,never,0\n", "deletion_time", "never"),
        ("p1,1,1,1,1000,,LS,Running,50,100,40\n", "scheduled_time", "before its creation"),
        ("p1,1,1,1,1000,|,LS,Running,0,10,0\n", "gpu_spec", "names no GPU type"),
        (",1,1,1,1000,,LS,Running,0,10,0\n", "name", "empty pod name"),
    ];
    for (i, (row, column, what)) in cases.iter().enumerate() {
        let p = write(d.path(), &format!("bad{i}.csv"), &format!("{HEAD}{ok}{row}"));
        let e = err(&p);
        assert!(e.contains(&format!("bad{i}.csv:3")) && e.contains(&format!("`{column}`")) && e.contains(what), "{e}");
    }
    let short = write(d.path(), "short.csv", &format!("{HEAD}{ok}p1,1,1\n"));
    let e = err(&short);
    assert!(e.contains("short.csv:3") && e.contains("3 fields"), "{e}");
    // The multigpuNN lists have no times: detected, then refused with the reason.
    let timeless = write(d.path(), "multi.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1000\n");
    let e = load_trace(&timeless, TraceFormat::Auto, &ColumnMap::default()).unwrap_err().to_string();
    assert!(e.contains("creation_time") && e.contains("multigpu"), "{e}");
    // Pod names are job ids: a repeat is refused.
    let dup = write(d.path(), "dup.csv", &format!("{HEAD}{ok}{ok}"));
    let e = err(&dup);
    assert!(e.contains("dup.csv:3") && e.contains("`name`") && e.contains("repeats line 2"), "{e}");
}

/// Plain CSV reading of a pod list, not through the adapter: header → column.
fn plain_rows(path: &Path) -> (Vec<String>, Vec<csv::StringRecord>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().iter().map(str::to_string).collect();
    (header, r.records().map(Result::unwrap).collect())
}

#[test]
fn the_real_pod_lists_counted_independently() {
    let Some(root) = shared("openb pod lists") else { return };
    let dir = root.join("traces/alibaba-pai-2023");
    let cluster = Cluster::new(ClusterPreset::AlibabaOpenb.spec()).unwrap();
    for name in ["openb_pod_list_default.csv", "openb_pod_list_gpuspec33.csv", "openb_pod_list_gpushare60.csv"] {
        let path = dir.join(name);
        let (header, rows) = plain_rows(&path);
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        let (ng, gm, gs, sched) = (col("num_gpu"), col("gpu_milli"), col("gpu_spec"), col("scheduled_time"));
        let (mut cpu, mut pending, mut fractional, mut spec, mut admitted) = (0, 0, 0, 0, 0);
        for r in &rows {
            let gpus: u32 = r[ng].parse().unwrap();
            if gpus == 0 {
                cpu += 1;
            } else if r[sched].is_empty() {
                pending += 1;
            } else {
                admitted += 1;
                fractional += usize::from(gpus == 1 && r[gm].parse::<u32>().unwrap() < 1000);
                spec += usize::from(!r[gs].is_empty());
            }
        }
        let records = load(&path);
        assert_eq!(records.len(), rows.len(), "{name}");
        let w = build_workload(records, &cluster, PlacementKind::ShareBestFit.build());
        let by: BTreeMap<&str, u64> = w.skipped_by_reason();
        assert_eq!(by.get("zero_gpus").copied().unwrap_or(0), cpu, "{name}");
        assert_eq!(by.get("never_scheduled").copied().unwrap_or(0), pending, "{name}");
        // No other reason: every pod scheduled ran for > 0 s, and every
        // gpu_spec type exists in the cluster.
        assert_eq!(by.len(), 2, "{name}: {by:?}");
        assert_eq!(w.jobs.len(), admitted, "{name}");
        let specs = w.jobs.specs();
        assert_eq!(specs.iter().filter(|s| s.gpu_milli().is_some()).count(), fractional, "{name}");
        assert_eq!(specs.iter().filter(|s| s.gpu_types().is_some()).count(), spec, "{name}");
        if name == "openb_pod_list_default.csv" {
            // The traces README's figures for the production list.
            assert_eq!((rows.len(), cpu, pending + 36), (8_152, 1_088, 897), "36 pending pods are CPU-only");
            assert_eq!(admitted, 8_152 - 1_088 - 861);
        }
    }
}

/// Nodes per (GPU type, GPUs per node).
fn node_counts(spec: &ClusterSpec) -> BTreeMap<(String, u32), usize> {
    let mut m = BTreeMap::new();
    for n in &spec.nodes {
        *m.entry((n.gpu_type.clone(), n.gpus)).or_insert(0) += 1;
    }
    m
}

#[test]
fn the_openb_preset_is_the_real_node_list() {
    let Some(root) = shared("openb node lists") else { return };
    let dir = root.join("traces/alibaba-pai-2023");
    let preset = ClusterPreset::AlibabaOpenb.spec();
    let gpu_nodes = load_nodes_file(&dir.join("openb_node_list_gpu_node.csv")).unwrap();
    assert_eq!((gpu_nodes.rows, gpu_nodes.cpu_only_nodes), (1_213, 0));
    assert_eq!(node_counts(&gpu_nodes.spec), node_counts(&preset));
    assert_eq!(gpu_nodes.spec.total_gpus(), preset.total_gpus());
    // The all-node list has the same GPU nodes (names differ; counts agree) and 310 CPU nodes.
    let all = load_nodes_file(&dir.join("openb_node_list_all_node.csv")).unwrap();
    assert_eq!((all.rows, all.cpu_only_nodes), (1_523, 310));
    assert_eq!(node_counts(&all.spec), node_counts(&preset));
    // Memory per type agrees too.
    let mem = |s: &ClusterSpec| s.nodes.iter().map(|n| (n.gpu_type.clone(), n.gpu_mem_mib)).collect::<BTreeMap<_, _>>();
    assert_eq!(mem(&gpu_nodes.spec), mem(&preset));
}

/// Node 0: 4 × T4; node 1: 4 × P100; node 2: 2 × T4.
fn two_types() -> ClusterSpec {
    let node = |gpus: u32, ty: &str| NodeSpec {
        gpus,
        gpu_type: ty.into(),
        gpu_mem_mib: 16 * 1024,
        gpus_per_switch: 2,
        sockets: 2,
        rack: 0,
        vc: VcId(0),
    };
    ClusterSpec {
        name: "two-types".into(),
        nodes: vec![node(4, "T4"), node(4, "P100"), node(2, "T4")],
        vc_names: vec!["default".into()],
        named_vcs: false,
    }
}

fn typed(id: &str, submit_s: u64, gpus: u32, dur_s: u64, types: &[&str]) -> TraceRecord {
    let gpu_types = (!types.is_empty()).then(|| types.iter().map(|t| t.to_string()).collect());
    rec(id, submit_s, gpus, dur_s).with_extra(|e| e.gpu_types = gpu_types)
}

/// (job id, start s, end s) per job.
type Schedule = Vec<(String, u64, u64)>;

/// Runs `recs` with a step-by-step check that every running job holds only
/// GPUs of a type it allows; returns (name, start s, end s) and the skips.
fn run_typed(
    recs: Vec<TraceRecord>,
    placement: PlacementKind,
    backfill: bool,
) -> (Schedule, Vec<(String, SkipReason)>) {
    let cluster = Cluster::new(two_types()).unwrap();
    let w = build_workload(recs, &cluster, placement.build());
    let skipped = w.skipped.iter().map(|s| (s.name.to_string(), s.reason)).collect();
    let p = PolicyConfig { order: QueueOrder::Fifo, backfill, placement }.build(1).unwrap();
    let mut sim = Simulation::new(
        cluster,
        w.jobs,
        p,
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .with_interference(crate::common::builtin_interference());
    while sim.step().unwrap().is_some() {
        sim.check_invariants().unwrap();
        for (spec, state) in sim.jobs().iter() {
            if let (JobState::Running(r), Some(types)) = (state, &spec.gpu_types()) {
                for &g in &r.gpus {
                    let ty = &sim.cluster().node(sim.cluster().node_of(g)).gpu_type;
                    assert!(types.contains(ty), "{placement:?}: {} on a {ty}, allows {types:?}", spec.name);
                }
            }
        }
    }
    let out = sim.finish();
    (crate::common::schedule(&out), skipped)
}

#[test]
fn placements_use_only_the_allowed_gpu_types() {
    use PlacementKind::*;
    for placement in [Consolidate, FirstFit, Recorded, ShareFirstFit, ShareBestFit] {
        // Three 4-GPU jobs that allow only P100: one node has them, so they
        // run one after another although 6 T4 GPUs stay idle. A job allowing
        // only V100 is skipped; a 2-GPU T4 job and an unconstrained one start at once.
        let recs = vec![
            typed("p-a", 0, 4, 100, &["P100"]),
            typed("p-b", 0, 4, 100, &["P100"]),
            typed("v", 0, 1, 100, &["V100M16"]),
            typed("p-c", 0, 4, 100, &["P100", "V100M32"]),
            typed("any", 0, 4, 50, &[]),
            typed("t", 0, 2, 50, &["T4"]),
        ];
        let (sched, skipped) = run_typed(recs, placement, true);
        assert_eq!(skipped, vec![("v".to_string(), SkipReason::GpuTypeUnavailable)], "{placement:?}");
        let start: BTreeMap<_, _> = sched.iter().map(|(n, s, _)| (n.as_str(), *s)).collect();
        assert_eq!((start["p-a"], start["p-b"], start["p-c"]), (0, 100, 200), "{placement:?}: {sched:?}");
        assert_eq!((start["t"], start["any"]), (0, 0), "{placement:?}: {sched:?}");
        // An 8-GPU job allowing only T4 spans nodes 0 and 2 where the rule
        // spreads (6 T4 GPUs in all: it can never run, so it is unplaceable).
        let (_, skipped) = run_typed(vec![typed("big", 0, 8, 10, &["T4"])], placement, false);
        assert_eq!(skipped, vec![("big".to_string(), SkipReason::Unplaceable)], "{placement:?}");
    }
}

#[test]
fn fractional_shares_never_exceed_one_gpu_in_a_replay() {
    use rand::{Rng, SeedableRng};
    // Pods of unknown memory, mostly fractional, as in the openb lists; on 2
    // nodes × 2 GPUs with up to 4 tenants per GPU. Their memory is their share
    // of the GPU, so the guaranteed shares are the binding limit.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2023);
    let recs: Vec<TraceRecord> = (0..300)
        .map(|i| {
            let gpus = [1, 1, 1, 1, 2][rng.gen_range(0..5)];
            let mut r = typed(
                &format!("j{i}"),
                rng.gen_range(0..3_600),
                gpus,
                rng.gen_range(10..1_000),
                [&[][..], &["T4"][..], &["P100"][..]][rng.gen_range(0..3)],
            );
            if gpus == 1 && rng.gen_bool(0.7) {
                r.extra_mut().gpu_milli = Some([100, 250, 300, 460, 500, 700][rng.gen_range(0..6)]);
            }
            r
        })
        .collect();
    for placement in [PlacementKind::ShareFirstFit, PlacementKind::ShareBestFit] {
        let mut cluster = Cluster::new(two_types()).unwrap();
        cluster.set_share_limits(ShareLimits { max_tenants: 4, mem_headroom: 0.05 }).unwrap();
        let w = build_workload(recs.clone(), &cluster, placement.build());
        assert_eq!(w.jobs.len(), 300);
        let p = PolicyConfig { order: QueueOrder::Fifo, backfill: true, placement }.build(1).unwrap();
        let mut sim = Simulation::new(
            cluster,
            w.jobs,
            p,
            Box::new(TraceSpeed),
            EngineConfig { sample_interval_ms: 0, ..Default::default() },
        )
        .with_interference(crate::common::builtin_interference());
        let mut most_tenants = 0;
        while sim.step().unwrap().is_some() {
            sim.check_invariants().unwrap();
            let c = sim.cluster();
            for g in (0..c.total_gpus()).map(dlsched::ids::GpuId) {
                let s = c.share(g);
                assert!(s.milli <= 1_000, "{placement:?}: {g} has {} milli-GPU guaranteed", s.milli);
                assert!(s.tenants.len() <= 1 || s.mem_mib <= c.gpu_mem_mib(g));
                most_tenants = most_tenants.max(s.tenants.len());
            }
        }
        let out = sim.finish();
        assert!(out.jobs.iter().all(|(_, s)| matches!(s, JobState::Completed(_))));
        assert!(most_tenants >= 3, "{placement:?}: fractional pods should pack (at most {most_tenants} per GPU)");
    }
}

#[test]
fn the_default_pod_list_replays_on_the_preset_and_the_node_file() {
    use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
    let Some(root) = shared("openb replay") else { return };
    let dir = root.join("traces/alibaba-pai-2023");
    let run = |cluster: ClusterChoice, placement: PlacementKind| {
        let spec = RunSpec {
            policy: PolicyConfig { order: QueueOrder::Fifo, backfill: true, placement }.into(),
            sample_interval_ms: 0,
            ..RunSpec::new(
                WorkloadSource::Trace {
                    path: dir.join("openb_pod_list_default.csv"),
                    format: TraceFormat::Auto,
                    columns: ColumnMap::default(),
                },
                cluster,
            )
        };
        run_one(&spec, |_| {}).unwrap().summary
    };
    let preset = ClusterChoice::Preset { preset: ClusterPreset::AlibabaOpenb };
    let shared_run = run(preset.clone(), PlacementKind::ShareBestFit);
    assert_eq!((shared_run.jobs_completed, shared_run.jobs_unfinished), (6_203, 0));
    assert_eq!(shared_run.shared_launches, 6_203);
    assert!(shared_run.colocated_jobs > 0, "fractional pods share GPUs");
    let exclusive = run(preset, PlacementKind::Consolidate);
    assert_eq!((exclusive.jobs_completed, exclusive.shared_launches), (6_203, 0));
    let from_file =
        run(ClusterChoice::NodesFile { path: dir.join("openb_node_list_gpu_node.csv") }, PlacementKind::Consolidate);
    assert_eq!((from_file.jobs_completed, from_file.gpus_total), (6_203, exclusive.gpus_total));
}
