//! ElasticFlow's progress model: work-defined jobs of ElasticFlow's traces
//! (a `jobs-csv` row with `num_iteration`) progress at the measured
//! iterations per second of their model at their global batch on their GPU
//! count.
//!
//! **Source.** ElasticFlow (D. Gu et al., *ElasticFlow: An Elastic
//! Serverless Training Platform for Distributed Deep Learning*, ASPLOS 2023;
//! pkusys/ElasticFlow @ 04a0109a, Apache-2.0), its simulator's throughput
//! tables `ElasticFlow/scheduler/throughputs_T4/<model>.csv` (bert, cifar10,
//! deepspeech2, imagenet, ncf, yolov3; the ElasticFlow README says they were
//! taken from the Pollux data) and `throughputs_A100/<model>.csv` (bert,
//! deepspeech2, gpt2, inception3, resnet50, resnet50_cifar10, vgg16;
//! measured on A100s), also in `../shared/profiles/elasticflow/`. Header
//! `global_batch_size,1,2,4,8,16,32,64`; a cell is the job's iterations per
//! second at that global batch on that many GPUs. The derived table compiled
//! in is `data/elasticflow/throughputs.csv` (conversion in its README;
//! [`ElasticFlowTables::convert`], `dlsched profile import-elasticflow`).
//!
//! **The model.** Progress is in iterations (optimiser steps at the job's
//! global batch); a job's work is its own ([`crate::job::ElasticSpec::work`],
//! the trace's `num_iteration`), so the model has no target per application
//! ([`ProgressModel::target`] is an error). Goodput on `n` GPUs = the table's
//! iterations/s at (the job's global batch, `n`) for the run's GPU type, the
//! same at every progress (no breakpoints: ElasticFlow has no statistical
//! efficiency; it keeps the global batch and scales GPUs). As ElasticFlow's
//! simulator (`jobs.py` `run_all_jobs`, `scheduler.py`), the placement over
//! servers does not change the rate.
//!
//! **GPU counts not in the table.** ElasticFlow's simulator looks a rate up
//! as `THROUGHPUTS[model][str(batch)][str(num_gpu)]`: a count that is not a
//! column (3, 5, 6, ...) raises a `KeyError`, and its elastic policies only
//! ever allocate the table's counts (`utils.get_next_level` steps through
//! the columns); its traces' jobs ask for 1, 2, 4, 8 or 16 GPUs. Our reading
//! (ours, not ElasticFlow's): a count between two measured counts is rated
//! by linear interpolation in the GPU count between them (e.g. cifar10 at
//! 2,048 on 3 T4s: (1.193357 + 2.535133) / 2 = 1.864245 it/s); a count
//! above the largest measured one (cells `nan`, empty or 0 are not
//! measured: yolov3 past 16 T4s, resnet50_cifar10 past 8 A100s) cannot be
//! rated, an error.
//!
//! **Batches.** Only the table's global batches (1 to 3 per model) can be
//! rated; a job at another batch is an error when the run loads it
//! ([`ElasticFlowModel::check_job`]). A configuration is rated at the global
//! batch it trains: its total batch when that is one of the table's, else
//! the table batch whose even split over its GPUs, rounded up (the engine's
//! launch rule, [`ProgressModel::tuned_config`]), is its per-GPU batch
//! (without accumulation); a configuration matching no table batch, or two,
//! is an error. On the table's GPU counts every table batch divides evenly.
//!
//! **Timing.** The engine completes a job at the first whole ms at which its
//! iterations are done (`iterations / rate` s after its re-scale delay);
//! ElasticFlow's simulator rounds an end time up to whole seconds
//! (`math.ceil(iter_left / throughput)`). The run's re-scale delay
//! (`--rescale-delay`, default Pollux's 30 s) applies to these jobs too:
//! `--rescale-delay 0` runs them for exactly `iterations / rate`.
//!
//! **Against ElasticFlow's own traces.** `iteration / rate(batch, num_gpu)`
//! reproduces the traces' `duration` column: `elasticVpollux_e.csv` (T4)
//! 195 of 195 rows as its floor, `philly_103959.csv` (A100) 876 of 876 as
//! its ceiling, `resnet_cifar_trace.csv` (A100) 4 of 5 as its ceiling (row
//! 3 says 10,823 s where 17,316 iterations at 28.60 it/s take 605.4 s).
//! The integration test `elasticflow::trace_durations_agree` checks it when
//! the traces are at hand (`$DLSCHED_ELASTICFLOW_TRACES`, else
//! `../shared/traces/elasticflow`; they are not in `../shared` today).
//!
//! **The T4 tables and the Pollux model.** The ElasticFlow README says the
//! T4 tables were taken from the Pollux data, and they are the Pollux
//! application model's throughput in optimiser steps: for 56 of the 60 T4
//! cells, `1 / (step + accum × (step − sync))` with `(step, sync)` from
//! `dlsched profile pollux-query` at the Pollux model's tuned configuration
//! of (global batch, GPUs) (GPUs packed 4 to a node; per-GPU batch and
//! accumulation steps by Pollux's rule, [`crate::profile::pollux::Application::tuned_config`]) equals
//! the cell to 1e-12 relative. E.g. cifar10 at 2,048 on 4 T4s: atomic batch
//! 512, step 0.394457 s → 2.535133 it/s, the cell's 2.53513302294422;
//! imagenet at 3,200 on 8 (4 + 4): atomic 200 with 1 accumulation step →
//! 0.494216, the cell's; bert at 384 on 1: atomic 12 with 31 steps →
//! 0.0344069, the cell's. The 4 others: ncf at 32,768 on 1 T4 is 46.914 it/s
//! here, the Pollux step time at atomic batch 32,768 without accumulation
//! (1 / 0.0213155 s), where the Pollux rule accumulates twice on a single
//! GPU above the initial batch (33.786 it/s: ratio 1.389); yolov3 at 64 on
//! 1, 2 and 4 T4s is 1.135, 1.102 and 1.161 × the Pollux model's (0.43806
//! vs 0.38584, 0.82880 vs 0.75197, 1.31521 vs 1.13265 it/s; both at 8 per
//! GPU with accumulation), a difference we have not traced. The Pollux model
//! has, besides, statistical efficiency (goodput per sample changes with the
//! batch and progress) and epoch targets; ElasticFlow's model has neither:
//! its jobs' work is a number of iterations at a fixed global batch.
//!
//! **Not modelled.** Step times and gradient statistics: policies that model
//! throughput or statistical efficiency themselves (`pollux`, `optimus`)
//! refuse these jobs with the model's error. ElasticFlow's restart
//! overheads (`scheduler/overhead_measurement_traces/`) are not read.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::TraceError;
use crate::io::csvrows::for_each_row;
use crate::job::{ElasticConfig, ProgressModel};

/// ElasticFlow's GPU-count columns (after `global_batch_size`).
pub const GPU_COUNTS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The compiled-in table's file name (in `src/profile/data/elasticflow/`).
pub const TABLE_FILE: &str = "throughputs.csv";

/// The header of [`TABLE_FILE`]: GPU type (`t4`, `a100`), ElasticFlow's
/// model name, global batch (samples per iteration of the whole job), GPUs,
/// iterations per second.
pub const TABLE_HEADER: &str = "gpu_type,model,global_bsz,gpus,iters_per_s";

/// The GPU types ElasticFlow measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EfGpu {
    /// NVIDIA T4 (`throughputs_T4/`, from the Pollux data).
    T4,
    /// NVIDIA A100 (`throughputs_A100/`, ElasticFlow's testbed).
    A100,
}

impl EfGpu {
    /// Both, in the table's order.
    pub const ALL: [EfGpu; 2] = [EfGpu::A100, EfGpu::T4];

    /// The name in [`TABLE_FILE`] and in cluster specs (`t4`, `a100`).
    pub fn name(self) -> &'static str {
        match self {
            EfGpu::T4 => "t4",
            EfGpu::A100 => "a100",
        }
    }

    /// The source folder (`throughputs_T4`, `throughputs_A100`).
    pub fn folder(self) -> &'static str {
        match self {
            EfGpu::T4 => "throughputs_T4",
            EfGpu::A100 => "throughputs_A100",
        }
    }

    /// The type of a cluster's GPU type name, case-insensitively (`T4`,
    /// `t4`, `a100`); `None` for any other (`a100-80g` included: ElasticFlow
    /// measured 40-GB A100s).
    pub fn of_gpu_type(name: &str) -> Option<Self> {
        EfGpu::ALL.into_iter().find(|g| g.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// One cell of ElasticFlow's tables.
#[derive(Clone, Debug, PartialEq)]
pub struct EfRow {
    /// GPU type.
    pub gpu: EfGpu,
    /// ElasticFlow's model name (the source file's stem: `cifar10`, `bert`, ...).
    pub model: String,
    /// Global batch, samples per iteration of the whole job.
    pub global_bsz: u32,
    /// GPUs.
    pub gpus: u32,
    /// Iterations per second, finite and positive.
    pub iters_per_s: f64,
}

/// ElasticFlow's throughput tables, one row per measured cell, sorted by
/// (GPU type, model, batch, GPUs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ElasticFlowTables {
    /// The cells.
    pub rows: Vec<EfRow>,
}

impl ElasticFlowTables {
    /// The compiled-in table (`data/elasticflow/throughputs.csv`).
    ///
    /// # Panics
    /// Never for the committed file (a test parses it).
    pub fn builtin() -> Self {
        Self::parse(Path::new("builtin:elasticflow/throughputs.csv"), include_str!("data/elasticflow/throughputs.csv"))
            .expect("the compiled-in ElasticFlow table parses")
    }

    /// Derives the table from ElasticFlow's files in `from` (a folder with
    /// `throughputs_T4/*.csv` and `throughputs_A100/*.csv`, e.g.
    /// `../shared/profiles/elasticflow`): every cell of every `<model>.csv`
    /// that is a finite, positive number becomes a row (`nan`, empty and 0
    /// cells are not measured and skipped), the number as parsed (written
    /// back as the shortest decimal that round-trips it, so the value is
    /// the source's exactly).
    ///
    /// # Errors
    /// An unreadable folder or file; a header other than
    /// `global_batch_size,1,2,4,8,16,32,64`; a batch that is not a whole
    /// positive number; a cell that is neither a number nor `nan`/empty; a
    /// batch given twice.
    pub fn convert(from: &Path) -> Result<Self, TraceError> {
        let mut rows = Vec::new();
        for gpu in EfGpu::ALL {
            let dir = from.join(gpu.folder());
            let entries = std::fs::read_dir(&dir).map_err(|err| TraceError::Io { file: dir.clone(), err })?;
            let mut files: Vec<_> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .collect();
            files.sort();
            for file in files {
                let model = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
                let bytes = crate::io::read_csv(&file)?;
                let mut seen = std::collections::BTreeSet::new();
                for_each_row(
                    &file,
                    &bytes,
                    &crate::io::csvrows::RowPolicy::new(crate::error::RowErrors::Fail),
                    |header, row| {
                        let want: Vec<String> = std::iter::once("global_batch_size".to_string())
                            .chain(GPU_COUNTS.iter().map(u32::to_string))
                            .collect();
                        if header.names != want {
                            return Err(TraceError::Format {
                                file: file.clone(),
                                message: format!("header `{}`, expected `{}`", header.names.join(","), want.join(",")),
                            });
                        }
                        let batch = row.global_batch(0)?;
                        if !seen.insert(batch) {
                            return Err(row.err(0, format!("global batch {batch} given twice")));
                        }
                        for (col, gpus) in GPU_COUNTS.into_iter().enumerate().map(|(i, n)| (i + 1, n)) {
                            let text = row.str(col);
                            if text.is_empty() || text.eq_ignore_ascii_case("nan") {
                                continue;
                            }
                            match text.parse::<f64>() {
                                Ok(0.0) => {}
                                Ok(v) if v.is_finite() && v > 0.0 => rows.push(EfRow {
                                    gpu,
                                    model: model.clone(),
                                    global_bsz: batch,
                                    gpus,
                                    iters_per_s: v,
                                }),
                                _ => {
                                    return Err(
                                        row.err(col, format!("`{text}` is not a number of iterations per second"))
                                    );
                                }
                            }
                        }
                        Ok(())
                    },
                )?;
            }
        }
        rows.sort_by(|a, b| (a.gpu, &a.model, a.global_bsz, a.gpus).cmp(&(b.gpu, &b.model, b.global_bsz, b.gpus)));
        Ok(ElasticFlowTables { rows })
    }

    /// The table as [`TABLE_FILE`] text: [`TABLE_HEADER`], one row per
    /// cell, numbers as shortest round-trip decimals, `\n` line ends.
    pub fn to_csv(&self) -> String {
        let mut s = format!("{TABLE_HEADER}\n");
        for r in &self.rows {
            s.push_str(&format!("{},{},{},{},{}\n", r.gpu.name(), r.model, r.global_bsz, r.gpus, r.iters_per_s));
        }
        s
    }

    /// Parses [`TABLE_FILE`] text; `file` names it in errors.
    ///
    /// # Errors
    /// A wrong header, an unknown GPU type, an empty model, a batch or GPU
    /// count that is not a whole positive number, a GPU count not among
    /// [`GPU_COUNTS`], a rate that is not finite and positive, a cell given
    /// twice, with file, line and column.
    pub fn parse(file: &Path, text: &str) -> Result<Self, TraceError> {
        let mut rows: Vec<EfRow> = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for_each_row(
            file,
            text.as_bytes(),
            &crate::io::csvrows::RowPolicy::new(crate::error::RowErrors::Fail),
            |header, row| {
                if header.names.join(",") != TABLE_HEADER {
                    return Err(TraceError::Format {
                        file: file.to_path_buf(),
                        message: format!("header `{}`, expected `{TABLE_HEADER}`", header.names.join(",")),
                    });
                }
                let gpu = EfGpu::of_gpu_type(row.str(0))
                    .ok_or_else(|| row.err(0, format!("`{}` is not t4 or a100", row.str(0))))?;
                let model = row.text(1, "model")?.to_string();
                let global_bsz = row.global_batch(2)?;
                let gpus = row.count(3)?;
                if !GPU_COUNTS.contains(&gpus) {
                    return Err(row.err(3, format!("{gpus} GPUs is not one of ElasticFlow's columns {GPU_COUNTS:?}")));
                }
                let iters_per_s = match row.str(4).parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => v,
                    _ => return Err(row.err(4, format!("`{}` is not a positive number of iterations/s", row.str(4)))),
                };
                if !seen.insert((gpu, model.clone(), global_bsz, gpus)) {
                    return Err(row.err(1, format!("{} {model} {global_bsz} on {gpus} GPUs given twice", gpu.name())));
                }
                rows.push(EfRow { gpu, model, global_bsz, gpus, iters_per_s });
                Ok(())
            },
        )?;
        Ok(ElasticFlowTables { rows })
    }
}

/// What of a work-defined job ElasticFlow's model cannot rate
/// ([`ElasticFlowModel::check_job`]): the trace field to name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EfField {
    /// The model (application) is not in the tables of the run's GPU type.
    Model,
    /// The global batch is not one of the model's.
    Batch,
    /// The GPU count is above the largest measured one.
    Gpus,
}

/// One model's measured points: global batch → (GPUs, iterations/s), GPUs
/// ascending.
type Batches = BTreeMap<u32, Vec<(u32, f64)>>;

/// ElasticFlow's progress model for one GPU type (module docs).
#[derive(Clone, Debug)]
pub struct ElasticFlowModel {
    gpu: EfGpu,
    /// model → its points.
    apps: BTreeMap<String, Batches>,
}

impl ElasticFlowModel {
    /// The model of `tables`' rows for `gpu`.
    pub fn new(tables: &ElasticFlowTables, gpu: EfGpu) -> Self {
        let mut apps: BTreeMap<String, Batches> = BTreeMap::new();
        for r in tables.rows.iter().filter(|r| r.gpu == gpu) {
            apps.entry(r.model.clone()).or_default().entry(r.global_bsz).or_default().push((r.gpus, r.iters_per_s));
        }
        for batches in apps.values_mut() {
            for pts in batches.values_mut() {
                pts.sort_by_key(|p| p.0);
            }
        }
        ElasticFlowModel { gpu, apps }
    }

    /// The model of the compiled-in tables for `gpu`.
    pub fn builtin(gpu: EfGpu) -> Self {
        Self::new(&ElasticFlowTables::builtin(), gpu)
    }

    /// The GPU type whose tables it reads.
    pub fn gpu(&self) -> EfGpu {
        self.gpu
    }

    /// The batches of `app` (an optional `elasticflow:` prefix is ignored).
    fn batches(&self, app: &str) -> Result<&Batches, String> {
        let key = app.strip_prefix("elasticflow:").unwrap_or(app);
        self.apps.get(key).ok_or_else(|| {
            format!(
                "ElasticFlow has no {} throughputs of model `{app}`; its {} models are {}",
                self.gpu.name(),
                self.gpu.name(),
                self.apps.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// Iterations per second of `app` at global batch `batch` on `gpus`
    /// GPUs: the table's cell, or linear interpolation in the GPU count
    /// between the measured counts around `gpus` (module docs).
    ///
    /// # Errors
    /// An unknown model or batch, 0 GPUs, or more GPUs than the largest
    /// measured count.
    pub fn throughput(&self, app: &str, batch: u32, gpus: u32) -> Result<f64, String> {
        self.rate(app, batch, gpus).map_err(|(_, m)| m)
    }

    fn rate(&self, app: &str, batch: u32, gpus: u32) -> Result<f64, (EfField, String)> {
        let batches = self.batches(app).map_err(|m| (EfField::Model, m))?;
        let pts = batches.get(&batch).ok_or_else(|| {
            let known: Vec<String> = batches.keys().map(u32::to_string).collect();
            (
                EfField::Batch,
                format!(
                    "ElasticFlow measured `{app}` on {} at global batch {} only, not {batch}",
                    self.gpu.name(),
                    known.join(", ")
                ),
            )
        })?;
        let max = pts.last().map_or(0, |p| p.0);
        let too_many = || {
            (
                EfField::Gpus,
                format!(
                    "{gpus} GPUs: ElasticFlow measured `{app}` at global batch {batch} on {} on 1 to {max} GPUs",
                    self.gpu.name()
                ),
            )
        };
        if gpus == 0 || gpus > max {
            return Err(too_many());
        }
        match pts.binary_search_by_key(&gpus, |p| p.0) {
            Ok(i) => Ok(pts[i].1),
            // Between pts[i - 1] and pts[i] (i >= 1: every table has 1 GPU;
            // else the count is below the least measured one).
            Err(i) if i >= 1 && i < pts.len() => {
                let ((lo, vlo), (hi, vhi)) = (pts[i - 1], pts[i]);
                Ok(vlo + (vhi - vlo) * f64::from(gpus - lo) / f64::from(hi - lo))
            }
            Err(_) => Err(too_many()),
        }
    }

    /// Whether a job of `app` at global batch `batch` tuned to `gpus` GPUs
    /// can be rated: `Err` names the field at fault and why (for the
    /// error of the run's load, which names the trace file and line).
    ///
    /// # Errors
    /// As [`ElasticFlowModel::throughput`], with the field at fault.
    pub fn check_job(&self, app: &str, batch: u32, gpus: u32) -> Result<(), (EfField, String)> {
        self.rate(app, batch, gpus).map(|_| ())
    }

    /// The table batch `cfg` trains at (module docs: its total batch when
    /// the table has it, else the one table batch whose even split over its
    /// GPUs, rounded up, is its per-GPU batch).
    fn table_batch(&self, app: &str, cfg: &ElasticConfig) -> Result<u32, String> {
        let batches = self.batches(app)?;
        let total = cfg.total_batch();
        if let Some(&b) = batches.keys().find(|&&b| u64::from(b) == total) {
            return Ok(b);
        }
        let n = cfg.replicas().max(1);
        let split: Vec<u32> =
            batches.keys().copied().filter(|b| cfg.accum_steps == 0 && b.div_ceil(n) == cfg.atomic_bsz).collect();
        match split.as_slice() {
            [b] => Ok(*b),
            _ => Err(format!(
                "`{app}` on {n} GPUs at {} samples per GPU (× {} steps) is not one of ElasticFlow's global batches {} \
                 (ElasticFlow keeps a job's global batch)",
                cfg.atomic_bsz,
                cfg.accum_steps + 1,
                batches.keys().map(u32::to_string).collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

impl ProgressModel for ElasticFlowModel {
    fn name(&self) -> &'static str {
        "elasticflow"
    }

    /// No target per application: ElasticFlow's jobs carry their own work
    /// (`num_iteration`).
    fn target(&self, app: &str) -> Result<f64, String> {
        Err(format!(
            "the ElasticFlow model has no work target of its own for `{app}`: a job needs its iterations \
             (jobs-csv num_iteration)"
        ))
    }

    /// Iterations per second on `cfg` ([`ElasticFlowModel::throughput`] at
    /// the batch `cfg` trains at and its GPU count), whatever the progress.
    fn goodput(&self, app: &str, cfg: &ElasticConfig, _progress: f64) -> Result<f64, String> {
        let batch = self.table_batch(app, cfg)?;
        self.throughput(app, batch, cfg.replicas())
    }

    /// None: goodput is constant.
    fn next_breakpoint(&self, _app: &str, _progress: f64) -> f64 {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small table: x at batch 64 on 1, 2, 4, 8 GPUs; y at 10 and 20 on 1
    /// and 4 (not 2).
    fn toy() -> ElasticFlowModel {
        let text = "gpu_type,model,global_bsz,gpus,iters_per_s\n\
                    t4,x,64,1,2\nt4,x,64,2,3\nt4,x,64,4,5\nt4,x,64,8,6\n\
                    t4,y,10,1,1\nt4,y,10,4,2.5\nt4,y,20,1,0.5\na100,x,64,1,10\n";
        ElasticFlowModel::new(&ElasticFlowTables::parse(Path::new("toy.csv"), text).unwrap(), EfGpu::T4)
    }

    #[test]
    fn table_cells_and_interpolation() {
        let m = toy();
        assert_eq!(m.throughput("x", 64, 4), Ok(5.0));
        assert_eq!(m.throughput("elasticflow:x", 64, 1), Ok(2.0));
        // 3 GPUs: halfway between 2 (3 it/s) and 4 (5 it/s) = 4.
        assert_eq!(m.throughput("x", 64, 3), Ok(4.0));
        // 6 GPUs: 5 + (6 - 5) × (6 - 4) / (8 - 4) = 5.5.
        assert_eq!(m.throughput("x", 64, 6), Ok(5.5));
        // y at 10 on 2 GPUs: 1 + 1.5 × 1/3 = 1.5; on 3: 1 + 1.5 × 2/3 = 2.
        assert!((m.throughput("y", 10, 2).unwrap() - 1.5).abs() < 1e-15);
        assert_eq!(m.throughput("y", 10, 3), Ok(2.0));
        assert_eq!(m.check_job("x", 64, 9).unwrap_err().0, EfField::Gpus);
        assert_eq!(m.check_job("x", 64, 0).unwrap_err().0, EfField::Gpus);
        assert_eq!(m.check_job("x", 32, 1).unwrap_err().0, EfField::Batch);
        assert_eq!(m.check_job("z", 64, 1).unwrap_err().0, EfField::Model);
        // The A100 row belongs to the other model.
        assert_eq!(
            ElasticFlowModel::new(
                &ElasticFlowTables::parse(
                    Path::new("t"),
                    "gpu_type,model,global_bsz,gpus,iters_per_s\na100,x,64,1,10\n"
                )
                .unwrap(),
                EfGpu::A100
            )
            .throughput("x", 64, 1),
            Ok(10.0)
        );
    }

    #[test]
    fn goodput_at_the_configuration_batch() {
        let m = toy();
        let on = |per_node: &[u32], batch: u32| m.tuned_config("y", per_node, batch);
        // 10 on 4 GPUs: atomic ceil(10 / 4) = 3, total 12, the split of 10.
        assert_eq!(m.goodput("y", &on(&[4], 10), 0.0), Ok(2.5));
        // 20 on 1 GPU: total 20.
        assert_eq!(m.goodput("y", &on(&[1], 20), 5.0), Ok(0.5));
        // 20 on 4: 5 per GPU, total 20 (a table batch) but not measured on 4 GPUs.
        assert!(m.goodput("y", &on(&[4], 20), 0.0).is_err());
        // 16 per GPU on 1: no table batch.
        assert!(m.goodput("y", &ElasticConfig::even_split(&[1], 16), 0.0).is_err());
        assert!(m.target("y").is_err());
        assert_eq!(m.next_breakpoint("y", 3.0), f64::INFINITY);
        // Time to a target of 30 iterations at 2.5 it/s: 12 s.
        assert_eq!(m.time_to("y", &on(&[2, 2], 10), 0.0, 30.0), Ok(12.0));
    }

    #[test]
    fn builtin_tables_hold_elasticflow_cells() {
        let t = ElasticFlowTables::builtin();
        // 7 A100 files: 17 batches × 7 counts = 119 cells, less 9 zero
        // (resnet50_cifar10 on 16-64) and 1 empty (deepspeech2 32 on 64);
        // 6 T4 files: 9 batches × 7 = 63, less 3 nan.
        assert_eq!(t.rows.iter().filter(|r| r.gpu == EfGpu::A100).count(), 109);
        assert_eq!(t.rows.iter().filter(|r| r.gpu == EfGpu::T4).count(), 60);
        let t4 = ElasticFlowModel::new(&t, EfGpu::T4);
        // throughputs_T4/cifar10.csv, row 4096, column 1.
        assert_eq!(t4.throughput("cifar10", 4096, 1), Ok(0.3562865663863035));
        let a100 = ElasticFlowModel::new(&t, EfGpu::A100);
        // throughputs_A100/resnet50.csv, row 128, column 16.
        assert_eq!(a100.throughput("resnet50", 128, 16), Ok(20.15564728008105));
        assert_eq!(a100.check_job("resnet50_cifar10", 64, 16).unwrap_err().0, EfField::Gpus);
        assert_eq!(t4.check_job("yolov3", 64, 32).unwrap_err().0, EfField::Gpus);
        assert_eq!(t4.check_job("gpt2", 128, 1).unwrap_err().0, EfField::Model);
        // Written back byte for byte.
        assert_eq!(t.to_csv(), include_str!("data/elasticflow/throughputs.csv"));
    }

    #[test]
    fn parse_errors_name_line_and_column() {
        let bad = |body: &str| {
            let text = format!("{TABLE_HEADER}\n{body}\n");
            ElasticFlowTables::parse(Path::new("f.csv"), &text).unwrap_err().to_string()
        };
        assert!(bad("v100,x,64,1,2").starts_with("f.csv:2: column `gpu_type`"), "{}", bad("v100,x,64,1,2"));
        assert!(bad("t4,x,64,3,2").contains("column `gpus`"));
        assert!(bad("t4,x,64,1,-2").contains("column `iters_per_s`"));
        assert!(bad("t4,x,64,1,2\nt4,x,64,1,3").starts_with("f.csv:3:"));
    }
}
