import math

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.local import frequency_oracle, n_rows
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band


def test_worked_example():
    m = frequency_oracle("grr", math.log(3), 4)
    assert m.p == pytest.approx(0.5) and m.q == pytest.approx(1 / 6)
    est = m.estimate(np.array([300, 300, 200, 200]), 1000)
    assert est.values[0] * 1000 == pytest.approx(400)
    assert m.variance(1000, 0.0) * 1000**2 == pytest.approx(1250)
    assert m.variance(1000, 0.4) * 1000**2 == pytest.approx(1650)


@pytest.mark.parametrize("eps,d", [(0.5, 2), (1.0, 5), (4.0, 17)])
def test_exact_privacy(eps, d, rng):
    m = frequency_oracle("grr", eps, d)
    reports = sweep_reports(m, range(d), 200, rng)
    assert worst_case_log_ratio(m, reports, range(d)) <= eps + 1e-12
    # exhaustive over the whole output space too
    allr = {"y": np.arange(d)}
    assert worst_case_log_ratio(m, allr, range(d)) == pytest.approx(eps)


def test_unbiased_and_variance(rng):
    d, n, eps, R = 8, 2000, 1.0, 4000
    m = frequency_oracle("grr", eps, d)
    x = np.repeat(np.arange(d), n // d)
    x[: n // 2] = 0  # skewed
    f = np.bincount(x, minlength=d) / n
    ests = np.array([m.estimate(m.aggregate(m.randomize(x, rng)), n).values for _ in range(R)])
    for i in (0, 3):
        var = m.variance(n, f[i])
        z = (ests[:, i].mean() - f[i]) / math.sqrt(var / R)
        assert abs(z) < mean_z_bound()
        lo, hi = variance_ratio_band(R)
        assert lo <= ests[:, i].var(ddof=1) / var <= hi
        assert 0.9 < lo and hi < 1.1


def test_simulate_statistic_matches(rng):
    d, eps = 6, 1.0
    m = frequency_oracle("grr", eps, d)
    counts = np.array([50, 0, 10, 5, 5, 30])
    x = np.repeat(np.arange(d), counts)
    R = 3000
    a = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(R)])
    b = np.array([m.simulate_statistic(counts, rng) for _ in range(R)])
    assert (b.sum(axis=1) == counts.sum()).all()
    se = np.sqrt(a.var(0) / R + b.var(0) / R)
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)
    assert np.allclose(a.var(0), b.var(0), rtol=0.15)


def test_mergeable(rng):
    m = frequency_oracle("grr", 1.0, 10)
    r1 = m.randomize(rng.integers(0, 10, 100), rng)
    r2 = m.randomize(rng.integers(0, 10, 50), rng)
    from shuffledp.local import concat_rows
    both = concat_rows([r1, r2])
    assert n_rows(both) == 150
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(r1) + m.aggregate(r2))


@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], [np.nan], ["a"], [True]])
def test_bad_values(bad, rng):
    m = frequency_oracle("grr", 1.0, 10)
    with pytest.raises(ValidationError):
        m.randomize(np.array(bad), rng)


@pytest.mark.parametrize("eps,d", [(0, 4), (-1, 4), (float("nan"), 4), (1.0, 1), (1.0, 2.5)])
def test_bad_params(eps, d):
    with pytest.raises(ValidationError):
        frequency_oracle("grr", eps, d)


def test_unknown_name():
    with pytest.raises(ValidationError, match="unknown frequency oracle"):
        frequency_oracle("nope", 1.0, 4)


@pytest.mark.parametrize("eps,d,x", [(1.0, 6, 2), (0.3, 5, 0), (3.0, 10, 9)])
def test_randomize_matches_probabilities(eps, d, x, rng):
    """Empirical law of y for one input equals probabilities() (chi-square, fixed seed)."""
    from scipy import stats

    m = frequency_oracle("grr", eps, d)
    N = 200_000
    obs = np.bincount(m.randomize(np.full(N, x), rng)["y"], minlength=d)
    probs = m.probabilities({"y": np.arange(d)}, x)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert stats.chisquare(obs, probs * N).pvalue > 1e-4
