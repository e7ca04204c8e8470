"""LDP and CDP baselines of the survey (shuffledp.shuffle.baselines).

Privacy: exact worst-case ratio of every local randomizer vs e^eps; the central noise law is the
discrete Laplace pmf (chi-square on the seeded simulation path and on the OS release path).
Utility: unbiasedness and variance against the closed forms with chi-square / normal bands at
fixed seeds (R repetitions; band probabilities 1e-4 or smaller per check).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from shuffledp.core.errors import ValidationError
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from shuffledp.pipeline import run, simulate
from shuffledp.shuffle import protocol
from shuffledp.shuffle.baselines import PROTOCOLS

EPS = [0.3, 1.0, 3.0]


def _mean_band(x: np.ndarray, mu: float, var: float, z: float = 4.5) -> None:
    se = math.sqrt(var / x.size)
    assert abs(x.mean() - mu) < z * se, (x.mean(), mu, se)


def _var_band(x: np.ndarray, var: float, p: float = 1e-5) -> None:
    r = x.size - 1
    lo, hi = stats.chi2.ppf([p, 1 - p], r) / r
    ratio = x.var(ddof=1) / var
    assert lo < ratio < hi, (ratio, lo, hi)


def _chi2_noise(noise: np.ndarray, pmf, p_min: float = 1e-6) -> float:
    """Chi-square goodness of fit of integer noise against ``pmf`` (tail bins pooled)."""
    m = int(np.abs(noise).max())
    z = np.arange(-m, m + 1)
    expected = pmf(z) * noise.size
    observed = np.bincount(noise + m, minlength=z.size).astype(float)
    # pool bins with expected < 5 into the two tails
    keep = expected >= 5
    lo_t = np.argmax(keep)
    hi_t = len(keep) - np.argmax(keep[::-1]) - 1
    e = np.concatenate([[expected[:lo_t + 1].sum()], expected[lo_t + 1:hi_t], [expected[hi_t:].sum()]])
    o = np.concatenate([[observed[:lo_t + 1].sum()], observed[lo_t + 1:hi_t], [observed[hi_t:].sum()]])
    e *= o.sum() / e.sum()  # mass outside [-m, m] is negligible; renormalise
    pval = stats.chisquare(o, e).pvalue
    assert pval > p_min, pval
    return pval


# ------------------------------------------------------------------------------ registry and models

def test_registry_and_models():
    assert set(PROTOCOLS) == {"ldp_rr", "ldp_krr", "ldp_oracle", "ldp_harmony", "cdp_laplace_count",
                              "cdp_laplace_hist", "cdp_laplace_sum"}
    for name, cls in PROTOCOLS.items():
        kw = {"d": 8} if name in ("ldp_krr", "ldp_oracle", "cdp_laplace_hist") else {}
        p = protocol(name, epsilon=0.9, delta=1e-6, n=1000, **kw)
        assert isinstance(p, cls)
        assert p.model == ("local" if name.startswith("ldp") else "central")
        st = p.privacy(1000)
        assert st.eps == pytest.approx(0.9, rel=1e-15) and st.delta == 0.0 and st.model == p.model
        assert p.messages_per_user == 1.0 and p.bits_per_user > 0
        assert p.has_exact_simulation


# ------------------------------------------------------------------------------ local privacy

@pytest.mark.parametrize("eps", EPS)
def test_ldp_rr_exact_ratio(eps):
    p = protocol("ldp_rr", epsilon=eps, n=10)
    lr = p.local_randomizer
    reps = sweep_reports(lr, [0, 1], 200, np.random.default_rng(1))
    assert set(np.unique(reps["y"])) == {0, 1}
    assert worst_case_log_ratio(lr, reps, [0, 1]) == pytest.approx(eps, abs=1e-12)
    assert lr.epsilon == eps


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("d", [2, 7])
def test_ldp_krr_exact_ratio(eps, d):
    p = protocol("ldp_krr", epsilon=eps, n=10, d=d)
    lr = p.local_randomizer
    reps = sweep_reports(lr, range(d), 400, np.random.default_rng(2))
    assert np.unique(reps["y"]).size == d
    assert worst_case_log_ratio(lr, reps, range(d)) == pytest.approx(eps, abs=1e-12)


@pytest.mark.parametrize("oracle", ["grr", "olh", "hr"])
def test_ldp_oracle_exact_ratio(oracle):
    eps, d = 1.2, 6
    p = protocol("ldp_oracle", epsilon=eps, n=10, d=d, oracle=oracle)
    lr = p.local_randomizer
    reps = sweep_reports(lr, range(d), 100, np.random.default_rng(3))
    r = worst_case_log_ratio(lr, reps, range(d))
    assert r <= eps + 1e-12
    assert r > eps - 0.05  # the worst report is reached (sharp mechanisms)


@pytest.mark.parametrize("eps", EPS)
def test_ldp_harmony_exact_ratio(eps):
    p = protocol("ldp_harmony", epsilon=eps, n=10)
    lr = p.local_randomizer
    inputs = [0.0, 0.25, 0.5, 1.0]
    reps = sweep_reports(lr, inputs, 200, np.random.default_rng(4))
    assert worst_case_log_ratio(lr, reps, inputs) == pytest.approx(eps, abs=1e-12)
    # interior inputs are strictly less extreme
    assert worst_case_log_ratio(lr, reps, [0.25, 0.75]) < eps


# ------------------------------------------------------------------------------ local utility

def test_ldp_rr_unbiased_and_variance_closed_form():
    eps, n, c = 0.7, 5000, 1234
    p = protocol("ldp_rr", epsilon=eps, n=n)
    e = math.exp(eps)
    assert p.variance(n) == pytest.approx(n * e / (e - 1) ** 2)
    bits = np.zeros(n, dtype=np.int8)
    bits[:c] = 1
    rng = np.random.default_rng(10)
    sim = np.array([simulate(p, bits, rng).values[0] for _ in range(4000)])
    _mean_band(sim, c, p.variance(n))
    _var_band(sim, p.variance(n))
    full = np.array([run(p, bits, rng).values[0] for _ in range(300)])  # encoder path, same law
    _mean_band(full, c, p.variance(n))
    _var_band(full, p.variance(n))


def test_ldp_krr_unbiased_variance_and_average():
    eps, n, d = 1.0, 4000, 5
    p = protocol("ldp_krr", epsilon=eps, n=n, d=d)
    counts = np.array([2000, 1000, 600, 400, 0])
    values = np.repeat(np.arange(d), counts)
    rng = np.random.default_rng(11)
    sim = np.stack([simulate(p, values, rng).values for _ in range(3000)])
    var = p.item_variance(n, counts)
    for j in range(d):
        _mean_band(sim[:, j], counts[j], var[j])
        _var_band(sim[:, j], var[j])
    # variance(n, value) is one item's variance; at value = n/d the exact average of the
    # per-item variances (affine in the count, sum of counts = n)
    assert p.variance(n, counts[0]) == pytest.approx(float(var[0]), rel=1e-12)
    assert p.variance(n, n / d) == pytest.approx(float(np.mean(var)), rel=1e-12)
    full = np.stack([run(p, values, rng).values for _ in range(200)])
    for j in range(d):
        _mean_band(full[:, j], counts[j], var[j])
    # stderr is the plug-in of the closed form
    est = run(p, values, rng)
    assert np.allclose(est.stderr, np.sqrt(p.item_variance(n, np.clip(est.values, 0, n))))


def test_ldp_oracle_counts_are_n_times_fractions():
    eps, n, d = 2.0, 3000, 8
    p = protocol("ldp_oracle", epsilon=eps, n=n, d=d, oracle="olh")
    rng = np.random.default_rng(12)
    values = rng.integers(0, d, n)
    counts = np.bincount(values, minlength=d)
    sim = np.stack([simulate(p, values, rng).values for _ in range(1500)])
    fvar = np.array([p.oracle.variance(n, c / n) for c in counts]) * n**2
    for j in range(d):
        _mean_band(sim[:, j], counts[j], fvar[j])
        _var_band(sim[:, j], fvar[j])


def test_ldp_harmony_unbiased_and_variance():
    eps, n = 1.0, 2000
    p = protocol("ldp_harmony", epsilon=eps, n=n)
    rng = np.random.default_rng(13)
    x = np.clip(rng.normal(0.5, 0.25, n), 0, 1)
    truth = float(x.sum())
    var = p.sum_variance(x)
    C = (math.e + 1) / (math.e - 1)
    assert var == pytest.approx((n * C**2 - np.sum((2 * x - 1) ** 2)) / 4)
    assert var <= p.variance(n)
    sim = np.array([simulate(p, x, rng).values[0] for _ in range(3000)])
    _mean_band(sim, truth, var)
    _var_band(sim, var)
    full = np.array([run(p, x, rng).values[0] for _ in range(300)])
    _mean_band(full, truth, var)
    _var_band(full, var)
    est = run(p, x, rng)
    assert est.stderr[0] ** 2 >= var * 0.99  # plug-in bound is conservative


# ------------------------------------------------------------------------------ central noise

def test_cdp_count_noise_law_simulated_and_released():
    eps, n, c = 0.9, 500, 123
    p = protocol("cdp_laplace_count", epsilon=eps, n=n)
    a = math.exp(-eps)
    assert p.variance(n) == pytest.approx(2 * a / (1 - a) ** 2)
    assert p.noise_pmf(0)[()] == pytest.approx((1 - a) / (1 + a))
    rng = np.random.default_rng(20)
    data = np.array([n - c, c])
    sim = np.array([p.simulate_statistic(data, rng)[0] for _ in range(20000)]) - c
    _chi2_noise(sim, p.noise_pmf)
    # release path: aggregate() draws from the OS; same law (p-value floor 1e-6: not seedable)
    bits = np.zeros(n, dtype=np.int8)
    bits[:c] = 1
    msgs = p.encode(bits, rng)
    rel = np.array([p.aggregate(msgs)[0] for _ in range(6000)]) - c
    _chi2_noise(rel, p.noise_pmf)
    _mean_band(rel.astype(float), 0.0, p.variance(n))


def test_cdp_hist_sensitivity_and_noise_law():
    eps, n, d = 1.0, 1000, 50
    p = protocol("cdp_laplace_hist", epsilon=eps, n=n, d=d)
    assert p.sensitivity == 2
    a = math.exp(-eps / 2)
    assert p.variance(n) == pytest.approx(2 * a / (1 - a) ** 2)
    q = protocol("cdp_laplace_hist", epsilon=eps, n=n, d=d, neighbouring="add_remove_one")
    assert q.sensitivity == 1 and q.privacy().neighbouring == "add_remove_one"
    rng = np.random.default_rng(21)
    values = rng.integers(0, d, n)
    counts = np.bincount(values, minlength=d)
    sim = np.concatenate([p.simulate_statistic(counts, rng) - counts for _ in range(400)])
    _chi2_noise(sim, p.noise_pmf)
    rel = np.concatenate([p.aggregate(p.encode(values, rng)) - counts for _ in range(100)])
    _chi2_noise(rel, p.noise_pmf)
    # the ratio of neighbouring output probabilities is exactly e^eps at the worst point:
    # counts move by +1/-1 in two bins -> product of two ratios e^{eps/2}
    z = np.arange(-30, 31)
    r = np.log(p.noise_pmf(z[1:]) / p.noise_pmf(z[:-1]))
    assert np.max(np.abs(r)) * 2 == pytest.approx(eps, rel=1e-12)


def test_cdp_sum_fixed_point_exact_and_noise():
    eps, n = 0.5, 10_000
    p = protocol("cdp_laplace_sum", epsilon=eps, n=n)
    assert p.k <= math.ceil(math.log2(1 / eps)) - 40 or p.k == math.ceil(math.log2(n + 1)) - 61
    rng = np.random.default_rng(22)
    x = rng.random(n)
    code_sum = int(p.summarize(x)[0])
    # the code sum is the exact integer sum of round(x / 2^k)
    exact = sum(round(v * 2 ** (-p.k)) for v in x.tolist())
    assert code_sum == exact
    assert abs(math.ldexp(code_sum, p.k) - math.fsum(x.tolist())) <= n * 2.0 ** (p.k - 1)
    # variance = discrete Laplace on the grid, within 2^-35 relative of 2/eps^2
    assert p.variance(n) == pytest.approx(2 / eps**2, rel=2**-35)
    sim = np.array([p.estimate(p.simulate_statistic(np.array([code_sum]), rng), n).values[0]
                    for _ in range(4000)])
    _mean_band(sim, math.ldexp(code_sum, p.k), p.variance(n))
    _var_band(sim, p.variance(n))
    rel = np.array([run(p, x).values[0] for _ in range(1000)])  # OS noise
    _mean_band(rel, math.ldexp(code_sum, p.k), p.variance(n))
    _var_band(rel, p.variance(n), p=1e-7)


@pytest.mark.parametrize("eps,n", [(0.9, 10**6), (0.5, 10**4), (0.1, 10**6), (0.01, 10**6), (1.0, 10**9)])
def test_cdp_sum_variance_excess_is_twice_the_grid(eps, n):
    """Var = 2a/(1-a)^2 g^2 with a = e^{-eps/D_g}, D_g = 1/g + 1: strictly between 2/eps^2 and
    2 (1+g)^2/eps^2, relative excess ~ 2g. (The docstring once said "within 2^-36 of 2/eps^2,
    g ~ 2^-37 or finer": false at eps = 0.1 (2^-35), eps = 0.01 (2^-32) and n = 10^9 (2^-30).)"""
    p = protocol("cdp_laplace_sum", epsilon=eps, n=n)
    g = 2.0**p.k
    assert p.mechanism.grid_sensitivity == 2 ** (-p.k) + 1
    x = eps / p.mechanism.grid_sensitivity
    # 2a/(1-a)^2 = 1/(2 sinh^2(x/2)), a = e^-x (the sinh form has no cancellation at a ~ 1)
    assert p.variance(n) == pytest.approx(g**2 / (2 * math.sinh(x / 2) ** 2), rel=1e-12)
    assert 2 / eps**2 < p.variance(n) <= 2 * (1 + g) ** 2 / eps**2 * (1 + 1e-15)
    assert (p.variance(n) * eps**2 / 2 - 1) / (2 * g) == pytest.approx(1.0, rel=1e-3)
    expected_k = max(math.ceil(math.log2(1 / eps)) - 40, math.ceil(math.log2(n + 1)) - 61)
    assert p.k == expected_k


def test_cdp_sum_overflow_guard_and_large_n_grid():
    p = protocol("cdp_laplace_sum", epsilon=0.9, n=10**7)
    assert p.max_users >= 10**7
    assert (2**62) > p.max_users * 2 ** (-p.k)
    small = protocol("cdp_laplace_sum", epsilon=1.0, n=10, granularity_exponent=-60)
    with pytest.raises(ValidationError, match="overflow"):
        small.summarize(np.ones(8))


def test_cdp_release_draws_from_the_exact_sampler(monkeypatch):
    """The curator's release path calls the exact CKS20 sampler (central.exact.discrete_laplace,
    OS randomness, rational scale) once per released coordinate, with the documented scale, and
    adds its integer to the exact aggregate. (The chi-square tests above check the law; a float
    sampler of the same law would pass them, this one would not.)"""
    from fractions import Fraction

    from shuffledp.central import exact

    calls = []

    def fake(scale, *args, **kwargs):
        calls.append(scale)
        return 7

    monkeypatch.setattr(exact, "discrete_laplace", fake)
    rng = np.random.default_rng(0)
    eps = 0.9
    c = protocol("cdp_laplace_count", epsilon=eps, n=10)
    bits = np.array([1, 0, 1, 1, 0, 0, 0, 0, 0, 1])
    assert c.aggregate(c.encode(bits, rng)).tolist() == [4 + 7]
    assert calls == [Fraction(1) / Fraction(eps)] and isinstance(calls[0], Fraction)
    calls.clear()
    h = protocol("cdp_laplace_hist", epsilon=eps, n=10, d=3)
    vals = np.array([0, 1, 1, 2, 2, 2, 0, 0, 0, 1])
    assert h.aggregate(h.encode(vals, rng)).tolist() == [4 + 7, 3 + 7, 3 + 7]
    assert calls == [Fraction(2) / Fraction(eps)] * 3
    calls.clear()
    sm = protocol("cdp_laplace_sum", epsilon=eps, n=10)
    x = np.linspace(0, 1, 10)
    assert sm.aggregate(sm.encode(x, rng)).tolist() == [int(sm.summarize(x)[0]) + 7]
    assert calls == [Fraction(2 ** (-sm.k) + 1) / Fraction(eps)]


def test_production_run_refuses_seed_and_works_without():
    p = protocol("cdp_laplace_count", epsilon=1.0, n=100)
    bits = np.ones(100, dtype=np.int8)
    with pytest.raises(ValidationError):
        run(p, bits, 1, production=True)
    est = run(p, bits, production=True)
    assert est.values[0] == int(est.values[0])


# ------------------------------------------------------------------------------ bad input

def test_bad_inputs():
    rr = protocol("ldp_rr", epsilon=1.0, n=10)
    with pytest.raises(ValidationError):
        rr.encode(np.array([0.0, 1.0]), np.random.default_rng(0))
    with pytest.raises(ValidationError):
        rr.encode(np.array([0, 2]), np.random.default_rng(0))
    with pytest.raises(ValidationError):
        rr.aggregate({"z": np.zeros(3, dtype=np.int8)})
    with pytest.raises(ValidationError):
        rr.estimate(np.array([1, 2]), 10)
    krr = protocol("ldp_krr", epsilon=1.0, n=10, d=4)
    with pytest.raises(ValidationError):
        krr.encode(np.array([0, 4]), np.random.default_rng(0))
    with pytest.raises(ValidationError):
        krr.simulate_statistic(np.array([1, 2, 3]), np.random.default_rng(0))
    with pytest.raises(ValidationError, match="needs the parameter 'd'") as missing:
        protocol("ldp_krr", epsilon=1.0, n=10)  # d is required
    assert missing.value.parameter == "d"
    with pytest.raises(ValidationError):
        protocol("ldp_krr", epsilon=1.0, n=10, d=1)
    with pytest.raises(ValidationError, match="unknown frequency oracle"):
        protocol("ldp_oracle", epsilon=1.0, n=10, d=4, oracle="nope")
    with pytest.raises(ValidationError):
        protocol("ldp_rr", epsilon=-1.0, n=10)
    h = protocol("ldp_harmony", epsilon=1.0, n=10)
    with pytest.raises(ValidationError):
        h.encode(np.array([0.5, 1.5]), np.random.default_rng(0))
    with pytest.raises(ValidationError):
        h.aggregate({"s": np.array([1, 0], dtype=np.int8)})
    s = protocol("cdp_laplace_sum", epsilon=1.0, n=10)
    with pytest.raises(ValidationError):
        s.encode(np.array([np.nan]), np.random.default_rng(0))
    hist = protocol("cdp_laplace_hist", epsilon=1.0, n=10, d=3)
    with pytest.raises(ValidationError):
        hist.aggregate({"x": np.array([0, 3])})
    with pytest.raises(ValidationError):
        protocol("cdp_laplace_hist", epsilon=1.0, n=10, d=3, neighbouring="swap")
    c = protocol("cdp_laplace_count", epsilon=1.0, n=10)
    with pytest.raises(ValidationError):
        c.encode(np.array([True, 3]), np.random.default_rng(0))
