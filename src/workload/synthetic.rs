//! The seeded synthetic workload: the embedded default when no trace is given.
//!
//! - Arrivals: a Poisson process (exponential inter-arrival times).
//! - GPUs per job: the GPU-count mix of the Philly job list (RFold artifact's
//!   `philly_trace.csv`, 111,548 jobs; Jeon et al., ATC'19), restricted to counts
//!   the cluster can hold and renormalised.
//! - Duration: the empirical distribution of the same list's positive durations
//!   (111,539 jobs), given by its quantiles and sampled by inverse CDF with
//!   log-linear interpolation between them.
//! - Rate: `jobs_per_hour` if given; otherwise the arrival times of a
//!   unit-rate Poisson process are scaled so that the sample's offered load,
//!   GPU-seconds asked for / (GPUs × arrival span), is exactly `load`.
//!
//! The tables below were computed from `rfold_philly_jobs.csv` by
//! [`crate::workload::synthetic::philly_mix_from`]; a test recomputes them from the
//! file when `../shared` is present.

use rand::Rng;
use rand_distr::{Distribution, Exp, WeightedIndex};

use crate::rng;
use crate::trace::TraceRecord;

/// Jobs per GPU count in the Philly job list (RFold artifact): (GPUs, jobs).
pub const PHILLY_GPU_MIX: [(u32, u64); 15] = [
    (1, 96_662),
    (2, 2_522),
    (4, 5_487),
    (6, 1),
    (7, 2),
    (8, 5_716),
    (12, 12),
    (16, 852),
    (20, 1),
    (24, 40),
    (28, 1),
    (32, 212),
    (48, 2),
    (64, 28),
    (128, 11),
];

/// Quantiles of the positive job durations in the Philly job list (RFold
/// artifact): (cumulative probability, seconds), linear-interpolation quantiles
/// (Hyndman–Fan type 7) at 0, 1, 5, 10, 25, 50, 75, 90, 95, 99 and 100 %.
pub const PHILLY_DURATION_QUANTILES: [(f64, f64); 11] = [
    (0.00, 1.0),
    (0.01, 13.0),
    (0.05, 35.0),
    (0.10, 56.0),
    (0.25, 140.0),
    (0.50, 1_322.0),
    (0.75, 5_363.0),
    (0.90, 33_476.8),
    (0.95, 123_926.0),
    (0.99, 755_731.24),
    (1.00, 5_196_151.0),
];

/// Parameters of a synthetic workload.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticSpec {
    /// Number of jobs.
    pub jobs: u32,
    /// Arrival rate, jobs per hour; `None` derives it from `load`.
    pub jobs_per_hour: Option<f64>,
    /// Target offered load (GPU demand / GPU capacity) used when
    /// `jobs_per_hour` is `None`.
    pub load: f64,
    /// The largest job, GPUs (the GPU-count mix is cut there); `None` = the
    /// largest partition's GPUs. Every builder of a run (`dlsched simulate`,
    /// an experiment file, Python, [`crate::experiment::RunSpec::new`]) sets
    /// it, when not given, to [`default_job_cap`] of the cluster (half its
    /// GPUs), and a given 0 to `None`, so the manifest records the effective
    /// cap. E.g. the largest node, so that every job fits one node (node
    /// dispatch, `experiments/ldwp.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_job_gpus: Option<u32>,
    /// The longest job, seconds: a drawn duration above it is cut to it
    /// (the GPU-count and arrival draws are unchanged, and the arrival rate
    /// from `load` is computed after the cut). Default
    /// [`DEFAULT_MAX_DURATION_S`] (one day); `None` = no cut (key
    /// `max_duration = 0`). A manifest without the field reads as no cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_s: Option<u64>,
}

/// A synthetic job's default longest duration, seconds (one day;
/// `--max-duration`, key `max_duration`): our choice, not a figure from a
/// paper. The Philly job list's durations (RFold artifact) have a 99th
/// percentile of 8.7 days and a maximum of 60 days; a 500-job sample on
/// lab16's 16 GPUs then ends weeks after its last arrival, one month-long job
/// holding a GPU that the queue needs (`docs/getting-started.md` has the
/// figures). The default of every builder of a run since issue 35 (before,
/// only of `dlsched simulate` and `dlsched.simulate()`).
pub const DEFAULT_MAX_DURATION_S: u64 = 86_400;

/// The default largest synthetic job on a cluster of `cluster_gpus` GPUs:
/// half of them, at least 1 (ours: a job of every GPU waits for the whole
/// cluster to drain, so a first run on lab16 would hold its queue for days).
pub fn default_job_cap(cluster_gpus: u32) -> u32 {
    (cluster_gpus / 2).max(1)
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            jobs: 500,
            jobs_per_hour: None,
            load: 0.8,
            max_job_gpus: None,
            max_duration_s: Some(DEFAULT_MAX_DURATION_S),
        }
    }
}

/// The mean of the duration distribution, seconds: each log-linear segment
/// from `x0` to `x1` contributes `(p1 - p0) (x1 - x0) / ln(x1 / x0)`.
pub fn mean_duration_s() -> f64 {
    PHILLY_DURATION_QUANTILES
        .windows(2)
        .map(|w| {
            let ((p0, x0), (p1, x1)) = (w[0], w[1]);
            let seg = if x1 > x0 { (x1 - x0) / (x1 / x0).ln() } else { x0 };
            (p1 - p0) * seg
        })
        .sum()
}

/// The GPU-count mix restricted to jobs of at most `max_gpus` GPUs.
pub fn gpu_mix(max_gpus: u32) -> Vec<(u32, u64)> {
    PHILLY_GPU_MIX.iter().copied().filter(|&(g, _)| g <= max_gpus).collect()
}

/// The arrival rate (jobs per hour) that makes the offered load `load` on
/// `cluster_gpus` GPUs for jobs of at most `max_gpus` GPUs.
pub fn rate_for_load(load: f64, cluster_gpus: u32, max_gpus: u32) -> f64 {
    let mix = gpu_mix(max_gpus);
    let total: u64 = mix.iter().map(|m| m.1).sum();
    let mean_gpus = mix.iter().map(|&(g, n)| f64::from(g) * n as f64).sum::<f64>() / total as f64;
    load * f64::from(cluster_gpus) * 3600.0 / (mean_gpus * mean_duration_s())
}

/// Draws one duration (seconds) by inverse CDF over the quantile table.
fn draw_duration<R: Rng>(rng: &mut R) -> f64 {
    let u: f64 = rng.r#gen();
    for w in PHILLY_DURATION_QUANTILES.windows(2) {
        let ((p0, x0), (p1, x1)) = (w[0], w[1]);
        if u <= p1 {
            let f = if p1 > p0 { (u - p0) / (p1 - p0) } else { 0.0 };
            return (x0.ln() + f * (x1.ln() - x0.ln())).exp();
        }
    }
    PHILLY_DURATION_QUANTILES[PHILLY_DURATION_QUANTILES.len() - 1].1
}

/// The most synthetic jobs a run may ask for (about 180 times the largest
/// public job list here, Philly's 111,549 rows). A run takes about
/// [`BYTES_PER_JOB`] bytes per job at its peak, so 20,000,000 jobs need about
/// 4 GB of memory (benches/README.md, "Scale").
pub const MAX_JOBS: u32 = 20_000_000;

/// Peak resident memory per synthetic job, bytes, rounded up: measured with
/// `/usr/bin/time -v dlsched simulate --jobs 2000000 --nodes 1000
/// --gpus-per-node 8` (release build; benches/README.md, "Scale").
pub const BYTES_PER_JOB: u64 = 200;

/// Generates the workload for a cluster of `cluster_gpus` GPUs whose largest
/// job may have `max_gpus` GPUs, from the `trace.synthetic` stream of `seed`.
/// Submit and run times are whole seconds; job ids are `syn-0`, `syn-1`, ...
///
/// # Errors
/// A message if the spec is unusable (more than [`MAX_JOBS`] jobs, no jobs
/// fit, non-positive rate or load).
pub fn generate(spec: &SyntheticSpec, cluster_gpus: u32, max_gpus: u32, seed: u64) -> Result<Vec<TraceRecord>, String> {
    if spec.jobs > MAX_JOBS {
        return Err(format!(
            "{} synthetic jobs is more than the {MAX_JOBS} supported (a run holds about {BYTES_PER_JOB} bytes \
             per job: {MAX_JOBS} jobs need about {} GB of memory)",
            spec.jobs,
            u64::from(MAX_JOBS) * BYTES_PER_JOB / 1_000_000_000
        ));
    }
    let mix = gpu_mix(max_gpus);
    if mix.is_empty() {
        return Err("no GPU count of the Philly mix fits this cluster".into());
    }
    if spec.jobs_per_hour.is_none() && !(spec.load.is_finite() && spec.load > 0.0) {
        return Err(format!("load must be positive, got {}", spec.load));
    }
    if let Some(r) = spec.jobs_per_hour
        && !(r.is_finite() && r > 0.0)
    {
        return Err(format!("jobs per hour must be positive, got {r}"));
    }
    if spec.max_duration_s == Some(0) {
        return Err("the longest synthetic job (max_duration) must be at least 1 s".into());
    }
    // Durations are whole seconds of at least 1 s; the cut keeps them so.
    let cap = spec.max_duration_s.map_or(f64::INFINITY, |c| c as f64);
    let mut rng = rng::stream(seed, "trace.synthetic");
    let sizes = WeightedIndex::new(mix.iter().map(|m| m.1)).map_err(|e| e.to_string())?;
    let unit_gaps = Exp::new(1.0).map_err(|e| e.to_string())?;
    // A unit-rate Poisson process, then scaled to the asked rate or load.
    let mut t = 0.0f64;
    let mut jobs = Vec::with_capacity(spec.jobs as usize);
    for _ in 0..spec.jobs {
        t += unit_gaps.sample(&mut rng);
        let gpus = mix[sizes.sample(&mut rng)].0;
        let dur = draw_duration(&mut rng).round().max(1.0).min(cap);
        jobs.push((t, gpus, dur));
    }
    let scale = match spec.jobs_per_hour {
        Some(r) => 3600.0 / r,
        None => {
            // Scale so the sample's own offered load, GPU-seconds asked for /
            // (GPUs × arrival span), is exactly `load`: heavy-tailed durations
            // make a small sample's load stray far from the distribution's.
            let demand: f64 = jobs.iter().map(|&(_, g, d)| f64::from(g) * d).sum();
            let span = jobs.last().map_or(0.0, |j| j.0) - jobs.first().map_or(0.0, |j| j.0);
            if span > 0.0 {
                demand / (spec.load * f64::from(cluster_gpus) * span)
            } else {
                3600.0 / rate_for_load(spec.load, cluster_gpus, max_gpus)
            }
        }
    };
    let last = jobs.last().map_or(0.0, |j| j.0) * scale;
    if last.is_nan() || last > crate::time::MAX_SECS {
        return Err(format!(
            "{} jobs at this arrival rate would arrive over {last:.3e} s, beyond the {:e} s dlsched simulates; raise the arrival rate or the load",
            spec.jobs,
            crate::time::MAX_SECS
        ));
    }
    Ok(jobs
        .into_iter()
        .enumerate()
        .map(|(i, (t, gpus, dur))| {
            TraceRecord::new(format!("syn-{i}"), ((t * scale).round() as u64) * 1000, (dur as u64) * 1000, gpus)
        })
        .collect())
}

/// A job mix measured from a trace: what the tables above hold.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredMix {
    /// (GPU count, jobs), by GPU count.
    pub gpu_counts: Vec<(u32, u64)>,
    /// (probability, seconds) at the probabilities of [`PHILLY_DURATION_QUANTILES`].
    pub duration_quantiles: Vec<(f64, f64)>,
}

/// Recomputes the GPU-count mix and the duration quantiles from records: the
/// derivation of the tables above from the RFold Philly list.
pub fn philly_mix_from(records: &[TraceRecord]) -> MeasuredMix {
    let mut counts = std::collections::BTreeMap::new();
    for r in records {
        *counts.entry(r.gpus).or_insert(0u64) += 1;
    }
    let mut d: Vec<f64> = records.iter().filter(|r| r.duration_ms > 0).map(|r| r.duration_ms as f64 / 1000.0).collect();
    d.sort_by(f64::total_cmp);
    let q = PHILLY_DURATION_QUANTILES.iter().map(|&(p, _)| (p, crate::stats::quantile_sorted(&d, p))).collect();
    MeasuredMix { gpu_counts: counts.into_iter().collect(), duration_quantiles: q }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_seeded_and_fits_the_cluster() {
        let spec = SyntheticSpec { jobs: 300, ..Default::default() };
        let a = generate(&spec, 16, 16, 42).unwrap();
        let b = generate(&spec, 16, 16, 42).unwrap();
        let c = generate(&spec, 16, 16, 43).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|r| r.gpus <= 16 && r.duration_ms >= 1000));
        assert!(a.windows(2).all(|w| w[0].submit_ms <= w[1].submit_ms));
    }

    #[test]
    fn the_duration_cut_changes_only_the_long_jobs() {
        // The same seed draws the same jobs; a cut at 1 day leaves every
        // shorter duration and every GPU count as it was, and cuts the rest
        // to exactly 86,400 s. Arrival times are compared as a sequence of
        // gaps scaled by one factor (the load is recomputed after the cut).
        let full = SyntheticSpec { jobs: 2_000, max_duration_s: None, ..Default::default() };
        let cut = SyntheticSpec { max_duration_s: Some(86_400), ..full };
        let (a, b) = (generate(&full, 16, 16, 7).unwrap(), generate(&cut, 16, 16, 7).unwrap());
        assert_eq!(a.len(), b.len());
        let mut cut_jobs = 0;
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.gpus, y.gpus);
            if x.duration_ms > 86_400_000 {
                assert_eq!(y.duration_ms, 86_400_000);
                cut_jobs += 1;
            } else {
                assert_eq!(x.duration_ms, y.duration_ms);
            }
        }
        // 86,400 s lies between the table's 90th and 95th percentiles
        // (33,476.8 s and 123,926 s); by the log-linear interpolation the
        // sampler uses, at p = 0.90 + 0.05 (ln 86400 - ln 33476.8) /
        // (ln 123926 - ln 33476.8) = 0.90 + 0.05 x 0.724 = 0.936, so 6.4 %
        // of draws exceed it: 2,000 draws cut 128 +- 11 (one standard
        // deviation) jobs; the bounds are about 3.5 standard deviations.
        assert!((90..=165).contains(&cut_jobs), "{cut_jobs} jobs cut");
        // A later arrival never precedes an earlier one, with or without the cut.
        assert!(b.windows(2).all(|w| w[0].submit_ms <= w[1].submit_ms));
        assert!(generate(&SyntheticSpec { max_duration_s: Some(0), ..full }, 16, 16, 7).is_err());
    }

    #[test]
    fn mean_duration_matches_a_hand_computed_segment() {
        // One segment from 1 s to e s has mean (e - 1) / ln(e) = e - 1.
        let seg = (std::f64::consts::E - 1.0) / std::f64::consts::E.ln();
        assert!((seg - (std::f64::consts::E - 1.0)).abs() < 1e-12);
        // The table's mean lies between its median and its maximum.
        let m = mean_duration_s();
        assert!(m > 1_322.0 && m < 5_196_151.0, "{m}");
    }

    #[test]
    fn rate_for_load_inverts_offered_load() {
        // Only 1-GPU jobs fit a 1-GPU cluster: load = rate/3600 * 1 GPU * mean duration / 1 GPU.
        let r = rate_for_load(0.5, 1, 1);
        assert!((r / 3600.0 * mean_duration_s() - 0.5).abs() < 1e-9);
    }
}
