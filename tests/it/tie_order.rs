//! `--tie-order numpy2-avx512` against NumPy's own argsort.
//!
//! `tests/data/numpy_argsort_cases.csv` was written by NumPy 2.2.6 on an
//! AVX-512 CPU with `tests/data/numpy_argsort_cases.py` (its header says how
//! the keys are generated). Each row gives the FNV-1a hash of NumPy's
//! permutation; the emulation must give the same permutation for every row.

use dlsched::trace::tie_order::{TieOrder, numpy2_avx512_argsort};

/// The generator of the Python script, step for step.
fn keys(n: usize, modulus: u64, seed: u64, sorted_runs: i64) -> Vec<i64> {
    let mut x = seed;
    let mut out: Vec<u64> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % modulus
        })
        .collect();
    if sorted_runs != 0 {
        out.sort_unstable();
        if sorted_runs > 0 {
            for i in (0..n).step_by(sorted_runs as usize) {
                out[i] = (out[i] * 7 + 3) % modulus;
            }
        }
    }
    out.into_iter().map(|v| v as i64).collect()
}

fn fnv(p: &[usize]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &i in p {
        for b in (i as u64).to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

#[test]
fn emulation_matches_numpy_2_2_on_every_generated_case() {
    let text = include_str!("../data/numpy_argsort_cases.csv");
    let mut checked = 0;
    let mut with_moved_ties = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (n, modulus, seed, runs): (usize, u64, u64, i64) =
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap());
        let want = u64::from_str_radix(f[4], 16).unwrap();
        let k = keys(n, modulus, seed, runs);
        let p = numpy2_avx512_argsort(&k);
        assert_eq!(fnv(&p), want, "case n={n} modulus={modulus} seed={seed} sorted_runs={runs}");
        // The case says something about ties only if the stable order differs.
        if p != TieOrder::Trace.permutation(&k) {
            with_moved_ties += 1;
        }
        checked += 1;
    }
    assert_eq!(checked, 161);
    assert!(with_moved_ties > 100, "only {with_moved_ties} cases reorder equal keys");
}

#[test]
fn trace_order_is_the_stable_sort() {
    let k = [5, 3, 5, 1, 3];
    assert_eq!(TieOrder::Trace.permutation(&k), vec![3, 1, 4, 0, 2]);
}
