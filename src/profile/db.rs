//! The calibrated profile database: measured iteration times by model, GPU
//! type, per-GPU batch and placement, co-location speeds, multi-node slowdowns
//! and per-model facts, derived from public measurements (Gavel, Pollux, Sia,
//! Chronus). Schemas, units, conversions and licences:
//! `src/profile/data/README.md`; the derivation: [`crate::profile::import`].
//!
//! The committed tables are compiled in ([`ProfileDb::builtin`]); a directory
//! holding the same four CSV files can replace them ([`ProfileDb::load_dir`]).
//! Nothing here is process-wide: a run holds its database as one
//! `Arc<ProfileDb>`, and runs that share databases (a sweep's) share a
//! [`ProfileSet`](super::set::ProfileSet), which parses each database once.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::path::Path;

use crate::error::TraceError;
use crate::io::csvrows::{LineCounter, csv_error};

/// File name of the throughput table (rows: [`ThroughputRow`]).
pub const THROUGHPUT_FILE: &str = "throughput.csv";
/// File name of the co-location table (rows: [`ColocRow`]).
pub const COLOCATION_FILE: &str = "colocation.csv";
/// File name of the multi-node table (rows: [`MultiNodeRow`]).
pub const MULTINODE_FILE: &str = "multinode.csv";
/// File name of the model table (rows: [`ModelInfo`]).
pub const MODELS_FILE: &str = "models.csv";
/// The four files of a profile directory, in a fixed order.
pub const FILES: [&str; 4] = [THROUGHPUT_FILE, COLOCATION_FILE, MULTINODE_FILE, MODELS_FILE];
/// The optional fifth table: GPU memory per model and per-GPU batch. The
/// builtin database has none (the only public measurements, Lucid's, are
/// licensed for non-commercial use); `dlsched profile import --include-lucid`
/// writes one into a directory of your own, loaded with `--profiles DIR`.
pub const MEMORY_FILE: &str = "memory.csv";

/// Header of `throughput.csv`.
const THROUGHPUT_COLUMNS: [&str; 7] = ["model", "gpu_type", "local_bsz", "gpus", "split", "iter_time_s", "source"];
/// Header of `colocation.csv`.
const COLOCATION_COLUMNS: [&str; 8] =
    ["gpu_type", "model_a", "bsz_a", "model_b", "bsz_b", "speed_a", "speed_b", "source"];
/// Header of `multinode.csv`.
const MULTINODE_COLUMNS: [&str; 5] = ["model", "gpus", "servers", "relative", "source"];
/// Header of `models.csv`.
const MODELS_COLUMNS: [&str; 8] = [
    "model",
    "family",
    "params_m",
    "gflops_per_sample",
    "source",
    "state_bytes_per_param",
    "act_mib_per_sample",
    "mem_source",
];
/// Columns of `memory.csv`.
const MEMORY_COLUMNS: [&str; 4] = ["model", "local_bsz", "gpu_mem_mib", "source"];

/// How a placement's GPUs are split over servers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    /// GPUs per server, sorted descending, e.g. `[2, 2]` (written `2+2`);
    /// `[n]` = all `n` GPUs on one server. Pollux/Sia placements, Gavel
    /// "consolidated" entries.
    Exact(Vec<u32>),
    /// Over more than one server, exact split not recorded (Gavel
    /// "unconsolidated" entries; written `spread`).
    Spread,
}

impl Split {
    /// An exact split from GPU counts per server in any order (sorted
    /// descending here; zero counts are dropped).
    pub fn from_counts(mut counts: Vec<u32>) -> Split {
        counts.retain(|&c| c > 0);
        counts.sort_unstable_by(|a, b| b.cmp(a));
        Split::Exact(counts)
    }

    /// Parses `4`, `2+2`, `3+2+1+1` (GPUs per server, descending) or `spread`.
    ///
    /// # Errors
    /// Empty text, a part that is not a whole number of at least 1, or parts
    /// not in descending order; the message says what to write instead.
    pub fn parse(s: &str) -> Result<Split, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("spread") {
            return Ok(Split::Spread);
        }
        if s.is_empty() {
            return Err("empty split; write GPUs per server as `2+2`, `4`, or `spread`".into());
        }
        let mut parts = Vec::new();
        for p in s.split('+') {
            match p.trim().parse::<u32>() {
                Ok(n) if n > 0 => parts.push(n),
                _ => {
                    return Err(format!(
                        "`{s}` is not a split; write GPUs per server joined by `+` (e.g. `2+2`, `4`), or `spread`"
                    ));
                }
            }
        }
        if parts.windows(2).any(|w| w[0] < w[1]) {
            let sorted = Split::from_counts(parts);
            return Err(format!("the parts of `{s}` are not in descending order; write `{sorted}`"));
        }
        Ok(Split::Exact(parts))
    }

    /// The number of GPUs of an exact split; `None` for [`Split::Spread`].
    pub fn gpus(&self) -> Option<u32> {
        match self {
            Split::Exact(v) => Some(v.iter().sum()),
            Split::Spread => None,
        }
    }

    /// The number of servers of an exact split; `None` for [`Split::Spread`].
    pub fn servers(&self) -> Option<u32> {
        match self {
            Split::Exact(v) => Some(v.len() as u32),
            Split::Spread => None,
        }
    }

    /// The order rows are written in: exact splits first, the most
    /// consolidated first (`4`, `3+1`, `2+2`, `2+1+1`, `1+1+1+1`), then `spread`.
    pub fn canonical_cmp(&self, other: &Split) -> Ordering {
        match (self, other) {
            (Split::Exact(a), Split::Exact(b)) => b.cmp(a),
            (Split::Exact(_), Split::Spread) => Ordering::Less,
            (Split::Spread, Split::Exact(_)) => Ordering::Greater,
            (Split::Spread, Split::Spread) => Ordering::Equal,
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Split::Spread => f.write_str("spread"),
            Split::Exact(v) => {
                for (i, n) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str("+")?;
                    }
                    write!(f, "{n}")?;
                }
                Ok(())
            }
        }
    }
}

/// One measured iteration time (`throughput.csv`). Sources: Gavel
/// (K80/P100/V100), Pollux (T4), Sia (V100, A100, RTX 2080 Ti, Quadro RTX 6000).
#[derive(Clone, Debug, PartialEq)]
pub struct ThroughputRow {
    /// Canonical model name, `architecture-dataset` (e.g. `resnet50-imagenet`).
    pub model: String,
    /// GPU type, lowercase (`k80`, `p100`, `v100`, `t4`, `a100`, `rtx2080ti`, `quadro6000`).
    pub gpu_type: String,
    /// Per-GPU batch, samples.
    pub local_bsz: u32,
    /// GPUs of the job (data-parallel workers), at least 1.
    pub gpus: u32,
    /// How the GPUs sit on servers; an exact split adds up to `gpus`.
    pub split: Split,
    /// Seconds per training iteration of the whole job (all GPUs step once), > 0.
    pub iter_time_s: f64,
    /// Where the number comes from: `gavel`, `pollux` or `sia` (see the data README).
    pub source: String,
}

/// Two single-GPU jobs sharing one GPU (`colocation.csv`). Source: Gavel's
/// pair measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct ColocRow {
    /// GPU type, lowercase.
    pub gpu_type: String,
    /// First job's model.
    pub model_a: String,
    /// First job's batch, samples.
    pub bsz_a: u32,
    /// Second job's model.
    pub model_b: String,
    /// Second job's batch, samples.
    pub bsz_b: u32,
    /// First job's throughput while sharing the GPU / its isolated throughput
    /// on that GPU type (1.0 = no slowdown), > 0.
    pub speed_a: f64,
    /// Second job's throughput while sharing / its isolated throughput, > 0.
    pub speed_b: f64,
    /// Where the numbers come from (`gavel`).
    pub source: String,
}

/// The slowdown of spreading a job's GPUs over servers (`multinode.csv`).
/// Source: Chronus's profiling table.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiNodeRow {
    /// Canonical model name.
    pub model: String,
    /// GPUs of the job, at least 1.
    pub gpus: u32,
    /// Servers the GPUs are spread over, 1 to `gpus`.
    pub servers: u32,
    /// Throughput relative to the same GPUs on one server (1.0 = no slowdown), > 0.
    pub relative: f64,
    /// Where the number comes from (`chronus`).
    pub source: String,
}

/// Static facts about a model (`models.csv`), from the original papers and
/// framework model zoos, or computed from the architecture (said in `source`).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// Canonical model name.
    pub model: String,
    /// Model family: `cnn`, `transformer`, `rnn`, `recsys`, `rl` or `gan`.
    pub family: String,
    /// Millions of parameters; NaN when unknown.
    pub params_m: f64,
    /// Forward + backward training GFLOPs per sample (≈ 3 × forward, one
    /// multiply-add = 2 FLOPs); NaN when unknown.
    pub gflops_per_sample: f64,
    /// Citation of the numbers, and what is estimated or unknown.
    pub source: String,
    /// Bytes of model state per parameter in fp32 training: weights,
    /// gradients and optimizer state (12 for SGD with momentum, 16 for Adam;
    /// ZeRO, Rajbhandari et al., SC'20), > 0. Input of the GPU memory estimate.
    pub state_bytes_per_param: f64,
    /// MiB of fp32 activations kept for the backward pass per sample, derived
    /// from the architecture (`src/profile/data/activations.py`); NaN when not
    /// derived (a fallback rule stands in, see
    /// [`ProfileDb::estimated_gpu_mem_mib`]).
    pub act_mib_per_sample: f64,
    /// How the two memory inputs were chosen or derived.
    pub mem_source: String,
}

/// CUDA context plus framework workspace on every GPU of a training job, MiB,
/// the constant term of [`ProfileDb::estimated_gpu_mem_mib`]: a bare PyTorch
/// CUDA context shows 781 MB in `nvidia-smi` (pytorch/pytorch issue #34323),
/// rounded up to 1 GiB for the cuDNN/cuBLAS workspaces and the caching
/// allocator's slack.
pub const FRAMEWORK_OVERHEAD_MIB: f64 = 1024.0;

/// An analytical per-GPU memory figure and which of its inputs were fallbacks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemEstimate {
    /// GPU memory of one GPU, MiB.
    pub mib: f64,
    /// The parameter count was unknown: the family median stood in.
    pub params_fallback: bool,
    /// The activation figure was unknown: GFLOPs × the family's median
    /// MiB-per-GFLOP, or the family's median MiB per sample, stood in.
    pub act_fallback: bool,
}

/// Where a GPU memory figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemSource {
    /// The optional measured table (`memory.csv`).
    Measured,
    /// The analytical estimate from `models.csv`.
    Estimated,
}

/// The profile database: four tables, each in the canonical order when read
/// from files written by [`ProfileDb::write_dir`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileDb {
    /// Measured iteration times.
    pub throughput: Vec<ThroughputRow>,
    /// Pairwise co-location speeds on one GPU.
    pub colocation: Vec<ColocRow>,
    /// Multi-server vs single-server throughput.
    pub multinode: Vec<MultiNodeRow>,
    /// One row per model named in the other tables.
    pub models: Vec<ModelInfo>,
    /// GPU memory per model and per-GPU batch (optional table; empty in the builtin).
    pub memory: Vec<MemoryRow>,
}

/// GPU memory one GPU of a data-parallel job uses.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryRow {
    /// Model name.
    pub model: String,
    /// Per-GPU batch, samples.
    pub local_bsz: u32,
    /// GPU memory in use, MiB.
    pub gpu_mem_mib: f64,
    /// Where the number comes from.
    pub source: String,
}

impl ProfileDb {
    /// GPU memory (MiB) one GPU of `model` at per-GPU batch `local_bsz` needs:
    /// the measured table's figure ([`ProfileDb::measured_gpu_mem_mib`]) when
    /// it has the model, else the analytical estimate
    /// ([`ProfileDb::estimated_gpu_mem_mib`]). `None` when neither knows the model.
    pub fn gpu_mem_mib(&self, model: &str, local_bsz: u32) -> Option<f64> {
        self.gpu_mem(model, local_bsz).map(|(m, _)| m)
    }

    /// [`ProfileDb::gpu_mem_mib`] with where the figure comes from.
    pub fn gpu_mem(&self, model: &str, local_bsz: u32) -> Option<(f64, MemSource)> {
        if let Some(m) = self.measured_gpu_mem_mib(model, local_bsz) {
            return Some((m, MemSource::Measured));
        }
        self.estimated_gpu_mem_mib(model, local_bsz).map(|e| (e.mib, MemSource::Estimated))
    }

    /// Measured GPU memory (MiB) from the optional table: the value at that
    /// batch, else linear in the batch between (or beyond) the two nearest
    /// measured batches, never below the smallest measurement; a model
    /// measured at one batch uses that value. `None` when the table has no
    /// row for the model.
    pub fn measured_gpu_mem_mib(&self, model: &str, local_bsz: u32) -> Option<f64> {
        let mut pts: Vec<(f64, f64)> =
            self.memory.iter().filter(|m| m.model == model).map(|m| (f64::from(m.local_bsz), m.gpu_mem_mib)).collect();
        if pts.is_empty() {
            return None;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let x = f64::from(local_bsz);
        if let Some(p) = pts.iter().find(|p| p.0 == x) {
            return Some(p.1);
        }
        if pts.len() == 1 {
            return Some(pts[0].1);
        }
        let i = pts.partition_point(|p| p.0 < x).clamp(1, pts.len() - 1);
        let ((x0, m0), (x1, m1)) = (pts[i - 1], pts[i]);
        let floor = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        Some((m0 + (m1 - m0) * (x - x0) / (x1 - x0)).max(floor))
    }

    /// Analytical training memory of one data-parallel GPU, MiB:
    ///
    /// `FRAMEWORK_OVERHEAD_MIB + params_m × 10⁶ × state_bytes_per_param / 2²⁰
    /// + local_bsz × act_mib_per_sample`
    ///
    /// (sources and derivations: `src/profile/data/README.md`, "GPU memory
    /// estimate"). Fallbacks, flagged in the result: an unknown parameter
    /// count takes the median of the known ones of the model's family (of all
    /// models if the family has none); an unknown activation figure takes
    /// GFLOPs per sample × the median ratio activation MiB / GFLOPs of the
    /// family's models that have both, else the family's median activation
    /// MiB per sample (of all models if the family has none). `None` when
    /// `models.csv` has no row for the model.
    pub fn estimated_gpu_mem_mib(&self, model: &str, local_bsz: u32) -> Option<MemEstimate> {
        let info = self.model_info(model)?;
        let family: Vec<&ModelInfo> = self.models.iter().filter(|m| m.family == info.family).collect();
        let median_of = |f: &dyn Fn(&ModelInfo) -> f64| -> f64 {
            let mut v: Vec<f64> = family.iter().map(|m| f(m)).filter(|x| x.is_finite()).collect();
            if v.is_empty() {
                v = self.models.iter().map(f).filter(|x| x.is_finite()).collect();
            }
            median(&mut v).unwrap_or(0.0)
        };
        let params_fallback = !info.params_m.is_finite();
        let params_m = if params_fallback { median_of(&|m| m.params_m) } else { info.params_m };
        let act_fallback = !info.act_mib_per_sample.is_finite();
        let act = if !act_fallback {
            info.act_mib_per_sample
        } else if info.gflops_per_sample.is_finite() {
            let mut ratios: Vec<f64> =
                family.iter().map(|m| m.act_mib_per_sample / m.gflops_per_sample).filter(|x| x.is_finite()).collect();
            match median(&mut ratios) {
                Some(r) => info.gflops_per_sample * r,
                None => median_of(&|m| m.act_mib_per_sample),
            }
        } else {
            median_of(&|m| m.act_mib_per_sample)
        };
        let state = params_m * 1e6 * info.state_bytes_per_param / (1024.0 * 1024.0);
        Some(MemEstimate {
            mib: FRAMEWORK_OVERHEAD_MIB + state + f64::from(local_bsz) * act,
            params_fallback,
            act_fallback,
        })
    }
}

/// A tenant of a shared GPU: (model, per-GPU batch).
pub type Tenant<'a> = (&'a str, u32);

/// The median (mean of the two middle values for an even count); `None` for none.
fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

impl ProfileDb {
    /// The committed default tables (`src/profile/data/*.csv`), compiled in and
    /// parsed anew at each call (some 10 ms: a run parses them once, only when
    /// it reads them, and shares the result as an `Arc`; runs that share
    /// databases go through a [`ProfileSet`](super::set::ProfileSet)). They are checked by the tests,
    /// so a parse failure here is a build defect and panics with the file,
    /// line and column.
    pub fn builtin() -> ProfileDb {
        let dir = Path::new("src/profile/data");
        let texts = [
            include_str!("data/throughput.csv"),
            include_str!("data/colocation.csv"),
            include_str!("data/multinode.csv"),
            include_str!("data/models.csv"),
        ];
        ProfileDb::parse(dir, texts.map(str::as_bytes)).unwrap_or_else(|e| {
            panic!("the builtin profile database is invalid: {e} (regenerate it with `dlsched profile import`)")
        })
    }

    /// Reads `throughput.csv`, `colocation.csv`, `multinode.csv` and
    /// `models.csv` from `dir` (schemas in `src/profile/data/README.md`).
    ///
    /// # Errors
    /// A missing or unreadable file ([`TraceError::Io`]), an empty file or a
    /// missing column ([`TraceError::Format`]), a row with the wrong number of
    /// fields ([`TraceError::Row`]), or a bad value ([`TraceError::Field`],
    /// naming file, 1-based line and column).
    pub fn load_dir(dir: &Path) -> Result<ProfileDb, TraceError> {
        let mut bytes: Vec<Vec<u8>> = Vec::with_capacity(FILES.len());
        for name in FILES {
            let file = dir.join(name);
            bytes.push(crate::io::read_csv(&file)?);
        }
        let mut db = ProfileDb::parse(dir, [&bytes[0][..], &bytes[1][..], &bytes[2][..], &bytes[3][..]])?;
        let memory = dir.join(MEMORY_FILE);
        if memory.exists() {
            let b = crate::io::read_csv(&memory)?;
            db.memory = parse_memory(&memory, &b)?;
        }
        Ok(db)
    }

    /// Parses the four files' contents (in [`FILES`] order); `dir` names them in errors.
    fn parse(dir: &Path, bytes: [&[u8]; 4]) -> Result<ProfileDb, TraceError> {
        Ok(ProfileDb {
            throughput: parse_throughput(&dir.join(THROUGHPUT_FILE), bytes[0])?,
            colocation: parse_colocation(&dir.join(COLOCATION_FILE), bytes[1])?,
            multinode: parse_multinode(&dir.join(MULTINODE_FILE), bytes[2])?,
            models: parse_models(&dir.join(MODELS_FILE), bytes[3])?,
            memory: Vec::new(),
        })
    }

    /// Writes the four CSV files into `dir` (created if needed): rows in the
    /// canonical order whatever the order in memory, numbers with 6
    /// significant digits (trailing zeros dropped, `NaN` for unknown), `\n`
    /// line ends. The same database always gives the same bytes. A
    /// `memory.csv` is written when the database has memory rows, and an
    /// older one is removed when it has none.
    ///
    /// Every file is first written beside its final name (`.NAME.tmp`) and
    /// renamed into place only when all were written, so a failed write
    /// leaves the directory's previous database whole.
    ///
    /// # Errors
    /// The directory cannot be created or a file cannot be written.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut files: Vec<(&str, Vec<u8>)> = FILES.iter().copied().zip(self.to_csv()?).collect();
        if !self.memory.is_empty() {
            let mut rows = self.memory.clone();
            rows.sort_by(|a, b| (&a.model, a.local_bsz, &a.source).cmp(&(&b.model, b.local_bsz, &b.source)));
            let mut w = csv_writer();
            w.write_record(MEMORY_COLUMNS)?;
            for r in &rows {
                w.write_record([r.model.as_str(), &r.local_bsz.to_string(), &fmt_num(r.gpu_mem_mib), &r.source])?;
            }
            files.push((MEMORY_FILE, w.into_inner().map_err(|e| e.into_error())?));
        }
        let tmp = |name: &str| dir.join(format!(".{name}.tmp"));
        for (name, bytes) in &files {
            if let Err(e) = std::fs::write(tmp(name), bytes) {
                for (n, _) in &files {
                    let _ = std::fs::remove_file(tmp(n));
                }
                return Err(e);
            }
        }
        for (name, _) in &files {
            std::fs::rename(tmp(name), dir.join(name))?;
        }
        if self.memory.is_empty() {
            match std::fs::remove_file(dir.join(MEMORY_FILE)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// The four files' contents, in [`FILES`] order, as [`ProfileDb::write_dir`] writes them.
    ///
    /// # Errors
    /// Only if the CSV writer fails (it writes to memory).
    pub fn to_csv(&self) -> std::io::Result<[Vec<u8>; 4]> {
        let mut sorted = self.clone();
        sorted.sort();
        let mut t = csv_writer();
        t.write_record(THROUGHPUT_COLUMNS)?;
        for r in &sorted.throughput {
            t.write_record([
                r.model.as_str(),
                &r.gpu_type,
                &r.local_bsz.to_string(),
                &r.gpus.to_string(),
                &r.split.to_string(),
                &fmt_num(r.iter_time_s),
                &r.source,
            ])?;
        }
        let mut c = csv_writer();
        c.write_record(COLOCATION_COLUMNS)?;
        for r in &sorted.colocation {
            c.write_record([
                r.gpu_type.as_str(),
                &r.model_a,
                &r.bsz_a.to_string(),
                &r.model_b,
                &r.bsz_b.to_string(),
                &fmt_num(r.speed_a),
                &fmt_num(r.speed_b),
                &r.source,
            ])?;
        }
        let mut m = csv_writer();
        m.write_record(MULTINODE_COLUMNS)?;
        for r in &sorted.multinode {
            m.write_record([
                r.model.as_str(),
                &r.gpus.to_string(),
                &r.servers.to_string(),
                &fmt_num(r.relative),
                &r.source,
            ])?;
        }
        let mut i = csv_writer();
        i.write_record(MODELS_COLUMNS)?;
        for r in &sorted.models {
            i.write_record([
                r.model.as_str(),
                &r.family,
                &fmt_num(r.params_m),
                &fmt_num(r.gflops_per_sample),
                &r.source,
                &fmt_num(r.state_bytes_per_param),
                &fmt_num(r.act_mib_per_sample),
                &r.mem_source,
            ])?;
        }
        let done = |w: csv::Writer<Vec<u8>>| w.into_inner().map_err(|e| std::io::Error::other(e.to_string()));
        Ok([done(t)?, done(c)?, done(m)?, done(i)?])
    }

    /// Puts every table in the canonical order (stable): throughput by (model,
    /// GPU type, batch, GPUs, split, source); co-location by (GPU type, model
    /// a, batch a, model b, batch b, source); multi-node by (model, GPUs,
    /// servers, source); models by name.
    pub fn sort(&mut self) {
        self.throughput.sort_by(|a, b| {
            (&a.model, &a.gpu_type, a.local_bsz, a.gpus)
                .cmp(&(&b.model, &b.gpu_type, b.local_bsz, b.gpus))
                .then_with(|| a.split.canonical_cmp(&b.split))
                .then_with(|| a.source.cmp(&b.source))
        });
        self.colocation.sort_by(|a, b| {
            (&a.gpu_type, &a.model_a, a.bsz_a, &a.model_b, a.bsz_b, &a.source).cmp(&(
                &b.gpu_type,
                &b.model_a,
                b.bsz_a,
                &b.model_b,
                b.bsz_b,
                &b.source,
            ))
        });
        self.multinode
            .sort_by(|a, b| (&a.model, a.gpus, a.servers, &a.source).cmp(&(&b.model, b.gpus, b.servers, &b.source)));
        self.models.sort_by(|a, b| a.model.cmp(&b.model));
    }

    /// Distinct model names named anywhere in the database, sorted.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        let mut names: BTreeSet<&str> = BTreeSet::new();
        names.extend(self.throughput.iter().map(|r| r.model.as_str()));
        names.extend(self.colocation.iter().flat_map(|r| [r.model_a.as_str(), r.model_b.as_str()]));
        names.extend(self.multinode.iter().map(|r| r.model.as_str()));
        names.extend(self.models.iter().map(|r| r.model.as_str()));
        names.into_iter()
    }

    /// The `models.csv` row of `model`, if any.
    pub fn model_info(&self, model: &str) -> Option<&ModelInfo> {
        self.models.iter().find(|m| m.model == model)
    }

    /// Model names used in the throughput, co-location or multi-node tables
    /// that have no `models.csv` row, sorted (empty for a consistent database).
    pub fn models_without_info(&self) -> Vec<&str> {
        let known: BTreeSet<&str> = self.models.iter().map(|m| m.model.as_str()).collect();
        let mut used: BTreeSet<&str> = BTreeSet::new();
        used.extend(self.throughput.iter().map(|r| r.model.as_str()));
        used.extend(self.colocation.iter().flat_map(|r| [r.model_a.as_str(), r.model_b.as_str()]));
        used.extend(self.multinode.iter().map(|r| r.model.as_str()));
        used.into_iter().filter(|m| !known.contains(m)).collect()
    }
}

fn csv_writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new())
}

/// Formats a number as the tables store it: 6 significant digits in plain
/// decimal notation, trailing zeros (and a trailing `.`) dropped; `NaN` for
/// NaN. Formatting the parsed result again gives the same text.
pub fn fmt_num(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let e = format!("{x:.5e}"); // d.ddddde<exp>, correctly rounded
    let (mantissa, exp) = e.split_once('e').expect("`{:e}` output has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let rounded: f64 = format!("{mantissa}e{exp}").parse().expect("`{:e}` output parses");
    let decimals = usize::try_from(5 - exp).unwrap_or(0);
    let mut s = format!("{rounded:.decimals$}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    s
}

/// `x` rounded as [`fmt_num`] writes it (so a database built in memory equals
/// the one read back from its files).
pub fn round_num(x: f64) -> f64 {
    if x.is_finite() { fmt_num(x).parse().unwrap_or(x) } else { x }
}

// ---------------------------------------------------------------------------
// Reading

/// One data row of a table, with its requested columns resolved.
pub(crate) struct Rec<'a> {
    file: &'a Path,
    /// 1-based line of the row in the file.
    pub line: u64,
    rec: &'a csv::StringRecord,
    /// Index in the record of each requested column.
    idx: &'a [usize],
    names: &'a [&'a str],
}

impl Rec<'_> {
    /// The trimmed text of requested column `c`.
    pub fn str(&self, c: usize) -> &str {
        self.rec.get(self.idx[c]).unwrap_or("").trim()
    }

    /// A [`TraceError::Field`] for requested column `c`.
    pub fn err(&self, c: usize, message: String) -> TraceError {
        TraceError::Field { file: self.file.to_path_buf(), line: self.line, column: self.names[c].to_string(), message }
    }

    /// Non-empty text.
    pub fn text(&self, c: usize, what: &str) -> Result<String, TraceError> {
        let s = self.str(c);
        if s.is_empty() {
            return Err(self.err(c, format!("empty {what}")));
        }
        Ok(s.to_string())
    }

    /// A whole number of at least 1.
    pub fn pos_u32(&self, c: usize, what: &str) -> Result<u32, TraceError> {
        let s = self.str(c);
        match s.parse::<u32>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(self.err(c, format!("`{s}` is not a whole number of {what} of at least 1"))),
        }
    }

    /// A finite number greater than 0.
    pub fn pos_f64(&self, c: usize, what: &str) -> Result<f64, TraceError> {
        let s = self.str(c);
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => Err(self.err(c, format!("`{s}` is not a finite number of {what} greater than 0"))),
        }
    }

    /// A finite number greater than 0, or `NaN` (unknown).
    pub fn pos_f64_or_nan(&self, c: usize, what: &str) -> Result<f64, TraceError> {
        if self.str(c).eq_ignore_ascii_case("nan") {
            return Ok(f64::NAN);
        }
        self.pos_f64(c, what).map_err(|_| {
            self.err(
                c,
                format!("`{}` is not a finite number of {what} greater than 0, nor `NaN` (unknown)", self.str(c)),
            )
        })
    }
}

/// Reads a CSV with a header from `bytes`, resolving `columns` by name (case
/// insensitive, any order, extra columns ignored) and calling `f` per row.
///
/// # Errors
/// An empty file or a missing column ([`TraceError::Format`]), a column named
/// twice ([`TraceError::Field`] on line 1), malformed CSV or a wrong number of
/// fields ([`TraceError::Row`]), or the first error of `f`.
pub(crate) fn read_csv(
    file: &Path,
    bytes: &[u8],
    columns: &[&str],
    mut f: impl FnMut(&Rec<'_>) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let format = |message: String| TraceError::Format { file: file.to_path_buf(), message };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(format("the file is empty (no header line)".into()));
    }
    let mut lines = LineCounter::new(bytes);
    let row_err = |e: &csv::Error, lines: &mut LineCounter<'_>| csv_error(file, e, lines);
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let header: Vec<String> = match rdr.headers() {
        Ok(h) => h
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let n = n.trim();
                if i == 0 { n.trim_start_matches('\u{feff}').trim() } else { n }.to_string()
            })
            .collect(),
        Err(e) if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) => {
            return Err(format("the header line is not UTF-8 text (a binary or compressed file?)".into()));
        }
        Err(e) => return Err(row_err(&e, &mut lines)),
    };
    for (i, n) in header.iter().enumerate() {
        if !n.is_empty() && header[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
            return Err(TraceError::Field {
                file: file.to_path_buf(),
                line: 1,
                column: n.clone(),
                message: "the column appears twice in the header".into(),
            });
        }
    }
    let mut idx = Vec::with_capacity(columns.len());
    for c in columns {
        match header.iter().position(|h| h.eq_ignore_ascii_case(c)) {
            Some(i) => idx.push(i),
            None => {
                return Err(format(format!(
                    "no column `{c}` in the header ({}); expected {}",
                    header.join(","),
                    columns.join(",")
                )));
            }
        }
    }
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                let line = lines.line_at(rec.position().map_or(0, |p| p.byte() as usize));
                f(&Rec { file, line, rec: &rec, idx: &idx, names: columns })?;
            }
            Err(e) => return Err(row_err(&e, &mut lines)),
        }
    }
}

/// An error if `key` was seen before in this file.
fn check_unique<K: std::hash::Hash + Eq>(
    seen: &mut HashSet<K>,
    key: K,
    r: &Rec<'_>,
    col: usize,
) -> Result<(), TraceError> {
    if seen.insert(key) {
        Ok(())
    } else {
        Err(r.err(col, "the same key (all columns but the measured values) appears on an earlier line".into()))
    }
}

fn parse_throughput(file: &Path, bytes: &[u8]) -> Result<Vec<ThroughputRow>, TraceError> {
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    read_csv(file, bytes, &THROUGHPUT_COLUMNS, |r| {
        let model = r.text(0, "model name")?;
        let gpu_type = r.text(1, "GPU type")?;
        let local_bsz = r.pos_u32(2, "samples")?;
        let gpus = r.pos_u32(3, "GPUs")?;
        let split = Split::parse(r.str(4)).map_err(|m| r.err(4, m))?;
        match split.gpus() {
            Some(n) if n != gpus => {
                return Err(r.err(4, format!("the split `{split}` adds up to {n} GPUs but `gpus` is {gpus}")));
            }
            None if gpus < 2 => {
                return Err(r.err(4, format!("`spread` needs at least 2 GPUs but `gpus` is {gpus}")));
            }
            _ => {}
        }
        let iter_time_s = r.pos_f64(5, "seconds")?;
        let source = r.text(6, "source")?;
        check_unique(
            &mut seen,
            (model.clone(), gpu_type.clone(), local_bsz, gpus, split.clone(), source.clone()),
            r,
            4,
        )?;
        rows.push(ThroughputRow { model, gpu_type, local_bsz, gpus, split, iter_time_s, source });
        Ok(())
    })?;
    Ok(rows)
}

fn parse_colocation(file: &Path, bytes: &[u8]) -> Result<Vec<ColocRow>, TraceError> {
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    read_csv(file, bytes, &COLOCATION_COLUMNS, |r| {
        let row = ColocRow {
            gpu_type: r.text(0, "GPU type")?,
            model_a: r.text(1, "model name")?,
            bsz_a: r.pos_u32(2, "samples")?,
            model_b: r.text(3, "model name")?,
            bsz_b: r.pos_u32(4, "samples")?,
            speed_a: r.pos_f64(5, "relative speed")?,
            speed_b: r.pos_f64(6, "relative speed")?,
            source: r.text(7, "source")?,
        };
        let key =
            (row.gpu_type.clone(), row.model_a.clone(), row.bsz_a, row.model_b.clone(), row.bsz_b, row.source.clone());
        check_unique(&mut seen, key, r, 3)?;
        rows.push(row);
        Ok(())
    })?;
    Ok(rows)
}

fn parse_multinode(file: &Path, bytes: &[u8]) -> Result<Vec<MultiNodeRow>, TraceError> {
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    read_csv(file, bytes, &MULTINODE_COLUMNS, |r| {
        let model = r.text(0, "model name")?;
        let gpus = r.pos_u32(1, "GPUs")?;
        let servers = r.pos_u32(2, "servers")?;
        if servers > gpus {
            return Err(r.err(2, format!("{servers} servers for {gpus} GPUs; a server holds at least one GPU")));
        }
        let relative = r.pos_f64(3, "relative throughput")?;
        let source = r.text(4, "source")?;
        check_unique(&mut seen, (model.clone(), gpus, servers, source.clone()), r, 2)?;
        rows.push(MultiNodeRow { model, gpus, servers, relative, source });
        Ok(())
    })?;
    Ok(rows)
}

fn parse_models(file: &Path, bytes: &[u8]) -> Result<Vec<ModelInfo>, TraceError> {
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    read_csv(file, bytes, &MODELS_COLUMNS, |r| {
        let model = r.text(0, "model name")?;
        if !seen.insert(model.clone()) {
            return Err(r.err(0, format!("model `{model}` appears on an earlier line")));
        }
        rows.push(ModelInfo {
            model,
            family: r.text(1, "family")?,
            params_m: r.pos_f64_or_nan(2, "millions of parameters")?,
            gflops_per_sample: r.pos_f64_or_nan(3, "GFLOPs per sample")?,
            source: r.text(4, "source")?,
            state_bytes_per_param: r.pos_f64(5, "bytes per parameter")?,
            act_mib_per_sample: r.pos_f64_or_nan(6, "MiB per sample")?,
            mem_source: r.text(7, "memory source")?,
        });
        Ok(())
    })?;
    Ok(rows)
}

fn parse_memory(file: &Path, bytes: &[u8]) -> Result<Vec<MemoryRow>, TraceError> {
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    read_csv(file, bytes, &MEMORY_COLUMNS, |r| {
        let row = MemoryRow {
            model: r.text(0, "model name")?,
            local_bsz: r.pos_u32(1, "samples")?,
            gpu_mem_mib: r.pos_f64(2, "MiB")?,
            source: r.text(3, "source")?,
        };
        check_unique(&mut seen, (row.model.clone(), row.local_bsz, row.source.clone()), r, 1)?;
        rows.push(row);
        Ok(())
    })?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(e: TraceError) -> (String, u64, String, String) {
        match e {
            TraceError::Field { file, line, column, message } => {
                (file.file_name().unwrap().to_string_lossy().into_owned(), line, column, message)
            }
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn split_parses_writes_and_orders() {
        assert_eq!(Split::parse("2+2"), Ok(Split::Exact(vec![2, 2])));
        assert_eq!(Split::parse("4"), Ok(Split::Exact(vec![4])));
        assert_eq!(Split::parse("spread"), Ok(Split::Spread));
        assert!(Split::parse("1+3").unwrap_err().contains("write `3+1`"));
        assert!(Split::parse("2+0").is_err());
        assert!(Split::parse("2x2").is_err());
        assert!(Split::parse("").is_err());
        assert_eq!(Split::from_counts(vec![1, 1, 3, 2]).to_string(), "3+2+1+1");
        assert_eq!(Split::Exact(vec![3, 2, 1, 1]).gpus(), Some(7));
        assert_eq!(Split::Exact(vec![3, 2, 1, 1]).servers(), Some(4));
        let mut v = [
            Split::Spread,
            Split::Exact(vec![1, 1, 1, 1]),
            Split::Exact(vec![2, 2]),
            Split::Exact(vec![4]),
            Split::Exact(vec![2, 1, 1]),
            Split::Exact(vec![3, 1]),
        ];
        v.sort_by(Split::canonical_cmp);
        let s: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(s, ["4", "3+1", "2+2", "2+1+1", "1+1+1+1", "spread"]);
    }

    #[test]
    fn numbers_have_six_significant_digits_and_round_trip() {
        assert_eq!(fmt_num(0.0427886962890625), "0.0427887");
        assert_eq!(fmt_num(1.0), "1");
        assert_eq!(fmt_num(123456.7), "123457");
        assert_eq!(fmt_num(1234567.0), "1234570");
        assert_eq!(fmt_num(9.999996), "10");
        assert_eq!(fmt_num(0.5), "0.5");
        assert_eq!(fmt_num(f64::NAN), "NaN");
        for x in [0.0427886962890625, 3.0 / 7.0, 1e-7 / 3.0, 98765.4321, 2.5e9 / 3.0] {
            let s = fmt_num(x);
            assert_eq!(fmt_num(s.parse().unwrap()), s);
            assert_eq!(round_num(x), s.parse::<f64>().unwrap());
        }
    }

    #[test]
    fn rows_are_validated_with_line_and_column() {
        let p = Path::new("d/throughput.csv");
        let head = "model,gpu_type,local_bsz,gpus,split,iter_time_s,source\n";
        let ok = format!("{head}m,t4,32,4,2+2,0.5,pollux\nm,t4,32,4,spread,0.6,gavel\n");
        let rows = parse_throughput(p, ok.as_bytes()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].split, Split::Exact(vec![2, 2]));
        for (row, column, needle) in [
            ("m,t4,32,4,2+1,0.5,x", "split", "adds up to 3"),
            ("m,t4,32,1,spread,0.5,x", "split", "at least 2 GPUs"),
            ("m,t4,32,0,,0.5,x", "gpus", "at least 1"),
            ("m,t4,32,2,2,0,x", "iter_time_s", "greater than 0"),
            ("m,t4,32,2,2,inf,x", "iter_time_s", "finite"),
            ("m,t4,32,2,2,NaN,x", "iter_time_s", "finite"),
            ("m,t4,32,2,1+1+,0.5,x", "split", "not a split"),
            ("m,t4,-1,2,2,0.5,x", "local_bsz", "at least 1"),
            ("m,t4,32,2,2,0.5,", "source", "empty"),
        ] {
            let text = format!("{head}m,t4,8,1,1,0.1,x\n{row}\n");
            let (f, line, col, msg) = field(parse_throughput(p, text.as_bytes()).unwrap_err());
            assert_eq!((f.as_str(), line, col.as_str()), ("throughput.csv", 3, column), "{row}: {msg}");
            assert!(msg.contains(needle), "{row}: {msg}");
        }
        let dup = format!("{head}m,t4,32,4,2+2,0.5,x\nm,t4,32,4,2+2,0.7,x\n");
        assert_eq!(field(parse_throughput(p, dup.as_bytes()).unwrap_err()).1, 3);
    }

    #[test]
    fn wrong_field_count_and_missing_column_are_reported() {
        let p = Path::new("d/multinode.csv");
        let text = "model,gpus,servers,relative,source\nm,4,2,0.9,c\n\nm,4,4,0.8\n";
        match parse_multinode(p, text.as_bytes()).unwrap_err() {
            TraceError::Row { line, message, .. } => {
                assert_eq!(line, 4);
                assert!(message.contains("4 fields"), "{message}");
            }
            e => panic!("{e:?}"),
        }
        match parse_multinode(p, b"model,gpus,relative,source\nm,4,0.9,c\n").unwrap_err() {
            TraceError::Format { message, .. } => assert!(message.contains("`servers`"), "{message}"),
            e => panic!("{e:?}"),
        }
        let (_, line, col, _) =
            field(parse_multinode(p, b"model,gpus,servers,relative,source\nm,2,4,0.9,c\n").unwrap_err());
        assert_eq!((line, col.as_str()), (2, "servers"));
        assert!(matches!(parse_multinode(p, b"").unwrap_err(), TraceError::Format { .. }));
    }

    #[test]
    fn models_accept_nan_and_reject_duplicates() {
        let p = Path::new("d/models.csv");
        let rows =
            parse_models(p, b"model,family,params_m,gflops_per_sample,source,state_bytes_per_param,act_mib_per_sample,mem_source\na,cnn,1.5,NaN,\"x, y\",16,NaN,h\n").unwrap();
        assert!(rows[0].gflops_per_sample.is_nan());
        assert_eq!(rows[0].source, "x, y");
        let e =
            parse_models(p, b"model,family,params_m,gflops_per_sample,source,state_bytes_per_param,act_mib_per_sample,mem_source\na,cnn,1,2,x,12,1,h\na,cnn,1,2,x,12,1,h\n").unwrap_err();
        assert_eq!(field(e).1, 3);
        let e = parse_models(p, b"model,family,params_m,gflops_per_sample,source,state_bytes_per_param,act_mib_per_sample,mem_source\na,cnn,-1,2,x,12,1,h\n").unwrap_err();
        assert_eq!(field(e).2, "params_m");
    }

    #[test]
    fn write_then_load_round_trips() {
        let mut db = ProfileDb {
            throughput: vec![
                ThroughputRow {
                    model: "m".into(),
                    gpu_type: "t4".into(),
                    local_bsz: 32,
                    gpus: 4,
                    split: Split::Spread,
                    iter_time_s: round_num(1.0 / 3.0),
                    source: "gavel".into(),
                },
                ThroughputRow {
                    model: "m".into(),
                    gpu_type: "t4".into(),
                    local_bsz: 32,
                    gpus: 4,
                    split: Split::Exact(vec![2, 2]),
                    iter_time_s: 0.25,
                    source: "pollux".into(),
                },
            ],
            colocation: vec![ColocRow {
                gpu_type: "k80".into(),
                model_a: "m".into(),
                bsz_a: 16,
                model_b: "m".into(),
                bsz_b: 32,
                speed_a: 0.5,
                speed_b: 0.75,
                source: "gavel".into(),
            }],
            multinode: vec![MultiNodeRow { model: "m".into(), gpus: 4, servers: 2, relative: 0.9, source: "c".into() }],
            models: vec![ModelInfo {
                model: "m".into(),
                family: "cnn".into(),
                params_m: 11.2,
                gflops_per_sample: f64::NAN,
                source: "a, b".into(),
                state_bytes_per_param: 12.0,
                act_mib_per_sample: f64::NAN,
                mem_source: "hand".into(),
            }],
            memory: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        db.write_dir(dir.path()).unwrap();
        let back = ProfileDb::load_dir(dir.path()).unwrap();
        db.sort();
        assert_eq!(back.throughput, db.throughput);
        assert_eq!(back.throughput[0].split, Split::Exact(vec![2, 2])); // exact before spread
        assert_eq!(back.colocation, db.colocation);
        assert_eq!(back.multinode, db.multinode);
        assert!(back.models[0].gflops_per_sample.is_nan());
        assert_eq!(back.models().collect::<Vec<_>>(), ["m"]);
        assert!(back.models_without_info().is_empty());
        let again = tempfile::tempdir().unwrap();
        back.write_dir(again.path()).unwrap();
        for f in FILES {
            assert_eq!(std::fs::read(dir.path().join(f)).unwrap(), std::fs::read(again.path().join(f)).unwrap());
        }
        // Memory rows add memory.csv; writing a database without them again
        // removes it, and no temporary file is left behind.
        let mut with_mem = back.clone();
        with_mem.memory =
            vec![MemoryRow { model: "m".into(), local_bsz: 8, gpu_mem_mib: 1500.0, source: "hand".into() }];
        with_mem.write_dir(again.path()).unwrap();
        assert!(again.path().join(MEMORY_FILE).exists());
        back.write_dir(again.path()).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(again.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut want: Vec<String> = FILES.iter().map(|f| f.to_string()).collect();
        want.sort();
        assert_eq!(names, want);
    }
}
