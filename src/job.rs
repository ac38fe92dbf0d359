//! Jobs: the static spec, the state machine, the table, and skip reasons.

use std::sync::Arc;

pub use compact_str::CompactString;
use serde::Serialize;

use crate::ids::{GpuId, JobId, VcId};
use crate::time::SimTime;

/// The fields of a job that most traces leave empty, kept out of line so
/// that a job without them costs one null pointer (a replay holds
/// millions of jobs). Shared by [`crate::trace::TraceRecord`] and
/// [`JobSpec`]: admission moves the box from one to the other.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobExtra {
    /// The VC label the trace gave, if any.
    pub vc: Option<String>,
    /// The user, if the trace names one.
    pub user: Option<String>,
    /// The DL model (profile database name), if known.
    pub model: Option<String>,
    /// Per-GPU batch size, samples, if known.
    pub local_bsz: Option<u32>,
    /// Absolute deadline, ms since the trace origin (the submit clock), if
    /// the trace gives one (`jobs-csv` `deadline`).
    pub deadline_ms: Option<u64>,
    /// GPU memory each of its GPUs needs, MiB, when known (set from the
    /// profile database).
    pub gpu_mem_mib: Option<u64>,
    /// A fractional GPU request, milli-GPU (1..=999 of one GPU), if any.
    pub gpu_milli: Option<u32>,
    /// The GPU types the job may run on (sorted, no repeats), if constrained;
    /// `None` = any.
    pub gpu_types: Option<Vec<String>>,
    /// A work-defined job's description (its application, tuned
    /// configuration, adaptivity); `None` for a job defined by its duration.
    pub elastic: Option<ElasticSpec>,
}

// The interface of work-defined jobs, named from `crate::profile::elastic`
// (its module docs describe the model).

/// One configuration of a work-defined job: how its replicas are spread
/// over nodes and its batch (Pollux's `placement`, `atomic_bsz`,
/// `accum_steps`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElasticConfig {
    /// GPUs (one replica each) on each node the job uses, without zeros,
    /// nodes in the order of the job's GPU list (Pollux's placement tuple,
    /// e.g. `[4, 2]`; its throughput depends on the cyclic order only).
    pub per_node: Vec<u32>,
    /// Per-GPU micro-batch of one step, samples (Pollux's `atomic_bsz`).
    pub atomic_bsz: u32,
    /// Gradient-accumulation steps beyond the first (0 = none).
    pub accum_steps: u32,
    /// The GPU type the job runs on: its index in the cluster's list of GPU
    /// types (`Cluster::gpu_type_names`: the nodes' distinct types in node
    /// order), [`MIXED_GPU_TYPES`] when its GPUs span types. The engine
    /// sets it from the job's GPUs; a progress model for one GPU type
    /// ignores it, a heterogeneous one (Sia's) rates the configuration on
    /// that type. 0 on a cluster of one type.
    pub gpu_type: u16,
}

/// [`ElasticConfig::gpu_type`] of GPUs of more than one type.
pub const MIXED_GPU_TYPES: u16 = u16::MAX;

impl ElasticConfig {
    /// `batch` samples split evenly over the GPUs of `per_node`, rounded
    /// up, without accumulation: atomic batch `ceil(batch / replicas)`, at
    /// least 1.
    pub fn even_split(per_node: &[u32], batch: u32) -> Self {
        let replicas = per_node.iter().sum::<u32>().max(1);
        ElasticConfig {
            per_node: per_node.to_vec(),
            atomic_bsz: batch.div_ceil(replicas).max(1),
            accum_steps: 0,
            gpu_type: 0,
        }
    }

    /// GPUs (replicas) in all.
    pub fn replicas(&self) -> u32 {
        self.per_node.iter().sum()
    }

    /// Nodes used.
    pub fn nodes(&self) -> u32 {
        self.per_node.len() as u32
    }

    /// Total batch of one optimiser step, samples: replicas × atomic batch ×
    /// (accumulation steps + 1).
    pub fn total_batch(&self) -> u64 {
        u64::from(self.replicas()) * u64::from(self.atomic_bsz) * (u64::from(self.accum_steps) + 1)
    }
}

/// How a work-defined job progresses, in the model's progress units (Pollux:
/// the `progress` column of its validation traces; a job is done when its
/// progress reaches [`ProgressModel::target`]).
pub trait ProgressModel: Send + Sync {
    /// The model's name for outputs.
    fn name(&self) -> &'static str;

    /// The progress at which a job of application `app` is done.
    ///
    /// # Errors
    /// An unknown application.
    fn target(&self, app: &str) -> Result<f64, String>;

    /// The job's goodput on `cfg` at `progress`, progress units per second,
    /// finite and positive; constant while progress stays below
    /// [`ProgressModel::next_breakpoint`].
    ///
    /// # Errors
    /// An unknown application or a configuration the model cannot rate.
    fn goodput(&self, app: &str, cfg: &ElasticConfig, progress: f64) -> Result<f64, String>;

    /// The least progress strictly above `progress` at which goodput may
    /// change (at most the target).
    fn next_breakpoint(&self, app: &str, progress: f64) -> f64;

    /// The configuration a job of `app` with tuned total batch `batch`
    /// (samples per optimiser step) runs on over `per_node` GPUs when the
    /// policy gives it no batch of its own (a plain launch). By default the
    /// batch is split evenly over the replicas, rounded up, without
    /// accumulation: atomic batch `ceil(batch / replicas)`, at least 1. A
    /// model with memory limits per GPU (Pollux's `max_local_bsz`) overrides
    /// it with its own rule.
    fn tuned_config(&self, _app: &str, per_node: &[u32], batch: u32) -> ElasticConfig {
        ElasticConfig::even_split(per_node, batch)
    }

    /// [`ProgressModel::tuned_config`] on the cluster's GPU type of index
    /// `gpu_type` ([`ElasticConfig::gpu_type`]), which the result carries:
    /// what the engine launches a job on. By default the type does not
    /// matter; a heterogeneous model (Sia's) applies the type's limits.
    fn tuned_config_on(&self, app: &str, per_node: &[u32], batch: u32, gpu_type: u16) -> ElasticConfig {
        ElasticConfig { gpu_type, ..self.tuned_config(app, per_node, batch) }
    }

    /// `(step_time, sync_time)`, seconds, of one atomic step (every replica
    /// computes `cfg.atomic_bsz` samples, then gradients synchronise) on
    /// `cfg`'s placement: what a job observes when it profiles itself
    /// (Pollux's `get_throughput`). An optimiser step with accumulation
    /// takes `step + accum_steps × (step − sync)`. For policies that model
    /// throughput themselves (Optimus, Pollux).
    ///
    /// # Errors
    /// A model without throughput tables (the default), an unknown
    /// application or a configuration the model cannot rate.
    fn step_times(&self, app: &str, _cfg: &ElasticConfig) -> Result<(f64, f64), String> {
        Err(format!("the {} progress model gives no step times (application `{app}`)", self.name()))
    }

    /// The factor this model applies to every goodput of `app` on top of the
    /// step times of [`ProgressModel::step_times`] (the Sia simulator's
    /// calibration `1 / SLOWDOWNS[app]`, `dlsched::profile::sia`); 1 by
    /// default. For policies that rate configurations from step times and
    /// compare jobs of different applications (Gavel's max-sum throughput).
    fn calibration(&self, _app: &str) -> f64 {
        1.0
    }

    /// Gradient statistics `(grad_sqr, grad_var)` of a job of `app` at
    /// total batch `batch` (samples) at `progress`: what its
    /// statistical-efficiency estimate is fitted to (Pollux's
    /// `get_grad_stats`).
    ///
    /// # Errors
    /// As [`ProgressModel::step_times`], or a batch outside the model's range.
    fn grad_stats(&self, app: &str, _batch: u64, _progress: f64) -> Result<(f64, f64), String> {
        Err(format!("the {} progress model gives no gradient statistics (application `{app}`)", self.name()))
    }

    /// Optimiser steps left at total batch `batch` for a job of `app` at
    /// `progress`: an oracle of remaining work (Optimus' remaining
    /// iterations, as the Pollux simulator's Optimus+Oracle computes them).
    ///
    /// # Errors
    /// As [`ProgressModel::grad_stats`].
    fn remaining_steps(&self, app: &str, _batch: u64, _progress: f64) -> Result<f64, String> {
        Err(format!("the {} progress model has no oracle of remaining steps (application `{app}`)", self.name()))
    }

    /// The batch limits of `app`, `None` when the model has none.
    fn batch_limits(&self, _app: &str) -> Option<BatchLimits> {
        None
    }

    /// The batch limits of `app` on GPU type `gpu_type`
    /// ([`ElasticConfig::gpu_type`]): a heterogeneous model's per-type
    /// memory limits (Sia's tables measure a different largest per-GPU
    /// batch per type). By default [`ProgressModel::batch_limits`].
    fn batch_limits_on(&self, app: &str, _gpu_type: u16) -> Option<BatchLimits> {
        self.batch_limits(app)
    }

    /// Placement-dependent caps on the local (per-GPU, atomic) batch of
    /// `app` on `per_node` GPUs of the cluster's GPU type of index
    /// `gpu_type`, samples: `(m, c)`, `m` the largest local batch a batch
    /// optimiser may choose there, `c` (when any) a memory cap applied to
    /// the atomic batch it chose. `None` (the default): only
    /// [`ProgressModel::batch_limits_on`] applies. Sia's model measures
    /// each placement's largest local batch ([`crate::profile::sia`]).
    fn local_caps_on(&self, _app: &str, _per_node: &[u32], _gpu_type: u16) -> Option<(u32, Option<u32>)> {
        None
    }

    /// The re-scale delay of a reallocation of a job of `app`, ms, when the
    /// model has its own per application (Sia's simulator: `rescale_time`
    /// per application); `None` (the default) leaves the run's delay
    /// (`--rescale-delay`, else Pollux's 30 s). An explicit
    /// `--rescale-delay` wins over the model's.
    fn rescale_delay_ms(&self, _app: &str) -> Option<u64> {
        None
    }

    /// Seconds a job of `app` at `progress` takes to reach the target on
    /// `cfg`, at the model's goodput of each segment up to the target (no
    /// re-scale delay): the remaining time an oracle of a fixed
    /// configuration knows (what SRTF and Themis rank work-defined jobs by).
    ///
    /// # Errors
    /// As [`ProgressModel::goodput`], or a goodput that is not positive and
    /// finite or a breakpoint that does not advance.
    fn time_to_target(&self, app: &str, cfg: &ElasticConfig, progress: f64) -> Result<f64, String> {
        self.time_to(app, cfg, progress, self.target(app)?)
    }

    /// Seconds a job of `app` at `progress` takes to reach `target` on
    /// `cfg`, at the model's goodput of each segment (no re-scale delay):
    /// [`ProgressModel::time_to_target`] for a job whose target is its own
    /// ([`ElasticSpec::work`]).
    ///
    /// # Errors
    /// As [`ProgressModel::goodput`], or a goodput that is not positive and
    /// finite or a breakpoint that does not advance.
    fn time_to(&self, app: &str, cfg: &ElasticConfig, progress: f64, target: f64) -> Result<f64, String> {
        let (mut p, mut secs) = (progress, 0.0);
        while p < target {
            let g = self.goodput(app, cfg, p)?;
            let end = self.next_breakpoint(app, p).min(target);
            if !(g.is_finite() && g > 0.0 && end > p) {
                return Err(format!("{app}: goodput {g} up to breakpoint {end} at progress {p} on {cfg:?}"));
            }
            secs += (end - p) / g;
            p = end;
        }
        Ok(secs)
    }
}

/// Batch limits of an application ([`ProgressModel::batch_limits`];
/// Pollux: `Application`'s `init_batch_size`, `max_batch_size`,
/// `min_local_bsz`, `max_local_bsz`), samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Initial (reference) total batch: statistical efficiency is relative to it.
    pub init_batch: u32,
    /// Largest total batch.
    pub max_batch: u32,
    /// Least per-GPU batch.
    pub min_local: u32,
    /// Largest per-GPU (atomic) batch that fits in a GPU's memory.
    pub max_local: u32,
}

/// What makes a job work-defined: it runs until its progress, in the run's
/// [`ProgressModel`] units, reaches its target ([`ElasticSpec::target`]: its
/// own work, else the model's target for its application), at the model's
/// goodput for the configuration
/// it runs on (see `crate::engine`'s module docs). `JobSpec::gpus` is its
/// tuned GPU count, so a policy that knows nothing elastic launches it as
/// it launches any job, and the engine gives it the tuned batch.
#[derive(Clone, Debug, PartialEq)]
pub struct ElasticSpec {
    /// The application, as the progress model names it (Pollux: `cifar10`,
    /// `imagenet`, ...).
    pub app: String,
    /// The GPU count a non-elastic policy runs it on (Pollux's workloads:
    /// `num_replicas`), at least 1.
    pub tuned_gpus: u32,
    /// The total batch, samples per optimiser step, a non-elastic policy
    /// runs it with (Pollux's workloads: `batch_size`), at least 1.
    pub tuned_bsz: u32,
    /// True when a policy may change its GPUs and batch while it runs
    /// (Pollux's adaptive jobs); false for a job meant to keep its tuned
    /// configuration. The engine applies any valid resize either way; the
    /// flag is for policies.
    pub adaptive: bool,
    /// The job's own work, progress units (ElasticFlow's traces:
    /// `num_iteration`, optimiser steps at its global batch), finite and
    /// positive; `None` when the progress model's target for its
    /// application defines it (Pollux's and Sia's workloads). See
    /// [`ElasticSpec::target`].
    pub work: Option<f64>,
    /// A budget of samples processed, samples: the job also ends when the
    /// samples it has processed (optimiser steps × total batch, at the step
    /// time of [`ProgressModel::step_times`] on its current configuration)
    /// reach it, if that comes before its progress reaches its target
    /// (ElasticFlow's adapted Pollux simulator, `max_sample`). At least 1;
    /// `None` (every trace but that one): the target alone ends it. See
    /// `crate::engine`'s module docs (work-defined jobs).
    pub sample_budget: Option<u64>,
}

impl ElasticSpec {
    /// The progress at which the job is done: its own work when it has one,
    /// else `model`'s target for its application
    /// ([`ProgressModel::target`]). Every reader of a work-defined job's
    /// target (the engine, the duration estimate of `JobTable`, the
    /// policies' view) goes through here.
    ///
    /// # Errors
    /// The model's, for a job without work of its own.
    pub fn target(&self, model: &dyn ProgressModel) -> Result<f64, String> {
        match self.work {
            Some(w) => Ok(w),
            None => model.target(&self.app),
        }
    }

    /// Seconds the job takes from `progress` to its target
    /// ([`ElasticSpec::target`]) on `cfg` ([`ProgressModel::time_to`]).
    ///
    /// # Errors
    /// As [`ProgressModel::time_to`] and [`ElasticSpec::target`].
    pub fn time_to_target(&self, model: &dyn ProgressModel, cfg: &ElasticConfig, progress: f64) -> Result<f64, String> {
        model.time_to(&self.app, cfg, progress, self.target(model)?)
    }

    /// Seconds the job takes on `cfg` to process the rest of its sample
    /// budget from `samples` processed ([`ElasticSpec::sample_budget`], at
    /// [`sample_rate`] on `cfg`; no re-scale delay); `None` without a
    /// budget or when the model gives no step times for `cfg`.
    pub fn budget_secs(&self, model: &dyn ProgressModel, cfg: &ElasticConfig, samples: f64) -> Option<f64> {
        let budget = self.sample_budget? as f64;
        let rate = sample_rate(model, &self.app, cfg).ok()?;
        Some((budget - samples).max(0.0) / rate)
    }
}

/// Samples per second a job of `app` processes on `cfg`: its total batch
/// ([`ElasticConfig::total_batch`]) over the time of one optimiser step,
/// `step + accum_steps × (step − sync)` from [`ProgressModel::step_times`]
/// (Pollux's simulator: `total_time = step_time + accum_time ×
/// accum_steps`, `accum_time = step_time − sync_time`).
///
/// # Errors
/// The model's ([`ProgressModel::step_times`]), or a rate that is not
/// finite and positive.
pub fn sample_rate(model: &dyn ProgressModel, app: &str, cfg: &ElasticConfig) -> Result<f64, String> {
    let (step, sync) = model.step_times(app, cfg)?;
    let total = step + f64::from(cfg.accum_steps) * (step - sync);
    let rate = cfg.total_batch() as f64 / total;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!(
            "{app}: step time {step} s, sync {sync} s on {cfg:?} give {rate} samples/s; it must be finite and positive"
        ));
    }
    Ok(rate)
}

/// Read accessors of the out-of-line [`JobExtra`] fields, and the ways to
/// set them, for a type with an `extra: Option<Box<JobExtra>>` field.
macro_rules! extra_accessors {
    ($vc:ident) => {
        /// The VC label the trace gave, if any.
        pub fn $vc(&self) -> Option<&str> {
            self.extra.as_ref().and_then(|e| e.vc.as_deref())
        }
        /// The user, if the trace names one.
        pub fn user(&self) -> Option<&str> {
            self.extra.as_ref().and_then(|e| e.user.as_deref())
        }
        /// The DL model (profile database name), if known.
        pub fn model(&self) -> Option<&str> {
            self.extra.as_ref().and_then(|e| e.model.as_deref())
        }
        /// Per-GPU batch size, samples, if known.
        pub fn local_bsz(&self) -> Option<u32> {
            self.extra.as_ref().and_then(|e| e.local_bsz)
        }
        /// GPU memory each of its GPUs needs, MiB, if known.
        pub fn gpu_mem_mib(&self) -> Option<u64> {
            self.extra.as_ref().and_then(|e| e.gpu_mem_mib)
        }
        /// A fractional GPU request, milli-GPU (1..=999 of one GPU), if any.
        pub fn gpu_milli(&self) -> Option<u32> {
            self.extra.as_ref().and_then(|e| e.gpu_milli)
        }
        /// The GPU types the job may run on (sorted, no repeats), if
        /// constrained; `None` = any.
        pub fn gpu_types(&self) -> Option<&[String]> {
            self.extra.as_ref().and_then(|e| e.gpu_types.as_deref())
        }
        /// A work-defined job's description, `None` for a job defined by its
        /// duration.
        pub fn elastic(&self) -> Option<&crate::job::ElasticSpec> {
            self.extra.as_ref().and_then(|e| e.elastic.as_ref())
        }
        /// The rare fields, for writing (allocated empty on first use).
        pub fn extra_mut(&mut self) -> &mut JobExtra {
            self.extra.get_or_insert_with(Default::default)
        }
        /// `self` with its rare fields set by `f` (none kept out of line
        /// when `f` leaves them all empty).
        #[must_use]
        pub fn with_extra(mut self, f: impl FnOnce(&mut JobExtra)) -> Self {
            f(self.extra_mut());
            if self.extra.as_deref().is_some_and(|e| *e == JobExtra::default()) {
                self.extra = None;
            }
            self
        }
    };
}
pub(crate) use extra_accessors;

/// What a job asks for and how long it ran in the trace. Never changes.
///
/// Sized for the common case (about 100 bytes): the fields most traces leave
/// empty are in [`JobExtra`], out of line, read through accessors
/// ([`JobSpec::model`], [`JobSpec::gpu_mem_mib`], ...).
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Dense id, in (submit time, trace order).
    pub id: JobId,
    /// The job's id in the trace (written to `jobs.csv`): kept inline when
    /// up to 24 bytes long (every id of the public traces here), so that it
    /// costs no allocation of its own.
    pub name: CompactString,
    /// The job's 1-based line in the trace file (0 for generated jobs), for
    /// error messages.
    pub line: u64,
    /// Submission time.
    pub submit: SimTime,
    /// Run time in the trace under its recorded allocation, ms. With the
    /// trace-speed model a job runs exactly this long once started.
    pub duration_ms: u64,
    /// GPUs requested.
    pub gpus: u32,
    /// The partition the job runs in.
    pub vc: VcId,
    /// True when the trace recorded the job's placement (Philly RFold
    /// `shape`): `recorded_split` is then that shape, sorted.
    pub recorded_shape: bool,
    /// GPUs per server of the allocation the trace duration was measured
    /// under, descending: the trace's `shape` where it has one, else the
    /// placement rule's choice on an empty partition (packed, for consolidate).
    /// Shared between the jobs of one split.
    pub recorded_split: Arc<[u32]>,
    /// The rare fields (VC label, user, model, batch, memory need, fractional
    /// request, GPU types, deadline), `None` when the trace gives none.
    pub extra: Option<Box<JobExtra>>,
    /// A moldable task (GENIE's setting): the policy chooses its GPU count and
    /// placement; `gpus` is then only its nominal request. `None` for trace jobs.
    pub task: Option<Box<TaskSpec>>,
}

impl JobSpec {
    extra_accessors!(vc_label);

    /// The trace's absolute deadline for the job (`jobs-csv` `deadline`, on
    /// the submit clock), if any: read only by the summary's `deadline_*`
    /// figures. Not a GENIE QoS deadline (that is [`TaskSpec::deadline`]).
    pub fn deadline(&self) -> Option<SimTime> {
        self.extra.as_ref().and_then(|e| e.deadline_ms).map(SimTime::from_ms)
    }
}

/// A user priority class of GENIE (Chen et al., TPDS 2020, §4), which sets a
/// task's expected completion time (ECT) as a multiple of its single-GPU latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QosClass {
    /// ECT 0: can never be met; exists to get top priority (5 % of tasks).
    Urgent,
    /// ECT = 1 × single-GPU latency (35 %).
    Prior,
    /// ECT = 2 × single-GPU latency (60 %).
    Normal,
}

impl QosClass {
    /// ECT as a multiple of the single-GPU latency.
    pub fn ect_factor(self) -> u64 {
        match self {
            QosClass::Urgent => 0,
            QosClass::Prior => 1,
            QosClass::Normal => 2,
        }
    }

    /// The class's name.
    pub fn name(self) -> &'static str {
        match self {
            QosClass::Urgent => "urgent",
            QosClass::Prior => "prior",
            QosClass::Normal => "normal",
        }
    }
}

/// A moldable deep-learning task: `iterations` steps at global batch
/// `global_bsz`, split evenly over whatever GPUs the policy gives it (GENIE's
/// task `t = <w_type, w_bat, w_iter>`). Its work (`JobSpec::duration_ms`) is
/// its true single-GPU latency; on `n` GPUs it runs at the profile model's
/// ratio of single-GPU to `n`-GPU iteration time (local batch `global_bsz / n`).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    /// Task type name (e.g. `resnet50-train`).
    pub kind: String,
    /// True for batch inference (no gradient synchronisation), false for training.
    pub inference: bool,
    /// Global batch, samples per iteration.
    pub global_bsz: u32,
    /// Iterations.
    pub iterations: u64,
    /// Priority class.
    pub qos: QosClass,
    /// Absolute deadline: submit + ECT.
    pub deadline: SimTime,
}

impl TaskSpec {
    /// The per-GPU batch on `gpus` GPUs, samples: `global_bsz / gpus`
    /// rounded to the nearest whole sample, at least 1 (the rule of the
    /// table rate model, `crate::profile::rate`). `gpus` 0 reads as 1.
    pub fn local_bsz(&self, gpus: u32) -> u32 {
        ((f64::from(self.global_bsz) / f64::from(gpus.max(1))).round() as u32).max(1)
    }
}

/// A running job's progress. Work is measured in milliseconds at rate 1.0 (the
/// trace's speed); a job at rate `r` does `r` units of work per simulated ms.
#[derive(Clone, Debug, PartialEq)]
pub struct RunState {
    /// When its current run started: its first start, or for a preempted job
    /// the instant it was resumed.
    pub start: SimTime,
    /// The GPUs it holds.
    pub gpus: Vec<GpuId>,
    /// Work units per simulated ms (1.0 = trace speed).
    pub rate: f64,
    /// Work left at `settled_at`, in ms at rate 1.0.
    pub remaining: f64,
    /// When `remaining` was last brought up to date.
    pub settled_at: SimTime,
    /// Bumped at every rate change; a completion event with an older epoch is stale.
    pub epoch: u32,
    /// Distinct nodes the placement spans.
    pub nodes_spanned: u32,
    /// True when it holds its GPUs as a tenant (shared mode).
    pub shared: bool,
    /// Its rate with no co-tenants, work units per ms: the interference-free
    /// reference for the slowdown metric.
    pub isolated_rate: f64,
    /// True once another job has shared one of its GPUs.
    pub colocated: bool,
    /// The job's first start (equal to `start` unless it was preempted).
    pub first_start: SimTime,
    /// Times it was preempted so far.
    pub preemptions: u32,
    /// Its service before the current run, ms of holding GPUs.
    pub attained_ms: u64,
    /// Its service before the current run, GPU-ms (GPUs × ms holding them).
    pub attained_gpu_ms: u64,
    /// Every waiting period up to the current run's start, ms (first wait
    /// plus each suspension): `start - submit = waited_ms + attained_ms`.
    pub waited_ms: u64,
    /// True once its work has run out while it still holds its GPUs, for
    /// the release delay a policy may ask for
    /// ([`crate::policy::Policy::release_delay_ms`]); `remaining` is 0 then.
    pub work_done: bool,
    /// A work-defined job's progress and configuration (its `rate` is then
    /// 1 and its `remaining` its spec's duration, both unused); `None` for a
    /// duration-defined job.
    pub elastic: Option<Box<ElasticRun>>,
}

/// A running work-defined job's progress, in its progress model's units.
/// Progress is settled at `RunState::settled_at`; it grows at `goodput`
/// from `max(settled_at, rescale_until)` on, and `goodput` holds until
/// progress reaches `segment_end` (see `crate::engine`'s module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct ElasticRun {
    /// Its configuration (placement over nodes, batch).
    pub cfg: ElasticConfig,
    /// Progress at `RunState::settled_at`, in `[0, target)`.
    pub progress: f64,
    /// The progress at which it is done (the model's target for its application).
    pub target: f64,
    /// Progress units per second on `cfg` while progress is below
    /// `segment_end` (once the re-scale delay is over).
    pub goodput: f64,
    /// The next breakpoint of the model above the settled progress (at most
    /// `target`): the job's next event is when progress reaches it.
    pub segment_end: f64,
    /// The end of the current re-scale delay: no progress before it.
    pub rescale_until: SimTime,
    /// Reallocations so far, the first allocation included (restarts are
    /// all but the first).
    pub allocations: u32,
    /// When it took its current GPUs (its run's start, or its last
    /// reallocation within the run).
    pub gpus_since: SimTime,
    /// GPU-ms it held in its current run before `gpus_since`.
    pub gpu_ms_before: u64,
    /// Samples processed by `RunState::settled_at` (all its runs), samples;
    /// 0 for a job without a sample budget.
    pub samples: f64,
    /// Samples per second on `cfg` once the re-scale delay is over (total
    /// batch over the optimiser step time); 0 for a job without a sample
    /// budget, whose samples are not counted.
    pub sample_rate: f64,
    /// Its sample budget ([`ElasticSpec::sample_budget`]), samples, if any.
    pub sample_budget: Option<f64>,
}

impl ElasticRun {
    /// Restarts so far: reallocations after the first allocation.
    pub fn restarts(&self) -> u32 {
        self.allocations.saturating_sub(1)
    }

    /// Its progress at `now` (not before the run's last settlement,
    /// `settled_at`): the settled progress plus goodput × the time since
    /// `settled_at` outside the re-scale delay, at most `segment_end` (the
    /// engine settles it there at the segment's event).
    pub fn progress_at(&self, settled_at: SimTime, now: SimTime) -> f64 {
        let from = settled_at.max(self.rescale_until);
        if now <= from {
            return self.progress;
        }
        (self.progress + self.goodput * now.since(from) as f64 / 1000.0).min(self.segment_end)
    }

    /// Samples it has processed by `now` (not before `settled_at`): the
    /// settled samples plus `sample_rate` × the time since `settled_at`
    /// outside the re-scale delay, at most its budget; 0 without a budget.
    pub fn samples_at(&self, settled_at: SimTime, now: SimTime) -> f64 {
        let Some(budget) = self.sample_budget else { return 0.0 };
        let from = settled_at.max(self.rescale_until);
        if now <= from {
            return self.samples;
        }
        (self.samples + self.sample_rate * now.since(from) as f64 / 1000.0).min(budget)
    }
}

/// A suspended work-defined job's progress, kept while it holds no GPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElasticPaused {
    /// Progress when it was preempted, in its model's units.
    pub progress: f64,
    /// Reallocations so far (its first allocation included).
    pub allocations: u32,
    /// Samples processed so far ([`ElasticRun::samples`]); 0 for a job
    /// without a sample budget.
    pub samples: f64,
}

/// A preempted job, waiting to be resumed by a launch ([`crate::policy::Decision::Launch`]
/// or `Colocate`). It holds no GPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SuspendedState {
    /// Work left, ms at rate 1.0: what was left when it was preempted plus
    /// the checkpoint/restore overhead charged then
    /// ([`crate::engine::CheckpointModel`]).
    pub remaining: f64,
    /// When it was preempted.
    pub since: SimTime,
    /// Its first start.
    pub first_start: SimTime,
    /// Times it was preempted (at least 1).
    pub preemptions: u32,
    /// Its service so far, ms of holding GPUs.
    pub attained_ms: u64,
    /// Its service so far, GPU-ms.
    pub attained_gpu_ms: u64,
    /// Every waiting period before its last run, ms (the current
    /// suspension, from `since`, is not in it yet).
    pub waited_ms: u64,
    /// The epoch its next run starts with (completions of earlier runs are stale).
    pub epoch: u32,
    /// A work-defined job's progress; `None` for a duration-defined job.
    pub elastic: Option<ElasticPaused>,
}

/// A finished job's record. Sized for the common case (48 bytes): a job
/// never preempted keeps no history, and its first start, service and
/// waiting time follow from its one run ([`DoneState::first_start`],
/// [`DoneState::attained_ms`], ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoneState {
    /// When its last run started (its only start unless it was preempted;
    /// see `first_start`).
    pub start: SimTime,
    /// When it ended.
    pub end: SimTime,
    /// How long it would have run with no co-tenant, ms (its work at its
    /// isolated rate, rounded up): `isolated_ms / (end - start)` is its
    /// achieved rate over its isolated rate.
    pub isolated_ms: u64,
    /// GPUs it ran on (its request, or the policy's choice for a moldable task).
    pub gpus: u32,
    /// Distinct nodes its placement spanned.
    pub nodes_spanned: u32,
    /// True if another job shared one of its GPUs at some point.
    pub colocated: bool,
    /// Its history when it differs from one uninterrupted run (a preempted
    /// job's), out of line.
    history: Option<Box<DoneHistory>>,
}

/// The part of a finished job's record that one uninterrupted run implies
/// (see [`DoneState`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DoneHistory {
    first_start: SimTime,
    preemptions: u32,
    attained_ms: u64,
    attained_gpu_ms: u64,
    waited_ms: u64,
    restarts: u32,
}

impl DoneState {
    /// The record of a job submitted at `submit` that ended at `end`, its
    /// last run having started at `start`. `first_start`, `preemptions`,
    /// `attained_ms` (time holding GPUs over all runs), `attained_gpu_ms`
    /// (GPUs × that time) and `waited_ms` (every waiting period) are kept
    /// only when they differ from what one uninterrupted run gives.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        submit: SimTime,
        start: SimTime,
        end: SimTime,
        isolated_ms: u64,
        gpus: u32,
        nodes_spanned: u32,
        colocated: bool,
        first_start: SimTime,
        preemptions: u32,
        attained_ms: u64,
        attained_gpu_ms: u64,
        waited_ms: u64,
    ) -> Self {
        let ran = end.since(start);
        let plain = first_start == start
            && preemptions == 0
            && attained_ms == ran
            && attained_gpu_ms == ran.wrapping_mul(u64::from(gpus))
            && start >= submit
            && waited_ms == start.since(submit);
        let history = (!plain).then(|| {
            Box::new(DoneHistory { first_start, preemptions, attained_ms, attained_gpu_ms, waited_ms, restarts: 0 })
        });
        DoneState { start, end, isolated_ms, gpus, nodes_spanned, colocated, history }
    }

    /// Its first start (`start` unless it was preempted).
    pub fn first_start(&self) -> SimTime {
        self.history.as_ref().map_or(self.start, |h| h.first_start)
    }

    /// The record, of a job submitted at `submit`, with `restarts`
    /// reallocations after the first allocation (a work-defined job's; kept
    /// out of line when not 0).
    #[must_use]
    pub fn with_restarts(mut self, submit: SimTime, restarts: u32) -> Self {
        if restarts == 0 && self.history.as_ref().is_none_or(|h| h.restarts == 0) {
            return self;
        }
        let h = self.history.get_or_insert_with(|| {
            Box::new(DoneHistory {
                first_start: self.start,
                preemptions: 0,
                attained_ms: self.end.since(self.start),
                attained_gpu_ms: self.end.since(self.start).wrapping_mul(u64::from(self.gpus)),
                waited_ms: self.start.since(submit),
                restarts: 0,
            })
        });
        h.restarts = restarts;
        self
    }

    /// Reallocations after its first allocation (a work-defined job's
    /// resizes and resumes; 0 for any other job).
    pub fn restarts(&self) -> u32 {
        self.history.as_ref().map_or(0, |h| h.restarts)
    }

    /// Times it was preempted.
    pub fn preemptions(&self) -> u32 {
        self.history.as_ref().map_or(0, |h| h.preemptions)
    }

    /// Time it held GPUs, ms, over all its runs (`end - start` when it was
    /// never preempted).
    pub fn attained_ms(&self) -> u64 {
        self.history.as_ref().map_or_else(|| self.end.since(self.start), |h| h.attained_ms)
    }

    /// GPUs × time it held them, GPU-ms, over all its runs.
    pub fn attained_gpu_ms(&self) -> u64 {
        self.history
            .as_ref()
            .map_or_else(|| self.end.since(self.start).wrapping_mul(u64::from(self.gpus)), |h| h.attained_gpu_ms)
    }

    /// Every waiting period, ms (first wait plus each suspension), of a job
    /// submitted at `submit` (its spec's): `end - submit = waited_ms +
    /// attained_ms`.
    pub fn waited_ms(&self, submit: SimTime) -> u64 {
        self.history.as_ref().map_or_else(|| self.start.since(submit), |h| h.waited_ms)
    }
}

/// A job's life: not yet submitted → pending → running → completed, with
/// running → suspended → running for each preemption.
#[derive(Clone, Debug, PartialEq)]
pub enum JobState {
    /// Before its submit time.
    NotArrived,
    /// Submitted, waiting for GPUs.
    Pending,
    /// Holding GPUs and making progress (boxed: few jobs run at once, and
    /// the enum stays the size of a finished job's record).
    Running(Box<RunState>),
    /// Preempted: holds no GPUs, keeps its remaining work (boxed, as `Running`).
    Suspended(Box<SuspendedState>),
    /// Done.
    Completed(DoneState),
    /// Refused by the policy ([`crate::policy::Decision::Reject`]) at this
    /// time while pending (ElasticFlow's admission control): never runs,
    /// holds nothing; terminal, like `Completed`, but without a JCT.
    Rejected(crate::time::SimTime),
}

/// All admitted jobs, indexed by [`JobId`].
#[derive(Clone, Debug, Default)]
pub struct JobTable {
    specs: Vec<JobSpec>,
    states: Vec<JobState>,
    /// Work-defined jobs (with an [`ElasticSpec`]).
    work_defined: usize,
    /// The run's progress model, which defines its work-defined jobs' work
    /// (set by `crate::engine::Simulation::with_progress_model`).
    progress: Option<SharedProgressModel>,
}

/// The run's progress model, shared by the engine and the policies' view.
#[derive(Clone)]
pub struct SharedProgressModel(pub Arc<dyn ProgressModel>);

impl std::fmt::Debug for SharedProgressModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgressModel({})", self.0.name())
    }
}

impl JobTable {
    /// A table of not-yet-arrived jobs. The specs are ordered by submit time
    /// (stably, so ties keep their given order) and ids are reassigned densely
    /// in that order: `JobId(i)` is the `i`-th job submitted.
    pub fn new(mut specs: Vec<JobSpec>) -> Self {
        // A stable sort allocates half the vector as scratch; trace files are
        // usually in submit order already, so check first.
        if !specs.is_sorted_by_key(|s| s.submit) {
            specs.sort_by_key(|s| s.submit);
        }
        for (i, s) in specs.iter_mut().enumerate() {
            s.id = JobId(i as u32);
        }
        let states = vec![JobState::NotArrived; specs.len()];
        let work_defined = specs.iter().filter(|s| s.elastic().is_some()).count();
        JobTable { specs, states, work_defined, progress: None }
    }

    /// Jobs defined by their work ([`JobSpec::elastic`]) rather than a duration.
    pub fn work_defined(&self) -> usize {
        self.work_defined
    }

    /// The run's progress model (`None` when the run gave the engine none).
    pub fn progress_model(&self) -> Option<&dyn ProgressModel> {
        self.progress.as_ref().map(|p| &*p.0)
    }

    pub(crate) fn set_progress_model(&mut self, model: Arc<dyn ProgressModel>) {
        self.progress = Some(SharedProgressModel(model));
    }

    /// Sets every work-defined job's `duration_ms` to the model's time to
    /// its target (or to its sample budget, if that is sooner and the model
    /// gives step times) from progress 0 on its tuned configuration: its tuned
    /// GPUs packed `gpus_per_node` to a node, its tuned batch by
    /// [`ProgressModel::tuned_config`] ([`ProgressModel::time_to_target`],
    /// rounded up to whole ms; 0 when the model cannot rate it, which the
    /// run then reports at launch). Policies that rank by duration (SJF,
    /// SRTF's pending jobs, Themis) read it as their oracle.
    pub(crate) fn estimate_elastic_durations(&mut self, model: &dyn ProgressModel, gpus_per_node: u32) {
        let per = gpus_per_node.max(1);
        for spec in &mut self.specs {
            let Some(e) = spec.extra.as_ref().and_then(|x| x.elastic.as_ref()) else { continue };
            let mut placement = Vec::new();
            let mut left = e.tuned_gpus;
            while left > 0 {
                placement.push(left.min(per));
                left -= left.min(per);
            }
            let cfg = model.tuned_config(&e.app, &placement, e.tuned_bsz);
            let mut secs = e.time_to_target(model, &cfg, 0.0).unwrap_or(0.0);
            // A sample budget may end it first ([`ElasticSpec::budget_secs`]).
            if let Some(b) = e.budget_secs(model, &cfg, 0.0) {
                secs = secs.min(b);
            }
            spec.duration_ms = (secs * 1000.0).ceil() as u64;
        }
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// True when there are no jobs.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// A job's spec.
    pub fn spec(&self, id: JobId) -> &JobSpec {
        &self.specs[id.index()]
    }

    /// A job's state.
    pub fn state(&self, id: JobId) -> &JobState {
        &self.states[id.index()]
    }

    /// All specs, in id order.
    pub fn specs(&self) -> &[JobSpec] {
        &self.specs
    }

    /// Makes jobs moldable tasks, by trace id (`JobSpec::name`), before a run.
    pub fn attach_tasks(&mut self, tasks: &mut std::collections::HashMap<String, TaskSpec>) {
        if tasks.is_empty() {
            return;
        }
        for s in &mut self.specs {
            if let Some(t) = tasks.remove(s.name.as_str()) {
                s.task = Some(Box::new(t));
            }
        }
    }

    /// (spec, state) pairs in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&JobSpec, &JobState)> {
        self.specs.iter().zip(self.states.iter())
    }

    pub(crate) fn state_mut(&mut self, id: JobId) -> &mut JobState {
        &mut self.states[id.index()]
    }
}

/// Why a trace row was not simulated. Every skipped row is counted by reason in
/// the summary and listed in `skipped.csv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The job asks for no GPUs (a CPU job).
    ZeroGpus,
    /// Run time of zero or less (under 0.5 ms after rounding).
    NonpositiveDuration,
    /// The job's VC is not one of the configured partitions.
    UnknownVc,
    /// More GPUs than the whole cluster has.
    ExceedsCluster,
    /// More GPUs than its VC partition has, but no more than the cluster.
    ExceedsVc,
    /// Few enough GPUs, but the placement rule can never place it, even on an
    /// empty partition (e.g. a recorded 5-GPU part on 4-GPU nodes).
    Unplaceable,
    /// Its per-GPU memory need exceeds every GPU of its partition.
    ExceedsGpuMemory,
    /// The trace records no run for it: an Alibaba PAI 2023 pod with an empty
    /// `scheduled_time` (pending until deleted).
    NeverScheduled,
    /// None of the GPU types it allows exists in its partition.
    GpuTypeUnavailable,
    /// The policy runs a job on GPUs of one type only (Gavel), and no GPU
    /// type of its partition has as many GPUs as it asks for
    /// ([`crate::workload::admission::AdmissionRule::OneGpuType`]).
    ExceedsGpuTypeGroup,
}

impl SkipReason {
    /// The reason's name as written in outputs.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::ZeroGpus => "zero_gpus",
            SkipReason::NonpositiveDuration => "nonpositive_duration",
            SkipReason::UnknownVc => "unknown_vc",
            SkipReason::ExceedsCluster => "exceeds_cluster",
            SkipReason::ExceedsVc => "exceeds_vc",
            SkipReason::Unplaceable => "unplaceable",
            SkipReason::ExceedsGpuMemory => "exceeds_gpu_memory",
            SkipReason::NeverScheduled => "never_scheduled",
            SkipReason::GpuTypeUnavailable => "gpu_type_unavailable",
            SkipReason::ExceedsGpuTypeGroup => "exceeds_gpu_type_group",
        }
    }
}

/// A trace row that was not simulated, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    /// The job's id in the trace.
    pub name: CompactString,
    /// 1-based line in the trace file (0 for generated jobs).
    pub line: u64,
    /// GPUs it asked for.
    pub gpus: u32,
    /// Why it was skipped.
    pub reason: SkipReason,
}
