"""Exact privacy of every key-value client path (sampling, padding, discretization, perturbation)."""

import itertools
import math

import numpy as np
import pytest

from shuffledp.local.keyvalue import HISKV, PCKVGRR, PrivKVM, keyvalue_mechanism
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio

D = 3
#: user sets over keys [0, 3): empty, singletons at the value extremes, and sets longer than ell
INPUTS = [
    (),
    ((0, 1.0),),
    ((0, -1.0),),
    ((1, 0.0),),
    ((2, 1.0),),
    ((0, 1.0), (1, -1.0)),
    ((0, -1.0), (2, 1.0)),
    ((0, 1.0), (1, 1.0), (2, 1.0)),
    ((0, -1.0), (1, -1.0), (2, -1.0)),
    ((1, 0.3), (2, -0.7)),
]

CASES = [
    ("privkv", {}), ("kvue", {}), ("kvoh", {}), ("ldpkv", {}), ("privkvm", {"rounds": 2}),
    ("privkvm", {"rounds": 2, "schedule": "even"}),
    ("pckv-ue", {"ell": 1}), ("pckv-ue", {"ell": 2}), ("pckv-grr", {"ell": 1}), ("pckv-grr", {"ell": 2}),
    ("pckv-grr", {"ell": 4}), ("hiskv", {"ell": 2}), ("hiskv", {"ell": 2, "c_frac": 0.8, "beta": 0.2}),
    ("hiskv", {"ell": 1, "beta": 0.0}), ("hiskv", {"ell": 2, "amplify": True}),
    ("hiskv", {"ell": 4, "amplify": True, "c_frac": 0.5, "beta": 0.0}),
]


def all_reports(m):
    """Every report a mechanism can emit (small domains)."""
    name = m.name
    if name in ("privkv", "kvue", "ldpkv"):
        j, s = zip(*itertools.product(range(m.d), range(3)))
        return {"j": np.array(j), "s": np.array(s)}
    if name == "privkvm":
        cells = list(itertools.product(range(m.d), range(3)))
        combos = list(itertools.product(cells, repeat=m.rounds))
        return {"j": np.array([[c[0] for c in t] for t in combos]), "s": np.array([[c[1] for c in t] for t in combos])}
    if name == "kvoh":
        rows = list(itertools.product(range(m.d), itertools.product((0, 1), repeat=3)))
        return {"j": np.array([r[0] for r in rows]), "bits": np.array([r[1] for r in rows])}
    if name == "pckv-grr":
        k, y = zip(*itertools.product(range(m.d_ext), (1, -1)))
        return {"k": np.array(k), "y": np.array(y)}
    if name == "pckv-ue":
        return {"y": np.array(list(itertools.product((-1, 0, 1), repeat=m.d_ext)))}
    if name == "hiskv":
        k, y = zip(*itertools.product(range(m.d_ext), (1, -1)))
        nl = m.max_length if m.beta > 0 else 0  # no OETL report can occur when beta = 0
        return {"phase": np.r_[np.zeros(nl), np.ones(len(k))].astype(int),
                "length": np.r_[np.arange(nl), -np.ones(len(k))].astype(int),
                "k": np.r_[-np.ones(nl), k].astype(int), "y": np.r_[np.zeros(nl), y].astype(int)}
    raise AssertionError(name)


@pytest.mark.parametrize("eps", [0.5, math.log(3), 2.0])
@pytest.mark.parametrize("name,params", CASES)
def test_exact_privacy_full_client_path(name, params, eps, rng):
    params = dict(params)
    if "c_frac" in params:  # c in [1, e^eps): take a point 80% of the way
        top = params.get("ell", 1) * math.expm1(eps) + 1 if params.get("amplify") else math.exp(eps)
        params["c"] = 1 + params.pop("c_frac") * (top - 1)
    m = keyvalue_mechanism(name, eps, D, **params)
    if name == "privkvm":  # worst case: public fake means at the extremes
        m.fake_means[:] = np.array([1.0, -1.0, 0.3])
    reports = sweep_reports(m, INPUTS, 60, rng)
    # every produced report is explained by the exact probabilities of its own input
    assert worst_case_log_ratio(m, reports, INPUTS) <= eps + 1e-9
    allr = all_reports(m)
    probs = np.stack([m.probabilities(allr, x) for x in INPUTS])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)  # a distribution per input
    assert worst_case_log_ratio(m, allr, INPUTS) <= eps + 1e-9


def test_pckv_grr_tight_and_per_pair_grr_not_private():
    eps = math.log(3)
    m = PCKVGRR(eps, D, ell=2)
    assert worst_case_log_ratio(m, all_reports(m), INPUTS) == pytest.approx(eps, abs=1e-9)
    # the per-pair GRR alone (no sampling mixture) is not eps-LDP at ell = 2 (spec C.5): ratio 5 > 3
    assert m.p1 / m.q2 == pytest.approx(5.0)


def test_hiskv_is_tight_and_checker_catches_a_broken_family():
    eps = 1.0
    m = HISKV(eps, D, ell=1, c=2.0, beta=0.0)
    assert worst_case_log_ratio(m, all_reports(m), INPUTS) == pytest.approx(eps, abs=1e-9)
    # with ell > 1 the sampling mixture leaves slack (not tight): the bound is still eps
    m2 = HISKV(eps, D, ell=2, c=2.0, beta=0.0)
    assert worst_case_log_ratio(m2, all_reports(m2), INPUTS) < eps
    # the seed's literal reading: p1 at the GRR value e^eps/(e^eps + d' - 1) and q1 > q2 -> not eps-LDP
    e, cells = math.exp(eps), 2 * m.d_ext
    broken = HISKV(eps, D, ell=1, beta=0.0)
    broken.p1 = e / (e + cells - 1)
    broken.q1 = 2.0 / (e + cells - 1)
    broken.q2 = (1 - broken.p1 - broken.q1) / (cells - 2)
    assert worst_case_log_ratio(broken, all_reports(broken), INPUTS) > eps + 0.01


def test_privkv_exact_ratio_below_sum():
    eps = 2.0
    m = keyvalue_mechanism("privkv", eps, D)
    e2 = math.exp(m.eps2)
    expect = max(m.eps2, m.eps1 + math.log(2 * e2 / (e2 + 1)))
    assert worst_case_log_ratio(m, all_reports(m), INPUTS) == pytest.approx(expect, abs=1e-9)


def test_privkvm_reaches_budget_at_extreme_fake_means():
    eps = 2.0
    m = PrivKVM(eps, D, rounds=2)
    m.fake_means[:] = -1.0
    assert worst_case_log_ratio(m, all_reports(m), INPUTS) == pytest.approx(eps, abs=1e-9)


@pytest.mark.parametrize("ell", [2, 3])
def test_amplified_hiskv_is_tight_and_equals_pckv_grr_at_c1(ell):
    eps = 1.0
    m = HISKV(eps, D, ell=ell, beta=0.0, amplify=True)
    assert worst_case_log_ratio(m, all_reports(m), INPUTS) == pytest.approx(eps, abs=1e-9)
    g = PCKVGRR(eps, D, ell=ell)
    assert (m.p1, m.q1, m.q2) == pytest.approx((g.p1, g.q1, g.q2))
    # one step beyond eps' breaks the guarantee: the checker sees it
    over = HISKV(eps, D, ell=ell, beta=0.0, amplify=True)
    from shuffledp.local.keyvalue import hiskv_cell_probabilities
    over.p1, over.q1, over.q2 = hiskv_cell_probabilities(over.cell_epsilon + 0.2, 2 * over.d_ext, 1.0)
    assert worst_case_log_ratio(over, all_reports(over), INPUTS) > eps + 0.05
