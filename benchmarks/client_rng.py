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


def main() -> None:
    mechs = {"grr d=64": GeneralizedRandomizedResponse(2.0, 64), "oue d=1024": OptimizedUnaryEncoding(2.0, 1024)}
    n_sdk, n_batch = 2000, 10**5
    print(f"bit generator of secure_rng(): {type(secure_rng().bit_generator).__name__}")
    print("| mechanism | generator | sdk: one report, fresh generator (us/report) | "
          "batch n=1e5, one generator (us/report) |")
    print("|---|---|---|---|")
    for mname, mech in mechs.items():
        vals = np.random.default_rng(0).integers(0, mech.d, n_batch)
        one = np.asarray([3])
        base = None
        for gname, make in GENERATORS.items():
            def sdk() -> None:
                for _ in range(n_sdk):
                    mech.randomize(one, make())

            t_sdk = best_of(sdk, 5) / n_sdk * 1e6
            t_batch = best_of(lambda: mech.randomize(vals, make()), 5) / n_batch * 1e6
            if base is None:
                base = (t_sdk, t_batch)
            print(f"| {mname} | {gname} | {t_sdk:.1f} ({t_sdk / base[0]:.2f}x) | "
                  f"{t_batch:.3f} ({t_batch / base[1]:.2f}x) |")


if __name__ == "__main__":
    main()
