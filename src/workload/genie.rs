//! GENIE's QoS workload (Chen et al., TPDS 2020, §4 and §7.1; `specs/policies.md` §1–2).
//!
//! Poisson arrivals at `jobs_per_hour` over `hours` (or, with
//! [`GenieWorkloadSpec::tasks`], exactly that many tasks arriving uniformly
//! over `hours`: a burst); each task is one of the
//! six task types ([`crate::profile::genie::TASK_MODELS`]) uniformly, training
//! or inference with probability 1/2, with priority class Urgent / Prior /
//! Normal with probability 5 / 35 / 60 % (the paper's default mix) and
//! ECT = 0, 1 ×, 2 × its single-GPU latency.
//!
//! The paper draws batch size and iteration count uniformly but does not give
//! the ranges. Ours: the global batch is uniform over the batches the profile
//! database measured for the model (on the cluster's GPU type, else its
//! best-covered type) that fit one GPU's memory, so every task can run on one
//! GPU; the iteration count is chosen so that the single-GPU latency is
//! uniform in [10, 80] minutes (rounded to whole iterations, at least one).
//! With an average of about 45 GPU-minutes per task, 20 tasks/hour offer
//! lab16 about 0.9 of its capacity at one GPU per task, near saturation, as
//! the paper observes ("above ~20 tasks/hour QoS becomes hard to guarantee").
//! The generator sets deadlines from the task's true single-GPU latency; a
//! run with [`EctBasis::Predicted`] (the default, as in the paper) replaces
//! them with the fitted model's prediction (`experiment::run_one`), the same
//! for every policy of the run.

use rand::Rng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;

use crate::job::{QosClass, TaskSpec};
use crate::profile::db::ProfileDb;
use crate::profile::genie::{GroundTruth, TASK_MODELS, kind_name};
use crate::time::SimTime;
use crate::trace::TraceRecord;

/// Shortest single-GPU latency drawn, s (10 min).
pub const MIN_LATENCY_S: f64 = 600.0;
/// Longest single-GPU latency drawn, s (80 min).
pub const MAX_LATENCY_S: f64 = 4800.0;

/// What a task's expected completion time (ECT) is a multiple of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum EctBasis {
    /// GENIE's predicted single-GPU latency `Lat(t, <1,1>)` from the run's
    /// fitted models (the paper, Eq. 9): the user is promised what the
    /// platform predicts. The same deadlines hold for every policy of a run.
    #[default]
    Predicted,
    /// The true single-GPU latency (the simulator's ground truth).
    True,
}

crate::names::value_names!(EctBasis { Predicted => "predicted", True => "true" });

/// What was drawn for one task.
struct Drawn {
    name: &'static str,
    model: &'static str,
    inference: bool,
    global_bsz: u32,
    iterations: u64,
    qos: QosClass,
}

impl Drawn {
    /// Task `t<id>` as a trace record (nominal 1 GPU, duration = its
    /// single-GPU latency, ms) with its task spec (deadline = submit + ECT).
    fn task(&self, id: usize, submit_ms: u64, latency_ms: u64, line: u64) -> (TraceRecord, TaskSpec) {
        let rec =
            TraceRecord { line, ..TraceRecord::new(format!("t{id}"), submit_ms, latency_ms, 1) }.with_extra(|e| {
                e.model = Some(self.model.to_string());
                e.local_bsz = Some(self.global_bsz);
            });
        let task = TaskSpec {
            kind: kind_name(self.name, self.inference),
            inference: self.inference,
            global_bsz: self.global_bsz,
            iterations: self.iterations,
            qos: self.qos,
            deadline: SimTime::from_ms(submit_ms + self.qos.ect_factor() * latency_ms),
        };
        (rec, task)
    }
}

/// Per task type (in [`TASK_MODELS`] order), the global batches measured for
/// its model that fit one GPU of `gpu_mem_mib` MiB.
///
/// # Errors
/// A message naming a task type with no such batch.
fn fitting_batches(truth: &GroundTruth<'_>, db: &ProfileDb, gpu_mem_mib: u64) -> Result<Vec<Vec<u32>>, String> {
    TASK_MODELS
        .iter()
        .map(|&(name, model)| {
            let fit: Vec<u32> = truth
                .batches(model)
                .into_iter()
                .filter(|&b| db.gpu_mem_mib(model, b).is_none_or(|m| m <= gpu_mem_mib as f64))
                .collect();
            if fit.is_empty() {
                Err(format!("task type `{name}` ({model}) has no measured batch that fits {gpu_mem_mib} MiB"))
            } else {
                Ok(fit)
            }
        })
        .collect()
}

/// A priority class with GENIE's default mix: Urgent 5 %, Prior 35 %, Normal 60 %.
fn draw_qos(rng: &mut impl Rng) -> QosClass {
    let u: f64 = rng.r#gen();
    if u < 0.05 {
        QosClass::Urgent
    } else if u < 0.40 {
        QosClass::Prior
    } else {
        QosClass::Normal
    }
}

/// Which tasks the generator draws.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum TaskMix {
    /// The paper's mix: six task types uniformly, training or inference
    /// with probability 1/2 (the default).
    #[default]
    Paper,
    /// Training tasks only (ours): the six types uniformly, every
    /// task training. Inference tasks exchange no gradients, so their speed
    /// does not depend on spreading across nodes; without them every task's
    /// speed does, by its computation/communication ratio (RIFLING's
    /// grouping feature). The draws are those of `paper` (the training coin
    /// is still tossed), so a seed gives the same arrivals, types, batches
    /// and latency targets with every inference task turned into training.
    Training,
}

crate::names::value_names!(TaskMix { Paper => "paper", Training => "training" });

impl TaskMix {
    /// True for the default (left out of manifests, so they stay as before).
    pub fn is_paper(&self) -> bool {
        *self == TaskMix::Paper
    }
}

/// The most tasks (density × window) a GENIE workload may ask for.
pub const MAX_TASKS: f64 = 50_000.0;

/// The generator's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenieWorkloadSpec {
    /// Arrival density, tasks per hour (the paper: 5, 10, 20). With
    /// `tasks` set, the mean density `tasks / hours`, for the record.
    pub jobs_per_hour: f64,
    /// Arrival window, hours (the paper: 24).
    pub hours: f64,
    /// What the ECT multiplies.
    pub ect: EctBasis,
    /// A fixed number of tasks instead of a Poisson count: exactly this
    /// many, their arrival times drawn independently and uniformly over the
    /// window and sorted (a Poisson process conditioned on its count, so the
    /// same process as the default, without the count's spread). `tasks =
    /// 150, hours = 1` is RIFLING point 6's burst, 150 tasks in one hour.
    /// `None` (default; left out of manifests): a Poisson process at
    /// `jobs_per_hour`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
    /// Which tasks are drawn ([`TaskMix`]; default the paper's, left out of
    /// manifests).
    #[serde(default, skip_serializing_if = "TaskMix::is_paper")]
    pub mix: TaskMix,
}

/// The arrival times, ms, of `spec` in ascending order, on `rng`: Poisson at
/// `jobs_per_hour` over the window, or exactly `spec.tasks` uniform times.
fn arrival_times(spec: &GenieWorkloadSpec, rng: &mut impl Rng) -> Result<Vec<u64>, String> {
    let horizon_ms = spec.hours * 3_600_000.0;
    let mut times = Vec::new();
    if let Some(n) = spec.tasks {
        times = (0..n).map(|_| (rng.r#gen::<f64>() * horizon_ms).floor() as u64).collect();
        times.sort_unstable();
        return Ok(times);
    }
    let gap = Exp::new(spec.jobs_per_hour / 3_600_000.0).map_err(|e| e.to_string())?;
    let mut t = 0.0;
    loop {
        t += gap.sample(rng);
        if t >= horizon_ms {
            break;
        }
        times.push(t.floor() as u64);
    }
    Ok(times)
}

/// Generates the tasks (in submit order) as trace records (nominal 1 GPU,
/// duration = true single-GPU latency, model and global batch set) with their
/// task specs, on the seeded streams `genie.arrivals` and `genie.tasks`.
///
/// # Errors
/// A message for a non-positive density or window, or when a task type has no
/// batch that fits `gpu_mem_mib` MiB.
pub fn generate(
    spec: &GenieWorkloadSpec,
    db: &ProfileDb,
    gpu_type: &str,
    gpu_mem_mib: u64,
    seed: u64,
) -> Result<Vec<(TraceRecord, TaskSpec)>, String> {
    generate_with(spec, db, &GroundTruth::new(db, gpu_type), gpu_mem_mib, seed)
}

/// [`generate`] against a given ground truth (the run's [`crate::profile::genie::GenieTruth`]).
///
/// # Errors
/// As [`generate`].
pub fn generate_with(
    spec: &GenieWorkloadSpec,
    db: &ProfileDb,
    truth: &GroundTruth<'_>,
    gpu_mem_mib: u64,
    seed: u64,
) -> Result<Vec<(TraceRecord, TaskSpec)>, String> {
    if !(spec.jobs_per_hour.is_finite() && spec.jobs_per_hour > 0.0) {
        return Err(format!("the task density must be positive, got {} tasks/hour", spec.jobs_per_hour));
    }
    if !(spec.hours.is_finite() && spec.hours > 0.0 && spec.hours <= 24.0 * 365.0) {
        return Err(format!("the arrival window must be more than 0 and at most 8,760 hours, got {}", spec.hours));
    }
    if let Some(n) = spec.tasks
        && !(1.0..=MAX_TASKS).contains(&(n as f64))
    {
        return Err(format!("the number of tasks must be 1 to {MAX_TASKS}, got {n}"));
    }
    let expected = spec.tasks.map_or(spec.jobs_per_hour * spec.hours, |n| n as f64);
    if expected > MAX_TASKS {
        return Err(format!(
            "{} tasks/hour over {} hours is about {expected:.0} tasks; at most {MAX_TASKS} are supported \
             (GENIE scores every waiting task at every decision, so its cost grows with the square of the queue)",
            spec.jobs_per_hour, spec.hours
        ));
    }
    let batches = fitting_batches(truth, db, gpu_mem_mib)?;
    let mut arrivals = crate::rng::stream(seed, "genie.arrivals");
    let mut rng = crate::rng::stream(seed, "genie.tasks");
    let mut out = Vec::new();
    for submit_ms in arrival_times(spec, &mut arrivals)? {
        let i = rng.gen_range(0..TASK_MODELS.len());
        let (name, model) = TASK_MODELS[i];
        let inference = rng.gen_bool(0.5) && spec.mix == TaskMix::Paper;
        let global_bsz = batches[i][rng.gen_range(0..batches[i].len())];
        let target_s = rng.gen_range(MIN_LATENCY_S..=MAX_LATENCY_S);
        let step_s = truth.step_s(model, inference, global_bsz, &[1]);
        let iterations = ((target_s / step_s).round() as u64).max(1);
        let latency_ms = (iterations as f64 * step_s * 1000.0).ceil() as u64;
        let qos = draw_qos(&mut rng);
        let id = out.len();
        let t = Drawn { name, model, inference, global_bsz, iterations, qos };
        out.push(t.task(id, submit_ms, latency_ms, 0));
    }
    Ok(out)
}

/// Median single-GPU-equivalent duration, s, that [`from_trace`] scales a
/// trace's durations to (the GENIE workload's median, 45 min).
pub const TRACE_MEDIAN_S: f64 = 2700.0;

/// Shortest and longest trace duration kept after scaling, s (1 min, 24 h).
pub const TRACE_DURATION_RANGE_S: (f64, f64) = (60.0, 86_400.0);

/// Trace jobs as moldable tasks (`specs/policies.md` §8, PROPOSAL; the
/// choices are ours): the first `jobs_per_hour × hours` (or `tasks`) trace jobs (submit
/// order) that ask for at most `max_gpus` GPUs keep their order and relative
/// inter-arrival gaps, rescaled so that they span `hours`; each draws a task
/// type, training or inference and a global batch as [`generate`] does; its
/// trace duration, multiplied by one factor so that the median is
/// [`TRACE_MEDIAN_S`] and clipped to [`TRACE_DURATION_RANGE_S`], is its
/// latency at its requested GPU count packed on as few nodes of
/// `gpus_per_node` as possible (at least one sample per GPU), which sets its
/// iteration count; its work is then its true single-GPU latency. Priority
/// classes 5/35/60 % and deadlines as in [`generate`]. Streams
/// `genie.trace_tasks`.
///
/// # Errors
/// A message when no trace job fits, the trace has fewer fitting jobs than
/// `jobs_per_hour × hours`, or a task type has no fitting batch.
#[allow(clippy::too_many_arguments)]
pub fn from_trace(
    records: &[TraceRecord],
    spec: &GenieWorkloadSpec,
    db: &ProfileDb,
    gpu_type: &str,
    gpu_mem_mib: u64,
    max_gpus: u32,
    gpus_per_node: u32,
    seed: u64,
) -> Result<Vec<(TraceRecord, TaskSpec)>, String> {
    from_trace_with(records, spec, db, &GroundTruth::new(db, gpu_type), gpu_mem_mib, max_gpus, gpus_per_node, seed)
}

/// [`from_trace`] against a given ground truth (the run's [`crate::profile::genie::GenieTruth`]).
///
/// # Errors
/// As [`from_trace`].
#[allow(clippy::too_many_arguments)]
pub fn from_trace_with(
    records: &[TraceRecord],
    spec: &GenieWorkloadSpec,
    db: &ProfileDb,
    truth: &GroundTruth<'_>,
    gpu_mem_mib: u64,
    max_gpus: u32,
    gpus_per_node: u32,
    seed: u64,
) -> Result<Vec<(TraceRecord, TaskSpec)>, String> {
    let n = spec.tasks.map_or((spec.jobs_per_hour * spec.hours).round().max(1.0) as usize, |n| n.max(1) as usize);
    let mut picked: Vec<&TraceRecord> =
        records.iter().filter(|r| r.gpus >= 1 && r.gpus <= max_gpus && r.duration_ms > 0).collect();
    picked.sort_by_key(|r| r.submit_ms);
    if picked.is_empty() {
        return Err(format!("no trace job asks for 1 to {max_gpus} GPUs"));
    }
    if picked.len() < n {
        return Err(format!(
            "{} jobs per hour for {} h asks for {n} tasks, but the trace has only {} jobs of 1 to {max_gpus} GPUs with a positive duration; lower --jobs-per-hour or --hours",
            spec.jobs_per_hour,
            spec.hours,
            picked.len()
        ));
    }
    picked.truncate(n);
    let t0 = picked[0].submit_ms as f64;
    let span = (picked.last().map_or(0, |r| r.submit_ms) as f64 - t0).max(1.0);
    let time_scale = spec.hours * 3_600_000.0 * (picked.len() as f64 - 1.0).max(1.0) / picked.len() as f64 / span;
    let mut durs: Vec<f64> = picked.iter().map(|r| r.duration_ms as f64 / 1000.0).collect();
    durs.sort_by(f64::total_cmp);
    let dur_scale = TRACE_MEDIAN_S / durs[durs.len() / 2].max(1e-3);
    let batches = fitting_batches(truth, db, gpu_mem_mib)?;
    let mut rng = crate::rng::stream(seed, "genie.trace_tasks");
    let mut out = Vec::with_capacity(picked.len());
    for (id, r) in picked.iter().enumerate() {
        let i = rng.gen_range(0..TASK_MODELS.len());
        let (name, model) = TASK_MODELS[i];
        let inference = rng.gen_bool(0.5) && spec.mix == TaskMix::Paper;
        let global_bsz = batches[i][rng.gen_range(0..batches[i].len())];
        let gpus = r.gpus.min(global_bsz).max(1);
        let gpn = gpus_per_node.max(1);
        let mut split = vec![gpn; (gpus / gpn) as usize];
        if gpus % gpn > 0 {
            split.push(gpus % gpn);
        }
        let target_s =
            (r.duration_ms as f64 / 1000.0 * dur_scale).clamp(TRACE_DURATION_RANGE_S.0, TRACE_DURATION_RANGE_S.1);
        let step_n = truth.step_s(model, inference, (global_bsz / gpus).max(1), &split);
        let iterations = ((target_s / step_n).round() as u64).max(1);
        let step_1 = truth.step_s(model, inference, global_bsz, &[1]);
        let latency_ms = (iterations as f64 * step_1 * 1000.0).ceil() as u64;
        let qos = draw_qos(&mut rng);
        let submit_ms = ((r.submit_ms as f64 - t0) * time_scale).floor() as u64;
        let t = Drawn { name, model, inference, global_bsz, iterations, qos };
        out.push(t.task(id, submit_ms, latency_ms, r.line));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_mix_and_latencies_are_as_documented() {
        let db = &ProfileDb::builtin();
        let spec = GenieWorkloadSpec {
            jobs_per_hour: 20.0,
            hours: 240.0,
            ect: EctBasis::True,
            tasks: None,
            mix: TaskMix::Paper,
        };
        let tasks = generate(&spec, db, "K80", 12 * 1024, 7).unwrap();
        // Poisson: 4,800 expected, sd about 69.
        assert!((4_600..5_000).contains(&tasks.len()), "{}", tasks.len());
        let share = |c: QosClass| tasks.iter().filter(|t| t.1.qos == c).count() as f64 / tasks.len() as f64;
        assert!((share(QosClass::Urgent) - 0.05).abs() < 0.015);
        assert!((share(QosClass::Prior) - 0.35).abs() < 0.03);
        let infer = tasks.iter().filter(|t| t.1.inference).count() as f64 / tasks.len() as f64;
        assert!((infer - 0.5).abs() < 0.03);
        for (r, t) in &tasks {
            // Latency in [10, 80] min up to one iteration's rounding.
            let s = r.duration_ms as f64 / 1000.0;
            assert!((500.0..5_000.0).contains(&s), "{s}");
            assert_eq!(t.deadline.as_ms(), r.submit_ms + t.qos.ect_factor() * r.duration_ms);
            assert!(r.submit_ms < 240 * 3_600_000);
        }
        assert!(tasks.windows(2).all(|w| w[0].0.submit_ms <= w[1].0.submit_ms));
        // Same seed, same tasks.
        let again = generate(&spec, db, "K80", 12 * 1024, 7).unwrap();
        assert_eq!(tasks.len(), again.len());
        assert!(tasks.iter().zip(&again).all(|(a, b)| a.0 == b.0 && a.1 == b.1));
    }

    #[test]
    fn the_training_mix_turns_every_task_into_training_on_the_same_draws() {
        let db = &ProfileDb::builtin();
        let paper = GenieWorkloadSpec {
            jobs_per_hour: 20.0,
            hours: 10.0,
            ect: EctBasis::True,
            tasks: None,
            mix: TaskMix::Paper,
        };
        let training = GenieWorkloadSpec { mix: TaskMix::Training, ..paper };
        let a = generate(&paper, db, "K80", 12 * 1024, 3).unwrap();
        let b = generate(&training, db, "K80", 12 * 1024, 3).unwrap();
        // The same arrivals, task types and batches; no inference task.
        assert_eq!(a.len(), b.len());
        assert!(b.iter().all(|t| !t.1.inference && t.1.kind.ends_with("-train")));
        let inference = a.iter().filter(|t| t.1.inference).count();
        assert!(inference > a.len() / 4, "{inference} of {}", a.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.0.submit_ms, x.1.global_bsz), (y.0.submit_ms, y.1.global_bsz));
            assert_eq!(x.1.kind.split('-').next(), y.1.kind.split('-').next());
            // A task that trained in the paper mix is the same task.
            if !x.1.inference {
                assert!(x.0 == y.0 && x.1 == y.1);
            }
        }
        // The default is left out of the manifest; the option is written.
        assert!(!serde_json::to_string(&paper).unwrap().contains("mix"));
        assert!(serde_json::to_string(&training).unwrap().contains(r#""mix":"training""#));
    }

    #[test]
    fn a_fixed_count_arrives_uniformly_over_the_window() {
        let db = &ProfileDb::builtin();
        // Three tasks in one hour, seed 5: the arrival times are the three
        // uniform draws of stream `genie.arrivals` scaled to 3,600,000 ms,
        // floored, sorted (drawn here by hand from the same stream).
        let spec = GenieWorkloadSpec {
            jobs_per_hour: 3.0,
            hours: 1.0,
            ect: EctBasis::True,
            tasks: Some(3),
            mix: TaskMix::Paper,
        };
        let tasks = generate(&spec, db, "K80", 12 * 1024, 5).unwrap();
        let mut rng = crate::rng::stream(5, "genie.arrivals");
        let mut want: Vec<u64> = (0..3).map(|_| (rng.r#gen::<f64>() * 3_600_000.0).floor() as u64).collect();
        want.sort_unstable();
        assert_eq!(tasks.iter().map(|t| t.0.submit_ms).collect::<Vec<_>>(), want);
        // 2,000 tasks over 10 h: exactly 2,000, each hour about a tenth
        // (binomial sd sqrt(2000 x 0.1 x 0.9) = 13.4, so 200 +- 60 is > 4 sd).
        let spec = GenieWorkloadSpec {
            jobs_per_hour: 200.0,
            hours: 10.0,
            ect: EctBasis::True,
            tasks: Some(2_000),
            mix: TaskMix::Paper,
        };
        let tasks = generate(&spec, db, "K80", 12 * 1024, 5).unwrap();
        assert_eq!(tasks.len(), 2_000);
        for h in 0..10u64 {
            let n = tasks.iter().filter(|t| t.0.submit_ms / 3_600_000 == h).count();
            assert!((140..=260).contains(&n), "hour {h}: {n}");
        }
        assert!(tasks.windows(2).all(|w| w[0].0.submit_ms <= w[1].0.submit_ms));
        // Out of range: refused.
        let spec = GenieWorkloadSpec { tasks: Some(0), ..spec };
        assert!(generate(&spec, db, "K80", 12 * 1024, 5).unwrap_err().contains("1 to 50000"));
    }

    #[test]
    fn trace_jobs_become_tasks_with_rescaled_arrivals() {
        let db = &ProfileDb::builtin();
        let rec = |i: u64, gpus: u32, dur_s: u64| TraceRecord {
            line: i + 2,
            ..TraceRecord::new(format!("j{i}"), i * 10_000_000, dur_s * 1000, gpus)
        };
        // 40 jobs of 1 to 8 GPUs and one of 32 GPUs (left out on 16 GPUs).
        let mut recs: Vec<TraceRecord> = (0..40).map(|i| rec(i, [1, 2, 4, 8][i as usize % 4], 600 + 100 * i)).collect();
        recs.insert(3, rec(3, 32, 1000));
        let spec = GenieWorkloadSpec {
            jobs_per_hour: 10.0,
            hours: 2.0,
            ect: EctBasis::True,
            tasks: None,
            mix: TaskMix::Paper,
        };
        let tasks = from_trace(&recs, &spec, db, "K80", 12 * 1024, 16, 4, 1).unwrap();
        assert_eq!(tasks.len(), 20);
        assert!(tasks.windows(2).all(|w| w[0].0.submit_ms < w[1].0.submit_ms));
        assert_eq!(tasks[0].0.submit_ms, 0);
        assert!(tasks.last().unwrap().0.submit_ms < 2 * 3_600_000);
        assert!(tasks.iter().all(|(r, t)| r.duration_ms > 0 && t.iterations >= 1));
        // Deterministic for a seed.
        let again = from_trace(&recs, &spec, db, "K80", 12 * 1024, 16, 4, 1).unwrap();
        assert!(tasks.iter().zip(&again).all(|(a, b)| a == b));
        // 41 tasks asked of the 40 jobs that fit: refused, not silently fewer.
        let more = GenieWorkloadSpec {
            jobs_per_hour: 20.5,
            hours: 2.0,
            ect: EctBasis::True,
            tasks: None,
            mix: TaskMix::Paper,
        };
        let e = from_trace(&recs, &more, db, "K80", 12 * 1024, 16, 4, 1).unwrap_err();
        assert!(e.contains("asks for 41 tasks") && e.contains("only 40 jobs"), "{e}");
    }
}
