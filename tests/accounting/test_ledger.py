"""Per-user budget ledger."""

import json
import threading

import pytest

from shuffledp.accounting import BudgetExceededError, BudgetLedger, PrivacyStatement
from shuffledp.core import ValidationError


def S(eps, delta=0.0):
    return PrivacyStatement(eps, delta)


def test_cap_per_window_and_expiry():
    led = BudgetLedger(1.0, 1e-6, window=10.0)
    assert led.charge("alice", S(0.4, 1e-7), 0.0) == pytest.approx((0.6, 9e-7))
    led.charge("alice", S(0.4, 1e-7), 5.0)
    with pytest.raises(BudgetExceededError) as ei:
        led.charge("alice", S(0.4, 1e-7), 9.0)
    assert ei.value.remaining == pytest.approx((0.2, 8e-7))
    assert led.spent("alice", 9.0) == pytest.approx((0.8, 2e-7))  # refused charge left no trace
    # at t = 10 the first charge (t = 0) has left the window (t - 10, t]
    led.charge("alice", S(0.4, 1e-7), 10.0)
    assert led.remaining("alice", 10.0) == pytest.approx((0.2, 8e-7))
    # users are independent
    assert led.remaining("bob", 10.0) == (1.0, 1e-6)


def test_exact_cap_is_allowed_and_delta_cap_enforced():
    led = BudgetLedger(1.0, 0.0)
    for _ in range(10):
        led.charge(7, S(0.1), 1.0)  # fsum: 10 x 0.1 == 1.0 exactly
    assert led.remaining(7, 1.0) == (0.0, 0.0)
    assert not led.can_charge(7, S(1e-9), 2.0)
    with pytest.raises(BudgetExceededError):
        BudgetLedger(10.0, 0.0).charge("u", S(0.1, 1e-9), 0.0)  # any delta over a zero delta cap


def test_every_window_respects_the_cap():
    W, cap = 5.0, 1.0
    led = BudgetLedger(cap, 0.0, window=W)
    times = [0, 1, 2, 3, 4.5, 5, 6, 7.5, 9, 9.9, 10, 12, 14, 15]
    accepted = []
    for t in times:
        if led.can_charge("u", S(0.3), t):
            led.charge("u", S(0.3), t)
            accepted.append(t)
    assert accepted  # something was accepted and something refused
    assert len(accepted) < len(times)
    for s in [x / 4 for x in range(0, 80)]:  # every window (s - W, s] holds at most the cap
        assert sum(0.3 for t in accepted if s - W < t <= s) <= cap + 1e-12


def test_lifetime_window_and_serialisation():
    led = BudgetLedger(2.0, 1e-6)
    led.charge("a", S(1.5, 5e-7), 0.0)
    led.charge(3, S(0.5), 1.0)
    d = json.loads(json.dumps(led.to_dict()))
    led2 = BudgetLedger.from_dict(d)
    assert led2.remaining("a", 1e9) == pytest.approx((0.5, 5e-7))
    assert led2.remaining(3, 5.0) == pytest.approx((1.5, 1e-6))
    with pytest.raises(BudgetExceededError):
        led2.charge("a", S(0.6), 2.0)


def test_bad_inputs():
    with pytest.raises(ValidationError, match="eps_cap"):
        BudgetLedger(0.0)
    with pytest.raises(ValidationError, match="delta_cap"):
        BudgetLedger(1.0, 1.0)
    with pytest.raises(ValidationError, match="window"):
        BudgetLedger(1.0, 0.0, window=0.0)
    led = BudgetLedger(1.0)
    with pytest.raises(ValidationError, match="statement"):
        led.charge("a", (0.1, 0.0), 0.0)
    with pytest.raises(ValidationError, match="user"):
        led.charge(None, S(0.1), 0.0)
    with pytest.raises(ValidationError, match="time"):
        led.charge("a", S(0.1), float("nan"))
    led.charge("a", S(0.1), 5.0)
    with pytest.raises(ValidationError, match="time"):
        led.charge("a", S(0.1), 4.0)  # out of order
    assert led.spent("a", 5.0) == pytest.approx((0.1, 0.0))


def test_concurrent_charges_never_overspend():
    led = BudgetLedger(1.0, 0.0)
    ok = []

    def worker():
        for _ in range(50):
            try:
                led.charge("u", S(0.01), 0.0)
                ok.append(1)
            except BudgetExceededError:
                pass

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(ok) == 100
    assert led.spent("u", 0.0)[0] == pytest.approx(1.0)
