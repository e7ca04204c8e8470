"""SUE (basic one-time RAPPOR) and OUE: privacy (exact), utility (unbiased, exact variance), contract."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from shuffledp.core import ValidationError
from shuffledp.local import concat_rows, frequency_oracle, n_rows, take_rows
from shuffledp.local.bits import unpack_rows
from shuffledp.local.packed import pack_rows
from shuffledp.local.unary import OptimizedUnaryEncoding, SymmetricUnaryEncoding, UnaryEncoding
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band

NAMES = ["sue", "oue"]


def _exact_log_ratio(m: UnaryEncoding) -> float:
    """ln[p(1-q)/(q(1-p))] from the exact dyadic fractions."""
    p, q = Fraction(m.p), Fraction(m.q)
    r = p * (1 - q) / (q * (1 - p))
    return math.log1p(float(r - 1))


def test_registry_and_parameters():
    assert isinstance(frequency_oracle("sue", 1.0, 10), SymmetricUnaryEncoding)
    assert isinstance(frequency_oracle("OUE", 1.0, 10), OptimizedUnaryEncoding)
    sue, oue = frequency_oracle("sue", 1.0, 10), frequency_oracle("oue", 1.0, 10)
    e = math.exp(1.0)
    assert sue.p == pytest.approx(math.sqrt(e) / (math.sqrt(e) + 1), abs=2 ** -sue.precision)
    assert sue.p + sue.q == 1.0  # exactly symmetric after rounding
    assert oue.p == 0.5 and oue.q == pytest.approx(1 / (e + 1), abs=2 ** -oue.precision)
    for m in (sue, oue):
        # rounding direction: q up, p down -> ratio can only shrink
        assert m.q >= m.q_ideal and m.p <= m.p_ideal
        assert m.effective_epsilon <= m.epsilon
        assert m.effective_epsilon > m.epsilon - 1e-6
        assert m.privacy().eps == m.effective_epsilon and m.privacy().delta == 0.0
        assert m.privacy().model == "local" and m.privacy().neighbouring == "replace_one"
        assert "UnaryEncoding" in repr(m)


def test_spec_worked_examples():
    # spec A.2: OUE eps=ln3: p=1/2, q=1/4; bit count 400 of n=1000 -> 600; Var* = 3000, exact (n_i=600) 3600.
    # Our q is 1/4 rounded up on the 2^-K grid (ln 3 is not exact in floating point): agreement to 1e-6.
    oue = frequency_oracle("oue", math.log(3), 1000)
    assert oue.p == 0.5 and oue.q == pytest.approx(0.25, abs=1e-7)
    # the other bits at their f = 0 mean n q (a total that n = 1000 reports can produce)
    assert oue.estimate(np.concatenate([[400], np.full(999, 250)]), 1000).values[0] * 1000 == pytest.approx(600, abs=1e-3)
    assert oue.variance(1000, 0.0) * 1000**2 == pytest.approx(3000, rel=1e-5)
    assert oue.variance(1000, 0.6) * 1000**2 == pytest.approx(3600, rel=1e-5)
    # SUE eps=2 ln3: p=3/4, q=1/4, Var* = 750
    sue = frequency_oracle("sue", 2 * math.log(3), 1000)
    assert sue.p == pytest.approx(0.75, abs=1e-7) and sue.q == pytest.approx(0.25, abs=1e-7)
    assert sue.variance(1000, 0.0) * 1000**2 == pytest.approx(750, rel=1e-5)
    # Var* closed forms of the spec's table, counts
    for eps in (0.5, 1.0, 4.0):
        e = math.exp(eps)
        assert frequency_oracle("oue", eps, 8).variance(1, 0.0) == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-5)
        assert frequency_oracle("sue", eps, 8).variance(1, 0.0) == pytest.approx(math.sqrt(e) / (math.sqrt(e) - 1) ** 2,
                                                                                 rel=1e-5)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("eps", [1e-4, 0.3, 1.0, math.log(3), 4.0, 12.0, 30.0, 800.0])
@pytest.mark.parametrize("precision", [None, 8, 20, 48])
def test_dyadic_rounding_is_exact_and_private(name, eps, precision):
    try:
        m = frequency_oracle(name, eps, 16, precision=precision)
    except ValidationError as err:  # only a too-coarse grid for a tiny eps may be refused
        assert precision == 8 and eps == 1e-4 and "too small" in str(err)
        return
    k = m.precision
    for v in (m.p, m.q):
        fr = Fraction(v)
        assert fr.denominator <= 2**k and (fr * 2**k).denominator == 1  # on the 2^-K grid
    assert 0 < m.q < m.p < 1
    assert m.q >= m.q_ideal and m.p <= m.p_ideal
    eff = _exact_log_ratio(m)
    assert eff <= eps and m.effective_epsilon <= eps
    assert m.effective_epsilon == pytest.approx(eff, rel=1e-11, abs=1e-15) and m.effective_epsilon >= eff
    # independent check in exact arithmetic: R <= e^(effective eps) (Fraction of the float exp)
    r = Fraction(m.p) * (1 - Fraction(m.q)) / (Fraction(m.q) * (1 - Fraction(m.p)))
    assert r <= Fraction(math.exp(m.effective_epsilon)) or m.effective_epsilon == eps
    if precision is None and eps <= 12:
        assert eps - eff < 1e-6  # the default grid loses (almost) nothing


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("eps,d", [(0.5, 2), (1.0, 5), (4.0, 17), (1.0, 64)])
def test_exact_privacy_sweep(name, eps, d, rng):
    """Reports produced through the full client path, every pair of inputs: ratio <= e^eps."""
    m = frequency_oracle(name, eps, d)
    reports = sweep_reports(m, range(d), 100, rng)
    worst = worst_case_log_ratio(m, reports, range(d))
    assert worst <= m.effective_epsilon + 1e-9 and worst <= eps + 1e-9
    # with 100 reports per input, some report has y_x = 1, y_x' = 0 for some pair: the bound is attained
    assert worst == pytest.approx(m.effective_epsilon, abs=1e-9)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("d", [2, 3, 7, 9])
def test_exhaustive_output_space(name, d):
    """All 2^d reports: each input's probabilities sum to 1, and the worst ratio is exactly effective_epsilon."""
    m = frequency_oracle(name, 1.3, d)
    allr = {"bits": pack_rows(np.array(list(itertools.product([0, 1], repeat=d)), dtype=np.uint8))}
    probs = np.stack([m.probabilities(allr, x) for x in range(d)])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-12)
    worst = worst_case_log_ratio(m, allr, range(d))
    assert worst <= m.effective_epsilon and worst == pytest.approx(m.effective_epsilon, abs=1e-10)
    # product argument: only bits x and x' differ in law, every other factor cancels
    lp = np.log(probs)
    p, q = m.p, m.q
    bits = unpack_rows(allr["bits"], d).astype(bool)
    for x, x2 in [(0, 1), (0, d - 1)]:
        if x == x2:
            continue
        f = lambda b, t: np.where(b, math.log(p) if t else math.log(q), math.log1p(-p) if t else math.log1p(-q))
        expect = f(bits[:, x], True) + f(bits[:, x2], False) - f(bits[:, x], False) - f(bits[:, x2], True)
        np.testing.assert_allclose(lp[x] - lp[x2], expect, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_product_bound_at_large_d(name, rng):
    """d = 1024: probabilities underflow, log_probabilities do not; the bound holds over all 1024 inputs."""
    d = 1024
    m = frequency_oracle(name, 1.0, d)
    reports = m.randomize(rng.integers(0, d, 40), rng)
    lp = np.stack([m.log_probabilities(reports, x) for x in range(d)])
    assert np.isfinite(lp).all()
    assert (lp.max(axis=0) - lp.min(axis=0)).max() == pytest.approx(m.effective_epsilon, abs=1e-9)
    assert (lp.max(axis=0) - lp.min(axis=0)).max() <= 1.0 + 1e-12


@pytest.mark.parametrize("name", NAMES)
def test_randomize_matches_probabilities(name, rng):
    """Empirical law of the whole report vector for each input equals probabilities() (chi-square)."""
    d, n = 3, 20000
    m = frequency_oracle(name, 1.0, d)
    allr = {"bits": pack_rows(np.array(list(itertools.product([0, 1], repeat=d)), dtype=np.uint8))}
    codes = allr["bits"][:, 0]
    for x in range(d):
        rep = m.randomize(np.full(n, x), rng)["bits"][:, 0]
        obs = np.array([(rep == c).sum() for c in codes])
        exp = m.probabilities(allr, x) * n
        assert stats.chisquare(obs, exp).pvalue > 1e-4 / d


@pytest.mark.parametrize("name", NAMES)
def test_bit_marginals_large_d(name, rng):
    """Bit x is Bernoulli(p), every other bit Bernoulli(q), at d = 300 (not a multiple of 64)."""
    d, n, x = 300, 20000, 137
    m = frequency_oracle(name, 2.0, d)
    bits = unpack_rows(m.randomize(np.full(n, x), rng)["bits"], d).astype(np.float64)
    rate = bits.mean(axis=0)
    z_true = (rate[x] - m.p) / math.sqrt(m.p * (1 - m.p) / n)
    others = np.delete(rate, x)
    z_other = (others - m.q) / math.sqrt(m.q * (1 - m.q) / n)
    assert abs(z_true) < mean_z_bound()
    assert np.abs(z_other).max() < mean_z_bound(1e-4 / d)


@pytest.mark.parametrize("name,eps,d", [("sue", 1.0, 8), ("oue", 1.0, 13), ("oue", 4.0, 8), ("sue", 0.5, 70)])
def test_unbiased_and_variance(name, eps, d, rng):
    """R = 4000 independent rounds: mean within a normal band, s^2 / Var within the chi-square band."""
    n, R = 600, 4000
    m = frequency_oracle(name, eps, d)
    x = np.repeat(np.arange(d), n // d + 1)[:n]
    x[: n // 2] = 0  # skewed: f_0 ~ 0.5
    f = np.bincount(x, minlength=d) / n
    rep = m.randomize(np.tile(x, R), rng)  # R * n users at once, split into rounds below
    stats_ = np.stack([m.aggregate(take_rows(rep, slice(r * n, (r + 1) * n))) for r in range(R)])
    ests = np.stack([m.estimate(s, n).values for s in stats_])
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    for i in (0, d - 1):
        var = m.variance(n, f[i])
        z = (ests[:, i].mean() - f[i]) / math.sqrt(var / R)
        assert abs(z) < mean_z_bound()
        assert lo <= ests[:, i].var(ddof=1) / var <= hi


@pytest.mark.parametrize("name", NAMES)
def test_simulate_statistic_matches(name, rng):
    d, eps = 6, 1.0
    m = frequency_oracle(name, eps, d)
    counts = np.array([50, 0, 10, 5, 5, 30])
    x = np.repeat(np.arange(d), counts)
    R = 3000
    a = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(R)])
    b = np.array([m.simulate_statistic(counts, rng) for _ in range(R)])
    n = counts.sum()
    mean = counts * m.p + (n - counts) * m.q
    var = counts * m.p * (1 - m.p) + (n - counts) * m.q * (1 - m.q)
    for s in (a, b):
        assert np.all(np.abs(s.mean(0) - mean) < mean_z_bound(1e-4 / d) * np.sqrt(var / R))
        lo, hi = variance_ratio_band(R, 1e-4 / d)
        assert np.all((lo <= s.var(0, ddof=1) / var) & (s.var(0, ddof=1) / var <= hi))
    # same law cell by cell (two-sample chi-square on item 0's counts)
    tab = np.stack([np.bincount(a[:, 0], minlength=61), np.bincount(b[:, 0], minlength=61)])
    tab = tab[:, tab.sum(0) >= 20]
    assert stats.chi2_contingency(tab)[1] > 1e-4
    # n-independent: 10^9 users in one call
    big = m.simulate_statistic(np.full(d, 10**9 // d), rng)
    assert big.shape == (d,) and big.dtype == np.int64


@pytest.mark.parametrize("name", NAMES)
def test_mergeable_and_shuffle_invariant(name, rng):
    m = frequency_oracle(name, 1.0, 77)
    r1 = m.randomize(rng.integers(0, 77, 1000), rng)
    r2 = m.randomize(rng.integers(0, 77, 517), rng)
    both = concat_rows([r1, r2])
    assert n_rows(both) == 1517
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(r1) + m.aggregate(r2))
    perm = rng.permutation(1517)
    np.testing.assert_array_equal(m.aggregate(take_rows(both, perm)), m.aggregate(both))
    np.testing.assert_array_equal(m.aggregate(both), unpack_rows(both["bits"], 77).sum(axis=0))
    assert m.validate_reports(both)["bits"] is both["bits"]


@pytest.mark.parametrize("name", NAMES)
def test_single_user_and_empty(name, rng):
    m = frequency_oracle(name, 1.0, 10)
    r = m.randomize(np.array([3]), rng)
    assert r["bits"].shape == (1, 2) and r["bits"].dtype == np.uint8
    assert not (r["bits"][0, 1] >> 2)  # padding zero
    s = m.aggregate(r)
    est = m.estimate(s, 1)
    assert est.values.shape == (10,) and est.n == 1 and np.isfinite(est.stderr).all()
    assert m.randomize(7, rng)["bits"].shape == (1, 2)  # a scalar is one user
    e = m.randomize(np.array([], dtype=np.int64), rng)
    assert e["bits"].shape == (0, 2) and not m.aggregate(e).any()
    assert m.probabilities(r, 3).shape == (1,)
    out = m.run(np.arange(10), rng)
    assert out.n == 10


@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], [np.nan], ["a"], [True], [[1, 2]]])
@pytest.mark.parametrize("name", NAMES)
def test_bad_values(name, bad, rng):
    m = frequency_oracle(name, 1.0, 10)
    with pytest.raises(ValidationError, match="values"):
        m.randomize(np.array(bad), rng)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("eps,d,kw", [(0, 4, {}), (-1, 4, {}), (float("nan"), 4, {}), (float("inf"), 4, {}),
                                      (1.0, 1, {}), (1.0, 2.5, {}), (1.0, True, {}), (1.0, 4, {"precision": 7}),
                                      (1.0, 4, {"precision": 49}), (1.0, 4, {"precision": 20.0}),
                                      (1e-9, 4, {"precision": 16})])
def test_bad_params(name, eps, d, kw):
    with pytest.raises(ValidationError):
        frequency_oracle(name, eps, d, **kw)


def test_bad_param_messages():
    with pytest.raises(ValidationError, match="epsilon"):
        frequency_oracle("oue", 0.0, 4)
    with pytest.raises(ValidationError, match="d must be an integer >= 2"):
        frequency_oracle("sue", 1.0, 1)
    with pytest.raises(ValidationError, match="too small for the probability grid"):
        frequency_oracle("sue", 1e-9, 4, precision=16)


@pytest.mark.parametrize("name", NAMES)
def test_bad_reports_and_estimate_inputs(name, rng):
    m = frequency_oracle(name, 1.0, 10)
    good = m.randomize(np.arange(10), rng)
    for bad in ({"y": good["bits"]}, {"bits": good["bits"].astype(np.int64)}, {"bits": good["bits"][:, :1]},
                {"bits": good["bits"][0]}, {"bits": good["bits"], "extra": good["bits"]}):
        with pytest.raises(ValidationError):
            m.validate_reports(bad)
    padded = good["bits"].copy()
    padded[0, 1] |= 0b100  # bit 10 does not exist
    with pytest.raises(ValidationError, match="padding"):
        m.validate_reports({"bits": padded})
    with pytest.raises(ValidationError):
        m.probabilities({"bits": padded}, 0)
    with pytest.raises(ValidationError):
        m.probabilities(good, 10)
    with pytest.raises(ValidationError):
        m.aggregate({"bits": good["bits"][:, :1]})
    with pytest.raises(ValidationError, match="statistic"):
        m.estimate(np.zeros(9), 10)
    with pytest.raises(ValidationError, match="n must be"):
        m.estimate(np.zeros(10), 0)
    with pytest.raises(ValidationError, match="value must be"):
        m.variance(10, 1.5)
    with pytest.raises(ValidationError, match="n must be"):
        m.variance(0, 0.1)
    with pytest.raises(ValidationError):
        m.simulate_statistic(np.array([1, 2]), rng)
    np.testing.assert_allclose(m.variance(10, np.array([0.0, 0.5])), [m.variance(10, 0.0), m.variance(10, 0.5)])
