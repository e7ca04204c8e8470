"""GPU check of local-hashing aggregation: bit-identity with numpy on CUDA, then the timing target.

    PYTHONPATH=src python benchmarks/gpu_check.py            # on a machine with a CUDA GPU
    PYTHONPATH=src python benchmarks/gpu_check.py --n 1e7 --d 65536 --cells 26

1. Bit-identity: for OLH and BLH at several (d, n) (both the enumerated and the heavy-multiplier
   coverage paths, chunked with a small and a large cell budget) the CUDA counts equal the numpy
   counts of ``aggregate`` on the CPU, and at small sizes the direct oracle. Any mismatch exits 1.
2. Timing: OLH support counts for ``--n`` reports at ``--d`` (default 10^7 and 65,536) on the GPU,
   best of ``--reps`` after one warm-up (host-to-device copy of the reports and the copy back
   included; report generation excluded), and the numpy CPU time of the progression method on a
   ``--cpu-n`` subsample for scale.

Prints a Markdown block to paste into docs/large-domain.md with the device name. ``--device
torch-cpu --small`` is a dry run of the script on CPU tensors (no GPU needed).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from shuffledp.local._lh_torch import support_counts_torch
from shuffledp.local.hashing import BinaryLocalHashing, OptimizedLocalHashing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--d", type=int, default=65536)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--cells", type=int, default=26, help="log2 of the device cell budget per temporary")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu-n", type=float, default=1e5)
    ap.add_argument("--device", default="cuda", help="cuda (default) or torch-cpu (a dry run of this script)")
    ap.add_argument("--small", action="store_true", help="check only the cases with d * n <= 10^8")
    args = ap.parse_args()
    import torch

    dev = args.device
    if dev.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch: nothing to check", file=sys.stderr)
        return 2
    on_gpu = dev.startswith("cuda")
    name = torch.cuda.get_device_name(0) if on_gpu else "CPU tensors"

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    print(f"device: {name}; torch {torch.__version__}")
    rng = np.random.default_rng(20261126)
    failures = 0
    for cls, d, n in [(OptimizedLocalHashing, 1000, 3000), (BinaryLocalHashing, 997, 20000),
                      (OptimizedLocalHashing, 1024, 10**6), (OptimizedLocalHashing, 65536, 20000),
                      (OptimizedLocalHashing, 65536, 10**6), (BinaryLocalHashing, 2**20, 5000)]:
        if args.small and n * d > 10**8:
            continue
        m = cls(args.epsilon, d)
        r = m.randomize(rng.integers(0, d, n), rng)
        want = m.aggregate(r)
        for cells in (1 << 12, 1 << args.cells):
            got = support_counts_torch(r["seed"], r["y"], m.prime, m.g, d, dev, max_cells=cells)
            ok = np.array_equal(got, want)
            failures += not ok
            print(f"bit-identity {cls.name} d={d} n={n} cells=2^{int(np.log2(cells))}: {'ok' if ok else 'MISMATCH'}")
        if n * d <= 10**8:
            ok = np.array_equal(want, m.support_counts_direct(r))
            failures += not ok
            print(f"  numpy vs direct oracle: {'ok' if ok else 'MISMATCH'}")

    n, d = int(args.n), args.d
    m = OptimizedLocalHashing(args.epsilon, d)
    r = m.randomize(rng.integers(0, d, n), rng)
    support_counts_torch(r["seed"], r["y"], m.prime, m.g, d, dev, max_cells=1 << args.cells)  # warm-up
    best = float("inf")
    for _ in range(args.reps):
        sync()
        t = time.perf_counter()
        out = support_counts_torch(r["seed"], r["y"], m.prime, m.g, d, dev, max_cells=1 << args.cells)
        sync()
        best = min(best, time.perf_counter() - t)
    assert int(out.sum()) > 0
    cn = int(args.cpu_n)
    sub = {"seed": r["seed"][:cn], "y": r["y"][:cn]}
    t = time.perf_counter()
    cpu_sub = m.support_counts_progressions(sub)
    cpu_t = time.perf_counter() - t
    gpu_sub = support_counts_torch(sub["seed"], sub["y"], m.prime, m.g, d, dev, max_cells=1 << args.cells)
    failures += not np.array_equal(cpu_sub, gpu_sub)
    print()
    print(f"| device | n | d | g | {dev} support counts (s, best of {args.reps}) | numpy progressions n={cn} (s) |")
    print("|---|---|---|---|---|---|")
    print(f"| {name} | {n:.0e} | {d} | {m.g} | {best:.3f} | {cpu_t:.2f} |")
    print(f"\nmismatches: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
