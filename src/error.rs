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

/// An invalid configuration (cluster, policy, options).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// An error during a simulation run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A policy asked for something the cluster cannot do: a policy bug,
    /// reported as an error of that run.
    #[error("policy `{policy}` made an invalid decision for {job}{}: {reason}",
        gpu.map(|g| format!(" on {g}")).unwrap_or_default())]
    InvalidDecision {
        /// The policy's name.
        policy: String,
        /// The job the decision was about.
        job: JobId,
        /// The GPU at fault, where one is.
        gpu: Option<GpuId>,
        /// What was wrong.
        reason: String,
    },
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
    /// The simulation failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// An output could not be written.
    #[error("cannot write outputs: {0}")]
    Output(#[from] std::io::Error),
}
