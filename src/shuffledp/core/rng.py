"""Randomness policy.

- Simulation and experiments pass an explicit, seeded :class:`numpy.random.Generator`
  (reproducible): :func:`simulation_rng`.
- Clients and services draw a generator seeded from the OS (:func:`secure_rng`); they never
  accept a seed (:func:`as_generator` with ``production=True`` refuses one).
- numpy's bit generators are **not** cryptographically secure: PCG64's state can in principle be
  recovered from enough of its raw output. A report reveals a function of the randomizer's draws,
  so one generator must not be reused across many reports that an observer may see: call
  :func:`secure_rng` afresh for every encode call (one batch, typically one user's report) and
  drop it afterwards. Each call re-seeds from 256 fresh bits of ``os.urandom``, so batches are
  independent and nothing learned from one batch says anything about another.
- Central noise on a release path uses exact integer samplers fed by :mod:`secrets`
  (see ``shuffledp.central``), not numpy floats.
"""

from __future__ import annotations

import os

import numpy as np

from .errors import ValidationError

__all__ = ["simulation_rng", "secure_rng", "as_generator"]


def simulation_rng(seed: int | None = None) -> np.random.Generator:
    """A reproducible generator for simulation (``seed=None`` draws a fresh OS seed)."""
    return np.random.default_rng(seed)


def secure_rng() -> np.random.Generator:
    """A fresh generator seeded with 256 bits from ``os.urandom`` (for clients/services).

    **Use it for one encode call (one batch) only**, then drop it: the bit generator (PCG64) is
    statistically strong but *not* a cryptographically secure generator, so a generator shared by
    many reports could in principle let an observer of those reports reconstruct its state. Every
    call re-seeds from the OS, so separate calls are independent. Anything whose secrecy a
    guarantee rests on (the shuffle permutation, see
    :func:`shuffledp.shuffle.shuffler.csprng_permutation`; central noise, see ``shuffledp.central``)
    reads :func:`os.urandom` directly instead.
    """
    seed = int.from_bytes(os.urandom(32), "little")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))


def as_generator(rng: np.random.Generator | int | None, *, production: bool = False) -> np.random.Generator:
    """Normalise an ``rng`` argument.

    In simulation (``production=False``) an int seeds a generator and ``None`` draws an OS seed.
    In production an explicit seed is refused: only ``None`` (OS-seeded) is accepted.
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
