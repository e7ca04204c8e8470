"""DP random drop (exact enumeration of the released count) and the analyzer's central mode."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shuffledp.core.errors import ValidationError
from shuffledp.service.config import create_task_config
from shuffledp.service.drop import drop_offset, released_count_pmf

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("eps,delta,expected_d", [(0.5, 1e-9, 42), (1.0, 1e-6, 14)])
def test_released_count_is_eps_delta_dp_by_enumeration(eps, delta, expected_d):
    D = drop_offset(eps, delta)
    assert D == expected_d
    bound = math.exp(-eps * D)
    assert bound <= delta
    worst = 0.0
    for c in (0, 1, 5, D - 1, D, D + 1, 3 * D, 200):
        p, q = released_count_pmf(c, eps, D), released_count_pmf(c + 1, eps, D)
        p = np.append(p, 0.0)   # same support 0..c+1
        for a, b in ((p, q), (q, p)):
            hs = float(np.maximum(a - math.exp(eps) * b, 0.0).sum())   # hockey-stick divergence
            worst = max(worst, hs)
            assert hs <= bound * (1 + 1e-9), (c, hs, bound)
    assert worst > bound / 10   # the bound is nearly tight (the test can fail)


def test_drop_noise_and_central_mode_validation():
    grr = {"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 4}}
    with pytest.raises(ValidationError) as e:
        create_task_config(name="x", mechanism=grr, target_central={"eps": 1, "delta": 1e-8},
                           drop_noise={"eps": 0, "delta": 1e-9})
    assert e.value.parameter == "drop_noise"
    with pytest.raises(ValidationError) as e:
        create_task_config(name="x", mechanism=grr, target_central={"eps": 1, "delta": 1e-8},
                           central_mode={"eps_per_query": 1, "query_budget_eps": 2})
    assert e.value.parameter == "central_mode"




@pytest.mark.slow
def test_drop_noise_and_central_mode_end_to_end(tmp_path):
    from shuffledp.service.harness import Deployment

    from .conftest import counts_from_estimate, sealed, send
    with Deployment(tmp_path, tick_seconds=3600) as dep:
        # shuffler drops D + Z reports before thresholding; all others are aggregated exactly once
        t = dep.create_task({"name": "drop", "mechanism": {"kind": "test", "name": "test_identity",
                                                           "params": {"d": 400}},
                             "target_central": {"eps": 1, "delta": 1e-6}, "min_batch_size_floor": 50,
                             "drop_noise": {"eps": 1.0, "delta": 1e-6}})
        _, _, _, envs = sealed(dep, t["task_id"], np.arange(400))
        send(dep, t["task_id"], envs)
        dep.tick()
        assert dep.tick()["batches_formed"] == 0   # one evaluation per window
        cnt = dep.counters(t["task_id"])
        c = counts_from_estimate(dep.estimates(t["task_id"]).json())
        assert c.max() == 1 and c.sum() == cnt["released"] == 400 - cnt.get("dropped_noise", 0)
        assert 0 <= cnt.get("dropped_noise", 0) <= 60
        # central mode: noisy counts, budget of 2.5 queries at eps 1
        t = dep.create_task({"name": "central", "mechanism": {"kind": "central", "name": "histogram",
                                                              "params": {"d": 5}},
                             "target_central": {"eps": 1, "delta": 1e-6}, "min_batch_size_floor": 50,
                             "central_mode": {"eps_per_query": 1.0, "query_budget_eps": 2.5}})
        x = np.repeat(np.arange(5), [100, 50, 30, 20, 0])
        _, _, _, envs = sealed(dep, t["task_id"], x)
        send(dep, t["task_id"], envs)
        dep.tick()
        r1, r2, r3 = (dep.estimates(t["task_id"]) for _ in range(3))
        assert r1.status_code == r2.status_code == 200
        assert r3.status_code == 403 and r3.json()["type"] == "urn:shuffledp:error:budgetExhausted"
        for r in (r1, r2):
            j = r.json()
            assert j["privacy_statement"]["model"] == "central" and j["privacy_statement"]["eps"] == 1.0
            assert np.all(np.abs(np.asarray(j["noisy_counts"]) - [100, 50, 30, 20, 0]) < 40)
        assert r1.json()["budget"]["spent"] == 1.0 and r2.json()["budget"]["spent"] == 2.0
