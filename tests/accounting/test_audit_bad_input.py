"""Bad input to the public RDP functions (issue #3: "orders <= 1 — clear errors").

The accountants already validate their order grid (``test_rdp.test_bad_orders``); these tests
cover the module-level curve and conversion functions, which are public API too and used to
return numbers (e.g. ``rdp_gaussian([0.5], 1)`` or ``(inf, 1.0)`` from ``rdp_to_epsilon``).
"""

import numpy as np
import pytest

from shuffledp.accounting import (rdp_gaussian, rdp_laplace, rdp_poisson_subsampled_gaussian, rdp_pure,
                                  rdp_randomized_response, rdp_to_delta, rdp_to_epsilon, rdp_zcdp)
from shuffledp.core import ValidationError

CURVES = [
    lambda o: rdp_gaussian(o, 1.0),
    lambda o: rdp_laplace(o, 1.0),
    lambda o: rdp_randomized_response(o, 1.0, 3),
    lambda o: rdp_pure(o, 1.0),
    lambda o: rdp_zcdp(o, 0.1),
    lambda o: rdp_poisson_subsampled_gaussian(o, 0.01, 1.0),
]


@pytest.mark.parametrize("curve", CURVES)
@pytest.mark.parametrize("bad", [[0.5], [1.0], [2.0, 1.0], [float("nan")], [float("inf")], []])
def test_curves_refuse_orders_not_above_one(curve, bad):
    with pytest.raises(ValidationError, match="orders") as e:
        curve(bad)
    assert e.value.parameter == "orders"


@pytest.mark.parametrize("bad", [[1.0], [0.5, 2.0], [float("nan")], []])
def test_conversions_refuse_orders_not_above_one(bad):
    rdp = np.full(len(bad), 0.1)
    with pytest.raises(ValidationError, match="orders"):
        rdp_to_epsilon(bad, rdp, 1e-5)
    with pytest.raises(ValidationError, match="orders"):
        rdp_to_delta(bad, rdp, 1.0)


def test_conversions_refuse_misaligned_curve():
    with pytest.raises(ValidationError, match="rdp"):
        rdp_to_epsilon([2.0, 4.0], [0.1], 1e-5)
    with pytest.raises(ValidationError, match="rdp"):
        rdp_to_delta([2.0, 4.0], [0.1, 0.2, 0.3], 1.0)


def test_valid_grids_are_unchanged_and_unsorted_order_kept():
    orders = np.array([8.0, 2.0, 32.0])
    assert np.array_equal(rdp_gaussian(orders, 2.0), orders / 8.0)
    eps, a = rdp_to_epsilon(orders, rdp_gaussian(orders, 2.0), 1e-5)
    assert a in orders and eps > 0
    assert rdp_gaussian(3.0, 1.0) == pytest.approx(1.5)  # a scalar order is still accepted
