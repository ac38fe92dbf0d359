//! Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep
//! Learning", OSDI'18): time-slicing of over-subscribed GPUs in rounds,
//! packing of jobs onto shared GPUs by their measured co-location speed, and
//! migration to improve locality, over the VC partitions.
//!
//! Gandiva's mechanisms (§3 of the paper) are suspend/resume, packing,
//! migration and grow-shrink; its policy (§4) places each job greedily
//! (Algorithm 1: a node of the same *affinity* (GPU count), else a free one,
//! else any GPUs that are free, else over-subscription), time-slices
//! over-subscribed GPUs in rounds of about a minute (reactive mode) and, in
//! introspective mode, packs jobs when the cluster is overloaded and
//! migrates them to better-fit GPUs. Grow-shrink (elastic GPU counts) is not
//! offered: dlsched's trace jobs have fixed GPU counts.
//!
//! # The rules, per VC partition
//!
//! At each scheduling pass of a partition (it runs at the instants of its
//! arrivals and completions and at round boundaries), in this order:
//!
//! 1. **Unpack** (round boundaries, packing on): a pair of jobs sharing a GPU
//!    whose *observed* combined normalised throughput (the sum of the two
//!    jobs' achieved / isolated rates, as the engine computed them) is not
//!    above [`GandivaOptions::pack_threshold`] is undone: the later-started
//!    job is preempted and queued again (§4, "packing is deemed successful
//!    when the total throughput of packed jobs is greater than
//!    time-slicing; if packing is unsuccessful, we undo the packing").
//! 2. **The queue**, in rotation order (arrival order; a job suspended at a
//!    round boundary or unpacked joins the back), each waiting job once:
//!    1. on free GPUs, consolidated ([`super::placement::Consolidate`]:
//!       fewest nodes, best fit). *Our reading*: Gandiva's affinity node
//!       sets (nodes reserved for jobs of one GPU count, least loaded first)
//!       are replaced by consolidate's best fit, which fills the fullest
//!       node with room first;
//!    2. with [`GandivaOptions::spread`], on free GPUs anywhere in the
//!       partition, the fewest nodes (most free first): Algorithm 1's last
//!       fallback before over-subscription, whose fragmentation "can be
//!       cleaned up later using job migration" (step 3);
//!    3. **packing** (the cluster is overloaded: the job found no free
//!       GPUs), with [`GandivaOptions::packing`]: a 1-GPU job with a known
//!       memory figure joins a GPU held by one other such job when their
//!       memory fits beside each other ([`crate::cluster::ShareLimits`]) and
//!       the pair's combined normalised throughput, from the profile
//!       database's measured co-location pairs by the run's co-location rule
//!       ([`crate::profile::coloc`], Gavel's measurements), is above the
//!       threshold; of several such GPUs, the one of highest combined
//!       throughput (then lowest index). *Our reading*: the paper packs the
//!       job of lowest profiled GPU utilisation onto the GPU of lowest
//!       utilisation and measures the result; the database gives the
//!       measured pair speeds directly, so the pair is judged before it is
//!       formed, and step 1 still undoes a pair whose observed speeds fall
//!       short. Multi-GPU jobs are not packed;
//!    4. **time-slicing** (round boundaries, [`GandivaOptions::time_slicing`],
//!       and only while the partition is *over-subscribed*: its active jobs,
//!       running and waiting, ask for more GPUs than it has, the paper's
//!       "more jobs than GPUs"; a job that waits only because the free GPUs
//!       are fragmented or of the wrong kind waits for a completion instead):
//!       the job takes the GPUs of running jobs that have run at least one
//!       full round since they last (re)started, suspending them
//!       ([`Decision::Preempt`]; each pays the run's checkpoint cost,
//!       [`crate::engine::CheckpointModel::Gandiva`] is the paper's) and
//!       queueing them at the back: on the node where the fewest such jobs
//!       (then the fewest of their GPUs, then the lowest node index) free
//!       enough GPUs, oldest (re)start first; a job wider than any node takes
//!       them oldest first across the partition. A job that cannot start
//!       even so preempts nobody.
//! 3. **Migration** ([`GandivaOptions::migration`]): a running job spread
//!    over more nodes than it needs (more than ⌈GPUs / largest node⌉) whose
//!    remaining run time at its current rate exceeds one round moves to
//!    free GPUs on fewer nodes when they exist (consolidated placement):
//!    [`Decision::Preempt`] then [`Decision::Launch`] at the same instant,
//!    paying the checkpoint cost once (§3, "migration ... to improve
//!    locality"). *Our reading*: the remaining-time condition (not worth
//!    moving a job about to finish); Gandiva's migrations to defragment for
//!    a waiting job are not done.
//!
//! A round that decides nothing, after which every running job of the
//! partition has run a full round, is followed by rounds that decide
//! nothing until the partition's next arrival or completion (the queue,
//! the victims, the cluster and the measured speeds stay as they are, and
//! a migration only gets less likely as the remaining time falls): the
//! partition asks for no timer until then, and the engine's stats count
//! fewer timers than rounds.
//!
//! Rounds: boundaries at every multiple of [`GandivaOptions::round_s`]
//! (60 s, the paper's ~1-minute time slices, §4.1) from the trace origin;
//! the policy asks for a timer at the next one while some partition has a
//! waiting job and a running one, or a packed pair to check. An arrival in a
//! full partition waits for the next boundary (*our reading*: Gandiva
//! over-subscribes at once and the job gets its slice at the next round;
//! the difference is when the wait is counted, not its length).
//!
//! A job that holds GPUs exclusively is started with [`Decision::Launch`];
//! with packing available, a 1-GPU job with a memory figure is started as a
//! tenant ([`Decision::Colocate`], alone on an idle GPU) so that another
//! may join it later.
//!
//! # Without profile data
//!
//! Packing needs a memory figure and a model per job (`--rate-model table`,
//! or a jobs-csv trace with `model` and `local_bsz`): a run with no profile
//! database packs nothing, and says so in `summary.json`
//! (`policy_metrics.gandiva_packing_available` = 0). At trace speed
//! (`--rate-model trace`) a spread job runs as fast as a consolidated one,
//! so a migration only costs its checkpoint; `--policy-opt migration=false`
//! turns it off.
//!
//! # Options (`--policy-opt NAME=VALUE`, sweep `policy_opt.NAME`)
//!
//! `time-slicing` (true), `round-s` (60), `packing` (true),
//! `pack-threshold` (1.0, the paper's "greater than time-slicing"),
//! `migration` (true), `spread` (true); [`GandivaOptions`].
//!
//! `summary.json`'s `policy_metrics` gives `gandiva_time_slices`
//! (preemptions at round boundaries), `gandiva_packs`, `gandiva_unpacks`,
//! `gandiva_migrations` and `gandiva_packing_available`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::placement::{Consolidate, Placement, Request};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::cluster::Cluster;
use crate::error::RunError;
use crate::ids::{GpuId, JobId, NodeId, VcId};
use crate::job::{JobState, JobTable};
use crate::profile::coloc::{Interference, ProfileInterference};

/// The longest round accepted, s (about 115 days).
const MAX_ROUND_S: u64 = 10_000_000;

/// Gandiva's options. In a file (TOML/JSON) the names are kebab-case
/// (`round-s`); the snake_case spelling (`round_s`) is accepted too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct GandivaOptions {
    /// Time-slice over-subscribed partitions in rounds: at a round boundary
    /// a waiting job suspends running jobs that have run a full round
    /// (default true; §4.1).
    #[serde(alias = "time_slicing")]
    pub time_slicing: bool,
    /// Round length, s (default 60: the paper's time slices of about one
    /// minute, §4.1). 1 to 10,000,000.
    #[serde(alias = "round_s")]
    pub round_s: u64,
    /// Pack 1-GPU jobs onto a GPU shared with one other job when the
    /// measured pair speeds beat the threshold (default true; §4, packing
    /// during overload). Needs the profile database (module docs).
    pub packing: bool,
    /// Combined normalised throughput (sum of the two jobs' speeds, 1 =
    /// one job alone) a pack must exceed to be formed and to be kept
    /// (default 1.0: "greater than time-slicing", §4). Finite, >= 0.
    #[serde(alias = "pack_threshold")]
    pub pack_threshold: f64,
    /// Migrate spread jobs to fewer nodes when free GPUs allow (default
    /// true; §3, migration for locality).
    pub migration: bool,
    /// When no node has room, place a job on free GPUs across nodes (the
    /// fewest, most free first) rather than wait (default true; Algorithm
    /// 1's fallback, our reading).
    pub spread: bool,
}

impl Default for GandivaOptions {
    fn default() -> Self {
        GandivaOptions {
            time_slicing: true,
            round_s: 60,
            packing: true,
            pack_threshold: 1.0,
            migration: true,
            spread: true,
        }
    }
}

/// The registry's entry (`"gandiva" => Gandiva(GandivaOptions)`).
impl BuildPolicy for GandivaOptions {
    fn preemption_period_ms(&self, _kind: &str) -> Option<u64> {
        self.time_slicing.then_some(self.round_s.saturating_mul(1000))
    }

    fn validate(&self, _kind: &str) -> Result<(), String> {
        if self.round_s == 0 || self.round_s > MAX_ROUND_S {
            return Err(format!("gandiva: round-s must be 1 to {MAX_ROUND_S} s, got {}", self.round_s));
        }
        if !(self.pack_threshold.is_finite() && self.pack_threshold >= 0.0) {
            return Err(format!("gandiva: pack-threshold must be finite and >= 0, got {}", self.pack_threshold));
        }
        Ok(())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let coloc = match (&ctx.db, self.packing) {
            (Some(db), true) => Some(ProfileInterference::new(db.clone())),
            _ => None,
        };
        Ok(Box::new(Gandiva::new(self.clone(), ctx.cluster.partitions().len(), coloc)))
    }
}

/// One partition's books.
#[derive(Default)]
struct VcBook {
    /// Waiting jobs (pending or suspended) in rotation order (key, job).
    waiting: BTreeSet<(u64, JobId)>,
    /// Running jobs.
    running: BTreeSet<JobId>,
    /// Running jobs spread over more nodes than they need.
    spread: BTreeSet<JobId>,
    /// Running jobs that joined another job's GPU (packs to check).
    packed: BTreeSet<JobId>,
    /// Waiting jobs by GPU count (count of jobs), and how many of them are
    /// constrained (memory, GPU types or a recorded split): bounds that end
    /// a queue walk early.
    waiting_by_gpus: BTreeMap<u32, u32>,
    waiting_constrained: u32,
}

impl VcBook {
    fn add_waiting(&mut self, key: u64, job: JobId, gpus: u32, constrained: bool) {
        if self.waiting.insert((key, job)) {
            *self.waiting_by_gpus.entry(gpus).or_default() += 1;
            self.waiting_constrained += u32::from(constrained);
        }
    }

    fn remove_waiting(&mut self, key: u64, job: JobId, gpus: u32, constrained: bool) {
        if self.waiting.remove(&(key, job)) {
            if let Some(n) = self.waiting_by_gpus.get_mut(&gpus) {
                *n -= 1;
                if *n == 0 {
                    self.waiting_by_gpus.remove(&gpus);
                }
            }
            self.waiting_constrained -= u32::from(constrained);
        }
    }
}

/// Whether a job's placement depends on more than GPU counts.
fn constrained(view: &View<'_>, job: JobId) -> bool {
    let r = request(view, job);
    !(r.unconstrained() && r.shape.is_empty())
}

/// One step of a plan.
#[derive(Clone, Debug)]
enum Action {
    /// Suspend a job (time slice, unpack or migration).
    Preempt(JobId, Why),
    /// Place a waiting job on free GPUs now (after the preemptions before it).
    Place(JobId),
    /// Start a job on these GPUs (a migration's second half).
    Launch(JobId, Vec<GpuId>),
}

/// Why a job is preempted, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Slice,
    Unpack,
    Migrate,
}

/// Where the pass of the current partition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Unpack,
    Queue,
    Migrate,
}

/// What one step of the queue walk gave.
enum Walk {
    /// Start this job now.
    Start(Decision),
    /// Preemptions and a placement were queued as actions.
    Planned,
    /// The walk is over.
    Done,
}

/// The jobs a pass may suspend for waiting ones (module docs, step 2.4).
#[derive(Default)]
struct Victims {
    /// Per node, (rank, job, GPUs it alone holds there), by rank: oldest
    /// (re)start first, then job id.
    per_node: BTreeMap<NodeId, Vec<(usize, JobId, u32)>>,
    /// GPUs the victims not yet taken would free.
    total: u32,
    /// Per victim, (node, GPUs it alone holds there).
    nodes_of: BTreeMap<JobId, Vec<(NodeId, u32)>>,
}

impl Victims {
    fn remove(&mut self, jobs: &[JobId]) {
        for j in jobs {
            for (n, k) in self.nodes_of.remove(j).unwrap_or_default() {
                self.total -= k;
                if let Some(list) = self.per_node.get_mut(&n) {
                    list.retain(|e| e.1 != *j);
                    if list.is_empty() {
                        self.per_node.remove(&n);
                    }
                }
            }
        }
    }
}

/// The partition being planned.
struct Active {
    vc: VcId,
    /// The pass is at a round boundary.
    round: bool,
    phase: Phase,
    /// The last waiting entry examined in this pass.
    cursor: Option<(u64, JobId)>,
    /// Jobs that may be suspended for a waiting one (ran a full round);
    /// computed on first use.
    victims: Option<Victims>,
    /// Smallest GPU count of an unconstrained job for which no victims
    /// would do, [wider than a node, within a node]: larger ones of the
    /// same kind cannot be helped either (victims only leave the set).
    slice_failed: [u32; 2],
    /// Smallest GPU count of an unconstrained job that found no free GPUs
    /// in this pass (larger ones cannot find them either).
    min_failed: u32,
    /// Migration candidates already examined in this pass.
    migrated_upto: Option<JobId>,
    /// A decision was returned in this pass.
    decided: bool,
    /// The partition is over-subscribed (time-slicing allowed).
    oversubscribed: bool,
}

/// Gandiva; see the module docs.
pub struct Gandiva {
    opts: GandivaOptions,
    round_ms: u64,
    /// The co-location model packing judges pairs by (the run's database);
    /// `None`: packing off.
    coloc: Option<ProfileInterference>,
    vcs: Vec<VcBook>,
    /// Rotation key of each waiting job, by job index.
    keys: Vec<u64>,
    seq: u64,
    dirty: BTreeSet<u16>,
    round_due: BTreeSet<u16>,
    /// Timers asked for and not yet delivered, ms.
    timers: BTreeSet<u64>,
    actions: VecDeque<Action>,
    active: Option<Active>,
    /// Pairs (lower id, higher id) whose pack was undone: not packed again.
    failed_pairs: BTreeSet<(JobId, JobId)>,
    /// Per partition: its last round decided nothing and so would every
    /// round until its next arrival or completion (see the module docs).
    stable: Vec<bool>,
    /// The pass that just ended.
    finished: Option<Active>,
    /// Skip the rounds that provably decide nothing (default).
    skip_rounds: bool,
    time_slices: u64,
    packs: u64,
    unpacks: u64,
    migrations: u64,
}

impl Gandiva {
    /// Gandiva with `opts` over `partitions` partitions; `coloc` judges
    /// packs (`None`: no packing).
    pub fn new(opts: GandivaOptions, partitions: usize, coloc: Option<ProfileInterference>) -> Self {
        let coloc = coloc.filter(|_| opts.packing);
        Gandiva {
            round_ms: opts.round_s.max(1) * 1000,
            opts,
            coloc,
            vcs: (0..partitions.max(1)).map(|_| VcBook::default()).collect(),
            keys: Vec::new(),
            seq: 0,
            dirty: BTreeSet::new(),
            round_due: BTreeSet::new(),
            timers: BTreeSet::new(),
            actions: VecDeque::new(),
            active: None,
            failed_pairs: BTreeSet::new(),
            stable: vec![false; partitions.max(1)],
            finished: None,
            skip_rounds: true,
            time_slices: 0,
            packs: 0,
            unpacks: 0,
            migrations: 0,
        }
    }

    /// With `on = false`, a timer at every boundary while a partition has
    /// a waiting and a running job, as before round skipping; the schedule is
    /// the same either way, so this is for tests that compare the two.
    pub fn with_round_skipping(mut self, on: bool) -> Self {
        self.skip_rounds = on;
        self
    }

    /// Whether partition `vc`'s active jobs ask for more GPUs than it has.
    fn oversubscribed(&self, view: &View<'_>, vc: VcId) -> bool {
        let b = &self.vcs[vc.index()];
        let waiting: u64 = b.waiting_by_gpus.iter().map(|(&g, &n)| u64::from(g) * u64::from(n)).sum();
        let running: u64 = b.running.iter().map(|&j| u64::from(view.jobs.spec(j).gpus)).sum();
        waiting + running > u64::from(view.cluster.partition(vc).gpus_total)
    }

    /// An arrival or a completion in partition `vc` ends its skipping; at
    /// a boundary it is the round the skipped timer would have started.
    fn wake_partition(&mut self, view: &View<'_>, vc: VcId) {
        if std::mem::take(&mut self.stable[vc.index()]) && view.now.as_ms().is_multiple_of(self.round_ms) {
            self.round_due.insert(vc.0);
        }
    }

    fn enqueue(&mut self, view: &View<'_>, job: JobId) {
        self.seq += 1;
        if self.keys.len() <= job.index() {
            self.keys.resize(job.index() + 1, 0);
        }
        self.keys[job.index()] = self.seq;
        let spec = view.jobs.spec(job);
        let (vc, gpus, cons) = (spec.vc, spec.gpus, constrained(view, job));
        self.vcs[vc.index()].add_waiting(self.seq, job, gpus, cons);
    }

    fn key(&self, job: JobId) -> u64 {
        self.keys.get(job.index()).copied().unwrap_or(0)
    }

    /// Whether `job` is started as a tenant (packing available, 1 GPU, a
    /// memory figure, no guaranteed share).
    fn shares(&self, view: &View<'_>, job: JobId) -> bool {
        let s = view.jobs.spec(job);
        self.coloc.is_some() && s.gpus == 1 && s.gpu_mem_mib().is_some() && s.gpu_milli().is_none() && s.task.is_none()
    }

    /// The decision starting `job` on `gpus` (free GPUs), booked.
    fn start(&mut self, view: &View<'_>, job: JobId, gpus: Vec<GpuId>) -> Decision {
        let spec = view.jobs.spec(job);
        let vc = spec.vc;
        let c = view.cluster;
        let spread = c.nodes_spanned(&gpus) > spec.gpus.div_ceil(c.partition(vc).max_node_gpus.max(1));
        let key = self.key(job);
        let cons = constrained(view, job);
        let b = &mut self.vcs[vc.index()];
        b.remove_waiting(key, job, spec.gpus, cons);
        b.running.insert(job);
        if spread {
            b.spread.insert(job);
        }
        let tenant = self.shares(view, job)
            && gpus.iter().all(|&g| c.can_host(g, vc, c.tenant_mem_mib(g, spec.gpu_mem_mib(), 0), 0));
        if tenant { Decision::Colocate { job, gpus } } else { Decision::Launch { job, gpus } }
    }

    /// The decision suspending `job`, booked (it joins the back of the queue).
    fn suspend(&mut self, view: &View<'_>, job: JobId, why: Why) -> Decision {
        let vc = view.jobs.spec(job).vc;
        let b = &mut self.vcs[vc.index()];
        b.running.remove(&job);
        b.spread.remove(&job);
        b.packed.remove(&job);
        match why {
            Why::Slice => self.time_slices += 1,
            Why::Unpack => self.unpacks += 1,
            Why::Migrate => self.migrations += 1,
        }
        self.enqueue(view, job);
        Decision::Preempt { job }
    }

    /// Free GPUs for `job` now: consolidated, else (with `spread`) across nodes.
    fn free_gpus(&self, view: &View<'_>, job: JobId) -> Option<Vec<GpuId>> {
        let req = request(view, job);
        let mut out = Vec::new();
        if Consolidate.place(view.cluster, req, &mut out) {
            return Some(out);
        }
        out.clear();
        (self.opts.spread && spread_place(view.cluster, &req, &mut out)).then_some(out)
    }

    /// The GPU a waiting 1-GPU job would best join, and the pair's
    /// combined normalised throughput, if above the threshold.
    fn pack_target(&self, view: &View<'_>, job: JobId) -> Option<GpuId> {
        let coloc = self.coloc.as_ref()?;
        if !self.shares(view, job) {
            return None;
        }
        let c = view.cluster;
        let spec = view.jobs.spec(job);
        let req = request(view, job);
        let p = c.partition(spec.vc);
        if p.gpus_open == 0 {
            return None;
        }
        let mut best: Option<(f64, GpuId)> = None;
        for &node in &p.nodes {
            if c.node_open(node) == 0 || !req.fits_node(c, node) {
                continue;
            }
            let gpu_type = &c.node(node).gpu_type;
            for g in c.node_gpus(node) {
                let &[other] = c.tenants(g) else { continue };
                let JobState::Running(r) = view.jobs.state(other) else { continue };
                if !r.shared || r.work_done || r.gpus.len() != 1 || !self.shares(view, other) {
                    continue;
                }
                if self.failed_pairs.contains(&(job.min(other), job.max(other))) {
                    continue;
                }
                if !c.can_host(g, spec.vc, c.tenant_mem_mib(g, spec.gpu_mem_mib(), 0), 0) {
                    continue;
                }
                let o = view.jobs.spec(other);
                let sum = coloc.speed(gpu_type, spec, &[o]) + coloc.speed(gpu_type, o, &[spec]);
                if sum > self.opts.pack_threshold && best.is_none_or(|(b, _)| sum > b) {
                    best = Some((sum, g));
                }
            }
        }
        best.map(|(_, g)| g)
    }

    /// Running jobs of `vc` that have run a full round since they
    /// (re)started, indexed by node (module docs, step 2.4).
    fn victims(&self, view: &View<'_>, vc: VcId) -> Victims {
        let now = view.now.as_ms();
        let c = view.cluster;
        let mut v: Vec<(u64, JobId)> = self.vcs[vc.index()]
            .running
            .iter()
            .filter_map(|&j| match view.jobs.state(j) {
                JobState::Running(r) if !r.work_done && r.start.as_ms() + self.round_ms <= now => {
                    Some((r.start.as_ms(), j))
                }
                _ => None,
            })
            .collect();
        v.sort_unstable();
        let mut out = Victims::default();
        for (rank, &(_, j)) in v.iter().enumerate() {
            let JobState::Running(r) = view.jobs.state(j) else { continue };
            // GPUs it would free: those it holds alone, per node.
            let mut per: Vec<(NodeId, u32)> = Vec::new();
            for &g in &r.gpus {
                if c.owner(g) == Some(j) || c.tenants(g) == [j] {
                    let n = c.node_of(g);
                    match per.iter_mut().find(|(m, _)| *m == n) {
                        Some(e) => e.1 += 1,
                        None => per.push((n, 1)),
                    }
                }
            }
            for &(n, k) in &per {
                out.total += k;
                out.per_node.entry(n).or_default().push((rank, j, k));
            }
            out.nodes_of.insert(j, per);
        }
        out
    }

    /// The victims whose suspension lets `job` start on one node (or, wider
    /// than any node, across the partition); none if that cannot be done
    /// (module docs, step 2.4).
    fn slice_for(&self, view: &View<'_>, job: JobId, victims: &Victims) -> Option<Vec<JobId>> {
        let c = view.cluster;
        let req = request(view, job);
        let p = c.partition(req.vc);
        if p.gpus_free + victims.total < req.gpus {
            return None;
        }
        let largest = p.nodes.iter().filter(|&&n| req.fits_node(c, n)).map(|&n| c.node(n).gpus).max()?;
        if req.gpus > largest {
            let mut free: u32 = p.nodes.iter().filter(|&&n| req.fits_node(c, n)).map(|&n| c.node_free(n)).sum();
            let mut entries: Vec<(usize, JobId, u32)> = victims
                .per_node
                .iter()
                .filter(|(n, _)| req.fits_node(c, **n))
                .flat_map(|(_, l)| l.iter().copied())
                .collect();
            entries.sort_unstable();
            let mut chosen: Vec<JobId> = Vec::new();
            for (_, v, k) in entries {
                if free >= req.gpus {
                    break;
                }
                free += k;
                if chosen.last() != Some(&v) {
                    chosen.push(v);
                }
            }
            return (free >= req.gpus && !chosen.is_empty()).then_some(chosen);
        }
        // (victims, their GPUs, node index) of the cheapest node.
        let mut best: Option<((usize, u32, usize), Vec<JobId>)> = None;
        for (&n, list) in &victims.per_node {
            if c.node(n).gpus < req.gpus || !req.fits_node(c, n) {
                continue;
            }
            let mut free = c.node_free(n);
            let mut chosen = Vec::new();
            let mut cost = 0u32;
            for &(_, v, k) in list {
                if free >= req.gpus {
                    break;
                }
                free += k;
                chosen.push(v);
                cost += view.jobs.spec(v).gpus;
            }
            if free < req.gpus || chosen.is_empty() {
                continue;
            }
            let key = (chosen.len(), cost, n.index());
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, chosen));
            }
        }
        best.map(|(_, v)| v)
    }

    /// The next decision of the partition being planned, if any.
    fn step(&mut self, view: &View<'_>) -> Option<Decision> {
        loop {
            if let Some(a) = self.actions.pop_front() {
                match a {
                    Action::Preempt(job, why) => {
                        if matches!(view.jobs.state(job), JobState::Running(r) if !r.work_done) {
                            return Some(self.suspend(view, job, why));
                        }
                    }
                    Action::Place(job) => {
                        if let Some(gpus) = self.free_gpus(view, job) {
                            return Some(self.start(view, job, gpus));
                        }
                    }
                    Action::Launch(job, gpus) => {
                        if gpus.iter().all(|&g| view.cluster.owner(g).is_none() && view.cluster.tenants(g).is_empty()) {
                            return Some(self.start(view, job, gpus));
                        }
                    }
                }
                continue;
            }
            let (vc, round, phase) = {
                let act = self.active.as_ref()?;
                (act.vc, act.round, act.phase)
            };
            match phase {
                Phase::Unpack => {
                    if round
                        && self.coloc.is_some()
                        && let Some(j) = self.unpack_victim(view, vc)
                    {
                        self.actions.push_back(Action::Preempt(j, Why::Unpack));
                        continue;
                    }
                    self.set_phase(Phase::Queue);
                }
                Phase::Queue => match self.queue_step(view) {
                    Walk::Start(d) => return Some(d),
                    Walk::Planned => continue,
                    Walk::Done => self.set_phase(Phase::Migrate),
                },
                Phase::Migrate => {
                    if self.opts.migration
                        && let Some((j, gpus)) = self.migration(view)
                    {
                        self.actions.push_back(Action::Preempt(j, Why::Migrate));
                        self.actions.push_back(Action::Launch(j, gpus));
                        continue;
                    }
                    self.finished = self.active.take();
                    return None;
                }
            }
        }
    }

    fn set_phase(&mut self, phase: Phase) {
        if let Some(a) = self.active.as_mut() {
            a.phase = phase;
        }
    }

    /// A packed job of `vc` to preempt because its pair's observed combined
    /// speed is not above the threshold (the later-started of the two).
    fn unpack_victim(&mut self, view: &View<'_>, vc: VcId) -> Option<JobId> {
        let speed = |j: JobId| match view.jobs.state(j) {
            JobState::Running(r) if r.isolated_rate > 0.0 => Some((r.rate / r.isolated_rate, r.start, r.work_done)),
            _ => None,
        };
        for &j in &self.vcs[vc.index()].packed {
            let JobState::Running(r) = view.jobs.state(j) else { continue };
            let &[g] = r.gpus.as_slice() else { continue };
            let &[a, b] = view.cluster.tenants(g) else { continue };
            let (Some(sa), Some(sb)) = (speed(a), speed(b)) else { continue };
            if sa.2 || sb.2 || sa.0 + sb.0 > self.opts.pack_threshold - 1e-9 {
                continue;
            }
            self.failed_pairs.insert((a.min(b), a.max(b)));
            return Some(if (sa.1, a) > (sb.1, b) { a } else { b });
        }
        None
    }

    /// The queue walk (module docs, step 2): the next decision, if any.
    fn queue_step(&mut self, view: &View<'_>) -> Walk {
        let Some(act) = self.active.as_ref() else { return Walk::Done };
        let (vc, round) = (act.vc, act.round);
        let c = view.cluster;
        let p = c.partition(vc);
        let nothing_free = p.gpus_free == 0;
        let may_slice = round && self.opts.time_slicing && act.oversubscribed;
        if nothing_free && !may_slice && (self.coloc.is_none() || p.gpus_open == 0) {
            return Walk::Done;
        }
        loop {
            if self.hopeless(vc, may_slice, p.max_node_gpus, p.gpus_free, p.gpus_open) {
                return Walk::Done;
            }
            let Some(act) = self.active.as_mut() else { return Walk::Done };
            let waiting = &self.vcs[vc.index()].waiting;
            let next = match act.cursor {
                None => waiting.first().copied(),
                Some(k) => waiting.range((Bound::Excluded(k), Bound::Unbounded)).next().copied(),
            };
            let Some((key, job)) = next else { return Walk::Done };
            act.cursor = Some((key, job));
            let min_failed = act.min_failed;
            let req = request(view, job);
            let by_count = req.unconstrained() && req.shape.is_empty();
            // 2.1-2.2: free GPUs.
            if !(by_count && req.gpus >= min_failed) {
                if let Some(gpus) = self.free_gpus(view, job) {
                    return Walk::Start(self.start(view, job, gpus));
                }
                if by_count && let Some(act) = self.active.as_mut() {
                    act.min_failed = act.min_failed.min(req.gpus);
                }
            }
            // 2.3: packing.
            if let Some(g) = self.pack_target(view, job) {
                self.packs += 1;
                let b = &mut self.vcs[vc.index()];
                b.remove_waiting(key, job, req.gpus, !by_count);
                b.running.insert(job);
                b.packed.insert(job);
                return Walk::Start(Decision::Colocate { job, gpus: vec![g] });
            }
            // 2.4: time-slicing.
            if may_slice {
                if self.active.as_ref().is_some_and(|a| a.victims.is_none()) {
                    let v = self.victims(view, vc);
                    if let Some(a) = self.active.as_mut() {
                        a.victims = Some(v);
                    }
                }
                let single = req.gpus <= p.max_node_gpus;
                let failed = self.active.as_ref().map_or(u32::MAX, |a| a.slice_failed[usize::from(single)]);
                let chosen = match self.active.as_ref().and_then(|a| a.victims.as_ref()) {
                    Some(v) if v.total > 0 && !(by_count && req.gpus >= failed) => self.slice_for(view, job, v),
                    _ => None,
                };
                if let Some(chosen) = chosen
                    && let Some(a) = self.active.as_mut()
                {
                    if let Some(v) = a.victims.as_mut() {
                        v.remove(&chosen);
                    }
                    // GPUs come free: earlier failures by count say nothing now.
                    a.min_failed = u32::MAX;
                    self.actions.extend(chosen.into_iter().map(|j| Action::Preempt(j, Why::Slice)));
                    self.actions.push_back(Action::Place(job));
                    return Walk::Planned;
                }
                if by_count && let Some(a) = self.active.as_mut() {
                    let f = &mut a.slice_failed[usize::from(single)];
                    *f = (*f).min(req.gpus);
                }
            }
            if self.hopeless(vc, may_slice, p.max_node_gpus, p.gpus_free, p.gpus_open) {
                return Walk::Done;
            }
        }
    }

    /// True when no waiting job of `vc` left in the walk can start: every
    /// one is unconstrained and at least as wide as a job that already found
    /// no free GPUs, no pack is possible, and no victims are left or none
    /// would do for a job that narrow (the failure bounds only fall as the
    /// pass goes on: GPUs are only taken, victims only used).
    fn hopeless(&self, vc: VcId, may_slice: bool, max_node: u32, free: u32, open: u32) -> bool {
        let b = &self.vcs[vc.index()];
        let Some(a) = self.active.as_ref() else { return true };
        if b.waiting_constrained > 0 || (self.coloc.is_some() && open > 0) {
            return false;
        }
        let Some((&min_g, _)) = b.waiting_by_gpus.first_key_value() else { return true };
        if min_g < a.min_failed && min_g <= free {
            return false;
        }
        if !may_slice {
            return true;
        }
        match a.victims.as_ref() {
            None => false,
            Some(v) if v.total == 0 => true,
            Some(_) => {
                // Within a node: the narrowest waiting job; wider than a node: the narrowest such.
                let single_ok = min_g > max_node || min_g >= a.slice_failed[1];
                let wide = b.waiting_by_gpus.range(max_node + 1..).next().map(|(&g, _)| g);
                single_ok && wide.is_none_or(|g| g >= a.slice_failed[0])
            }
        }
    }

    /// A spread job of the partition being planned that can move to fewer
    /// nodes now, with its new GPUs (module docs, step 3).
    fn migration(&mut self, view: &View<'_>) -> Option<(JobId, Vec<GpuId>)> {
        let act = self.active.as_ref()?;
        let vc = act.vc;
        let from = act.migrated_upto;
        let c = view.cluster;
        if c.partition(vc).gpus_free == 0 {
            return None;
        }
        let now = view.now;
        let candidates: Vec<JobId> =
            self.vcs[vc.index()].spread.iter().copied().filter(|&j| from.is_none_or(|f| j > f)).collect();
        for j in candidates {
            self.active.as_mut()?.migrated_upto = Some(j);
            let JobState::Running(r) = view.jobs.state(j) else { continue };
            if r.work_done || r.shared {
                continue;
            }
            let left = (r.remaining - now.since(r.settled_at) as f64 * r.rate).max(0.0) / r.rate;
            if left <= self.round_ms as f64 {
                continue;
            }
            let mut out = Vec::new();
            if Consolidate.place(c, request(view, j), &mut out) && c.nodes_spanned(&out) < r.nodes_spanned {
                return Some((j, out));
            }
        }
        None
    }

    /// The next round boundary after now, ms, if a timer is wanted there:
    /// some partition has a waiting and a running job (time-slicing on), or
    /// a packed pair to check.
    /// After a round of partition `vc` that decided nothing: whether every
    /// round until its next arrival or completion decides nothing too. True
    /// when every running job of the partition has run a full round (the
    /// victims of a later round are then the same jobs); the queue, the free
    /// GPUs, the packed pairs and their measured speeds, and whether the
    /// partition is over-subscribed change only with an arrival, a
    /// completion or a decision, and a migration skipped for its remaining
    /// time stays skipped.
    fn quiet_is_stable(&self, view: &View<'_>, vc: VcId) -> bool {
        let now = view.now.as_ms();
        self.vcs[vc.index()].running.iter().all(|&j| match view.jobs.state(j) {
            JobState::Running(r) => r.work_done || r.start.as_ms() + self.round_ms <= now,
            _ => true,
        })
    }

    fn wanted_timer(&self, view: &View<'_>) -> Option<u64> {
        let wanted = self.vcs.iter().zip(&self.stable).filter(|(_, s)| !**s).any(|(b, _)| {
            (self.opts.time_slicing && !b.waiting.is_empty() && !b.running.is_empty())
                || (self.coloc.is_some() && !b.packed.is_empty())
        });
        if !wanted {
            return None;
        }
        let at = (view.now.as_ms() / self.round_ms + 1) * self.round_ms;
        (!self.timers.contains(&at)).then_some(at)
    }
}

/// Places `req` on free GPUs of its partition across nodes, the freest
/// eligible nodes first (ties: lowest index), so that it spans as few nodes
/// as free GPUs allow.
fn spread_place(cluster: &Cluster, req: &Request<'_>, out: &mut Vec<GpuId>) -> bool {
    let p = cluster.partition(req.vc);
    if req.gpus == 0 || req.gpus > p.gpus_free {
        return false;
    }
    let mut nodes: Vec<(u32, NodeId)> = p
        .nodes
        .iter()
        .filter(|&&n| cluster.node_free(n) > 0 && req.fits_node(cluster, n))
        .map(|&n| (cluster.node_free(n), n))
        .collect();
    if nodes.iter().map(|&(f, _)| f).sum::<u32>() < req.gpus {
        return false;
    }
    nodes.sort_unstable_by_key(|&(f, n)| (std::cmp::Reverse(f), n));
    let mut left = req.gpus;
    for (f, n) in nodes {
        let take = f.min(left);
        cluster.take_free_gpus(n, take, out);
        left -= take;
        if left == 0 {
            return true;
        }
    }
    false
}

impl Policy for Gandiva {
    fn name(&self) -> String {
        "gandiva".into()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc;
        self.wake_partition(view, vc);
        self.enqueue(view, job);
        self.dirty.insert(vc.0);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc;
        self.wake_partition(view, vc);
        let b = &mut self.vcs[vc.index()];
        b.running.remove(&job);
        b.spread.remove(&job);
        b.packed.remove(&job);
        self.dirty.insert(vc.0);
    }

    fn on_timer(&mut self, view: &View<'_>) {
        let now = view.now.as_ms();
        while self.timers.first().is_some_and(|&t| t <= now) {
            self.timers.pop_first();
        }
        if !now.is_multiple_of(self.round_ms) {
            return;
        }
        for (i, b) in self.vcs.iter().enumerate() {
            if self.stable[i] {
                continue;
            }
            if (!b.waiting.is_empty() && !b.running.is_empty()) || !b.packed.is_empty() {
                self.dirty.insert(i as u16);
                self.round_due.insert(i as u16);
            }
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        loop {
            if self.active.is_some() || !self.actions.is_empty() {
                if let Some(d) = self.step(view) {
                    if let Some(a) = self.active.as_mut() {
                        a.decided = true;
                    }
                    return d;
                }
                if let Some(a) = self.finished.take()
                    && a.round
                    && !a.decided
                    && self.skip_rounds
                {
                    self.stable[a.vc.index()] = self.quiet_is_stable(view, a.vc);
                }
                continue;
            }
            let Some(vc) = self.dirty.pop_first() else { break };
            let round = self.round_due.remove(&vc);
            self.stable[usize::from(vc)] = false;
            let oversubscribed = round && self.oversubscribed(view, VcId(vc));
            self.active = Some(Active {
                vc: VcId(vc),
                round,
                phase: Phase::Unpack,
                cursor: None,
                victims: None,
                slice_failed: [u32::MAX; 2],
                min_failed: u32::MAX,
                migrated_upto: None,
                decided: false,
                oversubscribed,
            });
        }
        match self.wanted_timer(view) {
            Some(at) => {
                self.timers.insert(at);
                Decision::WakeAt(crate::time::SimTime(at))
            }
            None => Decision::Wait,
        }
    }

    fn metrics(&self, _jobs: &JobTable) -> Vec<(&'static str, f64)> {
        vec![
            ("gandiva_time_slices", self.time_slices as f64),
            ("gandiva_packs", self.packs as f64),
            ("gandiva_unpacks", self.unpacks as f64),
            ("gandiva_migrations", self.migrations as f64),
            ("gandiva_packing_available", if self.coloc.is_some() { 1.0 } else { 0.0 }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_validate_and_parse_both_spellings() {
        assert!(GandivaOptions::default().validate("gandiva").is_ok());
        let bad = GandivaOptions { round_s: 0, ..Default::default() };
        assert!(bad.validate("gandiva").unwrap_err().contains("round-s"));
        let bad = GandivaOptions { pack_threshold: f64::NAN, ..Default::default() };
        assert!(bad.validate("gandiva").unwrap_err().contains("pack-threshold"));
        let o: GandivaOptions = serde_json::from_str(r#"{"round-s": 30, "pack_threshold": 1.2}"#).unwrap();
        assert_eq!((o.round_s, o.pack_threshold, o.packing), (30, 1.2, true));
        assert!(serde_json::from_str::<GandivaOptions>(r#"{"rounds": 30}"#).is_err());
    }

    #[test]
    fn spread_takes_the_freest_nodes_first() {
        // 3 nodes x 4 GPUs; node 0 has 1 free, node 1 has 3, node 2 has 2.
        let mut c = Cluster::new(crate::cluster::ClusterSpec::uniform("t", 3, 4, "V100", 16_000)).unwrap();
        c.allocate(JobId(0), VcId(0), &[GpuId(0), GpuId(1), GpuId(2)]).unwrap();
        c.allocate(JobId(1), VcId(0), &[GpuId(4)]).unwrap();
        c.allocate(JobId(2), VcId(0), &[GpuId(8), GpuId(9)]).unwrap();
        let mut out = Vec::new();
        // 4 GPUs: node 1's 3 (GPUs 5-7), then node 2's lowest free (10).
        assert!(spread_place(&c, &Request::new(VcId(0), 4), &mut out));
        assert_eq!(out, vec![GpuId(5), GpuId(6), GpuId(7), GpuId(10)]);
        out.clear();
        // 7 GPUs > 6 free: refused.
        assert!(!spread_place(&c, &Request::new(VcId(0), 7), &mut out));
        assert!(out.is_empty());
    }
}
