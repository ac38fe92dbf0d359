//! Parquet copies of a run directory's CSV tables (cargo feature `parquet`).
//!
//! A parquet file is written from the very CSV bytes the CSV writer produced
//! (the file in the run directory, or the bytes in memory), so the two can
//! never disagree: same column names, same rows in the same order, same
//! values. Each column's type is inferred over all its rows:
//!
//! - `INT64` when every non-empty cell is a plain decimal integer (no sign
//!   `+`, no leading zero, so that a cell such as `007` keeps its text),
//!   unless the column's name ends in `_s` (seconds, the project's unit
//!   suffix: `submit_s`, `jct_s`, `time_s`), or the table is a sweep's
//!   summary (`ints = false`): then `DOUBLE`, so that a column's type does
//!   not change with the values of one run;
//! - `DOUBLE` when every non-empty cell is a decimal or scientific number
//!   (digits, `.`, `+`, `-`, `e`/`E` only, so `inf` and `NaN` stay text; no
//!   leading zero before a digit, so `007` and `01.5` stay text) and at
//!   least one is not an integer;
//! - `BYTE_ARRAY` annotated `UTF8` (a string) otherwise, and for a column
//!   with no non-empty cell.
//!
//! Every column is `OPTIONAL`: an empty CSV cell is a null. One rule for
//! every table (`jobs`, `timeline`, `vc_summary`, a sweep's `summary` with
//! every number a `DOUBLE`), so a reader gets integers for counts, doubles
//! for seconds and ratios. A ratio column whose values all happen to be whole
//! (a `gpu_utilization` of only 0 and 1) is `INT64` in that run's file.
//! Compression: Snappy (the parquet format's common default; the crate's
//! `snap` feature, pure Rust). Rows go in row groups of [`ROW_GROUP_ROWS`].

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, ConvertedType, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

/// Rows per parquet row group: 1,048,576 (our choice: a few tens of MiB of
/// column buffers for `jobs.csv`'s 15-odd columns, and few groups for a
/// 10-million-job replay).
pub const ROW_GROUP_ROWS: usize = 1 << 20;

/// The parquet type a CSV column gets (see the module docs for the rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Every non-empty cell a plain integer: `INT64`.
    Int,
    /// Every non-empty cell a number, not all integers: `DOUBLE`.
    Float,
    /// Anything else: `BYTE_ARRAY` (`UTF8`).
    Str,
}

fn is_plain_int(c: &[u8]) -> bool {
    let d = c.strip_prefix(b"-").unwrap_or(c);
    !d.is_empty() && d.iter().all(u8::is_ascii_digit) && (d.len() == 1 || d[0] != b'0') && c != b"-0"
}

/// A leading zero before another digit (`007`, `-01.5`): an identifier
/// written with digits, which keeps its text.
fn has_leading_zero(c: &[u8]) -> bool {
    let d = c.strip_prefix(b"-").or_else(|| c.strip_prefix(b"+")).unwrap_or(c);
    d.len() > 1 && d[0] == b'0' && d[1].is_ascii_digit()
}

fn is_number(c: &[u8]) -> bool {
    !has_leading_zero(c)
        && c.iter().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        && c.iter().any(u8::is_ascii_digit)
        && std::str::from_utf8(c).is_ok_and(|s| s.parse::<f64>().is_ok())
}

/// The type of a column that so far is `t`, given one more cell.
fn widen(t: Option<ColumnType>, cell: &[u8]) -> Option<ColumnType> {
    if cell.is_empty() {
        return t;
    }
    let int = is_plain_int(cell) && std::str::from_utf8(cell).is_ok_and(|s| s.parse::<i64>().is_ok());
    Some(match t {
        _ if !int && !is_number(cell) => ColumnType::Str,
        Some(ColumnType::Str) => ColumnType::Str,
        None | Some(ColumnType::Int) if int => ColumnType::Int,
        _ => ColumnType::Float,
    })
}

fn invalid(what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{what}: {e}"))
}

/// Column names and inferred types of the CSV that `open` reads (a header
/// line, then rows); `what` names it in errors. With `ints` false, no column
/// is [`ColumnType::Int`] (numbers are all `DOUBLE`).
///
/// # Errors
/// An I/O error, or CSV that does not parse (with its line).
pub fn infer_types<R: Read>(
    open: impl Fn() -> std::io::Result<R>,
    what: &str,
    ints: bool,
) -> std::io::Result<Vec<(String, ColumnType)>> {
    let mut r = csv::ReaderBuilder::new().has_headers(true).from_reader(open()?);
    let names: Vec<String> = r.headers().map_err(|e| invalid(what, e))?.iter().map(str::to_string).collect();
    let mut types: Vec<Option<ColumnType>> = vec![None; names.len()];
    let mut rec = csv::ByteRecord::new();
    while r.read_byte_record(&mut rec).map_err(|e| invalid(what, e))? {
        for (t, cell) in types.iter_mut().zip(rec.iter()) {
            *t = widen(*t, cell);
        }
    }
    Ok(names
        .into_iter()
        .zip(types)
        .map(|(n, t)| {
            let t = match t {
                None => ColumnType::Str,
                Some(ColumnType::Int) if !ints || n.ends_with("_s") => ColumnType::Float,
                Some(t) => t,
            };
            (n, t)
        })
        .collect())
}

enum Buf {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Str(Vec<ByteArray>),
}

/// Writes the CSV that `open` reads (opened twice: once to infer the types,
/// once to copy the rows) as parquet to `w`; `what` names the CSV in errors;
/// `ints` as for [`infer_types`].
///
/// # Errors
/// An I/O error, CSV that does not parse, or a parquet writer error, each
/// naming `what`.
pub fn csv_to_parquet<R: Read, W: std::io::Write + Send>(
    open: impl Fn() -> std::io::Result<R>,
    what: &str,
    ints: bool,
    w: W,
) -> std::io::Result<()> {
    let cols = infer_types(&open, what, ints)?;
    let pq = |e: parquet::errors::ParquetError| invalid(what, e);
    let fields = cols
        .iter()
        .map(|(name, t)| {
            let (p, conv) = match t {
                ColumnType::Int => (PhysicalType::INT64, ConvertedType::NONE),
                ColumnType::Float => (PhysicalType::DOUBLE, ConvertedType::NONE),
                ColumnType::Str => (PhysicalType::BYTE_ARRAY, ConvertedType::UTF8),
            };
            Type::primitive_type_builder(name, p)
                .with_repetition(Repetition::OPTIONAL)
                .with_converted_type(conv)
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(pq)?;
    let schema = Arc::new(Type::group_type_builder("schema").with_fields(fields).build().map_err(pq)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("dlsched {}", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let mut writer = SerializedFileWriter::new(w, schema, props).map_err(pq)?;
    let mut r = csv::ReaderBuilder::new().has_headers(true).from_reader(open()?);
    let mut rec = csv::ByteRecord::new();
    let fresh = || -> Vec<(Buf, Vec<i16>)> {
        cols.iter()
            .map(|(_, t)| {
                let b = match t {
                    ColumnType::Int => Buf::Int(Vec::new()),
                    ColumnType::Float => Buf::Float(Vec::new()),
                    ColumnType::Str => Buf::Str(Vec::new()),
                };
                (b, Vec::new())
            })
            .collect()
    };
    let mut bufs = fresh();
    let mut rows = 0usize;
    let mut done = false;
    while !done {
        done = !r.read_byte_record(&mut rec).map_err(|e| invalid(what, e))?;
        if !done {
            let line = rec.position().map_or(0, csv::Position::line);
            for ((buf, defs), ((name, _), cell)) in bufs.iter_mut().zip(cols.iter().zip(rec.iter())) {
                if cell.is_empty() {
                    defs.push(0);
                    continue;
                }
                defs.push(1);
                // The types were inferred from these very cells: a parse
                // failure means the file changed between the two passes.
                let bad = || {
                    invalid(
                        what,
                        format!(
                            "line {line}, column `{name}`: `{}` changed type between reads",
                            String::from_utf8_lossy(cell)
                        ),
                    )
                };
                let text = std::str::from_utf8(cell).map_err(|_| bad())?;
                match buf {
                    Buf::Int(v) => v.push(text.parse().map_err(|_| bad())?),
                    Buf::Float(v) => v.push(text.parse().map_err(|_| bad())?),
                    Buf::Str(v) => v.push(ByteArray::from(cell.to_vec())),
                }
            }
            rows += 1;
        }
        if (done && rows > 0) || rows == ROW_GROUP_ROWS {
            let mut rg = writer.next_row_group().map_err(pq)?;
            for (buf, defs) in std::mem::replace(&mut bufs, fresh()) {
                let mut col =
                    rg.next_column().map_err(pq)?.ok_or_else(|| invalid(what, "parquet schema has fewer columns"))?;
                match &buf {
                    Buf::Int(v) => col.typed::<Int64Type>().write_batch(v, Some(&defs), None),
                    Buf::Float(v) => col.typed::<DoubleType>().write_batch(v, Some(&defs), None),
                    Buf::Str(v) => col.typed::<ByteArrayType>().write_batch(v, Some(&defs), None),
                }
                .map_err(pq)?;
                col.close().map_err(pq)?;
            }
            rg.close().map_err(pq)?;
            rows = 0;
        }
    }
    writer.close().map_err(pq)?;
    Ok(())
}

/// Writes `<dir>/<table>.parquet` from `<dir>/<table>.csv` ([`csv_to_parquet`]),
/// to a temporary name renamed into place
/// ([`super::export::write_replacing_with`]: for a run directory, whose
/// manifest is written after).
///
/// # Errors
/// As [`csv_to_parquet`], naming the files.
pub fn table_to_parquet(dir: &Path, table: &str) -> std::io::Result<()> {
    let csv_path = dir.join(format!("{table}.csv"));
    let what = csv_path.display().to_string();
    super::export::write_replacing_with(&dir.join(format!("{table}.parquet")), |w| {
        csv_to_parquet(
            || std::fs::File::open(&csv_path).map(|f| std::io::BufReader::with_capacity(1 << 16, f)),
            &what,
            true,
            w,
        )
    })
}

/// Writes `path` (a parquet file) from CSV text in memory, atomically
/// ([`super::export::write_atomic_with`]), every number a `DOUBLE` (for a
/// sweep's summary, whose columns mix counts and means); `what` names the CSV
/// in errors.
///
/// # Errors
/// As [`csv_to_parquet`].
pub fn csv_bytes_to_parquet(bytes: &[u8], what: &str, path: &Path) -> std::io::Result<()> {
    super::export::write_atomic_with(path, |w| csv_to_parquet(|| Ok(bytes), what, false, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_follow_the_documented_rule() {
        let csv = "a,b,c,d,e,f,g_s\n1,1,007,x,,-3,4\n-2,2.5,8,1,,1e3,5\n,,9,2,,,\n";
        let t = infer_types(|| Ok(csv.as_bytes()), "t", true).unwrap();
        let types: Vec<ColumnType> = t.iter().map(|c| c.1).collect();
        use ColumnType::*;
        // a: ints and an empty cell; b: an int and a decimal; c: a leading
        // zero keeps its text; d: a letter; e: all empty; f: 1e3 is a number
        // but not a plain integer; g_s: whole seconds are still seconds.
        assert_eq!(types, [Int, Float, Str, Str, Str, Float, Float]);
        assert_eq!(t[0].0, "a");
        // A summary: no INT64 column.
        let t = infer_types(|| Ok(csv.as_bytes()), "t", false).unwrap();
        assert_eq!(t.iter().map(|c| c.1).collect::<Vec<_>>(), [Float, Float, Str, Str, Str, Float, Float]);
    }

    #[test]
    fn inf_and_nan_stay_text_and_bad_csv_names_the_table() {
        let t = infer_types(|| Ok("x\ninf\n1\n".as_bytes()), "t", true).unwrap();
        assert_eq!(t[0].1, ColumnType::Str);
        let t = infer_types(|| Ok("x\nNaN\n".as_bytes()), "t", true).unwrap();
        assert_eq!(t[0].1, ColumnType::Str);
        let e = infer_types(|| Ok("a,b\n1,2\n3\n".as_bytes()), "run/jobs.csv", true).unwrap_err();
        assert!(e.to_string().contains("run/jobs.csv"), "{e}");
    }
}
