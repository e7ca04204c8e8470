"""Distributed geometric noise (Pólya shares) and split-and-mix."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.central import (
    DistributedGeometricMechanism,
    SplitAndMix,
    discrete_laplace_pmf,
    split_and_mix_delta,
    split_and_mix_messages,
    split_and_mix_security_bits,
)
from shuffledp.core import ValidationError
from tests.central._stats import binned_chi2_pvalue, variance_z
from tests.conftest import mean_z_bound


# ---------------------------------------------------------------- Pólya sum = discrete Laplace

@pytest.mark.parametrize("eps,parties,sens", [(1.0, 10, 1), (0.3, 50, 2)])
def test_polya_sum_is_discrete_laplace_simulation(eps, parties, sens, rng):
    m = DistributedGeometricMechanism(eps, parties, sens)
    R = 100_000
    noise = m.simulate_shares((R, parties), rng).sum(axis=1)
    support = np.arange(-400, 401)
    assert binned_chi2_pvalue(noise, support, discrete_laplace_pmf(support, sens / eps)) > 1e-3
    # moments: the sum's variance is the discrete Laplace's; one share's is 2 r a/(1 - a)^2
    z, width = variance_z(noise, m.variance())
    assert abs(z) < mean_z_bound() and width < 0.1
    assert abs(noise.mean()) / math.sqrt(m.variance() / R) < mean_z_bound()
    one = m.simulate_shares(4 * R, rng)  # a single share is very heavy-tailed: more draws
    z, width = variance_z(one, m.share_variance)
    assert abs(z) < mean_z_bound() and width < 0.1


def test_polya_sum_is_discrete_laplace_production():
    """The exact (OS) Pólya shares of 8 parties sum to the discrete Laplace."""
    m = DistributedGeometricMechanism(1.0, 8)
    sums = np.array([sum(m.share() for _ in range(8)) for _ in range(3000)])
    support = np.arange(-30, 31)
    assert binned_chi2_pvalue(sums, support, discrete_laplace_pmf(support, 1.0)) > 1e-6


def test_release_runs_the_protocol():
    m = DistributedGeometricMechanism(2.0, 5)
    x = np.array([1, 0, 1, 1, 0])
    out = m.release(x)
    assert isinstance(out, int) and abs(out - 3) < 40  # P(|SG| >= 40) ~ e^-80
    with pytest.raises(ValidationError, match="one value per party"):
        m.release(np.array([1, 0]))
    with pytest.raises(ValidationError, match="does not accept"):
        m.share(seed=1)
    sims = m.simulate(np.tile(x, (1000, 1)), np.random.default_rng(3))
    assert sims.shape == (1000,)


def test_robust_variant():
    m = DistributedGeometricMechanism(1.0, 100, honest_fraction=0.5)
    assert m.shape == Fraction(1, 50)
    assert m.privacy().gamma == 0.5
    assert m.variance() == pytest.approx(2 * DistributedGeometricMechanism(1.0, 100).variance())
    with pytest.raises(ValidationError, match="honest_fraction"):
        DistributedGeometricMechanism(1.0, 3, honest_fraction=0.2)


@pytest.mark.parametrize("kwargs,param", [({"epsilon": 0, "parties": 3}, "epsilon"),
                                          ({"epsilon": 1.0, "parties": 0}, "parties"),
                                          ({"epsilon": 1.0, "parties": 3, "sensitivity": 0}, "sensitivity"),
                                          ({"epsilon": 1.0, "parties": 3, "honest_fraction": 0.0}, "honest_fraction")])
def test_distributed_bad_parameters(kwargs, param):
    with pytest.raises(ValidationError) as e:
        DistributedGeometricMechanism(**kwargs)
    assert e.value.parameter == param


# ---------------------------------------------------------------- split-and-mix --------------

@settings(max_examples=200, deadline=None)
@given(q=st.integers(2, 2**62), m=st.integers(1, 12),
       values=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30))
def test_split_and_mix_round_trip(q, m, values):
    sm = SplitAndMix(q, m)
    x = np.array(values, dtype=np.int64)
    for shares in (sm.encode(x), sm.simulate_encode(x, np.random.default_rng(len(values)))):
        assert shares.shape == (len(values), m)
        assert shares.min() >= 0 and shares.max() < q
        # each party's shares sum to its value mod q, and all shares to the total mod q
        assert [sum(int(s) for s in row) % q for row in shares] == [v % q for v in values]
        assert sm.aggregate(shares) == sum(values) % q
        # the shuffled multiset gives the same total (order does not matter)
        flat = shares.reshape(-1)
        assert sm.aggregate(np.random.default_rng(0).permutation(flat)) == sum(values) % q


@settings(max_examples=100, deadline=None)
@given(total=st.integers(-(2**20), 2**20 - 1))
def test_decode_signed(total):
    sm = SplitAndMix(2**21, 3)
    assert sm.decode_signed(total % sm.modulus) == total


def test_split_and_mix_merge_and_large_sum():
    q = 2**62 - 57
    sm = SplitAndMix(q, 4)
    x = np.full(50_000, 2**40, dtype=np.int64)
    shares = sm.encode(x)
    a, b = sm.aggregate(shares[:20_000]), sm.aggregate(shares[20_000:])
    assert sm.merge(a, b) == sm.aggregate(shares) == (50_000 * 2**40) % q


def test_split_and_mix_shares_are_uniform():
    """Each non-final share is uniform on Z_q and independent of the input (production source)."""
    sm = SplitAndMix(7, 3)
    shares = sm.encode(np.full(20_000, 5))
    for col in range(3):  # the last share is uniform too: a uniform minus a fixed value
        assert binned_chi2_pvalue(shares[:, col], np.arange(7), np.full(7, 1 / 7)) > 1e-6


def test_split_and_mix_parameters():
    assert split_and_mix_messages(10_000, 32, 40) == 11
    assert split_and_mix_messages(10_000, 45.29, 40) == 12
    assert split_and_mix_messages(10_000, 21, 22) == 7
    assert split_and_mix_messages(10**6, 40, 40) == 8
    assert split_and_mix_messages(1000, 20, 30) == 11
    assert split_and_mix_messages(10**9, 8, 1) == 3  # at least 3
    assert SplitAndMix.for_parties(10_000, 2**21, 22).messages == 7
    sigma = split_and_mix_security_bits(1.0, 1e-6)
    assert sigma == 22 and split_and_mix_delta(1.0, sigma) <= 1e-6 < split_and_mix_delta(1.0, sigma - 1)


def test_split_and_mix_validation():
    with pytest.raises(ValidationError, match="modulus"):
        SplitAndMix(1, 3)
    with pytest.raises(ValidationError, match="modulus"):
        SplitAndMix(2**63, 3)
    with pytest.raises(ValidationError, match="messages"):
        SplitAndMix(7, 0)
    sm = SplitAndMix(7, 3)
    with pytest.raises(ValidationError, match="integers"):
        sm.encode(np.array([0.5]))
    with pytest.raises(ValidationError, match=r"\[0, 7\)"):
        sm.aggregate(np.array([3, 7]))
    with pytest.raises(ValidationError, match="does not accept"):
        sm.encode(np.array([1]), rng=np.random.default_rng(0))
