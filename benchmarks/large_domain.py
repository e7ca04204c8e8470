"""Large-domain aggregation: local hashing (numpy before, numpy progressions, PyTorch) and the device
backend of HR, HCMS, CMS and subset selection (numpy vs PyTorch on CPU tensors / a GPU).

    PYTHONPATH=src python benchmarks/large_domain.py
    PYTHONPATH=src python benchmarks/large_domain.py --d-exp 10 12 14 16 18 20 --n 1e5 1e6 --budget 30
    PYTHONPATH=src python benchmarks/large_domain.py --oracles hr hcms cms ss   # only the second table

Second table (``--oracles NAME ...`` prints it instead of the first): for each oracle and
size of :data:`ORACLE_CASES`, the seconds of each server-side step (``aggregate`` of one batch,
``estimate``, ``simulate_statistic`` where it has a device part) with ``device='cpu'`` (numpy),
``'torch-cpu'`` and ``'cuda'`` when visible, best of ``--reps``; every device's output is checked
equal to numpy's byte for byte (``identical``).

For each domain size ``d = 2^k`` and number of reports ``n`` (OLH, ``--epsilon``, default 1), times
the support counts of one batch of reports, best of ``--reps``:

- ``before``: the methods that existed before the progression method, with the dispatch they had
  (grouped-by-multiplier O(min(n, P) (P + d)) or direct O(n d) evaluation, whichever has fewer cells);
- ``progressions``: :meth:`LocalHashing.support_counts_progressions` (numpy);
- ``torch-cpu`` (and ``cuda`` when a GPU is visible): the PyTorch backend.

A run predicted (from a pilot of min(2,000, 2^27 / d) reports and each method's cell model) to exceed ``--budget``
seconds is timed on the largest subsample that fits and scaled by the cell model; such entries
are marked ``~``. Every measured pair of methods is checked to agree bit for bit on the reports it
timed. Prints a Markdown table and the load average (the numbers are only comparable within one
run on one machine).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from shuffledp.local._lh_progressions import progression_cost
from shuffledp.local.hashing import OptimizedLocalHashing


def _before(m: OptimizedLocalHashing, r: dict) -> np.ndarray:
    s = r["seed"].astype(np.int64)
    n, P, d = s.shape[0], m.prime, m.d
    if min(n, P - 1) * (P + d) + n <= 4 * n * d:
        return m._support_grouped(s, r["y"])
    return m.support_counts_direct(r)


def _before_cells(n: int, P: int, d: int, g: int) -> float:
    groups = P * (1 - (1 - 1 / (P - 1)) ** n)  # expected distinct multipliers
    return min(groups * (P + d) + n, 4 * n * d)


def _torch(device: str):
    from shuffledp.local._lh_torch import support_counts_torch

    def run(m, r):
        return support_counts_torch(r["seed"], r["y"], m.prime, m.g, m.d, device,
                                    max_cells=1 << (26 if device.startswith("cuda") else 22))
    return run


#: oracle -> [(log2 d, n, steps)] of the second table; n = reports aggregated (and users simulated)
ORACLE_CASES: dict[str, list[tuple[int, int, tuple[str, ...]]]] = {
    "hr": [(16, 10**6, ("aggregate", "estimate")), (20, 10**6, ("aggregate", "estimate"))],
    "hcms": [(16, 10**6, ("aggregate", "estimate", "simulate")), (20, 10**6, ("aggregate", "estimate", "simulate"))],
    "cms": [(16, 10**5, ("aggregate", "estimate", "simulate")), (20, 10**5, ("aggregate", "estimate", "simulate"))],
    "ss": [(12, 10**5, ("aggregate",)), (14, 2 * 10**4, ("aggregate",))],
}


def oracle_table(oracles: list[str], devices: list[str], reps: int, epsilon: float = 1.0) -> None:
    """Print the second table: numpy vs the device backend, step by step, outputs checked identical."""
    from shuffledp.local import frequency_oracle

    rng = np.random.default_rng(20261127)
    print(f"| oracle | d | n | step | {' | '.join(devices)} | identical |")
    print("|---" * (len(devices) + 5) + "|")
    for name in oracles:
        for k, n, steps in ORACLE_CASES[name]:
            d = 1 << k
            params = {"hash_seed": 1} if name in ("cms", "hcms") else {}
            mechs = {dev: frequency_oracle(name, epsilon, d, device=dev, **params) for dev in devices}
            ref = mechs["cpu"]
            values = rng.integers(0, d, n)
            reports = ref.randomize(values, rng) if {"aggregate", "estimate"} & set(steps) else None
            stat = ref.aggregate(reports) if reports is not None else None
            counts = np.bincount(values, minlength=d)
            for step in steps:
                row, outs = [], {}
                for dev, m in mechs.items():
                    def run(m=m):
                        if step == "aggregate":
                            return m.aggregate(reports)
                        if step == "estimate":
                            e = m.estimate(stat, n)
                            return np.concatenate([e.values, e.stderr])
                        return m.simulate_statistic(counts, np.random.default_rng(5))
                    best = math.inf
                    for _ in range(reps):
                        t = time.perf_counter()
                        outs[dev] = run()
                        best = min(best, time.perf_counter() - t)
                    row.append(f"{best:.3f}")
                same = all(o.dtype == outs["cpu"].dtype and o.tobytes() == outs["cpu"].tobytes() for o in outs.values())
                print(f"| {name} | 2^{k} | {n:.0e} | {step} | {' | '.join(row)} | {'yes' if same else 'NO'} |",
                      flush=True)
                assert same, f"{name} {step} differs between devices at d=2^{k}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-exp", type=int, nargs="+", default=[10, 12, 14, 16, 18, 20])
    ap.add_argument("--n", type=float, nargs="+", default=[1e5, 1e6])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per timed run before subsampling")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--oracles", nargs="+", default=None, choices=list(ORACLE_CASES),
                    help="print the second table (these oracles) instead of the first")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads for the CPU-tensor runs (1 avoids oversubscribing a loaded machine)")
    args = ap.parse_args()
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    if args.oracles:
        import torch

        devices = ["cpu", "torch-cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        oracle_table(args.oracles, devices, args.reps, args.epsilon)
        print(f"\nload average: {os.getloadavg()}, cpus: {os.cpu_count()}")
        return
    methods: dict = {"before": (_before, _before_cells),
                     "progressions": (lambda m, r: m.support_counts_progressions(r),
                                      lambda n, P, d, g: progression_cost(n, P, g))}
    if not args.no_torch:
        try:
            import torch
            methods["torch-cpu"] = (_torch("torch-cpu"), lambda n, P, d, g: progression_cost(n, P, g))
            if torch.cuda.is_available():
                methods["cuda"] = (_torch("cuda"), lambda n, P, d, g: progression_cost(n, P, g))
        except ImportError:
            pass
    rng = np.random.default_rng(20261126)
    names = list(methods)
    print(f"| d | n | g | {' | '.join(names + ['before / progressions'])} |")
    print("|---" * (len(names) + 4) + "|")
    for k in args.d_exp:
        d = 1 << k
        m = OptimizedLocalHashing(args.epsilon, d)
        P, g = m.prime, m.g
        nmax = int(max(args.n))
        full = m.randomize(rng.integers(0, d, nmax), rng)
        for nf in args.n:
            n = int(nf)
            row, results, times = [], {}, {}
            for name, (fn, cells) in methods.items():
                pilot_n = min(n, 2000, max(100, (1 << 27) // d))
                pilot = {"seed": full["seed"][:pilot_n], "y": full["y"][:pilot_n]}
                t = time.perf_counter()
                fn(m, pilot)
                tp = max(time.perf_counter() - t, 1e-4)
                sub = n
                while sub > pilot_n and tp * cells(sub, P, d, g) / cells(pilot_n, P, d, g) > args.budget:
                    sub //= 2
                sub = max(sub, pilot_n)
                rep = {"seed": full["seed"][:sub], "y": full["y"][:sub]}
                best = math.inf
                for _ in range(args.reps):
                    t = time.perf_counter()
                    out = fn(m, rep)
                    best = min(best, time.perf_counter() - t)
                results[name] = (sub, out)
                if sub == n:
                    times[name] = best
                    row.append(f"{best:.2f}")
                else:
                    est = best * cells(n, P, d, g) / cells(sub, P, d, g)
                    times[name] = est
                    row.append(f"~{est:.1f} (n={sub})")
            for name, (sub, out) in results.items():  # bit-identity on the common subsample
                if name == names[0]:
                    continue
                s0, o0 = results[names[0]]
                if s0 == sub:
                    assert np.array_equal(out, o0), f"{name} differs from {names[0]} at d={d}, n={sub}"
            ratio = times["before"] / times["progressions"]
            print(f"| 2^{k} | {n:.0e} | {g} | {' | '.join(row)} | {ratio:.1f}x |", flush=True)
    print(f"\nload average: {os.getloadavg()}, cpus: {os.cpu_count()}")


if __name__ == "__main__":
    main()
