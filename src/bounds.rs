//! Bounds on run options, in one place: `simulate`'s options and a sweep
//! file's keys are checked against the same table before anything runs.
//!
//! Each check returns the accepted value, or a message saying what is allowed
//! and what was given; the caller puts the option's name in front (`--jobs`
//! on the command line, `` `jobs` `` in a sweep file).

use crate::time::MAX_SECS;

/// Synthetic jobs per run: 1 to [`crate::workload::synthetic::MAX_JOBS`]
/// (20,000,000; about 200 B each in memory, measured: see that constant).
pub const JOBS: (u64, u64) = (1, crate::workload::synthetic::MAX_JOBS as u64);

/// Nodes of a uniform cluster: 1 to [`crate::cluster::MAX_NODES`] (100,000).
pub const NODES: (u64, u64) = (1, crate::cluster::MAX_NODES as u64);

/// GPUs per node of a uniform cluster: 1 to
/// [`crate::cluster::MAX_GPUS_PER_NODE`] (64, the width of the per-node
/// free-GPU mask).
pub const GPUS_PER_NODE: (u64, u64) = (1, crate::cluster::MAX_GPUS_PER_NODE as u64);

/// The GENIE workload's arrival window, hours: above 0, at most 8,760 (one
/// year), the bound the task generator enforces.
pub const MAX_HOURS: f64 = 24.0 * 365.0;

/// Timeline sampling interval, whole seconds: 0 (no samples) to
/// [`MAX_SECS`] (10^11 s, the longest time a trace may give).
pub const MAX_SAMPLE_INTERVAL_S: u64 = MAX_SECS as u64;

/// A run's horizon, s: above 0, at most 10^12 s (ten times [`MAX_SECS`],
/// the longest time a trace may give).
pub const MAX_HORIZON_S: f64 = 1e12;

/// A run's horizon (`--horizon`, sweep key `horizon`), seconds to whole ms
/// (rounded to the nearest).
///
/// # Errors
/// A message with the bounds and the value.
pub fn horizon_ms(s: f64) -> Result<u64, String> {
    if s.is_finite() && s > 0.0 && s <= MAX_HORIZON_S {
        Ok((s * 1000.0).round() as u64)
    } else {
        Err(format!("must be a number of seconds above 0 and at most {MAX_HORIZON_S:e}, got {s}"))
    }
}

/// Longest re-scale delay of a work-defined job, s: one day.
pub const MAX_RESCALE_DELAY_S: f64 = 86_400.0;

/// A re-scale delay in seconds (0 to [`MAX_RESCALE_DELAY_S`]) as whole ms.
///
/// # Errors
/// A negative, non-finite or too large value, with the reason.
pub fn rescale_delay_ms(s: f64) -> Result<u64, String> {
    if s.is_finite() && (0.0..=MAX_RESCALE_DELAY_S).contains(&s) {
        Ok((s * 1000.0).round() as u64)
    } else {
        Err(format!("must be a number of seconds from 0 to {MAX_RESCALE_DELAY_S}, got {s}"))
    }
}

fn whole(n: u64, (lo, hi): (u64, u64), what: &str) -> Result<u32, String> {
    if n < lo {
        Err(format!("must be at least {lo}, got {n}"))
    } else if n > hi {
        Err(format!("is too large: at most {hi} {what}, got {n}"))
    } else {
        // Every upper bound above fits in u32.
        Ok(n as u32)
    }
}

/// Synthetic jobs: within [`JOBS`].
///
/// # Errors
/// A message with the bounds and the value.
pub fn jobs(n: u64) -> Result<u32, String> {
    whole(n, JOBS, "synthetic jobs (about 200 B each in memory)")
}

/// Nodes of a uniform cluster: within [`NODES`].
///
/// # Errors
/// A message with the bounds and the value.
pub fn nodes(n: u64) -> Result<u32, String> {
    whole(n, NODES, "nodes")
}

/// GPUs per node: within [`GPUS_PER_NODE`].
///
/// # Errors
/// A message with the bounds and the value.
pub fn gpus_per_node(n: u64) -> Result<u32, String> {
    whole(n, GPUS_PER_NODE, "GPUs per node")
}

/// The GENIE arrival window, hours: above 0 and at most [`MAX_HOURS`].
///
/// # Errors
/// A message with the bounds and the value.
pub fn hours(h: f64) -> Result<f64, String> {
    if h.is_finite() && h > 0.0 && h <= MAX_HOURS {
        Ok(h)
    } else {
        Err(format!("must be more than 0 and at most 8,760 hours, got {h}"))
    }
}

/// A positive, finite number (synthetic `load`, `jobs_per_hour`).
///
/// # Errors
/// A message with the value.
pub fn positive(x: f64) -> Result<f64, String> {
    if x.is_finite() && x > 0.0 { Ok(x) } else { Err(format!("must be a positive number, got {x}")) }
}

/// The synthetic workload's arrival rate, jobs per hour, for `jobs` jobs:
/// positive, and slow enough only that the expected arrival span,
/// `jobs` x 3,600 / rate s, is within [`MAX_SECS`] (10^11 s, the longest time
/// dlsched simulates). The generator still checks the span it draws (a
/// Poisson sample may run a little past its mean).
///
/// # Errors
/// A message with the bound and the value.
pub fn synthetic_jobs_per_hour(rate: f64, jobs: u32) -> Result<f64, String> {
    let rate = positive(rate)?;
    let shown = readable(rate);
    let span_s = f64::from(jobs) * 3600.0 / rate;
    if span_s > MAX_SECS {
        Err(format!(
            "is too small: {jobs} jobs at {shown} per hour would arrive over about {span_s:.3e} s, beyond the \
             {MAX_SECS:e} s dlsched simulates (at least {:.3e} jobs per hour for {jobs} jobs)",
            f64::from(jobs) * 3600.0 / MAX_SECS
        ))
    } else {
        Ok(rate)
    }
}

/// The GENIE workload's task density, tasks per hour, over `hours`: the
/// expected tasks, rate x hours, from 1 to
/// [`crate::workload::genie::MAX_TASKS`] (50,000: GENIE scores every waiting
/// task at every decision, so its cost grows with the square of the queue).
/// `hours` must be within [`hours`] first.
///
/// # Errors
/// A message with the bounds and the value.
pub fn genie_jobs_per_hour(rate: f64, hours: f64) -> Result<f64, String> {
    let rate = positive(rate)?;
    let shown = readable(rate);
    let expected = rate * hours;
    let max = crate::workload::genie::MAX_TASKS;
    if expected < 1.0 {
        Err(format!(
            "is too small: {shown} tasks per hour over {hours} h is {expected:.3e} tasks expected; at least 1 \
             (at least {:.3e} per hour over {hours} h)",
            1.0 / hours
        ))
    } else if expected > max {
        Err(format!(
            "is too large: {shown} tasks per hour over {hours} h is about {expected:.0} tasks; at most {max} \
             (GENIE scores every waiting task at every decision, so its cost grows with the square of the queue)"
        ))
    } else {
        Ok(rate)
    }
}

/// A number as written, or in exponent form when that would be long
/// (1e-300 rather than 300 digits).
fn readable(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e9).contains(&x.abs()) { format!("{x:e}") } else { format!("{x}") }
}

/// GENIE's concentration weight theta: a finite number >= 0.
///
/// # Errors
/// A message with the value.
pub fn theta(x: f64) -> Result<f64, String> {
    if x.is_finite() && x >= 0.0 { Ok(x) } else { Err(format!("must be a number >= 0, got {x}")) }
}

/// The timeline sampling interval, whole seconds, as ms: at most
/// [`MAX_SAMPLE_INTERVAL_S`].
///
/// # Errors
/// A message with the bound and the value.
pub fn sample_interval_ms(s: u64) -> Result<u64, String> {
    if s <= MAX_SAMPLE_INTERVAL_S {
        Ok(s * 1000)
    } else {
        Err(format!("{s} s is out of range (at most {MAX_SECS:e} s)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edges_are_in_and_one_past_is_out() {
        assert_eq!(jobs(1), Ok(1));
        assert_eq!(jobs(20_000_000), Ok(20_000_000));
        assert!(jobs(0).is_err() && jobs(20_000_001).is_err() && jobs(5_000_000_000).is_err());
        assert_eq!(gpus_per_node(64), Ok(64));
        assert!(gpus_per_node(65).is_err() && gpus_per_node(0).is_err());
        assert_eq!(nodes(100_000), Ok(100_000));
        assert!(nodes(100_001).is_err());
        assert_eq!(hours(8760.0), Ok(8760.0));
        assert!(hours(8760.5).is_err() && hours(0.0).is_err() && hours(f64::NAN).is_err());
        // 10^11 s = 10^14 ms.
        assert_eq!(sample_interval_ms(100_000_000_000), Ok(100_000_000_000_000));
        assert!(sample_interval_ms(100_000_000_001).is_err());
        // 500 jobs x 3,600 s / 1.8e-5 per hour = 1e11 s: the edge.
        assert!(synthetic_jobs_per_hour(1.8e-5, 500).is_ok() && synthetic_jobs_per_hour(1.7e-5, 500).is_err());
        assert!(synthetic_jobs_per_hour(1e-300, 500).is_err() && synthetic_jobs_per_hour(1e9, 500).is_ok());
        // 24 h: 1/24 per hour is one task, 50,000/24 = 2083.33 per hour the most.
        assert!(genie_jobs_per_hour(1.0 / 24.0, 24.0).is_ok() && genie_jobs_per_hour(0.04, 24.0).is_err());
        assert!(genie_jobs_per_hour(2083.0, 24.0).is_ok() && genie_jobs_per_hour(2084.0, 24.0).is_err());
        assert!(genie_jobs_per_hour(1e9, 24.0).is_err() && genie_jobs_per_hour(1e-300, 24.0).is_err());
        assert!(theta(-0.1).is_err() && theta(0.0).is_ok() && positive(0.0).is_err() && positive(1e-3).is_ok());
    }
}
