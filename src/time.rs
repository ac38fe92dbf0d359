//! Simulated time: integer milliseconds, owned by the engine.

use std::fmt;

/// A point in simulated time, in milliseconds since the trace origin.
///
/// Integer time keeps every run exact and deterministic: traces in whole
/// seconds stay exact (1 s = 1,000 ms) and events never drift.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

impl SimTime {
    /// The trace origin (0 ms).
    pub const ZERO: SimTime = SimTime(0);

    /// A time from milliseconds.
    pub const fn from_ms(ms: u64) -> Self {
        SimTime(ms)
    }

    /// A time from whole seconds.
    pub const fn from_secs(s: u64) -> Self {
        SimTime(s * 1000)
    }

    /// Milliseconds since the origin.
    pub const fn as_ms(self) -> u64 {
        self.0
    }

    /// Seconds since the origin, as a float (for metrics only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// `self + ms`, saturating.
    pub fn plus_ms(self, ms: u64) -> Self {
        SimTime(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self` (0 if `earlier` is later).
    pub fn since(self, earlier: SimTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// The largest time or duration a trace may give, seconds (1e11 s, about 3,170
/// years). Keeping every input below it keeps every sum of times exact in
/// integer milliseconds and in `f64` (both far below 2^53 ms).
pub const MAX_SECS: f64 = 1e11;

/// Converts seconds (as read from a trace) to whole milliseconds, rounding to
/// the nearest millisecond. Returns `None` for NaN, infinite or negative input,
/// or a value above [`MAX_SECS`].
pub fn secs_to_ms(secs: f64) -> Option<u64> {
    if !secs.is_finite() || !(0.0..=MAX_SECS).contains(&secs) {
        return None;
    }
    Some((secs * 1000.0).round() as u64)
}

/// Formats milliseconds as seconds for CSV output: `45` for whole seconds,
/// `45.5` or `45.125` otherwise (no trailing zeros). Deterministic and exact.
pub fn fmt_ms_as_secs(ms: u64) -> String {
    let whole = ms / 1000;
    let frac = ms % 1000;
    if frac == 0 {
        whole.to_string()
    } else {
        let s = format!("{whole}.{frac:03}");
        s.trim_end_matches('0').to_string()
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} s", fmt_ms_as_secs(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_to_ms() {
        assert_eq!(secs_to_ms(1.0), Some(1000));
        assert_eq!(secs_to_ms(0.0015), Some(2)); // 1.5 ms rounds half away from zero
        assert_eq!(secs_to_ms(-1.0), None);
        assert_eq!(secs_to_ms(f64::NAN), None);
    }

    #[test]
    fn formats_seconds_without_trailing_zeros() {
        assert_eq!(fmt_ms_as_secs(45_000), "45");
        assert_eq!(fmt_ms_as_secs(45_500), "45.5");
        assert_eq!(fmt_ms_as_secs(45_125), "45.125");
        assert_eq!(fmt_ms_as_secs(7), "0.007");
    }
}
