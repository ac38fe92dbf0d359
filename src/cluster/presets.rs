//! Cluster presets from published cluster descriptions, and VC partition files.

use std::path::Path;

use super::{ClusterSpec, NodeSpec};
use crate::error::{ConfigError, TraceError};
use crate::ids::VcId;

/// A named cluster from a publication or a trace's machine list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
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
        }
    }
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
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| TraceError::Io { file: file.clone(), err: std::io::Error::other(e) })?;
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
    for rec in rdr.records() {
        let rec = rec.map_err(|e| csv_error(&file, &e))?;
        let line = rec.position().map_or(0, |p| p.line());
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
        if spec.nodes.len() + nodes as usize > super::MAX_NODES {
            return Err(TraceError::Field {
                file,
                line,
                column: "nodes".into(),
                message: format!("more than {} nodes in all; dlsched simulates at most that many", super::MAX_NODES),
            });
        }
        let gpn = match gpn_col {
            Some(c) => int(c, "GPUs per node")?,
            None => 8,
        };
        if gpn == 0 || gpn > super::MAX_GPUS_PER_NODE {
            return Err(TraceError::Field {
                file,
                line,
                column: "gpus_per_node".into(),
                message: format!("{gpn} GPUs per node; expected 1 to {}", super::MAX_GPUS_PER_NODE),
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
    spec.validate().map_err(|ConfigError(m)| TraceError::Format { file: path.to_path_buf(), message: m })?;
    Ok(spec)
}

/// Maps a csv crate error to a [`TraceError`] with the line it names.
pub(crate) fn csv_error(file: &Path, e: &csv::Error) -> TraceError {
    let line = e.position().map_or(0, |p| p.line());
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("row has {len} fields but the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "row is not valid UTF-8".to_string(),
        _ => e.to_string(),
    };
    TraceError::Row { file: file.to_path_buf(), line, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_match_published_sizes() {
        assert_eq!(ClusterPreset::Lab16.spec().total_gpus(), 16);
        let p = ClusterPreset::Philly.spec();
        assert_eq!(p.nodes.len(), 321 + 231);
        assert_eq!(p.total_gpus(), 321 * 2 + 231 * 8); // 2,490
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
