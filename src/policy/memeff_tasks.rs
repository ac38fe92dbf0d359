//! The thesis's memory-efficiency placement of moldable tasks
//! (`specs/policies.md` §4.2), `--policy memory-efficiency --workload genie`.
//!
//! The thesis publishes only its abstract (spec §4.1): memory efficiency,
//! the computation of a task relative to the GPU memory it occupies under a
//! placement, rates the placements of each task, and a heuristic lets
//! several tasks share GPUs to raise utilisation and the task completion
//! rate. Everything below is the spec's proposal (§4.2) or **ours** where
//! marked; the packer of fixed-size trace jobs that formerly carried this
//! name is `--placement memeff-pack` ([`super::memeff`]).
//!
//! Per task `j` (global batch `b`) and symmetric placement `s = <d_node,
//! d_gpn>` of `n = d_node × d_gpn` GPUs, per-GPU batch `b' = round(b / n)`
//! ([`crate::job::TaskSpec::local_bsz`]):
//!
//! ```text
//! C_j(s)  = c × gflops_per_sample(model) × b'     GFLOP per iteration per GPU
//! M_j(s)  = gpu_mem_mib(model, b')                 MiB per GPU
//! ME_j(s) = C_j(s) / M_j(s)                        GFLOP per MiB
//! ```
//!
//! `gflops_per_sample` is the profile database's training figure (forward +
//! backward, `models.csv`); `c` = 1 for training and 1/3 for inference
//! (spec: c_pass = 3 training, 1 inference, over forward FLOPs; the
//! database's figure is already the training one). `M_j(s)` is the
//! database's memory per GPU ([`crate::profile::resources::task_gpu_mem_mib`]:
//! measured, else weights, gradients and optimiser state, activations × b'
//! and the framework overhead, `src/profile/data/README.md`), the figure
//! the engine holds for the task on each GPU it shares
//! ([`crate::engine::Simulation::with_task_memory`]). A model without
//! memory holds each GPU's whole memory (it shares nothing).
//!
//! Heuristic (spec §4.2), at every scheduling pass:
//!
//! 1. FIFO: the oldest pending task first; with `backfill`, later tasks
//!    that fit go ahead when it does not (no reservation).
//! 2. For each placement of the set (`placements = paper | all`, GENIE's
//!    [`PlacementSet`], at most `b` GPUs), the GPUs that can host the task
//!    at `M_j(s)` (memory with headroom, tenant cap `K_share` =
//!    `share.max_tenants`, default 2): on each node the best `d_gpn` such
//!    GPUs, and the best `d_node` nodes (keys below).
//! 3. A placement on GPUs `G` is rated `ME_j(s) × σ_j(G)` (**ours**: the
//!    co-location slowdown enters as the share of its computation rate the
//!    task keeps), where `σ_j(G)` is the smallest over `g ∈ G` of the
//!    task's co-location speed next to `g`'s tenants at their per-GPU
//!    batches, by the profile database's rule
//!    ([`crate::profile::coloc::colocated_speed`]: Gavel's measured pairs,
//!    their bounds and fallbacks; 1 on an idle GPU), the speed the engine
//!    will run it at. The best placement by (rating desc; fewer
//!    already-shared GPUs; fewer nodes; higher predicted rate, the run's
//!    rate model × σ; lowest first GPU) is taken.
//! 4. Within a node GPUs rank by (σ desc, idle first, least memory left,
//!    index), nodes by (their pick's smallest σ desc, fewer shared GPUs,
//!    least memory left, index) (**ours**: the spec's "complementary
//!    packing" is what the measured pair speeds say).
//! 5. If no placement fits, the task waits.
//!
//! What follows from the definitions (not a choice of ours): `M_j(s)` has a
//! fixed part (weights, optimiser state, framework) and `C_j(s)` has none,
//! so `ME_j` grows with `b'` and is highest on the fewest GPUs. The
//! heuristic therefore takes `<1, 1>` whenever a GPU can host the task at
//! its full batch (idle first, σ = 1), and goes wider only when a smaller
//! per-GPU batch is what fits beside the tenants.
//!
//! Comparison packers (**ours**, `pack = share-first-fit | share-best-fit |
//! memeff-pack`): every task at its one-GPU placement `<1, 1>` (its whole
//! global batch on one GPU, which the workload guarantees fits), its GPU
//! chosen by that sharing placement ([`super::sharing`], [`super::memeff`])
//! with the task's memory at `b`; the same FIFO and backfill.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy, FamilyKey};
use super::genie::PlacementSet;
use super::placement::{Placement, PlacementKind, Request};
use super::{Decision, Policy, View};
use crate::cluster::{Cluster, ShareLimits};
use crate::error::{ConfigError, RunError};
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::{JobSpec, JobState, JobTable};
use crate::profile::RateModel;
use crate::profile::coloc::colocated_speed;
use crate::profile::db::ProfileDb;
use crate::profile::resources::task_gpu_mem_mib;

/// How tasks are placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pack {
    /// The thesis's rule (module docs): the placement of highest memory
    /// efficiency × co-location speed.
    #[default]
    MemoryEfficiency,
    /// Ours, for comparison: `<1, 1>`, the GPU by share-first-fit.
    ShareFirstFit,
    /// Ours, for comparison: `<1, 1>`, the GPU by share-best-fit.
    ShareBestFit,
    /// Ours, for comparison: `<1, 1>`, the GPU by memeff-pack.
    MemeffPack,
}

impl Pack {
    fn placement(self) -> Option<PlacementKind> {
        match self {
            Pack::MemoryEfficiency => None,
            Pack::ShareFirstFit => Some(PlacementKind::ShareFirstFit),
            Pack::ShareBestFit => Some(PlacementKind::ShareBestFit),
            Pack::MemeffPack => Some(PlacementKind::MemeffPack),
        }
    }
}

/// Options of `--policy memory-efficiency` (`--policy-opt NAME=VALUE`, a
/// sweep's `policy_opt.NAME`); the defaults: strict FIFO, the paper's
/// placement set, the thesis's rule, [`ShareLimits::default`] (2 tenants,
/// 5 % headroom).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemeffTaskOptions {
    /// Let later tasks start when the oldest does not fit. Default false.
    pub backfill: bool,
    /// The placements considered (GENIE's set). Default `paper`.
    pub placements: PlacementSet,
    /// The rule. Default `memory-efficiency`.
    pub pack: Pack,
    /// GPU-sharing limits: `share.max_tenants` is the spec's `K_share`.
    pub share: ShareLimits,
}

/// The sharing limits' own keys (`max_tenants`, `mem_headroom`; the
/// queue policies' too) set the task placement's `share` limits.
pub const MEMEFF_KEYS: &[FamilyKey] =
    &[FamilyKey::new("max_tenants", "share.max_tenants"), FamilyKey::new("mem_headroom", "share.mem_headroom")];

impl BuildPolicy for MemeffTaskOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        self.share.validate().map_err(|e| e.to_string())
    }

    fn family_keys(&self, _kind: &str, _from_file: bool) -> &'static [FamilyKey] {
        MEMEFF_KEYS
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        if !ctx.tasks {
            return Err(ConfigError::new(
                crate::error::ConfigErrorKind::Conflict,
                "--policy memory-efficiency places moldable tasks: use `--workload genie` (the packer of \
                 fixed-size jobs is --placement memeff-pack)",
            )
            .into());
        }
        Ok(Box::new(MemeffTasks::new(*self, ctx.db(), (ctx.rate_model)())))
    }

    fn share_limits(&self) -> ShareLimits {
        self.share
    }

    fn moldable(&self) -> bool {
        true
    }
}

/// One GPU that can host the task, with its ranking figures.
#[derive(Clone, Copy, Debug)]
struct GpuCand {
    speed: f64,
    shared: bool,
    left_mib: u64,
    gpu: GpuId,
}

fn cmp_gpu(a: &GpuCand, b: &GpuCand) -> std::cmp::Ordering {
    b.speed.total_cmp(&a.speed).then(a.shared.cmp(&b.shared)).then(a.left_mib.cmp(&b.left_mib)).then(a.gpu.cmp(&b.gpu))
}

/// A rated placement of one task.
#[derive(Clone, Debug, PartialEq)]
pub struct Rated {
    /// Nodes, `d_node`.
    pub d_node: u32,
    /// GPUs per node, `d_gpn`.
    pub d_gpn: u32,
    /// `C_j(s)`, GFLOP per iteration per GPU.
    pub compute_gflop: f64,
    /// `M_j(s)`, MiB per GPU (`None`: unknown, the whole GPU).
    pub mem_mib: Option<u64>,
    /// `σ_j(G)`: the smallest co-location speed over the GPUs.
    pub speed: f64,
    /// GPUs that already had tenants.
    pub shared: usize,
    /// The GPUs.
    pub gpus: Vec<GpuId>,
}

impl Rated {
    /// `ME_j(s)`, GFLOP per MiB, with the unknown memory read as `whole_mib`.
    pub fn me(&self, whole_mib: u64) -> f64 {
        let m = self.mem_mib.unwrap_or(whole_mib);
        if m == 0 { 0.0 } else { self.compute_gflop / m as f64 }
    }
}

/// `C_j(s)` of a task spec on `gpus` GPUs, GFLOP per iteration per GPU
/// (module docs), and whether the model's GFLOPs were known. When they are
/// not (`models.csv` has `NaN`, e.g. GENIE's seq2seq, `transformer-multi30k`)
/// it is computed with 1 GFLOP per sample (**ours**): ratings are compared
/// only between placements of one task, so any positive constant ranks them
/// alike. 0 for a job that is not a task.
pub fn task_compute_gflop(db: &ProfileDb, spec: &JobSpec, gpus: u32) -> (f64, bool) {
    let Some(t) = spec.task.as_deref() else { return (0.0, false) };
    let g = spec.model().and_then(|m| db.model_info(m)).map_or(f64::NAN, |m| m.gflops_per_sample);
    let known = g.is_finite() && g > 0.0;
    let c = if t.inference { 1.0 / 3.0 } else { 1.0 };
    (c * if known { g } else { 1.0 } * f64::from(t.local_bsz(gpus)), known)
}

/// (GPU type, model, per-GPU batch, tenants' (model, per-GPU batch)).
type SpeedKey = (String, String, u32, Vec<(String, u32)>);

/// The policy (module docs).
pub struct MemeffTasks {
    opts: MemeffTaskOptions,
    db: Arc<ProfileDb>,
    rates: Box<dyn RateModel>,
    packer: Option<Box<dyn Placement>>,
    pending: Vec<JobId>,
    speeds: BTreeMap<SpeedKey, f64>,
    scratch: Vec<GpuCand>,
    /// Launches that joined a GPU with tenants.
    joined_shared: u64,
    /// Launches rated with unknown GFLOPs ([`task_compute_gflop`]).
    compute_unknown: u64,
    /// Launches, and GPUs over them.
    launches: u64,
    gpus_launched: u64,
}

impl MemeffTasks {
    /// The policy over the run's database `db` and rate model `rates` (for
    /// the last tie-break).
    pub fn new(opts: MemeffTaskOptions, db: Arc<ProfileDb>, rates: Box<dyn RateModel>) -> Self {
        let packer = opts.pack.placement().map(|k| k.build_for(Some(&db)));
        MemeffTasks {
            opts,
            db,
            rates,
            packer,
            pending: Vec::new(),
            speeds: BTreeMap::new(),
            scratch: Vec::new(),
            joined_shared: 0,
            compute_unknown: 0,
            launches: 0,
            gpus_launched: 0,
        }
    }

    /// A tenant's (model, per-GPU batch) as the co-location model reads it.
    fn tenant_of(jobs: &JobTable, t: JobId) -> (String, u32) {
        let spec = jobs.spec(t);
        let model = spec.model().unwrap_or("unknown").to_string();
        let bsz = match (&spec.task, jobs.state(t)) {
            (Some(task), JobState::Running(r)) => task.local_bsz(r.gpus.len() as u32),
            (Some(task), _) => task.global_bsz,
            (None, _) => spec.local_bsz().unwrap_or(0),
        };
        (model, bsz)
    }

    /// The speed of (model, bsz) on GPU `g` next to its tenants (1 alone).
    fn speed_on(&mut self, cluster: &Cluster, jobs: &JobTable, g: GpuId, model: &str, bsz: u32) -> f64 {
        let tenants = cluster.tenants(g);
        if tenants.is_empty() {
            return 1.0;
        }
        let gpu_type = cluster.node(cluster.node_of(g)).gpu_type.to_ascii_lowercase();
        let others: Vec<(String, u32)> = tenants.iter().map(|&t| Self::tenant_of(jobs, t)).collect();
        let key: SpeedKey = (gpu_type, model.to_string(), bsz, others);
        if let Some(&s) = self.speeds.get(&key) {
            return s;
        }
        let refs: Vec<(&str, u32)> = key.3.iter().map(|(m, b)| (m.as_str(), *b)).collect();
        let (s, _) = colocated_speed(&self.db, &key.0, (model, bsz), &refs);
        self.speeds.insert(key, s);
        s
    }

    /// Every placement of the set that can host `job` now, rated (module
    /// docs), in the set's order.
    pub fn rate_placements(&mut self, view: &View<'_>, job: JobId) -> Vec<Rated> {
        let (cluster, jobs) = (view.cluster, view.jobs);
        let spec = jobs.spec(job);
        let Some(task) = spec.task.as_deref() else { return Vec::new() };
        let model = spec.model().unwrap_or("unknown");
        let p = cluster.partition(spec.vc);
        let set = self.opts.placements.placements(p.nodes.len() as u32, p.max_node_gpus);
        let types: &[String] = spec.gpu_types().unwrap_or(&[]);
        let mut out = Vec::new();
        for (d_node, d_gpn) in set {
            let n = d_node * d_gpn;
            if u64::from(n) > u64::from(task.global_bsz) || p.gpus_free + p.gpus_open < n {
                continue;
            }
            let bsz = task.local_bsz(n);
            let mem = task_gpu_mem_mib(&self.db, spec, n);
            // Per node: its best d_gpn hostable GPUs and the node's key.
            type NodeKey = (f64, usize, u64, NodeId);
            let mut nodes: Vec<(NodeKey, Vec<GpuCand>)> = Vec::new();
            for &node in &p.nodes {
                if cluster.node_share_candidates(node) < d_gpn
                    || !(types.is_empty() || types.contains(&cluster.node(node).gpu_type))
                {
                    continue;
                }
                let mut cands = std::mem::take(&mut self.scratch);
                cands.clear();
                for g in cluster.node_gpus(node) {
                    let need = cluster.tenant_mem_mib(g, mem, 0);
                    if cluster.can_host(g, spec.vc, need, 0) {
                        let s = cluster.share(g);
                        let speed = self.speed_on(cluster, jobs, g, model, bsz);
                        cands.push(GpuCand {
                            speed,
                            shared: !s.tenants.is_empty(),
                            left_mib: cluster.gpu_mem_mib(g).saturating_sub(s.mem_mib + need),
                            gpu: g,
                        });
                    }
                }
                if cands.len() >= d_gpn as usize {
                    cands.sort_unstable_by(cmp_gpu);
                    let pick: Vec<GpuCand> = cands[..d_gpn as usize].to_vec();
                    let key = (
                        pick.iter().map(|c| c.speed).fold(f64::INFINITY, f64::min),
                        pick.iter().filter(|c| c.shared).count(),
                        pick.iter().map(|c| c.left_mib).sum(),
                        node,
                    );
                    nodes.push((key, pick));
                }
                self.scratch = cands;
            }
            if nodes.len() < d_node as usize {
                continue;
            }
            nodes.sort_by(|a, b| {
                b.0.0.total_cmp(&a.0.0).then(a.0.1.cmp(&b.0.1)).then(a.0.2.cmp(&b.0.2)).then(a.0.3.cmp(&b.0.3))
            });
            let chosen = &nodes[..d_node as usize];
            let gpus: Vec<GpuId> = chosen.iter().flat_map(|(_, p)| p.iter().map(|c| c.gpu)).collect();
            out.push(Rated {
                d_node,
                d_gpn,
                compute_gflop: task_compute_gflop(&self.db, spec, n).0,
                mem_mib: mem,
                speed: chosen.iter().map(|(k, _)| k.0).fold(f64::INFINITY, f64::min),
                shared: chosen.iter().map(|(k, _)| k.1).sum(),
                gpus,
            });
        }
        out
    }

    /// The thesis's choice for `job` now (module docs), if any placement fits.
    pub fn choose(&mut self, view: &View<'_>, job: JobId) -> Option<Rated> {
        let rated = self.rate_placements(view, job);
        let cluster = view.cluster;
        let spec = view.jobs.spec(job);
        let whole = |r: &Rated| r.gpus.first().map_or(0, |&g| cluster.gpu_mem_mib(g));
        // (rating, shared GPUs, nodes, predicted rate, first GPU)
        type Key = (f64, usize, u32, f64, GpuId);
        let key = |r: &Rated, rates: &dyn RateModel| {
            (r.me(whole(r)) * r.speed, r.shared, r.d_node, rates.rate(spec, &r.gpus, cluster) * r.speed, r.gpus[0])
        };
        let mut best: Option<(Key, Rated)> = None;
        for r in rated {
            let k = key(&r, self.rates.as_ref());
            let better = best.as_ref().is_none_or(|(b, _)| {
                k.0.total_cmp(&b.0)
                    .reverse()
                    .then(k.1.cmp(&b.1))
                    .then(k.2.cmp(&b.2))
                    .then(k.3.total_cmp(&b.3).reverse())
                    .then(k.4.cmp(&b.4))
                    .is_lt()
            });
            if better {
                best = Some((k, r));
            }
        }
        best.map(|(_, r)| r)
    }

    /// A comparison packer's GPU for `job` at `<1, 1>`.
    fn pack_one(&mut self, view: &View<'_>, job: JobId) -> Option<Vec<GpuId>> {
        let spec = view.jobs.spec(job);
        let types: &[String] = spec.gpu_types().unwrap_or(&[]);
        let mem = task_gpu_mem_mib(&self.db, spec, 1).unwrap_or(0);
        let req = Request { min_gpu_mem_mib: mem, gpu_types: types, ..Request::new(spec.vc, 1) };
        let packer = self.packer.as_mut()?;
        let mut out = Vec::new();
        packer.place_job(view, job, req, &mut out).then_some(out)
    }
}

impl Policy for MemeffTasks {
    fn name(&self) -> String {
        let mut n = match self.opts.pack {
            Pack::MemoryEfficiency => "memory-efficiency".to_string(),
            p => format!("{}@1gpu", p.placement().map_or("", |k| k.name())),
        };
        if self.opts.backfill {
            n.push_str("+backfill");
        }
        n
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.pending.push(job);
    }

    fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}

    fn decide(&mut self, view: &View<'_>) -> Decision {
        for i in 0..self.pending.len() {
            let job = self.pending[i];
            let gpus =
                if self.packer.is_some() { self.pack_one(view, job) } else { self.choose(view, job).map(|r| r.gpus) };
            if let Some(gpus) = gpus {
                self.pending.remove(i);
                self.launches += 1;
                self.gpus_launched += gpus.len() as u64;
                if gpus.iter().any(|&g| !view.cluster.tenants(g).is_empty()) {
                    self.joined_shared += 1;
                }
                if self.packer.is_none() && !task_compute_gflop(&self.db, view.jobs.spec(job), 1).1 {
                    self.compute_unknown += 1;
                }
                // Every task starts as a tenant, so that later tasks may join it.
                return Decision::Colocate { job, gpus };
            }
            if !self.opts.backfill {
                break;
            }
        }
        Decision::Wait
    }

    fn metrics(&self, _jobs: &JobTable) -> Vec<(&'static str, f64)> {
        let mean = if self.launches == 0 { 0.0 } else { self.gpus_launched as f64 / self.launches as f64 };
        vec![
            ("tasks_joined_shared_gpus", self.joined_shared as f64),
            ("gpus_per_task_mean", mean),
            ("tasks_rated_without_gflops", self.compute_unknown as f64),
        ]
    }
}
