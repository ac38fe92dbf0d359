//! Locality tiers between GPU pairs: how far apart two GPUs of one placement are.

use serde::Serialize;

/// How close two GPUs are, from nearest to farthest. A placement's spread is the
/// farthest tier between any two of its GPUs.
///
/// Tiers follow the topology the GENIE paper discusses for its 16-GPU cluster
/// (TPDS 2020, §4: same PCIe switch < same CPU socket < across sockets (QPI) <
/// across nodes (InfiniBand)), extended by rack for larger clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocalityTier {
    /// The same GPU (a GPU with itself, or co-located jobs).
    SameGpu,
    /// Different GPUs behind one PCIe switch.
    SamePcieSwitch,
    /// Different switches under one CPU socket.
    SameSocket,
    /// Different sockets of one node (traffic crosses QPI/UPI).
    SameNode,
    /// Different nodes in one rack (InfiniBand / Ethernet through the ToR switch).
    SameRack,
    /// Different racks.
    CrossRack,
}

impl LocalityTier {
    /// The tier's name as written in outputs (`same-node`, `cross-rack`, ...).
    pub fn name(self) -> &'static str {
        match self {
            LocalityTier::SameGpu => "same-gpu",
            LocalityTier::SamePcieSwitch => "same-pcie-switch",
            LocalityTier::SameSocket => "same-socket",
            LocalityTier::SameNode => "same-node",
            LocalityTier::SameRack => "same-rack",
            LocalityTier::CrossRack => "cross-rack",
        }
    }
}
