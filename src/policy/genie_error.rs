//! The fitted GENIE models' prediction error against the ground truth they
//! were profiled on, per task type and per placement (`dlsched genie-profile`
//! prints it and writes it beside the saved models).
//!
//! For every task type, every placement `<d_node, d_gpn>` of the paper's nine
//! ({1, 2, 4} nodes × {1, 2, 4} GPUs per node, GENIE TPDS 2020 Figs. 8 and
//! 10) that fits the profiled platform, and every global batch the truth
//! measured for the type's model (the generator draws from these) with at
//! least one sample per GPU: the error of a point is |predicted − true| /
//! true iteration time, the true time being what the engine runs (per-GPU
//! batch `round(global / n)`, inference at its single-GPU step). MAPEs are
//! reported per (type, placement), per type, per placement, for the types
//! whose model is measured on the profiled GPU type against the substituted
//! ones, for per-GPU batches below the smallest measured batch (where the
//! table extrapolates, `profile::model` rule 4) against the rest, and overall.

use std::collections::BTreeMap;

use serde::Serialize;

use super::genie::{GenieProfiles, GroundTruth};

/// The paper's placement set: {1, 2, 4} nodes × {1, 2, 4} GPUs per node.
pub const PAPER_PLACEMENTS: [(u32, u32); 9] = [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (4, 4)];

/// One row of the error report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorRow {
    /// `type-placement`, `type`, `placement`, `gpu-data`, `local-batch` or `overall`.
    pub group: String,
    /// What the row covers: `resnet50-train 2x2` (nodes x GPUs per node), a
    /// type, a placement, `measured` / `substituted`, `below-smallest` /
    /// `measured-range`, or `all`.
    pub name: String,
    /// Points (placement × global batch) in the row.
    pub points: u64,
    /// Mean absolute percentage error, %, rounded to 0.01.
    pub mape_pct: f64,
}

/// The error report of `profiles` against `truth` (see the module docs).
pub fn prediction_errors(profiles: &GenieProfiles, truth: &GroundTruth<'_>) -> Vec<ErrorRow> {
    let mut acc: BTreeMap<(u8, String, String), (u64, f64)> = BTreeMap::new();
    let mut add = |order: u8, group: &str, name: String, ape: f64| {
        let e = acc.entry((order, group.to_string(), name)).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += ape;
    };
    for t in profiles.types.values() {
        let batches = truth.batches(&t.model);
        let smallest = batches.first().copied().unwrap_or(1);
        let measured = if truth.measured_on_gpu(&t.model) { "measured" } else { "substituted" };
        for &(d_node, d_gpn) in
            PAPER_PLACEMENTS.iter().filter(|p| p.0 <= profiles.nodes && p.1 <= profiles.gpus_per_node)
        {
            let n = d_node * d_gpn;
            for &global in batches.iter().filter(|&&b| b >= n) {
                // GENIE Eq. 8 for one iteration (nu = 0): global / PR.
                let Some(rate) = t.rate(global, d_node, d_gpn) else { continue };
                let pred_s = f64::from(global) / rate;
                let local = ((f64::from(global) / f64::from(n)).round() as u32).max(1);
                let truth_s = truth.step_s(&t.model, t.inference, local, &vec![d_gpn; d_node as usize]);
                let ape = (pred_s - truth_s).abs() / truth_s * 100.0;
                let place = format!("{d_node}x{d_gpn}");
                add(0, "type-placement", format!("{} {place}", t.kind), ape);
                add(1, "type", t.kind.clone(), ape);
                add(2, "placement", place, ape);
                add(3, "gpu-data", measured.to_string(), ape);
                let range = if local < smallest { "below-smallest" } else { "measured-range" };
                add(4, "local-batch", range.to_string(), ape);
                add(5, "overall", "all".to_string(), ape);
            }
        }
    }
    acc.into_iter()
        .map(|((_, group, name), (n, sum))| ErrorRow {
            group,
            name,
            points: n,
            mape_pct: (sum / n as f64 * 100.0).round() / 100.0,
        })
        .collect()
}

/// The report as CSV (`group,name,points,mape_pct`, `\n` line ends).
pub fn to_csv(rows: &[ErrorRow]) -> String {
    let mut s = String::from("group,name,points,mape_pct\n");
    for r in rows {
        s.push_str(&format!("{},{},{},{}\n", r.group, r.name, r.points, r.mape_pct));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::genie::{ProfilerConfig, TypeProfile};
    use crate::profile::db::ProfileDb;

    #[test]
    fn a_constant_rate_against_the_lstm_inference_truth_by_hand() {
        // One 1 x 1 platform, lstm-infer predicted at 400 samples/s per GPU:
        // iteration b / 400 s. Truth: Gavel K80 single-GPU times / 3 (forward only)
        // at the measured batches 5, 10, 20, 40, 80 (0.039238, 0.0420266,
        // 0.0583353, 0.0869592, 0.165174 s). APEs: |0.0125 - 0.0130793| / 0.0130793
        // = 4.429 %, 78.458 %, 157.134 %, 244.989 %, 263.253 %; mean 149.65 %.
        let db = ProfileDb::builtin();
        let truth = GroundTruth::new(&db, "K80");
        let t = TypeProfile {
            kind: "lstm-infer".into(),
            model: "lstm-wikitext2".into(),
            inference: true,
            k: [400.0, 0.0, 0.0],
            gamma: 0.0,
            lambda: None,
            runs: 0,
            gpu_seconds: 0.0,
        };
        let profiles = GenieProfiles {
            gpu_type: "k80".into(),
            nodes: 1,
            gpus_per_node: 1,
            seed: 1,
            config: ProfilerConfig::default(),
            profile_db: "builtin".into(),
            types: [(t.kind.clone(), t)].into_iter().collect(),
        };
        let rows = prediction_errors(&profiles, &truth);
        let times = [0.039238, 0.0420266, 0.0583353, 0.0869592, 0.165174];
        let want: f64 = [5.0, 10.0, 20.0, 40.0, 80.0]
            .iter()
            .zip(times)
            .map(|(b, t)| (b / 400.0 - t / 3.0f64).abs() / (t / 3.0) * 100.0)
            .sum::<f64>()
            / 5.0;
        assert!((want - 149.65).abs() < 0.01);
        let overall = rows.iter().find(|r| r.group == "overall").unwrap();
        assert_eq!((overall.points, overall.mape_pct), (5, (want * 100.0).round() / 100.0));
        assert!(rows.iter().any(|r| r.group == "gpu-data" && r.name == "measured" && r.points == 5));
        // Batch 5 is the smallest measured: no point below it.
        assert!(rows.iter().all(|r| r.name != "below-smallest"));
        assert!(to_csv(&rows).starts_with("group,name,points,mape_pct\ntype-placement,lstm-infer 1x1,5,"));
    }
}
