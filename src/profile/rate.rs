//! The profile-driven rate model: a job's speed relative to the speed it had
//! in the trace, from a performance model's iteration times.

use std::sync::Mutex;

use super::RateModel;
use super::memo::KeyMemo;
use super::model::{FallbackCounter, Fallbacks, PerfModel};
use crate::cluster::Cluster;
use crate::ids::GpuId;
use crate::job::JobSpec;

/// Rate = iteration time under the job's recorded split / iteration time on
/// its actual placement, both from `model`, on the GPU type of the job's first
/// GPU. A job placed as recorded runs exactly its trace duration (rate 1.0,
/// the model is not consulted); otherwise it runs at the modelled ratio, which
/// follows the measurements (on some GPU types they favour spreading). Jobs
/// without a model or batch run at trace speed. The counters count the rate
/// computations that consulted the model and the fallbacks either of the two
/// estimates needed.
///
/// Rates are memoised by what they read (model, per-GPU or global batch,
/// GPU type, actual and recorded split; [`super::memo`]): a repeated
/// question, such as the engine re-rating a tenant whose co-tenants changed,
/// costs one lookup, gives the same `f64` and counts as the computation did.
pub struct ProfileRate {
    model: Box<dyn PerfModel>,
    counter: FallbackCounter,
    name: &'static str,
    memo: Mutex<KeyMemo<(f64, Fallbacks)>>,
}

impl ProfileRate {
    /// A rate model over `model`, named `name` in outputs.
    pub fn new(model: Box<dyn PerfModel>, name: &'static str) -> Self {
        ProfileRate { model, counter: FallbackCounter::default(), name, memo: Mutex::new(KeyMemo::default()) }
    }
}

impl ProfileRate {
    /// The rate of a job of `model` at per-GPU batch `bsz` on `n` GPUs of
    /// `gpu_type` split as `actual`, not placed as recorded (the memo's slow
    /// path), and the fallbacks to count.
    fn compute(
        &self,
        model: &str,
        bsz: u32,
        gpu_type: &str,
        job: &JobSpec,
        n: usize,
        actual: &[u32],
    ) -> (f64, Fallbacks) {
        if let Some(task) = &job.task {
            // A moldable task: its work is its single-GPU latency at the global
            // batch; on n GPUs each steps global / n samples (rounded to the
            // nearest whole sample). Inference has no gradient exchange, so
            // its GPUs step as if alone (single-GPU iteration time).
            let n = n as u32;
            let local = ((f64::from(task.global_bsz) / f64::from(n)).round() as u32).max(1);
            let split: &[u32] = if task.inference { &[1] } else { actual };
            let now = self.model.iter_time(model, gpu_type, local, split);
            let single = self.model.iter_time(model, gpu_type, task.global_bsz, &[1]);
            return (single.iter_time_s / now.iter_time_s, now.fallbacks.or(single.fallbacks));
        }
        let now = self.model.iter_time(model, gpu_type, bsz, actual);
        let recorded = self.model.iter_time(model, gpu_type, bsz, &job.recorded_split);
        (recorded.iter_time_s / now.iter_time_s, now.fallbacks.or(recorded.fallbacks))
    }
}

impl RateModel for ProfileRate {
    fn name(&self) -> &'static str {
        self.name
    }

    fn rate(&self, job: &JobSpec, gpus: &[GpuId], cluster: &Cluster) -> f64 {
        let gpu_type = &cluster.node(cluster.node_of(gpus[0])).gpu_type;
        self.rate_split(job, gpu_type, &cluster.split_of(gpus))
    }

    fn rate_on(&self, job: &JobSpec, gpu_type: &str, split: &[u32]) -> Option<f64> {
        Some(self.rate_split(job, gpu_type, split))
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counter.counts()
    }
}

impl ProfileRate {
    /// [`RateModel::rate`] of `job` on GPUs of `gpu_type` split over nodes
    /// as `actual` (GPUs per node): the one computation behind
    /// [`RateModel::rate`] and [`RateModel::rate_on`].
    fn rate_split(&self, job: &JobSpec, gpu_type: &str, actual: &[u32]) -> f64 {
        let (Some(model), Some(bsz)) = (job.model(), job.local_bsz()) else { return 1.0 };
        if job.task.is_none() && actual[..] == job.recorded_split[..] {
            // Placed as recorded: the trace's own speed, no model needed.
            return 1.0;
        }
        // The memo's key: every input of the computation below.
        let mut memo = self.memo.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        memo.start();
        match &job.task {
            Some(task) => {
                memo.push(1 + u32::from(task.inference));
                memo.push(task.global_bsz);
            }
            None => {
                memo.push(0);
                memo.push(bsz);
                memo.push(job.recorded_split.len() as u32);
                job.recorded_split.iter().for_each(|&n| memo.push(n));
            }
        }
        memo.push_name(model);
        memo.push_name(gpu_type);
        actual.iter().for_each(|&n| memo.push(n));
        if let Some((rate, fallbacks)) = memo.get() {
            self.counter.record(fallbacks);
            return rate;
        }
        let n = actual.iter().map(|&g| g as usize).sum();
        let (rate, fallbacks) = self.compute(model, bsz, gpu_type, job, n, actual);
        memo.insert((rate, fallbacks));
        self.counter.record(fallbacks);
        rate
    }
}
