//! Per-job resource figures for GPU sharing: computation per iteration, an
//! SM-utilisation proxy and an IAWP-style resource vector.
//!
//! The profile database has no SM-utilisation measurements (Lucid's are
//! licensed for non-commercial use only and are not builtin), so
//! utilisation is a **proxy** (ours): the FLOP/s a job achieves alone on one
//! GPU divided by the GPU type's peak FP32 FLOP/s from the vendor data sheet,
//!
//! ```text
//! C_j    = gflops_per_sample(model) × local_bsz      GFLOP per iteration per GPU (training, fwd + bwd)
//! u_j(g) = min(1, C_j / iter_time_1gpu(model, type(g), local_bsz) / peak_gflops(type(g)))
//! ```
//!
//! with the iteration time from table interpolation ([`TableModel`]) on one
//! GPU. A model whose GFLOPs are unknown (`NaN` in `models.csv`), a job
//! without a model, or a GPU type without a data-sheet peak has no proxy;
//! callers then use the job's guaranteed share (milli-GPU / 1,000) or 1.0
//! (a whole-GPU job is taken to keep its GPU busy: an upper estimate).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::db::ProfileDb;
use super::model::{PerfModel, TableModel};
use crate::job::JobSpec;

/// Peak FP32 throughput of one GPU, TFLOP/s, from vendor data sheets (boost
/// clock): K80 8.73 per board = 4.37 per GPU die (the cluster's GPU unit),
/// P100 (PCIe) 9.3, V100 (PCIe) 14 / (SXM2) 15.7 (we use 15.7), T4 8.1,
/// A100 19.5, A10 31.2, RTX 2080 Ti 13.45, Quadro RTX 6000 16.3. `None` for
/// other names (e.g. the Alibaba trace's undisclosed `G2`, `G3`).
pub fn peak_tflops(gpu_type: &str) -> Option<f64> {
    let t = gpu_type.to_ascii_lowercase();
    Some(match t.as_str() {
        "k80" => 4.365,
        "p100" => 9.3,
        "v100" | "v100m16" | "v100m32" => 15.7,
        "t4" => 8.1,
        "a100" => 19.5,
        "a10" => 31.2,
        "rtx2080ti" => 13.45,
        "quadro6000" => 16.3,
        _ => return None,
    })
}

/// The job's computation per iteration per GPU, GFLOP (training: the
/// database's per-sample GFLOPs are forward + backward), or `None` when
/// the model or its GFLOPs are unknown. Spec §4.2's `C_j(s)`.
pub fn compute_gflop_per_iter(db: &ProfileDb, spec: &JobSpec) -> Option<f64> {
    let model = spec.model()?;
    let bsz = spec.local_bsz()?;
    let g = db.model_info(model)?.gflops_per_sample;
    (g.is_finite() && g > 0.0).then_some(g * f64::from(bsz))
}

/// A moldable task's GPU memory per GPU on `gpus` GPUs, MiB (rounded up):
/// the database's figure ([`ProfileDb::gpu_mem_mib`]: measured, else the
/// analytical weights + gradients + optimiser state + activations × per-GPU
/// batch + framework overhead of spec §4.2's `M_j(s)`) at the per-GPU batch
/// [`crate::job::TaskSpec::local_bsz`]. `None` for a job that is not a task
/// or whose model the database does not know. (Inference is estimated as
/// training: the database has no inference memory figure; an upper bound.)
pub fn task_gpu_mem_mib(db: &ProfileDb, spec: &JobSpec, gpus: u32) -> Option<u64> {
    let t = spec.task.as_deref()?;
    db.gpu_mem_mib(spec.model()?, t.local_bsz(gpus)).map(|m| m.ceil() as u64)
}

/// The SM-utilisation proxy `u_j` (module docs) over one profile database,
/// memoised by (model, per-GPU batch, GPU type). Owned by whoever reads it
/// (the engine's sharing figures, the IAWP policy), one per run: the memo
/// holds only pure results, looked up and never iterated, so it changes no
/// output.
pub struct SmUtil {
    table: TableModel<Arc<ProfileDb>>,
    memo: Mutex<HashMap<(String, u32, String), Option<f64>>>,
}

impl SmUtil {
    /// The proxy over the run's database `db`.
    pub fn new(db: Arc<ProfileDb>) -> Self {
        SmUtil { table: TableModel::new(db), memo: Mutex::new(HashMap::new()) }
    }

    /// The proxy `u_j` of `model` at per-GPU batch `bsz` alone on one
    /// `gpu_type` GPU, or `None` (module docs).
    pub fn proxy(&self, model: &str, bsz: u32, gpu_type: &str) -> Option<f64> {
        let key = (model.to_string(), bsz, gpu_type.to_ascii_lowercase());
        let mut memo = self.memo.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&v) = memo.get(&key) {
            return v;
        }
        let v = (|| {
            let peak = peak_tflops(gpu_type)? * 1000.0;
            let g = self.table.db().model_info(model)?.gflops_per_sample;
            if !(g.is_finite() && g > 0.0) || bsz == 0 {
                return None;
            }
            let t = self.table.iter_time(model, &key.2, bsz, &[1]).iter_time_s;
            (t.is_finite() && t > 0.0).then(|| (g * f64::from(bsz) / t / peak).min(1.0))
        })();
        memo.insert(key, v);
        v
    }

    /// A job's SM-utilisation estimate on a `gpu_type` GPU: the proxy when
    /// the job has a model and batch with known GFLOPs, else [`held_share`].
    pub fn job(&self, spec: &JobSpec, gpu_type: &str) -> f64 {
        if let (Some(m), Some(b)) = (spec.model(), spec.local_bsz())
            && let Some(u) = self.proxy(m, b, gpu_type)
        {
            return u;
        }
        held_share(spec)
    }
}

/// The SM-utilisation estimate of a job without a proxy: its guaranteed
/// share (milli-GPU / 1,000), else 1.0 (a whole-GPU job is taken to keep
/// its GPU busy: an upper estimate).
pub fn held_share(spec: &JobSpec) -> f64 {
    match spec.gpu_milli() {
        Some(k) if k > 0 && k < 1000 => f64::from(k) / 1000.0,
        _ => 1.0,
    }
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na * nb) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_and_cosine_by_hand() {
        assert_eq!(peak_tflops("K80"), Some(4.365));
        assert_eq!(peak_tflops("G2"), None);
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        // A proxy exists for a measured model with known GFLOPs and lies in (0, 1].
        let sm = SmUtil::new(Arc::new(ProfileDb::builtin()));
        let u = sm.proxy("resnet50-imagenet", 32, "k80").expect("resnet50 has GFLOPs and K80 rows");
        assert!(u > 0.0 && u <= 1.0, "{u}");
        assert_eq!(sm.proxy("resnet50-imagenet", 32, "K80"), Some(u), "the memo keys GPU types case-blind");
        assert_eq!(sm.proxy("a3c-pong", 4, "k80"), None, "GFLOPs unknown");
    }
}
