//! Sia's heterogeneous application model: the Pollux application model
//! ([`crate::profile::pollux`]) of each GPU type Sia measured, as the Sia
//! artifact's simulator uses it (Jayaram Subramanya et al., *Sia:
//! Heterogeneity-aware, goodput-optimized ML-cluster scheduling*, SOSP 2023;
//! siasosp23/artifacts @ aaf7a0de, `sia-simulator/applications.py`,
//! `job.py`, `simulator_config.py`).
//!
//! # The model
//!
//! - **Per GPU type**, an application is the Pollux simulator's
//!   `Application` built from that type's measurements
//!   (`placements-<suffix>.csv`, `scalability-<suffix>.csv`): throughput by
//!   the same interpolation rules, on scipy's triangulation of that type's
//!   points. Its statistical efficiency (the validation traces), epochs and
//!   target are shared by every type: the artifact's traces directory has one
//!   set of `validation-*.csv` per application, Pollux's.
//! - **Limits** (`Application.__init__` with `cluster_suffix`): initial and
//!   largest batch = least and largest validated batch (shared); per-GPU
//!   batch range = the type's measured range, except deepspeech2 on `rtx`
//!   (max 57, the artifact's own line). Unlike the Pollux simulator, Sia sets
//!   no yolov3 cap of 8: its yolov3 takes the measured maximum on every type.
//! - **A job's GPU type** is [`ElasticConfig::gpu_type`], an index into the
//!   run's cluster's GPU type names (`Cluster::gpu_type_names`), mapped to a
//!   Sia type once per run ([`SiaModel::for_gpu_types`]); a job whose GPUs
//!   span types ([`MIXED_GPU_TYPES`]) or an index the model does not know is
//!   an error: Sia places a job on one type.
//! - **Goodput** = the Pollux goodput on the job's type × the Sia
//!   simulator's calibration factor `1 / SLOWDOWNS[app]`
//!   ([`calibration_factor`]: cifar10 1/1.8, ncf 1/1.5, the others 1/1.2),
//!   which its `Job.step` applies to every job's true goodput whatever the
//!   policy ("calibration step to account for real-world runs being slower
//!   than simulator"); so do we, under every policy. [`ProgressModel::step_times`]
//!   and [`ProgressModel::grad_stats`] are the tables' own, uncalibrated: the
//!   artifact's jobs profile themselves with them (`update_params`).
//! - **Tuned configuration** (a job launched with its tuned batch):
//!   `update_local_bsz` with a target batch ([`SiaModel::tuned_config_on`]).
//! - **Re-scale delay**: per application, `rescale_time` of
//!   `applications.py` (bert 120 s, cifar10 50, deepspeech2 25, imagenet
//!   250, ncf 15, yolov3 80; 30 s otherwise), through
//!   [`ProgressModel::rescale_delay_ms`].
//!
//! What this model leaves out: `gpt_pmp` (pipeline-parallel GPT, rtx and
//! dgx-ext only), the `dgx` type (few batch sizes; the artifact's clusters use
//! `dgx-ext`), and the simulator's 60-s stepping (the engine's
//! `--elastic-timing`).
//!
//! # GPU types
//!
//! | dlsched name | artifact suffix | hardware | GPUs per node (artifact) |
//! |---|---|---|---|
//! | `T4` | `aws` | AWS g4dn.12xlarge, NVIDIA T4 16 GB | 4 |
//! | `V100` | `azure` | Azure ND40rs_v2, V100 32 GB | 8 |
//! | `A100` | `dgx-ext` | DGX-A100, A100 40 GB | 8 |
//! | `RTX2080Ti` | `rtx` | GeForce RTX 2080 Ti 11 GB | 8 |
//! | `RTX6000` | `quad` | Quadro RTX 6000 24 GB | 4 |
//!
//! Names match case-insensitively, ignoring `-`, `_` and spaces.
//!
//! # Data
//!
//! Compiled in from `src/profile/data/sia/` (derived from
//! `../shared/profiles/sia` by `dlsched profile import-sia` and
//! `delaunay.py`; conversion in that folder's README). The `aws` (T4)
//! measurements are byte-identical to Pollux's, so T4 uses the Pollux tables
//! and triangulations (`src/profile/data/pollux/`); the import checks that
//! they agree.

use std::path::{Path, PathBuf};

use super::elastic::{BatchLimits, ElasticConfig, ProgressModel};
use super::pollux::{
    APPS, Application, FlatPlane, Num, PlacementRow, PolluxApps, ScalabilityRow, Table, Triangulation,
};
use crate::error::TraceError;
use crate::job::MIXED_GPU_TYPES;

/// A GPU type Sia measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SiaGpu {
    /// NVIDIA T4 16 GB (artifact suffix `aws`; the Pollux measurements).
    T4,
    /// NVIDIA V100 32 GB (`azure`).
    V100,
    /// NVIDIA A100 40 GB (`dgx-ext`).
    A100,
    /// NVIDIA GeForce RTX 2080 Ti 11 GB (`rtx`).
    Rtx2080Ti,
    /// NVIDIA Quadro RTX 6000 24 GB (`quad`).
    Rtx6000,
}

impl SiaGpu {
    /// Every type, in table order.
    pub const ALL: [SiaGpu; 5] = [SiaGpu::T4, SiaGpu::V100, SiaGpu::A100, SiaGpu::Rtx2080Ti, SiaGpu::Rtx6000];

    /// The GPU type name dlsched clusters use (`T4`, `V100`, `A100`,
    /// `RTX2080Ti`, `RTX6000`).
    pub fn name(self) -> &'static str {
        match self {
            SiaGpu::T4 => "T4",
            SiaGpu::V100 => "V100",
            SiaGpu::A100 => "A100",
            SiaGpu::Rtx2080Ti => "RTX2080Ti",
            SiaGpu::Rtx6000 => "RTX6000",
        }
    }

    /// The artifact's cluster suffix (`aws`, `azure`, `dgx-ext`, `rtx`, `quad`).
    pub fn suffix(self) -> &'static str {
        match self {
            SiaGpu::T4 => "aws",
            SiaGpu::V100 => "azure",
            SiaGpu::A100 => "dgx-ext",
            SiaGpu::Rtx2080Ti => "rtx",
            SiaGpu::Rtx6000 => "quad",
        }
    }

    /// Memory of one GPU, MiB (`crate::cluster::SIA_GPUS`, with
    /// its sources).
    pub fn gpu_mem_mib(self) -> u64 {
        self.preset().3 * 1024
    }

    /// GPUs per node in the artifact (`cluster_ngpus_per_node`).
    pub fn gpus_per_node(self) -> u32 {
        self.preset().2
    }

    fn preset(self) -> (&'static str, &'static str, u32, u64) {
        let row = crate::cluster::SIA_GPUS.iter().find(|g| g.0 == self.name());
        *row.expect("every Sia type is in SIA_GPUS")
    }

    /// The Sia type a cluster's GPU type name denotes: one of
    /// [`SiaGpu::name`], case-insensitively, ignoring `-`, `_` and spaces.
    pub fn of_gpu_type(name: &str) -> Option<SiaGpu> {
        let norm = |s: &str| s.chars().filter(|c| !matches!(c, '-' | '_' | ' ')).collect::<String>().to_lowercase();
        let n = norm(name);
        SiaGpu::ALL.into_iter().find(|g| norm(g.name()) == n)
    }

    /// Rank of the type when a heterogeneity-unaware policy must keep one
    /// type of a job's GPUs and two types tie: 0 is kept first. The Sia
    /// artifact's `prio_order` (`cluster_unaware.py`,
    /// `fix_allocations_by_dropping`: "keep more powerful GPUs in
    /// tie-break"): A100 0, V100 1, RTX 6000 2, RTX 2080 Ti 3, T4 4.
    pub fn keep_rank(self) -> u8 {
        match self {
            SiaGpu::A100 => 0,
            SiaGpu::V100 => 1,
            SiaGpu::Rtx6000 => 2,
            SiaGpu::Rtx2080Ti => 3,
            SiaGpu::T4 => 4,
        }
    }

    /// The known names, for error messages.
    pub fn known() -> String {
        SiaGpu::ALL.map(SiaGpu::name).join(", ")
    }
}

/// The Sia simulator's slowdown of each application (`SLOWDOWNS` in
/// `simulator_config.py`, "fitted to real-world data").
const SLOWDOWNS: [(&str, f64); 6] =
    [("bert", 1.2), ("cifar10", 1.8), ("deepspeech2", 1.2), ("imagenet", 1.2), ("ncf", 1.5), ("yolov3", 1.2)];

/// The Sia simulator's calibration factor of an application's goodput,
/// `1 / SLOWDOWNS[app]` (`Job.calibration_factor`); `None` for an
/// application it does not name.
pub fn calibration_factor(app: &str) -> Option<f64> {
    SLOWDOWNS.iter().find(|s| s.0 == app).map(|s| 1.0 / s.1)
}

/// The Sia simulator's re-scale (checkpoint-restore) delay of an
/// application, seconds (`rescale_time` in `applications.py`; 30 s for any
/// other name).
pub fn rescale_time_s(app: &str) -> u64 {
    match app {
        "cifar10" => 50,
        "deepspeech2" => 25,
        "bert" => 120,
        "yolov3" => 80,
        "imagenet" => 250,
        "ncf" => 15,
        _ => 30,
    }
}

/// The artifact's `max_local_bsz` overrides (`Application.__init__`):
/// deepspeech2 on `rtx`, 57 samples.
fn max_local_override(gpu: SiaGpu, app: &str) -> Option<u32> {
    (gpu == SiaGpu::Rtx2080Ti && app == "deepspeech2").then_some(57)
}

/// The GPU types the derived tables hold (T4 is the Pollux tables').
pub const TABLE_GPUS: [SiaGpu; 4] = [SiaGpu::V100, SiaGpu::A100, SiaGpu::Rtx2080Ti, SiaGpu::Rtx6000];

/// The derived tables, in the order [`SiaTables::write_tables`] writes them.
pub const TABLES: [&str; 3] = ["applications.csv", "placements.csv", "scalability.csv"];
const APP_COLUMNS: [&str; 4] = ["gpu", "app", "min_local_bsz", "max_local_bsz"];
const PLACEMENT_COLUMNS: [&str; 6] = ["gpu", "app", "placement", "local_bsz", "step_time", "sync_time"];
const SCALABILITY_COLUMNS: [&str; 7] =
    ["gpu", "app", "num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"];

/// The six applications on each Sia GPU type.
#[derive(Clone, Debug)]
pub struct SiaTables {
    /// Per GPU type (in [`SiaGpu::ALL`] order), the applications on it.
    pub types: Vec<(SiaGpu, PolluxApps)>,
}

/// The measurements of one application on one type, before the model is built.
struct Measured {
    placements: Vec<PlacementRow>,
    scalability: Vec<ScalabilityRow>,
}

impl SiaTables {
    /// The compiled-in tables (`src/profile/data/sia/` and, for T4,
    /// `src/profile/data/pollux/`). Checked by the tests, so a parse failure
    /// is a build defect and panics naming file, line and column.
    pub fn builtin() -> SiaTables {
        SiaTables::parse_builtin().unwrap_or_else(|e| {
            panic!("the builtin Sia tables are invalid: {e} (regenerate them with `dlsched profile import-sia`)")
        })
    }

    fn parse_builtin() -> Result<SiaTables, TraceError> {
        let dir = PathBuf::from("src/profile/data/sia");
        let texts = [
            include_str!("data/sia/applications.csv"),
            include_str!("data/sia/placements.csv"),
            include_str!("data/sia/scalability.csv"),
        ];
        let planes = include_str!("data/sia/planes.csv");
        let lift = include_str!("data/sia/paraboloid.csv");
        let mut tris = Vec::new();
        for gpu in TABLE_GPUS {
            for app in APPS {
                let text = builtin_delaunay(gpu, app).unwrap_or("");
                let file = dir.join(format!("delaunay-{}-{app}.csv", gpu.suffix()));
                tris.push(read_triangulation(
                    gpu,
                    app,
                    (&file, text.as_bytes()),
                    (&dir.join("planes.csv"), planes.as_bytes()),
                    (&dir.join("paraboloid.csv"), lift.as_bytes()),
                )?);
            }
        }
        SiaTables::from_tables(&dir, texts.map(str::as_bytes), &tris)
    }

    /// Reads the derived tables of a directory laid out as
    /// `src/profile/data/sia` (T4 from the builtin Pollux tables).
    ///
    /// # Errors
    /// An unreadable or malformed file, naming file, line and column.
    pub fn load_tables(dir: &Path) -> Result<SiaTables, TraceError> {
        let mut bytes = Vec::new();
        for f in TABLES {
            bytes.push(crate::io::read_csv(&dir.join(f))?);
        }
        let (planes, lift) = (dir.join("planes.csv"), dir.join("paraboloid.csv"));
        let (pb, lb) = (crate::io::read_csv(&planes)?, crate::io::read_csv(&lift)?);
        let mut tris = Vec::new();
        for gpu in TABLE_GPUS {
            for app in APPS {
                let file = dir.join(format!("delaunay-{}-{app}.csv", gpu.suffix()));
                let b = crate::io::read_csv(&file)?;
                tris.push(read_triangulation(gpu, app, (&file, &b), (&planes, &pb), (&lift, &lb))?);
            }
        }
        SiaTables::from_tables(dir, [&bytes[0][..], &bytes[1][..], &bytes[2][..]], &tris)
    }

    /// Builds the model from the derived tables' bytes (in [`TABLES`] order)
    /// and the triangulations of [`TABLE_GPUS`] × [`APPS`] (in that order).
    fn from_tables(dir: &Path, bytes: [&[u8]; 3], tris: &[Triangulation]) -> Result<SiaTables, TraceError> {
        let apps_t = Table::read_bytes(&dir.join(TABLES[0]), bytes[0], Num::Exact)?;
        let pl_t = Table::read_bytes(&dir.join(TABLES[1]), bytes[1], Num::Exact)?;
        let sc_t = Table::read_bytes(&dir.join(TABLES[2]), bytes[2], Num::Exact)?;
        let ac = apps_t.cols(&APP_COLUMNS)?;
        let pc = pl_t.cols(&PLACEMENT_COLUMNS)?;
        let sc = sc_t.cols(&SCALABILITY_COLUMNS)?;
        let ([_, _, p_row @ ..], [_, _, s_row @ ..]) = (pc, sc);
        let mut measured = Vec::new();
        for gpu in TABLE_GPUS {
            for app in APPS {
                let of = |t: &Table, c: [usize; 2], j: usize| t.str(j, c[0]) == gpu.suffix() && t.str(j, c[1]) == app;
                let placements = (0..pl_t.rows.len())
                    .filter(|&j| of(&pl_t, [pc[0], pc[1]], j))
                    .map(|j| pl_t.placement_row(j, p_row))
                    .collect::<Result<Vec<_>, _>>()?;
                let scalability = (0..sc_t.rows.len())
                    .filter(|&j| of(&sc_t, [sc[0], sc[1]], j))
                    .map(|j| sc_t.scalability_row(j, s_row))
                    .collect::<Result<Vec<_>, _>>()?;
                measured.push(Measured { placements, scalability });
            }
        }
        let tables = SiaTables::build(measured, tris)
            .map_err(|message| TraceError::Format { file: dir.to_path_buf(), message })?;
        // The limits column is a check of the rows (and documentation).
        for i in 0..apps_t.rows.len() {
            let (suffix, app) = (apps_t.str(i, ac[0]), apps_t.str(i, ac[1]));
            let Some(a) = SiaGpu::ALL.iter().find(|g| g.suffix() == suffix).and_then(|g| tables.get(*g, app)) else {
                return Err(apps_t.err(i, ac[0], format!("no GPU type `{suffix}` with application `{app}`")));
            };
            let limits = (apps_t.count(i, ac[2])?, apps_t.count(i, ac[3])?);
            if limits != (a.min_local_bsz, a.max_local_bsz) {
                return Err(apps_t.err(
                    i,
                    ac[2],
                    format!(
                        "local batch limits {limits:?} disagree with the placement rows ({}, {})",
                        a.min_local_bsz, a.max_local_bsz
                    ),
                ));
            }
        }
        Ok(tables)
    }

    /// The applications of every type: T4 from the builtin Pollux tables
    /// (with Sia's limits), the others from `measured` and `tris`, both in
    /// [`TABLE_GPUS`] × [`APPS`] order.
    fn build(measured: Vec<Measured>, tris: &[Triangulation]) -> Result<SiaTables, String> {
        let pollux = PolluxApps::builtin();
        let mut types = Vec::new();
        let mut t4 = Vec::new();
        for a in &pollux.apps {
            let tri = super::pollux::builtin_triangulation(&a.name).map_err(|e| e.to_string())?.unwrap_or_default();
            t4.push(Application::new(
                &a.name,
                a.validation.clone(),
                a.placements.clone(),
                a.scalability.clone(),
                a.max_epochs,
                max_local_override(SiaGpu::T4, &a.name),
                &tri,
            )?);
        }
        types.push((SiaGpu::T4, PolluxApps { apps: t4 }));
        let mut it = measured.into_iter().zip(tris);
        for gpu in TABLE_GPUS {
            let mut apps = Vec::new();
            for app in APPS {
                let (m, tri) = it.next().ok_or("fewer tables than GPU types × applications")?;
                let base = pollux.get(app).ok_or_else(|| format!("no Pollux application `{app}`"))?;
                let a = Application::new(
                    app,
                    base.validation.clone(),
                    m.placements,
                    m.scalability,
                    base.max_epochs,
                    max_local_override(gpu, app),
                    tri,
                )
                .map_err(|e| format!("{} ({}): {e}", gpu.name(), gpu.suffix()))?;
                apps.push(a);
            }
            types.push((gpu, PolluxApps { apps }));
        }
        types.sort_by_key(|t| t.0);
        Ok(SiaTables { types })
    }

    /// Reads the artifact's measurements (`<from>/<app>/placements-<suffix>.csv`,
    /// `scalability-<suffix>.csv`, as `../shared/profiles/sia`; columns by
    /// name, numbers as pandas 1.5.3 reads them) for [`TABLE_GPUS`], with the
    /// triangulations written beside `tri_dir`'s tables if there (else none:
    /// only measured placements can then be rated), and checks that the T4
    /// (`aws`) files hold the builtin Pollux measurements.
    ///
    /// # Errors
    /// An unreadable or malformed file (file, line, column), inconsistent
    /// tables, or `aws` files that differ from the Pollux tables.
    pub fn load_dir(from: &Path, tri_dir: &Path) -> Result<SiaTables, TraceError> {
        let pollux = PolluxApps::builtin();
        for app in APPS {
            let m = read_measured(&from.join(app), SiaGpu::T4)?;
            let p = pollux.get(app).expect("the six applications");
            if m.placements != p.placements || m.scalability != p.scalability {
                return Err(TraceError::Format {
                    file: from.join(app).join("placements-aws.csv"),
                    message: format!(
                        "the T4 (`aws`) measurements of `{app}` differ from the Pollux tables \
                         (src/profile/data/pollux), which the Sia model uses for T4"
                    ),
                });
            }
        }
        let mut measured = Vec::new();
        let mut tris = Vec::new();
        let (planes, lift) = (tri_dir.join("planes.csv"), tri_dir.join("paraboloid.csv"));
        let read = |f: &Path| if f.exists() { crate::io::read_csv(f).map(Some) } else { Ok(None) };
        let (pb, lb) = (read(&planes)?, read(&lift)?);
        for gpu in TABLE_GPUS {
            for app in APPS {
                measured.push(read_measured(&from.join(app), gpu)?);
                let file = tri_dir.join(format!("delaunay-{}-{app}.csv", gpu.suffix()));
                let tri = match (read(&file)?, &pb, &lb) {
                    (Some(b), Some(pb), Some(lb)) => {
                        read_triangulation(gpu, app, (&file, &b), (&planes, pb), (&lift, lb))?
                    }
                    _ => Triangulation::default(),
                };
                tris.push(tri);
            }
        }
        SiaTables::build(measured, &tris).map_err(|message| TraceError::Format { file: from.to_path_buf(), message })
    }

    /// Writes the three derived tables of [`TABLE_GPUS`] (not the
    /// triangulations, which `delaunay.py` writes) into `dir`: rows by GPU
    /// type, then application name, then as in the original files; numbers
    /// in shortest round-trip form, `\n` line ends.
    ///
    /// # Errors
    /// The directory cannot be created or a file cannot be written.
    pub fn write_tables(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut out = [
            format!("{}\n", APP_COLUMNS.join(",")),
            format!("{}\n", PLACEMENT_COLUMNS.join(",")),
            format!("{}\n", SCALABILITY_COLUMNS.join(",")),
        ];
        for gpu in TABLE_GPUS {
            let g = gpu.suffix();
            for app in APPS {
                let Some(a) = self.get(gpu, app) else { continue };
                out[0] += &format!("{g},{app},{},{}\n", a.min_local_bsz, a.max_local_bsz);
                for r in &a.placements {
                    let id: String = r.placement.iter().map(u32::to_string).collect();
                    out[1] += &format!("{g},{app},{id},{},{},{}\n", r.local_bsz, r.step_time, r.sync_time);
                }
                for r in &a.scalability {
                    out[2] += &format!(
                        "{g},{app},{},{},{},{},{}\n",
                        r.num_nodes, r.num_replicas, r.local_bsz, r.step_time, r.sync_time
                    );
                }
            }
        }
        for (name, text) in TABLES.iter().zip(out) {
            std::fs::write(dir.join(name), text)?;
        }
        Ok(())
    }

    /// The applications on one type.
    pub fn apps(&self, gpu: SiaGpu) -> Option<&PolluxApps> {
        self.types.iter().find(|t| t.0 == gpu).map(|t| &t.1)
    }

    /// One application on one type.
    pub fn get(&self, gpu: SiaGpu, app: &str) -> Option<&Application> {
        self.apps(gpu)?.get(app)
    }
}

/// One application's measurements on one type from the artifact's files.
fn read_measured(app_dir: &Path, gpu: SiaGpu) -> Result<Measured, TraceError> {
    let file = app_dir.join(format!("placements-{}.csv", gpu.suffix()));
    let t = Table::read(&file, Num::Pandas)?;
    let c = t.cols(&["placement", "local_bsz", "step_time", "sync_time"])?;
    let placements = (0..t.rows.len()).map(|i| t.placement_row(i, c)).collect::<Result<_, _>>()?;
    let file = app_dir.join(format!("scalability-{}.csv", gpu.suffix()));
    let t = Table::read(&file, Num::Pandas)?;
    let c = t.cols(&["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"])?;
    let scalability = (0..t.rows.len()).map(|i| t.scalability_row(i, c)).collect::<Result<_, _>>()?;
    Ok(Measured { placements, scalability })
}

/// The compiled-in triangulation of one application on one type.
fn builtin_delaunay(gpu: SiaGpu, app: &str) -> Option<&'static str> {
    macro_rules! pick {
        ($($g:ident $s:literal: $($a:literal)*;)*) => {
            match (gpu, app) {
                $($((SiaGpu::$g, $a) => Some(include_str!(concat!("data/sia/delaunay-", $s, "-", $a, ".csv"))),)*)*
                _ => None,
            }
        };
    }
    pick! {
        V100 "azure": "bert" "cifar10" "deepspeech2" "imagenet" "ncf" "yolov3";
        A100 "dgx-ext": "bert" "cifar10" "deepspeech2" "imagenet" "ncf" "yolov3";
        Rtx2080Ti "rtx": "bert" "cifar10" "deepspeech2" "imagenet" "ncf" "yolov3";
        Rtx6000 "quad": "bert" "cifar10" "deepspeech2" "imagenet" "ncf" "yolov3";
    }
}

/// Reads one (type, application) triangulation: `delaunay` (`a,b,c,d,plane`;
/// a header alone = none), its rows of `planes`
/// (`gpu,app,simplex,n0,n1,n2,n3,offset`) and `paraboloid`
/// (`gpu,app,scale,shift`); each `(file, bytes)`.
fn read_triangulation(
    gpu: SiaGpu,
    app: &str,
    delaunay: (&Path, &[u8]),
    planes: (&Path, &[u8]),
    paraboloid: (&Path, &[u8]),
) -> Result<Triangulation, TraceError> {
    let mut tri = Triangulation::default();
    if delaunay.1.iter().filter(|&&b| b == b'\n').count() <= 1 {
        return Ok(tri);
    }
    let t = Table::read_bytes(delaunay.0, delaunay.1, Num::Exact)?;
    let c = t.cols(&["a", "b", "c", "d", "plane"])?;
    for i in 0..t.rows.len() {
        tri.tets.push([t.count0(i, c[0])?, t.count0(i, c[1])?, t.count0(i, c[2])?, t.count0(i, c[3])?]);
        if !t.str(i, c[4]).is_empty() {
            tri.planes.insert(i as u32, FlatPlane::Twin(t.count0(i, c[4])?));
        }
    }
    let ours = |t: &Table, c: &[usize], i: usize| t.str(i, c[0]) == gpu.suffix() && t.str(i, c[1]) == app;
    let t = Table::read_bytes(planes.0, planes.1, Num::Exact)?;
    let c = t.cols(&["gpu", "app", "simplex", "n0", "n1", "n2", "n3", "offset"])?;
    for i in (0..t.rows.len()).filter(|&i| ours(&t, &c, i)) {
        let e = [t.num(i, c[3])?, t.num(i, c[4])?, t.num(i, c[5])?, t.num(i, c[6])?, t.num(i, c[7])?];
        tri.planes.insert(t.count0(i, c[2])?, FlatPlane::Given(e));
    }
    let t = Table::read_bytes(paraboloid.0, paraboloid.1, Num::Exact)?;
    let c = t.cols(&["gpu", "app", "scale", "shift"])?;
    let Some(i) = (0..t.rows.len()).find(|&i| ours(&t, &c, i)) else {
        return Err(TraceError::Format {
            file: paraboloid.0.to_path_buf(),
            message: format!("no row for `{}` `{app}`", gpu.suffix()),
        });
    };
    tri.paraboloid = (t.num(i, c[2])?, t.num(i, c[3])?);
    Ok(tri)
}

/// The [`ProgressModel`] of work-defined jobs on a cluster of Sia's GPU
/// types (see the module docs): the tables, and the Sia type of each of the
/// run's cluster GPU types (index = [`ElasticConfig::gpu_type`]).
#[derive(Clone, Debug)]
pub struct SiaModel {
    tables: SiaTables,
    /// Per cluster GPU type index: its Sia type.
    types: Vec<SiaGpu>,
    /// The cluster's GPU type names, for messages.
    names: Vec<String>,
}

impl SiaModel {
    /// The model for a cluster whose GPU types are `names`
    /// (`Cluster::gpu_type_names`, in that order), on the builtin tables.
    ///
    /// # Errors
    /// A type Sia did not measure, naming it and the known ones.
    pub fn for_gpu_types(names: &[String]) -> Result<SiaModel, String> {
        SiaModel::with_tables(SiaTables::builtin(), names)
    }

    /// As [`SiaModel::for_gpu_types`], on the given tables.
    ///
    /// # Errors
    /// As [`SiaModel::for_gpu_types`].
    pub fn with_tables(tables: SiaTables, names: &[String]) -> Result<SiaModel, String> {
        let mut types = Vec::new();
        for n in names {
            match SiaGpu::of_gpu_type(n).filter(|g| tables.apps(*g).is_some()) {
                Some(g) => types.push(g),
                None => {
                    return Err(format!(
                        "the Sia model has no measurements of GPU type `{n}` (known: {})",
                        SiaGpu::known()
                    ));
                }
            }
        }
        if types.is_empty() {
            return Err("the Sia model needs a cluster with at least one GPU type".into());
        }
        Ok(SiaModel { tables, types, names: names.to_vec() })
    }

    /// The tables.
    pub fn tables(&self) -> &SiaTables {
        &self.tables
    }

    /// The Sia type of a cluster GPU type index.
    ///
    /// # Errors
    /// [`MIXED_GPU_TYPES`] or an index beyond the cluster's types.
    pub fn gpu(&self, gpu_type: u16) -> Result<SiaGpu, String> {
        if gpu_type == MIXED_GPU_TYPES {
            return Err(format!(
                "a job's GPUs span GPU types ({}); the Sia model rates a job on one type",
                self.names.join(", ")
            ));
        }
        self.types
            .get(usize::from(gpu_type))
            .copied()
            .ok_or_else(|| format!("GPU type index {gpu_type} is not one of the cluster's {} types", self.types.len()))
    }

    fn on(&self, gpu_type: u16) -> Result<&PolluxApps, String> {
        let g = self.gpu(gpu_type)?;
        self.tables.apps(g).ok_or_else(|| format!("no tables for GPU type {}", g.name()))
    }

    /// The applications of the cluster's first type: what every type shares
    /// (validation traces, epochs, targets).
    fn shared(&self) -> &PolluxApps {
        self.tables.apps(self.types[0]).expect("checked in with_tables")
    }

    /// The Sia simulator's configuration of a job with total batch `batch`
    /// (samples) on `per_node` GPUs of cluster type `gpu_type`
    /// (`Job.update_local_bsz` with batch-size tuning off): local batch `l =
    /// ceil(batch / replicas − 1e-8)`; accumulation steps `ceil(l / m −
    /// 1e-8) − 1` with `m` the placement's largest measured local batch
    /// (`get_max_local_bsz`; for an unmeasured placement the largest local
    /// batch of the scalability rows with at least its nodes and replicas,
    /// and where there is none (the artifact raises) the type's
    /// `max_local_bsz`: our fallback), at least 1 on one GPU above the
    /// initial batch; atomic batch `ceil(l / (steps + 1) − 1e-8)`, capped at
    /// the largest local batch measured on any placement of as many replicas
    /// (when there is one) and at `floor(max_batch / (replicas × (steps +
    /// 1)))`. An unknown type or application: the even split.
    pub fn tuned_config_on(&self, app: &str, per_node: &[u32], batch: u32, gpu_type: u16) -> ElasticConfig {
        let Some(a) = self.on(gpu_type).ok().and_then(|t| t.get(app)) else {
            let mut c = ElasticConfig::even_split(per_node, batch);
            c.gpu_type = gpu_type;
            return c;
        };
        let per_node: Vec<u32> = per_node.iter().copied().filter(|&g| g > 0).collect();
        let (nodes, replicas) = (per_node.len() as u32, per_node.iter().sum::<u32>());
        if replicas == 0 {
            return ElasticConfig { per_node, atomic_bsz: 0, accum_steps: 0, gpu_type };
        }
        let ceil_tol = |x: f64| (x - 1e-8).ceil();
        let (max_local, same_replicas_max) = local_caps(a, &per_node, nodes, replicas);
        let max_local = f64::from(max_local);
        let local = ceil_tol(f64::from(batch) / f64::from(replicas));
        let mut accum = ceil_tol(local / max_local) - 1.0;
        if replicas == 1 && batch > a.init_batch_size {
            accum = accum.max(1.0);
        }
        let mut atomic = ceil_tol(local / (accum + 1.0));
        if let Some(m) = same_replicas_max {
            atomic = atomic.min(f64::from(m));
        }
        let count = f64::from(replicas) * (accum + 1.0);
        atomic = atomic.min((f64::from(a.max_batch_size) / count).trunc());
        ElasticConfig { per_node, atomic_bsz: atomic.max(0.0) as u32, accum_steps: accum.max(0.0) as u32, gpu_type }
    }

    /// The local-batch caps of `app` on `per_node` GPUs of cluster type
    /// `gpu_type`, per GPU (samples): `(m, c)` with `m` the placement's
    /// largest local batch as [`SiaModel::tuned_config_on`] finds it (the
    /// simulator's `get_max_local_bsz`, with our fallback) and `c` the
    /// largest local batch measured on any placement of as many replicas,
    /// when there is one (the simulator's memory correction of the atomic
    /// batch in `Job.update_local_bsz`). `None` for an unknown type or
    /// application, or no GPU.
    pub fn local_caps_on(&self, app: &str, per_node: &[u32], gpu_type: u16) -> Option<(u32, Option<u32>)> {
        let a = self.on(gpu_type).ok()?.get(app)?;
        let per_node: Vec<u32> = per_node.iter().copied().filter(|&g| g > 0).collect();
        let (nodes, replicas) = (per_node.len() as u32, per_node.iter().sum::<u32>());
        (replicas > 0).then(|| local_caps(a, &per_node, nodes, replicas))
    }

    /// The batch limits of `app` on cluster type `gpu_type`: the shared
    /// total-batch range and that type's per-GPU range.
    pub fn batch_limits_on(&self, app: &str, gpu_type: u16) -> Option<BatchLimits> {
        self.on(gpu_type).ok()?.batch_limits(app)
    }
}

/// [`SiaModel::local_caps_on`] for application `a` on the non-empty
/// placement `per_node` (no zero entries) of `nodes` nodes and `replicas`
/// GPUs.
fn local_caps(a: &Application, per_node: &[u32], nodes: u32, replicas: u32) -> (u32, Option<u32>) {
    let max_local = a.measured_max_local(per_node).or_else(|| {
        a.scalability.iter().filter(|r| r.num_nodes >= nodes && r.num_replicas >= replicas).map(|r| r.local_bsz).max()
    });
    let same_replicas = a.placements.iter().filter(|r| r.placement.iter().sum::<u32>() == replicas);
    (max_local.unwrap_or(a.max_local_bsz), same_replicas.map(|r| r.local_bsz).max())
}

impl ProgressModel for SiaModel {
    fn name(&self) -> &'static str {
        "sia"
    }

    fn target(&self, app: &str) -> Result<f64, String> {
        self.shared().target(app)
    }

    /// The Pollux goodput on the job's GPU type × [`calibration_factor`].
    fn goodput(&self, app: &str, cfg: &ElasticConfig, progress: f64) -> Result<f64, String> {
        let g = self.on(cfg.gpu_type)?.goodput(app, cfg, progress)?;
        let f = calibration_factor(app).ok_or_else(|| format!("the Sia model has no calibration of `{app}`"))?;
        Ok(g * f)
    }

    fn next_breakpoint(&self, app: &str, progress: f64) -> f64 {
        self.shared().next_breakpoint(app, progress)
    }

    /// [`SiaModel::tuned_config_on`] on the cluster's first GPU type.
    fn tuned_config(&self, app: &str, per_node: &[u32], batch: u32) -> ElasticConfig {
        self.tuned_config_on(app, per_node, batch, 0)
    }

    fn tuned_config_on(&self, app: &str, per_node: &[u32], batch: u32, gpu_type: u16) -> ElasticConfig {
        SiaModel::tuned_config_on(self, app, per_node, batch, gpu_type)
    }

    /// The step times on the job's GPU type, uncalibrated.
    fn step_times(&self, app: &str, cfg: &ElasticConfig) -> Result<(f64, f64), String> {
        self.on(cfg.gpu_type)?.step_times(app, cfg)
    }

    /// [`calibration_factor`] of `app` (1 for an application the artifact
    /// does not name, whose [`ProgressModel::goodput`] is an error anyway).
    fn calibration(&self, app: &str) -> f64 {
        calibration_factor(app).unwrap_or(1.0)
    }

    /// Shared by every GPU type (the validation traces).
    fn grad_stats(&self, app: &str, batch: u64, progress: f64) -> Result<(f64, f64), String> {
        self.shared().grad_stats(app, batch, progress)
    }

    /// Shared by every GPU type (the validation traces).
    fn remaining_steps(&self, app: &str, batch: u64, progress: f64) -> Result<f64, String> {
        self.shared().remaining_steps(app, batch, progress)
    }

    /// The limits valid on every GPU type of the cluster: the shared
    /// total-batch range, the largest least local batch and the least
    /// largest one over the types ([`SiaModel::batch_limits_on`] gives one
    /// type's).
    fn batch_limits(&self, app: &str) -> Option<BatchLimits> {
        let mut out: Option<BatchLimits> = None;
        for i in 0..self.types.len() {
            let l = self.batch_limits_on(app, i as u16)?;
            out = Some(match out {
                None => l,
                Some(o) => BatchLimits {
                    min_local: o.min_local.max(l.min_local),
                    max_local: o.max_local.min(l.max_local),
                    ..o
                },
            });
        }
        out
    }

    fn batch_limits_on(&self, app: &str, gpu_type: u16) -> Option<BatchLimits> {
        SiaModel::batch_limits_on(self, app, gpu_type)
    }

    fn local_caps_on(&self, app: &str, per_node: &[u32], gpu_type: u16) -> Option<(u32, Option<u32>)> {
        SiaModel::local_caps_on(self, app, per_node, gpu_type)
    }

    /// [`rescale_time_s`], ms.
    fn rescale_delay_ms(&self, app: &str) -> Option<u64> {
        Some(rescale_time_s(app) * 1000)
    }
}
