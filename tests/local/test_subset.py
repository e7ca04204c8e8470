import itertools
import math

import numpy as np
import pytest
from scipy import stats

from shuffledp.core import ValidationError
from shuffledp.local import concat_rows, frequency_oracle, n_rows
from shuffledp.local.subset import SubsetSelection
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band


def _all_subsets(m: SubsetSelection) -> np.ndarray:
    return np.array(list(itertools.combinations(range(m.d), m.omega)))


def test_spec_worked_example():
    # spec A.6: d=8, eps=ln3: omega=2, p*=1/2, q*=3/14; count 400 of 1000 -> 650; Var* = 2062.5
    m = frequency_oracle("ss", math.log(3), 8)
    assert isinstance(m, SubsetSelection)
    assert m.omega == 2 and m.p_star == pytest.approx(0.5) and m.q_star == pytest.approx(3 / 14)
    # every report names omega = 2 items, so the counts of n = 1000 reports sum to 2000
    stat = np.array([400, 229, 229, 229, 229, 228, 228, 228])
    assert m.estimate(stat, 1000).values[0] * 1000 == pytest.approx(650)
    assert m.variance(1000, 0.0) * 1000**2 == pytest.approx(2062.5)
    assert SubsetSelection(1.0, 1024).omega == round(1024 / (math.e + 1)) == 275
    assert SubsetSelection(5.0, 10).omega == 1


@pytest.mark.parametrize("eps,d", [(0.5, 5), (1.0, 6), (3.0, 7), (1.0, 2), (0.2, 9)])
def test_exact_privacy(eps, d, rng):
    m = SubsetSelection(eps, d)
    reports = sweep_reports(m, range(d), 200, rng)
    assert worst_case_log_ratio(m, reports, range(d)) <= eps + 1e-9
    allr = {"items": _all_subsets(m)}
    assert worst_case_log_ratio(m, allr, range(d)) == pytest.approx(eps)
    probs = np.stack([m.probabilities(allr, x) for x in range(d)])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    # p* and q* are the support probabilities of this exact law
    member = np.stack([(allr["items"] == i).any(axis=1) for i in range(d)])  # (item, subset)
    np.testing.assert_allclose((probs * member[0]).sum(axis=1)[0], m.p_star)
    np.testing.assert_allclose((probs[1] * member[0]).sum(), m.q_star)


@pytest.mark.parametrize("eps,d,omega", [(1.0, 6, None), (0.3, 7, None), (1.0, 7, 3)])
def test_sampler_is_exactly_the_subset_law(eps, d, omega, rng):
    """Chi-square over all omega-subsets: the sampler produces Pr[S | x] (canonical rows)."""
    m = SubsetSelection(eps, d, omega=omega)
    subs = _all_subsets(m)
    code = {tuple(s): i for i, s in enumerate(subs.tolist())}
    N = 60_000
    for x in (0, d // 2):
        items = m.randomize(np.full(N, x), rng)["items"]
        assert np.all(np.diff(items, axis=1) > 0)
        idx = np.array([code[t] for t in map(tuple, items.tolist())])
        obs = np.bincount(idx, minlength=len(subs))
        exp = m.probabilities({"items": subs}, x) * N
        assert stats.chisquare(obs, exp).pvalue > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("eps,d", [(1.0, 8), (0.5, 16)])
def test_unbiased_and_variance(eps, d, rng):
    n, R = 2000, 4000
    m = SubsetSelection(eps, d)
    x = np.repeat(np.arange(d), n // d)
    x[: n // 2] = 0
    f = np.bincount(x, minlength=d) / n
    ests = np.array([m.estimate(m.aggregate(m.randomize(x, rng)), n).values for _ in range(R)])
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    for i in (0, 3):
        var = m.variance(n, f[i])
        z = (ests[:, i].mean() - f[i]) / math.sqrt(var / R)
        assert abs(z) < mean_z_bound()
        assert lo <= ests[:, i].var(ddof=1) / var <= hi


def test_large_domain_log_probabilities(rng):
    m = SubsetSelection(1.0, 1024)
    r = m.randomize(rng.integers(0, 1024, 50), rng)
    assert r["items"].shape == (50, 275) and r["items"].dtype == np.int16
    lp = np.stack([m.log_probabilities(r, x) for x in range(0, 1024, 7)])
    assert (lp.max(axis=0) - lp.min(axis=0)).max() <= 1.0 + 1e-9


def test_simulate_statistic_matches(rng):
    d = 6
    m = SubsetSelection(1.0, d)
    counts = np.array([50, 0, 10, 5, 5, 30])
    x = np.repeat(np.arange(d), counts)
    R = 1000
    a = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(R)])
    b = np.array([m.simulate_statistic(counts, rng) for _ in range(R)])
    se = np.sqrt(a.var(0) / R + b.var(0) / R)
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)


def test_mergeable(rng):
    m = SubsetSelection(1.0, 40)
    r1 = m.randomize(rng.integers(0, 40, 100), rng)
    r2 = m.randomize(rng.integers(0, 40, 50), rng)
    both = concat_rows([r1, r2])
    assert n_rows(both) == 150
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(r1) + m.aggregate(r2))


def test_validate_reports(rng):
    m = SubsetSelection(1.0, 10)  # omega = 3
    r = m.randomize(rng.integers(0, 10, 20), rng)
    np.testing.assert_array_equal(m.validate_reports(r)["items"], r["items"])
    bad = [
        {"items": r["items"][:, :2]},                    # wrong omega
        {"items": r["items"][:, ::-1]},                  # not canonical (decreasing)
        {"items": np.array([[1, 1, 2]])},                # duplicate
        {"items": np.array([[1, 2, 10]])},               # out of range
        {"items": np.array([[-1, 2, 3]])},
        {"items": np.array([[0.0, 1.0, 2.0]])},          # floats
        {"items": r["items"].ravel()},                   # 1-D
        {"y": r["items"]},
    ]
    for b in bad:
        with pytest.raises(ValidationError):
            m.validate_reports(b)


@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], [np.nan], ["a"], [True]])
def test_bad_values(bad, rng):
    m = SubsetSelection(1.0, 10)
    with pytest.raises(ValidationError):
        m.randomize(np.array(bad), rng)


@pytest.mark.parametrize("kwargs", [dict(epsilon=0, d=4), dict(epsilon=1.0, d=1), dict(epsilon=1.0, d=4, omega=4),
                                    dict(epsilon=1.0, d=4, omega=0), dict(epsilon=1.0, d=4, omega=1.5)])
def test_bad_params(kwargs):
    with pytest.raises(ValidationError):
        SubsetSelection(**kwargs)


def test_bad_statistic():
    m = SubsetSelection(1.0, 10)
    with pytest.raises(ValidationError):
        m.estimate(np.zeros(9), 10)
    with pytest.raises(ValidationError):
        m.estimate(np.zeros(10), 0)
