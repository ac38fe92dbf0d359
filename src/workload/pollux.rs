//! Pollux-style job loads: work-defined jobs drawn from a Philly job list by
//! the rules of the Pollux artifact's workload generator (`--workload pollux`).
//!
//! The Pollux artifact (petuum/adaptdl, branch `osdi21-artifact`,
//! `simulator/workload.py`) built its eight evaluation workloads and their
//! relative job loads 0.5x, 1.5x and 2.0x (`workloads-0.5/`, `-1.5/`,
//! `-2.0/`; the paper's Figure 8) with one generator: 160 jobs at 1.0x, and
//! 80, 240 and 320 jobs over the same 8-hour window of the day starting at
//! hour 2. [`generate`] follows its rules on the same input, the Philly job
//! list of that artifact (`traces/philly.csv`: `timestamp, duration,
//! num_gpus, gpu_time, cluster`):
//!
//! 1. keep the rows with `duration` >= 60 s and `gpu_time` < 1,000 GPU-hours
//!    (duplicate rows are kept, as pandas keeps them);
//! 2. shift every `timestamp` back by the start hour, and keep the rows whose
//!    shifted hour of the day is below the window's hours;
//! 3. draw `jobs` of these rows without replacement;
//! 4. per row drawn: arrival = the shifted time of day in seconds (hour ×
//!    3,600 + minute × 60 + second, whatever the date); the application by
//!    GPU time: below 1 GPU-hour `cifar10` or `ncf` (one of the two at
//!    random), below 10 `deepspeech2`, below 100 `yolov3`, else `imagenet`;
//!    the tuned (`num_replicas`, `batch_size`) drawn uniformly from the
//!    application's [`Application::configurations`]`(0.5, 0.8)` (the
//!    configurations whose scaling efficiency over one GPU is in (0.5, 0.8),
//!    the artifact's `get_configurations`); then half of the `deepspeech2`
//!    jobs, by a draw of their own, become `bert` jobs with a configuration
//!    drawn from `bert`'s;
//! 5. sort by arrival (stable: ties keep the order drawn) and name each job
//!    `{application}-{index}` in that order.
//!
//! Each job is the record an `elastic-workload` trace row gives
//! ([`crate::trace::TraceFormat::ElasticWorkload`]): its application trained
//! to the progress model's target, tuned to `num_replicas` GPUs and a total
//! batch of `batch_size`, adaptive, no duration. So everything downstream of
//! the workload is the same as for a replayed artifact workload.
//!
//! Same rules, our own draws: Python's `random.Random` and pandas' `sample`
//! cannot be reproduced bit for bit, so the draws come from dlsched's named
//! seeded streams ([`crate::rng`]): `pollux_workload.sample` (which rows),
//! `pollux_workload.jobs` (cifar10 or ncf, and each configuration; the
//! artifact's `rng`) and `pollux_workload.bert` (deepspeech2 or bert and
//! bert's configuration; the artifact's independent `rng2`). The artifact's
//! third stream only feeds a GPU count its output does not use, and is not
//! drawn. Seed `s` here is not the artifact's seed `s`: a workload of the
//! same size has the artifact's distribution of arrivals, applications and
//! configurations, not its jobs. The artifact's `--seed` defaults to 0 and
//! its `--start`, `--duration` and `--num-jobs` are [`PolluxWorkloadSpec`]'s
//! `start_hour`, `hours` and `jobs` (defaults 2, 8 and 160, the artifact's).

use std::path::{Path, PathBuf};

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, ConfigErrorKind, RunError, TraceError};
use crate::job::{ElasticSpec, JobExtra};
use crate::profile::pollux::{Application, PolluxApps, TunedConfig};
use crate::trace::TraceRecord;

/// The job count, window and start hour of a Pollux-style workload; the
/// defaults are the artifact's (`workload.py`: 160 jobs, 8 hours from hour 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolluxWorkloadSpec {
    /// Jobs drawn (the artifact's `--num-jobs`; its relative loads 0.5x,
    /// 1.0x, 1.5x and 2.0x are 80, 160, 240 and 320), at least 1.
    pub jobs: u32,
    /// The hour of the day the window starts at, 0 to 23 (`--start`).
    pub start_hour: u32,
    /// The window's length, whole hours, 1 to 24 (`--duration`): rows whose
    /// hour of the day, counted from `start_hour`, is below it are kept.
    pub hours: u32,
}

/// The artifact's job count at the relative job load 1.0x.
pub const DEFAULT_JOBS: u32 = 160;
/// The artifact's start hour.
pub const DEFAULT_START_HOUR: u32 = 2;
/// The artifact's window, hours.
pub const DEFAULT_HOURS: u32 = 8;

impl Default for PolluxWorkloadSpec {
    fn default() -> Self {
        PolluxWorkloadSpec { jobs: DEFAULT_JOBS, start_hour: DEFAULT_START_HOUR, hours: DEFAULT_HOURS }
    }
}

/// Shortest run time of a row kept, s (the artifact's filter).
pub const MIN_DURATION_S: f64 = 60.0;
/// GPU time of a row kept is below this, GPU-seconds (1,000 GPU-hours).
pub const MAX_GPU_TIME_S: f64 = 1000.0 * 3600.0;

/// The columns [`read_philly`] needs.
pub const COLUMNS: [&str; 3] = ["timestamp", "duration", "gpu_time"];

/// One row of a Philly job list as the generator reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhillyRow {
    /// 1-based line in the file.
    pub line: u64,
    /// Time of day of `timestamp`, s since midnight (0 to 86,399).
    pub time_of_day_s: u32,
    /// `duration`, s.
    pub duration_s: f64,
    /// `gpu_time`, GPU-seconds (duration × GPUs in the artifact's list).
    pub gpu_time_s: f64,
}

/// Reads the rows of a Philly job list in the Pollux artifact's columns
/// (`timestamp` as `YYYY-MM-DD HH:MM:SS`, `duration` s, `gpu_time`
/// GPU-seconds; other columns are not read), in file order. Blank lines
/// (the artifact's list ends with one) are skipped.
///
/// # Errors
/// [`TraceError`] naming the file (and line and column): unreadable, a
/// missing column, or a malformed value.
pub fn read_philly(file: &Path, bytes: &[u8]) -> Result<Vec<PhillyRow>, TraceError> {
    read_philly_with(file, bytes, crate::error::RowErrors::Fail).map(|(rows, _)| rows)
}

/// [`read_philly`] with the policy `errors` for malformed rows: the rows
/// read, and those left out under [`crate::error::RowErrors::Skip`] (by line).
///
/// # Errors
/// As [`read_philly`]; under `Skip`, only errors of the file as a whole.
pub fn read_philly_with(
    file: &Path,
    bytes: &[u8],
    errors: crate::error::RowErrors,
) -> Result<(Vec<PhillyRow>, Vec<crate::error::MalformedRow>), TraceError> {
    let policy = crate::io::csvrows::RowPolicy::new(errors);
    let cols = |h: &crate::io::csvrows::Header| {
        COLUMNS
            .iter()
            .map(|n| {
                h.find(&[n]).ok_or_else(|| TraceError::Format {
                    file: file.to_path_buf(),
                    message: format!(
                        "no column `{n}` in the header ({}){}: the pollux workload reads a Philly job list with the \
                         columns {} (the Pollux artifact's traces/philly.csv)",
                        h.names.join(", "),
                        h.on_line(),
                        COLUMNS.join(", ")
                    ),
                })
            })
            .collect::<Result<Vec<usize>, TraceError>>()
    };
    let rows = crate::io::csvrows::map_rows(
        file,
        bytes,
        &policy,
        cols,
        || (),
        |c, _, row| {
            let t = row.datetime(c[0])?;
            Ok(PhillyRow {
                line: row.line,
                time_of_day_s: t.rem_euclid(86_400) as u32,
                duration_s: row.secs(c[1])?,
                gpu_time_s: row.secs(c[2])?,
            })
        },
    )?;
    Ok((rows, policy.into_skipped()))
}

/// The application class of a job of `gpu_time_s` GPU-seconds: the
/// applications it may become (two: one is drawn).
pub fn gpu_time_class(gpu_time_s: f64) -> &'static [&'static str] {
    if gpu_time_s < 3600.0 {
        &["cifar10", "ncf"]
    } else if gpu_time_s < 10.0 * 3600.0 {
        &["deepspeech2"]
    } else if gpu_time_s < 100.0 * 3600.0 {
        &["yolov3"]
    } else {
        &["imagenet"]
    }
}

/// The rows the generator may draw, in file order, each with its arrival,
/// s (its time of day shifted back by `start_hour`): `duration` at least
/// [`MIN_DURATION_S`], `gpu_time` below [`MAX_GPU_TIME_S`], and a shifted
/// hour of the day below `hours`.
pub fn eligible(rows: &[PhillyRow], spec: &PolluxWorkloadSpec) -> Vec<(usize, u32)> {
    let shift = i64::from(spec.start_hour) * 3600;
    rows.iter()
        .enumerate()
        .filter(|(_, r)| r.duration_s >= MIN_DURATION_S && r.gpu_time_s < MAX_GPU_TIME_S)
        .filter_map(|(i, r)| {
            let t = (i64::from(r.time_of_day_s) - shift).rem_euclid(86_400) as u32;
            (t / 3600 < spec.hours).then_some((i, t))
        })
        .collect()
}

/// One generated job before it becomes a record.
struct Drawn {
    arrival_s: u32,
    app: &'static str,
    config: TunedConfig,
}

/// The jobs of a Pollux-style workload drawn from `rows` (the module doc
/// gives the rules), sorted by arrival, as `elastic-workload` records
/// (line 0: generated). `file` names the list in messages.
///
/// # Errors
/// [`RunError::Config`] when fewer rows pass the filters than `spec.jobs`
/// (key `jobs`), or an application is missing from `apps` or has no
/// configuration.
pub fn generate(
    file: &Path,
    rows: &[PhillyRow],
    spec: &PolluxWorkloadSpec,
    apps: &PolluxApps,
    seed: u64,
) -> Result<Vec<TraceRecord>, RunError> {
    let mut pool = eligible(rows, spec);
    let n = spec.jobs as usize;
    if pool.len() < n {
        return Err(ConfigError::new(
            ConfigErrorKind::InvalidValue,
            format!(
                "{}: the pollux workload asks for {n} jobs (`jobs`, --jobs), but only {} of the {} rows pass its \
                 filters (duration >= 60 s, GPU time < 1,000 GPU-hours, hour of the day from hour {} below {}); \
                 jobs are drawn without replacement: ask for at most {} or widen `hours`",
                file.display(),
                pool.len(),
                rows.len(),
                spec.start_hour,
                spec.hours,
                pool.len()
            ),
        )
        .with_key("jobs")
        .into());
    }
    // Which rows, in the order drawn: a partial Fisher-Yates shuffle.
    let mut sample = crate::rng::stream(seed, "pollux_workload.sample");
    for i in 0..n {
        let j = sample.gen_range(i..pool.len());
        pool.swap(i, j);
    }
    pool.truncate(n);
    let mut configs = Configs::new(apps);
    let mut draw = crate::rng::stream(seed, "pollux_workload.jobs");
    let mut bert = crate::rng::stream(seed, "pollux_workload.bert");
    let mut jobs = Vec::with_capacity(n);
    for &(i, arrival_s) in &pool {
        let class = gpu_time_class(rows[i].gpu_time_s);
        let app = if class.len() > 1 { class[draw.gen_range(0..class.len())] } else { class[0] };
        let choices = configs.of(app)?;
        let config = choices[draw.gen_range(0..choices.len())];
        let mut job = Drawn { arrival_s, app, config };
        if app == "deepspeech2" && bert.gen_bool(0.5) {
            let choices = configs.of("bert")?;
            job = Drawn { app: "bert", config: choices[bert.gen_range(0..choices.len())], ..job };
        }
        jobs.push(job);
    }
    // Stable: jobs arriving in the same second keep the order drawn.
    jobs.sort_by_key(|j| j.arrival_s);
    Ok(jobs
        .iter()
        .enumerate()
        .map(|(idx, j)| {
            let elastic = ElasticSpec {
                app: j.app.to_string(),
                tuned_gpus: j.config.num_replicas,
                tuned_bsz: j.config.batch_size,
                adaptive: true,
                work: None,
                sample_budget: None,
            };
            TraceRecord {
                extra: Some(Box::new(JobExtra { elastic: Some(elastic), ..JobExtra::default() })),
                ..TraceRecord::new(format!("{}-{idx}", j.app), u64::from(j.arrival_s) * 1000, 0, j.config.num_replicas)
            }
        })
        .collect())
}

/// Reads the Philly job list at `path` ([`read_philly`]) and draws the
/// workload ([`generate`]) with the compiled-in Pollux application model.
///
/// # Errors
/// As [`read_philly`] and [`generate`].
pub fn from_file(path: &Path, spec: &PolluxWorkloadSpec, seed: u64) -> Result<PolluxWorkload, RunError> {
    from_file_with(path, spec, seed, crate::error::RowErrors::Fail)
}

/// [`from_file`] with the policy `errors` for the list's malformed rows
/// ([`read_philly_with`]); those left out are in [`PolluxWorkload::malformed`].
///
/// # Errors
/// As [`from_file`].
pub fn from_file_with(
    path: &Path,
    spec: &PolluxWorkloadSpec,
    seed: u64,
    errors: crate::error::RowErrors,
) -> Result<PolluxWorkload, RunError> {
    let bytes = crate::io::read_csv(path)?;
    let sha256 = {
        use sha2::Digest;
        sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
    };
    let (rows, malformed) = read_philly_with(path, &bytes, errors)?;
    drop(bytes);
    let records = generate(path, &rows, spec, &PolluxApps::builtin(), seed)?;
    Ok(PolluxWorkload { path: path.to_path_buf(), sha256, rows: rows.len(), records, malformed })
}

/// A Pollux-style workload drawn from a file ([`from_file`]).
#[derive(Clone, Debug)]
pub struct PolluxWorkload {
    /// The Philly job list.
    pub path: PathBuf,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// Its data rows.
    pub rows: usize,
    /// The jobs, sorted by arrival.
    pub records: Vec<TraceRecord>,
    /// The list's malformed rows left out, by line (empty unless read with
    /// [`crate::error::RowErrors::Skip`]).
    pub malformed: Vec<crate::error::MalformedRow>,
}

/// Each application's configurations, computed once.
struct Configs<'a> {
    apps: &'a PolluxApps,
    done: Vec<(&'static str, Vec<TunedConfig>)>,
}

impl<'a> Configs<'a> {
    fn new(apps: &'a PolluxApps) -> Self {
        Configs { apps, done: Vec::new() }
    }

    /// `app`'s [`Application::configurations`]`(0.5, 0.8)`, never empty.
    fn of(&mut self, app: &'static str) -> Result<&[TunedConfig], RunError> {
        let at = match self.done.iter().position(|(a, _)| *a == app) {
            Some(at) => at,
            None => {
                let other = |m: String| RunError::from(ConfigError::new(ConfigErrorKind::Other, m));
                let a: &Application = self.apps.get(app).ok_or_else(|| {
                    other(format!("the pollux workload needs application `{app}`, which the Pollux model lacks"))
                })?;
                let c = a.configurations(0.5, 0.8).map_err(|e| other(format!("the pollux workload: {e}")))?;
                if c.is_empty() {
                    return Err(other(format!("the pollux workload: application `{app}` has no configuration")));
                }
                self.done.push((app, c));
                self.done.len() - 1
            }
        };
        Ok(&self.done[at].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(time_of_day_s: u32, duration_s: f64, gpu_time_s: f64) -> PhillyRow {
        PhillyRow { line: 0, time_of_day_s, duration_s, gpu_time_s }
    }

    #[test]
    fn filters_and_shifted_arrivals_by_hand() {
        let spec = PolluxWorkloadSpec::default();
        let rows = [
            // 02:00:00 shifted by 2 h = 00:00:00: kept, arrival 0.
            row(2 * 3600, 60.0, 60.0),
            // 59 s: too short.
            row(3 * 3600, 59.0, 59.0),
            // exactly 1,000 GPU-hours: too much.
            row(3 * 3600, 3600.0, MAX_GPU_TIME_S),
            // 09:59:59 - 2 h = 07:59:59 = 28,799 s: kept.
            row(10 * 3600 - 1, 100.0, 100.0),
            // 10:00:00 - 2 h = 08:00: hour 8, not below 8.
            row(10 * 3600, 100.0, 100.0),
            // 01:00:00 - 2 h = 23:00 of the day before: hour 23.
            row(3600, 100.0, 100.0),
        ];
        assert_eq!(eligible(&rows, &spec), vec![(0, 0), (3, 28_799)]);
        // From hour 0 over 24 hours, the 01:00 row is kept at 3,600 s.
        let all = PolluxWorkloadSpec { start_hour: 0, hours: 24, ..spec };
        assert_eq!(eligible(&rows, &all), vec![(0, 7200), (3, 35_999), (4, 36_000), (5, 3600)]);
    }

    #[test]
    fn gpu_time_classes_at_their_bounds() {
        assert_eq!(gpu_time_class(3599.0), ["cifar10", "ncf"]);
        assert_eq!(gpu_time_class(3600.0), ["deepspeech2"]);
        assert_eq!(gpu_time_class(35_999.0), ["deepspeech2"]);
        assert_eq!(gpu_time_class(36_000.0), ["yolov3"]);
        assert_eq!(gpu_time_class(359_999.0), ["yolov3"]);
        assert_eq!(gpu_time_class(360_000.0), ["imagenet"]);
    }
}
