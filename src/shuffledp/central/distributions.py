"""Probability mass functions, variances and vectorized simulation samplers of the noise laws.

The pmfs are the reference the tests compare samplers with (exact ratios, chi-square).

The ``simulate_*`` functions draw with a caller's :class:`numpy.random.Generator` and float
arithmetic. They are for experiments only — **never a release path** — because a float sampler
is not exact (see ``docs/central.md``, the floating-point attack). Each one draws from the same
law as the exact sampler of :mod:`shuffledp.central.exact` up to float rounding of the
acceptance probabilities (discrete Laplace as a difference of geometrics; discrete Gaussian by
the CKS rejection with float acceptance; Pólya via numpy's negative binomial).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = [
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "polya_pmf",
    "simulate_discrete_laplace",
    "simulate_discrete_gaussian",
    "simulate_polya",
    "simulate_symmetric_binomial",
]


# --------------------------------------------------------------------------------------------
# pmfs and moments
# --------------------------------------------------------------------------------------------

def discrete_laplace_pmf(x: np.ndarray | int, scale: float) -> np.ndarray:
    """P(Z = x) = (1 - a)/(1 + a) a^|x| with a = exp(-1/scale) (Ghosh et al. 2009; CKS20)."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    a = math.exp(-1.0 / scale)
    return (-math.expm1(-1.0 / scale)) / (1.0 + a) * np.exp(-x / scale)


def discrete_laplace_variance(scale: float) -> float:
    """Var Z = 2a/(1 - a)^2, a = exp(-1/scale) (e.g. 1.8409 at scale 1)."""
    a = math.exp(-1.0 / scale)
    return 2.0 * a / math.expm1(-1.0 / scale) ** 2


def _dg_normaliser_terms(sigma: float) -> np.ndarray:
    half = int(math.ceil(40.0 * sigma)) + 10
    return np.arange(-half, half + 1, dtype=np.float64)


def discrete_gaussian_pmf(x: np.ndarray | int, sigma: float) -> np.ndarray:
    """P(Z = x) = exp(-x^2/(2 sigma^2)) / sum_z exp(-z^2/(2 sigma^2)) (CKS20 Definition 1).

    The normaliser is summed directly for sigma < 100 (the tail beyond 40 sigma is below 1e-300)
    and taken from the Poisson summation formula, sqrt(2 pi) sigma (1 + 2 sum_k e^{-2 pi^2
    sigma^2 k^2}) = sqrt(2 pi) sigma to double precision, for sigma >= 100.
    """
    x = np.asarray(x, dtype=np.float64)
    if sigma < 100.0:
        z = _dg_normaliser_terms(sigma)
        norm = float(np.exp(-z * z / (2.0 * sigma * sigma)).sum())
    else:
        norm = math.sqrt(2.0 * math.pi) * sigma
    return np.exp(-x * x / (2.0 * sigma * sigma)) / norm


def discrete_gaussian_variance(sigma: float) -> float:
    """Var Z of the discrete Gaussian; < sigma^2 (CKS20 Prop. 19), = sigma^2 to double precision
    for sigma >= 10 (the gap is of order e^{-2 pi^2 sigma^2})."""
    if sigma >= 10.0:
        return sigma * sigma
    z = _dg_normaliser_terms(sigma)
    w = np.exp(-z * z / (2.0 * sigma * sigma))
    return float((w * z * z).sum() / w.sum())


def polya_pmf(x: np.ndarray | int, r: float, alpha: float) -> np.ndarray:
    """Pólya / negative binomial: Gamma(x + r)/(x! Gamma(r)) alpha^x (1 - alpha)^r, x >= 0."""
    x = np.asarray(x, dtype=np.float64)
    logp = (special.gammaln(x + r) - special.gammaln(x + 1) - special.gammaln(r)
            + x * math.log(alpha) + r * math.log1p(-alpha))
    return np.where(x >= 0, np.exp(logp), 0.0)


# --------------------------------------------------------------------------------------------
# vectorized simulation samplers (float arithmetic; experiments only)
# --------------------------------------------------------------------------------------------

def simulate_discrete_laplace(scale: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Discrete Laplace draws as G1 - G2 with G ~ Geometric(1 - e^{-1/scale}) on {0, 1, ...}.

    Same law as :func:`shuffledp.central.exact.discrete_laplace` (up to float rounding of
    numpy's geometric sampler). Simulation only: not a release path.
    """
    p = -math.expm1(-1.0 / scale)  # success probability 1 - a
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.int64)


def simulate_discrete_gaussian(sigma: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Discrete Gaussian draws by the CKS20 rejection (discrete Laplace proposal, scale
    floor(sigma) + 1) with float acceptance probabilities, vectorized. Simulation only."""
    size = int(size)
    t = math.floor(sigma) + 1
    s2 = sigma * sigma
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        m = int(need * 2.6) + 16
        y = simulate_discrete_laplace(float(t), m, rng)
        acc = rng.random(m) < np.exp(-((np.abs(y) - s2 / t) ** 2) / (2.0 * s2))
        got = y[acc][:need]
        out[filled:filled + got.size] = got
        filled += got.size
    return out


def simulate_polya(r: float, alpha: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Pólya NB(r, alpha) draws with numpy's negative binomial.

    numpy's ``negative_binomial(n, p)`` takes the *success* probability ``p = 1 - alpha``
    (passing alpha under-noises massively — the bug of the experiment code of Balle, Bell,
    Gascón, Nissim, "Private summation in the multi-message shuffle model", CCS 2020).
    Simulation only.
    """
    return rng.negative_binomial(r, 1.0 - alpha, size).astype(np.int64)


def simulate_symmetric_binomial(trials: int, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Binomial(trials, 1/2) draws (numpy). Simulation only."""
    return rng.binomial(trials, 0.5, size).astype(np.int64)
