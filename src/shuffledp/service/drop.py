"""Optional DP random drop before thresholding (a differentially private pool size).

Given c pending reports, draw Z ~ discrete Laplace with P(Z = z) ∝ e^{-eps_T |z|} (exact integer
sampler from :mod:`shuffledp.central`, OS randomness), set D = ceil(ln(1/delta_T) / eps_T) and drop
d = clip(D + Z, 0, c) uniformly random reports, releasing c' = c - d (and deciding release vs
carry-over as a function of c' only).

Privacy: c' is (eps_T, delta_T)-DP with respect to adding/removing one report, delta_T = e^{-eps_T D}
(c - D - Z is eps_T-DP; the clip at 0 is post-processing; the clip at c only acts on Z < -D, an event of
probability a^{D+1}/(1+a), a = e^{-eps_T}). Each evaluation of a carried-over pool is another release:
a report faces at most ``max_wait_windows`` evaluations. Cost: D reports lost per crowd-window on
average; one exact sample per evaluation.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..core.errors import ValidationError

__all__ = ["drop_offset", "released_after_drop", "sample_drop", "released_count_pmf"]


def drop_offset(eps: float, delta: float) -> int:
    """D = ceil(ln(1/delta) / eps)."""
    if not (eps > 0 and math.isfinite(eps)) or not (0 < delta < 1):
        raise ValidationError(f"drop_noise needs eps > 0 and delta in (0, 1), got ({eps}, {delta})",
                              parameter="drop_noise")
    return math.ceil(math.log(1.0 / delta) / eps)


def released_after_drop(c: int | np.ndarray, z: int | np.ndarray, offset: int) -> np.ndarray:
    """c' = c - clip(offset + z, 0, c) (vectorized)."""
    c = np.asarray(c)
    return c - np.clip(offset + np.asarray(z), 0, c)


def sample_drop(c: int, eps: float, delta: float) -> int:
    """Number of reports to drop from a pool of ``c`` (exact sampler, OS randomness)."""
    from ..central.exact import discrete_laplace  # exact integer sampler, seeded from the OS

    z = discrete_laplace(Fraction(1) / Fraction(eps))
    return int(np.clip(drop_offset(eps, delta) + z, 0, c))


def released_count_pmf(c: int, eps: float, offset: int, z_max: int = 2000) -> np.ndarray:
    """Exact P(c' = k), k = 0..c, of :func:`released_after_drop` under discrete Laplace noise."""
    z = np.arange(-z_max, z_max + 1)
    a = math.exp(-eps)
    pz = (1 - a) / (1 + a) * a ** np.abs(z)
    return np.bincount(released_after_drop(c, z, offset), weights=pz, minlength=c + 1)
