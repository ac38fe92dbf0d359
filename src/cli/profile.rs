//! `dlsched profile`: commands of the calibrated profile database.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use crate::profile::db::FILES;

/// Arguments of `dlsched profile`.
#[derive(Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    command: ProfileCommand,
}

#[derive(Subcommand)]
enum ProfileCommand {
    /// Derive the profile tables from the public measurements.
    ///
    /// Reads Gavel's throughputs (gavel/gavel_throughputs_flat.csv, simulation
    /// rows: K80/P100/V100 iteration times, packed and spread, and single-GPU
    /// co-location speeds), Pollux's placements (pollux/<model>/placements.csv:
    /// T4 iteration time per exact split of GPUs over servers), Sia's
    /// placements (sia/<model>/placements-{azure,dgx-ext,rtx,quad}.csv: V100,
    /// A100, RTX 2080 Ti, Quadro RTX 6000) and Chronus's multi-node slowdowns
    /// (chronus/model_info.json), and writes four CSV tables to --out:
    /// throughput.csv (model, gpu_type, local_bsz, gpus, split, iter_time_s,
    /// source), colocation.csv, multinode.csv and models.csv (family,
    /// parameters, training GFLOPs per sample, with citations). Rows are
    /// sorted and numbers have 6 significant digits, so re-running gives
    /// byte-identical files. Lucid's profiles are left out (non-commercial
    /// licence). Conversions: src/profile/data/README.md.
    ///
    /// Regenerate the committed tables with
    /// `dlsched profile import --from ../shared/profiles --out src/profile/data`.
    Import(ImportArgs),
    /// Derive the Pollux application tables from the Pollux artifact's
    /// measurements.
    ///
    /// Reads <app>/placements.csv, scalability.csv and validation-<batch>.csv
    /// of the six applications (bert, cifar10, deepspeech2, imagenet, ncf,
    /// yolov3) in --from, numbers as the artifact's simulator reads them, and
    /// writes applications.csv, validation.csv, placements.csv and
    /// scalability.csv to --out (shortest round-trip numbers, so re-running
    /// gives byte-identical files). The triangulations (delaunay-<app>.csv)
    /// are written by src/profile/data/pollux/delaunay.py with scipy.
    /// Conversions: src/profile/data/pollux/README.md.
    ///
    /// Regenerate the committed tables with
    /// `dlsched profile import-pollux --from ../shared/profiles/pollux --out src/profile/data/pollux`.
    ImportPollux(ImportPolluxArgs),
    /// Derive the Sia per-GPU-type application tables from the Sia
    /// artifact's measurements.
    ///
    /// Reads <app>/placements-<gpu>.csv and scalability-<gpu>.csv of the six
    /// applications in --from for the GPU types azure (V100), dgx-ext (A100),
    /// rtx (RTX 2080 Ti) and quad (Quadro RTX 6000), columns by name,
    /// numbers as the artifact's simulator reads them, checks that the aws
    /// (T4) files hold the Pollux tables' measurements (the Sia model uses
    /// those for T4), and writes applications.csv, placements.csv and
    /// scalability.csv to --out. The triangulations (delaunay-<gpu>-<app>.csv,
    /// planes.csv, paraboloid.csv) are written by
    /// src/profile/data/sia/delaunay.py with scipy. Conversions:
    /// src/profile/data/sia/README.md.
    ///
    /// Regenerate the committed tables with
    /// `dlsched profile import-sia --from ../shared/profiles/sia --out src/profile/data/sia`.
    ImportSia(ImportPolluxArgs),
    /// Derive the ElasticFlow throughput table from ElasticFlow's files.
    ///
    /// Reads throughputs_T4/<model>.csv and throughputs_A100/<model>.csv in
    /// --from (header global_batch_size,1,2,4,8,16,32,64; iterations per
    /// second) and writes throughputs.csv to --out: one row per measured
    /// cell (gpu_type, model, global_bsz, gpus, iters_per_s; nan, empty and
    /// 0 cells skipped), numbers as shortest round-trip decimals, so
    /// re-running gives a byte-identical file. Conversion:
    /// src/profile/data/elasticflow/README.md.
    ///
    /// Regenerate the committed table with
    /// `dlsched profile import-elasticflow --from ../shared/profiles/elasticflow --out src/profile/data/elasticflow`.
    ImportElasticflow(ImportElasticflowArgs),
    /// Step and sync times of the Pollux application model at given
    /// configurations, as CSV on standard output.
    ///
    /// Reads a CSV with columns app, placement (GPUs per node joined by `-`,
    /// e.g. `4-4-2`) and local_bsz, and prints app, placement, local_bsz,
    /// step_time_s, sync_time_s (shortest round-trip numbers) and error
    /// (empty, or why the model cannot rate the configuration).
    PolluxQuery(PolluxQueryArgs),
    /// Print the calibrated table of one model: per GPU type, the measured
    /// iteration time and throughput by per-GPU batch and split of GPUs over
    /// servers, GENIE's fitted coefficients, and the model's facts.
    Show(ShowArgs),
    /// Held-out prediction error of the performance models: every 5th point
    /// of each (model, GPU type) is held out, table interpolation and GENIE's
    /// fit are built on the rest, and the mean absolute percentage error
    /// (MAPE) is printed per source, per model family and overall. Then the
    /// co-location check: model pairs held out by folds (--folds), their
    /// speeds predicted by the learned interference model and by today's
    /// fallbacks for an unmeasured pair (mean absolute and relative error).
    Check(CheckArgs),
}

#[derive(Args)]
struct ShowArgs {
    /// Model name (`dlsched profile show --list` lists them).
    #[arg(required_unless_present = "list", conflicts_with = "list")]
    model: Option<String>,
    /// List the models instead.
    #[arg(long)]
    list: bool,
}

#[derive(Args)]
struct CheckArgs {
    /// Hold out every N-th point of each (model, GPU type); N ≥ 2.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(2..))]
    every: u32,
    /// Also write the table as CSV to this file (and beside it
    /// `<stem>.truth.csv`, the ground-truth check, and `<stem>.coloc.csv`,
    /// the co-location check).
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// Folds of the co-location check (pairs held out round-robin); K ≥ 2.
    #[arg(long, default_value_t = 5, value_name = "K", value_parser = clap::value_parser!(u32).range(2..))]
    folds: u32,
}

#[derive(Args)]
struct ImportArgs {
    /// Folder of public measurements (`../shared/profiles`), read only.
    #[arg(long, value_name = "DIR")]
    from: PathBuf,

    /// Folder to write throughput.csv, colocation.csv, multinode.csv and
    /// models.csv to (created if needed; those four files are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,

    /// Also write memory.csv, GPU memory (MiB) by model and batch from Lucid's
    /// profiles (lucid/single_data.csv), and add Lucid's co-location pairs
    /// (lucid/colocate_info.csv) to colocation.csv. Lucid is licensed for non-commercial
    /// use only (S-Lab License 1.0): the result is yours to use under it, and
    /// is never part of the builtin database. Load it with
    /// `dlsched simulate --profiles DIR`.
    #[arg(long)]
    include_lucid: bool,
}

#[derive(Args)]
struct ImportPolluxArgs {
    /// Folder of the Pollux measurements, one folder per application
    /// (`../shared/profiles/pollux`), read only.
    #[arg(long, value_name = "DIR")]
    from: PathBuf,

    /// Folder to write applications.csv, validation.csv, placements.csv and
    /// scalability.csv to (created if needed; those four files are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

#[derive(Args)]
struct ImportElasticflowArgs {
    /// Folder of ElasticFlow's throughput tables (`../shared/profiles/elasticflow`),
    /// read only.
    #[arg(long, value_name = "DIR")]
    from: PathBuf,

    /// Folder to write throughputs.csv to (created if needed; that file is replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

#[derive(Args)]
struct PolluxQueryArgs {
    /// CSV of queries (columns app, placement, local_bsz).
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
}

/// Runs a `dlsched profile` command.
pub fn run(args: &ProfileArgs) -> Result<ExitCode> {
    match &args.command {
        ProfileCommand::Import(a) => import(a).map(|()| ExitCode::SUCCESS),
        ProfileCommand::ImportPollux(a) => import_pollux(a).map(|()| ExitCode::SUCCESS),
        ProfileCommand::ImportSia(a) => import_sia(a).map(|()| ExitCode::SUCCESS),
        ProfileCommand::ImportElasticflow(a) => import_elasticflow(a).map(|()| ExitCode::SUCCESS),
        ProfileCommand::PolluxQuery(a) => pollux_query(a).map(|()| ExitCode::SUCCESS),
        ProfileCommand::Show(a) => show(a).map(|()| ExitCode::SUCCESS),
        ProfileCommand::Check(a) => check(a).map(|()| ExitCode::SUCCESS),
    }
}

fn import(a: &ImportArgs) -> Result<()> {
    check_import_out(&a.from, &a.out)?;
    let mut db = crate::profile::import::import(&a.from)
        .with_context(|| format!("importing the profiles in {}", a.from.display()))?;
    let mut lucid = None;
    if a.include_lucid {
        db.memory = crate::profile::import::lucid_memory(&a.from)
            .with_context(|| format!("importing Lucid's memory profiles from {}", a.from.display()))?;
        let pairs = crate::profile::import::lucid_colocation(&a.from)
            .with_context(|| format!("importing Lucid's co-location profiles from {}", a.from.display()))?;
        lucid = Some((db.memory.len(), pairs.len()));
        db.colocation.extend(pairs);
    }
    // The files first, then the report.
    db.write_dir(&a.out).with_context(|| format!("writing the tables to {}", a.out.display()))?;
    if let Some((memory, pairs)) = lucid {
        outln!("memory.csv: {memory} rows, colocation.csv: {pairs} more pairs, from Lucid (non-commercial licence)")?;
    }
    let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for r in &db.throughput {
        *counts.entry((FILES[0], &r.source)).or_default() += 1;
    }
    for r in &db.colocation {
        *counts.entry((FILES[1], &r.source)).or_default() += 1;
    }
    for r in &db.multinode {
        *counts.entry((FILES[2], &r.source)).or_default() += 1;
    }
    outln!("{:<16} {:<10} {:>7}", "table", "source", "rows")?;
    for file in FILES.iter().take(3) {
        for ((f, source), n) in counts.iter().filter(|((f, _), _)| f == file) {
            outln!("{f:<16} {source:<10} {n:>7}")?;
        }
    }
    outln!("{:<16} {:<10} {:>7}", FILES[3], "", db.models.len())?;
    let unknown: Vec<&str> = db
        .models
        .iter()
        .filter(|m| m.params_m.is_nan() || m.gflops_per_sample.is_nan())
        .map(|m| m.model.as_str())
        .collect();
    if !unknown.is_empty() {
        outln!("models with an unknown parameter count or GFLOPs (NaN): {}", unknown.join(", "))?;
    }
    outln!("\nwrote {}", a.out.display())?;
    Ok(())
}

fn import_pollux(a: &ImportPolluxArgs) -> Result<()> {
    use crate::profile::pollux::{PolluxApps, TABLES};
    check_import_out(&a.from, &a.out)?;
    let apps = PolluxApps::load_dir(&a.from)
        .with_context(|| format!("importing the Pollux measurements in {}", a.from.display()))?;
    apps.write_tables(&a.out).with_context(|| format!("writing the tables to {}", a.out.display()))?;
    outln!(
        "{:<12} {:>11} {:>8} {:>10} {:>11} {:>11}",
        "application",
        "validations",
        "epochs",
        "placements",
        "scalability",
        "tetrahedra"
    )?;
    for app in &apps.apps {
        outln!(
            "{:<12} {:>11} {:>8} {:>10} {:>11} {:>11}",
            app.name,
            app.validation.len(),
            app.max_epochs,
            app.placements.len(),
            app.scalability.len(),
            app.tetrahedra().count()
        )?;
    }
    outln!("\nwrote {} in {}", TABLES.join(", "), a.out.display())?;
    let missing: Vec<String> =
        apps.apps.iter().map(|app| format!("delaunay-{}.csv", app.name)).filter(|f| !a.out.join(f).exists()).collect();
    if !missing.is_empty() {
        outln!(
            "{} missing in {}: write them with `python3 src/profile/data/pollux/delaunay.py {}` (scipy 1.10.1; see its docstring)",
            missing.join(", "),
            a.out.display(),
            a.from.display()
        )?;
    }
    Ok(())
}

fn import_sia(a: &ImportPolluxArgs) -> Result<()> {
    use crate::profile::sia::{SiaTables, TABLE_GPUS, TABLES};
    check_import_out(&a.from, &a.out)?;
    let t = SiaTables::load_dir(&a.from, &a.out)
        .with_context(|| format!("importing the Sia measurements in {}", a.from.display()))?;
    t.write_tables(&a.out).with_context(|| format!("writing the tables to {}", a.out.display()))?;
    outln!(
        "{:<10} {:<8} {:<12} {:>10} {:>11} {:>11} {:>11}",
        "gpu",
        "suffix",
        "application",
        "placements",
        "scalability",
        "local_bsz",
        "tetrahedra"
    )?;
    for gpu in TABLE_GPUS {
        for app in t.apps(gpu).map(|p| &p.apps[..]).unwrap_or_default() {
            outln!(
                "{:<10} {:<8} {:<12} {:>10} {:>11} {:>11} {:>11}",
                gpu.name(),
                gpu.suffix(),
                app.name,
                app.placements.len(),
                app.scalability.len(),
                format!("{}-{}", app.min_local_bsz, app.max_local_bsz),
                app.tetrahedra().count()
            )?;
        }
    }
    outln!("\nwrote {} in {}", TABLES.join(", "), a.out.display())?;
    let missing: Vec<String> = TABLE_GPUS
        .iter()
        .flat_map(|g| crate::profile::pollux::APPS.map(|app| format!("delaunay-{}-{app}.csv", g.suffix())))
        .filter(|f| !a.out.join(f).exists())
        .collect();
    if !missing.is_empty() {
        outln!(
            "{} triangulation files missing in {}: write them with `python3 src/profile/data/sia/delaunay.py {}` (scipy 1.10.1; see its docstring), then import again",
            missing.len(),
            a.out.display(),
            a.from.display()
        )?;
    }
    Ok(())
}

fn import_elasticflow(a: &ImportElasticflowArgs) -> Result<()> {
    use crate::profile::elasticflow::{EfGpu, ElasticFlowTables, TABLE_FILE};
    check_import_out(&a.from, &a.out)?;
    let t = ElasticFlowTables::convert(&a.from)
        .with_context(|| format!("importing ElasticFlow's throughput tables in {}", a.from.display()))?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let path = a.out.join(TABLE_FILE);
    std::fs::write(&path, t.to_csv()).with_context(|| format!("writing {}", path.display()))?;
    for gpu in EfGpu::ALL {
        let rows: Vec<_> = t.rows.iter().filter(|r| r.gpu == gpu).collect();
        let models: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.model.as_str()).collect();
        outln!(
            "{:<5} {:>4} cells, models {}",
            gpu.name(),
            rows.len(),
            models.into_iter().collect::<Vec<_>>().join(", ")
        )?;
    }
    outln!("\nwrote {}", path.display())?;
    Ok(())
}

fn pollux_query(a: &PolluxQueryArgs) -> Result<()> {
    use crate::profile::pollux::PolluxApps;
    let apps = PolluxApps::builtin();
    let bytes = crate::io::read_csv(&a.queries)?;
    let mut r = csv::Reader::from_reader(&bytes[..]);
    let header = r.headers().with_context(|| format!("{}: header", a.queries.display()))?.clone();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .with_context(|| format!("{}: no column `{name}` (need app, placement, local_bsz)", a.queries.display()))
    };
    let (ca, cp, cb) = (col("app")?, col("placement")?, col("local_bsz")?);
    let mut out = String::from("app,placement,local_bsz,step_time_s,sync_time_s,error\n");
    for rec in r.records() {
        let rec = rec.with_context(|| format!("{}: bad row", a.queries.display()))?;
        let line = rec.position().map_or(0, csv::Position::line);
        let field = |c: usize| rec.get(c).unwrap_or("").trim();
        let (app, placement, bsz) = (field(ca), field(cp), field(cb));
        let bad = |what: &str| anyhow::anyhow!("{}:{line}: {what}", a.queries.display());
        let per_node: Vec<u32> = placement
            .split('-')
            .map(|g| g.parse::<u32>().map_err(|_| bad("placement: GPU counts joined by `-`")))
            .collect::<Result<_>>()?;
        let local_bsz: u32 = bsz.parse().map_err(|_| bad("local_bsz: a whole number"))?;
        let result = match apps.get(app) {
            Some(m) => m.throughput(&per_node, local_bsz).map_err(|e| e.to_string()),
            None => Err(format!("unknown application `{app}`")),
        };
        match result {
            Ok((step, sync)) => out += &format!("{app},{placement},{local_bsz},{step},{sync},\n"),
            Err(e) => out += &format!("{app},{placement},{local_bsz},,,\"{}\"\n", e.replace('"', "'")),
        }
    }
    outln!("{}", out.trim_end_matches('\n'))?;
    Ok(())
}

/// Refuses an `--out` that is `--from` or lies inside it: the derived tables
/// would be written into the raw measurements (`--from` is read only).
fn check_import_out(from: &Path, out: &Path) -> Result<()> {
    let from_c = from.canonicalize().with_context(|| format!("--from {}", from.display()))?;
    // `out` may not exist yet: resolve its nearest existing ancestor.
    let mut existing = out.to_path_buf();
    let mut rest = Vec::new();
    let out_c = loop {
        match existing.canonicalize() {
            Ok(c) => break rest.iter().rev().fold(c, |p: PathBuf, part| p.join(part)),
            Err(_) => match (existing.file_name().map(ToOwned::to_owned), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name);
                    existing = if parent.as_os_str().is_empty() { PathBuf::from(".") } else { parent.to_path_buf() };
                }
                // Nothing of it exists (`..` at a root): it cannot be inside --from.
                _ => return Ok(()),
            },
        }
    };
    if out_c.starts_with(&from_c) {
        anyhow::bail!(
            "--out {} is {} --from {}: the derived tables would be written into the raw measurements; choose a directory outside it",
            out.display(),
            if out_c == from_c { "the same directory as" } else { "inside" },
            from.display()
        );
    }
    Ok(())
}

fn show(a: &ShowArgs) -> Result<()> {
    use crate::profile::db::{ProfileDb, Split};
    use crate::profile::genie::GenieModel;
    let db = &ProfileDb::builtin();
    if a.list {
        for m in db.models() {
            let rows = db.throughput.iter().filter(|r| r.model == m).count();
            outln!("{m:<24} {rows:>6} measured points")?;
        }
        return Ok(());
    }
    let model = a.model.as_deref().unwrap_or_default();
    let info = db.models.iter().find(|m| m.model == model);
    let rows: Vec<_> = db.throughput.iter().filter(|r| r.model == model).collect();
    if info.is_none() && rows.is_empty() {
        anyhow::bail!("no model `{model}` in the profile database; `dlsched profile show --list` lists them");
    }
    if let Some(i) = info {
        outln!(
            "{model}: family {}, {} M parameters, {} training GFLOPs/sample ({})",
            i.family,
            i.params_m,
            i.gflops_per_sample,
            i.source
        )?;
    }
    let genie = GenieModel::new(db);
    let mut gpus: Vec<&str> = rows.iter().map(|r| r.gpu_type.as_str()).collect();
    gpus.sort_unstable();
    gpus.dedup();
    for g in gpus {
        outln!("\n{model} on {g}")?;
        if let Some(f) = genie.fit_for(model, g) {
            outln!(
                "  GENIE fit: sPR(b) = {:.4} {:+.4} b {:+.6} b^2 samples/s per GPU, gamma {:.4}, lambda {:.4}",
                f.k[0],
                f.k[1],
                f.k[2],
                f.gamma,
                f.lambda
            )?;
        }
        outln!("  {:>6} {:>5} {:>10} {:>12} {:>14}  source", "batch", "GPUs", "split", "iter time s", "samples/s")?;
        for r in rows.iter().filter(|r| r.gpu_type == g) {
            let split = match &r.split {
                Split::Exact(s) => s.iter().map(u32::to_string).collect::<Vec<_>>().join("+"),
                Split::Spread => "spread".into(),
            };
            let tput = f64::from(r.local_bsz) * f64::from(r.gpus) / r.iter_time_s;
            outln!(
                "  {:>6} {:>5} {:>10} {:>12.4} {:>14.1}  {}",
                r.local_bsz,
                r.gpus,
                split,
                r.iter_time_s,
                tput,
                r.source
            )?;
        }
    }
    let mut batches: Vec<u32> = rows.iter().map(|r| r.local_bsz).collect();
    batches.sort_unstable();
    batches.dedup();
    if let Some(i) = info {
        outln!(
            "\nGPU memory per GPU, MiB (estimated: {} MiB overhead + {} M params x {} B + batch x {} MiB; {}):",
            crate::profile::db::FRAMEWORK_OVERHEAD_MIB,
            i.params_m,
            i.state_bytes_per_param,
            i.act_mib_per_sample,
            i.mem_source
        )?;
        for b in if batches.is_empty() { vec![1] } else { batches } {
            if let Some((mib, src)) = db.gpu_mem(model, b) {
                let how = match src {
                    crate::profile::db::MemSource::Measured => "measured",
                    crate::profile::db::MemSource::Estimated => "estimated",
                };
                let fb = db.estimated_gpu_mem_mib(model, b).filter(|e| e.params_fallback || e.act_fallback);
                let note = if fb.is_some() && src == crate::profile::db::MemSource::Estimated {
                    " (fallback rule)"
                } else {
                    ""
                };
                outln!("  batch {b:>6}: {mib:>9.0} {how}{note}")?;
            }
        }
    }
    let multi: Vec<_> = db.multinode.iter().filter(|m| m.model == model).collect();
    if !multi.is_empty() {
        outln!("\nthroughput relative to one server:")?;
        for m in multi {
            let servers = if m.servers == 1 { "server" } else { "servers" };
            outln!("  {:>3} GPUs on {} {servers}: {:.3} ({})", m.gpus, m.servers, m.relative, m.source)?;
        }
    }
    Ok(())
}

fn check(a: &CheckArgs) -> Result<()> {
    let db = crate::profile::db::ProfileDb::builtin();
    let rows = crate::profile::check::check(&db, a.every as usize);
    if rows.is_empty() {
        anyhow::bail!("no (model, GPU type) has {} points, so nothing was held out; choose a smaller --every", a.every);
    }
    outln!("held out every {} point of each (model, GPU type); MAPE of the iteration time", ordinal(a.every))?;
    outln!("{:<8} {:<24} {:>7} {:>10} {:>10}", "group", "name", "points", "table %", "GENIE %")?;
    for r in &rows {
        outln!("{:<8} {:<24} {:>7} {:>10.2} {:>10.2}", r.group, r.name, r.points, r.table_mape_pct, r.genie_mape_pct)?;
    }
    let truth = crate::profile::check::check_truth(&db, a.every as usize);
    outln!(
        "\nthe lab16 (K80) ground truth of GENIE's task types: k80-held-out = every {} K80 point of ResNet-50, LSTM, Transformer held out, predicted by each truth; k80-transfer = a model's K80 rows all left out and transferred from its other GPU types (default: the table's fallback rule; from-<type>: that type only; from-a100 is what VGG-16 and Inception-v3 get)",
        ordinal(a.every)
    )?;
    outln!("{:<18} {:<24} {:<14} {:>7} {:>10}", "section", "model", "rule", "points", "MAPE %")?;
    for r in &truth {
        outln!("{:<18} {:<24} {:<14} {:>7} {:>10.2}", r.section, r.model, r.rule, r.points, r.mape_pct)?;
    }
    let started = std::time::Instant::now();
    let coloc = crate::profile::check::check_coloc(&db, a.folds as usize, &Default::default());
    outln!(
        "\nco-location pairs never measured: {} folds over (GPU type, model pair), all batches of a pair held out together; each job's speed predicted by the learned model (NCF, src/profile/ncf.rs) and by today's rule (same pair on another GPU type, else the type mean, else 0.5) and the type mean alone; mean absolute error and mean relative error (%); {} trainings in {:.1} s",
        a.folds,
        a.folds,
        started.elapsed().as_secs_f64()
    )?;
    outln!(
        "{:<8} {:<16} {:>7} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "group",
        "name",
        "speeds",
        "learned",
        "rule",
        "mean",
        "learned %",
        "rule %",
        "mean %"
    )?;
    for r in &coloc {
        outln!(
            "{:<8} {:<16} {:>7} {:>9.4} {:>9.4} {:>9.4} {:>10.2} {:>10.2} {:>10.2}",
            r.group,
            r.name,
            r.speeds,
            r.learned_mae,
            r.rule_mae,
            r.mean_mae,
            r.learned_rel_pct,
            r.rule_rel_pct,
            r.mean_rel_pct
        )?;
    }
    if let Some(p) = &a.out {
        let mut w = csv::Writer::from_path(p).with_context(|| format!("writing {}", p.display()))?;
        for r in &rows {
            w.serialize(r)?;
        }
        w.flush()?;
        let stem = p.file_stem().map_or_else(|| "check".into(), |s| s.to_string_lossy().into_owned());
        let tp = p.with_file_name(format!("{stem}.truth.csv"));
        let mut w = csv::Writer::from_path(&tp).with_context(|| format!("writing {}", tp.display()))?;
        for r in &truth {
            w.serialize(r)?;
        }
        w.flush()?;
        let cp = p.with_file_name(format!("{stem}.coloc.csv"));
        let mut w = csv::Writer::from_path(&cp).with_context(|| format!("writing {}", cp.display()))?;
        for r in &coloc {
            w.serialize(r)?;
        }
        w.flush()?;
        outln!("\nwrote {}, {} and {}", p.display(), tp.display(), cp.display())?;
    }
    Ok(())
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}
