//! Traces: the canonical job record, format adapters and tie orders. The
//! synthetic generators and the workload builder that turns records into
//! simulated jobs are a floor up, in [`crate::workload`].
//!
//! Adapters read a whole file, name the file, line and column of any malformed
//! value, and never drop a row: rows that cannot run are kept as records and
//! skipped by the workload builder, which counts them by reason. On request
//! ([`RowErrors::Skip`], [`load_trace_with`]) a malformed row is left out
//! instead of stopping the read, and listed ([`LoadedTrace::malformed`]).

mod formats;
mod record;
pub mod tie_order;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use formats::ColumnMap;
pub use record::{ReadTrace, TraceFormat, TraceFormatKind, TraceRecord};

use crate::error::TraceError;
pub use crate::error::{MalformedRow, RowErrors};
use crate::io::csvrows::RowPolicy;

/// A trace read from a file.
#[derive(Clone, Debug)]
pub struct LoadedTrace {
    /// The file.
    pub path: PathBuf,
    /// The format it was read as (never `Auto` or `Philly`).
    pub format: TraceFormat,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// Wall-clock time of the origin (t = 0), for wall-clock formats.
    pub origin: Option<String>,
    /// Every data row, in file order.
    pub records: Vec<TraceRecord>,
    /// The header's columns the format does not read or document, in file
    /// order (for a note; empty for a registered format).
    pub ignored_columns: Vec<String>,
    /// The malformed rows left out, by line (empty unless read with
    /// [`RowErrors::Skip`]).
    pub malformed: Vec<MalformedRow>,
}

/// Reads a trace file.
///
/// `format` may be `Auto` (detect from the header) or `Philly` (either Philly
/// list); `columns` maps the `jobs-csv` fields to the file's column names.
///
/// # Errors
/// [`TraceError`] when the file cannot be read, its header matches no format
/// (or not the one asked for), or a row is malformed (naming file, line and column).
pub fn load_trace(path: &Path, format: TraceFormat, columns: &ColumnMap) -> Result<LoadedTrace, TraceError> {
    load_trace_with(path, format, columns, RowErrors::Fail)
}

/// [`load_trace`] with the policy `rows` for malformed data rows: a field
/// that does not parse, a row of the wrong number of fields, a repeated job
/// id (the later row). Under [`RowErrors::Skip`] each is left out and listed
/// in [`LoadedTrace::malformed`]; a registered format's rows are its
/// reader's, read as it reads them.
///
/// # Errors
/// As [`load_trace`]; under `Skip`, only errors of the file as a whole.
pub fn load_trace_with(
    path: &Path,
    format: TraceFormat,
    columns: &ColumnMap,
    rows: RowErrors,
) -> Result<LoadedTrace, TraceError> {
    let bytes = crate::io::read_csv(path)?;
    let (header_at, header) = crate::io::csvrows::header_line(&bytes);
    let format = resolve_format(path, &bytes, (header_at, header), format, columns)?;
    if format != TraceFormat::JobsCsv && !columns.is_default() {
        return Err(TraceError::Format {
            file: path.to_path_buf(),
            message: format!("--columns and --columns-file apply to jobs-csv traces; this one is {}", format.name()),
        });
    }
    let ignored_columns = formats::ignored_columns(path, (header_at, header), format, columns)?;
    let policy = RowPolicy::new(rows);
    // The digest on another thread while the rows are read.
    let (sha256, read) = std::thread::scope(|scope| {
        let sha = scope.spawn(|| hex(&Sha256::digest(&bytes)));
        let read = formats::read(path, &bytes, format, columns, &policy);
        (sha.join(), read)
    });
    let sha256 = sha256.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let (mut records, origin) = read?;
    // The file's bytes are not needed past here.
    drop(bytes);
    if let Err(e) = check_unique_ids(path, &records, format) {
        if rows == RowErrors::Fail {
            return Err(e);
        }
        drop_repeated_ids(path, &mut records, format, &policy)?;
    }
    let malformed = policy.into_skipped();
    Ok(LoadedTrace { path: path.to_path_buf(), format, sha256, origin, records, ignored_columns, malformed })
}

/// The format to read `bytes` as: the one asked for, or the one the header shows.
fn resolve_format(
    path: &Path,
    bytes: &[u8],
    (header_at, header): (u64, &str),
    asked: TraceFormat,
    columns: &ColumnMap,
) -> Result<TraceFormat, TraceError> {
    let err = |message: String| TraceError::Format { file: path.to_path_buf(), message };
    if matches!(asked, TraceFormat::Auto | TraceFormat::Philly) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(err("the file is empty (no header line)".into()));
        }
        if std::str::from_utf8(&bytes[..bytes.len().min(4096)]).is_err_and(|e| e.error_len().is_some()) {
            return Err(err("the file is not UTF-8 text (a binary or compressed file?)".into()));
        }
    }
    let detected = formats::detect(header, columns);
    let on_line = if header_at == 1 { String::new() } else { format!(" (line {header_at})") };
    match (asked, detected) {
        // A column mapping says the file is a jobs-csv list; let its reader name what is missing.
        (TraceFormat::Auto, _) if !columns.is_default() => Ok(TraceFormat::JobsCsv),
        (TraceFormat::Auto, Some(f)) => Ok(f),
        (TraceFormat::Philly, Some(f @ (TraceFormat::PhillyRfold | TraceFormat::PhillyPollux))) => Ok(f),
        (TraceFormat::Philly, _) => Err(err(format!(
            "the header `{}`{on_line} is not that of a Philly job list; expected one of:\n{}",
            header.trim(),
            formats::EXPECTED_HEADERS
        ))),
        (TraceFormat::Auto, None) => Err(err(format!(
            "cannot tell the trace format from the header `{}`{on_line}; expected one of:\n{}\n(or pass --format, and --columns to map your column names)",
            header.trim(),
            formats::EXPECTED_HEADERS
        ))),
        (f, _) => Ok(f),
    }
}

/// Job ids must be unique: outputs and comparisons join on them.
///
/// Ids that are plain decimal numbers rising from row to row (the Philly
/// RFold list's, and generated lists') are unique without a look-up table;
/// others go through a hash set of the ids (about 50 bytes a row).
fn check_unique_ids(path: &Path, records: &[TraceRecord], format: TraceFormat) -> Result<(), TraceError> {
    if rising_numbers(records) {
        return Ok(());
    }
    let mut seen: std::collections::HashMap<&str, u64, std::hash::BuildHasherDefault<Fnv>> =
        std::collections::HashMap::with_capacity_and_hasher(records.len(), Default::default());
    for r in records {
        if let Some(first) = seen.insert(r.job_id.as_str(), r.line) {
            return Err(TraceError::Field {
                file: path.to_path_buf(),
                line: r.line,
                column: format.id_column().to_string(),
                message: format!("job id `{}` repeats line {first}; job ids must be unique", r.job_id),
            });
        }
    }
    Ok(())
}

/// Leaves out every row whose job id an earlier row has, handing each to
/// `policy` with the error [`check_unique_ids`] gives.
fn drop_repeated_ids(
    path: &Path,
    records: &mut Vec<TraceRecord>,
    format: TraceFormat,
    policy: &RowPolicy,
) -> Result<(), TraceError> {
    retain_first_ids(path, records, |r| r, format, policy)
}

/// Keeps, of the items of `items` (records, as `record` gives each) that
/// share a job id, the first in order, handing each later one to `policy`
/// with the error [`check_unique_ids`] gives (`Err` under
/// [`RowErrors::Fail`]).
pub(crate) fn retain_first_ids<T>(
    path: &Path,
    items: &mut Vec<T>,
    record: impl Fn(&T) -> &TraceRecord,
    format: TraceFormat,
    policy: &RowPolicy,
) -> Result<(), TraceError> {
    let mut first: std::collections::HashMap<compact_str::CompactString, u64, std::hash::BuildHasherDefault<Fnv>> =
        Default::default();
    let mut keep = Vec::with_capacity(items.len());
    for r in items.iter().map(&record) {
        match first.get(&r.job_id) {
            Some(&line) => {
                policy.on_error(TraceError::Field {
                    file: path.to_path_buf(),
                    line: r.line,
                    column: format.id_column().to_string(),
                    message: format!("job id `{}` repeats line {line}; job ids must be unique", r.job_id),
                })?;
                keep.push(false);
            }
            None => {
                first.insert(r.job_id.clone(), r.line);
                keep.push(true);
            }
        }
    }
    let mut keep = keep.into_iter();
    items.retain(|_| keep.next().unwrap_or(true));
    Ok(())
}

/// True when every job id is a decimal number without leading zeros (so
/// that equal numbers are equal texts), each greater than the one before.
fn rising_numbers(records: &[TraceRecord]) -> bool {
    // A long list is checked in two halves at once, and where they meet.
    if records.len() >= 1 << 16 {
        let (a, b) = records.split_at(records.len() / 2);
        let meet = a.len() - 1..a.len() + 1;
        let (first, second) = std::thread::scope(|scope| {
            let second = scope.spawn(|| rising_run(b));
            (rising_run(a), second.join())
        });
        return first && second.unwrap_or_else(|panic| std::panic::resume_unwind(panic)) && rising_run(&records[meet]);
    }
    rising_run(records)
}

/// [`rising_numbers`] in one pass.
fn rising_run(records: &[TraceRecord]) -> bool {
    let mut last: Option<u64> = None;
    for r in records {
        let id = r.job_id.as_bytes();
        if id.is_empty() || id.len() > 19 || (id.len() > 1 && id[0] == b'0') || !id.iter().all(u8::is_ascii_digit) {
            return false;
        }
        let n = id.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0'));
        if last.is_some_and(|l| n <= l) {
            return false;
        }
        last = Some(n);
    }
    true
}

/// FNV-1a, a fast hash for the job-id set and the shape texts of a file
/// (lookups only; nothing iterates them).
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(crate::rng::FNV_OFFSET)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = crate::rng::fnv1a_update(self.0, bytes);
    }
}

/// The SHA-256 of a file's bytes, as the manifests record a trace's
/// (`input.sha256`), read in pieces.
///
/// # Errors
/// The file's name and the read error.
pub fn file_sha256(path: &Path) -> Result<String, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut f, &mut hasher).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(ids: &[&str]) -> Vec<TraceRecord> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| TraceRecord { line: i as u64 + 2, ..TraceRecord::new(*id, 0, 1, 1) })
            .collect()
    }

    fn check(ids: &[&str]) -> Result<(), String> {
        check_unique_ids(Path::new("t.csv"), &recs(ids), TraceFormat::JobsCsv).map_err(|e| e.to_string())
    }

    #[test]
    fn rising_decimal_ids_need_no_table_and_every_other_list_is_checked() {
        assert!(rising_numbers(&recs(&["0", "1", "5", "18446744073"])));
        // Not rising, a leading zero, a sign, text, 20 digits: the hash set decides.
        for ids in [&["1", "1"][..], &["2", "1"], &["01", "1"], &["+1"], &["a1"], &["99999999999999999999"], &[""]] {
            assert!(!rising_numbers(&recs(ids)), "{ids:?}");
        }
        assert_eq!(check(&["0", "1", "2"]), Ok(()));
        // "01" and "1" are different texts, so different jobs.
        assert_eq!(check(&["01", "1"]), Ok(()));
        assert_eq!(check(&["3", "1", "2"]), Ok(()));
        let err = check(&["1", "2", "1"]).unwrap_err();
        assert!(err.contains("t.csv:4") && err.contains("job id `1` repeats line 2"), "{err}");
    }

    #[test]
    fn a_long_list_checked_in_halves_answers_as_one_pass() {
        // 100,000 ids 0, 2, 4, ...: the halves meet between rows 49,999 and 50,000.
        let ids: Vec<String> = (0..100_000u64).map(|i| (2 * i).to_string()).collect();
        fn refs(ids: &[String]) -> Vec<&str> {
            ids.iter().map(String::as_str).collect()
        }
        assert!(rising_numbers(&recs(&refs(&ids))));
        // One id out of order at the meeting point, in either half, or at an end.
        for (at, id) in [(50_000, "99997"), (49_999, "100000"), (10, "1"), (90_000, "3"), (0, "x"), (99_999, "0")] {
            let mut bad = ids.clone();
            bad[at] = id.to_string();
            let bad = recs(&refs(&bad));
            assert!(!rising_numbers(&bad), "{at} {id}");
            assert!(!rising_run(&bad), "{at} {id}");
        }
    }
}
