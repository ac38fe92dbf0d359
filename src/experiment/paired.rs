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
//! Several sweep directories can be joined (`paired_many`): a policy swept
//! with its own options in one sweep and its baselines in another are
//! compared on the same configuration and seed. `by` names the
//! configuration keys when the default (every swept key but `seed` and the
//! compared key) is not what is meant; the swept keys left over name the
//! arms (a sweep that sweeps none of them, a control with its policy in
//! `[base]`, is named `sweep DIR`); a run whose sweep lacks a configuration
//! key joins every
//! configuration that agrees with it on the rest (one control sweep for
//! all); `average_over` averages each seed over a key (e.g. the offered
//! load) before pairing.
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
#[derive(Clone, Debug, PartialEq, Default)]
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
    /// The configuration keys (rows are compared only within a
    /// configuration); `None`: every swept key but `seed`, the baseline's key
    /// and `average_over`. The swept keys left over name the arms compared
    /// (`policy=genie, reading=strict`). A run whose sweep does not sweep a
    /// configuration key belongs to every configuration that agrees with it
    /// on the keys it has (a control run once, compared in each).
    pub by: Option<Vec<String>>,
    /// Keys averaged over per seed (e.g. `load`): a seed's value is the mean
    /// of its runs over these keys' values, and two arms are paired on a
    /// seed only when they have the same values of them.
    pub average_over: Vec<String>,
}

/// One value of the compared key in one configuration, for one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedRow {
    /// The configuration: (key, value), in `config_keys` order.
    pub config: Vec<(String, String)>,
    /// The arm: the compared key's value alone when it is the only swept key
    /// left, else `key=value, ...` (empty without a baseline and extra keys).
    pub value: String,
    /// The metric's mean and interval over the seeds that have it.
    pub stat: MeanInterval,
    /// The paired difference `value − baseline` over the seeds both have;
    /// `None` for the baseline itself or without a baseline.
    pub diff: Option<MeanInterval>,
    /// The baseline's mean over the paired seeds (for the percentage).
    pub baseline_mean: f64,
    /// Seeds of this cell without a number for the metric.
    pub missing: usize,
}

impl PairedRow {
    /// `lower`, `higher` or `no measurable difference`; `identical on every
    /// seed` when every paired difference is 0; `no pairs (...)` when no seed
    /// has a value in both (the baseline lacks the metric, or the arms cover
    /// different `average_over` values), `one pair: no interval` for one;
    /// empty for the baseline.
    pub fn verdict(&self) -> &'static str {
        match &self.diff {
            None => "",
            Some(d) if d.n == 0 => "no pairs (no seed has a value in both)",
            Some(d) if d.n == 1 => "one pair: no interval",
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
    /// The sweeps' questions (`sweep.json`), one per directory.
    pub question: String,
    /// The configuration keys, in the sweeps' order.
    pub config_keys: Vec<String>,
    /// The keys naming an arm (swept keys other than `seed`, the
    /// configuration keys and `average_over`).
    pub arm_keys: Vec<String>,
    /// As asked.
    pub options: PairedOptions,
    /// The seeds used, ascending.
    pub seeds: Vec<u64>,
    /// Per metric, its rows: configurations in order (numbers numerically),
    /// the baseline first within each, then the other arms in text order.
    pub tables: Vec<(String, Vec<PairedRow>)>,
}

/// One sweep directory's rows.
struct Sweep {
    name: String,
    summary: std::path::PathBuf,
    swept: Vec<String>,
    header: Vec<String>,
    rows: Vec<(usize, csv::StringRecord)>,
    /// Per row, from `runs/ID/manifest.json` when it is there: the policy's
    /// name and the run's setting (the spec's [`SETTING_KEYS`]).
    manifests: Vec<Option<(String, serde_json::Value)>>,
    /// `policy` is not swept here but read from the manifests (several
    /// sweeps joined, each with its policy in `[base]`).
    implied_policy: bool,
}

/// The parts of a run's spec that make "the same workload": two runs paired
/// on a seed must agree on all of them (the policy and its predictor may
/// differ; that is what is compared).
pub const SETTING_KEYS: [&str; 5] = ["cluster", "workload", "rate_model", "profiles", "seed"];

fn read_sweep(dir: &Path) -> Result<(Sweep, String), String> {
    let summary = dir.join("summary.csv");
    let sweep_json = dir.join("sweep.json");
    if !sweep_json.exists() && dir.join("manifest.json").exists() {
        return Err(format!(
            "{}: a run directory (it has manifest.json); give the sweep directory that holds it (with sweep.json and summary.csv)",
            dir.display()
        ));
    }
    let meta: serde_json::Value = serde_json::from_str(&crate::io::read_text(&sweep_json).map_err(|e| e.to_string())?)
        .map_err(|e| format!("{}: {e}", sweep_json.display()))?;
    let swept: Vec<String> = meta["swept"]
        .as_array()
        .ok_or_else(|| format!("{}: no `swept` list", sweep_json.display()))?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if !swept.iter().any(|k| k == "seed") {
        return Err(format!(
            "{}: the sweep does not sweep `seed`, so there is nothing to pair or to put an interval on (sweep `seed = {{ from = 4, to = 13, step = 1 }}`)",
            sweep_json.display()
        ));
    }
    let bytes = crate::io::read_csv(&summary).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Err(format!("{}: empty file (not even a header)", summary.display()));
    }
    let mut rdr = csv::Reader::from_reader(&bytes[..]);
    let header: Vec<String> =
        rdr.headers().map_err(|e| format!("{}: {e}", summary.display()))?.iter().map(str::to_string).collect();
    let rows: Vec<(usize, csv::StringRecord)> = rdr
        .records()
        .enumerate()
        .map(|(i, r)| r.map(|r| (i + 2, r)).map_err(|e| format!("{}: {e}", summary.display())))
        .collect::<Result<_, _>>()?;
    let id_col = header.iter().position(|h| h == "run_id");
    let mut manifests = Vec::with_capacity(rows.len());
    for (_, rec) in &rows {
        let path = id_col.and_then(|c| rec.get(c)).map(|id| dir.join("runs").join(id).join("manifest.json"));
        let m = match path {
            Some(p) if p.exists() => {
                let v: serde_json::Value = serde_json::from_str(&crate::io::read_text(&p).map_err(|e| e.to_string())?)
                    .map_err(|e| format!("{}: {e}", p.display()))?;
                let setting: serde_json::Map<String, serde_json::Value> =
                    SETTING_KEYS.iter().map(|k| (k.to_string(), v["spec"][*k].clone())).collect();
                Some((v["policy"].as_str().unwrap_or("").to_string(), serde_json::Value::Object(setting)))
            }
            _ => None,
        };
        manifests.push(m);
    }
    let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok((
        Sweep { name, summary, swept, header, rows, manifests, implied_policy: false },
        meta["question"].as_str().unwrap_or("").to_string(),
    ))
}

/// [`paired_many`] on one sweep directory.
///
/// # Errors
/// As [`paired_many`].
pub fn paired(dir: &Path, options: &PairedOptions) -> Result<PairedReport, String> {
    paired_many(&[dir], options)
}

/// Reads `summary.csv` and `sweep.json` of each sweep directory (merged or
/// not; several sweeps of the same workloads are joined, e.g. a policy that
/// takes an option in one and its baselines in another) and computes the
/// report.
///
/// # Errors
/// A message naming the file (and line and field for a bad value): a missing
/// or unreadable `summary.csv` or `sweep.json`, a sweep that does not sweep
/// `seed`, a metric or key that is not a column, a baseline value no run has
/// or that several arms share, a seed range no run falls in, a seed that is
/// not a whole number, two runs of one arm, configuration and seed.
pub fn paired_many(dirs: &[&Path], options: &PairedOptions) -> Result<PairedReport, String> {
    if !(options.level > 0.0 && options.level < 1.0) {
        return Err(format!("the confidence level must be between 0 and 1, got {}", options.level));
    }
    if options.metrics.is_empty() {
        return Err("no metric: give at least one --metric (a summary.csv column such as makespan_s)".into());
    }
    if dirs.is_empty() {
        return Err("no sweep directory".into());
    }
    let mut sweeps = Vec::new();
    let mut questions = Vec::new();
    let mut seen = Vec::new();
    for d in dirs {
        let canon = std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
        if seen.contains(&canon) {
            return Err(format!("{}: given twice", d.display()));
        }
        seen.push(canon);
        let (s, q) = read_sweep(d)?;
        if !q.is_empty() && !questions.contains(&q) {
            questions.push(q);
        }
        sweeps.push(s);
    }
    // Joined sweeps that each fix their policy in `[base]`: the policy, read
    // from the runs' manifests, names their arms (`--baseline policy=fifo`).
    if sweeps.len() > 1 {
        for s in &mut sweeps {
            if !s.swept.iter().any(|k| k == "policy") && s.manifests.iter().all(Option::is_some) {
                s.swept.insert(0, "policy".into());
                s.implied_policy = true;
            }
        }
    }
    let mut all_keys: Vec<String> = Vec::new();
    for s in &sweeps {
        for k in &s.swept {
            if !all_keys.contains(k) {
                all_keys.push(k.clone());
            }
        }
    }
    let listed = || all_keys.join(", ");
    let base_key = options.baseline.as_ref().map(|b| b.0.clone());
    if let Some((k, v)) = &options.baseline
        && (!all_keys.contains(k) || k == "seed")
    {
        return Err(format!("--baseline {k}={v}: `{k}` is not a swept key other than seed (swept: {})", listed()));
    }
    for k in options.by.iter().flatten().chain(&options.average_over) {
        if !all_keys.contains(k) || k == "seed" || Some(k) == base_key.as_ref() {
            return Err(format!(
                "`{k}` (--by / --average-over) is not a swept key other than seed and the baseline's key (swept: {})",
                listed()
            ));
        }
    }
    if let Some(k) = options.by.iter().flatten().find(|k| options.average_over.contains(k)) {
        return Err(format!("`{k}` is both a configuration key (--by) and averaged over (--average-over)"));
    }
    let config_keys: Vec<String> = match &options.by {
        Some(by) => all_keys.iter().filter(|k| by.contains(k)).cloned().collect(),
        None => all_keys
            .iter()
            .filter(|k| k.as_str() != "seed" && Some(*k) != base_key.as_ref() && !options.average_over.contains(k))
            .cloned()
            .collect(),
    };
    let arm_keys: Vec<String> = all_keys
        .iter()
        .filter(|k| k.as_str() != "seed" && !config_keys.contains(k) && !options.average_over.contains(k))
        .cloned()
        .collect();
    for s in &sweeps {
        for m in &options.metrics {
            if !s.header.contains(m) {
                return Err(format!(
                    "{}: no column `{m}` (the columns after the swept keys are the summary's metrics)",
                    s.summary.display()
                ));
            }
        }
    }
    // Every run, as (configuration with None for a key its sweep lacks, arm, averaged-over values, seed, metrics).
    struct RunRow {
        config: Vec<Option<String>>,
        arm: String,
        base: bool,
        avg: Vec<String>,
        seed: u64,
        metrics: Vec<Option<f64>>,
        setting: Option<serde_json::Value>,
        at: String,
    }
    let mut runs = Vec::new();
    let mut seeds = std::collections::BTreeSet::new();
    for s in &sweeps {
        let col = |k: &str| s.header.iter().position(|h| h == k);
        let seed_col = col("seed").ok_or_else(|| format!("{}: no column `seed`", s.summary.display()))?;
        for ((line, rec), manifest) in s.rows.iter().zip(&s.manifests) {
            let field = |c: usize| rec.get(c).unwrap_or("").to_string();
            let seed: u64 = field(seed_col).parse().map_err(|_| {
                format!(
                    "{} line {line}: field `seed`: `{}` is not a whole number",
                    s.summary.display(),
                    field(seed_col)
                )
            })?;
            if let Some((lo, hi)) = options.seeds
                && !(lo..=hi).contains(&seed)
            {
                continue;
            }
            seeds.insert(seed);
            let swept_value = |k: &str| {
                if k == "policy" && s.implied_policy {
                    return manifest.as_ref().map(|m| m.0.clone());
                }
                s.swept.iter().any(|x| x == k).then(|| col(k).map(field)).flatten()
            };
            let config = config_keys.iter().map(|k| swept_value(k)).collect();
            let arm_parts: Vec<(String, String)> =
                arm_keys.iter().filter_map(|k| swept_value(k).map(|v| (k.clone(), v))).collect();
            let arm = match (&arm_parts[..], &base_key) {
                // A sweep that sweeps none of the arm keys (a control with its
                // policy in `[base]`) is named by its directory.
                ([], _) if !arm_keys.is_empty() => format!("sweep {}", s.name),
                ([(k, v)], Some(b)) if k == b => v.clone(),
                _ => arm_parts.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "),
            };
            let base = match &options.baseline {
                Some((k, v)) => arm_parts.iter().any(|(ak, av)| ak == k && av == v),
                None => false,
            };
            let avg = options.average_over.iter().map(|k| swept_value(k).unwrap_or_default()).collect();
            // A metric's field: a number, or empty / `null` (the run has no
            // such value); anything else is an error, not a missing value.
            let metrics = options
                .metrics
                .iter()
                .map(|m| {
                    let f = col(m).and_then(|c| rec.get(c)).unwrap_or("");
                    if f.is_empty() || f == "null" {
                        return Ok(None);
                    }
                    match f.parse::<f64>() {
                        Ok(x) if x.is_finite() => Ok(Some(x)),
                        Ok(_) => Err(format!("{} line {line}: field `{m}`: `{f}` is not a finite number", s.summary.display())),
                        Err(_) => Err(format!(
                            "{} line {line}: field `{m}`: `{f}` is not a number (a metric column is numbers, empty or null)",
                            s.summary.display()
                        )),
                    }
                })
                .collect::<Result<Vec<_>, String>>()?;
            runs.push(RunRow {
                config,
                arm,
                base,
                avg,
                seed,
                metrics,
                setting: manifest.as_ref().map(|m| m.1.clone()),
                at: format!("{} line {line}", s.summary.display()),
            });
        }
    }
    if seeds.is_empty() {
        let where_ = sweeps.iter().map(|s| s.summary.display().to_string()).collect::<Vec<_>>().join(", ");
        return Err(match options.seeds {
            Some((lo, hi)) => format!("{where_}: no run has a seed in {lo}-{hi}"),
            None => format!("{where_}: no runs"),
        });
    }
    let base_arm: Option<String> = match &options.baseline {
        None => None,
        Some((k, v)) => {
            let arms: std::collections::BTreeSet<&String> = runs.iter().filter(|r| r.base).map(|r| &r.arm).collect();
            match arms.len() {
                0 => return Err(format!("--baseline {k}={v}: no run (in the seeds asked) has `{k}` = `{v}`")),
                1 => arms.into_iter().next().cloned(),
                _ => {
                    return Err(format!(
                        "--baseline {k}={v}: several arms have it ({}); name the keys that tell them apart with --by",
                        arms.into_iter().map(String::as_str).collect::<Vec<_>>().join("; ")
                    ));
                }
            }
        }
    };
    // The full configurations (runs that have every configuration key); a
    // run without some key joins each full configuration that agrees with it.
    let full: std::collections::BTreeSet<Vec<String>> =
        runs.iter().filter_map(|r| r.config.iter().cloned().collect::<Option<Vec<String>>>()).collect();
    /// Per seed, its runs: (averaged-over values, metrics, setting, where).
    type Entry = (Vec<String>, Vec<Option<f64>>, Option<serde_json::Value>, String);
    type Seeds = BTreeMap<u64, Vec<Entry>>;
    type Arms = BTreeMap<String, Seeds>;
    let mut cells: BTreeMap<Vec<SortKey>, (Vec<String>, Arms)> = BTreeMap::new();
    for r in &runs {
        let targets: Vec<Vec<String>> = if full.is_empty() {
            vec![r.config.iter().map(|c| c.clone().unwrap_or_else(|| "–".into())).collect()]
        } else {
            full.iter()
                .filter(|f| r.config.iter().zip(f.iter()).all(|(c, v)| c.as_ref().is_none_or(|c| c == v)))
                .cloned()
                .collect()
        };
        for t in targets {
            let sort = t.iter().map(|v| sort_key(v)).collect();
            let per_seed =
                cells.entry(sort).or_insert_with(|| (t, BTreeMap::new())).1.entry(r.arm.clone()).or_default();
            let entries = per_seed.entry(r.seed).or_default();
            if entries.iter().any(|e| e.0 == r.avg) {
                return Err(format!(
                    "{}: a second run of arm `{}` for seed {} in one configuration: name the key that differs with --by or --average-over",
                    r.at, r.arm, r.seed
                ));
            }
            entries.push((r.avg.clone(), r.metrics.clone(), r.setting.clone(), r.at.clone()));
        }
    }
    // A seed's value: the mean over its runs (one without averaging), with
    // the averaged-over values it covers; None when a run lacks the metric.
    let seed_value = |entries: &Vec<Entry>, m: usize| -> (Vec<Vec<String>>, Option<f64>) {
        let mut keys: Vec<Vec<String>> = entries.iter().map(|e| e.0.clone()).collect();
        keys.sort();
        let vals: Option<Vec<f64>> = entries.iter().map(|e| e.1[m]).collect();
        (keys, vals.map(|v| v.iter().sum::<f64>() / v.len() as f64))
    };
    // Paired runs must share their workload, cluster, rate model and profile
    // database (a sweep joined with another of a different `[base]`, or a
    // control whose fixed density differs from the configuration it joins).
    if let Some(b) = &base_arm {
        for (config, arms) in cells.values() {
            let Some(base) = arms.get(b) else { continue };
            for (arm, per_seed) in arms.iter().filter(|(a, _)| *a != b) {
                for (seed, entries) in per_seed {
                    let Some(bentries) = base.get(seed) else { continue };
                    for e in entries {
                        let Some(be) = bentries.iter().find(|x| x.0 == e.0) else { continue };
                        if let (Some(x), Some(y)) = (&e.2, &be.2)
                            && x != y
                        {
                            let key = SETTING_KEYS.iter().find(|k| x[**k] != y[**k]).unwrap_or(&"spec");
                            return Err(format!(
                                "{} (arm `{arm}`) and {} (baseline `{b}`), seed {seed}, configuration {}: the runs differ in their `{key}` ({} vs {}), so they are not the same workload; compare sweeps with the same [base], or name the key that differs with --by",
                                e.3,
                                be.3,
                                if config.is_empty() { "(all runs)".to_string() } else { config.join(", ") },
                                x[*key],
                                y[*key]
                            ));
                        }
                    }
                }
            }
        }
    }
    let mut tables = Vec::new();
    for (mi, metric) in options.metrics.iter().enumerate() {
        let mut rows = Vec::new();
        for (config, arms) in cells.values() {
            let base = base_arm.as_ref().and_then(|b| arms.get(b));
            let mut order: Vec<&String> = arms.keys().collect();
            order.sort_by_key(|a| (Some(*a) != base_arm.as_ref(), sort_key(a)));
            for arm in order {
                let per_seed = &arms[arm];
                let vals: Vec<(u64, Vec<Vec<String>>, Option<f64>)> = per_seed
                    .iter()
                    .map(|(s, e)| {
                        let (keys, x) = seed_value(e, mi);
                        (*s, keys, x)
                    })
                    .collect();
                let xs: Vec<f64> = vals.iter().filter_map(|v| v.2).collect();
                let missing = vals.len() - xs.len();
                let stat = mean_interval(&xs, options.level);
                let (diff, baseline_mean) = match base {
                    Some(b) if Some(arm) != base_arm.as_ref() => {
                        let pairs: Vec<(f64, f64)> = vals
                            .iter()
                            .filter_map(|(s, keys, x)| {
                                let (bkeys, bx) = seed_value(b.get(s)?, mi);
                                (bkeys == *keys).then_some((x.as_ref().copied()?, bx?))
                            })
                            .collect();
                        let d: Vec<f64> = pairs.iter().map(|(a, b)| a - b).collect();
                        let bm = pairs.iter().map(|p| p.1).sum::<f64>() / pairs.len().max(1) as f64;
                        (Some(mean_interval(&d, options.level)), bm)
                    }
                    _ => (None, stat.mean),
                };
                rows.push(PairedRow {
                    config: config_keys.iter().cloned().zip(config.iter().cloned()).collect(),
                    value: arm.clone(),
                    stat,
                    diff,
                    baseline_mean,
                    missing,
                });
            }
        }
        tables.push((metric.clone(), rows));
    }
    Ok(PairedReport {
        question: questions.join("\n\n"),
        config_keys,
        arm_keys,
        options: options.clone(),
        seeds: seeds.into_iter().collect(),
        tables,
    })
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
        if !self.options.average_over.is_empty() {
            let _ = write!(s, "; each seed's value is its mean over {}", self.options.average_over.join(", "));
        }
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
            if self.options.baseline.is_some() || !self.arm_keys.is_empty() {
                head.push(match (&self.arm_keys[..], &self.options.baseline) {
                    ([k], _) => k.clone(),
                    (_, Some((k, _))) if self.arm_keys.len() <= 1 => k.clone(),
                    _ => "arm".into(),
                });
            }
            head.extend(["n".into(), format!("mean ± {pct} %")]);
            if self.options.baseline.is_some() {
                head.extend(["pairs".into(), "Δ [interval]".into(), "Δ %".into(), "verdict".into()]);
            }
            let _ = writeln!(s, "| {} |", head.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
            for r in rows {
                let mut cells: Vec<String> = r.config.iter().map(|(_, v)| v.clone()).collect();
                if self.options.baseline.is_some() || !self.arm_keys.is_empty() {
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
                            let pc = |x: f64| if x.is_finite() { format!("{x:+.1}") } else { "–".into() };
                            cells.push(if r.baseline_mean != 0.0 && r.baseline_mean.is_finite() {
                                format!("{} [{}, {}]", pc(d.mean * p), pc(d.lo() * p), pc(d.hi() * p))
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
