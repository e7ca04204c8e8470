"""PLD back end: connect-the-dots discretization dominates the true curve; reference values."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from shuffledp.accounting import (GaussianEvent, LaplaceEvent, PldAccountant, PoissonSampledEvent, PureDpEvent,
                                  RandomizedResponseEvent, RdpAccountant, SelfComposedEvent, gaussian_delta_exact,
                                  gaussian_epsilon_exact)
from shuffledp.core import ValidationError


def _exact_rr_composed_eps(eps0, k, delta):
    from scipy.optimize import brentq
    p = math.exp(eps0) / (1 + math.exp(eps0))
    j = np.arange(k + 1)
    w = stats.binom.pmf(j, k, p)
    L = (2 * j - k) * eps0
    return brentq(lambda e: np.sum(w * np.maximum(0, -np.expm1(e - L))) - delta, 0, k * eps0, xtol=1e-13)


def test_dpsgd_reference():
    # spec §1.3 A: dp-accounting PLD 1.828244 (vdi 1e-4); PRV (1.818238, 1.828239, 1.838240)
    acc = PldAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 1000)
    eps = acc.get_epsilon(1e-5)
    assert 1.818238 <= eps <= 1.839
    assert eps == pytest.approx(1.828244, abs=2e-4)
    assert eps < RdpAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 1000).get_epsilon(1e-5)
    assert acc.get_delta(1.0) == pytest.approx(2.61e-3, rel=5e-3)  # spec: 2.61e-3 at eps = 1 (PLD)


def test_randomized_response_count_is_honoured():
    """The dp-accounting PLD bug (count ignored for RR: 1.0987 instead of 90.79) must not exist here."""
    exact = _exact_rr_composed_eps(math.log(3), 100, 1e-5)
    acc = PldAccountant(1e-3, neighbouring="replace_one").compose(RandomizedResponseEvent(math.log(3)), 100)
    eps = acc.get_epsilon(1e-5)
    assert exact <= eps <= exact + 0.05
    assert eps == pytest.approx(90.79, abs=0.06)
    same = PldAccountant(1e-3, neighbouring="replace_one").compose(
        SelfComposedEvent(RandomizedResponseEvent(math.log(3)), 100))
    assert same.get_epsilon(1e-5) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("e0,k,ref", [(1.0, 10, 9.990), (0.1, 10, 0.990), (0.1, 100, 4.220)])
def test_laplace_reference_E(e0, k, ref):
    eps = PldAccountant().compose(LaplaceEvent(1.0 / e0), k).get_epsilon(1e-5)
    assert eps == pytest.approx(ref, abs=1.5e-3)


def test_gaussian_composition_dominates_exact():
    for sigma, k in [(200.0, 500), (5.0, 10), (1.0, 1)]:
        mu = math.sqrt(k) / sigma
        exact = gaussian_epsilon_exact(1e-5, mu)
        eps = PldAccountant().compose(GaussianEvent(sigma), k).get_epsilon(1e-5)
        assert exact <= eps <= exact + 1e-3, (sigma, k)


def test_single_event_curves_dominate_true_curves():
    """Connect-the-dots: the discrete curve is >= the true hockey-stick curve at every eps (also off-grid)."""
    h = 0.05
    grid = np.linspace(-1.5, 3.0, 97) + 0.0123
    g = PldAccountant(h).compose(GaussianEvent(0.8))
    mu = 1 / 0.8

    def true_gauss(e):  # Balle-Wang profile, written out: the public gaussian_delta_exact takes eps >= 0 only
        return stats.norm.cdf(mu / 2 - e / mu) - math.exp(e) * stats.norm.cdf(-mu / 2 - e / mu)

    for e in grid:
        assert g._remove.delta(e) >= true_gauss(e) - 1e-15
        if e >= 0:
            assert true_gauss(e) == pytest.approx(gaussian_delta_exact(e, mu), rel=1e-9, abs=1e-300)
    b = 1.3  # Laplace scale, sensitivity 1: true curve by quadrature
    lap = PldAccountant(h).compose(LaplaceEvent(b))

    def true_delta(e):
        f = lambda x: max(stats.laplace.pdf(x, 0, b) - math.exp(e) * stats.laplace.pdf(x, 1, b), 0.0)
        return integrate.quad(f, -40, 40, points=[0.0, 0.5, 1.0], limit=200)[0]

    for e in (-0.9, -0.2, 0.0, 0.13, 0.5, 0.7):
        assert lap._remove.delta(e) >= true_delta(e) - 1e-10
        assert lap._remove.delta(e) <= true_delta(e) + 0.02  # and not absurdly loose at this coarse grid


def test_subsampled_gaussian_opacus_case():
    # spec §1.3 D: sigma=3, q=0.2, T=50, delta=1/48000: PLD 1.9608, PRV (1.9507, 1.9608, 1.9710)
    eps = PldAccountant().compose(PoissonSampledEvent(0.2, GaussianEvent(3.0)), 50).get_epsilon(1 / 48000)
    assert 1.9507 <= eps == pytest.approx(1.9608, abs=5e-4)


def test_pure_event_and_round_trip():
    acc = PldAccountant(1e-3).compose(PureDpEvent(0.5), 20)
    eps = acc.get_epsilon(1e-6)
    assert eps < 10.0  # better than basic composition
    d = acc.get_delta(eps)
    assert d <= 1e-6 * 1.00001
    with pytest.raises(ValidationError, match="value_discretization_interval"):
        PldAccountant(0.0)
    with pytest.raises(ValidationError, match="replace_one"):
        PldAccountant().compose(RandomizedResponseEvent(1.0))
