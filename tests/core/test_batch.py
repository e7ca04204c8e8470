"""The columnar batch helpers shared by local reports and protocol messages."""

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.core.batch import concat_rows, n_rows, take_rows
from shuffledp.local.base import concat_reports, n_reports, take_reports
from shuffledp.shuffle.base import concat_messages, n_messages, take_messages


def test_one_implementation_under_the_old_names():
    assert n_reports is n_rows and n_messages is n_rows
    assert concat_reports is concat_rows and concat_messages is concat_rows
    assert take_reports is take_rows and take_messages is take_rows


def test_rows_concat_take():
    a = {"x": np.arange(3), "y": np.zeros((3, 2))}
    b = {"y": np.ones((2, 2)), "x": np.arange(3, 5)}
    both = concat_rows([a, {}, b])
    assert n_rows(both) == 5 and n_rows({}) == 0
    np.testing.assert_array_equal(both["x"], np.arange(5))
    np.testing.assert_array_equal(take_rows(both, np.array([4, 0]))["x"], [4, 0])
    assert concat_rows([]) == {} and concat_rows([{}, {}]) == {}


@pytest.mark.parametrize("call, parameter", [
    (lambda: concat_rows([{"x": np.arange(2)}, {"z": np.arange(2)}]), "parts"),
    (lambda: concat_rows([{"x": np.arange(2), "y": np.arange(3)}]), "parts"),
    (lambda: concat_rows({"x": np.arange(2)}), "parts"),
    (lambda: concat_rows([np.arange(2)]), "parts"),
    (lambda: n_rows({"x": np.arange(2), "y": np.arange(3)}), "batch"),
    (lambda: n_rows({"x": 1.0}), "batch"),
    (lambda: take_rows({"x": np.arange(2), "y": np.arange(3)}, slice(0, 1)), "batch"),
])
def test_bad_batches_name_the_parameter(call, parameter):
    with pytest.raises(ValidationError) as e:
        call()
    assert e.value.parameter == parameter
