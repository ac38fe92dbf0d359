//! The order of jobs submitted at the same instant.
//!
//! dlsched keeps trace order for same-instant submissions (a stable sort by
//! submit time). Simulators written with pandas usually sort their job table
//! with `DataFrame.sort_values(by="submit_time")`, whose default algorithm
//! (`kind="quicksort"`) is not stable: jobs submitted in the same second come
//! out in an order set by the sorting code, not by the file. A FIFO queue then
//! serves them in that order. [`TieOrder::Numpy2Avx512`] reproduces the order
//! one widely installed build gives, so that such a simulator's schedule can
//! be matched job for job.
//!
//! # The emulated sort
//!
//! NumPy 2.0, 2.1 and 2.2 hand `argsort(kind="quicksort")` of a 64-bit integer
//! array to Intel's x86-simd-sort (BSD-3-Clause; the copy vendored in NumPy
//! 2.2.6, `numpy/_core/src/npysort/x86-simd-sort/src/xss-common-argsort.h`)
//! when the CPU has AVX-512 (Skylake-X or newer, AMD Zen 4). Its order of equal
//! keys follows from four pieces, all emulated here lane by lane (one 512-bit
//! register = 8 keys and their 8 indices):
//!
//! - a quicksort whose pivot is the 5th smallest of 8 samples taken at
//!   `left + k·⌊(right − left)/8⌋`, k = 1..8;
//! - a partition that first moves `(right − left) mod 32` elements one by one
//!   from the left end (keys ≥ pivot swapped to the shrinking right end), then
//!   keeps the first and last 32 elements aside, reads 4 registers at a time
//!   from whichever side has less room left, and compress-stores each
//!   register's keys < pivot to the left store point and keys ≥ pivot to the
//!   right one, in lane order; the 64 kept elements are stored last;
//! - recursion skipped on a side whose elements all equal the pivot, and a
//!   depth limit of 2·⌊log2 n⌋ partitions, beyond which the range goes to
//!   `std::sort` (emulated as GNU libstdc++ implements it: introsort with a
//!   median-of-3 pivot and unguarded partition, heapsort past 2·⌊log2 n⌋
//!   levels, insertion sort of runs of 16). A range whose pivot is its
//!   smallest key is partitioned again as a whole (reordered, not shrunk),
//!   so ranges with few distinct keys reach this fallback;
//! - ranges of at most 256 elements sorted by bitonic networks over
//!   ⌈n/8⌉ registers rounded up to a power of two (the last ones padded with
//!   `i64::MAX`), where every compare-exchange swaps two lanes only if the
//!   keys differ.
//!
//! The two sides of a large partition are sorted on two threads; they are
//! disjoint, so the result does not depend on the thread count.
//!
//! The test `tests/it/tie_order.rs` checks the emulation against NumPy 2.2.6's
//! own output on generated arrays, and the differential test in
//! `tests/it/fidelity.rs` uses it to reproduce the Helios simulator's FIFO
//! schedule of `../shared/fidelity/helios-philly/` job for job.

use serde::Serialize;

/// How jobs submitted at the same instant are ordered before the policy sees
/// them (FIFO serves them in this order; SJF uses it among equal durations).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum TieOrder {
    /// Trace file order (a stable sort by submit time). The default.
    #[default]
    Trace,
    /// The order NumPy 2.0–2.2's `argsort(kind="quicksort")` gives on an
    /// AVX-512 CPU, as pandas' default `sort_values` over the submit times in
    /// file order does (the Helios simulator's tie order in
    /// `../shared/fidelity/helios-philly`). The sort runs over every row of
    /// the file, skipped ones included; a simulator that drops rows before
    /// sorting (the Helios one drops 0-GPU jobs and other VCs' jobs) is
    /// matched when the file holds only rows it keeps, as the fidelity window
    /// does.
    #[cfg_attr(feature = "cli", value(name = "numpy2-avx512"))]
    Numpy2Avx512,
}

crate::names::value_names!(TieOrder { Trace => "trace", Numpy2Avx512 => "numpy2-avx512" });

/// Reorders `items` so that `items[i]` becomes the old `items[perm[i]]`, in
/// place (following the permutation's cycles).
///
/// # Panics
/// If `perm` is not a permutation of `0..items.len()` (a bug in the caller).
pub fn apply_permutation<T>(items: &mut [T], perm: &[usize]) {
    assert_eq!(items.len(), perm.len(), "permutation length");
    let mut done = vec![false; perm.len()];
    for start in 0..perm.len() {
        if done[start] {
            continue;
        }
        // Walk the cycle: the slot `i` takes the item at `perm[i]`.
        let mut i = start;
        loop {
            done[i] = true;
            let j = perm[i];
            if j == start {
                break;
            }
            items.swap(i, j);
            i = j;
        }
    }
}

impl TieOrder {
    /// True for the default, so manifests and run ids leave it out.
    pub fn is_trace(&self) -> bool {
        *self == TieOrder::Trace
    }

    /// The order in which to take `keys` (one per trace row, in file order):
    /// a permutation of `0..keys.len()` that sorts `keys` ascending, ties as
    /// this rule orders them.
    ///
    pub fn permutation(self, keys: &[i64]) -> Vec<usize> {
        match self {
            TieOrder::Trace => {
                let mut p: Vec<usize> = (0..keys.len()).collect();
                p.sort_by_key(|&i| keys[i]);
                p
            }
            TieOrder::Numpy2Avx512 => numpy2_avx512_argsort(keys),
        }
    }

    /// Puts trace rows (in file order) in this rule's order by submit time.
    /// [`TieOrder::Trace`] leaves them as they are: admission's stable sort
    /// by submit time gives its order. The other rules' order is sorted by
    /// submit time too, so that stable sort keeps it.
    pub fn order_records(self, records: &mut [crate::trace::TraceRecord]) {
        if self.is_trace() {
            return;
        }
        let keys: Vec<i64> = records.iter().map(|r| r.submit_ms as i64).collect();
        apply_permutation(records, &self.permutation(&keys));
    }
}

/// Keys per 512-bit register.
const LANES: usize = 8;
/// Registers the partition reads at a time.
const UNROLL: usize = 4;
/// Largest range sorted by the bitonic networks.
const NETWORK_MAX: usize = 256;

/// `numpy.argsort(keys, kind="quicksort")` as NumPy 2.0–2.2 computes it on a
/// CPU with AVX-512 (see the module documentation for the algorithm).
///
/// Returns a permutation `p` of `0..keys.len()` with `keys[p[i]]` ascending.
pub fn numpy2_avx512_argsort(keys: &[i64]) -> Vec<usize> {
    let n = keys.len();
    // Each index travels with its key, so no step gathers keys by index.
    let mut arg: Vec<Item> = keys.iter().copied().zip(0..n).collect();
    if n > 1 {
        let max_iters = 2 * ((n as f64).log2() as usize);
        sort_range(&mut arg, max_iters);
    }
    arg.into_iter().map(|(_, i)| i).collect()
}

/// A key and the index it came from.
type Item = (i64, usize);

/// Ranges above this many rows sort their two parts on two threads (the
/// parts are disjoint, so the result does not depend on the thread count).
const PARALLEL_MIN: usize = 16_384;

/// Sorts `arg` (x86-simd-sort's `argsort_64bit_` on one range).
fn sort_range(arg: &mut [Item], max_iters: usize) {
    if max_iters == 0 {
        std_sort(arg);
        return;
    }
    if arg.len() <= NETWORK_MAX {
        network_sort(arg);
        return;
    }
    let pivot = pivot_of(arg, 0, arg.len() - 1);
    let (pivot_index, smallest, biggest) = partition(arg, 0, arg.len(), pivot);
    let (lo, hi) = arg.split_at_mut(pivot_index);
    let parallel = lo.len().min(hi.len()) >= PARALLEL_MIN;
    let mut sort_lo = move || {
        if pivot != smallest {
            sort_range(lo, max_iters - 1);
        }
    };
    let mut sort_hi = move || {
        if pivot != biggest {
            sort_range(hi, max_iters - 1);
        }
    };
    if parallel {
        rayon::join(sort_lo, sort_hi);
    } else {
        sort_lo();
        sort_hi();
    }
}

/// Runs at most this long are left to the final insertion sort (libstdc++'s
/// `_S_threshold`).
const STD_THRESHOLD: usize = 16;

/// GNU libstdc++'s `std::sort` of indices by key (`__introsort_loop`, then
/// `__final_insertion_sort`), as the library's fallback calls it.
fn std_sort(a: &mut [Item]) {
    let n = a.len();
    if n == 0 {
        return;
    }
    let less = |x: Item, y: Item| x.0 < y.0;
    introsort_loop(a, 2 * n.ilog2() as usize);
    if n > STD_THRESHOLD {
        insertion_sort(&mut a[..STD_THRESHOLD]);
        for i in STD_THRESHOLD..n {
            // Unguarded: a[..16] holds the range's minimum.
            let v = a[i];
            let mut j = i;
            while less(v, a[j - 1]) {
                a[j] = a[j - 1];
                j -= 1;
            }
            a[j] = v;
        }
    } else {
        insertion_sort(a);
    }
}

fn introsort_loop(a: &mut [Item], mut depth: usize) {
    let less = |x: Item, y: Item| x.0 < y.0;
    let mut last = a.len();
    while last > STD_THRESHOLD {
        if depth == 0 {
            heap_sort(&mut a[..last]);
            return;
        }
        depth -= 1;
        // __move_median_to_first(first, first + 1, mid, last - 1)
        let (x, y, z) = (1, last / 2, last - 1);
        let m = if less(a[x], a[y]) {
            if less(a[y], a[z]) {
                y
            } else if less(a[x], a[z]) {
                z
            } else {
                x
            }
        } else if less(a[x], a[z]) {
            x
        } else if less(a[y], a[z]) {
            z
        } else {
            y
        };
        a.swap(0, m);
        // __unguarded_partition(first + 1, last, pivot = first)
        let p = a[0];
        let (mut i, mut j) = (1, last);
        let cut = loop {
            while less(a[i], p) {
                i += 1;
            }
            j -= 1;
            while less(p, a[j]) {
                j -= 1;
            }
            if i >= j {
                break i;
            }
            a.swap(i, j);
            i += 1;
        };
        introsort_loop(&mut a[cut..last], depth);
        last = cut;
    }
}

fn insertion_sort(a: &mut [Item]) {
    let less = |x: Item, y: Item| x.0 < y.0;
    for i in 1..a.len() {
        let v = a[i];
        if less(v, a[0]) {
            a.copy_within(0..i, 1);
            a[0] = v;
        } else {
            let mut j = i;
            while less(v, a[j - 1]) {
                a[j] = a[j - 1];
                j -= 1;
            }
            a[j] = v;
        }
    }
}

/// libstdc++'s `__partial_sort(first, last, last)`: `__make_heap`, then
/// `__sort_heap`.
fn heap_sort(a: &mut [Item]) {
    let len = a.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let v = a[parent];
        adjust_heap(a, parent, len, v);
        if parent == 0 {
            break;
        }
        parent -= 1;
    }
    let mut last = len;
    while last > 1 {
        last -= 1;
        let v = a[last];
        a[last] = a[0];
        adjust_heap(a, 0, last, v);
    }
}

fn adjust_heap(a: &mut [Item], mut hole: usize, len: usize, v: Item) {
    let less = |x: Item, y: Item| x.0 < y.0;
    let top = hole;
    let mut child = hole;
    while child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(a[child], a[child - 1]) {
            child -= 1;
        }
        a[hole] = a[child];
        hole = child;
    }
    if len & 1 == 0 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    // __push_heap (the parent is only computed for a hole above `top`, so
    // `hole - 1` never goes below 0)
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(a[parent], v) {
            break;
        }
        a[hole] = a[parent];
        hole = parent;
    }
    a[hole] = v;
}

/// The 5th smallest of 8 keys sampled evenly from `arg[left..=right]`.
fn pivot_of(arg: &[Item], left: usize, right: usize) -> i64 {
    if right - left < LANES {
        return arg[right].0;
    }
    let step = (right - left) / LANES;
    let mut sample: [i64; LANES] = std::array::from_fn(|k| arg[left + (k + 1) * step].0);
    sample.sort_unstable();
    sample[4]
}

/// Partitions `arg[left..right]` (right exclusive) around `pivot`: keys below
/// it first. Returns the first index of the upper part and the smallest and
/// largest key of the range.
fn partition(arg: &mut [Item], mut left: usize, mut right: usize, pivot: i64) -> (usize, i64, i64) {
    let (mut smallest, mut biggest) = (i64::MAX, i64::MIN);
    // The caller only partitions ranges above NETWORK_MAX, which is more than
    // the 8 · UNROLL · LANES below which the library uses a one-register pass.
    debug_assert!(right - left > 8 * UNROLL * LANES);
    let block = UNROLL * LANES;
    for _ in 0..(right - left) % block {
        let k = arg[left].0;
        smallest = smallest.min(k);
        biggest = biggest.max(k);
        if k >= pivot {
            right -= 1;
            arg.swap(left, right);
        } else {
            left += 1;
        }
    }
    if left == right {
        return (left, smallest, biggest);
    }
    let load = |arg: &[Item], at: usize| -> [Item; LANES] { std::array::from_fn(|j| arg[at + j]) };
    let kept_left: [[Item; LANES]; UNROLL] = std::array::from_fn(|i| load(arg, left + LANES * i));
    let kept_right: [[Item; LANES]; UNROLL] = std::array::from_fn(|i| load(arg, right - LANES * (UNROLL - i)));
    // The upper part is written downwards from `r_end` (exclusive): the
    // library keeps `r_end - LANES`, which would go below 0 when the upper
    // part reaches the start of the slice, so the end itself is kept here.
    let mut r_end = right;
    let mut l_store = left;
    left += block;
    right -= block;
    let mut store = |arg: &mut [Item], reg: &[Item; LANES], l_store: &mut usize, r_end: &mut usize| {
        // Both compress-stores at once, without branches: every lane is
        // written to both buffers and counted in one.
        let mut lower_buf = [(0, 0); LANES];
        let mut upper_buf = [(0, 0); LANES];
        let (mut nl, mut nu) = (0, 0);
        for &i in reg {
            smallest = smallest.min(i.0);
            biggest = biggest.max(i.0);
            lower_buf[nl] = i;
            upper_buf[nu] = i;
            let up = usize::from(i.0 >= pivot);
            nu += up;
            nl += 1 - up;
        }
        arg[*l_store..*l_store + nl].copy_from_slice(&lower_buf[..nl]);
        let r = *r_end - nu;
        arg[r..r + nu].copy_from_slice(&upper_buf[..nu]);
        *l_store += nl;
        *r_end = r;
    };
    while right != left {
        let regs: [[Item; LANES]; UNROLL] = if r_end - right < left - l_store {
            right -= block;
            std::array::from_fn(|i| load(arg, right + i * LANES))
        } else {
            let regs = std::array::from_fn(|i| load(arg, left + i * LANES));
            left += block;
            regs
        };
        for reg in &regs {
            store(arg, reg, &mut l_store, &mut r_end);
        }
    }
    for reg in kept_left.iter().chain(&kept_right) {
        store(arg, reg, &mut l_store, &mut r_end);
    }
    (l_store, smallest, biggest)
}

/// One register: 8 keys and the indices they came from.
#[derive(Clone, Copy)]
struct Reg {
    key: [i64; LANES],
    idx: [usize; LANES],
}

/// Lane pairings of the register networks: `(low, high)` lanes compared,
/// the high lane keeping the larger key. Each is one permutation of
/// x86-simd-sort with its mask: `swap_n<2>` with 0xAA, `NETWORK_64BIT_1`
/// (reverse within halves) with 0xCC, `reverse` with 0xF0,
/// `NETWORK_64BIT_3` (lane ^ 2) with 0xCC, `NETWORK_64BIT_4` (lane ^ 4) with 0xF0.
type Pairs = [(usize, usize); 4];
const SWAP_1: Pairs = [(0, 1), (2, 3), (4, 5), (6, 7)];
const REV_HALVES: Pairs = [(0, 3), (1, 2), (4, 7), (5, 6)];
const REVERSE: Pairs = [(0, 7), (1, 6), (2, 5), (3, 4)];
const SWAP_2: Pairs = [(0, 2), (1, 3), (4, 6), (5, 7)];
const SWAP_4: Pairs = [(0, 4), (1, 5), (2, 6), (3, 7)];

impl Reg {
    /// Compare-exchange of each lane pair: the high lane keeps the larger
    /// key; the lanes trade indices only if their keys differ, so equal keys
    /// stay put (the register form of `cmp_merge`).
    #[inline(always)]
    fn compare_lanes(&mut self, pairs: &Pairs) {
        for &(lo, hi) in pairs {
            if self.key[lo] > self.key[hi] {
                self.key.swap(lo, hi);
                self.idx.swap(lo, hi);
            }
        }
    }

    fn reversed(mut self) -> Self {
        self.key.reverse();
        self.idx.reverse();
        self
    }

    /// Sorts the register (x86-simd-sort's `sort_reg_8lanes`).
    fn sort(&mut self) {
        for pairs in [&SWAP_1, &REV_HALVES, &SWAP_1, &REVERSE, &SWAP_2, &SWAP_1] {
            self.compare_lanes(pairs);
        }
    }

    /// Sorts a bitonic register (`bitonic_merge_reg_8lanes`).
    fn merge_bitonic(&mut self) {
        for pairs in [&SWAP_4, &SWAP_2, &SWAP_1] {
            self.compare_lanes(pairs);
        }
    }
}

/// Lane-wise compare-exchange of two registers: smaller keys to `a`, swapping
/// a lane pair only if `a`'s key is the larger (`COEX`).
fn coex(a: &mut Reg, b: &mut Reg) {
    for i in 0..LANES {
        if a.key[i] > b.key[i] {
            std::mem::swap(&mut a.key[i], &mut b.key[i]);
            std::mem::swap(&mut a.idx[i], &mut b.idx[i]);
        }
    }
}

/// Merges `regs` (each sorted, as pairs of sorted halves) into one sorted run
/// (`bitonic_merge_n_vec`).
fn merge_regs(regs: &mut [Reg]) {
    let n = regs.len();
    for i in 0..n / 2 {
        let mut hi = regs[n - 1 - i].reversed();
        coex(&mut regs[i], &mut hi);
        regs[n - 1 - i] = hi.reversed();
    }
    let mut num = n / 2;
    while num >= 2 {
        for j in (0..n).step_by(num) {
            for i in 0..num / 2 {
                let (lo, hi) = regs.split_at_mut(i + j + num / 2);
                coex(&mut lo[i + j], &mut hi[0]);
            }
        }
        num /= 2;
    }
    for r in regs.iter_mut() {
        r.merge_bitonic();
    }
}

/// Sorts up to [`NETWORK_MAX`] indices by their keys (`argsort_n`).
fn network_sort(arg: &mut [Item]) {
    let n = arg.len();
    let mut vecs = NETWORK_MAX / LANES;
    while vecs > 1 && n * 2 <= vecs * LANES {
        vecs /= 2;
    }
    let mut all = [Reg { key: [i64::MAX; LANES], idx: [usize::MAX; LANES] }; NETWORK_MAX / LANES];
    let regs = &mut all[..vecs];
    for (p, &(k, i)) in arg.iter().enumerate() {
        regs[p / LANES].key[p % LANES] = k;
        regs[p / LANES].idx[p % LANES] = i;
    }
    for r in regs.iter_mut() {
        r.sort();
    }
    let mut per = 2;
    while per <= vecs {
        for chunk in regs.chunks_mut(per) {
            merge_regs(chunk);
        }
        per *= 2;
    }
    for (p, slot) in arg.iter_mut().enumerate() {
        *slot = (regs[p / LANES].key[p % LANES], regs[p / LANES].idx[p % LANES]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_and_is_a_permutation() {
        let mut x = 12345u64;
        for n in [0usize, 1, 2, 7, 8, 9, 100, 256, 257, 300, 1000, 5000] {
            let keys: Vec<i64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 37) as i64
                })
                .collect();
            let p = numpy2_avx512_argsort(&keys);
            let mut seen = p.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
            assert!(p.windows(2).all(|w| keys[w[0]] <= keys[w[1]]), "n = {n}");
            let mut items: Vec<usize> = (0..n).map(|i| i * 10).collect();
            apply_permutation(&mut items, &p);
            assert_eq!(items, p.iter().map(|i| i * 10).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn a_permutation_applied_in_place_by_hand() {
        let mut v = vec!['a', 'b', 'c', 'd', 'e'];
        // Slot 0 takes item 2, slot 1 item 0, slot 2 item 1 (one 3-cycle), 3 and 4 swap.
        apply_permutation(&mut v, &[2, 0, 1, 4, 3]);
        assert_eq!(v, vec!['c', 'a', 'b', 'e', 'd']);
    }
}
