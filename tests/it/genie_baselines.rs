//! GENIE's baselines as the paper defines them, the two readings of
//! Algorithm 1 and the paper's placement set: hand-computed cases.
//!
//! The hand profile (as in `genie.rs`): sPR(b) = 10 + b samples/s per GPU,
//! gamma 0.5, lambda 0.5. On 2 nodes × 2 GPUs, theta 0.4, a task of global
//! batch 8 and 100 iterations: Cost <1,1> = 1/4 + 0.2 = 0.45, <1,2> = 0.7,
//! <2,1> = 0.9, <2,2> = 1.4; PR <1,1> 18, <1,2> 24.5, <2,1> 21, <2,2> 43;
//! CER 40, 35, 23.3, 30.7; latency 800/PR s = 44.4, 32.7, 38.1, 18.6 s.

use std::collections::BTreeMap;

use dlsched::cluster::ClusterSpec;
use dlsched::engine::RunOutput;
use dlsched::job::{JobState, QosClass, TaskSpec};
use dlsched::policy::genie::{
    BlackBox, GenieOptions, GeniePolicy, GenieProfiles, GenieVariant, PlacementSet, ProfilerConfig, Reading,
    TypeProfile, capacity_quotas,
};
use dlsched::policy::registry::{GenieFamilyOptions, PolicySpec};
use dlsched::profile::db::ProfileDb;
use dlsched::time::SimTime;

use crate::common::run_tasks_checked;

fn profile(kind: &str, gamma: f64) -> TypeProfile {
    TypeProfile {
        kind: kind.into(),
        model: "x".into(),
        inference: false,
        k: [10.0, 1.0, 0.0],
        gamma,
        lambda: Some(0.5),
        runs: 0,
        gpu_seconds: 0.0,
    }
}

fn profiles(gamma: f64) -> GenieProfiles {
    let mut types = BTreeMap::new();
    for kind in ["x-train", "resnet50-train", "lstm-train"] {
        types.insert(kind.to_string(), profile(kind, gamma));
    }
    GenieProfiles {
        gpu_type: "v100".into(),
        nodes: 2,
        gpus_per_node: 2,
        seed: 0,
        config: ProfilerConfig::default(),
        profile_db: "hand".into(),
        types,
    }
}

fn task(kind: &str, global_bsz: u32, iterations: u64, deadline_s: u64) -> TaskSpec {
    TaskSpec {
        kind: kind.into(),
        inference: false,
        global_bsz,
        iterations,
        qos: QosClass::Normal,
        deadline: SimTime::from_ms(deadline_s * 1000),
    }
}

type Task<'a> = (&'a str, u64, u64, TaskSpec);

/// Runs tasks (id, submit s, trace duration s, task) at trace speed, checking
/// the engine's invariants after every event.
fn run(spec: ClusterSpec, tasks: Vec<Task<'_>>, opts: GenieOptions, gamma: f64) -> RunOutput {
    let policy = GeniePolicy::new(opts, profiles(gamma), std::sync::Arc::new(ProfileDb::builtin()));
    run_tasks_checked(spec, tasks, Box::new(policy))
}

/// (start s, GPUs) by task id.
fn starts(out: &RunOutput) -> BTreeMap<String, (u64, u32)> {
    out.jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => (s.name.to_string(), (d.start.as_ms() / 1000, d.gpus)),
            other => panic!("{}: {other:?}", s.name),
        })
        .collect()
}

fn metric(out: &RunOutput, name: &str) -> f64 {
    out.policy_metrics.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no {name}")).1
}

fn opts(variant: GenieVariant) -> GenieOptions {
    GenieOptions { variant, blackbox: BlackBox::default_for(variant), ..Default::default() }
}

fn two_by_two() -> ClusterSpec {
    ClusterSpec::uniform("2x2", 2, 2, "V100", 16_000)
}

#[test]
fn the_available_reading_takes_a_free_placement_that_meets_the_ect_where_strict_waits() {
    // Two blockers (generous ECT: best CER, <1,1>) arrive at 0 s and take one
    // GPU on each node (the emptiest node first): node 0 then node 1, one
    // GPU free on each until 100 s. Free placements: <1,1>, <2,1>.
    // Task `a` arrives at 1 s with deadline 41 s: meeting placements are
    // <1,2> (1 + 32.7 = 33.7 s), <2,1> (39.1 s) and <2,2> (19.6 s).
    // Strict: best CER among them is <1,2> (35), not free -> `a` waits; at
    // 100 s no placement meets 41 s, so it takes the best CER overall, <1,1>.
    // Available: among the free meeting ones only <2,1> -> starts at 1 s on 2 GPUs.
    let tasks = || {
        vec![
            ("b1", 0, 100, task("x-train", 8, 100, 100_000)),
            ("b2", 0, 100, task("x-train", 8, 100, 100_000)),
            ("a", 1, 10, task("x-train", 8, 100, 41)),
        ]
    };
    let strict = run(two_by_two(), tasks(), opts(GenieVariant::Genie), 0.5);
    assert_eq!(starts(&strict)["a"], (100, 1));
    assert_eq!(starts(&strict)["b1"], (0, 1));
    // `a` waited at 1 s while two GPUs were free.
    assert_eq!(metric(&strict, "tasks_waited_while_gpus_free"), 1.0);
    let avail =
        run(two_by_two(), tasks(), GenieOptions { reading: Reading::Available, ..opts(GenieVariant::Genie) }, 0.5);
    assert_eq!(starts(&avail)["a"], (1, 2));
    assert_eq!(metric(&avail, "tasks_waited_while_gpus_free"), 0.0);
}

#[test]
fn capacity_quotas_split_the_gpus_equally_over_the_six_types() {
    // 16 = 6 * 2 + 4: the first four types get 3, lstm and seq2seq 2.
    assert_eq!(capacity_quotas(16), [3, 3, 3, 3, 2, 2]);
    assert_eq!(capacity_quotas(12), [2; 6]);
    // Fewer GPUs than types: one each (over-committed).
    assert_eq!(capacity_quotas(4), [1; 6]);
}

#[test]
fn capacity_blocks_a_type_at_its_quota_while_another_types_share_is_free() {
    // 1 node x 6 GPUs: quota 1 GPU per type. r1 (resnet50) takes its one GPU
    // at 0 s until 100 s; r2 (resnet50, 1 s) is at its type's quota though 5
    // GPUs are free, and waits; l1 (lstm, 2 s) is in its own queue and
    // starts at once. r2 starts when r1 ends, at 100 s. One GPU each
    // (Capacity's black box: one GPU).
    let spec = ClusterSpec::uniform("1x6", 1, 6, "V100", 16_000);
    let out = run(
        spec,
        vec![
            ("r1", 0, 100, task("resnet50-train", 8, 100, 100_000)),
            ("r2", 1, 10, task("resnet50-train", 8, 100, 100_000)),
            ("l1", 2, 10, task("lstm-train", 8, 100, 100_000)),
        ],
        opts(GenieVariant::Capacity),
        0.5,
    );
    let s = starts(&out);
    assert_eq!((s["r1"], s["r2"], s["l1"]), ((0, 1), (100, 1), (2, 1)));
    // r2 could use no free GPU within its quota: not counted.
    assert_eq!(metric(&out, "tasks_waited_while_gpus_free"), 0.0);
    // The paper's FIFO on the same tasks has one queue and no quota; each
    // task takes one node's widest placement of the paper's set, <1,4> (4
    // GPUs): r1 holds 4 of 6 until 100 s, so r2 waits for 4 free GPUs (to
    // 100 s, running to 110 s) and l1 behind it (head-of-line) to 110 s.
    let out = run(
        ClusterSpec::uniform("1x6", 1, 6, "V100", 16_000),
        vec![
            ("r1", 0, 100, task("resnet50-train", 8, 100, 100_000)),
            ("r2", 1, 10, task("resnet50-train", 8, 100, 100_000)),
            ("l1", 2, 10, task("lstm-train", 8, 100, 100_000)),
        ],
        opts(GenieVariant::GenieFifo),
        0.5,
    );
    let s = starts(&out);
    assert_eq!((s["r1"], s["r2"], s["l1"]), ((0, 4), (100, 4), (110, 4)));
}

#[test]
fn tetris_orders_by_alignment_where_srtf_would_take_the_shortest() {
    // A blocker on all four GPUs until 100 s (highest predicted rate for
    // batch 8: <2,2>, 43 samples/s). A (batch 8, 100 iterations) also wants
    // <2,2>, predicted 18.6 s; B (batch 1, 1 iteration) can only use <1,1>
    // (one sample per GPU at least), predicted 1 / 11 s = 0.09 s.
    // At 100 s the cluster is empty: Tetris's alignment (demand/G · free/G
    // summed over nodes) is A: 2 · (2/2 · 2/2) = 2, B: 1/2 · 2/2 = 0.5, so A
    // first (4 GPUs, to 110 s), then B at 110 s. SRTF (tetris-perf-srtf)
    // takes B first (0.09 s < 18.6 s) on one GPU; A waits for all four until
    // B ends at 110 s.
    let tasks = || {
        vec![
            ("blocker", 0, 100, task("x-train", 8, 100, 100_000)),
            ("a", 1, 10, task("x-train", 8, 100, 100_000)),
            ("b", 2, 10, task("x-train", 1, 1, 100_000)),
        ]
    };
    let s = starts(&run(two_by_two(), tasks(), opts(GenieVariant::TetrisPerf), 0.5));
    assert_eq!((s["blocker"], s["a"], s["b"]), ((0, 4), (100, 4), (110, 1)));
    let s = starts(&run(two_by_two(), tasks(), opts(GenieVariant::TetrisPerfSrtf), 0.5));
    assert_eq!((s["blocker"], s["a"], s["b"]), ((0, 4), (110, 4), (100, 1)));
}

#[test]
fn a_black_box_placement_ignores_a_bad_predicted_scaling() {
    // gamma 5: Comm <1,2> = 5 · 0.5 · 1 / 1 = 2.5 > 2 GPUs, <2,1> = 5,
    // <2,2> = 5 (2 + 0.5) / 3 = 4.17 > 4: every multi-GPU rate is predicted
    // negative, so the prediction-based FIFO (fifo-cer) runs on one GPU. The
    // paper's FIFO uses no prediction: one whole node (<1,2>), or with
    // `all-free` every free GPU (<2,2>), or one GPU.
    let one = || vec![("a", 0, 10, task("x-train", 8, 100, 100_000))];
    let gpus = |o: GenieOptions| starts(&run(two_by_two(), one(), o, 5.0))["a"].1;
    assert_eq!(gpus(opts(GenieVariant::FifoCer)), 1);
    assert_eq!(gpus(opts(GenieVariant::GenieFifo)), 2);
    assert_eq!(gpus(GenieOptions { blackbox: BlackBox::AllFree, ..opts(GenieVariant::GenieFifo) }), 4);
    assert_eq!(gpus(GenieOptions { blackbox: BlackBox::OneGpu, ..opts(GenieVariant::MinMin) }), 1);
    assert_eq!(gpus(opts(GenieVariant::WeightedFair)), 2);
}

#[test]
fn the_papers_placement_set_never_gives_three_gpus() {
    // 1 node x 4 GPUs; a blocker of batch 1 (one GPU at most) holds one GPU
    // to 100 s. `a` (batch 8) arrives at 1 s under FIFO's `all-free` black
    // box: 3 GPUs are free; with every placement it takes <1,3>, with the
    // paper's set ({1, 2, 4} GPUs per node) the largest free one is <1,2>.
    let spec = || ClusterSpec::uniform("1x4", 1, 4, "V100", 16_000);
    let tasks =
        || vec![("blocker", 0, 100, task("x-train", 1, 100, 100_000)), ("a", 1, 10, task("x-train", 8, 100, 100_000))];
    let o = GenieOptions { blackbox: BlackBox::AllFree, ..opts(GenieVariant::GenieFifo) };
    assert_eq!(starts(&run(spec(), tasks(), o, 0.5))["a"], (1, 2));
    assert_eq!(starts(&run(spec(), tasks(), GenieOptions { placements: PlacementSet::All, ..o }, 0.5))["a"], (1, 3));
    // The sets themselves: lab16 (4 x 4) has the paper's 9; 3 nodes x 6 GPUs
    // {1, 2} x {1, 2, 4} = 6; `all` every one.
    let paper = PlacementSet::Paper.placements(4, 4);
    assert_eq!(paper.len(), 9);
    assert!(paper.iter().all(|&(n, g)| [1, 2, 4].contains(&n) && [1, 2, 4].contains(&g)));
    assert_eq!(PlacementSet::Paper.placements(3, 6), vec![(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4)]);
    assert_eq!(PlacementSet::All.placements(4, 4).len(), 16);
}

#[test]
fn options_that_a_kind_does_not_have_are_refused_by_name() {
    let e = PolicySpec::Capacity(GenieFamilyOptions { reading: Reading::Available, ..Default::default() })
        .validate()
        .unwrap_err();
    assert!(e.contains("reading") && e.contains("capacity"), "{e}");
    let e = PolicySpec::TetrisCer(GenieFamilyOptions { blackbox: Some(BlackBox::Node), ..Default::default() })
        .validate()
        .unwrap_err();
    assert!(e.contains("blackbox") && e.contains("tetris-cer"), "{e}");
    assert!(
        PolicySpec::Genie(GenieFamilyOptions { reading: Reading::Available, ..Default::default() }).validate().is_ok()
    );
    // A policy option by name, as `--policy-opt` and sweep files set it.
    let s: PolicySpec =
        serde_json::from_str(r#"{"kind": "genie", "reading": "available", "placements": "all"}"#).unwrap();
    assert_eq!(
        s,
        PolicySpec::Genie(GenieFamilyOptions {
            reading: Reading::Available,
            placements: PlacementSet::All,
            ..Default::default()
        })
    );
    let e = serde_json::from_str::<PolicySpec>(r#"{"kind": "capacity", "blackbox": "half"}"#).unwrap_err().to_string();
    assert!(e.contains("half"), "{e}");
}
