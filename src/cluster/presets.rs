//! Cluster presets from published cluster descriptions, and VC partition files.

use std::path::Path;

use super::spec::{ClusterSpec, MAX_GPUS_PER_NODE, MAX_NODES, NodeSpec};
use crate::error::TraceError;
use crate::ids::VcId;

/// A named cluster from a publication or a trace's machine list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ClusterPreset {
    /// The 16-GPU research cluster of the GENIE/RIFLING work (GENIE, TPDS 2020,
    /// Table 1): 4 nodes × 4 Tesla K80 GPUs (12 GiB per GK210 die), 2 GPUs per
    /// PCIe switch, 2 sockets per node, PCIe 3.0 inside a node, 56 Gb/s
    /// InfiniBand between nodes, one rack.
    Lab16,
    /// Microsoft Philly as its machine list describes it (Jeon et al., ATC'19;
    /// `cluster_machine_list`): 321 servers × 2 GPUs of 12 GB, then 231 servers
    /// × 8 GPUs of 24 GB, 2,490 GPUs, in one partition. The GPU models are not
    /// published; the types are named `philly-12g` and `philly-24g`.
    Philly,
    /// The GPU nodes of the Alibaba PAI 2023 GPU-sharing cluster ("openb",
    /// Weng et al., ATC'23): 1,213 nodes, 6,212 GPUs of seven types, in one
    /// partition. A derived summary, not a copy of the node list: the number
    /// of nodes per (GPUs per node, GPU type) counted from
    /// `openb_node_list_gpu_node.csv` (table `OPENB_GPU_NODES` in the
    /// source), GPU memory per type as documented there. `--nodes-file` builds the same
    /// cluster from the file itself (node order then follows the file).
    AlibabaOpenb,
    /// The heterogeneous testbed of LDWP/IAWP (Zhang, Geng, Ma, TPDS 2021,
    /// §5.4): 12 nodes, 40 GPUs, in
    /// node order 2 × {2 GPUs, 24 GB}, 4 × {4 GPUs, 8 GB}, 4 × {4 GPUs,
    /// 24 GB}, 2 × {2 GPUs, 8 GB}. The paper's GPUs are "Tesla P4 or K80"
    /// without the mapping; our reading: the 24 GB nodes are K80 and the
    /// 8 GB nodes P4 (a P4 has 8 GB). The profile database has no P4 rates,
    /// so the 8 GB nodes take the P100's (type `P100`, the P4's Pascal
    /// generation, with measured rates for the same seven models as the K80
    /// in Gavel's table) with the P4's 8 GiB. The listed memory is per GPU
    /// (our reading). The summary counts 11 workers but lists 12 nodes;
    /// all 12 are here. 2 GPUs per PCIe switch, 2 sockets (the paper's
    /// 16-core Xeon E5-2620 v3 servers), one rack (Gigabit Ethernet).
    #[cfg_attr(feature = "cli", value(name = "ldwp-testbed"))]
    LdwpTestbed,
    /// SenseTime Helios, cluster Venus (Hu et al., SC'21), in the 15 VC
    /// partitions Lucid (Hu et al., ASPLOS'23) gives it (`VENUS_VC_NODES`),
    /// 135 nodes × 8 GPUs = 1,080 GPUs. A job of a VC not in the table is
    /// skipped (`unknown_vc`, counted). GPU type `generic`, 16 GiB.
    #[cfg_attr(feature = "cli", value(name = "helios-venus"))]
    HeliosVenus,
    /// Helios cluster Earth: 997 GPUs (`HELIOS_GPUS`) → 125 nodes × 8 GPUs
    /// (1,000 GPUs), one partition. GPU type `generic`, 16 GiB.
    #[cfg_attr(feature = "cli", value(name = "helios-earth"))]
    HeliosEarth,
    /// Helios cluster Saturn: 2,080 GPUs → 260 nodes × 8 GPUs, one partition.
    /// GPU type `generic`, 16 GiB.
    #[cfg_attr(feature = "cli", value(name = "helios-saturn"))]
    HeliosSaturn,
    /// Helios cluster Uranus: 2,119 GPUs → 265 nodes × 8 GPUs (2,120 GPUs),
    /// one partition. GPU type `generic`, 16 GiB.
    #[cfg_attr(feature = "cli", value(name = "helios-uranus"))]
    HeliosUranus,
    /// The Pollux simulator's cluster (its `simulator.py` defaults and the
    /// OSDI'21 paper's testbed, AWS g4dn.12xlarge): 16 nodes × 4 NVIDIA T4
    /// (16 GiB), 64 GPUs, where its workloads and measurements were made.
    Pollux,
    /// The Sia simulator's default heterogeneous cluster (Jayaram
    /// Subramanya et al., SOSP'23; artifact `sia-simulator/simulator_config.py`,
    /// `cluster_nnodes = {"aws": 6, "dgx-ext": 2, "rtx": 3}` with
    /// `cluster_ngpus_per_node`), 64 GPUs in node order: 6 nodes × 4 T4
    /// (16 GiB), 2 × 8 A100 (40 GiB), 3 × 8 RTX2080Ti (11 GiB) (memory: the
    /// vendors' specifications). Work-defined jobs on it take Sia's per-type
    /// model by default (`--elastic-model`).
    Sia,
    /// The Sia paper's physical testbed ("phoebe" in the artifact's config,
    /// `{"rtx": 3, "dgx-ext": 2, "quad": 1}`), 44 GPUs in node order: 3
    /// nodes × 8 RTX2080Ti (11 GiB), 2 × 8 A100 (40 GiB), 1 × 4 RTX6000
    /// (Quadro RTX 6000, 24 GiB).
    #[cfg_attr(feature = "cli", value(name = "sia-physical"))]
    SiaPhysical,
}

crate::names::value_names!(ClusterPreset {
    Lab16 => "lab16",
    Philly => "philly",
    AlibabaOpenb => "alibaba-openb",
    LdwpTestbed => "ldwp-testbed",
    HeliosVenus => "helios-venus",
    HeliosEarth => "helios-earth",
    HeliosSaturn => "helios-saturn",
    HeliosUranus => "helios-uranus",
    Pollux => "pollux",
    Sia => "sia",
    SiaPhysical => "sia-physical",
});

/// GPUs per node of the Helios clusters: 8, the node size the Helios
/// artifact's simulator (S-Lab-System-Group/HeliosArtifact) and Lucid's
/// Venus configuration (`vc_config.csv`, nodes of 8 GPUs) use.
pub const HELIOS_GPUS_PER_NODE: u32 = 8;

/// GPUs of each Helios cluster, (name, GPUs), from the `gpu_num` column of
/// `helios_cluster_summary.csv` (S-Lab-System-Group/HeliosArtifact @
/// bdaae109, `analysis/1_compare with Philly trace/`; MIT; the data are
/// HeliosData, CC BY 4.0, Hu et al., "Characterization and Prediction of
/// Deep Learning Workloads in Large-Scale GPU Datacenters", SC'21). The
/// figure is the mean of the cluster's daily GPU count: for Venus, the mean
/// of the `total` column of HeliosData's `Venus/cluster_gpu_number.csv`
/// over its 181 days is 1,022.8 (968 to 1,264). A preset has
/// ⌈GPUs / [`HELIOS_GPUS_PER_NODE`]⌉ nodes, so at least that many GPUs.
pub const HELIOS_GPUS: [(&str, u32); 4] = [("venus", 1022), ("earth", 997), ("saturn", 2080), ("uranus", 2119)];

/// Venus's VC partitions, (VC, nodes of 8 GPUs), from Lucid's September-2020
/// Venus simulation configuration (`simulation/data/Venus/vc_config.csv` of
/// S-Lab-System-Group/Lucid @ 63685a3a; Hu et al., "Lucid: A
/// Non-intrusive, Scalable and Interpretable Scheduler for Deep Learning
/// Training Jobs", ASPLOS'23). The numbers derive from HeliosData (CC BY
/// 4.0); the Lucid file is under the S-Lab License 1.0, so only these
/// counts are kept here, in the file's order. 135 nodes, 1,080 GPUs: the
/// Venus total of 2020-09-28 in HeliosData's `cluster_gpu_number.csv`.
/// Venus has 25 VCs over the six months of the trace; jobs of the other 10
/// are skipped as `unknown_vc` under `--cluster helios-venus`.
pub const VENUS_VC_NODES: [(&str, u32); 15] = [
    ("vcEwI", 9),
    ("vcWoR", 5),
    ("vcHvQ", 8),
    ("vcvGl", 20),
    ("vc8Gr", 6),
    ("vcKeu", 12),
    ("vcKrE", 4),
    ("vcYVn", 11),
    ("vchbv", 4),
    ("vcLTP", 8),
    ("vchA3", 3),
    ("vcJsw", 32),
    ("vcefl", 10),
    ("vcvlY", 2),
    ("vcgkz", 1),
];

/// A Helios node: 8 GPUs of type `generic` (16 GiB, as for `--vcs` files:
/// the GPU models per cluster are not in the data used here), 2 GPUs per
/// PCIe switch, 2 sockets (the topology is not published), in `vc`.
fn helios_node(vc: VcId) -> NodeSpec {
    NodeSpec {
        gpus: HELIOS_GPUS_PER_NODE,
        gpu_type: "generic".into(),
        gpu_mem_mib: 16 * 1024,
        gpus_per_switch: 2,
        sockets: 2,
        rack: 0,
        vc,
    }
}

/// A Helios cluster of one partition with at least `gpus` GPUs.
fn helios_uniform(name: &str, gpus: u32) -> ClusterSpec {
    let nodes = gpus.div_ceil(HELIOS_GPUS_PER_NODE) as usize;
    ClusterSpec {
        name: format!("helios-{name}"),
        nodes: vec![helios_node(VcId(0)); nodes],
        vc_names: vec!["default".into()],
        named_vcs: false,
    }
}

fn helios_gpus(name: &str) -> u32 {
    HELIOS_GPUS.iter().find(|c| c.0 == name).map_or(0, |c| c.1)
}

/// GPU nodes of the Alibaba PAI 2023 ("openb") cluster: (GPUs per node, GPU
/// type, nodes), counted from `openb_node_list_gpu_node.csv` (1,213 rows, all
/// with GPUs; sha256 2beca64b…f320b5) of alibaba/clusterdata @ 7a6c496e,
/// `cluster-trace-gpu-v2023/csv/` (Weng et al., "Beware of Fragmentation:
/// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
/// USENIX ATC'23). The data carry no licence file; the repository's README
/// allows use "for research or study purpose". Only these counts are derived
/// here; the CPU and memory columns are not used.
pub const OPENB_GPU_NODES: [(u32, &str, u32); 12] = [
    (1, "A10", 2),
    (1, "P100", 3),
    (1, "V100M16", 19),
    (2, "P100", 131),
    (2, "T4", 387),
    (4, "T4", 17),
    (4, "V100M16", 28),
    (4, "V100M32", 9),
    (8, "G2", 549),
    (8, "G3", 39),
    (8, "V100M16", 8),
    (8, "V100M32", 21),
];

/// Memory of one GPU of an Alibaba PAI 2023 GPU type, MiB, or `None` for a
/// type not in the trace. From the vendors' data sheets: P100 16 GiB, T4
/// 16 GiB, V100M16 (V100 16 GB) 16 GiB, V100M32 (V100 32 GB) 32 GiB, A10
/// 24 GiB. G2 and G3 are undisclosed in the trace; they are assumed to have
/// 32 GiB, the most of any disclosed type (both come in 8-GPU servers like
/// the V100M32). The value matters only for jobs that state a memory need;
/// the trace's own pods do not.
pub fn openb_gpu_mem_mib(gpu_type: &str) -> Option<u64> {
    let gib = match gpu_type {
        "P100" | "T4" | "V100M16" => 16,
        "A10" => 24,
        "V100M32" | "G2" | "G3" => 32,
        _ => return None,
    };
    Some(gib * 1024)
}

/// An openb-style node: `gpus` GPUs of `gpu_type`, 2 GPUs per PCIe switch,
/// 2 sockets when it has 2 GPUs or more (the topology is not published).
fn openb_node(gpus: u32, gpu_type: &str, gpu_mem_mib: u64) -> NodeSpec {
    NodeSpec {
        gpus,
        gpu_type: gpu_type.to_string(),
        gpu_mem_mib,
        gpus_per_switch: gpus.clamp(1, 2),
        sockets: if gpus >= 2 { 2 } else { 1 },
        rack: 0,
        vc: VcId(0),
    }
}

/// A cluster built from an Alibaba PAI 2023 node list.
#[derive(Clone, Debug)]
pub struct NodeList {
    /// The cluster: one node per GPU node of the file, in file order, in one partition.
    pub spec: ClusterSpec,
    /// Data rows read.
    pub rows: usize,
    /// Rows skipped because the node has no GPU (`gpu` 0, empty `model`).
    pub cpu_only_nodes: usize,
}

/// Builds a cluster from a node list in the Alibaba PAI 2023 ("openb") format:
/// header `sn, cpu_milli, memory_mib, gpu, model` (`num_gpu` is accepted for
/// `gpu`; the GPU count, `model` and, if present, the node name `sn` are
/// read). Each row with GPUs becomes
/// one node of that many GPUs of type `model`, with the memory
/// [`openb_gpu_mem_mib`] gives; rows with 0 GPUs (CPU-only nodes) are skipped
/// and counted.
///
/// # Errors
/// [`TraceError`] naming the file, line and column of a bad GPU count, a GPU
/// type without a known memory size, a GPU node with no type, a node name
/// listed twice, or a file with no GPU node.
pub fn load_nodes_file(path: &Path) -> Result<NodeList, TraceError> {
    let bytes = crate::io::read_csv(path)?;
    let mut nodes = Vec::new();
    let (mut rows, mut cpu_only) = (0, 0);
    let mut cols: Option<(usize, usize)> = None;
    let mut sn_col: Option<usize> = None;
    let mut seen: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    crate::io::csvrows::for_each_row(
        path,
        &bytes,
        &crate::io::csvrows::RowPolicy::new(crate::error::RowErrors::Fail),
        |header, row| {
            if cols.is_none() {
                sn_col = header.find(&["sn"]);
                let gpu = header.find(&["gpu", "num_gpu"]).ok_or_else(|| TraceError::Format {
                file: path.to_path_buf(),
                message: format!(
                    "no column `gpu` (or `num_gpu`) in the header ({}); expected `sn,cpu_milli,memory_mib,gpu,model`",
                    header.names.join(", ")
                ),
            })?;
                cols = Some((gpu, header.require(path, "model")?));
            }
            let (gpu_col, model_col) = cols.expect("set above");
            rows += 1;
            if let Some(c) = sn_col {
                let name = row.str(c);
                if !name.is_empty() {
                    if let Some(first) = seen.get(name) {
                        return Err(row.err(c, format!("node `{name}` is listed twice (first on line {first})")));
                    }
                    seen.insert(name.to_string(), row.line);
                }
            }
            let gpus = row.count(gpu_col)?;
            if gpus == 0 {
                cpu_only += 1;
                return Ok(());
            }
            if gpus > MAX_GPUS_PER_NODE {
                let msg = format!("{gpus} GPUs on one node; at most {} are supported", MAX_GPUS_PER_NODE);
                return Err(row.err(gpu_col, msg));
            }
            let model = row.str(model_col);
            if model.is_empty() {
                return Err(row.err(model_col, format!("a node with {gpus} GPUs has no GPU type")));
            }
            let mem = openb_gpu_mem_mib(model).ok_or_else(|| {
                row.err(
                    model_col,
                    format!("unknown GPU type `{model}`; known: A10, G2, G3, P100, T4, V100M16, V100M32"),
                )
            })?;
            if nodes.len() >= MAX_NODES {
                let msg = format!("more than {} nodes; dlsched simulates at most that many", MAX_NODES);
                return Err(row.err(gpu_col, msg));
            }
            nodes.push(openb_node(gpus, model, mem));
            Ok(())
        },
    )?;
    if nodes.is_empty() {
        return Err(TraceError::Format { file: path.to_path_buf(), message: "no node with GPUs".into() });
    }
    let spec = ClusterSpec {
        name: format!("nodes:{}", path.display()),
        nodes,
        vc_names: vec!["default".into()],
        named_vcs: false,
    };
    spec.validate().map_err(|e| TraceError::Format { file: path.to_path_buf(), message: e.message })?;
    Ok(NodeList { spec, rows, cpu_only_nodes: cpu_only })
}

impl ClusterPreset {
    /// The preset's spec.
    pub fn spec(self) -> ClusterSpec {
        match self {
            ClusterPreset::Lab16 => {
                let mut s = ClusterSpec::uniform("lab16", 4, 4, "K80", 12 * 1024);
                for n in &mut s.nodes {
                    n.gpus_per_switch = 2;
                    n.sockets = 2;
                }
                s
            }
            ClusterPreset::Philly => {
                let node = |gpus: u32, ty: &str, gib: u64| NodeSpec {
                    gpus,
                    gpu_type: ty.to_string(),
                    gpu_mem_mib: gib * 1024,
                    gpus_per_switch: gpus.min(2),
                    sockets: 2,
                    rack: 0,
                    vc: VcId(0),
                };
                let mut nodes = vec![node(2, "philly-12g", 12); 321];
                nodes.extend(vec![node(8, "philly-24g", 24); 231]);
                ClusterSpec { name: "philly".into(), nodes, vc_names: vec!["default".into()], named_vcs: false }
            }
            ClusterPreset::AlibabaOpenb => {
                let nodes = OPENB_GPU_NODES
                    .iter()
                    .flat_map(|&(gpus, ty, count)| {
                        let mem = openb_gpu_mem_mib(ty).expect("every preset type has a memory size");
                        std::iter::repeat_n(openb_node(gpus, ty, mem), count as usize)
                    })
                    .collect();
                ClusterSpec { name: "alibaba-openb".into(), nodes, vc_names: vec!["default".into()], named_vcs: false }
            }
            ClusterPreset::LdwpTestbed => {
                let node = |gpus: u32, ty: &str, gib: u64| NodeSpec {
                    gpus,
                    gpu_type: ty.to_string(),
                    gpu_mem_mib: gib * 1024,
                    gpus_per_switch: 2,
                    sockets: 2,
                    rack: 0,
                    vc: VcId(0),
                };
                let mut nodes = vec![node(2, "K80", 24); 2];
                nodes.extend(vec![node(4, "P100", 8); 4]);
                nodes.extend(vec![node(4, "K80", 24); 4]);
                nodes.extend(vec![node(2, "P100", 8); 2]);
                ClusterSpec { name: "ldwp-testbed".into(), nodes, vc_names: vec!["default".into()], named_vcs: false }
            }
            ClusterPreset::HeliosVenus => {
                let mut nodes = Vec::new();
                for (i, &(_, n)) in VENUS_VC_NODES.iter().enumerate() {
                    nodes.extend(std::iter::repeat_n(helios_node(VcId(i as u16)), n as usize));
                }
                let vc_names = VENUS_VC_NODES.iter().map(|v| v.0.to_string()).collect();
                ClusterSpec { name: "helios-venus".into(), nodes, vc_names, named_vcs: true }
            }
            ClusterPreset::HeliosEarth => helios_uniform("earth", helios_gpus("earth")),
            ClusterPreset::HeliosSaturn => helios_uniform("saturn", helios_gpus("saturn")),
            ClusterPreset::HeliosUranus => helios_uniform("uranus", helios_gpus("uranus")),
            ClusterPreset::Pollux => ClusterSpec::uniform("pollux", 16, 4, "T4", 16 * 1024),
            ClusterPreset::Sia => sia_cluster("sia", &[("T4", 6), ("A100", 2), ("RTX2080Ti", 3)]),
            ClusterPreset::SiaPhysical => sia_cluster("sia-physical", &[("RTX2080Ti", 3), ("A100", 2), ("RTX6000", 1)]),
        }
    }
}

/// The GPU types of the Sia artifact's clusters (`sia-simulator/simulator_config.py`):
/// `(dlsched name, artifact suffix, GPUs per node (cluster_ngpus_per_node),
/// GPU memory GiB)`. Memory from the vendors' specifications: T4 16 GB
/// (NVIDIA T4 datasheet; AWS g4dn.12xlarge), V100 32 GB (Azure ND40rs_v2:
/// 8 × V100 32 GB NVLink), A100 40 GB (DGX A100 40 GB, as the artifact's
/// config names it), GeForce RTX 2080 Ti 11 GB GDDR6, Quadro RTX 6000 24 GB
/// GDDR6 (NVIDIA product pages); GB read as GiB, as the other presets do.
pub const SIA_GPUS: [(&str, &str, u32, u64); 5] = [
    ("T4", "aws", 4, 16),
    ("V100", "azure", 8, 32),
    ("A100", "dgx-ext", 8, 40),
    ("RTX2080Ti", "rtx", 8, 11),
    ("RTX6000", "quad", 4, 24),
];

/// A cluster of Sia's GPU types: `(type name, nodes)` groups in order, each
/// node with the type's GPUs per node and memory ([`SIA_GPUS`]), topology as
/// [`ClusterSpec::uniform`]'s.
fn sia_cluster(name: &str, groups: &[(&str, u32)]) -> ClusterSpec {
    let mut nodes = Vec::new();
    for &(ty, n) in groups {
        let &(_, _, per_node, gib) = SIA_GPUS.iter().find(|g| g.0 == ty).expect("a type of SIA_GPUS");
        nodes.extend(ClusterSpec::uniform(name, n, per_node, ty, gib * 1024).nodes);
    }
    ClusterSpec { name: name.into(), nodes, vc_names: vec!["default".into()], named_vcs: false }
}

/// The node count of a VC of `nodes` nodes scaled by `scale` (`--vc-scale`):
/// `nodes × scale` rounded to the nearest whole node (halves up), at least 1
/// node. Halving the Helios study's Philly VCs (64, 32, 16, 8 nodes) gives
/// 32, 16, 8, 4; a 3-node VC halved gives 2, a 1-node VC keeps 1.
pub fn scaled_vc_nodes(nodes: u32, scale: f64) -> u32 {
    ((f64::from(nodes) * scale).round() as u32).max(1)
}

/// [`load_vc_file`] with every VC's node count scaled by `scale` (in (0, 1];
/// [`scaled_vc_nodes`] rounds): each VC keeps its first nodes, so the VCs,
/// their order and their node sizes are the file's. The cluster is named
/// `vcs:<path>*<scale>`.
///
/// # Errors
/// As [`load_vc_file`]; a `scale` outside (0, 1] is a
/// [`TraceError::Format`] naming the file.
pub fn load_vc_file_scaled(
    path: &Path,
    scale: f64,
    gpu_type: &str,
    gpu_mem_mib: u64,
) -> Result<ClusterSpec, TraceError> {
    if !(scale > 0.0 && scale <= 1.0) {
        return Err(TraceError::Format {
            file: path.to_path_buf(),
            message: format!("VC scale {scale} is outside (0, 1]"),
        });
    }
    let mut spec = load_vc_file(path, gpu_type, gpu_mem_mib)?;
    let mut kept = vec![0u32; spec.vc_names.len()];
    let mut per_vc = vec![0u32; spec.vc_names.len()];
    for n in &spec.nodes {
        per_vc[n.vc.index()] += 1;
    }
    spec.nodes.retain(|n| {
        let i = n.vc.index();
        kept[i] += 1;
        kept[i] <= scaled_vc_nodes(per_vc[i], scale)
    });
    spec.name = format!("{}*{scale}", spec.name);
    spec.validate().map_err(|e| TraceError::Format { file: path.to_path_buf(), message: e.message })?;
    Ok(spec)
}

/// Builds a cluster from a VC partition file: one row per VC, header `vc,nodes`
/// and optionally `gpus_per_node` (default 8, the node size of the Helios study's
/// simulator). `node num` and `num` are accepted for `nodes`, so the Helios
/// artifact's `philly_vc.csv` and Lucid's `vc_config.csv` layouts load as they are.
/// Nodes are laid out VC by VC, in file order. Every GPU gets `gpu_type` with
/// `gpu_mem_mib` MiB.
///
/// # Errors
/// [`TraceError`] naming the file, line and column of the first bad value, a
/// missing column, a repeated VC, or an empty file.
pub fn load_vc_file(path: &Path, gpu_type: &str, gpu_mem_mib: u64) -> Result<ClusterSpec, TraceError> {
    let file = path.to_path_buf();
    let bytes = crate::io::read_csv(path)?;
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(&bytes[..]);
    let headers = rdr
        .headers()
        .map_err(|e| TraceError::Format { file: file.clone(), message: format!("cannot read header: {e}") })?
        .clone();
    let find = |names: &[&str]| headers.iter().position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)));
    // Lucid's vc_config.csv has an unnamed first column holding the VC name.
    let vc_col = find(&["vc", ""]).ok_or_else(|| TraceError::Format {
        file: file.clone(),
        message: "no `vc` column; expected a header like `vc,nodes,gpus_per_node`".into(),
    })?;
    let nodes_col = find(&["nodes", "node num", "node_num", "num"]).ok_or_else(|| TraceError::Format {
        file: file.clone(),
        message:
            "no `nodes` column (also accepted: `node num`, `num`); expected a header like `vc,nodes,gpus_per_node`"
                .into(),
    })?;
    let gpn_col = find(&["gpus_per_node"]);
    let mut spec = ClusterSpec {
        name: format!("vcs:{}", path.display()),
        nodes: Vec::new(),
        vc_names: Vec::new(),
        named_vcs: true,
    };
    // Lines counted from the bytes: the csv reader's count skips blank lines.
    let mut lines = crate::io::csvrows::LineCounter::new(&bytes);
    for rec in rdr.records() {
        let rec = rec.map_err(|e| crate::io::csvrows::csv_error(&file, &e, &mut lines))?;
        let line = rec.position().map_or(0, |p| lines.line_at(p.byte() as usize));
        let field = |col: usize| rec.get(col).unwrap_or("");
        let int = |col: usize, what: &str| -> Result<u32, TraceError> {
            field(col).parse::<u32>().map_err(|_| TraceError::Field {
                file: file.clone(),
                line,
                column: headers.get(col).unwrap_or(what).to_string(),
                message: format!("`{}` is not a whole number of {what}", field(col)),
            })
        };
        let name = field(vc_col).to_string();
        if name.is_empty() {
            return Err(TraceError::Field { file, line, column: "vc".into(), message: "empty VC name".into() });
        }
        if spec.vc_names.contains(&name) {
            return Err(TraceError::Field {
                file,
                line,
                column: "vc".into(),
                message: format!("VC `{name}` listed twice"),
            });
        }
        let nodes = int(nodes_col, "nodes")?;
        if nodes == 0 {
            return Err(TraceError::Field {
                file,
                line,
                column: "nodes".into(),
                message: format!("VC `{name}` has no nodes"),
            });
        }
        if spec.nodes.len() + nodes as usize > MAX_NODES {
            return Err(TraceError::Field {
                file,
                line,
                column: "nodes".into(),
                message: format!("more than {} nodes in all; dlsched simulates at most that many", MAX_NODES),
            });
        }
        let gpn = match gpn_col {
            Some(c) => int(c, "GPUs per node")?,
            None => 8,
        };
        if gpn == 0 || gpn > MAX_GPUS_PER_NODE {
            return Err(TraceError::Field {
                file,
                line,
                column: "gpus_per_node".into(),
                message: format!("{gpn} GPUs per node; expected 1 to {}", MAX_GPUS_PER_NODE),
            });
        }
        let Ok(vc) = u16::try_from(spec.vc_names.len()).map(VcId) else {
            return Err(TraceError::Field {
                file,
                line,
                column: "vc".into(),
                message: format!("more than {} VCs; dlsched supports at most that many", usize::from(u16::MAX) + 1),
            });
        };
        spec.vc_names.push(name);
        for _ in 0..nodes {
            spec.nodes.push(NodeSpec {
                gpus: gpn,
                gpu_type: gpu_type.to_string(),
                gpu_mem_mib,
                gpus_per_switch: gpn.min(2),
                sockets: if gpn >= 2 { 2 } else { 1 },
                rack: 0,
                vc,
            });
        }
    }
    if spec.vc_names.is_empty() {
        return Err(TraceError::Format { file, message: "no VC rows".into() });
    }
    spec.validate().map_err(|e| TraceError::Format { file: path.to_path_buf(), message: e.message })?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldwp_testbed_is_the_papers_node_list() {
        // 2 x 2 + 4 x 4 + 4 x 4 + 2 x 2 = 40 GPUs on 12 nodes; 24 GB nodes K80.
        let s = ClusterPreset::LdwpTestbed.spec();
        assert_eq!(s.nodes.len(), 12);
        assert_eq!(s.total_gpus(), 40);
        let shape: Vec<(u32, &str, u64)> =
            s.nodes.iter().map(|n| (n.gpus, n.gpu_type.as_str(), n.gpu_mem_mib / 1024)).collect();
        let mut want = vec![(2, "K80", 24); 2];
        want.extend(vec![(4, "P100", 8); 4]);
        want.extend(vec![(4, "K80", 24); 4]);
        want.extend(vec![(2, "P100", 8); 2]);
        assert_eq!(shape, want);
        s.validate().unwrap();
    }

    #[test]
    fn scaled_vc_file_keeps_each_vcs_first_nodes() {
        // 64 x 0.5 = 32 nodes; 3 x 0.5 = 1.5, rounded up to 2; 1 x 0.5 =
        // 0.5, rounded to 1 (and never below 1): 32 x 8 + 2 x 4 + 1 x 8 = 272 GPUs.
        assert_eq!([64, 3, 1, 8].map(|n| scaled_vc_nodes(n, 0.5)), [32, 2, 1, 4]);
        assert_eq!(scaled_vc_nodes(10, 0.24), 2); // 2.4 -> 2
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("vcs.csv");
        std::fs::write(&f, "vc,nodes,gpus_per_node\na,64,8\nb,3,4\nc,1,8\n").unwrap();
        let s = load_vc_file_scaled(&f, 0.5, "generic", 16384).unwrap();
        let per_vc: Vec<(u16, u32)> =
            (0..3u16).map(|v| (v, s.nodes.iter().filter(|n| n.vc == VcId(v)).map(|n| n.gpus).sum::<u32>())).collect();
        assert_eq!(per_vc, vec![(0, 256), (1, 8), (2, 8)]);
        assert_eq!(s.total_gpus(), 272);
        assert_eq!(s.vc_names, vec!["a", "b", "c"]);
        assert!(s.name.ends_with("vcs.csv*0.5"), "{}", s.name);
        // Scale 1 is the file itself.
        assert_eq!(
            load_vc_file_scaled(&f, 1.0, "generic", 16384).unwrap().nodes,
            load_vc_file(&f, "generic", 16384).unwrap().nodes
        );
        for bad in [0.0, -1.0, 1.5, f64::NAN] {
            let e = load_vc_file_scaled(&f, bad, "generic", 16384).unwrap_err().to_string();
            assert!(e.contains("vcs.csv") && e.contains("outside (0, 1]"), "{e}");
        }
    }

    #[test]
    fn helios_presets_by_hand() {
        // ⌈997 / 8⌉ = 125 nodes = 1,000 GPUs; 2,080 / 8 = 260; ⌈2,119 / 8⌉ = 265 = 2,120.
        let sizes: Vec<(usize, u32)> =
            [ClusterPreset::HeliosEarth, ClusterPreset::HeliosSaturn, ClusterPreset::HeliosUranus]
                .iter()
                .map(|p| {
                    let s = p.spec();
                    (s.nodes.len(), s.nodes.iter().map(|n| n.gpus).sum())
                })
                .collect();
        assert_eq!(sizes, [(125, 1000), (260, 2080), (265, 2120)]);
        // Venus: 9+5+8+20+6+12+4+11+4+8+3+32+10+2+1 = 135 nodes, 1,080 GPUs;
        // vcJsw (the 12th VC) has 32 nodes = 256 GPUs.
        let v = ClusterPreset::HeliosVenus.spec();
        assert!(v.named_vcs);
        assert_eq!(v.vc_names.len(), 15);
        assert_eq!((v.nodes.len(), v.nodes.iter().map(|n| n.gpus).sum::<u32>()), (135, 1080));
        let jsw = v.vc_names.iter().position(|n| n == "vcJsw").unwrap();
        assert_eq!(v.nodes.iter().filter(|n| n.vc.index() == jsw).map(|n| n.gpus).sum::<u32>(), 256);
        for p in [ClusterPreset::HeliosVenus, ClusterPreset::HeliosEarth] {
            assert!(p.spec().validate().is_ok());
        }
    }

    #[test]
    fn presets_match_published_sizes() {
        assert_eq!(ClusterPreset::Lab16.spec().total_gpus(), 16);
        let p = ClusterPreset::Philly.spec();
        assert_eq!(p.nodes.len(), 321 + 231);
        assert_eq!(p.total_gpus(), 321 * 2 + 231 * 8); // 2,490
        let pollux = ClusterPreset::Pollux.spec();
        assert_eq!((pollux.nodes.len(), pollux.total_gpus()), (16, 64)); // 16 × 4 T4
        assert!(pollux.nodes.iter().all(|n| n.gpu_type == "T4" && n.gpu_mem_mib == 16 * 1024));
        // Sia's simulator_config.py: aws 6 × 4, dgx-ext 2 × 8, rtx 3 × 8 = 24 + 16 + 24 = 64 GPUs;
        // phoebe: rtx 3 × 8, dgx-ext 2 × 8, quad 1 × 4 = 24 + 16 + 4 = 44 GPUs.
        let sia = ClusterPreset::Sia.spec();
        assert_eq!((sia.nodes.len(), sia.total_gpus()), (11, 64));
        let kinds: Vec<(&str, u32, u64)> =
            sia.nodes.iter().map(|n| (n.gpu_type.as_str(), n.gpus, n.gpu_mem_mib / 1024)).collect();
        assert_eq!(kinds[0], ("T4", 4, 16));
        assert_eq!(kinds[6], ("A100", 8, 40));
        assert_eq!(kinds[8], ("RTX2080Ti", 8, 11));
        let phys = ClusterPreset::SiaPhysical.spec();
        assert_eq!((phys.nodes.len(), phys.total_gpus()), (6, 44));
        assert_eq!(
            (phys.nodes[5].gpu_type.as_str(), phys.nodes[5].gpus, phys.nodes[5].gpu_mem_mib),
            ("RTX6000", 4, 24 * 1024)
        );
        sia.validate().unwrap();
        phys.validate().unwrap();
    }

    #[test]
    fn openb_preset_has_the_node_list_totals() {
        let s = ClusterPreset::AlibabaOpenb.spec();
        assert_eq!(s.nodes.len(), 1_213);
        assert_eq!(s.total_gpus(), 6_212);
        s.validate().unwrap();
    }

    #[test]
    fn nodes_file_skips_cpu_nodes_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("nodes.csv");
        std::fs::write(
            &good,
            "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,65536,0,\nn2,96000,393216,8,G2\n",
        )
        .unwrap();
        let l = load_nodes_file(&good).unwrap();
        assert_eq!((l.rows, l.cpu_only_nodes, l.spec.nodes.len(), l.spec.total_gpus()), (3, 1, 2, 10));
        assert_eq!((l.spec.nodes[0].gpu_type.as_str(), l.spec.nodes[0].gpu_mem_mib), ("P100", 16 * 1024));
        assert_eq!((l.spec.nodes[1].gpu_type.as_str(), l.spec.nodes[1].gpus), ("G2", 8));

        let bad = dir.path().join("bad.csv");
        std::fs::write(&bad, "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,P100\nn1,1,1,two,T4\n").unwrap();
        let e = load_nodes_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.csv:3") && e.contains("`gpu`") && e.contains("two"), "{e}");
        std::fs::write(&bad, "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,H100\n").unwrap();
        let e = load_nodes_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.csv:2") && e.contains("`model`") && e.contains("H100"), "{e}");
        std::fs::write(&bad, "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,0,\n").unwrap();
        let e = load_nodes_file(&bad).unwrap_err().to_string();
        assert!(e.contains("no node with GPUs"), "{e}");
        std::fs::write(&bad, "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,P100\nn1,1,1,0,\nn0,1,1,8,G2\n").unwrap();
        let e = load_nodes_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.csv:4") && e.contains("`sn`") && e.contains("first on line 2"), "{e}");
    }

    #[test]
    fn vc_file_builds_partitions_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("vcs.csv");
        std::fs::write(&good, "vc,nodes,gpus_per_node\na,2,8\nb,1,4\n").unwrap();
        let s = load_vc_file(&good, "V100", 16384).unwrap();
        assert_eq!(s.vc_names, vec!["a", "b"]);
        assert_eq!(s.total_gpus(), 2 * 8 + 4);
        assert_eq!(s.nodes[2].vc, VcId(1));

        let bad = dir.path().join("bad.csv");
        std::fs::write(&bad, "vc,nodes\na,2\nb,two\n").unwrap();
        let e = load_vc_file(&bad, "V100", 16384).unwrap_err().to_string();
        assert!(e.contains("bad.csv:3") && e.contains("`nodes`") && e.contains("two"), "{e}");
    }
}
