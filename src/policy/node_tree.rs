//! An index of a partition's nodes by score for the sharing packers
//! ([`super::sharing`], [`super::memeff`], [`super::fgd`]): a min-tree over
//! the nodes, by their place in the partition, of each node's key for one
//! request class, with the node stamps ([`crate::cluster::Cluster::node_stamp`])
//! the keys were computed at. A search brings the keys of the nodes whose
//! stamp changed up to date and reads the least at the root: the node a scan
//! of every node in partition order would pick when the key ends with the
//! node's place (ties then go to the earlier node, as in a scan). The
//! changed nodes are read from the cluster's log of stamp changes
//! ([`Cluster::nodes_changed_since`]) when it reaches back to the tree's
//! last update and is shorter than the partition, else every node's stamp
//! is compared.

use crate::cluster::{ChangeMark, Cluster};
use crate::ids::{NodeId, VcId};

/// A min-tree over `n` leaves (module docs).
#[derive(Clone, Debug)]
pub(super) struct NodeTree<K> {
    /// Per leaf: the node stamp its key was computed at (0: never; stamps
    /// start at 1).
    pub(super) stamps: Vec<u64>,
    /// Leaves at `size..size + n`, parents at `i / 2`, the least at 1.
    keys: Vec<K>,
    size: usize,
    /// The cluster's change log where the last [`NodeTree::refresh`] left it.
    mark: ChangeMark,
}

impl<K: Ord + Copy> NodeTree<K> {
    /// A tree of `nodes` leaves, every key `none` (a key greater than any
    /// real one: a node that cannot host the class).
    pub(super) fn new(nodes: usize, none: K) -> Self {
        let size = nodes.next_power_of_two().max(1);
        NodeTree { stamps: vec![0; nodes], keys: vec![none; 2 * size], size, mark: ChangeMark::default() }
    }

    /// Brings the keys of partition `vc`'s nodes (the tree's leaves, by
    /// place) up to date: `key(place, node)` for each node whose stamp
    /// differs from its leaf's.
    pub(super) fn refresh(&mut self, cluster: &Cluster, vc: VcId, mut key: impl FnMut(usize, NodeId) -> K) {
        let nodes = &cluster.partition(vc).nodes;
        let mut update = |tree: &mut Self, l: usize, node: NodeId| {
            let stamp = cluster.node_stamp(node);
            if tree.stamps[l] != stamp {
                tree.stamps[l] = stamp;
                let k = key(l, node);
                tree.set(l, k);
            }
        };
        match cluster.nodes_changed_since(self.mark) {
            Some(changed) if changed.len() < nodes.len() => {
                for &node in changed {
                    if cluster.node(node).vc == vc {
                        update(self, cluster.partition_place(node), node);
                    }
                }
            }
            _ => {
                for (l, &node) in nodes.iter().enumerate() {
                    update(self, l, node);
                }
            }
        }
        self.mark = cluster.change_mark();
    }

    /// Sets leaf `leaf`'s key and the minima above it.
    pub(super) fn set(&mut self, leaf: usize, key: K) {
        let mut i = self.size + leaf;
        if self.keys[i] == key {
            return;
        }
        self.keys[i] = key;
        while i > 1 {
            i /= 2;
            let m = self.keys[2 * i].min(self.keys[2 * i + 1]);
            if self.keys[i] == m {
                break;
            }
            self.keys[i] = m;
        }
    }

    /// The least key.
    pub(super) fn least(&self) -> K {
        self.keys[1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_least_leaf_after_any_updates() {
        // 5 leaves (padded to 8): set and reset leaves, compare with a scan.
        let mut t = NodeTree::new(5, (u64::MAX, u32::MAX));
        let mut leaves = [(u64::MAX, u32::MAX); 5];
        let updates = [(3, 7), (1, 9), (4, 7), (3, u64::MAX), (0, 2), (0, 11), (2, 7), (1, 0)];
        for (leaf, score) in updates {
            let key = if score == u64::MAX { (u64::MAX, u32::MAX) } else { (score, leaf as u32) };
            t.set(leaf, key);
            leaves[leaf] = key;
            assert_eq!(t.least(), *leaves.iter().min().unwrap());
        }
        // (score 0 on leaf 1) after the last update; before it (7, leaf 2).
        assert_eq!(t.least(), (0, 1));
    }
}
