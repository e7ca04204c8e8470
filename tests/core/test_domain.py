"""Categorical labels: Domain round trips, unknown labels, pandas/pyarrow inputs, labelled estimates."""

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp import pipeline
from shuffledp.core.domain import Domain, DomainInferenceWarning, randomize_labels
from shuffledp.core.errors import ValidationError
from shuffledp.local import frequency_oracle
from shuffledp.shuffle import protocol

labels_st = st.one_of(
    st.lists(st.text(min_size=0, max_size=8), min_size=2, max_size=30, unique=True),
    st.lists(st.integers(-10**12, 10**12), min_size=2, max_size=30, unique=True),
    st.lists(st.one_of(st.text(max_size=4), st.integers(-5, 5)), min_size=2, max_size=20,
             unique_by=lambda v: (type(v).__name__, v)),
)


@settings(max_examples=150, deadline=None)
@given(labels=labels_st, data=st.data())
def test_round_trip_labels_indices_labels(labels, data):
    dom = Domain(labels)
    assert dom.size == len(labels) and list(dom.labels) == labels
    picks = data.draw(st.lists(st.sampled_from(labels), max_size=60))
    idx = dom.encode(picks)
    assert idx.dtype == np.int64 and idx.shape == (len(picks),)
    assert [dom.labels[i] for i in idx] == picks
    back = dom.decode(idx)
    assert list(back) == picks
    assert all(type(a) is type(b) for a, b in zip(back, picks))  # 1 stays 1, "1" stays "1"


@settings(max_examples=100, deadline=None)
@given(labels=st.lists(st.text(max_size=5), min_size=2, max_size=10, unique=True), extra=st.text(max_size=5))
def test_unknown_label_is_a_validation_error_naming_the_parameter(labels, extra):
    dom = Domain(labels)
    if extra in labels:
        return
    with pytest.raises(ValidationError, match="outside the domain") as e:
        dom.encode([labels[0], extra, labels[1]], parameter="values")
    assert e.value.parameter == "values" and repr(extra) in str(e.value)


def test_int_and_str_labels_are_not_confused():
    dom = Domain([1, 2, "1"])
    assert dom.encode(["1", 1, 2, 1]).tolist() == [2, 0, 1, 0]
    with pytest.raises(ValidationError):
        Domain(["1", "2"]).encode([1])


@pytest.mark.parametrize("bad, match", [
    (["a"], "at least 2"), (["a", "a", "b"], "distinct"), ("ab", "single string"), ([["a"], ["b"]], "1-D"),
])
def test_bad_label_lists_are_refused_naming_labels(bad, match):
    with pytest.raises(ValidationError, match=match) as e:
        Domain(bad)
    assert e.value.parameter == "labels"


def test_decode_refuses_out_of_range_indices():
    dom = Domain(["a", "b", "c"])
    with pytest.raises(ValidationError, match=r"\[0, 3\)") as e:
        dom.decode([0, 3])
    assert e.value.parameter == "indices"
    with pytest.raises(ValidationError):
        dom.decode([0.5])


def test_from_data_warns_that_it_discloses_the_labels():
    with pytest.warns(DomainInferenceWarning, match="disclosed"):
        dom = Domain.from_data(["b", "a", "b", "c"])
    assert dom.labels == ("a", "b", "c")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Domain(["a", "b"])  # explicit: no warning


def test_local_oracle_with_labels_and_labelled_estimate():
    dom = Domain(["chrome", "firefox", "safari", "other"])
    oracle = frequency_oracle("oue", 2.0, dom.size)
    rng = np.random.default_rng(4)
    truth = np.array([0.5, 0.2, 0.2, 0.1])
    values = rng.choice(np.array(dom.labels, dtype=object), size=40_000, p=truth)
    est = dom.label(oracle.estimate(oracle.aggregate(randomize_labels(oracle, values, dom, rng)), values.size))
    assert est.labels == dom.labels
    by = est.by_label()
    assert set(by) == set(dom.labels)
    # unbiased: each estimate within 5 standard errors of the truth
    assert np.all(np.abs(est.values - truth) < 5 * est.stderr)
    d = json.loads(json.dumps(est.to_dict()))
    assert d["labels"] == list(dom.labels) and d["n"] == 40_000
    assert "chrome" in str(est)
    assert est.project_simplex().labels == dom.labels  # post-processing keeps the labels


def test_randomize_labels_refuses_a_domain_of_the_wrong_size():
    with pytest.raises(ValidationError, match="d=5") as e:
        randomize_labels(frequency_oracle("grr", 1.0, 5), ["a"], Domain(["a", "b"]))
    assert e.value.parameter == "domain"


def test_pipeline_with_labels_list():
    dom = Domain(["x", "y", "z"])
    proto = protocol("hist_kr", epsilon=1.0, delta=1e-6, n=5000, d=3)
    values = ["x"] * 3000 + ["y"] * 1500 + ["z"] * 500
    est = pipeline.run(proto, values, 1, domain=dom)
    assert est.labels == ("x", "y", "z")
    sim = pipeline.simulate(proto, values, 2, domain=dom)
    assert sim.labels == ("x", "y", "z")
    for e in (est, sim):
        assert np.all(np.abs(e.values - [3000, 1500, 500]) < 6 * e.stderr)
    with pytest.raises(ValidationError, match="outside the domain") as e:
        pipeline.run(proto, values[:-1] + ["q"], 1, domain=dom)
    assert e.value.parameter == "values"
    with pytest.raises(ValidationError, match="d=3") as e:
        pipeline.run(proto, values, 1, domain=Domain(["x", "y"]))
    assert e.value.parameter == "domain"


def test_estimate_labels_must_match_values():
    from shuffledp.core import Estimate, PrivacyStatement

    with pytest.raises(ValidationError) as e:
        Estimate(np.zeros(3), np.zeros(3), 10, PrivacyStatement(1.0), labels=("a", "b"))
    assert e.value.parameter == "labels"


def test_pandas_inputs_and_to_pandas():
    pd = pytest.importorskip("pandas")
    dom = Domain(["x", "y", "z"])
    s = pd.Series(["y", "x", "z", "y"])
    assert dom.encode(s).tolist() == [1, 0, 2, 1]
    assert dom.encode(s.astype("category")).tolist() == [1, 0, 2, 1]
    assert dom.encode(pd.Categorical(["z", "z"], categories=["z", "q"])).tolist() == [2, 2]
    with pytest.raises(ValidationError, match="'q'"):
        dom.encode(pd.Series(["q"]).astype("category"))
    with pytest.raises(ValidationError, match="outside the domain"):
        dom.encode(pd.Series(["x", None]))
    with pytest.raises(ValidationError, match="outside the domain"):
        dom.encode(pd.Series(["x", None]).astype("category"))
    proto = protocol("hist_kr", epsilon=1.0, delta=1e-6, n=4000, d=3)
    est = pipeline.simulate(proto, pd.Series(["x", "y", "z", "x"] * 1000), 3, domain=dom)
    df = est.to_pandas()
    assert list(df.index) == ["x", "y", "z"] and df.index.name == "label"
    assert list(df.columns) == ["estimate", "stderr", "ci_low", "ci_high"]
    assert "DP" in df.attrs["privacy"]


def test_pyarrow_inputs():
    pa = pytest.importorskip("pyarrow")
    dom = Domain(["x", "y", "z"])
    arr = pa.array(["z", "x", "x"])
    assert dom.encode(arr).tolist() == [2, 0, 0]
    assert dom.encode(arr.dictionary_encode()).tolist() == [2, 0, 0]
    assert dom.encode(pa.chunked_array([["x"], ["y", "z"]])).tolist() == [0, 1, 2]
    assert Domain([1, 2, 3]).encode(pa.array([3, 1], type=pa.int32())).tolist() == [2, 0]
    with pytest.raises(ValidationError, match="outside the domain"):
        dom.encode(pa.array(["x", None]))


def test_encode_is_vectorized_for_a_million_labels():
    import time

    dom = Domain([f"item{i}" for i in range(100)])
    values = np.array(dom.labels)[np.random.default_rng(0).integers(0, 100, 1_000_000)]
    t0 = time.perf_counter()
    idx = dom.encode(values)
    assert time.perf_counter() - t0 < 5.0
    assert np.array_equal(np.array(dom.labels)[idx], values)


def test_trailing_nul_characters_are_kept():
    """numpy str arrays drop trailing NULs; lists of labels are kept as Python strings."""
    dom = Domain(["", "\x00", "a", "a\x00"])
    assert dom.size == 4
    assert dom.encode(["a\x00", "a", "\x00", ""]).tolist() == [3, 2, 1, 0]
    with pytest.raises(ValidationError):
        Domain(["", "0"]).encode(["\x00"])
