//! The fairness figures of `summary.json` (finish-time fairness ρ, Jain's
//! index over 1 / ρ) and the GPU-hours lost to checkpointing, computed by
//! hand on small schedules.

use dlsched::cluster::ClusterSpec;
use dlsched::engine::CheckpointModel;
use dlsched::metrics::{Recording, summarize};
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::queue::QueueOrder;
use dlsched::policy::srtf::SrtfOptions;

use crate::common::{expect, policy, rec, run, schedule};
use crate::srtf::run_srtf;

fn close(got: Option<f64>, want: f64, what: &str) {
    let g = got.unwrap_or_else(|| panic!("{what} is null"));
    assert!((g - want).abs() < 1e-6, "{what}: {g} != {want}");
}

#[test]
fn fifo_finish_time_fairness_and_jain_by_hand() {
    // 1 node x 2 GPUs, strict FIFO. A (2 GPUs, 100 s) at 0 fills the node;
    // B (1, 50) at 0 and C (1, 10) at 10 wait. t100: A ends, B and C start;
    // C ends 110, B 150. JCT: A 100, B 150, C 100 (110 - 10).
    let jobs = vec![rec("A", 0, 2, 100), rec("B", 0, 1, 50), rec("C", 10, 1, 10)];
    let out = run(
        jobs,
        ClusterSpec::uniform("t", 1, 2, "V100", 16384),
        policy(QueueOrder::Fifo, false, PlacementKind::Consolidate),
    );
    assert_eq!(schedule(&out), expect(&[("A", 0, 100), ("B", 100, 150), ("C", 100, 110)]));
    let (s, _) = summarize(&out, &Recording::default(), &[], 3);
    // rho = JCT / duration: A 100/100 = 1, B 150/50 = 3, C 100/10 = 10.
    // mean 14/3; max 10; p99 (type 7): rank 2 x 0.99 = 1.98 between the
    // sorted 3 and 10: 3 + 0.98 x 7 = 9.86.
    close(s.finish_time_fairness_mean, 14.0 / 3.0, "mean rho");
    close(s.finish_time_fairness_max, 10.0, "max rho");
    close(s.finish_time_fairness_p99, 9.86, "p99 rho");
    // Jain over x = 1/rho = 30/30, 10/30, 3/30: (43/30)^2 / (3 x 1009/900)
    // = 1849 / 3027 = 0.610836.
    close(s.jain_fairness_index, 1849.0 / 3027.0, "Jain");
    assert_eq!(s.checkpoint_gpu_hours, 0.0);
}

#[test]
fn srtf_checkpoint_gpu_hours_weight_the_overhead_by_gpus() {
    // 1 node x 2 GPUs, SRTF (default options), the Helios checkpoint table.
    // A (2 GPUs, 100 s) at 0; B (2 GPUs, 10 s) at 10 has less left than A
    // (90 s), so A is preempted at 10 and charged 30 s (2..=8 GPUs) of work:
    // 90 + 30 = 120 s left. B runs 10..20, A resumes at 20, ends 140.
    let jobs = vec![rec("A", 0, 2, 100), rec("B", 10, 2, 10)];
    let out = run_srtf(
        jobs,
        ClusterSpec::uniform("t", 1, 2, "V100", 16384),
        SrtfOptions::default(),
        CheckpointModel::HeliosTable,
    );
    assert_eq!(schedule(&out), expect(&[("A", 20, 140), ("B", 10, 20)]));
    // 30 s of overhead, x 2 GPUs = 60 GPU-s.
    assert_eq!((out.stats.checkpoint_ms, out.stats.checkpoint_gpu_ms), (30_000, 60_000));
    let (s, _) = summarize(&out, &Recording::default(), &[], 2);
    // 60 GPU-s / 3,600 = 0.016667 GPU-hours.
    assert_eq!(s.checkpoint_gpu_hours, 0.016667);
    // rho: A 140/100 = 1.4, B 10/10 = 1; Jain over 5/7 and 1:
    // (12/7)^2 / (2 x 74/49) = 144 / 148 = 36/37.
    close(s.finish_time_fairness_mean, 1.2, "mean rho");
    close(s.finish_time_fairness_max, 1.4, "max rho");
    close(s.jain_fairness_index, 36.0 / 37.0, "Jain");
}

#[test]
fn fairness_is_null_without_completed_jobs() {
    let out = run(
        Vec::new(),
        ClusterSpec::uniform("t", 1, 2, "V100", 16384),
        policy(QueueOrder::Fifo, false, PlacementKind::Consolidate),
    );
    let (s, _) = summarize(&out, &Recording::default(), &[], 0);
    assert_eq!(
        (s.finish_time_fairness_mean, s.finish_time_fairness_max, s.finish_time_fairness_p99, s.jain_fairness_index),
        (None, None, None, None)
    );
}
