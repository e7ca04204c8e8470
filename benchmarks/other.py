"""Baselines, range counting, distinct elements, uniformity testing: measured error vs the stated one.

    python benchmarks/other.py                      # n = 1e6, eps = 0.9, delta = 1e-6, d = 100, R = 300
    python benchmarks/other.py --n 100000 --R 500

Every row draws R exact simulations of the analyzer's statistic (``simulate_statistic``; its law is
tested against the message-level pipeline in tests/shuffle/) on one fixed dataset and compares the
empirical MSE with the protocol's closed form ("MSE/stated" ~ 1 within the chi-square band of R
draws: +-0.16 at R = 300 for one item, tighter for averages over items). Data: bits ~ Ber(0.5);
categorical values = round(N(d/2, d/6)) clipped to [0, d); sums N(0.5, 0.2) clipped to [0, 1].
Distinct: round(N(d/2, d/12)) (about 60 of 100 values present, tails with small counts). Uniformity
testers: type-I error (uniform data) and power (TV distance alpha = 0.25) over R tests at the n given
by ``--tester-n`` (default: the smallest n whose Chebyshev type-I bound is <= 0.05).
Reported times: one simulate_statistic + estimate, best of 3.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from shuffledp.shuffle import protocol

from _timing import best_of  # benchmarks/ is on sys.path when run as a script


def _row(name: str, mse_ratio: float, rmse: float, stated: float, p, t: float, note: str = "") -> None:
    st = p.privacy(p.n)
    print(f"| {name} | {rmse:.4g} | {stated:.4g} | {mse_ratio:.3f} | {p.messages_per_user:.4g} | "
          f"{p.bits_per_message:.4g} | {t:.4f} | ({st.eps:.4g}, {st.delta:.3g}) | {note} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--eps", type=float, default=0.9)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--R", type=int, default=300)
    ap.add_argument("--tester-n", type=int, default=0)
    a = ap.parse_args()
    n, eps, dl, d, R = a.n, a.eps, a.delta, a.d, a.R
    rng = np.random.default_rng(2026)
    bits = (rng.random(n) < 0.5).astype(np.int64)
    cat = np.clip(np.rint(rng.normal(d / 2, d / 6, n)), 0, d - 1).astype(np.int64)
    counts = np.bincount(cat, minlength=d)
    vals = np.clip(rng.normal(0.5, 0.2, n), 0.0, 1.0)
    print(f"n={n} eps={eps} delta={dl} d={d} R={R}\n")
    print("| protocol | RMSE meas | stated sd | MSE/stated | msgs/user | bits/msg | sim s | privacy | notes |")
    print("|---|---|---|---|---|---|---|---|---|")

    # ---- counting baselines (one count)
    for name in ("ldp_rr", "cdp_laplace_count"):
        p = protocol(name, epsilon=eps, delta=dl, n=n)
        x = p.summarize(bits)
        est = np.array([p.estimate(p.simulate_statistic(x, rng), n).values[0] for _ in range(R)])
        mse = float(np.mean((est - bits.sum()) ** 2))
        _row(name, mse / p.variance(n), math.sqrt(mse), math.sqrt(p.variance(n)), p,
             best_of(lambda: p.estimate(p.simulate_statistic(x, rng), n)))

    # ---- histogram baselines (per-item MSE averaged over the d items)
    for name, kw in (("ldp_krr", {}), ("ldp_oracle", {"oracle": "olh"}), ("cdp_laplace_hist", {}),
                     ("cdp_laplace_hist", {"neighbouring": "add_remove_one"})):
        p = protocol(name, epsilon=eps, delta=dl, n=n, d=d, **kw)
        x = p.summarize(cat)
        est = np.array([p.estimate(p.simulate_statistic(x, rng), n).values for _ in range(R)])
        if name == "ldp_krr":
            var = p.item_variance(n, counts)
        elif name == "ldp_oracle":
            var = np.array([p.oracle.variance(n, c / n) for c in counts]) * n**2
        else:
            var = np.full(d, p.variance(n))
        mse = np.mean((est - counts) ** 2, axis=0)
        label = name + ("" if not kw else " " + ",".join(f"{k}={v}" for k, v in kw.items()))
        _row(label, float(np.mean(mse / var)), math.sqrt(float(mse.mean())), math.sqrt(float(var.mean())), p,
             best_of(lambda: p.estimate(p.simulate_statistic(x, rng), n)), "per item, averaged")

    # ---- sum baselines
    for name in ("ldp_harmony", "cdp_laplace_sum"):
        p = protocol(name, epsilon=eps, delta=dl, n=n)
        x = p.summarize(vals)
        est = np.array([p.estimate(p.simulate_statistic(x, rng), n).values[0] for _ in range(R)])
        var = p.sum_variance(vals) if name == "ldp_harmony" else p.variance(n)
        mse = float(np.mean((est - math.fsum(vals.tolist())) ** 2))
        _row(name, mse / var, math.sqrt(mse), math.sqrt(var), p, best_of(lambda: p.estimate(p.simulate_statistic(x, rng), n)),
             "exact variance for these values" if name == "ldp_harmony" else "")

    # ---- range counting: every range [lo, hi) of [0, d)
    lo, hi = np.triu_indices(d + 1, 1)
    truth = np.concatenate([[0], np.cumsum(counts)])
    truth = truth[hi] - truth[lo]
    for consistent in (True, False):
        p = protocol("range_count", epsilon=eps, delta=dl, n=n, d=d, consistent=consistent)
        var = p.range_variance(counts, lo, hi)
        est = np.array([p.range_queries(p.simulate_statistic(counts, rng), n, lo, hi).values for _ in range(R)])
        mse = np.mean((est - truth) ** 2, axis=0)
        leaf = p.range_variance(counts, np.arange(d), np.arange(d) + 1)
        _row(f"range_count consistent={consistent}", float(np.mean(mse / var)), math.sqrt(float(mse.mean())),
             math.sqrt(float(var.mean())), p,
             best_of(lambda: p.range_queries(p.simulate_statistic(counts, rng), n, lo, hi)),
             f"all {lo.size} ranges; leaf sd {math.sqrt(leaf.mean()):.4g}; L={p.L}")

    # ---- distinct elements
    sparse = np.clip(np.rint(rng.normal(d / 2, d / 12, n)), 0, d - 1).astype(np.int64)
    sc = np.bincount(sparse, minlength=d)
    for counter in ("sgm", "bn"):
        p = protocol("distinct", epsilon=eps, delta=dl, n=n, d=d, counter=counter)
        mean, var = p.expected_estimate(sc)
        est = np.array([p.estimate(p.simulate_statistic(sc, rng), n).values[0] for _ in range(R)])
        D = int(np.count_nonzero(sc))
        _row(f"distinct counter={counter}", float(np.var(est, ddof=1) / var), math.sqrt(float(np.mean((est - D) ** 2))),
             math.sqrt(var), p, best_of(lambda: p.estimate(p.simulate_statistic(sc, rng), n)),
             f"D={D}, mean {est.mean():.3f} (exact {mean:.3f}); MSE/stated is var/exact var; bound sd "
             f"{math.sqrt(p.variance()):.3g}")

    # ---- uniformity testing
    alpha = 0.25
    u = np.full(d, 1.0 / d)
    alt = np.where(np.arange(d) % 2 == 0, (1 + 2 * alpha) / d, (1 - 2 * alpha) / d)
    print("\n| tester | n | type-I bound | type-I measured | power measured | msgs/user | privacy |")
    print("|---|---|---|---|---|---|---|")
    for name in ("put", "aut"):
        m = a.tester_n
        if not m:
            lo_n, hi_n = 100, 10**8
            while hi_n - lo_n > max(1, lo_n // 200):
                mid = (lo_n + hi_n) // 2
                try:
                    good = protocol(name, epsilon=eps, delta=dl, n=mid, d=d, alpha=alpha).type1_bound() <= 0.05
                except Exception:  # noqa: BLE001 - outside the counters' domain
                    good = False
                lo_n, hi_n = (lo_n, mid) if good else (mid, hi_n)
            m = hi_n
        for mm in (m, m // 3, m // 10, m // 30):  # the Chebyshev n, then fewer samples
            try:
                p = protocol(name, epsilon=eps, delta=dl, n=mm, d=d, alpha=alpha)
            except Exception as e:  # noqa: BLE001 - outside the counters' domain
                print(f"| {name} | {mm} | refused: {str(e)[:60]} | | | | |")
                continue
            r0 = np.mean([p.test_statistic(p.simulate_statistic(rng.multinomial(mm, u), rng), mm).reject
                          for _ in range(R)])
            r1 = np.mean([p.test_statistic(p.simulate_statistic(rng.multinomial(mm, alt), rng), mm).reject
                          for _ in range(R)])
            st = p.privacy()
            print(f"| {name} | {mm} | {p.type1_bound():.3g} | {r0:.3f} | {r1:.3f} | {p.messages_per_user:.4g} | "
                  f"({st.eps:.4g}, {st.delta:.3g}, gamma {st.gamma}) |")


if __name__ == "__main__":
    main()
