//! Typed access to CSV rows with errors that name file, line and column.

use std::path::Path;

use chrono::{NaiveDateTime, Timelike};

use crate::error::TraceError;
use crate::time::MAX_SECS;

/// A header: column names as written (trimmed, a leading `#` dropped).
pub(crate) struct Header {
    pub names: Vec<String>,
}

impl Header {
    pub fn new(rec: &csv::StringRecord) -> Self {
        let names = rec
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let h = h.trim();
                let h = if i == 0 { h.trim_start_matches('\u{feff}').trim_start_matches('#').trim() } else { h };
                h.to_string()
            })
            .collect();
        Header { names }
    }

    /// The index of the first column named (case-insensitively) any of `names`.
    pub fn find(&self, names: &[&str]) -> Option<usize> {
        self.names.iter().position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)))
    }

    /// Like `find`, or a format error naming what is missing.
    pub fn require(&self, file: &Path, name: &str) -> Result<usize, TraceError> {
        self.find(&[name]).ok_or_else(|| TraceError::Format {
            file: file.to_path_buf(),
            message: format!("no column `{name}` in the header ({})", self.names.join(", ")),
        })
    }

    /// An error if a non-empty column name appears twice (which one is meant?).
    fn check_unique(&self, file: &Path) -> Result<(), TraceError> {
        for (i, n) in self.names.iter().enumerate() {
            if !n.is_empty() && self.names[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
                return Err(TraceError::Field {
                    file: file.to_path_buf(),
                    line: 1,
                    column: n.clone(),
                    message: "the column appears twice in the header".into(),
                });
            }
        }
        Ok(())
    }
}

/// One data row.
pub(crate) struct Row<'a> {
    pub file: &'a Path,
    pub line: u64,
    pub rec: &'a csv::StringRecord,
    pub header: &'a Header,
}

impl Row<'_> {
    pub fn str(&self, col: usize) -> &str {
        self.rec.get(col).unwrap_or("").trim()
    }

    pub fn err(&self, col: usize, message: String) -> TraceError {
        TraceError::Field {
            file: self.file.to_path_buf(),
            line: self.line,
            column: self.header.names.get(col).cloned().unwrap_or_else(|| format!("#{col}")),
            message,
        }
    }

    /// A finite number of seconds (may be negative; the caller decides).
    pub fn secs(&self, col: usize) -> Result<f64, TraceError> {
        let s = self.str(col);
        // Most traces give whole seconds: the integer parser is several times
        // faster than the float one, and exact.
        if let Ok(v) = s.parse::<u64>() {
            return Ok(v as f64);
        }
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.err(col, format!("`{s}` is not a number of seconds"))),
        }
    }

    /// A time in seconds from the trace origin (0 to [`MAX_SECS`]), as ms.
    pub fn time_ms(&self, col: usize) -> Result<u64, TraceError> {
        let v = self.secs(col)?;
        if v < 0.0 {
            let msg = format!("`{}` is negative; times are seconds from the trace origin, 0 or more", self.str(col));
            return Err(self.err(col, msg));
        }
        crate::time::secs_to_ms(v).ok_or_else(|| self.too_large(col))
    }

    /// A duration in seconds as ms; zero or negative durations give 0.
    pub fn duration_ms(&self, col: usize) -> Result<u64, TraceError> {
        let v = self.secs(col)?;
        if v <= 0.0 {
            return Ok(0);
        }
        crate::time::secs_to_ms(v).ok_or_else(|| self.too_large(col))
    }

    fn too_large(&self, col: usize) -> TraceError {
        self.err(col, format!("`{}` s is out of range (at most {MAX_SECS:e} s, about 3,170 years)", self.str(col)))
    }

    /// A whole, non-negative GPU count (`2` or `2.0`).
    pub fn count(&self, col: usize) -> Result<u32, TraceError> {
        let s = self.str(col);
        if let Ok(v) = s.parse::<u32>() {
            return Ok(v);
        }
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= f64::from(u32::MAX) => Ok(v as u32),
            _ => Err(self.err(col, format!("`{s}` is not a whole, non-negative number of GPUs"))),
        }
    }

    /// A whole, positive per-GPU batch size.
    pub fn batch(&self, col: usize) -> Result<u32, TraceError> {
        let s = self.str(col);
        match s.parse::<u32>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(self.err(col, format!("`{s}` is not a whole, positive batch size (samples per GPU)"))),
        }
    }

    /// A wall-clock time `YYYY-MM-DD HH:MM:SS`, as seconds since 1970 (no zone).
    pub fn datetime(&self, col: usize) -> Result<i64, TraceError> {
        let s = self.str(col);
        match NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S") {
            // chrono reads second 60 as a leap second; traces do not mean one.
            Ok(t) if t.nanosecond() < 1_000_000_000 => Ok(t.and_utc().timestamp()),
            _ => Err(self.err(col, format!("`{s}` is not a time of the form YYYY-MM-DD HH:MM:SS"))),
        }
    }

    /// An optional text field (empty → `None`).
    pub fn opt(&self, col: Option<usize>) -> Option<String> {
        col.map(|c| self.str(c)).filter(|s| !s.is_empty()).map(str::to_string)
    }

    /// A required, non-empty text field.
    pub fn text(&self, col: usize, what: &str) -> Result<String, TraceError> {
        let s = self.str(col);
        if s.is_empty() {
            return Err(self.err(col, format!("empty {what}")));
        }
        Ok(s.to_string())
    }
}

/// Counts lines as a text editor does: the line of a byte offset is one more
/// than the `\n` bytes before it (so CRLF files and blank lines count right).
pub(crate) struct LineCounter<'a> {
    bytes: &'a [u8],
    offset: usize,
    line: u64,
}

impl<'a> LineCounter<'a> {
    /// A counter over the bytes of one file.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        LineCounter { bytes, offset: 0, line: 1 }
    }

    /// The line of the first content byte at or after `offset` (the csv
    /// reader may report a record as starting at the line break before it).
    pub(crate) fn line_at(&mut self, offset: usize) -> u64 {
        let mut offset = offset.min(self.bytes.len());
        while offset < self.bytes.len() && matches!(self.bytes[offset], b'\r' | b'\n') {
            offset += 1;
        }
        if offset < self.offset {
            self.offset = 0;
            self.line = 1;
        }
        self.line += self.bytes[self.offset..offset].iter().filter(|&&b| b == b'\n').count() as u64;
        self.offset = offset;
        self.line
    }
}

/// The error for a CSV parse failure, with the line counted from the bytes.
pub(crate) fn csv_error(file: &Path, e: &csv::Error, lines: &mut LineCounter<'_>) -> TraceError {
    let mut err = crate::cluster::csv_error(file, e);
    if let (TraceError::Row { line, .. }, Some(p)) = (&mut err, e.position()) {
        *line = lines.line_at(p.byte() as usize);
    }
    err
}

/// Reads every data row of `bytes` (CSV with a header), calling `f` on each.
///
/// # Errors
/// An empty file, a header that is not text or names a column twice, a
/// malformed row, or the first error `f` returns.
pub(crate) fn for_each_row(
    file: &Path,
    bytes: &[u8],
    mut f: impl FnMut(&Header, Row<'_>) -> Result<(), TraceError>,
) -> Result<Header, TraceError> {
    let format_err = |message: &str| TraceError::Format { file: file.to_path_buf(), message: message.to_string() };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(format_err("the file is empty (no header line)"));
    }
    let mut lines = LineCounter::new(bytes);
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let header = match rdr.headers() {
        Ok(h) => Header::new(h),
        Err(e) if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) => {
            return Err(format_err("the header line is not UTF-8 text (a binary or compressed file?)"));
        }
        Err(e) => return Err(csv_error(file, &e, &mut lines)),
    };
    header.check_unique(file)?;
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {
                let line = lines.line_at(rec.position().map_or(0, |p| p.byte() as usize));
                f(&header, Row { file, line, rec: &rec, header: &header })?;
            }
            Err(e) => return Err(csv_error(file, &e, &mut lines)),
        }
    }
    Ok(header)
}
