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


# ----------------------------------------------------------------------------- every public function's parameters
# (review: "public accounting functions accept bad input and return wrong numbers", e.g.
# basic_composition([(-1, -0.5), (nan, 0.1)]) -> (nan, -0.4), rdp_gaussian(o, -1) computed as sigma = 1)

from shuffledp.accounting import (advanced_composition, basic_composition, gaussian_delta_exact,  # noqa: E402
                                  gaussian_epsilon_classic, gaussian_epsilon_exact, group_privacy,
                                  parallel_composition, subsampling_amplification, zcdp_to_delta, zcdp_to_epsilon)

NAN, INF = float("nan"), float("inf")
O = [2.0, 8.0]

BAD_CALLS = [
    # (id, call, parameter the error must name)
    ("basic-neg-eps-neg-delta", lambda: basic_composition([(-1, -0.5), (NAN, 0.1)]), "statements"),
    ("basic-nan-eps", lambda: basic_composition([(1.0, 0.0), (NAN, 0.1)]), "statements"),
    ("basic-delta-1", lambda: basic_composition([(1.0, 1.0)]), "statements"),
    ("basic-not-pair", lambda: basic_composition([1.0]), "statements"),
    ("basic-not-seq", lambda: basic_composition(3.0), "statements"),
    ("parallel-neg-eps", lambda: parallel_composition([(-1, 2.0)]), "statements"),
    ("parallel-delta-2", lambda: parallel_composition([(1.0, 2.0)]), "statements"),
    ("parallel-nan", lambda: parallel_composition([(NAN, 0.0)]), "statements"),
    ("advanced-neg", lambda: advanced_composition([-0.1], 1e-5), "epsilons"),
    ("advanced-nan", lambda: advanced_composition([0.1, NAN], 1e-5), "epsilons"),
    ("advanced-inf", lambda: advanced_composition([INF], 1e-5), "epsilons"),
    ("advanced-delta", lambda: advanced_composition([0.1], 0.0), "delta_prime"),
    ("subsampling-eps", lambda: subsampling_amplification(-1.0, 0.0, 0.5), "epsilon"),
    ("subsampling-q", lambda: subsampling_amplification(1.0, 0.0, 1.5), "q"),
    ("group-k", lambda: group_privacy((1.0, 1e-6), 0), "k"),
    ("group-tuple-eps", lambda: group_privacy((-1.0, 1e-6), 2), "statement"),
    ("group-tuple-delta", lambda: group_privacy((1.0, NAN), 2), "statement"),
    ("gauss-delta-neg-eps", lambda: gaussian_delta_exact(-1, 1), "epsilon"),
    ("gauss-delta-nan-eps", lambda: gaussian_delta_exact(NAN, 1), "epsilon"),
    ("gauss-delta-neg-mu", lambda: gaussian_delta_exact(1, -1), "mu"),
    ("gauss-eps-neg-mu", lambda: gaussian_epsilon_exact(1e-5, -1.0), "mu"),
    ("gauss-eps-nan-mu", lambda: gaussian_epsilon_exact(1e-5, NAN), "mu"),
    ("gauss-eps-delta", lambda: gaussian_epsilon_exact(1.5, 1.0), "delta"),
    ("classic-sigma", lambda: gaussian_epsilon_classic(1e-5, -3.0), "sigma"),
    ("classic-sens", lambda: gaussian_epsilon_classic(1e-5, 3.0, 0.0), "sensitivity"),
    ("rdp-gauss-sigma", lambda: rdp_gaussian(O, -1), "sigma"),
    ("rdp-gauss-sigma0", lambda: rdp_gaussian(O, 0.0), "sigma"),
    ("rdp-gauss-sens", lambda: rdp_gaussian(O, 1.0, NAN), "sensitivity"),
    ("rdp-zcdp-rho", lambda: rdp_zcdp(O, -0.1), "rho"),
    ("rdp-zcdp-xi", lambda: rdp_zcdp(O, 0.1, -1.0), "xi"),
    ("rdp-laplace-scale", lambda: rdp_laplace(O, -1.0), "scale"),
    ("rdp-laplace-sens", lambda: rdp_laplace(O, 1.0, INF), "sensitivity"),
    ("rdp-rr-eps", lambda: rdp_randomized_response(O, -1.0), "epsilon"),
    ("rdp-rr-k", lambda: rdp_randomized_response(O, 1.0, 1), "k"),
    ("rdp-rr-k-float", lambda: rdp_randomized_response(O, 1.0, 2.5), "k"),
    ("rdp-pure-neg", lambda: rdp_pure(O, -1), "epsilon"),
    ("rdp-pure-nan", lambda: rdp_pure(O, NAN), "epsilon"),
    ("rdp-psg-q", lambda: rdp_poisson_subsampled_gaussian(O, 2.0, 1.0), "q"),
    ("rdp-psg-q-neg", lambda: rdp_poisson_subsampled_gaussian(O, -0.1, 1.0), "q"),
    ("rdp-psg-sigma", lambda: rdp_poisson_subsampled_gaussian(O, 0.1, -1.0), "sigma"),
    ("to-eps-neg-rdp", lambda: rdp_to_epsilon(O, [-0.1, 0.2], 1e-5), "rdp"),
    ("to-eps-nan-rdp", lambda: rdp_to_epsilon(O, [NAN, 0.2], 1e-5), "rdp"),
    ("to-eps-delta", lambda: rdp_to_epsilon(O, [0.1, 0.2], 0.0), "delta"),
    ("to-delta-neg-rdp", lambda: rdp_to_delta(O, [0.1, -0.2], 1.0), "rdp"),
    ("to-delta-eps", lambda: rdp_to_delta(O, [0.1, 0.2], -1.0), "epsilon"),
    ("zcdp-eps-rho", lambda: zcdp_to_epsilon(-0.1, 1e-5), "rho"),
    ("zcdp-eps-delta", lambda: zcdp_to_epsilon(0.1, 1.0), "delta"),
    ("zcdp-delta-eps", lambda: zcdp_to_delta(0.1, NAN), "epsilon"),
]


@pytest.mark.parametrize("call,parameter", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_public_functions_refuse_bad_input(call, parameter):
    with pytest.raises(ValidationError) as e:
        call()
    assert e.value.parameter == parameter
    assert parameter in str(e.value)


def test_valid_edge_inputs_still_accepted():
    # eps = 0 and delta = 0 are legitimate statements; +inf eps means "no guarantee" and composes to inf
    assert basic_composition([(0.0, 0.0), (0.5, 1e-6)]) == (pytest.approx(0.5, rel=1e-9), 1e-6)
    assert basic_composition([(1.0, 0.0), (INF, 0.0)])[0] == INF
    assert parallel_composition([]) == (0.0, 0.0)
    assert parallel_composition([(0.3, 1e-7), (0.5, 0.0)]) == (0.5, 1e-7)  # a max: exact, not rounded
    assert gaussian_delta_exact(0.0, 0.0) == 0.0
    assert rdp_poisson_subsampled_gaussian(O, 0.0, 1.0).tolist() == [0.0, 0.0]
    assert rdp_to_epsilon(O, [INF, 0.2], 1e-5)[1] == 8.0  # an infinite order is just not chosen


def test_returned_epsilons_are_rounded_outward():
    """The package promises every epsilon rounded outward: each result is >= the float formula."""
    import math
    e = [0.1, 0.2, 0.3]
    assert basic_composition([(x, 0.0) for x in e])[0] > math.fsum(e)
    raw = math.sqrt(2 * math.log(1e5) * math.fsum(x * x for x in e)) + math.fsum(x * math.expm1(x) for x in e)
    assert advanced_composition(e, 1e-5) > raw
    assert subsampling_amplification(1.0, 0.0, 0.1)[0] > math.log1p(0.1 * math.expm1(1.0))
    assert gaussian_epsilon_classic(1e-5, 10.0) > math.sqrt(2 * math.log(1.25e5)) / 10.0
    assert zcdp_to_epsilon(0.1, 1e-5, conversion="naive") > 0.1 + 2 * math.sqrt(0.1 * math.log(1e5))
    orders = np.array([2.0, 8.0])
    rdp = rdp_gaussian(orders, 2.0)
    terms = rdp + np.log1p(-1 / orders) - (math.log(1e-5) + np.log(orders)) / (orders - 1)
    assert rdp_to_epsilon(orders, rdp, 1e-5)[0] > float(terms.min())
