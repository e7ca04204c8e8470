"""RAPPOR benchmark: randomize / aggregate / decode time, peak memory and MSE / theory.

    python benchmarks/rappor.py                       # n = 1e6, d in {64, 1024}, eps in {1, 4}
    python benchmarks/rappor.py --n 100000 --reps 20

Workload: Zipf(1.1) values over [0, d). Timings are the best of ``--repeat`` runs. ``decode``
is the first OLS decode (it builds and caches the design: X^T X, its inverse, the cohort term);
``decode (cached)`` a second one. MSE/theory: over ``--reps`` statistics drawn with the exact
``simulate_statistic`` (plus the one from the client path), mean squared error over all items
divided by the mean of ``variance_items`` (OLS noise + cohort sampling term) at the true
distribution. Peak MB: tracemalloc peak of randomize + aggregate.
"""

from __future__ import annotations

import argparse
import math
import time
import tracemalloc

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, nargs="+", default=[64, 1024])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from shuffledp.local.rappor import Rappor

    rng = np.random.default_rng(11)
    print("| d | eps | k | h | m | eps_1 | randomize s | aggregate s | decode s | decode (cached) s | "
          "peak MB | MSE/theory | sd (theory) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in args.d:
        p = 1.0 / np.arange(1, d + 1) ** 1.1
        p /= p.sum()
        x = rng.choice(d, args.n, p=p)
        counts = np.bincount(x, minlength=d)
        f = counts / args.n
        for eps in args.eps:
            mech = Rappor(eps, d)
            t_rand = t_agg = math.inf
            for _ in range(args.repeat):
                tracemalloc.start()
                t0 = time.perf_counter()
                rep = mech.randomize(x, rng)
                t1 = time.perf_counter()
                stat = mech.aggregate(rep)
                t2 = time.perf_counter()
                peak = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
                t_rand, t_agg = min(t_rand, t1 - t0), min(t_agg, t2 - t1)
            mech._design_cache = None
            t0 = time.perf_counter()
            est = mech.estimate(stat, args.n)
            t1 = time.perf_counter()
            mech.estimate(stat, args.n)
            t2 = time.perf_counter()
            theory = mech.variance_items(args.n, f).mean()
            errs = [np.mean((est.values - f) ** 2)]
            for _ in range(args.reps):
                errs.append(np.mean((mech.estimate(mech.simulate_statistic(counts, rng), args.n).values - f) ** 2))
            print(f"| {d} | {eps:g} | {mech.k} | {mech.h} | {mech.m} | {mech.epsilon_one:.3f} | {t_rand:.3f} | "
                  f"{t_agg:.3f} | {t1 - t0:.2f} | {t2 - t1:.3f} | {peak:.0f} | {np.mean(errs) / theory:.3f} | "
                  f"{math.sqrt(theory):.2e} |", flush=True)


if __name__ == "__main__":
    main()
