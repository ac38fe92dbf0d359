//! Schedules computed by hand, with the arithmetic in comments.

use dlsched::cluster::ClusterSpec;
use dlsched::policy::{PlacementKind, QueueOrder};

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
fn consolidate_waits_for_one_node_while_first_fit_spreads() {
    // Two nodes of 4 GPUs. A (0, 3, 10) and B (0, 3, 10) take 3 GPUs on each
    // node (best fit puts B on the other node: node 0 has 1 free). C (1, 2, 4):
    // 2 GPUs are free, one per node. Consolidate keeps C on one node: it waits
    // until A ends at 10, runs [10,14]. First-fit also needs one node for a job
    // that fits one: the same. With 5 GPUs (more than a node) first-fit would spread.
    let spec = ClusterSpec::uniform("2x4", 2, 4, "K80", 12 * 1024);
    let jobs = vec![rec("A", 0, 3, 10), rec("B", 0, 3, 10), rec("C", 1, 2, 4)];
    let out = run(jobs, spec.clone(), policy(QueueOrder::Fifo, false, PlacementKind::Consolidate));
    assert_eq!(schedule(&out), expect(&[("A", 0, 10), ("B", 0, 10), ("C", 10, 14)]));
    // D (1, 5, 2) needs 5 GPUs > 4 per node. Consolidate: one whole free node
    // plus the remainder on another, so only after A and B end. First-fit
    // spreads over whatever is free, but only 2 GPUs are free before t10.
    let jobs = vec![rec("A", 0, 3, 10), rec("E", 0, 1, 3), rec("D", 1, 5, 2)];
    // A on node 0 (3 GPUs, best fit among equals: node 0); E best-fits node 0's last GPU.
    // Consolidate for D: needs a whole free node (node 1) plus 1 more: none until E ends at 3
    // frees node 0's GPU -> D [3,5] on node 1 (4) + node 0 (1).
    let out = run(jobs.clone(), spec.clone(), policy(QueueOrder::Fifo, false, PlacementKind::Consolidate));
    assert_eq!(schedule(&out), expect(&[("A", 0, 10), ("E", 0, 3), ("D", 3, 5)]));
    assert_eq!(
        out.jobs
            .iter()
            .filter_map(|(s, st)| match st {
                dlsched::job::JobState::Completed(d) if s.name == "D" => Some(d.nodes_spanned),
                _ => None,
            })
            .next(),
        Some(2)
    );
}
