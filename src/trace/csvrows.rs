//! Typed access to CSV rows with errors that name file, line and column.

use std::path::Path;

use chrono::NaiveDateTime;

use crate::error::TraceError;

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
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.err(col, format!("`{s}` is not a number of seconds"))),
        }
    }

    /// A non-negative time in seconds, as ms.
    pub fn time_ms(&self, col: usize) -> Result<u64, TraceError> {
        let v = self.secs(col)?;
        crate::time::secs_to_ms(v).ok_or_else(|| {
            self.err(col, format!("`{}` is not a time in seconds at or after the origin", self.str(col)))
        })
    }

    /// A duration in seconds as ms; zero or negative durations give 0.
    pub fn duration_ms(&self, col: usize) -> Result<u64, TraceError> {
        let v = self.secs(col)?;
        if v <= 0.0 {
            return Ok(0);
        }
        crate::time::secs_to_ms(v).ok_or_else(|| self.err(col, format!("duration `{}` is out of range", self.str(col))))
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

    /// A wall-clock time `YYYY-MM-DD HH:MM:SS`, as seconds since 1970 (no zone).
    pub fn datetime(&self, col: usize) -> Result<i64, TraceError> {
        let s = self.str(col);
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
            .map(|t| t.and_utc().timestamp())
            .map_err(|_| self.err(col, format!("`{s}` is not a time of the form YYYY-MM-DD HH:MM:SS")))
    }

    /// An optional text field (empty → `None`).
    pub fn opt(&self, col: Option<usize>) -> Option<String> {
        col.map(|c| self.str(c)).filter(|s| !s.is_empty()).map(str::to_string)
    }
}

/// Reads every data row of `bytes` (CSV with a header), calling `f` on each.
pub(crate) fn for_each_row(
    file: &Path,
    bytes: &[u8],
    mut f: impl FnMut(&Header, Row<'_>) -> Result<(), TraceError>,
) -> Result<Header, TraceError> {
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let header = Header::new(rdr.headers().map_err(|e| crate::cluster::csv_error(file, &e))?);
    if header.names.iter().all(String::is_empty) {
        return Err(TraceError::Format {
            file: file.to_path_buf(),
            message: "the file is empty (no header line)".into(),
        });
    }
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {
                let line = rec.position().map_or(0, |p| p.line());
                f(&header, Row { file, line, rec: &rec, header: &header })?;
            }
            Err(e) => return Err(crate::cluster::csv_error(file, &e)),
        }
    }
    Ok(header)
}
