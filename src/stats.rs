//! Statistics on the ground floor: quantiles, for every floor above (trace
//! mixes, GENIE's prediction error, the run summary, comparisons).
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

#[cfg(test)]
mod tests {
    use super::*;

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
