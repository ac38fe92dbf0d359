//! Work-defined jobs: how a job defined by the work it must do (an
//! application trained to a target, Pollux's model, OSDI'21 §3) progresses
//! on a configuration of GPUs and batch. Its progress rate is its goodput,
//! throughput × statistical efficiency, constant between the model's
//! breakpoints (Pollux's simulator: epoch boundaries), so the engine moves it
//! from event to event, never by ticks.
//!
//! [`ProgressModel`] is what the engine and the elastic policies read; the
//! Pollux application model implements it from the Pollux measurements.

/// One configuration of a work-defined job: how its replicas are spread
/// over nodes and its batch (Pollux's `placement`, `atomic_bsz`,
/// `accum_steps`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElasticConfig {
    /// GPUs (one replica each) on each node the job uses, in node order,
    /// without zeros (Pollux's placement tuple, e.g. `[4, 2]`).
    pub per_node: Vec<u32>,
    /// Per-GPU micro-batch of one step, samples (Pollux's `atomic_bsz`).
    pub atomic_bsz: u32,
    /// Gradient-accumulation steps beyond the first (0 = none).
    pub accum_steps: u32,
}

impl ElasticConfig {
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
        let replicas = per_node.iter().sum::<u32>().max(1);
        ElasticConfig { per_node: per_node.to_vec(), atomic_bsz: batch.div_ceil(replicas).max(1), accum_steps: 0 }
    }
}
