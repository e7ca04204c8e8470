"""Speed of the exact central samplers, and a reproduction of the floating-point attack.

Run:  PYTHONPATH=src python benchmarks/central.py [--quick]

Prints (1) samples/s of the production (exact, OS-randomness) samplers and of the vectorized
simulation samplers, (2) the share of numpy ``Generator.laplace`` outputs that are impossible
under the neighbouring input (Mironov 2012), and the same check for our grid Laplace release.
Measurements only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction

import numpy as np

from shuffledp.central import (
    BinomialMechanism,
    DistributedGeometricMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PermuteAndFlip,
    simulate_discrete_gaussian,
    simulate_discrete_laplace,
)
from shuffledp.central import exact


def _rate(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t)


def bench_exact(n: int) -> list[tuple[str, str, float]]:
    rows = []
    for scale in (Fraction(1), Fraction(10), Fraction(1000)):
        rows.append(("discrete Laplace (exact, OS)", f"scale {scale}", _rate(lambda s=scale: exact.discrete_laplace(s), n)))
    lap = LaplaceMechanism(1.0, 1.0)
    rows.append(("LaplaceMechanism.release (grid 2^-40)", f"grid scale {float(lap.grid_scale):.3g}",
                 _rate(lambda: lap.release(0.3), n)))
    for sigma in (1, 10, 1000):
        s2 = Fraction(sigma) ** 2
        rows.append(("discrete Gaussian (exact, OS)", f"sigma {sigma}", _rate(lambda s=s2: exact.discrete_gaussian(s), n)))
    g = GaussianMechanism(1.0, 1e-5)
    rows.append(("GaussianMechanism.release (grid)", f"grid sigma {g.grid_sigma:.3g}", _rate(lambda: g.release(0.3), n)))
    b = BinomialMechanism(1.0, 1e-6)
    rows.append(("binomial (exact bits)", f"N {b.trials}", _rate(lambda: b.release(0), n)))
    b2 = BinomialMechanism(1.0, 1e-6, trials=1_000_000)
    rows.append(("binomial (exact bits)", "N 1e6", _rate(lambda: b2.release(0), max(1, n // 10))))
    for eps, parties in ((1.0, 100), (0.01, 1000)):
        d = DistributedGeometricMechanism(eps, parties)
        rows.append(("Polya share X - Y (exact, OS)", f"eps/D {eps}, n {parties}", _rate(d.share, max(1, n // 20))))
    pf = PermuteAndFlip(1.0)
    u = np.random.default_rng(0).uniform(0, 10, 100)
    rows.append(("permute-and-flip release", "d 100", _rate(lambda: pf.release(u), max(1, n // 10))))
    return rows


def bench_simulation(n: int) -> list[tuple[str, str, float]]:
    rng = np.random.default_rng(1)
    rows = []
    t = time.perf_counter()
    simulate_discrete_laplace(10.0, n, rng)
    rows.append(("discrete Laplace (numpy simulation)", "scale 10", n / (time.perf_counter() - t)))
    t = time.perf_counter()
    simulate_discrete_gaussian(10.0, n, rng)
    rows.append(("discrete Gaussian (numpy simulation)", "sigma 10", n / (time.perf_counter() - t)))
    return rows


# --------------------------------------------------------------------------------------------
# Mironov's attack on numpy's Laplace sampler
# --------------------------------------------------------------------------------------------

_TWO53 = 2.0 ** 53


def _np_laplace_value(k: int) -> float:
    """numpy's random_laplace(loc=0, scale=1) for U = k / 2^53 (distributions.c), in C doubles."""
    u = k / _TWO53
    if u >= 0.5:
        return 0.0 - 1.0 * math.log(2.0 - u - u)
    return 0.0 + 1.0 * math.log(u + u)


def _reachable_from_zero(y: float) -> bool:
    """Is y = random_laplace(0, 1) for some U = k/2^53? Each branch is monotone in k: bisect."""
    if y < 0:  # branch U in (0, 0.5): log(2U) increasing in k
        lo, hi = 1, (1 << 52) - 1
    else:      # branch U in [0.5, 1): -log(2 - 2U) increasing in k
        lo, hi = 1 << 52, (1 << 53) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _np_laplace_value(mid) < y:
            lo = mid + 1
        else:
            hi = mid
    return _np_laplace_value(lo) == y


def mironov_attack(n: int) -> tuple[float, float, float]:
    """Share of numpy Laplace outputs from loc = 1 that loc = 0 cannot produce (and a sanity
    check: outputs from loc = 0 are all reachable from loc = 0), b = 1; then the same question
    for our grid release (every output is a grid multiple, reachable from any input)."""
    rng = np.random.default_rng(2012)
    from_one = rng.laplace(1.0, 1.0, n)
    from_zero = rng.laplace(0.0, 1.0, n)
    impossible = float(np.mean([not _reachable_from_zero(float(y)) for y in from_one]))
    sanity = float(np.mean([_reachable_from_zero(float(y)) for y in from_zero]))
    lap = LaplaceMechanism(1.0, 1.0)
    g = lap.granularity
    ours = lap.release(np.ones(min(n, 500)))
    off_grid = float(np.mean(ours / g != np.round(ours / g)))
    return impossible, sanity, off_grid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer samples")
    args = ap.parse_args()
    n = 2000 if args.quick else 20000
    print(f"{'sampler':42s} {'parameter':26s} {'samples/s':>12s} {'us/sample':>10s}")
    for name, param, rate in bench_exact(n) + bench_simulation(100 * n):
        print(f"{name:42s} {param:26s} {rate:12,.0f} {1e6 / rate:10.2f}")
    imp, sanity, off = mironov_attack(500 if args.quick else 4000)
    print()
    print("Mironov (CCS 2012) on numpy Generator.laplace, b = 1:")
    print(f"  outputs from f = 1 impossible under f = 0: {imp:.1%}   (sanity: f = 0 outputs reachable from 0: {sanity:.1%})")
    print(f"  LaplaceMechanism.release: outputs off the 2^k grid: {off:.1%} (so every output is reachable from every input)")


if __name__ == "__main__":
    main()
