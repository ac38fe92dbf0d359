//! The run's recorder: an [`Observer`] of the engine that keeps what the
//! summary and the timeline need beyond the jobs' own outcomes: busy
//! GPU-milliseconds per partition, the timeline samples, the sharing figures'
//! time integrals ([`ShareIntegrals`]) and, through [`TimedPolicy`], the
//! policy's decision timing.
//!
//! Every figure is piecewise constant between two hooks (the engine calls one
//! after every change of the GPU ledger and of a job's co-location speed), so
//! each hook first integrates the current values from the last hook to now,
//! then updates them: O(GPUs of the job) per hook.

use std::sync::Arc;

use crate::cluster::Cluster;
use crate::engine::{Observer, Snapshot};
use crate::ids::{GpuId, JobId, NodeId, VcId};
use crate::job::{JobState, JobTable};
use crate::policy::Policy;
use crate::profile::db::ProfileDb;
use crate::profile::resources::SmUtil;
use crate::time::SimTime;

use super::fragmentation::FragMeter;
use super::timing::{DecisionTiming, TimedPolicy, TimingHandle};

/// One timeline sample: cluster state after the scheduling pass at `time`
/// (ms since the trace origin). Between two samples the state is either
/// constant or sampled every interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When.
    pub time: SimTime,
    /// GPUs held by running jobs.
    pub gpus_busy: u32,
    /// Jobs running.
    pub jobs_running: u32,
    /// Jobs submitted and waiting.
    pub jobs_pending: u32,
}

/// One VC's row of a timeline sample (`vc_timeline.csv`), at the instant of
/// the [`Sample`] it belongs to. A job counts in its own partition
/// ([`crate::job::JobSpec::vc`]); summed over the partitions, `jobs_running`,
/// `jobs_pending` and `gpus_busy` equal the cluster-wide sample's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VcSample {
    /// Jobs of the VC running (holding GPUs).
    pub jobs_running: u32,
    /// Jobs of the VC submitted and waiting: pending, or preempted and not
    /// yet resumed (as the cluster-wide `jobs_pending`).
    pub jobs_pending: u32,
    /// GPUs of the partition held by running jobs (a shared GPU counts once).
    pub gpus_busy: u32,
    /// GPUs requested by the VC's waiting jobs, summed
    /// ([`crate::job::JobSpec::gpus`]: a fractional-GPU job counts 1, a
    /// moldable task its nominal request).
    pub gpus_pending: u64,
}

/// Time integrals (GPU-milliseconds) of per-GPU figures, summed over GPUs;
/// the recorder keeps each GPU's current value and updates only the GPUs and
/// nodes a launch or completion touches (O(GPUs of the job) per event).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShareIntegrals {
    /// Allocated fraction: 1 for a GPU held exclusively; for a shared GPU
    /// the tenants' requests summed and capped at 1 (a guaranteed share
    /// counts milli-GPU / 1,000, a whole-GPU tenant 1).
    pub alloc_gpu_ms: f64,
    /// SM-busy estimate from the work actually done: per GPU, the sum over
    /// its holders of (achieved rate / isolated rate, the job's co-location
    /// speed) × (its SM-utilisation estimate alone,
    /// [`crate::profile::resources::SmUtil::job`]), capped at 1. A job that
    /// runs at 0.6 of its isolated speed keeps its GPU's SMs busy 0.6 as
    /// long per unit of time as it would alone.
    pub util_gpu_ms: f64,
    /// Memory held / GPU memory (an exclusive job of unknown memory holds it all).
    pub mem_gpu_ms: f64,
    /// FGD fragmentation ([`crate::cluster::fragmentation`], measured by
    /// [`super::fragmentation::FragMeter`]) summed over nodes, in GPUs.
    pub frag_gpu_ms: f64,
}

/// What a run recorded, for the summary and the run directory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recording {
    /// Timeline samples.
    pub timeline: Vec<Sample>,
    /// Per-VC rows of the timeline samples, one per partition per sample:
    /// the rows of `timeline[i]` are `vc_timeline[i * n .. (i + 1) * n]`, in
    /// partition ([`VcId`]) order, where `n` is the number of partitions
    /// (`busy_gpu_ms.len()`); see [`Recording::vc_samples`].
    pub vc_timeline: Vec<VcSample>,
    /// Per partition (by [`VcId`]): GPU-milliseconds during which a GPU was
    /// held (exclusively or by at least one tenant), from t = 0 to the last
    /// event. A shared GPU counts once, however many tenants it has.
    pub busy_gpu_ms: Vec<u64>,
    /// Simulated time of the run's last event, ms (where `busy_gpu_ms` ends;
    /// a run cut off at a horizon ends there, after its last completion).
    pub end_ms: u64,
    /// Time integrals from t = 0 to the last event, GPU-ms, of the sharing
    /// metrics; `None` when not kept ([`Recorder::new`]'s `share_metrics`).
    pub share_integrals: Option<ShareIntegrals>,
    /// Decision timing, when measured ([`Recorder::time_policy`]).
    pub timing: Option<DecisionTiming>,
}

impl Recording {
    /// Each timeline sample with its per-VC rows (partition order).
    pub fn vc_samples(&self) -> impl Iterator<Item = (&Sample, &[VcSample])> {
        let n = self.busy_gpu_ms.len().max(1);
        self.timeline.iter().zip(self.vc_timeline.chunks_exact(n))
    }
}

/// Per-VC job counts kept between samples (all per partition, by [`VcId`]).
/// Waiting jobs are derived: arrived − running − completed, and likewise their
/// requested GPUs, so the hooks only count launches, releases and
/// completions, and a sample advances a cursor over the jobs in submit order:
/// O(partitions) per sample, O(1) per hook, O(jobs) over the run.
#[derive(Default)]
struct VcCounts {
    /// Jobs of the table submitted up to the last sample (a cursor into
    /// [`JobTable::specs`], which is in submit order).
    next_arrival: usize,
    /// Jobs submitted, and their requested GPUs.
    arrived: Vec<(u32, u64)>,
    /// Jobs running, and their requested GPUs.
    running: Vec<(u32, u64)>,
    /// Jobs completed, and their requested GPUs.
    done: Vec<(u32, u64)>,
}

/// The sharing figures' state (only when kept).
struct Share {
    /// The run's profile database, for the SM-utilisation estimates.
    db: Option<Arc<ProfileDb>>,
    /// The SM-utilisation proxy over `db`, built at the first job with a
    /// model and batch (a memo of this run's own).
    sm: Option<SmUtil>,
    /// Per GPU: allocated fraction, SM-busy estimate, memory fraction.
    gpu_figs: Vec<[f64; 3]>,
    /// Current sums of the above.
    fig_sums: [f64; 3],
    frag: FragMeter,
    integrals: ShareIntegrals,
    figs_since: SimTime,
    /// Jobs' SM-utilisation estimates, by job index (set at launch).
    job_util: Vec<f64>,
    /// Jobs' co-location speeds (achieved / isolated rate), by job index.
    job_speed: Vec<f64>,
    /// Scratch: the nodes of the GPUs being refreshed.
    nodes: Vec<NodeId>,
}

/// The engine observer that produces a [`Recording`].
pub struct Recorder {
    timeline: Vec<Sample>,
    vc_timeline: Vec<VcSample>,
    vc_counts: VcCounts,
    /// Per partition: busy GPU-ms up to `busy_since`, and GPUs held since then.
    busy_gpu_ms: Vec<u64>,
    busy_since: Vec<SimTime>,
    busy_now: Vec<u64>,
    /// The run's last event, ms (set by `on_finish`).
    end_ms: u64,
    share: Option<Box<Share>>,
    timing: Option<TimingHandle>,
}

impl Recorder {
    /// A recorder of a run of `jobs` on `cluster`, normally in their state at
    /// t = 0; attached later, its per-VC job counts start from the jobs'
    /// current states (its time integrals start at 0). `share_metrics` keeps the sharing figures' time integrals
    /// (allocation, SM-busy estimate, memory, fragmentation): they cost about
    /// a tenth of a plain trace replay, where they say nothing new (no model,
    /// no memory, no sharing), so the run pipeline turns them off there. `db`
    /// is the run's profile database, read for the SM-utilisation estimate of
    /// jobs with a model and batch; without one, such a job counts its held
    /// share ([`crate::profile::resources::held_share`]).
    pub fn new(cluster: &Cluster, jobs: &JobTable, share_metrics: bool, db: Option<Arc<ProfileDb>>) -> Self {
        let parts = cluster.partitions();
        let share = share_metrics.then(|| {
            Box::new(Share {
                db,
                sm: None,
                gpu_figs: vec![[0.0; 3]; cluster.total_gpus() as usize],
                fig_sums: [0.0; 3],
                frag: FragMeter::new(cluster, jobs),
                integrals: ShareIntegrals::default(),
                figs_since: SimTime::ZERO,
                job_util: vec![1.0; jobs.len()],
                job_speed: vec![1.0; jobs.len()],
                nodes: Vec::new(),
            })
        });
        // The per-VC counts start from the jobs' states, so that a recorder
        // attached after some steps releases only what it counted.
        let zero = vec![(0, 0); parts.len()];
        let (mut running, mut done) = (zero.clone(), zero.clone());
        for (spec, state) in jobs.iter() {
            let slot = match state {
                JobState::Running(_) => &mut running[spec.vc.index()],
                JobState::Completed(_) => &mut done[spec.vc.index()],
                _ => continue,
            };
            *slot = (slot.0 + 1, slot.1 + u64::from(spec.gpus));
        }
        Recorder {
            timeline: Vec::new(),
            vc_timeline: Vec::new(),
            vc_counts: VcCounts { next_arrival: 0, arrived: zero, running, done },
            busy_gpu_ms: vec![0; parts.len()],
            busy_since: vec![SimTime::ZERO; parts.len()],
            busy_now: parts.iter().map(|p| u64::from(p.gpus_total - p.gpus_free)).collect(),
            end_ms: 0,
            share,
            timing: None,
        }
    }

    /// Wraps `policy` in a [`TimedPolicy`] whose figures go to this
    /// recording's [`Recording::timing`].
    pub fn time_policy(&mut self, policy: Box<dyn Policy>) -> Box<dyn Policy> {
        let (timed, handle) = TimedPolicy::new(policy);
        self.timing = Some(handle);
        Box::new(timed)
    }

    /// The recording (complete once the engine has called
    /// [`Observer::on_finish`]).
    pub fn into_recording(self) -> Recording {
        Recording {
            timeline: self.timeline,
            vc_timeline: self.vc_timeline,
            busy_gpu_ms: self.busy_gpu_ms,
            end_ms: self.end_ms,
            share_integrals: self.share.map(|s| s.integrals),
            timing: self.timing.map(|t| t.get()),
        }
    }

    /// Brings partition `vc`'s busy GPU-ms up to now, then reads its GPUs
    /// held from the cluster.
    fn settle_busy(&mut self, at: &Snapshot<'_>, vc: VcId) {
        let i = vc.index();
        self.busy_gpu_ms[i] += self.busy_now[i] * at.now.since(self.busy_since[i]);
        self.busy_since[i] = at.now;
        let p = at.cluster.partition(vc);
        self.busy_now[i] = u64::from(p.gpus_total - p.gpus_free);
    }
}

impl Share {
    /// Brings the integrals up to `now`.
    fn settle(&mut self, now: SimTime) {
        let dt = now.since(self.figs_since) as f64;
        let [a, u, m] = self.fig_sums;
        self.integrals.alloc_gpu_ms += a * dt;
        self.integrals.util_gpu_ms += u * dt;
        self.integrals.mem_gpu_ms += m * dt;
        self.integrals.frag_gpu_ms += self.frag.sum() * dt;
        self.figs_since = now;
    }

    /// Recomputes the figures of `gpus` and the fragmentation of their nodes.
    fn refresh(&mut self, cluster: &Cluster, jobs: &JobTable, gpus: &[GpuId]) {
        let mut nodes = std::mem::take(&mut self.nodes);
        nodes.clear();
        for &g in gpus {
            let cap = cluster.gpu_mem_mib(g).max(1) as f64;
            let new = if let Some(o) = cluster.owner(g) {
                let mem = jobs.spec(o).gpu_mem_mib().map_or(1.0, |m| (m as f64 / cap).min(1.0));
                [1.0, self.job_util[o.index()] * self.job_speed[o.index()], mem]
            } else {
                let s = cluster.share(g);
                let (mut a, mut u) = (0.0, 0.0);
                for t in &s.tenants {
                    a += match jobs.spec(*t).gpu_milli() {
                        Some(k) if k > 0 && k < 1000 => f64::from(k) / 1000.0,
                        _ => 1.0,
                    };
                    u += self.job_util[t.index()] * self.job_speed[t.index()];
                }
                [a.min(1.0), u.min(1.0), (s.mem_mib as f64 / cap).min(1.0)]
            };
            let old = std::mem::replace(&mut self.gpu_figs[g.index()], new);
            for i in 0..3 {
                self.fig_sums[i] += new[i] - old[i];
            }
            let n = cluster.node_of(g);
            if !nodes.contains(&n) {
                nodes.push(n);
            }
        }
        self.frag.refresh(cluster, &nodes);
        self.nodes = nodes;
    }
}

impl Observer for Recorder {
    fn on_allocate(&mut self, at: &Snapshot<'_>, job: JobId, gpus: &[GpuId], speed: f64) {
        let spec = at.jobs.spec(job);
        let r = &mut self.vc_counts.running[spec.vc.index()];
        *r = (r.0 + 1, r.1 + u64::from(spec.gpus));
        self.settle_busy(at, spec.vc);
        if let Some(s) = self.share.as_deref_mut() {
            s.settle(at.now);
            // The database is read only for a job with a model and batch.
            let spec = at.jobs.spec(job);
            s.job_util[job.index()] = match &s.db {
                Some(db) if spec.model().is_some() && spec.local_bsz().is_some() => {
                    let gpu_type = &at.cluster.node(at.cluster.node_of(gpus[0])).gpu_type;
                    s.sm.get_or_insert_with(|| SmUtil::new(db.clone())).job(spec, gpu_type)
                }
                _ => crate::profile::resources::held_share(spec),
            };
            s.job_speed[job.index()] = speed;
            s.refresh(at.cluster, at.jobs, gpus);
        }
    }

    fn on_speed(&mut self, at: &Snapshot<'_>, job: JobId, gpus: &[GpuId], speed: f64) {
        if let Some(s) = self.share.as_deref_mut()
            && s.job_speed[job.index()] != speed
        {
            // The figures count the work done at the new speed from now.
            s.job_speed[job.index()] = speed;
            s.settle(at.now);
            s.refresh(at.cluster, at.jobs, gpus);
        }
    }

    fn on_release(&mut self, at: &Snapshot<'_>, job: JobId, gpus: &[GpuId]) {
        let spec = at.jobs.spec(job);
        let (vc, req) = (spec.vc.index(), u64::from(spec.gpus));
        let r = &mut self.vc_counts.running[vc];
        *r = (r.0 - 1, r.1 - req);
        // A completed job leaves the waiting count for good; a preempted
        // (suspended) one waits again.
        if matches!(at.jobs.state(job), JobState::Completed(_)) {
            let d = &mut self.vc_counts.done[vc];
            *d = (d.0 + 1, d.1 + req);
        }
        self.settle_busy(at, spec.vc);
        if let Some(s) = self.share.as_deref_mut() {
            s.settle(at.now);
            s.refresh(at.cluster, at.jobs, gpus);
        }
    }

    fn on_sample(&mut self, at: &Snapshot<'_>) {
        self.timeline.push(Sample {
            time: at.now,
            gpus_busy: at.cluster.total_gpus() - at.cluster.free_gpus() as u32,
            jobs_running: at.jobs_running,
            jobs_pending: at.jobs_pending,
        });
        let c = &mut self.vc_counts;
        let specs = at.jobs.specs();
        while let Some(spec) = specs.get(c.next_arrival).filter(|s| s.submit <= at.now) {
            let a = &mut c.arrived[spec.vc.index()];
            *a = (a.0 + 1, a.1 + u64::from(spec.gpus));
            c.next_arrival += 1;
        }
        for (i, p) in at.cluster.partitions().iter().enumerate() {
            let (arrived, running, done) = (c.arrived[i], c.running[i], c.done[i]);
            self.vc_timeline.push(VcSample {
                jobs_running: running.0,
                jobs_pending: arrived.0 - running.0 - done.0,
                gpus_busy: p.gpus_total - p.gpus_free,
                gpus_pending: arrived.1 - running.1 - done.1,
            });
        }
    }

    fn on_finish(&mut self, at: &Snapshot<'_>) {
        self.end_ms = at.now.as_ms();
        for vc in 0..self.busy_gpu_ms.len() {
            self.settle_busy(at, VcId(vc as u16));
        }
        if let Some(s) = self.share.as_deref_mut() {
            s.settle(at.now);
        }
    }
}
