"""Writes numpy_argsort_cases.csv: NumPy's argsort(kind="quicksort") of
generated int64 arrays, the independent reference for
tests/it/tie_order.rs (dlsched's emulation, --tie-order numpy2-avx512).

Run with NumPy 2.0, 2.1 or 2.2 on a CPU with AVX-512 (check that
`numpy.show_runtime()` lists AVX512_SKX among the found features):

    python3 tests/data/numpy_argsort_cases.py > tests/data/numpy_argsort_cases.csv

Keys: a xorshift64 stream (x ^= x << 13; x ^= x >> 7; x ^= x << 17) from
`seed`, each value `x % modulus`, so small moduli give many equal keys.
`sorted_runs` > 0 sorts the keys first and then perturbs every
`sorted_runs`-th one; -1 sorts them and leaves them sorted, as in a trace
already ordered by submit time (NumPy 2.3 and later return such an array's
identity permutation, 2.0-2.2 do not).
The permutation is summarised by FNV-1a (64-bit) over its indices, each
as 8 little-endian bytes.
"""
import sys
import numpy as np

MASK = (1 << 64) - 1


def keys(n, modulus, seed, sorted_runs):
    x = seed
    out = []
    for _ in range(n):
        x ^= (x << 13) & MASK
        x ^= x >> 7
        x ^= (x << 17) & MASK
        out.append(x % modulus)
    if sorted_runs:
        out.sort()
        for i in range(0, n if sorted_runs > 0 else 0, max(sorted_runs, 1)):
            out[i] = (out[i] * 7 + 3) % modulus
    return np.array(out, dtype=np.int64)


def fnv(perm):
    h = 0xCBF29CE484222325
    for i in perm.tolist():
        for b in int(i).to_bytes(8, "little"):
            h ^= b
            h = (h * 0x100000001B3) & MASK
    return h


cases = []
for n in [2, 3, 5, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256]:
    for modulus in [2, 5, 1000]:
        cases.append((n, modulus, 11 + n, 0))
for n in [257, 258, 300, 511, 512, 513, 1000, 1023, 1057, 4096, 5000, 20000, 68503]:
    for modulus in [3, 50, 5000, 1 << 40]:
        cases.append((n, modulus, 7 * n + modulus % 97, 0))
    cases.append((n, n // 2 + 1, 5 + n, 1))
    cases.append((n, n * 3, 9 + n, 13))
    cases.append((n, n // 3 + 1, 3 + n, -1))
for n in [9, 40, 200, 256]:
    cases.append((n, n // 3 + 1, 3 + n, -1))
for n in [100, 300, 1000]:
    cases.append((n, 1, 1, 0))
print("n,modulus,seed,sorted_runs,fnv1a64,numpy")
for n, modulus, seed, runs in cases:
    p = np.argsort(keys(n, modulus, seed, runs), kind="quicksort")
    print(f"{n},{modulus},{seed},{runs},{fnv(p):016x},{np.__version__}")
