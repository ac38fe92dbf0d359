//! Schedules computed by hand, with the arithmetic in comments.

use dlsched::cluster::ClusterSpec;
use dlsched::policy::{placement::PlacementKind, queue::QueueOrder};

use crate::common::{expect, policy, rec, run, schedule};

/// One node of 4 GPUs; (submit s, GPUs, duration s):
/// J0 (0, 2, 10), J1 (1, 4, 5), J2 (2, 1, 3), J3 (3, 2, 4), J4 (4, 1, 2).
fn jobs() -> Vec<dlsched::trace::TraceRecord> {
    vec![rec("J0", 0, 2, 10), rec("J1", 1, 4, 5), rec("J2", 2, 1, 3), rec("J3", 3, 2, 4), rec("J4", 4, 1, 2)]
}

fn one_node() -> ClusterSpec {
    ClusterSpec::uniform("hand", 1, 4, "K80", 12 * 1024)
}

#[test]
fn fifo_strict() {
    // t0: J0 takes 2 GPUs, ends 10. t1: J1 needs 4, 2 free: blocks the queue;
    // J2, J3, J4 wait behind it. t10: J0 ends, J1 takes all 4, ends 15.
    // t15: J1 ends; J2 (1), J3 (2), J4 (1) all fit: end 18, 19, 17.
    let out = run(jobs(), one_node(), policy(QueueOrder::Fifo, false, PlacementKind::Consolidate));
    assert_eq!(
        schedule(&out),
        expect(&[("J0", 0, 10), ("J1", 10, 15), ("J2", 15, 18), ("J3", 15, 19), ("J4", 15, 17)])
    );
}

#[test]
fn fifo_backfill() {
    // t0: J0 [0,10], 2 free. t1: J1 (4) blocked. t2: J2 (1) backfills [2,5], 1 free.
    // t3: J3 (2) does not fit. t4: J4 (1) backfills [4,6], 0 free.
    // t5: J2 ends, 1 free: J1, J3 still do not fit. t6: J4 ends, 2 free: J3 [6,10].
    // t10: J0 and J3 end together, 4 free: J1 [10,15].
    let out = run(jobs(), one_node(), policy(QueueOrder::Fifo, true, PlacementKind::Consolidate));
    assert_eq!(schedule(&out), expect(&[("J0", 0, 10), ("J1", 10, 15), ("J2", 2, 5), ("J3", 6, 10), ("J4", 4, 6)]));
}

#[test]
fn sjf_strict() {
    // Durations: J0 10, J1 5, J2 3, J3 4, J4 2.
    // t0: J0 [0,10], 2 free. t1: queue {J1 5}: needs 4, blocked.
    // t2: queue {J2 3, J1 5}: J2 fits [2,5], 1 free; J1 blocked.
    // t3: queue {J3 4, J1 5}: J3 needs 2, 1 free: blocked (strict).
    // t4: queue {J4 2, J3 4, J1 5}: J4 [4,6], 0 free.
    // t5: 1 free, J3 blocked. t6: 2 free: J3 [6,10]. t10: 4 free: J1 [10,15].
    let out = run(jobs(), one_node(), policy(QueueOrder::Sjf, false, PlacementKind::Consolidate));
    assert_eq!(schedule(&out), expect(&[("J0", 0, 10), ("J1", 10, 15), ("J2", 2, 5), ("J3", 6, 10), ("J4", 4, 6)]));
}

#[test]
fn sjf_strict_blocks_behind_a_short_wide_job() {
    // Same node; K0 (0, 3, 10); K1 (1, 2, 1) is the shortest but needs 2 GPUs
    // with 1 free, so it blocks K2 (2, 1, 5) until K0 ends at 10 (strict);
    // then K1 [10,11] and K2 [10,15]. With backfill K2 starts at 2 instead.
    let jobs = || vec![rec("K0", 0, 3, 10), rec("K1", 1, 2, 1), rec("K2", 2, 1, 5)];
    let strict = run(jobs(), one_node(), policy(QueueOrder::Sjf, false, PlacementKind::Consolidate));
    assert_eq!(schedule(&strict), expect(&[("K0", 0, 10), ("K1", 10, 11), ("K2", 10, 15)]));
    let bf = run(jobs(), one_node(), policy(QueueOrder::Sjf, true, PlacementKind::Consolidate));
    assert_eq!(schedule(&bf), expect(&[("K0", 0, 10), ("K1", 10, 11), ("K2", 2, 7)]));
}

#[test]
fn consolidate_waits_for_a_whole_node_while_first_fit_spreads() {
    // Three nodes of 4 GPUs. A (0 s, 3 GPUs, 10 s) goes on node 0 under both
    // rules (best fit among equals / first node with room); B (0, 3, 10) on
    // node 1 (consolidate: best fit needs 3 free, node 1 is the first of the
    // two fullest candidates; first-fit: node 0 has only 1 free). That leaves
    // 1 + 1 + 4 = 6 free GPUs. D (1, 6, 4) is larger than a node:
    // - consolidate takes whole node 2 (4), then needs the remaining 2 on the
    //   next freest node, which has 1: it waits until A and B end at 10: [10,14], 2 nodes;
    // - first-fit spreads over free GPUs in node order (1 + 1 + 4): [1,5], 3 nodes.
    let spec = ClusterSpec::uniform("3x4", 3, 4, "K80", 12 * 1024);
    let jobs = || vec![rec("A", 0, 3, 10), rec("B", 0, 3, 10), rec("D", 1, 6, 4)];
    let nodes_of_d = |out: &dlsched::engine::RunOutput| {
        out.jobs
            .iter()
            .find_map(|(s, st)| match st {
                dlsched::job::JobState::Completed(d) if s.name == "D" => Some(d.nodes_spanned),
                _ => None,
            })
            .unwrap()
    };
    let c = run(jobs(), spec.clone(), policy(QueueOrder::Fifo, false, PlacementKind::Consolidate));
    assert_eq!(schedule(&c), expect(&[("A", 0, 10), ("B", 0, 10), ("D", 10, 14)]));
    assert_eq!(nodes_of_d(&c), 2);
    let f = run(jobs(), spec, policy(QueueOrder::Fifo, false, PlacementKind::FirstFit));
    assert_eq!(schedule(&f), expect(&[("A", 0, 10), ("B", 0, 10), ("D", 1, 5)]));
    assert_eq!(nodes_of_d(&f), 3);
}

#[test]
fn example_trace_with_two_vcs() {
    // traces/example_jobs.csv on traces/example_vcs.csv (research: 2 × 4 GPUs,
    // production: 4 × 8 GPUs), strict FIFO, consolidate. By hand:
    // research: a1 (1) at 0 on node 0 [0,600]; a2 (4) at 30 best-fits node 1
    //   [30,1830]; a3 (8) needs 2 whole nodes: node 0 is whole at 600, node 1
    //   at 1830 -> [1830,5430]; a4, a5 wait behind it (strict): [5430,5730], [5430,5490].
    // production: p1, p2 (8) on nodes 0, 1 [0,7200], [10,7210]; p3 (16) on
    //   whole nodes 2, 3 [20,3620]; p4 (1) and p5 (2) find no free GPU until
    //   3620: [3620,3740], [3620,4520].
    use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
    use dlsched::trace::{ColumnMap, TraceFormat};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = RunSpec {
        sample_interval_ms: 0,
        ..RunSpec::new(
            WorkloadSource::Trace {
                path: root.join("traces/example_jobs.csv"),
                format: TraceFormat::Auto,
                columns: ColumnMap::default(),
            },
            ClusterChoice::VcFile { path: root.join("traces/example_vcs.csv") },
        )
    };
    let r = run_one(&spec, |_| {}).unwrap();
    let mut got = schedule(&r.output);
    got.sort();
    assert_eq!(
        got,
        expect(&[
            ("a1", 0, 600),
            ("a2", 30, 1830),
            ("a3", 1830, 5430),
            ("a4", 5430, 5730),
            ("a5", 5430, 5490),
            ("p1", 0, 7200),
            ("p2", 10, 7210),
            ("p3", 20, 3620),
            ("p4", 3620, 3740),
            ("p5", 3620, 4520),
        ])
    );
    // Per-VC mean queueing delay: research (0+0+1770+5340+5310)/5 = 2484;
    // production (0+0+0+3580+3570)/5 = 1430.
    let q: Vec<_> = r.vcs.iter().map(|v| (v.vc.as_str(), v.queue_delay_mean_s)).collect();
    assert_eq!(q, vec![("research", 2484.0), ("production", 1430.0)]);
}
