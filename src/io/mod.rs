//! Bounded file reading: every input file is read through here, so that a
//! file with no line break (`/dev/zero`), one too large for memory, or a
//! device that never ends fails with an error naming the file, never with an
//! abort inside an allocation; and typed access to CSV rows (`csvrows`),
//! whose errors name the file, line and column.

pub(crate) mod csvrows;

use std::io::Read;
use std::path::Path;

use crate::error::TraceError;

/// The longest line a CSV input may have, bytes (1 MiB). The longest rows of
/// the public traces here are a few hundred bytes (Alibaba PAI 2023 pods).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The largest configuration or artefact file (TOML, JSON) read, bytes
/// (256 MiB; a RIFLING table for lab16 is 76 KB).
pub const MAX_TEXT_BYTES: usize = 256 << 20;

/// Bytes read per step (8 MiB).
const CHUNK: usize = 8 << 20;

fn io_err(path: &Path, err: std::io::Error) -> TraceError {
    TraceError::Io { file: path.to_path_buf(), err }
}

/// Reads `path` into memory, at most `max_bytes`, failing early when more than
/// `max_line` bytes follow the last line break. Memory is reserved with
/// `try_reserve`, so running out of it is an error, not an abort.
fn read_bounded(path: &Path, max_bytes: usize, max_line: Option<usize>) -> Result<Vec<u8>, TraceError> {
    let mut f = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let hint = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf: Vec<u8> = Vec::new();
    let too_big = |n: usize| TraceError::Format {
        file: path.to_path_buf(),
        message: format!("more than {n} bytes; dlsched reads input files of at most {max_bytes} bytes"),
    };
    if hint > max_bytes as u64 {
        return Err(too_big(max_bytes));
    }
    let no_memory = |n: usize| TraceError::Format {
        file: path.to_path_buf(),
        message: format!("out of memory after reading {n} bytes"),
    };
    // One byte more than the size, so that the read that finds the end needs
    // no second allocation.
    buf.try_reserve_exact(hint as usize + 1).map_err(|_| no_memory(0))?;
    loop {
        if buf.capacity() == buf.len() {
            buf.try_reserve(CHUNK).map_err(|_| no_memory(buf.len()))?;
        }
        let room = (buf.capacity() - buf.len()).min(max_bytes + 1 - buf.len().min(max_bytes));
        let n = (&mut f).take(room as u64).read_to_end(&mut buf).map_err(|e| io_err(path, e))?;
        if buf.len() > max_bytes {
            return Err(too_big(max_bytes));
        }
        if let Some(limit) = max_line {
            // Only the tail can still be growing: a stream without line
            // breaks stops here after `limit` bytes.
            let tail = buf.iter().rev().take(limit + 1).take_while(|&&b| b != b'\n').count();
            if tail > limit {
                return Err(long_line(path, &buf, buf.len() - tail, limit));
            }
        }
        if n == 0 {
            break;
        }
    }
    if let Some(limit) = max_line {
        check_lines(path, &buf, limit)?;
    }
    Ok(buf)
}

/// The error for a line longer than `limit` that starts at byte `start`.
fn long_line(path: &Path, buf: &[u8], start: usize, limit: usize) -> TraceError {
    let line = buf[..start].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    TraceError::Row {
        file: path.to_path_buf(),
        line,
        message: format!(
            "the line is longer than {limit} bytes (no line break); expected a CSV file of one record per line"
        ),
    }
}

/// Fails if two consecutive line breaks (or the start or end of `buf`) are
/// more than `limit` bytes apart. Only the lines around every (`limit` / 2)-th
/// byte are looked at: a longer line must contain one of those bytes.
fn check_lines(path: &Path, buf: &[u8], limit: usize) -> Result<(), TraceError> {
    let stride = (limit / 2).max(1);
    let mut x = 0;
    while x < buf.len() {
        let before = buf[..x].iter().rev().take(limit + 1).take_while(|&&b| b != b'\n').count();
        let after = buf[x..].iter().take(limit + 1).take_while(|&&b| b != b'\n').count();
        if before + after > limit {
            return Err(long_line(path, buf, x - before, limit));
        }
        x += stride;
    }
    Ok(())
}

/// Reads a CSV input: any size memory allows, no line longer than
/// [`MAX_LINE_BYTES`].
///
/// # Errors
/// [`TraceError`] naming the file (and the line of a line too long), when it
/// cannot be read or memory runs out.
pub fn read_csv(path: &Path) -> Result<Vec<u8>, TraceError> {
    read_csv_with(path, MAX_LINE_BYTES)
}

/// [`read_csv`] with another line bound (for tests).
///
/// # Errors
/// As [`read_csv`].
pub fn read_csv_with(path: &Path, max_line: usize) -> Result<Vec<u8>, TraceError> {
    read_bounded(path, usize::MAX - 1, Some(max_line))
}

/// Reads a text file (TOML, JSON) of at most [`MAX_TEXT_BYTES`].
///
/// # Errors
/// [`TraceError`] naming the file when it cannot be read, is larger, or is not
/// UTF-8.
pub fn read_text(path: &Path) -> Result<String, TraceError> {
    let bytes = read_bounded(path, MAX_TEXT_BYTES, None)?;
    String::from_utf8(bytes).map_err(|e| TraceError::Format {
        file: path.to_path_buf(),
        message: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_found_wherever_they_are() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.csv");
        // Lines of 3, 10 and 3 bytes; with a limit of 9 the second (line 2) is too long.
        std::fs::write(&f, b"a,b\n0123456789\nc,d\n").unwrap();
        match read_csv_with(&f, 9) {
            Err(TraceError::Row { line, .. }) => assert_eq!(line, 2),
            other => panic!("{other:?}"),
        }
        assert_eq!(read_csv_with(&f, 10).unwrap().len(), 19);
        // A last line without a break counts too.
        std::fs::write(&f, b"a\nbbbbbbbbbbbb").unwrap();
        assert!(matches!(read_csv_with(&f, 11), Err(TraceError::Row { line: 2, .. })));
    }

    #[test]
    fn an_endless_file_without_line_breaks_is_refused() {
        let zero = Path::new("/dev/zero");
        if !zero.exists() {
            eprintln!("SKIP an_endless_file_without_line_breaks_is_refused: no /dev/zero");
            return;
        }
        assert!(matches!(read_csv(zero), Err(TraceError::Row { line: 1, .. })));
        assert!(matches!(read_text(zero), Err(TraceError::Format { .. })));
    }
}
