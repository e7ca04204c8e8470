"""Smooth-sensitivity release of PATE's data-dependent cost, checked by brute force on small vote
histograms, against the closed-form Rényi divergence of two Gaussians, and against the values in the
authors' test file (tensorflow/privacy, research/pate_2018/smooth_sensitivity_test.py)."""

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

pytest.importorskip("sklearn")
from shuffledp.accounting.rdp import rdp_to_epsilon  # noqa: E402
from shuffledp.core.errors import ValidationError  # noqa: E402
from shuffledp.ml.pate import log_q_gnmax, rdp_gnmax_data_dependent  # noqa: E402
from shuffledp.ml.pate_smooth_sensitivity import (check_smooth_sensitivity_conditions,  # noqa: E402
                                                  local_sensitivity_at_distance_gnmax, local_sensitivity_gnmax,
                                                  log_q0_gnmax, log_q_neighbour_bounds, rdp_gnmax_at_q, rdp_gnss,
                                                  release_gnmax_cost, smooth_sensitivity)


def _histograms(n_teachers: int, m: int) -> np.ndarray:
    """Every vote histogram of n_teachers votes over m classes."""
    out = [c + (n_teachers - sum(c),) for c in itertools.product(range(n_teachers + 1), repeat=m - 1)
           if sum(c) <= n_teachers]
    return np.array(out, dtype=float)


def _neighbours(h: np.ndarray) -> list[np.ndarray]:
    """Histograms one teacher away (one vote moved from class a to class b)."""
    out = []
    for a, b in itertools.permutations(range(len(h)), 2):
        if h[a] > 0:
            g = h.copy()
            g[a] -= 1
            g[b] += 1
            out.append(g)
    return out


# (sigma, classes, teachers, order): small instances where some histograms lie below q0, so the
# data-dependent branch, the plateau and both sides of it are all exercised.
SMALL = [(1.0, 3, 8, 2.0), (1.5, 3, 10, 1.5), (2.0, 4, 9, 2.0), (3.0, 3, 12, 3.0)]


@pytest.mark.parametrize("sigma,m,N,order", SMALL)
def test_local_sensitivity_bounds_hold_by_brute_force(sigma, m, N, order):
    assert check_smooth_sensitivity_conditions(sigma, m, order, N) == (True, True)
    H = _histograms(N, m)
    lq = log_q_gnmax(H, sigma)
    cost = rdp_gnmax_at_q(lq, sigma, order)
    assert np.any(lq < log_q0_gnmax(sigma, order)) and np.any(lq > log_q0_gnmax(sigma, order))
    assert np.ptp(cost) > 0
    index = {tuple(h): i for i, h in enumerate(H)}
    ls_true = np.zeros(len(H))
    lo, hi = log_q_neighbour_bounds(lq, sigma, m)
    ls_alg3 = local_sensitivity_gnmax(lq, sigma, m, order)
    for i, h in enumerate(H):
        for g in _neighbours(h):
            j = index[tuple(g)]
            # Prop. 13: the neighbour's q lies in [bl(q), bu(q)]
            assert lo[i] - 1e-9 <= lq[j] <= hi[i] + 1e-9
            ls_true[i] = max(ls_true[i], abs(cost[j] - cost[i]))
    # Algorithm 3 bounds the true local sensitivity (exhaustive over neighbours) and is not vacuous
    assert np.all(ls_true <= ls_alg3 * (1 + 1e-9) + 1e-15)
    assert np.max(ls_true) > 0.25 * np.max(ls_alg3)
    # at distance k: the largest true LS over histograms at most k teachers away
    A = local_sensitivity_at_distance_gnmax(lq, sigma, m, order)
    dist = np.abs(H[:, None, :] - H[None, :, :]).sum(axis=2) / 2  # teachers that must change their vote
    for k in range(int(dist.max()) + 1):
        within = np.where(dist <= k, ls_true[None, :], 0.0).max(axis=1)
        Ak = A[:, min(k, A.shape[1] - 1)]
        assert np.all(within <= Ak * (1 + 1e-9) + 1e-15), k
    # beta-smooth: S >= LS, S(neighbour) <= e^beta S, and S non-increasing in beta
    for beta in (0.05, 0.2, 0.6):
        S = np.array([smooth_sensitivity(A[i:i + 1], beta) for i in range(len(H))])
        assert np.all(S >= ls_true - 1e-15)
        for i, h in enumerate(H):
            for g in _neighbours(h):
                assert S[index[tuple(g)]] <= math.exp(beta) * S[i] * (1 + 1e-9) + 1e-15
    S_by_beta = [smooth_sensitivity(A, b) for b in (0.01, 0.05, 0.2, 0.6, 2.0)]
    assert all(x >= y for x, y in zip(S_by_beta, S_by_beta[1:])) and S_by_beta[0] > S_by_beta[-1]


@pytest.mark.parametrize("sigma,order", [(1.0, 2.0), (4.0, 3.0), (10.0, 5.0), (40.0, 12.0)])
def test_cost_function_is_theorem6_below_q0_and_data_independent_above(sigma, order):
    lq0 = log_q0_gnmax(sigma, order)
    # q0 is where Theorem 6 meets lambda/sigma^2, or (if Theorem 6 is already below it there) the
    # point from which its conditions are guaranteed: -max((1 + 1/sigma)^2, ((lambda - 0.99)/sigma)^2, 1/sigma^2)
    just_below = rdp_gnmax_at_q(lq0 * (1 + 1e-9), sigma, order)
    natural = -max((1 + 1 / sigma) ** 2, ((order - 0.99) / sigma) ** 2, 1 / sigma**2)
    assert just_below == pytest.approx(order / sigma**2, rel=1e-6) or (lq0 == natural and just_below < order / sigma**2)
    assert rdp_gnmax_at_q(lq0 * 0.5, sigma, order) == order / sigma**2
    # below q0 it is the data-dependent bound of ml.pate (same theorem, computed there per histogram)
    for gap in np.linspace(-lq0, 4 * -lq0, 5):
        counts = np.array([[1000.0, 1000.0 - 2 * sigma * math.sqrt(gap), 0.0]])
        lq = log_q_gnmax(counts, sigma)
        if lq[0] < lq0:
            ours = rdp_gnmax_at_q(lq, sigma, order)[0]
            assert ours == pytest.approx(rdp_gnmax_data_dependent(np.array([order]), counts, sigma)[0, 0], rel=1e-9)
            assert ours < order / sigma**2


def test_agrees_with_the_authors_test_values():
    # research/pate_2018/smooth_sensitivity_test.py of tensorflow/privacy. Distance 0 (Algorithm 3)
    # and the plateau must agree; at distance k our interval bound may only be larger.
    lq = log_q_gnmax(np.array([[10, 0, 0]]), 0.5)
    A = local_sensitivity_at_distance_gnmax(lq, 0.5, 3, 1.5)[0]
    theirs = np.array([3.13503646e-17, 1.60178280e-08, 5.90681786e-03] + [5.99981308e+00] * 7)
    assert A[0] == pytest.approx(theirs[0], rel=1e-8) and A[-1] == pytest.approx(theirs[-1], rel=1e-8)
    full = np.concatenate([A, np.full(len(theirs) - len(A), A[-1])]) if len(A) < len(theirs) else A[:len(theirs)]
    assert np.all(full >= theirs * (1 - 1e-8))
    lq = log_q_gnmax(np.array([[1000, 500, 300, 200, 0]]), 250.0)
    A = local_sensitivity_at_distance_gnmax(lq, 250.0, 5, 10.0)[0]
    assert A[0] == 0.0 and A[-1] == pytest.approx(2.73113623988e-6, rel=1e-8)
    theirs = np.array([0.0] * 298 + [2.77693450548e-7, 2.10853979548e-6] + [2.73113623988e-6] * 1700)
    full = np.concatenate([A, np.full(len(theirs) - len(A), A[-1])])
    assert np.all(full >= theirs * (1 - 1e-8))
    # conditions C5-C6: their check_conditions(20, 10, 25) = (True, False), (30, 10, 25) = (True, True)
    assert check_smooth_sensitivity_conditions(20.0, 10, 25.0, 250) == (True, False)
    assert check_smooth_sensitivity_conditions(30.0, 10, 25.0, 250) == (True, True)


def _renyi_gaussians(order, m1, s1, m2, s2):
    """Closed form of D_order(N(m1, s1^2) || N(m2, s2^2)) (Gil, Alajaji, Linder 2013)."""
    sa = order * s2**2 + (1 - order) * s1**2
    if sa <= 0:
        return math.inf
    return (math.log(s2 / s1) + math.log(s2**2 / sa) / (2 * (order - 1))
            + order * (m1 - m2) ** 2 / (2 * sa))


@pytest.mark.parametrize("order,beta,sigma_ss", [(2.0, 0.1, 1.0), (5.0, 0.06, 3.0), (20.0, 0.01, 2.0),
                                                  (100.0, 0.0045, 20.0)])
def test_gnss_rdp_bounds_the_gaussian_divergence_of_every_admissible_pair(order, beta, sigma_ss):
    bound = rdp_gnss([order], beta, sigma_ss)[0]
    assert math.isfinite(bound)
    worst = 0.0
    for t in np.linspace(-beta, beta, 2001):  # S(y) = e^t S(x); mean gap at most min(S(x), S(y))
        worst = max(worst, _renyi_gaussians(order, 0.0, sigma_ss, min(1.0, math.exp(t)), math.exp(t) * sigma_ss))
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.5 * bound  # not vacuous
    # the closed form itself, against numerical integration at the worst endpoint (t = -beta)
    t = -beta
    s1, s2, mu = sigma_ss, math.exp(t) * sigma_ss, math.exp(t)
    sa2 = order * s2**2 + (1 - order) * s1**2
    centre = (order * 0.0 * s2**2 + (1 - order) * mu * s1**2) / sa2
    width = math.sqrt(s1**2 * s2**2 / sa2)
    def f(x):
        return math.exp(order * stats.norm.logpdf(x, 0.0, s1) + (1 - order) * stats.norm.logpdf(x, mu, s2))

    val, _ = integrate.quad(f, centre - 40 * width, centre + 40 * width, points=[centre], limit=200)
    assert math.log(val) / (order - 1) == pytest.approx(_renyi_gaussians(order, 0.0, s1, mu, s2), rel=1e-6)


def test_gnss_rdp_is_infinite_where_the_variance_change_is_unbounded():
    beta = 0.1
    edge = 1 / (1 - math.exp(-2 * beta))
    assert math.isinf(rdp_gnss([edge * 1.001], beta, 1.0)[0]) and math.isfinite(rdp_gnss([edge * 0.999], beta, 1.0)[0])
    with pytest.raises(ValidationError):
        rdp_gnss([2.0], 0.0, 1.0)


def test_release_noise_is_smooth_sensitivity_times_gaussian():
    rng = np.random.default_rng(5)
    counts = np.array([[60, 15, 5], [70, 6, 4], [45, 30, 5], [80, 0, 0]])
    rels = [release_gnmax_cost(counts, 10.0, 4.0, 0.075, 2.0, 1e-5, rng) for _ in range(400)]
    r0 = rels[0]
    assert all(r.rdp_data_dependent == r0.rdp_data_dependent and r.smooth_sensitivity == r0.smooth_sensitivity
               for r in rels)
    z = np.array([(r.rdp_noisy - r.rdp_data_dependent) / r.smooth_sensitivity for r in rels])
    assert stats.kstest(z, stats.norm(scale=2.0).cdf).pvalue > 1e-3
    assert r0.rdp_release == rdp_gnss([4.0], 0.075, 2.0)[0]
    eps, _ = rdp_to_epsilon(np.array([4.0]), np.array([max(r0.rdp_noisy, 0) + r0.rdp_release]), 1e-5)
    assert r0.epsilon_released == eps
    lq = log_q_gnmax(counts, 10.0)
    assert r0.rdp_data_dependent == pytest.approx(float(rdp_gnmax_at_q(lq, 10.0, 4.0).sum()), rel=1e-12)
    assert r0.smooth_sensitivity == pytest.approx(
        smooth_sensitivity(local_sensitivity_at_distance_gnmax(lq, 10.0, 3, 4.0), 0.075), rel=1e-12)


def test_release_refuses_where_conditions_fail():
    counts = np.array([[60, 15, 5, 0]])
    assert check_smooth_sensitivity_conditions(10.0, 4, 20.0, 80)[1] is False
    with pytest.raises(ValidationError, match="C5-C6"):
        release_gnmax_cost(counts, 10.0, 20.0, 0.01, 2.0, 1e-5, np.random.default_rng(0))
    with pytest.raises(ValidationError):
        release_gnmax_cost(np.array([[60, 15, 5], [50, 10, 5]]), 10.0, 4.0, 0.075, 2.0, 1e-5, np.random.default_rng(0))
    with pytest.raises(ValidationError):
        release_gnmax_cost(counts, 10.0, 4.0, -1.0, 2.0, 1e-5, np.random.default_rng(0))
