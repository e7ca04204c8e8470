import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.core import ValidationError
from shuffledp.local import concat_rows, frequency_oracle, n_rows
from shuffledp.local.hashing import (
    BinaryLocalHashing,
    LocalHashing,
    OptimizedLocalHashing,
    affine_hash,
    is_prime,
    smallest_prime_at_least,
)
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band


def test_parameters_and_registry():
    m = frequency_oracle("olh", 1.0, 1024)
    assert isinstance(m, OptimizedLocalHashing) and m.g == 4 and m.prime == 1031
    assert isinstance(frequency_oracle("blh", 1.0, 10), BinaryLocalHashing)
    assert frequency_oracle("blh", 1.0, 10).g == 2
    assert OptimizedLocalHashing(2.0, 10, g=round(math.exp(2.0)) + 1).g == 8  # Wang et al.'s choice, given
    assert OptimizedLocalHashing(2.0, 10).g == OptimizedLocalHashing.best_g(2.0, 10)
    assert OptimizedLocalHashing(2.0, 10).g_chosen and not OptimizedLocalHashing(1.0, 10, g=3).g_chosen
    assert OptimizedLocalHashing(1.0, 10, g=3).g == 3
    assert [smallest_prime_at_least(k) for k in (2, 3, 4, 10, 1024, 7919)] == [2, 3, 5, 11, 1031, 7919]
    assert [k for k in range(30) if is_prime(k)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]


@pytest.mark.parametrize("prime,g", [(5, 2), (7, 3), (11, 4), (13, 5), (5, 8)])
def test_exact_collision_probability_by_enumeration(prime, g):
    """Every pair x != x' collides with the same, exactly known probability over all seeds."""
    seeds = np.arange((prime - 1) * prime)
    H = affine_hash(seeds[:, None], np.arange(prime)[None, :], prime, g)  # (seeds, x)
    coll = LocalHashing.exact_collision_probability(prime, g)
    for x in range(prime):
        for x2 in range(x + 1, prime):
            assert Fraction(int((H[:, x] == H[:, x2]).sum()), seeds.size) == coll
    # and it differs from 1/g (g does not divide P), which is why the estimator uses q*
    assert coll != Fraction(1, g)


def test_spec_worked_examples():
    # spec A.4 (idealised family, collision 1/g): OLH eps=ln3 g=4 p=0.5: support 400/1000 -> 600,
    # Var* = 3000; BLH p=0.75: support 700 -> 800, Var* = 4000. A huge prime makes our exact
    # collision probability 1/g - O(1/P), so the numbers agree to O(1/P).
    olh = OptimizedLocalHashing(math.log(3), 1000, prime=1_000_003)
    assert olh.g == 4 and olh.p == pytest.approx(0.5) and olh.q_star == pytest.approx(0.25, abs=1e-6)
    # the other items at their f = 0 mean n q*: a statistic whose total n = 1000 reports can produce
    # (estimate refuses an n the total contradicts)
    stat = np.concatenate([[400], np.full(999, 250)])
    assert olh.estimate(stat, 1000).values[0] * 1000 == pytest.approx(600, abs=1e-2)
    assert olh.variance(1000, 0.0) * 1000**2 == pytest.approx(3000, rel=1e-5)
    blh = BinaryLocalHashing(math.log(3), 1000, prime=1_000_003)
    assert blh.p == pytest.approx(0.75)
    assert blh.estimate(np.concatenate([[700], np.full(999, 500)]), 1000).values[0] * 1000 == pytest.approx(800, abs=1e-2)
    assert blh.variance(1000, 0.0) * 1000**2 == pytest.approx(4000, rel=1e-5)
    # default (smallest) prime: exact q* = q + coll (p - q)
    m = OptimizedLocalHashing(math.log(3), 10)  # P = 11, g = 4: c = (3, 3, 3, 2)
    assert m.collision_fraction == Fraction(3 * 3 * 2 + 2 * 1, 110)
    assert m.q_star == pytest.approx(1 / 6 + (2 / 11) * (0.5 - 1 / 6))


@pytest.mark.parametrize("cls,eps,d", [(BinaryLocalHashing, 0.5, 4), (OptimizedLocalHashing, 1.0, 7),
                                        (OptimizedLocalHashing, 3.0, 12)])
def test_exact_privacy(cls, eps, d, rng):
    m = cls(eps, d)
    reports = sweep_reports(m, range(d), 200, rng)
    assert worst_case_log_ratio(m, reports, range(d)) <= eps + 1e-9
    # exhaustive over the whole output space (every seed, every y)
    s, y = np.meshgrid(np.arange(m.n_seeds), np.arange(m.g), indexing="ij")
    allr = {"seed": s.ravel().astype(np.uint64), "y": y.ravel()}
    assert worst_case_log_ratio(m, allr, range(d)) == pytest.approx(eps)
    probs = np.stack([m.probabilities(allr, x) for x in range(d)])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


def test_randomize_matches_probabilities(rng):
    """Empirical law of (seed, y) for one input equals probabilities() (chi-square, fixed seed)."""
    from scipy import stats

    m = OptimizedLocalHashing(1.0, 4)  # P = 5, 20 seeds, g = 4: 80 outputs
    N = 200_000
    r = m.randomize(np.full(N, 2), rng)
    cell = r["seed"].astype(np.int64) * m.g + r["y"]
    obs = np.bincount(cell, minlength=m.n_seeds * m.g)
    s, y = np.divmod(np.arange(m.n_seeds * m.g), m.g)
    exp = m.probabilities({"seed": s, "y": y}, 2) * N
    assert stats.chisquare(obs, exp).pvalue > 1e-4


@pytest.mark.parametrize("cls,eps", [(OptimizedLocalHashing, 1.0), (BinaryLocalHashing, 2.0)])
def test_unbiased_and_variance(cls, eps, rng):
    d, n, R = 8, 2000, 4000
    m = cls(eps, d)
    x = np.repeat(np.arange(d), n // d)
    x[: n // 2] = 0  # skewed
    f = np.bincount(x, minlength=d) / n
    ests = np.array([m.estimate(m.aggregate(m.randomize(x, rng)), n).values for _ in range(R)])
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    for i in (0, 3):
        var = m.variance(n, f[i])
        z = (ests[:, i].mean() - f[i]) / math.sqrt(var / R)
        assert abs(z) < mean_z_bound()
        assert lo <= ests[:, i].var(ddof=1) / var <= hi


def test_idealised_q_would_be_biased(rng):
    """The test above can fail: with q* = 1/g (the paper's value) this family is biased."""
    d, n, R = 8, 2000, 400
    m = OptimizedLocalHashing(1.0, d)
    x = np.zeros(n, dtype=np.int64)
    stats_ = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(R)])
    naive = (stats_[:, 3] - n / m.g) / (n * (m.p - 1 / m.g))  # true f_3 = 0
    assert abs(naive.mean()) / math.sqrt(m.variance(n, 0.0) / R) > 10


@settings(max_examples=60, deadline=None)
@given(d=st.integers(2, 60), eps=st.floats(0.1, 6.0), n=st.integers(0, 300),
       extra=st.integers(0, 3), seed=st.integers(0, 2**32 - 1))
def test_grouped_aggregate_equals_direct(d, eps, n, extra, seed):
    rng = np.random.default_rng(seed)
    prime = smallest_prime_at_least(d)
    for _ in range(extra):  # sometimes a larger prime than the default
        prime = smallest_prime_at_least(prime + 1)
    m = OptimizedLocalHashing(eps, d, prime=prime)
    r = m.randomize(rng.integers(0, d, n), rng)
    np.testing.assert_array_equal(m.aggregate(r), m.support_counts_direct(r))
    np.testing.assert_array_equal(m._support_grouped(r["seed"].astype(np.int64), r["y"]),
                                  m.support_counts_direct(r))


def test_grouped_chunked_path_equals_direct(rng):
    m = OptimizedLocalHashing(1.0, 2100)  # (P-1)(P+d) > 2^22: unique + chunked groups
    r = m.randomize(rng.integers(0, m.d, 3000), rng)
    np.testing.assert_array_equal(m._support_grouped(r["seed"].astype(np.int64), r["y"]),
                                  m.support_counts_direct(r))


@settings(max_examples=100, deadline=None)
@given(prime=st.sampled_from([2, 3, 5, 11, 1031, 65537, 2147483647]), g=st.integers(2, 10**6),
       seeds=st.lists(st.integers(0, 2**62), min_size=1, max_size=20), x=st.integers(0, 2**31 - 2))
def test_hash_family_deterministic_and_in_range(prime, g, seeds, x):
    s = np.array([v % ((prime - 1) * prime) for v in seeds], dtype=np.uint64)
    xv = x % prime
    h = affine_hash(s, xv, prime, g)
    assert h.dtype == np.int64 and np.all((0 <= h) & (h < g))
    np.testing.assert_array_equal(h, affine_hash(s.astype(np.int64), np.full(s.size, xv), prime, g))
    # identical to exact integer arithmetic (no overflow)
    expect = [(((int(v) // prime + 1) * xv + int(v) % prime) % prime) % g for v in s]
    assert h.tolist() == expect


def test_simulate_statistic_matches(rng):
    d, eps = 6, 1.0
    m = OptimizedLocalHashing(eps, d)
    counts = np.array([50, 0, 10, 5, 5, 30])
    x = np.repeat(np.arange(d), counts)
    R = 1000
    a = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(R)])
    b = np.array([m.simulate_statistic(counts, rng) for _ in range(R)])
    se = np.sqrt(a.var(0) / R + b.var(0) / R)
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)


def test_mergeable(rng):
    m = OptimizedLocalHashing(1.0, 50)
    r1 = m.randomize(rng.integers(0, 50, 100), rng)
    r2 = m.randomize(rng.integers(0, 50, 70), rng)
    both = concat_rows([r1, r2])
    assert n_rows(both) == 170
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(r1) + m.aggregate(r2))


def test_validate_reports(rng):
    m = OptimizedLocalHashing(1.0, 10)
    r = m.randomize(rng.integers(0, 10, 20), rng)
    ok = m.validate_reports(r)
    np.testing.assert_array_equal(ok["y"], r["y"])
    bad = [
        {"y": r["y"]},
        {**r, "extra": r["y"]},
        {"seed": r["seed"], "y": np.full(20, m.g)},
        {"seed": np.full(20, m.n_seeds, dtype=np.uint64), "y": r["y"]},
        {"seed": r["seed"][:5], "y": r["y"]},
        {"seed": r["seed"].astype(float), "y": r["y"]},
        {"seed": r["seed"], "y": -r["y"] - 1},
    ]
    for b in bad:
        with pytest.raises(ValidationError):
            m.validate_reports(b)


@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], [np.nan], ["a"], [True]])
def test_bad_values(bad, rng):
    m = OptimizedLocalHashing(1.0, 10)
    with pytest.raises(ValidationError):
        m.randomize(np.array(bad), rng)


@pytest.mark.parametrize("kwargs", [dict(epsilon=0, d=4), dict(epsilon=1.0, d=1), dict(epsilon=1.0, d=4, g=1),
                                    dict(epsilon=1.0, d=4, prime=4), dict(epsilon=1.0, d=10, prime=7),
                                    dict(epsilon=1.0, d=4, prime=2**31 + 11), dict(epsilon=1.0, d=4, g=2**31),
                                    dict(epsilon=1.0, d=4, g=2.5)])
def test_bad_params(kwargs):
    with pytest.raises(ValidationError):
        OptimizedLocalHashing(**kwargs)


def test_bad_statistic():
    m = OptimizedLocalHashing(1.0, 10)
    with pytest.raises(ValidationError):
        m.estimate(np.zeros(9), 10)
    with pytest.raises(ValidationError):
        m.estimate(np.zeros(10), 0)
