//! Paired comparisons over seeds for a finished sweep (`dlsched paired`): the
//! protocol for claims of `experiments/README.md` as a command.
//!
//! A sweep's runs differ by their swept keys. One key (usually `policy`) is
//! compared against a baseline value of it (`--baseline policy=random-placement`);
//! the other swept keys except `seed` form the configuration (a density, a
//! cluster). Within a configuration each value of the compared key gets, per
//! metric:
//!
//! - its mean over the seeds with a two-sided Student-t interval
//!   ([`crate::stats::mean_interval`]);
//! - the per-seed differences `value − baseline` on the same seeds (the same
//!   workload and cluster for both), their mean and interval, the same as a
//!   percentage of the baseline's mean over those seeds, and a verdict:
//!   `lower` or `higher` when the interval excludes zero, else
//!   `no measurable difference` (`identical on every seed` when every
//!   difference is 0).
//!
//! Runs without a number for a metric (`null`, empty: a QoS metric on a trace
//! without QoS classes) are left out of that metric's cells and counted in
//! the report, never dropped silently; a seed that has no baseline run is not
//! paired, and the pairs counted say so.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::stats::{MeanInterval, mean_interval};

/// What to compare.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedOptions {
    /// `summary.csv` columns to report (e.g. `makespan_s`, `jct_mean_s`).
    pub metrics: Vec<String>,
    /// The compared swept key and its baseline value (`("policy",
    /// "random-placement")`); `None` reports means and intervals only.
    pub baseline: Option<(String, String)>,
    /// Only seeds in this inclusive range (the reporting seeds, e.g. 4..=13);
    /// `None` takes every seed.
    pub seeds: Option<(u64, u64)>,
    /// The intervals' confidence level (0.95).
    pub level: f64,
}

/// One value of the compared key in one configuration, for one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedRow {
    /// The configuration: (swept key, value), in the sweep's key order.
    pub config: Vec<(String, String)>,
    /// The compared key's value (empty without a baseline).
    pub value: String,
    /// The metric's mean and interval over the seeds that have it.
    pub stat: MeanInterval,
    /// The paired difference `value − baseline` over the seeds both have;
    /// `None` for the baseline itself or without a baseline.
    pub diff: Option<MeanInterval>,
    /// The baseline's mean over the paired seeds (for the percentage).
    pub baseline_mean: f64,
    /// Runs of this cell without a number for the metric.
    pub missing: usize,
}

impl PairedRow {
    /// `lower`, `higher` or `no measurable difference` (`too few seeds` for
    /// fewer than two pairs, `identical on every seed` when every paired
    /// difference is 0); empty for the baseline.
    pub fn verdict(&self) -> &'static str {
        match &self.diff {
            None => "",
            Some(d) if d.n < 2 => "too few seeds",
            Some(d) if d.mean == 0.0 && d.half_width == 0.0 => "identical on every seed",
            Some(d) => match d.excludes_zero() {
                Some(std::cmp::Ordering::Less) => "lower",
                Some(_) => "higher",
                None => "no measurable difference",
            },
        }
    }
}

/// Every metric's rows.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedReport {
    /// The sweep's question (`sweep.json`).
    pub question: String,
    /// The configuration keys (swept keys other than `seed` and the
    /// compared key), in the sweep's order.
    pub config_keys: Vec<String>,
    /// As asked.
    pub options: PairedOptions,
    /// The seeds used, ascending.
    pub seeds: Vec<u64>,
    /// Per metric, its rows: configurations in order (numbers numerically),
    /// the baseline first within each, then the other values in text order.
    pub tables: Vec<(String, Vec<PairedRow>)>,
}

/// Reads `DIR/summary.csv` and `DIR/sweep.json` of a sweep (merged or not)
/// and computes the report.
///
/// # Errors
/// A message naming the file: a missing or unreadable `summary.csv` or
/// `sweep.json`, a sweep that does not sweep `seed`, a metric or key that is
/// not a column, a baseline value no run has, a seed range no run falls in,
/// or a seed that is not a whole number.
pub fn paired(dir: &Path, options: &PairedOptions) -> Result<PairedReport, String> {
    let summary = dir.join("summary.csv");
    let sweep_json = dir.join("sweep.json");
    let meta: serde_json::Value = serde_json::from_str(&crate::io::read_text(&sweep_json).map_err(|e| e.to_string())?)
        .map_err(|e| format!("{}: {e}", sweep_json.display()))?;
    let swept: Vec<String> = meta["swept"]
        .as_array()
        .ok_or_else(|| format!("{}: no `swept` list", sweep_json.display()))?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let question = meta["question"].as_str().unwrap_or("").to_string();
    if !swept.iter().any(|k| k == "seed") {
        return Err(format!(
            "{}: the sweep does not sweep `seed`, so there is nothing to pair or to put an interval on (sweep `seed = {{ from = 4, to = 13, step = 1 }}`)",
            sweep_json.display()
        ));
    }
    if !(options.level > 0.0 && options.level < 1.0) {
        return Err(format!("the confidence level must be between 0 and 1, got {}", options.level));
    }
    let bytes = crate::io::read_csv(&summary).map_err(|e| e.to_string())?;
    let mut rdr = csv::Reader::from_reader(&bytes[..]);
    let header: Vec<String> =
        rdr.headers().map_err(|e| format!("{}: {e}", summary.display()))?.iter().map(str::to_string).collect();
    let col = |k: &str| {
        header.iter().position(|h| h == k).ok_or_else(|| {
            format!(
                "{}: no column `{k}` (the columns after the swept keys are the summary's metrics)",
                summary.display()
            )
        })
    };
    let seed_col = col("seed")?;
    let (cmp_key, base_value) = match &options.baseline {
        Some((k, v)) => {
            if !swept.contains(k) || k == "seed" {
                return Err(format!(
                    "--baseline {k}={v}: `{k}` is not a swept key other than seed (swept: {})",
                    swept.join(", ")
                ));
            }
            (Some(col(k)?), Some(v.clone()))
        }
        None => (None, None),
    };
    let config_keys: Vec<String> = swept
        .iter()
        .filter(|k| k.as_str() != "seed" && Some(k.as_str()) != options.baseline.as_ref().map(|b| b.0.as_str()))
        .cloned()
        .collect();
    let config_cols: Vec<usize> = config_keys.iter().map(|k| col(k)).collect::<Result<_, _>>()?;
    let metric_cols: Vec<usize> = options.metrics.iter().map(|m| col(m)).collect::<Result<_, _>>()?;
    if options.metrics.is_empty() {
        return Err("no metric: give at least one --metric (a summary.csv column such as makespan_s)".into());
    }
    // (configuration sort key, configuration) -> value -> seed -> the row's fields.
    type Cells = BTreeMap<String, BTreeMap<u64, Vec<String>>>;
    type Config = (Vec<(String, String)>, Cells);
    let mut configs: BTreeMap<Vec<SortKey>, Config> = BTreeMap::new();
    let mut seeds = std::collections::BTreeSet::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| format!("{}: {e}", summary.display()))?;
        let field = |c: usize| rec.get(c).unwrap_or("").to_string();
        let seed: u64 = field(seed_col).parse().map_err(|_| {
            format!("{} line {line}: field `seed`: `{}` is not a whole number", summary.display(), field(seed_col))
        })?;
        if let Some((lo, hi)) = options.seeds
            && !(lo..=hi).contains(&seed)
        {
            continue;
        }
        seeds.insert(seed);
        let config: Vec<(String, String)> =
            config_keys.iter().zip(&config_cols).map(|(k, &c)| (k.clone(), field(c))).collect();
        let sort: Vec<SortKey> = config.iter().map(|(_, v)| sort_key(v)).collect();
        let value = cmp_key.map(field).unwrap_or_default();
        let cell = configs.entry(sort).or_insert_with(|| (config, BTreeMap::new())).1.entry(value).or_default();
        if cell.insert(seed, rec.iter().map(str::to_string).collect()).is_some() {
            return Err(format!(
                "{} line {line}: a second run for seed {seed} in the same configuration: sweep every key that differs, or compare one sweep at a time",
                summary.display()
            ));
        }
    }
    if seeds.is_empty() {
        return Err(match options.seeds {
            Some((lo, hi)) => format!("{}: no run has a seed in {lo}-{hi}", summary.display()),
            None => format!("{}: no runs", summary.display()),
        });
    }
    if let Some(b) = &base_value
        && !configs.values().any(|(_, cells)| cells.contains_key(b))
    {
        let key = &options.baseline.as_ref().map(|b| b.0.clone()).unwrap_or_default();
        return Err(format!("--baseline {key}={b}: no run (in the seeds asked) has `{key}` = `{b}`"));
    }
    let mut tables = Vec::new();
    for (metric, &mc) in options.metrics.iter().zip(&metric_cols) {
        let mut rows = Vec::new();
        for (config, cells) in configs.values() {
            let num =
                |fields: &Vec<String>| fields.get(mc).and_then(|f| f.parse::<f64>().ok()).filter(|x| x.is_finite());
            let base = base_value.as_ref().and_then(|b| cells.get(b));
            let mut order: Vec<&String> = cells.keys().collect();
            order.sort_by_key(|v| (Some(*v) != base_value.as_ref(), sort_key(v)));
            for value in order {
                let cell = &cells[value];
                let xs: Vec<f64> = cell.values().filter_map(num).collect();
                let missing = cell.len() - xs.len();
                let stat = mean_interval(&xs, options.level);
                let (diff, baseline_mean) = match base {
                    Some(b) if Some(value) != base_value.as_ref() => {
                        let pairs: Vec<(f64, f64)> =
                            cell.iter().filter_map(|(s, f)| Some((num(f)?, num(b.get(s)?)?))).collect();
                        let d: Vec<f64> = pairs.iter().map(|(a, b)| a - b).collect();
                        let bm = pairs.iter().map(|p| p.1).sum::<f64>() / pairs.len().max(1) as f64;
                        (Some(mean_interval(&d, options.level)), bm)
                    }
                    _ => (None, stat.mean),
                };
                rows.push(PairedRow {
                    config: config.clone(),
                    value: value.clone(),
                    stat,
                    diff,
                    baseline_mean,
                    missing,
                });
            }
        }
        tables.push((metric.clone(), rows));
    }
    Ok(PairedReport { question, config_keys, options: options.clone(), seeds: seeds.into_iter().collect(), tables })
}

/// A total order on floats for sort keys (numbers before text).
#[derive(Clone, Copy, Debug, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A value's place in a sort: numbers first, numerically; then text.
type SortKey = (u8, OrdF64, String);

/// Numbers first, numerically; then text, alphabetically.
fn sort_key(v: &str) -> SortKey {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() => (0, OrdF64(x), String::new()),
        _ => (1, OrdF64(0.0), v.to_string()),
    }
}

/// A number at a precision that suits its size: 1 decimal from 1,000, 2 from
/// 10, 4 below.
fn num(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

impl PairedReport {
    fn seeds_text(&self) -> String {
        let (lo, hi) = (self.seeds[0], self.seeds[self.seeds.len() - 1]);
        if hi - lo + 1 == self.seeds.len() as u64 {
            format!("seeds {lo}-{hi} ({})", self.seeds.len())
        } else {
            format!(
                "{} seeds ({})",
                self.seeds.len(),
                self.seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )
        }
    }

    /// The report as Markdown: a heading and a table per metric.
    pub fn markdown(&self) -> String {
        let pct = (self.options.level * 100.0).round();
        let mut s = String::new();
        if !self.question.is_empty() {
            let _ = writeln!(s, "{}\n", self.question);
        }
        let _ = write!(s, "{}; mean ± half-width of the {pct} % Student-t interval", self.seeds_text());
        if let Some((k, v)) = &self.options.baseline {
            let _ = write!(
                s,
                "; Δ = the run's value − the value with {k} = {v} on the same seed, its mean [{pct} % interval], and as % of the baseline's mean; verdict `lower`/`higher` only when the interval excludes 0"
            );
        }
        s.push_str(".\n");
        for (metric, rows) in &self.tables {
            let _ = writeln!(s, "\n### {metric}\n");
            let mut head: Vec<String> = self.config_keys.clone();
            if let Some((k, _)) = &self.options.baseline {
                head.push(k.clone());
            }
            head.extend(["n".into(), format!("mean ± {pct} %")]);
            if self.options.baseline.is_some() {
                head.extend(["pairs".into(), "Δ [interval]".into(), "Δ %".into(), "verdict".into()]);
            }
            let _ = writeln!(s, "| {} |", head.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
            for r in rows {
                let mut cells: Vec<String> = r.config.iter().map(|(_, v)| v.clone()).collect();
                if self.options.baseline.is_some() {
                    cells.push(r.value.clone());
                }
                let n = if r.missing > 0 {
                    format!("{} ({} without a value)", r.stat.n, r.missing)
                } else {
                    r.stat.n.to_string()
                };
                cells.push(n);
                cells.push(format!("{} ± {}", num(r.stat.mean), num(r.stat.half_width)));
                if self.options.baseline.is_some() {
                    match &r.diff {
                        None => cells.extend(["".into(), "baseline".into(), "".into(), "".into()]),
                        Some(d) => {
                            let p = 100.0 / r.baseline_mean;
                            cells.push(d.n.to_string());
                            cells.push(format!("{} [{}, {}]", num(d.mean), num(d.lo()), num(d.hi())));
                            cells.push(if r.baseline_mean != 0.0 && r.baseline_mean.is_finite() {
                                format!("{:+.1} [{:+.1}, {:+.1}]", d.mean * p, d.lo() * p, d.hi() * p)
                            } else {
                                "–".into()
                            });
                            cells.push(r.verdict().into());
                        }
                    }
                }
                let _ = writeln!(s, "| {} |", cells.join(" | "));
            }
        }
        s
    }

    /// The report as CSV: one row per (metric, configuration, value), full
    /// precision; empty fields where no interval or difference exists.
    pub fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut head: Vec<String> = vec!["metric".into()];
        head.extend(self.config_keys.iter().cloned());
        head.extend(
            [
                "value",
                "n",
                "missing",
                "mean",
                "lo",
                "hi",
                "pairs",
                "diff_mean",
                "diff_lo",
                "diff_hi",
                "baseline_mean",
                "verdict",
            ]
            .map(String::from),
        );
        let _ = w.write_record(&head);
        let f = |x: f64| if x.is_finite() { format!("{x}") } else { String::new() };
        for (metric, rows) in &self.tables {
            for r in rows {
                let mut rec = vec![metric.clone()];
                rec.extend(r.config.iter().map(|(_, v)| v.clone()));
                rec.extend([r.value.clone(), r.stat.n.to_string(), r.missing.to_string()]);
                rec.extend([f(r.stat.mean), f(r.stat.lo()), f(r.stat.hi())]);
                match &r.diff {
                    Some(d) => rec.extend([d.n.to_string(), f(d.mean), f(d.lo()), f(d.hi()), f(r.baseline_mean)]),
                    None => rec.extend(std::iter::repeat_n(String::new(), 5)),
                }
                rec.push(r.verdict().to_string());
                let _ = w.write_record(&rec);
            }
        }
        String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
    }
}
