"""Spec reference values not pinned elsewhere (/work/shared/spec/accounting-central-engines.md §1.3,
computed there with dp-accounting 0.6.0, prv-accountant 0.2.0, OpenDP 0.16.0, autodp).

Each value is checked at the precision the spec prints it (half a unit in its last digit). Where the
spec's number is itself a pessimistic discretization (dp-accounting's PLD at value_discretization_interval
1e-4) and ours is closer to the exact value, the test pins ours against the exact value and checks that
it does not exceed the spec's upper bound (F, H: see the notes there).
"""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from shuffledp.accounting import (DiscretePld, GaussianEvent, LaplaceEvent, PldAccountant, PoissonSampledEvent,
                                  RandomizedResponseEvent, RdpAccountant, ZCdpAccountant, ZCdpEvent,
                                  gaussian_epsilon_exact, zcdp_to_epsilon)

D5 = 1e-5


def _printed(value: float, decimals: int):
    """pytest.approx at a value printed with ``decimals`` decimals (half a unit in the last digit)."""
    return pytest.approx(value, abs=0.5 * 10.0**-decimals)


def test_E_pld_laplace_eps0_1_k100():
    # §1.3 E: Laplace, L1 sensitivity 1, eps0 = 1 per step (scale 1), k = 100, delta = 1e-5: PLD 68.253
    # (basic 100, DRV 219.8, RDP 70.778 are pinned in test_accountants.test_laplace_composition_reference_E)
    eps = PldAccountant().compose(LaplaceEvent(1.0), 100).get_epsilon(D5)
    assert eps == _printed(68.253, 3)
    assert eps < RdpAccountant().compose(LaplaceEvent(1.0), 100).get_epsilon(D5)  # PLD below RDP (70.778)


def test_D_rdp_opacus_issue_643():
    # §1.3 D: Poisson-subsampled Gaussian sigma = 3, q = 0.2, T = 50, delta = 1/48000:
    # RDP 2.1690 (dp-accounting default orders, improved conversion); PLD 1.9608 is in test_pld
    acc = RdpAccountant().compose(PoissonSampledEvent(0.2, GaussianEvent(3.0)), 50)
    assert acc.get_epsilon(1 / 48000) == _printed(2.1690, 4)


def _exact_rr_composed_eps(eps0: float, k: int, delta: float) -> float:
    """k-fold binary RR: the privacy loss is (2j - k) eps0 with j ~ Bin(k, p); exact delta(eps) inverted."""
    p = math.exp(eps0) / (1 + math.exp(eps0))
    j = np.arange(k + 1)
    w = stats.binom.pmf(j, k, p)
    L = (2 * j - k) * eps0
    return optimize.brentq(lambda e: np.sum(w * np.maximum(0, -np.expm1(e - L))) - delta, 0, k * eps0, xtol=1e-13)


@pytest.mark.parametrize("k,spec", [(1, 1.0987), (10, 10.9868)])
def test_F_pld_randomized_response(k, spec):
    # §1.3 F: binary RR eps0 = ln 3, replace-one, delta = 1e-5, k = 10: PLD 10.9868 (k = 1: 1.0987).
    # Deviation from the spec (investigated): the exact value is 10.985945 (k = 1: 1.098599 =
    # ln(3 - 4e-5)); dp-accounting's PLD rounds the loss ln 3 = 1.098612 up to its 1e-4 grid (1.0987)
    # at every step, which puts its k = 10 value ~8.6e-4 above the truth. Ours agrees with the exact
    # value to 1e-9 and stays below the spec's (also valid, looser) upper bound.
    exact = _exact_rr_composed_eps(math.log(3), k, D5)
    eps = PldAccountant(neighbouring="replace_one").compose(RandomizedResponseEvent(math.log(3)), k).get_epsilon(D5)
    assert exact <= eps <= exact * (1 + 1e-9)
    assert eps <= spec
    assert spec - eps < 1e-3  # the gap is the spec's discretization (<= k * 1e-4), nothing more


@pytest.mark.parametrize("sigma,standard,exact", [(1.0, 5.2985, 4.3772), (2.0, 2.5243, 1.9931),
                                                  (5.0, 0.9797, 0.7255)])
def test_G_zcdp_standard_conversion_and_exact_gaussian(sigma, standard, exact):
    # §1.3 G: Gaussian with L2 sensitivity 1, delta = 1e-5: zCDP rho = 1/(2 sigma^2) with the standard
    # conversion rho + 2 sqrt(rho ln(1/delta)) gives 5.2985 / 2.5243 / 0.9797; the exact continuous
    # Gaussian (Balle-Wang) 4.3772 / 1.9931 / 0.7255.
    rho = 1.0 / (2.0 * sigma**2)
    assert zcdp_to_epsilon(rho, D5, conversion="naive") == _printed(standard, 4)
    assert ZCdpAccountant(conversion="naive").compose(GaussianEvent(sigma)).get_epsilon(D5) == _printed(standard, 4)
    assert ZCdpAccountant(conversion="naive").compose(ZCdpEvent(rho)).get_epsilon(D5) == _printed(standard, 4)
    assert gaussian_epsilon_exact(D5, 1.0 / sigma) == _printed(exact, 4)
    # the optimal (CKS20) conversion lies between the exact value and the standard one
    assert exact < zcdp_to_epsilon(rho, D5) < standard


def _binomial_pld(N: int, h: float = 1e-4) -> tuple[DiscretePld, float]:
    """Bin(N, 1/2) added to a count vs the same shifted by one (sensitivity 1): the PLD built from the
    two log-PMFs (the pair is symmetric, one direction suffices), and the exact eps at delta = 1e-5."""
    x = np.arange(1, N + 1)
    log_p = stats.binom.logpmf(x, N, 0.5)
    log_q = stats.binom.logpmf(x - 1, N, 0.5)      # the shifted law
    inf_mass = float(stats.binom.pmf(0, N, 0.5))     # output 0 is impossible under the shift
    pld = DiscretePld.from_atoms((log_p - log_q).tolist(), np.exp(log_p).tolist(), h, inf_mass=inf_mass)
    p, q = np.exp(log_p), np.exp(log_q)
    exact = optimize.brentq(lambda e: inf_mass + float(np.maximum(p - math.exp(e) * q, 0.0).sum()) - D5,
                            0.0, 5.0, xtol=1e-13)
    return pld, exact


@pytest.mark.parametrize("N,spec,gauss", [(10**3, 0.2074, 0.2068), (10**4, 0.0587, 0.0586), (10**5, 0.0164, 0.0163)])
def test_H_binomial_mechanism_pld(N, spec, gauss):
    # §1.3 H: Bin(N, 1/2) - N/2 added to a count, PLD from the two (log-)PMFs, delta = 1e-5:
    # 0.2074 / 0.0587 / 0.0164, against the Gaussian at the same sd sqrt(N)/2: 0.2068 / 0.0586 / 0.0163.
    # Our pessimistic PLD at the spec's grid (1e-4) reproduces the spec's digits. Note (investigated):
    # those digits carry the grid's upward bias; the exact hockey-stick values are 0.20735 / 0.05864 /
    # 0.01631, so the binomial's true excess over the Gaussian is far smaller than the table suggests
    # (at N = 1e5 the two agree to 3e-7).
    pld, exact = _binomial_pld(N)
    eps = pld.epsilon(D5)
    assert eps == _printed(spec, 4)
    assert exact <= eps <= exact + 1e-4  # pessimistic: above the exact value by at most ~one grid step
    assert gaussian_epsilon_exact(D5, 2.0 / math.sqrt(N)) == _printed(gauss, 4)
