"""Shuffle histogram / multi-value protocols: measured MSE vs stated error, and timings.

    python benchmarks/histogram.py              # n = 1e6, eps = 0.9, delta = 1e-6, d = 100, R = 300
    python benchmarks/histogram.py --R 100 --pipeline-n 20000

Data: a discretized normal over [d] (mean d/2, sd d/6), as in the survey's frequency experiments;
MURS adds fakes = 1% of n. For each protocol: R estimates from ``simulate_statistic`` (exact
law); "MSE/stated" is the mean over items of the empirical MSE divided by the closed-form
variance at the item's true count (Hist_MM: only items above the truncation threshold; PUCM:
divided by its exact MSE, and the Lemma 4.8 bound squared is shown separately). Timings: one
``simulate_statistic`` at n and at 10^7, and one message-level ``pipeline.run`` at
``--pipeline-n`` users.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from shuffledp import pipeline
from shuffledp.shuffle import protocol

CASES = [
    ("hist_kr", 100, {}),
    ("hist_mm", 100, {}),
    ("slh", 100, {}),
    ("slh", 100, {"variant": "v1"}),
    ("murs", 100, {"oracle": "grr"}),
    ("murs", 100, {"oracle": "olh"}),
    ("murs", 100, {"oracle": "grr", "mode": "parallel", "shufflers": 2}),
    ("prhr", 100, {}),
    ("pucm", 100, {"public_seed": 1}),
    ("hist_kr", 2048, {}),
    ("slh", 2048, {}),
    ("murs", 2048, {}),
    ("hist_kr", 4096, {"bound": "bennett"}),  # Thm 3.1 needs n >= 1.03e6 at d = 4096
    ("slh", 4096, {}),
    ("murs", 4096, {}),
]
MULTI = [
    ("fragmenting", [100, 20], {}),
    ("sample_one", [100, 20], {}),
]


def normal_counts(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    w = np.exp(-0.5 * ((np.arange(d) + 0.5 - d / 2) / (d / 6)) ** 2)
    return rng.multinomial(n, w / w.sum())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--eps", type=float, default=0.9)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--R", type=int, default=300)
    ap.add_argument("--pipeline-n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--R-hash", type=int, default=40, help="repetitions for hash-based rows at d >= 1024 (O(n) simulation)")
    ap.add_argument("--only-large", action="store_true", help="only the d >= 1024 rows and the multi-value rows")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    print(f"n={a.n} eps={a.eps} delta={a.delta} R={a.R}")
    print("| protocol | d | eps_l | msgs/user | bits/user | RMSE | stated sd (c=0) | MSE/stated | sim s (n) | sim s (1e7) | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, d, kw in CASES:
        if a.only_large and d < 1024:
            continue
        p = protocol(name, a.eps, a.delta, a.n, d=d, **kw)
        c = normal_counts(a.n, d, rng)
        R = a.R_hash if d >= 1024 and getattr(p, "g", d) != d else a.R
        t0 = time.perf_counter()
        est = np.array([p.estimate(p.simulate_statistic(c, rng), a.n).values for _ in range(R)])
        t_sim = (time.perf_counter() - t0) / R
        err2 = ((est - c) ** 2).mean(axis=0)
        if name == "pucm":
            _, mse = p.exact_error(c)
            ratio = float((err2 / mse).mean())
        else:
            var = np.array([p.variance(a.n, ci) for ci in c])
            sel = np.ones(d, bool)
            if name == "hist_mm":
                sel = c > a.n * p.one_minus_p + 8 * math.sqrt(p.variance(a.n))
            ratio = float((err2[sel] / var[sel]).mean())
        rmse = math.sqrt(err2.mean())
        big = protocol(name, a.eps, a.delta, 10**7, d=d, **kw)
        c7 = normal_counts(10**7, d, rng)
        t0 = time.perf_counter()
        big.estimate(big.simulate_statistic(c7, rng), 10**7)
        t7 = time.perf_counter() - t0
        t_run = "-"
        if name not in ("prhr", "pucm"):  # message level: n (1 + rho) tuples / n^2 cells are too many
            small = protocol(name, a.eps, a.delta, a.pipeline_n, d=d, **kw) if _feasible(name, a, d, kw) else None
            if small is not None:
                x = np.repeat(np.arange(d), normal_counts(a.pipeline_n, d, rng))
                t0 = time.perf_counter()
                pipeline.run(small, x, rng)
                t_run = f"{time.perf_counter() - t0:.3f}"
        eps_l = getattr(p, "eps_l", float("nan"))
        label = name + ("" if not kw or list(kw) == ["public_seed"] else " " + ",".join(f"{k}={v}" for k, v in kw.items()))
        label += f" (R={R})" if R != a.R else ""
        print(f"| {label} | {d} | {eps_l:.4g} | {p.messages_per_user:.4g} | {p.bits_per_user:.4g} | {rmse:.2f} | "
              f"{math.sqrt(p.variance(a.n)):.2f} | {ratio:.3f} | {t_sim:.4f} | {t7:.3f} | {t_run} |")
    for name, dims, kw in MULTI:
        p = protocol(name, a.eps, a.delta, a.n, d=dims, **kw)
        cols = [np.repeat(np.arange(dd), normal_counts(a.n, dd, rng)) for dd in dims]
        x = np.column_stack([rng.permutation(col) for col in cols])
        truth = np.concatenate([np.bincount(x[:, j], minlength=dd) for j, dd in enumerate(dims)])
        data = p.summarize(x)
        t0 = time.perf_counter()
        est = np.array([p.estimate(p.simulate_statistic(data, rng), a.n).values for _ in range(a.R)])
        t_sim = (time.perf_counter() - t0) / a.R
        err2 = ((est - truth) ** 2).mean(axis=0)
        var = np.concatenate([[p.attribute_variance(a.n, ci, j) for ci in truth[p.offsets[j]:p.offsets[j + 1]]]
                              for j in range(len(dims))])
        t0 = time.perf_counter()
        pipeline.run(protocol(name, a.eps, a.delta, a.n, d=dims, **kw), x, rng)
        t_run = time.perf_counter() - t0
        print(f"| {name} | {dims} | {getattr(p, 'eps_l', float('nan')):.4g} | {p.messages_per_user:.4g} | "
              f"{p.bits_per_user:.4g} | {math.sqrt(err2.mean()):.2f} | {math.sqrt(p.variance(a.n)):.2f} | "
              f"{float((err2 / var).mean()):.3f} | {t_sim:.4f} | - | {t_run:.3f} (n={a.n}) |")


def _feasible(name: str, a: argparse.Namespace, d: int, kw: dict) -> bool:
    try:
        protocol(name, a.eps, a.delta, a.pipeline_n, d=d, **kw)
    except Exception:  # noqa: BLE001 - the target may be impossible at the smaller n
        return False
    return True


if __name__ == "__main__":
    main()
