"""Unbiasedness and variance of the key-value estimators against the (corrected) closed forms."""

import math

import numpy as np
import pytest

from shuffledp.local.keyvalue import HISKV, KVOH, KVUE, PCKVGRR, PCKVUE, PrivKV, PrivKVM, LDPKVApprox
from tests.conftest import mean_z_bound, variance_ratio_band
from tests.keyvalue.helpers import per_replica_estimates, population

R = 4000


def _z(sample, target, var):
    return (np.mean(sample) - target) / math.sqrt(var / len(sample))


def _check_freq(ests, data, m, keys, var_fn):
    f = data.true_frequency()
    F = np.array([e.frequency.values for e in ests])
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    for k in keys:
        var = var_fn(f[k])
        assert abs(_z(F[:, k], f[k], var)) < mean_z_bound(), k
        assert lo <= F[:, k].var(ddof=1) / var <= hi, (k, F[:, k].var(ddof=1) / var)


@pytest.mark.slow
@pytest.mark.parametrize("cls", [PCKVGRR, PCKVUE])
def test_pckv_unbiased_and_corrected_variance(cls, rng):
    n, d, ell, eps = 600, 5, 3, 3.0
    data = population(n, d, ell, rng)  # every l_u <= ell: no truncation
    m = cls(eps, d, ell=ell)
    ests = per_replica_estimates(m, data, R, rng)
    _check_freq(ests, data, m, (0, 2), lambda f: m.frequency_variance(n, f))
    # the published Thm 4 omits the sampling term (ell - 1) f / n: it fails the same band test
    f0 = data.true_frequency()[0]
    emp = np.var([e.frequency.values[0] for e in ests], ddof=1)
    assert emp / m.thm4_frequency_variance(n, f0) > variance_ratio_band(R)[1]
    # value_sum = ell * Δ̂ is unbiased for f_k m_k
    S = np.array([e.value_sum.values for e in ests])
    fm = data.true_frequency() * data.true_mean()
    for k in (0, 3):
        assert abs(_z(S[:, k], fm[k], S[:, k].var(ddof=1))) < mean_z_bound()


@pytest.mark.slow
def test_hiskv_unbiased_variance_and_mean_delta_method(rng):
    n, d, ell, eps = 2000, 4, 2, 2.0
    data = population(n, d, ell, rng, constant_values=True)
    m = HISKV(eps, d, ell=ell, c=3.0, beta=0.0)
    ests = per_replica_estimates(m, data, R, rng)
    _check_freq(ests, data, m, (0, 1), lambda f: m.frequency_variance(n, f))
    f, mu = data.true_frequency(), data.true_mean()
    M = np.array([e.mean.values for e in ests])
    S = np.array([e.value_sum.values for e in ests])
    lo, hi = variance_ratio_band(R)
    k = 0  # most popular key: the ratio estimator is near-Gaussian, its O(1/n) bias negligible
    assert abs(_z(S[:, k], f[k] * mu[k], m._sum_variance(n, f[k:k + 1], mu[k:k + 1])[0])) < mean_z_bound()
    assert lo <= S[:, k].var(ddof=1) / m._sum_variance(n, f[k:k + 1], mu[k:k + 1])[0] <= hi
    vm = m.mean_variance(n, f[k], mu[k])
    assert abs(M[:, k].mean() - mu[k]) < 4 * math.sqrt(vm / R) + 0.01 * math.sqrt(vm)
    assert 0.9 < M[:, k].var(ddof=1) / vm < 1.1  # delta method: approximation, checked within 10%


@pytest.mark.slow
def test_hiskv_full_path_with_oetl_group_is_unbiased(rng):
    n, d, ell = 1500, 4, 2
    data = population(n, d, ell, rng)
    m = HISKV(1.5, d, ell=ell, beta=0.3)
    ests = per_replica_estimates(m, data, 2000, rng)
    F = np.array([e.frequency.values for e in ests])
    nl = np.array([e.extra["n_lrr"] for e in ests])
    assert abs(nl.mean() / n - 0.7) < 0.01
    f = data.true_frequency()
    for k in (0, 3):
        assert abs(_z(F[:, k], f[k], F[:, k].var(ddof=1))) < mean_z_bound()


@pytest.mark.slow
def test_exact_moments_with_truncation(rng):
    """Holders with l_u > ell bias f̂ down; exact_frequency_moments predicts mean and variance."""
    n, d, ell = 800, 5, 2
    data = population(n, d, 4, rng)
    m = PCKVGRR(2.0, d, ell=ell)
    ests = per_replica_estimates(m, data, R, rng)
    F = np.array([e.frequency.values for e in ests])
    mean, var = m.exact_frequency_moments(data)
    lo, hi = variance_ratio_band(R)
    for k in (0, 4):
        assert mean[k] < data.true_frequency()[k] - 0.05  # truncation bias is real
        assert abs(_z(F[:, k], mean[k], var[k])) < mean_z_bound()
        assert lo <= F[:, k].var(ddof=1) / var[k] <= hi


@pytest.mark.slow
@pytest.mark.parametrize("cls", [KVUE, KVOH, LDPKVApprox, PrivKV, PrivKVM])
def test_uniform_sampling_frequency(cls, rng):
    n, d, eps = 1000, 4, 2.0
    data = population(n, d, 3, rng)
    m = cls(eps, d)
    ests = per_replica_estimates(m, data, R, rng)
    _check_freq(ests, data, m, (0, 3), lambda f: m.frequency_variance(n, f))
    if cls not in (PrivKV, PrivKVM):  # (A - B)/N is unbiased for f m
        S = np.array([e.value_sum.values for e in ests])
        fm = data.true_frequency() * data.true_mean()
        for k in (0, 2):
            assert abs(_z(S[:, k], fm[k], S[:, k].var(ddof=1))) < mean_z_bound()


@pytest.mark.slow
def test_privkv_mean_bias_and_privkvm_iterations_remove_it(rng):
    n, d, eps = 20000, 4, 4.0
    data = population(n, d, 2, rng, constant_values=True)
    f, mu = data.true_frequency(), data.true_mean()
    k = int(np.argmax(np.abs(mu) * (f > 0.2)))
    pk = PrivKV(eps, d)
    means = np.array([pk.run(data, rng).mean_clipped[k] for _ in range(40)])
    p1 = pk.p1
    predicted = f[k] * p1 * mu[k] / (f[k] * p1 + (1 - f[k]) * (1 - p1))  # spec C.1 bias (fake mean 0)
    assert abs(means.mean() - predicted) < 5 * means.std(ddof=1) / math.sqrt(40) + 0.005
    assert abs(means.mean() - mu[k]) > 0.05
    pm = PrivKVM(eps, d, rounds=6)
    it = np.array([pm.collect(data, rng).mean_clipped[k] for _ in range(40)])
    assert abs(it.mean() - mu[k]) < abs(means.mean() - mu[k]) / 2
