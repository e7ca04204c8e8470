"""Unary encodings (SUE, OUE): timings, peak memory and variance ratios.

    python benchmarks/unary.py                  # n in {1e5, 1e6}, d in {64, 1024}, eps in {1, 4}
    python benchmarks/unary.py --n 1000000 --d 1024 --eps 1 --repeat 5
    python benchmarks/unary.py --R 4000         # variance ratios with more rounds

Columns
-------
randomize s / aggregate s : best of ``--repeat`` runs on all n users in one call (Zipf(1.1) data),
    wall-clock and, in parentheses, CPU seconds of this process (numpy runs single-threaded here, so
    on a shared, loaded machine the CPU time is the better measure of the code's own cost).
agg plain s : the byte-wise ``bits.packed_column_sums`` on the same reports (what SWAR replaces).
lsb sampler s : ``bits.bernoulli_packed`` (least-significant-digit-first, one word per digit) for
    the q bits on the 2^-20 grid, for comparison with the lazy sampler used by ``randomize``.
peak MB : tracemalloc peak of randomize + aggregate of the n users in one call (numpy buffers are
    traced); reports themselves are n * ceil(d/8) bytes of it.
var ratio : R rounds of m users (one randomize call of R*m users), sample variance of item 0's
    estimate (true fraction ~0.5) and of the last item, divided by the closed form; ``z`` is the
    standardized mean error of item 0. The 99.99% chi-square band for the ratio is printed.
"""

from __future__ import annotations

import argparse
import math
import time
import tracemalloc

import numpy as np


def zipf(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** 1.1
    return rng.choice(d, size=n, p=w / w.sum())


def best(fn, repeat: int) -> float:
    """Best wall-clock seconds of ``repeat`` runs."""
    return best2(fn, repeat)[0]


def best2(fn, repeat: int) -> tuple[float, float]:
    """Best (wall-clock, CPU) seconds of ``repeat`` runs (CPU time: this process, all threads)."""
    t = c = math.inf
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        t, c = min(t, time.perf_counter() - t0), min(c, time.process_time() - c0)
    return t, c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="100000,1000000")
    ap.add_argument("--d", default="64,1024")
    ap.add_argument("--eps", default="1,4")
    ap.add_argument("--mechs", default="sue,oue")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--R", type=int, default=2000, help="rounds for the variance ratio")
    ap.add_argument("--m", type=int, default=500, help="users per round for the variance ratio")
    a = ap.parse_args()

    from scipy import stats

    from shuffledp.local import frequency_oracle, take_rows
    from shuffledp.local.bits import bernoulli_packed, dyadic, packed_column_sums

    rng = np.random.default_rng(20261123)
    print("| mech | n | d | eps | eff. eps | randomize s (cpu) | aggregate s (cpu) | agg plain s | lsb sampler s | peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(float(v)) for v in a.n.split(",")]:
        for d in [int(v) for v in a.d.split(",")]:
            x = zipf(n, d, rng)
            for eps in [float(v) for v in a.eps.split(",")]:
                for name in a.mechs.split(","):
                    m = frequency_oracle(name, eps, d)
                    m.aggregate(m.randomize(x[:100], rng))  # warm-up
                    holder = {}
                    t_rand, c_rand = best2(lambda: holder.__setitem__("r", m.randomize(x, rng)), a.repeat)
                    rep = holder.pop("r")
                    t_agg, c_agg = best2(lambda: m.aggregate(rep), a.repeat)
                    t_plain = best(lambda: packed_column_sums(rep["bits"], d), 1)
                    q20 = dyadic(m.q_ideal, 20, "up")
                    t_lsb = best(lambda: bernoulli_packed(n, d, q20, rng), 1)
                    del rep
                    tracemalloc.start()
                    m.aggregate(m.randomize(x, rng))
                    peak = tracemalloc.get_traced_memory()[1] / 2**20
                    tracemalloc.stop()
                    print(f"| {name} | {n:,} | {d} | {eps:g} | {m.effective_epsilon:.9f} | {t_rand:.3f} ({c_rand:.3f}) | {t_agg:.3f} ({c_agg:.3f}) | "
                          f"{t_plain:.3f} | {t_lsb:.3f} | {peak:.0f} |", flush=True)

    R, mu = a.R, a.m
    lo, hi = (stats.chi2.ppf(q, R - 1) / (R - 1) for q in (5e-5, 1 - 5e-5))
    print(f"\nVariance ratio s^2 / Var (R = {R} rounds of m = {mu} users; 99.99% band [{lo:.3f}, {hi:.3f}])\n")
    print("| mech | d | eps | item 0 ratio | last item ratio | z of item 0 mean |")
    print("|---|---|---|---|---|---|")
    for d in (8, 64):
        pop = np.repeat(np.arange(d), mu // d + 1)[:mu]
        pop[: mu // 2] = 0
        f = np.bincount(pop, minlength=d) / mu
        for eps in (1.0, 4.0):
            for name in a.mechs.split(","):
                m = frequency_oracle(name, eps, d)
                rep = m.randomize(np.tile(pop, R), rng)
                ests = np.stack([m.estimate(m.aggregate(take_rows(rep, slice(r * mu, (r + 1) * mu))), mu).values
                                 for r in range(R)])
                r0 = ests[:, 0].var(ddof=1) / m.variance(mu, f[0])
                r1 = ests[:, -1].var(ddof=1) / m.variance(mu, f[-1])
                z = (ests[:, 0].mean() - f[0]) / math.sqrt(m.variance(mu, f[0]) / R)
                print(f"| {name} | {d} | {eps:g} | {r0:.3f} | {r1:.3f} | {z:+.2f} |", flush=True)

    print("\nExact aggregate simulation (simulate_statistic), n = 10^9 users, d = 1024:")
    for name in a.mechs.split(","):
        m = frequency_oracle(name, 1.0, 1024)
        counts = np.full(1024, 10**9 // 1024)
        t = best(lambda: m.simulate_statistic(counts, rng), a.repeat)
        print(f"  {name}: {t * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
