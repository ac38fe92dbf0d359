//! Typed access to CSV rows with errors that name file, line and column.

use std::path::Path;

use chrono::{NaiveDateTime, Timelike};

use crate::error::{MalformedRow, RowErrors, TraceError};
use crate::time::MAX_SECS;

/// A read's policy for malformed rows ([`RowErrors`]) and, under
/// [`RowErrors::Skip`], the rows it left out (from any thread of the read).
pub(crate) struct RowPolicy {
    skip: bool,
    skipped: std::sync::Mutex<Vec<MalformedRow>>,
}

impl RowPolicy {
    /// A policy of `errors`, with no row left out yet.
    pub(crate) fn new(errors: RowErrors) -> Self {
        RowPolicy { skip: errors == RowErrors::Skip, skipped: Default::default() }
    }

    /// What a read does with the error `e` of a data row: under `Skip`, an
    /// error of the row (not of the file) is recorded and the read goes on
    /// (`Ok`); otherwise the read stops with it (`Err`).
    pub(crate) fn on_error(&self, e: TraceError) -> Result<(), TraceError> {
        match MalformedRow::of(&e).filter(|_| self.skip) {
            Some(row) => {
                self.skipped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(row);
                Ok(())
            }
            None => Err(e),
        }
    }

    /// Whether malformed rows are left out ([`RowErrors::Skip`]).
    pub(crate) fn skips(&self) -> bool {
        self.skip
    }

    /// The rows left out, by line.
    pub(crate) fn into_skipped(self) -> Vec<MalformedRow> {
        let mut v = self.skipped.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        v.sort_by_key(|r| r.line);
        v
    }
}

/// A header: column names as written (trimmed, a leading `#` dropped).
pub(crate) struct Header {
    pub names: Vec<String>,
    /// Its 1-based line in the file (after any blank lines the reader skips).
    pub line: u64,
}

/// The header line of a CSV file's bytes: its 1-based line number and its
/// text (a leading byte-order mark and the line break dropped), past the
/// empty lines before it, which the csv reader skips too.
pub(crate) fn header_line(bytes: &[u8]) -> (u64, &str) {
    let mut start = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let mut line = 1;
    loop {
        let end = bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| start + i);
        let text = &bytes[start..end];
        // Only CRs (a CRLF, or lone CRs, which the csv reader also ends records at): empty.
        if text.iter().all(|&b| b == b'\r') && end < bytes.len() {
            start = end + 1;
            line += 1;
            continue;
        }
        return (line, std::str::from_utf8(text).unwrap_or(""));
    }
}

impl Header {
    /// The header of line 1.
    pub fn new(rec: &csv::StringRecord) -> Self {
        Header::at_line(rec, 1)
    }

    /// The header read from line `line`.
    pub fn at_line(rec: &csv::StringRecord, line: u64) -> Self {
        let names = rec
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let h = h.trim();
                let h = if i == 0 { h.trim_start_matches('\u{feff}').trim_start_matches('#').trim() } else { h };
                h.to_string()
            })
            .collect();
        Header { names, line }
    }

    /// The index of the first column named (case-insensitively) any of `names`.
    pub fn find(&self, names: &[&str]) -> Option<usize> {
        self.names.iter().position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)))
    }

    /// Like `find`, or a format error naming what is missing.
    pub fn require(&self, file: &Path, name: &str) -> Result<usize, TraceError> {
        self.find(&[name]).ok_or_else(|| TraceError::Format {
            file: file.to_path_buf(),
            message: format!("no column `{name}` in the header ({}){}", self.names.join(", "), self.on_line()),
        })
    }

    /// ` (line N)` when the header is not on line 1 (blank lines before it), else nothing.
    pub fn on_line(&self) -> String {
        if self.line == 1 { String::new() } else { format!(" (line {})", self.line) }
    }

    /// An error if a non-empty column name appears twice (which one is meant?).
    fn check_unique(&self, file: &Path) -> Result<(), TraceError> {
        for (i, n) in self.names.iter().enumerate() {
            if !n.is_empty() && self.names[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
                return Err(TraceError::Field {
                    file: file.to_path_buf(),
                    line: self.line,
                    column: n.clone(),
                    message: "the column appears twice in the header".into(),
                });
            }
        }
        Ok(())
    }
}

/// The fields of a data row: as the csv reader gives them, or cut at the
/// commas of a line without quotes.
#[derive(Clone, Copy)]
pub(crate) enum Fields<'a> {
    Record(&'a csv::StringRecord),
    Split(&'a [&'a str]),
}

/// One data row.
pub(crate) struct Row<'a> {
    pub file: &'a Path,
    pub line: u64,
    pub fields: Fields<'a>,
    pub header: &'a Header,
}

impl Row<'_> {
    pub fn str(&self, col: usize) -> &str {
        let field = match self.fields {
            Fields::Record(rec) => rec.get(col),
            Fields::Split(fields) => fields.get(col).copied(),
        };
        trim(field.unwrap_or(""))
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
        // Most traces give whole seconds, or seconds with a few decimals
        // (`266563.0`): read exactly without the general float parser.
        if let Some(v) = short_decimal(s) {
            return Ok(v);
        }
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
        if let Some(ms) = short_decimal_ms(self.str(col)) {
            return Ok(ms);
        }
        let v = self.secs(col)?;
        if v < 0.0 {
            let msg = format!("`{}` is negative; times are seconds from the trace origin, 0 or more", self.str(col));
            return Err(self.err(col, msg));
        }
        crate::time::secs_to_ms(v).ok_or_else(|| self.too_large(col))
    }

    /// A duration in seconds as ms; zero or negative durations give 0.
    pub fn duration_ms(&self, col: usize) -> Result<u64, TraceError> {
        if let Some(ms) = short_decimal_ms(self.str(col)) {
            return Ok(ms);
        }
        let v = self.secs(col)?;
        if v <= 0.0 {
            return Ok(0);
        }
        crate::time::secs_to_ms(v).ok_or_else(|| self.too_large(col))
    }

    fn too_large(&self, col: usize) -> TraceError {
        self.err(col, format!("`{}` s is out of range (at most {MAX_SECS:e} s, about 3,170 years)", self.str(col)))
    }

    /// A whole, non-negative count (GPUs, a batch size) (`2` or `2.0`).
    pub fn count(&self, col: usize) -> Result<u32, TraceError> {
        let s = self.str(col);
        if let Ok(v) = s.parse::<u32>() {
            return Ok(v);
        }
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= f64::from(u32::MAX) => Ok(v as u32),
            _ => Err(self.err(col, format!("`{s}` is not a whole, non-negative count (at most {})", u32::MAX))),
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

    /// A whole, positive batch of a whole job (all its GPUs together).
    pub fn global_batch(&self, col: usize) -> Result<u32, TraceError> {
        let s = self.str(col);
        match s.parse::<u32>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(self.err(
                col,
                format!("`{s}` is not a whole, positive batch size (samples per iteration of the whole job)"),
            )),
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
    pub fn text(&self, col: usize, what: &str) -> Result<compact_str::CompactString, TraceError> {
        let s = self.str(col);
        if s.is_empty() {
            return Err(self.err(col, format!("empty {what}")));
        }
        Ok(s.into())
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

/// Maps a csv crate error to a [`TraceError`] with the line the csv reader names
/// (its record count; see [`csv_error`] for the line in the file).
pub(crate) fn csv_error_as_named(file: &Path, e: &csv::Error) -> TraceError {
    let line = e.position().map_or(0, |p| p.line());
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("row has {len} fields but the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "row is not valid UTF-8".to_string(),
        _ => e.to_string(),
    };
    TraceError::Row { file: file.to_path_buf(), line, message }
}

/// The error for a CSV parse failure, with the line counted from the bytes.
pub(crate) fn csv_error(file: &Path, e: &csv::Error, lines: &mut LineCounter<'_>) -> TraceError {
    let mut err = csv_error_as_named(file, e);
    if let (TraceError::Row { line, .. }, Some(p)) = (&mut err, e.position()) {
        *line = lines.line_at(p.byte() as usize);
    }
    err
}

/// A csv reader over `bytes` past its header line, the header, and a line
/// counter over the bytes.
///
/// # Errors
/// An empty file, or a header that is not text, is malformed or names a
/// column twice.
fn open<'a>(file: &Path, bytes: &'a [u8]) -> Result<(Header, csv::Reader<&'a [u8]>, LineCounter<'a>), TraceError> {
    let format_err = |message: &str| TraceError::Format { file: file.to_path_buf(), message: message.to_string() };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(format_err("the file is empty (no header line)"));
    }
    let mut lines = LineCounter::new(bytes);
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let header = match rdr.headers() {
        Ok(h) => Header::at_line(h, header_line(bytes).0),
        Err(e) if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) => {
            return Err(format_err("the header line is not UTF-8 text (a binary or compressed file?)"));
        }
        Err(e) => return Err(csv_error(file, &e, &mut lines)),
    };
    header.check_unique(file)?;
    Ok((header, rdr, lines))
}

/// Reads every data row of `bytes` (CSV with a header), calling `f` on each;
/// a malformed row (an error of `f`, or of the CSV) is handed to `policy`.
///
/// # Errors
/// An empty file, a header that is not text or names a column twice, a
/// malformed row, or the first error `f` returns.
pub(crate) fn for_each_row(
    file: &Path,
    bytes: &[u8],
    policy: &RowPolicy,
    mut f: impl FnMut(&Header, Row<'_>) -> Result<(), TraceError>,
) -> Result<Header, TraceError> {
    let (header, mut rdr, mut lines) = open(file, bytes)?;
    each_record(file, &header, &mut rdr, &mut lines, policy, |row| f(&header, row))?;
    Ok(header)
}

/// Calls `f` on every remaining record of `rdr`, with its line counted by
/// `lines`.
fn each_record(
    file: &Path,
    header: &Header,
    rdr: &mut csv::Reader<&[u8]>,
    lines: &mut LineCounter<'_>,
    policy: &RowPolicy,
    mut f: impl FnMut(Row<'_>) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut rec = csv::StringRecord::new();
    loop {
        let before = rdr.position().byte();
        match rdr.read_record(&mut rec) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                let line = lines.line_at(rec.position().map_or(0, |p| p.byte() as usize));
                if let Err(e) = f(Row { file, line, fields: Fields::Record(&rec), header }) {
                    policy.on_error(e)?;
                }
            }
            // A record of the wrong length, or not UTF-8, was read whole: the
            // reader goes on at the next one. Any other error, or one that
            // read nothing, ends the read.
            Err(e) => {
                let whole = matches!(e.kind(), csv::ErrorKind::UnequalLengths { .. } | csv::ErrorKind::Utf8 { .. })
                    && rdr.position().byte() > before;
                let err = csv_error(file, &e, lines);
                if !whole {
                    return Err(err);
                }
                policy.on_error(err)?;
            }
        }
    }
}

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Data rows at least this many bytes long are read by two threads.
const PARALLEL_MIN_BYTES: usize = 256 << 10;

/// Reads every data row of `bytes` (CSV with a header) into one value each,
/// in file order: `cols` finds the columns from the header (called at the
/// first data row, so that a file with no data row needs none), `f` maps a row
/// with a scratch value of its own (made by `state`, one per part of the file
/// read: a cache, never part of a row's value).
///
/// A malformed row (an error of `f`, or a row of the wrong number of
/// fields) is handed to `policy`; errors as [`for_each_row`]: the first one
/// in file order. A file without
/// quotes (so that every line break ends a record, and every comma a field)
/// is cut into lines and fields directly, as the csv reader would cut them,
/// and a large one in two parts, each on its own thread; rows are
/// independent, so the values and the first error are the same as when it is
/// read in one pass.
///
/// # Errors
/// An empty file, a header that is not text or names a column twice, a
/// malformed row, or the first error `cols` or `f` returns.
pub(crate) fn map_rows<C: Sync, S, T: Send>(
    file: &Path,
    bytes: &[u8],
    policy: &RowPolicy,
    cols: impl Fn(&Header) -> Result<C, TraceError> + Sync,
    state: impl Fn() -> S + Sync,
    f: impl Fn(&C, &mut S, &Row<'_>) -> Result<T, TraceError> + Sync,
) -> Result<Vec<T>, TraceError> {
    let (header, mut rdr, mut lines) = open(file, bytes)?;
    let fields = rdr.headers().map_or(0, csv::StringRecord::len);
    // Where the data rows start: the reader has read the header line only.
    let data = rdr.position().byte() as usize;
    let rest = &bytes[data..];
    // Without quotes, and with line breaks `\n` or `\r\n` only, every line
    // break ends a record, so the rows can be cut in two at a line break and
    // each part given to a reader of its own.
    // A byte-order mark is stripped by a reader at the start of its input
    // only, so a part must not start with one (the whole file's reader would
    // keep it in the field).
    let (breaks, plain) = scan_lines(rest);
    let plain = plain && !rest.starts_with(BOM);
    let text = if plain { std::str::from_utf8(rest).ok() } else { None };
    let Some(text) = text else {
        let mut out = Vec::with_capacity(breaks + 1);
        let mut c = None;
        let mut s = state();
        each_record(file, &header, &mut rdr, &mut lines, policy, |row| {
            let c = match &c {
                Some(c) => c,
                // The columns' error is of the file (a `Format` error),
                // never skipped.
                None => c.insert(cols(&header)?),
            };
            out.push(f(c, &mut s, &row)?);
            Ok(())
        })?;
        return Ok(out);
    };
    drop(rdr);
    let first_line = 1 + bytes[..data].iter().filter(|&&b| b == b'\n').count() as u64;
    // The rows of `part`, whose first line is `line`, appended to `out`. The
    // part has no header; its field counts are checked against the file's.
    // Without quotes the csv reader ends a record at every `\n` or `\r\n`,
    // skips empty lines, and ends a field at every comma; the text is UTF-8.
    // Returns the line breaks in `part`.
    let read = |part: &str, line: u64, out: &mut Vec<T>| -> Result<u64, TraceError> {
        let mut c = None;
        let mut s = state();
        let mut cut: Vec<&str> = Vec::with_capacity(fields);
        let b = part.as_bytes();
        let (mut at, mut next_line) = (0, line);
        while at < b.len() {
            let this = next_line;
            next_line += 1;
            // One pass over the line: its fields end at commas, it at `\n`.
            cut.clear();
            let (mut start, mut end) = (at, b.len());
            for (i, &byte) in b.iter().enumerate().skip(at) {
                if byte == b',' {
                    cut.push(&part[start..i]);
                    start = i + 1;
                } else if byte == b'\n' {
                    end = i;
                    break;
                }
            }
            at = end + 1;
            // `\r\n` ends a line as `\n` does; an empty line is no record.
            let end = if end > start && b[end - 1] == b'\r' { end - 1 } else { end };
            if cut.is_empty() && start == end {
                continue;
            }
            cut.push(&part[start..end]);
            if cut.len() != fields {
                let message = format!("row has {} fields but the header has {fields}", cut.len());
                policy.on_error(TraceError::Row { file: file.to_path_buf(), line: this, message })?;
                continue;
            }
            let row = Row { file, line: this, fields: Fields::Split(&cut), header: &header };
            let c = match &c {
                Some(c) => c,
                None => c.insert(cols(&header)?),
            };
            match f(c, &mut s, &row) {
                Ok(v) => out.push(v),
                Err(e) => policy.on_error(e)?,
            }
        }
        Ok(next_line - line - u64::from(!part.is_empty() && !part.ends_with('\n')))
    };
    // The rows are read a chunk of about CHUNK_BYTES at a time, each chunk
    // cut at a line break; a large chunk in two parts: the first two fifths
    // on the calling thread, which also moves every row into `out` (and so
    // takes its page faults), the rest on another thread. Rows are
    // independent, so the values and the first error are those of one pass;
    // and only one chunk's rows are ever held twice (the second part's own
    // vector, then `out`), not the whole file's.
    // Every cut is just after a line break (a line break is one byte, so the
    // cut is a character boundary), and never where the next part would
    // start with a byte-order mark.
    let cut_after = |from: usize| -> Option<usize> {
        let mut at = from;
        loop {
            let i = text.as_bytes().get(at..)?.iter().position(|&b| b == b'\n')?;
            at += i + 1;
            if !text.as_bytes()[at..].starts_with(BOM) {
                return Some(at);
            }
        }
    };
    let mut out = Vec::with_capacity(breaks + 1);
    let mut halves: Vec<T> = Vec::new();
    let (mut start, mut line) = (0, first_line);
    while start < text.len() {
        let end = if text.len() - start > CHUNK_BYTES {
            cut_after(start + CHUNK_BYTES).filter(|&e| e < text.len()).unwrap_or(text.len())
        } else {
            text.len()
        };
        let chunk = &text[start..end];
        let split = (chunk.len() >= PARALLEL_MIN_BYTES)
            .then(|| cut_after(start + chunk.len() * 2 / 5).filter(|&c| c < end).map(|c| c - start))
            .flatten();
        line += match split {
            None => read(chunk, line, &mut out)?,
            Some(split) => {
                let (head, tail) = chunk.split_at(split);
                let second = std::thread::scope(|scope| {
                    let second = scope.spawn(|| {
                        // Where the second part starts: counted here, while
                        // the first part is read on the calling thread (which
                        // also takes every row into `out`).
                        let tail_line = line + line_breaks(head.as_bytes()) as u64;
                        // One vector for every chunk's second part: its pages
                        // are touched once, not once per chunk.
                        let mut v = std::mem::take(&mut halves);
                        read(tail, tail_line, &mut v).map(|n| (v, n))
                    });
                    // The second part's rows only count once the first has none wrong.
                    let first = read(head, line, &mut out);
                    let second = second.join();
                    first.map(|n| (n, second))
                })?;
                match second {
                    (n, Ok(second)) => {
                        let (v, m) = second?;
                        halves = v;
                        out.append(&mut halves);
                        n + m
                    }
                    (_, Err(panic)) => std::panic::resume_unwind(panic),
                }
            }
        };
        start = end;
    }
    Ok(out)
}

/// Bytes of rows read at a time by [`map_rows`] (16 MiB, about 450,000
/// rows of the Philly RFold list).
#[cfg(not(test))]
const CHUNK_BYTES: usize = 16 << 20;
/// In tests, chunks just over [`PARALLEL_MIN_BYTES`], so that the tests'
/// files of a few hundred KB span several chunks, read in halves.
#[cfg(test)]
const CHUNK_BYTES: usize = 300 << 10;

/// `s` without leading and trailing white space, as `str::trim`, with a
/// quick path for fields that have none at either end (most of them).
fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

/// Powers of ten that an `f64` holds exactly (10^0 to 10^22).
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// The digits of `s` as an integer `m`, and how many of them follow the
/// point (`k`), when `s` is digits with at most one `.` among or after them
/// (`42`, `266563.0`, `0.125`) and `m` is below 2^53; else `None`.
fn short_decimal_parts(s: &str) -> Option<(u64, usize)> {
    let b = s.as_bytes();
    // At most 19 digits: no overflow of `m`.
    if b.is_empty() || b.len() > 19 || !b[0].is_ascii_digit() {
        return None;
    }
    let (mut m, mut k, mut point) = (0u64, 0usize, false);
    for &c in b {
        match c {
            b'0'..=b'9' => {
                m = m * 10 + u64::from(c - b'0');
                k += usize::from(point);
            }
            b'.' if !point => point = true,
            _ => return None,
        }
    }
    (m < 1 << 53 && k < EXACT_POWERS_OF_TEN.len()).then_some((m, k))
}

/// `s` as `str::parse::<f64>` reads it, for the texts
/// [`short_decimal_parts`] takes; else `None`.
///
/// Both `m` and 10^k are exact in an `f64`, so the one division `m / 10^k`
/// is rounded once, to the nearest `f64` of the decimal: the value the
/// correctly rounding standard parser gives (Clinger's fast path).
fn short_decimal(s: &str) -> Option<f64> {
    short_decimal_parts(s).map(|(m, k)| m as f64 / EXACT_POWERS_OF_TEN[k])
}

/// `s` seconds as whole ms, as `time::secs_to_ms(short_decimal(s))` gives
/// them, when `s` has at most 3 digits after the point and is at most
/// [`MAX_SECS`]; else `None`.
///
/// The decimal is then exactly `n` = m × 10^(3 − k) ms, below 10^14 (the
/// range) and so below 2^51. The float route divides (one rounding, relative
/// error at most 2^-53), multiplies by 1,000 (one more) and rounds to the
/// nearest integer: it lands within n × 2^-52 < 1/2 of `n`, so on `n`.
fn short_decimal_ms(s: &str) -> Option<u64> {
    let (m, k) = short_decimal_parts(s)?;
    (k <= 3 && m as f64 / EXACT_POWERS_OF_TEN[k] <= MAX_SECS).then(|| m * 10u64.pow(3 - k as u32))
}

/// A high bit (0x80) in each zero byte of `t`, and no other bit: the low
/// seven bits of a byte plus 0x7f carry into its high bit (and never into the
/// next byte) unless they are all zero, and OR-ing `t` adds the high bit
/// itself.
fn zero_bytes(t: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    !(((t & LOW7) + LOW7) | t) & !LOW7
}

/// Eight copies of a byte.
const fn eight(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// The `\n` bytes in `bytes`, and whether the bytes are plain: no `"`, and
/// every `\r` followed by `\n`. One pass, a word of eight bytes at a time:
/// a `\r` in byte `j` of a word needs `\n` in byte `j + 1` (the next word's
/// first byte for the last one).
fn scan_lines(bytes: &[u8]) -> (usize, bool) {
    let (words, tail) = bytes.as_chunks::<8>();
    let (mut breaks, mut wrong, mut cr_before) = (0usize, 0u64, 0u64);
    for w in words {
        let x = u64::from_le_bytes(*w);
        let (cr, lf) = (zero_bytes(x ^ eight(b'\r')), zero_bytes(x ^ eight(b'\n')));
        breaks += lf.count_ones() as usize;
        wrong |= zero_bytes(x ^ eight(b'"')) | (cr_before & !lf & 0x80) | (cr & !(lf >> 8) & !(0x80 << 56));
        cr_before = (cr >> 56) & 0x80;
    }
    let mut plain = wrong == 0;
    let mut cr_before = cr_before != 0;
    for &b in tail {
        breaks += usize::from(b == b'\n');
        plain &= b != b'"' && (!cr_before || b == b'\n');
        cr_before = b == b'\r';
    }
    (breaks, plain && !cr_before)
}

/// The `\n` bytes in `bytes`, counted eight at a time (a word XOR eight
/// `\n` has a zero byte exactly where the word has a `\n`).
fn line_breaks(bytes: &[u8]) -> usize {
    let (words, tail) = bytes.as_chunks::<8>();
    let mut n = 0usize;
    for w in words {
        n += zero_bytes(u64::from_le_bytes(*w) ^ eight(b'\n')).count_ones() as usize;
    }
    n + tail.iter().filter(|&&b| b == b'\n').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail() -> RowPolicy {
        RowPolicy::new(RowErrors::Fail)
    }

    /// (line, first field, second field as a number) of every row, or the error.
    fn rows(bytes: &[u8]) -> Result<Vec<(u64, String, u64)>, String> {
        map_rows(
            Path::new("t.csv"),
            bytes,
            &fail(),
            |h| h.require(Path::new("t.csv"), "b"),
            || (),
            |&b, (), row| Ok((row.line, row.str(0).to_string(), row.time_ms(b)? / 1000)),
        )
        .map_err(|e| e.to_string())
    }

    /// Random decimal texts: 1 to 19 digits, a point at a random place or
    /// none, sometimes leading or trailing zeros.
    fn decimals(n: usize) -> Vec<String> {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..n)
            .map(|_| {
                let len = 1 + (next() % 19) as usize;
                let mut t: String = (0..len).map(|_| char::from(b'0' + (next() % 10) as u8)).collect();
                let at = (next() % (len as u64 + 3)) as usize;
                if at <= len && (at > 0 || next() % 2 == 0) {
                    t.insert(at.max(1), '.');
                }
                t
            })
            .collect()
    }

    #[test]
    fn short_decimals_read_as_the_standard_float_parser_reads_them() {
        let mut taken = 0;
        for t in decimals(200_000).iter().map(String::as_str).chain(["0", "0.0", "5.", "9007199254740991", "1.5"]) {
            if let Some(v) = short_decimal(t) {
                taken += 1;
                assert_eq!(v.to_bits(), t.parse::<f64>().unwrap().to_bits(), "{t}");
            }
        }
        assert!(taken > 50_000, "{taken}");
        // Texts it leaves to the standard parser.
        for t in ["", ".5", "-1", "+1", "1e3", "1.2.3", " 1", "inf", "9007199254740992", "12345678901234567890"] {
            assert_eq!(short_decimal(t), None, "{t}");
        }
    }

    #[test]
    fn short_decimal_ms_are_the_rounded_float_ms() {
        let mut taken = 0;
        let edges = ["100000000000", "100000000000.0", "100000000000.001", "99999999999.999", "0.0005", "0.001"];
        for t in decimals(200_000).iter().map(String::as_str).chain(edges) {
            let want = t.parse::<f64>().ok().and_then(crate::time::secs_to_ms);
            match short_decimal_ms(t) {
                Some(ms) => {
                    taken += 1;
                    assert_eq!(Some(ms), want, "{t}");
                }
                // Left to the float route: more than 3 decimals, or out of range.
                None => assert!(
                    t.split('.').nth(1).is_some_and(|f| f.len() > 3) || want.is_none() || short_decimal(t).is_none(),
                    "{t}"
                ),
            }
        }
        assert!(taken > 20_000, "{taken}");
        assert_eq!(short_decimal_ms("100000000000"), Some(100_000_000_000_000));
        assert_eq!(short_decimal_ms("100000000000.001"), None);
        assert_eq!(short_decimal_ms("266563.0"), Some(266_563_000));
    }

    #[test]
    fn word_scans_agree_with_byte_scans() {
        let mut x = 11u64;
        let mut next = move |n: u64| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % n
        };
        let alphabet = [b'a', b'\r', b'\n', b'"', b',', 0x8a, 0x0d + 0x80, 0];
        let mut lone_or_quote = 0;
        for _ in 0..20_000 {
            let len = next(40) as usize;
            // Mostly plain bytes, so that both answers come up often.
            let bytes: Vec<u8> = (0..len)
                .map(|_| if next(6) == 0 { alphabet[next(8) as usize] } else { [b'x', b'\n'][next(2) as usize] })
                .collect();
            let lone = bytes.iter().enumerate().any(|(i, &b)| b == b'\r' && bytes.get(i + 1) != Some(&b'\n'));
            let want = !bytes.contains(&b'"') && !lone;
            lone_or_quote += usize::from(!want);
            let breaks = bytes.iter().filter(|&&b| b == b'\n').count();
            assert_eq!(scan_lines(&bytes), (breaks, want), "{bytes:?}");
            assert_eq!(line_breaks(&bytes), breaks, "{bytes:?}");
        }
        assert!((2_000..18_000).contains(&lone_or_quote), "{lone_or_quote}");
    }

    #[test]
    fn plain_lines_read_as_the_csv_reader_reads_them() {
        // Line 1 header, 2 blank, 3 row, 4 blank (CRLF), 5 row with spaces.
        let plain = "a,b\n\nx,1\r\n\r\n y ,2\n";
        let want = vec![(3, "x".to_string(), 1), (5, "y".to_string(), 2)];
        assert_eq!(rows(plain.as_bytes()).unwrap(), want);
        // A quoted field sends the file through the csv reader: same rows.
        let quoted = "a,b\n\n\"x\",1\r\n\r\n y ,2\n";
        assert_eq!(rows(quoted.as_bytes()).unwrap(), want);
        // A field too many, on line 4, either way.
        for text in ["a,b\nx,1\n\nx,1,2\n", "a,b\n\"x\",1\n\nx,1,2\n"] {
            assert_eq!(rows(text.as_bytes()).unwrap_err(), "t.csv:4: row has 3 fields but the header has 2");
        }
        // A bad number names its line and column.
        let err = rows(b"a,b\nx,1\ny,zz\n").unwrap_err();
        assert!(err.starts_with("t.csv:3: column `b`: `zz`"), "{err}");
        // No data row: the missing column is not asked for.
        let none = map_rows(
            Path::new("t.csv"),
            b"a,c\n",
            &fail(),
            |h| h.require(Path::new("t.csv"), "b"),
            || (),
            |_, (), _| Ok(()),
        );
        assert!(none.unwrap().is_empty());
    }

    #[test]
    fn random_plain_files_read_as_the_csv_reader_reads_them() {
        // Every field of every row with its line, or the error.
        let all = |bytes: &[u8]| {
            map_rows(
                Path::new("t.csv"),
                bytes,
                &fail(),
                |_| Ok(()),
                || (),
                |(), (), row| Ok((row.line, (0..3).map(|c| row.str(c).to_string()).collect::<Vec<_>>())),
            )
            .map_err(|e| e.to_string())
        };
        let mut x = 7u64;
        let mut next = move |n: u64| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % n
        };
        let pieces = ["a", " b ", "", "12.5", "é", "x y", "\t"];
        for case in 0..300 {
            let mut text = String::from("a,b,c\n");
            let rows = 1 + next(40);
            for r in 0..rows {
                for _ in 0..next(3) {
                    text.push_str(["\n", "\r\n"][next(2) as usize]);
                }
                // Now and then a row with a field too few or too many.
                let fields = if next(25) == 0 { 2 + 2 * next(2) } else { 3 };
                let row: Vec<&str> = (0..fields).map(|_| pieces[next(pieces.len() as u64) as usize]).collect();
                text.push_str(&row.join(","));
                if r + 1 < rows || next(2) == 0 {
                    text.push_str(["\n", "\r\n"][next(2) as usize]);
                }
            }
            // One quoted field sends the same rows through the csv reader.
            let quoted = format!("{}{}\"q\",1,2\n", text, if text.ends_with('\n') { "" } else { "\n" });
            let (split, read) = (all(text.as_bytes()), all(quoted.as_bytes()));
            match (&split, &read) {
                (Ok(a), Ok(b)) => assert_eq!(a[..], b[..b.len() - 1], "case {case}: {text:?}"),
                _ => assert_eq!(split, read, "case {case}: {text:?}"),
            }
        }
    }

    #[test]
    fn the_cut_respects_characters_and_byte_order_marks() {
        // Multi-byte characters everywhere: whatever byte the middle falls
        // on, the rows are those the single reader (forced by a quote) gives.
        for pad in 0..4 {
            let mut text = format!("a{},b\n", "x".repeat(pad));
            for i in 0..6_000 {
                text.push_str(&format!("{}{i},{i}\n", "é語".repeat(10)));
            }
            assert!(text.len() >= PARALLEL_MIN_BYTES);
            let split = rows(text.as_bytes()).unwrap();
            let single = rows(text.replacen(",0\n", ",\"0\"\n", 1).as_bytes()).unwrap();
            assert_eq!(split, single, "pad {pad}");
            assert_eq!(split.len(), 6_000);
        }
        // A byte-order mark that starts a data line stays in its field, as
        // the single reader leaves it: at the first data line and at the cut.
        let got = rows("a,b\n\u{feff}first,1\nsecond,2\n".as_bytes()).unwrap();
        assert_eq!((got[0].1.as_str(), got[1].1.as_str()), ("\u{feff}first", "second"));
        let mut text = String::from("a,b\n");
        for i in 0..30_000 {
            text.push_str(&format!("j{i},{i}\n"));
        }
        let mid = text.len() / 2;
        let cut = mid + text[mid..].find('\n').unwrap() + 1;
        text.insert(cut, '\u{feff}');
        let got = rows(text.as_bytes()).unwrap();
        assert_eq!(got.iter().filter(|r| r.1.starts_with('\u{feff}')).count(), 1);
        assert_eq!(got, rows(text.replacen(",1\n", ",\"1\"\n", 1).as_bytes()).unwrap());
    }

    #[test]
    fn a_large_file_read_in_halves_gives_rows_and_first_error_in_file_order() {
        let n = 60_000;
        let mut text = String::from("a,b\n");
        for i in 0..n {
            text.push_str(&format!("j{i},{i}\n"));
        }
        assert!(text.len() >= PARALLEL_MIN_BYTES);
        // More than one chunk, the first read in halves.
        assert!(text.len() > CHUNK_BYTES + PARALLEL_MIN_BYTES);
        let got = rows(text.as_bytes()).unwrap();
        assert_eq!(got.len(), n);
        assert!(got.iter().enumerate().all(|(i, r)| *r == (i as u64 + 2, format!("j{i}"), i as u64)));
        // Errors near the end and near the start: the one nearer the start wins.
        let late = text.replacen(&format!("j{},{}\n", n - 5, n - 5), "bad,x\n", 1);
        assert!(rows(late.as_bytes()).unwrap_err().starts_with(&format!("t.csv:{}: ", n - 5 + 2)));
        let both = late.replacen("j7,7\n", "bad,y\n", 1);
        assert!(rows(both.as_bytes()).unwrap_err().starts_with("t.csv:9: "));
    }
}
