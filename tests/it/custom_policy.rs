//! A policy defined outside the crate, through the public API only (the
//! walk-through of `docs/writing-a-policy.md`): last in, first out, strict,
//! consolidated placement. It runs through the same pipeline as the
//! registered policies (`experiment::run_one_with_policy`), and its start and
//! end times are checked against a schedule computed by hand.

use dlsched::cluster::request::Request;
use dlsched::error::RunError;
use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one, run_one_with_policy};
use dlsched::ids::{GpuId, JobId};
use dlsched::job::JobState;
use dlsched::policy::placement::{Placement, PlacementKind};
use dlsched::policy::registry::{BuildContext, BuildPolicy};
use dlsched::policy::{Decision, Policy, View};
use dlsched::trace::{ColumnMap, TraceFormat};

/// The options of the policy, defaults in one `Default` impl.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct LifoOptions {
    /// Placement rule of the jobs it starts.
    placement: PlacementKind,
}

/// The defaults are concrete values, not `None`: the manifest records the
/// validated options in full (`"placement": "consolidate"`, never `null`).
impl Default for LifoOptions {
    fn default() -> Self {
        LifoOptions { placement: PlacementKind::Consolidate }
    }
}

impl BuildPolicy for LifoOptions {
    fn validate(&self, _kind: &str) -> Result<(), String> {
        if self.placement.may_share() {
            return Err(format!("lifo: placement {} shares GPUs; lifo does not", self.placement.name()));
        }
        Ok(())
    }

    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let placement = self.placement.build_for(ctx.db.as_ref());
        Ok(Box::new(Lifo { pending: Vec::new(), placement, scratch: Vec::new() }))
    }
}

/// Last in, first out: the most recently submitted pending job starts first;
/// strict (when it does not fit, nothing starts until a job ends).
struct Lifo {
    pending: Vec<JobId>,
    placement: Box<dyn Placement>,
    scratch: Vec<GpuId>,
}

impl Policy for Lifo {
    fn name(&self) -> String {
        "lifo".into()
    }

    fn on_arrival(&mut self, job: JobId, _view: &View<'_>) {
        self.pending.push(job);
    }

    fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}

    fn decide(&mut self, view: &View<'_>) -> Decision {
        let Some(&job) = self.pending.last() else { return Decision::Wait };
        let spec = view.jobs.spec(job);
        let req = Request {
            vc: spec.vc,
            gpus: spec.gpus,
            shape: &[],
            min_gpu_mem_mib: spec.gpu_mem_mib().unwrap_or(0),
            milli: 0,
            gpu_types: spec.gpu_types().unwrap_or(&[]),
        };
        self.scratch.clear();
        if !self.placement.place(view.cluster, req, &mut self.scratch) {
            return Decision::Wait;
        }
        self.pending.pop();
        Decision::Launch { job, gpus: std::mem::take(&mut self.scratch) }
    }
}

/// (name, start s, end s) of every job.
fn times(out: &dlsched::engine::RunOutput) -> Vec<(String, u64, u64)> {
    out.jobs
        .iter()
        .map(|(spec, st)| match st {
            JobState::Completed(d) => (spec.name.to_string(), d.start.as_ms() / 1000, d.end.as_ms() / 1000),
            other => panic!("job {} did not complete: {other:?}", spec.name),
        })
        .collect()
}

#[test]
fn a_policy_defined_outside_the_crate_runs_and_schedules_as_computed_by_hand() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("jobs.csv");
    // One node of 2 GPUs. a (2 GPUs, 100 s) at 0; b (1 GPU, 50 s) at 10;
    // c (1 GPU, 30 s) at 20; d (2 GPUs, 10 s) at 30.
    std::fs::write(&trace, "job_id,submit_time,duration,gpu_num\na,0,100,2\nb,10,50,1\nc,20,30,1\nd,30,10,2\n")
        .unwrap();
    let spec = RunSpec {
        sample_interval_ms: 0,
        ..RunSpec::new(
            WorkloadSource::Trace { path: trace, format: TraceFormat::JobsCsv, columns: ColumnMap::default() },
            ClusterChoice::Uniform { nodes: 1, gpus_per_node: 2, gpu_type: None },
        )
    };
    let options = LifoOptions::default();
    options.validate("lifo").unwrap();
    let mut dbs = None;
    let r = run_one_with_policy(
        &spec,
        |ctx| {
            // What an in-crate queue policy reads to build itself is public: a
            // run that names no profile database gets the builtin one for the
            // placements that read it (memory efficiency), none for the rest.
            use dlsched::policy::placement::PlacementKind;
            dbs = Some((
                ctx.db_for(PlacementKind::MemeffPack).is_some(),
                ctx.db_for(PlacementKind::Consolidate).is_some(),
            ));
            options.build("lifo", ctx)
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(dbs, Some((true, false)));
    assert_eq!(r.summary.policy, "lifo");
    // LIFO by hand: a runs 0-100 (the cluster is full). At 100, b, c and d
    // wait; the last in, d, takes both GPUs: 100-110. At 110: c (last of b,
    // c) 110-140, then b fits the other GPU: 110-160.
    let s = |n: &str, a: u64, b: u64| (n.to_string(), a, b);
    assert_eq!(times(&r.output), vec![s("a", 0, 100), s("b", 110, 160), s("c", 110, 140), s("d", 100, 110)]);
    // FIFO on the same spec, for contrast: b 100-150, c 100-130, d 150-160.
    let fifo = run_one(&spec, |_| {}).unwrap();
    assert_eq!(times(&fifo.output), vec![s("a", 0, 100), s("b", 100, 150), s("c", 100, 130), s("d", 150, 160)]);
    // The options deserialise with defaults and refuse unknown fields.
    let o: LifoOptions = serde_json::from_str("{}").unwrap();
    assert_eq!(o, LifoOptions::default());
    // The default is recorded as a value (what a manifest holds), not `null`.
    assert_eq!(serde_json::to_value(&o).unwrap(), serde_json::json!({"placement": "consolidate"}));
    assert!(serde_json::from_str::<LifoOptions>(r#"{"placment": "first-fit"}"#).is_err());
    assert!(LifoOptions { placement: PlacementKind::ShareBestFit }.validate("lifo").is_err());
}
