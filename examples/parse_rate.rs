//! Trace parsing rate against the csv crate's own.
//!
//! ```sh
//! cargo run --release --example parse_rate -- FILE [ROUNDS]
//! ```
//!
//! Reads FILE into memory once, then times, best of ROUNDS (default 3):
//! - the csv crate alone: one `csv::Reader` over the bytes, every record read
//!   into one reused `ByteRecord`, nothing converted (the crate's own rate);
//! - `dlsched::trace::load_trace`: reading the file, detecting the format,
//!   the SHA-256, parsing every field into `TraceRecord`s and checking ids.
//!
//! Prints MB/s of both and their ratio. A measurement, not a test.

use std::path::PathBuf;
use std::time::Instant;

use dlsched::trace::{ColumnMap, TraceFormat, load_trace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().ok_or("usage: parse_rate FILE [ROUNDS]")?);
    let rounds: u32 = args.next().map(|r| r.parse()).transpose()?.unwrap_or(3).max(1);
    let bytes = std::fs::read(&path)?;
    let mb = bytes.len() as f64 / 1e6;
    let mut best_csv = f64::INFINITY;
    let mut best_ours = f64::INFINITY;
    let (mut rows_csv, mut rows_ours) = (0u64, 0usize);
    for _ in 0..rounds {
        let t = Instant::now();
        let mut rdr = csv::ReaderBuilder::new().flexible(true).from_reader(&bytes[..]);
        let mut rec = csv::ByteRecord::new();
        rows_csv = 0;
        while rdr.read_byte_record(&mut rec)? {
            rows_csv += 1;
        }
        best_csv = best_csv.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let trace = load_trace(&path, TraceFormat::Auto, &ColumnMap::default())?;
        best_ours = best_ours.min(t.elapsed().as_secs_f64());
        rows_ours = trace.records.len();
    }
    println!("file            {} ({mb:.1} MB, best of {rounds})", path.display());
    println!("csv crate       {rows_csv} records in {best_csv:.3} s: {:.0} MB/s", mb / best_csv);
    println!("load_trace      {rows_ours} records in {best_ours:.3} s: {:.0} MB/s", mb / best_ours);
    println!("ratio           {:.2} (load_trace time / csv crate time)", best_ours / best_csv);
    Ok(())
}
