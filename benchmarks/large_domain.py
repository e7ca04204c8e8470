"""Large-domain local-hashing aggregation: numpy before, numpy progressions, PyTorch (CPU / GPU).

    PYTHONPATH=src python benchmarks/large_domain.py
    PYTHONPATH=src python benchmarks/large_domain.py --d-exp 10 12 14 16 18 20 --n 1e5 1e6 --budget 30

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-exp", type=int, nargs="+", default=[10, 12, 14, 16, 18, 20])
    ap.add_argument("--n", type=float, nargs="+", default=[1e5, 1e6])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per timed run before subsampling")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
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
