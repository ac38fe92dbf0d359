//! Criterion benchmark of one LDWP decision (`src/policy/ldwp.rs`).
//!
//! - `ldwp_decision/<cluster>`: the observation built from the dispatch
//!   snapshot ([`dlsched::policy::ldwp::encode`]), the Q-network's forward
//!   pass (`n_in → 256 → 128 → nodes`) and the masked greedy choice
//!   ([`dlsched::policy::ldwp::Dqn::greedy`]) — what `ldwp-frozen` does per
//!   arrival, without the node-dispatch bookkeeping around it. `lab16` = 4
//!   nodes × 4 GPUs; `512nodes` = a uniform 512 × 8 V100 cluster. Every node's
//!   snapshot has varied loads; every third node is infeasible. Built outside
//!   the timed closure.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

use dlsched::cluster::{Cluster, ClusterPreset, ClusterSpec};
use dlsched::ids::{JobId, NodeId, VcId};
use dlsched::job::{JobSpec, JobTable};
use dlsched::policy::View;
use dlsched::policy::ldwp::{Dqn, LdwpParams, NodeInputs, encode, vocab_index};
use dlsched::policy::nodesel::{Dispatch, NodeLoad};
use dlsched::profile::db::ProfileDb;
use dlsched::time::SimTime;

fn job() -> JobSpec {
    JobSpec {
        id: JobId(0),
        name: "j0".into(),
        submit: SimTime::from_secs(1),
        duration_ms: 3_600_000,
        gpus: 2,
        vc: VcId(0),
        recorded_shape: false,
        line: 0,
        recorded_split: vec![2].into(),
        task: None,
        extra: Some(Box::new(dlsched::job::JobExtra {
            model: Some("resnet50-imagenet".into()),
            local_bsz: Some(64),
            gpu_mem_mib: Some(6000),
            ..Default::default()
        })),
    }
}

fn loads(cluster: &Cluster) -> Vec<NodeLoad<'_>> {
    (0..cluster.num_nodes())
        .map(|i| {
            let ns = cluster.node(NodeId(i as u32));
            let held = (7 * i as u32) % (ns.gpus + 1);
            let feasible = i % 3 != 2;
            NodeLoad {
                node: NodeId(i as u32),
                feasible,
                gpu_type: &ns.gpu_type,
                gpus: ns.gpus,
                gpus_free: ns.gpus - held,
                gpu_mem_mib: ns.gpu_mem_mib,
                queue_len: (i % 5) as u32,
                queued_gpus: (i % 5) as u32 * 2,
                queued_gpu_s: (i % 5) as f64 * 7200.0,
                running_gpu_s: f64::from(held) * 1800.0,
                gpu_util: f64::from(held) / f64::from(ns.gpus),
                sm_util: 0.5 * f64::from(held) / f64::from(ns.gpus),
                gpu_mem_util: 0.3 * f64::from(held) / f64::from(ns.gpus),
                job_rate: if feasible { 1.0 } else { 0.0 },
                job_run_s: if feasible { 3600.0 } else { f64::INFINITY },
                cpu_util: 0.0,
                uplink_mb_s: 0.0,
                downlink_mb_s: 0.0,
            }
        })
        .collect()
}

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("ldwp_decision");
    group.sample_size(30).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let db = ProfileDb::builtin();
    let models: Vec<String> = db.models().map(str::to_string).collect();
    let vocab = vocab_index(&models);
    for (name, spec) in
        [("lab16", ClusterPreset::Lab16.spec()), ("512nodes", ClusterSpec::uniform("512x8", 512, 8, "V100", 16384))]
    {
        let cluster = Cluster::new(spec).expect("valid cluster");
        let jobs = JobTable::new(vec![job()]);
        let view = View { now: SimTime::from_secs(1), cluster: &cluster, jobs: &jobs };
        let nodes = loads(&cluster);
        let dqn = Dqn::new(LdwpParams::default(), nodes.len(), models.clone(), 1);
        let d = Dispatch { now: view.now, job: JobId(0), spec: jobs.spec(JobId(0)), nodes: &nodes, view: &view };
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let s = encode(black_box(&d), &vocab, NodeInputs::Zero);
                let mask: Vec<bool> = d.nodes.iter().map(|n| n.feasible).collect();
                black_box(dqn.greedy(&s, &mask))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
