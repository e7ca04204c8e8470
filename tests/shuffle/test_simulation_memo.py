"""The sum protocols' simulations keep their fixed parts per summary, and only per summary.

``summarize`` returns a read-only array; ``simulate_statistic`` computes the validation and the
deterministic rounding parts once for it (``shuffle._common.simulation_parts``). The releases
must be exactly those of a recomputation, and an array that can change (a caller's writable
array) must never be served from the memo.
"""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.shuffle.registry import protocol

N = 20_000
BUILD = {"rsum_rr": {"precision": 10}, "rsum_kr": {"precision": 10}, "rsum_rm": {"messages": 2},
         "rsum_dsg": {"precision": 10}, "ldp_harmony": {}}


def build(name):
    return protocol(name, epsilon=0.9, delta=1e-6, n=N, **BUILD[name])


@pytest.mark.parametrize("name", sorted(BUILD))
def test_memoized_releases_equal_recomputed_ones(name):
    x = np.random.default_rng(3).random(N)
    p = build(name)
    data = p.summarize(x)
    assert not data.flags.writeable
    fresh = build(name).summarize(x)  # same values, another array: recomputed on its first call
    a = [p.simulate_statistic(data, np.random.default_rng(k)).tolist() for k in range(4)]
    b = [build(name).simulate_statistic(np.array(fresh), np.random.default_rng(k)).tolist() for k in range(4)]
    assert a == b
    assert len({tuple(v) for v in a}) > 1  # the releases are random, not one value repeated


@pytest.mark.parametrize("name", ["rsum_rr", "rsum_kr", "rsum_rm", "ldp_harmony"])
def test_a_writable_array_is_never_served_from_the_memo(name):
    rng = np.random.default_rng(4)
    x = rng.random(N)
    p = build(name)
    data = np.array(p.summarize(x))  # writable copy
    p.simulate_statistic(data, np.random.default_rng(0))
    data[:] = 0.0 if name != "ldp_harmony" else 0.5 * data  # change the values in place
    got = p.simulate_statistic(data, np.random.default_rng(1))
    want = build(name).simulate_statistic(np.array(data), np.random.default_rng(1))
    assert got.tolist() == want.tolist()
