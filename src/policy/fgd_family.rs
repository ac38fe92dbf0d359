//! The six node-scoring rules of the FGD paper's evaluation (Weng et al.,
//! "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
//! Fragmentation Gradient Descent", USENIX ATC'23, §6.1 "Baselines"), as its
//! artifact implements them (github.com/hkust-adsl/kubernetes-scheduler-simulator,
//! `pkg/simulator/plugin/*_score.go`, commit 8f3d641): Random, DotProd,
//! GpuClustering, GpuPacking, BestFit and FGD.
//!
//! They score nodes of the artifact's resource model, which is not
//! [`crate::cluster::Cluster`]'s: a node has CPU (milli-cores), memory (MiB),
//! a GPU type and per GPU the milli-GPU left (1000 = a whole GPU); a pod asks
//! for CPU, memory, `gpus` GPUs of `milli` milli-GPU each (`milli < 1000`
//! only for one-GPU sharing pods) and optionally a set of GPU types. The
//! fill experiment ([`crate::experiment::fill`]) drives them; they are not
//! placements of the event-driven engine (whose cluster has no CPU
//! dimension and whose `--placement fgd` is [`super::fgd`]).
//!
//! Each rule is the artifact's Kubernetes score plugin: an integer score in
//! 0..=100 per feasible node (the filter: CPU, memory, GPU type, enough GPUs
//! with the milli-GPU left), the node of highest score wins, ties going to
//! a seeded random order of the nodes as in the artifact's patched
//! kube-scheduler ([`select_host`]); then the GPUs
//! on that node are chosen by the rule's GPU selection (the artifact's
//! `-gpusel`: `random` for Random, the plugin's own for FGD, best fit for
//! the others, `generate_run_scripts.py`).

use rand::Rng;

/// A whole GPU in milli-GPU.
pub const MILLI: u32 = 1000;
/// The artifact's score scale (`framework.MaxNodeScore`).
const MAX_SCORE: i64 = 100;
/// The artifact's normalising CPU, milli-cores (`MaxSpecCpu`, const.go).
pub const MAX_SPEC_CPU: f64 = 128_000.0;
/// The artifact's normalising GPU, milli-GPU (`MaxSpecGpu`: 8 GPUs).
pub const MAX_SPEC_GPU: i64 = 8000;

/// A node as the artifact sees it (`simontype.NodeResource`).
#[derive(Clone, Debug, PartialEq)]
pub struct ShareNode {
    /// CPU capacity and CPU left, milli-cores.
    pub cpu_cap: u64,
    /// CPU left, milli-cores.
    pub cpu_left: u64,
    /// Memory left, MiB (the kube-scheduler's resource filter; no score reads it).
    pub mem_left: u64,
    /// GPU type index (into the run's type table).
    pub gpu_type: u16,
    /// Milli-GPU left per GPU (1000: idle).
    pub gpu_left: Vec<u32>,
    /// GPU pods on the node by GpuClustering's affinity tag: index 0
    /// sharing pods, `k` pods of `k` whole GPUs (`GpuAffinity`).
    pub affinity: Vec<u32>,
}

/// A pod as the artifact sees it (`simontype.PodResource` plus memory).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharePod {
    /// CPU request, milli-cores.
    pub cpu: u64,
    /// Memory request, MiB.
    pub mem: u64,
    /// GPUs requested (0: a CPU-only pod).
    pub gpus: u32,
    /// Milli-GPU per GPU (1000 for whole GPUs, 0 for a CPU-only pod).
    pub milli: u32,
    /// Allowed GPU types as a bit set over the run's type table (0: any).
    pub types: u64,
}

impl SharePod {
    /// Milli-GPU over all its GPUs (`TotalMilliGpu`).
    pub fn total_milli(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.milli)
    }
    /// GpuClustering's affinity tag: `None` for a CPU-only pod, 0 for a
    /// sharing pod, `k` for `k` whole GPUs (`GetGpuAffinityFromPodAnnotation`).
    pub fn affinity(&self) -> Option<usize> {
        match (self.gpus, self.milli) {
            (0, _) => None,
            (1, m) if m < MILLI => Some(0),
            (k, _) => Some(k as usize),
        }
    }
    fn accessible(&self, node: &ShareNode) -> bool {
        self.types == 0 || self.types >> node.gpu_type & 1 == 1
    }
}

impl ShareNode {
    /// An idle node.
    pub fn new(cpu: u64, mem: u64, gpu_type: u16, gpus: u32) -> Self {
        ShareNode {
            cpu_cap: cpu,
            cpu_left: cpu,
            mem_left: mem,
            gpu_type,
            gpu_left: vec![MILLI; gpus as usize],
            affinity: Vec::new(),
        }
    }
    /// Milli-GPU left over all GPUs.
    pub fn total_left(&self) -> i64 {
        self.gpu_left.iter().map(|&m| i64::from(m)).sum()
    }
    fn fully_free(&self) -> usize {
        self.gpu_left.iter().filter(|&&m| m == MILLI).count()
    }
    /// True if at least `pod.gpus` GPUs have `pod.milli` left
    /// (`CanNodeHostPodOnGpuMemory`; true for a CPU-only pod).
    pub fn hosts_gpus(&self, pod: &SharePod) -> bool {
        pod.gpus == 0 || self.gpu_left.iter().filter(|&&m| m >= pod.milli).count() >= pod.gpus as usize
    }
    /// The filter: CPU, memory, and for a GPU pod the GPU type and enough
    /// GPUs with the milli-GPU left (kube-scheduler's NodeResourcesFit and
    /// the artifact's `Open-Gpu-Share` filter).
    pub fn feasible(&self, pod: &SharePod) -> bool {
        self.cpu_left >= pod.cpu
            && self.mem_left >= pod.mem
            && (pod.gpus == 0 || (!self.gpu_left.is_empty() && pod.accessible(self) && self.hosts_gpus(pod)))
    }
    /// The whole GPUs an exclusive pod takes: the first fully free ones in
    /// index order (`AllocateExclusiveGpuId`).
    fn exclusive(&self, pod: &SharePod) -> Vec<usize> {
        (0..self.gpu_left.len()).filter(|&i| self.gpu_left[i] == MILLI).take(pod.gpus as usize).collect()
    }
    /// The sharing GPU with the least milli-GPU left that fits (first such in
    /// index order; `allocateGpuIdBasedOnBestFit`), or the exclusive GPUs.
    pub fn best_fit_gpus(&self, pod: &SharePod) -> Vec<usize> {
        if pod.gpus == 0 {
            return Vec::new();
        }
        if pod.milli < MILLI {
            let mut best: Option<usize> = None;
            for (i, &m) in self.gpu_left.iter().enumerate() {
                if m >= pod.milli && best.is_none_or(|b| m < self.gpu_left[b]) {
                    best = Some(i);
                }
            }
            return best.into_iter().collect();
        }
        self.exclusive(pod)
    }
    /// Takes `pod` on GPUs `gpus` (positions on the node).
    pub fn take(&mut self, pod: &SharePod, gpus: &[usize]) {
        self.cpu_left -= pod.cpu;
        self.mem_left -= pod.mem;
        for &g in gpus {
            self.gpu_left[g] -= pod.milli;
        }
        if let Some(a) = pod.affinity() {
            if self.affinity.len() <= a {
                self.affinity.resize(a + 1, 0);
            }
            self.affinity[a] += 1;
        }
    }
}

/// FGD's target workload (`GetTypicalPods`): the most frequent pod shapes
/// (CPU, GPUs, milli-GPU, GPU types) of the pod list, CPU-only pods
/// included, most frequent first, taken until they cover 95 % of the pods
/// (`podPopularityThreshold: 95`, `podIncreaseStep: 1`,
/// `isInvolvedCpuPods: true`, the artifact's defaults), their shares
/// renormalised to sum to 1.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypicalPods {
    /// (pod shape, share); memory is 0 (the artifact's shapes have none).
    pub pods: Vec<(SharePod, f64)>,
}

impl TypicalPods {
    /// The target workload of `pods` (ties in frequency: by shape, ascending,
    /// so the list is deterministic; the artifact's order among ties is its
    /// sort's).
    pub fn from_pods(pods: &[SharePod]) -> Self {
        let mut counts: std::collections::HashMap<(u64, u32, u32, u64), u64> = std::collections::HashMap::new();
        for p in pods {
            *counts.entry((p.cpu, p.gpus, p.milli, p.types)).or_default() += 1;
        }
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let total = pods.len() as f64;
        let mut cum = 0u64;
        let mut n = 0;
        while n < v.len() && (cum as f64) < 0.95 * total {
            cum += v[n].1;
            n += 1;
        }
        let kept = cum.max(1) as f64;
        let pods = v[..n]
            .iter()
            .map(|&((cpu, gpus, milli, types), c)| (SharePod { cpu, mem: 0, gpus, milli, types }, c as f64 / kept))
            .collect();
        TypicalPods { pods }
    }

    /// FGD's fragmentation of a node, milli-GPU (`NodeGpuShareFragAmountScore`,
    /// the paper's `F_n(M)`): over the target pods, share × the node's idle
    /// milli-GPU that pod cannot use — all of it when the pod cannot run
    /// there (too little CPU, wrong GPU type, too few GPUs with its milli-GPU
    /// left), else the GPUs with less than its milli-GPU left; a CPU-only
    /// target pod counts all idle GPU as fragment too (its classes XL/XR
    /// are not Q3, the only class the artifact splits).
    pub fn node_frag(&self, node: &ShareNode) -> f64 {
        let left: i64 = node.total_left();
        self.pods
            .iter()
            .map(|(p, share)| {
                let usable = p.milli > 0 && p.accessible(node) && node.hosts_gpus(p) && node.cpu_left >= p.cpu;
                let frag = if usable {
                    node.gpu_left.iter().filter(|&&m| m < p.milli).map(|&m| i64::from(m)).sum::<i64>()
                } else {
                    left
                };
                share * frag as f64
            })
            .sum()
    }
}

/// The six rules (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FgdScheduler {
    /// A feasible node drawn uniformly; a sharing pod's GPU drawn uniformly
    /// among those that fit (`RandomScore`, `-gpusel random`).
    Random,
    /// Tetris's alignment as the artifact scores it (`DotProductScore`,
    /// `-dimext merge -norm max`): node vector (CPU left / 128 cores, GPU
    /// left / 8 GPUs), pod vector likewise; score = 100 × (1 − dot / 2), so
    /// the node whose free resources align *least* with the pod wins.
    DotProd,
    /// Pods of one kind together (`GpuClusteringScore`): a node whose GPU pods
    /// are all of the pod's kind (sharing, or k whole GPUs) scores 75..100,
    /// one that has the kind among others 50..75, an idle node 25..50, the
    /// rest 0..25; within a band, the more GPU in use the higher.
    GpuClustering,
    /// Packing onto used GPUs (`GpuPackingScore`): a pod that fits on
    /// partly used GPUs scores 50..100 (less left on them, higher), one that
    /// needs whole GPUs of a used node 33..50, an idle node below 33.
    GpuPacking,
    /// Least resources left after placement (`BestFitScore`): 100 × (1 −
    /// (½ CPU left after / 128 cores + ½ GPU left after / 8 GPUs)), then
    /// scaled min..max to 0..100 over the feasible nodes.
    BestFit,
    /// Fragmentation gradient descent: score = ⌊100 × sigmoid((F_n before −
    /// F_n after) / 1000)⌋ with [`TypicalPods::node_frag`]; a sharing pod's
    /// GPU is the first of highest score (`FGDScore`).
    Fgd,
}

crate::names::value_names!(FgdScheduler {
    Random => "random",
    DotProd => "dotprod",
    GpuClustering => "gpu-clustering",
    GpuPacking => "gpu-packing",
    BestFit => "bestfit",
    Fgd => "fgd",
});

impl FgdScheduler {
    /// All six in the paper's order.
    pub const ALL: [FgdScheduler; 6] = [
        FgdScheduler::Random,
        FgdScheduler::DotProd,
        FgdScheduler::GpuClustering,
        FgdScheduler::GpuPacking,
        FgdScheduler::BestFit,
        FgdScheduler::Fgd,
    ];
    /// The name as configuration files spell it.
    pub fn name(self) -> &'static str {
        match self {
            FgdScheduler::Random => "random",
            FgdScheduler::DotProd => "dotprod",
            FgdScheduler::GpuClustering => "gpu-clustering",
            FgdScheduler::GpuPacking => "gpu-packing",
            FgdScheduler::BestFit => "bestfit",
            FgdScheduler::Fgd => "fgd",
        }
    }
    /// The paper's figure label.
    pub fn label(self) -> &'static str {
        match self {
            FgdScheduler::Random => "Random",
            FgdScheduler::DotProd => "DotProd",
            FgdScheduler::GpuClustering => "Clustering",
            FgdScheduler::GpuPacking => "Packing",
            FgdScheduler::BestFit => "BestFit",
            FgdScheduler::Fgd => "FGD",
        }
    }
    /// The rule by name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// DotProd's score of a feasible node (`calculateDotProductScore`).
pub fn dotprod_score(node: &ShareNode, pod: &SharePod) -> i64 {
    let nv = [node.cpu_left as f64 / MAX_SPEC_CPU, node.total_left() as f64 / MAX_SPEC_GPU as f64];
    let pv = [pod.cpu as f64 / MAX_SPEC_CPU, pod.total_milli() as f64 / MAX_SPEC_GPU as f64];
    let dot = (nv[0] * pv[0] + nv[1] * pv[1]) / 2.0;
    (MAX_SCORE as f64 * (1.0 - dot)) as i64
}

/// GpuClustering's score (gpu_clustering_score.go, its integer arithmetic).
pub fn clustering_score(node: &ShareNode, pod: &SharePod) -> i64 {
    let Some(a) = pod.affinity() else { return 0 };
    let used = MAX_SCORE / 4 * (MAX_SPEC_GPU - node.total_left()) / MAX_SPEC_GPU;
    let kinds = node.affinity.iter().filter(|&&c| c > 0).count();
    let has = node.affinity.get(a).is_some_and(|&c| c > 0);
    let band = match (has, kinds) {
        (true, 1) => 3,
        (true, _) => 2,
        (false, 0) => 1,
        (false, _) => 0,
    };
    used + MAX_SCORE * band / 4
}

/// GpuPacking's score (`getPackingScore`).
pub fn packing_score(node: &ShareNode, pod: &SharePod) -> i64 {
    if pod.milli == 0 {
        return 0;
    }
    let free = node.fully_free() as i64;
    if free == node.gpu_left.len() as i64 {
        return (MAX_SCORE / 3 - free).max(free);
    }
    let mut order: Vec<usize> = (0..node.gpu_left.len()).collect();
    order.sort_by_key(|&i| node.gpu_left[i]); // stable: least left first, then index
    let mut need = pod.gpus;
    let (mut whole, mut on_used) = (0i64, 0i64);
    for i in order {
        if need == 0 {
            break;
        }
        let m = node.gpu_left[i];
        if pod.milli <= m {
            need -= 1;
            if m == MILLI {
                whole += 1;
            }
            on_used += i64::from(m) * 100 / i64::from(MILLI);
        }
    }
    if whole > 0 {
        return (MAX_SCORE / 2 - whole).max(MAX_SCORE / 3);
    }
    (MAX_SCORE - on_used / 10).max(MAX_SCORE / 2)
}

/// BestFit's raw score before min-max scaling (`getBestFitScore`).
pub fn bestfit_raw(node: &ShareNode, pod: &SharePod) -> i64 {
    let cpu = (node.cpu_left - pod.cpu) as f64 / MAX_SPEC_CPU * 0.5;
    let gpu = (node.total_left() - pod.total_milli() as i64) as f64 / MAX_SPEC_GPU as f64 * 0.5;
    ((1.0 - (cpu + gpu)) * MAX_SCORE as f64) as i64
}

/// FGD's score and GPUs (`calculateGpuShareFragExtendScore`); `frag_before`
/// is [`TypicalPods::node_frag`] of `node`.
pub fn fgd_score(node: &ShareNode, pod: &SharePod, typical: &TypicalPods, frag_before: f64) -> (i64, Vec<usize>) {
    let sig = |after: f64| {
        let x = (frag_before - after) / 1000.0;
        (1.0 / (1.0 + (-x).exp()) * MAX_SCORE as f64) as i64
    };
    let mut after = node.clone();
    if pod.gpus == 1 && pod.milli < MILLI {
        let mut best: Option<(i64, usize)> = None;
        for i in 0..node.gpu_left.len() {
            if node.gpu_left[i] >= pod.milli {
                after.cpu_left = node.cpu_left - pod.cpu;
                after.gpu_left[i] -= pod.milli;
                let s = sig(typical.node_frag(&after));
                after.gpu_left[i] = node.gpu_left[i];
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, i));
                }
            }
        }
        return best.map_or((0, Vec::new()), |(s, i)| (s, vec![i]));
    }
    let gpus = node.exclusive(pod);
    after.cpu_left = node.cpu_left - pod.cpu;
    for &g in &gpus {
        after.gpu_left[g] -= pod.milli;
    }
    (sig(typical.node_frag(&after)), gpus)
}

/// BestFit's min-max scaling over the feasible nodes (`NormalizeScore`).
pub fn normalise(scores: &mut [i64]) {
    let (lo, hi) = scores.iter().fold((i64::MAX, i64::MIN), |(l, h), &s| (l.min(s), h.max(s)));
    for s in scores.iter_mut() {
        *s = if hi == lo { 0 } else { (*s - lo) * MAX_SCORE / (hi - lo) };
    }
}

/// The node of highest score among `(node, score)`; ties go to the node of
/// least `rank`. The artifact's kube-scheduler is patched so
/// (`vendor/k8s.io/kubernetes/pkg/scheduler/core/generic_scheduler.go`,
/// `selectHost`: "for reproducibility, choose the smallest lexicographical
/// order if the score remains the same", the upstream random draw commented
/// out), and its node names start with a seeded random permutation index
/// (`syncClusterResourceList`: `rand.Perm`, `"%04d-" + name`): ties go to a
/// fixed random order of the nodes, the same for every pod of a run.
pub fn select_host(scored: &[(usize, i64)], rank: &[u32]) -> Option<usize> {
    scored.iter().min_by_key(|&&(n, s)| (std::cmp::Reverse(s), rank[n])).map(|&(n, _)| n)
}

/// A sharing pod's GPU drawn uniformly among those that fit, else the
/// exclusive GPUs (`allocateGpuIdBasedOnRandomFit`).
pub fn random_gpus<R: Rng>(node: &ShareNode, pod: &SharePod, rng: &mut R) -> Vec<usize> {
    if pod.gpus == 0 {
        return Vec::new();
    }
    if pod.milli < MILLI {
        let mut pick = None;
        let mut n = 0u32;
        for (i, &m) in node.gpu_left.iter().enumerate() {
            if m >= pod.milli {
                n += 1;
                if rng.gen_range(0..n) == 0 {
                    pick = Some(i);
                }
            }
        }
        return pick.into_iter().collect();
    }
    node.exclusive(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn pod(cpu: u64, gpus: u32, milli: u32) -> SharePod {
        SharePod { cpu, mem: 0, gpus, milli, types: 0 }
    }

    fn node(cpu_left: u64, left: &[u32]) -> ShareNode {
        ShareNode {
            cpu_cap: 64_000,
            cpu_left,
            mem_left: 1 << 20,
            gpu_type: 0,
            gpu_left: left.to_vec(),
            affinity: Vec::new(),
        }
    }

    #[test]
    fn filter_reads_cpu_memory_type_and_gpus() {
        let n = node(8000, &[1000, 500]);
        assert!(n.feasible(&pod(8000, 1, 500)));
        assert!(!n.feasible(&pod(8001, 1, 500)));
        assert!(!n.feasible(&pod(0, 2, 1000)), "one whole GPU free");
        assert!(n.feasible(&pod(0, 2, 500)));
        let typed = SharePod { types: 0b10, ..pod(0, 1, 1000) };
        assert!(!n.feasible(&typed), "type 1 only; the node is type 0");
        assert!(n.feasible(&SharePod { types: 0b11, ..typed }));
        assert!(n.feasible(&pod(0, 0, 0)));
        assert!(!ShareNode::new(100, 100, 0, 0).feasible(&pod(0, 1, 200)));
    }

    #[test]
    fn dotprod_by_hand() {
        // Node (64 cores, 1.5 GPUs left), pod (8 cores, 0.5 GPU):
        // dot = (0.5 × 0.0625 + 0.1875 × 0.0625) / 2 = 0.021484375;
        // 100 × (1 − 0.0215) = 97.85 → 97.
        assert_eq!(dotprod_score(&node(64_000, &[1000, 500]), &pod(8000, 1, 500)), 97);
        // A nearly full node aligns less: (8 cores, 0 GPUs left): dot / 2 = 0.001953125 → 99.
        assert_eq!(dotprod_score(&node(8000, &[0, 0]), &pod(8000, 1, 500)), 99);
    }

    #[test]
    fn clustering_bands_by_hand() {
        let p = pod(0, 1, 500); // a sharing pod
        let mut n = node(64_000, &[1000, 1000]);
        // Idle: 25 × (8000 − 2000) / 8000 = 18 (integer), + 25.
        assert_eq!(clustering_score(&n, &p), 18 + 25);
        n.take(&pod(0, 1, 300), &[0]);
        // Only sharing pods: 25 × 6300 / 8000 = 19, + 75.
        assert_eq!(clustering_score(&n, &p), 19 + 75);
        n.take(&pod(0, 1, 1000), &[1]);
        // Sharing and 1-GPU pods: 25 × 7300 / 8000 = 22, + 50.
        assert_eq!(clustering_score(&n, &p), 22 + 50);
        // A 2-GPU pod: the node has none of its kind, but others: 22 + 0.
        assert_eq!(clustering_score(&n, &pod(0, 2, 1000)), 22);
        assert_eq!(clustering_score(&n, &pod(1000, 0, 0)), 0);
    }

    #[test]
    fn packing_cases_by_hand() {
        let p = pod(0, 1, 300);
        // Idle 4-GPU node: max(33 − 4, 4) = 29.
        assert_eq!(packing_score(&node(0, &[1000; 4]), &p), 29);
        // Used node where the pod fits a used GPU with 400 left: 100 − 40/10 = 96.
        assert_eq!(packing_score(&node(0, &[1000, 400, 200, 1000]), &p), 96);
        // Used node where only whole GPUs fit: max(50 − 1, 33) = 49.
        assert_eq!(packing_score(&node(0, &[1000, 200, 200, 0]), &p), 49);
        // A 2-GPU pod on a used node takes two whole GPUs: 48.
        assert_eq!(packing_score(&node(0, &[1000, 1000, 500]), &pod(0, 2, 1000)), 48);
        assert_eq!(packing_score(&node(0, &[1000]), &pod(1, 0, 0)), 0);
    }

    #[test]
    fn bestfit_by_hand_and_scaled() {
        // (64 − 8) cores / 128 × ½ = 0.21875; (1.5 − 0.5) GPU / 8 × ½ = 0.0625;
        // 100 × (1 − 0.28125) = 71.875 → 71.
        let a = bestfit_raw(&node(64_000, &[1000, 500]), &pod(8000, 1, 500));
        assert_eq!(a, 71);
        // (16 − 8)/128 × ½ = 0.03125; 0.5 − 0.5 = 0 → 96.875 → 96.
        let b = bestfit_raw(&node(16_000, &[500]), &pod(8000, 1, 500));
        assert_eq!(b, 96);
        let mut s = [a, b, 80];
        normalise(&mut s);
        assert_eq!(s, [0, 100, (80 - 71) * 100 / 25]);
    }

    #[test]
    fn fgd_fragmentation_and_score_by_hand() {
        // Target: half the pods want 0.5 GPU and 4 cores, half one whole GPU.
        let t = TypicalPods { pods: vec![(pod(4000, 1, 500), 0.5), (pod(0, 1, 1000), 0.5)] };
        // Node left (8 cores; 1000, 300): the half-GPU pod fits GPU 0, the
        // 300 is fragment; the whole-GPU pod fits, 300 is fragment:
        // 0.5 × 300 + 0.5 × 300 = 300.
        let n = node(8000, &[1000, 300]);
        assert!((t.node_frag(&n) - 300.0).abs() < 1e-9);
        // Too little CPU for the half-GPU pod: all 1300 left is fragment for it.
        assert!((t.node_frag(&node(3000, &[1000, 300])) - (650.0 + 150.0)).abs() < 1e-9);
        // A 0.3-GPU pod of 1 core: on GPU 1 → (7 cores; 1000, 0): frag 0,
        // Δ = 300, score ⌊100 σ(0.3)⌋ = 57; on GPU 0 → (700, 300): the
        // half-GPU pod fits 700, fragment 300; the whole pod does not fit:
        // 1000; frag 0.5 × 300 + 0.5 × 1000 = 650, Δ = −350, σ → 41. GPU 1 wins.
        let (s, g) = fgd_score(&n, &pod(1000, 1, 300), &t, t.node_frag(&n));
        assert_eq!((s, g), (57, vec![1]));
        // A whole-GPU pod takes GPU 0: left (1000→0, 300): both target pods
        // lack GPUs: frag 300, Δ = 0 → 50.
        assert_eq!(fgd_score(&n, &pod(0, 1, 1000), &t, 300.0), (50, vec![0]));
    }

    #[test]
    fn typical_pods_cover_95_percent_and_sum_to_one() {
        let mut pods = vec![pod(1, 1, 500); 90];
        pods.extend(vec![pod(2, 1, 1000); 6]);
        pods.extend(vec![pod(3, 0, 0); 4]);
        let t = TypicalPods::from_pods(&pods);
        // 90 < 95, 96 ≥ 95: two shapes, shares 90/96 and 6/96.
        assert_eq!(t.pods.len(), 2);
        assert!((t.pods[0].1 - 90.0 / 96.0).abs() < 1e-12);
        assert!((t.pods.iter().map(|p| p.1).sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn gpu_choices_and_ties() {
        let n = node(0, &[1000, 300, 600, 300]);
        assert_eq!(n.best_fit_gpus(&pod(0, 1, 300)), vec![1]);
        assert_eq!(n.best_fit_gpus(&pod(0, 1, 500)), vec![2]);
        assert_eq!(n.best_fit_gpus(&pod(0, 1, 1000)), vec![0]);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        // Ties between nodes 3 and 5 at 9: the one of least rank (5), never node 1.
        let rank = [0, 0, 9, 7, 0, 2];
        assert_eq!(select_host(&[(1, 4), (3, 9), (5, 9)], &rank), Some(5));
        assert_eq!(select_host(&[(1, 4), (3, 9), (5, 8)], &rank), Some(3));
        for _ in 0..50 {
            let g = random_gpus(&n, &pod(0, 1, 300), &mut rng);
            assert!(g.len() == 1 && n.gpu_left[g[0]] >= 300);
        }
        assert_eq!(select_host(&[], &rank), None);
    }
}
