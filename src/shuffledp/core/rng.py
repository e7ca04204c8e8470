"""Randomness policy.

- Simulation and experiments pass an explicit, seeded :class:`numpy.random.Generator`
  (reproducible): :func:`simulation_rng`.
- Clients and services draw a generator seeded from the OS (:func:`secure_rng`); they never
  accept a seed. Production code calls :func:`require_unseeded` on anything it is handed.
- Central noise on a release path uses exact integer samplers fed by :mod:`secrets`
  (see ``shuffledp.central``), not numpy floats.
"""

from __future__ import annotations

import numpy as np

from .errors import ValidationError

__all__ = ["simulation_rng", "secure_rng", "as_generator"]


def simulation_rng(seed: int | None = None) -> np.random.Generator:
    """A reproducible generator for simulation (``seed=None`` draws a fresh OS seed)."""
    return np.random.default_rng(seed)


def secure_rng() -> np.random.Generator:
    """A generator seeded with 128 bits from the OS entropy pool (for clients/services).

    PCG64 is *not* a cryptographically secure generator, even when seeded from the OS: anything
    whose secrecy the guarantee rests on (the shuffle permutation, see
    :func:`shuffledp.shuffle.shuffler.csprng_permutation`; central noise, see
    ``shuffledp.central``) reads :func:`os.urandom` directly instead.
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence()))


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
