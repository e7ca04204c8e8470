"""Exact samplers: their laws (pmf ratios, chi-square) in algorithm, simulation and production mode."""

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from shuffledp.central import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    polya_pmf,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_polya,
    sample_symmetric_binomial,
    simulate_discrete_gaussian,
    simulate_discrete_laplace,
    simulate_polya,
)
from shuffledp.central import exact
from shuffledp.core import ValidationError
from tests.central._stats import binned_chi2_pvalue, variance_z
from tests.conftest import mean_z_bound

#: fixed-seed tests: deterministic, so a generous level; production tests: random, tiny level
SEEDED_ALPHA = 1e-3
PRODUCTION_ALPHA = 1e-6


# ---------------------------------------------------------------- exact pmf ratios -----------

@pytest.mark.parametrize("eps,sens", [(0.1, 1), (1.0, 1), (1.0, 3), (2.5, 2)])
def test_discrete_laplace_pmf_ratio_is_exp_minus_eps(eps, sens):
    m = DiscreteLaplaceMechanism(eps, sens)
    z = np.arange(-60, 60)
    p = m.noise_pmf(z)
    ratio = p[1:] / p[:-1]
    away = np.where(z[:-1] >= 0, ratio, 1 / ratio)  # P(|z|+1)/P(|z|)
    np.testing.assert_allclose(away, math.exp(-eps / sens), rtol=1e-12)
    # worst-case ratio between neighbouring outputs f and f + sens is exactly e^eps
    shifted = m.noise_pmf(z - sens)
    assert np.max(np.abs(np.log(p / shifted))) == pytest.approx(eps, rel=1e-12)
    assert p.sum() == pytest.approx(1.0, abs=1e-12 if eps / sens > 0.5 else 1e-2)


@pytest.mark.parametrize("sigma", [0.6, 1.0, 3.7, 150.0])
def test_discrete_gaussian_pmf_ratio(sigma):
    half = min(40, int(20 * sigma) + 1)  # stay where the pmf does not underflow
    z = np.arange(-half, half)
    p = discrete_gaussian_pmf(z, sigma)
    ratio = p[1:] / p[:-1]
    np.testing.assert_allclose(ratio, np.exp(-(2 * z[:-1] + 1) / (2 * sigma**2)), rtol=1e-12)
    if sigma < 10:
        assert discrete_gaussian_pmf(np.arange(-400, 401), sigma).sum() == pytest.approx(1.0, abs=1e-12)
        # CKS20 Prop. 19: Var < sigma^2; the gap ~ e^{-2 pi^2 sigma^2} is below double precision for sigma >~ 1.5
        assert discrete_gaussian_variance(sigma) <= sigma**2
        if sigma < 1.5:
            assert discrete_gaussian_variance(sigma) < sigma**2
    m = DiscreteGaussianMechanism.from_sigma(sigma, 1e-5)
    np.testing.assert_array_equal(m.noise_pmf(z), p)


def test_reference_variances():
    # survey/spec: discrete Laplace scale 1 has variance 2e^-1/(1-e^-1)^2
    assert discrete_laplace_variance(1.0) == pytest.approx(2 * math.exp(-1) / (1 - math.exp(-1)) ** 2, rel=1e-14)
    assert discrete_laplace_variance(1.0) == pytest.approx(1.84135, abs=1e-5)
    # alpha = 0.9: 2 alpha/(1 - alpha)^2 = 180
    assert discrete_laplace_variance(-1 / math.log(0.9)) == pytest.approx(180.0, rel=1e-12)
    assert discrete_gaussian_variance(20.0) == 400.0


def test_polya_pmf_is_negative_binomial():
    x = np.arange(0, 200)
    np.testing.assert_allclose(polya_pmf(x, 0.1, 0.9), stats.nbinom.pmf(x, 0.1, 0.1), rtol=1e-10)
    # Polya(1, alpha) is the geometric (1 - alpha) alpha^x
    np.testing.assert_allclose(polya_pmf(x, 1.0, 0.7), 0.3 * 0.7**x, rtol=1e-10)


# ---------------------------------------------------------------- algorithm, seeded source ---

@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 3), Fraction(9, 2)])
def test_bernoulli_exp_algorithm(gamma):
    src = exact._test_source(11)
    n = 40_000
    k = sum(exact.bernoulli_exp(gamma, src) for _ in range(n))
    p = math.exp(-float(gamma))
    if gamma == 0:
        assert k == n
        return
    assert stats.binomtest(k, n, p).pvalue > SEEDED_ALPHA


@pytest.mark.parametrize("gamma", [Fraction(1, 10), Fraction(1), Fraction(13, 4)])
def test_geometric_algorithm(gamma):
    src = exact._test_source(5)
    x = np.array([exact.geometric_exp(gamma, src) for _ in range(30_000)])
    a = math.exp(-float(gamma))
    support = np.arange(0, 400)
    assert binned_chi2_pvalue(x, support, (1 - a) * a**support) > SEEDED_ALPHA


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(1), Fraction(10, 3), Fraction(25)])
def test_discrete_laplace_algorithm(scale):
    src = exact._test_source(7)
    x = np.array([exact.discrete_laplace(scale, src) for _ in range(30_000)])
    support = np.arange(-400, 401)
    assert binned_chi2_pvalue(x, support, discrete_laplace_pmf(support, float(scale))) > SEEDED_ALPHA


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(1), Fraction(9), Fraction(2500)])
def test_discrete_gaussian_algorithm(sigma2):
    src = exact._test_source(3)
    x = np.array([exact.discrete_gaussian(sigma2, src) for _ in range(20_000)])
    s = math.sqrt(sigma2)
    support = np.arange(-int(12 * s) - 5, int(12 * s) + 6)
    assert binned_chi2_pvalue(x, support, discrete_gaussian_pmf(support, s)) > SEEDED_ALPHA


@pytest.mark.parametrize("r,gamma", [(Fraction(1, 3), Fraction(1, 2)), (Fraction(1, 10), Fraction(1, 10)),
                                     (Fraction(1), Fraction(1, 5))])
def test_polya_algorithm(r, gamma):
    src = exact._test_source(9)
    x = np.array([exact.polya(r, gamma, src) for _ in range(20_000)])
    support = np.arange(0, 600)
    assert binned_chi2_pvalue(x, support, polya_pmf(support, float(r), math.exp(-float(gamma)))) > SEEDED_ALPHA


@pytest.mark.parametrize("r,gamma", [(Fraction(1, 50), Fraction(1, 200)), (Fraction(1, 7), Fraction(3, 100))])
def test_polya_algorithm_small_rate(r, gamma):
    """Small gamma (alpha near 1), the rsum_dsg regime: the round-by-round loop needed ~1/gamma
    rounds per draw; the skipped rounds must not change the law. 20,000 draws, fixed seed.
    (An exponent off by one in the skipped-rounds Bernoulli fails the (1/7, 3/100) case and the
    test_polya_algorithm cases at p < 1e-13.)"""
    src = exact._test_source(13)
    x = np.array([exact.polya(r, gamma, src) for _ in range(20_000)])
    assert (x > 0).mean() > 0.05  # the test sees the tail: P(X > 0) = 1 - (1 - alpha)^r
    support = np.arange(0, 5000)
    a = math.exp(-float(gamma))
    assert binned_chi2_pvalue(x, support, polya_pmf(support, float(r), a)) > SEEDED_ALPHA
    assert binned_chi2_pvalue(x, support, polya_pmf(support, 1.25 * float(r), a)) < SEEDED_ALPHA


@pytest.mark.parametrize("a,b,g", [(2, 3, 1), (2, 3, 5), (9_999, 10_000, 300), (1, 7, 2), (0, 5, 3)])
def test_bernoulli_power_exact_fallback(a, b, g, monkeypatch):
    """Bernoulli((a/b)^g) with 1-bit fixed-point bounds, so the exact fallback decides nearly
    always (a fallback that always answered False fails this at p < 1e-170), and with the
    default 128 bits: binomial test of the frequency, fixed seed."""
    p = (a / b) ** g
    for bits in (1, exact._POW_BITS):
        monkeypatch.setattr(exact, "_POW_BITS", bits)
        src = exact._test_source(17)
        k = sum(exact._bernoulli_power(a, b, g, src) for _ in range(20_000))
        if p == 0:
            assert k == 0
        else:
            assert stats.binomtest(k, 20_000, p).pvalue > SEEDED_ALPHA


def test_polya_law_with_coarse_bounds(monkeypatch):
    """The Pólya law through the exact fallback of the skipped-rounds Bernoulli (1-bit bounds)."""
    monkeypatch.setattr(exact, "_POW_BITS", 1)
    src = exact._test_source(19)
    r, gamma = Fraction(1, 5), Fraction(1, 20)
    x = np.array([exact.polya(r, gamma, src) for _ in range(20_000)])
    support = np.arange(0, 2000)
    assert binned_chi2_pvalue(x, support, polya_pmf(support, 0.2, math.exp(-0.05))) > SEEDED_ALPHA


def test_symmetric_binomial_algorithm():
    src = exact._test_source(1)
    x = np.array([exact.symmetric_binomial(30, src) for _ in range(20_000)])
    support = np.arange(0, 31)
    assert binned_chi2_pvalue(x, support, stats.binom.pmf(support, 30, 0.5)) > SEEDED_ALPHA


# ---------------------------------------------------------------- simulation (numpy, seeded) -

@pytest.mark.parametrize("scale", [0.5, 1.0, 7.0])
def test_simulated_discrete_laplace(scale, rng):
    x = simulate_discrete_laplace(scale, 200_000, rng)
    support = np.arange(-300, 301)
    assert binned_chi2_pvalue(x, support, discrete_laplace_pmf(support, scale)) > SEEDED_ALPHA
    var = discrete_laplace_variance(scale)
    assert abs(x.mean()) / math.sqrt(var / x.size) < mean_z_bound()
    z, width = variance_z(x, var)
    assert abs(z) < mean_z_bound() and width < 0.1


@pytest.mark.parametrize("sigma", [0.7, 2.0, 30.0])
def test_simulated_discrete_gaussian(sigma, rng):
    x = simulate_discrete_gaussian(sigma, 200_000, rng)
    support = np.arange(-int(10 * sigma) - 5, int(10 * sigma) + 6)
    assert binned_chi2_pvalue(x, support, discrete_gaussian_pmf(support, sigma)) > SEEDED_ALPHA
    var = discrete_gaussian_variance(sigma)
    z, width = variance_z(x, var)
    assert abs(z) < mean_z_bound() and width < 0.1


def test_simulated_polya(rng):
    x = simulate_polya(0.25, 0.8, 200_000, rng)
    support = np.arange(0, 200)
    assert binned_chi2_pvalue(x, support, polya_pmf(support, 0.25, 0.8)) > SEEDED_ALPHA


# ---------------------------------------------------------------- production (OS randomness) --

def test_production_discrete_laplace_chi2():
    x = sample_discrete_laplace(1.5, 20_000)
    support = np.arange(-100, 101)
    assert binned_chi2_pvalue(x, support, discrete_laplace_pmf(support, 1.5)) > PRODUCTION_ALPHA


def test_production_discrete_gaussian_chi2():
    x = sample_discrete_gaussian(2.0, 10_000)
    support = np.arange(-40, 41)
    assert binned_chi2_pvalue(x, support, discrete_gaussian_pmf(support, 2.0)) > PRODUCTION_ALPHA


def test_production_polya_and_binomial_chi2():
    x = sample_polya(0.5, 0.3, 10_000)
    support = np.arange(0, 200)
    assert binned_chi2_pvalue(x, support, polya_pmf(support, 0.5, math.exp(-0.3))) > PRODUCTION_ALPHA
    b = sample_symmetric_binomial(40, 10_000)
    support = np.arange(-20, 21)
    assert binned_chi2_pvalue(b, support, stats.binom.pmf(support + 20, 40, 0.5)) > PRODUCTION_ALPHA


def test_production_scalar_returns_int():
    assert isinstance(sample_discrete_laplace(1.0), int)
    assert isinstance(sample_discrete_gaussian(1.0), int)
    assert isinstance(sample_polya(Fraction(1, 2), 1.0), int)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "x", True])
def test_sampler_bad_parameters(bad):
    with pytest.raises(ValidationError):
        sample_discrete_laplace(bad)
    with pytest.raises(ValidationError):
        sample_discrete_gaussian(bad)


def test_polya_bad_parameters():
    with pytest.raises(ValidationError, match="r must lie in"):
        sample_polya(1.5, 1.0)
    with pytest.raises(ValidationError, match="gamma must be"):
        sample_polya(0.5, 0.0)
    with pytest.raises(ValidationError, match="trials must be even"):
        sample_symmetric_binomial(3)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_system_source_is_fork_safe():
    """A forked child must not replay the parent's buffered OS randomness."""
    src = exact.system_source()
    src.getrandbits(8)  # the parent now holds a partly used buffer
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.write(w, src.getrandbits(128).to_bytes(16, "little"))
        os._exit(0)
    os.waitpid(pid, 0)
    child = int.from_bytes(os.read(r, 16), "little")
    os.close(r)
    os.close(w)
    assert child != src.getrandbits(128)


def test_system_source_threads_get_distinct_bytes():
    import threading

    src = exact.system_source()
    out = []
    ths = [threading.Thread(target=lambda: out.append(src.getrandbits(128))) for _ in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert len(set(out)) == 8
