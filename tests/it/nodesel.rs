//! Node dispatch (src/policy/nodesel.rs): hand-computed schedules and metrics.
use std::sync::Arc;

use dlsched::cluster::Cluster;
use dlsched::cluster::ClusterSpec;
use dlsched::engine::{EngineConfig, RunOutput, Simulation};
use dlsched::ids::GpuId;
use dlsched::job::JobSpec;
use dlsched::job::JobState;
use dlsched::policy::nodesel::*;
use dlsched::policy::placement::PlacementKind;
use dlsched::profile::RateModel;
use dlsched::profile::db::ProfileDb;
use dlsched::profile::resources::SmUtil;
use dlsched::trace::TraceRecord;
use rand::Rng;

/// Rate 2 on a `fast` GPU, 1 elsewhere.
struct ByType;

impl RateModel for ByType {
    fn name(&self) -> &'static str {
        "by-type"
    }

    fn rate(&self, _job: &JobSpec, gpus: &[GpuId], cluster: &Cluster) -> f64 {
        if cluster.node(cluster.node_of(gpus[0])).gpu_type == "fast" { 2.0 } else { 1.0 }
    }
}

/// Node 0: 2 `slow` GPUs; node 1: 2 `fast` GPUs (twice the rate).
fn two_nodes() -> ClusterSpec {
    let mut s = ClusterSpec::uniform("two", 2, 2, "slow", 12 * 1024);
    s.nodes[1].gpu_type = "fast".into();
    s
}

/// J0 (0 s, 2 GPUs, 10 s), J1 (1 s, 1 GPU, 10 s), J2 (2 s, 1 GPU, 4 s).
fn jobs() -> Vec<TraceRecord> {
    [("J0", 0, 2, 10), ("J1", 1, 1, 10), ("J2", 2, 1, 4)]
        .map(|(id, s, g, d)| TraceRecord::new(id, s * 1000, d * 1000, g))
        .to_vec()
}

fn run_with(
    selector: Box<dyn NodeSelector>,
    spec: ClusterSpec,
    records: Vec<TraceRecord>,
    backfill: bool,
) -> RunOutput {
    let cluster = Cluster::new(spec).unwrap();
    let w = dlsched::workload::build_workload(records, &cluster, PlacementKind::Consolidate.build());
    let sm = SmUtil::new(Arc::new(ProfileDb::builtin()));
    let policy = NodeDispatch::new(selector, &cluster, Box::new(ByType), sm, backfill);
    Simulation::new(
        cluster,
        w.jobs,
        Box::new(policy),
        Box::new(ByType),
        EngineConfig { sample_interval_ms: 0, ..Default::default() },
    )
    .run()
    .unwrap()
}

/// (name, start s, end s) per job, ms precision kept as f64 seconds.
fn schedule(out: &RunOutput) -> Vec<(String, f64, f64)> {
    out.jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => {
                (s.name.to_string(), d.start.as_ms() as f64 / 1000.0, d.end.as_ms() as f64 / 1000.0)
            }
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect()
}

fn rows(r: &[(&str, f64, f64)]) -> Vec<(String, f64, f64)> {
    r.iter().map(|&(n, s, e)| (n.to_string(), s, e)).collect()
}

fn metric(out: &RunOutput, key: &str) -> f64 {
    out.policy_metrics.iter().find(|(k, _)| *k == key).unwrap_or_else(|| panic!("no {key}")).1
}

#[test]
fn min_ect_by_hand() {
    // ECT_n = (running + queued GPU-s) / GPUs + run time there.
    // t0 J0 (2 GPUs, 10 s): node 0 ECT 0 + 10/1 = 10; node 1 0 + 10/2 = 5
    //   -> node 1, runs [0, 5].
    // t1 J1 (1 GPU, 10 s): node 0: 10; node 1: J0 left (5 - 1) s x 2 GPUs
    //   = 8 GPU-s / 2 = 4, + 5 = 9 -> node 1, queued (no GPU free);
    //   starts when J0 ends, [5, 10].
    // t2 J2 (1 GPU, 4 s): node 0: 4; node 1: ((5 - 2) x 2 + 5 x 1) / 2
    //   = 5.5, + 2 = 7.5 -> node 0, [2, 6].
    let out = run_with(Box::new(MinEct), two_nodes(), jobs(), false);
    assert_eq!(schedule(&out), rows(&[("J0", 0.0, 5.0), ("J1", 5.0, 10.0), ("J2", 2.0, 6.0)]));
    // Throughput: 3 jobs / (10 - 0) s = 1,080 jobs/h. Steady window: from
    // the arrival of job ceil(3/10) = 1 (t0) to the last arrival (t2): no
    // completion inside -> 0.
    assert!((metric(&out, "throughput_jobs_per_hour") - 1080.0).abs() < 1e-9);
    assert_eq!(metric(&out, "throughput_steady_jobs_per_hour"), 0.0);
    // GPU utilisation in that window [0, 2] s: J0 holds 2 GPUs for 2 s,
    // J2 starts at 2 (0 s inside): 4 GPU-s / (4 GPUs x 2 s) = 0.5.
    assert!((metric(&out, "gpu_utilization_steady") - 0.5).abs() < 1e-12);
    // Over [0, 10] s: node 0 holds 1 GPU for 4 s = 4 / (2 x 10) = 0.2;
    // node 1 holds 2 GPUs for 5 s and 1 for 5 s = 15 / 20 = 0.75. No job
    // has a memory need, so memory utilisation is 0 and Load = (0.1,
    // 0.375): mean 0.2375, std 0.1375 -> 0.8625. GPU only: (0.2, 0.75),
    // std 0.275 -> 0.725.
    assert!((metric(&out, "load_balance_degree") - 0.8625).abs() < 1e-9);
    assert!((metric(&out, "load_balance_degree_gpu") - 0.725).abs() < 1e-9);
    assert_eq!(metric(&out, "dispatch_multi_node_jobs"), 0.0);
    assert_eq!(metric(&out, "dispatch_invalid_choices"), 0.0);
}

#[test]
fn load_greedy_by_hand() {
    // score = (rate / best rate) / (1 + (held + queued GPUs) / GPUs).
    // t0 J0: node 0 0.5 / 1 = 0.5; node 1 1 / 1 = 1 -> node 1, [0, 5].
    // t1 J1: node 0 0.5 / 1 = 0.5; node 1 1 / (1 + 2/2) = 0.5: a tie, the
    //   lower index wins -> node 0, 10 s at rate 1, [1, 11].
    // t2 J2: node 0 0.5 / (1 + 1/2) = 1/3; node 1 1 / 2 = 0.5 -> node 1,
    //   queued; starts when J0 ends, 4 s at rate 2, [5, 7].
    let out = run_with(Box::new(LoadGreedy), two_nodes(), jobs(), false);
    assert_eq!(schedule(&out), rows(&[("J0", 0.0, 5.0), ("J1", 1.0, 11.0), ("J2", 5.0, 7.0)]));
}

#[test]
fn random_node_draws_from_its_stream_over_feasible_nodes() {
    // Node 0 has 1 GPU, node 1 has 2: J0 (2 GPUs) can only go to node
    // 1; J1 and J2 (1 GPU) draw uniformly over both, from the
    // `policy.random-node` stream, in arrival order (one draw per job
    // with a choice; J0 draws too, over its single feasible node).
    let mut spec = ClusterSpec::uniform("mixed", 2, 2, "slow", 12 * 1024);
    spec.nodes[0].gpus = 1;
    let seed = 7;
    let mut rng = dlsched::rng::stream(seed, "policy.random-node");
    let _j0: usize = rng.gen_range(0..1);
    let picks: Vec<usize> = (0..2).map(|_| rng.gen_range(0..2)).collect();
    let out = run_with(Box::new(RandomNode::new(seed)), spec, jobs(), false);
    let s = schedule(&out);
    // J0 runs on node 1 at rate 1: [0, 10].
    assert_eq!(s[0], ("J0".to_string(), 0.0, 10.0));
    // Work out the rest from the draws: node 1 is busy until 10.
    let mut free_at = [0.0f64, 10.0];
    for (k, (&pick, (name, submit, dur))) in picks.iter().zip([("J1", 1.0, 10.0), ("J2", 2.0, 4.0)]).enumerate() {
        let start = free_at[pick].max(submit);
        // Node 1 has 2 GPUs: J0 holds both until 10, then two 1-GPU jobs fit
        // side by side; node 0 has one GPU, so its jobs run one after the other.
        let end = start + dur;
        if pick == 0 {
            free_at[0] = end;
        }
        assert_eq!(s[k + 1], (name.to_string(), start, end), "draws {picks:?}");
    }
    // Over seeds 1..=200, the 1-GPU jobs go to each node about half the time.
    let mut on_node0 = 0;
    for seed in 1..=200u64 {
        let mut r = dlsched::rng::stream(seed, "policy.random-node");
        let _: usize = r.gen_range(0..1);
        on_node0 += (0..2).filter(|_| r.gen_range(0..2) == 0).count();
    }
    assert!((150..=250).contains(&on_node0), "{on_node0} of 400");
}

#[test]
fn node_backfill_starts_a_later_job_that_fits() {
    // One node of 2 GPUs, so every job is dispatched to it: K0 (0 s, 1 GPU, 10 s) [0, 10];
    // K1 (1 s, 2 GPUs, 2 s) waits for both; K2 (2 s, 1 GPU, 2 s): strict,
    // it waits behind K1 -> K1 [10, 12], K2 [12, 14]; with backfill it
    // takes the free GPU at once -> K2 [2, 4], K1 [10, 12].
    let spec = ClusterSpec::uniform("one", 1, 2, "slow", 12 * 1024);
    let recs = || {
        [("K0", 0, 1, 10), ("K1", 1, 2, 2), ("K2", 2, 1, 2)]
            .map(|(id, s, g, d)| TraceRecord::new(id, s * 1000, d * 1000, g))
            .to_vec()
    };
    let strict = run_with(Box::new(MinEct), spec.clone(), recs(), false);
    assert_eq!(schedule(&strict), rows(&[("K0", 0.0, 10.0), ("K1", 10.0, 12.0), ("K2", 12.0, 14.0)]));
    let bf = run_with(Box::new(MinEct), spec, recs(), true);
    assert_eq!(schedule(&bf), rows(&[("K0", 0.0, 10.0), ("K1", 10.0, 12.0), ("K2", 2.0, 4.0)]));
}

#[test]
fn jobs_wider_than_any_node_spill_and_are_counted() {
    // Two nodes of 2 GPUs; W (0 s, 4 GPUs, 3 s) fits no single node: it
    // waits in the partition queue and is placed across both, [0, 3];
    // S (1 s, 1 GPU, 1 s) is dispatched and starts when W ends, [3, 4].
    let spec = ClusterSpec::uniform("two", 2, 2, "slow", 12 * 1024);
    let recs = [("W", 0, 4, 3), ("S", 1, 1, 1)].map(|(id, s, g, d)| TraceRecord::new(id, s * 1000, d * 1000, g));
    let out = run_with(Box::new(MinEct), spec, recs.to_vec(), false);
    assert_eq!(schedule(&out), rows(&[("W", 0.0, 3.0), ("S", 3.0, 4.0)]));
    assert_eq!(metric(&out, "dispatch_multi_node_jobs"), 1.0);
}

#[test]
fn throughput_and_balance_formulas() {
    // Arrivals at 0, 100, ..., 900 s (10 jobs); completions at 50, 150, ...,
    // 950 s. Run: 10 / 950 s = 37.894736... /h. Steady: from the arrival
    // of job ceil(10/10) = 1 (0 s) to 900 s: 9 completions / 900 s = 36 /h.
    let arr: Vec<u64> = (0..10).map(|i| i * 100_000).collect();
    let done: Vec<u64> = (0..10).map(|i| i * 100_000 + 50_000).collect();
    let (run, steady) = throughput(&arr, &done);
    assert!((run - 10.0 * 3600.0 / 950.0).abs() < 1e-9);
    assert!((steady - 36.0).abs() < 1e-9);
    // Loads 0.2, 0.4, 0.6: mean 0.4, variance (0.04 + 0 + 0.04) / 3.
    assert!((load_balance(&[0.2, 0.4, 0.6]) - (1.0 - (0.08f64 / 3.0).sqrt())).abs() < 1e-12);
    assert_eq!(load_balance(&[0.5, 0.5]), 1.0);
}
