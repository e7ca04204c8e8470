"""The central model's client side: the exact value, checked, and its exact histogram."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from shuffledp.central.curator_input import ExactHistogramInput
from shuffledp.core import ValidationError


@given(st.integers(1, 64).flatmap(lambda d: st.tuples(st.just(d), st.lists(st.integers(0, d - 1), min_size=1))))
def test_reports_are_the_values_and_aggregate_is_their_histogram(case) -> None:
    d, values = case
    m = ExactHistogramInput(d)
    r = m.randomize(np.asarray(values))
    np.testing.assert_array_equal(r["y"], values)
    np.testing.assert_array_equal(m.aggregate(m.validate_reports(r)), np.bincount(values, minlength=d))
    assert tuple((k, v.dtype.str, v.shape[1:]) for k, v in r.items()) == m.report_schema()


def test_no_local_guarantee_and_clear_errors() -> None:
    c, t = ExactHistogramInput(4), ExactHistogramInput(4, model="none")
    assert c.epsilon == math.inf and c.name == "central_histogram" and t.name == "test_identity"
    e = c.estimate(np.array([1, 0, 0, 1]), 2)
    assert e.privacy.eps == math.inf and e.privacy.model == "central"
    assert t.estimate(np.array([1, 0, 0, 1]), 2).privacy.eps == math.inf
    for bad in (0, -1, 2.0, True, "4"):
        with pytest.raises(ValidationError, match="d must be"):
            ExactHistogramInput(bad)
    with pytest.raises(ValidationError, match="model"):
        ExactHistogramInput(4, model="local")
    with pytest.raises(ValidationError):
        c.randomize(np.array([4]))
    with pytest.raises(ValidationError, match="'y'"):
        c.validate_reports({"y": np.array([0]), "z": np.array([1])})
