//! The FGD paper's fill experiment (Weng et al., ATC'23, §6.1 and Fig. 7/9;
//! its artifact github.com/hkust-adsl/kubernetes-scheduler-simulator,
//! commit 8f3d641): pods arrive one after another and never leave, each is
//! placed at once or fails, and the figure is the share of the cluster's
//! GPU left unallocated as the arrived workload grows.
//!
//! The protocol, as the artifact runs it (`experiments/run_scripts/
//! generate_run_scripts.py`: `-tune 1.3 -tuneseed 42..51 --shuffle-pod=true`;
//! `pkg/simulator/simulator.go`):
//!
//! 1. **Workload inflation** (`TunePodsByNodeTotalResource`): the pod list
//!    (all rows, CPU-only pods included, ordered by name) is extended by
//!    pods drawn with replacement from it until the next draw would take the
//!    GPU request past `inflation` × the cluster's GPU capacity (1.3: 130 %);
//!    like the artifact, the test adds the draw's milli-GPU *per GPU* and the
//!    running total its milli-GPU over all its GPUs (`tuneUpPods`). A list
//!    that asks more is cut by removing random pods until it does not
//!    (`tuneDownPods`).
//!    Before inflation the list is shuffled by the seed (`SortClusterPods`
//!    with `shufflePod`, called before `TunePodsByNodeTotalResource` in
//!    `core.go`), so the trace's time order plays no part and the drawn pods
//!    arrive after the list's own.
//! 2. **Ties**: the nodes get a seeded random order (`rand.Perm` in
//!    `syncClusterResourceList`) that breaks every tie between nodes of equal
//!    score ([`crate::policy::fgd_family::select_host`]).
//! 3. **Arrival**: each pod in turn is placed by the scheduler
//!    ([`crate::policy::fgd_family`]) or, if no node passes the filter,
//!    fails and is skipped; the next pod arrives either way
//!    (`SchedulePods`: a failed pod is deleted, the loop continues). Pods
//!    never leave (`SetWorkloadPods` drops their deletion times). The run
//!    ends when the list does, at about `inflation` × capacity arrived.
//! 4. **Measure** after every pod (`ClusterGpuFragReport`): arrived =
//!    milli-GPU requested by the pods so far, failed ones included; allocated
//!    = milli-GPU held. Per whole percent `x` of the capacity arrived
//!    (0..=100 × inflation), the allocation is the mean over the pods whose
//!    arrived share rounds to `x` (else to `x ± 1`), rounded to 0.01 %
//!    (`merge_alloc_discrete.py`); the figure's y is 100 − that
//!    (`plot_openb_alloc.py`: "Unalloc. GPU (%)").
//!
//! Randomness is one ChaCha8 stream per (pod list, seed) for inflation and
//! order (so every scheduler sees the same pods in the same order: paired
//! runs), and one per (pod list, scheduler, seed) for the scheduler's ties
//! and draws. The artifact's Go `math/rand` streams are not reproduced.

use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::policy::fgd_family::{
    FgdScheduler, MILLI, ShareNode, SharePod, TypicalPods, bestfit_raw, clustering_score, dotprod_score, fgd_score,
    normalise, packing_score, random_gpus, select_host,
};

/// The cluster: nodes and the GPU type names their indices refer to.
#[derive(Clone, Debug)]
pub struct FillCluster {
    /// Idle nodes, in file order.
    pub nodes: Vec<ShareNode>,
    /// GPU type names by index.
    pub types: Vec<String>,
}

impl FillCluster {
    /// GPUs in the cluster.
    pub fn gpus(&self) -> u64 {
        self.nodes.iter().map(|n| n.gpu_left.len() as u64).sum()
    }
}

/// A pod list read from a file: pods by name order.
#[derive(Clone, Debug)]
pub struct PodList {
    /// The pods, ordered by name (the artifact's `SetWorkloadPods`).
    pub pods: Vec<SharePod>,
}

fn header_index(path: &Path, header: &csv::StringRecord, name: &str, required: bool) -> Result<Option<usize>, String> {
    match header.iter().position(|h| h.trim() == name) {
        Some(i) => Ok(Some(i)),
        None if required => Err(format!("{}: line 1: no column `{name}`", path.display())),
        None => Ok(None),
    }
}

fn field<T: std::str::FromStr>(
    path: &Path,
    line: u64,
    rec: &csv::StringRecord,
    i: usize,
    name: &str,
) -> Result<T, String> {
    let s = rec.get(i).unwrap_or("").trim();
    s.parse()
        .map_err(|_| format!("{}: line {line}: field `{name}`: `{s}` is not a non-negative integer", path.display()))
}

fn reader(path: &Path) -> Result<csv::Reader<std::fs::File>, String> {
    csv::ReaderBuilder::new().flexible(true).from_path(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a node list (`sn,cpu_milli,memory_mib,gpu,model`, the artifact's
/// `openb_node_list_gpu_node.csv`).
pub fn read_nodes(path: &Path) -> Result<FillCluster, String> {
    let mut r = reader(path)?;
    let h = r.headers().map_err(|e| format!("{}: {e}", path.display()))?.clone();
    let cpu = header_index(path, &h, "cpu_milli", true)?.expect("required");
    let mem = header_index(path, &h, "memory_mib", true)?.expect("required");
    let gpu = header_index(path, &h, "gpu", true)?.expect("required");
    let model = header_index(path, &h, "model", true)?.expect("required");
    let mut types: Vec<String> = Vec::new();
    let mut nodes = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i as u64 + 2;
        let rec = rec.map_err(|e| format!("{}: line {line}: {e}", path.display()))?;
        let gpus: u32 = field(path, line, &rec, gpu, "gpu")?;
        let name = rec.get(model).unwrap_or("").trim().to_string();
        let t = match types.iter().position(|t| *t == name) {
            Some(t) => t,
            None => {
                types.push(name);
                types.len() - 1
            }
        };
        if types.len() > 63 {
            return Err(format!("{}: line {line}: more than 63 GPU types", path.display()));
        }
        nodes.push(ShareNode::new(
            field(path, line, &rec, cpu, "cpu_milli")?,
            field(path, line, &rec, mem, "memory_mib")?,
            t as u16,
            gpus,
        ));
    }
    if nodes.is_empty() {
        return Err(format!("{}: no nodes", path.display()));
    }
    let cluster = FillCluster { nodes, types };
    if cluster.gpus() == 0 {
        return Err(format!("{}: no GPUs (every `gpu` is 0): nothing to fill", path.display()));
    }
    Ok(cluster)
}

/// A type set no node matches: the pod names only types the cluster lacks.
const NO_TYPE: u64 = 1 << 63;

/// Reads a pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`,
/// the artifact's `openb_pod_list_*.csv`); every row is a pod (the artifact
/// submits them all, whatever their `pod_phase`).
pub fn read_pods(path: &Path, cluster: &FillCluster) -> Result<PodList, String> {
    let mut r = reader(path)?;
    let h = r.headers().map_err(|e| format!("{}: {e}", path.display()))?.clone();
    let name = header_index(path, &h, "name", true)?.expect("required");
    let cpu = header_index(path, &h, "cpu_milli", true)?.expect("required");
    let mem = header_index(path, &h, "memory_mib", true)?.expect("required");
    let ngpu = header_index(path, &h, "num_gpu", true)?.expect("required");
    let milli = header_index(path, &h, "gpu_milli", true)?.expect("required");
    let spec = header_index(path, &h, "gpu_spec", false)?;
    let mut pods: Vec<(String, SharePod)> = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i as u64 + 2;
        let rec = rec.map_err(|e| format!("{}: line {line}: {e}", path.display()))?;
        let gpus: u32 = field(path, line, &rec, ngpu, "num_gpu")?;
        let m: u32 = field(path, line, &rec, milli, "gpu_milli")?;
        let ok = match gpus {
            0 => m == 0,
            1 => (1..=MILLI).contains(&m),
            _ => m == MILLI,
        };
        if !ok {
            return Err(format!(
                "{}: line {line}: field `gpu_milli`: {m} with num_gpu {gpus} (0 GPUs ask 0, one GPU 1..=1000, several 1000 each)",
                path.display()
            ));
        }
        let mut types = 0u64;
        if let Some(s) = spec.and_then(|s| rec.get(s)).map(str::trim).filter(|s| !s.is_empty() && gpus > 0) {
            for t in s.split('|').filter(|t| !t.is_empty()) {
                types |= cluster.types.iter().position(|x| x == t).map_or(NO_TYPE, |i| 1 << i);
            }
        }
        let pod = SharePod {
            cpu: field(path, line, &rec, cpu, "cpu_milli")?,
            mem: field(path, line, &rec, mem, "memory_mib")?,
            gpus,
            milli: m,
            types,
        };
        pods.push((rec.get(name).unwrap_or("").to_string(), pod));
    }
    if pods.is_empty() {
        return Err(format!("{}: no pods", path.display()));
    }
    pods.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(PodList { pods: pods.into_iter().map(|(_, p)| p).collect() })
}

/// The arrival list of one seed: the shuffled, then inflated pods (module docs, 1).
pub fn arrivals(list: &PodList, capacity_milli: u64, inflation: f64, seed: u64) -> Vec<SharePod> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(1);
    let target = inflation * capacity_milli as f64;
    let mut pods = list.pods.clone();
    pods.shuffle(&mut rng);
    let mut total: u64 = pods.iter().map(SharePod::total_milli).sum();
    // A list without GPU requests cannot be inflated by them (the artifact
    // panics on it): it is left as it is.
    if inflation > 0.0 && total > 0 {
        if (total as f64) < target {
            loop {
                let p = &list.pods[rng.gen_range(0..list.pods.len())];
                if (total + u64::from(p.milli)) as f64 > target {
                    break;
                }
                total += p.total_milli();
                pods.push(p.clone());
            }
        } else {
            while total as f64 > target && !pods.is_empty() {
                let p = pods.remove(rng.gen_range(0..pods.len()));
                total -= p.total_milli();
            }
        }
    }
    pods
}

/// The tie order of one seed: a random rank per node (module docs, 2).
pub fn node_rank(nodes: usize, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(2);
    let mut perm: Vec<u32> = (0..nodes as u32).collect();
    perm.shuffle(&mut rng);
    perm
}

/// One run's record: after each pod, (milli-GPU arrived, milli-GPU allocated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FillRun {
    /// Per pod: (arrived, allocated), milli-GPU.
    pub trace: Vec<(u64, u64)>,
    /// Pods that failed (no node passed the filter), and those of them asking GPUs.
    pub failed: (u64, u64),
    /// The cluster's GPUs.
    pub gpus: u64,
}

/// Places `pods` in order on `cluster` by `rule` (module docs, 3–4);
/// `rank` the tie order ([`node_rank`]); `typical` is FGD's target
/// workload; `seed` the rule's stream (Random's draws).
pub fn fill(
    cluster: &FillCluster,
    pods: &[SharePod],
    rank: &[u32],
    rule: FgdScheduler,
    typical: &TypicalPods,
    seed: u64,
) -> FillRun {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(3 + rule as u64);
    let mut nodes = cluster.nodes.clone();
    let gpus = cluster.gpus();
    let capacity = gpus * u64::from(MILLI);
    let mut left: u64 = capacity;
    let mut arrived = 0u64;
    let mut run = FillRun { gpus, ..Default::default() };
    let mut fgd = FgdCache::new(nodes.len());
    let mut scored: Vec<(usize, i64)> = Vec::with_capacity(nodes.len());
    for pod in pods {
        arrived += pod.total_milli();
        scored.clear();
        let feasible = (0..nodes.len()).filter(|&n| nodes[n].feasible(pod));
        let mut fgd_gpus: Vec<(usize, Vec<usize>)> = Vec::new();
        match rule {
            FgdScheduler::Random => {
                let f: Vec<usize> = feasible.collect();
                if !f.is_empty() {
                    scored.push((f[rng.gen_range(0..f.len())], 100));
                }
            }
            FgdScheduler::DotProd => scored.extend(feasible.map(|n| (n, dotprod_score(&nodes[n], pod)))),
            FgdScheduler::GpuClustering => scored.extend(feasible.map(|n| (n, clustering_score(&nodes[n], pod)))),
            FgdScheduler::GpuPacking => scored.extend(feasible.map(|n| (n, packing_score(&nodes[n], pod)))),
            FgdScheduler::BestFit => {
                scored.extend(feasible.map(|n| (n, bestfit_raw(&nodes[n], pod))));
                let mut s: Vec<i64> = scored.iter().map(|x| x.1).collect();
                normalise(&mut s);
                for (x, v) in scored.iter_mut().zip(s) {
                    x.1 = v;
                }
            }
            FgdScheduler::Fgd => {
                for n in feasible {
                    let (s, g) = fgd.score(n, &nodes[n], pod, typical);
                    scored.push((n, s));
                    fgd_gpus.push((n, g));
                }
            }
        }
        match select_host(&scored, rank) {
            Some(n) => {
                let g = match rule {
                    FgdScheduler::Random => random_gpus(&nodes[n], pod, &mut rng),
                    FgdScheduler::Fgd => fgd_gpus.into_iter().find(|x| x.0 == n).map(|x| x.1).unwrap_or_default(),
                    _ => nodes[n].best_fit_gpus(pod),
                };
                nodes[n].take(pod, &g);
                fgd.touch(n);
                left -= pod.total_milli();
            }
            None => {
                run.failed.0 += 1;
                run.failed.1 += u64::from(pod.gpus > 0);
            }
        }
        run.trace.push((arrived, capacity - left));
    }
    run
}

/// FGD's kept evaluations: per node, a stamp bumped when it changes, its
/// fragmentation at that stamp, and its score for each pod shape (CPU,
/// GPUs, milli-GPU) at the stamp it was computed (the score reads nothing
/// else of the pod: memory and types only filter). Results are those of
/// computing afresh.
struct FgdCache {
    stamp: Vec<u64>,
    frag: Vec<Option<(u64, f64)>>,
    scores: Vec<ShapeScores>,
}

/// One node's kept FGD scores: by pod shape (CPU, GPUs, milli-GPU), the
/// stamp they were computed at, the score and the GPUs.
type ShapeScores = std::collections::HashMap<(u64, u32, u32), (u64, i64, Vec<usize>)>;

impl FgdCache {
    fn new(n: usize) -> Self {
        FgdCache { stamp: vec![1; n], frag: vec![None; n], scores: vec![Default::default(); n] }
    }
    fn touch(&mut self, n: usize) {
        self.stamp[n] += 1;
    }
    fn score(&mut self, n: usize, node: &ShareNode, pod: &SharePod, typical: &TypicalPods) -> (i64, Vec<usize>) {
        let st = self.stamp[n];
        let key = (pod.cpu, pod.gpus, pod.milli);
        if let Some((s, v, g)) = self.scores[n].get(&key)
            && *s == st
        {
            return (*v, g.clone());
        }
        let before = match self.frag[n] {
            Some((s, f)) if s == st => f,
            _ => {
                let f = typical.node_frag(node);
                self.frag[n] = Some((st, f));
                f
            }
        };
        let (v, g) = fgd_score(node, pod, typical, before);
        self.scores[n].insert(key, (st, v, g.clone()));
        (v, g)
    }
}

/// The figure's curve of a run (module docs, 4): per whole percent of the
/// capacity arrived, from 0 to `max_pct`, the allocated share in percent
/// (rounded to 0.01), `None` where no pod's arrived share is within 1 %.
pub fn curve(run: &FillRun, max_pct: u32) -> Vec<Option<f64>> {
    let per = |milli: u64| milli as f64 / run.gpus as f64 / 10.0;
    let arrived: Vec<i64> = run.trace.iter().map(|&(a, _)| per(a).round() as i64).collect();
    let alloc: Vec<f64> = run.trace.iter().map(|&(_, u)| (per(u) * 100.0).round() / 100.0).collect();
    let mean_where = |f: &dyn Fn(i64) -> bool| {
        let (s, n) =
            arrived.iter().zip(&alloc).filter(|(a, _)| f(**a)).fold((0.0, 0u32), |(s, n), (_, v)| (s + v, n + 1));
        (n > 0).then(|| (s / f64::from(n) * 100.0).round() / 100.0)
    };
    (0..=i64::from(max_pct)).map(|x| mean_where(&|a| a == x).or_else(|| mean_where(&|a| (a - x).abs() <= 1))).collect()
}

/// The fill experiment's file (`experiments/fgd.toml`).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FillSpec {
    /// What the experiment asks.
    pub question: String,
    /// The node list (relative to the file's folder).
    pub nodes: PathBuf,
    /// The pod lists (relative to the file's folder).
    pub pod_lists: Vec<PathBuf>,
    /// The rules, by [`FgdScheduler::name`].
    pub schedulers: Vec<String>,
    /// The seeds (one paired run of every rule per pod list and seed).
    pub seeds: Vec<u64>,
    /// Workload inflation: pods arrive until this × the GPU capacity (1.3).
    pub inflation: f64,
    /// Arrived workload (percent) at which the paired comparison is read.
    #[serde(default = "default_report_at")]
    pub report_at: Vec<u32>,
    /// Whether pods ask CPU and memory (default true, as in the artifact);
    /// false zeroes every pod's CPU and memory request, so only GPUs bind
    /// (the ablation in experiments/fgd.md: how much the CPU dimension matters).
    #[serde(default = "default_cpu")]
    pub cpu: bool,
}

fn default_cpu() -> bool {
    true
}

fn default_report_at() -> Vec<u32> {
    vec![100]
}

impl FillSpec {
    /// Reads and checks a spec; relative paths are made relative to the file's folder.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut spec: FillSpec = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        spec.nodes = base.join(&spec.nodes);
        for p in &mut spec.pod_lists {
            *p = base.join(&*p);
        }
        for s in &spec.schedulers {
            if FgdScheduler::from_name(s).is_none() {
                let names: Vec<_> = FgdScheduler::ALL.iter().map(|k| k.name()).collect();
                return Err(format!("{}: schedulers: unknown `{s}` (one of {})", path.display(), names.join(", ")));
            }
        }
        if !(spec.inflation > 0.0 && spec.inflation <= 3.0) {
            return Err(format!("{}: inflation: {} is outside (0, 3]", path.display(), spec.inflation));
        }
        if spec.seeds.is_empty() || spec.pod_lists.is_empty() || spec.schedulers.is_empty() {
            return Err(format!("{}: seeds, pod_lists and schedulers must each name at least one", path.display()));
        }
        let max_pct = (spec.inflation * 100.0).round() as u32;
        if let Some(x) = spec.report_at.iter().find(|&&x| x > max_pct) {
            return Err(format!(
                "{}: report_at: {x} % is past the end of the runs ({max_pct} %, inflation {})",
                path.display(),
                spec.inflation
            ));
        }
        let dup = |v: &[String]| v.iter().enumerate().find(|(i, x)| v[..*i].contains(x)).map(|(_, x)| x.clone());
        let seeds: Vec<String> = spec.seeds.iter().map(u64::to_string).collect();
        let lists: Vec<String> = spec.pod_lists.iter().map(|p| p.display().to_string()).collect();
        for (key, v) in [("schedulers", &spec.schedulers), ("seeds", &seeds), ("pod_lists", &lists)] {
            if let Some(x) = dup(v) {
                return Err(format!("{}: {key}: `{x}` is named twice", path.display()));
            }
        }
        Ok(spec)
    }

    /// The rules.
    pub fn rules(&self) -> Vec<FgdScheduler> {
        self.schedulers.iter().filter_map(|s| FgdScheduler::from_name(s)).collect()
    }
}

/// One finished run: pod list stem, rule, seed, curve, failures, pods.
#[derive(Clone, Debug)]
pub struct FillResult {
    /// The pod list's file stem (e.g. `openb_pod_list_default`).
    pub workload: String,
    /// The rule.
    pub rule: FgdScheduler,
    /// The seed.
    pub seed: u64,
    /// Allocated % per arrived % ([`curve`]).
    pub curve: Vec<Option<f64>>,
    /// Failed pods, and those of them asking GPUs.
    pub failed: (u64, u64),
    /// Pods that arrived.
    pub pods: usize,
}

/// Runs every (pod list, seed, rule) of `spec` in parallel; results in that order.
pub fn run_spec(spec: &FillSpec) -> Result<Vec<FillResult>, String> {
    use rayon::prelude::*;
    let cluster = read_nodes(&spec.nodes)?;
    let capacity = cluster.gpus() * u64::from(MILLI);
    let max_pct = (spec.inflation * 100.0).round() as u32;
    let mut jobs = Vec::new();
    for path in &spec.pod_lists {
        let mut list = read_pods(path, &cluster)?;
        if !spec.cpu {
            for p in &mut list.pods {
                p.cpu = 0;
                p.mem = 0;
            }
        }
        let typical = std::sync::Arc::new(TypicalPods::from_pods(&list.pods));
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        for &seed in &spec.seeds {
            let pods = std::sync::Arc::new(arrivals(&list, capacity, spec.inflation, seed));
            let rank = std::sync::Arc::new(node_rank(cluster.nodes.len(), seed));
            for rule in spec.rules() {
                jobs.push((stem.clone(), rule, seed, pods.clone(), rank.clone(), typical.clone()));
            }
        }
    }
    Ok(jobs
        .into_par_iter()
        .map(|(workload, rule, seed, pods, rank, typical)| {
            let run = fill(&cluster, &pods, &rank, rule, &typical, seed);
            FillResult { workload, rule, seed, curve: curve(&run, max_pct), failed: run.failed, pods: pods.len() }
        })
        .collect())
}

/// The median of `v` (mean of the middle two for an even count).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Unallocated GPU (%) of a result at arrived `x` %, if the curve has it.
pub fn unalloc_at(r: &FillResult, x: u32) -> Option<f64> {
    r.curve.get(x as usize).copied().flatten().map(|a| 100.0 - a)
}

/// Per workload and rule: (arrived %, median over the seeds of the
/// unallocated GPU %) for arrived `from..=max` % (the figure's lines).
pub fn median_curves(results: &[FillResult], workload: &str, from: u32) -> Vec<(FgdScheduler, Vec<(f64, f64)>)> {
    let mut out: Vec<(FgdScheduler, Vec<(f64, f64)>)> = Vec::new();
    for rule in FgdScheduler::ALL {
        let runs: Vec<&FillResult> = results.iter().filter(|r| r.workload == workload && r.rule == rule).collect();
        if runs.is_empty() {
            continue;
        }
        let max = runs.iter().map(|r| r.curve.len()).max().unwrap_or(0) as u32;
        let pts = (from..max)
            .filter_map(|x| {
                let mut v: Vec<f64> = runs.iter().filter_map(|r| unalloc_at(r, x)).collect();
                (v.len() == runs.len()).then(|| (f64::from(x), median(&mut v)))
            })
            .collect();
        out.push((rule, pts));
    }
    out
}

/// One paired comparison: per workload, arrived %, and rule X other than
/// FGD, the seed-by-seed difference X − FGD of the unallocated GPU %.
#[derive(Clone, Debug)]
pub struct FillPaired {
    /// The pod list's stem.
    pub workload: String,
    /// Arrived workload, % of the GPU capacity.
    pub at: u32,
    /// The rule compared with FGD.
    pub rule: FgdScheduler,
    /// Mean unallocated GPU % of FGD and of the rule.
    pub fgd_mean: f64,
    /// Mean unallocated GPU % of the rule.
    pub rule_mean: f64,
    /// The paired difference (rule − FGD, percentage points) and its 95 % interval.
    pub diff: crate::stats::MeanInterval,
}

/// The paired comparisons of `results` at each arrived % of `at`.
pub fn paired(results: &[FillResult], at: &[u32]) -> Vec<FillPaired> {
    let mut workloads: Vec<&str> = Vec::new();
    for r in results {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let mut out = Vec::new();
    for w in workloads {
        for &x in at {
            let fgd: Vec<(u64, f64)> = results
                .iter()
                .filter(|r| r.workload == w && r.rule == FgdScheduler::Fgd)
                .filter_map(|r| unalloc_at(r, x).map(|u| (r.seed, u)))
                .collect();
            for rule in FgdScheduler::ALL.into_iter().filter(|&k| k != FgdScheduler::Fgd) {
                let pairs: Vec<(f64, f64)> = results
                    .iter()
                    .filter(|r| r.workload == w && r.rule == rule)
                    .filter_map(|r| {
                        let u = unalloc_at(r, x)?;
                        fgd.iter().find(|f| f.0 == r.seed).map(|f| (f.1, u))
                    })
                    .collect();
                if pairs.is_empty() {
                    continue;
                }
                let n = pairs.len() as f64;
                let d: Vec<f64> = pairs.iter().map(|(f, u)| u - f).collect();
                out.push(FillPaired {
                    workload: w.to_string(),
                    at: x,
                    rule,
                    fgd_mean: pairs.iter().map(|p| p.0).sum::<f64>() / n,
                    rule_mean: pairs.iter().map(|p| p.1).sum::<f64>() / n,
                    diff: crate::stats::mean_interval(&d, 0.95),
                });
            }
        }
    }
    out
}

/// Writes `curves.csv` (every run's curve), `runs.csv` (per run: pods,
/// failed pods, unallocated GPU % at each `at`) and `paired.csv` into `dir`;
/// returns their paths. The bytes depend only on the results.
pub fn write_outputs(dir: &Path, results: &[FillResult], at: &[u32]) -> Result<Vec<PathBuf>, String> {
    use std::fmt::Write as _;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut curves = String::from("workload,scheduler,seed,arrived_pct,alloc_pct,unalloc_pct\n");
    let mut runs = String::from("workload,scheduler,seed,pods,failed_pods,failed_gpu_pods");
    for x in at {
        let _ = write!(runs, ",unalloc_pct_at_{x}");
    }
    runs.push('\n');
    for r in results {
        for (x, a) in r.curve.iter().enumerate() {
            if let Some(a) = a {
                let _ = writeln!(curves, "{},{},{},{x},{a:.2},{:.2}", r.workload, r.rule.name(), r.seed, 100.0 - a);
            }
        }
        let _ = write!(runs, "{},{},{},{},{},{}", r.workload, r.rule.name(), r.seed, r.pods, r.failed.0, r.failed.1);
        for &x in at {
            match unalloc_at(r, x) {
                Some(u) => {
                    let _ = write!(runs, ",{u:.2}");
                }
                None => runs.push(','),
            }
        }
        runs.push('\n');
    }
    let mut p = String::from(
        "workload,arrived_pct,scheduler,n,fgd_unalloc_mean,unalloc_mean,diff_mean,diff_lo95,diff_hi95,verdict\n",
    );
    for c in paired(results, at) {
        let verdict = match c.diff.excludes_zero() {
            Some(std::cmp::Ordering::Greater) => "FGD lower",
            Some(std::cmp::Ordering::Less) => "FGD higher",
            _ if c.diff.n < 2 => "one pair: no interval",
            _ => "no measurable difference",
        };
        let _ = writeln!(
            p,
            "{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{verdict}",
            c.workload,
            c.at,
            c.rule.name(),
            c.diff.n,
            c.fgd_mean,
            c.rule_mean,
            c.diff.mean,
            c.diff.lo(),
            c.diff.hi()
        );
    }
    let files = [("curves.csv", curves), ("runs.csv", runs), ("paired.csv", p)];
    let mut out = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        crate::metrics::export::write_atomic(&path, text.as_bytes()).map_err(|e| e.to_string())?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(gpus: u32, milli: u32) -> SharePod {
        SharePod { cpu: 1000, mem: 0, gpus, milli, types: 0 }
    }

    fn tiny() -> FillCluster {
        FillCluster {
            nodes: vec![ShareNode::new(64_000, 1 << 20, 0, 2), ShareNode::new(64_000, 1 << 20, 0, 2)],
            types: vec!["T4".into()],
        }
    }

    #[test]
    fn failed_pods_are_skipped_and_arrive_all_the_same() {
        // 4 GPUs. Pods: 2 GPUs, 2 GPUs, 1 GPU (fails: full), 0.5 GPU (fails).
        let pods = [p(2, 1000), p(2, 1000), p(1, 1000), p(1, 500)];
        let run = fill(&tiny(), &pods, &[0, 1], FgdScheduler::BestFit, &TypicalPods::default(), 1);
        assert_eq!(run.trace, vec![(2000, 2000), (4000, 4000), (5000, 4000), (5500, 4000)]);
        assert_eq!(run.failed, (2, 2));
        // Curve: arrived 50 % → 50, 100 % → 100, 125 % → 100, 137.5 % → 138 → 100.
        let c = curve(&run, 130);
        assert_eq!(c[50], Some(50.0));
        assert_eq!(c[100], Some(100.0));
        assert_eq!(c[125], Some(100.0));
        assert_eq!(c[10], None);
        assert_eq!(c[51], Some(50.0), "within 1 % of 50");
    }

    #[test]
    fn a_fragmented_gpu_is_left_unallocated_under_every_rule() {
        // One node of 2 GPUs; pods 0.6, 0.6, 1 GPU. The sharing pods cannot
        // share a GPU (1.2 > 1): each takes one and leaves 0.4 on it, and the
        // whole-GPU pod finds no free GPU and fails. Arrived 0.6, 1.2, 2.2
        // GPUs = 30, 60, 110 % of 2 GPUs; allocated 30, 60, 60 %: at 110 %
        // arrived 40 % of the GPU is unallocated, whatever the rule.
        let c = FillCluster { nodes: vec![ShareNode::new(64_000, 1 << 20, 0, 2)], types: vec!["T4".into()] };
        let pods = [p(1, 600), p(1, 600), p(1, 1000)];
        let t = TypicalPods::from_pods(&pods);
        for rule in FgdScheduler::ALL {
            let run = fill(&c, &pods, &[0], rule, &t, 1);
            assert_eq!(run.trace, vec![(600, 600), (1200, 1200), (2200, 1200)], "{rule:?}");
            assert_eq!(run.failed, (1, 1), "{rule:?}");
            let cv = curve(&run, 130);
            assert_eq!((cv[30], cv[60], cv[110]), (Some(30.0), Some(60.0), Some(60.0)), "{rule:?}");
            let r = FillResult { workload: "w".into(), rule, seed: 1, curve: cv, failed: run.failed, pods: 3 };
            assert_eq!(unalloc_at(&r, 110), Some(40.0));
        }
    }

    #[test]
    fn cpu_strands_gpus_and_fgd_avoids_it_by_hand() {
        // Node A: 8 cores, 2 GPUs; node B: 64 cores, 2 GPUs. Pods, 8 cores
        // each: S = 0.5 GPU, W = 2 whole GPUs, S again.
        let c = FillCluster {
            nodes: vec![ShareNode::new(8000, 1 << 20, 0, 2), ShareNode::new(64_000, 1 << 20, 0, 2)],
            types: vec!["T4".into()],
        };
        let s = SharePod { cpu: 8000, mem: 0, gpus: 1, milli: 500, types: 0 };
        let w = SharePod { cpu: 8000, mem: 0, gpus: 2, milli: 1000, types: 0 };
        let pods = [s.clone(), w, s];
        // FGD's target: S 2/3, W 1/3. First S on A: A's CPU is gone, so
        // neither shape fits there: F_A 0 → 1500, score ⌊100 σ(−1.5)⌋ = 18;
        // on B (56 cores; 500, 1000 left) S still fits, W does not: F_B 0 →
        // 1500/3 = 500, ⌊100 σ(−0.5)⌋ = 37. B wins; W then fits only A, the
        // second S only B: all placed, 3 of 4 GPUs (75 %) allocated.
        let t = TypicalPods::from_pods(&pods);
        let fgd = fill(&c, &pods, &[0, 1], FgdScheduler::Fgd, &t, 1);
        assert_eq!(fgd.trace, vec![(500, 500), (2500, 2500), (3000, 3000)]);
        assert_eq!(fgd.failed, (0, 0));
        // BestFit: A ⌊100 (1 − (0 + 1500/8000 × ½))⌋ = 90 against B
        // ⌊100 (1 − (56/128 × ½ + 0.09375))⌋ = 68: A, stranding its 1.5
        // GPUs behind its exhausted CPU; W fits only B, which it fills; the
        // second S fits nowhere and fails: 2.5 of 4 GPUs allocated. DotProd
        // (A 99, B 97), Packing (31 each) and Clustering (43 each), ties to
        // A, of least rank, choose A too.
        for rule in
            [FgdScheduler::BestFit, FgdScheduler::DotProd, FgdScheduler::GpuPacking, FgdScheduler::GpuClustering]
        {
            let run = fill(&c, &pods, &[0, 1], rule, &t, 1);
            assert_eq!(run.trace, vec![(500, 500), (2500, 2500), (3000, 2500)], "{rule:?}");
            assert_eq!(run.failed, (1, 1), "{rule:?}");
        }
    }

    #[test]
    fn best_fit_and_packing_put_two_sharing_pods_on_one_node() {
        // Two 0.6-GPU pods then two whole-GPU pods on 2 × 2 GPUs. Best fit
        // (on the same node the tightest GPU; across nodes the node with the
        // least left) puts 0.6 + 0.6 on two GPUs of one node and the whole pods
        // on the other node: all four placed, 3.2 GPUs allocated.
        let pods = [p(1, 600), p(1, 600), p(1, 1000), p(1, 1000)];
        let run = fill(&tiny(), &pods, &[0, 1], FgdScheduler::BestFit, &TypicalPods::default(), 1);
        assert_eq!(run.failed, (0, 0));
        assert_eq!(run.trace.last(), Some(&(3200, 3200)));
        // GpuPacking sends the second 0.6 to an idle GPU of the used node too
        // (49 against 31 for the idle node): the same 3.2 GPUs.
        let run = fill(&tiny(), &pods, &[0, 1], FgdScheduler::GpuPacking, &TypicalPods::default(), 1);
        assert_eq!(run.trace.last(), Some(&(3200, 3200)));
    }

    #[test]
    fn inflation_follows_the_artifact() {
        // 4 GPUs; list of one 1-GPU pod and one CPU pod; inflation 1.3 →
        // target 5200 milli: draws add whole GPUs while total + 1000 ≤ 5200:
        // 1000 → 2000 → … → 5000, then stop (5000 + 1000 > 5200).
        let list = PodList { pods: vec![p(1, 1000), p(0, 0)] };
        let a = arrivals(&list, 4000, 1.3, 7);
        assert_eq!(a.iter().map(SharePod::total_milli).sum::<u64>(), 5000);
        assert_eq!(a, arrivals(&list, 4000, 1.3, 7), "same seed, same list");
        // Too much: cut down to at most 1000.
        let big = PodList { pods: vec![p(1, 1000); 3] };
        assert_eq!(arrivals(&big, 1000, 1.0, 3).len(), 1);
    }

    #[test]
    fn same_seed_same_run() {
        let list =
            PodList { pods: (0..40).map(|i| p(1 + i % 2, if i % 2 == 0 { 300 + 10 * i } else { 1000 })).collect() };
        let c = tiny();
        let pods = arrivals(&list, 4000, 1.3, 5);
        let t = TypicalPods::from_pods(&list.pods);
        for rule in FgdScheduler::ALL {
            let r = node_rank(2, 5);
            assert_eq!(fill(&c, &pods, &r, rule, &t, 5), fill(&c, &pods, &r, rule, &t, 5), "{rule:?}");
        }
    }

    #[test]
    fn bad_input_names_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let nodes = dir.path().join("nodes.csv");
        std::fs::write(&nodes, "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\nn1,32000,131072,8,V100M16\n")
            .unwrap();
        let c = read_nodes(&nodes).unwrap();
        assert_eq!((c.gpus(), c.types.clone()), (10, vec!["T4".to_string(), "V100M16".to_string()]));
        let pods = dir.path().join("pods.csv");
        std::fs::write(
            &pods,
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1000,10,1,500,V100M16|A10\np0,0,0,0,0,\n",
        )
        .unwrap();
        let l = read_pods(&pods, &c).unwrap();
        // Ordered by name: p0 (CPU-only), then p1 (V100M16, or A10, which no node has).
        assert_eq!(l.pods[0], SharePod { cpu: 0, mem: 0, gpus: 0, milli: 0, types: 0 });
        assert_eq!(l.pods[1].types, 0b10 | NO_TYPE);
        std::fs::write(&pods, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,2,500\n").unwrap();
        let e = read_pods(&pods, &c).unwrap_err();
        assert!(e.contains("line 2") && e.contains("gpu_milli"), "{e}");
        std::fs::write(&pods, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,x,10,1,500\n").unwrap();
        let e = read_pods(&pods, &c).unwrap_err();
        assert!(e.contains("line 2") && e.contains("cpu_milli"), "{e}");
        let spec = dir.path().join("f.toml");
        std::fs::write(&spec, "question = \"q\"\nnodes = \"nodes.csv\"\npod_lists = [\"pods.csv\"]\nschedulers = [\"tetris\"]\nseeds = [1]\ninflation = 1.3\n").unwrap();
        let e = FillSpec::read(&spec).unwrap_err();
        assert!(e.contains("unknown `tetris`"), "{e}");
    }
}
