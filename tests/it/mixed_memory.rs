//! Sharing placements on clusters with mixed GPU memory (issue 13, point 1):
//! the placement and the engine use one per-GPU memory rule
//! (`Cluster::tenant_mem_mib` of each GPU), and an invalid decision names the
//! trace's job id, file and line.

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec, NodeSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::ids::{GpuId, JobId, VcId};
use dlsched::job::JobState;
use dlsched::policy::{Decision, Policy, View, config::PolicyConfig, placement::PlacementKind, queue::QueueOrder};
use dlsched::profile::TraceSpeed;
use dlsched::workload::build_workload;

use crate::common::rec;

/// Runs one job of unknown memory (`gpus` GPUs, 42 s, submitted at 0) on
/// `spec` under `placement`; checks the ledger after the launch and returns
/// the distinct GPU memories (MiB) the job ran on and its (start, end) in ms.
fn one_wide_job(spec: ClusterSpec, gpus: u32, placement: PlacementKind) -> (Vec<u64>, (u64, u64)) {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(vec![rec("a", 0, gpus, 42)], &cluster, placement.build());
    assert_eq!(w.jobs.len(), 1, "{placement:?}: the job is admitted");
    let policy = PolicyConfig { order: QueueOrder::Fifo, backfill: false, placement }.build(1).unwrap();
    let mut sim = Simulation::new(
        cluster,
        w.jobs,
        policy,
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .with_interference(crate::common::builtin_interference());
    sim.step().unwrap_or_else(|e| panic!("{placement:?}: {e}"));
    sim.check_invariants().unwrap();
    let JobState::Running(r) = sim.jobs().state(JobId(0)) else { panic!("{placement:?}: a is not running") };
    assert!(r.shared, "{placement:?}: a sharing placement starts a tenant");
    let mut mems: Vec<u64> = Vec::new();
    for &g in &r.gpus {
        // A job of unknown memory holds each GPU's whole memory, whatever its size.
        let cap = sim.cluster().gpu_mem_mib(g);
        assert_eq!(sim.cluster().share(g).mem_mib, cap, "{placement:?}: {g}");
        if !mems.contains(&cap) {
            mems.push(cap);
        }
    }
    mems.sort_unstable();
    while sim.step().unwrap().is_some() {
        sim.check_invariants().unwrap();
    }
    let out = sim.finish();
    let JobState::Completed(d) = out.jobs.state(JobId(0)) else { panic!("{placement:?}: a did not complete") };
    assert_eq!(out.cluster.free_gpus(), u64::from(out.cluster.total_gpus()), "every GPU released");
    (mems, (d.start.as_ms(), d.end.as_ms()))
}

#[test]
fn eleven_gpus_on_alibaba_openb_under_every_sharing_placement() {
    // The g11 case: 11 GPUs do not fit one 8-GPU node, so every
    // sharing rule spreads the job over nodes of different GPU types; it used
    // to abort with "0 MiB used + 24576 MiB needed > 16384 MiB usable".
    // At trace speed it runs from 0 to 42 s.
    for placement in
        [PlacementKind::ShareFirstFit, PlacementKind::ShareBestFit, PlacementKind::Fgd, PlacementKind::MemeffPack]
    {
        let (mems, times) = one_wide_job(ClusterPreset::AlibabaOpenb.spec(), 11, placement);
        assert!(mems.len() > 1, "{placement:?}: the placement mixes GPU memories ({mems:?})");
        assert_eq!(times, (0, 42_000), "{placement:?}");
    }
}

#[test]
fn iawp_on_philly_mixes_12_and_24_gib_gpus() {
    // Philly: 321 servers × 2 GPUs of 12 GiB and 231 × 8 of 24 GiB. A job of
    // 1,850 GPUs takes the 231 eight-GPU servers whole (1,848 GPUs) and puts
    // the remaining 2 on a two-GPU server (consolidate, IAWP's step 1): it
    // used to abort with "24576 MiB needed > 12288 MiB usable".
    let (mems, times) = one_wide_job(ClusterPreset::Philly.spec(), 1_850, PlacementKind::Iawp);
    assert_eq!(mems, vec![12_288, 24_576]);
    assert_eq!(times, (0, 42_000));
}

#[test]
fn a_tenant_holds_each_gpus_own_memory_share() {
    // Two one-GPU nodes of 16,000 and 32,000 MiB, headroom 5 %: shareable
    // 15,200 and 30,400 MiB. A pod of unknown memory with 250 milli-GPU holds
    // 250/1000 of each: 3,800 and 7,600 MiB; a job of unknown memory and no
    // share holds 16,000 and 32,000; a known need of 5,000 holds 5,000 on both.
    let node = |mem: u64| NodeSpec {
        gpus: 1,
        gpu_type: format!("g{mem}"),
        gpu_mem_mib: mem,
        gpus_per_switch: 1,
        sockets: 1,
        rack: 0,
        vc: VcId(0),
    };
    let spec = ClusterSpec {
        name: "two".into(),
        nodes: vec![node(16_000), node(32_000)],
        vc_names: vec!["default".into()],
        named_vcs: false,
    };
    let both = [GpuId(0), GpuId(1)];
    for (need, milli, want) in [(None, 250, [3_800, 7_600]), (None, 0, [16_000, 32_000]), (Some(5_000), 0, [5_000; 2])]
    {
        let mut c = Cluster::new(spec.clone()).unwrap();
        c.allocate_tenant(JobId(0), VcId(0), &both, need, milli).unwrap();
        assert_eq!([c.share(GpuId(0)).mem_mib, c.share(GpuId(1)).mem_mib], want, "{need:?} {milli}");
        c.check_consistency().unwrap();
        c.release(JobId(0), &both).unwrap();
        assert_eq!([c.share(GpuId(0)).mem_mib, c.share(GpuId(1)).mem_mib], [0, 0]);
        c.check_consistency().unwrap();
    }
}

#[test]
fn an_invalid_decision_names_the_trace_job_file_and_line() {
    // Job `a` (line 7 of its file) is left pending, job `w` takes GPU 1
    // exclusively; then a decision puts `a` on GPUs 0 and 1.
    struct Bad(u32);
    impl Policy for Bad {
        fn name(&self) -> String {
            "bad".into()
        }
        fn on_arrival(&mut self, _: JobId, _: &View<'_>) {}
        fn on_completion(&mut self, _: JobId, _: &View<'_>) {}
        fn decide(&mut self, _: &View<'_>) -> Decision {
            self.0 += 1;
            match self.0 {
                1 => Decision::Launch { job: JobId(1), gpus: vec![GpuId(1)] },
                2 => Decision::Colocate { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] },
                _ => Decision::Wait,
            }
        }
    }
    let mut a = rec("a", 0, 2, 10);
    a.line = 7;
    let mut w = rec("w", 0, 1, 10);
    w.line = 9;
    let cluster = Cluster::new(ClusterSpec::uniform("t", 1, 2, "V100", 16_000)).unwrap();
    let jobs = build_workload(vec![a, w], &cluster, PlacementKind::ShareFirstFit.build()).jobs;
    let err = Simulation::new(
        cluster,
        jobs,
        Box::new(Bad(0)),
        Box::new(TraceSpeed),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .run()
    .err()
    .expect("a tenant on an exclusively held GPU is an invalid decision");
    let engine_text = err.to_string();
    assert!(
        engine_text.starts_with("policy `bad` made an invalid decision for job `a` (line 7) on gpu1: "),
        "{engine_text}"
    );
    let text = err.in_file(std::path::Path::new("jobs.csv")).to_string();
    assert_eq!(
        text,
        "policy `bad` made an invalid decision for job `a` (jobs.csv, line 7) on gpu1: GPU is held exclusively by job#1"
    );
}
