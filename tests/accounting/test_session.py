"""PrivacySession: a budget that refuses (boundary, composition = the accountant's, nothing charged on refusal)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from shuffledp.accounting import (AdvancedCompositionAccountant, BasicCompositionAccountant, BudgetExceededError,
                                  PldAccountant, RdpAccountant)
from shuffledp.accounting.events import ApproxDpEvent, GaussianEvent, PureDpEvent
from shuffledp.accounting.session import BudgetExceeded, PrivacySession
from shuffledp.core.errors import ValidationError
from shuffledp.core.privacy import PrivacyStatement as P


def snapshot(s):
    return (len(s.ledger), s.remaining(), s.spent().eps, repr(s))


def test_basic_accepts_exactly_the_budget_and_refuses_one_ulp_more():
    s = PrivacySession(1.0, 1e-6)
    for _ in range(4):
        s.charge(P(0.25))
    assert s.remaining() == (0.0, 1e-6) and s.spent().eps == 1.0
    before = snapshot(s)
    with pytest.raises(BudgetExceeded, match="nothing was charged") as e:
        s.charge(P(5e-324))  # the smallest positive float
    assert isinstance(e.value, BudgetExceededError) and e.value.remaining == (0.0, 1e-6)
    assert snapshot(s) == before


def test_basic_delta_boundary_is_exact():
    s = PrivacySession(10.0, 1e-6)
    assert Fraction(5e-7) * 2 == Fraction(1e-6)  # binary scaling: the two deltas meet the budget exactly
    s.charge(P(0.1, 5e-7))
    s.charge(P(0.1, 5e-7))
    assert len(s.ledger) == 2 and s.remaining()[1] == 0.0
    with pytest.raises(BudgetExceeded, match="delta does not fit"):
        s.charge(P(0.1, 1e-300))
    s.charge(P(0.1))  # a pure release still fits
    assert len(s.ledger) == 3


def test_float_sum_that_rounds_to_the_budget_is_still_refused():
    # ten float(0.1) sum exactly to slightly more than 1: the tenth is refused
    s = PrivacySession(1.0)
    for _ in range(9):
        s.charge(P(0.1))
    assert sum(Fraction(0.1) for _ in range(10)) > 1
    with pytest.raises(BudgetExceeded):
        s.charge(P(0.1))


def test_count_composes_k_times_and_refusal_is_all_or_nothing():
    s = PrivacySession(1.0)
    s.charge(P(0.25), count=3)
    with pytest.raises(BudgetExceeded):
        s.charge(P(0.25), count=2)
    assert s.remaining()[0] == 0.25 and len(s.ledger) == 1


@pytest.mark.parametrize("name, make", [
    ("basic", lambda: BasicCompositionAccountant("replace_one")),
    ("advanced", lambda: AdvancedCompositionAccountant("replace_one")),
    ("pld", lambda: PldAccountant(neighbouring="replace_one")),
])
def test_composition_matches_the_accountant(name, make):
    statements = [P(0.3, 1e-7), P(0.05), P(0.2, 2e-7), P(0.1, 1e-8)]
    s = PrivacySession(50.0, 1e-5, accountant=name)
    acc = make()
    for st in statements * 5:
        s.charge(st)
        acc.compose(PureDpEvent(st.eps) if st.delta == 0 else ApproxDpEvent(st.eps, st.delta))
        if name == "basic":  # exact sums; the accountant's query rounds up by ~1e-12
            assert acc.get_epsilon(1e-5) == pytest.approx(s.spent().eps, rel=1e-11)
            assert s.spent().eps <= acc.get_epsilon(1e-5)
        else:
            assert s.spent().eps == acc.get_epsilon(1e-5)


def test_rdp_with_gaussian_events_matches_and_refuses_at_the_accountant_epsilon():
    ev = GaussianEvent(sigma=5.0)
    acc = RdpAccountant(neighbouring="replace_one")
    eps = []
    for k in range(1, 30):
        acc.compose(ev)
        eps.append(acc.get_epsilon(1e-6))
    budget = eps[9]  # exactly the accountant's epsilon after 10 releases
    s = PrivacySession(budget, 1e-6, accountant="rdp")
    for _ in range(10):
        s.charge(ev)
    assert s.spent().eps == budget
    with pytest.raises(BudgetExceeded):
        s.charge(ev)
    assert len(s.ledger) == 10


def test_rdp_refuses_approx_statements_with_a_hint_and_charges_nothing():
    s = PrivacySession(1.0, 1e-6, accountant="rdp")
    with pytest.raises(ValidationError, match="pld") as e:
        s.charge(P(0.1, 1e-8))
    assert e.value.parameter == "statement" and s.ledger == []


def test_infinite_statement_and_wrong_neighbouring_are_refused():
    s = PrivacySession(1.0, 1e-6)
    with pytest.raises(BudgetExceeded, match="inf"):
        s.charge(P(math.inf))
    with pytest.raises(ValidationError, match="neighbouring") as e:
        s.charge(P(0.1, 0.0, neighbouring="add_remove_one"))
    assert e.value.parameter == "statement" and s.ledger == []


@pytest.mark.parametrize("kw, parameter", [
    ({"epsilon": 0}, "epsilon"), ({"epsilon": 1, "delta": 1.0}, "delta"),
    ({"epsilon": 1, "accountant": "magic"}, "accountant"), ({"epsilon": 1, "neighbouring": "x"}, "neighbouring"),
])
def test_bad_parameters(kw, parameter):
    with pytest.raises(ValidationError) as e:
        PrivacySession(**kw)
    assert e.value.parameter == parameter


def test_run_charges_the_protocol_and_refusal_runs_nothing():
    from shuffledp.shuffle import protocol

    n = 20_000
    proto = protocol("hist_kr", epsilon=0.5, delta=1e-7, n=n, d=4)
    st = proto.privacy(n)
    s = PrivacySession(1.2, 1e-6, accountant="basic")
    values = np.arange(n) % 4
    est = s.run(proto, values, np.random.default_rng(1))
    assert est.n == n and s.ledger[0].charged == st and "hist_kr" in s.ledger[0].what
    s.run(proto, values, np.random.default_rng(2), simulate=True)
    assert s.spent().eps == pytest.approx(2 * st.eps)
    rng = np.random.default_rng(3)
    state = rng.bit_generator.state
    before = snapshot(s)
    with pytest.raises(BudgetExceeded):
        s.run(proto, values, rng)
    assert rng.bit_generator.state == state  # refused before anything ran
    assert snapshot(s) == before


def test_a_failed_run_charges_nothing():
    from shuffledp.shuffle import protocol

    proto = protocol("hist_kr", epsilon=0.5, delta=1e-7, n=20_000, d=4)
    s = PrivacySession(10.0, 1e-6)  # the session would accept privacy(100) (eps_l-LDP)...
    with pytest.raises(ValidationError):  # ...but the pipeline refuses fewer users than calibrated for
        s.run(proto, np.zeros(100, dtype=np.int64), 1)
    assert s.ledger == [] and s.remaining() == (10.0, 1e-6)


def test_local_oracle_reports_are_charged_once():
    from shuffledp.local import frequency_oracle

    oracle = frequency_oracle("grr", 0.5, 4)
    s = PrivacySession(1.0)
    reports = s.randomize(oracle, np.arange(1000) % 4, 1)
    assert oracle.estimate(oracle.aggregate(reports), 1000).values.shape == (4,)
    s.randomize(oracle, np.arange(1000) % 4, 2)
    with pytest.raises(BudgetExceeded):
        s.randomize(oracle, np.arange(1000) % 4, 3)
    assert [c.charged.model for c in s.ledger] == ["local", "local"]


def test_central_release_charges_once_or_per_coordinate():
    from shuffledp.central.mechanisms import GaussianMechanism, LaplaceMechanism

    lap = LaplaceMechanism(epsilon=0.25, sensitivity=1.0)
    s = PrivacySession(1.0, 1e-6)
    s.release(lap, 10.0)
    s.release(lap, [1.0, 2.0])  # one L1 query: one charge
    assert s.remaining()[0] == 0.5
    gauss = GaussianMechanism(0.125, 1e-7, 1.0)
    with pytest.raises(BudgetExceeded):
        s.release(gauss, [1.0, 2.0, 3.0, 4.0, 5.0], per_coordinate=True)
    s.release(gauss, [1.0, 2.0, 3.0, 4.0], per_coordinate=True)
    assert s.remaining()[0] == 0.0 and s.ledger[-1].count == 4
    assert s.remaining()[1] == pytest.approx(1e-6 - 4e-7)


def test_repr_and_str_are_a_readable_ledger():
    s = PrivacySession(2.0, 1e-6, accountant="basic")
    s.charge(P(0.5, 1e-7), what="daily histogram")
    r = repr(s)
    assert "budget=(2, 1e-06)" in r and "releases=1" in r and "remaining=(1.5" in r
    assert "#1 daily histogram" in str(s)
    for i in range(30):
        s.charge(P(0.01), what=f"day {i}")
    assert "more" in str(s) and len(str(s).splitlines()) < 25
