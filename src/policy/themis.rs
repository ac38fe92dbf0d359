//! Themis: finish-time fairness with lease-based rounds and a
//! placement-aware auction, per VC partition (Mahajan et al., "Themis: Fair
//! and Efficient GPU Cluster Scheduling", NSDI'20).
//!
//! # Finish-time fairness
//!
//! The paper's metric (§3.2) is ρ = T_sh / T_id: the finish time a job gets
//! in the shared cluster over the one it would get alone. Here, for a job of
//! trace duration D (ms of work at rate 1) submitted at s:
//!
//! - **T_id** (our reading: the paper's T_id is the running time on an
//!   independent 1/N share of the cluster; we take a dedicated, consolidated
//!   allocation of the job's own GPU count) = D / r_id, where r_id is the
//!   rate model's rate on the *consolidated* allocation of its GPUs on an
//!   empty partition: for every GPU type of its partition it may use, the
//!   fewest nodes of that type (one node, the smallest with room, when the job
//!   fits one), the best of the types. Under trace speed r_id = 1, T_id = D.
//! - **T_sh** at time t = (t − s) + R / r: time elapsed since submission plus
//!   the remaining work R (ms at rate 1; a suspended job's includes the
//!   checkpoint overhead it was charged) at its current rate r when it runs,
//!   and (our reading) at r_id when it waits: a waiting job's ρ is the one it
//!   would have if it started now on its ideal allocation, finite and growing
//!   with its wait (the paper's zero-allocation ρ would be ∞ for every
//!   waiting job, and rank them all equal).
//! - A finished job's ρ = (end − s) / T_id; the run's mean and maximum are
//!   the policy metrics `themis_rho_mean` and `themis_rho_max`.
//!
//! # Rounds and leases
//!
//! Leases (§4.2, §5) are aligned to one round clock: rounds at every multiple
//! of [`ThemisOptions::lease_s`] from time 0 ([`Decision::WakeAt`]), and every
//! lease ends at the next round (a job started between rounds holds a shorter
//! first lease). Simplification: at a round **all** leases of a partition end
//! at once (the paper's leases end job by job). So at a round, in every
//! partition with a waiting job, all its GPUs are offered, and its running
//! and waiting jobs bid; a running job that wins no GPUs is preempted (the
//! run's `--checkpoint` cost); one that wins its own GPUs back renews its
//! lease in place. A partition with no waiting job renews every lease (no
//! auction: nothing would be taken from anyone). Between rounds, GPUs freed
//! by completions (and free GPUs when a job arrives) are offered at once to
//! the waiting jobs, without preemption (work conservation; our reading of
//! the paper's offers of freed resources).
//!
//! # The auction (simplified)
//!
//! Every offer runs the same steps on the offered GPUs of one partition:
//!
//! 1. **Fairness filter** (the ARBITER's fairness knob f, §3.3.2, kept as in
//!    the paper): the bidders are ranked by their current ρ, worst first
//!    (ties by submission order); the first ⌈(1 − f)·n⌉ of the n bidders (at
//!    least one) take part in the auction.
//! 2. **Bids** (the AGENT's placement-sensitive bid, §4.3): each participant
//!    values each candidate GPU set G by the ρ it would reach there,
//!    ρ(G) = ((t − s) + R / r(G)) / T_id, with r(G) the run's rate model on G
//!    (`--rate-model table` makes consolidated and spread placements
//!    differ). Candidates: its own GPUs (a running job, if still offered),
//!    the consolidated placement on the offered GPUs (fewest nodes, best
//!    fit, as [`super::placement::Consolidate`]) and, on a partition with
//!    several GPU types, the consolidated placement on each type; the bid is
//!    the candidate of least ρ (ties: its own GPUs, then the untyped one).
//!    A running job already at its ideal rate r_id (always, at trace speed)
//!    bids its own GPUs without a search (our shortcut: a consolidated
//!    placement does not beat it). Checkpoint costs are not part of a bid.
//!    (The builtin profile model gives a job's speed relative to its trace
//!    speed on the same GPU type, so there the candidates differ by split
//!    only; on some GPU types the measurements favour spreading, and a
//!    job's final ρ can then fall below 1.)
//! 3. **Winner selection** — simplified. The paper computes the Partial
//!    Allocation mechanism (§3.3.1): the allocation maximising the product
//!    of the participants' 1/ρ (proportional fairness), then hidden payments
//!    (each winner keeps a fraction c_i of its share, so that bidding
//!    truthfully pays), then a leftover allocation of the withheld GPUs. We
//!    keep its objective and drop its mechanism: the participants are served
//!    greedily by their bid's gain in log ρ per GPU,
//!    ln(ρ_lose / ρ(G)) / |G|, where ρ_lose is the ρ the job would have if it
//!    waited until the next round and then ran at r_id (a greedy, value-
//!    density approximation of max Σ ln(1/ρ) under the GPU budget, since
//!    gang-scheduled jobs make the exact problem a knapsack); each takes its
//!    best bid still available at its turn, whole (no hidden payments: c_i =
//!    1, as in a simulator every agent bids truthfully by construction).
//! 4. **Leftover** (the paper's work-conserving allocation of what the
//!    auction leaves): the other bidders, worst ρ first, each keep their own
//!    GPUs if still offered, else take the consolidated placement on what is
//!    left, if any.
//!
//! With f = 0 everyone takes part (the most efficient allocation the greedy
//! finds); as f → 1 only the worst-off job is served first and the rest go
//! in ρ order (fairness first), the paper's trade-off.
//!
//! # Options and defaults
//!
//! - `lease-s` = 600 s (10-minute leases) and `fairness-knob` f = 0.8: the
//!   evaluation defaults of the paper as we read it (§6; its sensitivity
//!   study varies both).
//!
//! Jobs are exclusive (no GPU sharing); the engine checks every decision.
//!
//! # Cost
//!
//! A round costs one auction per partition with a waiting job: the bidders
//! sorted twice (by ρ, by gain), one bid search per participant and per
//! served job (a few consolidated placements on the offered nodes, rates
//! cached per job, GPU type and split).
//!
//! After a round that decided nothing (no preemption, no launch), the next
//! timer is at the first boundary whose round may decide something
//! (`Themis::next_change`), not at every boundary: until an arrival or a
//! completion the offer and every bid's candidates stay the same, so the
//! round repeats as long as the bidders are served in the same order. A
//! running job's ρ is constant (elapsed time grows as remaining time
//! shrinks), a waiting job's grows linearly (slope 1/T_id), and each gain
//! ln(ρ_lose/ρ(G))/|G| is monotone in time; the span over which every
//! neighbour pair of both orders (by ρ; by gain, then ρ) provably keeps
//! apart (margins far above rounding), or is the same function of time, is
//! found by doubling and bisection over whole leases, O(n log) per skip.
//! Running jobs at their ideal rate bid their own GPUs wherever they are
//! served, so their order among themselves is not needed; a round whose
//! bid rested on a rounding tie between candidates falls back to the next
//! boundary. An event before the timer asks for the next boundary again,
//! and a round due at a skipped boundary where an event happens runs there
//! (the round timer is kept as running every round would keep it). The
//! schedule is the one of every round run ([`Themis::with_round_skipping`]).
//! A schedule that really swaps jobs every few leases (the auction's
//! time-slicing of an over-subscribed partition) costs one round per swap.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::queue::request;
use super::{Decision, Policy, View};
use crate::cluster::Cluster;
use crate::cluster::request::Request;
use crate::error::RunError;
use crate::ids::{GpuId, JobId, VcId};
use crate::job::{JobSpec, JobState, JobTable};
use crate::profile::RateModel;
use crate::time::SimTime;

/// Themis's options. In a file (TOML/JSON) the names are kebab-case
/// (`fairness-knob`); the snake_case spelling is accepted too.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ThemisOptions {
    /// Lease length and round period, s (> 0, whole ms). Default 600 s, the
    /// paper's 10-minute lease as we read its §6.
    #[serde(alias = "lease_s", alias = "lease")]
    pub lease_s: f64,
    /// The fairness knob f in [0, 1]: the worst ⌈(1 − f)·n⌉ of n bidders
    /// take part in each auction. Default 0.8 (the paper's §6 as we read it).
    #[serde(alias = "fairness_knob")]
    pub fairness_knob: f64,
}

impl Default for ThemisOptions {
    fn default() -> Self {
        ThemisOptions { lease_s: 600.0, fairness_knob: 0.8 }
    }
}

impl ThemisOptions {
    /// The lease in whole ms.
    pub fn lease_ms(&self) -> u64 {
        (self.lease_s * 1000.0).round() as u64
    }
}

impl BuildPolicy for ThemisOptions {
    fn preemption_period_ms(&self, _kind: &str) -> Option<u64> {
        Some(self.lease_ms())
    }

    fn validate(&self, _kind: &str) -> Result<(), String> {
        if !self.lease_s.is_finite() || self.lease_s <= 0.0 || self.lease_ms() == 0 || self.lease_s > 1e12 {
            return Err(format!(
                "themis: lease-s must be a positive number of seconds (>= 0.001), got {}",
                self.lease_s
            ));
        }
        if !(0.0..=1.0).contains(&self.fairness_knob) {
            return Err(format!("themis: fairness-knob must be in [0, 1], got {}", self.fairness_knob));
        }
        Ok(())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        Ok(Box::new(Themis::new(*self, ctx.cluster.partitions().len(), (ctx.rate_model)())))
    }
}

#[derive(Default)]
struct VcJobs {
    /// Active jobs (waiting or running), by id.
    jobs: BTreeSet<JobId>,
    /// Those waiting (pending or suspended).
    waiting: BTreeSet<JobId>,
}

/// One bidder of an offer.
struct Bidder {
    job: JobId,
    rho: f64,
    /// Gain per GPU of its best bid on the whole offer (participants' order).
    gain: f64,
    /// The rate of that bid (`None`: no bid).
    bid_rate: Option<f64>,
}

/// What a round that decided nothing read in one partition, for
/// [`Themis::next_change`].
struct RoundRec {
    /// Every bidder, by current ρ, worst first (ties: id).
    ranked: Vec<JobId>,
    /// The participants in the order they were served, with their bid's rate.
    parts: Vec<(JobId, Option<f64>)>,
}

/// A bidder's ρ and gain at one instant, and what they are functions of.
struct Line {
    rho: f64,
    gain: Option<f64>,
    /// Equal for two jobs exactly when their ρ are equal at every instant.
    rho_sig: (u8, u64, u64, u64, u64, u64, u64),
    /// Equal (with `rho_sig`) exactly when their gains are equal at every instant.
    gain_sig: (u64, u64, u32),
    /// A running job at least at its ideal rate: it bids its own GPUs
    /// wherever it is served, so its order among such jobs is moot.
    fixed: bool,
}

/// The offered GPUs of one partition: only the nodes with some, so that a
/// pass costs the offered nodes, not the partition's.
#[derive(Default)]
struct Offer {
    /// (position of the node in the partition, its GPUs, its offered GPUs ascending).
    nodes: Vec<(u32, u32, Vec<GpuId>)>,
    /// Entry in `nodes` of each partition position (`u32::MAX`: none).
    slot: Vec<u32>,
    /// Total offered.
    total: u32,
    /// Emptied buffers, reused.
    spare: Vec<Vec<GpuId>>,
}

impl Offer {
    fn clear(&mut self, positions: usize) {
        for (p, _, mut v) in self.nodes.drain(..) {
            self.slot[p as usize] = u32::MAX;
            v.clear();
            self.spare.push(v);
        }
        if self.slot.len() < positions {
            self.slot.resize(positions, u32::MAX);
        }
        self.total = 0;
    }

    /// The offered GPUs of the node at `pos` (created empty).
    fn node(&mut self, pos: u32, size: u32) -> &mut Vec<GpuId> {
        if self.slot[pos as usize] == u32::MAX {
            self.slot[pos as usize] = self.nodes.len() as u32;
            self.nodes.push((pos, size, self.spare.pop().unwrap_or_default()));
        }
        &mut self.nodes[self.slot[pos as usize] as usize].2
    }

    fn on(&self, pos: u32) -> &[GpuId] {
        match self.slot.get(pos as usize) {
            Some(&e) if e != u32::MAX => &self.nodes[e as usize].2,
            _ => &[],
        }
    }

    fn take(&mut self, cluster: &Cluster, pos: &[u32], gpus: &[GpuId]) {
        for &g in gpus {
            let e = self.slot[pos[cluster.node_of(g).index()] as usize];
            let v = &mut self.nodes[e as usize].2;
            if let Some(i) = v.iter().position(|&x| x == g) {
                v.remove(i);
                self.total -= 1;
            }
        }
    }

    fn holds(&self, cluster: &Cluster, pos: &[u32], gpus: &[GpuId]) -> bool {
        gpus.iter().all(|&g| self.on(pos[cluster.node_of(g).index()]).contains(&g))
    }
}

/// What a partition's passes read about its nodes (computed on first use).
struct VcInfo {
    /// Its GPU types, sorted.
    types: Vec<String>,
    /// Every node has the same GPU count.
    uniform: bool,
}

/// Ideal GPU sets by (partition, GPUs, memory need, allowed types).
type IdealSets = std::collections::BTreeMap<(u16, u32, u64, Vec<String>), std::sync::Arc<Vec<Vec<GpuId>>>>;

/// The largest eligible node by (partition, memory need, GPU type).
type MaxNode = std::collections::BTreeMap<(u16, u64, Option<String>), u32>;

/// Per job: (GPU type, split, rate) computed so far.
type RateCache = Vec<Vec<(String, Vec<u32>, f64)>>;

/// Themis; see the module docs.
pub struct Themis {
    opts: ThemisOptions,
    lease_ms: u64,
    rates: Box<dyn RateModel>,
    trace_speed: bool,
    vcs: Vec<VcJobs>,
    /// Per job: rate on its ideal (consolidated) allocation; 0 = not computed.
    r_id: Vec<f64>,
    /// Partitions to offer free GPUs to their waiting jobs.
    dirty: BTreeSet<u16>,
    /// Partitions due a round (all leases end).
    round: BTreeSet<u16>,
    /// The round timer that running every round would have pending: a
    /// round runs at an instant where it is due (caught up over skipped
    /// boundaries, see [`Themis::decide`]).
    next_round: Option<SimTime>,
    /// The timer asked for, not yet delivered.
    timer_at: Option<SimTime>,
    /// Skip the boundaries whose round provably decides nothing (default;
    /// see [`Themis::with_round_skipping`]).
    skip_rounds: bool,
    /// The instant whose round has decided nothing so far.
    quiet_round: Option<SimTime>,
    /// What that round read, per partition with an auction.
    records: Vec<RoundRec>,
    /// A bid of that round was chosen among candidates whose ρ tie only by
    /// rounding (its choice could change with time).
    fragile: std::cell::Cell<bool>,
    plan: VecDeque<Decision>,
    /// Partition node positions by node index.
    pos: Vec<u32>,
    /// The offer being planned (buffers reused).
    offer: Offer,
    /// The largest eligible node by (partition, memory need, GPU type).
    max_node: std::cell::RefCell<MaxNode>,
    /// Ideal GPU sets by (partition, GPUs, memory need, allowed types).
    ideal_sets: std::cell::RefCell<IdealSets>,
    /// Per job: (GPU type, split, rate) computed so far.
    rate_cache: std::cell::RefCell<RateCache>,
    /// Per partition, computed on first use.
    info: Vec<Option<std::sync::Arc<VcInfo>>>,
}

impl Themis {
    /// Themis with `opts` for `partitions` partitions, predicting speeds
    /// with `rates` (a copy of the run's rate model).
    pub fn new(opts: ThemisOptions, partitions: usize, rates: Box<dyn RateModel>) -> Self {
        let trace_speed = rates.name() == "trace-speed";
        Themis {
            opts,
            lease_ms: opts.lease_ms().max(1),
            rates,
            trace_speed,
            vcs: (0..partitions.max(1)).map(|_| VcJobs::default()).collect(),
            r_id: Vec::new(),
            dirty: BTreeSet::new(),
            round: BTreeSet::new(),
            next_round: None,
            timer_at: None,
            skip_rounds: true,
            quiet_round: None,
            records: Vec::new(),
            fragile: std::cell::Cell::new(false),
            plan: VecDeque::new(),
            pos: Vec::new(),
            offer: Offer::default(),
            rate_cache: Default::default(),
            max_node: Default::default(),
            ideal_sets: Default::default(),
            info: Vec::new(),
        }
    }

    /// With `on = false`, a timer at every boundary while a job waits, as
    /// before round skipping; the schedule is the same either way (only
    /// rounds that provably decide nothing are skipped), so this is for
    /// tests that compare the two.
    pub fn with_round_skipping(mut self, on: bool) -> Self {
        self.skip_rounds = on;
        self
    }

    /// After a round at `now` that decided nothing: the first boundary whose
    /// round may decide something if no job arrives or completes before it
    /// (`None`: none ever); see the module docs' cost section.
    ///
    /// Until an event the offer (free GPUs and the running jobs' GPUs), the
    /// bidders and every bid's candidates stay as they are, so a round
    /// decides the same as long as the bidders are served in the same
    /// order: the order by ρ (which fixes the participants and the order of
    /// the rest) and the participants' order by (gain, ρ). A running job's
    /// ρ is constant (its elapsed time grows as its remaining time shrinks)
    /// and a waiting one's grows linearly; each gain is the log of a ratio
    /// of two linear functions of time, so monotone. Over [now, now + D]
    /// each key therefore lies between its values at the two ends, and the
    /// order cannot change if every pair of neighbours keeps apart there (by
    /// a margin far above rounding: relative 1e-9, and 1e-13 for gains), or
    /// is the same function of time (same inputs: a tie broken by id). The
    /// largest D = m leases with that proof is found by doubling and
    /// bisection (the proof for D holds for any shorter span). Running jobs
    /// must keep work to do over the span (their ρ is linear only until
    /// then), and a round whose bid choice rested on a rounding tie between
    /// candidates ([`Themis::fragile`]) proves nothing.
    fn next_change(&self, view: &View<'_>) -> Option<SimTime> {
        let now = view.now;
        let next = self.next_boundary(now);
        if self.fragile.get() {
            return Some(next);
        }
        if self.records.is_empty() {
            return None;
        }
        let to_next = next.since(now) as f64;
        let Some(ends) = self.records.iter().map(|r| self.lines(view, r, now, to_next)).collect::<Option<Vec<_>>>()
        else {
            return Some(next);
        };
        let l = self.lease_ms;
        let holds = |m: u64| -> bool {
            let at = SimTime::from_ms(now.as_ms() + m * l);
            self.records.iter().zip(&ends).all(|(r, e0)| {
                let Some(e1) = self.lines(view, r, at, to_next) else { return false };
                Self::same_order(r, e0, &e1)
            })
        };
        // m leases with now + m·L below 2^53 ms.
        let cap = (1u64 << 53).saturating_sub(now.as_ms()) / l;
        if cap < 2 || !holds(1) {
            return Some(next);
        }
        let (mut lo, mut hi) = (1u64, 2u64);
        while hi <= cap && holds(hi) {
            lo = hi;
            hi = hi.saturating_mul(2);
        }
        if hi > cap {
            if holds(cap) {
                return None;
            }
            hi = cap;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if holds(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(SimTime::from_ms(now.as_ms() + (lo + 1) * l))
    }

    /// The keys of a recorded round's bidders as a round at `at` would
    /// compute them, in the order of `rec.ranked` then `rec.parts`; `None`
    /// when a running job has (almost) no work left at `at` or a key is not
    /// finite.
    fn lines(&self, view: &View<'_>, rec: &RoundRec, at: SimTime, to_next: f64) -> Option<Vec<Line>> {
        let line = |job: JobId, bid_rate: Option<f64>| -> Option<Line> {
            let spec = view.jobs.spec(job);
            let r_id = self.r_id_of(job);
            let t_id = self.t_id(spec);
            let mut fixed = false;
            let (rem, rate, rho_sig) = match view.jobs.state(job) {
                JobState::Running(r) => {
                    fixed = r.rate >= r_id;
                    let rem = (r.remaining - r.rate * at.since(r.settled_at) as f64).max(0.0);
                    if rem / r.rate <= 2.0 {
                        return None;
                    }
                    let sig = (1, spec.submit.as_ms(), r.remaining.to_bits(), r.rate.to_bits(), r.settled_at.as_ms());
                    (rem, r.rate, sig)
                }
                JobState::Suspended(s) => (s.remaining, r_id, (0, spec.submit.as_ms(), s.remaining.to_bits(), 0, 0)),
                _ => {
                    let d = spec.duration_ms as f64;
                    (d, r_id, (0, spec.submit.as_ms(), d.to_bits(), 0, 0))
                }
            };
            let rho_sig = (rho_sig.0, rho_sig.1, rho_sig.2, rho_sig.3, rho_sig.4, t_id.to_bits(), r_id.to_bits());
            let elapsed = at.since(spec.submit) as f64;
            let rho_at = |rate: f64, extra: f64| (elapsed + extra + rem / rate) / t_id;
            let rho = rho_at(rate, 0.0);
            let gain = bid_rate.map(|b| (rho_at(r_id, to_next) / rho_at(b, 0.0)).ln() / f64::from(spec.gpus.max(1)));
            let finite = rho.is_finite() && gain.is_none_or(f64::is_finite);
            let gain_sig = (r_id.to_bits(), bid_rate.map_or(0, f64::to_bits), spec.gpus);
            finite.then_some(Line { rho, gain, rho_sig, gain_sig, fixed })
        };
        rec.ranked.iter().map(|&j| line(j, None)).chain(rec.parts.iter().map(|&(j, b)| line(j, b))).collect()
    }

    /// Whether the recorded orders hold between the instants of `e0` and
    /// `e1` (see [`Themis::next_change`]): every neighbour pair keeps apart
    /// or is the same function of time; a run of neighbouring fixed jobs
    /// (see [`Line::fixed`]; in the ranking, on one side of the
    /// participants' cut) is one block, whose members may swap.
    fn same_order(rec: &RoundRec, e0: &[Line], e1: &[Line]) -> bool {
        let apart = |hi: f64, lo: f64, abs: f64| hi - lo > 1e-9 * hi.abs().max(lo.abs()) + abs;
        let rho_lo = |a: usize| e0[a].rho.min(e1[a].rho);
        let rho_hi = |a: usize| e0[a].rho.max(e1[a].rho);
        let rho_before = |a: usize, b: usize| e0[a].rho_sig == e0[b].rho_sig || apart(rho_lo(a), rho_hi(b), 0.0);
        let gain_lo = |a: usize| e0[a].gain.zip(e1[a].gain).map(|(x, y)| x.min(y));
        let gain_hi = |a: usize| e0[a].gain.zip(e1[a].gain).map(|(x, y)| x.max(y));
        // Blocks of a sequence of line indices, from `start` to `end`.
        let blocks = |start: usize, end: usize, cut: usize| {
            let mut out: Vec<std::ops::Range<usize>> = Vec::new();
            for i in start..end {
                match out.last_mut() {
                    Some(b) if e0[i - 1].fixed && e0[i].fixed && i != cut => b.end = i + 1,
                    _ => out.push(i..i + 1),
                }
            }
            out
        };
        let n = rec.ranked.len();
        let ranking = blocks(0, n, rec.parts.len());
        let ranked_ok = ranking.windows(2).all(|w| {
            let (a, b) = (&w[0], &w[1]);
            if a.len() == 1 && b.len() == 1 {
                return rho_before(a.start, b.start);
            }
            let lo = a.clone().map(rho_lo).fold(f64::INFINITY, f64::min);
            let hi = b.clone().map(rho_hi).fold(f64::NEG_INFINITY, f64::max);
            apart(lo, hi, 0.0)
        });
        if !ranked_ok {
            return false;
        }
        let served = blocks(n, n + rec.parts.len(), usize::MAX);
        served.windows(2).all(|w| {
            let (a, b) = (&w[0], &w[1]);
            if a.len() == 1 && b.len() == 1 {
                let (a, b) = (a.start, b.start);
                return match (e0[a].gain, e0[b].gain) {
                    (None, None) => rho_before(a, b),
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (Some(_), Some(_)) if e0[a].rho_sig == e0[b].rho_sig && e0[a].gain_sig == e0[b].gain_sig => {
                        rho_before(a, b)
                    }
                    (Some(_), Some(_)) => match (gain_lo(a), gain_hi(b)) {
                        (Some(lo), Some(hi)) => apart(lo, hi, 1e-13),
                        _ => false,
                    },
                };
            }
            // A block's jobs all bid (their own GPUs).
            if e0[b.end - 1].gain.is_none() && b.len() == 1 {
                return true;
            }
            let lo = a.clone().map(gain_lo).try_fold(f64::INFINITY, |m, g| g.map(|g| m.min(g)));
            let hi = b.clone().map(gain_hi).try_fold(f64::NEG_INFINITY, |m, g| g.map(|g| m.max(g)));
            lo.zip(hi).is_some_and(|(lo, hi)| apart(lo, hi, 1e-13))
        })
    }

    /// What the passes read about partition `vc`; the first call also
    /// records every node's position in its partition.
    fn info_of(&mut self, vc: VcId, cluster: &Cluster) -> std::sync::Arc<VcInfo> {
        if self.pos.len() < cluster.num_nodes() {
            self.pos.resize(cluster.num_nodes(), 0);
            for p in cluster.partitions() {
                for (i, &n) in p.nodes.iter().enumerate() {
                    self.pos[n.index()] = i as u32;
                }
            }
        }
        if self.info.len() <= vc.index() {
            self.info.resize(vc.index() + 1, None);
        }
        self.info[vc.index()]
            .get_or_insert_with(|| {
                let p = cluster.partition(vc);
                let mut types: Vec<String> = p.nodes.iter().map(|&n| cluster.node(n).gpu_type.clone()).collect();
                types.sort_unstable();
                types.dedup();
                let uniform = p.nodes.windows(2).all(|w| cluster.node(w[0]).gpus == cluster.node(w[1]).gpus);
                std::sync::Arc::new(VcInfo { types, uniform })
            })
            .clone()
    }

    fn rate_on(&self, spec: &JobSpec, gpus: &[GpuId], cluster: &Cluster) -> f64 {
        if self.trace_speed || gpus.is_empty() {
            return 1.0;
        }
        // The profile models' rate depends on the job, the GPU type of its
        // first GPU and the split over servers only: cached per job on those
        // (a rate model that reads the neighbours is asked every time).
        let cacheable = !self.rates.depends_on_neighbours();
        let ty = &cluster.node(cluster.node_of(gpus[0])).gpu_type;
        let split = cluster.split_of(gpus);
        if cacheable
            && let Some(c) = self.rate_cache.borrow().get(spec.id.index())
            && let Some(&(_, _, r)) = c.iter().find(|(t, s, _)| t == ty && *s == split)
        {
            return r;
        }
        let r = self.rates.rate(spec, gpus, cluster);
        let r = if r.is_finite() && r > 0.0 { r } else { 1.0 };
        if cacheable {
            let mut cache = self.rate_cache.borrow_mut();
            if cache.len() <= spec.id.index() {
                cache.resize_with(spec.id.index() + 1, Vec::new);
            }
            cache[spec.id.index()].push((ty.clone(), split, r));
        }
        r
    }

    /// The rate on the job's ideal allocation (see the module docs).
    fn ideal_rate(&self, job: JobId, view: &View<'_>) -> f64 {
        if self.trace_speed {
            return 1.0;
        }
        let spec = view.jobs.spec(job);
        let req = request(view, job);
        let cluster = view.cluster;
        // The ideal GPU sets depend on the partition and the request only:
        // computed once per (partition, GPUs, memory need, allowed types).
        let key = (spec.vc.0, spec.gpus, req.min_gpu_mem_mib, req.gpu_types.to_vec());
        let cached = self.ideal_sets.borrow().get(&key).cloned();
        let sets = match cached {
            Some(s) => s,
            None => {
                let s = std::sync::Arc::new(Self::ideal_sets(cluster, &req));
                self.ideal_sets.borrow_mut().insert(key, s.clone());
                s
            }
        };
        let mut best: Option<f64> = None;
        for gpus in sets.iter() {
            let r = self.rate_on(spec, gpus, cluster);
            best = Some(best.map_or(r, |b: f64| b.max(r)));
        }
        best.unwrap_or(1.0)
    }

    /// For every GPU type of the request's partition it may use, the
    /// consolidated allocation on the empty partition: one node, the
    /// smallest with room, when the job fits one; else the largest nodes of
    /// that type first.
    fn ideal_sets(cluster: &Cluster, req: &Request<'_>) -> Vec<Vec<GpuId>> {
        let p = cluster.partition(req.vc);
        let mut types: Vec<&str> = p
            .nodes
            .iter()
            .filter(|&&n| req.fits_node(cluster, n))
            .map(|&n| cluster.node(n).gpu_type.as_str())
            .collect();
        types.sort_unstable();
        types.dedup();
        let mut sets = Vec::new();
        for t in types {
            // Nodes of this type, largest first (ties: partition order).
            let mut nodes: Vec<_> = p
                .nodes
                .iter()
                .copied()
                .filter(|&n| req.fits_node(cluster, n) && cluster.node(n).gpu_type == t)
                .collect();
            nodes.sort_by_key(|&n| std::cmp::Reverse(cluster.node(n).gpus));
            let g = req.gpus;
            let mut gpus: Vec<GpuId> = Vec::new();
            if let Some(&n) =
                nodes.iter().filter(|&&n| cluster.node(n).gpus >= g).min_by_key(|&&n| cluster.node(n).gpus)
            {
                gpus.extend(cluster.node_gpus(n).take(g as usize));
            } else {
                for &n in &nodes {
                    let left = g as usize - gpus.len();
                    gpus.extend(cluster.node_gpus(n).take(left));
                    if gpus.len() == g as usize {
                        break;
                    }
                }
            }
            if gpus.len() == g as usize && g > 0 {
                sets.push(gpus);
            }
        }
        sets
    }
    fn r_id_of(&self, job: JobId) -> f64 {
        self.r_id.get(job.index()).copied().filter(|&r| r > 0.0).unwrap_or(1.0)
    }

    /// T_id, ms (at least 1).
    fn t_id(&self, spec: &JobSpec) -> f64 {
        (spec.duration_ms as f64 / self.r_id_of(spec.id)).max(1.0)
    }

    /// (remaining work now, ms at rate 1; current rate if running).
    fn progress(view: &View<'_>, job: JobId) -> (f64, Option<f64>) {
        match view.jobs.state(job) {
            JobState::Running(r) => {
                let done = r.rate * view.now.since(r.settled_at) as f64;
                ((r.remaining - done).max(0.0), Some(r.rate))
            }
            JobState::Suspended(s) => (s.remaining, None),
            _ => (view.jobs.spec(job).duration_ms as f64, None),
        }
    }

    /// ρ with remaining work `rem` at rate `rate`, `extra_ms` from now.
    fn rho(&self, view: &View<'_>, spec: &JobSpec, rem: f64, rate: f64, extra_ms: f64) -> f64 {
        let elapsed = view.now.since(spec.submit) as f64;
        (elapsed + extra_ms + rem / rate) / self.t_id(spec)
    }

    /// The job's current ρ (see the module docs).
    pub fn current_rho(&self, view: &View<'_>, job: JobId) -> f64 {
        let spec = view.jobs.spec(job);
        let (rem, rate) = Self::progress(view, job);
        self.rho(view, spec, rem, rate.unwrap_or_else(|| self.r_id_of(job)), 0.0)
    }

    /// The consolidated placement of `req` on the offer (nodes filtered by
    /// `ty` too), as [`super::placement::Consolidate`] does on free GPUs: one
    /// node, the fewest offered GPUs with room, when the job fits the largest
    /// eligible node; else whole offered nodes, most offered first, and the
    /// remainder on the next.
    fn consolidate(
        &self,
        offer: &Offer,
        cluster: &Cluster,
        nodes: &[crate::ids::NodeId],
        req: &Request<'_>,
        ty: Option<&str>,
    ) -> Option<Vec<GpuId>> {
        let g = req.gpus;
        if g == 0 || g > offer.total {
            return None;
        }
        let plain = ty.is_none() && req.min_gpu_mem_mib == 0 && req.gpu_types.is_empty();
        let ok = |n: crate::ids::NodeId| {
            plain || (req.fits_node(cluster, n) && ty.is_none_or(|t| cluster.node(n).gpu_type == t))
        };
        let max_node = if plain {
            cluster.partition(req.vc).max_node_gpus
        } else if req.gpu_types.is_empty() {
            // By (partition, memory need, type): read once per key.
            let key = (req.vc.0, req.min_gpu_mem_mib, ty.map(str::to_string));
            if let Some(&m) = self.max_node.borrow().get(&key) {
                m
            } else {
                let m = nodes.iter().filter(|&&n| ok(n)).map(|&n| cluster.node(n).gpus).max().unwrap_or(0);
                self.max_node.borrow_mut().insert(key, m);
                m
            }
        } else {
            nodes.iter().filter(|&&n| ok(n)).map(|&n| cluster.node(n).gpus).max().unwrap_or(0)
        };
        let eligible = offer.nodes.iter().filter(|(p, _, v)| !v.is_empty() && ok(nodes[*p as usize]));
        if g <= max_node {
            let (_, _, v) = eligible.filter(|(_, _, v)| v.len() as u32 >= g).min_by_key(|(p, _, v)| (v.len(), *p))?;
            return Some(v[..g as usize].to_vec());
        }
        let mut order: Vec<&(u32, u32, Vec<GpuId>)> = eligible.collect();
        order.sort_by_key(|(p, _, v)| (std::cmp::Reverse(v.len()), *p));
        let mut out = Vec::with_capacity(g as usize);
        let mut left = g;
        for (_, size, v) in order {
            let f = v.len() as u32;
            if f == *size && left > f {
                out.extend_from_slice(v);
                left -= f;
                continue;
            }
            if f >= left {
                out.extend_from_slice(&v[..left as usize]);
                out.sort_unstable();
                return Some(out);
            }
            break;
        }
        None
    }

    /// The job's best bid on the offer: (GPUs, ρ there, rate there), or
    /// none. Marks the round fragile (see [`Themis::fragile`]) when a
    /// candidate of a higher rate lost to it (their ρ tie by rounding).
    fn best_bid(
        &self,
        view: &View<'_>,
        job: JobId,
        offer: &Offer,
        types: &[String],
        keep_first: bool,
    ) -> Option<(Vec<GpuId>, f64, f64)> {
        let spec = view.jobs.spec(job);
        let req = request(view, job);
        let cluster = view.cluster;
        let nodes = &cluster.partition(spec.vc).nodes;
        let (rem, _) = Self::progress(view, job);
        let mut cands: Vec<Vec<GpuId>> = Vec::new();
        if let JobState::Running(r) = view.jobs.state(job)
            && offer.holds(cluster, &self.pos, &r.gpus)
        {
            // Already at its ideal rate (always, at trace speed): no
            // consolidated placement does better, its own GPUs are the bid.
            if r.rate >= self.r_id_of(job) {
                return Some((r.gpus.clone(), self.rho(view, spec, rem, r.rate, 0.0), r.rate));
            }
            cands.push(r.gpus.clone());
        }
        if !keep_first || cands.is_empty() {
            cands.extend(self.consolidate(offer, cluster, nodes, &req, None));
            if !keep_first && !self.trace_speed && types.len() > 1 {
                for t in types {
                    cands.extend(self.consolidate(offer, cluster, nodes, &req, Some(t)));
                }
            }
        }
        let mut best: Option<(Vec<GpuId>, f64, f64)> = None;
        let mut top = 0.0f64;
        for c in cands {
            let rate = match view.jobs.state(job) {
                JobState::Running(r) if r.gpus == c => r.rate,
                _ => self.rate_on(spec, &c, cluster),
            };
            top = top.max(rate);
            let rho = self.rho(view, spec, rem, rate, 0.0);
            if best.as_ref().is_none_or(|b| rho < b.1) {
                best = Some((c, rho, rate));
            }
        }
        if let Some(b) = &best
            && rem > 0.0
            && top > b.2
        {
            self.fragile.set(true);
        }
        best
    }

    /// Plans one offer in partition `vc`: a round (all leases end) or an
    /// offer of the free GPUs to the waiting jobs.
    fn plan_vc(&mut self, vc: VcId, view: &View<'_>, full: bool) {
        let cluster = view.cluster;
        let p = cluster.partition(vc);
        let q = &self.vcs[vc.index()];
        if q.waiting.is_empty() || (!full && p.gpus_free == 0) {
            return;
        }
        // Between rounds only free GPUs are offered: nothing to do unless a
        // waiting job fits their count.
        if !full && !q.waiting.iter().any(|&j| view.jobs.spec(j).gpus <= p.gpus_free) {
            return;
        }
        let info = self.info_of(vc, cluster);
        let q = &self.vcs[vc.index()];
        // The offer reuses its buffers across passes: the free GPUs, by the
        // partition's index of nodes with free GPUs.
        let mut offer = std::mem::take(&mut self.offer);
        offer.clear(p.nodes.len());
        for (n, free) in p.nodes_by_free_desc() {
            let v = offer.node(self.pos[n.index()], cluster.node(n).gpus);
            cluster.take_free_gpus(n, free, v);
            offer.total += free;
        }
        // A running job whose work has run out (a release delay) keeps its GPUs.
        let bidders: Vec<JobId> = if full {
            q.jobs
                .iter()
                .copied()
                .filter(|&j| !matches!(view.jobs.state(j), JobState::Running(r) if r.work_done))
                .collect()
        } else {
            q.waiting.iter().copied().collect()
        };
        let mut running: Vec<JobId> = Vec::new();
        if full {
            for &j in &bidders {
                if let JobState::Running(r) = view.jobs.state(j) {
                    running.push(j);
                    for &g in &r.gpus {
                        let n = cluster.node_of(g);
                        offer.node(self.pos[n.index()], cluster.node(n).gpus).push(g);
                        offer.total += 1;
                    }
                }
            }
            for (_, _, v) in &mut offer.nodes {
                v.sort_unstable();
            }
        }
        if !bidders.iter().any(|&j| view.jobs.spec(j).gpus <= offer.total) {
            self.offer = offer;
            return;
        }
        let types = &info.types;
        // 1. Rank by current ρ, worst first, ties by submission order (id).
        let mut ranked: Vec<Bidder> = bidders
            .iter()
            .map(|&job| Bidder { job, rho: self.current_rho(view, job), gain: 0.0, bid_rate: None })
            .collect();
        ranked.sort_by(|a, b| b.rho.total_cmp(&a.rho).then(a.job.cmp(&b.job)));
        let all_ranked: Vec<JobId> = if full { ranked.iter().map(|b| b.job).collect() } else { Vec::new() };
        let n = ranked.len();
        let k = ((1.0 - self.opts.fairness_knob) * n as f64 - 1e-9).ceil().max(1.0) as usize;
        let k = k.min(n);
        let rest = ranked.split_off(k);
        // 2-3. Participants by gain in log ρ per GPU of their best bid.
        let to_next = (self.next_boundary(view.now).since(view.now)) as f64;
        for b in &mut ranked {
            let spec = view.jobs.spec(b.job);
            let (rem, _) = Self::progress(view, b.job);
            let lose = self.rho(view, spec, rem, self.r_id_of(b.job), to_next);
            (b.gain, b.bid_rate) = match self.best_bid(view, b.job, &offer, types, false) {
                Some((_, rho, rate)) => ((lose / rho).ln() / f64::from(spec.gpus.max(1)), Some(rate)),
                None => (f64::NEG_INFINITY, None),
            };
        }
        ranked.sort_by(|a, b| b.gain.total_cmp(&a.gain).then(b.rho.total_cmp(&a.rho)).then(a.job.cmp(&b.job)));
        if full {
            let parts = ranked.iter().map(|b| (b.job, b.bid_rate)).collect();
            self.records.push(RoundRec { ranked: all_ranked, parts });
        }
        let mut won: Vec<(JobId, Vec<GpuId>)> = Vec::new();
        // Unconstrained waiting jobs place by GPU count alone when every node
        // has the same size: one that fails means larger ones fail too.
        let uniform = info.uniform;
        let mut min_failed = u32::MAX;
        let order: Vec<(JobId, bool)> =
            ranked.iter().map(|b| (b.job, false)).chain(rest.iter().map(|b| (b.job, true))).collect();
        for (job, keep_first) in order {
            if offer.total == 0 {
                break;
            }
            let spec = view.jobs.spec(job);
            let waiting = !matches!(view.jobs.state(job), JobState::Running(_));
            let by_count = uniform && waiting && spec.gpu_mem_mib().is_none() && spec.gpu_types().is_none();
            if spec.gpus > offer.total || (by_count && spec.gpus >= min_failed) {
                continue;
            }
            match self.best_bid(view, job, &offer, types, keep_first) {
                Some((gpus, _, _)) => {
                    offer.take(cluster, &self.pos, &gpus);
                    won.push((job, gpus));
                }
                None if by_count => min_failed = min_failed.min(spec.gpus),
                None => {}
            }
        }
        self.offer = offer;
        // Decisions: preempt the running jobs that did not win their own
        // GPUs back, then launch the winners that are not already there.
        let q = &mut self.vcs[vc.index()];
        for &j in &running {
            let JobState::Running(r) = view.jobs.state(j) else { continue };
            if !won.iter().any(|(w, g)| *w == j && *g == r.gpus) {
                self.plan.push_back(Decision::Preempt { job: j });
                q.waiting.insert(j);
            }
        }
        for (j, gpus) in won {
            if let JobState::Running(r) = view.jobs.state(j)
                && r.gpus == gpus
            {
                continue;
            }
            q.waiting.remove(&j);
            self.plan.push_back(Decision::Launch { job: j, gpus });
        }
    }

    /// The first round boundary after `now`.
    fn next_boundary(&self, now: SimTime) -> SimTime {
        SimTime::from_ms((now.as_ms() / self.lease_ms + 1) * self.lease_ms)
    }
}

impl Policy for Themis {
    fn name(&self) -> String {
        "themis".into()
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        if self.r_id.len() <= job.index() {
            self.r_id.resize(job.index() + 1, 0.0);
        }
        self.r_id[job.index()] = self.ideal_rate(job, view);
        let vc = view.jobs.spec(job).vc;
        let q = &mut self.vcs[vc.index()];
        q.jobs.insert(job);
        q.waiting.insert(job);
        self.dirty.insert(vc.0);
    }

    fn on_completion(&mut self, job: JobId, view: &View<'_>) {
        let vc = view.jobs.spec(job).vc;
        let q = &mut self.vcs[vc.index()];
        q.jobs.remove(&job);
        q.waiting.remove(&job);
        self.dirty.insert(vc.0);
        if let Some(c) = self.rate_cache.get_mut().get_mut(job.index()) {
            *c = Vec::new();
        }
    }

    fn on_timer(&mut self, view: &View<'_>) {
        if self.timer_at == Some(view.now) {
            self.timer_at = None;
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        let now = view.now;
        // The round due now, if running every round would have one: its
        // timer (`next_round`) is at or before now. Before now only when
        // rounds were skipped: every boundary since then ran a round that
        // decided nothing and asked for the next one, so one is due now if
        // now is a boundary, else at the next one.
        if let Some(v) = self.next_round
            && v <= now
        {
            let due = SimTime::from_ms(now.as_ms().div_ceil(self.lease_ms).saturating_mul(self.lease_ms));
            if due == now {
                self.next_round = None;
                self.quiet_round = Some(now);
                self.records.clear();
                self.fragile.set(false);
                for (i, q) in self.vcs.iter().enumerate() {
                    if !q.waiting.is_empty() {
                        self.round.insert(i as u16);
                    }
                }
            } else {
                self.next_round = Some(due);
            }
        }
        loop {
            if let Some(d) = self.plan.pop_front() {
                self.quiet_round = None;
                return d;
            }
            if let Some(vc) = self.round.pop_first() {
                self.dirty.remove(&vc);
                self.plan_vc(VcId(vc), view, true);
                continue;
            }
            if let Some(vc) = self.dirty.pop_first() {
                self.plan_vc(VcId(vc), view, false);
                continue;
            }
            break;
        }
        let waiting = self.vcs.iter().any(|q| !q.waiting.is_empty());
        if waiting && self.next_round.is_none_or(|t| t <= now) {
            self.next_round = Some(self.next_boundary(now));
        }
        // The round timer, or, after a round that decided nothing, the first
        // boundary whose round may decide something (an arrival or a
        // completion before it asks for the round timer again; the timer
        // left behind then fires at an instant where it changes nothing).
        let at = if self.skip_rounds && waiting && self.quiet_round == Some(now) {
            self.next_change(view)
        } else {
            self.next_round
        };
        match at {
            Some(at) if at > now && self.timer_at.is_none_or(|t| t <= now || t > at) => {
                self.timer_at = Some(at);
                Decision::WakeAt(at)
            }
            _ => Decision::Wait,
        }
    }

    fn metrics(&self, jobs: &JobTable) -> Vec<(&'static str, f64)> {
        let (mut sum, mut max, mut n) = (0.0f64, 0.0f64, 0usize);
        for (spec, st) in jobs.iter() {
            if let JobState::Completed(d) = st {
                let rho = d.end.since(spec.submit) as f64 / self.t_id(spec);
                sum += rho;
                max = max.max(rho);
                n += 1;
            }
        }
        if n == 0 {
            return Vec::new();
        }
        vec![("themis_rho_max", max), ("themis_rho_mean", sum / n as f64)]
    }
}
