//! Experiments: a TOML file with a base configuration and a `[sweep]` table,
//! expanded to the cartesian product of its values, run in parallel (rayon),
//! resumable and shardable.
//!
//! ```toml
//! question = "Does backfill help FIFO and SJF on Philly?"
//! [base]
//! trace = "../../shared/traces/philly/rfold_philly_jobs.csv"  # relative to this file
//! cluster = "philly"
//! [sweep]
//! policy = ["fifo", "sjf"]
//! backfill = [false, true]
//! seed = { from = 1, to = 3, step = 1 }
//! ```
//!
//! Every run is plain data (a parameter map) until its worker builds it, its
//! id is a hash of its full configuration, and results are written in run-id
//! order whatever the thread count, so the outputs are byte-identical.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::raw::enum_of;
use crate::error::{ConfigError, ConfigErrorKind};
use crate::experiment::RunSpec;
use crate::policy::placement::PlacementKind;

pub use super::raw::{KEYS, Value};

/// One run: its id and its full parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// 12 hex digits of the FNV-1a hash of the run's parameters.
    pub id: String,
    /// Every parameter (base with the run's swept values).
    pub params: BTreeMap<String, Value>,
    /// Its place in the experiment's own run order: the `[sweep]` grid with
    /// the keys by name, each key's values in the file's order, the last
    /// key varying fastest. `summary.csv` lists the runs in this order;
    /// [`Experiment::runs`] and the shards are in id order.
    pub index: usize,
}

/// A parsed, validated, expanded experiment.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    /// The file.
    pub path: PathBuf,
    /// The question the experiment answers.
    pub question: String,
    /// Swept keys, in key order.
    pub swept: Vec<String>,
    /// The runs, in run-id order ([`Run::index`] gives the file's order).
    pub runs: Vec<Run>,
    /// The RIFLING tables and GENIE models the runs name, each read once.
    pub artefacts: crate::experiment::Artefacts,
    /// Options some runs set that do not change them (`backfill` where the
    /// policy takes tasks in order anyway), once each, for the user.
    pub notes: Vec<String>,
    /// The files every run's tables and the sweep's summary are written as
    /// (`[base]` key `output_format`; `dlsched sweep --output-format`
    /// overrides it). With parquet, `summary.parquet` is written beside
    /// `summary.csv`, which stays (`dlsched merge` reads it).
    pub output_format: crate::experiment::OutputFormat,
    /// The policy kinds and trace formats the runs may name besides the
    /// built-in ones.
    pub registry: super::registry::Registry,
}

/// What a run's parameters set that the run ignores.
fn ignored(p: &BTreeMap<String, Value>) -> Option<String> {
    if p.get("backfill") != Some(&Value::Bool(true)) {
        return None;
    }
    let policy = p.get("policy").map_or_else(|| "fifo".to_string(), ToString::to_string);
    let genie_workload = p.get("workload") == Some(&Value::Str("genie".into()));
    match policy.as_str() {
        "rifling" | "rifling-frozen" | "random-placement" => Some(format!(
            "`backfill` does not apply to `policy` = `{policy}`: it places each task itself, in arrival order"
        )),
        "fifo" | "sjf" if genie_workload => Some(format!(
            "`backfill` changes nothing for `policy` = `{policy}` on GENIE tasks: each runs on 1 GPU, so none can start while the first in the queue waits"
        )),
        _ => None,
    }
}

/// The note `simulate` prints (its `share_note`) when a sharing placement
/// will share nothing, for the runs where the parameters alone say so: the
/// synthetic workload at trace speed draws no model, so no job has a memory
/// figure or a guaranteed share, and each holds whole GPUs. (A trace's jobs
/// are known only once it is read, when the run runs.)
fn shares_nothing(p: &BTreeMap<String, Value>) -> Option<String> {
    let placement = enum_of::<PlacementKind>("placement", p.get("placement")?).ok()?;
    let synthetic = !p.contains_key("trace") && p.get("workload").is_none_or(|w| *w == Value::Str("synthetic".into()));
    let trace_speed = p.get("rate_model").is_none_or(|r| *r == Value::Str("trace".into()));
    (placement.may_share() && synthetic && trace_speed).then(|| {
        format!(
            "`placement` = `{}` on the synthetic workload at `rate_model` = `trace`: no job has a memory figure or a guaranteed share (gpu_milli), so none will share a GPU: each holds whole GPUs, as with an exclusive placement; `rate_model` = \"table\" gives jobs a model and a memory estimate",
            placement.name()
        )
    })
}

fn err(path: &Path, msg: String) -> String {
    format!("{}: {msg}", path.display())
}

/// A `columns` value (`base.columns`, `sweep.columns`, or an item of a
/// `sweep.columns` list) in one spelling: the string form
/// `"field=column,..."` or a table `{ field = "column", ... }` becomes the
/// pairs trimmed and sorted by field, joined by commas, so that every
/// spelling of one mapping has one run id. (The mapping is order-free:
/// [`crate::trace::ColumnMap::set`] refuses a field or column given twice.) A
/// string that is not all `field=column` pairs is left as written, for the
/// run spec to name what is wrong.
fn columns_value(path: &Path, key: &str, v: &toml::Value) -> Result<Value, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    match v {
        toml::Value::String(s) => {
            for pair in s.split(',').filter(|p| !p.trim().is_empty()) {
                let Some((f, c)) = pair.split_once('=') else { return Ok(Value::Str(s.clone())) };
                pairs.push((f.trim().to_string(), c.trim().to_string()));
            }
        }
        toml::Value::Table(t) => {
            for (f, c) in t {
                let c = c.as_str().ok_or_else(|| {
                    err(path, format!("`{key}.{f}` must be a string (the trace column the field is read from)"))
                })?;
                if f.contains([',', '=']) || c.contains([',', '=']) {
                    return Err(err(
                        path,
                        format!("`{key}.{f}` = `{c}`: a field or column name cannot hold `,` or `=`"),
                    ));
                }
                pairs.push((f.trim().to_string(), c.trim().to_string()));
            }
        }
        other => {
            return Err(err(
                path,
                format!("`{key}` must be a string or a table of field = \"column\", not {}", other.type_str()),
            ));
        }
    }
    pairs.sort();
    Ok(Value::Str(pairs.iter().map(|(f, c)| format!("{f}={c}")).collect::<Vec<_>>().join(",")))
}

fn scalar(path: &Path, key: &str, v: &toml::Value) -> Result<Value, String> {
    if key == "base.columns" || key == "sweep.columns" {
        return columns_value(path, key, v);
    }
    match v {
        toml::Value::Integer(i) => Ok(Value::Int(*i)),
        toml::Value::Float(x) => Ok(Value::Float(*x)),
        toml::Value::Boolean(b) => Ok(Value::Bool(*b)),
        toml::Value::String(s) => Ok(Value::Str(s.clone())),
        other => Err(err(path, format!("`{key}` must be a number, boolean or string here, not {}", other.type_str()))),
    }
}

fn check_key(path: &Path, table: &str, key: &str) -> Result<(), ConfigError> {
    if KEYS.iter().any(|(k, _)| *k == key) {
        return Ok(());
    }
    let allowed: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
    Err(ConfigError::new(
        ConfigErrorKind::UnknownName,
        err(
            path,
            format!(
                "unknown key `{table}.{key}`; allowed: {}, and policy_opt.NAME for an option of the policy",
                allowed.join(", ")
            ),
        ),
    )
    .with_key(key))
}

/// The entries of a `[base]` or `[sweep]` table, with its `policy_opt`
/// table (`policy_opt.NAME = VALUE`, or `[base.policy_opt]`) flattened into
/// `policy_opt.NAME` keys, nested groups dotted (`policy_opt.share.max_tenants`);
/// in `[sweep]` a table of `from`, `to`, `step` is a range, not a group.
fn entries(path: &Path, table: &str, t: toml::Table) -> Result<Vec<(String, toml::Value)>, ConfigError> {
    fn flatten(prefix: &str, v: toml::Value, sweep: bool, out: &mut Vec<(String, toml::Value)>) {
        match v {
            toml::Value::Table(t)
                if !(sweep && !t.is_empty() && t.keys().all(|k| ["from", "to", "step"].contains(&k.as_str()))) =>
            {
                for (k, x) in t {
                    flatten(&format!("{prefix}.{k}"), x, sweep, out);
                }
            }
            v => out.push((prefix.to_string(), v)),
        }
    }
    let mut out = Vec::new();
    for (k, v) in t {
        match v {
            toml::Value::Table(opts) if k == "policy_opt" => {
                if opts.is_empty() {
                    return Err(
                        err(path, format!("`{table}.policy_opt` is empty; give `policy_opt.NAME = VALUE`")).into()
                    );
                }
                flatten("policy_opt", toml::Value::Table(opts), table == "sweep", &mut out);
            }
            v => {
                if k == "policy_opt" {
                    return Err(err(
                        path,
                        format!("`{table}.policy_opt` must be a table: write `policy_opt.NAME = VALUE`"),
                    )
                    .into());
                }
                check_key(path, table, &k)?;
                out.push((k, v));
            }
        }
    }
    Ok(out)
}

/// The values one `[sweep]` entry takes: a value, a list, or `{ from, to, step }`
/// (`columns`: a string or table, or a list of them).
fn sweep_values(path: &Path, key: &str, v: &toml::Value) -> Result<Vec<Value>, String> {
    match v {
        toml::Value::Table(_) if key == "columns" => Ok(vec![scalar(path, "sweep.columns", v)?]),
        toml::Value::Array(items) => {
            if items.is_empty() {
                return Err(err(path, format!("`sweep.{key}` is an empty list")));
            }
            items.iter().map(|i| scalar(path, &format!("sweep.{key}"), i)).collect()
        }
        toml::Value::Table(t) => {
            for k in t.keys() {
                if !["from", "to", "step"].contains(&k.as_str()) {
                    return Err(err(path, format!("`sweep.{key}` has `{k}`; a range takes from, to and step")));
                }
            }
            let num = |k: &str| -> Result<&toml::Value, String> {
                t.get(k).ok_or_else(|| err(path, format!("`sweep.{key}` range needs `{k}`")))
            };
            let (from, to, step) = (num("from")?, num("to")?, num("step")?);
            if let (Some(a), Some(b), Some(s)) = (from.as_integer(), to.as_integer(), step.as_integer()) {
                if s <= 0 || a > b {
                    return Err(err(path, format!("`sweep.{key}` needs step > 0 and from <= to")));
                }
                let n = b.checked_sub(a).map(|d| d / s);
                match n {
                    Some(n) if n <= 10_000 => return Ok((0..=n).map(|i| Value::Int(a + i * s)).collect()),
                    _ => return Err(err(path, format!("`sweep.{key}` expands to more than 10,000 values"))),
                }
            }
            let f = |v: &toml::Value, k: &str| {
                v.as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .ok_or_else(|| err(path, format!("`sweep.{key}.{k}` must be a number")))
            };
            let (a, b, s) = (f(from, "from")?, f(to, "to")?, f(step, "step")?);
            if !(s > 0.0 && s.is_finite() && a <= b && a.is_finite() && b.is_finite()) {
                return Err(err(path, format!("`sweep.{key}` needs step > 0 and from <= to")));
            }
            let n = ((b - a) / s + 1e-9).floor() as usize;
            if n > 10_000 {
                return Err(err(path, format!("`sweep.{key}` expands to more than 10,000 values")));
            }
            // Rounded to 1e-9 so that 0.1 steps do not drift.
            Ok((0..=n).map(|i| Value::Float(((a + i as f64 * s) * 1e9).round() / 1e9)).collect())
        }
        other => Ok(vec![scalar(path, &format!("sweep.{key}"), other)?]),
    }
}

/// 12 hex digits of FNV-1a over `key=value` lines of the parameters, but
/// `output_format` (which changes no simulated value: a run keeps its id,
/// and `--resume` its directory, whatever files it is written as).
fn run_id(params: &BTreeMap<String, Value>) -> String {
    let h = params
        .iter()
        .filter(|(k, _)| k.as_str() != "output_format")
        .fold(crate::rng::FNV_OFFSET, |h, (k, v)| crate::rng::fnv1a_update(h, format!("{k}={v}\n").as_bytes()));
    format!("{:012x}", h >> 16)
}

impl Experiment {
    /// The runs in the experiment's own order ([`Run::index`]).
    pub fn in_file_order(&self) -> Vec<&Run> {
        let mut runs: Vec<&Run> = self.runs.iter().collect();
        runs.sort_by_key(|r| r.index);
        runs
    }

    /// Reads, validates and expands an experiment file; every run is checked
    /// by building its [`RunSpec`] before anything runs.
    ///
    /// # Errors
    /// A [`ConfigError`] whose message names the file, the key and what is
    /// allowed: an unknown key is [`ConfigErrorKind::UnknownName`], and an
    /// invalid run carries the kind and key of its run spec's error
    /// ([`to_run_spec`]).
    pub fn load(path: &Path) -> Result<Experiment, ConfigError> {
        Self::load_in(path, &super::registry::Registry::default())
    }

    /// [`Experiment::load`] knowing the policy kinds and trace formats of
    /// `registry`: its kinds are values of `policy`, its formats of `format`.
    ///
    /// # Errors
    /// As [`Experiment::load`].
    pub fn load_in(path: &Path, registry: &super::registry::Registry) -> Result<Experiment, ConfigError> {
        let text = crate::io::read_text(path).map_err(|e| e.to_string())?;
        let doc: toml::Table = toml::from_str(&text).map_err(|e| err(path, e.to_string()))?;
        for k in doc.keys() {
            if !["question", "base", "sweep"].contains(&k.as_str()) {
                return Err(ConfigError::new(
                    ConfigErrorKind::UnknownName,
                    err(path, format!("unknown top-level key `{k}`; allowed: question, base, sweep")),
                )
                .with_key(k.as_str()));
            }
        }
        let question = doc
            .get("question")
            .and_then(toml::Value::as_str)
            .filter(|q| !q.trim().is_empty())
            .ok_or_else(|| err(path, "needs `question = \"...\"`: the question the experiment answers".into()))?
            .to_string();
        let table = |name: &str| -> Result<toml::Table, String> {
            match doc.get(name) {
                None => Ok(toml::Table::new()),
                Some(toml::Value::Table(t)) => Ok(t.clone()),
                Some(_) => Err(err(path, format!("`{name}` must be a table ([{name}])"))),
            }
        };
        let mut base = BTreeMap::new();
        for (k, v) in entries(path, "base", table("base")?)? {
            base.insert(k.clone(), scalar(path, &format!("base.{k}"), &v)?);
        }
        let mut axes: Vec<(String, Vec<Value>)> = Vec::new();
        for (k, v) in entries(path, "sweep", table("sweep")?)? {
            if base.contains_key(&k) {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflict,
                    err(path, format!("`{k}` is set in both [base] and [sweep]; keep one")),
                )
                .with_key(k.as_str()));
            }
            if k == "output_format" {
                return Err(err(
                    path,
                    "`output_format` cannot be swept (it changes no simulated value); set it in [base]".to_string(),
                )
                .into());
            }
            axes.push((k.clone(), sweep_values(path, &k, &v)?));
        }
        let mut runs = expand(&base, &axes).map_err(|e| err(path, e))?;
        let mut artefacts = crate::experiment::Artefacts::default();
        let mut notes = std::collections::BTreeSet::new();
        for run in &runs {
            to_run_spec_in(&run.params, path, &mut artefacts, registry)
                .map_err(|e| e.map_message(|m| err(path, format!("run {}: {m}", describe(&run.params, &axes)))))?;
            notes.extend(ignored(&run.params));
            notes.extend(shares_nothing(&run.params));
        }
        runs.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(w) = runs.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(err(path, format!("two runs share the id {} (a value listed twice?)", w[0].id)).into());
        }
        Ok(Experiment {
            path: path.to_path_buf(),
            question,
            swept: axes.into_iter().map(|a| a.0).collect(),
            runs,
            artefacts,
            notes: notes.into_iter().collect(),
            output_format: match base.get("output_format") {
                Some(v) => enum_of("output_format", v).map_err(|e| e.map_message(|m| err(path, m)))?,
                None => Default::default(),
            },
            registry: registry.clone(),
        })
    }
}

/// The runs of a grid: `base` with every combination of the `axes`' values
/// (the keys in the order given, which an experiment file's `[sweep]` gives
/// by name; each key's values in their order; the last key varying fastest),
/// in that order ([`Run::index`]), each with its id ([`Run::id`]: a hash of
/// its parameters). The runs are not checked against the run spec's rules:
/// [`Experiment::load`] does that for a file's runs; the Python package's
/// sweeps of Python policies expand their grid here too, so that their run
/// ids, order and shards are a file's.
///
/// # Errors
/// A grid of more than 100,000 runs, or an axis without values.
pub fn expand(base: &BTreeMap<String, Value>, axes: &[(String, Vec<Value>)]) -> Result<Vec<Run>, String> {
    if let Some((k, _)) = axes.iter().find(|(_, v)| v.is_empty()) {
        return Err(format!("`{k}` is swept over no values"));
    }
    let total: usize = axes.iter().map(|a| a.1.len()).product();
    if total > 100_000 {
        return Err(format!("the sweep expands to {total} runs; at most 100,000"));
    }
    let mut runs: Vec<Run> = Vec::with_capacity(total);
    for i in 0..total {
        let mut params = base.clone();
        let mut rest = i;
        for (k, vals) in axes.iter().rev() {
            params.insert(k.clone(), vals[rest % vals.len()].clone());
            rest /= vals.len();
        }
        runs.push(Run { id: run_id(&params), params, index: i });
    }
    Ok(runs)
}

fn describe(params: &BTreeMap<String, Value>, axes: &[(String, Vec<Value>)]) -> String {
    axes.iter().map(|(k, _)| format!("{k}={}", params[k])).collect::<Vec<_>>().join(", ")
}

/// Builds a run's [`RunSpec`] from its parameters; paths are relative to the
/// experiment file's directory.
///
/// # Errors
/// A [`ConfigError`] naming the key at fault ([`super::raw::to_run_spec`]).
pub fn to_run_spec(p: &BTreeMap<String, Value>, experiment: &Path) -> Result<RunSpec, ConfigError> {
    to_run_spec_with(p, experiment, &mut crate::experiment::Artefacts::default())
}

/// [`to_run_spec`] checking the RIFLING table and GENIE models a run names
/// through `artefacts`, which reads each file once and keeps it for the runs.
///
/// # Errors
/// As [`to_run_spec`].
pub fn to_run_spec_with(
    p: &BTreeMap<String, Value>,
    experiment: &Path,
    artefacts: &mut crate::experiment::Artefacts,
) -> Result<RunSpec, ConfigError> {
    to_run_spec_in(p, experiment, artefacts, &super::registry::Registry::default())
}

/// [`to_run_spec_with`] knowing the policy kinds and trace formats of `registry`.
///
/// # Errors
/// As [`to_run_spec`].
pub fn to_run_spec_in(
    p: &BTreeMap<String, Value>,
    experiment: &Path,
    artefacts: &mut crate::experiment::Artefacts,
    registry: &super::registry::Registry,
) -> Result<RunSpec, ConfigError> {
    super::raw::to_run_spec_in(p, super::raw::Origin::File(experiment), Some(artefacts), registry)
}

/// Which share of the runs to do: `index` of `count` (1-based, as `I/N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1..=count.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| format!("`{s}` is not I/N (e.g. 2/8)"))?;
        let (index, count) = (i.trim().parse::<usize>(), n.trim().parse::<usize>());
        match (index, count) {
            (Ok(index), Ok(count)) if count >= 1 && (1..=count).contains(&index) => Ok(Shard { index, count }),
            _ => Err(format!("`{s}`: a shard is I/N with 1 <= I <= N")),
        }
    }
}

impl Shard {
    /// The runs of this shard: every run whose position in run-id order is
    /// `index - 1` modulo `count`.
    pub fn select<'a>(&self, runs: &'a [Run]) -> Vec<&'a Run> {
        runs.iter().enumerate().filter(|(i, _)| i % self.count == self.index - 1).map(|(_, r)| r).collect()
    }

    /// The shard of a Slurm job array task, from the values of its
    /// environment variables ([`SlurmArrayVars`]; the caller reads them).
    ///
    /// The count is `SLURM_ARRAY_TASK_COUNT`, or, when that is not set,
    /// `SLURM_ARRAY_TASK_MAX - SLURM_ARRAY_TASK_MIN + 1`. The index is
    /// `SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1`, or the task id
    /// itself when `SLURM_ARRAY_TASK_MIN` is not set (an array from 1):
    /// `--array=1-3` gives shards 1/3, 2/3, 3/3, and so does `--array=0-2`.
    /// When the count and both bounds are set they must agree: an array
    /// with gaps (`--array=1,3,5`, `--array=0-8:4`) has ids that are no
    /// shard index, and is refused rather than leave runs out.
    ///
    /// # Errors
    /// A message naming the variable and its value: a variable not set
    /// (`SLURM_ARRAY_TASK_ID` outside a job array), not a whole number, a
    /// count of 0, `MIN > MAX`, an array with gaps, or a task id outside
    /// the array.
    pub fn from_slurm_array(vars: &SlurmArrayVars<'_>) -> Result<Shard, String> {
        let num = |name: &str, value: &str| -> Result<usize, String> {
            value.parse::<usize>().map_err(|_| format!("{name}=`{value}` is not a whole number >= 0"))
        };
        let id_s = vars.task_id.ok_or_else(|| {
            format!(
                "{SLURM_ARRAY_TASK_ID} is not set: `--shard slurm` runs as a task of a Slurm job array \
                 (sbatch --array=1-N); elsewhere give --shard I/N"
            )
        })?;
        let id = num(SLURM_ARRAY_TASK_ID, id_s)?;
        let min = vars.task_min.map(|v| num(SLURM_ARRAY_TASK_MIN, v)).transpose()?;
        let max = vars.task_max.map(|v| num(SLURM_ARRAY_TASK_MAX, v)).transpose()?;
        if let (Some(lo), Some(hi)) = (min, max)
            && lo > hi
        {
            return Err(format!(
                "{SLURM_ARRAY_TASK_MIN}={lo} is above {SLURM_ARRAY_TASK_MAX}={hi}: not a job array's bounds"
            ));
        }
        // The number of ids from `lo` to `hi` (saturating: usize::MAX ids is no array).
        let span = |lo: usize, hi: usize| (hi - lo).saturating_add(1);
        let count = match (vars.task_count, min, max) {
            (Some(c), _, _) => {
                let count = num(SLURM_ARRAY_TASK_COUNT, c)?;
                if count == 0 {
                    return Err(format!("{SLURM_ARRAY_TASK_COUNT}=`{c}`: a job array has at least 1 task"));
                }
                if let (Some(lo), Some(hi)) = (min, max)
                    && span(lo, hi) != count
                {
                    return Err(format!(
                        "{SLURM_ARRAY_TASK_COUNT}={count} but the task ids run from \
                         {SLURM_ARRAY_TASK_MIN}={lo} to {SLURM_ARRAY_TASK_MAX}={hi}: \
                         `--shard slurm` needs an array without gaps, such as --array=1-{count}"
                    ));
                }
                count
            }
            (None, Some(lo), Some(hi)) => span(lo, hi),
            (None, None, _) => {
                return Err(format!(
                    "neither {SLURM_ARRAY_TASK_COUNT} nor {SLURM_ARRAY_TASK_MIN} is set, so the number \
                     of shards is unknown ({SLURM_ARRAY_TASK_ID}={id})"
                ));
            }
            (None, Some(_), None) => {
                return Err(format!(
                    "{SLURM_ARRAY_TASK_MAX} is not set (nor {SLURM_ARRAY_TASK_COUNT}), \
                     so the number of shards is unknown"
                ));
            }
        };
        let first = min.unwrap_or(1);
        let index = id.checked_sub(first).and_then(|d| d.checked_add(1)).filter(|i| (1..=count).contains(i));
        let index = index.ok_or_else(|| {
            let from = match min {
                Some(lo) => format!("{SLURM_ARRAY_TASK_MIN}={lo}"),
                None => format!("{SLURM_ARRAY_TASK_MIN} not set, so from 1"),
            };
            format!(
                "{SLURM_ARRAY_TASK_ID}={id} is outside the array's task ids {first} to {} ({from}, {count} tasks)",
                first.saturating_add(count - 1)
            )
        })?;
        Ok(Shard { index, count })
    }
}

/// `SLURM_ARRAY_TASK_ID`: this task's id in its job array.
pub const SLURM_ARRAY_TASK_ID: &str = "SLURM_ARRAY_TASK_ID";
/// `SLURM_ARRAY_TASK_COUNT`: the number of tasks in the job array.
pub const SLURM_ARRAY_TASK_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";
/// `SLURM_ARRAY_TASK_MIN`: the job array's lowest task id.
pub const SLURM_ARRAY_TASK_MIN: &str = "SLURM_ARRAY_TASK_MIN";
/// `SLURM_ARRAY_TASK_MAX`: the job array's highest task id.
pub const SLURM_ARRAY_TASK_MAX: &str = "SLURM_ARRAY_TASK_MAX";

/// The values of a Slurm job array task's environment variables that
/// [`Shard::from_slurm_array`] reads, `None` for a variable not set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlurmArrayVars<'a> {
    /// [`SLURM_ARRAY_TASK_ID`].
    pub task_id: Option<&'a str>,
    /// [`SLURM_ARRAY_TASK_COUNT`].
    pub task_count: Option<&'a str>,
    /// [`SLURM_ARRAY_TASK_MIN`].
    pub task_min: Option<&'a str>,
    /// [`SLURM_ARRAY_TASK_MAX`].
    pub task_max: Option<&'a str>,
}

/// How `summary.csv` flattens the nested maps of `summary.json`: map key,
/// and the prefix its entries' names take as columns (`jobs_skipped_by_reason`
/// `{"zero_gpus": 2}` is the column `jobs_skipped_zero_gpus`). Policy metrics
/// keep their bare names (`throughput_steady_jobs_per_hour`, `ldwp_decisions`).
/// A run cut off with unfinished jobs gives `cut_off_horizon_s` or
/// `cut_off_allow_unfinished`.
/// The QoS classes (`urgent`, `prior`, `normal`) give
/// `qos_guarantee_rate_<class>`, which `summary.json` already has as
/// top-level keys with the same values: such an entry adds no column.
pub const SUMMARY_FLATTENED: [(&str, &str); 5] = [
    ("jobs_skipped_by_reason", "jobs_skipped_"),
    ("cut_off", "cut_off_"),
    ("rate_model_counters", "rate_model_"),
    ("qos_guarantee_by_class", "qos_guarantee_rate_"),
    ("policy_metrics", ""),
];

/// One sweep run for [`summary_table`]: its id, its swept keys' values as
/// `summary.csv` writes them, and its `summary.json`.
pub type SummaryRow<'a> = (&'a str, Vec<String>, &'a serde_json::Value);

/// One row of [`summary_table`]'s cells, `None` where the run lacks the key.
pub type SummaryCells = Vec<Option<serde_json::Value>>;

/// The columns and cells of `summary.csv`: `run_id`, the swept keys, the
/// top-level scalar keys of the runs' `summary.json` (in its order; a key
/// that is also a swept key, such as `policy`, is named `summary.policy`),
/// then the flattened entries of its nested maps ([`SUMMARY_FLATTENED`]),
/// the union over all rows, sorted by name (renamed the same way). A cell is
/// `None` where a run lacks a flattened key (an empty cell in the CSV);
/// rows in the order given.
///
/// # Errors
/// A message when a row's top-level keys differ from the first row's, when a
/// nested map has no flattening rule, or when a flattened name is also a
/// top-level key (other than a QoS class rate of equal value) or the
/// flattened name of another map's entry: the message names both.
pub fn summary_table(swept: &[String], rows: &[SummaryRow<'_>]) -> Result<(Vec<String>, Vec<SummaryCells>), String> {
    use serde_json::Value as J;
    let keys: Vec<String> = match rows.first() {
        Some((_, _, J::Object(m))) => m.keys().filter(|k| !m[*k].is_object()).cloned().collect(),
        _ => Vec::new(),
    };
    let mut flat_rows: Vec<BTreeMap<String, J>> = Vec::with_capacity(rows.len());
    for (id, _, summary) in rows {
        let obj = summary.as_object().ok_or_else(|| format!("run {id}: summary is not an object"))?;
        let scalars = obj.iter().filter(|(_, v)| !v.is_object()).count();
        if scalars != keys.len() || !keys.iter().all(|k| obj.get(k).is_some_and(|v| !v.is_object())) {
            return Err(format!("run {id}: its summary keys differ from the other runs'"));
        }
        let mut flat: BTreeMap<String, J> = BTreeMap::new();
        let mut origin: BTreeMap<String, String> = BTreeMap::new();
        for (map_key, m) in obj.iter().filter_map(|(k, v)| v.as_object().map(|m| (k, m))) {
            let (_, prefix) = SUMMARY_FLATTENED
                .iter()
                .find(|(k, _)| k == map_key)
                .ok_or_else(|| format!("run {id}: summary map `{map_key}` has no summary.csv column rule"))?;
            for (k, v) in m {
                let name = format!("{prefix}{k}");
                let from = format!("{map_key}.{k}");
                if let Some(top) = obj.get(&name) {
                    if *map_key == "qos_guarantee_by_class" && top == v {
                        continue;
                    }
                    return Err(format!(
                        "run {id}: summary.csv column `{name}` would hold both `{from}` and the summary key `{name}`"
                    ));
                }
                if let Some(other) = origin.get(&name) {
                    return Err(format!(
                        "run {id}: summary.csv column `{name}` would hold both `{from}` and `{other}`"
                    ));
                }
                origin.insert(name.clone(), from);
                flat.insert(name, v.clone());
            }
        }
        flat_rows.push(flat);
    }
    let flat_keys: std::collections::BTreeSet<&String> = flat_rows.iter().flat_map(BTreeMap::keys).collect();
    let rename = |k: &String| if swept.contains(k) { format!("summary.{k}") } else { k.clone() };
    let header: Vec<String> = std::iter::once("run_id".to_string())
        .chain(swept.iter().cloned())
        .chain(keys.iter().map(rename))
        .chain(flat_keys.iter().map(|k| rename(k)))
        .collect();
    let cells = rows
        .iter()
        .zip(&flat_rows)
        .map(|((id, swept_cells, summary), flat)| {
            std::iter::once(Some(J::String(id.to_string())))
                .chain(swept_cells.iter().map(|s| Some(J::String(s.clone()))))
                .chain(keys.iter().map(|k| Some(summary[k].clone())))
                .chain(flat_keys.iter().map(|k| flat.get(*k).cloned()))
                .collect()
        })
        .collect();
    Ok((header, cells))
}

/// `summary.csv` text ([`summary_table`]): a string as it is, another value
/// as JSON (`null` for a null), an empty cell where the run lacks the key.
///
/// # Errors
/// Those of [`summary_table`].
pub fn summary_csv(swept: &[String], rows: &[SummaryRow<'_>]) -> Result<String, String> {
    let (header, cells) = summary_table(swept, rows)?;
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    w.write_record(&header).map_err(|e| e.to_string())?;
    for row in cells {
        let rec: Vec<String> = row
            .into_iter()
            .map(|c| match c {
                None => String::new(),
                Some(serde_json::Value::String(s)) => s,
                Some(other) => other.to_string(),
            })
            .collect();
        w.write_record(&rec).map_err(|e| e.to_string())?;
    }
    String::from_utf8(w.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("e.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn columns_as_a_table_is_the_string_form_with_one_run_id() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("t.csv"), "id,arrival,duration,gpu_num\na,0,10,1\n").unwrap();
        let load = |name: &str, text: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, format!("question = \"q\"\n[base]\ntrace = \"t.csv\"\n{text}")).unwrap();
            (Experiment::load(&p), p)
        };
        let (table, tp) = load("a.toml", "columns = { submit_time = \"arrival\", job_id = \"id\" }\n");
        let (string, _) = load("b.toml", "columns = \" submit_time=arrival , job_id=id\"\n");
        let (table, string) = (table.unwrap(), string.unwrap());
        // One mapping, one spelling (pairs sorted by field), one run id.
        assert_eq!(table.runs[0].params["columns"], Value::Str("job_id=id,submit_time=arrival".into()));
        assert_eq!(table.runs, string.runs);
        // The spec's column map is the one the string form gives `--columns`.
        let mut want = crate::trace::ColumnMap::default();
        // (Its `explicit` list keeps the given order, here the sorted one.)
        want.parse_pairs("job_id=id,submit_time=arrival").unwrap();
        match to_run_spec(&table.runs[0].params, &tp).unwrap().workload {
            crate::experiment::WorkloadSource::Trace { columns, .. } => assert_eq!(columns, want),
            other => panic!("not a trace workload: {other:?}"),
        }
        // In [sweep], a list of tables is one run per mapping.
        let (swept, _) = load(
            "c.toml",
            "[sweep]\ncolumns = [{ submit_time = \"arrival\", job_id = \"id\" }, { job_id = \"id\" }]\n",
        );
        let mut got: Vec<String> = swept.unwrap().runs.iter().map(|r| r.params["columns"].to_string()).collect();
        got.sort();
        assert_eq!(got, ["job_id=id", "job_id=id,submit_time=arrival"]);
        // A lone table in [sweep] is one value, not a range.
        let (one, _) = load("d.toml", "[sweep]\ncolumns = { job_id = \"id\", submit_time = \"arrival\" }\n");
        assert_eq!(one.unwrap().runs[0].id, table.runs[0].id);
        // A non-string column is named.
        let (bad, _) = load("e.toml", "columns = { job_id = 3 }\n");
        let e = bad.unwrap_err().message;
        assert!(e.contains("`base.columns.job_id` must be a string"), "{e}");
        // An unknown field is refused as in the string form.
        let (bad, _) = load("f.toml", "columns = { nope = \"id\" }\n");
        let e = bad.unwrap_err().message;
        assert!(e.contains("unknown jobs-csv field `nope`"), "{e}");
    }

    #[test]
    fn a_list_times_a_range_gives_the_product() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "question = \"q\"\n[base]\njobs = 20\n[sweep]\npolicy = [\"fifo\", \"sjf\"]\nseed = { from = 1, to = 5, step = 2 }\n",
        );
        let e = Experiment::load(&p).unwrap();
        assert_eq!(e.swept, vec!["policy", "seed"]);
        // 2 policies × seeds 1, 3, 5.
        assert_eq!(e.runs.len(), 6);
        let mut combos: Vec<(String, String)> =
            e.runs.iter().map(|r| (r.params["policy"].to_string(), r.params["seed"].to_string())).collect();
        combos.sort();
        let want: Vec<(String, String)> = ["fifo", "sjf"]
            .iter()
            .flat_map(|p| ["1", "3", "5"].iter().map(move |s| (p.to_string(), s.to_string())))
            .collect();
        assert_eq!(combos, want);
        // Ids are stable (same file, same ids) and sorted.
        assert_eq!(Experiment::load(&p).unwrap().runs, e.runs);
        assert!(e.runs.windows(2).all(|w| w[0].id < w[1].id));
        // Whole-number floats are accepted where a whole number is meant.
        let p = write(d.path(), "question = \"q\"\n[sweep]\nseed = { from = 2, to = 3, step = 1.0 }\n");
        assert_eq!(Experiment::load(&p).unwrap().runs.len(), 2);
        // A float range: 0.5, 0.6, 0.7 (no drift).
        let p = write(d.path(), "question = \"q\"\n[sweep]\nload = { from = 0.5, to = 0.7, step = 0.1 }\n");
        let mut loads: Vec<String> =
            Experiment::load(&p).unwrap().runs.iter().map(|r| r.params["load"].to_string()).collect();
        loads.sort();
        assert_eq!(loads, vec!["0.5", "0.6", "0.7"]);
    }

    #[test]
    fn invalid_files_name_the_key() {
        let d = tempfile::tempdir().unwrap();
        let bad = |text: &str| Experiment::load(&write(d.path(), text)).unwrap_err().message;
        assert!(bad("[base]\n").contains("question"));
        assert!(bad("question = \"q\"\n[sweep]\npolicies = [\"fifo\"]\n").contains("unknown key `sweep.policies`"));
        assert!(
            bad("question = \"q\"\n[sweep]\npolicy = [\"lifo\"]\n")
                .contains("`policy` = `lifo`: expected one of fifo, sjf")
        );
        assert!(bad("question = \"q\"\n[sweep]\nseed = { from = 5, to = 1, step = 1 }\n").contains("from <= to"));
        assert!(bad("question = \"q\"\n[sweep]\nseed = []\n").contains("empty list"));
        assert!(bad("question = \"q\"\n[base]\nbackfill = \"yes\"\n").contains("`backfill` must be true or false"));
        assert!(bad("question = \"q\"\nextra = 1\n").contains("unknown top-level key `extra`"));
        assert!(bad("question = \"q\"\n[sweep]\nseed = [1, 1]\n").contains("share the id"));
        assert!(bad("question = \"q\"\n[sweep]\nseed = { from = -9223372036854775808, to = 9223372036854775807, step = 1 }\n")
            .contains("more than 10,000"));
        assert!(bad("question = \"q\"\n[sweep]\nload = { from = 0.1, to = 1.0, step = inf }\n").contains("step > 0"));
        assert!(
            bad("question = \"q\"\n[base]\nseed = 1\n[sweep]\nseed = [1, 2]\n").contains("both [base] and [sweep]")
        );
        assert!(bad("question = \"\"\n").contains("question"));
        // Case-sensitive like the command line, so one configuration has one run id.
        assert!(
            bad("question = \"q\"\n[sweep]\ntie_order = [\"NUMPY2-AVX512\"]\n")
                .contains("`tie_order` = `NUMPY2-AVX512`: expected one of trace, numpy2-avx512")
        );
        assert!(bad("question = \"q\"\n[sweep]\nload = [-1.0]\n").contains("`load` must be a positive number"));
    }

    #[test]
    fn shards_partition_the_runs() {
        let runs: Vec<Run> =
            (0..7).map(|i| Run { id: format!("{i:012x}"), params: BTreeMap::new(), index: i }).collect();
        let mut all: Vec<String> = Vec::new();
        for i in 1..=3 {
            all.extend(Shard { index: i, count: 3 }.select(&runs).iter().map(|r| r.id.clone()));
        }
        all.sort();
        assert_eq!(all, runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>());
        assert!("0/3".parse::<Shard>().is_err() && "4/3".parse::<Shard>().is_err() && "x".parse::<Shard>().is_err());
    }

    fn slurm(id: Option<&str>, count: Option<&str>, min: Option<&str>, max: Option<&str>) -> Result<Shard, String> {
        Shard::from_slurm_array(&SlurmArrayVars { task_id: id, task_count: count, task_min: min, task_max: max })
    }

    #[test]
    fn slurm_array_tasks_are_shards() {
        let s = |index, count| Ok(Shard { index, count });
        // --array=1-3 as Slurm sets it (id, count, min, max): tasks 1, 2, 3 are 1/3, 2/3, 3/3.
        for i in 1..=3 {
            assert_eq!(slurm(Some(&i.to_string()), Some("3"), Some("1"), Some("3")), s(i, 3));
        }
        // Only id and count: the ids start at 1.
        assert_eq!(slurm(Some("2"), Some("4"), None, None), s(2, 4));
        // --array=0-2: id 0 is shard 1 (0 - 0 + 1), id 2 is shard 3 of 3.
        assert_eq!(slurm(Some("0"), Some("3"), Some("0"), Some("2")), s(1, 3));
        assert_eq!(slurm(Some("2"), Some("3"), Some("0"), Some("2")), s(3, 3));
        // No count: min and max. --array=5-8: id 6 is 6 - 5 + 1 = 2 of 8 - 5 + 1 = 4.
        assert_eq!(slurm(Some("6"), None, Some("5"), Some("8")), s(2, 4));
        // Count and min, no max: --array=10-11, id 11 is 2 of 2.
        assert_eq!(slurm(Some("11"), Some("2"), Some("10"), None), s(2, 2));
        // A one-task array.
        assert_eq!(slurm(Some("7"), Some("1"), Some("7"), Some("7")), s(1, 1));
    }

    #[test]
    fn slurm_array_errors_name_the_variable_and_value() {
        let e = |id, count, min, max| slurm(id, count, min, max).unwrap_err();
        let msg = e(None, Some("3"), Some("1"), Some("3"));
        assert!(msg.starts_with("SLURM_ARRAY_TASK_ID is not set: `--shard slurm` runs as a task"), "{msg}");
        assert_eq!(e(Some("x1"), Some("3"), None, None), "SLURM_ARRAY_TASK_ID=`x1` is not a whole number >= 0");
        assert_eq!(e(Some("-1"), Some("3"), None, None), "SLURM_ARRAY_TASK_ID=`-1` is not a whole number >= 0");
        assert_eq!(e(Some("1"), Some(""), None, None), "SLURM_ARRAY_TASK_COUNT=`` is not a whole number >= 0");
        assert_eq!(e(Some("1"), None, Some("a"), Some("3")), "SLURM_ARRAY_TASK_MIN=`a` is not a whole number >= 0");
        assert_eq!(e(Some("1"), None, Some("1"), Some("3.0")), "SLURM_ARRAY_TASK_MAX=`3.0` is not a whole number >= 0");
        assert_eq!(e(Some("1"), Some("0"), None, None), "SLURM_ARRAY_TASK_COUNT=`0`: a job array has at least 1 task");
        assert_eq!(
            e(Some("4"), Some("3"), None, None),
            "SLURM_ARRAY_TASK_ID=4 is outside the array's task ids 1 to 3 (SLURM_ARRAY_TASK_MIN not set, so from 1, 3 tasks)"
        );
        assert_eq!(
            e(Some("0"), Some("3"), None, None),
            "SLURM_ARRAY_TASK_ID=0 is outside the array's task ids 1 to 3 (SLURM_ARRAY_TASK_MIN not set, so from 1, 3 tasks)"
        );
        assert_eq!(
            e(Some("4"), None, Some("5"), Some("8")),
            "SLURM_ARRAY_TASK_ID=4 is outside the array's task ids 5 to 8 (SLURM_ARRAY_TASK_MIN=5, 4 tasks)"
        );
        // --array=1,3,5: 3 tasks, ids 1 to 5.
        assert_eq!(
            e(Some("3"), Some("3"), Some("1"), Some("5")),
            "SLURM_ARRAY_TASK_COUNT=3 but the task ids run from SLURM_ARRAY_TASK_MIN=1 to SLURM_ARRAY_TASK_MAX=5: \
             `--shard slurm` needs an array without gaps, such as --array=1-3"
        );
        assert_eq!(
            e(Some("3"), None, Some("4"), Some("2")),
            "SLURM_ARRAY_TASK_MIN=4 is above SLURM_ARRAY_TASK_MAX=2: not a job array's bounds"
        );
        assert!(e(Some("1"), None, None, None).starts_with("neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN"));
        assert!(e(Some("1"), None, None, Some("3")).starts_with("neither SLURM_ARRAY_TASK_COUNT"));
        assert!(e(Some("1"), None, Some("1"), None).starts_with("SLURM_ARRAY_TASK_MAX is not set"));
        // Huge values are errors, not overflows.
        let big = usize::MAX.to_string();
        assert!(e(Some(&big), Some("3"), None, None).contains("is outside"));
        assert!(e(Some("1"), Some("99999999999999999999999"), None, None).contains("not a whole number"));
    }
}

/// What a sweep did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepOutcome {
    /// Runs simulated now.
    pub ran: usize,
    /// Runs found complete and kept (`--resume`).
    pub kept: usize,
    /// Runs that failed: (run id, error).
    pub failed: Vec<(String, String)>,
    /// Directories in `out/runs/` that are not runs of this experiment (from
    /// an earlier sweep into the same place), sorted; left untouched and not
    /// in `summary.csv`.
    pub foreign: Vec<String>,
    /// The sweep's own files that could not be written at the end
    /// (`failed.csv`, `summary.csv`; a full disk): one message each. The
    /// rest of the outcome still holds, and a file not written is removed
    /// rather than left from an earlier sweep.
    pub write_errors: Vec<String>,
    /// Runs found complete but rerun (`--resume`) because their trace file
    /// no longer has the SHA-256 their manifest recorded, sorted.
    pub changed_inputs: Vec<String>,
    /// The notes of the runs simulated now
    /// ([`crate::experiment::notes::option_notes`] and
    /// [`crate::experiment::notes::run_notes`], keys spelt as in the
    /// experiment file), each distinct text once, in the order of the first
    /// run that gave it.
    pub notes: Vec<String>,
}

/// Runs the experiment's runs (this shard's, if any) on `threads` threads,
/// writing `out/runs/<run id>/` per run, `out/summary.csv`, `out/sweep.json`
/// (the expansion and the shard) and, if any run failed, `out/failed.csv`.
/// With `resume`, a run whose directory holds a `manifest.json` (written
/// last) is kept as it is. `on_done(run id, ok)` is called as runs finish.
///
/// # Errors
/// A message if the thread pool or the sweep's start (`out/runs/`,
/// `sweep.json`) cannot be made; a failing run is reported in the outcome,
/// and the others go on, and so is a failure to write `failed.csv` or
/// `summary.csv` ([`SweepOutcome::write_errors`]), so that no run's error is
/// lost with them.
pub fn run_sweep(
    exp: &Experiment,
    out: &Path,
    threads: usize,
    shard: Option<Shard>,
    resume: bool,
    on_done: &(dyn Fn(&str, bool) + Sync),
) -> Result<SweepOutcome, String> {
    use rayon::prelude::*;
    let runs: Vec<&Run> = match shard {
        Some(s) => s.select(&exp.runs),
        None => exp.runs.iter().collect(),
    };
    let io = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(out.join("runs")).map_err(|e| format!("{}: {e}", out.display()))?;
    let text = sweep_json(Some(&exp.path), &exp.question, &exp.swept, shard, &exp.in_file_order(), &runs)?;
    crate::metrics::export::write_atomic(&out.join("sweep.json"), text.as_bytes()).map_err(io)?;
    // More workers than runs (or than 256) only costs thread start-up.
    let workers = threads.clamp(1, runs.len().clamp(1, 256));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(workers).build().map_err(|e| e.to_string())?;
    // Trace digests by path, each file read once however many runs use it.
    let digests: std::sync::Mutex<std::collections::BTreeMap<PathBuf, Option<String>>> = Default::default();
    let digest = |path: &Path| -> Option<String> {
        if let Some(d) = digests.lock().ok()?.get(path) {
            return d.clone();
        }
        let d = crate::trace::file_sha256(path).ok();
        digests.lock().ok()?.insert(path.to_path_buf(), d.clone());
        d
    };
    type Ran = Result<(serde_json::Value, Vec<String>), String>;
    let results: Vec<(bool, bool, Ran)> = pool.install(|| {
        runs.par_iter()
            .map(|run| {
                let dir = out.join("runs").join(&run.id);
                let kept = if resume { kept_run(&dir, &digest) } else { KeptRun::Incomplete };
                let changed = match kept {
                    KeptRun::Complete(s) => {
                        on_done(&run.id, true);
                        return (true, false, Ok((s, Vec::new())));
                    }
                    KeptRun::InputChanged => true,
                    KeptRun::Incomplete => false,
                };
                let res = (|| {
                    // The load read every artefact: these look-ups read no file.
                    let mut artefacts = exp.artefacts.clone();
                    let spec =
                        to_run_spec_in(&run.params, &exp.path, &mut artefacts, &exp.registry).map_err(String::from)?;
                    let report = crate::experiment::run_one_with_artefacts(&spec, &artefacts, |_| {})
                        .map_err(|e| e.to_string())?;
                    crate::experiment::write_run_dir_as(&report, &dir, exp.output_format).map_err(|e| e.to_string())?;
                    let origin = super::raw::Origin::File(&exp.path);
                    let mut notes = crate::experiment::notes::option_notes(&run.params, origin);
                    notes.extend(crate::experiment::notes::run_notes(&report, origin));
                    Ok((serde_json::to_value(&report.summary).map_err(|e| e.to_string())?, notes))
                })();
                on_done(&run.id, res.is_ok());
                (false, changed, res)
            })
            .collect()
    });
    let mut outcome = SweepOutcome::default();
    let mut rows = Vec::new();
    for (run, (kept, changed, res)) in runs.iter().zip(results) {
        if changed {
            outcome.changed_inputs.push(run.id.clone());
        }
        match res {
            Ok((summary, notes)) => {
                for n in notes {
                    if !outcome.notes.contains(&n) {
                        outcome.notes.push(n);
                    }
                }
                if kept {
                    outcome.kept += 1
                } else {
                    outcome.ran += 1
                }
                rows.push(((*run).clone(), summary));
            }
            Err(e) => outcome.failed.push((run.id.clone(), e)),
        }
    }
    if let Ok(entries) = std::fs::read_dir(out.join("runs")) {
        let ours: std::collections::HashSet<&str> = exp.runs.iter().map(|r| r.id.as_str()).collect();
        outcome.foreign = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !ours.contains(n.as_str()))
            .collect();
        outcome.foreign.sort();
    }
    outcome.write_errors = write_sweep_tables(out, &exp.swept, rows, &outcome.failed, exp.output_format)?;
    Ok(outcome)
}

/// The text of a sweep directory's `sweep.json`: the experiment file (None
/// for a sweep given from Python without one), its question and swept keys,
/// the shard, every run's id in the experiment's own order (`all_run_ids`,
/// which `dlsched merge` checks and keeps) and the ids of the runs of this
/// shard (`run_ids`, in id order).
///
/// # Errors
/// A message if the JSON cannot be made (it always can).
pub fn sweep_json(
    experiment: Option<&Path>,
    question: &str,
    swept: &[String],
    shard: Option<Shard>,
    in_file_order: &[&Run],
    runs: &[&Run],
) -> Result<String, String> {
    let meta = serde_json::json!({
        "experiment": experiment,
        "question": question,
        "swept": swept,
        "shard": shard.map(|s| format!("{}/{}", s.index, s.count)),
        // In the experiment's own order, which a merge of shards keeps.
        "all_run_ids": in_file_order.iter().map(|r| &r.id).collect::<Vec<_>>(),
        "run_ids": runs.iter().map(|r| &r.id).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// What `--resume` finds in a run's directory ([`kept_run`]).
#[derive(Clone, Debug, PartialEq)]
pub enum KeptRun {
    /// A complete run ([`crate::experiment::check_run_dir`]) whose trace
    /// still has the digest its manifest recorded: its `summary.json`.
    Complete(serde_json::Value),
    /// A complete run whose trace file changed since (or is gone): rerun it.
    InputChanged,
    /// No complete run there (none, or one interrupted before its manifest,
    /// written last, or an unreadable summary): run it.
    Incomplete,
}

/// What `--resume` keeps of the run directory `dir`; `digest(path)` is a
/// trace file's SHA-256 as hex (None when it cannot be read), which a sweep
/// computes once per file.
pub fn kept_run(dir: &Path, digest: &dyn Fn(&Path) -> Option<String>) -> KeptRun {
    if crate::experiment::check_run_dir(dir).is_err() {
        return KeptRun::Incomplete;
    }
    // Whether the trace the run read still has the digest its manifest
    // recorded (runs without a trace file have nothing to check).
    let unchanged = (|| {
        let Ok(text) = crate::io::read_text(&dir.join("manifest.json")) else { return false };
        let Ok(m) = serde_json::from_str::<serde_json::Value>(&text) else { return false };
        match (m["input"]["path"].as_str(), m["input"]["sha256"].as_str()) {
            (Some(path), Some(sha)) => digest(Path::new(path)).is_some_and(|d| d == sha),
            _ => true,
        }
    })();
    if !unchanged {
        return KeptRun::InputChanged;
    }
    let summary = crate::io::read_text(&dir.join("summary.json"))
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()));
    summary.map_or(KeptRun::Incomplete, KeptRun::Complete)
}

/// Writes a sweep's own tables into `out` once its runs are done:
/// `failed.csv` (the `failed` runs' (id, error); removed when none failed),
/// `summary.csv` of the runs in `rows` (each with its `summary.json`), in the
/// experiment's order ([`Run::index`]) whatever order they come in, and
/// `summary.parquet` beside it when `format` asks for parquet (else an old
/// one is removed). Returns a message per file that could not be written (a
/// file not written is removed rather than left from an earlier sweep).
///
/// # Errors
/// A message if `failed.csv`'s text cannot be made.
pub fn write_sweep_tables(
    out: &Path,
    swept: &[String],
    mut rows: Vec<(Run, serde_json::Value)>,
    failed: &[(String, String)],
    format: crate::experiment::OutputFormat,
) -> Result<Vec<String>, String> {
    // failed.csv first: when the disk is full, the runs' errors matter most.
    let failed_path = out.join("failed.csv");
    let failed_res = if failed.is_empty() {
        match std::fs::remove_file(&failed_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("{}: {e}", failed_path.display())),
            _ => Ok(()),
        }
    } else {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(["run_id", "error"]).map_err(|e| e.to_string())?;
        for (id, e) in failed {
            w.write_record([id, e]).map_err(|e| e.to_string())?;
        }
        write_or_remove(&failed_path, &w.into_inner().map_err(|e| e.to_string())?)
    };
    rows.sort_by_key(|(run, _)| run.index);
    let table: Vec<SummaryRow<'_>> = rows
        .iter()
        .map(|(run, s)| {
            let swept = swept.iter().map(|k| run.params.get(k).map(ToString::to_string).unwrap_or_default());
            (run.id.as_str(), swept.collect(), s)
        })
        .collect();
    // A summary that cannot be tabulated is reported like a file that cannot be written.
    let summary_path = out.join("summary.csv");
    let summary_res = summary_csv(swept, &table)
        .map_err(|e| {
            let _ = std::fs::remove_file(&summary_path);
            format!("{}: {e}", summary_path.display())
        })
        .and_then(|text| write_or_remove(&summary_path, text.as_bytes()).map(|()| text));
    let parquet_res = match &summary_res {
        Ok(text) if format.parquet() => summary_parquet(out, text),
        // None from an earlier sweep left beside this one's summary.csv.
        _ => match std::fs::remove_file(out.join("summary.parquet")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("{}: {e}", out.join("summary.parquet").display()))
            }
            _ => Ok(()),
        },
    };
    Ok([failed_res, summary_res.map(drop), parquet_res].into_iter().filter_map(Result::err).collect())
}

/// Writes `summary.parquet` in `out` from the `summary.csv` text
/// (`crate::metrics::parquet` (feature `parquet`): the same cells, each column typed by the
/// one rule over all rows); when that fails, removes the file.
#[cfg(feature = "parquet")]
fn summary_parquet(out: &Path, csv_text: &str) -> Result<(), String> {
    let path = out.join("summary.parquet");
    let what = out.join("summary.csv").display().to_string();
    crate::metrics::parquet::csv_bytes_to_parquet(csv_text.as_bytes(), &what, &path).map_err(|e| {
        let _ = std::fs::remove_file(&path);
        e.to_string()
    })
}

#[cfg(not(feature = "parquet"))]
fn summary_parquet(_out: &Path, _csv_text: &str) -> Result<(), String> {
    Err(crate::experiment::NO_PARQUET.to_string())
}

/// Writes one of the sweep's own files ([`crate::metrics::export::write_atomic`]);
/// when that fails, removes the file, so that none is left from an earlier
/// sweep to be read as this one's.
fn write_or_remove(path: &Path, bytes: &[u8]) -> Result<(), String> {
    crate::metrics::export::write_atomic(path, bytes).map_err(|e| {
        let _ = std::fs::remove_file(path);
        e.to_string()
    })
}

/// Joins shard outputs into one `summary.csv` in `out`, checking that the
/// shards come from one expansion and that every run appears exactly once.
/// The merged `summary.csv` is tabulated again ([`summary_csv`]) from the
/// runs' `summary.json` and the shards' swept-key cells, so that its columns
/// are those of the unsharded sweep even when shards' flattened columns
/// differ (a policy metric only some shard's runs report).
///
/// # Errors
/// A message naming a missing or duplicated run, a shard of another
/// experiment, or unreadable files.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<usize, String> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    if let Some(d) = dirs.iter().find(|d| canon(d) == canon(out)) {
        return Err(format!("--out {} is one of the shards; merge into a new directory", d.display()));
    }
    let mut failed: Vec<String> = Vec::new();
    let mut meta_first: Option<serde_json::Value> = None;
    let mut all_ids: Option<Vec<String>> = None;
    let mut swept: Option<Vec<String>> = None;
    let mut rows: BTreeMap<String, (Vec<String>, PathBuf)> = BTreeMap::new();
    for d in dirs {
        let meta: serde_json::Value =
            serde_json::from_str(&crate::io::read_text(&d.join("sweep.json")).map_err(|e| e.to_string())?)
                .map_err(|e| format!("{}: {e}", d.join("sweep.json").display()))?;
        let ids: Vec<String> = meta["all_run_ids"]
            .as_array()
            .ok_or_else(|| format!("{}: no all_run_ids", d.join("sweep.json").display()))?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if let Ok(text) = crate::io::read_text(&d.join("failed.csv")) {
            failed.extend(text.lines().skip(1).filter_map(|l| l.split(',').next()).map(str::to_string));
        }
        if meta_first.is_none() {
            meta_first = Some(meta.clone());
        }
        match &all_ids {
            None => all_ids = Some(ids),
            Some(a) if *a != ids => {
                return Err(format!("{} is a shard of another sweep (its run list differs)", d.display()));
            }
            _ => {}
        }
        let file = d.join("summary.csv");
        let bytes = crate::io::read_csv(&file).map_err(|e| e.to_string())?;
        let mut rdr = csv::Reader::from_reader(&bytes[..]);
        let h = rdr.headers().map_err(|e| format!("{}: {e}", file.display()))?.clone();
        let keys: Vec<String> = meta["swept"]
            .as_array()
            .ok_or_else(|| format!("{}: no swept", d.join("sweep.json").display()))?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if h.get(0) != Some("run_id") || keys.iter().enumerate().any(|(i, k)| h.get(i + 1) != Some(k.as_str())) {
            return Err(format!("{}: its columns do not start with run_id and the swept keys", file.display()));
        }
        match &swept {
            None => swept = Some(keys),
            Some(x) if *x != keys => {
                return Err(format!(
                    "{}: its swept keys differ from the other shards'",
                    d.join("sweep.json").display()
                ));
            }
            _ => {}
        }
        for rec in rdr.records() {
            let rec = rec.map_err(|e| format!("{}: {e}", file.display()))?;
            let id = rec.get(0).unwrap_or("").to_string();
            if let Some((_, other)) = rows.get(&id) {
                return Err(format!("run {id} appears in both {} and {}", other.display(), d.display()));
            }
            let cells = rec.iter().skip(1).take(h.len().min(rec.len()).saturating_sub(1)).map(str::to_string);
            rows.insert(id, (cells.collect(), d.clone()));
        }
    }
    let all_ids = all_ids.ok_or("no shard directories given")?;
    let missing: Vec<&String> = all_ids.iter().filter(|id| !rows.contains_key(*id)).collect();
    if !missing.is_empty() {
        let list: Vec<&str> = missing.iter().take(5).map(|s| s.as_str()).collect();
        let n_failed = missing.iter().filter(|id| failed.contains(id)).count();
        let why = if n_failed > 0 {
            format!("; {n_failed} of them failed in their shard (see the shards' failed.csv) and need a rerun")
        } else {
            "; is a shard directory left out?".to_string()
        };
        return Err(format!(
            "{} of {} runs are missing (first: {}){why}",
            missing.len(),
            all_ids.len(),
            list.join(", ")
        ));
    }
    if let Some(extra) = rows.keys().find(|id| !all_ids.contains(id)) {
        return Err(format!("run {extra} is not in the sweep's run list"));
    }
    let swept = swept.unwrap_or_default();
    let mut summaries: Vec<(&str, Vec<String>, serde_json::Value)> = Vec::with_capacity(rows.len());
    // In the experiment's own order (`all_run_ids`).
    for id in &all_ids {
        let Some((cells, shard)) = rows.get(id) else { continue };
        let file = shard.join("runs").join(id).join("summary.json");
        let text = crate::io::read_text(&file).map_err(|e| e.to_string())?;
        let summary = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        summaries.push((id.as_str(), cells.iter().take(swept.len()).cloned().collect(), summary));
    }
    let table: Vec<SummaryRow<'_>> = summaries.iter().map(|(id, c, s)| (*id, c.clone(), s)).collect();
    let bytes = summary_csv(&swept, &table)?.into_bytes();
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    // The merged directory is a sweep directory like any other: its runs,
    // its sweep.json (no shard), and its summary.csv (written last).
    for (id, (_, shard)) in &rows {
        let (from, to) = (shard.join("runs").join(id), out.join("runs").join(id));
        std::fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        for entry in std::fs::read_dir(&from).map_err(|e| format!("{}: {e}", from.display()))? {
            let entry = entry.map_err(|e| e.to_string())?;
            std::fs::copy(entry.path(), to.join(entry.file_name()))
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        }
    }
    let mut meta = meta_first.unwrap_or_default();
    meta["shard"] = serde_json::Value::Null;
    meta["run_ids"] = meta["all_run_ids"].clone();
    let mut text = serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?;
    text.push('\n');
    crate::metrics::export::write_atomic(&out.join("sweep.json"), text.as_bytes()).map_err(|e| e.to_string())?;
    crate::metrics::export::write_atomic(&out.join("summary.csv"), &bytes).map_err(|e| e.to_string())?;
    Ok(rows.len())
}

#[cfg(test)]
mod summary_tests {
    use super::*;
    use serde_json::json;

    fn csv_of(rows: &[serde_json::Value]) -> Result<String, String> {
        let ids: Vec<String> = (0..rows.len()).map(|i| format!("r{i}")).collect();
        let table: Vec<SummaryRow<'_>> =
            rows.iter().zip(&ids).map(|(s, id)| (id.as_str(), vec!["x".to_string()], s)).collect();
        summary_csv(&["policy".to_string()], &table)
    }

    #[test]
    fn nested_maps_become_sorted_columns_with_empty_cells_where_missing() {
        let a = json!({"policy": "p", "jobs_skipped": 2, "jobs_skipped_by_reason": {"zero_gpus": 2},
            "policy_metrics": {"z_m": 1.5}, "rate_model_counters": {}, "qos_guarantee_by_class": {}});
        let b = json!({"policy": "q", "jobs_skipped": 0, "jobs_skipped_by_reason": {},
            "policy_metrics": {"a_m": 3.0}, "rate_model_counters": {"evaluations": 7}, "qos_guarantee_by_class": {}});
        assert_eq!(
            csv_of(&[a, b]).unwrap(),
            "run_id,policy,jobs_skipped,summary.policy,a_m,jobs_skipped_zero_gpus,rate_model_evaluations,z_m\n\
             r0,x,2,p,,2,,1.5\n\
             r1,x,0,q,3.0,,7,\n"
        );
    }

    #[test]
    fn a_class_rate_equal_to_its_top_level_key_adds_no_column_and_collisions_are_errors() {
        let s = |class: f64, pm: serde_json::Value| json!({"qos_guarantee_rate_prior": 0.5, "qos_guarantee_by_class": {"prior": class}, "policy_metrics": pm});
        assert_eq!(csv_of(&[s(0.5, json!({}))]).unwrap(), "run_id,policy,qos_guarantee_rate_prior\nr0,x,0.5\n");
        let e = csv_of(&[s(0.25, json!({}))]).unwrap_err();
        assert!(
            e.contains("qos_guarantee_by_class.prior") && e.contains("summary key `qos_guarantee_rate_prior`"),
            "{e}"
        );
        let e = csv_of(&[s(0.5, json!({"qos_guarantee_rate_prior": 0.5}))]).unwrap_err();
        assert!(e.contains("policy_metrics.qos_guarantee_rate_prior"), "{e}");
        let both = json!({"policy_metrics": {"rate_model_x": 1.0}, "rate_model_counters": {"x": 1}});
        let e = csv_of(&[both]).unwrap_err();
        assert!(e.contains("policy_metrics.rate_model_x") && e.contains("rate_model_counters.x"), "{e}");
        let e = csv_of(&[json!({"other_map": {"k": 1}})]).unwrap_err();
        assert!(e.contains("other_map"), "{e}");
    }
}
