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
//!
//! **Host load** ([`HostLoad`], ours; LDWP's per-node CPU and
//! network inputs, `specs/policies.md` §5.1). No profile in
//! `../shared/profiles` measures a training job's CPU use or its network
//! bytes (Synergy's CPU-sensitivity data was not extracted), so both are a
//! model of ours from what the database does hold (iteration time, per-GPU
//! batch, parameter count):
//!
//! ```text
//! it_j    = iter_time(model, type, local_bsz, [g])          s, table interpolation, g GPUs in one node
//! cores_j = g × min(CORES_PER_GPU, 1 + local_bsz / it_j / SAMPLES_PER_CORE_S)
//! comm_j  = 2 (g − 1) × 4 B × params_m × 10⁶ / it_j / 10⁶   MB/s
//! ```
//!
//! `cores_j`: one core drives each GPU's training process, and the input
//! pipeline (decode, augmentation) takes one more core per
//! [`SAMPLES_PER_CORE_S`] samples/s that GPU consumes, at most
//! [`CORES_PER_GPU`] per GPU; a node has `CORES_PER_GPU` cores per GPU.
//! `comm_j`: a ring all-reduce of the fp32 gradients every iteration, in
//! which each of the `g` GPUs sends (and receives) `2 (g − 1)/g` of the
//! gradient: the bytes the job moves over its node's interconnect per
//! second (one-GPU jobs move none). A job without a model, with unknown
//! parameters (`NaN`) or without a finite iteration time gets one core per
//! GPU and no traffic.

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

/// Node CPU cores per GPU of the host-load model (module docs), ours: the
/// paper's testbed nodes have 16 cores for 2-4 GPUs (`specs/policies.md`
/// §5.4); 4 per GPU is also the per-GPU cap of a job's cores.
pub const CORES_PER_GPU: f64 = 4.0;

/// Samples per second one CPU core prepares for training (decode and
/// augment), ours: the order of one core's ImageNet JPEG pipeline. Module
/// docs.
pub const SAMPLES_PER_CORE_S: f64 = 250.0;

/// A running job's host-side load on its node (module docs; ours).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostLoad {
    /// CPU cores busy, cores.
    pub cpu_cores: f64,
    /// Gradient all-reduce traffic, MB/s (10⁶ B/s) sent, and as much received.
    pub comm_mb_s: f64,
}

/// The memo key of [`SmUtil::host_load_of`]: (model, per-GPU batch, GPU type, GPUs).
type HostKey = (String, u32, String, u32);

/// The SM-utilisation proxy `u_j` (module docs) over one profile database,
/// memoised by (model, per-GPU batch, GPU type). Owned by whoever reads it
/// (the engine's sharing figures, the IAWP policy), one per run: the memo
/// holds only pure results, looked up and never iterated, so it changes no
/// output.
pub struct SmUtil {
    table: TableModel<Arc<ProfileDb>>,
    memo: Mutex<HashMap<(String, u32, String), Option<f64>>>,
    host_memo: Mutex<HashMap<HostKey, Option<HostLoad>>>,
}

impl SmUtil {
    /// The proxy over the run's database `db`.
    pub fn new(db: Arc<ProfileDb>) -> Self {
        SmUtil { table: TableModel::new(db), memo: Mutex::new(HashMap::new()), host_memo: Mutex::new(HashMap::new()) }
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

impl SmUtil {
    /// The host load of `model` at per-GPU batch `bsz` on `gpus` GPUs of
    /// `gpu_type` in one node, or `None` when the model's parameters or
    /// iteration time are unknown (module docs). Memoised.
    pub fn host_load_of(&self, model: &str, bsz: u32, gpu_type: &str, gpus: u32) -> Option<HostLoad> {
        let key = (model.to_string(), bsz, gpu_type.to_ascii_lowercase(), gpus);
        let mut memo = self.host_memo.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&v) = memo.get(&key) {
            return v;
        }
        let v = (|| {
            let p = self.table.db().model_info(model)?.params_m;
            if !(p.is_finite() && p > 0.0) || bsz == 0 || gpus == 0 {
                return None;
            }
            let it = self.table.iter_time(model, &key.2, bsz, &[gpus]).iter_time_s;
            if !(it.is_finite() && it > 0.0) {
                return None;
            }
            let g = f64::from(gpus);
            let per_gpu = (1.0 + f64::from(bsz) / it / SAMPLES_PER_CORE_S).min(CORES_PER_GPU);
            Some(HostLoad { cpu_cores: g * per_gpu, comm_mb_s: 2.0 * (g - 1.0) * 4.0 * p / it })
        })();
        memo.insert(key, v);
        v
    }

    /// A job's host load on `gpu_type` GPUs of one node (module docs): the
    /// model's when known, else one core per GPU and no traffic.
    pub fn host_load(&self, spec: &JobSpec, gpu_type: &str) -> HostLoad {
        if let (Some(m), Some(b)) = (spec.model(), spec.local_bsz())
            && let Some(h) = self.host_load_of(m, b, gpu_type, spec.gpus)
        {
            return h;
        }
        HostLoad { cpu_cores: f64::from(spec.gpus), comm_mb_s: 0.0 }
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

    /// The host-load model by hand from measured rows of `throughput.csv`
    /// and `models.csv` (the table returns a measured point exactly).
    #[test]
    fn host_load_by_hand() {
        let sm = SmUtil::new(Arc::new(ProfileDb::builtin()));
        // resnet50-imagenet (25.557 M params), K80, batch 16, 4 GPUs in one
        // server: 0.519204 s per iteration. Cores: 4 × (1 + 16/0.519204/250)
        // = 4 × 1.1232656 = 4.4930625; traffic: 2 × 3 × 4 B × 25.557e6 /
        // 0.519204 s = 1,181.3622 MB/s.
        let h = sm.host_load_of("resnet50-imagenet", 16, "K80", 4).unwrap();
        assert!((h.cpu_cores - 4.4930625).abs() < 1e-6, "{h:?}");
        assert!((h.comm_mb_s - 1181.3622).abs() < 1e-3, "{h:?}");
        // One GPU (0.434684 s): 1 + 16/0.434684/250 = 1.1472334 cores, no traffic.
        let h = sm.host_load_of("resnet50-imagenet", 16, "k80", 1).unwrap();
        assert!((h.cpu_cores - 1.1472334).abs() < 1e-6 && h.comm_mb_s == 0.0, "{h:?}");
        // ncf-ml1m, A100, batch 32, 1 GPU (0.0092476 s): 3,460 samples/s would
        // need 14.8 cores; capped at CORES_PER_GPU = 4.
        assert_eq!(sm.host_load_of("ncf-ml1m", 32, "a100", 1).unwrap().cpu_cores, 4.0);
        // Unknown parameters (transformer-multi30k: NaN) or no model: one core per GPU, no traffic.
        assert_eq!(sm.host_load_of("transformer-multi30k", 64, "k80", 2), None);
        let spec = JobSpec {
            id: crate::ids::JobId(0),
            name: "j".into(),
            submit: crate::time::SimTime::from_secs(0),
            duration_ms: 1000,
            gpus: 3,
            vc: crate::ids::VcId(0),
            recorded_shape: false,
            line: 0,
            recorded_split: vec![3].into(),
            task: None,
            extra: None,
        };
        assert_eq!(sm.host_load(&spec, "k80"), HostLoad { cpu_cores: 3.0, comm_mb_s: 0.0 });
    }
}
