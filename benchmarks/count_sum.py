"""Shuffle counting and summation: measured RMSE vs the closed form, and timings.

    python benchmarks/count_sum.py                  # n = 1e6, eps = 0.9, delta = 1e-6
    python benchmarks/count_sum.py --n 100000 --R 500

Counting: bits ~ Ber(q = 0.5) (fixed dataset), R exact simulations of the statistic.
Sums: values ~ N(0.5, 0.2) clipped to [0, 1] (fixed dataset), R exact simulations (randomized
rounding drawn per user). "exact" = sqrt(sum_variance(values)) (sums) or sqrt(variance(n))
(counting; data independent, untruncated for cnt_2m). Timings: one full pipeline.run
(encode -> shuffle -> aggregate -> estimate) and one pipeline.simulate, best of 3.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from shuffledp import pipeline
from shuffledp.shuffle import protocol

from _timing import best_of  # benchmarks/ is on sys.path when run as a script

COUNTING = [("cnt_rr", {}), ("cnt_2m", {}), ("cnt_bn", {"gamma": 0.5}), ("cnt_sgm", {"gamma": 0.5})]
SUMS = [("rsum_rr", {}), ("rsum_kr", {}), ("rsum_rm", {}), ("rsum_dsg", {})]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--eps", type=float, default=0.9)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--R", type=int, default=1000)
    ap.add_argument("--no-pipeline", action="store_true", help="skip the full pipeline timing")
    a = ap.parse_args()
    rng = np.random.default_rng(2026)
    bits = (rng.random(a.n) < 0.5).astype(np.int64)
    vals = np.clip(rng.normal(0.5, 0.2, a.n), 0.0, 1.0)
    print(f"n={a.n} eps={a.eps} delta={a.delta} R={a.R}")
    print(f"{'protocol':10s} {'RMSE meas':>10s} {'exact':>9s} {'ratio':>6s} {'msgs/user':>10s} {'bits/msg':>8s} "
          f"{'run s':>7s} {'sim s':>7s}  privacy")
    for group, data in ((COUNTING, bits), (SUMS, vals)):
        truth = float(data.sum())
        for name, kw in group:
            p = protocol(name, epsilon=a.eps, delta=a.delta, n=a.n, **kw)
            R = a.R if group is COUNTING else max(a.R // 3, 100)
            x = p.summarize(data)
            est = np.array([p.estimate(p.simulate_statistic(x, rng), a.n).values[0] for _ in range(R)])
            rmse = math.sqrt(np.mean((est - truth) ** 2))
            exact = math.sqrt(p.variance(a.n) if group is COUNTING else p.sum_variance(data))
            t_run = math.nan if a.no_pipeline else best_of(lambda: pipeline.run(p, data, rng), 1)
            t_sim = best_of(lambda: pipeline.simulate(p, data, rng))
            print(f"{name:10s} {rmse:10.2f} {exact:9.2f} {rmse / exact:6.3f} {p.messages_per_user:10.3f} "
                  f"{p.bits_per_message:8.1f} {t_run:7.3f} {t_sim:7.4f}  {p.privacy()}")


if __name__ == "__main__":
    main()
