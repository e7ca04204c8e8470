"""Runs one peer-library case (executed by the peers' own virtualenv; see frequency.py).

Prints one JSON line: encode_s, server_s, peak_mb, mse_theory, n_run, scaled.
Peers are per-user APIs, so slow cases run on fewer users (pilot-predicted) and their times and
report memory are scaled linearly to the target n.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

import numpy as np


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def make_pure_ldp(mech, d, eps):
    ident = lambda x: x  # noqa: E731  (pure-ldp assumes 1-indexed data by default)
    if mech == "grr":
        from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
        s = DEServer(eps, d, index_mapper=ident)
        return DEClient(eps, d, index_mapper=ident), s
    if mech == "oue":
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer
        return UEClient(eps, d, use_oue=True, index_mapper=ident), UEServer(eps, d, use_oue=True, index_mapper=ident)
    if mech == "olh":
        from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
        return (LHClient(eps, d, use_olh=True, index_mapper=ident), LHServer(eps, d, use_olh=True, index_mapper=ident))
    if mech == "hr":
        from pure_ldp.frequency_oracles.hadamard_response import HadamardResponseClient, HadamardResponseServer
        s = HadamardResponseServer(eps, d, index_mapper=ident)
        return HadamardResponseClient(eps, d, s.get_hash_funcs(), index_mapper=ident), s
    if mech in ("cms", "hcms"):
        from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
        s = CMSServer(eps, 1024, 1024, is_hadamard=(mech == "hcms"), index_mapper=ident)
        return CMSClient(eps, s.get_hash_funcs(), 1024, is_hadamard=(mech == "hcms")), s
    return None


def run_pure_ldp(mech, x, d, eps):
    pair = make_pure_ldp(mech, d, eps)
    if pair is None:
        return None
    client, server = pair
    t0 = time.perf_counter()
    reps = [client.privatise(int(v)) for v in x]
    t1 = time.perf_counter()
    server.aggregate_all(reps)
    est = np.asarray(server.estimate_all(list(range(d)), suppress_warnings=True), dtype=float) / len(x)
    return t1 - t0, time.perf_counter() - t1, est


def run_multi_freq(mech, x, d, eps):
    if mech == "grr":
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI as agg, GRR_Client as cl
        t0 = time.perf_counter(); reps = [cl(int(v), d, eps) for v in x]; t1 = time.perf_counter()
        est = agg(reps, d, eps)
    elif mech == "oue":
        from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI as agg, UE_Client as cl
        t0 = time.perf_counter(); reps = [cl(int(v), d, eps, True) for v in x]; t1 = time.perf_counter()
        est = agg(reps, eps, True)
    elif mech == "olh":
        from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI as agg, LH_Client as cl
        t0 = time.perf_counter(); reps = [cl(int(v), d, eps, True) for v in x]; t1 = time.perf_counter()
        est = agg(reps, d, eps, True)
    else:
        return None
    return t1 - t0, time.perf_counter() - t1, np.asarray(est, dtype=float)


def theory(mech, n, d, eps, true):
    try:
        from shuffledp.local import frequency_oracle

        kw = {"k": 1024, "m": 1024} if mech in ("cms", "hcms") else {}
        m = frequency_oracle(mech, eps, d, **kw)
        return float(np.mean([m.variance(n, f) for f in true]))
    except Exception:
        return None


def main() -> None:
    peer, mech, n, d, eps, budget = json.loads(sys.argv[1])
    runner = run_pure_ldp if peer == "pure-ldp" else run_multi_freq
    w = 1.0 / np.arange(1, d + 1) ** 1.1
    x = np.random.default_rng(20240601).choice(d, size=n, p=w / w.sum())
    if runner(mech, x[:50], d, eps) is None:  # warm-up (imports, numba JIT); None = not offered
        print(json.dumps({"skip": True}))
        return
    pilot = min(n, 2000)
    r = runner(mech, x[:pilot], d, eps)
    predicted = (r[0] + r[1]) * n / pilot
    n_run = n if predicted <= budget else max(pilot, int(n * budget / predicted))
    base = current_rss_mb()
    enc, srv, est = runner(mech, x[:n_run], d, eps)
    true = np.bincount(x[:n_run], minlength=d) / n_run
    th = theory(mech, n_run, d, eps, true)
    scale = n / n_run
    print(json.dumps({"encode_s": enc * scale, "server_s": srv * scale, "peak_mb": (rss_mb() - base) * scale,
                      "mse_theory": (float(np.mean((est - true) ** 2)) / th) if th else None,
                      "n_run": n_run, "scaled": n_run < n}))


if __name__ == "__main__":
    main()
