//! The raw run spec and the one function that validates it into a
//! [`RunSpec`]: a flat map of the keys in [`KEYS`] (a sweep file's `[base]`
//! and `[sweep]` tables, or the command line's flags of the same names), so
//! both fill one spec, with one set of defaults and one set of checks, and
//! every error names the option as its source spells it (`--jobs-per-hour`
//! on the command line, `` `jobs_per_hour` `` in a file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::names::ValueNames;
use serde::Serialize;

use super::registry::Registry;
use super::spec::{ClusterChoice, RateModelKind, RunSpec, WorkloadSource};
use crate::cluster::{ClusterPreset, ShareLimits};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::policy::placement::PlacementKind;
use crate::policy::registry::Artefacts;
use crate::policy::registry::{IawpOptions, QueueOptions};
use crate::policy::registry::{PolicyName, PolicySpec};
use crate::trace::{ColumnMap, TraceFormat};
use crate::workload::genie::{EctBasis, GenieWorkloadSpec};
use crate::workload::synthetic::SyntheticSpec;

/// The keys of a raw run spec, with what each takes: a sweep's `[base]` and
/// `[sweep]` tables set them by these names, the command line by the flag of
/// the same name (`jobs_per_hour` is `--jobs-per-hour`). Absent keys take the
/// defaults of [`to_run_spec`] (the command line's). Besides these, a key
/// `policy_opt.NAME` ([`POLICY_OPT`]) sets option NAME of the run's policy
/// kind (`--policy-opt NAME=VALUE` on the command line).
pub const KEYS: [(&str, &str); 66] = [
    ("trace", "a trace file path, relative to the experiment file (absent: the synthetic workload)"),
    ("format", "auto, philly, philly-rfold, philly-pollux, helios, jobs-csv, alibaba-openb or elastic-workload"),
    (
        "columns",
        "jobs-csv: field=column pairs, comma-separated (e.g. \"submit_time=arrival,gpu_num=gpus\"), or a table { submit_time = \"arrival\" }",
    ),
    ("columns_file", "jobs-csv: a TOML file with a [columns] table, relative to the experiment file"),
    (
        "skip_malformed",
        "true or false (default): leave the trace's malformed rows out (each listed in skipped.csv with its line, column and reason; counted as `malformed`) instead of failing at the first",
    ),
    ("strict_input", "true or false (default): a trace column the run does not read is an error instead of a note"),
    (
        "cluster",
        "lab16, philly, alibaba-openb, ldwp-testbed, helios-venus, helios-earth, helios-saturn or helios-uranus",
    ),
    ("nodes", "a whole number of nodes, 1 to 100,000 (with gpus_per_node)"),
    ("gpus_per_node", "a whole number of GPUs per node, 1 to 64 (with nodes)"),
    ("gpu_type", "the GPU type of a nodes x gpus_per_node cluster (k80, p100, v100, t4, a100, ...; default generic)"),
    ("vcs", "a VC file path, relative to the experiment file"),
    ("vc_scale", "a number in (0, 1]: every VC of `vcs` gets that share of its nodes (rounded, at least 1)"),
    ("nodes_file", "an Alibaba PAI 2023 node list path, relative to the experiment file"),
    (
        "policy",
        "a registered policy kind: fifo, sjf, srtf, genie, ... (`dlsched simulate --help` lists them); its options: policy_opt.NAME",
    ),
    (
        "checkpoint",
        "none (default), helios-table (7 s for 1 GPU, 30 s up to 8, 60 s above) or gandiva (100 ms): the overhead charged at each preemption",
    ),
    (
        "elastic_timing",
        "exact (default: exact event times) or pollux-sim (the Pollux simulator's 60-s steps with whole-second epoch crossings): how work-defined jobs progress",
    ),
    (
        "rescale_delay",
        "seconds, 0 to 86,400 (default: the progress model's, 30 s for Pollux's, per application for Sia's): a work-defined job makes no progress for this long after each reallocation",
    ),
    (
        "elastic_model",
        "auto (default: Sia's model on a cluster of Sia's GPU types other than all-T4, else Pollux's), pollux or sia: the application model of a Pollux or Sia workload's work-defined jobs",
    ),
    (
        "workload",
        "synthetic (the default), genie (GENIE's QoS tasks; with a trace: its jobs as moldable tasks) or pollux (work-defined jobs drawn from a Philly job list by the Pollux artifact's rules; needs a trace)",
    ),
    (
        "hours",
        "a positive number, at most 8,760: the GENIE workload's arrival window; pollux workload: whole hours 1 to 24 (default 8)",
    ),
    ("start_hour", "pollux workload: the hour of the day its window starts at, 0 to 23 (default 2)"),
    (
        "ect",
        "predicted (default) or true: what a GENIE task's ECT multiplies (its predicted or true single-GPU latency)",
    ),
    ("theta", "a number >= 0: GENIE's concentration weight in the cost (default 0.4; GENIE-family policies only)"),
    ("genie_best_fit", "true or false: GENIE family places on the fullest nodes with room"),
    ("genie_models", "a file of fitted GENIE models (dlsched genie-profile), relative to the experiment file"),
    ("backfill", "true or false"),
    ("tie_order", "trace (default) or numpy2-avx512: the order of same-instant submissions"),
    (
        "output_format",
        "csv (default), parquet or both: the run directory's tables as CSV, parquet (cargo feature `parquet`) or both",
    ),
    ("placement", "consolidate, first-fit, recorded, share-first-fit, share-best-fit, memeff-pack, fgd or iawp"),
    ("max_tenants", "a whole number of jobs that may share one GPU (sharing placements)"),
    ("mem_headroom", "a fraction in [0, 1) of GPU memory kept free when a GPU is shared"),
    ("rate_model", "trace, table, genie or genie-k80"),
    (
        "predictor",
        "fitted (default), oracle or noisy:P: what the GENIE family's and QSSF's predictions read (their fitted model or estimator; the simulator's truth, 0 % error; the truth x (1 + e), e uniform in [-P, P] %, seeded per task and placement)",
    ),
    (
        "profile_batches",
        "grid (default) or measured: the batch sizes GENIE's offline profiler measures (powers of two and global/d, mostly interpolated by the table; or only the per-GPU batches the public measurements contain)",
    ),
    ("seed", "a whole number"),
    ("jobs", "a whole number of synthetic jobs, 1 to 20,000,000 (pollux workload: jobs drawn, default 160)"),
    (
        "jobs_per_hour",
        "a positive number: synthetic arrival rate (jobs x 3,600 / rate at most 1e11 s) or GENIE task density (rate x hours 1 to 50,000 tasks)",
    ),
    (
        "jobs_per_hour_per_gpu",
        "GENIE workload: a positive task density per GPU, tasks per hour per GPU of the cluster (jobs_per_hour = this x the cluster's GPUs: 1.25 is 20 tasks/hour on 16 GPUs, 40 on 32)",
    ),
    (
        "tasks",
        "GENIE workload: exactly this many tasks (1 to 50,000), arriving uniformly over `hours`, instead of a Poisson count at jobs_per_hour (tasks = 150, hours = 1: a burst)",
    ),
    (
        "task_mix",
        "GENIE workload: paper (default: half inference) or training (every task trains, so every task's speed depends on its spread)",
    ),
    ("load", "a positive number (synthetic offered load)"),
    ("sample_interval", "whole seconds between timeline samples, 0 to 1e11"),
    (
        "horizon",
        "seconds (above 0, at most 1e12): stop the run there; jobs still waiting or running count as unfinished",
    ),
    (
        "allow_unfinished",
        "true or false (default): let the run end with admitted jobs the policy never completed instead of failing",
    ),
    ("profiles", "a profile database directory, relative to the experiment file"),
    (
        "rifling_table",
        "the rifling-frozen policy's table (dlsched rifling-train), relative to the experiment file; online runs of the sweep start empty",
    ),
    ("rifling_k", "RIFLING: K-means groups of training tasks (default 4)"),
    ("rifling_alpha", "RIFLING: learning rate in (0, 1] (default 0.1)"),
    ("rifling_gamma", "RIFLING: discount in [0, 1] (default 0.9)"),
    ("rifling_epsilon", "RIFLING: exploration rate at the start (default 0.3)"),
    ("rifling_epsilon_end", "RIFLING: exploration rate after the decay (default 0.05)"),
    (
        "rifling_epsilon_decay",
        "RIFLING: episodes (or decisions, rifling_epsilon_per) of the linear epsilon decay (default 20)",
    ),
    ("rifling_epsilon_per", "RIFLING: episode (default) or decision: what the epsilon decay counts"),
    ("rifling_tie_break", "RIFLING: random (default) or lowest-index: greedy tie-break"),
    ("rifling_q_init", "RIFLING: initial Q value, a finite number (default 10)"),
    ("rifling_tau", "RIFLING: time constant of the discount and integrated reward, s; 0 = per decision (default 600)"),
    ("rifling_queue_feature", "RIFLING: true (default) or false: queue length in the state"),
    ("rifling_wait", "RIFLING: when-running (default) or never: when WAIT is available"),
    ("rifling_alpha_schedule", "RIFLING: visits (default, 1/n) or constant (alpha): the learning-rate schedule"),
    ("rifling_frozen_greedy", "RIFLING: tried (default) or all: the actions a frozen table's greedy choice ranks"),
    ("rifling_regroup", "RIFLING: arrivals between K-means regroupings (default 50)"),
    ("rifling_window", "RIFLING: training tasks the K-means looks back over (default 200)"),
    ("rifling_reward", "RIFLING: scaling-efficiency (default), throughput-integral or throughput"),
    (
        "coloc_unmeasured",
        "mean (default) or learned: what the co-location rule reads for a pair never measured on the GPU type",
    ),
    (
        "max_job_gpus",
        "synthetic workload: the largest job, a whole number of GPUs (default: half the cluster's GPUs; 0: the largest partition's)",
    ),
    (
        "max_duration",
        "synthetic workload: the longest job, whole seconds; longer drawn durations are cut to it (default 86,400, one day; 0: no cut)",
    ),
];

/// A scalar value of a raw spec.
#[derive(Clone, Debug, PartialEq, PartialOrd, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// A whole number.
    Int(i64),
    /// A whole number beyond `i64` (the command line's 64-bit seeds).
    UInt(u64),
    /// A number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::UInt(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write!(f, "{s}"),
        }
    }
}

/// A raw run spec: key (one of [`KEYS`]) to value.
pub type RawSpec = BTreeMap<String, Value>;

/// Where a raw spec comes from: it decides how errors name a key, where
/// relative paths start, and the two places where a file's keys mean
/// something the command line's flags do not.
#[derive(Clone, Copy, Debug)]
pub enum Origin<'a> {
    /// The command line: keys are flags (`--jobs-per-hour`), paths are as
    /// given, and a RIFLING table is an online agent's starting point too.
    CommandLine,
    /// An experiment file: keys are `` `jobs_per_hour` ``, paths are relative
    /// to the file's directory and must exist, and `rifling_table` is the frozen policy's only (online runs of a
    /// sweep start from an empty table).
    File(&'a Path),
    /// Keyword arguments of a call from another language (the Python
    /// package's `dlsched.simulate(jobs_per_hour=20)`): keys are spelt
    /// `jobs_per_hour=`, and paths are as given (from the working directory),
    /// as on the command line.
    Keywords,
}

impl Origin<'_> {
    /// The key as this origin spells it.
    pub fn key(&self, k: &str) -> String {
        match self {
            Origin::CommandLine => format!("--{}", k.replace('_', "-")),
            Origin::File(_) => format!("`{k}`"),
            Origin::Keywords => format!("{k}="),
        }
    }

    /// A policy option set to a value, as this origin spells it
    /// (`--policy-opt NAME=VALUE`, `` `policy_opt.NAME` = `VALUE` ``).
    pub fn policy_opt(&self, name: &str, v: &Value) -> String {
        match self {
            Origin::CommandLine => format!("--policy-opt {name}={v}"),
            Origin::File(_) => format!("`{POLICY_OPT}{name}` = `{v}`"),
            Origin::Keywords => format!("policy_opt={{\"{name}\": {v}}}"),
        }
    }

    /// A key set to a value, as this origin spells it.
    pub fn setting(&self, k: &str, v: &str) -> String {
        match self {
            Origin::CommandLine => format!("--{} {v}", k.replace('_', "-")),
            Origin::File(_) => format!("`{k}` = `{v}`"),
            Origin::Keywords => format!("{k}={v}"),
        }
    }
}

/// Whether `p` is the synthetic scenario: no `trace` and the synthetic
/// workload (the `workload` key absent or `"synthetic"`).
pub fn is_synthetic_scenario(p: &RawSpec) -> bool {
    !p.contains_key("trace") && p.get("workload").is_none_or(|w| matches!(w, Value::Str(s) if s == "synthetic"))
}

/// Every built-in family's own keys ([`crate::policy::build::FamilyKey`]),
/// each once; gathered from the kinds' default specs on first use (a sweep
/// reads them for every run).
fn all_family_keys() -> &'static [crate::policy::build::FamilyKey] {
    static KEYS: std::sync::OnceLock<Vec<crate::policy::build::FamilyKey>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys: Vec<crate::policy::build::FamilyKey> = Vec::new();
        for n in <PolicyName as ValueNames>::selectable() {
            for fk in n.default_spec().family_keys(false) {
                if !keys.iter().any(|k| k.key == fk.key) {
                    keys.push(*fk);
                }
            }
        }
        keys
    })
}

/// The prefix of the raw-spec keys that set the run's policy options:
/// `policy_opt.NAME` (a sweep file's `policy_opt.NAME = VALUE`, in `[base]`
/// or `[sweep]`, or a `[base.policy_opt]` table; `--policy-opt NAME=VALUE`
/// on the command line) sets option NAME of the policy kind's options struct
/// through serde, so a policy needs no key or flag of its own. A nested
/// option is dotted (`share.max_tenants`). They apply after the policy's
/// own keys (`backfill`, `placement`, `theta`, ...), and paths they give are
/// taken as written (not relative to an experiment file).
pub const POLICY_OPT: &str = "policy_opt.";

/// A command-line value as a TOML scalar: `true`, `3`, `0.5`, `"x"`; any
/// other text (`first-fit`) is that string.
pub fn parse_scalar(text: &str) -> Value {
    match toml::from_str::<toml::Table>(&format!("v = {text}")) {
        Ok(t) if t.len() == 1 => match t.get("v") {
            Some(toml::Value::Integer(i)) => Value::Int(*i),
            Some(toml::Value::Float(x)) => Value::Float(*x),
            Some(toml::Value::Boolean(b)) => Value::Bool(*b),
            Some(toml::Value::String(s)) => Value::Str(s.clone()),
            _ => Value::Str(text.to_string()),
        },
        _ => Value::Str(text.to_string()),
    }
}

/// The options of a policy kind with their defaults, `name = value`
/// (nested options dotted), as error messages list them.
pub fn known_options(kind: PolicyName) -> String {
    known_options_of(&kind.default_spec())
}

/// [`known_options`] of the kind of `spec` (a registered kind too).
pub fn known_options_of(spec: &PolicySpec) -> String {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter().filter(|(k, _)| prefix.is_empty() && *k != "kind" || !prefix.is_empty()) {
                    walk(&if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, x, out);
                }
            }
            serde_json::Value::Null => out.push(format!("{prefix} (default none)")),
            x => out.push(format!("{prefix} (default {x})")),
        }
    }
    let mut out = Vec::new();
    let default = spec.kind_default().unwrap_or_else(|_| spec.clone());
    walk("", &serde_json::to_value(default).unwrap_or_default(), &mut out);
    if out.is_empty() { "none".to_string() } else { out.join(", ") }
}

/// Sets `opts` (option name, value, how the origin named it) on `policy`
/// through serde: each is checked as it is set, so an error names the one
/// at fault, and lists the kind's options.
fn set_policy_options(policy: PolicySpec, opts: &[(String, Value, String, String)]) -> Result<PolicySpec, ConfigError> {
    set_options(policy, opts, true)
}

/// [`set_policy_options`]; with `list_known` false (options set by a
/// family's own keys, which name one option each) an error does not list
/// the kind's options. Each option comes as (option name, value, how the
/// origin named it, the raw-spec key that set it); an error names that key:
/// an option the kind lacks is [`ConfigErrorKind::UnknownName`], a value
/// its options refuse [`ConfigErrorKind::InvalidValue`].
fn set_options(
    policy: PolicySpec,
    opts: &[(String, Value, String, String)],
    list_known: bool,
) -> Result<PolicySpec, ConfigError> {
    if opts.is_empty() {
        return Ok(policy);
    }
    let known = || match list_known {
        true => format!(" (`{}` options: {})", policy.kind(), known_options_of(&policy)),
        false => String::new(),
    };
    let mut json = serde_json::to_value(&policy).map_err(|e| e.to_string())?;
    let mut spec = policy.clone();
    for (opt, v, at, key) in opts {
        let jv = match v {
            Value::Int(i) => serde_json::Value::from(*i),
            Value::UInt(u) => serde_json::Value::from(*u),
            Value::Float(x) if x.is_finite() => serde_json::Value::from(*x),
            Value::Float(_) => return Err(invalid(key, format!("{at}: must be a finite number{}", known()))),
            Value::Bool(b) => serde_json::Value::from(*b),
            Value::Str(s) => serde_json::Value::from(s.clone()),
        };
        let parts: Vec<&str> = opt.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) || opt == "kind" {
            return Err(at_key(
                ConfigErrorKind::UnknownName,
                key,
                format!("{at}: `{opt}` is not an option name{}", known()),
            ));
        }
        let mut obj = json.as_object_mut().ok_or("a policy spec is an object")?;
        for part in &parts[..parts.len() - 1] {
            let entry = obj.entry(part.to_string()).or_insert_with(|| serde_json::json!({}));
            obj = entry.as_object_mut().ok_or_else(|| {
                at_key(
                    ConfigErrorKind::UnknownName,
                    key,
                    format!("{at}: `{part}` is a single option, not a group{}", known()),
                )
            })?;
        }
        let last = parts[parts.len() - 1];
        obj.insert(last.to_string(), jv.clone());
        let mut parsed = policy.reparse(json.clone());
        // An alias (`interval_s` for `interval-s`) sits beside the option's
        // own name, which the serialised spec already holds: serde calls
        // that a duplicate field. Set the option by its own name instead.
        if let Err(e) = &parsed
            && let Some(name) = e.strip_prefix("duplicate field `").and_then(|r| r.split('`').next())
            && name != last
        {
            let name = name.to_string();
            let mut o = json.as_object_mut();
            for part in &parts[..parts.len() - 1] {
                o = o.and_then(|m| m.get_mut(*part)).and_then(|v| v.as_object_mut());
            }
            if let Some(m) = o {
                m.remove(last);
                m.insert(name, jv);
            }
            parsed = policy.reparse(json.clone());
        }
        spec = parsed.map_err(|e| {
            // serde's words for a field or variant the options lack.
            let kind = match e.starts_with("unknown field") || e.starts_with("unknown variant") {
                true => ConfigErrorKind::UnknownName,
                false => ConfigErrorKind::InvalidValue,
            };
            at_key(kind, key, format!("{at}: {e}{}", known()))
        })?;
    }
    Ok(spec)
}

/// Parses a named value ([`ValueNames`]), case-sensitive as on the command line
/// (`FIFO` and `fifo` would otherwise be two runs, two run ids, of one
/// configuration).
pub(crate) fn enum_of<T: ValueNames>(key: &str, v: &Value) -> Result<T, ConfigError> {
    enum_in(&Origin::File(Path::new("")), key, v)
}

/// [`enum_of`] naming `key` as `o` spells it: a value that is not a string
/// is [`ConfigErrorKind::InvalidValue`], a name not among the values
/// [`ConfigErrorKind::UnknownName`].
fn enum_in<T: ValueNames>(o: &Origin<'_>, key: &str, v: &Value) -> Result<T, ConfigError> {
    let Value::Str(s) = v else { return Err(invalid(key, format!("{} must be a string", o.key(key)))) };
    T::from_value_name(s).ok_or_else(|| {
        let allowed = T::value_names();
        let message = format!(
            "{}: expected one of {}{}{}",
            o.setting(key, s),
            allowed.join(", "),
            placement_hint(o, key, s),
            renamed_placement_hint(o, key, s)
        );
        at_key(ConfigErrorKind::UnknownName, key, message)
    })
}

/// For the `placement` value `memory-efficiency` (the packer's former
/// name), where it went, as `o` spells the settings: the packer of
/// fixed-size jobs is `memeff-pack`, and the thesis's memory-efficiency
/// placement of moldable tasks is the policy `memory-efficiency`
/// (`src/policy/memeff_tasks.rs`); empty otherwise.
pub fn renamed_placement_hint(o: &Origin<'_>, key: &str, v: &str) -> String {
    if key == "placement" && v == "memory-efficiency" {
        format!(
            " (`memory-efficiency` was renamed: the packer of fixed-size jobs is {}; the thesis's memory-efficiency \
             placement of moldable tasks is {} with {})",
            o.setting("placement", "memeff-pack"),
            o.setting("policy", "memory-efficiency"),
            o.setting("workload", "genie")
        )
    } else {
        String::new()
    }
}

/// For a `policy` value that is a placement's name (`iawp`), the hint to set
/// it as the placement instead, as `o` spells that (`--placement iawp`,
/// `` `placement` = `iawp` ``); empty otherwise.
pub fn placement_hint(o: &Origin<'_>, key: &str, v: &str) -> String {
    if key == "policy" && PlacementKind::from_value_name(v).is_some() {
        format!(" (`{v}` is a placement, not a policy: {})", o.setting("placement", v))
    } else {
        String::new()
    }
}

/// An error of `kind` about the raw-spec key `key`.
fn at_key(kind: ConfigErrorKind, key: &str, message: String) -> ConfigError {
    ConfigError::new(kind, message).with_key(key)
}

/// [`ConfigErrorKind::InvalidValue`] of `key`.
fn invalid(key: &str, message: String) -> ConfigError {
    at_key(ConfigErrorKind::InvalidValue, key, message)
}

/// [`ConfigErrorKind::Conflict`] naming `key`.
fn conflict(key: &str, message: String) -> ConfigError {
    at_key(ConfigErrorKind::Conflict, key, message)
}

/// A [`crate::error::RunError`] as a configuration error: a
/// [`ConfigError`] as it is, any other as [`ConfigErrorKind::Other`] with its
/// message.
fn config_of(e: crate::error::RunError) -> ConfigError {
    match e {
        crate::error::RunError::Config(c) => c,
        e => ConfigError::other(e.to_string()),
    }
}

/// Default GENIE workload density, tasks per hour (GENIE, TPDS 2020: 5, 10, 20).
pub const DEFAULT_GENIE_JOBS_PER_HOUR: f64 = 10.0;
/// Default GENIE workload arrival window, hours (the paper: 24).
pub const DEFAULT_GENIE_HOURS: f64 = 24.0;

struct Reader<'a> {
    p: &'a RawSpec,
    o: Origin<'a>,
}

impl Reader<'_> {
    fn has(&self, k: &str) -> bool {
        self.p.contains_key(k)
    }
    fn int(&self, k: &str) -> Result<Option<i64>, ConfigError> {
        match self.p.get(k) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i)),
            Some(Value::UInt(u)) => {
                i64::try_from(*u).map(Some).map_err(|_| invalid(k, format!("{} is too large", self.o.key(k))))
            }
            Some(Value::Float(x)) if x.fract() == 0.0 && x.abs() < 9e15 => Ok(Some(*x as i64)),
            Some(v) => Err(invalid(k, format!("{} must be a whole number, not `{v}`", self.o.key(k)))),
        }
    }
    fn uint(&self, k: &str) -> Result<Option<u64>, ConfigError> {
        if let Some(Value::UInt(u)) = self.p.get(k) {
            return Ok(Some(*u));
        }
        self.int(k)?
            .map(|i| u64::try_from(i).map_err(|_| invalid(k, format!("{} must not be negative", self.o.key(k)))))
            .transpose()
    }
    fn num(&self, k: &str) -> Result<Option<f64>, ConfigError> {
        match self.p.get(k) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i as f64)),
            Some(Value::UInt(u)) => Ok(Some(*u as f64)),
            Some(Value::Float(x)) => Ok(Some(*x)),
            Some(_) => Err(invalid(k, format!("{} must be a number", self.o.key(k)))),
        }
    }
    fn flag(&self, k: &str) -> Result<bool, ConfigError> {
        match self.p.get(k) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(invalid(k, format!("{} must be true or false", self.o.key(k)))),
        }
    }
    fn str(&self, k: &str) -> Result<Option<&str>, ConfigError> {
        match self.p.get(k) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s)),
            Some(_) => Err(invalid(k, format!("{} must be a string", self.o.key(k)))),
        }
    }
    fn enumv<T: ValueNames>(&self, k: &str) -> Result<Option<T>, ConfigError> {
        self.p.get(k).map(|v| enum_in(&self.o, k, v)).transpose()
    }
    fn path(&self, k: &str) -> Result<Option<PathBuf>, ConfigError> {
        match (self.p.get(k), self.o) {
            (None, _) => Ok(None),
            (Some(Value::Str(s)), Origin::CommandLine | Origin::Keywords) => Ok(Some(PathBuf::from(s))),
            (Some(Value::Str(s)), Origin::File(file)) => {
                let full = file.parent().unwrap_or(Path::new(".")).join(s);
                if !full.exists() {
                    return Err(invalid(k, format!("`{k}` = `{s}`: {} does not exist", full.display())));
                }
                Ok(Some(full))
            }
            (Some(_), _) => Err(invalid(k, format!("{} must be a path string", self.o.key(k)))),
        }
    }
    fn bounded<T>(&self, k: &str, r: Result<T, String>) -> Result<T, ConfigError> {
        r.map_err(|e| invalid(k, format!("{} {e}", self.o.key(k))))
    }
}

/// The cluster a raw spec names: `vcs`, `nodes_file`, `nodes` ×
/// `gpus_per_node` (with an optional `gpu_type`) or the `cluster` preset
/// (default lab16); one of them, never two.
///
/// # Errors
/// A message naming the keys at fault: [`ConfigErrorKind::Conflict`] for
/// two keys that each build the cluster (or one without its partner).
pub fn cluster_choice(p: &RawSpec, o: Origin<'_>) -> Result<ClusterChoice, ConfigError> {
    let r = Reader { p, o };
    let k = |s: &str| o.key(s);
    if r.has("nodes_file") && ["vcs", "nodes", "gpus_per_node", "cluster"].iter().any(|x| r.has(x)) {
        return Err(conflict(
            "nodes_file",
            format!(
                "{} builds the cluster; it goes with none of {}, {}, {}",
                k("nodes_file"),
                k("vcs"),
                k("nodes"),
                k("cluster")
            ),
        ));
    }
    // One of them builds the cluster, and the other would be ignored without a word.
    if r.has("cluster") && ["vcs", "nodes", "gpus_per_node"].iter().any(|x| r.has(x)) {
        return Err(conflict(
            "cluster",
            format!(
                "{} is a preset; it goes with none of {}, {}, {}",
                k("cluster"),
                k("vcs"),
                k("nodes"),
                k("gpus_per_node")
            ),
        ));
    }
    if r.has("vcs") && ["nodes", "gpus_per_node"].iter().any(|x| r.has(x)) {
        return Err(conflict(
            "vcs",
            format!("{} builds the cluster; it goes with neither {} nor {}", k("vcs"), k("nodes"), k("gpus_per_node")),
        ));
    }
    if r.has("vc_scale") && !r.has("vcs") {
        return Err(conflict("vc_scale", format!("{} scales the VCs of {}; set that too", k("vc_scale"), k("vcs"))));
    }
    if r.has("gpu_type") && !r.has("nodes") {
        return Err(conflict(
            "gpu_type",
            format!(
                "{} is the GPU type of a {} x {} cluster; set those too",
                k("gpu_type"),
                k("nodes"),
                k("gpus_per_node")
            ),
        ));
    }
    Ok(match (r.path("vcs")?, r.uint("nodes")?, r.uint("gpus_per_node")?, p.get("cluster")) {
        (Some(vcs), ..) => match r.num("vc_scale")? {
            None => ClusterChoice::VcFile { path: vcs },
            Some(scale) if scale > 0.0 && scale <= 1.0 => ClusterChoice::ScaledVcFile { path: vcs, scale },
            Some(scale) => return Err(invalid("vc_scale", format!("{} = {scale} is outside (0, 1]", k("vc_scale")))),
        },
        (None, None, None, None) if r.has("nodes_file") => {
            ClusterChoice::NodesFile { path: r.path("nodes_file")?.unwrap_or_default() }
        }
        (None, Some(n), Some(g), _) => ClusterChoice::Uniform {
            nodes: r.bounded("nodes", crate::bounds::nodes(n))?,
            gpus_per_node: r.bounded("gpus_per_node", crate::bounds::gpus_per_node(g))?,
            gpu_type: match r.str("gpu_type")? {
                None => None,
                Some(s) if super::spec::gpu_type_mem_mib(s).is_some() => Some(s.to_string()),
                Some(s) => {
                    return Err(at_key(
                        ConfigErrorKind::UnknownName,
                        "gpu_type",
                        format!(
                            "{} is not a known GPU type ({})",
                            o.setting("gpu_type", s),
                            super::spec::GPU_TYPE_MEMORY.iter().map(|g| g.0).collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            },
        },
        (None, Some(_), None, _) | (None, None, Some(_), _) => {
            let key = if r.has("nodes") { "nodes" } else { "gpus_per_node" };
            return Err(conflict(key, format!("{} and {} go together", k("nodes"), k("gpus_per_node"))));
        }
        (None, None, None, _) => {
            ClusterChoice::Preset { preset: r.enumv::<ClusterPreset>("cluster")?.unwrap_or(ClusterPreset::Lab16) }
        }
    })
}

/// The Pollux-style workload's `jobs` (default 160), `start_hour` (0 to 23,
/// default 2) and `hours` (whole, 1 to 24, default 8): the artifact's
/// `workload.py` defaults ([`crate::workload::pollux`]).
fn pollux_spec(r: &Reader<'_>) -> Result<crate::workload::pollux::PolluxWorkloadSpec, ConfigError> {
    let d = crate::workload::pollux::PolluxWorkloadSpec::default();
    let jobs = match r.uint("jobs")? {
        Some(n) => r.bounded("jobs", crate::bounds::jobs(n))?,
        None => d.jobs,
    };
    let start_hour = match r.uint("start_hour")? {
        Some(h) if h <= 23 => h as u32,
        Some(h) => {
            return Err(invalid(
                "start_hour",
                format!("{} must be an hour of the day, 0 to 23, got {h}", r.o.key("start_hour")),
            ));
        }
        None => d.start_hour,
    };
    let hours = match r.num("hours")? {
        Some(h) if h.fract() == 0.0 && (1.0..=24.0).contains(&h) => h as u32,
        Some(h) => {
            return Err(invalid(
                "hours",
                format!("{} of the pollux workload must be whole hours of the day, 1 to 24, got {h}", r.o.key("hours")),
            ));
        }
        None => d.hours,
    };
    Ok(crate::workload::pollux::PolluxWorkloadSpec { jobs, start_hour, hours })
}

/// The GENIE workload's task density, tasks per hour, when a key sets it:
/// `jobs_per_hour`; `jobs_per_hour_per_gpu` × the cluster's GPUs; or, for
/// `tasks` (a fixed count), `tasks / hours` (the mean density, recorded as
/// `jobs_per_hour`). At most one of the three; `None` when none is set.
/// Without a trace, the density must give 1 to 50,000 tasks over `hours`.
///
/// # Errors
/// A message naming the key at fault: two of the keys, `tasks` or
/// `jobs_per_hour_per_gpu` without the GENIE workload, or a value out of range.
fn genie_density(r: &Reader<'_>, hours: f64, genie_workload: bool) -> Result<Option<f64>, ConfigError> {
    let o = r.o;
    let set: Vec<&str> = ["jobs_per_hour", "jobs_per_hour_per_gpu", "tasks"].into_iter().filter(|k| r.has(k)).collect();
    for k in ["jobs_per_hour_per_gpu", "tasks"] {
        if r.has(k) && !genie_workload {
            return Err(conflict(
                k,
                format!("{} applies to the GENIE workload: set {} too", o.key(k), o.setting("workload", "genie")),
            ));
        }
    }
    if set.len() > 1 {
        return Err(conflict(
            set[1],
            format!("{} and {} both set the task density; give one", o.key(set[0]), o.key(set[1])),
        ));
    }
    let traced = r.has("trace");
    let bound = |k: &str, rate: f64| {
        if traced { Ok(rate) } else { r.bounded(k, crate::bounds::genie_jobs_per_hour(rate, hours)) }
    };
    if let Some(n) = r.uint("tasks")? {
        let max = crate::workload::genie::MAX_TASKS;
        if n == 0 || n as f64 > max {
            return Err(invalid("tasks", format!("{} must be 1 to {max}, got {n}", o.key("tasks"))));
        }
        return Ok(Some(n as f64 / hours));
    }
    if let Some(x) = r.num("jobs_per_hour_per_gpu")? {
        let gpus = cluster_choice(r.p, o)?.spec().map_err(config_of)?.total_gpus();
        return bound("jobs_per_hour_per_gpu", x * gpus as f64).map(Some);
    }
    match r.num("jobs_per_hour")? {
        Some(x) if genie_workload => bound("jobs_per_hour", x).map(Some),
        _ => Ok(None),
    }
}

/// The one translation of a raw spec into a validated [`RunSpec`]. Absent
/// keys take the command line's defaults: the synthetic workload
/// ([`SyntheticSpec::default`]), lab16, strict FIFO with consolidated
/// placement ([`QueueOptions::default`]), each policy's options at their
/// struct's `Default`, seed [`super::spec::DEFAULT_SEED`], samples every
/// [`super::spec::DEFAULT_SAMPLE_INTERVAL_S`] s, trace speed. With `artefacts`,
/// the RIFLING table and GENIE models a spec names are read (once) and
/// checked.
///
/// # Errors
/// A [`ConfigError`]: its message names the key at fault as `origin`
/// spells it, its [`ConfigError::key`] as the raw spec does, and its
/// [`ConfigError::kind`] says what is wrong (a name that does not exist, a
/// value out of range, two settings that conflict, ...).
pub fn to_run_spec(p: &RawSpec, origin: Origin<'_>, artefacts: Option<&mut Artefacts>) -> Result<RunSpec, ConfigError> {
    to_run_spec_in(p, origin, artefacts, &Registry::default())
}

/// [`to_run_spec`] knowing the policy kinds and trace formats of
/// `registry` besides the built-in ones: its kinds are values of `policy`,
/// their options set by `policy_opt.NAME` (and by `backfill` and
/// `placement` when set, as for any kind).
///
/// # Errors
/// As [`to_run_spec`].
pub fn to_run_spec_in(
    p: &RawSpec,
    origin: Origin<'_>,
    artefacts: Option<&mut Artefacts>,
    registry: &Registry,
) -> Result<RunSpec, ConfigError> {
    let r = Reader { p, o: origin };
    let o = origin;
    let file = matches!(o, Origin::File(_));
    // The bounds are crate::bounds's.
    let (genie_workload, pollux_workload) = match r.str("workload")? {
        None | Some("synthetic") => (false, false),
        Some("genie") => (true, false),
        Some("pollux") => (false, true),
        Some(_) => {
            return Err(at_key(
                ConfigErrorKind::UnknownName,
                "workload",
                format!(
                    "{} must be \"synthetic\", \"genie\" or \"pollux\", not {}",
                    o.key("workload"),
                    p.get("workload").map(ToString::to_string).unwrap_or_default()
                ),
            ));
        }
    };
    for k in ["load", "jobs_per_hour", "jobs_per_hour_per_gpu"] {
        if let Some(x) = r.num(k)? {
            r.bounded(k, crate::bounds::positive(x))?;
        }
    }
    if (file || genie_workload)
        && !pollux_workload
        && let Some(h) = r.num("hours")?
    {
        r.bounded("hours", crate::bounds::hours(h))?;
    }
    let hours = r.num("hours")?.unwrap_or(DEFAULT_GENIE_HOURS);
    let genie_jobs_per_hour = genie_density(&r, hours, genie_workload)?;
    let ect = r.enumv::<EctBasis>("ect")?.unwrap_or_default();
    let format = match p.get("format") {
        Some(Value::Str(s)) if let Some(k) = registry.format_kind(s) => TraceFormat::Registered(k),
        _ => match r.enumv::<TraceFormat>("format") {
            Ok(f) => f.unwrap_or(TraceFormat::Auto),
            // The list of formats names the registered ones too.
            Err(e) if !registry.formats().is_empty() => {
                let builtin: Vec<&str> = TraceFormat::value_names();
                let outside: Vec<&str> = registry.formats().iter().map(|k| k.name()).collect();
                let builtin = builtin.join(", ");
                return Err(e.map_message(|m| m.replacen(&builtin, &format!("{builtin}, {}", outside.join(", ")), 1)));
            }
            Err(e) => return Err(e),
        },
    };
    let trace = r.path("trace")?;
    if trace.is_none() && (r.has("columns") || r.has("columns_file")) {
        let key = if r.has("columns") { "columns" } else { "columns_file" };
        return Err(conflict(
            key,
            format!(
                "{} and {} apply to a {} in jobs-csv format",
                o.key("columns"),
                o.key("columns_file"),
                o.key("trace")
            ),
        ));
    }
    // Set without a trace, either would change nothing (and a sweep's run ids).
    for k in ["skip_malformed", "strict_input"] {
        if trace.is_none() && r.flag(k)? {
            return Err(conflict(k, format!("{} applies to a {}", o.key(k), o.key("trace"))));
        }
    }
    if r.has("start_hour") && !pollux_workload {
        return Err(conflict(
            "start_hour",
            format!(
                "{} applies to the pollux workload: set {} too",
                o.key("start_hour"),
                o.setting("workload", "pollux")
            ),
        ));
    }
    if pollux_workload && trace.is_none() {
        return Err(conflict(
            "workload",
            format!(
                "{} draws its jobs from a Philly job list (the Pollux artifact's traces/philly.csv): give {}",
                o.setting("workload", "pollux"),
                o.key("trace")
            ),
        ));
    }
    let mut workload = match trace {
        Some(trace) if pollux_workload => WorkloadSource::Pollux { path: trace, spec: pollux_spec(&r)? },
        Some(trace) if genie_workload => WorkloadSource::TraceTasks {
            path: trace,
            format,
            spec: GenieWorkloadSpec {
                ect,
                jobs_per_hour: genie_jobs_per_hour.unwrap_or(DEFAULT_GENIE_JOBS_PER_HOUR),
                hours,
                tasks: r.uint("tasks")?,
                mix: r.enumv("task_mix")?.unwrap_or_default(),
            },
        },
        Some(trace) => {
            let mut columns = ColumnMap::default();
            if let Some(f) = r.path("columns_file")? {
                columns.load_toml(&f)?;
            }
            if let Some(c) = r.str("columns")? {
                columns.parse_pairs(c).map_err(|e| invalid("columns", format!("{}: {e}", o.key("columns"))))?;
            }
            WorkloadSource::Trace { path: trace, format, columns }
        }
        None if genie_workload => WorkloadSource::Genie(GenieWorkloadSpec {
            jobs_per_hour: match genie_jobs_per_hour {
                Some(x) => x,
                None => {
                    r.bounded("jobs_per_hour", crate::bounds::genie_jobs_per_hour(DEFAULT_GENIE_JOBS_PER_HOUR, hours))?
                }
            },
            ect,
            hours,
            tasks: r.uint("tasks")?,
            mix: r.enumv("task_mix")?.unwrap_or_default(),
        }),
        None => {
            let d = SyntheticSpec::default();
            let jobs = r.bounded("jobs", crate::bounds::jobs(r.uint("jobs")?.unwrap_or(d.jobs.into())))?;
            let jobs_per_hour = match r.num("jobs_per_hour")? {
                Some(x) => Some(r.bounded("jobs_per_hour", crate::bounds::synthetic_jobs_per_hour(x, jobs))?),
                None => d.jobs_per_hour,
            };
            // 0 is the largest partition's GPUs; absent, the default cap is
            // set below, once the cluster is known.
            let max_job_gpus = match r.uint("max_job_gpus")? {
                Some(0) | None => None,
                Some(m) => Some(
                    u32::try_from(m)
                        .map_err(|_| invalid("max_job_gpus", format!("{} is too large", o.key("max_job_gpus"))))?,
                ),
            };
            WorkloadSource::Synthetic(SyntheticSpec {
                jobs,
                jobs_per_hour,
                load: r.num("load")?.unwrap_or(d.load),
                max_job_gpus,
                max_duration_s: match r.uint("max_duration")? {
                    Some(0) => None,
                    None => d.max_duration_s,
                    other => other,
                },
            })
        }
    };
    let cluster = cluster_choice(p, o)?;
    if let WorkloadSource::Synthetic(s) = &mut workload
        && !r.has("max_job_gpus")
    {
        s.max_job_gpus = cluster.default_job_cap();
    }
    let tasks = matches!(workload, WorkloadSource::Genie(_) | WorkloadSource::TraceTasks { .. });
    // A kind registered from outside, or a built-in one.
    let outside = match p.get("policy") {
        Some(Value::Str(s)) => registry.policy_kind(s).cloned(),
        _ => None,
    };
    let name: PolicyName = match (&outside, r.enumv("policy")) {
        (Some(_), _) => PolicyName::Fifo,
        (None, Ok(n)) => n.unwrap_or(PolicyName::Fifo),
        (None, Err(e)) if !registry.policies().is_empty() => {
            // The list of kinds names the registered ones too.
            let builtin: Vec<&str> = PolicyName::value_names();
            let builtin = builtin.join(", ");
            let outside: Vec<&str> = registry.policies().iter().map(|k| k.name()).collect();
            return Err(e.map_message(|m| m.replacen(&builtin, &format!("{builtin}, {}", outside.join(", ")), 1)));
        }
        (None, Err(e)) => return Err(e),
    };
    let kind_name = outside.as_ref().map_or(name.kind(), |k| k.name());
    // Every builder's backfill default: on for a built-in queue policy (a
    // kind whose options have `backfill`) on the synthetic workload, off for
    // a trace replay and GENIE tasks; `backfill` (or `policy_opt.backfill`)
    // given wins. A kind registered from outside keeps its own default.
    let backfill = if r.has("backfill") || r.has(&format!("{POLICY_OPT}backfill")) {
        r.flag("backfill")?
    } else {
        outside.is_none()
            && matches!(workload, WorkloadSource::Synthetic(_))
            && name.default_spec().backfill().is_some()
    };
    // Every family's own keys (`theta`, `rifling_alpha`, ...): a number
    // with a range is checked whatever the policy, and a key that only its
    // family's policies read is refused for another, from every origin (the
    // command line sets `theta` only when given or for a GENIE policy).
    let own_keys = if outside.is_some() { &[][..] } else { name.default_spec().family_keys(file) };
    for fk in all_family_keys().iter().filter(|fk| r.has(fk.key)) {
        if let Some(check) = fk.check {
            r.bounded(fk.key, check(r.num(fk.key)?.unwrap_or(0.0)))?;
        }
        if let Some(family) = fk.only_for.filter(|_| !own_keys.iter().any(|k| k.key == fk.key)) {
            // An ignored key would change nothing but a sweep's run ids, and
            // a user who set it believes it took effect.
            return Err(conflict(
                fk.key,
                format!(
                    "{} applies only to the {family} policies, not {}",
                    o.key(fk.key),
                    o.setting("policy", kind_name)
                ),
            ));
        }
    }
    // The texts each origin has always given.
    let moldable_only = |rifling: bool| match (file, rifling) {
        (true, false) => {
            format!("`policy` = `{kind_name}` schedules moldable tasks: it needs `workload = \"genie\"`")
        }
        (true, true) => format!("`policy` = `{kind_name}` schedules moldable tasks: set workload = \"genie\""),
        (false, false) => format!(
            "--policy {kind_name} schedules moldable tasks: use it with --workload genie (trace jobs have a fixed GPU count; use fifo or sjf)"
        ),
        (false, true) => "the RIFLING policies schedule moldable tasks: use them with --workload genie".to_string(),
    };
    let share = {
        let d = ShareLimits::default();
        let s = ShareLimits {
            max_tenants: match r.uint("max_tenants")? {
                Some(n) => u32::try_from(n)
                    .map_err(|_| invalid("max_tenants", format!("{} is too large", o.key("max_tenants"))))?,
                None => d.max_tenants,
            },
            mem_headroom: match p.get("mem_headroom") {
                None => d.mem_headroom,
                Some(Value::Float(x)) => *x,
                Some(Value::Int(x)) => *x as f64,
                Some(_) => {
                    return Err(invalid(
                        "mem_headroom",
                        format!("{} must be a number in [0, 1)", o.key("mem_headroom")),
                    ));
                }
            },
        };
        // Checked here, where the origin is known, so the message names the
        // key as the command line or the sweep file spells it.
        if s.max_tenants == 0 {
            return Err(invalid(
                "max_tenants",
                format!("the tenant cap ({}) must be at least 1", o.key("max_tenants")),
            ));
        }
        if !(0.0..1.0).contains(&s.mem_headroom) {
            return Err(invalid(
                "mem_headroom",
                format!("the memory headroom ({}) must be in [0, 1), got {}", o.key("mem_headroom"), s.mem_headroom),
            ));
        }
        s.validate()?;
        s
    };
    let placement = r.enumv::<PlacementKind>("placement")?.unwrap_or(QueueOptions::default().placement);
    // Every other kind (a registered one too), with its options' defaults;
    // the generic keys set its options of the same names, when set off
    // their defaults (an option it lacks is an error, not ignored).
    let generic_options = |default: PolicySpec| {
        let mut generic = Vec::new();
        if backfill {
            let at = if file { o.setting("backfill", "true") } else { o.key("backfill") };
            generic.push(("backfill".to_string(), Value::Bool(true), at, "backfill".to_string()));
        }
        if placement != QueueOptions::default().placement {
            let v = placement.name().to_string();
            generic.push((
                "placement".to_string(),
                Value::Str(v.clone()),
                o.setting("placement", &v),
                "placement".to_string(),
            ));
        }
        set_policy_options(default, &generic)
    };
    let policy = match name {
        _ if let Some(k) = &outside => generic_options(k.default_spec()?)?,
        PolicyName::Fifo if placement == PlacementKind::Iawp => {
            PolicySpec::Iawp(IawpOptions { backfill, share, ..IawpOptions::default() })
        }
        PolicyName::Fifo => PolicySpec::Fifo(QueueOptions { backfill, placement, share }),
        PolicyName::Sjf => PolicySpec::Sjf(QueueOptions { backfill, placement, share }),
        // The GENIE and RIFLING families set their options by their own
        // keys (below).
        n if n.genie().is_some() || n.rifling().is_some() => {
            if !tasks {
                return Err(conflict("policy", moldable_only(n.rifling().is_some())));
            }
            n.default_spec()
        }
        n => generic_options(n.default_spec())?,
    };
    // The family's own keys, as the options they set (a path relative to
    // an experiment file's directory), then the `policy_opt` options.
    let mut own = Vec::new();
    for fk in own_keys.iter().filter(|fk| r.has(fk.key)) {
        let v = match fk.path.then(|| r.path(fk.key)).transpose()?.flatten() {
            Some(path) => Value::Str(path.to_string_lossy().into_owned()),
            None => p.get(fk.key).cloned().unwrap_or(Value::Bool(false)),
        };
        own.push((fk.option.to_string(), v, o.key(fk.key), fk.key.to_string()));
    }
    let policy = set_options(policy, &own, false)?;
    let opts: Vec<(String, Value, String, String)> = p
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(POLICY_OPT).map(|n| (n.to_string(), v.clone(), o.policy_opt(n, v), k.clone()))
        })
        .collect();
    let policy = set_policy_options(policy, &opts)?;
    if let Some(a) = artefacts {
        // Files the options name, read once for a sweep; the error names the
        // setting that gave the file.
        policy.load_artefacts(a).map_err(|(option, e)| {
            let (at, key) =
                match (opts.iter().find(|(n, ..)| n == option), own_keys.iter().find(|k| k.option == option)) {
                    (Some((n, v, _, key)), _) => (o.policy_opt(n, v), key.clone()),
                    (None, Some(fk)) => (o.key(fk.key), fk.key.to_string()),
                    (None, None) => (o.policy_opt(option, &Value::Str(String::new())), format!("{POLICY_OPT}{option}")),
                };
            at_key(ConfigErrorKind::Artefact, &key, format!("{at}: {e}"))
        })?;
    }
    let spec = RunSpec {
        workload,
        cluster,
        policy,
        tie_order: r.enumv("tie_order")?.unwrap_or_default(),
        seed: r.uint("seed")?.unwrap_or(super::spec::DEFAULT_SEED),
        sample_interval_ms: r.bounded(
            "sample_interval",
            crate::bounds::sample_interval_ms(
                r.uint("sample_interval")?.unwrap_or(super::spec::DEFAULT_SAMPLE_INTERVAL_S),
            ),
        )?,
        rate_model: r.enumv("rate_model")?.unwrap_or(RateModelKind::Trace),
        profiles: r.path("profiles")?,
        checkpoint: r.enumv("checkpoint")?.unwrap_or_default(),
        elastic_timing: r.enumv("elastic_timing")?.unwrap_or_default(),
        elastic_model: r.enumv("elastic_model")?.unwrap_or_default(),
        rescale_delay_ms: r
            .num("rescale_delay")?
            .map(|s| r.bounded("rescale_delay", crate::bounds::rescale_delay_ms(s)))
            .transpose()?,
        coloc_unmeasured: r.enumv("coloc_unmeasured")?.unwrap_or_default(),
        horizon_ms: r.num("horizon")?.map(|h| r.bounded("horizon", crate::bounds::horizon_ms(h))).transpose()?,
        allow_unfinished: r.flag("allow_unfinished")?,
        predictor: r.str("predictor")?.map(|s| r.bounded("predictor", s.parse())).transpose()?.unwrap_or_default(),
        profile_batches: r.enumv("profile_batches")?.unwrap_or_default(),
        skip_malformed: r.flag("skip_malformed")?,
        strict_input: r.flag("strict_input")?,
    };
    // The policy's own checks of its options: a value out of range, or an
    // option its kind cannot take.
    spec.policy.validate().map_err(|e| ConfigError::new(ConfigErrorKind::InvalidValue, e))?;
    if let Some(e) = spec.predictor_refusal() {
        return Err(conflict("predictor", format!("{}: {e}", o.setting("predictor", &spec.predictor.to_string()))));
    }
    // Not part of the spec (it changes no simulated value): checked here so
    // that a sweep fails at load, before anything runs.
    if let Some(f) = r.enumv::<super::output::OutputFormat>("output_format")? {
        f.check_supported()
            .map_err(|e| ConfigError::other(format!("{}: {e}", o.key("output_format"))).with_key("output_format"))?;
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pairs: &[(&str, Value)]) -> RawSpec {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn errors_name_the_option_as_its_origin_spells_it() {
        let p = raw(&[("load", Value::Float(-1.0))]);
        let cli = to_run_spec(&p, Origin::CommandLine, None).unwrap_err().message;
        assert!(cli.starts_with("--load must be a positive number"), "{cli}");
        let file = to_run_spec(&p, Origin::File(Path::new("e.toml")), None).unwrap_err().message;
        assert!(file.starts_with("`load` must be a positive number"), "{file}");
        let p = raw(&[("sample_interval", Value::Int(-5))]);
        assert_eq!(
            to_run_spec(&p, Origin::CommandLine, None).unwrap_err().message,
            "--sample-interval must not be negative"
        );
    }

    #[test]
    fn absent_keys_take_the_one_set_of_defaults() {
        let s = to_run_spec(&RawSpec::new(), Origin::CommandLine, None).unwrap();
        let d = RunSpec::new(
            WorkloadSource::Synthetic(SyntheticSpec::default()),
            ClusterChoice::Preset { preset: ClusterPreset::Lab16 },
        );
        assert_eq!(s, d);
        // FIFO with the IAWP placement is the `iawp` kind; SJF with it is refused.
        let p = raw(&[("placement", Value::Str("iawp".into())), ("backfill", Value::Bool(true))]);
        let s = to_run_spec(&p, Origin::CommandLine, None).unwrap();
        assert_eq!(
            s.policy,
            PolicySpec::Iawp(IawpOptions { backfill: true, share: ShareLimits::default(), ..IawpOptions::default() })
        );
        let mut p = p;
        p.insert("policy".into(), Value::Str("sjf".into()));
        let e = to_run_spec(&p, Origin::CommandLine, None).unwrap_err().message;
        assert!(e.contains("iawp") && e.contains("--policy sjf"), "{e}");
        // A 64-bit seed from the command line survives.
        let p = raw(&[("seed", Value::UInt(u64::MAX))]);
        assert_eq!(to_run_spec(&p, Origin::CommandLine, None).unwrap().seed, u64::MAX);
    }

    #[test]
    fn one_set_of_defaults_by_hand() {
        let synthetic = |s: &RunSpec| match &s.workload {
            WorkloadSource::Synthetic(w) => (w.max_job_gpus, w.max_duration_s),
            other => panic!("{other:?}"),
        };
        // Every origin, nothing given: fifo with backfill, a one-day cut,
        // jobs of at most half of lab16's 16 GPUs; and RunSpec::new's.
        let lib = RunSpec::new(
            WorkloadSource::Synthetic(SyntheticSpec::default()),
            ClusterChoice::Preset { preset: crate::cluster::ClusterPreset::Lab16 },
        );
        for o in [Origin::Keywords, Origin::CommandLine, Origin::File(std::path::Path::new("."))] {
            let s = to_run_spec(&RawSpec::new(), o, None).unwrap();
            assert_eq!(synthetic(&s), (Some(8), Some(86_400)));
            assert_eq!(s.policy.backfill(), Some(true));
            assert_eq!(s, lib);
        }
        // 0 is no cut and the largest partition; backfill = false is strict.
        let p =
            raw(&[("max_duration", Value::Int(0)), ("max_job_gpus", Value::Int(0)), ("backfill", Value::Bool(false))]);
        let s = to_run_spec(&p, Origin::Keywords, None).unwrap();
        assert_eq!((synthetic(&s), s.policy.backfill()), ((None, None), Some(false)));
        // Every queue policy backfills (qssf, a node-dispatch kind, IAWP),
        // one without the switch has none (las); policy_opt.backfill wins.
        for (k, want) in [("qssf", Some(true)), ("min-ect", Some(true)), ("las", None)] {
            let s = to_run_spec(&raw(&[("policy", Value::Str(k.into()))]), Origin::Keywords, None).unwrap();
            assert_eq!(s.policy.backfill(), want, "{k}");
        }
        let p = raw(&[("placement", Value::Str("iawp".into()))]);
        assert_eq!(to_run_spec(&p, Origin::Keywords, None).unwrap().policy.backfill(), Some(true));
        let p = raw(&[("policy", Value::Str("qssf".into())), ("policy_opt.backfill", Value::Bool(false))]);
        assert_eq!(to_run_spec(&p, Origin::Keywords, None).unwrap().policy.backfill(), Some(false));
        // A trace replay is strict.
        let p = raw(&[("trace", Value::Str("traces/example_jobs.csv".into())), ("policy", Value::Str("sjf".into()))]);
        assert_eq!(to_run_spec(&p, Origin::Keywords, None).unwrap().policy.backfill(), Some(false));
        // Keyword errors spell the key as a Python keyword.
        let e = to_run_spec(&raw(&[("load", Value::Float(-1.0))]), Origin::Keywords, None).unwrap_err().message;
        assert!(e.starts_with("load= "), "{e}");
    }

    #[test]
    fn policy_options_set_any_kind_through_serde() {
        // TOML scalars; bare text is a string.
        assert_eq!(parse_scalar("true"), Value::Bool(true));
        assert_eq!(parse_scalar("3"), Value::Int(3));
        assert_eq!(parse_scalar("0.5"), Value::Float(0.5));
        assert_eq!(parse_scalar("first-fit"), Value::Str("first-fit".into()));
        assert_eq!(parse_scalar("\"a b\""), Value::Str("a b".into()));
        // `policy_opt.backfill` on fifo is `backfill`; a nested option is dotted.
        let flag = to_run_spec(&raw(&[("backfill", Value::Bool(true))]), Origin::CommandLine, None).unwrap();
        let opt = raw(&[("policy_opt.backfill", Value::Bool(true)), ("policy_opt.share.max_tenants", Value::Int(3))]);
        let opt = to_run_spec(&opt, Origin::CommandLine, None).unwrap();
        let want = QueueOptions {
            backfill: true,
            share: ShareLimits { max_tenants: 3, ..ShareLimits::default() },
            ..Default::default()
        };
        assert_eq!(opt.policy, PolicySpec::Fifo(want));
        assert_eq!(flag.policy, PolicySpec::Fifo(QueueOptions { backfill: true, ..Default::default() }));
        // A bad nested name names the option.
        let e =
            to_run_spec(&raw(&[("policy_opt.share.tenants", Value::Int(3))]), Origin::File(Path::new("e.toml")), None)
                .unwrap_err()
                .message;
        assert!(e.starts_with("`policy_opt.share.tenants` = `3`: unknown field `tenants`"), "{e}");
        // The checkpoint key; a spec without it (an older manifest) reads as none,
        // and none is left out of the serialised spec.
        let s =
            to_run_spec(&raw(&[("checkpoint", Value::Str("helios-table".into()))]), Origin::CommandLine, None).unwrap();
        assert_eq!(s.checkpoint, crate::engine::CheckpointModel::HeliosTable);
        let d = to_run_spec(&RawSpec::new(), Origin::CommandLine, None).unwrap();
        let json = serde_json::to_value(&d).unwrap();
        assert!(json.get("checkpoint").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<RunSpec>(json).unwrap().checkpoint, crate::engine::CheckpointModel::None);
    }

    #[test]
    fn elastic_timing_and_rescale_delay_keys() {
        use crate::engine::ElasticTiming;
        let s = to_run_spec(
            &raw(&[("elastic_timing", Value::Str("pollux-sim".into())), ("rescale_delay", Value::Float(45.5))]),
            Origin::CommandLine,
            None,
        )
        .unwrap();
        // 45.5 s = 45,500 ms.
        assert_eq!((s.elastic_timing, s.rescale_delay_ms), (ElasticTiming::PolluxSim, Some(45_500)));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            (json["elastic_timing"].as_str(), json["rescale_delay_ms"].as_u64()),
            (Some("pollux-sim"), Some(45_500))
        );
        // Defaults stay out of manifests (so existing manifests are unchanged).
        let d = serde_json::to_value(to_run_spec(&RawSpec::new(), Origin::CommandLine, None).unwrap()).unwrap();
        assert!(d.get("elastic_timing").is_none() && d.get("rescale_delay_ms").is_none(), "{d}");
        for bad in [-1.0, f64::NAN, 86_401.0] {
            let e = to_run_spec(&raw(&[("rescale_delay", Value::Float(bad))]), Origin::CommandLine, None).unwrap_err();
            assert!(e.message.starts_with("--rescale-delay must be a number of seconds"), "{}", e.message);
        }
    }
}
