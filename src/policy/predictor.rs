//! The run's predictor (`--predictor`, sweep key `predictor`): what a
//! prediction-using policy's predictions read, so that a policy can be run
//! under a controlled prediction error.
//!
//! - [`PredictorKind::Fitted`] (default): the policy's own predictions, as
//!   before the option existed: the GENIE family's fitted throughput model
//!   (`policy::genie`), QSSF's configured estimator (`policy::qssf`). Outputs
//!   are byte-identical to a run without the option.
//! - [`PredictorKind::Oracle`]: the simulator's own truth, 0 % error. A
//!   GENIE-family prediction of a task on `<d_node, d_gpn>` is the task's
//!   work (its single-GPU latency, ms) divided by the rate the run's rate
//!   model gives it on `d_node` nodes × `d_gpn` GPUs of the partition's GPU
//!   type ([`crate::profile::RateModel::rate_on`]): exactly how long the
//!   engine runs it there (GENIE's GPUs are exclusive, so no co-location
//!   slowdown applies; on a partition of mixed GPU types the first node's
//!   type is read). QSSF's estimate is the job's duration (its run time at
//!   trace speed on its recorded allocation, ms) × its GPUs, its true GPU-time
//!   under `--rate-model trace`; QSSF estimates at arrival, before a
//!   placement exists, so under a profile rate model a job placed otherwise
//!   than recorded may run longer or shorter than that.
//! - [`PredictorKind::Noisy`] `noisy:P`: the oracle times `1 + e`, with `e`
//!   drawn uniformly from `[-P/100, +P/100]`: P is the stated error, %, the
//!   largest relative error of a prediction; the mean absolute relative
//!   error is `P/2` % (`E|e| = P/200` for `e` uniform on `[-P/100, P/100]`).
//!   `0 <= P < 100` (a prediction stays positive). The error multiplies the
//!   predicted latency (GENIE; the predicted rate is divided by it) or the
//!   estimated GPU-time (QSSF). Each draw is its own named stream of the
//!   run's seed, `predictor.noisy.<job index>.<d_node>x<d_gpn>` (QSSF:
//!   `<job index>.<GPUs>`), so a prediction asked again returns the same
//!   value, and runs are deterministic per seed.
//!
//! What `summary.json` reads under `noisy:P`: a task's error
//! (`prediction_error_mean`, QSSF's `qssf_estimate_error_mean`) is `|e|`,
//! mean `P/2` %, for a policy whose decisions do not pick among predictions
//! (GENIE's black-box baselines, QSSF's per-job estimate). A policy that
//! picks the placement with the best *predicted* score picks placements
//! whose error flatters them (a winner's curse): its mean error on the
//! placements it ran lies between about `P/2` and `P` %.
//!
//! The prediction-using policies are the GENIE family (the black-box
//! baselines `genie-fifo`, `capacity`, `min-min`, `weighted-fair` place and
//! order without predictions: for them the predictor changes only the
//! prediction-error report) and QSSF; every other policy refuses a
//! predictor other than `fitted`.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::JobId;

/// Which predictor a prediction-using policy reads (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum PredictorKind {
    /// The policy's own model or estimator (default).
    #[default]
    Fitted,
    /// The simulator's truth: 0 % error.
    Oracle,
    /// The truth × `(1 + e)`, `e` uniform in `[-percent/100, +percent/100]`.
    Noisy {
        /// The stated error, %: the largest relative error (`0 <= percent < 100`).
        percent: f64,
    },
}

/// The largest stated error of `noisy:P`, % (exclusive: a prediction must stay positive).
pub const MAX_NOISE_PERCENT: f64 = 100.0;

impl PredictorKind {
    /// True for the default (left out of manifests).
    pub fn is_fitted(&self) -> bool {
        *self == PredictorKind::Fitted
    }

    /// The multiplicative error of the prediction of `job` on the placement
    /// named `at` (`2x4`: nodes x GPUs per node; QSSF: the GPU count) under
    /// master seed `seed`: 1 for the oracle and `noisy:0`; `None` for
    /// [`PredictorKind::Fitted`]. The same arguments give the same factor.
    pub fn factor(&self, seed: u64, job: JobId, at: &str) -> Option<f64> {
        match *self {
            PredictorKind::Fitted => None,
            PredictorKind::Oracle => Some(1.0),
            PredictorKind::Noisy { percent } => {
                let mut rng = crate::rng::stream(seed, &format!("predictor.noisy.{}.{at}", job.index()));
                let u: f64 = rng.r#gen(); // [0, 1)
                Some(1.0 + (2.0 * u - 1.0) * percent / 100.0)
            }
        }
    }
}

impl fmt::Display for PredictorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PredictorKind::Fitted => f.write_str("fitted"),
            PredictorKind::Oracle => f.write_str("oracle"),
            PredictorKind::Noisy { percent } => write!(f, "noisy:{percent}"),
        }
    }
}

impl FromStr for PredictorKind {
    type Err = String;

    /// `fitted`, `oracle` or `noisy:P` (P a number of %, `0 <= P < 100`).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fitted" => return Ok(PredictorKind::Fitted),
            "oracle" => return Ok(PredictorKind::Oracle),
            _ => {}
        }
        let Some(p) = s.strip_prefix("noisy:") else {
            return Err(format!(
                "must be fitted, oracle or noisy:P (P the stated error, %, 0 <= P < 100, e.g. noisy:10), got `{s}`"
            ));
        };
        match p.trim().parse::<f64>() {
            Ok(percent) if percent.is_finite() && (0.0..MAX_NOISE_PERCENT).contains(&percent) => {
                // -0 reads as 0, so that `noisy:-0` names the same run as `noisy:0`.
                Ok(PredictorKind::Noisy { percent: percent + 0.0 })
            }
            _ => Err(format!(
                "noisy:P takes P, the stated error in %, a number with 0 <= P < 100 (e.g. noisy:10), got `{s}`"
            )),
        }
    }
}

impl Serialize for PredictorKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PredictorKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(|e: String| serde::de::Error::custom(format!("predictor {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_every_kind() {
        for (s, k) in [
            ("fitted", PredictorKind::Fitted),
            ("oracle", PredictorKind::Oracle),
            ("noisy:10", PredictorKind::Noisy { percent: 10.0 }),
            ("noisy:2.5", PredictorKind::Noisy { percent: 2.5 }),
            ("noisy:0", PredictorKind::Noisy { percent: 0.0 }),
        ] {
            assert_eq!(s.parse::<PredictorKind>(), Ok(k));
            assert_eq!(k.to_string(), s);
        }
        for bad in ["bogus", "noisy:-5", "noisy:abc", "noisy:", "noisy:100", "noisy:NaN", "noisy:inf", "Oracle"] {
            let e = bad.parse::<PredictorKind>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn noisy_factors_are_repeatable_and_have_the_stated_mean_error() {
        let k = PredictorKind::Noisy { percent: 20.0 };
        assert_eq!(k.factor(3, JobId(7), "2x4"), k.factor(3, JobId(7), "2x4"));
        assert_ne!(k.factor(3, JobId(7), "2x4"), k.factor(4, JobId(7), "2x4"));
        assert_ne!(k.factor(3, JobId(7), "2x4"), k.factor(3, JobId(8), "2x4"));
        assert_ne!(k.factor(3, JobId(7), "2x4"), k.factor(3, JobId(7), "1x4"));
        assert_eq!(PredictorKind::Oracle.factor(3, JobId(7), "2x4"), Some(1.0));
        assert_eq!(PredictorKind::Fitted.factor(3, JobId(7), "2x4"), None);
        // e = factor - 1 is uniform on [-a, a], a = P / 100 = 0.2, so
        // E|e| = a / 2 = 0.1 (|e| is uniform on [0, a]) and every |e| <= a.
        // The sd of |e| is a / sqrt(12) = 0.0577; over n = 40,000 draws the
        // mean's sd is 0.0577 / 200 = 0.00029: a tolerance of 0.002 is 7 sd.
        let n = 40_000u32;
        let mut sum = 0.0;
        for j in 0..n {
            let e = k.factor(1, JobId(j), "1x1").unwrap() - 1.0;
            assert!(e.abs() <= 0.2, "{e}");
            sum += e.abs();
        }
        let mean = sum / f64::from(n);
        assert!((mean - 0.1).abs() < 0.002, "mean |e| = {mean}, expected 0.1");
    }
}
