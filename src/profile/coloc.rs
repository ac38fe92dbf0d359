//! Co-location: how fast a job runs when other jobs share its GPU.
//!
//! Rule (measured pairs from the profile database's co-location table, Gavel
//! OSDI'20; the extension to more tenants is our proposal):
//!
//! - alone: speed 1;
//! - with one co-tenant: the measured speed of the pair on that GPU type, at
//!   the nearest measured batch sizes of the two models;
//! - with several: the product of the pairwise speeds — each co-tenant is
//!   taken to slow the job independently;
//! - a pair not measured on the GPU type borrows the same pair measured on
//!   another GPU type (Lucid's pairs, from an unstated GPU, are stored as
//!   `unknown`), else the mean speed of all pairs measured on the GPU type,
//!   else 0.5 (equal time slicing of two jobs). Each of these counts as a
//!   fallback;
//! - a pair speed above 1 (measurement noise: a co-tenant does not speed a
//!   job up) is read as 1.

use std::sync::atomic::{AtomicU64, Ordering};

use super::db::{ColocRow, ProfileDb};
use crate::job::JobSpec;

/// How fast a job runs when other jobs share one of its GPUs. The engine
/// multiplies a job's placement rate by the smallest speed over its GPUs: a
/// distributed job steps at the pace of its slowest worker.
pub trait Interference: Send + Sync {
    /// The speed of `me` on a GPU of `gpu_type` shared with `others`, in
    /// (0, 1] (1.0 = as fast as alone).
    fn speed(&self, gpu_type: &str, me: &JobSpec, others: &[&JobSpec]) -> f64;

    /// Named counters for the run summary.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// [`Interference`] from a profile database's co-location table by the rule
/// of this module ([`colocated_speed`]). A job without a model is looked up
/// under the name `unknown`, so its pairs take the fallback (the mean of the
/// pairs measured on the GPU type). Counts every evaluation and every one that
/// needed a fallback.
pub struct ProfileInterference {
    db: &'static ProfileDb,
    evaluations: AtomicU64,
    fallbacks: AtomicU64,
}

impl ProfileInterference {
    /// Co-location speeds from `db`.
    pub fn new(db: &'static ProfileDb) -> Self {
        ProfileInterference { db, evaluations: AtomicU64::new(0), fallbacks: AtomicU64::new(0) }
    }
}

fn tenant(spec: &JobSpec) -> Tenant<'_> {
    (spec.model.as_deref().unwrap_or("unknown"), spec.local_bsz.unwrap_or(0))
}

impl Interference for ProfileInterference {
    fn speed(&self, gpu_type: &str, me: &JobSpec, others: &[&JobSpec]) -> f64 {
        let others: Vec<Tenant<'_>> = others.iter().map(|o| tenant(o)).collect();
        let (s, fb) = colocated_speed(self.db, gpu_type, tenant(me), &others);
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        if fb {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        s
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("coloc_evaluations", self.evaluations.load(Ordering::Relaxed)),
            ("coloc_fallbacks", self.fallbacks.load(Ordering::Relaxed)),
        ]
    }
}

/// A tenant: (model, per-GPU batch).
pub type Tenant<'a> = (&'a str, u32);

/// One pair's speed for `me` next to `other`, and whether it was a fallback.
fn pair_speed(db: &ProfileDb, gpu_type: &str, me: Tenant<'_>, other: Tenant<'_>) -> (f64, bool) {
    let oriented = |r: &ColocRow| -> Option<(u32, u32, f64)> {
        if r.model_a == me.0 && r.model_b == other.0 {
            Some((r.bsz_a, r.bsz_b, r.speed_a))
        } else if r.model_b == me.0 && r.model_a == other.0 {
            Some((r.bsz_b, r.bsz_a, r.speed_b))
        } else {
            None
        }
    };
    let nearest = |rows: Vec<(u32, u32, f64)>| {
        rows.into_iter()
            .min_by_key(|&(a, b, _)| (a.abs_diff(me.1) + b.abs_diff(other.1), a, b))
            .map(|(a, b, s)| (s, a != me.1 || b != other.1))
    };
    let on_type: Vec<_> = db.colocation.iter().filter(|r| r.gpu_type == gpu_type).filter_map(oriented).collect();
    if let Some((s, inexact)) = nearest(on_type) {
        return (s, inexact);
    }
    let anywhere: Vec<_> = db.colocation.iter().filter_map(oriented).collect();
    if let Some((s, _)) = nearest(anywhere) {
        return (s, true);
    }
    let speeds: Vec<f64> =
        db.colocation.iter().filter(|r| r.gpu_type == gpu_type).flat_map(|r| [r.speed_a, r.speed_b]).collect();
    if speeds.is_empty() { (0.5, true) } else { (speeds.iter().sum::<f64>() / speeds.len() as f64, true) }
}

/// The speed of `me` on a GPU of `gpu_type` shared with `others` (1.0 =
/// as fast as alone), and whether any pair needed a fallback.
pub fn colocated_speed(db: &ProfileDb, gpu_type: &str, me: Tenant<'_>, others: &[Tenant<'_>]) -> (f64, bool) {
    let gpu_type = gpu_type.to_ascii_lowercase();
    others.iter().fold((1.0, false), |(s, fb), &o| {
        let (p, pfb) = pair_speed(db, &gpu_type, me, o);
        (s * p.min(1.0), fb || pfb)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> ProfileDb {
        let row = |g: &str, a: &str, ba: u32, b: &str, bb: u32, sa: f64, sb: f64| ColocRow {
            gpu_type: g.into(),
            model_a: a.into(),
            bsz_a: ba,
            model_b: b.into(),
            bsz_b: bb,
            speed_a: sa,
            speed_b: sb,
            source: "hand".into(),
        };
        ProfileDb {
            colocation: vec![
                row("k80", "x", 32, "y", 64, 0.8, 0.6),
                row("k80", "x", 32, "x", 32, 0.5, 0.5),
                row("v100", "y", 64, "z", 16, 0.9, 0.7),
                row("t4", "n", 8, "n", 8, 1.2, 1.2),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn pairs_and_more_tenants_by_hand() {
        let db = db();
        assert_eq!(colocated_speed(&db, "k80", ("x", 32), &[]), (1.0, false));
        // Measured pair, both orientations.
        assert_eq!(colocated_speed(&db, "K80", ("x", 32), &[("y", 64)]), (0.8, false));
        assert_eq!(colocated_speed(&db, "k80", ("y", 64), &[("x", 32)]), (0.6, false));
        // Three tenants: x next to y and x: 0.8 * 0.5 = 0.4.
        let (s, fb) = colocated_speed(&db, "k80", ("x", 32), &[("y", 64), ("x", 32)]);
        assert!((s - 0.4).abs() < 1e-12 && !fb);
        // Nearest batch: x at 48 next to y at 64 reads the (32, 64) pair, a fallback.
        assert_eq!(colocated_speed(&db, "k80", ("x", 48), &[("y", 64)]), (0.8, true));
        // Pair measured only on v100: borrowed.
        assert_eq!(colocated_speed(&db, "k80", ("z", 16), &[("y", 64)]), (0.7, true));
        // Unmeasured pair on k80: mean of k80 speeds (0.8 + 0.6 + 0.5 + 0.5) / 4 = 0.6.
        let (s, fb) = colocated_speed(&db, "k80", ("w", 8), &[("q", 8)]);
        assert!((s - 0.6).abs() < 1e-12 && fb);
        // Nothing on the GPU type at all: equal time slicing.
        assert_eq!(colocated_speed(&ProfileDb::default(), "t4", ("w", 8), &[("q", 8)]), (0.5, true));
        // A measured speed above 1 (noise) reads as 1.
        assert_eq!(colocated_speed(&db, "t4", ("n", 8), &[("n", 8)]), (1.0, false));
    }
}
