"""GPU check of the device backend: bit-identity with numpy on CUDA, then the timing targets.

    PYTHONPATH=src python benchmarks/gpu_check.py            # on a machine with a CUDA GPU
    PYTHONPATH=src python benchmarks/gpu_check.py --n 1e7 --d 65536 --cells 26

1. Bit-identity: for OLH and BLH at several (d, n) (both the enumerated and the heavy-multiplier
   coverage paths, chunked with a small and a large cell budget) the CUDA counts equal the numpy
   counts of ``aggregate`` on the CPU, and at small sizes the direct oracle. Any mismatch exits 1.
2. Timing: OLH support counts for ``--n`` reports at ``--d`` (default 10^7 and 65,536) on the GPU,
   best of ``--reps`` after one warm-up (host-to-device copy of the reports and the copy back
   included; report generation excluded), and the numpy CPU time of the progression method on a
   ``--cpu-n`` subsample for scale.
3. HR, SS, CMS, HCMS (``device=``): ``aggregate``, ``estimate`` (values and standard errors) and
   ``simulate_statistic`` on CUDA equal numpy byte for byte (with the default and, below d = 10^4 and
   for HR and SS, a 2^12-cell budget per temporary), then the heavy step of each timed on both (numpy once, CUDA best of
   ``--reps`` after a warm-up): HR's estimate (Walsh-Hadamard transform) at d = 2^24, HCMS's
   estimate (k = 256 transforms and the sketch query over d = 2^20 items), SS's aggregate at
   d = 2^14, CMS's aggregate of 10^6 reports (m = 1024 bits each), HR's aggregate of 10^7 reports. ``--skip-lh`` runs only this part.

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
    ap.add_argument("--skip-lh", action="store_true", help="only part 3 (HR, SS, CMS, HCMS)")
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
    failures = 0 if args.skip_lh else lh_part(args, dev, name, sync, rng)
    failures += oracle_part(args, dev, name, sync, rng)
    print(f"\nmismatches: {failures}")
    return 1 if failures else 0


def lh_part(args, dev, name, sync, rng) -> int:
    """Parts 1 and 2: local hashing."""
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
    return failures


def _outputs(m, reports, n, counts, simulate: bool) -> list[np.ndarray]:
    out = [m.aggregate(reports)]
    if n:
        e = m.estimate(out[0], n)
        out += [e.values, e.stderr]
    if simulate:
        out.append(m.simulate_statistic(counts, np.random.default_rng(5)))
    return out


def oracle_part(args, dev, name, sync, rng) -> int:
    """Part 3: HR, SS, CMS, HCMS on the device vs numpy, then their heavy steps timed."""
    from unittest import mock

    from shuffledp.local import _device, frequency_oracle

    failures = 0
    cases = [("hr", 1000, 10**5, {}, True), ("hr", 5000, 10**5, {"variant": "general", "epsilon": 4.0}, False),
             ("hr", 1 << 20, 10**6, {}, False), ("ss", 700, 20000, {}, True), ("ss", 1 << 14, 5000, {}, False),
             ("cms", 3000, 20000, {"k": 64, "m": 128, "hash_seed": 2}, True),
             ("hcms", 3000, 20000, {"k": 64, "m": 128, "hash_seed": 2}, True),
             ("hcms", 1 << 20, 10**6, {"hash_seed": 2}, True), ("cms", 1 << 20, 10**5, {"hash_seed": 2}, True)]
    for oracle, d, n, params, simulate in cases:
        if args.small and n * d > 10**8:
            continue
        params = dict(params)
        eps = params.pop("epsilon", args.epsilon)
        ref = frequency_oracle(oracle, eps, d, **params)
        values = rng.integers(0, d, n)
        r = ref.randomize(values, rng)
        counts = np.bincount(values, minlength=d)
        want = _outputs(ref, r, n, counts, simulate)
        m = frequency_oracle(oracle, eps, d, device=dev, **params)
        # the 2^12 budget at d = 2^20 would be ~10^5 tiny query chunks per sketch: small domains only
        for cells in (None, 1 << 12) if oracle in ("hr", "ss") or d <= 10**4 else (None,):
            budget = {"DEVICE_CELLS": cells or _device.DEVICE_CELLS, "CPU_TENSOR_CELLS": cells or _device.CPU_TENSOR_CELLS}
            with mock.patch.multiple(_device, **budget):
                got = _outputs(m, r, n, counts, simulate)
            ok = all(a.dtype == b.dtype and a.tobytes() == b.tobytes() for a, b in zip(got, want))
            failures += not ok
            print(f"bit-identity {oracle} d={d} n={n} cells={'default' if cells is None else '2^12'} "
                  f"(aggregate, estimate{', simulate' if simulate else ''}): {'ok' if ok else 'MISMATCH'}", flush=True)

    def timed(fn, reps):
        best = float("inf")
        for _ in range(reps):
            sync()
            t = time.perf_counter()
            out = fn()
            sync()
            best = min(best, time.perf_counter() - t)
        return best, out

    rows = []
    hr_big = 1 << (20 if args.small else 24)
    hr = {dv: frequency_oracle("hr", args.epsilon, hr_big, device=dv) for dv in ("cpu", dev)}
    stat = hr["cpu"].aggregate(hr["cpu"].randomize(rng.integers(0, hr_big, 10**6), rng))
    rows.append(("hr estimate (FWHT, K = %d)" % hr["cpu"].K, stat, lambda m: m.estimate(stat, 10**6).values, hr))
    hc_big = 1 << (16 if args.small else 20)
    hc = {dv: frequency_oracle("hcms", args.epsilon, hc_big, hash_seed=3, device=dv) for dv in ("cpu", dev)}
    hstat = hc["cpu"].aggregate(hc["cpu"].randomize(rng.integers(0, hc_big, 10**6), rng))
    rows.append((f"hcms estimate (k=256, m=1024, d={hc_big})", hstat, lambda m: m.estimate(hstat, 10**6).values, hc))
    ss_d = 1 << (12 if args.small else 14)
    ss = {dv: frequency_oracle("ss", args.epsilon, ss_d, device=dv) for dv in ("cpu", dev)}
    sr = ss["cpu"].randomize(rng.integers(0, ss_d, 20000), rng)
    rows.append((f"ss aggregate (d={ss_d}, omega={ss['cpu'].omega}, n=2e4)", sr, lambda m: m.aggregate(sr), ss))
    cms_n = 10**5 if args.small else 10**6
    cm = {dv: frequency_oracle("cms", args.epsilon, 1 << 16, hash_seed=3, device=dv) for dv in ("cpu", dev)}
    cr = cm["cpu"].randomize(rng.integers(0, 1 << 16, cms_n), rng)
    rows.append((f"cms aggregate (n={cms_n:.0e}, k=256, m=1024)", cr, lambda m: m.aggregate(cr), cm))
    hr_n = 10**6 if args.small else 10**7
    hra = {dv: frequency_oracle("hr", args.epsilon, 1 << 16, device=dv) for dv in ("cpu", dev)}
    yr = hra["cpu"].randomize(rng.integers(0, 1 << 16, hr_n), rng)
    rows.append((f"hr aggregate (n={hr_n:.0e}, d=2^16)", yr, lambda m: m.aggregate(yr), hra))
    print()
    print(f"| device | step | numpy (s) | {dev} (s, best of {args.reps}) | identical |")
    print("|---|---|---|---|---|")
    for label, _, fn, mechs in rows:
        t_cpu, want = timed(lambda: fn(mechs["cpu"]), 1)
        fn(mechs[dev])  # warm-up
        t_dev, got = timed(lambda: fn(mechs[dev]), args.reps)
        ok = want.dtype == got.dtype and want.tobytes() == got.tobytes()
        failures += not ok
        print(f"| {name} | {label} | {t_cpu:.3f} | {t_dev:.4f} | {'yes' if ok else 'NO'} |", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(main())
