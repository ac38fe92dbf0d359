//! The canonical job record ([`TraceRecord`]) and the trace formats
//! ([`TraceFormat`]): plain data, below the adapters that fill them.

use std::sync::Arc;

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

/// Trace file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
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
}

crate::names::value_names!(TraceFormat {
    Auto => "auto",
    Philly => "philly",
    PhillyRfold => "philly-rfold",
    PhillyPollux => "philly-pollux",
    Helios => "helios",
    JobsCsv => "jobs-csv",
    AlibabaOpenb => "alibaba-openb",
});

impl TraceFormat {
    /// The name of the column that holds job ids (for messages).
    pub fn id_column(self) -> &'static str {
        match self {
            TraceFormat::PhillyRfold => "job id",
            TraceFormat::PhillyPollux => "(row index)",
            TraceFormat::AlibabaOpenb => "name",
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
        }
    }
}
