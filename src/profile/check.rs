//! `dlsched profile check`: held-out prediction error of the performance models.
//!
//! Within each (model, GPU type), every 5th measured throughput point (in the
//! table's order) is held out; the models are built on the rest and predict
//! the held-out points. The error of a point is |predicted − measured| /
//! measured iteration time; the mean over points (MAPE) is reported per source,
//! per model family, and overall, for table interpolation and for GENIE's
//! fitted model.

use std::collections::BTreeMap;

use serde::Serialize;

use super::db::{ProfileDb, Split};
use super::genie::GenieModel;
use super::model::{PerfModel, TableModel};

/// One row of the check report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckRow {
    /// `source`, `family` or `overall`.
    pub group: String,
    /// The source or family name (`all` for overall).
    pub name: String,
    /// Held-out points in the group.
    pub points: u64,
    /// Mean absolute percentage error of table interpolation, %.
    pub table_mape_pct: f64,
    /// Mean absolute percentage error of GENIE's fitted model, %.
    pub genie_mape_pct: f64,
}

/// Holds out every `every`-th point of each (model, GPU type) and reports MAPE.
pub fn check(db: &ProfileDb, every: usize) -> Vec<CheckRow> {
    let every = every.max(2);
    let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut train = ProfileDb { throughput: Vec::new(), ..db.clone() };
    let mut held = Vec::new();
    for r in &db.throughput {
        let k = seen.entry((&r.model, &r.gpu_type)).or_insert(0);
        *k += 1;
        if (*k).is_multiple_of(every) { held.push(r) } else { train.throughput.push(r.clone()) }
    }
    let table = TableModel::new(&train);
    let genie = GenieModel::new(&train);
    let family: BTreeMap<&str, &str> = db.models.iter().map(|m| (m.model.as_str(), m.family.as_str())).collect();
    // (group, name) -> (points, table APE sum, genie APE sum)
    let mut acc: BTreeMap<(String, String), (u64, f64, f64)> = BTreeMap::new();
    for r in held {
        let split = match &r.split {
            Split::Exact(s) => s.clone(),
            Split::Spread => vec![1; r.gpus as usize],
        };
        let ape = |m: &dyn PerfModel| {
            let t = m.iter_time(&r.model, &r.gpu_type, r.local_bsz, &split).iter_time_s;
            (t - r.iter_time_s).abs() / r.iter_time_s * 100.0
        };
        let (a, b) = (ape(&table), ape(&genie));
        let fam = family.get(r.model.as_str()).copied().unwrap_or("unknown");
        for key in [("source", r.source.as_str()), ("family", fam), ("overall", "all")] {
            let e = acc.entry((key.0.to_string(), key.1.to_string())).or_insert((0, 0.0, 0.0));
            e.0 += 1;
            e.1 += a;
            e.2 += b;
        }
    }
    let order = |g: &str| match g {
        "source" => 0,
        "family" => 1,
        _ => 2,
    };
    let mut rows: Vec<CheckRow> = acc
        .into_iter()
        .map(|((group, name), (n, a, b))| CheckRow {
            points: n,
            table_mape_pct: (a / n as f64 * 100.0).round() / 100.0,
            genie_mape_pct: (b / n as f64 * 100.0).round() / 100.0,
            group,
            name,
        })
        .collect();
    rows.sort_by(|x, y| order(&x.group).cmp(&order(&y.group)).then(x.name.cmp(&y.name)));
    rows
}

/// One row of the ground-truth check ([`check_truth`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthCheckRow {
    /// `k80-held-out` (the GENIE ground truth against held-out K80
    /// measurements), `k80-transfer-1gpu` / `k80-transfer-all` (a model's
    /// K80 rows left out and transferred from another GPU type: its
    /// single-GPU points / all its K80 points).
    pub section: String,
    /// Model, or `all` for the section's mean.
    pub model: String,
    /// `table` / `genie-k80` (the truth, held-out section); `default` (the
    /// table's GPU-type fallback: the model's best-covered type) or
    /// `from-<type>` (the model's rows of that type only), transfer sections.
    pub rule: String,
    /// Points compared.
    pub points: u64,
    /// Mean absolute percentage error of the iteration time, %, rounded to 0.01.
    pub mape_pct: f64,
}

/// The GPU type GENIE's ground truth is checked on.
const TRUTH_GPU: &str = super::genie::K80;

/// How well the lab16 ground truth reproduces K80 measurements:
///
/// - `k80-held-out`: for each GENIE task model with K80 rows (ResNet-50,
///   LSTM, Transformer), every `every`-th of its K80 rows (table order) is
///   held out; both truths ([`super::genie::GenieTruth`]) are built on the
///   rest and predict the held-out points.
/// - `k80-transfer-*`: the GPU-type fallback tested by leaving a measured
///   type out: for every model measured on K80 and another type, all its K80
///   rows are removed and the table predicts them from its other types,
///   by the default rule (its best-covered type) and from each single type
///   (only that type's rows kept; `from-a100` is the transfer VGG-16 and
///   Inception-v3 get, A100 being their only type).
///
/// A Gavel `spread` row is predicted as one GPU per server, as in [`check`].
pub fn check_truth(db: &ProfileDb, every: usize) -> Vec<TruthCheckRow> {
    let every = every.max(2);
    let split_of = |r: &super::db::ThroughputRow| match &r.split {
        Split::Exact(s) => s.clone(),
        Split::Spread => vec![1; r.gpus as usize],
    };
    let ape = |m: &dyn PerfModel, r: &super::db::ThroughputRow| {
        let t = m.iter_time(&r.model, TRUTH_GPU, r.local_bsz, &split_of(r)).iter_time_s;
        (t - r.iter_time_s).abs() / r.iter_time_s * 100.0
    };
    // (section order, section, model, rule) -> (points, APE sum)
    let mut acc: BTreeMap<(u8, String, String, String), (u64, f64)> = BTreeMap::new();
    let mut add = |order: u8, section: &str, model: &str, rule: &str, e: f64| {
        for m in [model, "all"] {
            let v = acc.entry((order, section.into(), m.into(), rule.into())).or_insert((0, 0.0));
            v.0 += 1;
            v.1 += e;
        }
    };
    let on_k80 = |r: &super::db::ThroughputRow| r.gpu_type == TRUTH_GPU;
    let mut genie_models: Vec<&str> = super::genie::TASK_MODELS.iter().map(|&(_, m)| m).collect();
    genie_models.sort_unstable();
    genie_models.dedup();
    for model in genie_models {
        let mut k = 0usize;
        let mut train = ProfileDb { throughput: Vec::new(), ..db.clone() };
        let mut held = Vec::new();
        for r in &db.throughput {
            if r.model == model && on_k80(r) {
                k += 1;
                if k.is_multiple_of(every) {
                    held.push(r);
                    continue;
                }
            }
            train.throughput.push(r.clone());
        }
        if held.is_empty() {
            continue;
        }
        let table = TableModel::new(&train);
        let k80 = super::genie::K80Truth::new(&train);
        for r in held {
            add(0, "k80-held-out", model, "table", ape(&table, r));
            add(0, "k80-held-out", model, "genie-k80", ape(&k80, r));
        }
    }
    let mut k80_models: Vec<&str> = db.throughput.iter().filter(|r| on_k80(r)).map(|r| r.model.as_str()).collect();
    k80_models.sort_unstable();
    k80_models.dedup();
    for model in k80_models {
        let mut others: Vec<&str> =
            db.throughput.iter().filter(|r| r.model == model && !on_k80(r)).map(|r| r.gpu_type.as_str()).collect();
        others.sort_unstable();
        others.dedup();
        if others.is_empty() {
            continue;
        }
        let measured: Vec<&super::db::ThroughputRow> =
            db.throughput.iter().filter(|r| r.model == model && on_k80(r)).collect();
        let rules = std::iter::once(("default".to_string(), None))
            .chain(others.iter().map(|g| (format!("from-{g}"), Some(*g))));
        for (rule, keep) in rules {
            let train = ProfileDb {
                throughput: db
                    .throughput
                    .iter()
                    .filter(|r| r.model != model || (!on_k80(r) && keep.is_none_or(|g| r.gpu_type == g)))
                    .cloned()
                    .collect(),
                ..db.clone()
            };
            let table = TableModel::new(&train);
            for r in &measured {
                let e = ape(&table, r);
                if r.gpus == 1 {
                    add(1, "k80-transfer-1gpu", model, &rule, e);
                }
                add(2, "k80-transfer-all", model, &rule, e);
            }
        }
    }
    acc.into_iter()
        .map(|((_, section, model, rule), (n, sum))| TruthCheckRow {
            section,
            model,
            rule,
            points: n,
            mape_pct: (sum / n as f64 * 100.0).round() / 100.0,
        })
        .collect()
}

/// One row of the co-location check ([`check_coloc`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColocCheckRow {
    /// `gpu` (per GPU type), `source` (by the step today's rule took for the
    /// held-out pair) or `overall`.
    pub group: String,
    /// The GPU type, the rule's step (`other-gpu-type`, `type-mean`,
    /// `time-slice`), or `all`.
    pub name: String,
    /// Held-out speeds (two per measured row: each job's).
    pub speeds: u64,
    /// Mean absolute error of the learned prediction (NCF, `src/profile/ncf.rs`).
    pub learned_mae: f64,
    /// Mean absolute error of today's rule for an unmeasured pair (the same
    /// pair on another GPU type, else the GPU type's mean, else 0.5).
    pub rule_mae: f64,
    /// Mean absolute error of the GPU type's mean alone (else 0.5).
    pub mean_mae: f64,
    /// Mean relative error |predicted − measured| / measured of the learned prediction, %.
    pub learned_rel_pct: f64,
    /// The same of today's rule, %.
    pub rule_rel_pct: f64,
    /// The same of the GPU type's mean, %.
    pub mean_rel_pct: f64,
}

/// Held-out error of the learned interference model for pairs never
/// measured, beside the fallbacks it would replace. A *pair* is a GPU type
/// and an unordered pair of models (all their measured batches together: a
/// pair the co-location rule finds at another batch is measured, not
/// unmeasured); the pairs, in sorted order, go to `folds` folds round-robin
/// (pair `i` to fold `i mod folds`). For each fold the model is trained on
/// the other folds' rows (with `params`) and predicts each held-out row's two
/// speeds; today's rule and the type mean read the other folds' rows only.
/// Speeds above 1 are read as 1, as the rule reads them. Errors are rounded
/// to 1e-4 (MAE) and 0.01 % (relative). With the `learned` feature.
#[cfg(feature = "learned")]
pub fn check_coloc(db: &ProfileDb, folds: usize, params: &super::ncf::NcfParams) -> Vec<ColocCheckRow> {
    use super::coloc::{PairSource, pair_speed};
    let folds = folds.max(2);
    let pair_key = |r: &super::db::ColocRow| {
        let (a, b) = if r.model_a <= r.model_b { (&r.model_a, &r.model_b) } else { (&r.model_b, &r.model_a) };
        (r.gpu_type.clone(), a.clone(), b.clone())
    };
    let mut pairs: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for r in &db.colocation {
        pairs.insert(pair_key(r), 0);
    }
    for (i, f) in pairs.values_mut().enumerate() {
        *f = i % folds;
    }
    // (group order, group, name) -> (speeds, learned AE, rule AE, mean AE, learned RE, rule RE, mean RE)
    let mut acc: BTreeMap<(u8, String, String), (u64, [f64; 6])> = BTreeMap::new();
    for fold in 0..folds {
        let (held, train): (Vec<&super::db::ColocRow>, Vec<&super::db::ColocRow>) =
            db.colocation.iter().partition(|r| pairs[&pair_key(r)] == fold);
        if held.is_empty() {
            continue;
        }
        let ncf = super::ncf::Ncf::train_on(db, &train, params);
        let train_db = ProfileDb { colocation: train.iter().map(|&r| r.clone()).collect(), ..ProfileDb::default() };
        let mut type_mean: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
        for r in &train {
            let e = type_mean.entry(r.gpu_type.as_str()).or_insert((0.0, 0));
            e.0 += r.speed_a + r.speed_b;
            e.1 += 2;
        }
        for r in held {
            let g = r.gpu_type.as_str();
            let mean = type_mean.get(g).map_or(0.5, |&(s, n)| (s / n as f64).min(1.0));
            for (me, other, y) in [
                ((&*r.model_a, r.bsz_a), (&*r.model_b, r.bsz_b), r.speed_a),
                ((&*r.model_b, r.bsz_b), (&*r.model_a, r.bsz_a), r.speed_b),
            ] {
                let y = y.min(1.0);
                let (rule, src) = pair_speed(&train_db, g, me, other);
                let learned = ncf.predict(g, me, other).unwrap_or(rule);
                let src = match src {
                    PairSource::OtherGpuType => "other-gpu-type",
                    PairSource::TypeMean => "type-mean",
                    PairSource::TimeSlice => "time-slice",
                    // Cannot happen: every batch of the pair is held out.
                    PairSource::Measured | PairSource::NearestBatch | PairSource::Learned => "measured",
                };
                let errs = [
                    (learned - y).abs(),
                    (rule - y).abs(),
                    (mean - y).abs(),
                    (learned - y).abs() / y,
                    (rule - y).abs() / y,
                    (mean - y).abs() / y,
                ];
                for key in [(0u8, "gpu", g), (1, "source", src), (2, "overall", "all")] {
                    let e = acc.entry((key.0, key.1.to_string(), key.2.to_string())).or_insert((0, [0.0; 6]));
                    e.0 += 1;
                    for (s, x) in e.1.iter_mut().zip(errs) {
                        *s += x;
                    }
                }
            }
        }
    }
    let r4 = |x: f64| (x * 1e4).round() / 1e4;
    let r2 = |x: f64| (x * 100.0 * 100.0).round() / 100.0;
    acc.into_iter()
        .map(|((_, group, name), (n, s))| {
            let m = |i: usize| s[i] / n as f64;
            ColocCheckRow {
                group,
                name,
                speeds: n,
                learned_mae: r4(m(0)),
                rule_mae: r4(m(1)),
                mean_mae: r4(m(2)),
                learned_rel_pct: r2(m(3)),
                rule_rel_pct: r2(m(4)),
                mean_rel_pct: r2(m(5)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::db::ThroughputRow;

    fn row(model: &str, gpu: &str, t: f64) -> ThroughputRow {
        ThroughputRow {
            model: model.into(),
            gpu_type: gpu.into(),
            local_bsz: 10,
            gpus: 1,
            split: Split::Exact(vec![1]),
            iter_time_s: t,
            source: "test".into(),
        }
    }

    #[cfg(feature = "learned")]
    #[test]
    fn learned_pairs_beat_the_mean_on_the_shipped_pairs() {
        // Gavel's K80/P100/V100 pairs, two folds of model pairs held out. The
        // type mean and today's rule are computed here by their own route
        // (not check_coloc's): the mean of the other fold's speeds on the type.
        let db = ProfileDb::builtin();
        let rows = check_coloc(&db, 2, &crate::profile::ncf::NcfParams::default());
        let all = rows.iter().find(|r| r.group == "overall").unwrap();
        assert_eq!(all.speeds, 2 * db.colocation.len() as u64);
        let gpus: Vec<&str> = rows.iter().filter(|r| r.group == "gpu").map(|r| r.name.as_str()).collect();
        assert_eq!(gpus, ["k80", "p100", "v100"]);
        // The type-mean error by hand: pairs sorted by (GPU, model, model), fold = index mod 2.
        let key = |r: &crate::profile::db::ColocRow| {
            let (a, b) = if r.model_a <= r.model_b { (&r.model_a, &r.model_b) } else { (&r.model_b, &r.model_a) };
            (r.gpu_type.clone(), a.clone(), b.clone())
        };
        let mut keys: Vec<_> = db.colocation.iter().map(key).collect();
        keys.sort();
        keys.dedup();
        let fold = |r: &crate::profile::db::ColocRow| keys.binary_search(&key(r)).unwrap() % 2;
        let mut ae = 0.0;
        for r in &db.colocation {
            let other: Vec<f64> = db
                .colocation
                .iter()
                .filter(|o| o.gpu_type == r.gpu_type && fold(o) != fold(r))
                .flat_map(|o| [o.speed_a, o.speed_b])
                .collect();
            let mean = (other.iter().sum::<f64>() / other.len() as f64).min(1.0);
            ae += (mean - r.speed_a.min(1.0)).abs() + (mean - r.speed_b.min(1.0)).abs();
        }
        let mean_mae = ae / all.speeds as f64;
        assert!((all.mean_mae - mean_mae).abs() < 1e-4, "{} vs {mean_mae}", all.mean_mae);
        // The learned model beats both the mean and today's rule overall.
        assert!(all.learned_mae < all.mean_mae && all.learned_mae < all.rule_mae, "{all:?}");
    }

    #[test]
    fn leaving_a_type_out_transfers_it_by_the_other_models_ratio() {
        // a: K80 2.0 s, V100 1.0 s; b: K80 3.0 s, V100 1.0 s (batch 10, one GPU).
        // Without a's K80 row, a's K80 time = its V100 time x b's ratio 3 = 3.0: error 50 %.
        // Without b's, b's = 1.0 x a's ratio 2 = 2.0: error 1/3 = 33.33 %. Mean 41.67 %.
        let mut db = ProfileDb::builtin();
        db.throughput = vec![row("a", "k80", 2.0), row("a", "v100", 1.0), row("b", "k80", 3.0), row("b", "v100", 1.0)];
        let rows = check_truth(&db, 5);
        let get = |model: &str, rule: &str| {
            rows.iter()
                .find(|r| r.section == "k80-transfer-1gpu" && r.model == model && r.rule == rule)
                .unwrap()
                .mape_pct
        };
        assert_eq!(get("a", "default"), 50.0);
        assert_eq!(get("b", "from-v100"), 33.33);
        assert_eq!(get("all", "default"), 41.67);
        assert!(rows.iter().all(|r| r.section != "k80-held-out"), "no GENIE model in this db");
    }

    #[test]
    fn the_held_out_k80_points_of_resnet50_by_hand() {
        // ResNet-50's K80 rows in table order; every 5th held out: #5 (16/GPU, 4 spread)
        // 0.429363, #10 (32, 2 spread) 0.781656, #15 (64, 1 GPU) 1.61544.
        // Table: #5 reads the 4-GPU spread rows left (32/GPU only, 0.793664), below the
        // smallest: 0.793664 -> 84.848 %; #10 the 2-GPU spread rows (16 only, 0.427058),
        // above the largest: x2 = 0.854116 -> 9.270 %; #15 between 32 and 128:
        // 0.808689 + (2.87999 - 0.808689) x 32/96 = 1.499123 -> 7.200 %. Mean 33.77 %.
        // K80 truth: #5 is Fig. 8's 4N1G: t1(16) + c with c = t1(64)/2.8 - t1(16), t1(64)
        // now interpolated (1.499123): 1.499123 / 2.8 = 0.535401 -> 24.696 %; #10 is
        // measured (1+1 spread rows), #15 one GPU: as the table. Mean 13.72 %.
        let rows = check_truth(&ProfileDb::builtin(), 5);
        let get = |rule: &str| {
            rows.iter()
                .find(|r| r.section == "k80-held-out" && r.model == "resnet50-imagenet" && r.rule == rule)
                .map(|r| (r.points, r.mape_pct))
                .unwrap()
        };
        let t64 = 0.808689 + (2.87999 - 0.808689) * 32.0 / 96.0;
        let a = (0.793664f64 - 0.429363).abs() / 0.429363;
        let b = (2.0 * 0.427058f64 - 0.781656).abs() / 0.781656;
        let c = (t64 - 1.61544f64).abs() / 1.61544;
        let k = (t64 / 2.8 - 0.429363f64).abs() / 0.429363;
        let round = |x: f64| (x * 100.0 * 100.0).round() / 100.0;
        assert_eq!(get("table"), (3, round((a + b + c) / 3.0)));
        assert_eq!(get("genie-k80"), (3, round((k + b + c) / 3.0)));
    }
}
