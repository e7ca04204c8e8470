"""Event-style accountants: composition counts, neighbouring relations, delta split, (eps, delta) algebra."""

import math

import numpy as np
import pytest

from shuffledp.accounting import (AdvancedCompositionAccountant, ApproxDpEvent, BasicCompositionAccountant,
                                  ComposedEvent, GaussianEvent, LaplaceEvent, ParallelComposedEvent,
                                  PldAccountant, PoissonSampledEvent, PrivacyStatement, PureDpEvent, RandomizedResponseEvent,
                                  RdpAccountant, SelfComposedEvent, UnsupportedEventError, ZCdpAccountant, ZCdpEvent,
                                  advanced_composition, gaussian_delta_exact, gaussian_epsilon_exact, group_privacy,
                                  subsampling_amplification)
from shuffledp.core import ValidationError
from shuffledp.core.privacy import round_up

ACCOUNTANTS = [
    lambda nb="replace_one": BasicCompositionAccountant(nb),
    lambda nb="replace_one": AdvancedCompositionAccountant(nb),
    lambda nb="replace_one": RdpAccountant(neighbouring=nb),
    lambda nb="replace_one": ZCdpAccountant(nb),
    lambda nb="replace_one": PldAccountant(1e-3, nb),
]
EVENTS = [PureDpEvent(0.5), LaplaceEvent(2.0), GaussianEvent(3.0), RandomizedResponseEvent(math.log(3)),
          ZCdpEvent(0.01), ComposedEvent([LaplaceEvent(4.0), GaussianEvent(5.0)]),
          ParallelComposedEvent([LaplaceEvent(4.0), PureDpEvent(0.1)])]


@pytest.mark.parametrize("make", ACCOUNTANTS)
@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_count_is_honoured_for_every_event(make, event):
    """dp-accounting's PLD accountant ignores `count` for RR (spec §1.4); ours must not, for any event."""
    a = make()
    if not a.supports(event):
        pytest.skip(f"{type(a).__name__} does not support {type(event).__name__}")
    one_by_one = make()
    for _ in range(7):
        one_by_one.compose(event)
    counted = make().compose(event, 7)
    selfc = make().compose(SelfComposedEvent(event, 7))
    single = make().compose(event)
    e1, e7 = single.get_epsilon(1e-6), counted.get_epsilon(1e-6)
    assert e7 == pytest.approx(one_by_one.get_epsilon(1e-6), rel=1e-9)
    assert e7 == pytest.approx(selfc.get_epsilon(1e-6), rel=1e-9)
    assert e7 > e1 * 1.5  # composition really costs


def test_rr_composition_reference_F():
    # binary RR eps0 = ln 3, 100 compositions, delta=1e-5: RDP 93.444 (dp-accounting); basic 109.86
    rdp = RdpAccountant(neighbouring="replace_one").compose(RandomizedResponseEvent(math.log(3)), 100)
    assert rdp.get_epsilon(1e-5) == pytest.approx(93.444, abs=2e-3)
    basic = BasicCompositionAccountant("replace_one").compose(RandomizedResponseEvent(math.log(3)), 100)
    assert basic.get_epsilon(1e-5) == pytest.approx(100 * math.log(3), rel=1e-9)
    # the PLD reference 90.79 is below both upper bounds, as it must be
    assert 90.79 < rdp.get_epsilon(1e-5) < basic.get_epsilon(1e-5)


LAPLACE_E = [((1.0, 10), 10.0, 32.36, 9.990), ((1.0, 100), 100.0, 219.8, 70.778),
             ((0.1, 10), 1.0, 1.623, 0.990), ((0.1, 100), 10.0, 5.850, 4.533)]


@pytest.mark.parametrize("case", LAPLACE_E, ids=str)
def test_laplace_composition_reference_E(case):
    (e0, k), basic, drv, rdp = case
    ev = LaplaceEvent(1.0 / e0)
    assert BasicCompositionAccountant().compose(ev, k).get_epsilon(1e-5) == pytest.approx(basic, rel=1e-9)
    assert advanced_composition([e0] * k, 1e-5) == pytest.approx(drv, rel=1e-3)
    adv = AdvancedCompositionAccountant().compose(ev, k)
    assert adv.get_epsilon(1e-5) == pytest.approx(min(basic, drv), rel=1e-3)
    assert RdpAccountant().compose(ev, k).get_epsilon(1e-5) == pytest.approx(rdp, abs=1e-3)


SEED001_DRV = {1: 0.12380, 10: 0.43152, 100: 1.52838, 500: 3.84647}


@pytest.mark.parametrize("k", sorted(SEED001_DRV))
def test_advanced_composition_delta_split_seed001(k):
    # delta_i = delta/2k per Gaussian (classic calibration), delta' = delta/2 (seed 001's split)
    sigma, delta = 200.0, 1e-5
    gi = math.sqrt(2 * math.log(1.25 / (delta / (2 * k)))) / sigma
    assert advanced_composition([gi] * k, delta / 2) == pytest.approx(SEED001_DRV[k], abs=1e-5)
    acc = AdvancedCompositionAccountant(gaussian_conversion="classic").compose(GaussianEvent(sigma), k)
    got = acc.get_epsilon(delta)
    assert got == pytest.approx(min(SEED001_DRV[k], k * gi), abs=1e-5)
    assert acc.last_method == ("advanced" if SEED001_DRV[k] < k * gi else "basic")


def test_fixed_deltas_are_charged_before_the_split():
    acc = AdvancedCompositionAccountant().compose(ApproxDpEvent(0.1, 4e-6), 2)
    assert acc.get_epsilon(1e-5) < math.inf
    assert acc.get_epsilon(8e-6) == pytest.approx(0.2)  # nothing left for delta': basic composition
    assert acc.last_method == "basic"
    assert acc.get_epsilon(7.9e-6) == math.inf
    basic = BasicCompositionAccountant().compose(ApproxDpEvent(0.1, 4e-6), 2)
    assert basic.get_epsilon(8e-6) == pytest.approx(0.2)
    assert basic.get_epsilon(7.9e-6) == math.inf
    assert basic.get_delta(0.2) == pytest.approx(8e-6)
    assert basic.get_delta(0.19) == 1.0


def test_gaussian_exact_profile():
    # spec §1.3 C: one Gaussian, sigma = 1, delta = 1e-5 -> 4.377178; analytic sigma 3.7306 at (1, 1e-5)
    assert gaussian_epsilon_exact(1e-5, 1.0) == pytest.approx(4.377178, abs=1e-6)
    assert gaussian_delta_exact(1.0, 1 / 3.7306) == pytest.approx(1e-5, rel=1e-3)
    # seed 001 exact column: k=500 compositions of sigma=200 -> 0.38469
    assert gaussian_epsilon_exact(1e-5, math.sqrt(500) / 200) == pytest.approx(0.38469, abs=1e-5)
    # returned eps really satisfies the inequality
    e = gaussian_epsilon_exact(1e-7, 0.3)
    assert gaussian_delta_exact(e, 0.3) <= 1e-7


def test_get_delta_round_trip_all_backends():
    for make in ACCOUNTANTS:
        a = make().compose(GaussianEvent(10.0), 20).compose(LaplaceEvent(50.0), 5)
        eps = a.get_epsilon(1e-6)
        d = a.get_delta(eps)
        assert d <= 1e-6 * (1 + 1e-6)
        assert a.get_epsilon(d) <= eps * (1 + 1e-9)


def test_neighbouring_relations_enforced():
    with pytest.raises(UnsupportedEventError, match="replace_one"):
        RdpAccountant().compose(RandomizedResponseEvent(1.0))
    with pytest.raises(UnsupportedEventError, match="add_remove_one"):
        RdpAccountant(neighbouring="replace_one").compose(PoissonSampledEvent(0.1, GaussianEvent(1.0)))
    assert not RdpAccountant().supports(SelfComposedEvent(RandomizedResponseEvent(1.0), 3))
    with pytest.raises(ValidationError, match="neighbouring"):
        RdpAccountant(neighbouring="swap")


def test_unsupported_event_leaves_state_unchanged():
    a = RdpAccountant().compose(GaussianEvent(2.0))
    before = a.get_epsilon(1e-5)
    with pytest.raises(UnsupportedEventError):
        a.compose(ComposedEvent([GaussianEvent(1.0), ApproxDpEvent(1.0, 1e-6)]))
    assert a.get_epsilon(1e-5) == before and len(a.ledger) == 1
    with pytest.raises(UnsupportedEventError):
        ZCdpAccountant().compose(PoissonSampledEvent(0.1, GaussianEvent(1.0)))
    with pytest.raises(UnsupportedEventError):
        BasicCompositionAccountant().compose(ParallelComposedEvent([GaussianEvent(1.0)]))


def test_parallel_composition_takes_the_max():
    par = ParallelComposedEvent([LaplaceEvent(1.0), LaplaceEvent(2.0), PureDpEvent(0.3)])
    assert BasicCompositionAccountant().compose(par).get_epsilon(1e-6) == pytest.approx(1.0)
    r1 = RdpAccountant().compose(par, 50).get_epsilon(1e-6)
    assert r1 == pytest.approx(RdpAccountant().compose(LaplaceEvent(1.0), 50).get_epsilon(1e-6))
    assert RdpAccountant().compose(par).get_epsilon(1e-6) == pytest.approx(1.0)  # pure bound wins at k=1


def test_rdp_never_worse_than_pure_basic_composition():
    acc = RdpAccountant(neighbouring="replace_one").compose(RandomizedResponseEvent(0.5), 2)
    assert acc.get_epsilon(1e-6) == pytest.approx(1.0)
    assert acc.get_delta(1.0) == 0.0
    acc.compose(GaussianEvent(1.0))  # no longer pure: the RDP value is used
    assert acc.get_epsilon(1e-6) > 1.0


def test_subsampling_amplification_seed003():
    e, d = subsampling_amplification(1.0, 1e-6, 0.01)
    assert e == pytest.approx(math.log(1 + 0.01 * (math.e - 1)))
    assert d == pytest.approx(1e-8)
    acc = BasicCompositionAccountant().compose(PoissonSampledEvent(0.01, ApproxDpEvent(1.0, 1e-6)), 10)
    assert acc.get_epsilon(1e-6) == pytest.approx(10 * e, rel=1e-9)
    with pytest.raises(ValidationError, match="q"):
        subsampling_amplification(1.0, 1e-6, 1.5)


def test_group_privacy():
    s = group_privacy(PrivacyStatement(0.5, 1e-8), 3)
    assert s.eps == pytest.approx(1.5) and s.eps >= 1.5
    assert s.delta == pytest.approx(3 * math.exp(1.0) * 1e-8)
    assert group_privacy(PrivacyStatement(0.5), 4).delta == 0.0
    with pytest.raises(ValidationError, match="k"):
        group_privacy(PrivacyStatement(0.5), 0)
    with pytest.raises(ValidationError, match="delta >= 1"):
        group_privacy(PrivacyStatement(5.0, 1e-3), 10)


def test_outward_rounding():
    acc = BasicCompositionAccountant().compose(PureDpEvent(0.1), 3)
    assert acc.get_epsilon(1e-6) > 0.30000000000000004 - 1e-17  # never below the exact sum
    assert acc.get_epsilon(1e-6) == round_up(math.fsum([0.1] * 3))
    st = acc.statement(1e-6)
    assert st.eps == acc.get_epsilon(1e-6) and st.neighbouring == "add_remove_one"


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_event_parameters(bad):
    with pytest.raises(ValidationError, match="epsilon"):
        PureDpEvent(bad)
    with pytest.raises(ValidationError):
        GaussianEvent(bad)
    with pytest.raises(ValidationError):
        LaplaceEvent(bad)


def test_bad_compose_arguments():
    a = RdpAccountant()
    with pytest.raises(ValidationError, match="count"):
        a.compose(GaussianEvent(1.0), 0)
    with pytest.raises(ValidationError, match="event"):
        a.compose("gaussian")
    with pytest.raises(ValidationError, match="sampling_probability"):
        PoissonSampledEvent(1.5, GaussianEvent(1.0))
    with pytest.raises(ValidationError, match="k"):
        RandomizedResponseEvent(1.0, k=1)


def test_empty_accountant():
    assert RdpAccountant().get_epsilon(1e-5) == 0.0
    assert RdpAccountant().get_delta(0.0) == 0.0
    assert ZCdpAccountant().get_epsilon(1e-5) == 0.0
    assert np.isfinite(BasicCompositionAccountant().get_epsilon(0.5))
