"""Apple CMS / HCMS timing and accuracy table.

    PYTHONPATH=src python benchmarks/apple_timing.py                  # n in {1e5, 1e6}, d in {64, 1024}, eps in {1, 4}
    PYTHONPATH=src python benchmarks/apple_timing.py --quick          # n = 1e5 only
    PYTHONPATH=src python benchmarks/apple_timing.py --ratios 2000    # + empirical/theory variance ratios
    PYTHONPATH=src python benchmarks/apple_timing.py --debias exact   # the fixed-family unbiased estimator

Timing columns are wall seconds (``perf_counter``) and, in brackets, CPU seconds of this process
(``process_time``), which is the better number on a shared machine. ``MSE/theory`` compares the
mean squared error over all items of one run (one fixed hash family, Zipf(1.1) data) with the mean
of the closed-form per-item variances (``variances(n, true)``, which include the hash-collision
term). ``--ratios R`` runs R repetitions with a fresh hash family each (the randomness the
estimator is unbiased over) at small n and reports empirical variance / closed form and the
bias z-score of a heavy, a medium and a light item.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from shuffledp.local import frequency_oracle


def zipf_data(n: int, d: int, seed: int = 20240601) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** 1.1
    return np.random.default_rng(seed).choice(d, size=n, p=w / w.sum())


def timed(fn, *args):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w0, time.process_time() - c0


def timing_rows(ns, ds, epss, k, m, chunk, debias="family"):
    rows = []
    for n in ns:
        for d in ds:
            x = zipf_data(n, d)
            true = np.bincount(x, minlength=d) / n
            for eps in epss:
                for name in ("cms", "hcms"):
                    mech = frequency_oracle(name, eps, d, k=k, m=m, debias=debias, hash_seed=0)  # one fixed family
                    rng = np.random.default_rng(1)
                    mech.estimate(mech.aggregate(mech.randomize(x[:10], rng)), 10)  # warm-up (tables)
                    enc = agg = [0.0, 0.0]
                    stat = None
                    for s in range(0, n, chunk):  # stream chunks like the simulator
                        rep, w1, c1 = timed(mech.randomize, x[s:s + chunk], rng)
                        part, w2, c2 = timed(mech.aggregate, rep)
                        enc = [enc[0] + w1, enc[1] + c1]
                        agg = [agg[0] + w2, agg[1] + c2]
                        stat = part if stat is None else stat + part
                    est, w3, c3 = timed(mech.estimate, stat, n)
                    mse = float(np.mean((est.values - true) ** 2))
                    theory = float(np.mean(mech.variances(n, true)))
                    rows.append((name, n, d, eps, enc, agg, (w3, c3), mse / theory))
                    print(f"  done {name} n={n:,} d={d} eps={eps:g}", flush=True)
    return rows


def ratio_rows(R, seed=7):
    rng = np.random.default_rng(seed)
    cases = [("cms", 4.0, 4, 16), ("cms", 1.0, 2, 8), ("cms", 2.0, 16, 64),
             ("hcms", 4.0, 4, 16), ("hcms", 1.0, 1, 8), ("hcms", 2.0, 16, 64)]
    d, n = 12, 600
    x = np.repeat(np.arange(d), n // d)
    x[: n // 3] = 0
    x[n // 3: n // 2] = 1
    f = np.bincount(x, minlength=d) / n
    out = []
    for name, eps, k, m in cases:
        ests = np.empty((R, d))
        for r in range(R):
            mech = frequency_oracle(name, eps, d, k=k, m=m, hash_seed=r)
            ests[r] = mech.estimate(mech.aggregate(mech.randomize(x, rng)), n).values
        var = mech.variances(n, f)
        ratios = [ests[:, i].var(ddof=1) / var[i] for i in (0, 1, 5)]
        zs = [(ests[:, i].mean() - f[i]) / math.sqrt(var[i] / R) for i in (0, 1, 5)]
        out.append((name, eps, k, m, ratios, zs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="n = 1e5 only")
    ap.add_argument("--n", default="100000,1000000")
    ap.add_argument("--d", default="64,1024")
    ap.add_argument("--eps", default="1,4")
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--chunk", type=int, default=1 << 18)
    ap.add_argument("--debias", default="family", choices=["family", "exact"])
    ap.add_argument("--ratios", type=int, default=0, metavar="R", help="repetitions for the variance-ratio table")
    a = ap.parse_args()
    ns = [100_000] if a.quick else [int(float(v)) for v in a.n.split(",")]
    rows = timing_rows(ns, [int(v) for v in a.d.split(",")], [float(v) for v in a.eps.split(",")],
                       a.k, a.m, a.chunk, a.debias)
    print(f"\nApple CMS / HCMS, k={a.k}, m={a.m}, debias={a.debias}: wall s [cpu s]")
    print("| mech | n | d | eps | encode s | aggregate s | estimate s | MSE/theory |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, d, eps, enc, agg, est, ratio in rows:
        print(f"| {name} | {n:,} | {d} | {eps:g} | {enc[0]:.3f} [{enc[1]:.3f}] | {agg[0]:.3f} [{agg[1]:.3f}] "
              f"| {est[0]:.3f} [{est[1]:.3f}] | {ratio:.3f} |")
    if a.ratios:
        print(f"\nEmpirical / closed-form variance over {a.ratios} repetitions, fresh hash family each "
              "(d=12, n=600; items 0 heavy, 1 medium, 5 light), and bias z-scores")
        print("| mech | eps | k | m | ratio item 0 | ratio item 1 | ratio item 5 | z item 0 | z item 1 | z item 5 |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, eps, k, m, ratios, zs in ratio_rows(a.ratios):
            print(f"| {name} | {eps:g} | {k} | {m} | " + " | ".join(f"{r:.3f}" for r in ratios) + " | "
                  + " | ".join(f"{z:+.2f}" for z in zs) + " |")


if __name__ == "__main__":
    main()
