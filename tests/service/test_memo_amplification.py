"""Memoized randomness and amplification.

A client that re-sends a memoized randomized message lets the analyzer difference two batches: the
other users' repeated reports cancel and the difference is one user's report. So no batch of such a
task claims amplification (:attr:`TaskConfig.reports_repeat`); the statement is the local one. The
defaults draw fresh randomness per report and keep the amplified statement.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from shuffledp.local import frequency_oracle
from shuffledp.service.analyzer import protocol_statement
from shuffledp.service.config import ClientPolicy, create_task_config


def _grr_task(memoize: bool | None, mechanism: dict | None = None):
    policy = {} if memoize is None else {"client_policy": {"max_reports_per_window": 1, "max_reports_per_day": 1,
                                                            "memoize": memoize}}
    return create_task_config(name="t", mechanism=mechanism or {"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                                "params": {"d": 8}},
                              target_central={"eps": 1.0, "delta": 1e-8}, **policy)


def test_memoized_reports_let_two_batches_be_differenced():
    """The attack the rule stops: window 1 holds A + {j}, window 2 holds A (values unchanged)."""
    rng = np.random.default_rng(1)
    grr = frequency_oracle("grr", epsilon=2.0, d=8)
    values = rng.integers(0, 8, size=2001)
    memo = np.asarray(grr.randomize(values, rng)["y"])   # each user's memoized report
    j = 2000
    batch1 = rng.permutation(memo)                          # A + {j}, shuffled
    batch2 = rng.permutation(memo[:j])                      # A again, the same memoized reports
    diff = Counter(batch1.tolist()) - Counter(batch2.tolist())
    assert diff == Counter([int(memo[j])])                  # j's report, exactly
    # with fresh randomness the second batch carries new noise and the difference is no report
    fresh = np.asarray(grr.randomize(values[:j], rng)["y"])
    assert sum((Counter(batch1.tolist()) - Counter(fresh.tolist())).values()) > 1


def test_default_policy_draws_fresh_reports_and_is_amplified():
    assert ClientPolicy().memoize is False
    cfg = _grr_task(None)
    assert not cfg.reports_repeat
    st, _ = cfg.batch_privacy(10 * cfg.min_batch_size)
    assert st.model == "shuffle" and st.eps < cfg.eps_local and st.delta > 0


@pytest.mark.parametrize("n_factor", [1, 10, 1000])
def test_memoized_task_claims_the_local_guarantee_only(n_factor):
    cfg = _grr_task(True)
    assert cfg.reports_repeat
    st, why = cfg.batch_privacy(n_factor * cfg.min_batch_size)
    assert (st.eps, st.delta, st.model) == (2.0, 0.0, "local")
    assert "differenced" in why


@pytest.mark.parametrize("name,params,repeat", [
    ("l_grr", {"d": 4, "epsilon_one": 0.2}, False),   # eps_irr < eps_perm: fresh-layer amplification
    ("loloha", {"d": 16, "epsilon_one": 0.5}, False),
    ("l_oue", {"d": 8, "epsilon_one": 0.5}, True),    # no bounded fresh layer
])
def test_longitudinal_tasks_amplify_only_through_a_fresh_layer(name, params, repeat):
    eps = 3.0
    cfg = _grr_task(False, {"kind": "frequency", "name": name, "epsilon": eps, "params": params})
    assert cfg.reports_repeat is repeat
    if not repeat:
        mech = cfg.mechanism_object()
        assert cfg.eps_local == pytest.approx(float(mech.epsilon_irr)) and cfg.eps_local < eps


def test_longitudinal_grr_whose_fresh_layer_is_weaker_than_its_permanent_answer_is_not_amplified():
    cfg = _grr_task(False, {"kind": "frequency", "name": "l_grr", "epsilon": 2.0,
                            "params": {"d": 4, "epsilon_one": 1.9}})
    assert cfg.eps_local == 2.0 and cfg.reports_repeat   # eps0 = eps_perm < eps_irr: not a fresh-layer bound
    st, _ = cfg.batch_privacy(10**6)
    assert (st.eps, st.delta, st.model) == (2.0, 0.0, "local")


@pytest.mark.parametrize("memoize", [False, True])
def test_protocol_task_with_memoized_messages_states_its_local_guarantee(memoize):
    spec = {"name": "cnt_rr", "epsilon": 1.0, "delta": 1e-6, "n": 5000, "params": {}}
    cfg = create_task_config(name="p", protocol=spec, client_policy={"max_reports_per_window": 1,
                                                                     "max_reports_per_day": 1, "memoize": memoize})
    p = cfg.protocol_object()
    st = protocol_statement(cfg, p, 5000, 0)
    if memoize:
        assert (st.eps, st.delta, st.model) == (float(p.local_randomizer.epsilon), 0.0, "local")
        assert "differenced" in st.note
    else:
        want = p.privacy(5000)
        assert (st.eps, st.delta, st.model) == (want.eps, want.delta, "shuffle")


def test_memoized_protocol_without_a_local_randomizer_states_no_guarantee():
    spec = {"name": "cnt_2m", "epsilon": 1.0, "delta": 1e-6, "n": 5000, "params": {}}
    cfg = create_task_config(name="p", protocol=spec, client_policy={"max_reports_per_window": 1,
                                                                     "max_reports_per_day": 1, "memoize": True})
    st = protocol_statement(cfg, cfg.protocol_object(), 5000, 0)
    assert math.isinf(st.eps)
