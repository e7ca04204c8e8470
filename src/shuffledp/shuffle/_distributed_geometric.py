"""Distributed symmetric geometric noise sent as split-and-mix shares: the part ``cnt_sgm`` and
``rsum_dsg`` share.

Each user adds ``X - Y``, X, Y i.i.d. Pólya NB(1/(gamma n), alpha), to an integer and sends ``m``
additive shares of the result mod q (Ishai, Kushilevitz, Ostrovsky, Sahai, FOCS 2006); with at
least ``gamma n`` honest users the total noise is NB(>= 1/gamma) - NB(>= 1/gamma), and split-and-mix
with security sigma adds ``(1 + e^eps) 2^-sigma`` to delta (Balle, Bell, Gascón, Nissim, CCS 2020).

Sampler: on a production generator (:func:`shuffledp.core.rng.is_secure_generator`: the client
SDK, ``pipeline.run(production=True)``) X and Y come from the exact rejection sampler
:func:`shuffledp.central.sample_polya` (OS randomness) with r = 1/(gamma n) and the rate (alpha =
exp(-rate)) as exact rationals of the protocol's float parameters, the law the privacy analysis
assumes; a seeded simulation draws them with numpy's negative binomial (float; simulation only).
Cost of the exact draws: O(1) expected uniform draws each whatever the rate (the sampler skips
its rejected rounds), ~10-30 us per draw in pure Python: ~0.15-0.2 ms per user for the whole
encode of cnt_sgm / rsum_dsg at eps = 1, n = 10^4 (0.1 ms with numpy), and
``pipeline.run(production=True)`` at n = 10^5 takes ~3.5 s / ~6 s (0.2 s with numpy).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import stats

from ..central.distributed import (SplitAndMix, sample_polya, split_and_mix_delta, split_and_mix_messages,
                                   split_and_mix_security_bits)
from ..central.distributions import simulate_polya
from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.rng import is_secure_generator
from ._common import split_and_mix_honest_parties, split_and_mix_sigma_at

__all__ = ["DistributedGeometricShares", "polya_differences", "exact_polya_shape"]


def exact_polya_shape(gamma: float, n: int, name: str) -> Fraction:
    """The per-user Pólya shape r = 1/(gamma n) as an exact rational of the float ``gamma``
    (then gamma n honest users' shapes add to exactly 1); a ValidationError naming ``gamma``
    unless gamma n >= 1 exactly (the exact sampler needs r <= 1)."""
    honest = Fraction(gamma) * n
    if honest < 1:
        raise ValidationError(f"{name} needs gamma * n >= 1, got {float(honest)!r}", parameter="gamma")
    return 1 / honest


def polya_differences(size: int | tuple[int, ...], rng: np.random.Generator, *, shape: float, alpha: float,
                      exact_shape: Fraction, rate: Fraction) -> np.ndarray:
    """``size`` independent X - Y, X, Y i.i.d. Pólya NB(r, alpha), as int64.

    Production (``rng`` over a secure bit generator, :func:`~shuffledp.core.rng.is_secure_generator`):
    exact draws of NB(``exact_shape``, exp(-``rate``)) from the OS
    (:func:`shuffledp.central.sample_polya`); ``rng`` itself is not used. Simulation (any other
    Generator): numpy's negative binomial with the float ``shape`` and ``alpha``.
    """
    if is_secure_generator(rng):
        count = int(np.prod(size))
        x = sample_polya(exact_shape, rate, count)
        y = sample_polya(exact_shape, rate, count)
        return (x - y).reshape(size)
    return simulate_polya(shape, alpha, size, rng) - simulate_polya(shape, alpha, size, rng)


class DistributedGeometricShares:
    """Mixin: Pólya noise shares over split-and-mix for a protocol with ``epsilon``, ``delta``,
    ``n``, ``gamma`` and ``name`` set (:meth:`_setup_shares` sizes it)."""

    epsilon: float
    delta: float
    n: int
    gamma: float
    name: str

    def _setup_shares(self, rate: Fraction, wrap_probability: float, max_sum: float, too_large_parameter: str,
                      too_large_hint: str) -> None:
        """Size the noise and the shares: ``rate`` the exact rational with Pólya parameter
        alpha = exp(-rate) (eps per unit of the integer sum), ``max_sum`` the largest integer sum
        of the users' values; q is a power of two > 2 (max_sum + tau), tau the
        (1 - wrap_probability) quantile of |noise| (all users honest). A q past 2^62 raises
        :class:`ValidationError` naming ``too_large_parameter``."""
        #: exact rate with alpha = exp(-rate), and the per-user shape 1/(gamma n) as an exact
        #: rational: the parameters of the exact production sampler
        self.rate = Fraction(rate)
        self.exact_shape = exact_polya_shape(self.gamma, self.n, self.name)
        self.alpha = math.exp(-float(self.rate))
        #: Pólya shape per user, 1/(gamma n); total shape when all n users are honest, 1/gamma
        self.shape = 1.0 / (self.gamma * self.n)
        self.total_shape = 1.0 / self.gamma
        self.sigma = split_and_mix_security_bits(self.epsilon, self.delta)
        tau = float(stats.nbinom.isf(wrap_probability / 2.0, self.total_shape, 1.0 - self.alpha))
        self.modulus = 1 << max(2, math.ceil(math.log2(2.0 * (max_sum + tau + 1.0))))
        if self.modulus > 1 << 62:
            raise ValidationError(f"{self.name}: modulus would exceed 2^62; {too_large_hint}",
                                  parameter=too_large_parameter)
        #: honest parties the robust guarantee may rely on: split-and-mix is sized (and its
        #: security sigma evaluated) among floor(gamma n) parties, not n
        self.honest_parties = split_and_mix_honest_parties(self.gamma, self.n, self.name)
        self.n_messages = split_and_mix_messages(self.honest_parties, math.log2(self.modulus), self.sigma)
        self._sm = SplitAndMix(self.modulus, self.n_messages)

    def _noisy_shares(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each user's integer ``v`` plus its Pólya difference, as ``m`` shares mod q (flattened).

        The noise is exact from the OS on a production generator, numpy's on a seeded one
        (:func:`polya_differences`)."""
        k = v.shape[0]
        noise = polya_differences(k, rng, shape=self.shape, alpha=self.alpha, exact_shape=self.exact_shape,
                                  rate=self.rate)
        return self._sm.simulate_encode(v + noise, rng).reshape(-1)

    def _simulate_noisy_sum(self, total: int, users: int, rng: np.random.Generator) -> np.ndarray:
        """The law of the sum of all shares mod q for ``users`` users whose values add to ``total``:
        ``total + NB(R) - NB(R)`` mod q, R = users / (gamma n)."""
        R = users * self.shape
        z = int(simulate_polya(R, self.alpha, 1, rng)[0]) - int(simulate_polya(R, self.alpha, 1, rng)[0])
        return np.array([(total + z) % self.modulus], dtype=np.int64)

    def _shares_privacy(self, n: int, note: str) -> PrivacyStatement:
        """(eps, (1 + e^eps) 2^-sigma[, gamma]) for a batch of ``n`` users, sigma evaluated among the
        floor(gamma self.n) honest parties the guarantee assumes, whatever ``n``; infinite below
        gamma self.n users or where split-and-mix is insecure."""
        honest_needed = self.gamma * self.n
        if n < honest_needed or n < 3:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"{self.name}: fewer than gamma*n users at n={n}")
        sigma = split_and_mix_sigma_at(self.n_messages, self.honest_parties, self.modulus, self.sigma,
                                       self.honest_parties)
        extra = split_and_mix_delta(self.epsilon, sigma) if sigma > 0 else 1.0
        if extra >= 1.0:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"{self.name}: split-and-mix insecure at n={n}")
        return PrivacyStatement(self.epsilon, extra, "shuffle", gamma=min(1.0, honest_needed / n),
                                note=f"{note} + split-and-mix (m={self.n_messages}, "
                                     f"q=2^{int(math.log2(self.modulus))}, sigma={sigma:.4g})")

    @property
    def messages_per_user(self) -> float:
        return float(self.n_messages)

    @property
    def bits_per_message(self) -> float:
        return math.log2(self.modulus)
