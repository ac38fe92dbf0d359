//! Earliest deadline first as ElasticFlow's simulator defines its `edf`
//! baseline (Gu et al., ASPLOS'23, §6.1; pkusys/ElasticFlow @ 04a0109a,
//! `ElasticFlow/scheduler/scheduler.py` `one_queue_edf_sim_jobs`,
//! `EDF_estimate_all_jobs`, `edf_sim_allocation`): elastic and preemptive,
//! without admission control.
//!
//! # Rules
//!
//! At each scheduling instant (arrivals and completions, at most once per
//! slot of [`EdfOptions::slot_s`]: [`super::elasticflow`], *Instants*), over
//! every submitted job not complete, in deadline order (ties: job order),
//! each job gets the largest of its levels (the throughput table's GPU
//! counts up to its largest count: the largest the table rates, at most 64
//! and its global batch; [`super::elasticflow`], *Levels*) that fits the
//! GPUs not yet given out, all of its largest count when they are free
//! (`base_quota = min(max_gpu, num_gpu)`), none when fewer than one GPU is
//! left. Jobs further down lose GPUs to earlier deadlines (preemption
//! keeps their progress). Every job is admitted and run to completion,
//! late or not (the simulator counts a late one as missed when it ends).
//! Placement and the re-allocation cost are as `elasticflow`'s.
//!
//! # Our readings
//!
//! - The simulator charges EDF no overhead (`r_job['overhead'] = 0`); here
//!   the run's re-scale delay applies to every reallocation (`--rescale-delay 0`
//!   for none).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::build::{BuildContext, BuildPolicy};
use super::elasticflow::{Cadence, Levels, check_slot_s, place};
use super::{Decision, Policy, View};
use crate::error::RunError;
use crate::ids::JobId;

/// Options of `edf`. Names are kebab-case; unknown names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct EdfOptions {
    /// Scheduling slot, s (`slot-s`; default 60, as `elasticflow`); 1 to 1e6.
    #[serde(alias = "slot_s")]
    pub slot_s: u64,
}

impl Default for EdfOptions {
    fn default() -> Self {
        EdfOptions { slot_s: 60 }
    }
}

impl BuildPolicy for EdfOptions {
    fn validate(&self, kind: &str) -> Result<(), String> {
        check_slot_s(kind, self.slot_s)
    }

    fn deadline_jobs_only(&self) -> bool {
        true
    }

    fn build(&self, kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        super::pollux_sim::one_partition(kind, ctx.cluster)?;
        Ok(Box::new(Edf::new(*self)))
    }
}

/// `edf`; see the module docs.
pub struct Edf {
    cadence: Cadence,
    /// Submitted and not complete: (deadline ms, levels).
    active: BTreeMap<JobId, (u64, Levels)>,
    /// Arrived, levels not read yet.
    arrived: Vec<JobId>,
    plan: std::collections::VecDeque<Decision>,
}

impl Edf {
    /// The policy with `opts`.
    pub fn new(opts: EdfOptions) -> Self {
        Edf {
            cadence: Cadence::new(opts.slot_s),
            active: BTreeMap::new(),
            arrived: Vec::new(),
            plan: Default::default(),
        }
    }

    /// Each active job's GPUs by the rules, in deadline order.
    fn schedule(&mut self, view: &View<'_>) {
        for j in std::mem::take(&mut self.arrived) {
            let deadline = view.jobs.spec(j).deadline().map_or(u64::MAX, |d| d.as_ms());
            self.active.insert(j, (deadline, Levels::of(view, j, false)));
        }
        let mut order: Vec<(u64, JobId)> = self.active.iter().map(|(&j, a)| (a.0, j)).collect();
        order.sort_unstable();
        let mut free = view.cluster.total_gpus();
        let mut target = BTreeMap::new();
        for (_, j) in order {
            let (n, _) = self.active[&j].1.fit(free);
            free -= n;
            target.insert(j, n);
        }
        self.plan.extend(place(view, &target));
    }
}

impl Policy for Edf {
    fn name(&self) -> String {
        "edf".into()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.arrived.push(job);
        self.cadence.touch();
    }

    fn on_completion(&mut self, job: JobId, _view: &View<'_>) {
        self.active.remove(&job);
        self.cadence.touch();
    }

    fn on_timer(&mut self, view: &View<'_>) {
        self.cadence.on_timer(view.now);
    }

    fn decide(&mut self, view: &View<'_>) -> Decision {
        if let Some(d) = self.plan.pop_front() {
            return d;
        }
        match self.cadence.due(view.now) {
            Ok(()) => {
                self.schedule(view);
                self.plan.pop_front().unwrap_or(Decision::Wait)
            }
            Err(timer) => timer.unwrap_or(Decision::Wait),
        }
    }
}
