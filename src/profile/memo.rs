//! Memo tables for the profile rate and co-location models: a repeated
//! question (the same model, batch, GPU type and split; the same tenants of
//! a GPU type) costs one hash lookup instead of string allocations and
//! table scans.
//!
//! A memo is only looked up, never iterated, and it stores what the slow
//! path computed from the same inputs, so no result depends on whether or
//! when an entry was made; the models that use one replay their counters on
//! a hit, so the counters are the same too. Names are interned to small
//! integers, a key is a slice of `u32`, and the table is cleared when it
//! holds [`MAX_ENTRIES`] keys (memory stays bounded; results are unchanged).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Entries a memo holds before it starts over (each a few dozen bytes).
pub const MAX_ENTRIES: usize = 1 << 20;

/// A multiply-rotate hash over 8-byte words (the rustc `FxHasher` scheme):
/// fast for short integer keys; not DoS-resistant, which a memo of a run's
/// own keys does not need.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl WordHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// The [`std::hash::BuildHasher`] of [`WordHasher`].
pub type WordState = BuildHasherDefault<WordHasher>;

/// Results by a key of small integers, with an interner for the names a
/// key holds. Build a key with [`KeyMemo::start`], [`KeyMemo::push`] and
/// [`KeyMemo::push_name`], then [`KeyMemo::get`] or [`KeyMemo::insert`].
#[derive(Debug)]
pub struct KeyMemo<V> {
    names: HashMap<String, u32, WordState>,
    map: HashMap<Box<[u32]>, V, WordState>,
    key: Vec<u32>,
}

impl<V> Default for KeyMemo<V> {
    fn default() -> Self {
        KeyMemo { names: HashMap::default(), map: HashMap::default(), key: Vec::new() }
    }
}

impl<V: Clone> KeyMemo<V> {
    /// Starts a new key.
    pub fn start(&mut self) {
        self.key.clear();
    }

    /// Appends a number to the key.
    pub fn push(&mut self, n: u32) {
        self.key.push(n);
    }

    /// Appends a name to the key (its interned id).
    pub fn push_name(&mut self, name: &str) {
        let id = match self.names.get(name) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
                self.names.insert(name.to_string(), id);
                id
            }
        };
        self.key.push(id);
    }

    /// The value stored under the key built so far.
    pub fn get(&self) -> Option<V> {
        self.map.get(&self.key[..]).cloned()
    }

    /// Stores `value` under the key built so far.
    pub fn insert(&mut self, value: V) {
        if self.map.len() >= MAX_ENTRIES {
            self.map.clear();
        }
        self.map.insert(self.key.clone().into_boxed_slice(), value);
    }

    /// Keys stored.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_names_and_numbers_are_told_apart() {
        let mut m: KeyMemo<f64> = KeyMemo::default();
        m.start();
        m.push_name("resnet50");
        m.push(32);
        assert_eq!(m.get(), None);
        m.insert(0.5);
        m.start();
        m.push_name("resnet50");
        m.push(64);
        assert_eq!(m.get(), None);
        m.insert(0.25);
        m.start();
        m.push_name("vgg16");
        m.push(32);
        assert_eq!(m.get(), None);
        m.start();
        m.push_name("resnet50");
        m.push(32);
        assert_eq!(m.get(), Some(0.5));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn the_hasher_reads_every_byte() {
        let h = |b: &[u8]| {
            let mut s = WordHasher::default();
            s.write(b);
            s.finish()
        };
        assert_ne!(h(&[1, 2, 3]), h(&[1, 2, 3, 0]));
        assert_ne!(h(&[0; 9]), h(&[0; 8]));
        assert_ne!(h(&[1, 0, 0, 0, 0, 0, 0, 0, 0]), h(&[0, 0, 0, 0, 0, 0, 0, 0, 1]));
    }
}
