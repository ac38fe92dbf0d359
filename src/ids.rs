//! Newtype identifiers: jobs, nodes, GPUs and virtual clusters never mix.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $inner:ty, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);

        impl $name {
            /// The id as a `usize` index into its table.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A job's dense index in the [`crate::job::JobTable`]; jobs are numbered in
    /// (submit time, trace order), so a smaller id was submitted no later.
    JobId, u32, "job#"
);
id_type!(
    /// A node's index in the cluster, in the order the cluster spec lists nodes.
    NodeId, u32, "node"
);
id_type!(
    /// A GPU's global index in the cluster; a node's GPUs are contiguous.
    GpuId, u32, "gpu"
);
id_type!(
    /// A virtual-cluster (VC) partition's index; a cluster without VCs has one.
    VcId, u16, "vc#"
);
