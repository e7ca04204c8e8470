"""The services' background loop: runs its step periodically, survives a failing step, stops."""

import logging
import threading

from shuffledp.service.periodic import PeriodicThread


def test_runs_survives_a_failure_and_stops(caplog):
    calls = []
    twice = threading.Event()

    def step():
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("user data must not be logged")
        if len(calls) >= 3:
            twice.set()

    t = PeriodicThread("test-loop", 0.01, step, logging.getLogger("test.periodic"), "test")
    with caplog.at_level(logging.ERROR, logger="test.periodic"):
        t.start()
        t.start()  # idempotent: one thread
        assert twice.wait(5.0)
        t.stop()
    n = len(calls)
    assert n >= 3
    assert not t._thread.is_alive()
    msgs = [r.getMessage() for r in caplog.records]
    assert "test round failed: KeyError" in msgs
    assert not any("user data" in m for m in msgs)
    assert sum(th.name == "test-loop" for th in threading.enumerate()) == 0


def test_non_positive_period_never_starts():
    t = PeriodicThread("never", 0.0, lambda: None, logging.getLogger("test.periodic"), "never")
    t.start()
    assert t._thread is None
    t.stop()
