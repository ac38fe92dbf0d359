//! Comparing a run's per-job schedule with a reference schedule (another
//! simulator's output or a cluster log): which jobs match, by how much the rest
//! differ.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::quantile_sorted;
use crate::error::TraceError;

/// One job's times, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Times {
    submit: Option<f64>,
    /// The first start (`first_start_s` where the file has it, else the start).
    start: Option<f64>,
    end: Option<f64>,
    /// The start of the last run (`start_s`), kept only from a file that
    /// also has `first_start_s`.
    last_start: Option<f64>,
}

/// Start-time differences (run − reference) over jobs started in both, seconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffStats {
    /// Smallest difference.
    pub min_s: f64,
    /// 5th percentile (type 7).
    pub p5_s: f64,
    /// Median.
    pub p50_s: f64,
    /// 95th percentile.
    pub p95_s: f64,
    /// Largest difference.
    pub max_s: f64,
    /// Mean of absolute differences.
    pub mean_abs_s: f64,
}

/// The result of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareReport {
    /// Jobs in the reference.
    pub reference_jobs: u64,
    /// Jobs in the run.
    pub run_jobs: u64,
    /// Jobs present in both.
    pub joined: u64,
    /// Joined jobs whose start and end agree to the millisecond.
    pub exact: u64,
    /// Reference jobs absent from the run.
    pub missing_in_run: u64,
    /// Run jobs absent from the reference.
    pub missing_in_reference: u64,
    /// Start-time differences over joined jobs started in both.
    pub start_diff: DiffStats,
    /// Joined jobs with submit, start and end known in both: the jobs the
    /// means below are taken over.
    pub finished_in_both: u64,
    /// Mean JCT (end − submit) of the run, s, over joined jobs finished in both.
    pub jct_mean_run_s: f64,
    /// Mean JCT of the reference, same jobs.
    pub jct_mean_reference_s: f64,
    /// (run − reference) / reference of mean JCT.
    pub jct_mean_rel_diff: f64,
    /// Mean queueing delay (start − submit) of the run, s, same jobs.
    pub queue_delay_mean_run_s: f64,
    /// Mean queueing delay of the reference.
    pub queue_delay_mean_reference_s: f64,
    /// (run − reference) / reference of mean queueing delay (0 when both are 0).
    pub queue_delay_mean_rel_diff: f64,
    /// Up to 10 differing job ids, in reference order, for a first look.
    pub first_differences: Vec<String>,
}

impl CompareReport {
    /// True when every reference job is in the run with identical times and the
    /// run has no extra jobs.
    pub fn identical(&self) -> bool {
        self.exact == self.reference_jobs && self.missing_in_run == 0 && self.missing_in_reference == 0
    }
}

const ID: &[&str] = &["job_id", "jobid", "id", "job"];
const SUBMIT: &[&str] = &["submit_s", "submit_time", "submit", "submission_time"];
const START: &[&str] = &["start_s", "start_time", "start"];
/// A dlsched `jobs.csv`'s first start: its `start_s` is the start of a
/// preempted job's last run, while reference schedules (the Helios
/// simulator's `start_time`) give the first start.
const FIRST_START: &[&str] = &["first_start_s"];
const END: &[&str] = &["end_s", "end_time", "end", "finish_time"];

/// A file's job ids in file order, their times, and whether it has `first_start_s`.
type TimesFile = (Vec<String>, BTreeMap<String, Times>, bool);

/// Reads (job id → times) from a CSV with a job-id column and start/end columns
/// (names tried: `job_id`/`id`/`job`, `start_s`/`start_time`/`start`,
/// `end_s`/`end_time`/`end`, optional `submit_s`/`submit_time`/`submit`), in
/// seconds; an empty start or end means the job did not start or end. A
/// `first_start_s` column, where there is one, is the start compared (the
/// first start, as reference schedules give it); when both files have one,
/// their `start_s` (a preempted job's last start) must agree too. Returns
/// whether the file has `first_start_s`.
fn read_times(path: &Path) -> Result<TimesFile, TraceError> {
    let file = path.to_path_buf();
    let bytes = crate::io::read_csv(path)?;
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(&bytes[..]);
    let headers = rdr.headers().map_err(|e| crate::io::csvrows::csv_error_as_named(path, &e))?.clone();
    let find = |names: &[&str]| headers.iter().position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)));
    let need = |names: &[&str], what: &str| {
        find(names).ok_or_else(|| TraceError::Format {
            file: file.clone(),
            message: format!(
                "no {what} column (tried {}); header is {}",
                names.join(", "),
                headers.iter().collect::<Vec<_>>().join(",")
            ),
        })
    };
    let first = find(FIRST_START);
    let last = need(START, "start time")?;
    let start = first.unwrap_or(last);
    let (id, end) = (need(ID, "job id")?, need(END, "end time")?);
    let submit = find(SUBMIT);
    let mut order = Vec::new();
    let mut map = BTreeMap::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| crate::io::csvrows::csv_error_as_named(path, &e))?;
        let line = rec.position().map_or(0, |p| p.line());
        let num = |col: usize| -> Result<Option<f64>, TraceError> {
            let s = rec.get(col).unwrap_or("");
            if s.is_empty() {
                return Ok(None);
            }
            s.parse::<f64>().ok().filter(|v| v.is_finite()).map(Some).ok_or_else(|| TraceError::Field {
                file: file.clone(),
                line,
                column: headers.get(col).unwrap_or("").to_string(),
                message: format!("`{s}` is not a number of seconds"),
            })
        };
        let t = Times {
            submit: submit.map(num).transpose()?.flatten(),
            start: num(start)?,
            end: num(end)?,
            last_start: if first.is_some() { num(last)? } else { None },
        };
        let key = rec.get(id).unwrap_or("").to_string();
        if map.insert(key.clone(), t).is_some() {
            return Err(TraceError::Field {
                file,
                line,
                column: headers.get(id).unwrap_or("").into(),
                message: format!("job id `{key}` appears twice"),
            });
        }
        order.push(key);
    }
    Ok((order, map, first.is_some()))
}

fn same(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => (x - y).abs() < 0.0005,
        (None, None) => true,
        _ => false,
    }
}

/// Compares a run's `jobs.csv` with a reference CSV.
///
/// # Errors
/// [`TraceError`] if either file is unreadable or malformed, naming file, line and column.
pub fn compare_files(run_jobs: &Path, reference: &Path) -> Result<CompareReport, TraceError> {
    let (_, run, run_first) = read_times(run_jobs)?;
    let (ref_order, refs, ref_first) = read_times(reference)?;
    let both_first = run_first && ref_first;
    let mut diffs = Vec::new();
    let (mut exact, mut joined, mut missing_in_run) = (0u64, 0u64, 0u64);
    let (mut jct_run, mut jct_ref, mut q_run, mut q_ref, mut n_both) = (0.0, 0.0, 0.0, 0.0, 0u64);
    let mut first = Vec::new();
    for id in &ref_order {
        let r = refs[id];
        let Some(x) = run.get(id) else {
            missing_in_run += 1;
            if first.len() < 10 {
                first.push(id.clone());
            }
            continue;
        };
        joined += 1;
        if same(x.start, r.start) && same(x.end, r.end) && (!both_first || same(x.last_start, r.last_start)) {
            exact += 1;
        } else if first.len() < 10 {
            first.push(id.clone());
        }
        if let (Some(a), Some(b)) = (x.start, r.start) {
            diffs.push(a - b);
        }
        let submit_ref = r.submit.or(x.submit);
        let submit_run = x.submit.or(r.submit);
        if let (Some(sr), Some(sx), Some(ar), Some(ax), Some(er), Some(ex)) =
            (submit_ref, submit_run, r.start, x.start, r.end, x.end)
        {
            jct_ref += er - sr;
            jct_run += ex - sx;
            q_ref += ar - sr;
            q_run += ax - sx;
            n_both += 1;
        }
    }
    let missing_in_reference = run.keys().filter(|k| !refs.contains_key(*k)).count() as u64;
    let mut sorted = diffs.clone();
    sorted.sort_by(f64::total_cmp);
    let n = n_both.max(1) as f64;
    let rel = |a: f64, b: f64| {
        if b == 0.0 { if a == 0.0 { 0.0 } else { f64::INFINITY } } else { (a - b) / b }
    };
    Ok(CompareReport {
        reference_jobs: ref_order.len() as u64,
        run_jobs: run.len() as u64,
        joined,
        exact,
        missing_in_run,
        missing_in_reference,
        start_diff: DiffStats {
            min_s: sorted.first().copied().unwrap_or(0.0),
            p5_s: quantile_sorted(&sorted, 0.05),
            p50_s: quantile_sorted(&sorted, 0.5),
            p95_s: quantile_sorted(&sorted, 0.95),
            max_s: sorted.last().copied().unwrap_or(0.0),
            mean_abs_s: if diffs.is_empty() {
                0.0
            } else {
                diffs.iter().map(|d| d.abs()).sum::<f64>() / diffs.len() as f64
            },
        },
        finished_in_both: n_both,
        jct_mean_run_s: jct_run / n,
        jct_mean_reference_s: jct_ref / n,
        jct_mean_rel_diff: rel(jct_run, jct_ref),
        queue_delay_mean_run_s: q_run / n,
        queue_delay_mean_reference_s: q_ref / n,
        queue_delay_mean_rel_diff: rel(q_run, q_ref),
        first_differences: first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_exact_and_differing_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("jobs.csv");
        let reference = dir.path().join("ref.csv");
        std::fs::write(&run, "job_id,submit_s,start_s,end_s\na,0,0,10\nb,0,5,15\nc,1,1,\n").unwrap();
        std::fs::write(&reference, "job_id,submit_s,start_s,end_s\na,0,0,10\nb,0,3,13\nd,2,2,4\n").unwrap();
        let r = compare_files(&run, &reference).unwrap();
        assert_eq!((r.reference_jobs, r.run_jobs, r.joined, r.exact), (3, 3, 2, 1));
        assert_eq!((r.missing_in_run, r.missing_in_reference), (1, 1));
        // start differences: a 0, b +2
        assert_eq!((r.start_diff.min_s, r.start_diff.max_s, r.start_diff.mean_abs_s), (0.0, 2.0, 1.0));
        // JCT over a and b: run (10 + 15) / 2 = 12.5, reference (10 + 13) / 2 = 11.5
        assert_eq!((r.jct_mean_run_s, r.jct_mean_reference_s), (12.5, 11.5));
        assert!((r.jct_mean_rel_diff - 1.0 / 11.5).abs() < 1e-12);
        assert_eq!(r.first_differences, vec!["b", "d"]);
        assert!(!r.identical());
    }

    #[test]
    fn a_preempted_job_is_compared_by_its_first_start() {
        // Job a ran 0-5, was preempted, resumed at 8 and ended at 13: its
        // last run started at 8, its first start was 0, as the reference says.
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("jobs.csv");
        let reference = dir.path().join("ref.csv");
        std::fs::write(&run, "job_id,submit_s,start_s,end_s,first_start_s\na,0,8,13,0\nb,1,2,4,2\n").unwrap();
        std::fs::write(&reference, "job_id,submit_s,start_s,end_s\na,0,0,13\nb,1,2,4\n").unwrap();
        let r = compare_files(&run, &reference).unwrap();
        assert!(r.identical(), "{r:?}");
        // Queueing delay over both: (0 + 1) / 2 = 0.5 s in each.
        assert_eq!((r.queue_delay_mean_run_s, r.queue_delay_mean_reference_s), (0.5, 0.5));
    }
}
