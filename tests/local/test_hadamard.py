import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.linalg import hadamard

from shuffledp.core import ValidationError
from shuffledp.local import concat_rows, frequency_oracle, n_rows
from shuffledp.local.hadamard import HadamardResponse, fwht, simulate_statistic_direct
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band


def test_spec_worked_example_general():
    # Acharya-Sun-Zhang's general scheme at k=10, eps=ln 8: B=8, b=4, K=32, A=23, c=1/46;
    # symbol 4 -> block 1, row 2, C_4={4,5}
    m = frequency_oracle("hr", math.log(8), 10, variant="general")
    assert isinstance(m, HadamardResponse)
    assert (m.blocks, m.block_size, m.K) == (8, 4, 32)
    assert m.A == pytest.approx(23) and m.c == pytest.approx(1 / 46) and m.p_in == pytest.approx(8 / 46)
    assert np.flatnonzero(m.in_support(np.arange(32), 4)).tolist() == [4, 5]
    # F_S = 0.10, F_blk = 0.15 -> p_4 = 23 * 0.05 / 7 = 0.164286
    hist = np.zeros(32, dtype=np.int64)
    hist[[4, 5, 6, 7]] = [50, 50, 25, 25]
    hist[0] = 850
    assert m.estimate(hist, 1000).values[4] == pytest.approx(23 * 0.05 / 7)
    # Var* (n_x, P_beta -> 0) = 2 n A / (e-1)^2 = 938.78 at n = 1000
    assert m.variance(1000, 0.0, block_mass=0.0) * 1000**2 == pytest.approx(938.7755, rel=1e-6)


def test_spec_worked_example_high_privacy():
    # the high-privacy example uses the B = 1 scheme (the general formula gives B = 2 at e = 3)
    assert HadamardResponse(math.log(3), 7, variant="general").blocks == 2
    m = HadamardResponse(math.log(3), 7, variant="high_privacy")
    assert m.blocks == 1 and m.K == 8
    # p = 4 (F_S - 1/2): F_S = 0.6 -> 0.4 ; per-user count variance 4 - p_x
    x = 2
    inside = m.in_support(np.arange(8), x)
    hist = np.zeros(8, dtype=np.int64)
    hist[np.flatnonzero(inside)[0]] = 600
    hist[np.flatnonzero(~inside)[0]] = 400
    assert m.estimate(hist, 1000).values[x] == pytest.approx(0.4)
    assert m.variance(1000, 0.3) * 1000**2 == pytest.approx(1000 * (4 - 0.3))
    # high_privacy variant forces B = 1 even when e^eps >= 2
    assert HadamardResponse(3.0, 10, variant="high_privacy").blocks == 1
    assert HadamardResponse(3.0, 10, variant="general").blocks == 16


@pytest.mark.parametrize("eps,d,variant", [(0.5, 7, "general"), (1.0, 16, "general"), (math.log(8), 10, "general"),
                                           (5.0, 20, "general"), (2.0, 5, "high_privacy")])
def test_exact_privacy(eps, d, variant, rng):
    m = HadamardResponse(eps, d, variant)
    reports = sweep_reports(m, range(d), 200, rng)
    assert worst_case_log_ratio(m, reports, range(d)) <= eps + 1e-9
    allr = {"y": np.arange(m.K)}
    assert worst_case_log_ratio(m, allr, range(d)) == pytest.approx(eps)
    probs = np.stack([m.probabilities(allr, x) for x in range(d)])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


@pytest.mark.parametrize("eps,d", [(math.log(8), 10), (0.5, 6)])
def test_sampler_matches_probabilities(eps, d, rng):
    m = HadamardResponse(eps, d)
    N = 100_000
    for x in (0, d - 1):
        y = m.randomize(np.full(N, x), rng)["y"]
        obs = np.bincount(y, minlength=m.K)
        exp = m.probabilities({"y": np.arange(m.K)}, x) * N
        assert stats.chisquare(obs, exp).pvalue > 1e-4


@pytest.mark.parametrize("eps", [math.log(8), 0.5])
def test_unbiased_and_variance(eps, rng):
    d, n, R = 10, 2000, 4000
    m = HadamardResponse(eps, d)
    x = np.repeat(np.arange(d), n // d)
    x[: n // 2] = 4  # skewed: item 4 heavy, item 5 shares its block
    f = np.bincount(x, minlength=d) / n
    ests = np.array([m.estimate(m.aggregate(m.randomize(x, rng)), n).values for _ in range(R)])
    var_all = m.variances(n, f)
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    for i in (4, 5, 9):
        z = (ests[:, i].mean() - f[i]) / math.sqrt(var_all[i] / R)
        assert abs(z) < mean_z_bound()
        assert lo <= ests[:, i].var(ddof=1) / var_all[i] <= hi


def test_simulate_statistic_matches(rng):
    d = 10
    m = HadamardResponse(math.log(8), d)
    counts = np.array([50, 0, 10, 5, 5, 30, 0, 0, 7, 3])
    x = np.repeat(np.arange(d), counts)
    R = 3000
    a = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(R)])
    b = np.array([m.simulate_statistic(counts, rng) for _ in range(R)])
    assert (b.sum(axis=1) == counts.sum()).all()
    se = np.sqrt(a.var(0) / R + b.var(0) / R)
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)
    assert np.allclose(a.var(0), b.var(0), rtol=0.15)


def _exact_histogram_law(m: HadamardResponse, counts: np.ndarray) -> dict[tuple[int, ...], float]:
    """Pr[histogram] of the reports of ``counts`` users, by enumerating every tuple of outputs."""
    users = np.repeat(np.arange(m.d), counts)
    probs = np.array([np.where(m.in_support(np.arange(m.K), int(x)), m.p_in, m.c) for x in users])
    law: dict[tuple[int, ...], float] = {}
    grids = np.meshgrid(*[np.arange(m.K)] * users.size, indexing="ij")
    ys = np.stack([g.ravel() for g in grids], axis=1)  # every output tuple
    p = np.prod(probs[np.arange(users.size), ys], axis=1)
    for row, pr in zip(np.sort(ys, axis=1), p):
        key = tuple(np.bincount(row, minlength=m.K).tolist())
        law[key] = law.get(key, 0.0) + float(pr)
    return law


def _chi2_pvalue(law: dict[tuple[int, ...], float], samples: np.ndarray) -> float:
    """Pearson's test of sampled histograms against their exact law (cells with < 5 expected merged)."""
    keys = list(law)
    index = {k: i for i, k in enumerate(keys)}
    observed = np.bincount([index[tuple(h.tolist())] for h in samples], minlength=len(keys))
    expected = np.array([law[k] for k in keys]) * len(samples)
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue)


@pytest.mark.parametrize("eps, d, variant, counts", [
    (5.0, 3, None, [1, 1, 0]),                   # B = 4 blocks of b = 2
    (math.log(8), 10, None, [1, 0, 0, 0, 1, 0, 0, 0, 0, 0]),  # B = 8, b = 4 (the worked example)
    (0.5, 3, None, [2, 1, 1]),                   # B = 1, b = 4
    (1.0, 6, None, [1, 0, 2, 0, 0, 1]),          # high privacy, b = 8
    (1.0, 20, "general", [1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),  # B = 2, b = 16
])
def test_simulate_statistic_exact_law(eps, d, variant, counts):
    """The bitwise sampler's histograms follow the exact law of n independent reports (Pearson)."""
    m = HadamardResponse(eps, d, variant=variant)
    counts = np.array(counts)
    law = _exact_histogram_law(m, counts)
    assert sum(law.values()) == pytest.approx(1.0)
    gen = np.random.default_rng(7)
    samples = np.array([m.simulate_statistic(counts, gen) for _ in range(20000)])
    assert _chi2_pvalue(law, samples) > 1e-4


def test_exact_law_check_rejects_a_wrong_sampler():
    """The Pearson check above can fail: a sampler that ignores C_x (uniform in the item's block)
    is rejected."""
    m = HadamardResponse(0.5, 3)
    counts = np.array([2, 1, 1])
    law = _exact_histogram_law(m, counts)
    gen = np.random.default_rng(7)

    def wrong(c):
        uni = gen.binomial(c, m.u_exact)
        out = gen.multinomial(int(uni.sum()), np.full(m.K, 1.0 / m.K))
        for x in range(m.d):  # non-uniform users land anywhere in their block
            lo = int(m._block[x]) * m.block_size
            out[lo:lo + m.block_size] += gen.multinomial(int(c[x] - uni[x]), np.full(m.block_size, 1.0 / m.block_size))
        return out

    samples = np.array([wrong(counts) for _ in range(20000)])
    assert _chi2_pvalue(law, samples) < 1e-6


@pytest.mark.parametrize("eps, d", [(math.log(8), 10), (3.0, 20), (0.5, 37)])
def test_simulate_statistic_matches_direct_sampler(eps, d):
    """Bitwise sampler vs the per-item multinomial (O(d K)) oracle: same means and variances per output."""
    m = HadamardResponse(eps, d)
    gen = np.random.default_rng(11)
    counts = gen.integers(0, 30, d)
    R = 4000
    a = np.array([simulate_statistic_direct(m, counts, gen) for _ in range(R)])
    b = np.array([m.simulate_statistic(counts, gen) for _ in range(R)])
    assert (a.sum(axis=1) == counts.sum()).all() and (b.sum(axis=1) == counts.sum()).all()
    live = (a.var(0) > 0) | (b.var(0) > 0)
    z = (a.mean(0) - b.mean(0))[live] / np.sqrt((a.var(0) + b.var(0))[live] / R)
    assert np.abs(z).max() < mean_z_bound(1e-4 / live.sum())  # Bonferroni over the outputs


def test_simulate_statistic_large_domain():
    """d = 2^16 (K = 2^17): the bitwise sampler handles it (the direct one would draw 2^33 cells)."""
    m = HadamardResponse(1.0, 1 << 16)
    gen = np.random.default_rng(3)
    counts = gen.integers(0, 5, m.d)
    out = m.simulate_statistic(counts, gen)
    assert out.shape == (m.K,) and out.sum() == counts.sum() and out.min() >= 0


@settings(max_examples=80, deadline=None)
@given(k=st.integers(0, 8), batch=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_fwht_matches_dense_hadamard(k, batch, seed):
    K = 1 << k
    a = np.random.default_rng(seed).integers(-1000, 1000, size=(batch, K))
    out = fwht(a, axis=1)
    np.testing.assert_array_equal(out, a @ hadamard(K))
    np.testing.assert_array_equal(fwht(a.T, axis=0), (a @ hadamard(K)).T)
    np.testing.assert_array_equal(fwht(out, axis=1), K * a)  # H H = K I
    af = a.astype(float)
    np.testing.assert_allclose(fwht(af, axis=1), af @ hadamard(K))


def test_fwht_bad_length():
    with pytest.raises(ValidationError):
        fwht(np.zeros(6))


def test_mergeable(rng):
    m = HadamardResponse(2.0, 30)
    r1 = m.randomize(rng.integers(0, 30, 100), rng)
    r2 = m.randomize(rng.integers(0, 30, 50), rng)
    both = concat_rows([r1, r2])
    assert n_rows(both) == 150
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(r1) + m.aggregate(r2))


def test_validate_reports(rng):
    m = HadamardResponse(1.0, 10)
    r = m.randomize(rng.integers(0, 10, 20), rng)
    np.testing.assert_array_equal(m.validate_reports(r)["y"], r["y"])
    for bad in ({"y": np.array([m.K])}, {"y": np.array([-1])}, {"y": np.array([0.5])}, {"z": r["y"]},
                {"y": r["y"], "seed": r["y"]}):
        with pytest.raises(ValidationError):
            m.validate_reports(bad)


@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], [np.nan], ["a"], [True]])
def test_bad_values(bad, rng):
    m = HadamardResponse(1.0, 10)
    with pytest.raises(ValidationError):
        m.randomize(np.array(bad), rng)


@pytest.mark.parametrize("kwargs", [dict(epsilon=0, d=4), dict(epsilon=1.0, d=1), dict(epsilon=1.0, d=4, variant="x"),
                                    dict(epsilon=float("inf"), d=4)])
def test_bad_params(kwargs):
    with pytest.raises(ValidationError):
        HadamardResponse(**kwargs)


def test_bad_statistic():
    m = HadamardResponse(1.0, 10)
    with pytest.raises(ValidationError):
        m.estimate(np.zeros(m.K + 1), 10)
    with pytest.raises(ValidationError):
        m.estimate(np.zeros(m.K), 0)
    with pytest.raises(ValidationError):
        m.variances(10, np.zeros(3))
