"""One way to say things across the local and shuffle APIs: ``epsilon`` (misspellings suggest it),
``rng`` as None | int | Generator, report batches as dicts, the statistic's n, reprs."""

from __future__ import annotations

import math
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.core.errors import ValidationError
from shuffledp.local import FREQUENCY_ORACLES, MEAN_ORACLES, frequency_oracle, mean_oracle
from shuffledp.shuffle import protocol

FREQ = sorted(FREQUENCY_ORACLES)
MEAN = sorted(MEAN_ORACLES)
D = 8


def _mech(name):
    return frequency_oracle(name, 1.0, D) if name in FREQ else mean_oracle(name, 1.0)


def _values(name, n, rng):
    return rng.integers(0, D, n) if name in FREQ else rng.uniform(-1, 1, n)


# --------------------------------------------------------------------------- parameter names

@pytest.mark.parametrize("build", [
    lambda: frequency_oracle("grr", eps=1, d=8),
    lambda: mean_oracle("pm", eps=1),
    lambda: protocol("hist_kr", eps=1, delta=1e-6, n=1000, d=8),
    lambda: frequency_oracle("olh", e=1, d=8),
    lambda: frequency_oracle("olh", epsilon_=1, d=8),
])
def test_misspelled_epsilon_suggests_epsilon(build):
    with pytest.raises(ValidationError, match="did you mean 'epsilon'") as info:
        build()
    assert info.value.parameter in ("eps", "e", "epsilon_")


@settings(max_examples=60, deadline=None)
@given(key=st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=12),
       name=st.sampled_from(FREQ))
def test_any_unknown_keyword_is_refused_by_name(key, name):
    import inspect

    from shuffledp.local.registry import _load

    cls = _load(FREQUENCY_ORACLES, name, "frequency oracle")
    if key in inspect.signature(cls.__init__).parameters:
        return
    with pytest.raises(ValidationError) as info:
        frequency_oracle(name, 1.0, D, **{key: 1})
    assert info.value.parameter == key and repr(key) in str(info.value)


@pytest.mark.parametrize("build,param", [
    (lambda: protocol("hist_kr", epsilon=1, delta=1e-6, n=1000), "d"),
    (lambda: protocol("ldp_krr", epsilon=1.0, n=10), "d"),
    (lambda: protocol("hist_kr", delta=1e-6, n=1000, d=8), "epsilon"),
    (lambda: frequency_oracle("grr", 1.0), "d"),
    (lambda: frequency_oracle("grr", d=8), "epsilon"),
    (lambda: mean_oracle("pm"), "epsilon"),
])
def test_missing_required_parameter_is_named(build, param):
    with pytest.raises(ValidationError, match=f"needs the parameter '{param}'") as info:
        build()
    assert info.value.parameter == param


def test_keywords_still_work():
    assert frequency_oracle("grr", epsilon=1.0, d=8).d == 8
    assert frequency_oracle("cms", 1.0, 64, k=16, m=32).k == 16
    assert mean_oracle("pm", epsilon=1.0, dim=2).dim == 2


# --------------------------------------------------------------------------- rng

@pytest.mark.parametrize("name", FREQ + MEAN)
def test_randomize_accepts_none_int_and_generator(name):
    mech = _mech(name)
    x = _values(name, 50, np.random.default_rng(0))
    a = mech.randomize(x, 7)
    b = mech.randomize(x, np.int64(7))
    c = mech.randomize(x, np.random.default_rng(7))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])  # an int seeds a reproducible generator
        np.testing.assert_array_equal(a[k], c[k])
    r = mech.randomize(x, None)  # a fresh secure generator
    assert set(r) == set(a)
    assert set(mech.randomize(x)) == set(a)  # rng defaults to None


@pytest.mark.parametrize("name", FREQ + MEAN)
@pytest.mark.parametrize("bad", [True, False, 1.0, "3", [1], np.random.RandomState(0)])
def test_randomize_bad_rng_is_named(name, bad):
    mech = _mech(name)
    with pytest.raises(ValidationError) as info:
        mech.randomize(_values(name, 3, np.random.default_rng(0)), bad)
    assert info.value.parameter == "rng"


# --------------------------------------------------------------------------- reports

@pytest.mark.parametrize("name", FREQ + MEAN)
@pytest.mark.parametrize("bad", [np.array([1, 2, 3]), [1, 2, 3], None, 3, "y"])
def test_aggregate_non_dict_batch_names_reports(name, bad):
    with pytest.raises(ValidationError) as info:
        _mech(name).aggregate(bad)
    assert info.value.parameter == "reports"


@pytest.mark.parametrize("name", FREQ + MEAN)
def test_aggregate_missing_field_names_reports(name):
    mech = _mech(name)
    reports = mech.randomize(_values(name, 5, np.random.default_rng(1)), 1)
    first = sorted(reports)[0]
    partial = {k: v for k, v in reports.items() if k != first}
    with pytest.raises(ValidationError, match=repr(first)) as info:
        mech.aggregate(partial)
    assert info.value.parameter == "reports"


# --------------------------------------------------------------------------- the statistic's n

RECORDING = ["grr", "hr", "ss", "cms", "rappor"]  # statistics that count their reports


@pytest.mark.parametrize("name", RECORDING)
def test_statistic_records_n(name):
    mech = frequency_oracle(name, 1.0, D)
    n = 300
    rep = mech.randomize(np.random.default_rng(2).integers(0, D, n), 2)
    stat = mech.aggregate(rep)
    assert mech.users_of(stat) == n
    implicit, explicit = mech.estimate(stat), mech.estimate(stat, n)
    assert implicit.n == n
    np.testing.assert_array_equal(implicit.values, explicit.values)
    with pytest.raises(ValidationError) as info:
        mech.estimate(stat, n + 1)
    assert info.value.parameter == "n"


# HCMS is left out: every report adds +-1 to one sign sum, so only sum |cells| <= n is checkable
@pytest.mark.parametrize("name", [m for m in FREQ if m != "hcms"])
def test_estimate_of_three_reports_with_n_1000_is_refused(name):
    # GRR, d = 8: these inputs used to return fractions near -0.58 for every item
    mech = frequency_oracle(name, 1.0, D)
    agg = mech.aggregate(mech.randomize(np.array([1, 2, 3]), 0))
    with pytest.raises(ValidationError) as info:
        mech.estimate(agg, n=1000)
    assert info.value.parameter == "n"


@pytest.mark.parametrize("name", ["sue", "oue", "olh", "blh"])
def test_statistic_without_n_asks_for_n(name):
    mech = frequency_oracle(name, 1.0, D)
    agg = mech.aggregate(mech.randomize(np.array([1, 2, 3]), 0))
    with pytest.raises(ValidationError, match="pass n=") as info:
        mech.estimate(agg)
    assert info.value.parameter == "n"


@pytest.mark.parametrize("name", MEAN)
def test_mean_statistic_without_n_asks_for_n(name):
    mech = mean_oracle(name, 1.0)
    agg = mech.aggregate(mech.randomize(np.array([0.1, 0.2]), 0))
    with pytest.raises(ValidationError) as info:
        mech.estimate(agg)
    assert info.value.parameter == "n"


@pytest.mark.parametrize("name", ["sue", "oue", "olh", "blh"])
def test_honest_statistics_pass_the_n_test(name):
    # the Hoeffding test refuses an honest statistic with probability <= 1e-12: skewed and
    # uniform inputs, small and moderate n, all accepted
    mech = frequency_oracle(name, 1.0, D)
    rng = np.random.default_rng(11)
    for n in (1, 2, 10, 200, 3000):
        for x in (np.zeros(n, dtype=np.int64), rng.integers(0, D, n)):
            mech.estimate(mech.aggregate(mech.randomize(x, rng)), n)


@pytest.mark.parametrize("name", ["sue", "oue", "olh", "blh"])
def test_n_off_by_a_factor_is_refused(name):
    mech = frequency_oracle(name, 1.0, 64)
    n = 4000
    stat = mech.aggregate(mech.randomize(np.random.default_rng(3).integers(0, 64, n), 3))
    mech.estimate(stat, n)
    for wrong in (n // 2, 2 * n):
        with pytest.raises(ValidationError) as info:
            mech.estimate(stat, wrong)
        # too small an n may already break the counts <= n range check (naming the statistic)
        assert info.value.parameter in (("n",) if wrong > n else ("n", "statistic"))


# --------------------------------------------------------------------------- repr

@pytest.mark.parametrize("name", FREQ + MEAN)
def test_mechanism_repr_names_type_and_parameters(name):
    mech = _mech(name)
    text = repr(mech)
    assert text.startswith(type(mech).__name__ + "(") and "epsilon=1" in text and " at 0x" not in text
    if name in FREQ:
        assert f"d={D}" in text


def test_protocol_repr_is_not_the_default():
    text = repr(protocol("hist_kr", epsilon=1.0, delta=1e-6, n=5000, d=8))
    assert " at 0x" not in text and "epsilon" in text


# --------------------------------------------------------------------------- privacy(n=None)

def _four_contracts():
    from shuffledp.central.mechanisms import DiscreteLaplaceMechanism
    from shuffledp.local.keyvalue import keyvalue_mechanism

    return [frequency_oracle("grr", 1.0, D), mean_oracle("pm", 1.0), keyvalue_mechanism("pckv-ue", 1.0, D),
            DiscreteLaplaceMechanism(1.0), protocol("hist_kr", epsilon=1, delta=1e-6, n=10000, d=8)]


@pytest.mark.parametrize("i", range(5))
def test_privacy_is_one_method_everywhere(i):
    obj = _four_contracts()[i]
    st = obj.privacy()
    assert st == obj.privacy(10000)  # a protocol's default n is its own; the others ignore n
    assert st.model in ("local", "shuffle", "central")


@pytest.mark.parametrize("i", range(5))
@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_privacy_n_is_validated(i, bad):
    obj = _four_contracts()[i]
    with pytest.raises(ValidationError) as e:
        obj.privacy(bad)
    assert e.value.parameter == "n"


@pytest.mark.parametrize("name", FREQ + MEAN)
def test_no_oracle_overrides_privacy(name):
    from shuffledp.local.base import LocalRandomizer

    assert type(_mech(name)).privacy is LocalRandomizer.privacy, "implement _privacy() instead"
