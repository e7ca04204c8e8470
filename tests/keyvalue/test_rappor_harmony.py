"""RAPPOR+Harmony key-value baseline: exact privacy (full client path), unbiasedness, variances."""

import itertools
import math

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.experiments.kvsim import sampling_counts_padding
from shuffledp.local import concat_rows
from shuffledp.local.keyvalue import KeyValueData, RapporHarmony, keyvalue_mechanism
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band
from tests.keyvalue.helpers import per_replica_estimates, population
from tests.keyvalue.test_privacy import D, INPUTS


def _all_reports(m: RapporHarmony) -> dict:
    rows = list(itertools.product(itertools.product((0, 1), repeat=m.d), (1, -1)))
    bits = np.packbits(np.array([r[0] for r in rows], dtype=np.uint8), axis=1, bitorder="little")
    return {"bits": bits, "s": np.array([r[1] for r in rows], dtype=np.int8)}


@pytest.mark.parametrize("eps", [0.5, math.log(3), 2.0])
@pytest.mark.parametrize("ell,frac", [(1, 0.5), (2, 0.5), (4, 0.3)])
def test_exact_privacy_full_client_path(eps, ell, frac, rng):
    m = keyvalue_mechanism("rappor-harmony", eps, D, ell=ell, key_fraction=frac)
    assert isinstance(m, RapporHarmony)
    reports = sweep_reports(m, INPUTS, 60, rng)
    assert worst_case_log_ratio(m, reports, INPUTS) <= eps + 1e-9
    allr = _all_reports(m)
    probs = np.stack([m.probabilities(allr, x) for x in INPUTS])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    worst = worst_case_log_ratio(m, allr, INPUTS)
    assert worst <= eps + 1e-9
    if ell == 1:  # tight up to the rounding of q to the 2^-20 grid: e^{eps1} e^{eps2}
        assert worst == pytest.approx(2 * math.log(m.p / m.q) + m.eps2, abs=1e-12)
        assert worst == pytest.approx(eps, abs=1e-4)


def test_randomize_matches_probabilities(rng):
    from scipy import stats

    m = RapporHarmony(2.0, D, ell=2)
    x = ((0, 0.6), (2, -0.2), (1, 1.0))  # longer than ell: truncation path
    N = 200_000
    r = m.randomize(KeyValueData.from_sets([x] * N, D), rng)
    code = (np.unpackbits(r["bits"], axis=1, count=D, bitorder="little") @ (1 << np.arange(D))) * 2 + (r["s"] < 0)
    obs = np.bincount(code, minlength=16)
    allr = _all_reports(m)
    acode = (np.unpackbits(allr["bits"], axis=1, count=D, bitorder="little") @ (1 << np.arange(D))) * 2 \
        + (allr["s"] < 0)
    exp = np.zeros(16)
    exp[acode] = m.probabilities(allr, x) * N
    assert stats.chisquare(obs, exp).pvalue > 1e-4


def test_budget_split_is_needed():
    """The checker can fail: spending the full eps on both parts breaks eps-LDP."""
    eps = 1.0
    m = RapporHarmony(eps, D, ell=1)
    allr = _all_reports(m)
    broken = RapporHarmony(2 * eps, D, ell=1)  # eps1 = eps2 = eps: total 2 eps
    assert worst_case_log_ratio(broken, allr, INPUTS) > eps + 0.5


def _pop(rng, n=2000, d=6, max_len=3):
    return population(n, d, max_len, rng)


def test_unbiased_and_variance_client_path(rng):
    data = _pop(rng)
    n, R = data.n, 4000
    m = RapporHarmony(2.0, data.d, ell=3)  # ell = max length: no truncation, estimators unbiased
    ests = per_replica_estimates(m, data, R, rng)
    f, mu = data.true_frequency(), data.true_mean()
    holders_m2 = np.bincount(data.keys, weights=data.vals**2, minlength=data.d) / np.maximum(f * n, 1)
    F = np.array([e.frequency.values for e in ests])
    S = np.array([e.value_sum.values for e in ests])
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    zb = mean_z_bound()
    for k in (0, 2, 5):
        vf = m.frequency_variance(n, f[k])
        assert abs(F[:, k].mean() - f[k]) / math.sqrt(vf / R) < zb
        assert lo <= F[:, k].var(ddof=1) / vf <= hi
        vs = m.sum_variance(n, f[k], holders_m2[k])
        assert abs(S[:, k].mean() - f[k] * mu[k]) / math.sqrt(vs / R) < zb
        assert lo <= S[:, k].var(ddof=1) / vs <= hi
    # reported stderr of the frequency is the closed form at the clipped estimate
    e = ests[0]
    np.testing.assert_allclose(e.frequency.stderr**2, m.frequency_variance(n, e.frequency_clipped))
    assert np.all(np.abs(e.mean_clipped) <= 1)


def test_simulate_statistic_matches_client_path(rng):
    data = _pop(rng, n=1500, d=5, max_len=4)
    m = RapporHarmony(1.5, data.d, ell=2)  # truncation on: simulation must still match exactly
    R = 2000
    client = np.array([m.aggregate(m.randomize(data, rng)) for _ in range(R)], dtype=float)
    sim = np.array([m.simulate_statistic(sampling_counts_padding(data, m.ell, rng), rng) for _ in range(R)],
                   dtype=float)  # (R, d, 3)
    d = data.d
    pairs = [(client[:, :d], sim[..., 0]), (client[:, d:2 * d], sim[..., 1]),
             (np.repeat(client[:, 2 * d:], d, axis=1), sim[..., 2])]
    for a, b in pairs:
        se = np.sqrt(a.var(0) / R + b.var(0) / R)
        assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)
        r = b.var(0, ddof=1) / a.var(0, ddof=1)
        assert np.all((0.8 < r) & (r < 1.25))
    # joint law: covariance of (t_k, T) is reproduced per key
    for k in range(d):
        ca = np.cov(client[:, d + k], client[:, 2 * d])[0, 1]
        cb = np.cov(sim[:, k, 1], sim[:, k, 2])[0, 1]
        assert abs(ca - cb) < 0.15 * max(abs(ca), 1.0) + 5 * math.sqrt(client[:, d + k].var() * client[:, 2 * d].var() * 2 / R)


def test_mean_variance_delta_method(rng):
    """Delta-method mean variance vs simulation at large n f (exact per-key simulation)."""
    data = _pop(rng, n=40_000, d=4, max_len=2)
    m = RapporHarmony(4.0, data.d, ell=2)
    R = 2000
    f, mu = data.true_frequency(), data.true_mean()
    n = data.n
    st = np.array([m.simulate_statistic(sampling_counts_padding(data, m.ell, rng), rng) for _ in range(R)])
    pe = m.point_estimates(st[..., 0], st[..., 1], st[..., 2], n)
    m2 = np.bincount(data.keys, weights=data.vals**2, minlength=data.d) / (f * n)
    s = 1.0 / np.maximum(data.lengths, m.ell)
    tbar = float((np.repeat(s, data.lengths) * data.vals).sum() / n / m.C)
    lo, hi = variance_ratio_band(R)
    for k in range(data.d):
        v = m.mean_variance(n, f[k], mu[k], m2[k], tbar=tbar)
        ratio = pe["m"][:, k].var(ddof=1) / v
        assert lo * 0.97 <= ratio <= hi * 1.03, (k, ratio)  # 3% allowance for the delta method at n f >= 5e3
        assert abs(pe["m"][:, k].mean() - mu[k]) < 0.02


def test_mergeable(rng):
    m = RapporHarmony(1.0, 11, ell=2)
    a = m.randomize(_pop(rng, 300, 11), rng)
    b = m.randomize(_pop(rng, 200, 11), rng)
    both = concat_rows([a, b])
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(a) + m.aggregate(b))
    st = m.aggregate(both)
    Y = np.unpackbits(both["bits"], axis=1, count=11, bitorder="little").astype(int)
    np.testing.assert_array_equal(st[:11], Y.sum(0))
    np.testing.assert_array_equal(st[11:22], (Y * both["s"][:, None]).sum(0))
    assert st[22] == both["s"].astype(int).sum()
    assert m.validate_reports(both)["s"].dtype == np.int8


def test_bad_input(rng):
    m = RapporHarmony(1.0, 4, ell=2)
    for sets in ([[(4, 0.5)]], [[(0, 1.5)]], [[(0, float("nan"))]], [[(-1, 0.0)]]):
        with pytest.raises(ValidationError):
            m.randomize(sets, rng)
    for kw in (dict(epsilon=0.0, d=4), dict(epsilon=1.0, d=1), dict(epsilon=1.0, d=4, ell=0),
               dict(epsilon=1.0, d=4, key_fraction=0.0), dict(epsilon=1.0, d=4, key_fraction=1.0),
               dict(epsilon=1e-9, d=4)):
        with pytest.raises(ValidationError):
            RapporHarmony(**kw)
    st = m.aggregate(m.randomize(_pop(rng, 50, 4), rng))
    with pytest.raises(ValidationError):
        m.estimate(st[:-1], 50)
    with pytest.raises(ValidationError):
        m.estimate(st, 10)  # counts exceed n
    with pytest.raises(ValidationError):
        m.validate_reports({"bits": np.zeros((2, 1), np.uint8), "s": np.array([1, 0])})
    with pytest.raises(ValidationError):
        m.validate_reports({"bits": np.full((2, 1), 0xF0, np.uint8), "s": np.array([1, -1])})
    with pytest.raises(ValidationError):
        m.probabilities({"bits": np.zeros((1, 1), np.uint8), "s": np.array([1])}, ((5, 0.1),))
