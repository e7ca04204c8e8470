import itertools
import math

import numpy as np
import pytest
from scipy import stats

from shuffledp.core import ValidationError
from shuffledp.local import concat_rows, frequency_oracle, n_rows
from shuffledp.local.rappor import Rappor, bloom_hash, rappor_f_for_epsilon
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band


def _pack(bits: np.ndarray) -> np.ndarray:
    return np.packbits(bits.astype(np.uint8), axis=1, bitorder="little")


def test_parameters_and_registry():
    m = frequency_oracle("rappor", 1.0, 1024)
    assert isinstance(m, Rappor) and (m.k, m.h, m.m, m.p, m.q) == (64, 2, 64, 0.5, 0.75)
    # f solved from eps_inf = 2h ln((1 - f/2)/(f/2)), rounded up to the 2^-20 grid
    raw = 2 / (1 + math.exp(1.0 / 4))
    assert m.f * 2**20 == int(m.f * 2**20) and raw <= m.f < raw + 2**-20
    assert m.epsilon_inf <= 1.0 and m.epsilon_inf == pytest.approx(1.0, abs=1e-4)
    assert m.epsilon_one < m.epsilon_inf
    assert m.privacy().eps == 1.0 and m.privacy().model == "local"
    for eps, h in [(0.1, 1), (2.0, 3), (8.0, 2)]:
        f = rappor_f_for_epsilon(eps, h)
        assert 2 * h * math.log((1 - f / 2) / (f / 2)) <= eps
        assert 2 * h * math.log((1 - (f - 2**-20) / 2) / ((f - 2**-20) / 2)) > eps  # smallest on the grid


def test_spec_worked_example():
    # spec A.3: f=.5, p=.5, q=.75, h=2 -> q11=0.6875, p01=0.5625, eps_inf=4 ln 3, eps_1=1.07429
    m = Rappor(4 * math.log(3), 10, k=16, h=2, m=2, f=0.5, p=0.5, q=0.75)
    assert (m.q11, m.p01) == (0.6875, 0.5625)
    assert m.epsilon_inf == pytest.approx(4 * math.log(3))
    assert m.epsilon_one == pytest.approx(1.07429, abs=1e-5)
    # cohort N=1000, bit count 600 -> t = 37.5/0.125 = 300, i.e. fraction 0.3
    stat = np.zeros((2, 17), dtype=np.int64)
    stat[:, 16] = 1000
    stat[:, 0] = 600
    rows, y = m.debiased_bits(stat)
    assert rows.tolist() == [0, 1] and y[0, 0] * 1000 == pytest.approx(300)
    with pytest.raises(ValidationError):  # f too small for the requested epsilon
        Rappor(1.0, 10, f=0.5)


def _privacy_mech() -> Rappor:
    return Rappor(1.5, 6, k=8, h=2, m=3, p=0.25, q=0.75)


def test_exact_privacy_permanent():
    """Memoized PRR: exact worst ratio over all (cohort, B') and all pairs of inputs is eps_inf <= eps."""
    m = _privacy_mech()
    d = m.d
    B = np.array(list(itertools.product([0, 1], repeat=m.k)))
    prr = _pack(B)
    worst = 0.0
    expect = 0.0
    lr = math.log((1 - m.f / 2) / (m.f / 2))
    for c in range(m.m):
        coh = np.full(len(B), c)
        probs = np.stack([m.permanent_probabilities(prr, coh, x) for x in range(d)])
        np.testing.assert_allclose(probs.sum(axis=1), 1.0)
        worst = max(worst, float(np.max(np.log(probs.max(0)) - np.log(probs.min(0)))))
        pos = m.bloom_positions(np.full(d, c), np.arange(d))
        sets = [set(p) for p in pos.tolist()]
        expect = max(expect, max(len(a ^ b) for a in sets for b in sets) * lr)
    assert worst == pytest.approx(expect)
    assert worst <= m.epsilon_inf + 1e-12 <= m.epsilon + 1e-12
    assert expect == pytest.approx(m.epsilon_inf)  # some pair of filters is disjoint with h bits each


def test_exact_privacy_one_report(rng):
    """One report (PRR marginalised, IRR): exact ratio over every (cohort, S) <= eps_1 <= eps."""
    m = _privacy_mech()
    S = np.array(list(itertools.product([0, 1], repeat=m.k)))
    allr = {"cohort": np.repeat(np.arange(m.m), len(S)), "bits": _pack(np.tile(S, (m.m, 1)))}
    probs = np.stack([m.probabilities(allr, x) for x in range(m.d)])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    worst = worst_case_log_ratio(m, allr, range(m.d))
    a, b = math.log(m.q11 / m.p01), math.log((1 - m.p01) / (1 - m.q11))
    expect = 0.0
    for c in range(m.m):
        sets = [set(p) for p in m.bloom_positions(np.full(m.d, c), np.arange(m.d)).tolist()]
        expect = max(expect, max(len(s1 - s2) * a + len(s2 - s1) * b for s1 in sets for s2 in sets))
    assert worst == pytest.approx(expect)
    assert worst <= m.epsilon_one + 1e-12 and m.epsilon_one <= m.epsilon
    # full client path (hashing, cohorts, PRR, IRR), also with memoized users
    rep = sweep_reports(m, range(m.d), 300, rng)
    assert worst_case_log_ratio(m, rep, range(m.d)) <= m.epsilon_one + 1e-12
    rep_u = m.randomize(np.repeat(np.arange(m.d), 50), rng, users=np.arange(50 * m.d))
    assert worst_case_log_ratio(m, rep_u, range(m.d)) <= m.epsilon_one + 1e-12


def test_randomize_matches_probabilities(rng):
    """Empirical law of (cohort, S) for one input equals probabilities() (chi-square)."""
    m = Rappor(2.0, 5, k=4, h=2, m=2, p=0.25, q=0.75)
    N = 100_000
    r = m.randomize(np.full(N, 3), rng)
    S = np.unpackbits(r["bits"], axis=1, count=4, bitorder="little")
    cell = r["cohort"] * 16 + S @ (1 << np.arange(4))
    obs = np.bincount(cell, minlength=32)
    allS = np.array(list(itertools.product([0, 1], repeat=4)))[:, ::-1]  # index = sum S_i 2^i
    idx = allS @ (1 << np.arange(4))
    order = np.argsort(idx)
    bits = _pack(allS[order])
    allr = {"cohort": np.repeat([0, 1], 16), "bits": np.tile(bits, (2, 1))}
    assert stats.chisquare(obs, m.probabilities(allr, 3) * N).pvalue > 1e-4


def test_permanent_law_and_memo(rng):
    m = Rappor(2.0, 5, k=4, h=2, m=2)
    N = 100_000
    prr = m.permanent(np.full(N, 1), rng, np.zeros(N, dtype=np.int64))
    code = np.unpackbits(prr, axis=1, count=4, bitorder="little") @ (1 << np.arange(4))
    allB = (np.arange(16)[:, None] >> np.arange(4)) & 1
    exp = m.permanent_probabilities(_pack(allB), np.zeros(16, dtype=np.int64), 1) * N
    assert stats.chisquare(np.bincount(code, minlength=16), exp).pvalue > 1e-4
    # memo: with the IRR disabled (p=0, q=1) a report *is* the PRR bits
    m2 = Rappor(2.0, 50, k=16, h=2, m=8, p=0.0, q=1.0)
    assert m2.epsilon_one == pytest.approx(m2.epsilon_inf)
    users = np.array([5, 7, 5, 9, 7])
    vals = np.array([3, 3, 3, 4, 8])
    r1 = m2.randomize(vals, rng, users=users)
    np.testing.assert_array_equal(r1["bits"][0], r1["bits"][2])  # same (user, value) within one call
    assert r1["cohort"][1] == r1["cohort"][4]  # same user, different value: same cohort
    r2 = m2.randomize(vals[::-1], rng, users=users[::-1])
    np.testing.assert_array_equal(r2["bits"], r1["bits"][::-1])
    np.testing.assert_array_equal(r2["cohort"], r1["cohort"][::-1])
    # fresh users get fresh PRR: 2000 users with one value are not all identical
    r3 = m2.randomize(np.zeros(2000, dtype=np.int64), rng, users=np.arange(100, 2100))
    assert np.unique(r3["bits"], axis=0).shape[0] > 100
    m2.reset_memo()
    r4 = m2.randomize(vals, rng, users=users)
    assert not np.array_equal(r4["bits"], r1["bits"])
    # with the IRR on, repeated reports of one user vary but their mean reveals only the PRR
    m3 = Rappor(2.0, 50, k=16, h=2, m=8, p=0.25, q=0.75)
    R = 4000
    rep = m3.randomize(np.full(R, 3), rng, users=np.full(R, 11))
    S = np.unpackbits(rep["bits"], axis=1, count=16, bitorder="little").mean(axis=0)
    prr1 = np.unpackbits(m3._memo.prr, axis=1, count=16, bitorder="little")[0]
    expect = np.where(prr1 == 1, m3.q, m3.p)
    assert np.all(np.abs(S - expect) < 5 * np.sqrt(expect * (1 - expect) / R))


def _design_case(kw):
    d = 6
    x = np.repeat(np.arange(d), [1000, 500, 250, 150, 100, 0])
    return Rappor(d=d, k=8, m=4, **kw), x


@pytest.mark.parametrize("kw", [dict(epsilon=2.0, h=2, p=0.25, q=0.75), dict(epsilon=8.0, h=2, p=0.0, q=1.0)])
def test_unbiased_and_variance(kw, rng):
    """Client path: OLS estimates unbiased; empirical variance / (noise + cohort term) in the chi2 band."""
    m, x = _design_case(kw)
    n, R = x.size, 4000
    f = np.bincount(x, minlength=m.d) / n
    ests = np.array([m.estimate(m.aggregate(m.randomize(x, rng)), n).values for _ in range(R)])
    V = m.variance_items(n, f)
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    z = (ests.mean(0) - f) / np.sqrt(V / R)
    assert np.all(np.abs(z) < mean_z_bound())
    ratio = ests.var(0, ddof=1) / V
    assert np.all((lo <= ratio) & (ratio <= hi)), ratio


def test_cohort_sampling_term_matters(rng):
    """Without the cohort sampling term the theory would miss (the variance test can fail)."""
    m, x = _design_case(dict(epsilon=8.0, h=2, p=0.0, q=1.0))
    n, R = x.size, 4000
    c = np.bincount(x, minlength=m.d)
    ests = np.array([m.estimate(m.simulate_statistic(c, rng), n).values for _ in range(R)])
    D = m.design()
    f = c / n
    T = np.einsum("jkm,m->jk", D.X, f)
    w = (m.p01 * (1 - m.p01) + T * m._kappa) * m.m / (m.delta**2 * n)
    noise_only = np.einsum("sjk,jk->s", D.A2, w)
    lo, hi = variance_ratio_band(R)
    emp = ests.var(0, ddof=1)
    assert np.any(emp / noise_only > hi)
    full = m.variance_items(n, f)
    assert np.all((lo <= emp / full) & (emp / full <= hi))


def test_simulate_statistic_matches(rng):
    m = Rappor(1.5, 6, k=8, h=2, m=3, p=0.25, q=0.75)
    counts = np.array([60, 0, 25, 10, 5, 0])
    x = np.repeat(np.arange(6), counts)
    R = 1500
    a = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(R)]).reshape(R, -1).astype(float)
    b = np.array([m.simulate_statistic(counts, rng) for _ in range(R)]).reshape(R, -1).astype(float)
    se = np.sqrt(a.var(0) / R + b.var(0) / R) + 1e-12
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)
    va, vb = a.var(0, ddof=1), b.var(0, ddof=1)
    keep = va > 0
    r = vb[keep] / va[keep]
    lo = stats.f.ppf(1e-4 / (2 * keep.sum()), R - 1, R - 1)
    assert np.all((lo <= r) & (r <= 1 / lo))
    s = m.simulate_statistic(counts, rng)
    assert s[:, m.k].sum() == counts.sum() and np.all(s[:, : m.k] <= s[:, m.k:])


def test_variance_average_and_stderr(rng):
    m = Rappor(2.0, 12, k=16, h=2, m=4)
    per_item = [m.variance(1000, 0.2, item=s) for s in range(m.d)]
    assert m.variance(1000, 0.2) == pytest.approx(np.mean(per_item), rel=1e-10)
    g = np.full(m.d, 0.8 / 11)
    g[3] = 0.2
    assert m.variance(1000, 0.2, item=3) == pytest.approx(m.variance_items(1000, g)[3])
    # stderr reported by estimate matches the theory at large n
    n = 200_000
    counts = np.round(g * n).astype(np.int64)
    counts[0] += n - counts.sum()
    e = m.estimate(m.simulate_statistic(counts, rng), n)
    np.testing.assert_allclose(e.stderr**2, m.variance_items(n, counts / n), rtol=0.1)
    assert e.privacy.eps == 2.0 and e.extra["decode"] == "ols"


def test_candidates_and_nnls(rng):
    m = Rappor(4.0, 40, k=16, h=2, m=16)
    counts = np.zeros(40, dtype=np.int64)
    counts[[3, 7, 11]] = [50_000, 30_000, 20_000]
    n = int(counts.sum())
    st = m.simulate_statistic(counts, rng)
    full = m.estimate(st, n)
    sub = m.estimate(st, n, candidates=[3, 7, 11, 20])
    assert sub.values.shape == (4,) and sub.extra["candidates"].tolist() == [3, 7, 11, 20]
    truth = np.array([0.5, 0.3, 0.2, 0.0])
    assert np.all(np.abs(sub.values - truth) < 5 * sub.stderr)
    assert np.all(sub.stderr < full.stderr[[3, 7, 11, 20]])  # fewer unknowns, less variance
    nn = m.estimate(st, n, decode="nnls")
    assert nn.values.min() >= 0 and nn.extra["decode"] == "nnls"
    assert np.all(np.abs(nn.values[[3, 7, 11]] - truth[:3]) < 5 * full.stderr[[3, 7, 11]])
    assert np.sum((nn.values - counts / n) ** 2) < np.sum((full.values - counts / n) ** 2)


def test_mergeable(rng):
    m = Rappor(1.0, 50, k=24, m=5)
    r1 = m.randomize(rng.integers(0, 50, 100), rng)
    r2 = m.randomize(rng.integers(0, 50, 70), rng)
    both = concat_rows([r1, r2])
    assert n_rows(both) == 170
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(r1) + m.aggregate(r2))
    agg = m.aggregate(both)
    assert agg.shape == (5, 25) and agg[:, 24].sum() == 170
    S = np.unpackbits(both["bits"], axis=1, count=24, bitorder="little")
    for c in range(5):  # direct per-cohort bit sums
        np.testing.assert_array_equal(agg[c, :24], S[both["cohort"] == c].sum(axis=0))


def test_bloom_hash_deterministic():
    a = bloom_hash(np.array([0, 1, 2]), np.array([5, 5, 5]), 3, 64, seed=7)
    assert a.shape == (3, 3) and a.min() >= 0 and a.max() < 64
    np.testing.assert_array_equal(a, bloom_hash([0, 1, 2], [5, 5, 5], 3, 64, seed=7))
    assert not np.array_equal(a, bloom_hash([0, 1, 2], [5, 5, 5], 3, 64, seed=8))
    # roughly uniform over bits
    pos = bloom_hash(np.zeros(64_000, dtype=np.int64), np.arange(64_000), 1, 64)[:, 0]
    assert stats.chisquare(np.bincount(pos, minlength=64)).pvalue > 1e-4


def test_validate_reports(rng):
    m = Rappor(1.0, 10, k=12, m=4)
    r = m.randomize(rng.integers(0, 10, 20), rng)
    ok = m.validate_reports(r)
    np.testing.assert_array_equal(ok["bits"], r["bits"])
    high = r["bits"].copy()
    high[0, -1] |= 0x80
    bad = [{"bits": r["bits"]}, {**r, "x": r["cohort"]}, {"cohort": np.full(20, 4), "bits": r["bits"]},
           {"cohort": r["cohort"][:5], "bits": r["bits"]}, {"cohort": r["cohort"], "bits": r["bits"].astype(int)},
           {"cohort": r["cohort"], "bits": high}]
    for b in bad:
        with pytest.raises(ValidationError):
            m.validate_reports(b)


@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], [np.nan], ["a"], [True]])
def test_bad_values(bad, rng):
    m = Rappor(1.0, 10)
    with pytest.raises(ValidationError):
        m.randomize(np.array(bad), rng)
    with pytest.raises(ValidationError):
        m.randomize(np.array([1, 2]), rng, users=np.array([1]))


@pytest.mark.parametrize("kwargs", [dict(epsilon=0, d=4), dict(epsilon=-1.0, d=4), dict(epsilon=1.0, d=1),
                                    dict(epsilon=1.0, d=4, p=0.5, q=0.5), dict(epsilon=1.0, d=4, q=1.5),
                                    dict(epsilon=1.0, d=4, h=0), dict(epsilon=1.0, d=4, k=1),
                                    dict(epsilon=1.0, d=4, m=2.5), dict(epsilon=1.0, d=4, decode="lasso"),
                                    dict(epsilon=1e-9, d=4), dict(epsilon=float("nan"), d=4)])
def test_bad_params(kwargs):
    with pytest.raises(ValidationError):
        Rappor(**kwargs)


def test_bad_statistic_and_design(rng):
    m = Rappor(1.0, 10, k=16, m=4)
    st = m.aggregate(m.randomize(rng.integers(0, 10, 100), rng))
    for bad in (st[:, :-1], st.astype(float), -st):
        with pytest.raises(ValidationError):
            m.estimate(bad, 100)
    with pytest.raises(ValidationError):
        m.estimate(st, 99)  # n must match the cohort sizes
    with pytest.raises(ValidationError):
        m.estimate(st, 100, candidates=[1, 1])
    with pytest.raises(ValidationError):
        m.estimate(st, 100, decode="x")
    tiny = Rappor(1.0, 64, k=2, m=2)  # 4 rows for 64 unknowns: rank deficient
    with pytest.raises(ValidationError, match="rank"):
        tiny.estimate(tiny.aggregate(tiny.randomize(rng.integers(0, 64, 50), rng)), 50)


def test_empty_cohorts_are_dropped(rng):
    m = Rappor(2.0, 10, m=64)
    st = m.aggregate(m.randomize(rng.integers(0, 10, 40), rng))
    assert (st[:, -1] == 0).any()
    e = m.estimate(st, 40)
    assert np.all(np.isfinite(e.values)) and np.all(e.stderr > 0)
    assert m.design(None, np.flatnonzero(st[:, -1] > 0)).rows.size == (st[:, -1] > 0).sum()
