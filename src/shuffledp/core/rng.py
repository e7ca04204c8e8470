"""Randomness policy.

- Simulation and experiments pass an explicit, seeded :class:`numpy.random.Generator`
  (reproducible): :func:`simulation_rng`.
- Clients and services draw a **cryptographically secure** generator (:func:`secure_rng`): a
  numpy :class:`~numpy.random.Generator` over a counter-mode block or stream cipher from
  ``randomgen`` -- AES-128 in counter mode (:class:`randomgen.AESCounter`) where the CPU has AES
  instructions, else ChaCha20 (:class:`randomgen.ChaCha`, 20 rounds) -- keyed with fresh bytes of
  ``os.urandom``. Its output cannot be predicted from earlier output without the key, unlike
  PCG64's, whose state can be recovered from its raw output. They never accept a seed
  (:func:`as_generator` with ``production=True`` refuses one).
- One generator per encode call (one batch, typically one user's report): the whole vectorized
  randomizer runs on it, so encoding costs about what it cost with PCG64
  (``benchmarks/client_rng.py``, ``docs/benchmarks.md``).
- The uniforms of these generators are ``k / 2^53`` like PCG64's, so the exact samplers of
  :mod:`shuffledp.local` (thresholds on the ``2^-53`` grid) stay exact on them.
- Central noise on a release path uses exact integer samplers fed by the OS
  (see ``shuffledp.central``), not numpy floats; so does noise a client adds that stands in for
  central noise (the Pólya shares of ``cnt_sgm``, ``rsum_dsg`` and the ``sgm`` counters), which
  an encoder draws exactly whenever its generator is a secure one (:func:`is_secure_generator`).
"""

from __future__ import annotations

import os

import numpy as np
from randomgen import AESCounter, ChaCha

from .errors import ValidationError

__all__ = ["simulation_rng", "secure_rng", "as_generator", "is_secure_generator", "SECURE_BIT_GENERATORS",
           "AES_HARDWARE"]

#: The cryptographic bit generators :func:`secure_rng` may return.
SECURE_BIT_GENERATORS = (AESCounter, ChaCha)
#: Whether this CPU has AES instructions (then :func:`secure_rng` uses AES-128-CTR, else ChaCha20).
AES_HARDWARE = bool(AESCounter(key=0).use_aesni)


def simulation_rng(seed: int | None = None) -> np.random.Generator:
    """A reproducible generator for simulation (``seed=None`` draws a fresh OS seed)."""
    return np.random.default_rng(seed)


def secure_rng() -> np.random.Generator:
    """A fresh cryptographically secure generator keyed from ``os.urandom`` (for clients/services).

    With AES instructions: AES-128 in counter mode (:class:`randomgen.AESCounter`) keyed with 128
    bits of ``os.urandom`` (AES-128's key size); otherwise ChaCha20 (:class:`randomgen.ChaCha`,
    ``rounds=20``) keyed with 256 bits of ``os.urandom``. Counter at 0; the key is set directly,
    not derived through a seeding PRNG. Both are numpy bit generators, so every randomizer runs on
    them unchanged and vectorized. Call it once per encode call and drop the generator afterwards.
    """
    if AES_HARDWARE:
        return np.random.Generator(AESCounter(key=int.from_bytes(os.urandom(16), "little")))
    return np.random.Generator(ChaCha(key=int.from_bytes(os.urandom(32), "little"), rounds=20))


def is_secure_generator(rng: object) -> bool:
    """Whether ``rng`` is a numpy Generator over one of :data:`SECURE_BIT_GENERATORS`.

    The rule by which an encoder tells a production call from a simulation: :func:`secure_rng`
    (the client SDK, ``pipeline.run(production=True)``, ``rng=None``) returns such a generator,
    a seeded simulation passes PCG64 (:func:`simulation_rng`). Encoders whose noise protects
    privacy (the Pólya shares of ``cnt_sgm``, ``rsum_dsg`` and the ``sgm`` counters) draw it
    with the exact integer samplers of :mod:`shuffledp.central.exact` from the OS when this is
    true, and with numpy's vectorized float samplers otherwise.
    """
    return isinstance(rng, np.random.Generator) and isinstance(rng.bit_generator, SECURE_BIT_GENERATORS)


def as_generator(rng: np.random.Generator | int | None, *, production: bool = False) -> np.random.Generator:
    """Normalise an ``rng`` argument.

    In simulation (``production=False``) an int seeds a generator and ``None`` draws an OS seed.
    In production an explicit seed is refused: only ``None`` is accepted, and the generator is
    :func:`secure_rng`'s (cryptographic, keyed from ``os.urandom``).
    """
    if production:
        if rng is not None:
            raise ValidationError("production paths do not accept a seed or generator; "
                                  "randomness is drawn from the OS", parameter="rng")
        return secure_rng()
    if rng is None:
        return secure_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise ValidationError(f"rng must be a numpy Generator, an int seed or None, got {type(rng).__name__}",
                          parameter="rng")
