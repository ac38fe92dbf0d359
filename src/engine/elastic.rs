//! Work-defined jobs: the engine's side of [`crate::job::ElasticSpec`],
//! [`Decision::Resize`](crate::policy::Decision::Resize) and [`ProgressModel`].
//!
//! **The model.** A work-defined job is done when its progress, in the
//! run's progress model's units (Pollux: the `progress` column of its
//! validation traces; ElasticFlow: iterations), reaches its target: its own
//! work when it has one (ElasticFlow's traces), else the model's target for
//! its application ([`crate::job::ElasticSpec::target`]). On a
//! configuration (GPUs per node, per-GPU batch, accumulation steps) it
//! progresses at the model's goodput, progress units per second, which is
//! constant between the model's breakpoints
//! ([`ProgressModel::next_breakpoint`]; Pollux: epoch boundaries). The
//! engine holds, per running job, its progress settled at `settled_at`, its
//! goodput and the end of its current segment (the next breakpoint, at most
//! the target), and schedules one event: the instant its progress reaches
//! the segment's end. There it re-reads goodput at the new progress (or
//! completes the job, when the segment's end is the target). Every change of
//! configuration (a resize, a resume) settles progress at the old goodput
//! first. Progress never goes back and never passes the target; a preempted
//! job keeps it.
//!
//! **Sample budgets.** A job may also carry a budget of samples
//! ([`crate::job::ElasticSpec::sample_budget`]; ElasticFlow's adapted Pollux
//! simulator's `max_sample`): it then ends when its progress reaches its
//! target or its samples processed reach the budget, whichever comes first.
//! Samples accrue at the job's sample rate on its configuration, total
//! batch / optimiser step time ([`crate::job::sample_rate`]: the model's
//! [`ProgressModel::step_times`], `step + accum_steps × (step − sync)`),
//! outside re-scale delays, and are kept across resizes and preemptions.
//! A segment then ends at the earliest of the next breakpoint, the target
//! and the budget: its event is at the earlier of the two instants (the
//! budget's rounded up to a whole ms by the same rule), and
//! at the budget's instant the job completes with the progress it has. A
//! job without a budget counts no samples and never asks for step times.
//! Budgets need [`ElasticTiming::Exact`]; a run under
//! [`ElasticTiming::PolluxSim`] with a budgeted job fails before its first
//! instant.
//!
//! *Where this departs from ElasticFlow's simulator* (`pollux/pollux_simulator/simulator.py`,
//! `Job.step`, pkusys/ElasticFlow at 04a0109a): it counts samples per
//! 60-s step as `round(seconds / total_time)` whole iterations × batch
//! (and `round(delta / total_time)` for the part of a step up to an epoch
//! crossing, `delta` itself rounded to whole seconds), so each step's count
//! is off by up to half an iteration; when a step's count would reach the
//! budget, the job completes `ceil(left / batch)` iterations after the
//! step's start (after its re-scale delay), a whole number of optimiser
//! steps. We count samples continuously (rate × time) and end the job at
//! the first whole ms at which they reach the budget: no per-step rounding
//! to accumulate, and an end at most one optimiser step earlier than the
//! simulator's whole-iteration rule. We keep the engine's exact,
//! event-driven timing rather than replay that rounding, as we do for
//! progress ([`ElasticTiming::Exact`]).
//!
//! **Reallocations.** A launch or resume, and a resize that changes the
//! job's GPUs, is a reallocation: the job makes no progress for the
//! re-scale delay ([`DEFAULT_RESCALE_DELAY_MS`], 30 s as in Pollux's
//! simulator, where every allocation, the first included, starts a 30-s
//! countdown; [`Simulation::with_rescale_delay_ms`] per run; a progress
//! model may have its own per application,
//! [`ProgressModel::rescale_delay_ms`], Sia's), and every
//! reallocation after the job's first allocation is a restart (Pollux's
//! `num_restarts`). A resize that keeps the GPUs and changes the batch only
//! is not a reallocation (Pollux's jobs re-tune their batch between steps
//! without restarting). A plain [`Decision::Launch`](crate::policy::Decision::Launch) runs the job on
//! `JobSpec::gpus` GPUs (the workload sets it to the tuned count) with the
//! model's tuned configuration ([`ProgressModel::tuned_config`] of the
//! tuned total batch), so rigid policies need know nothing elastic. A
//! work-defined job never shares GPUs ([`Decision::Colocate`](crate::policy::Decision::Colocate) is refused)
//! and is not subject to the policy's release delay: it completes exactly
//! when its work is done. A breakpoint event runs no scheduling pass (only
//! the job's goodput changed; a policy re-optimises at its own timers), a
//! completion does, and so does a stale event of a work-defined job only
//! when something else happens at that instant.
//!
//! **What duration-ranking policies read.** A work-defined job's
//! `JobSpec::duration_ms` is the model's time to its target on its tuned
//! configuration (its tuned GPUs packed onto the cluster's largest nodes;
//! [`ProgressModel::time_to_target`]), set when the run gets its progress
//! model; while it runs, its `RunState::rate` is 1 and its `remaining` the
//! rest of its re-scale delay plus the model's time to target on its
//! current configuration, falling by one ms per ms (recomputed at each
//! resize). SJF, SRTF and Themis rank it by these, as an oracle of a fixed
//! configuration; the engine itself never reads them.
//!
//! **Units and rounding.** Time is whole ms. Goodput `g` is per second,
//! so `d` progress units take `1000 d / g` ms; a segment's event is at
//! `max(settled_at, rescale_until) + ceil(1000 d / g)` ms, rounded up by
//! the rule of every completion of the engine (a tolerance of 1e-9 ms plus
//! 1e-12 of the quotient, so an exact quotient is not pushed to the next ms
//! by floating-point noise): the first whole ms at which the work is done,
//! never earlier. At the event, progress is what the job accrued up to it
//! (`g × elapsed`), at least the segment's end (against floating-point
//! noise) and at most the target: the sub-millisecond beyond a breakpoint
//! runs at the old goodput, and a job completes at the first whole ms at or
//! after the instant its progress reaches the target.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Event, Observer, Simulation, ms_to_finish};
use crate::error::SimError;
use crate::ids::{GpuId, JobId};
use crate::job::{ElasticPaused, ElasticRun, JobSpec, JobState, RunState, SuspendedState};
use crate::profile::elastic::{ElasticConfig, ProgressModel};
use crate::time::SimTime;

/// Pollux's re-scale delay: a reallocated job makes no progress for 30 s
/// (its simulator's `rescale_time = 30`, in seconds), ms.
pub const DEFAULT_RESCALE_DELAY_MS: u64 = 30_000;

/// The scheduling interval of Pollux's simulator, ms: its time advances in
/// steps of 60 s (`Cluster.step(seconds=60)`), the grid of
/// [`ElasticTiming::PolluxSim`].
pub const POLLUX_SIM_INTERVAL_MS: u64 = 60_000;

/// How a work-defined job's progress advances in time; a run's
/// `elastic_timing` (`--elastic-timing exact|pollux-sim`, sweep key
/// `elastic_timing`). Duration-defined jobs are unaffected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum ElasticTiming {
    /// Exact event times (the default): a job's goodput changes at the
    /// first whole ms at which its progress reaches an epoch boundary, and
    /// it completes at the first whole ms at which its work is done.
    #[default]
    Exact,
    /// The Pollux simulator's stepping (Job.step in its simulator.py,
    /// petuum/adaptdl osdi21-artifact): time advances on a 60-s grid from
    /// time 0. Within a grid step, a job's segment starts at the step's
    /// start (or the end of its re-scale delay, or its last epoch
    /// crossing); if progress + goodput × rest < next boundary (rest:
    /// seconds left in the step) it makes goodput × rest progress by the
    /// step's end; otherwise it crosses the boundary after round((boundary
    /// − progress) / goodput) whole seconds (Python's round: half to even),
    /// and its progress is set to the boundary exactly. A job completes at
    /// the crossing into its target, so completion times are whole seconds
    /// when arrivals and decisions are. Pair it with policies acting on the
    /// same 60-s grid (tiresias-tuned, optimus and pollux do by default) to
    /// replay that simulator's semantics.
    PolluxSim,
}

crate::names::value_names!(ElasticTiming {
    Exact => "exact",
    PolluxSim => "pollux-sim",
});

impl ElasticTiming {
    /// Whether this is the default ([`ElasticTiming::Exact`]), for manifests.
    pub fn is_exact(&self) -> bool {
        *self == ElasticTiming::Exact
    }
}

/// GPU-ms a run has held its GPUs up to `now` (its current run only): GPUs
/// × time since its start, or for a resized work-defined job the sum over
/// its GPU sets.
pub(super) fn run_gpu_ms(run: &RunState, now: SimTime) -> u64 {
    match &run.elastic {
        Some(e) => e.gpu_ms_before + now.since(e.gpus_since) * run.gpus.len() as u64,
        None => now.since(run.start) * run.gpus.len() as u64,
    }
}

/// The invariants of a running work-defined job (for
/// [`Simulation::check_invariants`]): settled progress in `[0, target)`,
/// its progress now at most its segment's end, the segment's end at most
/// the target.
pub(super) fn check_running(spec: &JobSpec, r: &RunState, e: &ElasticRun, now: SimTime) -> Result<(), String> {
    let p = e.progress_at(r.settled_at, now);
    if !(e.progress.is_finite() && e.progress >= 0.0 && e.progress < e.target) {
        return Err(format!("{} runs with settled progress {} (target {})", spec.id, e.progress, e.target));
    }
    if !(p >= e.progress && p <= e.segment_end && e.segment_end <= e.target) {
        return Err(format!(
            "{} progress {p} now, settled {}, segment end {}, target {}",
            spec.id, e.progress, e.segment_end, e.target
        ));
    }
    if now < e.rescale_until && p != e.progress {
        return Err(format!("{} progressed during its re-scale delay", spec.id));
    }
    let samples = e.samples_at(r.settled_at, now);
    if let Some(b) = e.sample_budget
        && !(e.samples.is_finite() && e.samples >= 0.0 && e.samples < b && samples <= b && e.sample_rate > 0.0)
    {
        return Err(format!(
            "{} samples {} settled, {samples} now, rate {}/s, budget {b}",
            spec.id, e.samples, e.sample_rate
        ));
    }
    if r.gpus.len() as u32 != e.cfg.replicas() {
        return Err(format!("{} holds {} GPUs, its configuration {:?}", spec.id, r.gpus.len(), e.cfg));
    }
    Ok(())
}

/// The invariants of a suspended work-defined job: progress in `[0, target)`.
pub(super) fn check_suspended(
    spec: &JobSpec,
    su: &SuspendedState,
    e: &ElasticPaused,
    model: Option<&dyn ProgressModel>,
) -> Result<(), String> {
    let target = spec.elastic().and_then(|x| model.and_then(|m| x.target(m).ok()));
    let ok = e.progress.is_finite() && e.progress >= 0.0 && target.is_none_or(|t| e.progress < t);
    if !ok || e.allocations == 0 {
        return Err(format!("{} suspended with progress {} (target {target:?}): {su:?}", spec.id, e.progress));
    }
    Ok(())
}

/// GPUs per node of `gpus`, without zeros, nodes in the order they first
/// appear in `gpus` (Pollux's simulator groups a job's allocation list, a
/// node per replica, into its placement tuple in list order; its throughput
/// depends on the cyclic order of that tuple).
fn per_node(sim: &Simulation, gpus: &[GpuId]) -> Vec<u32> {
    let mut nodes: Vec<(u32, u32)> = Vec::new();
    for &g in gpus {
        let n = sim.cluster.node_of(g).0;
        match nodes.iter_mut().find(|(m, _)| *m == n) {
            Some((_, c)) => *c += 1,
            None => nodes.push((n, 1)),
        }
    }
    nodes.into_iter().map(|(_, c)| c).collect()
}

/// One segment of a work-defined job: goodput and segment end at
/// `progress` on `cfg`.
struct Segment {
    goodput: f64,
    end: f64,
}

impl Simulation {
    /// Sets the progress model of the run's work-defined jobs
    /// ([`crate::job::ElasticSpec`]): their targets, goodputs and
    /// breakpoints. The policies read it through
    /// [`crate::policy::View::goodput`]. A run with work-defined jobs and
    /// no progress model stops with [`SimError::ModelFailure`] before its
    /// first instant.
    pub fn with_progress_model(mut self, model: Box<dyn ProgressModel>) -> Self {
        let model: Arc<dyn ProgressModel> = Arc::from(model);
        let per_node = self.cluster.spec().nodes.iter().map(|n| n.gpus).max().unwrap_or(1);
        self.jobs.estimate_elastic_durations(&*model, per_node);
        self.jobs.set_progress_model(model.clone());
        self.progress_model = Some(model);
        self
    }

    /// Sets the re-scale delay of every work-defined job's reallocation, ms
    /// (0 = none). Without it, a job waits its progress model's delay for
    /// its application ([`ProgressModel::rescale_delay_ms`]: Sia's per
    /// application) or, when the model has none, [`DEFAULT_RESCALE_DELAY_MS`]
    /// (Pollux's 30 s).
    pub fn with_rescale_delay_ms(mut self, ms: u64) -> Self {
        self.rescale_delay_ms = Some(ms);
        self
    }

    /// The re-scale delay of a reallocation of a job of `app`, ms: the
    /// run's ([`Simulation::with_rescale_delay_ms`]), else the model's for
    /// the application, else [`DEFAULT_RESCALE_DELAY_MS`].
    fn rescale_delay_of(&self, model: &dyn ProgressModel, app: &str) -> u64 {
        self.rescale_delay_ms.or_else(|| model.rescale_delay_ms(app)).unwrap_or(DEFAULT_RESCALE_DELAY_MS)
    }

    /// Sets how work-defined jobs' progress advances in time (default
    /// [`ElasticTiming::Exact`]).
    pub fn with_elastic_timing(mut self, timing: ElasticTiming) -> Self {
        self.elastic_timing = timing;
        self
    }

    /// The instant of a segment's event: the job, at `progress` with the
    /// segment `seg`, progresses from `from` (the later of its settling and
    /// the end of its re-scale delay). Exact timing: the first whole ms at
    /// which progress reaches the segment's end. Pollux-sim timing: the
    /// crossing, `round((end − progress) / goodput)` whole seconds after
    /// `from`, when it falls within the grid step holding `from`; else the
    /// step's end (where [`Simulation::elastic_event`] settles progress).
    ///
    /// With a sample budget (`budget`: samples left, samples per second;
    /// exact timing only), the earlier of that instant and
    /// the instant its samples reach the budget, where it completes.
    fn segment_event(&self, from: SimTime, progress: f64, seg: &Segment, budget: Option<(f64, f64)>) -> SimTime {
        match self.elastic_timing {
            ElasticTiming::Exact => {
                let at = from.plus_ms(ms_to_finish((seg.end - progress) * 1000.0, seg.goodput));
                budget.map_or(at, |(left, rate)| at.min(budget_end(from, left, rate)))
            }
            ElasticTiming::PolluxSim => match pollux_sim_step(from, progress, seg.goodput, seg.end) {
                PolluxStep::Cross(at) | PolluxStep::Settle(at, _) => at,
            },
        }
    }

    /// A run with work-defined jobs needs a progress model that knows
    /// their applications: the error names the first job otherwise.
    ///
    /// A sample budget needs exact timing: the error names the first job
    /// with one under [`ElasticTiming::PolluxSim`] otherwise.
    pub(super) fn check_progress_model(&self) -> Result<(), SimError> {
        if self.elastic_timing == ElasticTiming::PolluxSim
            && let Some(spec) =
                self.jobs.specs().iter().find(|s| s.elastic().is_some_and(|e| e.sample_budget.is_some()))
        {
            let reason = "the job has a sample budget (max_sample), which only the exact elastic timing \
                          supports (--elastic-timing exact); the pollux-sim timing does not count samples"
                .to_string();
            return Err(self.model_failure("progress".into(), spec.id, reason));
        }
        if let Some(model) = &self.progress_model {
            // A model that does not know a job's application fails the run
            // here, before its first instant, whatever the policy: a policy
            // that only ever asks the model for what it could rate (Sia)
            // would otherwise leave the job waiting for ever.
            for spec in self.jobs.specs() {
                if let Some(e) = spec.elastic()
                    && let Err(reason) = e.target(model.as_ref())
                {
                    return Err(self.model_failure(model.name().to_string(), spec.id, reason));
                }
            }
            return Ok(());
        }
        if self.jobs.work_defined() == 0 {
            return Ok(());
        }
        let Some(spec) = self.jobs.specs().iter().find(|s| s.elastic().is_some()) else { return Ok(()) };
        Err(self.no_progress_model(spec.id))
    }

    fn no_progress_model(&self, job: JobId) -> SimError {
        let app = self.jobs.spec(job).elastic().map_or("", |e| e.app.as_str());
        let reason = format!(
            "the job is work-defined (application `{app}`) but the run has no progress model \
             (Simulation::with_progress_model)"
        );
        self.model_failure("progress".into(), job, reason)
    }

    /// The progress model, or the error of a run without one.
    fn progress_model_for(&self, job: JobId) -> Result<Arc<dyn ProgressModel>, SimError> {
        self.progress_model.clone().ok_or_else(|| self.no_progress_model(job))
    }

    /// The model's goodput and next breakpoint for `job` on `cfg` at
    /// `progress`, checked: goodput finite and positive, breakpoint above
    /// `progress` (taken at most `target`).
    fn segment(
        &self,
        model: &dyn ProgressModel,
        job: JobId,
        app: &str,
        cfg: &ElasticConfig,
        progress: f64,
        target: f64,
    ) -> Result<Segment, SimError> {
        let fail = |reason: String| self.model_failure(model.name().to_string(), job, reason);
        let goodput = model.goodput(app, cfg, progress).map_err(&fail)?;
        if !(goodput.is_finite() && goodput > 0.0) {
            return Err(fail(format!(
                "goodput {goodput} on {cfg:?} at progress {progress}; goodputs must be finite and positive"
            )));
        }
        let end = model.next_breakpoint(app, progress).min(target);
        if end.partial_cmp(&progress) != Some(std::cmp::Ordering::Greater) {
            return Err(fail(format!("next breakpoint {end} is not above progress {progress}")));
        }
        Ok(Segment { goodput, end })
    }

    /// A job's samples per second on `cfg` ([`crate::job::sample_rate`]),
    /// when it has a sample budget (`budget`); 0 without one (the model is
    /// then not asked, so a model without step times serves jobs without
    /// budgets).
    fn sample_rate_of(
        &self,
        model: &dyn ProgressModel,
        job: JobId,
        app: &str,
        cfg: &ElasticConfig,
        budget: Option<f64>,
    ) -> Result<f64, SimError> {
        if budget.is_none() {
            return Ok(0.0);
        }
        crate::job::sample_rate(model, app, cfg).map_err(|reason| {
            self.model_failure(model.name().to_string(), job, format!("the job's sample budget needs {reason}"))
        })
    }

    /// Starts or resumes work-defined `job` on `gpus`, with `batch` (atomic
    /// batch, accumulation steps) or, for a plain launch (`None`), its
    /// tuned configuration on its requested GPU count.
    pub(super) fn launch_elastic<O: Observer + ?Sized>(
        &mut self,
        job: JobId,
        gpus: Vec<GpuId>,
        batch: Option<(u32, u32)>,
        shared: bool,
        obs: &mut O,
    ) -> Result<(), SimError> {
        let resumed = match self.jobs.state(job) {
            JobState::Pending => None,
            JobState::Suspended(s) => Some(**s),
            _ => return Err(self.invalid(job, None, "job is neither pending nor suspended".into())),
        };
        let spec = self.jobs.spec(job);
        let Some(es) = spec.elastic() else {
            return Err(self.invalid(job, None, "the job is not work-defined; only a work-defined job resizes".into()));
        };
        let (app, tuned_bsz, vc) = (es.app.clone(), es.tuned_bsz, spec.vc);
        let es = es.clone();
        if shared {
            return Err(self.invalid(
                job,
                None,
                "a work-defined job runs on whole GPUs; it cannot be co-located".into(),
            ));
        }
        if batch.is_none() && gpus.len() != spec.gpus as usize {
            let reason = format!("placement has {} GPUs but the job asks for {}", gpus.len(), spec.gpus);
            return Err(self.invalid(job, None, reason));
        }
        self.check_batch(job, &gpus, batch)?;
        self.check_fit(job, &gpus)?;
        let model = self.progress_model_for(job)?;
        let target = self.target_of(&*model, job, &es)?;
        if let Err(e) = self.cluster.allocate(job, vc, &gpus) {
            return Err(self.invalid(job, e.gpu, e.reason));
        }
        let placement = per_node(self, &gpus);
        let gpu_type = self.cluster.gpu_type_of_gpus(&gpus);
        let mut cfg = match batch {
            Some((atomic_bsz, accum_steps)) => ElasticConfig { per_node: placement, atomic_bsz, accum_steps, gpu_type },
            None => model.tuned_config_on(&app, &placement, tuned_bsz, gpu_type),
        };
        cfg.gpu_type = gpu_type;
        let delay = self.rescale_delay_of(&*model, &app);
        let (progress, allocations, samples) =
            resumed.and_then(|s| s.elastic).map_or((0.0, 0, 0.0), |e| (e.progress, e.allocations, e.samples));
        let seg = self.segment(&*model, job, &app, &cfg, progress, target)?;
        let sample_budget = es.sample_budget.map(|b| b as f64);
        let sample_rate = self.sample_rate_of(&*model, job, &app, &cfg, sample_budget)?;
        let budget = sample_budget.map(|b| (b - samples, sample_rate));
        let rescale_until = self.now.plus_ms(delay);
        let epoch = resumed.map_or(0, |s| s.epoch);
        let at = self.segment_event(rescale_until, progress, &seg, budget);
        self.events.push(at, Event::Completion { job, epoch });
        let spec = self.jobs.spec(job);
        let (first_start, preemptions, attained_ms, attained_gpu_ms, waited_ms) = match resumed {
            None => (self.now, 0, 0, 0, self.now.since(spec.submit)),
            Some(s) => {
                (s.first_start, s.preemptions, s.attained_ms, s.attained_gpu_ms, s.waited_ms + self.now.since(s.since))
            }
        };
        let remaining = delay as f64 + self.remaining_ms(&*model, &app, &cfg, progress, target, budget);
        if self.model.depends_on_neighbours() {
            self.touched.extend(gpus.iter().map(|&g| self.cluster.node_of(g)));
        }
        if resumed.is_some() {
            self.suspended -= 1;
            self.stats.resumes += 1;
        } else {
            self.pending -= 1;
        }
        if allocations > 0 {
            self.stats.restarts += 1;
        }
        self.running += 1;
        self.stats.launches += 1;
        let nodes_spanned = cfg.nodes();
        *self.jobs.state_mut(job) = JobState::Running(Box::new(RunState {
            start: self.now,
            gpus,
            rate: 1.0,
            remaining,
            settled_at: self.now,
            epoch,
            nodes_spanned,
            shared: false,
            isolated_rate: 1.0,
            colocated: false,
            first_start,
            preemptions,
            attained_ms,
            attained_gpu_ms,
            waited_ms,
            work_done: false,
            elastic: Some(Box::new(ElasticRun {
                cfg,
                progress,
                target,
                goodput: seg.goodput,
                segment_end: seg.end,
                rescale_until,
                allocations: allocations + 1,
                gpus_since: self.now,
                gpu_ms_before: 0,
                samples,
                sample_rate,
                sample_budget,
            })),
        }));
        if let JobState::Running(r) = self.jobs.state(job) {
            obs.on_allocate(&self.snapshot(), job, &r.gpus, 1.0);
        }
        Ok(())
    }

    /// A running work-defined job's `RunState::remaining` (ms at rate 1, as
    /// SRTF and Themis read it) after its re-scale delay: the model's time
    /// from `progress` to `target` on `cfg` ([`ProgressModel::time_to`];
    /// 0 when the model cannot rate a later segment, which the run reports
    /// when it gets there), or with a sample budget (`budget`: samples
    /// left, samples per second) the time to it, if sooner.
    fn remaining_ms(
        &self,
        model: &dyn ProgressModel,
        app: &str,
        cfg: &ElasticConfig,
        progress: f64,
        target: f64,
        budget: Option<(f64, f64)>,
    ) -> f64 {
        let ms = model.time_to(app, cfg, progress, target).map_or(0.0, |s| s * 1000.0);
        budget.map_or(ms, |(left, rate)| ms.min(left.max(0.0) / rate * 1000.0))
    }

    /// The job's target ([`crate::job::ElasticSpec::target`]: its own work,
    /// else the model's target for its application), checked finite and
    /// positive.
    fn target_of(&self, model: &dyn ProgressModel, job: JobId, es: &crate::job::ElasticSpec) -> Result<f64, SimError> {
        let fail = |reason: String| self.model_failure(model.name().to_string(), job, reason);
        let target = es.target(model).map_err(&fail)?;
        if !(target.is_finite() && target > 0.0) {
            return Err(fail(format!("target {target} for `{}`; targets must be finite and positive", es.app)));
        }
        Ok(target)
    }

    /// A resize's GPUs (at least one, none repeated) and batch (atomic
    /// batch at least 1).
    fn check_batch(&self, job: JobId, gpus: &[GpuId], batch: Option<(u32, u32)>) -> Result<(), SimError> {
        if gpus.is_empty() {
            return Err(self.invalid(job, None, "a work-defined job needs at least one GPU".into()));
        }
        if let Some((0, _)) = batch {
            return Err(self.invalid(job, None, "atomic batch 0; it must be at least 1 sample".into()));
        }
        Ok(())
    }

    /// Applies [`Decision::Resize`](crate::policy::Decision::Resize): a pending or suspended work-defined job
    /// starts on `gpus` with the batch; a running one is settled and moves
    /// to them (a reallocation when its GPUs change).
    pub(super) fn resize<O: Observer + ?Sized>(
        &mut self,
        job: JobId,
        gpus: Vec<GpuId>,
        atomic_bsz: u32,
        accum_steps: u32,
        obs: &mut O,
    ) -> Result<(), SimError> {
        if job.index() >= self.jobs.len() {
            return Err(self.invalid(job, None, "no such job".into()));
        }
        let batch = Some((atomic_bsz, accum_steps));
        let old_gpus = match self.jobs.state(job) {
            JobState::Running(r) if r.elastic.is_some() => r.gpus.clone(),
            JobState::Running(_) => {
                return Err(self.invalid(
                    job,
                    None,
                    "the job is not work-defined; only a work-defined job resizes".into(),
                ));
            }
            _ => return self.launch_elastic(job, gpus, batch, false, obs),
        };
        self.check_batch(job, &gpus, batch)?;
        self.check_fit(job, &gpus)?;
        let model = self.progress_model_for(job)?;
        let app = self.jobs.spec(job).elastic().map(|e| e.app.clone()).unwrap_or_default();
        let vc = self.jobs.spec(job).vc;
        let (mut new_sorted, mut old_sorted) = (gpus.clone(), old_gpus.clone());
        new_sorted.sort_unstable();
        old_sorted.sort_unstable();
        let moved = new_sorted != old_sorted;
        if moved {
            // Each GPU must be free or already the job's: release its own,
            // take the new set, and put the old one back if that fails.
            if let Err(e) = self.cluster.release(job, &old_gpus) {
                return Err(self.internal(job, e.gpu, e.reason));
            }
            if let Err(e) = self.cluster.allocate(job, vc, &gpus) {
                if let Err(back) = self.cluster.allocate(job, vc, &old_gpus) {
                    return Err(self.internal(job, back.gpu, back.reason));
                }
                return Err(self.invalid(job, e.gpu, e.reason));
            }
        }
        let gpu_type = self.cluster.gpu_type_of_gpus(&gpus);
        let cfg = ElasticConfig { per_node: per_node(self, &gpus), atomic_bsz, accum_steps, gpu_type };
        let now = self.now;
        let (progress, target, samples, sample_budget) = match self.jobs.state(job) {
            JobState::Running(r) => r.elastic.as_ref().map_or((0.0, 1.0, 0.0, None), |e| {
                (e.progress_at(r.settled_at, now), e.target, e.samples_at(r.settled_at, now), e.sample_budget)
            }),
            _ => (0.0, 1.0, 0.0, None),
        };
        let seg = self.segment(&*model, job, &app, &cfg, progress, target)?;
        let sample_rate = self.sample_rate_of(&*model, job, &app, &cfg, sample_budget)?;
        let budget = sample_budget.map(|b| (b - samples, sample_rate));
        let work_ms = self.remaining_ms(&*model, &app, &cfg, progress, target, budget);
        let delay = self.rescale_delay_of(&*model, &app);
        let JobState::Running(run) = self.jobs.state_mut(job) else {
            unreachable!("checked above");
        };
        let Some(e) = run.elastic.as_deref_mut() else {
            unreachable!("checked above");
        };
        if moved {
            e.gpu_ms_before += now.since(e.gpus_since) * run.gpus.len() as u64;
            e.gpus_since = now;
            e.allocations += 1;
            e.rescale_until = now.plus_ms(delay);
        }
        e.progress = progress;
        e.cfg = cfg;
        e.goodput = seg.goodput;
        e.segment_end = seg.end;
        e.samples = samples;
        e.sample_rate = sample_rate;
        let from = e.rescale_until.max(now);
        run.remaining = from.since(now) as f64 + work_ms;
        run.settled_at = now;
        run.epoch += 1;
        run.gpus = gpus;
        let epoch = run.epoch;
        let at = self.segment_event(from, progress, &seg, budget);
        self.events.push(at, Event::Completion { job, epoch });
        self.stats.resizes += 1;
        if moved {
            self.stats.restarts += 1;
            let new = gpus_of(&self.jobs, job);
            let nodes_spanned = self.cluster.nodes_spanned(&new);
            if let JobState::Running(run) = self.jobs.state_mut(job) {
                run.nodes_spanned = nodes_spanned;
            }
            if self.model.depends_on_neighbours() {
                self.touched.extend(old_gpus.iter().map(|&g| self.cluster.node_of(g)));
                self.touched.extend(new.iter().map(|&g| self.cluster.node_of(g)));
            }
            obs.on_release(&self.snapshot(), job, &old_gpus);
            if let JobState::Running(r) = self.jobs.state(job) {
                obs.on_allocate(&self.snapshot(), job, &r.gpus, 1.0);
            }
        }
        Ok(())
    }

    /// A running work-defined job's segment event (its epoch is current):
    /// its progress reaches the segment's end, or its samples its sample
    /// budget; it completes at its target or its budget (returns true: the
    /// instant has a scheduling pass), or goes on at the goodput of the
    /// next segment (false: a breakpoint alone runs no pass).
    pub(super) fn elastic_event<O: Observer + ?Sized>(&mut self, job: JobId, obs: &mut O) -> Result<bool, SimError> {
        let now = self.now;
        let (progress, target, cfg, samples, by_samples) = {
            let JobState::Running(r) = self.jobs.state(job) else {
                return Err(self.internal(job, None, "segment event of a job not running".into()));
            };
            let Some(e) = r.elastic.as_deref() else {
                return Err(self.internal(job, None, "segment event of a job not work-defined".into()));
            };
            let from = r.settled_at.max(e.rescale_until);
            // The budget's instant as the event was scheduled (the same
            // expression): at or after it, the budget ends the job.
            let by_samples = e.sample_budget.is_some_and(|b| now >= budget_end(from, b - e.samples, e.sample_rate));
            let samples = e.samples_at(r.settled_at, now);
            let progress = match self.elastic_timing {
                // Stopped by its budget: accrued up to now, at most the
                // segment's end.
                ElasticTiming::Exact if by_samples => e.progress_at(r.settled_at, now),
                // Accrued up to now, uncapped; at least the segment's end.
                ElasticTiming::Exact => {
                    let accrued = e.progress + e.goodput * now.since(from) as f64 / 1000.0;
                    accrued.max(e.segment_end).min(e.target)
                }
                // The grid step's end without a crossing, or the crossing.
                ElasticTiming::PolluxSim => match pollux_sim_step(from, e.progress, e.goodput, e.segment_end) {
                    PolluxStep::Settle(at, p) if at == now => p,
                    _ => e.segment_end,
                },
            };
            (progress, e.target, e.cfg.clone(), samples, by_samples)
        };
        self.stats.breakpoints += 1;
        if progress >= target || by_samples {
            if let JobState::Running(r) = self.jobs.state_mut(job)
                && let Some(e) = r.elastic.as_deref_mut()
            {
                // At its target, or where its budget stopped it.
                e.progress = progress.min(target);
                e.samples = samples;
                r.settled_at = now;
            }
            self.complete(job, obs)?;
            return Ok(true);
        }
        let model = self.progress_model_for(job)?;
        let app = self.jobs.spec(job).elastic().map(|e| e.app.clone()).unwrap_or_default();
        let seg = self.segment(&*model, job, &app, &cfg, progress, target)?;
        let JobState::Running(run) = self.jobs.state_mut(job) else {
            unreachable!("checked above");
        };
        let Some(e) = run.elastic.as_deref_mut() else {
            unreachable!("checked above");
        };
        e.progress = progress;
        e.goodput = seg.goodput;
        e.segment_end = seg.end;
        e.samples = samples;
        let budget = e.sample_budget.map(|b| (b - samples, e.sample_rate));
        // The same configuration: its time to target falls as time passes.
        run.remaining = (run.remaining - now.since(run.settled_at) as f64).max(0.0);
        run.settled_at = now;
        run.epoch += 1;
        let epoch = run.epoch;
        let at = self.segment_event(now, progress, &seg, budget);
        // Pollux-sim: a segment starting at a grid instant belongs to the
        // next grid step, which that simulator runs after its policy's
        // decision at the instant; a crossing after 0 s then comes after
        // this instant's scheduling pass (with the goodput of whatever the
        // pass decides), not before it.
        if self.elastic_timing == ElasticTiming::PolluxSim
            && at == now
            && now.as_ms().is_multiple_of(POLLUX_SIM_INTERVAL_MS)
        {
            self.after_pass.push((at, Event::Completion { job, epoch }));
        } else {
            self.events.push(at, Event::Completion { job, epoch });
        }
        Ok(false)
    }

    /// With invariant checks on: no work-defined job's progress is below
    /// what the last check saw (a completed job's is its target).
    pub(super) fn check_progress_monotone(&mut self) -> Result<(), String> {
        if self.progress_seen.len() < self.jobs.len() {
            self.progress_seen.resize(self.jobs.len(), 0.0);
        }
        for (spec, state) in self.jobs.iter() {
            if spec.elastic().is_none() {
                continue;
            }
            let p = match state {
                JobState::Running(r) => r.elastic.as_ref().map(|e| e.progress_at(r.settled_at, self.now)),
                JobState::Suspended(s) => s.elastic.map(|e| e.progress),
                JobState::Completed(_) => Some(f64::INFINITY),
                JobState::Pending | JobState::NotArrived | JobState::Rejected(_) => Some(0.0),
            };
            let Some(p) = p else {
                return Err(format!("{} is work-defined but its state has no progress", spec.id));
            };
            let seen = &mut self.progress_seen[spec.id.index()];
            if p < *seen {
                return Err(format!("{} progress went back from {} to {p}", spec.id, *seen));
            }
            *seen = p;
        }
        Ok(())
    }
}

/// The instant a job with `left` samples of its budget to go, processing
/// `rate` samples per second from `from`, reaches its budget: the first
/// whole ms at which `rate × elapsed ≥ left` (the engine's rounding of every
/// completion, `ms_to_finish`); `from` itself when nothing is left.
fn budget_end(from: SimTime, left: f64, rate: f64) -> SimTime {
    from.plus_ms(ms_to_finish(left.max(0.0) * 1000.0, rate))
}

/// What a work-defined job does next under [`ElasticTiming::PolluxSim`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum PolluxStep {
    /// It crosses its segment's end at this instant.
    Cross(SimTime),
    /// It reaches the end of the grid step (this instant) with this progress.
    Settle(SimTime, f64),
}

/// `Job.step` of Pollux's simulator for one segment: from `from` at
/// `progress` with `goodput` (per s) towards `end`, within the grid step
/// holding `from` (the next multiple of [`POLLUX_SIM_INTERVAL_MS`] above
/// it). The crossing test and the progress of a step without a crossing
/// are the simulator's floating-point expressions (`progress + goodput ×
/// seconds < next_progress`, `progress += goodput × seconds`), the crossing
/// delay its `round(float((next_progress − progress) / goodput))` seconds.
fn pollux_sim_step(from: SimTime, progress: f64, goodput: f64, end: f64) -> PolluxStep {
    let step_end = SimTime((from.as_ms() / POLLUX_SIM_INTERVAL_MS + 1).saturating_mul(POLLUX_SIM_INTERVAL_MS));
    let rest_s = step_end.since(from) as f64 / 1000.0;
    if progress + goodput * rest_s < end {
        return PolluxStep::Settle(step_end, progress + goodput * rest_s);
    }
    let delta_s = ((end - progress) / goodput).round_ties_even().max(0.0);
    // At most `rest_s` (the test above), so within the step.
    PolluxStep::Cross(from.plus_ms(((delta_s * 1000.0) as u64).min(step_end.since(from))))
}

/// The GPUs running `job` holds (empty if it is not running).
fn gpus_of(jobs: &crate::job::JobTable, job: JobId) -> Vec<GpuId> {
    match jobs.state(job) {
        JobState::Running(r) => r.gpus.clone(),
        _ => Vec::new(),
    }
}
