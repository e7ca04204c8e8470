"""Worked examples from the spec, OETL, input validation, exact statistic simulation."""

import math

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.local.keyvalue import (HISKV, KEYVALUE_MECHANISMS, KVOH, KVUE, OETL, PCKVGRR, PCKVUE, KeyValueData,
                                      KeyValueEstimate, PrivKV, hiskv_cell_probabilities, keyvalue_mechanism,
                                      uniform_key_sample)
from tests.keyvalue.helpers import population


def _uniform_stat(d, k, N, n1, n2):
    s = np.zeros(3 * d)
    s[3 * k: 3 * k + 3] = [N - n1 - n2, n1, n2]
    return s


def test_privkv_example():
    m = PrivKV(2 * math.log(3), 2)  # eps1 = eps2 = ln 3
    e = m.estimate(_uniform_stat(2, 0, 1000, 400, 200), 2000)
    assert e.frequency.values[0] == pytest.approx(0.7)
    assert e.mean_clipped[0] == pytest.approx(2 / 3)


def test_kvue_example():
    m = KVUE(math.log(3), 2)
    e = m.estimate(_uniform_stat(2, 0, 1000, 300, 250), 2000)
    assert e.frequency.values[0] == pytest.approx(0.375)
    assert e.mean.values[0] == pytest.approx(1 / 3)


def test_kvoh_example():
    m = KVOH(math.log(3), 2)
    assert m.p == pytest.approx(0.633975, abs=1e-6)
    s = np.zeros(8)
    s[:4] = [1000, 560, 380, 420]
    e = m.estimate(s, 2000)
    assert e.frequency.values[0] == pytest.approx(0.253590, abs=1e-6)
    assert e.mean.values[0] == pytest.approx(0.588675, abs=1e-6)


def test_pckv_examples():
    ue = PCKVUE(math.log(3), 3, ell=1)
    assert (ue.a, ue.b, ue.p) == pytest.approx((0.5, 1 / 3, 0.75))
    s = np.zeros(2 * ue.d_ext)
    s[:2] = [2200, 1800]
    e = ue.estimate(s, 10000)
    assert e.frequency.values[0] == pytest.approx(0.4)
    assert e.mean_clipped[0] == pytest.approx(0.4)
    assert ue.thm4_frequency_variance(10000, 0.4) == pytest.approx(8.4e-4)
    g1 = PCKVGRR(math.log(3), 3, ell=1)
    assert (g1.a, g1.b, g1.p) == pytest.approx((0.4, 0.2, 0.75))
    g2 = PCKVGRR(math.log(3), 3, ell=2)
    assert (g2.a, g2.b, g2.p) == pytest.approx((3 / 7, 1 / 7, 5 / 6))


def test_hiskv_example_and_family():
    assert hiskv_cell_probabilities(math.log(3), 8, 1.0) == pytest.approx((0.3, 0.1, 0.1))
    assert hiskv_cell_probabilities(math.log(3), 8, math.sqrt(3)) == pytest.approx((0.279537, 0.161390, 0.093179),
                                                                                 abs=1e-6)
    m = HISKV(math.log(3), 3, ell=1, c=1.0, beta=0.0)
    s = np.zeros(2 * m.d_ext + m.max_length + 1)
    s[:2] = [1260, 1140]
    s[-1] = 10000
    e = m.estimate(s, 10000)
    assert e.frequency.values[0] == pytest.approx(0.2)
    assert e.value_sum.values[0] == pytest.approx(0.06)
    assert e.mean.values[0] == pytest.approx(0.3)


def test_oetl_example():
    o = OETL(math.log(3), 4, correction="clip")  # spec example: (700, 400, 100, -200) -> clip -> ell = 2
    assert o.truncation_length(np.array([400, 300, 200, 100])) == 2
    # norm-sub: delta = 100 keeps the total 1000: (600, 300, 0, 0) -> CDF (0.6, 0.9, ...) -> ell = 2
    assert OETL(math.log(3), 4).truncation_length(np.array([400, 300, 200, 100])) == 2


def test_oetl_norm_sub_beats_clip_on_wide_domains(rng):
    n, L, eps = 10_000, 100, 3.2
    lengths = np.minimum(1 + rng.negative_binomial(4, 0.5, n), L)  # mean 5, 90th percentile 9
    truth = int(np.ceil(np.quantile(lengths, 0.9)))
    ns, cl = [], []
    for _ in range(5):
        hist = np.bincount(OETL(eps, L).randomize(lengths, rng), minlength=L)
        ns.append(OETL(eps, L).truncation_length(hist))
        cl.append(OETL(eps, L, correction="clip").truncation_length(hist))
    assert abs(np.median(ns) - truth) <= 2
    assert np.median(cl) > truth + 10  # clipping keeps the noise mass of ~90 empty bins


@pytest.mark.parametrize("true_p90,eps", [(3, 2.0), (7, 3.0)])
def test_oetl_percentile_on_known_lengths(true_p90, eps, rng):
    # lengths: 90% uniform on 1..true_p90 (so the 0.9 quantile is exactly true_p90), 10% longer
    n, L = 200_000, 20
    o = OETL(eps, L)
    base = rng.integers(1, true_p90 + 1, n)
    long = rng.integers(true_p90 + 1, L + 1, n)
    lengths = np.where(rng.random(n) < 0.9, base, long)
    # guard the construction: the empirical quantile is what OETL should recover
    assert np.searchsorted(np.cumsum(np.bincount(lengths, minlength=L + 1)[1:]) / n, 0.9) + 1 in (true_p90,
                                                                                                 true_p90 + 1)
    got = [o.truncation_length(np.bincount(o.randomize(lengths, rng), minlength=L)) for _ in range(5)]
    assert all(g in (true_p90, true_p90 + 1) for g in got)
    assert np.median(got) == np.searchsorted(np.cumsum(np.bincount(lengths, minlength=L + 1)[1:]) / n, 0.9) + 1


def test_hiskv_collect_fits_ell(rng):
    data = population(20000, 10, 5, rng)  # lengths uniform 0..5 -> 90th percentile 5 (0 counted as 1)
    est, mech = HISKV(3.0, 10, beta=0.2).collect(data, rng)
    assert mech.ell in (4, 5, 6)
    assert est.extra["ell"] == mech.ell


@pytest.mark.parametrize("bad,param", [
    (dict(keys=[0, 5], vals=[0.1, 0.2], offsets=[0, 2]), "keys"),
    (dict(keys=[-1], vals=[0.1], offsets=[0, 1]), "keys"),
    (dict(keys=[0], vals=[1.5], offsets=[0, 1]), "vals"),
    (dict(keys=[0], vals=[np.nan], offsets=[0, 1]), "vals"),
    (dict(keys=[0, 0], vals=[0.1, 0.2], offsets=[0, 2]), "keys"),
    (dict(keys=[0], vals=[0.1], offsets=[0, 2]), "offsets"),
    (dict(keys=[0.5], vals=[0.1], offsets=[0, 1]), "keys"),
    (dict(keys=[0], vals=["a"], offsets=[0, 1]), "vals"),
])
def test_bad_data(bad, param):
    with pytest.raises(ValidationError, match=param) as ei:
        KeyValueData(np.asarray(bad["keys"]), np.asarray(bad["vals"]), np.asarray(bad["offsets"]), 5)
    assert ei.value.parameter == param


def test_empty_sets_when_not_allowed():
    with pytest.raises(ValidationError, match="empty"):
        KeyValueData.from_sets([{0: 0.1}, {}], 3, allow_empty=False)


@pytest.mark.parametrize("name", ["privkv", "kvue", "pckv-grr", "hiskv", "pckv-ue", "kvoh", "privkvm", "ldpkv"])
def test_mechanisms_reject_bad_inputs(name, rng):
    m = keyvalue_mechanism(name, 1.0, 4)
    for bad in (np.array([[[7, 0.1]]]), np.array([[[1, np.nan]]]), np.array([[[1, -1.2]]]), np.array([[[0.5, 0.1]]])):
        with pytest.raises(ValidationError):
            m.randomize(bad, rng)
    with pytest.raises(ValidationError, match="d=3"):
        m.randomize(KeyValueData.from_sets([{0: 0.1}], 3), rng)


@pytest.mark.parametrize("kw", [dict(name="nope"), dict(name="kvue", epsilon=0), dict(name="kvue", d=1),
                                dict(name="hiskv", c=0.5), dict(name="hiskv", c=10.0),
                                dict(name="hiskv", length_correction="x"), dict(name="pckv-grr", ell=0),
                                dict(name="privkvm", schedule="x"), dict(name="kvue", foo=1)])
def test_bad_params(kw):
    kw = {"epsilon": 1.0, "d": 4, **kw}
    with pytest.raises(ValidationError):
        keyvalue_mechanism(kw.pop("name"), kw.pop("epsilon"), kw.pop("d"), **kw)


def test_uniform_key_sample_membership(rng):
    data = population(3000, 6, 4, rng)
    j, holds, val = uniform_key_sample(data, rng)
    for u in range(0, 3000, 97):
        s = dict(data.user_set(u))
        assert holds[u] == (int(j[u]) in s)
        if holds[u]:
            assert val[u] == s[int(j[u])]


@pytest.mark.slow
@pytest.mark.parametrize("cls,kw", [(PCKVGRR, {"ell": 2}), (KVUE, {}), (KVOH, {})])
def test_simulate_statistic_matches_client_path(cls, kw, rng):
    from shuffledp.experiments.kvsim import sampling_counts_padding, sampling_counts_uniform
    data = population(2000, 4, 2, rng)
    m = cls(1.5, 4, **kw)
    Rn = 1500
    a = np.array([m.aggregate(m.randomize(data, rng)) for _ in range(Rn)], dtype=float)
    if cls is PCKVGRR:
        sc = np.stack([sampling_counts_padding(data, 2, rng) for _ in range(Rn)])
        a = a.reshape(Rn, -1, 2)[:, :4, :].reshape(Rn, -1)
        b = m.simulate_statistic(sc, rng).reshape(Rn, -1, 2)[:, :4, :].reshape(Rn, -1).astype(float)
    else:
        sc = np.stack([sampling_counts_uniform(data, rng) for _ in range(Rn)])
        b = m.simulate_statistic(sc, rng).astype(float)
    se = np.sqrt(a.var(0) / Rn + b.var(0) / Rn) + 1e-9
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)
    ok = a.var(0) > 0
    assert np.allclose(a.var(0)[ok], b.var(0)[ok], rtol=0.2)


@pytest.mark.parametrize("name,kw", [("privkv", {}), ("privkvm", {"rounds": 2}), ("kvue", {}), ("kvoh", {}),
                                     ("ldpkv", {}), ("pckv-ue", {"ell": 2}), ("pckv-grr", {"ell": 2}),
                                     ("hiskv", {"ell": 2, "beta": 0.3})])
def test_mergeable_and_reports_validate(name, kw, rng):
    from shuffledp.local import concat_rows
    m = keyvalue_mechanism(name, 1.0, 5, **kw)
    a, b = population(300, 5, 3, rng), population(200, 5, 3, rng)
    ra, rb = m.randomize(a, rng), m.randomize(b, rng)
    both = concat_rows([ra, rb])
    np.testing.assert_array_equal(m.aggregate(both), m.aggregate(ra) + m.aggregate(rb))
    checked = m.validate_reports(both)
    np.testing.assert_array_equal(m.aggregate(checked), m.aggregate(both))
    bad = dict(both)
    first = next(iter(bad))
    bad[first] = np.asarray(bad[first]).copy()
    bad[first].flat[0] = 99
    with pytest.raises(ValidationError):
        m.validate_reports(bad)


@pytest.mark.parametrize("name", sorted(KEYVALUE_MECHANISMS))
def test_keyvalue_keeps_the_local_randomizer_contract(name):
    """rng as None | int | Generator (a bad one named), n required and named, privacy() and
    variance(n, value) as on every local oracle."""
    m = keyvalue_mechanism(name, 2.0, 6)
    data = KeyValueData.from_sets([{0: 0.5}, {1: -0.5, 2: 0.2}, {}], 6)
    for rng in (None, 7, np.random.default_rng(7)):
        reps = m.randomize(data, rng)
        assert isinstance(reps, dict)
    with pytest.raises(ValidationError) as e:
        m.randomize(data, "seed")
    assert e.value.parameter == "rng"
    stat = m.aggregate(m.randomize(data, 3))
    with pytest.raises(ValidationError) as e:
        m.estimate(stat)
    assert e.value.parameter == "n"
    assert isinstance(m.estimate(stat, 3), KeyValueEstimate)
    assert m.privacy() == m.privacy(10) and m.privacy().model == "local"
    assert m.variance(100, 0.2) > 0
    for bad, param in (((None, 0.2), "n"), ((0, 0.2), "n"), ((100, 1.5), "value")):
        with pytest.raises(ValidationError) as e:
            m.variance(*bad)
        assert e.value.parameter == param


@pytest.mark.parametrize("sets", [[[(1.7, 0.5)]], [{2.5: 0.1}], [{True: 0.5}], [[(0, 0.1)], [(np.nan, 0.2)]]])
def test_from_sets_refuses_non_integral_keys(sets):
    """from_sets used to cast keys with int64 before validating: key 1.7 silently became key 1."""
    with pytest.raises(ValidationError) as ei:
        KeyValueData.from_sets(sets, 3)
    assert ei.value.parameter == "keys"


def test_from_sets_accepts_integral_float_keys():
    np.testing.assert_array_equal(KeyValueData.from_sets([[(2.0, 0.5)], {0: -1.0}], 3).keys, [2, 0])
