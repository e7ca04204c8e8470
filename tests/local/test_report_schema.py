"""Every registry oracle declares one report layout, and every input gets it.

A deployment seals reports in ``report_schema()`` and refuses any other layout; a layout that
varied with the input would leak the input through the envelope's length. So the declared
layout must be the layout of the reports of *every* input, for every oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.local import FREQUENCY_ORACLES, MEAN_ORACLES, frequency_oracle, mean_oracle


def _layout(reports: dict) -> tuple:
    return tuple((k, np.asarray(v).dtype.newbyteorder("<").str, tuple(np.shape(v)[1:]))
                 for k, v in sorted(reports.items()))


@pytest.mark.parametrize("eps", [0.5, 4.0])
@pytest.mark.parametrize("name", sorted(FREQUENCY_ORACLES))
def test_frequency_oracle_layout_is_the_same_for_every_input(name: str, eps: float) -> None:
    d = 11
    mech = frequency_oracle(name, eps, d)
    schema = mech.report_schema()
    assert schema and [c for c, _, _ in schema] == sorted(c for c, _, _ in schema)
    rng = np.random.default_rng(5)
    for x in range(d):
        assert _layout(mech.randomize(np.full(7, x), rng)) == schema, (name, x)
    assert _layout(mech.randomize(np.arange(d), rng)) == schema


@pytest.mark.parametrize("name", sorted(MEAN_ORACLES))
def test_mean_oracle_layout_is_the_same_for_every_input(name: str) -> None:
    mech = mean_oracle(name, 1.0)
    schema = mech.report_schema()
    rng = np.random.default_rng(6)
    for x in (-1.0, -0.37, 0.0, 0.5, 1.0):
        assert _layout(mech.randomize(np.full(5, x), rng)) == schema, (name, x)
    assert mech.example_values(3).shape == (3,)


def test_multi_dimensional_mean_oracle_examples_have_dim_columns() -> None:
    mech = mean_oracle("pm", 1.0, dim=3)
    assert mech.example_values(2).shape == (2, 3)
    assert _layout(mech.randomize(np.full((4, 3), 0.25), np.random.default_rng(1))) == mech.report_schema()
    with pytest.raises(ValidationError, match="n"):
        mech.example_values(0)
