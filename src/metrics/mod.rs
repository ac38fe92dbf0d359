//! Metrics: the run's recorder (fed by the engine's hooks), per-job
//! outcomes, the run summary, per-VC summaries (pure functions).
//!
//! Quantiles are linear-interpolation quantiles on sorted values (Hyndman & Fan
//! 1996, type 7; NumPy's and pandas' default): for `n` values the quantile `p`
//! sits at rank `h = (n - 1) p`, interpolated between its neighbours.

pub mod compare;
pub mod export;
pub mod fragmentation;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod recorder;
pub mod timing;

pub use recorder::{Recorder, Recording, Sample, ShareIntegrals, VcSample};
pub use timing::{DecisionTiming, TimedPolicy, TimingHandle};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::RunOutput;
use crate::job::{JobState, Skipped};

pub use crate::stats::{quantile_select, quantile_sorted};

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

/// Rounds to 1e-3 (ms resolution for seconds) so summaries read cleanly.
fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Rounds to 1e-6 (fractions).
fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The run summary written to `summary.json`. Times in seconds; JCT = end −
/// submit, queueing delay = every waiting period (start −
/// submit for a job never preempted), over completed jobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Policy name.
    pub policy: String,
    /// Rate model name.
    pub rate_model: String,
    /// The rate model's counters: for the profile models, `evaluations` (rate
    /// computations) and how many needed each fallback (`model`, `gpu_type`,
    /// `split`, `batch`); empty for trace speed. A run that shared a GPU
    /// adds the co-location model's: `coloc_evaluations`, `coloc_fallbacks`
    /// (a pair read needed a fallback), `coloc_bounded_above` and
    /// `coloc_bounded_below` (the tenants' summed speed was scaled to the
    /// best measured pair sum or to the time-slicing floor;
    /// `dlsched::profile::coloc`).
    pub rate_model_counters: BTreeMap<String, u64>,
    /// Cluster name.
    pub cluster: String,
    /// GPUs in the cluster.
    pub gpus_total: u32,
    /// Trace rows read (admitted + skipped).
    pub jobs_total: u64,
    /// Jobs that completed.
    pub jobs_completed: u64,
    /// Admitted jobs that did not complete (0 unless the run was cut short:
    /// a run that ends with unfinished jobs fails unless it allows them,
    /// and then says so in [`Summary::cut_off`]).
    pub jobs_unfinished: u64,
    /// Why this run ended with unfinished jobs and did not fail: `horizon_s`
    /// (the run was cut off there, s) or `allow_unfinished` (1: allowed);
    /// empty, and not written, when every admitted job completed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cut_off: BTreeMap<String, f64>,
    /// Rows not simulated.
    pub jobs_skipped: u64,
    /// Skipped rows by reason.
    pub jobs_skipped_by_reason: BTreeMap<String, u64>,
    /// Mean JCT, s.
    pub jct_mean_s: f64,
    /// Median JCT, s.
    pub jct_p50_s: f64,
    /// 95th-percentile JCT, s.
    pub jct_p95_s: f64,
    /// 99th-percentile JCT, s.
    pub jct_p99_s: f64,
    /// Mean queueing delay, s.
    pub queue_delay_mean_s: f64,
    /// Median queueing delay, s.
    pub queue_delay_p50_s: f64,
    /// 95th-percentile queueing delay, s.
    pub queue_delay_p95_s: f64,
    /// 99th-percentile queueing delay, s.
    pub queue_delay_p99_s: f64,
    /// Last end − first submit, s.
    pub makespan_s: f64,
    /// Busy GPU-seconds / (GPUs × makespan), 0..1: the time-averaged fraction
    /// of GPUs held by a job (a shared GPU counts once).
    pub gpu_utilization: f64,
    /// GPU-hours allocated to jobs: GPUs × run time summed over jobs (a GPU
    /// shared by two jobs counts twice).
    pub gpu_hours: f64,
    /// Offered load: GPU-seconds the admitted jobs ask for (GPUs × trace
    /// duration) / (cluster GPUs × window), the window being the arrival span
    /// (last submit − first submit) or, if longer, the mean trace duration of
    /// the admitted jobs. Above 1 the cluster cannot keep up even with perfect
    /// packing. The mean duration stands in when the jobs arrive within less
    /// than one mean run time of each other (all at one instant, say): the
    /// load is then the work that arrived per mean run time, in cluster-fulls
    /// (three 16-GPU jobs at t = 0 on 16 GPUs give 3), and never 0 for a run
    /// with an admitted job. 0 only when no job was admitted.
    pub offered_load: f64,
    /// Jobs started as tenants of shared GPUs (sharing placements only).
    pub shared_launches: u64,
    /// Completed jobs that shared a GPU with another job at some point.
    pub colocated_jobs: u64,
    /// Mean over co-located completed jobs of achieved rate / isolated rate
    /// (their run time alone / their actual run time; 1 = no slowdown); 1
    /// when no job was co-located.
    pub interference_slowdown_mean: f64,
    /// Time-averaged GPU allocation: the fraction of GPU capacity requested
    /// by running jobs (per GPU: 1 when held exclusively, else the tenants'
    /// requests, milli-GPU / 1,000 or 1 for a whole-GPU tenant, capped at 1),
    /// integrated over time / (GPUs × makespan). Equals `gpu_utilization`
    /// without sharing. These four are null for a plain trace replay (no
    /// model, no memory figure, no sharing placement: see
    /// [`Recorder::new`]).
    pub gpu_allocation_mean: Option<f64>,
    /// Time-averaged effective utilisation from the work actually done, the
    /// same way: per GPU, the sum over its holders of (co-location speed =
    /// achieved / isolated rate) × (SM-utilisation estimate alone), capped
    /// at one GPU. The estimate is a proxy (FLOP/s achieved alone / the
    /// GPU's peak FP32 FLOP/s, `dlsched::profile::resources`); a job without
    /// one counts its share (milli-GPU / 1,000) or 1.
    pub gpu_utilization_effective_mean: Option<f64>,
    /// Time-averaged GPU memory utilisation: memory held / GPU memory, the
    /// same way (an exclusive job of unknown memory holds the whole GPU's).
    pub gpu_memory_utilization_mean: Option<f64>,
    /// Time-averaged GPU fragmentation after FGD (Weng et al., ATC'23;
    /// `dlsched::cluster::fragmentation`): the expected free GPU capacity the job
    /// list's request mix cannot use, summed over nodes, / (GPUs × makespan).
    pub fragmentation_mean: Option<f64>,
    /// Task completion rate: jobs finished by the horizon (the last
    /// submission) / jobs admitted.
    pub completion_rate: f64,
    /// Mean queueing delay of fractional jobs (a guaranteed share under one
    /// GPU, e.g. the Alibaba pods), s; null when there are none.
    pub queue_delay_mean_fractional_s: Option<f64>,
    /// Mean queueing delay of whole-GPU jobs, s; null when there are none.
    pub queue_delay_mean_whole_s: Option<f64>,
    /// Moldable tasks (GENIE workload) only, else null. QoS guarantee rate:
    /// tasks finished by their deadline (arrival + ECT) / all tasks (GENIE
    /// TPDS 2020 §7.1; Urgent tasks, ECT 0, always count as missed).
    pub qos_guarantee_rate: Option<f64>,
    /// The same per priority class (`urgent`, `prior`, `normal`).
    pub qos_guarantee_by_class: BTreeMap<String, f64>,
    /// Tasks only: the QoS guarantee rate of the Urgent class alone (tasks
    /// met / Urgent tasks), null when there is none. Always 0: an Urgent
    /// task's ECT is 0 (GENIE TPDS 2020, Eq. 9), so its deadline is its
    /// arrival and no task can finish by it (`specs/policies.md` §2.3, §7:
    /// a violation by construction; the class exists to get top priority).
    pub qos_guarantee_rate_urgent: Option<f64>,
    /// Tasks only: the same for the Prior class (ECT = 1 × single-GPU
    /// latency), null when there is none.
    pub qos_guarantee_rate_prior: Option<f64>,
    /// Tasks only: the same for the Normal class (ECT = 2 × single-GPU
    /// latency), null when there is none.
    pub qos_guarantee_rate_normal: Option<f64>,
    /// Tasks only: the QoS guarantee rate over the classes that can be met
    /// (Prior and Normal: tasks of those classes finished by their deadline
    /// / tasks of those classes), null when there is none. With GENIE's
    /// 5/35/60 % mix, `qos_guarantee_rate` ≈ 0.95 × this.
    pub qos_guarantee_rate_meetable: Option<f64>,
    /// Tasks only: GENIE's average normalised latency (TPDS 2020 §7, Fig.
    /// 13(c)): the mean over completed tasks of run time (end − start) /
    /// single-GPU latency, waiting excluded, so a policy that runs every task
    /// on one GPU (the paper's Capacity) scores exactly 1. The paper divides
    /// by the predicted single-GPU latency; we divide by the true one (the
    /// task's work), so that every policy has the same yardstick. (The
    /// earlier definition of this key, waiting included, is
    /// `normalized_latency_with_wait_mean`.)
    pub normalized_latency_mean: Option<f64>,
    /// Tasks only: the mean over completed tasks of JCT (end − submit, so
    /// waiting included) / true single-GPU latency. Not the paper's figure
    /// (see `normalized_latency_mean`); equals `finish_time_fairness_mean`
    /// on a task workload.
    pub normalized_latency_with_wait_mean: Option<f64>,
    /// Tasks only: the cluster-level normalised processing rate, work done
    /// / (GPUs × makespan), where the work is the sum over completed tasks of
    /// their single-GPU-equivalent GPU-seconds (each task's true single-GPU
    /// latency × 1 GPU). 1 = every GPU busy for the whole makespan at
    /// single-GPU efficiency; running a task on n GPUs counts only the
    /// speed-up it achieves, so communication losses and idle GPUs lower
    /// it. Our definition for RIFLING's "normalised processing rate" at the
    /// cluster level (SPE 2022; `specs/policies.md` §7), beside the per-task
    /// mean `normalized_throughput_mean`.
    pub normalized_rate_cluster: Option<f64>,
    /// Tasks only: mean over completed tasks of achieved rate / single-GPU
    /// rate (true single-GPU latency / run time): RIFLING's average
    /// normalised processing rate (`specs/policies.md` §7, our reading).
    pub normalized_throughput_mean: Option<f64>,
    /// Mean relative error |predicted − actual| / actual of the policy's
    /// latency prediction for the placements it chose (GENIE family), else null.
    pub prediction_error_mean: Option<f64>,
    /// 95th percentile of that error.
    pub prediction_error_p95: Option<f64>,
    /// Other figures the policy reports (e.g. GENIE's profiling cost in GPU-hours).
    pub policy_metrics: BTreeMap<String, f64>,
    /// Completed jobs preempted at least once.
    pub jobs_preempted: u64,
    /// Runs with work-defined jobs only (absent otherwise): their restarts
    /// (reallocations after each job's first allocation), summed over every
    /// work-defined job, finished or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts_total: Option<u64>,
    /// Runs with work-defined jobs only (absent otherwise): restarts per
    /// work-defined job, mean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts_mean: Option<f64>,
    /// Preemptions (checkpoints) of completed jobs, summed.
    pub preemptions: u64,
    /// Finish-time fairness ρ, mean over completed jobs: ρ = JCT /
    /// T_isolated, where T_isolated is the job's work at rate 1, i.e. its
    /// trace duration (the run time under its recorded allocation, which
    /// every rate model takes as rate 1: packed, or the trace's recorded
    /// split; for a GENIE task its single-GPU latency), with no queueing, no
    /// co-tenant and no preemption. After Themis's ρ = T_shared /
    /// T_independent (Mahajan et al., NSDI'20, §3), with the job alone on its
    /// own GPUs as the independent run (our reading: Themis's T_independent
    /// is the run on a 1/N share of the cluster). 1 = as if alone; null when
    /// no job completed.
    pub finish_time_fairness_mean: Option<f64>,
    /// 99th-percentile ρ over completed jobs (null when none).
    pub finish_time_fairness_p99: Option<f64>,
    /// Largest ρ over completed jobs (Themis's objective, the worst-off
    /// job; null when none).
    pub finish_time_fairness_max: Option<f64>,
    /// Jain's fairness index (Jain, Chiu & Hawe, DEC-TR-301, 1984, §3):
    /// (Σ x)² / (n Σ x²) over completed jobs of x = 1 / ρ = T_isolated /
    /// JCT (the fraction of its time in the system a job spent progressing
    /// as if alone), in (0, 1]; 1 when every job has the same ρ, 1/n when
    /// one job gets everything. Null when no job completed.
    pub jain_fairness_index: Option<f64>,
    /// GPU-hours lost to checkpointing: over every preemption, the
    /// checkpoint overhead charged (`--checkpoint`, work at rate 1) × the
    /// preempted job's GPUs. 0 without preemption or with `--checkpoint none`.
    pub checkpoint_gpu_hours: f64,
    /// Admitted jobs with a trace deadline (`jobs-csv` `deadline`, an
    /// absolute time on the submit clock; [`crate::job::JobSpec::deadline`]);
    /// null when none has one. GENIE tasks' QoS deadlines are not counted
    /// here (they are the `qos_guarantee_*` figures). Skipped rows are not
    /// counted either.
    pub deadline_jobs: Option<u64>,
    /// Deadline-satisfactory ratio (the figure ElasticFlow, Gu et al.,
    /// ASPLOS'23, reports: the share of jobs that meet their deadline): jobs that completed at
    /// or before their deadline / `deadline_jobs`. A job that did not
    /// complete counts as missed. Null when no job has a deadline.
    pub deadline_satisfactory_ratio: Option<f64>,
    /// Mean lateness, s: over the completed jobs with a deadline, the mean of
    /// max(0, end − deadline) (a job on time counts 0). Jobs that did not
    /// complete have no end and are left out (they count as missed in the
    /// ratio). Null when no job with a deadline completed.
    pub deadline_lateness_mean_s: Option<f64>,
    /// Admitted jobs whose deadline is earlier than submit + trace duration:
    /// they cannot meet it at trace speed even if started on arrival. They
    /// are simulated all the same (and count in the ratio's denominator);
    /// `dlsched simulate` notes them on stderr. Null when no job has a deadline.
    pub deadline_infeasible_jobs: Option<u64>,
    /// Jobs the policy rejected ([`crate::policy::Decision::Reject`],
    /// ElasticFlow's admission control): they never ran, are not counted
    /// in `jobs_unfinished` nor in the JCT figures, and count as missed in
    /// the deadline-satisfactory ratio. Written only when not null: null
    /// (absent) in a run where no job has a deadline and none was rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_rejected: Option<u64>,
    /// Jobs with a deadline that the policy did not reject (`deadline_jobs`
    /// − rejected ones); absent when no job has a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_admitted_jobs: Option<u64>,
    /// Completed jobs with a deadline that finished after it; absent when no
    /// job has a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_late_jobs: Option<u64>,
    /// Mean lateness of the late jobs only, s: mean of end − deadline over
    /// `deadline_late_jobs` (`deadline_lateness_mean_s` counts on-time
    /// jobs as 0); null when no job was late, absent when no job has a
    /// deadline (so the runs of a sweep over deadline traces have the same keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_late_mean_s: Option<Option<f64>>,
    /// Largest lateness, s (end − deadline of the latest job); null when no
    /// job was late, absent when no job has a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_late_max_s: Option<Option<f64>>,
}

/// Per-VC figures, one row of `vc_summary.csv`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VcSummary {
    /// VC name (`default` without partitions).
    pub vc: String,
    /// GPUs in the partition.
    pub gpus: u32,
    /// Jobs admitted to it.
    pub jobs: u64,
    /// Jobs completed.
    pub jobs_completed: u64,
    /// Mean JCT, s.
    pub jct_mean_s: f64,
    /// 99th-percentile JCT, s.
    pub jct_p99_s: f64,
    /// Mean queueing delay, s.
    pub queue_delay_mean_s: f64,
    /// 95th-percentile queueing delay, s.
    pub queue_delay_p95_s: f64,
    /// Allocated GPU-seconds / (partition GPUs × run makespan).
    pub gpu_utilization: f64,
}

struct Acc {
    jct: Vec<f64>,
    queue: Vec<f64>,
    gpu_ms: f64,
    jobs: u64,
}

impl Acc {
    fn new() -> Self {
        Acc { jct: Vec::new(), queue: Vec::new(), gpu_ms: 0.0, jobs: 0 }
    }
}

/// Jain's fairness index of `xs` (Jain, Chiu & Hawe, DEC-TR-301, 1984, §3):
/// (Σ x)² / (n Σ x²), in [1/n, 1] for non-negative values, 1 when all are
/// equal; `None` for no values or when every value is 0.
pub fn jain_index(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut n, mut sum, mut sq) = (0usize, 0.0, 0.0);
    for x in xs {
        n += 1;
        sum += x;
        sq += x * x;
    }
    (n > 0 && sq > 0.0).then(|| sum * sum / (n as f64 * sq))
}

/// The run summary and per-VC summaries of a finished run: the engine's
/// final state `out` and what its recorder kept, `rec`.
pub fn summarize(
    out: &RunOutput,
    rec: &Recording,
    skipped: &[Skipped],
    rows_total: usize,
) -> (Summary, Vec<VcSummary>) {
    let parts = out.cluster.partitions();
    let mut all = Acc::new();
    // Room for every job up front: growing these by doubling copied them.
    all.jct.reserve(out.jobs.len());
    all.queue.reserve(out.jobs.len());
    let mut per_vc: Vec<Acc> = parts.iter().map(|_| Acc::new()).collect();
    // With one partition its figures are the whole run's: its values are not
    // kept twice (a replay of millions of jobs would hold them twice).
    let one_vc = parts.len() == 1;
    let (mut first_submit, mut last_end, mut last_submit) = (u64::MAX, 0u64, 0u64);
    let (mut demand_ms, mut duration_sum_ms) = (0.0, 0.0);
    let mut unfinished = 0;
    let mut slowdowns: Vec<f64> = Vec::new();
    // Queueing delays of whole-GPU jobs: the same as `all.queue` until the
    // first fractional job, so kept apart only from then on.
    let (mut q_frac, mut q_whole): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let last_submit_ms = out.jobs.iter().map(|(s, _)| s.submit.as_ms()).max().unwrap_or(0);
    let mut done_by_horizon = 0u64;
    let (mut tasks, mut met, mut norm_lat, mut norm_tput) = (0u64, 0u64, Vec::new(), Vec::new());
    // Tasks of the classes that can be met (ECT > 0), and those met; the
    // waiting-included latency; single-GPU-equivalent work done, ms.
    let (mut meetable, mut meetable_met, mut norm_lat_wait, mut task_work_ms) = (0u64, 0u64, Vec::new(), 0.0);
    let mut by_class: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let (mut preemptions, mut jobs_preempted) = (0u64, 0u64);
    // Work-defined jobs' (restarts, jobs), in a pass of their own.
    let restarts = (out.jobs.work_defined() > 0).then(|| {
        out.jobs
            .iter()
            .filter(|(s, _)| s.elastic().is_some())
            .fold((0u64, 0u64), |(t, n), (_, st)| (t + u64::from(export::restarts(st)), n + 1))
    });
    let mut rho: Vec<f64> = Vec::with_capacity(out.jobs.len());
    // Trace deadlines: jobs with one, met, infeasible; lateness of the completed, s.
    let (mut dl_jobs, mut dl_met, mut dl_infeasible, mut dl_late) = (0u64, 0u64, 0u64, Vec::new());
    // Rejected jobs (all, and those with a deadline).
    let (mut rejected, mut dl_rejected) = (0u64, 0u64);
    for (spec, state) in out.jobs.iter() {
        let is_rejected = matches!(state, JobState::Rejected(_));
        rejected += u64::from(is_rejected);
        if let Some(dl) = spec.deadline() {
            dl_jobs += 1;
            dl_rejected += u64::from(is_rejected);
            dl_infeasible += u64::from(spec.submit.as_ms().saturating_add(spec.duration_ms) > dl.as_ms());
            if let JobState::Completed(d) = state {
                dl_met += u64::from(d.end <= dl);
                dl_late.push(d.end.as_ms().saturating_sub(dl.as_ms()) as f64 / 1000.0);
            }
        }
        first_submit = first_submit.min(spec.submit.as_ms());
        last_submit = last_submit.max(spec.submit.as_ms());
        demand_ms += f64::from(spec.gpus) * spec.duration_ms as f64;
        duration_sum_ms += spec.duration_ms as f64;
        per_vc[spec.vc.index()].jobs += 1;
        all.jobs += 1;
        let JobState::Completed(d) = state else {
            if is_rejected {
                continue;
            }
            unfinished += 1;
            if let Some(t) = &spec.task {
                // An unfinished task missed its deadline.
                tasks += 1;
                meetable += u64::from(t.qos.ect_factor() > 0);
                by_class.entry(t.qos.name().to_string()).or_default().0 += 1;
            }
            continue;
        };
        last_end = last_end.max(d.end.as_ms());
        if let Some(t) = &spec.task {
            let ok = d.end <= t.deadline && t.qos.ect_factor() > 0;
            tasks += 1;
            met += u64::from(ok);
            let c = by_class.entry(t.qos.name().to_string()).or_default();
            c.0 += 1;
            c.1 += u64::from(ok);
            meetable += u64::from(t.qos.ect_factor() > 0);
            meetable_met += u64::from(ok);
            norm_lat.push(d.end.since(d.start) as f64 / spec.duration_ms.max(1) as f64);
            norm_lat_wait.push(d.end.since(spec.submit) as f64 / spec.duration_ms.max(1) as f64);
            task_work_ms += spec.duration_ms as f64;
            norm_tput.push(spec.duration_ms as f64 / d.end.since(d.start).max(1) as f64);
        }
        if d.colocated {
            let ran = d.end.since(d.start);
            slowdowns.push(if ran == 0 { 1.0 } else { (d.isolated_ms as f64 / ran as f64).min(1.0) });
        }
        let jct = d.end.since(spec.submit) as f64 / 1000.0;
        // Admission skips jobs of no duration (`nonpositive_duration`).
        rho.push(d.end.since(spec.submit) as f64 / spec.duration_ms.max(1) as f64);
        // Every waiting period (start - submit for a job never preempted).
        let q = d.waited_ms(spec.submit) as f64 / 1000.0;
        preemptions += u64::from(d.preemptions());
        jobs_preempted += u64::from(d.preemptions() > 0);
        done_by_horizon += u64::from(d.end.as_ms() <= last_submit_ms);
        if matches!(spec.gpu_milli(), Some(k) if k > 0 && k < 1000) {
            if q_frac.is_empty() {
                q_whole = all.queue.clone();
            }
            q_frac.push(q);
        } else if !q_frac.is_empty() {
            q_whole.push(q);
        }
        // GPUs x time holding them (end - start for a job never preempted).
        let gpu_ms = d.attained_gpu_ms() as f64;
        all.jct.push(jct);
        all.queue.push(q);
        all.gpu_ms += gpu_ms;
        let vc = &mut per_vc[spec.vc.index()];
        if !one_vc {
            vc.jct.push(jct);
            vc.queue.push(q);
        }
        vc.gpu_ms += gpu_ms;
    }
    let makespan_ms = last_end.saturating_sub(if first_submit == u64::MAX { 0 } else { first_submit });
    // Busy GPU-time is integrated to the run's last event: in a run cut off
    // with jobs unfinished (a horizon) that is after the last completion, so
    // the utilisation's span runs to it (a complete run's is the makespan).
    let first_ms = if first_submit == u64::MAX { 0 } else { first_submit };
    let span_ms = if unfinished > 0 { last_end.max(rec.end_ms).saturating_sub(first_ms) } else { makespan_ms };
    let util = |gpu_ms: f64, gpus: u32| {
        if span_ms == 0 || gpus == 0 { 0.0 } else { r6(gpu_ms / (f64::from(gpus) * span_ms as f64)) }
    };
    // Quantiles are found by selection (`quantile_select`), not by sorting:
    // sorting every JCT and queueing delay cost more than the rest of the summary.
    let mut by_reason = BTreeMap::new();
    for s in skipped {
        *by_reason.entry(s.reason.name().to_string()).or_insert(0u64) += 1;
    }
    let class_rate = |c: &str| by_class.get(c).map(|&(n, m)| r6(m as f64 / n as f64));
    let pm = |key: &str| out.policy_metrics.iter().find(|(k, _)| *k == key).map(|&(_, v)| r6(v));
    // Means before the quantiles reorder the values (a sum in another order
    // may round differently).
    let (jct_mean, queue_mean) = (mean(&all.jct), mean(&all.queue));
    let queue_whole_mean = if q_frac.is_empty() {
        (!all.queue.is_empty()).then_some(queue_mean)
    } else {
        (!q_whole.is_empty()).then(|| mean(&q_whole))
    };
    let summary = Summary {
        policy: out.policy.clone(),
        rate_model: out.model.to_string(),
        rate_model_counters: out.model_counters.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        cluster: out.cluster.spec().name.clone(),
        gpus_total: out.cluster.total_gpus(),
        jobs_total: rows_total as u64,
        jobs_completed: all.jct.len() as u64,
        jobs_unfinished: unfinished,
        cut_off: BTreeMap::new(),
        jobs_skipped: skipped.len() as u64,
        jobs_skipped_by_reason: by_reason,
        jct_mean_s: r3(jct_mean),
        jct_p50_s: r3(quantile_select(&mut all.jct, 0.50)),
        jct_p95_s: r3(quantile_select(&mut all.jct, 0.95)),
        jct_p99_s: r3(quantile_select(&mut all.jct, 0.99)),
        queue_delay_mean_s: r3(queue_mean),
        queue_delay_p50_s: r3(quantile_select(&mut all.queue, 0.50)),
        queue_delay_p95_s: r3(quantile_select(&mut all.queue, 0.95)),
        queue_delay_p99_s: r3(quantile_select(&mut all.queue, 0.99)),
        makespan_s: r3(makespan_ms as f64 / 1000.0),
        gpu_utilization: util(rec.busy_gpu_ms.iter().sum::<u64>() as f64, out.cluster.total_gpus()),
        gpu_hours: r3(all.gpu_ms / 3_600_000.0),
        offered_load: {
            let span = last_submit.saturating_sub(if first_submit == u64::MAX { 0 } else { first_submit });
            let mean_duration_ms = if all.jobs == 0 { 0.0 } else { duration_sum_ms / all.jobs as f64 };
            // `span` when it is the longer (every trace of many jobs), so that
            // the figure is unchanged there.
            let window_ms = if span as f64 >= mean_duration_ms { span as f64 } else { mean_duration_ms };
            if window_ms == 0.0 { 0.0 } else { r6(demand_ms / (f64::from(out.cluster.total_gpus()) * window_ms)) }
        },
        shared_launches: out.stats.shared_launches,
        colocated_jobs: slowdowns.len() as u64,
        interference_slowdown_mean: if slowdowns.is_empty() { 1.0 } else { r6(mean(&slowdowns)) },
        gpu_allocation_mean: rec.share_integrals.map(|i| util(i.alloc_gpu_ms, out.cluster.total_gpus())),
        gpu_utilization_effective_mean: rec.share_integrals.map(|i| util(i.util_gpu_ms, out.cluster.total_gpus())),
        gpu_memory_utilization_mean: rec.share_integrals.map(|i| util(i.mem_gpu_ms, out.cluster.total_gpus())),
        fragmentation_mean: rec.share_integrals.map(|i| util(i.frag_gpu_ms, out.cluster.total_gpus())),
        completion_rate: if all.jobs == 0 { 0.0 } else { r6(done_by_horizon as f64 / all.jobs as f64) },
        queue_delay_mean_fractional_s: (!q_frac.is_empty()).then(|| r3(mean(&q_frac))),
        queue_delay_mean_whole_s: queue_whole_mean.map(r3),
        qos_guarantee_rate: (tasks > 0).then(|| r6(met as f64 / tasks as f64)),
        qos_guarantee_rate_urgent: class_rate("urgent"),
        qos_guarantee_rate_prior: class_rate("prior"),
        qos_guarantee_rate_normal: class_rate("normal"),
        qos_guarantee_rate_meetable: (meetable > 0).then(|| r6(meetable_met as f64 / meetable as f64)),
        qos_guarantee_by_class: by_class.into_iter().map(|(k, (n, m))| (k, r6(m as f64 / n as f64))).collect(),
        normalized_latency_mean: (!norm_lat.is_empty()).then(|| r6(mean(&norm_lat))),
        normalized_latency_with_wait_mean: (!norm_lat_wait.is_empty()).then(|| r6(mean(&norm_lat_wait))),
        normalized_rate_cluster: (tasks > 0).then(|| util(task_work_ms, out.cluster.total_gpus())),
        normalized_throughput_mean: (!norm_tput.is_empty()).then(|| r6(mean(&norm_tput))),
        prediction_error_mean: pm("prediction_error_mean"),
        prediction_error_p95: pm("prediction_error_p95"),
        policy_metrics: out
            .policy_metrics
            .iter()
            .filter(|(k, _)| !k.starts_with("prediction_error"))
            .map(|&(k, v)| (k.to_string(), r6(v)))
            .collect(),
        jobs_preempted,
        restarts_total: restarts.map(|(t, _)| t),
        restarts_mean: restarts.map(|(t, n)| r6(t as f64 / n.max(1) as f64)),
        preemptions,
        jain_fairness_index: jain_index(rho.iter().map(|r| 1.0 / r)).map(r6),
        finish_time_fairness_mean: (!rho.is_empty()).then(|| r6(mean(&rho))),
        finish_time_fairness_max: rho.iter().copied().reduce(f64::max).map(r6),
        finish_time_fairness_p99: (!rho.is_empty()).then(|| r6(quantile_select(&mut rho, 0.99))),
        checkpoint_gpu_hours: r6(out.stats.checkpoint_gpu_ms as f64 / 3_600_000.0),
        deadline_jobs: (dl_jobs > 0).then_some(dl_jobs),
        deadline_satisfactory_ratio: (dl_jobs > 0).then(|| r6(dl_met as f64 / dl_jobs as f64)),
        deadline_lateness_mean_s: (!dl_late.is_empty()).then(|| r3(mean(&dl_late))),
        deadline_infeasible_jobs: (dl_jobs > 0).then_some(dl_infeasible),
        jobs_rejected: (dl_jobs > 0 || rejected > 0).then_some(rejected),
        deadline_admitted_jobs: (dl_jobs > 0).then_some(dl_jobs - dl_rejected),
        deadline_late_jobs: (dl_jobs > 0).then(|| dl_late.iter().filter(|&&l| l > 0.0).count() as u64),
        deadline_late_mean_s: (dl_jobs > 0).then(|| {
            let late: Vec<f64> = dl_late.iter().copied().filter(|&l| l > 0.0).collect();
            (!late.is_empty()).then(|| r3(mean(&late)))
        }),
        deadline_late_max_s: (dl_jobs > 0)
            .then(|| dl_late.iter().copied().filter(|&l| l > 0.0).reduce(f64::max).map(r3)),
    };
    let vcs = parts
        .iter()
        .zip(per_vc)
        .zip(&rec.busy_gpu_ms)
        .map(|((p, mut acc), &busy)| {
            if one_vc {
                // The whole run's figures (quantiles do not depend on order).
                return VcSummary {
                    vc: p.name.clone(),
                    gpus: p.gpus_total,
                    jobs: acc.jobs,
                    jobs_completed: all.jct.len() as u64,
                    jct_mean_s: summary.jct_mean_s,
                    jct_p99_s: summary.jct_p99_s,
                    queue_delay_mean_s: summary.queue_delay_mean_s,
                    queue_delay_p95_s: summary.queue_delay_p95_s,
                    gpu_utilization: util(busy as f64, p.gpus_total),
                };
            }
            VcSummary {
                vc: p.name.clone(),
                gpus: p.gpus_total,
                jobs: acc.jobs,
                jobs_completed: acc.jct.len() as u64,
                jct_mean_s: r3(mean(&acc.jct)),
                jct_p99_s: r3(quantile_select(&mut acc.jct, 0.99)),
                queue_delay_mean_s: r3(mean(&acc.queue)),
                queue_delay_p95_s: r3(quantile_select(&mut acc.queue, 0.95)),
                gpu_utilization: util(busy as f64, p.gpus_total),
            }
        })
        .collect();
    (summary, vcs)
}

#[cfg(test)]
mod tests {
    use super::jain_index;

    #[test]
    fn jain_index_by_hand() {
        // Equal values: (3x)^2 / (3 x 3x^2) = 1. One of four gets all:
        // 1^2 / (4 x 1) = 1/4. [1, 2]: 9 / (2 x 5) = 0.9.
        assert_eq!(jain_index([2.0, 2.0, 2.0].into_iter()), Some(1.0));
        assert_eq!(jain_index([1.0, 0.0, 0.0, 0.0].into_iter()), Some(0.25));
        assert_eq!(jain_index([1.0, 2.0].into_iter()), Some(0.9));
        assert_eq!(jain_index(std::iter::empty()), None);
        assert_eq!(jain_index([0.0].into_iter()), None);
    }
}
