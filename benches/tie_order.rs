//! Criterion benchmarks of `--tie-order` (`src/trace/tie_order.rs`): the cost
//! of ordering a trace's same-instant submissions before a run.
//!
//! - `tie_order/<rule>/helios_window`: the permutation of the 68,503 submit
//!   times of `../shared/fidelity/helios-philly/philly_window_jobs.csv`
//!   (already in submit order, 1-second ties), read outside the timing;
//!   skipped with a message when the file is absent.
//! - `tie_order/<rule>/random_1m`: 1,000,000 keys from a xorshift stream
//!   modulo 100,000 (about 10 per key, unsorted).
//!
//! `trace` is a stable sort of indices by key; `numpy2-avx512` the emulated
//! NumPy argsort.

use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use dlsched::trace::tie_order::TieOrder;

fn helios_keys() -> Option<Vec<i64>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fidelity/helios-philly/philly_window_jobs.csv");
    let Ok(mut rdr) = csv::Reader::from_path(&path) else {
        eprintln!("SKIPPED tie_order/*/helios_window: {} not found", path.display());
        return None;
    };
    let col = rdr.headers().ok()?.iter().position(|h| h == "submit_time")?;
    Some(rdr.records().map(|r| r.expect("readable row")[col].parse::<i64>().expect("whole seconds")).collect())
}

fn random_keys(n: usize) -> Vec<i64> {
    let mut x: u64 = 88172645463325252;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 100_000) as i64
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tie_order");
    g.sample_size(20);
    let mut inputs = vec![("random_1m", random_keys(1_000_000))];
    if let Some(k) = helios_keys() {
        inputs.insert(0, ("helios_window", k));
    }
    for (name, keys) in &inputs {
        for (rule, order) in [("trace", TieOrder::Trace), ("numpy2-avx512", TieOrder::Numpy2Avx512)] {
            g.bench_with_input(BenchmarkId::new(rule, name), keys, |b, k| b.iter(|| black_box(order.permutation(k))));
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
