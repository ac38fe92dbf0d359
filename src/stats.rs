//! Statistics on the ground floor: quantiles, for every floor above (trace
//! mixes, GENIE's prediction error, the run summary, comparisons), and the
//! mean with its Student-t confidence interval (`dlsched paired`).
//!
//! Quantiles are linear-interpolation quantiles on sorted values (Hyndman & Fan
//! 1996, type 7; NumPy's and pandas' default): for `n` values the quantile `p`
//! sits at rank `h = (n - 1) p`, interpolated between its neighbours.

/// The type-7 quantile `p` (0..=1) of ascending `sorted` values; 0 for none.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let h = (sorted.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (h - lo as f64)
}

/// The same type-7 quantile of unsorted `values`, found by selection in
/// linear time (the slice is reordered); 0 for none.
pub fn quantile_select(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let h = (values.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let (_, &mut x_lo, right) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let x_hi = right.iter().copied().min_by(f64::total_cmp).unwrap_or(x_lo);
    x_lo + (x_hi - x_lo) * (h - lo as f64)
}

/// A sample mean with its two-sided Student-t confidence interval:
/// `mean ± t(1 − (1 − level)/2, n − 1) · sd / √n`, `sd` the sample standard
/// deviation (divisor `n − 1`). The interval assumes the values are
/// independent draws (one per seed) of a roughly normal quantity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanInterval {
    /// How many values.
    pub n: usize,
    /// Their mean (NaN for none).
    pub mean: f64,
    /// The interval's half-width, in the values' unit; NaN for fewer than 2
    /// values (no interval exists).
    pub half_width: f64,
}

impl MeanInterval {
    /// The interval's lower end (NaN without an interval).
    pub fn lo(&self) -> f64 {
        self.mean - self.half_width
    }
    /// The interval's upper end (NaN without an interval).
    pub fn hi(&self) -> f64 {
        self.mean + self.half_width
    }
    /// Whether the interval lies wholly below (`Less`) or above (`Greater`)
    /// zero; `None` when it contains zero or does not exist.
    pub fn excludes_zero(&self) -> Option<std::cmp::Ordering> {
        if self.hi() < 0.0 {
            Some(std::cmp::Ordering::Less)
        } else if self.lo() > 0.0 {
            Some(std::cmp::Ordering::Greater)
        } else {
            None
        }
    }
}

/// The Student-t quantile `p` (0 < p < 1) with `df` degrees of freedom
/// (statrs' inverse CDF); NaN for `df` 0.
pub fn t_quantile(p: f64, df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    if df == 0 {
        return f64::NAN;
    }
    StudentsT::new(0.0, 1.0, df as f64).map_or(f64::NAN, |t| t.inverse_cdf(p))
}

/// The mean of `values` with its two-sided `level` (e.g. 0.95) Student-t
/// interval; see [`MeanInterval`].
pub fn mean_interval(values: &[f64], level: f64) -> MeanInterval {
    let n = values.len();
    if n == 0 {
        return MeanInterval { n, mean: f64::NAN, half_width: f64::NAN };
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return MeanInterval { n, mean, half_width: f64::NAN };
    }
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64;
    let t = t_quantile(1.0 - (1.0 - level) / 2.0, n - 1);
    MeanInterval { n, mean, half_width: t * var.sqrt() / (n as f64).sqrt() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_printed_table() {
        // Student-t table (e.g. Abramowitz & Stegun 26.10): t(0.975, 9) = 2.262,
        // t(0.975, 1) = 12.706, t(0.975, 29) = 2.045, t(0.95, 4) = 2.132.
        for (p, df, want) in [(0.975, 9, 2.262), (0.975, 1, 12.706), (0.975, 29, 2.045), (0.95, 4, 2.132)] {
            assert!((t_quantile(p, df) - want).abs() < 5e-4, "t({p}, {df}) = {}", t_quantile(p, df));
        }
        assert!(t_quantile(0.975, 0).is_nan());
    }

    #[test]
    fn mean_interval_by_hand() {
        // 1, 2, 3, 4: mean 2.5, sd = sqrt(((1.5²+0.5²)·2)/3) = sqrt(5/3) = 1.29099;
        // half-width 95 % = t(0.975, 3) 3.18245 · 1.29099 / 2 = 2.05426.
        let m = mean_interval(&[1.0, 2.0, 3.0, 4.0], 0.95);
        assert_eq!((m.n, m.mean), (4, 2.5));
        assert!((m.half_width - 2.05426).abs() < 1e-4, "{}", m.half_width);
        // lo = 2.5 − 2.05426 = 0.44574 > 0: the interval lies above zero.
        assert!((m.lo() - 0.44574).abs() < 1e-4);
        assert_eq!(m.excludes_zero(), Some(std::cmp::Ordering::Greater));
        // All below zero and tight: excludes zero, below.
        assert_eq!(mean_interval(&[-2.0, -2.1, -1.9], 0.95).excludes_zero(), Some(std::cmp::Ordering::Less));
        // One value: a mean, no interval, no verdict.
        let one = mean_interval(&[3.0], 0.95);
        assert_eq!(one.mean, 3.0);
        assert!(one.half_width.is_nan());
        assert_eq!(one.excludes_zero(), None);
        assert!(mean_interval(&[], 0.95).mean.is_nan());
    }

    #[test]
    fn type7_quantiles_by_hand() {
        // Values 10, 20, 30, 40: p50 at rank 1.5 -> 25; p95 at rank 2.85 -> 38.5.
        let v = [10.0, 20.0, 30.0, 40.0];
        assert_eq!(quantile_sorted(&v, 0.5), 25.0);
        assert!((quantile_sorted(&v, 0.95) - 38.5).abs() < 1e-12);
        assert_eq!(quantile_sorted(&v, 0.0), 10.0);
        assert_eq!(quantile_sorted(&v, 1.0), 40.0);
        assert_eq!(quantile_sorted(&[], 0.5), 0.0);
    }

    #[test]
    fn selection_quantiles_equal_sorted_ones() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for n in [1usize, 2, 3, 10, 101, 1000] {
            let v: Vec<f64> = (0..n).map(|_| (rng.gen_range(0..50) as f64) * 1.5).collect();
            let mut sorted = v.clone();
            sorted.sort_unstable_by(f64::total_cmp);
            for p in [0.0, 0.25, 0.5, 0.95, 0.99, 1.0] {
                let mut w = v.clone();
                assert_eq!(quantile_select(&mut w, p), quantile_sorted(&sorted, p), "n {n} p {p}");
            }
        }
        assert_eq!(quantile_select(&mut [], 0.5), 0.0);
    }
}
