//! The profile-driven rate model: a job's speed relative to the speed it had
//! in the trace, from a performance model's iteration times.

use super::RateModel;
use super::model::{FallbackCounter, PerfModel};
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
pub struct ProfileRate {
    model: Box<dyn PerfModel>,
    counter: FallbackCounter,
    name: &'static str,
}

impl ProfileRate {
    /// A rate model over `model`, named `name` in outputs.
    pub fn new(model: Box<dyn PerfModel>, name: &'static str) -> Self {
        ProfileRate { model, counter: FallbackCounter::default(), name }
    }
}

impl RateModel for ProfileRate {
    fn name(&self) -> &'static str {
        self.name
    }

    fn rate(&self, job: &JobSpec, gpus: &[GpuId], cluster: &Cluster) -> f64 {
        let (Some(model), Some(bsz)) = (job.model(), job.local_bsz()) else { return 1.0 };
        let gpu_type = &cluster.node(cluster.node_of(gpus[0])).gpu_type;
        let actual = cluster.split_of(gpus);
        if let Some(task) = &job.task {
            // A moldable task: its work is its single-GPU latency at the global
            // batch; on n GPUs each steps global / n samples (rounded to the
            // nearest whole sample). Inference has no gradient exchange, so
            // its GPUs step as if alone (single-GPU iteration time).
            let n = gpus.len() as u32;
            let local = ((f64::from(task.global_bsz) / f64::from(n)).round() as u32).max(1);
            let split: &[u32] = if task.inference { &[1] } else { &actual };
            let now = self.model.iter_time(model, gpu_type, local, split);
            let single = self.model.iter_time(model, gpu_type, task.global_bsz, &[1]);
            self.counter.record(now.fallbacks.or(single.fallbacks));
            return single.iter_time_s / now.iter_time_s;
        }
        if actual[..] == job.recorded_split[..] {
            // Placed as recorded: the trace's own speed, no model needed.
            return 1.0;
        }
        let now = self.model.iter_time(model, gpu_type, bsz, &actual);
        let recorded = self.model.iter_time(model, gpu_type, bsz, &job.recorded_split);
        self.counter.record(now.fallbacks.or(recorded.fallbacks));
        recorded.iter_time_s / now.iter_time_s
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counter.counts()
    }
}
