//! A research crate outside dlsched, built on its public API only: one
//! policy (`largest-first`) and one trace format (`ws-jobs`), registered in
//! a [`Registry`] that gives them dlsched's whole command line
//! (`src/main.rs`): `simulate --policy largest-first --format ws-jobs`,
//! sweep files, manifests and `--from-manifest`.

use std::path::Path;

use dlsched::cluster::request::Request;
use dlsched::error::{RunError, TraceError};
use dlsched::experiment::Registry;
use dlsched::ids::{GpuId, JobId};
use dlsched::policy::placement::{Placement, PlacementKind};
use dlsched::policy::registry::{BuildContext, BuildPolicy};
use dlsched::policy::{Decision, Policy, View};
use dlsched::trace::{TraceFormatKind, TraceRecord};
use serde::{Deserialize, Serialize};

/// The registry of this crate: dlsched's built-in kinds and formats, plus
/// `largest-first` and `ws-jobs`.
pub fn registry() -> Registry {
    Registry::default()
        .policy::<LargestFirstOptions>(
            "largest-first",
            "Largest job first: by GPUs asked, most first (submit order on ties), consolidated placement.",
        )
        .format(&WS_JOBS)
}

/// Options of `largest-first`, each with its default (`--policy-opt
/// backfill=true`, a sweep's `policy_opt.backfill`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LargestFirstOptions {
    /// Let smaller jobs start when the largest waiting one does not fit
    /// (greedy, no reservation); strict otherwise. Default false.
    pub backfill: bool,
}

impl BuildPolicy for LargestFirstOptions {
    fn build(&self, _kind: &str, ctx: &mut BuildContext<'_>) -> Result<Box<dyn Policy>, RunError> {
        let placement = PlacementKind::Consolidate.build_for(ctx.db_for(PlacementKind::Consolidate).as_ref());
        Ok(Box::new(LargestFirst { backfill: self.backfill, queue: Vec::new(), placement, scratch: Vec::new() }))
    }
}

/// Largest job first: the pending job asking for the most GPUs starts
/// first (the earliest submitted among equals).
struct LargestFirst {
    backfill: bool,
    /// Pending jobs, (GPUs, arrival index), largest first.
    queue: Vec<(u32, JobId)>,
    placement: Box<dyn Placement>,
    scratch: Vec<GpuId>,
}

impl Policy for LargestFirst {
    fn name(&self) -> String {
        if self.backfill { "largest-first+backfill".into() } else { "largest-first".into() }
    }

    fn on_arrival(&mut self, job: JobId, view: &View<'_>) {
        let gpus = view.jobs.spec(job).gpus;
        // After every job of at least as many GPUs: submit order on ties.
        let at = self.queue.partition_point(|&(g, _)| g >= gpus);
        self.queue.insert(at, (gpus, job));
    }

    fn on_completion(&mut self, _job: JobId, _view: &View<'_>) {}

    fn decide(&mut self, view: &View<'_>) -> Decision {
        let candidates = if self.backfill { self.queue.len() } else { self.queue.len().min(1) };
        for i in 0..candidates {
            let job = self.queue[i].1;
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
            if self.placement.place(view.cluster, req, &mut self.scratch) {
                self.queue.remove(i);
                return Decision::Launch { job, gpus: std::mem::take(&mut self.scratch) };
            }
        }
        Decision::Wait
    }
}

/// The `ws-jobs` format: one job a line, `id submit_s duration_s gpus`
/// separated by spaces or tabs (whole seconds); blank lines and lines
/// starting with `#` are ignored.
pub static WS_JOBS: TraceFormatKind = TraceFormatKind::new(
    "ws-jobs",
    "Whitespace-separated `id submit_s duration_s gpus`, one job a line, # comments.",
    read_ws_jobs,
)
.with_id_column("id");

/// Reads a `ws-jobs` file; a malformed value names the file, line and field.
///
/// # Errors
/// [`TraceError::Field`] for a line without four fields or a value that is
/// not a whole number; [`TraceError::Format`] for a file that is not UTF-8.
pub fn read_ws_jobs(file: &Path, bytes: &[u8]) -> Result<Vec<TraceRecord>, TraceError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| TraceError::Format { file: file.to_path_buf(), message: format!("not UTF-8 text: {e}") })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() || fields[0].starts_with('#') {
            continue;
        }
        let err = |column: &str, message: String| TraceError::Field {
            file: file.to_path_buf(),
            line: line_no,
            column: column.to_string(),
            message,
        };
        if fields.len() != 4 {
            return Err(err("id", format!("expected 4 fields (id submit_s duration_s gpus), found {}", fields.len())));
        }
        let num = |at: usize, column: &str| -> Result<u64, TraceError> {
            fields[at].parse::<u64>().map_err(|_| err(column, format!("`{}` is not a whole number", fields[at])))
        };
        let submit_s = num(1, "submit_s")?;
        let duration_s = num(2, "duration_s")?;
        let gpus = u32::try_from(num(3, "gpus")?).map_err(|_| err("gpus", format!("`{}` is too large", fields[3])))?;
        let mut r = TraceRecord::new(fields[0], submit_s.saturating_mul(1000), duration_s.saturating_mul(1000), gpus);
        r.line = line_no;
        out.push(r);
    }
    Ok(out)
}
