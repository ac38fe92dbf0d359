//! The FGD packer (`--placement fgd`) after Weng et al., "Beware of
//! Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
//! Gradient Descent", USENIX ATC'23: a task goes where the expected
//! fragmentation of its node grows least.
//!
//! The fragmentation model itself (FGD's `F_n(M)`, our simplifications, the
//! target workload) is a function of the cluster's state and the job list's
//! request mix, so it lives with the cluster, in
//! [`crate::cluster::fragmentation`], where the run's fragmentation metric
//! (`crate::metrics::fragmentation`) reads it too.
//!
//! The packer: for a job of `k` GPUs, on each node with `k` GPUs that can
//! host it, the `k` hostable GPUs with the least free capacity (best fit) are
//! tried, and for `k = 1` every hostable GPU; the candidate with the least
//! growth `F_n(M)` after − before wins (ties: least free capacity left, node
//! index). Nodes in identical states are evaluated once, and a node's
//! evaluation is kept until its state changes ([`Cluster::node_stamp`]).
//! When no GPU of the partition is open to a tenant or partly free (every
//! job holds whole GPUs, as in a trace without memory figures), a node's
//! evaluation depends only on its free-GPU count and its kind (GPU count,
//! memory, type), so only the first node of each (count, kind) is looked at;
//! the choice is the same as looking at every node (a differential test
//! holds it so). A job wider than every node skips the node search. When no
//! node can host the job, it is spread best-fit over the partition as
//! [`super::sharing::ShareFit`] does.
//!
//! **The indexed search.** The search above keeps one
//! call's evaluations by a state key that rounds free capacities to 1e-6
//! and leaves out how a GPU's use splits into tenants, memory and shares,
//! so in general a node may be handed the evaluation of another node whose
//! key is equal. When the tenant cap is at most 2 and no job of the run has
//! a guaranteed share, that key decides the evaluation exactly (a hostable
//! GPU with a tenant is then filled by the job, an idle one is the only
//! kind with free capacity 1, and two free capacities of one GPU memory
//! that differ differ by at least 1 / memory > 1e-6), so every node's
//! evaluation is a function of its exact state and the request's figures.
//! In that case ([`Fgd`] decides it once, at its first call) node states
//! are interned, evaluations are kept by (state, request figures) for the
//! run, and each (partition, request figures) keeps a tree of its nodes'
//! (growth, free left, node index) minima: a call re-evaluates only the
//! nodes whose stamp changed since that request was last made, and reads
//! the least at the root, which is the node the scan picks. The shortcut
//! for partitions without partly free GPUs and requests with a GPU-type
//! constraint keep the scan (with the kept evaluations). Otherwise the
//! scan above runs as it is.

use std::collections::HashMap;

use super::View;
use super::placement::{Placement, Request};
use super::sharing::ShareFit;
use crate::cluster::Cluster;
pub use crate::cluster::fragmentation::{FragModel, FragPrep, demand, gpu_free, node_free};
use crate::ids::{GpuId, JobId, NodeId};
use crate::profile::memo::WordState;

/// The FGD packer (module docs).
#[derive(Clone, Debug, Default)]
pub struct Fgd {
    model: Option<FragModel>,
    /// The model prepared for [`FragModel::node_frag`] calls (built with it).
    prep: FragPrep,
    /// Scratch reused across calls (no choice depends on it): per node state,
    /// its evaluation; a node's GPUs, hostable positions, free capacities, state key.
    memo: HashMap<Vec<u64>, Eval>,
    gpus: Vec<GpuId>,
    host: Vec<usize>,
    free: Vec<f64>,
    key: Vec<u64>,
    /// Per node: evaluations by (node stamp, GPUs, memory need MiB, milli-GPU),
    /// the last few (a node's evaluation is a function of its state and the
    /// request's figures, so a stamp that has not changed gives it again).
    cache: Vec<Vec<Cached>>,
    /// Per node: its class, nodes alike in GPU count, GPU memory and GPU type
    /// (numbered in node order; built at the first call).
    class_of: Vec<u32>,
    /// Per partition: largest class id + 1, and the GPU count of each of its
    /// distinct classes.
    vc_classes: Vec<(usize, Vec<u32>)>,
    /// Look at every node, never only the first of each class.
    scan_all: bool,
    /// The nodes one call looks at, and which classes it has taken.
    nodes: Vec<NodeId>,
    seen: Vec<bool>,
    /// Whether the indexed search applies (module docs), decided at the
    /// first call; `None` before it.
    indexed: Option<bool>,
    /// The indexed search's state.
    index: Index,
}

/// The indexed search's kept state (module docs).
#[derive(Clone, Debug, Default)]
struct Index {
    /// Per node: (stamp, interned state) as last read; stamp 0: never.
    node_state: Vec<(u64, u32)>,
    /// Node states: per GPU (held exclusively, tenants, milli-GPU, MiB) and
    /// the node's class, interned.
    states: HashMap<Box<[u64]>, u32, WordState>,
    /// Request figures (GPUs, memory need MiB, milli-GPU), interned.
    requests: HashMap<(u32, u64, u32), u32, WordState>,
    /// Evaluations by [`eval_key`] of (state, request): (growth, free left,
    /// the pick's place in `picks`), or `None` when the node cannot host.
    evals: HashMap<u64, Option<KeptEval>, WordState>,
    /// The kept evaluations' picks (GPU positions in their node).
    picks: Vec<u8>,
    /// Parts of evaluations that depend on the state only, by [`eval_key`]
    /// of (state, a number that no request id reaches): the fragmentation
    /// (`u32::MAX`), and (growth, free left) of joining the tenant at
    /// position `i` (`u32::MAX - 1 - i`).
    parts: HashMap<u64, (f64, f64), WordState>,
    /// Per (partition, request): its tree of node minima.
    trees: HashMap<(u16, u32), Tree, WordState>,
    /// Scratch: a state key being built; a node's GPUs, hostable
    /// positions, free capacities.
    key: Vec<u64>,
    gpus: Vec<GpuId>,
    host: Vec<usize>,
    free: Vec<f64>,
    f2: Vec<f64>,
}

/// A kept evaluation: growth, free left, and where its pick starts in
/// [`Index::picks`] and how long it is.
type KeptEval = (f64, f64, u32, u32);

/// Kept states before the index starts over (results are unchanged).
const MAX_STATES: usize = 1 << 20;
/// Kept evaluations before they start over.
const MAX_EVALS: usize = 1 << 20;
/// Kept trees before they start over.
const MAX_TREES: usize = 2048;

/// A node's place in a tree: growth and free left as ordered integers (the
/// order of `f64::total_cmp`), then the node index; [`NONE`] for a node
/// that cannot host the request.
type TreeKey = (i64, i64, u32);

/// The key of a node that cannot host the request.
const NONE: TreeKey = (i64::MAX, i64::MAX, u32::MAX);

/// The key of an evaluation of state `sid` for request `rid`: both in one
/// word, mixed by a bijection (the splitmix64 finaliser) so that the map's
/// multiplicative hash sees every bit in its low bits.
fn eval_key(sid: u32, rid: u32) -> u64 {
    let mut z = u64::from(sid) << 32 | u64::from(rid);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `f64::total_cmp`'s order as an integer.
fn ordered(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// The index of a partition's nodes by their key for one request
/// ([`super::node_tree`]).
type Tree = super::node_tree::NodeTree<TreeKey>;

/// Evaluations kept per node.
const CACHE_PER_NODE: usize = 4;

/// A node state's best pick, if any: (growth, free left, GPU positions).
type Eval = Option<(f64, f64, Vec<usize>)>;

/// A cached node evaluation: (node stamp, (GPUs, memory need MiB, milli-GPU), evaluation).
type Cached = (u64, (u32, u64, u32), Eval);

impl Fgd {
    /// A packer against a given target workload (else the job list's mix).
    pub fn with_model(model: FragModel) -> Self {
        Fgd { prep: FragPrep::new(&model), model: Some(model), ..Default::default() }
    }

    /// The same packer looking at every node of the partition at every call
    /// (no shortcut for partitions without partly free GPUs): the slow
    /// reference that differential tests hold the shortcut against.
    pub fn scanning_every_node(mut self) -> Self {
        self.scan_all = true;
        self
    }
}

impl Placement for Fgd {
    fn name(&self) -> &'static str {
        "fgd"
    }

    fn shares(&self) -> bool {
        true
    }

    fn place(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        ShareFit::best_fit().place(cluster, req, out)
    }

    fn fails_by_count(&self) -> bool {
        true
    }

    fn place_job(&mut self, view: &View<'_>, job: JobId, req: Request<'_>, out: &mut Vec<GpuId>) -> bool {
        let cluster = view.cluster;
        let p = cluster.partition(req.vc);
        if self.model.is_none() {
            let model = FragModel::from_jobs(view.jobs, p.max_gpu_mem_mib, p.max_node_gpus);
            self.prep = FragPrep::new(&model);
            self.model = Some(model);
        }
        let (model, prep) = (self.model.as_ref().expect("set above"), &mut self.prep);
        let k = req.gpus as usize;
        // Fewer free or open GPUs than k (`Cluster::is_open`): nowhere to go.
        if k == 0 || p.gpus_free + p.gpus_open < req.gpus {
            return false;
        }
        let _ = job;
        // A job wider than every node of the partition fits none: straight to
        // the spread (the node loop below would skip every node).
        if req.gpus > p.max_node_gpus {
            return ShareFit::best_fit().place(cluster, req, out);
        }
        let need =
            |g: GpuId| cluster.tenant_mem_mib(g, (req.min_gpu_mem_mib > 0).then_some(req.min_gpu_mem_mib), req.milli);
        // Best: (growth, free left, node index, GPUs).
        let mut best: Option<(f64, f64, NodeId, Vec<GpuId>)> = None;
        // Per node state: the best (growth, free left, GPU positions), if any
        // (one call's states; the buffers are kept to save allocations).
        let memo = &mut self.memo;
        memo.clear();
        let (gpus, host, free, key) = (&mut self.gpus, &mut self.host, &mut self.free, &mut self.key);
        let cache = &mut self.cache;
        if cache.len() < cluster.num_nodes() {
            cache.resize_with(cluster.num_nodes(), Vec::new);
        }
        let class = (req.gpus, req.min_gpu_mem_mib, req.milli);
        if self.class_of.len() != cluster.num_nodes() {
            let mut kinds: Vec<(u32, u64, &str)> = Vec::new();
            self.class_of = (0..cluster.num_nodes())
                .map(|n| {
                    let spec = cluster.node(NodeId(n as u32));
                    let kind = (spec.gpus, spec.gpu_mem_mib, spec.gpu_type.as_str());
                    let i = kinds.iter().position(|k| *k == kind).unwrap_or_else(|| {
                        kinds.push(kind);
                        kinds.len() - 1
                    });
                    i as u32
                })
                .collect();
            // Per partition: largest class id + 1, and the GPU count of each
            // of its distinct classes.
            self.vc_classes = cluster
                .partitions()
                .iter()
                .map(|p| {
                    let mut ids: Vec<u32> = p.nodes.iter().map(|n| self.class_of[n.index()]).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    let gpus = ids.iter().map(|&c| kinds[c as usize].0).collect();
                    (ids.last().map_or(0, |&c| c as usize + 1), gpus)
                })
                .collect();
        }
        let indexed = !self.scan_all
            && *self.indexed.get_or_insert_with(|| {
                cluster.share_limits().max_tenants <= 2
                    && view.jobs.iter().all(|(s, _)| s.gpu_milli().unwrap_or(0) == 0)
            });
        let shortcut = !self.scan_all && p.gpus_open == 0 && p.gpus_partial == 0;
        if indexed {
            self.index.bound(cluster.num_nodes());
            if !shortcut && req.gpu_types.is_empty() {
                return self.index.place_by_tree(cluster, model, prep, &req, &self.class_of, out);
            }
        }
        // No GPU of the partition is open or partly free: every held GPU has
        // free capacity 0 and hosts nothing, so a node's evaluation depends
        // only on its free-GPU count and its class, and of the nodes alike in
        // both only the first (lowest index) can win. The free-GPU index lists
        // nodes by count, then index: the first node of each (count, class) is
        // looked at, the rest skipped. Otherwise every node is looked at.
        // Either way the winner is the least (growth, free left, node index).
        let nodes = &mut self.nodes;
        nodes.clear();
        if shortcut {
            let (ids, class_gpus) = &self.vc_classes[req.vc.index()];
            let seen = &mut self.seen;
            for free in req.gpus..=p.max_node_gpus {
                seen.clear();
                seen.resize(*ids, false);
                // Only classes of at least `free` GPUs have a node with `free` free.
                let mut left = class_gpus.iter().filter(|&&g| g >= free).count();
                for node in p.nodes_with_free(free) {
                    let c = self.class_of[node.index()] as usize;
                    if !seen[c] {
                        seen[c] = true;
                        nodes.push(node);
                        left -= 1;
                        if left == 0 {
                            break;
                        }
                    }
                }
            }
        } else {
            nodes.extend(p.nodes.iter().copied());
        }
        let rid = if indexed { self.index.request(&req) } else { 0 };
        for &node in nodes.iter() {
            // A node with fewer than k free or open GPUs cannot host k.
            if cluster.node_share_candidates(node) < req.gpus || !req.fits_type(cluster, node) {
                continue;
            }
            let kept;
            let eval = if indexed {
                kept = self.index.eval(cluster, model, prep, &req, node, self.class_of[node.index()], rid).map(
                    |(d, left, range)| (d, left, self.index.picks[range].iter().map(|&i| usize::from(i)).collect()),
                );
                &kept
            } else {
                let stamp = cluster.node_stamp(node);
                let cached = &mut cache[node.index()];
                match cached.iter().position(|e| e.0 == stamp && e.1 == class) {
                    Some(i) => &cached[i].2,
                    None => {
                        let eval =
                            Self::evaluate(cluster, model, prep, &req, node, k, &need, memo, gpus, host, free, key);
                        if cached.len() >= CACHE_PER_NODE {
                            cached.remove(0);
                        }
                        cached.push((stamp, class, eval));
                        &cached[cached.len() - 1].2
                    }
                }
            };
            if let Some((d, left, pick)) = eval.as_ref() {
                let better = best.as_ref().is_none_or(|(bd, bl, bn, _)| {
                    d.total_cmp(bd).then(left.total_cmp(bl)).then(node.index().cmp(&bn.index())).is_lt()
                });
                if better {
                    let first = cluster.node_gpus(node).next().map_or(0, |g| g.0);
                    best = Some((*d, *left, node, pick.iter().map(|&i| GpuId(first + i as u32)).collect()));
                }
            }
        }
        if let Some((_, _, _, gpus)) = best {
            out.extend(gpus);
            return true;
        }
        ShareFit::best_fit().place(cluster, req, out)
    }
}

impl Fgd {
    /// The best pick on `node` for a request of `k` GPUs (module docs), if
    /// any, through one call's `memo` of node states.
    #[allow(clippy::too_many_arguments)]
    fn evaluate(
        cluster: &Cluster,
        model: &FragModel,
        prep: &mut FragPrep,
        req: &Request<'_>,
        node: NodeId,
        k: usize,
        need: &dyn Fn(GpuId) -> u64,
        memo: &mut HashMap<Vec<u64>, Eval>,
        gpus: &mut Vec<GpuId>,
        host: &mut Vec<usize>,
        free: &mut Vec<f64>,
        key: &mut Vec<u64>,
    ) -> Eval {
        if !prepare(cluster, req, node, k, need, gpus, host, free) {
            return None;
        }
        // The state key: free capacities (to 1e-6) and which GPUs can host.
        key.clear();
        key.extend(free.iter().enumerate().map(|(i, f)| (f * 1e6).round() as u64 * 2 + u64::from(host.contains(&i))));
        key.push(cluster.node(node).gpu_mem_mib);
        if !memo.contains_key(&key[..]) {
            let eval = fresh(cluster, model, prep, req, k, need, gpus, host, free);
            memo.insert(key.clone(), eval);
        }
        memo[&key[..]].clone()
    }
}

/// (growth, free left) of `pick` (GPU positions) on a node whose GPUs are
/// `gpus`, with free capacities `free` and fragmentation `before`; `f2` is
/// scratch.
#[allow(clippy::too_many_arguments)]
fn after(
    cluster: &Cluster,
    model: &FragModel,
    prep: &mut FragPrep,
    req: &Request<'_>,
    need: &dyn Fn(GpuId) -> u64,
    gpus: &[GpuId],
    free: &[f64],
    before: f64,
    pick: &[usize],
    f2: &mut Vec<f64>,
) -> (f64, f64) {
    f2.clear();
    f2.extend_from_slice(free);
    for &i in pick {
        let g = gpus[i];
        let mem = need(g) as f64 / cluster.gpu_mem_mib(g).max(1) as f64;
        let milli = f64::from(req.milli) / 1000.0;
        let s = cluster.share(g);
        let full = s.tenants.len() as u32 + 1 >= cluster.share_limits().max_tenants;
        let used =
            (f64::from(s.milli) / 1000.0 + milli).max((s.mem_mib as f64) / cluster.gpu_mem_mib(g).max(1) as f64 + mem);
        f2[i] = if full { 0.0 } else { (1.0 - used).clamp(0.0, 1.0) };
    }
    (prep.node_frag(model, f2) - before, f2.iter().sum::<f64>())
}

/// Reads `node` for a request of `k` GPUs: its GPUs, the positions of those
/// that can host it and every GPU's free capacity; false when fewer than
/// `k` can host it.
#[allow(clippy::too_many_arguments)]
fn prepare(
    cluster: &Cluster,
    req: &Request<'_>,
    node: NodeId,
    k: usize,
    need: &dyn Fn(GpuId) -> u64,
    gpus: &mut Vec<GpuId>,
    host: &mut Vec<usize>,
    free: &mut Vec<f64>,
) -> bool {
    gpus.clear();
    gpus.extend(cluster.node_gpus(node));
    host.clear();
    host.extend((0..gpus.len()).filter(|&i| cluster.can_host(gpus[i], req.vc, need(gpus[i]), req.milli)));
    if host.len() < k {
        return false;
    }
    node_free(cluster, node, free);
    true
}

/// The best pick among a node's GPUs read by [`prepare`] (module docs).
#[allow(clippy::too_many_arguments)]
fn fresh(
    cluster: &Cluster,
    model: &FragModel,
    prep: &mut FragPrep,
    req: &Request<'_>,
    k: usize,
    need: &dyn Fn(GpuId) -> u64,
    gpus: &[GpuId],
    host: &[usize],
    free: &[f64],
) -> Eval {
    let before = prep.node_frag(model, free);
    let mut f2 = Vec::with_capacity(free.len());
    best_pick(cluster, k, gpus, host, free, |pick, _| {
        after(cluster, model, prep, req, need, gpus, free, before, pick, &mut f2)
    })
}

/// The best pick among a node's GPUs `host` for a job of `k` GPUs, by
/// (fragmentation growth, free left, position), with `eval(pick, idle)`
/// giving (growth, free left) of a pick (`idle`: a single GPU without owner
/// or tenants). One GPU: every host GPU but the second and later idle ones
/// (idle GPUs of one node are alike: the job on any of them leaves the same
/// capacities, and the lowest position wins the tie anyway). More GPUs: the
/// `k` with the least free capacity (position breaks ties).
fn best_pick(
    cluster: &Cluster,
    k: usize,
    gpus: &[GpuId],
    host: &[usize],
    free: &[f64],
    mut eval: impl FnMut(&[usize], bool) -> (f64, f64),
) -> Eval {
    if k == 1 {
        let mut idle_seen = false;
        let mut best: Option<(f64, f64, usize)> = None;
        for &i in host {
            let idle = cluster.owner(gpus[i]).is_none() && cluster.share(gpus[i]).tenants.is_empty();
            if idle && std::mem::replace(&mut idle_seen, true) {
                continue;
            }
            let (d, left) = eval(&[i], idle);
            // The least (growth, free left, position); positions rise, so a
            // tie keeps the earlier.
            if best.is_none_or(|(bd, bl, _)| d.total_cmp(&bd).then(left.total_cmp(&bl)).is_lt()) {
                best = Some((d, left, i));
            }
        }
        best.map(|(d, left, i)| (d, left, vec![i]))
    } else {
        let mut h = host.to_vec();
        h.sort_by(|&a, &b| free[a].total_cmp(&free[b]).then(a.cmp(&b)));
        let pick = h[..k].to_vec();
        let (d, left) = eval(&pick, false);
        Some((d, left, pick))
    }
}

impl Index {
    /// Starts over what grew past its bound (results are unchanged: every
    /// kept answer is a function of what it is kept by), and sizes the
    /// per-node table.
    fn bound(&mut self, nodes: usize) {
        if self.states.len() >= MAX_STATES {
            *self = Index::default();
        }
        if self.evals.len() >= MAX_EVALS || self.parts.len() >= MAX_EVALS {
            self.evals.clear();
            self.picks.clear();
            self.parts.clear();
        }
        if self.trees.len() >= MAX_TREES {
            self.trees.clear();
        }
        if self.node_state.len() != nodes {
            self.node_state = vec![(0, 0); nodes];
        }
    }

    /// The id of a request's figures (what an evaluation reads of it).
    fn request(&mut self, req: &Request<'_>) -> u32 {
        let n = self.requests.len() as u32;
        *self.requests.entry((req.gpus, req.min_gpu_mem_mib, req.milli)).or_insert(n)
    }

    /// The interned state of `node` (of class `class`): every GPU's
    /// exclusive holder (whether any), tenant count, guaranteed milli-GPU
    /// and memory held, kept under the node's stamp.
    fn state(&mut self, cluster: &Cluster, node: NodeId, class: u32) -> u32 {
        let stamp = cluster.node_stamp(node);
        let (kept, id) = self.node_state[node.index()];
        if kept == stamp {
            return id;
        }
        self.key.clear();
        self.key.push(u64::from(class));
        for g in cluster.node_gpus(node) {
            let s = cluster.share(g);
            self.key.push(s.mem_mib);
            self.key
                .push(u64::from(cluster.owner(g).is_some()) | (s.tenants.len() as u64) << 1 | u64::from(s.milli) << 32);
        }
        let id = match self.states.get(&self.key[..]) {
            Some(&id) => id,
            None => {
                let id = self.states.len() as u32;
                self.states.insert(self.key.clone().into_boxed_slice(), id);
                id
            }
        };
        self.node_state[node.index()] = (stamp, id);
        id
    }

    /// The evaluation of `node` (of class `class`) for `req` (request id
    /// `rid`): (growth, free left, the pick's range in `picks`), kept by
    /// (state, request), else from [`prepare`] and [`fresh`].
    #[allow(clippy::too_many_arguments)]
    fn eval(
        &mut self,
        cluster: &Cluster,
        model: &FragModel,
        prep: &mut FragPrep,
        req: &Request<'_>,
        node: NodeId,
        class: u32,
        rid: u32,
    ) -> Option<(f64, f64, std::ops::Range<usize>)> {
        let sid = self.state(cluster, node, class);
        let key = eval_key(sid, rid);
        let kept = match self.evals.get(&key) {
            Some(&e) => e,
            None => {
                let k = req.gpus as usize;
                let need = |g: GpuId| {
                    cluster.tenant_mem_mib(g, (req.min_gpu_mem_mib > 0).then_some(req.min_gpu_mem_mib), req.milli)
                };
                let (gpus, host, free) = (&mut self.gpus, &mut self.host, &mut self.free);
                let eval = if prepare(cluster, req, node, k, &need, gpus, host, free) {
                    let parts = &mut self.parts;
                    // [`fresh`] with the parts that do not depend on the
                    // request kept by state: the fragmentation before, and
                    // (growth, free left) of joining a GPU that has a
                    // tenant, which the tenant cap (at most 2) then fills.
                    let before =
                        *parts.entry(eval_key(sid, u32::MAX)).or_insert_with(|| (prep.node_frag(model, free), 0.0));
                    let before = before.0;
                    let f2 = &mut self.f2;
                    let (gpus, host, free) = (&*gpus, &*host, &*free);
                    best_pick(cluster, k, gpus, host, free, |pick, idle| {
                        if k == 1 && !idle {
                            *parts.entry(eval_key(sid, u32::MAX - 1 - pick[0] as u32)).or_insert_with(|| {
                                after(cluster, model, prep, req, &need, gpus, free, before, pick, f2)
                            })
                        } else {
                            after(cluster, model, prep, req, &need, gpus, free, before, pick, f2)
                        }
                    })
                } else {
                    None
                };
                let e = eval.map(|(d, left, pick)| {
                    let at = self.picks.len() as u32;
                    self.picks.extend(pick.iter().map(|&i| i as u8));
                    (d, left, at, pick.len() as u32)
                });
                self.evals.insert(key, e);
                e
            }
        };
        kept.map(|(d, left, at, len)| (d, left, at as usize..(at + len) as usize))
    }

    /// The node search through the request's tree (module docs): brings
    /// every node whose stamp changed up to date, then takes the least.
    fn place_by_tree(
        &mut self,
        cluster: &Cluster,
        model: &FragModel,
        prep: &mut FragPrep,
        req: &Request<'_>,
        class_of: &[u32],
        out: &mut Vec<GpuId>,
    ) -> bool {
        let p = cluster.partition(req.vc);
        let rid = self.request(req);
        let mut tree = self.trees.remove(&(req.vc.0, rid)).unwrap_or_else(|| Tree::new(p.nodes.len(), NONE));
        tree.refresh(cluster, req.vc, |_, node| {
            if cluster.node_share_candidates(node) < req.gpus {
                NONE
            } else {
                match self.eval(cluster, model, prep, req, node, class_of[node.index()], rid) {
                    Some((d, left, _)) => (ordered(d), ordered(left), node.0),
                    None => NONE,
                }
            }
        });
        let least = tree.least();
        self.trees.insert((req.vc.0, rid), tree);
        if least != NONE {
            let node = NodeId(least.2);
            if let Some((_, _, range)) = self.eval(cluster, model, prep, req, node, class_of[node.index()], rid) {
                let first = cluster.node_gpus(node).next().map_or(0, |g| g.0);
                out.extend(self.picks[range].iter().map(|&i| GpuId(first + u32::from(i))));
                return true;
            }
        }
        ShareFit::best_fit().place(cluster, *req, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::ids::VcId;
    use crate::job::JobTable;

    #[test]
    fn fgd_packs_where_fragmentation_grows_least() {
        // 1 node × 3 GPUs of 10,000 MiB, cap 4 tenants; pods of 0.5 GPU
        // (half of all jobs) and of one whole GPU.
        let mut c = Cluster::new(ClusterSpec::uniform("t", 1, 3, "T4", 10_000)).unwrap();
        c.set_share_limits(crate::cluster::ShareLimits { max_tenants: 4, mem_headroom: 0.0 }).unwrap();
        c.allocate_shared(JobId(0), VcId(0), &[GpuId(0)], 5_000, 500).unwrap();
        let model = FragModel { classes: vec![(1, 0.5, 0.5), (1, 1.0, 0.5)] };
        let mut fgd = Fgd::with_model(model);
        let jobs = JobTable::default();
        let view = View { now: crate::time::SimTime::ZERO, cluster: &c, jobs: &jobs };
        // Before: GPU 0's free 0.5 is a fragment for whole-GPU pods, F = 0.5 × 0.5.
        // A 0.5-GPU pod on GPU 0 fills it (F = 0, growth -0.25); on an idle
        // GPU it leaves two half-free GPUs (F = 0.5 × 1.0, growth +0.25): GPU 0.
        let req = Request { milli: 500, min_gpu_mem_mib: 5_000, ..Request::new(VcId(0), 1) };
        let mut out = Vec::new();
        assert!(fgd.place_job(&view, JobId(1), req, &mut out));
        assert_eq!(out, vec![GpuId(0)]);
    }
}
