"""Mean-oracle benchmark: randomize / aggregate time at n users and empirical variance / theory.

    python benchmarks/mean.py                 # n = 1e6 timings, R = 4000 variance ratios
    python benchmarks/mean.py --n 100000 --R 1000

Timing: best of ``--repeat`` runs of ``randomize`` (and ``aggregate``) on n uniform values.
Variance ratio: R independent estimates from one heterogeneous population of ``m`` users
(randomized at once, R * m users), sample variance divided by ``variance(m, rms)``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

CASES = [
    ("duchi", 1.0, 1), ("duchi", 1.0, 2), ("duchi", 1.0, 3), ("duchi", 1.0, 4), ("duchi", 1.0, 6),
    ("harmony", 1.0, 1), ("harmony", 1.0, 6),
    ("pm", 0.5, 1), ("pm", 1.0, 1), ("pm", 4.0, 1), ("pm", 6.0, 3),
    ("hm", 0.3, 1), ("hm", 1.0, 1), ("hm", 4.0, 1), ("hm", 6.0, 3),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--R", type=int, default=4000)
    ap.add_argument("--m", type=int, default=200, help="users per repetition in the variance check")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from shuffledp.local import mean_oracle, take_rows

    rng = np.random.default_rng(7)
    print("| mechanism | eps | dim | randomize s | aggregate s | var ratio (R=%d) | z of mean |" % args.R)
    print("|---|---|---|---|---|---|---|")
    for name, eps, dim in CASES:
        mech = mean_oracle(name, eps, dim=dim)
        x = rng.uniform(-1, 1, args.n if dim == 1 else (args.n, dim))
        t_rand = t_agg = math.inf
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            rep = mech.randomize(x, rng)
            t1 = time.perf_counter()
            mech.aggregate(rep)
            t2 = time.perf_counter()
            t_rand, t_agg = min(t_rand, t1 - t0), min(t_agg, t2 - t1)
        m = args.m
        pop = rng.uniform(-1, 1, (m, dim))
        rep = mech.randomize(np.tile(pop[:, 0] if dim == 1 else pop, (args.R, 1)).reshape(-1) if dim == 1
                             else np.tile(pop, (args.R, 1)), rng)
        ests = np.array([mech.estimate(mech.aggregate(take_rows(rep, slice(r * m, (r + 1) * m))), m).values[0]
                         for r in range(args.R)])
        var = mech.variance(m, math.sqrt((pop[:, 0] ** 2).mean()))
        z = (ests.mean() - pop[:, 0].mean()) / math.sqrt(var / args.R)
        print(f"| {name} | {eps:g} | {dim} | {t_rand:.4f} | {t_agg:.4f} | {ests.var(ddof=1) / var:.3f} | {z:+.2f} |")


if __name__ == "__main__":
    main()
