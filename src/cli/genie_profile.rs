//! `dlsched genie-profile`: GENIE's offline profiler for a cluster, saved as fitted models.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::args::ClusterArgs;
use anyhow::{Context, Result, bail};
use clap::Args;

#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct GenieProfileArgs {
    /// The cluster (its first partition is profiled).
    #[command(flatten)]
    pub(crate) machines: ClusterArgs,
    /// Seed of the measurement noise.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Standard deviation of the log-normal measurement noise.
    #[arg(long, default_value_t = 0.02)]
    pub(crate) noise: f64,
    /// Iterations per profiling run.
    #[arg(long, default_value_t = 100)]
    pub(crate) iterations: u64,
    /// The ground truth to profile: `table` (the profile database's table
    /// interpolation, the default) or `genie-k80` (the K80 truth of GENIE's
    /// task types; the truth of runs at `--rate-model genie-k80`).
    #[arg(long, value_enum, default_value_t = crate::profile::genie::GenieTruth::Table)]
    pub(crate) truth: crate::profile::genie::GenieTruth,
    /// The batch sizes measured: `grid` (default: powers of two up to the
    /// largest measured batch, the measured ones, and per-GPU batch
    /// largest/d on d GPUs, mostly points the table interpolates) or
    /// `measured` (only the per-GPU batches the public measurements contain).
    #[arg(long, value_enum, default_value_t = crate::policy::genie::ProfileBatches::Grid)]
    pub(crate) batches: crate::policy::genie::ProfileBatches,
    /// A profile database directory as ground truth instead of the builtin one.
    #[arg(long, value_name = "DIR")]
    pub(crate) profiles: Option<PathBuf>,
    /// Output file (JSON).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
}

pub(crate) fn genie_profile(a: &GenieProfileArgs) -> Result<ExitCode> {
    use crate::policy::genie::{ProfilerConfig, profile};
    if !(a.noise.is_finite() && (0.0..=1.0).contains(&a.noise)) {
        bail!("--noise is the log-normal noise's standard deviation: between 0 and 1 (0.02 = 2 %), got {}", a.noise);
    }
    if a.iterations == 0 || a.iterations > 1_000_000 {
        bail!("--iterations must be between 1 and 1,000,000, got {}", a.iterations);
    }
    let db = match &a.profiles {
        Some(d) => crate::profile::db::ProfileDb::load_dir(d)?,
        None => crate::profile::db::ProfileDb::builtin(),
    };
    let db = &db;
    let choice = a.machines.choice()?;
    let cluster = crate::cluster::Cluster::new(choice.spec()?)?;
    let spec = cluster.spec();
    // The shape `simulate` profiles when it has no models: the first
    // partition's node count, largest node and GPU type.
    let part = cluster.partition(crate::ids::VcId(0));
    let (nodes, gpn) = (part.nodes.len() as u32, part.max_node_gpus);
    let gpu_type = cluster.node(part.nodes[0]).gpu_type.clone();
    let name = a.profiles.as_ref().map_or("builtin".to_string(), |d| d.display().to_string());
    let cfg =
        ProfilerConfig { iterations_per_run: a.iterations, noise_sd: a.noise, truth: a.truth, batches: a.batches };
    if a.truth == crate::profile::genie::GenieTruth::GenieK80
        && !gpu_type.eq_ignore_ascii_case(crate::profile::genie::K80)
    {
        bail!("--truth genie-k80 is the K80 ground truth of GENIE's task types; {} has {gpu_type} GPUs", spec.name);
    }
    if part.nodes.iter().any(|&n| cluster.node(n).gpu_type != gpu_type) {
        errln!(
            "note: {}: the first partition mixes GPU types; profiling {gpu_type} (its first node's), as simulate does",
            spec.name
        )?;
    }
    let p = profile(db, &name, &gpu_type, nodes, gpn, a.seed, cfg);
    p.validate().map_err(|e| anyhow::anyhow!("the fit failed: {e}"))?;
    // No wall-clock date: the same options give the same bytes, so that
    // regenerating a committed artefact leaves the checkout clean.
    let doc = serde_json::json!({
        "manifest": {
            "what": "GENIE prediction models fitted by dlsched's simulated offline profiler",
            "dlsched_version": env!("CARGO_PKG_VERSION"),
            "cluster": spec.name,
            "profile_db": name,
            "seed": a.seed,
            "profiler": cfg,
            "ground_truth": a.truth.name(),
            "profiling_gpu_hours": p.gpu_seconds() / 3600.0,
        },
        "models": p,
    });
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    crate::metrics::export::write_atomic(&a.out, text.as_bytes())
        .with_context(|| format!("writing {}", a.out.display()))?;
    outln!(
        "profiled {} task types on {} ({} x {} {}): {:.2} GPU-hours of profiling; wrote {}",
        p.types.len(),
        spec.name,
        nodes,
        gpn,
        gpu_type,
        p.gpu_seconds() / 3600.0,
        a.out.display()
    )?;
    for t in p.types.values() {
        outln!(
            "  {:<18} sPR(b) = {:.3} + {:.4} b + {:.6} b^2   gamma {:.3}  lambda {}",
            t.kind,
            t.k[0],
            t.k[1],
            t.k[2],
            t.gamma,
            t.lambda.map_or("-".to_string(), |l| format!("{l:.3}"))
        )?;
    }
    // The fit's error against the truth it measured, per type and placement.
    let truth = crate::profile::genie::GroundTruth::with(db, &gpu_type, a.truth);
    let errors = crate::policy::genie_error::prediction_errors(&p, &truth);
    let csv_path = errors_path(&a.out);
    crate::metrics::export::write_atomic(&csv_path, crate::policy::genie_error::to_csv(&errors).as_bytes())
        .with_context(|| format!("writing {}", csv_path.display()))?;
    outln!(
        "prediction error against the `{}` ground truth (MAPE of the iteration time over the paper's placements x measured global batches; all rows in {}):",
        a.truth.name(),
        csv_path.display()
    )?;
    for r in errors.iter().filter(|r| r.group != "type-placement") {
        outln!("  {:<12} {:<22} {:>5} points  {:>7.2} %", r.group, r.name, r.points, r.mape_pct)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the error CSV goes: beside the models, `<stem>.errors.csv`.
fn errors_path(out: &std::path::Path) -> PathBuf {
    let stem = out.file_stem().map_or_else(|| "genie".into(), |s| s.to_string_lossy().into_owned());
    out.with_file_name(format!("{stem}.errors.csv"))
}
