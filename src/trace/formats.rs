//! The trace format adapters.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::record::{TraceFormat, TraceRecord};
use crate::error::TraceError;
use crate::io::csvrows::{Header, RowPolicy, for_each_row, map_rows};
use crate::job::{JobExtra, SkipReason};
use crate::time::MAX_SECS;

pub(crate) const EXPECTED_HEADERS: &str =
    "  philly-rfold:  #job id,arrival time (sec),topology,shape,size,duration (sec)
  philly-pollux: timestamp,duration,num_gpus,gpu_time,cluster
  helios:        job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
  jobs-csv:      job_id,submit_time,duration,gpu_num[,vc][,user][,model][,local_bsz][,global_bsz][,deadline][,num_iteration]
                 (names mappable with --columns, e.g. --columns gpu_num=num_gpu,deadline=ddl;
                 duration may be absent when num_iteration is there)
  alibaba-openb: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
  elastic-workload: name,time,application,num_replicas,batch_size[,ddl][,max_sample] (the Pollux and Sia artifacts' work-defined jobs)";

/// The logical fields of the `jobs-csv` format and the file columns they come
/// from. Defaults are the field names themselves; every field after
/// `gpu_num` is optional (see [`ColumnMap::FIELDS`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnMap {
    map: BTreeMap<String, String>,
    /// The fields the user mapped (for error messages); left out of manifests when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    explicit: Vec<String>,
}

impl Default for ColumnMap {
    /// Every field named as itself. `num_iteration`, added after manifests
    /// began to echo the map, is left out of it until mapped (its column is
    /// its name all the same, by [`ColumnMap::column`]'s fallback), so that
    /// a run's manifest stays what it was.
    fn default() -> Self {
        let map = Self::FIELDS[..10].iter().map(|f| (f.to_string(), f.to_string())).collect();
        ColumnMap { map, explicit: Vec::new() }
    }
}

impl ColumnMap {
    /// The fields, required first: `job_id`, `submit_time` (s), `duration` (s),
    /// `gpu_num`, then optional `vc`, `user`, `model` (profile database name
    /// or one of its aliases, listed in `profile::aliases`), `local_bsz`
    /// (per-GPU batch, samples), `global_bsz` (batch of the whole job,
    /// samples; divided by `gpu_num`, rounding down), `deadline` (absolute
    /// deadline, s, on the clock of `submit_time`) and `num_iteration`
    /// (iterations, optimiser steps at the job's global batch: a row with one
    /// is a work-defined job of ElasticFlow's model, see
    /// [`TraceFormat::JobsCsv`]; the `duration` column may then be absent).
    pub const FIELDS: [&'static str; 11] = [
        "job_id",
        "submit_time",
        "duration",
        "gpu_num",
        "vc",
        "user",
        "model",
        "local_bsz",
        "global_bsz",
        "deadline",
        "num_iteration",
    ];

    /// The optional fields ([`ColumnMap::FIELDS`] after the four required ones).
    pub fn optional_fields() -> &'static [&'static str] {
        &Self::FIELDS[4..]
    }

    /// The file column for a field.
    pub fn column<'a>(&'a self, field: &'a str) -> &'a str {
        self.map.get(field).map_or(field, String::as_str)
    }

    /// True when no field has been mapped (every column has its field's name).
    pub fn is_default(&self) -> bool {
        self.explicit.is_empty()
    }

    /// Maps `field` to the file column `column`.
    ///
    /// # Errors
    /// A message naming an unknown field, a field mapped twice, or a column
    /// given to two fields.
    pub fn set(&mut self, field: &str, column: &str) -> Result<(), String> {
        let column = column.trim();
        if !Self::FIELDS.contains(&field) {
            return Err(format!("unknown jobs-csv field `{field}`; the fields are {}", Self::FIELDS.join(", ")));
        }
        if column.is_empty() {
            return Err(format!("field `{field}` is mapped to an empty column name"));
        }
        if self.explicit.iter().any(|f| f == field) {
            return Err(format!("field `{field}` is mapped twice"));
        }
        if let Some((other, _)) = self.map.iter().find(|(f, c)| f.as_str() != field && c.as_str() == column)
            && self.explicit.iter().any(|f| f == other)
        {
            return Err(format!("column `{column}` is mapped to both `{other}` and `{field}`"));
        }
        self.map.insert(field.to_string(), column.to_string());
        self.explicit.push(field.to_string());
        Ok(())
    }

    /// Parses `field=column,field=column` (as given to `--columns`).
    ///
    /// # Errors
    /// A message naming the malformed pair or unknown field.
    pub fn parse_pairs(&mut self, spec: &str) -> Result<(), String> {
        for pair in spec.split(',').filter(|p| !p.trim().is_empty()) {
            let (f, c) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not of the form field=column (e.g. submit_time=arrival)"))?;
            self.set(f.trim(), c)?;
        }
        Ok(())
    }

    /// Reads a TOML file with a `[columns]` table of `field = "column"` pairs.
    ///
    /// # Errors
    /// A message naming the file and the bad key or value.
    pub fn load_toml(&mut self, path: &Path) -> Result<(), String> {
        let text = crate::io::read_text(path).map_err(|e| e.to_string())?;
        let value: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let cols = value.get("columns").and_then(|v| v.as_table()).ok_or_else(|| {
            format!("{}: no [columns] table (e.g. [columns] submit_time = \"arrival\")", path.display())
        })?;
        for (k, v) in cols {
            let c = v.as_str().ok_or_else(|| format!("{}: columns.{k} must be a string", path.display()))?;
            self.set(k, c).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// The format a header line belongs to, if any.
pub(crate) fn detect(header: &str, columns: &ColumnMap) -> Option<TraceFormat> {
    let rec = csv::StringRecord::from(header.split(',').collect::<Vec<_>>());
    let h = Header::new(&rec);
    let has = |n: &str| h.find(&[n]).is_some();
    if has("arrival time (sec)") && has("shape") && has("size") && has("duration (sec)") {
        Some(TraceFormat::PhillyRfold)
    } else if has("timestamp") && has("num_gpus") && has("duration") {
        Some(TraceFormat::PhillyPollux)
    } else if has("num_gpu") && has("gpu_milli") {
        // Also the time-less `multigpuNN` lists, so the reader can say what is missing.
        Some(TraceFormat::AlibabaOpenb)
    } else if has("application") && has("num_replicas") && has("batch_size") && has("time") {
        Some(TraceFormat::ElasticWorkload)
    } else if has("job_id") && has("gpu_num") && has("submit_time") && has("state") && has("node_num") {
        Some(TraceFormat::Helios)
    } else if ["job_id", "submit_time", "gpu_num"].iter().all(|f| has(columns.column(f)))
        && (has(columns.column("duration")) || has(columns.column("num_iteration")))
    {
        Some(TraceFormat::JobsCsv)
    } else {
        None
    }
}

/// The columns a built-in format knows (those its header documents,
/// [`EXPECTED_HEADERS`], read or not), as the file spells them (`jobs-csv`'s
/// through `columns`); `None` for a registered format, whose reader is
/// another crate's.
fn known_columns(format: TraceFormat, columns: &ColumnMap) -> Option<Vec<String>> {
    let fixed: &[&str] = match format {
        TraceFormat::PhillyRfold => &["job id", "arrival time (sec)", "topology", "shape", "size", "duration (sec)"],
        TraceFormat::PhillyPollux => &["timestamp", "duration", "num_gpus", "gpu_time", "cluster"],
        TraceFormat::Helios => &[
            "job_id",
            "user",
            "vc",
            "gpu_num",
            "cpu_num",
            "node_num",
            "state",
            "submit_time",
            "start_time",
            "end_time",
            "duration",
            "queue",
        ],
        TraceFormat::AlibabaOpenb => &[
            "name",
            "cpu_milli",
            "memory_mib",
            "num_gpu",
            "gpu_milli",
            "gpu_spec",
            "qos",
            "pod_phase",
            "creation_time",
            "deletion_time",
            "scheduled_time",
        ],
        TraceFormat::ElasticWorkload => {
            &["name", "time", "application", "num_replicas", "batch_size", "ddl", "max_sample"]
        }
        TraceFormat::JobsCsv => {
            return Some(ColumnMap::FIELDS.iter().map(|f| columns.column(f).to_string()).collect());
        }
        TraceFormat::Registered(_) | TraceFormat::Auto | TraceFormat::Philly => return None,
    };
    Some(fixed.iter().map(|c| c.to_string()).collect())
}

/// Edit distance between two names, ASCII case ignored: the fewest
/// insertions, deletions, substitutions and swaps of two adjacent characters
/// (optimal string alignment), so that `modle` is one edit from `model`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, v) in d[0].iter_mut().enumerate() {
        *v = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let sub = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + sub);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The header's columns that `format` does not know, in file order (empty
/// names left out), for a note; `header` is the header line's text and
/// 1-based line.
///
/// # Errors
/// A column one edit away ([`edit_distance`]) from a known column the header
/// lacks: a misspelling, which would otherwise be ignored silently (a
/// `modle` column leaves every job without its model). The error names
/// the line, the column and the known one.
pub(crate) fn ignored_columns(
    file: &Path,
    (line, header): (u64, &str),
    format: TraceFormat,
    columns: &ColumnMap,
) -> Result<Vec<String>, TraceError> {
    let Some(known) = known_columns(format, columns) else { return Ok(Vec::new()) };
    let rec = csv::StringRecord::from(header.split(',').collect::<Vec<_>>());
    let h = Header::at_line(&rec, line);
    let is_known = |n: &str| known.iter().any(|k| k.eq_ignore_ascii_case(n));
    let mut ignored = Vec::new();
    for name in h.names.iter().filter(|n| !n.is_empty() && !is_known(n)) {
        if let Some(meant) = known.iter().find(|k| h.find(&[k.as_str()]).is_none() && edit_distance(name, k) == 1) {
            let how = if format == TraceFormat::JobsCsv {
                format!("rename the column, or map it: --columns {meant}={name}")
            } else {
                "rename the column".to_string()
            };
            return Err(TraceError::Field {
                file: file.to_path_buf(),
                line,
                column: name.clone(),
                message: format!(
                    "not a column of the {} format; did you mean `{meant}`? ({how}; the format's columns are {})",
                    format.name(),
                    known.join(", ")
                ),
            });
        }
        ignored.push(name.clone());
    }
    Ok(ignored)
}

/// Reads `bytes` (the content of `file`) as `format`, handing each
/// malformed row to `policy` (a registered format's reader is another
/// crate's: its errors, and the bounds checked on its records, stop the
/// read whatever the policy).
pub(crate) fn read(
    file: &Path,
    bytes: &[u8],
    format: TraceFormat,
    columns: &ColumnMap,
    policy: &RowPolicy,
) -> Result<(Vec<TraceRecord>, Option<String>), TraceError> {
    match format {
        TraceFormat::PhillyRfold => read_rfold(file, bytes, policy).map(|r| (r, None)),
        TraceFormat::PhillyPollux => read_wallclock(file, bytes, WallClock::Pollux, policy),
        TraceFormat::Helios => read_wallclock(file, bytes, WallClock::Helios, policy),
        TraceFormat::JobsCsv => read_jobs_csv(file, bytes, columns, policy).map(|r| (r, None)),
        TraceFormat::AlibabaOpenb => read_openb(file, bytes, policy).map(|r| (r, None)),
        TraceFormat::ElasticWorkload => read_elastic(file, bytes, policy).map(|r| (r, None)),
        TraceFormat::Registered(k) => {
            let records = k.read(file, bytes)?;
            check_registered(file, &records)?;
            Ok((records, None))
        }
        TraceFormat::Auto | TraceFormat::Philly => unreachable!("resolved by load_trace"),
    }
}

/// A registered format's records hold the bounds the built-in readers
/// enforce on every row: submit time and duration at most
/// [`crate::time::MAX_SECS`] (so that every sum of times stays exact).
/// The reader is the outside crate's code; without this check an overflowed
/// time would reach the engine and give a wrong schedule silently.
fn check_registered(file: &Path, records: &[TraceRecord]) -> Result<(), TraceError> {
    let max_ms = (MAX_SECS * 1000.0) as u64;
    for r in records {
        for (column, ms) in [("submit time", r.submit_ms), ("duration", r.duration_ms)] {
            if ms > max_ms {
                return Err(TraceError::Field {
                    file: file.to_path_buf(),
                    line: r.line,
                    column: column.to_string(),
                    message: format!(
                        "job `{}`: {ms} ms is out of range (at most {:e} s, about 3,170 years)",
                        r.job_id, MAX_SECS
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Lines in the file: an upper bound on its data rows, to size vectors once.
fn line_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count() + 1
}

/// The rare fields of a row out of line, or `None` when it has none.
fn extra(e: JobExtra) -> Option<Box<JobExtra>> {
    (e != JobExtra::default()).then(|| Box::new(e))
}

fn require_all(header: &Header, file: &Path, names: &[&str]) -> Result<Vec<usize>, TraceError> {
    names.iter().map(|n| header.require(file, n)).collect()
}

fn read_rfold(file: &Path, bytes: &[u8], policy: &RowPolicy) -> Result<Vec<TraceRecord>, TraceError> {
    let cols = |header: &Header| {
        require_all(header, file, &["job id", "arrival time (sec)", "shape", "size", "duration (sec)"])
    };
    // One shared copy per distinct shape (a handful in a whole trace): each
    // part of the file read keeps the shapes it met by their text, and asks
    // the file's table only for a text it has not met.
    let shapes: std::sync::Mutex<std::collections::HashMap<Vec<u32>, Arc<[u32]>>> = Default::default();
    type Seen = std::collections::HashMap<
        compact_str::CompactString,
        (Arc<[u32]>, u32),
        std::hash::BuildHasherDefault<super::Fnv>,
    >;
    let seen = Seen::default;
    map_rows(file, bytes, policy, cols, seen, |c, seen, row| {
        let gpus = row.count(c[3])?;
        let text = row.str(c[2]);
        let (shape, sum) = match seen.get(text) {
            Some(known) => known.clone(),
            None => {
                let shape: Vec<u32> = text
                    .split('+')
                    .map(|p| p.trim().parse::<u32>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| row.err(c[2], format!("`{text}` is not GPUs per server like `2+2+2+2`")))?;
                if shape.contains(&0) {
                    return Err(row.err(c[2], format!("shape `{text}` has a server with 0 GPUs")));
                }
                let Some(sum) = shape.iter().try_fold(0u32, |a, &b| a.checked_add(b)) else {
                    return Err(row.err(c[2], format!("shape `{text}` does not add up to size {gpus}")));
                };
                let mut shapes = shapes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let shape = match shapes.get(shape.as_slice()) {
                    Some(s) => Arc::clone(s),
                    None => {
                        let s: Arc<[u32]> = shape.into();
                        shapes.insert(s.to_vec(), Arc::clone(&s));
                        s
                    }
                };
                seen.insert(text.into(), (Arc::clone(&shape), sum));
                (shape, sum)
            }
        };
        if sum != gpus {
            return Err(row.err(c[2], format!("shape `{text}` does not add up to size {gpus}")));
        }
        Ok(TraceRecord {
            shape: Some(shape),
            line: row.line,
            ..TraceRecord::new(row.text(c[0], "job id")?, row.time_ms(c[1])?, row.duration_ms(c[4])?, gpus)
        })
    })
}

#[derive(Clone, Copy)]
enum WallClock {
    Pollux,
    Helios,
}

/// Wall-clock formats: times become seconds since the earliest submission in
/// the file (the origin), which is returned as text.
fn read_wallclock(
    file: &Path,
    bytes: &[u8],
    kind: WallClock,
    policy: &RowPolicy,
) -> Result<(Vec<TraceRecord>, Option<String>), TraceError> {
    let mut rows: Vec<(i64, TraceRecord)> = Vec::with_capacity(line_count(bytes));
    let mut cols: Option<(Vec<usize>, Option<usize>, Option<usize>)> = None;
    let mut submit_name = String::new();
    // Data rows met so far: a Pollux row's job id is its index among the
    // data rows of the right number of fields (those with a malformed
    // field, left out under `Skip`, included, so that an id names the same
    // row whatever the policy).
    let mut index = 0usize;
    for_each_row(file, bytes, policy, |header, row| {
        index += 1;
        if cols.is_none() {
            cols = Some(match kind {
                // timestamp, duration, num_gpus; VC in `cluster`; no job id (row index).
                WallClock::Pollux => (
                    require_all(header, file, &["timestamp", "duration", "num_gpus"])?,
                    header.find(&["cluster"]),
                    None,
                ),
                WallClock::Helios => (
                    require_all(header, file, &["submit_time", "duration", "gpu_num", "job_id"])?,
                    header.find(&["vc"]),
                    header.find(&["user"]),
                ),
            });
        }
        let (c, vc, user) = cols.as_ref().expect("set above");
        if submit_name.is_empty() {
            submit_name = header.names[c[0]].clone();
        }
        let submit = row.datetime(c[0])?;
        let job_id = match kind {
            WallClock::Pollux => compact_str::CompactString::from((index - 1).to_string()),
            WallClock::Helios => row.text(c[3], "job id")?,
        };
        rows.push((
            submit,
            TraceRecord {
                line: row.line,
                extra: extra(JobExtra { vc: row.opt(*vc), user: row.opt(*user), ..JobExtra::default() }),
                ..TraceRecord::new(job_id, 0, row.duration_ms(c[1])?, row.count(c[2])?)
            },
        ));
        Ok(())
    })?;
    // Left out under `Skip`, a repeated job id must not set the origin: the
    // rows kept are timed as in a file without it. (Under `Fail` the
    // loader's check names the first repeat.)
    if policy.skips() && matches!(kind, WallClock::Helios) {
        super::retain_first_ids(file, &mut rows, |(_, r)| r, TraceFormat::Helios, policy)?;
    }
    let origin = rows.iter().map(|r| r.0).min();
    let origin_text = origin
        .and_then(|o| chrono::DateTime::from_timestamp(o, 0))
        .map(|t| t.naive_utc().format("%Y-%m-%d %H:%M:%S").to_string());
    let o = origin.unwrap_or(0);
    // Submissions are held to the limit of every other format's times
    // (MAX_SECS from the origin), which keeps sums of times exact.
    let mut records = Vec::with_capacity(rows.len());
    for (t, mut r) in rows {
        let secs = (t - o) as u64;
        if secs as f64 > MAX_SECS {
            policy.on_error(TraceError::Field {
                    file: file.to_path_buf(),
                    line: r.line,
                    column: submit_name.clone(),
                    message: format!(
                        "{secs} s after the earliest submission ({}); at most {MAX_SECS:e} s (about 3,170 years) are supported",
                    origin_text.as_deref().unwrap_or("?")
                ),
            })?;
            continue;
        }
        r.submit_ms = secs * 1000;
        records.push(r);
    }
    Ok((records, origin_text))
}

fn read_jobs_csv(
    file: &Path,
    bytes: &[u8],
    columns: &ColumnMap,
    policy: &RowPolicy,
) -> Result<Vec<TraceRecord>, TraceError> {
    let cols = |header: &Header| {
        let opt: Vec<Option<usize>> =
            ColumnMap::optional_fields().iter().map(|f| header.find(&[columns.column(f)])).collect();
        // `duration` may be absent when `num_iteration` is there (every row
        // then needs its iterations); the required columns are checked in
        // field order, so the first missing one is named.
        let has_iterations = opt[6].is_some();
        let mut req = Vec::with_capacity(4);
        for f in ["job_id", "submit_time", "duration", "gpu_num"] {
            match header.find(&[columns.column(f)]) {
                Some(c) => req.push(Some(c)),
                None if f == "duration" && has_iterations => req.push(None),
                None => {
                    header.require(file, columns.column(f))?;
                }
            }
        }
        Ok((req, opt))
    };
    map_rows(
        file,
        bytes,
        policy,
        cols,
        || (),
        |(c, opt), (), row| {
            // The optional columns, in `ColumnMap::FIELDS` order.
            let [vc, user, model, local_bsz, global_bsz, deadline, num_iteration] =
                [opt[0], opt[1], opt[2], opt[3], opt[4], opt[5], opt[6]];
            let (id_col, submit_col, gpu_col) =
                (c[0].expect("required"), c[1].expect("required"), c[3].expect("required"));
            let present = |col: Option<usize>| col.filter(|&c| !row.str(c).is_empty());
            let gpus = row.count(gpu_col)?;
            let submit_ms = row.time_ms(submit_col)?;
            let local = present(local_bsz).map(|col| row.batch(col)).transpose()?;
            let global = present(global_bsz).map(|col| row.global_batch(col)).transpose()?;
            let local_bsz = match (local, global) {
                (l, None) => l,
                // A CPU job (skipped as zero_gpus) has no per-GPU batch.
                (None, Some(_)) if gpus == 0 => None,
                (None, Some(g)) => {
                    // Rounded down, as ElasticFlow's trainer splits a global batch.
                    let l = g / gpus;
                    if l == 0 {
                        let col = global_bsz.expect("present");
                        let msg =
                            format!("global batch {g} is smaller than the job's {gpus} GPUs (under 1 sample per GPU)");
                        return Err(row.err(col, msg));
                    }
                    Some(l)
                }
                (Some(l), Some(g)) => {
                    if u64::from(l) * u64::from(gpus) != u64::from(g) {
                        let col = global_bsz.expect("present");
                        let msg = format!(
                            "global batch {g} disagrees with local_bsz {l} × {gpus} GPUs = {}; give one of the two",
                            u64::from(l) * u64::from(gpus)
                        );
                        return Err(row.err(col, msg));
                    }
                    Some(l)
                }
            };
            let deadline_ms = present(deadline).map(|col| row.time_ms(col)).transpose()?;
            let job_id = row.text(id_col, "job id")?;
            // A row with iterations is a work-defined job (ElasticFlow's
            // traces): its work is its iterations at its global batch, and
            // its application the model named. Its trace duration, if any,
            // is read (and checked) but not used: `duration_ms` keeps it for
            // the run's note, and the engine sets the job's duration from its
            // progress model.
            let iterations = present(num_iteration).map(|col| iterations(row, col)).transpose()?;
            let duration_col = c[2];
            let duration_ms = match (duration_col, iterations) {
                (Some(col), Some(_)) if row.str(col).is_empty() => 0,
                (Some(col), None) if row.str(col).is_empty() && num_iteration.is_some() => {
                    let msg = format!(
                        "empty, and so is `{}`: a row needs its duration or its iterations",
                        columns.column("num_iteration")
                    );
                    return Err(row.err(col, msg));
                }
                (Some(col), _) => row.duration_ms(col)?,
                (None, Some(_)) => 0,
                (None, None) => {
                    let col = num_iteration.expect("a file without `duration` has `num_iteration`");
                    let msg = format!(
                        "empty; without a `{}` column every row needs its iterations",
                        columns.column("duration")
                    );
                    return Err(row.err(col, msg));
                }
            };
            let (model, local_bsz, elastic) = match iterations {
                None => (row.opt(model), local_bsz, None),
                Some(work) => {
                    let app = match present(model) {
                        Some(col) => row.str(col).to_string(),
                        None => {
                            let msg = "a row with num_iteration needs its model (the application it trains)";
                            return Err(match model {
                                Some(col) => row.err(col, msg.into()),
                                None => row.err(
                                    num_iteration.expect("present"),
                                    format!("{msg}; no `{}` column", columns.column("model")),
                                ),
                            });
                        }
                    };
                    // Its tuned batch: the global batch (or per-GPU × GPUs).
                    let batch = match (global, local) {
                        (Some(g), _) => g,
                        (None, Some(l)) => l.saturating_mul(gpus),
                        (None, None) => {
                            let msg = format!(
                                "a row with num_iteration needs its global batch (`{}`, or `{}` × GPUs)",
                                columns.column("global_bsz"),
                                columns.column("local_bsz")
                            );
                            return Err(row.err(num_iteration.expect("present"), msg));
                        }
                    };
                    let spec = crate::job::ElasticSpec {
                        app,
                        tuned_gpus: gpus,
                        tuned_bsz: batch,
                        adaptive: false,
                        work: Some(work),
                        sample_budget: None,
                    };
                    // The model names the application (ElasticFlow's name),
                    // not a profile-database model; the batch is the job's
                    // (no per-GPU batch, memory figure or rate-model lookup).
                    (None, None, Some(spec))
                }
            };
            Ok(TraceRecord {
                job_id,
                submit_ms,
                duration_ms,
                gpus,
                skip: None,
                line: row.line,
                shape: None,
                extra: extra(JobExtra {
                    vc: row.opt(vc),
                    user: row.opt(user),
                    model,
                    local_bsz,
                    deadline_ms,
                    elastic,
                    ..JobExtra::default()
                }),
            })
        },
    )
}

/// A row's `num_iteration`: a finite, positive number of iterations.
fn iterations(row: &crate::io::csvrows::Row<'_>, col: usize) -> Result<f64, TraceError> {
    let s = row.str(col);
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(row.err(col, format!("`{s}` is not a positive number of iterations"))),
    }
}

/// The Alibaba PAI 2023 pod list (`openb_pod_list_*.csv`; FGD, Weng et al.,
/// ATC'23). Times are whole seconds from the trace origin. One record per pod:
///
/// - submit = `creation_time`; run time = `deletion_time − scheduled_time` (a
///   pod's recorded lifetime once placed; 34 pods of the default list end at
///   the collection end, so theirs is cut short);
/// - GPUs = `num_gpu`; a 1-GPU pod with `gpu_milli` below 1,000 asks for that
///   share of one GPU (`gpu_milli`, milli-GPU); other values of `gpu_milli`
///   (1,000, or any value on pods of 0 or several GPUs) are whole GPUs;
/// - `gpu_spec` (GPU types joined by `|`; empty = any) becomes the allowed
///   GPU types, sorted and without repeats;
/// - a pod with an empty `scheduled_time` was never placed (deleted while
///   pending): it has no run time, so it is marked `never_scheduled` and
///   skipped. Replaying it would need an invented duration, and its
///   `deletion − creation` is time spent waiting, not running.
///
/// CPU-only pods are kept as 0-GPU records (skipped as `zero_gpus`).
/// `cpu_milli`, `memory_mib`, `qos` and `pod_phase` are not read.
fn read_openb(file: &Path, bytes: &[u8], policy: &RowPolicy) -> Result<Vec<TraceRecord>, TraceError> {
    let mut out = Vec::with_capacity(line_count(bytes));
    let mut cols: Option<(Vec<usize>, Option<usize>)> = None;
    for_each_row(file, bytes, policy, |header, row| {
        if cols.is_none() {
            let need = ["name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"];
            if let Some(missing) = need.iter().find(|n| header.find(&[n]).is_none()) {
                return Err(TraceError::Format {
                    file: file.to_path_buf(),
                    message: format!(
                        "no column `{missing}` in the header ({}); an alibaba-openb pod list needs {} \
                         (the multigpuNN lists have no times and cannot be replayed)",
                        header.names.join(", "),
                        need.join(", ")
                    ),
                });
            }
            cols = Some((require_all(header, file, &need)?, header.find(&["gpu_spec"])));
        }
        let (c, spec_col) = cols.as_ref().expect("set above");
        let gpus = row.count(c[1])?;
        let milli_text = row.str(c[2]);
        let milli = match milli_text.parse::<u32>() {
            Ok(m) if m <= 1000 => m,
            _ => return Err(row.err(c[2], format!("`{milli_text}` is not a whole number of milli-GPU from 0 to 1000"))),
        };
        if gpus == 1 && milli == 0 {
            return Err(row.err(c[2], "a 1-GPU pod asks for 0 milli-GPU; expected 1 to 1000".into()));
        }
        let submit_ms = row.time_ms(c[3])?;
        let deletion_ms = row.time_ms(c[4])?;
        let (duration_ms, skip) = if row.str(c[5]).is_empty() {
            (0, Some(SkipReason::NeverScheduled))
        } else {
            let scheduled_ms = row.time_ms(c[5])?;
            if scheduled_ms < submit_ms {
                let msg = format!("scheduled at {} s, before its creation at {} s", row.str(c[5]), row.str(c[3]));
                return Err(row.err(c[5], msg));
            }
            // A deletion before scheduling gives 0, skipped as nonpositive_duration.
            (deletion_ms.saturating_sub(scheduled_ms), None)
        };
        let gpu_types = spec_col.map(|col| row.str(col)).filter(|t| !t.is_empty()).map(|t| {
            let mut v: Vec<String> =
                t.split('|').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
            v.sort();
            v.dedup();
            v
        });
        if let (Some(col), Some(v)) = (spec_col, &gpu_types)
            && v.is_empty()
        {
            return Err(row.err(*col, format!("`{}` names no GPU type", row.str(*col))));
        }
        out.push(TraceRecord {
            extra: extra(JobExtra {
                gpu_milli: (gpus == 1 && milli < 1000).then_some(milli),
                gpu_types,
                ..JobExtra::default()
            }),
            skip,
            line: row.line,
            ..TraceRecord::new(row.text(c[0], "pod name")?, submit_ms, duration_ms, gpus)
        });
        Ok(())
    })?;
    Ok(out)
}

/// The elastic workloads of the Pollux and Sia artifacts
/// ([`TraceFormat::ElasticWorkload`]): one work-defined job per row, with no
/// duration (the engine runs it until its progress model's target); its
/// GPUs are `num_replicas`, the count a non-elastic policy gives it.
///
/// Two optional columns, those ElasticFlow's adapted copy of the Pollux
/// simulator reads (pkusys/ElasticFlow at 04a0109a,
/// `pollux/pollux_simulator/simulator.py`, `Cluster.__init__`): `ddl`, the
/// job's absolute deadline, s on the clock of `time` (the job's
/// `deadline_ms`, as `jobs-csv`'s `deadline`), and `max_sample`, its sample
/// budget ([`crate::job::ElasticSpec::sample_budget`]: it also ends when it
/// has processed that many samples), a whole number of samples, at least 1.
/// An empty field: no deadline, no budget. No row is skipped.
fn read_elastic(file: &Path, bytes: &[u8], policy: &RowPolicy) -> Result<Vec<TraceRecord>, TraceError> {
    let cols = |header: &Header| {
        let mut c = require_all(header, file, &["name", "time", "application", "num_replicas", "batch_size"])?;
        // Optional: `usize::MAX` when absent.
        c.extend(["ddl", "max_sample"].iter().map(|n| header.find(&[n]).unwrap_or(usize::MAX)));
        Ok(c)
    };
    map_rows(
        file,
        bytes,
        policy,
        cols,
        || (),
        |c, _, row| {
            let present = |col: usize| (col != usize::MAX && !row.str(col).is_empty()).then_some(col);
            let gpus = row.count(c[3])?;
            if gpus == 0 {
                return Err(row.err(c[3], "a work-defined job needs at least 1 GPU, got 0".into()));
            }
            let batch = row.count(c[4])?;
            if batch == 0 {
                return Err(row.err(c[4], "the total batch must be at least 1 sample, got 0".into()));
            }
            let app = row.str(c[2]).trim();
            if app.is_empty() {
                return Err(row.err(c[2], "no application named".into()));
            }
            let deadline_ms = present(c[5]).map(|col| row.time_ms(col)).transpose()?;
            let sample_budget = present(c[6]).map(|col| samples(row, col)).transpose()?;
            let elastic = crate::job::ElasticSpec {
                app: app.to_string(),
                tuned_gpus: gpus,
                tuned_bsz: batch,
                adaptive: true,
                work: None,
                sample_budget,
            };
            Ok(TraceRecord {
                extra: extra(JobExtra { elastic: Some(elastic), deadline_ms, ..JobExtra::default() }),
                line: row.line,
                ..TraceRecord::new(row.text(c[0], "name")?, row.time_ms(c[1])?, 0, gpus)
            })
        },
    )
}

/// A sample budget: a whole number of samples, at least 1 (`1200` or
/// `1200.0`, as pandas writes a column with gaps), at most 2^53 (exact in
/// the engine's f64 count).
fn samples(row: &crate::io::csvrows::Row<'_>, col: usize) -> Result<u64, TraceError> {
    const MAX: u64 = 1 << 53;
    let s = row.str(col);
    let v = match s.parse::<u64>() {
        Ok(v) => Some(v),
        Err(_) => s
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && v.fract() == 0.0 && *v >= 0.0 && *v <= MAX as f64)
            .map(|v| v as u64),
    };
    match v {
        Some(v) if (1..=MAX).contains(&v) => Ok(v),
        _ => Err(row
            .err(col, format!("`{s}` is not a whole number of samples from 1 to 2^53 (leave it empty for no budget)"))),
    }
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_one_edit_of_each_kind() {
        // A swap, a deletion, an insertion, a substitution; case ignored.
        assert_eq!(edit_distance("modle", "model"), 1);
        assert_eq!(edit_distance("modl", "model"), 1);
        assert_eq!(edit_distance("models", "model"), 1);
        assert_eq!(edit_distance("Mode1", "model"), 1);
        assert_eq!(edit_distance("MODEL", "model"), 0);
        // Two edits (a swap and a substitution); four insertions.
        assert_eq!(edit_distance("mdoal", "model"), 2);
        assert_eq!(edit_distance("gpu", "gpu_num"), 4);
    }
}
