//! Error types at the library's boundaries; each message says what to fix.

use std::path::PathBuf;

use crate::ids::{GpuId, JobId};

/// An error reading a trace, a VC file or a column map.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("{}: cannot read: {err}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The underlying error.
        err: std::io::Error,
    },
    /// One field of one row is malformed.
    #[error("{}:{line}: column `{column}`: {message}", file.display())]
    Field {
        /// The file.
        file: PathBuf,
        /// 1-based line number in the file.
        line: u64,
        /// The column's name in the file's header.
        column: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A row is malformed as a whole (wrong number of fields, bad CSV).
    #[error("{}:{line}: {message}", file.display())]
    Row {
        /// The file.
        file: PathBuf,
        /// 1-based line number in the file.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// The file as a whole is not of the expected format (header, emptiness).
    #[error("{}: {message}", file.display())]
    Format {
        /// The file.
        file: PathBuf,
        /// What is wrong and what was expected.
        message: String,
    },
}

/// What a trace reader does with a malformed data row (a field that does not
/// parse, a row with the wrong number of fields, a repeated job id): stop at
/// the first with its precise error (`Fail`, the default), or leave the row
/// out and record it ([`MalformedRow`]) so that the rest of the trace runs
/// (`Skip`: `--skip-malformed`, key `skip_malformed`), as pandas-based
/// loaders drop bad lines. Errors of the file as a whole (no header, a
/// missing column, a format that does not match) stop the read either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowErrors {
    /// The first malformed row is an error naming its file, line and column.
    #[default]
    Fail,
    /// Malformed rows are left out and listed.
    Skip,
}

/// A data row left out of a trace under [`RowErrors::Skip`]: the error it
/// would have stopped the read with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalformedRow {
    /// 1-based line in the file.
    pub line: u64,
    /// The column at fault as the header names it; `None` for an error of
    /// the row as a whole (its number of fields, bad CSV).
    pub column: Option<String>,
    /// What is wrong (the message of the error the row would have given).
    pub message: String,
}

impl MalformedRow {
    /// The row an error of one row names (a [`TraceError::Field`] or
    /// [`TraceError::Row`]); `None` for an error of the whole file.
    pub fn of(e: &TraceError) -> Option<MalformedRow> {
        match e {
            TraceError::Field { line, column, message, .. } => {
                Some(MalformedRow { line: *line, column: Some(column.clone()), message: message.clone() })
            }
            TraceError::Row { line, message, .. } => {
                Some(MalformedRow { line: *line, column: None, message: message.clone() })
            }
            TraceError::Io { .. } | TraceError::Format { .. } => None,
        }
    }
}

/// An invalid configuration (cluster, workload, policy, options): what kind
/// of mistake it is ([`ConfigErrorKind`], for a caller to branch on), the
/// raw-spec key at fault where one is (`policy`, `rifling_alpha`,
/// `policy_opt.theta`), and the message, which names the key as the
/// configuration's origin spells it (`--policy`, `` `policy` ``, `policy=`)
/// and says what to fix. It displays as the message alone.
///
/// ```
/// use dlsched::error::{ConfigError, ConfigErrorKind};
/// let e = ConfigError::new(ConfigErrorKind::InvalidValue, "--theta must be at least 0").with_key("theta");
/// assert_eq!(e.kind.name(), "invalid-value");
/// assert_eq!(e.key.as_deref(), Some("theta"));
/// assert_eq!(e.to_string(), "--theta must be at least 0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// What kind of mistake it is.
    pub kind: ConfigErrorKind,
    /// The raw-spec key at fault (`policy`, `sample_interval`,
    /// `policy_opt.NAME`), where the error is about one key; `None` for an
    /// error of the configuration as a whole or of a key not yet classified.
    pub key: Option<String>,
    /// The message, as the user reads it.
    pub message: String,
}

impl ConfigError {
    /// An error of `kind` with `message`, naming no key.
    pub fn new(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        ConfigError { kind, key: None, message: message.into() }
    }

    /// An error not (yet) classified: [`ConfigErrorKind::Other`].
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(ConfigErrorKind::Other, message)
    }

    /// The error naming the raw-spec key `key` as the one at fault.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The error with its message rewritten by `f` (a prefix naming the
    /// file or the run), keeping its kind and key.
    pub fn map_message(mut self, f: impl FnOnce(String) -> String) -> Self {
        self.message = f(self.message);
        self
    }
}

/// An unclassified configuration error ([`ConfigErrorKind::Other`]), so that
/// `?` turns a `String` error into a [`ConfigError`].
impl From<String> for ConfigError {
    fn from(message: String) -> Self {
        ConfigError::other(message)
    }
}

/// An unclassified configuration error ([`ConfigErrorKind::Other`]) from a literal.
impl From<&str> for ConfigError {
    fn from(message: &str) -> Self {
        ConfigError::other(message)
    }
}

/// The message alone, for code whose errors are still strings.
impl From<ConfigError> for String {
    fn from(e: ConfigError) -> Self {
        e.message
    }
}

/// What kind of mistake a [`ConfigError`] is: the few cases a caller
/// branches on (offer the list of names, clamp a value, drop one of two
/// settings, skip an empty input, re-fit a file). More may be added.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigErrorKind {
    /// A name that does not exist: a policy kind, trace format, cluster
    /// preset, placement or other named value, a policy option, or a key.
    UnknownName,
    /// A value of the wrong type, out of its range, or not finite.
    InvalidValue,
    /// Two settings that cannot go together (`theta` for a policy outside
    /// the GENIE family, a moldable-task policy without the GENIE workload,
    /// a sharing placement on GPUs of unequal memory, two keys that each
    /// build the cluster).
    Conflict,
    /// The workload has no job, or no job of it can run on the cluster.
    EmptyWorkload,
    /// A file the configuration names does not fit the run (GENIE models
    /// fitted on other GPUs, against another ground truth or batch range).
    Artefact,
    /// Any other invalid configuration.
    Other,
}

impl ConfigErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ConfigErrorKind; 6] = [
        ConfigErrorKind::UnknownName,
        ConfigErrorKind::InvalidValue,
        ConfigErrorKind::Conflict,
        ConfigErrorKind::EmptyWorkload,
        ConfigErrorKind::Artefact,
        ConfigErrorKind::Other,
    ];

    /// The kind's kebab-case name (`unknown-name`, `invalid-value`,
    /// `conflict`, `empty-workload`, `artefact`, `other`), as the Python
    /// package's `ConfigError.kind` gives it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigErrorKind::UnknownName => "unknown-name",
            ConfigErrorKind::InvalidValue => "invalid-value",
            ConfigErrorKind::Conflict => "conflict",
            ConfigErrorKind::EmptyWorkload => "empty-workload",
            ConfigErrorKind::Artefact => "artefact",
            ConfigErrorKind::Other => "other",
        }
    }
}

impl std::fmt::Display for ConfigErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An error during a simulation run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A policy asked for something the cluster cannot do: a policy bug,
    /// reported as an error of that run, naming the job as the trace does
    /// (its id, and its file and line where it has them).
    #[error("policy `{policy}` made an invalid decision for {}{}: {reason}",
        job_label(*.job, .job_name, *.line, .file.as_deref()),
        gpu.map(|g| format!(" on {g}")).unwrap_or_default())]
    InvalidDecision {
        /// The policy's name.
        policy: String,
        /// The job the decision was about (the engine's dense id).
        job: JobId,
        /// The job's id in the trace (empty when no such job exists).
        job_name: String,
        /// The job's 1-based line in the trace file (0 for generated jobs).
        line: u64,
        /// The trace file, once the run pipeline knows it (`None` from the engine).
        file: Option<PathBuf>,
        /// The GPU at fault, where one is.
        gpu: Option<GpuId>,
        /// What was wrong.
        reason: String,
    },
    /// A model the run gave the engine (the rate model, the co-location
    /// model) failed for a job: a rate or speed that is not finite and
    /// positive, or no co-location model for a co-located job. A bug or gap
    /// of that model (or of the run's profile database), not of the policy.
    #[error("{model} model failed for {}: {reason}", job_label(*.job, .job_name, *.line, .file.as_deref()))]
    ModelFailure {
        /// The model's name (e.g. `profile-table`, `profile-coloc`).
        model: String,
        /// The job (the engine's dense id).
        job: JobId,
        /// The job's id in the trace (empty when no such job exists).
        job_name: String,
        /// The job's 1-based line in the trace file (0 for generated jobs).
        line: u64,
        /// The trace file, once the run pipeline knows it (`None` from the engine).
        file: Option<PathBuf>,
        /// What was wrong.
        reason: String,
    },
    /// The engine's own bookkeeping failed (e.g. the GPU ledger refused to
    /// release a job's GPUs): a bug of the engine, to be reported.
    #[error("internal engine error for {}{}: {reason}",
        job_label(*.job, .job_name, *.line, .file.as_deref()),
        gpu.map(|g| format!(" on {g}")).unwrap_or_default())]
    Internal {
        /// The job concerned (the engine's dense id).
        job: JobId,
        /// The job's id in the trace (empty when no such job exists).
        job_name: String,
        /// The job's 1-based line in the trace file (0 for generated jobs).
        line: u64,
        /// The trace file, once the run pipeline knows it (`None` from the engine).
        file: Option<PathBuf>,
        /// The GPU at fault, where one is.
        gpu: Option<GpuId>,
        /// What was wrong.
        reason: String,
    },
    /// The run ran out of events with admitted jobs not completed: the
    /// policy never started them (or left them suspended or running with
    /// nothing left to wake it). A run's means over the other jobs would be
    /// wrong without a word, so this is an error unless the run allows it
    /// (`--allow-unfinished`, or a `--horizon` that cuts the run off).
    #[error(
        "policy `{policy}` left {count} of {admitted} admitted jobs unfinished when the run ran out of events at {now}: {}{}. \
         A job the policy can never place should be refused at admission (a policy bug to report); \
         --allow-unfinished (sweep key allow_unfinished) keeps such a run, counting them as unfinished",
        .jobs.iter().map(|j| j.label(file.as_deref())).collect::<Vec<_>>().join(", "),
        if *.count > .jobs.len() { format!(" and {} more", .count - .jobs.len()) } else { String::new() }
    )]
    Unfinished {
        /// The policy's name.
        policy: String,
        /// Simulated time of the last event.
        now: crate::time::SimTime,
        /// Admitted jobs not completed.
        count: usize,
        /// Admitted jobs.
        admitted: usize,
        /// The first unfinished jobs by id (at most five).
        jobs: Vec<UnfinishedJob>,
        /// The trace file, once the run pipeline knows it (`None` from the engine).
        file: Option<PathBuf>,
    },
    /// An engine invariant (ledger, capacity, job accounting; see
    /// `Simulation::check_invariants`) failed after an instant, in a run that
    /// asked for the checks (`Simulation::with_invariant_checks`): a bug of
    /// the engine or of the policy's decisions, to be reported.
    #[error("engine invariant violated at {at_ms} ms under policy `{policy}`: {reason}")]
    Invariant {
        /// The policy's name.
        policy: String,
        /// Simulated time of the instant after which the check failed, ms.
        at_ms: u64,
        /// The first violation found.
        reason: String,
    },
    /// A policy asked for a wake-up ([`crate::policy::Decision::WakeAt`]) at
    /// or before the current time: a policy bug.
    #[error("policy `{policy}` made an invalid decision: {reason}")]
    InvalidTimer {
        /// The policy's name.
        policy: String,
        /// What was wrong (the time asked for and now).
        reason: String,
    },
    /// A policy kept deciding at one instant without ending its pass (more
    /// decisions than any legitimate pass makes; the bound is argued at
    /// `Simulation::decision_bound`): a loop in the policy, such as
    /// preempting and relaunching the same job, reported instead of a hang.
    #[error(
        "policy `{policy}` made more than {bound} decisions at {now} without ending its scheduling pass \
         (simulated time cannot advance: a loop in the policy). In the next 1,024 decisions it decided on {}{}. \
         Fix the policy so that a pass ends with Decision::Wait once it has nothing new to decide \
         (e.g. do not preempt a job it launched at the same instant)",
        if .jobs.is_empty() { "no job".to_string() } else {
            .jobs.iter().map(|(j, n, l, k)| format!("{} {k} times", job_label(*j, n, *l, file.as_deref()))).collect::<Vec<_>>().join(", ")
        },
        if *.timers > 0 { format!(" and asked {} wake-ups", .timers) } else { String::new() }
    )]
    NoProgress {
        /// The policy's name.
        policy: String,
        /// The instant the pass is stuck at.
        now: crate::time::SimTime,
        /// The decisions allowed at that instant.
        bound: u64,
        /// The jobs it decided on most after the bound: (dense id, trace id,
        /// 1-based line, decisions), most first, at most five.
        jobs: Vec<(JobId, String, u64, u64)>,
        /// Wake-ups it asked for after the bound.
        timers: u64,
        /// The trace file, once the run pipeline knows it (`None` from the engine).
        file: Option<PathBuf>,
    },
    /// A cycle across instants: simulated time advances and the policy keeps
    /// launching and preempting, but no job completes, arrives, or gets
    /// closer to its end (the engine's net-progress watch, `engine/guard.rs`).
    /// Typically a policy time-slicing jobs whose checkpoint overhead is at
    /// least the work a round lets them do. The run can never end.
    #[error(
        "policy `{policy}` makes no net progress: {changes} launches and preemptions up to {now} without a completion, an arrival, \
         or any job getting 1 ms of work closer to its end ({count} jobs alive: {}{}; {} s of checkpoint overhead charged so far). \
         Each resume's checkpoint overhead (--checkpoint) is probably at least the work a round lets a job do: \
         use longer rounds or leases, a cheaper checkpoint model, or report the policy",
        .jobs.iter().map(|j| j.label(file.as_deref())).collect::<Vec<_>>().join(", "),
        if *.count > .jobs.len() { format!(" and {} more", .count - .jobs.len()) } else { String::new() },
        .checkpoint_ms / 1000
    )]
    NoNetProgress {
        /// The policy's name.
        policy: String,
        /// Simulated time of the look that found no progress.
        now: crate::time::SimTime,
        /// Launches and preemptions since the last look that saw progress.
        changes: u64,
        /// Jobs alive (pending, running or suspended).
        count: usize,
        /// The first of them by id (at most five).
        jobs: Vec<UnfinishedJob>,
        /// Checkpoint overhead charged in the whole run, ms of work at rate 1.
        checkpoint_ms: u64,
        /// The trace file, once the run pipeline knows it (`None` from the engine).
        file: Option<PathBuf>,
    },
}

impl SimError {
    /// The error with the trace file its jobs' lines refer to.
    pub fn in_file(mut self, path: &std::path::Path) -> Self {
        match &mut self {
            SimError::InvalidDecision { file, .. }
            | SimError::ModelFailure { file, .. }
            | SimError::Internal { file, .. } => *file = Some(path.to_path_buf()),
            SimError::Unfinished { file, .. } => *file = Some(path.to_path_buf()),
            SimError::InvalidTimer { .. } | SimError::Invariant { .. } => {}
            SimError::NoProgress { file, .. } | SimError::NoNetProgress { file, .. } => {
                *file = Some(path.to_path_buf())
            }
        }
        self
    }
}

/// An admitted job that a run left unfinished ([`SimError::Unfinished`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnfinishedJob {
    /// The job's id in the trace.
    pub name: String,
    /// Its 1-based line in the trace file (0 for generated jobs).
    pub line: u64,
    /// GPUs it asks for.
    pub gpus: u32,
    /// Its state at the end: `pending`, `suspended`, `running` or `not yet submitted`.
    pub state: &'static str,
}

impl UnfinishedJob {
    /// `job `a` (trace.csv, line 2; 4 GPUs, pending)`.
    fn label(&self, file: Option<&std::path::Path>) -> String {
        let where_ = match (self.line, file) {
            (0, _) => String::new(),
            (l, Some(f)) => format!("{}, line {l}; ", f.display()),
            (l, None) => format!("line {l}; "),
        };
        let plural = if self.gpus == 1 { "" } else { "s" };
        format!("job `{}` ({where_}{} GPU{plural}, {})", self.name, self.gpus, self.state)
    }
}

/// `job `a` (trace.csv line 2)`, `job `a``, or the dense id for a job the
/// table does not have.
fn job_label(job: JobId, name: &str, line: u64, file: Option<&std::path::Path>) -> String {
    if name.is_empty() {
        return format!("{job} (no such job)");
    }
    match (line, file) {
        (0, _) => format!("job `{name}`"),
        (l, Some(f)) => format!("job `{name}` ({}, line {l})", f.display()),
        (l, None) => format!("job `{name}` (line {l})"),
    }
}

/// A run asked for a part of dlsched that this build left out: a policy,
/// model or option whose Cargo feature is off (the library built with
/// `default-features = false`). The configuration itself is valid; a build
/// with the feature runs it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} needs dlsched built with the `{feature}` feature")]
pub struct FeatureDisabled {
    /// What was asked for, as the configuration names it (`` policy `gavel` ``).
    pub what: String,
    /// The Cargo feature that brings it in (`lp`).
    pub feature: &'static str,
}

impl FeatureDisabled {
    /// `what` needs `feature`.
    pub fn new(what: impl Into<String>, feature: &'static str) -> Self {
        FeatureDisabled { what: what.into(), feature }
    }
}

/// Any error of one run: bad input, bad configuration, or a policy bug.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A trace or VC file is unreadable or malformed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration needs a feature this build of dlsched left out.
    #[error(transparent)]
    Feature(#[from] FeatureDisabled),
    /// The simulation failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// An output could not be written.
    #[error("cannot write outputs: {0}")]
    Output(#[from] std::io::Error),
}
