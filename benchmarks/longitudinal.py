"""Longitudinal oracles: encode (fresh users, and memoized rounds), aggregate, MSE / theory.

    python benchmarks/longitudinal.py                       # n = 1e6, d in {64, 1024}
    python benchmarks/longitudinal.py --n 100000 --d 64 --reps 20

Workload: Zipf(1.1) values over [0, d), eps_perm = 2, eps_1 = 1. ``randomize`` draws a fresh
setup and permanent answer per user (the simulation path); ``round 1`` and ``round 2`` run the
memoized client path (``users=``) on a fresh :class:`Memo` and again with 10% of the users
changing value (look-ups, and draws for the new keys only). MSE/theory: mean over items of the
squared error over ``--reps`` fresh collections, divided by the mean closed-form variance.
Timings are the best of ``--repeat`` runs on whatever machine runs this (shared machines vary).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_of  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, nargs="+", default=[64, 1024])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from shuffledp.local import frequency_oracle
    from shuffledp.local.longitudinal import Memo

    rng = np.random.default_rng(7)
    print("| mechanism | d | eps_1 (exact) | randomize s | round 1 (memo) s | round 2 (memo) s | aggregate s | "
          "MSE/theory |")
    print("|---|---|---|---|---|---|---|---|")
    for d in args.d:
        p = 1.0 / np.arange(1, d + 1) ** 1.1
        p /= p.sum()
        x = rng.choice(d, args.n, p=p)
        x2 = np.where(rng.random(args.n) < 0.1, rng.choice(d, args.n, p=p), x)
        f = np.bincount(x, minlength=d) / args.n
        users = np.arange(args.n)
        for name, params in (("l_grr", {}), ("l_oue", {}), ("loloha", {}), ("dbitflip", {"bits": 4})):
            m = frequency_oracle(name, 2.0, d, epsilon_one=1.0, **params) if name != "dbitflip" \
                else frequency_oracle(name, 2.0, d, **params)
            t_rand = best_of(lambda: m.randomize(x, rng), args.repeat)
            memo = Memo()
            t_r1 = best_of(lambda: m.randomize(x, rng, users=users, memo=memo), 1)
            t_r2 = best_of(lambda: m.randomize(x2, rng, users=users, memo=memo), 1)
            rep = m.randomize(x, rng)
            t_agg = best_of(lambda: m.aggregate(rep), args.repeat)
            err = np.zeros(d)
            for _ in range(args.reps):
                err += (m.estimate(m.aggregate(m.randomize(x, rng)), args.n).values - f) ** 2
            theory = np.array([m.variance(args.n, v) for v in f])
            print(f"| {name} | {d} | {m.epsilon_one:.4f} | {t_rand:.3f} | {t_r1:.3f} | {t_r2:.3f} | {t_agg:.3f} | "
                  f"{(err / args.reps).mean() / theory.mean():.3f} |", flush=True)


if __name__ == "__main__":
    main()
