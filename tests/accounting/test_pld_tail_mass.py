"""The PLD accountant keeps the mass of the losses it trims: get_delta never falls below the true delta."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from shuffledp.accounting import GaussianEvent, PldAccountant, PoissonSampledEvent
from shuffledp.accounting.pld import DiscretePld


def _subsampled_gaussian_delta(q: float, sigma: float, eps: float) -> float:
    """Exact delta(eps) of one Poisson-subsampled Gaussian step (both add/remove directions):
    remove: P = (1-q) N(0,s^2) + q N(1,s^2) vs Q = N(0,s^2), loss increasing in x, threshold x*;
    add: the loss is <= -log(1-q), so its delta is 0 for eps >= -log(1-q)."""
    assert eps >= -math.log1p(-q)
    x = sigma**2 * math.log((math.expm1(eps) + q) / q) + 0.5
    return ((1 - q) * stats.norm.sf(x / sigma) + q * stats.norm.sf((x - 1) / sigma)
            - math.exp(eps) * stats.norm.sf(x / sigma))


@pytest.mark.parametrize("h", [1e-4, 1e-5])
def test_pld_subsampled_gaussian_delta_is_an_upper_bound(h):
    """The PLD accountant's delta must never be below the true one. _trim computed the upper tail
    as ``total - cumsum`` (catastrophic cancellation near 1): at q = 0.01, sigma = 1, h = 1e-4 the
    8.0e-14 of probability above the kept losses became an infinite-loss atom of 1.0e-14, and
    get_delta(1.0) returned 2.73196e-9 < the exact 2.73201e-9 (2.73143e-9 at h = 1e-5)."""
    acc = PldAccountant(h).compose(PoissonSampledEvent(0.01, GaussianEvent(1.0)))
    for eps in (0.5, 1.0, 1.5, 2.0, 2.5):
        assert acc.get_delta(eps) >= _subsampled_gaussian_delta(0.01, 1.0, eps), eps


def test_trim_keeps_the_upper_tail_mass():
    """Mass cut off above the kept losses goes to the infinite atom in full (pessimistic)."""
    bulk = np.full(100_000, 1e-5)
    tail = np.full(50, 1e-15)  # 5e-14 in all, far below float resolution of the cumulative sum near 1
    pld = DiscretePld(np.concatenate([bulk, tail]), 0, 1e-4)
    kept_tail = pld.pmf[100_000 - pld.offset:].sum() if pld.pmf.size > 100_000 - pld.offset else 0.0
    assert pld.inf_mass + kept_tail >= 5e-14 * (1 - 1e-9)
