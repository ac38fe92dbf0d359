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
