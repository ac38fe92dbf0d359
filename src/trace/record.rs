//! The canonical job record ([`TraceRecord`]) and the trace formats
//! ([`TraceFormat`]): plain data, below the adapters that fill them.

use std::path::Path;
use std::sync::Arc;

use crate::error::TraceError;

use crate::job::{CompactString, JobExtra};

/// One job as a trace describes it, in the trace's own order.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRecord {
    /// The job's id in the trace (the data row index where the trace has none),
    /// inline when up to 24 bytes long.
    pub job_id: CompactString,
    /// Submission time, ms since the trace origin.
    pub submit_ms: u64,
    /// Run time, ms (0 for a zero or negative duration in the trace).
    pub duration_ms: u64,
    /// GPUs requested.
    pub gpus: u32,
    /// A reason the adapter already knows the row cannot be replayed (e.g. an
    /// Alibaba pod that was never scheduled, so it has no run time); the
    /// workload builder skips the row with this reason.
    pub skip: Option<crate::job::SkipReason>,
    /// 1-based line in the file (0 for generated jobs).
    pub line: u64,
    /// GPUs per server in the recorded placement, if the trace has it (Philly
    /// RFold `shape`); one shared copy per distinct shape of a file.
    pub shape: Option<Arc<[u32]>>,
    /// The fields most traces leave empty (VC, user, model, batch, deadline,
    /// GPU memory, fractional request, GPU types), out of line; read them
    /// through the accessors ([`TraceRecord::vc`], [`TraceRecord::model`], ...).
    /// A `jobs-csv` `global_bsz` is divided by the GPUs into `local_bsz`
    /// ([`TraceFormat::JobsCsv`]); `gpu_mem_mib` is set from the profile
    /// database; `gpu_types` are compared with
    /// [`crate::cluster::NodeSpec::gpu_type`] exactly.
    pub extra: Option<Box<JobExtra>>,
}

impl TraceRecord {
    crate::job::extra_accessors!(vc);

    /// A record with only the required fields (the job id, submit time and
    /// run time in ms, GPUs) and line 0; every optional field empty.
    pub fn new(job_id: impl Into<CompactString>, submit_ms: u64, duration_ms: u64, gpus: u32) -> Self {
        TraceRecord {
            job_id: job_id.into(),
            submit_ms,
            duration_ms,
            gpus,
            skip: None,
            line: 0,
            shape: None,
            extra: None,
        }
    }

    /// The absolute deadline, ms since the trace origin, if the trace gives one.
    pub fn deadline_ms(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|e| e.deadline_ms)
    }
}

/// Trace file formats: the built-in ones, and those registered from outside
/// the crate ([`TraceFormatKind`]). Serialised as the format's name
/// (`"jobs-csv"`); plain deserialisation knows the built-in names only
/// (`crate::experiment::Registry` reads the registered ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum TraceFormat {
    /// Detect from the header line.
    Auto,
    /// Either Philly job list, chosen by header.
    Philly,
    /// Philly job list of the RFold artifact: `#job id, arrival time (sec),
    /// topology, shape, size, duration (sec)`; arrival and duration in seconds.
    PhillyRfold,
    /// Philly job list of the Pollux artifact: `timestamp, duration, num_gpus,
    /// gpu_time, cluster`; wall-clock timestamps, duration in seconds, VC in `cluster`.
    PhillyPollux,
    /// Helios `cluster_log.csv`: `job_id, user, vc, gpu_num, cpu_num, node_num,
    /// state, submit_time, start_time, end_time, duration, queue`; times as
    /// `YYYY-MM-DD HH:MM:SS`, duration in seconds.
    Helios,
    /// A simple job list: `job_id, submit_time, duration, gpu_num` and optional
    /// `vc`, `user`, `model`, `local_bsz` (seconds); column names can be
    /// mapped with `--columns`.
    JobsCsv,
    /// Alibaba PAI 2023 GPU-sharing pod list (`openb_pod_list_*.csv`, Weng et
    /// al., ATC'23): `name, cpu_milli, memory_mib, num_gpu, gpu_milli,
    /// gpu_spec, qos, pod_phase, creation_time, deletion_time,
    /// scheduled_time`; times in seconds from the trace origin. One job per
    /// pod: submitted at `creation_time`, running `deletion_time −
    /// scheduled_time` s; `gpu_milli` < 1000 on a 1-GPU pod is a fractional
    /// request; `gpu_spec` (`|`-separated) constrains the GPU type. CPU-only
    /// pods are skipped (`zero_gpus`), and so are pods never scheduled
    /// (`never_scheduled`: no run time was recorded).
    AlibabaOpenb,
    /// The elastic workloads of the Pollux and Sia artifacts: `name, time,
    /// application, num_replicas, batch_size`; `time` in seconds from the
    /// trace origin. Each row is a work-defined job: its application trained
    /// to the progress model's target, tuned to `num_replicas` GPUs and a total
    /// batch of `batch_size` samples (what a non-elastic policy runs it
    /// with); it has no duration. Optional, as ElasticFlow's adapted Pollux
    /// simulator reads them: `ddl` (absolute deadline, s on the clock of
    /// `time`) and `max_sample` (a sample budget: the job also ends when it
    /// has processed that many samples).
    ElasticWorkload,
    /// A format registered from outside the crate.
    #[cfg_attr(feature = "cli", value(skip))]
    Registered(&'static TraceFormatKind),
}

/// The built-in formats by name; a registered format is named by its kind
/// and is not among the selectable values (the registry lists it).
impl crate::names::ValueNames for TraceFormat {
    fn selectable() -> &'static [Self] {
        use TraceFormat::*;
        &[Auto, Philly, PhillyRfold, PhillyPollux, Helios, JobsCsv, AlibabaOpenb, ElasticWorkload]
    }

    fn value_name(self) -> &'static str {
        self.name()
    }
}

/// The built-in formats as serde reads them.
#[derive(serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum BuiltinFormat {
    Auto,
    Philly,
    PhillyRfold,
    PhillyPollux,
    Helios,
    JobsCsv,
    AlibabaOpenb,
    ElasticWorkload,
}

impl serde::Serialize for TraceFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for TraceFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match BuiltinFormat::deserialize(d)? {
            BuiltinFormat::Auto => TraceFormat::Auto,
            BuiltinFormat::Philly => TraceFormat::Philly,
            BuiltinFormat::PhillyRfold => TraceFormat::PhillyRfold,
            BuiltinFormat::PhillyPollux => TraceFormat::PhillyPollux,
            BuiltinFormat::Helios => TraceFormat::Helios,
            BuiltinFormat::JobsCsv => TraceFormat::JobsCsv,
            BuiltinFormat::AlibabaOpenb => TraceFormat::AlibabaOpenb,
            BuiltinFormat::ElasticWorkload => TraceFormat::ElasticWorkload,
        })
    }
}

/// Reads a whole trace file (`bytes`, the content of `file`) into canonical
/// records, in file order, each with its 1-based `line`; a row that cannot
/// run is kept with its `skip` reason (the workload builder counts it), and a
/// malformed value is a [`TraceError::Field`] naming the file, line and
/// column.
pub type ReadTrace = fn(file: &Path, bytes: &[u8]) -> Result<Vec<TraceRecord>, TraceError>;

/// A trace format registered from outside the crate: its name (a value of
/// `--format` and of a sweep's `format` key, recorded in manifests), a
/// one-line help, and its reader. Declared as a `static`, so that
/// [`TraceFormat`] stays plain data:
///
/// ```
/// use dlsched::trace::{TraceFormatKind, TraceRecord};
/// fn read(_file: &std::path::Path, _bytes: &[u8]) -> Result<Vec<TraceRecord>, dlsched::error::TraceError> {
///     Ok(vec![TraceRecord::new("a", 0, 60_000, 1)])
/// }
/// static MINE: TraceFormatKind = TraceFormatKind::new("mine", "One job, always.", read);
/// assert_eq!(MINE.name(), "mine");
/// ```
#[derive(Debug)]
pub struct TraceFormatKind {
    name: &'static str,
    help: &'static str,
    id_column: &'static str,
    read: ReadTrace,
}

impl TraceFormatKind {
    /// The format `name` (lower case, `-`-separated), with the one-line
    /// `help` that `simulate --help` shows and its reader; job ids are in
    /// the column `job_id` (for messages; [`TraceFormatKind::with_id_column`]).
    pub const fn new(name: &'static str, help: &'static str, read: ReadTrace) -> Self {
        TraceFormatKind { name, help, id_column: "job_id", read }
    }

    /// The same format, its job ids in the column `column`.
    pub const fn with_id_column(self, column: &'static str) -> Self {
        TraceFormatKind { id_column: column, ..self }
    }

    /// The format's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The format's one-line help.
    pub fn help(&self) -> &'static str {
        self.help
    }

    /// Reads `bytes`, the content of `file` ([`ReadTrace`]).
    ///
    /// # Errors
    /// The reader's.
    pub fn read(&self, file: &Path, bytes: &[u8]) -> Result<Vec<TraceRecord>, TraceError> {
        (self.read)(file, bytes)
    }
}

/// Two formats are the same when they have the same name.
impl PartialEq for TraceFormatKind {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TraceFormatKind {}

impl TraceFormat {
    /// The name of the column that holds job ids (for messages).
    pub fn id_column(self) -> &'static str {
        match self {
            TraceFormat::PhillyRfold => "job id",
            TraceFormat::PhillyPollux => "(row index)",
            TraceFormat::AlibabaOpenb | TraceFormat::ElasticWorkload => "name",
            TraceFormat::Registered(k) => k.id_column,
            _ => "job_id",
        }
    }

    /// The format's name as written in outputs.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Auto => "auto",
            TraceFormat::Philly => "philly",
            TraceFormat::PhillyRfold => "philly-rfold",
            TraceFormat::PhillyPollux => "philly-pollux",
            TraceFormat::Helios => "helios",
            TraceFormat::JobsCsv => "jobs-csv",
            TraceFormat::AlibabaOpenb => "alibaba-openb",
            TraceFormat::ElasticWorkload => "elastic-workload",
            TraceFormat::Registered(k) => k.name,
        }
    }
}
