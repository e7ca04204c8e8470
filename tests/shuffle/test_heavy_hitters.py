"""Shuffled heavy hitters (hh_sfp, hh_pem, hh_treehist): calibration for the central target,
the local randomizer's exact ratio, permutation invariance and recovery."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from shuffledp.accounting.shuffle import shuffle_amplification
from shuffledp.core import ValidationError
from shuffledp.shuffle import protocol

NAMES = ["hh_sfp", "hh_pem", "hh_treehist"]
WORDS = np.array([""] + ["".join(w) for L in range(1, 5) for w in itertools.product("ab", repeat=L)])


@pytest.mark.parametrize("name", NAMES)
def test_calibration_meets_the_target_and_amplifies(name):
    for eps, n in [(0.5, 10**5), (1.0, 10**6), (2.0, 10**4)]:
        p = protocol(name, epsilon=eps, delta=1e-6, n=n, d=1 << 12, hash_seed=1)
        st = p.privacy()
        assert st.model == "shuffle" and st.eps <= eps and st.delta <= 1e-6
        local = p.local_randomizer.privacy().eps
        assert local <= p.eps_l * (1 + 1e-9)
        assert local > eps  # amplification buys a larger local epsilon at these n
        assert st.eps == shuffle_amplification(local, n, 1e-6, method="clones")


@pytest.mark.parametrize("name", NAMES)
def test_local_randomizer_exact_ratio_on_words(name):
    small = {"hh_sfp": {"fragment_k": 4, "fragment_m": 8, "word_k": 4, "word_m": 8, "word_domain": 64},
             "hh_pem": {"k": 2, "eta": 2, "max_domain": 16}, "hh_treehist": {"max_domain": 16}}[name]
    p = protocol(name, epsilon=0.5, delta=1e-6, n=20_000, alphabet="ab", max_length=4, hash_seed=3, **small)
    mech = p.local_randomizer
    rng = np.random.default_rng(2)
    reports = p.encode(np.repeat(WORDS, 30), rng)
    logs = np.stack([mech.log_probabilities(reports, x) for x in WORDS])
    assert np.all(np.isfinite(logs))
    assert float(np.max(logs.max(axis=0) - logs.min(axis=0))) <= mech.privacy().eps + 1e-9


@pytest.mark.parametrize("name", NAMES)
def test_shuffling_does_not_change_the_statistic(name):
    p = protocol(name, epsilon=1.0, delta=1e-6, n=5000, d=256, hash_seed=4)
    rng = np.random.default_rng(5)
    msgs = p.encode(rng.integers(0, 256, 5000), rng)
    perm = rng.permutation(5000)
    shuffled = {k: v[perm] for k, v in msgs.items()}
    np.testing.assert_array_equal(p.aggregate(msgs), p.aggregate(shuffled))
    est = p.estimate(p.aggregate(shuffled), 5000)
    assert est.privacy == p.privacy(5000) and est.kind == "count"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_planted_ids_recovered_at_central_eps_1(name):
    """5 planted ids hold 10% of the users each, the rest are spread over 2^16 ids (<= 0.1% each
    in expectation). At eps_c = 1, n = 10^5 the local epsilon is about 7: a planted id's fraction
    exceeds any other by more than 8 standard deviations of the stages' estimates (checked)."""
    n = 100_000
    rng = np.random.default_rng(8)
    planted = np.array([5, 999, 4242, 31337, 65000])
    x = np.where(rng.random(n) < 0.5, planted[rng.integers(0, 5, n)], rng.integers(0, 1 << 16, n))
    p = protocol(name, epsilon=1.0, delta=1e-6, n=n, d=1 << 16, k=5, hash_seed=9)
    mech = p.local_randomizer
    if name == "hh_sfp":
        sd = np.sqrt(mech.fragment_sketch.variance(n // mech.positions, 0.5, sum_sq=0.25))
    else:
        sd = max(np.sqrt(o.variance(n // mech.levels.G, 0.5)) for o in mech.levels.oracles)
    assert 0.1 - 0.02 >= 8 * sd, sd
    est = p.estimate(p.aggregate(p.encode(x, rng)), n)
    assert set(est.labels[:5]) == set(planted.tolist())
    truth = {int(v): int(c) for v, c in zip(*np.unique(x, return_counts=True))}
    for label, v, s in zip(est.labels[:5], est.values[:5], est.stderr[:5]):
        assert abs(v - truth[label]) <= 5 * s


def test_errors():
    with pytest.raises(ValidationError, match="delta"):
        protocol("hh_pem", epsilon=1.0, delta=0.0, n=1000)
    p = protocol("hh_pem", epsilon=1.0, delta=1e-6, n=1000, d=100, hash_seed=1)
    with pytest.raises(ValidationError, match="values"):
        p.encode(np.array([100]), 0)
    with pytest.raises(ValidationError, match="fragment_share"):
        protocol("hh_sfp", epsilon=1.0, delta=1e-6, n=1000, fragment_share=1.0)
    w = protocol("hh_treehist", epsilon=1.0, delta=1e-6, n=1000, alphabet="ab", max_length=4, hash_seed=1)
    assert w.example_values(2).tolist() == ["", ""]
    with pytest.raises(ValidationError, match="values"):
        w.encode(np.array(["abc", "zz"]), 0)


@pytest.mark.parametrize("name", NAMES)
def test_public_hash_seed_is_pinned_for_the_analyzer(name):
    """An analyzer rebuilding the protocol must get the same public hashes: the archive writes the
    drawn seed out and a service task draws one seed for all."""
    from shuffledp.engines.archive import _pin_public_randomness
    from shuffledp.service.config import _with_drawn_protocol_hash_seed

    p = protocol(name, epsilon=1.0, delta=1e-6, n=3000, d=64)
    pinned = _pin_public_randomness(name, p, {"d": 64})
    assert pinned["hash_seed"] == p.hash_seed
    again = protocol(name, epsilon=1.0, delta=1e-6, n=3000, **pinned)
    rng = np.random.default_rng(1)
    stat = p.aggregate(p.encode(rng.integers(0, 64, 3000), rng))
    a, b = p.estimate(stat, 3000), again.estimate(stat, 3000)
    assert a.labels == b.labels and np.array_equal(a.values, b.values)
    spec = _with_drawn_protocol_hash_seed({"name": name, "params": {"d": 64}})
    assert isinstance(spec["params"]["hash_seed"], int)
    assert _with_drawn_protocol_hash_seed({"name": name, "params": {"hash_seed": 5}})["params"]["hash_seed"] == 5
