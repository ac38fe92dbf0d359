//! Admission: from trace records to simulated jobs (ordering, partition
//! lookup, skips by reason).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::cluster::request::Request;
use crate::ids::{GpuId, JobId, VcId};
use crate::job::{JobSpec, JobTable, SkipReason, Skipped};
use crate::profile::memo::WordState;
use crate::trace::TraceRecord;

use crate::time::SimTime;

/// Records taken between two shrinks of the record vector during admission.
const SHRINK_STEP: usize = 1 << 16;

/// A recorded split sorted descending (empty when the trace has none), one
/// shared copy per distinct split.
fn sorted_shape(
    shape: Option<&[u32]>,
    interned: &mut std::collections::HashMap<Vec<u32>, Arc<[u32]>, WordState>,
    empty: &Arc<[u32]>,
) -> Arc<[u32]> {
    let Some(shape) = shape else { return Arc::clone(empty) };
    if let Some(s) = interned.get(shape) {
        return Arc::clone(s);
    }
    let mut sorted = shape.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let s: Arc<[u32]> = sorted.into();
    interned.insert(shape.to_vec(), Arc::clone(&s));
    s
}

/// What admission asks of the run's placement rule: how it classes a request
/// (requests of one class are placed alike) and where it puts one on the
/// empty partition. Admission lives below the policies, so it takes the rule
/// through this trait; every boxed `policy::placement::Placement` is one
/// (`placement.rs` implements it by the rule's own `class` and `place`).
pub trait AdmissionPlacer {
    /// The rule's class of `req` (`Placement::class`).
    fn admission_class(&self, req: Request<'_>) -> Vec<u32>;

    /// Appends the GPUs the rule gives `req` in `cluster` to `out` and
    /// returns true, or returns false when it cannot place it
    /// (`Placement::place`).
    fn place_on_empty(&mut self, cluster: &Cluster, req: Request<'_>, out: &mut Vec<GpuId>) -> bool;
}

/// A policy's own limit on the jobs it can ever run, checked at admission
/// after the placement rule's (a job the policy could never start would
/// otherwise wait for ever; [`crate::engine::Simulation`] fails such a run).
/// A policy declares it through its options
/// (`crate::policy::build::BuildPolicy::admission_rule`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AdmissionRule {
    /// No limit beyond the placement rule's.
    #[default]
    Any,
    /// The job runs on GPUs of one type only (Gavel, which allocates each
    /// job time on one GPU type per round): a job needing more GPUs than any
    /// one type of its partition has, counting only nodes of its allowed
    /// types with enough GPU memory for it, is skipped as
    /// [`SkipReason::ExceedsGpuTypeGroup`].
    OneGpuType,
    /// The policy starts a job on idle GPUs only as the `consolidate`
    /// placement places it (IAWP's step 1; it co-locates only one-GPU
    /// jobs): on the empty partition, a job no larger than the partition's
    /// largest node needs one node that holds it (of its allowed types, with
    /// its memory), a larger one as many GPUs over such nodes. Refused as
    /// [`SkipReason::Unplaceable`] otherwise (as the placement rule's own
    /// refusals are).
    Consolidated,
}

impl AdmissionRule {
    /// Why the rule refuses `req` in `cluster` (empty), if it does.
    fn refuses(self, cluster: &Cluster, req: Request<'_>) -> Option<SkipReason> {
        match self {
            AdmissionRule::Any => None,
            AdmissionRule::OneGpuType => {
                // GPUs per type on the nodes that can hold the job's GPUs.
                let mut by_type: BTreeMap<&str, u32> = BTreeMap::new();
                for &n in &cluster.partition(req.vc).nodes {
                    if req.fits_node(cluster, n) {
                        let node = cluster.node(n);
                        *by_type.entry(node.gpu_type.as_str()).or_default() += node.gpus;
                    }
                }
                (by_type.values().max().copied().unwrap_or(0) < req.gpus).then_some(SkipReason::ExceedsGpuTypeGroup)
            }
            AdmissionRule::Consolidated => {
                let p = cluster.partition(req.vc);
                let fitting = p.nodes.iter().filter(|&&n| req.fits_node(cluster, n)).map(|&n| cluster.node(n).gpus);
                let places = if req.gpus <= p.max_node_gpus {
                    fitting.max().is_some_and(|g| g >= req.gpus)
                } else {
                    fitting.sum::<u32>() >= req.gpus
                };
                (!places).then_some(SkipReason::Unplaceable)
            }
        }
    }
}

/// Jobs without a recorded split, keyed by what decides their placement on an
/// empty partition: partition, GPUs, memory need (MiB), allowed GPU types.
type SizeKey = (VcId, u32, u64, Vec<String>);

/// [`SizeKey`] without the GPU types, for the common unconstrained job.
type PlainKey = (VcId, u32, u64);

/// A job with a recorded shape, for admission: (VC, GPUs, memory need in
/// MiB, the shape as recorded).
type ShapeKey = (VcId, u32, u64, Arc<[u32]>);

/// The jobs to simulate and the rows that cannot run.
pub struct Workload {
    /// Admitted jobs, in (submit time, trace order).
    pub jobs: JobTable,
    /// Rows not simulated, in trace order, with reasons.
    pub skipped: Vec<Skipped>,
    /// Rows read (admitted + skipped).
    pub rows_total: usize,
}

impl Workload {
    /// Skipped rows counted by reason name.
    pub fn skipped_by_reason(&self) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        for s in &self.skipped {
            *m.entry(s.reason.name()).or_insert(0) += 1;
        }
        m
    }
}

/// Orders records by (submit time, trace order) and admits each that can run on
/// `cluster` (which must be empty) under the run's placement rule `placer`
/// (e.g. `PlacementKind::build()`):
///
/// - a cluster with named VC partitions maps each job's VC to its partition
///   (`unknown_vc` if it has none); a cluster with one unnamed partition puts
///   every job there and keeps the trace's VC label for output only;
/// - rows with 0 GPUs (`zero_gpus`), a non-positive duration
///   (`nonpositive_duration`), more GPUs than the cluster (`exceeds_cluster`) or,
///   with VCs, than the job's partition (`exceeds_vc`),
///   allowed GPU types none of which the partition has (`gpu_type_unavailable`),
///   or no placement even on the empty partition (`unplaceable`) are skipped;
/// - so are rows the adapter marked ([`TraceRecord::skip`], e.g.
///   `never_scheduled`), after the `zero_gpus` check.
pub fn build_workload(records: Vec<TraceRecord>, cluster: &Cluster, placer: impl AdmissionPlacer) -> Workload {
    build_workload_with(records, cluster, placer, AdmissionRule::Any)
}

/// [`build_workload`] that also applies the policy's own admission `rule`:
/// a job the placement rule admits but the rule refuses is skipped with the
/// rule's reason (e.g. [`SkipReason::ExceedsGpuTypeGroup`]).
pub fn build_workload_with(
    records: Vec<TraceRecord>,
    cluster: &Cluster,
    mut placer: impl AdmissionPlacer,
    rule: AdmissionRule,
) -> Workload {
    let rows_total = records.len();
    // The rule's answer per (VC, GPUs, memory need, allowed types): it
    // depends on nothing else.
    let mut refused: BTreeMap<SizeKey, Option<SkipReason>> = BTreeMap::new();
    let mut records = records;
    // Stable: ties keep trace order. Trace files are usually sorted already,
    // and the stable sort's scratch (half the records) would cost page faults.
    if !records.is_sorted_by_key(|r| r.submit_ms) {
        records.sort_by_key(|r| r.submit_ms);
    }
    let named_vcs = cluster.spec().named_vcs;
    // The split the placement rule gives a job of n GPUs on the empty
    // partition (None: it cannot place it at all).
    // Jobs without a recorded shape are keyed by GPU count (every placement's
    // class for them), others by their placement class.
    let mut by_size: BTreeMap<SizeKey, Option<Arc<[u32]>>> = BTreeMap::new();
    // The common case (no GPU-type constraint) keyed without the type list,
    // in a hash map: one lookup per job.
    let mut by_plain_size: std::collections::HashMap<PlainKey, Option<Arc<[u32]>>, WordState> = Default::default();
    let mut by_class: BTreeMap<(VcId, Vec<u32>), bool> = BTreeMap::new();
    // Recorded shapes, sorted descending: one shared copy per distinct shape.
    let mut sorted_shapes: std::collections::HashMap<Vec<u32>, Arc<[u32]>, WordState> = Default::default();
    // A job with a recorded shape and no GPU-type constraint: its sorted
    // shape and whether it is unplaceable, by what decides them (VC, GPUs,
    // memory need, recorded shape). The placement class is a function of the
    // request and `by_class` keeps the first answer per class, so a repeated
    // key gets the answer the full path would give, without the class.
    let mut by_shape: std::collections::HashMap<ShapeKey, (Arc<[u32]>, bool), WordState> = Default::default();
    let empty: Arc<[u32]> = Arc::new([]);
    let mut scratch = Vec::new();
    let mut specs = Vec::with_capacity(records.len());
    let mut skipped = Vec::new();
    // Records are taken from the end of the reversed vector, in trace order,
    // and the vector is shrunk as it empties, so the records and the job
    // specs made from them are not all in memory at once (a 10-million-row
    // trace would otherwise hold both).
    records.reverse();
    let mut shrink_at = records.len().saturating_sub(SHRINK_STEP);
    while let Some(r) = records.pop() {
        if records.len() <= shrink_at && records.capacity() > records.len() + SHRINK_STEP {
            records.shrink_to_fit();
            shrink_at = records.len().saturating_sub(SHRINK_STEP);
        }
        // The job's recorded split (see `JobSpec::recorded_split`), found below.
        let mut recorded = Arc::clone(&empty);
        let vc = if named_vcs { r.vc().and_then(|v| cluster.vc_by_name(v)) } else { Some(VcId(0)) };
        let types: &[String] = r.gpu_types().unwrap_or(&[]);
        let reason = if r.gpus == 0 {
            Some(SkipReason::ZeroGpus)
        } else if let Some(reason) = r.skip {
            Some(reason)
        } else if r.duration_ms == 0 && r.elastic().is_none() {
            // A work-defined job has no duration: it runs until its work is done.
            Some(SkipReason::NonpositiveDuration)
        } else if let Some(vc) = vc {
            let mem = r.gpu_mem_mib().unwrap_or(0);
            let partition = cluster.partition(vc);
            if r.gpus > partition.gpus_total {
                // A job too large for its VC may still fit the cluster: that
                // is a VC too small, not a cluster too small.
                Some(if r.gpus > cluster.total_gpus() { SkipReason::ExceedsCluster } else { SkipReason::ExceedsVc })
            } else if mem > partition.max_gpu_mem_mib {
                Some(SkipReason::ExceedsGpuMemory)
            } else if !types.is_empty() && !partition.nodes.iter().any(|&n| types.contains(&cluster.node(n).gpu_type)) {
                Some(SkipReason::GpuTypeUnavailable)
            } else if let Some((sorted, unplaceable)) = r
                .shape
                .as_ref()
                .filter(|_| types.is_empty())
                .and_then(|shape| by_shape.get(&(vc, r.gpus, mem, Arc::clone(shape))))
            {
                recorded = Arc::clone(sorted);
                unplaceable.then_some(SkipReason::Unplaceable)
            } else {
                let shape = sorted_shape(r.shape.as_deref(), &mut sorted_shapes, &empty);
                let req = Request { vc, gpus: r.gpus, shape: &shape, min_gpu_mem_mib: mem, milli: 0, gpu_types: types };
                let class = (!shape.is_empty()).then(|| placer.admission_class(req));
                let mut on_empty = || {
                    scratch.clear();
                    placer.place_on_empty(cluster, req, &mut scratch).then(|| Arc::from(cluster.split_of(&scratch)))
                };
                let unplaceable = match class {
                    None => {
                        let split = if types.is_empty() {
                            by_plain_size.entry((vc, r.gpus, mem)).or_insert_with(&mut on_empty)
                        } else {
                            by_size.entry((vc, r.gpus, mem, types.to_vec())).or_insert_with(&mut on_empty)
                        };
                        if let Some(s) = split {
                            recorded = Arc::clone(s);
                        }
                        split.is_none()
                    }
                    Some(class) => {
                        let unplaceable = !*by_class.entry((vc, class)).or_insert_with(|| on_empty().is_some());
                        if let Some(raw) = r.shape.as_ref().filter(|_| types.is_empty()) {
                            by_shape.insert((vc, r.gpus, mem, Arc::clone(raw)), (Arc::clone(&shape), unplaceable));
                        }
                        recorded = shape;
                        unplaceable
                    }
                };
                unplaceable.then_some(SkipReason::Unplaceable)
            }
        } else {
            Some(SkipReason::UnknownVc)
        };
        let reason = match (reason, vc) {
            (None, Some(vc)) if rule != AdmissionRule::Any => {
                let mem = r.gpu_mem_mib().unwrap_or(0);
                *refused.entry((vc, r.gpus, mem, types.to_vec())).or_insert_with(|| {
                    let req =
                        Request { vc, gpus: r.gpus, shape: &[], min_gpu_mem_mib: mem, milli: 0, gpu_types: types };
                    rule.refuses(cluster, req)
                })
            }
            (reason, _) => reason,
        };
        match reason {
            Some(reason) => skipped.push(Skipped { name: r.job_id, line: r.line, gpus: r.gpus, reason }),
            None => specs.push(JobSpec {
                recorded_split: recorded,
                recorded_shape: r.shape.is_some(),
                extra: r.extra,
                task: None,
                id: JobId(specs.len() as u32),
                name: r.job_id,
                line: r.line,
                submit: SimTime::from_ms(r.submit_ms),
                duration_ms: r.duration_ms,
                gpus: r.gpus,
                vc: vc.expect("admitted jobs have a VC"),
            }),
        }
    }
    drop(records);
    skipped.sort_by_key(|s| s.line);
    Workload { jobs: JobTable::new(specs), skipped, rows_total }
}
