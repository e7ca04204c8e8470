"""Client encode time per report with each candidate bit generator for the production randomness.

Compares the OS-seeded PCG64 generator that ``secure_rng`` returned before with the two
cryptographic bit generators of ``randomgen`` (ChaCha with 20 rounds and a 256-bit key; AES-128
in counter mode with AES-NI), keyed from ``os.urandom`` exactly as ``secure_rng`` keys them:

* ``sdk``: the SDK's per-report path, one fresh generator per report (``n = 1``):
  ``mech.randomize([x], make())``;
* ``batch``: ``encode_reports``' path, one generator for a vectorized batch of ``n = 10^5``
  users: ``mech.randomize(values, make())``, reported per report.

Mechanisms: GRR (eps = 2, d = 64) and OUE (eps = 2, d = 1024). Run:
``PYTHONPATH=src python benchmarks/client_rng.py``.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from randomgen import AESCounter, ChaCha

sys.path.insert(0, os.path.dirname(__file__))
from _timing import best_of  # noqa: E402

from shuffledp.core.rng import secure_rng  # noqa: E402
from shuffledp.local.grr import GeneralizedRandomizedResponse  # noqa: E402
from shuffledp.local.unary import OptimizedUnaryEncoding  # noqa: E402


def pcg64() -> np.random.Generator:
    """The pre-change ``secure_rng``: PCG64 seeded with 256 bits of ``os.urandom``."""
    seed = int.from_bytes(os.urandom(32), "little")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))


def chacha20() -> np.random.Generator:
    return np.random.Generator(ChaCha(key=int.from_bytes(os.urandom(32), "little"), rounds=20))


def aes_ctr() -> np.random.Generator:
    return np.random.Generator(AESCounter(key=int.from_bytes(os.urandom(16), "little")))


GENERATORS = {"pcg64 (before)": pcg64, "chacha20": chacha20, "aes128-ctr": aes_ctr,
              "secure_rng (now)": secure_rng}


def _interleaved(cases: dict, rounds: int) -> dict:
    """Best time of each case over ``rounds`` rounds, the cases interleaved within each round (the
    machine is shared: interleaving spreads load changes over all cases alike)."""
    best = {k: float("inf") for k in cases}
    for _ in range(rounds):
        for k, f in cases.items():
            best[k] = min(best[k], best_of(f, 1))
    return best


def main() -> None:
    from shuffledp.core import rng as rng_mod
    from shuffledp.service.client import encode_reports
    from shuffledp.service.config import create_task_config

    mechs = {"grr d=64": GeneralizedRandomizedResponse(2.0, 64), "oue d=1024": OptimizedUnaryEncoding(2.0, 1024)}
    n_sdk, n_batch = 1000, 10**5
    print(f"bit generator of secure_rng(): {type(secure_rng().bit_generator).__name__}")
    print("| mechanism | generator | sdk: one report, fresh generator (us/report) | "
          "batch n=1e5, one generator (us/report) |")
    print("|---|---|---|---|")
    one = np.asarray([3])
    for mname, mech in mechs.items():
        vals = np.random.default_rng(0).integers(0, mech.d, n_batch)
        cases = {}
        for gname, make in GENERATORS.items():
            def sdk(make=make) -> None:
                for _ in range(n_sdk):
                    mech.randomize(one, make())

            cases[(gname, "sdk")] = sdk
            cases[(gname, "batch")] = lambda make=make: mech.randomize(vals, make())
        best = _interleaved(cases, 7)
        b0 = next(iter(GENERATORS))
        for gname in GENERATORS:
            s_, b_ = best[(gname, "sdk")] / n_sdk * 1e6, best[(gname, "batch")] / n_batch * 1e6
            print(f"| {mname} | {gname} | {s_:.1f} ({s_ / (best[(b0, 'sdk')] / n_sdk * 1e6):.2f}x) | "
                  f"{b_:.3f} ({b_ / (best[(b0, 'batch')] / n_batch * 1e6):.2f}x) |")

    # the whole encode_reports (randomize + 16-byte report ids + plaintext rows), GRR d = 64
    cfg = create_task_config(name="bench", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                      "params": {"d": 64}}, target_central={"eps": 1, "delta": 1e-8})
    vals = np.random.default_rng(0).integers(0, 64, n_batch)
    real = rng_mod.secure_rng
    cases = {}
    for label, make in (("pcg64 (before)", pcg64), ("secure_rng (now)", real)):
        def with_gen(f, make=make):
            def run() -> None:
                rng_mod.secure_rng = make
                try:
                    f()
                finally:
                    rng_mod.secure_rng = real
            return run

        def enc_one() -> None:
            for _ in range(n_sdk):
                encode_reports(cfg, one, 0.0)

        cases[(label, 1)] = with_gen(enc_one)
        cases[(label, n_batch)] = with_gen(lambda: encode_reports(cfg, vals, 0.0))
    best = _interleaved(cases, 7)
    print()
    print("| encode_reports, GRR d=64 | n=1 (us/report) | n=1e5 (us/report) |")
    print("|---|---|---|")
    for label in ("pcg64 (before)", "secure_rng (now)"):
        print(f"| {label} | {best[(label, 1)] / n_sdk * 1e6:.1f} | {best[(label, n_batch)] / n_batch * 1e6:.3f} |")


if __name__ == "__main__":
    main()
