//! Replays a `jobs-csv` trace on VC partitions under SRTF, until the policy
//! registry lets `dlsched simulate` name it; writes `jobs.csv` and
//! `summary.json` to the output directory.
//!
//! ```sh
//! cargo run --release --example srtf_replay -- TRACE VCS OUT [helios|default]
//! ```
//!
//! `helios` (the default) is the Helios simulator's SRTF: every reference
//! option ([`SrtfOptions::helios`]), its checkpoint table and the
//! `numpy2-avx512` tie order; `default` is dlsched's own semantics, no
//! checkpoint cost, trace order.

use std::path::PathBuf;

use anyhow::Context;
use dlsched::cluster::Cluster;
use dlsched::engine::{CheckpointModel, EngineConfig, Simulation};
use dlsched::experiment::ClusterChoice;
use dlsched::metrics::Recorder;
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::srtf::{self, SrtfOptions};
use dlsched::profile::TraceSpeed;
use dlsched::trace::tie_order::TieOrder;
use dlsched::trace::{ColumnMap, TraceFormat, load_trace};
use dlsched::workload::build_workload;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, vcs, out, rest @ ..] = &args[..] else {
        anyhow::bail!("usage: srtf_replay TRACE VCS OUT [helios|default]");
    };
    let (opts, ckpt, ties) = match rest.first().map(String::as_str) {
        None | Some("helios") => (SrtfOptions::helios(), CheckpointModel::HeliosTable, TieOrder::Numpy2Avx512),
        Some("default") => (SrtfOptions::default(), CheckpointModel::None, TieOrder::Trace),
        Some(other) => anyhow::bail!("unknown mode `{other}`: helios or default"),
    };
    let cluster = Cluster::new(ClusterChoice::VcFile { path: PathBuf::from(vcs) }.spec()?)?;
    let mut t = load_trace(trace.as_ref(), TraceFormat::JobsCsv, &ColumnMap::default())?;
    ties.order_records(&mut t.records);
    let w = build_workload(t.records, &cluster, PlacementKind::Consolidate.build());
    let policy = srtf::build(&opts, cluster.partitions().len())?;
    // Kept with `..Default::default()` so that new engine options leave it alone.
    #[allow(clippy::needless_update)]
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut recorder = Recorder::new(&cluster, &w.jobs, false, None);
    let sim = Simulation::new(cluster, w.jobs, policy, Box::new(TraceSpeed), cfg).with_checkpoint(ckpt);
    let output = sim.run_observed(&mut recorder, |_| {})?;
    let (summary, _) = dlsched::metrics::summarize(&output, &recorder.into_recording(), &w.skipped, w.rows_total);
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).with_context(|| out.display().to_string())?;
    let mut jobs = std::io::BufWriter::new(std::fs::File::create(out.join("jobs.csv"))?);
    dlsched::metrics::export::write_jobs_csv(&output, &mut jobs)?;
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)? + "\n")?;
    println!(
        "{} jobs, mean JCT {:.1} s, {} jobs preempted, {} preemptions",
        summary.jobs_completed, summary.jct_mean_s, summary.jobs_preempted, summary.preemptions
    );
    Ok(())
}
